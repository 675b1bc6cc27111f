/* Attention: argument checks for hk_sdpa_blk and hk_rope, the choice between flash-decoding and
 * flash attention, and flash-decoding itself (shaders/sdpa.comp). */
#include "attention.h"

#include <math.h>

#define HK_MAX_HEAD_DIM 256u
/* Flash-decoding folds at most 2048 keys per split and combines at most 1024 splits. */
#define HK_SDPA_MAX_CAPACITY 2097152u

hk_status hk__kv_layout_check(const char *fn, const hk_kv_layout *kv, uint32_t n_kv_heads, uint32_t head_dim,
                              uint64_t *k_bytes, uint64_t *v_bytes)
{
    if (kv->type != HK_TYPE_F32 && kv->type != HK_TYPE_F16 && kv->type != HK_TYPE_Q8_0)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "kv.type=%s (%d) is not a KV-cache type (f32, f16, q8_0)",
                        hk_type_name(kv->type), (int)kv->type);
    uint32_t multiple = kv->type == HK_TYPE_Q8_0 ? 32 : 16;
    if (head_dim == 0 || head_dim % multiple || head_dim > HK_MAX_HEAD_DIM)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "head_dim=%u is not a positive multiple of %u up to %u (%s cache)",
                        head_dim, multiple, HK_MAX_HEAD_DIM, hk_type_name(kv->type));
    if (kv->capacity == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kv.capacity is 0");
    uint64_t row = hk_type_bytes(kv->type, head_dim), align = hk_type_alignment(kv->type);
    const struct {
        const char *name;
        uint64_t row_stride, head_stride;
        uint64_t *bytes;
    } t[2] = {{"k", kv->k_row_stride, kv->k_head_stride, k_bytes}, {"v", kv->v_row_stride, kv->v_head_stride, v_bytes}};
    for (int i = 0; i < 2; i++) {
        uint64_t rs = t[i].row_stride, hs = t[i].head_stride;
        if (rs % align || hs % align)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kv.%s_row_stride=%llu and kv.%s_head_stride=%llu must be multiples of %llu (%s)",
                            t[i].name, (unsigned long long)rs, t[i].name, (unsigned long long)hs,
                            (unsigned long long)align, hk_type_name(kv->type));
        if ((kv->capacity > 1 && rs < row) || (n_kv_heads > 1 && hs < row))
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                            "kv.%s_row_stride=%llu or kv.%s_head_stride=%llu is smaller than one row (%llu bytes: %u %s values)",
                            t[i].name, (unsigned long long)rs, t[i].name, (unsigned long long)hs,
                            (unsigned long long)row, head_dim, hk_type_name(kv->type));
        /* rows of two (head, row) pairs must not overlap: heads outside rows or rows outside heads */
        int heads_outer = n_kv_heads == 1 || hs / (kv->capacity > 1 ? rs : 1) >= kv->capacity;
        int rows_outer = kv->capacity == 1 || rs / (n_kv_heads > 1 ? hs : 1) >= n_kv_heads;
        if (kv->capacity > 1 && n_kv_heads > 1 && !heads_outer && !rows_outer)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                            "kv.%s_row_stride=%llu and kv.%s_head_stride=%llu make rows of different heads overlap "
                            "(%u rows, %u kv heads)",
                            t[i].name, (unsigned long long)rs, t[i].name, (unsigned long long)hs, kv->capacity,
                            n_kv_heads);
        double span = (double)(n_kv_heads - 1) * (double)hs + (double)(kv->capacity - 1) * (double)rs + (double)row;
        if (span > 1.8e19)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "the %s cache spans more than 2^64 bytes", t[i].name);
        *t[i].bytes = (uint64_t)(n_kv_heads - 1) * hs + (uint64_t)(kv->capacity - 1) * rs + row;
    }
    return HK_OK;
}

