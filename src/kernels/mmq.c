/* Prefill int8 GEMM (shaders/mmq.comp): hk_mmq, the expert-indexed hk_mmq_id, and the MoE slot
 * grouping hk_moe_expert_rows (shaders/moe_rows.comp). The arm is picked per device:
 *  - coopmat: int8 x int8 -> int32 cooperative matrices (KHR, 16x16x32 s8 listed by the device),
 *    one subgroup per warp of the tiling, full subgroups of the device's size;
 *  - dot / scalar: the same tiling with packed int8 dot products (or their plain-arithmetic twin
 *    where the device has no shaderIntegerDotProduct), no subgroup requirement.
 * The tile is a set of specialization constants (mmq_tile) picked by shape; the environment
 * overrides it and the staging options, for tuning (include/hkernel.h lists the variables). */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ARM_COOPMAT, ARM_DOT, ARM_SCALAR, ARM_COUNT };
static const char *const arm_names[ARM_COUNT] = {"coopmat", "dot", "scalar"};

#define NO_SHADER (-1)
#ifdef HK_HAVE_SHADER_MMQ_Q8_0_CM
#define CM(p, t) HK_SHADER_##p##_##t##_CM
#else
#define CM(p, t) NO_SHADER
#endif
#ifdef HK_HAVE_SHADER_MMQ_Q8_0_DOT
#define DOT(p, t) HK_SHADER_##p##_##t##_DOT
#else
#define DOT(p, t) NO_SHADER
#endif
#define ARMS(p, t) {CM(p, t), DOT(p, t), HK_SHADER_##p##_##t##_SCALAR}
/* [expert-indexed][type: Q8_0, Q4_K, Q6_K][arm] */
static const int shaders[2][3][ARM_COUNT] = {{ARMS(MMQ, Q8_0), ARMS(MMQ, Q4_K), ARMS(MMQ, Q6_K)},
                                             {ARMS(MMQ_ID, Q8_0), ARMS(MMQ_ID, Q4_K), ARMS(MMQ_ID, Q6_K)}};

/* Invocations per warp of the portable arms (they use no subgroup operation: any device runs them). */
#define PORTABLE_LANES 32u
/* Lavapipe stops a shader's loops after 65535 iterations per invocation. Every loop of mmq.comp
 * but three has a trip count fixed by the specialization constants and is unrolled ([[unroll]];
 * lavapipe unrolls them as well, or the k = 65536 tests would fail); the three are the row-tile
 * loop (one trip dense), the staging of srow (ceil(BM / WG) per tile) and the k-step loop
 * (ceil(k / 32 / KS) per tile: at most 2048 at the k limit). The expert-indexed kernel launches
 * enough row groups per expert that its grid stride stays within MMQ_ITER_BUDGET iterations
 * whatever the routing. */
#define MMQ_MAX_K 65536u
#define MMQ_ITER_BUDGET 8192u
/* hk_moe_expert_rows: one workgroup; its shared arrays hold NE_CAP experts. */
#define ROWS_WG 128u
#define ROWS_MAX_EXPERTS 1024u
#define ROWS_MAX_SLOTS 262144u

/* warp grid (wm x wn), subtiles per warp (rm x rn), 32-value blocks per k step (ks) */
typedef struct mmq_tile {
    uint32_t wm, wn, rm, rn, ks;
} mmq_tile;

/* mmq.comp's FLAGS (specialization constant 6) */
#define FLAG_PREFETCH 1u /* register double buffering of the k steps */
#define FLAG_GENERIC 2u  /* coopmat: the learnt element ownership even where the fixed one holds */

/* Default tiles, by arm; the dense coopmat tile by the number of workgroups the shape yields.
 * coopmat: 128 x 64 tiles of 8 subgroups with 2 x 2 subtiles each and 128-value k steps; shapes
 * with fewer than DENSE_BIG_GROUPS such tiles (a 512-token prompt against n < 3840) take 64 x 64
 * tiles of 4 subgroups. The expert-indexed form: 32 x 128 tiles of 4 subgroups (an expert of
 * Qwen3-30B-A3B gets 32 rows on average at 512 tokens). Portable: 32 x 32 tiles, one subtile per
 * warp, 64-value steps (lavapipe, which runs the tests, takes seconds to build each pipeline, and
 * twice as long for twice the unrolled step). */
