/* Pipelines: created lazily (or by hk_context_prepare) from the embedded SPIR-V, keyed by shader,
 * specialization constants and required subgroup size; one pipeline layout per binding count; a
 * VkPipelineCache persisted per device. The table and the layouts are guarded by the context's
 * pipeline_lock; pipelines are compiled outside it (VkPipelineCache is internally synchronized),
 * so threads recording different kernels do not wait on each other's compiles. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Under pipeline_lock. */
static hk_status get_layout(hk_context *context, const char *fn, uint32_t bindings)
{
    const struct VolkDeviceTable *vk = &context->vk;
    if (context->pipeline_layout[bindings])
        return HK_OK;
    VkDescriptorSetLayoutBinding b[HK_MAX_BINDINGS];
    for (uint32_t i = 0; i < bindings; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo set_info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                                .bindingCount = bindings,
                                                .pBindings = b};
    VkResult r = vk->vkCreateDescriptorSetLayout(context->device, &set_info, NULL, &context->set_layout[bindings]);
    if (r != VK_SUCCESS)
        return hk__vk_fail(r, fn, "vkCreateDescriptorSetLayout");
    VkPushConstantRange push = {VK_SHADER_STAGE_COMPUTE_BIT, 0, HK_PUSH_BYTES};
    VkPipelineLayoutCreateInfo info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = 1,
                                       .pSetLayouts = &context->set_layout[bindings],
                                       .pushConstantRangeCount = 1,
                                       .pPushConstantRanges = &push};
    r = vk->vkCreatePipelineLayout(context->device, &info, NULL, &context->pipeline_layout[bindings]);
    if (r != VK_SUCCESS)
        return hk__vk_fail(r, fn, "vkCreatePipelineLayout");
    return HK_OK;
}

/* The pipeline of this key in the table, or VK_NULL_HANDLE. Under pipeline_lock. */
static VkPipeline find_pipeline(const hk_context *context, const hk_dispatch_desc *d)
{
    for (uint32_t i = 0; i < context->pipeline_count; i++) {
        const hk_pipeline_entry *e = &context->pipelines[i];
        if (e->shader == d->shader && e->spec_count == d->spec_count && e->subgroup_size == d->subgroup_size &&
            (d->spec_count == 0 || memcmp(e->spec, d->spec, d->spec_count * sizeof *d->spec) == 0))
            return e->pipeline;
    }
    return VK_NULL_HANDLE;
}

/* HK_PIPELINE_STATS=1: the driver's statistics of a new pipeline (VK_KHR_pipeline_executable_properties),
 * one line on stderr, for tuning (registers per invocation, spills). */
static void print_stats(hk_context *context, const hk_shader_blob *blob, const hk_dispatch_desc *d, VkPipeline p)
{
    const struct VolkDeviceTable *vk = &context->vk;
    if (!vk->vkGetPipelineExecutableStatisticsKHR)
        return;
    char line[1024];
    int n = snprintf(line, sizeof line, "hkernel: pipeline %s spec", blob->name);
    for (uint32_t i = 0; i < d->spec_count && n < (int)sizeof line; i++)
        n += snprintf(line + n, sizeof line - n, "%s%u", i ? "," : " ", d->spec[i]);
    VkPipelineExecutableInfoKHR exec = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = p};
    VkPipelineExecutableStatisticKHR stats[32];
    uint32_t count = 32;
    for (uint32_t i = 0; i < count; i++)
        stats[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    VkResult r = vk->vkGetPipelineExecutableStatisticsKHR(context->device, &exec, &count, stats);
    for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < count && n < (int)sizeof line; i++) {
        const VkPipelineExecutableStatisticKHR *s = &stats[i];
        n += snprintf(line + n, sizeof line - n, "; %s=", s->name);
        if (n >= (int)sizeof line)
            break;
        switch (s->format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
            n += snprintf(line + n, sizeof line - n, "%u", s->value.b32);
            break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
            n += snprintf(line + n, sizeof line - n, "%lld", (long long)s->value.i64);
            break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
            n += snprintf(line + n, sizeof line - n, "%llu", (unsigned long long)s->value.u64);
            break;
        default:
            n += snprintf(line + n, sizeof line - n, "%g", s->value.f64);
            break;
        }
    }
    fprintf(stderr, "%s\n", line);
}

