/* GPU kernels against their C references (src/ref): seeded random inputs, poisoned outputs,
 * views at unaligned offsets with guard words around every output, tails and real model shapes. */
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* f32 kernels: the GPU sums in another order than the reference; 1e-4 of the output scale is
 * far above that rounding and far below any decode or indexing bug. */
#define GATE_F32 HK_GATE_F32

#define GUARD 16 /* poisoned floats before and after each output view */

static hk_context *ctx;

/* An output buffer: GUARD poison words, the output, GUARD poison words. */
typedef struct out_buffer {
    hk_buffer *buffer;
    size_t n;
    float *host;
} out_buffer;

static out_buffer out_create(size_t n)
{
    out_buffer o = {NULL, n, malloc((n + 2 * GUARD) * sizeof(float))};
    hk_poison(o.host, n + 2 * GUARD);
    o.buffer = hk_test_buffer(ctx, (n + 2 * GUARD) * sizeof(float), o.host);
    return o;
}

static hk_view out_view(const out_buffer *o) { return (hk_view){o->buffer, GUARD * sizeof(float)}; }

/* Downloads the output; checks the guards are still poison. Returns the output values. */
static const float *out_read(out_buffer *o, const char *name)
{
    if (hk_buffer_download(o->buffer, 0, o->host, (o->n + 2 * GUARD) * sizeof(float)) != HK_OK)
        hk_check(0, name, "download failed: %s", hk_last_error());
    uint32_t bad = 0;
    for (size_t i = 0; i < GUARD; i++) {
        uint32_t a, b;
        memcpy(&a, &o->host[i], 4);
        memcpy(&b, &o->host[GUARD + o->n + i], 4);
        bad += (a != HK_POISON_WORD) + (b != HK_POISON_WORD);
    }
    char label[160];
    snprintf(label, sizeof label, "%s guards", name);
    hk_check(bad == 0, label, "%u words written outside the output", bad);
    return o->host + GUARD;
}

static void out_destroy(out_buffer *o)
{
    hk_buffer_destroy(o->buffer);
    free(o->host);
}

/* Uploads bytes at a given offset inside a larger buffer (the view's offset). */
static hk_view input_at(const void *data, size_t bytes, uint64_t offset, hk_buffer **keep)
{
    hk_buffer *b = hk_test_buffer(ctx, offset + bytes + 64, NULL);
    if (hk_buffer_upload(b, offset, data, bytes) != HK_OK)
        hk_check(0, "upload", "%s", hk_last_error());
    *keep = b;
    return (hk_view){b, offset};
}

/* rows GGUF rows of k values: raw random blocks (every bit pattern), or quantized rows of
 * different magnitude and sign balance, like real weight matrices. */
static uint8_t *make_weights(hk_rng *rng, hk_type type, uint32_t rows, uint32_t k, int raw_blocks)
{
    size_t row_bytes = hk_ref_row_bytes((int)type, k);
    uint8_t *w = malloc(row_bytes * rows);
    if (raw_blocks) {
        hk_random_blocks(rng, (int)type, w, row_bytes * rows / hk_type_block_bytes(type), 0.05f);
        return w;
    }
    float *row = malloc(k * sizeof(float));
    for (uint32_t r = 0; r < rows; r++) {
        float scale = hk_rng_uniform(rng, 0.01f, 0.5f), bias = hk_rng_uniform(rng, -0.2f, 0.2f) * scale;
        for (uint32_t i = 0; i < k; i++)
            row[i] = hk_rng_uniform(rng, -scale, scale) + bias;
        if (type == HK_TYPE_Q8_0)
            hk_quant_row_q8_0(row, (hk_block_q8_0 *)(w + r * row_bytes), k);
        else if (type == HK_TYPE_Q4_K)
            hk_quant_row_q4_k(row, (hk_block_q4_k *)(w + r * row_bytes), k);
        else
            hk_quant_row_q6_k(row, (hk_block_q6_k *)(w + r * row_bytes), k);
    }
    free(row);
    return w;
}

