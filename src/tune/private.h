/* What the tuner's files share: the search space's text form (space.c), the per-context state
 * and the winner cache (cache.c), measuring through the kernel table (measure.c), the search
 * (search.c). */
#ifndef HK_TUNE_PRIVATE_H
#define HK_TUNE_PRIVATE_H

#include "cases.h"
#include "tune.h"

#include <stdio.h>

/* ---- space.c ---- */

/* "name=value,..." in the family's order */
void hk__tune_format(const hk__tunable *f, const uint32_t *v, char *out, size_t size);
/* the inverse, exactly the family's names in order; 0 where the text is not one */
int hk__tune_parse(const hk__tunable *f, const char *text, uint32_t *v);
/* the values a cached schedule may hold (the parameters' ranges) */
int hk__tune_valid(const hk__tunable *f, const uint32_t *v);
/* schedules in the family's space */
uint64_t hk__tune_space(const hk__tunable *f);
/* FNV-1a over the values' bytes, from h (HK_TUNE_HASH_BASIS to start) */
uint64_t hk__tune_hash(uint64_t h, const uint32_t *v, uint32_t n);
#define HK_TUNE_HASH_BASIS 0xCBF29CE484222325ull

/* ---- cache.c ---- */

void hk__tune_warn(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The tuner's candidate on this thread: mode 1 forces it for (context, family, key), mode 2
 * forces "no schedule" (the built-in default or the hooks, ignoring the cache). */
typedef struct hk__tune_forced {
    int mode;
    const hk_context *context;
    const hk__tunable *family;
    const char *key;
    hk__sched sched;
    uint32_t served[HK_TUNE_MAX_PARAMS]; /* what the family's last call on this thread ran */
    int noted;                           /* served is set */
} hk__tune_forced;
extern _Thread_local hk__tune_forced hk__forced;

/* Makes v the context's winner for (family, key): in memory, and in the cache file unless
 * no_store. 0 when out of host memory (nothing changed). */
int hk__tune_set_winner(hk_context *context, const hk__tunable *family, const char *key, const uint32_t *v, double ms,
                        int no_store);

/* ---- measure.c ---- */

/* A shape instantiated for measuring: the family's kernel-table row with seeded inputs and a
 * reference (a sample of the rows of big outputs), on the device with enough copies of its cold
 * tensors to be read from memory. */
typedef struct hk__tune_bench {
    hk_context *ctx;
    const hk__tunable *family;
    const hk_tune_desc *desc;
    hk_case_run run;
    hk_case_bound bound;
    int bound_ok;
    uint8_t *exact;     /* exact_default: the outputs' bytes every schedule must give */
    uint64_t exact_bytes;
} hk__tune_bench;

hk_status hk__tune_bench_open(hk__tune_bench *b, hk_context *ctx, const hk__tunable *family, const hk_tune_desc *desc);
void hk__tune_bench_close(hk__tune_bench *b);
/* Runs the default (nothing forced but "no schedule") once, keeps its bits where the family asks
 * for them, and sets served to what it ran. */
hk_status hk__tune_bench_default(hk__tune_bench *b, const char *key, uint32_t served[HK_TUNE_MAX_PARAMS]);
/* Runs schedule v (forced on this thread) once into poisoned outputs held to the gate, then
 * times it cold: *ms, INFINITY with why where the gate fails. A status other than HK_OK: the
 * kernel refused it (or the device failed). */
hk_status hk__tune_bench_measure(hk__tune_bench *b, const char *key, const uint32_t *v, int plant, double *ms,
                                 double *err, char *why, size_t why_size);

#endif
