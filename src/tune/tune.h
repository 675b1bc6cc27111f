/* Internal interface of the autotuner (src/tune) for the kernel families it tunes.
 *
 * A schedule is a short vector of named integers, in the order of its family's parameters. A
 * tunable family describes itself with one const hk__tunable (beside its planning code): its
 * parameters, how a shape is checked and keyed, its static tier and the kernel-table case the
 * tuner measures it through. The tuner knows no family beyond that descriptor.
 *
 * A family's host code asks hk__tune_lookup for the schedule of a call: the candidate the tuner
 * is measuring on this thread, else the context's cached winner for the call's device and shape
 * class; with neither it takes its tuning hooks or its built-in defaults. It then tells
 * hk__tune_note what it ran, which hk_schedule_last reports. */
#ifndef HK_TUNE_H
#define HK_TUNE_H

#include "internal.h"

#define HK_TUNE_MAX_PARAMS 8
#define HK_TUNE_MAX_VALUES 8
#define HK_TUNE_SHAPE_CHARS 96
/* hk_tune_kernel values are 1 .. HK_TUNE_FAMILIES - 1 */
#define HK_TUNE_FAMILIES 9

/* Where a schedule came from (hk_schedule_last prints these words). */
enum { HK_SCHED_DEFAULT, HK_SCHED_ENV, HK_SCHED_TUNED, HK_SCHED_SEARCH };

typedef struct hk__sched {
    uint32_t v[HK_TUNE_MAX_PARAMS];
    int plant; /* testing only (HK_TUNE_PLANT_WRONG): the candidate skips part of the work */
} hk__sched;

typedef struct hk__tune_param {
    const char *name;
    uint32_t count;
    uint32_t values[HK_TUNE_MAX_VALUES]; /* searched */
    /* what a cached schedule may hold (the hooks' ranges: a default may lie outside the list):
     * lo..hi, a power of two where pow2 */
    uint32_t lo, hi;
    int pow2;
} hk__tune_param;

struct hk_case;
struct hk_case_shape;

typedef struct hk__tunable {
    hk_tune_kernel id;
    const char *name; /* in the cache file and hk-check tune: "matvec_int8" */
    uint32_t n_params;
    hk__tune_param params[HK_TUNE_MAX_PARAMS];
    /* Checks desc->shape (the kernel's own limits, and the size of the tuner's own inputs) and
     * writes its shape class; a failure sets the error (hk__fail, as "hk_tune"). */
    hk_status (*shape_key)(const hk_context *context, const hk_tune_desc *desc, char key[HK_TUNE_SHAPE_CHARS]);
    /* The static tier: 1 if v runs exactly as asked for this shape on this device, sig set to the
     * plan's effective values (two schedules of one plan are measured once); else 0 and why. */
    int (*feasible)(const hk_context *context, const hk_tune_desc *desc, const uint32_t *v, uint32_t sig[8],
                    char *why, size_t why_size);
    /* The kernel-table case the search measures through, and the shape as one of its rows. */
    const struct hk_case *kcase;
    void (*case_shape)(const hk_tune_desc *desc, struct hk_case_shape *out);
    /* every schedule must give the default schedule's bits (schedules differ in launch geometry
     * only, never in the order of a sum) */
    int exact_default;
} hk__tunable;

/* "lo-hi", the power-of-two range of x ("257-512"; 1: "1-1", 3 and 4: "3-4"): the bucket of a
 * count in a shape class. */
void hk__tune_bucket(char *out, size_t size, uint32_t x);

/* The tuner's own inputs and reference stay within host memory and seconds: at most 2^28 weight
 * (or cache) values and 2^27 activation or output values; else HK_ERROR_INVALID_ARGUMENT. */
hk_status hk__tune_check_sizes(uint64_t weights, uint64_t x, uint64_t out);

/* 1 and *out where a schedule applies to this call of the family with this shape class: the
 * tuner's candidate on this thread (*source HK_SCHED_SEARCH), else the context's cached winner
 * (HK_SCHED_TUNED; the cache file is read at the context's first look-up). 0 otherwise. */
int hk__tune_lookup(hk_context *context, const hk__tunable *family, const char *key, hk__sched *out, int *source);
/* Records what served the last call of a family (hk_schedule_last). */
void hk__tune_note(hk_context *context, const hk__tunable *family, const uint32_t *v, int source);

/* The public entry points of the tuner, for the family list that finds the descriptor
 * (kernels/families.c): hk_tune, hk_schedule_last. */
hk_status hk__tune_run(hk_context *context, const hk__tunable *family, const hk_tune_desc *desc,
                       hk_tune_report *report, size_t report_size);
hk_status hk__tune_last(hk_context *context, const hk__tunable *family, char *out, size_t out_size);

#endif
