/* Context: instance, device choice, capability probe, device creation (owned or borrowed). */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hk_context_desc_init_sized(hk_context_desc *desc, size_t desc_size)
{
    if (!desc || desc_size < sizeof(uint32_t))
        return;
    memset(desc, 0, desc_size);
    desc->struct_size = (uint32_t)desc_size;
    if (desc_size >= offsetof(hk_context_desc, device_index) + sizeof desc->device_index)
        desc->device_index = -1;
}

void hk_borrowed_device_init_sized(hk_borrowed_device *b, size_t b_size)
{
    if (!b || b_size < sizeof(uint32_t))
        return;
    memset(b, 0, b_size);
    b->struct_size = (uint32_t)b_size;
}

/* Copies a caller's struct of struct_size bytes into `out` (ours, zeroed first): a size below the
 * first versioned layout (`oldest`) is refused, and bytes past the fields this version knows must
 * be zero (a newer caller asking for something this library cannot do). */
static hk_status read_sized(const char *fn, const char *what, const char *init, const void *in, uint32_t struct_size,
                            size_t oldest, void *out, size_t ours)
{
    if (struct_size == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s->struct_size is 0: fill it with %s first", what, init);
    if (struct_size < oldest)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s->struct_size=%u is smaller than any version's (%zu)", what,
                        struct_size, oldest);
    if (struct_size > (1u << 20))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s->struct_size=%u is not a size (fill it with %s)", what,
                        struct_size, init);
    for (size_t i = ours; i < struct_size; i++)
        if (((const unsigned char *)in)[i])
            return hk__fail(HK_ERROR_UNSUPPORTED, fn,
                            "%s sets fields this libhkernel (%d.%d.%d, %zu bytes) does not know (byte %zu of %u)", what,
                            HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH, ours, i, struct_size);
    memset(out, 0, ours);
    memcpy(out, in, struct_size < ours ? struct_size : ours);
    return HK_OK;
}

/* the first versioned layouts (0.2): every field up to the last one of that version */
#define DESC_OLDEST (offsetof(hk_context_desc, validation_user) + sizeof(void *))
#define BORROWED_OLDEST (offsetof(hk_borrowed_device, disable_pipeline_cache) + sizeof(int))

static hk_status load_vulkan(const char *fn, PFN_vkGetInstanceProcAddr gipa)
{
    if (gipa) {
        volkInitializeCustom(gipa);
        return HK_OK;
    }
    if (volkGetInstanceVersion() != 0)
        return HK_OK;
    VkResult r = volkInitialize();
    if (r != VK_SUCCESS)
        return hk__fail(HK_ERROR_NOT_FOUND, fn, "no Vulkan loader found (libvulkan.so.1): %s", hk__vk_result_name(r));
    return HK_OK;
}

static int has_extension(const VkExtensionProperties *exts, uint32_t count, const char *name)
{
    for (uint32_t i = 0; i < count; i++)
        if (strcmp(exts[i].extensionName, name) == 0)
            return 1;
    return 0;
}

static int has_layer(const char *name)
{
    uint32_t count = 0;
    if (vkEnumerateInstanceLayerProperties(&count, NULL) != VK_SUCCESS || count == 0)
        return 0;
    VkLayerProperties *layers = calloc(count, sizeof *layers);
    if (!layers)
        return 0;
    int found = 0;
    if (vkEnumerateInstanceLayerProperties(&count, layers) == VK_SUCCESS)
        for (uint32_t i = 0; i < count; i++)
            found |= strcmp(layers[i].layerName, name) == 0;
    free(layers);
    return found;
}

