/* Flash attention for prefill (shaders/flash.comp): Q.K^T and P.V on the matrix cores (KHR
 * cooperative matrix, f16 inputs, f32 accumulation) with an online softmax, causal tiles past
 * the diagonal skipped; a portable twin with the same staging, loop and softmax in f32 where the
 * device has none (or HK_FEATURE_COOPMAT_KHR is disabled). Long key ranges are split in chunks
 * over workgroups, merged by shaders/flash_combine.comp through the workspace. */
#include "attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tiling (flash.comp): a workgroup of `nsg` units owns BR rows; a unit (a subgroup on the
 * matrix cores) owns `mr` blocks of 16 rows; keys are staged `bkv` at a time and each unit walks
 * a staged tile in chunks of `bc`; `qreg`: Q stays in registers (matrix cores); `prefetch`: the
 * next tile's loads are issued before the current tile's work. */
typedef struct flash_tile {
    uint32_t nsg, mr, bc, bkv, qreg, prefetch;
} flash_tile;

/* Matrix-core defaults, the first that fits the device and this head_dim (shared memory, and
 * about 224 registers a lane by coop_registers) wins: 8 subgroups of 16 rows (BR 128: more warps
 * to hide latency than 4, faster on causal prefill), else 4 subgroups of 16 rows (BR 64), Q in
 * registers, chunks of 32 keys, tiles of 64 keys prefetched (half the workgroup barriers a key)
 * where the shared memory holds them (the register softmax's units need P alone), else of 32;
 * Q in shared memory and smaller tiles where registers or shared memory are short (head_dim above
 * 160: the O accumulators alone take 128 registers). Where 8 subgroups' row tiles would give
 * fewer than two workgroups a multiprocessor (a short causal prompt: one wave, its time that of
 * the tile that sees the most keys), 4 subgroups with tiles of 32 keys come first: twice the
 * workgroups, half the rows each. HK_FLASH_TILE replaces them. */
#ifdef HK_HAVE_SHADER_FLASH_COOP_F16 /* the matrix-core arm's (a toolchain without it builds the rest) */
static const flash_tile coop_defaults[] = {
    {8, 1, 32, 64, 1, 1}, {8, 1, 32, 32, 1, 1}, {4, 1, 32, 32, 1, 1},
    {2, 1, 32, 32, 0, 0}, {2, 1, 16, 16, 0, 0}, {1, 1, 16, 16, 0, 0},
};
static const flash_tile coop_few_rows = {4, 1, 32, 32, 1, 1};
#endif
/* The emulated arm (testing, HK_FLASH_EMULATE_COOPMAT="1"): a tile that fits lavapipe's 32 KiB. */
static const flash_tile emu_default = {2, 1, 32, 32, 1, 1};
/* The twin: 64 invocations, 16 rows (4 invocations per row; 8 rows at head_dim 256 where the
 * shared memory is small), tiles of 32, 16 or 8 keys as the shared memory allows, prefetched. */
#define FLASH_TWIN_WG 64u
/* Keys one workgroup walks at most: the loop bound of a workgroup. Lavapipe ends a shader's loops
 * after 65535 iterations in all per invocation, counting the loops it does not unroll. A chunk of
 * 32 keys costs the matrix-core arm, emulated (its matrix loops not unrolled), about 100
 * iterations at head_dim 128 and 170 at 256 (MR 2: 140; chunks of 16: 55 per 16 keys); the twin
 * at most ~600 per 32 keys (head_dim 128) if no loop were unrolled, measured 4 to 8: 8192 and
 * 2048 keys stay under 45000 and 40000. Longer caches are split in chunks. */
#define FLASH_COOP_MAX_KEYS 8192u
#define FLASH_TWIN_MAX_KEYS 2048u
/* Splitting for occupancy: below FLASH_TARGET_GROUPS workgroups (HK_FLASH_GROUPS overrides it),
 * keys are split further, into chunks of at least FLASH_MIN_SPLIT_KEYS keys; at most
 * FLASH_MAX_SPLIT chunks in all. About one workgroup per SM: a split beyond that costs its
 * combine pass more than the occupancy gains. */
#define FLASH_TARGET_GROUPS 128u
#define FLASH_MIN_SPLIT_KEYS 512u
#define FLASH_MAX_SPLIT 64u
#define FLASH_COMBINE_WG 64u
/* FLAGS bit 5: the row tiles launched in zigzag order (set_order) */
#define FLASH_ZIGZAG 32u

#define LOG2E 1.4426950408889634

