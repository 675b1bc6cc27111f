/* Prefill int8 GEMM (shaders/mmq.comp): hk_mmq, the expert-indexed hk_mmq_id, and the MoE slot
 * grouping hk_moe_expert_rows (shaders/moe_rows.comp). The arm is picked per device:
 *  - coopmat: int8 x int8 -> int32 cooperative matrices (KHR, 16x16x32 s8 listed by the device),
 *    one subgroup per warp of the tiling, full subgroups of the device's size;
 *  - dot / scalar: the same tiling and epilogue with packed int8 dot products (or their
 *    plain-arithmetic twin where the device has no shaderIntegerDotProduct) on warps of 32
 *    invocations, no subgroup requirement.
 * The tile is a set of specialization constants (mmq_tile); a cached autotuner winner (src/tune,
 * HK_TUNE_MMQ / HK_TUNE_MMQ_ID) replaces the defaults, else HK_MMQ_TILE / HK_MMQ_ID_TILE
 * ("wm,wn,rm,rn,ks"), HK_MMQ_PREFETCH and HK_MMQ_ROLLED override them, for tuning; HK_MMQ_LAYOUT
 * picks the epilogue's form, for measuring.
 * Testing only: HK_MMQ_EMULATE_GENERIC=1 runs the portable arm on an element ownership other than
 * NVIDIA's, so that the coopmat arm's generic epilogue runs on any device. */

#include "matvec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The autotuner's parameters, in their order: an mmq_tile (tile_of_sched). */
enum { MQ_WM, MQ_WN, MQ_RM, MQ_RN, MQ_KS, MQ_PREFETCH, MQ_ROLLED, MQ_PARAMS };
static const hk__tunable tune_mmq, tune_mmq_id;

/* Shape classes (hk_tune): m's (n_slots') power-of-two range, n, k; hk_mmq_id also n_experts and
 * slots_per_x_row. */
static void key_mmq(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t m, uint32_t n, uint32_t k)
{
    char mb[32];
    hk__tune_bucket(mb, sizeof mb, m);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:m%s/n%u/k%u", hk_type_name(wtype), mb, n, k);
}

static void key_mmq_id(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, const hk_mmq_id_shape *s)
{
    char mb[32];
    hk__tune_bucket(mb, sizeof mb, s->n_slots);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:e%u/n%u/k%u/m%s/x%u", hk_type_name(wtype), s->n_experts, s->n, s->k, mb,
             s->slots_per_x_row);
}

enum { ARM_COOPMAT, ARM_DOT, ARM_SCALAR, ARM_DOT_GENERIC, ARM_COUNT };
static const char *const arm_names[ARM_COUNT] = {"coopmat", "dot", "scalar", "dot"};

#ifdef HK_HAVE_SHADER_MMQ_Q8_0_CM
#define CM(p, t) HK_SHADER_##p##_##t##_CM
#else
#define CM(p, t) HK_NO_SHADER
#endif
#ifdef HK_HAVE_SHADER_MMQ_Q8_0_DOT
#define DOT(p, t) HK_SHADER_##p##_##t##_DOT
#define DOTG(p, t) HK_SHADER_##p##_##t##_DOTG
#else
#define DOT(p, t) HK_NO_SHADER
#define DOTG(p, t) HK_NO_SHADER
#endif
#define ARMS(p, t) {CM(p, t), DOT(p, t), HK_SHADER_##p##_##t##_SCALAR, DOTG(p, t)}

/* Invocations per warp of the portable arms (they use no subgroup operation: any device runs
 * them); their element ownership is that of 32 lanes. */
#define PORTABLE_LANES 32u
/* Lavapipe stops a shader's loops after 65535 iterations per invocation: k is bounded (a k step
 * of KS blocks is one iteration of the stage loop, plus KS of the blocks' loop where rolled; the
 * staging is unrolled), and the expert-indexed kernel launches enough row groups per expert that
 * its grid stride stays within MMQ_ITER_BUDGET iterations whatever the routing. */
#define MMQ_MAX_K 65536u
#define MMQ_ITER_BUDGET 8192u
/* k up to this many blocks sums its blocks' f32 terms in one running sum (its rounding, about
 * sqrt(blocks / 2) ulps, stays under 1e-6 of the output scale); a longer k sums per 32 blocks
 * first (FLAGS TWO_LEVEL), for 32 more registers per invocation. */
#define MMQ_ONE_LEVEL_BLOCKS 128u
/* hk_moe_expert_rows: one workgroup; its shared arrays hold NE_CAP experts. */
#define ROWS_WG 128u
#define ROWS_MAX_EXPERTS 1024u
#define ROWS_MAX_SLOTS 262144u

/* mmq.comp's FLAGS (specialization constant 7) */
enum { FLAG_PREFETCH = 1, FLAG_GENERIC = 2, FLAG_TWO_LEVEL = 4, FLAG_X16 = 8, FLAG_ROLLED = 128, FLAG_WLOAD_SHIFT = 8 };

/* warp grid (wm x wn), subtiles per warp (rm x rn), 32-value blocks per k step (ks), whether the
 * next step's loads are issued before the current step's multiplies (prefetch), and whether the
 * blocks of a step stay a loop (rolled) rather than unrolled */
typedef struct mmq_tile {
    uint32_t wm, wn, rm, rn, ks, prefetch, rolled;
} mmq_tile;

