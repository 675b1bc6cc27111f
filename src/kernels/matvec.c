/* Dense quantized matvec over GGUF weight rows (shaders/matvec.comp), with x in f32 (hk_matvec,
 * which also takes F16 rows) or as Q8_1 blocks (hk_matvec_int8; hk_matvec_int8_tokens: up to 16
 * tokens per weight read, the same shader with the token count a specialization constant, 1 for
 * hk_matvec_int8; hk_matvec_int8_add and hk_matvec_int8_glu: hk_matvec_int8 with an epilogue where
 * each row's sum is written, a define of the same shader; hk_matvec_int8_multi: up to three matrices
 * on one x in one dispatch, another define). Layouts of the work, picked per device
 * and shape:
 *  - subgroup rows: each subgroup computes 1, 2 or 4 rows with wide loads and a subgroup-only
 *    reduction; needs full subgroups of a known size (subgroupSizeControl);
 *  - portable (f32 x only): one workgroup per row, any subgroup size, 2-byte aligned views. */
#include "matvec.h"

#include "attention.h"
#include "elementwise.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The autotuner's parameters (the order of tune_*'s params): the one-token int8 kernel's rows per
 * subgroup, items per step, Q8_0 weight loads (hk_matvec_int8, hk_moe_matvec_int8); the tokens
 * kernel's subgroups, rows, items, x resident, workgroup cap (hk_matvec_int8_tokens). */
enum { MV_NROWS, MV_ITEMS, MV_LOAD_BITS, MV_PARAMS };
enum { MT_SUBGROUPS, MT_NROWS, MT_ITEMS, MT_RESIDENT, MT_WGS, MT_PARAMS };
static const hk__tunable tune_matvec_int8, tune_matvec_tokens, tune_moe_matvec_int8;

/* Shape classes (hk_tune): exact for the dense matvecs, the slots' power-of-two range for MoE. */
static void key_one_token(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t rows, uint32_t k)
{
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:%ux%u", hk_type_name(wtype), rows, k);
}

static void key_tokens(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t rows, uint32_t k, uint32_t tokens)
{
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:%ux%ux%u", hk_type_name(wtype), rows, k, tokens);
}

static void key_moe(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, const hk_moe_shape *s)
{
    char sb[32];
    hk__tune_bucket(sb, sizeof sb, s->slots);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:e%u/n%u/k%u/s%s%s", hk_type_name(wtype), s->n_experts, s->n, s->k, sb,
             s->x_per_slot ? "/per-slot" : "");
}

/* Portable kernel: one invocation per 32-value unit of a 4096-wide row (every Vulkan device takes
 * 128-wide workgroups: maxComputeWorkGroupInvocations >= 128). */
#define MATVEC_WG 128u
/* Subgroup rows: subgroups per workgroup, and the most workgroups one dispatch launches (the
 * shader strides over the rest, so subgroups live long instead of launching in short waves). */
#define MATVEC_SUBGROUPS 4u
#define MATVEC_MAX_GROUPS 8192u
/* Rows per subgroup: with few rows, 1, so that small matrices still spread over enough subgroups
 * to fill the device; with more, several rows share each x load: from 4096 rows 2; from 16384
 * rows (a vocabulary head) f32 x 4 for every type, int8 by type (matvec_types). */
#define MATVEC_SOME_ROWS 4096u
#define MATVEC_MANY_ROWS 16384u
/* Items per step (spec constant HK_NITEMS): each lane issues the weight loads of that many items
 * (one per gl_SubgroupSize) before computing them. One token: 1 (HK_MATVEC_INT8_ITEMS = 1, 2 or 4
 * overrides for the dense kernel: more loads in flight where few subgroups run, for more
 * registers).
 * The one-token int8 kernels' schedule, rows per subgroup, items per step and the Q8_0 weight
 * loads (MV_*), is the autotuner's: HK_TUNE_MATVEC_INT8 for hk_matvec_int8 and
 * HK_TUNE_MOE_MATVEC_INT8 for hk_moe_matvec_int8, whose row groups run the same loop (the MoE's
 * only constraint: nrows divides n, so that a group's rows belong to one slot). A row's sum does
 * not depend on any of the three: its lane's items come in the same order whatever the items per
 * step (lane l: l, l + sg, l + 2 sg, ...), each row has its own `precise` sum (matvec.comp), the
 * weight words are the same bytes either way, and subgroupAdd meets the same values; so every
 * schedule is bit-identical to the default. */
/* Loop iterations allowed per invocation (lavapipe stops at 65535; see the count below). */
#define MATVEC_LOOP_BUDGET 63000u

/* Several tokens (hk_matvec_int8_tokens), the schedule of the autotuner's family
 * HK_TUNE_MATVEC_TOKENS (src/tune): subgroups per workgroup, rows per subgroup, items per step, x
 * resident or staged per step, the most workgroups launched. Each lane holds nrows rows' weights
 * of an item and nrows * tokens sums, and reads each token's activation of the item from shared
 * memory (shaders/matvec.comp, hk_xs_q) once for all its rows; a workgroup's subgroups share what
 * is staged. Per (row, token, item) the work is fixed (Q4_K: 16 packed dots and 8 f32
 * operations); what the token side costs (the activation's 80 bytes of shared-memory reads per
 * lane, token and item) is shared by a subgroup's rows, and the staging (reading all of x, 1.125
 * bytes a value per token, from L2 and writing it to shared memory) by the workgroup's rows:
 *  - staged per step: every workgroup copies, per step, the blocks its items read, between two
 *    barriers, for each group of rows it computes. At 4096 x 4096 x 8 tokens with 4 subgroups of
 *    2 rows that is 36 KB of x per 8 rows against 18 KB of their weights, and the copy's registers
 *    (5 words per token) are live beside the weights' and the sums: issue- and occupancy-bound;
 *  - resident: where the pass's x fits in shared memory (per token 40 bytes a block: all of k for
 *    8 tokens up to k = 4864 in 48 KiB), each workgroup stages it once, then its subgroups run the
 *    row groups of the grid-stride loop on their own, with no barrier, as the one-token kernel
 *    does. The staging is then once per workgroup: with the default cap of 256 workgroups, ~9 MB
 *    of L2 reads at 4096 x 4096 x 8 (the weights: 9.4 MB from DRAM), and each subgroup's
 *    registers hold its weights and sums only.
 * Defaults, from the autotuner's winners: 16 subgroups (512 invocations, one workgroup per SM, a
 * quarter of the staging per row of 4 subgroups); x resident where all tokens fit, at most 128
 * workgroups (K-quants) or 256 (Q8_0); else staged per step, as many workgroups as row groups need
 * (up to MATVEC_MAX_GROUPS: each re-stages anyway). Rows per subgroup: 2 from 4096 rows (4 lose
 * at 14336 rows: more weights and sums held), 1 below. Items per step: K-quants 2, Q8_0 1 (the
 * per-type values are in matvec_types). The environment variables HK_MATVEC_TOKENS_* override each
 * (tuning hooks, hkernel.h). A row's sums do not depend on any of these (its items run in the same
 * lanes in the same order, shared memory holds the values the buffer does, and subgroupAdd sees
 * the same values), so every schedule stays bit-identical to hk_matvec_int8. */
#define MATVEC_TOKENS_SUBGROUPS 16u

/* Loop bounds (hkernel.h, HK_MATVEC_MAX_*). Counting every loop iteration of the shaders as if
 * nothing were unrolled, on subgroups of 4 lanes (the worst case): a subgroup of the rows layout
 * loops over O = ceil(rows / (32768 * nrows)) row groups (32768 = MATVEC_MAX_GROUPS *
 * MATVEC_SUBGROUPS subgroups per dispatch); in each, per lane, over ceil(items / 4) items (items
 * = k / 16 for Q8_0, k / 64 for the K-quants, k / 8 for F16) plus nrows * (1 + tokens)
 * iterations to clear the sums and as many to reduce them.
 *  - f32 x: an item costs up to 31 (Q8_0, nrows 4) or 151 (Q6_K, nrows 4) iterations of its
 *    inner loops, an F16 item 1 + nrows. k <= 98304, rows <= 2^24 and ceil(rows / 32768) * k <=
 *    2^18 keep every combination of type, nrows (the MoE may fall to 1) and rows under 63000
 *    iterations (worst: nrows 1 near 2^24 rows; k = 98304 with nrows 4: 58000; F16 under 19000,
 *    nrows 1 at 2^24 rows).
 *  - int8 (hk_matvec_int8, the MoE, hk_matvec_int8_tokens): the item code is straight-line but
 *    for its loops over rows and tokens, and the staging's over chunks, tokens and words.
 *    int8_loop_count counts a call (every step as if all of its items were in range) on the
 *    device's subgroup size and the call's geometry (subgroups per workgroup, workgroups
 *    launched), and the configuration takes the first schedule in its order of preference
 *    (tokens_config: the most tokens per pass, then the largest nrows, the wanted items, the
 *    wanted workgroup cap) whose count stays under MATVEC_LOOP_BUDGET. One token per pass with
 *    nrows 1 and the one-token geometry (1 item per step, or Q8_0's 2 or 4) always does on 4-lane
 *    subgroups: at most 38500 iterations (Q8_0, 4 items, k = 544 at 2^24 rows, where 512 row
 *    groups each clear and reduce their sums) under the f32 rule ceil(rows / 32768) * k <= 2^18.
 *    Real shapes stay under with all their tokens and the default schedules: on 32 lanes and
 *    48 KiB (the H200), 4096 x 4096 at 8 tokens, resident, 199 (Q4_K) and 378 (Q8_0); 151936 x
 *    2048 at 16 tokens, resident (each of 2048 subgroups runs 37 row groups), 11100 (Q8_0);
 *    4096 x 14336 at 8 tokens, staged, 2249 (Q8_0); 16384 x 53248 at 16 tokens, staged, 10781
 *    (Q8_0). On lavapipe's 8 lanes and 32 KiB those shapes run staged, at up to 4 times that
 *    (the last one 42917). The staging counts little beside the row groups (per chunk of 2 to 5
 *    words per invocation and token, 1 + 2 * tokens * (1 + loads), and a sums loop of
 *    ceil(tokens * blocks / (2 * WG)) iterations), and overcounts: those loops are unrolled
 *    (shaders/matvec.comp's [[unroll]]; seen on lavapipe: the staged shapes of
 *    tests/test_tokens.c's loop edge, counted 148000 and 174000 with one workgroup of 4
 *    subgroups, still ran right, while a grid-stride loop of 100000 real iterations did not).
 *    Only shapes of millions of rows and a few blocks of k, or a workgroup cap far under their
 *    row groups, need a larger cap or several passes (the order above finds them).
 * The portable kernel loops far less (k / 4096 units of up to 34). Whoever changes the geometry
 * or the shaders' loops redoes this count (tests/test_tokens.c checks the extremes on lavapipe). */
_Static_assert(MATVEC_MAX_GROUPS * MATVEC_SUBGROUPS == 32768, "HK_MATVEC_MAX_K_ROW_BLOCKS assumes 32768 subgroups");
#define MATVEC_ROW_BLOCK 32768u

enum { MODE_F32, MODE_INT8, MODE_INT8_SCALAR };

