/* Runtime internals shared by src/runtime and the kernel family files in src/kernels.
 * The runtime knows no kernel: a kernel family checks its arguments with hk__check_* and records
 * itself with one call to hk__dispatch. */
#ifndef HK_INTERNAL_H
#define HK_INTERNAL_H

#include "volk.h"
#include "hkernel.h"
#include "hk_shaders.h" /* generated: HK_SHADER_* ids and the embedded SPIR-V table */

#include <stdarg.h>

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
typedef SRWLOCK hk_mutex;
#else
#include <pthread.h>
typedef pthread_mutex_t hk_mutex;
#endif
void hk__mutex_init(hk_mutex *m);
void hk__mutex_destroy(hk_mutex *m);
void hk__mutex_lock(hk_mutex *m);
void hk__mutex_unlock(hk_mutex *m);

/* VK_KHR_cooperative_matrix postdates Debian 12's headers (1.3.239): its few definitions, from
 * the registry, when the header lacks them. */
#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef struct VkCooperativeMatrixPropertiesKHR {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    uint32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
    VkBool32 saturatingAccumulation;
    uint32_t scope; /* VkScopeKHR */
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix;
    VkBool32 cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice, uint32_t *, VkCooperativeMatrixPropertiesKHR *);
#endif

/* Every kernel binds at most this many storage buffers. The push-constant block of every shader
 * starts with uint view_offset[HK_MAX_BINDINGS]: the byte offset of each view past the aligned
 * descriptor base (shaders/common.glsl); kernel parameters follow at HK_PUSH_PARAMS_OFFSET. */
#define HK_MAX_BINDINGS 10
#define HK_PUSH_PARAMS_OFFSET (HK_MAX_BINDINGS * 4)
#define HK_PUSH_BYTES 128
#define HK_MAX_SPEC 8

typedef struct hk_pipeline_entry {
    int shader;
    uint32_t spec[HK_MAX_SPEC];
    uint32_t spec_count;
    uint32_t subgroup_size;
    VkPipeline pipeline;
} hk_pipeline_entry;

/* Shared mutable state of a context and what guards it (hkernel.h, Threading):
 *  - pipeline_lock: pipelines, pipeline_count/capacity, set_layout, pipeline_layout (and the
 *    pipeline cache's use is serialized with them at destroy); pipelines are compiled outside it;
 *  - queue_lock: every vkQueueSubmit / vkQueueWaitIdle on `queue`;
 *  - immediate_lock: the immediate stream (NULL-stream calls, hk_buffer_upload/download/fill),
 *    held from recording to the end of its submit;
 *  - objects_lock: the list of live buffers and streams (live);
 *  - attach_lock: attaching the tuner's state (tune, tune_destroy);
 *  - validation_messages, device_lost: atomics.
 * Everything else is written at creation and only read afterwards. */
/* A buffer or stream the caller created: on its context's list of live objects (objects_lock), so
 * that hk_context_destroy can name and free what the caller left alive. First member of both. */
typedef enum hk_object_kind { HK_OBJECT_BUFFER, HK_OBJECT_STREAM } hk_object_kind;
typedef struct hk_object {
    struct hk_object *prev, *next; /* NULL: not on the list (the context's own streams) */
    hk_object_kind kind;
} hk_object;

/* What the kernels adapt to beyond the capabilities, read once when the context is created
 * (context.c): the one place that tells devices apart by vendor or type. Kernels consult these
 * by name, never the vendor or the device type. */
typedef enum hk_device_arch { HK_ARCH_OTHER, HK_ARCH_NVIDIA, HK_ARCH_AMD, HK_ARCH_INTEL, HK_ARCH_CPU } hk_device_arch;
typedef struct hk_device_profile {
    hk_device_arch arch;
    uint32_t schedulers;     /* warp schedulers (NVIDIA: SMs x 4; AMD: CUs x SIMDs); 0 where the driver
                                does not say */
    int few_workgroups;      /* runs a few workgroups at a time (a CPU device): grids need not fill
                                many schedulers */
    int slow_unrolled_loops; /* the compiler takes much longer on unrolled loops and runs them no
                                faster (LLVM on a CPU device) */
    int subgroup_shuffle;    /* subgroup shuffles in compute shaders */
    int coopmat_quads;       /* 16x16 f32 accumulators of KHR cooperative matrices on subgroups of 32
                                hold the quad layout (NVIDIA's: element e of lane l at row
                                l / 4 + 8 (e / 4), column 8 ((e / 2) % 2) + 2 (l % 4) + e % 2): found
                                by a probe dispatch when the context is created, where NVIDIA's
                                layout is expected (the layout is implementation-defined) */
} hk_device_profile;

