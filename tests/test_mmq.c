/* Prefill int8 GEMM (hk_mmq), MoE slot grouping (hk_moe_expert_rows) and the expert-indexed GEMM
 * (hk_mmq_id) against their C references (src/ref/mmq.c), on the default context (the
 * cooperative-matrix arm where the device has it) and on contexts without cooperative matrices and
 * without the packed int8 dot. Seeded inputs, poisoned outputs with guard words, tails in m and n,
 * inputs flush against their buffer's end, malformed routing data from the GPU side.
 *
 * Each kernel case is three functions, so that a table of cases (tests, hk-check, hk-bench) can
 * use them: *_build (seeded host inputs and the reference output for a shape), *_record (the
 * kernel given the device views of those tensors), *_compare (the gate). */
#define _POSIX_C_SOURCE 200112L /* setenv */
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shapes hk-bench should run (the targets of issue 8, H200; useful work 2*m*n*k) -----------
 * hk_mmq    q4_k  m=512 n=4096  k=4096    bytes: n*k/256*144 + m*k/32*36 + m*n*4
 * hk_mmq    q4_k  m=512 n=14336 k=4096    (llama.cpp-vk: 0.463 / 1.49 ms; goal >= 150 TFLOP/s)
 * hk_mmq    q8_0  m=512 n=4096  k=4096    bytes: n*k/32*34 + ...  (llama.cpp-vk 0.499 ms)
 * hk_mmq_id q4_k  E=128 n=768 k=2048, 512 tokens top-8 (n_slots 4096, slots_per_x_row 8):
 *           useful work 2*n_slots*n*k; bytes: the experts the routing reads (at most 128*768*2048
 *           /256*144) + 512*2048/32*36 + 4096*768*4   (llama.cpp-vk 1.37 ms; goal >= 40 TFLOP/s)
 * hk_mmq_id q6_k  E=128 n=2048 k=768, n_slots 4096, slots_per_x_row 1 (the down projection)
 * hk_moe_expert_rows  n_slots 4096, E=128 (its time belongs to the MoE row above)
 * --------------------------------------------------------------------------------------------- */

#define GUARD 16 /* poisoned floats before and after each output */

static hk_context *ctx;
static double gate; /* of the arm this context runs */

/* ---- buffers ---- */

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

/* Downloads the output and checks its guards; returns the output values. */
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
    char label[200];
    snprintf(label, sizeof label, "%s: guards", name);
    hk_check(bad == 0, label, "%u words written outside the output", bad);
    return o->host + GUARD;
}

static void out_destroy(out_buffer *o)
{
    hk_buffer_destroy(o->buffer);
    free(o->host);
}

/* An input at `offset` of its own buffer: flush against the buffer's end, or with slack after it. */
static hk_view input_at(const void *data, size_t bytes, uint64_t offset, int flush, hk_buffer **keep)
{
    hk_buffer *b = hk_test_buffer(ctx, offset + bytes + (flush ? 0 : 64), NULL);
    if (hk_buffer_upload(b, offset, data, bytes) != HK_OK)
        hk_check(0, "upload", "%s", hk_last_error());
    *keep = b;
    return (hk_view){b, offset};
}

static int is_poison(float v)
{
    uint32_t w;
    memcpy(&w, &v, 4);
    return w == HK_POISON_WORD;
}

/* ---- test data ---- */

enum { X_QUANTIZED, X_RAW_BLOCKS, X_GPU_QUANTIZED };
static const char *const x_names[] = {"x quantized", "x raw blocks (wrong s)", "x from hk_quantize_q8_1"};

/* rows GGUF rows of k values: raw random blocks (every bit pattern) or quantized rows of
 * different magnitude and sign balance */
static uint8_t *make_weights(hk_rng *rng, hk_type type, size_t rows, uint32_t k, int raw_blocks)
{
    size_t row_bytes = hk_ref_row_bytes((int)type, k);
    uint8_t *w = malloc(row_bytes * rows);
    if (raw_blocks) {
        hk_random_blocks(rng, (int)type, w, row_bytes * rows / hk_type_block_bytes(type), 0.05f);
        return w;
    }
    float *row = malloc(k * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        float scale = hk_rng_uniform(rng, 0.01f, 0.5f), bias = hk_rng_uniform(rng, -0.2f, 0.2f) * scale;
        for (uint32_t i = 0; i < k; i++)
            row[i] = hk_rng_uniform(rng, -scale, scale) + bias;
        if (type == HK_TYPE_Q8_0)
            hk_quant_row_q8_0(row, (hk_block_q8_0 *)(w + r * row_bytes), k);
        else if (type == HK_TYPE_Q4_K)
            hk_quant_row_q4_k(row, (hk_block_q4_k *)(w + r * row_bytes), k);
        else if (type == HK_TYPE_Q5_K)
            hk_quant_row_q5_k(row, (hk_block_q5_k *)(w + r * row_bytes), k);
        else
            hk_quant_row_q6_k(row, (hk_block_q6_k *)(w + r * row_bytes), k);
    }
    free(row);
    return w;
}

/* rows of k/32 Q8_1 blocks. Raw blocks: random quants (-128 included), random d and a random s
 * that has nothing to do with the quants (the kernels must not read it). GPU: hk_quantize_q8_1 of
 * random f32 rows, downloaded (the reference then sees exactly the device's blocks). */
static hk_block_q8_1 *make_x(hk_rng *rng, size_t rows, uint32_t k, int mode)
{
    size_t blocks = rows * (k / 32);
    hk_block_q8_1 *x = malloc(blocks * sizeof *x);
    if (mode == X_RAW_BLOCKS) {
        hk_random_blocks(rng, HK_REF_Q8_1, x, blocks, 1.0f);
        return x;
    }
    float *f = malloc(rows * k * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        float scale = hk_rng_uniform(rng, 0.1f, 4.0f);
        hk_rng_fill(rng, f + r * k, k, -scale, scale);
    }
    if (mode == X_QUANTIZED) {
        hk_quant_row_q8_1(f, x, rows * k);
    } else {
        hk_buffer *fb = hk_test_buffer(ctx, rows * k * sizeof(float), f), *xb = hk_test_buffer(ctx, blocks * 36, NULL);
        hk_status st = hk_quantize_q8_1(ctx, NULL, (hk_view){fb, 0}, (hk_view){xb, 0}, (uint32_t)(rows * k));
        if (st == HK_OK)
            st = hk_buffer_download(xb, 0, x, blocks * 36);
        if (st != HK_OK) {
            hk_check(0, "hk_quantize_q8_1 for the x of hk_mmq", "%s", hk_last_error());
            hk_quant_row_q8_1(f, x, rows * k);
        }
        hk_buffer_destroy(fb);
        hk_buffer_destroy(xb);
    }
    free(f);
    return x;
}

/* ---- case: hk_mmq ---- */

typedef struct mmq_case {
    hk_type type;
    uint32_t m, n, k;
    uint8_t *w;
    size_t w_bytes;
    hk_block_q8_1 *x;
    size_t x_bytes;
    float *ref; /* [m, n] */
} mmq_case;

static void mmq_build(mmq_case *c, hk_type type, uint32_t m, uint32_t n, uint32_t k, int raw_w, int x_mode,
                      uint64_t seed)
{
    hk_rng rng = {seed};
    *c = (mmq_case){type, m, n, k, NULL, hk_ref_row_bytes((int)type, k) * n, NULL, (size_t)m * (k / 32) * 36, NULL};
    c->w = make_weights(&rng, type, n, k, raw_w);
    c->x = make_x(&rng, m, k, x_mode);
    c->ref = malloc((size_t)m * n * sizeof(float));
    hk_ref_mmq((int)type, c->w, c->x, c->ref, m, n, k);
}

static hk_status mmq_record(hk_stream *s, const mmq_case *c, hk_view w, hk_view x, hk_view out)
{
    return hk_mmq(ctx, s, c->type, w, x, out, c->m, c->n, c->k);
}

