// GGUF Q8_1 quantization of 32-value blocks, the C reference's rules (hk_quant_row_q8_1): d = amax/127,
// q = round(x/d) (half away from zero, as C's roundf), s = f16(d*sum(q)); a block whose d rounds to f16 0 is
// all zeros; a block with a NaN or inf, or whose d overflows f16, is d = s = NaN with every q 0, so each
// output that reads it is NaN. A block is 9 words: (f16 d | f16 s << 16), then 32 signed bytes.
// quantize.comp, rmsnorm.comp (hk_rmsnorm_q8_1) and the int8 matvec on f32 x (matvec.comp, HK_XF32) all
// quantize with the functions here, so the same values give the same bits. Two forms: eight consecutive
// invocations per block, each four consecutive values (hk_q8_1_quad: include after common.glsl, with WG a
// multiple of 8, and call it from uniform control flow), or one invocation per block (hk_q8_1_block, no
// shared memory: define HK_Q8_1_BLOCK_ONLY to leave the quad's out).
// d and s are rounded to f16 by f16.glsl's hk_f16_bits: packHalf2x16 leaves the rounding to the
// implementation and may flush f16 subnormals, which d is for every block with amax below 7.75e-3.
#include "f16.glsl"

// amax limits as f32 bit patterns (hk_ref.h HK_Q8_1_AMAX_ZERO, HK_Q8_1_AMAX_NAN): at or below
// 127*2^-25 the f16 d is 0; from 127*65520 it is inf
#define HK_AMAX_ZERO_BITS 0x367E0000u
#define HK_AMAX_NAN_BITS 0x4AFDF020u

// amax over the bit patterns of |x|: for non-negative floats the integer order is the float order
// and inf and NaN lie above every finite value, whatever the compiler assumes of NaN
uint hk_q8_1_amax4(vec4 v)
{
    uvec4 a = floatBitsToUint(v) & 0x7FFFFFFFu;
    return max(max(a.x, a.y), max(a.z, a.w));
}

bool hk_q8_1_special(uint amax_bits) { return amax_bits <= HK_AMAX_ZERO_BITS || amax_bits >= HK_AMAX_NAN_BITS; }

// d of a block that is not special
float hk_q8_1_d(uint amax_bits) { return uintBitsToFloat(amax_bits) / 127.0; }

// the quants of four values of a block of scale d (not special)
ivec4 hk_q8_1_quant4(vec4 v, float d)
{
    // uncontracted (NoContraction), so that x * id - trunc(...) is never one fma: every shader that
    // includes this rounds alike
    precise vec4 r = v * (1.0 / d); // |r| <= 127 and a little
    vec4 t = trunc(r);
    return clamp(ivec4(t) + ivec4(mix(vec4(0.0), sign(r), greaterThanEqual(abs(r - t), vec4(0.5)))), -127, 127);
}

// word 0 of a block from its amax and the sum of its quants
uint hk_q8_1_head(uint amax_bits, int sum)
{
    if (hk_q8_1_special(amax_bits))
        return amax_bits <= HK_AMAX_ZERO_BITS ? 0u : 0x7E007E00u; // d = s = 0, or NaN
    float d = hk_q8_1_d(amax_bits);
    return hk_f16_bits(min(d, 65504.0)) | (hk_f16_bits(d * float(sum)) << 16);
}

uint hk_q8_1_pack(ivec4 q)
{
    uvec4 u = uvec4(q) & 0xFFu;
    return u.x | (u.y << 8) | (u.z << 16) | (u.w << 24);
}

// One invocation's block: v the 32 values in order. Returns word 0; words 1..8 into quants.
uint hk_q8_1_block(vec4 v[8], out uint quants[8])
{
    uint amax_bits = 0u;
    for (uint j = 0; j < 8u; j++)
        amax_bits = max(amax_bits, hk_q8_1_amax4(v[j]));
    bool special = hk_q8_1_special(amax_bits);
    float d = special ? 0.0 : hk_q8_1_d(amax_bits);
    int sum = 0;
    for (uint j = 0; j < 8u; j++) {
        ivec4 q = special ? ivec4(0) : hk_q8_1_quant4(v[j], d);
        sum += q.x + q.y + q.z + q.w;
        quants[j] = hk_q8_1_pack(q);
    }
    return hk_q8_1_head(amax_bits, sum);
}

#ifndef HK_Q8_1_BLOCK_ONLY
// Each invocation's partial amax and sum of quants, for the seven others of its block
shared uint hk_q8_amax[WG];
shared int hk_q8_sum[WG];

// v: values 4 * (lid % 8) .. + 3 of the block of invocations lid & ~7 .. + 7 (lid the local index). Returns
// their quants packed (the block's word 1 + lid % 8); head gets the block's word 0. Two barriers; the loads
// of the shared partials are written out, so no loop adds to lavapipe's count per invocation.
uint hk_q8_1_quad(vec4 v, out uint head)
{
    uint lid = gl_LocalInvocationID.x, b = lid & ~7u;
    hk_q8_amax[lid] = hk_q8_1_amax4(v);
    barrier();
    uvec4 a = max(uvec4(hk_q8_amax[b], hk_q8_amax[b + 1u], hk_q8_amax[b + 2u], hk_q8_amax[b + 3u]),
                  uvec4(hk_q8_amax[b + 4u], hk_q8_amax[b + 5u], hk_q8_amax[b + 6u], hk_q8_amax[b + 7u]));
    uint amax_bits = max(max(a.x, a.y), max(a.z, a.w));
    ivec4 q = hk_q8_1_special(amax_bits) ? ivec4(0) : hk_q8_1_quant4(v, hk_q8_1_d(amax_bits));
    hk_q8_sum[lid] = q.x + q.y + q.z + q.w;
    barrier();
    ivec4 s = ivec4(hk_q8_sum[b], hk_q8_sum[b + 1u], hk_q8_sum[b + 2u], hk_q8_sum[b + 3u]) +
              ivec4(hk_q8_sum[b + 4u], hk_q8_sum[b + 5u], hk_q8_sum[b + 6u], hk_q8_sum[b + 7u]);
    head = hk_q8_1_head(amax_bits, s.x + s.y + s.z + s.w);
    return hk_q8_1_pack(q);
}
#endif
