/* Attention: argument checks for hk_sdpa_blk and hk_rope, the choice between flash-decoding and
 * flash attention, and flash-decoding itself (shaders/sdpa.comp). */
#include "attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HK_MAX_HEAD_DIM 256u
/* Flash-decoding folds at most 2048 keys per split and combines at most 1024 splits. */
#define HK_SDPA_MAX_CAPACITY 2097152u

/* A KV-cache type: head_dim's multiple (a Q8_0 block, else 16), values per 16-byte chunk of a row
 * (the flash-decoding shader's CD: a quarter Q8_0 block), flash-decoding's shaders [shuffle][wide]
 * (wide: 16-byte loads; Q8_0 has none). The types hk_sdpa_blk and hk_rope take. */
typedef struct kv_type {
    int takes;
    uint32_t multiple, chunk;
    int decode[2][2];
} kv_type;

static const kv_type kv_types[HK_REF_TYPES] = {
    [HK_TYPE_F32] = {1, 16, 4, {{HK_SHADER_SDPA_F32_NS, HK_SHADER_SDPA_F32_NS},
                                {HK_SHADER_SDPA_F32, HK_SHADER_SDPA_F32_WIDE}}},
    [HK_TYPE_F16] = {1, 16, 8, {{HK_SHADER_SDPA_F16_NS, HK_SHADER_SDPA_F16_NS},
                                {HK_SHADER_SDPA_F16, HK_SHADER_SDPA_F16_WIDE}}},
    [HK_TYPE_Q8_0] = {1, 32, 8, {{HK_SHADER_SDPA_Q8_0_NS, HK_SHADER_SDPA_Q8_0_NS},
                                 {HK_SHADER_SDPA_Q8_0, HK_SHADER_SDPA_Q8_0}}},
};

hk_status hk__kv_layout_check(const char *fn, const hk_kv_layout *kv, uint32_t n_kv_heads, uint32_t head_dim,
                              uint64_t *k_bytes, uint64_t *v_bytes)
{
    if (!HK_TYPE_TAKES(kv_types, kv->type))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "kv.type=%s (%d) is not a KV-cache type (f32, f16, q8_0)",
                        hk_type_name(kv->type), (int)kv->type);
    uint32_t multiple = kv_types[kv->type].multiple;
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
    if (d->out_type != HK_TYPE_F32 && d->out_type != HK_TYPE_Q8_1)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_type=%s (%d) is not f32 or q8_1", hk_type_name(d->out_type),
                        (int)d->out_type);
    if (d->out_type == HK_TYPE_Q8_1 && d->head_dim % 32)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_type=q8_1 needs head_dim a multiple of 32, got %u",
                        d->head_dim);
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
    if (use_flash(context, desc)) {
        *out_bytes = hk__sdpa_flash_workspace(context, desc);
        return HK_OK;
    }
    return hk__sdpa_decode_workspace(context, fn, desc, out_bytes);
}

hk_status hk_sdpa_blk(hk_context *context, hk_stream *stream, const hk_sdpa_desc *desc, hk_view q, hk_view k_cache,
                      hk_view v_cache, hk_view out, hk_view workspace, hk_view seq_k_counter)
{
    static const char fn[] = "hk_sdpa_blk";
    static const char *const names[SDPA_BINDINGS] = {"q", "k_cache", "v_cache", "out", "workspace", "seq_k_counter"};
    hk_sdpa_call call = {.desc = desc};
    int has_workspace;
    uint64_t k_bytes, v_bytes;
    hk_status st = hk__optional_view(fn, "seq_k_counter", seq_k_counter, &call.has_counter);
    if (st == HK_OK)
        st = hk__optional_view(fn, "workspace", workspace, &has_workspace);
    if (st == HK_OK)
        st = check_desc(fn, context, desc, call.has_counter, &k_bytes, &v_bytes);
    if (st != HK_OK)
        return st;
    int flash = use_flash(context, desc);
    if (flash && desc->out_type == HK_TYPE_Q8_1)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "out_type=q8_1 is written by flash-decoding only, and this shape "
                        "runs flash attention (hk_sdpa_path: %s)", hk__sdpa_flash_arm(context, desc));
    uint64_t ws = 0;
    if (flash)
        ws = hk__sdpa_flash_workspace(context, desc);
    else if ((st = hk__sdpa_decode_workspace(context, fn, desc, &ws)) != HK_OK)
        return st;
    if (ws && !has_workspace)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "workspace is NULL but this shape needs %llu bytes "
                        "(hk_sdpa_workspace_bytes)", (unsigned long long)ws);
    uint64_t qo_bytes = (uint64_t)desc->n_q * desc->n_heads * desc->head_dim * 4;
    hk_view none = {q.buffer, q.offset};
    call.b[SDPA_Q] = (hk_binding){q, qo_bytes, 4, 0, 0};
    call.b[SDPA_K] = (hk_binding){k_cache, k_bytes, hk_type_alignment(desc->kv.type), 0, 0};
    call.b[SDPA_V] = (hk_binding){v_cache, v_bytes, hk_type_alignment(desc->kv.type), 0, 0};
    uint64_t out_bytes = desc->out_type == HK_TYPE_Q8_1 ? qo_bytes / 4 / 32 * 36 : qo_bytes;
    call.b[SDPA_OUT] = (hk_binding){out, out_bytes, 4, 1, 0};
    call.b[SDPA_WORKSPACE] = ws ? (hk_binding){workspace, ws, 4, 1, 0} : (hk_binding){none, 0, 1, 0, 0};
    call.b[SDPA_COUNTER] = call.has_counter ? (hk_binding){seq_k_counter, 4, 4, 0, 0} : (hk_binding){none, 0, 1, 0, 0};
    call.k_row_bytes = hk_type_bytes(desc->kv.type, desc->head_dim);
    st = hk__check_bindings(context, stream, fn, names, call.b, SDPA_BINDINGS);
    if (st != HK_OK)
        return st;
    return flash ? hk__sdpa_flash(context, stream, fn, &call) : hk__sdpa_decode(context, stream, fn, &call);
}

