// GGUF Q4_K decode: super-block of 256 = f16 d, f16 dmin, u8 scales[12], u8 qs[128]
// (144 bytes = 72 u16). A unit is one 32-value sub-block j (0..7): value i is
// d*sc_j*q_i - dmin*m_j with q from the low (j even) or high (j odd) nibbles of qs[32*(j/2) ..].
#define HK_Q4_K_U16 72u
#define HK_UNIT_VALUES 32u

#include "w16.glsl"

// 6-bit scale and min of sub-block j from the packed scales[12] at byte 4 of the block
void hk_q4k_scale_min(uint b, uint j, out uint sc, out uint m)
{
    if (j < 4u) {
        sc = hk_byte(b, 4u + j) & 63u;
        m = hk_byte(b, 4u + j + 4u) & 63u;
    } else {
        sc = (hk_byte(b, 4u + j + 4u) & 0xFu) | ((hk_byte(b, 4u + j - 4u) >> 6) << 4);
        m = (hk_byte(b, 4u + j + 4u) >> 4) | ((hk_byte(b, 4u + j) >> 6) << 4);
    }
}

float hk_unit_dot(uint row16, uint u, uint xi)
{
    uint b = row16 + (u >> 3) * HK_Q4_K_U16;
    uint j = u & 7u;
    uint sc, m;
    hk_q4k_scale_min(b, j, sc, m);
    uint q16 = b + 8u + 16u * (j >> 1);
    uint shift = (j & 1u) * 4u;
    float qx = 0.0, xs = 0.0;
    for (uint i = 0; i < 16; i++) {
        uint w = uint(w16[q16 + i]) >> shift;
        float x0 = hk_x(xi + 2 * i), x1 = hk_x(xi + 2 * i + 1);
        qx += float(w & 0xFu) * x0 + float((w >> 8) & 0xFu) * x1;
        xs += x0 + x1;
    }
    return hk_half(uint(w16[b])) * float(sc) * qx - hk_half(uint(w16[b + 1])) * float(m) * xs;
}

uint hk_row_u16(uint k) { return (k / 256u) * HK_Q4_K_U16; }

// Subgroup rows: a work item is one 16-byte quarter-chunk of qs (8 items per super-block):
// item = 8*sb + 2*c + h covers qs bytes [32c + 16h, +16): 16 low nibbles of sub-block 2c and
// 16 high nibbles of sub-block 2c+1. Needs 16-byte aligned weights (144 = 9 x 16).
uint hk_items(uint k) { return k / 32u; }

uint hk_scale_byte(uvec4 head, uint i) { return (head[1u + (i >> 2)] >> ((i & 3u) * 8u)) & 0xFFu; }

void hk_q4k_scale_min_head(uvec4 head, uint j, out float sc, out float m)
{
    if (j < 4u) {
        sc = float(hk_scale_byte(head, j) & 63u);
        m = float(hk_scale_byte(head, j + 4u) & 63u);
    } else {
        sc = float((hk_scale_byte(head, j + 4u) & 0xFu) | ((hk_scale_byte(head, j - 4u) >> 6) << 4));
        m = float((hk_scale_byte(head, j + 4u) >> 4) | ((hk_scale_byte(head, j) >> 6) << 4));
    }
}

#ifdef HK_INT8
// d*sc_j*dx*sum(q*xq) - dmin*m_j*s: the min term needs sum(x) over the sub-block, which Q8_1
// carries as s; the item with h = 0 adds it for the whole sub-block.
void hk_item(uint it)
{
    uint sb = it >> 3, c = (it >> 1) & 3u, h = it & 1u;
    uint b0 = x_base + (sb * 8u + 2u * c) * 9u, b1 = b0 + 9u; // Q8_1 blocks of sub-blocks 2c, 2c+1
    vec2 x0 = unpackHalf2x16(xq[b0]), x1 = unpackHalf2x16(xq[b1]);
    uvec4 xa = uvec4(xq[b0 + 1u + 4u * h], xq[b0 + 2u + 4u * h], xq[b0 + 3u + 4u * h], xq[b0 + 4u + 4u * h]);
    uvec4 xb = uvec4(xq[b1 + 1u + 4u * h], xq[b1 + 2u + 4u * h], xq[b1 + 3u + 4u * h], xq[b1 + 4u + 4u * h]);
    for (uint r = 0; r < HK_NROWS; r++) {
        uint b = row_byte[r] / 16u + sb * 9u;
        uvec4 head = w128[b];
        uvec4 q = w128[b + 1u + 2u * c + h];
        int dl = 0, dh = 0;
        for (uint i = 0; i < 4; i++) {
            dl += hk_dot4(q[i] & 0x0F0F0F0Fu, xa[i]);
            dh += hk_dot4((q[i] >> 4) & 0x0F0F0F0Fu, xb[i]);
        }
        vec2 dm = unpackHalf2x16(head.x);
        float sc0, m0, sc1, m1;
        hk_q4k_scale_min_head(head, 2u * c, sc0, m0);
        hk_q4k_scale_min_head(head, 2u * c + 1u, sc1, m1);
        float v = dm.x * (sc0 * x0.x * float(dl) + sc1 * x1.x * float(dh));
        if (h == 0u)
            v -= dm.y * (m0 * x0.y + m1 * x1.y);
        acc[r] += v;
    }
}
#else
void hk_item(uint it)
{
    uint sb = it >> 3, c = (it >> 1) & 3u, h = it & 1u;
    uint x4i = x_base / 4u + sb * 64u + c * 16u + h * 4u;
    vec4 xl[4], xh[4];
    float xsl = 0.0, xsh = 0.0;
    for (uint i = 0; i < 4; i++) {
        xl[i] = x4[x4i + i];
        xh[i] = x4[x4i + 8u + i];
        xsl += xl[i].x + xl[i].y + xl[i].z + xl[i].w;
        xsh += xh[i].x + xh[i].y + xh[i].z + xh[i].w;
    }
    for (uint r = 0; r < HK_NROWS; r++) {
        uint b = row_byte[r] / 16u + sb * 9u;
        uvec4 head = w128[b];
        uvec4 q = w128[b + 1u + 2u * c + h];
        float ql = 0.0, qh = 0.0;
        for (uint i = 0; i < 4; i++) {
            ql += dot(hk_lanes(q[i], 0xFu), xl[i]);
            qh += dot(hk_lanes(q[i] >> 4, 0xFu), xh[i]);
        }
        vec2 dm = unpackHalf2x16(head.x);
        float sc0, m0, sc1, m1;
        hk_q4k_scale_min_head(head, 2u * c, sc0, m0);
        hk_q4k_scale_min_head(head, 2u * c + 1u, sc1, m1);
        acc[r] += dm.x * (sc0 * ql + sc1 * qh) - dm.y * (m0 * xsl + m1 * xsh);
    }
}
#endif
