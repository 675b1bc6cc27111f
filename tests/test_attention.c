/* Attention beyond its kernel-table rows (src/cases/cases_attention.c: hk_sdpa_blk and hk_rope on every
 * test shape in every placement, run by test_kernels): one decode step recorded once into an
 * engine's command buffer and replayed token after token, the workspace size's independence of
 * seq_k, flash-decoding's one-dispatch combine from any workspace contents and over calls of
 * changing counts in one stream, every variant its tuning hooks select, and every argument
 * check. */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200112L /* setenv */
#endif
#include "cases.h"
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

/* rope's angles are good to ~1e-6 rad up to position 2^24 (include/hkernel.h) */
#define GATE_ROPE 1e-5

extern const hk_case hk_case_sdpa; /* src/cases/cases_attention.c */

static hk_context *ctx;

/* An input at offset `offset` of its own buffer, flush against the buffer's end. */
static hk_view input_flush(const void *data, uint64_t bytes, uint64_t offset)
{
    hk_buffer *b = hk_test_buffer(ctx, offset + bytes, NULL);
    if (hk_buffer_fill(b, 0, (offset + bytes) / 4 * 4, HK_POISON_WORD) != HK_OK ||
        hk_buffer_upload(b, offset, data, bytes) != HK_OK)
        hk_check(0, "upload", "%s", hk_last_error());
    return (hk_view){b, offset};
}

/* ---- one decode step, recorded once, replayed for three tokens --------------------------------- */

typedef struct vk_fns {
    PFN_vkCreateCommandPool create_pool;
    PFN_vkDestroyCommandPool destroy_pool;
    PFN_vkAllocateCommandBuffers allocate;
    PFN_vkBeginCommandBuffer begin;
    PFN_vkEndCommandBuffer end;
    PFN_vkQueueSubmit submit;
    PFN_vkQueueWaitIdle wait_idle;
} vk_fns;

/* The engine's flow: its own command buffer, hk_rope then hk_sdpa_blk recorded into it once, the
 * position and the key count read on the device; per token the engine only writes q, k, v (its
 * earlier kernels would), the position and the count, and submits the same command buffer. */
static void test_replay(void)
{
    const uint32_t H = 8, HKV = 2, D = 64, CAP = 256, FIRST = 100, TOKENS = 3;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
    if (hk_context_vulkan(ctx, NULL, NULL, &device, &queue, &family) != HK_OK) {
        hk_check(0, "replay: context objects", "%s", hk_last_error());
        return;
    }
    vk_fns vk = {
        (PFN_vkCreateCommandPool)vkGetDeviceProcAddr(device, "vkCreateCommandPool"),
        (PFN_vkDestroyCommandPool)vkGetDeviceProcAddr(device, "vkDestroyCommandPool"),
        (PFN_vkAllocateCommandBuffers)vkGetDeviceProcAddr(device, "vkAllocateCommandBuffers"),
        (PFN_vkBeginCommandBuffer)vkGetDeviceProcAddr(device, "vkBeginCommandBuffer"),
        (PFN_vkEndCommandBuffer)vkGetDeviceProcAddr(device, "vkEndCommandBuffer"),
        (PFN_vkQueueSubmit)vkGetDeviceProcAddr(device, "vkQueueSubmit"),
        (PFN_vkQueueWaitIdle)vkGetDeviceProcAddr(device, "vkQueueWaitIdle"),
    };
    hk_rng rng = {99};
    hk_case_kv cache;
    hk_case_kv_create(&cache, HK_TYPE_F16, CAP, HKV, D, 1, 0);
    float row[64];
    for (uint32_t h = 0; h < HKV; h++)
        for (uint32_t j = 0; j < FIRST; j++) {
            hk_rng_fill(&rng, row, D, -1.0f, 1.0f);
            hk_case_kv_put(&cache, 0, h, j, row);
            hk_rng_fill(&rng, row, D, -1.0f, 1.0f);
            hk_case_kv_put(&cache, 1, h, j, row);
        }
    hk_view kc = input_flush(cache.k, cache.bytes, 0), vc = input_flush(cache.v, cache.bytes, 16);
    hk_buffer *io = hk_test_buffer(ctx, 4096 + 2 * 1024, NULL);
    hk_view qv = {io, 0}, kv = {io, 2048}, vv = {io, 2560}, pos = {io, 3072}, count = {io, 3076};
    hk_test_out o = hk_test_out_create(ctx, H * D);
    hk_rope_desc rd = {.n_tokens = 1, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .neox = 1, .theta_base = 1e6f,
                       .freq_scale = 1.0f, .kv = cache.kv};
    hk_sdpa_desc sd = {.n_q = 1, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .seq_k = 1,
                       .scale = 0.125f, .kv = cache.kv};
    uint64_t ws_bytes = 0;
    hk_sdpa_workspace_bytes(ctx, &sd, &ws_bytes);
    hk_view ws = {ws_bytes ? hk_test_buffer(ctx, ws_bytes, NULL) : NULL, 0};

    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = family};
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO}; /* replayable */
    hk_stream *s = NULL;
    hk_status st = HK_ERROR_VULKAN;
    if (vk.create_pool(device, &pi, NULL, &pool) == VK_SUCCESS) {
        ai.commandPool = pool;
        if (vk.allocate(device, &ai, &cmd) == VK_SUCCESS && vk.begin(cmd, &bi) == VK_SUCCESS)
            st = hk_stream_wrap(ctx, cmd, &s);
    }
    if (st == HK_OK) /* q rotated in place, then attended */
        st = hk_rope(ctx, s, &rd, qv, kv, vv, pos, (hk_view){NULL, 0}, qv, kc, vc);
    if (st == HK_OK)
        st = hk_sdpa_blk(ctx, s, &sd, qv, kc, vc, hk_test_out_view(&o), ws, count);
    hk_check_status("replay: record rope + sdpa once", st, HK_OK, NULL);
    if (st == HK_OK && vk.end(cmd) != VK_SUCCESS)
        st = HK_ERROR_VULKAN;

    uint8_t *k_model = malloc(cache.bytes), *v_model = malloc(cache.bytes);
    memcpy(k_model, cache.k, cache.bytes);
    memcpy(v_model, cache.v, cache.bytes);
    uint8_t *k_image = malloc(cache.bytes), *v_image = malloc(cache.bytes);
    for (uint32_t t = 0; t < TOKENS && st == HK_OK; t++) {
        uint32_t p = FIRST + t, n = p + 1;
        float q[8 * 64], k[2 * 64], v[2 * 64], q_ref[8 * 64], k_ref[2 * 64], q_got[8 * 64];
        hk_rng_fill(&rng, q, H * D, -2.0f, 2.0f);
        hk_rng_fill(&rng, k, HKV * D, -1.0f, 1.0f);
        hk_rng_fill(&rng, v, HKV * D, -1.0f, 1.0f);
        memcpy(q_ref, q, sizeof q);
        memcpy(k_ref, k, sizeof k);
        hk_ref_rope(q_ref, &p, 1, H, D, D, 1, 1e6f, 1.0f, NULL);
        hk_ref_rope(k_ref, &p, 1, HKV, D, D, 1, 1e6f, 1.0f, NULL);
        hk_test_out_poison(&o);
        if (hk_buffer_upload(io, qv.offset, q, sizeof q) != HK_OK || hk_buffer_upload(io, kv.offset, k, sizeof k) ||
            hk_buffer_upload(io, vv.offset, v, sizeof v) || hk_buffer_upload(io, pos.offset, &p, 4) ||
            hk_buffer_upload(io, count.offset, &n, 4)) {
            hk_check(0, "replay: upload", "%s", hk_last_error());
            break;
        }
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        if (vk.submit(queue, 1, &si, VK_NULL_HANDLE) != VK_SUCCESS || vk.wait_idle(queue) != VK_SUCCESS) {
            hk_check(0, "replay: submit", NULL);
            break;
        }
        char name[96];
        snprintf(name, sizeof name, "replay token %u (position %u, %u keys)", t, p, n);
        /* rope: q rotated in place, the cache rows at p */
        hk_buffer_download(io, qv.offset, q_got, sizeof q_got);
        char label[160];
        snprintf(label, sizeof label, "%s: q rotated", name);
        hk_check_close(label, q_got, q_ref, H * D, HK_CASE_GATE_ROPE);
        hk_buffer_download(kc.buffer, kc.offset, k_image, cache.bytes);
        hk_buffer_download(vc.buffer, vc.offset, v_image, cache.bytes);
        uint32_t bad = 0;
        double worst = 0.0;
        for (uint32_t h = 0; h < HKV; h++) {
            bad += hk_case_kv_row_mismatches(&cache, k_image, 0, h, p, k_ref + h * D, &worst);
            bad += hk_case_kv_row_mismatches(&cache, v_image, 1, h, p, v + h * D, &worst);
            uint64_t ko = hk_case_kv_row(&cache, 0, h, p), vo = hk_case_kv_row(&cache, 1, h, p);
            memcpy(k_model + ko, k_image + ko, D * 2);
            memcpy(v_model + vo, v_image + vo, D * 2);
        }
        snprintf(label, sizeof label, "%s: cache rows", name);
        hk_check(bad == 0 && memcmp(k_model, k_image, cache.bytes) == 0 &&
                     memcmp(v_model, v_image, cache.bytes) == 0,
                 label, "%u values off; rest of the cache unchanged: %d", bad,
                 memcmp(k_model, k_image, cache.bytes) == 0 && memcmp(v_model, v_image, cache.bytes) == 0);
        /* attention over the n keys the cache holds now, with the rotated q */
        float *kp, *vp, ref[8 * 64];
        hk_case_kv_pack(&cache, k_image, v_image, n, &kp, &vp);
        hk_ref_sdpa(q_got, kp, vp, ref, 1, H, HKV, n, D, sd.scale, 0);
        snprintf(label, sizeof label, "%s: attention", name);
        hk_check_close(label, hk_test_out_read(&o, label), ref, H * D, HK_GATE_F32);
        free(kp);
        free(vp);
    }
    if (st != HK_OK)
        hk_check(0, "replay", "%s", hk_last_error());
    hk_stream_destroy(s);
    if (pool)
        vk.destroy_pool(device, pool, NULL);
    free(k_model);
    free(v_model);
    free(k_image);
    free(v_image);
    hk_test_out_destroy(&o);
    hk_buffer_destroy(io);
    hk_buffer_destroy(ws.buffer);
    hk_buffer_destroy(kc.buffer);
    hk_buffer_destroy(vc.buffer);
    hk_case_kv_destroy(&cache);
}

