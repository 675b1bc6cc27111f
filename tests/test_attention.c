/* Attention kernels against their C references: flash-decoding (hk_sdpa_blk) over f32, f16 and
 * Q8_0 caches read in place, RoPE fused with the cache append (hk_rope), one decode step recorded
 * once into an engine's command buffer and replayed token after token, and every argument check.
 *
 * Each kernel case is three functions, so the lead's kernel table can reuse them:
 *   *_prepare  seeded host inputs (the KV cache as the engine lays it out, NaN in every byte the
 *              kernel must not read) and the reference output;
 *   *_record   the kernel recorded from device views of those tensors;
 *   *_compare  the gate.
 *
 * ---- bench shapes (hk-bench, the targets; llama.cpp's Vulkan flash attention on the same
 * H200 beside them) --------------------------------------------------------------------------------
 *   sdpa decode  n_q=1 H=32 Hkv=8 d=128 f16 KV, seq_k 2048 (capacity 2048): llama 0.0143 ms, goal <= 0.006 ms
 *   sdpa decode  same, seq_k 8192:   llama 0.103 ms, goal >= 75% of copy bandwidth (<= 0.011 ms)
 *   sdpa decode  same, seq_k 32768:  llama 0.317 ms, goal >= 80% of copy bandwidth (<= 0.042 ms)
 *   bytes moved: seq_k x Hkv x d x 2 (K and V) x 2 (f16) (+ q, out and the workspace, < 2%)
 *   also worth a row: the same at capacity 32768 with seq_k 2048 (an engine's cache, replayed),
 *   Qwen3-30B-A3B H=32 Hkv=4 d=128, Q8_0 KV at seq_k 32768, and hk_rope for one decode token
 *   (H=32 Hkv=8 d=128, f16 cache).
 * --------------------------------------------------------------------------------------------------
 */
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define GATE_F32 HK_GATE_F32
/* rope's angles are good to ~1e-6 rad up to position 2^24 (include/hkernel.h) */
#define GATE_ROPE 1e-5
#define GUARD 16

static hk_context *ctx;

/* ---- buffers --------------------------------------------------------------------------------- */

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

static void out_poison(out_buffer *o)
{
    hk_poison(o->host, o->n + 2 * GUARD);
    if (hk_buffer_upload(o->buffer, 0, o->host, (o->n + 2 * GUARD) * sizeof(float)) != HK_OK)
        hk_check(0, "poison upload", "%s", hk_last_error());
}

/* Downloads the output and checks the guards are still poison. */
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
    char label[260];
    snprintf(label, sizeof label, "%s guards", name);
    hk_check(bad == 0, label, "%u words written outside the output", bad);
    return o->host + GUARD;
}

static void out_destroy(out_buffer *o)
{
    hk_buffer_destroy(o->buffer);
    free(o->host);
}

/* A buffer holding bytes at offset, ending exactly where they end (flush against its end). */
static hk_view input_flush(const void *data, uint64_t bytes, uint64_t offset)
{
    hk_buffer *b = hk_test_buffer(ctx, offset + bytes, NULL);
    if (hk_buffer_fill(b, 0, (offset + bytes) / 4 * 4, HK_POISON_WORD) != HK_OK ||
        hk_buffer_upload(b, offset, data, bytes) != HK_OK)
        hk_check(0, "upload", "%s", hk_last_error());
    return (hk_view){b, offset};
}

/* ---- KV caches as an engine lays them out ---------------------------------------------------- */

typedef struct kv_cache {
    hk_kv_layout kv;
    uint32_t n_kv_heads, head_dim;
    uint64_t k_bytes, v_bytes; /* spans the views cover */
    uint8_t *k, *v;            /* host images of the spans */
} kv_cache;

/* Head-major ([head][row][d]) or token-major ([row][head][d]) rows of head_dim values plus pad
 * bytes; every byte NaN (f32 words, f16 halves; a Q8_0 block's d) until rows are written. */
static void kv_create(kv_cache *c, hk_type type, uint32_t capacity, uint32_t n_kv_heads, uint32_t head_dim,
                      int token_major, uint32_t pad)
{
    uint64_t row = hk_type_bytes(type, head_dim) + pad;
    c->kv = (hk_kv_layout){.type = type, .capacity = capacity};
    c->kv.k_row_stride = c->kv.v_row_stride = token_major ? row * n_kv_heads : row;
    c->kv.k_head_stride = c->kv.v_head_stride = token_major ? row : row * capacity;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->k_bytes = c->v_bytes = (uint64_t)(n_kv_heads - 1) * c->kv.k_head_stride +
                              (uint64_t)(capacity - 1) * c->kv.k_row_stride + hk_type_bytes(type, head_dim);
    c->k = malloc(c->k_bytes);
    c->v = malloc(c->v_bytes);
    for (int w = 0; w < 2; w++) {
        uint8_t *img = w ? c->v : c->k;
        for (uint64_t i = 0; i < c->k_bytes; i++) {
            if (type == HK_TYPE_F32) {
                uint32_t word = HK_POISON_WORD;
                img[i] = (uint8_t)(word >> (8 * (i % 4)));
            } else {
                img[i] = i % 2 ? 0x7E : 0x00; /* f16 NaN 0x7E00, little-endian */
            }
        }
    }
}

static void kv_destroy(kv_cache *c)
{
    free(c->k);
    free(c->v);
}

static uint64_t kv_row_offset(const kv_cache *c, int is_v, uint32_t head, uint32_t row)
{
    const hk_kv_layout *kv = &c->kv;
    return (uint64_t)head * (is_v ? kv->v_head_stride : kv->k_head_stride) +
           (uint64_t)row * (is_v ? kv->v_row_stride : kv->k_row_stride);
}

/* Writes head_dim values converted to the cache type (f16: round to nearest even; Q8_0: the
 * reference quantizer). */
