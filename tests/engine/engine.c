/* An engine built on the installed libhkernel only (tests/install_test.sh builds it with CMake
 * and with pkg-config). It owns everything: the instance (with the validation layer and its own
 * messenger: any message fails it; run it with VK_LAYER_ENABLES=..._SYNCHRONIZATION_VALIDATION_EXT
 * for synchronization validation), the device, created with exactly the features
 * hk_features_enable asks for, its memory (one host-visible buffer, every tensor a view of it) and
 * its command buffers. It loads Vulkan through its own volk, as engines do, beside the library's
 * private one. libhkernel borrows the device.
 *
 * Two threads each record one MoE decode step into their own command buffer through their own
 * wrapped stream, between the engine's own commands: the engine copies the token's activation into
 * place, then RMSNorm, the Q8_1 quantizer, a dense int8 matvec, the router (f32 GEMV, top-k), the
 * expert gather for gate (shared x), the engine's own work on the gate outputs (a copy standing in
 * for its activation function; hk_stream_barrier after it), then down (x per slot, quantized from
 * that), GPU timestamps around it. The engine submits both command buffers at
 * once, waits, and checks every output against its own host math (plain C, double sums, its own
 * f16 and Q8_0 decoding): two steps, so the streams are reset and reused.
 * Exit 0: all checks pass and the layer said nothing. */
#define _POSIX_C_SOURCE 200809L
#include <volk.h>
#include <hkernel.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the model: hidden size, router over experts, top-k, expert width */
#define HIDDEN 1024
#define EXPERTS 8
#define TOP_K 2
#define FF 256
#define Q8_BLOCK 34
#define Q81_BLOCK 36
#define EPS 1e-6f

static int failures;
static _Atomic unsigned messages;

static void check(int ok, const char *what, const char *fmt, double a, double b)
{
    printf("%s %s", ok ? "PASS" : "FAIL", what);
    if (fmt)
        printf(fmt, a, b);
    printf("\n");
    failures += !ok;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)severity;
    (void)types;
    (void)user;
    messages++;
    printf("engine: validation: %s\n", data && data->pMessage ? data->pMessage : "?");
    return VK_FALSE;
}

/* ---- the engine's own host math ---- */

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0 && man == 0)
        bits = sign;
    else if (exp == 0) { /* subnormal */
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    } else if (exp == 31)
        bits = sign | 0x7F800000u | (man << 13);
    else
        bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t f32_to_f16(float f) /* normal range only, round to nearest even */
{
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t sign = (b >> 16) & 0x8000, exp = (b >> 23) & 255, man = b & 0x7FFFFF;
    int e = (int)exp - 127 + 15;
    if (e <= 0)
        return (uint16_t)sign;
    uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)h;
}

/* one value of a Q8_0 row (blocks of f16 d, 32 int8 q) */
static double q8_0_value(const uint8_t *row, uint32_t i)
{
    const uint8_t *blk = row + (i / 32) * Q8_BLOCK;
    uint16_t d;
    memcpy(&d, blk, 2);
    return (double)f16_to_f32(d) * (double)(int8_t)blk[2 + i % 32];
}

/* one value of Q8_1 blocks (f16 d, f16 s, 32 int8 q): d * q */
static double q8_1_value(const uint8_t *blocks, uint32_t i)
{
    const uint8_t *blk = blocks + (i / 32) * Q81_BLOCK;
    uint16_t d;
    memcpy(&d, blk, 2);
    return (double)f16_to_f32(d) * (double)(int8_t)blk[4 + i % 32];
}

static double rel_error(const float *got, const double *ref, size_t n)
{
    double err = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            return INFINITY;
        err = fmax(err, fabs(got[i] - ref[i]));
        scale = fmax(scale, fabs(ref[i]));
    }
    return err / (scale > 1e-30 ? scale : 1e-30);
}

static uint64_t rng_state = 0x656e67696e65ull;
static float uniform(float lo, float hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 11) * (1.0 / 9007199254740992.0));
}

