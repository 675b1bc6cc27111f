/* Flash attention for prefill (hk_sdpa_blk with n_q > 1) against hk_ref_sdpa: seeded inputs, a
 * padded KV cache whose unused rows (and the bytes between rows) are NaN, head-major and
 * token-major layouts, aligned and unaligned strides, K/V views flush against their buffer's end,
 * seq_k from a device counter (clamped), poisoned outputs with guard words, a poisoned workspace.
 *
 * The matrix-core arm runs on the default context where the device has KHR cooperative matrix
 * (f16 16x16x16 -> f32), gated at 5e-3 (Q*scale, K, V and P rounded to f16); the portable twin
 * on a context without HK_FEATURE_COOPMAT_KHR (and everywhere else, lavapipe included), gated at
 * 1e-4 (f32 throughout).
 *
 * Each case is (1) flash_prepare: host inputs and the reference, (2) flash_record: the kernel
 * recorded from device views, (3) flash_compare; flash_run ties them together. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* f16 inputs on the matrix cores: Q*scale, K, V and P each carry up to 2^-11 relative rounding */
#define GATE_F16_COOPMAT 5e-3
#define GUARD 16

/* ---- bench shapes (hk-bench): the targets, llama.cpp's Vulkan flash attention
 * (coopmat2) on the same H200 in brackets. Useful FLOPs: flash_useful_flops. ---- */
typedef struct flash_bench_shape {
    uint32_t n_q, seq_k, n_heads, n_kv_heads, head_dim;
    int causal;
    double llama_ms;
} flash_bench_shape;
static const flash_bench_shape flash_bench_shapes[] = {
    {512, 512, 32, 8, 128, 1, 0.053},   /* 40 TFLOP/s -> goal >= 60 */
    {512, 4096, 32, 8, 128, 1, 0.196},  /* 164 TFLOP/s -> goal >= 200 */
    {2048, 2048, 32, 8, 128, 1, 0.283}, /* 121 TFLOP/s -> goal >= 200 */
};

/* 4 * head_dim * n_heads per (query, key) pair a query sees: 2 * d for q.k and 2 * d for p.v. */
static double flash_useful_flops(uint32_t n_q, uint32_t seq_k, uint32_t n_heads, uint32_t head_dim, int causal)
{
    double pairs = causal ? (double)n_q * (seq_k - n_q) + (double)n_q * (n_q + 1) / 2 : (double)n_q * seq_k;
    return 4.0 * head_dim * n_heads * pairs;
}

/* ---- one case ---- */
typedef struct flash_case {
    uint32_t n_q, n_heads, n_kv_heads, head_dim;
    uint32_t seq_k;    /* keys attended (after the counter's clamp) */
    uint32_t capacity; /* cache rows; rows seq_k .. capacity-1 are NaN */
    int causal;
    hk_type type;
    int token_major;    /* [row][kv_head][d], else [kv_head][row][d] */
    uint32_t row_pad;   /* bytes between rows (NaN); a multiple of the type's alignment */
    uint32_t kv_offset; /* byte offset of the K and V views */
    int flush;          /* K and V views end exactly at their buffer's end */
    int counter;        /* seq_k from a device counter holding counter_value */
    uint32_t counter_value;
    uint64_t seed;
} flash_case;

typedef struct flash_data {
    flash_case c;
    hk_sdpa_desc desc;
    float *q;               /* [n_q, n_heads, d] */
    uint8_t *k, *v;         /* the caches, desc.kv's layout */
    uint64_t k_bytes, v_bytes;
    float *ref;             /* [n_q, n_heads, d] */
    uint8_t *cls;           /* with non-finite inputs: the class of each output (hk_test_sdpa_classes) */
    size_t n_out;
} flash_data;

