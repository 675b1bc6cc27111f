/* Streams: one command buffer that kernels record into, hazard-tracked barriers, descriptor pools,
 * GPU timestamps, staging memory for recorded uploads and downloads; the single dispatch path
 * every kernel uses; argument checks for views.
 * A stream is used by one thread at a time (hkernel.h): nothing in it is locked. What it shares
 * with other streams of its context goes through the context's locks: the pipeline table
 * (hk__pipeline_get), the queue (hk__queue_submit) and the immediate stream (immediate_lock). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define HK_SETS_PER_POOL 256
#define HK_MAX_PENDING 64
/* Vulkan's guaranteed minimum for maxComputeWorkGroupCount[0..1]. */
#define HK_MAX_GROUPS_XY 65535u
/* Staging memory of recorded uploads and downloads grows by chunks of at least this much. */
#define HK_STAGING_MIN_CHUNK (4u << 20)

typedef struct hk_range {
    VkBuffer buffer;
    uint64_t begin, end;
    int writes;
    VkPipelineStageFlags stage; /* compute shader or transfer */
} hk_range;

typedef struct staging_chunk {
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint8_t *mapped;
    uint64_t size, used;
} staging_chunk;

typedef struct pending_download {
    void *host;
    const uint8_t *staged;
    uint64_t size;
} pending_download;

struct hk_stream {
    hk_object object;
    hk_context *context;
    VkCommandPool pool; /* owned streams: a pool of their own, so streams record in parallel */
    VkCommandBuffer cmd;
    int wrapped;
    int prepare_only;      /* hk_context_prepare: kernels only build their pipelines */
    int recording;
    int barrier_due;       /* the next command must wait for all earlier ones */
    int queries_reset_due; /* wrapped: reset the query pool before this recording's first timestamp */
    VkFence fence;
    VkDescriptorPool *pools;
    uint32_t pool_count, pool_current;
    VkQueryPool queries;
    uint32_t max_timestamps;
    uint32_t kernel_count; /* recorded since the last submit/reset */
    uint32_t barrier_count; /* likewise */
    uint32_t mark_count;   /* timestamps recorded since the last submit/reset */
    uint32_t read_count;   /* timestamps of the last submit, in stamps */
    uint64_t *stamps;
    hk_range pending[HK_MAX_PENDING]; /* accesses since the last barrier */
    uint32_t pending_count;
    staging_chunk *chunks;
    uint32_t chunk_count;
    pending_download *downloads;
    uint32_t download_count, download_capacity;
};

/* ---- argument checks ---- */

hk_status hk__check_bindings(hk_context *context, hk_stream *stream, const char *fn, const char *const *names,
                             const hk_binding *b, uint32_t count)
{
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    if (stream && stream->context != context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "stream belongs to another context");
    hk_status alive = hk__check_alive(context, fn);
    if (alive != HK_OK)
        return alive;
    for (uint32_t i = 0; i < count; i++) {
        const hk_buffer *buf = b[i].view.buffer;
        uint64_t off = b[i].view.offset;
        if (!buf)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s.buffer is NULL", names[i]);
        if (buf->context != context)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s.buffer belongs to another context", names[i]);
        if (off % b[i].align)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s.offset=%llu is not a multiple of %u", names[i],
                            (unsigned long long)off, b[i].align);
        if (off > buf->size || b[i].bytes > buf->size - off)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                            "%s needs %llu bytes at offset %llu, past the end of its %llu-byte buffer", names[i],
                            (unsigned long long)b[i].bytes, (unsigned long long)off, (unsigned long long)buf->size);
        uint64_t align = context->caps.min_storage_offset_alignment ? context->caps.min_storage_offset_alignment : 1;
        if ((off % align + b[i].bytes + 3) / 4 * 4 > context->caps.max_storage_buffer_range)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s spans %llu bytes, more than the device can bind (%llu)",
                            names[i], (unsigned long long)b[i].bytes,
                            (unsigned long long)context->caps.max_storage_buffer_range);
    }
    for (uint32_t i = 0; i < count; i++) {
        if (!b[i].writes)
            continue;
        for (uint32_t j = 0; j < count; j++) {
            if (j == i || b[j].view.buffer->buffer != b[i].view.buffer->buffer)
                continue;
            uint64_t a0 = b[i].view.offset, a1 = a0 + b[i].bytes, c0 = b[j].view.offset, c1 = c0 + b[j].bytes;
            if (a0 < c1 && c0 < a1 && !(b[i].in_place_ok && a0 == c0 && b[i].bytes == b[j].bytes))
                return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "output %s overlaps %s", names[i], names[j]);
        }
    }
    return HK_OK;
}

