/* Context: instance, device choice, capability probe, device creation (owned or borrowed). */
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hk_context_desc_init(hk_context_desc *desc)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof *desc);
    desc->device_index = -1;
}

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

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    hk_context *context = user;
    context->validation_messages++;
    fprintf(stderr, "hkernel: validation %s: %s\n",
            (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) ? "error" : "warning",
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

/* Everything the kernels may use, as the device reports it. */
typedef struct feature_chain {
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDeviceVulkan11Features v11;
    VkPhysicalDeviceVulkan12Features v12;
    VkPhysicalDeviceVulkan13Features v13;
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR coop_khr;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coop_nv;
} feature_chain;

static void chain_init(feature_chain *c, uint32_t api, int coop_khr, int coop_nv)
{
    memset(c, 0, sizeof *c);
    c->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    c->v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    c->v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    c->v13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
    c->coop_khr.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
    c->coop_nv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
    void **next = &c->f2.pNext;
    *next = &c->v11;
    next = &c->v11.pNext;
    *next = &c->v12;
    next = &c->v12.pNext;
    if (api >= VK_API_VERSION_1_3) {
        *next = &c->v13;
        next = &c->v13.pNext;
    }
    if (coop_khr) {
        *next = &c->coop_khr;
        next = &c->coop_khr.pNext;
    }
    if (coop_nv)
        *next = &c->coop_nv;
}

static uint32_t features_from_chain(const feature_chain *c)
{
    uint32_t f = 0;
    if (c->v11.storageBuffer16BitAccess)
        f |= HK_FEATURE_STORAGE_16BIT;
    if (c->v12.storageBuffer8BitAccess)
        f |= HK_FEATURE_STORAGE_8BIT;
    if (c->v12.shaderFloat16)
        f |= HK_FEATURE_FLOAT16;
    if (c->v12.shaderInt8)
        f |= HK_FEATURE_INT8;
    if (c->v13.shaderIntegerDotProduct)
        f |= HK_FEATURE_INTEGER_DOT;
    if (c->v13.maintenance4)
        f |= HK_FEATURE_MAINTENANCE4;
    if (c->v13.subgroupSizeControl && c->v13.computeFullSubgroups)
        f |= HK_FEATURE_SUBGROUP_SIZE_CONTROL;
    if (c->coop_khr.cooperativeMatrix)
        f |= HK_FEATURE_COOPMAT_KHR;
    if (c->coop_nv.cooperativeMatrix)
        f |= HK_FEATURE_COOPMAT_NV;
    return f;
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

/* Fills context->caps from the physical device, given the features that are enabled. */
static void probe_caps(hk_context *context, int has_coop_khr, int has_coop_nv)
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
    caps->subgroup_arithmetic = (v11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                                (v11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    caps->shared_memory_bytes = p->limits.maxComputeSharedMemorySize;
    caps->max_workgroup_size = p->limits.maxComputeWorkGroupInvocations;
    caps->max_storage_buffer_range = p->limits.maxStorageBufferRange;
    caps->min_storage_offset_alignment = p->limits.minStorageBufferOffsetAlignment;
    uint32_t f = context->features;
    caps->subgroup_size_control = !!(f & HK_FEATURE_SUBGROUP_SIZE_CONTROL);
    caps->storage_16bit = !!(f & HK_FEATURE_STORAGE_16BIT);
    caps->storage_8bit = !!(f & HK_FEATURE_STORAGE_8BIT);
    caps->float16 = !!(f & HK_FEATURE_FLOAT16);
    caps->int8 = !!(f & HK_FEATURE_INT8);
    caps->integer_dot = !!(f & HK_FEATURE_INTEGER_DOT);
    caps->integer_dot_accelerated = caps->integer_dot && dot.integerDotProduct4x8BitPackedSignedAccelerated;
    caps->coopmat_khr = !!(f & HK_FEATURE_COOPMAT_KHR);
    caps->coopmat_nv = !!(f & HK_FEATURE_COOPMAT_NV);

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
    if (has_coop_nv && vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) {
        uint32_t n = 0;
        if (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, NULL) == VK_SUCCESS && n) {
            VkCooperativeMatrixPropertiesNV props[HK_MAX_COOPMAT_PROPS];
            if (n > HK_MAX_COOPMAT_PROPS)
                n = HK_MAX_COOPMAT_PROPS;
            for (uint32_t i = 0; i < n; i++)
                props[i] = (VkCooperativeMatrixPropertiesNV){.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV};
            VkResult r = vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, props);
            if (r == VK_SUCCESS || r == VK_INCOMPLETE) {
                caps->coopmat_nv_count = n;
                for (uint32_t i = 0; i < n; i++) {
                    VkCooperativeMatrixPropertiesKHR k = {
                        .MSize = props[i].MSize, .NSize = props[i].NSize, .KSize = props[i].KSize,
                        .AType = (uint32_t)props[i].AType, .BType = (uint32_t)props[i].BType,
                        .CType = (uint32_t)props[i].CType, .ResultType = (uint32_t)props[i].DType,
                        .scope = (uint32_t)props[i].scope};
                    copy_coop_props(&caps->coopmat_nv_props[i], &k);
                }
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

static hk_status finish_context(hk_context *context, const char *fn, const char *cache_dir, int cache_disabled)
{
    if (!context->vk.vkGetDeviceQueue)
        volkLoadDeviceTable(&context->vk, context->device);
    if (!(context->features & HK_FEATURE_STORAGE_16BIT))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "device \"%s\" lacks storageBuffer16BitAccess, which every kernel needs",
                        context->caps.device_name);
    if (!context->caps.subgroup_arithmetic)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "device \"%s\" lacks subgroup arithmetic in compute shaders",
                        context->caps.device_name);
    VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                         .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                         .queueFamilyIndex = context->queue_family};
    VkResult r = context->vk.vkCreateCommandPool(context->device, &pool_info, NULL, &context->command_pool);
    if (r != VK_SUCCESS)
        return hk__vk_fail(r, fn, "vkCreateCommandPool");
    hk_status st = hk__pipeline_cache_open(context, cache_dir, cache_disabled);
    if (st != HK_OK)
        return st;
    return hk__stream_create(context, 0, VK_NULL_HANDLE, &context->immediate);
}

hk_status hk_context_create(const hk_context_desc *desc_in, hk_context **out_context)
{
    static const char fn[] = "hk_context_create";
    if (!out_context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_context is NULL");
    *out_context = NULL;
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    if (desc_in)
        desc = *desc_in;
    hk_status st = load_vulkan(fn, NULL);
    if (st != HK_OK)
        return st;
    if (volkGetInstanceVersion() < VK_API_VERSION_1_2)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "the Vulkan loader is older than 1.2");

    hk_context *context = calloc(1, sizeof *context);
    if (!context)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
    context->owns_device = 1;

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

    uint32_t ext_count = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &ext_count, NULL);
    VkExtensionProperties *exts = calloc(ext_count ? ext_count : 1, sizeof *exts);
    if (!exts) {
        st = hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
        goto fail;
    }
    vkEnumerateDeviceExtensionProperties(pd, NULL, &ext_count, exts);
    int coop_khr = has_extension(exts, ext_count, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    int coop_nv = has_extension(exts, ext_count, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    free(exts);

    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    feature_chain want;
    chain_init(&want, props.apiVersion, coop_khr, coop_nv);
    vkGetPhysicalDeviceFeatures2(pd, &want.f2);
    /* enable only what kernels may use, not every feature the device has */
    feature_chain on;
    chain_init(&on, props.apiVersion, coop_khr, coop_nv);
    on.v11.storageBuffer16BitAccess = want.v11.storageBuffer16BitAccess;
    on.v12.storageBuffer8BitAccess = want.v12.storageBuffer8BitAccess;
    on.v12.shaderFloat16 = want.v12.shaderFloat16;
    on.v12.shaderInt8 = want.v12.shaderInt8;
    on.v12.vulkanMemoryModel = want.v12.vulkanMemoryModel;
    on.v13.shaderIntegerDotProduct = want.v13.shaderIntegerDotProduct;
    on.v13.maintenance4 = want.v13.maintenance4;
    on.v13.subgroupSizeControl = want.v13.subgroupSizeControl;
    on.v13.computeFullSubgroups = want.v13.computeFullSubgroups;
    on.coop_khr.cooperativeMatrix = want.coop_khr.cooperativeMatrix;
    on.coop_nv.cooperativeMatrix = want.coop_nv.cooperativeMatrix;
    on.f2.features.shaderInt16 = want.f2.features.shaderInt16;
    on.f2.features.shaderInt64 = want.f2.features.shaderInt64;
    const char *dev_exts[2];
    uint32_t dev_ext_count = 0;
    if (on.coop_khr.cooperativeMatrix)
        dev_exts[dev_ext_count++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    if (on.coop_nv.cooperativeMatrix)
        dev_exts[dev_ext_count++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;

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
    context->features = features_from_chain(&on) & ~desc.disable_features;
    volkLoadDeviceTable(&context->vk, context->device);
    context->vk.vkGetDeviceQueue(context->device, context->queue_family, 0, &context->queue);
    probe_caps(context, on.coop_khr.cooperativeMatrix, on.coop_nv.cooperativeMatrix);
    st = finish_context(context, fn, desc.pipeline_cache_dir, desc.disable_pipeline_cache);
    if (st != HK_OK)
        goto fail;
    *out_context = context;
    return HK_OK;
fail:
    hk_context_destroy(context);
    return st;
}

hk_status hk_context_create_borrowed(const hk_borrowed_device *b, hk_context **out_context)
{
    static const char fn[] = "hk_context_create_borrowed";
    if (!out_context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_context is NULL");
    *out_context = NULL;
    if (!b)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "borrowed is NULL");
    if (!b->instance || !b->physical_device || !b->device || !b->queue)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "instance, physical_device, device and queue must all be set");
    hk_status st = load_vulkan(fn, b->get_instance_proc_addr);
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
    hk_context *context = calloc(1, sizeof *context);
    if (!context)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
    context->instance = b->instance;
    context->physical_device = b->physical_device;
    context->device = b->device;
    context->queue = b->queue;
    context->queue_family = b->queue_family_index;
    context->features = b->enabled_features;
    probe_caps(context, !!(b->enabled_features & HK_FEATURE_COOPMAT_KHR), !!(b->enabled_features & HK_FEATURE_COOPMAT_NV));
    st = finish_context(context, fn, b->pipeline_cache_dir, b->disable_pipeline_cache);
    if (st != HK_OK) {
        hk_context_destroy(context);
        return st;
    }
    *out_context = context;
    return HK_OK;
}

void hk_context_destroy(hk_context *context)
{
    if (!context)
        return;
    if (context->device) {
        hk_stream_destroy(context->immediate);
        if (context->vk.vkDeviceWaitIdle && context->owns_device)
            context->vk.vkDeviceWaitIdle(context->device);
        hk__pipeline_cache_close(context);
        hk__pipelines_destroy(context);
        if (context->command_pool)
            context->vk.vkDestroyCommandPool(context->device, context->command_pool, NULL);
        if (context->owns_device && context->vk.vkDestroyDevice)
            context->vk.vkDestroyDevice(context->device, NULL);
    }
    if (context->owns_device && context->instance) {
        if (context->messenger)
            context->destroy_messenger(context->instance, context->messenger, NULL);
        vkDestroyInstance(context->instance, NULL);
    }
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

int hk_context_validation_active(const hk_context *context) { return context ? context->validation_active : 0; }

hk_status hk_context_caps(const hk_context *context, hk_caps *out_caps)
{
    if (!context || !out_caps)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, "hk_context_caps", "%s is NULL", context ? "out_caps" : "context");
    *out_caps = context->caps;
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