static const mmq_tile dense_big = {4, 2, 2, 2, 4}, dense_small = {2, 2, 2, 2, 4}, id_coopmat = {1, 4, 2, 2, 4};
static const mmq_tile dense_portable = {2, 2, 1, 1, 2}, id_portable = {1, 2, 2, 1, 2};
#define DENSE_BIG_GROUPS 240u

static int type_index(hk_type t) { return t == HK_TYPE_Q8_0 ? 0 : t == HK_TYPE_Q4_K ? 1 : t == HK_TYPE_Q6_K ? 2 : -1; }

/* The device offers s8 x s8 -> s32 16x16x32 subgroup matrices (not saturating), with full
 * subgroups of its size, and the int8 arithmetic the matrix types need. */
static int coopmat_usable(const hk_context *context)
{
    const hk_caps *c = &context->caps;
    uint32_t need = HK_FEATURE_COOPMAT_KHR | HK_FEATURE_SUBGROUP_SIZE_CONTROL | HK_FEATURE_INT8;
    if ((context->features & need) != need || c->subgroup_size < 4 || c->subgroup_size > 256 ||
        (c->subgroup_size & (c->subgroup_size - 1)))
        return 0;
    for (uint32_t i = 0; i < c->coopmat_khr_count; i++) {
        const hk_coopmat_props *p = &c->coopmat_khr_props[i];
        if (p->m == 16 && p->n == 16 && p->k == 32 && p->a_type == 3 /* SINT8 */ && p->b_type == 3 &&
            p->c_type == 5 /* SINT32 */ && p->result_type == 5 && !p->saturating && p->scope == 3 /* subgroup */)
            return 1;
    }
    return 0;
}

static int pick_arm(const hk_context *context, int id, int t)
{
    if (shaders[id][t][ARM_COOPMAT] != NO_SHADER && coopmat_usable(context))
        return ARM_COOPMAT;
    if (shaders[id][t][ARM_DOT] != NO_SHADER && (context->features & HK_FEATURE_INTEGER_DOT))
        return ARM_DOT;
    return ARM_SCALAR;
}

const char *hk_mmq_path(hk_context *context, hk_type wtype)
{
    int t = type_index(wtype);
    return context && t >= 0 ? arm_names[pick_arm(context, 0, t)] : NULL;
}

static uint32_t lanes_of(const hk_context *context, int arm)
{
    return arm == ARM_COOPMAT ? context->caps.subgroup_size : PORTABLE_LANES;
}

/* Shared memory the shader declares for a tile (mmq.comp; common.glsl adds a float per invocation). */
static uint64_t tile_shared_bytes(const mmq_tile *tl, int t, int arm, uint32_t lanes)
{
    uint64_t bm = tl->wm * tl->rm * 16ull, bn = tl->wn * tl->rn * 16ull, sv = 2ull * tl->ks + 1;
    /* quant tiles (uvec4), X d, W factors (one float for Q8_0, two else), srow */
    uint64_t bytes = (bm + bn) * sv * 16 + tl->ks * bm * 4 + tl->ks * bn * (t == 0 ? 4 : 8) + bm * 4;
    if (arm == ARM_COOPMAT)
        bytes += 1024 + 4 + (t == 2 ? 512 : 0);
    return bytes + 4ull * tl->wm * tl->wn * lanes;
}

static int env_flag(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && *v ? strcmp(v, "0") != 0 : fallback;
}

/* The tile for this call: the default for the shape, or the override from the environment
 * (checked). */