static void put_row(uint8_t *dst, hk_type type, const float *x, uint32_t d)
{
    if (type == HK_TYPE_F32) {
        memcpy(dst, x, d * sizeof(float));
    } else if (type == HK_TYPE_F16) {
        for (uint32_t i = 0; i < d; i++) {
            uint16_t h = hk_f32_to_f16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
    } else {
        hk_block_q8_0 blocks[8];
        hk_quant_row_q8_0(x, blocks, d);
        memcpy(dst, blocks, d / 32 * sizeof(hk_block_q8_0));
    }
}

/* The values a row holds, as the kernel must see them. */
static void get_row(const uint8_t *src, hk_type type, float *x, uint32_t d)
{
    if (type == HK_TYPE_F32) {
        memcpy(x, src, d * sizeof(float));
    } else if (type == HK_TYPE_F16) {
        for (uint32_t i = 0; i < d; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            x[i] = hk_f16_to_f32(h);
        }
    } else {
        hk_block_q8_0 blocks[8];
        memcpy(blocks, src, d / 32 * sizeof(hk_block_q8_0));
        hk_dequant_row_q8_0(blocks, x, d);
    }
}

/* (1) Seeded inputs in the case's cache layout and the reference output; with nonfinite, NaN and
 * inf planted in q, K and V (hk_test_sdpa_plant) and the class of each output. */
static void flash_prepare(const flash_case *c, int nonfinite, flash_data *fd)
{
    memset(fd, 0, sizeof *fd);
    fd->c = *c;
    hk_rng rng = {c->seed};
    uint32_t d = c->head_dim, nkv = c->n_kv_heads;
    uint64_t row = hk_type_bytes(c->type, d), stride = row + c->row_pad;
    hk_kv_layout kv = {c->type, c->capacity, 0, 0, 0, 0};
    if (c->token_major) {
        kv.k_head_stride = kv.v_head_stride = stride;
        kv.k_row_stride = kv.v_row_stride = stride * nkv;
    } else {
        kv.k_row_stride = kv.v_row_stride = stride;
        kv.k_head_stride = kv.v_head_stride = stride * c->capacity;
    }
    fd->desc = (hk_sdpa_desc){.n_q = c->n_q,
                              .n_heads = c->n_heads,
                              .n_kv_heads = nkv,
                              .head_dim = d,
                              .seq_k = c->counter ? 0 : c->seq_k, /* ignored with a counter */
                              .scale = 1.0f / sqrtf((float)d),
                              .causal = c->causal,
                              .kv = kv};
    fd->k_bytes = fd->v_bytes = (uint64_t)(nkv - 1) * kv.k_head_stride + (uint64_t)(c->capacity - 1) * kv.k_row_stride + row;
    fd->n_out = (size_t)c->n_q * c->n_heads * d;
    fd->q = malloc(fd->n_out * sizeof(float));
    fd->ref = malloc(fd->n_out * sizeof(float));
    fd->k = malloc(fd->k_bytes);
    fd->v = malloc(fd->v_bytes);
    /* every byte NaN (f32 and f16 all-ones are NaN; so is a Q8_0 block's d), then the rows in use */
    memset(fd->k, 0xFF, fd->k_bytes);
    memset(fd->v, 0xFF, fd->v_bytes);
    /* logits of a few units (peaked softmax), a few outlier keys */
    hk_rng_fill(&rng, fd->q, fd->n_out, -2.0f, 2.0f);
    for (size_t r = 0; nonfinite && r < (size_t)c->n_q * c->n_heads; r++)
        hk_test_sdpa_plant(&fd->desc, c->seq_k, 'q', (uint32_t)(r / c->n_heads), (uint32_t)(r % c->n_heads),
                           fd->q + r * d);
    size_t packed = (size_t)nkv * c->seq_k * d;
    float *kp = malloc(packed * sizeof(float)), *vp = malloc(packed * sizeof(float)), x[256];
    for (uint32_t h = 0; h < nkv; h++)
        for (uint32_t j = 0; j < c->seq_k; j++) {
            uint64_t at = h * kv.k_head_stride + (uint64_t)j * kv.k_row_stride;
            hk_rng_fill(&rng, x, d, -2.0f, 2.0f);
            if (j % 37 == 5)
                for (uint32_t i = 0; i < d; i++)
                    x[i] *= 3.0f;
            if (nonfinite)
                hk_test_sdpa_plant(&fd->desc, c->seq_k, 'k', h, j, x);
            put_row(fd->k + at, c->type, x, d);
            get_row(fd->k + at, c->type, kp + ((size_t)h * c->seq_k + j) * d, d);
            hk_rng_fill(&rng, x, d, -1.0f, 1.0f);
            if (nonfinite)
                hk_test_sdpa_plant(&fd->desc, c->seq_k, 'v', h, j, x);
            put_row(fd->v + at, c->type, x, d);
            get_row(fd->v + at, c->type, vp + ((size_t)h * c->seq_k + j) * d, d);
        }
    hk_ref_sdpa(fd->q, kp, vp, fd->ref, c->n_q, c->n_heads, nkv, c->seq_k, d, fd->desc.scale, c->causal);
    if (nonfinite) {
        fd->cls = malloc(fd->n_out);
        hk_test_sdpa_classes(fd->q, kp, vp, fd->cls, c->n_q, c->n_heads, nkv, c->seq_k, d, fd->desc.scale, c->causal);
    }
    free(kp);
    free(vp);
}

static void flash_free(flash_data *fd)
{
    free(fd->q);
    free(fd->ref);
    free(fd->cls);
    free(fd->k);
    free(fd->v);
}

/* (2) The kernel, recorded from the device views of the case's tensors. */
static hk_status flash_record(hk_context *ctx, hk_stream *stream, const flash_data *fd, hk_view q, hk_view k,
                              hk_view v, hk_view out, hk_view workspace, hk_view counter)
{
    return hk_sdpa_blk(ctx, stream, &fd->desc, q, k, v, out, workspace, counter);
}

/* (3) */
static int flash_compare(const char *name, const float *got, const flash_data *fd, double gate)
{
    if (fd->cls)
        return hk_check_sdpa_classes(name, got, fd->ref, fd->cls, fd->n_out, gate);
    return hk_check_close(name, got, fd->ref, fd->n_out, gate);
}

/* ---- the harness ---- */
static hk_buffer *buffer_with(hk_context *ctx, uint64_t size, uint64_t at, const void *data, uint64_t bytes)
{
    hk_buffer *b = hk_test_buffer(ctx, size, NULL);
    if (hk_buffer_upload(b, at, data, bytes) != HK_OK)
        hk_check(0, "upload", "%s", hk_last_error());
    return b;
}

static const char *arm_name;
static double arm_gate;
static double worst_rel; /* largest scale_rel of the context's cases, to see that the arm ran */

static void flash_run(hk_context *ctx, const flash_case *c, int nonfinite)
{
    flash_data fd;
    flash_prepare(c, nonfinite, &fd);
    char name[200];
    snprintf(name, sizeof name, "flash %s%s q%u h%u/%u d%u k%u/%u%s %s%s%s%s", nonfinite ? "non-finite inputs, " : "",
             hk_type_name(c->type), c->n_q,
             c->n_heads, c->n_kv_heads, c->head_dim, c->seq_k, c->capacity, c->causal ? " causal" : "",
             c->token_major ? "token-major" : "head-major", c->row_pad ? " padded-rows" : "",
             c->flush ? " flush" : "", c->counter ? " counter" : "");
    uint64_t koff = c->kv_offset, qoff = 4;
    hk_buffer *qb = buffer_with(ctx, qoff + fd.n_out * 4 + 8, qoff, fd.q, fd.n_out * 4);
    uint64_t tail = c->flush ? 0 : 64;
    hk_buffer *kb = buffer_with(ctx, koff + fd.k_bytes + tail, koff, fd.k, fd.k_bytes);
    hk_buffer *vb = buffer_with(ctx, koff + fd.v_bytes + tail, koff, fd.v, fd.v_bytes);
    /* output between poisoned guards */
    size_t out_words = fd.n_out + 2 * GUARD;
    float *host = malloc(out_words * sizeof(float));
    hk_poison(host, out_words);
    hk_buffer *ob = hk_test_buffer(ctx, out_words * 4, host);
    uint64_t ws_bytes = 0;
    hk_status st = hk_sdpa_workspace_bytes(ctx, &fd.desc, &ws_bytes);
    hk_buffer *wb = NULL, *cb = NULL;
    hk_view ws = {NULL, 0}, counter = {NULL, 0};
    if (st == HK_OK && ws_bytes) { /* poisoned: a chunk read before it is written shows */
        wb = hk_test_buffer(ctx, ws_bytes + 16, NULL);
        st = hk_buffer_fill(wb, 0, (ws_bytes + 16) / 4 * 4, HK_POISON_WORD);
        ws = (hk_view){wb, 16};
        if (ws_bytes + 16 > hk_buffer_size(wb))
            hk_check(0, name, "workspace buffer too small");
    }
    if (c->counter) {
        uint32_t words[2] = {0xDEADBEEFu, c->counter_value};
        cb = hk_test_buffer(ctx, sizeof words, words);
        counter = (hk_view){cb, 4};
    }
    if (st == HK_OK)
        st = flash_record(ctx, NULL, &fd, (hk_view){qb, qoff}, (hk_view){kb, koff}, (hk_view){vb, koff},
                          (hk_view){ob, GUARD * 4}, ws, counter);
    if (st != HK_OK) {
        hk_check(0, name, "%s", hk_last_error());
    } else if (hk_buffer_download(ob, 0, host, out_words * 4) != HK_OK) {
        hk_check(0, name, "download: %s", hk_last_error());
    } else {
        uint32_t bad = 0;
        for (size_t i = 0; i < GUARD; i++) {
            uint32_t a, b;
            memcpy(&a, &host[i], 4);
            memcpy(&b, &host[GUARD + fd.n_out + i], 4);
            bad += (a != HK_POISON_WORD) + (b != HK_POISON_WORD);
        }
        char label[240];
        snprintf(label, sizeof label, "%s guards", name);
        hk_check(bad == 0, label, "%u words written outside the output", bad);
        flash_compare(name, host + GUARD, &fd, arm_gate);
        double rel = nonfinite ? 0.0 : hk_scale_rel(host + GUARD, fd.ref, fd.n_out);
        if (rel > worst_rel)
            worst_rel = rel;
    }
    free(host);
    hk_buffer_destroy(qb);
    hk_buffer_destroy(kb);
    hk_buffer_destroy(vb);
    hk_buffer_destroy(ob);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(cb);
    flash_free(&fd);
}

/* Whether hk_sdpa_blk runs prefill on the matrix cores on this context: the KHR cooperative
 * matrix variants were built, and the device lists 16x16x16 f16 x f16 -> f32 at subgroup scope
 * with the features src/kernels/flash.c asks for (every head_dim fits 48 KiB of shared memory). */
static int expect_coopmat(hk_context *ctx)
{
#if HK_TEST_HAVE_COOPMAT
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    int listed = 0;
    for (uint32_t i = 0; i < caps.coopmat_khr_count && i < HK_MAX_COOPMAT_PROPS; i++) {
        const hk_coopmat_props *p = &caps.coopmat_khr_props[i];
        listed |= p->m == 16 && p->n == 16 && p->k == 16 && p->a_type == 0 && p->b_type == 0 && p->c_type == 1 &&
                  p->result_type == 1 && p->scope == 3;
    }
    uint32_t sg = caps.subgroup_size;
    return caps.coopmat_khr && listed && caps.subgroup_size_control && caps.float16 && sg >= 16 && sg <= 128 &&
           !(sg & (sg - 1)) && caps.shared_memory_bytes >= 48 * 1024;
#else
    (void)ctx;
    return 0;
#endif
}

/* The cases: every head dim the kernel serves (64, 80, 96, 128, 160, 256), GQA 1, 4 and 8, causal
 * or not, both layouts, f16 / f32 / Q8_0 caches, aligned (vector loads) and unaligned rows and
 * views, NaN rows past seq_k, flush views, tails everywhere (n_q x group rows and seq_k off every
 * tile size), key chunks split over workgroups and a seq_k counter. Few distinct pipelines:
 * lavapipe compiles each in seconds. Fields: n_q, n_heads, n_kv_heads, head_dim, seq_k,
 * capacity, causal, type, token_major, row_pad, kv_offset, flush, counter, counter_value. */
#define F16 HK_TYPE_F16
#define F32 HK_TYPE_F32
#define Q80 HK_TYPE_Q8_0
static const flash_case cases[] = {
    {17, 8, 2, 128, 17, 40, 1, F16, 0, 0, 16, 0, 0, 0, 0},  /* square causal, GQA 4, a tail of rows */
    {17, 8, 2, 128, 17, 40, 1, F32, 0, 0, 16, 0, 0, 0, 0},
    {17, 8, 2, 128, 17, 40, 1, Q80, 0, 0, 16, 0, 0, 0, 0},
    {64, 4, 4, 128, 100, 100, 0, F16, 1, 0, 16, 1, 0, 0, 0},  /* GQA 1, token-major, flush */
    {100, 8, 1, 64, 131, 160, 1, F16, 1, 0, 4, 1, 0, 0, 0},  /* GQA 8: 800 rows; unaligned views */
    {100, 8, 1, 64, 131, 160, 1, Q80, 1, 0, 4, 1, 0, 0, 0},
    {2, 4, 1, 64, 1, 9, 0, F32, 0, 4, 4, 0, 0, 0, 0},        /* one key; f32 rows off 16 bytes */
    {2, 2, 2, 64, 2, 2, 1, F16, 0, 0, 16, 1, 0, 0, 0},       /* the smallest causal prefill */
    {33, 8, 2, 256, 70, 96, 1, F16, 0, 0, 16, 0, 0, 0, 0},   /* head_dim 256 */
    {9, 4, 2, 80, 77, 80, 0, F16, 1, 2, 2, 1, 0, 0, 0},      /* head_dim 80, f16 rows off 16 bytes */
    {23, 6, 2, 96, 23, 64, 1, Q80, 0, 0, 16, 0, 0, 0, 0},    /* head_dim 96 */
    {5, 2, 1, 160, 50, 51, 1, F32, 1, 0, 16, 1, 0, 0, 0},    /* head_dim 160 */
    {40, 16, 2, 128, 333, 340, 1, F16, 1, 4, 8, 1, 0, 0, 0}, /* GQA 8, 11 key tiles */
    /* long caches: key chunks split over workgroups (for occupancy, and past the loop bound of
     * one workgroup), merged through the workspace */
    {3, 8, 2, 128, 1000, 1100, 1, F16, 0, 0, 16, 1, 0, 0, 0},
    {4, 4, 1, 64, 2300, 2500, 0, F32, 1, 0, 16, 0, 0, 0, 0},
    /* seq_k from the device: a count past the capacity is clamped to it, a count of 0 to n_q
     * (causal); with split chunks, some of them empty */
    {6, 4, 2, 64, 48, 48, 1, F16, 0, 0, 16, 1, 1, 1000, 0},
    {6, 4, 2, 64, 6, 48, 1, F16, 1, 0, 16, 0, 1, 0, 0},
    {7, 4, 1, 128, 700, 2100, 1, F16, 0, 0, 16, 0, 1, 700, 0},
};
/* The emulated matrix-core arm (f16 caches), one pipeline per tile "subgroups,mr,bc,bkv,qreg,
 * prefetch" (HK_FLASH_TILE's format), each within lavapipe's 32 KiB of shared memory */
static const flash_case emulated_128[] = { /* "2,1,32,32,1,1": 2 subgroups of 16 rows, Q in registers, prefetch */
    {17, 8, 2, 128, 17, 40, 1, F16, 0, 0, 16, 0, 0, 0, 0},
    {40, 16, 2, 128, 333, 340, 1, F16, 1, 0, 16, 1, 0, 0, 0},
    {3, 8, 2, 128, 1000, 1100, 1, F16, 0, 0, 16, 1, 0, 0, 0},
    {7, 4, 1, 128, 700, 2100, 1, F16, 0, 0, 16, 0, 1, 700, 0},
};
static const flash_case emulated_mr2[] = { /* "1,2,16,32,0,0": 32 rows per subgroup (one lane per row), Q in
                                            * shared memory, two chunks per tile, no prefetch */
    {17, 8, 2, 128, 17, 40, 1, F16, 0, 0, 16, 0, 0, 0, 0},
    {40, 16, 2, 128, 333, 340, 1, F16, 1, 0, 16, 1, 0, 0, 0},
    {6, 4, 2, 128, 48, 48, 1, F16, 0, 0, 16, 1, 1, 1000, 0},
};
static const flash_case emulated_80[] = { /* "2,1,16,32,1,1": head_dim 80, 5 column tiles of O, 1 per store */
    {9, 4, 2, 80, 77, 80, 0, F16, 1, 2, 2, 1, 0, 0, 0},
    {19, 8, 2, 80, 50, 64, 1, F16, 0, 2, 2, 0, 0, 0, 0},
    {2, 2, 2, 80, 2, 2, 1, F16, 0, 2, 2, 1, 1, 0, 0},
};
static const flash_case emulated_64[] = { /* "4,1,16,32,1,1": 4 subgroups, 2 chunks per tile; and
                                          * "4,1,32,32,1,1", the GPU's 4-subgroup tile (its 8-subgroup
                                          * default, emulated, passes lavapipe's 32 KiB: the matrix
                                          * cores run it among tuning_tiles) */
    {100, 8, 1, 64, 131, 160, 1, F16, 1, 0, 4, 1, 0, 0, 0},
    {64, 4, 4, 64, 100, 100, 0, F16, 1, 0, 16, 1, 0, 0, 0},
};
/* Non-finite inputs (hk_test_sdpa_plant, 4 kv heads): causal with the queries in several row
 * tiles, each type; not causal, token-major; key chunks split over workgroups and merged */
static const flash_case nonfinite_cases[] = {
    {17, 8, 4, 64, 40, 48, 1, F16, 0, 0, 16, 0, 0, 0, 0},
    /* the last query's rows 8 rows into a block of 16: rows 8 apart see different keys */
    {13, 8, 4, 64, 40, 48, 1, F16, 0, 0, 16, 0, 0, 0, 0},
    {17, 8, 4, 64, 40, 48, 1, F32, 0, 0, 16, 0, 0, 0, 0},
    {17, 8, 4, 64, 40, 48, 1, Q80, 0, 0, 16, 0, 0, 0, 0},
    {6, 8, 4, 64, 30, 40, 0, F16, 1, 0, 16, 1, 0, 0, 0},
    {3, 8, 4, 64, 1000, 1100, 1, F32, 0, 0, 16, 0, 0, 0, 0},
};
/* One workgroup walking the most keys it may (the loop bound lavapipe enforces), no split for
 * occupancy (HK_FLASH_GROUPS=1): 8192 keys on the matrix-core arm (emulated), 2048 on the twin. */
static const flash_case longest_coop = {2, 1, 1, 128, 8192, 8192, 0, F16, 0, 0, 16, 0, 0, 0, 0};
static const flash_case longest_twin = {2, 1, 1, 128, 2048, 2048, 0, F32, 0, 0, 16, 0, 0, 0, 0};
/* The tiles hk-bench compares on a GPU with matrix cores (HK_FLASH_TILE; docs/perf.md): each runs
 * the cases with head_dim up to 128 there. */
static const char *const tuning_tiles[] = {
    "4,1,32,32,1,1", "4,1,32,64,1,1", "4,1,32,64,1,0", "4,1,16,64,1,1",
    "8,1,32,32,1,1", "2,1,32,32,1,1", "2,2,32,32,0,0",
};
#undef F16
#undef F32
#undef Q80

static void run_cases_up_to(hk_context *ctx, const flash_case *list, size_t count, uint32_t max_head_dim)
{
    for (size_t i = 0; i < count; i++) {
        flash_case c = list[i];
        c.seed = 100 + i;
        if (c.head_dim <= max_head_dim)
            flash_run(ctx, &c, 0);
    }
}

static void run_cases(hk_context *ctx, const flash_case *list, size_t count)
{
    run_cases_up_to(ctx, list, count, 256);
}

/* The cases of nonfinite_cases on this arm (f16 only: the emulated arm) */
static void run_nonfinite(hk_context *ctx, int f16_only)
{
    for (size_t i = 0; i < sizeof nonfinite_cases / sizeof nonfinite_cases[0]; i++) {
        flash_case c = nonfinite_cases[i];
        c.seed = 300 + i;
        if (!f16_only || c.type == HK_TYPE_F16)
            flash_run(ctx, &c, 1);
    }
}

/* The key split's limit (include/hkernel.h, prefill): few rows, so that the split for occupancy
 * asks for more chunks than a call may have (64); a cache of 64 loop bounds (max_keys each:
 * 131072 keys on the twin, 524288 on the matrix cores) still runs flash attention, in 64 chunks
 * (the workspace says how many), and one key more goes to flash-decoding. With run, the call at
 * the limit against the reference. */
static void test_split_limit(hk_context *ctx, uint32_t max_keys, const char *arm, int run)
{
    const uint32_t n_q = 3, n_heads = 4, d = 64, capacity = 64 * max_keys;
    uint64_t row = hk_type_bytes(HK_TYPE_F16, d), ws = 0, chunks = 64ull * n_q * n_heads * (d + 2) * 4;
    hk_sdpa_desc desc = {.n_q = n_q, .n_heads = n_heads, .n_kv_heads = 1, .head_dim = d, .seq_k = capacity,
                         .scale = 0.125f, .causal = 1,
                         .kv = {HK_TYPE_F16, capacity, row, row * capacity, row, row * capacity}};
    const char *path = hk_sdpa_path(ctx, &desc);
    hk_sdpa_workspace_bytes(ctx, &desc, &ws);
    char name[160];
    snprintf(name, sizeof name, "flash: %u keys (64 x %u) run on %s in 64 key chunks", capacity, max_keys, arm);
    hk_check(path && !strcmp(path, arm) && ws == chunks, name, "%s, workspace %llu bytes (64 chunks: %llu)",
             path ? path : "refused", (unsigned long long)ws, (unsigned long long)chunks);
    desc.seq_k = desc.kv.capacity = capacity + 1;
    desc.kv.k_head_stride = desc.kv.v_head_stride = row * (capacity + 1);
    path = hk_sdpa_path(ctx, &desc);
    snprintf(name, sizeof name, "flash: %u keys go to flash-decoding", capacity + 1);
    hk_check(path && !strcmp(path, "decode"), name, "%s", path ? path : "refused");
    if (run) {
        flash_case c = {n_q, n_heads, 1, d, capacity, capacity, 1, HK_TYPE_F16, 0, 0, 16, 0, 0, 0, 11};
        flash_run(ctx, &c, 0);
    }
}

/* The longest walk of one workgroup (see longest_coop) */
static void run_longest(hk_context *ctx, const flash_case *c)
{
    setenv("HK_FLASH_GROUPS", "1", 1);
    flash_case one = *c;
    one.seed = 7;
    flash_run(ctx, &one, 0);
    unsetenv("HK_FLASH_GROUPS");
}

/* Tuning variables that cannot run are refused by the call, never replaced silently. */
static void test_tuning_errors(hk_context *ctx, int coop)
{
    flash_case c = {17, 8, 2, 128, 17, 40, 1, HK_TYPE_F16, 0, 0, 16, 0, 0, 0, 3};
    flash_data fd;
    flash_prepare(&c, 0, &fd);
    hk_buffer *qb = hk_test_buffer(ctx, fd.n_out * 4, fd.q), *kb = hk_test_buffer(ctx, fd.k_bytes, fd.k);
    hk_buffer *vb = hk_test_buffer(ctx, fd.v_bytes, fd.v), *ob = hk_test_buffer(ctx, fd.n_out * 4, NULL);
    hk_view q = {qb, 0}, k = {kb, 0}, v = {vb, 0}, out = {ob, 0}, none = {NULL, 0};
    setenv("HK_FLASH_GROUPS", "many", 1);
    hk_check_status("flash: HK_FLASH_GROUPS not a count", hk_sdpa_blk(ctx, NULL, &fd.desc, q, k, v, out, none, none),
                    HK_ERROR_UNSUPPORTED, "HK_FLASH_GROUPS");
    unsetenv("HK_FLASH_GROUPS");
    const char *var = coop ? "HK_FLASH_TILE" : "HK_FLASH_EMULATE_COOPMAT";
    setenv(var, "4,1,32", 1);
    hk_check_status("flash: a malformed tile", hk_sdpa_blk(ctx, NULL, &fd.desc, q, k, v, out, none, none),
                    HK_ERROR_UNSUPPORTED, "subgroups,mr,bc,bkv,qreg,prefetch");
    setenv(var, "16,2,128,256,0,1", 1); /* 512 rows, 4 tiles of 256 keys: no device holds it */
    hk_check_status("flash: a tile the device cannot hold", hk_sdpa_blk(ctx, NULL, &fd.desc, q, k, v, out, none, none),
                    HK_ERROR_UNSUPPORTED, "cannot run here");
    setenv(var, "2,1,24,48,1,1", 1);
    hk_check_status("flash: chunks not a multiple of 16", hk_sdpa_blk(ctx, NULL, &fd.desc, q, k, v, out, none, none),
                    HK_ERROR_UNSUPPORTED, "multiple of 16");
    if (coop)
        unsetenv(var);
    else
        setenv(var, "1", 1);
    setenv("HK_FLASH_SOFTMAX", "bogus", 1);
    hk_check_status("flash: HK_FLASH_SOFTMAX neither registers nor shared",
                    hk_sdpa_blk(ctx, NULL, &fd.desc, q, k, v, out, none, none), HK_ERROR_UNSUPPORTED,
                    "HK_FLASH_SOFTMAX");
    unsetenv("HK_FLASH_SOFTMAX");
    setenv("HK_FLASH_ORDER", "lightest", 1);
    hk_check_status("flash: HK_FLASH_ORDER neither zigzag nor heaviest",
                    hk_sdpa_blk(ctx, NULL, &fd.desc, q, k, v, out, none, none), HK_ERROR_UNSUPPORTED,
                    "HK_FLASH_ORDER");
    unsetenv("HK_FLASH_ORDER");
    unsetenv(var);
    hk_buffer_destroy(qb);
    hk_buffer_destroy(kb);
    hk_buffer_destroy(vb);
    hk_buffer_destroy(ob);
    flash_free(&fd);
}

/* The workspace of split key chunks: sized from kv.capacity (never seq_k); a missing or short
 * workspace is refused and nothing is written. */
static void test_workspace_errors(hk_context *ctx)
{
    flash_case c = {3, 8, 2, 64, 900, 1100, 1, HK_TYPE_F16, 0, 0, 16, 0, 0, 0, 7};
    flash_data fd;
    flash_prepare(&c, 0, &fd);
    uint64_t ws = 0, ws_other = 0, ws_small = 0;
    hk_sdpa_desc other = fd.desc, small = fd.desc;
    other.seq_k = 17;
    small.kv.capacity = 40; /* one tile: no chunks */
    small.kv.k_head_stride = small.kv.v_head_stride = small.kv.k_row_stride * 40;
    hk_check_status("flash workspace bytes", hk_sdpa_workspace_bytes(ctx, &fd.desc, &ws), HK_OK, NULL);
    hk_check_status("flash workspace bytes, other seq_k", hk_sdpa_workspace_bytes(ctx, &other, &ws_other), HK_OK, NULL);
    hk_check_status("flash workspace bytes, one tile", hk_sdpa_workspace_bytes(ctx, &small, &ws_small), HK_OK, NULL);
    hk_check(ws > 0 && ws == ws_other && ws_small == 0, "flash workspace: chunks of a long cache, none for a short one",
             "%llu, %llu with another seq_k, %llu for 40 rows", (unsigned long long)ws, (unsigned long long)ws_other,
             (unsigned long long)ws_small);
    hk_buffer *qb = hk_test_buffer(ctx, fd.n_out * 4, fd.q), *kb = hk_test_buffer(ctx, fd.k_bytes, fd.k);
    hk_buffer *vb = hk_test_buffer(ctx, fd.v_bytes, fd.v), *ob = hk_test_buffer(ctx, fd.n_out * 4, NULL);
    hk_buffer *short_ws = hk_test_buffer(ctx, ws > 4 ? ws - 4 : 4, NULL);
    hk_buffer_fill(ob, 0, fd.n_out * 4, HK_POISON_WORD);
    hk_view q = {qb, 0}, k = {kb, 0}, v = {vb, 0}, out = {ob, 0}, none = {NULL, 0};
    hk_check_status("flash: split chunks without a workspace",
                    hk_sdpa_blk(ctx, NULL, &fd.desc, q, k, v, out, none, none), HK_ERROR_INVALID_ARGUMENT, "workspace");
    hk_check_status("flash: a workspace 4 bytes short",
                    hk_sdpa_blk(ctx, NULL, &fd.desc, q, k, v, out, (hk_view){short_ws, 0}, none),
                    HK_ERROR_INVALID_ARGUMENT, "workspace");
    float *host = malloc(fd.n_out * 4);
    uint32_t untouched = 0;
    if (hk_buffer_download(ob, 0, host, fd.n_out * 4) == HK_OK)
        for (size_t i = 0; i < fd.n_out; i++) {
            uint32_t w;
            memcpy(&w, &host[i], 4);
            untouched += w == HK_POISON_WORD;
        }
    hk_check(untouched == fd.n_out, "flash: refused calls write nothing", "%u of %zu words untouched", untouched,
             fd.n_out);
    free(host);
    hk_buffer_destroy(qb);
    hk_buffer_destroy(kb);
    hk_buffer_destroy(vb);
    hk_buffer_destroy(ob);
    hk_buffer_destroy(short_ws);
    flash_free(&fd);
}

int main(void)
{
    hk_context *ctx = hk_test_context();
    for (size_t i = 0; i < sizeof flash_bench_shapes / sizeof flash_bench_shapes[0]; i++) {
        const flash_bench_shape *b = &flash_bench_shapes[i];
        double flops = flash_useful_flops(b->n_q, b->seq_k, b->n_heads, b->head_dim, b->causal);
        printf("bench shape: q%u k%u h%u/%u d%u%s: %.3f GFLOP useful (llama.cpp-vk %.3f ms = %.0f TFLOP/s)\n", b->n_q,
               b->seq_k, b->n_heads, b->n_kv_heads, b->head_dim, b->causal ? " causal" : "", flops * 1e-9, b->llama_ms,
               flops / (b->llama_ms * 1e-3) * 1e-12);
    }
    int coop = expect_coopmat(ctx);
    arm_name = coop ? "matrix cores (KHR cooperative matrix)" : "portable twin";
    arm_gate = coop ? GATE_F16_COOPMAT : HK_GATE_F32;
    printf("-- default context: prefill runs on the %s, gate %.0e\n", arm_name, arm_gate);
    worst_rel = 0;
    run_cases(ctx, cases, sizeof cases / sizeof cases[0]);
    run_nonfinite(ctx, 0);
    test_split_limit(ctx, coop ? 8192 : 2048, coop ? "flash-coopmat" : "flash", 1);
    test_workspace_errors(ctx);
    test_tuning_errors(ctx, coop);
    if (coop) {
        /* f16 rounding shows: the matrix-core arm really ran (the f32 twin stays near 1e-7) */
        hk_check(worst_rel > 1e-5, "flash: the matrix-core arm ran", "largest scale_rel %.3e", worst_rel);
        run_longest(ctx, &longest_coop);
        for (size_t i = 0; i < sizeof tuning_tiles / sizeof tuning_tiles[0]; i++) {
            setenv("HK_FLASH_TILE", tuning_tiles[i], 1);
            printf("-- HK_FLASH_TILE=%s, gate %.0e\n", tuning_tiles[i], arm_gate);
            run_cases_up_to(ctx, cases, sizeof cases / sizeof cases[0], 128);
        }
        unsetenv("HK_FLASH_TILE");
        setenv("HK_FLASH_WORKGROUP_SYNC", "1", 1); /* the diagnostic mode */
        printf("-- HK_FLASH_WORKGROUP_SYNC=1, gate %.0e\n", arm_gate);
        run_cases_up_to(ctx, cases, sizeof cases / sizeof cases[0], 128);
        unsetenv("HK_FLASH_WORKGROUP_SYNC");
        setenv("HK_FLASH_SOFTMAX", "shared", 1); /* the softmax through shared memory */
        printf("-- HK_FLASH_SOFTMAX=shared, gate %.0e\n", arm_gate);
        run_cases_up_to(ctx, cases, sizeof cases / sizeof cases[0], 128);
        hk_caps caps;
        hk_context_caps(ctx, &caps);
        if (caps.vendor_id == 0x10DE) {
            /* NVIDIA's accumulators hold the quad layout: the probe must have found it, or these
             * calls are refused */
            setenv("HK_FLASH_SOFTMAX", "registers", 1);
            printf("-- HK_FLASH_SOFTMAX=registers, gate %.0e\n", arm_gate);
            run_cases_up_to(ctx, cases, sizeof cases / sizeof cases[0], 128);
        }
        unsetenv("HK_FLASH_SOFTMAX");
        /* both launch orders of the row tiles, whichever the plan takes at each shape */
        static const char *const orders[] = {"zigzag", "heaviest"};
        for (int i = 0; i < 2; i++) {
            setenv("HK_FLASH_ORDER", orders[i], 1);
            printf("-- HK_FLASH_ORDER=%s, gate %.0e\n", orders[i], arm_gate);
            run_cases_up_to(ctx, cases, sizeof cases / sizeof cases[0], 128);
        }
        unsetenv("HK_FLASH_ORDER");
        hk_context *twin = hk_test_context_without(HK_FEATURE_COOPMAT_KHR);
        if (twin) {
            arm_name = "portable twin";
            arm_gate = HK_GATE_F32;
            printf("-- without HK_FEATURE_COOPMAT_KHR: the %s, gate %.0e\n", arm_name, arm_gate);
            run_cases(twin, cases, sizeof cases / sizeof cases[0]);
            run_nonfinite(twin, 0);
            test_split_limit(twin, 2048, "flash", 1);
            run_longest(twin, &longest_twin);
            uint32_t messages = hk_context_validation_messages(twin);
            hk_check(messages == 0, "no validation messages on the twin context", "%u seen", messages);
            hk_context_destroy(twin);
        }
    }
    if (!coop) {
        run_longest(ctx, &longest_twin);
        /* no matrix cores here: the matrix-core arm's code with its matrix operations emulated
         * (HK_FLASH_EMULATE_COOPMAT, f16 caches): the GPU's staging and loop on smaller tiles, f16
         * rounding, the f16 gate */
        static const char *const configs[] = {"2,1,32,32,1,1", "1,2,16,32,0,0", "2,1,16,32,1,1", "4,1,16,32,1,1",
                                              "4,1,32,32,1,1"};
        const flash_case *lists[] = {emulated_128, emulated_mr2, emulated_80, emulated_64, emulated_64};
        size_t counts[] = {sizeof emulated_128 / sizeof emulated_128[0], sizeof emulated_mr2 / sizeof emulated_mr2[0],
                           sizeof emulated_80 / sizeof emulated_80[0], sizeof emulated_64 / sizeof emulated_64[0],
                           sizeof emulated_64 / sizeof emulated_64[0]};
        for (int i = 0; i < 5; i++) {
            setenv("HK_FLASH_EMULATE_COOPMAT", configs[i], 1);
            arm_name = "matrix-core arm, emulated";
            arm_gate = GATE_F16_COOPMAT;
            printf("-- HK_FLASH_EMULATE_COOPMAT=%s: the %s, gate %.0e\n", configs[i], arm_name, arm_gate);
            worst_rel = 0;
            run_cases(ctx, lists[i], counts[i]);
            hk_check(worst_rel > 1e-5, "flash: the emulated matrix-core arm ran", "largest scale_rel %.3e", worst_rel);
        }
        /* the emulated arm takes the register softmax by default: the other one, on the GPU's tile */
        setenv("HK_FLASH_EMULATE_COOPMAT", configs[0], 1);
        setenv("HK_FLASH_SOFTMAX", "shared", 1);
        printf("-- HK_FLASH_EMULATE_COOPMAT=%s HK_FLASH_SOFTMAX=shared, gate %.0e\n", configs[0], arm_gate);
        run_cases(ctx, lists[0], counts[0]);
        unsetenv("HK_FLASH_SOFTMAX");
        /* the row tiles in zigzag order (a GPU's plan for few row tiles) */
        setenv("HK_FLASH_ORDER", "zigzag", 1);
        printf("-- HK_FLASH_EMULATE_COOPMAT=%s HK_FLASH_ORDER=zigzag, gate %.0e\n", configs[0], arm_gate);
        run_cases(ctx, lists[0], counts[0]);
        unsetenv("HK_FLASH_ORDER");
        setenv("HK_FLASH_EMULATE_COOPMAT", "1", 1); /* its default tile */
        printf("-- HK_FLASH_EMULATE_COOPMAT=1: non-finite inputs, the key split's limit\n");
        run_nonfinite(ctx, 1);
        test_split_limit(ctx, 8192, "flash", 0);
        printf("-- HK_FLASH_EMULATE_COOPMAT=1: one workgroup over 8192 keys\n");
        run_longest(ctx, &longest_coop);
        unsetenv("HK_FLASH_EMULATE_COOPMAT");
    }
    return hk_test_finish(ctx);
}