/* values of a and b that differ in their bits */
static uint32_t bits_differ(const float *a, const float *b, size_t count)
{
    uint32_t differ = 0;
    for (size_t e = 0; e < count; e++)
        differ += memcmp(&a[e], &b[e], 4) != 0;
    return differ;
}

static int mmq_compare(const char *name, const mmq_case *c, const float *got)
{
    return hk_check_close(name, got, c->ref, (size_t)c->m * c->n, gate);
}

/* After a call under test (into `tested`) and its twin (into `twin`), st the first failure: the
 * tested output at the gate, and the same bits as the twin's. */
static void check_same_bits(const char *name, const mmq_case *c, hk_status st, out_buffer *tested, out_buffer *twin)
{
    if (st != HK_OK) {
        hk_check(0, name, "%s", hk_last_error());
        return;
    }
    size_t count = (size_t)c->m * c->n;
    const float *a = out_read(twin, name), *b = out_read(tested, name);
    uint32_t differ = bits_differ(a, b, count);
    hk_check(differ == 0, name, "%u of %zu values differ in their bits", differ, count);
    mmq_compare(name, c, b);
}

static void mmq_free(mmq_case *c)
{
    free(c->w);
    free(c->x);
    free(c->ref);
}

/* test_schedules: a tile that the device's shared memory cannot hold for a type (Q6_K's X tile
 * takes 1.5 times the words) must be refused with that reason rather than run */
static int tile_may_not_fit;
static int refused_for_size(hk_status st, const char *name)
{
    if (!tile_may_not_fit || st != HK_ERROR_UNSUPPORTED)
        return 0;
    hk_check(strstr(hk_last_error(), "shared memory") != NULL, name, "refused as too big: %s", hk_last_error());
    return 1;
}

/* Runs one hk_mmq case; flush 0: w at 0 mod 16 and x at 16, with slack after each; 1: flush
 * against the buffers' ends, w at an offset of 2 mod 4 (GGUF blocks are only 2-byte aligned), x
 * at 4; 2: flush, w at 4 mod 16 and x at 8 (the 4-byte load widths). Returns the output (caller
 * frees) when asked. */
static float *test_mmq(hk_type type, uint32_t m, uint32_t n, uint32_t k, int raw_w, int x_mode, int flush,
                       uint64_t seed, int keep_output)
{
    mmq_case c;
    mmq_build(&c, type, m, n, k, raw_w, x_mode, seed);
    hk_buffer *wb, *xb;
    hk_view wv = input_at(c.w, c.w_bytes, flush == 2 ? 36 : flush == 1 ? 34 : 32, flush != 0, &wb);
    hk_view xv = input_at(c.x, c.x_bytes, flush == 2 ? 8 : flush == 1 ? 4 : 16, flush != 0, &xb);
    out_buffer y = out_create((size_t)m * n);
    char name[200];
    snprintf(name, sizeof name, "mmq %s m=%u n=%u k=%u %s, %s%s", hk_type_name(type), m, n, k,
             raw_w ? "raw blocks" : "quantized", x_names[x_mode],
             flush == 3 ? ", flush, 16-byte aligned" : flush == 2 ? ", flush, 4-byte aligned" : flush ? ", flush" : "");
    float *kept = NULL;
    hk_status st = mmq_record(NULL, &c, wv, xv, out_view(&y));
    if (st != HK_OK) {
        if (!refused_for_size(st, name))
            hk_check(0, name, "%s", hk_last_error());
    } else {
        const float *got = out_read(&y, name);
        mmq_compare(name, &c, got);
        if (keep_output) {
            kept = malloc((size_t)m * n * sizeof(float));
            memcpy(kept, got, (size_t)m * n * sizeof(float));
        }
    }
    out_destroy(&y);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    mmq_free(&c);
    return kept;
}

/* ---- case: hk_moe_expert_rows ---- */

typedef struct rows_case {
    uint32_t n_slots, n_experts;
    uint32_t *ids;
    uint32_t *offsets, *slots, dropped; /* reference */
} rows_case;

enum { ROUTE_RANDOM, ROUTE_SKEWED, ROUTE_ONE_EXPERT, ROUTE_BAD_IDS };
static const char *const route_names[] = {"random", "skewed (empty experts)", "all on one expert",
                                          "out-of-range ids"};

/* ids for tokens x top_k slots; each token's experts distinct except for ROUTE_ONE_EXPERT */
static uint32_t *make_ids(hk_rng *rng, uint32_t tokens, uint32_t top_k, uint32_t n_experts, int route)
{
    uint32_t n = tokens * top_k, *ids = malloc(n * sizeof *ids);
    for (uint32_t t = 0; t < tokens; t++)
        for (uint32_t j = 0; j < top_k; j++) {
            uint32_t e, taken;
            do {
                if (route == ROUTE_SKEWED) /* a few hot experts, most never chosen */
                    e = (uint32_t)(hk_rng_next(rng) % (top_k + 2 < n_experts ? top_k + 2 : n_experts));
                else
                    e = (uint32_t)(hk_rng_next(rng) % n_experts);
                taken = 0;
                for (uint32_t i = 0; i < j; i++)
                    taken |= ids[t * top_k + i] == e;
            } while (taken && top_k <= n_experts && route != ROUTE_ONE_EXPERT);
            ids[t * top_k + j] = route == ROUTE_ONE_EXPERT ? n_experts / 2 : e;
        }
    if (route == ROUTE_BAD_IDS)
        for (uint32_t s = 0; s < n; s += 3)
            ids[s] = s % 2 ? 0xFFFFFFFFu : n_experts + s;
    return ids;
}

static void rows_build(rows_case *c, uint32_t tokens, uint32_t top_k, uint32_t n_experts, int route, uint64_t seed)
{
    hk_rng rng = {seed};
    c->n_slots = tokens * top_k;
    c->n_experts = n_experts;
    c->ids = make_ids(&rng, tokens, top_k, n_experts, route);
    c->offsets = malloc((n_experts + 1) * sizeof *c->offsets);
    c->slots = malloc(c->n_slots * sizeof *c->slots);
    hk_ref_moe_expert_rows(c->ids, c->n_slots, n_experts, c->offsets, c->slots, &c->dropped);
}

static hk_status rows_record(hk_stream *s, const rows_case *c, hk_view ids, hk_view offsets, hk_view slots,
                             hk_view dropped)
{
    return hk_moe_expert_rows(ctx, s, ids, offsets, slots, dropped, c->n_slots, c->n_experts);
}

/* exact: counts, order within each expert (stability), the dropped count */
static int rows_compare(const char *name, const rows_case *c, const uint32_t *offsets, const uint32_t *slots,
                        uint32_t dropped)
{
    uint32_t bad_off = 0, bad_slots = 0;
    for (uint32_t e = 0; e <= c->n_experts; e++)
        bad_off += offsets[e] != c->offsets[e];
    for (uint32_t s = 0; s < c->n_slots; s++)
        bad_slots += slots[s] != c->slots[s];
    int ok = bad_off == 0 && bad_slots == 0 && dropped == c->dropped;
    hk_check(ok, name, "%u offsets and %u slot entries differ; dropped %u (want %u)", bad_off, bad_slots, dropped,
             c->dropped);
    return ok;
}

static void rows_free(rows_case *c)
{
    free(c->ids);
    free(c->offsets);
    free(c->slots);
}

static void test_rows(uint32_t tokens, uint32_t top_k, uint32_t n_experts, int route, uint64_t seed)
{
    rows_case c;
    rows_build(&c, tokens, top_k, n_experts, route, seed);
    hk_buffer *ib;
    hk_view iv = input_at(c.ids, c.n_slots * 4, 8, 1, &ib);
    out_buffer off = out_create(n_experts + 1), sl = out_create(c.n_slots), dr = out_create(1);
    char name[200];
    snprintf(name, sizeof name, "moe_expert_rows slots=%u E%u %s", c.n_slots, n_experts, route_names[route]);
    for (int run = 0; run < 2; run++) { /* twice: the same answer each time */
        hk_status st = rows_record(NULL, &c, iv, out_view(&off), out_view(&sl), out_view(&dr));
        if (st != HK_OK) {
            hk_check(0, name, "%s", hk_last_error());
            break;
        }
        const float *o = out_read(&off, name), *s = out_read(&sl, name), *d = out_read(&dr, name);
        uint32_t dropped;
        memcpy(&dropped, d, 4);
        char label[240];
        snprintf(label, sizeof label, "%s%s", name, run ? ": second run" : "");
        rows_compare(label, &c, (const uint32_t *)o, (const uint32_t *)s, dropped);
    }
    out_destroy(&off);
    out_destroy(&sl);
    out_destroy(&dr);
    hk_buffer_destroy(ib);
    rows_free(&c);
}

