// Shared by every kernel: extensions, the push-constant prologue, workgroup ids, reductions.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

// Workgroup width: specialization constant 0 in every kernel.
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;

// The runtime binds each view at an aligned base and passes the view's byte offset past that
// base here (src/runtime/internal.h, HK_MAX_BINDINGS = 10); kernel parameters follow.
#define HK_PUSH_BEGIN layout(push_constant) uniform Push { uint view_offset[10];
#define HK_PUSH_END } pc;

// Large row counts are spread over x and y (65535 groups each); groups past the end exit.
uint hk_group_id() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

#ifndef HK_NO_WORKGROUP_SUM
// Scratch of hk_workgroup_sum / hk_workgroup_max. A shader that uses neither and budgets its own
// shared memory exactly (the int8 matvec) defines HK_NO_WORKGROUP_SUM before including this file.
shared float hk_partial[WG];

// Sum of v over the workgroup, returned to every invocation. Subgroup sums first, then one
// shared-memory pass over the subgroups (sized for the smallest possible subgroup).
float hk_workgroup_sum(float v)
{
    v = subgroupAdd(v);
    if (subgroupElect())
        hk_partial[gl_SubgroupID] = v;
    barrier();
    float total = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++)
        total += hk_partial[i];
    barrier();
    return total;
}
#endif

// f16 bits (low 16 bits of h) to f32
float hk_half(uint h) { return unpackHalf2x16(h).x; }

// Signed bytes of a 16-bit word
int hk_lo_i8(uint w) { return int(w << 24) >> 24; }
int hk_hi_i8(uint w) { return int(w << 16) >> 24; }

// Small integers to float without int->float conversions (a quarter-rate instruction on some
// GPUs, the limit of a decode loop): 2^23 + n has n in its low mantissa bits, exactly.
vec4 hk_u8x4_to_vec4(uvec4 bytes) { return uintBitsToFloat(bytes | 0x4B000000u) - 8388608.0; }
// The four bytes of v masked with `mask` (0xF for nibbles, 0xFF for bytes), as floats.
vec4 hk_lanes(uint v, uint mask) { return hk_u8x4_to_vec4(uvec4(v, v >> 8, v >> 16, v >> 24) & mask); }
// The four signed bytes of v, as floats (bias by 128 to unsigned, then subtract it back).
vec4 hk_i8x4(uint v) { return uintBitsToFloat(((uvec4(v, v >> 8, v >> 16, v >> 24) & 0xFFu) ^ 0x80u) | 0x4B000000u) - 8388736.0; }
// The low byte of each word of v as a signed value, as floats (as hk_i8x4).
vec4 hk_i8_low(uvec4 v) { return uintBitsToFloat(((v & 0xFFu) ^ 0x80u) | 0x4B000000u) - 8388736.0; }
// Integer sums to float without a conversion: a sum of n (|n| < 2^22) started at HK_I2F_BIAS
// instead of 0 holds the bits of the float 1.5 * 2^23 + n (n in the low mantissa bits), and
// hk_biased_float subtracts 1.5 * 2^23 back, exactly (both in [2^23, 2^24)). An integer add that
// the packed dot products fold in, and an f32 add, for the int->float conversion they replace.
const int HK_I2F_BIAS = 0x4B400000;
float hk_biased_float(int bits) { return intBitsToFloat(bits) - 12582912.0; }

#ifndef HK_NO_WORKGROUP_SUM
// Maximum of v over the workgroup, returned to every invocation (as hk_workgroup_sum).
float hk_workgroup_max(float v)
{
    v = subgroupMax(v);
    if (subgroupElect())
        hk_partial[gl_SubgroupID] = v;
    barrier();
    float m = hk_partial[0];
    for (uint i = 1; i < gl_NumSubgroups; i++)
        m = max(m, hk_partial[i]);
    barrier();
    return m;
}
#endif
