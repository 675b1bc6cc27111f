/* f16 GEMM for prefill (shaders/gemm_f16.comp): out[m, n] = x[m, k] . deq(W[n, k])^T with the
 * weights dequantized to f16 tiles in shared memory (F16 weights copied). Two arms with one tiling:
 *  - cooperative matrix (VK_KHR_cooperative_matrix, f16 16x16x16 -> f32): a warp is a hardware
 *    subgroup, required full at the device's default size;
 *  - portable: the same tiles in f32 FMAs on the f16-rounded operands, a warp being 32
 *    consecutive invocations; no subgroup operations, no shaderFloat16: runs everywhere.
 * The tile sizes are specialization constants (WM x WN warps of RM x RN 16x16 tiles, k step BK)
 * picked by shape; a cached autotuner winner (src/tune, HK_TUNE_GEMM_F16) replaces them, else
 * HK_GEMM_TILE and the staging switches override them, for tuning (include/hkernel.h lists the
 * variables). */

#include "family.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The autotuner's parameters, in their order: warps and 16x16 tiles per warp in m and n, k step,
 * prefetch. */
enum { GM_WM, GM_WN, GM_RM, GM_RN, GM_BK, GM_PREFETCH, GM_PARAMS };
static const hk__tunable tune_gemm_f16;

/* Its shape class (hk_tune): m's power-of-two range, n, k. */
static void key_gemm(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t m, uint32_t n, uint32_t k)
{
    char mb[32];
    hk__tune_bucket(mb, sizeof mb, m);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:m%s/n%u/k%u", hk_type_name(wtype), mb, n, k);
}

typedef struct gemm_tiles {
    uint32_t wm, wn; /* warp grid */
    uint32_t rm, rn; /* 16x16 tiles per warp */
    uint32_t bk;     /* k per step: a multiple of 32 dividing 256 */
} gemm_tiles;

/* Coopmat: 128x128 per workgroup from 2x4 warps of 64x32 (8 subgroups: a 512-token prompt against
 * a 4096-row weight is 128 workgroups, one per SM of an H200, each with 8 warps to hide latency);
 * per 16-deep slice a warp loads 4 A and 2 B fragments for 8 multiply-adds. BK 64 reads all of a
 * Q4_K qs chunk pair per step (both nibbles of 32 bytes); 36 KiB of shared memory. Shapes with
 * fewer than COOPMAT_BIG_GROUPS such tiles take 64x64 tiles of 4 subgroups (2x2 of 32x32). */
static const gemm_tiles coopmat_big = {2, 4, 4, 2, 64}, coopmat_small = {2, 2, 2, 2, 64};
#define COOPMAT_BIG_GROUPS 100u
/* Portable: 64x64 from 2x2 warps of 32x32, 32 outputs per invocation (10.5 KiB). */
static const gemm_tiles portable_tiles = {2, 2, 2, 2, 32};
#define PORTABLE_LANES 32u

/* gemm_f16.comp's FLAGS (specialization constant 6) */
#define FLAG_PREFETCH 1u   /* register double buffering of the k steps */
#define FLAG_WLOAD_SHIFT 8 /* bits 8-9: the wide weight loads' width (WLOAD) */

/* Loop bounds. lavapipe ends a shader's loops after 65535 iterations in total per invocation.
 * Counting every loop iteration of gemm_f16.comp as if nothing were unrolled, one k step costs
 *   1 (the k loop) + 2 XI (loading and storing x, XI = ceil(BM*BK/4 / WG)) + 3 GW (loading and
 *   storing W, GW = ceil(BN*BK/8 / WG) units, or for Q4_K and Q5_K ceil(BN*max(BK/32, 2) / WG)
 *   chunks with two nibble passes: at most 3 per 8 values either way)
 *   + coopmat: BK/16 * (1 + RN + RM*(1 + RN))      portable: BK/8 * (1 + RN + RM*E*(1 + RN))
 * (E = 256 / lanes per warp), and the accumulator init and epilogue RM*RN*(1 + E) + RM*RN*E once.
 * One dispatch takes at most GEMM_LOOP_BUDGET / step k steps; a longer k runs as several
 * dispatches, each adding its slice to out (32-wide subgroups: 43008 k values per dispatch on the
 * 128x128 coopmat tiles, 59008 on the 64x64 ones; portable: 8512). Whoever changes the shader's
 * loops redoes this count. */