/* Shape checks that need no views (shared by hk_sdpa_workspace_bytes and hk_sdpa_blk). */
static hk_status check_desc(const char *fn, const hk_context *context, const hk_sdpa_desc *d, int has_counter,
                            uint64_t *k_bytes, uint64_t *v_bytes)
{
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    if (!d)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "desc is NULL");
    if (d->n_q == 0 || d->n_heads == 0 || d->n_kv_heads == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_q=%u, n_heads=%u and n_kv_heads=%u must all be positive", d->n_q,
                        d->n_heads, d->n_kv_heads);
    if (d->n_heads % d->n_kv_heads)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_heads=%u is not a multiple of n_kv_heads=%u", d->n_heads,
                        d->n_kv_heads);
    if (!isfinite(d->scale))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "scale=%g is not finite", (double)d->scale);
    hk_status st = hk__kv_layout_check(fn, &d->kv, d->n_kv_heads, d->head_dim, k_bytes, v_bytes);
    if (st != HK_OK)
        return st;
    if (d->kv.capacity > HK_SDPA_MAX_CAPACITY)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kv.capacity=%u is more than %u rows", d->kv.capacity,
                        HK_SDPA_MAX_CAPACITY);
    if (d->causal && d->n_q > d->kv.capacity)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "causal with n_q=%u queries needs at least as many keys, but kv.capacity=%u",
                        d->n_q, d->kv.capacity);
    if (!has_counter) {
        if (d->seq_k == 0 || d->seq_k > d->kv.capacity)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "seq_k=%u must be in 1..kv.capacity=%u", d->seq_k,
                            d->kv.capacity);
        if (d->causal && d->n_q > d->seq_k)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "causal with n_q=%u queries needs seq_k >= n_q, got seq_k=%u",
                            d->n_q, d->seq_k);
    }
    if ((uint64_t)d->n_q * d->n_heads * d->head_dim > UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_q x n_heads x head_dim exceeds 2^32 values");
    return HK_OK;
}

static int use_flash(const hk_context *context, const hk_sdpa_desc *desc)
{
    return desc->n_q > 1 && hk__sdpa_flash_supported(context, desc);
}

const char *hk_sdpa_path(hk_context *context, const hk_sdpa_desc *desc)
{
    uint64_t k_bytes, v_bytes;
    if (check_desc("hk_sdpa_path", context, desc, 1, &k_bytes, &v_bytes) != HK_OK)
        return NULL;
    return use_flash(context, desc) ? hk__sdpa_flash_arm(context, desc) : "decode";
}

hk_status hk_sdpa_workspace_bytes(hk_context *context, const hk_sdpa_desc *desc, uint64_t *out_bytes)
{
    static const char fn[] = "hk_sdpa_workspace_bytes";
    if (!out_bytes)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_bytes is NULL");
    *out_bytes = 0;
    uint64_t k_bytes, v_bytes;
    /* the counter form accepts any seq_k, so the size must not depend on it */
    hk_status st = check_desc(fn, context, desc, 1, &k_bytes, &v_bytes);
    if (st != HK_OK)
        return st;
    *out_bytes = use_flash(context, desc) ? hk__sdpa_flash_workspace(context, desc)
                                          : hk__sdpa_decode_workspace(context, desc);
    return HK_OK;
}

hk_status hk_sdpa_blk(hk_context *context, hk_stream *stream, const hk_sdpa_desc *desc, hk_view q, hk_view k_cache,
                      hk_view v_cache, hk_view out, hk_view workspace, hk_view seq_k_counter)
{
    static const char fn[] = "hk_sdpa_blk";
    static const char *const names[SDPA_BINDINGS] = {"q", "k_cache", "v_cache", "out", "workspace", "seq_k_counter"};
    hk_sdpa_call call = {.desc = desc, .has_counter = seq_k_counter.buffer != NULL};
    uint64_t k_bytes, v_bytes;
    hk_status st = check_desc(fn, context, desc, call.has_counter, &k_bytes, &v_bytes);
    if (st != HK_OK)
        return st;
    int flash = use_flash(context, desc);
    uint64_t ws = flash ? hk__sdpa_flash_workspace(context, desc) : hk__sdpa_decode_workspace(context, desc);
    if (ws && !workspace.buffer)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "workspace is NULL but this shape needs %llu bytes "
                        "(hk_sdpa_workspace_bytes)", (unsigned long long)ws);
    uint64_t qo_bytes = (uint64_t)desc->n_q * desc->n_heads * desc->head_dim * 4;
    hk_view none = {q.buffer, q.offset};
    call.b[SDPA_Q] = (hk_binding){q, qo_bytes, 4, 0, 0};
    call.b[SDPA_K] = (hk_binding){k_cache, k_bytes, hk_type_alignment(desc->kv.type), 0, 0};
    call.b[SDPA_V] = (hk_binding){v_cache, v_bytes, hk_type_alignment(desc->kv.type), 0, 0};
    call.b[SDPA_OUT] = (hk_binding){out, qo_bytes, 4, 1, 0};
    call.b[SDPA_WORKSPACE] = ws ? (hk_binding){workspace, ws, 4, 1, 0} : (hk_binding){none, 0, 1, 0, 0};
    call.b[SDPA_COUNTER] = call.has_counter ? (hk_binding){seq_k_counter, 4, 4, 0, 0} : (hk_binding){none, 0, 1, 0, 0};
    call.k_row_bytes = hk_type_bytes(desc->kv.type, desc->head_dim);
    st = hk__check_bindings(context, stream, fn, names, call.b, SDPA_BINDINGS);
    if (st != HK_OK)
        return st;
    return flash ? hk__sdpa_flash(context, stream, fn, &call) : hk__sdpa_decode(context, stream, fn, &call);
}