/* aligned: 16-byte aligned views (the subgroup-rows kernel where the device allows it); else
 * the loosest legal offsets (2-byte weights, 4-byte x: the portable kernel) */
static void test_matvec(hk_type type, uint32_t rows, uint32_t k, int raw_blocks, int aligned, uint64_t seed)
{
    hk_rng rng = {seed};
    int ref_type = (int)type;
    size_t row_bytes = hk_ref_row_bytes(ref_type, k);
    float *x = malloc(k * sizeof(float)), *ref = malloc(rows * sizeof(float));
    hk_rng_fill(&rng, x, k, -1.0f, 1.0f);
    uint8_t *w = make_weights(&rng, type, rows, k, raw_blocks);
    hk_ref_matvec(ref_type, w, x, ref, rows, k);

    hk_buffer *wb, *xb;
    hk_view wv = input_at(w, row_bytes * rows, aligned ? 32 : 2, &wb); /* GGUF blocks are only 2-byte aligned */
    hk_view xv = input_at(x, k * sizeof(float), aligned ? 16 : 12, &xb);
    out_buffer y = out_create(rows);
    char name[160];
    snprintf(name, sizeof name, "matvec %s %ux%u %s %s", hk_type_name(type), rows, k,
             raw_blocks ? "raw-blocks" : "quantized", aligned ? "aligned" : "offset");
    hk_status st = hk_matvec(ctx, NULL, type, wv, xv, out_view(&y), rows, k);
    if (st != HK_OK)
        hk_check(0, name, "%s", hk_last_error());
    else
        hk_check_close(name, out_read(&y, name), ref, rows, GATE_F32);
    out_destroy(&y);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    free(w);
    free(x);
    free(ref);
}

/* Int8 matvec: held to its own reference (deq(W) . deq(xq) in double, on the same Q8_1 x) at the
 * exact gate, and to the f32 matvec on the unquantized x at the int8 gate. */
static void test_matvec_int8(hk_type type, uint32_t rows, uint32_t k, int raw_blocks, uint64_t seed)
{
    hk_rng rng = {seed};
    size_t row_bytes = hk_ref_row_bytes((int)type, k);
    float *x = malloc(k * sizeof(float)), *ref = malloc(rows * sizeof(float)), *ref_f32 = malloc(rows * sizeof(float));
    hk_block_q8_1 *xq = malloc(k / 32 * sizeof *xq);
    hk_rng_fill(&rng, x, k, -1.0f, 1.0f);
    uint8_t *w = make_weights(&rng, type, rows, k, raw_blocks);
    hk_quant_row_q8_1(x, xq, k);
    hk_ref_matvec_q8_1((int)type, w, xq, ref, rows, k);
    hk_ref_matvec((int)type, w, x, ref_f32, rows, k);
    hk_buffer *wb, *xb;
    /* Q4_K needs 16-byte aligned weights here; the others take GGUF's 2-byte alignment */
    hk_view wv = input_at(w, row_bytes * rows, type == HK_TYPE_Q4_K ? 32 : 34, &wb);
    hk_view xv = input_at(xq, k / 32 * sizeof *xq, 4, &xb);
    out_buffer y = out_create(rows);
    char name[160];
    snprintf(name, sizeof name, "matvec_int8 %s %ux%u %s", hk_type_name(type), rows, k,
             raw_blocks ? "raw-blocks" : "quantized");
    hk_status st = hk_matvec_int8(ctx, NULL, type, wv, xv, out_view(&y), rows, k);
    if (st != HK_OK) {
        hk_check(0, name, "%s", hk_last_error());
    } else {
        const float *got = out_read(&y, name);
        hk_check_close(name, got, ref, rows, HK_GATE_EXACT);
        /* the int8 gate is relative to the scale of many outputs; one output alone can cancel to
         * near zero, where the activation's rounding is a large part of it */
        if (rows >= 32) {
            char vs[200];
            snprintf(vs, sizeof vs, "%s vs f32 x", name);
            hk_check_close(vs, got, ref_f32, rows, HK_GATE_INT8);
        }
    }
    out_destroy(&y);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    free(w);
    free(x);
    free(xq);
    free(ref);
    free(ref_f32);
}

