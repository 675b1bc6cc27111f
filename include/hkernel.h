/* hkernel.h — libhkernel: Vulkan compute kernels for quantized LLM inference.
 *
 * One flat C API. A context owns (or borrows) a Vulkan device, its compute queue and a pipeline
 * cache. Buffers hold tensors; a view is (buffer, byte offset), so many tensors can share one
 * allocation. Kernels record into a stream; a NULL stream runs the kernel at once (record, submit,
 * wait). Every function returns an hk_status; on failure hk_last_error() explains it in words,
 * hk_last_vk_result() gives the VkResult where a Vulkan call failed, and nothing was recorded or
 * written.
 *
 * Including: this header includes <vulkan/vulkan.h>. An engine that loads Vulkan through volk (or
 * any loader of its own) defines VK_NO_PROTOTYPES for all its sources (volk's own advice), then
 * includes volk.h and hkernel.h in either order; or it includes volk.h first. Without
 * VK_NO_PROTOTYPES, hkernel.h before volk.h stops at volk's "#error ... define VK_NO_PROTOTYPES".
 * The library carries its own copy of volk, compiled with hidden symbols: the shared library and
 * the static archive export only hk_ symbols, so it never binds to (or collides with) the
 * engine's volk or libvulkan.
 *
 * Threading:
 *  - hk_last_error() and hk_last_vk_result() are per thread.
 *  - One context may be used from several threads at once: each thread records into its own
 *    streams (a stream is used by one thread at a time), and buffers may be shared between them.
 *    The pipeline table and pipeline cache, the queue (submits of owned streams, NULL-stream
 *    calls, hk_buffer_upload/download/fill) and the validation counter are locked inside the
 *    library. Each owned stream has its own command pool and descriptor pools.
 *  - A borrowed queue is the engine's too: the library locks its own submits, but the engine must
 *    not submit to that queue from another thread while an hk_ call may submit to it (owned
 *    streams' hk_stream_submit, NULL-stream calls, hk_buffer_upload/download/fill).
 *  - Creating and destroying contexts loads Vulkan through the library's volk, whose loader entry
 *    points are process-wide: create (and destroy) contexts from one thread at a time, and not
 *    while another thread uses a context.
 *
 * ABI: the soname changes with every 0.x minor version (libhkernel.so.0.3), and from 1.0 with the
 * major version. Structs the caller passes in carry their own size (struct_size, set by their
 * _init macro from the caller's sizeof), and hk_context_caps passes the caller's sizeof too, so
 * fields can be appended without breaking programs built against an older header. hk_view, the
 * enums and the kernel shape structs (hk_moe_shape, hk_kv_layout, hk_sdpa_desc, hk_rope_desc) are
 * fixed within a soname.
 *
 * Weights are GGUF blocks exactly as stored in a .gguf file (no repacking):
 *   Q8_0  34 B / 32 values    Q4_K 144 B / 256 values    Q5_K 176 B / 256 values
 *   Q6_K 210 B / 256 values
 * Activations Q8_1 are 36 B / 32 values (f16 d, f16 s = d*sum(qs), i8 qs[32]); the kernels read d
 * and qs only (s is carried for other consumers, never trusted).
 */
#ifndef HKERNEL_H
#define HKERNEL_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ---------------------------------------------------------------------------------- */

/* The version of this header (CMakeLists.txt reads it from here). */
#define HK_VERSION_MAJOR 0
#define HK_VERSION_MINOR 3
#define HK_VERSION_PATCH 0
#define HK_MAKE_VERSION(major, minor, patch) \
    ((((uint32_t)(major)) << 22) | (((uint32_t)(minor)) << 12) | ((uint32_t)(patch)))
#define HK_VERSION HK_MAKE_VERSION(HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH)
#define HK_VERSION_GET_MAJOR(v) ((uint32_t)(v) >> 22)
#define HK_VERSION_GET_MINOR(v) (((uint32_t)(v) >> 12) & 0x3FFu)
#define HK_VERSION_GET_PATCH(v) ((uint32_t)(v) & 0xFFFu)

/* Shared library (default): HK_API exports from the library and imports into its users. A program
 * that links the static archive on Windows defines HK_STATIC (the CMake target hkernel_static
 * does it for its users); elsewhere HK_STATIC changes nothing. */
#if defined(_WIN32)
#if defined(HK_BUILDING_LIBRARY)
#define HK_API __declspec(dllexport)
#elif defined(HK_STATIC)
#define HK_API
#else
#define HK_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define HK_API __attribute__((visibility("default")))
#else
#define HK_API
#endif

/* The version of the library loaded at run time, as HK_MAKE_VERSION packs it. A program built
 * against this header runs on a library of the same major and (while major is 0) minor version,
 * which the soname guarantees; compare with HK_VERSION to say so in words. */
HK_API uint32_t hk_version(void);

/* ---- status ----------------------------------------------------------------------------------- */

typedef enum hk_status {
    HK_OK = 0,
    HK_ERROR_INVALID_ARGUMENT = 1, /* null handle, bad shape, view past a buffer's end, ... */
    HK_ERROR_UNSUPPORTED = 2,      /* the device (or the features enabled on it) lacks what this call needs */
    HK_ERROR_OUT_OF_MEMORY = 3,    /* host or device allocation failed */
    HK_ERROR_VULKAN = 4,           /* a Vulkan call failed: hk_last_vk_result() is its VkResult, the message
                                    * names the call */
    HK_ERROR_NOT_FOUND = 5,        /* no Vulkan loader, no Vulkan driver or device, or the device asked
                                    * for (index or name) does not exist */
    HK_ERROR_STATE = 6,            /* call not valid in the object's current state */
    HK_ERROR_DEVICE_LOST = 7       /* a Vulkan call returned VK_ERROR_DEVICE_LOST: the context is unusable
                                    * (hk_context_device_lost) and refuses every later call that needs the
                                    * device with this status; destroy it (and its buffers and streams) */
} hk_status;

/* The message for the last failed call on this thread ("" if none). Valid until this thread's next
 * failing hk_ call. */
HK_API const char *hk_last_error(void);

/* The VkResult of the Vulkan call that made this thread's last failed hk_ call fail; VK_SUCCESS if
 * no call failed yet or the last failure was not a Vulkan call's (a bad argument, ...). Per thread,
 * like hk_last_error. VK_ERROR_OUT_OF_*_MEMORY comes with HK_ERROR_OUT_OF_MEMORY,
 * VK_ERROR_DEVICE_LOST with HK_ERROR_DEVICE_LOST, every other failure with HK_ERROR_VULKAN (or
 * HK_ERROR_NOT_FOUND for a missing driver). */
HK_API VkResult hk_last_vk_result(void);

/* A fixed name for a status code ("HK_ERROR_INVALID_ARGUMENT", ...). */
HK_API const char *hk_status_name(hk_status status);

/* ---- types ------------------------------------------------------------------------------------ */

typedef enum hk_type {
    HK_TYPE_F32 = 0,
    HK_TYPE_Q8_0 = 1,
    HK_TYPE_Q4_K = 2,
    HK_TYPE_Q6_K = 3,
    HK_TYPE_Q8_1 = 4,
    HK_TYPE_F16 = 5,
    HK_TYPE_Q5_K = 6
} hk_type;

/* Type traits, from one table (the references use the same). Each returns 0 (names: "?") for an
 * unknown type. */
/* Values per block of a type (1 for F32 and F16). */
HK_API uint32_t hk_type_block_values(hk_type type);
/* Bytes per block of a type (4 for F32, 2 for F16). */
HK_API uint32_t hk_type_block_bytes(hk_type type);
/* The byte alignment of the type's own storage: 2 for GGUF weight blocks and F16, 4 for F32 and
 * Q8_1. A kernel may ask more of a view (its documentation says so). */
HK_API uint32_t hk_type_alignment(hk_type type);
/* Bytes of `values` values of a type: 0 if values is not a multiple of the block (or overflows). */
HK_API uint64_t hk_type_bytes(hk_type type, uint64_t values);
/* A fixed name ("q4_k", ...). */
HK_API const char *hk_type_name(hk_type type);
/* The GGML_TYPE_* id a .gguf file uses for the type (F32 0, F16 1, Q8_0 8, Q8_1 9, Q4_K 12,
 * Q5_K 13, Q6_K 14); UINT32_MAX for an unknown type. */
HK_API uint32_t hk_type_to_ggml(hk_type type);
/* The hk_type of a GGML_TYPE_* id; HK_ERROR_UNSUPPORTED for ids the library has no kernels for. */
HK_API hk_status hk_type_from_ggml(uint32_t ggml_type, hk_type *out_type);

/* ---- context ---------------------------------------------------------------------------------- */

typedef struct hk_context hk_context;

/* Device features the kernels use. Each bit stands for the Vulkan feature members named here; a
 * bit counts only when every member it names is enabled (hk_borrowed_device.enabled_features,
 * hk_features_enable, hk_caps.features). The members live in the Vulkan 1.1/1.2/1.3 feature
 * structs or, equally, in the older per-feature structs named in brackets:
 *
 * HK_FEATURE_STORAGE_16BIT: VkPhysicalDeviceVulkan11Features.storageBuffer16BitAccess
 *     [VkPhysicalDevice16BitStorageFeatures]. Required: every kernel reads GGUF blocks through
 *     16-bit loads.
 * HK_FEATURE_FLOAT16: VkPhysicalDeviceVulkan12Features.shaderFloat16
 *     [VkPhysicalDeviceShaderFloat16Int8Features]. f16 arithmetic (attention and GEMM on f16).
 * HK_FEATURE_INT8: VkPhysicalDeviceVulkan12Features.shaderInt8
 *     [VkPhysicalDeviceShaderFloat16Int8Features]. int8 arithmetic (int8 cooperative matrices).
 * HK_FEATURE_INTEGER_DOT: VkPhysicalDeviceVulkan13Features.shaderIntegerDotProduct
 *     [VkPhysicalDeviceShaderIntegerDotProductFeatures]. Packed int8 dot products in the int8
 *     matvecs; without it they run a plain-arithmetic twin.
 * HK_FEATURE_SUBGROUP_SIZE_CONTROL: VkPhysicalDeviceVulkan13Features.subgroupSizeControl AND
 *     .computeFullSubgroups [VkPhysicalDeviceSubgroupSizeControlFeatures], and the device's
 *     VkPhysicalDeviceSubgroupSizeControlProperties.requiredSubgroupSizeStages must include
 *     VK_SHADER_STAGE_COMPUTE_BIT (a context drops the bit where it does not). The fast matvecs,
 *     the int8 and MoE matvecs and the cooperative-matrix kernels need full subgroups of one size.
 * HK_FEATURE_COOPMAT_KHR: VkPhysicalDeviceCooperativeMatrixFeaturesKHR.cooperativeMatrix with the
 *     device extension "VK_KHR_cooperative_matrix", AND VkPhysicalDeviceVulkan12Features
 *     .vulkanMemoryModel [VkPhysicalDeviceVulkanMemoryModelFeatures]: the cooperative-matrix
 *     shaders are written against the Vulkan memory model. The f16 ones also need
 *     HK_FEATURE_FLOAT16, the int8 ones HK_FEATURE_INT8; all need SUBGROUP_SIZE_CONTROL.
 * HK_FEATURE_STORAGE_8BIT, HK_FEATURE_COOPMAT_NV, HK_FEATURE_MAINTENANCE4: no kernel uses them;
 *     kept so that values stay stable, ignored wherever they are passed, never reported.
 *
 * Every kernel also needs subgroup arithmetic in compute shaders (a property every Vulkan 1.1
 * GPU driver reports: VkPhysicalDeviceVulkan11Properties.subgroupSupportedOperations has
 * ARITHMETIC and subgroupSupportedStages COMPUTE); a device without it is refused. */
enum {
    HK_FEATURE_STORAGE_16BIT = 1u << 0,
    HK_FEATURE_STORAGE_8BIT = 1u << 1,
    HK_FEATURE_FLOAT16 = 1u << 2,
    HK_FEATURE_INT8 = 1u << 3,
    HK_FEATURE_INTEGER_DOT = 1u << 4,
    HK_FEATURE_COOPMAT_KHR = 1u << 5,
    HK_FEATURE_COOPMAT_NV = 1u << 6,
    HK_FEATURE_MAINTENANCE4 = 1u << 7,
    HK_FEATURE_SUBGROUP_SIZE_CONTROL = 1u << 8
};
/* Every bit a kernel uses: what an owned context enables where the device has it. */
#define HK_FEATURES_USED                                                                                    \
    (HK_FEATURE_STORAGE_16BIT | HK_FEATURE_FLOAT16 | HK_FEATURE_INT8 | HK_FEATURE_INTEGER_DOT |            \
     HK_FEATURE_SUBGROUP_SIZE_CONTROL | HK_FEATURE_COOPMAT_KHR)

/* For an engine that creates its own device, VMA-style: fills the engine's VkDeviceCreateInfo
 * feature chain with what the kernels use.
 *   supported: a VkPhysicalDeviceFeatures2 chain the engine filled with
 *       vkGetPhysicalDeviceFeatures2; the library looks in it for VkPhysicalDeviceVulkan11Features,
 *       VkPhysicalDeviceVulkan12Features, VkPhysicalDeviceVulkan13Features (chain it on Vulkan 1.3
 *       devices only) and VkPhysicalDeviceCooperativeMatrixFeaturesKHR (sType 1000506000; chain it
 *       only where the device lists VK_KHR_cooperative_matrix), or the older per-feature structs
 *       named above. A struct that is not in the chain counts as "not supported".
 *   wanted: the HK_FEATURE_* bits to consider (HK_FEATURES_USED for all of them).
 *   enable: the VkPhysicalDeviceFeatures2 chain the engine will pass as VkDeviceCreateInfo.pNext.
 *       For each bit that is wanted and supported (all its members VK_TRUE in `supported`), every
 *       member the bit names is set to VK_TRUE in the struct of `enable` that holds it (found by
 *       sType, Vulkan 1.x struct or per-feature struct, whichever the chain has). Nothing is ever
 *       set to VK_FALSE, nor any other member touched.
 *   *out_features: the bits now enabled: pass them as hk_borrowed_device.enabled_features. Where
 *       they include HK_FEATURE_COOPMAT_KHR, the engine also enables the device extension
 *       "VK_KHR_cooperative_matrix".
 * HK_ERROR_INVALID_ARGUMENT (nothing written) for a NULL pointer, chains whose first struct is not
 * VkPhysicalDeviceFeatures2, or a supported member whose struct `enable` lacks (the message names
 * the struct to chain), and HK_ERROR_UNSUPPORTED where `supported` lacks storageBuffer16BitAccess
 * and it is wanted (no kernel can run). Makes no Vulkan call. */
HK_API hk_status hk_features_enable(const VkPhysicalDeviceFeatures2 *supported, uint32_t wanted,
                                    VkPhysicalDeviceFeatures2 *enable, uint32_t *out_features);

/* Validation-layer messages, for an engine that routes them with its own (hk_context_desc).
 * severity: HK_MESSAGE_WARNING or HK_MESSAGE_ERROR; message: the layer's text, valid during the
 * call. Called from whichever thread made the Vulkan call the layer reports (several at once when
 * several threads record), so it must be thread-safe. */
enum { HK_MESSAGE_WARNING = 1, HK_MESSAGE_ERROR = 2 };
typedef void (*hk_message_callback)(void *user, int severity, const char *message);

