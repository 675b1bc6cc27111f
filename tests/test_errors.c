/* Every argument check: the right status, a message that names the problem, and nothing written
 * (the output stays poisoned). Run under ASan, it also shows that failing calls leak nothing.
 * Also: the shape limits (the largest allowed shape runs and is right, the next is refused),
 * buffer sizes past the device's limits, HK_DEVICE, the type traits, and (test_errors
 * --no-driver, run by ctest with no Vulkan driver visible) a machine without a Vulkan driver. */
#define _POSIX_C_SOURCE 200809L
#include "hk_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

static hk_context *ctx;
static hk_buffer *w, *x, *y, *small;
static const uint32_t rows = 4, k = 256;

#define Y_FLOATS 64

static void poison_y(void)
{
    float p[Y_FLOATS];
    hk_poison(p, Y_FLOATS);
    hk_buffer_upload(y, 0, p, sizeof p);
}

static void check_y_untouched(const char *name)
{
    uint32_t words[Y_FLOATS];
    hk_buffer_download(y, 0, words, sizeof words);
    uint32_t bad = 0;
    for (int i = 0; i < Y_FLOATS; i++)
        bad += words[i] != HK_POISON_WORD;
    char label[160];
    snprintf(label, sizeof label, "%s wrote nothing", name);
    hk_check(bad == 0, label, "%u words changed", bad);
}

/* one failing call: its status, its message, and no write */
#define EXPECT(name, call, status, needle)                                                                             \
    do {                                                                                                               \
        poison_y();                                                                                                    \
        hk_check_status(name, (call), status, needle);                                                                 \
        check_y_untouched(name);                                                                                       \
    } while (0)


/* ---- shape limits (hkernel.h, HK_*_MAX_*) ----------------------------------------------------
 * At the largest allowed shape the kernel runs and matches its reference; one step past it the
 * call is refused with the limit in the message, before anything else is looked at (the buffers
 * below are too small for the refused shapes, and the message is still the limit's). A shape the
 * limits accept but the buffers do not fit is refused for its buffers instead, which shows where
 * each limit lies without allocating gigabytes. Before the limits existed, lavapipe returned
 * HK_OK with wrong numbers past them (e.g. hk_gemv_f32 at k = 2^23, hk_rmsnorm at n = 2^24). */

/* Values on a quarter grid in [-1, 1], never 0: every product and square is a multiple of 1/16,
 * so sums of up to 2^20 of them are exact in f32 in any order, and the references (which sum in
 * f32) stay exact at the largest shapes, where their own rounding would otherwise exceed the
 * gate (hk_ref_rmsnorm at n = 2^20: 2e-4). A loop cut short still misses whole terms. */
static void quarter_grid(hk_rng *rng, float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int q = (int)(hk_rng_next(rng) % 8) - 4; /* -4..3 */
        v[i] = (float)(q >= 0 ? q + 1 : q) / 4.0f;
    }
}

/* A device-side float array with the values given (NULL: poisoned). */
static hk_buffer *float_buffer(const float *v, size_t n)
{
    hk_buffer *b = hk_test_buffer(ctx, (uint64_t)n * 4, v);
    if (!v) {
        float *p = malloc(n * 4);
        hk_poison(p, n);
        hk_buffer_upload(b, 0, p, (uint64_t)n * 4);
        free(p);
    }
    return b;
}

static void check_output(const char *name, hk_status st, hk_buffer *out, const float *ref, size_t n, double gate)
{
    float *got = malloc(n * 4);
    hk_poison(got, n);
    if (hk_check_status(name, st, HK_OK, NULL)) {
        hk_buffer_download(out, 0, got, (uint64_t)n * 4);
        char label[160];
        snprintf(label, sizeof label, "%s matches the reference", name);
        hk_check_close(label, got, ref, n, gate);
    }
    free(got);
}

static void test_gemv_limit(void)
{
    const uint32_t rows = 2, k = HK_GEMV_MAX_K;
    hk_rng rng = {11};
    float *w_host = malloc((size_t)rows * k * 4), *x_host = malloc((size_t)k * 4), ref[2];
    quarter_grid(&rng, w_host, (size_t)rows * k);
    quarter_grid(&rng, x_host, k);
    hk_ref_gemv_f32(w_host, x_host, ref, rows, k);
    hk_buffer *wb = float_buffer(w_host, (size_t)rows * k), *xb = float_buffer(x_host, k), *yb = float_buffer(NULL, rows);
    check_output("gemv at k = HK_GEMV_MAX_K (1048576)",
                 hk_gemv_f32(ctx, NULL, (hk_view){wb, 0}, (hk_view){xb, 0}, (hk_view){yb, 0}, rows, k), yb, ref, rows,
                 HK_GATE_F32);
    EXPECT("gemv past HK_GEMV_MAX_K", hk_gemv_f32(ctx, NULL, (hk_view){wb, 0}, (hk_view){xb, 0}, (hk_view){y, 0}, 1, k + 1),
           HK_ERROR_INVALID_ARGUMENT, "k=1048577 exceeds the limit k <= 1048576");
    /* several tokens: a full block of 8 and a tail of 3, each token's sums as long as one token's */
    const uint32_t tokens = 11;
    float *xt_host = malloc((size_t)tokens * k * 4), ref_t[2 * 11];
    quarter_grid(&rng, xt_host, (size_t)tokens * k);
    for (uint32_t t = 0; t < tokens; t++)
        hk_ref_gemv_f32(w_host, xt_host + (size_t)t * k, ref_t + t * rows, rows, k);
    hk_buffer *xtb = float_buffer(xt_host, (size_t)tokens * k), *ytb = float_buffer(NULL, (size_t)tokens * rows);
    check_output("gemv tokens at k = HK_GEMV_MAX_K, 11 tokens",
                 hk_gemv_f32_tokens(ctx, NULL, (hk_view){wb, 0}, (hk_view){xtb, 0}, (hk_view){ytb, 0}, rows, k, tokens),
                 ytb, ref_t, (size_t)tokens * rows, HK_GATE_F32);
    hk_buffer_destroy(xtb);
    hk_buffer_destroy(ytb);
    free(xt_host);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(yb);
    free(w_host);
    free(x_host);
}

static void test_rmsnorm_limit(void)
{
    const uint32_t n = HK_RMSNORM_MAX_N;
    hk_rng rng = {12};
    float *x_host = malloc((size_t)n * 4), *w_host = malloc((size_t)n * 4), *ref = malloc((size_t)n * 4);
    quarter_grid(&rng, x_host, n);
    quarter_grid(&rng, w_host, n);
    hk_ref_rmsnorm(x_host, w_host, ref, 1, n, 1e-5f);
    hk_buffer *xb = float_buffer(x_host, n), *wb = float_buffer(w_host, n), *yb = float_buffer(NULL, n);
    check_output("rmsnorm at n = HK_RMSNORM_MAX_N (1048576)",
                 hk_rmsnorm(ctx, NULL, (hk_view){xb, 0}, (hk_view){wb, 0}, (hk_view){yb, 0}, 1, n, 1e-5f), yb, ref, n,
                 HK_GATE_F32);
    EXPECT("rmsnorm past HK_RMSNORM_MAX_N", hk_rmsnorm(ctx, NULL, (hk_view){xb, 0}, (hk_view){wb, 0}, (hk_view){y, 0}, 1, n + 1, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "n=1048577 exceeds the limit n <= 1048576");
    /* hk_rmsnorm_q8_1 at the same n: bit for bit hk_rmsnorm's y (above) and its quantized blocks */
    const uint32_t blocks = n / 32;
    hk_buffer *qb = float_buffer(NULL, (size_t)blocks * 9), *y2b = float_buffer(NULL, n);
    hk_buffer *q2b = float_buffer(NULL, (size_t)blocks * 9);
    hk_status st = hk_quantize_q8_1(ctx, NULL, (hk_view){yb, 0}, (hk_view){qb, 0}, n);
    if (st == HK_OK)
        st = hk_rmsnorm_q8_1(ctx, NULL, (hk_view){xb, 0}, (hk_view){wb, 0}, (hk_view){y2b, 0}, (hk_view){q2b, 0}, 1, n,
                             1e-5f);
    uint32_t *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    uint8_t *qa = malloc(blocks * 36), *qf = malloc(blocks * 36);
    if (st == HK_OK)
        st = hk_buffer_download(yb, 0, a, (size_t)n * 4);
    if (st == HK_OK)
        st = hk_buffer_download(y2b, 0, b, (size_t)n * 4);
    if (st == HK_OK)
        st = hk_buffer_download(qb, 0, qa, blocks * 36);
    if (st == HK_OK)
        st = hk_buffer_download(q2b, 0, qf, blocks * 36);
    hk_check(st == HK_OK && !memcmp(a, b, (size_t)n * 4) && !memcmp(qa, qf, blocks * 36),
             "rmsnorm_q8_1 at n = HK_RMSNORM_MAX_N: hk_rmsnorm + hk_quantize_q8_1 bit for bit", "%s",
             st == HK_OK ? "" : hk_last_error());
    EXPECT("rmsnorm_q8_1 past HK_RMSNORM_MAX_N",
           hk_rmsnorm_q8_1(ctx, NULL, (hk_view){xb, 0}, (hk_view){wb, 0}, (hk_view){y, 0}, (hk_view){y, 128}, 1, n + 32,
                           1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "n=1048608 exceeds the limit n <= 1048576");
    hk_buffer_destroy(qb);
    hk_buffer_destroy(y2b);
    hk_buffer_destroy(q2b);
    free(a);
    free(b);
    free(qa);
    free(qf);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(yb);
    free(x_host);
    free(w_host);
    free(ref);
}

/* hk_matvec (and hk_matvec_int8 where the device runs it) at k = HK_MATVEC_MAX_K on context c */
static void matvec_at_max_k(hk_context *c, const char *label, hk_type type, int int8)
{
    const uint32_t rows = 3, k = HK_MATVEC_MAX_K;
    size_t row_bytes = hk_ref_row_bytes((int)type, k);
    hk_rng rng = {13 + (uint64_t)type};
    uint8_t *w_host = malloc(row_bytes * rows);
    float *x_host = malloc((size_t)k * 4), ref[3];
    hk_block_q8_1 *xq_host = malloc((size_t)k / 32 * sizeof *xq_host);
    hk_random_blocks(&rng, (int)type, w_host, row_bytes * rows / hk_type_block_bytes(type), 0.05f);
    hk_rng_fill(&rng, x_host, k, -1, 1);
    hk_quant_row_q8_1(x_host, xq_host, k);
    if (int8)
        hk_ref_matvec_q8_1((int)type, w_host, xq_host, ref, rows, k);
    else
        hk_ref_matvec((int)type, w_host, x_host, ref, rows, k);
    hk_buffer *wb = hk_test_buffer(c, row_bytes * rows, w_host);
    hk_buffer *xb = int8 ? hk_test_buffer(c, (uint64_t)k / 32 * 36, xq_host) : hk_test_buffer(c, (uint64_t)k * 4, x_host);
    hk_buffer *yb = hk_test_buffer(c, rows * 4, NULL);
    float poison[3];
    hk_poison(poison, rows);
    hk_buffer_upload(yb, 0, poison, sizeof poison);
    hk_view wv = {wb, 0}, xv = {xb, 0}, yv = {yb, 0};
    hk_status st = int8 ? hk_matvec_int8(c, NULL, type, wv, xv, yv, rows, k) : hk_matvec(c, NULL, type, wv, xv, yv, rows, k);
    char name[160];
    snprintf(name, sizeof name, "%s %s at k = HK_MATVEC_MAX_K (98304)%s", int8 ? "matvec_int8" : "matvec",
             hk_type_name(type), label);
    float got[3];
    hk_poison(got, rows);
    if (hk_check_status(name, st, HK_OK, NULL)) {
        hk_buffer_download(yb, 0, got, sizeof got);
        hk_check_close(name, got, ref, rows, HK_GATE_F32);
    }
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(yb);
    free(w_host);
    free(x_host);
    free(xq_host);
}

static void test_matvec_limits(hk_buffer *aligned)
{
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    matvec_at_max_k(ctx, "", HK_TYPE_Q8_0, 0);
    matvec_at_max_k(ctx, "", HK_TYPE_Q6_K, 0);
    if (caps.subgroup_size_control) {
        matvec_at_max_k(ctx, "", HK_TYPE_Q6_K, 1);
        /* the portable kernel, which the same shapes use without subgroup size control */
        hk_context *portable = hk_test_context_without(HK_FEATURE_SUBGROUP_SIZE_CONTROL);
        if (portable) {
            matvec_at_max_k(portable, ", portable kernel", HK_TYPE_Q6_K, 0);
            hk_check(hk_context_validation_messages(portable) == 0, "portable context: no validation messages", NULL);
            hk_context_destroy(portable);
        }
    }
    hk_view wv = {w, 0}, xv = {x, 0}, yv = {y, 0};
    EXPECT("matvec past HK_MATVEC_MAX_K", hk_matvec_q4k(ctx, NULL, wv, xv, yv, 1, HK_MATVEC_MAX_K + 256),
           HK_ERROR_INVALID_ARGUMENT, "k=98560 exceeds the limit k <= 98304");
    EXPECT("matvec q8_0 past HK_MATVEC_MAX_K", hk_matvec_q8_0(ctx, NULL, wv, xv, yv, 1, HK_MATVEC_MAX_K + 32),
           HK_ERROR_INVALID_ARGUMENT, "k=98336 exceeds the limit k <= 98304");
    EXPECT("matvec_int8 past HK_MATVEC_MAX_K", hk_matvec_int8(ctx, NULL, HK_TYPE_Q6_K, wv, xv, yv, 1, HK_MATVEC_MAX_K + 256),
           HK_ERROR_INVALID_ARGUMENT, "k=98560 exceeds the limit k <= 98304");
    EXPECT("matvec past HK_MATVEC_MAX_ROWS", hk_matvec_q8_0(ctx, NULL, wv, xv, yv, HK_MATVEC_MAX_ROWS + 1, 32),
           HK_ERROR_INVALID_ARGUMENT, "rows=16777217 exceeds the limit rows <= 16777216");
    EXPECT("matvec at HK_MATVEC_MAX_ROWS passes the limits", hk_matvec_q8_0(ctx, NULL, wv, xv, yv, HK_MATVEC_MAX_ROWS, 32),
           HK_ERROR_INVALID_ARGUMENT, "w needs 570425344 bytes");
    EXPECT("matvec past HK_MATVEC_MAX_K_ROW_BLOCKS", hk_matvec_q8_0(ctx, NULL, wv, xv, yv, 131073, 52480),
           HK_ERROR_INVALID_ARGUMENT, "ceil(rows/32768)*k=262400 exceeds the limit ceil(rows/32768)*k <= 262144");
    EXPECT("matvec at HK_MATVEC_MAX_K_ROW_BLOCKS passes the limits", hk_matvec_q8_0(ctx, NULL, wv, xv, yv, 131072, 65536),
           HK_ERROR_INVALID_ARGUMENT, "w needs 9126805504 bytes");
    hk_view ids = {aligned, 2048}, x16 = {aligned, 1024};
    EXPECT("moe past HK_MATVEC_MAX_K", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, x16, ids, yv, &(hk_moe_shape){1, 1, HK_MATVEC_MAX_K + 256, 1, 0}),
           HK_ERROR_INVALID_ARGUMENT, "k=98560 exceeds the limit k <= 98304");
    EXPECT("moe past HK_MATVEC_MAX_ROWS", hk_moe_matvec_int8(ctx, NULL, HK_TYPE_Q8_0, wv, x16, ids, yv, &(hk_moe_shape){1, 4096, 32, 4097, 0}),
           HK_ERROR_INVALID_ARGUMENT, "slots*n=16781312 exceeds the limit slots*n <= 16777216");
    EXPECT("moe past HK_MATVEC_MAX_K_ROW_BLOCKS", hk_moe_matvec(ctx, NULL, HK_TYPE_Q8_0, wv, x16, ids, yv, &(hk_moe_shape){8, 4097, 52480, 32, 0}),
           HK_ERROR_INVALID_ARGUMENT, "ceil(slots*n/32768)*k=262400 exceeds");
}

/* ---- buffers past the device's limits ---- */
static void test_buffer_limits(void)
{
    VkPhysicalDevice pd;
    hk_context_vulkan(ctx, NULL, &pd, NULL, NULL, NULL);
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);
    VkPhysicalDeviceMaintenance4Properties m4 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
                                                 .pNext = base.apiVersion >= VK_API_VERSION_1_3 ? &m4 : NULL};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    /* the largest device-local heap: no storage buffer can be larger */
    VkDeviceSize heap = 0;
    for (uint32_t i = 0; i < mem.memoryHeapCount; i++)
        if ((mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && mem.memoryHeaps[i].size > heap)
            heap = mem.memoryHeaps[i].size;
    hk_buffer *b = (hk_buffer *)&b;
    char name[160];
    snprintf(name, sizeof name, "buffer of the device-local heap + 1 (%llu bytes)", (unsigned long long)heap + 1);
    hk_check_status(name, hk_buffer_create(ctx, heap + 1, &b), HK_ERROR_OUT_OF_MEMORY, "is more than");
    hk_check(b == NULL, "refused buffer leaves NULL", NULL);
    VkDeviceSize max_alloc = m3.maxMemoryAllocationSize;
    if (max_alloc && max_alloc < heap) {
        snprintf(name, sizeof name, "buffer of maxMemoryAllocationSize + 1 (%llu bytes)", (unsigned long long)max_alloc + 1);
        hk_check_status(name, hk_buffer_create(ctx, max_alloc + 1, &b), HK_ERROR_OUT_OF_MEMORY, "maxMemoryAllocationSize");
    }
    if (m4.maxBufferSize && m4.maxBufferSize < UINT64_MAX) {
        snprintf(name, sizeof name, "buffer of maxBufferSize + 1 (%llu bytes)", (unsigned long long)m4.maxBufferSize + 1);
        hk_check_status(name, hk_buffer_create(ctx, m4.maxBufferSize + 1, &b), HK_ERROR_OUT_OF_MEMORY, "maxBufferSize");
    }
    hk_check_status("buffer of UINT64_MAX bytes", hk_buffer_create(ctx, UINT64_MAX, &b), HK_ERROR_OUT_OF_MEMORY,
                    "is more than");
}