/* A validation message, the layer's or the library's own: counted, then to the callback or stderr. */
static void report(hk_context *context, int severity, const char *message)
{
    context->validation_messages++; /* atomic: several threads may record at once */
    if (context->validation_callback)
        context->validation_callback(context->validation_user, severity, message);
    else
        fprintf(stderr, "hkernel: validation %s: %s\n", severity == HK_MESSAGE_ERROR ? "error" : "warning", message);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    hk_context *context = user;
    int error = !!(severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT);
    report(context, error ? HK_MESSAGE_ERROR : HK_MESSAGE_WARNING,
           data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
}

static int contains_nocase(const char *haystack, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = haystack; *p; p++) {
        size_t i = 0;
        while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return n == 0;
}

static int type_rank(VkPhysicalDeviceType type)
{
    switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

#define NO_DRIVER "no Vulkan driver found (install one, e.g. mesa-vulkan-drivers for lavapipe on the CPU)"

/* vkCreateInstance: the loader says VK_ERROR_INCOMPATIBLE_DRIVER when it finds no driver at all */
static hk_status instance_fail(VkResult r, const char *fn)
{
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        return hk__fail(HK_ERROR_NOT_FOUND, fn, NO_DRIVER ": vkCreateInstance returned %s", hk__vk_result_name(r));
    return hk__vk_fail(r, fn, "vkCreateInstance");
}

/* Up to 64 physical devices; no driver or no device is HK_ERROR_NOT_FOUND. */
static hk_status list_devices(VkInstance instance, const char *fn, VkPhysicalDevice devices[64], uint32_t *out_count)
{
    uint32_t count = 0;
    VkResult r = vkEnumeratePhysicalDevices(instance, &count, NULL);
    if (r == VK_ERROR_INITIALIZATION_FAILED || (r == VK_SUCCESS && count == 0))
        return hk__fail(HK_ERROR_NOT_FOUND, fn, NO_DRIVER ": no Vulkan device (%s)", hk__vk_result_name(r));
    if (r != VK_SUCCESS)
        return hk__vk_fail(r, fn, "vkEnumeratePhysicalDevices");
    if (count > 64)
        count = 64;
    r = vkEnumeratePhysicalDevices(instance, &count, devices);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE)
        return hk__vk_fail(r, fn, "vkEnumeratePhysicalDevices");
    if (count == 0)
        return hk__fail(HK_ERROR_NOT_FOUND, fn, NO_DRIVER ": no Vulkan device");
    *out_count = count;
    return HK_OK;
}

/* 1 if s is a non-empty string of decimal digits */
static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

static hk_status pick_device(VkInstance instance, const hk_context_desc *desc, const char *fn, VkPhysicalDevice *out)
{
    VkPhysicalDevice devices[64];
    uint32_t count = 0;
    hk_status st = list_devices(instance, fn, devices, &count);
    if (st != HK_OK)
        return st;

    int index = desc->device_index;
    const char *name = desc->device_name;
    const char *env = getenv("HK_DEVICE");
    if (index < 0 && !name && env && *env) {
        if (!all_digits(env)) {
            name = env;
        } else {
            /* any number of digits: an index past the devices, however large, is not found */
            unsigned long long v = 0;
            for (const char *p = env; *p && v < 64; p++)
                v = v * 10 + (unsigned)(*p - '0');
            if (v >= count)
                return hk__fail(HK_ERROR_NOT_FOUND, fn, "HK_DEVICE=%.40s%s: no device with that index (%u device%s)",
                                env, strlen(env) > 40 ? "..." : "", count, count == 1 ? "" : "s");
            index = (int)v;
        }
    }
    if (index >= 0) {
        if ((uint32_t)index >= count)
            return hk__fail(HK_ERROR_NOT_FOUND, fn, "device index %d out of range (%u device%s)", index, count,
                            count == 1 ? "" : "s");
        *out = devices[index];
        return HK_OK;
    }
    int best = -1, best_rank = 99;
    for (uint32_t i = 0; i < count; i++) {
        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(devices[i], &props);
        if (props.apiVersion < VK_API_VERSION_1_2)
            continue;
        if (name) {
            if (contains_nocase(props.deviceName, name)) {
                best = (int)i;
                break;
            }
            continue;
        }
        int rank = type_rank(props.deviceType);
        if (rank < best_rank) {
            best = (int)i;
            best_rank = rank;
        }
    }
    if (best < 0)
        return name ? hk__fail(HK_ERROR_NOT_FOUND, fn, "no Vulkan 1.2 device matches \"%s\"", name)
                    : hk__fail(HK_ERROR_NOT_FOUND, fn, "no device supports Vulkan 1.2");
    *out = devices[best];
    return HK_OK;
}

static uint32_t pick_queue_family(VkPhysicalDevice pd)
{
    uint32_t count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &count, NULL);
    VkQueueFamilyProperties families[32];
    if (count > 32)
        count = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &count, families);
    uint32_t any = UINT32_MAX;
    for (uint32_t i = 0; i < count; i++) {
        if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
            continue;
        /* a queue with compute and timestamps; a dedicated compute queue is not preferred because
         * engines usually submit our work beside their own on the main queue */
        if (families[i].timestampValidBits > 0)
            return i;
        if (any == UINT32_MAX)
            any = i;
    }
    return any;
}

/* ---- features -------------------------------------------------------------------------------
 * Each HK_FEATURE_* bit stands for Vulkan feature members (hkernel.h); each member lives in a
 * Vulkan 1.x struct or an older per-feature struct. One table serves hk_features_enable, the owned
 * context's device creation and the check of a borrowed device's claims. */

typedef struct member_loc {
    VkStructureType stype;
    uint32_t offset;
    const char *name;
} member_loc;

typedef struct feature_member {
    uint32_t bit;
    const char *member;
    uint32_t locs;
    member_loc loc[2];
} feature_member;

#define LOC(T, ST, m) {ST, (uint32_t)offsetof(T, m), #T}
#define V11(m) LOC(VkPhysicalDeviceVulkan11Features, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, m)
#define V12(m) LOC(VkPhysicalDeviceVulkan12Features, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, m)
#define V13(m) LOC(VkPhysicalDeviceVulkan13Features, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, m)

static const feature_member feature_members[] = {
    {HK_FEATURE_STORAGE_16BIT, "storageBuffer16BitAccess", 2,
     {V11(storageBuffer16BitAccess),
      LOC(VkPhysicalDevice16BitStorageFeatures, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
          storageBuffer16BitAccess)}},
    {HK_FEATURE_FLOAT16, "shaderFloat16", 2,
     {V12(shaderFloat16), LOC(VkPhysicalDeviceShaderFloat16Int8Features,
                              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, shaderFloat16)}},
    {HK_FEATURE_INT8, "shaderInt8", 2,
     {V12(shaderInt8), LOC(VkPhysicalDeviceShaderFloat16Int8Features,
                           VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, shaderInt8)}},
    {HK_FEATURE_INTEGER_DOT, "shaderIntegerDotProduct", 2,
     {V13(shaderIntegerDotProduct),
      LOC(VkPhysicalDeviceShaderIntegerDotProductFeatures,
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES, shaderIntegerDotProduct)}},
    {HK_FEATURE_SUBGROUP_SIZE_CONTROL, "subgroupSizeControl", 2,
     {V13(subgroupSizeControl), LOC(VkPhysicalDeviceSubgroupSizeControlFeatures,
                                    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES, subgroupSizeControl)}},
    {HK_FEATURE_SUBGROUP_SIZE_CONTROL, "computeFullSubgroups", 2,
     {V13(computeFullSubgroups), LOC(VkPhysicalDeviceSubgroupSizeControlFeatures,
                                     VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES, computeFullSubgroups)}},
    {HK_FEATURE_COOPMAT_KHR, "cooperativeMatrix", 1,
     {LOC(VkPhysicalDeviceCooperativeMatrixFeaturesKHR, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
          cooperativeMatrix)}},
    {HK_FEATURE_COOPMAT_KHR, "vulkanMemoryModel", 2,
     {V12(vulkanMemoryModel), LOC(VkPhysicalDeviceVulkanMemoryModelFeatures,
                                  VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES, vulkanMemoryModel)}},
};
#define FEATURE_MEMBERS (sizeof feature_members / sizeof feature_members[0])

