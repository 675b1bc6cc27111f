/* The embedding lookup: rows of a weight matrix gathered by ids read on the device, dequantized to
 * f32 (shaders/get_rows.comp, one variant per weight type). */
#include "family.h"

#define GET_ROWS_WG 128u /* every Vulkan device takes it: maxComputeWorkGroupInvocations >= 128 */

typedef struct get_rows_type {
    int takes;
    int shader;
} get_rows_type;

static const get_rows_type get_rows_types[HK_REF_TYPES] = {
    [HK_TYPE_F32] = {1, HK_SHADER_GET_ROWS_F32},   [HK_TYPE_F16] = {1, HK_SHADER_GET_ROWS_F16},
    [HK_TYPE_Q8_0] = {1, HK_SHADER_GET_ROWS_Q8_0}, [HK_TYPE_Q4_K] = {1, HK_SHADER_GET_ROWS_Q4_K},
    [HK_TYPE_Q5_K] = {1, HK_SHADER_GET_ROWS_Q5_K}, [HK_TYPE_Q6_K] = {1, HK_SHADER_GET_ROWS_Q6_K},
};

hk_status hk_get_rows(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view ids, hk_view y,
                      uint32_t n_ids, uint32_t rows, uint32_t k)
{
    static const char fn[] = "hk_get_rows";
    static const char *const names[] = {"w", "ids", "y"};
    if (!HK_TYPE_TAKES(get_rows_types, wtype))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn,
                        "wtype=%s (%d) is not a get_rows type (f32, f16, q8_0, q4_k, q5_k, q6_k)", hk_type_name(wtype),
                        (int)wtype);
    if (n_ids == 0 || rows == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_ids=%u and rows=%u must both be positive", n_ids, rows);
    uint32_t block = hk_type_block_values(wtype);
    if (k == 0 || k % block)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a positive multiple of %u (%s block)", k, block,
                        hk_type_name(wtype));
    /* the shader indexes the output with 32-bit integers */
    uint64_t total = (uint64_t)n_ids * k;
    if (total > UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_ids=%u x k=%u is more than 2^32 - 1 values", n_ids, k);
    uint64_t row_bytes = hk_type_bytes(wtype, k);
    /* saturated: a matrix past 2^64 bytes is refused as past its buffer's end */
    uint64_t w_bytes = row_bytes > UINT64_MAX / rows ? UINT64_MAX : row_bytes * rows;
    hk_binding b[3] = {
        {w, w_bytes, hk_type_alignment(wtype), 0, 0},
        {ids, (uint64_t)n_ids * 4, 4, 0, 0},
        {y, total * 4, 4, 1, 0},
    };
    hk_status st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;
    /* f32 rows are bound as 32-bit words, the others as 16-bit ones (GGUF blocks are 2-byte aligned) */
    uint32_t row_units = (uint32_t)(wtype == HK_TYPE_F32 ? k : row_bytes / 2);
    uint32_t params[4] = {(uint32_t)total, rows, k, row_units};
    uint32_t wg = GET_ROWS_WG;
    hk_dispatch_desc d = {.shader = get_rows_types[wtype].shader, .spec = &wg, .spec_count = 1, .bindings = b,
                          .binding_count = 3, .params = params, .params_bytes = sizeof params,
                          .groups = (total + wg - 1) / wg};
    return hk__dispatch(context, stream, fn, &d);
}

/* a pipeline per type */
static hk_status prepare_get_rows(hk__prep *p)
{
    for (int t = 0; t < HK_REF_TYPES; t++)
        if (HK_TYPE_TAKES(get_rows_types, t))
            HK_PREP_TRY(p, hk_get_rows(p->ctx, p->s, (hk_type)t, hk__prep_view(p, 0), hk__prep_view(p, 1),
                                       hk__prep_view(p, 2), 1, 1, hk_type_block_values((hk_type)t)));
    return HK_OK;
}

const hk__family hk__family_get_rows = {"hk_get_rows", prepare_get_rows, {NULL}};