/* ---- argument checks -------------------------------------------------------------------------- */

#define OUT_FLOATS (4 * 8 * 64)
static hk_test_out err_out;

/* one failing call: its status, its message, and no write */
static void expect(const char *name, hk_status got, hk_status want, const char *needle)
{
    hk_check_status(name, got, want, needle);
    uint32_t bad = 0;
    const float *o = hk_test_out_read(&err_out, name);
    for (size_t i = 0; i < err_out.n; i++) {
        uint32_t w;
        memcpy(&w, &o[i], 4);
        bad += w != HK_POISON_WORD;
    }
    char label[260];
    snprintf(label, sizeof label, "%s wrote nothing", name);
    hk_check(bad == 0, label, "%u words changed", bad);
    hk_test_out_poison(&err_out);
}

static void test_errors(void)
{
    const uint32_t H = 8, HKV = 2, D = 64, CAP = 32;
    hk_case_kv cache;
    hk_case_kv_create(&cache, HK_TYPE_F16, CAP, HKV, D, 0, 0);
    hk_rng rng = {5};
    float q[4 * 8 * 64], row[64];
    hk_rng_fill(&rng, q, 4 * H * D, -1, 1);
    for (uint32_t h = 0; h < HKV; h++)
        for (uint32_t j = 0; j < CAP; j++) {
            hk_rng_fill(&rng, row, D, -1, 1);
            hk_case_kv_put(&cache, 0, h, j, row);
            hk_case_kv_put(&cache, 1, h, j, row);
        }
    hk_view qv = input_flush(q, sizeof q, 0);
    hk_view kv = input_flush(cache.k, cache.bytes, 0), vv = input_flush(cache.v, cache.bytes, 0);
    err_out = hk_test_out_create(ctx, OUT_FLOATS);
    hk_view ov = hk_test_out_view(&err_out);
    hk_sdpa_desc good = {.n_q = 1, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .seq_k = 20, .scale = 0.125f,
                         .kv = cache.kv};
    uint64_t ws_bytes = 0;
    hk_sdpa_workspace_bytes(ctx, &good, &ws_bytes);
    hk_view ws = {hk_test_buffer(ctx, ws_bytes + 8, NULL), 0};
    hk_view counter = input_flush(&(uint32_t){20}, 4, 0);
    hk_view none = {NULL, 0};
    hk_check_status("sdpa: the valid call", hk_sdpa_blk(ctx, NULL, &good, qv, kv, vv, ov, ws, none), HK_OK, NULL);
    hk_test_out_poison(&err_out);

    hk_sdpa_desc d = good;
#define SDPA_EXPECT(name, desc_change, call_ws, call_counter, status, needle)                                          \
    do {                                                                                                               \
        d = good;                                                                                                      \
        desc_change;                                                                                                   \
        expect(name, hk_sdpa_blk(ctx, NULL, &d, qv, kv, vv, ov, call_ws, call_counter), status, needle);               \
    } while (0)
    SDPA_EXPECT("sdpa: heads not divisible", d.n_heads = 7, ws, none, HK_ERROR_INVALID_ARGUMENT,
                "n_heads=7 is not a multiple of n_kv_heads=2");
    SDPA_EXPECT("sdpa: n_q zero", d.n_q = 0, ws, none, HK_ERROR_INVALID_ARGUMENT, "must all be positive");
    SDPA_EXPECT("sdpa: row stride smaller than a row", d.kv.k_row_stride = 64, ws, none, HK_ERROR_INVALID_ARGUMENT,
                "smaller than one row");
    SDPA_EXPECT("sdpa: heads overlap", d.kv.v_head_stride = 1024, ws, none, HK_ERROR_INVALID_ARGUMENT,
                "make rows of different heads overlap");
    SDPA_EXPECT("sdpa: stride off the type's alignment", d.kv.k_row_stride = 129, ws, none, HK_ERROR_INVALID_ARGUMENT,
                "must be multiples of 2");
    SDPA_EXPECT("sdpa: causal with more queries than keys", (d.causal = 1, d.n_q = 4, d.seq_k = 3), ws, none,
                HK_ERROR_INVALID_ARGUMENT, "needs seq_k >= n_q");
    SDPA_EXPECT("sdpa: causal with more queries than the capacity", (d.causal = 1, d.n_q = 40), ws, counter,
                HK_ERROR_INVALID_ARGUMENT, "kv.capacity=32");
    SDPA_EXPECT("sdpa: seq_k zero", d.seq_k = 0, ws, none, HK_ERROR_INVALID_ARGUMENT, "seq_k=0 must be in 1..kv.capacity=32");
    SDPA_EXPECT("sdpa: seq_k past the capacity", d.seq_k = 33, ws, none, HK_ERROR_INVALID_ARGUMENT, "seq_k=33");
    SDPA_EXPECT("sdpa: scale not finite", d.scale = NAN, ws, none, HK_ERROR_INVALID_ARGUMENT, "scale=nan is not finite");
    SDPA_EXPECT("sdpa: unsupported cache type", d.kv.type = HK_TYPE_Q4_K, ws, none, HK_ERROR_UNSUPPORTED,
                "kv.type=q4_k (2) is not a KV-cache type");
    SDPA_EXPECT("sdpa: head_dim off the Q8_0 block", (d.kv.type = HK_TYPE_Q8_0, d.head_dim = 48), ws, none,
                HK_ERROR_INVALID_ARGUMENT, "head_dim=48 is not a positive multiple of 32");
    SDPA_EXPECT("sdpa: head_dim too large", d.head_dim = 272, ws, none, HK_ERROR_INVALID_ARGUMENT, "up to 256");
    SDPA_EXPECT("sdpa: head_dim zero", d.head_dim = 0, ws, none, HK_ERROR_INVALID_ARGUMENT, "head_dim=0");
    SDPA_EXPECT("sdpa: capacity past the limit", (d.kv.capacity = 3000000, d.kv.k_head_stride = d.kv.v_head_stride = 128ull * 3000000),
                ws, none, HK_ERROR_INVALID_ARGUMENT, "kv.capacity=3000000 is more than 2097152 rows");
    SDPA_EXPECT("sdpa: capacity zero", d.kv.capacity = 0, ws, none, HK_ERROR_INVALID_ARGUMENT, "kv.capacity is 0");
    SDPA_EXPECT("sdpa: k view shorter than the cache",
                (d.kv.capacity = 33, d.kv.k_head_stride = d.kv.v_head_stride = 33 * 128), ws, none,
                HK_ERROR_INVALID_ARGUMENT, "k_cache needs");
    if (ws_bytes) {
        SDPA_EXPECT("sdpa: workspace NULL", (void)0, none, none, HK_ERROR_INVALID_ARGUMENT,
                    "workspace is NULL but this shape needs");
        SDPA_EXPECT("sdpa: workspace too small", (void)0, ((hk_view){ws.buffer, 12}), none, HK_ERROR_INVALID_ARGUMENT,
                    "workspace needs");
    }
    SDPA_EXPECT("sdpa: out_type not f32 or q8_1", d.out_type = HK_TYPE_Q4_K, ws, none, HK_ERROR_INVALID_ARGUMENT,
                "out_type=q4_k (2) is not f32 or q8_1");
    SDPA_EXPECT("sdpa: q8_1 out with head_dim off the block", (d.out_type = HK_TYPE_Q8_1, d.head_dim = 48,
                d.kv.k_row_stride = d.kv.v_row_stride = 96, d.kv.k_head_stride = d.kv.v_head_stride = 96 * CAP), ws,
                none, HK_ERROR_INVALID_ARGUMENT, "out_type=q8_1 needs head_dim a multiple of 32, got 48");
    {
        hk_sdpa_desc pf = good;
        pf.n_q = 4;
        const char *path = hk_sdpa_path(ctx, &pf);
        if (path && strcmp(path, "decode"))
            SDPA_EXPECT("sdpa: q8_1 out on flash attention", (d.n_q = 4, d.out_type = HK_TYPE_Q8_1), ws, none,
                        HK_ERROR_UNSUPPORTED, "out_type=q8_1 is written by flash-decoding only");
        else
            hk_check(0, "sdpa: q8_1 out on flash attention", "4 queries run on %s here", path ? path : "nothing");
    }
    SDPA_EXPECT("sdpa: counter misaligned", (void)0, ws, ((hk_view){counter.buffer, 2}), HK_ERROR_INVALID_ARGUMENT,
                "seq_k_counter.offset=2 is not a multiple of 4");
    SDPA_EXPECT("sdpa: counter past its buffer", (void)0, ws, ((hk_view){counter.buffer, 4}),
                HK_ERROR_INVALID_ARGUMENT, "seq_k_counter needs 4 bytes at offset 4");
    /* {NULL, 0} is the only way to say "none": a NULL buffer with an offset is refused */
    SDPA_EXPECT("sdpa: counter NULL with an offset", (void)0, ws, ((hk_view){NULL, 4}), HK_ERROR_INVALID_ARGUMENT,
                "seq_k_counter.buffer is NULL but its offset is 4");
    SDPA_EXPECT("sdpa: workspace NULL with an offset", (void)0, ((hk_view){NULL, 8}), none, HK_ERROR_INVALID_ARGUMENT,
                "workspace.buffer is NULL but its offset is 8");
    expect("sdpa: desc NULL", hk_sdpa_blk(ctx, NULL, NULL, qv, kv, vv, ov, ws, none), HK_ERROR_INVALID_ARGUMENT,
           "desc is NULL");
    expect("sdpa: context NULL", hk_sdpa_blk(NULL, NULL, &good, qv, kv, vv, ov, ws, none), HK_ERROR_INVALID_ARGUMENT,
           "context is NULL");
    expect("sdpa: out overlaps q", hk_sdpa_blk(ctx, NULL, &good, ov, kv, vv, ov, ws, none), HK_ERROR_INVALID_ARGUMENT,
           "output out overlaps q");
    expect("sdpa: q misaligned", hk_sdpa_blk(ctx, NULL, &good, (hk_view){qv.buffer, 2}, kv, vv, ov, ws, none),
           HK_ERROR_INVALID_ARGUMENT, "q.offset=2 is not a multiple of 4");
    uint64_t bytes = 7;
    hk_check_status("sdpa workspace: desc NULL", hk_sdpa_workspace_bytes(ctx, NULL, &bytes), HK_ERROR_INVALID_ARGUMENT,
                    "desc is NULL");
    hk_check(bytes == 0, "sdpa workspace: failure gives 0", NULL);
    hk_check_status("sdpa workspace: out NULL", hk_sdpa_workspace_bytes(ctx, &good, NULL), HK_ERROR_INVALID_ARGUMENT,
                    "out_bytes is NULL");

    /* hk_rope: q [1, 8, 64] from q, k and v [1, 2, 64] from the same buffer (after it) */
    hk_buffer *in = hk_test_buffer(ctx, 8192, q);
    hk_view rq = {in, 0}, rk = {in, 2048}, rv = {in, 2560}, rpos = {in, 3072}, rff = {in, 3200};
    uint32_t p0 = 3;
    hk_buffer_upload(in, rpos.offset, &p0, 4);
    hk_rope_desc rg = {.n_tokens = 1, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .neox = 1, .theta_base = 1e4f,
                       .freq_scale = 1.0f, .kv = cache.kv};
    hk_check_status("rope: the valid call", hk_rope(ctx, NULL, &rg, rq, rk, rv, rpos, rff, ov, kv, vv), HK_OK, NULL);
    hk_test_out_poison(&err_out);
    hk_rope_desc r = rg;
#define ROPE_EXPECT(name, desc_change, args, status, needle)                                                           \
    do {                                                                                                               \
        r = rg;                                                                                                        \
        desc_change;                                                                                                   \
        expect(name, hk_rope args, status, needle);                                                                    \
    } while (0)
    ROPE_EXPECT("rope: rot_dim odd", r.rot_dim = 33, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "rot_dim=33 is not even and at most head_dim=64");
    ROPE_EXPECT("rope: rot_dim past head_dim", r.rot_dim = 66, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "rot_dim=66");
    ROPE_EXPECT("rope: theta not positive", r.theta_base = 0.0f, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "theta_base=0 is not a positive number");
    ROPE_EXPECT("rope: freq_scale NaN", r.freq_scale = NAN, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "freq_scale=nan");
    ROPE_EXPECT("rope: no tokens", r.n_tokens = 0, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "must all be positive");
    ROPE_EXPECT("rope: too many heads", r.n_heads = 70000, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "is more than 65535");
    ROPE_EXPECT("rope: unsupported cache type", r.kv.type = HK_TYPE_Q6_K,
                (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv), HK_ERROR_UNSUPPORTED, "not a KV-cache type");
    ROPE_EXPECT("rope: positions NULL", (void)0, (ctx, NULL, &r, rq, rk, rv, none, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "positions.buffer is NULL");
    ROPE_EXPECT("rope: factors NULL with an offset", (void)0,
                (ctx, NULL, &r, rq, rk, rv, rpos, ((hk_view){NULL, 16}), ov, kv, vv), HK_ERROR_INVALID_ARGUMENT, "freq_factors.buffer is NULL but its offset is 16");
    ROPE_EXPECT("rope: factors misaligned", (void)0, (ctx, NULL, &r, rq, rk, rv, rpos, ((hk_view){in, 3202}), ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "freq_factors.offset=3202 is not a multiple of 4");
    ROPE_EXPECT("rope: q_out overlaps q", (void)0,
                (ctx, NULL, &r, ov, rk, rv, rpos, rff, (hk_view){err_out.buffer, (HK_TEST_GUARD + 4) * 4}, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "overlaps");
    ROPE_EXPECT("rope: k_cache is v_cache", (void)0, (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, kv),
                HK_ERROR_INVALID_ARGUMENT, "output k_cache overlaps v_cache");
    ROPE_EXPECT("rope: cache view too short",
                (r.kv.capacity = 33, r.kv.k_head_stride = r.kv.v_head_stride = 33 * 128), (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv),
                HK_ERROR_INVALID_ARGUMENT, "k_cache needs");
    /* the q and k norms' weights: 64 floats each from offset 4096 of `in` */
    hk_view rqn = {in, 4096}, rkn = {in, 4352};
    ROPE_EXPECT("rope: norm eps zero", (r.q_norm = rqn, r.k_norm = rkn, r.norm_eps = 0.0f),
                (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv), HK_ERROR_INVALID_ARGUMENT,
                "norm_eps=0 must be positive and finite");
    ROPE_EXPECT("rope: norm eps NaN with k's norm alone", (r.k_norm = rkn, r.norm_eps = NAN),
                (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv), HK_ERROR_INVALID_ARGUMENT, "norm_eps=nan");
    ROPE_EXPECT("rope: q_norm NULL with an offset", (r.q_norm = (hk_view){NULL, 8}, r.norm_eps = 1e-6f),
                (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv), HK_ERROR_INVALID_ARGUMENT,
                "desc->q_norm.buffer is NULL but its offset is 8");
    ROPE_EXPECT("rope: k_norm misaligned", (r.k_norm = (hk_view){in, 4354}, r.norm_eps = 1e-6f),
                (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv), HK_ERROR_INVALID_ARGUMENT,
                "desc->k_norm.offset=4354 is not a multiple of 4");
    ROPE_EXPECT("rope: q_norm past its buffer", (r.q_norm = (hk_view){in, 8000}, r.norm_eps = 1e-6f),
                (ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv), HK_ERROR_INVALID_ARGUMENT,
                "desc->q_norm needs 256 bytes at offset 8000");
    ROPE_EXPECT("rope: q_out on the q norm", (r.q_norm = rqn, r.norm_eps = 1e-6f),
                (ctx, NULL, &r, rq, rk, rv, rpos, rff, (hk_view){in, 4096}, kv, vv), HK_ERROR_INVALID_ARGUMENT,
                "output q_out overlaps");
    hk_check_status("rope: with both norms", (r = rg, r.q_norm = rqn, r.k_norm = rkn, r.norm_eps = 1e-6f,
                                              hk_rope(ctx, NULL, &r, rq, rk, rv, rpos, rff, ov, kv, vv)),
                    HK_OK, NULL);
    hk_test_out_poison(&err_out);
    expect("rope: desc NULL", hk_rope(ctx, NULL, NULL, rq, rk, rv, rpos, rff, ov, kv, vv), HK_ERROR_INVALID_ARGUMENT,
           "desc is NULL");
    /* q_out exactly on k (same bytes when n_heads == n_kv_heads) is not "in place" */
    r = rg;
    r.n_heads = HKV;
    hk_check_status("rope: q_out exactly on k",
                    hk_rope(ctx, NULL, &r, rq, rk, rv, rpos, rff, (hk_view){in, rk.offset}, kv, vv),
                    HK_ERROR_INVALID_ARGUMENT, "output q_out overlaps k");
    /* the caches were written only by the two valid calls: rows other than 3 are untouched */
    uint8_t *k_image = malloc(cache.bytes);
    hk_buffer_download(kv.buffer, 0, k_image, cache.bytes);
    uint64_t row_bytes = D * 2;
    int same = 1;
    for (uint32_t h = 0; h < HKV; h++)
        for (uint32_t j = 0; j < CAP; j++)
            if (j != p0)
                same &= memcmp(k_image + hk_case_kv_row(&cache, 0, h, j), cache.k + hk_case_kv_row(&cache, 0, h, j),
                               row_bytes) == 0;
    hk_check(same, "rope: failed calls wrote no cache row", NULL);
    free(k_image);
    hk_buffer_destroy(in);
    hk_test_out_destroy(&err_out);
    hk_buffer_destroy(qv.buffer);
    hk_buffer_destroy(kv.buffer);
    hk_buffer_destroy(vv.buffer);
    hk_buffer_destroy(ws.buffer);
    hk_buffer_destroy(counter.buffer);
    hk_case_kv_destroy(&cache);
}

/* hk_sdpa_workspace_bytes depends on the shape and the capacity, never on seq_k: one workspace
 * serves a replayed stream whatever the count. */
static void test_workspace_size(void)
{
    static const hk_type types[] = {HK_TYPE_F32, HK_TYPE_F16, HK_TYPE_Q8_0};
    for (int t = 0; t < 3; t++) {
        hk_case_kv cache;
        if (!hk_case_kv_create(&cache, types[t], 5000, 2, 64, t == 1, 0)) {
            hk_check(0, "workspace size", "out of host memory");
            return;
        }
        hk_sdpa_desc d = {.n_q = 1, .n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .seq_k = 1, .scale = 0.125f,
                          .kv = cache.kv};
        uint64_t a = 0, b = 1;
        hk_status s1 = hk_sdpa_workspace_bytes(ctx, &d, &a);
        d.seq_k = 4999;
        hk_status s2 = hk_sdpa_workspace_bytes(ctx, &d, &b);
        hk_check(s1 == HK_OK && s2 == HK_OK && a == b, "sdpa workspace size does not depend on seq_k",
                 "%s cache: %llu vs %llu bytes", hk_type_name(types[t]), (unsigned long long)a, (unsigned long long)b);
        hk_case_kv_destroy(&cache);
    }
}

/* ---- flash-decoding: the arrival words and the tuning hooks ------------------------------------ */

static void set_env(const char *name, const char *value)
{
#if defined(_WIN32)
    _putenv_s(name, value ? value : "");
#else
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
#endif
}

static const char *const tuning_hooks[] = {"HK_SDPA_SINGLE_PASS", "HK_SDPA_SHUFFLE", "HK_SDPA_LPK", "HK_SDPA_WG",
                                           "HK_SDPA_KB", "HK_SDPA_GROUPS", "HK_SDPA_ROWS", "HK_SDPA_SPLIT_KEYS"};
#define N_HOOKS (sizeof tuning_hooks / sizeof tuning_hooks[0])

static void clear_hooks(void)
{
    for (size_t i = 0; i < N_HOOKS; i++)
        set_env(tuning_hooks[i], NULL);
}

/* "NAME=value NAME=value" */
static void set_hooks(const char *spec)
{
    clear_hooks();
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        if (eq) {
            *eq = 0;
            set_env(tok, eq + 1);
        }
    }
}

/* The last split of each (kv head, row chunk) combines the partials in the same dispatch, told by
 * the arrival words in the workspace, which need no initialisation: a workspace of random bytes,
 * of zeros, or left by a call of another layout, then three calls in one stream at changing counts
 * (the counter rewritten between them), each checked. */
static void test_arrival(void)
{
    const uint32_t H = 8, HKV = 2, D = 64, CAP = 4096, FILLED = 3000;
    static const uint32_t counts[3] = {3000, 1000, 2501};
    hk_rng rng = {321};
    hk_case_kv cache;
    if (!hk_case_kv_create(&cache, HK_TYPE_F16, CAP, HKV, D, 0, 0)) {
        hk_check(0, "arrival", "out of host memory");
        return;
    }
    float row[64], q[8 * 64];
    for (uint32_t h = 0; h < HKV; h++)
        for (uint32_t j = 0; j < FILLED; j++) {
            hk_rng_fill(&rng, row, D, -1.0f, 1.0f);
            hk_case_kv_put(&cache, 0, h, j, row);
            hk_rng_fill(&rng, row, D, -1.0f, 1.0f);
            hk_case_kv_put(&cache, 1, h, j, row);
        }
    hk_rng_fill(&rng, q, H * D, -3.0f, 3.0f);
    hk_view kc = input_flush(cache.k, cache.bytes, 0), vc = input_flush(cache.v, cache.bytes, 0);
    hk_view qv = input_flush(q, sizeof q, 0);
    hk_sdpa_desc d = {.n_q = 1, .n_heads = H, .n_kv_heads = HKV, .head_dim = D, .scale = 0.125f, .kv = cache.kv};
    hk_sdpa_desc other = d; /* GQA 1 over the same cache: another layout of the workspace */
    other.n_heads = HKV;
    other.seq_k = 2000;
    uint64_t ws_bytes = 0, other_bytes = 0;
    hk_sdpa_workspace_bytes(ctx, &d, &ws_bytes);
    hk_sdpa_workspace_bytes(ctx, &other, &other_bytes);
    hk_check(ws_bytes > 0, "arrival: the shape splits its keys", "workspace %llu bytes", (unsigned long long)ws_bytes);
    uint64_t size = (ws_bytes > other_bytes ? ws_bytes : other_bytes) + 64;
    hk_buffer *wsb = hk_test_buffer(ctx, size, NULL);
    hk_view ws = {wsb, 16};
    hk_buffer *cb = hk_test_buffer(ctx, 16, NULL);
    hk_view counter = {cb, 4};
    hk_test_out o = hk_test_out_create(ctx, H * D), o2 = hk_test_out_create(ctx, HKV * D);
    float refs[3][8 * 64];
    for (int c = 0; c < 3; c++) {
        float *kp, *vp;
        hk_case_kv_pack(&cache, cache.k, cache.v, counts[c], &kp, &vp);
        hk_ref_sdpa(q, kp, vp, refs[c], 1, H, HKV, counts[c], D, d.scale, 0);
        free(kp);
        free(vp);
    }
    uint32_t *noise = malloc(size);
    for (uint64_t i = 0; i < size / 4; i++)
        noise[i] = (uint32_t)(hk_rng_uniform(&rng, 0.0f, 1.0f) * 4294967040.0f) ^ (uint32_t)i;
    static const char *const states[] = {"random bytes", "zeros", "another layout's call"};
    for (int state = 0; state < 3; state++) {
        hk_status st = HK_OK;
        if (state == 0)
            st = hk_buffer_upload(wsb, 0, noise, size / 4 * 4);
        else if (state == 1)
            st = hk_buffer_fill(wsb, 0, size / 4 * 4, 0);
        else
            st = hk_sdpa_blk(ctx, NULL, &other, qv, kc, vc, hk_test_out_view(&o2), ws, (hk_view){NULL, 0});
        char name[160];
        snprintf(name, sizeof name, "arrival: workspace holding %s", states[state]);
        hk_check_status(name, st, HK_OK, NULL);
        float got[3][8 * 64];
        hk_stream *s = NULL;
        if (st == HK_OK)
            st = hk_stream_create(ctx, 0, &s);
        for (int c = 0; c < 3 && st == HK_OK; c++) {
            st = hk_stream_upload(s, counter, &counts[c], 4);
            if (st == HK_OK)
                st = hk_sdpa_blk(ctx, s, &d, qv, kc, vc, hk_test_out_view(&o), ws, counter);
            if (st == HK_OK)
                st = hk_stream_download(s, hk_test_out_view(&o), got[c], sizeof got[c]);
        }
        if (st == HK_OK)
            st = hk_stream_submit(s);
        hk_stream_destroy(s);
        if (st != HK_OK) {
            hk_check(0, name, "%s", hk_last_error());
            continue;
        }
        for (int c = 0; c < 3; c++) {
            char label[200];
            snprintf(label, sizeof label, "%s, then %u keys (call %d of a stream)", name, counts[c], c + 1);
            hk_check_close(label, got[c], refs[c], H * D, HK_GATE_F32);
        }
        if (state == 2) {
            float *kp, *vp, ref2[2 * 64];
            hk_case_kv_pack(&cache, cache.k, cache.v, other.seq_k, &kp, &vp);
            hk_ref_sdpa(q, kp, vp, ref2, 1, HKV, HKV, other.seq_k, D, d.scale, 0);
            hk_check_close("arrival: the other layout's call", hk_test_out_read(&o2, "arrival other"), ref2, HKV * D,
                           HK_GATE_F32);
            free(kp);
            free(vp);
        }
    }
    free(noise);
    hk_test_out_destroy(&o);
    hk_test_out_destroy(&o2);
    hk_buffer_destroy(wsb);
    hk_buffer_destroy(cb);
    hk_buffer_destroy(qv.buffer);
    hk_buffer_destroy(kc.buffer);
    hk_buffer_destroy(vc.buffer);
    hk_case_kv_destroy(&cache);
}

/* Every variant the tuning hooks (include/hkernel.h) select, on a few decode shapes (table rows'
 * prepare, poisoned workspace), and a malformed hook refused. */
static void test_tuning_hooks(void)
{
    /* each setting on two of the shapes below (a bit per shape): lavapipe compiles every
     * variant anew, seconds each */
    static const struct {
        const char *hooks;
        unsigned shapes;
    } settings[] = {
        {"HK_SDPA_SINGLE_PASS=0", 1 | 8},
        {"HK_SDPA_SHUFFLE=0", 1 | 2},
        {"HK_SDPA_SHUFFLE=0 HK_SDPA_LPK=4 HK_SDPA_GROUPS=4096 HK_SDPA_SPLIT_KEYS=0", 4 | 8},
        {"HK_SDPA_LPK=1 HK_SDPA_KB=2", 4},
        {"HK_SDPA_LPK=2 HK_SDPA_KB=4 HK_SDPA_ROWS=2", 1 | 2},
        {"HK_SDPA_WG=256 HK_SDPA_KB=1 HK_SDPA_GROUPS=100000 HK_SDPA_SPLIT_KEYS=0", 4 | 8},
        /* many splits planned, a few woken by the count: 700 keys in 3 splits, 333 in 2 */
        {"HK_SDPA_GROUPS=256 HK_SDPA_SPLIT_KEYS=256", 1 | 2},
        {"HK_SDPA_GROUPS=256 HK_SDPA_SPLIT_KEYS=256 HK_SDPA_SINGLE_PASS=0", 1},
        {"HK_SDPA_WG=32 HK_SDPA_ROWS=1 HK_SDPA_SINGLE_PASS=0 HK_SDPA_KB=16", 1 | 2},
    };
    static const hk_case_shape shapes[] = {
        /* {n_q, H, Hkv, d, seq_k, capacity, causal, counter}; variant 1: token-major */
        {HK_TYPE_F16, {1, 8, 2, 128, 700, 1024, 0, 0}, 1, 0},
        {HK_TYPE_Q8_0, {1, 8, 1, 96, 333, 512, 0, 0}, 0, 0},
        {HK_TYPE_F32, {1, 4, 2, 80, 290, 300, 0, 0}, 0, 0},
        /* prefill rows on flash-decoding (a capacity past the flash twin's): 12 rows, 2 chunks */
        {HK_TYPE_F16, {3, 4, 1, 64, 150, 140000, 1, 0}, 0, 0},
    };
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        set_hooks(settings[i].hooks);
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
            if (!(settings[i].shapes & (1u << j)))
                continue;
            hk_case_run run;
            char name[256], detail[320];
            hk_status st = hk_case_prepare(&hk_case_sdpa, &shapes[j], ctx, HK_REF_ALL, 77 + j, &run);
            snprintf(name, sizeof name, "sdpa [%s] %s", settings[i].hooks, st == HK_OK ? run.label : "");
            if (st != HK_OK) {
                hk_check(0, name, "prepare: %s", hk_last_error());
                continue;
            }
            hk_case_bound bound;
            if (hk_case_bind(&run, j % 2 ? HK_PLACE_END_MIN : HK_PLACE_ALIGNED, 1, &bound) != HK_OK) {
                hk_check(0, name, "bind: %s", bound.why);
            } else {
                double err = hk_case_check(&run, &bound, 0, detail, sizeof detail), gate = hk_case_gate(&run);
                hk_check(err < gate, name, "%s (gate %.0e)", detail, gate);
                hk_case_unbind(&bound);
            }
            hk_case_release(&run);
        }
    }
    /* malformed hooks: refused by name, nothing written */
    set_hooks("HK_SDPA_KB=3");
    hk_case_run run;
    uint64_t bytes = 5;
    hk_status st = hk_case_prepare(&hk_case_sdpa, &shapes[0], ctx, HK_REF_NONE, 1, &run);
    hk_check_status("sdpa: malformed tuning hook", st, HK_ERROR_INVALID_ARGUMENT,
                    "HK_SDPA_KB=\"3\" is not a power of two in 1..16");
    if (st == HK_OK)
        hk_case_release(&run);
    set_hooks("HK_SDPA_SPLIT_KEYS=4096");
    st = hk_case_prepare(&hk_case_sdpa, &shapes[0], ctx, HK_REF_NONE, 1, &run);
    hk_check_status("sdpa: tuning hook out of range", st, HK_ERROR_INVALID_ARGUMENT,
                    "HK_SDPA_SPLIT_KEYS=\"4096\" is not an integer in 0..2048");
    if (st == HK_OK)
        hk_case_release(&run);
    set_hooks("HK_SDPA_GROUPS=lots");
    hk_sdpa_desc d = {.n_q = 1, .n_heads = 4, .n_kv_heads = 1, .head_dim = 64, .seq_k = 1, .scale = 1.0f,
                      .kv = {HK_TYPE_F16, 64, 128, 8192, 128, 8192}};
    hk_check_status("sdpa workspace: malformed tuning hook", hk_sdpa_workspace_bytes(ctx, &d, &bytes),
                    HK_ERROR_INVALID_ARGUMENT, "HK_SDPA_GROUPS=\"lots\" is not an integer");
    hk_check(bytes == 0, "sdpa workspace: failure gives 0", NULL);
    clear_hooks();
}