#ifdef HK_HAVE_SHADER_MATVEC_Q8_0_INT8
#define DOT(p, t) HK_SHADER_##p##_##t##_INT8
#else /* glslang could not emit OpSDot: the scalar twin everywhere */
#define DOT(p, t) HK_SHADER_##p##_##t##_INT8S
#endif
#define ROW_SHADERS(p, t) {HK_SHADER_##p##_##t##_ROWS, DOT(p, t), HK_SHADER_##p##_##t##_INT8S}
#define EPI_SHADERS(p, e) {DOT(p, e), HK_SHADER_##p##_##e##_INT8S}
#define MATVEC_SHADERS(t)                                                                                              \
    1, {ROW_SHADERS(MATVEC, t), ROW_SHADERS(MOE_MATVEC, t)}, HK_SHADER_MATVEC_##t,                                     \
        {EPI_SHADERS(MATVEC_##t, ADD), EPI_SHADERS(MATVEC_##t, GLU_SILU), EPI_SHADERS(MATVEC_##t, GLU_GELU),        \
         EPI_SHADERS(MATVEC_##t, MULTI)},                                                                             \
        {EPI_SHADERS(MOE_MATVEC_##t, GLU_SILU), EPI_SHADERS(MOE_MATVEC_##t, GLU_GELU)},                               \
        {EPI_SHADERS(MATVEC_##t, PLAIN_F32X), EPI_SHADERS(MATVEC_##t, ADD_F32X),                                       \
         EPI_SHADERS(MATVEC_##t, GLU_SILU_F32X), EPI_SHADERS(MATVEC_##t, GLU_GELU_F32X),                               \
         EPI_SHADERS(MATVEC_##t, MULTI_F32X)},                                                                         \
        EPI_SHADERS(MOE_MATVEC_##t, COMBINE),                                                                         \
        {{EPI_SHADERS(MATVEC_##t, GLU_SILU_Q8), EPI_SHADERS(MATVEC_##t, GLU_GELU_Q8)},                                \
         {EPI_SHADERS(MOE_MATVEC_##t, GLU_SILU_Q8), EPI_SHADERS(MOE_MATVEC_##t, GLU_GELU_Q8)},                        \
         {EPI_SHADERS(MOE_MATVEC_##t, GLU_SILU_Q8_RANKED), EPI_SHADERS(MOE_MATVEC_##t, GLU_GELU_Q8_RANKED)}},       \
        .add_norm = EPI_SHADERS(MATVEC_##t, ADD_NORM),                                                                \
        .qkv = {EPI_SHADERS(MATVEC_##t, QKV_F32), EPI_SHADERS(MATVEC_##t, QKV_F16)}
/* hk_matvec only (f32 x): no int8, MoE or epilogue variants */
#define MATVEC_F32_SHADERS(t)                                                                                          \
    1, {{HK_SHADER_MATVEC_##t##_ROWS, HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER, HK_NO_SHADER}},        \
        HK_SHADER_MATVEC_##t,                                                                                          \
    {                                                                                                                  \
        {HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER},                      \
        {HK_NO_SHADER, HK_NO_SHADER}                                                                                   \
    }                                                                                                                  \
    , {{HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER}}, {                                                 \
        {HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER},                      \
            {HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER}                                                 \
    }                                                                                                                  \
    , {HK_NO_SHADER, HK_NO_SHADER},                                                                                    \
    {                                                                                                                  \
        {{HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER}},                                                  \
        {{HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER}},                                                  \
        {{HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER}}                                                   \
    }                                                                                                                  \
    , .add_norm = {HK_NO_SHADER, HK_NO_SHADER}, .qkv = {                                                               \
        {HK_NO_SHADER, HK_NO_SHADER}, {HK_NO_SHADER, HK_NO_SHADER}                                                     \
    }

/* The epilogues of the dense one-token int8 kernel (hk_matvec_int8_add, hk_matvec_int8_glu by
 * mode), applied where each row's sum is written, and its several matrices (hk_matvec_int8_multi). */
enum { EPI_NONE, EPI_ADD, EPI_GLU_SILU, EPI_GLU_GELU, EPI_MULTI, EPI_COUNT, EPI_COMBINE = EPI_COUNT };

/* A weight type's shaders and what the schedules and the loop count need of it. */
typedef struct matvec_type {
    int takes;
    int rows[2][3];         /* subgroup rows layout [moe][mode] (HK_NO_SHADER: that entry point refuses the type);
                             * rows per subgroup is specialization constant 1 */
    int portable;           /* the portable kernel (f32 x) */
    int epi[EPI_COUNT - 1][2]; /* the dense int8 kernel with an epilogue [EPI_* - 1][packed dot, plain arithmetic] */
    int moe_glu[2][2];      /* the int8 MoE gather with the GLU epilogue [EPI_GLU_GELU - EPI_GLU_SILU][as epi] */
    int f32x[EPI_COUNT][2]; /* the dense int8 kernel on f32 x [EPI_*][as epi] */
    int moe_combine[2];     /* the int8 MoE gather with the weighted combine [as epi] */
    int glu_q8[3][2][2];    /* the int8 GLU with its output as Q8_1 blocks [dense, moe, moe ranking its experts]
                             * [EPI_GLU_* - EPI_GLU_SILU][as epi] */
    int add_norm[2];        /* the residual add with the RMSNorm tail (hk_matvec_int8_add_norm) [as epi] */
    int qkv[2][2];          /* the multi with hk_rope's epilogue (hk_matvec_int8_qkv) [f32, f16 cache][as epi] */
    uint32_t item;          /* values of an item (a lane's unit of k): Q8_0 half a block, the K-quants 64, F16 8 */
    uint32_t x_sums;        /* the dot reads x's block sums (the K-quants' mins), so the staging copies them */
    uint32_t load16;        /* the weights may load 16 bits at a time (MV_LOAD_BITS): Q8_0's 34-byte blocks */
    uint32_t rows_align;    /* the weight rows' alignment on the rows layout: Q4_K, Q5_K and F16 load 16 bytes at a
                             * time */
    uint32_t many_nrows;    /* int8 rows per subgroup from MATVEC_MANY_ROWS */
    uint32_t tokens_items;  /* hk_matvec_int8_tokens' items per step */
    uint32_t resident_wgs;  /* hk_matvec_int8_tokens' workgroup cap with x resident */
} matvec_type;

static const matvec_type matvec_types[HK_REF_TYPES] = {
    [HK_TYPE_Q8_0] = {MATVEC_SHADERS(Q8_0), .item = 16, .load16 = 1, .rows_align = 2, .many_nrows = 2,
                      .tokens_items = 1, .resident_wgs = 256},
    [HK_TYPE_Q4_K] = {MATVEC_SHADERS(Q4_K), .item = 64, .x_sums = 1, .rows_align = 16, .many_nrows = 2,
                      .tokens_items = 2, .resident_wgs = 128},
    [HK_TYPE_Q5_K] = {MATVEC_SHADERS(Q5_K), .item = 64, .x_sums = 1, .rows_align = 16, .many_nrows = 2,
                      .tokens_items = 2, .resident_wgs = 128},
    [HK_TYPE_Q6_K] = {MATVEC_SHADERS(Q6_K), .item = 64, .x_sums = 1, .rows_align = 2, .many_nrows = 4,
                      .tokens_items = 2, .resident_wgs = 128},
    [HK_TYPE_F16] = {MATVEC_F32_SHADERS(F16), .item = 8, .rows_align = 16},
};

/* Whether the entry point (int8: x as Q8_1 blocks; moe: the expert gather) takes the weight type. */
static int matvec_takes(hk_type wtype, int int8, int moe)
{
    return HK_TYPE_TAKES(matvec_types, wtype) &&
           matvec_types[wtype].rows[moe][int8 ? MODE_INT8_SCALAR : MODE_F32] != HK_NO_SHADER;
}

/* The types the entry point takes, in hk_type order; their count. */
static uint32_t matvec_types_of(int int8, int moe, hk_type out[HK_REF_TYPES])
{
    uint32_t n = 0;
    for (int t = 0; t < HK_REF_TYPES; t++)
        if (matvec_takes((hk_type)t, int8, moe))
            out[n++] = (hk_type)t;
    return n;
}

/* Whether rows of k values of the type keep the rows layout's alignment (an F16 row is 2k bytes:
 * k a multiple of 8), given a view that does. */
static int rows_aligned(hk_type wtype, uint32_t k)
{
    uint64_t row_bytes = (uint64_t)k / hk_type_block_values(wtype) * hk_type_block_bytes(wtype);
    return row_bytes % matvec_types[wtype].rows_align == 0;
}

/* The geometry of an int8 rows-layout dispatch, as the loop count needs it. staged: 0 x read from
 * the buffer, 1 staged per step, 2 resident. */
typedef struct int8_geom {
    uint32_t sg, subgroups, nrows, tokens, items;
    uint64_t groups; /* workgroups launched */
    int staged;
} int8_geom;

/* Workgroups of the one-token and MoE kernels: one per MATVEC_SUBGROUPS row groups, at most
 * MATVEC_MAX_GROUPS. */
static uint64_t one_groups(uint32_t rows, uint32_t nrows)
{
    uint64_t row_groups = (rows + (uint64_t)nrows - 1) / nrows;
    uint64_t groups = (row_groups + MATVEC_SUBGROUPS - 1) / MATVEC_SUBGROUPS;
    return groups < MATVEC_MAX_GROUPS ? groups : MATVEC_MAX_GROUPS;
}

/* Workgroups of the tokens kernel: subgroups row groups each, at most max, balanced: the fewest
 * grid-stride iterations a subgroup needs under that cap, then as few workgroups as give every
 * subgroup that many (so that none runs one more row group than the others while they wait). */
static uint64_t balanced_groups(uint32_t rows, uint32_t nrows, uint32_t subgroups, uint32_t max)
{
    uint64_t row_groups = (rows + (uint64_t)nrows - 1) / nrows;
    uint64_t needed = (row_groups + subgroups - 1) / subgroups, loops = (needed + max - 1) / max;
    return (needed + loops - 1) / loops;
}

/* The staging copy's words per invocation and token before its first store, and its blocks per
 * chunk (shaders/matvec.comp, HK_XSTAGE_LOADS, HK_XSTAGE_CHUNK). */
static uint32_t stage_loads(uint32_t tokens) { return 40 / tokens > 5 ? 5 : 40 / tokens; }
static uint32_t stage_chunk(uint32_t tokens, uint32_t wg) { return stage_loads(tokens) * wg / 9 & ~1u; }

/* x staged per step: the blocks per token that a step of `items` items per lane reads */
static uint32_t step_blocks(hk_type wtype, uint32_t sg, uint32_t items)
{
    return items * sg * matvec_types[wtype].item / 32;
}

/* The blocks of x the f32x kernel holds (spec constant HK_XSTAGE_BLOCKS): k / 32 rounded up to a
 * power of 2 of at least F32X_MIN_BLOCKS, so that a few pipelines serve every k (a pipeline per k
 * would be built on first use at each new width) while a workgroup's shared memory stays within
 * twice what its x needs. */
#define F32X_MIN_BLOCKS 64u
static uint32_t f32x_blocks(uint32_t k)
{
    uint32_t blocks = F32X_MIN_BLOCKS;
    while (blocks < k / 32)
        blocks *= 2;
    return blocks;
}

/* The f32x kernel's subgroups per workgroup (HK_MATVEC_F32X_SUBGROUPS) and workgroups at most
 * (HK_MATVEC_F32X_GROUPS; the rest of the row groups in its grid-stride loop): each workgroup
 * quantizes x once for many subgroups */
#define F32X_SUBGROUPS 16u
#define F32X_MAX_GROUPS 256u

/* The f32x kernel's staged chunk of x for the norm (spec constant HK_F32X_SB): the whole of x's
 * capacity where that is short, so that the quantizer reads the row from there; else 1024 values
 * at a time. */
#define F32X_WHOLE_BLOCKS 128u
#define F32X_CHUNK_BLOCKS 32u
static uint32_t f32x_chunk_blocks(uint32_t k)
{
    uint32_t blocks = f32x_blocks(k);
    return blocks <= F32X_WHOLE_BLOCKS ? blocks : F32X_CHUNK_BLOCKS;
}

/* Loop iterations of one invocation of the int8 rows layout (shaders/matvec.comp), every loop
 * counted: O row groups of 1 + 2 * nrows * (1 + tokens) (clear and reduce the sums) + steps of
 * `items` items per lane. A step: 1 + items * (1 + nrows) (loading the weights) + items * (1 +
 * nrows + tokens * (1 + nrows)) (unpacking them, computing), + the staging of its blocks where
 * staged per step; resident, the staging of all k / 32 blocks once. Staging n blocks:
 * ceil(n / chunk) chunks of 1 + 2 * tokens * (1 + loads) (loads, then stores, per token), and for
 * the K-quants 1 + ceil(tokens * n / 2 / WG) iterations of the sums. */
static uint64_t int8_loop_count(uint32_t rows, uint32_t k, hk_type wtype, const int8_geom *g)
{
    uint64_t row_groups = (rows + (uint64_t)g->nrows - 1) / g->nrows;
    uint64_t stride = g->groups * g->subgroups;
    uint64_t o = (row_groups + stride - 1) / stride;
    uint64_t all_items = k / matvec_types[wtype].item, per_step = (uint64_t)g->sg * g->items;
    uint64_t steps = (all_items + per_step - 1) / per_step;
    uint64_t tokens = g->tokens, wg = (uint64_t)g->sg * g->subgroups;
    uint64_t step = 1 + g->items * (1 + g->nrows) + g->items * (1 + g->nrows + tokens * (1 + g->nrows));
    uint64_t stage = 0;
    if (g->staged == 3) {
        /* f32 x (HK_XF32): the norm's chunks (each staged, its blocks' 2 * 32 squares, its
         * groups' 32 sums), the groups once, then per 4 * WG values a quad of 4 written-out steps,
         * and the sums */
        uint64_t n = k / 32, groups = (n + 31) / 32, sb = f32x_chunk_blocks(k), chunks = (n + sb - 1) / sb;
        stage = chunks * ((32 * sb + wg - 1) / wg + (sb + wg - 1) / wg * 64 + (sb / 32 + wg - 1) / wg * 32) +
                groups + (k + 4 * wg - 1) / (4 * wg) * 4;
        if (matvec_types[wtype].x_sums)
            stage += 1 + (n / 2 + wg - 1) / wg;
        return o * (1 + 2 * g->nrows * (1 + tokens) + steps * step) + stage;
    }
    if (g->staged) {
        uint64_t n = g->staged == 2 ? k / 32 : step_blocks(wtype, g->sg, g->items);
        uint64_t chunk = stage_chunk(g->tokens, (uint32_t)wg);
        stage = (n + chunk - 1) / chunk * (1 + 2 * tokens * (1 + stage_loads(g->tokens)));
        if (matvec_types[wtype].x_sums)
            stage += 1 + (tokens * (n / 2) + wg - 1) / wg;
        if (g->staged == 1)
            step += stage;
    }
    return o * (1 + 2 * g->nrows * (1 + tokens) + steps * step) + (g->staged == 2 ? stage : 0);
}

/* The dense matvec (moe NULL) and the MoE expert gather (moe: ids and shape; rows = slots * n). */
typedef struct moe_args {
    hk_view ids;
    const hk_moe_shape *shape;
} moe_args;

/* 1 where the one-token int8 schedule v (MV_*) runs exactly as asked on this device for rows x k;
 * else 0 and the reason (the tuner tallies them by their words). moe_n: the MoE's rows per expert,
 * which nrows must divide (a row group inside one slot), 0 for the dense kernel. The static tier of
 * both one-token families, and the check of a cached winner at the call. */
static int one_token_fits(const hk_context *context, hk_type wtype, uint32_t rows, uint32_t k, uint32_t moe_n,
                          const uint32_t *v, char *why, size_t why_size)
{
    const hk_caps *caps = &context->caps;
    uint32_t sg = caps->subgroup_size, wg = sg * MATVEC_SUBGROUPS;
    if (!(context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL)) {
        snprintf(why, why_size, "subgroup mismatch: no full subgroups of a required size (subgroupSizeControl)");
        return 0;
    }
    if (wg > caps->max_workgroup_size) {
        snprintf(why, why_size, "workgroup of %u over the device's %u", wg, caps->max_workgroup_size);
        return 0;
    }
    if (16 + (uint64_t)wg * 4 > caps->shared_memory_bytes) {
        snprintf(why, why_size, "shared memory %u over the device's %u", 16 + wg * 4, caps->shared_memory_bytes);
        return 0;
    }
    if (!matvec_types[wtype].load16 && v[MV_LOAD_BITS] != 32) {
        snprintf(why, why_size, "invalid: load_bits=%u applies to q8_0 only", v[MV_LOAD_BITS]);
        return 0;
    }
    if (moe_n % v[MV_NROWS]) {
        snprintf(why, why_size, "invalid: nrows=%u does not divide n=%u (a row group would straddle two slots)",
                 v[MV_NROWS], moe_n);
        return 0;
    }
    int8_geom g = {sg, MATVEC_SUBGROUPS, v[MV_NROWS], 1, v[MV_ITEMS], one_groups(rows, v[MV_NROWS]), 0};
    uint64_t loops = int8_loop_count(rows, k, wtype, &g);
    if (loops > MATVEC_LOOP_BUDGET) {
        snprintf(why, why_size, "loops %llu over the budget %u", (unsigned long long)loops, MATVEC_LOOP_BUDGET);
        return 0;
    }
    return 1;
}

/* The int8 rows layout's configuration for a one-token call (hk_matvec_int8, a one-token pass,
 * the MoE): rows per subgroup (nrows: the rule passed in), items per step (the tuning hook
 * HK_MATVEC_INT8_ITEMS for the dense kernel) and the Q8_0 weight loads (HK_MATVEC_Q8_0_LOAD_BITS);
 * the largest nrows, then the wanted items before the default, whose loop count stays under the
 * budget. nrows 1 and 1 item (the default) loop as counted above, so there is always one. moe_n:
 * the MoE's rows per expert (nrows divides it), 0 for the dense kernel. sched: a tuned schedule
 * (one token, dense or MoE): no hook is read, nothing falls back (one_token_fits or a failure). */
static hk_status int8_config(hk_context *context, const char *fn, hk_type wtype, uint32_t rows, uint32_t k,
                             uint32_t moe_n, uint32_t *nrows, uint32_t *items, uint32_t *q8_0_w16, const hk__sched *sched)
{
    uint32_t bits = 0, sg = context->caps.subgroup_size;
    if (sched) {
        char why[160] = "";
        const uint32_t *v = sched->v;
        if (!one_token_fits(context, wtype, rows, k, moe_n, v, why, sizeof why))
            return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the tuned schedule nrows=%u,items=%u,load_bits=%u does not run "
                            "(rows=%u, k=%u): %s", v[MV_NROWS], v[MV_ITEMS], v[MV_LOAD_BITS], rows, k, why);
        *nrows = v[MV_NROWS];
        *items = v[MV_ITEMS];
        *q8_0_w16 = matvec_types[wtype].load16 && v[MV_LOAD_BITS] == 16;
        return HK_OK;
    }
    hk_status st = HK_OK;
    if (matvec_types[wtype].load16)
        st = hk__env_u32(fn, "HK_MATVEC_Q8_0_LOAD_BITS", 0, 16, 32, 1, &bits);
    uint32_t env_items = 0;
    if (st == HK_OK && !moe_n)
        st = hk__env_u32(fn, "HK_MATVEC_INT8_ITEMS", 0, 1, 4, 1, &env_items);
    if (st != HK_OK)
        return st;
    *q8_0_w16 = bits == 16; /* 32-bit words by default: the faster loads at any token count */
    uint32_t want_items = env_items ? env_items : 1;
    for (uint32_t nr = *nrows; nr >= 1; nr /= 2) {
        if (moe_n % nr)
            continue;
        for (int fallback = 0; fallback < 2; fallback++) {
            uint32_t it = fallback ? 1 : want_items;
            if (fallback && it == want_items)
                break;
            int8_geom g = {sg, MATVEC_SUBGROUPS, nr, 1, it, one_groups(rows, nr), 0};
            if (int8_loop_count(rows, k, wtype, &g) > MATVEC_LOOP_BUDGET)
                continue;
            *nrows = nr;
            *items = it;
            return HK_OK;
        }
    }
    return hk__fail(HK_ERROR_UNSUPPORTED, fn, "no configuration loops under %u iterations (rows=%u, k=%u)",
                    MATVEC_LOOP_BUDGET, rows, k);
}

/* hk_matvec_int8_glu's schedule from hk_matvec_int8's for the same shape (nrows, items: the
 * tuner's winner, the hooks or the defaults), rows per subgroup counting the slots of both
 * matrices: a row group holds nrows slots, nrows / 2 rows of W_gate and the same rows of W_up, so
 * that the subgroup holds as many weight rows (registers) as hk_matvec_int8's schedule does; at
 * least 2 slots (one row of each). Where that loops past the budget (2 * rows weight rows), 1 item
 * per step, then fewer slots: 2 slots and 1 item stay under it for every shape hk_matvec_int8's
 * limits take (on 4-lane subgroups ceil(rows / 32768) * (9 + 10 * ceil(k / 64)) iterations for
 * Q8_0, under 51000 where ceil(rows / 32768) * k <= 262144 and rows <= 2^24). */
static void glu_config(const hk_context *context, hk_type wtype, uint32_t rows, uint32_t k, uint32_t *nrows,
                       uint32_t *items)
{
    uint32_t slots = *nrows < 2 ? 2 : *nrows;
    for (;;) {
        int8_geom g = {context->caps.subgroup_size, MATVEC_SUBGROUPS, slots, 1, *items, one_groups(2 * rows, slots), 0};
        if (int8_loop_count(2 * rows, k, wtype, &g) <= MATVEC_LOOP_BUDGET || (slots == 2 && *items == 1))
            break;
        if (*items > 1)
            *items = 1;
        else
            slots /= 2;
    }
    *nrows = slots;
}

/* hk_matvec_int8_multi's rows as its row groups number them: each matrix's rows padded to whole
 * groups of nrows, so that a group's rows lie in one matrix (shaders/matvec.comp,
 * HK_MATVEC_MULTI). */
static uint32_t multi_rows(const uint32_t *rows, uint32_t n, uint32_t nrows)
{
    uint32_t padded = 0;
    for (uint32_t i = 0; i < n; i++)
        padded += (rows[i] + nrows - 1) / nrows * nrows;
    return padded;
}

/* hk_matvec_int8_multi's schedule from hk_matvec_int8's for (wtype, total rows, k): where the
 * padded rows loop past the budget, 1 item per step, then fewer rows per subgroup. nrows 1 and 1
 * item pad nothing, so int8_config's guarantee for the total holds there. */
static void multi_config(const hk_context *context, hk_type wtype, const uint32_t *rows, uint32_t n, uint32_t k,
                         uint32_t *nrows, uint32_t *items)
{
    for (;;) {
        uint32_t padded = multi_rows(rows, n, *nrows);
        int8_geom g = {context->caps.subgroup_size, MATVEC_SUBGROUPS, *nrows, 1, *items, one_groups(padded, *nrows), 0};
        if (int8_loop_count(padded, k, wtype, &g) <= MATVEC_LOOP_BUDGET || (*nrows == 1 && *items == 1))
            return;
        if (*items > 1)
            *items = 1;
        else
            *nrows /= 2;
    }
}

/* ---- several tokens ---- */

/* x resident: the blocks per token that shared memory holds for `tokens` tokens (hk_xs_q: 40
 * bytes a block, 16 more), even. One capacity per device and token count (a specialization
 * constant), so that one pipeline serves every k up to it. */
static uint32_t resident_blocks(const hk_context *context, uint32_t tokens)
{
    uint32_t shared = context->caps.shared_memory_bytes;
    return shared > 16 ? (shared - 16) / (40 * tokens) & ~1u : 0;
}

/* A tokens kernel's plan: the schedule (MT_*), tokens per pass (1: one-token passes, the
 * hk_matvec_int8 kernel with the schedule's nrows and items in the one-token geometry), the
 * workgroups launched. */
typedef struct tokens_plan {
    uint32_t v[MT_PARAMS];
    uint32_t per_pass;
    uint64_t groups;
} tokens_plan;

/* The blocks per token held in shared memory by a pass of n tokens (spec constant HK_XSTAGE_BLOCKS) */
static uint32_t plan_stage_blocks(const hk_context *context, hk_type wtype, const tokens_plan *p, uint32_t n)
{
    if (n < 2)
        return 0;
    return p->v[MT_RESIDENT] ? resident_blocks(context, n)
                             : step_blocks(wtype, context->caps.subgroup_size, p->v[MT_ITEMS]);
}

/* 1 where schedule v runs passes of `pass` (>= 2) tokens of this shape exactly as asked on this
 * device, with *groups the workgroups it launches; else 0 and the reason (the tuner tallies them
 * by their words). */
static int tokens_fits(const hk_context *context, hk_type wtype, uint32_t rows, uint32_t k, uint32_t pass,
                       const uint32_t *v, uint64_t *groups, char *why, size_t why_size)
{
    const hk_caps *caps = &context->caps;
    uint32_t sg = caps->subgroup_size, wg = sg * v[MT_SUBGROUPS];
    if (wg > caps->max_workgroup_size) {
        snprintf(why, why_size, "workgroup of %u over the device's %u", wg, caps->max_workgroup_size);
        return 0;
    }
    if (v[MT_RESIDENT] && k / 32 > resident_blocks(context, pass)) {
        snprintf(why, why_size, "shared memory: x resident needs %llu bytes for %u tokens, over the device's %u",
                 16 + 40ull * pass * (k / 32 + (k / 32 & 1)), pass, caps->shared_memory_bytes);
        return 0;
    }
    uint64_t shared = 16 + 40ull * pass * step_blocks(wtype, sg, v[MT_ITEMS]);
    if (!v[MT_RESIDENT] && shared > caps->shared_memory_bytes) {
        snprintf(why, why_size, "shared memory %llu over the device's %u", (unsigned long long)shared,
                 caps->shared_memory_bytes);
        return 0;
    }
    *groups = balanced_groups(rows, v[MT_NROWS], v[MT_SUBGROUPS], v[MT_WGS]);
    int8_geom g = {sg, v[MT_SUBGROUPS], v[MT_NROWS], pass, v[MT_ITEMS], *groups, v[MT_RESIDENT] ? 2 : 1};
    uint64_t loops = int8_loop_count(rows, k, wtype, &g);
    if (loops > MATVEC_LOOP_BUDGET) {
        snprintf(why, why_size, "loops %llu over the budget %u", (unsigned long long)loops, MATVEC_LOOP_BUDGET);
        return 0;
    }
    return 1;
}

/* A tuned schedule as asked: the most tokens per pass it runs, at least 2 (else it is not this
 * kernel's schedule: 0 and why). */
static int tokens_strict(const hk_context *context, hk_type wtype, uint32_t rows, uint32_t k, uint32_t tokens,
                         const uint32_t *v, tokens_plan *p, char *why, size_t why_size)
{
    char first_why[160] = "";
    for (uint32_t pass = tokens; pass >= 2; pass--) {
        if (tokens_fits(context, wtype, rows, k, pass, v, &p->groups, pass == tokens ? first_why : why,
                        pass == tokens ? sizeof first_why : why_size)) {
            memcpy(p->v, v, sizeof p->v);
            p->per_pass = pass;
            return 1;
        }
    }
    snprintf(why, why_size, "%s", first_why);
    return 0;
}

/* The tokens kernel's plan for a call (tokens >= 2): a tuned schedule as asked (tokens_strict),
 * else the tuning hooks over the defaults (above), then, in this order, whatever runs first: x
 * resident as wanted (then staged, where even 2 tokens do not fit), the most tokens per pass, the
 * largest nrows, the wanted items then the default, the wanted workgroup cap then
 * MATVEC_MAX_GROUPS; last, one-token passes in the one-token geometry (nrows 1 always loops
 * under the budget there). */
static hk_status tokens_config(const hk_context *context, const char *fn, hk_type wtype, uint32_t rows, uint32_t k,
                               uint32_t tokens, const hk__sched *sched, tokens_plan *p)
{
    char why[160] = "";
    if (sched) {
        if (tokens_strict(context, wtype, rows, k, tokens, sched->v, p, why, sizeof why))
            return HK_OK;
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the tuned schedule subgroups=%u,nrows=%u,items=%u,resident=%u,"
                        "wgs=%u does not run (rows=%u, k=%u, tokens=%u): %s", sched->v[MT_SUBGROUPS],
                        sched->v[MT_NROWS], sched->v[MT_ITEMS], sched->v[MT_RESIDENT], sched->v[MT_WGS], rows, k,
                        tokens, why);
    }
    uint32_t env_sub = 0, env_rows = 0, env_items = 0, env_res = 2, env_wgs = 0, env_pass = 0;
    hk_status st = hk__env_u32(fn, "HK_MATVEC_TOKENS_SUBGROUPS", 0, 4, 32, 1, &env_sub);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_MATVEC_TOKENS_NROWS", 0, 1, 4, 1, &env_rows);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_MATVEC_TOKENS_ITEMS", 0, 1, 4, 1, &env_items);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_MATVEC_TOKENS_RESIDENT", 2, 0, 1, 0, &env_res);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_MATVEC_TOKENS_WGS", 0, 1, MATVEC_MAX_GROUPS, 0, &env_wgs);
    if (st == HK_OK)
        st = hk__env_u32(fn, "HK_MATVEC_TOKENS_PASS", 0, 1, HK_MATVEC_MAX_TOKENS, 0, &env_pass);
    if (st != HK_OK)
        return st;
    uint32_t cap = env_pass && env_pass < tokens ? env_pass : tokens;
    uint32_t want_rows = rows >= MATVEC_SOME_ROWS ? 2 : 1;
    want_rows = env_rows ? env_rows : want_rows;
    uint32_t default_items = matvec_types[wtype].tokens_items, want_items = env_items ? env_items : default_items;
    uint32_t want_res = env_res != 2 ? env_res : cap >= 2 && k / 32 <= resident_blocks(context, cap);
    uint32_t want_sub = env_sub ? env_sub : MATVEC_TOKENS_SUBGROUPS;
    uint32_t want_wgs = env_wgs ? env_wgs : !want_res ? MATVEC_MAX_GROUPS : matvec_types[wtype].resident_wgs;
    for (uint32_t ri = 0; ri < 2; ri++) {
        if (ri && !want_res)
            break;
        for (uint32_t pass = cap; pass >= 2; pass--)
            for (uint32_t nr = want_rows; nr >= 1; nr /= 2)
                for (uint32_t ii = 0; ii < 2; ii++) {
                    uint32_t it = ii ? default_items : want_items;
                    if (ii && it == want_items)
                        break;
                    for (uint32_t wi = 0; wi < 2; wi++) {
                        uint32_t wgs = wi ? MATVEC_MAX_GROUPS : want_wgs;
                        if (wi && wgs == want_wgs)
                            break;
                        const uint32_t v[MT_PARAMS] = {want_sub, nr, it, ri ? 0 : want_res, wgs};
                        if (tokens_fits(context, wtype, rows, k, pass, v, &p->groups, why, sizeof why)) {
                            memcpy(p->v, v, sizeof p->v);
                            p->per_pass = pass;
                            return HK_OK;
                        }
                    }
                }
    }
    for (uint32_t nr = want_rows; nr >= 1; nr /= 2)
        for (uint32_t ii = 0; ii < 2; ii++) {
            uint32_t it = ii ? default_items : want_items;
            if (ii && it == want_items)
                break;
            int8_geom g = {context->caps.subgroup_size, MATVEC_SUBGROUPS, nr, 1, it, one_groups(rows, nr), 0};
            if (int8_loop_count(rows, k, wtype, &g) > MATVEC_LOOP_BUDGET)
                continue;
            const uint32_t v[MT_PARAMS] = {MATVEC_SUBGROUPS, nr, it, 0, MATVEC_MAX_GROUPS};
            memcpy(p->v, v, sizeof p->v);
            p->per_pass = 1;
            p->groups = g.groups;
            return HK_OK;
        }
    return hk__fail(HK_ERROR_UNSUPPORTED, fn, "no configuration loops under %u iterations (rows=%u, k=%u)",
                    MATVEC_LOOP_BUDGET, rows, k);
}

/* The tokens of hk_matvec_int8_tokens in passes of p->per_pass tokens (all of them, or fewer where
 * the device's shared memory or the loop budget does not take them all). Each pass is the dispatch
 * d on its tokens' x and y: a token's outputs do not depend on the tokens beside it. Every
 * pipeline is created before anything is recorded, and a run-now call (stream NULL) records all
 * passes into a stream of its own that is submitted only when all are in, so that a failure
 * writes nothing. */
static hk_status matvec_passes(hk_context *context, hk_stream *stream, const char *fn, hk_dispatch_desc *d,
                               const hk_binding *b, uint64_t x_token_bytes, uint64_t y_token_bytes, uint32_t tokens,
                               hk_type wtype, const tokens_plan *p)
{
    uint32_t spec[7];
    memcpy(spec, d->spec, sizeof spec);
    d->spec = spec;
    hk_binding pass[3];
    memcpy(pass, b, sizeof pass);
    d->bindings = pass;
    uint32_t per_pass = p->per_pass;
    /* the pipelines: full passes, and the last one */
    const uint32_t counts[2] = {per_pass, tokens % per_pass ? tokens % per_pass : per_pass};
    for (int i = 0; i < 2; i++) {
        spec[2] = counts[i];
        spec[3] = plan_stage_blocks(context, wtype, p, counts[i]);
        spec[6] = counts[i] > 1 ? p->v[MT_RESIDENT] : 0;
        VkPipeline pipeline;
        VkPipelineLayout layout;
        VkDescriptorSetLayout set_layout;
        hk_status st = hk__pipeline_get(context, fn, d, &pipeline, &layout, &set_layout);
        if (st != HK_OK)
            return st;
    }
    if (per_pass >= tokens)
        return hk__dispatch(context, stream, fn, d);
    hk_stream *s = stream;
    if (!s) {
        hk_status st = hk__stream_create(context, 0, VK_NULL_HANDLE, &s);
        if (st != HK_OK)
            return st;
    }
    hk_status st = HK_OK;
    for (uint32_t t0 = 0; t0 < tokens && st == HK_OK; t0 += per_pass) {
        uint32_t n = tokens - t0 < per_pass ? tokens - t0 : per_pass;
        pass[1].view.offset = b[1].view.offset + t0 * x_token_bytes;
        pass[1].bytes = n * x_token_bytes;
        pass[2].view.offset = b[2].view.offset + t0 * y_token_bytes;
        pass[2].bytes = n * y_token_bytes;
        spec[2] = n;
        spec[3] = plan_stage_blocks(context, wtype, p, n);
        spec[6] = n > 1 ? p->v[MT_RESIDENT] : 0;
        st = hk__dispatch(context, s, fn, d);
    }
    if (!stream) {
        if (st == HK_OK)
            st = hk_stream_submit(s);
        hk_stream_destroy(s);
    }
    return st;
}

/* hk_matvec_int8_tokens with tokens >= 2 on the rows layout (arguments checked): the schedule (the
 * tuner's candidate, a cached winner, the hooks or the defaults), its plan, the passes. */
static hk_status tokens_dispatch(hk_context *context, hk_stream *stream, const char *fn, hk_type wtype, int mode,
                                 hk_dispatch_desc *d, uint32_t *params, uint32_t rows, uint32_t k, uint32_t tokens,
                                 uint64_t x_bytes)
{
    char key[HK_TUNE_SHAPE_CHARS];
    key_tokens(key, wtype, rows, k, tokens);
    hk__sched sched = {{0}, 0};
    int source = HK_SCHED_DEFAULT;
    int tuned = hk__tune_lookup(context, &tune_matvec_tokens, key, &sched, &source);
    if (!tuned) {
        static const char *const hooks[] = {"HK_MATVEC_TOKENS_SUBGROUPS", "HK_MATVEC_TOKENS_NROWS",
                                            "HK_MATVEC_TOKENS_ITEMS",     "HK_MATVEC_TOKENS_RESIDENT",
                                            "HK_MATVEC_TOKENS_WGS",       "HK_MATVEC_TOKENS_PASS"};
        for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
            if (hk__env_given(hooks[i]))
                source = HK_SCHED_ENV;
    }
    tokens_plan p;
    hk_status st = tokens_config(context, fn, wtype, rows, k, tokens, tuned ? &sched : NULL, &p);
    if (st != HK_OK && tuned && source == HK_SCHED_TUNED) {
        /* a cached winner this shape cannot run (only a hand-edited line can be one): the default */
        tuned = 0;
        source = HK_SCHED_DEFAULT;
        st = tokens_config(context, fn, wtype, rows, k, tokens, NULL, &p);
    }
    uint32_t bits = 0;
    if (st == HK_OK && matvec_types[wtype].load16 && !tuned)
        st = hk__env_u32(fn, "HK_MATVEC_Q8_0_LOAD_BITS", 0, 16, 32, 1, &bits);
    if (st != HK_OK)
        return st;
    if (tuned && sched.plant)
        params[0] = rows / 2; /* testing only: a candidate that leaves half the rows unwritten */
    uint32_t sg = context->caps.subgroup_size, first = p.per_pass < tokens ? p.per_pass : tokens;
    uint32_t spec[7] = {sg * p.v[MT_SUBGROUPS], p.v[MT_NROWS], first, plan_stage_blocks(context, wtype, &p, first),
                        p.v[MT_ITEMS], bits == 16, first > 1 ? p.v[MT_RESIDENT] : 0};
    d->shader = matvec_types[wtype].rows[0][mode];
    d->subgroup_size = sg;
    d->groups = p.groups;
    d->spec = spec;
    d->spec_count = 7;
    st = matvec_passes(context, stream, fn, d, d->bindings, x_bytes, (uint64_t)rows * 4, tokens, wtype, &p);
    if (st == HK_OK)
        hk__tune_note(context, &tune_matvec_tokens, p.v, source);
    return st;
}

/* tokens: 1, or (dense int8 only) 2..HK_MATVEC_MAX_TOKENS, x [tokens, k/32] and y [tokens, rows] */
/* The loop limits a call must keep (hkernel.h, HK_MATVEC_MAX_*), as names, values and bounds, so
 * that matvec() reports the first one broken and hk__matvec_tokens_takes tests them all. */
typedef struct matvec_limit {
    const char *name;
    uint64_t value, limit;
} matvec_limit;

static uint32_t matvec_limits(uint32_t rows, uint32_t k, uint32_t tokens, int moe, matvec_limit out[4])
{
    uint64_t row_blocks_k = (rows + (uint64_t)MATVEC_ROW_BLOCK - 1) / MATVEC_ROW_BLOCK * k;
    uint32_t n = 0;
    out[n++] = (matvec_limit){"k", k, HK_MATVEC_MAX_K};
    out[n++] = (matvec_limit){moe ? "slots*n" : "rows", rows, HK_MATVEC_MAX_ROWS};
    out[n++] = (matvec_limit){moe ? "ceil(slots*n/32768)*k" : "ceil(rows/32768)*k", row_blocks_k,
                              HK_MATVEC_MAX_K_ROW_BLOCKS};
    if (tokens > 1)
        out[n++] = (matvec_limit){"ceil(rows/32768)*k*(tokens+1)", row_blocks_k * (tokens + 1),
                                  HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS};
    return n;
}

/* the subgroup-rows layout: full subgroups of a known size, MATVEC_SUBGROUPS of them per workgroup */
static int rows_layout_ok(const hk_context *context)
{
    return (context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL) &&
           context->caps.subgroup_size * MATVEC_SUBGROUPS <= context->caps.max_workgroup_size;
}

/* the weight view's alignment: the int8 and MoE kernels take the rows layout's (matvec_types: Q4_K
 * and Q5_K read weights 16 bytes at a time), having no portable twin; the dense f32 path falls back instead */
static uint32_t weight_align(int int8, int moe, hk_type wtype)
{
    return int8 || moe ? matvec_types[wtype].rows_align : 2;
}

/* The shape's own checks (type, counts, loop limits), before any view is looked at. */
static hk_status check_shape(const char *fn, hk_type wtype, uint32_t rows, uint32_t k, uint32_t tokens, int int8,
                             int moe)
{
    if (!matvec_takes(wtype, int8, moe)) {
        hk_type types[HK_REF_TYPES];
        char list[64] = "";
        for (uint32_t t = 0, n_types = matvec_types_of(int8, moe, types), n = 0; t < n_types; t++)
            n += (uint32_t)snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", hk_type_name(types[t]));
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "wtype=%s (%d) is not a matvec weight type (%s)",
                        hk_type_name(wtype), (int)wtype, list);
    }
    uint32_t block = hk_type_block_values(wtype);
    if (rows == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows is 0");
    if (k == 0 || k % block)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a positive multiple of %u (%s block)", k, block,
                        hk_type_name(wtype));
    matvec_limit limits[4];
    hk_status st = HK_OK;
    for (uint32_t i = 0, n = matvec_limits(rows, k, tokens, moe, limits); i < n && st == HK_OK; i++)
        st = hk__check_limit(fn, limits[i].name, limits[i].value, limits[i].limit);
    return st;
}

/* An epilogue of the dense one-token int8 kernel: its kind (EPI_*) and its view, the residual
 * (EPI_ADD) or W_up (the GLU); EPI_MULTI: the n matrices (w[0] is matvec()'s w) and their rows
 * (matvec()'s rows their sum), checked by hk_matvec_int8_multi. */
typedef struct epilogue {
    int kind;
    hk_view view;
    const hk_view *w;
    const uint32_t *rows;
    uint32_t n;
    int f32x;        /* x is f32, quantized by each workgroup (hk_matvec_int8_f32x; kind EPI_NONE allowed) */
    hk_view norm;    /* with f32x: the RMSNorm's weight, buffer NULL for none */
    float eps;
    hk_view weights; /* EPI_COMBINE (the MoE gather): the slots' weights; view: the residual (buffer NULL: none) */
    uint32_t top_k;  /* EPI_COMBINE, and the ranking GLU: slots per token */
    int q8_1;        /* the GLU's output as Q8_1 blocks of 32 rows (y: rows / 32 blocks) */
    int ranked;      /* the MoE GLU with Q8_1 output ranks each slot's expert from the logits (the ids view) */
    const hk_norm_out *tail; /* EPI_ADD: the new residual's RMSNorm by the last workgroup (NULL: none) */
    const struct qkv_rope *qkv; /* EPI_MULTI: hk_rope's epilogue (NULL: none) */
} epilogue;

/* hk_matvec_int8_qkv's epilogue: hk_rope's desc (checked) and its views */
typedef struct qkv_rope {
    const hk_rope_desc *desc;
    uint32_t roles, rot; /* HK_QKV_* of the matrices; the rotated dims */
    int factors;         /* freq_factors given */
    hk_view positions, freq_factors, k_cache, v_cache;
    uint64_t k_bytes, v_bytes;
} qkv_rope;

/* its push constants after hk_matvec_int8_multi's five words (shaders/matvec.comp, HK_QKV_ROPE) */
typedef struct qkv_params {
    uint32_t rows, k, rows1, rows2, x_stride;
    uint32_t rope;
    hk__rope_cache cache;
    uint32_t pad;
    float turns[2], pow2[4][2];
} qkv_params;

/* hk_matvec_int8_add_norm: the most rows (the one workgroup of the tail loops over every value a
 * few times) and its workspace, the arrival counter. */
#define NORM_TAIL_MAX_ROWS 32768u
#define NORM_TAIL_WORKSPACE_BYTES 4u
/* shared memory of the one-token kernel beside the tail's staged chunk: the arrival's word and
 * hk_xs_q's one vector, rounded up */
#define NORM_TAIL_OTHER_SHARED 64u

/* The f32x kernel's shared memory: x resident (hk_xs_q: 40 bytes per block and one vector), the
 * norm's staged chunk with a group sum per 32 blocks, and the quantizer's two words per invocation
 * of a workgroup of wg */
static uint64_t f32x_shared(uint32_t k, uint32_t wg)
{
    uint32_t blocks = f32x_blocks(k);
    return 16 + 40ull * blocks + hk__norm_stage_bytes(f32x_chunk_blocks(k), (blocks + 31) / 32) + 8ull * wg;
}

/* Whether the f32x kernel fits the device and loops under the budget with this schedule */
static hk_status f32x_fits(const hk_context *context, const char *fn, hk_type wtype, uint32_t rows, uint32_t k,
                           uint32_t nrows, uint32_t items, uint32_t wg, uint64_t groups)
{
    uint64_t shared = f32x_shared(k, wg);
    if (shared > context->caps.shared_memory_bytes)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "x of k=%u needs %llu bytes of shared memory, over the device's %u",
                        k, (unsigned long long)shared, context->caps.shared_memory_bytes);
    int8_geom g = {context->caps.subgroup_size, wg / context->caps.subgroup_size, nrows, 1, items, groups, 3};
    uint64_t loops = int8_loop_count(rows, k, wtype, &g);
    if (loops > MATVEC_LOOP_BUDGET)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "rows=%u, k=%u loop %llu times, over the budget %u", rows, k,
                        (unsigned long long)loops, MATVEC_LOOP_BUDGET);
    return HK_OK;
}

/* Whether the combine kernel loops under the budget: per workgroup ceil(units / groups) units, each
 * ceil(top_k / subgroups) row groups of the gather's loop, the slots' sums and the combine. */
static hk_status combine_fits(const hk_context *context, const char *fn, hk_type wtype, uint64_t units, uint32_t k,
                              uint32_t top_k, uint32_t nrows, uint32_t items, uint64_t groups)
{
    int8_geom one = {context->caps.subgroup_size, 1, nrows, 1, items, 1, 0};
    uint64_t group = int8_loop_count(nrows, k, wtype, &one);
    uint64_t loops = (units + groups - 1) / groups *
                     ((top_k + MATVEC_SUBGROUPS - 1) / MATVEC_SUBGROUPS * (group + 2 * nrows) + top_k + 2);
    if (loops > MATVEC_LOOP_BUDGET)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "k=%u, top_k=%u loop %llu times, over the budget %u", k, top_k,
                        (unsigned long long)loops, MATVEC_LOOP_BUDGET);
    return HK_OK;
}

/* Subgroups of the GLU's Q8_1-output workgroup: up to Q8_SUBGROUPS, no more than a block's row
 * groups (32 / (nrows / 2)) and the device's workgroup takes. Each subgroup runs its share of a
 * block's row groups in turn, so more subgroups keep more loads in flight. */
#define Q8_SUBGROUPS 16u
static uint32_t q8_subgroups(const hk_context *context, uint32_t nrows)
{
    uint32_t n = Q8_SUBGROUPS, per_block = 32 / (nrows / 2);
    while (n > 1 && (n > per_block || n * context->caps.subgroup_size > context->caps.max_workgroup_size))
        n /= 2;
    return n;
}

/* Whether the Q8_1-output GLU loops under the budget: per subgroup ceil(blocks / groups) blocks,
 * each ceil(row groups of a block / subgroups) row groups of the one-token loop (and rank, the
 * ranking GLU's rounds) and the block's quantization. */
static hk_status q8_fits(const hk_context *context, const char *fn, hk_type wtype, uint32_t rows, uint32_t k,
                         uint32_t nrows, uint32_t items, uint32_t subgroups, uint64_t groups, uint32_t rank)
{
    int8_geom one = {context->caps.subgroup_size, 1, nrows, 1, items, 1, 0};
    uint64_t group = int8_loop_count(nrows, k, wtype, &one) + rank, per_block = 32 / (nrows / 2);
    uint64_t loops = (rows / 32 + groups - 1) / groups * ((per_block + subgroups - 1) / subgroups * group + 20);
    if (loops > MATVEC_LOOP_BUDGET)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "rows=%u, k=%u loop %llu times, over the budget %u", rows, k,
                        (unsigned long long)loops, MATVEC_LOOP_BUDGET);
    return HK_OK;
}

/* The dense matvec (moe NULL; epi: hk_matvec_int8's epilogues, NULL for none) and the MoE expert
 * gather (epi: NULL, or the GLU's with W_up's bank after the ids). */
static hk_status matvec(hk_context *context, hk_stream *stream, const char *fn, int int8, hk_type wtype, hk_view w,
                        hk_view x, hk_view y, uint32_t rows, uint32_t k, uint32_t tokens, const moe_args *moe,
                        const epilogue *epi)
{
    int add = epi && epi->kind == EPI_ADD, multi = epi && epi->kind == EPI_MULTI;
    int glu = epi && (epi->kind == EPI_GLU_SILU || epi->kind == EPI_GLU_GELU), f32x = epi && epi->f32x;
    int has_norm = f32x && epi->norm.buffer, combine = epi && epi->kind == EPI_COMBINE;
    int has_residual = combine && epi->view.buffer, tail = add && epi->tail, has_yn = 0, qkv = multi && epi->qkv;
    const char *names[9] = {glu ? "w_gate" : multi ? "w[0]" : "w", int8 && !f32x ? "xq" : "x",
                            glu && epi->q8_1 ? "yq" : qkv ? "q_out" : "y",
                            moe ? (epi && epi->ranked ? "logits" : "ids") : add ? "residual" : multi ? "w[1]" : "w_up",
                            combine ? "weights" : moe ? "w_up" : "w[2]", "residual", NULL, NULL, NULL};
    int q8 = glu && epi->q8_1;
    hk_status st = check_shape(fn, wtype, rows, k, tokens, int8, moe != NULL);
    if (st != HK_OK)
        return st;
    if (tail) {
        if (rows % 32 || rows > NORM_TAIL_MAX_ROWS)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u is not a multiple of 32 up to %u (the norm's Q8_1 "
                            "blocks)", rows, NORM_TAIL_MAX_ROWS);
        if (!(epi->tail->eps > 0.0f) || !isfinite(epi->tail->eps))
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "norm->eps=%g must be positive and finite",
                            (double)epi->tail->eps);
        st = hk__optional_view(fn, "norm->yn", epi->tail->yn, &has_yn);
        if (st != HK_OK)
            return st;
        names[4] = "norm->weight";
        names[5] = "norm->yq";
        names[6] = "norm->yn";
        names[7] = "norm->workspace";
    }
    if (q8 && (moe ? moe->shape->n : rows) % 32)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s=%u is not a multiple of 32 (the Q8_1 output's blocks)",
                        moe ? "n" : "rows", moe ? moe->shape->n : rows);
    const matvec_type *mt = &matvec_types[wtype];
    uint32_t block = hk_type_block_values(wtype);
    uint32_t w_align = weight_align(int8, moe != NULL, wtype);
    uint64_t x_bytes = int8 && !f32x ? (uint64_t)k / 32 * 36 : (uint64_t)k * 4;
    uint64_t w_rows = moe ? (uint64_t)moe->shape->n_experts * moe->shape->n : rows;
    uint32_t slots = moe ? moe->shape->slots : 0;
    uint64_t row_bytes = (uint64_t)k / block * hk_type_block_bytes(wtype), w_bytes = row_bytes * w_rows;
    if (multi)
        w_bytes = row_bytes * epi->rows[0];
    hk_binding b[9] = {
        {w, w_bytes, w_align, 0, 0},
        {x, moe && moe->shape->x_per_slot ? x_bytes * slots : x_bytes * tokens, (moe && !int8) ? 16 : 4, 0, 0},
        {y, q8 ? (uint64_t)rows / 32 * 36 : (uint64_t)rows * tokens * 4, 4, 1, 0},
        {moe ? moe->ids : (hk_view){0}, (uint64_t)slots * 4, 4, 0, 0}, /* ranked: the logits, below */
        {{0}, 0, 0, 0, 0},
        {{0}, 0, 0, 0, 0},
        {{0}, 0, 0, 0, 0},
        {{0}, 0, 0, 0, 0},
        {{0}, 0, 0, 0, 0},
    };
    if (add)
        b[3] = (hk_binding){epi->view, (uint64_t)rows * 4, 4, 0, 0};
    if (tail) { /* an absent yn is bound to yq, never written */
        b[4] = (hk_binding){epi->tail->weight, (uint64_t)rows * 4, 4, 0, 0};
        b[5] = (hk_binding){epi->tail->yq, (uint64_t)rows / 32 * 36, 4, 1, 0};
        b[6] = (hk_binding){has_yn ? epi->tail->yn : epi->tail->yq, has_yn ? (uint64_t)rows * 4 : 0, 4, has_yn, 0};
        b[7] = (hk_binding){epi->tail->workspace, NORM_TAIL_WORKSPACE_BYTES, 4, 1, 0};
    }
    int ranked = q8 && moe && epi->ranked;
    if (ranked)
        b[3].bytes = (uint64_t)slots / epi->top_k * moe->shape->n_experts * 4;
    if (combine) { /* y and the residual: a token's n outputs, not every slot's */
        uint64_t y_bytes = (uint64_t)slots / epi->top_k * moe->shape->n * 4;
        b[2].bytes = y_bytes;
        b[4] = (hk_binding){epi->weights, (uint64_t)slots * 4, 4, 0, 0};
        b[5] = (hk_binding){has_residual ? epi->view : y, has_residual ? y_bytes : 0, 4, 0, 0};
    }
    else if (glu)
        b[moe ? 4 : 3] = (hk_binding){epi->view, w_bytes, w_align, 0, 0};
    for (uint32_t i = 1; multi && i < epi->n; i++)
        b[2 + i] = (hk_binding){epi->w[i], row_bytes * epi->rows[i], w_align, 0, 0};
    uint32_t count = multi     ? 2 + epi->n
                     : tail    ? 8
                     : combine ? 5u + (uint32_t)has_residual
                     : moe && glu ? 5
                     : moe || add || glu ? 4
                                         : 3;
    /* y may be exactly the residual and overlap nothing else: in place, the residual is checked as y
     * is (the same view and bytes), so an overlap with w or xq is still refused */
    int in_place = (add || has_residual) && epi->view.buffer == y.buffer && epi->view.offset == y.offset;
    uint32_t checked = in_place ? (combine ? 5 : 3) : count;
    hk_binding norm_b = has_norm ? (hk_binding){epi->norm, (uint64_t)k * 4, 4, 0, 0} : (hk_binding){x, 0, 4, 0, 0};
    hk_binding check[9];
    memcpy(check, b, sizeof check);
    if (has_norm) { /* the norm's weight is checked after the others, then bound 6th */
        check[checked] = norm_b;
        names[checked++] = "norm";
    }
    if (qkv) {
        /* the roles' outputs, the positions and the factors; what a call lacks is bound as W0 with
         * no bytes, never read or written */
        const qkv_rope *r = epi->qkv;
        hk_binding none = {w, 0, w_align, 0, 0};
        uint32_t kv_align = hk_type_alignment(r->desc->kv.type);
        if (r->roles & HK_QKV_Q)
            b[2].bytes = (uint64_t)epi->rows[0] * 4;
        else
            b[2] = none;
        for (uint32_t i = epi->n; i < 3; i++)
            b[2 + i] = none;
        b[5] = (hk_binding){r->positions, 4, 4, 0, 0};
        b[6] = r->factors ? (hk_binding){r->freq_factors, (uint64_t)r->rot / 2 * 4, 4, 0, 0} : none;
        b[7] = r->roles & HK_QKV_K ? (hk_binding){r->k_cache, r->k_bytes, kv_align, 1, 0} : none;
        b[8] = r->roles & HK_QKV_V ? (hk_binding){r->v_cache, r->v_bytes, kv_align, 1, 0} : none;
        names[5] = "positions";
        names[6] = "freq_factors";
        names[7] = "k_cache";
        names[8] = "v_cache";
        count = 9;
        checked = 0;
        for (uint32_t i = 0; i < 9; i++)
            if (b[i].bytes) {
                check[checked] = b[i];
                names[checked++] = names[i];
            }
    }
    if (tail) { /* every binding but the residual in place and the absent yn */
        checked = 0;
        for (uint32_t i = 0; i < 8; i++)
            if (!(i == 3 && in_place) && !(i == 6 && !has_yn)) {
                check[checked] = b[i];
                names[checked++] = names[i];
            }
    }
    st = hk__check_bindings(context, stream, fn, names, check, checked);
    if (st != HK_OK)
        return st;
    /* the shader binds 5 views (f32x: 6): the matrices a call does not have, and what no epilogue
     * uses, are never read, bound as W0 (the norm's absent weight as x) */
    for (; (multi || f32x) && count < 5; count++)
        b[count] = (hk_binding){w, 0, w_align, 0, 0};
    if (f32x)
        b[count++] = norm_b;
    if (combine)
        count = 6; /* no residual: bound to y, never read */
    uint32_t sg = context->caps.subgroup_size, wg;
    int rows_layout = rows_layout_ok(context);
    if ((int8 || moe) && !rows_layout) /* no portable twin for these */
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "device \"%s\" cannot require full subgroups (subgroupSizeControl)",
                        context->caps.device_name);
    int aligned = int8 || moe || (x.offset % 16 == 0 && w.offset % mt->rows_align == 0 && rows_aligned(wtype, k));
    uint32_t params[7] = {rows, k, 0, 0, 0, 0, has_norm};
    if (f32x)
        memcpy(&params[5], &epi->eps, 4);
    if (tail) {
        memcpy(&params[5], &epi->tail->eps, 4);
        params[6] = (uint32_t)has_yn;
    }
    if (multi) /* each matrix's rows; none for those the call does not have */
        for (uint32_t i = 0; i < 3; i++)
            params[i ? i + 1 : 0] = i < epi->n ? epi->rows[i] : 0;
    if (moe) {
        params[2] = moe->shape->n;
        params[3] = moe->shape->n_experts;
        params[4] = moe->shape->x_per_slot ? (uint32_t)(x_bytes / 4) : 0;
    }
    if (combine) { /* the output's rows: the tokens' */
        params[0] = slots / epi->top_k * moe->shape->n;
        params[5] = epi->top_k;
        params[6] = has_residual;
    }
    if (ranked)
        params[5] = epi->top_k;
    hk_dispatch_desc d = {.bindings = b, .binding_count = count, .params = params,
                          .params_bytes = f32x || combine || tail ? sizeof params : (ranked ? 6 : 5) * sizeof *params};
    qkv_params rope_params;
    if (qkv) {
        const qkv_rope *r = epi->qkv;
        const hk_rope_desc *rd = r->desc;
        uint32_t roles = 0;
        for (uint32_t bit = 0, m = 0; bit < 3; bit++) /* each matrix's role (0 Q, 1 K, 2 V) */
            if (r->roles & 1u << bit)
                roles |= bit << 2 * m++;
        rope_params = (qkv_params){
            .rows = params[0], .k = k, .rows1 = params[2], .rows2 = params[3],
            .rope = r->rot / 2 | rd->head_dim << 8 | roles << 17 | (uint32_t)r->factors << 23,
            .cache = hk__rope_cache_of(rd),
        };
        hk__rope_angles(rd, r->rot, rope_params.turns, rope_params.pow2);
        d.params = &rope_params;
        d.params_bytes = sizeof rope_params;
    }
    int mode = !int8 ? MODE_F32 : (context->features & HK_FEATURE_INTEGER_DOT) ? MODE_INT8 : MODE_INT8_SCALAR;
    if (tokens > 1)
        return tokens_dispatch(context, stream, fn, wtype, mode, &d, params, rows, k, tokens, x_bytes);
    uint32_t nrows = 1, items = 1, q8_0_w16 = 0;
    /* the autotuner's schedule (src/tune): one-token int8 calls, dense and MoE (int8 has the rows
     * layout here); the f32 kernels take none */
    hk__sched sched = {{0}, 0};
    int sched_source = HK_SCHED_DEFAULT, tuned = 0;
    const hk__tunable *family = !int8 ? NULL : moe ? &tune_moe_matvec_int8 : &tune_matvec_int8;
    uint32_t moe_n = moe ? moe->shape->n : 0;
    if (family) {
        char key[HK_TUNE_SHAPE_CHARS];
        if (moe)
            key_moe(key, wtype, moe->shape);
        else
            key_one_token(key, wtype, rows, k);
        tuned = hk__tune_lookup(context, family, key, &sched, &sched_source);
        /* the hooks int8_config reads: the Q8_0 loads, and the dense kernel's items */
        if (!tuned && ((mt->load16 && hk__env_given("HK_MATVEC_Q8_0_LOAD_BITS")) ||
                       (!moe && hk__env_given("HK_MATVEC_INT8_ITEMS"))))
            sched_source = HK_SCHED_ENV;
    }
    if (rows_layout && aligned) {
        if (rows >= MATVEC_MANY_ROWS)
            nrows = mode == MODE_F32 ? 4 : mt->many_nrows;
        else if (rows >= MATVEC_SOME_ROWS)
            nrows = 2;
        if (int8) {
            uint32_t nrows_in = nrows;
            st = int8_config(context, fn, wtype, rows, k, moe_n, &nrows, &items, &q8_0_w16, tuned ? &sched : NULL);
            if (st != HK_OK && tuned && sched_source == HK_SCHED_TUNED) {
                /* a cached winner this shape cannot run (a hand-edited line, or a MoE winner at a
                 * slot count of its class whose rows loop past the budget): the default, rather
                 * than a failed call */
                tuned = 0;
                sched_source = HK_SCHED_DEFAULT;
                nrows = nrows_in;
                st = int8_config(context, fn, wtype, rows, k, moe_n, &nrows, &items, &q8_0_w16, NULL);
            }
            if (st != HK_OK)
                return st;
            if (glu)
                glu_config(context, wtype, rows, k, &nrows, &items);
            /* a rotated pair's two rows in one row group */
            int pairs = qkv && (epi->qkv->roles & (HK_QKV_Q | HK_QKV_K));
            if (pairs && nrows < 2)
                nrows = 2;
            if (multi)
                multi_config(context, wtype, epi->rows, epi->n, k, &nrows, &items);
            if (pairs && nrows % 2)
                return hk__fail(HK_ERROR_UNSUPPORTED, fn, "k=%u: the rotated matrices' rows loop past the budget "
                                "in row pairs", k);
            if (tuned && sched.plant && !multi)
                params[0] = rows / 2; /* testing only: a candidate that leaves half the rows unwritten */
        }
        /* a MoE row group must not straddle two slots (the GLU's: its nrows / 2 rows of each bank) */
        while (moe && moe->shape->n % (glu ? nrows / 2 : nrows))
            nrows /= 2;
        wg = sg * MATVEC_SUBGROUPS;
        int dot = mode == MODE_INT8 ? 0 : 1;
        d.shader = combine ? mt->moe_combine[dot]
                   : q8 ? mt->glu_q8[ranked ? 2 : moe != NULL][epi->kind - EPI_GLU_SILU][dot]
                   : f32x ? mt->f32x[epi->kind][dot]
                   : tail ? mt->add_norm[dot]
                   : qkv ? mt->qkv[epi->qkv->desc->kv.type == HK_TYPE_F16][dot]
                   : !epi ? mt->rows[moe != NULL][mode]
                   : moe ? mt->moe_glu[epi->kind - EPI_GLU_SILU][dot]
                         : mt->epi[epi->kind - 1][dot];
        d.subgroup_size = sg;
        /* the GLU's groups: nrows / 2 rows of each matrix; the multi's: each matrix's rows padded; the
         * combine's: one workgroup per token's group of rows, its subgroups over the slots */
        uint32_t group_rows = glu ? 2 * rows : multi ? multi_rows(epi->rows, epi->n, nrows) : rows;
        d.groups = one_groups(group_rows, nrows);
        if (f32x) {
            /* each workgroup quantizes all of x first: wider workgroups and fewer of them, each
             * subgroup looping over more row groups */
            uint32_t cap, subgroups;
            st = hk__env_u32(fn, "HK_MATVEC_F32X_SUBGROUPS", F32X_SUBGROUPS, 2, 32, 1, &subgroups);
            if (st == HK_OK)
                st = hk__env_u32(fn, "HK_MATVEC_F32X_GROUPS", F32X_MAX_GROUPS, 1, MATVEC_MAX_GROUPS, 0, &cap);
            if (st != HK_OK)
                return st;
            while (subgroups > 2 && (sg * subgroups > context->caps.max_workgroup_size ||
                                     f32x_shared(k, sg * subgroups) > context->caps.shared_memory_bytes))
                subgroups /= 2;
            wg = sg * subgroups;
            uint64_t row_groups = ((uint64_t)group_rows + nrows - 1) / nrows;
            d.groups = (row_groups + subgroups - 1) / subgroups;
            d.groups = d.groups < cap ? d.groups : cap;
        }
        if (combine) {
            uint64_t units = (uint64_t)params[0] / nrows;
            d.groups = units < MATVEC_MAX_GROUPS ? units : MATVEC_MAX_GROUPS;
        }
        if (q8) { /* a workgroup per block of 32 outputs at a time, its subgroups the block's row groups */
            uint64_t blocks = rows / 32;
            d.groups = blocks < MATVEC_MAX_GROUPS ? blocks : MATVEC_MAX_GROUPS;
            wg = sg * q8_subgroups(context, nrows);
        }
    } else {
        wg = MATVEC_WG;
        d.shader = mt->portable;
        d.groups = rows;
    }
    /* the tail's chunk of y (HK_TAIL_SB) beside the kernel's own few words of shared memory; f32x's
     * chunk of x (HK_F32X_SB) */
    uint32_t spec[8] = {wg, nrows, 1, f32x ? f32x_blocks(k) : 0, items, q8_0_w16, f32x,
                        tail ? hk__norm_stage_blocks(context, NORM_TAIL_OTHER_SHARED) : f32x ? f32x_chunk_blocks(k) : 0};
    if (tail && !spec[7])
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the norm's tail needs more shared memory than the device's %u bytes",
                        context->caps.shared_memory_bytes);
    d.spec = spec;
    d.spec_count = !d.subgroup_size ? 1 : tail || f32x ? 8 : int8 ? 6 : 2;
    if (f32x) {
        st = f32x_fits(context, fn, wtype, rows, k, nrows, items, wg, d.groups);
        if (st != HK_OK)
            return st;
    }
    if (combine) {
        st = combine_fits(context, fn, wtype, params[0] / nrows, k, epi->top_k, nrows, items, d.groups);
        if (st != HK_OK)
            return st;
    }
    if (q8) {
        /* the ranking GLU: each row group first runs up to top_k rounds over its lanes' experts */
        uint32_t rank = ranked ? epi->top_k * ((moe->shape->n_experts + sg - 1) / sg + 1) : 0;
        st = q8_fits(context, fn, wtype, rows, k, nrows, items, wg / sg, d.groups, rank);
        if (st != HK_OK)
            return st;
    }
    st = hk__dispatch(context, stream, fn, &d);
    if (st == HK_OK && family) {
        const uint32_t served[MV_PARAMS] = {nrows, items, q8_0_w16 ? 16 : 32};
        hk__tune_note(context, family, served, sched_source);
    }
    return st;
}

hk_status hk_matvec(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view x, hk_view y,
                    uint32_t rows, uint32_t k)
{
    return matvec(context, stream, "hk_matvec", 0, wtype, w, x, y, rows, k, 1, NULL, NULL);
}

hk_status hk_matvec_int8(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq, hk_view y,
                         uint32_t rows, uint32_t k)
{
    return matvec(context, stream, "hk_matvec_int8", 1, wtype, w, xq, y, rows, k, 1, NULL, NULL);
}

hk_status hk_matvec_int8_add(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                             hk_view residual, hk_view y, uint32_t rows, uint32_t k)
{
    const epilogue epi = {.kind = EPI_ADD, .view = residual};
    return matvec(context, stream, "hk_matvec_int8_add", 1, wtype, w, xq, y, rows, k, 1, NULL, &epi);
}

hk_status hk_matvec_int8_add_norm_workspace_bytes(hk_context *context, uint32_t rows, uint64_t *out_bytes)
{
    static const char fn[] = "hk_matvec_int8_add_norm_workspace_bytes";
    if (!out_bytes)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_bytes is NULL");
    *out_bytes = 0;
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    if (!rows || rows % 32 || rows > NORM_TAIL_MAX_ROWS)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u is not a multiple of 32 from 32 to %u", rows,
                        NORM_TAIL_MAX_ROWS);
    *out_bytes = NORM_TAIL_WORKSPACE_BYTES;
    return HK_OK;
}

hk_status hk_matvec_int8_add_norm(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                                  hk_view residual, hk_view y, uint32_t rows, uint32_t k, const hk_norm_out *norm)
{
    static const char fn[] = "hk_matvec_int8_add_norm";
    if (!norm)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "norm is NULL");
    const epilogue epi = {.kind = EPI_ADD, .view = residual, .tail = norm};
    return matvec(context, stream, fn, 1, wtype, w, xq, y, rows, k, 1, NULL, &epi);
}

/* The GLU's epilogue for mode (checked) and its output: y f32, or Q8_1 blocks (q8_1) */
static hk_status glu_epilogue(const char *fn, hk_glu_mode mode, hk_view w_up, int q8_1, epilogue *epi)
{
    *epi = (epilogue){.kind = mode == HK_GLU_GELU_TANH ? EPI_GLU_GELU : EPI_GLU_SILU, .view = w_up, .q8_1 = q8_1};
    return hk__check_glu_mode(fn, mode);
}

/* hk_matvec_int8_glu and hk_matvec_int8_glu_q8_1 */
static hk_status dense_glu(hk_context *context, hk_stream *stream, const char *fn, int q8_1, hk_type wtype,
                           hk_view w_gate, hk_view w_up, hk_view xq, hk_view y, uint32_t rows, uint32_t k,
                           hk_glu_mode mode)
{
    epilogue epi;
    hk_status st = glu_epilogue(fn, mode, w_up, q8_1, &epi);
    return st != HK_OK ? st : matvec(context, stream, fn, 1, wtype, w_gate, xq, y, rows, k, 1, NULL, &epi);
}

hk_status hk_matvec_int8_glu(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w_gate, hk_view w_up,
                             hk_view xq, hk_view y, uint32_t rows, uint32_t k, hk_glu_mode mode)
{
    return dense_glu(context, stream, "hk_matvec_int8_glu", 0, wtype, w_gate, w_up, xq, y, rows, k, mode);
}

hk_status hk_matvec_int8_glu_q8_1(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w_gate,
                                  hk_view w_up, hk_view xq, hk_view yq, uint32_t rows, uint32_t k, hk_glu_mode mode)
{
    return dense_glu(context, stream, "hk_matvec_int8_glu_q8_1", 1, wtype, w_gate, w_up, xq, yq, rows, k, mode);
}

/* hk_matvec_int8_multi's checks of the matrices, then the call (qkv: hk_matvec_int8_qkv's epilogue) */
static hk_status multi_call(hk_context *context, hk_stream *stream, const char *fn, hk_type wtype, uint32_t n,
                            const hk_view *w, const uint32_t *rows, hk_view xq, hk_view y, uint32_t k,
                            const qkv_rope *qkv)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (rows[i] == 0)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows[%u] is 0", i);
        hk_status st = check_shape(fn, wtype, rows[i], k, 1, 1, 0);
        if (st != HK_OK)
            return st;
        total += rows[i];
    }
    hk_status st = hk__check_limit(fn, "rows[0]+...+rows[n-1]", total, HK_MATVEC_MAX_ROWS);
    if (st != HK_OK)
        return st;
    const epilogue epi = {.kind = EPI_MULTI, .w = w, .rows = rows, .n = n, .qkv = qkv};
    return matvec(context, stream, fn, 1, wtype, w[0], xq, y, (uint32_t)total, k, 1, NULL, &epi);
}

hk_status hk_matvec_int8_multi(hk_context *context, hk_stream *stream, hk_type wtype, uint32_t n, const hk_view *w,
                               const uint32_t *rows, hk_view xq, hk_view y, uint32_t k)
{
    static const char fn[] = "hk_matvec_int8_multi";
    if (n == 0 || n > HK_MATVEC_MULTI_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n=%u is not in 1..%u", n, HK_MATVEC_MULTI_MAX);
    if (!w || !rows)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s is NULL", !w ? "w" : "rows");
    return multi_call(context, stream, fn, wtype, n, w, rows, xq, y, k, NULL);
}

hk_status hk_matvec_int8_qkv(hk_context *context, hk_stream *stream, hk_type wtype, uint32_t roles, const hk_view *w,
                             hk_view xq, uint32_t k, const hk_rope_desc *desc, hk_view positions,
                             hk_view freq_factors, hk_view q_out, hk_view k_cache, hk_view v_cache)
{
    static const char fn[] = "hk_matvec_int8_qkv";
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    if (!w || !desc)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s is NULL", !w ? "w" : "desc");
    if (roles == 0 || roles & ~(HK_QKV_Q | HK_QKV_K | HK_QKV_V))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "roles=0x%x is not a nonzero mask of HK_QKV_Q, _K and _V",
                        roles);
    qkv_rope r = {.desc = desc, .roles = roles, .positions = positions, .freq_factors = freq_factors,
                  .k_cache = k_cache, .v_cache = v_cache};
    hk_status st = hk__rope_check(fn, desc, freq_factors, &r.rot, &r.factors, &r.k_bytes, &r.v_bytes);
    if (st != HK_OK)
        return st;
    if (desc->n_tokens != 1 || desc->neox || desc->q_norm.buffer || desc->k_norm.buffer ||
        (desc->kv.type != HK_TYPE_F32 && desc->kv.type != HK_TYPE_F16))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the epilogue takes one token, GGUF's normal pairs (neox 0), no q or "
                        "k norm and an f32 or f16 cache (n_tokens=%u, neox=%d, norms %s, kv.type=%s): hk_rope serves",
                        desc->n_tokens, desc->neox, desc->q_norm.buffer || desc->k_norm.buffer ? "given" : "none",
                        hk_type_name(desc->kv.type));
    uint32_t rows[3], n = 0;
    if (roles & HK_QKV_Q)
        rows[n++] = desc->n_heads * desc->head_dim;
    if (roles & HK_QKV_K)
        rows[n++] = desc->n_kv_heads * desc->head_dim;
    if (roles & HK_QKV_V)
        rows[n++] = desc->n_kv_heads * desc->head_dim;
    return multi_call(context, stream, fn, wtype, n, w, rows, xq, q_out, k, &r);
}

hk_status hk_matvec_int8_f32x(hk_context *context, hk_stream *stream, const hk_matvec_f32x_desc *desc)
{
    static const char fn[] = "hk_matvec_int8_f32x";
    if (!desc)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "desc is NULL");
    const hk_matvec_f32x_desc *d = desc;
    if (d->n == 0 || d->n > HK_MATVEC_MULTI_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n=%u is not in 1..%u", d->n, HK_MATVEC_MULTI_MAX);
    if ((unsigned)d->epilogue > HK_MATVEC_GLU_GELU_TANH)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "epilogue=%d is no hk_matvec_epilogue", (int)d->epilogue);
    if (d->n > 1 && d->epilogue != HK_MATVEC_PLAIN)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n=%u matrices take HK_MATVEC_PLAIN only", d->n);
    if (d->norm.buffer && (!(d->eps > 0.0f) || !isfinite(d->eps)))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "eps=%g must be positive and finite", (double)d->eps);
    if (d->k % 32)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u is not a multiple of 32", d->k);
    uint64_t total = 0;
    for (uint32_t i = 0; i < d->n; i++) {
        if (d->rows[i] == 0)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows[%u] is 0", i);
        hk_status st = check_shape(fn, d->wtype, d->rows[i], d->k, 1, 1, 0);
        if (st != HK_OK)
            return st;
        total += d->rows[i];
    }
    hk_status st = hk__check_limit(fn, "rows[0]+...+rows[n-1]", total, HK_MATVEC_MAX_ROWS);
    if (st != HK_OK)
        return st;
    static const int kinds[] = {EPI_NONE, EPI_ADD, EPI_GLU_SILU, EPI_GLU_GELU};
    epilogue epi = {.kind = d->n > 1 ? EPI_MULTI : kinds[d->epilogue], .view = d->operand, .w = d->w,
                    .rows = d->rows, .n = d->n, .f32x = 1, .norm = d->norm, .eps = d->eps};
    return matvec(context, stream, fn, 1, d->wtype, d->w[0], d->x, d->y, (uint32_t)total, d->k, 1, NULL, &epi);
}

hk_status hk_matvec_int8_tokens(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                                hk_view y, uint32_t rows, uint32_t k, uint32_t tokens)
{
    const char *fn = "hk_matvec_int8_tokens";
    if (tokens == 0 || tokens > HK_MATVEC_MAX_TOKENS)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=%u is not in 1..%u", tokens, HK_MATVEC_MAX_TOKENS);
    return matvec(context, stream, fn, 1, wtype, w, xq, y, rows, k, tokens, NULL, NULL);
}

/* what matvec() refuses for the int8 tokens kernels past hk_mmq's own checks (type, k a multiple of
 * the block, sizes positive), as a test without a message */
int hk__matvec_tokens_takes(const hk_context *context, hk_type wtype, hk_view w, uint32_t rows, uint32_t k,
                            uint32_t tokens)
{
    matvec_limit limits[4];
    uint32_t n = matvec_limits(rows, k, tokens, 0, limits);
    for (uint32_t i = 0; i < n; i++)
        if (limits[i].value > limits[i].limit)
            return 0;
    /* a type without an int8 kernel has no alignment to test (and none to divide by) */
    return matvec_takes(wtype, 1, 0) && tokens <= HK_MATVEC_MAX_TOKENS && w.offset % weight_align(1, 0, wtype) == 0 &&
           rows_layout_ok(context);
}

hk_status hk__matvec_tokens(hk_context *context, hk_stream *stream, const char *fn, hk_type wtype, hk_view w,
                            hk_view xq, hk_view y, uint32_t rows, uint32_t k, uint32_t tokens)
{
    return matvec(context, stream, fn, 1, wtype, w, xq, y, rows, k, tokens, NULL, NULL);
}

hk_status hk_matvec_q8_0(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                         uint32_t k)
{
    return hk_matvec(context, stream, HK_TYPE_Q8_0, w, x, y, rows, k);
}

hk_status hk_matvec_q4k(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                        uint32_t k)
{
    return hk_matvec(context, stream, HK_TYPE_Q4_K, w, x, y, rows, k);
}

hk_status hk_matvec_q5k(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                        uint32_t k)
{
    return hk_matvec(context, stream, HK_TYPE_Q5_K, w, x, y, rows, k);
}

hk_status hk_matvec_q6k(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y, uint32_t rows,
                        uint32_t k)
{
    return hk_matvec(context, stream, HK_TYPE_Q6_K, w, x, y, rows, k);
}

/* An expert bank's shape: counts positive, slots x n and n_experts x n rows within 2^32. */
static hk_status check_moe_shape(const char *fn, const hk_moe_shape *shape)
{
    if (!shape)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "shape is NULL");
    if (!shape->n_experts || !shape->n || !shape->slots)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts=%u, n=%u and slots=%u must all be positive",
                        shape->n_experts, shape->n, shape->slots);
    if ((uint64_t)shape->slots * shape->n > UINT32_MAX || (uint64_t)shape->n_experts * shape->n > UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "slots*n or n_experts*n exceeds 2^32 rows");
    return HK_OK;
}

static hk_status moe_matvec(hk_context *context, hk_stream *stream, const char *fn, int int8, hk_type wtype, hk_view w,
                            hk_view x, hk_view ids, hk_view y, const hk_moe_shape *shape, const epilogue *epi)
{
    hk_status st = check_moe_shape(fn, shape);
    if (st != HK_OK)
        return st;
    moe_args moe = {ids, shape};
    return matvec(context, stream, fn, int8, wtype, w, x, y, shape->slots * shape->n, shape->k, 1, &moe, epi);
}

hk_status hk_moe_matvec(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view x, hk_view ids,
                        hk_view y, const hk_moe_shape *shape)
{
    return moe_matvec(context, stream, "hk_moe_matvec", 0, wtype, w, x, ids, y, shape, NULL);
}

hk_status hk_moe_matvec_int8(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                             hk_view ids, hk_view y, const hk_moe_shape *shape)
{
    return moe_matvec(context, stream, "hk_moe_matvec_int8", 1, wtype, w, xq, ids, y, shape, NULL);
}

hk_status hk_moe_matvec_int8_glu(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w_gate, hk_view w_up,
                                 hk_view xq, hk_view ids, hk_view y, const hk_moe_shape *shape, hk_glu_mode mode)
{
    static const char fn[] = "hk_moe_matvec_int8_glu";
    epilogue epi;
    hk_status st = glu_epilogue(fn, mode, w_up, 0, &epi);
    return st != HK_OK ? st : moe_matvec(context, stream, fn, 1, wtype, w_gate, xq, ids, y, shape, &epi);
}

hk_status hk_moe_matvec_int8_glu_q8_1(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w_gate,
                                      hk_view w_up, hk_view xq, hk_view ids, hk_view yq, const hk_moe_shape *shape,
                                      hk_glu_mode mode)
{
    static const char fn[] = "hk_moe_matvec_int8_glu_q8_1";
    epilogue epi;
    hk_status st = glu_epilogue(fn, mode, w_up, 1, &epi);
    return st != HK_OK ? st : moe_matvec(context, stream, fn, 1, wtype, w_gate, xq, ids, yq, shape, &epi);
}

hk_status hk_moe_matvec_int8_glu_q8_1_ranked(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w_gate,
                                             hk_view w_up, hk_view xq, hk_view logits, hk_view yq,
                                             const hk_moe_shape *shape, uint32_t top_k, hk_glu_mode mode)
{
    static const char fn[] = "hk_moe_matvec_int8_glu_q8_1_ranked";
    epilogue epi;
    hk_status st = glu_epilogue(fn, mode, w_up, 1, &epi);
    if (st == HK_OK)
        st = check_moe_shape(fn, shape);
    if (st != HK_OK)
        return st;
    if (top_k == 0 || top_k > 64 || top_k > shape->n_experts || shape->slots % top_k)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "top_k=%u must be 1..min(n_experts=%u, 64) and divide slots=%u",
                        top_k, shape->n_experts, shape->slots);
    /* each lane marks the experts it has given away in two 32-bit masks, as hk_moe_route's */
    if (shape->n_experts > 64 * context->caps.subgroup_size)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "n_experts=%u is over 64 x the subgroup size %u", shape->n_experts,
                        context->caps.subgroup_size);
    epi.ranked = 1;
    epi.top_k = top_k;
    return moe_matvec(context, stream, fn, 1, wtype, w_gate, xq, logits, yq, shape, &epi);
}

