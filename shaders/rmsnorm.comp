#version 450
#extension GL_GOOGLE_include_directive : require
// RMSNorm y[r, i] = x[r, i] / sqrt(mean(x[r, :]^2) + eps) * weight[i]. One workgroup per row;
// y may alias x exactly (each invocation reads its elements before writing them).
// HK_Q8_1 (hk_rmsnorm_q8_1): also the row's Q8_1 blocks of y's values (q8_1.glsl, as quantize.comp),
// y written only where pc.write_y. The sum of squares and each y are hk_rmsnorm's code, so its bits.
#include "common.glsl"
#ifdef HK_Q8_1
#include "q8_1.glsl"
#endif

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer Weight { float weight[]; };
layout(binding = 2) buffer Y { float y[]; };
#ifdef HK_Q8_1
layout(binding = 3) writeonly buffer YQ { uint yq[]; };
#endif

HK_PUSH_BEGIN
    uint rows;
    uint n;
    float eps;
#ifdef HK_Q8_1
    uint write_y;
#endif
HK_PUSH_END

void main()
{
    uint row = hk_group_id();
    if (row >= pc.rows)
        return;
    uint xb = pc.view_offset[0] / 4u + row * pc.n, wb = pc.view_offset[1] / 4u, yb = pc.view_offset[2] / 4u + row * pc.n;
    // uncontracted (NoContraction): both variants' pipelines sum the squares alike, whatever the
    // compiler would fuse into an fma in one of them
    precise float ss = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < pc.n; i += WG)
        ss += x[xb + i] * x[xb + i];
    ss = hk_workgroup_sum(ss);
    float scale = inversesqrt(ss / float(pc.n) + pc.eps);
#ifndef HK_Q8_1
    for (uint i = gl_LocalInvocationID.x; i < pc.n; i += WG)
        y[yb + i] = x[xb + i] * scale * weight[wb + i];
#else
    // steps of 4 * WG values, four consecutive ones per invocation: whole blocks (n is a multiple of
    // 32), eight invocations each; invocations past the row's end quantize zeros for the barriers
    uint lid = gl_LocalInvocationID.x, qb = pc.view_offset[3] / 4u + row * (pc.n / 32u) * 9u;
    for (uint c = 0; c < pc.n; c += 4u * WG) {
        uint i = c + 4u * lid;
        vec4 v = vec4(0.0);
        if (i < pc.n) {
            v = vec4(x[xb + i], x[xb + i + 1u], x[xb + i + 2u], x[xb + i + 3u]) * scale *
                vec4(weight[wb + i], weight[wb + i + 1u], weight[wb + i + 2u], weight[wb + i + 3u]);
            if (pc.write_y != 0u) {
                y[yb + i] = v.x;
                y[yb + i + 1u] = v.y;
                y[yb + i + 2u] = v.z;
                y[yb + i + 3u] = v.w;
            }
        }
        uint head, packed = hk_q8_1_quad(v, head);
        if (i < pc.n) {
            uint blk = qb + i / 32u * 9u;
            yq[blk + 1u + lid % 8u] = packed;
            if (lid % 8u == 0u)
                yq[blk] = head;
        }
    }
#endif
}
