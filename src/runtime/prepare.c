/* hk_context_prepare: builds ahead of time the pipelines kernels would build on first use.
 *
 * The runtime knows no kernel, and a family picks its pipeline (shader, specialization constants,
 * subgroup size) from the shape and the device in its own host code. So this file drives the
 * families through their public functions, on a stream that records nothing (hk__dispatch only
 * builds the pipeline there) and on views of a buffer that has no memory: one call per shape
 * class a family distinguishes builds exactly the pipeline that class would use on this device.
 * This is the one runtime file that names kernels. A family that adds a variant (a new threshold,
 * a new specialization) adds the shapes that reach it here; tests/test_runtime.c runs every case
 * of the kernel table after hk_context_prepare and fails if any pipeline is still built later. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prep {
    hk_context *ctx;
    hk_stream *s;
    hk_buffer *buf; /* no memory: views only (a prepare stream never touches it) */
    const char *kernel;
} prep;

/* View i of the memoryless buffer: 4 GiB apart, so no two overlap and every offset is aligned. */
static hk_view view(const prep *p, int i) { return (hk_view){p->buf, (uint64_t)i << 32}; }

/* A shape the device cannot run (HK_ERROR_UNSUPPORTED) builds nothing and is fine; any other
 * failure means this file's shape no longer fits the kernel: say so loudly. */
static hk_status check(const prep *p, hk_status st)
{
    if (st == HK_OK || st == HK_ERROR_UNSUPPORTED)
        return HK_OK;
    if (st == HK_ERROR_INVALID_ARGUMENT) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hk_last_error());
        return hk__fail(HK_ERROR_STATE, "hk_context_prepare", "internal: a shape for %s was refused (%s)", p->kernel, msg);
    }
    return st;
}

#define TRY(call)                                                                                                   \
    do {                                                                                                            \
        hk_status st_ = check(p, (call));                                                                           \
        if (st_ != HK_OK)                                                                                           \
            return st_;                                                                                             \
    } while (0)

static const hk_type weight_types[] = {HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q6_K};

/* hk_matvec: the portable kernel (unaligned views, or no subgroup size control) and the subgroup
 * rows kernel at 1, 2 and 4 rows per subgroup (from 4096 and 16384 rows). */
static hk_status prep_matvec(prep *p, int int8)
{
    static const uint32_t rows[] = {1, 4096, 16384};
    for (int t = 0; t < 3; t++) {
        uint32_t k = hk_type_block_values(weight_types[t]);
        for (int r = 0; r < 3; r++) {
            hk_type w = weight_types[t];
            if (int8)
                TRY(hk_matvec_int8(p->ctx, p->s, w, view(p, 0), view(p, 1), view(p, 2), rows[r], k));
            else
                TRY(hk_matvec(p->ctx, p->s, w, view(p, 0), view(p, 1), view(p, 2), rows[r], k));
        }
        if (!int8) { /* x 4-byte aligned only: the portable kernel */
            hk_view x = view(p, 1);
            x.offset += 4;
            TRY(hk_matvec(p->ctx, p->s, weight_types[t], view(p, 0), x, view(p, 2), 1, k));
        }
    }
    return HK_OK;
}

static hk_status prep_matvec_f32(prep *p) { return prep_matvec(p, 0); }

/* hk_matvec_int8_tokens: 2, 4, 8 and 16 tokens at the row classes of its rows per subgroup (1
 * below 4096 rows, 2, 4 from 8192 at up to 8 tokens), each at k of one block (x resident on any
 * device) and at the largest k that the API's limits and the device's binding range take at those
 * rows: x staged per step where the device's shared memory does not hold that k (the class past
 * the resident one starts at a k that depends on the device; a row class's fewest rows bind the
 * largest k of the class). */