/* Q8_0 rows quantized from random values, as a model file holds them */
static void random_q8_0(uint8_t *dst, uint32_t rows, uint32_t k)
{
    for (uint32_t r = 0; r < rows; r++) {
        float scale = uniform(0.01f, 0.2f);
        for (uint32_t b = 0; b < k / 32; b++) {
            float v[32], amax = 0;
            for (int i = 0; i < 32; i++) {
                v[i] = uniform(-scale, scale);
                amax = fmaxf(amax, fabsf(v[i]));
            }
            uint8_t *blk = dst + ((uint64_t)r * (k / 32) + b) * Q8_BLOCK;
            uint16_t d = f32_to_f16(amax / 127.0f);
            memcpy(blk, &d, 2);
            float df = f16_to_f32(d);
            for (int i = 0; i < 32; i++)
                blk[2 + i] = (uint8_t)(int8_t)lrintf(df ? v[i] / df : 0);
        }
    }
}

/* ---- the engine's memory: one buffer, views into it ---- */

typedef struct layout {
    uint64_t g, wq, wr, wgate, wdown;           /* weights, shared */
    uint64_t x_src[2], x[2], xn[2], xq[2], q[2], logits[2], ids[2], wts[2], gate[2], act[2], xq2[2], down[2];
    uint64_t total;
} layout;

static uint64_t place(uint64_t *at, uint64_t bytes)
{
    uint64_t p = (*at + 255) / 256 * 256;
    *at = p + bytes;
    return p;
}

static layout make_layout(void)
{
    layout l;
    uint64_t at = 0;
    l.g = place(&at, HIDDEN * 4);
    l.wq = place(&at, (uint64_t)HIDDEN * HIDDEN / 32 * Q8_BLOCK);
    l.wr = place(&at, (uint64_t)EXPERTS * HIDDEN * 4);
    l.wgate = place(&at, (uint64_t)EXPERTS * FF * HIDDEN / 32 * Q8_BLOCK);
    l.wdown = place(&at, (uint64_t)EXPERTS * HIDDEN * FF / 32 * Q8_BLOCK);
    for (int t = 0; t < 2; t++) {
        l.x_src[t] = place(&at, HIDDEN * 4);
        l.x[t] = place(&at, HIDDEN * 4);
        l.xn[t] = place(&at, HIDDEN * 4);
        l.xq[t] = place(&at, HIDDEN / 32 * Q81_BLOCK);
        l.q[t] = place(&at, HIDDEN * 4);
        l.logits[t] = place(&at, EXPERTS * 4);
        l.ids[t] = place(&at, TOP_K * 4);
        l.wts[t] = place(&at, TOP_K * 4);
        l.gate[t] = place(&at, TOP_K * FF * 4);
        l.act[t] = place(&at, TOP_K * FF * 4);
        l.xq2[t] = place(&at, TOP_K * FF / 32 * Q81_BLOCK);
        l.down[t] = place(&at, TOP_K * HIDDEN * 4);
    }
    l.total = at;
    return l;
}

/* ---- one thread's step ---- */

typedef struct step {
    int id;
    hk_context *ctx;
    hk_buffer *buf;
    VkBuffer vkbuf;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    hk_stream *stream;
    const layout *l;
    pthread_barrier_t *start;
    hk_status status;
    char why[512];
} step;

#define V(off) ((hk_view){s->buf, (off)})

