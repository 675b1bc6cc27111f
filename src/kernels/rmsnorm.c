/* RMSNorm over rows (shaders/rmsnorm.comp), alone or fused with the Q8_1 quantizer of its output. */
#include "family.h"

#include <math.h>
#include <string.h>

#define RMSNORM_WG 128u
#define RMSNORM_WIDE_WG 512u
#define RMSNORM_FEW_ROWS 64u

/* The checks both entry points make on rows, n and eps. */
static hk_status check_shape(const char *fn, uint32_t rows, uint32_t n, float eps)
{
    if (rows == 0 || n == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u and n=%u must both be positive", rows, n);
    if (!(eps > 0.0f) || !isfinite(eps))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "eps=%g must be positive and finite", (double)eps);
    /* each invocation loops over ceil(n / 32 / wg) chunks of up to 32 squares and 32 block sums
     * (wg >= 128), once over the n / 1024 group sums and over n / (4 wg) values (hk_rmsnorm_q8_1's
     * second loop; hk_rmsnorm's n / wg): with n <= 2^20, at most 256 * 64 + 1024 + 8192 iterations */
    return hk__check_limit(fn, "n", n, HK_RMSNORM_MAX_N);
}

uint32_t hk__norm_stage_bytes(uint32_t blocks, uint32_t groups) { return 4 * (33 * blocks + blocks + groups); }

uint32_t hk__norm_stage_blocks(const hk_context *context, uint32_t other_bytes)
{
    for (uint32_t blocks = 128; blocks >= 32; blocks /= 2)
        if ((uint64_t)hk__norm_stage_bytes(blocks, 1024) + other_bytes <= context->caps.shared_memory_bytes)
            return blocks;
    return 0;
}

/* Records either variant. hk_rmsnorm_q8_1 is bit-identical to hk_rmsnorm then hk_quantize_q8_1,
 * and to the int8 matvec's own normalisation (hk_matvec_int8_f32x), because all of them sum a
 * row's squares in shaders/norm.glsl's order, which no workgroup width or subgroup size changes. */
static hk_status dispatch(hk_context *context, hk_stream *stream, const char *fn, int shader, hk_binding *b,
                          uint32_t binding_count, uint32_t rows, uint32_t n, float eps, uint32_t write_y)
{
    /* a token or a few: one row per workgroup leaves most of the device idle, so a wider
     * workgroup (where the device takes it) shortens the row's chain of loads */
    const hk_caps *caps = &context->caps;
    /* the row staged by coalesced loads on GPUs; a CPU device runs the strided loads faster */
    uint32_t staged;
    hk_status st = hk__env_u32(fn, "HK_RMSNORM_STAGED", !context->profile.few_workgroups, 0, 1, 0, &staged);
    if (st != HK_OK)
        return st;
    uint32_t wg = rows < RMSNORM_FEW_ROWS && n >= 4 * RMSNORM_WIDE_WG && caps->max_workgroup_size >= RMSNORM_WIDE_WG
                      ? RMSNORM_WIDE_WG
                      : RMSNORM_WG;
    uint32_t spec[2] = {wg, 0};
    if (staged) { /* the staged chunk beside the quantizer's two words per invocation */
        spec[1] = hk__norm_stage_blocks(context, shader == HK_SHADER_RMSNORM_Q8_1 ? 8 * wg : 0);
        if (!spec[1] && hk__env_given("HK_RMSNORM_STAGED"))
            return hk__fail(HK_ERROR_UNSUPPORTED, fn, "HK_RMSNORM_STAGED=1 needs more shared memory than the "
                            "device's %u bytes", caps->shared_memory_bytes);
        staged = spec[1] != 0; /* the default falls back where the chunk does not fit */
        if (staged)
            shader = shader == HK_SHADER_RMSNORM ? HK_SHADER_RMSNORM_STAGED : HK_SHADER_RMSNORM_Q8_1_STAGED;
    }
    uint32_t sg = caps->subgroup_size_control && caps->subgroup_size_min < caps->subgroup_size_max ? caps->subgroup_size
                                                                                                   : 0;
    struct {
        uint32_t rows, n;
        float eps;
        uint32_t write_y; /* HK_Q8_1's only */
    } params = {rows, n, eps, write_y};
    hk_dispatch_desc d = {.shader = shader, .subgroup_size = sg, .spec = spec, .spec_count = staged ? 2 : 1,
                          .bindings = b, .binding_count = binding_count, .params = &params,
                          .params_bytes = sizeof params, .groups = rows};
    return hk__dispatch(context, stream, fn, &d);
}