/* ---- case: hk_mmq_id ---- */

typedef struct mmq_id_case {
    hk_type type;
    hk_mmq_id_shape shape;
    uint8_t *w;
    size_t w_bytes;
    hk_block_q8_1 *x;
    size_t x_bytes;
    rows_case rows;  /* the routing and its reference grouping */
    uint32_t *offsets, *slots; /* the grouping the GEMM is given (the reference's, or malformed) */
    float *ref;      /* [n_slots, n]; rows of unlisted slots poisoned */
} mmq_id_case;

static void mmq_id_build(mmq_id_case *c, hk_type type, uint32_t n_experts, uint32_t n, uint32_t k, uint32_t tokens,
                         uint32_t top_k, int x_per_slot, int route, uint64_t seed)
{
    hk_rng rng = {seed};
    memset(c, 0, sizeof *c);
    c->type = type;
    c->shape = (hk_mmq_id_shape){n_experts, n, k, tokens * top_k, x_per_slot ? 1 : top_k};
    c->w_bytes = hk_ref_row_bytes((int)type, k) * n * n_experts;
    c->w = make_weights(&rng, type, (size_t)n * n_experts, k, 1);
    size_t x_rows = x_per_slot ? (size_t)tokens * top_k : tokens;
    c->x = make_x(&rng, x_rows, k, X_QUANTIZED);
    c->x_bytes = x_rows * (k / 32) * 36;
    rows_build(&c->rows, tokens, top_k, n_experts, route, seed + 1);
    c->offsets = malloc((n_experts + 1) * 4);
    c->slots = malloc(c->shape.n_slots * 4);
    memcpy(c->offsets, c->rows.offsets, (n_experts + 1) * 4);
    memcpy(c->slots, c->rows.slots, c->shape.n_slots * 4);
    c->ref = malloc((size_t)c->shape.n_slots * n * sizeof(float));
}

/* the reference for the grouping in c->offsets / c->slots */
static void mmq_id_reference(mmq_id_case *c)
{
    hk_poison(c->ref, (size_t)c->shape.n_slots * c->shape.n);
    hk_ref_mmq_id((int)c->type, c->w, c->x, c->offsets, c->slots, c->ref, c->shape.n_experts, c->shape.n, c->shape.k,
                  c->shape.n_slots, c->shape.slots_per_x_row);
}

static hk_status mmq_id_record(hk_stream *s, const mmq_id_case *c, hk_view w, hk_view x, hk_view offsets,
                               hk_view slots, hk_view out)
{
    return hk_mmq_id(ctx, s, c->type, w, x, offsets, slots, out, &c->shape);
}

/* listed rows at the gate; unlisted rows (the reference's poison) must be untouched */
static int mmq_id_compare(const char *name, const mmq_id_case *c, const float *got)
{
    size_t n = c->shape.n, total = (size_t)c->shape.n_slots * n, listed = 0;
    float *g = malloc(total * sizeof *g), *r = malloc(total * sizeof *r);
    uint32_t touched = 0;
    for (size_t s = 0; s < c->shape.n_slots; s++) {
        if (is_poison(c->ref[s * n])) {
            for (size_t j = 0; j < n; j++)
                touched += !is_poison(got[s * n + j]);
            continue;
        }
        memcpy(g + listed * n, got + s * n, n * sizeof *g);
        memcpy(r + listed * n, c->ref + s * n, n * sizeof *r);
        listed++;
    }
    int ok = hk_check_close(name, g, r, listed * n, gate);
    char label[240];
    snprintf(label, sizeof label, "%s: unlisted rows untouched", name);
    hk_check(touched == 0, label, "%u values written in %zu unlisted rows", touched, (size_t)c->shape.n_slots - listed);
    free(g);
    free(r);
    return ok && touched == 0;
}

static void mmq_id_free(mmq_id_case *c)
{
    free(c->w);
    free(c->x);
    free(c->offsets);
    free(c->slots);
    free(c->ref);
    rows_free(&c->rows);
}

/* The MoE prefill as an engine records it: grouping and GEMM in one stream, the GEMM reading the
 * grouping's device output. Inputs flush against their buffers' ends. */
static void test_moe_prefill(hk_type type, uint32_t n_experts, uint32_t n, uint32_t k, uint32_t tokens,
                             uint32_t top_k, int x_per_slot, int route, uint64_t seed)
{
    mmq_id_case c;
    mmq_id_build(&c, type, n_experts, n, k, tokens, top_k, x_per_slot, route, seed);
    mmq_id_reference(&c);
    hk_buffer *wb, *xb, *ib;
    hk_view wv = input_at(c.w, c.w_bytes, 2, 1, &wb);
    hk_view xv = input_at(c.x, c.x_bytes, 4, 1, &xb);
    hk_view iv = input_at(c.rows.ids, c.shape.n_slots * 4, 0, 1, &ib);
    hk_buffer *group = hk_test_buffer(ctx, (n_experts + 1 + c.shape.n_slots + 1) * 4, NULL);
    hk_view ov = {group, 0}, sv = {group, (n_experts + 1) * 4}, dv = {group, (n_experts + 1 + c.shape.n_slots) * 4};
    out_buffer y = out_create((size_t)c.shape.n_slots * n);
    char name[240];
    snprintf(name, sizeof name, "moe prefill %s E%u n=%u k=%u %ux top-%u %s, %s", hk_type_name(type), n_experts, n, k,
             tokens, top_k, x_per_slot ? "x per slot" : "x per token", route_names[route]);
    hk_stream *s = NULL;
    hk_status st = hk_stream_create(ctx, 0, &s);
    if (st == HK_OK)
        st = rows_record(s, &c.rows, iv, ov, sv, dv);
    if (st == HK_OK)
        st = mmq_id_record(s, &c, wv, xv, ov, sv, out_view(&y));
    if (st == HK_OK)
        st = hk_stream_submit(s);
    if (st != HK_OK) {
        if (!refused_for_size(st, name))
            hk_check(0, name, "%s", hk_last_error());
    } else {
        mmq_id_compare(name, &c, out_read(&y, name));
        uint32_t *grouping = malloc((n_experts + 2 + c.shape.n_slots) * 4);
        hk_buffer_download(group, 0, grouping, (n_experts + 2 + c.shape.n_slots) * 4);
        char label[260];
        snprintf(label, sizeof label, "%s: grouping", name);
        rows_compare(label, &c.rows, grouping, grouping + n_experts + 1, grouping[n_experts + 1 + c.shape.n_slots]);
        free(grouping);
    }
    hk_stream_destroy(s);
    out_destroy(&y);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(ib);
    hk_buffer_destroy(group);
    mmq_id_free(&c);
}

/* hk_mmq_id given a grouping from the host: the reference's, or malformed (`bad`: 1 structured
 * — offsets decreasing and past n_slots, slot values >= n_slots, repeats within one expert — so
 * the reference still says what must come out; 2 random words, where only the guards and the
 * absence of validation messages are checked). Inputs at padded offsets; n_experts >= 4. */
