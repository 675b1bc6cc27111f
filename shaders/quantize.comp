#version 450
#extension GL_GOOGLE_include_directive : require
// Activation quantizer f32 -> GGUF Q8_1 blocks, the C reference's rules (hk_quant_row_q8_1):
// d = amax/127, q = round(x/d) (half away from zero, as C's roundf), s = f16(d*sum(q)); a block
// whose d rounds to f16 0 is all zeros; a block with a NaN or inf, or whose d overflows f16, is
// d = s = NaN with every q 0, so each output that reads it is NaN. One invocation per 32-value
// block; a block is 9 words: (f16 d | f16 s << 16), then 32 signed bytes.
#include "common.glsl"

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Y { uint y[]; };

HK_PUSH_BEGIN
    uint blocks;
HK_PUSH_END

// amax limits as f32 bit patterns (hk_ref.h HK_Q8_1_AMAX_ZERO, HK_Q8_1_AMAX_NAN): at or below
// 127*2^-25 the f16 d is 0; from 127*65520 it is inf
#define HK_AMAX_ZERO_BITS 0x367E0000u
#define HK_AMAX_NAN_BITS 0x4AFDF020u

// f32 -> f16 bits, round to nearest even, in integer arithmetic (finite input; >= 65520 gives
// inf): packHalf2x16 leaves the rounding to the implementation and may flush f16 subnormals,
// which d is for every block with amax below 7.75e-3.
uint hk_f16_bits(float f)
{
    uint a = floatBitsToUint(f) & 0x7FFFFFFFu, sign = (floatBitsToUint(f) >> 16) & 0x8000u;
    if (a >= 0x477FF000u) // 65520 and above
        return sign | 0x7C00u;
    uint h, rem, tie;
    if (a >= 0x38800000u) { // 2^-14 and above: a normal f16
        h = (a >> 13) - (112u << 10);
        rem = a & 0x1FFFu;
        tie = 0x1000u;
    } else if (a > 0x33000000u) { // above 2^-25: a subnormal f16, in units of 2^-24
        uint mant = (a & 0x7FFFFFu) | 0x800000u, shift = 126u - (a >> 23);
        h = mant >> shift;
        rem = mant & ((1u << shift) - 1u);
        tie = 1u << (shift - 1u);
    } else { // 2^-25 (a tie with 0) and below
        return sign;
    }
    if (rem > tie || (rem == tie && (h & 1u) != 0u))
        h++;
    return sign | h;
}

void main()
{
    uint blk = hk_group_id() * WG + gl_LocalInvocationID.x;
    if (blk >= pc.blocks)
        return;
    uint xb = pc.view_offset[0] / 4u + blk * 32u, yb = pc.view_offset[1] / 4u + blk * 9u;
    // amax over the bit patterns of |x|: for non-negative floats the integer order is the float
    // order and inf and NaN lie above every finite value, whatever the compiler assumes of NaN
    uint amax_bits = 0u;
    for (uint i = 0; i < 32; i++)
        amax_bits = max(amax_bits, floatBitsToUint(x[xb + i]) & 0x7FFFFFFFu);
    if (amax_bits <= HK_AMAX_ZERO_BITS || amax_bits >= HK_AMAX_NAN_BITS) {
        for (uint i = 0; i < 8; i++)
            y[yb + 1u + i] = 0u;
        y[yb] = amax_bits <= HK_AMAX_ZERO_BITS ? 0u : 0x7E007E00u; // d = s = 0, or NaN
        return;
    }
    float d = uintBitsToFloat(amax_bits) / 127.0;
    float id = 1.0 / d;
    int sum = 0;
    for (uint i = 0; i < 32; i += 4) {
        uint packed = 0u;
        for (uint j = 0; j < 4; j++) {
            float v = x[xb + i + j] * id, t = trunc(v); // |v| <= 127 and a little
            int q = int(t) + (abs(v - t) >= 0.5 ? int(sign(v)) : 0);
            q = clamp(q, -127, 127);
            sum += q;
            packed |= (uint(q) & 0xFFu) << (8u * j);
        }
        y[yb + 1u + i / 4u] = packed;
    }
    y[yb] = hk_f16_bits(min(d, 65504.0)) | (hk_f16_bits(d * float(sum)) << 16);
}
