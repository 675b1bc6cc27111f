/* MoE combine: each token's top-k expert outputs summed with the router's weights, optionally onto
 * a residual (shaders/moe_combine.comp). */
#include "family.h"

#define MOE_COMBINE_WG 128u
#define MOE_COMBINE_MAX_TOP_K 64u /* hk_moe_route's */

hk_status hk_moe_combine(hk_context *context, hk_stream *stream, hk_view x, hk_view weights, hk_view residual,
                         hk_view y, uint32_t tokens, uint32_t top_k, uint32_t n)
{
    static const char fn[] = "hk_moe_combine";
    static const char *const names[] = {"x", "weights", "residual", "y"};
    if (tokens == 0 || n == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=%u and n=%u must both be positive", tokens, n);
    if (top_k == 0 || top_k > MOE_COMBINE_MAX_TOP_K)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "top_k=%u must be in 1..%u", top_k, MOE_COMBINE_MAX_TOP_K);
    /* the shader indexes x with 32-bit integers */
    uint64_t slots = (uint64_t)tokens * top_k;
    if (slots > UINT32_MAX / n)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=%u x top_k=%u x n=%u is more than 2^32 - 1 values",
                        tokens, top_k, n);
    int has_residual;
    hk_status st = hk__optional_view(fn, "residual", residual, &has_residual);
    if (st != HK_OK)
        return st;
    /* y may be exactly residual and overlap nothing else: in place, residual is checked as y is (the
     * same view and bytes), so an overlap with x or weights is still refused */
    int in_place = has_residual && residual.buffer == y.buffer && residual.offset == y.offset;
    uint64_t out_bytes = (uint64_t)tokens * n * 4;
    hk_view none = {x.buffer, x.offset};
    hk_binding b[4] = {
        {x, slots * n * 4, 4, 0, 0},
        {weights, slots * 4, 4, 0, 0},
        has_residual && !in_place ? (hk_binding){residual, out_bytes, 4, 0, 0} : (hk_binding){none, 0, 1, 0, 0},
        {y, out_bytes, 4, 1, 0},
    };
    st = hk__check_bindings(context, stream, fn, names, b, 4);
    if (st != HK_OK)
        return st;
    if (in_place)
        b[2] = (hk_binding){residual, out_bytes, 4, 0, 0};
    uint32_t total = tokens * n, wg = MOE_COMBINE_WG;
    uint32_t params[4] = {total, top_k, n, has_residual ? 1u : 0u};
    hk_dispatch_desc d = {.shader = HK_SHADER_MOE_COMBINE, .spec = &wg, .spec_count = 1, .bindings = b,
                          .binding_count = 4, .params = params, .params_bytes = sizeof params,
                          .groups = ((uint64_t)total + wg - 1) / wg};
    return hk__dispatch(context, stream, fn, &d);
}

static hk_status prepare_moe_combine(hk__prep *p)
{
    HK_PREP_TRY(p, hk_moe_combine(p->ctx, p->s, hk__prep_view(p, 0), hk__prep_view(p, 1), hk__prep_view(p, 2),
                                  hk__prep_view(p, 3), 1, 8, 2048));
    return HK_OK;
}

const hk__family hk__family_moe_combine = {"hk_moe_combine", prepare_moe_combine, {NULL}};