#define GEMM_LOOP_BUDGET 60000u

typedef struct gemm_plan {
    gemm_tiles t;
    uint32_t lanes; /* invocations per warp */
    int coopmat;
} gemm_plan;

static uint32_t ceil_div(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

static uint32_t plan_wg(const gemm_plan *p) { return p->t.wm * p->t.wn * p->lanes; }

static uint64_t plan_shared_bytes(const gemm_plan *p)
{
    uint64_t bm = p->t.wm * p->t.rm * 16, bn = p->t.wn * p->t.rn * 16, ss = p->t.bk / 8 + 1;
    /* f16 tiles (rows of bk + 8 halves; the coopmat per-warp stages reuse them), common.glsl's
     * hk_partial[WG] */
    return (bm + bn) * ss * 16 + plan_wg(p) * 4ull;
}

/* The tiles hold the coopmat epilogue's per-warp 16x16 f32 stages after the k loop. */
static int plan_stages_fit(const gemm_plan *p)
{
    uint64_t bm = p->t.wm * p->t.rm * 16, bn = p->t.wn * p->t.rn * 16;
    return !p->coopmat || (uint64_t)p->t.wm * p->t.wn * 64 <= (bm + bn) * (p->t.bk / 8 + 1);
}

static uint32_t steps_per_dispatch(const gemm_plan *p)
{
    const gemm_tiles *t = &p->t;
    uint64_t wg = plan_wg(p), e = 256 / p->lanes, kv = t->bk / 8;
    uint64_t bm = t->wm * t->rm * 16, bn = t->wn * t->rn * 16;
    uint64_t step = 1 + 2 * ceil_div(bm * t->bk / 4, wg) + 3 * ceil_div(bn * (kv > 8 ? kv : 8), wg) +
                    (p->coopmat ? t->bk / 16 * (1 + t->rn + t->rm * (1 + t->rn))
                                : kv * (1 + t->rn + t->rm * e * (1 + t->rn)));
    uint64_t once = t->rm * t->rn * (1 + e) + (uint64_t)t->rm * t->rn * e;
    return (uint32_t)((GEMM_LOOP_BUDGET - once) / step);
}

static int env_flag(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && *v ? strcmp(v, "0") != 0 : fallback;
}

#if defined(HK_HAVE_SHADER_GEMM_F16_Q4_K_COOPMAT) && defined(HK_HAVE_SHADER_GEMM_F16_Q8_0_COOPMAT) &&                  \
    defined(HK_HAVE_SHADER_GEMM_F16_Q6_K_COOPMAT) && defined(HK_HAVE_SHADER_GEMM_F16_Q5_K_COOPMAT) &&                  \
    defined(HK_HAVE_SHADER_GEMM_F16_F16_COOPMAT)
#define GEMM_COOPMAT_BUILT 1
#define GEMM_SHADERS(t) 1, HK_SHADER_GEMM_F16_##t, HK_SHADER_GEMM_F16_##t##_COOPMAT
#else /* glslang without GL_KHR_cooperative_matrix: the portable arm everywhere */
#define GEMM_COOPMAT_BUILT 0
#define GEMM_SHADERS(t) 1, HK_SHADER_GEMM_F16_##t, HK_NO_SHADER
#endif

/* A weight type's shaders, whether its weight loads widen with the alignment of the view and of
 * its rows (WLOAD: Q4_K super-blocks of 144 = 9 x 16 bytes, Q5_K of 176 = 11 x 16, F16 8-value
 * units of 16 bytes), and
 * whether the shader takes a partial last k step (k_tail: F16 takes any k; the others' k is a
 * multiple of 32, and the step BK is halved until it divides k) */
typedef struct gemm_type {
    int takes, portable, coopmat;
    uint32_t wide_loads, k_tail;
} gemm_type;

static const gemm_type gemm_types[HK_REF_TYPES] = {
    [HK_TYPE_Q8_0] = {GEMM_SHADERS(Q8_0), 0, 0},
    [HK_TYPE_Q4_K] = {GEMM_SHADERS(Q4_K), 1, 0},
    [HK_TYPE_Q5_K] = {GEMM_SHADERS(Q5_K), 1, 0},
    [HK_TYPE_Q6_K] = {GEMM_SHADERS(Q6_K), 0, 0},
    [HK_TYPE_F16] = {GEMM_SHADERS(F16), 1, 1},
};

/* The coopmat arm runs where the library has it and the context may use cooperative matrices,
 * f16 arithmetic and full subgroups, the device lists f16 x f16 -> f32 at 16x16x16 in subgroup
 * scope, and the tiles fit its workgroup and shared-memory limits (BK halved if needed). */
static int plan_coopmat(const hk_context *context, const gemm_tiles *tiles, gemm_plan *p)
{
    const hk_caps *caps = &context->caps;
    uint32_t need = HK_FEATURE_COOPMAT_KHR | HK_FEATURE_FLOAT16 | HK_FEATURE_SUBGROUP_SIZE_CONTROL;
    if (!GEMM_COOPMAT_BUILT || (context->features & need) != need)
        return 0;
    int listed = 0;
    for (uint32_t i = 0; i < caps->coopmat_khr_count && i < HK_MAX_COOPMAT_PROPS; i++) {
        const hk_coopmat_props *c = &caps->coopmat_khr_props[i];
        listed |= c->m == 16 && c->n == 16 && c->k == 16 && c->a_type == 0 /* FLOAT16 */ && c->b_type == 0 &&
                  c->c_type == 1 /* FLOAT32 */ && c->result_type == 1 && c->scope == 3 /* subgroup */;
    }
    uint32_t sg = caps->subgroup_size;
    if (!listed || sg == 0 || sg > 256 || 256 % sg)
        return 0;
    *p = (gemm_plan){*tiles, sg, 1};
    if (plan_wg(p) > caps->max_workgroup_size)
        return 0;
    while (plan_shared_bytes(p) > caps->shared_memory_bytes && p->t.bk > 32)
        p->t.bk /= 2;
    return plan_shared_bytes(p) <= caps->shared_memory_bytes && plan_stages_fit(p);
}

/* The arm and tiles for an m x n output: coopmat where it can run (its big tile when the shape
 * yields enough of them), else portable. */
static gemm_plan plan_for(const hk_context *context, uint32_t m, uint32_t n)
{
    gemm_plan p;
    const gemm_tiles *big = &coopmat_big;
    uint64_t big_groups = (uint64_t)ceil_div(m, big->wm * big->rm * 16) * ceil_div(n, big->wn * big->rn * 16);
    if (plan_coopmat(context, big_groups >= COOPMAT_BIG_GROUPS ? big : &coopmat_small, &p))
        return p;
    /* 10.5 KiB and 128 invocations: within what every Vulkan device offers (16 KiB, 128) */
    return (gemm_plan){portable_tiles, PORTABLE_LANES, 0};
}

/* 1 if the plan runs on this device as it is; else 0 with the reason. */
static int plan_fits(const hk_context *context, const gemm_plan *p, char *why, size_t why_size)
{
    const hk_caps *caps = &context->caps;
    uint32_t acc = p->t.rm * p->t.rn * (256 / p->lanes);
    if (!p->coopmat && acc > 256) {
        snprintf(why, why_size, "invalid: %u accumulators per invocation on the portable arm (at most 256)", acc);
        return 0;
    }
    if (plan_wg(p) > caps->max_workgroup_size) {
        snprintf(why, why_size, "workgroup of %u over the device's %u", plan_wg(p), caps->max_workgroup_size);
        return 0;
    }
    if (plan_shared_bytes(p) > caps->shared_memory_bytes) {
        snprintf(why, why_size, "%llu bytes of shared memory over the device's %u",
                 (unsigned long long)plan_shared_bytes(p), caps->shared_memory_bytes);
        return 0;
    }
    if (!plan_stages_fit(p)) {
        snprintf(why, why_size, "invalid: the tiles cannot hold the %u warps' epilogue stages", p->t.wm * p->t.wn);
        return 0;
    }
    if (steps_per_dispatch(p) == 0) {
        snprintf(why, why_size, "loops over the budget: one k step loops past %u iterations", GEMM_LOOP_BUDGET);
        return 0;
    }
    return 1;
}

/* HK_GEMM_TILE="wm,wn,rm,rn,bk" replaces the plan's tiles (same arm), checked against the device. */
static hk_status plan_override(const hk_context *context, const char *fn, gemm_plan *p)
{
    const char *env = getenv("HK_GEMM_TILE");
    if (!env || !*env)
        return HK_OK;
    unsigned v[5];
    char tail;
    if (sscanf(env, "%u,%u,%u,%u,%u%c", &v[0], &v[1], &v[2], &v[3], &v[4], &tail) != 5 || !v[0] || !v[1] || !v[2] ||
        !v[3] || v[2] > 8 || v[3] > 8 || v[0] * v[1] > 64 || (v[4] != 32 && v[4] != 64 && v[4] != 128 && v[4] != 256))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                        "HK_GEMM_TILE=\"%s\" is not \"wm,wn,rm,rn,bk\" (warps 1..64 in all, rm and rn 1..8, bk 32, "
                        "64, 128 or 256)",
                        env);
    p->t = (gemm_tiles){v[0], v[1], v[2], v[3], v[4]};
    char why[160];
    if (!plan_fits(context, p, why, sizeof why))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "HK_GEMM_TILE=\"%s\" cannot run on device \"%s\" (%s arm): %s", env,
                        context->caps.device_name, p->coopmat ? "coopmat" : "portable", why);
    return HK_OK;
}