typedef struct flash_plan {
    int shader;
    uint32_t subgroup; /* 0 for the twin and the emulated arm */
    int coop;          /* the matrix-core arm's code (emulated or not) */
    uint32_t wg, br, bc, bkv, mr, flags;
    uint32_t target; /* workgroups the key split aims for */
    uint32_t row_tiles, n_split, split_tiles;
    uint64_t groups;
    uint64_t workspace;
    char bad_env[200]; /* a tuning variable the call refuses (empty: none) */
    int source;        /* HK_SCHED_*: where the tile and target came from */
    int few_rows_tile; /* the default tile for few row tiles (coop_few_rows), two a multiprocessor */
    int plant;         /* testing only: the tuner's planted candidate */
} flash_plan;

#ifdef HK_HAVE_SHADER_FLASH_COOP_F16
#define FLASH_COOP(t) HK_SHADER_FLASH_COOP_##t
#else
#define FLASH_COOP(t) HK_NO_SHADER
#endif

/* A KV-cache type's shaders: the matrix cores, the twin, the emulated matrix-core arm (f16 caches
 * only); wide: its rows take 16-byte loads where the views and strides allow (Q8_0's 34-byte
 * blocks do not). */
typedef struct flash_type {
    int takes, coop, twin, emu;
    uint32_t wide;
} flash_type;

static const flash_type flash_types[HK_REF_TYPES] = {
    [HK_TYPE_F32] = {1, FLASH_COOP(F32), HK_SHADER_FLASH_F32, HK_NO_SHADER, 1},
    [HK_TYPE_F16] = {1, FLASH_COOP(F16), HK_SHADER_FLASH_F16, HK_SHADER_FLASH_EMU_F16, 1},
    [HK_TYPE_Q8_0] = {1, FLASH_COOP(Q8_0), HK_SHADER_FLASH_Q8_0, HK_NO_SHADER, 0},
};

/* 16-byte elements of the matrix-core arm's array sm (flash.comp). */
static uint64_t coop_elements(uint32_t d, const flash_tile *t, int rsm)
{
    uint64_t str8 = (d + 8) / 8, ur = 16ull * t->mr, br = ur * t->nsg;
    uint64_t s4 = (t->bc + 4) / 4, p8 = (t->bc + 8) / 8, per_row = rsm ? p8 : s4 > p8 + 4 ? s4 : p8 + 4;
    uint64_t n = (t->qreg ? 0 : br * str8) + 2ull * t->bkv * str8 + t->nsg * ur * per_row;
    return t->qreg && br * str8 > n ? br * str8 : n; /* Q in registers passes through the array */
}

/* Shared memory of each arm, as flash.comp declares it (plus common.glsl's hk_partial[WG] and
 * vbad[D]), and the emulation's exchange arrays. */
static uint64_t coop_shared_bytes(uint32_t d, const flash_tile *t, uint32_t sg, int emulated, int rsm)
{
    return 16 * coop_elements(d, t, rsm) + 4ull * t->nsg * sg + 4ull * d + (emulated ? 2ull * t->nsg * 256 * 4 : 0);
}

static uint64_t twin_shared_bytes(uint32_t d, uint32_t br, uint32_t bc, uint32_t bkv)
{
    uint64_t str8 = (d + 8) / 8;
    return 32 * (br + 2ull * bkv) * str8 + 16ull * br * ((bc + 4) / 4) + 4 * FLASH_TWIN_WG + 4ull * d;
}

/* Why a matrix-core tile cannot run here (NULL: it can), for subgroups of sg invocations. */
static const char *coop_tile_problem(const hk_context *context, uint32_t d, const flash_tile *t, uint32_t sg,
                                     int emulated, int rsm)
{
    if (t->nsg < 1 || t->nsg > 16 || (t->mr != 1 && t->mr != 2) || t->qreg > 1 || t->prefetch > 1)
        return "subgroups 1..16, row blocks 1 or 2, qreg and prefetch 0 or 1";
    if (t->bc < 16 || t->bc > 128 || t->bc % 16 || t->bkv < t->bc || t->bkv > 256 || t->bkv % t->bc)
        return "chunk keys a multiple of 16 up to 128, tile keys a multiple of them up to 256";
    uint32_t tpr = sg / (16 * t->mr);
    if (tpr < 1 || tpr > 4 || tpr == 3 || (t->bc / tpr) % 8) /* P and the factors go 16 bytes at a time */
        return "each row's invocations (subgroup / 16 / row blocks) must be 1, 2 or 4 and take a multiple of 8 "
               "keys of a chunk";
    if ((uint64_t)t->nsg * sg > context->caps.max_workgroup_size)
        return "more invocations than a workgroup may have";
    if (coop_shared_bytes(d, t, sg, emulated, rsm) > context->caps.shared_memory_bytes)
        return "more shared memory than the device has";
    return NULL;
}

