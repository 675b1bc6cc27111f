/* Runtime: device enumeration and capabilities, versions and sized structs, the feature helper,
 * validation messages routed, buffers (fill, copy, offsets), recorded uploads and downloads, the
 * persisted pipeline cache, pipelines built ahead of time, an engine's own device, buffers and
 * command buffers borrowed (timestamps, hk_stream_barrier, aliasing), two threads recording on one
 * context, and a lost device. */
#define _POSIX_C_SOURCE 200809L
#include "cases.h"
#include "hk_test.h"

#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

static hk_context *ctx;

static void test_caps(void)
{
    hk_caps caps;
    hk_check_status("caps", hk_context_caps(ctx, &caps), HK_OK, NULL);
    hk_check(caps.device_name[0] && caps.subgroup_size >= 1 && caps.subgroup_size_min <= caps.subgroup_size &&
                 caps.subgroup_size <= caps.subgroup_size_max && (caps.features & HK_FEATURE_STORAGE_16BIT) &&
                 caps.shared_memory_bytes >= 16384 && caps.max_workgroup_size >= 128,
             "caps plausible", "%s: subgroup %u [%u,%u], shared %u B, int dot %d (accelerated %d), coopmat KHR %d (%u shapes), timestamps %d",
             caps.device_name, caps.subgroup_size, caps.subgroup_size_min, caps.subgroup_size_max,
             caps.shared_memory_bytes, caps.integer_dot, caps.integer_dot_accelerated, caps.coopmat_khr,
             caps.coopmat_khr_count, caps.timestamps);
    uint32_t count = 0;
    char names[8][256];
    VkPhysicalDeviceType types[8];
    hk_status st = hk_enumerate_devices(names, types, 8, &count);
    int found = 0;
    for (uint32_t i = 0; i < count && i < 8; i++)
        found |= strcmp(names[i], caps.device_name) == 0;
    hk_check(st == HK_OK && count >= 1 && found, "enumerate devices", "%u devices, context device listed: %d", count, found);
}

static void test_buffers(void)
{
    hk_rng rng = {9};
    uint32_t data[256];
    for (int i = 0; i < 256; i++)
        data[i] = (uint32_t)hk_rng_next(&rng);
    hk_buffer *a = hk_test_buffer(ctx, sizeof data, data), *b = hk_test_buffer(ctx, sizeof data, NULL);
    hk_check(hk_buffer_size(a) == sizeof data && hk_buffer_handle(a) != VK_NULL_HANDLE, "buffer size and handle", NULL);
    hk_check_status("fill", hk_buffer_fill(b, 0, sizeof data, 0xA5A5A5A5u), HK_OK, NULL);
    hk_check_status("copy at offsets", hk_copy(ctx, NULL, (hk_view){a, 40}, (hk_view){b, 100}, 400), HK_OK, NULL);
    uint32_t got[256];
    hk_buffer_download(b, 0, got, sizeof got);
    int ok = 1;
    for (int i = 0; i < 256; i++) {
        uint32_t want = (i >= 25 && i < 125) ? data[i - 15] : 0xA5A5A5A5u;
        ok &= got[i] == want;
    }
    hk_check(ok, "copy moved exactly the range", NULL);
    /* 16-byte aligned: the compute copy kernel rather than a transfer */
    hk_check_status("fill again", hk_buffer_fill(b, 0, sizeof data, 0x5A5A5A5Au), HK_OK, NULL);
    hk_check_status("aligned copy", hk_copy(ctx, NULL, (hk_view){a, 16}, (hk_view){b, 64}, 512), HK_OK, NULL);
    hk_buffer_download(b, 0, got, sizeof got);
    ok = 1;
    for (int i = 0; i < 256; i++) {
        uint32_t want = (i >= 16 && i < 144) ? data[i - 12] : 0x5A5A5A5Au;
        ok &= got[i] == want;
    }
    hk_check(ok, "aligned copy moved exactly the range", NULL);
    uint8_t part[7];
    hk_buffer_download(a, 3, part, 7);
    hk_check(memcmp(part, (uint8_t *)data + 3, 7) == 0, "download at an odd offset", NULL);
    hk_buffer_destroy(a);
    hk_buffer_destroy(b);
}

static void run_one_matvec(hk_context *c, const char *name)
{
    hk_rng rng = {3};
    uint8_t w[2 * 34 * 8];
    float x[256], y[8], ref[8];
    hk_random_blocks(&rng, HK_TYPE_Q8_0, w, 16, 0.1f);
    hk_rng_fill(&rng, x, 256, -1, 1);
    hk_ref_matvec(HK_REF_Q8_0, w, x, ref, 2, 256);
    hk_buffer *wb = hk_test_buffer(c, sizeof w, w), *xb = hk_test_buffer(c, sizeof x, x), *yb = hk_test_buffer(c, 32, NULL);
    hk_status st = hk_matvec_q8_0(c, NULL, (hk_view){wb, 0}, (hk_view){xb, 0}, (hk_view){yb, 0}, 2, 256);
    hk_poison(y, 8);
    if (st == HK_OK)
        st = hk_buffer_download(yb, 0, y, 8);
    if (st != HK_OK)
        hk_check(0, name, "%s", hk_last_error());
    else
        hk_check_close(name, y, ref, 2, 1e-4);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(yb);
}