static VkResult create_pipeline(hk_context *context, const hk_shader_blob *blob, const hk_dispatch_desc *d,
                                VkPipelineLayout layout, VkPipeline *out)
{
    const struct VolkDeviceTable *vk = &context->vk;
    VkShaderModuleCreateInfo module_info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                            .codeSize = blob->words * sizeof(uint32_t),
                                            .pCode = blob->code};
    VkShaderModule module;
    VkResult r = vk->vkCreateShaderModule(context->device, &module_info, NULL, &module);
    if (r != VK_SUCCESS)
        return r;
    VkSpecializationMapEntry entries[HK_MAX_SPEC];
    for (uint32_t i = 0; i < d->spec_count; i++)
        entries[i] = (VkSpecializationMapEntry){i, i * 4, 4};
    VkSpecializationInfo spec_info = {d->spec_count, entries, d->spec_count * 4, d->spec};
    /* kernels that index rows by subgroup need every subgroup full and of the size they were
     * dispatched for */
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo size_info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = d->subgroup_size};
    VkComputePipelineCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .pNext = d->subgroup_size ? &size_info : NULL,
                  .flags = d->subgroup_size ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module,
                  .pName = "main",
                  .pSpecializationInfo = d->spec_count ? &spec_info : NULL},
        .layout = layout};
    VkPipelineRobustnessCreateInfoEXT robustness = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_ROBUSTNESS_CREATE_INFO_EXT,
        .storageBuffers = VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT,
        .uniformBuffers = VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT,
        .vertexInputs = VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT,
        .images = VK_PIPELINE_ROBUSTNESS_IMAGE_BEHAVIOR_DEVICE_DEFAULT_EXT};
    if (context->robustness_off)
        info.pNext = &robustness;
    if (context->pipeline_stats)
        info.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    r = vk->vkCreateComputePipelines(context->device, context->pipeline_cache, 1, &info, NULL, out);
    vk->vkDestroyShaderModule(context->device, module, NULL);
    if (r == VK_SUCCESS && context->pipeline_stats)
        print_stats(context, blob, d, *out);
    return r;
}

hk_status hk__pipeline_get(hk_context *context, const char *fn, const hk_dispatch_desc *d, VkPipeline *out_pipeline,
                           VkPipelineLayout *out_layout, VkDescriptorSetLayout *out_set_layout)
{
    if (d->subgroup_size && !(context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "internal: a required subgroup size needs subgroupSizeControl");
    if (d->shader < 0 || d->shader >= HK_SHADER_COUNT || d->spec_count > HK_MAX_SPEC)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "internal: bad shader %d or %u specialization constants", d->shader,
                        d->spec_count);
    const hk_shader_blob *blob = &hk_shader_table[d->shader];
    hk__mutex_lock(&context->pipeline_lock);
    hk_status st = get_layout(context, fn, blob->bindings);
    VkPipeline pipeline = VK_NULL_HANDLE;
    if (st == HK_OK) {
        *out_layout = context->pipeline_layout[blob->bindings];
        *out_set_layout = context->set_layout[blob->bindings];
        pipeline = find_pipeline(context, d);
    }
    hk__mutex_unlock(&context->pipeline_lock);
    if (st != HK_OK)
        return st;
    if (pipeline) {
        *out_pipeline = pipeline;
        return HK_OK;
    }

    VkPipeline created;
    VkResult r = create_pipeline(context, blob, d, *out_layout, &created);
    if (r != VK_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "vkCreateComputePipelines for shader %s", blob->name);
        return hk__vk_fail_on(context, r, fn, what);
    }
    hk__mutex_lock(&context->pipeline_lock);
    /* another thread may have built the same one meanwhile: keep one */
    pipeline = find_pipeline(context, d);
    if (!pipeline && context->pipeline_count == context->pipeline_capacity) {
        uint32_t cap = context->pipeline_capacity ? 2 * context->pipeline_capacity : 16;
        hk_pipeline_entry *grown = realloc(context->pipelines, cap * sizeof *grown);
        if (grown) {
            context->pipelines = grown;
            context->pipeline_capacity = cap;
        } else {
            st = hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
        }
    }
    if (!pipeline && st == HK_OK) {
        hk_pipeline_entry *e = &context->pipelines[context->pipeline_count++];
        memset(e, 0, sizeof *e);
        e->shader = d->shader;
        e->spec_count = d->spec_count;
        e->subgroup_size = d->subgroup_size;
        if (d->spec_count)
            memcpy(e->spec, d->spec, d->spec_count * sizeof *d->spec);
        e->pipeline = pipeline = created;
        created = VK_NULL_HANDLE;
    }
    hk__mutex_unlock(&context->pipeline_lock);
    if (created)
        context->vk.vkDestroyPipeline(context->device, created, NULL);
    if (st == HK_OK)
        *out_pipeline = pipeline;
    return st;
}

uint32_t hk_context_pipeline_count(const hk_context *context)
{
    if (!context)
        return 0;
    hk__mutex_lock((hk_mutex *)&context->pipeline_lock);
    uint32_t n = context->pipeline_count;
    hk__mutex_unlock((hk_mutex *)&context->pipeline_lock);
    return n;
}

