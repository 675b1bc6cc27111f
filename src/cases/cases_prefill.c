/* cases_prefill.c — table rows of the prefill family: the int8 MMQ GEMM, the MoE slot grouping
 * and the expert-indexed GEMM. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q8 HK_TYPE_Q8_0
#define Q4 HK_TYPE_Q4_K
#define Q5 HK_TYPE_Q5_K
#define Q6 HK_TYPE_Q6_K
#define F32 HK_TYPE_F32
#define F16 HK_TYPE_F16

/* Rows of the output the reference covers: all of them, or (big shapes in hk-check) a sample
 * spread over the rows, which the compare holds to the gate just the same. */
#define SAMPLE_ROWS 8

typedef struct gemm_state {
    uint32_t n_ref_rows;
    uint32_t ref_rows[]; /* output rows run->ref holds, in order */
} gemm_state;

static gemm_state *sample_rows(const hk_case_run *run, uint32_t rows)
{
    uint32_t n = run->ref_mode == HK_REF_SAMPLE && rows > SAMPLE_ROWS ? SAMPLE_ROWS : rows;
    if (run->ref_mode == HK_REF_NONE)
        n = 0;
    gemm_state *st = hk_case_alloc(sizeof *st + (n ? n : 1) * sizeof(uint32_t));
    if (!st)
        return NULL;
    st->n_ref_rows = n;
    for (uint32_t i = 0; i < n; i++) /* the first and the last row among them */
        st->ref_rows[i] = n == rows ? i : (uint32_t)((uint64_t)i * (rows - 1) / (n - 1));
    return st;
}

/* scale_rel of the reference rows of the output (n values each) */
static double compare_rows(const hk_case_run *run, const float *got, uint32_t n, char *detail, size_t size)
{
    const gemm_state *st = run->state;
    float *g = hk_case_alloc((size_t)st->n_ref_rows * n * sizeof(float));
    if (!g) {
        snprintf(detail, size, "out of host memory");
        return INFINITY;
    }
    for (uint32_t i = 0; i < st->n_ref_rows; i++)
        memcpy(g + (size_t)i * n, got + (size_t)st->ref_rows[i] * n, n * sizeof(float));
    double rel = hk_scale_rel(g, run->ref, (size_t)st->n_ref_rows * n);
    free(g);
    snprintf(detail, size, "scale_rel=%.3e over %u rows (%s arm)", rel, st->n_ref_rows,
             hk_mmq_path(run->ctx, run->shape.type));
    return rel;
}

/* Q8_1 rows of random activations of a different magnitude per row. */
static hk_block_q8_1 *activation_rows(hk_rng *rng, uint32_t rows, uint32_t k)
{
    float *f = hk_case_alloc((size_t)k * sizeof(float));
    hk_block_q8_1 *x = hk_case_alloc((size_t)rows * (k / 32) * sizeof *x);
    if (!f || !x) {
        free(f);
        free(x);
        return NULL;
    }
    for (uint32_t r = 0; r < rows; r++) {
        float scale = hk_rng_uniform(rng, 0.1f, 4.0f);
        hk_rng_fill(rng, f, k, -scale, scale);
        hk_quant_row_q8_1(f, x + (size_t)r * (k / 32), k);
    }
    free(f);
    return x;
}

static int tune_mmq(const hk_case_run *run)
{
    (void)run;
    return HK_TUNE_MMQ;
}

static int tune_mmq_id(const hk_case_run *run)
{
    (void)run;
    return HK_TUNE_MMQ_ID;
}

static int tune_gemm(const hk_case_run *run)
{
    (void)run;
    return HK_TUNE_GEMM_F16;
}

static double gate_mmq(const hk_case_run *run)
{
    const char *arm = hk_mmq_path(run->ctx, run->shape.type);
    return arm && !strcmp(arm, "coopmat") ? HK_GATE_MMQ_COOPMAT : HK_GATE_MMQ;
}

/* ---- hk_mmq: d = {m, n, k}, variant 1 = raw random weight blocks ---- */