/* MoE expert gather: ids with repeats and out-of-range values (their slots must come out 0),
 * f32 and Q8_1 x, one x for all slots or one per slot. */
static void test_moe(hk_type type, uint32_t n_experts, uint32_t n, uint32_t k, uint32_t slots, int x_per_slot,
                     uint64_t seed)
{
    hk_rng rng = {seed};
    size_t expert_bytes = hk_ref_row_bytes((int)type, k) * n, xs = x_per_slot ? slots : 1;
    uint8_t *w = malloc(expert_bytes * n_experts);
    float *x = malloc(xs * k * sizeof(float)), *ref = malloc((size_t)slots * n * sizeof(float));
    hk_block_q8_1 *xq = malloc(xs * k / 32 * sizeof *xq);
    uint32_t *ids = malloc(slots * sizeof *ids);
    hk_random_blocks(&rng, (int)type, w, expert_bytes * n_experts / hk_type_block_bytes(type), 0.05f);
    hk_rng_fill(&rng, x, xs * k, -1.0f, 1.0f);
    hk_quant_row_q8_1(x, xq, xs * k);
    for (uint32_t s = 0; s < slots; s++)
        ids[s] = (uint32_t)(hk_rng_next(&rng) % n_experts);
    if (slots > 2) { /* malformed routing from the GPU side must not read or write out of bounds */
        ids[1] = n_experts;
        ids[slots - 1] = 0xFFFFFFFFu;
        ids[2] = ids[0]; /* and the same expert twice */
    }
    hk_buffer *wb, *xb, *xqb, *ib;
    hk_view wv = input_at(w, expert_bytes * n_experts, 32, &wb);
    hk_view xv = input_at(x, xs * k * sizeof(float), 16, &xb);
    hk_view xqv = input_at(xq, xs * k / 32 * sizeof *xq, 4, &xqb);
    hk_view iv = input_at(ids, slots * sizeof *ids, 8, &ib);
    hk_moe_shape shape = {n_experts, n, k, slots, x_per_slot};
    for (int int8 = 0; int8 < 2; int8++) {
        if (int8)
            hk_ref_moe_matvec_q8_1((int)type, w, xq, x_per_slot, ids, ref, n_experts, n, k, slots);
        else
            hk_ref_moe_matvec((int)type, w, x, x_per_slot, ids, ref, n_experts, n, k, slots);
        out_buffer y = out_create((size_t)slots * n);
        char name[160];
        snprintf(name, sizeof name, "moe_matvec%s %s E%u %ux%u slots=%u%s", int8 ? "_int8" : "", hk_type_name(type),
                 n_experts, n, k, slots, x_per_slot ? " x-per-slot" : "");
        hk_status st = int8 ? hk_moe_matvec_int8(ctx, NULL, type, wv, xqv, iv, out_view(&y), &shape)
                            : hk_moe_matvec(ctx, NULL, type, wv, xv, iv, out_view(&y), &shape);
        if (st != HK_OK) {
            hk_check(0, name, "%s", hk_last_error());
        } else {
            const float *got = out_read(&y, name);
            hk_check_close(name, got, ref, (size_t)slots * n, int8 ? HK_GATE_EXACT : GATE_F32);
            if (slots > 2) {
                int zeros = 1;
                for (uint32_t r = 0; r < n; r++)
                    zeros &= got[n + r] == 0.0f && got[(size_t)(slots - 1) * n + r] == 0.0f;
                char label[200];
                snprintf(label, sizeof label, "%s: out-of-range ids give zeros", name);
                hk_check(zeros, label, NULL);
            }
        }
        out_destroy(&y);
    }
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(xqb);
    hk_buffer_destroy(ib);
    free(w);
    free(x);
    free(xq);
    free(ids);
    free(ref);
}