static hk_status prep_tokens(prep *p)
{
    static const uint32_t rows[] = {1, 4096, 8192}, tokens[] = {2, 4, 8, 16};
    hk_caps caps;
    hk_status st = hk_context_caps(p->ctx, &caps);
    if (st != HK_OK)
        return st;
    for (int t = 0; t < 3; t++)
        for (int r = 0; r < 3; r++)
            for (int n = 0; n < 4; n++) {
                hk_type w = weight_types[t];
                uint32_t block = hk_type_block_values(w);
                uint64_t k_max = HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS / (tokens[n] + 1); /* rows <= 32768 */
                uint64_t k_bind = caps.max_storage_buffer_range / ((uint64_t)rows[r] * hk_type_block_bytes(w)) * block;
                k_max = k_max < HK_MATVEC_MAX_K ? k_max : HK_MATVEC_MAX_K;
                k_max = (k_max < k_bind ? k_max : k_bind) / block * block;
                for (int big = 0; big < 2; big++)
                    if (!big || k_max > block)
                        TRY(hk_matvec_int8_tokens(p->ctx, p->s, w, view(p, 0), view(p, 1), view(p, 2), rows[r],
                                                  big ? (uint32_t)k_max : block, tokens[n]));
            }
    return HK_OK;
}
static hk_status prep_matvec_int8(prep *p) { return prep_matvec(p, 1); }

/* hk_moe_matvec*: rows = slots * n picks 1, 2 or 4 rows per subgroup, then halved until n is a
 * multiple: (n, slots) pairs that reach each count. */
static hk_status prep_moe(prep *p, int int8)
{
    static const uint32_t pairs[][2] = {{1, 1}, {2, 2048}, {4, 4096}, {2, 8192}, {1, 16384}, {4, 1024}};
    for (int t = 0; t < 3; t++) {
        uint32_t k = hk_type_block_values(weight_types[t]);
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            hk_moe_shape shape = {1, pairs[i][0], k, pairs[i][1], 0};
            if (int8)
                TRY(hk_moe_matvec_int8(p->ctx, p->s, weight_types[t], view(p, 0), view(p, 1), view(p, 3), view(p, 2),
                                       &shape));
            else
                TRY(hk_moe_matvec(p->ctx, p->s, weight_types[t], view(p, 0), view(p, 1), view(p, 3), view(p, 2), &shape));
        }
    }
    return HK_OK;
}

static hk_status prep_moe_f32(prep *p) { return prep_moe(p, 0); }
static hk_status prep_moe_int8(prep *p) { return prep_moe(p, 1); }

static hk_status prep_route(prep *p)
{
    TRY(hk_moe_route(p->ctx, p->s, view(p, 0), view(p, 1), view(p, 2), 1, 128, 8, 1));
    return HK_OK;
}

static hk_status prep_gemv(prep *p)
{
    TRY(hk_gemv_f32(p->ctx, p->s, view(p, 0), view(p, 1), view(p, 2), 1, 2048));
    return HK_OK;
}

/* a wide workgroup for a few long rows, the default otherwise */
static hk_status prep_rmsnorm(prep *p)
{
    TRY(hk_rmsnorm(p->ctx, p->s, view(p, 0), view(p, 1), view(p, 2), 1, 4096, 1e-6f));
    TRY(hk_rmsnorm(p->ctx, p->s, view(p, 0), view(p, 1), view(p, 2), 64, 64, 1e-6f));
    return HK_OK;
}

static hk_status prep_quantize(prep *p)
{
    TRY(hk_quantize_q8_1(p->ctx, p->s, view(p, 0), view(p, 1), 2048));
    return HK_OK;
}

static hk_status prep_copy(prep *p)
{
    TRY(hk_copy(p->ctx, p->s, view(p, 0), view(p, 1), 4096));
    return HK_OK;
}

/* Attention: decode (one query) and prefill (a causal chunk), every KV type and head size, with
 * seq_k given and from a counter, short and long key ranges. */
static hk_kv_layout kv_layout(hk_type type, uint32_t head_dim, uint32_t n_kv_heads, uint32_t capacity)
{
    uint64_t row = hk_type_bytes(type, head_dim);
    (void)n_kv_heads;
    return (hk_kv_layout){type, capacity, row, row * capacity, row, row * capacity};
}

static const hk_type kv_types[] = {HK_TYPE_F32, HK_TYPE_F16, HK_TYPE_Q8_0};
static const uint32_t head_dims[] = {64, 128, 256};

