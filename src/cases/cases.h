/* cases.h — the one table of kernel cases. The tests, hk-check and hk-bench all draw from it: a
 * case is one public kernel (name, gate, how to build seeded inputs and the reference for a
 * shape, how to record it from device views, how to compare, its bytes and operations), with the
 * shapes each consumer runs. Adding a kernel family adds rows here (tools/cases_<family>.c) and
 * nothing to the tools. Uses only the public API and the references. */
#ifndef HK_CASES_H
#define HK_CASES_H

#include "hkernel.h"
#include "hk_ref.h"

#include <stddef.h>

#define HK_CASE_MAX_TENSORS 12

/* What a tensor of a case is to the driver. */
enum {
    HK_CASE_IN,     /* uploaded before the run */
    HK_CASE_OUT,    /* poisoned before the run, read back after it */
    HK_CASE_INOUT,  /* uploaded before the run, read back after it (in-place kernels, caches) */
    HK_CASE_SCRATCH /* a workspace: poisoned, its guards checked, its contents not compared */
};

typedef struct hk_case_tensor {
    const char *name;
    int kind;        /* HK_CASE_IN, ... */
    uint64_t bytes;
    uint32_t align;  /* the offset alignment the API asks of this view */
    int cold;        /* replicated over the cold footprint when timed (weights, KV caches) */
    int alias;       /* -1, or the index of an earlier tensor whose view this one shares (in place) */
    void *host;      /* IN/INOUT: the contents to upload */
    void *got;       /* OUT/INOUT/SCRATCH: the tensor's bytes read back after a check */
} hk_case_tensor;

/* One shape of a case. The meaning of d[] is the case's own (its shape_label says it). */
typedef struct hk_case_shape {
    hk_type type;     /* the weight or cache type (HK_TYPE_F32 where none) */
    uint32_t d[8];
    int variant;      /* a case's own flag (in place, raw blocks, per-slot x, ...) */
    double llama_ms;  /* llama.cpp's Vulkan backend on the H200 for this shape (hk-bench), 0: none */
} hk_case_shape;

/* How much reference a run needs: none (timing only), a sample of the outputs (big shapes in
 * hk-check), or all of them (tests). */
enum { HK_REF_NONE, HK_REF_SAMPLE, HK_REF_ALL };

/* A case instantiated for one shape: host tensors, the reference, the cost of one op. */
typedef struct hk_case_run {
    const struct hk_case *kcase;
    hk_case_shape shape;
    hk_context *ctx;
    int ref_mode;
    hk_case_tensor t[HK_CASE_MAX_TENSORS];
    uint32_t n_tensors;
    float *ref;         /* reference values, compared by the case's compare */
    size_t ref_count;
    void *state;        /* the case's own (freed with free()) */
    double bytes;       /* bytes one op must move, counted on the real storage */
    double flops;       /* useful operations of one op (0: a bandwidth case) */
    char label[96];     /* the shape in words, for reports */
} hk_case_run;

typedef struct hk_case {
    const char *name;   /* the public kernel, as hk-check --only takes it */
    double gate;        /* compare's result must be below it */
    /* Builds the run's host tensors (seeded) and, per run->ref_mode, its reference. */
    hk_status (*prepare)(hk_case_run *run, uint64_t seed);
    /* Records one op on views of the run's tensors (cold ones at the copy being timed); op counts
     * the ops of a timed batch (0 when checked). */
    hk_status (*record)(const hk_case_run *run, hk_stream *stream, const hk_view *views, uint32_t op);
    /* The error measure of the outputs now in the tensors' host copies (below gate: pass); may
     * write a detail. NULL: hk_scale_rel of the first OUT/INOUT tensor against run->ref. */
    double (*compare)(const hk_case_run *run, char *detail, size_t detail_size);
    /* Optional: 0 with a reason if the device cannot run this case at all. */
    int (*available)(hk_context *ctx, char *why, size_t why_size);
    /* Optional: the gate of the arm the device runs for this shape (NULL: gate). */
    double (*gate_of)(const struct hk_case_run *run);
    /* Optional: the bytes the run's scratch tensor needs under the schedule its calls take now
     * (hk_case_fit_scratch). */
    uint64_t (*scratch_bytes)(const struct hk_case_run *run);
    /* Optional: the autotuner family (hk_tune_kernel) that schedules this run, 0 for none (the
     * tools print its hk_schedule_last beside the row). */
    int (*tune_family)(const struct hk_case_run *run);
    const hk_case_shape *tests;  /* the test suite's shapes (small: lavapipe) */
    uint32_t n_tests;
    const hk_case_shape *quick;  /* hk-check / hk-bench on CPU devices */
    uint32_t n_quick;
    const hk_case_shape *full;   /* hk-check / hk-bench on GPUs: the model shapes */
    uint32_t n_full;
} hk_case;