static void *record_step(void *arg)
{
    step *s = arg;
    const layout *l = s->l;
    int t = s->id;
    pthread_barrier_wait(s->start); /* both threads record at the same time */
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    vkBeginCommandBuffer(s->cmd, &begin);
    hk_status st = HK_OK;
    int stamps = 0;
    uint32_t at = 0;
    if (hk_stream_timestamp(s->stream, &at) == HK_OK)
        stamps = 1;
    /* the engine's own command before ours: the token's activation moved into place (the first
     * kernel of a wrapped stream waits for everything before it) */
    VkBufferCopy copy = {l->x_src[t], l->x[t], HIDDEN * 4};
    vkCmdCopyBuffer(s->cmd, s->vkbuf, s->vkbuf, 1, &copy);
    hk_moe_shape gate = {EXPERTS, FF, HIDDEN, TOP_K, 0}, down = {EXPERTS, HIDDEN, FF, TOP_K, 1};
#define DO(call)                                                                                                    \
    if (st == HK_OK)                                                                                                \
    st = (call)
    DO(hk_rmsnorm(s->ctx, s->stream, V(l->x[t]), V(l->g), V(l->xn[t]), 1, HIDDEN, EPS));
    DO(hk_quantize_q8_1(s->ctx, s->stream, V(l->xn[t]), V(l->xq[t]), HIDDEN));
    DO(hk_matvec_int8(s->ctx, s->stream, HK_TYPE_Q8_0, V(l->wq), V(l->xq[t]), V(l->q[t]), HIDDEN, HIDDEN));
    DO(hk_gemv_f32(s->ctx, s->stream, V(l->wr), V(l->xn[t]), V(l->logits[t]), EXPERTS, HIDDEN));
    DO(hk_moe_route(s->ctx, s->stream, V(l->logits[t]), V(l->ids[t]), V(l->wts[t]), 1, EXPERTS, TOP_K, 1));
    DO(hk_moe_matvec_int8(s->ctx, s->stream, HK_TYPE_Q8_0, V(l->wgate), V(l->xq[t]), V(l->ids[t]), V(l->gate[t]), &gate));
    if (st == HK_OK) {
        /* the engine's own work between our kernels: its activation of the expert outputs (a copy
         * stands in for it). It waits for our writes itself; hk_stream_barrier then makes our next
         * kernel wait for it, which the stream's tracker cannot see */
        VkMemoryBarrier wait_ours = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                     .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};
        vkCmdPipelineBarrier(s->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                             &wait_ours, 0, NULL, 0, NULL);
        VkBufferCopy activation = {l->gate[t], l->act[t], TOP_K * FF * 4};
        vkCmdCopyBuffer(s->cmd, s->vkbuf, s->vkbuf, 1, &activation);
        st = hk_stream_barrier(s->stream);
    }
    DO(hk_quantize_q8_1(s->ctx, s->stream, V(l->act[t]), V(l->xq2[t]), TOP_K * FF));
    DO(hk_moe_matvec_int8(s->ctx, s->stream, HK_TYPE_Q8_0, V(l->wdown), V(l->xq2[t]), V(l->ids[t]), V(l->down[t]), &down));
    if (stamps)
        DO(hk_stream_timestamp(s->stream, NULL));
#undef DO
    /* the engine reads the results on the host after the submit */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(s->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL,
                         0, NULL);
    vkEndCommandBuffer(s->cmd);
    s->status = st;
    if (st != HK_OK)
        snprintf(s->why, sizeof s->why, "%s", hk_last_error());
    return NULL;
}

