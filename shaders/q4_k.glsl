// GGUF Q4_K decode: super-block of 256 = f16 d, f16 dmin, u8 scales[12], u8 qs[128]
// (144 bytes = 72 u16). A unit is one 32-value sub-block j (0..7): value i is
// d*sc_j*q_i - dmin*m_j with q from the low (j even) or high (j odd) nibbles of qs[32*(j/2) ..].
// Q5_K (q5_k.glsl) is this decode with a 5th bit per value from its qh[32] before qs: q5_k.glsl
// sets the layout (HK_KQ_U16, HK_KQ_QS) and HK_KQ_QH before it includes this file, so both types
// share one body (scales, dots, sums) and differ only where the quants are read.
#ifndef HK_KQ_U16
#define HK_KQ_U16 72u // u16 per super-block
#define HK_KQ_QS 16u  // byte offset of qs in the block
#endif
#define HK_KQ_W128 (HK_KQ_U16 / 8u) // 16-byte words per super-block
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

// The 5th bit (Q5_K) of value 32j + l, l = 2i and 2i + 1 of the block at u16 b, as 16 in byte 0
// and byte 1: bit j of qh[l] (qh at byte 16). Q4_K: 0.
uint hk_kq_high16(uint b, uint i, uint j)
{
#ifdef HK_KQ_QH
    return ((uint(w16[b + 8u + i]) >> j) & 0x0101u) << 4;
#else
    return 0u;
#endif
}

// HK_Q4_K_DECODE_ONLY: the layout, hk_q4k_scale_min and hk_kq_high16 only, for a kernel that
// dequantizes values without an x (get_rows.comp)
#ifndef HK_Q4_K_DECODE_ONLY
float hk_unit_dot(uint row16, uint u, uint xi)
{
    uint b = row16 + (u >> 3) * HK_KQ_U16;
    uint j = u & 7u;
    uint sc, m;
    hk_q4k_scale_min(b, j, sc, m);
    uint q16 = b + HK_KQ_QS / 2u + 16u * (j >> 1);
    uint shift = (j & 1u) * 4u;
    float qx = 0.0, xs = 0.0;
    for (uint i = 0; i < 16; i++) {
        uint w = ((uint(w16[q16 + i]) >> shift) & 0x0F0Fu) | hk_kq_high16(b, i, j);
        float x0 = hk_x(xi + 2 * i), x1 = hk_x(xi + 2 * i + 1);
        qx += float(w & 0xFFu) * x0 + float(w >> 8) * x1;
        xs += x0 + x1;
    }
    return hk_half(uint(w16[b])) * float(sc) * qx - hk_half(uint(w16[b + 1])) * float(m) * xs;
}

uint hk_row_u16(uint k) { return (k / 256u) * HK_KQ_U16; }

// Subgroup rows: a work item is one 32-byte chunk c of qs (4 items per super-block): item =
// 4*sb + c covers the 32 low nibbles of sub-block 2c and the 32 high nibbles of sub-block 2c+1,
// read as two 16-byte words (Q5_K: and the 32 bytes of qh, bits 2c and 2c+1 of each). Needs
// 16-byte aligned weights (144 = 9 x 16, Q5_K 176 = 11 x 16).
uint hk_items(uint k) { return k / 64u; }

// Scales and mins of sub-blocks 2c and 2c+1 from the scale bytes in head.yzw, unpacked as in
// llama.cpp's vec_dot_q4_K: 16-bit words s16[i] = bytes 2i, 2i+1, selects rather than indexing
// (a dynamically indexed vector can land in local memory). sc: byte 0 the scale of 2c, byte 1
// that of 2c+1; m: the mins alike.
void hk_q4k_scale_words(uvec4 head, uint c, out uint sc, out uint m)
{
    uint lo = (c & 1u) * 16u;
    uint s_c = (c < 2u ? head.y : head.z) >> lo;  // s16[c]
    uint s_c2 = (c < 2u ? head.z : head.w) >> lo; // s16[c + 2]
    uint s_cm2 = head.y >> lo;                    // s16[c - 2], for c >= 2
    sc = c < 2u ? s_c & 0x3F3Fu : (s_c2 & 0x0F0Fu) | ((s_cm2 & 0xC0C0u) >> 2);
    m = c < 2u ? s_c2 & 0x3F3Fu : ((s_c2 >> 4) & 0x0F0Fu) | ((s_c & 0xC0C0u) >> 2);
}

void hk_q4k_scales(uvec4 head, uint c, out vec2 sc, out vec2 m)
{
    uint a, b;
    hk_q4k_scale_words(head, c, a, b);
    sc = vec2(float(a & 0xFFu), float((a >> 8) & 0xFFu));
    m = vec2(float(b & 0xFFu), float((b >> 8) & 0xFFu));
}

