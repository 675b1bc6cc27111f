// GGUF Q6_K decode: super-block of 256 = u8 ql[128], u8 qh[64], i8 scales[16], f16 d
// (210 bytes = 105 u16). Value 128*n + 32*g + l (n: half, g: 0..3, l: 0..31) is
// d * scales[8n + 2g + l/16] * (q - 32), q = nibble of ql[64n + 32*(g&1) + l] (high nibble when
// g >= 2) | ((qh[32n + l] >> 2g) & 3) << 4. A unit is one such (n, g): 32 values.
#define HK_Q6_K_U16 105u
#define HK_UNIT_VALUES 32u

#include "w16.glsl"

float hk_unit_dot(uint row16, uint u, uint xi)
{
    uint b = row16 + (u >> 3) * HK_Q6_K_U16;
    uint n = (u & 7u) >> 2, g = u & 3u;
    uint ql = 64u * n + 32u * (g & 1u), qh = 128u + 32u * n;
    uint lshift = (g >> 1) * 4u, hshift = 2u * g;
    float acc[2] = float[2](0.0, 0.0);
    for (uint l = 0; l < 32; l++) {
        int q = int(((hk_byte(b, ql + l) >> lshift) & 0xFu) | (((hk_byte(b, qh + l) >> hshift) & 3u) << 4)) - 32;
        acc[l >> 4] += float(q) * hk_x(xi + l);
    }
    uint s = 192u + 8u * n + 2u * g;
    float sc0 = float(int(hk_byte(b, s) << 24) >> 24), sc1 = float(int(hk_byte(b, s + 1u) << 24) >> 24);
    return hk_half(uint(w16[b + 104u])) * (sc0 * acc[0] + sc1 * acc[1]);
}

uint hk_row_u16(uint k) { return (k / 256u) * HK_Q6_K_U16; }

// Subgroup rows: a work item is 4 consecutive l of one half n of a super-block, for all four g
// (16 values): item = 16*sb + 8*n + l/4. Reads ql[64n + l..+3], ql[64n + 32 + l..+3],
// qh[32n + l..+3] and the half's 8 scales as 16-bit words (blocks are only 2-byte aligned).
uint hk_items(uint k) { return k / 16u; }

uint hk_u32_at16(uint i16) { return uint(w16[i16]) | (uint(w16[i16 + 1u]) << 16); }

// signed scale byte `is` (0 or 1) of the 16-bit word at i16
float hk_scale_i8(uint i16, uint is) { return float(int(uint(w16[i16]) << (24u - 8u * is)) >> 24); }

#ifdef HK_INT8
// sum((q - 32) * xq) = dot(q, xq) - 32 * sum(xq), per group g of 4 values
void hk_item(uint it)
{
    uint sb = it >> 4, n = (it >> 3) & 1u, l = (it & 7u) * 4u;
    uint xw[4];
    float dx[4];
    int xs[4];
    for (uint g = 0; g < 4; g++) {
        uint xb = x_base + (sb * 8u + 4u * n + g) * 9u;
        dx[g] = unpackHalf2x16(xq[xb]).x;
        xw[g] = xq[xb + 1u + l / 4u];
        xs[g] = hk_dot4(0x01010101u, xw[g]);
    }
    uint is = l >> 4;
    for (uint r = 0; r < HK_NROWS; r++) {
        uint b = row_byte[r] / 2u + sb * HK_Q6_K_U16;
        uint qla = hk_u32_at16(b + 32u * n + l / 2u);
        uint qlb = hk_u32_at16(b + 32u * n + 16u + l / 2u);
        uint qh = hk_u32_at16(b + 64u + 16u * n + l / 2u);
        uint q0 = (qla & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4);
        uint q1 = (qlb & 0x0F0F0F0Fu) | (((qh >> 2) & 0x03030303u) << 4);
        uint q2 = ((qla >> 4) & 0x0F0F0F0Fu) | (((qh >> 4) & 0x03030303u) << 4);
        uint q3 = ((qlb >> 4) & 0x0F0F0F0Fu) | (((qh >> 6) & 0x03030303u) << 4);
        uint s = b + 96u + 4u * n;
        float sum = hk_scale_i8(s, is) * dx[0] * float(hk_dot4(q0, xw[0]) - 32 * xs[0]) +
                    hk_scale_i8(s + 1u, is) * dx[1] * float(hk_dot4(q1, xw[1]) - 32 * xs[1]) +
                    hk_scale_i8(s + 2u, is) * dx[2] * float(hk_dot4(q2, xw[2]) - 32 * xs[2]) +
                    hk_scale_i8(s + 3u, is) * dx[3] * float(hk_dot4(q3, xw[3]) - 32 * xs[3]);
        acc[r] += hk_half(uint(w16[b + 104u])) * sum;
    }
}
#else
void hk_item(uint it)
{
    uint sb = it >> 4, n = (it >> 3) & 1u, l = (it & 7u) * 4u;
    uint x4i = x_base / 4u + sb * 64u + n * 32u + l / 4u;
    vec4 xg[4];
    for (uint g = 0; g < 4; g++)
        xg[g] = x4[x4i + g * 8u];
    uint is = l >> 4; // scales[8n + 2g + l/16]: byte `is` of 16-bit word 96 + 4n + g
    for (uint r = 0; r < HK_NROWS; r++) {
        uint b = row_byte[r] / 2u + sb * HK_Q6_K_U16;
        uint qla = hk_u32_at16(b + 32u * n + l / 2u);
        uint qlb = hk_u32_at16(b + 32u * n + 16u + l / 2u);
        uint qh = hk_u32_at16(b + 64u + 16u * n + l / 2u);
        vec4 q0 = hk_lanes((qla & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4), 0xFFu) - 32.0;
        vec4 q1 = hk_lanes((qlb & 0x0F0F0F0Fu) | (((qh >> 2) & 0x03030303u) << 4), 0xFFu) - 32.0;
        vec4 q2 = hk_lanes(((qla >> 4) & 0x0F0F0F0Fu) | (((qh >> 4) & 0x03030303u) << 4), 0xFFu) - 32.0;
        vec4 q3 = hk_lanes(((qlb >> 4) & 0x0F0F0F0Fu) | (((qh >> 6) & 0x03030303u) << 4), 0xFFu) - 32.0;
        uint s = b + 96u + 4u * n;
        float sum = hk_scale_i8(s, is) * dot(q0, xg[0]) + hk_scale_i8(s + 1u, is) * dot(q1, xg[1]) +
                    hk_scale_i8(s + 2u, is) * dot(q2, xg[2]) + hk_scale_i8(s + 3u, is) * dot(q3, xg[3]);
        acc[r] += hk_half(uint(w16[b + 104u])) * sum;
    }
}
#endif