static const char *feature_name(uint32_t bit)
{
    switch (bit) {
    case HK_FEATURE_STORAGE_16BIT: return "HK_FEATURE_STORAGE_16BIT";
    case HK_FEATURE_FLOAT16: return "HK_FEATURE_FLOAT16";
    case HK_FEATURE_INT8: return "HK_FEATURE_INT8";
    case HK_FEATURE_INTEGER_DOT: return "HK_FEATURE_INTEGER_DOT";
    case HK_FEATURE_SUBGROUP_SIZE_CONTROL: return "HK_FEATURE_SUBGROUP_SIZE_CONTROL";
    case HK_FEATURE_COOPMAT_KHR: return "HK_FEATURE_COOPMAT_KHR";
    default: return "HK_FEATURE_?";
    }
}

/* The struct of this sType in a pNext chain (at most 256 links, so a cycle cannot hang us). */
static VkBaseOutStructure *find_struct(const void *chain, VkStructureType stype)
{
    const VkBaseOutStructure *p = chain;
    for (int i = 0; p && i < 256; i++, p = p->pNext)
        if (p->sType == stype)
            return (VkBaseOutStructure *)p;
    return NULL;
}

static VkBool32 *member_in(const void *chain, const member_loc *loc)
{
    VkBaseOutStructure *s = find_struct(chain, loc->stype);
    return s ? (VkBool32 *)((char *)s + loc->offset) : NULL;
}

static int member_supported(const void *supported, const feature_member *m)
{
    for (uint32_t l = 0; l < m->locs; l++) {
        VkBool32 *v = member_in(supported, &m->loc[l]);
        if (v && *v)
            return 1;
    }
    return 0;
}

/* The bits among `wanted` whose every member `supported` has. */
static uint32_t supported_bits(const void *supported, uint32_t wanted)
{
    uint32_t bits = wanted & HK_FEATURES_USED;
    for (size_t i = 0; i < FEATURE_MEMBERS; i++)
        if (!member_supported(supported, &feature_members[i]))
            bits &= ~feature_members[i].bit;
    return bits;
}

/* Sets every member of `bits` in `enable`; first checks that each has a struct there (nothing is
 * written on failure). */
static hk_status enable_bits(const char *fn, uint32_t bits, void *enable)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < FEATURE_MEMBERS; i++) {
            const feature_member *m = &feature_members[i];
            if (!(bits & m->bit))
                continue;
            int found = 0;
            for (uint32_t l = 0; l < m->locs; l++) {
                VkBool32 *v = member_in(enable, &m->loc[l]);
                if (v && pass == 1)
                    *v = VK_TRUE;
                found |= v != NULL;
            }
            if (!found)
                return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                                "the device supports %s (%s) but the enable chain has no %s%s%s to set it in", m->member,
                                feature_name(m->bit), m->loc[0].name, m->locs > 1 ? " or " : "",
                                m->locs > 1 ? m->loc[1].name : "");
        }
    }
    return HK_OK;
}

hk_status hk_features_enable(const VkPhysicalDeviceFeatures2 *supported, uint32_t wanted, VkPhysicalDeviceFeatures2 *enable,
                             uint32_t *out_features)
{
    static const char fn[] = "hk_features_enable";
    if (!supported || !enable || !out_features)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s is NULL",
                        !supported ? "supported" : !enable ? "enable" : "out_features");
    if (supported->sType != VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 ||
        enable->sType != VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s is not a VkPhysicalDeviceFeatures2 (sType %d)",
                        supported->sType != VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 ? "supported" : "enable",
                        (int)(supported->sType != VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 ? supported->sType
                                                                                                 : enable->sType));
    uint32_t bits = supported_bits(supported, wanted);
    if ((wanted & HK_FEATURE_STORAGE_16BIT) && !(bits & HK_FEATURE_STORAGE_16BIT))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn,
                        "the supported chain has no storageBuffer16BitAccess (VkPhysicalDeviceVulkan11Features or "
                        "VkPhysicalDevice16BitStorageFeatures), which every kernel needs");
    hk_status st = enable_bits(fn, bits, enable);
    if (st != HK_OK)
        return st;
    *out_features = bits;
    return HK_OK;
}

/* The feature structs of a device, chained for vkGetPhysicalDeviceFeatures2 and vkCreateDevice. */
typedef struct feature_chain {
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDeviceVulkan11Features v11;
    VkPhysicalDeviceVulkan12Features v12;
    VkPhysicalDeviceVulkan13Features v13;
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop_khr;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exec_info; /* HK_PIPELINE_STATS only */
    VkPhysicalDevicePipelineRobustnessFeaturesEXT robust;               /* where the device has it */
} feature_chain;

static void chain_init(feature_chain *c, uint32_t api, int coop_khr)
{
    memset(c, 0, sizeof *c);
    c->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    c->v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    c->v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    c->v13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
    c->coop_khr.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
    void **next = &c->f2.pNext;
    *next = &c->v11;
    next = &c->v11.pNext;
    *next = &c->v12;
    next = &c->v12.pNext;
    if (api >= VK_API_VERSION_1_3) {
        *next = &c->v13;
        next = &c->v13.pNext;
    }
    if (coop_khr)
        *next = &c->coop_khr;
}

/* What the device supports of the kernels' features: the chain filled by the driver. */
static void query_supported(VkPhysicalDevice pd, int coop_khr, feature_chain *supported)
{
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    chain_init(supported, props.apiVersion, coop_khr);
    vkGetPhysicalDeviceFeatures2(pd, &supported->f2);
}

