/* Dense quantized matvec over GGUF weight rows (shaders/matvec.comp), with x in f32 (hk_matvec)
 * or as Q8_1 blocks (hk_matvec_int8; hk_matvec_int8_tokens: up to 16 tokens per weight read, the
 * same shader with the token count a specialization constant, 1 for hk_matvec_int8). Layouts of
 * the work, picked per device and shape:
 *  - subgroup rows: each subgroup computes 1, 2 or 4 rows with wide loads and a subgroup-only
 *    reduction; needs full subgroups of a known size (subgroupSizeControl);
 *  - portable (f32 x only): one workgroup per row, any subgroup size, 2-byte aligned views. */
#include "internal.h"
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
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
 * nrows * tokens sums, and reads each token's activation of the item from shared memory once for
 * all its rows. Per (row, token, item) the work is fixed (Q4_K: 16 packed dots and 8 f32
 * operations), but what the token side costs (the activation's 72 bytes of shared-memory reads
 * per lane and token, its block sums) and the staging of x per workgroup are shared by the rows
 * of a subgroup: at 2 rows the shared-memory reads equal the packed dots in issue time on the
 * H200 (a 128-byte/clock shared-memory path, packed dots at half rate), at 4 rows half. So 4
 * rows from 8192 rows (the 14336-row projections: 896 workgroups), 2 from 4096 (fewer, fatter
 * subgroups left too few per SM at 4096 rows for one token: docs/perf.md), 1 below as for one
 * token; above 8 tokens at most 2 (4 rows x 16 tokens of sums and 4 rows of weights would pass
 * 150 registers). The environment variable HK_MATVEC_TOKENS_NROWS (1, 2 or 4) overrides this
 * for every shape (a tuning hook, hkernel.h). A row's sums do not depend on nrows (its items run
 * in the same lanes in the same order, and subgroupAdd sees the same values), so any choice
 * stays bit-identical to hk_matvec_int8. */
#define MATVEC_TOKENS_NROWS_ROWS 8192u
/* Items per step (spec constant HK_NITEMS): each lane issues the weight loads of that many items
 * (one per gl_SubgroupSize) before computing them. One token: 1, the measured kernel
 * (HK_MATVEC_INT8_ITEMS = 1, 2 or 4 overrides: more loads in flight where few subgroups run, for
 * more registers). Several tokens: the x of a step is staged per barrier pair, and a K-quant step
 * of 1 item per lane stages 2 * subgroup blocks per token already (the most the copy's 5 loads
 * per invocation and token cover), Q8_0's 16-value items a quarter of that: Q8_0 takes 2 items
 * per step (measured on the H200: 8 tokens of 4096 x 4096 in 0.032 ms against 0.045 with 4);
 * HK_MATVEC_TOKENS_ITEMS (1, 2 or 4) overrides it for Q8_0. */
