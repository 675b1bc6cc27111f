/* Buffers: device-local allocation, wrapping an engine's VkBuffer, staged upload/download. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Staging transfers move at most this much per round trip, so a multi-GB upload needs no
 * multi-GB host-visible allocation. */
#define HK_STAGING_CHUNK (64u << 20)

static const VkBufferUsageFlags storage_usage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

static int find_memory_type(const hk_context *context, uint32_t bits, VkMemoryPropertyFlags flags)
{
    for (uint32_t i = 0; i < context->memory.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (context->memory.memoryTypes[i].propertyFlags & flags) == flags)
            return (int)i;
    return -1;
}

hk_status hk__alloc_buffer(hk_context *context, const char *fn, uint64_t size, VkBufferUsageFlags usage,
                           VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred, VkBuffer *out_buffer,
                           VkDeviceMemory *out_memory)
{
    const struct VolkDeviceTable *vk = &context->vk;
    /* sizes the device can never hold are refused before Vulkan sees them: drivers may accept
     * them (lavapipe allocates 3 GiB from its 2 GiB heap) or misbehave */
    if (size > context->max_buffer_size)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "size %llu is more than the device's maxBufferSize (%llu bytes)",
                        (unsigned long long)size, (unsigned long long)context->max_buffer_size);
    VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .size = size,
                               .usage = usage,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkBuffer buffer;
    VkResult r = vk->vkCreateBuffer(context->device, &info, NULL, &buffer);
    if (r != VK_SUCCESS)
        return hk__vk_fail_on(context, r, fn, "vkCreateBuffer");
    VkMemoryRequirements req;
    vk->vkGetBufferMemoryRequirements(context->device, buffer, &req);
    int type = find_memory_type(context, req.memoryTypeBits, required | preferred);
    if (type < 0)
        type = find_memory_type(context, req.memoryTypeBits, required);
    if (type < 0) {
        vk->vkDestroyBuffer(context->device, buffer, NULL);
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "no memory type with properties 0x%x for a buffer", (unsigned)required);
    }
    VkDeviceSize heap = context->memory.memoryHeaps[context->memory.memoryTypes[type].heapIndex].size;
    const char *too_big = req.size > heap ? "the heap of its memory type" :
                          req.size > context->max_allocation_size ? "maxMemoryAllocationSize" : NULL;
    if (too_big) {
        vk->vkDestroyBuffer(context->device, buffer, NULL);
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "size %llu (%llu bytes allocated) is more than %s (%llu bytes)",
                        (unsigned long long)size, (unsigned long long)req.size, too_big,
                        (unsigned long long)(req.size > heap ? heap : context->max_allocation_size));
    }
    VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                  .allocationSize = req.size,
                                  .memoryTypeIndex = (uint32_t)type};
    VkDeviceMemory memory;
    r = vk->vkAllocateMemory(context->device, &alloc, NULL, &memory);
    if (r != VK_SUCCESS) {
        vk->vkDestroyBuffer(context->device, buffer, NULL);
        return hk__vk_fail_on(context, r, fn, "vkAllocateMemory");
    }
    r = vk->vkBindBufferMemory(context->device, buffer, memory, 0);
    if (r != VK_SUCCESS) {
        vk->vkFreeMemory(context->device, memory, NULL);
        vk->vkDestroyBuffer(context->device, buffer, NULL);
        return hk__vk_fail_on(context, r, fn, "vkBindBufferMemory");
    }
    *out_buffer = buffer;
    *out_memory = memory;
    return HK_OK;
}

hk_status hk_buffer_create(hk_context *context, uint64_t size, hk_buffer **out_buffer)
{
    static const char fn[] = "hk_buffer_create";
    if (!out_buffer)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_buffer is NULL");
    *out_buffer = NULL;
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    if (size == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "size is 0");
    hk_status st = hk__check_alive(context, fn);
    if (st != HK_OK)
        return st;
    hk_buffer *buffer = calloc(1, sizeof *buffer);
    if (!buffer)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
    st = hk__alloc_buffer(context, fn, size, storage_usage, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0,
                                    &buffer->buffer, &buffer->memory);
    if (st != HK_OK) {
        free(buffer);
        return st;
    }
    buffer->context = context;
    buffer->size = size;
    hk__object_track(context, &buffer->object, HK_OBJECT_BUFFER);
    *out_buffer = buffer;
    return HK_OK;
}

hk_status hk_buffer_wrap(hk_context *context, VkBuffer vk_buffer, uint64_t size, hk_buffer **out_buffer)
{
    static const char fn[] = "hk_buffer_wrap";
    if (!out_buffer)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_buffer is NULL");
    *out_buffer = NULL;
    if (!context || vk_buffer == VK_NULL_HANDLE)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s is NULL", context ? "buffer" : "context");
    if (size == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "size is 0");
    hk_buffer *buffer = calloc(1, sizeof *buffer);
    if (!buffer)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
    buffer->context = context;
    buffer->buffer = vk_buffer;
    buffer->size = size;
    hk__object_track(context, &buffer->object, HK_OBJECT_BUFFER);
    *out_buffer = buffer;
    return HK_OK;
}