/* ---- autotuner (src/tune): a schedule is the tiles and prefetch of the arm the device runs ---- */

static gemm_plan plan_of_sched(const hk_context *context, const uint32_t *v)
{
    gemm_plan p = plan_for(context, 1, 1);
    p.t = (gemm_tiles){v[GM_WM], v[GM_WN], v[GM_RM], v[GM_RN], v[GM_BK]};
    return p;
}

static int tile_feasible(const hk_context *context, hk_type wtype, uint32_t k, const uint32_t *v, uint32_t sig[8],
                         char *why, size_t why_size)
{
    if (v[GM_WM] * v[GM_WN] > 64) {
        snprintf(why, why_size, "invalid: %u warps (at most 64)", v[GM_WM] * v[GM_WN]);
        return 0;
    }
    gemm_plan p = plan_of_sched(context, v);
    if (k % v[GM_BK] && !gemm_types[wtype].k_tail) {
        snprintf(why, why_size, "a tile that does not divide: k=%u is not a multiple of bk=%u", k, v[GM_BK]);
        return 0;
    }
    if (!plan_fits(context, &p, why, why_size))
        return 0;
    for (int i = 0; i < GM_PARAMS; i++)
        sig[i] = v[i];
    return 1;
}

const char *hk_gemm_f16_path(hk_context *context, hk_type wtype)
{
    if (!context || !HK_TYPE_TAKES(gemm_types, wtype))
        return NULL;
    return plan_for(context, 1, 1).coopmat ? "coopmat" : "portable";
}