/* ---- flash-decoding ---- */

/* Workgroups of 128 invocations (every Vulkan device takes them). Pass 1: one key per invocation
 * in the softmax step, so a tile is 128 keys. Pass 2: a workgroup per output row and 8 x 4
 * columns, its invocations over the splits (decode H=32, d=128: 128 workgroups). */
#define SDPA_WG 128u
#define SDPA_REDUCE_COLUMNS 8u
/* Query rows (query heads of one kv head, times queries) per workgroup: K/V rows are read once
 * per this many rows (GQA 8 reads them once). */
#define SDPA_MAX_ROWS 8u
/* Keys one split folds at most: bounds every invocation's loop trips (lavapipe ends a shader
 * after 65535 loop iterations; a 2048-key split is 16 tiles of ~1400 at worst). With at most
 * SDPA_MAX_SPLITS splits (the combine pass's shared array) this bounds kv.capacity. */
#define SDPA_MAX_CHUNK 2048u
#define SDPA_MAX_SPLITS 1024u
_Static_assert(SDPA_MAX_CHUNK * SDPA_MAX_SPLITS == HK_SDPA_MAX_CAPACITY, "capacity limit");
/* A split's keys are a multiple of this, so short counts use few splits rather than many
 * near-empty ones. */
#define SDPA_SPLIT_ALIGN 32u
/* Workgroups pass 1 aims for: several per SM of a large GPU (132 on the H200), which also
 * spreads a short count over several. A CPU device runs a few at a time. */
#define SDPA_GPU_GROUPS 1024u
#define SDPA_CPU_GROUPS 16u

typedef struct sdpa_plan {
    uint32_t rows;   /* HK_R */
    uint32_t lpk;    /* HK_LPK */
    uint32_t work;   /* HK_WORK floats */
    uint32_t kb;     /* HK_KB keys per Q.K load batch */
    uint32_t chunks; /* row chunks per kv head */
    uint32_t splits;
} sdpa_plan;

/* values per Q.K chunk (16 bytes of f16/f32, half a Q8_0 block), as the shader's CD */
static uint32_t chunk_values(hk_type type) { return type == HK_TYPE_F16 ? 8 : type == HK_TYPE_F32 ? 4 : 16; }

static uint32_t work_floats(uint32_t rows, uint32_t lpk, uint32_t d)
{
    uint32_t kg = SDPA_WG / (d / 4), qk = lpk * rows * SDPA_WG, pv = (kg - 1) * rows * d;
    return qk > pv ? qk : pv;
}

/* Shared memory of pass 1 in floats: q, the per-subgroup reduction, p, the work array. */
static uint32_t shared_floats(uint32_t rows, uint32_t lpk, uint32_t d)
{
    return rows * d + 2 * rows * SDPA_WG + work_floats(rows, lpk, d);
}

/* Everything here depends on the shape, kv.capacity and the device, never on seq_k, so the
 * workspace and the recorded dispatch serve any count a replay brings. */
