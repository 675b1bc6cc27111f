/* cases_gather.c — table rows of the gathers: the embedding lookup (hk_get_rows) and the MoE
 * combine (hk_moe_combine). Both are held to their references bit for bit. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 HK_TYPE_F32
#define F16 HK_TYPE_F16
#define Q8 HK_TYPE_Q8_0
#define Q4 HK_TYPE_Q4_K
#define Q5 HK_TYPE_Q5_K
#define Q6 HK_TYPE_Q6_K

/* The output (the run's last tensor) against the reference, bit for bit; where nan_alike, any two
 * NaNs count as equal (arithmetic on a NaN or inf scale need not keep the payload). 0 or infinity. */
static double compare_bits(const hk_case_run *run, int nan_alike, char *detail, size_t size)
{
    const float *got = run->t[run->n_tensors - 1].got;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < run->ref_count; i++) {
        if (memcmp(&got[i], &run->ref[i], 4) == 0 || (nan_alike && isnan(got[i]) && isnan(run->ref[i])))
            continue;
        if (bad++ == 0)
            first = i;
    }
    if (!bad) {
        snprintf(detail, size, "%zu values, every bit equal", run->ref_count);
        return 0.0;
    }
    uint32_t g, r;
    memcpy(&g, &got[first], 4);
    memcpy(&r, &run->ref[first], 4);
    snprintf(detail, size, "%zu of %zu values differ; first [%zu]: %.9g (0x%08x), reference %.9g (0x%08x)", bad,
             run->ref_count, first, got[first], g, run->ref[first], r);
    return INFINITY;
}

/* ---- embedding lookup: d = {n_ids, rows, k} ---- */

/* f16 bits at byte `at` of w */
static void put_f16(uint8_t *w, size_t at, uint16_t h) { memcpy(w + at, &h, 2); }

static hk_status prepare_get_rows(hk_case_run *run, uint64_t seed)
{
    hk_type type = run->shape.type;
    uint32_t n_ids = run->shape.d[0], rows = run->shape.d[1], k = run->shape.d[2];
    hk_rng rng = {seed};
    size_t row_bytes = hk_ref_row_bytes((int)type, k);
    /* raw blocks: every quant bit pattern, and for f32 / f16 every bit pattern (NaN, inf, subnormals) */
    uint8_t *w = hk_random_weights(&rng, (int)type, rows, k, 1);
    uint32_t *ids = hk_case_alloc((size_t)n_ids * sizeof *ids);
    if (!w || !ids) {
        free(w);
        free(ids);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    for (uint32_t i = 0; i < n_ids; i++)
        ids[i] = (uint32_t)(hk_rng_next(&rng) % rows);
    ids[0] = rows - 1; /* the last row: its last byte is the matrix's */
    if (run->ref_mode != HK_REF_NONE) {
        /* ids from a bad producer read nothing and give zeros; rows may repeat */
        if (n_ids >= 3) {
            ids[1] = rows;
            ids[2] = 0;
        }
        if (n_ids >= 7) {
            ids[3] = 0xFFFFFFFFu;
            ids[4] = rows + 1;
            ids[5] = ids[0];
        }
        /* block scales at the ends of f16: subnormal (exact, not flushed) in the last row,
         * inf in the first (inf * 0 is NaN) */
        if (type == Q8) {
            put_f16(w, (rows - 1) * row_bytes, 0x0001);
            put_f16(w, 0, 0x7C00);
        } else if (type == Q4 || type == Q5) {
            put_f16(w, (rows - 1) * row_bytes, 0x03FF);
            put_f16(w, (rows - 1) * row_bytes + 2, 0x8001);
            put_f16(w, 2, 0xFC00);
        } else if (type == Q6) {
            put_f16(w, (rows - 1) * row_bytes + 208, 0x8200);
            put_f16(w, 208, 0x7C00);
        }
    }
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = (size_t)n_ids * k;
        if (!(run->ref = hk_case_alloc(run->ref_count * sizeof(float)))) {
            free(w);
            free(ids);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        hk_ref_get_rows((int)type, w, ids, run->ref, n_ids, rows, k);
    }
    hk_case_tensor_add(run, "w", HK_CASE_IN, (uint64_t)row_bytes * rows, hk_type_alignment(type), 1, w);
    hk_case_tensor_add(run, "ids", HK_CASE_IN, (uint64_t)n_ids * 4, 4, 0, ids);
    hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)n_ids * k * 4, 4, 0, NULL);
    run->bytes = (double)n_ids * ((double)row_bytes + 4.0 + 4.0 * k);
    snprintf(run->label, sizeof run->label, "%s %u of %ux%u", hk_type_name(type), n_ids, rows, k);
    return HK_OK;
}