static int device_has_extension(VkPhysicalDevice pd, const char *name)
{
    uint32_t count = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &count, NULL) != VK_SUCCESS || count == 0)
        return 0;
    VkExtensionProperties *exts = calloc(count, sizeof *exts);
    int found = 0;
    if (exts && vkEnumerateDeviceExtensionProperties(pd, NULL, &count, exts) == VK_SUCCESS)
        found = has_extension(exts, count, name);
    free(exts);
    return found;
}

static void copy_coop_props(hk_coopmat_props *dst, const VkCooperativeMatrixPropertiesKHR *p)
{
    dst->m = p->MSize;
    dst->n = p->NSize;
    dst->k = p->KSize;
    dst->a_type = (uint32_t)p->AType;
    dst->b_type = (uint32_t)p->BType;
    dst->c_type = (uint32_t)p->CType;
    dst->result_type = (uint32_t)p->ResultType;
    dst->saturating = p->saturatingAccumulation;
    dst->scope = (uint32_t)p->scope;
}

/* Fills context->caps from the physical device, given the features that are enabled (dropping
 * subgroup size control where the device cannot require a size in compute shaders). */
static void probe_caps(hk_context *context, int has_coop_khr)
{
    hk_caps *caps = &context->caps;
    VkPhysicalDevice pd = context->physical_device;
    memset(caps, 0, sizeof *caps);

    VkPhysicalDeviceVulkan11Properties v11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
    VkPhysicalDeviceMaintenance4Properties m4 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES,
                                                 .pNext = &v11};
    VkPhysicalDeviceSubgroupSizeControlProperties ssc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES, .pNext = &m4};
    VkPhysicalDeviceShaderIntegerDotProductProperties dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES, .pNext = &ssc};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &v11};
    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);
    if (base.apiVersion >= VK_API_VERSION_1_3)
        p2.pNext = &dot;
    /* the scheduler count: a property of an extension the device lists (not enabled) */
    VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
    VkPhysicalDeviceShaderCorePropertiesAMD core = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
    if (device_has_extension(pd, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
        sm.pNext = p2.pNext;
        p2.pNext = &sm;
    } else if (device_has_extension(pd, VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME)) {
        core.pNext = p2.pNext;
        p2.pNext = &core;
    }
    vkGetPhysicalDeviceProperties2(pd, &p2);
    const VkPhysicalDeviceProperties *p = &p2.properties;

    snprintf(caps->device_name, sizeof caps->device_name, "%s", p->deviceName);
    caps->vendor_id = p->vendorID;
    caps->device_id = p->deviceID;
    caps->device_type = p->deviceType;
    caps->api_version = p->apiVersion;
    caps->driver_version = p->driverVersion;
    memcpy(caps->device_uuid, v11.deviceUUID, 16);
    memcpy(context->pipeline_cache_uuid, p->pipelineCacheUUID, VK_UUID_SIZE);
    context->max_allocation_size = v11.maxMemoryAllocationSize ? v11.maxMemoryAllocationSize : UINT64_MAX;
    context->max_buffer_size = m4.maxBufferSize ? m4.maxBufferSize : UINT64_MAX; /* 0: not queried (Vulkan 1.2) */
    caps->subgroup_size = v11.subgroupSize;
    caps->subgroup_size_min = ssc.minSubgroupSize ? ssc.minSubgroupSize : v11.subgroupSize;
    caps->subgroup_size_max = ssc.maxSubgroupSize ? ssc.maxSubgroupSize : v11.subgroupSize;
    context->subgroup_arithmetic = (v11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                                   (v11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    caps->shared_memory_bytes = p->limits.maxComputeSharedMemorySize;
    /* NVIDIA's SMs have had 4 schedulers since Volta */
    uint64_t schedulers = sm.shaderSMCount ? 4ull * sm.shaderSMCount
                                           : (uint64_t)core.shaderEngineCount * core.shaderArraysPerEngineCount *
                                                 core.computeUnitsPerShaderArray * core.simdPerComputeUnit;
    hk_device_profile *dev = &context->profile;
    dev->schedulers = schedulers <= UINT32_MAX ? (uint32_t)schedulers : 0;
    dev->arch = p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? HK_ARCH_CPU
                : p->vendorID == 0x10DE                     ? HK_ARCH_NVIDIA
                : p->vendorID == 0x1002                     ? HK_ARCH_AMD
                : p->vendorID == 0x8086                     ? HK_ARCH_INTEL
                                                            : HK_ARCH_OTHER;
    dev->few_workgroups = dev->arch == HK_ARCH_CPU;
    dev->slow_unrolled_loops = dev->arch == HK_ARCH_CPU;
    dev->subgroup_shuffle = (v11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                            (v11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    dev->coopmat_quads = 0; /* probe_quads, once the context can dispatch */
    caps->max_workgroup_size = p->limits.maxComputeWorkGroupInvocations;
    caps->max_storage_buffer_range = p->limits.maxStorageBufferRange;
    const struct {
        const char *name;
        uint32_t value, need;
    } limits[] = {
        {"maxPerStageDescriptorStorageBuffers", p->limits.maxPerStageDescriptorStorageBuffers, HK_MAX_BINDINGS},
        {"maxDescriptorSetStorageBuffers", p->limits.maxDescriptorSetStorageBuffers, HK_MAX_BINDINGS},
        {"maxPerStageResources", p->limits.maxPerStageResources, HK_MAX_BINDINGS},
        {"maxPushConstantsSize", p->limits.maxPushConstantsSize, HK_PUSH_BYTES},
    };
    context->short_limit = NULL;
    for (size_t i = 0; i < sizeof limits / sizeof limits[0] && !context->short_limit; i++)
        if (limits[i].value < limits[i].need) {
            context->short_limit = limits[i].name;
            context->short_limit_value = limits[i].value;
            context->short_limit_need = limits[i].need;
        }
    caps->min_storage_offset_alignment = p->limits.minStorageBufferOffsetAlignment;
    /* only the bits kernels use; a required subgroup size needs compute among the stages it
     * applies to (a property, not a feature) */
    context->features &= HK_FEATURES_USED;
    if (!(ssc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT))
        context->features &= ~(uint32_t)HK_FEATURE_SUBGROUP_SIZE_CONTROL;
    uint32_t f = context->features;
    caps->features = f;
    caps->subgroup_size_control = !!(f & HK_FEATURE_SUBGROUP_SIZE_CONTROL);
    caps->float16 = !!(f & HK_FEATURE_FLOAT16);
    caps->int8 = !!(f & HK_FEATURE_INT8);
    caps->integer_dot = !!(f & HK_FEATURE_INTEGER_DOT);
    caps->integer_dot_accelerated = caps->integer_dot && dot.integerDotProduct4x8BitPackedSignedAccelerated;
    caps->coopmat_khr = !!(f & HK_FEATURE_COOPMAT_KHR);

    if (has_coop_khr) {
        PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
            (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
                context->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
        uint32_t n = 0;
        if (get && get(pd, &n, NULL) == VK_SUCCESS && n) {
            VkCooperativeMatrixPropertiesKHR props[HK_MAX_COOPMAT_PROPS];
            if (n > HK_MAX_COOPMAT_PROPS)
                n = HK_MAX_COOPMAT_PROPS;
            for (uint32_t i = 0; i < n; i++)
                props[i] = (VkCooperativeMatrixPropertiesKHR){.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
            VkResult r = get(pd, &n, props);
            if (r == VK_SUCCESS || r == VK_INCOMPLETE) {
                caps->coopmat_khr_count = n;
                for (uint32_t i = 0; i < n; i++)
                    copy_coop_props(&caps->coopmat_khr_props[i], &props[i]);
            }
        }
    }
    uint32_t count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &count, NULL);
    VkQueueFamilyProperties families[32];
    if (count > 32)
        count = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &count, families);
    caps->timestamps = context->queue_family < count && families[context->queue_family].timestampValidBits > 0 &&
                       p->limits.timestampPeriod > 0;
    caps->timestamp_period_ns = p->limits.timestampPeriod;
    vkGetPhysicalDeviceMemoryProperties(pd, &context->memory);
}


int hk__coopmat_f16_listed(const hk_caps *caps)
{
    /* VkComponentTypeKHR: FLOAT16 0, FLOAT32 1; VkScopeKHR: SUBGROUP 3 */
    for (uint32_t i = 0; i < caps->coopmat_khr_count && i < HK_MAX_COOPMAT_PROPS; i++) {
        const hk_coopmat_props *p = &caps->coopmat_khr_props[i];
        if (p->m == 16 && p->n == 16 && p->k == 16 && p->a_type == 0 && p->b_type == 0 && p->c_type == 1 &&
            p->result_type == 1 && p->scope == 3)
            return 1;
    }
    return 0;
}

/* Whether the 16x16 f32 accumulators hold the quad layout (hk_device_profile.coopmat_quads): on
 * NVIDIA devices with those matrices on subgroups of 32, shaders/coopmat_layout.comp loads a
 * matrix of row * 16 + column and each lane writes its elements back. A probe that fails counts
 * as not found. */
static int probe_quads(hk_context *context)
{
#ifdef HK_HAVE_SHADER_COOPMAT_LAYOUT
    uint32_t need = HK_FEATURE_COOPMAT_KHR | HK_FEATURE_FLOAT16 | HK_FEATURE_SUBGROUP_SIZE_CONTROL, sg = 32;
    if (context->profile.arch != HK_ARCH_NVIDIA || (context->features & need) != need ||
        context->caps.subgroup_size != sg || !hk__coopmat_f16_listed(&context->caps))
        return 0;
    float out[9 * 32];
    hk_buffer *buf = NULL;
    int found = 0;
    if (hk_buffer_create(context, sizeof out, &buf) == HK_OK) {
        hk_binding b = {{buf, 0}, sizeof out, 4, 1, 0};
        hk_dispatch_desc d = {.shader = HK_SHADER_COOPMAT_LAYOUT,
                              .subgroup_size = sg,
                              .spec = &sg,
                              .spec_count = 1,
                              .bindings = &b,
                              .binding_count = 1,
                              .groups = 1};
        if (hk__dispatch(context, NULL, "hk_context_create", &d) == HK_OK &&
            hk_buffer_download(buf, 0, out, sizeof out) == HK_OK) {
            found = 1;
            for (uint32_t l = 0; l < sg; l++) {
                found &= out[8 * sg + l] == 8.0f;
                for (uint32_t e = 0; e < 8; e++) {
                    uint32_t row = l / 4 + 8 * (e / 4), col = 8 * ((e / 2) % 2) + 2 * (l % 4) + e % 2;
                    found &= out[l * 8 + e] == (float)(row * 16 + col);
                }
            }
        }
    }
    hk_buffer_destroy(buf);
    return found;
#else
    (void)context;
    return 0;
#endif
}

static hk_status finish_context(hk_context *context, const char *fn, const char *cache_dir, int cache_disabled,
                                const char *tune_dir)
{
    if (!context->vk.vkGetDeviceQueue)
        volkLoadDeviceTable(&context->vk, context->device);
    if (!(context->features & HK_FEATURE_STORAGE_16BIT))
        return context->owns_device
                   ? hk__fail(HK_ERROR_UNSUPPORTED, fn,
                              "device \"%s\" lacks storageBuffer16BitAccess, which every kernel needs",
                              context->caps.device_name)
                   : hk__fail(HK_ERROR_UNSUPPORTED, fn,
                              "borrowed->enabled_features lacks HK_FEATURE_STORAGE_16BIT (storageBuffer16BitAccess), "
                              "which every kernel needs: create the device with it (hk_features_enable)");
    if (!context->subgroup_arithmetic)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "device \"%s\" lacks subgroup arithmetic in compute shaders",
                        context->caps.device_name);
    if (context->short_limit)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "device \"%s\" has %s = %u, below the %u the kernels need",
                        context->caps.device_name, context->short_limit, context->short_limit_value,
                        context->short_limit_need);
    hk__mutex_init(&context->pipeline_lock);
    hk__mutex_init(&context->queue_lock);
    hk__mutex_init(&context->immediate_lock);
    hk__mutex_init(&context->objects_lock);
    hk__mutex_init(&context->attach_lock);
    context->live.prev = context->live.next = &context->live;
    context->locks_ready = 1;
    hk_status st = hk__pipeline_cache_open(context, cache_dir, cache_disabled);
    if (st != HK_OK)
        return st;
    if (tune_dir && *tune_dir) {
        size_t n = strlen(tune_dir) + 1;
        if (!(context->tune_cache_dir = malloc(n)))
            return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
        memcpy(context->tune_cache_dir, tune_dir, n);
    }
    st = hk__stream_create(context, 0, VK_NULL_HANDLE, &context->immediate);
    if (st == HK_OK)
        context->profile.coopmat_quads = probe_quads(context);
    return st;
}

hk_status hk_context_create(const hk_context_desc *desc_in, hk_context **out_context)
{
    static const char fn[] = "hk_context_create";
    if (!out_context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_context is NULL");
    *out_context = NULL;
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    if (desc_in) {
        hk_status st = read_sized(fn, "desc", "hk_context_desc_init", desc_in, desc_in->struct_size, DESC_OLDEST, &desc,
                                  sizeof desc);
        if (st != HK_OK)
            return st;
    }
    hk_status st = load_vulkan(fn, NULL);
    if (st != HK_OK)
        return st;
    if (volkGetInstanceVersion() < VK_API_VERSION_1_2)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the Vulkan loader is older than 1.2");

    hk_context *context = calloc(1, sizeof *context);
    if (!context)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
    context->owns_device = 1;
    context->validation_callback = desc.validation_callback;
    context->validation_user = desc.validation_user;

    const char *layers[1];
    const char *inst_exts[1];
    uint32_t layer_count = 0, inst_ext_count = 0;
    if (desc.enable_validation && has_layer("VK_LAYER_KHRONOS_validation")) {
        layers[layer_count++] = "VK_LAYER_KHRONOS_validation";
        inst_exts[inst_ext_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
        context->validation_active = 1;
    }
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "hkernel",
                             .pEngineName = "hkernel",
                             .engineVersion = VK_MAKE_VERSION(HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH),
                             .apiVersion = VK_API_VERSION_1_3};
    VkDebugUtilsMessengerCreateInfoEXT messenger_info = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_validation,
        .pUserData = context};
    VkInstanceCreateInfo inst_info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                      .pNext = context->validation_active ? &messenger_info : NULL,
                                      .pApplicationInfo = &app,
                                      .enabledLayerCount = layer_count,
                                      .ppEnabledLayerNames = layers,
                                      .enabledExtensionCount = inst_ext_count,
                                      .ppEnabledExtensionNames = inst_exts};
    VkResult r = vkCreateInstance(&inst_info, NULL, &context->instance);
    if (r != VK_SUCCESS) {
        free(context);
        return instance_fail(r, fn);
    }
    volkLoadInstanceOnly(context->instance);
    if (context->validation_active) {
        /* volk's instance-level pointers are process-wide and follow the last instance loaded: keep
         * this instance's own destroy function */
        context->destroy_messenger = vkDestroyDebugUtilsMessengerEXT;
        r = vkCreateDebugUtilsMessengerEXT(context->instance, &messenger_info, NULL, &context->messenger);
        if (r != VK_SUCCESS) {
            st = hk__vk_fail(r, fn, "vkCreateDebugUtilsMessengerEXT");
            goto fail;
        }
    }
    st = pick_device(context->instance, &desc, fn, &context->physical_device);
    if (st != HK_OK)
        goto fail;
    VkPhysicalDevice pd = context->physical_device;
    context->queue_family = pick_queue_family(pd);
    if (context->queue_family == UINT32_MAX) {
        st = hk__fail(HK_ERROR_UNSUPPORTED, fn, "the device has no compute queue");
        goto fail;
    }

    int coop_khr = device_has_extension(pd, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    feature_chain supported, on;
    query_supported(pd, coop_khr, &supported);
    /* exactly the members the kernels use (hkernel.h, HK_FEATURE_*), where the device has them */
    uint32_t bits = supported_bits(&supported.f2, HK_FEATURES_USED);
    int use_coop = !!(bits & HK_FEATURE_COOPMAT_KHR);
    chain_init(&on, props.apiVersion, use_coop); /* the extension's struct only with the extension */
    st = enable_bits(fn, bits, &on.f2);
    if (st != HK_OK)
        goto fail;
    const char *dev_exts[3];
    uint32_t dev_ext_count = 0;
    if (use_coop)
        dev_exts[dev_ext_count++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    /* Pipelines that say their storage-buffer loads need no bounds checks (every kernel keeps its
     * reads inside its views itself; the tests check it under GPU-assisted validation). NVIDIA's
     * driver otherwise compares every load against the buffer's size, though it reports no
     * robustness as its default (docs/perf.md, Method). HK_PIPELINE_ROBUSTNESS=default in the
     * environment leaves the driver's default (to compare). */
    const char *robust_env = getenv("HK_PIPELINE_ROBUSTNESS");
    int robust_default = robust_env && strcmp(robust_env, "default") == 0;
    if (!robust_default && device_has_extension(pd, VK_EXT_PIPELINE_ROBUSTNESS_EXTENSION_NAME)) {
        VkPhysicalDevicePipelineRobustnessFeaturesEXT robust = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_FEATURES_EXT};
        VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &robust};
        vkGetPhysicalDeviceFeatures2(pd, &f2);
        if (robust.pipelineRobustness) {
            dev_exts[dev_ext_count++] = VK_EXT_PIPELINE_ROBUSTNESS_EXTENSION_NAME;
            on.robust = robust;
            on.robust.pNext = on.f2.pNext;
            on.f2.pNext = &on.robust;
            context->robustness_off = 1;
        }
    }
    /* diagnostic: the driver's statistics of every pipeline created (registers, spills) on stderr */
    const char *stats_env = getenv("HK_PIPELINE_STATS");
    if (stats_env && strcmp(stats_env, "1") == 0 &&
        device_has_extension(pd, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) {
        dev_exts[dev_ext_count++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
        on.exec_info = (VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR){
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
            .pNext = on.f2.pNext,
            .pipelineExecutableInfo = VK_TRUE};
        on.f2.pNext = &on.exec_info;
        context->pipeline_stats = 1;
    }

    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                          .queueFamilyIndex = context->queue_family,
                                          .queueCount = 1,
                                          .pQueuePriorities = &priority};
    VkDeviceCreateInfo dev_info = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                                   .pNext = &on.f2,
                                   .queueCreateInfoCount = 1,
                                   .pQueueCreateInfos = &queue_info,
                                   .enabledExtensionCount = dev_ext_count,
                                   .ppEnabledExtensionNames = dev_exts};
    r = vkCreateDevice(pd, &dev_info, NULL, &context->device);
    if (r != VK_SUCCESS) {
        st = hk__vk_fail(r, fn, "vkCreateDevice");
        goto fail;
    }
    context->features = bits & ~desc.disable_features;
    volkLoadDeviceTable(&context->vk, context->device);
    context->vk.vkGetDeviceQueue(context->device, context->queue_family, 0, &context->queue);
    probe_caps(context, !!(bits & HK_FEATURE_COOPMAT_KHR));
    st = finish_context(context, fn, desc.pipeline_cache_dir, desc.disable_pipeline_cache, desc.tune_cache_dir);
    if (st != HK_OK)
        goto fail;
    *out_context = context;
    return HK_OK;
fail:
    hk_context_destroy(context);
    return st;
}

hk_status hk_context_create_borrowed(const hk_borrowed_device *borrowed, hk_context **out_context)
{
    static const char fn[] = "hk_context_create_borrowed";
    if (!out_context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_context is NULL");
    *out_context = NULL;
    if (!borrowed)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "borrowed is NULL");
    hk_borrowed_device bd;
    hk_status st = read_sized(fn, "borrowed", "hk_borrowed_device_init", borrowed, borrowed->struct_size,
                              BORROWED_OLDEST, &bd, sizeof bd);
    if (st != HK_OK)
        return st;
    const hk_borrowed_device *b = &bd;
    if (!b->instance || !b->physical_device || !b->device || !b->queue)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "instance, physical_device, device and queue must all be set");
    st = load_vulkan(fn, b->get_instance_proc_addr);
    if (st != HK_OK)
        return st;
    volkLoadInstanceOnly(b->instance);
    uint32_t families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(b->physical_device, &families, NULL);
    VkQueueFamilyProperties *props = calloc(families ? families : 1, sizeof *props);
    if (!props)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
    vkGetPhysicalDeviceQueueFamilyProperties(b->physical_device, &families, props);
    int compute = b->queue_family_index < families && (props[b->queue_family_index].queueFlags & VK_QUEUE_COMPUTE_BIT);
    free(props);
    if (b->queue_family_index >= families)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "queue_family_index=%u does not exist (the device has %u queue famil%s)",
                        b->queue_family_index, families, families == 1 ? "y" : "ies");
    if (!compute)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "queue family %u has no compute support (VK_QUEUE_COMPUTE_BIT)",
                        b->queue_family_index);
    /* a claimed bit the device cannot have been created with is the engine's mistake: say so now
     * rather than as validation errors (or worse) when a kernel runs */
    uint32_t claimed = b->enabled_features & HK_FEATURES_USED;
    int coop_khr = (claimed & HK_FEATURE_COOPMAT_KHR) &&
                   device_has_extension(b->physical_device, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    feature_chain supported;
    query_supported(b->physical_device, coop_khr, &supported);
    for (size_t i = 0; i < FEATURE_MEMBERS; i++) {
        const feature_member *m = &feature_members[i];
        if ((claimed & m->bit) && !member_supported(&supported.f2, m))
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                            "borrowed->enabled_features has %s, but the device does not support %s%s", feature_name(m->bit),
                            m->member, m->bit == HK_FEATURE_COOPMAT_KHR && !coop_khr ? " (no VK_KHR_cooperative_matrix)" : "");
    }
    hk_context *context = calloc(1, sizeof *context);
    if (!context)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
    context->instance = b->instance;
    context->physical_device = b->physical_device;
    context->device = b->device;
    context->queue = b->queue;
    context->queue_family = b->queue_family_index;
    context->features = claimed;
    probe_caps(context, !!(claimed & HK_FEATURE_COOPMAT_KHR));
    st = finish_context(context, fn, b->pipeline_cache_dir, b->disable_pipeline_cache, NULL);
    if (st != HK_OK) {
        hk_context_destroy(context);
        return st;
    }
    *out_context = context;
    return HK_OK;
}