hk_status hk__optional_view(const char *fn, const char *name, hk_view view, int *present)
{
    *present = view.buffer != NULL;
    if (!view.buffer && view.offset)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s.buffer is NULL but its offset is %llu: pass {NULL, 0} for "
                        "no %s", name, (unsigned long long)view.offset, name);
    return HK_OK;
}

/* ---- stream objects ---- */

hk_status hk__stream_create(hk_context *context, uint32_t max_timestamps, VkCommandBuffer wrapped, hk_stream **out)
{
    static const char fn[] = "hk_stream_create";
    const struct VolkDeviceTable *vk = &context->vk;
    hk_stream *s = calloc(1, sizeof *s);
    if (!s)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
    s->context = context;
    VkResult r = VK_SUCCESS;
    if (wrapped) {
        s->cmd = wrapped;
        s->wrapped = 1;
        s->recording = 1;
        s->barrier_due = 1;
        s->queries_reset_due = 1;
    } else {
        /* a command pool per stream: recording into command buffers of one pool from two threads
         * would need a lock around every vkCmd* call */
        VkCommandPoolCreateInfo pool_info = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                             .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                             .queueFamilyIndex = context->queue_family};
        r = vk->vkCreateCommandPool(context->device, &pool_info, NULL, &s->pool);
        if (r != VK_SUCCESS) {
            free(s);
            return hk__vk_fail_on(context, r, fn, "vkCreateCommandPool");
        }
        VkCommandBufferAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                            .commandPool = s->pool,
                                            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                            .commandBufferCount = 1};
        r = vk->vkAllocateCommandBuffers(context->device, &info, &s->cmd);
        if (r != VK_SUCCESS) {
            hk_stream_destroy(s);
            return hk__vk_fail_on(context, r, fn, "vkAllocateCommandBuffers");
        }
        VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = vk->vkCreateFence(context->device, &fence_info, NULL, &s->fence);
        if (r != VK_SUCCESS) {
            hk_stream_destroy(s);
            return hk__vk_fail_on(context, r, fn, "vkCreateFence");
        }
    }
    if (max_timestamps) {
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                    .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                    .queryCount = max_timestamps};
        r = vk->vkCreateQueryPool(context->device, &qi, NULL, &s->queries);
        s->stamps = calloc(max_timestamps, sizeof *s->stamps);
        if (r != VK_SUCCESS || !s->stamps) {
            hk_stream_destroy(s);
            return r != VK_SUCCESS ? hk__vk_fail_on(context, r, fn, "vkCreateQueryPool")
                                   : hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
        }
        s->max_timestamps = max_timestamps;
    }
    *out = s;
    return HK_OK;
}

hk_status hk__stream_create_prepare(hk_context *context, hk_stream **out)
{
    hk_stream *s = calloc(1, sizeof *s);
    if (!s)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, "hk_stream_create_prepare", "out of host memory");
    s->context = context;
    s->prepare_only = 1;
    *out = s;
    return HK_OK;
}

/* A stream the caller holds: on the context's list of live objects. */
static hk_status tracked(hk_context *context, hk_status st, hk_stream **out_stream)
{
    if (st == HK_OK)
        hk__object_track(context, &(*out_stream)->object, HK_OBJECT_STREAM);
    return st;
}

hk_status hk_stream_create_prepare(hk_context *context, hk_stream **out_stream)
{
    static const char fn[] = "hk_stream_create_prepare";
    if (!out_stream)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_stream is NULL");
    *out_stream = NULL;
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    hk_status st = hk__check_alive(context, fn);
    return st != HK_OK ? st : tracked(context, hk__stream_create_prepare(context, out_stream), out_stream);
}

static hk_status check_timestamps(hk_context *context, const char *fn, uint32_t max_timestamps)
{
    if (max_timestamps && !context->caps.timestamps)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "device \"%s\" has no timestamps on its compute queue",
                        context->caps.device_name);
    if (max_timestamps > (1u << 20))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "max_timestamps=%u is more than 1048576", max_timestamps);
    return HK_OK;
}

hk_status hk_stream_create(hk_context *context, uint32_t max_timestamps, hk_stream **out_stream)
{
    static const char fn[] = "hk_stream_create";
    if (!out_stream)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_stream is NULL");
    *out_stream = NULL;
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    hk_status st = hk__check_alive(context, fn);
    if (st == HK_OK)
        st = check_timestamps(context, fn, max_timestamps);
    return st != HK_OK ? st
                       : tracked(context, hk__stream_create(context, max_timestamps, VK_NULL_HANDLE, out_stream),
                                 out_stream);
}

