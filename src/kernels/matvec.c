/* Dense quantized matvec over GGUF weight rows (shaders/matvec.comp), with x in f32 (hk_matvec)
 * or as Q8_1 blocks (hk_matvec_int8; hk_matvec_int8_tokens: up to 16 tokens per weight read, the
 * same shader with the token count a specialization constant, 1 for hk_matvec_int8). Layouts of
 * the work, picked per device and shape:
 *  - subgroup rows: each subgroup computes 1, 2 or 4 rows with wide loads and a subgroup-only
 *    reduction; needs full subgroups of a known size (subgroupSizeControl);
 *  - portable (f32 x only): one workgroup per row, any subgroup size, 2-byte aligned views. */
#include "internal.h"

#include <string.h>

/* Portable kernel: one invocation per 32-value unit of a 4096-wide row (every Vulkan device takes
 * 128-wide workgroups: maxComputeWorkGroupInvocations >= 128). */
#define MATVEC_WG 128u
/* Subgroup rows: subgroups per workgroup, and the most workgroups one dispatch launches (the
 * shader strides over the rest, so subgroups live long instead of launching in short waves). */
#define MATVEC_SUBGROUPS 4u
#define MATVEC_MAX_GROUPS 8192u
/* Rows per subgroup: with few rows, 1, so that small matrices still spread over enough subgroups
 * to fill the device; with more, several rows share each x load. Measured on the H200
 * (docs/perf.md): from 4096 rows 2; from 16384 rows (151936x2048) f32 x 4 for every type, int8
 * Q8_0 2, Q4_K 2, Q6_K 4. */
#define MATVEC_SOME_ROWS 4096u
#define MATVEC_MANY_ROWS 16384u
static const uint32_t many_rows_nrows[3] = {2, 2, 4}; /* int8, by type: Q8_0, Q4_K, Q6_K */
/* Several tokens (hk_matvec_int8_tokens): each lane holds nrows rows' weights of an item and
 * nrows * tokens sums, and loads each token's activation once per item for all its rows; at most
 * 2 rows keep that tile near 100 registers at 16 tokens (an estimate: a row's weights are 22
 * words for Q4_K, 21 for Q6_K); below 4096 rows 1, as for one token. Not yet measured against 1 and 4 on the
 * H200. A row's sums do not depend on nrows (its items run in the same lanes in the same order,
 * and subgroupAdd sees the same values), so any choice stays bit-identical to hk_matvec_int8. */
#define MATVEC_TOKENS_NROWS 2u

/* Loop bounds (hkernel.h, HK_MATVEC_MAX_*). Counting every loop iteration of the shaders as if
 * nothing were unrolled, on subgroups of 4 lanes (the worst case): a subgroup of the rows layout
 * loops over O = ceil(rows / (32768 * nrows)) row groups (32768 = MATVEC_MAX_GROUPS *
 * MATVEC_SUBGROUPS subgroups per dispatch); in each, per lane, over ceil(items / 4) items (items
 * = k / 16 for Q8_0, k / 64 for the K-quants) plus nrows * (1 + tokens) iterations to clear the
 * sums and as many to reduce them.
 *  - f32 x: an item costs up to 31 (Q8_0, nrows 4) or 151 (Q6_K, nrows 4) iterations of its
 *    inner loops. k <= 98304, rows <= 2^24 and ceil(rows / 32768) * k <= 2^18 keep
 *    every combination of type, nrows (the MoE may fall to 1) and rows under 63000 iterations
 *    (worst: nrows 1 near 2^24 rows; k = 98304 with nrows 4: 58000).
 *  - int8, one token (hk_matvec_int8, the MoE): the item's inner code is straight-line but for
 *    its loops over rows and tokens, so an item costs 1 + nrows + 1 + nrows and a row group
 *    1 + 4 * nrows + ceil(items / 4) * 2 * (1 + nrows): at most 19700 under the f32 rule.
 *  - int8, t > 1 tokens (staged x): per chunk of 4 items, 1 + nrows (weights) + ceil(t / 4)
 *    (Q8_0) or t (K-quants) to stage x (2 * blocks * t half-blocks over 16 invocations) + t +
 *    nrows * t; per row group 1 + 2 * nrows * (1 + t) besides. With the f32 rule and
 *    ceil(rows / 32768) * k * (1 + t) <= 2^20 the worst over every type, t, nrows (1 below 4096
 *    rows, else 2) and rows is 53900 iterations (Q8_0, 13 tokens, nrows 2, k = 74880: Q8_0's
 *    16-value items are the many).
 * The portable kernel loops far less (k / 4096 units of up to 34). Whoever changes the geometry
 * or the shaders' loops redoes this count. */
