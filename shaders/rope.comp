#version 450
#extension GL_GOOGLE_include_directive : require
// Rotary position embedding fused with the KV-cache append (hk_rope). One workgroup per
// (token, row), rows being the n_heads q heads, then the n_kv_heads k heads, then the n_kv_heads
// v heads: q is rotated into q_out, k rotated and v copied into the caches at row positions[t],
// converted to the cache type (HK_CACHE_F32, HK_CACHE_F16: round to nearest even; HK_CACHE_Q8_0: d = amax/127,
// q = round(x/d)). The row is staged in shared memory first, so q_out may be q itself.
// F_Q_NORM, F_K_NORM: each q (k) head is RMSNorm'ed with the weight at binding 8 (9) before it
// rotates (Qwen3's q and k norms), in norm.glsl's order and with its code, so hk_rmsnorm's bits.

// Angles: rope.glsl.
#include "common.glsl"
#include "f16.glsl"

layout(constant_id = 1) const uint HK_D = 128; // head_dim

layout(binding = 0) readonly buffer Q { float q[]; };
layout(binding = 1) readonly buffer K { float k[]; };
layout(binding = 2) readonly buffer V { float v[]; };
layout(binding = 3) readonly buffer Positions { uint positions[]; };
layout(binding = 4) readonly buffer Factors { float factors[]; };
layout(binding = 5) writeonly buffer QOut { float q_out[]; };
layout(binding = 6) writeonly buffer KCache { float kc[]; };
layout(binding = 6) writeonly buffer KCache16 { uint16_t kc16[]; };
layout(binding = 7) writeonly buffer VCache { float vc[]; };
layout(binding = 7) writeonly buffer VCache16 { uint16_t vc16[]; };
layout(binding = 8) readonly buffer QNorm { float q_norm_w[]; };
layout(binding = 9) readonly buffer KNorm { float k_norm_w[]; };

HK_PUSH_BEGIN
    uint n_tokens;
    uint heads;    // n_heads | n_kv_heads << 16
    uint rot;      // rot_dim / 2 | flags << 16
    uint capacity;
    uint k_row, k_head, v_row, v_head; // byte strides (0 where unused)
    vec2 turns;    // freq_scale / (2 pi), double-float
    vec2 pow2[4];  // theta^(-2 * 2^b / rot_dim), b = 0..3, double-float
    float eps;     // the q and k norms'
HK_PUSH_END

const uint F_NEOX = 1u, F_FACTORS = 2u, F_Q_NORM = 4u, F_K_NORM = 8u;

#define HK_ROPE_HAS_FACTORS (((pc.rot >> 16) & F_FACTORS) != 0u)
#define HK_ROPE_FACTOR(i) factors[pc.view_offset[4] / 4u + (i)]
#define HK_ROPE_K_VIEW 6
#define HK_ROPE_V_VIEW 7
#include "rope.glsl"

shared float row_sh[HK_D];
shared float out_sh[HK_D];    // HK_CACHE_Q8_0: the row to quantize
shared vec2 cs_sh[HK_D / 2u]; // (cos, sin) per pair
shared float ss_sh[8];        // the norm's block sums of squares (head_dim <= 256)
#define HK_NORM_X(i) row_sh[i]
#include "norm.glsl"

// The staged head RMSNorm'ed in place with weight w (binding 8 or 9): norm.glsl's order, as
// rmsnorm.comp runs it for a row of HK_D values (the blocks' P_b, one group, the total). Every
// invocation calls it (it has barriers).
void norm_row(bool is_q)
{
    uint t = gl_LocalInvocationID.x, nb = (HK_D + 31u) / 32u;
    for (uint b = t; b < nb; b += WG)
        ss_sh[b] = hk_block_sumsq(32u * b, min(32u, HK_D - 32u * b));
    barrier();
    precise float g = 0.0;
    for (uint b = 0; b < nb; b++)
        g = g + ss_sh[b];
    precise float total = 0.0;
    total = total + g;
    float scale = hk_norm_scale(total, HK_D, pc.eps);
    uint wb = pc.view_offset[is_q ? 8 : 9] / 4u;
    for (uint d = t; d < HK_D; d += WG)
        row_sh[d] = hk_norm_apply(row_sh[d], scale, is_q ? q_norm_w[wb + d] : k_norm_w[wb + d]);
    barrier();
}