/* The shape's own checks, before any view is looked at. */
static hk_status check_shape(const char *fn, hk_type wtype, uint32_t m, uint32_t n, uint32_t k)
{
    if (!HK_TYPE_TAKES(gemm_types, wtype))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn,
                        "wtype=%s (%d) is not a GEMM weight type (q8_0, q4_k, q5_k, q6_k, f16)", hk_type_name(wtype),
                        (int)wtype);
    uint32_t block = hk_type_block_values(wtype);
    if (m == 0 || n == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "m=%u and n=%u must both be positive", m, n);
    if (k == 0 || k % block)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a positive multiple of %u (%s block)", k, block,
                        hk_type_name(wtype));
    hk_status st = hk__check_limit(fn, "m", m, HK_GEMM_MAX_M);
    if (st == HK_OK)
        st = hk__check_limit(fn, "n", n, HK_GEMM_MAX_N);
    if (st == HK_OK)
        st = hk__check_limit(fn, "k", k, HK_GEMM_MAX_K);
    return st;
}

hk_status hk_gemm_f16(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view x, hk_view out,
                      uint32_t m, uint32_t n, uint32_t k)
{
    static const char fn[] = "hk_gemm_f16";
    static const char *const names[] = {"w", "x", "out"};
    hk_status st = check_shape(fn, wtype, m, n, k);
    if (st != HK_OK)
        return st;
    uint32_t block = hk_type_block_values(wtype);
    uint64_t row_bytes = (uint64_t)(k / block) * hk_type_block_bytes(wtype);
    hk_binding b[3] = {
        {w, n * row_bytes, 2, 0, 0},
        {x, (uint64_t)m * k * 4, 4, 0, 0},
        {out, (uint64_t)m * n * 4, 4, 1, 0},
    };
    st = hk__check_bindings(context, stream, fn, names, b, 3);
    if (st != HK_OK)
        return st;

    /* the schedule: a cached winner for the shape class (or the tuner's candidate), else the
     * default and the hooks */
    char key[HK_TUNE_SHAPE_CHARS];
    key_gemm(key, wtype, m, n, k);
    hk__sched sched;
    int source = HK_SCHED_DEFAULT, tuned = hk__tune_lookup(context, &tune_gemm_f16, key, &sched, &source);
    gemm_plan p;
    int prefetch;
    char why[160];
    if (tuned && !tile_feasible(context, wtype, k, sched.v, (uint32_t[8]){0}, why, sizeof why)) {
        if (source != HK_SCHED_TUNED)
            return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the schedule being tuned cannot run: %s", why);
        tuned = 0; /* a cached winner this shape cannot run (a hand-edited line): the default */
        source = HK_SCHED_DEFAULT;
    }
    if (tuned) {
        p = plan_of_sched(context, sched.v);
        prefetch = sched.v[GM_PREFETCH] != 0;
    } else {
        p = plan_for(context, m, n);
        st = plan_override(context, fn, &p);
        if (st != HK_OK)
            return st;
        while (k % p.t.bk && !gemm_types[wtype].k_tail) /* Q8_0 rows of an odd number of 32-blocks */
            p.t.bk /= 2;
        prefetch = env_flag("HK_GEMM_PREFETCH", 1);
        const char *hooks[] = {"HK_GEMM_TILE", "HK_GEMM_PREFETCH", "HK_GEMM_WIDE"};
        for (int i = 0; i < 3; i++)
            if (hk__env_given(hooks[i]))
                source = HK_SCHED_ENV;
    }
    uint32_t bm = p.t.wm * p.t.rm * 16, bn = p.t.wn * p.t.rn * 16;
    uint32_t tiles_n = ceil_div(n, bn);
    uint32_t k_per_dispatch = steps_per_dispatch(&p) * p.t.bk;
    const gemm_type *gt = &gemm_types[wtype];
    /* x is read 16 bytes per load when its offset and its rows keep them 16-byte aligned (the
     * descriptor base is aligned to a power of two, so offset % 16 == 0 suffices, with k a
     * multiple of 4); the weights as wide as their view's and rows' alignment allows where the
     * type's blocks keep it (gemm_types). x's width is a push constant (one pipeline for either
     * alignment); the weights' a specialization constant, so that a pipeline holds only its own
     * loads (as mmq's). */
    uint32_t wload = 0, xv4 = 0;
    if (env_flag("HK_GEMM_WIDE", 1)) {
        xv4 = x.offset % 16 == 0 && k % 4 == 0;
        if (gt->wide_loads)
            wload = hk__load_width(w.offset | row_bytes);
    }
    uint32_t flags = (prefetch ? FLAG_PREFETCH : 0) | (wload << FLAG_WLOAD_SHIFT);
    uint32_t spec[7] = {plan_wg(&p), p.t.wm, p.t.wn, p.t.rm, p.t.rn, p.t.bk, flags};
    hk_dispatch_desc d = {.shader = gt->portable, .spec = spec, .spec_count = 7, .bindings = b,
                          .binding_count = 3, .params_bytes = 8 * 4,
                          .groups = (uint64_t)ceil_div(m, bm) * tiles_n};
    if (p.coopmat) {
        d.shader = gt->coopmat;
        d.subgroup_size = p.lanes;
    }
    /* A k longer than one dispatch's loop budget runs as passes that add to out. Without a
     * stream they are recorded together and submitted once. */
    hk_stream *s = stream ? stream : hk__immediate_begin(context);
    /* testing only (HK_TUNE_PLANT_WRONG): a candidate that leaves half the rows unwritten */
    uint32_t m_run = tuned && sched.plant ? (m + 1) / 2 : m;
    for (uint32_t k0 = 0; k0 < k && st == HK_OK; k0 += k_per_dispatch) {
        uint32_t k1 = k - k0 < k_per_dispatch ? k : k0 + k_per_dispatch;
        uint32_t params[8] = {m_run, n, k, k0, k1, k0 > 0, tiles_n, xv4};
        d.params = params;
        st = hk__dispatch(context, s, fn, &d);
    }
    st = stream ? st : hk__immediate_end(context, fn, st);
    if (st == HK_OK) {
        const uint32_t served[GM_PARAMS] = {p.t.wm, p.t.wn, p.t.rm, p.t.rn, p.t.bk, (uint32_t)prefetch};
        hk__tune_note(context, &tune_gemm_f16, served, source);
    }
    return st;
}