static void test_mmq_id(hk_type type, uint32_t n_experts, uint32_t n, uint32_t k, uint32_t tokens, uint32_t top_k,
                        int x_per_slot, int route, int bad, uint64_t seed)
{
    mmq_id_case c;
    mmq_id_build(&c, type, n_experts, n, k, tokens, top_k, x_per_slot, route, seed);
    hk_rng rng = {seed * 7 + 1};
    uint32_t ns = c.shape.n_slots;
    if (bad == 1) { /* no slot may end up listed for two experts: the order of two writers is free */
        for (uint32_t i = 0; i < ns; i += 5)
            c.slots[i] = ns + (uint32_t)(hk_rng_next(&rng) % 100000); /* skipped */
        if (c.offsets[2] >= c.offsets[1] + 2)
            c.slots[c.offsets[1] + 1] = c.slots[c.offsets[1]]; /* one slot twice in expert 1 */
        c.offsets[0] = c.offsets[1] + 7;               /* begin past end: expert 0 is empty */
        c.offsets[n_experts - 1] = ns + 1000;         /* expert E-2 runs to n_slots (over E-1's list) */
        c.offsets[n_experts] = 0xFFFFFFF0u;           /* and expert E-1 is empty */
    } else if (bad == 2) {
        for (uint32_t e = 0; e <= n_experts; e++)
            c.offsets[e] = (uint32_t)hk_rng_next(&rng);
        for (uint32_t i = 0; i < ns; i++)
            c.slots[i] = (uint32_t)(hk_rng_next(&rng) >> (hk_rng_next(&rng) % 40));
    }
    if (bad != 2)
        mmq_id_reference(&c);
    hk_buffer *wb, *xb, *ob, *sb;
    hk_view wv = input_at(c.w, c.w_bytes, 34, 0, &wb);
    hk_view xv = input_at(c.x, c.x_bytes, 12, 0, &xb);
    hk_view ov = input_at(c.offsets, (n_experts + 1) * 4, 4, 1, &ob);
    hk_view sv = input_at(c.slots, ns * 4, 8, 1, &sb);
    out_buffer y = out_create((size_t)ns * n);
    static const char *const bad_names[] = {"", ", malformed grouping", ", garbage grouping"};
    char name[240];
    snprintf(name, sizeof name, "mmq_id %s E%u n=%u k=%u %ux top-%u %s, %s%s", hk_type_name(type), n_experts, n, k,
             tokens, top_k, x_per_slot ? "x per slot" : "x per token", route_names[route], bad_names[bad]);
    hk_status st = mmq_id_record(NULL, &c, wv, xv, ov, sv, out_view(&y));
    if (st != HK_OK) {
        if (!refused_for_size(st, name))
            hk_check(0, name, "%s", hk_last_error());
    } else {
        const float *got = out_read(&y, name);
        if (bad != 2)
            mmq_id_compare(name, &c, got);
    }
    out_destroy(&y);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(ob);
    hk_buffer_destroy(sb);
    mmq_id_free(&c);
}

/* One expert, every slot listed in order, one x row per slot: hk_mmq_id must reproduce hk_mmq bit
 * for bit (the same arithmetic; only the indirection differs). */
static void test_one_expert_is_dense(hk_type type, uint32_t m, uint32_t n, uint32_t k, uint64_t seed)
{
    mmq_case c;
    mmq_build(&c, type, m, n, k, 1, X_QUANTIZED, seed);
    uint32_t *offsets = malloc(2 * 4), *slots = malloc(m * 4);
    offsets[0] = 0;
    offsets[1] = m;
    for (uint32_t i = 0; i < m; i++)
        slots[i] = i;
    hk_buffer *wb, *xb, *ob, *sb;
    hk_view wv = input_at(c.w, c.w_bytes, 2, 0, &wb);
    hk_view xv = input_at(c.x, c.x_bytes, 4, 0, &xb);
    hk_view ov = input_at(offsets, 8, 0, 1, &ob);
    hk_view sv = input_at(slots, m * 4, 0, 1, &sb);
    out_buffer yd = out_create((size_t)m * n), yi = out_create((size_t)m * n);
    hk_mmq_id_shape shape = {1, n, k, m, 1};
    char name[200];
    snprintf(name, sizeof name, "mmq_id with one expert == mmq, %s m=%u n=%u k=%u", hk_type_name(type), m, n, k);
    hk_status st = mmq_record(NULL, &c, wv, xv, out_view(&yd));
    if (st == HK_OK)
        st = hk_mmq_id(ctx, NULL, type, wv, xv, ov, sv, out_view(&yi), &shape);
    check_same_bits(name, &c, st, &yi, &yd);
    out_destroy(&yd);
    out_destroy(&yi);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(ob);
    hk_buffer_destroy(sb);
    free(offsets);
    free(slots);
    mmq_free(&c);
}

/* hk_mmq at a few tokens (m <= 16) that the few-token kernel does not take hands the call to
 * hk_matvec_int8_tokens's kernel (where a view is not on 16 bytes or k not a multiple of 256, Q6_K
 * where its tensor does not end on 16 bytes): the same bits as that call, and at the MMQ gate. w
 * at w_offset, x at x_offset. */
static void test_tokens_route(hk_type type, uint32_t m, uint32_t n, uint32_t k, uint64_t w_offset, uint64_t x_offset,
                              uint64_t seed)
{
    mmq_case c;
    mmq_build(&c, type, m, n, k, 1, X_RAW_BLOCKS, seed);
    hk_buffer *wb, *xb;
    hk_view wv = input_at(c.w, c.w_bytes, w_offset, 1, &wb);
    hk_view xv = input_at(c.x, c.x_bytes, x_offset, 1, &xb);
    out_buffer ym = out_create((size_t)m * n), yt = out_create((size_t)m * n);
    char name[200];
    snprintf(name, sizeof name, "mmq %s m=%u n=%u k=%u (w at %llu, x at %llu) == hk_matvec_int8_tokens",
             hk_type_name(type), m, n, k, (unsigned long long)w_offset, (unsigned long long)x_offset);
    hk_status st = mmq_record(NULL, &c, wv, xv, out_view(&ym));
    if (st == HK_OK)
        st = hk_matvec_int8_tokens(ctx, NULL, type, wv, xv, out_view(&yt), n, k, m);
    check_same_bits(name, &c, st, &ym, &yt);
    out_destroy(&ym);
    out_destroy(&yt);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    mmq_free(&c);
}

/* The arms of two contexts (on a device with int8 matrices: coopmat and dot) on one case: both at
 * the gate, and to each other (their int32 block sums are exact and the f32 epilogue is one code,
 * so they should agree in every bit; the count of values that do not is printed). */
static void test_arms_agree(hk_context *a, hk_context *b, hk_type type, uint32_t m, uint32_t n, uint32_t k,
                            uint64_t seed)
{
    hk_context *keep = ctx;
    float *out[2];
    for (int i = 0; i < 2; i++) {
        ctx = i ? b : a;
        out[i] = test_mmq(type, m, n, k, 1, X_RAW_BLOCKS, 0, seed, 1);
    }
    ctx = keep;
    char name[200];
    snprintf(name, sizeof name, "mmq %s m=%u n=%u k=%u: %s arm vs %s arm", hk_type_name(type), m, n, k,
             hk_mmq_path(a, type), hk_mmq_path(b, type));
    if (out[0] && out[1]) {
        size_t count = (size_t)m * n;
        printf("%s: %u of %zu values differ in their bits\n", name, bits_differ(out[0], out[1], count), count);
        hk_check_close(name, out[0], out[1], count, HK_GATE_MMQ);
    } else {
        hk_check(0, name, "a run failed");
    }
    free(out[0]);
    free(out[1]);
}

/* ---- the references on their own ---- */

/* hk_ref_mmq against the f32 matvec reference on the dequantized x; hk_ref_moe_expert_rows on a
 * hand-made routing (uneven, expert 3 never chosen, out-of-range ids). */