static void test_pipeline_cache(void)
{
    char dir[] = "/tmp/hk-cache-XXXXXX";
    if (!mkdtemp(dir)) {
        hk_check(0, "pipeline cache", "mkdtemp failed");
        return;
    }
    char sub[300];
    snprintf(sub, sizeof sub, "%s/nested/dir", dir);
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.pipeline_cache_dir = sub;
    hk_context *c = NULL;
    hk_check_status("context with cache dir", hk_context_create(&desc, &c), HK_OK, NULL);
    if (!c)
        return;
    run_one_matvec(c, "matvec, cold cache");
    hk_context_destroy(c);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls %s/hkernel-*.bin >/dev/null 2>&1", sub);
    hk_check(system(cmd) == 0, "pipeline cache persisted", "%s", sub);
    c = NULL;
    hk_check_status("context reopening cache", hk_context_create(&desc, &c), HK_OK, NULL);
    if (c) {
        run_one_matvec(c, "matvec, warm cache");
        hk_context_destroy(c);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- the pipeline cache when something is wrong at its path --------------------------------
 * Each case: a fresh temporary directory, something placed where the cache file or its directory
 * goes, then a context on it: creation succeeds, a kernel runs right, destroying the context
 * (which writes the cache) finishes, nothing hangs (alarm), the problem is reported as a warning
 * on stderr, and the validation layer says nothing. */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL pipeline cache: hung (no answer within 60 s)\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(2);
    _exit(1);
}

/* hkernel-<major>.<minor>.<patch>-<uuid hex>-<driver version>.bin, as hkernel.h documents it */
static void cache_file_name(char *out, size_t size)
{
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    char uuid[33];
    for (int i = 0; i < 16; i++)
        snprintf(uuid + 2 * i, 3, "%02x", caps.device_uuid[i]);
    snprintf(out, size, "hkernel-%d.%d.%d-%s-%08x.bin", HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH, uuid,
             caps.driver_version);
}

static void remove_tree(const char *dir)
{
    char *cmd = malloc(strlen(dir) + 32);
    sprintf(cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    free(cmd);
}

/* base followed by `levels` directories of 100 letters each ('a', 'b', ... cycling), malloc'd */
static char *deep_path(const char *base, int levels)
{
    size_t len = strlen(base);
    char *path = malloc(len + 101 * (size_t)levels + 1);
    strcpy(path, base);
    for (int i = 0; i < levels; i++, len += 101) {
        path[len] = '/';
        memset(path + len + 1, 'a' + i % 26, 100);
        path[len + 101] = '\0';
    }
    return path;
}

/* entries of dir whose name ends in suffix */
static int count_suffix(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t a = strlen(e->d_name), b = strlen(suffix);
        n += a >= b && strcmp(e->d_name + a - b, suffix) == 0;
    }
    closedir(d);
    return n;
}

/* Creates a context on cache_dir, runs a kernel, destroys it; stderr is captured meanwhile and
 * must contain `warning` (NULL: any or none). */
static void cache_case(const char *name, const char *cache_dir, const char *warning)
{
    char err_path[] = "/tmp/hk-cache-stderr-XXXXXX";
    int err_fd = mkstemp(err_path);
    fflush(stderr);
    int saved = dup(2);
    dup2(err_fd, 2);
    alarm(60);
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.enable_validation = 1;
    desc.pipeline_cache_dir = cache_dir;
    hk_context *c = NULL;
    char label[160];
    snprintf(label, sizeof label, "cache %s: context", name);
    hk_status st = hk_context_create(&desc, &c);
    uint32_t messages = 0;
    if (st == HK_OK) {
        snprintf(label, sizeof label, "cache %s: kernel", name);
        run_one_matvec(c, label);
        messages = hk_context_validation_messages(c);
        hk_context_destroy(c);
    }
    alarm(0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096] = "";
    ssize_t n = pread(err_fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(err_fd);
    unlink(err_path);
    if (*text)
        fprintf(stderr, "%s", text);
    snprintf(label, sizeof label, "cache %s: context created", name);
    hk_check_status(label, st, HK_OK, NULL);
    snprintf(label, sizeof label, "cache %s: no validation messages", name);
    hk_check(messages == 0, label, "%u", messages);
    if (warning) {
        snprintf(label, sizeof label, "cache %s: warned", name);
        hk_check(strstr(text, "hkernel: pipeline cache: ") && strstr(text, warning), label, "want \"%s\"", warning);
    }
}

static void test_pipeline_cache_problems(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    char file[128];
    cache_file_name(file, sizeof file);
    struct stat st;

    /* a FIFO at the file's path: opening it for reading would wait for a writer forever */
    char dir[] = "/tmp/hk-cache-XXXXXX";
    if (!mkdtemp(dir)) {
        hk_check(0, "mkdtemp", NULL);
        return;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    hk_check(mkfifo(path, 0644) == 0, "cache fifo: mkfifo", NULL);
    cache_case("fifo", dir, "not a regular file");
    hk_check(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0, "cache fifo: replaced by a cache file", NULL);
    remove_tree(dir);

    /* a link at the file's path to a FIFO: not followed */
    strcpy(dir, "/tmp/hk-cache-XXXXXX");
    if (!mkdtemp(dir)) {
        hk_check(0, "mkdtemp", NULL);
        return;
    }
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    hk_check(mkfifo(fifo, 0644) == 0 && symlink(fifo, path) == 0, "cache link: setup", NULL);
    cache_case("link to a fifo", dir, "a symbolic link, not followed");
    hk_check(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "cache link: its target untouched", NULL);
    remove_tree(dir);

    /* a directory at the file's path: nothing to read, and the new file cannot replace it */
    strcpy(dir, "/tmp/hk-cache-XXXXXX");
    if (!mkdtemp(dir)) {
        hk_check(0, "mkdtemp", NULL);
        return;
    }
    snprintf(path, sizeof path, "%s/%s", dir, file);
    hk_check(mkdir(path, 0755) == 0, "cache directory: mkdir", NULL);
    cache_case("directory", dir, "not a regular file");
    hk_check(stat(path, &st) == 0 && S_ISDIR(st.st_mode) && count_suffix(dir, ".tmp") == 0,
             "cache directory: left as it was, no temporary file left behind", NULL);
    remove_tree(dir);

    /* a device whose reads never end (/dev/zero's numbers) at the file's path, and links to such
     * a device and to a directory: none is read */
    strcpy(dir, "/tmp/hk-cache-XXXXXX");
    if (!mkdtemp(dir)) {
        hk_check(0, "mkdtemp", NULL);
        return;
    }
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (hk_test_zero_device(path)) {
        cache_case("device", dir, "not a regular file");
        hk_check(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0, "cache device: replaced by a cache file",
                 NULL);
        unlink(path);
    }
    hk_check(symlink("/dev/zero", path) == 0, "cache link to /dev/zero: setup", NULL);
    cache_case("link to /dev/zero", dir, "a symbolic link, not followed");
    unlink(path);
    char target[512];
    snprintf(target, sizeof target, "%s/sub", dir);
    hk_check(mkdir(target, 0755) == 0 && symlink(target, path) == 0, "cache link to a directory: setup", NULL);
    cache_case("link to a directory", dir, "a symbolic link, not followed");
    hk_check(count_suffix(target, "") == 2, "cache link to a directory: the directory left empty", NULL); /* . and .. */
    remove_tree(dir);

    /* garbage in the file: not given to the driver, replaced by a real cache */
    strcpy(dir, "/tmp/hk-cache-XXXXXX");
    if (!mkdtemp(dir)) {
        hk_check(0, "mkdtemp", NULL);
        return;
    }
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "wb");
    hk_rng rng = {21};
    for (int i = 0; f && i < 1000; i++)
        fputc((int)(hk_rng_next(&rng) & 0xFF), f);
    hk_check(f && fclose(f) == 0, "cache garbage: written", NULL);
    cache_case("garbage", dir, "not a pipeline cache of this device");
    hk_check(stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size != 1000, "cache garbage: replaced", NULL);
    cache_case("replaced garbage", dir, NULL); /* the file written over the garbage loads */
    remove_tree(dir);

    /* a file past HK_PIPELINE_CACHE_MAX_BYTES (sparse): not read */
    strcpy(dir, "/tmp/hk-cache-XXXXXX");
    if (!mkdtemp(dir)) {
        hk_check(0, "mkdtemp", NULL);
        return;
    }
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    hk_check(fd >= 0 && ftruncate(fd, (off_t)HK_PIPELINE_CACHE_MAX_BYTES + 1) == 0, "cache huge: sparse file", NULL);
    if (fd >= 0)
        close(fd);
    cache_case("huge file", dir, "larger than HK_PIPELINE_CACHE_MAX_BYTES");
    remove_tree(dir);

    /* a cache directory of more than 767 characters (the old fixed buffer): used as given */
    strcpy(dir, "/tmp/hk-cache-XXXXXX");
    if (!mkdtemp(dir)) {
        hk_check(0, "mkdtemp", NULL);
        return;
    }
    char *long_dir = deep_path(dir, 9);
    cache_case("dir of 929 characters", long_dir, NULL);
    char *long_file = malloc(strlen(long_dir) + strlen(file) + 2);
    sprintf(long_file, "%s/%s", long_dir, file);
    char truncated[768];
    snprintf(truncated, sizeof truncated, "%s", long_dir);
    hk_check(strlen(long_dir) > 767 && stat(long_file, &st) == 0 && S_ISREG(st.st_mode) && stat(truncated, &st) != 0,
             "cache dir of 929 characters: the file is there, no truncated directory", "%zu characters", strlen(long_dir));
    free(long_file);
    free(long_dir);
    remove_tree(dir);

    /* a cache directory longer than the system takes (PATH_MAX): a warning, nothing created */
    strcpy(dir, "/tmp/hk-cache-XXXXXX");
    if (!mkdtemp(dir)) {
        hk_check(0, "mkdtemp", NULL);
        return;
    }
    char *huge_dir = deep_path(dir, 60);
    cache_case("dir of 6000+ characters", huge_dir, "longer than the system takes");
    hk_check(count_suffix(dir, "") == 2, "cache dir past PATH_MAX: nothing created", NULL); /* . and .. */
    free(huge_dir);
    remove_tree(dir);

    /* a directory that cannot be created (even by root) */
    cache_case("uncreatable dir", "/proc/hkernel-cache-test/sub", "cannot create the directory");
    /* a directory that cannot be written (not for root, who writes anyway) */
    strcpy(dir, "/tmp/hk-cache-XXXXXX");
    if (!mkdtemp(dir)) {
        hk_check(0, "mkdtemp", NULL);
        return;
    }
    chmod(dir, 0555);
    cache_case("unwritable dir", dir, geteuid() == 0 ? NULL : "cannot create");
    chmod(dir, 0755);
    remove_tree(dir);
}

/* ---- an engine's own device ------------------------------------------------------------------
 * Its own instance (with the validation layer where installed, messages counted by its own
 * messenger), a device created with exactly the features hk_features_enable asks for, its own
 * memory and command buffers; hkernel borrows them. */

#ifdef VK_KHR_cooperative_matrix
typedef VkPhysicalDeviceCooperativeMatrixFeaturesKHR test_coopmat_features;
#define TEST_COOPMAT_STYPE VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR
#else /* Debian 12's headers predate it: its layout from the registry */
typedef struct test_coopmat_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
} test_coopmat_features;
#define TEST_COOPMAT_STYPE ((VkStructureType)1000506000)
#endif

typedef struct feature_chain {
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDeviceVulkan11Features v11;
    VkPhysicalDeviceVulkan12Features v12;
    VkPhysicalDeviceVulkan13Features v13;
    test_coopmat_features coop;
} feature_chain;

static void chain(feature_chain *c, int v13, int coop)
{
    memset(c, 0, sizeof *c);
    c->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    c->v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    c->v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    c->v13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
    c->coop.sType = TEST_COOPMAT_STYPE;
    c->f2.pNext = &c->v11;
    c->v11.pNext = &c->v12;
    void **next = &c->v12.pNext;
    if (v13) {
        *next = &c->v13;
        next = &c->v13.pNext;
    }
    if (coop)
        *next = &c->coop;
}

static _Atomic uint32_t engine_messages;

static VKAPI_ATTR VkBool32 VKAPI_CALL engine_on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                        VkDebugUtilsMessageTypeFlagsEXT types,
                                                        const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)severity;
    (void)types;
    (void)user;
    engine_messages++;
    printf("engine validation: %s\n", data && data->pMessage ? data->pMessage : "?");
    return VK_FALSE;
}

typedef struct engine {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice pd;
    VkDevice device;
    VkQueue queue;
    uint32_t family;
    uint32_t features; /* what hk_features_enable enabled */
    VkPhysicalDeviceMemoryProperties memory;
} engine;

static int has_instance_layer(const char *name)
{
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, NULL);
    VkLayerProperties *l = calloc(n ? n : 1, sizeof *l);
    int found = 0;
    if (l && vkEnumerateInstanceLayerProperties(&n, l) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            found |= !strcmp(l[i].layerName, name);
    free(l);
    return found;
}

static void engine_destroy(engine *e)
{
    if (e->device)
        vkDestroyDevice(e->device, NULL);
    if (e->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(e->instance, "vkDestroyDebugUtilsMessengerEXT");
        destroy(e->instance, e->messenger, NULL);
    }
    if (e->instance)
        vkDestroyInstance(e->instance, NULL);
    memset(e, 0, sizeof *e);
}