/* ---- non-finite inputs ------------------------------------------------------------------------- */

/* out_type Q8_1 against hk_quantize_q8_1 of the f32 output of the same call (f32: n values),
 * byte for byte; the fused blocks flush against their buffer's end. */
static void q8_1_matches(const char *name, const hk_sdpa_desc *d, hk_view q, hk_view k, hk_view v, hk_view ws,
                         hk_view f32, size_t n)
{
    char label[260];
    snprintf(label, sizeof label, "%s: out_type q8_1 is hk_quantize_q8_1 of the f32 output", name);
    uint64_t bytes = n / 32 * 36;
    hk_buffer *b = hk_test_buffer(ctx, 2 * bytes, NULL);
    uint8_t *want = malloc(bytes), *got = malloc(bytes);
    hk_sdpa_desc dq = *d;
    dq.out_type = HK_TYPE_Q8_1;
    hk_status st = want && got ? hk_buffer_fill(b, 0, 2 * bytes, HK_POISON_WORD) : HK_ERROR_OUT_OF_MEMORY;
    if (st == HK_OK)
        st = hk_quantize_q8_1(ctx, NULL, f32, (hk_view){b, 0}, (uint32_t)n);
    if (st == HK_OK)
        st = hk_sdpa_blk(ctx, NULL, &dq, q, k, v, (hk_view){b, bytes}, ws, (hk_view){NULL, 0});
    if (st == HK_OK)
        st = hk_buffer_download(b, 0, want, bytes);
    if (st == HK_OK)
        st = hk_buffer_download(b, bytes, got, bytes);
    if (st != HK_OK) {
        hk_check(0, label, "%s", hk_last_error());
    } else {
        uint32_t bad = 0;
        for (uint64_t i = 0; i < bytes; i += 36)
            bad += memcmp(want + i, got + i, 36) != 0;
        hk_check(bad == 0, label, "%u of %llu blocks differ", bad, (unsigned long long)(bytes / 36));
    }
    free(want);
    free(got);
    hk_buffer_destroy(b);
}

