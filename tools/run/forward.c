/* hk-run's forward pass (see forward.h): a Llama / Qwen2 / Qwen3 / Qwen3-MoE layer from library
 * calls, the graphs that replay it, and the host-visible buffer that feeds them. */
#include "forward.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES (1024ull << 20)
#define Q8_1_BLOCK_BYTES 36u
#define MAX_TIMESTAMPS 2u

static hk_view at(hk_view v, uint64_t bytes) { return (hk_view){v.buffer, v.offset + bytes}; }

static int quantized(hk_type t) { return t != HK_TYPE_F32 && t != HK_TYPE_F16; }

/* a failed library call: the call and the library's message */
#define CALL(expr)                                                                                                     \
    do {                                                                                                               \
        if ((expr) != HK_OK) {                                                                                         \
            fprintf(stderr, "hk-run: %s: %s\n", #expr, hk_last_error());                                              \
            return -1;                                                                                                 \
        }                                                                                                              \
    } while (0)
/* a call of the step: with a profile, a timestamp after it, named by the call */
#define STEP_CALL(expr)                                                                                                \
    do {                                                                                                               \
        if ((expr) != HK_OK) {                                                                                         \
            fprintf(stderr, "hk-run: %s: %s\n", #expr, hk_last_error());                                             \
            return -1;                                                                                                 \
        }                                                                                                              \
        if (s->profile && profile_mark(s->profile, st, #expr) != 0)                                                    \
            return -1;                                                                                                 \
    } while (0)
#define LAYER_CALL(expr)                                                                                               \
    do {                                                                                                               \
        if ((expr) != HK_OK) {                                                                                         \
            fprintf(stderr, "hk-run: layer %u: %s: %s\n", il, #expr, hk_last_error());                                \
            return -1;                                                                                                 \
        }                                                                                                              \
        if (s->profile && profile_mark(s->profile, st, #expr) != 0)                                                    \
            return -1;                                                                                                 \
    } while (0)

static int profile_mark(run_profile_marks *p, hk_stream *st, const char *call)
{
    if (p->marks == p->capacity) {
        fprintf(stderr, "hk-run: the profile holds %u calls\n", p->capacity);
        return -1;
    }
    if (hk_stream_timestamp(st, &p->timestamp[p->marks]) != HK_OK) {
        fprintf(stderr, "hk-run: %s\n", hk_last_error());
        return -1;
    }
    p->call[p->marks++] = call;
    return 0;
}

/* ---- state ---- */

static uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

int run_vulkan_load(hk_context *ctx)
{
    VkInstance instance;
    VkDevice device;
    if (volkInitialize() != VK_SUCCESS || hk_context_vulkan(ctx, &instance, NULL, &device, NULL, NULL) != HK_OK) {
        fprintf(stderr, "hk-run: cannot load Vulkan\n");
        return -1;
    }
    volkLoadInstanceOnly(instance);
    volkLoadDevice(device);
    return 0;
}

static int find_memory_type(VkPhysicalDevice pd, uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer)
{
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(pd, &props);
    int found = -1;
    for (uint32_t i = 0; i < props.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = props.memoryTypes[i].propertyFlags;
        if (!(bits & (1u << i)) || (f & want) != want)
            continue;
        if ((f & prefer) == prefer)
            return (int)i;
        if (found < 0)
            found = (int)i;
    }
    return found;
}

static int create_io(run_state *s, uint64_t size)
{
    VkPhysicalDevice pd;
    if (hk_context_vulkan(s->ctx, NULL, &pd, &s->device, &s->queue, NULL) != HK_OK) {
        fprintf(stderr, "hk-run: %s\n", hk_last_error());
        return -1;
    }
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    if (vkCreateBuffer(s->device, &bi, NULL, &s->io_buffer) != VK_SUCCESS) {
        fprintf(stderr, "hk-run: cannot create the host-visible buffer\n");
        return -1;
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(s->device, s->io_buffer, &req);
    int type = find_memory_type(pd, req.memoryTypeBits,
                                VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (type < 0) {
        fprintf(stderr, "hk-run: the device has no host-visible coherent memory\n");
        return -1;
    }
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = (uint32_t)type;
    void *map;
    if (vkAllocateMemory(s->device, &ai, NULL, &s->io_memory) != VK_SUCCESS ||
        vkBindBufferMemory(s->device, s->io_buffer, s->io_memory, 0) != VK_SUCCESS ||
        vkMapMemory(s->device, s->io_memory, 0, VK_WHOLE_SIZE, 0, &map) != VK_SUCCESS) {
        fprintf(stderr, "hk-run: cannot allocate %llu bytes of host-visible memory\n", (unsigned long long)size);
        return -1;
    }
    s->io_map = map;
    memset(s->io_map, 0, size);
    if (hk_buffer_wrap(s->ctx, s->io_buffer, size, &s->io) != HK_OK) {
        fprintf(stderr, "hk-run: %s\n", hk_last_error());
        return -1;
    }
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    uint32_t family;
    hk_context_vulkan(s->ctx, NULL, NULL, NULL, NULL, &family);
    pi.queueFamilyIndex = family;
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (vkCreateCommandPool(s->device, &pi, NULL, &s->pool) != VK_SUCCESS ||
        vkCreateFence(s->device, &fi, NULL, &s->fence) != VK_SUCCESS) {
        fprintf(stderr, "hk-run: cannot create a command pool and a fence\n");
        return -1;
    }
    return 0;
}

static hk_sdpa_desc sdpa_desc(const run_state *s, uint32_t m)
{
    const run_hparams *hp = &s->model->hp;
    hk_sdpa_desc d = {0};
    d.n_q = m;
    d.n_heads = hp->n_head;
    d.n_kv_heads = hp->n_head_kv;
    d.head_dim = hp->head_dim;
    d.seq_k = s->capacity; /* the graph reads io count */
    d.scale = 1.0f / sqrtf((float)hp->head_dim);
    d.causal = 1;
    d.kv = s->kv;
    return d;
}

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

int run_state_create(run_state *s, hk_context *ctx, const run_model *m, uint32_t batch, uint32_t chain,
                     uint32_t capacity, hk_type kv_type, const uint32_t *graph_sizes, uint32_t n_graph_sizes,
                     float temperature)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->model = m;
    s->batch = batch;
    s->chain = chain ? chain : 1;
    s->capacity = capacity;
    s->temperature = temperature;
    const run_hparams *hp = &m->hp;
    uint64_t row = hk_type_bytes(kv_type, hp->head_dim);
    if (!row) {
        fprintf(stderr, "hk-run: a head of %u values cannot be stored as %s\n", hp->head_dim, hk_type_name(kv_type));
        return -1;
    }
    s->kv.type = kv_type;
    s->kv.capacity = capacity;
    s->kv.k_row_stride = s->kv.v_row_stride = row;
    s->kv.k_head_stride = s->kv.v_head_stride = row * capacity;
    uint64_t cache_bytes = row * capacity * hp->n_head_kv;

    uint64_t b = batch, e = hp->n_embd, q = (uint64_t)hp->n_head * hp->head_dim,
             kv = (uint64_t)hp->n_head_kv * hp->head_dim, top_k = hp->n_expert_used;
    uint64_t ff = max_u32(hp->n_ff, (uint32_t)(top_k * hp->n_ff_exp));
    uint64_t widest = e > q ? e : q;
    if (ff > widest)
        widest = ff;
    uint64_t workspace = 0;
    for (uint32_t i = 0; i < n_graph_sizes; i++) {
        if (!graph_sizes[i])
            continue;
        hk_sdpa_desc d = sdpa_desc(s, graph_sizes[i]);
        uint64_t bytes;
        if (hk_sdpa_workspace_bytes(ctx, &d, &bytes) != HK_OK) {
            fprintf(stderr, "hk-run: attention of %u tokens: %s\n", graph_sizes[i], hk_last_error());
            return -1;
        }
        if (bytes > workspace)
            workspace = bytes;
    }
    s->k_cache = calloc(hp->n_layer, sizeof *s->k_cache);
    s->v_cache = calloc(hp->n_layer, sizeof *s->v_cache);
    if (!s->k_cache || !s->v_cache) {
        fprintf(stderr, "hk-run: out of memory\n");
        return -1;
    }
    run_pack_init(&s->pack, CHUNK_BYTES);
    int rc = 0;
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        rc |= run_pack_add(&s->pack, &s->k_cache[i], cache_bytes);
        rc |= run_pack_add(&s->pack, &s->v_cache[i], cache_bytes);
    }
    rc |= run_pack_add(&s->pack, &s->x, b * e * 4);
    rc |= run_pack_add(&s->pack, &s->xn, b * e * 4);
    /* a token's q, k and v lie together at q (one dispatch writes them) */
    rc |= run_pack_add(&s->pack, &s->q, (b * q > q + 2 * kv ? b * q : q + 2 * kv) * 4);
    rc |= run_pack_add(&s->pack, &s->k, b * kv * 4);
    rc |= run_pack_add(&s->pack, &s->v, b * kv * 4);
    rc |= run_pack_add(&s->pack, &s->attn, b * q * 4);
    rc |= run_pack_add(&s->pack, &s->tmp, b * e * 4);
    rc |= run_pack_add(&s->pack, &s->ff_a, b * ff * 4);
    rc |= run_pack_add(&s->pack, &s->ff_b, b * ff * 4);
    rc |= run_pack_add(&s->pack, &s->xq, b * widest / 32 * Q8_1_BLOCK_BYTES);
    rc |= run_pack_add(&s->pack, &s->ff_q, ff / 32 * Q8_1_BLOCK_BYTES);
    rc |= run_pack_add(&s->pack, &s->logits, (uint64_t)hp->n_vocab * 4);
    rc |= run_pack_add(&s->pack, &s->workspace, workspace);
    uint64_t norm_workspace = 0;
    if (e % 32 == 0 && hk_matvec_int8_add_norm_workspace_bytes(ctx, (uint32_t)e, &norm_workspace) == HK_OK) {
        rc |= run_pack_add(&s->pack, &s->norm_workspace, norm_workspace);
        rc |= run_pack_add(&s->pack, &s->xq_spare, widest / 32 * Q8_1_BLOCK_BYTES);
    }
    if (hp->n_expert) {
        rc |= run_pack_add(&s->pack, &s->moe_out, b * top_k * e * 4);
        rc |= run_pack_add(&s->pack, &s->router_logits, b * hp->n_expert * 4);
        rc |= run_pack_add(&s->pack, &s->expert_ids, b * top_k * 4);
        rc |= run_pack_add(&s->pack, &s->expert_weights, b * top_k * 4);
        rc |= run_pack_add(&s->pack, &s->expert_offsets, ((uint64_t)hp->n_expert + 1) * 4);
        rc |= run_pack_add(&s->pack, &s->expert_slots, b * top_k * 4);
        rc |= run_pack_add(&s->pack, &s->expert_dropped, 4);
    }
    if (rc) {
        fprintf(stderr, "hk-run: out of memory\n");
        return -1;
    }
    if (run_pack_create(&s->pack, ctx, "activations and KV cache") != 0)
        return -1;
    if (!workspace)
        s->workspace = (hk_view){NULL, 0};
    if (!norm_workspace)
        s->norm_workspace = s->xq_spare = (hk_view){NULL, 0};
    else if (hk_buffer_fill(s->norm_workspace.buffer, s->norm_workspace.offset, norm_workspace, 0) != HK_OK) {
        fprintf(stderr, "hk-run: %s\n", hk_last_error());
        return -1;
    }
    /* hk_moe_combine reads every slot's row: rows of dropped experts must hold numbers */
    if (hp->n_expert && hk_buffer_fill(s->moe_out.buffer, s->moe_out.offset, b * top_k * e * 4, 0) != HK_OK) {
        fprintf(stderr, "hk-run: %s\n", hk_last_error());
        return -1;
    }

    /* io: a key count per chained step, the pick of a batch, tokens (a chain's picks follow its
     * first token), positions, the logits */
    uint64_t slots = (b > s->chain ? b : s->chain) + 1;
    uint64_t next_at = round_up((uint64_t)s->chain * 4, 256), tokens_at = next_at + 256,
             positions_at = tokens_at + round_up(slots * 4, 256), out_at = positions_at + round_up(slots * 4, 256);
    if (create_io(s, out_at + (uint64_t)hp->n_vocab * 4) != 0)
        return -1;
    s->io_count = (hk_view){s->io, 0};
    s->io_next = (hk_view){s->io, next_at};
    s->io_tokens = (hk_view){s->io, tokens_at};
    s->io_positions = (hk_view){s->io, positions_at};
    s->io_out = (hk_view){s->io, out_at};
    return 0;
}

void run_state_destroy(run_state *s)
{
    hk_buffer_destroy(s->io);
    run_pack_free(&s->pack);
    if (s->device) {
        if (s->fence)
            vkDestroyFence(s->device, s->fence, NULL);
        if (s->pool)
            vkDestroyCommandPool(s->device, s->pool, NULL);
        if (s->io_buffer)
            vkDestroyBuffer(s->device, s->io_buffer, NULL);
        if (s->io_memory)
            vkFreeMemory(s->device, s->io_memory, NULL);
    }
    free(s->k_cache);
    free(s->v_cache);
    memset(s, 0, sizeof *s);
}

/* ---- the layer ---- */

/* y[m, rows] = x[m, k] . W^T: the int8 kernels on xq (x quantized by the caller) for quantized
 * weights, f32 activations for F16 and F32 ones */
static hk_status linear(run_state *s, hk_stream *st, const run_weight *w, hk_view x, hk_view y, uint32_t m)
{
    hk_context *c = s->ctx;
    if (w->type == HK_TYPE_F32)
        return hk_gemv_f32_tokens(c, st, w->view, x, y, w->rows, w->k, m);
    if (w->type == HK_TYPE_F16 || s->f32_activations)
        return m == 1 ? hk_matvec(c, st, w->type, w->view, x, y, w->rows, w->k)
                      : hk_gemm_f16(c, st, w->type, w->view, x, y, m, w->rows, w->k);
    return m == 1 ? hk_matvec_int8(c, st, w->type, w->view, s->xq, y, w->rows, w->k)
                  : hk_mmq(c, st, w->type, w->view, s->xq, y, m, w->rows, w->k);
}

/* whether a token's product with w runs on the int8 matvec, which has fused epilogues */
static int fused(const run_state *s, const run_weight *w, uint32_t m)
{
    return m == 1 && !s->f32_activations && quantized(w->type);
}

/* Whether a layer's RoPE is GGUF's normal pairs with nothing between the projections and the
 * rotation (no q or k norm, no bias): what hk_matvec_int8_qkv's epilogue takes */
static int plain_rope(const run_hparams *hp, const run_layer *l)
{
    return !hp->rope_neox && !l->q_norm.present && !l->bq.present;
}

/* Whether one token's product with each of the n weights quantizes (and, where norm, normalises)
 * its f32 input inside the matvec (hk_matvec_int8_f32x): fused, and x fits the device's shared
 * memory on the narrowest workgroup (the header's rule, two subgroups). */
static int in_matvec(const run_state *s, uint32_t m, const run_weight *const *w, uint32_t n, int norm)
{
    if (!s->quantize_in_matvec && (norm || !s->quant_in_matvec))
        return 0;
    hk_caps caps;
    hk_context_caps(s->ctx, &caps);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t blocks = 64;
        while (blocks < w[i]->k / 32)
            blocks *= 2;
        uint64_t chunk = blocks <= 128 ? blocks : 32;
        uint64_t shared = 16 + 40 * blocks + 4 * ((blocks + 31) / 32) + 136 * chunk + 16ull * caps.subgroup_size;
        if (!fused(s, w[i], m) || w[i]->k % 32 || shared > caps.shared_memory_bytes)
            return 0;
    }
    return 1;
}

/* y = W . x (several matrices of one type side by side) on one token's f32 x, RMSNorm'ed with norm
 * where given, quantized inside the matvec; epilogue ADD: y = operand + W . x */
static hk_status matvec_f32x(run_state *s, hk_stream *st, const run_weight *const *w, uint32_t n, hk_view x,
                             const run_weight *norm, hk_matvec_epilogue epilogue, hk_view operand, hk_view y)
{
    hk_matvec_f32x_desc d = {.wtype = w[0]->type, .n = n, .k = w[0]->k, .x = x, .eps = s->model->hp.eps,
                             .epilogue = epilogue, .operand = operand, .y = y};
    for (uint32_t i = 0; i < n; i++) {
        d.w[i] = w[i]->view;
        d.rows[i] = w[i]->rows;
    }
    if (norm)
        d.norm = norm->view;
    return hk_matvec_int8_f32x(s->ctx, st, &d);
}

/* Whether the RMSNorm for weights a, b, c reads quantized weights only (1), some f32 or F16 ones
 * too (2), or none quantized (0) */
static int norm_needs(const run_state *s, const run_weight *a, const run_weight *b, const run_weight *c)
{
    const run_weight *w[3] = {a, b, c};
    int int8 = 0, f32 = 0;
    for (int i = 0; i < 3; i++)
        if (w[i]) {
            int8 |= !s->f32_activations && quantized(w[i]->type);
            f32 |= s->f32_activations || !quantized(w[i]->type);
        }
    return !int8 ? 0 : f32 ? 2 : 1;
}

/* The RMSNorm recorded right after a projection (norm_for), and the weights that read it */
typedef struct next_norm {
    const run_weight *norm, *a, *b, *c;
} next_norm;

/* After layer il's attention: its FFN's RMSNorm */
static next_norm after_attention(const run_state *s, uint32_t il)
{
    const run_layer *l = &s->model->layers[il];
    if (s->model->hp.n_expert)
        return (next_norm){&l->ffn_norm, &l->gate_exps, &l->router, NULL};
    return (next_norm){&l->ffn_norm, &l->gate, &l->up, NULL};
}

/* After layer il's FFN: the next layer's attention RMSNorm, or the head's */
static next_norm after_ffn(const run_state *s, uint32_t il)
{
    const run_model *md = s->model;
    if (il + 1 == md->hp.n_layer)
        return (next_norm){&md->output_norm, &md->output, NULL, NULL};
    const run_layer *n = &md->layers[il + 1];
    return (next_norm){&n->attn_norm, &n->wq, &n->wk, &n->wv};
}

/* x (the residual stream) += W . a: the int8 matvec's residual epilogue for a token on aq, a as Q8_1
 * (the same bits as the product and hk_add), else the product into tmp and hk_add. In the
 * norm_in_tail form, a token's next RMSNorm (norm_for(x, next.norm, 1 row, ...)) also in the
 * projection's tail (hk_matvec_int8_add_norm: xq, and xn where an f32 weight reads it), so that
 * norm_for is then not recorded (s->norm_done). */
static hk_status linear_add(run_state *s, hk_stream *st, const run_weight *w, hk_view a, hk_view aq, uint32_t m,
                            next_norm next)
{
    int needs = next.norm ? norm_needs(s, next.a, next.b, next.c) : 0;
    if (s->norm_in_tail && !s->quantize_in_matvec && needs && fused(s, w, m) && s->norm_workspace.buffer &&
        w->rows % 32 == 0 && w->rows <= s->model->hp.n_embd) {
        hk_norm_out norm = {next.norm->view, s->model->hp.eps, s->xq_spare, needs == 2 ? s->xn : (hk_view){NULL, 0},
                            s->norm_workspace};
        hk_status r = hk_matvec_int8_add_norm(s->ctx, st, w->type, w->view, aq, s->x, s->x, w->rows, w->k, &norm);
        if (r == HK_OK) { /* the norm's blocks are xq from here on */
            hk_view input = s->xq;
            s->xq = s->xq_spare;
            s->xq_spare = input;
            s->norm_done = next.norm;
        }
        return r;
    }
    if (fused(s, w, m))
        return hk_matvec_int8_add(s->ctx, st, w->type, w->view, aq, s->x, s->x, w->rows, w->k);
    hk_status r = linear(s, st, w, a, s->tmp, m);
    return r != HK_OK ? r : hk_add(s->ctx, st, s->x, s->tmp, s->x, m * w->rows);
}

/* xq = Q8_1(x) where any of the weights about to read x is quantized */
static hk_status quantize_for(run_state *s, hk_stream *st, hk_view x, uint64_t values, const run_weight *a,
                              const run_weight *b, const run_weight *c)
{
    if (s->f32_activations || (!quantized(a->type) && (!b || !quantized(b->type)) && (!c || !quantized(c->type))))
        return HK_OK;
    return hk_quantize_q8_1(s->ctx, st, x, s->xq, (uint32_t)values);
}

/* Whether the projection before made the RMSNorm with this weight in its tail (linear_add),
 * so that its norm_for is not recorded; taken once */
static int norm_made(run_state *s, const run_weight *norm)
{
    if (s->norm_done != norm)
        return 0;
    s->norm_done = NULL;
    return 1;
}

/* xn = RMSNorm(x) for the weights about to read it: with xq = Q8_1(xn) in the same dispatch where
 * any of them is quantized (and xn itself only where one is not) */
static hk_status norm_for(run_state *s, hk_stream *st, hk_view x, const run_weight *norm, uint32_t rows, uint32_t n,
                          const run_weight *a, const run_weight *b, const run_weight *c)
{
    if (s->norm_done) {
        fprintf(stderr, "hk-run: an RMSNorm made in a projection's tail was not taken\n");
        return HK_ERROR_STATE;
    }
    int needs = norm_needs(s, a, b, c);
    float eps = s->model->hp.eps;
    if (!needs)
        return hk_rmsnorm(s->ctx, st, x, norm->view, s->xn, rows, n, eps);
    return hk_rmsnorm_q8_1(s->ctx, st, x, norm->view, needs == 2 ? s->xn : (hk_view){NULL, 0}, s->xq, rows, n, eps);
}

static hk_status add_bias(run_state *s, hk_stream *st, hk_view y, const run_weight *bias, uint32_t m)
{
    for (uint32_t t = 0; t < m; t++) {
        hk_view row = at(y, (uint64_t)t * bias->k * 4);
        hk_status r = hk_add(s->ctx, st, row, bias->view, row, bias->k);
        if (r != HK_OK)
            return r;
    }
    return HK_OK;
}

static int record_attention(run_state *s, hk_stream *st, uint32_t il, uint32_t m, const run_slots *io)
{
    hk_context *c = s->ctx;
    const run_hparams *hp = &s->model->hp;
    const run_layer *l = &s->model->layers[il];
    uint32_t e = hp->n_embd, q = hp->n_head * hp->head_dim;
    const run_weight *w[3] = {&l->wq, &l->wk, &l->wv};
    /* a token's RMSNorm inside each matvec that reads it, or once before them */
    int own_norm = in_matvec(s, m, w, 3, 1);
    if (!own_norm && !norm_made(s, &l->attn_norm))
        LAYER_CALL(norm_for(s, st, s->x, &l->attn_norm, m, e, &l->wq, &l->wk, &l->wv));
    /* a token's q, k and v side by side: those of one quantized type in one dispatch */
    hk_view q_out = s->q, k_out = m == 1 ? at(s->q, 4ull * q) : s->k,
            v_out = m == 1 ? at(s->q, 4ull * (q + hp->n_head_kv * hp->head_dim)) : s->v;
    hk_view out[3] = {q_out, k_out, v_out};
    hk_rope_desc rd = {0};
    if (l->q_norm.present && !s->qk_norm_apart) {
        rd.q_norm = l->q_norm.view;
        rd.k_norm = l->k_norm.view;
        rd.norm_eps = hp->eps;
    }
    rd.n_tokens = m;
    rd.n_heads = hp->n_head;
    rd.n_kv_heads = hp->n_head_kv;
    rd.head_dim = hp->head_dim;
    rd.neox = hp->rope_neox;
    rd.theta_base = hp->rope_base;
    rd.freq_scale = hp->rope_freq_scale;
    rd.kv = s->kv;
    hk_view factors = s->model->rope_freqs.present ? s->model->rope_freqs.view : (hk_view){NULL, 0};
    /* a token's RoPE and cache append in the projections' epilogue (hk_matvec_int8_qkv): GGUF's
     * normal pairs, nothing between the products and the rotation (no q or k norm, no bias), an f32
     * or f16 cache */
    int rope_in_qkv = !s->rope_apart && !own_norm && plain_rope(hp, l) &&
                      (s->kv.type == HK_TYPE_F32 || s->kv.type == HK_TYPE_F16) && fused(s, w[0], m) &&
                      fused(s, w[1], m) && fused(s, w[2], m);
    for (uint32_t i = 0; i < 3;) {
        uint32_t n = 1;
        while (fused(s, w[i], m) && i + n < 3 && w[i + n]->type == w[i]->type)
            n++;
        if (rope_in_qkv) {
            hk_view views[3];
            for (uint32_t j = 0; j < n; j++)
                views[j] = w[i + j]->view;
            uint32_t roles = ((1u << n) - 1) << i; /* HK_QKV_Q, _K, _V are bits 0, 1, 2 */
            LAYER_CALL(hk_matvec_int8_qkv(c, st, w[i]->type, roles, views, s->xq, e, &rd, io->positions, factors,
                                          q_out, s->k_cache[il], s->v_cache[il]));
        } else if (own_norm)
            LAYER_CALL(matvec_f32x(s, st, w + i, n, s->x, &l->attn_norm, HK_MATVEC_PLAIN, (hk_view){NULL, 0}, out[i]));
        else if (n == 1)
            LAYER_CALL(linear(s, st, w[i], s->xn, out[i], m));
        else {
            hk_view views[3];
            uint32_t rows[3];
            for (uint32_t j = 0; j < n; j++) {
                views[j] = w[i + j]->view;
                rows[j] = w[i + j]->rows;
            }
            LAYER_CALL(hk_matvec_int8_multi(c, st, w[i]->type, n, views, rows, s->xq, out[i], e));
        }
        i += n;
    }
    if (l->bq.present) {
        LAYER_CALL(add_bias(s, st, q_out, &l->bq, m));
        LAYER_CALL(add_bias(s, st, k_out, &l->bk, m));
        LAYER_CALL(add_bias(s, st, v_out, &l->bv, m));
    }
    /* Qwen3's q and k norms: inside the rope (the same bits), or dispatches of their own */
    if (l->q_norm.present && s->qk_norm_apart) {
        LAYER_CALL(hk_rmsnorm(c, st, q_out, l->q_norm.view, q_out, m * hp->n_head, hp->head_dim, hp->eps));
        LAYER_CALL(hk_rmsnorm(c, st, k_out, l->k_norm.view, k_out, m * hp->n_head_kv, hp->head_dim, hp->eps));
    }
    if (!rope_in_qkv)
        LAYER_CALL(hk_rope(c, st, &rd, q_out, k_out, v_out, io->positions, factors, q_out, s->k_cache[il],
                           s->v_cache[il]));
    hk_sdpa_desc sd = sdpa_desc(s, m);
    const run_weight *wo = &l->wo;
    int own_quant = in_matvec(s, m, &wo, 1, 0);
    /* the comparison form: a token's output straight into the O projection's Q8_1 input */
    int q8_1_out = !own_quant && s->attn_q8_1_out && fused(s, wo, m) && hp->head_dim % 32 == 0;
    if (q8_1_out)
        sd.out_type = HK_TYPE_Q8_1;
    LAYER_CALL(hk_sdpa_blk(c, st, &sd, s->q, s->k_cache[il], s->v_cache[il], q8_1_out ? s->xq : s->attn,
                           s->workspace, io->count));
    if (own_quant)
        LAYER_CALL(matvec_f32x(s, st, &wo, 1, s->attn, NULL, HK_MATVEC_ADD, s->x, s->x));
    else {
        if (!q8_1_out)
            LAYER_CALL(quantize_for(s, st, s->attn, (uint64_t)m * q, &l->wo, NULL, NULL));
        LAYER_CALL(linear_add(s, st, &l->wo, s->attn, s->xq, m, after_attention(s, il)));
    }
    return 0;
}

static int record_ffn(run_state *s, hk_stream *st, uint32_t il, uint32_t m)
{
    hk_context *c = s->ctx;
    const run_hparams *hp = &s->model->hp;
    const run_layer *l = &s->model->layers[il];
    uint32_t e = hp->n_embd, f = hp->n_ff;
    const run_weight *gate = &l->gate, *down = &l->down;
    int own_norm = l->up.type == l->gate.type && in_matvec(s, m, &gate, 1, 1);
    /* the comparison form: a token's gate and up writing the down projection's Q8_1 input */
    int glu_q8 = !own_norm && s->dense_glu_q8_1_out && fused(s, gate, m) && l->up.type == l->gate.type &&
                 fused(s, down, m) && f % 32 == 0 && !in_matvec(s, m, &down, 1, 0);
    if (own_norm)
        LAYER_CALL(matvec_f32x(s, st, &gate, 1, s->x, &l->ffn_norm, HK_MATVEC_GLU_SILU, l->up.view, s->ff_a));
    else {
        if (!norm_made(s, &l->ffn_norm))
            LAYER_CALL(norm_for(s, st, s->x, &l->ffn_norm, m, e, &l->gate, &l->up, NULL));
        if (glu_q8)
            LAYER_CALL(hk_matvec_int8_glu_q8_1(c, st, l->gate.type, l->gate.view, l->up.view, s->xq, s->ff_q, f, e,
                                               HK_GLU_SILU));
        else if (fused(s, &l->gate, m) && l->up.type == l->gate.type)
            LAYER_CALL(
                hk_matvec_int8_glu(c, st, l->gate.type, l->gate.view, l->up.view, s->xq, s->ff_a, f, e, HK_GLU_SILU));
        else {
            LAYER_CALL(linear(s, st, &l->gate, s->xn, s->ff_a, m));
            LAYER_CALL(linear(s, st, &l->up, s->xn, s->ff_b, m));
            LAYER_CALL(hk_swiglu(c, st, s->ff_a, s->ff_b, s->ff_a, m, f, f, HK_GLU_SILU));
        }
    }
    if (glu_q8)
        LAYER_CALL(linear_add(s, st, &l->down, s->ff_a, s->ff_q, m, after_ffn(s, il)));
    else if (in_matvec(s, m, &down, 1, 0))
        LAYER_CALL(matvec_f32x(s, st, &down, 1, s->ff_a, NULL, HK_MATVEC_ADD, s->x, s->x));
    else {
        LAYER_CALL(quantize_for(s, st, s->ff_a, (uint64_t)m * f, &l->down, NULL, NULL));
        LAYER_CALL(linear_add(s, st, &l->down, s->ff_a, s->xq, m, after_ffn(s, il)));
    }
    return 0;
}

static int record_moe(run_state *s, hk_stream *st, uint32_t il, uint32_t m)
{
    hk_context *c = s->ctx;
    const run_hparams *hp = &s->model->hp;
    const run_layer *l = &s->model->layers[il];
    uint32_t e = hp->n_embd, f = hp->n_ff_exp, n_exp = hp->n_expert, top_k = hp->n_expert_used, slots = m * top_k;
    if (!norm_made(s, &l->ffn_norm))
        LAYER_CALL(norm_for(s, st, s->x, &l->ffn_norm, m, e, &l->gate_exps, &l->router, NULL));
    LAYER_CALL(linear(s, st, &l->router, s->xn, s->router_logits, m));
    LAYER_CALL(hk_moe_route(c, st, s->router_logits, s->expert_ids, s->expert_weights, m, n_exp, top_k, 1));
    if (s->f32_activations) {
        /* f32 activations: each token's slots through the f32 expert gather */
        hk_moe_shape up = {n_exp, f, e, top_k, 0}, down = {n_exp, e, f, top_k, 1};
        for (uint32_t t = 0; t < m; t++) {
            hk_view ids = at(s->expert_ids, 4ull * t * top_k), xn = at(s->xn, 4ull * t * e),
                    a = at(s->ff_a, 4ull * t * top_k * f), b = at(s->ff_b, 4ull * t * top_k * f),
                    out = at(s->moe_out, 4ull * t * top_k * e);
            LAYER_CALL(hk_moe_matvec(c, st, l->gate_exps.type, l->gate_exps.view, xn, ids, a, &up));
            LAYER_CALL(hk_moe_matvec(c, st, l->up_exps.type, l->up_exps.view, xn, ids, b, &up));
            LAYER_CALL(hk_swiglu(c, st, a, b, a, top_k, f, f, HK_GLU_SILU));
            LAYER_CALL(hk_moe_matvec(c, st, l->down_exps.type, l->down_exps.view, a, ids, out, &down));
        }
    } else if (m == 1) {
        hk_moe_shape up = {n_exp, f, e, top_k, 0}, down = {n_exp, e, f, top_k, 1};
        /* the experts' gate and up writing the down projection's Q8_1 input themselves */
        int glu_q8 = !s->moe_glu_quantizer_apart && l->up_exps.type == l->gate_exps.type && f % 32 == 0;
        if (glu_q8 && s->moe_glu_ranked) /* no barrier after the routing: this reads none of its outputs */
            LAYER_CALL(hk_moe_matvec_int8_glu_q8_1_ranked(c, st, l->gate_exps.type, l->gate_exps.view,
                                                          l->up_exps.view, s->xq, s->router_logits, s->ff_q, &up,
                                                          top_k, HK_GLU_SILU));
        else if (glu_q8)
            LAYER_CALL(hk_moe_matvec_int8_glu_q8_1(c, st, l->gate_exps.type, l->gate_exps.view, l->up_exps.view,
                                                   s->xq, s->expert_ids, s->ff_q, &up, HK_GLU_SILU));
        else if (l->up_exps.type == l->gate_exps.type)
            LAYER_CALL(hk_moe_matvec_int8_glu(c, st, l->gate_exps.type, l->gate_exps.view, l->up_exps.view, s->xq,
                                              s->expert_ids, s->ff_a, &up, HK_GLU_SILU));
        else {
            LAYER_CALL(hk_moe_matvec_int8(c, st, l->gate_exps.type, l->gate_exps.view, s->xq, s->expert_ids, s->ff_a,
                                          &up));
            LAYER_CALL(hk_moe_matvec_int8(c, st, l->up_exps.type, l->up_exps.view, s->xq, s->expert_ids, s->ff_b,
                                          &up));
            LAYER_CALL(hk_swiglu(c, st, s->ff_a, s->ff_b, s->ff_a, slots, f, f, HK_GLU_SILU));
        }
        if (!glu_q8)
            LAYER_CALL(hk_quantize_q8_1(c, st, s->ff_a, s->xq, slots * f));
        /* the down projection with the weighted combine and the residual: the layer's last dispatch */
        LAYER_CALL(hk_moe_matvec_int8_combine(c, st, l->down_exps.type, l->down_exps.view, glu_q8 ? s->ff_q : s->xq,
                                              s->expert_ids, s->expert_weights, s->x, s->x, &down, top_k));
        return 0;
    } else {
        hk_mmq_id_shape up = {n_exp, f, e, slots, top_k}, down = {n_exp, e, f, slots, 1};
        LAYER_CALL(hk_moe_expert_rows(c, st, s->expert_ids, s->expert_offsets, s->expert_slots, s->expert_dropped,
                                      slots, n_exp));
        LAYER_CALL(hk_mmq_id(c, st, l->gate_exps.type, l->gate_exps.view, s->xq, s->expert_offsets, s->expert_slots,
                             s->ff_a, &up));
        LAYER_CALL(hk_mmq_id(c, st, l->up_exps.type, l->up_exps.view, s->xq, s->expert_offsets, s->expert_slots,
                             s->ff_b, &up));
        LAYER_CALL(hk_swiglu(c, st, s->ff_a, s->ff_b, s->ff_a, slots, f, f, HK_GLU_SILU));
        LAYER_CALL(hk_quantize_q8_1(c, st, s->ff_a, s->xq, slots * f));
        LAYER_CALL(hk_mmq_id(c, st, l->down_exps.type, l->down_exps.view, s->xq, s->expert_offsets, s->expert_slots,
                             s->moe_out, &down));
    }
    LAYER_CALL(hk_moe_combine(c, st, s->moe_out, s->expert_weights, s->x, s->x, m, top_k, e));
    return 0;
}

static int record_pass(run_state *s, hk_stream *st, uint32_t m, run_tail tail, const run_slots *io);

int run_record(run_state *s, hk_stream *st, uint32_t m, run_tail tail, const run_slots *io)
{
    /* the projections' tails swap xq and its spare as they go: every pass starts from the same pair */
    hk_view xq = s->xq, spare = s->xq_spare;
    int rc = record_pass(s, st, m, tail, io);
    s->xq = xq;
    s->xq_spare = spare;
    s->norm_done = NULL;
    return rc;
}

static int record_pass(run_state *s, hk_stream *st, uint32_t m, run_tail tail, const run_slots *io)
{
    hk_context *c = s->ctx;
    const run_model *md = s->model;
    const run_hparams *hp = &md->hp;
    if (m < 1 || m > s->batch) {
        fprintf(stderr, "hk-run: a graph of %u tokens (at most %u)\n", m, s->batch);
        return -1;
    }
    STEP_CALL(hk_get_rows(c, st, md->tok_embd.type, md->tok_embd.view, io->tokens, s->x, m, hp->n_vocab, hp->n_embd));
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (record_attention(s, st, il, m, io) != 0)
            return -1;
        if ((hp->n_expert ? record_moe : record_ffn)(s, st, il, m) != 0)
            return -1;
    }
    /* the head, for the last token only */
    if (!norm_made(s, &md->output_norm))
        STEP_CALL(norm_for(s, st, at(s->x, (uint64_t)(m - 1) * hp->n_embd * 4), &md->output_norm, 1, hp->n_embd,
                           &md->output, NULL, NULL));
    STEP_CALL(linear(s, st, &md->output, s->xn, s->logits, 1));
    if (tail == RUN_TAIL_PROBS) {
        STEP_CALL(hk_softmax(c, st, s->logits, s->logits, 1, hp->n_vocab, s->temperature));
        STEP_CALL(hk_copy(c, st, s->logits, s->io_out, (uint64_t)hp->n_vocab * 4));
        return 0;
    }
    STEP_CALL(hk_argmax(c, st, s->logits, io->pick, 1, hp->n_vocab));
    if (tail == RUN_TAIL_LOGITS)
        STEP_CALL(hk_copy(c, st, s->logits, s->io_out, (uint64_t)hp->n_vocab * 4));
    return 0;
}

/* ---- graphs ---- */

/* the slots of a batch (step 0 of a plain graph), or of step i of a chain */
static run_slots slots_of(const run_state *s, uint32_t steps, uint32_t i)
{
    if (steps == 1)
        return (run_slots){s->io_tokens, s->io_positions, s->io_count, s->io_next};
    return (run_slots){at(s->io_tokens, 4ull * i), at(s->io_positions, 4ull * i), at(s->io_count, 4ull * i),
                       at(s->io_tokens, 4ull * (i + 1))};
}

int run_record_graph(run_state *s, hk_stream *st, uint32_t m, uint32_t steps, run_tail tail)
{
    if (steps > 1 && (m != 1 || tail != RUN_TAIL_ARGMAX || steps > s->chain)) {
        fprintf(stderr, "hk-run: a chain of %u steps takes single greedy tokens, at most %u\n", steps, s->chain);
        return -1;
    }
    for (uint32_t i = 0; i < steps; i++) {
        run_slots io = slots_of(s, steps, i);
        if (run_record(s, st, m, tail, &io) != 0)
            return -1;
    }
    return 0;
}

int run_graph_build(run_state *s, run_graph *g, uint32_t m, uint32_t steps, run_tail tail)
{
    memset(g, 0, sizeof *g);
    g->m = m;
    g->steps = steps;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = s->pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if (vkAllocateCommandBuffers(s->device, &ai, &g->cmd) != VK_SUCCESS || vkBeginCommandBuffer(g->cmd, &bi) != VK_SUCCESS) {
        fprintf(stderr, "hk-run: cannot allocate a command buffer\n");
        return -1;
    }
    hk_caps caps;
    hk_context_caps(s->ctx, &caps);
    uint32_t timestamps = MAX_TIMESTAMPS + (s->profile ? s->profile->capacity : 0);
    hk_status r = caps.timestamps ? hk_stream_wrap_timed(s->ctx, g->cmd, timestamps, &g->stream)
                                  : hk_stream_wrap(s->ctx, g->cmd, &g->stream);
    if (r != HK_OK) {
        fprintf(stderr, "hk-run: %s\n", hk_last_error());
        return -1;
    }
    if (s->profile)
        s->profile->marks = 0;
    if (s->profile && !caps.timestamps) {
        fprintf(stderr, "hk-run: a profile needs GPU timestamps, which this device lacks\n");
        return -1;
    }
    if (caps.timestamps)
        CALL(hk_stream_timestamp(g->stream, &g->first_timestamp));
    if (run_record_graph(s, g->stream, m, steps, tail) != 0)
        return -1;
    if (caps.timestamps)
        CALL(hk_stream_timestamp(g->stream, &g->last_timestamp));
    g->kernels = hk_stream_kernel_count(g->stream);
    g->barriers = hk_stream_barrier_count(g->stream);
    /* the host reads io after the fence: make the graph's writes visible to it */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(g->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    if (vkEndCommandBuffer(g->cmd) != VK_SUCCESS) {
        fprintf(stderr, "hk-run: cannot end the command buffer\n");
        return -1;
    }
    return 0;
}

int run_graph_exec(run_state *s, run_graph *g, const uint32_t *tokens, uint32_t first, double *gpu_ms)
{
    uint32_t *count = (uint32_t *)(s->io_map + s->io_count.offset), *tok = (uint32_t *)(s->io_map + s->io_tokens.offset),
             *pos = (uint32_t *)(s->io_map + s->io_positions.offset);
    for (uint32_t i = 0; i < g->m; i++) {
        tok[i] = tokens[i];
        pos[i] = first + i;
    }
    *count = first + g->m;
    /* a chain's positions and key counts do not depend on its tokens: all written now */
    for (uint32_t i = 1; i < g->steps; i++) {
        pos[i] = first + i;
        count[i] = first + i + 1;
    }
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &g->cmd;
    if (vkQueueSubmit(s->queue, 1, &si, s->fence) != VK_SUCCESS ||
        vkWaitForFences(s->device, 1, &s->fence, VK_TRUE, UINT64_MAX) != VK_SUCCESS ||
        vkResetFences(s->device, 1, &s->fence) != VK_SUCCESS) {
        fprintf(stderr, "hk-run: the graph's submit failed (device lost?)\n");
        return -1;
    }
    if (gpu_ms) {
        *gpu_ms = 0;
        hk_stream_elapsed_ms(g->stream, g->first_timestamp, g->last_timestamp, gpu_ms);
    }
    return 0;
}

int run_graph_warm(run_state *s, run_graph *g, const uint32_t *tokens, uint32_t first, uint32_t at_least)
{
    double busy = 0;
    for (uint32_t i = 0; i < at_least || (busy > 0 && busy < RUN_WARM_MS && i < RUN_WARM_MAX); i++) {
        double t;
        if (run_graph_exec(s, g, tokens, first, &t) != 0)
            return -1;
        busy += t;
    }
    return 0;
}

void run_graph_free(run_state *s, run_graph *g)
{
    hk_stream_destroy(g->stream);
    if (g->cmd)
        vkFreeCommandBuffers(s->device, s->pool, 1, &g->cmd);
    memset(g, 0, sizeof *g);
}

uint32_t run_next_token(const run_state *s) { return *(const uint32_t *)(s->io_map + s->io_next.offset); }

const uint32_t *run_chain_tokens(const run_state *s) { return (const uint32_t *)(s->io_map + s->io_tokens.offset) + 1; }

const float *run_out(const run_state *s) { return (const float *)(s->io_map + s->io_out.offset); }

/* ---- the profile ---- */

/* A call's kind for the breakdown: the function called and, where it names one, the weight it
 * reads ("linear wv", "hk_matvec_int8_multi"). */
static void call_kind(const char *call, char *kind, size_t size)
{
    size_t n = strcspn(call, "(");
    const char *w = strstr(call, "&l->");
    w = w ? w + 4 : strstr(call, "&md->") ? strstr(call, "&md->") + 5 : NULL;
    if (!w && strncmp(call, "hk_", 3)) { /* hk-run's helpers: their third argument is the weight */
        w = call + n;
        for (int comma = 0; w && comma < 2; comma++)
            w = strchr(w + 1, ',');
        w = w ? w + 1 + strspn(w + 1, " &") : NULL;
    }
    if (w && n < 24)
        snprintf(kind, size, "%.*s %.*s", (int)n, call, (int)strcspn(w, ",)."), w);
    else
        snprintf(kind, size, "%.*s", (int)n, call);
}

typedef struct kind_time {
    char kind[64];
    uint32_t calls;
    double ms;
} kind_time;

static int cmp_kind(const void *a, const void *b)
{
    double x = ((const kind_time *)a)->ms, y = ((const kind_time *)b)->ms;
    return x > y ? -1 : x < y;
}

static int cmp_ms(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The graph of m tokens at position first again, with a GPU timestamp after every call: per kind
 * of call, the calls and the GPU time (each call's median over the replays, from the timestamp
 * before it, so a call's time includes its wait at the barrier before it). Timestamps between
 * calls let no two calls overlap, so the sum runs above the graph's own time (whole_ms). */
#define PROFILE_CALLS 4096u
#define PROFILE_WARMUP 4u
int run_profile(run_state *s, uint32_t m, uint32_t first, uint32_t replays, uint32_t dispatches, double whole_ms)
{
    run_profile_marks p = {PROFILE_CALLS, 0, calloc(PROFILE_CALLS, sizeof(char *)),
                           calloc(PROFILE_CALLS, sizeof(uint32_t))};
    double *ms = calloc((size_t)replays * PROFILE_CALLS, sizeof *ms);
    double *one = calloc(replays, sizeof *one);
    kind_time *kinds = calloc(PROFILE_CALLS, sizeof *kinds);
    uint32_t *tokens = calloc(m, sizeof *tokens);
    run_graph g;
    memset(&g, 0, sizeof g);
    int rc = -1;
    uint32_t n_kinds = 0;
    double total = 0;
    if (!p.call || !p.timestamp || !ms || !one || !kinds || !tokens || !replays) {
        fprintf(stderr, "hk-run: the profile: out of memory\n");
        goto done;
    }
    for (uint32_t i = 0; i < m; i++)
        tokens[i] = (1 + i) % s->model->hp.n_vocab; /* ids in the vocabulary whatever its size */
    s->profile = &p;
    int built = run_graph_build(s, &g, m, 1, RUN_TAIL_ARGMAX);
    s->profile = NULL;
    if (built != 0)
        goto done;
    for (uint32_t r = 0; r < PROFILE_WARMUP + replays; r++) {
        if (run_graph_exec(s, &g, tokens, first, NULL) != 0)
            goto done;
        for (uint32_t i = 0; r >= PROFILE_WARMUP && i < p.marks; i++) {
            uint32_t from = i ? p.timestamp[i - 1] : g.first_timestamp;
            double *t = &ms[(size_t)(r - PROFILE_WARMUP) * PROFILE_CALLS + i];
            if (hk_stream_elapsed_ms(g.stream, from, p.timestamp[i], t) != HK_OK) {
                fprintf(stderr, "hk-run: the profile: %s\n", hk_last_error());
                goto done;
            }
        }
    }
    for (uint32_t i = 0; i < p.marks; i++) {
        for (uint32_t r = 0; r < replays; r++)
            one[r] = ms[(size_t)r * PROFILE_CALLS + i];
        qsort(one, replays, sizeof *one, cmp_ms);
        char kind[64];
        call_kind(p.call[i], kind, sizeof kind);
        uint32_t k = 0;
        while (k < n_kinds && strcmp(kinds[k].kind, kind))
            k++;
        if (k == n_kinds)
            snprintf(kinds[n_kinds++].kind, sizeof kinds->kind, "%s", kind);
        kinds[k].calls++;
        kinds[k].ms += one[replays / 2];
        total += one[replays / 2];
    }
    qsort(kinds, n_kinds, sizeof *kinds, cmp_kind);
    printf("  by call, a timestamp after each (%u calls, %u dispatches; sum of medians %.4f ms against the "
           "graph's %.4f):\n", p.marks, dispatches, total, whole_ms);
    for (uint32_t k = 0; k < n_kinds; k++)
        printf("    %-40s %4u calls %9.4f ms %5.1f%%\n", kinds[k].kind, kinds[k].calls, kinds[k].ms,
               total > 0 ? 100.0 * kinds[k].ms / total : 0.0);
    rc = 0;
done:
    run_graph_free(s, &g);
    free(p.call);
    free(p.timestamp);
    free(ms);
    free(one);
    free(kinds);
    free(tokens);
    return rc;
}

const run_form run_forms[] = {
    {"f32x", "each RMSNorm and quantization inside its matvecs (hk_matvec_int8_f32x)",
     offsetof(run_state, quantize_in_matvec), RUN_FORM_ANY},
    {"quant-in-matvec", "each quantization of the attention's and the gated activation's output inside the matvec "
     "that reads it (hk_matvec_int8_f32x, no norm)", offsetof(run_state, quant_in_matvec), RUN_FORM_ANY},
    {"attn-q8_1", "the attention output written as Q8_1 by hk_sdpa_blk", offsetof(run_state, attn_q8_1_out),
     RUN_FORM_ANY},
    {"glu-q8_1", "the dense gated activation written as Q8_1 by its GLU", offsetof(run_state, dense_glu_q8_1_out),
     RUN_FORM_DENSE_FFN},
    {"moe-glu-quantize", "the experts' gated activation quantized by a dispatch of its own",
     offsetof(run_state, moe_glu_quantizer_apart), RUN_FORM_EXPERTS},
    {"qk-norm", "the q and k norms as dispatches of their own", offsetof(run_state, qk_norm_apart), RUN_FORM_QK_NORM},
    {"moe-glu-ranked", "the experts' GLU ranking its experts from the logits, the routing beside it",
     offsetof(run_state, moe_glu_ranked), RUN_FORM_EXPERTS},
    {"norm-tail", "each RMSNorm after a projection in the projection's tail (hk_matvec_int8_add_norm)",
     offsetof(run_state, norm_in_tail), RUN_FORM_ANY},
    {"rope-apart", "RoPE and the cache append by hk_rope after the projections", offsetof(run_state, rope_apart),
     RUN_FORM_NORMAL_ROPE},
};
const size_t run_form_count = sizeof run_forms / sizeof run_forms[0];

const run_form *run_form_find(const char *tag)
{
    for (size_t i = 0; i < run_form_count; i++)
        if (!strcmp(run_forms[i].tag, tag))
            return &run_forms[i];
    return NULL;
}

int run_form_applies(const run_form *f, const run_model *m)
{
    switch (f->needs) {
    case RUN_FORM_DENSE_FFN: return !m->hp.n_expert;
    case RUN_FORM_EXPERTS: return m->hp.n_expert != 0;
    case RUN_FORM_QK_NORM: return m->layers[0].q_norm.present;
    case RUN_FORM_NORMAL_ROPE: return plain_rope(&m->hp, &m->layers[0]);
    default: return 1;
    }
}

void run_form_set(run_state *s, const run_form *f, int on)
{
    for (size_t i = 0; i < run_form_count; i++)
        if (!f || f == &run_forms[i])
            *(int *)((char *)s + run_forms[i].flag) = f ? on : 0;
}

uint64_t run_step_weight_bytes(const run_model *m)
{
    const run_hparams *hp = &m->hp;
    uint64_t sum = m->output_norm.bytes + m->output.bytes + m->tok_embd.bytes / hp->n_vocab;
    uint32_t per_layer = sizeof(run_layer) / sizeof(run_weight);
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        const run_weight *w = (const run_weight *)&m->layers[i];
        for (uint32_t j = 0; j < per_layer; j++)
            if (w[j].present)
                sum += w[j].experts > 1 ? w[j].bytes / w[j].experts * hp->n_expert_used : w[j].bytes;
    }
    return sum;
}

void run_print_step(const run_model *m, const run_graph *step, double gpu_ms, double copy_gbs)
{
    double bytes = (double)run_step_weight_bytes(m);
    printf("decode step: %u dispatches and %u barriers per token, %.1f MB of weights per token", step->kernels,
           step->barriers, bytes / 1e6);
    if (copy_gbs > 0 && gpu_ms > 0)
        printf("; copy %.1f GB/s: %.1f%% of the roofline (the weights at copy speed over the GPU time)", copy_gbs,
               100.0 * bytes / (copy_gbs * 1e9) / (gpu_ms * 1e-3));
    printf("\n");
}