/* Router: ids must match the reference except where two experts tie on the boundary logit
 * (counted, and checked to be real ties); weights at the f32 gate. Every token has exact ties,
 * token 1 NaN and -inf logits, token 2 fewer numbers than top_k. */
static void test_route(uint32_t tokens, uint32_t n_experts, uint32_t top_k, int renorm, uint64_t seed)
{
    hk_rng rng = {seed};
    size_t n = (size_t)tokens * n_experts;
    float *logits = malloc(n * sizeof(float)), *ref_w = malloc(tokens * top_k * sizeof(float));
    uint32_t *ref_ids = malloc(tokens * top_k * sizeof(uint32_t)), *got_ids = malloc(tokens * top_k * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++) /* a coarse grid, so ties happen on their own too */
        logits[i] = (float)(hk_rng_next(&rng) % 4000) / 1000.0f - 2.0f;
    for (uint32_t i = 0; i < n_experts; i += 2)
        logits[i + 1 < n_experts ? i + 1 : i] = logits[i];
    if (tokens > 1) {
        logits[n_experts + 0] = NAN;
        logits[n_experts + 1] = -INFINITY;
        logits[n_experts + 2] = 50.0f;
    }
    if (tokens > 2 && top_k > 2) { /* only two numbers: the other picks are "none" with weight 0 */
        for (uint32_t i = 2; i < n_experts; i++)
            logits[2 * n_experts + i] = NAN;
    }
    hk_ref_moe_route(logits, tokens, n_experts, top_k, renorm, ref_ids, ref_w);
    hk_buffer *lb;
    hk_view lv = input_at(logits, n * sizeof(float), 4, &lb);
    out_buffer ids = out_create(tokens * top_k), w = out_create(tokens * top_k);
    char name[128];
    snprintf(name, sizeof name, "moe_route tokens=%u E%u top%u%s", tokens, n_experts, top_k, renorm ? " renorm" : "");
    hk_status st = hk_moe_route(ctx, NULL, lv, out_view(&ids), out_view(&w), tokens, n_experts, top_k, renorm);
    if (st != HK_OK) {
        hk_check(0, name, "%s", hk_last_error());
    } else {
        memcpy(got_ids, out_read(&ids, name), tokens * top_k * sizeof(uint32_t));
        const float *got_w = out_read(&w, name);
        uint32_t ties = 0, wrong = 0;
        for (uint32_t t = 0; t < tokens; t++)
            for (uint32_t r = 0; r < top_k; r++) {
                uint32_t a = ref_ids[t * top_k + r], b = got_ids[t * top_k + r];
                if (a == b)
                    continue;
                const float *l = logits + (size_t)t * n_experts;
                if (a < n_experts && b < n_experts && l[a] == l[b])
                    ties++;
                else
                    wrong++;
            }
        hk_check(wrong == 0, name, "ids: %u wrong, %u boundary ties", wrong, ties);
        char label[160];
        snprintf(label, sizeof label, "%s weights", name);
        hk_check_close(label, got_w, ref_w, tokens * top_k, GATE_F32);
    }
    out_destroy(&ids);
    out_destroy(&w);
    hk_buffer_destroy(lb);
    free(logits);
    free(ref_w);
    free(ref_ids);
    free(got_ids);
}