void hk__pipelines_destroy(hk_context *context)
{
    const struct VolkDeviceTable *vk = &context->vk;
    for (uint32_t i = 0; i < context->pipeline_count; i++)
        vk->vkDestroyPipeline(context->device, context->pipelines[i].pipeline, NULL);
    free(context->pipelines);
    context->pipelines = NULL;
    context->pipeline_count = context->pipeline_capacity = 0;
    for (uint32_t i = 0; i <= HK_MAX_BINDINGS; i++) {
        if (context->pipeline_layout[i])
            vk->vkDestroyPipelineLayout(context->device, context->pipeline_layout[i], NULL);
        if (context->set_layout[i])
            vk->vkDestroyDescriptorSetLayout(context->device, context->set_layout[i], NULL);
        context->pipeline_layout[i] = VK_NULL_HANDLE;
        context->set_layout[i] = VK_NULL_HANDLE;
    }
}

/* ---- the persisted cache --------------------------------------------------------------------
 * A convenience only: every problem with it is a warning on stderr and the cache stays in memory.
 * Paths are built on the heap, never truncated; only regular files are read (opened without
 * blocking or following a link, so a FIFO or a device at the path cannot hang us), at most
 * HK_PIPELINE_CACHE_MAX_BYTES of them; writes go to a new file created exclusively, then renamed. */