void hk_buffer_destroy(hk_buffer *buffer)
{
    if (!buffer)
        return;
    hk__object_untrack(buffer->context, &buffer->object);
    if (buffer->memory) {
        const struct VolkDeviceTable *vk = &buffer->context->vk;
        vk->vkDestroyBuffer(buffer->context->device, buffer->buffer, NULL);
        vk->vkFreeMemory(buffer->context->device, buffer->memory, NULL);
    }
    free(buffer);
}

uint64_t hk_buffer_size(const hk_buffer *buffer) { return buffer ? buffer->size : 0; }

VkBuffer hk_buffer_handle(const hk_buffer *buffer) { return buffer ? buffer->buffer : VK_NULL_HANDLE; }

static hk_status check_range(const hk_buffer *buffer, const char *fn, uint64_t offset, uint64_t size, const void *data)
{
    if (!buffer)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "buffer is NULL");
    if (!data && size)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "data is NULL");
    if (offset > buffer->size || size > buffer->size - offset)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                        "range [%llu, +%llu) is past the end of the %llu-byte buffer", (unsigned long long)offset,
                        (unsigned long long)size, (unsigned long long)buffer->size);
    return HK_OK;
}

typedef struct copy_job {
    VkBuffer src, dst;
    VkBufferCopy region;
} copy_job;

static void record_copy(hk_context *context, VkCommandBuffer cmd, void *user)
{
    copy_job *job = user;
    context->vk.vkCmdCopyBuffer(cmd, job->src, job->dst, 1, &job->region);
}

/* Moves [offset, offset+size) between the buffer and host memory through one reusable staging
 * buffer, chunk by chunk. */
static hk_status staged(hk_buffer *buffer, const char *fn, uint64_t offset, void *host, uint64_t size, int upload)
{
    if (size == 0)
        return HK_OK;
    hk_context *context = buffer->context;
    const struct VolkDeviceTable *vk = &context->vk;
    uint64_t chunk = size < HK_STAGING_CHUNK ? size : HK_STAGING_CHUNK;
    VkBuffer staging;
    VkDeviceMemory memory;
    hk_status st = hk__alloc_buffer(context, fn, chunk, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                    upload ? 0 : VK_MEMORY_PROPERTY_HOST_CACHED_BIT, &staging, &memory);
    if (st != HK_OK)
        return st;
    void *mapped = NULL;
    VkResult r = vk->vkMapMemory(context->device, memory, 0, VK_WHOLE_SIZE, 0, &mapped);
    if (r != VK_SUCCESS) {
        st = hk__vk_fail_on(context, r, fn, "vkMapMemory");
        goto done;
    }
    for (uint64_t done = 0; done < size && st == HK_OK; done += chunk) {
        uint64_t n = size - done < chunk ? size - done : chunk;
        copy_job job = {.region = {.size = n}};
        if (upload) {
            memcpy(mapped, (char *)host + done, n);
            job.src = staging;
            job.dst = buffer->buffer;
            job.region.dstOffset = offset + done;
        } else {
            job.src = buffer->buffer;
            job.dst = staging;
            job.region.srcOffset = offset + done;
        }
        st = hk__run_transfer(context, fn, record_copy, &job);
        if (st == HK_OK && !upload)
            memcpy((char *)host + done, mapped, n);
    }
    vk->vkUnmapMemory(context->device, memory);
done:
    vk->vkDestroyBuffer(context->device, staging, NULL);
    vk->vkFreeMemory(context->device, memory, NULL);
    return st;
}

hk_status hk_buffer_upload(hk_buffer *buffer, uint64_t offset, const void *data, uint64_t size)
{
    static const char fn[] = "hk_buffer_upload";
    hk_status st = check_range(buffer, fn, offset, size, data);
    return st != HK_OK ? st : staged(buffer, fn, offset, (void *)data, size, 1);
}

hk_status hk_buffer_download(hk_buffer *buffer, uint64_t offset, void *data, uint64_t size)
{
    static const char fn[] = "hk_buffer_download";
    hk_status st = check_range(buffer, fn, offset, size, data);
    return st != HK_OK ? st : staged(buffer, fn, offset, data, size, 0);
}

typedef struct fill_job {
    VkBuffer buffer;
    uint64_t offset, size;
    uint32_t word;
} fill_job;

static void record_fill(hk_context *context, VkCommandBuffer cmd, void *user)
{
    fill_job *job = user;
    context->vk.vkCmdFillBuffer(cmd, job->buffer, job->offset, job->size, job->word);
}

hk_status hk_buffer_fill(hk_buffer *buffer, uint64_t offset, uint64_t size, uint32_t word)
{
    static const char fn[] = "hk_buffer_fill";
    hk_status st = check_range(buffer, fn, offset, size, &word);
    if (st != HK_OK)
        return st;
    if (offset % 4 || size % 4)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "offset %llu and size %llu must be multiples of 4",
                        (unsigned long long)offset, (unsigned long long)size);
    if (size == 0)
        return HK_OK;
    fill_job job = {buffer->buffer, offset, size, word};
    return hk__run_transfer(buffer->context, fn, record_fill, &job);
}