static void test_references(void)
{
    hk_rng rng = {99};
    const uint32_t m = 3, n = 5, k = 512;
    static const hk_type types[] = {HK_TYPE_Q4_K, HK_TYPE_Q5_K};
    for (int t = 0; t < 2; t++) {
        uint8_t *w = make_weights(&rng, types[t], n, k, 1);
        hk_block_q8_1 *x = make_x(&rng, m, k, X_RAW_BLOCKS);
        float out[15], xf[512], y[5];
        hk_ref_mmq((int)types[t], w, x, out, m, n, k);
        double worst = 0;
        for (uint32_t i = 0; i < m; i++) {
            hk_dequant_row_q8_1(x + i * (k / 32), xf, k);
            hk_ref_matvec((int)types[t], w, xf, y, n, k);
            double r = hk_scale_rel(y, out + i * n, n);
            worst = r > worst ? r : worst;
        }
        char name[120];
        snprintf(name, sizeof name, "hk_ref_mmq %s agrees with hk_ref_matvec on the dequantized x",
                 hk_type_name(types[t]));
        hk_check(worst < HK_GATE_F32, name, "scale_rel=%.3e", worst);
        free(w);
        free(x);
    }

    const uint32_t ids[14] = {0, 2, 0, 4, 1, 0, 2, 4, 0, 1, 2, 0, 5, 0xFFFFFFFFu};
    const uint32_t want_off[6] = {0, 5, 7, 10, 10, 12};
    const uint32_t want_slots[14] = {0, 2, 5, 8, 11, 4, 9, 1, 6, 10, 3, 7, 0xFFFFFFFFu, 0xFFFFFFFFu};
    uint32_t off[6], slots[14], dropped = 0;
    hk_ref_moe_expert_rows(ids, 14, 5, off, slots, &dropped);
    hk_check(memcmp(off, want_off, sizeof off) == 0 && memcmp(slots, want_slots, sizeof slots) == 0 && dropped == 2,
             "hk_ref_moe_expert_rows on a hand-made routing", "dropped %u", dropped);
}

/* ---- the tuner's families take every weight type: a search of two schedules at a Q5_K shape of
 * its own class (kept in the context only) ---- */

static void test_tune_q5k(void)
{
    static const struct {
        hk_tune_kernel kernel;
        const char *name, *shape;
    } families[] = {{HK_TUNE_MMQ, "mmq", "q5_k:m17-32/n24/k256"},
                    {HK_TUNE_MMQ_ID, "mmq_id", "q5_k:e4/n24/k256/m17-32/x2"}};
    for (int i = 0; i < 2; i++) {
        hk_tune_desc d = hk_test_short_tune(families[i].kernel);
        if (d.kernel == HK_TUNE_MMQ_ID) /* 10 tokens, top-2 of 4 experts, x per token */
            d.shape.mmq_id = (hk_tune_mmq_id_shape){HK_TYPE_Q5_K, {4, 24, 256, 20, 2}, 2};
        else
            d.shape.gemm = (hk_tune_gemm_shape){HK_TYPE_Q5_K, 20, 24, 256};
        hk_tune_report r;
        hk_status st = hk_tune(ctx, &d, &r);
        char name[80];
        snprintf(name, sizeof name, "hk_tune %s on q5_k", families[i].name);
        if (hk_check_status(name, st, HK_OK, NULL))
            hk_check(!strcmp(r.shape, families[i].shape) && r.measured >= 1 && isfinite(r.best_ms), name,
                     "shape class %s, %u measured, winner %s", r.shape, r.measured, r.schedule);
    }
}

/* ---- argument checks ---- */

static void test_errors(void)
{
    hk_buffer *big = hk_test_buffer(ctx, 1 << 16, NULL), *small = hk_test_buffer(ctx, 64, NULL);
    hk_view a = {big, 0}, b = {big, 1 << 15}, s = {small, 0};
    hk_mmq_id_shape shape = {4, 16, 256, 8, 2};
    hk_check_status("mmq k off the block", hk_mmq(ctx, NULL, HK_TYPE_Q4_K, a, b, s, 1, 1, 96), HK_ERROR_INVALID_ARGUMENT,
                    "k=96 is not a positive multiple of 256 (q4_k block)");
    hk_check_status("mmq k too large", hk_mmq(ctx, NULL, HK_TYPE_Q8_0, a, b, s, 1, 1, 65568), HK_ERROR_INVALID_ARGUMENT,
                    "above the limit of 65536");
    hk_check_status("mmq m zero", hk_mmq(ctx, NULL, HK_TYPE_Q8_0, a, b, s, 0, 1, 32), HK_ERROR_INVALID_ARGUMENT,
                    "m=0 and n=1 must both be positive");
    hk_check_status("mmq f32 weights", hk_mmq(ctx, NULL, HK_TYPE_F32, a, b, s, 1, 1, 32), HK_ERROR_UNSUPPORTED,
                    "not an MMQ weight type");
    hk_check_status("mmq output too small", hk_mmq(ctx, NULL, HK_TYPE_Q8_0, a, b, s, 5, 4, 32),
                    HK_ERROR_INVALID_ARGUMENT, "out needs 80 bytes at offset 0, past the end of its 64-byte buffer");
    hk_check_status("mmq misaligned x", hk_mmq(ctx, NULL, HK_TYPE_Q8_0, a, (hk_view){big, 2}, s, 1, 1, 32),
                    HK_ERROR_INVALID_ARGUMENT, "xq.offset=2 is not a multiple of 4");
    hk_check_status("mmq output overlaps w", hk_mmq(ctx, NULL, HK_TYPE_Q8_0, a, b, (hk_view){big, 16}, 1, 1, 32),
                    HK_ERROR_INVALID_ARGUMENT, "output out overlaps w");
    hk_check_status("mmq_id null shape", hk_mmq_id(ctx, NULL, HK_TYPE_Q4_K, a, b, a, a, s, NULL),
                    HK_ERROR_INVALID_ARGUMENT, "shape is NULL");
    shape.slots_per_x_row = 3;
    hk_check_status("mmq_id slots_per_x_row", hk_mmq_q4k_id(ctx, NULL, a, b, a, a, s, &shape), HK_ERROR_INVALID_ARGUMENT,
                    "slots_per_x_row=3 does not divide n_slots=8");
    shape.slots_per_x_row = 2;
    shape.n_experts = 0;
    hk_check_status("mmq_id no experts", hk_mmq_q6k_id(ctx, NULL, a, b, a, a, s, &shape), HK_ERROR_INVALID_ARGUMENT,
                    "n_experts=0");
    shape.n_experts = 4;
    shape.k = 128;
    hk_check_status("mmq_id q5_k k off the block", hk_mmq_q5k_id(ctx, NULL, a, b, a, a, s, &shape),
                    HK_ERROR_INVALID_ARGUMENT, "k=128 is not a positive multiple of 256 (q5_k block)");
    shape.k = 256;
    hk_check_status("mmq_id output too small", hk_mmq_q6k_id(ctx, NULL, a, b, (hk_view){big, 40000},
                                                             (hk_view){big, 50000}, s, &shape),
                    HK_ERROR_INVALID_ARGUMENT, "out needs 512 bytes");
    hk_check_status("moe_expert_rows too many experts",
                    hk_moe_expert_rows(ctx, NULL, a, b, (hk_view){big, 40000}, s, 8, 1025), HK_ERROR_INVALID_ARGUMENT,
                    "n_experts=1025 is not in 1..1024");
    hk_check_status("moe_expert_rows no slots", hk_moe_expert_rows(ctx, NULL, a, b, (hk_view){big, 40000}, s, 0, 8),
                    HK_ERROR_INVALID_ARGUMENT, "n_slots=0");
    hk_check_status("moe_expert_rows outputs overlap",
                    hk_moe_expert_rows(ctx, NULL, a, b, (hk_view){big, (1 << 15) + 8}, s, 8, 8),
                    HK_ERROR_INVALID_ARGUMENT, "overlaps");
    /* the tuning hooks are checked, not ignored */
    static const struct {
        const char *var, *value, *want;
    } hooks[] = {
        {"HK_MMQ_TILE", "2,2,2,2,3", "is not \"wm,wn,rm,rn,ks\""},
        {"HK_MMQ_TILE", "2,2,2,2,1", "2 or more for the k-quants"},
        {"HK_MMQ_TILE", "8,8,8,8,8", "cannot run on device"},
        {"HK_MMQ_PREFETCH", "2", "HK_MMQ_PREFETCH=\"2\" is not an integer in 0..1"},
        {"HK_MMQ_LAYOUT", "nvidia", "HK_MMQ_LAYOUT=\"nvidia\" is not \"auto\" or \"generic\""},
    };
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++) {
        setenv(hooks[i].var, hooks[i].value, 1);
        char name[120];
        snprintf(name, sizeof name, "mmq %s=%s", hooks[i].var, hooks[i].value);
        hk_status want = strcmp(hooks[i].value, "8,8,8,8,8") == 0 ? HK_ERROR_UNSUPPORTED : HK_ERROR_INVALID_ARGUMENT;
        hk_check_status(name, hk_mmq(ctx, NULL, HK_TYPE_Q4_K, a, b, (hk_view){big, 40000}, 4, 4, 256), want,
                        hooks[i].want);
        unsetenv(hooks[i].var);
    }
    hk_buffer_destroy(big);
    hk_buffer_destroy(small);
}

