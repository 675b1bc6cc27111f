/* The measure tier: a schedule runs once through the family's kernel-table row (seeded inputs,
 * poisoned outputs, the reference at the row's gate), then is timed cold with GPU timestamps:
 * the same harness the tests, hk-check and hk-bench run. */
#define _POSIX_C_SOURCE 200809L
#include "private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Copies of the cold tensors when the caller names none: enough for TUNE_COLD_BYTES, within
 * TUNE_MIN_COPIES..TUNE_MAX_COPIES (the search holds them all for its whole length). */
#define TUNE_COLD_BYTES (64ull << 20)
#define TUNE_MIN_COPIES 2u
#define TUNE_MAX_COPIES 8u

static double now_ms(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* HK_TUNE_FAKE_TIMES (testing): 1, 2 or 3, else 0 */
static int fake_times(void)
{
    const char *e = getenv("HK_TUNE_FAKE_TIMES");
    return e && (!strcmp(e, "1") || !strcmp(e, "2") || !strcmp(e, "3")) ? e[0] - '0' : 0;
}

/* A pseudo-time of a schedule: 1 + u (mode 1), 1000 (1 + u)^3 (mode 2, the same order), or 1 +
 * u / 4 made 1.5x slower on two measurements of every three on this thread (mode 3: noise larger
 * than any difference between schedules, which every schedule measured three times in turn with
 * another sees whole), u in [0, 1) a hash of the values. */
static double fake_ms(int mode, const uint32_t *v, uint32_t n)
{
    static _Thread_local uint32_t measurements;
    double u = (double)(hk__tune_hash(HK_TUNE_HASH_BASIS, v, n) >> 11) * 0x1p-53;
    if (mode == 3)
        return (1.0 + u / 4) * (measurements++ % 3 ? 1.5 : 1.0);
    return mode == 1 ? 1.0 + u : 1000.0 * (1.0 + u) * (1.0 + u) * (1.0 + u);
}

hk_status hk__tune_bench_open(hk__tune_bench *b, hk_context *ctx, const hk__tunable *family, const hk_tune_desc *desc)
{
    static const char fn[] = "hk_tune";
    memset(b, 0, sizeof *b);
    b->ctx = ctx;
    b->family = family;
    b->desc = desc;
    char why[256];
    if (!hk_case_available(family->kcase, ctx, why, sizeof why))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "%s cannot run on this device: %s", family->name, why);
    hk_case_shape shape;
    memset(&shape, 0, sizeof shape);
    family->case_shape(desc, &shape);
    hk_status st = hk_case_prepare(family->kcase, &shape, ctx, HK_REF_SAMPLE, desc->seed ? desc->seed : 1, &b->run);
    if (st != HK_OK)
        return st == HK_ERROR_OUT_OF_MEMORY ? hk__fail(st, fn, "out of host memory for the search's inputs")
                                            : hk__fail(st, fn, "%s: the inputs could not be made (%s)", family->name,
                                                       hk_last_error());
    uint32_t copies = desc->copies;
    if (!copies) {
        copies = hk_case_copies(hk_case_cold_bytes(&b->run), TUNE_COLD_BYTES);
        copies = copies < TUNE_MIN_COPIES ? TUNE_MIN_COPIES : copies > TUNE_MAX_COPIES ? TUNE_MAX_COPIES : copies;
    }
    st = hk_case_bind(&b->run, HK_PLACE_ALIGNED, copies, &b->bound);
    if (st != HK_OK) {
        hk_case_release(&b->run);
        return hk__fail(st, fn, "%s: %s", family->name, b->bound.why);
    }
    b->bound_ok = 1;
    return HK_OK;
}

void hk__tune_bench_close(hk__tune_bench *b)
{
    if (b->bound_ok)
        hk_case_unbind(&b->bound);
    if (b->run.kcase)
        hk_case_release(&b->run);
    free(b->exact);
    memset(b, 0, sizeof *b);
}

/* The outputs' bytes, as the last check read them back. */
static uint64_t output_bytes(const hk__tune_bench *b, uint8_t *dst)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < b->run.n_tensors; i++) {
        const hk_case_tensor *t = &b->run.t[i];
        if (t->kind != HK_CASE_OUT && t->kind != HK_CASE_INOUT)
            continue;
        if (dst)
            memcpy(dst + n, t->got, t->bytes);
        n += t->bytes;
    }
    return n;
}