/* Every output of thread t's step against the engine's host math on the step's own inputs. */
static void check_step(int t, int round, const uint8_t *m, const layout *l)
{
    char what[160];
    const float *x = (const float *)(m + l->x_src[t]), *g = (const float *)(m + l->g);
    /* rmsnorm, in double */
    double ss = 0, xn_ref[HIDDEN];
    for (int i = 0; i < HIDDEN; i++)
        ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / HIDDEN + EPS);
    for (int i = 0; i < HIDDEN; i++)
        xn_ref[i] = x[i] * inv * g[i];
    const float *xn = (const float *)(m + l->xn[t]);
    snprintf(what, sizeof what, "step %d thread %d: rmsnorm", round, t);
    double e = rel_error(xn, xn_ref, HIDDEN);
    check(e < 1e-5, what, " (%.2e, gate %.0e)", e, 1e-5);
    /* the quantizer: each dequantized value within half a step of its input, plus the f16 rounding
     * of d (up to 127 * 2^-11 of a step, hkernel.h) */
    const uint8_t *xq = m + l->xq[t];
    double worst = 0;
    for (int i = 0; i < HIDDEN; i++) {
        uint16_t dbits;
        memcpy(&dbits, xq + (i / 32) * Q81_BLOCK, 2);
        double d = f16_to_f32(dbits), err = fabs(q8_1_value(xq, (uint32_t)i) - xn[i]) / (d > 0 ? d : 1);
        worst = fmax(worst, err);
    }
    snprintf(what, sizeof what, "step %d thread %d: quantize_q8_1", round, t);
    const double bound = 0.5 + 127.0 / 2048.0 + 1e-3;
    check(worst <= bound, what, " (worst %.3f of a step, at most %.3f)", worst, bound);
    /* dense int8 matvec: deq(W) . deq(xq) in double */
    double ref[HIDDEN];
    for (int r = 0; r < HIDDEN; r++) {
        const uint8_t *row = m + l->wq + (uint64_t)r * HIDDEN / 32 * Q8_BLOCK;
        double acc = 0;
        for (int i = 0; i < HIDDEN; i++)
            acc += q8_0_value(row, (uint32_t)i) * q8_1_value(xq, (uint32_t)i);
        ref[r] = acc;
    }
    snprintf(what, sizeof what, "step %d thread %d: matvec_int8 q8_0", round, t);
    e = rel_error((const float *)(m + l->q[t]), ref, HIDDEN);
    check(e < 1e-5, what, " (%.2e, gate %.0e)", e, 1e-5);
    /* router: logits = Wr . xn, then the top-k by logit and their renormalized softmax weights */
    double logits[EXPERTS];
    const float *wr = (const float *)(m + l->wr), *lg = (const float *)(m + l->logits[t]);
    for (int r = 0; r < EXPERTS; r++) {
        double acc = 0;
        for (int i = 0; i < HIDDEN; i++)
            acc += (double)wr[r * HIDDEN + i] * xn[i];
        logits[r] = acc;
    }
    snprintf(what, sizeof what, "step %d thread %d: router logits (gemv_f32)", round, t);
    e = rel_error(lg, logits, EXPERTS);
    check(e < 1e-4, what, " (%.2e, gate %.0e)", e, 1e-4);
    uint32_t want[TOP_K];
    double wsum = 0, wref[TOP_K];
    for (int k = 0; k < TOP_K; k++) {
        int best = -1;
        for (int r = 0; r < EXPERTS; r++) {
            int taken = 0;
            for (int j = 0; j < k; j++)
                taken |= want[j] == (uint32_t)r;
            if (!taken && (best < 0 || lg[r] > lg[best]))
                best = r;
        }
        want[k] = (uint32_t)best;
        wref[k] = exp((double)lg[best]);
        wsum += wref[k];
    }
    for (int k = 0; k < TOP_K; k++)
        wref[k] /= wsum;
    const uint32_t *ids = (const uint32_t *)(m + l->ids[t]);
    const float *wts = (const float *)(m + l->wts[t]);
    snprintf(what, sizeof what, "step %d thread %d: route top-%d", round, t, TOP_K);
    check(ids[0] == want[0] && ids[1] == want[1] && rel_error(wts, wref, TOP_K) < 1e-5, what,
          " (experts %.0f, %.0f)", ids[0], ids[1]);
    /* expert gather: gate[s] = Wgate[ids[s]] . deq(xq); down[s] = Wdown[ids[s]] . deq(xq2[s]) */
    double gref[TOP_K * FF], dref[TOP_K * HIDDEN];
    const uint8_t *xq2 = m + l->xq2[t];
    for (int s = 0; s < TOP_K; s++) {
        uint32_t ex = ids[s] < EXPERTS ? ids[s] : 0;
        for (int r = 0; r < FF; r++) {
            const uint8_t *row = m + l->wgate + ((uint64_t)ex * FF + r) * HIDDEN / 32 * Q8_BLOCK;
            double acc = 0;
            for (int i = 0; i < HIDDEN; i++)
                acc += q8_0_value(row, (uint32_t)i) * q8_1_value(xq, (uint32_t)i);
            gref[s * FF + r] = acc;
        }
        for (int r = 0; r < HIDDEN; r++) {
            const uint8_t *row = m + l->wdown + ((uint64_t)ex * HIDDEN + r) * FF / 32 * Q8_BLOCK;
            double acc = 0;
            for (int i = 0; i < FF; i++)
                acc += q8_0_value(row, (uint32_t)i) * q8_1_value(xq2, (uint32_t)(s * FF + i));
            dref[s * HIDDEN + r] = acc;
        }
    }
    snprintf(what, sizeof what, "step %d thread %d: moe_matvec_int8 gate (shared x)", round, t);
    e = rel_error((const float *)(m + l->gate[t]), gref, TOP_K * FF);
    check(e < 1e-5, what, " (%.2e, gate %.0e)", e, 1e-5);
    snprintf(what, sizeof what, "step %d thread %d: moe_matvec_int8 down (x per slot)", round, t);
    e = rel_error((const float *)(m + l->down[t]), dref, TOP_K * HIDDEN);
    check(e < 1e-5, what, " (%.2e, gate %.0e)", e, 1e-5);
}

