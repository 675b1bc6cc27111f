#version 450
#extension GL_GOOGLE_include_directive : require
// RMSNorm y[r, i] = x[r, i] / sqrt(mean(x[r, :]^2) + eps) * weight[i]. One workgroup per row;
// y may alias x exactly (each invocation reads its elements before writing them).
#include "common.glsl"

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 2) buffer Y { float y[]; };

HK_PUSH_BEGIN
    uint rows;
    uint n;
    float eps;
HK_PUSH_END

void main()
{
    uint row = hk_group_id();
    if (row >= pc.rows)
        return;
    uint xb = pc.view_offset[0] / 4u + row * pc.n, wb = pc.view_offset[1] / 4u, yb = pc.view_offset[2] / 4u + row * pc.n;
    float ss = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < pc.n; i += WG)
        ss += x[xb + i] * x[xb + i];
    ss = hk_workgroup_sum(ss);
    float scale = inversesqrt(ss / float(pc.n) + pc.eps);
    for (uint i = gl_LocalInvocationID.x; i < pc.n; i += WG)
        y[yb + i] = x[xb + i] * scale * weight[wb + i];
}
