/* Row-wise kernels over logits: argmax (greedy decoding) and softmax with a temperature
 * (sampling), one workgroup per row (shaders/argmax.comp, shaders/softmax.comp). */
#include "family.h"

#include <math.h>

#define ROWWISE_WG 256u
#define ROWWISE_WIDE_WG 1024u
#define ROWWISE_FEW_ROWS 64u

/* The checks both kernels share: the shape, its loop limit, the views. Each invocation loops at
 * most three times over n / wg values (wg >= 128, the least any Vulkan device offers) and three
 * times over the workgroup's subgroups (at most 1024 / 4): with n <= 2^21, at most
 * 3 * 16384 + 3 * 256 iterations. */
static hk_status check_rows(hk_context *context, hk_stream *stream, const char *fn, const char *const *names,
                            hk_binding b[2], uint32_t rows, uint32_t n)
{
    if (rows == 0 || n == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u and n=%u must both be positive", rows, n);
    hk_status st = hk__check_limit(fn, "n", n, HK_ROWWISE_MAX_N);
    if (st != HK_OK)
        return st;
    /* rows * n fits the device's binding range, so every index the shaders form fits 32 bits */
    return hk__check_bindings(context, stream, fn, names, b, 2);
}

/* Rows are long (a vocabulary) and few in decoding: one row per workgroup leaves most of the
 * device idle, so a wider workgroup shortens the row's chain of loads. */
static uint32_t rowwise_wg(const hk_context *context, uint32_t rows, uint32_t n)
{
    uint32_t wg = rows < ROWWISE_FEW_ROWS && n >= 4 * ROWWISE_WIDE_WG ? ROWWISE_WIDE_WG : ROWWISE_WG;
    return wg < context->caps.max_workgroup_size ? wg : context->caps.max_workgroup_size;
}

hk_status hk_argmax(hk_context *context, hk_stream *stream, hk_view x, hk_view ids, uint32_t rows, uint32_t n)
{
    static const char fn[] = "hk_argmax";
    static const char *const names[] = {"x", "ids"};
    hk_binding b[2] = {
        {x, (uint64_t)rows * n * 4, 4, 0, 0},
        {ids, (uint64_t)rows * 4, 4, 1, 0},
    };
    hk_status st = check_rows(context, stream, fn, names, b, rows, n);
    if (st != HK_OK)
        return st;
    uint32_t wg = rowwise_wg(context, rows, n), params[2] = {rows, n};
    hk_dispatch_desc d = {.shader = HK_SHADER_ARGMAX, .spec = &wg, .spec_count = 1, .bindings = b,
                          .binding_count = 2, .params = params, .params_bytes = sizeof params, .groups = rows};
    return hk__dispatch(context, stream, fn, &d);
}

hk_status hk_softmax(hk_context *context, hk_stream *stream, hk_view x, hk_view y, uint32_t rows, uint32_t n,
                     float temperature)
{
    static const char fn[] = "hk_softmax";
    static const char *const names[] = {"x", "y"};
    if (!(temperature > 0.0f) || !isfinite(temperature))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "temperature=%g must be positive and finite",
                        (double)temperature);
    hk_binding b[2] = {
        {x, (uint64_t)rows * n * 4, 4, 0, 0},
        {y, (uint64_t)rows * n * 4, 4, 1, 1},
    };
    hk_status st = check_rows(context, stream, fn, names, b, rows, n);
    if (st != HK_OK)
        return st;
    uint32_t wg = rowwise_wg(context, rows, n);
    struct {
        uint32_t rows, n;
        float inv_t;
    } params = {rows, n, 1.0f / temperature};
    hk_dispatch_desc d = {.shader = HK_SHADER_SOFTMAX, .spec = &wg, .spec_count = 1, .bindings = b,
                          .binding_count = 2, .params = &params, .params_bytes = sizeof params, .groups = rows};
    return hk__dispatch(context, stream, fn, &d);
}

/* a wide workgroup for a few long rows (a vocabulary in decoding), the default otherwise */
static hk_status prepare_argmax(hk__prep *p)
{
    hk_view x = hk__prep_view(p, 0), ids = hk__prep_view(p, 1);
    HK_PREP_TRY(p, hk_argmax(p->ctx, p->s, x, ids, 1, 151936));
    HK_PREP_TRY(p, hk_argmax(p->ctx, p->s, x, ids, 64, 151936));
    return HK_OK;
}

static hk_status prepare_softmax(hk__prep *p)
{
    hk_view x = hk__prep_view(p, 0), y = hk__prep_view(p, 1);
    HK_PREP_TRY(p, hk_softmax(p->ctx, p->s, x, y, 1, 151936, 1.0f));
    HK_PREP_TRY(p, hk_softmax(p->ctx, p->s, x, y, 64, 151936, 1.0f));
    return HK_OK;
}

const hk__family hk__family_argmax = {"hk_argmax", prepare_argmax, {NULL}};
const hk__family hk__family_softmax = {"hk_softmax", prepare_softmax, {NULL}};