hk_status hk_stream_wrap_timed(hk_context *context, VkCommandBuffer command_buffer, uint32_t max_timestamps,
                               hk_stream **out_stream)
{
    static const char fn[] = "hk_stream_wrap";
    if (!out_stream)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_stream is NULL");
    *out_stream = NULL;
    if (!context || !command_buffer)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s is NULL", context ? "command_buffer" : "context");
    hk_status st = hk__check_alive(context, fn);
    if (st == HK_OK)
        st = check_timestamps(context, fn, max_timestamps);
    return st != HK_OK ? st
                       : tracked(context, hk__stream_create(context, max_timestamps, command_buffer, out_stream),
                                 out_stream);
}

hk_status hk_stream_wrap(hk_context *context, VkCommandBuffer command_buffer, hk_stream **out_stream)
{
    return hk_stream_wrap_timed(context, command_buffer, 0, out_stream);
}

static void free_descriptor_pools(hk_stream *s)
{
    for (uint32_t i = 0; i < s->pool_count; i++)
        s->context->vk.vkDestroyDescriptorPool(s->context->device, s->pools[i], NULL);
    free(s->pools);
    s->pools = NULL;
    s->pool_count = s->pool_current = 0;
}

static void free_staging(hk_stream *s)
{
    const struct VolkDeviceTable *vk = &s->context->vk;
    for (uint32_t i = 0; i < s->chunk_count; i++) {
        vk->vkUnmapMemory(s->context->device, s->chunks[i].memory);
        vk->vkDestroyBuffer(s->context->device, s->chunks[i].buffer, NULL);
        vk->vkFreeMemory(s->context->device, s->chunks[i].memory, NULL);
    }
    free(s->chunks);
    s->chunks = NULL;
    s->chunk_count = 0;
}

/* The recorded work has completed: downloads reach their host memory. */
static void deliver_downloads(hk_stream *s)
{
    for (uint32_t i = 0; i < s->download_count; i++)
        memcpy(s->downloads[i].host, s->downloads[i].staged, s->downloads[i].size);
    s->download_count = 0;
}

void hk_stream_destroy(hk_stream *s)
{
    if (!s)
        return;
    hk_context *context = s->context;
    const struct VolkDeviceTable *vk = &context->vk;
    hk__object_untrack(context, &s->object);
    if (!s->wrapped && !s->prepare_only) {
        if (s->recording) /* recorded but never submitted: nothing is in flight */
            vk->vkEndCommandBuffer(s->cmd);
        if (s->cmd)
            vk->vkFreeCommandBuffers(context->device, s->pool, 1, &s->cmd);
        if (s->pool)
            vk->vkDestroyCommandPool(context->device, s->pool, NULL);
        if (s->fence)
            vk->vkDestroyFence(context->device, s->fence, NULL);
    }
    free_descriptor_pools(s);
    free_staging(s);
    free(s->downloads);
    if (s->queries)
        vk->vkDestroyQueryPool(context->device, s->queries, NULL);
    free(s->stamps);
    free(s);
}

/* Forgets the recorded work (which has completed, or will never run). */
static void reset_tracking(hk_stream *s)
{
    for (uint32_t i = 0; i < s->pool_count; i++)
        s->context->vk.vkResetDescriptorPool(s->context->device, s->pools[i], 0);
    s->pool_current = 0;
    for (uint32_t i = 0; i < s->chunk_count; i++)
        s->chunks[i].used = 0;
    s->download_count = 0;
    s->kernel_count = 0;
    s->barrier_count = 0;
    s->mark_count = 0;
    s->pending_count = 0;
}

static hk_status begin_recording(hk_stream *s, const char *fn)
{
    if (s->recording)
        return HK_OK;
    const struct VolkDeviceTable *vk = &s->context->vk;
    VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                      .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult r = vk->vkBeginCommandBuffer(s->cmd, &begin);
    if (r != VK_SUCCESS)
        return hk__vk_fail_on(s->context, r, fn, "vkBeginCommandBuffer");
    if (s->queries)
        vk->vkCmdResetQueryPool(s->cmd, s->queries, 0, s->max_timestamps);
    s->recording = 1;
    /* earlier submissions' writes (uploads, kernels) must be visible to this one's first reads */
    s->barrier_due = 1;
    return HK_OK;
}

VkResult hk__queue_submit(hk_context *context, VkCommandBuffer cmd, VkFence fence)
{
    VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    hk__mutex_lock(&context->queue_lock);
    VkResult r = context->vk.vkQueueSubmit(context->queue, 1, &submit, fence);
    hk__mutex_unlock(&context->queue_lock);
    return r;
}

/* Ends, submits and waits for an owned stream's recording; delivers downloads and reads the
 * timestamps; leaves the stream empty whatever happened. */
