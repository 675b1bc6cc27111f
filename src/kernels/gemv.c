/* f32 GEMV, the MoE router gate (shaders/gemv.comp). */
#include "family.h"

#define GEMV_WG 128u /* every Vulkan device takes it: maxComputeWorkGroupInvocations >= 128 */

hk_status hk_gemv_f32(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                      uint32_t k)
{
    static const char fn[] = "hk_gemv_f32";
    static const char *const names[] = {"w", "x", "y"};
    if (rows == 0 || k == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u and k=%u must both be positive", rows, k);
    /* each invocation loops k / GEMV_WG times, then once per subgroup to reduce: with k <= 2^20,
     * at most 8192 + 33 iterations on subgroups of 4 */
    hk_status st = hk__check_limit(fn, "k", k, HK_GEMV_MAX_K);
    if (st != HK_OK)
        return st;
    hk_binding b[3] = {
        {w, (uint64_t)rows * k * 4, 4, 0, 0},
        {x, (uint64_t)k * 4, 4, 0, 0},
        {y, (uint64_t)rows * 4, 4, 1, 0},
    };
    st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;
    uint32_t wg = GEMV_WG;
    uint32_t params[2] = {rows, k};
    hk_dispatch_desc d = {.shader = HK_SHADER_GEMV_F32, .spec = &wg, .spec_count = 1, .bindings = b,
                          .binding_count = 3, .params = params, .params_bytes = sizeof params, .groups = rows};
    return hk__dispatch(context, stream, fn, &d);
}

static hk_status prepare_gemv(hk__prep *p)
{
    HK_PREP_TRY(p, hk_gemv_f32(p->ctx, p->s, hk__prep_view(p, 0), hk__prep_view(p, 1), hk__prep_view(p, 2), 1, 2048));
    return HK_OK;
}

const hk__family hk__family_gemv_f32 = {"hk_gemv_f32", prepare_gemv, {NULL}};