/* The engine's instance and device on the context's device, features from hk_features_enable. */
static int engine_create(engine *e, int validation, uint32_t wanted)
{
    memset(e, 0, sizeof *e);
    const char *layer = "VK_LAYER_KHRONOS_validation", *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    validation = validation && has_instance_layer(layer);
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
                               .enabledLayerCount = validation ? 1 : 0, .ppEnabledLayerNames = &layer,
                               .enabledExtensionCount = validation ? 1 : 0, .ppEnabledExtensionNames = &ext};
    if (vkCreateInstance(&ii, NULL, &e->instance) != VK_SUCCESS) {
        hk_check(0, "engine instance", NULL);
        return 0;
    }
    if (validation) {
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
            .pfnUserCallback = engine_on_message};
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(e->instance, "vkCreateDebugUtilsMessengerEXT");
        create(e->instance, &mi, NULL, &e->messenger);
    }
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    uint32_t n = 8;
    VkPhysicalDevice pds[8];
    vkEnumeratePhysicalDevices(e->instance, &n, pds);
    VkPhysicalDeviceProperties props = {0};
    for (uint32_t i = 0; i < n && !e->pd; i++) {
        vkGetPhysicalDeviceProperties(pds[i], &props);
        if (strcmp(props.deviceName, caps.device_name) == 0)
            e->pd = pds[i];
    }
    if (!e->pd) {
        hk_check(0, "engine device", "%s not found", caps.device_name);
        engine_destroy(e);
        return 0;
    }
    vkGetPhysicalDeviceMemoryProperties(e->pd, &e->memory);
    uint32_t ext_count = 0;
    vkEnumerateDeviceExtensionProperties(e->pd, NULL, &ext_count, NULL);
    VkExtensionProperties *exts = calloc(ext_count ? ext_count : 1, sizeof *exts);
    vkEnumerateDeviceExtensionProperties(e->pd, NULL, &ext_count, exts);
    int coop = 0;
    for (uint32_t i = 0; i < ext_count; i++)
        coop |= !strcmp(exts[i].extensionName, "VK_KHR_cooperative_matrix");
    free(exts);
    int v13 = props.apiVersion >= VK_API_VERSION_1_3;
    feature_chain supported, enable;
    chain(&supported, v13, coop);
    chain(&enable, v13, coop);
    vkGetPhysicalDeviceFeatures2(e->pd, &supported.f2);
    hk_status st = hk_features_enable(&supported.f2, wanted, &enable.f2, &e->features);
    hk_check_status("hk_features_enable on the engine's device", st, HK_OK, NULL);
    const char *dev_ext = "VK_KHR_cooperative_matrix";
    uint32_t fam = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(e->pd, &fam, NULL);
    VkQueueFamilyProperties qf[16];
    fam = fam > 16 ? 16 : fam;
    vkGetPhysicalDeviceQueueFamilyProperties(e->pd, &fam, qf);
    while (e->family < fam && !(qf[e->family].queueFlags & VK_QUEUE_COMPUTE_BIT))
        e->family++;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = e->family,
                                  .queueCount = 1, .pQueuePriorities = &prio};
    /* the coopmat struct stays chained only with its extension */
    if (!(e->features & HK_FEATURE_COOPMAT_KHR))
        (v13 ? &enable.v13.pNext : &enable.v12.pNext)[0] = NULL;
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &enable.f2,
                             .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi,
                             .enabledExtensionCount = (e->features & HK_FEATURE_COOPMAT_KHR) ? 1 : 0,
                             .ppEnabledExtensionNames = &dev_ext};
    if (st != HK_OK || vkCreateDevice(e->pd, &di, NULL, &e->device) != VK_SUCCESS) {
        hk_check(0, "engine device", NULL);
        engine_destroy(e);
        return 0;
    }
    vkGetDeviceQueue(e->device, e->family, 0, &e->queue);
    return 1;
}

/* A host-visible, coherent buffer of the engine (all its tensors, views into it). */
typedef struct engine_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint8_t *mapped;
} engine_buffer;

static int engine_buffer_create(engine *e, uint64_t size, engine_buffer *b)
{
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    if (vkCreateBuffer(e->device, &bi, NULL, &b->buffer) != VK_SUCCESS)
        return 0;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(e->device, b->buffer, &req);
    uint32_t type = 0;
    VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    while (type < e->memory.memoryTypeCount &&
           (!(req.memoryTypeBits & (1u << type)) || (e->memory.memoryTypes[type].propertyFlags & want) != want))
        type++;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                               .memoryTypeIndex = type};
    if (vkAllocateMemory(e->device, &ai, NULL, &b->memory) != VK_SUCCESS)
        return 0;
    vkBindBufferMemory(e->device, b->buffer, b->memory, 0);
    return vkMapMemory(e->device, b->memory, 0, VK_WHOLE_SIZE, 0, (void **)&b->mapped) == VK_SUCCESS;
}

static void engine_buffer_destroy(engine *e, engine_buffer *b)
{
    if (b->memory) {
        vkUnmapMemory(e->device, b->memory);
        vkFreeMemory(e->device, b->memory, NULL);
    }
    if (b->buffer)
        vkDestroyBuffer(e->device, b->buffer, NULL);
}

static int sync_validation_on(void)
{
    const char *v = getenv("VK_LAYER_ENABLES");
    return v && strstr(v, "SYNCHRONIZATION");
}

/* The borrowed device's feature claims, and the helper against the owned context. */
static void test_borrowed_features(void)
{
    engine e;
    if (!engine_create(&e, 0, HK_FEATURES_USED))
        return;
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    hk_check(e.features == caps.features, "hk_features_enable agrees with the owned context",
             "helper 0x%x, owned context 0x%x", e.features, caps.features);
    hk_borrowed_device bd;
    hk_borrowed_device_init(&bd);
    bd.instance = e.instance;
    bd.physical_device = e.pd;
    bd.device = e.device;
    bd.queue = e.queue;
    bd.queue_family_index = 99;
    bd.enabled_features = e.features;
    bd.disable_pipeline_cache = 1;
    hk_context *c = (hk_context *)&bd;
    hk_check_status("borrowed queue family 99", hk_context_create_borrowed(&bd, &c), HK_ERROR_INVALID_ARGUMENT,
                    "queue_family_index=99 does not exist");
    hk_check(c == NULL, "refused borrow leaves NULL", NULL);
    bd.queue_family_index = e.family;
    bd.enabled_features = e.features & ~(uint32_t)HK_FEATURE_STORAGE_16BIT;
    hk_check_status("borrowed device without 16-bit storage", hk_context_create_borrowed(&bd, &c),
                    HK_ERROR_UNSUPPORTED, "borrowed->enabled_features lacks HK_FEATURE_STORAGE_16BIT");
    hk_check(c == NULL, "refused borrow leaves NULL", NULL);
    if (!caps.coopmat_khr) { /* claiming what the device cannot have */
        bd.enabled_features = e.features | HK_FEATURE_COOPMAT_KHR;
        hk_check_status("borrowed claim the device cannot have", hk_context_create_borrowed(&bd, &c),
                        HK_ERROR_INVALID_ARGUMENT, "has HK_FEATURE_COOPMAT_KHR, but the device does not support");
    }
    hk_borrowed_device zero = bd;
    zero.struct_size = 0;
    hk_check_status("borrowed struct_size 0", hk_context_create_borrowed(&zero, &c), HK_ERROR_INVALID_ARGUMENT,
                    "struct_size is 0: fill it with hk_borrowed_device_init");
    /* ignored bits (no kernel uses them) are dropped, not refused */
    bd.enabled_features = e.features | HK_FEATURE_STORAGE_8BIT | HK_FEATURE_COOPMAT_NV | HK_FEATURE_MAINTENANCE4;
    hk_status st = hk_context_create_borrowed(&bd, &c);
    hk_check_status("borrowed context with ignored bits", st, HK_OK, NULL);
    if (st == HK_OK) {
        hk_caps bc;
        hk_context_caps(c, &bc);
        hk_check(bc.features == (e.features & HK_FEATURES_USED),
                 "ignored bits not reported", "features 0x%x", bc.features);
        hk_context_destroy(c);
    }
    engine_destroy(&e);
}

/* hkernel records a decode-like chain into the engine's command buffer between the engine's own
 * commands: a recorded upload, the quantizer, the f32 and int8 matvecs (int8 needs the full
 * subgroups the helper enabled), an engine fill followed by hk_stream_barrier and a kernel reading
 * it, a recorded download, timestamps; the engine submits; results against the references, and
 * not one validation message from the engine's own layer. */