void main()
{
    uint n_heads = pc.heads & 0xFFFFu, n_kv = pc.heads >> 16;
    uint rows = n_heads + 2u * n_kv;
    uint g = hk_group_id(), t = gl_LocalInvocationID.x;
    uint token = g / rows, row = g % rows;
    if (token >= pc.n_tokens)
        return;
    uint pos = positions[pc.view_offset[3] / 4u + token];
    bool is_q = row < n_heads, is_v = row >= n_heads + n_kv;
    uint head = is_q ? row : is_v ? row - n_heads - n_kv : row - n_heads;
    if (!is_q && pos >= pc.capacity) // no cache row for this position
        return;
    uint half_rot = pc.rot & 0xFFFFu;
    bool neox = ((pc.rot >> 16) & F_NEOX) != 0u;
    if (!is_v)
        for (uint i = t; i < half_rot; i += WG)
            cs_sh[i] = pair_cos_sin(pos, i);
    uint src = ((token * (is_q ? n_heads : n_kv)) + head) * HK_D;
    for (uint d = t; d < HK_D; d += WG)
        row_sh[d] = is_q ? q[pc.view_offset[0] / 4u + src + d]
                  : is_v ? v[pc.view_offset[2] / 4u + src + d]
                         : k[pc.view_offset[1] / 4u + src + d];
    barrier();
    uint norm_flag = is_q ? F_Q_NORM : F_K_NORM;
    if (!is_v && ((pc.rot >> 16) & norm_flag) != 0u)
        norm_row(is_q);
    uint rb = rope_cache_row(is_v, head, pos);
    for (uint d = t; d < HK_D; d += WG) {
        float x = row_sh[d];
        if (!is_v && d < 2u * half_rot) {
            bool first = neox ? d < half_rot : (d & 1u) == 0u;
            uint i = neox ? (first ? d : d - half_rot) : d / 2u;
            uint partner = neox ? (first ? d + half_rot : d - half_rot) : d ^ 1u;
            x = first ? rope_rotated(x, row_sh[partner], cs_sh[i], true)
                      : rope_rotated(row_sh[partner], x, cs_sh[i], false);
        }
        if (is_q) {
            q_out[pc.view_offset[5] / 4u + src + d] = x;
        } else {
#ifdef HK_CACHE_Q8_0
            out_sh[d] = x;
#else
            rope_cache_store(is_v, rb, d, x);
#endif
        }
    }
#if defined(HK_CACHE_Q8_0)
    if (is_q)
        return;
    barrier();
    for (uint b = t; b < HK_D / 32u; b += WG) {
        float amax = 0.0;
        for (uint i = 0; i < 32u; i++)
            amax = max(amax, abs(out_sh[b * 32u + i]));
        float d = amax / 127.0;
        float id = d != 0.0 ? 1.0 / d : 0.0;
        uint w = rb / 2u + b * 17u;
        uint dh = hk_f16_bits(d);
        if (is_v)
            vc16[w] = uint16_t(dh);
        else
            kc16[w] = uint16_t(dh);
        for (uint i = 0; i < 16u; i++) {
            uint pair = 0u;
            for (uint h = 0; h < 2u; h++) {
                float s = out_sh[b * 32u + 2u * i + h] * id;
                int qv = clamp(int(sign(s) * floor(abs(s) + 0.5)), -127, 127);
                pair |= (uint(qv) & 0xFFu) << (8u * h);
            }
            if (is_v)
                vc16[w + 1u + i] = uint16_t(pair);
            else
                kc16[w + 1u + i] = uint16_t(pair);
        }
    }
#elif !defined(HK_CACHE_F32) && !defined(HK_CACHE_F16)
#error "define HK_CACHE_F32, HK_CACHE_F16 or HK_CACHE_Q8_0"
#endif
}
