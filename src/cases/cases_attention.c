/* cases_attention.c — table rows of the attention family: scaled dot-product attention over a
 * KV cache read in place (hk_sdpa_blk: flash-decoding, and flash attention for prefill), and RoPE
 * fused with the cache append (hk_rope); and the KV-cache helpers their tests share. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 HK_TYPE_F32
#define F16 HK_TYPE_F16
#define Q80 HK_TYPE_Q8_0

/* ---- KV caches as an engine lays them out ---- */

int hk_case_kv_create(hk_case_kv *c, hk_type type, uint32_t capacity, uint32_t n_kv_heads, uint32_t head_dim,
                      int token_major, uint32_t pad)
{
    uint64_t row = hk_type_bytes(type, head_dim) + pad;
    memset(c, 0, sizeof *c);
    c->kv = (hk_kv_layout){.type = type, .capacity = capacity};
    c->kv.k_row_stride = c->kv.v_row_stride = token_major ? row * n_kv_heads : row;
    c->kv.k_head_stride = c->kv.v_head_stride = token_major ? row : row * capacity;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->bytes = (uint64_t)(n_kv_heads - 1) * c->kv.k_head_stride + (uint64_t)(capacity - 1) * c->kv.k_row_stride +
               hk_type_bytes(type, head_dim);
    c->k = hk_case_alloc(c->bytes);
    c->v = hk_case_alloc(c->bytes);
    if (!c->k || !c->v) {
        hk_case_kv_destroy(c);
        return 0;
    }
    for (int w = 0; w < 2; w++) {
        uint8_t *img = w ? c->v : c->k;
        for (uint64_t i = 0; i < c->bytes; i++) {
            if (type == HK_TYPE_F32) {
                uint32_t word = 0x7fc0deadu;
                img[i] = (uint8_t)(word >> (8 * (i % 4)));
            } else {
                img[i] = i % 2 ? 0x7E : 0x00; /* f16 NaN 0x7E00, little-endian */
            }
        }
    }
    return 1;
}

void hk_case_kv_destroy(hk_case_kv *c)
{
    free(c->k);
    free(c->v);
    c->k = c->v = NULL;
}

uint64_t hk_case_kv_row(const hk_case_kv *c, int is_v, uint32_t head, uint32_t row)
{
    const hk_kv_layout *kv = &c->kv;
    return (uint64_t)head * (is_v ? kv->v_head_stride : kv->k_head_stride) +
           (uint64_t)row * (is_v ? kv->v_row_stride : kv->k_row_stride);
}