/* ---- flash-decoding ---- */

/* Keys one split folds at most and splits at most: with them every invocation's loop trips stay
 * bounded (lavapipe ends a shader after 65535 loop iterations; sdpa_trips counts them) and
 * kv.capacity is at most their product. */
#define SDPA_MAX_CHUNK 2048u
#define SDPA_MAX_SPLITS 1024u
_Static_assert(SDPA_MAX_CHUNK * SDPA_MAX_SPLITS == HK_SDPA_MAX_CAPACITY, "capacity limit");
#define SDPA_MAX_TRIPS 60000u
/* Query rows (query heads of one kv head, times queries) per workgroup: K/V rows are read once
 * per this many rows (GQA 8 reads them once). */
#define SDPA_MAX_ROWS 8u
/* Workgroups of 128 invocations; with 16 lanes per key (one 16-byte chunk of a 128-wide f16 row
 * each) that is 8 key groups, each taking 8 keys per batch: 64 keys, 32 KiB of K and V in flight
 * per workgroup. */
#define SDPA_WG 128u
#define SDPA_MAX_LPK 16u
/* Workgroups the split count aims for: 32 splits per kv head, between 128 and 256 workgroups
 * (about one to two per SM of the H200's 132), with every load of a 2048-key decode in flight at
 * once (8 kv heads x 32 splits of 64 keys); fewer splits keep the combine (one workgroup reading
 * every split's partial) short. A CPU device runs a few at a time. */
#define SDPA_GPU_SPLITS_PER_KV_HEAD 32u
/* Keys a split may be raised to where that keeps the splits holding keys within one batch of the
 * combine's loads: a short count (a decode step early in a long cache) then wakes fewer splits
 * while each runs at most two key batches; a count of capacity keeps every split. */
#define SDPA_SPLIT_KEYS 128u
#define SDPA_GPU_GROUPS_MIN 128u
#define SDPA_GPU_GROUPS_MAX 256u
/* A long cache on a GPU: splits of at most this many keys while the workgroups stay within
 * SDPA_GPU_GROUPS_MAX, so each kv head's keys stream through more SMs (Hkv 4 with 2 row chunks
 * otherwise folds 2048 keys a split). */
#define SDPA_LONG_SPLIT_KEYS 1024u
#define SDPA_CPU_GROUPS 16u
/* A short head-major f16 or f32 cache on a GPU (a capacity of at most SDPA_SHORT_CAPACITY keys):
 * a query row per workgroup within SDPA_SHORT_GROUPS workgroups, and the partials combined by a
 * second dispatch. Its few keys then stream through every SM, each kv head's keys read once per
 * query head from L2, and no split waits on the arrival's chain of fences and flag reads. */
#define SDPA_SHORT_CAPACITY 8192u
#define SDPA_SHORT_GROUPS 512u

typedef struct sdpa_plan {
    uint32_t wg;     /* invocations per workgroup */
    uint32_t rows;   /* HK_R */
    uint32_t lpk;    /* HK_LPK lanes per key */
    uint32_t kb;     /* HK_KB keys per key group and batch */
    uint32_t work;   /* HK_WORK floats of the merge array */
    uint32_t chunks; /* row chunks per kv head */
    uint32_t splits;
    uint32_t align;  /* keys per workgroup batch: a split's keys are a multiple of it */
    uint32_t split_min; /* keys a split may be raised to (a multiple of align, at most a split's most) */
    int single;      /* the last split combines (one dispatch) */
    int shuffle;     /* the shader variant with subgroup shuffles */
    uint32_t target; /* workgroups the split count aimed for */
} sdpa_plan;

/* values per chunk (16 bytes of f16/f32, a quarter Q8_0 block), as the shader's CD */
static uint32_t chunk_values(hk_type type) { return kv_types[type].chunk; }

static uint32_t pow2_floor(uint32_t x)
{
    uint32_t p = 1;
    while (p * 2 <= x)
        p *= 2;
    return p;
}