hk_status hk_rmsnorm(hk_context *context, hk_stream *stream, hk_view x, hk_view weight, hk_view y, uint32_t rows,
                     uint32_t n, float eps)
{
    static const char fn[] = "hk_rmsnorm";
    static const char *const names[] = {"x", "weight", "y"};
    hk_status st = check_shape(fn, rows, n, eps);
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
    return dispatch(context, stream, fn, HK_SHADER_RMSNORM, b, 3, rows, n, eps, 1);
}

hk_status hk_rmsnorm_q8_1(hk_context *context, hk_stream *stream, hk_view x, hk_view weight, hk_view y, hk_view yq,
                          uint32_t rows, uint32_t n, float eps)
{
    static const char fn[] = "hk_rmsnorm_q8_1";
    static const char *const names[] = {"x", "weight", "y", "yq"};
    hk_status st = check_shape(fn, rows, n, eps);
    if (st != HK_OK)
        return st;
    if (n % 32)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n=%u is not a multiple of 32 (q8_1 block)", n);
    int has_y;
    st = hk__optional_view(fn, "y", y, &has_y);
    if (st != HK_OK)
        return st;
    uint64_t values = (uint64_t)rows * n;
    hk_binding b[4] = {
        {x, values * 4, 4, 0, 0},
        {weight, (uint64_t)n * 4, 4, 0, 0},
        has_y ? (hk_binding){y, values * 4, 4, 1, 1} : (hk_binding){{x.buffer, x.offset}, 0, 1, 0, 0},
        {yq, values / 32 * 36, 4, 1, 0},
    };
    st = hk__check_bindings(context, stream, fn, names, b, 4);
    if (st != HK_OK)
        return st;
    return dispatch(context, stream, fn, HK_SHADER_RMSNORM_Q8_1, b, 4, rows, n, eps, has_y);
}

/* a wide workgroup for a few long rows, the default otherwise */
static hk_status prepare_rmsnorm(hk__prep *p)
{
    hk_view x = hk__prep_view(p, 0), w = hk__prep_view(p, 1), y = hk__prep_view(p, 2);
    HK_PREP_TRY(p, hk_rmsnorm(p->ctx, p->s, x, w, y, 1, 4096, 1e-6f));
    HK_PREP_TRY(p, hk_rmsnorm(p->ctx, p->s, x, w, y, 64, 64, 1e-6f));
    return HK_OK;
}

/* as hk_rmsnorm; with or without y is one pipeline */
static hk_status prepare_rmsnorm_q8_1(hk__prep *p)
{
    hk_view x = hk__prep_view(p, 0), w = hk__prep_view(p, 1), y = hk__prep_view(p, 2), yq = hk__prep_view(p, 3);
    HK_PREP_TRY(p, hk_rmsnorm_q8_1(p->ctx, p->s, x, w, y, yq, 1, 4096, 1e-6f));
    HK_PREP_TRY(p, hk_rmsnorm_q8_1(p->ctx, p->s, x, w, y, yq, 64, 64, 1e-6f));
    return HK_OK;
}

const hk__family hk__family_rmsnorm = {"hk_rmsnorm", prepare_rmsnorm, {NULL}};
const hk__family hk__family_rmsnorm_q8_1 = {"hk_rmsnorm_q8_1", prepare_rmsnorm_q8_1, {NULL}};