#ifdef HK_HAVE_SHADER_FLASH_COOP_F16
/* Registers a subgroup lane would hold across the loop, roughly: O, Q, S, the prefetched tile,
 * the softmax's keys and ~24 of addressing. Defaults keep it under 224 (no spills at 255). */
static uint32_t coop_registers(uint32_t d, const flash_tile *t, uint32_t sg)
{
    uint32_t wg = t->nsg * sg, per = (t->bkv * (d / 8) + wg - 1) / wg, tpr = sg / (16 * t->mr);
    return t->mr * (d / 16) * 256 / sg + (t->qreg ? t->mr * (d / 16) * 128 / sg : 0) +
           t->mr * (t->bc / 16) * 256 / sg + (t->prefetch ? 8 * per : 0) + t->bc / tpr + 24;
}
#endif

/* "nsg,mr,bc,bkv,qreg,prefetch" from the environment variable `var`, if set: 1 with *t set, 0 if
 * unset, -1 (message in p->bad_env) if malformed. */
static int env_tile(const char *var, flash_tile *t, flash_plan *p)
{
    const char *env = getenv(var);
    if (!env || !*env)
        return 0;
    unsigned v[6];
    char tail;
    if (sscanf(env, "%u,%u,%u,%u,%u,%u%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6) {
        snprintf(p->bad_env, sizeof p->bad_env, "%s=\"%.40s\" is not \"subgroups,mr,bc,bkv,qreg,prefetch\"", var,
                 env);
        return -1;
    }
    *t = (flash_tile){v[0], v[1], v[2], v[3], v[4], v[5]};
    return 1;
}

static void set_tile(flash_plan *p, const flash_tile *t, uint32_t sg)
{
    p->wg = t->nsg * sg;
    p->br = 16 * t->mr * t->nsg;
    p->bc = t->bc;
    p->bkv = t->bkv;
    p->mr = t->mr;
    p->flags = (t->qreg ? 2u : 0u) | (t->prefetch ? 4u : 0u);
    p->coop = 1;
}

/* The subgroup size the matrix-core arm runs on, 0 where it cannot run here. */
static uint32_t coop_subgroup(const hk_context *context)
{
#ifdef HK_HAVE_SHADER_FLASH_COOP_F16
    const hk_caps *caps = &context->caps;
    uint32_t need = HK_FEATURE_COOPMAT_KHR | HK_FEATURE_FLOAT16 | HK_FEATURE_SUBGROUP_SIZE_CONTROL;
    uint32_t sg = caps->subgroup_size;
    if ((context->features & need) != need || !context->profile.subgroup_shuffle || !hk__coopmat_f16_listed(caps) ||
        sg < 16 || sg > 128 || (sg & (sg - 1)))
        return 0;
    return sg;
#else
    (void)context;
    return 0;
#endif
}

/* A hook of two values: -1 where var is unset or empty, 0 for first, 1 for second, 2 for anything
 * else, which is recorded in p->bad_env (the call then fails). */
static int env_choice(const char *var, const char *first, const char *second, flash_plan *p)
{
    const char *env = getenv(var);
    if (!env || !*env)
        return -1;
    if (!strcmp(env, first) || !strcmp(env, second))
        return strcmp(env, first) != 0;
    snprintf(p->bad_env, sizeof p->bad_env, "%s=\"%.40s\" is not %s or %s", var, env, first, second);
    return 2;
}

/* Workgroups that fill the device at two a multiprocessor (of 4 schedulers); 0 where the driver
 * does not tell its count. */
static uint64_t two_a_multiprocessor(const hk_context *context) { return context->profile.schedulers / 2; }

static uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* FLAGS bit 4 (the register softmax) where the accumulators hold the quad layout (the device
 * profile; the emulated arm's by construction), unless HK_FLASH_SOFTMAX="shared". */
static uint32_t softmax_flag(const hk_context *context, int emulated, flash_plan *p)
{
    int quads = emulated || context->profile.coopmat_quads;
    int choice = env_choice("HK_FLASH_SOFTMAX", "shared", "registers", p);
    if (choice == 1 && !quads)
        snprintf(p->bad_env, sizeof p->bad_env,
                 "HK_FLASH_SOFTMAX=\"registers\" is refused: the accumulators here do not hold the quad layout");
    return quads && (choice < 0 || choice == 1) ? 16u : 0u;
}

#ifdef HK_HAVE_SHADER_FLASH_COOP_F16
/* A default tile into the plan, where it fits the device and this head_dim */
static int take_default(const hk_context *context, uint32_t d, const flash_tile *t, uint32_t sg, uint32_t extra,
                        flash_plan *p)
{
    if (coop_tile_problem(context, d, t, sg, 0, extra & 16) || coop_registers(d, t, sg) > 224)
        return 0;
    set_tile(p, t, sg);
    p->subgroup = sg;
    p->flags |= extra;
    return 1;
}
#endif

/* The matrix-core arm's tile for this shape, if the device can run it: HK_FLASH_TILE, or the
 * first default that fits, coop_few_rows first where the first default's row tiles would not fill
 * the device at two workgroups a multiprocessor. */
static int plan_coop(const hk_context *context, const hk_sdpa_desc *desc, flash_plan *p)
{
#ifdef HK_HAVE_SHADER_FLASH_COOP_F16
    uint32_t sg = coop_subgroup(context), d = desc->head_dim;
    if (!sg)
        return 0;
    /* diagnostic: units synchronised by workgroup barriers, no unit-level skips (the emulation's
     * way, on the matrix cores) */
    uint32_t extra = softmax_flag(context, 0, p);
    if (env_choice("HK_FLASH_WORKGROUP_SYNC", "0", "1", p) == 1)
        extra |= 8;
    flash_tile t;
    int e = env_tile("HK_FLASH_TILE", &t, p);
    if (e > 0) {
        const char *why = coop_tile_problem(context, d, &t, sg, 0, extra & 16);
        if (!why) {
            set_tile(p, &t, sg);
            p->subgroup = sg;
            p->flags |= extra;
            return 1;
        }
        snprintf(p->bad_env, sizeof p->bad_env, "HK_FLASH_TILE=\"%u,%u,%u,%u,%u,%u\" cannot run here: %s", t.nsg,
                 t.mr, t.bc, t.bkv, t.qreg, t.prefetch, why);
    }
    /* the defaults (also under a refused HK_FLASH_TILE: the call then fails, but the plan's sizes
     * stay those of a real tile) */
    uint64_t rows = 16ull * coop_defaults[0].mr * coop_defaults[0].nsg;
    uint64_t tiles = div_up((uint64_t)desc->n_q * (desc->n_heads / desc->n_kv_heads), rows) * desc->n_kv_heads;
    if (tiles < two_a_multiprocessor(context) && take_default(context, d, &coop_few_rows, sg, extra, p)) {
        p->few_rows_tile = 1;
        return 1;
    }
    for (size_t i = 0; i < sizeof coop_defaults / sizeof coop_defaults[0]; i++)
        if (take_default(context, d, &coop_defaults[i], sg, extra, p))
            return 1;
#else
    (void)context;
    (void)desc;
    (void)p;
#endif
    return 0;
}

/* Testing only: HK_FLASH_EMULATE_COOPMAT ("1", or a tile "nsg,mr,bc,bkv,qreg,prefetch" as
 * HK_FLASH_TILE) runs the matrix-core arm's code with its matrix operations emulated
 * (flash_coopmat_emu.glsl) on a device without matrix cores, f16 caches only, on virtual
 * subgroups of 32 invocations. Slow (barriers in every product); for small shapes. */
static const char *emulation_asked(const hk_context *context, const hk_sdpa_desc *desc)
{
    const char *env = getenv("HK_FLASH_EMULATE_COOPMAT");
    if (!env || !*env || flash_types[desc->kv.type].emu == HK_NO_SHADER || !(context->features & HK_FEATURE_FLOAT16))
        return NULL;
    return env;
}

static int plan_emulated(const hk_context *context, const hk_sdpa_desc *desc, flash_plan *p)
{
    const char *env = emulation_asked(context, desc);
    if (!env)
        return 0;
    flash_tile t = emu_default;
    if (strcmp(env, "1") && env_tile("HK_FLASH_EMULATE_COOPMAT", &t, p) < 0)
        return 0;
    uint32_t rsm = softmax_flag(context, 1, p);
    const char *why = coop_tile_problem(context, desc->head_dim, &t, 32, 1, rsm);
    if (why) {
        snprintf(p->bad_env, sizeof p->bad_env, "HK_FLASH_EMULATE_COOPMAT=\"%.40s\" cannot run here: %s", env, why);
        return 0;
    }
    set_tile(p, &t, 32);
    p->flags |= rsm;
    p->shader = flash_types[desc->kv.type].emu;
    return 1;
}

static int plan_twin(const hk_context *context, uint32_t d, flash_plan *p)
{
    static const uint32_t brs[2] = {16, 8};
    for (int i = 0; i < 2; i++) {
        uint32_t br = brs[i];
        if ((d / 4) % (FLASH_TWIN_WG / br)) /* each of a row's invocations owns whole quads */
            continue;
        for (uint32_t bkv = 32; bkv >= 8; bkv /= 2)
            if (twin_shared_bytes(d, br, bkv, bkv) <= context->caps.shared_memory_bytes) {
                p->wg = FLASH_TWIN_WG;
                p->br = br;
                p->bc = p->bkv = bkv;
                p->mr = 1;
                p->flags = 4; /* prefetch */
                p->coop = 0;
                return 1;
            }
    }
    return 0;
}

/* An autotuner schedule's tile on the arm this device runs (the matrix cores, else the twin; the
 * emulated arm takes none): 1 with the tile set, else 0 and why. */
static int sched_tile(const hk_context *context, const hk_sdpa_desc *desc, const uint32_t *v, flash_plan *p,
                      char *why, size_t why_size)
{
    uint32_t d = desc->head_dim, rows = v[FL_ROWS], bc = v[FL_BC], bkv = v[FL_BKV];
    const flash_type *ft = &flash_types[desc->kv.type];
    uint32_t sg = coop_subgroup(context);
    if (sg) {
#ifdef HK_HAVE_SHADER_FLASH_COOP_F16
        if (rows != 16 && rows != 32) {
            snprintf(why, why_size, "invalid: rows=%u per subgroup on the matrix cores (16 x mr: 16 or 32)", rows);
            return 0;
        }
        flash_tile tile = {v[FL_SUBGROUPS], rows / 16, bc, bkv, v[FL_QREG], v[FL_PREFETCH]};
        uint32_t rsm = softmax_flag(context, 0, p);
        const char *problem = coop_tile_problem(context, d, &tile, sg, 0, rsm);
        if (problem) {
            snprintf(why, why_size, "%s", problem);
            return 0;
        }
        set_tile(p, &tile, sg);
        p->flags |= rsm;
        p->subgroup = sg;
        p->shader = ft->coop;
        return 1;
#endif
    }
    if (emulation_asked(context, desc)) {
        snprintf(why, why_size, "the emulated arm (HK_FLASH_EMULATE_COOPMAT) takes no schedule");
        return 0;
    }
    /* the twin: one unit of FLASH_TWIN_WG invocations, tpr of them per row, each owning whole
     * quads of D and whole keys of a chunk */
    uint32_t tpr = FLASH_TWIN_WG / rows;
    if (v[FL_SUBGROUPS] != 1 || v[FL_QREG]) {
        snprintf(why, why_size, "invalid: the portable arm has one unit (subgroups 1) and Q in shared memory (qreg 0)");
        return 0;
    }
    if (rows < 1 || rows > FLASH_TWIN_WG || FLASH_TWIN_WG % rows || (d / 4) % tpr || bc % tpr || bkv % bc ||
        bkv > 256 || v[FL_PREFETCH] > 1) {
        snprintf(why, why_size, "a tile that does not divide: rows=%u (%u invocations a row) with head_dim %u, bc=%u, "
                 "bkv=%u", rows, tpr, d, bc, bkv);
        return 0;
    }
    uint64_t shared = twin_shared_bytes(d, rows, bc, bkv);
    if (shared > context->caps.shared_memory_bytes) {
        snprintf(why, why_size, "shared memory %llu over the device's %u", (unsigned long long)shared,
                 context->caps.shared_memory_bytes);
        return 0;
    }
    p->wg = FLASH_TWIN_WG;
    p->br = rows;
    p->bc = bc;
    p->bkv = bkv;
    p->mr = 1;
    p->flags = v[FL_PREFETCH] ? 4u : 0u;
    p->coop = 0;
    p->shader = ft->twin;
    return 1;
}

/* The row tiles' launch order (FLAGS bit 5, shaders/flash.comp ZIGZAG): a schedule's (order 1:
 * zigzag), else under a causal mask, where the few-rows tile runs all its workgroups at once, two a
 * multiprocessor, zigzag (the first half heaviest first, the second lightest first, so that the two
 * sharing a multiprocessor, dispatched that many apart, see about as many keys together as any
 * other two); else heaviest first (over several waves the longest start first). HK_FLASH_ORDER
 * ("zigzag" or "heaviest") replaces the default's choice. */
static void set_order(const hk_context *context, int causal, const hk__sched *sched, flash_plan *p)
{
    int zigzag = causal && p->few_rows_tile && p->groups <= two_a_multiprocessor(context);
    int choice = sched ? -1 : env_choice("HK_FLASH_ORDER", "heaviest", "zigzag", p);
    if (sched)
        zigzag = sched->v[FL_ORDER] != 0;
    else if (choice == 0 || choice == 1)
        zigzag = choice;
    if (zigzag)
        p->flags |= FLASH_ZIGZAG;
}

/* The arm, workgroup and key split for a (checked) shape with a schedule (NULL: HK_FLASH_TILE or
 * the defaults, HK_FLASH_GROUPS); 0 if flash attention does not serve it so (why, where given,
 * says why a schedule cannot run). */
static int plan_with(const hk_context *context, const hk_sdpa_desc *desc, const hk__sched *sched, flash_plan *p,
                     char *why, size_t why_size)
{
    const hk_caps *caps = &context->caps;
    uint32_t d = desc->head_dim;
    memset(p, 0, sizeof *p);
    if (!HK_TYPE_TAKES(flash_types, desc->kv.type))
        return 0;
    if (d % 16 || d > 256 || !isfinite((float)(desc->scale * LOG2E))) /* the shader's scale */
        return 0;
    uint64_t target = FLASH_TARGET_GROUPS;
    if (sched) {
        if (!sched_tile(context, desc, sched->v, p, why, why_size))
            return 0;
        target = sched->v[FL_GROUPS] ? sched->v[FL_GROUPS] : 1;
    } else {
        if (plan_coop(context, desc, p)) {
            p->shader = flash_types[desc->kv.type].coop;
        } else if (!plan_emulated(context, desc, p)) {
            if (!plan_twin(context, d, p))
                return 0;
            p->shader = flash_types[desc->kv.type].twin;
        }
        const char *env = getenv("HK_FLASH_GROUPS");
        if (env && *env) {
            char *end;
            unsigned long v = strtoul(env, &end, 10);
            if (*end || v < 1 || v > 1000000)
                snprintf(p->bad_env, sizeof p->bad_env,
                         "HK_FLASH_GROUPS=\"%.40s\" is not a count of workgroups 1..1000000", env);
            else
                target = v;
        }
    }
    p->target = (uint32_t)target;

    uint32_t group = desc->n_heads / desc->n_kv_heads;
    uint64_t row_tiles = div_up((uint64_t)desc->n_q * group, p->br);
    uint64_t base = row_tiles * desc->n_kv_heads;
    uint64_t tiles = div_up(desc->kv.capacity, p->bkv);
    uint64_t max_tiles = (p->coop ? FLASH_COOP_MAX_KEYS : FLASH_TWIN_MAX_KEYS) / p->bkv;
    uint64_t needed = div_up(tiles, max_tiles); /* the loop bound */
    uint64_t n_split = needed;
    if (base < target) { /* few workgroups: spread the keys too, within FLASH_MAX_SPLIT chunks (only
                          * the loop bound may ask for more: flash-decoding then serves the shape) */
        uint64_t want = div_up(target, base), most = tiles / div_up(FLASH_MIN_SPLIT_KEYS, p->bkv);
        if (want > most)
            want = most;
        if (want > FLASH_MAX_SPLIT)
            want = FLASH_MAX_SPLIT;
        if (want > n_split)
            n_split = want;
    }
    uint64_t nr = (uint64_t)desc->n_q * desc->n_heads;
    for (;;) {
        uint64_t split_tiles = div_up(tiles, n_split);
        n_split = div_up(tiles, split_tiles); /* no empty chunk at the end */
        uint64_t ws = n_split > 1 ? n_split * nr * (d + 2) * 4 : 0;
        if (ws <= caps->max_storage_buffer_range && n_split * nr * (d + 2) <= UINT32_MAX) {
            p->split_tiles = (uint32_t)split_tiles;
            p->workspace = ws;
            break;
        }
        if (n_split == needed) /* the chunks the loop bound needs do not fit one workspace binding */
            return 0;
        n_split = needed;
    }
    if (n_split > FLASH_MAX_SPLIT)
        return 0;
    p->n_split = (uint32_t)n_split;
    p->row_tiles = (uint32_t)row_tiles;
    p->groups = base * n_split;
    set_order(context, desc->causal, sched, p);
    return p->groups <= 65535ull * 65535ull;
}

/* Its shape class (hk_tune): heads, head_dim, causal, and the power-of-two ranges of n_q and of
 * kv.capacity. */
static void key_flash(char key[HK_TUNE_SHAPE_CHARS], const hk_sdpa_desc *d)
{
    char q[32], cap[32];
    hk__tune_bucket(q, sizeof q, d->n_q);
    hk__tune_bucket(cap, sizeof cap, d->kv.capacity);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:h%u/kv%u/d%u/q%s/cap%s%s", hk_type_name(d->kv.type), d->n_heads,
             d->n_kv_heads, d->head_dim, q, cap, d->causal ? "/causal" : "");
}

/* The plan of a call: the autotuner's schedule where one applies (the tuner's candidate on this
 * thread, else the context's cached winner for the shape class), else the hooks and defaults. A
 * cached winner that cannot plan here (only a hand-edited line can be one) gives the default; a
 * candidate that cannot makes the call fail (bad_env). */
static int plan(const hk_context *context, const hk_sdpa_desc *desc, flash_plan *p)
{
    char key[HK_TUNE_SHAPE_CHARS], why[160] = "";
    key_flash(key, desc);
    hk__sched sched;
    int source;
    if (hk__tune_lookup((hk_context *)context, &hk__tune_flash_prefill, key, &sched, &source)) {
        if (plan_with(context, desc, &sched, p, why, sizeof why)) {
            p->source = source;
            p->plant = sched.plant;
            return 1;
        }
        if (source == HK_SCHED_SEARCH) {
            int ok = plan_with(context, desc, NULL, p, NULL, 0);
            snprintf(p->bad_env, sizeof p->bad_env, "the schedule being tuned cannot run: %s",
                     why[0] ? why : "no key split fits");
            return ok;
        }
    }
    int ok = plan_with(context, desc, NULL, p, NULL, 0);
    static const char *const hooks[] = {"HK_FLASH_TILE", "HK_FLASH_GROUPS", "HK_FLASH_WORKGROUP_SYNC",
                                        "HK_FLASH_EMULATE_COOPMAT", "HK_FLASH_ORDER"};
    p->source = HK_SCHED_DEFAULT;
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++)
        if (hk__env_given(hooks[i]))
            p->source = HK_SCHED_ENV;
    return ok;
}