/* Shared memory of pass 1 in floats: the key groups' (max, sum), the merge array, common.glsl's
 * reduction array, the arrival words. */
static uint32_t shared_floats(uint32_t wg, uint32_t lpk, uint32_t rows, uint32_t work)
{
    return 2 * (wg / lpk) * rows + work + wg + 2 * rows + 2;
}

/* Loop iterations one invocation of pass 1 runs at most, counting every loop of sdpa.comp as if
 * nothing were unrolled, for splits of `chunk` keys (lanes of a subgroup of `sg` for the
 * shuffle-free variant's sums). */
static uint64_t sdpa_trips(const sdpa_plan *p, uint32_t d, hk_type type, uint32_t chunk, uint32_t sg)
{
    uint64_t cd = chunk_values(type), cv = cd / 4, nc = d / cd, ncl = (nc + p->lpk - 1) / p->lpk;
    uint64_t r = p->rows, kb = p->kb, nkg = p->wg / p->lpk, kgb = p->work / (r * d), dpt = (d + p->wg - 1) / p->wg;
    uint64_t log2l = 0;
    while ((1u << log2l) < p->lpk)
        log2l++;
    uint64_t sums = p->shuffle ? log2l + log2l * kb * r : kb * r + kb * r * (sg / p->lpk + 1);
    uint64_t batch = (kb + kb * ncl)                                          /* loads */
                     + (kb + kb * r + kb * ncl + kb * ncl * r + kb * ncl * r * cv) /* Q.K */
                     + sums + (r + 2 * r * kb + r * ncl * cv)                 /* softmax */
                     + (kb + kb * ncl + kb * ncl * r + kb * ncl * r * cv) + 1; /* P.V */
    uint64_t batches = (chunk + p->align - 1) / p->align;
    uint64_t rounds = (nkg + kgb - 1) / kgb;
    uint64_t start = 2 * r + 2 * r * ncl + r * ncl * cv + r * ncl * cv;
    uint64_t merge = r + 2 * nkg + r * (ncl * cv + 1) + r * dpt +
                     rounds * (1 + r * (1 + ncl + ncl * cv * 5) + r * (1 + dpt + dpt * kgb)) + r * (1 + dpt);
    uint64_t combine = (r * d / 4 / p->wg + 1) * ((SDPA_MAX_SPLITS + 15) / 16 + 1) * (3 * 16 + 1); /* SB = 16 */
    uint64_t flags = SDPA_MAX_SPLITS / p->wg + 1;
    return start + batches * batch + merge + flags + combine;
}

/* Everything here depends on the shape, kv.capacity, the device and the tuning hooks, never on
 * seq_k, so the workspace and the recorded dispatch serve any count a replay brings. */
static hk_status make_plan_with(const hk_context *context, const char *fn, const hk_sdpa_desc *desc,
                                const hk__sched *sched, sdpa_plan *p);

/* Its shape class (hk_tune): heads, head_dim and kv.capacity's power-of-two range, never seq_k. */
static void key_decode(char key[HK_TUNE_SHAPE_CHARS], const hk_sdpa_desc *d)
{
    char cap[32];
    hk__tune_bucket(cap, sizeof cap, d->kv.capacity);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:h%u/kv%u/d%u/cap%s", hk_type_name(d->kv.type), d->n_heads, d->n_kv_heads,
             d->head_dim, cap);
}

/* The autotuner's schedule for a one-query call (src/tune): the candidate being measured on this
 * thread, else the context's cached winner for this shape class; its key holds kv.capacity and
 * never seq_k, so a replayed stream keeps one plan. */
static int sdpa_sched(const hk_context *context, const hk_sdpa_desc *desc, hk__sched *out, int *source)
{
    *source = HK_SCHED_DEFAULT;
    if (desc->n_q != 1)
        return 0;
    char key[HK_TUNE_SHAPE_CHARS];
    key_decode(key, desc);
    if (hk__tune_lookup((hk_context *)context, &hk__tune_sdpa_decode, key, out, source))
        return 1;
    static const char *const hooks[] = {"HK_SDPA_GROUPS", "HK_SDPA_WG", "HK_SDPA_LPK",         "HK_SDPA_KB",
                                        "HK_SDPA_ROWS",   "HK_SDPA_SINGLE_PASS", "HK_SDPA_SHUFFLE", "HK_SDPA_SPLIT_KEYS"};
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
        if (hk__env_given(hooks[i]))
            *source = HK_SCHED_ENV;
    return 0;
}

/* The plan of a call and where its schedule came from. A cached winner that does not plan on
 * this device (only a hand-edited cache line can: winners are keyed by device and driver) falls
 * back to the default rather than failing the call. */
static hk_status plan_call(const hk_context *context, const char *fn, const hk_sdpa_desc *desc, sdpa_plan *p,
                           hk__sched *sched, int *source, int *tuned)
{
    *tuned = sdpa_sched(context, desc, sched, source);
    hk_status st = make_plan_with(context, fn, desc, *tuned ? sched : NULL, p);
    if (st != HK_OK && *tuned && *source == HK_SCHED_TUNED) {
        *tuned = 0;
        *source = HK_SCHED_DEFAULT;
        st = make_plan_with(context, fn, desc, NULL, p);
    }
    return st;
}