/* ---- autotuner (src/tune): the family ---- */

static hk_status shape_gemm(const hk_context *context, const hk_tune_desc *desc, char key[HK_TUNE_SHAPE_CHARS])
{
    (void)context;
    const hk_tune_gemm_shape *s = &desc->shape.gemm;
    hk_status st = check_shape("hk_tune", s->wtype, s->m, s->n, s->k);
    if (st == HK_OK)
        st = hk__tune_check_sizes((uint64_t)s->n * s->k, (uint64_t)s->m * s->k, (uint64_t)s->m * s->n);
    if (st == HK_OK)
        key_gemm(key, s->wtype, s->m, s->n, s->k);
    return st;
}

static int feasible_gemm(const hk_context *context, const hk_tune_desc *desc, const uint32_t *v, uint32_t sig[8],
                         char *why, size_t why_size)
{
    return tile_feasible(context, desc->shape.gemm.wtype, desc->shape.gemm.k, v, sig, why, why_size);
}

/* raw random weight blocks: every bit pattern (but F16's, whose raw bits hold infinities and NaNs:
 * rows of random values there) */
static void case_gemm(const hk_tune_desc *desc, hk_case_shape *out)
{
    const hk_tune_gemm_shape *s = &desc->shape.gemm;
    *out = (hk_case_shape){s->wtype, {s->m, s->n, s->k}, s->wtype != HK_TYPE_F16, 0};
}