static hk_status record_get_rows(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const hk_case_shape *sh = &run->shape;
    return hk_get_rows(run->ctx, s, sh->type, v[0], v[1], v[2], sh->d[0], sh->d[1], sh->d[2]);
}

/* the f16 conversion and f32 copies keep NaN payloads; arithmetic on a NaN or inf scale need not */
static double compare_get_rows(const hk_case_run *run, char *detail, size_t size)
{
    hk_type type = run->shape.type;
    return compare_bits(run, type != F32 && type != F16, detail, size);
}

/* First the shapes with every planted id (7 ids), one per type (GPU-assisted validation runs the
 * first small ones flush against the end); then 1 and 3 ids, rows of one block and of 3 or 5
 * blocks (k = 32 / 256 multiples, odd k for f32 and f16), and 8 ids of a 1000 x 2048 matrix. */
static const hk_case_shape get_rows_tests[] = {
    {Q8, {7, 9, 160}, 0, 0},     {Q4, {7, 9, 1280}, 0, 0},     {Q5, {7, 9, 1280}, 0, 0},
    {Q6, {7, 9, 1280}, 0, 0},    {F16, {7, 9, 101}, 0, 0},     {F32, {7, 9, 101}, 0, 0},
    {Q8, {1, 1, 32}, 0, 0},      {Q4, {1, 1, 256}, 0, 0},      {Q5, {1, 1, 256}, 0, 0},
    {Q6, {1, 1, 256}, 0, 0},     {F16, {1, 1, 1}, 0, 0},       {F32, {1, 1, 1}, 0, 0},
    {Q8, {3, 5, 96}, 0, 0},      {Q4, {3, 5, 768}, 0, 0},      {Q5, {3, 5, 768}, 0, 0},
    {Q6, {3, 5, 768}, 0, 0},     {F16, {3, 5, 33}, 0, 0},      {F32, {3, 5, 33}, 0, 0},
    {Q8, {8, 1000, 2048}, 0, 0}, {Q4, {8, 1000, 2048}, 0, 0},  {Q5, {8, 1000, 2048}, 0, 0},
    {Q6, {8, 1000, 2048}, 0, 0}, {F16, {8, 1000, 2048}, 0, 0}, {F32, {8, 1000, 2048}, 0, 0},
};
static const hk_case_shape get_rows_quick[] = {
    {Q8, {8, 8000, 4096}, 0, 0}, {Q4, {8, 8000, 4096}, 0, 0}, {Q5, {8, 8000, 4096}, 0, 0},
    {Q6, {8, 8000, 4096}, 0, 0}, {F16, {8, 8000, 4096}, 0, 0},
};
/* Llama-3-8B's embedding, 128256 x 4096: a decode token and 8 */
static const hk_case_shape get_rows_full[] = {
    {Q8, {1, 128256, 4096}, 0, 0},  {Q8, {8, 128256, 4096}, 0, 0},  {Q4, {1, 128256, 4096}, 0, 0},
    {Q4, {8, 128256, 4096}, 0, 0},  {Q5, {1, 128256, 4096}, 0, 0},  {Q5, {8, 128256, 4096}, 0, 0},
    {Q6, {1, 128256, 4096}, 0, 0},  {Q6, {8, 128256, 4096}, 0, 0},
    {F16, {1, 128256, 4096}, 0, 0}, {F16, {8, 128256, 4096}, 0, 0}, {F32, {8, 128256, 4096}, 0, 0},
};

const hk_case hk_case_get_rows = {
    .name = "get_rows",
    .gate = 1.0, /* compare is exact: 0 or infinity */
    .prepare = prepare_get_rows,
    .record = record_get_rows,
    .compare = compare_get_rows,
    CASE_SHAPES(get_rows_tests, get_rows_quick, get_rows_full),
};

/* ---- MoE combine: d = {tokens, top_k, n}; variant 0 no residual, 1 a residual, 2 y in place on it ---- */