typedef struct hk_context_desc {
    /* sizeof(hk_context_desc) as the caller was compiled: set by hk_context_desc_init. */
    uint32_t struct_size;
    /* Device choice: device_index >= 0 picks that physical device; else device_name (a substring,
     * case-insensitive) picks the first match; else the environment variable HK_DEVICE: a string
     * of decimal digits only is an index, anything else a name substring; else the first discrete
     * GPU, then integrated, then virtual, then CPU. An index past the last device (whatever its
     * size, also past INT_MAX) or a name that matches nothing is HK_ERROR_NOT_FOUND. */
    int device_index;
    const char *device_name;
    /* Enable VK_LAYER_KHRONOS_validation if installed. Every message it reports is counted
     * (hk_context_validation_messages) and given to validation_callback, or printed to stderr
     * ("hkernel: validation error: ...") when that is NULL. If the layer is missing the context is
     * still created and hk_context_validation_active() says 0. */
    int enable_validation;
    /* Pipeline cache: directory for the persisted cache, NULL for the default
     * ($HK_PIPELINE_CACHE_DIR, else $XDG_CACHE_HOME/hkernel, else $HOME/.cache/hkernel), created
     * if missing. The file, hkernel-<major>.<minor>.<patch>-<device uuid, 32 hex digits>-<driver
     * version, 8 hex digits>.bin, is read at context creation and written (a new file created
     * exclusively, then renamed over it) when the context is destroyed. The cache is a
     * convenience: any problem with it (a path the system refuses, a directory that cannot be
     * created or written, anything but a regular file at the file's path (a FIFO, a directory, a
     * device, a symbolic link, which is never followed), a file over 256 MiB
     * (HK_PIPELINE_CACHE_MAX_BYTES) or one written for another device or driver) is a warning on
     * stderr ("hkernel: pipeline cache: ...") and the cache stays in memory; it never fails or
     * blocks context creation. disable_pipeline_cache != 0 keeps the cache in memory only. */
    const char *pipeline_cache_dir;
    int disable_pipeline_cache;
    /* HK_FEATURE_* bits the kernels must not use even where the device has them: selects the
     * portable twins (for testing them, or to rule a driver feature out). */
    uint32_t disable_features;
    /* Where validation messages go (enable_validation): NULL for stderr. */
    hk_message_callback validation_callback;
    void *validation_user;
    /* Autotuner winner cache (hk_tune): directory of the file tune.tsv, NULL for the default
     * ($HK_TUNE_CACHE_DIR, else $XDG_CACHE_HOME/hkernel, else $HOME/.cache/hkernel; borrowed
     * contexts always take the default). Read at the first call that needs it; see hk_tune.
     * Anything but a regular file at tune.tsv (a FIFO, a directory, a device, a symbolic link,
     * which is never followed) or a file over HK_TUNE_CACHE_MAX_BYTES is a warning on stderr
     * ("hkernel: tune cache: ..."), neither read nor replaced: the winners stay in the context's
     * memory. */
    const char *tune_cache_dir;
} hk_context_desc;

/* Fills desc with the defaults: struct_size = desc_size, device_index = -1, everything else
 * 0/NULL. Call it through the macro, which passes the caller's sizeof. */
HK_API void hk_context_desc_init_sized(hk_context_desc *desc, size_t desc_size);
#define hk_context_desc_init(desc) hk_context_desc_init_sized((desc), sizeof *(desc))

/* Creates a context: loads Vulkan, creates an instance and a device with one compute queue,
 * enabling exactly the features of HK_FEATURES_USED that the device has (and the extension
 * VK_KHR_cooperative_matrix where HK_FEATURE_COOPMAT_KHR is among them), less
 * desc->disable_features. Where the device has VK_EXT_pipeline_robustness it is enabled too, and
 * every pipeline says its storage-buffer loads need no bounds checks (the kernels keep their reads
 * inside their views themselves; HK_PIPELINE_ROBUSTNESS, docs/tuning.md, keeps the driver's
 * default). A borrowed device always runs the driver's default. desc may be NULL (defaults); else
 * desc->struct_size must be set (hk_context_desc_init): 0 or a size smaller
 * than any version's is HK_ERROR_INVALID_ARGUMENT, and bytes past this version's fields must be
 * zero. HK_ERROR_NOT_FOUND when there is no Vulkan
 * loader, no Vulkan driver (the loader finds no ICD: install one, e.g. mesa-vulkan-drivers for
 * lavapipe on the CPU), no device, or not the device asked for. Pipelines are built on first use;
 * hk_context_prepare builds them ahead of time. */
HK_API hk_status hk_context_create(const hk_context_desc *desc, hk_context **out_context);

typedef struct hk_borrowed_device {
    /* sizeof(hk_borrowed_device) as the caller was compiled: set by hk_borrowed_device_init. */
    uint32_t struct_size;
    PFN_vkGetInstanceProcAddr get_instance_proc_addr; /* NULL: the system loader's */
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    VkQueue queue;                 /* a queue with compute support */
    uint32_t queue_family_index;   /* the queue's family: must exist and have VK_QUEUE_COMPUTE_BIT */
    /* HK_FEATURE_* bits whose members the device was created with (hk_features_enable returns
     * them). Claiming a bit whose members the device does not support is refused; a bit whose
     * members were not really enabled is the engine's error (the validation layer reports it when
     * a kernel runs). */
    uint32_t enabled_features;
    const char *pipeline_cache_dir;
    int disable_pipeline_cache;
} hk_borrowed_device;

/* Fills b with zeros and struct_size = b_size; call it through the macro. */
HK_API void hk_borrowed_device_init_sized(hk_borrowed_device *b, size_t b_size);
#define hk_borrowed_device_init(b) hk_borrowed_device_init_sized((b), sizeof *(b))

/* Creates a context on an engine's existing device. The engine keeps ownership: destroying the
 * context never destroys the instance, device or queue. borrowed->struct_size must be set
 * (hk_borrowed_device_init). A device whose enabled_features lack HK_FEATURE_STORAGE_16BIT is
 * refused (HK_ERROR_UNSUPPORTED), as is one without subgroup arithmetic. Validation messages of a
 * borrowed device go to the engine's own messenger (hk_context_validation_active says 0). */
HK_API hk_status hk_context_create_borrowed(const hk_borrowed_device *borrowed, hk_context **out_context);

/* Waits for the device to go idle (owned devices) and frees everything the context created.
 * Buffers and streams should be destroyed first: any still alive are destroyed here (streams,
 * then buffers; a wrapped VkBuffer or command buffer stays the engine's), their handles become
 * invalid (neither used nor destroyed again), and where validation is active each is reported as
 * an error message by kind ("an hk_buffer of N bytes ... is still alive"). No submitted work may
 * still use them. NULL is ignored. */
HK_API void hk_context_destroy(hk_context *context);

/* The Vulkan objects behind a context (owned or borrowed), for an engine that records its own work
 * on the same device. Any out pointer may be NULL. The context keeps ownership. */
HK_API hk_status hk_context_vulkan(const hk_context *context, VkInstance *instance, VkPhysicalDevice *physical_device,
                                   VkDevice *device, VkQueue *queue, uint32_t *queue_family_index);

/* Number of validation-layer messages seen since the context was created (0 when inactive). */
HK_API uint32_t hk_context_validation_messages(const hk_context *context);
/* 1 if the validation layer is active on this context. */
HK_API int hk_context_validation_active(const hk_context *context);

/* 1 once a Vulkan call of this context returned VK_ERROR_DEVICE_LOST (0 for NULL). From then on
 * every call that needs the device fails with HK_ERROR_DEVICE_LOST. */
HK_API int hk_context_device_lost(const hk_context *context);

/* Builds, ahead of time, the pipelines the named kernels need for typical model shapes (decode;
 * prefill of 64 and 512 tokens at k 4096 and 14336 and hk_mmq's 8-token kernel, on aligned
 * views as GGUF tensors are; MoE prefill at Qwen3-30B-A3B's expert shapes; the KV types and head
 * sizes 64/128/256, GQA groups of 2; the matvec row classes; every weight type), so that a first
 * recording does not compile them mid-decode. Kernels whose variants follow the exact shape
 * (head size, GQA group, tile) may still build one for a shape outside that list: for exactly the
 * shapes an engine runs, record its steps once into a prepare stream (hk_stream_create_prepare)
 * instead. kernels: NULL for every kernel, or a comma-separated list of public function names
 * ("hk_matvec_int8,hk_rmsnorm"; hk_matvec, hk_matvec_int8, hk_matvec_int8_tokens, hk_matvec_int8_add,
 * hk_matvec_int8_add_norm, hk_matvec_int8_glu, hk_matvec_int8_glu_q8_1, hk_matvec_int8_multi,
 * hk_matvec_int8_qkv, hk_matvec_int8_f32x,
 * hk_moe_matvec, hk_moe_matvec_int8, hk_moe_matvec_int8_glu, hk_moe_matvec_int8_glu_q8_1 (with
 * hk_moe_matvec_int8_glu_q8_1_ranked),
 * hk_moe_matvec_int8_combine,
 * hk_moe_route, hk_moe_combine, hk_get_rows, hk_gemv_f32 (with hk_gemv_f32_tokens), hk_rmsnorm,
 * hk_rmsnorm_q8_1, hk_quantize_q8_1, hk_copy, hk_sdpa_blk, hk_rope, hk_mmq, hk_moe_expert_rows,
 * hk_mmq_id, hk_gemm_f16, hk_add (with hk_add_scaled), hk_swiglu, hk_argmax, hk_softmax; a name that
 * is none of them is
 * HK_ERROR_INVALID_ARGUMENT listing them). Kernels the device cannot run are skipped. Records
 * nothing and allocates no device memory; safe to call while other threads record. Built
 * pipelines also land in the pipeline cache, so the next process on this device builds them
 * faster. */
HK_API hk_status hk_context_prepare(hk_context *context, const char *kernels);

/* Number of pipelines the context has built so far (hk_context_prepare, or first use). */
HK_API uint32_t hk_context_pipeline_count(const hk_context *context);

/* ---- capabilities ----------------------------------------------------------------------------- */

/* Component types in cooperative-matrix properties, numbered as VkComponentTypeKHR. */
typedef struct hk_coopmat_props {
    uint32_t m, n, k;
    uint32_t a_type, b_type, c_type, result_type; /* VkComponentTypeKHR values */
    uint32_t saturating;
    uint32_t scope;                               /* VkScopeKHR value (3 = subgroup) */
} hk_coopmat_props;

#define HK_MAX_COOPMAT_PROPS 32

/* What the context's device can do with the features the context enabled. Every context has
 * 16-bit storage and subgroup arithmetic in compute shaders (a device without them is refused).
 * Fields may be appended in later versions (hk_context_caps writes only the caller's sizeof). */
typedef struct hk_caps {
    char device_name[256];
    uint32_t vendor_id, device_id;
    VkPhysicalDeviceType device_type;
    uint32_t api_version, driver_version;
    uint8_t device_uuid[16];
    uint32_t subgroup_size;            /* default subgroup size */
    uint32_t subgroup_size_min, subgroup_size_max;
    int subgroup_size_control;         /* HK_FEATURE_SUBGROUP_SIZE_CONTROL */
    uint32_t shared_memory_bytes;      /* maxComputeSharedMemorySize */
    uint32_t max_workgroup_size;       /* maxComputeWorkGroupInvocations */
    uint64_t max_storage_buffer_range;
    uint64_t min_storage_offset_alignment;
    int float16, int8;                 /* HK_FEATURE_FLOAT16, HK_FEATURE_INT8 */
    int integer_dot;                   /* shaderIntegerDotProduct enabled */
    int integer_dot_accelerated;       /* 4x8-bit packed signed dot is hardware accelerated */
    int coopmat_khr;                   /* HK_FEATURE_COOPMAT_KHR */
    uint32_t coopmat_khr_count;        /* entries of coopmat_khr_props */
    hk_coopmat_props coopmat_khr_props[HK_MAX_COOPMAT_PROPS];
    int timestamps;                    /* compute queue supports timestamps */
    float timestamp_period_ns;
    uint32_t features;                 /* the HK_FEATURE_* bits the kernels use on this context */
} hk_caps;

/* Copies the capabilities probed when the context was created: the first caps_size bytes of this
 * version's hk_caps (a caller built against an older header gets the fields it knows). Call it
 * through the macro, which passes the caller's sizeof. */
HK_API hk_status hk_context_caps_sized(const hk_context *context, hk_caps *out_caps, size_t caps_size);
#define hk_context_caps(context, out_caps) hk_context_caps_sized((context), (out_caps), sizeof *(out_caps))

/* Lists physical devices (names and types) without creating a context: writes up to max entries,
 * and the total count to *out_count. names may be NULL to query the count only. No Vulkan driver
 * or no device: HK_ERROR_NOT_FOUND with *out_count = 0. */
HK_API hk_status hk_enumerate_devices(char (*names)[256], VkPhysicalDeviceType *types, uint32_t max,
                                      uint32_t *out_count);

/* ---- buffers ----------------------------------------------------------------------------------
 * One buffer plus views: every hk_buffer_create is its own VkDeviceMemory allocation (drivers
 * limit their count: maxMemoryAllocationCount is 4096 on many), so an engine puts many tensors in
 * one buffer (a model's weights, the activations of a step) and passes views (buffer, offset) of
 * it; or it allocates its own memory and wraps its VkBuffers (hk_buffer_wrap). Kernels bind each
 * view's own bytes only, so tensors sharing a buffer stay independent for the barrier tracking and
 * for synchronization validation.
 */

typedef struct hk_buffer hk_buffer;

/* A tensor's place: a buffer and a byte offset into it. Where a view is optional, {NULL, 0} means
 * none; a NULL buffer with any other offset is refused (HK_ERROR_INVALID_ARGUMENT). */
typedef struct hk_view {
    hk_buffer *buffer;
    uint64_t offset;
} hk_view;

/* Creates a device-local storage buffer of size bytes (contents undefined), one allocation of its
 * own. A size the device can never hold is refused with HK_ERROR_OUT_OF_MEMORY and a message
 * giving the limit: more than the device-local heap of the memory type the buffer would use, more
 * than maxMemoryAllocationSize (one allocation), or more than maxBufferSize (Vulkan 1.3 devices).
 * A kernel binds at most caps.max_storage_buffer_range bytes of one view (below 4 GiB on every
 * device). */
HK_API hk_status hk_buffer_create(hk_context *context, uint64_t size, hk_buffer **out_buffer);

/* Wraps an engine's VkBuffer (created with STORAGE_BUFFER usage, and TRANSFER_SRC/DST for
 * uploads, downloads and copies) of size bytes. The engine keeps ownership of buffer and memory.
 * Two VkBuffers bound to the same memory are different buffers to the barrier tracking (see
 * streams): wrap one buffer over the memory, or put hk_stream_barrier between their uses. */
HK_API hk_status hk_buffer_wrap(hk_context *context, VkBuffer buffer, uint64_t size, hk_buffer **out_buffer);

/* Frees a buffer created by hk_buffer_create (or forgets a wrapped one). NULL is ignored. The
 * caller must make sure no submitted work still uses it. */
HK_API void hk_buffer_destroy(hk_buffer *buffer);

/* Size of a buffer in bytes (0 for NULL). */
HK_API uint64_t hk_buffer_size(const hk_buffer *buffer);

/* The VkBuffer behind a buffer, for an engine that records its own work on it. */
HK_API VkBuffer hk_buffer_handle(const hk_buffer *buffer);

/* Copies size bytes from host memory into the buffer at offset and waits: synchronous, through a
 * staging allocation made for the call (64 MiB chunks), one submit per chunk. For loading weights
 * once. Uploads inside a step go into a stream (hk_stream_upload). */
HK_API hk_status hk_buffer_upload(hk_buffer *buffer, uint64_t offset, const void *data, uint64_t size);
/* Copies size bytes from the buffer at offset into host memory; waits (as hk_buffer_upload). */
HK_API hk_status hk_buffer_download(hk_buffer *buffer, uint64_t offset, void *data, uint64_t size);
/* Fills size bytes at offset (both multiples of 4) with a repeated 32-bit word; waits. */
HK_API hk_status hk_buffer_fill(hk_buffer *buffer, uint64_t offset, uint64_t size, uint32_t word);