void hk__object_track(hk_context *context, hk_object *object, hk_object_kind kind)
{
    hk__mutex_lock(&context->objects_lock);
    object->kind = kind;
    object->prev = &context->live;
    object->next = context->live.next;
    object->next->prev = object;
    context->live.next = object;
    hk__mutex_unlock(&context->objects_lock);
}

void hk__object_untrack(hk_context *context, hk_object *object)
{
    if (!object->next)
        return;
    hk__mutex_lock(&context->objects_lock);
    object->prev->next = object->next;
    object->next->prev = object->prev;
    object->prev = object->next = NULL;
    hk__mutex_unlock(&context->objects_lock);
}

/* Frees the buffers and streams the caller left alive, streams first (their staging and
 * descriptors), naming each where validation is on: the Vulkan objects behind them must go
 * before the device does. */
static void destroy_live_objects(hk_context *context)
{
    for (int pass = 0; pass < 2; pass++) {
        hk_object_kind kind = pass == 0 ? HK_OBJECT_STREAM : HK_OBJECT_BUFFER;
        hk_object *o = context->live.next;
        while (o != &context->live) {
            hk_object *next = o->next;
            if (o->kind != kind) {
                o = next;
                continue;
            }
            if (context->validation_active) {
                char message[160];
                if (kind == HK_OBJECT_STREAM) {
                    snprintf(message, sizeof message, "hk_context_destroy: an hk_stream is still alive; "
                             "destroyed with the context");
                } else {
                    const hk_buffer *b = (const hk_buffer *)o;
                    snprintf(message, sizeof message, "hk_context_destroy: an hk_buffer of %llu bytes (%s) is still "
                             "alive; destroyed with the context", (unsigned long long)b->size,
                             b->memory ? "created" : "wrapped");
                }
                report(context, HK_MESSAGE_ERROR, message);
            }
            if (kind == HK_OBJECT_STREAM)
                hk_stream_destroy((hk_stream *)o);
            else
                hk_buffer_destroy((hk_buffer *)o);
            o = next;
        }
    }
}

