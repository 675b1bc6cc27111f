#version 450
#extension GL_GOOGLE_include_directive : require
// Dense quantized matvec y[rows] = W[rows, k] . x[k], W in GGUF blocks (HK_Q8_0 / HK_Q4_K /
// HK_Q6_K), x and y f32. One workgroup per row: invocations stride over the row's 32-value
// units, then a subgroup + shared-memory reduction.
#include "common.glsl"

layout(binding = 0) readonly buffer Weights { uint16_t w16[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

HK_PUSH_BEGIN
    uint rows;
    uint k;
HK_PUSH_END

uint x_base;
float hk_x(uint i) { return x[x_base + i]; }

#if defined(HK_Q8_0)
#include "q8_0.glsl"
#elif defined(HK_Q4_K)
#include "q4_k.glsl"
#elif defined(HK_Q6_K)
#include "q6_k.glsl"
#else
#error "define HK_Q8_0, HK_Q4_K or HK_Q6_K"
#endif

void main()
{
    uint row = hk_group_id();
    if (row >= pc.rows)
        return;
    x_base = pc.view_offset[1] / 4u;
    uint row16 = pc.view_offset[0] / 2u + row * hk_row_u16(pc.k);
    uint units = pc.k / HK_UNIT_VALUES;
    float acc = 0.0;
    for (uint u = gl_LocalInvocationID.x; u < units; u += WG)
        acc += hk_unit_dot(row16, u, u * HK_UNIT_VALUES);
    acc = hk_workgroup_sum(acc);
    if (gl_LocalInvocationID.x == 0)
        y[pc.view_offset[2] / 4u + row] = acc;
}