static hk_status make_plan(const hk_context *context, const char *fn, const hk_sdpa_desc *desc, sdpa_plan *p)
{
    hk__sched sched;
    int source, tuned;
    return plan_call(context, fn, desc, p, &sched, &source, &tuned);
}

/* SDPA_SHORT_CAPACITY's cache: every kv head's keys adjacent rows, f16 or f32 */
static int short_cache(const hk_sdpa_desc *desc)
{
    const hk_kv_layout *kv = &desc->kv;
    int head_major = desc->n_kv_heads == 1 || (kv->k_head_stride >= kv->k_row_stride && kv->v_head_stride >= kv->v_row_stride);
    return kv->capacity <= SDPA_SHORT_CAPACITY && head_major && (kv->type == HK_TYPE_F16 || kv->type == HK_TYPE_F32);
}

static hk_status make_plan_with(const hk_context *context, const char *fn, const hk_sdpa_desc *desc,
                                const hk__sched *sched, sdpa_plan *p)
{
    const hk_caps *caps = &context->caps;
    uint32_t d = desc->head_dim, group = desc->n_heads / desc->n_kv_heads;
    uint32_t nc = d / chunk_values(desc->kv.type);
    uint32_t sg = caps->subgroup_size_min && caps->subgroup_size_min < caps->subgroup_size ? caps->subgroup_size_min
                                                                                          : caps->subgroup_size;
    uint32_t sg_max = caps->subgroup_size_max > caps->subgroup_size ? caps->subgroup_size_max : caps->subgroup_size;
    uint64_t per_head = (uint64_t)desc->n_kv_heads * SDPA_GPU_SPLITS_PER_KV_HEAD;
    uint32_t gpu_groups = per_head < SDPA_GPU_GROUPS_MIN   ? SDPA_GPU_GROUPS_MIN
                          : per_head > SDPA_GPU_GROUPS_MAX ? SDPA_GPU_GROUPS_MAX
                                                           : (uint32_t)per_head;
    uint32_t shuffle, lpk, wg, max_rows, kb, target, single, split_keys = SDPA_SPLIT_KEYS;
    int auto_target = 0; /* the built-in target: the long-cache rule may raise the splits */
    hk_status st = HK_OK;
    if (sched) { /* a tuned schedule: no hook is read */
        shuffle = 1;
        target = sched->v[SD_GROUPS];
        wg = sched->v[SD_WG];
        lpk = sched->v[SD_LPK];
        kb = sched->v[SD_KB];
        max_rows = sched->v[SD_ROWS];
        single = sched->v[SD_SINGLE];
        goto planned;
    }
    st = hk__env_u32(fn, "HK_SDPA_SHUFFLE", 1, 0, 1, 0, &shuffle);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_SDPA_LPK", SDPA_MAX_LPK, 1, 64, 1, &lpk);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_SDPA_WG", SDPA_WG, 32, 1024, 1, &wg);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_SDPA_ROWS", 0, 1, SDPA_MAX_ROWS, 1, &max_rows);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_SDPA_KB", 0, 1, 16, 1, &kb);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_SDPA_GROUPS", context->profile.few_workgroups ? SDPA_CPU_GROUPS : gpu_groups, 1,
                         1u << 20, 0, &target);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_SDPA_SINGLE_PASS", 1, 0, 1, 0, &single);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_SDPA_SPLIT_KEYS", SDPA_SPLIT_KEYS, 0, SDPA_MAX_CHUNK, 0, &split_keys);
    if (st != HK_OK)
        return st;
    auto_target = !context->profile.few_workgroups && !hk__env_given("HK_SDPA_GROUPS");
    if (auto_target && short_cache(desc)) {
        target = SDPA_SHORT_GROUPS;
        auto_target = 0;
        if (!hk__env_given("HK_SDPA_ROWS"))
            max_rows = 1;
        if (!hk__env_given("HK_SDPA_SINGLE_PASS"))
            single = 0;
    }
