#version 450
#extension GL_GOOGLE_include_directive : require
// Fused MoE router: per token, softmax over the n_experts logits, the top_k experts by logit
// (ties: the lower index) in descending order, their softmax weights, optionally renormalised to
// sum to 1 over the k. One subgroup per token (the host makes the workgroup one subgroup): each
// lane owns experts lane, lane + WG, ...; every round picks the best unchosen expert with two
// subgroup reductions, so there is no barrier anywhere. Each lane copies its logits into shared
// memory once and reads them back in every round (its own entries only, so no barrier): the rounds
// wait on no memory round trip.
#include "common.glsl"

// logits a token stages: a multiple of WG, at least n_experts (the host's)
layout(constant_id = 1) const uint HK_ROUTE_STAGE = 2048;

layout(binding = 0) readonly buffer Logits { float logits[]; };
layout(binding = 1) writeonly buffer Ids { uint ids[]; };
layout(binding = 2) writeonly buffer Weights { float weights[]; };

HK_PUSH_BEGIN
    uint tokens;
    uint n_experts; // at most 64 * WG: each lane marks its chosen experts in two 32-bit masks
    uint top_k;
    uint renorm;
HK_PUSH_END

#define HK_MAX_TOP_K 64u
shared float chosen_w[HK_MAX_TOP_K]; // written and read by the first lane only
shared float lg[HK_ROUTE_STAGE];      // lg[i] written and read by lane i % WG only
#define HK_ROUTE_LOGIT(i) lg[i]
#include "route.glsl"

void main()
{
    uint token = hk_group_id();
    if (token >= pc.tokens)
        return;
    uint lane = gl_LocalInvocationID.x, E = pc.n_experts;
    uint lb = pc.view_offset[0] / 4u + token * E;
    const float neg_inf = -1.0 / 0.0;
    // NaN logits take no part (max() of a NaN is undefined in GLSL)
    float m = neg_inf;
    for (uint i = lane; i < E; i += WG) {
        float v = logits[lb + i];
        lg[i] = v;
        m = isnan(v) ? m : max(m, v);
    }
    m = subgroupMax(m);
    float denom = 0.0;
    for (uint i = lane; i < E; i += WG) {
        float v = lg[i];
        denom += isnan(v) ? 0.0 : exp(v - m);
    }
    denom = subgroupAdd(denom);

    uvec2 taken = uvec2(0u); // bit j: expert lane + j*WG is chosen
    uint ob = token * pc.top_k;
    float total = 0.0;
    for (uint r = 0; r < pc.top_k; r++) {
        float best;
        uint win = hk_route_round(lane, WG, E, taken, best);
        // fewer than top_k experts with a number for a logit: the rest get an id out of range
        // (which hk_moe_matvec turns into zeros) and weight 0
        float w = win == HK_NONE ? 0.0 : exp(best - m) / denom;
        total += w;
        if (lane == 0u) {
            ids[pc.view_offset[1] / 4u + ob + r] = win;
            chosen_w[r] = w;
        }
    }
    if (lane == 0u)
        for (uint r = 0; r < pc.top_k; r++)
            weights[pc.view_offset[2] / 4u + ob + r] = pc.renorm != 0u && total > 0.0 ? chosen_w[r] / total : chosen_w[r];
}