static void test_gemv(uint32_t rows, uint32_t k, uint64_t seed)
{
    hk_rng rng = {seed};
    float *w = malloc((size_t)rows * k * sizeof(float)), *x = malloc(k * sizeof(float)), *ref = malloc(rows * sizeof(float));
    hk_rng_fill(&rng, w, (size_t)rows * k, -0.1f, 0.1f);
    hk_rng_fill(&rng, x, k, -1.0f, 1.0f);
    hk_ref_gemv_f32(w, x, ref, rows, k);
    hk_buffer *wb, *xb;
    hk_view wv = input_at(w, (size_t)rows * k * sizeof(float), 4, &wb);
    hk_view xv = input_at(x, k * sizeof(float), 8, &xb);
    out_buffer y = out_create(rows);
    char name[96];
    snprintf(name, sizeof name, "gemv_f32 %ux%u", rows, k);
    hk_status st = hk_gemv_f32(ctx, NULL, wv, xv, out_view(&y), rows, k);
    if (st != HK_OK)
        hk_check(0, name, "%s", hk_last_error());
    else
        hk_check_close(name, out_read(&y, name), ref, rows, GATE_F32);
    out_destroy(&y);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    free(w);
    free(x);
    free(ref);
}

static void test_rmsnorm(uint32_t rows, uint32_t n, int in_place, uint64_t seed)
{
    hk_rng rng = {seed};
    size_t count = (size_t)rows * n;
    float *x = malloc(count * sizeof(float)), *w = malloc(n * sizeof(float)), *ref = malloc(count * sizeof(float));
    hk_rng_fill(&rng, x, count, -3.0f, 3.0f);
    hk_rng_fill(&rng, w, n, 0.5f, 1.5f);
    const float eps = 1e-6f;
    hk_ref_rmsnorm(x, w, ref, rows, n, eps);
    hk_buffer *wb;
    hk_view wv = input_at(w, n * sizeof(float), 4, &wb);
    out_buffer y = out_create(count);
    hk_buffer *xb = NULL;
    hk_view xv;
    if (in_place) { /* x lives in the output view */
        if (hk_buffer_upload(y.buffer, GUARD * sizeof(float), x, count * sizeof(float)) != HK_OK)
            hk_check(0, "rmsnorm upload", "%s", hk_last_error());
        xv = out_view(&y);
    } else {
        xv = input_at(x, count * sizeof(float), 16, &xb);
    }
    char name[96];
    snprintf(name, sizeof name, "rmsnorm %ux%u%s", rows, n, in_place ? " in-place" : "");
    hk_status st = hk_rmsnorm(ctx, NULL, xv, wv, out_view(&y), rows, n, eps);
    if (st != HK_OK)
        hk_check(0, name, "%s", hk_last_error());
    else
        hk_check_close(name, out_read(&y, name), ref, count, GATE_F32);
    out_destroy(&y);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    free(x);
    free(w);
    free(ref);
}

/* The GPU divides and rounds with its own precision, so a value that lands within rounding of
 * .5 may round the other way: each q may differ from the reference by one, rarely; d (f16) by
 * one f16 step; s must be f16(d * sum(q)) of the GPU's own q. */
