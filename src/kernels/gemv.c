/* f32 GEMV, the MoE router gate, for one token or several (shaders/gemv.comp). */
#include "family.h"

#define GEMV_WG 128u    /* every Vulkan device takes it: maxComputeWorkGroupInvocations >= 128 */
#define GEMV_TOKENS 8u  /* tokens per workgroup: TB in shaders/gemv.comp */

static hk_status gemv(hk_context *context, hk_stream *stream, const char *fn, hk_view w, hk_view x, hk_view y,
                      uint32_t rows, uint32_t k, uint32_t tokens)
{
    static const char *const names[] = {"w", "x", "y"};
    if (rows == 0 || k == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u and k=%u must both be positive", rows, k);
    if (tokens == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=0 must be positive");
    /* each invocation loops k / GEMV_WG times, then once per subgroup to reduce (the tokens are
     * written out, no loop): with k <= 2^20, at most 8192 + 32 iterations on subgroups of 4 */
    hk_status st = hk__check_limit(fn, "k", k, HK_GEMV_MAX_K);
    if (st != HK_OK)
        return st;
    /* the shader indexes in 32 bits; the views' byte counts below stay exact */
    if ((uint64_t)tokens * rows > UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=%u x rows=%u is more than 2^32 - 1 values", tokens,
                        rows);
    if ((uint64_t)tokens * k > UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=%u x k=%u is more than 2^32 - 1 values", tokens, k);
    hk_binding b[3] = {
        {w, (uint64_t)rows * k * 4, 4, 0, 0},
        {x, (uint64_t)tokens * k * 4, 4, 0, 0},
        {y, (uint64_t)tokens * rows * 4, 4, 1, 0},
    };
    st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;
    uint32_t wg = GEMV_WG;
    uint32_t params[3] = {rows, k, tokens};
    hk_dispatch_desc d = {.shader = HK_SHADER_GEMV_F32, .spec = &wg, .spec_count = 1, .bindings = b,
                          .binding_count = 3, .params = params, .params_bytes = sizeof params,
                          .groups = (uint64_t)rows * ((tokens + GEMV_TOKENS - 1) / GEMV_TOKENS)};
    return hk__dispatch(context, stream, fn, &d);
}

hk_status hk_gemv_f32_tokens(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                             uint32_t k, uint32_t tokens)
{
    return gemv(context, stream, "hk_gemv_f32_tokens", w, x, y, rows, k, tokens);
}

hk_status hk_gemv_f32(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                      uint32_t k)
{
    return gemv(context, stream, "hk_gemv_f32", w, x, y, rows, k, 1);
}

/* every token count takes the one pipeline */
static hk_status prepare_gemv(hk__prep *p)
{
    HK_PREP_TRY(p, hk_gemv_f32_tokens(p->ctx, p->s, hk__prep_view(p, 0), hk__prep_view(p, 1), hk__prep_view(p, 2), 128,
                                      2048, 512));
    return HK_OK;
}

const hk__family hk__family_gemv_f32 = {"hk_gemv_f32", prepare_gemv, {NULL}};