/* ---- autotuner (src/tune) ---- */

static hk_status shape_flash(const hk_context *context, const hk_tune_desc *desc, char key[HK_TUNE_SHAPE_CHARS])
{
    hk_sdpa_desc sd;
    hk_status st = hk__tune_sdpa_shape(context, desc, &sd);
    if (st == HK_OK)
        key_flash(key, &sd);
    return st;
}

static int feasible_flash(const hk_context *context, const hk_tune_desc *tdesc, const uint32_t *v, uint32_t sig[8],
                          char *why, size_t why_size)
{
    hk_sdpa_desc sd;
    hk__tune_sdpa_desc(tdesc, &sd);
    const hk_sdpa_desc *desc = &sd;
    hk__sched s;
    memset(&s, 0, sizeof s);
    memcpy(s.v, v, FL_PARAMS * sizeof *v);
    flash_plan p;
    why[0] = 0;
    if (!plan_with(context, desc, &s, &p, why, why_size)) {
        if (!why[0])
            snprintf(why, why_size, "invalid: no key split fits one dispatch and workspace with this tile");
        return 0;
    }
    const uint32_t plan_sig[8] = {(uint32_t)p.shader, p.wg, p.br, p.bc, p.bkv, p.mr, p.flags, p.n_split};
    memcpy(sig, plan_sig, sizeof plan_sig);
    return 1;
}