static void test_quantize(uint32_t k, uint64_t seed)
{
    hk_rng rng = {seed};
    float *x = malloc(k * sizeof(float));
    for (uint32_t i = 0; i < k; i++) /* blocks of different magnitude, one all-zero block */
        x[i] = (i / 32 == 1) ? 0.0f : hk_rng_uniform(&rng, -1.0f, 1.0f) * (float)(1 + (i / 32) % 7);
    uint32_t blocks = k / 32;
    hk_block_q8_1 *ref = malloc(blocks * sizeof *ref), *got = malloc(blocks * sizeof *got);
    hk_quant_row_q8_1(x, ref, k);
    hk_buffer *xb;
    hk_view xv = input_at(x, k * sizeof(float), 4, &xb);
    size_t words = blocks * 9;
    out_buffer y = out_create(words); /* 36-byte blocks viewed as words for the guards */
    char name[96];
    snprintf(name, sizeof name, "quantize_q8_1 k=%u", k);
    hk_status st = hk_quantize_q8_1(ctx, NULL, xv, out_view(&y), k);
    if (st != HK_OK) {
        hk_check(0, name, "%s", hk_last_error());
    } else {
        memcpy(got, out_read(&y, name), blocks * sizeof *got);
        uint32_t d_bad = 0, q_far = 0, q_off = 0, s_bad = 0, err_bad = 0;
        for (uint32_t b = 0; b < blocks; b++) {
            int dd = (int)got[b].d - (int)ref[b].d;
            d_bad += dd < -1 || dd > 1;
            float d = hk_f16_to_f32(got[b].d), amax = 0.0f;
            for (int i = 0; i < 32; i++)
                amax = fmaxf(amax, fabsf(x[b * 32 + i]));
            /* q was rounded against the f32 d; the stored f16 d adds up to 127 * its rounding */
            float bound = 0.5f * (amax / 127.0f) * 1.001f + 127.0f * fabsf(d - amax / 127.0f) + 1e-7f;
            int sum = 0;
            for (int i = 0; i < 32; i++) {
                int dq = got[b].qs[i] - ref[b].qs[i];
                q_far += dq < -1 || dq > 1;
                q_off += dq != 0;
                sum += got[b].qs[i];
                float e = fabsf(x[b * 32 + i] - d * got[b].qs[i]);
                err_bad += e > bound;
            }
            int ds = (int)got[b].s - (int)hk_f32_to_f16(d * (float)sum);
            s_bad += ds < -1 || ds > 1;
        }
        hk_check(d_bad == 0 && q_far == 0 && q_off <= blocks && s_bad == 0 && err_bad == 0, name,
                 "d off=%u, q off by >1=%u, q off by 1=%u, s off=%u, |x-dq| over bound=%u", d_bad, q_far, q_off, s_bad,
                 err_bad);
    }
    out_destroy(&y);
    hk_buffer_destroy(xb);
    free(x);
    free(ref);
    free(got);
}

/* Several dependent kernels in one stream: rmsnorm -> matvec -> matvec, the output of each the
 * input of the next, checked against the references chained on the host. */