hk_status hk_moe_matvec_int8_combine(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                                     hk_view ids, hk_view weights, hk_view residual, hk_view y,
                                     const hk_moe_shape *shape, uint32_t top_k)
{
    static const char fn[] = "hk_moe_matvec_int8_combine";
    hk_status st = check_moe_shape(fn, shape);
    if (st != HK_OK)
        return st;
    if (top_k == 0 || top_k > 64 || shape->slots % top_k)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "top_k=%u must be 1..64 and divide slots=%u", top_k,
                        shape->slots);
    if (!residual.buffer && residual.offset)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "residual.buffer is NULL with offset %llu",
                        (unsigned long long)residual.offset);
    epilogue epi = {.kind = EPI_COMBINE, .view = residual, .weights = weights, .top_k = top_k};
    moe_args moe = {ids, shape};
    return matvec(context, stream, fn, 1, wtype, w, xq, y, shape->slots * shape->n, shape->k, 1, &moe, &epi);
}

/* ---- autotuner (src/tune) ---- */

static hk_status shape_one_token(const hk_context *context, const hk_tune_desc *desc, char key[HK_TUNE_SHAPE_CHARS])
{
    (void)context;
    const hk_tune_matvec_shape *s = &desc->shape.matvec;
    uint32_t tokens = desc->kernel == HK_TUNE_MATVEC_TOKENS ? s->tokens : 1;
    if (desc->kernel == HK_TUNE_MATVEC_TOKENS ? tokens < 2 || tokens > HK_MATVEC_MAX_TOKENS : s->tokens > 1)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, "hk_tune", "tokens=%u is not in %s", s->tokens,
                        desc->kernel == HK_TUNE_MATVEC_TOKENS ? "2..16 (HK_TUNE_MATVEC_TOKENS)"
                                                               : "0..1 (HK_TUNE_MATVEC_INT8)");
    hk_status st = check_shape("hk_tune", s->wtype, s->rows, s->k, tokens, 1, 0);
    if (st == HK_OK)
        st = hk__tune_check_sizes((uint64_t)s->rows * s->k, (uint64_t)tokens * s->k, (uint64_t)tokens * s->rows);
    if (st != HK_OK)
        return st;
    if (tokens > 1)
        key_tokens(key, s->wtype, s->rows, s->k, tokens);
    else
        key_one_token(key, s->wtype, s->rows, s->k);
    return HK_OK;
}