static hk_status prep_sdpa(prep *p)
{
    static const uint32_t n_qs[] = {1, 4, 64};
    static const uint32_t seq_ks[] = {64, 4096};
    for (int t = 0; t < 3; t++)
        for (int h = 0; h < 3; h++)
            for (int q = 0; q < 3; q++)
                for (int sk = 0; sk < 2; sk++)
                    for (int counter = 0; counter < 2; counter++) {
                        hk_sdpa_desc d = {.n_q = n_qs[q], .n_heads = 8, .n_kv_heads = 2, .head_dim = head_dims[h],
                                          .seq_k = seq_ks[sk], .scale = 0.125f, .causal = n_qs[q] > 1,
                                          .kv = kv_layout(kv_types[t], head_dims[h], 2, 4096)};
                        uint64_t ws = 0;
                        TRY(hk_sdpa_workspace_bytes(p->ctx, &d, &ws));
                        hk_view none = {NULL, 0};
                        TRY(hk_sdpa_blk(p->ctx, p->s, &d, view(p, 0), view(p, 1), view(p, 2), view(p, 3),
                                        ws ? view(p, 4) : none, counter ? view(p, 5) : none));
                    }
    return HK_OK;
}

static hk_status prep_rope(prep *p)
{
    static const uint32_t n_tokens[] = {1, 64};
    for (int t = 0; t < 3; t++)
        for (int h = 0; h < 3; h++)
            for (int n = 0; n < 2; n++)
                for (int neox = 0; neox < 2; neox++)
                    for (int factors = 0; factors < 2; factors++) {
                        hk_rope_desc d = {.n_tokens = n_tokens[n], .n_heads = 8, .n_kv_heads = 2,
                                          .head_dim = head_dims[h], .rot_dim = 0, .neox = neox,
                                          .theta_base = 10000.0f, .freq_scale = 1.0f,
                                          .kv = kv_layout(kv_types[t], head_dims[h], 2, 4096)};
                        hk_view none = {NULL, 0};
                        TRY(hk_rope(p->ctx, p->s, &d, view(p, 0), view(p, 1), view(p, 2), view(p, 3),
                                    factors ? view(p, 4) : none, view(p, 5), view(p, 6), view(p, 7)));
                    }
    return HK_OK;
}

/* Prefill: the int8 GEMM dense (and its few-token kernel) and expert-indexed per weight type,
 * the slot grouping, the f16 GEMM per weight type with 16-byte aligned x and not. The int8 GEMM's
 * pipelines follow the shape and the views (mmq.c record): the tile (64-token chunks take the small
 * one, 512 tokens the big one), f32 sums per 32 blocks past k = 4096, X rows read 16 bytes at a time
 * where k is a multiple of 128, and the widest weight loads every row's alignment allows (Q8_0 and
 * Q6_K words only for an even count of blocks per row). So the shapes are models': k 4096 and 14336
 * (Llama-3-8B's), on aligned views as GGUF tensors are. */
static hk_status prep_mmq(prep *p)
{
    static const uint32_t tokens[] = {64, 512}, ks[] = {4096, 14336};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                TRY(hk_mmq(p->ctx, p->s, weight_types[t], view(p, 0), view(p, 1), view(p, 2), tokens[i], 4096, ks[j]));
    /* a few tokens (speculative decoding): their own kernel, whose warps per workgroup follow the
     * rows against the device's schedulers */
    static const uint32_t rows[] = {64, 4096, 8192, 14336};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 4; i++)
            TRY(hk_mmq(p->ctx, p->s, weight_types[t], view(p, 0), view(p, 1), view(p, 2), 8, rows[i], 4096));
    return HK_OK;
}

static hk_status prep_moe_expert_rows(prep *p)
{
    TRY(hk_moe_expert_rows(p->ctx, p->s, view(p, 0), view(p, 1), view(p, 2), view(p, 3), 64, 8));
    return HK_OK;
}

/* MoE prefill: Qwen3-30B-A3B's experts (768 x 2048, top-8, 512 tokens), gate/up (k 2048) and down
 * (k 768: Q6_K's 3 super-blocks per row take 16-bit weight loads) in every weight type; 16 of its
 * 128 experts (the count is no part of the pipeline, and 16 keep a bank within what lavapipe binds) */