/* The three shape lists of a case definition: CASE_SHAPES(tests, quick, full). */
#define HK_CASE_COUNT(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))
#define CASE_SHAPES(t, q, f)                                                                                      \
    .tests = (t), .n_tests = HK_CASE_COUNT(t), .quick = (q), .n_quick = HK_CASE_COUNT(q), .full = (f),            \
    .n_full = HK_CASE_COUNT(f)

/* The table: every case of every family, in report order. */
extern const hk_case *const hk_cases[];
extern const size_t hk_case_count;
/* The case of this name, NULL if none. */
const hk_case *hk_case_find(const char *name);

/* ---- the driver ---- */

/* Where each tensor sits in its buffer: each test shape runs in several placements, so a kernel
 * that reads past its tensor or needs more alignment than the API asks is caught. */
enum {
    HK_PLACE_ALIGNED, /* offset 64, padding after */
    HK_PLACE_MINIMAL, /* offset = the tensor's alignment (2-byte GGUF blocks), padding after */
    HK_PLACE_END,     /* offset 0, the tensor ends at its buffer's end */
    HK_PLACE_END_MIN, /* offset = alignment, ends at its buffer's end */
    HK_PLACE_COUNT
};
const char *hk_case_place_name(int placement);

/* A run's tensors on the device: one buffer each (cold tensors with `copies` copies). */
typedef struct hk_case_bound {
    hk_buffer *buffer[HK_CASE_MAX_TENSORS];
    hk_view view[HK_CASE_MAX_TENSORS];
    uint64_t stride[HK_CASE_MAX_TENSORS]; /* bytes from one copy to the next (cold tensors) */
    uint32_t copies;
    char why[256]; /* why hk_case_bind failed */
} hk_case_bound;

/* Builds a run: calls the case's prepare. On failure the run holds nothing. */
hk_status hk_case_prepare(const hk_case *kcase, const hk_case_shape *shape, hk_context *ctx, int ref_mode,
                          uint64_t seed, hk_case_run *run);
void hk_case_release(hk_case_run *run);

/* Bytes of the run's cold tensors (weights, KV caches: those timed calls rotate over). */
uint64_t hk_case_cold_bytes(const hk_case_run *run);
/* Copies of `bytes` that fill `footprint`, 1..256: timed calls rotating over them read memory,
 * not a cache. */
uint32_t hk_case_copies(uint64_t bytes, uint64_t footprint);

/* Puts the run's tensors on the device in a placement, cold tensors `copies` times (>= 1).
 * HK_ERROR_UNSUPPORTED when a tensor is larger than the device can bind; bound->why says why it
 * failed. */
hk_status hk_case_bind(hk_case_run *run, int placement, uint32_t copies, hk_case_bound *bound);
void hk_case_unbind(hk_case_bound *bound);
/* Records one op into stream with the cold tensors at `copy`. */
hk_status hk_case_record(const hk_case_run *run, const hk_case_bound *bound, hk_stream *stream, uint32_t copy,
                         uint32_t op);
/* Runs one op at once on copy `copy` into poisoned outputs, reads every output back, checks that
 * nothing outside the outputs' bytes changed, and returns the case's error measure (INFINITY if
 * anything failed; detail says what). */