/* Defaults, from sweeps of the tiles on a GPU, coopmat by kernel and type. Dense: 128 x 128 tiles
 * without prefetch (the registers it takes cost more than the latency it hides) where the shape
 * yields about a tile per SM or more, else the small 64 x 64 tile of 4 warps. Q8_0 on 16 warps of
 * 2 x 2 subtiles with 128-value steps; Q4_K on 8 warps of 4 x 2 (the most registers, more of a
 * block's products in flight; Q8_0 gains nothing from them); Q6_K on 16 warps with 64-value steps
 * (its X tile takes 1.5 times the words, its halves staged apart: 128-value steps need 55 KiB).
 * Expert-indexed (Qwen3-30B-A3B's experts get 32 rows on average at 512 tokens): 32 x 128 on 4
 * warps of 2 x 2 with 64-value steps, no prefetch, Q6_K 32 x 64. Q5_K takes Q4_K's tiles (the same
 * staging and epilogue, with two more 16-byte loads per unit for the 5th bits). Portable: 32 x 32
 * tiles, one subtile per warp (lavapipe has 32 KiB of shared memory). */
static const mmq_tile portable_tiles[2] = {{2, 2, 1, 1, 4, 1, 0}, {1, 2, 2, 1, 4, 1, 0}};
static const mmq_tile dense_small_tile = {2, 2, 2, 2, 4, 1, 0};
/* output tiles below which the dense coopmat arm takes the small tile: about the H200's 132 SMs */
#define MMQ_BIG_TILE_MIN_TILES 96u

/* A weight type's shaders, its coopmat defaults (above) and what the tiles' checks need of it. */
typedef struct mmq_type {
    int takes;
    int shaders[2][ARM_COUNT]; /* [expert-indexed][arm] */
    mmq_tile coopmat[2];       /* [expert-indexed] */
    uint32_t x_words;          /* words of a block in the X tile: Q6_K's halves each with zeros beside it */
    uint32_t min_ks;           /* the fewest blocks per k step: the K-quants stage pairs of blocks */
    uint32_t wide_loads;       /* weight loads as wide as the view allows (Q4_K's, Q5_K's 16-byte chunks), else words */
} mmq_type;

#define MMQ_SHADERS(t) 1, {ARMS(MMQ, t), ARMS(MMQ_ID, t)}
static const mmq_type mmq_types[HK_REF_TYPES] = {
    [HK_TYPE_Q8_0] = {MMQ_SHADERS(Q8_0), {{4, 4, 2, 2, 4, 0, 0}, {1, 4, 2, 2, 2, 0, 0}}, .x_words = 8, .min_ks = 1},
    [HK_TYPE_Q4_K] = {MMQ_SHADERS(Q4_K), {{2, 4, 4, 2, 4, 0, 0}, {1, 4, 2, 2, 2, 0, 0}}, .x_words = 8, .min_ks = 2,
                      .wide_loads = 1},
    [HK_TYPE_Q5_K] = {MMQ_SHADERS(Q5_K), {{2, 4, 4, 2, 4, 0, 0}, {1, 4, 2, 2, 2, 0, 0}}, .x_words = 8, .min_ks = 2,
                      .wide_loads = 1},
    [HK_TYPE_Q6_K] = {MMQ_SHADERS(Q6_K), {{4, 4, 2, 2, 2, 0, 0}, {1, 4, 2, 1, 2, 0, 0}}, .x_words = 12, .min_ks = 2},
};

/* The device offers s8 x s8 -> s32 16 x n x 32 subgroup matrices (not saturating), with full
 * subgroups of its size, and the int8 arithmetic the matrix types need. */
static int coopmat_usable_n(const hk_context *context, uint32_t n)
{
    const hk_caps *c = &context->caps;
    uint32_t need = HK_FEATURE_COOPMAT_KHR | HK_FEATURE_SUBGROUP_SIZE_CONTROL | HK_FEATURE_INT8;
    if ((context->features & need) != need || c->subgroup_size < 4 || c->subgroup_size > 256 ||
        (c->subgroup_size & (c->subgroup_size - 1)))
        return 0;
    for (uint32_t i = 0; i < c->coopmat_khr_count; i++) {
        const hk_coopmat_props *p = &c->coopmat_khr_props[i];
        if (p->m == 16 && p->n == n && p->k == 32 && p->a_type == 3 /* SINT8 */ && p->b_type == 3 &&
            p->c_type == 5 /* SINT32 */ && p->result_type == 5 && !p->saturating && p->scope == 3 /* subgroup */)
            return 1;
    }
    return 0;
}

static int coopmat_usable(const hk_context *context) { return coopmat_usable_n(context, 16); }

static int pick_arm(const hk_context *context, int id, hk_type wtype)
{
    const int *shaders = mmq_types[wtype].shaders[id];
    if (shaders[ARM_COOPMAT] != HK_NO_SHADER && coopmat_usable(context))
        return ARM_COOPMAT;
    if (shaders[ARM_DOT] != HK_NO_SHADER && (context->features & HK_FEATURE_INTEGER_DOT)) {
        const char *emu = getenv("HK_MMQ_EMULATE_GENERIC");
        return emu && strcmp(emu, "1") == 0 ? ARM_DOT_GENERIC : ARM_DOT;
    }
    return ARM_SCALAR;
}

const char *hk_mmq_path(hk_context *context, hk_type wtype)
{
    return context && HK_TYPE_TAKES(mmq_types, wtype) ? arm_names[pick_arm(context, 0, wtype)] : NULL;
}

static uint32_t lanes_of(const hk_context *context, int arm)
{
    return arm == ARM_COOPMAT ? context->caps.subgroup_size : PORTABLE_LANES;
}