static void kv_put(kv_cache *c, int is_v, uint32_t head, uint32_t row, const float *x)
{
    uint8_t *dst = (is_v ? c->v : c->k) + kv_row_offset(c, is_v, head, row);
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

/* The row as f32 (dequantized): what the kernel must compute with. */
static void kv_get(const kv_cache *c, const uint8_t *image, int is_v, uint32_t head, uint32_t row, float *x)
{
    const uint8_t *src = image + kv_row_offset(c, is_v, head, row);
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

/* Packed [head][row][d] copies of rows 0..rows-1 of K and V, dequantized (the reference's input). */
static void kv_pack(const kv_cache *c, const uint8_t *k_image, const uint8_t *v_image, uint32_t rows, float **k,
                    float **v)
{
    size_t n = (size_t)c->n_kv_heads * rows * c->head_dim;
    *k = malloc((n ? n : 1) * sizeof(float));
    *v = malloc((n ? n : 1) * sizeof(float));
    for (uint32_t h = 0; h < c->n_kv_heads; h++)
        for (uint32_t j = 0; j < rows; j++) {
            size_t at = ((size_t)h * rows + j) * c->head_dim;
            kv_get(c, k_image, 0, h, j, *k + at);
            kv_get(c, v_image, 1, h, j, *v + at);
        }
}

/* ---- hk_sdpa_blk ------------------------------------------------------------------------------ */

typedef struct sdpa_case {
    uint32_t n_q, n_heads, n_kv_heads, head_dim, seq_k, capacity;
    int causal;
    hk_type type;
    int token_major;
    uint32_t pad;          /* bytes after each row */
    uint32_t k_off, v_off; /* view offsets: multiples of 16 allow the 16-byte loads */
    int counter;           /* the count comes from a device u32 holding counter_value */
    uint32_t counter_value;
} sdpa_case;

typedef struct sdpa_inputs {
    sdpa_case c;
    hk_sdpa_desc desc;
    uint32_t seq_eff; /* the keys the kernel must attend (a counter is clamped) */
    float *q;         /* [n_q, n_heads, d] */
    kv_cache cache;
    float *ref;       /* [n_q, n_heads, d] */
} sdpa_inputs;

/* (1) Inputs and reference. q rows get different magnitudes, so some softmaxes are flat and some
 * peaked; rows past the keys stay NaN. */
static void sdpa_prepare(const sdpa_case *c, uint64_t seed, sdpa_inputs *in)
{
    hk_rng rng = {seed};
    in->c = *c;
    uint32_t d = c->head_dim;
    kv_create(&in->cache, c->type, c->capacity, c->n_kv_heads, d, c->token_major, c->pad);
    in->desc = (hk_sdpa_desc){.n_q = c->n_q, .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = d,
                              .seq_k = c->counter ? 0 : c->seq_k, .scale = 1.0f / sqrtf((float)d),
                              .causal = c->causal, .kv = in->cache.kv};
    uint32_t s = c->counter ? c->counter_value : c->seq_k, lo = c->causal ? c->n_q : 1;
    in->seq_eff = s < lo ? lo : s > c->capacity ? c->capacity : s;
    size_t nq = (size_t)c->n_q * c->n_heads * d;
    in->q = malloc(nq * sizeof(float));
    for (size_t r = 0; r < (size_t)c->n_q * c->n_heads; r++) {
        float mag = hk_rng_uniform(&rng, 0.3f, 4.0f);
        hk_rng_fill(&rng, in->q + r * d, d, -mag, mag);
    }
    float *row = malloc(d * sizeof(float));
    for (uint32_t h = 0; h < c->n_kv_heads; h++)
        for (uint32_t j = 0; j < in->seq_eff; j++) {
            hk_rng_fill(&rng, row, d, -1.0f, 1.0f);
            kv_put(&in->cache, 0, h, j, row);
            float shift = hk_rng_uniform(&rng, -0.5f, 0.5f);
            for (uint32_t i = 0; i < d; i++)
                row[i] = hk_rng_uniform(&rng, -1.0f, 1.0f) + shift;
            kv_put(&in->cache, 1, h, j, row);
        }
    free(row);
    float *kp, *vp;
    kv_pack(&in->cache, in->cache.k, in->cache.v, in->seq_eff, &kp, &vp);
    in->ref = malloc(nq * sizeof(float));
    hk_ref_sdpa(in->q, kp, vp, in->ref, c->n_q, c->n_heads, c->n_kv_heads, in->seq_eff, d, in->desc.scale, c->causal);
    free(kp);
    free(vp);
}

static void sdpa_free(sdpa_inputs *in)
{
    kv_destroy(&in->cache);
    free(in->q);
    free(in->ref);
}

/* (2) Record from views. */
static hk_status sdpa_record(hk_context *c, hk_stream *s, const hk_sdpa_desc *desc, hk_view q, hk_view k, hk_view v,
                             hk_view out, hk_view workspace, hk_view counter)
{
    return hk_sdpa_blk(c, s, desc, q, k, v, out, workspace, counter);
}

/* (3) Compare. */
static int sdpa_compare(const char *name, const float *got, const sdpa_inputs *in)
{
    return hk_check_close(name, got, in->ref, (size_t)in->c.n_q * in->c.n_heads * in->c.head_dim, GATE_F32);
}

static void test_sdpa(const sdpa_case *c, uint64_t seed)
{
    sdpa_inputs in;
    sdpa_prepare(c, seed, &in);
    char name[200];
    snprintf(name, sizeof name, "sdpa %s n_q=%u H=%u/%u d=%u seq_k=%u%s cap=%u%s %s%s%s", hk_type_name(c->type),
             c->n_q, c->n_heads, c->n_kv_heads, c->head_dim, in.seq_eff, c->counter ? " (counter)" : "", c->capacity,
             c->causal ? " causal" : "", c->token_major ? "token-major" : "head-major", c->pad ? " padded" : "",
             (c->k_off | c->v_off) % 16 ? " unaligned" : "");
    size_t nq = (size_t)c->n_q * c->n_heads * c->head_dim;
    hk_view qv = input_flush(in.q, nq * 4, 12);
    hk_view kv = input_flush(in.cache.k, in.cache.k_bytes, c->k_off);
    hk_view vv = input_flush(in.cache.v, in.cache.v_bytes, c->v_off);
    uint64_t ws_bytes = 0, ws_other = 0;
    hk_status st = hk_sdpa_workspace_bytes(ctx, &in.desc, &ws_bytes);
    hk_sdpa_desc other = in.desc;
    other.seq_k = 1;
    hk_sdpa_workspace_bytes(ctx, &other, &ws_other);
    hk_check(st == HK_OK && ws_bytes == ws_other, "sdpa workspace size does not depend on seq_k", "%llu vs %llu",
             (unsigned long long)ws_bytes, (unsigned long long)ws_other);
    hk_view wv = {NULL, 0};
    if (ws_bytes) { /* poisoned, flush against its end */
        wv = (hk_view){hk_test_buffer(ctx, ws_bytes + 64, NULL), 64};
        hk_buffer_fill(wv.buffer, 0, ws_bytes + 64, HK_POISON_WORD);
    }
    hk_view cv = {NULL, 0};
    if (c->counter)
        cv = input_flush(&c->counter_value, 4, 8);
    out_buffer o = out_create(nq);
    st = sdpa_record(ctx, NULL, &in.desc, qv, kv, vv, out_view(&o), wv, cv);
    if (st != HK_OK)
        hk_check(0, name, "%s", hk_last_error());
    else
        sdpa_compare(name, out_read(&o, name), &in);
    out_destroy(&o);
    hk_buffer_destroy(qv.buffer);
    hk_buffer_destroy(kv.buffer);
    hk_buffer_destroy(vv.buffer);
    hk_buffer_destroy(wv.buffer);
    hk_buffer_destroy(cv.buffer);
    sdpa_free(&in);
}

#define F32 HK_TYPE_F32
#define F16 HK_TYPE_F16
#define Q80 HK_TYPE_Q8_0

static const sdpa_case sdpa_cases[] = {
    /* n_q  H  Hkv   d  seq  cap causal type tm pad k_off v_off counter value */
    /* decode, GQA 1, 4 and 8; capacity 1; padded caches whose unused rows are NaN */
    {1, 4, 4, 64, 1, 1, 0, F32, 0, 0, 0, 0, 0, 0},
    {1, 4, 4, 64, 5, 40, 0, F32, 1, 16, 16, 32, 0, 0},
    {1, 8, 2, 128, 37, 64, 0, F16, 0, 0, 0, 0, 0, 0},
    {1, 8, 2, 128, 37, 64, 0, F16, 1, 2, 2, 6, 0, 0}, /* 2-byte aligned: the narrow loads */
    {1, 8, 1, 128, 300, 512, 0, F16, 1, 0, 32, 16, 0, 0},
    {1, 8, 2, 128, 100, 128, 0, Q80, 0, 0, 2, 36, 0, 0},
    {1, 8, 1, 64, 77, 96, 0, Q80, 1, 2, 0, 2, 0, 0},
    {1, 4, 1, 128, 60, 64, 0, F32, 0, 0, 4, 20, 0, 0},
    /* every head dim: 16 .. 256, with 80 and 96 */
    {1, 16, 2, 256, 50, 64, 0, F32, 0, 0, 0, 0, 0, 0},
    {1, 16, 2, 256, 50, 64, 0, F16, 1, 0, 0, 0, 0, 0},
    {1, 16, 2, 256, 50, 64, 0, Q80, 0, 0, 0, 0, 0, 0},
    {1, 4, 2, 80, 33, 48, 0, F16, 0, 0, 0, 0, 0, 0},
    {1, 4, 2, 96, 33, 48, 0, F32, 1, 0, 0, 0, 0, 0},
    {1, 4, 1, 96, 40, 64, 0, Q80, 0, 0, 0, 0, 0, 0},
    {1, 2, 1, 16, 20, 32, 0, F32, 0, 0, 0, 0, 0, 0},
    {1, 2, 1, 16, 20, 32, 0, F16, 1, 0, 0, 0, 0, 0},
    {1, 4, 1, 32, 20, 32, 0, Q80, 0, 0, 0, 0, 0, 0},
    {1, 4, 2, 64, 70, 80, 0, F32, 0, 0, 0, 0, 0, 0},
    /* enough keys for several splits of several tiles; a capacity past one split's 2048 */
    {1, 8, 2, 64, 3000, 4096, 0, F16, 0, 0, 0, 0, 0, 0},
    {1, 2, 1, 64, 2100, 5000, 0, F32, 1, 0, 4, 4, 0, 0},
    {1, 2, 1, 16, 5000, 300000, 0, F16, 0, 0, 0, 0, 0, 0}, /* > 128 splits: the combine loops */
    /* small batches, causal or not (the queries are the last n_q positions) */
    {2, 8, 2, 128, 40, 64, 1, F16, 0, 0, 0, 0, 0, 0},
    {5, 8, 2, 128, 40, 64, 1, F16, 1, 16, 0, 0, 0, 0},
    {8, 8, 2, 64, 40, 64, 0, F32, 0, 0, 0, 0, 0, 0},
    {3, 4, 4, 64, 9, 16, 1, F32, 0, 0, 0, 0, 0, 0},
    {6, 4, 4, 64, 6, 6, 1, F16, 0, 0, 0, 0, 0, 0},
    {8, 8, 1, 64, 30, 64, 1, Q80, 0, 0, 0, 0, 0, 0},
    {8, 32, 8, 128, 200, 256, 1, F16, 0, 0, 0, 0, 0, 0},
    {4, 8, 2, 64, 600, 1024, 1, F32, 0, 0, 0, 0, 0, 0},
    /* the count from the device, clamped: 45; 0 -> 1; past the capacity -> capacity; causal 2 -> n_q */
    {1, 8, 2, 128, 0, 64, 0, F16, 0, 0, 0, 0, 1, 45},
    {1, 8, 2, 128, 0, 64, 0, F16, 0, 0, 0, 0, 1, 0},
    {1, 8, 2, 64, 0, 40, 0, Q80, 0, 0, 0, 0, 1, 1000000},
    {4, 8, 2, 64, 0, 32, 1, F32, 0, 0, 0, 0, 1, 2},
    /* model shapes: Llama-3-8B / Qwen3-8B (H=32 Hkv=8 d=128) and Qwen3-30B-A3B (H=32 Hkv=4) */
    {1, 32, 8, 128, 200, 256, 0, F16, 0, 0, 0, 0, 0, 0},
    {1, 32, 4, 128, 150, 256, 0, F16, 1, 0, 0, 0, 0, 0},
    {1, 32, 8, 128, 150, 256, 0, Q80, 0, 0, 0, 0, 0, 0},
};

/* ---- hk_rope ---------------------------------------------------------------------------------- */

typedef struct rope_case {
    uint32_t n_tokens, n_heads, n_kv_heads, head_dim, rot_dim;
    int neox;
    float theta, freq_scale;
    int factors;
    hk_type type;
    uint32_t capacity;
    int token_major;
    int in_place;
    uint32_t first_pos; /* positions: first_pos, then spread up to 2^24 (some past the capacity) */
} rope_case;

typedef struct rope_inputs {
    rope_case c;
    hk_rope_desc desc;
    float *q, *k, *v, *factors;
    uint32_t *positions;
    kv_cache cache;    /* before the call (NaN but a few rows) */
    float *q_ref;      /* rotated q */
    float *k_ref;      /* rotated k, [n_tokens, n_kv_heads, d] */
} rope_inputs;

/* (1) Inputs and reference. */
static void rope_prepare(const rope_case *c, uint64_t seed, rope_inputs *in)
{
    hk_rng rng = {seed};
    in->c = *c;
    uint32_t d = c->head_dim, rot = c->rot_dim ? c->rot_dim : d;
    kv_create(&in->cache, c->type, c->capacity, c->n_kv_heads, d, c->token_major, 0);
    in->desc = (hk_rope_desc){.n_tokens = c->n_tokens, .n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads,
                              .head_dim = d, .rot_dim = c->rot_dim, .neox = c->neox, .theta_base = c->theta,
                              .freq_scale = c->freq_scale, .kv = in->cache.kv};
    size_t nq = (size_t)c->n_tokens * c->n_heads * d, nk = (size_t)c->n_tokens * c->n_kv_heads * d;
    in->q = malloc(nq * 4);
    in->k = malloc(nk * 4);
    in->v = malloc(nk * 4);
    hk_rng_fill(&rng, in->q, nq, -2.0f, 2.0f);
    hk_rng_fill(&rng, in->k, nk, -2.0f, 2.0f);
    hk_rng_fill(&rng, in->v, nk, -2.0f, 2.0f);
    in->factors = malloc(rot / 2 * 4);
    for (uint32_t i = 0; i < rot / 2; i++)
        in->factors[i] = i < rot / 4 ? 1.0f : hk_rng_uniform(&rng, 1.0f, 40.0f); /* llama 3.1 style */
    /* distinct positions: the first, then far ones, some past the capacity, up to 2^24 - 1 */
    static const uint32_t far[] = {32767, 1048575, 16777215, 65536, 1000003, 123457};
    in->positions = malloc(c->n_tokens * 4);
    for (uint32_t t = 0; t < c->n_tokens; t++)
        in->positions[t] = t == 0 ? c->first_pos : t % 2 ? c->first_pos + 2 * t : far[(t / 2) % 6] + t;
    /* a few rows already in the cache: they must survive */
    float *row = malloc(d * 4);
    for (uint32_t h = 0; h < c->n_kv_heads; h++)
        for (uint32_t j = 0; j < c->capacity && j < 3; j++) {
            hk_rng_fill(&rng, row, d, -1.0f, 1.0f);
            kv_put(&in->cache, 0, h, j, row);
            kv_put(&in->cache, 1, h, j, row);
        }
    free(row);
    in->q_ref = malloc(nq * 4);
    in->k_ref = malloc(nk * 4);
    memcpy(in->q_ref, in->q, nq * 4);
    memcpy(in->k_ref, in->k, nk * 4);
    const float *ff = c->factors ? in->factors : NULL;
    hk_ref_rope(in->q_ref, in->positions, c->n_tokens, c->n_heads, d, rot, c->neox, c->theta, c->freq_scale, ff);
    hk_ref_rope(in->k_ref, in->positions, c->n_tokens, c->n_kv_heads, d, rot, c->neox, c->theta, c->freq_scale, ff);
}

static void rope_free(rope_inputs *in)
{
    kv_destroy(&in->cache);
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->factors);
    free(in->positions);
    free(in->q_ref);
    free(in->k_ref);
}

/* (2) Record from views. */
static hk_status rope_record(hk_context *c, hk_stream *s, const hk_rope_desc *desc, hk_view q, hk_view k, hk_view v,
                             hk_view positions, hk_view factors, hk_view q_out, hk_view k_cache, hk_view v_cache)
{
    return hk_rope(c, s, desc, q, k, v, positions, factors, q_out, k_cache, v_cache);
}

/* Compares a written cache row with the reference values: f32 within the rope gate; f16 within
 * one unit in the last place of the reference's rounding (exact for v, which is not rotated);
 * Q8_0 d within one f16 step and each quant within one of the reference quantizer's. Returns the
 * number of bad values. */
static uint32_t row_mismatches(const kv_cache *c, const uint8_t *image, int is_v, uint32_t head, uint32_t row,
                               const float *want, double *worst)
{
    const uint8_t *got = image + kv_row_offset(c, is_v, head, row);
    uint32_t d = c->head_dim, bad = 0;
    if (c->kv.type == HK_TYPE_F32) {
        float amax = 1e-30f;
        for (uint32_t i = 0; i < d; i++)
            amax = fmaxf(amax, fabsf(want[i]));
        for (uint32_t i = 0; i < d; i++) {
            float g;
            memcpy(&g, got + 4 * i, 4);
            if (is_v) {
                bad += g != want[i];
            } else {
                double e = fabs((double)g - want[i]) / amax;
                *worst = e > *worst ? e : *worst;
                bad += !(e < GATE_ROPE);
            }
        }
    } else if (c->kv.type == HK_TYPE_F16) {
        for (uint32_t i = 0; i < d; i++) {
            uint16_t g, w = hk_f32_to_f16(want[i]);
            memcpy(&g, got + 2 * i, 2);
            int diff = (int)g - (int)w;
            bad += is_v ? g != w : (diff < -1 || diff > 1 || (g ^ w) & 0x8000);
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

/* (3) Compare: q_out at the rope gate; every written cache row; every other cache byte as it was. */
static void rope_compare(const char *name, const float *q_out, const uint8_t *k_image, const uint8_t *v_image,
                         const rope_inputs *in)
{
    const rope_case *c = &in->c;
    uint32_t d = c->head_dim;
    hk_check_close(name, q_out, in->q_ref, (size_t)c->n_tokens * c->n_heads * d, GATE_ROPE);
    /* the expected images: the old ones with the new rows' bytes taken from the kernel's, once
     * those rows are checked against the reference */
    uint8_t *k_want = malloc(in->cache.k_bytes), *v_want = malloc(in->cache.v_bytes);
    memcpy(k_want, in->cache.k, in->cache.k_bytes);
    memcpy(v_want, in->cache.v, in->cache.v_bytes);
    uint64_t row_bytes = hk_type_bytes(c->type, d);
    uint32_t bad = 0, rows = 0;
    double worst = 0.0;
    for (uint32_t t = 0; t < c->n_tokens; t++) {
        uint32_t p = in->positions[t];
        if (p >= c->capacity)
            continue;
        for (uint32_t h = 0; h < c->n_kv_heads; h++) {
            size_t at = ((size_t)t * c->n_kv_heads + h) * d;
            bad += row_mismatches(&in->cache, k_image, 0, h, p, in->k_ref + at, &worst);
            bad += row_mismatches(&in->cache, v_image, 1, h, p, in->v + at, &worst);
            uint64_t ko = kv_row_offset(&in->cache, 0, h, p), vo = kv_row_offset(&in->cache, 1, h, p);
            memcpy(k_want + ko, k_image + ko, row_bytes);
            memcpy(v_want + vo, v_image + vo, row_bytes);
            rows++;
        }
    }
    char label[260];
    snprintf(label, sizeof label, "%s cache rows", name);
    hk_check(bad == 0 && rows > 0, label, "%u rows, %u values off (f32 k worst %.2e)", rows, bad, worst);
    int same = memcmp(k_want, k_image, in->cache.k_bytes) == 0 && memcmp(v_want, v_image, in->cache.v_bytes) == 0;
    snprintf(label, sizeof label, "%s other cache bytes untouched", name);
    hk_check(same, label, NULL);
    free(k_want);
    free(v_want);
}

static void test_rope(const rope_case *c, uint64_t seed)
{
    rope_inputs in;
    rope_prepare(c, seed, &in);
    uint32_t d = c->head_dim, rot = c->rot_dim ? c->rot_dim : d;
    char name[200];
    snprintf(name, sizeof name, "rope %s T=%u H=%u/%u d=%u rot=%u %s theta=%g scale=%g%s cap=%u %s%s",
             hk_type_name(c->type), c->n_tokens, c->n_heads, c->n_kv_heads, d, rot, c->neox ? "neox" : "normal",
             (double)c->theta, (double)c->freq_scale, c->factors ? " factors" : "", c->capacity,
             c->token_major ? "token-major" : "head-major", c->in_place ? " in-place" : "");
    size_t nq = (size_t)c->n_tokens * c->n_heads * d, nk = (size_t)c->n_tokens * c->n_kv_heads * d;
    out_buffer qo = out_create(nq);
    hk_view qv, q_out = out_view(&qo);
    if (c->in_place) {
        hk_buffer_upload(qo.buffer, GUARD * 4, in.q, nq * 4);
        qv = q_out;
    } else {
        qv = input_flush(in.q, nq * 4, 4);
    }
    hk_view kv = input_flush(in.k, nk * 4, 8), vv = input_flush(in.v, nk * 4, 0);
    hk_view pv = input_flush(in.positions, c->n_tokens * 4, 4);
    hk_view fv = c->factors ? input_flush(in.factors, rot / 2 * 4, 4) : (hk_view){NULL, 0};
    /* caches at the loosest offsets their type allows, flush against their buffers' ends */
    hk_view kc = input_flush(in.cache.k, in.cache.k_bytes, hk_type_alignment(c->type));
    hk_view vc = input_flush(in.cache.v, in.cache.v_bytes, 0);
    hk_status st = rope_record(ctx, NULL, &in.desc, qv, kv, vv, pv, fv, q_out, kc, vc);
    if (st != HK_OK) {
        hk_check(0, name, "%s", hk_last_error());
    } else {
        uint8_t *k_image = malloc(in.cache.k_bytes), *v_image = malloc(in.cache.v_bytes);
        hk_buffer_download(kc.buffer, kc.offset, k_image, in.cache.k_bytes);
        hk_buffer_download(vc.buffer, vc.offset, v_image, in.cache.v_bytes);
        rope_compare(name, out_read(&qo, name), k_image, v_image, &in);
        free(k_image);
        free(v_image);
    }
    out_destroy(&qo);
    if (!c->in_place)
        hk_buffer_destroy(qv.buffer);
    hk_buffer_destroy(kv.buffer);
    hk_buffer_destroy(vv.buffer);
    hk_buffer_destroy(pv.buffer);
    hk_buffer_destroy(fv.buffer);
    hk_buffer_destroy(kc.buffer);
    hk_buffer_destroy(vc.buffer);
    rope_free(&in);
}

static const rope_case rope_cases[] = {
    /* T  H Hkv   d rot neox theta freq_scale factors type cap tm in_place first_pos */
    {1, 8, 2, 128, 0, 1, 1e6f, 1.0f, 0, F16, 64, 1, 1, 17},     /* Qwen3 decode, in place */
    {1, 8, 2, 128, 0, 0, 5e5f, 1.0f, 1, F16, 64, 0, 0, 63},     /* Llama 3.1 with rope_freqs */
    {6, 4, 2, 64, 0, 1, 1e4f, 1.0f, 0, F32, 40, 0, 0, 3},       /* prefill chunk; far positions */
    {6, 4, 2, 64, 32, 0, 1e4f, 0.25f, 0, F32, 40, 1, 1, 5},     /* partial rotation, linear scaling */
    {5, 4, 1, 128, 64, 1, 1e6f, 1.0f, 1, Q80, 32, 0, 0, 0},     /* Q8_0 cache */
    {3, 2, 2, 256, 0, 0, 1e4f, 1.0f, 0, Q80, 16, 1, 1, 2},
    {2, 6, 3, 80, 0, 1, 1e4f, 1.0f, 0, F16, 8, 0, 0, 6},
    {1, 32, 8, 128, 0, 1, 1e6f, 1.0f, 0, F16, 40000, 1, 0, 32767}, /* a long cache, position 32767 */
    {4, 2, 1, 16, 0, 0, 1e4f, 1.0f, 0, F32, 4, 0, 0, 1},
};

/* ---- one decode step, recorded once, replayed for three tokens --------------------------------- */

typedef struct vk_fns {
    PFN_vkCreateCommandPool create_pool;
    PFN_vkDestroyCommandPool destroy_pool;
    PFN_vkAllocateCommandBuffers allocate;
    PFN_vkBeginCommandBuffer begin;
    PFN_vkEndCommandBuffer end;
    PFN_vkQueueSubmit submit;
    PFN_vkQueueWaitIdle wait_idle;
} vk_fns;

/* The engine's flow: its own command buffer, hk_rope then hk_sdpa_blk recorded into it once, the
 * position and the key count read on the device; per token the engine only writes q, k, v (its
 * earlier kernels would), the position and the count, and submits the same command buffer. */
static void test_replay(void)
{
    const uint32_t H = 8, HKV = 2, D = 64, CAP = 256, FIRST = 100, TOKENS = 3;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
    if (hk_context_vulkan(ctx, NULL, NULL, &device, &queue, &family) != HK_OK) {
        hk_check(0, "replay: context objects", "%s", hk_last_error());
        return;
    }
    vk_fns vk = {
        (PFN_vkCreateCommandPool)vkGetDeviceProcAddr(device, "vkCreateCommandPool"),
        (PFN_vkDestroyCommandPool)vkGetDeviceProcAddr(device, "vkDestroyCommandPool"),
        (PFN_vkAllocateCommandBuffers)vkGetDeviceProcAddr(device, "vkAllocateCommandBuffers"),
        (PFN_vkBeginCommandBuffer)vkGetDeviceProcAddr(device, "vkBeginCommandBuffer"),
        (PFN_vkEndCommandBuffer)vkGetDeviceProcAddr(device, "vkEndCommandBuffer"),
        (PFN_vkQueueSubmit)vkGetDeviceProcAddr(device, "vkQueueSubmit"),
        (PFN_vkQueueWaitIdle)vkGetDeviceProcAddr(device, "vkQueueWaitIdle"),
    };
    hk_rng rng = {99};
    kv_cache cache;
    kv_create(&cache, HK_TYPE_F16, CAP, HKV, D, 1, 0);
    float row[64];
    for (uint32_t h = 0; h < HKV; h++)
        for (uint32_t j = 0; j < FIRST; j++) {
            hk_rng_fill(&rng, row, D, -1.0f, 1.0f);
            kv_put(&cache, 0, h, j, row);
            hk_rng_fill(&rng, row, D, -1.0f, 1.0f);
            kv_put(&cache, 1, h, j, row);
        }
    hk_view kc = input_flush(cache.k, cache.k_bytes, 0), vc = input_flush(cache.v, cache.v_bytes, 16);
    hk_buffer *io = hk_test_buffer(ctx, 4096 + 2 * 1024, NULL);
    hk_view qv = {io, 0}, kv = {io, 2048}, vv = {io, 2560}, pos = {io, 3072}, count = {io, 3076};
    out_buffer o = out_create(H * D);
    hk_rope_desc rd = {.n_tokens = 1, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .neox = 1, .theta_base = 1e6f,
                       .freq_scale = 1.0f, .kv = cache.kv};
    hk_sdpa_desc sd = {.n_q = 1, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .seq_k = 1,
                       .scale = 0.125f, .kv = cache.kv};
    uint64_t ws_bytes = 0;
    hk_sdpa_workspace_bytes(ctx, &sd, &ws_bytes);
    hk_view ws = {ws_bytes ? hk_test_buffer(ctx, ws_bytes, NULL) : NULL, 0};

    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = family};
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO}; /* replayable */
    hk_stream *s = NULL;
    hk_status st = HK_ERROR_VULKAN;
    if (vk.create_pool(device, &pi, NULL, &pool) == VK_SUCCESS) {
        ai.commandPool = pool;
        if (vk.allocate(device, &ai, &cmd) == VK_SUCCESS && vk.begin(cmd, &bi) == VK_SUCCESS)
            st = hk_stream_wrap(ctx, cmd, &s);
    }
    if (st == HK_OK) /* q rotated in place, then attended */
        st = hk_rope(ctx, s, &rd, qv, kv, vv, pos, (hk_view){NULL, 0}, qv, kc, vc);
    if (st == HK_OK)
        st = hk_sdpa_blk(ctx, s, &sd, qv, kc, vc, out_view(&o), ws, count);
    hk_check_status("replay: record rope + sdpa once", st, HK_OK, NULL);
    if (st == HK_OK && vk.end(cmd) != VK_SUCCESS)
        st = HK_ERROR_VULKAN;

    uint8_t *k_model = malloc(cache.k_bytes), *v_model = malloc(cache.v_bytes);
    memcpy(k_model, cache.k, cache.k_bytes);
    memcpy(v_model, cache.v, cache.v_bytes);
    uint8_t *k_image = malloc(cache.k_bytes), *v_image = malloc(cache.v_bytes);
    for (uint32_t t = 0; t < TOKENS && st == HK_OK; t++) {
        uint32_t p = FIRST + t, n = p + 1;
        float q[8 * 64], k[2 * 64], v[2 * 64], q_ref[8 * 64], k_ref[2 * 64], q_got[8 * 64];
        hk_rng_fill(&rng, q, H * D, -2.0f, 2.0f);
        hk_rng_fill(&rng, k, HKV * D, -1.0f, 1.0f);
        hk_rng_fill(&rng, v, HKV * D, -1.0f, 1.0f);
        memcpy(q_ref, q, sizeof q);
        memcpy(k_ref, k, sizeof k);
        hk_ref_rope(q_ref, &p, 1, H, D, D, 1, 1e6f, 1.0f, NULL);
        hk_ref_rope(k_ref, &p, 1, HKV, D, D, 1, 1e6f, 1.0f, NULL);
        out_poison(&o);
        if (hk_buffer_upload(io, qv.offset, q, sizeof q) != HK_OK || hk_buffer_upload(io, kv.offset, k, sizeof k) ||
            hk_buffer_upload(io, vv.offset, v, sizeof v) || hk_buffer_upload(io, pos.offset, &p, 4) ||
            hk_buffer_upload(io, count.offset, &n, 4)) {
            hk_check(0, "replay: upload", "%s", hk_last_error());
            break;
        }
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        if (vk.submit(queue, 1, &si, VK_NULL_HANDLE) != VK_SUCCESS || vk.wait_idle(queue) != VK_SUCCESS) {
            hk_check(0, "replay: submit", NULL);
            break;
        }
        char name[96];
        snprintf(name, sizeof name, "replay token %u (position %u, %u keys)", t, p, n);
        /* rope: q rotated in place, the cache rows at p */
        hk_buffer_download(io, qv.offset, q_got, sizeof q_got);
        char label[160];
        snprintf(label, sizeof label, "%s: q rotated", name);
        hk_check_close(label, q_got, q_ref, H * D, GATE_ROPE);
        hk_buffer_download(kc.buffer, kc.offset, k_image, cache.k_bytes);
        hk_buffer_download(vc.buffer, vc.offset, v_image, cache.v_bytes);
        uint32_t bad = 0;
        double worst = 0.0;
        for (uint32_t h = 0; h < HKV; h++) {
            bad += row_mismatches(&cache, k_image, 0, h, p, k_ref + h * D, &worst);
            bad += row_mismatches(&cache, v_image, 1, h, p, v + h * D, &worst);
            uint64_t ko = kv_row_offset(&cache, 0, h, p), vo = kv_row_offset(&cache, 1, h, p);
            memcpy(k_model + ko, k_image + ko, D * 2);
            memcpy(v_model + vo, v_image + vo, D * 2);
        }
        snprintf(label, sizeof label, "%s: cache rows", name);
        hk_check(bad == 0 && memcmp(k_model, k_image, cache.k_bytes) == 0 &&
                     memcmp(v_model, v_image, cache.v_bytes) == 0,
                 label, "%u values off; rest of the cache unchanged: %d", bad,
                 memcmp(k_model, k_image, cache.k_bytes) == 0 && memcmp(v_model, v_image, cache.v_bytes) == 0);
        /* attention over the n keys the cache holds now, with the rotated q */
        float *kp, *vp, ref[8 * 64];
        kv_pack(&cache, k_image, v_image, n, &kp, &vp);
        hk_ref_sdpa(q_got, kp, vp, ref, 1, H, HKV, n, D, sd.scale, 0);
        snprintf(label, sizeof label, "%s: attention", name);
        hk_check_close(label, out_read(&o, label), ref, H * D, GATE_F32);
        free(kp);
        free(vp);
    }
    if (st != HK_OK)
        hk_check(0, "replay", "%s", hk_last_error());
    hk_stream_destroy(s);
    if (pool)
        vk.destroy_pool(device, pool, NULL);
    free(k_model);
    free(v_model);
    free(k_image);
    free(v_image);
    out_destroy(&o);
    hk_buffer_destroy(io);
    hk_buffer_destroy(ws.buffer);
    hk_buffer_destroy(kc.buffer);
    hk_buffer_destroy(vc.buffer);
    kv_destroy(&cache);
}

/* ---- argument checks -------------------------------------------------------------------------- */

#define OUT_FLOATS (4 * 8 * 64)
static out_buffer err_out;

/* one failing call: its status, its message, and no write */
static void expect(const char *name, hk_status got, hk_status want, const char *needle)
{
    hk_check_status(name, got, want, needle);
    uint32_t bad = 0;
    const float *o = out_read(&err_out, name);
    for (size_t i = 0; i < err_out.n; i++) {
        uint32_t w;
        memcpy(&w, &o[i], 4);
        bad += w != HK_POISON_WORD;
    }
    char label[260];
    snprintf(label, sizeof label, "%s wrote nothing", name);
    hk_check(bad == 0, label, "%u words changed", bad);
    out_poison(&err_out);
}

static void test_errors(void)
{
    const uint32_t H = 8, HKV = 2, D = 64, CAP = 32;
    kv_cache cache;
    kv_create(&cache, HK_TYPE_F16, CAP, HKV, D, 0, 0);
    hk_rng rng = {5};
    float q[4 * 8 * 64], row[64];
    hk_rng_fill(&rng, q, 4 * H * D, -1, 1);
    for (uint32_t h = 0; h < HKV; h++)
        for (uint32_t j = 0; j < CAP; j++) {
            hk_rng_fill(&rng, row, D, -1, 1);
            kv_put(&cache, 0, h, j, row);
            kv_put(&cache, 1, h, j, row);
        }
    hk_view qv = input_flush(q, sizeof q, 0);
    hk_view kv = input_flush(cache.k, cache.k_bytes, 0), vv = input_flush(cache.v, cache.v_bytes, 0);
    err_out = out_create(OUT_FLOATS);
    hk_view ov = out_view(&err_out);
    hk_sdpa_desc good = {.n_q = 1, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .seq_k = 20, .scale = 0.125f,
                         .kv = cache.kv};
    uint64_t ws_bytes = 0;
    hk_sdpa_workspace_bytes(ctx, &good, &ws_bytes);
    hk_view ws = {hk_test_buffer(ctx, ws_bytes + 8, NULL), 0};
    hk_view counter = input_flush(&(uint32_t){20}, 4, 0);
    hk_view none = {NULL, 0};
    hk_check_status("sdpa: the valid call", hk_sdpa_blk(ctx, NULL, &good, qv, kv, vv, ov, ws, none), HK_OK, NULL);
    out_poison(&err_out);

    hk_sdpa_desc d = good;
#define SDPA_EXPECT(name, desc_change, call_ws, call_counter, status, needle)                                          \
    do {                                                                                                               \
        d = good;                                                                                                      \
        desc_change;                                                                                                   \
        expect(name, hk_sdpa_blk(ctx, NULL, &d, qv, kv, vv, ov, call_ws, call_counter), status, needle);               \
    } while (0)
    SDPA_EXPECT("sdpa: heads not divisible", d.n_heads = 7, ws, none, HK_ERROR_INVALID_ARGUMENT,
                "n_heads=7 is not a multiple of n_kv_heads=2");
    SDPA_EXPECT("sdpa: n_q zero", d.n_q = 0, ws, none, HK_ERROR_INVALID_ARGUMENT, "must all be positive");
    SDPA_EXPECT("sdpa: row stride smaller than a row", d.kv.k_row_stride = 64, ws, none, HK_ERROR_INVALID_ARGUMENT,
                "smaller than one row");
    SDPA_EXPECT("sdpa: heads overlap", d.kv.v_head_stride = 1024, ws, none, HK_ERROR_INVALID_ARGUMENT,
                "make rows of different heads overlap");
    SDPA_EXPECT("sdpa: stride off the type's alignment", d.kv.k_row_stride = 129, ws, none, HK_ERROR_INVALID_ARGUMENT,
                "must be multiples of 2");
    SDPA_EXPECT("sdpa: causal with more queries than keys", (d.causal = 1, d.n_q = 4, d.seq_k = 3), ws, none,
                HK_ERROR_INVALID_ARGUMENT, "needs seq_k >= n_q");
    SDPA_EXPECT("sdpa: causal with more queries than the capacity", (d.causal = 1, d.n_q = 40), ws, counter,
                HK_ERROR_INVALID_ARGUMENT, "kv.capacity=32");
    SDPA_EXPECT("sdpa: seq_k zero", d.seq_k = 0, ws, none, HK_ERROR_INVALID_ARGUMENT, "seq_k=0 must be in 1..kv.capacity=32");
    SDPA_EXPECT("sdpa: seq_k past the capacity", d.seq_k = 33, ws, none, HK_ERROR_INVALID_ARGUMENT, "seq_k=33");
    SDPA_EXPECT("sdpa: scale not finite", d.scale = NAN, ws, none, HK_ERROR_INVALID_ARGUMENT, "scale=nan is not finite");
    SDPA_EXPECT("sdpa: unsupported cache type", d.kv.type = HK_TYPE_Q4_K, ws, none, HK_ERROR_UNSUPPORTED,
                "kv.type=q4_k (2) is not a KV-cache type");
    SDPA_EXPECT("sdpa: head_dim off the Q8_0 block", (d.kv.type = HK_TYPE_Q8_0, d.head_dim = 48), ws, none,
                HK_ERROR_INVALID_ARGUMENT, "head_dim=48 is not a positive multiple of 32");
    SDPA_EXPECT("sdpa: head_dim too large", d.head_dim = 272, ws, none, HK_ERROR_INVALID_ARGUMENT, "up to 256");
    SDPA_EXPECT("sdpa: head_dim zero", d.head_dim = 0, ws, none, HK_ERROR_INVALID_ARGUMENT, "head_dim=0");
    SDPA_EXPECT("sdpa: capacity past the limit", (d.kv.capacity = 3000000, d.kv.k_head_stride = d.kv.v_head_stride = 128ull * 3000000),
                ws, none, HK_ERROR_INVALID_ARGUMENT, "kv.capacity=3000000 is more than 2097152 rows");
    SDPA_EXPECT("sdpa: capacity zero", d.kv.capacity = 0, ws, none, HK_ERROR_INVALID_ARGUMENT, "kv.capacity is 0");
    SDPA_EXPECT("sdpa: k view shorter than the cache",
                (d.kv.capacity = 33, d.kv.k_head_stride = d.kv.v_head_stride = 33 * 128), ws, none,
                HK_ERROR_INVALID_ARGUMENT, "k_cache needs");
    if (ws_bytes) {
        SDPA_EXPECT("sdpa: workspace NULL", (void)0, none, none, HK_ERROR_INVALID_ARGUMENT,
                    "workspace is NULL but this shape needs");
        SDPA_EXPECT("sdpa: workspace too small", (void)0, ((hk_view){ws.buffer, 12}), none, HK_ERROR_INVALID_ARGUMENT,
                    "workspace needs");
    }
    SDPA_EXPECT("sdpa: counter misaligned", (void)0, ws, ((hk_view){counter.buffer, 2}), HK_ERROR_INVALID_ARGUMENT,
                "seq_k_counter.offset=2 is not a multiple of 4");
    SDPA_EXPECT("sdpa: counter past its buffer", (void)0, ws, ((hk_view){counter.buffer, 4}),
                HK_ERROR_INVALID_ARGUMENT, "seq_k_counter needs 4 bytes at offset 4");
    expect("sdpa: desc NULL", hk_sdpa_blk(ctx, NULL, NULL, qv, kv, vv, ov, ws, none), HK_ERROR_INVALID_ARGUMENT,
           "desc is NULL");
    expect("sdpa: context NULL", hk_sdpa_blk(NULL, NULL, &good, qv, kv, vv, ov, ws, none), HK_ERROR_INVALID_ARGUMENT,
           "context is NULL");
    expect("sdpa: out overlaps q", hk_sdpa_blk(ctx, NULL, &good, ov, kv, vv, ov, ws, none), HK_ERROR_INVALID_ARGUMENT,
           "output out overlaps q");
    expect("sdpa: q misaligned", hk_sdpa_blk(ctx, NULL, &good, (hk_view){qv.buffer, 2}, kv, vv, ov, ws, none),
           HK_ERROR_INVALID_ARGUMENT, "q.offset=2 is not a multiple of 4");
    uint64_t bytes = 7;
    hk_check_status("sdpa workspace: desc NULL", hk_sdpa_workspace_bytes(ctx, NULL, &bytes), HK_ERROR_INVALID_ARGUMENT,
                    "desc is NULL");
    hk_check(bytes == 0, "sdpa workspace: failure gives 0", NULL);
    hk_check_status("sdpa workspace: out NULL", hk_sdpa_workspace_bytes(ctx, &good, NULL), HK_ERROR_INVALID_ARGUMENT,
                    "out_bytes is NULL");

    /* hk_rope: q [1, 8, 64] from q, k and v [1, 2, 64] from the same buffer (after it) */
    hk_buffer *in = hk_test_buffer(ctx, 8192, q);
    hk_view rq = {in, 0}, rk = {in, 2048}, rv = {in, 2560}, rpos = {in, 3072}, rff = {in, 3200};
    uint32_t p0 = 3;
    hk_buffer_upload(in, rpos.offset, &p0, 4);
    hk_rope_desc rg = {.n_tokens = 1, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .neox = 1, .theta_base = 1e4f,
                       .freq_scale = 1.0f, .kv = cache.kv};
    hk_check_status("rope: the valid call", hk_rope(ctx, NULL, &rg, rq, rk, rv, rpos, rff, ov, kv, vv), HK_OK, NULL);
    out_poison(&err_out);
    hk_rope_desc r = rg;
#define ROPE_EXPECT(name, desc_change, args, status, needle)                                                           \
    do {                                                                                                               \
        r = rg;                                                                                                        \
        desc_change;                                                                                                   \
        expect(name, hk_rope args, status, needle);                                                                    \
    } while (0)
    ROPE_EXPECT("rope: rot_dim odd", r.rot_dim = 33, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "rot_dim=33 is not even and at most head_dim=64");
    ROPE_EXPECT("rope: rot_dim past head_dim", r.rot_dim = 66, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "rot_dim=66");
    ROPE_EXPECT("rope: theta not positive", r.theta_base = 0.0f, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "theta_base=0 is not a positive number");
    ROPE_EXPECT("rope: freq_scale NaN", r.freq_scale = NAN, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "freq_scale=nan");
    ROPE_EXPECT("rope: no tokens", r.n_tokens = 0, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "must all be positive");
    ROPE_EXPECT("rope: too many heads", r.n_heads = 70000, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "is more than 65535");
    ROPE_EXPECT("rope: unsupported cache type", r.kv.type = HK_TYPE_Q6_K,
                (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv), HK_ERROR_UNSUPPORTED, "not a KV-cache type");
    ROPE_EXPECT("rope: positions NULL", (void)0, (ctx, NULL, &r, rq, rk, rv, none, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "positions.buffer is NULL");
    ROPE_EXPECT("rope: factors misaligned", (void)0, (ctx, NULL, &r, rq, rk, rv, rpos, ((hk_view){in, 3202}), ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "freq_factors.offset=3202 is not a multiple of 4");
    ROPE_EXPECT("rope: q_out overlaps q", (void)0,
                (ctx, NULL, &r, ov, rk, rv, rpos, rff, (hk_view){err_out.buffer, (GUARD + 4) * 4}, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "overlaps");
    ROPE_EXPECT("rope: k_cache is v_cache", (void)0, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, kv),
                HK_ERROR_INVALID_ARGUMENT, "output k_cache overlaps v_cache");
    ROPE_EXPECT("rope: cache view too short",
                (r.kv.capacity = 33, r.kv.k_head_stride = r.kv.v_head_stride = 33 * 128), (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "k_cache needs");
    expect("rope: desc NULL", hk_rope(ctx, NULL, NULL, rq, rk, rv, rpos, rff, ov, kv, vv), HK_ERROR_INVALID_ARGUMENT,
           "desc is NULL");
    /* q_out exactly on k (same bytes when n_heads == n_kv_heads) is not "in place" */
    r = rg;
    r.n_heads = HKV;
    hk_check_status("rope: q_out exactly on k",
                    hk_rope(ctx, NULL, &r, rq, rk, rv, rpos, rff, (hk_view){in, rk.offset}, kv, vv),
                    HK_ERROR_INVALID_ARGUMENT, "output q_out overlaps k");
    /* the caches were written only by the two valid calls: rows other than 3 are untouched */
    uint8_t *k_image = malloc(cache.k_bytes);
    hk_buffer_download(kv.buffer, 0, k_image, cache.k_bytes);
    uint64_t row_bytes = D * 2;
    int same = 1;
    for (uint32_t h = 0; h < HKV; h++)
        for (uint32_t j = 0; j < CAP; j++)
            if (j != p0)
                same &= memcmp(k_image + kv_row_offset(&cache, 0, h, j), cache.k + kv_row_offset(&cache, 0, h, j),
                               row_bytes) == 0;
    hk_check(same, "rope: failed calls wrote no cache row", NULL);
    free(k_image);
    hk_buffer_destroy(in);
    out_destroy(&err_out);
    hk_buffer_destroy(qv.buffer);
    hk_buffer_destroy(kv.buffer);
    hk_buffer_destroy(vv.buffer);
    hk_buffer_destroy(ws.buffer);
    hk_buffer_destroy(counter.buffer);
    kv_destroy(&cache);
}

int main(void)
{
    ctx = hk_test_context();
    uint64_t seed = 100;
    for (size_t i = 0; i < sizeof sdpa_cases / sizeof sdpa_cases[0]; i++)
        test_sdpa(&sdpa_cases[i], ++seed);
    for (size_t i = 0; i < sizeof rope_cases / sizeof rope_cases[0]; i++)
        test_rope(&rope_cases[i], ++seed);
    test_replay();
    test_errors();
    return hk_test_finish(ctx);
}