static hk_status shape_moe(const hk_context *context, const hk_tune_desc *desc, char key[HK_TUNE_SHAPE_CHARS])
{
    (void)context;
    const hk_tune_moe_shape *s = &desc->shape.moe;
    if (s->shape.x_per_slot != 0 && s->shape.x_per_slot != 1)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, "hk_tune", "x_per_slot=%d is not 0 or 1", s->shape.x_per_slot);
    hk_status st = check_moe_shape("hk_tune", &s->shape);
    if (st == HK_OK)
        st = check_shape("hk_tune", s->wtype, s->shape.slots * s->shape.n, s->shape.k, 1, 1, 1);
    if (st == HK_OK)
        st = hk__tune_check_sizes((uint64_t)s->shape.n_experts * s->shape.n * s->shape.k,
                                  (uint64_t)(s->shape.x_per_slot ? s->shape.slots : 1) * s->shape.k,
                                  (uint64_t)s->shape.slots * s->shape.n);
    if (st == HK_OK)
        key_moe(key, s->wtype, &s->shape);
    return st;
}

static int feasible_one_token(const hk_context *context, const hk_tune_desc *desc, const uint32_t *v, uint32_t sig[8],
                              char *why, size_t why_size)
{
    const hk_tune_matvec_shape *s = &desc->shape.matvec;
    memcpy(sig, v, MV_PARAMS * sizeof *sig);
    return one_token_fits(context, s->wtype, s->rows, s->k, 0, v, why, why_size);
}