/* ---- streams ----------------------------------------------------------------------------------
 * Barriers: a stream tracks the byte ranges each hk_ call recorded into it reads and writes, per
 * VkBuffer, since its last barrier; a call that reads bytes written since then, or writes bytes
 * read or written since then, gets a barrier first (compute/transfer stages only), and nothing
 * else does, so independent kernels overlap. What the tracker does not see:
 *  - the engine's own commands recorded into a wrapped command buffer between our calls;
 *  - other streams, other command buffers, other queues;
 *  - two VkBuffers bound to the same (or overlapping) memory: they are different buffers to it.
 * The first command recorded after hk_stream_create/submit/reset or hk_stream_wrap waits for all
 * work recorded or submitted before it (a full barrier). Between our calls, the engine's own work
 * that touches our tensors (a copy into an input, a write to aliasing memory) needs
 * hk_stream_barrier after it (or the engine's own barrier, and hk_stream_barrier to tell the
 * tracker); work the engine records after our calls must itself wait for our compute-shader
 * writes (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT) and transfer writes.
 */

typedef struct hk_stream hk_stream;

/* Creates a stream: a command buffer (from a command pool of its own) that kernels record into, in
 * order. max_timestamps > 0 lets hk_stream_timestamp record that many GPU timestamps per submit
 * (needs caps.timestamps). */
HK_API hk_status hk_stream_create(hk_context *context, uint32_t max_timestamps, hk_stream **out_stream);

/* Creates a stream that records into an engine's command buffer (in the recording state, outside a
 * render pass; allocated from a pool that only the thread recording this stream uses meanwhile).
 * The engine submits it; hk_stream_submit is refused. The library cannot see when that work
 * completes, so the engine tells it: hk_stream_reset once the submit has completed (before
 * recording the command buffer again), which delivers hk_stream_download results and frees the
 * stream's descriptor sets and staging memory. */
HK_API hk_status hk_stream_wrap(hk_context *context, VkCommandBuffer command_buffer, hk_stream **out_stream);
/* hk_stream_wrap with max_timestamps GPU timestamps per recording (needs caps.timestamps): the
 * first hk_stream_timestamp after the wrap (or a reset) records a reset of the stream's query pool
 * into the command buffer; hk_stream_elapsed_ms reads them once the engine's submit completed. */
HK_API hk_status hk_stream_wrap_timed(hk_context *context, VkCommandBuffer command_buffer, uint32_t max_timestamps,
                                      hk_stream **out_stream);

/* Creates a prepare stream: a kernel recorded into it checks its arguments and builds (and
 * caches) the pipelines that exact call needs, then returns HK_OK having recorded nothing. Record
 * an engine's decode and prefill steps into one at load time, on the real buffers or on any
 * buffers of the right sizes (no memory is touched), and no later recording of those shapes
 * builds a pipeline. hk_stream_submit and hk_stream_reset do nothing on it, timestamps are
 * accepted and do nothing, transfers (hk_stream_upload/download) are refused. */
HK_API hk_status hk_stream_create_prepare(hk_context *context, hk_stream **out_stream);

/* Frees a stream. NULL is ignored. An owned stream's submits have all completed (hk_stream_submit
 * waits); what was recorded but not submitted is dropped. A wrapped stream is freed at once, its
 * descriptor sets and staging memory with it, and pending downloads are dropped: the engine's
 * submit of its command buffer must have completed (or never happen). */
HK_API void hk_stream_destroy(hk_stream *stream);

/* Submits everything recorded since the last submit and waits for it; the stream is then empty
 * and ready to record again, and hk_stream_download destinations hold their bytes. Submitting an
 * empty stream is allowed. */
HK_API hk_status hk_stream_submit(hk_stream *stream);

/* Forgets what was recorded. Owned streams: resets the command buffer (nothing recorded since the
 * last submit runs; pending downloads are dropped). Wrapped streams: the engine's submit of the
 * command buffer has completed (or will never happen): delivers pending downloads (their bytes
 * are whatever the completed work wrote), frees descriptor sets and staging memory, forgets the
 * tracked ranges and timestamps; the next command starts with a full barrier. */
HK_API hk_status hk_stream_reset(hk_stream *stream);

/* Number of kernels (and copies, uploads, downloads) recorded since the last submit or reset. */
HK_API uint32_t hk_stream_kernel_count(const hk_stream *stream);
/* Number of pipeline barriers the stream recorded since the last submit or reset: the one before
 * its first command, one before each command that depends on an earlier one since the last
 * barrier, hk_stream_barrier's, and one before the host reads downloads. 0 for NULL and for
 * prepare streams. */
HK_API uint32_t hk_stream_barrier_count(const hk_stream *stream);

/* Records a full barrier: every command recorded before it (ours and, in a wrapped command
 * buffer, the engine's: any stage, any memory write) completes and its writes are visible before
 * any later command of the stream starts; the tracker forgets the ranges seen so far. For engine
 * work recorded between our calls, and for VkBuffers that alias memory. */
HK_API hk_status hk_stream_barrier(hk_stream *stream);

/* Records a GPU timestamp, taken when everything recorded before it has finished; *out_index
 * (may be NULL) is its number in this submit (or recording, for a wrapped stream), counting
 * from 0. */
HK_API hk_status hk_stream_timestamp(hk_stream *stream, uint32_t *out_index);

/* Milliseconds between timestamps `from` and `to`: of the last submit (owned streams), or of the
 * current recording once the engine's submit completed (wrapped streams; HK_ERROR_STATE while the
 * GPU has not written them, never a wait). */
HK_API hk_status hk_stream_elapsed_ms(const hk_stream *stream, uint32_t from, uint32_t to, double *out_ms);

/* Records an upload: size bytes of host memory, copied into staging memory owned by the stream
 * during this call (data may be reused at once), then copied into dst by a transfer command in
 * the stream, ordered like a kernel writing dst. The staging memory is reused after the submit
 * completes (owned streams) or at hk_stream_reset (wrapped streams); it grows to the largest
 * amount a submit needs and is freed with the stream. size 0 records nothing. */
HK_API hk_status hk_stream_upload(hk_stream *stream, hk_view dst, const void *data, uint64_t size);

/* Records a download: size bytes of src, copied by a transfer command in the stream (ordered like
 * a kernel reading src) into staging memory, then into data (which must stay valid) when the
 * work has completed: by hk_stream_submit (owned streams) or hk_stream_reset (wrapped streams). */
HK_API hk_status hk_stream_download(hk_stream *stream, hk_view src, void *data, uint64_t size);

/* Records a buffer-to-buffer copy (used to measure the device's copy bandwidth). */
HK_API hk_status hk_copy(hk_context *context, hk_stream *stream, hk_view src, hk_view dst, uint64_t size);

/* ---- limits -----------------------------------------------------------------------------------
 * Shapes past these are refused with HK_ERROR_INVALID_ARGUMENT and a message naming the limit,
 * the same on every device. They keep every loop of every shader under 65535 iterations per
 * invocation on any device with subgroups of 4 lanes or more, counting every loop the shaders
 * have (also ones a compiler would unroll): lavapipe (Mesa's CPU driver) ends a shader's loops
 * after 65535 iterations in total per invocation and carries on with a wrong result. Each limit
 * is far past real models (largest k ~53248, hidden sizes <= 16384, vocabularies ~256k rows).
 * The other kernels (hk_quantize_q8_1, hk_moe_route, hk_moe_combine, hk_get_rows, hk_copy, hk_add,
 * hk_swiglu) loop a bounded number of times whatever the shape. */
#define HK_MATVEC_MAX_K 98304u             /* k of hk_matvec*, hk_moe_matvec* */
#define HK_MATVEC_MAX_ROWS 16777216u       /* rows of hk_matvec*; slots * n of hk_moe_matvec* */
#define HK_MATVEC_MAX_K_ROW_BLOCKS 262144u /* ceil(rows / 32768) * k, the same rows */
#define HK_MATVEC_MAX_TOKENS 16u           /* tokens of hk_matvec_int8_tokens */
#define HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS 1048576u /* ceil(rows / 32768) * k * (tokens + 1) of
                                                     * hk_matvec_int8_tokens with tokens > 1 */
#define HK_GEMV_MAX_K 1048576u             /* k of hk_gemv_f32* */
#define HK_RMSNORM_MAX_N 1048576u          /* n of hk_rmsnorm, hk_rmsnorm_q8_1 */
#define HK_ROWWISE_MAX_N 2097152u          /* n of hk_argmax, hk_softmax */
/* The largest pipeline cache file read (hk_context_desc.pipeline_cache_dir). */
#define HK_PIPELINE_CACHE_MAX_BYTES (256u << 20)
/* The largest winner cache file (tune.tsv, hk_tune) read or written: some 25000 winners. */
#define HK_TUNE_CACHE_MAX_BYTES (4u << 20)

/* ---- kernels ----------------------------------------------------------------------------------
 * Common rules: stream NULL means run now (record + submit + wait). Views must lie inside their
 * buffers for the whole tensor; a weight view's offset must be a multiple of 2 (GGUF blocks are
 * 2-byte aligned), every other view's a multiple of 4. Outputs must not overlap inputs. A view
 * spans at most caps.max_storage_buffer_range bytes (the device's limit on one binding).
 * Views are untyped byte ranges: each call checks a view's alignment and that its buffer holds
 * the bytes the shape needs (so a view too small for its tensor is refused), but it cannot tell
 * what the bytes hold: f32 activations passed where Q8_1 blocks are expected, weights of another
 * type, or a tensor of another shape whose bytes suffice all run and compute garbage. The caller
 * guarantees that each view holds the type and layout the function's documentation names, with
 * the shape it passes.
 * Tuning hooks (environment variables, docs/tuning.md) are read at each call, for measuring: a
 * value the variable does not accept, or a tile the device cannot run, fails the call with a
 * message naming the variable; no hook changes a result beyond float rounding.
 */

/* Dense quantized matvec: y[rows] = W[rows, k] . x[k]. W is rows contiguous GGUF rows of k values
 * of weight type wtype (Q8_0, Q4_K, Q5_K, Q6_K, or F16: rows of k f16 values as GGUF stores them);
 * x and y are f32. k must be a positive multiple of the type's block (32 for Q8_0, 256 for
 * Q4_K/Q5_K/Q6_K, any k for F16). F16 rows are read 16 bytes at a time where k is a multiple of 8
 * and w.offset and x.offset are multiples of 16 (as GGUF files align tensors), else 2 bytes at a
 * time, slower.
 * A NaN or inf in x (or in W's scales or F16 values) reaches y by IEEE arithmetic: the rows that
 * read it come out NaN or inf. The other matvec functions take the quantized types only.
 * Limits (all matvec functions): k <= 98304, rows <= 16777216 and ceil(rows / 32768) * k <= 262144
 * (e.g. 262144 x 16384 is accepted). */
HK_API hk_status hk_matvec(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view x,
                           hk_view y, uint32_t rows, uint32_t k);
/* hk_matvec for one weight type. */
HK_API hk_status hk_matvec_q8_0(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y,
                                uint32_t rows, uint32_t k);
HK_API hk_status hk_matvec_q4k(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y,
                               uint32_t rows, uint32_t k);
HK_API hk_status hk_matvec_q5k(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y,
                               uint32_t rows, uint32_t k);
HK_API hk_status hk_matvec_q6k(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y,
                               uint32_t rows, uint32_t k);

/* Int8 matvec: y[rows] = deq(W[rows, k]) . deq(xq) with x given as k/32 Q8_1 blocks
 * (hk_quantize_q8_1), deq(xq) = d*q: exactly the contraction of the dequantized values, in f32
 * arithmetic (the weight quants meet the activation quants in packed int8 dot products, exact
 * integers; hardware-accelerated where caps.integer_dot_accelerated, plain arithmetic where the
 * device has no shaderIntegerDotProduct); within 1e-5 of the output scale of that contraction in
 * double. Nothing of a Q8_1 block but d and q is read: its s may be anything (Q4_K's min term
 * uses d*sum(q), summed from the quants). A block of d = NaN (hk_quantize_q8_1's block for a NaN
 * or inf or too large activation) makes every output that reads it NaN; d = inf gives NaN or inf.
 * Against hk_matvec on the unquantized x the result differs by the Q8_1 rounding of x: about
 * 1e-2 of the output scale at most, more where blocks are tiny (see hk_quantize_q8_1). Types: Q8_0,
 * Q4_K, Q5_K, Q6_K. Q4_K and Q5_K weights must be 16-byte aligned (GGUF aligns tensor data to 32);
 * needs caps.subgroup_size_control (every Vulkan 1.3 device). Limits as hk_matvec: k <= 98304,
 * rows <= 16777216, ceil(rows / 32768) * k <= 262144. Tuning hooks: docs/tuning.md
 * (HK_MATVEC_INT8_ITEMS, HK_MATVEC_Q8_0_LOAD_BITS); an autotuner winner for the shape class
 * (hk_tune, HK_TUNE_MATVEC_INT8) takes precedence over them; every schedule gives the same bits. */
HK_API hk_status hk_matvec_int8(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                                hk_view y, uint32_t rows, uint32_t k);

/* hk_matvec_int8 with the residual add fused into its epilogue (the decode's x += W_o . attn and
 * x += W_down . h in one dispatch instead of two): y[r] = residual[r] + (deq(W) . deq(xq))[r],
 * r < rows, residual and y f32 [rows]. Bit-identical to hk_matvec_int8 into a temporary t followed
 * by hk_add(residual, t, y, rows): each row's sum is hk_matvec_int8's (its schedule: the
 * autotuner's HK_TUNE_MATVEC_INT8 winner for (wtype, rows, k), the hooks or the defaults; every
 * schedule gives the same bits), and the addition is one f32 addition, never fused into an fma,
 * rounded as hk_add's. y may be exactly residual (in place); y must not otherwise overlap
 * residual, w or xq. Types, alignment, limits and errors as hk_matvec_int8; residual's offset a
 * multiple of 4. One token, dense: hk_matvec_int8_tokens and the MoE matvecs have no fused add (the
 * MoE's fused form is hk_moe_matvec_int8_glu). */
HK_API hk_status hk_matvec_int8_add(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                                    hk_view residual, hk_view y, uint32_t rows, uint32_t k);

/* The RMSNorm after a residual add (hk_matvec_int8_add_norm): the next layer's input. */
typedef struct hk_norm_out {
    hk_view weight;    /* f32 [rows]: the RMSNorm's weight */
    float eps;         /* positive and finite */
    hk_view yq;        /* rows / 32 Q8_1 blocks of the normalised values */
    hk_view yn;        /* the normalised values as f32 [rows]; {NULL, 0}: not written */
    hk_view workspace; /* hk_matvec_int8_add_norm_workspace_bytes bytes, zero before the first call */
} hk_norm_out;

/* Bytes of workspace hk_matvec_int8_add_norm needs for `rows` outputs (an arrival counter; the size
 * depends on rows alone). rows as hk_matvec_int8_add_norm takes it, else
 * HK_ERROR_INVALID_ARGUMENT; out_bytes non-NULL. */
HK_API hk_status hk_matvec_int8_add_norm_workspace_bytes(hk_context *context, uint32_t rows, uint64_t *out_bytes);

/* hk_matvec_int8_add followed by the RMSNorm and Q8_1 quantization of its output, in one dispatch
 * instead of two (the decode's x += W_o . attn, then the FFN's input; x += W_down . h, then the next
 * layer's): y as hk_matvec_int8_add writes it, then norm->yq (and norm->yn where given) as
 * hk_rmsnorm_q8_1(y, norm->weight, norm->yn, norm->yq, 1 row, rows, norm->eps) writes them,
 * bit-identical to those two calls on the same device (the same sums and code; the norm's sum of
 * squares in its fixed order). The workgroup that finishes its rows last reads y back and
 * normalises it, so the other workgroups wait for nothing. It is found by an arrival counter in
 * norm->workspace, which must be zero before the first call (hk_buffer_fill) and which every call
 * leaves zero: other contents make a call normalise too early or never (a wrong result), so the
 * workspace serves no other kernel, and two calls that may run at once (two streams, or no barrier
 * between them) need two. The normalisation is one workgroup's chain of loads after the matvec:
 * whether it costs less than the dispatch it saves depends on the device (docs/perf.md). rows a
 * multiple of 32 up to 32768; y may be exactly the residual; yq, yn and the workspace (4-byte
 * aligned) overlap nothing else. Types, the other views, limits and errors as hk_matvec_int8_add;
 * a NULL norm, a bad eps, rows out of range or a workspace smaller than
 * hk_matvec_int8_add_norm_workspace_bytes is HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_matvec_int8_add_norm(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w,
                                         hk_view xq, hk_view residual, hk_view y, uint32_t rows, uint32_t k,
                                         const hk_norm_out *norm);

/* The gated activations (hk_swiglu, hk_matvec_int8_glu). */
typedef enum hk_glu_mode { HK_GLU_SILU = 0, HK_GLU_GELU_TANH = 1 } hk_glu_mode;

