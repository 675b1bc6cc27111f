/* Pipelines: created lazily from the embedded SPIR-V, keyed by shader and specialization
 * constants; one pipeline layout per binding count; a VkPipelineCache persisted per device. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

hk_status hk__pipeline_get(hk_context *context, const char *fn, const hk_dispatch_desc *d, VkPipeline *out_pipeline,
                           VkPipelineLayout *out_layout, VkDescriptorSetLayout *out_set_layout)
{
    int shader = d->shader;
    const uint32_t *spec = d->spec;
    uint32_t spec_count = d->spec_count;
    if (d->subgroup_size && !(context->features & HK_FEATURE_SUBGROUP_SIZE_CONTROL))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "internal: a required subgroup size needs subgroupSizeControl");
    if (shader < 0 || shader >= HK_SHADER_COUNT || spec_count > HK_MAX_SPEC)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "internal: bad shader %d or %u specialization constants", shader,
                        spec_count);
    const hk_shader_blob *blob = &hk_shader_table[shader];
    hk_status st = get_layout(context, fn, blob->bindings);
    if (st != HK_OK)
        return st;
    *out_layout = context->pipeline_layout[blob->bindings];
    *out_set_layout = context->set_layout[blob->bindings];
    for (uint32_t i = 0; i < context->pipeline_count; i++) {
        const hk_pipeline_entry *e = &context->pipelines[i];
        if (e->shader == shader && e->spec_count == spec_count && e->subgroup_size == d->subgroup_size &&
            (spec_count == 0 || memcmp(e->spec, spec, spec_count * sizeof *spec) == 0)) {
            *out_pipeline = e->pipeline;
            return HK_OK;
        }
    }
    if (context->pipeline_count == context->pipeline_capacity) {
        uint32_t cap = context->pipeline_capacity ? 2 * context->pipeline_capacity : 16;
        hk_pipeline_entry *grown = realloc(context->pipelines, cap * sizeof *grown);
        if (!grown)
            return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
        context->pipelines = grown;
        context->pipeline_capacity = cap;
    }
    const struct VolkDeviceTable *vk = &context->vk;
    VkShaderModuleCreateInfo module_info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                            .codeSize = blob->words * sizeof(uint32_t),
                                            .pCode = blob->code};
    VkShaderModule module;
    VkResult r = vk->vkCreateShaderModule(context->device, &module_info, NULL, &module);
    if (r != VK_SUCCESS)
        return hk__vk_fail(r, fn, "vkCreateShaderModule");
    VkSpecializationMapEntry entries[HK_MAX_SPEC];
    for (uint32_t i = 0; i < spec_count; i++)
        entries[i] = (VkSpecializationMapEntry){i, i * 4, 4};
    VkSpecializationInfo spec_info = {spec_count, entries, spec_count * 4, spec};
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
                  .pSpecializationInfo = spec_count ? &spec_info : NULL},
        .layout = *out_layout};
    VkPipeline pipeline;
    r = vk->vkCreateComputePipelines(context->device, context->pipeline_cache, 1, &info, NULL, &pipeline);
    vk->vkDestroyShaderModule(context->device, module, NULL);
    if (r != VK_SUCCESS)
        return hk__fail(r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? HK_ERROR_OUT_OF_MEMORY
                                                                                                : HK_ERROR_VULKAN,
                        fn, "vkCreateComputePipelines for shader %s failed (%s)", blob->name, hk__vk_result_name(r));
    hk_pipeline_entry *e = &context->pipelines[context->pipeline_count++];
    memset(e, 0, sizeof *e);
    e->shader = shader;
    e->spec_count = spec_count;
    e->subgroup_size = d->subgroup_size;
    if (spec_count)
        memcpy(e->spec, spec, spec_count * sizeof *spec);
    e->pipeline = pipeline;
    *out_pipeline = pipeline;
    return HK_OK;
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

/* mkdir -p; returns 0 on success */
static int make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int bad = mkdir(path, 0755) != 0 && errno != EEXIST;
        *p = '/';
        if (bad)
            return -1;
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static void cache_path(hk_context *context, const char *dir)
{
    char base[768];
    const char *env = getenv("HK_PIPELINE_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir)
        snprintf(base, sizeof base, "%s", dir);
    else if (env && *env)
        snprintf(base, sizeof base, "%s", env);
    else if (xdg && *xdg)
        snprintf(base, sizeof base, "%s/hkernel", xdg);
    else if (home && *home)
        snprintf(base, sizeof base, "%s/.cache/hkernel", home);
    else
        return;
    if (make_dirs(base) != 0)
        return; /* an unwritable cache dir is not an error: the cache stays in memory */
    char uuid[33];
    for (int i = 0; i < 16; i++)
        snprintf(uuid + 2 * i, 3, "%02x", context->caps.device_uuid[i]);
    snprintf(context->pipeline_cache_file, sizeof context->pipeline_cache_file, "%s/hkernel-%d.%d.%d-%s-%08x.bin", base,
             HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH, uuid, context->caps.driver_version);
}

hk_status hk__pipeline_cache_open(hk_context *context, const char *dir, int disabled)
{
    void *data = NULL;
    size_t size = 0;
    context->pipeline_cache_file[0] = '\0';
    if (!disabled)
        cache_path(context, dir);
    FILE *f = context->pipeline_cache_file[0] ? fopen(context->pipeline_cache_file, "rb") : NULL;
    if (f) {
        if (fseek(f, 0, SEEK_END) == 0) {
            long n = ftell(f);
            if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)n)) != NULL)
                size = fread(data, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
        }
        fclose(f);
    }
    /* a stale or foreign file is rejected by the driver's own header check; retry empty then */
    VkPipelineCacheCreateInfo info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                      .initialDataSize = size,
                                      .pInitialData = size ? data : NULL};
    VkResult r = context->vk.vkCreatePipelineCache(context->device, &info, NULL, &context->pipeline_cache);
    if (r != VK_SUCCESS && size) {
        info.initialDataSize = 0;
        info.pInitialData = NULL;
        r = context->vk.vkCreatePipelineCache(context->device, &info, NULL, &context->pipeline_cache);
    }
    free(data);
    if (r != VK_SUCCESS)
        return hk__vk_fail(r, "hk_context_create", "vkCreatePipelineCache");
    return HK_OK;
}

void hk__pipeline_cache_close(hk_context *context)
{
    if (!context->pipeline_cache)
        return;
    size_t size = 0;
    void *data = NULL;
    if (context->pipeline_cache_file[0] && context->pipeline_count &&
        context->vk.vkGetPipelineCacheData(context->device, context->pipeline_cache, &size, NULL) == VK_SUCCESS &&
        size && (data = malloc(size)) != NULL &&
        context->vk.vkGetPipelineCacheData(context->device, context->pipeline_cache, &size, data) == VK_SUCCESS) {
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.%ld.tmp", context->pipeline_cache_file, (long)getpid());
        FILE *f = fopen(tmp, "wb");
        if (f) {
            int ok = fwrite(data, 1, size, f) == size;
            ok &= fclose(f) == 0;
            if (!ok || rename(tmp, context->pipeline_cache_file) != 0)
                remove(tmp);
        }
    }
    free(data);
    context->vk.vkDestroyPipelineCache(context->device, context->pipeline_cache, NULL);
    context->pipeline_cache = VK_NULL_HANDLE;
}