static hk_status submit_and_wait(hk_stream *s, const char *fn)
{
    hk_context *context = s->context;
    const struct VolkDeviceTable *vk = &context->vk;
    if (!s->recording) {
        s->read_count = 0;
        return HK_OK;
    }
    s->recording = 0;
    VkResult r = vk->vkEndCommandBuffer(s->cmd);
    if (r != VK_SUCCESS) {
        vk->vkResetCommandBuffer(s->cmd, 0);
        reset_tracking(s);
        return hk__vk_fail_on(context, r, fn, "vkEndCommandBuffer");
    }
    hk_status st = hk__check_alive(context, fn);
    int submitted = 0;
    if (st == HK_OK) {
        r = hk__queue_submit(context, s->cmd, s->fence);
        if (r != VK_SUCCESS)
            st = hk__vk_fail_on(context, r, fn, "vkQueueSubmit");
        submitted = r == VK_SUCCESS;
    }
    if (submitted) {
        r = vk->vkWaitForFences(context->device, 1, &s->fence, VK_TRUE, UINT64_MAX);
        if (r != VK_SUCCESS)
            st = hk__vk_fail_on(context, r, fn, "vkWaitForFences");
    }
    uint32_t marks = s->mark_count;
    s->read_count = 0;
    if (st == HK_OK)
        deliver_downloads(s);
    if (st == HK_OK && marks) {
        r = vk->vkGetQueryPoolResults(context->device, s->queries, 0, marks, marks * sizeof(uint64_t), s->stamps,
                                      sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
        if (r != VK_SUCCESS)
            st = hk__vk_fail_on(context, r, fn, "vkGetQueryPoolResults");
        else
            s->read_count = marks;
    }
    if (submitted)
        vk->vkResetFences(context->device, 1, &s->fence);
    vk->vkResetCommandBuffer(s->cmd, 0);
    reset_tracking(s);
    return st;
}

hk_status hk_stream_submit(hk_stream *s)
{
    static const char fn[] = "hk_stream_submit";
    if (!s)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "stream is NULL");
    if (s->wrapped)
        return hk__fail(HK_ERROR_STATE, fn, "a wrapped stream is submitted by the engine that owns its command buffer");
    if (s->prepare_only) /* nothing was recorded: nothing to run */
        return HK_OK;
    return submit_and_wait(s, fn);
}

hk_status hk_stream_reset(hk_stream *s)
{
    if (!s)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, "hk_stream_reset", "stream is NULL");
    if (s->prepare_only)
        return HK_OK;
    if (!s->wrapped && s->recording) {
        s->context->vk.vkEndCommandBuffer(s->cmd);
        s->context->vk.vkResetCommandBuffer(s->cmd, 0);
        s->recording = 0;
    }
    if (s->wrapped) {
        /* the engine says its submit completed: what it copied is in the staging memory */
        deliver_downloads(s);
        s->barrier_due = 1;
        s->queries_reset_due = 1;
    }
    reset_tracking(s);
    return HK_OK;
}

uint32_t hk_stream_kernel_count(const hk_stream *s) { return s ? s->kernel_count : 0; }

uint32_t hk_stream_barrier_count(const hk_stream *s) { return s ? s->barrier_count : 0; }

hk_status hk_stream_timestamp(hk_stream *s, uint32_t *out_index)
{
    static const char fn[] = "hk_stream_timestamp";
    if (!s)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "stream is NULL");
    if (!s->max_timestamps)
        return hk__fail(HK_ERROR_STATE, fn, "the stream was created without timestamps");
    if (s->prepare_only)
        return HK_OK;
    if (s->mark_count == s->max_timestamps)
        return hk__fail(HK_ERROR_STATE, fn, "all %u timestamps of this %s are used", s->max_timestamps,
                        s->wrapped ? "recording" : "submit");
    hk_status st = hk__check_alive(s->context, fn);
    if (st == HK_OK)
        st = begin_recording(s, fn);
    if (st != HK_OK)
        return st;
    const struct VolkDeviceTable *vk = &s->context->vk;
    if (s->wrapped && s->queries_reset_due) {
        /* owned streams reset at begin_recording; a wrapped one in the engine's command buffer */
        vk->vkCmdResetQueryPool(s->cmd, s->queries, 0, s->max_timestamps);
        s->queries_reset_due = 0;
    }
    /* bottom of pipe: written once everything recorded before it has finished */
    vk->vkCmdWriteTimestamp(s->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, s->queries, s->mark_count);
    if (out_index)
        *out_index = s->mark_count;
    s->mark_count++;
    return HK_OK;
}