static int feasible_moe(const hk_context *context, const hk_tune_desc *desc, const uint32_t *v, uint32_t sig[8],
                        char *why, size_t why_size)
{
    const hk_tune_moe_shape *s = &desc->shape.moe;
    memcpy(sig, v, MV_PARAMS * sizeof *sig);
    return one_token_fits(context, s->wtype, s->shape.slots * s->shape.n, s->shape.k, s->shape.n, v, why, why_size);
}

static int feasible_tokens(const hk_context *context, const hk_tune_desc *desc, const uint32_t *v, uint32_t sig[8],
                           char *why, size_t why_size)
{
    const hk_tune_matvec_shape *s = &desc->shape.matvec;
    if (!(context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL)) {
        snprintf(why, why_size, "subgroup mismatch: no full subgroups of a required size (subgroupSizeControl)");
        return 0;
    }
    tokens_plan p;
    if (!tokens_strict(context, s->wtype, s->rows, s->k, s->tokens, v, &p, why, why_size))
        return 0;
    /* the plan: schedules that differ only in a workgroup cap the shape never reaches run the same */
    memcpy(sig, v, MT_PARAMS * sizeof *sig);
    sig[MT_WGS] = (uint32_t)p.groups;
    sig[MT_PARAMS] = p.per_pass;
    return 1;
}

