// GGUF Q8_1 quantization of 32-value blocks, the C reference's rules (hk_quant_row_q8_1): d = amax/127,
// q = round(x/d) (half away from zero, as C's roundf), s = f16(d*sum(q)); a block whose d rounds to f16 0 is
// all zeros; a block with a NaN or inf, or whose d overflows f16, is d = s = NaN with every q 0, so each
// output that reads it is NaN. A block is 9 words: (f16 d | f16 s << 16), then 32 signed bytes.
// quantize.comp and rmsnorm.comp (hk_rmsnorm_q8_1) both quantize here, so the same values give the same bits.
// Eight consecutive invocations quantize a block, each four consecutive values (one word of the quants):
// include after common.glsl, with WG a multiple of 8, and call hk_q8_1_quad from uniform control flow.
// d and s are rounded to f16 by f16.glsl's hk_f16_bits: packHalf2x16 leaves the rounding to the
// implementation and may flush f16 subnormals, which d is for every block with amax below 7.75e-3.
#include "f16.glsl"

// Each invocation's partial amax and sum of quants, for the seven others of its block
shared uint hk_q8_amax[WG];
shared int hk_q8_sum[WG];

// amax limits as f32 bit patterns (hk_ref.h HK_Q8_1_AMAX_ZERO, HK_Q8_1_AMAX_NAN): at or below
// 127*2^-25 the f16 d is 0; from 127*65520 it is inf
#define HK_AMAX_ZERO_BITS 0x367E0000u
#define HK_AMAX_NAN_BITS 0x4AFDF020u

// v: values 4 * (lid % 8) .. + 3 of the block of invocations lid & ~7 .. + 7 (lid the local index). Returns
// their quants packed (the block's word 1 + lid % 8); head gets the block's word 0. Two barriers; the loads
// of the shared partials are written out, so no loop adds to lavapipe's count per invocation.
uint hk_q8_1_quad(vec4 v, out uint head)
{
    uint lid = gl_LocalInvocationID.x, b = lid & ~7u;
    // amax over the bit patterns of |x|: for non-negative floats the integer order is the float
    // order and inf and NaN lie above every finite value, whatever the compiler assumes of NaN
    uvec4 a = floatBitsToUint(v) & 0x7FFFFFFFu;
    hk_q8_amax[lid] = max(max(a.x, a.y), max(a.z, a.w));
    barrier();
    a = max(uvec4(hk_q8_amax[b], hk_q8_amax[b + 1u], hk_q8_amax[b + 2u], hk_q8_amax[b + 3u]),
            uvec4(hk_q8_amax[b + 4u], hk_q8_amax[b + 5u], hk_q8_amax[b + 6u], hk_q8_amax[b + 7u]));
    uint amax_bits = max(max(a.x, a.y), max(a.z, a.w));
    bool special = amax_bits <= HK_AMAX_ZERO_BITS || amax_bits >= HK_AMAX_NAN_BITS;
    float d = 0.0;
    ivec4 q = ivec4(0);
    if (!special) {
        d = uintBitsToFloat(amax_bits) / 127.0;
        // uncontracted (NoContraction), so that x * id - trunc(...) is never one fma: every shader that
        // includes this rounds alike
        precise vec4 r = v * (1.0 / d); // |r| <= 127 and a little
        vec4 t = trunc(r);
        q = clamp(ivec4(t) + ivec4(mix(vec4(0.0), sign(r), greaterThanEqual(abs(r - t), vec4(0.5)))), -127, 127);
    }
    hk_q8_sum[lid] = q.x + q.y + q.z + q.w;
    barrier();
    ivec4 s = ivec4(hk_q8_sum[b], hk_q8_sum[b + 1u], hk_q8_sum[b + 2u], hk_q8_sum[b + 3u]) +
              ivec4(hk_q8_sum[b + 4u], hk_q8_sum[b + 5u], hk_q8_sum[b + 6u], hk_q8_sum[b + 7u]);
    if (special)
        head = amax_bits <= HK_AMAX_ZERO_BITS ? 0u : 0x7E007E00u; // d = s = 0, or NaN
    else
        head = hk_f16_bits(min(d, 65504.0)) | (hk_f16_bits(d * float(s.x + s.y + s.z + s.w)) << 16);
    uvec4 u = uvec4(q) & 0xFFu;
    return u.x | (u.y << 8) | (u.z << 16) | (u.w << 24);
}