_Static_assert(MATVEC_MAX_GROUPS * MATVEC_SUBGROUPS == 32768, "HK_MATVEC_MAX_K_ROW_BLOCKS assumes 32768 subgroups");
#define MATVEC_ROW_BLOCK 32768u

enum { MODE_F32, MODE_INT8, MODE_INT8_SCALAR };

#ifdef HK_HAVE_SHADER_MATVEC_Q8_0_INT8
#define DOT(p, t) HK_SHADER_##p##_##t##_INT8
#else /* glslang could not emit OpSDot: the scalar twin everywhere */
#define DOT(p, t) HK_SHADER_##p##_##t##_INT8S
#endif
#define ROW_SHADERS(p, t) {HK_SHADER_##p##_##t##_ROWS, DOT(p, t), HK_SHADER_##p##_##t##_INT8S}

/* [moe][type][mode]; rows per subgroup is specialization constant 1 */
static const int row_shaders[2][3][3] = {
    {ROW_SHADERS(MATVEC, Q8_0), ROW_SHADERS(MATVEC, Q4_K), ROW_SHADERS(MATVEC, Q6_K)},
    {ROW_SHADERS(MOE_MATVEC, Q8_0), ROW_SHADERS(MOE_MATVEC, Q4_K), ROW_SHADERS(MOE_MATVEC, Q6_K)}};
static const int portable_shaders[3] = {HK_SHADER_MATVEC_Q8_0, HK_SHADER_MATVEC_Q4_K, HK_SHADER_MATVEC_Q6_K};

/* The dense matvec (moe NULL) and the MoE expert gather (moe: ids and shape; rows = slots * n). */
typedef struct moe_args {
    hk_view ids;
    const hk_moe_shape *shape;
} moe_args;

/* The tokens of hk_matvec_int8_tokens in passes of per_pass tokens, where the device's shared
 * memory holds fewer than all (matvec). Each pass is the dispatch d on its tokens' x and y: a
 * token's outputs do not depend on the tokens beside it. Every pipeline is created before
 * anything is recorded, and a run-now call (stream NULL) records all passes into a stream of its
 * own that is submitted only when all are in, so that a failure writes nothing. */
static hk_status matvec_passes(hk_context *context, hk_stream *stream, const char *fn, hk_dispatch_desc *d,
                               const hk_binding *b, uint64_t x_token_bytes, uint64_t y_token_bytes, uint32_t tokens,
                               uint32_t per_pass, uint32_t stage_blocks)
{
    uint32_t spec[4];
    memcpy(spec, d->spec, sizeof spec);
    d->spec = spec;
    hk_binding pass[3];
    memcpy(pass, b, sizeof pass);
    d->bindings = pass;
    /* the pipelines: full passes, and the last one */
    const uint32_t counts[2] = {per_pass, tokens % per_pass ? tokens % per_pass : per_pass};
    for (int i = 0; i < 2; i++) {
        spec[2] = counts[i];
        spec[3] = counts[i] > 1 ? stage_blocks : 0;
        VkPipeline pipeline;
        VkPipelineLayout layout;
        VkDescriptorSetLayout set_layout;
        hk_status st = hk__pipeline_get(context, fn, d, &pipeline, &layout, &set_layout);
        if (st != HK_OK)
            return st;
    }
    hk_stream *s = stream;
    if (!s) {
        hk_status st = hk__stream_create(context, 0, VK_NULL_HANDLE, &s);
        if (st != HK_OK)
            return st;
    }
    hk_status st = HK_OK;
    for (uint32_t t0 = 0; t0 < tokens && st == HK_OK; t0 += per_pass) {
        uint32_t n = tokens - t0 < per_pass ? tokens - t0 : per_pass;
        pass[1].view.offset = b[1].view.offset + t0 * x_token_bytes;
        pass[1].bytes = n * x_token_bytes;
        pass[2].view.offset = b[2].view.offset + t0 * y_token_bytes;
        pass[2].bytes = n * y_token_bytes;
        spec[2] = n;
        spec[3] = n > 1 ? stage_blocks : 0;
        st = hk__dispatch(context, s, fn, d);
    }
    if (!stream) {
        if (st == HK_OK)
            st = hk_stream_submit(s);
        hk_stream_destroy(s);
    }
    return st;
}