static hk_status prepare_moe_combine(hk_case_run *run, uint64_t seed)
{
    uint32_t tokens = run->shape.d[0], top_k = run->shape.d[1], n = run->shape.d[2];
    int variant = run->shape.variant;
    size_t slots = (size_t)tokens * top_k, outs = (size_t)tokens * n;
    hk_rng rng = {seed};
    float *x = hk_case_alloc(slots * n * sizeof(float)), *w = hk_case_alloc(slots * sizeof(float));
    float *res = variant ? hk_case_alloc(outs * sizeof(float)) : NULL;
    if (!x || !w || (variant && !res)) {
        free(x);
        free(w);
        free(res);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    /* full 24-bit mantissas, so that every product and sum rounds: another order or an FMA changes bits */
    hk_rng_fill(&rng, x, slots * n, -4.0f, 4.0f);
    hk_rng_fill(&rng, w, slots, 0.0f, 1.0f);
    if (res)
        hk_rng_fill(&rng, res, outs, -8.0f, 8.0f);
    /* slots the router left empty; token 1's first: the sum starts from its product, -0 for x < 0
     * (visible with top_k 1 and no residual) */
    if (slots > 2)
        w[1] = 0.0f;
    if (tokens > 1)
        w[top_k] = 0.0f;
    /* an FMA probe in the last token's first value: 1 * -(1 + 2^-22) + (1 + 2^-23) * (1 + 2^-23)
     * is 0 with the product rounded first, 2^-46 fused (hidden by a residual) */
    if (tokens > 2 && top_k > 1) {
        float *wl = w + (size_t)(tokens - 1) * top_k, *xl = x + (size_t)(tokens - 1) * top_k * n;
        for (uint32_t j = 0; j < top_k; j++)
            wl[j] = j == 0 ? 1.0f : j == 1 ? 1.0f + 0x1p-23f : 0.0f;
        xl[0] = -(1.0f + 0x1p-22f);
        xl[n] = 1.0f + 0x1p-23f;
    }
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = outs;
        if (!(run->ref = hk_case_alloc(outs * sizeof(float)))) {
            free(x);
            free(w);
            free(res);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        hk_ref_moe_combine(x, w, res, run->ref, tokens, top_k, n);
    }
    hk_case_tensor_add(run, "x", HK_CASE_IN, (uint64_t)slots * n * 4, 4, 0, x);
    hk_case_tensor_add(run, "weights", HK_CASE_IN, (uint64_t)slots * 4, 4, 0, w);
    if (variant == 2) {
        hk_case_tensor_alias(run, "y", hk_case_tensor_add(run, "residual", HK_CASE_INOUT, outs * 4, 4, 0, res));
    } else {
        if (variant == 1)
            hk_case_tensor_add(run, "residual", HK_CASE_IN, outs * 4, 4, 0, res);
        hk_case_tensor_add(run, "y", HK_CASE_OUT, outs * 4, 4, 0, NULL);
    }
    run->bytes = 4.0 * ((double)slots * n + slots + outs * (variant ? 2.0 : 1.0));
    static const char *const kinds[] = {"", " +residual", " in place"};
    snprintf(run->label, sizeof run->label, "%u tok top%u n%u%s", tokens, top_k, n, kinds[variant]);
    return HK_OK;
}

static hk_status record_moe_combine(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const hk_case_shape *sh = &run->shape;
    hk_view residual = sh->variant ? v[2] : (hk_view){NULL, 0}, y = v[run->n_tensors - 1];
    return hk_moe_combine(run->ctx, s, v[0], v[1], residual, y, sh->d[0], sh->d[1], sh->d[2]);
}

static double compare_moe_combine(const hk_case_run *run, char *detail, size_t size)
{
    return compare_bits(run, 0, detail, size);
}

static const hk_case_shape moe_combine_tests[] = {
    {F32, {7, 8, 100}, 2, 0}, {F32, {3, 3, 33}, 1, 0}, {F32, {1, 1, 1}, 0, 0}, {F32, {5, 64, 3}, 1, 0},
    {F32, {3, 2, 7}, 0, 0},   {F32, {4, 1, 5}, 0, 0},
    /* Qwen3-30B-A3B: top-8 of n = 2048, 1 and 8 tokens */
    {F32, {1, 8, 2048}, 1, 0}, {F32, {8, 8, 2048}, 2, 0}, {F32, {8, 8, 2048}, 0, 0},
};
static const hk_case_shape moe_combine_quick[] = {{F32, {1, 8, 2048}, 2, 0}, {F32, {64, 8, 2048}, 2, 0}};
static const hk_case_shape moe_combine_full[] = {
    {F32, {1, 8, 2048}, 2, 0}, {F32, {8, 8, 2048}, 2, 0}, {F32, {512, 8, 2048}, 2, 0}, {F32, {512, 8, 2048}, 0, 0},
};

const hk_case hk_case_moe_combine = {
    .name = "moe_combine",
    .gate = 1.0, /* compare is exact: 0 or infinity */
    .prepare = prepare_moe_combine,
    .record = record_moe_combine,
    .compare = compare_moe_combine,
    CASE_SHAPES(moe_combine_tests, moe_combine_quick, moe_combine_full),
};