static hk_status prepare_mmq(hk_case_run *run, uint64_t seed)
{
    hk_type type = run->shape.type;
    uint32_t m = run->shape.d[0], n = run->shape.d[1], k = run->shape.d[2];
    hk_rng rng = {seed};
    uint64_t w_bytes = hk_ref_row_bytes((int)type, k) * n;
    uint8_t *w = hk_random_weights(&rng, (int)type, n, k, run->shape.variant);
    hk_block_q8_1 *x = activation_rows(&rng, m, k);
    gemm_state *st = sample_rows(run, m);
    if (!w || !x || !st) {
        free(w);
        free(x);
        free(st);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    run->state = st;
    hk_case_tensor_add(run, "w", HK_CASE_IN, w_bytes, 2, 1, w);
    hk_case_tensor_add(run, "xq", HK_CASE_IN, (uint64_t)m * (k / 32) * 36, 4, 0, x);
    hk_case_tensor_add(run, "out", HK_CASE_OUT, (uint64_t)m * n * 4, 4, 0, NULL);
    run->bytes = (double)w_bytes + 36.0 * m * (k / 32) + 4.0 * m * n;
    run->flops = 2.0 * m * n * k;
    snprintf(run->label, sizeof run->label, "%s m%u %ux%u%s", hk_type_name(type), m, n, k,
             run->shape.variant ? " raw" : "");
    if (st->n_ref_rows) {
        run->ref_count = (size_t)st->n_ref_rows * n;
        if (!(run->ref = hk_case_alloc(run->ref_count * sizeof(float))))
            return HK_ERROR_OUT_OF_MEMORY;
        for (uint32_t i = 0; i < st->n_ref_rows; i++)
            hk_ref_mmq((int)type, w, x + (size_t)st->ref_rows[i] * (k / 32), run->ref + (size_t)i * n, 1, n, k);
    }
    return HK_OK;
}

static hk_status record_mmq(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const hk_case_shape *sh = &run->shape;
    return hk_mmq(run->ctx, s, sh->type, v[0], v[1], v[2], sh->d[0], sh->d[1], sh->d[2]);
}

static double compare_mmq(const hk_case_run *run, char *detail, size_t size)
{
    return compare_rows(run, run->t[2].got, run->shape.d[1], detail, size);
}

static const hk_case_shape mmq_tests[] = {
    /* tails in m and n, k at one and several blocks, raw blocks and real rows */
    {Q4, {1, 7, 256}, 1, 0},   {Q4, {17, 64, 512}, 0, 0}, {Q4, {100, 130, 1024}, 1, 0},
    {Q5, {1, 7, 256}, 0, 0},   {Q5, {17, 64, 512}, 1, 0}, {Q5, {100, 130, 1024}, 1, 0},
    {Q6, {1, 33, 256}, 0, 0},  {Q6, {70, 64, 512}, 1, 0}, {Q8, {33, 200, 320}, 1, 0},
    {Q8, {64, 1, 32}, 0, 0},   {Q8, {5, 257, 2048}, 0, 0},
    /* m <= 16: the few-token kernel where the views are 16-byte aligned */
    {Q4, {8, 40, 768}, 1, 0}, {Q4, {13, 40, 768}, 1, 0}, {Q8, {8, 40, 768}, 1, 0}, {Q8, {13, 40, 768}, 1, 0},
    {Q6, {8, 40, 768}, 1, 0}, {Q6, {13, 40, 768}, 1, 0}, {Q5, {8, 40, 768}, 1, 0}, {Q5, {13, 40, 768}, 0, 0},
};
static const hk_case_shape mmq_quick[] = {{Q4, {64, 512, 2048}, 1, 0}, {Q8, {64, 512, 2048}, 1, 0},
                                          {Q6, {64, 512, 2048}, 1, 0}, {Q5, {64, 512, 2048}, 1, 0}};
/* issue 8's prefill shapes, 512 tokens, with llama.cpp-vk's times on the H200 */
static const hk_case_shape mmq_full[] = {
    {Q4, {512, 4096, 4096}, 1, 0.463}, {Q4, {512, 14336, 4096}, 1, 1.49}, {Q8, {512, 4096, 4096}, 1, 0.499},
    {Q6, {512, 4096, 4096}, 1, 0},     {Q4, {2048, 4096, 4096}, 1, 0},
    /* 8 tokens (the few-token kernel), beside llama.cpp-vk's 8-token matvec */
    {Q4, {8, 4096, 4096}, 1, 0.159},   {Q4, {8, 14336, 4096}, 1, 0.423},
    {Q4, {8, 4096, 14336}, 1, 0},
    /* a few tokens of the other types, and Q4_K at 16 token columns */
    {Q8, {8, 4096, 4096}, 1, 0},       {Q6, {8, 4096, 4096}, 1, 0},       {Q4, {16, 4096, 4096}, 1, 0},
    {Q4, {4, 4096, 4096}, 1, 0},       {Q4, {16, 14336, 4096}, 1, 0},     {Q4, {12, 4096, 4096}, 1, 0},
    {Q8, {8, 14336, 4096}, 1, 0},      {Q8, {16, 4096, 4096}, 1, 0},      {Q8, {8, 4096, 14336}, 1, 0},
    {Q6, {8, 14336, 4096}, 1, 0},      {Q6, {16, 4096, 4096}, 1, 0},      {Q6, {8, 4096, 14336}, 1, 0},
    /* Q5_K (Q5_K_M files), 512 tokens and a few */
    {Q5, {512, 4096, 4096}, 1, 0},     {Q5, {512, 14336, 4096}, 1, 0},    {Q5, {8, 4096, 4096}, 1, 0},
    {Q5, {16, 4096, 4096}, 1, 0},
};

const hk_case hk_case_mmq = {
    .name = "mmq",
    .gate = HK_GATE_MMQ,
    .prepare = prepare_mmq,
    .record = record_mmq,
    .compare = compare_mmq,
    .gate_of = gate_mmq,
    .tune_family = tune_mmq,
    CASE_SHAPES(mmq_tests, mmq_quick, mmq_full),
};

/* ---- hk_moe_expert_rows: d = {tokens, top_k, n_experts} ---- */

static hk_status prepare_rows(hk_case_run *run, uint64_t seed)
{
    uint32_t tokens = run->shape.d[0], top_k = run->shape.d[1], n_experts = run->shape.d[2];
    uint32_t n_slots = tokens * top_k;
    hk_rng rng = {seed};
    uint32_t *ids = hk_random_routing(&rng, tokens, top_k, n_experts);
    if (!ids)
        return HK_ERROR_OUT_OF_MEMORY;
    if (run->ref_mode != HK_REF_NONE) /* malformed ids from the GPU side are dropped and counted */
        for (uint32_t s = 1; s < n_slots; s += 7)
            ids[s] = s % 2 ? 0xFFFFFFFFu : n_experts + s;
    hk_case_tensor_add(run, "ids", HK_CASE_IN, (uint64_t)n_slots * 4, 4, 1, ids);
    hk_case_tensor_add(run, "offsets", HK_CASE_OUT, (uint64_t)(n_experts + 1) * 4, 4, 0, NULL);
    hk_case_tensor_add(run, "slots", HK_CASE_OUT, (uint64_t)n_slots * 4, 4, 0, NULL);
    hk_case_tensor_add(run, "dropped", HK_CASE_OUT, 4, 4, 0, NULL);
    run->bytes = 8.0 * n_slots + 4.0 * (n_experts + 2);
    snprintf(run->label, sizeof run->label, "%u tok top%u E%u", tokens, top_k, n_experts);
    if (run->ref_mode != HK_REF_NONE) {
        /* the reference grouping, as u32 bit patterns in ref: offsets, slots, dropped */
        run->ref_count = (size_t)n_experts + 1 + n_slots + 1;
        if (!(run->ref = hk_case_alloc(run->ref_count * sizeof(float))))
            return HK_ERROR_OUT_OF_MEMORY;
        uint32_t *r = (uint32_t *)run->ref;
        hk_ref_moe_expert_rows(ids, n_slots, n_experts, r, r + n_experts + 1, r + n_experts + 1 + n_slots);
    }
    return HK_OK;
}

static hk_status record_rows(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const uint32_t *d = run->shape.d;
    return hk_moe_expert_rows(run->ctx, s, v[0], v[1], v[2], v[3], d[0] * d[1], d[2]);
}

/* Exact: the counts, every slot in its place (ascending within each expert: stable), the dropped
 * count. 0 when all agree. */
static double compare_rows_exact(const hk_case_run *run, char *detail, size_t size)
{
    uint32_t n_experts = run->shape.d[2], n_slots = run->shape.d[0] * run->shape.d[1];
    const uint32_t *r = (const uint32_t *)run->ref;
    uint32_t bad_off = 0, bad_slots = 0, dropped = *(const uint32_t *)run->t[3].got;
    for (uint32_t e = 0; e <= n_experts; e++)
        bad_off += ((const uint32_t *)run->t[1].got)[e] != r[e];
    for (uint32_t s = 0; s < n_slots; s++)
        bad_slots += ((const uint32_t *)run->t[2].got)[s] != r[n_experts + 1 + s];
    uint32_t want = r[n_experts + 1 + n_slots];
    snprintf(detail, size, "%u offsets and %u slot entries differ; dropped %u (want %u)", bad_off, bad_slots, dropped,
             want);
    return bad_off || bad_slots || dropped != want ? INFINITY : 0.0;
}

static const hk_case_shape rows_tests[] = {{F32, {1, 1, 1}, 0, 0}, {F32, {5, 8, 128}, 0, 0},
                                           {F32, {64, 8, 128}, 0, 0}, {F32, {300, 2, 7}, 0, 0}};
static const hk_case_shape rows_quick[] = {{F32, {64, 8, 128}, 0, 0}};
static const hk_case_shape rows_full[] = {{F32, {512, 8, 128}, 0, 0}, {F32, {4096, 8, 128}, 0, 0}};

const hk_case hk_case_moe_expert_rows = {
    .name = "moe_expert_rows",
    .gate = 1.0, /* compare is exact: 0 or infinity */
    .prepare = prepare_rows,
    .record = record_rows,
    .compare = compare_rows_exact,
    CASE_SHAPES(rows_tests, rows_quick, rows_full),
};

/* ---- hk_mmq_id: d = {n_experts, n, k, tokens, top_k}, variant 1 = one x row per slot (down) ---- */

static hk_status prepare_mmq_id(hk_case_run *run, uint64_t seed)
{
    hk_type type = run->shape.type;
    uint32_t n_experts = run->shape.d[0], n = run->shape.d[1], k = run->shape.d[2];
    uint32_t tokens = run->shape.d[3], top_k = run->shape.d[4], n_slots = tokens * top_k;
    uint32_t per_x = run->shape.variant ? 1 : top_k, x_rows = n_slots / per_x;
    hk_rng rng = {seed};
    uint64_t expert_bytes = hk_ref_row_bytes((int)type, k) * n;
    uint8_t *w = hk_random_weights(&rng, (int)type, (size_t)n_experts * n, k, 1);
    hk_block_q8_1 *x = activation_rows(&rng, x_rows, k);
    uint32_t *ids = hk_random_routing(&rng, tokens, top_k, n_experts);
    uint32_t *offsets = hk_case_alloc((n_experts + 1) * sizeof *offsets), *slots = hk_case_alloc(n_slots * 4);
    gemm_state *st = sample_rows(run, n_slots);
    if (!w || !x || !ids || !offsets || !slots || !st) {
        free(w), free(x), free(ids), free(offsets), free(slots), free(st);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    uint32_t dropped;
    hk_ref_moe_expert_rows(ids, n_slots, n_experts, offsets, slots, &dropped);
    run->state = st;
    uint32_t used = 0; /* experts the routing reads */
    for (uint32_t e = 0; e < n_experts; e++)
        used += offsets[e + 1] > offsets[e];
    hk_case_tensor_add(run, "w", HK_CASE_IN, expert_bytes * n_experts, 2, 1, w);
    hk_case_tensor_add(run, "xq", HK_CASE_IN, (uint64_t)x_rows * (k / 32) * 36, 4, 0, x);
    hk_case_tensor_add(run, "offsets", HK_CASE_IN, (uint64_t)(n_experts + 1) * 4, 4, 0, offsets);
    hk_case_tensor_add(run, "slots", HK_CASE_IN, (uint64_t)n_slots * 4, 4, 0, slots);
    hk_case_tensor_add(run, "out", HK_CASE_OUT, (uint64_t)n_slots * n * 4, 4, 0, NULL);
    run->bytes = (double)used * expert_bytes + 36.0 * x_rows * (k / 32) + 4.0 * n_slots * (n + 1);
    run->flops = 2.0 * n_slots * n * k;
    snprintf(run->label, sizeof run->label, "%s E%u %ux%u %u tok top%u%s", hk_type_name(type), n_experts, n, k, tokens,
             top_k, run->shape.variant ? " per-slot" : "");
    hk_status status = HK_OK;
    if (st->n_ref_rows) {
        /* each sampled slot's row straight from its routed expert, as hk_ref_mmq computes it */
        run->ref_count = (size_t)st->n_ref_rows * n;
        if (!(run->ref = hk_case_alloc(run->ref_count * sizeof(float))))
            status = HK_ERROR_OUT_OF_MEMORY;
        for (uint32_t i = 0; status == HK_OK && i < st->n_ref_rows; i++) {
            uint32_t s = st->ref_rows[i];
            hk_ref_mmq((int)type, w + (size_t)ids[s] * expert_bytes, x + (size_t)(s / per_x) * (k / 32),
                       run->ref + (size_t)i * n, 1, n, k);
        }
    }
    free(ids);
    return status;
}

static hk_status record_mmq_id(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const hk_case_shape *sh = &run->shape;
    uint32_t n_slots = sh->d[3] * sh->d[4];
    hk_mmq_id_shape shape = {sh->d[0], sh->d[1], sh->d[2], n_slots, sh->variant ? 1 : sh->d[4]};
    /* the typed entries where there is one, so that the table runs them too */
    if (sh->type == HK_TYPE_Q4_K)
        return hk_mmq_q4k_id(run->ctx, s, v[0], v[1], v[2], v[3], v[4], &shape);
    if (sh->type == HK_TYPE_Q5_K)
        return hk_mmq_q5k_id(run->ctx, s, v[0], v[1], v[2], v[3], v[4], &shape);
    if (sh->type == HK_TYPE_Q6_K)
        return hk_mmq_q6k_id(run->ctx, s, v[0], v[1], v[2], v[3], v[4], &shape);
    return hk_mmq_id(run->ctx, s, sh->type, v[0], v[1], v[2], v[3], v[4], &shape);
}

static double compare_mmq_id(const hk_case_run *run, char *detail, size_t size)
{
    return compare_rows(run, run->t[4].got, run->shape.d[1], detail, size);
}

static const hk_case_shape mmq_id_tests[] = {
    {Q4, {8, 64, 256, 9, 4}, 0, 0},  {Q6, {8, 33, 512, 5, 2}, 1, 0}, {Q8, {4, 100, 64, 40, 2}, 0, 0},
    {Q5, {8, 33, 512, 5, 2}, 1, 0},
    {Q4, {128, 96, 512, 17, 8}, 0, 0}, /* more experts than slots: most are empty */
};
static const hk_case_shape mmq_id_quick[] = {{Q4, {16, 256, 512, 32, 4}, 0, 0}, {Q6, {16, 512, 256, 32, 4}, 1, 0},
                                             {Q5, {16, 256, 512, 32, 4}, 0, 0}};
/* Qwen3-30B-A3B prefill, 512 tokens, top-8: gate/up Q4_K 768x2048 (x per token), down Q6_K
 * 2048x768 (x per slot); llama.cpp-vk's time for gate/up on the H200; gate/up in Q5_K (Q5_K_M) */
static const hk_case_shape mmq_id_full[] = {{Q4, {128, 768, 2048, 512, 8}, 0, 1.37},
                                            {Q6, {128, 2048, 768, 512, 8}, 1, 0},
                                            {Q5, {128, 768, 2048, 512, 8}, 0, 0}};

const hk_case hk_case_mmq_id = {
    .name = "mmq_id",
    .gate = HK_GATE_MMQ,
    .prepare = prepare_mmq_id,
    .record = record_mmq_id,
    .compare = compare_mmq_id,
    .gate_of = gate_mmq,
    .tune_family = tune_mmq_id,
    CASE_SHAPES(mmq_id_tests, mmq_id_quick, mmq_id_full),
};

/* ---- hk_gemm_f16 (f32 x, f16 products): d = {m, n, k}, variant 1 = raw random weight blocks
 * (never F16: its raw bits hold infinities and NaNs) ---- */

/* hk-check on big shapes: the reference covers a few rows of x (all n outputs of each). */
#define GEMM_SAMPLE_ROWS 4u

/* run->state: the x rows the reference covers, then the reference on f16-rounded operands */
typedef struct f16_state {
    uint32_t rows;
    uint32_t row[GEMM_SAMPLE_ROWS]; /* HK_REF_SAMPLE: their indices; HK_REF_ALL: rows = m, all of them */
    float ref_f16[];                /* rows x n */
} f16_state;

static uint32_t f16_state_row(const f16_state *s, uint32_t m, uint32_t i) { return s->rows == m ? i : s->row[i]; }

static hk_status prepare_gemm(hk_case_run *run, uint64_t seed)
{
    hk_type type = run->shape.type;
    uint32_t m = run->shape.d[0], n = run->shape.d[1], k = run->shape.d[2];
    hk_rng rng = {seed};
    uint64_t w_bytes = hk_ref_row_bytes((int)type, k) * n;
    float *x = hk_case_alloc((size_t)m * k * sizeof(float));
    uint8_t *w = hk_random_weights(&rng, (int)type, n, k, run->shape.variant);
    if (!x || !w) {
        free(x);
        free(w);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    hk_rng_fill(&rng, x, (size_t)m * k, -1.0f, 1.0f);
    hk_case_tensor_add(run, "w", HK_CASE_IN, w_bytes, 2, 1, w);
    hk_case_tensor_add(run, "x", HK_CASE_IN, (uint64_t)m * k * 4, 4, 0, x);
    hk_case_tensor_add(run, "out", HK_CASE_OUT, (uint64_t)m * n * 4, 4, 0, NULL);
    run->bytes = (double)w_bytes + 4.0 * m * k + 4.0 * m * n;
    run->flops = 2.0 * m * n * k;
    snprintf(run->label, sizeof run->label, "%s m%u n%u k%u%s", hk_type_name(type), m, n, k,
             run->shape.variant ? " raw" : "");
    if (run->ref_mode == HK_REF_NONE)
        return HK_OK;
    uint32_t rows = run->ref_mode == HK_REF_ALL || m <= GEMM_SAMPLE_ROWS ? m : GEMM_SAMPLE_ROWS;
    f16_state *s = hk_case_alloc(sizeof *s + (size_t)rows * n * sizeof(float));
    float *xs = hk_case_alloc((size_t)rows * k * sizeof(float));
    run->ref = hk_case_alloc((size_t)rows * n * sizeof(float));
    run->state = s;
    if (!s || !xs || !run->ref) {
        free(xs);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    s->rows = rows;
    for (uint32_t i = 0; i < GEMM_SAMPLE_ROWS; i++) /* first, last and two between */
        s->row[i] = (uint32_t)((uint64_t)(m - 1) * i / (GEMM_SAMPLE_ROWS - 1));
    for (uint32_t i = 0; i < rows; i++)
        memcpy(xs + (size_t)i * k, x + (size_t)f16_state_row(s, m, i) * k, (size_t)k * sizeof(float));
    run->ref_count = (size_t)rows * n;
    int ok = hk_ref_gemm((int)type, w, xs, run->ref, rows, n, k) &&
             hk_ref_gemm_f16((int)type, w, xs, s->ref_f16, rows, n, k);
    free(xs);
    return ok ? HK_OK : HK_ERROR_OUT_OF_MEMORY;
}

static hk_status record_gemm(const hk_case_run *run, hk_stream *stream, const hk_view *v, uint32_t op)
{
    (void)op;
    const uint32_t *d = run->shape.d;
    return hk_gemm_f16(run->ctx, stream, run->shape.type, v[0], v[1], v[2], d[0], d[1], d[2]);
}

/* The gate: scale-relative to the full-precision product (HK_GATE_F16); beside it, and held to
 * HK_GATE_F16_OPERANDS, the distance to the product of the f16-rounded operands. */
static double compare_gemm(const hk_case_run *run, char *detail, size_t size)
{
    const f16_state *s = run->state;
    uint32_t m = run->shape.d[0], n = run->shape.d[1];
    const float *got = run->t[2].got;
    float *sample = s->rows == m ? NULL : hk_case_alloc(run->ref_count * sizeof(float));
    if (sample) {
        for (uint32_t i = 0; i < s->rows; i++)
            memcpy(sample + (size_t)i * n, got + (size_t)s->row[i] * n, (size_t)n * sizeof(float));
        got = sample;
    } else if (s->rows != m) {
        snprintf(detail, size, "out of host memory");
        return INFINITY;
    }
    double rel = hk_scale_rel(got, run->ref, run->ref_count);
    double rel16 = hk_scale_rel(got, s->ref_f16, run->ref_count);
    free(sample);
    snprintf(detail, size, "scale_rel=%.3e, vs f16 operands %.3e (gate %.0e) (%s arm)", rel, rel16,
             HK_GATE_F16_OPERANDS, hk_gemm_f16_path(run->ctx, run->shape.type));
    return rel16 < HK_GATE_F16_OPERANDS ? rel : INFINITY;
}

static const hk_case_shape gemm_tests[] = {
    /* one output; tails in m and n under one tile and across several; exact portable tiles; the
     * coopmat tile (128) plus one; k = 256, 512, 2048 */
    {Q4, {1, 1, 256}, 1, 0},
    {F16, {33, 130, 77}, 0, 0}, /* F16 at k odd among the first (the GPU-assisted run's); more below */
    {Q4, {17, 7, 512}, 0, 0},
    {Q4, {100, 257, 2048}, 1, 0},
    {Q4, {64, 64, 256}, 0, 0},
    {Q4, {129, 130, 512}, 0, 0},
    {Q6, {17, 33, 512}, 1, 0},
    {Q6, {1, 257, 256}, 0, 0},
    {Q6, {100, 7, 2048}, 0, 0},
    /* Q8_0: k of an odd number of 32-blocks (the k step falls back to 32) */
    {Q8, {100, 7, 96}, 1, 0},
    {Q8, {3, 130, 2048}, 0, 0},
    {Q8, {17, 1, 32}, 1, 0},
    /* k over one dispatch's loop budget on both tilings (8512 portable, 59008 on the small coopmat
     * tile a 5 x 9 output takes): passes that add to out */
    {Q4, {5, 9, 59136}, 0, 0},
    /* Q5_K: Q4_K's chunks and the 5th bits; tails, the coopmat tile plus one */
    {Q5, {17, 7, 512}, 1, 0},
    {Q5, {100, 257, 2048}, 0, 0},
    {Q5, {129, 130, 256}, 1, 0},
    /* F16 (a copy into the tiles), any k: one value; a partial last k step with k off 8 (32-bit
     * weight loads; k odd above: 16-bit loads, x value by value) and off 32 (16-byte loads); whole
     * steps; the coopmat tile plus one; a last pass of one partial step (portable) */
    {F16, {1, 1, 1}, 0, 0},
    {F16, {17, 7, 100}, 0, 0},
    {F16, {9, 40, 200}, 0, 0},
    {F16, {100, 257, 2048}, 0, 0},
    {F16, {129, 64, 256}, 0, 0},
    {F16, {5, 9, 8520}, 0, 0},
};
static const hk_case_shape gemm_quick[] = {{Q4, {64, 512, 2048}, 1, 0},
                                           {Q5, {64, 512, 2048}, 1, 0},
                                           {Q6, {64, 512, 2048}, 1, 0},
                                           {Q8, {64, 512, 2048}, 1, 0},
                                           {F16, {64, 512, 2048}, 0, 0}};
/* ---- bench shapes (issue 8, prefill at 512 tokens): useful ops 2*m*n*k ----
 * Llama-3-8B q/o (4096x4096), gate/up (14336x4096) and down (4096x14336); Qwen3-1.7B's; the
 * other weight types at 4096x4096. */
static const hk_case_shape gemm_full[] = {
    {Q4, {512, 4096, 4096}, 1, 0},  {Q4, {512, 14336, 4096}, 1, 0}, {Q4, {512, 4096, 14336}, 1, 0},
    {Q4, {512, 2048, 2048}, 1, 0},  {Q4, {512, 6144, 2048}, 1, 0},  {Q4, {512, 2048, 6144}, 1, 0},
    {Q6, {512, 4096, 4096}, 1, 0},  {Q8, {512, 4096, 4096}, 1, 0},
    {F16, {512, 4096, 4096}, 0, 0}, {F16, {512, 14336, 4096}, 0, 0}, {F16, {512, 4096, 14336}, 0, 0},
    {F16, {512, 2048, 2048}, 0, 0},
    /* Q5_K (Q5_K_M files): q/o and gate/up */
    {Q5, {512, 4096, 4096}, 1, 0},  {Q5, {512, 14336, 4096}, 1, 0},
};

const hk_case hk_case_gemm_f16 = {
    .name = "gemm_f16",
    .gate = HK_GATE_F16,
    .prepare = prepare_gemm,
    .record = record_gemm,
    .compare = compare_gemm,
    .tune_family = tune_gemm,
    CASE_SHAPES(gemm_tests, gemm_quick, gemm_full),
};