/* the kernel-table rows the searches measure through (src/cases/cases_decode.c) */
extern const hk_case hk_case_matvec_int8, hk_case_matvec_int8_tokens, hk_case_moe_matvec_int8;

static void case_one_token(const hk_tune_desc *desc, hk_case_shape *out)
{
    const hk_tune_matvec_shape *s = &desc->shape.matvec;
    *out = (hk_case_shape){s->wtype, {s->rows, s->k, desc->kernel == HK_TUNE_MATVEC_TOKENS ? s->tokens : 1}, 0, 0};
}

static void case_moe(const hk_tune_desc *desc, hk_case_shape *out)
{
    const hk_tune_moe_shape *s = &desc->shape.moe;
    *out = (hk_case_shape){s->wtype, {s->shape.n_experts, s->shape.n, s->shape.k, s->shape.slots}, s->shape.x_per_slot,
                           0};
}

#define MV_SPACE                                                                                                       \
    {{"nrows", 3, {1, 2, 4}, 1, 4, 1}, {"items", 3, {1, 2, 4}, 1, 4, 1}, {"load_bits", 2, {16, 32}, 16, 32, 1}}

static const hk__tunable tune_matvec_int8 = {HK_TUNE_MATVEC_INT8, "matvec_int8", MV_PARAMS, MV_SPACE,
                                             shape_one_token, feasible_one_token, &hk_case_matvec_int8,
                                             case_one_token, 0};
