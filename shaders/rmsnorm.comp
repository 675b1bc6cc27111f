#version 450
#extension GL_GOOGLE_include_directive : require
// RMSNorm y[r, i] = x[r, i] / sqrt(mean(x[r, :]^2) + eps) * weight[i]. One workgroup per row;
// y may alias x exactly (each invocation reads its elements before writing them).
// HK_Q8_1 (hk_rmsnorm_q8_1): also the row's Q8_1 blocks of y's values (q8_1.glsl, as quantize.comp),
// y written only where pc.write_y. The sum of squares and each y are hk_rmsnorm's code, so its bits.
// HK_STAGED: the sum of squares over the row staged in shared memory (norm.glsl's HK_NORM_STAGED:
// coalesced loads, and a row of one chunk read once); the same order, so the same bits.
#include "common.glsl"
#ifdef HK_Q8_1
#include "q8_1.glsl"
#endif

layout(binding = 0) readonly buffer X { float x[]; };
#ifdef HK_STAGED
uint hk_row_x; // the row's first value in x
#define HK_NORM_SRC(i) x[hk_row_x + (i)]
layout(constant_id = 1) const uint HK_RMSNORM_SB = 128; // blocks per staged chunk
#define HK_NORM_SB HK_RMSNORM_SB
#define HK_NORM_STAGED
#endif
#include "norm.glsl"
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

#ifdef HK_STAGED
float row_sumsq(uint xb, uint n)
{
    hk_row_x = xb;
    return hk_norm_sumsq_staged(n);
}

// x[xb + i]: the staged copy where the whole row was one chunk
float row_x(uint xb, uint i)
{
    if (pc.n <= 32u * HK_NORM_SB)
        return hk_norm_staged(i);
    return x[xb + i];
}
#else
// norm.glsl's order: per chunk of WG blocks, each invocation a block's P_b, then the first WG / 32
// invocations a group's G_g each; the G_g kept for the end (n <= HK_RMSNORM_MAX_N: 1024 groups)
shared float hk_ss_p[WG];
shared float hk_ss_g[1024];

float row_sumsq(uint xb, uint n)
{
    uint nb = (n + 31u) / 32u, lid = gl_LocalInvocationID.x;
    for (uint c = 0; c < nb; c += WG) {
        uint b = c + lid;
        hk_ss_p[lid] = b < nb ? hk_block_sumsq(xb + 32u * b, min(32u, n - 32u * b)) : 0.0;
        barrier();
        uint g0 = c + 32u * lid;
        if (lid < WG / 32u && g0 < nb) {
            precise float s = 0.0;
            for (uint j = 0; j < min(32u, nb - g0); j++)
                s = s + hk_ss_p[32u * lid + j];
            hk_ss_g[g0 / 32u] = s;
        }
        barrier();
    }
    precise float t = 0.0;
    for (uint g = 0; g < (nb + 31u) / 32u; g++)
        t = t + hk_ss_g[g];
    return t;
}

float row_x(uint xb, uint i) { return x[xb + i]; }
#endif

void main()
{
    uint row = hk_group_id();
    if (row >= pc.rows)
        return;
    uint xb = pc.view_offset[0] / 4u + row * pc.n, wb = pc.view_offset[1] / 4u, yb = pc.view_offset[2] / 4u + row * pc.n;
    float scale = hk_norm_scale(row_sumsq(xb, pc.n), pc.n, pc.eps);
#ifndef HK_Q8_1
    for (uint i = gl_LocalInvocationID.x; i < pc.n; i += WG)
        y[yb + i] = hk_norm_apply(row_x(xb, i), scale, weight[wb + i]);
#else
    // steps of 4 * WG values, four consecutive ones per invocation: whole blocks (n is a multiple of
    // 32), eight invocations each; invocations past the row's end quantize zeros for the barriers
    uint lid = gl_LocalInvocationID.x, qb = pc.view_offset[3] / 4u + row * (pc.n / 32u) * 9u;
    for (uint c = 0; c < pc.n; c += 4u * WG) {
        uint i = c + 4u * lid;
        vec4 v = vec4(0.0);
        if (i < pc.n) {
            v = hk_norm_apply4(vec4(row_x(xb, i), row_x(xb, i + 1u), row_x(xb, i + 2u), row_x(xb, i + 3u)), scale,
                               vec4(weight[wb + i], weight[wb + i + 1u], weight[wb + i + 2u], weight[wb + i + 3u]));
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