void hk_context_destroy(hk_context *context)
{
    if (!context)
        return;
    if (context->device) {
        hk_stream_destroy(context->immediate);
        if (context->vk.vkDeviceWaitIdle && context->owns_device)
            context->vk.vkDeviceWaitIdle(context->device); /* VK_ERROR_DEVICE_LOST here changes nothing */
        if (context->locks_ready)
            destroy_live_objects(context);
        hk__pipeline_cache_close(context);
        if (context->tune_destroy)
            context->tune_destroy(context);
        hk__pipelines_destroy(context);
        if (context->owns_device && context->vk.vkDestroyDevice)
            context->vk.vkDestroyDevice(context->device, NULL);
    }
    if (context->owns_device && context->instance) {
        if (context->messenger)
            context->destroy_messenger(context->instance, context->messenger, NULL);
        vkDestroyInstance(context->instance, NULL);
    }
    if (context->locks_ready) {
        hk__mutex_destroy(&context->pipeline_lock);
        hk__mutex_destroy(&context->queue_lock);
        hk__mutex_destroy(&context->immediate_lock);
        hk__mutex_destroy(&context->objects_lock);
        hk__mutex_destroy(&context->attach_lock);
    }
    free(context->tune_cache_dir);
    free(context);
}

hk_status hk_context_vulkan(const hk_context *context, VkInstance *instance, VkPhysicalDevice *physical_device,
                            VkDevice *device, VkQueue *queue, uint32_t *queue_family_index)
{
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, "hk_context_vulkan", "context is NULL");
    if (instance)
        *instance = context->instance;
    if (physical_device)
        *physical_device = context->physical_device;
    if (device)
        *device = context->device;
    if (queue)
        *queue = context->queue;
    if (queue_family_index)
        *queue_family_index = context->queue_family;
    return HK_OK;
}

