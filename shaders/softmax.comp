#version 450
#extension GL_GOOGLE_include_directive : require
// Row-wise softmax with a temperature: y[r, i] = e_i / sum_j e_j, e_i = exp((x[r, i] - max_r) / T),
// where an x equal to the row's maximum gives e = 1 exactly (the rule that also defines rows whose
// maximum is infinite: the entries at the maximum share the row). A NaN anywhere makes the row NaN.
// One workgroup per row, three passes over it (max, sum, write), f32 sums. y may alias x exactly:
// every x is read by the invocation that writes it, and every other read of the row precedes the
// last reduction's barrier.
#include "common.glsl"

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };

HK_PUSH_BEGIN
    uint rows;
    uint n;
    float inv_t; // 1 / temperature (+inf for a temperature whose reciprocal overflows)
HK_PUSH_END

// exp((v - m) / T), 1 at the maximum; 0 where it underflows f32 (below e^-104), so that an
// infinite difference never reaches exp (Vulkan leaves exp of inf to the implementation)
float hk_weight(float v, float m)
{
    if (v == m)
        return 1.0;
    float a = (v - m) * pc.inv_t;
    return a > -104.0 ? exp(a) : 0.0;
}

void main()
{
    uint row = hk_group_id();
    if (row >= pc.rows)
        return;
    uint lid = gl_LocalInvocationID.x;
    uint xb = pc.view_offset[0] / 4u + row * pc.n, yb = pc.view_offset[1] / 4u + row * pc.n;
    const float neg_inf = -1.0 / 0.0;
    // NaN takes no part in the maximum (max() of a NaN is undefined in GLSL); it is counted
    float m = neg_inf, nan_seen = 0.0;
    for (uint i = lid; i < pc.n; i += WG) {
        float v = x[xb + i];
        if (isnan(v))
            nan_seen = 1.0;
        else
            m = max(m, v);
    }
    m = hk_workgroup_max(m);
    if (hk_workgroup_max(nan_seen) != 0.0) { // uniform over the workgroup
        for (uint i = lid; i < pc.n; i += WG)
            y[yb + i] = uintBitsToFloat(0x7FC00000u);
        return;
    }
    float s = 0.0;
    for (uint i = lid; i < pc.n; i += WG)
        s += hk_weight(x[xb + i], m);
    float inv_s = 1.0 / hk_workgroup_sum(s); // >= 1: the maximum's own term
    for (uint i = lid; i < pc.n; i += WG)
        y[yb + i] = hk_weight(x[xb + i], m) * inv_s;
}