hk_status hk_stream_elapsed_ms(const hk_stream *s, uint32_t from, uint32_t to, double *out_ms)
{
    static const char fn[] = "hk_stream_elapsed_ms";
    if (!s || !out_ms)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s is NULL", s ? "out_ms" : "stream");
    uint64_t t0, t1;
    if (s->wrapped) {
        if (from > to || to >= s->mark_count)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "timestamps %u..%u: this recording has %u", from, to,
                            s->mark_count);
        /* never waits: the engine may not have submitted yet */
        uint64_t v[2];
        for (int i = 0; i < 2; i++) {
            VkResult r = s->context->vk.vkGetQueryPoolResults(s->context->device, s->queries, i ? to : from, 1,
                                                              sizeof v[i], &v[i], sizeof v[i], VK_QUERY_RESULT_64_BIT);
            if (r == VK_NOT_READY)
                return hk__fail(HK_ERROR_STATE, fn, "timestamp %u is not written yet: call this once the engine's "
                                "submit of the command buffer has completed", i ? to : from);
            if (r != VK_SUCCESS)
                return hk__vk_fail_on(s->context, r, fn, "vkGetQueryPoolResults");
        }
        t0 = v[0];
        t1 = v[1];
    } else {
        if (from > to || to >= s->read_count)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "timestamps %u..%u: the last submit recorded %u", from, to,
                            s->read_count);
        t0 = s->stamps[from];
        t1 = s->stamps[to];
    }
    *out_ms = t1 > t0 ? (double)(t1 - t0) * s->context->caps.timestamp_period_ns * 1e-6 : 0.0;
    return HK_OK;
}

/* ---- recording ---- */

static const VkPipelineStageFlags all_stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;

static VkAccessFlags write_access(VkPipelineStageFlags stages)
{
    VkAccessFlags a = 0;
    if (stages & VK_PIPELINE_STAGE_ALL_COMMANDS_BIT)
        return VK_ACCESS_MEMORY_WRITE_BIT;
    if (stages & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT)
        a |= VK_ACCESS_SHADER_WRITE_BIT;
    if (stages & VK_PIPELINE_STAGE_TRANSFER_BIT)
        a |= VK_ACCESS_TRANSFER_WRITE_BIT;
    return a;
}

/* Waits for the stages `after` ran in (the stages of the accesses since the last barrier) and
 * makes their writes visible to every later command of ours, compute or transfer: the tracker
 * forgets everything before a barrier, so the barrier must serve any later reader, also a copy or
 * download of bytes a kernel wrote before an earlier compute-to-compute barrier. Source stages
 * stay the ones really involved, so a chain of kernels waits on compute only. */
static void record_barrier(hk_stream *s, VkPipelineStageFlags after, VkPipelineStageFlags stage)
{
    (void)stage;
    VkAccessFlags dst = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                        VK_ACCESS_TRANSFER_WRITE_BIT;
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = write_access(after),
                               .dstAccessMask = dst};
    s->context->vk.vkCmdPipelineBarrier(s->cmd, after, all_stages, 0, 1, &barrier, 0, NULL, 0, NULL);
    s->barrier_count++;
    s->pending_count = 0;
    s->barrier_due = 0;
}

/* What came before a stream's first command: earlier submits of an owned stream hold only our
 * compute and transfer work; before a wrapped stream's, the engine may have recorded anything. */
static VkPipelineStageFlags before_first(const hk_stream *s)
{
    return s->wrapped ? VK_PIPELINE_STAGE_ALL_COMMANDS_BIT : all_stages;
}

/* A barrier goes in only where this command touches bytes an earlier one since the last barrier
 * wrote, or writes bytes an earlier one read: independent kernels stay free to overlap. */
static void order_after_earlier(hk_stream *s, const hk_binding *b, uint32_t count, VkPipelineStageFlags stage)
{
    int needed = s->barrier_due || s->pending_count + count > HK_MAX_PENDING;
    VkPipelineStageFlags after = 0;
    for (uint32_t j = 0; j < s->pending_count; j++)
        after |= s->pending[j].stage;
    for (uint32_t i = 0; i < count && !needed; i++) {
        uint64_t begin = b[i].view.offset, end = begin + b[i].bytes;
        for (uint32_t j = 0; j < s->pending_count && !needed; j++) {
            const hk_range *p = &s->pending[j];
            needed = p->buffer == b[i].view.buffer->buffer && begin < p->end && p->begin < end &&
                     (p->writes || b[i].writes);
        }
    }
    if (needed)
        record_barrier(s, s->barrier_due ? before_first(s) : after, stage);
    for (uint32_t i = 0; i < count; i++)
        s->pending[s->pending_count++] = (hk_range){b[i].view.buffer->buffer, b[i].view.offset,
                                                    b[i].view.offset + b[i].bytes, b[i].writes, stage};
}