/* ---- schedules: every tiling a tuner or a user may pick runs the same arithmetic ----
 * Each setting (HK_MMQ_TILE for both kernels, or one of the other hooks) on a few shapes with
 * tails in m and n, every type it applies to, both kernels. On the coopmat arm this proves the
 * matrix-core code at each tile (lavapipe has no matrix cores); HK_MMQ_LAYOUT=generic runs the
 * epilogue any element ownership takes, and HK_MMQ_EMULATE_GENERIC=1 (portable arm) runs it on an
 * ownership other than NVIDIA's. */
static void test_schedules(void)
{
    static const struct {
        const char *var, *value;
        uint32_t ks;  /* the k step the setting asks for (types that cannot take it are skipped) */
        int portable; /* also run on the portable arms (their code is the same at every tile: on
                       * lavapipe the settings that change which code runs, and a few tiles) */
    } settings[] = {
        {"HK_MMQ_TILE", "1,1,1,1,4", 4, 1},   {"HK_MMQ_TILE", "2,1,1,2,2", 2, 1},
        {"HK_MMQ_TILE", "1,2,2,1,8", 8, 1},   {"HK_MMQ_TILE", "4,2,2,2,4", 4, 0},
        {"HK_MMQ_TILE", "2,4,1,2,4", 4, 0},   {"HK_MMQ_TILE", "4,4,2,2,4", 4, 0},
        {"HK_MMQ_TILE", "4,4,2,2,2", 2, 0},   {"HK_MMQ_TILE", "1,4,2,2,2", 2, 0},
        {"HK_MMQ_TILE", "1,4,1,2,2", 2, 0},   {"HK_MMQ_TILE", "2,4,4,2,4", 4, 0},
        {"HK_MMQ_TILE", "1,1,1,1,1", 1, 0},   {"HK_MMQ_TILE", "1,2,2,2,2", 2, 0},
        {"HK_MMQ_TILE", "1,4,2,1,2", 2, 0},   {"HK_MMQ_PREFETCH", "0", 4, 1},
        /* Q6_K's staging units of 1 and 2 words (mmq_weights.glsl QW; 4 at 1,1,1,1,4) */
        {"HK_MMQ_TILE", "4,1,1,1,2", 2, 1},   {"HK_MMQ_TILE", "2,1,1,1,2", 2, 1},
        {"HK_MMQ_ROLLED", "1", 4, 1},         {"HK_MMQ_LAYOUT", "generic", 4, 0},
        {"HK_MMQ_ROLLED", "0", 4, 1}, /* the default on CPU devices is the rolled loop */
        {"HK_MMQ_EMULATE_GENERIC", "1", 4, 1},
    };
    const char *arm = hk_mmq_path(ctx, HK_TYPE_Q4_K);
    int coopmat = arm && strcmp(arm, "coopmat") == 0;
    static const hk_type types[] = {HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q6_K, HK_TYPE_Q5_K};
    uint64_t seed = 9000;
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        const char *var = settings[i].var;
        int tile = strcmp(var, "HK_MMQ_TILE") == 0;
        if (!coopmat && !settings[i].portable)
            continue;
        setenv(var, settings[i].value, 1);
        if (tile)
            setenv("HK_MMQ_ID_TILE", settings[i].value, 1);
        tile_may_not_fit = tile;
        printf("-- %s=%s\n", var, settings[i].value);
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            hk_type ty = types[t];
            if (ty != HK_TYPE_Q8_0 && settings[i].ks < 2)
                continue;
            test_mmq(ty, 37, 70, 512, 1, X_RAW_BLOCKS, (int)(i % 3), ++seed, 0);
            test_mmq(ty, 130, 33, 768, 0, X_QUANTIZED, (int)((i + 1) % 3), ++seed, 0);
            test_mmq_id(ty, 6, 40, 256, 30, 2, (int)(i & 1), ROUTE_SKEWED, 0, ++seed);
        }
        unsetenv(var);
        tile_may_not_fit = 0;
        if (tile)
            unsetenv("HK_MMQ_ID_TILE");
    }
}

/* ---- the suite, on one context ---- */

/* hk_mmq's few-token kernel (mmq_few.comp; 8 token columns up to 8 tokens, 16 past): its k split
 * over the warps of a workgroup (k = 768: 3 super-blocks, fewer than the warps; 2816: 11, not a
 * multiple of them), tails in n (workgroups of 16 or 32 rows) and m, every x producer, flush
 * against the end; the warp count from the workgroups against the device's schedulers (mmq.c
 * record_few; 512 where the device does not say): Q4_K at n = 4100 129 workgroups of 32 rows, 2
 * warps where 512 (4 on the H200's 528), at 8200 257, 1 warp (2 on the H200), the last workgroup 8
 * rows; Q8_0 (workgroups of 16 rows, up to 2 warps per scheduler) at 4100 257 workgroups, 2 warps
 * where 512 (4 on the H200), at 8200 513, 1 warp (2 on the H200). Q8_0's rows' 16-byte pieces are
 * decoded by their place in a super-block (q8_plan), every place at every k. Q6_K (workgroups of
 * 16 rows, warps as Q4_K: at 2056 129 workgroups, 2 warps where 512, at 8200 513, 1 warp; rows x
 * super-blocks a multiple of 8): its super-blocks start at every even byte against 16 (k = 256 ..
 * 1280: rows start at different places; 2048: every row alike, the place moving with the
 * super-block), the tensor's last piece its last 16 bytes (flush). Q5_K is staged as Q4_K (its qh
 * pieces loaded with the headers): the same k splits, tails and producers. */
