#version 450
#extension GL_GOOGLE_include_directive : require
// Embedding lookup (hk_get_rows): y[i, :] = row ids[i] of W [rows, k], dequantized to f32; an id >=
// rows writes zeros and reads no weight. One invocation per output value, consecutive invocations on
// consecutive values of a row (coalesced stores; a block's bytes are shared through the cache). A
// variant per weight type: HK_F32, HK_F16, HK_Q8_0, HK_Q4_K, HK_Q5_K, HK_Q6_K. Each value is what
// hk_dequant_row_* (src/ref/formats.c) computes, bit for bit: f16 fields converted in integers
// (hk_f16_to_f32_bits), the Q8_0 and Q6_K products exact in f32 (at most 11 + 8 + 6 significant
// bits) in any order, Q4_K's and Q5_K's (d*sc)*q and dmin*m exact (at most 11 + 6 + 5 bits) and
// their difference the one rounding.
#include "common.glsl"
#include "f16.glsl"

#ifdef HK_F32
layout(binding = 0) readonly buffer W { uint w32[]; };
#else
layout(binding = 0) readonly buffer W { uint16_t w16[]; };
#endif
layout(binding = 1) readonly buffer Ids { uint ids[]; };
layout(binding = 2) writeonly buffer Y { uint y[]; };

HK_PUSH_BEGIN
    uint total;     // n_ids * k
    uint rows;
    uint k;
    uint row_units; // one row of W in the binding's elements (32-bit words for f32, else 16-bit)
HK_PUSH_END

#if defined(HK_Q8_0) || defined(HK_Q4_K) || defined(HK_Q5_K) || defined(HK_Q6_K)
#include "w16.glsl"
#endif
#define HK_Q4_K_DECODE_ONLY
#if defined(HK_Q4_K)
#include "q4_k.glsl"
#elif defined(HK_Q5_K)
#include "q5_k.glsl"
#endif

// The f32 bits of value v of the row starting at element `row` of the binding.
uint value_bits(uint row, uint v)
{
#if defined(HK_F32)
    return w32[row + v];
#elif defined(HK_F16)
    return hk_f16_to_f32_bits(uint(w16[row + v]));
#elif defined(HK_Q8_0)
    // block of 32: f16 d, i8 qs[32] (17 u16, q8_0.glsl)
    uint b = row + (v >> 5) * 17u;
    float q = float(int(hk_byte(b, 2u + (v & 31u)) << 24) >> 24);
    return floatBitsToUint(q * hk_half_exact(uint(w16[b])));
#elif defined(HK_Q4_K) || defined(HK_Q5_K)
    // super-block of 256 (72 u16, q4_k.glsl; Q5_K 88, q5_k.glsl): sub-block j's value l is
    // d*sc_j*q - dmin*m_j, q the low (j even) or high nibble of qs[32*(j/2) + l] at byte HK_KQ_QS
    // (Q5_K: plus 16 where bit j of qh[l] is set)
    uint b = row + (v >> 8) * HK_KQ_U16, j = (v >> 5) & 7u, l = v & 31u, sc, m;
    hk_q4k_scale_min(b, j, sc, m);
    uint q = (hk_byte(b, HK_KQ_QS + 32u * (j >> 1) + l) >> (4u * (j & 1u))) & 0xFu;
    q |= (hk_kq_high16(b, l >> 1, j) >> (8u * (l & 1u))) & 0xFFu;
    precise float d_sc = hk_half_exact(uint(w16[b])) * float(sc), dmin_m = hk_half_exact(uint(w16[b + 1u])) * float(m);
    precise float value = d_sc * float(q) - dmin_m;
    return floatBitsToUint(value);
#elif defined(HK_Q6_K)
    // super-block of 256 (105 u16, q6_k.glsl): value 128n + 32g + l is d * scales[8n + 2g + l/16] *
    // (q - 32), q the nibble (high when g >= 2) of ql[64n + 32(g&1) + l] | ((qh[32n + l] >> 2g) & 3) << 4
    uint b = row + (v >> 8) * 105u, n = (v >> 7) & 1u, g = (v >> 5) & 3u, l = v & 31u;
    uint lo = (hk_byte(b, 64u * n + 32u * (g & 1u) + l) >> (4u * (g >> 1))) & 0xFu;
    uint hi = (hk_byte(b, 128u + 32u * n + l) >> (2u * g)) & 3u;
    float sc = float(int(hk_byte(b, 192u + 8u * n + 2u * g + (l >> 4)) << 24) >> 24);
    return floatBitsToUint(hk_half_exact(uint(w16[b + 104u])) * sc * float(int(lo | (hi << 4)) - 32));
#endif
}

void main()
{
    uint e = hk_group_id() * WG + gl_LocalInvocationID.x;
    if (e >= pc.total)
        return;
    uint i = e / pc.k, v = e - i * pc.k;
    uint id = ids[pc.view_offset[1] / 4u + i];
#ifdef HK_F32
    uint base = pc.view_offset[0] / 4u;
#else
    uint base = pc.view_offset[0] / 2u;
#endif
    uint bits = 0u;
    if (id < pc.rows)
        bits = value_bits(base + id * pc.row_units, v);
    y[pc.view_offset[2] / 4u + e] = bits;
}