static void test_borrowed(void)
{
    engine e;
    if (!engine_create(&e, 1, HK_FEATURES_USED))
        return;
    uint32_t messages_before = engine_messages;
    const uint32_t rows = 3, k = 512;
    /* one buffer, views into it */
    const uint64_t w_bytes = rows * 2 * 210, xoff = 1280, xqoff = xoff + k * 4, yoff = xqoff + k / 32 * 36,
                   y8off = yoff + 64, zoff = y8off + 64, goff = zoff + 256, roff = goff + 256, r2off = roff + 256,
                   total = r2off + 256;
    engine_buffer eb = {0};
    if (!engine_buffer_create(&e, total, &eb)) {
        hk_check(0, "engine buffer", NULL);
        engine_destroy(&e);
        return;
    }
    uint8_t *mapped = eb.mapped;
    hk_rng rng = {4};
    hk_random_blocks(&rng, HK_TYPE_Q6_K, mapped, rows * 2, 0.05f);
    (void)w_bytes;
    float x[512], ref[3], g[64], rref[64], y8_down[3];
    hk_rng_fill(&rng, x, k, -1, 1);
    hk_rng_fill(&rng, g, 64, 0.5f, 1.5f);
    memcpy(mapped + goff, g, sizeof g);
    hk_poison((float *)(mapped + xoff), k); /* the recorded upload writes x */
    hk_poison((float *)(mapped + yoff), rows);
    hk_poison((float *)(mapped + y8off), rows);
    hk_poison((float *)(mapped + roff), 64);
    hk_poison(y8_down, 3);
    hk_ref_matvec(HK_REF_Q6_K, mapped, x, ref, rows, k);
    float ones[64];
    for (int i = 0; i < 64; i++)
        ones[i] = 1.0f;
    hk_ref_rmsnorm(ones, g, rref, 1, 64, 1e-5f);

    hk_borrowed_device bd;
    hk_borrowed_device_init(&bd);
    bd.instance = e.instance;
    bd.physical_device = e.pd;
    bd.device = e.device;
    bd.queue = e.queue;
    bd.queue_family_index = e.family;
    bd.enabled_features = e.features;
    bd.disable_pipeline_cache = 1;
    hk_context *c = NULL;
    hk_status st = hk_context_create_borrowed(&bd, &c);
    hk_check_status("borrowed context", st, HK_OK, NULL);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, .queueFamilyIndex = e.family};
    VkCommandPool pool;
    vkCreateCommandPool(e.device, &pi, NULL, &pool);
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBuffer cmd;
    vkAllocateCommandBuffers(e.device, &cai, &cmd);
    hk_caps caps = {0};
    if (c)
        hk_context_caps(c, &caps);
    if (st == HK_OK) {
        hk_buffer *b = NULL;
        hk_stream *s = NULL;
        VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        vkBeginCommandBuffer(cmd, &begin);
        uint32_t stamps = caps.timestamps ? 4 : 0;
        st = hk_buffer_wrap(c, eb.buffer, total, &b);
        if (st == HK_OK)
            st = hk_stream_wrap_timed(c, cmd, stamps, &s);
        if (st == HK_OK && stamps)
            st = hk_stream_timestamp(s, NULL);
        if (st == HK_OK)
            st = hk_stream_upload(s, (hk_view){b, xoff}, x, k * 4);
        if (st == HK_OK)
            st = hk_quantize_q8_1(c, s, (hk_view){b, xoff}, (hk_view){b, xqoff}, k);
        if (st == HK_OK)
            st = hk_matvec_q6k(c, s, (hk_view){b, 0}, (hk_view){b, xoff}, (hk_view){b, yoff}, rows, k);
        if (st == HK_OK)
            st = hk_matvec_int8(c, s, HK_TYPE_Q6_K, (hk_view){b, 0}, (hk_view){b, xqoff}, (hk_view){b, y8off}, rows, k);
        if (st == HK_OK) {
            /* the engine's own write between our kernels: the tracker cannot see it */
            vkCmdFillBuffer(cmd, eb.buffer, zoff, 256, 0x3f800000u);
            st = hk_stream_barrier(s);
        }
        if (st == HK_OK)
            st = hk_rmsnorm(c, s, (hk_view){b, zoff}, (hk_view){b, goff}, (hk_view){b, roff}, 1, 64, 1e-5f);
        if (st == HK_OK)
            st = hk_stream_download(s, (hk_view){b, y8off}, y8_down, rows * 4);
        if (st == HK_OK && stamps)
            st = hk_stream_timestamp(s, NULL);
        hk_check_status("record into the engine's command buffer", st, HK_OK, NULL);
        hk_check_status("wrapped stream refuses submit", hk_stream_submit(s), HK_ERROR_STATE, "submitted by the engine");
        double ms = -1;
        if (stamps)
            hk_check_status("wrapped timestamps before the submit", hk_stream_elapsed_ms(s, 0, 1, &ms), HK_ERROR_STATE,
                            "not written yet");
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        vkEndCommandBuffer(cmd);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        vkQueueSubmit(e.queue, 1, &si, VK_NULL_HANDLE);
        vkQueueWaitIdle(e.queue);
        if (stamps) {
            hk_status tst = hk_stream_elapsed_ms(s, 0, 1, &ms);
            hk_check(tst == HK_OK && ms >= 0, "timestamps on a wrapped stream", "%s, %.4f ms",
                     tst == HK_OK ? "ok" : hk_last_error(), ms);
        }
        hk_check(y8_down[0] != y8_down[0], "downloads wait for hk_stream_reset", NULL); /* still the NaN poison */
        hk_check_status("reset after the engine's submit", hk_stream_reset(s), HK_OK, NULL);
        if (st == HK_OK) {
            hk_check_close("recorded upload + matvec q6_k on the engine's device", (float *)(mapped + yoff), ref, rows, 1e-4);
            float ref8[3];
            hk_ref_matvec_q8_1(HK_REF_Q6_K, mapped, (const hk_block_q8_1 *)(mapped + xqoff), ref8, rows, k);
            hk_check_close("int8 matvec (full subgroups enabled by the helper)", (float *)(mapped + y8off), ref8, rows,
                           HK_GATE_EXACT);
            hk_check(memcmp(y8_down, mapped + y8off, rows * 4) == 0, "recorded download delivered at reset", NULL);
            hk_check_close("engine fill, hk_stream_barrier, kernel", (float *)(mapped + roff), rref, 64, 1e-5);
        }
        /* the tracker cannot see the engine's fill: without hk_stream_barrier, synchronization
         * validation reports the hazard (so the zero-message check above could fail) */
        if (st == HK_OK && sync_validation_on()) {
            uint32_t before = engine_messages;
            vkResetCommandBuffer(cmd, 0);
            vkBeginCommandBuffer(cmd, &begin);
            hk_status s1 = hk_rmsnorm(c, s, (hk_view){b, goff}, (hk_view){b, goff}, (hk_view){b, roff}, 1, 64, 1e-5f);
            vkCmdFillBuffer(cmd, eb.buffer, zoff, 256, 0x3f800000u);
            printf("expecting a synchronization hazard (engine fill, no hk_stream_barrier):\n");
            hk_status s2 = hk_rmsnorm(c, s, (hk_view){b, zoff}, (hk_view){b, goff}, (hk_view){b, r2off}, 1, 64, 1e-5f);
            vkEndCommandBuffer(cmd);
            hk_check(s1 == HK_OK && s2 == HK_OK && engine_messages > before,
                     "without hk_stream_barrier synchronization validation objects", "%u message(s)",
                     engine_messages - before);
            hk_stream_reset(s);
            messages_before += engine_messages - before;
        }
        hk_stream_destroy(s);
        hk_buffer_destroy(b);
        hk_context_destroy(c);
    }
    hk_check(engine_messages == messages_before, "no validation messages on the engine's device", "%u seen",
             engine_messages - messages_before);
    vkDestroyCommandPool(e.device, pool, NULL);
    engine_buffer_destroy(&e, &eb);
    engine_destroy(&e);
}

/* Two VkBuffers over one memory: the tracker sees two buffers, hk_stream_barrier orders them. */
static void test_aliasing(void)
{
    engine e;
    if (!engine_create(&e, 1, HK_FEATURES_USED))
        return;
    uint32_t before = engine_messages;
    engine_buffer eb = {0};
    if (!engine_buffer_create(&e, 4096, &eb)) {
        hk_check(0, "aliasing buffer", NULL);
        engine_destroy(&e);
        return;
    }
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 4096,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkBuffer alias;
    vkCreateBuffer(e.device, &bi, NULL, &alias);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(e.device, alias, &req);
    vkBindBufferMemory(e.device, alias, eb.memory, 0);
    float x[64], g[64], mid[64], ref[64];
    hk_rng rng = {21};
    hk_rng_fill(&rng, x, 64, -2, 2);
    hk_rng_fill(&rng, g, 64, 0.5f, 1.5f);
    hk_ref_rmsnorm(x, g, mid, 1, 64, 1e-5f);
    hk_ref_rmsnorm(mid, g, ref, 1, 64, 1e-5f);
    memcpy(eb.mapped, x, sizeof x);
    memcpy(eb.mapped + 256, g, sizeof g);
    hk_poison((float *)(eb.mapped + 512), 128);
    hk_borrowed_device bd;
    hk_borrowed_device_init(&bd);
    bd.instance = e.instance;
    bd.physical_device = e.pd;
    bd.device = e.device;
    bd.queue = e.queue;
    bd.queue_family_index = e.family;
    bd.enabled_features = e.features;
    bd.disable_pipeline_cache = 1;
    hk_context *c = NULL;
    hk_buffer *one = NULL, *two = NULL;
    hk_stream *s = NULL;
    hk_status st = hk_context_create_borrowed(&bd, &c);
    if (st == HK_OK)
        st = hk_buffer_wrap(c, eb.buffer, 4096, &one);
    if (st == HK_OK)
        st = hk_buffer_wrap(c, alias, 4096, &two);
    if (st == HK_OK)
        st = hk_stream_create(c, 0, &s);
    /* written through one buffer, read through the other: the barrier is the caller's */
    if (st == HK_OK)
        st = hk_rmsnorm(c, s, (hk_view){one, 0}, (hk_view){one, 256}, (hk_view){one, 512}, 1, 64, 1e-5f);
    if (st == HK_OK)
        st = hk_stream_barrier(s);
    if (st == HK_OK)
        st = hk_rmsnorm(c, s, (hk_view){two, 512}, (hk_view){two, 256}, (hk_view){two, 768}, 1, 64, 1e-5f);
    if (st == HK_OK)
        st = hk_stream_submit(s);
    hk_check_status("aliasing buffers with hk_stream_barrier", st, HK_OK, NULL);
    if (st == HK_OK)
        hk_check_close("aliasing buffers: second kernel reads the first's output", (float *)(eb.mapped + 768), ref, 64,
                       1e-5);
    hk_stream_destroy(s);
    hk_buffer_destroy(one);
    hk_buffer_destroy(two);
    hk_context_destroy(c);
    hk_check(engine_messages == before, "aliasing: no validation messages", "%u", engine_messages - before);
    vkDestroyBuffer(e.device, alias, NULL);
    engine_buffer_destroy(&e, &eb);
    engine_destroy(&e);
}

/* ---- device lost: a loader that makes vkQueueSubmit return VK_ERROR_DEVICE_LOST on demand ---- */

static int lose_device;
static PFN_vkQueueSubmit real_submit;
static PFN_vkGetDeviceProcAddr real_gdpa;