static void test_stream_chain(void)
{
    hk_rng rng = {77};
    const uint32_t n = 512, mid = 256;
    float x[512], g[512], h[512], ref1[256], ref2[512];
    hk_rng_fill(&rng, x, n, -2.0f, 2.0f);
    hk_rng_fill(&rng, g, n, 0.5f, 1.5f);
    size_t rb1 = hk_ref_row_bytes(HK_REF_Q4_K, n), rb2 = hk_ref_row_bytes(HK_REF_Q8_0, mid);
    uint8_t *w1 = malloc(rb1 * mid), *w2 = malloc(rb2 * n);
    hk_random_blocks(&rng, HK_TYPE_Q4_K, w1, rb1 * mid / 144, 0.05f);
    hk_random_blocks(&rng, HK_TYPE_Q8_0, w2, rb2 * n / 34, 0.05f);
    hk_ref_rmsnorm(x, g, h, 1, n, 1e-5f);
    hk_ref_matvec(HK_REF_Q4_K, w1, h, ref1, mid, n);
    hk_ref_matvec(HK_REF_Q8_0, w2, ref1, ref2, n, mid);

    hk_buffer *xb = hk_test_buffer(ctx, n * 4, x), *gb = hk_test_buffer(ctx, n * 4, g);
    hk_buffer *w1b = hk_test_buffer(ctx, rb1 * mid, w1), *w2b = hk_test_buffer(ctx, rb2 * n, w2);
    hk_buffer *act = hk_test_buffer(ctx, (n + mid) * 4, NULL);
    out_buffer y = out_create(n);
    hk_view hv = {act, 0}, m = {act, n * 4};
    hk_stream *s = NULL;
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    hk_status st = hk_stream_create(ctx, caps.timestamps ? 4 : 0, &s);
    int timed = caps.timestamps;
    if (st == HK_OK && timed)
        st = hk_stream_timestamp(s, NULL);
    if (st == HK_OK)
        st = hk_rmsnorm(ctx, s, (hk_view){xb, 0}, (hk_view){gb, 0}, hv, 1, n, 1e-5f);
    if (st == HK_OK && timed)
        st = hk_stream_timestamp(s, NULL);
    if (st == HK_OK)
        st = hk_matvec_q4k(ctx, s, (hk_view){w1b, 0}, hv, m, mid, n);
    if (st == HK_OK && timed)
        st = hk_stream_timestamp(s, NULL);
    if (st == HK_OK)
        st = hk_matvec_q8_0(ctx, s, (hk_view){w2b, 0}, m, out_view(&y), n, mid);
    if (st == HK_OK && timed)
        st = hk_stream_timestamp(s, NULL);
    hk_check(st == HK_OK && hk_stream_kernel_count(s) == 3, "stream records 3 kernels", "%s",
             st == HK_OK ? "" : hk_last_error());
    if (st == HK_OK)
        st = hk_stream_submit(s);
    if (st == HK_OK) {
        hk_check_close("stream rmsnorm->q4_k->q8_0", out_read(&y, "stream chain"), ref2, n, GATE_F32);
        hk_check(hk_stream_kernel_count(s) == 0, "stream empty after submit", NULL);
        if (caps.timestamps) {
            double ms = -1, all = -1;
            hk_status t1 = hk_stream_elapsed_ms(s, 1, 2, &ms), t2 = hk_stream_elapsed_ms(s, 0, 3, &all);
            hk_check(t1 == HK_OK && t2 == HK_OK && ms > 0 && all >= ms, "stream timestamps",
                     "kernel 1 %.4f ms, all %.4f ms", ms, all);
        }
        /* a stream is reusable after submit */
        st = hk_rmsnorm(ctx, s, (hk_view){xb, 0}, (hk_view){gb, 0}, hv, 1, n, 1e-5f);
        if (st == HK_OK)
            st = hk_stream_submit(s);
        hk_check(st == HK_OK, "stream reuse", "%s", st == HK_OK ? "" : hk_last_error());
    } else {
        hk_check(0, "stream chain", "%s", hk_last_error());
    }
    hk_stream_destroy(s);
    out_destroy(&y);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(gb);
    hk_buffer_destroy(w1b);
    hk_buffer_destroy(w2b);
    hk_buffer_destroy(act);
    free(w1);
    free(w2);
}