static void make_plan(const hk_context *context, const hk_sdpa_desc *desc, sdpa_plan *p)
{
    uint32_t d = desc->head_dim, group = desc->n_heads / desc->n_kv_heads;
    uint64_t rows_per_kv = (uint64_t)desc->n_q * group;
    uint32_t rows = 1;
    while (rows < SDPA_MAX_ROWS && rows < rows_per_kv)
        rows *= 2;
    uint32_t lpk = 4;
    while (lpk > d / chunk_values(desc->kv.type))
        lpk /= 2;
    /* fit the device's shared memory (common.glsl's reduction array besides): fewer lanes per
     * key first, then fewer rows (lavapipe's 32 KiB takes 8 rows of d=256 at 2 lanes) */
    uint32_t budget = context->caps.shared_memory_bytes / 4 - SDPA_WG;
    while (shared_floats(rows, lpk, d) > budget && (lpk > 1 || rows > 1)) {
        if (lpk > 1)
            lpk /= 2;
        else
            rows /= 2;
    }
    uint64_t chunks = (rows_per_kv + rows - 1) / rows, base = chunks * desc->n_kv_heads;
    uint64_t target = context->caps.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU ? SDPA_CPU_GROUPS : SDPA_GPU_GROUPS;
    uint64_t want = (target + base - 1) / base;
    uint64_t least = (desc->kv.capacity + SDPA_MAX_CHUNK - 1) / SDPA_MAX_CHUNK;
    uint64_t most = (desc->kv.capacity + SDPA_SPLIT_ALIGN - 1) / SDPA_SPLIT_ALIGN;
    if (most > SDPA_MAX_SPLITS)
        most = SDPA_MAX_SPLITS;
    if (want > most)
        want = most;
    if (want < least)
        want = least;
    /* Q.K loads of a batch stay in registers until used: about 8 x 16 bytes per invocation */
    uint32_t per_key = (d / chunk_values(desc->kv.type) + lpk - 1) / lpk, kb = lpk;
    while (kb > 1 && kb * per_key > 8)
        kb /= 2;
    p->rows = rows;
    p->lpk = lpk;
    p->kb = kb;
    p->work = work_floats(rows, lpk, d);
    p->chunks = chunks > UINT32_MAX ? UINT32_MAX : (uint32_t)chunks;
    p->splits = (uint32_t)want;
}

uint64_t hk__sdpa_decode_workspace(const hk_context *context, const hk_sdpa_desc *desc)
{
    sdpa_plan p;
    make_plan(context, desc, &p);
    if (p.splits == 1)
        return 0; /* one split writes the output directly */
    return (uint64_t)desc->n_q * desc->n_heads * p.splits * (desc->head_dim + 2) * 4;
}

typedef struct sdpa_params {
    uint32_t n_q, n_heads, group, seq_k, flags, capacity, n_splits, split_align, n_chunks;
    uint32_t k_row, k_head, v_row, v_head;
    float scale_log2;
} sdpa_params;

enum { SDPA_F_COUNTER = 1, SDPA_F_CAUSAL = 2, SDPA_F_DIRECT = 4 };

/* 16-byte loads: the views and every stride in use are multiples of 16 bytes */
static int wide_ok(const hk_sdpa_call *call)
{
    const hk_sdpa_desc *d = call->desc;
    const hk_kv_layout *kv = &d->kv;
    uint64_t rs = (kv->capacity > 1 ? kv->k_row_stride | kv->v_row_stride : 0);
    uint64_t hs = (d->n_kv_heads > 1 ? kv->k_head_stride | kv->v_head_stride : 0);
    return ((call->b[SDPA_K].view.offset | call->b[SDPA_V].view.offset | rs | hs) & 15) == 0;
}