// The quants of chunk c one byte each, from its two 16-byte words of qs (q0, q1) and the two of
// qh (h0, h1; Q4_K: unused): lo0, lo1 sub-block 2c's values 0..15, 16..31, hi0, hi1 2c+1's.
void hk_kq_quants(uvec4 q0, uvec4 q1, uvec4 h0, uvec4 h1, uint c, out uvec4 lo0, out uvec4 lo1, out uvec4 hi0,
                  out uvec4 hi1)
{
    lo0 = q0 & 0x0F0F0F0Fu;
    lo1 = q1 & 0x0F0F0F0Fu;
    hi0 = (q0 >> 4) & 0x0F0F0F0Fu;
    hi1 = (q1 >> 4) & 0x0F0F0F0Fu;
#ifdef HK_KQ_QH
    uint s = 2u * c;
    lo0 |= ((h0 >> s) & 0x01010101u) << 4;
    lo1 |= ((h1 >> s) & 0x01010101u) << 4;
    hi0 |= ((h0 >> (s + 1u)) & 0x01010101u) << 4;
    hi1 |= ((h1 >> (s + 1u)) & 0x01010101u) << 4;
#endif
}

// The two 16-byte words of qh of the block at 16-byte word b (Q4_K: zeros, read nowhere)
void hk_kq_qh(uint b, out uvec4 h0, out uvec4 h1)
{
#ifdef HK_KQ_QH
    h0 = w128[b + 1u];
    h1 = w128[b + 2u];
#else
    h0 = uvec4(0u);
    h1 = uvec4(0u);
#endif
}

// The 64 quants of chunk c (one byte each, as hk_kq_quants), d and dmin, and the scales and mins
// of sub-blocks 2c and 2c+1 of the block at 16-byte word b.
void hk_q4k_chunk(uint b, uint c, out uvec4 lo0, out uvec4 lo1, out uvec4 hi0, out uvec4 hi1, out vec2 dm,
                  out vec2 sc, out vec2 m)
{
    uvec4 head = w128[b], h0, h1;
    hk_kq_qh(b, h0, h1);
    uint q = b + HK_KQ_QS / 16u + 2u * c;
    hk_kq_quants(w128[q], w128[q + 1u], h0, h1, c, lo0, lo1, hi0, hi1);
    dm = unpackHalf2x16(head.x);
    hk_q4k_scales(head, c, sc, m);
}

#ifdef HK_INT8
// The first Q8_1 block that item it reads (4 items of 2 blocks per super-block)
uint hk_item_block(uint it) { return 2u * it; }

// Per sub-block j: d*sc_j * dx_j*sum(q*xq) - dmin*m_j * dx_j*sum(xq), the contraction of the
// dequantized values. sum(xq) is summed here from the quants (packed dots with 0x01010101), once
// per item and token for all rows: the Q8_1 block's s field is never read (another producer may
// round it differently, and an f16 s overflows for blocks the f16 d still holds).
// hk_load issues a row's three 16-byte loads (Q5_K five: qh's two more; slot c * HK_NROWS + r: the
// c-th of the HK_NITEMS items in flight, row r) and nothing that waits for them, so that they fly
// while x is staged. hk_compute unpacks them (quants as bytes, d*sc and dmin*m) and meets them
// with each token's activation: per (row, token) 16 packed dots, two exact int->float turns
// (hk_biased_float) and 2 multiplies + 4 fma into the row's sum, the same operations whatever
// HK_NTOK (a precise sum: matvec.comp).
uvec4 hk_head[HK_NSLOTS], hk_q0[HK_NSLOTS], hk_q1[HK_NSLOTS];
#ifdef HK_KQ_QH
uvec4 hk_h0[HK_NSLOTS], hk_h1[HK_NSLOTS];
#endif

// bytes 0 and 1 of w as floats (exact: hk_u8x4_to_vec4)
vec2 hk_u8x2(uint w) { return uintBitsToFloat((uvec2(w, w >> 8) & 0xFFu) | 0x4B000000u) - 8388608.0; }

void hk_load(uint it, uint c)
{
    uint sb = it >> 2, ch = it & 3u;
    [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
        uint i = c * HK_NROWS + r, b = row_byte[r] / 16u + sb * HK_KQ_W128, q = b + HK_KQ_QS / 16u + 2u * ch;
        hk_head[i] = hk_w128(r, b);
#ifdef HK_KQ_QH
        hk_h0[i] = hk_w128(r, b + 1u);
        hk_h1[i] = hk_w128(r, b + 2u);
#endif
        hk_q0[i] = hk_w128(r, q);
        hk_q1[i] = hk_w128(r, q + 1u);
    }
}

// Staged x carries each block's dx * sum(xq) (hk_stage_x): the same product of the same values as
// hk_compute's own (exact integer sum, one f32 rounding), so the same bits.
const bool HK_XSUMS = true;
uint hk_xsum(uvec4 h0, uvec4 h1, float d)
{
    const uvec4 ones = uvec4(0x01010101u);
    precise float s = d * hk_biased_float(hk_dot16(ones, h1, hk_dot16(ones, h0, HK_I2F_BIAS)));
    return floatBitsToUint(s);
}

