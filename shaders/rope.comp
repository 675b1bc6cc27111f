#version 450
#extension GL_GOOGLE_include_directive : require
// Rotary position embedding fused with the KV-cache append (hk_rope). One workgroup per
// (token, row), rows being the n_heads q heads, then the n_kv_heads k heads, then the n_kv_heads
// v heads: q is rotated into q_out, k rotated and v copied into the caches at row positions[t],
// converted to the cache type (HK_F32, HK_F16: round to nearest even; HK_Q8_0: d = amax/127,
// q = round(x/d)). The row is staged in shared memory first, so q_out may be q itself.
// F_Q_NORM, F_K_NORM: each q (k) head is RMSNorm'ed with the weight at binding 8 (9) before it
// rotates (Qwen3's q and k norms), in norm.glsl's order and with its code, so hk_rmsnorm's bits.
//
// Angles: pair i turns by pos * f_i turns, f_i = freq_scale/(2 pi) * theta^(-2i/rot_dim) /
// factor_i. f_i is formed as a double-float (about 46 bits): the host passes freq_scale/(2 pi) and
// theta^(-2 * 2^b / rot_dim) (b = 0..3) as float pairs, the shader squares the last for b = 4..6
// and multiplies the powers named by the bits of i (Dekker products: exact without a fused
// multiply-add, kept exact by `precise`). pos * f_i mod 1 is then taken in integers: each float of the pair is
// mantissa * 2^e, the 32x24-bit product is exact, and its bits below the binary point give the
// turn as a 32-bit fraction, so the integer part drops out however large pos is. Sine and
// cosine of the remainder come from polynomials on a quarter turn (Vulkan only promises 2^-11
// for sin/cos). The angle error is about 2e-13 * pos * |f_i| turns: ~1e-7 rad at pos 2^20 and
// ~2e-6 rad at pos 2^24 for frequencies up to 1 rad per position.
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

// ---- double-float arithmetic (value = x + y, |y| <= ulp(x)/2) ----
vec2 quick_two_sum(float a, float b)
{
    precise float s = a + b;
    precise float e = b - (s - a);
    return vec2(s, e);
}

// a * b = p + e exactly: Veltkamp splits into 12-bit halves, whose products are exact.
vec2 two_prod(float a, float b)
{
    precise float p = a * b;
    precise float ca = 4097.0 * a;
    precise float ah = ca - (ca - a);
    precise float al = a - ah;
    precise float cb = 4097.0 * b;
    precise float bh = cb - (cb - b);
    precise float bl = b - bh;
    precise float e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    return vec2(p, e);
}

vec2 df_mul(vec2 a, vec2 b)
{
    vec2 p = two_prod(a.x, b.x);
    precise float e = p.y + (a.x * b.y + a.y * b.x);
    return quick_two_sum(p.x, e);
}

vec2 df_div(vec2 a, float b)
{
    precise float q1 = a.x / b; // any rounding: the remainder below corrects it
    vec2 p = two_prod(q1, b);
    precise float r = ((a.x - p.x) - p.y) + a.y;
    precise float q2 = r / b;
    return quick_two_sum(q1, q2);
}

// frac(pos * x) as a 32-bit fraction of a turn (x = mantissa * 2^e; pos * mantissa exact in 64 bits)
uint turn_fraction(uint pos, float x)
{
    uint bits = floatBitsToUint(x);
    uint e8 = (bits >> 23) & 0xFFu;
    if (e8 == 0u) // zero or subnormal: below 2^-126 turns per position
        return 0u;
    uint hi, lo;
    umulExtended(pos, (bits & 0x7FFFFFu) | 0x800000u, hi, lo);
    int s = 150 - int(e8); // pos * x = (hi:lo) * 2^-s; the fraction is bits s-32 .. s-1
    uint f;
    if (s <= 0)
        f = 0u; // an integer number of turns
    else if (s < 32)
        f = lo << uint(32 - s);
    else if (s == 32)
        f = lo;
    else if (s < 64)
        f = (lo >> uint(s - 32)) | (hi << uint(64 - s));
    else if (s == 64)
        f = hi;
    else if (s < 96)
        f = hi >> uint(s - 64);
    else
        f = 0u;
    return (bits >> 31) != 0u ? 0u - f : f;
}

// (cos, sin) of u / 2^32 turns
vec2 cos_sin_turns(uint u)
{
    uint quadrant = (u + 0x20000000u) >> 30; // the nearest quarter turn
    int rem = int(u - (quadrant << 30));      // [-2^29, 2^29): at most an eighth of a turn
    float a = float(rem) * 1.4629180792671596e-09; // 2 pi / 2^32
    float a2 = a * a;
    // Taylor to a^9 and a^10: truncation below 2e-9 on [-pi/4, pi/4]
    float s = a * (1.0 + a2 * (-1.0 / 6.0 + a2 * (1.0 / 120.0 + a2 * (-1.0 / 5040.0 + a2 * (1.0 / 362880.0)))));
    float c = 1.0 + a2 * (-0.5 + a2 * (1.0 / 24.0 + a2 * (-1.0 / 720.0 + a2 * (1.0 / 40320.0 - a2 / 3628800.0))));
    switch (quadrant & 3u) {
    case 0u: return vec2(c, s);
    case 1u: return vec2(-s, c);
    case 2u: return vec2(-c, -s);
    default: return vec2(s, -c);
    }
}

vec2 pair_cos_sin(uint pos, uint i)
{
    vec2 f = pc.turns, p = pc.pow2[3];
    for (uint b = 0; b < 7u; b++) {
        if (b < 4u)
            p = pc.pow2[b];
        else
            p = df_mul(p, p); // theta^(-2 * 2^b / rot_dim) from b - 1's
        if (((i >> b) & 1u) != 0u)
            f = df_mul(f, p);
    }
    if (((pc.rot >> 16) & F_FACTORS) != 0u)
        f = df_div(f, factors[pc.view_offset[4] / 4u + i]);
    return cos_sin_turns(turn_fraction(pos, f.x) + turn_fraction(pos, f.y));
}

shared float row_sh[HK_D];
shared float out_sh[HK_D];    // HK_Q8_0: the row to quantize
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
    uint rb = is_v ? pc.view_offset[7] + head * pc.v_head + pos * pc.v_row
                   : pc.view_offset[6] + head * pc.k_head + pos * pc.k_row;
    for (uint d = t; d < HK_D; d += WG) {
        float x = row_sh[d];
        if (!is_v && d < 2u * half_rot) {
            bool first = neox ? d < half_rot : (d & 1u) == 0u;
            uint i = neox ? (first ? d : d - half_rot) : d / 2u;
            uint partner = neox ? (first ? d + half_rot : d - half_rot) : d ^ 1u;
            vec2 cs = cs_sh[i];
            float y = row_sh[partner];
            x = first ? x * cs.x - y * cs.y : y * cs.y + x * cs.x;
        }
        if (is_q) {
            q_out[pc.view_offset[5] / 4u + src + d] = x;
        } else {
#if defined(HK_F32)
            if (is_v)
                vc[rb / 4u + d] = x;
            else
                kc[rb / 4u + d] = x;
#elif defined(HK_F16)
            if (is_v)
                vc16[rb / 2u + d] = uint16_t(hk_f16_bits(x));
            else
                kc16[rb / 2u + d] = uint16_t(hk_f16_bits(x));
#else
            out_sh[d] = x;
#endif
        }
    }
#if defined(HK_Q8_0)
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
#elif !defined(HK_F32) && !defined(HK_F16)
#error "define HK_F32, HK_F16 or HK_Q8_0"
#endif
}