/* The gate and up projections and their gated activation in one dispatch instead of three:
 * y[r] = act((deq(W_gate) . deq(xq))[r]) * (deq(W_up) . deq(xq))[r], r < rows, act as hk_swiglu's
 * mode (HK_GLU_SILU, HK_GLU_GELU_TANH). Bit-identical to hk_matvec_int8 of W_gate into g and of
 * W_up into u followed by hk_swiglu(g, u, y, 1, rows, rows, mode): each row's two sums are
 * hk_matvec_int8's, and the activation is hk_swiglu's code (one GLSL function, every operation
 * uncontracted). Each subgroup computes its rows of both matrices, so that every x value it loads
 * serves both. w_gate and w_up: two views of weights of the same type and shape [rows, k], each
 * aligned as hk_matvec_int8 asks (they may overlap each other); xq k/32 Q8_1 blocks; y f32 [rows],
 * overlapping no input. Schedule: hk_matvec_int8's for (wtype, rows, k) (the autotuner's
 * HK_TUNE_MATVEC_INT8 winner, the hooks or the defaults), its rows per subgroup counting the rows
 * of both matrices (nrows / 2 of each, one of each where nrows is 1: as many weight rows per
 * subgroup as hk_matvec_int8 holds, two where it holds one); where that would loop past the
 * iteration limit (see the limits), 1 item per step, then fewer rows; hk_schedule_last
 * (HK_TUNE_MATVEC_INT8) reports it, nrows counting both matrices' rows. Types, limits and errors as
 * hk_matvec_int8; a mode that is no hk_glu_mode is HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_matvec_int8_glu(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w_gate,
                                    hk_view w_up, hk_view xq, hk_view y, uint32_t rows, uint32_t k, hk_glu_mode mode);

/* hk_matvec_int8_glu with its output as Q8_1 blocks, the down projection's input, without a
 * quantizer dispatch between them: yq rows / 32 blocks of 36 bytes, bit-identical to
 * hk_matvec_int8_glu into y followed by hk_quantize_q8_1(y, yq, rows) (each output is that call's,
 * quantized by the same code). A workgroup takes 32 rows at a time and its subgroups their row
 * groups in turn, with hk_matvec_int8_glu's rows per subgroup. rows a multiple of 32, else
 * HK_ERROR_INVALID_ARGUMENT; yq 4-byte aligned, overlapping no input; the rest as
 * hk_matvec_int8_glu. */
HK_API hk_status hk_matvec_int8_glu_q8_1(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w_gate,
                                         hk_view w_up, hk_view xq, hk_view yq, uint32_t rows, uint32_t k,
                                         hk_glu_mode mode);

/* The most matrices of one hk_matvec_int8_multi call (Q, K and V). */
#define HK_MATVEC_MULTI_MAX 3u

/* Several matrices on one activation in one dispatch instead of n (the attention's Q, K and V
 * projections): w[i] is rows[i] GGUF rows of k values of wtype, i < n (1..HK_MATVEC_MULTI_MAX), and
 * y f32 [rows[0] + ... + rows[n-1]] receives their products concatenated: y[0 .. rows[0]) =
 * deq(W0) . deq(xq), then rows[1] values of deq(W1) . deq(xq), then W2's (take views into y for
 * each). Bit-identical to n hk_matvec_int8 calls, call i writing y + 4 * (rows[0] + ... + rows[i-1])
 * bytes: each row's sum is hk_matvec_int8's (the same per-row sums in the same order; every schedule
 * gives the same bits), and each subgroup's rows lie in one matrix (each matrix's rows padded to
 * whole row groups). Schedule: hk_matvec_int8's for (wtype, rows[0] + ... + rows[n-1], k) (the
 * autotuner's HK_TUNE_MATVEC_INT8 winner, the hooks or the defaults); where the padded rows would
 * loop past the iteration limit, 1 item per step, then fewer rows per subgroup. The w views may
 * overlap each other; each is aligned as hk_matvec_int8 asks; y overlaps no input. Types, alignment,
 * limits (on each matrix and on the total rows) and errors as hk_matvec_int8; n out of range, w or
 * rows NULL, or a rows[i] of 0 is HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_matvec_int8_multi(hk_context *context, hk_stream *stream, hk_type wtype, uint32_t n,
                                      const hk_view *w, const uint32_t *rows, hk_view xq, hk_view y, uint32_t k);

/* What the one-token int8 matvec does after its sums (hk_matvec_int8_f32x). */
typedef enum hk_matvec_epilogue {
    HK_MATVEC_PLAIN = 0,         /* y = the products (of each matrix, concatenated where several) */
    HK_MATVEC_ADD = 1,           /* y = residual + the product, as hk_matvec_int8_add */
    HK_MATVEC_GLU_SILU = 2,      /* y = silu(W_gate . x) * (W_up . x), as hk_matvec_int8_glu */
    HK_MATVEC_GLU_GELU_TANH = 3  /* the same with GeLU (tanh form) */
} hk_matvec_epilogue;

/* One call of hk_matvec_int8_f32x. */
typedef struct hk_matvec_f32x_desc {
    hk_type wtype;                     /* Q8_0, Q4_K, Q5_K or Q6_K */
    uint32_t n;                        /* matrices, 1..HK_MATVEC_MULTI_MAX; several only with HK_MATVEC_PLAIN */
    hk_view w[HK_MATVEC_MULTI_MAX];    /* w[i]: rows[i] GGUF rows of k values (the GLU's W_gate: w[0]) */
    uint32_t rows[HK_MATVEC_MULTI_MAX];
    uint32_t k;                        /* a multiple of the type's block, and of 32 */
    hk_view x;                         /* f32 [k] */
    hk_view norm;                      /* f32 [k]: x is RMSNorm'ed with this weight first; {NULL, 0}: not */
    float eps;                         /* the RMSNorm's epsilon (with norm): positive and finite */
    hk_matvec_epilogue epilogue;
    hk_view operand;                   /* HK_MATVEC_ADD: the residual f32 [rows[0]]; the GLU: W_up; else unused */
    hk_view y;                         /* f32: rows[0] + ... + rows[n-1] values (rows[0] for ADD and the GLU) */
} hk_matvec_f32x_desc;

/* The one-token int8 matvecs (hk_matvec_int8, _add, _glu, _multi by desc->epilogue and desc->n) on
 * an f32 activation, which each workgroup quantizes to Q8_1 in its shared memory, RMSNorm'ed first
 * where desc->norm is given: the decode's RMSNorm (or, after attention and the gated activation,
 * the quantization) and the product in one dispatch instead of two, with no barrier between them.
 * Bit-identical to hk_rmsnorm_q8_1(x, norm, ..., 1 row, k, eps) (without norm: hk_quantize_q8_1(x,
 * k)) into a buffer xq, then the chosen call on xq: the blocks are those kernels' (the same
 * quantization code, and the same order of the sum of squares, which no workgroup changes), and
 * each row's sums and epilogue are that call's. Every workgroup reads all of x (docs/tuning.md's
 * HK_MATVEC_F32X_* set their width and count): use it where x is a few thousand values. Needs 16 +
 * 40 b + 4 ceil(b / 32) + 136 s + 8 w bytes of shared memory, b being k / 32 rounded up to a power
 * of 2 of at least 64, s = b where b <= 128 and 32 beyond, w the invocations of a workgroup (at
 * least two subgroups; fewer than asked where the rest does not fit): k <= 32768 on 48 KiB, more
 * is HK_ERROR_UNSUPPORTED naming the bytes.
 * hk_context_prepare builds its pipelines for k up to 16384. Views: x, norm and y f32 with offsets
 * a multiple of 4; the weights, operand, y's overlaps and the other limits and errors as the chosen
 * call's (ADD: y may be exactly the residual); a NULL desc, n or epilogue out of range, several
 * matrices with an epilogue, or a bad eps is HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_matvec_int8_f32x(hk_context *context, hk_stream *stream, const hk_matvec_f32x_desc *desc);

/* Int8 matvec of several tokens against one weight read (speculative decoding, small batches):
 * y[t, :] = deq(W) . deq(xq[t, :]) for t < tokens, xq `tokens` rows of k/32 Q8_1 blocks each
 * ([tokens, k/32], token after token), y f32 [tokens, rows] (y[t * rows + r]). Each token's
 * outputs are bit-identical to hk_matvec_int8 on that token's blocks (same items in the same
 * order, every float operation of the sums uncontracted: NoContraction in the SPIR-V of both),
 * on every device where subgroupAdd is a fixed function of the lanes' values (every driver we
 * know); so the same rules apply: exact contraction, s never read, NaN blocks give NaN outputs
 * for their token only. 1 <= tokens <= 16 (HK_MATVEC_MAX_TOKENS); tokens = 1 is hk_matvec_int8.
 * The tokens' x goes through shared memory, 40 bytes per Q8_1 block and token: either resident
 * (all k / 32 blocks of every token of a pass staged once per workgroup, which then runs its row
 * groups without a barrier: used where they fit, e.g. 8 tokens up to k = 4864 in 48 KiB, 16 up
 * to k = 2432) or staged per step (the blocks of one step of items, re-staged per step and row
 * group: Q8_0 items * subgroup / 2 blocks per token, the K-quants 2 * items * subgroup). Where
 * the device has too little shared memory for all tokens, or where the shape is so wide and
 * shallow (millions of rows, a few blocks of k) that one pass would loop past lavapipe's
 * iteration limit, they run in several passes (each reading the weights), with the same results.
 * The schedule (subgroups per workgroup, rows per subgroup, items per step, x resident or staged,
 * the most workgroups launched) is the autotuner's family HK_TUNE_MATVEC_TOKENS: a cached winner
 * for the call's shape class (weight type, rows, k, tokens) takes precedence over the tuning hooks
 * (docs/tuning.md: HK_MATVEC_TOKENS_*, HK_MATVEC_Q8_0_LOAD_BITS); every schedule gives the same
 * bits; hk_schedule_last(HK_TUNE_MATVEC_TOKENS) says what served.
 * Alignment, types and limits as hk_matvec_int8 (k <= 98304, rows <= 16777216,
 * ceil(rows / 32768) * k <= 262144) and, for tokens > 1, ceil(rows / 32768) * k * (tokens + 1)
 * <= 1048576 (HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS): at 16 tokens k <= 61680 for up to 32768 rows
 * (Llama-3-405B's 16384 x 53248 down projection), and a 128256 x 16384 head takes up to 15
 * tokens. */
HK_API hk_status hk_matvec_int8_tokens(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w,
                                       hk_view xq, hk_view y, uint32_t rows, uint32_t k, uint32_t tokens);

/* Shape of a MoE expert gather (decode): experts [n_experts, n, k], one expert per routed slot. */
typedef struct hk_moe_shape {
    uint32_t n_experts; /* experts in the weight tensor */
    uint32_t n;         /* output rows of one expert */
    uint32_t k;         /* input values, a multiple of the weight type's block */
    uint32_t slots;     /* routed slots (tokens x top-k) */
    int x_per_slot;     /* 0: one x for every slot (gate/up); 1: x[slots, k], slot s reads x[s] (down) */
} hk_moe_shape;

/* MoE indexed matvec: y[s, :] = W[ids[s]] . x_s for each slot s < slots, W the GGUF weights of
 * n_experts experts [n_experts, n, k] (Q8_0, Q4_K, Q5_K or Q6_K), ids u32 [slots], x f32 ([k] or
 * [slots, k]), y f32 [slots, n]. An id >= n_experts reads no weights and its n outputs are set to
 * 0. The x view must be 16-byte aligned and Q4_K and Q5_K weights 16-byte aligned; needs
 * caps.subgroup_size_control. Limits as hk_matvec with rows = slots * n: k <= 98304,
 * slots * n <= 16777216, ceil(slots * n / 32768) * k <= 262144. */
HK_API hk_status hk_moe_matvec(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view x,
                               hk_view ids, hk_view y, const hk_moe_shape *shape);
/* hk_moe_matvec with x as Q8_1 blocks ([k/32] or [slots, k/32]): each slot's outputs as
 * hk_matvec_int8 computes them (deq(W) . deq(xq), s never read, NaN blocks give NaN); an id >=
 * n_experts gives zeros. The schedule (rows per subgroup, items per step, Q8_0 weight loads) is the
 * autotuner's family HK_TUNE_MOE_MATVEC_INT8: a cached winner for the call's shape class (weight
 * type, n_experts, n, k, slots' power-of-two range, x_per_slot) takes precedence over the tuning
 * hook HK_MATVEC_Q8_0_LOAD_BITS (docs/tuning.md); every schedule gives the same bits;
 * hk_schedule_last(HK_TUNE_MOE_MATVEC_INT8) says what served. */
HK_API hk_status hk_moe_matvec_int8(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                                    hk_view ids, hk_view y, const hk_moe_shape *shape);
/* A MoE layer's gate and up projections and their gated activation in one dispatch instead of
 * three: for each slot s < slots, y[s, :] = act(deq(W_gate[ids[s]]) . deq(xq)) * (deq(W_up[ids[s]])
 * . deq(xq)), act as hk_swiglu's mode (HK_GLU_SILU, HK_GLU_GELU_TANH). Bit-identical to
 * hk_moe_matvec_int8 of w_gate into g and of w_up into u (the same shape) followed by hk_swiglu(g,
 * u, y, slots, n, n, mode): each output's two sums are hk_moe_matvec_int8's, the activation is
 * hk_swiglu's code. An id >= n_experts reads no weights and its n outputs are act(0) * 0 = +0.0 in
 * both modes, as the unfused calls give. Each subgroup computes its rows of both banks (nrows / 2
 * rows of each, inside one slot), so that every x value it loads serves both. w_gate and w_up:
 * two banks [n_experts, n, k] of the same type (Q8_0, Q4_K, Q5_K or Q6_K), each aligned as
 * hk_moe_matvec_int8 asks (they may overlap each other); xq, ids and shape (x_per_slot included)
 * as hk_moe_matvec_int8's; y f32 [slots, n], overlapping no input. Schedule: hk_moe_matvec_int8's
 * for the shape (HK_TUNE_MOE_MATVEC_INT8's winner, the hook or the defaults), its rows per subgroup
 * counting both banks' rows (at least one of each), fewer where n or the iteration limit asks.
 * Limits and errors as hk_moe_matvec_int8; a mode that is no hk_glu_mode is
 * HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_moe_matvec_int8_glu(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w_gate,
                                        hk_view w_up, hk_view xq, hk_view ids, hk_view y, const hk_moe_shape *shape,
                                        hk_glu_mode mode);

/* hk_moe_matvec_int8_glu with its output as Q8_1 blocks: yq slots x n / 32 blocks of 36 bytes (slot
 * s's n / 32 blocks after slot s - 1's: the per-slot x of hk_moe_matvec_int8_combine), bit-identical
 * to hk_moe_matvec_int8_glu into y followed by hk_quantize_q8_1(y, yq, slots x n); an id out of
 * range gives its slot all-zero blocks, as those calls do. A workgroup takes 32 rows of a slot at a
 * time. shape->n a multiple of 32, else HK_ERROR_INVALID_ARGUMENT; yq 4-byte aligned, overlapping
 * no input; the rest as hk_moe_matvec_int8_glu. */
