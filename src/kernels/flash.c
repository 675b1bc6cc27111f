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

/* Keys per tile of the matrix-core arm; its workgroup is FLASH_COOP_SUBGROUPS subgroups, each
 * owning 32 rows (head_dim <= 128 on 32-wide or wider subgroups: every K and V tile it loads
 * serves two 16-row blocks) or 16 rows (larger heads: the O accumulators of 32 rows would not fit
 * the registers). One subgroup when two do not fit the shared memory. */
#define FLASH_BC 32u
#define FLASH_COOP_SUBGROUPS 2u
/* The twin: 64 invocations, 16 rows (4 invocations per row), 32 keys per tile, fewer where the
 * shared memory is small (f32 staging of head_dim 256 needs 8 keys in 32 KiB). */
#define FLASH_TWIN_WG 64u
#define FLASH_TWIN_BR 16u
/* Key tiles one workgroup walks at most: the loop bound of a workgroup. Lavapipe ends a shader's
 * loops after 65535 iterations in all per invocation, counting the loops it does not unroll
 * (measured on the twin: 4 to 8 per tile). Even if no loop were unrolled, a tile would cost the
 * twin at most ~600 iterations (head_dim 128, tiles of 32) and the matrix-core arm (emulated or
 * not) ~230: 64 and 256 tiles stay under 40000 and 60000. Longer caches are split in chunks. */
#define FLASH_COOP_MAX_TILES 256u
#define FLASH_TWIN_MAX_TILES 64u
/* Splitting for occupancy: below FLASH_TARGET_GROUPS workgroups, keys are split further, into
 * chunks of at least FLASH_MIN_SPLIT_TILES tiles; at most FLASH_MAX_SPLIT chunks in all. */
#define FLASH_TARGET_GROUPS 512u
#define FLASH_MIN_SPLIT_TILES 16u
#define FLASH_MAX_SPLIT 64u
#define FLASH_COMBINE_WG 64u

#define LOG2E 1.4426950408889634

typedef struct flash_plan {
    int shader;
    uint32_t subgroup; /* 0 for the twin */
    uint32_t wg, br, bc, mr;
    uint32_t row_tiles, n_split, split_tiles;
    uint64_t groups;
    uint64_t workspace;
} flash_plan;

static int type_index(hk_type type) { return type == HK_TYPE_F32 ? 0 : type == HK_TYPE_F16 ? 1 : 2; }

/* Shared memory of each arm, as flash.comp declares it (plus common.glsl's hk_partial[WG]). */
static uint64_t coop_shared_bytes(uint32_t d, uint32_t br, uint32_t bc, uint32_t wg)
{
    return (uint64_t)br * (d + 8) * 2 + (uint64_t)bc * (d + 8) * 2 + (uint64_t)br * (bc + 4) * 4 +
           (uint64_t)br * (bc + 8) * 2 + (uint64_t)br * 16 * 4 + (uint64_t)wg * 4;
}

static uint64_t twin_shared_bytes(uint32_t d, uint32_t br, uint32_t bc, uint32_t wg)
{
    return (uint64_t)br * (d + 8) * 4 + (uint64_t)bc * (d + 8) * 4 + (uint64_t)br * (bc + 4) * 4 + (uint64_t)wg * 4;
}

/* The device lists 16x16x16 f16 x f16 -> f32 at subgroup scope (VkComponentTypeKHR: FLOAT16 0,
 * FLOAT32 1; VkScopeKHR: SUBGROUP 3). */
static int coop_tile_listed(const hk_caps *caps)
{
    for (uint32_t i = 0; i < caps->coopmat_khr_count && i < HK_MAX_COOPMAT_PROPS; i++) {
        const hk_coopmat_props *p = &caps->coopmat_khr_props[i];
        if (p->m == 16 && p->n == 16 && p->k == 16 && p->a_type == 0 && p->b_type == 0 && p->c_type == 1 &&
            p->result_type == 1 && p->scope == 3)
            return 1;
    }
    return 0;
}

/* The matrix-core arm's workgroup for this head_dim, if the device can run it. */
static int plan_coop(const hk_context *context, uint32_t d, flash_plan *p)
{
#ifdef HK_HAVE_SHADER_FLASH_COOP_F16
    const hk_caps *caps = &context->caps;
    uint32_t need = HK_FEATURE_COOPMAT_KHR | HK_FEATURE_FLOAT16 | HK_FEATURE_SUBGROUP_SIZE_CONTROL;
    uint32_t sg = caps->subgroup_size;
    if ((context->features & need) != need || !coop_tile_listed(caps) || sg < 16 || sg > 128 || (sg & (sg - 1)))
        return 0;
    uint32_t mr = d <= 128 && sg >= 32 ? 2 : 1; /* so that sg is a multiple of 16 * mr rows */
    if (sg / (16 * mr) > 4) /* the softmax writes P 8 keys at a time: at most 4 threads per row */
        return 0;
    for (uint32_t nsg = FLASH_COOP_SUBGROUPS; nsg >= 1; nsg--) {
        uint32_t wg = nsg * sg, br = 16 * mr * nsg;
        if (wg <= caps->max_workgroup_size && coop_shared_bytes(d, br, FLASH_BC, wg) <= caps->shared_memory_bytes) {
            *p = (flash_plan){.subgroup = sg, .wg = wg, .br = br, .bc = FLASH_BC, .mr = mr};
            return 1;
        }
    }
#else
    (void)context;
    (void)d;
    (void)p;
#endif
    return 0;
}