static VKAPI_ATTR VkResult VKAPI_CALL fake_submit(VkQueue q, uint32_t n, const VkSubmitInfo *si, VkFence f)
{
    return lose_device ? VK_ERROR_DEVICE_LOST : real_submit(q, n, si, f);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL fake_gdpa(VkDevice device, const char *name)
{
    if (!strcmp(name, "vkQueueSubmit")) {
        real_submit = (PFN_vkQueueSubmit)real_gdpa(device, name);
        return (PFN_vkVoidFunction)fake_submit;
    }
    return real_gdpa(device, name);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL fake_gipa(VkInstance instance, const char *name)
{
    if (!strcmp(name, "vkGetDeviceProcAddr")) {
        real_gdpa = (PFN_vkGetDeviceProcAddr)vkGetInstanceProcAddr(instance, name);
        return (PFN_vkVoidFunction)fake_gdpa;
    }
    return vkGetInstanceProcAddr(instance, name);
}

static void test_device_lost(void)
{
    engine e;
    if (!engine_create(&e, 0, HK_FEATURES_USED))
        return;
    hk_borrowed_device bd;
    hk_borrowed_device_init(&bd);
    bd.get_instance_proc_addr = fake_gipa;
    bd.instance = e.instance;
    bd.physical_device = e.pd;
    bd.device = e.device;
    bd.queue = e.queue;
    bd.queue_family_index = e.family;
    bd.enabled_features = e.features;
    bd.disable_pipeline_cache = 1;
    hk_context *c = NULL;
    hk_status st = hk_context_create_borrowed(&bd, &c);
    hk_check_status("context on a loader that can lose the device", st, HK_OK, NULL);
    if (st != HK_OK) {
        engine_destroy(&e);
        return;
    }
    hk_buffer *buf = NULL, *more = NULL;
    hk_stream *s = NULL, *s2 = NULL;
    hk_buffer_create(c, 1024, &buf);
    hk_check_status("a non-Vulkan failure", hk_buffer_create(c, 0, &more), HK_ERROR_INVALID_ARGUMENT, "size is 0");
    hk_check(hk_last_vk_result() == VK_SUCCESS, "hk_last_vk_result after a non-Vulkan failure is VK_SUCCESS", NULL);
    hk_check_status("fill before the loss", hk_buffer_fill(buf, 0, 1024, 0x3f800000u), HK_OK, NULL);
    hk_stream_create(c, 0, &s);
    hk_rmsnorm(c, s, (hk_view){buf, 0}, (hk_view){buf, 256}, (hk_view){buf, 512}, 1, 64, 1e-5f);
    lose_device = 1;
    hk_check_status("submit on a lost device", hk_stream_submit(s), HK_ERROR_DEVICE_LOST, "VK_ERROR_DEVICE_LOST");
    hk_check(hk_last_vk_result() == VK_ERROR_DEVICE_LOST, "hk_last_vk_result says VK_ERROR_DEVICE_LOST", "%d",
             (int)hk_last_vk_result());
    hk_check(hk_context_device_lost(c) == 1, "the context remembers the loss", NULL);
    lose_device = 0; /* even once the driver would work again, the context stays lost */
    hk_check_status("kernels refused after the loss",
                    hk_rmsnorm(c, s, (hk_view){buf, 0}, (hk_view){buf, 256}, (hk_view){buf, 512}, 1, 64, 1e-5f),
                    HK_ERROR_DEVICE_LOST, "device was lost");
    hk_check(hk_last_vk_result() == VK_ERROR_DEVICE_LOST, "refusals say VK_ERROR_DEVICE_LOST too", NULL);
    hk_check_status("NULL-stream kernels refused",
                    hk_rmsnorm(c, NULL, (hk_view){buf, 0}, (hk_view){buf, 256}, (hk_view){buf, 512}, 1, 64, 1e-5f),
                    HK_ERROR_DEVICE_LOST, "device was lost");
    hk_check_status("buffers refused", hk_buffer_create(c, 64, &more), HK_ERROR_DEVICE_LOST, "device was lost");
    hk_check_status("uploads refused", hk_buffer_fill(buf, 0, 64, 0), HK_ERROR_DEVICE_LOST, "device was lost");
    hk_check_status("streams refused", hk_stream_create(c, 0, &s2), HK_ERROR_DEVICE_LOST, "device was lost");
    hk_check_status("prepare refused", hk_context_prepare(c, NULL), HK_ERROR_DEVICE_LOST, "device was lost");
    hk_stream_destroy(s);
    hk_buffer_destroy(buf);
    hk_context_destroy(c);
    engine_destroy(&e);
}
/* The validation layer is really listening: a wrapped buffer without STORAGE_BUFFER usage, used
 * as a kernel's output, must be reported (on a context of its own, so the suite's context stays
 * clean). Where the layer is not installed there is nothing to check. */
static void test_validation_catches(void)
{
    hk_context *c = hk_test_context_without(0);
    if (!c)
        return;
    if (!hk_context_validation_active(c)) {
        printf("validation layer not installed: its check is not run\n");
        hk_context_destroy(c);
        return;
    }
    VkDevice device;
    hk_context_vulkan(c, NULL, NULL, &device, NULL, NULL);
    PFN_vkCreateBuffer create_buffer = (PFN_vkCreateBuffer)vkGetDeviceProcAddr(device, "vkCreateBuffer");
    PFN_vkDestroyBuffer destroy_buffer = (PFN_vkDestroyBuffer)vkGetDeviceProcAddr(device, "vkDestroyBuffer");
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 1024,
                             .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkBuffer raw;
    if (create_buffer(device, &bi, NULL, &raw) != VK_SUCCESS) {
        hk_check(0, "validation: raw buffer", NULL);
        hk_context_destroy(c);
        return;
    }
    hk_buffer *wrapped = NULL, *in = hk_test_buffer(c, 1024, NULL);
    hk_buffer_wrap(c, raw, 1024, &wrapped);
    printf("expecting validation errors for a buffer without storage usage:\n");
    fflush(stdout);
    uint32_t before = hk_context_validation_messages(c);
    /* recorded only: the buffer has no memory, so it must never run */
    hk_stream *s = NULL;
    hk_stream_create(c, 0, &s);
    hk_rmsnorm(c, s, (hk_view){in, 0}, (hk_view){in, 512}, (hk_view){wrapped, 0}, 1, 64, 1e-5f);
    hk_stream_reset(s);
    uint32_t after = hk_context_validation_messages(c);
    hk_check(after > before, "validation layer reports misuse", "%u message(s)", after - before);
    hk_stream_destroy(s);
    hk_buffer_destroy(wrapped);
    hk_buffer_destroy(in);
    destroy_buffer(device, raw, NULL);
    hk_context_destroy(c);
}

/* ---- versions and sized structs ---- */

static void test_version_and_sizes(void)
{
    uint32_t v = hk_version();
    hk_check(v == HK_VERSION && HK_VERSION_GET_MAJOR(v) == HK_VERSION_MAJOR && HK_VERSION_GET_MINOR(v) == HK_VERSION_MINOR &&
                 HK_VERSION_GET_PATCH(v) == HK_VERSION_PATCH,
             "hk_version is this header's", "%u.%u.%u", HK_VERSION_GET_MAJOR(v), HK_VERSION_GET_MINOR(v),
             HK_VERSION_GET_PATCH(v));
    /* a caller built against a newer header: a bigger desc, its unknown tail zero */
    struct {
        hk_context_desc desc;
        uint8_t newer[24];
    } big;
    hk_context_desc_init_sized(&big.desc, sizeof big);
    hk_check(big.desc.struct_size == sizeof big && big.desc.device_index == -1, "desc init records the caller's size",
             "%u", big.desc.struct_size);
    big.desc.enable_validation = 1;
    big.desc.disable_pipeline_cache = 1;
    hk_context *c = NULL;
    hk_check_status("a newer caller's desc, unknown fields zero", hk_context_create(&big.desc, &c), HK_OK, NULL);
    hk_context_destroy(c);
    c = NULL;
    big.newer[5] = 1;
    hk_check_status("a newer caller's desc asking for more", hk_context_create(&big.desc, &c), HK_ERROR_UNSUPPORTED,
                    "sets fields this libhkernel");
    hk_context_desc d;
    hk_context_desc_init(&d);
    d.struct_size = 8;
    hk_check_status("desc smaller than any version", hk_context_create(&d, &c), HK_ERROR_INVALID_ARGUMENT,
                    "smaller than any version's");
    memset(&d, 0, sizeof d);
    hk_check_status("desc without init", hk_context_create(&d, &c), HK_ERROR_INVALID_ARGUMENT,
                    "struct_size is 0: fill it with hk_context_desc_init");
    hk_check(c == NULL, "refused contexts leave NULL", NULL);

    /* caps: an older caller gets its bytes only, a newer one zeros past ours */
    struct {
        hk_caps caps;
        uint8_t newer[32];
    } wide;
    memset(&wide, 0xAB, sizeof wide);
    hk_check_status("caps for a newer caller", hk_context_caps_sized(ctx, &wide.caps, sizeof wide), HK_OK, NULL);
    int zero = 1;
    for (size_t i = 0; i < sizeof wide.newer; i++)
        zero &= wide.newer[i] == 0;
    hk_check(zero && (wide.caps.features & HK_FEATURE_STORAGE_16BIT), "caps: unknown tail zeroed", NULL);
    size_t oldest = offsetof(hk_caps, timestamp_period_ns) + sizeof(float);
    memset(&wide, 0xAB, sizeof wide);
    hk_check_status("caps for an older caller", hk_context_caps_sized(ctx, &wide.caps, oldest), HK_OK, NULL);
    const uint8_t *raw = (const uint8_t *)&wide;
    int untouched = 1;
    for (size_t i = oldest; i < sizeof wide; i++)
        untouched &= raw[i] == 0xAB;
    hk_check(untouched, "caps: nothing written past an older caller's struct", NULL);
    hk_check_status("caps size too small", hk_context_caps_sized(ctx, &wide.caps, 16), HK_ERROR_INVALID_ARGUMENT,
                    "caps_size=16");
}

/* ---- hk_features_enable on hand-made chains ---- */

static void test_features_enable(void)
{
    feature_chain sup, en;
    uint32_t bits = 0;
    chain(&sup, 1, 1);
    sup.v11.storageBuffer16BitAccess = sup.v12.shaderFloat16 = sup.v12.shaderInt8 = sup.v12.vulkanMemoryModel = VK_TRUE;
    sup.v13.subgroupSizeControl = sup.v13.computeFullSubgroups = sup.v13.shaderIntegerDotProduct = VK_TRUE;
    sup.coop.cooperativeMatrix = VK_TRUE;
    sup.v12.bufferDeviceAddress = sup.v13.robustImageAccess = VK_TRUE; /* not ours: never enabled */
    chain(&en, 1, 1);
    hk_status st = hk_features_enable(&sup.f2, HK_FEATURES_USED, &en.f2, &bits);
    hk_check(st == HK_OK && bits == HK_FEATURES_USED && en.v11.storageBuffer16BitAccess && en.v12.shaderFloat16 &&
                 en.v12.shaderInt8 && en.v12.vulkanMemoryModel && en.v13.subgroupSizeControl &&
                 en.v13.computeFullSubgroups && en.v13.shaderIntegerDotProduct && en.coop.cooperativeMatrix &&
                 !en.v12.bufferDeviceAddress && !en.v13.robustImageAccess && !en.v12.storageBuffer8BitAccess &&
                 !en.v13.maintenance4 && !en.coop.cooperativeMatrixRobustBufferAccess,
             "features: everything supported, exactly our members set", "0x%x", bits);
    /* subgroup size control is two members; coopmat needs the memory model */
    sup.v13.computeFullSubgroups = VK_FALSE;
    sup.v12.vulkanMemoryModel = VK_FALSE;
    chain(&en, 1, 1);
    st = hk_features_enable(&sup.f2, HK_FEATURES_USED, &en.f2, &bits);
    hk_check(st == HK_OK && !(bits & (HK_FEATURE_SUBGROUP_SIZE_CONTROL | HK_FEATURE_COOPMAT_KHR)) &&
                 !en.v13.subgroupSizeControl && !en.coop.cooperativeMatrix && en.v13.shaderIntegerDotProduct,
             "features: computeFullSubgroups and vulkanMemoryModel are part of their bits", "0x%x", bits);
    sup.v13.computeFullSubgroups = sup.v12.vulkanMemoryModel = VK_TRUE;
    /* wanted picks */
    chain(&en, 1, 1);
    st = hk_features_enable(&sup.f2, HK_FEATURE_STORAGE_16BIT | HK_FEATURE_INTEGER_DOT, &en.f2, &bits);
    hk_check(st == HK_OK && bits == (HK_FEATURE_STORAGE_16BIT | HK_FEATURE_INTEGER_DOT) && !en.v12.shaderFloat16 &&
                 !en.coop.cooperativeMatrix,
             "features: only the wanted bits", "0x%x", bits);
    /* the older per-feature structs in the enable chain */
    VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
                                                     .pNext = &s16};
    VkPhysicalDeviceSubgroupSizeControlFeatures ssc = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
                                                       .pNext = &f16};
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES, .pNext = &ssc};
    VkPhysicalDeviceFeatures2 old = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &dot};
    st = hk_features_enable(&sup.f2, HK_FEATURES_USED & ~(uint32_t)HK_FEATURE_COOPMAT_KHR, &old, &bits);
    hk_check(st == HK_OK && s16.storageBuffer16BitAccess && f16.shaderFloat16 && f16.shaderInt8 &&
                 ssc.subgroupSizeControl && ssc.computeFullSubgroups && dot.shaderIntegerDotProduct,
             "features: per-feature structs filled", "%s", st == HK_OK ? "" : hk_last_error());
    /* a supported member the enable chain has no struct for: refused, nothing written */
    chain(&en, 0, 0);
    st = hk_features_enable(&sup.f2, HK_FEATURES_USED, &en.f2, &bits);
    hk_check_status("features: enable chain lacks the 1.3 struct", st, HK_ERROR_INVALID_ARGUMENT,
                    "VkPhysicalDeviceVulkan13Features or VkPhysicalDeviceShaderIntegerDotProductFeatures");
    hk_check(!en.v11.storageBuffer16BitAccess && !en.v12.shaderFloat16, "features: a refusal writes nothing", NULL);
    /* a Vulkan 1.2 device: no 1.3 struct in either chain */
    feature_chain sup12;
    chain(&sup12, 0, 0);
    sup12.v11.storageBuffer16BitAccess = sup12.v12.shaderFloat16 = VK_TRUE;
    st = hk_features_enable(&sup12.f2, HK_FEATURES_USED, &en.f2, &bits);
    hk_check(st == HK_OK && bits == (HK_FEATURE_STORAGE_16BIT | HK_FEATURE_FLOAT16), "features: a Vulkan 1.2 device",
             "0x%x", bits);
    sup12.v11.storageBuffer16BitAccess = VK_FALSE;
    hk_check_status("features: no 16-bit storage", hk_features_enable(&sup12.f2, HK_FEATURES_USED, &en.f2, &bits),
                    HK_ERROR_UNSUPPORTED, "storageBuffer16BitAccess");
    hk_check_status("features: NULL", hk_features_enable(NULL, HK_FEATURES_USED, &en.f2, &bits),
                    HK_ERROR_INVALID_ARGUMENT, "supported is NULL");
    VkPhysicalDeviceVulkan11Features notf2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    hk_check_status("features: not a VkPhysicalDeviceFeatures2",
                    hk_features_enable(&sup.f2, HK_FEATURES_USED, (VkPhysicalDeviceFeatures2 *)&notf2, &bits),
                    HK_ERROR_INVALID_ARGUMENT, "enable is not a VkPhysicalDeviceFeatures2");
}