HK_API hk_status hk_moe_matvec_int8_glu_q8_1(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w_gate,
                                             hk_view w_up, hk_view xq, hk_view ids, hk_view yq,
                                             const hk_moe_shape *shape, hk_glu_mode mode);

/* hk_moe_matvec_int8_glu_q8_1 with each slot's expert ranked from the router's logits inside the
 * kernel, instead of read from ids: slot t * top_k + j takes the j-th expert of token t in
 * hk_moe_route's order (larger logit first, ties to the lower index, NaN never chosen; a slot past
 * the logits that are numbers gets none, so all-zero blocks). So yq is bit-identical to
 * hk_moe_route(logits, ids, ...) followed by hk_moe_matvec_int8_glu_q8_1(..., ids, ...), and
 * hk_moe_route, which the weighted combine still needs, can run beside this call instead of
 * before it: both only read the logits, so the stream puts no barrier between them. logits f32
 * [slots / top_k, n_experts], 4-byte aligned; top_k 1..min(n_experts, 64) dividing slots, else
 * HK_ERROR_INVALID_ARGUMENT; n_experts at most 64 x the subgroup size, else HK_ERROR_UNSUPPORTED;
 * the rest as hk_moe_matvec_int8_glu_q8_1. */
HK_API hk_status hk_moe_matvec_int8_glu_q8_1_ranked(hk_context *context, hk_stream *stream, hk_type wtype,
                                                    hk_view w_gate, hk_view w_up, hk_view xq, hk_view logits,
                                                    hk_view yq, const hk_moe_shape *shape, uint32_t top_k,
                                                    hk_glu_mode mode);

/* A MoE layer's down projection with the weighted combine and the residual in one dispatch instead
 * of two: for each token t < slots / top_k and row r < n, y[t, r] = sum over j < top_k of
 * weights[t, j] * (deq(W[ids[t, j]]) . deq(xq of slot t * top_k + j))[r], j ascending, then
 * + residual[t, r]. Bit-identical to hk_moe_matvec_int8 into a buffer x [slots, n] followed by
 * hk_moe_combine(x, weights, residual, y, slots / top_k, top_k, n): each slot's sums are
 * hk_moe_matvec_int8's (its schedule), and the combine is hk_moe_combine's arithmetic in its order.
 * An id >= n_experts reads no weights and its product is +0.0, as hk_moe_matvec_int8 writes it.
 * A workgroup takes a token's group of rows and its subgroups the token's slots. w, xq, ids and
 * shape as hk_moe_matvec_int8's (x_per_slot: each slot's own x, the down projection's case);
 * weights f32 [slots] (hk_moe_route's); residual f32 [slots / top_k, n] or {NULL, 0} for none; y
 * f32 [slots / top_k, n], which may be exactly residual and must overlap nothing else. top_k
 * 1..64 dividing slots; a NULL shape, a top_k out of range or a residual view of NULL buffer with
 * an offset is HK_ERROR_INVALID_ARGUMENT; types, limits and other errors as hk_moe_matvec_int8. */
HK_API hk_status hk_moe_matvec_int8_combine(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w,
                                            hk_view xq, hk_view ids, hk_view weights, hk_view residual, hk_view y,
                                            const hk_moe_shape *shape, uint32_t top_k);

/* Fused MoE router: for each token, the softmax of its n_experts logits (f32 [tokens, n_experts]),
 * the top_k experts by logit in descending order (ties: the lower index) into ids (u32
 * [tokens, top_k]) and their softmax weights into weights (f32 [tokens, top_k]); renormalize != 0
 * rescales the k weights to sum to 1. NaN logits are never chosen; if fewer than top_k logits are
 * numbers, the remaining ids are 0xFFFFFFFF (which hk_moe_matvec turns into zero outputs) with
 * weight 0. 1 <= top_k <= min(n_experts, 64); n_experts at most 64 x the subgroup size (2048 on a
 * 32-wide subgroup) and at most the f32 values the device's shared memory per workgroup holds
 * beside 256 bytes (a token's logits are staged there), else HK_ERROR_UNSUPPORTED. */
HK_API hk_status hk_moe_route(hk_context *context, hk_stream *stream, hk_view logits, hk_view ids, hk_view weights,
                              uint32_t tokens, uint32_t n_experts, uint32_t top_k, int renormalize);

/* ---- row-wise kernels over logits (rows of n f32 values, row r at element r * n) ---------------
 * One workgroup per row. 1 <= n <= 2097152 (HK_ROWWISE_MAX_N: about 8 vocabularies of 262144),
 * rows >= 1, the rows' rows * n * 4 bytes within the device's binding range
 * (caps.max_storage_buffer_range); x's and the output's offsets multiples of 4. */

/* ids[r] = the index of the largest x[r, i], i < n: of several equal maxima the lowest index (+0 and
 * -0 are equal), exactly, whatever the order the device reduces in. NaN is never chosen: a row of
 * NaN only gives 0xFFFFFFFF. +inf beats every finite value; a row of -inf (and NaN) gives its first
 * -inf. ids: u32 [rows], must not overlap x. For greedy decoding: the id stays on the device for the
 * next step's embedding lookup. */
HK_API hk_status hk_argmax(hk_context *context, hk_stream *stream, hk_view x, hk_view ids, uint32_t rows, uint32_t n);

/* Row-wise softmax of x / temperature: y[r, i] = e_i / sum_j e_j with e_i = exp((x[r, i] - max_r) /
 * temperature), max_r the row's maximum (computed as (x - max_r) * (1 / temperature) in f32, the sum
 * in f32): no logit overflows, rows around +-80 or +-1e30 are as good as rows around 0. An x equal
 * to max_r gives e = 1 exactly, which also settles infinite maxima as the limit of equal logits:
 * a row with +inf gives its +inf entries equal shares (1 / their count) and every other entry 0; a
 * row of -inf only is uniform (1 / n); -inf beside a number gives 0. A NaN anywhere in a row makes
 * that whole row NaN. temperature > 0 and finite (temperature -> 0 tends to argmax, ties shared;
 * a temperature so small that its reciprocal overflows gives exactly that). y f32 [rows, n]; y
 * may be exactly x (in place), else must not overlap it. Accuracy: each row within 1e-5 of its
 * largest value (scale-relative) of the softmax computed in double; the device's exp (Vulkan
 * allows 3 + 2|a| ulp) and the f32 sum of n terms bound the error, not the logits' size. */
HK_API hk_status hk_softmax(hk_context *context, hk_stream *stream, hk_view x, hk_view y, uint32_t rows, uint32_t n,
                            float temperature);

/* MoE combine: y[t, :] = sum_j weights[t, j] * x[t * top_k + j, :] (+ residual[t, :] where residual
 * is not {NULL, 0}) for t < tokens, j < top_k, rows of n f32. weights f32 [tokens, top_k]
 * (hk_moe_route's), x f32 [tokens * top_k, n] (the out of hk_moe_matvec, hk_moe_matvec_int8 or
 * hk_mmq_id: slot s = token * top_k + j), residual and y f32 [tokens, n]. In f32, in this order:
 * the product of j = 0, then + the product of each next j, then + the residual, every product and
 * sum rounded on its own (no FMA): bit-exact with that computation in C (hk_ref_moe_combine) on
 * devices that round f32 arithmetic to nearest even and keep subnormals (every GPU we know; Vulkan
 * leaves both to the driver). Every slot's row is read whatever its weight, and 0 x inf or NaN is
 * NaN: rows no kernel wrote (hk_mmq_id leaves the rows of dropped ids as they were) must hold
 * numbers; hk_moe_matvec* write zeros for ids out of range. y may be exactly residual (in place)
 * and must overlap nothing else. 1 <= top_k <= 64, tokens >= 1, n >= 1, tokens * top_k * n <=
 * 2^32 - 1 values; a shape or view outside these is HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_moe_combine(hk_context *context, hk_stream *stream, hk_view x, hk_view weights, hk_view residual,
                                hk_view y, uint32_t tokens, uint32_t top_k, uint32_t n);

/* Embedding lookup (any engine's get_rows): y[i, :] = row ids[i] of W [rows, k], dequantized to
 * f32, for i < n_ids. W is rows contiguous GGUF rows of k values of wtype: F32, F16, Q8_0, Q4_K,
 * Q5_K or Q6_K, k a positive multiple of the type's block (1, 1, 32, 256, 256, 256); ids u32 [n_ids], read on
 * the device (the tokens of a step: one recorded stream serves every step); y f32 [n_ids, k]. An
 * id >= rows (0xFFFFFFFF too) reads no weight and writes a row of zeros (+0.0); ids may repeat.
 * Bit-exact with the reference dequantizers (hk_dequant_row_*, hk_f16_to_f32; hk_ref_get_rows),
 * each value being a fixed f32 formula: F32 rows are copied bit for bit (NaN payloads included);
 * F16 values are converted exactly, in integer arithmetic (subnormals, inf and NaN payloads kept,
 * also on a device that flushes f16 subnormals); Q8_0's d*q and Q6_K's d*sc*(q-32) are exact
 * products, so no rounding at all; Q4_K's and Q5_K's (d*sc)*q - dmin*m has exact products and
 * rounds once, in the subtraction: bit-exact on devices that round f32 to nearest even (every GPU we know). A NaN
 * or inf block scale gives NaN or inf by IEEE arithmetic (a NaN's payload may differ). Views: w at
 * hk_type_alignment(wtype) (2 for F16 and GGUF blocks, 4 for F32), ids and y at 4; y overlaps
 * neither. n_ids >= 1, rows >= 1, n_ids * k <= 2^32 - 1 values; W, like every view, within
 * caps.max_storage_buffer_range bytes (Llama-3-8B's 128256 x 4096 embedding: 558 MB in Q8_0,
 * 2.1 GB in F32). Another wtype is HK_ERROR_UNSUPPORTED; a shape or view outside these,
 * HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_get_rows(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view ids, hk_view y,
                             uint32_t n_ids, uint32_t rows, uint32_t k);

/* f32 GEMV (e.g. the MoE router gate, GGUF's F32 ffn_gate_inp): y[rows] = W[rows, k] . x[k], W
 * row-major f32, x and y f32; hk_gemv_f32_tokens with tokens = 1. rows >= 1, 1 <= k <= 1048576;
 * W within caps.max_storage_buffer_range bytes; y must not overlap W or x.
 * Each output is one fixed-order sum: each of 128 invocations adds its products W[r, i] * x[i]
 * for i = its index, +128, ... in order (a product and its add fused into an fma where the
 * device's compiler fuses them), a subgroup sum adds those, and the subgroups' sums are added in
 * order. */
HK_API hk_status hk_gemv_f32(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y,
                             uint32_t rows, uint32_t k);
/* hk_gemv_f32 for several tokens against one weight read (prompt processing): y[t, :] = W . x[t, :]
 * for t < tokens, x f32 [tokens, k] and y f32 [tokens, rows], token after token. Each token's row of
 * y is bit-identical to hk_gemv_f32 on that token's x alone, whatever tokens is (the same sum in
 * the same order: the workgroup that handles up to 8 tokens of a row keeps one sum per token).
 * Limits: tokens >= 1; tokens * rows and tokens * k at most 2^32 - 1 values; x and y, like W,
 * within caps.max_storage_buffer_range bytes; k as hk_gemv_f32. A shape or view outside these is
 * HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_gemv_f32_tokens(hk_context *context, hk_stream *stream, hk_view w, hk_view x, hk_view y,
                                    uint32_t rows, uint32_t k, uint32_t tokens);

/* RMSNorm over rows of n: y[r, i] = x[r, i] / sqrt(mean(x[r, :]^2) + eps) * weight[i]. eps > 0
 * and finite; 1 <= n <= 1048576; y may equal x (in place). Qwen3's per-head q/k norm is this call
 * with rows = heads (times tokens: the projection's [tokens, heads, head_dim] as it is) and
 * n = head_dim, weight the head_dim values of q_norm (k_norm), in place on the projection; hk_rope
 * runs it on each head before it rotates, with the same bits (hk_rope_desc.q_norm, k_norm). */
HK_API hk_status hk_rmsnorm(hk_context *context, hk_stream *stream, hk_view x, hk_view weight, hk_view y,
                            uint32_t rows, uint32_t n, float eps);

/* y[i] = a[i] + alpha * b[i], i < n (f32). In place: y may be exactly a or exactly b.
 * Two f32 operations, never fused into an fma: the product alpha * b[i] rounded to f32, then the
 * sum rounded to f32 (the C expression a[i] + (float)(alpha * b[i]) with contraction off), each
 * correctly rounded, to nearest even on every device we know (Vulkan also allows toward zero): the
 * same bits everywhere. A NaN or inf in a or b reaches y by IEEE arithmetic (inf - inf and 0 * inf
 * are NaN); a subnormal result or input may be flushed to zero where the device flushes f32
 * denormals (Vulkan allows it). alpha finite; n >= 1 and n * 4 bytes within
 * caps.max_storage_buffer_range (the views' offsets multiples of 4); y must not overlap a or b
 * other than exactly. */
HK_API hk_status hk_add_scaled(hk_context *context, hk_stream *stream, hk_view a, hk_view b, hk_view y, uint32_t n,
                               float alpha);
/* y = a + b: hk_add_scaled with alpha 1 (bit for bit the sum: 1 * b is b). The residual add: the
 * correctly rounded f32 sum. */
HK_API hk_status hk_add(hk_context *context, hk_stream *stream, hk_view a, hk_view b, hk_view y, uint32_t n);

/* y[r, i] = act(gate[r, i]) * up[r, i], r < rows, i < n: silu(x) = x / (1 + e^-x) (SwiGLU) or GELU with the tanh
 * approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GeGLU). gate and up rows are in_stride floats
 * apart (n for two [rows, n] tensors; 2n for one fused [rows, 2n] tensor whose first half is gate: pass up as
 * gate's view plus n * 4 bytes); y is [rows, n], dense; y may be exactly gate where in_stride is n.
 * Precisely: y may be exactly gate or exactly up where that view spans rows * n floats (in_stride n,
 * or one row); any other overlap of y with them is refused; gate and up may overlap each other.
 * f32 arithmetic (exp and one division; GELU as the equal x / (1 + e^(-2u)), u the tanh's argument,
 * which spares 1 + tanh(u) its cancellation): within 1e-6 of the output scale (max |y|) of the math
 * in double. IEEE arithmetic for the rest: a NaN in gate or up gives NaN, act(+inf) = +inf,
 * act(-inf) = NaN (-inf / inf in the formulas above), an infinite up times act(gate) = 0 is NaN.
 * rows >= 1, n >= 1, in_stride >= n; gate and up span (rows - 1) * in_stride + n floats and y
 * rows * n, each within caps.max_storage_buffer_range (offsets multiples of 4); mode HK_GLU_SILU or
 * HK_GLU_GELU_TANH. */
HK_API hk_status hk_swiglu(hk_context *context, hk_stream *stream, hk_view gate, hk_view up, hk_view y, uint32_t rows,
                           uint32_t n, uint32_t in_stride, hk_glu_mode mode);

/* Activation quantizer: x[k] f32 -> k/32 GGUF Q8_1 blocks, the input of the int8 kernels. Per 32
 * values, as ggml: amax = max|x|, d = amax/127 (stored as f16), q = round(x/d) (half away from
 * zero), s = f16(d*sum(q)) (carried, never read by the int8 kernels; it overflows to inf for
 * blocks with amax above about 2047). At the ends of the f16 d's range:
 *  - amax <= 127 * 2^-25 (~3.785e-6): d rounds to 0; the block is stored as zeros (d = s = 0,
 *    q = 0), so those activations count as 0;
 *  - amax below 0x1.fbc08p-8 (~7.748e-3): d is an f16 subnormal (steps of 2^-24), whose
 *    rounding adds up to 127 * 2^-25 ~ 3.8e-6 to the error of each dequantized value, beside
 *    the d/2 = amax/254 of q's rounding: at amax 1e-3 that doubles the error, at 1e-4 it is ~4% of
 *    amax (for normal d the f16 rounding adds up to amax * 2^-11);
 *  - a NaN or inf in the block, or amax >= 127 * 65520 = 8321040 (d would round to f16 inf): the
 *    block is d = s = NaN (f16 0x7E00) with every q 0, so every int8 output that reads it is NaN
 *    (hk_matvec on the same x gives NaN or inf there too): a non-finite activation never turns
 *    into a finite result.
 * The GPU's division may round d differently from C's amax/127 by one f32 step (d then differs
 * by at most one f16 step, and a q by one, from hk_quant_row_q8_1). k a positive multiple of 32
 * (no other limit); x's and y's offsets multiples of 4. */