planned:
    p->shuffle = shuffle && context->profile.subgroup_shuffle;
    p->single = (int)single;
    /* lanes of a key group share a subgroup of any size the device may give */
    uint32_t lim = pow2_floor(nc) < sg ? pow2_floor(nc) : pow2_floor(sg);
    p->lpk = lpk < lim ? lpk : lim;
    if (wg < sg_max)
        wg = sg_max;
    if (wg < p->lpk)
        wg = p->lpk;
    if (wg > caps->max_workgroup_size)
        wg = pow2_floor(caps->max_workgroup_size);
    p->wg = wg;
    uint64_t rows_per_kv = (uint64_t)desc->n_q * group;
    uint32_t ncl = (nc + p->lpk - 1) / p->lpk;
    /* q and the accumulators of a lane's chunks stay in registers: at most 64 floats each
     * (rows x chunks per lane x values per chunk; larger arrays also take lavapipe's compiler
     * minutes). Unless a hook or the tuner asks for more rows, 32: at 64 the batch's loads no
     * longer fit beside them in NVIDIA's 255 registers a lane (docs/perf.md), e.g. 4 rows of a
     * 128-wide f16 row over 16 lanes, 2 of a 256-wide one. */
    uint32_t rows = 1, lane_values = ncl * chunk_values(desc->kv.type), lane_floats = max_rows ? 64 : 32;
    if (!max_rows)
        max_rows = SDPA_MAX_ROWS;
    while (rows < max_rows && rows < rows_per_kv && 2 * rows * lane_values <= lane_floats)
        rows *= 2;
    /* the batch's loads and scores stay in registers: about 32 (key, row, chunk) triples */
    if (!kb) {
        uint32_t want = 32 / (rows * ncl);
        kb = want < 1 ? 1 : want > 8 ? 8 : pow2_floor(want);
    }
    uint32_t nkg = p->wg / p->lpk, kgb = nkg;
    /* fit the device's shared memory: fewer key groups merged per round, then fewer rows */
    uint32_t budget = caps->shared_memory_bytes / 4;
    while (shared_floats(p->wg, p->lpk, rows, kgb * rows * d) > budget && (kgb > 1 || rows > 1)) {
        if (kgb > 1)
            kgb /= 2;
        else
            rows /= 2;
    }
    if (shared_floats(p->wg, p->lpk, rows, kgb * rows * d) > budget)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "flash-decoding with %u invocations, %u lanes per key and head_dim=%u "
                        "needs more shared memory than the device's %u bytes", p->wg, p->lpk, d,
                        caps->shared_memory_bytes);
    while (kb > 1 && nkg * kb > SDPA_MAX_CHUNK)
        kb /= 2;
    p->rows = rows;
    p->kb = kb;
    p->work = kgb * rows * d;
    p->align = nkg * kb;
    uint64_t chunks = (rows_per_kv + rows - 1) / rows, base = chunks * desc->n_kv_heads;
    /* the keys one split may fold: SDPA_MAX_CHUNK, less where the loops would run too long */
    uint32_t max_chunk = SDPA_MAX_CHUNK;
    while (max_chunk > p->align && sdpa_trips(p, d, desc->kv.type, max_chunk, sg_max) > SDPA_MAX_TRIPS)
        max_chunk /= 2;
    if (sdpa_trips(p, d, desc->kv.type, max_chunk, sg_max) > SDPA_MAX_TRIPS)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "flash-decoding with these tuning hooks runs too many loop "
                        "iterations per invocation for head_dim=%u (%s cache)", d, hk_type_name(desc->kv.type));
    uint64_t least = (desc->kv.capacity + max_chunk - 1) / max_chunk;
    if (least > SDPA_MAX_SPLITS)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "kv.capacity=%u needs more than %u splits of %u keys with these "
                        "tuning hooks", desc->kv.capacity, SDPA_MAX_SPLITS, max_chunk);
    uint64_t want = (target + base - 1) / base;
    if (auto_target) {
        uint64_t long_split = (desc->kv.capacity + SDPA_LONG_SPLIT_KEYS - 1) / SDPA_LONG_SPLIT_KEYS,
                 room = SDPA_GPU_GROUPS_MAX / base;
        if (long_split > want) {
            want = long_split < room ? long_split : want > room ? want : room;
            target = (uint32_t)(want * base); /* what the plan reports */
        }
    }
    uint64_t most = (desc->kv.capacity + p->align - 1) / p->align;
    if (most > SDPA_MAX_SPLITS)
        most = SDPA_MAX_SPLITS;
    if (want > most)
        want = most;
    if (want < least)
        want = least;
    p->target = target;
    p->chunks = chunks > UINT32_MAX ? UINT32_MAX : (uint32_t)chunks;
    p->splits = (uint32_t)want;
    /* max_chunk and align are powers of two, max_chunk >= align */
    p->split_min = (split_keys + p->align - 1) / p->align * p->align;
    if (p->split_min < p->align)
        p->split_min = p->align;
    if (p->split_min > max_chunk)
        p->split_min = max_chunk;
    return HK_OK;
}

hk_status hk__sdpa_decode_workspace(const hk_context *context, const char *fn, const hk_sdpa_desc *desc,
                                    uint64_t *out_bytes)
{
    sdpa_plan p;
    *out_bytes = 0;
    hk_status st = make_plan(context, fn, desc, &p);
    if (st != HK_OK || p.splits == 1)
        return st; /* one split writes the output directly */
    /* the partials, then the arrival words of each (kv head, row chunk) */
    uint64_t rows = (uint64_t)desc->n_q * desc->n_heads;
    *out_bytes = (rows * p.splits * (desc->head_dim + 2) + (uint64_t)desc->n_kv_heads * p.chunks * (p.splits + 2)) * 4;
    return HK_OK;
}

typedef struct sdpa_params {
    uint32_t n_q, n_heads, group, seq_k, flags, capacity, n_splits, split_align, split_min, n_chunks;
    uint32_t k_row, k_head, v_row, v_head;
    float scale_log2;
} sdpa_params;

