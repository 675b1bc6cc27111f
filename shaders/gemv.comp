#version 450
#extension GL_GOOGLE_include_directive : require
// f32 GEMV y[rows] = W[rows, k] . x[k] (the MoE router gate). One workgroup per row.
#include "common.glsl"

layout(binding = 0) readonly buffer Weights { float w[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

HK_PUSH_BEGIN
    uint rows;
    uint k;
HK_PUSH_END

void main()
{
    uint row = hk_group_id();
    if (row >= pc.rows)
        return;
    uint wb = pc.view_offset[0] / 4u + row * pc.k, xb = pc.view_offset[1] / 4u;
    float acc = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < pc.k; i += WG)
        acc += w[wb + i] * x[xb + i];
    acc = hk_workgroup_sum(acc);
    if (gl_LocalInvocationID.x == 0)
        y[pc.view_offset[2] / 4u + row] = acc;
}
