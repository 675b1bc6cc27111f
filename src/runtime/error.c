/* Per-thread error messages and VkResults, status and type names, the library's version. */
#include "internal.h"
#include "hk_ref.h"

#include <stdio.h>
#include <stdlib.h>

static _Thread_local char last_error[1024];
static _Thread_local VkResult last_vk_result = VK_SUCCESS;

const char *hk_last_error(void) { return last_error; }

VkResult hk_last_vk_result(void) { return last_vk_result; }

void hk__set_vk_result(VkResult result) { last_vk_result = result; }

uint32_t hk_version(void) { return HK_VERSION; }

hk_status hk__fail(hk_status status, const char *fn, const char *fmt, ...)
{
    last_vk_result = VK_SUCCESS;
    int n = snprintf(last_error, sizeof last_error, "%s: ", fn);
    if (n < 0 || (size_t)n >= sizeof last_error)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

hk_status hk__check_limit(const char *fn, const char *name, uint64_t value, uint64_t limit)
{
    if (value <= limit)
        return HK_OK;
    return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                    "%s=%llu exceeds the limit %s <= %llu (bounds every shader loop on every device; see hkernel.h)",
                    name, (unsigned long long)value, name, (unsigned long long)limit);
}

const char *hk__vk_result_name(VkResult result)
{
    switch (result) {
#define R(x) case x: return #x;
    R(VK_SUCCESS) R(VK_NOT_READY) R(VK_TIMEOUT) R(VK_INCOMPLETE)
    R(VK_ERROR_OUT_OF_HOST_MEMORY) R(VK_ERROR_OUT_OF_DEVICE_MEMORY) R(VK_ERROR_INITIALIZATION_FAILED)
    R(VK_ERROR_DEVICE_LOST) R(VK_ERROR_MEMORY_MAP_FAILED) R(VK_ERROR_LAYER_NOT_PRESENT)
    R(VK_ERROR_EXTENSION_NOT_PRESENT) R(VK_ERROR_FEATURE_NOT_PRESENT) R(VK_ERROR_INCOMPATIBLE_DRIVER)
    R(VK_ERROR_TOO_MANY_OBJECTS) R(VK_ERROR_FORMAT_NOT_SUPPORTED) R(VK_ERROR_FRAGMENTED_POOL)
    R(VK_ERROR_OUT_OF_POOL_MEMORY) R(VK_ERROR_INVALID_SHADER_NV) R(VK_ERROR_UNKNOWN)
    R(VK_ERROR_INVALID_EXTERNAL_HANDLE) R(VK_ERROR_FRAGMENTATION) R(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    R(VK_PIPELINE_COMPILE_REQUIRED) R(VK_ERROR_NOT_PERMITTED_KHR)
#undef R
    default: return "VkResult(unknown)";
    }
}

hk_status hk__vk_fail(VkResult result, const char *fn, const char *what)
{
    hk_status status = (result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY)
                           ? HK_ERROR_OUT_OF_MEMORY
                       : result == VK_ERROR_DEVICE_LOST ? HK_ERROR_DEVICE_LOST
                                                        : HK_ERROR_VULKAN;
    hk__fail(status, fn, "%s failed (%s, %d)", what, hk__vk_result_name(result), (int)result);
    last_vk_result = result;
    return status;
}

hk_status hk__vk_fail_on(hk_context *context, VkResult result, const char *fn, const char *what)
{
    if (result == VK_ERROR_DEVICE_LOST && context)
        context->device_lost = 1;
    return hk__vk_fail(result, fn, what);
}

hk_status hk__check_alive(const hk_context *context, const char *fn)
{
    if (!context || !context->device_lost)
        return HK_OK;
    hk__fail(HK_ERROR_DEVICE_LOST, fn, "the context's device was lost (VK_ERROR_DEVICE_LOST earlier): destroy the "
             "context and create a new one");
    last_vk_result = VK_ERROR_DEVICE_LOST;
    return HK_ERROR_DEVICE_LOST;
}

/* ---- locks ---- */
#if defined(_WIN32)
void hk__mutex_init(hk_mutex *m) { InitializeSRWLock(m); }
void hk__mutex_destroy(hk_mutex *m) { (void)m; }
void hk__mutex_lock(hk_mutex *m) { AcquireSRWLockExclusive(m); }
void hk__mutex_unlock(hk_mutex *m) { ReleaseSRWLockExclusive(m); }
#else
void hk__mutex_init(hk_mutex *m) { pthread_mutex_init(m, NULL); }
void hk__mutex_destroy(hk_mutex *m) { pthread_mutex_destroy(m); }
void hk__mutex_lock(hk_mutex *m) { pthread_mutex_lock(m); }
void hk__mutex_unlock(hk_mutex *m) { pthread_mutex_unlock(m); }
#endif

const char *hk_status_name(hk_status status)
{
    switch (status) {
    case HK_OK: return "HK_OK";
    case HK_ERROR_INVALID_ARGUMENT: return "HK_ERROR_INVALID_ARGUMENT";
    case HK_ERROR_UNSUPPORTED: return "HK_ERROR_UNSUPPORTED";
    case HK_ERROR_OUT_OF_MEMORY: return "HK_ERROR_OUT_OF_MEMORY";
    case HK_ERROR_VULKAN: return "HK_ERROR_VULKAN";
    case HK_ERROR_NOT_FOUND: return "HK_ERROR_NOT_FOUND";
    case HK_ERROR_STATE: return "HK_ERROR_STATE";
    case HK_ERROR_DEVICE_LOST: return "HK_ERROR_DEVICE_LOST";
    }
    return "HK_ERROR_(unknown)";
}

/* The type table lives with the references (src/ref/types.c); hk_type numbers are its indices. */
static const hk_type_traits *traits(hk_type type) { return hk_ref_type((int)type); }

uint32_t hk_type_block_values(hk_type type) { return traits(type) ? traits(type)->block_values : 0; }
uint32_t hk_type_block_bytes(hk_type type) { return traits(type) ? traits(type)->block_bytes : 0; }
uint32_t hk_type_alignment(hk_type type) { return traits(type) ? traits(type)->align : 0; }
uint64_t hk_type_bytes(hk_type type, uint64_t values)
{
    const hk_type_traits *t = traits(type);
    if (!t || values % t->block_values || values / t->block_values > UINT64_MAX / t->block_bytes)
        return 0;
    return values / t->block_values * t->block_bytes;
}
const char *hk_type_name(hk_type type) { return traits(type) ? traits(type)->name : "?"; }
uint32_t hk_type_to_ggml(hk_type type) { return traits(type) ? traits(type)->ggml_type : UINT32_MAX; }

hk_status hk_type_from_ggml(uint32_t ggml_type, hk_type *out_type)
{
    static const char fn[] = "hk_type_from_ggml";
    if (!out_type)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_type is NULL");
    int t = hk_ref_type_from_ggml(ggml_type);
    if (t < 0)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn,
                        "ggml type %u has no libhkernel type (f32, f16, q8_0, q8_1, q4_k, q5_k, q6_k)", ggml_type);
    *out_type = (hk_type)t;
    return HK_OK;
}

int hk__env_given(const char *name)
{
    const char *env = getenv(name);
    return env && *env;
}

hk_status hk__env_u32(const char *fn, const char *name, uint32_t def, uint32_t lo, uint32_t hi, int pow2,
                      uint32_t *out)
{
    const char *env = getenv(name);
    *out = def;
    if (!env || !*env)
        return HK_OK;
    char *end;
    unsigned long v = strtoul(env, &end, 10);
    if (*end || end == env || v < lo || v > hi || (pow2 && (v & (v - 1))))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s=\"%s\" is not %s in %u..%u", name, env,
                        pow2 ? "a power of two" : "an integer", lo, hi);
    *out = (uint32_t)v;
    return HK_OK;
}