enum { SDPA_F_COUNTER = 1, SDPA_F_CAUSAL = 2, SDPA_F_DIRECT = 4, SDPA_F_SINGLE = 8, SDPA_F_Q8_1 = 16 };

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
    hk__sched sched;
    int source, tuned;
    hk_status st = plan_call(context, fn, desc, &p, &sched, &source, &tuned);
    if (st != HK_OK)
        return st;
    uint64_t groups = (uint64_t)desc->n_kv_heads * p.chunks * p.splits;
    if (groups > (uint64_t)65535 * 65535)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_q=%u x n_heads=%u needs %llu workgroups, more than one dispatch allows",
                        desc->n_q, desc->n_heads, (unsigned long long)groups);
    int direct = p.splits == 1, single = p.single && !direct;
    sdpa_params params = {
        .n_q = desc->n_q,
        .n_heads = desc->n_heads,
        .group = desc->n_heads / desc->n_kv_heads,
        .seq_k = call->has_counter ? 0 : desc->seq_k,
        .flags = (call->has_counter ? SDPA_F_COUNTER : 0) | (desc->causal ? SDPA_F_CAUSAL : 0) |
                 (direct ? SDPA_F_DIRECT : 0) | (single ? SDPA_F_SINGLE : 0) |
                 (desc->out_type == HK_TYPE_Q8_1 ? SDPA_F_Q8_1 : 0),
        .capacity = kv->capacity,
        .n_splits = p.splits,
        .split_align = p.align,
        .split_min = p.split_min,
        .n_chunks = p.chunks,
        /* strides that are used stay below the views' spans, which the device can bind */
        .k_row = kv->capacity > 1 ? (uint32_t)kv->k_row_stride : 0,
        .k_head = desc->n_kv_heads > 1 ? (uint32_t)kv->k_head_stride : 0,
        .v_row = kv->capacity > 1 ? (uint32_t)kv->v_row_stride : 0,
        .v_head = desc->n_kv_heads > 1 ? (uint32_t)kv->v_head_stride : 0,
        .scale_log2 = (float)((double)desc->scale * 1.4426950408889634),
    };
    if (tuned && sched.plant && !call->has_counter)
        params.seq_k = (desc->seq_k + 1) / 2; /* testing only: a candidate that skips half the keys */
    /* Two passes: pass 1 writes the workspace, pass 2 reads it and writes the output; each pass
     * declares only what it touches, so the stream orders them and nothing else. One pass (a
     * single split, or the last split combining) declares everything. */
    int two = !direct && !single;
    hk_binding b1[SDPA_BINDINGS], b2[SDPA_BINDINGS];
    for (int i = 0; i < SDPA_BINDINGS; i++) {
        b1[i] = call->b[i];
        b2[i] = (hk_binding){call->b[SDPA_Q].view, 0, 1, 0, 0};
    }
    if (two) {
        b1[SDPA_OUT] = b2[SDPA_OUT];
        b2[SDPA_OUT] = call->b[SDPA_OUT];
        b2[SDPA_WORKSPACE] = call->b[SDPA_WORKSPACE];
        b2[SDPA_WORKSPACE].writes = 0;
        b2[SDPA_COUNTER] = call->b[SDPA_COUNTER];
    }
    uint32_t spec[6] = {p.wg, desc->head_dim, p.rows, p.lpk, p.kb, p.work};
    hk_dispatch_desc d1 = {.shader = kv_types[kv->type].decode[p.shuffle][wide_ok(call)], .spec = spec,
                           .spec_count = 6, .bindings = b1, .binding_count = SDPA_BINDINGS, .params = &params,
                           .params_bytes = sizeof params, .groups = groups};
    hk_dispatch_desc d2 = {.shader = HK_SHADER_SDPA_REDUCE, .spec = spec, .spec_count = 6, .bindings = b2,
                           .binding_count = SDPA_BINDINGS, .params = &params, .params_bytes = sizeof params,
                           .groups = (uint64_t)desc->n_kv_heads * p.chunks};
    /* both pipelines first, so that a failure records nothing */
    VkPipeline pipeline;
    VkPipelineLayout layout;
    VkDescriptorSetLayout set_layout;
    st = hk__pipeline_get(context, fn, &d1, &pipeline, &layout, &set_layout);
    if (st == HK_OK && two)
        st = hk__pipeline_get(context, fn, &d2, &pipeline, &layout, &set_layout);
    if (st != HK_OK)
        return st;
    /* what served the call, as the tuner names it (groups: the target the splits came from) */
    const uint32_t served[SD_PARAMS] = {p.target, p.wg, p.lpk, p.kb, p.rows, (uint32_t)p.single};
    if (!two) {
        st = hk__dispatch(context, stream, fn, &d1);
    } else {
        /* without a stream, both passes go in one submit */
        hk_stream *s = stream ? stream : hk__immediate_begin(context);
        st = hk__dispatch(context, s, fn, &d1);
        if (st == HK_OK)
            st = hk__dispatch(context, s, fn, &d2);
        st = stream ? st : hk__immediate_end(context, fn, st);
    }
    if (st == HK_OK && desc->n_q == 1)
        hk__tune_note(context, &hk__tune_sdpa_decode, served, source);
    return st;
}