/* tokens: 1, or (dense int8 only) 2..HK_MATVEC_MAX_TOKENS, x [tokens, k/32] and y [tokens, rows] */
static hk_status matvec(hk_context *context, hk_stream *stream, const char *fn, int int8, hk_type wtype, hk_view w,
                        hk_view x, hk_view y, uint32_t rows, uint32_t k, uint32_t tokens, const moe_args *moe)
{
    const char *const names[] = {"w", int8 ? "xq" : "x", "y", "ids"};
    if (wtype != HK_TYPE_Q8_0 && wtype != HK_TYPE_Q4_K && wtype != HK_TYPE_Q6_K)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "wtype=%s (%d) is not a matvec weight type (q8_0, q4_k, q6_k)",
                        hk_type_name(wtype), (int)wtype);
    uint32_t block = hk_type_block_values(wtype);
    if (rows == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows is 0");
    if (k == 0 || k % block)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a positive multiple of %u (%s block)", k, block,
                        hk_type_name(wtype));
    hk_status st = hk__check_limit(fn, "k", k, HK_MATVEC_MAX_K);
    if (st == HK_OK)
        st = hk__check_limit(fn, moe ? "slots*n" : "rows", rows, HK_MATVEC_MAX_ROWS);
    uint64_t row_blocks_k = (rows + (uint64_t)MATVEC_ROW_BLOCK - 1) / MATVEC_ROW_BLOCK * k;
    if (st == HK_OK)
        st = hk__check_limit(fn, moe ? "ceil(slots*n/32768)*k" : "ceil(rows/32768)*k", row_blocks_k,
                             HK_MATVEC_MAX_K_ROW_BLOCKS);
    if (st == HK_OK && tokens > 1)
        st = hk__check_limit(fn, "ceil(rows/32768)*k*(tokens+1)", row_blocks_k * (tokens + 1),
                             HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS);
    if (st != HK_OK)
        return st;
    /* the int8 Q4_K kernel reads weights 16 bytes at a time, and so do the f32 MoE kernels, which
     * have no portable twin; the dense f32 path falls back instead */
    uint32_t w_align = (int8 || moe) && wtype == HK_TYPE_Q4_K ? 16 : 2;
    uint64_t x_bytes = int8 ? (uint64_t)k / 32 * 36 : (uint64_t)k * 4;
    uint64_t w_rows = moe ? (uint64_t)moe->shape->n_experts * moe->shape->n : rows;
    uint32_t slots = moe ? moe->shape->slots : 0;
    hk_binding b[4] = {
        {w, (uint64_t)k / block * hk_type_block_bytes(wtype) * w_rows, w_align, 0, 0},
        {x, moe && moe->shape->x_per_slot ? x_bytes * slots : x_bytes * tokens, (moe && !int8) ? 16 : 4, 0, 0},
        {y, (uint64_t)rows * tokens * 4, 4, 1, 0},
        {moe ? moe->ids : (hk_view){0}, (uint64_t)slots * 4, 4, 0, 0},
    };
    uint32_t count = moe ? 4 : 3;
    st = hk__check_bindings(context, stream, fn, names, b, count);
    if (st != HK_OK)
        return st;
    uint32_t sg = context->caps.subgroup_size, wg;
    int rows_layout = (context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL) &&
                      sg * MATVEC_SUBGROUPS <= context->caps.max_workgroup_size;
    if ((int8 || moe) && !rows_layout) /* no portable twin for these */
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "device \"%s\" cannot require full subgroups (subgroupSizeControl)",
                        context->caps.device_name);
    int aligned = int8 || moe || (x.offset % 16 == 0 && (wtype != HK_TYPE_Q4_K || w.offset % 16 == 0));
    uint32_t params[5] = {rows, k, 0, 0, 0};
    if (moe) {
        params[2] = moe->shape->n;
        params[3] = moe->shape->n_experts;
        params[4] = moe->shape->x_per_slot ? (uint32_t)(x_bytes / 4) : 0;
    }
    hk_dispatch_desc d = {.bindings = b, .binding_count = count, .params = params, .params_bytes = sizeof params};
    int t = wtype == HK_TYPE_Q8_0 ? 0 : wtype == HK_TYPE_Q4_K ? 1 : 2;
    uint32_t nrows = 1;
    if (rows_layout && aligned) {
        int mode = !int8 ? MODE_F32 : (context->features & HK_FEATURE_INTEGER_DOT) ? MODE_INT8 : MODE_INT8_SCALAR;
        if (rows >= MATVEC_MANY_ROWS)
            nrows = mode == MODE_F32 ? 4 : many_rows_nrows[t];
        else if (rows >= MATVEC_SOME_ROWS)
            nrows = 2;
        if (tokens > 1 && nrows > MATVEC_TOKENS_NROWS)
            nrows = MATVEC_TOKENS_NROWS;
        while (moe && moe->shape->n % nrows) /* a MoE row group must not straddle two slots */
            nrows /= 2;
        uint32_t rows_per_group = MATVEC_SUBGROUPS * nrows;
        uint64_t groups = (rows + rows_per_group - 1) / rows_per_group;
        wg = sg * MATVEC_SUBGROUPS;
        d.shader = row_shaders[moe != NULL][t][mode];
        d.subgroup_size = sg;
        d.groups = groups < MATVEC_MAX_GROUPS ? groups : MATVEC_MAX_GROUPS;
    } else {
        wg = MATVEC_WG;
        d.shader = portable_shaders[t];
        d.groups = rows;
    }
    uint32_t spec[4] = {wg, nrows, tokens, 0};
    d.spec = spec;
    d.spec_count = !d.subgroup_size ? 1 : int8 ? 4 : 2;
    if (tokens == 1)
        return hk__dispatch(context, stream, fn, &d);
    /* Several tokens: x staged through shared memory per chunk of sg items (HK_XSTAGE_BLOCKS,
     * shaders/matvec.comp): per token the chunk's blocks' d as f32 and their quants as 4 (Q8_0)
     * or 5 (K-quants, padded) uvec4 per pair of blocks. Where that does not fit in the device's
     * shared memory (with the workgroup's reduction scratch), the tokens go in several passes;
     * each token's outputs are the same either way. */
    uint32_t stage_blocks = t == 0 ? sg / 2 : 2 * sg;
    uint64_t token_bytes = (uint64_t)stage_blocks / 2 * (t == 0 ? 4 : 5) * 16 + (uint64_t)stage_blocks * 4;
    uint64_t fixed = 16 + 4 + (uint64_t)wg * 4, avail = context->caps.shared_memory_bytes;
    uint32_t per_pass = avail > fixed + token_bytes ? (uint32_t)((avail - fixed) / token_bytes) : 1;
    if (per_pass >= tokens) {
        spec[3] = stage_blocks;
        return hk__dispatch(context, stream, fn, &d);
    }
    return matvec_passes(context, stream, fn, &d, b, x_bytes, (uint64_t)rows * 4, tokens, per_pass, stage_blocks);
}

