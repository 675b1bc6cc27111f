/* RMSNorm over rows (shaders/rmsnorm.comp). */
#include "family.h"

#include <math.h>
#include <string.h>

#define RMSNORM_WG 128u
#define RMSNORM_WIDE_WG 512u
#define RMSNORM_FEW_ROWS 64u

hk_status hk_rmsnorm(hk_context *context, hk_stream *stream, hk_view x, hk_view weight, hk_view y, uint32_t rows,
                     uint32_t n, float eps)
{
    static const char fn[] = "hk_rmsnorm";
    static const char *const names[] = {"x", "weight", "y"};
    if (rows == 0 || n == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u and n=%u must both be positive", rows, n);
    if (!(eps > 0.0f) || !isfinite(eps))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "eps=%g must be positive and finite", (double)eps);
    /* each invocation loops twice over n / wg values (wg >= 128) and twice over wg / subgroup
     * partial sums (wg <= 512): with n <= 2^20, at most 2 * 8193 + 2 * 129 iterations */
    hk_status st = hk__check_limit(fn, "n", n, HK_RMSNORM_MAX_N);
    if (st != HK_OK)
        return st;
    hk_binding b[3] = {
        {x, (uint64_t)rows * n * 4, 4, 0, 0},
        {weight, (uint64_t)n * 4, 4, 0, 0},
        {y, (uint64_t)rows * n * 4, 4, 1, 1},
    };
    st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;
    /* a token or a few: one row per workgroup leaves most of the device idle, so a wider
     * workgroup shortens the row's chain of loads */
    uint32_t wg = rows < RMSNORM_FEW_ROWS && n >= 4 * RMSNORM_WIDE_WG ? RMSNORM_WIDE_WG : RMSNORM_WG;
    if (wg > context->caps.max_workgroup_size)
        wg = context->caps.max_workgroup_size;
    struct {
        uint32_t rows, n;
        float eps;
    } params = {rows, n, eps};
    hk_dispatch_desc d = {.shader = HK_SHADER_RMSNORM, .spec = &wg, .spec_count = 1, .bindings = b,
                          .binding_count = 3, .params = &params, .params_bytes = sizeof params, .groups = rows};
    return hk__dispatch(context, stream, fn, &d);
}

/* a wide workgroup for a few long rows, the default otherwise */
static hk_status prepare_rmsnorm(hk__prep *p)
{
    hk_view x = hk__prep_view(p, 0), w = hk__prep_view(p, 1), y = hk__prep_view(p, 2);
    HK_PREP_TRY(p, hk_rmsnorm(p->ctx, p->s, x, w, y, 1, 4096, 1e-6f));
    HK_PREP_TRY(p, hk_rmsnorm(p->ctx, p->s, x, w, y, 64, 64, 1e-6f));
    return HK_OK;
}

const hk__family hk__family_rmsnorm = {"hk_rmsnorm", prepare_rmsnorm, {NULL}};