static const struct few_case {
    hk_type type;
    uint32_t m, n, k;
    int raw_w, x_mode, flush, full_only;
} few_cases[] = {
    {HK_TYPE_Q4_K, 8, 70, 512, 1, X_RAW_BLOCKS, 0, 0},      {HK_TYPE_Q4_K, 2, 33, 2048, 0, X_GPU_QUANTIZED, 3, 0},
    {HK_TYPE_Q4_K, 7, 16, 768, 1, X_QUANTIZED, 3, 0},       {HK_TYPE_Q4_K, 8, 40, 2816, 0, X_QUANTIZED, 0, 0},
    {HK_TYPE_Q4_K, 16, 70, 512, 1, X_RAW_BLOCKS, 3, 0},     {HK_TYPE_Q4_K, 9, 33, 768, 0, X_GPU_QUANTIZED, 0, 0},
    {HK_TYPE_Q4_K, 13, 48, 2816, 1, X_QUANTIZED, 3, 0},     {HK_TYPE_Q4_K, 6, 4100, 1280, 1, X_GPU_QUANTIZED, 3, 0},
    {HK_TYPE_Q4_K, 3, 8200, 768, 0, X_GPU_QUANTIZED, 3, 0}, {HK_TYPE_Q4_K, 8, 130, 4096, 0, X_QUANTIZED, 0, 1},
    {HK_TYPE_Q4_K, 16, 4100, 1280, 1, X_GPU_QUANTIZED, 3, 1},
    {HK_TYPE_Q4_K, 11, 3, 65536, 0, X_QUANTIZED, 0, 1}, /* the k limit */
    {HK_TYPE_Q4_K, 1, 300, 256, 1, X_RAW_BLOCKS, 3, 1},     {HK_TYPE_Q4_K, 5, 3, 65536, 1, X_QUANTIZED, 3, 1},
    {HK_TYPE_Q8_0, 8, 70, 512, 1, X_RAW_BLOCKS, 0, 0},      {HK_TYPE_Q8_0, 1, 19, 256, 1, X_QUANTIZED, 3, 0},
    {HK_TYPE_Q8_0, 7, 16, 768, 0, X_GPU_QUANTIZED, 3, 0},   {HK_TYPE_Q8_0, 16, 33, 512, 1, X_RAW_BLOCKS, 3, 0},
    {HK_TYPE_Q8_0, 13, 48, 2816, 1, X_QUANTIZED, 3, 0},     {HK_TYPE_Q8_0, 5, 4100, 1280, 1, X_GPU_QUANTIZED, 3, 0},
    {HK_TYPE_Q8_0, 3, 8200, 768, 0, X_GPU_QUANTIZED, 3, 0},
    {HK_TYPE_Q8_0, 8, 130, 4096, 0, X_QUANTIZED, 0, 1},     {HK_TYPE_Q8_0, 11, 3, 65536, 1, X_QUANTIZED, 3, 1},
    {HK_TYPE_Q6_K, 8, 72, 256, 1, X_RAW_BLOCKS, 3, 0},      {HK_TYPE_Q6_K, 1, 40, 512, 1, X_QUANTIZED, 3, 0},
    {HK_TYPE_Q6_K, 7, 16, 768, 0, X_GPU_QUANTIZED, 0, 0},   {HK_TYPE_Q6_K, 16, 33, 2048, 1, X_RAW_BLOCKS, 3, 0},
    {HK_TYPE_Q6_K, 13, 48, 2816, 1, X_QUANTIZED, 3, 0},     {HK_TYPE_Q6_K, 5, 2056, 1280, 1, X_GPU_QUANTIZED, 3, 0},
    {HK_TYPE_Q6_K, 3, 8200, 768, 0, X_GPU_QUANTIZED, 3, 0}, {HK_TYPE_Q6_K, 10, 70, 1024, 1, X_RAW_BLOCKS, 3, 0},
    {HK_TYPE_Q6_K, 8, 136, 4096, 0, X_QUANTIZED, 0, 1},     {HK_TYPE_Q6_K, 11, 8, 65536, 1, X_QUANTIZED, 3, 1},
    {HK_TYPE_Q5_K, 8, 70, 512, 1, X_RAW_BLOCKS, 0, 0},      {HK_TYPE_Q5_K, 2, 33, 2048, 0, X_GPU_QUANTIZED, 3, 0},
    {HK_TYPE_Q5_K, 16, 70, 512, 1, X_RAW_BLOCKS, 3, 0},     {HK_TYPE_Q5_K, 9, 33, 768, 0, X_GPU_QUANTIZED, 0, 0},
    {HK_TYPE_Q5_K, 13, 48, 2816, 1, X_QUANTIZED, 3, 0},     {HK_TYPE_Q5_K, 3, 8200, 768, 0, X_GPU_QUANTIZED, 3, 0},
    {HK_TYPE_Q5_K, 8, 130, 4096, 0, X_QUANTIZED, 0, 1},     {HK_TYPE_Q5_K, 16, 4100, 1280, 1, X_GPU_QUANTIZED, 3, 1},
    {HK_TYPE_Q5_K, 5, 3, 65536, 1, X_QUANTIZED, 3, 1},
};

static void run_suite(int full)
{
    static const hk_type types[] = {HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q6_K, HK_TYPE_Q5_K};
    uint64_t seed = full ? 1000 : 5000;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        hk_type ty = types[t];
        uint32_t blk = hk_type_block_values(ty);
        /* tails in m and n; k at one block, 256, 512, 2048; Q8_0 k with an odd number of blocks
         * (a partial k step). The single output of 1 x 1 is its own scale, so it takes quantized
         * weights: raw Q4_K blocks (dmin as large as d) can cancel one output to 1/1000 of its
         * terms, below what f32 holds at 1e-6 (the reference agrees with the exact value there) */
        test_mmq(ty, 1, 1, blk, 0, X_QUANTIZED, 1, ++seed, 0);
        test_mmq(ty, 17, 7, 256, 0, X_RAW_BLOCKS, 0, ++seed, 0);
        test_mmq(ty, 100, 257, 512, 1, X_QUANTIZED, 1, ++seed, 0);
        test_mmq(ty, 64, 64, 2048, 0, X_GPU_QUANTIZED, 0, ++seed, 0);
        /* the weights' 32-bit loads (mmq_weights.glsl WLOAD 1: Q8_0 and Q6_K rows on 4 bytes, an
         * even k / block count; Q8_0's even blocks shifted by 2 bytes, Q6_K's odd super-blocks
         * read as 16-bit words), flush against the end */
        test_mmq(ty, 19, 45, 1024, 1, X_QUANTIZED, 2, ++seed, 0);
        if (full) {
            test_mmq(ty, 33, 130, 256, 1, X_GPU_QUANTIZED, 1, ++seed, 0);
            test_mmq(ty, 5, 300, 1024, 0, X_RAW_BLOCKS, 1, ++seed, 0);
            if (ty == HK_TYPE_Q8_0)
                test_mmq(ty, 70, 33, 96, 1, X_RAW_BLOCKS, 0, ++seed, 0);
            test_mmq(ty, 3, 5, 65536, 1, X_QUANTIZED, 1, ++seed, 0); /* the k limit */
        }
    }
    /* m <= 16, k a multiple of 256, both views on 16 bytes: the few-token kernel (few_cases) */
    for (size_t i = 0; i < sizeof few_cases / sizeof few_cases[0]; i++) {
        const struct few_case *f = &few_cases[i];
        if (full || !f->full_only)
            test_mmq(f->type, f->m, f->n, f->k, f->raw_w, f->x_mode, f->flush, ++seed, 0);
    }
    /* a few tokens otherwise: hk_matvec_int8_tokens's kernel (one token: hk_matvec_int8's) */
    test_tokens_route(HK_TYPE_Q8_0, 8, 37, 1056, 32, 16, ++seed); /* k not a multiple of 256 */
    test_tokens_route(HK_TYPE_Q8_0, 12, 40, 1024, 34, 16, ++seed); /* w on 2 bytes */
    test_tokens_route(HK_TYPE_Q6_K, 16, 21, 512, 32, 16, ++seed); /* rows x super-blocks 42: not on 16 bytes */
    test_tokens_route(HK_TYPE_Q6_K, 8, 16, 512, 34, 16, ++seed);  /* w on 2 bytes */
    test_tokens_route(HK_TYPE_Q4_K, 12, 33, 768, 32, 20, ++seed);
    test_tokens_route(HK_TYPE_Q6_K, 1, 50, 256, 32, 16, ++seed);
    test_tokens_route(HK_TYPE_Q5_K, 12, 33, 768, 32, 20, ++seed); /* x off 16 bytes */
    /* w on 2 bytes: neither few-token kernel takes Q5_K (both read it 16 bytes at a time), the tiles do */
    test_mmq(HK_TYPE_Q5_K, 8, 37, 512, 1, X_RAW_BLOCKS, 1, ++seed, 0);
    /* grouping: uneven loads, empty experts, all slots on one expert, out-of-range ids; the
     * Qwen3-30B-A3B prefill shape (512 tokens, top-8 of 128) */
    test_rows(37, 4, 8, ROUTE_RANDOM, ++seed);
    test_rows(50, 2, 16, ROUTE_SKEWED, ++seed);
    test_rows(40, 1, 8, ROUTE_ONE_EXPERT, ++seed);
    test_rows(33, 3, 8, ROUTE_BAD_IDS, ++seed);
    if (full) {
        test_rows(512, 8, 128, ROUTE_RANDOM, ++seed);
        test_rows(300, 8, 1024, ROUTE_SKEWED, ++seed);
        test_rows(1, 1, 1, ROUTE_RANDOM, ++seed);
        test_rows(4096, 8, 64, ROUTE_BAD_IDS, ++seed); /* 32768 slots: many chunks */
    }
    /* the expert-indexed GEMM: gate/up (x per token, Q4_K), down (x per slot, Q6_K), Q8_0 */
    test_moe_prefill(HK_TYPE_Q4_K, 8, 96, 512, 40, 2, 0, ROUTE_RANDOM, ++seed);
    test_moe_prefill(HK_TYPE_Q6_K, 8, 64, 256, 40, 2, 1, ROUTE_SKEWED, ++seed);
    test_moe_prefill(HK_TYPE_Q8_0, 6, 70, 96, 23, 3, 0, ROUTE_BAD_IDS, ++seed);
    test_moe_prefill(HK_TYPE_Q5_K, 8, 64, 512, 40, 2, 1, ROUTE_SKEWED, ++seed);
    /* all slots on one expert: its 128 rows are more row tiles than the grid launches for an
     * expert (about twice the average load of 16 rows), so the grid stride must cover them */
    test_mmq_id(HK_TYPE_Q4_K, 8, 33, 256, 128, 1, 1, ROUTE_ONE_EXPERT, 0, ++seed);
    test_mmq_id(HK_TYPE_Q6_K, 4, 40, 512, 30, 2, 0, ROUTE_RANDOM, 1, ++seed);
    test_mmq_id(HK_TYPE_Q4_K, 8, 50, 256, 20, 4, 0, ROUTE_RANDOM, 2, ++seed);
    test_mmq_id(HK_TYPE_Q5_K, 4, 40, 512, 30, 2, 0, ROUTE_RANDOM, 1, ++seed);
    test_one_expert_is_dense(HK_TYPE_Q4_K, 45, 70, 512, ++seed);
    if (full) {
        test_one_expert_is_dense(HK_TYPE_Q5_K, 33, 40, 256, ++seed);
        test_mmq_id(HK_TYPE_Q5_K, 8, 33, 256, 128, 1, 1, ROUTE_ONE_EXPERT, 0, ++seed);
        test_one_expert_is_dense(HK_TYPE_Q8_0, 64, 64, 256, ++seed);
        test_one_expert_is_dense(HK_TYPE_Q6_K, 17, 100, 256, ++seed);
        test_moe_prefill(HK_TYPE_Q4_K, 16, 64, 256, 64, 4, 0, ROUTE_SKEWED, ++seed);
        test_moe_prefill(HK_TYPE_Q6_K, 16, 48, 512, 64, 4, 1, ROUTE_ONE_EXPERT, ++seed);
        test_mmq_id(HK_TYPE_Q8_0, 5, 37, 64, 31, 2, 1, ROUTE_SKEWED, 1, ++seed);
        test_mmq_id(HK_TYPE_Q6_K, 8, 20, 256, 16, 2, 1, ROUTE_RANDOM, 2, ++seed);
    }
}