HK_API hk_status hk_quantize_q8_1(hk_context *context, hk_stream *stream, hk_view x, hk_view y, uint32_t k);

/* RMSNorm fused with the Q8_1 quantizer of its output, in one dispatch (the norm before each
 * int8 matvec of a decode layer): for rows rows of n values, y = hk_rmsnorm(x, weight, eps) and
 * yq = hk_quantize_q8_1 of those normalized values, rows of n/32 blocks, row after row (as
 * hk_quantize_q8_1 on rows * n values lays them out). Bit-identical, on the same device, to
 * hk_rmsnorm followed by hk_quantize_q8_1 on its y, both outputs: the same sum of squares in the
 * same order (hk_rmsnorm's workgroup width and subgroup size: where the device has several sizes
 * and caps.subgroup_size_control, both kernels require its default one) and the same quantizer
 * code. So the rules and the accuracy of those two calls hold, NaN and inf included: a NaN in a
 * row makes every block of that row d = s = NaN; an inf makes the row's scale 0, its own block
 * NaN and the others zero. y is optional: {NULL, 0} writes no f32 output (yq alone); y may be
 * exactly x (in place). eps > 0 and finite; rows >= 1; n a positive multiple of 32 up to
 * HK_RMSNORM_MAX_N; views' offsets multiples of 4; yq must not overlap x, weight or y. A shape or
 * view outside these is HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_rmsnorm_q8_1(hk_context *context, hk_stream *stream, hk_view x, hk_view weight, hk_view y,
                                 hk_view yq, uint32_t rows, uint32_t n, float eps);

/* ---- attention ---------------------------------------------------------------------------------
 * Q and outputs are f32 [n_q, n_heads, head_dim], tokens outer, heads inner, contiguous. K and V
 * are read in place from the engine's KV cache, described by an hk_kv_layout. Grouped-query
 * attention is native: query head h reads kv head h / (n_heads / n_kv_heads); nothing is repeated.
 */

/* A KV cache as the engine lays it out: per kv head, `capacity` rows (one per position) of
 * head_dim values of `type`, with byte strides between consecutive rows and between kv heads, so
 * head-major ([kv_head][row][d]) and token-major ([row][kv_head][d]) caches are both read and
 * written in place, and a cache allocated for max_seq is never read past the keys in use. Rows
 * of different (head, row) pairs must not overlap: either head stride >= capacity x row stride or
 * row stride >= n_kv_heads x head stride. Strides are multiples of the type's alignment
 * (hk_type_alignment) and at least one row of head_dim values (hk_type_bytes). The K and V views
 * must cover every row of every head: (n_kv_heads-1) x head stride + (capacity-1) x row stride +
 * one row. */
typedef struct hk_kv_layout {
    hk_type type;           /* HK_TYPE_F32, HK_TYPE_F16 or HK_TYPE_Q8_0 (head_dim a multiple of 32) */
    uint32_t capacity;      /* rows per kv head (max_seq), at most 2097152 for hk_sdpa_blk */
    uint64_t k_row_stride;  /* bytes from key row r to r + 1 of one kv head */
    uint64_t k_head_stride; /* bytes from kv head h to h + 1 */
    uint64_t v_row_stride;
    uint64_t v_head_stride;
} hk_kv_layout;

/* Shape of one scaled dot-product attention call. */
typedef struct hk_sdpa_desc {
    uint32_t n_q;        /* query tokens: 1 for decode, the prompt chunk for prefill (flash-decoding
                          * reads K/V once per 8 query rows, n_q x n_heads/n_kv_heads: fine for
                          * decode and small batches, slow for long prompts; n_q x n_heads x
                          * head_dim below 2^32, the workspace within one binding) */
    uint32_t n_heads;    /* query heads, a positive multiple of n_kv_heads */
    uint32_t n_kv_heads;
    uint32_t head_dim;   /* a multiple of 16 up to 256 (64, 128, 256 on every path) */
    uint32_t seq_k;      /* keys attended: cache rows 0 .. seq_k-1 (1 <= seq_k <= kv.capacity);
                          * ignored when hk_sdpa_blk gets a seq_k counter */
    float scale;         /* logits are scale * q.k, usually 1/sqrt(head_dim) */
    int causal;          /* nonzero: query i (0-based, of n_q) sees keys 0 .. seq_k - n_q + i (the
                          * queries are the last n_q positions); needs n_q <= seq_k */
    hk_kv_layout kv;
    hk_type out_type;    /* HK_TYPE_F32 (0, the default): out is f32 [n_q, n_heads, head_dim];
                          * HK_TYPE_Q8_1: out is those values as Q8_1 blocks, n_q x n_heads x
                          * head_dim / 32 of them (36 bytes each), bit-identical to hk_quantize_q8_1
                          * of the f32 output: the decode's input to the int8 O projection without a
                          * dispatch of its own. Needs head_dim a multiple of 32 (else
                          * HK_ERROR_INVALID_ARGUMENT, as any other type is) and the flash-decoding
                          * path (hk_sdpa_path "decode"; else HK_ERROR_UNSUPPORTED) */
} hk_sdpa_desc;

/* The kernel hk_sdpa_blk runs for this shape on this context: "decode" (flash-decoding),
 * "flash-coopmat" (flash attention on the matrix cores) or "flash" (its portable twin); NULL for a
 * shape hk_sdpa_blk refuses. (Tests and benchmarks print it, as hk_mmq_path.) */
HK_API const char *hk_sdpa_path(hk_context *context, const hk_sdpa_desc *desc);

/* Bytes of workspace hk_sdpa_blk needs for this shape on this device (0: none; the workspace
 * view may then be {NULL, 0}). Depends on the shape, kv.capacity, the device, a cached autotuner
 * winner and the tuning hooks (HK_SDPA_*, HK_FLASH_*), never on seq_k, so one workspace serves a
 * replayed stream whatever the number of keys. Flash-decoding needs
 * (n_q x n_heads x splits x (head_dim + 2) + n_kv_heads x row chunks x (splits + 2)) x 4 bytes,
 * the splits fixed by kv.capacity and the device (at least capacity/2048; none when one split
 * serves, e.g. a short cache on a CPU device); decode with H=32, Hkv=8, d=128 on a GPU
 * (32 splits): 534 KB. */
HK_API hk_status hk_sdpa_workspace_bytes(hk_context *context, const hk_sdpa_desc *desc, uint64_t *out_bytes);

/* Scaled dot-product attention: out[i, h, :] = softmax_j(scale * q[i, h, :] . K[h', j, :]) V[h', j, :]
 * over the keys j query i sees (all seq_k, or the causal prefix), h' = h / (n_heads/n_kv_heads).
 * Decode (n_q small) splits the keys over many workgroups per kv head (flash-decoding: one
 * workgroup reads each K/V row once for up to 8 query rows, the rows being the kv head's query
 * heads times the queries) and combines their partial (max, sum, acc) through `workspace`
 * (hk_sdpa_workspace_bytes), in the same dispatch (the last split of each kv head to finish does
 * it, found by arrival words the workspace holds, which need no initialisation: any contents
 * work, the workspace may serve other kernels between calls) or, for a short f16 or f32 cache on
 * a GPU, in a second dispatch of the same call; prefill runs flash attention on the matrix cores
 * where the device has them.
 * seq_k_counter: {NULL, 0} to use desc->seq_k; else a u32 on the device (4-byte aligned offset)
 * read when the kernel runs, so a recorded stream can be replayed for the next token after
 * writing the new count. A counter value of 0 or above kv.capacity (or below n_q when causal) is
 * clamped into range; rows of the cache past the count are never read. The number of splits is
 * fixed when the call is recorded; each split takes its share of whatever count it reads, and at
 * least a minimum of keys (HK_SDPA_SPLIT_KEYS), so a count well under the capacity leaves the
 * last splits idle and is combined from fewer partials.
 * Views: q and out 4-byte aligned, the caches at their type's alignment; f16 and f32 caches whose
 * views and strides are multiples of 16 bytes are read 16 bytes at a time (faster). Arithmetic
 * is f32 (softmax in base 2); against a double reference on the dequantized cache the output is
 * within about 1e-6 of its scale.
 * Non-finite inputs give what IEEE arithmetic gives on the definition, on every path: with
 * s_j = scale * q[i, h, :] . K[h', j, :] over the keys j that query i sees, out[i, h, :] is NaN
 * in every column when some s_j is NaN or +inf, or every s_j is -inf (so a NaN or inf in
 * q[i, h, :], or a NaN in a K row it sees, makes the row NaN; so does an inf in such a K row,
 * unless its score is -inf: the key then has weight 0). Otherwise out[i, h, c] is NaN or +-inf
 * where V[h', j, c] is NaN or inf for a key j that query i sees (whatever its weight), and as for
 * finite inputs elsewhere. Cache rows a query does not see (at or past seq_k, past its causal
 * limit) never affect its output, whatever they hold.
 * The workspace is scratch for the call: two calls that may run at once (two streams) need two
 * workspaces. Any subgroup size; no optional device feature (subgroup shuffles where the device
 * has them).
 * Flash-decoding's limits: kv.capacity <= 2097152 (at most 1024 splits of at most 2048 keys, so
 * no invocation loops more than ~60000 times); head_dim as above.
 * Tuning hooks: docs/tuning.md (HK_SDPA_*); they change the workspace size, so set them before
 * hk_sdpa_workspace_bytes and keep them while recording. For n_q = 1 an autotuner winner for the
 * shape class (hk_tune, HK_TUNE_SDPA_DECODE) takes precedence over them (and fixes the workspace
 * size as they do). */
HK_API hk_status hk_sdpa_blk(hk_context *context, hk_stream *stream, const hk_sdpa_desc *desc, hk_view q,
                             hk_view k_cache, hk_view v_cache, hk_view out, hk_view workspace,
                             hk_view seq_k_counter);

/* Prefill (n_q > 1) with flash attention: workgroups of 64 rows (matrix cores, by default), a
 * row being one (query, query head) pair and the rows of one kv head's query heads sharing every
 * K/V tile, stage the keys 32 at a time (the next tile's loads in flight during the current
 * tile's work) and walk them with an online softmax; tiles and chunks past the
 * causal diagonal are not visited. Each subgroup owns 16 rows and runs its softmax on its own
 * (no workgroup barrier per chunk).
 *  - Matrix cores: Q.K^T and P.V on KHR cooperative matrices (16x16x16, f16 x f16 -> f32) where
 *    the device lists that shape at subgroup scope and has shaderFloat16, subgroup size control
 *    (subgroups of 16 to 64 invocations) and the shared memory for a tile (the defaults take
 *    23 to 46 KiB at head_dim 128 and 15 to 38 KiB at 64, by the prompt's length and where
 *    the softmax runs; smaller tiles serve larger heads and smaller devices, down to 28 KiB at
 *    head_dim 256). scale * q, K, V and the softmax weights are
 *    rounded to f16 (about 1e-3 of the output scale for logits of a few units, more for larger
 *    logits; |scale * q * log2(e)| and the K and V values of f32 and Q8_0 caches must stay
 *    within f16's 65504); sums are f32.
 *  - Elsewhere, or with HK_FEATURE_COOPMAT_KHR in hk_context_desc.disable_features: a portable
 *    twin, f32 throughout (about 1e-6), 16 rows per workgroup (8 at head_dim 256 where shared
 *    memory is short), key tiles of 32, 16 or 8 as the shared memory allows.
 *  - Every head_dim hk_sdpa_blk accepts (multiples of 16 up to 256); f32, f16 and Q8_0 caches.
 *  - Bounded loops: a workgroup walks at most 8192 keys (matrix cores; 2048 on the twin).
 *    Longer caches, and short ones with few rows (under 256 workgroups), are split in up to 64
 *    chunks of keys (at least 512 keys each) whose partial results a second pass merges; the
 *    workspace then holds chunks x n_q x n_heads x (head_dim + 2) floats (sized from
 *    kv.capacity). A cache that needs more than 64 chunks (kv.capacity above 524288 keys on the
 *    matrix cores, 131072 on the twin, however few the rows), or a workspace larger than one
 *    binding, goes to flash-decoding instead.
 *  - Tuning hooks: docs/tuning.md (HK_FLASH_*). An autotuner winner for the shape class (hk_tune,
 *    HK_TUNE_FLASH_PREFILL) takes precedence over them and the defaults above (and fixes the
 *    workspace size as they do: tune before sizing workspaces). */

/* Rotary position embedding fused with the KV-cache append, for n_tokens new tokens. */
typedef struct hk_rope_desc {
    uint32_t n_tokens;
    uint32_t n_heads;    /* query heads */
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t rot_dim;    /* leading dims of each head that rotate: even, <= head_dim (0: head_dim) */
    int neox;            /* nonzero: dim i pairs with i + rot_dim/2 (NeoX, e.g. Qwen, GPT-NeoX);
                          * 0: dims 2i and 2i+1 pair (GPT-J / ggml "normal" rope, e.g. LLaMA) */
    float theta_base;    /* pair i turns by pos * freq_scale * theta_base^(-2i/rot_dim) / factor_i */
    float freq_scale;    /* linear position scaling; 1 for none */
    hk_kv_layout kv;
    hk_view q_norm;      /* f32 [head_dim]: each q head is RMSNorm'ed with this weight before it rotates
                          * (Qwen3's q_norm), bit-identical to hk_rmsnorm over the heads (rows =
                          * n_tokens x n_heads, n = head_dim) before hk_rope; {NULL, 0}: none */
    hk_view k_norm;      /* the same for each k head (Qwen3's k_norm), before it rotates into the cache */
    float norm_eps;      /* their epsilon: positive and finite where either is given */
} hk_rope_desc;

/* q f32 [n_tokens, n_heads, head_dim] and k f32 [n_tokens, n_kv_heads, head_dim] are rotated by
 * their token's position (positions: u32 [n_tokens] on the device, read when the kernel runs);
 * the rotated q goes to q_out (which may be q itself), the rotated k and the unrotated v
 * (f32 [n_tokens, n_kv_heads, head_dim]) are written into k_cache and v_cache at row
 * positions[t], converted to kv.type. freq_factors: {NULL, 0}, or f32 [rot_dim/2] dividing each
 * pair's frequency (llama.cpp's rope_freqs). A position >= kv.capacity writes no cache row (its
 * q is still rotated); two tokens at one position leave one of them in the row.
 * Conversion: f16 rounds to nearest even (as hk_f32_to_f16); Q8_0 per 32 values d = amax/127,
 * q = round(x/d), as hk_quant_row_q8_0 up to the device's division (a q may differ by one, d by
 * one f16 step, rarely). Angles: the frequencies are formed in double-float precision and
 * position x frequency is reduced modulo a turn in integers, so the angle error is about
 * 2e-13 x position x frequency: ~2e-7 rad at position 2^20 and ~4e-6 at 2^24 for frequencies
 * up to 1 rad per position, whatever the device's sin/cos precision. theta_base and
 * freq_scale positive; n_heads and n_kv_heads at most 65535; n_tokens x n_heads x head_dim below
 * 2^32. desc->q_norm and desc->k_norm: {NULL, 0} or 4-byte aligned views of head_dim floats that no
 * output overlaps; a NULL buffer with an offset, or norm_eps not positive and finite where a norm is
 * given, is HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_rope(hk_context *context, hk_stream *stream, const hk_rope_desc *desc, hk_view q, hk_view k,
                         hk_view v, hk_view positions, hk_view freq_factors, hk_view q_out, hk_view k_cache,
                         hk_view v_cache);

/* The matrices of an hk_matvec_int8_qkv call (roles: a mask of these; w[] in this order). */
#define HK_QKV_Q 1u
#define HK_QKV_K 2u
#define HK_QKV_V 4u