/* the workgroup cap ranges over its hook's values (HK_MATVEC_TOKENS_WGS), since a default may lie
 * outside the list */
static const hk__tunable tune_matvec_tokens = {HK_TUNE_MATVEC_TOKENS,
                                               "matvec_int8_tokens",
                                               MT_PARAMS,
                                               {{"subgroups", 4, {4, 8, 16, 32}, 4, 32, 1},
                                                {"nrows", 3, {1, 2, 4}, 1, 4, 1},
                                                {"items", 3, {1, 2, 4}, 1, 4, 1},
                                                {"resident", 2, {0, 1}, 0, 1, 0},
                                                {"wgs", 6, {64, 128, 256, 512, 1024, 8192}, 1, 8192, 0}},
                                               shape_one_token,
                                               feasible_tokens,
                                               &hk_case_matvec_int8_tokens,
                                               case_one_token,
                                               1};
static const hk__tunable tune_moe_matvec_int8 = {HK_TUNE_MOE_MATVEC_INT8, "moe_matvec_int8", MV_PARAMS, MV_SPACE,
                                                 shape_moe, feasible_moe, &hk_case_moe_matvec_int8, case_moe, 1};

/* ---- hk_context_prepare ---- */

/* One call of the entry point that epi names (EPI_NONE: hk_matvec_int8, or hk_matvec for f32 x). */
static hk_status prepare_call(hk__prep *p, int int8, int epi, hk_type type, uint32_t rows, uint32_t k)
{
    hk_view w = hk__prep_view(p, 0), x = hk__prep_view(p, 1), y = hk__prep_view(p, 2), v3 = hk__prep_view(p, 3);
    /* the multi's pipeline follows only the total rows' class: one matrix of them */
    const hk_view ws[1] = {w};
    switch (epi) {
    case EPI_MULTI:
        return hk_matvec_int8_multi(p->ctx, p->s, type, 1, ws, &rows, x, y, k);
    case EPI_ADD:
        return hk_matvec_int8_add(p->ctx, p->s, type, w, x, v3, y, rows, k);
    case EPI_GLU_SILU:
    case EPI_GLU_GELU:
        return hk_matvec_int8_glu(p->ctx, p->s, type, w, v3, x, y, rows, k,
                                  epi == EPI_GLU_GELU ? HK_GLU_GELU_TANH : HK_GLU_SILU);
    default:
        return int8 ? hk_matvec_int8(p->ctx, p->s, type, w, x, y, rows, k)
                    : hk_matvec(p->ctx, p->s, type, w, x, y, rows, k);
    }
}

/* hk_matvec, hk_matvec_int8 and its epilogues (epi: EPI_ADD; EPI_GLU_SILU for both GLU modes;
 * EPI_MULTI, its pipelines those of the total rows' classes):
 * every type the entry point takes, the subgroup rows kernel at 1, 2 and 4 rows per subgroup (from
 * MATVEC_SOME_ROWS and MATVEC_MANY_ROWS rows; at the least k whose rows it takes; the GLU's slots
 * follow the same rows: 2, 2, and 2 or 4), and for f32 x the portable kernel (x 4-byte aligned only) */
static hk_status prepare_matvec_any(hk__prep *p, int int8, int epi)
{
    static const uint32_t rows[] = {1, MATVEC_SOME_ROWS, MATVEC_MANY_ROWS};
    hk_type types[HK_REF_TYPES];
    uint32_t n_types = matvec_types_of(int8, 0, types);
    hk_view w = hk__prep_view(p, 0), x = hk__prep_view(p, 1), y = hk__prep_view(p, 2);
    for (uint32_t t = 0; t < n_types; t++) {
        uint32_t k = hk_type_block_values(types[t]);
        while (!rows_aligned(types[t], k))
            k += hk_type_block_values(types[t]);
        for (int r = 0; r < 3; r++)
            for (int e = epi; e <= (epi == EPI_GLU_SILU ? EPI_GLU_GELU : epi); e++)
                HK_PREP_TRY(p, prepare_call(p, int8, e, types[t], rows[r], k));
        if (!int8)
            HK_PREP_TRY(p, hk_matvec(p->ctx, p->s, types[t], w, (hk_view){x.buffer, x.offset + 4}, y, 1, k));
    }
    return HK_OK;
}

/* hk_matvec_int8_f32x: every type, form (plain, add, both GLU modes, several matrices) and row
 * class of prepare_matvec_any, at the widths of x that models' hidden and feed-forward sizes take
 * (k up to 2048, 4096, 8192, 16384: f32x_blocks' classes), where the device holds them */