static hk_status prep_mmq_id(prep *p)
{
    /* experts, n, k, slots, slots per x row: gate/up read x per token, down per slot */
    static const hk_mmq_id_shape shapes[] = {{16, 768, 2048, 512 * 8, 8}, {16, 2048, 768, 512 * 8, 1}};
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < 2; j++)
            TRY(hk_mmq_id(p->ctx, p->s, weight_types[t], view(p, 0), view(p, 1), view(p, 2), view(p, 3), view(p, 4),
                          &shapes[j]));
    return HK_OK;
}

static hk_status prep_gemm_f16(prep *p)
{
    for (int t = 0; t < 3; t++)
        for (int aligned = 0; aligned < 2; aligned++) {
            uint32_t k = hk_type_block_values(weight_types[t]);
            hk_view x = view(p, 1);
            x.offset += aligned ? 0 : 4;
            TRY(hk_gemm_f16(p->ctx, p->s, weight_types[t], view(p, 0), x, view(p, 2), 64, 64, k));
        }
    /* Q4_K weights on 4 and 2 bytes: the narrower loads are specializations of their own */
    for (uint64_t skew = 2; skew <= 4; skew += 2) {
        hk_view w = view(p, 0);
        w.offset += skew;
        TRY(hk_gemm_f16(p->ctx, p->s, HK_TYPE_Q4_K, w, view(p, 1), view(p, 2), 64, 64, 256));
    }
    return HK_OK;
}

typedef struct prep_kernel {
    const char *name;
    hk_status (*run)(prep *p);
} prep_kernel;

/* Every public kernel, as hkernel.h lists them for hk_context_prepare. */
static const prep_kernel kernels[] = {
    {"hk_matvec", prep_matvec_f32},
    {"hk_matvec_int8", prep_matvec_int8},
    {"hk_matvec_int8_tokens", prep_tokens},
    {"hk_moe_matvec", prep_moe_f32},
    {"hk_moe_matvec_int8", prep_moe_int8},
    {"hk_moe_route", prep_route},
    {"hk_gemv_f32", prep_gemv},
    {"hk_rmsnorm", prep_rmsnorm},
    {"hk_quantize_q8_1", prep_quantize},
    {"hk_copy", prep_copy},
    {"hk_sdpa_blk", prep_sdpa},
    {"hk_rope", prep_rope},
    {"hk_mmq", prep_mmq},
    {"hk_moe_expert_rows", prep_moe_expert_rows},
    {"hk_mmq_id", prep_mmq_id},
    {"hk_gemm_f16", prep_gemm_f16},
};
#define KERNELS (sizeof kernels / sizeof kernels[0])

/* 1 if the comma-separated list names kernel k; 0 else */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *q = list; *q;) {
        size_t len = strcspn(q, ",");
        if (len == n && strncmp(q, name, n) == 0)
            return 1;
        q += len + (q[len] == ',');
    }
    return 0;
}

hk_status hk_context_prepare(hk_context *context, const char *list)
{
    static const char fn[] = "hk_context_prepare";
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    hk_status st = hk__check_alive(context, fn);
    if (st != HK_OK)
        return st;
    if (list) { /* every name must be a kernel */
        for (const char *q = list; *q;) {
            size_t len = strcspn(q, ",");
            int found = 0;
            for (size_t k = 0; k < KERNELS; k++)
                found |= strlen(kernels[k].name) == len && strncmp(q, kernels[k].name, len) == 0;
            if (!found) {
                char names[512] = "";
                for (size_t k = 0; k < KERNELS; k++)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "", kernels[k].name);
                return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "\"%.*s\" is not a kernel (the kernels: %s)",
                                (int)(len < 64 ? len : 64), q, names);
            }
            q += len + (q[len] == ',');
        }
    }
    hk_buffer fake = {.context = context, .buffer = VK_NULL_HANDLE, .memory = VK_NULL_HANDLE, .size = 16ull << 32};
    prep p = {context, NULL, &fake, NULL};
    st = hk__stream_create_prepare(context, &p.s);
    if (st != HK_OK)
        return st;
    for (size_t k = 0; k < KERNELS && st == HK_OK; k++) {
        if (list && !listed(list, kernels[k].name))
            continue;
        p.kernel = kernels[k].name;
        st = kernels[k].run(&p);
    }
    hk_stream_destroy(p.s);
    return st;
}