double hk_case_check(hk_case_run *run, const hk_case_bound *bound, uint32_t copy, char *detail, size_t detail_size);
/* hk_case_check that tells a failed call apart: the status of the run and read-back (detail says
 * what failed), and with HK_OK the error measure in *err (INFINITY where something was written
 * outside the outputs). */
hk_status hk_case_try(hk_case_run *run, const hk_case_bound *bound, uint32_t copy, double *err, char *detail,
                      size_t detail_size);
/* Grows the run's scratch tensors to what the case's scratch_bytes says they need now (a tuning
 * schedule can need more workspace than the default), as placed by HK_PLACE_ALIGNED. */
hk_status hk_case_fit_scratch(hk_case_run *run, hk_case_bound *bound);

/* The gate a run is held to: the case's gate_of hook, else its gate. */
double hk_case_gate(const hk_case_run *run);
/* Whether the case runs on this device (its available hook), with the reason if not. */
int hk_case_available(const hk_case *kcase, hk_context *ctx, char *why, size_t why_size);

/* ---- helpers for the case files ---- */

/* Adds a tensor to the run and returns its index; host (IN/INOUT contents) becomes the run's and
 * is freed with it. */
int hk_case_tensor_add(hk_case_run *run, const char *name, int kind, uint64_t bytes, uint32_t align, int cold,
                       void *host);
/* Adds an OUT tensor that shares the view of tensor `of` (an in-place output). */
int hk_case_tensor_alias(hk_case_run *run, const char *name, int of);
/* Allocates n bytes or reports out of host memory (NULL). */
void *hk_case_alloc(size_t n);

/* ---- KV caches as an engine lays them out (cases_attention.c; the attention tests use them) ---- */
typedef struct hk_case_kv {
    hk_kv_layout kv;
    uint32_t n_kv_heads, head_dim;
    uint64_t bytes; /* what a K (and a V) view covers */
    uint8_t *k, *v; /* host images */
} hk_case_kv;
/* Head-major ([head][row][d]) or token-major ([row][head][d]) rows of head_dim values plus pad
 * bytes; every byte NaN (f32 words, f16 halves; a Q8_0 block's d) until rows are written. 0 if out
 * of host memory. */
int hk_case_kv_create(hk_case_kv *c, hk_type type, uint32_t capacity, uint32_t n_kv_heads, uint32_t head_dim,
                      int token_major, uint32_t pad);
void hk_case_kv_destroy(hk_case_kv *c);
/* Byte offset of a row in the K (is_v 0) or V image. */
uint64_t hk_case_kv_row(const hk_case_kv *c, int is_v, uint32_t head, uint32_t row);
/* Writes head_dim values converted to the cache type (f16: round to nearest even; Q8_0: the
 * reference quantizer). */
void hk_case_kv_put(hk_case_kv *c, int is_v, uint32_t head, uint32_t row, const float *x);
/* A row of an image as f32 (dequantized): what a kernel must compute with. */
void hk_case_kv_get(const hk_case_kv *c, const uint8_t *image, int is_v, uint32_t head, uint32_t row, float *x);
/* Packed [head][row][d] f32 copies of rows 0..rows-1 of K and V (the references' input). */
int hk_case_kv_pack(const hk_case_kv *c, const uint8_t *k_image, const uint8_t *v_image, uint32_t rows, float **k,
                    float **v);
/* rope's angles are good to ~1e-6 rad up to position 2^24 (include/hkernel.h) */
#define HK_CASE_GATE_ROPE 1e-5
/* What a cache row holds (hk_case_kv_row_mismatches): K rotated, V copied, V a matvec's product. */
enum { HK_CASE_KV_K, HK_CASE_KV_V, HK_CASE_KV_V_PRODUCT };
/* A written cache row of an image against the values it should hold: f32 within the rope gate
 * (copied V exact); f16 within one unit in the last place of the reference's rounding (copied V
 * exact); Q8_0 d within one f16 step and each quant within one of the reference quantizer's.
 * Returns the bad values; *worst gets the largest f32 error. */
uint32_t hk_case_kv_row_mismatches(const hk_case_kv *c, const uint8_t *image, int kind, uint32_t head, uint32_t row,
                                   const float *want, double *worst);

#endif
