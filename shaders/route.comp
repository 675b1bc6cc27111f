#version 450
#extension GL_GOOGLE_include_directive : require
// Fused MoE router: per token, softmax over the n_experts logits, the top_k experts by logit
// (ties: the lower index) in descending order, their softmax weights, optionally renormalised to
// sum to 1 over the k. One workgroup per token; WG a power of two.
#include "common.glsl"

layout(binding = 0) readonly buffer Logits { float logits[]; };
layout(binding = 1) writeonly buffer Ids { uint ids[]; };
layout(binding = 2) writeonly buffer Weights { float weights[]; };

HK_PUSH_BEGIN
    uint tokens;
    uint n_experts;
    uint top_k;
    uint renorm;
HK_PUSH_END

#define HK_MAX_TOP_K 64u
shared float best_val[WG];
shared uint best_idx[WG];
shared uint chosen[HK_MAX_TOP_K];
shared float chosen_logit[HK_MAX_TOP_K];

// (va, ia) ranks before (vb, ib): larger logit, then lower index; NaN never ranks
bool hk_before(float va, uint ia, float vb, uint ib) { return va > vb || (va == vb && ia < ib); }

void main()
{
    uint token = hk_group_id();
    if (token >= pc.tokens)
        return;
    uint lid = gl_LocalInvocationID.x, E = pc.n_experts;
    uint lb = pc.view_offset[0] / 4u + token * E;
    float m = -1.0 / 0.0;
    // NaN logits take no part (max() of a NaN is undefined in GLSL)
    for (uint i = lid; i < E; i += WG) {
        float v = logits[lb + i];
        m = isnan(v) ? m : max(m, v);
    }
    m = hk_workgroup_max(m);
    float denom = 0.0;
    for (uint i = lid; i < E; i += WG) {
        float v = logits[lb + i];
        denom += isnan(v) ? 0.0 : exp(v - m);
    }
    denom = hk_workgroup_sum(denom);

    for (uint r = 0; r < pc.top_k; r++) {
        float bv = -1.0 / 0.0;
        uint bi = 0xFFFFFFFFu;
        for (uint i = lid; i < E; i += WG) {
            bool taken = false;
            for (uint j = 0; j < r; j++)
                taken = taken || chosen[j] == i;
            float v = logits[lb + i];
            if (!taken && hk_before(v, i, bv, bi)) { // bv starts at -inf, bi past every index
                bv = v;
                bi = i;
            }
        }
        best_val[lid] = bv;
        best_idx[lid] = bi;
        barrier();
        for (uint half_ = WG / 2u; half_ > 0u; half_ >>= 1) {
            if (lid < half_ && best_idx[lid + half_] != 0xFFFFFFFFu &&
                (best_idx[lid] == 0xFFFFFFFFu ||
                 hk_before(best_val[lid + half_], best_idx[lid + half_], best_val[lid], best_idx[lid]))) {
                best_val[lid] = best_val[lid + half_];
                best_idx[lid] = best_idx[lid + half_];
            }
            barrier();
        }
        if (lid == 0u) {
            chosen[r] = best_idx[0];
            chosen_logit[r] = best_val[0];
        }
        barrier();
    }
    if (lid == 0u) {
        uint ob = token * pc.top_k;
        float total = 0.0;
        for (uint r = 0; r < pc.top_k; r++)
            total += chosen[r] == 0xFFFFFFFFu ? 0.0 : exp(chosen_logit[r] - m) / denom;
        for (uint r = 0; r < pc.top_k; r++) {
            // fewer than top_k experts with a number for a logit: the rest get an id out of
            // range (which hk_moe_matvec turns into zeros) and weight 0
            float w = chosen[r] == 0xFFFFFFFFu ? 0.0 : exp(chosen_logit[r] - m) / denom;
            ids[pc.view_offset[1] / 4u + ob + r] = chosen[r];
            weights[pc.view_offset[2] / 4u + ob + r] = pc.renorm != 0u && total > 0.0 ? w / total : w;
        }
    }
}