int main(void)
{
    ctx = hk_test_context();
    static const hk_type types[] = {HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q6_K};
    uint64_t seed = 1;
    for (int t = 0; t < 3; t++) {
        uint32_t block = hk_type_block_values(types[t]);
        /* one row at the smallest k; a tail of rows (not a multiple of anything); k with an odd
         * number of blocks; a Qwen3-1.7B projection (2048x2048, lavapipe-fast) */
        /* ... and 40000 rows: 4 rows per subgroup, more row groups than workgroups launched */
        const uint32_t shapes[][2] = {{1, block},     {7, 3 * block}, {131, 5 * block}, {17, 2 * block},
                                      {2048, 2048},   {300, 6144},    {40000, block}};
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int raw = 0; raw < 2; raw++)
                for (int aligned = 0; aligned < 2; aligned++)
                    test_matvec(types[t], shapes[i][0], shapes[i][1], raw, aligned, ++seed);
    }
    for (int t = 0; t < 3; t++) {
        uint32_t block = hk_type_block_values(types[t]);
        const uint32_t shapes[][2] = {{1, block}, {5, 3 * block}, {37, 256}, {2048, 2048}, {100, 6144}, {40001, block}};
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int raw = 0; raw < 2; raw++)
                test_matvec_int8(types[t], shapes[i][0], shapes[i][1], raw, ++seed);
    }
    for (int t = 0; t < 3; t++) {
        uint32_t block = hk_type_block_values(types[t]);
        test_moe(types[t], 8, 64, 2 * block, 5, 0, ++seed);
        test_moe(types[t], 8, 63, block, 4, 1, ++seed); /* n not a multiple of 4 */
        test_moe(types[t], 4, 4100, block, 4, 0, ++seed); /* enough rows for 4 rows per subgroup */
    }
    /* Qwen3-30B-A3B decode, top-8: gate/up Q4_K E128 768x2048; down Q6_K E128 2048x768 (165 MB:
     * as many experts as one binding of the device holds, 96 on lavapipe's 128 MiB) */
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    uint64_t down_expert = 2048ull * 768 / 256 * 210, down_experts = caps.max_storage_buffer_range / down_expert;
    test_moe(HK_TYPE_Q4_K, 128, 768, 2048, 8, 0, ++seed);
    test_moe(HK_TYPE_Q6_K, down_experts < 128 ? (uint32_t)down_experts : 128, 2048, 768, 8, 1, ++seed);
    test_route(1, 4, 1, 0, 41);
    test_route(5, 128, 8, 1, 42); /* Qwen3-30B-A3B: 128 experts, top-8, renormalised */
    test_route(33, 128, 8, 0, 43);
    test_route(3, 300, 64, 1, 44); /* more experts than a workgroup has invocations */
    /* the portable twins, on contexts that may not use the accelerated paths */
    hk_context *full = ctx;
    const uint32_t twins[] = {HK_FEATURE_INTEGER_DOT, HK_FEATURE_SUBGROUP_SIZE_CONTROL};
    for (int i = 0; i < 2; i++) {
        ctx = hk_test_context_without(twins[i]);
        if (!ctx) {
            ctx = full;
            continue;
        }
        printf("-- without feature 0x%x\n", twins[i]);
        for (int t = 0; t < 3; t++) {
            uint32_t block = hk_type_block_values(types[t]);
            if (twins[i] == HK_FEATURE_INTEGER_DOT) {
                test_matvec_int8(types[t], 37, 4 * block, 1, ++seed);
                test_matvec_int8(types[t], 300, 2048, 0, ++seed);
            } else {
                test_matvec(types[t], 37, 4 * block, 1, 1, ++seed);
                hk_buffer *any = hk_test_buffer(ctx, 1024, NULL), *out = hk_test_buffer(ctx, 16, NULL);
                hk_check_status("int8 matvec needs subgroup size control",
                                hk_matvec_int8(ctx, NULL, types[t], (hk_view){any, 0}, (hk_view){any, 512},
                                               (hk_view){out, 0}, 1, block),
                                HK_ERROR_UNSUPPORTED, "cannot require full subgroups");
                hk_buffer_destroy(any);
                hk_buffer_destroy(out);
            }
        }
        uint32_t messages = hk_context_validation_messages(ctx);
        hk_check(messages == 0, "no validation messages on the twin context", "%u seen", messages);
        hk_context_destroy(ctx);
        ctx = full;
    }
    test_gemv(1, 1, 11);
    test_gemv(5, 33, 12);
    test_gemv(128, 2048, 13); /* the Qwen3-30B-A3B router gate: 128 experts x 2048 */
    test_gemv(1000, 131, 14);
    test_rmsnorm(1, 1, 0, 21);
    test_rmsnorm(3, 100, 0, 22);
    test_rmsnorm(4, 2048, 0, 23);
    test_rmsnorm(5, 2048, 1, 24);
    test_rmsnorm(70000, 4, 0, 25); /* more rows than one dispatch dimension holds */
    test_quantize(32, 31);
    test_quantize(96, 32);
    test_quantize(2048, 33);
    test_quantize(6144, 34);
    test_stream_chain();
    return hk_test_finish(ctx);
}