struct hk_context {
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    int owns_device; /* created instance and device (not borrowed) */
    struct VolkDeviceTable vk;
    uint32_t features; /* HK_FEATURE_* enabled on the device */
    int subgroup_arithmetic; /* subgroup arithmetic in compute shaders: every kernel needs it */
    /* what the device's limits fall short of (NULL: none): the storage buffers a kernel binds
     * (HK_MAX_BINDINGS) and the push-constant block (HK_PUSH_BYTES) */
    const char *short_limit;
    uint32_t short_limit_value, short_limit_need;
    hk_caps caps;
    hk_device_profile profile;
    VkPhysicalDeviceMemoryProperties memory;
    uint64_t max_allocation_size; /* maxMemoryAllocationSize (Vulkan 1.1) */
    uint64_t max_buffer_size;     /* maxBufferSize (Vulkan 1.3 / maintenance4); UINT64_MAX when unknown */
    uint8_t pipeline_cache_uuid[VK_UUID_SIZE];

    VkDebugUtilsMessengerEXT messenger;
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;
    _Atomic uint32_t validation_messages;
    int validation_active;
    hk_message_callback validation_callback;
    void *validation_user;
    _Atomic int device_lost;

    hk_mutex pipeline_lock, queue_lock, immediate_lock, objects_lock;
    int locks_ready;
    hk_object live; /* the list's head: live.next is the newest object */

    VkPipelineCache pipeline_cache;
    int pipeline_stats;        /* HK_PIPELINE_STATS=1 (owned devices): print each pipeline's statistics */
    int robustness_off;        /* VK_EXT_pipeline_robustness enabled: pipelines ask for storage-buffer
                                  loads without bounds checks (owned devices) */
    char *pipeline_cache_file; /* malloc'd; NULL when not persisted */
    VkDescriptorSetLayout set_layout[HK_MAX_BINDINGS + 1]; /* by binding count, lazily */
    VkPipelineLayout pipeline_layout[HK_MAX_BINDINGS + 1];
    hk_pipeline_entry *pipelines;
    uint32_t pipeline_count, pipeline_capacity;

    hk_stream *immediate; /* the stream behind a NULL-stream kernel call (immediate_lock) */

    /* The autotuner's state (src/tune: winners, last schedules; its own lock), attached at its
     * first use under attach_lock with the function that frees it; the context keeps only the
     * directory its cache file lives in (malloc'd, NULL: the default). */
    hk_mutex attach_lock;
    struct hk_tune_state *tune;
    void (*tune_destroy)(hk_context *context);
    char *tune_cache_dir;
};

struct hk_buffer {
    hk_object object;
    hk_context *context;
    VkBuffer buffer;
    VkDeviceMemory memory; /* VK_NULL_HANDLE for wrapped buffers */
    uint64_t size;
};

/* Puts a caller's buffer or stream on its context's list of live objects, or takes it off. */
void hk__object_track(hk_context *context, hk_object *object, hk_object_kind kind);
void hk__object_untrack(hk_context *context, hk_object *object);

/* ---- cache directories (pipeline.c; the pipeline cache and the tuner's winners) ---- */
/* The directory a cache lives in (malloc'ed): dir if set, else the environment variable env_var,
 * else $XDG_CACHE_HOME/hkernel, else $HOME/.cache/hkernel; NULL if none (or out of memory). */
char *hk__cache_dir(const char *dir, const char *env_var);
/* mkdir -p: 0 when dir is a directory afterwards, else the errno of the step that failed. */
int hk__make_dirs(const char *dir);