/* Shared memory the shader declares for a tile (mmq.comp) of the dense (id 0) or expert-indexed kernel. */
static uint64_t tile_shared_bytes(const mmq_tile *tl, int id, hk_type wtype, int arm)
{
    uint64_t bm = tl->wm * tl->rm * 16ull, bn = tl->wn * tl->rn * 16ull, stride = 8ull * tl->ks + 4;
    /* X quants (Q6_K's blocks staged as 12 words: each half with zeros beside it), W quants, X
     * scales, W factor pairs; the rows' out rows (and X rows, expert-indexed) */
    uint64_t stride_a = (uint64_t)mmq_types[wtype].x_words * tl->ks + 4;
    uint64_t words = bm * stride_a + bn * stride + tl->ks * bm + 2ull * tl->ks * bn + (id ? 2 : 1) * bm;
    if (arm == ARM_COOPMAT)
        words += 256;
    return 4 * words;
}

/* k steps the staging of a type supports: the K-quants take pairs of blocks (Q4_K and Q5_K chunks
 * of 16 bytes, Q6_K blocks sharing their bytes). */
static int ks_valid(hk_type wtype, uint32_t ks)
{
    if (ks != 1 && ks != 2 && ks != 4 && ks != 8)
        return 0;
    return ks >= mmq_types[wtype].min_ks;
}

/* 1 if the tile runs on this device for this type; else 0 with the reason. */
static int tile_fits(const hk_context *context, const mmq_tile *tl, int id, hk_type wtype, int arm, char *why,
                     size_t why_size)
{
    uint32_t lanes = lanes_of(context, arm), wg = tl->wm * tl->wn * lanes;
    uint64_t shared = tile_shared_bytes(tl, id, wtype, arm);
    if (!ks_valid(wtype, tl->ks)) {
        snprintf(why, why_size, "invalid: a k step of %u blocks (the k-quants take 2 or more)", tl->ks);
        return 0;
    }
    if (wg > context->caps.max_workgroup_size) {
        snprintf(why, why_size, "workgroup of %u over the device's %u", wg, context->caps.max_workgroup_size);
        return 0;
    }
    if (shared > context->caps.shared_memory_bytes) {
        snprintf(why, why_size, "%llu bytes of shared memory over the device's %u", (unsigned long long)shared,
                 context->caps.shared_memory_bytes);
        return 0;
    }
    return 1;
}

/* ---- the autotuner's seam (src/tune): a schedule is an mmq_tile (MQ_* order) ---- */

static mmq_tile tile_of_sched(const uint32_t *v)
{
    return (mmq_tile){v[MQ_WM], v[MQ_WN], v[MQ_RM], v[MQ_RN], v[MQ_KS], v[MQ_PREFETCH], v[MQ_ROLLED]};
}

static void sched_of_tile(const mmq_tile *tl, uint32_t *v)
{
    v[MQ_WM] = tl->wm, v[MQ_WN] = tl->wn, v[MQ_RM] = tl->rm, v[MQ_RN] = tl->rn, v[MQ_KS] = tl->ks;
    v[MQ_PREFETCH] = tl->prefetch, v[MQ_ROLLED] = tl->rolled;
}

static int tile_feasible(const hk_context *context, int id, hk_type wtype, const uint32_t *v, uint32_t sig[8],
                         char *why, size_t why_size)
{
    mmq_tile tl = tile_of_sched(v);
    if (tl.wm * tl.wn > 64) {
        snprintf(why, why_size, "invalid: %u warps (at most 64)", tl.wm * tl.wn);
        return 0;
    }
    if (!tile_fits(context, &tl, id, wtype, pick_arm(context, id, wtype), why, why_size))
        return 0;
    sched_of_tile(&tl, sig);
    return 1;
}

/* The schedule of a call: the tuner's candidate or the cached winner for the shape class (key),
 * else the default for the shape or the environment's overrides; checked. *source and *plant say
 * which. */
static hk_status get_tile(hk_context *context, const char *fn, int id, hk_type wtype, int arm, uint32_t m, uint32_t n,
                          const char *key, mmq_tile *out, int *source, int *plant)
{
    hk__sched sched;
    char why[160];
    *plant = 0;
    if (hk__tune_lookup(context, id ? &tune_mmq_id : &tune_mmq, key, &sched, source)) {
        *out = tile_of_sched(sched.v);
        if (out->wm * out->wn <= 64 && tile_fits(context, out, id, wtype, arm, why, sizeof why)) {
            *plant = sched.plant;
            return HK_OK;
        }
        if (*source == HK_SCHED_SEARCH)
            return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the schedule being tuned cannot run: %s", why);
        /* a cached winner this device cannot run (a hand-edited line): the default */
    }
    *source = HK_SCHED_DEFAULT;
    *out = arm == ARM_COOPMAT ? mmq_types[wtype].coopmat[id] : portable_tiles[id];
    if (arm != ARM_COOPMAT && context->profile.slow_unrolled_loops)
        out->rolled = 1;
    if (!id && arm == ARM_COOPMAT) {
        uint64_t bm = out->wm * out->rm * 16ull, bn = out->wn * out->rn * 16ull;
        if (((m + bm - 1) / bm) * ((n + bn - 1) / bn) < MMQ_BIG_TILE_MIN_TILES)
            *out = dense_small_tile;
    }
    const char *var = id ? "HK_MMQ_ID_TILE" : "HK_MMQ_TILE", *env = getenv(var);
    if (env && *env) {
        unsigned v[5];
        char tail;
        if (sscanf(env, "%u,%u,%u,%u,%u%c", &v[0], &v[1], &v[2], &v[3], &v[4], &tail) != 5 || !v[0] || !v[1] ||
            !v[2] || !v[3] || v[2] > 8 || v[3] > 8 || !ks_valid(wtype, v[4]) || v[0] * v[1] > 64)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                            "%s=\"%s\" is not \"wm,wn,rm,rn,ks\" (warps 1..64 in all, rm and rn 1..8, ks 1, 2, 4 "
                            "or 8: 2 or more for the k-quants)",
                            var, env);
        *out = (mmq_tile){v[0], v[1], v[2], v[3], v[4], out->prefetch, out->rolled};
        *source = HK_SCHED_ENV;
    }
    hk_status st = hk__env_u32(fn, "HK_MMQ_PREFETCH", out->prefetch, 0, 1, 0, &out->prefetch);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_MMQ_ROLLED", out->rolled, 0, 1, 0, &out->rolled);
    if (st != HK_OK)
        return st;
    if (hk__env_given("HK_MMQ_PREFETCH") || hk__env_given("HK_MMQ_ROLLED"))
        *source = HK_SCHED_ENV;
    if (!tile_fits(context, out, id, wtype, arm, why, sizeof why))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the %s tile %ux%u warps of %ux%u subtiles (k step %u) cannot run on "
                        "device \"%s\": %s", arm_names[arm], out->wm, out->wn, out->rm, out->rn, out->ks,
                        context->caps.device_name, why);
    return HK_OK;
}