hk_status hk_stream_barrier(hk_stream *s)
{
    static const char fn[] = "hk_stream_barrier";
    if (!s)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "stream is NULL");
    if (s->prepare_only)
        return HK_OK;
    hk_status st = hk__check_alive(s->context, fn);
    if (st == HK_OK)
        st = begin_recording(s, fn);
    if (st != HK_OK)
        return st;
    /* any earlier command, ours or the engine's, any memory write; before our kinds of command */
    record_barrier(s, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, all_stages);
    return HK_OK;
}

static hk_status allocate_set(hk_stream *s, const char *fn, VkDescriptorSetLayout layout, VkDescriptorSet *out)
{
    const struct VolkDeviceTable *vk = &s->context->vk;
    for (;;) {
        if (s->pool_current == s->pool_count) {
            VkDescriptorPool *pools = realloc(s->pools, (s->pool_count + 1) * sizeof *pools);
            if (!pools)
                return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
            s->pools = pools;
            VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, HK_SETS_PER_POOL * HK_MAX_BINDINGS};
            VkDescriptorPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                               .maxSets = HK_SETS_PER_POOL,
                                               .poolSizeCount = 1,
                                               .pPoolSizes = &size};
            VkResult r = vk->vkCreateDescriptorPool(s->context->device, &info, NULL, &s->pools[s->pool_count]);
            if (r != VK_SUCCESS)
                return hk__vk_fail_on(s->context, r, fn, "vkCreateDescriptorPool");
            s->pool_count++;
        }
        VkDescriptorSetAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                            .descriptorPool = s->pools[s->pool_current],
                                            .descriptorSetCount = 1,
                                            .pSetLayouts = &layout};
        VkResult r = vk->vkAllocateDescriptorSets(s->context->device, &info, out);
        if (r == VK_SUCCESS)
            return HK_OK;
        if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
            return hk__vk_fail_on(s->context, r, fn, "vkAllocateDescriptorSets");
        s->pool_current++;
    }
}

/* Records one dispatch into s (which is recording). */
static hk_status record_dispatch(hk_context *context, hk_stream *s, const char *fn, const hk_dispatch_desc *d,
                                 VkPipeline pipeline, VkPipelineLayout layout, VkDescriptorSetLayout set_layout,
                                 uint64_t groups_x, uint64_t groups_y)
{
    const struct VolkDeviceTable *vk = &context->vk;
    VkDescriptorSet set;
    hk_status st = allocate_set(s, fn, set_layout, &set);
    if (st != HK_OK)
        return st;
    uint8_t push[HK_PUSH_BYTES] = {0};
    VkDescriptorBufferInfo infos[HK_MAX_BINDINGS];
    VkWriteDescriptorSet writes[HK_MAX_BINDINGS];
    uint64_t align = context->caps.min_storage_offset_alignment ? context->caps.min_storage_offset_alignment : 1;
    for (uint32_t i = 0; i < d->binding_count; i++) {
        const hk_buffer *buf = d->bindings[i].view.buffer;
        /* the tensor's own bytes: from its offset rounded down to the device's alignment to its
         * end rounded up to a word (shaders read 32-bit words), never past the buffer. A binding
         * that ran to the buffer's end would make independent kernels sharing a buffer look like
         * hazards to synchronization validation, and hide reads past the tensor from GPU-assisted
         * validation. */
        uint64_t base = d->bindings[i].view.offset / align * align;
        uint32_t rel = (uint32_t)(d->bindings[i].view.offset - base);
        uint64_t range = (rel + d->bindings[i].bytes + 3) / 4 * 4;
        if (range > buf->size - base)
            range = buf->size - base;
        if (range == 0) /* an unused binding (no bytes): any valid range */
            range = buf->size - base < 4 ? buf->size - base : 4;
        memcpy(push + 4 * i, &rel, 4);
        infos[i] = (VkDescriptorBufferInfo){buf->buffer, base, range};
        writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstSet = set,
                                           .dstBinding = i,
                                           .descriptorCount = 1,
                                           .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                           .pBufferInfo = &infos[i]};
    }
    vk->vkUpdateDescriptorSets(context->device, d->binding_count, writes, 0, NULL);
    if (d->params_bytes)
        memcpy(push + HK_PUSH_PARAMS_OFFSET, d->params, d->params_bytes);

    order_after_earlier(s, d->bindings, d->binding_count, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
    vk->vkCmdBindPipeline(s->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vk->vkCmdBindDescriptorSets(s->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
    vk->vkCmdPushConstants(s->cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, HK_PUSH_BYTES, push);
    if (groups_x)
        vk->vkCmdDispatch(s->cmd, (uint32_t)groups_x, (uint32_t)groups_y, 1);
    s->kernel_count++;
    return HK_OK;
}

hk_status hk__dispatch(hk_context *context, hk_stream *stream, const char *fn, const hk_dispatch_desc *d)
{
    if (d->binding_count > HK_MAX_BINDINGS || HK_PUSH_PARAMS_OFFSET + d->params_bytes > HK_PUSH_BYTES)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "internal: too many bindings or push constants");
    uint64_t groups_x = d->groups < HK_MAX_GROUPS_XY ? d->groups : HK_MAX_GROUPS_XY;
    uint64_t groups_y = groups_x ? (d->groups + groups_x - 1) / groups_x : 0;
    if (groups_y > HK_MAX_GROUPS_XY)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "the shape needs %llu workgroups, more than one dispatch allows",
                        (unsigned long long)d->groups);
    VkPipeline pipeline;
    VkPipelineLayout layout;
    VkDescriptorSetLayout set_layout;
    hk_status st = hk__pipeline_get(context, fn, d, &pipeline, &layout, &set_layout);
    if (st != HK_OK || (stream && stream->prepare_only))
        return st;
    if (stream) {
        st = begin_recording(stream, fn);
        return st != HK_OK ? st : record_dispatch(context, stream, fn, d, pipeline, layout, set_layout, groups_x, groups_y);
    }
    /* NULL stream: the context's immediate stream, one thread at a time from recording to wait */
    hk_stream *s = context->immediate;
    hk__mutex_lock(&context->immediate_lock);
    st = begin_recording(s, fn);
    if (st == HK_OK)
        st = record_dispatch(context, s, fn, d, pipeline, layout, set_layout, groups_x, groups_y);
    if (st == HK_OK)
        st = submit_and_wait(s, fn);
    else
        hk_stream_reset(s);
    hk__mutex_unlock(&context->immediate_lock);
    return st;
}