extern const hk_case hk_case_sdpa; /* src/cases/cases_attention.c */

const hk__tunable hk__tune_flash_prefill = {HK_TUNE_FLASH_PREFILL,
                                            "flash_prefill",
                                            FL_PARAMS,
                                            {{"subgroups", 4, {1, 2, 4, 8}, 1, 16, 0},
                                             {"rows", 4, {8, 16, 32, 64}, 8, 64, 1},
                                             {"bc", 4, {8, 16, 32, 64}, 8, 128, 0},
                                             {"bkv", 4, {16, 32, 64, 128}, 8, 256, 0},
                                             {"qreg", 2, {0, 1}, 0, 1, 0},
                                             {"prefetch", 2, {0, 1}, 0, 1, 0},
                                             {"groups", 4, {64, 128, 256, 512}, 1, 1000000, 0},
                                             {"order", 2, {0, 1}, 0, 1, 0}},
                                            shape_flash,
                                            feasible_flash,
                                            &hk_case_sdpa,
                                            hk__tune_sdpa_case,
                                            0};

int hk__sdpa_flash_supported(const hk_context *context, const hk_sdpa_desc *desc)
{
    flash_plan p;
    return plan(context, desc, &p);
}

const char *hk__sdpa_flash_arm(const hk_context *context, const hk_sdpa_desc *desc)
{
    flash_plan p;
    if (!plan(context, desc, &p))
        return NULL;
    return p.subgroup ? "flash-coopmat" : "flash";
}