hk_status hk_matvec(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view x, hk_view y,
                    uint32_t rows, uint32_t k)
{
    return matvec(context, stream, "hk_matvec", 0, wtype, w, x, y, rows, k, 1, NULL);
}

hk_status hk_matvec_int8(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq, hk_view y,
                         uint32_t rows, uint32_t k)
{
    return matvec(context, stream, "hk_matvec_int8", 1, wtype, w, xq, y, rows, k, 1, NULL);
}

hk_status hk_matvec_int8_tokens(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                                hk_view y, uint32_t rows, uint32_t k, uint32_t tokens)
{
    const char *fn = "hk_matvec_int8_tokens";
    if (tokens == 0 || tokens > HK_MATVEC_MAX_TOKENS)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=%u is not in 1..%u", tokens, HK_MATVEC_MAX_TOKENS);
    return matvec(context, stream, fn, 1, wtype, w, xq, y, rows, k, tokens, NULL);
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

static hk_status moe_matvec(hk_context *context, hk_stream *stream, const char *fn, int int8, hk_type wtype, hk_view w,
                            hk_view x, hk_view ids, hk_view y, const hk_moe_shape *shape)
{
    if (!shape)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "shape is NULL");
    if (!shape->n_experts || !shape->n || !shape->slots)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts=%u, n=%u and slots=%u must all be positive",
                        shape->n_experts, shape->n, shape->slots);
    uint64_t rows = (uint64_t)shape->slots * shape->n;
    if (rows > UINT32_MAX || (uint64_t)shape->n_experts * shape->n > UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "slots*n or n_experts*n exceeds 2^32 rows");
    moe_args moe = {ids, shape};
    return matvec(context, stream, fn, int8, wtype, w, x, y, (uint32_t)rows, shape->k, 1, &moe);
}

hk_status hk_moe_matvec(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view x, hk_view ids,
                        hk_view y, const hk_moe_shape *shape)
{
    return moe_matvec(context, stream, "hk_moe_matvec", 0, wtype, w, x, ids, y, shape);
}

hk_status hk_moe_matvec_int8(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                             hk_view ids, hk_view y, const hk_moe_shape *shape)
{
    return moe_matvec(context, stream, "hk_moe_matvec_int8", 1, wtype, w, xq, ids, y, shape);
}