static hk_status get_tile(hk_context *context, const char *fn, int id, int t, int arm, uint64_t dense_m,
                          uint32_t n, mmq_tile *out)
{
    if (arm != ARM_COOPMAT) {
        *out = id ? id_portable : dense_portable;
    } else if (id) {
        *out = id_coopmat;
    } else {
        uint64_t bm = dense_big.wm * dense_big.rm * 16, bn = dense_big.wn * dense_big.rn * 16;
        *out = ((dense_m + bm - 1) / bm) * ((n + bn - 1) / bn) >= DENSE_BIG_GROUPS ? dense_big : dense_small;
    }
    const char *var = id ? "HK_MMQ_ID_TILE" : "HK_MMQ_TILE", *env = getenv(var);
    if (env && *env) {
        unsigned v[5];
        char tail;
        if (sscanf(env, "%u,%u,%u,%u,%u%c", &v[0], &v[1], &v[2], &v[3], &v[4], &tail) != 5 || !v[0] || !v[1] ||
            !v[2] || !v[3] || v[2] > 8 || v[3] > 8 || (v[4] != 1 && v[4] != 2 && v[4] != 4 && v[4] != 8) ||
            v[0] * v[1] > 64)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                            "%s=\"%s\" is not \"wm,wn,rm,rn,ks\" (warps 1..64 in all, rm and rn 1..8, ks 1, 2, 4 or 8)",
                            var, env);
        *out = (mmq_tile){v[0], v[1], v[2], v[3], v[4]};
    }
    if (t != 0 && out->ks == 1) /* a Q4_K / Q6_K step decodes pairs of sub-blocks */
        out->ks = 2;
    uint32_t lanes = lanes_of(context, arm), wg = out->wm * out->wn * lanes;
    uint64_t shared = tile_shared_bytes(out, t, arm, lanes);
    if (wg > context->caps.max_workgroup_size || shared > context->caps.shared_memory_bytes)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn,
                        "the %s tile %ux%u warps of %ux%u subtiles (k step %u) needs %u invocations and %llu bytes "
                        "of shared memory; device \"%s\" has %u and %u",
                        arm_names[arm], out->wm, out->wn, out->rm, out->rn, out->ks, wg, (unsigned long long)shared,
                        context->caps.device_name, context->caps.max_workgroup_size, context->caps.shared_memory_bytes);
    return HK_OK;
}

typedef struct mmq_params {
    uint32_t m, n, k, m_groups, n_tiles, n_experts, slots_per_x_row, wload, xwide;
} mmq_params;

/* The options that make other pipelines: register double buffering, the learnt-ownership loop
 * (HK_MMQ_PREFETCH=0, HK_MMQ_LAYOUT=generic). */
static uint32_t pipeline_flags(int arm)
{
    uint32_t f = env_flag("HK_MMQ_PREFETCH", 1) ? FLAG_PREFETCH : 0;
    const char *layout = getenv("HK_MMQ_LAYOUT");
    if (arm == ARM_COOPMAT && layout && !strcmp(layout, "generic"))
        f |= FLAG_GENERIC;
    return f;
}

/* The widest loads the views' alignment allows (push constants: one pipeline serves every
 * alignment); HK_MMQ_WIDE=0 keeps the narrow ones. */
static void load_widths(int t, const mmq_tile *tl, hk_view w, hk_view xq, uint32_t k, mmq_params *p)
{
    p->wload = p->xwide = 0;
    if (!env_flag("HK_MMQ_WIDE", 1))
        return;
    /* Q4_K super-blocks are 144 = 9 x 16 bytes: every chunk is as aligned as the view (the
     * descriptor base is aligned to a power of two, so a view offset that is a multiple of 16 or
     * 4 keeps the loads 16- or 4-byte aligned) */
    if (t == 1)
        p->wload = w.offset % 16 == 0 ? 2 : w.offset % 4 == 0 ? 1 : 0;
    /* Q8_1 rows of k/32 blocks of 36 bytes, steps of ks blocks: whole 16-byte chunks when both
     * are multiples of 4 blocks */
    p->xwide = xq.offset % 16 == 0 && (k / 32) % 4 == 0 && tl->ks % 4 == 0;
}

static hk_status check_type_k(const char *fn, hk_type wtype, uint32_t k)
{
    if (type_index(wtype) < 0)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "wtype=%s (%d) is not an MMQ weight type (q8_0, q4_k, q6_k)",
                        hk_type_name(wtype), (int)wtype);
    uint32_t block = hk_type_block_values(wtype);
    if (k == 0 || k % block)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a positive multiple of %u (%s block)", k, block,
                        hk_type_name(wtype));
    if (k > MMQ_MAX_K)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is above the limit of %u", k, MMQ_MAX_K);
    return HK_OK;
}

