/* Elementwise kernels: the residual add and the gated activations (shaders/elementwise.comp). */
#include "elementwise.h"

#include <math.h>

#define ELEMENTWISE_WG 256u

/* Records one elementwise dispatch over `count` outputs: the 16-byte variant where every view's
 * offset is a multiple of 16 and the counts are multiples of 4, else the scalar one. */
static hk_status dispatch_elementwise(hk_context *context, hk_stream *stream, const char *fn, int shader,
                                      int shader_vec4, const hk_binding b[3], uint32_t count, uint32_t n,
                                      uint32_t in_stride, float alpha)
{
    int vec4 = n % 4 == 0 && in_stride % 4 == 0;
    for (int i = 0; i < 3; i++)
        vec4 = vec4 && hk__load_width(b[i].view.offset) == 2;
    uint32_t unit = vec4 ? 4 : 1;
    uint32_t wg = ELEMENTWISE_WG < context->caps.max_workgroup_size ? ELEMENTWISE_WG : context->caps.max_workgroup_size;
    struct {
        uint32_t count, n, in_stride;
        float alpha;
    } params = {count / unit, n / unit, in_stride / unit, alpha};
    hk_dispatch_desc d = {.shader = vec4 ? shader_vec4 : shader, .spec = &wg, .spec_count = 1, .bindings = b,
                          .binding_count = 3, .params = &params, .params_bytes = sizeof params,
                          .groups = ((uint64_t)params.count + wg - 1) / wg};
    return hk__dispatch(context, stream, fn, &d);
}

static hk_status add_any(hk_context *context, hk_stream *stream, const char *fn, hk_view a, hk_view b, hk_view y,
                         uint32_t n, float alpha)
{
    static const char *const names[] = {"a", "b", "y"};
    if (n == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n=0 must be positive");
    if (!isfinite(alpha))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "alpha=%g must be finite", (double)alpha);
    hk_binding bind[3] = {
        {a, (uint64_t)n * 4, 4, 0, 0},
        {b, (uint64_t)n * 4, 4, 0, 0},
        {y, (uint64_t)n * 4, 4, 1, 1},
    };
    hk_status st = hk__check_bindings(context, stream, fn, names, bind, 3);
    if (st != HK_OK)
        return st;
    return dispatch_elementwise(context, stream, fn, HK_SHADER_ADD, HK_SHADER_ADD_VEC4, bind, n, n, n, alpha);
}

hk_status hk_add_scaled(hk_context *context, hk_stream *stream, hk_view a, hk_view b, hk_view y, uint32_t n,
                        float alpha)
{
    return add_any(context, stream, "hk_add_scaled", a, b, y, n, alpha);
}

hk_status hk_add(hk_context *context, hk_stream *stream, hk_view a, hk_view b, hk_view y, uint32_t n)
{
    return add_any(context, stream, "hk_add", a, b, y, n, 1.0f);
}

hk_status hk__check_glu_mode(const char *fn, hk_glu_mode mode)
{
    if (mode != HK_GLU_SILU && mode != HK_GLU_GELU_TANH)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "mode=%d is not an hk_glu_mode (HK_GLU_SILU, HK_GLU_GELU_TANH)",
                        (int)mode);
    return HK_OK;
}

hk_status hk_swiglu(hk_context *context, hk_stream *stream, hk_view gate, hk_view up, hk_view y, uint32_t rows,
                    uint32_t n, uint32_t in_stride, hk_glu_mode mode)
{
    static const char fn[] = "hk_swiglu";
    static const char *const names[] = {"gate", "up", "y"};
    if (rows == 0 || n == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u and n=%u must both be positive", rows, n);
    if (in_stride < n)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "in_stride=%u is less than n=%u", in_stride, n);
    hk_status st = hk__check_glu_mode(fn, mode);
    if (st != HK_OK)
        return st;
    /* counted in 64 bits, then held to 32 (the shader's indices) before the bytes are formed */
    uint64_t out = (uint64_t)rows * n, span = (uint64_t)(rows - 1) * in_stride + n;
    if (out > UINT32_MAX || span > UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                        "rows=%u, n=%u, in_stride=%u span %llu floats, more than 2^32 - 1 elements", rows, n,
                        in_stride, (unsigned long long)(span > out ? span : out));
    hk_binding b[3] = {
        {gate, span * 4, 4, 0, 0},
        {up, span * 4, 4, 0, 0},
        {y, out * 4, 4, 1, 1},
    };
    st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;
    int gelu = mode == HK_GLU_GELU_TANH;
    return dispatch_elementwise(context, stream, fn, gelu ? HK_SHADER_GLU_GELU : HK_SHADER_GLU_SILU,
                                gelu ? HK_SHADER_GLU_GELU_VEC4 : HK_SHADER_GLU_SILU_VEC4, b, (uint32_t)out, n,
                                in_stride, 0.0f);
}

/* the 16-byte and the scalar variant (n off a multiple of 4) */
static hk_status prepare_add(hk__prep *p)
{
    hk_view a = hk__prep_view(p, 0), b = hk__prep_view(p, 1), y = hk__prep_view(p, 2);
    HK_PREP_TRY(p, hk_add(p->ctx, p->s, a, b, y, 4096));
    HK_PREP_TRY(p, hk_add(p->ctx, p->s, a, b, y, 4095));
    return HK_OK;
}

/* each mode, 16-byte and scalar */
static hk_status prepare_swiglu(hk__prep *p)
{
    hk_view g = hk__prep_view(p, 0), u = hk__prep_view(p, 1), y = hk__prep_view(p, 2);
    for (int mode = HK_GLU_SILU; mode <= HK_GLU_GELU_TANH; mode++) {
        HK_PREP_TRY(p, hk_swiglu(p->ctx, p->s, g, u, y, 1, 14336, 14336, (hk_glu_mode)mode));
        HK_PREP_TRY(p, hk_swiglu(p->ctx, p->s, g, u, y, 1, 14335, 14335, (hk_glu_mode)mode));
    }
    return HK_OK;
}

const hk__family hk__family_add = {"hk_add", prepare_add, {NULL}};
const hk__family hk__family_swiglu = {"hk_swiglu", prepare_swiglu, {NULL}};
