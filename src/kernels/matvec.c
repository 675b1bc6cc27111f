/* Dense quantized matvec over GGUF weight rows (shaders/matvec.comp). Two layouts of the work:
 * subgroup rows (several rows per subgroup, wide loads) where the device can require full
 * subgroups and the views are aligned for it, else the portable one-workgroup-per-row kernel. */
#include "internal.h"

/* Portable kernel: one invocation per 32-value unit of a 4096-wide row. */
#define MATVEC_WG 128u
/* Subgroup-rows kernel: rows per subgroup (HK_NROWS in the shader) and subgroups per workgroup. */
#define MATVEC_NROWS 4u
#define MATVEC_SUBGROUPS 4u

hk_status hk_matvec(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view x, hk_view y,
                    uint32_t rows, uint32_t k)
{
    static const char fn[] = "hk_matvec";
    static const char *const names[] = {"w", "x", "y"};
    int shader, rows_shader;
    switch (wtype) {
    case HK_TYPE_Q8_0: shader = HK_SHADER_MATVEC_Q8_0, rows_shader = HK_SHADER_MATVEC_Q8_0_ROWS; break;
    case HK_TYPE_Q4_K: shader = HK_SHADER_MATVEC_Q4_K, rows_shader = HK_SHADER_MATVEC_Q4_K_ROWS; break;
    case HK_TYPE_Q6_K: shader = HK_SHADER_MATVEC_Q6_K, rows_shader = HK_SHADER_MATVEC_Q6_K_ROWS; break;
    default:
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "wtype=%s (%d) is not a matvec weight type (q8_0, q4_k, q6_k)",
                        hk_type_name(wtype), (int)wtype);
    }
    uint32_t block = hk_type_block_values(wtype);
    if (rows == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows is 0");
    if (k == 0 || k % block)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a positive multiple of %u (%s block)", k, block,
                        hk_type_name(wtype));
    uint64_t row_bytes = (uint64_t)k / block * hk_type_block_bytes(wtype);
    hk_binding b[3] = {
        {w, row_bytes * rows, 2, 0, 0},
        {x, (uint64_t)k * 4, 4, 0, 0},
        {y, (uint64_t)rows * 4, 4, 1, 0},
    };
    hk_status st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;
    uint32_t params[2] = {rows, k};
    hk_dispatch_desc d = {.shader = shader, .bindings = b, .binding_count = 3, .params = params,
                          .params_bytes = sizeof params};
    uint32_t sg = context->caps.subgroup_size, wg;
    int aligned = x.offset % 16 == 0 && (wtype != HK_TYPE_Q4_K || w.offset % 16 == 0);
    if ((context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL) && aligned &&
        sg * MATVEC_SUBGROUPS <= context->caps.max_workgroup_size) {
        wg = sg * MATVEC_SUBGROUPS;
        uint32_t rows_per_group = MATVEC_SUBGROUPS * MATVEC_NROWS;
        d.shader = rows_shader;
        d.subgroup_size = sg;
        d.groups = (rows + rows_per_group - 1) / rows_per_group;
    } else {
        wg = MATVEC_WG < context->caps.max_workgroup_size ? MATVEC_WG : context->caps.max_workgroup_size;
        d.groups = rows;
    }
    d.spec = &wg;
    d.spec_count = 1;
    return hk__dispatch(context, stream, fn, &d);
}

hk_status hk_matvec_q8_0(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                         uint32_t k)
{
    return hk_matvec(context, stream, HK_TYPE_Q8_0, w, x, y, rows, k);
}

hk_status hk_matvec_q4k(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                        uint32_t k)
{
    return hk_matvec(context, stream, HK_TYPE_Q4_K, w, x, y, rows, k);
}

hk_status hk_matvec_q6k(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                        uint32_t k)
{
    return hk_matvec(context, stream, HK_TYPE_Q6_K, w, x, y, rows, k);
}

hk_status hk_matvec_int8(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq, hk_view y,
                         uint32_t rows, uint32_t k)
{
    static const char fn[] = "hk_matvec_int8";
    static const char *const names[] = {"w", "xq", "y"};
    int dot_shader, scalar_shader;
    switch (wtype) {
    case HK_TYPE_Q8_0: dot_shader = HK_SHADER_MATVEC_Q8_0_INT8, scalar_shader = HK_SHADER_MATVEC_Q8_0_INT8S; break;
    case HK_TYPE_Q4_K: dot_shader = HK_SHADER_MATVEC_Q4_K_INT8, scalar_shader = HK_SHADER_MATVEC_Q4_K_INT8S; break;
    case HK_TYPE_Q6_K: dot_shader = HK_SHADER_MATVEC_Q6_K_INT8, scalar_shader = HK_SHADER_MATVEC_Q6_K_INT8S; break;
    default:
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "wtype=%s (%d) is not a matvec weight type (q8_0, q4_k, q6_k)",
                        hk_type_name(wtype), (int)wtype);
    }
    uint32_t block = hk_type_block_values(wtype);
    if (rows == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows is 0");
    if (k == 0 || k % block)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a positive multiple of %u (%s block)", k, block,
                        hk_type_name(wtype));
    uint32_t w_align = wtype == HK_TYPE_Q4_K ? 16 : 2; /* Q4_K is read 16 bytes at a time */
    hk_binding b[3] = {
        {w, (uint64_t)k / block * hk_type_block_bytes(wtype) * rows, w_align, 0, 0},
        {xq, (uint64_t)k / 32 * 36, 4, 0, 0},
        {y, (uint64_t)rows * 4, 4, 1, 0},
    };
    hk_status st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;
    uint32_t sg = context->caps.subgroup_size;
    if (!(context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL) || sg * MATVEC_SUBGROUPS > context->caps.max_workgroup_size)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "device \"%s\" cannot require full subgroups (subgroupSizeControl)",
                        context->caps.device_name);
    uint32_t wg = sg * MATVEC_SUBGROUPS, rows_per_group = MATVEC_SUBGROUPS * MATVEC_NROWS;
    uint32_t params[2] = {rows, k};
    hk_dispatch_desc d = {.shader = (context->features & HK_FEATURE_INTEGER_DOT) ? dot_shader : scalar_shader,
                          .subgroup_size = sg, .spec = &wg, .spec_count = 1, .bindings = b, .binding_count = 3,
                          .params = params, .params_bytes = sizeof params,
                          .groups = (rows + rows_per_group - 1) / rows_per_group};
    return hk__dispatch(context, stream, fn, &d);
}