/* ---- autotuner (src/tune) ---- */

static int feasible_decode(const hk_context *context, const hk_tune_desc *tdesc, const uint32_t *v, uint32_t sig[8],
                           char *why, size_t why_size)
{
    hk_sdpa_desc sd;
    hk__tune_sdpa_desc(tdesc, &sd);
    const hk_sdpa_desc *desc = &sd;
    const hk_caps *caps = &context->caps;
    uint32_t sg_min = caps->subgroup_size_min && caps->subgroup_size_min < caps->subgroup_size ? caps->subgroup_size_min
                                                                                              : caps->subgroup_size;
    uint32_t sg_max = caps->subgroup_size_max > caps->subgroup_size ? caps->subgroup_size_max : caps->subgroup_size;
    uint32_t nc = desc->head_dim / chunk_values(desc->kv.type);
    if (v[SD_WG] > caps->max_workgroup_size) {
        snprintf(why, why_size, "workgroup of %u over the device's %u", v[SD_WG], caps->max_workgroup_size);
        return 0;
    }
    if (v[SD_WG] < sg_max) {
        snprintf(why, why_size, "subgroup mismatch: workgroup of %u under the largest subgroup %u", v[SD_WG], sg_max);
        return 0;
    }
    if (v[SD_LPK] > sg_min) {
        snprintf(why, why_size, "subgroup mismatch: %u lanes per key over the smallest subgroup %u", v[SD_LPK], sg_min);
        return 0;
    }
    if (v[SD_LPK] > nc) {
        snprintf(why, why_size, "invalid: %u lanes per key over the %u 16-byte chunks of a row", v[SD_LPK], nc);
        return 0;
    }
    if (v[SD_LPK] > v[SD_WG]) {
        snprintf(why, why_size, "invalid: %u lanes per key over the workgroup of %u", v[SD_LPK], v[SD_WG]);
        return 0;
    }
    hk__sched s = {{0}, 0};
    for (int i = 0; i < SD_PARAMS; i++)
        s.v[i] = v[i];
    sdpa_plan p;
    if (make_plan_with(context, "hk_tune", desc, &s, &p) != HK_OK) {
        snprintf(why, why_size, "%s", hk_last_error());
        return 0;
    }
    if (p.wg != v[SD_WG] || p.lpk != v[SD_LPK]) {
        snprintf(why, why_size, "invalid: wg=%u lpk=%u run as wg=%u lpk=%u on this device", v[SD_WG], v[SD_LPK], p.wg,
                 p.lpk);
        return 0;
    }
    if (p.rows != v[SD_ROWS]) {
        snprintf(why, why_size, "invalid: %u rows per workgroup do not fit (registers or shared memory: %u)",
                 v[SD_ROWS], p.rows);
        return 0;
    }
    if (p.kb != v[SD_KB]) {
        snprintf(why, why_size, "invalid: %u keys per batch exceed the split (%u taken)", v[SD_KB], p.kb);
        return 0;
    }
    if (sig) {
        const uint32_t plan[8] = {p.wg, p.lpk, p.kb, p.rows, p.work, p.splits, (uint32_t)(p.single && p.splits > 1),
                                  p.align};
        for (int i = 0; i < 8; i++)
            sig[i] = plan[i];
    }
    return 1;
}

void hk__tune_sdpa_desc(const hk_tune_desc *desc, hk_sdpa_desc *out)
{
    const hk_tune_attention_shape *a = &desc->shape.attention;
    int prefill = desc->kernel == HK_TUNE_FLASH_PREFILL;
    uint64_t row = hk_type_bytes(a->kv_type, a->head_dim);
    memset(out, 0, sizeof *out);
    out->n_q = prefill ? a->n_q : 1;
    out->n_heads = a->n_heads;
    out->n_kv_heads = a->n_kv_heads;
    out->head_dim = a->head_dim;
    out->seq_k = a->capacity;
    out->scale = a->head_dim ? 1.0f / sqrtf((float)a->head_dim) : 1.0f;
    out->causal = prefill && a->causal;
    out->kv = (hk_kv_layout){a->kv_type, a->capacity, row, row * a->capacity, row, row * a->capacity};
}