/* One call with NaN and inf planted in q and in K and V rows the queries see (hk_test_sdpa_plant),
 * the cache rows past seq_k NaN: every output as include/hkernel.h's rule says. Returns the
 * workspace bytes the shape needs (~0 if the call could not be made). */
static uint64_t nonfinite_run(const char *what, hk_type type, uint32_t n_q, uint32_t capacity, uint32_t seq_k,
                              uint32_t head_dim, int causal)
{
    const uint32_t H = 8, HKV = 4;
    char name[200];
    snprintf(name, sizeof name, "sdpa non-finite inputs, %s: %s q%u h%u/%u d%u k%u/%u%s", what, hk_type_name(type), n_q,
             H, HKV, head_dim, seq_k, capacity, causal ? " causal" : "");
    hk_case_kv cache;
    if (!hk_case_kv_create(&cache, type, capacity, HKV, head_dim, 0, 0)) {
        hk_check(0, name, "out of host memory");
        return ~0ull;
    }
    hk_sdpa_desc d = {.n_q = n_q, .n_heads = H, .n_kv_heads = HKV, .head_dim = head_dim, .seq_k = seq_k,
                      .scale = 1.0f / sqrtf((float)head_dim), .causal = causal, .kv = cache.kv};
    size_t n = (size_t)n_q * H * head_dim;
    float *q = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float)), *row = malloc(head_dim * sizeof(float));
    uint8_t *cls = malloc(n);
    hk_rng rng = {4242 + type};
    hk_rng_fill(&rng, q, n, -2.0f, 2.0f);
    for (uint32_t i = 0; i < n_q; i++)
        for (uint32_t h = 0; h < H; h++)
            hk_test_sdpa_plant(&d, seq_k, 'q', i, h, q + ((size_t)i * H + h) * head_dim);
    for (uint32_t h = 0; h < HKV; h++)
        for (uint32_t j = 0; j < seq_k; j++)
            for (int is_v = 0; is_v < 2; is_v++) {
                hk_rng_fill(&rng, row, head_dim, -1.0f, 1.0f);
                hk_test_sdpa_plant(&d, seq_k, is_v ? 'v' : 'k', h, j, row);
                hk_case_kv_put(&cache, is_v, h, j, row);
            }
    float *kp, *vp;
    hk_case_kv_pack(&cache, cache.k, cache.v, seq_k, &kp, &vp);
    hk_ref_sdpa(q, kp, vp, ref, n_q, H, HKV, seq_k, head_dim, d.scale, causal);
    hk_test_sdpa_classes(q, kp, vp, cls, n_q, H, HKV, seq_k, head_dim, d.scale, causal);
    uint64_t ws_bytes = ~0ull;
    hk_status st = hk_sdpa_workspace_bytes(ctx, &d, &ws_bytes);
    hk_view qv = input_flush(q, n * sizeof(float), 0);
    hk_view kv = input_flush(cache.k, cache.bytes, 0), vv = input_flush(cache.v, cache.bytes, 0);
    hk_view ws = {NULL, 0};
    if (st == HK_OK && ws_bytes) {
        ws.buffer = hk_test_buffer(ctx, ws_bytes, NULL);
        st = hk_buffer_fill(ws.buffer, 0, ws_bytes / 4 * 4, HK_POISON_WORD);
    }
    hk_test_out o = hk_test_out_create(ctx, n);
    const char *path = hk_sdpa_path(ctx, &d);
    if (st == HK_OK && (!path || strcmp(path, "decode")))
        hk_check(0, name, "runs on %s, not flash-decoding", path ? path : "nothing");
    else if (st == HK_OK)
        st = hk_sdpa_blk(ctx, NULL, &d, qv, kv, vv, hk_test_out_view(&o), ws, (hk_view){NULL, 0});
    if (st != HK_OK) {
        hk_check(0, name, "%s", hk_last_error());
    } else {
        const float *got = hk_test_out_read(&o, name);
        if (got)
            hk_check_sdpa_classes(name, got, ref, cls, n, HK_GATE_F32);
        if (got && head_dim % 32 == 0)
            q8_1_matches(name, &d, qv, kv, vv, ws, hk_test_out_view(&o), n);
        /* kv head 1's second query head scores its +inf key -inf: the key left out, the row not
         * NaN (a Q8_0 block with an inf is all NaN instead) */
        const uint8_t *left_out = cls + ((size_t)(n_q - 1) * H + H / HKV + 1) * head_dim;
        if (type != HK_TYPE_Q8_0) {
            char label[240];
            snprintf(label, sizeof label, "%s: a score of -inf leaves its key out", name);
            hk_check(memchr(left_out, HK_TEST_NAN, head_dim) == NULL, label, NULL);
        }
    }
    hk_test_out_destroy(&o);
    hk_buffer_destroy(ws.buffer);
    hk_buffer_destroy(qv.buffer);
    hk_buffer_destroy(kv.buffer);
    hk_buffer_destroy(vv.buffer);
    free(kp);
    free(vp);
    free(q);
    free(ref);
    free(row);
    free(cls);
    hk_case_kv_destroy(&cache);
    return st == HK_OK ? ws_bytes : ~0ull;
}