/* One token's attention projections with hk_rope's epilogue, in one dispatch instead of two and a
 * barrier: the matrices named in roles, in the order Q, K, V, are w[0], w[1], ... (as
 * hk_matvec_int8_multi's: GGUF rows of k values of wtype, Q's n_heads x head_dim rows, K's and V's
 * n_kv_heads x head_dim). Q's products, rotated, go to q_out (f32 [n_heads, head_dim]); K's,
 * rotated, and V's go into k_cache and v_cache at row positions[0] (u32 on the device, read when
 * the kernel runs; none at or past kv.capacity). Bit-identical to hk_matvec_int8_multi of the same
 * matrices into an f32 buffer, then hk_rope(desc) on it (the same sums, then hk_rope's angles,
 * rotation and conversion, the same code). desc as hk_rope's, with n_tokens 1, neox 0 (GGUF's
 * normal pairs 2i and 2i + 1: a NeoX pair lies in rows that two workgroups compute), no q_norm or
 * k_norm (they need a whole head) and kv.type F32 or F16; otherwise HK_ERROR_UNSUPPORTED, and hk_rope
 * serves. Views: those of the roles given (q_out, k_cache, v_cache; the others may be {NULL, 0}),
 * positions, and freq_factors ({NULL, 0} or f32 [rot_dim / 2]), each as hk_rope asks; q_out overlaps
 * no input. Types, alignment, k, limits and errors otherwise as hk_matvec_int8_multi's; a NULL w or
 * desc, or roles 0 or with other bits, is HK_ERROR_INVALID_ARGUMENT. */
HK_API hk_status hk_matvec_int8_qkv(hk_context *context, hk_stream *stream, hk_type wtype, uint32_t roles,
                                    const hk_view *w, hk_view xq, uint32_t k, const hk_rope_desc *desc,
                                    hk_view positions, hk_view freq_factors, hk_view q_out, hk_view k_cache,
                                    hk_view v_cache);

/* ---- prefill ------------------------------------------------------------------------------------
 * Int8 GEMM for prompt processing (MMQ): the activation quantized once to Q8_1 (hk_quantize_q8_1,
 * one row of k/32 blocks per token), the weights read as GGUF blocks in place, never expanded in
 * memory. Within each 32-value block the int8 quants are multiplied and summed exactly in int32;
 * the blocks' scales are applied in f32 (Q4_K and Q5_K: d*sc*dot(q, xq) - dmin*m*sum(xq) per
 * 32-value sub-block, with sum(xq) the exact integer sum of the activation quants; a Q8_1 block's
 * s field is never read). Against the f32 contraction of the dequantized operands (src/ref/mmq.c) the
 * outputs differ only by f32 rounding.
 * Two arms with one tiling, picked per device: int8 x int8 -> int32 cooperative matrices
 * (VK_KHR_cooperative_matrix with 16x16x32 signed 8-bit subgroup matrices listed in
 * caps.coopmat_khr_props, shaderInt8, full subgroups of caps.subgroup_size: "coopmat"), else packed
 * int8 dot products from shared-memory tiles ("dot"; "scalar": plain arithmetic where the device
 * has no shaderIntegerDotProduct). hk_context_desc.disable_features (HK_FEATURE_COOPMAT_KHR,
 * HK_FEATURE_INTEGER_DOT) selects the portable arms. The tile is a set of specialization
 * constants. Tuning hooks: docs/tuning.md (HK_MMQ_*); an autotuner winner for the shape class
 * (hk_tune, HK_TUNE_MMQ / HK_TUNE_MMQ_ID) takes precedence over the tile hooks.
 * Limits (all calls): k <= 65536 (per-invocation loop trip counts stay bounded); every tensor
 * within one binding of the device (caps.max_storage_buffer_range; the call says which one is too
 * large).
 */

/* The arm hk_mmq / hk_mmq_id use on this context for a weight type: "coopmat", "dot" or "scalar";
 * NULL for a type without MMQ kernels. (Tests and benchmarks print it.) */
HK_API const char *hk_mmq_path(hk_context *context, hk_type wtype);

/* out[i, j] = sum_t X[i, t] * W[j, t] for i < m, j < n: X given as Q8_1 blocks, m rows of k/32
 * blocks (xq, offset a multiple of 4); W n contiguous GGUF rows of k values of wtype (Q8_0, Q4_K,
 * Q5_K or Q6_K; offset a multiple of 2); out f32 [m, n] row-major. m, n >= 1 (any values: tails
 * are guarded); k a positive multiple of the weight block (32 Q8_0, 256 Q4_K/Q5_K/Q6_K).
 * A few tokens (m <= 16) with w and xq at offsets that are multiples of 16, k a multiple of 256
 * and, for Q6_K, n * k / 256 a multiple of 8 (its tensor a multiple of 16 bytes) take a kernel
 * built for streaming the weights (32 Q4_K or Q5_K, 16 Q8_0 or Q6_K rows per workgroup, k split over
 * its warps; int8 16x8x32 matrices up to 8 tokens and 16x16x32 past them
 * where the device lists them, else packed dot products): the speculative-decoding and
 * small-batch case, the matrix-unit counterpart of hk_matvec_int8_tokens (whose sums it matches
 * at the MMQ gates, not bit for bit). Any other call of m <= 16 (HK_MATVEC_MAX_TOKENS: other
 * offsets, k or Q6_K row counts) that hk_matvec_int8_tokens takes (its Q4_K and Q5_K views on 16 bytes,
 * its loop limits) is that call, bit for bit: the GEMM's tiles would spend most of their work on
 * rows past m. */
HK_API hk_status hk_mmq(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq, hk_view out,
                        uint32_t m, uint32_t n, uint32_t k);

/* MoE prefill, step 1: groups routed slots by expert. ids u32 [n_slots] (tokens x top_k, the
 * router's output); writes offsets u32 [n_experts + 1] (offsets[e] the first entry of expert e in
 * slots, offsets[n_experts] the number of slots grouped), slots u32 [n_slots] (the slot indices of
 * expert 0, then expert 1, ..., ascending within each expert; entries past offsets[n_experts] set
 * to 0xFFFFFFFF) and dropped u32 [1] (how many ids were >= n_experts: those slots appear nowhere).
 * Deterministic. 1 <= n_slots <= 262144; 1 <= n_experts <= 1024 (fewer where the device has less
 * than 20 bytes of shared memory per expert: HK_ERROR_UNSUPPORTED says so). */
HK_API hk_status hk_moe_expert_rows(hk_context *context, hk_stream *stream, hk_view ids, hk_view offsets,
                                    hk_view slots, hk_view dropped, uint32_t n_slots, uint32_t n_experts);

/* Shape of an expert-indexed MMQ: W a bank of n_experts experts [n_experts, n, k]. */
typedef struct hk_mmq_id_shape {
    uint32_t n_experts;
    uint32_t n;               /* output columns (rows of one expert's weights) */
    uint32_t k;               /* a multiple of the weight block */
    uint32_t n_slots;         /* routed slots (tokens x top_k): rows of out */
    uint32_t slots_per_x_row; /* consecutive slots sharing one row of xq: top_k when xq holds one row
                               * per token (gate/up: slot s reads row s / top_k), 1 when it holds
                               * one row per slot (down); divides n_slots */
} hk_mmq_id_shape;

/* MoE prefill, step 2: for every expert e and every slot s listed for it in slots[offsets[e] ..
 * offsets[e+1]) (hk_moe_expert_rows), out[s, :] = W[e] . X[s / slots_per_x_row] (wtype as hk_mmq's:
 * Q8_0, Q4_K, Q5_K or Q6_K) as hk_mmq computes it (bit for bit: hk_mmq_id of one expert listing
 * every slot in order reproduces hk_mmq); each expert's weights are read once per tile of its rows
 * (32 by default), the activation rows are gathered through the list and each result written to
 * its slot's row (nothing permuted is materialised); experts without slots cost nothing. xq:
 * n_slots / slots_per_x_row rows of k/32 Q8_1 blocks; offsets u32 [n_experts + 1], slots u32
 * [n_slots]; out f32 [n_slots, n]. Rows of slots listed for no expert (dropped ids) are not
 * written. Whatever offsets and slots hold, nothing is read or written out of bounds: offsets are
 * clamped into 0..n_slots, slot values >= n_slots are skipped. A slot listed twice (by one expert
 * or by two; hk_moe_expert_rows never does this) gets an undefined row, any mix of the products
 * written to it, and nothing outside that row changes. n_experts >= 1, n_slots >= 1. */
HK_API hk_status hk_mmq_id(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view xq,
                           hk_view offsets, hk_view slots, hk_view out, const hk_mmq_id_shape *shape);
/* hk_mmq_id for Q4_K experts (gate/up projections), Q5_K experts and Q6_K experts (down
 * projections). */
HK_API hk_status hk_mmq_q4k_id(hk_context *context, hk_stream *stream, hk_view w, hk_view xq, hk_view offsets,
                               hk_view slots, hk_view out, const hk_mmq_id_shape *shape);
HK_API hk_status hk_mmq_q5k_id(hk_context *context, hk_stream *stream, hk_view w, hk_view xq, hk_view offsets,
                               hk_view slots, hk_view out, const hk_mmq_id_shape *shape);
HK_API hk_status hk_mmq_q6k_id(hk_context *context, hk_stream *stream, hk_view w, hk_view xq, hk_view offsets,
                               hk_view slots, hk_view out, const hk_mmq_id_shape *shape);

/* ---- prefill: f16 matrix-core GEMM ------------------------------------------------------------
 * The prefill projection for devices without int8 matrix units: the weights are dequantized to f16
 * tiles in shared memory and multiplied with f16-rounded activations, sums in f32. On devices with
 * VK_KHR_cooperative_matrix (f16 x f16 -> f32 at 16x16x16 in subgroup scope, with shaderFloat16,
 * full subgroups and the Vulkan memory model) the products run on the matrix units; elsewhere a
 * portable twin runs the same tiles with f32 FMAs (hk_gemm_f16_path says which). Against
 * the full-precision product the result differs by the f16 rounding of both operands (about 1e-3
 * of the output scale; the tests gate it at 5e-2; F16 weights are exact, so only x is rounded).
 * x values must lie within the f16 range (|x| < 65504; larger ones become infinities). */
/* Limits of hk_gemm_f16 (HK_ERROR_INVALID_ARGUMENT past them). The shader's loops do not depend on
 * m and n (one workgroup per output tile); a k longer than one dispatch's loop budget (with 32-wide
 * subgroups 43008 values on the 128 x 128 matrix-unit tiles, 59008 on the 64 x 64 ones, 8512 on the
 * portable ones; src/kernels/gemm.c counts them) is split into several dispatches that add to out,
 * so k is limited only to keep their number small (at most 124). m * n, m * k and the weights are further
 * bounded by caps.max_storage_buffer_range bytes per view.
 * Tiles (specialization constants, picked by shape): coopmat 128 x 128 of 8 subgroups (2 x 4 warps
 * of 64 x 32) with 64-value k steps where the shape yields at least 100 of them, else 64 x 64 of 4;
 * portable 64 x 64 of 4 warps, 32-value steps. x is read 16 bytes at a time where x.offset is a
 * multiple of 16 (and k of 4), Q4_K and Q5_K weights where w.offset is (4 bytes where it is a
 * multiple of 4), F16 weights likewise where the rows' 2k bytes also are; each k step's loads are issued before
 * the previous step's multiplies. Tuning hooks: docs/tuning.md
 * (HK_GEMM_*); an autotuner winner for the shape class (hk_tune, HK_TUNE_GEMM_F16) takes
 * precedence over the tiles and HK_GEMM_TILE / HK_GEMM_PREFETCH (HK_GEMM_WIDE still applies). */
#define HK_GEMM_MAX_M 16777216u
#define HK_GEMM_MAX_N 16777216u
#define HK_GEMM_MAX_K 1048576u

/* out[m, n] = x[m, k] . deq(W[n, k])^T: W is n contiguous GGUF rows of k values of wtype (Q8_0,
 * Q4_K, Q5_K, Q6_K, or F16: rows of k f16 values, multiplied as they are) exactly as stored (2-byte
 * aligned), x is f32 row-major [m, k] (4-byte aligned; 16-byte aligned reads faster), out f32
 * row-major [m, n]. k is a positive multiple of the type's block (32 for Q8_0, 256 for
 * Q4_K/Q5_K/Q6_K, any k for F16, whose last k step reads zeros past k). Products on f16 operands, accumulation in
 * f32. Any m and n (tails are guarded); limits above. Where k needs several dispatches (see the limits),
 * out is read as well as written and a failure after the first of them leaves out partly written. */
HK_API hk_status hk_gemm_f16(hk_context *context, hk_stream *stream, hk_type wtype, hk_view w, hk_view x,
                             hk_view out, uint32_t m, uint32_t n, uint32_t k);
/* The arm hk_gemm_f16 uses on this context for a weight type: "coopmat" (the cooperative-matrix
 * units), "portable" (no VK_KHR_cooperative_matrix with f16 16x16x16, HK_FEATURE_COOPMAT_KHR
 * disabled, or a library built without a glslang that has it); NULL for a type without the GEMM.
 * (Tests and benchmarks print it, as hk_mmq_path.) */
HK_API const char *hk_gemm_f16_path(hk_context *context, hk_type wtype);