hk_stream *hk__immediate_begin(hk_context *context)
{
    hk__mutex_lock(&context->immediate_lock);
    return context->immediate;
}

hk_status hk__immediate_end(hk_context *context, const char *fn, hk_status st)
{
    hk_stream *s = context->immediate;
    if (st == HK_OK)
        st = submit_and_wait(s, fn);
    else
        hk_stream_reset(s);
    hk__mutex_unlock(&context->immediate_lock);
    return st;
}

/* After transfers into staging memory that the host reads once the work completed. */
static void record_host_read_barrier(hk_stream *s)
{
    VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    s->context->vk.vkCmdPipelineBarrier(s->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                                        &barrier, 0, NULL, 0, NULL);
    s->barrier_count++;
}

hk_status hk__run_transfer(hk_context *context, const char *fn, void (*record)(hk_context *, VkCommandBuffer, void *),
                           void *user)
{
    hk_status st = hk__check_alive(context, fn);
    if (st != HK_OK)
        return st;
    hk_stream *s = context->immediate;
    hk__mutex_lock(&context->immediate_lock);
    st = begin_recording(s, fn);
    if (st == HK_OK) {
        record_barrier(s, all_stages, all_stages);
        record(context, s->cmd, user);
        record_host_read_barrier(s);
        st = submit_and_wait(s, fn);
    }
    hk__mutex_unlock(&context->immediate_lock);
    return st;
}

static void record_copy(hk_stream *s, const hk_binding b[2])
{
    order_after_earlier(s, b, 2, VK_PIPELINE_STAGE_TRANSFER_BIT);
    VkBufferCopy region = {b[0].view.offset, b[1].view.offset, b[0].bytes};
    s->context->vk.vkCmdCopyBuffer(s->cmd, b[0].view.buffer->buffer, b[1].view.buffer->buffer, 1, &region);
    s->kernel_count++;
}

hk_status hk__record_transfer_copy(hk_context *context, hk_stream *stream, const char *fn, const hk_binding b[2])
{
    if (stream && stream->prepare_only)
        return HK_OK;
    if (stream) {
        hk_status st = begin_recording(stream, fn);
        if (st == HK_OK)
            record_copy(stream, b);
        return st;
    }
    hk_stream *s = context->immediate;
    hk__mutex_lock(&context->immediate_lock);
    hk_status st = begin_recording(s, fn);
    if (st == HK_OK) {
        record_copy(s, b);
        st = submit_and_wait(s, fn);
    }
    hk__mutex_unlock(&context->immediate_lock);
    return st;
}

/* ---- recorded uploads and downloads ---- */