#define MATVEC_TOKENS_ITEMS_Q8_0 2u
#define MATVEC_TOKENS_SLOTS_Q8_0 8u
/* Loop iterations allowed per invocation (lavapipe stops at 65535; see the count below). */
#define MATVEC_LOOP_BUDGET 63000u

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
 *  - int8 (hk_matvec_int8, the MoE, hk_matvec_int8_tokens): the item code is straight-line but
 *    for its loops over rows and tokens. int8_loop_count counts a call (every step as if all of
 *    its items were in range) on the device's subgroup size, and int8_config takes the most
 *    tokens per pass, then the largest nrows, whose count stays under MATVEC_LOOP_BUDGET. One
 *    token per pass with nrows 1 (1 item per step, or Q8_0's 4) always does on 4-lane subgroups:
 *    at most 38500 iterations (Q8_0, 4 items, k = 544 at 2^24 rows, where 512 row groups each
 *    clear and reduce their sums) under the f32 rule ceil(rows / 32768) * k <= 2^18. Real shapes
 *    stay far under with all their tokens (151936 x 2048 at 16 tokens, 32 lanes: 468); only
 *    shapes of millions of rows and a few blocks of k need several passes.
 * The portable kernel loops far less (k / 4096 units of up to 34). Whoever changes the geometry
 * or the shaders' loops redoes this count. */
_Static_assert(MATVEC_MAX_GROUPS * MATVEC_SUBGROUPS == 32768, "HK_MATVEC_MAX_K_ROW_BLOCKS assumes 32768 subgroups");
#define MATVEC_ROW_BLOCK 32768u

enum { MODE_F32, MODE_INT8, MODE_INT8_SCALAR };

/* Loop iterations of one invocation of the int8 rows layout (shaders/matvec.comp), every loop
 * counted: O row groups of 1 + 2 * nrows * (1 + tokens) (clear and reduce the sums) + steps of
 * `items` items per lane. A step: 1 + items * (1 + nrows) (loading the weights) + items * (1 +
 * nrows + tokens * (1 + nrows)) (unpacking them, computing), + 2 * tokens (the staging copy)
 * where staged. */
static uint64_t int8_loop_count(uint32_t rows, uint32_t k, int t, uint32_t sg, uint32_t nrows, uint32_t tokens,
                                uint32_t items, int staged)
{
    uint64_t row_groups = (rows + (uint64_t)nrows - 1) / nrows;
    uint64_t groups = (row_groups + MATVEC_SUBGROUPS - 1) / MATVEC_SUBGROUPS;
    uint64_t stride = (groups < MATVEC_MAX_GROUPS ? groups : MATVEC_MAX_GROUPS) * MATVEC_SUBGROUPS;
    uint64_t o = (row_groups + stride - 1) / stride;
    uint64_t all_items = t == 0 ? k / 16 : k / 64, per_step = (uint64_t)sg * items;
    uint64_t steps = (all_items + per_step - 1) / per_step;
    uint64_t step = 1 + items * (1 + nrows) + items * (1 + nrows + tokens * (1 + nrows)) + (staged ? 2 * tokens : 0);
    return o * (1 + 2 * nrows * (1 + tokens) + steps * step);
}

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
    uint32_t spec[6];
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

/* The int8 rows layout's configuration for a call: rows per subgroup (nrows: the one-token rule
 * passed in, or the several-token one), items per step, tokens per pass and the blocks staged per
 * token (several tokens: x staged through shared memory per step of items * sg items,
 * shaders/matvec.comp: sg / 2 blocks per Q8_0 item per lane, 2 * sg per K-quant one, at most
 * 2 * sg = WG / 2, which the copy's 5 loads per invocation and token assume; per token 5 uvec4
 * per pair of blocks). The tuning hooks override the defaults; then the most tokens per pass
 * (shared memory with the workgroup's reduction scratch, and the loop budget), the largest nrows
 * and the wanted items before the default that fit are taken. Each token's outputs are the same
 * whatever is taken. One token per pass, nrows 1 and 1 item (the default items for Q8_0) loop as
 * counted above, so there is always one. moe_n: the MoE's rows per expert (nrows divides it), 0
 * for the dense kernel. */
static hk_status int8_config(hk_context *context, const char *fn, int t, uint32_t rows, uint32_t k, uint32_t tokens,
                             uint32_t moe_n, uint32_t *nrows, uint32_t *items, uint32_t *per_pass,
                             uint32_t *stage_blocks, uint32_t *q8_0_w16, const hk__sched *sched)
{
    uint32_t bits = 0;
    if (sched) { /* a tuned schedule (one token, dense): no hook is read, nothing falls back */
        *nrows = sched->v[MV_NROWS];
        *items = sched->v[MV_ITEMS];
        *q8_0_w16 = t == 0 && sched->v[MV_LOAD_BITS] == 16;
        *per_pass = 1;
        *stage_blocks = 0;
        if (int8_loop_count(rows, k, t, context->caps.subgroup_size, *nrows, 1, *items, 0) > MATVEC_LOOP_BUDGET)
            return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the tuned schedule nrows=%u items=%u loops past %u iterations "
                            "(rows=%u, k=%u)", *nrows, *items, MATVEC_LOOP_BUDGET, rows, k);
        return HK_OK;
    }
    hk_status st_bits = t == 0 ? hk__env_u32(fn, "HK_MATVEC_Q8_0_LOAD_BITS", 0, 16, 32, 1, &bits) : HK_OK;
    if (st_bits != HK_OK)
        return st_bits;
    *q8_0_w16 = bits == 16; /* 32-bit words by default: faster on the H200 for any token count */
    uint32_t sg = context->caps.subgroup_size, wg = sg * MATVEC_SUBGROUPS;
    uint32_t want_rows = *nrows, env_rows = 0, env_items = 0, env_pass = 0, default_items = 1;
    hk_status st = HK_OK;
    if (tokens > 1) {
        want_rows = rows >= MATVEC_TOKENS_NROWS_ROWS && tokens <= 8 ? 4 : rows >= MATVEC_SOME_ROWS ? 2 : 1;
        st = hk__env_u32(fn, "HK_MATVEC_TOKENS_NROWS", 0, 1, 4, 1, &env_rows);
        if (st == HK_OK)
            st = hk__env_u32(fn, "HK_MATVEC_TOKENS_PASS", 0, 1, HK_MATVEC_MAX_TOKENS, 0, &env_pass);
        if (t == 0) {
            default_items = (env_rows ? env_rows : want_rows) == 4 ? MATVEC_TOKENS_SLOTS_Q8_0 / 4
                                                                   : MATVEC_TOKENS_ITEMS_Q8_0;
            if (st == HK_OK)
                st = hk__env_u32(fn, "HK_MATVEC_TOKENS_ITEMS", 0, 1, 4, 1, &env_items);
        }
    } else if (!moe_n) {
        st = hk__env_u32(fn, "HK_MATVEC_INT8_ITEMS", 0, 1, 4, 1, &env_items);
    }
    if (st != HK_OK)
        return st;
    want_rows = env_rows ? env_rows : want_rows;
    uint32_t want_items = env_items ? env_items : default_items;
    uint64_t fixed = 16 + (uint64_t)wg * 4, avail = context->caps.shared_memory_bytes;
    for (uint32_t pass = env_pass && env_pass < tokens ? env_pass : tokens; pass >= 1; pass--) {
        for (uint32_t nr = want_rows; nr >= 1; nr /= 2) {
            if (moe_n % nr)
                continue;
            for (int fallback = 0; fallback < 2; fallback++) {
                uint32_t it = fallback ? default_items : want_items;
                if (fallback && it == want_items)
                    break;
                uint32_t blocks = t == 0 ? it * sg / 2 : 2 * sg;
                if (pass > 1 && (t != 0 ? it != 1 : fixed + (uint64_t)pass * blocks * 40 > avail))
                    continue;
                if (int8_loop_count(rows, k, t, sg, nr, pass, it, pass > 1) > MATVEC_LOOP_BUDGET)
                    continue;
                *nrows = nr;
                *items = it;
                *per_pass = pass;
                *stage_blocks = blocks;
                return HK_OK;
            }
        }
    }
    return hk__fail(HK_ERROR_UNSUPPORTED, fn, "no configuration loops under %u iterations (rows=%u, k=%u)",
                    MATVEC_LOOP_BUDGET, rows, k);
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
    uint32_t nrows = 1, items = 1, per_pass = tokens, stage_blocks = 0, q8_0_w16 = 0;
    /* the autotuner's schedule (src/tune): one-token dense int8 calls only */
    hk__sched sched = {{0}, 0};
    int sched_source = HK_SCHED_DEFAULT, tuned = 0;
    if (int8 && !moe && tokens == 1 && rows_layout) {
        char key[HK_TUNE_SHAPE_CHARS];
        hk__tune_key_matvec(key, wtype, rows, k);
        tuned = hk__tune_lookup(context, HK_TUNE_MATVEC_INT8, key, &sched, &sched_source);
        if (!tuned && ((t == 0 && getenv("HK_MATVEC_Q8_0_LOAD_BITS") && *getenv("HK_MATVEC_Q8_0_LOAD_BITS")) ||
                       (getenv("HK_MATVEC_INT8_ITEMS") && *getenv("HK_MATVEC_INT8_ITEMS"))))
            sched_source = HK_SCHED_ENV;
    }
    if (rows_layout && aligned) {
        int mode = !int8 ? MODE_F32 : (context->features & HK_FEATURE_INTEGER_DOT) ? MODE_INT8 : MODE_INT8_SCALAR;
        if (rows >= MATVEC_MANY_ROWS)
            nrows = mode == MODE_F32 ? 4 : many_rows_nrows[t];
        else if (rows >= MATVEC_SOME_ROWS)
            nrows = 2;
        if (int8) {
            uint32_t nrows_in = nrows;
            st = int8_config(context, fn, t, rows, k, tokens, moe ? moe->shape->n : 0, &nrows, &items, &per_pass,
                             &stage_blocks, &q8_0_w16, tuned ? &sched : NULL);
            if (st != HK_OK && tuned && sched_source == HK_SCHED_TUNED) {
                /* a cached winner this shape cannot run (only a hand-edited line can be one):
                 * the default, rather than a failed call */
                tuned = 0;
                sched_source = HK_SCHED_DEFAULT;
                nrows = nrows_in;
                st = int8_config(context, fn, t, rows, k, tokens, 0, &nrows, &items, &per_pass, &stage_blocks,
                                 &q8_0_w16, NULL);
            }
            if (st != HK_OK)
                return st;
            if (tuned && sched.plant)
                params[0] = rows / 2; /* testing only: a candidate that leaves half the rows unwritten */
        }
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
    uint32_t spec[6] = {wg, nrows, tokens, 0, items, q8_0_w16};
    d.spec = spec;
    d.spec_count = !d.subgroup_size ? 1 : int8 ? 6 : 2;
    if (int8 && !moe && tokens == 1) {
        const uint32_t served[MV_PARAMS] = {nrows, items, t == 0 && q8_0_w16 ? 16 : 32};
        st = hk__dispatch(context, stream, fn, &d);
        if (st == HK_OK)
            hk__tune_note(context, HK_TUNE_MATVEC_INT8, served, sched_source);
        return st;
    }
    if (tokens == 1)
        return hk__dispatch(context, stream, fn, &d);
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

/* ---- autotuner (src/tune) ---- */

int hk__matvec_int8_static(const hk_context *context, hk_type wtype, uint32_t rows, uint32_t k, const uint32_t *v,
                           char *why, size_t why_size)
{
    const hk_caps *caps = &context->caps;
    uint32_t sg = caps->subgroup_size, wg = sg * MATVEC_SUBGROUPS;
    int t = wtype == HK_TYPE_Q8_0 ? 0 : wtype == HK_TYPE_Q4_K ? 1 : 2;
    if (!(context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL)) {
        snprintf(why, why_size, "subgroup mismatch: no full subgroups of a required size (subgroupSizeControl)");
        return 0;
    }
    if (wg > caps->max_workgroup_size) {
        snprintf(why, why_size, "workgroup of %u over the device's %u", wg, caps->max_workgroup_size);
        return 0;
    }
    if (16 + (uint64_t)wg * 4 > caps->shared_memory_bytes) {
        snprintf(why, why_size, "shared memory %u over the device's %u", 16 + wg * 4, caps->shared_memory_bytes);
        return 0;
    }
    if (t != 0 && v[MV_LOAD_BITS] != 32) {
        snprintf(why, why_size, "invalid: load_bits=%u applies to q8_0 only", v[MV_LOAD_BITS]);
        return 0;
    }
    uint64_t loops = int8_loop_count(rows, k, t, sg, v[MV_NROWS], 1, v[MV_ITEMS], 0);
    if (loops > MATVEC_LOOP_BUDGET) {
        snprintf(why, why_size, "loops %llu over the budget %u", (unsigned long long)loops, MATVEC_LOOP_BUDGET);
        return 0;
    }
    return 1;
}
