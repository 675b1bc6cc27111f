#version 450
#extension GL_GOOGLE_include_directive : require
// MoE combine (hk_moe_combine): y[t, i] = sum_j weights[t, j] * x[t * top_k + j, i], j ascending
// from the first product, then + residual[t, i] where there is one. One invocation per output
// value. Every product and sum is its own f32 operation (precise: NoContraction, in the order
// written), so the result is the reference's (hk_ref_moe_combine) bit for bit. y may be exactly
// residual: each invocation reads its residual value before writing the same word.
#include "common.glsl"

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Weights { float weights[]; };
layout(binding = 2) readonly buffer Residual { float residual[]; };
layout(binding = 3) writeonly buffer Y { float y[]; };

HK_PUSH_BEGIN
    uint total; // tokens * n
    uint top_k;
    uint n;
    uint has_residual;
HK_PUSH_END

void main()
{
    uint e = hk_group_id() * WG + gl_LocalInvocationID.x;
    if (e >= pc.total)
        return;
    uint t = e / pc.n, i = e - t * pc.n;
    uint xb = pc.view_offset[0] / 4u + t * pc.top_k * pc.n + i, wb = pc.view_offset[1] / 4u + t * pc.top_k;
    precise float acc = weights[wb] * x[xb];
    for (uint j = 1u; j < pc.top_k; j++) {
        precise float p = weights[wb + j] * x[xb + j * pc.n];
        acc = acc + p;
    }
    if (pc.has_residual != 0u)
        acc = acc + residual[pc.view_offset[2] / 4u + e];
    y[pc.view_offset[3] / 4u + e] = acc;
}