/* ---- HK_DEVICE: digits are an index, out of range is not found, anything else a name ---- */
static void test_hk_device(void)
{
    const char *saved = getenv("HK_DEVICE");
    char *keep = saved ? strdup(saved) : NULL;
    uint32_t count = 0;
    hk_enumerate_devices(NULL, NULL, 0, &count);
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.disable_pipeline_cache = 1;
    static const char *const out_of_range[] = {"4294967296", "2147483648", "4294967295", "12345678901234567890",
                                               "99999999999999999999999999", "64"};
    for (size_t i = 0; i < sizeof out_of_range / sizeof *out_of_range; i++) {
        setenv("HK_DEVICE", out_of_range[i], 1);
        hk_context *c = (hk_context *)&c;
        char name[96], needle[96];
        snprintf(name, sizeof name, "HK_DEVICE=%s", out_of_range[i]);
        snprintf(needle, sizeof needle, "HK_DEVICE=%.20s", out_of_range[i]);
        hk_check_status(name, hk_context_create(&desc, &c), HK_ERROR_NOT_FOUND, needle);
        hk_check(c == NULL && strstr(hk_last_error(), "no device with that index"), "out-of-range HK_DEVICE says why",
                 "%s", hk_last_error());
    }
    char index[16];
    snprintf(index, sizeof index, "%u", count);
    setenv("HK_DEVICE", index, 1);
    hk_context *c = NULL;
    hk_check_status("HK_DEVICE = the device count", hk_context_create(&desc, &c), HK_ERROR_NOT_FOUND, "no device with that index");
    setenv("HK_DEVICE", "-1", 1); /* not digits: a name, which matches nothing */
    hk_check_status("HK_DEVICE=-1 is a name", hk_context_create(&desc, &c), HK_ERROR_NOT_FOUND, "matches \"-1\"");
    setenv("HK_DEVICE", "0", 1);
    hk_check_status("HK_DEVICE=0", hk_context_create(&desc, &c), HK_OK, NULL);
    hk_context_destroy(c);
    desc.device_index = (int)count;
    hk_check_status("device_index = the device count", hk_context_create(&desc, &c), HK_ERROR_NOT_FOUND, "out of range");
    if (keep)
        setenv("HK_DEVICE", keep, 1);
    else
        unsetenv("HK_DEVICE");
    free(keep);
}

/* ---- type traits ---- */
static void test_type_traits(void)
{
    static const hk_type types[] = {HK_TYPE_F32,  HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q6_K,
                                    HK_TYPE_Q8_1, HK_TYPE_F16,  HK_TYPE_Q5_K};
    static const uint32_t ggml[] = {0, 8, 12, 14, 9, 1, 13};
    static const uint32_t block_values[] = {1, 32, 256, 256, 32, 1, 256},
                          block_bytes[] = {4, 34, 144, 210, 36, 2, 176}, align[] = {4, 2, 2, 2, 4, 2, 2};
    int ok = 1;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        hk_type t = types[i], back = (hk_type)99;
        ok &= hk_type_to_ggml(t) == ggml[i] && hk_type_from_ggml(ggml[i], &back) == HK_OK && back == t;
        ok &= hk_type_block_values(t) == block_values[i] && hk_type_block_bytes(t) == block_bytes[i] &&
              hk_type_alignment(t) == align[i];
        ok &= hk_type_bytes(t, block_values[i] * 1000ull) == block_bytes[i] * 1000ull && hk_type_bytes(t, 0) == 0;
        if (block_values[i] > 1)
            ok &= hk_type_bytes(t, block_values[i] * 1000ull + 1) == 0; /* off the block */
        /* the largest count whose bytes fit, and (where the bytes can outgrow a uint64_t) the next */
        uint64_t fit = block_bytes[i] > block_values[i] ? UINT64_MAX / block_bytes[i] : UINT64_MAX / block_values[i];
        ok &= hk_type_bytes(t, fit * block_values[i]) == fit * block_bytes[i];
        if (block_bytes[i] > block_values[i])
            ok &= hk_type_bytes(t, (fit + 1) * block_values[i]) == 0;
    }
    hk_check(ok, "type traits: ggml ids round-trip, block sizes, alignments, byte counts", NULL);
    hk_check(hk_type_bytes(HK_TYPE_Q6_K, 4096) == 3360 && hk_type_bytes(HK_TYPE_F32, 1ull << 40) == 1ull << 42,
             "type bytes of real rows", NULL);
    hk_check(hk_type_to_ggml((hk_type)99) == UINT32_MAX && hk_type_alignment((hk_type)-1) == 0 &&
                 hk_type_bytes((hk_type)99, 32) == 0 && strcmp(hk_type_name((hk_type)99), "?") == 0,
             "unknown type: no traits", NULL);
    static const uint32_t unknown[] = {2, 3, 6, 7, 10, 11, 15, 16, 20, 30, 39, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        hk_type t = (hk_type)77;
        char name[64];
        snprintf(name, sizeof name, "ggml type %u refused", unknown[i]);
        hk_check_status(name, hk_type_from_ggml(unknown[i], &t), HK_ERROR_UNSUPPORTED, "has no libhkernel type");
        hk_check(t == (hk_type)77, "refused ggml type writes nothing", NULL);
    }
    hk_check_status("ggml type null out", hk_type_from_ggml(8, NULL), HK_ERROR_INVALID_ARGUMENT, "out_type is NULL");
}

