/* f32 -> Q8_1 activation quantizer (shaders/quantize.comp). */
#include "family.h"

#define QUANTIZE_WG 64u /* 8 blocks: eight invocations each (shaders/q8_1.glsl) */

hk_status hk_quantize_q8_1(hk_context *context, hk_stream *stream, hk_view x, hk_view y, uint32_t k)
{
    static const char fn[] = "hk_quantize_q8_1";
    static const char *const names[] = {"x", "y"};
    if (k == 0 || k % 32)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a positive multiple of 32 (q8_1 block)", k);
    uint32_t blocks = k / 32;
    hk_binding b[2] = {
        {x, (uint64_t)k * 4, 4, 0, 0},
        {y, (uint64_t)blocks * 36, 4, 1, 0},
    };
    hk_status st = hk__check_bindings(context, stream, fn, names, b, 2);
    if (st != HK_OK)
        return st;
    uint32_t wg = QUANTIZE_WG;
    hk_dispatch_desc d = {.shader = HK_SHADER_QUANTIZE_Q8_1, .spec = &wg, .spec_count = 1, .bindings = b,
                          .binding_count = 2, .params = &blocks, .params_bytes = sizeof blocks,
                          .groups = (blocks + wg / 8 - 1) / (wg / 8)};
    return hk__dispatch(context, stream, fn, &d);
}

static hk_status prepare_quantize(hk__prep *p)
{
    HK_PREP_TRY(p, hk_quantize_q8_1(p->ctx, p->s, hk__prep_view(p, 0), hk__prep_view(p, 1), 2048));
    return HK_OK;
}

const hk__family hk__family_quantize_q8_1 = {"hk_quantize_q8_1", prepare_quantize, {NULL}};