/* ---- validation messages routed through the context's callback ---- */

typedef struct routed {
    _Atomic uint32_t count, errors;
    char first[160];
} routed;

static void route_message(void *user, int severity, const char *message)
{
    routed *r = user;
    if (r->count++ == 0)
        snprintf(r->first, sizeof r->first, "%s", message);
    r->errors += severity == HK_MESSAGE_ERROR;
}

static void test_validation_callback(void)
{
    routed r = {0};
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.enable_validation = 1;
    desc.disable_pipeline_cache = 1;
    desc.validation_callback = route_message;
    desc.validation_user = &r;
    hk_context *c = NULL;
    if (hk_context_create(&desc, &c) != HK_OK || !hk_context_validation_active(c)) {
        printf("validation layer not installed: the callback is not tested\n");
        hk_context_destroy(c);
        return;
    }
    VkDevice device;
    hk_context_vulkan(c, NULL, NULL, &device, NULL, NULL);
    PFN_vkCreateBuffer create_buffer = (PFN_vkCreateBuffer)vkGetDeviceProcAddr(device, "vkCreateBuffer");
    PFN_vkDestroyBuffer destroy_buffer = (PFN_vkDestroyBuffer)vkGetDeviceProcAddr(device, "vkDestroyBuffer");
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 1024,
                             .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT};
    VkBuffer raw;
    create_buffer(device, &bi, NULL, &raw);
    hk_buffer *wrapped = NULL, *in = hk_test_buffer(c, 1024, NULL);
    hk_buffer_wrap(c, raw, 1024, &wrapped);
    /* stderr must stay quiet: the messages go to the callback */
    fflush(stderr);
    int saved = dup(2);
    char path[] = "/tmp/hk-stderr-XXXXXX";
    int fd = mkstemp(path);
    dup2(fd, 2);
    hk_stream *s = NULL;
    hk_stream_create(c, 0, &s);
    hk_rmsnorm(c, s, (hk_view){in, 0}, (hk_view){in, 512}, (hk_view){wrapped, 0}, 1, 64, 1e-5f);
    hk_stream_reset(s);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    off_t printed = lseek(fd, 0, SEEK_END);
    close(fd);
    unlink(path);
    uint32_t counted = hk_context_validation_messages(c);
    hk_check(r.count > 0 && r.errors > 0 && counted == r.count && strstr(r.first, "VUID") && printed == 0,
             "validation messages go to the callback, counted, not to stderr",
             "%u routed (%u errors), %u counted, %lld bytes on stderr: %.80s", (unsigned)r.count, (unsigned)r.errors,
             counted, (long long)printed, r.first);
    hk_stream_destroy(s);
    hk_buffer_destroy(wrapped);
    hk_buffer_destroy(in);
    destroy_buffer(device, raw, NULL);
    hk_context_destroy(c);
}

/* Buffers and streams left alive at hk_context_destroy: freed with the context (no leak, no
 * layer message about objects outliving the device), each named to the callback by kind. Without
 * validation the same happens silently (ASan's leak check covers it). */
static void test_destroy_with_live_objects(void)
{
    for (int validate = 1; validate >= 0; validate--) {
        routed r = {0};
        hk_context_desc desc;
        hk_context_desc_init(&desc);
        desc.enable_validation = validate;
        desc.disable_pipeline_cache = 1;
        desc.validation_callback = route_message;
        desc.validation_user = &r;
        hk_context *c = NULL;
        if (hk_context_create(&desc, &c) != HK_OK) {
            hk_check(0, "destroy with live objects: context", "%s", hk_last_error());
            return;
        }
        int active = hk_context_validation_active(c);
        VkDevice device;
        hk_context_vulkan(c, NULL, NULL, &device, NULL, NULL);
        PFN_vkCreateBuffer create_buffer = (PFN_vkCreateBuffer)vkGetDeviceProcAddr(device, "vkCreateBuffer");
        PFN_vkDestroyBuffer destroy_buffer = (PFN_vkDestroyBuffer)vkGetDeviceProcAddr(device, "vkDestroyBuffer");
        VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 256,
                                 .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
        VkBuffer raw;
        create_buffer(device, &bi, NULL, &raw);
        hk_buffer *created = hk_test_buffer(c, 4096, NULL), *wrapped = NULL, *freed = hk_test_buffer(c, 64, NULL);
        hk_buffer_wrap(c, raw, 256, &wrapped);
        hk_stream *s = NULL, *prepare = NULL;
        hk_stream_create(c, 0, &s);
        hk_stream_create_prepare(c, &prepare);
        /* recorded, never submitted: the stream's descriptors and command buffer go with it */
        hk_rmsnorm(c, s, (hk_view){created, 0}, (hk_view){created, 1024}, (hk_view){created, 2048}, 1, 64, 1e-5f);
        hk_buffer_destroy(freed); /* destroyed by the caller: not reported */
        destroy_buffer(device, raw, NULL); /* the engine's VkBuffer, gone before its wrapper */
        hk_context_destroy(c);
        if (!validate) {
            hk_check(r.count == 0, "destroy with live objects, no validation: nothing reported", "%u messages",
                     (unsigned)r.count);
        } else if (!active) {
            printf("validation layer not installed: leaked objects are not reported\n");
        } else {
            hk_check(r.count == 4 && r.errors == 4 && strstr(r.first, "hk_context_destroy: an hk_stream") &&
                         !strstr(r.first, "VUID"),
                     "destroy with live objects: 2 streams and 2 buffers reported by kind, no layer message",
                     "%u messages (%u errors), the first: %.100s", (unsigned)r.count, (unsigned)r.errors, r.first);
        }
    }
}

/* ---- recorded uploads and downloads on an owned stream ---- */

/* The barrier count: one before the first command, one before each dependent command, none
 * between independent ones, hk_stream_barrier's, zero again after the submit. */