static hk_status record(hk_context *context, hk_stream *stream, const char *fn, int id, int t, const hk_binding *b,
                        uint32_t count, mmq_params *p, uint64_t m_rows_max)
{
    int arm = pick_arm(context, id, t);
    mmq_tile tl;
    hk_status st = get_tile(context, fn, id, t, arm, p->m, p->n, &tl);
    if (st != HK_OK)
        return st;
    uint32_t lanes = lanes_of(context, arm), bm = tl.wm * tl.rm * 16, bn = tl.wn * tl.rn * 16;
    p->n_tiles = (p->n + bn - 1) / bn;
    uint64_t groups;
    if (id) {
        /* row groups per expert: about twice the average rows of an expert, never more than the
         * most an expert can get (a throughput choice: the grid stride covers any routing); then
         * enough that the stride's trip count stays bounded */
        uint64_t avg = ((uint64_t)p->m + p->n_experts - 1) / p->n_experts;
        uint64_t yt = (2 * avg + bm - 1) / bm, most = (m_rows_max + bm - 1) / bm;
        if (yt > most)
            yt = most;
        uint64_t stages = (p->k / 32 + tl.ks - 1) / tl.ks + 2, tiles_max = ((uint64_t)p->m + bm - 1) / bm;
        uint64_t per_group = MMQ_ITER_BUDGET / stages ? MMQ_ITER_BUDGET / stages : 1;
        if (yt < (tiles_max + per_group - 1) / per_group)
            yt = (tiles_max + per_group - 1) / per_group;
        p->m_groups = yt ? (uint32_t)yt : 1;
        groups = (uint64_t)p->n_experts * p->m_groups * p->n_tiles;
    } else {
        p->m_groups = (p->m + bm - 1) / bm;
        groups = (uint64_t)p->m_groups * p->n_tiles;
    }
    load_widths(t, &tl, b[0].view, b[1].view, p->k, p);
    uint32_t spec[7] = {tl.wm * tl.wn * lanes, tl.wm, tl.wn, tl.rm, tl.rn, tl.ks, pipeline_flags(arm)};
    hk_dispatch_desc d = {.shader = shaders[id][t][arm],
                          .subgroup_size = arm == ARM_COOPMAT ? lanes : 0,
                          .spec = spec,
                          .spec_count = 7,
                          .bindings = b,
                          .binding_count = count,
                          .params = p,
                          .params_bytes = sizeof *p,
                          .groups = groups};
    return hk__dispatch(context, stream, fn, &d);
}

hk_status hk_mmq(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq, hk_view out,
                 uint32_t m, uint32_t n, uint32_t k)
{
    static const char fn[] = "hk_mmq";
    const char *const names[] = {"w", "xq", "out"};
    hk_status st = check_type_k(fn, wtype, k);
    if (st != HK_OK)
        return st;
    if (m == 0 || n == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "m=%u and n=%u must both be positive", m, n);
    hk_binding b[3] = {
        {w, hk_type_bytes(wtype, (uint64_t)n * k), 2, 0, 0},
        {xq, (uint64_t)m * (k / 32) * 36, 4, 0, 0},
        {out, (uint64_t)m * n * 4, 4, 1, 0},
    };
    st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;
    mmq_params p = {m, n, k, 0, 0, 0, 0, 0, 0};
    return record(context, stream, fn, 0, type_index(wtype), b, 3, &p, m);
}