static hk_status check_type_k(const char *fn, hk_type wtype, uint32_t k)
{
    if (!HK_TYPE_TAKES(mmq_types, wtype))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "wtype=%s (%d) is not an MMQ weight type (q8_0, q4_k, q5_k, q6_k)",
                        hk_type_name(wtype), (int)wtype);
    uint32_t block = hk_type_block_values(wtype);
    if (k == 0 || k % block)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a positive multiple of %u (%s block)", k, block,
                        hk_type_name(wtype));
    if (k > MMQ_MAX_K)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is above the limit of %u", k, MMQ_MAX_K);
    return HK_OK;
}

typedef struct mmq_params {
    uint32_t m, n, k, m_groups, n_tiles, n_experts, slots_per_x_row;
} mmq_params;

/* ---- a few tokens (mmq_few.comp): hk_mmq at m <= 16 on Q4_K, Q5_K, Q8_0 or Q6_K weights, 16-byte
 * aligned views, k a multiple of 256 (Q6_K: a tensor of a multiple of 16 bytes). A workgroup owns
 * 16 or 32 weight rows and its warps split k, each staging its own super-blocks, so the weights
 * stream with every load in flight; 8 token columns up to 8 tokens, else 16; the 16 x 8 x 32
 * (16 x 16 x 32) int8 matrices where the device lists them, else the same tiles with packed dot
 * products (warps of 32). ---- */
#define FEW_MAX_M 16u
#ifdef HK_HAVE_SHADER_MMQ_FEW_Q4_K_CM
#define FEW_CM(t) HK_SHADER_MMQ_FEW_##t##_CM
#else
#define FEW_CM(t) HK_NO_SHADER
#endif
#ifdef HK_HAVE_SHADER_MMQ_FEW_Q4_K_DOT
#define FEW_DOT(t) HK_SHADER_MMQ_FEW_##t##_DOT
#else
#define FEW_DOT(t) HK_NO_SHADER
#endif
#define FEW_ARMS(t) 1, {FEW_CM(t), FEW_DOT(t), HK_SHADER_MMQ_FEW_##t##_SCALAR, FEW_DOT(t)}

/* A weight type's few-token shaders and their workgroup's needs (record_few says why). mmq_few.comp's
 * shared memory per warp and row tile: 4 weight tiles of 16 rows of 12 words and 4 more (Q8_0 16
 * more) and 64 factor pairs (Q8_0 64 factors), for Q6_K also 16 raw rows of 57 words; per warp
 * and token a row of 36 words (Q6_K 52). */
typedef struct few_type {
    int takes;
    int shaders[ARM_COUNT];
    uint32_t row_tile_words, token_words;
    uint32_t row_tiles;   /* per warp: workgroups of 16 or 32 rows */
    uint32_t sched_warps; /* warps per scheduler that splitting k may reach */
    uint32_t sets16;      /* register sets at 16 token columns */
    uint32_t raw;         /* super-blocks read as the 16-byte pieces that hold them (Q6_K's 210 bytes) */
} few_type;

static const few_type few_types[HK_REF_TYPES] = {
    [HK_TYPE_Q8_0] = {FEW_ARMS(Q8_0), 4 * 208 + 64, 36, .row_tiles = 1, .sched_warps = 2, .sets16 = 1},
    [HK_TYPE_Q4_K] = {FEW_ARMS(Q4_K), 4 * 196 + 128, 36, .row_tiles = 2, .sched_warps = 1, .sets16 = 1},
    [HK_TYPE_Q5_K] = {FEW_ARMS(Q5_K), 4 * 196 + 128, 36, .row_tiles = 2, .sched_warps = 1, .sets16 = 1},
    [HK_TYPE_Q6_K] = {FEW_ARMS(Q6_K), 4 * 196 + 128 + 16 * 57, 52, .row_tiles = 1, .sched_warps = 1, .sets16 = 2,
                      .raw = 1},
};

/* mmq_few.comp's shared memory for `warps` warps of `row_tiles` row tiles and `tokens` columns
 * (few_types), and the coopmat arm's 16 x tokens element indices. The warp count is picked from
 * the larger one, so that both arms of a device split k alike (and agree bit for bit). */