/* Non-finite inputs on each cache type and each way flash-decoding ends: one split writing the
 * output, several combined by the last split to finish, several combined by a second pass; and
 * prefill rows on flash-decoding (a capacity flash attention refuses: past the twin's, else past
 * the matrix cores'), where keys past a row's causal limit share its batches. */
static void test_nonfinite(void)
{
    static const hk_type types[] = {HK_TYPE_F32, HK_TYPE_F16, HK_TYPE_Q8_0};
    static const struct {
        const char *what, *hooks;
    } modes[] = {
        {"one split", "HK_SDPA_GROUPS=1"},
        {"splits combined by the last", "HK_SDPA_GROUPS=64"},
        {"splits combined by a second pass", "HK_SDPA_GROUPS=64 HK_SDPA_SINGLE_PASS=0"},
    };
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        set_hooks(modes[m].hooks);
        for (int t = 0; t < 3; t++) {
            uint64_t ws = nonfinite_run(modes[m].what, types[t], 1, 1024, 700, 64, 0);
            char label[160];
            snprintf(label, sizeof label, "sdpa non-finite inputs, %s (%s): the splits asked for",
                     modes[m].what, hk_type_name(types[t]));
            if (ws != ~0ull)
                hk_check((ws == 0) == (m == 0), label, "workspace %llu bytes", (unsigned long long)ws);
        }
    }
    clear_hooks();
    hk_sdpa_desc d = {.n_q = 3, .n_heads = 8, .n_kv_heads = 4, .head_dim = 32, .seq_k = 300, .scale = 1.0f,
                      .causal = 1, .kv = {HK_TYPE_F16, 131073, 64, 64ull * 131073, 64, 64ull * 131073}};
    const char *path = hk_sdpa_path(ctx, &d);
    uint32_t capacity = path && !strcmp(path, "decode") ? 131073 : 524289;
    nonfinite_run("prefill rows", HK_TYPE_F16, 3, capacity, 300, 32, 1);
}

int main(void)
{
    ctx = hk_test_context();
    clear_hooks();
    test_workspace_size();
    test_replay();
    test_arrival();
    test_tuning_hooks();
    test_nonfinite();
    test_errors();
    return hk_test_finish(ctx);
}
