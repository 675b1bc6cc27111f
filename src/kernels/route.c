/* Fused MoE router: softmax + top-k, one subgroup per token (shaders/route.comp). */
#include "family.h"

#define ROUTE_MAX_TOP_K 64u

hk_status hk_moe_route(hk_context *context, hk_stream *stream, hk_view logits, hk_view ids, hk_view weights,
                       uint32_t tokens, uint32_t n_experts, uint32_t top_k, int renormalize)
{
    static const char fn[] = "hk_moe_route";
    static const char *const names[] = {"logits", "ids", "weights"};
    if (tokens == 0 || n_experts == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=%u and n_experts=%u must both be positive", tokens,
                        n_experts);
    if (top_k == 0 || top_k > n_experts || top_k > ROUTE_MAX_TOP_K)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "top_k=%u must be in 1..min(n_experts=%u, %u)", top_k, n_experts,
                        ROUTE_MAX_TOP_K);
    hk_binding b[3] = {
        {logits, (uint64_t)tokens * n_experts * 4, 4, 0, 0},
        {ids, (uint64_t)tokens * top_k * 4, 4, 1, 0},
        {weights, (uint64_t)tokens * top_k * 4, 4, 1, 0},
    };
    hk_status st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;
    /* one subgroup per token: with size control, exactly the device's subgroup size; without it
     * the smallest size the device may pick, so that the workgroup can never span two subgroups */
    int control = !!(context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL);
    uint32_t wg = control ? context->caps.subgroup_size : context->caps.subgroup_size_min;
    if ((uint64_t)n_experts > 64ull * wg)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "n_experts=%u is more than this device's router takes (64 x subgroup %u = %u)",
                        n_experts, wg, 64u * wg);
    /* the logits staged in shared memory: 64 per lane, fewer where the device has less shared
     * memory (a multiple of the subgroup) */
    uint32_t stage = 64u * wg, room = (context->caps.shared_memory_bytes - 4u * ROUTE_MAX_TOP_K) / 4u / wg * wg;
    if (stage > room)
        stage = room;
    if (n_experts > stage)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "n_experts=%u is more than this device's router takes (%u logits in "
                        "its shared memory)", n_experts, stage);
    uint32_t params[4] = {tokens, n_experts, top_k, renormalize ? 1u : 0u}, spec[2] = {wg, stage};
    hk_dispatch_desc d = {.shader = HK_SHADER_ROUTE, .subgroup_size = control ? wg : 0, .spec = spec, .spec_count = 2,
                          .bindings = b, .binding_count = 3, .params = params, .params_bytes = sizeof params,
                          .groups = tokens};
    return hk__dispatch(context, stream, fn, &d);
}

static hk_status prepare_route(hk__prep *p)
{
    HK_PREP_TRY(p, hk_moe_route(p->ctx, p->s, hk__prep_view(p, 0), hk__prep_view(p, 1), hk__prep_view(p, 2), 1, 128, 8,
                                1));
    return HK_OK;
}

const hk__family hk__family_moe_route = {"hk_moe_route", prepare_route, {NULL}};
