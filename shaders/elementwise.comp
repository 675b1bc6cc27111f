#version 450
#extension GL_GOOGLE_include_directive : require
// Elementwise kernels, one output (HK_VEC4: four) per invocation, no loop:
//   HK_ADD                    y[e] = a[e] + alpha * b[e]
//   HK_GLU_SILU, HK_GLU_GELU  y[r, i] = act(gate[r, i]) * up[r, i], input rows in_stride apart
// HK_VEC4 reads and writes 16 bytes at a time; the host takes it only where every view's offset is
// a multiple of 16 and n and in_stride are multiples of 4 (counts below are then in vec4s).
// y may alias an input exactly: each invocation reads its elements before writing them.
#define HK_NO_WORKGROUP_SUM
#include "common.glsl"

#ifdef HK_VEC4
#define T vec4
#define UNIT 16u
#else
#define T float
#define UNIT 4u
#endif

layout(binding = 0) readonly buffer A { T a[]; };  // a, or gate
layout(binding = 1) readonly buffer B { T b[]; };  // b, or up
layout(binding = 2) buffer Y { T y[]; };

HK_PUSH_BEGIN
    uint count;     // outputs
    uint n;         // outputs per row
    uint in_stride; // from one input row to the next
    float alpha;
HK_PUSH_END

#ifndef HK_ADD
#define HK_GLU_T T
#include "glu.glsl"
#endif

void main()
{
    // the binding range (< 2^32 bytes) keeps every index below 2^30 elements: no overflow
    uint e = hk_group_id() * WG + gl_LocalInvocationID.x;
    if (e >= pc.count)
        return;
    uint a0 = pc.view_offset[0] / UNIT, b0 = pc.view_offset[1] / UNIT, y0 = pc.view_offset[2] / UNIT;
#ifdef HK_ADD
    // two correctly rounded operations, never fused into an fma (whose rounding Vulkan leaves
    // open): the same bits on every device, and exactly a + b where alpha is 1
    precise T p = pc.alpha * b[b0 + e];
    precise T s = a[a0 + e] + p;
    y[y0 + e] = s;
#else
    uint r = e / pc.n;
    uint src = r * pc.in_stride + (e - r * pc.n);
    y[y0 + e] = hk_glu(a[a0 + src], b[b0 + src]);
#endif
}