static uint64_t few_shared_bytes(hk_type wtype, uint32_t warps, uint32_t row_tiles, uint32_t tokens)
{
    const few_type *ft = &few_types[wtype];
    return 4ull * (warps * (row_tiles * ft->row_tile_words + tokens * ft->token_words) + 16 * tokens);
}

static int few_fits(const hk_context *context, hk_type wtype, uint32_t warps, uint32_t row_tiles, uint32_t tokens,
                    uint32_t lanes)
{
    return few_shared_bytes(wtype, warps, row_tiles, tokens) <= context->caps.shared_memory_bytes &&
           warps * lanes <= context->caps.max_workgroup_size;
}

/* whether the few-token kernel takes this call: its types, m, k in super-blocks of 256 values (Q8_0:
 * 8 blocks, 272 bytes, so that every row starts on 16 bytes), both views on 16 bytes; Q6_K's
 * super-blocks (210 bytes) are read as the 16-byte pieces that hold them, so its tensor must end on
 * 16 bytes too (rows x super-blocks a multiple of 8), or its last piece would reach past it */
static int few_takes(hk_type wtype, const hk_binding *b, const mmq_params *p)
{
    return HK_TYPE_TAKES(few_types, wtype) && p->m <= FEW_MAX_M && p->k % 256 == 0 && b[0].view.offset % 16 == 0 &&
           b[1].view.offset % 16 == 0 && (!few_types[wtype].raw || (uint64_t)p->n * (p->k / 256) % 8 == 0);
}

static hk_status record_few(hk_context *context, hk_stream *stream, const char *fn, hk_type wtype,
                            const hk_binding *b, const mmq_params *p)
{
    int arm = ARM_SCALAR;
    const uint32_t tokens = p->m <= 8 ? 8 : 16;
    const few_type *ft = &few_types[wtype];
    const int *shader = ft->shaders;
    /* a subgroup loads whole tokens' pieces (9 invocations each), Q8_0's rows 8 invocations each;
     * Q6_K's raw loads give each invocation the same rows at every load where it has 32 or 64 */
    if (shader[ARM_COOPMAT] != HK_NO_SHADER && coopmat_usable_n(context, tokens) && context->caps.subgroup_size >= 16 &&
        (!ft->raw || context->caps.subgroup_size % 32 == 0))
        arm = ARM_COOPMAT;
    else if (shader[ARM_DOT] != HK_NO_SHADER && (context->features & HK_FEATURE_INTEGER_DOT))
        arm = ARM_DOT;
    /* Workgroups of 32 rows (two row tiles per warp); two register sets at 8 token columns, one at
     * 16, whose products and sums take the registers of the second (two sets there spill). The
     * warps split k: 4, 2 or 1 of them, the most that keep the grid's warps within one per
     * scheduler of the device (its profile's schedulers, else 512): a warp runs fastest alone on its
     * scheduler, and splitting k pays only where the rows alone leave schedulers idle.
     * Q8_0 (nearly twice Q4_K's bytes per value) takes workgroups of 16 rows and up to two warps
     * per scheduler: its loop waits on its loads, so more warps in flight pay where Q4_K's do not.
     * Q6_K (1.46x Q4_K's bytes, and its staging through a raw area) takes workgroups of 16 rows
     * (32 take too many registers) and up to one warp per scheduler as Q4_K. Its weights take one
     * set of registers (a whole super-block ahead), the tokens' halves two. Q5_K is staged as Q4_K,
     * with one more 16-byte piece per invocation and super-block (its 5th bits), and takes Q4_K's
     * workgroups and warps.
     * HK_MMQ_FEW_ROW_TILES, _WARPS and _SETS in probe builds. */
    uint32_t lanes = lanes_of(context, arm), row_tiles = ft->row_tiles, sets = tokens == 8 ? 2 : ft->sets16;
#ifdef HK_MMQ_PROBES
    uint32_t probe = 0;
    hk_status st = hk__env_u32(fn, "HK_MMQ_FEW_ROW_TILES", row_tiles, 1, 2, 0, &row_tiles);
#endif
    const uint32_t groups = (p->n + 16 * row_tiles - 1) / (16 * row_tiles);
    const uint64_t schedulers = context->profile.schedulers ? context->profile.schedulers : 512;
    uint32_t warps = 4;
    while (warps > 1 && (uint64_t)groups * warps > schedulers * ft->sched_warps)
        warps /= 2;
#ifdef HK_MMQ_PROBES
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_MMQ_FEW_WARPS", warps, 1, 16, 1, &warps);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_MMQ_FEW_SETS", sets, 1, 2, 0, &sets);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_MMQ_FEW_PROBE", 0, 0, 7, 0, &probe);
    if (st != HK_OK)
        return st;
#endif
    while (warps > 1 && !few_fits(context, wtype, warps, row_tiles, tokens, lanes))
        warps /= 2;
    if (!few_fits(context, wtype, warps, row_tiles, tokens, lanes))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "device \"%s\" cannot hold the few-token kernel's workgroup "
                        "(%llu bytes of shared memory, %u invocations)", context->caps.device_name,
                        (unsigned long long)few_shared_bytes(wtype, warps, row_tiles, tokens), warps * lanes);
#ifdef HK_MMQ_PROBES
    uint32_t spec[6] = {warps * lanes, lanes, row_tiles, sets, tokens, probe};
#else
    uint32_t spec[5] = {warps * lanes, lanes, row_tiles, sets, tokens};
#endif
    uint32_t params[3] = {p->m, p->n, p->k};
    hk_dispatch_desc d = {.shader = shader[arm],
                          .subgroup_size = arm == ARM_COOPMAT ? lanes : 0,
                          .spec = spec,
                          .spec_count = sizeof spec / sizeof spec[0],
                          .bindings = b,
                          .binding_count = 3,
                          .params = params,
                          .params_bytes = sizeof params,
                          .groups = groups};
    return hk__dispatch(context, stream, fn, &d);
}