uint64_t hk__sdpa_flash_workspace(const hk_context *context, const hk_sdpa_desc *desc)
{
    flash_plan p;
    return plan(context, desc, &p) ? p.workspace : 0;
}

hk_status hk__sdpa_flash(hk_context *context, hk_stream *stream, const char *fn, const hk_sdpa_call *call)
{
    const hk_sdpa_desc *d = call->desc;
    flash_plan p;
    if (!plan(context, d, &p))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "internal: flash attention does not serve head_dim=%u here", d->head_dim);
    if (p.bad_env[0]) /* a tuning override that cannot run: refused, never silently replaced */
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "%s", p.bad_env);
    const hk_kv_layout *kv = &d->kv;
    /* strides that are never multiplied by a non-zero index are passed as 0: only the used ones
     * are bounded by the binding (and so fit 32 bits) */
    uint64_t k_row = kv->capacity > 1 ? kv->k_row_stride : 0, v_row = kv->capacity > 1 ? kv->v_row_stride : 0;
    uint64_t k_head = d->n_kv_heads > 1 ? kv->k_head_stride : 0, v_head = d->n_kv_heads > 1 ? kv->v_head_stride : 0;
    uint32_t aligned = flash_types[kv->type].wide && call->b[SDPA_K].view.offset % 16 == 0 &&
                       call->b[SDPA_V].view.offset % 16 == 0 && k_row % 16 == 0 && v_row % 16 == 0 &&
                       k_head % 16 == 0 && v_head % 16 == 0;
    float scale = (float)(d->scale * LOG2E);
    uint32_t scale_bits;
    memcpy(&scale_bits, &scale, 4);
    /* testing only (HK_TUNE_PLANT_WRONG): a candidate that skips half the keys */
    uint32_t seq_k = call->has_counter ? 0 : p.plant ? (d->seq_k + 1) / 2 : d->seq_k;
    uint32_t params[14] = {d->n_q,        d->n_heads,         d->n_heads / d->n_kv_heads,
                           seq_k,         kv->capacity,
                           d->causal != 0, scale_bits,        (uint32_t)k_row,
                           (uint32_t)k_head, (uint32_t)v_row, (uint32_t)v_head,
                           p.row_tiles,  p.n_split,          p.split_tiles};
    uint32_t spec[7] = {p.wg, d->head_dim, p.br, p.bc, p.flags | aligned, p.mr, p.bkv};
    hk_dispatch_desc main_pass = {.shader = p.shader,
                                  .subgroup_size = p.subgroup,
                                  .spec = spec,
                                  .spec_count = 7,
                                  .bindings = call->b,
                                  .binding_count = SDPA_BINDINGS,
                                  .params = params,
                                  .params_bytes = sizeof params,
                                  .groups = p.groups};
    uint32_t combine_spec[2] = {FLASH_COMBINE_WG, d->head_dim};
    hk_dispatch_desc combine = {.shader = HK_SHADER_FLASH_COMBINE,
                                .spec = combine_spec,
                                .spec_count = 2,
                                .bindings = call->b,
                                .binding_count = SDPA_BINDINGS,
                                .params = params,
                                .params_bytes = sizeof params,
                                .groups = (uint64_t)d->n_q * d->n_heads};
    /* both pipelines first, so that a failure records nothing; a NULL stream runs both passes
     * in one submit */
    VkPipeline pipeline;
    VkPipelineLayout layout;
    VkDescriptorSetLayout set_layout;
    hk_status st = hk__pipeline_get(context, fn, &main_pass, &pipeline, &layout, &set_layout);
    if (st == HK_OK && p.n_split > 1)
        st = hk__pipeline_get(context, fn, &combine, &pipeline, &layout, &set_layout);
    if (st != HK_OK)
        return st;
    hk_stream *s = stream ? stream : hk__immediate_begin(context);
    st = hk__dispatch(context, s, fn, &main_pass);
    if (st == HK_OK && p.n_split > 1)
        st = hk__dispatch(context, s, fn, &combine);
    st = stream ? st : hk__immediate_end(context, fn, st);
    if (st == HK_OK) { /* what served the call, as the tuner names it */
        uint32_t unit_rows = p.coop ? 16 * p.mr : p.br;
        const uint32_t served[FL_PARAMS] = {p.br / unit_rows, unit_rows,         p.bc, p.bkv, (p.flags >> 1) & 1,
                                            (p.flags >> 2) & 1, p.target, (p.flags & FLASH_ZIGZAG) != 0};
        hk__tune_note(context, &hk__tune_flash_prefill, served, p.source);
    }
    return st;
}