/* ---- autotuner ---------------------------------------------------------------------------------
 * Some kernel families take their schedule (workgroup shape, rows per subgroup, split count, ...:
 * specialization constants and launch geometry, never the math) from a small set of named integer
 * parameters. hk_tune searches them for one shape on the context's device and caches the winner;
 * from then on every call of that family and shape class on a context of that device takes it.
 * A call's schedule comes from, first to last: the context's cached winner for its shape class,
 * the family's tuning hooks (docs/tuning.md), the built-in default (valid on every device).
 * hk_schedule_last says which one served a family's last call.
 *
 * Families and their parameters (values searched; constraints checked by a static tier before
 * any GPU time: workgroup over maxComputeWorkGroupInvocations, shared memory over the device's,
 * lanes per key over the smallest subgroup, a tile that does not divide, loop budgets, clamped
 * combinations). The arm a family runs (matrix cores or portable) is the device's, never a
 * parameter: a schedule is searched and cached for the arm the call takes.
 *  - HK_TUNE_MATVEC_INT8: hk_matvec_int8 (one token, dense). Shape class: weight type, rows, k.
 *    nrows 1,2,4 (rows per subgroup), items 1,2,4 (items per lane per step), load_bits 16,32
 *    (Q8_0 weight loads; 32 for the K-quants). Every schedule is bit-identical (hk_matvec_int8_tokens).
 *    Its winners also schedule hk_matvec_int8_add and hk_matvec_int8_glu (the GLU's nrows counting
 *    both matrices' rows: see its declaration), and hk_matvec_int8_multi (the winner for the total
 *    rows of its matrices).
 *  - HK_TUNE_MATVEC_TOKENS: hk_matvec_int8_tokens with 2..16 tokens. Shape class: weight type,
 *    rows, k, tokens ("q4_k:4096x4096x8"). subgroups 4,8,16,32 (per workgroup), nrows 1,2,4,
 *    items 1,2,4, resident 0,1 (x staged per step or once per workgroup; 1 runs as many tokens
 *    per pass as fit), wgs 64..8192 (the most workgroups; the HK_MATVEC_TOKENS_* hooks). The gate
 *    is the reference at 1e-5 and, since every schedule must be, bit-identity with the
 *    default schedule (itself bit-identical with hk_matvec_int8 on each token).
 *  - HK_TUNE_SDPA_DECODE: hk_sdpa_blk with n_q = 1 (flash-decoding). Shape class: cache type,
 *    n_heads, n_kv_heads, head_dim, and kv.capacity's power-of-two range (never seq_k: a recorded
 *    stream replays with one plan). groups 8..512 (workgroups the split count aims for), wg
 *    32..256, lpk 2..16, kb 1..8, rows 1..8, single 0,1 (HK_SDPA_* hooks). Schedules differ in
 *    float rounding only (each within the kernel's gate). A cached winner can change
 *    hk_sdpa_workspace_bytes: tune before sizing workspaces.
 *  - HK_TUNE_GEMM_F16: hk_gemm_f16. Shape class: weight type, m's power-of-two range, n, k.
 *    wm, wn 1..8 (warp grid), rm, rn 1..4 (16x16 tiles per warp), bk 32..128 (k per step; it must
 *    divide k), prefetch 0,1 (HK_GEMM_TILE "wm,wn,rm,rn,bk" and HK_GEMM_PREFETCH). Gate: 5e-2 of
 *    the output scale against the full-precision product and 1e-2 against the product of the
 *    f16-rounded operands (the tests' gates).
 *  - HK_TUNE_FLASH_PREFILL: hk_sdpa_blk with n_q > 1 where flash attention serves it. Shape class:
 *    cache type, n_heads, n_kv_heads, head_dim, causal, and the power-of-two ranges of n_q and of
 *    kv.capacity. subgroups 1..8, rows 8..64 (rows of a unit: 16 x mr of HK_FLASH_TILE on the
 *    matrix cores, where a unit is a subgroup, so 16 or 32; the portable twin's unit is its one
 *    workgroup of 64 invocations, subgroups 1, qreg 0), bc 8..64, bkv 16..128, qreg 0,1,
 *    prefetch 0,1 (HK_FLASH_TILE "subgroups,mr,bc,bkv,qreg,prefetch"), groups 64..512
 *    (HK_FLASH_GROUPS), order 0,1 (the row tiles heaviest first or in zigzag order,
 *    HK_FLASH_ORDER). Gate: 5e-3 on the matrix cores (f16 inputs), 1e-4 on the twin, against
 *    the double softmax. The emulated arm (HK_FLASH_EMULATE_COOPMAT) takes no schedule.
 *  - HK_TUNE_MMQ, HK_TUNE_MMQ_ID: hk_mmq, hk_mmq_id. Shape class: weight type, m's power-of-two
 *    range (hk_mmq_id: n_slots'), n, k (hk_mmq_id: and n_experts, slots_per_x_row). wm, wn 1..8,
 *    rm, rn 1..4, ks 1..8 (HK_MMQ_TILE / HK_MMQ_ID_TILE "wm,wn,rm,rn,ks"; 2 or more for the
 *    k-quants), prefetch 0,1 (HK_MMQ_PREFETCH), rolled 0,1 (HK_MMQ_ROLLED). Gate: 1e-5 of the
 *    output scale on the coopmat arm, 1e-6 on the portable ones, against the exact contraction.
 *  - HK_TUNE_MOE_MATVEC_INT8: hk_moe_matvec_int8. Shape class: weight type, n_experts, n, k,
 *    slots' power-of-two range, x per slot or not ("q4_k:e128/n768/k2048/s5-8",
 *    ".../s5-8/per-slot"). The one-token kernel's parameters, as HK_TUNE_MATVEC_INT8: nrows 1,2,4
 *    (it must divide n: a row group stays inside one slot), items 1,2,4, load_bits 16,32 (Q8_0;
 *    32 for the K-quants; the HK_MATVEC_Q8_0_LOAD_BITS hook). The default: nrows by the rows
 *    (slots x n) as hk_matvec_int8 takes them, the largest dividing n, items 1. Every schedule is
 *    bit-identical; the gate is the reference (1e-5) and the default schedule's bits.
 * A winner serves every shape of its class: it was the fastest at the shape tuned, and any
 * schedule runs correctly on any shape of the class (where one could not, the call takes the
 * default instead). Tune at the shape that matters most within a class.
 *
 * The winner cache: the file tune.tsv in hk_context_desc.tune_cache_dir (default
 * $HK_TUNE_CACHE_DIR, else $XDG_CACHE_HOME/hkernel, else $HOME/.cache/hkernel), one line per
 * winner: the format tag "hkernel-tune-2", vendor id, device id, driver version (hex), library
 * version, kernel, shape class ("q4_k:m257-512/n4096/k4096"), schedule
 * ("nrows=2,items=1,load_bits=32"), its time in ms; tab-separated, '#' comments. A context reads
 * the lines of its device, driver and library version at its first call of a tuned family (or of
 * hk_tune, hk_schedule_last, hk_tune_cache_file), never at creation; a malformed line, or one of
 * this device in another format (such as "hkernel-tune-1", whose shape classes are exact shapes)
 * or with another library version, is ignored then with a warning on stderr ("hkernel: tune
 * cache: ..."), never a failure, and a line whose schedule no longer matches its family's
 * parameters likewise at that family's first call; other devices' and formats' lines are kept.
 * Where the file holds a shape class twice, the last line that checks out serves. A line longer than 1023 characters is
 * ignored with a warning, as a malformed one. hk_tune writes under an exclusive lock on
 * tune.tsv.lock (fcntl; another process's lock is waited for a few seconds at most), rereading
 * the file and renaming a new one over it, so concurrent tuners (threads or processes) leave a
 * valid file holding every winner. Where the file cannot be written, or is not a regular file
 * (hk_context_desc.tune_cache_dir), the winner still serves the context (a warning says so).
 * hk-check tune matvec_int8_tokens q4_k:4096x4096x8 runs a search from the command line.
 * Testing only: HK_TUNE_PLANT_WRONG, HK_TUNE_FAKE_TIMES, HK_TUNE_GENETIC (docs/tuning.md). */
typedef enum hk_tune_kernel {
    HK_TUNE_MATVEC_INT8 = 1,
    HK_TUNE_SDPA_DECODE = 2,
    HK_TUNE_MATVEC_TOKENS = 3,
    HK_TUNE_GEMM_F16 = 4,
    HK_TUNE_FLASH_PREFILL = 5,
    HK_TUNE_MMQ = 6,
    HK_TUNE_MMQ_ID = 7,
    HK_TUNE_MOE_MATVEC_INT8 = 8
} hk_tune_kernel;

/* The shape a search runs, one struct per family (hk_tune_desc.shape holds the kernel's member).
 * Counts the shape class buckets (m, slots, n_q, capacity) may be any in their range: the
 * search runs this one. For the tuner's own inputs and reference the weights (or the KV cache)
 * are at most 2^28 values (2^26 for a cache), activations and outputs 2^27. */
typedef struct hk_tune_matvec_shape {
    hk_type wtype;   /* q8_0, q4_k, q5_k or q6_k */
    uint32_t rows, k; /* hk_matvec_int8's limits */
    uint32_t tokens;  /* HK_TUNE_MATVEC_INT8: 1 (or 0); HK_TUNE_MATVEC_TOKENS: 2..16, with
                       * hk_matvec_int8_tokens' limit ceil(rows / 32768) * k * (tokens + 1) */
} hk_tune_matvec_shape;

/* HK_TUNE_GEMM_F16 and HK_TUNE_MMQ: m x n outputs, k deep. */
typedef struct hk_tune_gemm_shape {
    hk_type wtype;
    uint32_t m, n, k;
} hk_tune_gemm_shape;

/* HK_TUNE_MMQ_ID: the expert bank and routed slots as hk_mmq_id takes them; the search routes
 * shape.n_slots / top_k tokens to top_k distinct experts each (seeded). slots_per_x_row is top_k
 * (x per token) or 1 (x per slot). */
typedef struct hk_tune_mmq_id_shape {
    hk_type wtype;
    hk_mmq_id_shape shape;
    uint32_t top_k; /* 1..n_experts, dividing n_slots */
} hk_tune_mmq_id_shape;

/* HK_TUNE_MOE_MATVEC_INT8: as hk_moe_matvec_int8 takes it (shape.slots routed slots, distinct
 * experts within each run of n_experts slots, seeded); hk_moe_matvec_int8's limits. */
typedef struct hk_tune_moe_shape {
    hk_type wtype;
    hk_moe_shape shape;
} hk_tune_moe_shape;

/* HK_TUNE_SDPA_DECODE (n_q 1) and HK_TUNE_FLASH_PREFILL (n_q >= 2, causal: n_q <= capacity):
 * head-major caches of kv_type (f32, f16, q8_0) with capacity rows, timed with seq_k = capacity;
 * heads and head_dim as hk_sdpa_desc takes them. */
typedef struct hk_tune_attention_shape {
    hk_type kv_type;
    uint32_t n_heads, n_kv_heads, head_dim, capacity;
    uint32_t n_q;
    int causal;
} hk_tune_attention_shape;

typedef struct hk_tune_desc {
    /* sizeof(hk_tune_desc) as the caller was compiled: set by hk_tune_desc_init. */
    uint32_t struct_size;
    hk_tune_kernel kernel;
    /* the kernel's shape: matvec (HK_TUNE_MATVEC_INT8, HK_TUNE_MATVEC_TOKENS), gemm
     * (HK_TUNE_GEMM_F16, HK_TUNE_MMQ), mmq_id, moe (HK_TUNE_MOE_MATVEC_INT8), attention
     * (HK_TUNE_SDPA_DECODE, HK_TUNE_FLASH_PREFILL) */
    union {
        hk_tune_matvec_shape matvec;
        hk_tune_gemm_shape gemm;
        hk_tune_mmq_id_shape mmq_id;
        hk_tune_moe_shape moe;
        hk_tune_attention_shape attention;
    } shape;
    uint64_t seed;          /* inputs and the genetic search's draws (0: 1) */
    uint32_t max_measured;  /* stop after measuring this many schedules (0: 32) */
    uint32_t repeats;       /* timed batches per schedule, the fastest kept (0: 5), at most 1000 */
    uint32_t batch;         /* calls per timed batch (0: 8, more where 8 take under 2 ms, up to 256),
                             * at most 1000 */
    uint32_t copies;        /* copies of the weights (cache) the calls rotate over, up to 64 (0:
                             * enough for 64 MiB) */
    int force;              /* search even when the context has a winner for this shape */
    int no_store;           /* keep the winner in the context only, write no file */
    int verbose;            /* print each schedule and its fate on stdout */
} hk_tune_desc;

/* Zeroes desc and sets struct_size; call it through the macro. */
HK_API void hk_tune_desc_init_sized(hk_tune_desc *desc, size_t desc_size);
#define hk_tune_desc_init(desc) hk_tune_desc_init_sized((desc), sizeof *(desc))

/* What hk_tune did. Fields may be appended (hk_tune writes only the caller's sizeof). */
typedef struct hk_tune_report {
    uint32_t struct_size;
    int from_cache;           /* the context had a winner: nothing was measured */
    uint32_t space;           /* schedules in the family's space */
    uint32_t evaluated;       /* schedules looked at (each once) */
    uint32_t measured;        /* run, passed the gate and timed */
    uint32_t rejected_static; /* rejected before any GPU time (or refused by the kernel) */
    uint32_t rejected_gate;   /* ran but diverged from the reference */
    uint32_t duplicates;      /* the same plan as a schedule already measured */
    double default_ms;        /* the schedule a call takes without a winner (NAN from the cache) */
    double best_ms;           /* the winner's time (NAN from the cache) */
    char shape[96];           /* the shape class: "q8_0:4096x4096", "q4_k:m257-512/n4096/k4096" */
    char schedule[128];       /* the winner: "nrows=2,items=1,load_bits=32" */
    char default_schedule[128];
    char rejects[512];        /* reasons with counts: "3 x workgroup of 512 over the device's 256; ..." */
    uint64_t trace;           /* a hash of the schedules evaluated, in order (0 from the cache): two
                               * searches with one seed whose measured times came in the same order
                               * give the same trace */
    /* Where the search measured a schedule faster than the default (and the default passed its
     * gate), both were timed again in turn, 3 times each; default_ms, best_ms and candidate_ms are
     * then the fastest of those repetitions, and the winner (schedule, best_ms) is the candidate
     * or, where default_kept, the default. */
    char candidate[128];      /* that schedule ("" where the default was the fastest, failed its
                               * gate, or the winner came from the cache) */
    double candidate_ms;      /* its time (NAN where candidate is "") */
    double noise;             /* the run-to-run noise those repetitions showed: for each schedule its
                               * slowest over its fastest, less 1, the larger of the two (0.03: 3%;
                               * INFINITY where a repetition failed its gate; NAN where candidate
                               * is "") */
    int default_kept;         /* the candidate was not faster than the default by more than the noise
                               * and 2%: the default is the winner (schedule, best_ms) */
} hk_tune_report;

/* Tunes one kernel family for one shape on the context's device and makes the winner this
 * context's schedule for that shape class, storing it in the cache file (unless desc->no_store).
 * If the context already has a winner for the shape (read from the cache or tuned before) and
 * desc->force is 0, nothing is measured (report->from_cache). Otherwise: seeded inputs, the C
 * reference (double), then the schedule a call takes today (the default or the hooks) and the
 * search: every schedule of a space of at most 64, else a seeded genetic search (population 8,
 * the default among the first where its values are in the lists, the two best kept, tournament,
 * uniform crossover, mutation), until max_measured were measured. The genetic search is
 * deterministic up to the order of the times: its draws depend only on desc->seed and on how the
 * measured times compare (never on their values; equal times count as the earlier schedule
 * faster), so two searches with one seed evaluate the same schedules in the same order (one
 * report->trace) wherever their times came in the same order; timing noise between near-equal
 * schedules can change that order and so the rest of the search.
 * Each schedule passes the static tier, then runs once through the kernel's row of the test
 * suite's kernel table (seeded inputs, poisoned outputs and the bytes around them, the C
 * reference on every output row or, for large outputs, 8 rows spread over them) held to the gate
 * the tests hold the kernel to (int8 matvec and MMQ 1e-5 / 1e-6 of the output scale against the
 * exact contraction, attention 1e-4 / 5e-3 against the double softmax, gemm_f16 as above), and
 * the tokens and MoE matvecs also to the bits of the default schedule; a schedule that diverges
 * or writes outside its outputs is never a winner. Then it is timed cold:
 * batches rotating over weight or cache copies between GPU timestamps (host time where the queue
 * has none), the fastest batch kept. The winner is the fastest measured, the default included,
 * except where a noisy device would make it a guess: a schedule measured faster than the default
 * is timed again with it, the two in turn, 3 times each, and wins only if its fastest repetition
 * beats the default's by more than the noise (the larger relative spread of either's
 * repetitions) and by 2% at least; else (a tie too) the default is the winner, stored as any
 * winner so that the shape is not searched again (report->candidate, noise, default_kept).
 * Runs on this thread, submitting its own work (seconds on a GPU, longer on a CPU device); other
 * threads may use the context meanwhile (their calls of this family and shape are not affected).
 * out_report may be NULL. HK_ERROR_UNSUPPORTED when no schedule passed the gate. Call through
 * the macro, which passes the caller's sizeof. */
HK_API hk_status hk_tune_sized(hk_context *context, const hk_tune_desc *desc, hk_tune_report *out_report,
                               size_t report_size);
#define hk_tune(context, desc, out_report) hk_tune_sized((context), (desc), (out_report), sizeof *(out_report))

/* Which schedule served the last successful call of a family on this context (from any thread):
 * "<source> <schedule>", source "default" (built-in), "env" (a tuning hook was set), "tuned" (the
 * cached winner) or "search" (hk_tune measuring), e.g. "tuned nrows=2,items=1,load_bits=32". The
 * schedule is what ran, after any fallback (the hooks' documentation says which).
 * HK_ERROR_STATE before the family's first call. out_size >= 160 always suffices. */
HK_API hk_status hk_schedule_last(hk_context *context, hk_tune_kernel kernel, char *out, size_t out_size);

/* The path of the context's winner cache file, NULL where no directory could be named. */
HK_API const char *hk_tune_cache_file(const hk_context *context);

#ifdef __cplusplus
}
#endif
#endif