static void use_context(hk_context *c, const char *label)
{
    ctx = c;
    const char *path = hk_mmq_path(ctx, HK_TYPE_Q4_K);
    gate = path && strcmp(path, "coopmat") == 0 ? HK_GATE_MMQ_COOPMAT : HK_GATE_MMQ;
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    printf("-- %s: mmq arm %s (q8_0 %s, q5_k %s, q6_k %s), gate %.0e; subgroup %u, shared memory %u, KHR coopmat "
           "%s\n", label, path, hk_mmq_path(ctx, HK_TYPE_Q8_0), hk_mmq_path(ctx, HK_TYPE_Q5_K),
           hk_mmq_path(ctx, HK_TYPE_Q6_K), gate, caps.subgroup_size, caps.shared_memory_bytes,
           caps.coopmat_khr ? "on" : "off");
}

int main(int argc, char **argv)
{
    /* --small (the GPU-assisted run): the suite without the schedule settings, and on the twin
     * contexts only the arms' agreement: every arm reads the buffers with the same staging code
     * (the arms differ in their products, from shared memory), and lavapipe builds each
     * instrumented pipeline again per context, on one core (the twin's suite doubled the run to
     * ~980 s on CI's 2 cores) */
    int small = argc > 1 && strcmp(argv[1], "--small") == 0;
    hk_context *full = hk_test_context();
    use_context(full, "default context");
    hk_caps caps;
    hk_context_caps(full, &caps);
    /* where the device lists s8 16x16x32 matrices, the default context must use them */
    int has_s8 = 0;
    for (uint32_t i = 0; i < caps.coopmat_khr_count; i++) {
        const hk_coopmat_props *p = &caps.coopmat_khr_props[i];
        has_s8 |= p->m == 16 && p->n == 16 && p->k == 32 && p->a_type == 3 && p->b_type == 3 && p->c_type == 5 &&
                  p->result_type == 5 && p->scope == 3 && !p->saturating;
    }
    if (caps.coopmat_khr && has_s8 && caps.subgroup_size_control && caps.int8)
        hk_check(strcmp(hk_mmq_path(full, HK_TYPE_Q4_K), "coopmat") == 0, "the device's int8 matrices are used",
                 "arm %s", hk_mmq_path(full, HK_TYPE_Q4_K));
    test_references();
    test_errors();
    test_tune_q5k();
    run_suite(1);
    if (!small)
        test_schedules();

    /* the portable arms on contexts that may not use the accelerated paths; coopmat against dot
     * at the gates above, and against each other */
    const uint32_t twins[] = {HK_FEATURE_COOPMAT_KHR, HK_FEATURE_COOPMAT_KHR | HK_FEATURE_INTEGER_DOT};
    for (int i = 0; i < 2; i++) {
        /* a device without the feature: the default context's runs were the twin's (on lavapipe,
         * which compiles every pipeline again for a new context, that halves this test) */
        if (i == 0 && !(caps.features & HK_FEATURE_COOPMAT_KHR)) {
            printf("-- without feature 0x%x: not on this device, so the runs above were the twin's\n", twins[i]);
            continue;
        }
        hk_context *c = hk_test_context_without(twins[i]);
        if (!c)
            continue;
        char label[80];
        snprintf(label, sizeof label, "without feature 0x%x", twins[i]);
        use_context(c, label);
        if (!small)
            run_suite(0);
        test_arms_agree(full, c, HK_TYPE_Q4_K, 100, 130, 1024, 77);
        test_arms_agree(full, c, HK_TYPE_Q4_K, 8, 70, 1024, 80); /* the few-token kernel */
        test_arms_agree(full, c, HK_TYPE_Q4_K, 14, 70, 1024, 81); /* its 16 token columns */
        test_arms_agree(full, c, HK_TYPE_Q8_0, 8, 70, 1024, 82);  /* its Q8_0 */
        test_arms_agree(full, c, HK_TYPE_Q8_0, 14, 70, 1024, 83);
        test_arms_agree(full, c, HK_TYPE_Q6_K, 8, 72, 1024, 84); /* its Q6_K */
        test_arms_agree(full, c, HK_TYPE_Q6_K, 14, 72, 1280, 85);
        test_arms_agree(full, c, HK_TYPE_Q5_K, 100, 130, 1024, 86);
        test_arms_agree(full, c, HK_TYPE_Q5_K, 8, 70, 1024, 87); /* the few-token kernel's Q5_K */
        test_arms_agree(full, c, HK_TYPE_Q5_K, 14, 70, 1024, 88);
        test_arms_agree(full, c, HK_TYPE_Q6_K, 70, 64, 512, 78);
        test_arms_agree(full, c, HK_TYPE_Q8_0, 33, 200, 320, 79);
        uint32_t messages = hk_context_validation_messages(ctx);
        hk_check(messages == 0, "no validation messages on the twin context", "%u seen", messages);
        hk_context_destroy(ctx);
    }
    ctx = full;
    return hk_test_finish(full);
}