/* ---- reading a cache file (file.c) ---- */
typedef enum hk_file_status {
    HK_FILE_READ,        /* *data (malloc'ed, NUL past its *size bytes) holds the whole file */
    HK_FILE_ABSENT,      /* nothing at the path */
    HK_FILE_LINK,        /* a symbolic link: not followed */
    HK_FILE_NOT_REGULAR, /* a FIFO, a directory, a device, a socket */
    HK_FILE_TOO_LARGE,   /* more than max_bytes */
    HK_FILE_ERROR,       /* open, fstat or read failed, or out of memory: *err says why */
} hk_file_status;
/* Reads the regular file at path without blocking, following a link or reading past max_bytes;
 * the caller warns in its own words about anything but HK_FILE_READ and HK_FILE_ABSENT. */
hk_file_status hk__read_file(const char *path, uint64_t max_bytes, char **data, size_t *size, int *err);

/* ---- errors (error.c) ---- */
/* Sets this thread's message ("fn: ...") and returns status. */
hk_status hk__fail(hk_status status, const char *fn, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* HK_ERROR_INVALID_ARGUMENT with "fn: name=value exceeds the limit name <= limit (...)" when value > limit.
 * The shape limits of the public header (HK_*_MAX_*): they keep every shader loop under 65535
 * iterations per invocation, which lavapipe enforces by cutting loops short. */
hk_status hk__check_limit(const char *fn, const char *name, uint64_t value, uint64_t limit);
/* A tuning hook's value from the environment variable `name`: `def` when unset or empty, else a
 * decimal integer in lo..hi (a power of two where pow2); anything else fails the call with
 * HK_ERROR_INVALID_ARGUMENT naming the variable. */
hk_status hk__env_u32(const char *fn, const char *name, uint32_t def, uint32_t lo, uint32_t hi, int pow2,
                      uint32_t *out);
/* Whether the environment variable `name` is set and not empty (a hook that overrides a default) */
int hk__env_given(const char *name);
/* HK_ERROR_VULKAN with "fn: what failed (VK_ERROR_...)" (HK_ERROR_OUT_OF_MEMORY, HK_ERROR_DEVICE_LOST
 * for those results); hk_last_vk_result() then says result. */
hk_status hk__vk_fail(VkResult result, const char *fn, const char *what);
/* hk__vk_fail that also marks the context lost on VK_ERROR_DEVICE_LOST. */
hk_status hk__vk_fail_on(hk_context *context, VkResult result, const char *fn, const char *what);
/* Sets this thread's hk_last_vk_result() (after an hk__fail for a failed Vulkan call). */
void hk__set_vk_result(VkResult result);
/* HK_ERROR_DEVICE_LOST with a message if the context's device was lost, else HK_OK. */
hk_status hk__check_alive(const hk_context *context, const char *fn);
const char *hk__vk_result_name(VkResult result);

/* ---- memory (buffer.c) ---- */
/* Allocates and binds memory with the required properties (preferred first, then required). */
hk_status hk__alloc_buffer(hk_context *context, const char *fn, uint64_t size, VkBufferUsageFlags usage,
                           VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred, VkBuffer *out_buffer,
                           VkDeviceMemory *out_memory);

/* ---- pipelines (pipeline.c) ---- */
hk_status hk__pipeline_cache_open(hk_context *context, const char *dir, int disabled);
void hk__pipeline_cache_close(hk_context *context);
typedef struct hk_dispatch_desc hk_dispatch_desc;
hk_status hk__pipeline_get(hk_context *context, const char *fn, const hk_dispatch_desc *desc, VkPipeline *out_pipeline,
                           VkPipelineLayout *out_layout, VkDescriptorSetLayout *out_set_layout);
void hk__pipelines_destroy(hk_context *context);

/* ---- argument checks (stream.c) ---- */
/* A view the kernel reads or writes: bytes it touches, the alignment its offset needs. */
typedef struct hk_binding {
    hk_view view;
    uint64_t bytes;
    uint32_t align;
    int writes;
    int in_place_ok; /* an output may be exactly another binding's view (same offset and size) */
} hk_binding;

/* Checks the context, the stream (same context, may be NULL) and every binding (non-null buffer of
 * this context, offset aligned, offset + bytes inside the buffer, outputs not overlapping other
 * bindings). */
hk_status hk__check_bindings(hk_context *context, hk_stream *stream, const char *fn, const char *const *names,
                             const hk_binding *bindings, uint32_t count);
/* An optional view: {NULL, 0} is absent (*present = 0); a NULL buffer with an offset is refused,
 * since it is neither a view nor the absent one. */
hk_status hk__optional_view(const char *fn, const char *name, hk_view view, int *present);

/* The widest loads a view's offset allows, as shaders/gemm_q4k.glsl's hk_w_ld16 counts them (its
 * wload): 2 one 16-byte load, 1 32-bit words, 0 16-bit words. The descriptor base is aligned to a
 * power of two of at least 16, so the offset tells. */
static inline uint32_t hk__load_width(uint64_t offset) { return offset % 16 == 0 ? 2 : offset % 4 == 0 ? 1 : 0; }

/* ---- dispatch (stream.c): the one way every kernel is recorded ---- */
struct hk_dispatch_desc {
    int shader;
    /* 0, or the subgroup size the shader is written for: the pipeline then requires full
     * subgroups of exactly that size (needs HK_FEATURE_SUBGROUP_SIZE_CONTROL) */
    uint32_t subgroup_size;
    const uint32_t *spec; /* specialization constants 0..spec_count-1 */
    uint32_t spec_count;
    const hk_binding *bindings; /* bound at binding 0..count-1 */
    uint32_t binding_count;
    const void *params; /* kernel push constants, placed at HK_PUSH_PARAMS_OFFSET */
    uint32_t params_bytes;
    uint64_t groups; /* linear workgroup count, spread over x and y (shaders/common.glsl hk_group_id) */
};

/* The device lists 16x16x16 f16 x f16 -> f32 KHR cooperative matrices at subgroup scope
 * (context.c). */
int hk__coopmat_f16_listed(const hk_caps *caps);

/* Records one dispatch into stream (NULL: into the context's immediate stream, then submits and
 * waits). Arguments must have been checked. */
hk_status hk__dispatch(hk_context *context, hk_stream *stream, const char *fn, const hk_dispatch_desc *desc);

/* A NULL-stream call of several dispatches (passes that must go in one submit): takes the
 * context's immediate stream for this thread, to record into with hk__dispatch, then ends it:
 *     hk_stream *s = stream ? stream : hk__immediate_begin(context);
 *     st = hk__dispatch(context, s, fn, &pass1); ... pass2 ...
 *     if (!stream) st = hk__immediate_end(context, fn, st);
 * hk__immediate_end submits and waits if st is HK_OK, else drops what was recorded, and returns
 * the result. Between the two the immediate stream is this thread's alone (immediate_lock):
 * never use context->immediate without them. */
hk_stream *hk__immediate_begin(hk_context *context);
hk_status hk__immediate_end(hk_context *context, const char *fn, hk_status st);

/* Records a transfer copy of b[0] into b[1] (same byte count), hazard-tracked like a dispatch. */
hk_status hk__record_transfer_copy(hk_context *context, hk_stream *stream, const char *fn, const hk_binding b[2]);

hk_status hk__stream_create(hk_context *context, uint32_t max_timestamps, VkCommandBuffer wrapped, hk_stream **out);
/* A stream that records nothing: kernels dispatched into it only build their pipelines
 * (hk_context_prepare). Freed with hk_stream_destroy. */
hk_status hk__stream_create_prepare(hk_context *context, hk_stream **out);
/* Submits one command buffer to the context's queue under queue_lock. */
VkResult hk__queue_submit(hk_context *context, VkCommandBuffer cmd, VkFence fence);
/* Runs a one-off transfer recorded by record(cmd, user) and waits (upload/download/fill). */
hk_status hk__run_transfer(hk_context *context, const char *fn, void (*record)(hk_context *, VkCommandBuffer, void *),
                           void *user);

#endif