static hk_status prepare_f32x(hk__prep *p)
{
    static const uint32_t rows[] = {1, MATVEC_SOME_ROWS, MATVEC_MANY_ROWS}, widths[] = {2048, 4096, 8192, 16384};
    static const hk_matvec_epilogue epis[] = {HK_MATVEC_PLAIN, HK_MATVEC_ADD, HK_MATVEC_GLU_SILU,
                                              HK_MATVEC_GLU_GELU_TANH};
    hk_type types[HK_REF_TYPES];
    uint32_t n_types = matvec_types_of(1, 0, types);
    for (uint32_t t = 0; t < n_types; t++)
        for (int r = 0; r < 3; r++)
            for (int wi = 0; wi < 4; wi++)
                for (int e = 0; e < 5; e++) {
                    uint64_t w_bytes = (uint64_t)rows[r] * widths[wi] / hk_type_block_values(types[t]) *
                                       hk_type_block_bytes(types[t]);
                    if (w_bytes > p->ctx->caps.max_storage_buffer_range)
                        continue; /* a class the device cannot bind at these rows (its fewer rows build it) */
                    /* e == 4: two matrices, the multi's kernel */
                    hk_matvec_f32x_desc d = {.wtype = types[t], .n = e == 4 ? 2 : 1, .k = widths[wi],
                                             .x = hk__prep_view(p, 1), .norm = hk__prep_view(p, 5), .eps = 1e-6f,
                                             .epilogue = e == 4 ? HK_MATVEC_PLAIN : epis[e],
                                             .operand = hk__prep_view(p, 3), .y = hk__prep_view(p, 2)};
                    d.w[0] = hk__prep_view(p, 0);
                    d.w[1] = hk__prep_view(p, 4);
                    d.rows[0] = e == 4 ? rows[r] - (rows[r] > 1) : rows[r];
                    d.rows[1] = 1;
                    HK_PREP_TRY(p, hk_matvec_int8_f32x(p->ctx, p->s, &d));
                }
    return HK_OK;
}

static hk_status prepare_matvec(hk__prep *p) { return prepare_matvec_any(p, 0, EPI_NONE); }
static hk_status prepare_matvec_int8(hk__prep *p) { return prepare_matvec_any(p, 1, EPI_NONE); }
static hk_status prepare_matvec_int8_add(hk__prep *p) { return prepare_matvec_any(p, 1, EPI_ADD); }

/* hk_matvec_int8_add_norm: every type at the row classes of prepare_matvec_any, rows a multiple of
 * 32, with and without yn (one pipeline) */
static hk_status prepare_matvec_int8_add_norm(hk__prep *p)
{
    static const uint32_t rows[] = {32, MATVEC_SOME_ROWS, MATVEC_MANY_ROWS};
    hk_type types[HK_REF_TYPES];
    uint32_t n_types = matvec_types_of(1, 0, types);
    hk_norm_out norm = {hk__prep_view(p, 4), 1e-6f, hk__prep_view(p, 5), {NULL, 0}, hk__prep_view(p, 7)};
    for (uint32_t t = 0; t < n_types; t++) {
        uint32_t k = hk_type_block_values(types[t]);
        while (!rows_aligned(types[t], k))
            k += hk_type_block_values(types[t]);
        for (int r = 0; r < 3; r++)
            HK_PREP_TRY(p, hk_matvec_int8_add_norm(p->ctx, p->s, types[t], hk__prep_view(p, 0), hk__prep_view(p, 1),
                                                   hk__prep_view(p, 3), hk__prep_view(p, 2), rows[r], k, &norm));
    }
    return HK_OK;
}
static hk_status prepare_matvec_int8_glu(hk__prep *p) { return prepare_matvec_any(p, 1, EPI_GLU_SILU); }
static hk_status prepare_matvec_int8_multi(hk__prep *p) { return prepare_matvec_any(p, 1, EPI_MULTI); }

/* hk_matvec_int8_tokens: 2, 4, 8 and 16 tokens at the row classes of its rows per subgroup (1
 * below 4096 rows, 2, 4 from 8192 at up to 8 tokens), each at k of one block (x resident on any
 * device) and at the largest k that the API's limits and the device's binding range take at those
 * rows: x staged per step where the device's shared memory does not hold that k (the class past
 * the resident one starts at a k that depends on the device; a row class's fewest rows bind the
 * largest k of the class). */
static hk_status prepare_tokens(hk__prep *p)
{
    static const uint32_t rows[] = {1, 4096, 8192}, tokens[] = {2, 4, 8, 16};
    hk_type types[HK_REF_TYPES];
    uint32_t n_types = matvec_types_of(1, 0, types);
    hk_view w = hk__prep_view(p, 0), x = hk__prep_view(p, 1), y = hk__prep_view(p, 2);
    for (uint32_t t = 0; t < n_types; t++)
        for (int r = 0; r < 3; r++)
            for (int n = 0; n < 4; n++) {
                uint32_t block = hk_type_block_values(types[t]);
                uint64_t k_max = HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS / (tokens[n] + 1); /* rows <= 32768 */
                uint64_t k_bind = p->ctx->caps.max_storage_buffer_range /
                                  ((uint64_t)rows[r] * hk_type_block_bytes(types[t])) * block;
                k_max = k_max < HK_MATVEC_MAX_K ? k_max : HK_MATVEC_MAX_K;
                k_max = (k_max < k_bind ? k_max : k_bind) / block * block;
                for (int big = 0; big < 2; big++)
                    if (!big || k_max > block)
                        HK_PREP_TRY(p, hk_matvec_int8_tokens(p->ctx, p->s, types[t], w, x, y, rows[r],
                                                             big ? (uint32_t)k_max : block, tokens[n]));
            }
    return HK_OK;
}

/* hk_moe_matvec*: rows = slots * n picks 1, 2 or 4 rows per subgroup, then halved until n is a
 * multiple: (n, slots) pairs that reach each count; the GLU (glu, both modes) takes 2 or 4 slots
 * from the same counts */
static hk_status prepare_moe_any(hk__prep *p, int int8, int glu)
{
    static const uint32_t pairs[][2] = {{1, 1}, {2, 2048}, {4, 4096}, {2, 8192}, {1, 16384}, {4, 1024}};
    hk_type types[HK_REF_TYPES];
    uint32_t n_types = matvec_types_of(int8, 1, types);
    hk_view w = hk__prep_view(p, 0), x = hk__prep_view(p, 1), ids = hk__prep_view(p, 3), y = hk__prep_view(p, 2);
    hk_view up = hk__prep_view(p, 4);
    for (uint32_t t = 0; t < n_types; t++) {
        uint32_t k = hk_type_block_values(types[t]);
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            hk_moe_shape shape = {1, pairs[i][0], k, pairs[i][1], 0};
            if (glu)
                for (int m = HK_GLU_SILU; m <= HK_GLU_GELU_TANH; m++)
                    HK_PREP_TRY(p, hk_moe_matvec_int8_glu(p->ctx, p->s, types[t], w, up, x, ids, y, &shape,
                                                          (hk_glu_mode)m));
            else
                HK_PREP_TRY(p, int8 ? hk_moe_matvec_int8(p->ctx, p->s, types[t], w, x, ids, y, &shape)
                                    : hk_moe_matvec(p->ctx, p->s, types[t], w, x, ids, y, &shape));
        }
    }
    return HK_OK;
}

/* hk_moe_matvec_int8_combine: the gather's (n, slots) pairs (its pipelines follow the same rows per
 * group), one slot per token */
static hk_status prepare_moe_combine(hk__prep *p)
{
    static const uint32_t pairs[][2] = {{1, 1}, {2, 2048}, {4, 4096}, {2, 8192}, {1, 16384}, {4, 1024}};
    hk_type types[HK_REF_TYPES];
    uint32_t n_types = matvec_types_of(1, 1, types);
    for (uint32_t t = 0; t < n_types; t++)
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            hk_moe_shape shape = {1, pairs[i][0], hk_type_block_values(types[t]), pairs[i][1], 0};
            HK_PREP_TRY(p, hk_moe_matvec_int8_combine(p->ctx, p->s, types[t], hk__prep_view(p, 0), hk__prep_view(p, 1),
                                                      hk__prep_view(p, 3), hk__prep_view(p, 4), hk__prep_view(p, 5),
                                                      hk__prep_view(p, 2), &shape, 1));
        }
    return HK_OK;
}

/* hk_matvec_int8_glu_q8_1 and hk_moe_matvec_int8_glu_q8_1 (and _ranked): every type and both modes at the row
 * classes of prepare_matvec_any (the MoE's rows as slots of 32; its nrows never halve then) */
static hk_status prepare_glu_q8(hk__prep *p, int moe)
{
    static const uint32_t rows[] = {32, MATVEC_SOME_ROWS, MATVEC_MANY_ROWS};
    hk_type types[HK_REF_TYPES];
    uint32_t n_types = matvec_types_of(1, moe, types);
    hk_view w = hk__prep_view(p, 0), x = hk__prep_view(p, 1), y = hk__prep_view(p, 2), v3 = hk__prep_view(p, 3);
    hk_view up = hk__prep_view(p, 4);
    for (uint32_t t = 0; t < n_types; t++) {
        uint32_t k = hk_type_block_values(types[t]);
        for (int r = 0; r < 3; r++)
            for (int m = HK_GLU_SILU; m <= HK_GLU_GELU_TANH; m++) {
                hk_moe_shape shape = {1, 32, k, rows[r] / 32, 0};
                HK_PREP_TRY(p, moe ? hk_moe_matvec_int8_glu_q8_1(p->ctx, p->s, types[t], w, up, x, v3, y, &shape,
                                                                 (hk_glu_mode)m)
                                   : hk_matvec_int8_glu_q8_1(p->ctx, p->s, types[t], w, v3, x, y, rows[r], k,
                                                             (hk_glu_mode)m));
                if (moe) /* the same schedules, ranking the experts from the logits (v3) */
                    HK_PREP_TRY(p, hk_moe_matvec_int8_glu_q8_1_ranked(p->ctx, p->s, types[t], w, up, x, v3, y, &shape,
                                                                      1, (hk_glu_mode)m));
            }
    }
    return HK_OK;
}
static hk_status prepare_matvec_int8_glu_q8(hk__prep *p) { return prepare_glu_q8(p, 0); }
static hk_status prepare_moe_int8_glu_q8(hk__prep *p) { return prepare_glu_q8(p, 1); }

static hk_status prepare_moe(hk__prep *p) { return prepare_moe_any(p, 0, 0); }
static hk_status prepare_moe_int8(hk__prep *p) { return prepare_moe_any(p, 1, 0); }
static hk_status prepare_moe_int8_glu(hk__prep *p) { return prepare_moe_any(p, 1, 1); }

const hk__family hk__family_matvec = {"hk_matvec", prepare_matvec, {NULL}};
const hk__family hk__family_matvec_int8 = {"hk_matvec_int8", prepare_matvec_int8, {&tune_matvec_int8}};
const hk__family hk__family_matvec_int8_tokens = {"hk_matvec_int8_tokens", prepare_tokens, {&tune_matvec_tokens}};
/* the epilogues and the multi take hk_matvec_int8's schedules (its tuner family HK_TUNE_MATVEC_INT8) */
const hk__family hk__family_matvec_int8_add = {"hk_matvec_int8_add", prepare_matvec_int8_add, {NULL}};
const hk__family hk__family_matvec_int8_add_norm = {"hk_matvec_int8_add_norm", prepare_matvec_int8_add_norm, {NULL}};
const hk__family hk__family_matvec_int8_glu = {"hk_matvec_int8_glu", prepare_matvec_int8_glu, {NULL}};
const hk__family hk__family_matvec_int8_glu_q8_1 = {"hk_matvec_int8_glu_q8_1", prepare_matvec_int8_glu_q8, {NULL}};
/* hk_matvec_int8_qkv: every type, f32 and f16 caches, Q and K, V alone, and all three, at the
 * attention shapes of one head, Llama-3-8B's and a larger one (32 and 64 heads of 128, 8 kv heads),
 * k 2048 and 4096 */
static hk_status prepare_matvec_int8_qkv(hk__prep *p)
{
    static const uint32_t heads[][2] = {{1, 1}, {32, 8}, {64, 8}}, widths[] = {2048, 4096};
    static const uint32_t roles[] = {HK_QKV_Q | HK_QKV_K, HK_QKV_V, HK_QKV_Q | HK_QKV_K | HK_QKV_V};
    static const hk_type caches[] = {HK_TYPE_F32, HK_TYPE_F16};
    hk_type types[HK_REF_TYPES];
    uint32_t n_types = matvec_types_of(1, 0, types);
    const hk_view w[3] = {hk__prep_view(p, 0), hk__prep_view(p, 3), hk__prep_view(p, 4)};
    for (uint32_t t = 0; t < n_types; t++)
        for (int c = 0; c < 2; c++)
            for (int h = 0; h < 3; h++)
                for (int wi = 0; wi < 2; wi++)
                    for (int r = 0; r < 3; r++) {
                        hk_rope_desc d = {.n_tokens = 1, .n_heads = heads[h][0], .n_kv_heads = heads[h][1],
                                          .head_dim = 128, .theta_base = 500000.0f, .freq_scale = 1.0f,
                                          .kv = hk__prep_kv(caches[c], 128, 4096)};
                        HK_PREP_TRY(p, hk_matvec_int8_qkv(p->ctx, p->s, types[t], roles[r], w, hk__prep_view(p, 1),
                                                          widths[wi], &d, hk__prep_view(p, 5),
                                                          (hk_view){NULL, 0}, hk__prep_view(p, 2),
                                                          hk__prep_view(p, 6), hk__prep_view(p, 7)));
                    }
    return HK_OK;
}

const hk__family hk__family_matvec_int8_multi = {"hk_matvec_int8_multi", prepare_matvec_int8_multi, {NULL}};
const hk__family hk__family_matvec_int8_qkv = {"hk_matvec_int8_qkv", prepare_matvec_int8_qkv, {NULL}};
const hk__family hk__family_matvec_int8_f32x = {"hk_matvec_int8_f32x", prepare_f32x, {NULL}};
const hk__family hk__family_moe_matvec = {"hk_moe_matvec", prepare_moe, {NULL}};
const hk__family hk__family_moe_matvec_int8 = {"hk_moe_matvec_int8", prepare_moe_int8, {&tune_moe_matvec_int8}};
/* takes hk_moe_matvec_int8's schedules (its tuner family HK_TUNE_MOE_MATVEC_INT8) */
const hk__family hk__family_moe_matvec_int8_glu = {"hk_moe_matvec_int8_glu", prepare_moe_int8_glu, {NULL}};
const hk__family hk__family_moe_matvec_int8_glu_q8_1 = {"hk_moe_matvec_int8_glu_q8_1", prepare_moe_int8_glu_q8,
                                                        {NULL}};
const hk__family hk__family_moe_matvec_int8_combine = {"hk_moe_matvec_int8_combine", prepare_moe_combine, {NULL}};
