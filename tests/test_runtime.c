/* Runtime: device enumeration and capabilities, buffers (fill, copy, offsets), the persisted
 * pipeline cache, and an engine's own device, buffer and command buffer borrowed. */
#define _POSIX_C_SOURCE 200809L
#include "hk_test.h"

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
                 caps.subgroup_size <= caps.subgroup_size_max && caps.storage_16bit && caps.shared_memory_bytes >= 16384 &&
                 caps.max_workgroup_size >= 128,
             "caps plausible", "%s: subgroup %u [%u,%u], shared %u B, int dot %d (accelerated %d), coopmat KHR %d (%u shapes) NV %d (%u), timestamps %d",
             caps.device_name, caps.subgroup_size, caps.subgroup_size_min, caps.subgroup_size_max,
             caps.shared_memory_bytes, caps.integer_dot, caps.integer_dot_accelerated, caps.coopmat_khr,
             caps.coopmat_khr_count, caps.coopmat_nv, caps.coopmat_nv_count, caps.timestamps);
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
    size_t long_len = strlen(dir) + 9 * 101;
    char *long_dir = malloc(long_len + 1);
    strcpy(long_dir, dir);
    for (int i = 0; i < 9; i++) {
        size_t at = strlen(long_dir);
        long_dir[at] = '/';
        memset(long_dir + at + 1, 'a' + i, 100);
        long_dir[at + 101] = '\0';
    }
    cache_case("dir of 929 characters", long_dir, NULL);
    char *long_file = malloc(long_len + strlen(file) + 2);
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
    size_t huge_len = strlen(dir) + 60 * 101;
    char *huge_dir = malloc(huge_len + 1);
    strcpy(huge_dir, dir);
    for (int i = 0; i < 60; i++) {
        size_t at = strlen(huge_dir);
        huge_dir[at] = '/';
        memset(huge_dir + at + 1, 'a' + i % 26, 100);
        huge_dir[at + 101] = '\0';
    }
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

/* An engine's device: its own instance, device, queue, buffer, command buffer; hkernel records
 * into the engine's command buffer and the engine submits. */
static void test_borrowed(void)
{
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance instance;
    if (vkCreateInstance(&ii, NULL, &instance) != VK_SUCCESS) {
        hk_check(0, "engine instance", NULL);
        return;
    }
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    uint32_t n = 8;
    VkPhysicalDevice pds[8];
    vkEnumeratePhysicalDevices(instance, &n, pds);
    VkPhysicalDevice pd = VK_NULL_HANDLE;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        if (strcmp(p.deviceName, caps.device_name) == 0)
            pd = pds[i];
    }
    VkPhysicalDeviceVulkan11Features v11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .storageBuffer16BitAccess = VK_TRUE};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = 0,
                                  .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &v11, .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qi};
    VkDevice device;
    if (!pd || vkCreateDevice(pd, &di, NULL, &device) != VK_SUCCESS) {
        hk_check(0, "engine device", NULL);
        vkDestroyInstance(instance, NULL);
        return;
    }
    VkQueue queue;
    vkGetDeviceQueue(device, 0, 0, &queue);

    /* the engine's buffer: weights, x and y of a Q6_K matvec in one allocation */
    const uint32_t rows = 3, k = 512;
    const size_t xoff = 1280 /* past rows * 2 * 210 weight bytes */, yoff = xoff + k * 4, total = yoff + rows * 4;
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = total,
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
    while (type < mp.memoryTypeCount && (!(req.memoryTypeBits & (1u << type)) || (mp.memoryTypes[type].propertyFlags & want) != want))
        type++;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size, .memoryTypeIndex = type};
    VkDeviceMemory mem;
    vkAllocateMemory(device, &ai, NULL, &mem);
    vkBindBufferMemory(device, vkbuf, mem, 0);
    uint8_t *mapped;
    vkMapMemory(device, mem, 0, VK_WHOLE_SIZE, 0, (void **)&mapped);
    hk_rng rng = {4};
    hk_random_blocks(&rng, HK_TYPE_Q6_K, mapped, rows * 2, 0.05f);
    float *x = (float *)(mapped + xoff), *y = (float *)(mapped + yoff), ref[3];
    hk_rng_fill(&rng, x, k, -1, 1);
    hk_poison(y, rows);
    hk_ref_matvec(HK_REF_Q6_K, mapped, x, ref, rows, k);

    hk_borrowed_device bd = {.instance = instance, .physical_device = pd, .device = device, .queue = queue,
                             .queue_family_index = 0, .enabled_features = HK_FEATURE_STORAGE_16BIT,
                             .disable_pipeline_cache = 1};
    hk_context *c = (hk_context *)&bd;
    bd.queue_family_index = 99;
    hk_check_status("borrowed queue family 99", hk_context_create_borrowed(&bd, &c), HK_ERROR_INVALID_ARGUMENT,
                    "queue_family_index=99 does not exist");
    hk_check(c == NULL, "refused borrow leaves NULL", NULL);
    bd.queue_family_index = 0;
    bd.enabled_features = 0; /* an engine device without 16-bit storage cannot run our kernels */
    hk_check_status("borrowed device without 16-bit storage", hk_context_create_borrowed(&bd, &c),
                    HK_ERROR_UNSUPPORTED, "lacks storageBuffer16BitAccess");
    hk_check(c == NULL, "refused borrow leaves NULL", NULL);
    bd.enabled_features = HK_FEATURE_STORAGE_16BIT;
    hk_status st = hk_context_create_borrowed(&bd, &c);
    hk_check_status("borrowed context", st, HK_OK, NULL);
    VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = 0};
    VkCommandPool pool;
    vkCreateCommandPool(device, &pi, NULL, &pool);
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VkCommandBuffer cmd;
    vkAllocateCommandBuffers(device, &cai, &cmd);
    if (st == HK_OK) {
        hk_buffer *b = NULL;
        hk_stream *s = NULL;
        VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        vkBeginCommandBuffer(cmd, &begin);
        st = hk_buffer_wrap(c, vkbuf, total, &b);
        if (st == HK_OK)
            st = hk_stream_wrap(c, cmd, &s);
        if (st == HK_OK)
            st = hk_matvec_q6k(c, s, (hk_view){b, 0}, (hk_view){b, xoff}, (hk_view){b, yoff}, rows, k);
        hk_check_status("record into the engine's command buffer", st, HK_OK, NULL);
        hk_check_status("wrapped stream refuses submit", hk_stream_submit(s), HK_ERROR_STATE, "submitted by the engine");
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        vkEndCommandBuffer(cmd);
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
        vkQueueSubmit(queue, 1, &si, VK_NULL_HANDLE);
        vkQueueWaitIdle(queue);
        if (st == HK_OK)
            hk_check_close("matvec q6_k on the engine's device", y, ref, rows, 1e-4);
        hk_stream_destroy(s);
        hk_buffer_destroy(b);
        hk_context_destroy(c);
    }
    vkDestroyCommandPool(device, pool, NULL);
    vkUnmapMemory(device, mem);
    vkDestroyBuffer(device, vkbuf, NULL);
    vkFreeMemory(device, mem, NULL);
    vkDestroyDevice(device, NULL);
    vkDestroyInstance(instance, NULL);
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

int main(void)
{
    ctx = hk_test_context();
    test_validation_catches();
    test_caps();
    test_buffers();
    test_pipeline_cache();
    test_pipeline_cache_problems();
    test_borrowed();
    return hk_test_finish(ctx);
}