static char *format(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static char *format(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* "...<last 120 characters>" of a long path, for messages */
static const char *shown(const char *path, int *cut)
{
    size_t n = strlen(path);
    *cut = n > 120;
    return *cut ? path + n - 120 : path;
}

static void warn(const char *what, const char *path, int err)
{
    int cut;
    const char *tail = shown(path ? path : "", &cut);
    fprintf(stderr, "hkernel: pipeline cache: %s%s%s%s%s%s (the cache stays in memory)\n", what, path ? " " : "",
            cut ? "..." : "", tail, err ? ": " : "", err ? strerror(err) : "");
}

int hk__make_dirs(const char *dir)
{
    char *path = format("%s", dir);
    if (!path)
        return ENOMEM;
    int err = 0;
    for (char *p = path + 1; *p && !err; p++) {
        if (*p != '/' || p[-1] == '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            err = errno;
        *p = '/';
    }
    if (!err && mkdir(path, 0755) != 0 && errno != EEXIST)
        err = errno;
    struct stat st;
    if (!err && stat(path, &st) != 0)
        err = errno;
    if (!err && !S_ISDIR(st.st_mode))
        err = ENOTDIR;
    free(path);
    return err;
}

char *hk__cache_dir(const char *dir, const char *env_var)
{
    const char *env = getenv(env_var), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir)
        return format("%s", dir);
    if (env && *env)
        return format("%s", env);
    if (xdg && *xdg)
        return format("%s/hkernel", xdg);
    if (home && *home)
        return format("%s/.cache/hkernel", home);
    return NULL;
}

/* The cache file's path, or NULL (with a warning where something is wrong). */
static char *cache_path(const hk_context *context, const char *dir)
{
    char *base = hk__cache_dir(dir, "HK_PIPELINE_CACHE_DIR");
    if (!base)
        return NULL;
    char uuid[33];
    for (int i = 0; i < 16; i++)
        snprintf(uuid + 2 * i, 3, "%02x", context->caps.device_uuid[i]);
    char *file = base ? format("%s/hkernel-%d.%d.%d-%s-%08x.bin", base, HK_VERSION_MAJOR, HK_VERSION_MINOR,
                               HK_VERSION_PATCH, uuid, context->caps.driver_version)
                      : NULL;
    if (!file) {
        warn("out of host memory", NULL, 0);
        free(base);
        return NULL;
    }
#ifdef PATH_MAX
    /* the temporary file's name is the longest the cache uses; refuse before creating anything */
    if (strlen(file) + 32 >= PATH_MAX) {
        char what[96];
        snprintf(what, sizeof what, "a path of %zu characters is longer than the system takes (PATH_MAX %d):",
                 strlen(file), (int)PATH_MAX);
        warn(what, base, 0);
        free(base);
        free(file);
        return NULL;
    }
#endif
    int err = hk__make_dirs(base);
    if (err) {
        warn("cannot create the directory", base, err);
        free(base);
        free(file);
        return NULL;
    }
    free(base);
    return file;
}

/* The cache file's bytes, or NULL: no file yet (silently), or a warning. */
static void *read_cache(const char *file, size_t *out_size)
{
    char *data;
    int err;
    switch (hk__read_file(file, HK_PIPELINE_CACHE_MAX_BYTES, &data, out_size, &err)) {
    case HK_FILE_READ:
        if (*out_size)
            return data;
        free(data); /* empty: as if absent */
        break;
    case HK_FILE_ABSENT:
        break;
    case HK_FILE_LINK:
        warn("a symbolic link, not followed:", file, 0);
        break;
    case HK_FILE_NOT_REGULAR:
        warn("not a regular file, ignored:", file, 0);
        break;
    case HK_FILE_TOO_LARGE:
        warn("larger than HK_PIPELINE_CACHE_MAX_BYTES (256 MiB), ignored:", file, 0);
        break;
    case HK_FILE_ERROR:
        warn("cannot read", file, err);
        break;
    }
    return NULL;
}

static uint32_t le32(const uint8_t *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* VkPipelineCacheHeaderVersionOne (little-endian whatever the host): only this device's and
 * driver's data goes to the driver, so a garbage or foreign file never reaches it */
static int header_matches(const hk_context *context, const uint8_t *data, size_t size)
{
    return size >= 16 + VK_UUID_SIZE && le32(data) >= 16 + VK_UUID_SIZE && le32(data) <= size &&
           le32(data + 4) == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && le32(data + 8) == context->caps.vendor_id &&
           le32(data + 12) == context->caps.device_id &&
           memcmp(data + 16, context->pipeline_cache_uuid, VK_UUID_SIZE) == 0;
}

hk_status hk__pipeline_cache_open(hk_context *context, const char *dir, int disabled)
{
    size_t size = 0;
    void *data = NULL;
    context->pipeline_cache_file = disabled ? NULL : cache_path(context, dir);
    if (context->pipeline_cache_file)
        data = read_cache(context->pipeline_cache_file, &size);
    if (data && !header_matches(context, data, size)) {
        warn("not a pipeline cache of this device and driver, ignored:", context->pipeline_cache_file, 0);
        free(data);
        data = NULL;
        size = 0;
    }
    VkPipelineCacheCreateInfo info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                      .initialDataSize = size,
                                      .pInitialData = data};
    VkResult r = context->vk.vkCreatePipelineCache(context->device, &info, NULL, &context->pipeline_cache);
    if (r != VK_SUCCESS && size) {
        warn("the driver refused the data of", context->pipeline_cache_file, 0);
        info.initialDataSize = 0;
        info.pInitialData = NULL;
        r = context->vk.vkCreatePipelineCache(context->device, &info, NULL, &context->pipeline_cache);
    }
    free(data);
    if (r != VK_SUCCESS) {
        /* pipelines are then created without a cache */
        fprintf(stderr, "hkernel: pipeline cache: vkCreatePipelineCache failed (%s); pipelines are not cached\n",
                hk__vk_result_name(r));
        context->pipeline_cache = VK_NULL_HANDLE;
    }
    return HK_OK;
}

static void write_cache(const char *file, const void *data, size_t size)
{
    static _Atomic unsigned serial;
    char *tmp = format("%s.%ld-%u.tmp", file, (long)getpid(), serial++);
    if (!tmp) {
        warn("out of host memory writing", file, 0);
        return;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        warn("cannot create", tmp, errno);
        free(tmp);
        return;
    }
    size_t done = 0;
    int err = 0;
    while (done < size && !err) {
        ssize_t n = write(fd, (const char *)data + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            err = n < 0 ? errno : EIO;
        else
            done += (size_t)n;
    }
    if (close(fd) != 0 && !err)
        err = errno;
    if (err) {
        warn("cannot write", tmp, err);
        unlink(tmp);
    } else if (rename(tmp, file) != 0) {
        warn("cannot replace", file, errno);
        unlink(tmp);
    }
    free(tmp);
}

void hk__pipeline_cache_close(hk_context *context)
{
    char *file = context->pipeline_cache_file;
    context->pipeline_cache_file = NULL;
    if (context->pipeline_cache) {
        size_t size = 0;
        void *data = NULL;
        const struct VolkDeviceTable *vk = &context->vk;
        if (file && context->pipeline_count &&
            vk->vkGetPipelineCacheData(context->device, context->pipeline_cache, &size, NULL) == VK_SUCCESS && size) {
            if (size > HK_PIPELINE_CACHE_MAX_BYTES)
                warn("the cache is larger than HK_PIPELINE_CACHE_MAX_BYTES (256 MiB), not written to", file, 0);
            else if ((data = malloc(size)) == NULL)
                warn("out of host memory writing", file, 0);
            else if (vk->vkGetPipelineCacheData(context->device, context->pipeline_cache, &size, data) == VK_SUCCESS)
                write_cache(file, data, size);
        }
        free(data);
        vk->vkDestroyPipelineCache(context->device, context->pipeline_cache, NULL);
        context->pipeline_cache = VK_NULL_HANDLE;
    }
    free(file);
}