int main(void)
{
    if (volkInitialize() != VK_SUCCESS) {
        printf("FAIL engine: no Vulkan loader\n");
        return 1;
    }
    printf("engine: libhkernel %u.%u.%u (built against %d.%d.%d)\n", HK_VERSION_GET_MAJOR(hk_version()),
           HK_VERSION_GET_MINOR(hk_version()), HK_VERSION_GET_PATCH(hk_version()), HK_VERSION_MAJOR, HK_VERSION_MINOR,
           HK_VERSION_PATCH);
    check(hk_version() == HK_VERSION, "engine: the library is the header's version", NULL, 0, 0);

    /* ---- instance, with the validation layer and the engine's messenger ---- */
    const char *layer = "VK_LAYER_KHRONOS_validation", *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    uint32_t n_layers = 0;
    vkEnumerateInstanceLayerProperties(&n_layers, NULL);
    VkLayerProperties *layers = calloc(n_layers + 1, sizeof *layers);
    vkEnumerateInstanceLayerProperties(&n_layers, layers);
    int validation = 0;
    for (uint32_t i = 0; i < n_layers; i++)
        validation |= !strcmp(layers[i].layerName, layer);
    free(layers);
    printf("engine: validation layer %s\n", validation ? "on" : "not installed");
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "engine",
                             .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
                               .enabledLayerCount = validation ? 1u : 0u, .ppEnabledLayerNames = &layer,
                               .enabledExtensionCount = validation ? 1u : 0u, .ppEnabledExtensionNames = &ext};
    VkInstance instance;
    if (vkCreateInstance(&ii, NULL, &instance) != VK_SUCCESS) {
        printf("FAIL engine: vkCreateInstance\n");
        return 1;
    }
    volkLoadInstance(instance);
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
    if (validation) {
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
            .pfnUserCallback = on_message};
        vkCreateDebugUtilsMessengerEXT(instance, &mi, NULL, &messenger);
    }

    /* ---- the device, with exactly the features the library documents ---- */
    uint32_t n_pd = 1;
    VkPhysicalDevice pd;
    VkResult vr = vkEnumeratePhysicalDevices(instance, &n_pd, &pd);
    if ((vr != VK_SUCCESS && vr != VK_INCOMPLETE) || n_pd == 0) {
        printf("FAIL engine: no device\n");
        return 1;
    }
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    printf("engine: device %s\n", props.deviceName);
    uint32_t n_ext = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, NULL);
    VkExtensionProperties *exts = calloc(n_ext + 1, sizeof *exts);
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n_ext, exts);
    int has_coop = 0;
    for (uint32_t i = 0; i < n_ext; i++)
        has_coop |= !strcmp(exts[i].extensionName, "VK_KHR_cooperative_matrix");
    free(exts);
    /* VkPhysicalDeviceCooperativeMatrixFeaturesKHR: sType 1000506000, then pNext and two VkBool32
     * (spelled out: the Vulkan headers of Debian 12 predate it) */
    struct coop_features {
        VkStructureType sType;
        void *pNext;
        VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
    } sup_coop = {(VkStructureType)1000506000, NULL, 0, 0}, en_coop = sup_coop;
    VkPhysicalDeviceVulkan13Features sup13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                              .pNext = has_coop ? &sup_coop : NULL};
    VkPhysicalDeviceVulkan12Features sup12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                              .pNext = &sup13};
    VkPhysicalDeviceVulkan11Features sup11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                              .pNext = &sup12};
    VkPhysicalDeviceFeatures2 supported = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &sup11};
    vkGetPhysicalDeviceFeatures2(pd, &supported);
    VkPhysicalDeviceVulkan13Features en13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                             .pNext = has_coop ? &en_coop : NULL};
    VkPhysicalDeviceVulkan12Features en12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                             .pNext = &en13};
    VkPhysicalDeviceVulkan11Features en11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                             .pNext = &en12};
    VkPhysicalDeviceFeatures2 enable = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &en11};
    uint32_t features = 0;
    hk_status st = hk_features_enable(&supported, HK_FEATURES_USED, &enable, &features);
    check(st == HK_OK, "engine: hk_features_enable", NULL, 0, 0);
    if (st != HK_OK) {
        printf("    %s\n", hk_last_error());
        return 1;
    }
    if (!(features & HK_FEATURE_COOPMAT_KHR))
        en13.pNext = NULL; /* the extension's struct only with the extension */
    printf("engine: features 0x%x (subgroup size control %s, integer dot %s, KHR coopmat %s)\n", features,
           features & HK_FEATURE_SUBGROUP_SIZE_CONTROL ? "yes" : "no",
           features & HK_FEATURE_INTEGER_DOT ? "yes" : "no", features & HK_FEATURE_COOPMAT_KHR ? "yes" : "no");
    uint32_t n_fam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_fam, NULL);
    VkQueueFamilyProperties *fams = calloc(n_fam + 1, sizeof *fams);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n_fam, fams);
    uint32_t family = 0;
    while (family < n_fam && !(fams[family].queueFlags & VK_QUEUE_COMPUTE_BIT))
        family++;
    free(fams);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = family,
                                  .queueCount = 1, .pQueuePriorities = &prio};
    const char *coop_ext = "VK_KHR_cooperative_matrix";
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &enable,
                             .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi,
                             .enabledExtensionCount = (features & HK_FEATURE_COOPMAT_KHR) ? 1u : 0u,
                             .ppEnabledExtensionNames = &coop_ext};
    VkDevice device;
    if (vkCreateDevice(pd, &di, NULL, &device) != VK_SUCCESS) {
        printf("FAIL engine: vkCreateDevice\n");
        return 1;
    }
    volkLoadDevice(device);
    VkQueue queue;
    vkGetDeviceQueue(device, family, 0, &queue);

    /* ---- memory: one host-visible buffer holding every tensor ---- */
    layout l = make_layout();
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = l.total,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkBuffer vkbuf;
    vkCreateBuffer(device, &bi, NULL, &vkbuf);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, vkbuf, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    uint32_t type = 0;
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    while (type < mp.memoryTypeCount &&
           (!(req.memoryTypeBits & (1u << type)) || (mp.memoryTypes[type].propertyFlags & want) != want))
        type++;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = type};
    VkDeviceMemory memory;
    if (type == mp.memoryTypeCount || vkAllocateMemory(device, &ai, NULL, &memory) != VK_SUCCESS) {
        printf("FAIL engine: no host-visible memory for %llu bytes\n", (unsigned long long)l.total);
        return 1;
    }
    vkBindBufferMemory(device, vkbuf, memory, 0);
    uint8_t *m;
    vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, (void **)&m);
    memset(m, 0xFF, l.total); /* NaN everywhere an output was never written */
    for (int i = 0; i < HIDDEN; i++)
        ((float *)(m + l.g))[i] = uniform(0.5f, 1.5f);
    for (int i = 0; i < EXPERTS * HIDDEN; i++)
        ((float *)(m + l.wr))[i] = uniform(-0.05f, 0.05f);
    random_q8_0(m + l.wq, HIDDEN, HIDDEN);
    random_q8_0(m + l.wgate, EXPERTS * FF, HIDDEN);
    random_q8_0(m + l.wdown, EXPERTS * HIDDEN, FF);

    /* ---- libhkernel borrows it all ---- */
    hk_borrowed_device bd;
    hk_borrowed_device_init(&bd);
    bd.get_instance_proc_addr = vkGetInstanceProcAddr; /* the engine's loader */
    bd.instance = instance;
    bd.physical_device = pd;
    bd.device = device;
    bd.queue = queue;
    bd.queue_family_index = family;
    bd.enabled_features = features;
    bd.disable_pipeline_cache = 1;
    hk_context *ctx = NULL;
    st = hk_context_create_borrowed(&bd, &ctx);
    check(st == HK_OK, "engine: hk_context_create_borrowed", NULL, 0, 0);
    if (st != HK_OK) {
        printf("    %s\n", hk_last_error());
        return 1;
    }
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    /* at load time, every pipeline the step can need: none is built while decoding */
    st = hk_context_prepare(ctx, "hk_rmsnorm,hk_quantize_q8_1,hk_matvec_int8,hk_gemv_f32,hk_moe_route,hk_moe_matvec_int8");
    check(st == HK_OK, "engine: hk_context_prepare", NULL, 0, 0);
    uint32_t prepared = hk_context_pipeline_count(ctx);
    hk_buffer *buf = NULL;
    hk_buffer_wrap(ctx, vkbuf, l.total, &buf);

    step steps[2];
    for (int t = 0; t < 2; t++) {
        steps[t] = (step){.id = t, .ctx = ctx, .buf = buf, .vkbuf = vkbuf, .l = &l};
        VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                      .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                      .queueFamilyIndex = family};
        vkCreateCommandPool(device, &pi, NULL, &steps[t].pool);
        VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                           .commandPool = steps[t].pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                           .commandBufferCount = 1};
        vkAllocateCommandBuffers(device, &cai, &steps[t].cmd);
        st = hk_stream_wrap_timed(ctx, steps[t].cmd, caps.timestamps ? 2 : 0, &steps[t].stream);
        if (st != HK_OK) {
            printf("FAIL engine: hk_stream_wrap_timed: %s\n", hk_last_error());
            return 1;
        }
    }

    for (int round = 0; round < 2; round++) {
        for (int t = 0; t < 2; t++) {
            float *x = (float *)(m + l.x_src[t]);
            for (int i = 0; i < HIDDEN; i++)
                x[i] = uniform(-2.0f, 2.0f);
        }
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 2);
        pthread_t threads[2];
        for (int t = 0; t < 2; t++) {
            steps[t].start = &start;
            pthread_create(&threads[t], NULL, record_step, &steps[t]);
        }
        for (int t = 0; t < 2; t++)
            pthread_join(threads[t], NULL);
        pthread_barrier_destroy(&start);
        int recorded = 1;
        for (int t = 0; t < 2; t++) {
            char what[96];
            snprintf(what, sizeof what, "engine: step %d recorded by thread %d", round, t);
            check(steps[t].status == HK_OK, what, NULL, 0, 0);
            if (steps[t].status != HK_OK) {
                printf("    %s\n", steps[t].why);
                recorded = 0;
            }
        }
        if (!recorded)
            break;
        VkCommandBuffer cmds[2] = {steps[0].cmd, steps[1].cmd};
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 2, .pCommandBuffers = cmds};
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        VkFence fence;
        vkCreateFence(device, &fi, NULL, &fence);
        vr = vkQueueSubmit(queue, 1, &si, fence);
        if (vr == VK_SUCCESS)
            vr = vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX);
        vkDestroyFence(device, fence, NULL);
        check(vr == VK_SUCCESS, "engine: submit and wait", NULL, 0, 0);
        for (int t = 0; t < 2; t++) {
            double ms = 0;
            if (caps.timestamps && hk_stream_elapsed_ms(steps[t].stream, 0, 1, &ms) == HK_OK)
                printf("engine: step %d thread %d: %.3f ms on the GPU (wrapped-stream timestamps)\n", round, t, ms);
            else if (caps.timestamps)
                check(0, "engine: timestamps of a wrapped stream", NULL, 0, 0);
            check_step(t, round, m, &l);
            hk_stream_reset(steps[t].stream); /* the engine's submit completed */
            vkResetCommandBuffer(steps[t].cmd, 0);
        }
    }
    check(hk_context_pipeline_count(ctx) == prepared, "engine: no pipeline built while decoding", " (%.0f, %.0f)",
          (double)prepared, (double)hk_context_pipeline_count(ctx));

    for (int t = 0; t < 2; t++) {
        hk_stream_destroy(steps[t].stream);
        vkDestroyCommandPool(device, steps[t].pool, NULL);
    }
    hk_buffer_destroy(buf);
    hk_context_destroy(ctx);
    vkUnmapMemory(device, memory);
    vkDestroyBuffer(device, vkbuf, NULL);
    vkFreeMemory(device, memory, NULL);
    vkDestroyDevice(device, NULL);
    unsigned seen = messages;
    if (messenger)
        vkDestroyDebugUtilsMessengerEXT(instance, messenger, NULL);
    vkDestroyInstance(instance, NULL);
    check(seen == 0, "engine: no validation messages", " (%.0f seen)", seen, 0);
    printf("engine: %s (%d failure%s)\n", failures ? "FAIL" : "OK", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