hk_status hk_mmq_id(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq, hk_view offsets,
                    hk_view slots, hk_view out, const hk_mmq_id_shape *shape)
{
    static const char fn[] = "hk_mmq_id";
    const char *const names[] = {"w", "xq", "out", "offsets", "slots"};
    if (!shape)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "shape is NULL");
    hk_status st = check_type_k(fn, wtype, shape->k);
    if (st != HK_OK)
        return st;
    const hk_mmq_id_shape *s = shape;
    if (!s->n_experts || !s->n || !s->n_slots)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts=%u, n=%u and n_slots=%u must all be positive",
                        s->n_experts, s->n, s->n_slots);
    if (!s->slots_per_x_row || s->n_slots % s->slots_per_x_row)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "slots_per_x_row=%u does not divide n_slots=%u",
                        s->slots_per_x_row, s->n_slots);
    if (s->n_experts == UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts=%u leaves no room for offsets[n_experts]",
                        s->n_experts);
    uint64_t x_rows = s->n_slots / s->slots_per_x_row;
    hk_binding b[5] = {
        {w, hk_type_bytes(wtype, (uint64_t)s->n_experts * s->n * s->k), 2, 0, 0},
        {xq, x_rows * (s->k / 32) * 36, 4, 0, 0},
        {out, (uint64_t)s->n_slots * s->n * 4, 4, 1, 0},
        {offsets, ((uint64_t)s->n_experts + 1) * 4, 4, 0, 0},
        {slots, (uint64_t)s->n_slots * 4, 4, 0, 0},
    };
    if (!b[0].bytes)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts x n x k overflows the weight size");
    st = hk__check_bindings(context, stream, fn, names, b, 5);
    if (st != HK_OK)
        return st;
    mmq_params p = {s->n_slots, s->n, s->k, 0, 0, s->n_experts, s->slots_per_x_row, 0, 0};
    /* an expert takes at most one slot of a token when slots_per_x_row is top_k */
    uint64_t most = s->slots_per_x_row > 1 ? x_rows : s->n_slots;
    return record(context, stream, fn, 1, type_index(wtype), b, 5, &p, most);
}

hk_status hk_mmq_q4k_id(hk_context *context, hk_stream *stream, hk_view w, hk_view xq, hk_view offsets, hk_view slots,
                        hk_view out, const hk_mmq_id_shape *shape)
{
    return hk_mmq_id(context, stream, HK_TYPE_Q4_K, w, xq, offsets, slots, out, shape);
}

hk_status hk_mmq_q6k_id(hk_context *context, hk_stream *stream, hk_view w, hk_view xq, hk_view offsets, hk_view slots,
                        hk_view out, const hk_mmq_id_shape *shape)
{
    return hk_mmq_id(context, stream, HK_TYPE_Q6_K, w, xq, offsets, slots, out, shape);
}

hk_status hk_moe_expert_rows(hk_context *context, hk_stream *stream, hk_view ids, hk_view offsets, hk_view slots,
                             hk_view dropped, uint32_t n_slots, uint32_t n_experts)
{
    static const char fn[] = "hk_moe_expert_rows";
    const char *const names[] = {"ids", "offsets", "slots", "dropped"};
    if (n_slots == 0 || n_slots > ROWS_MAX_SLOTS)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_slots=%u is not in 1..%u", n_slots, ROWS_MAX_SLOTS);
    if (n_experts == 0 || n_experts > ROWS_MAX_EXPERTS)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts=%u is not in 1..%u", n_experts, ROWS_MAX_EXPERTS);
    hk_binding b[4] = {
        {ids, (uint64_t)n_slots * 4, 4, 0, 0},
        {offsets, ((uint64_t)n_experts + 1) * 4, 4, 1, 0},
        {slots, (uint64_t)n_slots * 4, 4, 1, 0},
        {dropped, 4, 4, 1, 0},
    };
    hk_status st = hk__check_bindings(context, stream, fn, names, b, 4);
    if (st != HK_OK)
        return st;
    uint32_t cap = (n_experts + 31) / 32 * 32;
    /* moe_rows.comp: a cursor and WG/32 mask words per expert, WG partial sums, common.glsl's floats */
    uint64_t shared = 4ull * cap * (1 + ROWS_WG / 32) + 8ull * ROWS_WG + 4;
    if (ROWS_WG > context->caps.max_workgroup_size || shared > context->caps.shared_memory_bytes)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "n_experts=%u needs %llu bytes of shared memory; device \"%s\" has %u",
                        n_experts, (unsigned long long)shared, context->caps.device_name,
                        context->caps.shared_memory_bytes);
    uint32_t params[2] = {n_slots, n_experts}, spec[2] = {ROWS_WG, cap};
    hk_dispatch_desc d = {.shader = HK_SHADER_MOE_ROWS,
                          .spec = spec,
                          .spec_count = 2,
                          .bindings = b,
                          .binding_count = 4,
                          .params = params,
                          .params_bytes = sizeof params,
                          .groups = 1};
    return hk__dispatch(context, stream, fn, &d);
}