/* w and xq as bound (b[0], b[1]): their alignment picks the load widths (flags) */
static hk_status record(hk_context *context, hk_stream *stream, const char *fn, int id, hk_type wtype,
                        const hk_binding *b, uint32_t count, mmq_params *p, uint64_t m_rows_max, const char *key)
{
    int arm = pick_arm(context, id, wtype);
    mmq_tile tl;
    int source, plant;
    hk_status st = get_tile(context, fn, id, wtype, arm, p->m, p->n, key, &tl, &source, &plant);
    if (st != HK_OK)
        return st;
    uint32_t n = p->n;
    if (plant) /* testing only (HK_TUNE_PLANT_WRONG): a candidate that computes half the columns */
        p->n = (p->n + 1) / 2;
    uint32_t flags = (tl.prefetch ? FLAG_PREFETCH : 0) | (tl.rolled ? FLAG_ROLLED : 0);
    const char *layout = getenv("HK_MMQ_LAYOUT");
    if (layout && *layout) {
        if (strcmp(layout, "generic") && strcmp(layout, "auto"))
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "HK_MMQ_LAYOUT=\"%s\" is not \"auto\" or \"generic\"",
                            layout);
        if (!strcmp(layout, "generic"))
            flags |= FLAG_GENERIC;
    }
    if (p->k / 32 > MMQ_ONE_LEVEL_BLOCKS)
        flags |= FLAG_TWO_LEVEL;
#ifdef HK_MMQ_PROBES
    /* development builds only: parts of the work left out (mmq.comp), wrong results */
    uint32_t probe = 0;
    st = hk__env_u32(fn, "HK_MMQ_PROBE", 0, 0, 7, 0, &probe);
    if (st != HK_OK)
        return st;
    flags |= probe << 4;
#endif
    /* A few tokens: the tile does not apply; the tuner's family still notes it (every schedule
     * runs this). Up to 16 where few_takes: the few-token kernel, whose weight stream beats the
     * tokens matvec. Otherwise up to 16 (views off 16 bytes, k off 256, Q6_K tensors off 16
     * bytes): the tokens matvec, which reads each weight once for all of them where the tiles
     * would run a handful of workgroups mostly on rows past m. */
    int few = few_takes(wtype, b, p);
    if (!id && (few || (p->m <= HK_MATVEC_MAX_TOKENS &&
                        hk__matvec_tokens_takes(context, wtype, b[0].view, p->n, p->k, p->m)))) {
        st = few ? record_few(context, stream, fn, wtype, b, p)
                 : hk__matvec_tokens(context, stream, fn, wtype, b[0].view, b[1].view, b[2].view, p->n, p->k, p->m);
        p->n = n;
        if (st == HK_OK) {
            uint32_t served[MQ_PARAMS];
            sched_of_tile(&tl, served);
            hk__tune_note(context, &tune_mmq, served, source);
        }
        return st;
    }
    /* X rows of whole 4-block steps start on 16 bytes (36 x 4 = 144) where the view does; Q4_K and
     * Q5_K chunks are as aligned as the weight view (144 = 9 x 16, 176 = 11 x 16); the descriptor
     * base is aligned to a power of two of at least 16, so the offset tells */
    if (b[1].view.offset % 16 == 0 && (p->k / 32) % 4 == 0 && tl.ks % 4 == 0)
        flags |= FLAG_X16;
    /* the weight loads' width (mmq_weights.glsl WLOAD): Q4_K and Q5_K 16-byte chunks as aligned as
     * the view; Q8_0 and Q6_K 32-bit words where every row starts on 4 bytes (their blocks of 34 and
     * 210 bytes: an even count of them per row) */
    uint32_t wload = hk__load_width(b[0].view.offset);
    if (!mmq_types[wtype].wide_loads)
        wload = wload && (p->k / hk_type_block_values(wtype)) % 2 == 0;
    flags |= wload << FLAG_WLOAD_SHIFT;
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
        /* loop iterations per row tile: its k steps (each with its blocks' loop where rolled) */
        uint64_t stages = ((p->k / 32 + tl.ks - 1) / tl.ks + 2) * (tl.rolled ? 1 + tl.ks : 1);
        uint64_t tiles_max = ((uint64_t)p->m + bm - 1) / bm;
        uint64_t per_group = MMQ_ITER_BUDGET / stages ? MMQ_ITER_BUDGET / stages : 1;
        if (yt < (tiles_max + per_group - 1) / per_group)
            yt = (tiles_max + per_group - 1) / per_group;
        p->m_groups = yt ? (uint32_t)yt : 1;
        groups = (uint64_t)p->n_experts * p->m_groups * p->n_tiles;
    } else {
        p->m_groups = (p->m + bm - 1) / bm;
        groups = (uint64_t)p->m_groups * p->n_tiles;
    }
    uint32_t spec[8] = {tl.wm * tl.wn * lanes, lanes, tl.wm, tl.wn, tl.rm, tl.rn, tl.ks, flags};
    hk_dispatch_desc d = {.shader = mmq_types[wtype].shaders[id][arm],
                          .subgroup_size = arm == ARM_COOPMAT ? lanes : 0,
                          .spec = spec,
                          .spec_count = 8,
                          .bindings = b,
                          .binding_count = count,
                          .params = p,
                          .params_bytes = sizeof *p,
                          .groups = groups};
    st = hk__dispatch(context, stream, fn, &d);
    p->n = n;
    if (st == HK_OK) {
        uint32_t served[MQ_PARAMS];
        sched_of_tile(&tl, served);
        hk__tune_note(context, id ? &tune_mmq_id : &tune_mmq, served, source);
    }
    return st;
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
    mmq_params p = {m, n, k, 0, 0, 0, 0};
    char key[HK_TUNE_SHAPE_CHARS];
    key_mmq(key, wtype, m, n, k);
    return record(context, stream, fn, 0, wtype, b, 3, &p, m, key);
}

