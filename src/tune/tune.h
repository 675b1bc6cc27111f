/* Internal interface of the autotuner (src/tune/tune.c) and of the kernel families it tunes.
 *
 * A schedule is a short vector of named integers per family (the search space's parameters, in
 * the order tune.c's family table lists them). A family's host code asks hk__tune_lookup for the
 * schedule of a call: the candidate the tuner is measuring on this thread, else the context's
 * cached winner for the call's device and shape class; with neither it takes its environment
 * hooks or its built-in defaults. It then tells hk__tune_note what it ran, which
 * hk_schedule_last reports. */
#ifndef HK_TUNE_H
#define HK_TUNE_H

#include "internal.h"

#define HK_TUNE_MAX_PARAMS 8
#define HK_TUNE_SHAPE_CHARS 96
/* hk_tune_kernel values are 1 .. HK_TUNE_FAMILIES - 1 (tune.c's table has a row for each that
 * exists) */
#define HK_TUNE_FAMILIES 9

/* Where a schedule came from (hk_schedule_last prints these words). */
enum { HK_SCHED_DEFAULT, HK_SCHED_ENV, HK_SCHED_TUNED, HK_SCHED_SEARCH };

typedef struct hk__sched {
    uint32_t v[HK_TUNE_MAX_PARAMS];
    int plant; /* testing only (HK_TUNE_PLANT_WRONG): the candidate skips part of the work */
} hk__sched;

/* Parameter order of each family (tune.c's table holds names and values). HK_TUNE_MATVEC_INT8 and
 * HK_TUNE_MOE_MATVEC_INT8: the one-token int8 kernel's rows per subgroup, items per step, Q8_0
 * weight loads. */
enum { MV_NROWS, MV_ITEMS, MV_LOAD_BITS, MV_PARAMS };
enum { SD_GROUPS, SD_WG, SD_LPK, SD_KB, SD_ROWS, SD_SINGLE, SD_PARAMS };
enum { MT_SUBGROUPS, MT_NROWS, MT_ITEMS, MT_RESIDENT, MT_WGS, MT_PARAMS };
enum { GM_WM, GM_WN, GM_RM, GM_RN, GM_BK, GM_PREFETCH, GM_PARAMS };
enum { FL_SUBGROUPS, FL_ROWS, FL_BC, FL_BKV, FL_QREG, FL_PREFETCH, FL_GROUPS, FL_PARAMS };
/* HK_TUNE_MMQ and HK_TUNE_MMQ_ID: mmq.c's tile (its one seam with the tuner, tile_of_sched) */
enum { MQ_WM, MQ_WN, MQ_RM, MQ_RN, MQ_KS, MQ_PREFETCH, MQ_ROLLED, MQ_PARAMS };

/* Shape classes: the key of a cached winner (include/hkernel.h lists them). A count that is
 * bucketed is written as its power-of-two range, "m257-512". */
void hk__tune_key_matvec(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t rows, uint32_t k);
void hk__tune_key_matvec_tokens(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t rows, uint32_t k,
                                uint32_t tokens);
void hk__tune_key_sdpa(char key[HK_TUNE_SHAPE_CHARS], hk_type kv_type, uint32_t n_heads, uint32_t n_kv_heads,
                       uint32_t head_dim, uint32_t capacity);
/* hk_gemm_f16 and hk_mmq (m x n output, k deep) */
void hk__tune_key_gemm(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t m, uint32_t n, uint32_t k);
void hk__tune_key_mmq_id(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, const hk_mmq_id_shape *shape);
/* hk_moe_matvec_int8 */
void hk__tune_key_moe_matvec(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, const hk_moe_shape *shape);
/* hk_sdpa_blk with n_q > 1 */
void hk__tune_key_flash(char key[HK_TUNE_SHAPE_CHARS], const hk_sdpa_desc *desc);

/* 1 and *out where a schedule applies to this call of family (hk_tune_kernel) with this shape
 * key: the tuner's candidate on this thread (*source HK_SCHED_SEARCH), else the context's cached
 * winner (HK_SCHED_TUNED). 0 otherwise. */
int hk__tune_lookup(hk_context *context, int family, const char *key, hk__sched *out, int *source);
/* Records what served the last call of a family (hk_schedule_last). */
void hk__tune_note(hk_context *context, int family, const uint32_t *v, int source);

/* Context lifetime (context.c): reads the winner cache of dir (NULL: $HK_TUNE_CACHE_DIR, else
 * $XDG_CACHE_HOME/hkernel, else $HOME/.cache/hkernel). Never fails: problems are warnings. */
void hk__tune_open(hk_context *context, const char *dir);
void hk__tune_close(hk_context *context);

/* Static tiers, next to the families' own planning code: 1 if the schedule runs exactly as asked
 * on this device for this shape; else 0 with the reason. sig (may be NULL) receives the plan's
 * effective values, so that two schedules running the same plan are measured once. */
int hk__matvec_int8_static(const hk_context *context, hk_type wtype, uint32_t rows, uint32_t k, const uint32_t *v,
                           char *why, size_t why_size);
int hk__moe_matvec_int8_static(const hk_context *context, hk_type wtype, const hk_moe_shape *shape, const uint32_t *v,
                               char *why, size_t why_size);
int hk__matvec_tokens_static(const hk_context *context, hk_type wtype, uint32_t rows, uint32_t k, uint32_t tokens,
                             const uint32_t *v, uint32_t sig[8], char *why, size_t why_size);
int hk__sdpa_decode_static(const hk_context *context, const hk_sdpa_desc *desc, const uint32_t *v, uint32_t sig[8],
                           char *why, size_t why_size);
int hk__gemm_f16_static(const hk_context *context, uint32_t k, const uint32_t *v, uint32_t sig[8], char *why,
                        size_t why_size);
int hk__flash_static(const hk_context *context, const hk_sdpa_desc *desc, const uint32_t *v, uint32_t sig[8], char *why,
                     size_t why_size);
/* id: 0 hk_mmq, 1 hk_mmq_id */
int hk__mmq_static(const hk_context *context, int id, hk_type wtype, const uint32_t *v, uint32_t sig[8], char *why,
                   size_t why_size);

#endif