/* One checked run of whatever schedule the family's calls take now on this thread. */
static hk_status check_run(hk__tune_bench *b, double *err, char *why, size_t why_size)
{
    hk_status st = hk_case_fit_scratch(&b->run, &b->bound);
    if (st != HK_OK)
        return hk__fail(st, "hk_tune", "%s: the workspace could not grow", b->family->name);
    char detail[256] = "";
    st = hk_case_try(&b->run, &b->bound, b->bound.copies - 1, err, detail, sizeof detail);
    if (st != HK_OK)
        return st; /* hk_last_error() says why */
    double gate = hk_case_gate(&b->run);
    if (!(*err < gate))
        snprintf(why, why_size, "gate: %s (gate %.0e)", detail, gate);
    return HK_OK;
}

static void force(const hk__tune_bench *b, int mode, const char *key)
{
    hk__forced.mode = mode;
    hk__forced.context = b->ctx;
    hk__forced.family = b->family;
    hk__forced.key = key;
    hk__forced.noted = 0;
}

hk_status hk__tune_bench_default(hk__tune_bench *b, const char *key, uint32_t served[HK_TUNE_MAX_PARAMS])
{
    static const char fn[] = "hk_tune";
    double err;
    char why[256] = "";
    force(b, 2, key);
    hk_status st = check_run(b, &err, why, sizeof why);
    int noted = hk__forced.noted;
    memcpy(served, hk__forced.served, sizeof hk__forced.served);
    hk__forced.mode = 0;
    if (st != HK_OK)
        return st;
    if (!noted)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "%s %s: the call ran no schedule of the family", b->family->name, key);
    if (b->family->exact_default && !why[0]) { /* the bits every schedule must give */
        b->exact_bytes = output_bytes(b, NULL);
        if (!(b->exact = malloc(b->exact_bytes ? b->exact_bytes : 1)))
            return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
        output_bytes(b, b->exact);
    }
    return HK_OK;
}

hk_status hk__tune_bench_measure(hk__tune_bench *b, const char *key, const uint32_t *v, int plant, double *ms,
                                 double *err, char *why, size_t why_size)
{
    const hk_tune_desc *d = b->desc;
    *ms = INFINITY;
    *err = INFINITY;
    force(b, 1, key);
    memset(&hk__forced.sched, 0, sizeof hk__forced.sched);
    memcpy(hk__forced.sched.v, v, sizeof hk__forced.sched.v);
    hk__forced.sched.plant = plant;
    hk_status st = check_run(b, err, why, why_size);
    if (st != HK_OK || why[0])
        goto done;
    if (b->exact) {
        uint8_t *got = malloc(b->exact_bytes ? b->exact_bytes : 1);
        if (!got) {
            st = hk__fail(HK_ERROR_OUT_OF_MEMORY, "hk_tune", "out of host memory");
            goto done;
        }
        output_bytes(b, got);
        uint64_t differ = 0;
        for (uint64_t i = 0; i + 4 <= b->exact_bytes; i += 4)
            differ += memcmp(got + i, b->exact + i, 4) != 0;
        free(got);
        if (differ) {
            snprintf(why, why_size, "gate: %llu of %llu outputs not bit-identical to the default schedule's",
                     (unsigned long long)differ, (unsigned long long)(b->exact_bytes / 4));
            goto done;
        }
    }
    int fake = fake_times();
    if (fake) {
        *ms = fake_ms(fake, v, b->family->n_params);
        goto done;
    }
    /* batches of calls rotating over the copies between two GPU timestamps (host time where the
     * queue has none), the fastest kept */
    uint32_t repeats = d->repeats ? d->repeats : 5, batch = d->batch ? d->batch : 8;
    int gpu = b->ctx->caps.timestamps;
    hk_stream *s = NULL;
    st = hk_stream_create(b->ctx, gpu ? 2 : 0, &s);
    double best = INFINITY;
    for (uint32_t r = 0; r <= repeats && st == HK_OK; r++) { /* r == 0 warms up */
        double t0 = now_ms(), t = 0;
        if (gpu)
            st = hk_stream_timestamp(s, NULL);
        for (uint32_t i = 0; i < batch && st == HK_OK; i++)
            st = hk_case_record(&b->run, &b->bound, s, i, i);
        if (st == HK_OK && gpu)
            st = hk_stream_timestamp(s, NULL);
        if (st == HK_OK)
            st = hk_stream_submit(s);
        if (st == HK_OK && gpu)
            st = hk_stream_elapsed_ms(s, 0, 1, &t);
        else
            t = now_ms() - t0;
        if (st == HK_OK && r > 0 && t / batch < best)
            best = t / batch;
        /* GPUs: batches long enough that launch gaps and clock ramps weigh little */
        if (st == HK_OK && r == 0 && !d->batch && t < 2.0) {
            double grow = 2.0 / (t > 0.005 ? t : 0.005);
            batch = batch * grow > 256 ? 256 : (uint32_t)(batch * grow) + 1;
        }
    }
    hk_stream_destroy(s);
    *ms = best;
done:
    hk__forced.mode = 0;
    return st;
}