/* An expert-indexed shape's own checks, before any view is looked at. */
static hk_status check_id_shape(const char *fn, hk_type wtype, const hk_mmq_id_shape *s)
{
    if (!s)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "shape is NULL");
    hk_status st = check_type_k(fn, wtype, s->k);
    if (st != HK_OK)
        return st;
    if (!s->n_experts || !s->n || !s->n_slots)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts=%u, n=%u and n_slots=%u must all be positive",
                        s->n_experts, s->n, s->n_slots);
    if (!s->slots_per_x_row || s->n_slots % s->slots_per_x_row)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "slots_per_x_row=%u does not divide n_slots=%u",
                        s->slots_per_x_row, s->n_slots);
    if (s->n_experts == UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts=%u leaves no room for offsets[n_experts]",
                        s->n_experts);
    return HK_OK;
}

hk_status hk_mmq_id(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq, hk_view offsets,
                    hk_view slots, hk_view out, const hk_mmq_id_shape *shape)
{
    static const char fn[] = "hk_mmq_id";
    const char *const names[] = {"w", "xq", "out", "offsets", "slots"};
    hk_status st = check_id_shape(fn, wtype, shape);
    if (st != HK_OK)
        return st;
    const hk_mmq_id_shape *s = shape;
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
    mmq_params p = {s->n_slots, s->n, s->k, 0, 0, s->n_experts, s->slots_per_x_row};
    /* an expert takes at most one slot of a token when slots_per_x_row is top_k */
    uint64_t most = s->slots_per_x_row > 1 ? x_rows : s->n_slots;
    char key[HK_TUNE_SHAPE_CHARS];
    key_mmq_id(key, wtype, s);
    return record(context, stream, fn, 1, wtype, b, 5, &p, most, key);
}

hk_status hk_mmq_q4k_id(hk_context *context, hk_stream *stream, hk_view w, hk_view xq, hk_view offsets, hk_view slots,
                        hk_view out, const hk_mmq_id_shape *shape)
{
    return hk_mmq_id(context, stream, HK_TYPE_Q4_K, w, xq, offsets, slots, out, shape);
}