/* size bytes of the stream's staging memory, reused once its submit completed. */
static hk_status staging_take(hk_stream *s, const char *fn, uint64_t size, staging_chunk **out_chunk,
                              uint64_t *out_offset)
{
    for (uint32_t i = 0; i < s->chunk_count; i++) {
        staging_chunk *c = &s->chunks[i];
        uint64_t at = (c->used + 15) / 16 * 16;
        if (at <= c->size && size <= c->size - at) {
            c->used = at + size;
            *out_chunk = c;
            *out_offset = at;
            return HK_OK;
        }
    }
    staging_chunk *grown = realloc(s->chunks, (s->chunk_count + 1) * sizeof *grown);
    if (!grown)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
    s->chunks = grown;
    staging_chunk *c = &s->chunks[s->chunk_count];
    memset(c, 0, sizeof *c);
    c->size = size > HK_STAGING_MIN_CHUNK ? size : HK_STAGING_MIN_CHUNK;
    hk_context *context = s->context;
    hk_status st = hk__alloc_buffer(context, fn, c->size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0,
                                    &c->buffer, &c->memory);
    if (st != HK_OK)
        return st;
    VkResult r = context->vk.vkMapMemory(context->device, c->memory, 0, VK_WHOLE_SIZE, 0, (void **)&c->mapped);
    if (r != VK_SUCCESS) {
        context->vk.vkDestroyBuffer(context->device, c->buffer, NULL);
        context->vk.vkFreeMemory(context->device, c->memory, NULL);
        return hk__vk_fail_on(context, r, fn, "vkMapMemory");
    }
    s->chunk_count++;
    c->used = size;
    *out_chunk = c;
    *out_offset = 0;
    return HK_OK;
}

static hk_status check_transfer(hk_stream *s, const char *fn, const char *name, hk_view view, const void *data,
                                uint64_t size)
{
    if (!s)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "stream is NULL");
    if (s->prepare_only)
        return hk__fail(HK_ERROR_STATE, fn, "a prepare stream records no transfers");
    if (!view.buffer)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s.buffer is NULL", name);
    if (view.buffer->context != s->context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s.buffer belongs to another context", name);
    if (!data && size)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "data is NULL");
    if (view.offset > view.buffer->size || size > view.buffer->size - view.offset)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%s needs %llu bytes at offset %llu, past the end of its %llu-byte buffer",
                        name, (unsigned long long)size, (unsigned long long)view.offset,
                        (unsigned long long)view.buffer->size);
    return hk__check_alive(s->context, fn);
}

static hk_status record_staged(hk_stream *s, const char *fn, hk_view view, void *host, uint64_t size, int upload)
{
    if (s->download_count == s->download_capacity && !upload) {
        uint32_t cap = s->download_capacity ? 2 * s->download_capacity : 8;
        pending_download *grown = realloc(s->downloads, cap * sizeof *grown);
        if (!grown)
            return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
        s->downloads = grown;
        s->download_capacity = cap;
    }
    hk_status st = begin_recording(s, fn);
    staging_chunk *chunk = NULL;
    uint64_t at = 0;
    if (st == HK_OK)
        st = staging_take(s, fn, size, &chunk, &at);
    if (st != HK_OK)
        return st;
    hk_binding b = {view, size, 1, upload, 0};
    order_after_earlier(s, &b, 1, VK_PIPELINE_STAGE_TRANSFER_BIT);
    VkBufferCopy region = {upload ? at : view.offset, upload ? view.offset : at, size};
    if (upload) {
        memcpy(chunk->mapped + at, host, size);
        s->context->vk.vkCmdCopyBuffer(s->cmd, chunk->buffer, view.buffer->buffer, 1, &region);
    } else {
        s->context->vk.vkCmdCopyBuffer(s->cmd, view.buffer->buffer, chunk->buffer, 1, &region);
        record_host_read_barrier(s);
        s->downloads[s->download_count++] = (pending_download){host, chunk->mapped + at, size};
    }
    s->kernel_count++;
    return HK_OK;
}

hk_status hk_stream_upload(hk_stream *s, hk_view dst, const void *data, uint64_t size)
{
    static const char fn[] = "hk_stream_upload";
    hk_status st = check_transfer(s, fn, "dst", dst, data, size);
    if (st != HK_OK || size == 0)
        return st;
    return record_staged(s, fn, dst, (void *)data, size, 1);
}

hk_status hk_stream_download(hk_stream *s, hk_view src, void *data, uint64_t size)
{
    static const char fn[] = "hk_stream_download";
    hk_status st = check_transfer(s, fn, "src", src, data, size);
    if (st != HK_OK || size == 0)
        return st;
    return record_staged(s, fn, src, data, size, 0);
}