/* Testing only: HK_FLASH_EMULATE_COOPMAT="MR,SUBGROUPS" (e.g. "2,1") runs the matrix-core arm's
 * code with its matrix operations emulated (flash_coopmat_emu.glsl) on a device without matrix
 * cores, f16 caches only: MR 16-row blocks per virtual 32-wide subgroup, SUBGROUPS (1..4) of them
 * per workgroup. Slow (barriers in every product); for small shapes. */
static int plan_emulated(const hk_context *context, const hk_sdpa_desc *desc, flash_plan *p)
{
    const char *env = getenv("HK_FLASH_EMULATE_COOPMAT");
    unsigned mr = 0, nsg = 0;
    if (!env || desc->kv.type != HK_TYPE_F16 || !(context->features & HK_FEATURE_FLOAT16) ||
        sscanf(env, "%u,%u", &mr, &nsg) != 2 || mr < 1 || mr > 2 || nsg < 1 || nsg > 4)
        return 0;
    uint32_t wg = 32 * nsg, br = 16 * mr * nsg, d = desc->head_dim;
    uint64_t shared = coop_shared_bytes(d, br, FLASH_BC, wg) + 2ull * nsg * 256 * 4;
    if (wg > context->caps.max_workgroup_size || shared > context->caps.shared_memory_bytes)
        return 0;
    *p = (flash_plan){.shader = HK_SHADER_FLASH_EMU_F16, .wg = wg, .br = br, .bc = FLASH_BC, .mr = mr};
    return 1;
}

static int plan_twin(const hk_context *context, uint32_t d, flash_plan *p)
{
    for (uint32_t bc = FLASH_BC; bc >= 8; bc /= 2)
        if (twin_shared_bytes(d, FLASH_TWIN_BR, bc, FLASH_TWIN_WG) <= context->caps.shared_memory_bytes) {
            *p = (flash_plan){.wg = FLASH_TWIN_WG, .br = FLASH_TWIN_BR, .bc = bc, .mr = 1};
            return 1;
        }
    return 0;
}

static uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* The arm, workgroup and key split for a (checked) shape; 0 if flash attention does not serve it. */
static int plan(const hk_context *context, const hk_sdpa_desc *desc, flash_plan *p)
{
    const hk_caps *caps = &context->caps;
    uint32_t d = desc->head_dim;
    if (d % 16 || d > 256 || !isfinite((float)(desc->scale * LOG2E))) /* the shader's scale */
        return 0;
    int t = type_index(desc->kv.type), coop = plan_coop(context, d, p);
    if (coop) {
#ifdef HK_HAVE_SHADER_FLASH_COOP_F16
        static const int coop_shaders[3] = {HK_SHADER_FLASH_COOP_F32, HK_SHADER_FLASH_COOP_F16,
                                            HK_SHADER_FLASH_COOP_Q8_0};
        p->shader = coop_shaders[t];
#endif
    } else if (!plan_emulated(context, desc, p)) {
        static const int twin_shaders[3] = {HK_SHADER_FLASH_F32, HK_SHADER_FLASH_F16, HK_SHADER_FLASH_Q8_0};
        if (!plan_twin(context, d, p))
            return 0;
        p->shader = twin_shaders[t];
    }

    uint32_t group = desc->n_heads / desc->n_kv_heads;
    uint64_t row_tiles = div_up((uint64_t)desc->n_q * group, p->br);
    uint64_t base = row_tiles * desc->n_kv_heads;
    uint64_t tiles = div_up(desc->kv.capacity, p->bc);
    uint64_t max_tiles = coop ? FLASH_COOP_MAX_TILES : FLASH_TWIN_MAX_TILES;
    uint64_t needed = div_up(tiles, max_tiles); /* the loop bound */
    uint64_t n_split = needed;
    if (base < FLASH_TARGET_GROUPS) { /* few workgroups: spread the keys too */
        uint64_t want = div_up(FLASH_TARGET_GROUPS, base), most = tiles / FLASH_MIN_SPLIT_TILES;
        if (want > most)
            want = most;
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
    return p->groups <= 65535ull * 65535ull;
}

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
    const hk_kv_layout *kv = &d->kv;
    /* strides that are never multiplied by a non-zero index are passed as 0: only the used ones
     * are bounded by the binding (and so fit 32 bits) */
    uint64_t k_row = kv->capacity > 1 ? kv->k_row_stride : 0, v_row = kv->capacity > 1 ? kv->v_row_stride : 0;
    uint64_t k_head = d->n_kv_heads > 1 ? kv->k_head_stride : 0, v_head = d->n_kv_heads > 1 ? kv->v_head_stride : 0;
    uint32_t aligned = kv->type != HK_TYPE_Q8_0 && call->b[SDPA_K].view.offset % 16 == 0 &&
                       call->b[SDPA_V].view.offset % 16 == 0 && k_row % 16 == 0 && v_row % 16 == 0 &&
                       k_head % 16 == 0 && v_head % 16 == 0;
    float scale = (float)(d->scale * LOG2E);
    uint32_t scale_bits;
    memcpy(&scale_bits, &scale, 4);
    uint32_t params[14] = {d->n_q,        d->n_heads,         d->n_heads / d->n_kv_heads,
                           call->has_counter ? 0 : d->seq_k,  kv->capacity,
                           d->causal != 0, scale_bits,        (uint32_t)k_row,
                           (uint32_t)k_head, (uint32_t)v_row, (uint32_t)v_head,
                           p.row_tiles,  p.n_split,          p.split_tiles};
    uint32_t spec[6] = {p.wg, d->head_dim, p.br, p.bc, aligned, p.mr};
    hk_dispatch_desc main_pass = {.shader = p.shader,
                                  .subgroup_size = p.subgroup,
                                  .spec = spec,
                                  .spec_count = 6,
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
    return stream ? st : hk__immediate_end(context, fn, st);
}