static void test_barrier_count(void)
{
    hk_buffer *buf = hk_test_buffer(ctx, 6 * 1024, NULL);
    hk_stream *s = NULL;
    hk_status st = hk_stream_create(ctx, 0, &s);
    uint32_t counts[4] = {0};
    if (st == HK_OK)
        st = hk_copy(ctx, s, (hk_view){buf, 0}, (hk_view){buf, 1024}, 1024); /* the first: full barrier */
    if (st == HK_OK)
        st = hk_copy(ctx, s, (hk_view){buf, 2048}, (hk_view){buf, 3072}, 1024); /* independent */
    counts[0] = hk_stream_barrier_count(s);
    if (st == HK_OK)
        st = hk_copy(ctx, s, (hk_view){buf, 1024}, (hk_view){buf, 4096}, 1024); /* reads the first's output */
    counts[1] = hk_stream_barrier_count(s);
    if (st == HK_OK)
        st = hk_stream_barrier(s);
    counts[2] = hk_stream_barrier_count(s);
    uint32_t kernels = hk_stream_kernel_count(s);
    if (st == HK_OK)
        st = hk_stream_submit(s);
    counts[3] = hk_stream_barrier_count(s);
    hk_check(st == HK_OK && counts[0] == 1 && counts[1] == 2 && counts[2] == 3 && counts[3] == 0 && kernels == 3,
             "stream barrier count: 1 first, none between independent, 1 dependent, 1 explicit, 0 after submit",
             "%u %u %u %u, %u kernels", counts[0], counts[1], counts[2], counts[3], kernels);
    hk_check(hk_stream_barrier_count(NULL) == 0, "barrier count of NULL is 0", NULL);
    hk_stream *prep = NULL;
    st = hk_stream_create_prepare(ctx, &prep);
    if (st == HK_OK)
        st = hk_copy(ctx, prep, (hk_view){buf, 0}, (hk_view){buf, 1024}, 1024);
    hk_check(st == HK_OK && hk_stream_barrier_count(prep) == 0, "a prepare stream records no barrier", NULL);
    hk_stream_destroy(prep);
    hk_stream_destroy(s);
    hk_buffer_destroy(buf);
}

static void test_stream_transfers(void)
{
    hk_rng rng = {33};
    float x[300], g[300], ref[300], got[300];
    hk_buffer *buf = hk_test_buffer(ctx, 4096, NULL);
    hk_stream *s = NULL;
    hk_stream_create(ctx, 0, &s);
    int ok = 1;
    for (int round = 0; round < 3 && ok; round++) { /* the staging memory is reused after each submit */
        hk_rng_fill(&rng, x, 300, -3, 3);
        hk_rng_fill(&rng, g, 300, 0.5f, 1.5f);
        hk_ref_rmsnorm(x, g, ref, 1, 300, 1e-5f);
        hk_poison(got, 300);
        hk_status st = hk_stream_upload(s, (hk_view){buf, 0}, x, sizeof x);
        float copy[300];
        memcpy(copy, g, sizeof g);
        if (st == HK_OK)
            st = hk_stream_upload(s, (hk_view){buf, 1216}, copy, sizeof copy);
        memset(copy, 0, sizeof copy); /* the data was staged during the call */
        if (st == HK_OK)
            st = hk_rmsnorm(ctx, s, (hk_view){buf, 0}, (hk_view){buf, 1216}, (hk_view){buf, 2432}, 1, 300, 1e-5f);
        if (st == HK_OK)
            st = hk_stream_download(s, (hk_view){buf, 2432}, got, sizeof got);
        uint32_t bits;
        memcpy(&bits, &got[0], 4);
        ok = st == HK_OK && bits == HK_POISON_WORD; /* nothing delivered before the submit */
        if (st == HK_OK)
            st = hk_stream_submit(s);
        ok = ok && st == HK_OK && hk_scale_rel(got, ref, 300) < 1e-5;
        if (!ok)
            hk_check(0, "recorded upload, kernel, download", "round %d: %s", round, hk_last_error());
    }
    if (ok)
        hk_check(1, "recorded upload, kernel, download (3 submits)", NULL);
    /* dropped when the stream is reset before its submit */
    hk_poison(got, 300);
    hk_stream_download(s, (hk_view){buf, 2432}, got, sizeof got);
    hk_stream_reset(s);
    hk_stream_submit(s);
    uint32_t bits;
    memcpy(&bits, &got[0], 4);
    hk_check(bits == HK_POISON_WORD, "a reset drops pending downloads", NULL);
    hk_check_status("upload of 0 bytes", hk_stream_upload(s, (hk_view){buf, 4096}, NULL, 0), HK_OK, NULL);
    hk_stream_destroy(s);
    hk_buffer_destroy(buf);
}

/* ---- pipelines ahead of time ---- */

/* Records every case of the kernel table on its test shapes in every placement into stream s
 * (a prepare stream, or a real one that is reset after each); returns how many were recorded and
 * counts in *late the cases that built a pipeline meanwhile (printed). */
static uint32_t record_every_case(hk_context *c, hk_stream *s, uint32_t *late)
{
    uint32_t recorded = 0;
    for (size_t k = 0; k < hk_case_count; k++) {
        const hk_case *kc = hk_cases[k];
        char why[256];
        if (!hk_case_available(kc, c, why, sizeof why))
            continue;
        for (uint32_t i = 0; i < kc->n_tests; i++) {
            hk_case_run run;
            if (hk_case_prepare(kc, &kc->tests[i], c, HK_REF_NONE, 7 + i, &run) != HK_OK)
                continue;
            for (int p = 0; p < HK_PLACE_COUNT; p++) {
                hk_case_bound bound;
                if (hk_case_bind(&run, p, 1, &bound) != HK_OK)
                    continue;
                uint32_t before = hk_context_pipeline_count(c);
                if (hk_case_record(&run, &bound, s, 0, 0) == HK_OK)
                    recorded++;
                if (late && hk_context_pipeline_count(c) != before) {
                    printf("    not prepared: %s %s %s\n", kc->name, run.label, hk_case_place_name(p));
                    ++*late;
                }
                hk_stream_reset(s);
                hk_case_unbind(&bound);
            }
            hk_case_release(&run);
        }
    }
    return recorded;
}

/* What hk_context_prepare promises for hk_mmq (include/hkernel.h): models' prefill shapes (64 and
 * 512 tokens, k 4096 and 14336, every weight type) and 8 tokens over model row counts, on aligned
 * views as GGUF tensors are. After it, recording them builds nothing. */
static void prepared_model_shapes(hk_context *c, const char *label)
{
    static const hk_type types[] = {HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q5_K, HK_TYPE_Q6_K};
    static const uint32_t shapes[][3] = {{64, 4096, 4096}, {512, 4096, 4096}, {64, 4096, 14336},
                                         {512, 4096, 14336}, {8, 4096, 4096},  {8, 14336, 4096}};
    const uint64_t mib = 1 << 20;
    hk_buffer *buf = NULL;
    hk_stream *ps = NULL;
    char name[160];
    /* weights (Q8_0 4096 x 14336: 62 MiB) at 0, x at 64 MiB, out at 80 MiB */
    if (hk_buffer_create(c, 96 * mib, &buf) != HK_OK || hk_stream_create_prepare(c, &ps) != HK_OK) {
        hk_check(0, "prepared model shapes: a buffer and a prepare stream", "%s", hk_last_error());
        hk_stream_destroy(ps);
        hk_buffer_destroy(buf);
        return;
    }
    uint32_t before = hk_context_pipeline_count(c), calls = 0, refused = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            hk_view w = {buf, 0}, x = {buf, 64 * mib}, out = {buf, 80 * mib};
            if (hk_mmq(c, ps, types[t], w, x, out, shapes[i][0], shapes[i][1], shapes[i][2]) == HK_OK)
                calls++;
            else
                refused++;
        }
    snprintf(name, sizeof name, "hk_mmq at models' shapes after hk_context_prepare builds nothing (%s)", label);
    hk_check(refused == 0 && calls > 0 && hk_context_pipeline_count(c) == before, name,
             "%u calls, %u refused (%s), %u pipelines built", calls, refused, refused ? hk_last_error() : "",
             hk_context_pipeline_count(c) - before);
    hk_stream_destroy(ps);
    hk_buffer_destroy(buf);
}

