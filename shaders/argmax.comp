#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Argmax over rows of logits: ids[r] = the lowest index of the largest x[r, i]; NaN never chosen
// (0xFFFFFFFF when the row has no number). One workgroup per row: each invocation scans its
// strided share in ascending order, then subgroup and shared-memory rounds keep the larger value,
// of equal values the lower index, so the result does not depend on the reduction's order.
#define HK_NO_WORKGROUP_SUM
#include "common.glsl"

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Ids { uint ids[]; };

HK_PUSH_BEGIN
    uint rows;
    uint n;
HK_PUSH_END

#define HK_NONE 0xFFFFFFFFu
#define HK_LOADS 8u // loads an invocation issues before it compares
shared float best_v[WG]; // per subgroup (at most WG of them)
shared uint best_i[WG];

void main()
{
    uint row = hk_group_id();
    if (row >= pc.rows)
        return;
    uint lid = gl_LocalInvocationID.x, xb = pc.view_offset[0] / 4u + row * pc.n;
    const float neg_inf = -1.0 / 0.0;
    float bv = neg_inf;
    uint bi = HK_NONE;
    // ascending i: strictly larger replaces, so of equal values the first stays. A row is long (a
    // vocabulary) and one workgroup reads it: each invocation issues HK_LOADS loads before it
    // compares any, so that the workgroup keeps many loads in flight, then the tail one by one.
    uint i0 = lid;
    for (; i0 + (HK_LOADS - 1u) * WG < pc.n; i0 += HK_LOADS * WG) {
        float v[HK_LOADS];
        [[unroll]] for (uint u = 0; u < HK_LOADS; u++)
            v[u] = x[xb + i0 + u * WG];
        [[unroll]] for (uint u = 0; u < HK_LOADS; u++)
            if (!isnan(v[u]) && (bi == HK_NONE || v[u] > bv)) {
                bv = v[u];
                bi = i0 + u * WG;
            }
    }
    for (uint i = i0; i < pc.n; i += WG) {
        float v = x[xb + i];
        if (!isnan(v) && (bi == HK_NONE || v > bv)) {
            bv = v;
            bi = i;
        }
    }
    // a lane without a number offers -inf and no index, so it never wins, even on a -inf row
    float m = subgroupMax(bi == HK_NONE ? neg_inf : bv);
    uint w = subgroupMin(bi != HK_NONE && bv == m ? bi : HK_NONE);
    if (subgroupElect()) {
        best_v[gl_SubgroupID] = m;
        best_i[gl_SubgroupID] = w;
    }
    barrier();
    if (lid == 0u) {
        // subgroups hold interleaved indices, so equal values compare by index, not by subgroup
        float rv = neg_inf;
        uint ri = HK_NONE;
        for (uint s = 0u; s < gl_NumSubgroups; s++) {
            float v = best_v[s];
            uint i = best_i[s];
            if (i != HK_NONE && (ri == HK_NONE || v > rv || (v == rv && i < ri))) {
                rv = v;
                ri = i;
            }
        }
        ids[pc.view_offset[1] / 4u + row] = ri;
    }
}