hk_status hk_mmq_q5k_id(hk_context *context, hk_stream *stream, hk_view w, hk_view xq, hk_view offsets, hk_view slots,
                        hk_view out, const hk_mmq_id_shape *shape)
{
    return hk_mmq_id(context, stream, HK_TYPE_Q5_K, w, xq, offsets, slots, out, shape);
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

/* ---- autotuner (src/tune): the families ---- */

static hk_status shape_mmq(const hk_context *context, const hk_tune_desc *desc, char key[HK_TUNE_SHAPE_CHARS])
{
    (void)context;
    const hk_tune_gemm_shape *s = &desc->shape.gemm;
    hk_status st = check_type_k("hk_tune", s->wtype, s->k);
    if (st == HK_OK && (!s->m || !s->n))
        st = hk__fail(HK_ERROR_INVALID_ARGUMENT, "hk_tune", "m=%u and n=%u must both be positive", s->m, s->n);
    if (st == HK_OK)
        st = hk__tune_check_sizes((uint64_t)s->n * s->k, (uint64_t)s->m * s->k, (uint64_t)s->m * s->n);
    if (st == HK_OK)
        key_mmq(key, s->wtype, s->m, s->n, s->k);
    return st;
}

/* top_k distinct experts per token, x per token (slots_per_x_row = top_k) or per slot (1) */
static hk_status shape_mmq_id(const hk_context *context, const hk_tune_desc *desc, char key[HK_TUNE_SHAPE_CHARS])
{
    (void)context;
    const hk_tune_mmq_id_shape *t = &desc->shape.mmq_id;
    const hk_mmq_id_shape *s = &t->shape;
    hk_status st = check_id_shape("hk_tune", t->wtype, s);
    if (st == HK_OK && (!t->top_k || t->top_k > s->n_experts || s->n_slots % t->top_k ||
                        (s->slots_per_x_row != 1 && s->slots_per_x_row != t->top_k)))
        st = hk__fail(HK_ERROR_INVALID_ARGUMENT, "hk_tune", "top_k=%u (1..n_experts=%u), n_slots=%u (a multiple of "
                      "top_k) and slots_per_x_row=%u (1 or top_k) is not a routing the search can make", t->top_k,
                      s->n_experts, s->n_slots, s->slots_per_x_row);
    if (st == HK_OK)
        st = hk__tune_check_sizes((uint64_t)s->n_experts * s->n * s->k, (uint64_t)s->n_slots / s->slots_per_x_row * s->k,
                                  (uint64_t)s->n_slots * s->n);
    if (st == HK_OK)
        key_mmq_id(key, t->wtype, s);
    return st;
}

static int feasible_mmq(const hk_context *context, const hk_tune_desc *desc, const uint32_t *v, uint32_t sig[8],
                        char *why, size_t why_size)
{
    return tile_feasible(context, 0, desc->shape.gemm.wtype, v, sig, why, why_size);
}

static int feasible_mmq_id(const hk_context *context, const hk_tune_desc *desc, const uint32_t *v, uint32_t sig[8],
                           char *why, size_t why_size)
{
    return tile_feasible(context, 1, desc->shape.mmq_id.wtype, v, sig, why, why_size);
}

/* raw random weight blocks: every bit pattern */
static void case_mmq(const hk_tune_desc *desc, hk_case_shape *out)
{
    const hk_tune_gemm_shape *s = &desc->shape.gemm;
    *out = (hk_case_shape){s->wtype, {s->m, s->n, s->k}, 1, 0};
}

static void case_mmq_id(const hk_tune_desc *desc, hk_case_shape *out)
{
    const hk_tune_mmq_id_shape *t = &desc->shape.mmq_id;
    *out = (hk_case_shape){t->wtype,
                           {t->shape.n_experts, t->shape.n, t->shape.k, t->shape.n_slots / t->top_k, t->top_k},
                           t->shape.slots_per_x_row == 1,
                           0};
}

extern const hk_case hk_case_mmq, hk_case_mmq_id; /* src/cases/cases_prefill.c */

#define MMQ_SPACE                                                                                                    \
    {{"wm", 4, {1, 2, 4, 8}, 1, 64, 0}, {"wn", 4, {1, 2, 4, 8}, 1, 64, 0}, {"rm", 3, {1, 2, 4}, 1, 8, 0},             \
     {"rn", 3, {1, 2, 4}, 1, 8, 0},     {"ks", 4, {1, 2, 4, 8}, 1, 8, 1},  {"prefetch", 2, {0, 1}, 0, 1, 0},         \
     {"rolled", 2, {0, 1}, 0, 1, 0}}

static const hk__tunable tune_mmq = {HK_TUNE_MMQ, "mmq", MQ_PARAMS, MMQ_SPACE, shape_mmq, feasible_mmq, &hk_case_mmq,
                                     case_mmq, 0};
static const hk__tunable tune_mmq_id = {HK_TUNE_MMQ_ID, "mmq_id",         MQ_PARAMS,       MMQ_SPACE, shape_mmq_id,
                                        feasible_mmq_id, &hk_case_mmq_id, case_mmq_id, 0};

/* ---- hk_context_prepare ---- */

/* The int8 GEMM dense (and its few-token kernel) per weight type. Its pipelines follow the shape
 * and the views (record): the tile (64-token chunks take the small one, 512 tokens the big one),
 * f32 sums per 32 blocks past k = 4096, X rows read 16 bytes at a time where k is a multiple of
 * 128, and the widest weight loads every row's alignment allows (Q8_0 and Q6_K words only for an
 * even count of blocks per row). So the shapes are models': k 4096 and 14336, on aligned views as
 * GGUF tensors are; and a few tokens (speculative decoding), whose warps per workgroup follow the
 * rows against the device's schedulers. */
static hk_status prepare_mmq(hk__prep *p)
{
    static const uint32_t tokens[] = {64, 512}, ks[] = {4096, 14336}, few_rows[] = {64, 4096, 8192, 14336};
    hk_type types[8];
    uint32_t n_types = hk__types_of(HK_REF_ROLE_WEIGHT, types);
    hk_view w = hk__prep_view(p, 0), x = hk__prep_view(p, 1), out = hk__prep_view(p, 2);
    for (uint32_t t = 0; t < n_types; t++) {
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 2; j++)
                HK_PREP_TRY(p, hk_mmq(p->ctx, p->s, types[t], w, x, out, tokens[i], 4096, ks[j]));
        for (int i = 0; i < 4; i++)
            HK_PREP_TRY(p, hk_mmq(p->ctx, p->s, types[t], w, x, out, 8, few_rows[i], 4096));
    }
    return HK_OK;
}

static hk_status prepare_expert_rows(hk__prep *p)
{
    HK_PREP_TRY(p, hk_moe_expert_rows(p->ctx, p->s, hk__prep_view(p, 0), hk__prep_view(p, 1), hk__prep_view(p, 2),
                                      hk__prep_view(p, 3), 64, 8));
    return HK_OK;
}

/* MoE prefill: Qwen3-30B-A3B's experts (768 x 2048, top-8, 512 tokens), gate/up (k 2048) and down
 * (k 768: Q6_K's 3 super-blocks per row take 16-bit weight loads) in every weight type; 16 of its
 * 128 experts (the count is no part of the pipeline, and 16 keep a bank within what lavapipe binds) */
static hk_status prepare_mmq_id(hk__prep *p)
{
    /* experts, n, k, slots, slots per x row: gate/up read x per token, down per slot */
    static const hk_mmq_id_shape shapes[] = {{16, 768, 2048, 512 * 8, 8}, {16, 2048, 768, 512 * 8, 1}};
    hk_type types[8];
    uint32_t n_types = hk__types_of(HK_REF_ROLE_WEIGHT, types);
    for (uint32_t t = 0; t < n_types; t++)
        for (int j = 0; j < 2; j++)
            HK_PREP_TRY(p, hk_mmq_id(p->ctx, p->s, types[t], hk__prep_view(p, 0), hk__prep_view(p, 1),
                                     hk__prep_view(p, 2), hk__prep_view(p, 3), hk__prep_view(p, 4), &shapes[j]));
    return HK_OK;
}

const hk__family hk__family_mmq = {"hk_mmq", prepare_mmq, {&tune_mmq}};
const hk__family hk__family_moe_expert_rows = {"hk_moe_expert_rows", prepare_expert_rows, {NULL}};
const hk__family hk__family_mmq_id = {"hk_mmq_id", prepare_mmq_id, {&tune_mmq_id}};