static void prepare_case(hk_context *c, const char *label)
{
    char name[160];
    uint32_t before = hk_context_pipeline_count(c);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hk_status st = hk_context_prepare(c, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint32_t prepared = hk_context_pipeline_count(c);
    snprintf(name, sizeof name, "hk_context_prepare (%s)", label);
    hk_check(st == HK_OK && prepared > before, name, "%u pipelines in %.0f ms%s%s", prepared - before,
             (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6, st == HK_OK ? "" : ": ",
             st == HK_OK ? "" : hk_last_error());
    hk_context_prepare(c, NULL);
    snprintf(name, sizeof name, "hk_context_prepare again builds nothing (%s)", label);
    hk_check(hk_context_pipeline_count(c) == prepared, name, NULL);
    prepared_model_shapes(c, label);
    /* the exact shapes: every case recorded into a prepare stream records nothing and builds what
     * it needs; recorded for real afterwards, nothing more is built */
    hk_stream *ps = NULL, *s = NULL;
    hk_status sp = hk_stream_create_prepare(c, &ps), sr = hk_stream_create(c, 0, &s);
    uint32_t recorded = sp == HK_OK ? record_every_case(c, ps, NULL) : 0;
    snprintf(name, sizeof name, "a prepare stream records nothing (%s)", label);
    hk_check(sp == HK_OK && recorded > 0 && hk_stream_kernel_count(ps) == 0 && hk_stream_submit(ps) == HK_OK, name,
             "%u calls", recorded);
    uint32_t built = hk_context_pipeline_count(c), late = 0;
    recorded = sr == HK_OK ? record_every_case(c, s, &late) : 0;
    snprintf(name, sizeof name, "after a prepare stream no kernel builds a pipeline (%s)", label);
    hk_check(recorded > 0 && late == 0 && hk_context_pipeline_count(c) == built, name,
             "%u recorded, %u pipelines built later", recorded, hk_context_pipeline_count(c) - built);
    hk_stream_destroy(ps);
    hk_stream_destroy(s);
}

/* A side context's end: its validation messages count as failures, like the suite's own. */
static void finish_side_context(hk_context *c, const char *label)
{
    uint32_t messages = hk_context_validation_messages(c);
    hk_check(messages == 0, label, "%u validation message(s)", messages);
    hk_context_destroy(c);
}

/* hk_context_prepare of the GLUs' own entry points alone (hk_moe_matvec_int8_glu and the Q8_1-output
 * ones, the MoE's with its ranking form) builds what they then record at each rows per subgroup class (dense rows and the MoE's slots
 * x n: 2 slots of 1 row below 4096, of 2 from 4096, 4 for Q6_K from 16384), every type and both
 * modes: a call afterwards builds nothing. */
static void prepare_glus(void)
{
    static const hk_type types[] = {HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q5_K, HK_TYPE_Q6_K};
    static const uint32_t shapes[][2] = {{32, 3}, {1024, 4}, {4096, 4}}; /* n, slots; dense rows n x slots */
    static const char kernels[] = "hk_moe_matvec_int8_glu,hk_matvec_int8_glu_q8_1,hk_moe_matvec_int8_glu_q8_1";
    hk_context *c = hk_test_context_without(0);
    if (!c)
        return;
    hk_check_status("prepare the GLUs", hk_context_prepare(c, kernels), HK_OK, NULL);
    uint32_t built = hk_context_pipeline_count(c), calls = 0, refused = 0;
    hk_buffer *buf = hk_test_buffer(c, 8u << 20, NULL);
    hk_stream *s = NULL;
    if (buf && hk_stream_create(c, 0, &s) == HK_OK) {
        hk_view w = {buf, 0}, xq = {buf, 6u << 20}, ids = {buf, (6u << 20) + 4096}, y = {buf, 7u << 20};
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
                for (int m = HK_GLU_SILU; m <= HK_GLU_GELU_TANH; m++) {
                    hk_moe_shape shape = {4, shapes[i][0], 256, shapes[i][1], 0};
                    hk_glu_mode mode = (hk_glu_mode)m;
                    refused += hk_moe_matvec_int8_glu(c, s, types[t], w, w, xq, ids, y, &shape, mode) != HK_OK;
                    refused += hk_moe_matvec_int8_glu_q8_1(c, s, types[t], w, w, xq, ids, y, &shape, mode) != HK_OK;
                    refused += hk_matvec_int8_glu_q8_1(c, s, types[t], w, w, xq, y, shapes[i][0] * shapes[i][1], 256,
                                                       mode) != HK_OK;
                    refused += hk_moe_matvec_int8_glu_q8_1_ranked(c, s, types[t], w, w, xq, ids, y, &shape, 1,
                                                                  mode) != HK_OK;
                    calls += 4;
                    hk_stream_reset(s);
                }
        hk_stream_destroy(s);
    }
    hk_check(calls > 0 && refused == 0 && hk_context_pipeline_count(c) == built,
             "the GLUs after their prepare build nothing", "%u calls, %u refused (%s), %u pipelines built", calls,
             refused, refused ? hk_last_error() : "", hk_context_pipeline_count(c) - built);
    hk_buffer_destroy(buf);
    finish_side_context(c, "prepare the GLUs: no validation messages");
}

static void test_prepare(void)
{
    hk_context *c = hk_test_context_without(0);
    if (!c)
        return;
    hk_check(hk_context_pipeline_count(c) == 0, "a new context has built no pipeline", NULL);
    hk_check_status("prepare an unknown kernel", hk_context_prepare(c, "hk_rmsnorm,hk_nope"), HK_ERROR_INVALID_ARGUMENT,
                    "\"hk_nope\" is not a kernel (the kernels: hk_matvec,");
    hk_check(hk_context_pipeline_count(c) == 0, "a refused prepare builds nothing", NULL);
    hk_check_status("prepare one kernel", hk_context_prepare(c, "hk_quantize_q8_1"), HK_OK, NULL);
    hk_check(hk_context_pipeline_count(c) == 1, "one kernel, its pipeline", "%u", hk_context_pipeline_count(c));
    prepare_case(c, "every feature");
    finish_side_context(c, "prepare: no validation messages");
    prepare_glus();
    /* the portable twins: no subgroup size control, no integer dot */
    c = hk_test_context_without(HK_FEATURE_SUBGROUP_SIZE_CONTROL | HK_FEATURE_INTEGER_DOT);
    if (c) {
        prepare_case(c, "portable twins");
        finish_side_context(c, "prepare, portable twins: no validation messages");
    }
}

/* ---- two threads, two streams, one context ---- */

typedef struct thread_job {
    hk_context *c;
    pthread_barrier_t *start;
    int id;
    hk_buffer *w, *g;     /* shared, read only */
    const uint8_t *w_host;
    const float *g_host;
    uint32_t rows, k;
    double err_norm, err_f32, err_int8;
    int failed;
    char why[256];
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    uint32_t k = j->k, rows = j->rows;
    hk_rng rng = {100 + (uint64_t)j->id};
    float *x = malloc(k * 4), *xn = malloc(k * 4), *xn_ref = malloc(k * 4), *y = malloc(rows * 4),
          *y8 = malloc(rows * 4), *ref = malloc(rows * 4);
    hk_block_q8_1 *xq = malloc(k / 32 * sizeof *xq);
    hk_buffer *act = NULL, *copy = NULL;
    hk_stream *s = NULL;
    hk_status st = hk_buffer_create(j->c, 4 * k + k / 32 * 36 + 8 * rows + 64, &act);
    if (st == HK_OK)
        st = hk_buffer_create(j->c, 4 * k, &copy);
    if (st == HK_OK)
        st = hk_stream_create(j->c, 0, &s);
    pthread_barrier_wait(j->start); /* both threads start cold: pipelines are built concurrently */
    hk_view xv = {act, 0}, xnv = {act, 0}, xqv = {act, 4 * k}, yv = {act, 4 * k + k / 32 * 36 + 16},
            y8v = {act, yv.offset + 4 * rows};
    (void)xnv;
    for (int it = 0; it < 4 && st == HK_OK; it++) {
        hk_rng_fill(&rng, x, k, -2, 2);
        hk_poison(y, rows);
        hk_poison(y8, rows);
        st = hk_stream_upload(s, xv, x, 4 * k);
        if (st == HK_OK) /* in place */
            st = hk_rmsnorm(j->c, s, xv, (hk_view){j->g, 0}, xv, 1, k, 1e-5f);
        if (st == HK_OK)
            st = hk_quantize_q8_1(j->c, s, xv, xqv, k);
        if (st == HK_OK)
            st = hk_matvec(j->c, s, HK_TYPE_Q4_K, (hk_view){j->w, 0}, xv, yv, rows, k);
        if (st == HK_OK)
            st = hk_matvec_int8(j->c, s, HK_TYPE_Q4_K, (hk_view){j->w, 0}, xqv, y8v, rows, k);
        if (st == HK_OK)
            st = hk_stream_download(s, xv, xn, 4 * k);
        if (st == HK_OK)
            st = hk_stream_download(s, xqv, xq, k / 32 * 36);
        if (st == HK_OK)
            st = hk_stream_download(s, yv, y, 4 * rows);
        if (st == HK_OK)
            st = hk_stream_download(s, y8v, y8, 4 * rows);
        if (st == HK_OK)
            st = hk_stream_submit(s);
        /* the context's immediate path from both threads too */
        if (st == HK_OK)
            st = hk_copy(j->c, NULL, xv, (hk_view){copy, 0}, 4 * k);
        if (st == HK_OK)
            st = hk_buffer_upload(copy, 0, x, 64);
        if (st != HK_OK)
            break;
        hk_ref_rmsnorm(x, j->g_host, xn_ref, 1, k, 1e-5f);
        double e = hk_scale_rel(xn, xn_ref, k);
        j->err_norm = e > j->err_norm ? e : j->err_norm;
        hk_ref_matvec(HK_REF_Q4_K, j->w_host, xn, ref, rows, k);
        e = hk_scale_rel(y, ref, rows);
        j->err_f32 = e > j->err_f32 ? e : j->err_f32;
        hk_ref_matvec_q8_1(HK_REF_Q4_K, j->w_host, xq, ref, rows, k);
        e = hk_scale_rel(y8, ref, rows);
        j->err_int8 = e > j->err_int8 ? e : j->err_int8;
    }
    if (st != HK_OK) {
        j->failed = 1;
        snprintf(j->why, sizeof j->why, "%s", hk_last_error());
    }
    hk_stream_destroy(s);
    hk_buffer_destroy(act);
    hk_buffer_destroy(copy);
    free(x);
    free(xn);
    free(xn_ref);
    free(y);
    free(y8);
    free(ref);
    free(xq);
    return NULL;
}

static void test_threads(void)
{
    hk_context *c = hk_test_context_without(0); /* fresh: no pipeline built yet */
    if (!c)
        return;
    const uint32_t rows = 96, k = 1024;
    hk_rng rng = {55};
    uint8_t *w = hk_random_weights(&rng, HK_REF_Q4_K, rows, k, 0);
    float g[1024];
    hk_rng_fill(&rng, g, k, 0.5f, 1.5f);
    hk_buffer *wb = hk_test_buffer(c, hk_ref_row_bytes(HK_REF_Q4_K, k) * rows, w), *gb = hk_test_buffer(c, 4 * k, g);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    thread_job jobs[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) {
        jobs[i] = (thread_job){.c = c, .start = &start, .id = i, .w = wb, .g = gb, .w_host = w, .g_host = g,
                               .rows = rows, .k = k};
        pthread_create(&threads[i], NULL, thread_main, &jobs[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < 2; i++) {
        char name[96];
        snprintf(name, sizeof name, "thread %d: rmsnorm, quantize, matvec, int8 matvec on its own stream", i);
        hk_check(!jobs[i].failed && jobs[i].err_norm < 1e-5 && jobs[i].err_f32 < HK_GATE_F32 &&
                     jobs[i].err_int8 < HK_GATE_EXACT,
                 name, "%s norm %.2e f32 %.2e int8 %.2e", jobs[i].why, jobs[i].err_norm, jobs[i].err_f32,
                 jobs[i].err_int8);
    }
    hk_check(hk_context_validation_messages(c) == 0, "two threads: no validation messages (thread safety included)",
             "%u", hk_context_validation_messages(c));
    hk_buffer_destroy(wb);
    hk_buffer_destroy(gb);
    free(w);
    hk_context_destroy(c);
}

int main(void)
{
    ctx = hk_test_context();
    test_version_and_sizes();
    test_features_enable();
    test_validation_catches();
    test_validation_callback();
    test_destroy_with_live_objects();
    test_caps();
    test_buffers();
    test_stream_transfers();
    test_barrier_count();
    test_pipeline_cache();
    test_pipeline_cache_problems();
    test_borrowed_features();
    test_borrowed();
    test_aliasing();
    test_prepare();
    test_threads();
    test_device_lost(); /* last: it leaves volk's loader pointing at its (forwarding) fake */
    return hk_test_finish(ctx);
}