uint32_t hk_context_validation_messages(const hk_context *context) { return context ? context->validation_messages : 0; }

int hk_context_device_lost(const hk_context *context) { return context ? context->device_lost : 0; }

int hk_context_validation_active(const hk_context *context) { return context ? context->validation_active : 0; }

hk_status hk_context_caps_sized(const hk_context *context, hk_caps *out_caps, size_t caps_size)
{
    static const char fn[] = "hk_context_caps";
    if (!context || !out_caps)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s is NULL", context ? "out_caps" : "context");
    /* the shortest hk_caps accepted ends with timestamp_period_ns: a prefix of this one */
    size_t oldest = offsetof(hk_caps, timestamp_period_ns) + sizeof(float);
    if (caps_size < oldest || caps_size > (1u << 20))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "caps_size=%zu is not the size of any version's hk_caps (this one's: %zu)",
                        caps_size, sizeof(hk_caps));
    if (caps_size > sizeof(hk_caps)) /* a newer caller: the fields we do not know read 0 */
        memset((char *)out_caps + sizeof(hk_caps), 0, caps_size - sizeof(hk_caps));
    memcpy(out_caps, &context->caps, caps_size < sizeof(hk_caps) ? caps_size : sizeof(hk_caps));
    return HK_OK;
}

hk_status hk_enumerate_devices(char (*names)[256], VkPhysicalDeviceType *types, uint32_t max, uint32_t *out_count)
{
    static const char fn[] = "hk_enumerate_devices";
    if (!out_count)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_count is NULL");
    *out_count = 0;
    hk_status st = load_vulkan(fn, NULL);
    if (st != HK_OK)
        return st;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .apiVersion = VK_API_VERSION_1_2};
    VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkInstance instance;
    VkResult r = vkCreateInstance(&info, NULL, &instance);
    if (r != VK_SUCCESS)
        return instance_fail(r, fn);
    volkLoadInstanceOnly(instance);
    uint32_t count = 0;
    VkPhysicalDevice devices[64];
    st = list_devices(instance, fn, devices, &count);
    if (st != HK_OK) {
        vkDestroyInstance(instance, NULL);
        return st;
    }
    for (uint32_t i = 0; i < count && i < max; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(devices[i], &p);
        if (names)
            snprintf(names[i], 256, "%s", p.deviceName);
        if (types)
            types[i] = p.deviceType;
    }
    *out_count = count;
    vkDestroyInstance(instance, NULL);
    return HK_OK;
}