hk_status hk__tune_sdpa_shape(const hk_context *context, const hk_tune_desc *desc, hk_sdpa_desc *out)
{
    static const char fn[] = "hk_tune";
    const hk_tune_attention_shape *a = &desc->shape.attention;
    int prefill = desc->kernel == HK_TUNE_FLASH_PREFILL;
    if (prefill ? a->n_q < 2 : a->n_q > 1)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_q=%u is not %s", a->n_q,
                        prefill ? "2 or more (HK_TUNE_FLASH_PREFILL)" : "0 or 1 (HK_TUNE_SDPA_DECODE)");
    hk__tune_sdpa_desc(desc, out);
    uint64_t k_bytes, v_bytes;
    hk_status st = check_desc(fn, context, out, 0, &k_bytes, &v_bytes);
    if (st != HK_OK)
        return st;
    uint64_t cache = (uint64_t)a->n_kv_heads * a->capacity * a->head_dim, q = (uint64_t)out->n_q * a->n_heads * a->head_dim;
    if (cache > (1ull << 26))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_kv_heads x capacity x head_dim = %llu is more than the "
                        "tuner's 2^26 values", (unsigned long long)cache);
    if ((st = hk__tune_check_sizes(cache, q, q)) != HK_OK)
        return st;
    const char *path = hk_sdpa_path((hk_context *)context, out);
    if (prefill == !strcmp(path ? path : "decode", "decode"))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "%s", prefill ? "flash attention does not serve this shape on this "
                        "device (hk_sdpa_path: decode)" : "internal: a one-query call runs as flash attention");
    return HK_OK;
}

void hk__tune_sdpa_case(const hk_tune_desc *desc, hk_case_shape *out)
{
    const hk_tune_attention_shape *a = &desc->shape.attention;
    int prefill = desc->kernel == HK_TUNE_FLASH_PREFILL;
    *out = (hk_case_shape){a->kv_type,
                           {prefill ? a->n_q : 1, a->n_heads, a->n_kv_heads, a->head_dim, a->capacity, a->capacity,
                            (uint32_t)(prefill && a->causal), 0},
                           0,
                           0};
}

static hk_status shape_decode(const hk_context *context, const hk_tune_desc *desc, char key[HK_TUNE_SHAPE_CHARS])
{
    hk_sdpa_desc sd;
    hk_status st = hk__tune_sdpa_shape(context, desc, &sd);
    if (st == HK_OK)
        key_decode(key, &sd);
    return st;
}

extern const hk_case hk_case_sdpa; /* src/cases/cases_attention.c */

const hk__tunable hk__tune_sdpa_decode = {HK_TUNE_SDPA_DECODE,
                                          "sdpa_decode",
                                          SD_PARAMS,
                                          {{"groups", 7, {8, 16, 32, 64, 128, 256, 512}, 1, 1u << 20, 0},
                                           {"wg", 4, {32, 64, 128, 256}, 32, 1024, 1},
                                           {"lpk", 4, {2, 4, 8, 16}, 1, 64, 1},
                                           {"kb", 4, {1, 2, 4, 8}, 1, 16, 1},
                                           {"rows", 4, {1, 2, 4, 8}, 1, 8, 1},
                                           {"single", 2, {0, 1}, 0, 1, 0}},
                                          shape_decode,
                                          feasible_decode,
                                          &hk_case_sdpa,
                                          hk__tune_sdpa_case,
                                          0};

/* ---- hk_context_prepare ---- */

const uint32_t hk__prep_head_dims[HK_PREP_HEAD_DIMS] = {64, 128, 256};

hk_kv_layout hk__prep_kv(hk_type type, uint32_t head_dim, uint32_t capacity)
{
    uint64_t row = hk_type_bytes(type, head_dim);
    return (hk_kv_layout){type, capacity, row, row * capacity, row, row * capacity};
}

/* decode (one query) and prefill (a causal chunk), every KV type and head size, with seq_k given
 * and from a counter, short and long key ranges */
static hk_status prepare_sdpa(hk__prep *p)
{
    static const uint32_t n_qs[] = {1, 4, 64}, seq_ks[] = {64, 4096};
    hk_type types[8];
    uint32_t n_types = hk__types_of(HK_REF_ROLE_KV, types);
    hk_view none = {NULL, 0};
    for (uint32_t t = 0; t < n_types; t++)
        for (int h = 0; h < HK_PREP_HEAD_DIMS; h++)
            for (int q = 0; q < 3; q++)
                for (int sk = 0; sk < 2; sk++)
                    for (int counter = 0; counter < 2; counter++) {
                        hk_sdpa_desc d = {.n_q = n_qs[q], .n_heads = 8, .n_kv_heads = 2,
                                          .head_dim = hk__prep_head_dims[h], .seq_k = seq_ks[sk], .scale = 0.125f,
                                          .causal = n_qs[q] > 1,
                                          .kv = hk__prep_kv(types[t], hk__prep_head_dims[h], 4096)};
                        uint64_t ws = 0;
                        HK_PREP_TRY(p, hk_sdpa_workspace_bytes(p->ctx, &d, &ws));
                        HK_PREP_TRY(p, hk_sdpa_blk(p->ctx, p->s, &d, hk__prep_view(p, 0), hk__prep_view(p, 1),
                                                   hk__prep_view(p, 2), hk__prep_view(p, 3),
                                                   ws ? hk__prep_view(p, 4) : none,
                                                   counter ? hk__prep_view(p, 5) : none));
                    }
    return HK_OK;
}

const hk__family hk__family_sdpa = {"hk_sdpa_blk", prepare_sdpa, {&hk__tune_sdpa_decode, &hk__tune_flash_prefill}};
