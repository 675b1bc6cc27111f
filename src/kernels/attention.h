/* Internal interface of the attention family: argument checks shared by hk_sdpa_blk and hk_rope,
 * and the two implementations hk_sdpa_blk chooses between (flash-decoding in attention.c, flash
 * attention on the matrix cores in flash.c). */
#ifndef HK_ATTENTION_H
#define HK_ATTENTION_H

#include "family.h"

/* Bindings of an attention call, in shader binding order. Optional views that were not given are
 * bound to the q view with 0 bytes (nothing is read through them). */
enum { SDPA_Q, SDPA_K, SDPA_V, SDPA_OUT, SDPA_WORKSPACE, SDPA_COUNTER, SDPA_BINDINGS };

typedef struct hk_sdpa_call {
    const hk_sdpa_desc *desc;
    hk_binding b[SDPA_BINDINGS];
    int has_counter;      /* seq_k comes from the device (b[SDPA_COUNTER]) */
    uint64_t k_row_bytes; /* bytes of one row of head_dim values of kv.type */
} hk_sdpa_call;

/* Checks a KV layout for n_kv_heads heads of head_dim values; sets the bytes the K and V views
 * must cover. */
hk_status hk__kv_layout_check(const char *fn, const hk_kv_layout *kv, uint32_t n_kv_heads, uint32_t head_dim,
                              uint64_t *k_bytes, uint64_t *v_bytes);

/* hk_rope's checks of desc (beyond its views and norms) and of freq_factors (whether given): the
 * rotated dims (rot_dim, or head_dim) and the bytes the caches must cover. */
hk_status hk__rope_check(const char *fn, const hk_rope_desc *desc, hk_view freq_factors, uint32_t *rot, int *factors,
                         uint64_t *k_bytes, uint64_t *v_bytes);
/* The frequencies in double (as the reference), handed to rope.glsl as float pairs. */
void hk__rope_angles(const hk_rope_desc *desc, uint32_t rot, float turns[2], float pow2[4][2]);
/* The caches' rows and byte strides as the rotating shaders take them (0 where unused). */
typedef struct hk__rope_cache {
    uint32_t capacity, k_row, k_head, v_row, v_head;
} hk__rope_cache;
hk__rope_cache hk__rope_cache_of(const hk_rope_desc *desc);

/* Flash-decoding (attention.c): every shape hk_sdpa_blk accepts. */
/* The workspace bytes of a shape (0: none); fails only on a malformed tuning hook. */
hk_status hk__sdpa_decode_workspace(const hk_context *context, const char *fn, const hk_sdpa_desc *desc,
                                    uint64_t *out_bytes);
hk_status hk__sdpa_decode(hk_context *context, hk_stream *stream, const char *fn, const hk_sdpa_call *call);

/* Flash attention for prefill (flash.c): whether it serves this shape on this device, the
 * workspace it needs, and the call. */
int hk__sdpa_flash_supported(const hk_context *context, const hk_sdpa_desc *desc);
/* "flash-coopmat" (the matrix cores) or "flash" (the portable twin) */
const char *hk__sdpa_flash_arm(const hk_context *context, const hk_sdpa_desc *desc);
uint64_t hk__sdpa_flash_workspace(const hk_context *context, const hk_sdpa_desc *desc);
hk_status hk__sdpa_flash(hk_context *context, hk_stream *stream, const char *fn, const hk_sdpa_call *call);

/* The autotuner's parameters, in their order: flash-decoding's split target, workgroup, lanes
 * per key, keys per batch, rows, combine in one pass (attention.c); flash prefill's subgroups,
 * rows per unit, chunk and tile keys, Q in registers, prefetch, split target (flash.c). */
enum { SD_GROUPS, SD_WG, SD_LPK, SD_KB, SD_ROWS, SD_SINGLE, SD_PARAMS };
enum { FL_SUBGROUPS, FL_ROWS, FL_BC, FL_BKV, FL_QREG, FL_PREFETCH, FL_GROUPS, FL_ORDER, FL_PARAMS };
/* the tuner families of hk_sdpa_blk: flash-decoding (attention.c), flash prefill (flash.c) */
extern const hk__tunable hk__tune_sdpa_decode, hk__tune_flash_prefill;
/* A search's shape as a call: head-major caches of kv_type, seq_k = capacity; checked as
 * hk_sdpa_blk checks it, within the tuner's sizes, and served by the kernel the family tunes. */
hk_status hk__tune_sdpa_shape(const hk_context *context, const hk_tune_desc *desc, hk_sdpa_desc *out);
/* The same call, unchecked: for the static tier, which runs only on shapes shape_key passed. */
void hk__tune_sdpa_desc(const hk_tune_desc *desc, hk_sdpa_desc *out);
/* Both families' kernel-table row: hk_sdpa_blk's. */
void hk__tune_sdpa_case(const hk_tune_desc *desc, hk_case_shape *out);

/* hk_context_prepare's attention shapes (hk_sdpa_blk, hk_rope): every KV-cache type and head
 * size, head-major caches of `capacity` rows. */
#define HK_PREP_HEAD_DIMS 3
extern const uint32_t hk__prep_head_dims[HK_PREP_HEAD_DIMS];
hk_kv_layout hk__prep_kv(hk_type type, uint32_t head_dim, uint32_t capacity);

#endif