/* ---- the engine-facing calls: streams' recorded transfers, barriers, prepare, caps ---- */
static void test_engine_api(void)
{
    hk_stream *s = NULL;
    hk_stream_create(ctx, 0, &s);
    float data[16] = {0};
    hk_view yv = {y, 0};
    /* each refused call leaves the stream empty: nothing recorded */
#define EXPECT_EMPTY(name, call, status, needle)                                                                       \
    do {                                                                                                               \
        EXPECT(name, call, status, needle);                                                                            \
        hk_check(hk_stream_kernel_count(s) == 0, name " recorded nothing", NULL);                                      \
        hk_check(hk_last_vk_result() == VK_SUCCESS, name ": no VkResult", NULL);                                       \
    } while (0)
    EXPECT_EMPTY("upload: null stream", hk_stream_upload(NULL, yv, data, 16), HK_ERROR_INVALID_ARGUMENT, "stream is NULL");
    EXPECT_EMPTY("upload: null buffer", hk_stream_upload(s, (hk_view){NULL, 0}, data, 16), HK_ERROR_INVALID_ARGUMENT,
                 "dst.buffer is NULL");
    EXPECT_EMPTY("upload: null data", hk_stream_upload(s, yv, NULL, 16), HK_ERROR_INVALID_ARGUMENT, "data is NULL");
    EXPECT_EMPTY("upload: past the end", hk_stream_upload(s, (hk_view){y, Y_FLOATS * 4 - 8}, data, 16),
                 HK_ERROR_INVALID_ARGUMENT, "dst needs 16 bytes at offset 248, past the end of its 256-byte buffer");
    EXPECT_EMPTY("upload: huge offset", hk_stream_upload(s, (hk_view){y, UINT64_MAX - 3}, data, 16),
                 HK_ERROR_INVALID_ARGUMENT, "past the end");
    EXPECT_EMPTY("download: past the end", hk_stream_download(s, (hk_view){y, 8}, data, Y_FLOATS * 4),
                 HK_ERROR_INVALID_ARGUMENT, "src needs 256 bytes at offset 8");
    EXPECT_EMPTY("download: null data", hk_stream_download(s, yv, NULL, 4), HK_ERROR_INVALID_ARGUMENT, "data is NULL");
    hk_context *other = hk_test_context_without(0);
    if (other) {
        hk_buffer *foreign = hk_test_buffer(other, 64, NULL);
        EXPECT_EMPTY("upload: buffer of another context", hk_stream_upload(s, (hk_view){foreign, 0}, data, 16),
                     HK_ERROR_INVALID_ARGUMENT, "dst.buffer belongs to another context");
        hk_buffer_destroy(foreign);
        hk_context_destroy(other);
    }
    hk_check_status("barrier: null stream", hk_stream_barrier(NULL), HK_ERROR_INVALID_ARGUMENT, "stream is NULL");
    hk_stream *w2 = (hk_stream *)1;
    hk_check_status("wrap: too many timestamps",
                    hk_stream_wrap_timed(ctx, (VkCommandBuffer)(uintptr_t)1, (1u << 20) + 1, &w2),
                    HK_ERROR_INVALID_ARGUMENT, "max_timestamps=1048577");
    hk_check(w2 == NULL, "refused wrap leaves NULL", NULL);
    hk_check_status("wrap: null command buffer", hk_stream_wrap_timed(ctx, VK_NULL_HANDLE, 0, &w2),
                    HK_ERROR_INVALID_ARGUMENT, "command_buffer is NULL");
    double ms;
    hk_check_status("elapsed: no timestamps", hk_stream_elapsed_ms(s, 0, 1, &ms), HK_ERROR_INVALID_ARGUMENT,
                    "the last submit recorded 0");
    hk_check_status("prepare: null context", hk_context_prepare(NULL, NULL), HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    hk_check_status("prepare: empty name", hk_context_prepare(ctx, "hk_rmsnorm,,hk_copy"), HK_ERROR_INVALID_ARGUMENT,
                    "\"\" is not a kernel");
    hk_caps caps;
    hk_check_status("caps: null out", hk_context_caps_sized(ctx, NULL, sizeof caps), HK_ERROR_INVALID_ARGUMENT,
                    "out_caps is NULL");
    hk_check_status("caps: null context", hk_context_caps(NULL, &caps), HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    hk_check(hk_context_pipeline_count(NULL) == 0 && hk_context_device_lost(NULL) == 0, "NULL context queries", NULL);
    hk_check_status("features: null out", hk_features_enable(&(VkPhysicalDeviceFeatures2){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2},
                                                             HK_FEATURES_USED,
                                                             &(VkPhysicalDeviceFeatures2){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2},
                                                             NULL),
                    HK_ERROR_INVALID_ARGUMENT, "out_features is NULL");
    hk_check_status("borrowed: null", hk_context_create_borrowed(NULL, &other), HK_ERROR_INVALID_ARGUMENT, "borrowed is NULL");
#undef EXPECT_EMPTY
    hk_stream_destroy(s);
}

/* ---- no Vulkan driver (ctest no_driver: VK_DRIVER_FILES and VK_ICD_FILENAMES name a file that
 * does not exist, so the loader finds no ICD) ---- */
static int test_no_driver(void)
{
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.disable_pipeline_cache = 1;
    hk_context *c = (hk_context *)&c;
    hk_check_status("context without a Vulkan driver", hk_context_create(&desc, &c), HK_ERROR_NOT_FOUND,
                    "no Vulkan driver found");
    hk_check(c == NULL, "no context", NULL);
    hk_check(strstr(hk_last_error(), "mesa-vulkan-drivers") != NULL, "the message says what to install", "%s",
             hk_last_error());
    uint32_t count = 99;
    char names[4][256];
    hk_check_status("enumerate without a Vulkan driver", hk_enumerate_devices(names, NULL, 4, &count),
                    HK_ERROR_NOT_FOUND, "no Vulkan driver found");
    hk_check(count == 0, "no devices counted", "%u", count);
    return hk_test_finish(NULL);
}

/* hk_get_rows and hk_moe_combine: every refusal, with its message, and nothing written. The
 * weights buffer w holds 16 Q8_0 rows of k = 32 (576 bytes), x 256 floats, y 64. */
static void test_gather(void)
{
    const uint32_t id_data[2] = {0, 15};
    hk_buffer *idb = hk_test_buffer(ctx, sizeof id_data, id_data);
    hk_view wv = {w, 0}, xv = {x, 0}, yv = {y, 0}, idv = {idb, 0}, none = {NULL, 0}, wts = {x, 512};
    poison_y();
    hk_check_status("valid get_rows", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, wv, idv, yv, 2, 16, 32), HK_OK, NULL);
    EXPECT("get_rows null context", hk_get_rows(NULL, NULL, HK_TYPE_Q8_0, wv, idv, yv, 2, 16, 32),
           HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("get_rows q8_1", hk_get_rows(ctx, NULL, HK_TYPE_Q8_1, wv, idv, yv, 2, 16, 32), HK_ERROR_UNSUPPORTED,
           "wtype=q8_1 (4) is not a get_rows type (f32, f16, q8_0, q4_k, q5_k, q6_k)");
    EXPECT("get_rows unknown type", hk_get_rows(ctx, NULL, (hk_type)99, wv, idv, yv, 2, 16, 32), HK_ERROR_UNSUPPORTED,
           "wtype=? (99)");
    EXPECT("get_rows n_ids 0", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, wv, idv, yv, 0, 16, 32), HK_ERROR_INVALID_ARGUMENT,
           "n_ids=0 and rows=16 must both be positive");
    EXPECT("get_rows rows 0", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, wv, idv, yv, 2, 0, 32), HK_ERROR_INVALID_ARGUMENT,
           "n_ids=2 and rows=0 must both be positive");
    EXPECT("get_rows k off the block", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, wv, idv, yv, 2, 16, 48),
           HK_ERROR_INVALID_ARGUMENT, "k=48 is not a positive multiple of 32 (q8_0 block)");
    EXPECT("get_rows k 0", hk_get_rows(ctx, NULL, HK_TYPE_F16, wv, idv, yv, 2, 16, 0), HK_ERROR_INVALID_ARGUMENT,
           "k=0 is not a positive multiple of 1 (f16 block)");
    EXPECT("get_rows past 2^32 values", hk_get_rows(ctx, NULL, HK_TYPE_F32, wv, idv, yv, 65536, 1, 65536),
           HK_ERROR_INVALID_ARGUMENT, "n_ids=65536 x k=65536 is more than 2^32 - 1 values");
    EXPECT("get_rows weights past the end", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, wv, idv, yv, 2, 17, 32),
           HK_ERROR_INVALID_ARGUMENT, "w needs 578 bytes at offset 0, past the end of its 576-byte buffer");
    /* 2^31 rows of 2^33 bytes: 2^64 bytes, which wraps to 0 in 64 bits */
    EXPECT("get_rows weights past 2^64 bytes", hk_get_rows(ctx, NULL, HK_TYPE_F32, wv, idv, yv, 1, 1u << 31, 1u << 31),
           HK_ERROR_INVALID_ARGUMENT, "w needs 18446744073709551615 bytes");
    EXPECT("get_rows f32 weights misaligned", hk_get_rows(ctx, NULL, HK_TYPE_F32, (hk_view){w, 2}, idv, yv, 2, 4, 32),
           HK_ERROR_INVALID_ARGUMENT, "w.offset=2 is not a multiple of 4");
    EXPECT("get_rows q8_0 weights misaligned", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, (hk_view){w, 1}, idv, yv, 2, 8, 32),
           HK_ERROR_INVALID_ARGUMENT, "w.offset=1 is not a multiple of 2");
    EXPECT("get_rows ids misaligned", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, wv, (hk_view){x, 2}, yv, 2, 16, 32),
           HK_ERROR_INVALID_ARGUMENT, "ids.offset=2 is not a multiple of 4");
    EXPECT("get_rows ids past the end", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, wv, idv, yv, 3, 16, 32),
           HK_ERROR_INVALID_ARGUMENT, "ids needs 12 bytes at offset 0, past the end of its 8-byte buffer");
    EXPECT("get_rows output too small", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, wv, idv, (hk_view){small, 0}, 2, 16, 32),
           HK_ERROR_INVALID_ARGUMENT, "y needs 256 bytes");
    EXPECT("get_rows output on the weights", hk_get_rows(ctx, NULL, HK_TYPE_Q8_0, wv, idv, (hk_view){w, 0}, 2, 8, 32),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps w");

    poison_y();
    hk_check_status("valid moe_combine", hk_moe_combine(ctx, NULL, xv, wts, none, yv, 2, 2, 16), HK_OK, NULL);
    hk_check_status("valid moe_combine in place", hk_moe_combine(ctx, NULL, xv, wts, yv, yv, 2, 2, 16), HK_OK, NULL);
    EXPECT("combine null context", hk_moe_combine(NULL, NULL, xv, wts, none, yv, 2, 2, 16), HK_ERROR_INVALID_ARGUMENT,
           "context is NULL");
    EXPECT("combine tokens 0", hk_moe_combine(ctx, NULL, xv, wts, none, yv, 0, 2, 16), HK_ERROR_INVALID_ARGUMENT,
           "tokens=0 and n=16 must both be positive");
    EXPECT("combine n 0", hk_moe_combine(ctx, NULL, xv, wts, none, yv, 2, 2, 0), HK_ERROR_INVALID_ARGUMENT,
           "tokens=2 and n=0 must both be positive");
    EXPECT("combine top_k 0", hk_moe_combine(ctx, NULL, xv, wts, none, yv, 2, 0, 16), HK_ERROR_INVALID_ARGUMENT,
           "top_k=0 must be in 1..64");
    EXPECT("combine top_k 65", hk_moe_combine(ctx, NULL, xv, wts, none, yv, 2, 65, 16), HK_ERROR_INVALID_ARGUMENT,
           "top_k=65 must be in 1..64");
    EXPECT("combine past 2^32 values", hk_moe_combine(ctx, NULL, xv, wts, none, yv, 65536, 64, 1024),
           HK_ERROR_INVALID_ARGUMENT, "tokens=65536 x top_k=64 x n=1024 is more than 2^32 - 1 values");
    EXPECT("combine past 2^64 values", hk_moe_combine(ctx, NULL, xv, wts, none, yv, UINT32_MAX, 64, UINT32_MAX),
           HK_ERROR_INVALID_ARGUMENT, "is more than 2^32 - 1 values");
    EXPECT("combine residual null with offset", hk_moe_combine(ctx, NULL, xv, wts, (hk_view){NULL, 4}, yv, 2, 2, 16),
           HK_ERROR_INVALID_ARGUMENT, "residual.buffer is NULL but its offset is 4");
    EXPECT("combine x past the end", hk_moe_combine(ctx, NULL, xv, wts, none, yv, 2, 8, 32), HK_ERROR_INVALID_ARGUMENT,
           "x needs 2048 bytes at offset 0, past the end of its 1024-byte buffer");
    EXPECT("combine weights misaligned", hk_moe_combine(ctx, NULL, xv, (hk_view){x, 514}, none, yv, 2, 2, 16),
           HK_ERROR_INVALID_ARGUMENT, "weights.offset=514 is not a multiple of 4");
    EXPECT("combine residual too small", hk_moe_combine(ctx, NULL, xv, wts, (hk_view){small, 0}, yv, 2, 2, 16),
           HK_ERROR_INVALID_ARGUMENT, "residual needs 128 bytes");
    EXPECT("combine y partly on residual", hk_moe_combine(ctx, NULL, xv, wts, yv, (hk_view){y, 4}, 2, 2, 16),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps residual");
    /* with top_k 1, x and y have the same bytes, and with top_k = n weights and y: in place is
     * for the residual only */
    EXPECT("combine y exactly x", hk_moe_combine(ctx, NULL, (hk_view){y, 0}, wts, none, yv, 2, 1, 16),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps x");
    EXPECT("combine y exactly weights", hk_moe_combine(ctx, NULL, xv, (hk_view){y, 0}, none, yv, 2, 4, 4),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps weights");
    EXPECT("combine in place on x", hk_moe_combine(ctx, NULL, (hk_view){y, 0}, wts, yv, yv, 2, 1, 16),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps x");
    hk_buffer_destroy(idb);
}

/* hk_rmsnorm_q8_1: every refusal, with y and yq both in the poisoned y buffer (y 128 bytes at 0,
 * yq 36 at 128), so that a refused call that wrote either is caught. */
static void test_rmsnorm_q8_1_args(void)
{
    hk_view xv = {x, 0}, ry = {y, 0}, rq = {y, 128}, none = {NULL, 0};
    poison_y();
    hk_check_status("valid rmsnorm_q8_1", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, rq, 1, 32, 1e-5f), HK_OK, NULL);
    poison_y();
    hk_check_status("valid rmsnorm_q8_1 without y", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, none, rq, 1, 32, 1e-5f), HK_OK,
                    NULL);
    poison_y();
    hk_check_status("valid rmsnorm_q8_1 in place (y is x)", hk_rmsnorm_q8_1(ctx, NULL, ry, xv, ry, rq, 1, 32, 1e-5f),
                    HK_OK, NULL);
    EXPECT("rmsnorm_q8_1 null context", hk_rmsnorm_q8_1(NULL, NULL, xv, xv, ry, rq, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "hk_rmsnorm_q8_1: context is NULL");
    EXPECT("rmsnorm_q8_1 rows zero", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, rq, 0, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "hk_rmsnorm_q8_1: rows=0 and n=32 must both be positive");
    EXPECT("rmsnorm_q8_1 n zero", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, rq, 1, 0, 1e-5f), HK_ERROR_INVALID_ARGUMENT,
           "rows=1 and n=0 must both be positive");
    EXPECT("rmsnorm_q8_1 n not a multiple of 32", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, rq, 1, 48, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "hk_rmsnorm_q8_1: n=48 is not a multiple of 32 (q8_1 block)");
    EXPECT("rmsnorm_q8_1 n past the limit", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, rq, 1, HK_RMSNORM_MAX_N + 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "n=1048608 exceeds the limit n <= 1048576");
    EXPECT("rmsnorm_q8_1 eps zero", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, rq, 1, 32, 0.0f), HK_ERROR_INVALID_ARGUMENT,
           "eps=0 must be positive and finite");
    EXPECT("rmsnorm_q8_1 eps negative", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, rq, 1, 32, -1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "eps=-1e-05 must be positive and finite");
    EXPECT("rmsnorm_q8_1 eps inf", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, rq, 1, 32, 1.0f / 0.0f),
           HK_ERROR_INVALID_ARGUMENT, "eps=inf must be positive and finite");
    EXPECT("rmsnorm_q8_1 eps nan", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, rq, 1, 32, 0.0f / 0.0f),
           HK_ERROR_INVALID_ARGUMENT, "must be positive and finite");
    EXPECT("rmsnorm_q8_1 y null with an offset",
           hk_rmsnorm_q8_1(ctx, NULL, xv, xv, (hk_view){NULL, 4}, rq, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "y.buffer is NULL but its offset is 4: pass {NULL, 0} for no y");
    EXPECT("rmsnorm_q8_1 yq null", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, none, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "yq.buffer is NULL");
    EXPECT("rmsnorm_q8_1 x null", hk_rmsnorm_q8_1(ctx, NULL, none, xv, ry, rq, 1, 32, 1e-5f), HK_ERROR_INVALID_ARGUMENT,
           "x.buffer is NULL");
    EXPECT("rmsnorm_q8_1 weight null", hk_rmsnorm_q8_1(ctx, NULL, xv, none, ry, rq, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "weight.buffer is NULL");
    EXPECT("rmsnorm_q8_1 x past the end", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, none, rq, 5, 64, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "x needs 1280 bytes at offset 0, past the end of its 1024-byte buffer");
    EXPECT("rmsnorm_q8_1 weight past the end",
           hk_rmsnorm_q8_1(ctx, NULL, xv, (hk_view){x, 896}, none, rq, 1, 64, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "weight needs 256 bytes at offset 896, past the end of its 1024-byte buffer");
    EXPECT("rmsnorm_q8_1 y past the end", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, (hk_view){y, 192}, rq, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "y needs 128 bytes at offset 192, past the end of its 256-byte buffer");
    EXPECT("rmsnorm_q8_1 yq too small", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, (hk_view){small, 0}, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "yq needs 36 bytes at offset 0, past the end of its 8-byte buffer");
    EXPECT("rmsnorm_q8_1 x misaligned", hk_rmsnorm_q8_1(ctx, NULL, (hk_view){x, 2}, xv, ry, rq, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "x.offset=2 is not a multiple of 4");
    EXPECT("rmsnorm_q8_1 weight misaligned", hk_rmsnorm_q8_1(ctx, NULL, xv, (hk_view){x, 6}, ry, rq, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "weight.offset=6 is not a multiple of 4");
    EXPECT("rmsnorm_q8_1 y misaligned",
           hk_rmsnorm_q8_1(ctx, NULL, xv, xv, (hk_view){y, 2}, (hk_view){y, 132}, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "y.offset=2 is not a multiple of 4");
    EXPECT("rmsnorm_q8_1 yq misaligned", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, (hk_view){y, 130}, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "yq.offset=130 is not a multiple of 4");
    EXPECT("rmsnorm_q8_1 yq overlaps x",
           hk_rmsnorm_q8_1(ctx, NULL, (hk_view){y, 128}, xv, ry, (hk_view){y, 192}, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "output yq overlaps x");
    EXPECT("rmsnorm_q8_1 yq overlaps weight",
           hk_rmsnorm_q8_1(ctx, NULL, xv, (hk_view){y, 0}, none, (hk_view){y, 64}, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "output yq overlaps weight");
    EXPECT("rmsnorm_q8_1 yq overlaps y", hk_rmsnorm_q8_1(ctx, NULL, xv, xv, ry, (hk_view){y, 100}, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps yq");
    EXPECT("rmsnorm_q8_1 yq is x", hk_rmsnorm_q8_1(ctx, NULL, rq, xv, none, rq, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "output yq overlaps x");
    EXPECT("rmsnorm_q8_1 y overlaps x in part",
           hk_rmsnorm_q8_1(ctx, NULL, (hk_view){y, 4}, xv, ry, (hk_view){y, 160}, 1, 32, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps x");
}

/* hk_matvec_int8_add and hk_matvec_int8_glu: every refusal, with its message, and nothing written.
 * w holds 4 Q4_K rows of k = 256 (576 bytes; or 16 Q8_0 rows of k = 32), x 256 floats (Q8_1 blocks
 * of k = 256 take its first 288 bytes), y 64 floats. */
static void test_matvec_fused(void)
{
    hk_view wv = {w, 0}, xv = {x, 0}, yv = {y, 0}, res = {x, 512};
    poison_y();
    hk_check_status("valid matvec_int8_add", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, res, yv, rows, k),
                    HK_OK, NULL);
    hk_check_status("valid matvec_int8_add in place",
                    hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, yv, yv, rows, k), HK_OK, NULL);
    EXPECT("add null context", hk_matvec_int8_add(NULL, NULL, HK_TYPE_Q4_K, wv, xv, res, yv, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("add f16", hk_matvec_int8_add(ctx, NULL, HK_TYPE_F16, wv, xv, res, yv, rows, k), HK_ERROR_UNSUPPORTED,
           "hk_matvec_int8_add: wtype=f16 (5) is not a matvec weight type (q8_0, q4_k, q6_k, q5_k)");
    EXPECT("add rows zero", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, res, yv, 0, k),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_add: rows is 0");
    EXPECT("add k off the block", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, res, yv, rows, 100),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_add: k=100 is not a positive multiple of 256 (q4_k block)");
    EXPECT("add k past the limit",
           hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, res, yv, rows, HK_MATVEC_MAX_K + 256),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_add: k=98560 exceeds the limit");
    EXPECT("add w misaligned", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, (hk_view){w, 2}, xv, res, yv, 1, k),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_add: w.offset=2 is not a multiple of 16");
    EXPECT("add xq too small", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, (hk_view){x, 768}, res, yv, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "xq needs 288 bytes at offset 768");
    EXPECT("add residual null", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, (hk_view){NULL, 0}, yv, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_add: residual.buffer is NULL");
    EXPECT("add residual misaligned", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, (hk_view){x, 514}, yv, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "residual.offset=514 is not a multiple of 4");
    EXPECT("add residual too small", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, (hk_view){small, 0}, yv, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "residual needs 16 bytes at offset 0, past the end of its 8-byte buffer");
    EXPECT("add y past the end", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, res, (hk_view){y, 248}, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "y needs 16 bytes at offset 248");
    EXPECT("add y overlaps residual in part",
           hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q4_K, wv, xv, (hk_view){y, 4}, yv, rows, k), HK_ERROR_INVALID_ARGUMENT,
           "output y overlaps residual");
    /* in place for the residual only: y exactly xq (9 rows and 36 bytes each at k = 32) is refused,
     * and so is an in-place y that overlaps the weights */
    EXPECT("add y exactly xq", hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q8_0, wv, yv, res, yv, 9, 32),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps xq");
    EXPECT("add in place on the weights",
           hk_matvec_int8_add(ctx, NULL, HK_TYPE_Q8_0, (hk_view){y, 64}, xv, (hk_view){y, 64}, (hk_view){y, 64}, 1, 32),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps w");

    poison_y();
    hk_check_status("valid matvec_int8_glu", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q4_K, wv, wv, xv, yv, rows, k,
                                                                HK_GLU_GELU_TANH), HK_OK, NULL);
    EXPECT("glu mode", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q4_K, wv, wv, xv, yv, rows, k, (hk_glu_mode)2),
           HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_glu: mode=2 is not an hk_glu_mode (HK_GLU_SILU, HK_GLU_GELU_TANH)");
    EXPECT("glu null context", hk_matvec_int8_glu(NULL, NULL, HK_TYPE_Q4_K, wv, wv, xv, yv, rows, k, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("glu f32", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_F32, wv, wv, xv, yv, rows, k, HK_GLU_SILU),
           HK_ERROR_UNSUPPORTED, "hk_matvec_int8_glu: wtype=f32 (0) is not a matvec weight type");
    EXPECT("glu rows zero", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q4_K, wv, wv, xv, yv, 0, k, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_glu: rows is 0");
    EXPECT("glu k off the block", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q6_K, wv, wv, xv, yv, 1, 512 + 32, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "k=544 is not a positive multiple of 256 (q6_k block)");
    EXPECT("glu rows past the limit",
           hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xv, yv, HK_MATVEC_MAX_ROWS + 1, 32, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "rows=16777217 exceeds the limit");
    EXPECT("glu rows and k past the limit",
           hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xv, yv, 65537, 98304, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "ceil(rows/32768)*k=294912 exceeds the limit");
    EXPECT("glu w_gate past the end", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q4_K, wv, wv, xv, yv, 5, k, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "w_gate needs 720 bytes at offset 0, past the end of its 576-byte buffer");
    EXPECT("glu w_up null", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q4_K, wv, (hk_view){NULL, 0}, xv, yv, rows, k,
                                               HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_glu: w_up.buffer is NULL");
    EXPECT("glu w_up misaligned", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q5_K, wv, (hk_view){w, 8}, xv, yv, 1, k,
                                                     HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "w_up.offset=8 is not a multiple of 16");
    EXPECT("glu w_up past the end", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q4_K, wv, (hk_view){w, 144}, xv, yv, rows, k,
                                                       HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "w_up needs 576 bytes at offset 144, past the end of its 576-byte buffer");
    EXPECT("glu xq too small", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q4_K, wv, wv, (hk_view){x, 768}, yv, rows, k,
                                                  HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "xq needs 288 bytes at offset 768");
    EXPECT("glu y overlaps w_up", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q8_0, wv, yv, xv, (hk_view){y, 32}, 1, 32,
                                                     HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps w_up");
    EXPECT("glu y exactly xq", hk_matvec_int8_glu(ctx, NULL, HK_TYPE_Q8_0, wv, wv, yv, yv, 9, 32, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps xq");
}

/* hk_matvec_int8_add_norm and its workspace size: every refusal, with its message, and nothing
 * written. 32 Q8_0 rows of k = 32 and their inputs in a buffer of their own; y (the global one,
 * poisoned) holds the call's y (32 floats) and yq (one block at 128). */
static void test_matvec_add_norm(void)
{
    hk_buffer *a = NULL;
    if (!hk_check_status("add_norm buffer", hk_buffer_create(ctx, 4096, &a), HK_OK, NULL))
        return;
    hk_view wv = {a, 0}, xv = {a, 1280}, res = {a, 1536}, nw = {a, 2048}, yn = {a, 2560}, ws = {a, 2816};
    hk_view yv = {y, 0}, yq = {y, 128};
    const uint32_t n = 32, kk = 32;
    uint64_t bytes = 0;
    hk_check_status("add_norm workspace bytes", hk_matvec_int8_add_norm_workspace_bytes(ctx, n, &bytes), HK_OK, NULL);
    hk_check(bytes > 0 && bytes <= 1024, "add_norm workspace bytes for 32 rows", "%llu", (unsigned long long)bytes);
    hk_check_status("add_norm workspace bytes null out", hk_matvec_int8_add_norm_workspace_bytes(ctx, n, NULL),
                    HK_ERROR_INVALID_ARGUMENT, "out_bytes is NULL");
    hk_check_status("add_norm workspace bytes rows", hk_matvec_int8_add_norm_workspace_bytes(ctx, 33, &bytes),
                    HK_ERROR_INVALID_ARGUMENT, "rows=33 is not a multiple of 32 from 32 to 32768");
    hk_check(bytes == 0, "add_norm workspace bytes refused: 0", NULL);
    hk_check_status("add_norm workspace bytes null context", hk_matvec_int8_add_norm_workspace_bytes(NULL, n, &bytes),
                    HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    hk_norm_out norm = {nw, 1e-6f, yq, {NULL, 0}, ws}, bad;
    poison_y();
    hk_check_status("valid matvec_int8_add_norm",
                    hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk, &norm), HK_OK, NULL);
    bad = norm;
    bad.yn = yn;
    hk_check_status("valid matvec_int8_add_norm in place, with yn",
                    hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, yv, yv, n, kk, &bad), HK_OK, NULL);
    EXPECT("add_norm null norm", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk, NULL),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_add_norm: norm is NULL");
    EXPECT("add_norm null context", hk_matvec_int8_add_norm(NULL, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk, &norm),
           HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("add_norm rows off the block", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, 16, kk,
                                                                 &norm),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_add_norm: rows=16 is not a multiple of 32 up to 32768");
    EXPECT("add_norm rows past the tail's limit",
           hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, 32800, kk, &norm),
           HK_ERROR_INVALID_ARGUMENT, "rows=32800 is not a multiple of 32 up to 32768");
    bad = norm;
    bad.eps = 0.0f;
    EXPECT("add_norm eps 0", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk, &bad),
           HK_ERROR_INVALID_ARGUMENT, "norm->eps=0 must be positive and finite");
    bad.eps = NAN;
    EXPECT("add_norm eps NaN", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk, &bad),
           HK_ERROR_INVALID_ARGUMENT, "must be positive and finite");
    bad = norm;
    bad.yn = (hk_view){NULL, 4};
    EXPECT("add_norm yn neither a view nor absent",
           hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk, &bad), HK_ERROR_INVALID_ARGUMENT,
           "norm->yn");
    bad = norm;
    bad.weight = (hk_view){a, 4000};
    EXPECT("add_norm weight past the end", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk,
                                                                  &bad),
           HK_ERROR_INVALID_ARGUMENT, "norm->weight needs 128 bytes at offset 4000");
    bad = norm;
    bad.workspace = (hk_view){a, 4096};
    EXPECT("add_norm workspace too small", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk,
                                                                  &bad),
           HK_ERROR_INVALID_ARGUMENT, "norm->workspace needs");
    bad.workspace = (hk_view){NULL, 0};
    EXPECT("add_norm workspace null", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk, &bad),
           HK_ERROR_INVALID_ARGUMENT, "norm->workspace.buffer is NULL");
    bad = norm;
    bad.yq = (hk_view){y, 64};
    EXPECT("add_norm yq overlaps y", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk, &bad),
           HK_ERROR_INVALID_ARGUMENT, "overlaps");
    bad = norm;
    bad.workspace = (hk_view){y, 128};
    EXPECT("add_norm workspace is yq", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk, &bad),
           HK_ERROR_INVALID_ARGUMENT, "overlaps");
    bad = norm;
    bad.yn = res;
    EXPECT("add_norm yn is the residual", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_Q8_0, wv, xv, res, yv, n, kk,
                                                                 &bad),
           HK_ERROR_INVALID_ARGUMENT, "overlaps");
    EXPECT("add_norm f16", hk_matvec_int8_add_norm(ctx, NULL, HK_TYPE_F16, wv, xv, res, yv, n, kk, &norm),
           HK_ERROR_UNSUPPORTED, "is not a matvec weight type");
    hk_buffer_destroy(a);
}

/* hk_matvec_int8_multi: every refusal, with its message, and nothing written (w, x, y as for
 * test_matvec_fused: 4 Q4_K rows of k = 256 in w, Q8_1 blocks in x, 64 floats of y). */
static void test_matvec_multi(void)
{
    hk_view xv = {x, 0}, yv = {y, 0};
    const hk_view ws[3] = {{w, 0}, {w, 144}, {w, 288}};
    const uint32_t r121[3] = {1, 2, 1};
#define MULTI(...) hk_matvec_int8_multi(ctx, NULL, HK_TYPE_Q4_K, __VA_ARGS__)
    poison_y();
    hk_check_status("valid matvec_int8_multi", MULTI(3, ws, r121, xv, yv, k), HK_OK, NULL);
    hk_check_status("valid matvec_int8_multi of 1", MULTI(1, ws, &rows, xv, yv, k), HK_OK, NULL);
    EXPECT("multi null context", hk_matvec_int8_multi(NULL, NULL, HK_TYPE_Q4_K, 3, ws, r121, xv, yv, k),
           HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("multi n zero", MULTI(0, ws, r121, xv, yv, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: n=0 is not in 1..3");
    EXPECT("multi n four", MULTI(4, ws, r121, xv, yv, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: n=4 is not in 1..3");
    EXPECT("multi w null", MULTI(3, NULL, r121, xv, yv, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: w is NULL");
    EXPECT("multi rows null", MULTI(3, ws, NULL, xv, yv, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: rows is NULL");
    EXPECT("multi rows[1] zero", MULTI(3, ws, ((const uint32_t[]){1, 0, 1}), xv, yv, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: rows[1] is 0");
    EXPECT("multi f16", hk_matvec_int8_multi(ctx, NULL, HK_TYPE_F16, 3, ws, r121, xv, yv, k), HK_ERROR_UNSUPPORTED,
           "hk_matvec_int8_multi: wtype=f16 (5) is not a matvec weight type");
    EXPECT("multi k off the block", MULTI(3, ws, r121, xv, yv, 100), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: k=100 is not a positive multiple of 256 (q4_k block)");
    EXPECT("multi rows[2] past the limit",
           MULTI(3, ws, ((const uint32_t[]){1, 1, HK_MATVEC_MAX_ROWS + 1}), xv, yv, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: rows=16777217 exceeds the limit");
    /* each matrix within the limits, their total not */
    EXPECT("multi total rows past the limit",
           hk_matvec_int8_multi(ctx, NULL, HK_TYPE_Q8_0, 3, ws, ((const uint32_t[]){1u << 23, 1u << 23, 1}), xv, yv,
                                32),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_multi: rows[0]+...+rows[n-1]=16777217 exceeds the limit");
    EXPECT("multi total rows and k past the limit",
           hk_matvec_int8_multi(ctx, NULL, HK_TYPE_Q8_0, 3, ws, ((const uint32_t[]){32768, 32768, 1}), xv, yv, 98304),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_multi: ceil(rows/32768)*k=294912 exceeds the limit");
    EXPECT("multi w[0] past the end", MULTI(3, ws, ((const uint32_t[]){5, 1, 1}), xv, yv, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: w[0] needs 720 bytes at offset 0, past the end of its 576-byte buffer");
    EXPECT("multi w[1] past the end", MULTI(2, ws, ((const uint32_t[]){1, 4}), xv, yv, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: w[1] needs 576 bytes at offset 144, past the end of its 576-byte buffer");
    EXPECT("multi w[1] null", MULTI(3, ((const hk_view[]){{w, 0}, {NULL, 0}, {w, 0}}), r121, xv, yv, k),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_multi: w[1].buffer is NULL");
    EXPECT("multi w[2] misaligned",
           hk_matvec_int8_multi(ctx, NULL, HK_TYPE_Q5_K, 3, ((const hk_view[]){{w, 0}, {w, 0}, {w, 8}}),
                                ((const uint32_t[]){1, 1, 1}), xv, yv, k),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_multi: w[2].offset=8 is not a multiple of 16");
    EXPECT("multi xq too small", MULTI(3, ws, r121, (hk_view){x, 768}, yv, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: xq needs 288 bytes at offset 768");
    EXPECT("multi y past the end", MULTI(3, ws, r121, xv, (hk_view){y, 248}, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: y needs 16 bytes at offset 248");
    EXPECT("multi y misaligned", MULTI(3, ws, r121, xv, (hk_view){y, 2}, k), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_multi: y.offset=2 is not a multiple of 4");
    /* Q8_0 rows of k = 32 are 34 bytes: w[2] over y's 12 bytes, y inside w[0]'s row, y exactly xq */
    EXPECT("multi y overlaps w[2]",
           hk_matvec_int8_multi(ctx, NULL, HK_TYPE_Q8_0, 3, ((const hk_view[]){{w, 0}, {w, 0}, {y, 4}}),
                                ((const uint32_t[]){1, 1, 1}), xv, yv, 32),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_multi: output y overlaps w[2]");
    EXPECT("multi y overlaps w[0]",
           hk_matvec_int8_multi(ctx, NULL, HK_TYPE_Q8_0, 1, ((const hk_view[]){{y, 32}}), ((const uint32_t[]){1}), xv,
                                (hk_view){y, 36}, 32),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_multi: output y overlaps w[0]");
    EXPECT("multi y exactly xq",
           hk_matvec_int8_multi(ctx, NULL, HK_TYPE_Q8_0, 2, ws, ((const uint32_t[]){4, 5}), yv, yv, 32),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_multi: output y overlaps xq");
#undef MULTI
}

/* hk_matvec_int8_qkv: every refusal of its own, with its message, and nothing written. Q, K and V
 * are 16 Q8_0 rows of k = 32 each in w (one head of 16 values each, the views overlapping), q_out
 * at y, the caches (f32, one row) after it in y. */
static void test_matvec_qkv(void)
{
    const hk_view ws[3] = {{w, 0}, {w, 2}, {w, 4}};
    hk_view xv = {x, 0}, pos = {x, 512}, none = {NULL, 0}, qo = {y, 0}, kc = {y, 64}, vc = {y, 128};
    hk_view k_end = {y, 240}, in_x = {x, 16}, in_w = {w, 64};
    hk_rope_desc d = {.n_tokens = 1, .n_heads = 1, .n_kv_heads = 1, .head_dim = 16, .theta_base = 10000.0f,
                      .freq_scale = 1.0f, .kv = {HK_TYPE_F32, 1, 64, 64, 64, 64}};
#define QKV(roles, desc, q, k, v) hk_matvec_int8_qkv(ctx, NULL, HK_TYPE_Q8_0, roles, ws, xv, 32, desc, pos, none, q, k, v)
    const uint32_t all = HK_QKV_Q | HK_QKV_K | HK_QKV_V;
    hk_check_status("valid matvec_int8_qkv", QKV(all, &d, qo, kc, vc), HK_OK, NULL);
    hk_check_status("valid matvec_int8_qkv of V alone", QKV(HK_QKV_V, &d, none, none, vc), HK_OK, NULL);
    EXPECT("qkv null context", hk_matvec_int8_qkv(NULL, NULL, HK_TYPE_Q8_0, all, ws, xv, 32, &d, pos, none, qo, kc, vc),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_qkv: context is NULL");
    EXPECT("qkv w null", hk_matvec_int8_qkv(ctx, NULL, HK_TYPE_Q8_0, all, NULL, xv, 32, &d, pos, none, qo, kc, vc),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_qkv: w is NULL");
    EXPECT("qkv desc null", QKV(all, NULL, qo, kc, vc), HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_qkv: desc is NULL");
    EXPECT("qkv roles 0", QKV(0, &d, qo, kc, vc), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_qkv: roles=0x0 is not a nonzero mask of HK_QKV_Q, _K and _V");
    EXPECT("qkv roles past V", QKV(all | 8u, &d, qo, kc, vc), HK_ERROR_INVALID_ARGUMENT, "roles=0xf is not");
    hk_rope_desc bad = d;
    bad.neox = 1;
    EXPECT("qkv neox", QKV(all, &bad, qo, kc, vc), HK_ERROR_UNSUPPORTED, "(n_tokens=1, neox=1, norms none, kv.type=f32)");
    bad = d;
    bad.q_norm = (hk_view){x, 0};
    bad.norm_eps = 1e-6f;
    EXPECT("qkv q norm", QKV(all, &bad, qo, kc, vc), HK_ERROR_UNSUPPORTED, "norms given");
    bad = d;
    bad.n_tokens = 2;
    EXPECT("qkv two tokens", QKV(all, &bad, qo, kc, vc), HK_ERROR_UNSUPPORTED, "hk_rope serves");
    bad = d;
    bad.kv = (hk_kv_layout){HK_TYPE_Q8_0, 1, 34, 34, 34, 34};
    bad.head_dim = 32;
    EXPECT("qkv q8_0 cache", QKV(all, &bad, qo, kc, vc), HK_ERROR_UNSUPPORTED, "kv.type=q8_0");
    bad = d;
    bad.theta_base = 0.0f;
    EXPECT("qkv theta 0", QKV(all, &bad, qo, kc, vc), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_qkv: theta_base=0 is not a positive number");
    bad = d;
    bad.rot_dim = 3;
    EXPECT("qkv odd rot_dim", QKV(all, &bad, qo, kc, vc), HK_ERROR_INVALID_ARGUMENT, "rot_dim=3 is not even");
    EXPECT("qkv q_out missing", QKV(all, &d, none, kc, vc), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_qkv: q_out.buffer is NULL");
    EXPECT("qkv v_cache missing", QKV(all, &d, qo, kc, none), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_qkv: v_cache.buffer is NULL");
    EXPECT("qkv k_cache past the end", QKV(all, &d, qo, k_end, vc), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_qkv: k_cache needs 64 bytes at offset 240");
    EXPECT("qkv positions missing", hk_matvec_int8_qkv(ctx, NULL, HK_TYPE_Q8_0, all, ws, xv, 32, &d, none, none, qo, kc,
                                                       vc),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_qkv: positions.buffer is NULL");
    EXPECT("qkv q_out overlaps xq", QKV(all, &d, in_x, kc, vc), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_qkv: output q_out overlaps xq");
    EXPECT("qkv k_cache overlaps a matrix", QKV(all, &d, qo, in_w, vc), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_qkv: output k_cache overlaps w[0]");
    EXPECT("qkv f16 weights", hk_matvec_int8_qkv(ctx, NULL, HK_TYPE_F16, all, ws, xv, 32, &d, pos, none, qo, kc, vc),
           HK_ERROR_UNSUPPORTED, "hk_matvec_int8_qkv: wtype=f16 (5) is not a matvec weight type");
    EXPECT("qkv k off the block", hk_matvec_int8_qkv(ctx, NULL, HK_TYPE_Q8_0, all, ws, xv, 48, &d, pos, none, qo, kc, vc),
           HK_ERROR_INVALID_ARGUMENT, "k=48 is not a positive multiple of 32");
#undef QKV
}

/* hk_moe_matvec_int8_glu: every refusal, with its message, and nothing written. w holds 4 experts
 * of 1 Q4_K row of k = 256 (576 bytes), xq and ids in an aligned buffer, y 64 floats. */
static void test_moe_glu(hk_buffer *aligned)
{
    hk_view wv = {w, 0}, yv = {y, 0}, ids = {aligned, 2048}, xq = {aligned, 1024};
    hk_moe_shape shape = {4, 1, 256, 2, 0};
#define MOE_GLU(...) hk_moe_matvec_int8_glu(ctx, NULL, __VA_ARGS__)
    poison_y();
    hk_check_status("valid moe_matvec_int8_glu", MOE_GLU(HK_TYPE_Q4_K, wv, wv, xq, ids, yv, &shape, HK_GLU_SILU), HK_OK,
                    NULL);
    EXPECT("moe glu mode", MOE_GLU(HK_TYPE_Q4_K, wv, wv, xq, ids, yv, &shape, (hk_glu_mode)2),
           HK_ERROR_INVALID_ARGUMENT,
           "hk_moe_matvec_int8_glu: mode=2 is not an hk_glu_mode (HK_GLU_SILU, HK_GLU_GELU_TANH)");
    EXPECT("moe glu null context",
           hk_moe_matvec_int8_glu(NULL, NULL, HK_TYPE_Q4_K, wv, wv, xq, ids, yv, &shape, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("moe glu null shape", MOE_GLU(HK_TYPE_Q4_K, wv, wv, xq, ids, yv, NULL, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_glu: shape is NULL");
    EXPECT("moe glu zero slots", MOE_GLU(HK_TYPE_Q4_K, wv, wv, xq, ids, yv, &(hk_moe_shape){4, 1, 256, 0, 0},
                                         HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "n_experts=4, n=1 and slots=0 must all be positive");
    EXPECT("moe glu f16", MOE_GLU(HK_TYPE_F16, wv, wv, xq, ids, yv, &shape, HK_GLU_SILU), HK_ERROR_UNSUPPORTED,
           "hk_moe_matvec_int8_glu: wtype=f16 (5) is not a matvec weight type (q8_0, q4_k, q6_k, q5_k)");
    EXPECT("moe glu k off the block", MOE_GLU(HK_TYPE_Q4_K, wv, wv, xq, ids, yv, &(hk_moe_shape){4, 1, 100, 2, 0},
                                              HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "k=100 is not a positive multiple of 256 (q4_k block)");
    EXPECT("moe glu past HK_MATVEC_MAX_ROWS",
           MOE_GLU(HK_TYPE_Q8_0, wv, wv, xq, ids, yv, &(hk_moe_shape){1, 4096, 32, 4097, 0}, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "slots*n=16781312 exceeds the limit slots*n <= 16777216");
    EXPECT("moe glu w_gate past the end",
           MOE_GLU(HK_TYPE_Q4_K, wv, wv, xq, ids, yv, &(hk_moe_shape){5, 1, 256, 2, 0}, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "w_gate needs 720 bytes at offset 0, past the end of its 576-byte buffer");
    EXPECT("moe glu w_up null", MOE_GLU(HK_TYPE_Q4_K, wv, (hk_view){NULL, 0}, xq, ids, yv, &shape, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_glu: w_up.buffer is NULL");
    EXPECT("moe glu w_up misaligned",
           MOE_GLU(HK_TYPE_Q5_K, wv, (hk_view){w, 8}, xq, ids, yv, &(hk_moe_shape){1, 1, 256, 2, 0}, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "w_up.offset=8 is not a multiple of 16");
    EXPECT("moe glu w_up past the end", MOE_GLU(HK_TYPE_Q4_K, wv, (hk_view){w, 144}, xq, ids, yv, &shape, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "w_up needs 576 bytes at offset 144, past the end of its 576-byte buffer");
    EXPECT("moe glu xq past the end", MOE_GLU(HK_TYPE_Q4_K, wv, wv, (hk_view){aligned, 3840}, ids, yv, &shape,
                                              HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "xq needs 288 bytes at offset 3840");
    EXPECT("moe glu ids past the end", MOE_GLU(HK_TYPE_Q4_K, wv, wv, xq, (hk_view){aligned, 4092}, yv, &shape,
                                               HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "ids needs 8 bytes at offset 4092");
    EXPECT("moe glu y past the end", MOE_GLU(HK_TYPE_Q4_K, wv, wv, xq, ids, (hk_view){y, 252}, &shape, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "y needs 8 bytes at offset 252");
    EXPECT("moe glu y overlaps w_up",
           MOE_GLU(HK_TYPE_Q8_0, wv, yv, xq, ids, (hk_view){y, 32}, &(hk_moe_shape){1, 1, 32, 1, 0}, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps w_up");
#undef MOE_GLU
}

/* hk_matvec_int8_glu_q8_1 and hk_moe_matvec_int8_glu_q8_1: the refusals of their own (rows or n not
 * a multiple of 32, the blocks' view) with their messages, and nothing written; the rest are the
 * GLUs' checks (test_matvec_fused, test_moe_glu). wq holds 32 Q8_0 rows of k = 32 (one expert of n
 * = 32), x a Q8_1 block, the ids and xq of the MoE in an aligned buffer. */
static void test_glu_q8(hk_buffer *aligned)
{
    hk_buffer *wq = hk_test_buffer(ctx, 32 * 34, NULL);
    hk_view wv = {wq, 0}, xv = {x, 0}, yv = {y, 0}, ids = {aligned, 2048}, xq = {aligned, 1024};
    hk_moe_shape shape = {1, 32, 32, 1, 0};
    poison_y();
    hk_check_status("valid matvec_int8_glu_q8_1",
                    hk_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xv, yv, 32, 32, HK_GLU_SILU), HK_OK, NULL);
    hk_check_status("valid moe_matvec_int8_glu_q8_1",
                    hk_moe_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xq, ids, yv, &shape, HK_GLU_SILU),
                    HK_OK, NULL);
    EXPECT("glu q8_1 rows off the block",
           hk_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xv, yv, 16, 32, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_glu_q8_1: rows=16 is not a multiple of 32 (the Q8_1 output's "
           "blocks)");
    EXPECT("glu q8_1 mode", hk_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xv, yv, 32, 32, (hk_glu_mode)2),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_glu_q8_1: mode=2 is not an hk_glu_mode");
    EXPECT("glu q8_1 yq past the end",
           hk_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xv, (hk_view){y, Y_FLOATS * 4 - 32}, 32, 32,
                                   HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "yq needs 36 bytes at offset");
    EXPECT("glu q8_1 yq misaligned",
           hk_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xv, (hk_view){y, 2}, 32, 32, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "yq.offset=2 is not a multiple of 4");
    EXPECT("glu q8_1 yq overlaps xq",
           hk_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, yv, (hk_view){y, 4}, 32, 32, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "output yq overlaps xq");
    EXPECT("moe glu q8_1 n off the block",
           hk_moe_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xq, ids, yv, &(hk_moe_shape){2, 16, 32, 1, 0},
                                       HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_glu_q8_1: n=16 is not a multiple of 32");
    EXPECT("moe glu q8_1 null shape",
           hk_moe_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xq, ids, yv, NULL, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_glu_q8_1: shape is NULL");
    EXPECT("moe glu q8_1 yq past the end",
           hk_moe_matvec_int8_glu_q8_1(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xq, ids, (hk_view){y, Y_FLOATS * 4 - 32},
                                       &shape, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "yq needs 36 bytes at offset");
    /* the ranking form: its top_k, its experts' limit and the logits' view (ids' place) */
#define RANKED(wq_, logits, yq, sh, top_k) \
    hk_moe_matvec_int8_glu_q8_1_ranked(ctx, NULL, HK_TYPE_Q8_0, wq_, wq_, xq, logits, yq, sh, top_k, HK_GLU_SILU)
    hk_check_status("valid moe_matvec_int8_glu_q8_1_ranked", RANKED(wv, ids, yv, &shape, 1), HK_OK, NULL);
    EXPECT("ranked top_k 0", RANKED(wv, ids, yv, &shape, 0), HK_ERROR_INVALID_ARGUMENT,
           "hk_moe_matvec_int8_glu_q8_1_ranked: top_k=0 must be 1..min(n_experts=1, 64) and divide slots=1");
    EXPECT("ranked top_k over n_experts", RANKED(wv, ids, yv, &((hk_moe_shape){1, 32, 32, 2, 0}), 2),
           HK_ERROR_INVALID_ARGUMENT, "top_k=2 must be 1..min(n_experts=1, 64)");
    EXPECT("ranked top_k not dividing slots", RANKED(wv, ids, yv, &((hk_moe_shape){4, 32, 32, 3, 0}), 2),
           HK_ERROR_INVALID_ARGUMENT, "and divide slots=3");
    EXPECT("ranked top_k over 64", RANKED(wv, ids, yv, &((hk_moe_shape){128, 32, 32, 65, 0}), 65),
           HK_ERROR_INVALID_ARGUMENT, "top_k=65 must be 1..min(n_experts=128, 64)");
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    char many[96];
    snprintf(many, sizeof many, "n_experts=%u is over 64 x the subgroup size %u", 64 * caps.subgroup_size + 1,
             caps.subgroup_size);
    EXPECT("ranked more experts than the lanes mark", RANKED(wv, ids, yv,
           &((hk_moe_shape){64 * caps.subgroup_size + 1, 32, 32, 1, 0}), 1), HK_ERROR_UNSUPPORTED, many);
    EXPECT("ranked n off the block", RANKED(wv, ids, yv, &((hk_moe_shape){2, 16, 32, 1, 0}), 1),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_glu_q8_1_ranked: n=16 is not a multiple of 32");
    EXPECT("ranked null shape", RANKED(wv, ids, yv, NULL, 1), HK_ERROR_INVALID_ARGUMENT,
           "hk_moe_matvec_int8_glu_q8_1_ranked: shape is NULL");
    EXPECT("ranked logits past the end", RANKED(wv, ((hk_view){aligned, 4096}), yv, &shape, 1),
           HK_ERROR_INVALID_ARGUMENT, "logits needs 4 bytes at offset 4096");
    EXPECT("ranked logits misaligned", RANKED(wv, ((hk_view){aligned, 2050}), yv, &shape, 1),
           HK_ERROR_INVALID_ARGUMENT, "logits.offset=2050 is not a multiple of 4");
    EXPECT("ranked mode", hk_moe_matvec_int8_glu_q8_1_ranked(ctx, NULL, HK_TYPE_Q8_0, wv, wv, xq, ids, yv, &shape, 1,
                                                             (hk_glu_mode)2),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_glu_q8_1_ranked: mode=2 is not an hk_glu_mode");
#undef RANKED
    hk_buffer_destroy(wq);
}

/* hk_moe_matvec_int8_combine: every refusal, with its message, and nothing written. w holds 4
 * experts of 1 Q4_K row of k = 256, xq, ids and the weights in an aligned buffer, y 64 floats
 * (2 tokens of top-2 into y[0..1], the residual y itself). */
static void test_moe_combine(hk_buffer *aligned)
{
    hk_view wv = {w, 0}, yv = {y, 0}, ids = {aligned, 2048}, xq = {aligned, 1024}, gw = {aligned, 3072};
    hk_moe_shape shape = {4, 1, 256, 4, 0};
#define COMBINE(...) hk_moe_matvec_int8_combine(ctx, NULL, HK_TYPE_Q4_K, __VA_ARGS__)
    poison_y();
    hk_check_status("valid moe_matvec_int8_combine", COMBINE(wv, xq, ids, gw, yv, yv, &shape, 2), HK_OK, NULL);
    hk_check_status("valid moe_matvec_int8_combine without a residual",
                    COMBINE(wv, xq, ids, gw, (hk_view){NULL, 0}, yv, &shape, 2), HK_OK, NULL);
    EXPECT("combine null context",
           hk_moe_matvec_int8_combine(NULL, NULL, HK_TYPE_Q4_K, wv, xq, ids, gw, yv, yv, &shape, 2),
           HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("combine null shape", COMBINE(wv, xq, ids, gw, yv, yv, NULL, 2), HK_ERROR_INVALID_ARGUMENT,
           "hk_moe_matvec_int8_combine: shape is NULL");
    EXPECT("combine top_k zero", COMBINE(wv, xq, ids, gw, yv, yv, &shape, 0), HK_ERROR_INVALID_ARGUMENT,
           "hk_moe_matvec_int8_combine: top_k=0 must be 1..64 and divide slots=4");
    EXPECT("combine top_k not dividing", COMBINE(wv, xq, ids, gw, yv, yv, &shape, 3), HK_ERROR_INVALID_ARGUMENT,
           "top_k=3 must be 1..64 and divide slots=4");
    EXPECT("combine top_k 65", COMBINE(wv, xq, ids, gw, yv, yv, &(hk_moe_shape){4, 1, 256, 65, 0}, 65),
           HK_ERROR_INVALID_ARGUMENT, "top_k=65 must be 1..64");
    EXPECT("combine residual null with an offset", COMBINE(wv, xq, ids, gw, (hk_view){NULL, 4}, yv, &shape, 2),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_combine: residual.buffer is NULL with offset 4");
    EXPECT("combine weights past the end", COMBINE(wv, xq, ids, (hk_view){aligned, 4096 - 8}, yv, yv, &shape, 2),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_combine: weights needs 16 bytes at offset 4088");
    EXPECT("combine residual past the end", COMBINE(wv, xq, ids, gw, (hk_view){y, 252}, yv, &shape, 2),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_combine: residual needs 8 bytes at offset 252");
    EXPECT("combine y past the end", COMBINE(wv, xq, ids, gw, yv, (hk_view){y, 252}, &shape, 2),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_combine: y needs 8 bytes at offset 252");
    EXPECT("combine y overlaps the residual", COMBINE(wv, xq, ids, gw, yv, (hk_view){y, 4}, &shape, 2),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_combine: output y overlaps residual");
    EXPECT("combine y overlaps the weights", COMBINE(wv, xq, ids, (hk_view){y, 0}, (hk_view){NULL, 0}, yv, &shape, 2),
           HK_ERROR_INVALID_ARGUMENT, "hk_moe_matvec_int8_combine: output y overlaps weights");
    EXPECT("combine f16", hk_moe_matvec_int8_combine(ctx, NULL, HK_TYPE_F16, wv, xq, ids, gw, yv, yv, &shape, 2),
           HK_ERROR_UNSUPPORTED, "wtype=f16 (5) is not a matvec weight type");
#undef COMBINE
}

/* hk_matvec_int8_f32x: every refusal, with its message, and nothing written (4 Q4_K rows of k =
 * 256 in w, 256 floats of x, which also serve as the norm's weight) */
static void test_matvec_f32x(void)
{
    hk_matvec_f32x_desc d = {.wtype = HK_TYPE_Q4_K, .n = 1, .w = {{w, 0}}, .rows = {4}, .k = 256, .x = {x, 0},
                             .norm = {x, 0}, .eps = 1e-6f, .epilogue = HK_MATVEC_PLAIN, .y = {y, 0}};
    hk_matvec_f32x_desc e;
#define F32X(...) (e = d, __VA_ARGS__, hk_matvec_int8_f32x(ctx, NULL, &e))
    poison_y();
    hk_check_status("valid matvec_int8_f32x", hk_matvec_int8_f32x(ctx, NULL, &d), HK_OK, NULL);
    hk_check_status("valid matvec_int8_f32x in place", F32X(e.epilogue = HK_MATVEC_ADD, e.operand = e.y), HK_OK, NULL);
    hk_check_status("valid matvec_int8_f32x without norm", F32X(e.norm = (hk_view){NULL, 0}, e.eps = 0), HK_OK, NULL);
    EXPECT("f32x null context", hk_matvec_int8_f32x(NULL, NULL, &d), HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("f32x null desc", hk_matvec_int8_f32x(ctx, NULL, NULL), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_f32x: desc is NULL");
    EXPECT("f32x n zero", F32X(e.n = 0), HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_f32x: n=0 is not in 1..3");
    EXPECT("f32x n four", F32X(e.n = 4), HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_f32x: n=4 is not in 1..3");
    EXPECT("f32x epilogue", F32X(e.epilogue = (hk_matvec_epilogue)4), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_f32x: epilogue=4 is no hk_matvec_epilogue");
    EXPECT("f32x several with an epilogue", F32X(e.n = 2, e.w[1] = e.w[0], e.rows[1] = 1, e.epilogue = HK_MATVEC_ADD),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_f32x: n=2 matrices take HK_MATVEC_PLAIN only");
    EXPECT("f32x eps zero", F32X(e.eps = 0), HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_f32x: eps=0 must be positive");
    EXPECT("f32x eps nan", F32X(e.eps = NAN), HK_ERROR_INVALID_ARGUMENT, "must be positive and finite");
    EXPECT("f32x rows zero", F32X(e.rows[0] = 0), HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_f32x: rows[0] is 0");
    EXPECT("f32x k off the block", F32X(e.k = 100), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_f32x: k=100 is not a multiple of 32");
    EXPECT("f32x k off the type's block", F32X(e.k = 288), HK_ERROR_INVALID_ARGUMENT,
           "k=288 is not a positive multiple of 256 (q4_k block)");
    EXPECT("f32x f16", F32X(e.wtype = HK_TYPE_F16), HK_ERROR_UNSUPPORTED, "wtype=f16 (5) is not a matvec weight type");
    EXPECT("f32x x past the end", F32X(e.x = (hk_view){x, 4}), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_f32x: x needs 1024 bytes at offset 4");
    EXPECT("f32x norm past the end", F32X(e.norm = (hk_view){x, 512}), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_f32x: norm needs 1024 bytes at offset 512");
    EXPECT("f32x norm misaligned", F32X(e.norm = (hk_view){w, 2}), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_f32x: norm.offset=2 is not a multiple of 4");
    EXPECT("f32x residual past the end", F32X(e.epilogue = HK_MATVEC_ADD, e.operand = (hk_view){y, Y_FLOATS * 4 - 8}),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_f32x: residual needs 16 bytes");
    EXPECT("f32x w_up null", F32X(e.epilogue = HK_MATVEC_GLU_SILU), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_f32x: w_up.buffer is NULL");
    EXPECT("f32x y overlaps x", F32X(e.y = (hk_view){x, 16}), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_f32x: output y overlaps x");
    /* k = 65536: its 2048 blocks need over 80 KB of shared memory, over every device's 48 KiB or less */
    hk_buffer *big_w = hk_test_buffer(ctx, 69632, NULL), *big_x = hk_test_buffer(ctx, 262144, NULL);
    EXPECT("f32x y overlaps norm", F32X(e.norm = (hk_view){big_x, 0}, e.y = (hk_view){big_x, 1008}),
           HK_ERROR_INVALID_ARGUMENT, "hk_matvec_int8_f32x: output y overlaps norm");
    EXPECT("f32x x over shared memory",
           F32X(e.wtype = HK_TYPE_Q8_0, e.w[0] = (hk_view){big_w, 0}, e.rows[0] = 1, e.k = 65536,
                e.x = (hk_view){big_x, 0}, e.norm = (hk_view){NULL, 0}),
           HK_ERROR_UNSUPPORTED, "hk_matvec_int8_f32x: x of k=65536 needs ");
    hk_buffer_destroy(big_w);
    hk_buffer_destroy(big_x);
    setenv("HK_MATVEC_F32X_GROUPS", "0", 1);
    EXPECT("f32x malformed HK_MATVEC_F32X_GROUPS", F32X(e.rows[0] = 4), HK_ERROR_INVALID_ARGUMENT,
           "hk_matvec_int8_f32x: HK_MATVEC_F32X_GROUPS=\"0\" is not an integer in 1..8192");
    setenv("HK_MATVEC_F32X_GROUPS", "1", 1);
    hk_check_status("valid matvec_int8_f32x on one workgroup", hk_matvec_int8_f32x(ctx, NULL, &d), HK_OK, NULL);
    unsetenv("HK_MATVEC_F32X_GROUPS");
#undef F32X
}

/* The one-type matvec entry points are hk_matvec with their type: the same bytes out, every row
 * written. */
typedef hk_status (*matvec_of_type)(hk_context *, hk_stream *, hk_view, hk_view, hk_view, uint32_t, uint32_t);
static void check_type_wrappers(hk_rng *rng)
{
    static const struct {
        hk_type type;
        matvec_of_type call;
        const char *name;
    } wrappers[] = {{HK_TYPE_Q8_0, hk_matvec_q8_0, "hk_matvec_q8_0"},
                    {HK_TYPE_Q4_K, hk_matvec_q4k, "hk_matvec_q4k"},
                    {HK_TYPE_Q5_K, hk_matvec_q5k, "hk_matvec_q5k"},
                    {HK_TYPE_Q6_K, hk_matvec_q6k, "hk_matvec_q6k"}};
    for (size_t i = 0; i < sizeof wrappers / sizeof wrappers[0]; i++) {
        uint8_t *wdata = hk_random_weights(rng, wrappers[i].type, rows, k, 0);
        hk_buffer *wt = hk_test_buffer(ctx, rows * hk_type_bytes(wrappers[i].type, k), wdata);
        free(wdata);
        uint32_t want[4], got[4];
        poison_y();
        hk_status st = hk_matvec(ctx, NULL, wrappers[i].type, (hk_view){wt, 0}, (hk_view){x, 0}, (hk_view){y, 0}, rows, k);
        hk_buffer_download(y, 0, want, sizeof want);
        poison_y();
        if (st == HK_OK)
            st = wrappers[i].call(ctx, NULL, (hk_view){wt, 0}, (hk_view){x, 0}, (hk_view){y, 0}, rows, k);
        hk_buffer_download(y, 0, got, sizeof got);
        uint32_t unwritten = 0;
        for (uint32_t r = 0; r < rows; r++)
            unwritten += want[r] == HK_POISON_WORD;
        int same = memcmp(want, got, sizeof want) == 0;
        hk_check(st == HK_OK && unwritten == 0 && same, wrappers[i].name, "status %d, %u rows unwritten, outputs %s "
                 "hk_matvec's", (int)st, unwritten, same ? "equal" : "differ from");
        hk_buffer_destroy(wt);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--no-driver") == 0)
        return test_no_driver();
    ctx = hk_test_context();
    hk_rng rng = {5};
    uint8_t wdata[4 * 144];
    hk_random_blocks(&rng, HK_TYPE_Q4_K, wdata, 4, 0.1f);
    float xdata[256];
    hk_rng_fill(&rng, xdata, 256, -1, 1);
    w = hk_test_buffer(ctx, sizeof wdata, wdata);
    x = hk_test_buffer(ctx, sizeof xdata, xdata);
    y = hk_test_buffer(ctx, Y_FLOATS * 4, NULL);
    small = hk_test_buffer(ctx, 8, NULL);
    hk_view wv = {w, 0}, xv = {x, 0}, yv = {y, 0};

    /* the valid call works, so every failure below is down to its one bad argument */
    poison_y();
    hk_check_status("valid matvec", hk_matvec_q4k(ctx, NULL, wv, xv, yv, rows, k), HK_OK, NULL);
    check_type_wrappers(&rng);

    EXPECT("null context", hk_matvec_q4k(NULL, NULL, wv, xv, yv, rows, k), HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("null buffer", hk_matvec_q4k(ctx, NULL, (hk_view){NULL, 0}, xv, yv, rows, k), HK_ERROR_INVALID_ARGUMENT,
           "w.buffer is NULL");
    EXPECT("k off the block", hk_matvec_q4k(ctx, NULL, wv, xv, yv, rows, 1000), HK_ERROR_INVALID_ARGUMENT,
           "k=1000 is not a positive multiple of 256 (q4_k block)");
    EXPECT("k zero", hk_matvec_q8_0(ctx, NULL, wv, xv, yv, rows, 0), HK_ERROR_INVALID_ARGUMENT, "k=0");
    EXPECT("rows zero", hk_matvec_q6k(ctx, NULL, wv, xv, yv, 0, k), HK_ERROR_INVALID_ARGUMENT, "rows is 0");
    EXPECT("unsupported type", hk_matvec(ctx, NULL, HK_TYPE_Q8_1, wv, xv, yv, rows, k), HK_ERROR_UNSUPPORTED,
           "hk_matvec: wtype=q8_1 (4) is not a matvec weight type (q8_0, q4_k, q6_k, f16, q5_k)");
    EXPECT("unknown type", hk_matvec(ctx, NULL, (hk_type)99, wv, xv, yv, rows, k), HK_ERROR_UNSUPPORTED, "wtype=?");
    /* F16 rows: hk_matvec takes them at any k; the int8 and MoE kernels do not, and each refusal
     * lists what that entry point takes (hk_matvec's: above) */
    poison_y();
    hk_check_status("valid f16 matvec, k odd", hk_matvec(ctx, NULL, HK_TYPE_F16, wv, xv, yv, rows, 13), HK_OK, NULL);
    EXPECT("f16 k zero", hk_matvec(ctx, NULL, HK_TYPE_F16, wv, xv, yv, rows, 0), HK_ERROR_INVALID_ARGUMENT,
           "k=0 is not a positive multiple of 1 (f16 block)");
    EXPECT("f16 weights past the end", hk_matvec(ctx, NULL, HK_TYPE_F16, wv, xv, yv, 2, 145), HK_ERROR_INVALID_ARGUMENT,
           "w needs 580 bytes at offset 0, past the end of its 576-byte buffer");
    EXPECT("f16 weights misaligned", hk_matvec(ctx, NULL, HK_TYPE_F16, (hk_view){w, 1}, xv, yv, rows, 8),
           HK_ERROR_INVALID_ARGUMENT, "w.offset=1 is not a multiple of 2");
    EXPECT("f16 k past the limit", hk_matvec(ctx, NULL, HK_TYPE_F16, wv, xv, yv, 1, HK_MATVEC_MAX_K + 1),
           HK_ERROR_INVALID_ARGUMENT, "k=98305 exceeds the limit");
    EXPECT("int8 f16", hk_matvec_int8(ctx, NULL, HK_TYPE_F16, wv, xv, yv, rows, k), HK_ERROR_UNSUPPORTED,
           "hk_matvec_int8: wtype=f16 (5) is not a matvec weight type (q8_0, q4_k, q6_k, q5_k)");
    EXPECT("int8 tokens f16", hk_matvec_int8_tokens(ctx, NULL, HK_TYPE_F16, wv, xv, yv, rows, k, 2),
           HK_ERROR_UNSUPPORTED,
           "hk_matvec_int8_tokens: wtype=f16 (5) is not a matvec weight type (q8_0, q4_k, q6_k, q5_k)");
    EXPECT("weights past the end", hk_matvec_q4k(ctx, NULL, wv, xv, yv, rows + 1, k), HK_ERROR_INVALID_ARGUMENT,
           "w needs 720 bytes at offset 0, past the end of its 576-byte buffer");
    EXPECT("view offset past the end", hk_matvec_q4k(ctx, NULL, wv, (hk_view){x, 2048}, yv, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "x needs 1024 bytes at offset 2048");
    EXPECT("huge offset", hk_matvec_q4k(ctx, NULL, wv, xv, (hk_view){y, UINT64_MAX - 3}, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "past the end");
    EXPECT("misaligned weights", hk_matvec_q4k(ctx, NULL, (hk_view){w, 1}, xv, yv, rows, k), HK_ERROR_INVALID_ARGUMENT,
           "w.offset=1 is not a multiple of 2");
    EXPECT("misaligned x", hk_matvec_q4k(ctx, NULL, wv, (hk_view){x, 2}, yv, rows, k), HK_ERROR_INVALID_ARGUMENT,
           "x.offset=2 is not a multiple of 4");
    EXPECT("output too small", hk_matvec_q4k(ctx, NULL, wv, xv, (hk_view){small, 0}, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "y needs 16 bytes");
    EXPECT("output overlaps input", hk_matvec_q4k(ctx, NULL, wv, xv, (hk_view){x, 0}, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps x");
    EXPECT("gemv zero k", hk_gemv_f32(ctx, NULL, xv, xv, yv, 1, 0), HK_ERROR_INVALID_ARGUMENT, "must both be positive");
    EXPECT("gemv past the end", hk_gemv_f32(ctx, NULL, xv, xv, yv, 2, 256), HK_ERROR_INVALID_ARGUMENT, "w needs 2048");
    /* several tokens: 16 x 16 fills x (1024 bytes), 16 x 4 fills y (256 bytes) */
    poison_y();
    hk_check_status("valid gemv tokens", hk_gemv_f32_tokens(ctx, NULL, wv, xv, yv, 4, 16, 16), HK_OK, NULL);
    EXPECT("gemv tokens zero", hk_gemv_f32_tokens(ctx, NULL, wv, xv, yv, 4, 16, 0), HK_ERROR_INVALID_ARGUMENT,
           "hk_gemv_f32_tokens: tokens=0 must be positive");
    EXPECT("gemv tokens zero rows", hk_gemv_f32_tokens(ctx, NULL, wv, xv, yv, 0, 16, 2), HK_ERROR_INVALID_ARGUMENT,
           "hk_gemv_f32_tokens: rows=0 and k=16 must both be positive");
    EXPECT("gemv tokens k past the limit", hk_gemv_f32_tokens(ctx, NULL, wv, xv, yv, 1, HK_GEMV_MAX_K + 1, 1),
           HK_ERROR_INVALID_ARGUMENT, "k=1048577 exceeds the limit k <= 1048576");
    EXPECT("gemv x too small for the tokens", hk_gemv_f32_tokens(ctx, NULL, wv, xv, yv, 4, 16, 17),
           HK_ERROR_INVALID_ARGUMENT, "x needs 1088 bytes at offset 0, past the end of its 1024-byte buffer");
    EXPECT("gemv y too small for the tokens", hk_gemv_f32_tokens(ctx, NULL, wv, xv, yv, 4, 8, 17),
           HK_ERROR_INVALID_ARGUMENT, "y needs 272 bytes at offset 0, past the end of its 256-byte buffer");
    EXPECT("gemv tokens x rows past 2^32", hk_gemv_f32_tokens(ctx, NULL, wv, xv, yv, 65536, 1, 65536),
           HK_ERROR_INVALID_ARGUMENT, "tokens=65536 x rows=65536 is more than 2^32 - 1 values");
    EXPECT("gemv tokens x k past 2^32", hk_gemv_f32_tokens(ctx, NULL, wv, xv, yv, 1, HK_GEMV_MAX_K, 4096),
           HK_ERROR_INVALID_ARGUMENT, "tokens=4096 x k=1048576 is more than 2^32 - 1 values");
    EXPECT("gemv tokens y overlaps x", hk_gemv_f32_tokens(ctx, NULL, wv, xv, (hk_view){x, 0}, 4, 8, 2),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps x");
    EXPECT("rmsnorm eps", hk_rmsnorm(ctx, NULL, xv, xv, yv, 1, 16, 0.0f), HK_ERROR_INVALID_ARGUMENT, "eps=0");
    EXPECT("rmsnorm eps nan", hk_rmsnorm(ctx, NULL, xv, xv, yv, 1, 16, 0.0f / 0.0f), HK_ERROR_INVALID_ARGUMENT, "eps=");
    EXPECT("rmsnorm partial alias", hk_rmsnorm(ctx, NULL, (hk_view){y, 4}, xv, yv, 1, 16, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps x");
    EXPECT("quantize k", hk_quantize_q8_1(ctx, NULL, xv, yv, 48), HK_ERROR_INVALID_ARGUMENT,
           "k=48 is not a positive multiple of 32");
    EXPECT("quantize output", hk_quantize_q8_1(ctx, NULL, xv, (hk_view){small, 0}, 32), HK_ERROR_INVALID_ARGUMENT,
           "y needs 36 bytes");
    test_rmsnorm_q8_1_args();

    /* elementwise: the residual add and the gated activations (y holds 64 floats, x 256) */
    EXPECT("add n zero", hk_add(ctx, NULL, xv, xv, yv, 0), HK_ERROR_INVALID_ARGUMENT, "hk_add: n=0 must be positive");
    EXPECT("add_scaled alpha nan", hk_add_scaled(ctx, NULL, xv, xv, yv, 16, 0.0f / 0.0f), HK_ERROR_INVALID_ARGUMENT,
           "hk_add_scaled: alpha=");
    EXPECT("add_scaled alpha inf", hk_add_scaled(ctx, NULL, xv, xv, yv, 16, 1.0f / 0.0f), HK_ERROR_INVALID_ARGUMENT,
           "alpha=inf must be finite");
    EXPECT("add null context", hk_add(NULL, NULL, xv, xv, yv, 16), HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("add a past the end", hk_add(ctx, NULL, xv, xv, yv, 257), HK_ERROR_INVALID_ARGUMENT,
           "a needs 1028 bytes at offset 0, past the end of its 1024-byte buffer");
    EXPECT("add y past the end", hk_add(ctx, NULL, xv, xv, yv, 65), HK_ERROR_INVALID_ARGUMENT, "y needs 260 bytes");
    EXPECT("add misaligned b", hk_add(ctx, NULL, xv, (hk_view){x, 6}, yv, 16), HK_ERROR_INVALID_ARGUMENT,
           "b.offset=6 is not a multiple of 4");
    EXPECT("add y overlaps a in part", hk_add(ctx, NULL, (hk_view){y, 4}, xv, yv, 16), HK_ERROR_INVALID_ARGUMENT,
           "output y overlaps a");
    EXPECT("add y overlaps b in part", hk_add_scaled(ctx, NULL, xv, (hk_view){y, 64}, (hk_view){y, 0}, 32, 2.0f),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps b");
    EXPECT("swiglu rows zero", hk_swiglu(ctx, NULL, xv, xv, yv, 0, 16, 16, HK_GLU_SILU), HK_ERROR_INVALID_ARGUMENT,
           "hk_swiglu: rows=0 and n=16 must both be positive");
    EXPECT("swiglu n zero", hk_swiglu(ctx, NULL, xv, xv, yv, 1, 0, 0, HK_GLU_SILU), HK_ERROR_INVALID_ARGUMENT,
           "rows=1 and n=0 must both be positive");
    EXPECT("swiglu in_stride below n", hk_swiglu(ctx, NULL, xv, xv, yv, 2, 16, 15, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "in_stride=15 is less than n=16");
    EXPECT("swiglu mode", hk_swiglu(ctx, NULL, xv, xv, yv, 1, 16, 16, (hk_glu_mode)2), HK_ERROR_INVALID_ARGUMENT,
           "mode=2 is not an hk_glu_mode");
    /* counts past 32 bits are refused before any byte count is formed from them */
    EXPECT("swiglu outputs past 2^32", hk_swiglu(ctx, NULL, xv, xv, yv, 65536, 65536, 65536, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "span 4294967296 floats, more than 2^32 - 1 elements");
    EXPECT("swiglu input span past 2^32", hk_swiglu(ctx, NULL, xv, xv, yv, 2, 1, UINT32_MAX, HK_GLU_GELU_TANH),
           HK_ERROR_INVALID_ARGUMENT, "in_stride=4294967295 span 4294967296 floats");
    /* fused [rows, 2n]: up is gate + n floats; gate and up overlap, which is fine, y may not */
    EXPECT("swiglu fused up past the end", hk_swiglu(ctx, NULL, xv, (hk_view){x, 512}, yv, 2, 64, 128, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "up needs 768 bytes at offset 512, past the end of its 1024-byte buffer");
    EXPECT("swiglu fused y on gate, 2 rows", hk_swiglu(ctx, NULL, yv, (hk_view){y, 32}, yv, 2, 8, 16, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps gate");
    EXPECT("swiglu y overlaps up in part", hk_swiglu(ctx, NULL, xv, (hk_view){y, 4}, yv, 1, 16, 16, HK_GLU_SILU),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps up");
    EXPECT("swiglu y past the end", hk_swiglu(ctx, NULL, xv, xv, yv, 5, 16, 16, HK_GLU_SILU), HK_ERROR_INVALID_ARGUMENT,
           "y needs 320 bytes at offset 0");

    /* MoE gather and router */
    hk_moe_shape shape = {4, 1, 256, 2, 0};
    hk_buffer *aligned = hk_test_buffer(ctx, 4096, NULL);
    hk_view ids = {aligned, 2048}, x16 = {aligned, 1024};
    EXPECT("moe null shape", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, x16, ids, yv, NULL), HK_ERROR_INVALID_ARGUMENT,
           "shape is NULL");
    hk_moe_shape zero = {4, 1, 256, 0, 0};
    EXPECT("moe zero slots", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, x16, ids, yv, &zero), HK_ERROR_INVALID_ARGUMENT,
           "slots=0");
    EXPECT("moe experts past the end", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, x16, ids, yv, &(hk_moe_shape){5, 1, 256, 2, 0}),
           HK_ERROR_INVALID_ARGUMENT, "w needs 720 bytes");
    EXPECT("moe x misaligned", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, (hk_view){aligned, 1028}, ids, yv, &shape),
           HK_ERROR_INVALID_ARGUMENT, "x.offset=1028 is not a multiple of 16");
    EXPECT("moe ids past the end", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, x16, (hk_view){aligned, 4092}, yv, &shape),
           HK_ERROR_INVALID_ARGUMENT, "ids needs 8 bytes at offset 4092");
    EXPECT("moe_int8 bad type", hk_moe_matvec_int8(ctx, NULL, HK_TYPE_F32, wv, x16, ids, yv, &shape), HK_ERROR_UNSUPPORTED,
           "not a matvec weight type");
    EXPECT("moe f16", hk_moe_matvec(ctx, NULL, HK_TYPE_F16, wv, x16, ids, yv, &shape), HK_ERROR_UNSUPPORTED,
           "hk_moe_matvec: wtype=f16 (5) is not a matvec weight type (q8_0, q4_k, q6_k, q5_k)");
    EXPECT("moe_int8 f16", hk_moe_matvec_int8(ctx, NULL, HK_TYPE_F16, wv, x16, ids, yv, &shape), HK_ERROR_UNSUPPORTED,
           "hk_moe_matvec_int8: wtype=f16 (5) is not a matvec weight type (q8_0, q4_k, q6_k, q5_k)");
    EXPECT("route top_k 0", hk_moe_route(ctx, NULL, xv, ids, yv, 1, 8, 0, 0), HK_ERROR_INVALID_ARGUMENT, "top_k=0");
    EXPECT("route top_k > experts", hk_moe_route(ctx, NULL, xv, ids, yv, 1, 8, 9, 0), HK_ERROR_INVALID_ARGUMENT,
           "top_k=9 must be in 1..min(n_experts=8, 64)");
    {
        hk_caps caps;
        hk_context_caps(ctx, &caps);
        uint32_t too_many = 64 * (caps.subgroup_size_control ? caps.subgroup_size : caps.subgroup_size_min) + 1;
        hk_buffer *big = hk_test_buffer(ctx, (uint64_t)too_many * 4 + 64, NULL);
        EXPECT("route too many experts", hk_moe_route(ctx, NULL, (hk_view){big, 0}, ids, yv, 1, too_many, 8, 0),
               HK_ERROR_UNSUPPORTED, "more than this device's router takes");
        hk_buffer_destroy(big);
    }
    EXPECT("route logits past the end", hk_moe_route(ctx, NULL, xv, ids, yv, 3, 128, 8, 0), HK_ERROR_INVALID_ARGUMENT,
           "logits needs 1536 bytes");
    test_gather();
    EXPECT("int8 matvec q4_k misaligned", hk_matvec_int8(ctx, NULL, HK_TYPE_Q4_K, (hk_view){w, 2}, xv, yv, 1, 256),
           HK_ERROR_INVALID_ARGUMENT, "w.offset=2 is not a multiple of 16");
    /* Q5_K reads 16-byte words as Q4_K does (176-byte blocks: 11 of them) */
    EXPECT("int8 matvec q5_k misaligned", hk_matvec_int8(ctx, NULL, HK_TYPE_Q5_K, (hk_view){w, 2}, xv, yv, 1, 256),
           HK_ERROR_INVALID_ARGUMENT, "w.offset=2 is not a multiple of 16");
    EXPECT("int8 tokens q5_k misaligned",
           hk_matvec_int8_tokens(ctx, NULL, HK_TYPE_Q5_K, (hk_view){w, 8}, xv, yv, 1, 256, 2),
           HK_ERROR_INVALID_ARGUMENT, "w.offset=8 is not a multiple of 16");
    /* views are untyped: a view too small for the tensor is caught, f32 where Q8_1 belongs is not */
    EXPECT("int8 matvec x view too small for its q8_1 blocks", hk_matvec_int8(ctx, NULL, HK_TYPE_Q4_K, wv, (hk_view){x, 768}, yv, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "xq needs 288 bytes at offset 768");
    test_matvec_fused();
    test_matvec_add_norm();
    test_matvec_multi();
    test_matvec_qkv();
    test_matvec_f32x();
    test_moe_glu(aligned);
    test_glu_q8(aligned);
    test_moe_combine(aligned);

    /* shape limits */
    test_gemv_limit();
    test_rmsnorm_limit();
    test_matvec_limits(aligned);
    hk_buffer_destroy(aligned);

    /* objects from another context */
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.disable_pipeline_cache = 1;
    hk_context *other = NULL;
    if (hk_context_create(&desc, &other) == HK_OK) {
        hk_buffer *foreign = hk_test_buffer(other, 1024, NULL);
        hk_stream *foreign_stream = NULL;
        hk_stream_create(other, 0, &foreign_stream);
        EXPECT("foreign buffer", hk_matvec_q4k(ctx, NULL, wv, (hk_view){foreign, 0}, yv, rows, k),
               HK_ERROR_INVALID_ARGUMENT, "x.buffer belongs to another context");
        EXPECT("foreign stream", hk_matvec_q4k(ctx, foreign_stream, wv, xv, yv, rows, k), HK_ERROR_INVALID_ARGUMENT,
               "stream belongs to another context");
        hk_stream_destroy(foreign_stream);
        hk_buffer_destroy(foreign);
        hk_context_destroy(other);
    } else {
        hk_check(0, "second context", "%s", hk_last_error());
    }

    /* a failed call leaves a stream usable and records nothing */
    hk_stream *s = NULL;
    hk_check_status("stream create", hk_stream_create(ctx, 0, &s), HK_OK, NULL);
    EXPECT("failed call on stream", hk_matvec_q4k(ctx, s, wv, xv, yv, rows, 1000), HK_ERROR_INVALID_ARGUMENT, "k=1000");
    hk_check(hk_stream_kernel_count(s) == 0, "failed call records nothing", "%u recorded", hk_stream_kernel_count(s));
    double ms;
    hk_check_status("timestamp on untimed stream", hk_stream_timestamp(s, NULL), HK_ERROR_STATE, "without timestamps");
    hk_check_status("elapsed before any submit", hk_stream_elapsed_ms(s, 0, 1, &ms), HK_ERROR_INVALID_ARGUMENT,
                    "timestamps 0..1: the last submit recorded 0");
    hk_check_status("empty submit", hk_stream_submit(s), HK_OK, NULL);
    hk_stream_destroy(s);
    hk_check_status("stream null out", hk_stream_create(ctx, 0, NULL), HK_ERROR_INVALID_ARGUMENT, "out_stream is NULL");
    {
        hk_stream *ps = NULL;
        hk_check_status("prepare stream null out", hk_stream_create_prepare(ctx, NULL), HK_ERROR_INVALID_ARGUMENT,
                        "out_stream is NULL");
        hk_check_status("prepare stream null context", hk_stream_create_prepare(NULL, &ps), HK_ERROR_INVALID_ARGUMENT,
                        "context is NULL");
        hk_check(ps == NULL, "failed prepare stream leaves NULL", NULL);
        hk_check_status("prepare stream", hk_stream_create_prepare(ctx, &ps), HK_OK, NULL);
        uint8_t byte = 0;
        hk_check_status("prepare stream refuses uploads", hk_stream_upload(ps, (hk_view){w, 0}, &byte, 1),
                        HK_ERROR_STATE, "a prepare stream records no transfers");
        /* a bad argument fails in a prepare stream as anywhere */
        hk_check_status("prepare stream checks arguments", hk_matvec_q4k(ctx, ps, (hk_view){w, 0}, (hk_view){x, 0},
                                                                         (hk_view){y, 0}, rows, 1000),
                        HK_ERROR_INVALID_ARGUMENT, "k=1000");
        hk_check_status("prepare stream submit does nothing", hk_stream_submit(ps), HK_OK, NULL);
        hk_stream_destroy(ps);
    }
    hk_check_status("submit null", hk_stream_submit(NULL), HK_ERROR_INVALID_ARGUMENT, "stream is NULL");

    /* buffers */
    hk_buffer *b = NULL;
    hk_check_status("buffer size 0", hk_buffer_create(ctx, 0, &b), HK_ERROR_INVALID_ARGUMENT, "size is 0");
    hk_check(b == NULL, "failed create leaves NULL", NULL);
    hk_check_status("buffer null context", hk_buffer_create(NULL, 16, &b), HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    hk_check_status("upload past end", hk_buffer_upload(small, 4, xdata, 8), HK_ERROR_INVALID_ARGUMENT,
                    "range [4, +8) is past the end of the 8-byte buffer");
    hk_check_status("download null", hk_buffer_download(small, 0, NULL, 8), HK_ERROR_INVALID_ARGUMENT, "data is NULL");
    hk_check_status("fill misaligned", hk_buffer_fill(small, 2, 4, 0), HK_ERROR_INVALID_ARGUMENT, "multiples of 4");
    hk_check_status("wrap null", hk_buffer_wrap(ctx, VK_NULL_HANDLE, 16, &b), HK_ERROR_INVALID_ARGUMENT, "buffer is NULL");
    hk_check_status("copy past end", hk_copy(ctx, NULL, (hk_view){x, 0}, (hk_view){small, 0}, 16),
                    HK_ERROR_INVALID_ARGUMENT, "dst needs 16 bytes");
    hk_check_status("caps null", hk_context_caps(ctx, NULL), HK_ERROR_INVALID_ARGUMENT, "out_caps is NULL");
    hk_check_status("context null out", hk_context_create(NULL, NULL), HK_ERROR_INVALID_ARGUMENT, "out_context");
    hk_borrowed_device borrowed;
    hk_borrowed_device_init(&borrowed);
    hk_context *bc = NULL;
    hk_check_status("borrow nothing", hk_context_create_borrowed(&borrowed, &bc), HK_ERROR_INVALID_ARGUMENT,
                    "must all be set");
    hk_context_desc bad;
    hk_context_desc_init(&bad);
    bad.device_name = "no such device anywhere";
    hk_check_status("device name matches nothing", hk_context_create(&bad, &bc), HK_ERROR_NOT_FOUND,
                    "matches \"no such device anywhere\"");
    hk_context_desc_init(&bad);
    bad.device_index = 999;
    hk_check_status("device index out of range", hk_context_create(&bad, &bc), HK_ERROR_NOT_FOUND, "device index 999");

    test_buffer_limits();
    test_hk_device();
    test_type_traits();
    test_engine_api();

    /* destroy functions accept NULL */
    hk_buffer_destroy(NULL);
    hk_stream_destroy(NULL);
    hk_context_destroy(NULL);
    hk_check(strcmp(hk_status_name(HK_ERROR_UNSUPPORTED), "HK_ERROR_UNSUPPORTED") == 0 &&
                 strcmp(hk_type_name(HK_TYPE_Q6_K), "q6_k") == 0 && hk_type_block_bytes(HK_TYPE_Q4_K) == 144 &&
                 strcmp(hk_type_name(HK_TYPE_Q5_K), "q5_k") == 0 &&
                 hk_type_block_values((hk_type)42) == 0,
             "names and sizes", NULL);
    hk_check(strcmp(hk_status_name(HK_ERROR_DEVICE_LOST), "HK_ERROR_DEVICE_LOST") == 0, "HK_ERROR_DEVICE_LOST named", NULL);

    hk_buffer_destroy(w);
    hk_buffer_destroy(x);
    hk_buffer_destroy(y);
    hk_buffer_destroy(small);
    return hk_test_finish(ctx);
}