void hk_compute(uint it, uint c)
{
    uint ch = it & 3u, b0 = hk_item_block(it); // Q8_1 blocks of sub-blocks 2ch, 2ch+1: b0, b0 + 1
    uvec4 lo0[HK_NROWS], lo1[HK_NROWS], hi0[HK_NROWS], hi1[HK_NROWS];
    vec2 dsc[HK_NROWS], dmm[HK_NROWS];
    [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
        uint i = c * HK_NROWS + r, sc, m;
        hk_q4k_scale_words(hk_head[i], ch, sc, m);
        vec2 dm = unpackHalf2x16(hk_head[i].x);
        precise vec2 d_sc = dm.x * hk_u8x2(sc), d_m = dm.y * hk_u8x2(m);
        dsc[r] = d_sc;
        dmm[r] = d_m;
#ifdef HK_KQ_QH
        hk_kq_quants(hk_q0[i], hk_q1[i], hk_h0[i], hk_h1[i], ch, lo0[r], lo1[r], hi0[r], hi1[r]);
#else
        hk_kq_quants(hk_q0[i], hk_q1[i], uvec4(0u), uvec4(0u), ch, lo0[r], lo1[r], hi0[r], hi1[r]);
#endif
    }
    const uvec4 ones = uvec4(0x01010101u);
    [[unroll]] for (uint t = 0; t < HK_NTOK; t++) {
        uvec4 xa0 = hk_x16(t, b0, 0u), xa1 = hk_x16(t, b0, 1u), xb0 = hk_x16(t, b0 + 1u, 0u), xb1 = hk_x16(t, b0 + 1u, 1u);
        // dx * sum(xq) of the two blocks: staged, summed once when they were staged (hk_xsum)
        vec2 dx;
        precise vec2 xs;
        if (HK_XSTAGE_BLOCKS > 0u) {
            uvec4 aux = hk_xaux(t, b0);
            dx = uintBitsToFloat(aux.xy);
            xs = uintBitsToFloat(aux.zw);
        } else {
            dx = hk_xd2(t, b0);
            xs = dx * vec2(hk_biased_float(hk_dot16(ones, xa1, hk_dot16(ones, xa0, HK_I2F_BIAS))),
                           hk_biased_float(hk_dot16(ones, xb1, hk_dot16(ones, xb0, HK_I2F_BIAS))));
        }
        [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
            int dl = hk_dot16(lo1[r], xa1, hk_dot16(lo0[r], xa0, HK_I2F_BIAS));
            int dh = hk_dot16(hi1[r], xb1, hk_dot16(hi0[r], xb0, HK_I2F_BIAS));
            precise float sum = acc[r * HK_NTOK + t];
            sum = fma(dsc[r].x * dx.x, hk_biased_float(dl), sum);
            sum = fma(dsc[r].y * dx.y, hk_biased_float(dh), sum);
            sum = fma(-dmm[r].x, xs.x, sum);
            sum = fma(-dmm[r].y, xs.y, sum);
            acc[r * HK_NTOK + t] = sum;
        }
    }
}
#else
void hk_item(uint it)
{
    uint sb = it >> 2, c = it & 3u;
    uint x4i = x_base / 4u + sb * 64u + c * 16u;
    vec4 xl[8], xh[8];
    float xsl = 0.0, xsh = 0.0;
    for (uint i = 0; i < 8; i++) {
        xl[i] = x4[x4i + i];
        xh[i] = x4[x4i + 8u + i];
        xsl += xl[i].x + xl[i].y + xl[i].z + xl[i].w;
        xsh += xh[i].x + xh[i].y + xh[i].z + xh[i].w;
    }
    for (uint r = 0; r < HK_NROWS; r++) {
        uvec4 lo0, lo1, hi0, hi1;
        vec2 dm, sc, m;
        hk_q4k_chunk(row_byte[r] / 16u + sb * HK_KQ_W128, c, lo0, lo1, hi0, hi1, dm, sc, m);
        float ql = 0.0, qh = 0.0;
        for (uint i = 0; i < 4; i++) {
            ql += dot(hk_lanes(lo0[i], 0xFFu), xl[i]) + dot(hk_lanes(lo1[i], 0xFFu), xl[4u + i]);
            qh += dot(hk_lanes(hi0[i], 0xFFu), xh[i]) + dot(hk_lanes(hi1[i], 0xFFu), xh[4u + i]);
        }
        acc[r] += dm.x * (sc.x * ql + sc.y * qh) - dm.y * (m.x * xsl + m.y * xsh);
    }
}
#endif
#endif // HK_Q4_K_DECODE_ONLY