extern const hk_case hk_case_gemm_f16; /* src/cases/cases_prefill.c */

static const hk__tunable tune_gemm_f16 = {HK_TUNE_GEMM_F16,
                                          "gemm_f16",
                                          GM_PARAMS,
                                          {{"wm", 4, {1, 2, 4, 8}, 1, 64, 0},
                                           {"wn", 4, {1, 2, 4, 8}, 1, 64, 0},
                                           {"rm", 3, {1, 2, 4}, 1, 8, 0},
                                           {"rn", 3, {1, 2, 4}, 1, 8, 0},
                                           {"bk", 3, {32, 64, 128}, 32, 256, 1},
                                           {"prefetch", 2, {0, 1}, 0, 1, 0}},
                                          shape_gemm,
                                          feasible_gemm,
                                          &hk_case_gemm_f16,
                                          case_gemm,
                                          0};

/* ---- hk_context_prepare ---- */

/* every weight type the GEMM takes with x on 16 bytes and not, and the types with wide weight
 * loads (Q4_K, Q5_K, F16) with weights on 4 and 2 bytes: the narrower loads are specializations of
 * their own. k: a multiple of 32 (F16 rows of 16 bytes). */
static hk_status prepare_gemm_f16(hk__prep *p)
{
    hk_view w = hk__prep_view(p, 0), x = hk__prep_view(p, 1), out = hk__prep_view(p, 2);
    for (int i = 0; i < HK_REF_TYPES; i++) {
        hk_type t = (hk_type)i;
        if (!HK_TYPE_TAKES(gemm_types, t))
            continue;
        uint32_t k = hk_type_block_values(t) < 32 ? 32 : hk_type_block_values(t);
        for (uint64_t skew = 0; skew <= 4; skew += 4)
            HK_PREP_TRY(p, hk_gemm_f16(p->ctx, p->s, t, w, (hk_view){x.buffer, x.offset + skew}, out, 64, 64, k));
        for (uint64_t skew = 2; skew <= 4 && gemm_types[t].wide_loads; skew += 2)
            HK_PREP_TRY(p, hk_gemm_f16(p->ctx, p->s, t, (hk_view){w.buffer, w.offset + skew}, x, out, 64, 64, k));
    }
    return HK_OK;
}

const hk__family hk__family_gemm_f16 = {"hk_gemm_f16", prepare_gemm_f16, {&tune_gemm_f16}};