void hk_case_kv_put(hk_case_kv *c, int is_v, uint32_t head, uint32_t row, const float *x)
{
    uint8_t *dst = (is_v ? c->v : c->k) + hk_case_kv_row(c, is_v, head, row);
    uint32_t d = c->head_dim;
    if (c->kv.type == HK_TYPE_F32) {
        memcpy(dst, x, d * 4);
    } else if (c->kv.type == HK_TYPE_F16) {
        for (uint32_t i = 0; i < d; i++) {
            uint16_t h = hk_f32_to_f16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
    } else {
        hk_block_q8_0 blocks[8];
        hk_quant_row_q8_0(x, blocks, d);
        memcpy(dst, blocks, d / 32 * sizeof *blocks);
    }
}

void hk_case_kv_get(const hk_case_kv *c, const uint8_t *image, int is_v, uint32_t head, uint32_t row, float *x)
{
    const uint8_t *src = image + hk_case_kv_row(c, is_v, head, row);
    uint32_t d = c->head_dim;
    if (c->kv.type == HK_TYPE_F32) {
        memcpy(x, src, d * 4);
    } else if (c->kv.type == HK_TYPE_F16) {
        for (uint32_t i = 0; i < d; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            x[i] = hk_f16_to_f32(h);
        }
    } else {
        hk_block_q8_0 blocks[8];
        memcpy(blocks, src, d / 32 * sizeof *blocks);
        hk_dequant_row_q8_0(blocks, x, d);
    }
}

int hk_case_kv_pack(const hk_case_kv *c, const uint8_t *k_image, const uint8_t *v_image, uint32_t rows, float **k,
                    float **v)
{
    size_t n = (size_t)c->n_kv_heads * rows * c->head_dim;
    *k = hk_case_alloc((n ? n : 1) * sizeof(float));
    *v = hk_case_alloc((n ? n : 1) * sizeof(float));
    if (!*k || !*v) {
        free(*k);
        free(*v);
        return 0;
    }
    for (uint32_t h = 0; h < c->n_kv_heads; h++)
        for (uint32_t j = 0; j < rows; j++) {
            size_t at = ((size_t)h * rows + j) * c->head_dim;
            hk_case_kv_get(c, k_image, 0, h, j, *k + at);
            hk_case_kv_get(c, v_image, 1, h, j, *v + at);
        }
    return 1;
}

/* ---- hk_sdpa_blk: d = {n_q, n_heads, n_kv_heads, head_dim, seq_k, capacity, causal, counter} ----
 * variant: SDPA_TOKEN_MAJOR, SDPA_PAD (16 bytes after every row), SDPA_COUNTER (the count from a
 * device u32 holding d[7], clamped by the kernel), SDPA_Q8_1 (out_type Q8_1: the blocks'
 * dequantized values against the reference, within half a quantization step more; bit-identity
 * with hk_quantize_q8_1 of the f32 output is tests/test_attention.c's). */
enum { SDPA_TOKEN_MAJOR = 1, SDPA_PAD = 2, SDPA_COUNTER = 4, SDPA_Q8_1 = 8 };

/* Queries the reference covers: all of them, or (HK_REF_SAMPLE, big prefill shapes) this many
 * spread over them, the first and the last among them, which the compare holds to the gate just
 * the same. */
#define SDPA_SAMPLE_QUERIES 8

typedef struct sdpa_state {
    hk_sdpa_desc desc;
    uint64_t workspace;
    uint32_t n_ref_q;                      /* queries run->ref holds (all: n_q) */
    uint32_t ref_q[SDPA_SAMPLE_QUERIES];   /* which, where sampled */
} sdpa_state;

static hk_status prepare_sdpa(hk_case_run *run, uint64_t seed)
{
    const uint32_t *d = run->shape.d;
    uint32_t n_q = d[0], n_heads = d[1], n_kv = d[2], dim = d[3], capacity = d[5];
    int causal = (int)d[6], counter = run->shape.variant & SDPA_COUNTER;
    hk_type type = run->shape.type;
    hk_rng rng = {seed};
    hk_case_kv cache;
    sdpa_state *st = hk_case_alloc(sizeof *st);
    if (!st || !hk_case_kv_create(&cache, type, capacity, n_kv, dim, run->shape.variant & SDPA_TOKEN_MAJOR,
                                  run->shape.variant & SDPA_PAD ? 16 : 0)) {
        free(st);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    run->state = st;
    st->desc = (hk_sdpa_desc){.n_q = n_q, .n_heads = n_heads, .n_kv_heads = n_kv, .head_dim = dim,
                              .seq_k = counter ? 0 : d[4], .scale = 1.0f / sqrtf((float)dim), .causal = causal,
                              .kv = cache.kv, .out_type = run->shape.variant & SDPA_Q8_1 ? HK_TYPE_Q8_1 : HK_TYPE_F32};
    uint32_t s = counter ? d[7] : d[4], lo = causal ? n_q : 1;
    uint32_t seq = s < lo ? lo : s > capacity ? capacity : s; /* what the kernel attends */
    size_t nq = (size_t)n_q * n_heads * dim;
    float *q = hk_case_alloc(nq * sizeof(float)), *row = hk_case_alloc(dim * sizeof(float));
    if (!q || !row) {
        free(q);
        free(row);
        hk_case_kv_destroy(&cache);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    /* q rows of different magnitudes, so some softmaxes are flat and some peaked; cache rows past
     * the keys stay NaN: reading one poisons the output */
    for (size_t r = 0; r < (size_t)n_q * n_heads; r++) {
        float mag = hk_rng_uniform(&rng, 0.3f, 4.0f);
        hk_rng_fill(&rng, q + r * dim, dim, -mag, mag);
    }
    for (uint32_t h = 0; h < n_kv; h++)
        for (uint32_t j = 0; j < seq; j++) {
            hk_rng_fill(&rng, row, dim, -1.0f, 1.0f);
            hk_case_kv_put(&cache, 0, h, j, row);
            float shift = hk_rng_uniform(&rng, -0.5f, 0.5f);
            for (uint32_t i = 0; i < dim; i++)
                row[i] = hk_rng_uniform(&rng, -1.0f, 1.0f) + shift;
            hk_case_kv_put(&cache, 1, h, j, row);
        }
    free(row);
    hk_status status = hk_sdpa_workspace_bytes(run->ctx, &st->desc, &st->workspace);
    if (status != HK_OK) {
        free(q);
        hk_case_kv_destroy(&cache);
        return status;
    }
    uint32_t align = hk_type_alignment(type);
    hk_case_tensor_add(run, "q", HK_CASE_IN, nq * 4, 4, 0, q);
    hk_case_tensor_add(run, "k_cache", HK_CASE_IN, cache.bytes, align, 1, cache.k);
    hk_case_tensor_add(run, "v_cache", HK_CASE_IN, cache.bytes, align, 1, cache.v);
    hk_case_tensor_add(run, "out", HK_CASE_OUT, st->desc.out_type == HK_TYPE_Q8_1 ? nq / 32 * 36 : nq * 4, 4, 0,
                       NULL);
    hk_case_tensor_add(run, "workspace", HK_CASE_SCRATCH, st->workspace, 4, 0, NULL);
    uint32_t *count = hk_case_alloc(4);
    if (!count)
        return HK_ERROR_OUT_OF_MEMORY;
    *count = d[7];
    hk_case_tensor_add(run, "seq_k_counter", HK_CASE_IN, counter ? 4 : 0, 4, 0, count);
    /* the KV bytes of the keys attended, once: GQA reads each kv row for all its query heads */
    double kv_bytes = 2.0 * seq * n_kv * (double)hk_type_bytes(type, dim);
    run->bytes = kv_bytes + 8.0 * nq;
    /* useful work: 4 d per visible (query, key) pair and head, as issue 7 counts it */
    double pairs = causal ? (double)n_q * seq - (double)n_q * (n_q - 1) / 2 : (double)n_q * seq;
    run->flops = n_q > 1 ? 4.0 * dim * n_heads * pairs : 0;
    snprintf(run->label, sizeof run->label, "%s q%u H%u/%u d%u k%u%s%s%s%s", hk_type_name(type), n_q, n_heads, n_kv,
             dim, seq, capacity != seq ? "" : "", causal ? " causal" : "",
             run->shape.variant & SDPA_TOKEN_MAJOR ? " token-major" : "", counter ? " counter" : "");
    if (st->desc.out_type == HK_TYPE_Q8_1) {
        size_t len = strlen(run->label);
        snprintf(run->label + len, sizeof run->label - len, " out-q8_1");
    }
    if (capacity != seq) {
        size_t len = strlen(run->label);
        snprintf(run->label + len, sizeof run->label - len, " cap%u", capacity);
    }
    if (run->ref_mode != HK_REF_NONE) {
        int sample = run->ref_mode == HK_REF_SAMPLE && n_q > SDPA_SAMPLE_QUERIES;
        st->n_ref_q = sample ? SDPA_SAMPLE_QUERIES : n_q;
        size_t row = (size_t)n_heads * dim;
        run->ref_count = st->n_ref_q * row;
        run->ref = hk_case_alloc(run->ref_count * sizeof(float));
        if (!run->ref)
            return HK_ERROR_OUT_OF_MEMORY;
        /* all queries at once; or each sampled query alone over the keys it sees (causal: the
         * first seq - n_q + i + 1), packed for it */
        for (uint32_t i = 0; i < (sample ? st->n_ref_q : 1); i++) {
            uint32_t qi = sample ? (uint32_t)((uint64_t)i * (n_q - 1) / (st->n_ref_q - 1)) : 0;
            uint32_t seen = !sample ? seq : causal ? seq - n_q + qi + 1 : seq;
            float *kp, *vp;
            if (!hk_case_kv_pack(&cache, cache.k, cache.v, seen, &kp, &vp))
                return HK_ERROR_OUT_OF_MEMORY;
            if (sample) {
                st->ref_q[i] = qi;
                hk_ref_sdpa(q + qi * row, kp, vp, run->ref + i * row, 1, n_heads, n_kv, seen, dim, st->desc.scale, 0);
            } else {
                hk_ref_sdpa(q, kp, vp, run->ref, n_q, n_heads, n_kv, seq, dim, st->desc.scale, causal);
            }
            free(kp);
            free(vp);
        }
    }
    return HK_OK;
}

static hk_status record_sdpa(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const sdpa_state *st = run->state;
    hk_view none = {NULL, 0};
    return hk_sdpa_blk(run->ctx, s, &st->desc, v[0], v[1], v[2], v[3], run->t[4].bytes ? v[4] : none,
                       run->shape.variant & SDPA_COUNTER ? v[5] : none);
}

static uint64_t scratch_sdpa(const hk_case_run *run)
{
    const sdpa_state *st = run->state;
    uint64_t bytes = 0;
    return hk_sdpa_workspace_bytes(run->ctx, &st->desc, &bytes) == HK_OK ? bytes : 0;
}

/* scale_rel of the queries the reference covers */
static double compare_sdpa(const hk_case_run *run, char *detail, size_t size)
{
    const sdpa_state *st = run->state;
    const float *got = run->t[3].got;
    size_t row = (size_t)st->desc.n_heads * st->desc.head_dim;
    int sampled = st->n_ref_q != st->desc.n_q, q8_1 = st->desc.out_type == HK_TYPE_Q8_1;
    float *deq = q8_1 ? hk_case_alloc((size_t)st->desc.n_q * row * sizeof(float)) : NULL;
    float *g = sampled ? hk_case_alloc(run->ref_count * sizeof(float)) : NULL;
    if ((sampled && !g) || (q8_1 && !deq)) {
        free(g);
        free(deq);
        snprintf(detail, size, "out of host memory");
        return INFINITY;
    }
    if (deq) { /* the blocks' values d * q */
        hk_dequant_row_q8_1(run->t[3].got, deq, (size_t)st->desc.n_q * row);
        got = deq;
    }
    for (uint32_t i = 0; g && i < st->n_ref_q; i++)
        memcpy(g + i * row, got + st->ref_q[i] * row, row * sizeof(float));
    double rel = hk_scale_rel(g ? g : got, run->ref, run->ref_count);
    free(g);
    free(deq);
    snprintf(detail, size, "scale_rel=%.3e over %u of %u queries%s", rel, st->n_ref_q, st->desc.n_q,
             q8_1 ? " (Q8_1 blocks dequantized)" : "");
    return rel;
}

/* matrix-core arms hold f16 inputs: issue 7's 5e-3; f32 arithmetic 1e-4; Q8_1 output, the
 * blocks' error more: half a step (a block's step d is its amax / 127, at most the output's scale
 * / 127) and d's f16 rounding (at most 2^-11 d, times |q| <= 127) */
static double gate_sdpa(const hk_case_run *run)
{
    const sdpa_state *st = run->state;
    const char *arm = hk_sdpa_path(run->ctx, &st->desc);
    if (st->desc.out_type == HK_TYPE_Q8_1)
        return HK_GATE_F32 + 0.5 / 127 + 1.0 / 2048;
    return arm && !strcmp(arm, "flash-coopmat") ? HK_GATE_SDPA_F16 : HK_GATE_F32;
}

/* flash-decoding for one query; flash prefill where it serves the shape */
static int tune_sdpa(const hk_case_run *run)
{
    const sdpa_state *st = run->state;
    const char *arm = hk_sdpa_path(run->ctx, &st->desc);
    return st->desc.n_q == 1 ? HK_TUNE_SDPA_DECODE : arm && !strncmp(arm, "flash", 5) ? HK_TUNE_FLASH_PREFILL : 0;
}

static const hk_case_shape sdpa_tests[] = {
    /* {n_q, H, Hkv, d, seq_k, capacity, causal, counter}; the first six (decode and prefill, every
     * cache type, padded and token-major caches whose unused rows are NaN, a counter) are what
     * test_kernels --small runs under GPU-assisted validation */
    {F32, {1, 4, 4, 64, 1, 1, 0, 0}, 0, 0},
    {F16, {1, 8, 1, 128, 300, 512, 0, 0}, SDPA_TOKEN_MAJOR | SDPA_PAD, 0},
    {Q80, {1, 8, 1, 64, 77, 96, 0, 0}, SDPA_TOKEN_MAJOR | SDPA_PAD, 0},
    {F16, {17, 8, 2, 64, 100, 128, 1, 0}, SDPA_TOKEN_MAJOR, 0},
    {F32, {100, 4, 4, 64, 260, 300, 0, 0}, SDPA_PAD, 0},
    {F16, {1, 8, 2, 128, 0, 64, 0, 45}, SDPA_COUNTER, 0},
    /* the output as Q8_1 blocks: one split, splits combined by the last, a counter */
    {F16, {1, 8, 2, 128, 37, 64, 0, 0}, SDPA_Q8_1, 0},
    {Q80, {1, 8, 1, 64, 900, 1024, 0, 0}, SDPA_TOKEN_MAJOR | SDPA_Q8_1, 0},
    {F32, {1, 4, 2, 96, 0, 512, 0, 300}, SDPA_COUNTER | SDPA_Q8_1, 0},
    /* decode, GQA 1, 4 and 8 */
    {F32, {1, 4, 4, 64, 5, 40, 0, 0}, SDPA_TOKEN_MAJOR | SDPA_PAD, 0},
    {F16, {1, 8, 2, 128, 37, 64, 0, 0}, 0, 0},
    {Q80, {1, 8, 2, 128, 100, 128, 0, 0}, 0, 0},
    /* head dims 16 .. 256, with 80 and 96 */
    {F32, {1, 16, 2, 256, 50, 64, 0, 0}, 0, 0},
    {F16, {1, 4, 2, 80, 33, 48, 0, 0}, 0, 0},
    {F32, {1, 4, 2, 96, 33, 48, 0, 0}, SDPA_TOKEN_MAJOR, 0},
    {F16, {1, 2, 1, 16, 20, 32, 0, 0}, SDPA_TOKEN_MAJOR, 0},
    {F16, {1, 16, 2, 256, 50, 64, 0, 0}, SDPA_TOKEN_MAJOR, 0},
    {Q80, {1, 16, 2, 256, 50, 64, 0, 0}, 0, 0},
    {Q80, {1, 4, 1, 96, 40, 64, 0, 0}, 0, 0},
    {Q80, {1, 4, 1, 32, 20, 32, 0, 0}, 0, 0},
    {F32, {1, 4, 1, 128, 60, 64, 0, 0}, 0, 0},
    /* several splits; a capacity with more than 128 splits (the combine pass loops) */
    {F16, {1, 8, 2, 64, 3000, 4096, 0, 0}, 0, 0},
    {F32, {1, 2, 1, 64, 2100, 5000, 0, 0}, SDPA_TOKEN_MAJOR, 0},
    {F16, {1, 2, 1, 16, 5000, 300000, 0, 0}, 0, 0},
    /* small batches and prefill chunks, causal or not (the queries are the last n_q positions) */
    {F16, {2, 8, 2, 128, 40, 64, 1, 0}, 0, 0},
    {F32, {8, 8, 2, 64, 40, 64, 0, 0}, 0, 0},
    {Q80, {8, 8, 1, 64, 30, 64, 1, 0}, 0, 0},
    {F16, {64, 4, 1, 128, 64, 64, 1, 0}, 0, 0},
    /* the count from the device, clamped: 0 -> 1; past the capacity -> capacity; causal 2 -> n_q */
    {F16, {1, 8, 2, 128, 0, 64, 0, 0}, SDPA_COUNTER, 0},
    {Q80, {1, 8, 2, 64, 0, 40, 0, 1000000}, SDPA_COUNTER, 0},
    {F32, {4, 8, 2, 64, 0, 32, 1, 2}, SDPA_COUNTER, 0},
    /* model shapes: Llama-3-8B / Qwen3-8B (H=32 Hkv=8 d=128) and Qwen3-30B-A3B (H=32 Hkv=4) */
    {F16, {1, 32, 8, 128, 200, 256, 0, 0}, 0, 0},
    {F16, {1, 32, 4, 128, 150, 256, 0, 0}, SDPA_TOKEN_MAJOR, 0},
};
static const hk_case_shape sdpa_quick[] = {
    {F16, {1, 32, 8, 128, 2048, 2048, 0, 0}, 0, 0},
    {F16, {64, 32, 8, 128, 256, 256, 1, 0}, 0, 0},
};
/* issue 7's targets, H=32 Hkv=8 d=128 f16 KV, with llama.cpp-vk's flash attention on the H200 */
static const hk_case_shape sdpa_full[] = {
    {F16, {1, 32, 8, 128, 2048, 2048, 0, 0}, 0, 0.0143},
    {F16, {1, 32, 8, 128, 8192, 8192, 0, 0}, 0, 0.103},
    {F16, {1, 32, 8, 128, 32768, 32768, 0, 0}, 0, 0.317},
    {F16, {1, 32, 8, 128, 2048, 32768, 0, 0}, 0, 0},                  /* an engine's cache, replayed */
    {Q80, {1, 32, 4, 128, 32768, 32768, 0, 0}, SDPA_TOKEN_MAJOR, 0},  /* Qwen3-30B-A3B, Q8_0 cache */
    {F16, {1, 32, 4, 128, 32768, 32768, 0, 0}, SDPA_TOKEN_MAJOR, 0},  /* the same, f16 cache (GQA 8) */
    {F16, {1, 32, 4, 128, 32768, 32768, 0, 0}, 0, 0},                 /* ... head-major: the layout's cost */
    {F16, {1, 32, 8, 128, 513, 4096, 0, 0}, 0, 0},                    /* hk-bench --step's attention */
    {F16, {1, 32, 4, 128, 513, 4096, 0, 0}, 0, 0},
    {F16, {1, 32, 8, 128, 513, 4096, 1, 513}, SDPA_COUNTER, 0},       /* ... as the step records it */
    {F16, {1, 32, 4, 128, 513, 4096, 1, 513}, SDPA_COUNTER, 0},
    {F16, {512, 32, 8, 128, 512, 512, 1, 0}, 0, 0.053},
    {F16, {512, 32, 8, 128, 4096, 4096, 1, 0}, 0, 0.196},
    {F16, {2048, 32, 8, 128, 2048, 2048, 1, 0}, 0, 0.283},
};

const hk_case hk_case_sdpa = {
    .name = "sdpa",
    .gate = HK_GATE_F32,
    .prepare = prepare_sdpa,
    .record = record_sdpa,
    .compare = compare_sdpa,
    .gate_of = gate_sdpa,
    .scratch_bytes = scratch_sdpa,
    .tune_family = tune_sdpa,
    CASE_SHAPES(sdpa_tests, sdpa_quick, sdpa_full),
};

/* ---- hk_rope: d = {n_tokens, n_heads, n_kv_heads, head_dim, rot_dim, capacity, first position,
 * theta base} ---- variant: ROPE_* below; ROPE_QK_NORM: q and k heads RMSNorm'ed first
 * (desc->q_norm, k_norm), held to the bits of hk_rmsnorm over the heads and hk_rope, run on the
 * device at prepare, and to hk_ref_rmsnorm before hk_ref_rope. */
enum { ROPE_NEOX = 1, ROPE_FACTORS = 2, ROPE_TOKEN_MAJOR = 4, ROPE_IN_PLACE = 8, ROPE_SCALED = 16, ROPE_QK_NORM = 32 };
#define ROPE_NORM_EPS 1e-6f


/* One allocation: the arrays follow the struct. */
typedef struct rope_state {
    hk_rope_desc desc;
    hk_case_kv cache; /* layout only: the images are the run's k_cache / v_cache tensors */
    uint32_t *positions;
    float *k_ref, *v; /* rotated k and the raw v, [n_tokens, n_kv_heads, d] */
    int q_out, k_cache, v_cache, q_norm; /* tensor indices (q_norm: k_norm follows; -1: none) */
    uint32_t roles;   /* HK_QKV_* the call writes (hk_rope: all three) */
    int v_kind;       /* how a written V row is held (hk_case_kv_row_mismatches): copied, or a product */
    /* ROPE_QK_NORM: the unfused calls' q_out and cache images, in the state's allocation */
    float *unfused_q;
    uint8_t *unfused_k, *unfused_v;
    int unfused_ran;
} rope_state;

/* ROPE_QK_NORM's unfused calls on the device: hk_rmsnorm over the q heads and over the k heads (in
 * place), then hk_rope without norms, from the same inputs and cache images; their q_out and
 * cache images into st->unfused_* (then st->unfused_ran). */
static hk_status rope_unfused(hk_context *ctx, rope_state *st, const float *q, const float *k, const float *v,
                              const float *factors, const float *qn, const float *kn, const uint8_t *k_img,
                              const uint8_t *v_img)
{
    const hk_rope_desc *d = &st->desc;
    uint64_t nq = (uint64_t)d->n_tokens * d->n_heads * d->head_dim * 4, nk = (uint64_t)d->n_tokens * d->n_kv_heads *
                                                                               d->head_dim * 4;
    uint64_t rot = d->rot_dim ? d->rot_dim : d->head_dim, cb = st->cache.bytes, end = 0;
    uint64_t at[10];
    const uint64_t sizes[10] = {nq, nk, nk, 4ull * d->n_tokens, rot / 2 * 4, 4ull * d->head_dim, 4ull * d->head_dim,
                                cb, cb, nq};
    for (int i = 0; i < 10; i++) {
        at[i] = end;
        end += (sizes[i] + 255) / 256 * 256;
    }
    const void *src[9] = {q, k, v, st->positions, factors, qn, kn, k_img, v_img};
    hk_buffer *b = NULL;
    hk_status s = hk_buffer_create(ctx, end, &b);
    for (int i = 0; i < 9 && s == HK_OK; i++)
        if (src[i]) /* no factors: none */
            s = hk_buffer_upload(b, at[i], src[i], sizes[i]);
    hk_view vw[10];
    for (int i = 0; i < 10; i++)
        vw[i] = (hk_view){b, at[i]};
    hk_rope_desc plain = *d;
    plain.q_norm = plain.k_norm = (hk_view){NULL, 0};
    if (s == HK_OK)
        s = hk_rmsnorm(ctx, NULL, vw[0], vw[5], vw[0], d->n_tokens * d->n_heads, d->head_dim, d->norm_eps);
    if (s == HK_OK)
        s = hk_rmsnorm(ctx, NULL, vw[1], vw[6], vw[1], d->n_tokens * d->n_kv_heads, d->head_dim, d->norm_eps);
    if (s == HK_OK)
        s = hk_rope(ctx, NULL, &plain, vw[0], vw[1], vw[2], vw[3], factors ? vw[4] : (hk_view){NULL, 0}, vw[9], vw[7],
                    vw[8]);
    if (s == HK_OK)
        s = hk_buffer_download(b, at[9], st->unfused_q, nq);
    if (s == HK_OK)
        s = hk_buffer_download(b, at[7], st->unfused_k, cb);
    if (s == HK_OK)
        s = hk_buffer_download(b, at[8], st->unfused_v, cb);
    st->unfused_ran = s == HK_OK;
    hk_buffer_destroy(b);
    return s;
}

/* The run's state for a cache of `type` (its layout; the images become the run's tensors): one
 * allocation, the arrays after the struct, and with `unfused` room for the unfused calls' q_out and
 * images last. NULL when out of memory. */
static rope_state *rope_state_new(hk_case_run *run, hk_type type, uint32_t capacity, uint32_t n_tokens,
                                  uint32_t n_heads, uint32_t n_kv, uint32_t dim, int token_major, int unfused,
                                  uint32_t roles, int v_kind)
{
    size_t nq = (size_t)n_tokens * n_heads * dim, nk = (size_t)n_tokens * n_kv * dim;
    hk_case_kv cache;
    if (!hk_case_kv_create(&cache, type, capacity, n_kv, dim, token_major, 0))
        return NULL;
    rope_state *st = hk_case_alloc(sizeof *st + (2 * nk + n_tokens) * 4 + (unfused ? nq * 4 + 2 * cache.bytes : 0));
    if (!st) {
        hk_case_kv_destroy(&cache);
        return NULL;
    }
    memset(st, 0, sizeof *st);
    st->q_norm = -1;
    st->roles = roles;
    st->v_kind = v_kind;
    run->state = st;
    st->cache = cache;
    st->k_ref = (float *)(st + 1);
    st->v = st->k_ref + nk;
    st->positions = (uint32_t *)(st->v + nk);
    if (unfused) {
        st->unfused_q = (float *)(st->positions + n_tokens);
        st->unfused_k = (uint8_t *)(st->unfused_q + nq);
        st->unfused_v = st->unfused_k + cache.bytes;
    }
    return st;
}

static hk_status prepare_rope(hk_case_run *run, uint64_t seed)
{
    const uint32_t *d = run->shape.d;
    uint32_t n_tokens = d[0], n_heads = d[1], n_kv = d[2], dim = d[3], rot = d[4] ? d[4] : d[3], capacity = d[5];
    int variant = run->shape.variant;
    hk_type type = run->shape.type;
    hk_rng rng = {seed};
    size_t nq = (size_t)n_tokens * n_heads * dim, nk = (size_t)n_tokens * n_kv * dim;
    rope_state *st = rope_state_new(run, type, capacity, n_tokens, n_heads, n_kv, dim, variant & ROPE_TOKEN_MAJOR,
                                    variant & ROPE_QK_NORM, HK_QKV_Q | HK_QKV_K | HK_QKV_V, HK_CASE_KV_V);
    if (!st)
        return HK_ERROR_OUT_OF_MEMORY;
    st->desc = (hk_rope_desc){.n_tokens = n_tokens, .n_heads = n_heads, .n_kv_heads = n_kv, .head_dim = dim,
                              .rot_dim = d[4], .neox = variant & ROPE_NEOX, .theta_base = (float)d[7],
                              .freq_scale = variant & ROPE_SCALED ? 0.25f : 1.0f, .kv = st->cache.kv};
    float *q = hk_case_alloc(nq * 4), *k = hk_case_alloc(nk * 4), *v = hk_case_alloc(nk * 4);
    float *factors = hk_case_alloc(rot / 2 * 4), *row = hk_case_alloc(dim * 4);
    uint32_t *positions = hk_case_alloc(n_tokens * 4);
    if (!q || !k || !v || !factors || !row || !positions) {
        free(q), free(k), free(v), free(factors), free(row), free(positions);
        hk_case_kv_destroy(&st->cache);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    hk_rng_fill(&rng, q, nq, -2.0f, 2.0f);
    hk_rng_fill(&rng, k, nk, -2.0f, 2.0f);
    hk_rng_fill(&rng, v, nk, -2.0f, 2.0f);
    for (uint32_t i = 0; i < rot / 2; i++) /* llama 3.1 style: the low frequencies slowed */
        factors[i] = i < rot / 4 ? 1.0f : hk_rng_uniform(&rng, 1.0f, 40.0f);
    /* distinct positions: the first, then far ones, some past the capacity, up to 2^24 - 1 */
    static const uint32_t far[] = {32767, 1048575, 16777215, 65536, 1000003, 123457};
    for (uint32_t t = 0; t < n_tokens; t++)
        positions[t] = t == 0 ? d[6] : t % 2 ? d[6] + 2 * t : far[(t / 2) % 6] + t;
    /* a few rows already in the cache: they must survive */
    for (uint32_t h = 0; h < n_kv; h++)
        for (uint32_t j = 0; j < capacity && j < 3; j++) {
            hk_rng_fill(&rng, row, dim, -1.0f, 1.0f);
            hk_case_kv_put(&st->cache, 0, h, j, row);
            hk_case_kv_put(&st->cache, 1, h, j, row);
        }
    free(row);
    memcpy(st->positions, positions, n_tokens * 4);
    memcpy(st->k_ref, k, nk * 4);
    memcpy(st->v, v, nk * 4);
    const float *ff = variant & ROPE_FACTORS ? factors : NULL;
    /* the norms' weights around 1, as trained ones are */
    float *qn = variant & ROPE_QK_NORM ? hk_case_alloc(2 * (size_t)dim * 4) : NULL, *kn = qn ? qn + dim : NULL;
    if ((variant & ROPE_QK_NORM) && !qn) {
        free(q), free(k), free(v), free(factors), free(positions);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    if (qn) {
        hk_rng_fill(&rng, qn, 2 * (size_t)dim, 0.5f, 1.5f);
        st->desc.norm_eps = ROPE_NORM_EPS;
    }
    hk_status status = HK_OK;
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = nq;
        if (!(run->ref = hk_case_alloc(nq * 4))) {
            free(qn);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        memcpy(run->ref, q, nq * 4);
        if (qn) {
            hk_ref_rmsnorm(run->ref, qn, run->ref, (size_t)n_tokens * n_heads, dim, ROPE_NORM_EPS);
            hk_ref_rmsnorm(st->k_ref, kn, st->k_ref, (size_t)n_tokens * n_kv, dim, ROPE_NORM_EPS);
            status = rope_unfused(run->ctx, st, q, k, v, ff, qn, kn, st->cache.k, st->cache.v);
        }
        hk_ref_rope(run->ref, positions, n_tokens, n_heads, dim, rot, st->desc.neox, st->desc.theta_base,
                    st->desc.freq_scale, ff);
        hk_ref_rope(st->k_ref, positions, n_tokens, n_kv, dim, rot, st->desc.neox, st->desc.theta_base,
                    st->desc.freq_scale, ff);
    }
    int qi = hk_case_tensor_add(run, "q", variant & ROPE_IN_PLACE ? HK_CASE_INOUT : HK_CASE_IN, nq * 4, 4, 0, q);
    hk_case_tensor_add(run, "k", HK_CASE_IN, nk * 4, 4, 0, k);
    hk_case_tensor_add(run, "v", HK_CASE_IN, nk * 4, 4, 0, v);
    hk_case_tensor_add(run, "positions", HK_CASE_IN, n_tokens * 4, 4, 0, positions);
    hk_case_tensor_add(run, "freq_factors", HK_CASE_IN, variant & ROPE_FACTORS ? rot / 2 * 4 : 0, 4, 0, factors);
    st->q_out = variant & ROPE_IN_PLACE ? hk_case_tensor_alias(run, "q_out", qi)
                                        : hk_case_tensor_add(run, "q_out", HK_CASE_OUT, nq * 4, 4, 0, NULL);
    uint32_t align = hk_type_alignment(type);
    st->k_cache = hk_case_tensor_add(run, "k_cache", HK_CASE_INOUT, st->cache.bytes, align, 0, st->cache.k);
    st->v_cache = hk_case_tensor_add(run, "v_cache", HK_CASE_INOUT, st->cache.bytes, align, 0, st->cache.v);
    st->cache.k = st->cache.v = NULL; /* the tensors own the images now */
    if (qn) {
        st->q_norm = hk_case_tensor_add(run, "q_norm", HK_CASE_IN, (uint64_t)dim * 4, 4, 0, qn);
        float *kn_own = hk_case_alloc((size_t)dim * 4);
        if (!kn_own)
            return HK_ERROR_OUT_OF_MEMORY;
        memcpy(kn_own, kn, (size_t)dim * 4);
        hk_case_tensor_add(run, "k_norm", HK_CASE_IN, (uint64_t)dim * 4, 4, 0, kn_own);
    }
    run->bytes = 8.0 * nq + 8.0 * nk + 2.0 * n_tokens * n_kv * (double)hk_type_bytes(type, dim);
    snprintf(run->label, sizeof run->label, "%s T%u H%u/%u d%u rot%u %s cap%u%s%s%s%s", hk_type_name(type), n_tokens,
             n_heads, n_kv, dim, rot, variant & ROPE_NEOX ? "neox" : "normal", capacity,
             variant & ROPE_FACTORS ? " factors" : "", variant & ROPE_TOKEN_MAJOR ? " token-major" : "",
             variant & ROPE_IN_PLACE ? " in-place" : "", qn ? " qk-norm" : "");
    return status;
}

static hk_status record_rope(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const rope_state *st = run->state;
    hk_view none = {NULL, 0};
    hk_rope_desc d = st->desc;
    if (st->q_norm >= 0) {
        d.q_norm = v[st->q_norm];
        d.k_norm = v[st->q_norm + 1];
    }
    return hk_rope(run->ctx, s, &d, v[0], v[1], v[2], v[3], run->shape.variant & ROPE_FACTORS ? v[4] : none,
                   v[st->q_out], v[st->k_cache], v[st->v_cache]);
}

uint32_t hk_case_kv_row_mismatches(const hk_case_kv *c, const uint8_t *image, int kind, uint32_t head, uint32_t row,
                                   const float *want, double *worst)
{
    const uint8_t *got = image + hk_case_kv_row(c, kind != HK_CASE_KV_K, head, row);
    int is_v = kind == HK_CASE_KV_V; /* copied: exact */
    uint32_t d = c->head_dim, bad = 0;
    if (c->kv.type == HK_TYPE_F32) {
        float amax = 1e-30f;
        for (uint32_t i = 0; i < d; i++)
            amax = fmaxf(amax, fabsf(want[i]));
        for (uint32_t i = 0; i < d; i++) {
            float g;
            memcpy(&g, got + 4 * i, 4);
            double e = fabs((double)g - want[i]) / amax;
            *worst = e > *worst ? e : *worst;
            bad += is_v ? g != want[i] : !(e < HK_CASE_GATE_ROPE);
        }
    } else if (c->kv.type == HK_TYPE_F16) {
        /* V is copied: its f16 rounding exactly. K is rotated: within one f16 step of the exact value
         * plus the rotation's f32 error at the row's scale (a value near zero may round to either
         * sign) */
        float amax = 1e-30f;
        for (uint32_t i = 0; i < d; i++)
            amax = fmaxf(amax, fabsf(want[i]));
        for (uint32_t i = 0; i < d; i++) {
            uint16_t g, w = hk_f32_to_f16(want[i]);
            memcpy(&g, got + 2 * i, 2);
            double step = ldexp(1.0, (fabsf(want[i]) < 6.103515625e-05f ? -14 : ilogb(want[i])) - 10);
            double e = fabs((double)hk_f16_to_f32(g) - want[i]);
            bad += is_v ? g != w : !(e <= step + (double)amax * HK_CASE_GATE_ROPE);
        }
    } else {
        hk_block_q8_0 wb[8], gb[8];
        hk_quant_row_q8_0(want, wb, d);
        memcpy(gb, got, d / 32 * sizeof *gb);
        for (uint32_t b = 0; b < d / 32; b++) {
            int dd = (int)gb[b].d - (int)wb[b].d;
            bad += dd < -1 || dd > 1;
            for (int i = 0; i < 32; i++) {
                int dq = gb[b].qs[i] - wb[b].qs[i];
                bad += dq < -1 || dq > 1;
            }
        }
    }
    return bad;
}

/* q_out at the rope gate; every written cache row; every other cache byte as it was. */
static double compare_rope(const hk_case_run *run, char *detail, size_t size)
{
    const rope_state *st = run->state;
    const hk_case_tensor *kt = &run->t[st->k_cache], *vt = &run->t[st->v_cache];
    uint32_t n_tokens = st->desc.n_tokens, n_kv = st->desc.n_kv_heads, dim = st->desc.head_dim;
    double rel = run->ref_count ? hk_scale_rel(run->t[st->q_out].got, run->ref, run->ref_count) : 0.0;
    uint8_t *k_want = hk_case_alloc(kt->bytes), *v_want = hk_case_alloc(vt->bytes);
    if (!k_want || !v_want) {
        free(k_want);
        free(v_want);
        snprintf(detail, size, "out of host memory");
        return INFINITY;
    }
    /* the expected images: the old ones with the new rows' bytes taken from the kernel's, once
     * those rows are checked against the reference */
    memcpy(k_want, kt->host, kt->bytes);
    memcpy(v_want, vt->host, vt->bytes);
    uint64_t row_bytes = hk_type_bytes(st->cache.kv.type, dim);
    uint32_t bad = 0, rows = 0;
    double worst = 0.0;
    for (uint32_t t = 0; t < n_tokens; t++) {
        uint32_t p = st->positions[t];
        if (p >= st->cache.kv.capacity)
            continue;
        for (uint32_t h = 0; h < n_kv; h++) {
            size_t at = ((size_t)t * n_kv + h) * dim;
            uint64_t ko = hk_case_kv_row(&st->cache, 0, h, p), vo = hk_case_kv_row(&st->cache, 1, h, p);
            if (st->roles & HK_QKV_K) {
                bad += hk_case_kv_row_mismatches(&st->cache, kt->got, HK_CASE_KV_K, h, p, st->k_ref + at, &worst);
                memcpy(k_want + ko, (const uint8_t *)kt->got + ko, row_bytes);
                rows++;
            }
            if (st->roles & HK_QKV_V) {
                bad += hk_case_kv_row_mismatches(&st->cache, vt->got, st->v_kind, h, p, st->v + at, &worst);
                memcpy(v_want + vo, (const uint8_t *)vt->got + vo, row_bytes);
                rows++;
            }
        }
    }
    int same = !memcmp(k_want, kt->got, kt->bytes) && !memcmp(v_want, vt->got, vt->bytes);
    free(k_want);
    free(v_want);
    /* ROPE_QK_NORM and hk_matvec_int8_qkv: the unfused calls' bits, q_out and both caches */
    int unfused_same = !st->unfused_ran || (!memcmp(st->unfused_q, run->t[st->q_out].got, run->ref_count * 4) &&
                                            !memcmp(st->unfused_k, kt->got, kt->bytes) &&
                                            !memcmp(st->unfused_v, vt->got, vt->bytes));
    snprintf(detail, size, "q_out scale_rel=%.3e; %u cache rows, %u values off; other cache bytes %s%s", rel, rows, bad,
             same ? "untouched" : "CHANGED",
             !st->unfused_ran ? "" : unfused_same ? "; the unfused calls' bits" : "; NOT the unfused calls' bits");
    return bad || !same || !unfused_same ? INFINITY : rel;
}

static const hk_case_shape rope_tests[] = {
    /* {T, H, Hkv, d, rot, capacity, first position, theta} */
    {F16, {1, 8, 2, 128, 0, 64, 17, 1000000}, ROPE_NEOX | ROPE_TOKEN_MAJOR | ROPE_IN_PLACE, 0}, /* Qwen3 decode */
    {F16, {1, 8, 2, 128, 0, 64, 63, 500000}, ROPE_FACTORS, 0},                               /* Llama 3.1 */
    {F32, {6, 4, 2, 64, 0, 40, 3, 10000}, ROPE_NEOX, 0},                                     /* far positions */
    {F32, {6, 4, 2, 64, 32, 40, 5, 10000}, ROPE_TOKEN_MAJOR | ROPE_IN_PLACE | ROPE_SCALED, 0}, /* partial */
    {Q80, {5, 4, 1, 128, 64, 32, 0, 1000000}, ROPE_NEOX | ROPE_FACTORS, 0},
    {Q80, {3, 2, 2, 256, 0, 16, 2, 10000}, ROPE_TOKEN_MAJOR | ROPE_IN_PLACE, 0},
    {F16, {2, 6, 3, 80, 0, 8, 6, 10000}, ROPE_NEOX, 0},
    {F16, {1, 32, 8, 128, 0, 40000, 32767, 1000000}, ROPE_NEOX | ROPE_TOKEN_MAJOR, 0},
    {F32, {4, 2, 1, 16, 0, 4, 1, 10000}, 0, 0},
    /* q and k norms first (Qwen3): its decode; several tokens, partial rotation, Q8_0; head_dim 80
     * (a last block of 16) */
    {F16, {1, 8, 2, 128, 0, 64, 17, 1000000}, ROPE_NEOX | ROPE_TOKEN_MAJOR | ROPE_IN_PLACE | ROPE_QK_NORM, 0},
    {Q80, {5, 4, 1, 128, 64, 32, 0, 1000000}, ROPE_NEOX | ROPE_QK_NORM, 0},
    {F32, {2, 6, 3, 80, 0, 8, 6, 10000}, ROPE_QK_NORM | ROPE_IN_PLACE, 0},
};
static const hk_case_shape rope_quick[] = {{F16, {1, 32, 8, 128, 0, 4096, 100, 1000000}, ROPE_NEOX, 0},
                                           {F16, {64, 32, 8, 128, 0, 4096, 100, 1000000}, ROPE_NEOX, 0},
                                           {F16, {1, 32, 4, 128, 0, 4096, 100, 1000000}, ROPE_NEOX | ROPE_QK_NORM, 0}};
static const hk_case_shape rope_full[] = {{F16, {1, 32, 8, 128, 0, 32768, 100, 1000000}, ROPE_NEOX, 0},
                                          {F16, {512, 32, 8, 128, 0, 32768, 100, 1000000}, ROPE_NEOX, 0},
                                          {F16, {1, 32, 4, 128, 0, 4096, 512, 1000000}, ROPE_NEOX | ROPE_QK_NORM, 0}};

const hk_case hk_case_rope = {
    .name = "rope",
    .gate = HK_CASE_GATE_ROPE,
    .prepare = prepare_rope,
    .record = record_rope,
    .compare = compare_rope,
    CASE_SHAPES(rope_tests, rope_quick, rope_full),
};

/* ---- hk_matvec_int8_qkv: d = {n_heads, n_kv_heads, head_dim, rot_dim, capacity, position, theta
 * base, k}, type the weights'; variant: the roles (HK_QKV_*) and QKV_* below. Held to the bits of
 * hk_matvec_int8_multi into f32 and hk_rope on it, run on the device at prepare (the roles a call
 * lacks keep the images as they were), and to hk_ref_matvec_q8_1 before hk_ref_rope; the cache
 * rows checked as hk_rope's case checks them, V as a product (within the rope gate). ---- */
enum { QKV_F16 = 8, QKV_FACTORS = 16, QKV_TOKEN_MAJOR = 32 };

/* The unfused calls on the device: hk_matvec_int8_multi of the roles' matrices into f32 q | k | v
 * (a role the call lacks: zeros), then hk_rope on them from the same cache images. */
static hk_status qkv_unfused(hk_context *ctx, rope_state *st, hk_type wtype, uint8_t *const *w, const uint32_t *rows,
                             uint32_t n, const hk_block_q8_1 *xq, uint32_t k, const float *factors)
{
    const hk_rope_desc *d = &st->desc;
    uint64_t nq = (uint64_t)d->n_heads * d->head_dim * 4, nk = (uint64_t)d->n_kv_heads * d->head_dim * 4;
    uint64_t rot = d->rot_dim ? d->rot_dim : d->head_dim, cb = st->cache.bytes, row_bytes = hk_ref_row_bytes(wtype, k);
    /* q, k, v, positions, factors, k image, v image, q_out, xq, the weights */
    uint64_t sizes[12] = {nq, nk, nk, 4, rot / 2 * 4, cb, cb, nq, (uint64_t)k / 32 * 36, 0, 0, 0}, at[12], end = 0;
    for (uint32_t i = 0; i < n; i++)
        sizes[9 + i] = row_bytes * rows[i];
    for (int i = 0; i < 12; i++) {
        at[i] = end;
        end += (sizes[i] + 255) / 256 * 256;
    }
    const void *src[9] = {NULL, NULL, NULL, st->positions, factors, st->unfused_k, st->unfused_v, NULL, xq};
    hk_buffer *b = NULL;
    hk_status s = hk_buffer_create(ctx, end, &b);
    float *zeros = s == HK_OK ? hk_case_alloc(nq > nk ? nq : nk) : NULL;
    if (s == HK_OK && !zeros)
        s = HK_ERROR_OUT_OF_MEMORY;
    if (zeros)
        memset(zeros, 0, nq > nk ? nq : nk);
    for (int i = 0; i < 3 && s == HK_OK; i++)
        s = hk_buffer_upload(b, at[i], zeros, sizes[i]);
    for (int i = 3; i < 9 && s == HK_OK; i++)
        if (src[i])
            s = hk_buffer_upload(b, at[i], src[i], sizes[i]);
    for (uint32_t i = 0; i < n && s == HK_OK; i++)
        s = hk_buffer_upload(b, at[9 + i], w[i], sizes[9 + i]);
    free(zeros);
    hk_view vw[12];
    for (int i = 0; i < 12; i++)
        vw[i] = (hk_view){b, at[i]};
    /* each role's products at its place in q | k | v (the multi's sums are each matrix's alone) */
    for (uint32_t i = 0, m = 0; i < 3 && s == HK_OK; i++)
        if (st->roles & 1u << i) {
            s = hk_matvec_int8_multi(ctx, NULL, wtype, 1, &vw[9 + m], &rows[m], vw[8], vw[i], k);
            m++;
        }
    (void)n;
    if (s == HK_OK)
        s = hk_rope(ctx, NULL, d, vw[0], vw[1], vw[2], vw[3], factors ? vw[4] : (hk_view){NULL, 0}, vw[7], vw[5],
                    vw[6]);
    /* the roles the call has: their outputs; the others' images stay as they were */
    if (s == HK_OK && (st->roles & HK_QKV_Q))
        s = hk_buffer_download(b, at[7], st->unfused_q, nq);
    if (s == HK_OK && (st->roles & HK_QKV_K))
        s = hk_buffer_download(b, at[5], st->unfused_k, cb);
    if (s == HK_OK && (st->roles & HK_QKV_V))
        s = hk_buffer_download(b, at[6], st->unfused_v, cb);
    st->unfused_ran = s == HK_OK;
    hk_buffer_destroy(b);
    return s;
}

static hk_status prepare_qkv(hk_case_run *run, uint64_t seed)
{
    static const char *const names[] = {"w_q", "w_k", "w_v"};
    const uint32_t *d = run->shape.d;
    uint32_t n_heads = d[0], n_kv = d[1], dim = d[2], rot = d[3] ? d[3] : d[2], capacity = d[4], k = d[7];
    int variant = run->shape.variant;
    uint32_t roles = (uint32_t)variant & (HK_QKV_Q | HK_QKV_K | HK_QKV_V);
    hk_type wtype = run->shape.type, ctype = variant & QKV_F16 ? HK_TYPE_F16 : HK_TYPE_F32;
    hk_rng rng = {seed};
    size_t nq = (size_t)n_heads * dim;
    rope_state *st = rope_state_new(run, ctype, capacity, 1, n_heads, n_kv, dim, variant & QKV_TOKEN_MAJOR, 1, roles,
                                    HK_CASE_KV_V_PRODUCT);
    if (!st)
        return HK_ERROR_OUT_OF_MEMORY;
    st->desc = (hk_rope_desc){.n_tokens = 1, .n_heads = n_heads, .n_kv_heads = n_kv, .head_dim = dim,
                              .rot_dim = d[3], .theta_base = (float)d[6], .freq_scale = 1.0f, .kv = st->cache.kv};
    st->positions[0] = d[5];
    /* a few rows already in the cache, the token's own among them: they must survive where the
     * call has no such role */
    float *row = hk_case_alloc(dim * 4);
    if (!row)
        return HK_ERROR_OUT_OF_MEMORY;
    for (uint32_t h = 0; h < n_kv; h++)
        for (uint32_t j = 0; j < capacity && j < 3; j++) {
            uint32_t r = j == 2 && d[5] < capacity ? d[5] : j;
            hk_rng_fill(&rng, row, dim, -1.0f, 1.0f);
            hk_case_kv_put(&st->cache, 0, h, r, row);
            hk_case_kv_put(&st->cache, 1, h, r, row);
        }
    free(row);
    memcpy(st->unfused_k, st->cache.k, st->cache.bytes);
    memcpy(st->unfused_v, st->cache.v, st->cache.bytes);
    uint32_t rows[3], n = 0;
    uint8_t *w[3] = {NULL, NULL, NULL};
    float *x = hk_case_alloc((size_t)k * 4), *factors = hk_case_alloc(rot / 2 * 4);
    hk_block_q8_1 *xq = hk_case_alloc((size_t)k / 32 * sizeof *xq);
    uint32_t *positions = hk_case_alloc(4);
    int ok = x && factors && xq && positions;
    for (uint32_t i = 0; i < 3; i++)
        if (roles & 1u << i) {
            rows[n] = (i == 0 ? n_heads : n_kv) * dim;
            w[n] = hk_random_weights(&rng, (int)wtype, rows[n], k, 0);
            ok = ok && w[n++];
        }
    if (!ok) {
        free(x), free(factors), free(xq), free(positions), free(w[0]), free(w[1]), free(w[2]);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    positions[0] = d[5];
    hk_rng_fill(&rng, x, k, -1.0f, 1.0f);
    hk_quant_row_q8_1(x, xq, k);
    free(x);
    for (uint32_t i = 0; i < rot / 2; i++)
        factors[i] = i < rot / 4 ? 1.0f : hk_rng_uniform(&rng, 1.0f, 40.0f);
    const float *ff = variant & QKV_FACTORS ? factors : NULL;
    hk_status status = HK_OK;
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = roles & HK_QKV_Q ? nq : 0;
        if (!(run->ref = hk_case_alloc(nq * 4))) {
            free(factors), free(xq), free(positions), free(w[0]), free(w[1]), free(w[2]);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        float *out[3] = {run->ref, st->k_ref, st->v};
        for (uint32_t i = 0, m = 0; i < 3; i++)
            if (roles & 1u << i) {
                hk_ref_matvec_q8_1((int)wtype, w[m], xq, out[i], rows[m], k);
                m++;
            }
        hk_ref_rope(run->ref, st->positions, 1, n_heads, dim, rot, 0, st->desc.theta_base, 1.0f, ff);
        hk_ref_rope(st->k_ref, st->positions, 1, n_kv, dim, rot, 0, st->desc.theta_base, 1.0f, ff);
        status = qkv_unfused(run->ctx, st, wtype, w, rows, n, xq, k, ff);
    }
    uint64_t row_bytes = hk_ref_row_bytes((int)wtype, k);
    for (uint32_t i = 0, m = 0; i < 3; i++)
        if (roles & 1u << i) {
            hk_case_tensor_add(run, names[i], HK_CASE_IN, row_bytes * rows[m], wtype == HK_TYPE_Q4_K ||
                               wtype == HK_TYPE_Q5_K ? 16 : 2, 1, w[m]);
            m++;
        }
    hk_case_tensor_add(run, "xq", HK_CASE_IN, (uint64_t)k / 32 * 36, 4, 0, xq);
    hk_case_tensor_add(run, "positions", HK_CASE_IN, 4, 4, 0, positions);
    hk_case_tensor_add(run, "freq_factors", HK_CASE_IN, ff ? rot / 2 * 4 : 0, 4, 0, factors);
    st->q_out = hk_case_tensor_add(run, "q_out", HK_CASE_OUT, roles & HK_QKV_Q ? nq * 4 : 0, 4, 0, NULL);
    uint32_t align = hk_type_alignment(ctype);
    st->k_cache = hk_case_tensor_add(run, "k_cache", HK_CASE_INOUT, st->cache.bytes, align, 0, st->cache.k);
    st->v_cache = hk_case_tensor_add(run, "v_cache", HK_CASE_INOUT, st->cache.bytes, align, 0, st->cache.v);
    st->cache.k = st->cache.v = NULL; /* the tensors own the images now */
    uint32_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += rows[i];
    run->bytes = (double)row_bytes * total + 36.0 * k / 32 + (roles & HK_QKV_Q ? 4.0 * nq : 0.0) +
                 (double)hk_type_bytes(ctype, dim) * n_kv * ((roles & HK_QKV_K ? 1 : 0) + (roles & HK_QKV_V ? 1 : 0));
    snprintf(run->label, sizeof run->label, "%s %s%s%s H%u/%u d%u rot%u x%u %s cap%u pos%u%s%s", hk_type_name(wtype),
             roles & HK_QKV_Q ? "q" : "", roles & HK_QKV_K ? "k" : "", roles & HK_QKV_V ? "v" : "", n_heads, n_kv, dim,
             rot, k, hk_type_name(ctype), capacity, d[5], ff ? " factors" : "",
             variant & QKV_TOKEN_MAJOR ? " token-major" : "");
    return status;
}

static hk_status record_qkv(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const rope_state *st = run->state;
    hk_view none = {NULL, 0};
    uint32_t n = 0;
    for (uint32_t i = 0; i < 3; i++)
        n += (st->roles >> i) & 1u;
    return hk_matvec_int8_qkv(run->ctx, s, run->shape.type, st->roles, v, v[n], run->shape.d[7], &st->desc, v[n + 1],
                              run->shape.variant & QKV_FACTORS ? v[n + 2] : none,
                              st->roles & HK_QKV_Q ? v[st->q_out] : none, st->roles & HK_QKV_K ? v[st->k_cache] : none,
                              st->roles & HK_QKV_V ? v[st->v_cache] : none);
}

#define QK (HK_QKV_Q | HK_QKV_K)
#define QKV (HK_QKV_Q | HK_QKV_K | HK_QKV_V)
static const hk_case_shape qkv_tests[] = {
    /* {H, Hkv, d, rot, capacity, position, theta, k} */
    {HK_TYPE_Q4_K, {8, 2, 128, 0, 64, 17, 500000, 256}, QK | QKV_F16, 0},           /* Llama's Q and K */
    {HK_TYPE_Q6_K, {8, 2, 128, 0, 64, 17, 500000, 256}, HK_QKV_V | QKV_F16, 0},     /* and its Q6_K V */
    {HK_TYPE_Q8_0, {4, 2, 64, 32, 40, 39, 10000, 512}, QKV | QKV_FACTORS, 0},       /* partial, last row */
    {HK_TYPE_Q5_K, {6, 3, 80, 0, 8, 1000003, 10000, 256}, QKV | QKV_TOKEN_MAJOR, 0}, /* past the capacity */
    {HK_TYPE_Q4_K, {2, 1, 16, 0, 4, 3, 10000, 512}, HK_QKV_K | QKV_F16 | QKV_FACTORS, 0},
    {HK_TYPE_Q8_0, {4, 4, 32, 0, 16, 5, 10000, 64}, HK_QKV_Q, 0},
    {HK_TYPE_Q4_K, {32, 8, 128, 0, 4096, 512, 500000, 4096}, QK | QKV_F16 | QKV_FACTORS, 0}, /* Llama-3-8B */
};
static const hk_case_shape qkv_quick[] = {{HK_TYPE_Q4_K, {32, 8, 128, 0, 4096, 512, 500000, 4096}, QK | QKV_F16, 0}};
static const hk_case_shape qkv_full[] = {
    {HK_TYPE_Q4_K, {32, 8, 128, 0, 4096, 512, 500000, 4096}, QK | QKV_F16, 0},
    {HK_TYPE_Q6_K, {32, 8, 128, 0, 4096, 512, 500000, 4096}, HK_QKV_V | QKV_F16, 0},
    {HK_TYPE_Q4_K, {32, 8, 128, 0, 4096, 512, 500000, 4096}, QKV | QKV_F16, 0},
};
#undef QK
#undef QKV

const hk_case hk_case_matvec_int8_qkv = {
    .name = "matvec_int8_qkv",
    .gate = HK_CASE_GATE_ROPE,
    .prepare = prepare_qkv,
    .record = record_qkv,
    .compare = compare_rope,
    CASE_SHAPES(qkv_tests, qkv_quick, qkv_full),
};