hk_status hk__sdpa_decode(hk_context *context, hk_stream *stream, const char *fn, const hk_sdpa_call *call)
{
    const hk_sdpa_desc *desc = call->desc;
    const hk_kv_layout *kv = &desc->kv;
    sdpa_plan p;
    make_plan(context, desc, &p);
    uint64_t groups = (uint64_t)desc->n_kv_heads * p.chunks * p.splits;
    if (groups > (uint64_t)65535 * 65535)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_q=%u x n_heads=%u needs %llu workgroups, more than one dispatch allows",
                        desc->n_q, desc->n_heads, (unsigned long long)groups);
    int wide = wide_ok(call);
    int shader = kv->type == HK_TYPE_Q8_0 ? HK_SHADER_SDPA_Q8_0
               : kv->type == HK_TYPE_F16  ? (wide ? HK_SHADER_SDPA_F16_WIDE : HK_SHADER_SDPA_F16)
                                          : (wide ? HK_SHADER_SDPA_F32_WIDE : HK_SHADER_SDPA_F32);
    int direct = p.splits == 1;
    sdpa_params params = {
        .n_q = desc->n_q,
        .n_heads = desc->n_heads,
        .group = desc->n_heads / desc->n_kv_heads,
        .seq_k = call->has_counter ? 0 : desc->seq_k,
        .flags = (call->has_counter ? SDPA_F_COUNTER : 0) | (desc->causal ? SDPA_F_CAUSAL : 0) |
                 (direct ? SDPA_F_DIRECT : 0),
        .capacity = kv->capacity,
        .n_splits = p.splits,
        .split_align = SDPA_SPLIT_ALIGN,
        .n_chunks = p.chunks,
        /* strides that are used stay below the views' spans, which the device can bind */
        .k_row = kv->capacity > 1 ? (uint32_t)kv->k_row_stride : 0,
        .k_head = desc->n_kv_heads > 1 ? (uint32_t)kv->k_head_stride : 0,
        .v_row = kv->capacity > 1 ? (uint32_t)kv->v_row_stride : 0,
        .v_head = desc->n_kv_heads > 1 ? (uint32_t)kv->v_head_stride : 0,
        .scale_log2 = (float)((double)desc->scale * 1.4426950408889634),
    };
    /* pass 1 writes the workspace (or the output), pass 2 reads it and writes the output: each
     * pass declares only what it touches, so the stream orders them and nothing else */
    hk_binding b1[SDPA_BINDINGS], b2[SDPA_BINDINGS];
    for (int i = 0; i < SDPA_BINDINGS; i++) {
        b1[i] = call->b[i];
        b2[i] = (hk_binding){call->b[SDPA_Q].view, 0, 1, 0, 0};
    }
    if (!direct) {
        b1[SDPA_OUT] = b2[SDPA_OUT];
        b2[SDPA_OUT] = call->b[SDPA_OUT];
        b2[SDPA_WORKSPACE] = call->b[SDPA_WORKSPACE];
        b2[SDPA_WORKSPACE].writes = 0;
        b2[SDPA_COUNTER] = call->b[SDPA_COUNTER];
    }
    uint32_t columns = desc->head_dim / 4 < SDPA_REDUCE_COLUMNS ? desc->head_dim / 4 : SDPA_REDUCE_COLUMNS;
    uint32_t spec1[6] = {SDPA_WG, desc->head_dim, p.rows, p.lpk, p.work, p.kb};
    uint32_t spec2[3] = {SDPA_WG, desc->head_dim, columns};
    hk_dispatch_desc d1 = {.shader = shader, .spec = spec1, .spec_count = 6, .bindings = b1,
                           .binding_count = SDPA_BINDINGS, .params = &params, .params_bytes = sizeof params,
                           .groups = groups};
    hk_dispatch_desc d2 = {.shader = HK_SHADER_SDPA_REDUCE, .spec = spec2, .spec_count = 3, .bindings = b2,
                           .binding_count = SDPA_BINDINGS, .params = &params, .params_bytes = sizeof params,
                           .groups = (uint64_t)desc->n_q * desc->n_heads *
                                     ((desc->head_dim / 4 + columns - 1) / columns)};
    /* both pipelines first, so that a failure records nothing */
    VkPipeline pipeline;
    VkPipelineLayout layout;
    VkDescriptorSetLayout set_layout;
    hk_status st = hk__pipeline_get(context, fn, &d1, &pipeline, &layout, &set_layout);
    if (st == HK_OK && !direct)
        st = hk__pipeline_get(context, fn, &d2, &pipeline, &layout, &set_layout);
    if (st != HK_OK)
        return st;
    /* without a stream, both passes go in one submit */
    hk_stream *s = stream ? stream : hk__immediate_begin(context);
    st = hk__dispatch(context, s, fn, &d1);
    if (st == HK_OK && !direct)
        st = hk__dispatch(context, s, fn, &d2);
    return stream ? st : hk__immediate_end(context, fn, st);
}
