/* cases_rowwise.c — table rows of the row-wise kernels over logits: argmax and softmax. Rows of a
 * shape take planted patterns in turn (row r gets pattern r % 8): ties, NaN, infinities, large
 * logits, so a batch of 8 rows or more covers every rule of include/hkernel.h. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 HK_TYPE_F32
#define PATTERNS 8u

/* ---- argmax: d = {rows, n} ---- */

/* Sets x[i] = v where i < n. */
static void plant(float *x, uint32_t n, uint32_t i, float v)
{
    if (i < n)
        x[i] = v;
}

/* One row of logits for argmax, pattern p:
 *  0: a coarse grid of 200 values (the maximum recurs all over a long row: ties everywhere);
 *  1: the grid with NaN at every fifth index from 0;
 *  2: NaN only (no index: 0xFFFFFFFF);
 *  3: -inf with NaN at even indices (the first -inf: index 1);
 *  4: the grid with +inf at n/3 + 1 and 2n/3 (the lower one) and NaN at 0;
 *  5, 6: one maximum at 255, 256 and n - 1 (5) or 1023, 1024 and n - 1 (6): the lowest sits in
 *     the last lane of a 256- or 1024-wide workgroup, the next in lane 0, the tail in another;
 *  7: -1, -0 and +0 at random (zeros of either sign are equal: the first zero). */
static void argmax_row(hk_rng *rng, float *x, uint32_t n, uint32_t p)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t r = hk_rng_next(rng);
        float grid = (float)(r % 200) / 10.0f - 10.0f;
        switch (p) {
        case 1: x[i] = i % 5 == 0 ? NAN : grid; break;
        case 2: x[i] = NAN; break;
        case 3: x[i] = i % 2 == 0 ? NAN : -INFINITY; break;
        case 7: x[i] = r % 3 == 0 ? -1.0f : r % 3 == 1 ? -0.0f : 0.0f; break;
        default: x[i] = grid; break;
        }
    }
    if (p == 4) {
        plant(x, n, n / 3 + 1, INFINITY);
        plant(x, n, 2 * n / 3, INFINITY);
        plant(x, n, 0, NAN);
    }
    if (p == 5 || p == 6) {
        uint32_t a = p == 5 ? 255 : 1023;
        plant(x, n, a, 100.0f);
        plant(x, n, a + 1, 100.0f);
        plant(x, n, n - 1, 100.0f);
    }
}

static hk_status prepare_argmax(hk_case_run *run, uint64_t seed)
{
    uint32_t rows = run->shape.d[0], n = run->shape.d[1];
    size_t count = (size_t)rows * n;
    hk_rng rng = {seed};
    float *x = hk_case_alloc(count * sizeof(float));
    if (!x)
        return HK_ERROR_OUT_OF_MEMORY;
    for (uint32_t r = 0; r < rows; r++)
        argmax_row(&rng, x + (size_t)r * n, n, r % PATTERNS);
    if (run->ref_mode != HK_REF_NONE) {
        /* the reference ids, as u32 bit patterns in ref */
        run->ref_count = rows;
        if (!(run->ref = hk_case_alloc(rows * sizeof(float)))) {
            free(x);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        hk_ref_argmax(x, (uint32_t *)run->ref, rows, n);
    }
    hk_case_tensor_add(run, "x", HK_CASE_IN, count * 4, 4, 1, x);
    hk_case_tensor_add(run, "ids", HK_CASE_OUT, (uint64_t)rows * 4, 4, 0, NULL);
    run->bytes = 4.0 * count + 4.0 * rows;
    snprintf(run->label, sizeof run->label, "%ux%u", rows, n);
    return HK_OK;
}

static hk_status record_argmax(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    return hk_argmax(run->ctx, s, v[0], v[1], run->shape.d[0], run->shape.d[1]);
}

/* Exact: every id, the tie rule included. 0 when all agree. */
static double compare_argmax(const hk_case_run *run, char *detail, size_t size)
{
    const uint32_t *got = run->t[1].got, *want = (const uint32_t *)run->ref;
    uint32_t wrong = 0, first = 0;
    for (uint32_t r = 0; r < run->shape.d[0]; r++)
        if (got[r] != want[r] && wrong++ == 0)
            first = r;
    if (wrong)
        snprintf(detail, size, "%u ids wrong; row %u: %u, want %u", wrong, first, got[first], want[first]);
    else
        snprintf(detail, size, "every id right");
    return wrong ? INFINITY : 0.0;
}

static const hk_case_shape argmax_tests[] = {
    {F32, {8, 1}, 0, 0},    {F32, {8, 2}, 0, 0},     {F32, {8, 31}, 0, 0},      {F32, {3, 33}, 0, 0},
    {F32, {8, 1000}, 0, 0}, {F32, {70, 1500}, 0, 0}, /* 256 wide: lanes 255 and 0 tie */
    {F32, {1, 32000}, 0, 0}, {F32, {8, 32000}, 0, 0}, /* Llama 2 */
    {F32, {3, 151936}, 0, 0},                         /* Qwen */
    {F32, {8, 151936}, 0, 0}, {F32, {1, 262144}, 0, 0}, /* Gemma 3 */
};
static const hk_case_shape argmax_quick[] = {{F32, {1, 32000}, 0, 0}, {F32, {8, 151936}, 0, 0}};
static const hk_case_shape argmax_full[] = {{F32, {1, 151936}, 0, 0}, {F32, {1, 262144}, 0, 0},
                                            {F32, {64, 151936}, 0, 0}};

const hk_case hk_case_argmax = {
    .name = "argmax",
    .gate = 1.0, /* compare is exact: 0 or infinity */
    .prepare = prepare_argmax,
    .record = record_argmax,
    .compare = compare_argmax,
    CASE_SHAPES(argmax_tests, argmax_quick, argmax_full),
};

/* ---- softmax: d = {rows, n, temperature in hundredths}, variant 1 = in place (y is x) ---- */

/* One row of logits for softmax, pattern p:
 *  0: uniform in [-10, 10];
 *  1, 2: around +80 and -80 (exp of the raw logit over the temperature overflows or underflows);
 *  3: numbers with one NaN (the row NaN);
 *  4: numbers with -inf at every third index and +inf at n/3 + 1 and 2n/3 (the two share it);
 *  5: -inf only (uniform);
 *  6: numbers with -inf at every third index (a masked vocabulary: zeros there);
 *  7: uniform in [-1e4, 1e4] (nearly one-hot). */
static void softmax_row(hk_rng *rng, float *x, uint32_t n, uint32_t p)
{
    static const float centre[PATTERNS] = {0, 80, -80, 0, 0, 0, 0, 0};
    float spread = p == 7 ? 1e4f : p == 1 || p == 2 ? 5.0f : 10.0f;
    for (uint32_t i = 0; i < n; i++)
        x[i] = centre[p] + hk_rng_uniform(rng, -spread, spread);
    if (p == 4 || p == 6)
        for (uint32_t i = 0; i < n; i += 3)
            x[i] = -INFINITY;
    if (p == 3)
        plant(x, n, (uint32_t)(hk_rng_next(rng) % n), NAN);
    if (p == 4) {
        plant(x, n, n / 3 + 1, INFINITY);
        plant(x, n, 2 * n / 3, INFINITY);
    }
    if (p == 5)
        for (uint32_t i = 0; i < n; i++)
            x[i] = -INFINITY;
}

static hk_status prepare_softmax(hk_case_run *run, uint64_t seed)
{
    uint32_t rows = run->shape.d[0], n = run->shape.d[1];
    float temperature = (float)run->shape.d[2] / 100.0f;
    size_t count = (size_t)rows * n;
    hk_rng rng = {seed};
    float *x = hk_case_alloc(count * sizeof(float));
    if (!x)
        return HK_ERROR_OUT_OF_MEMORY;
    for (uint32_t r = 0; r < rows; r++)
        softmax_row(&rng, x + (size_t)r * n, n, r % PATTERNS);
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = count;
        if (!(run->ref = hk_case_alloc(count * sizeof(float)))) {
            free(x);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        hk_ref_softmax(x, run->ref, rows, n, temperature);
    }
    int in_place = run->shape.variant;
    int xi = hk_case_tensor_add(run, "x", in_place ? HK_CASE_INOUT : HK_CASE_IN, count * 4, 4, !in_place, x);
    if (in_place)
        hk_case_tensor_alias(run, "y", xi);
    else
        hk_case_tensor_add(run, "y", HK_CASE_OUT, count * 4, 4, 0, NULL);
    run->bytes = 8.0 * count;
    snprintf(run->label, sizeof run->label, "%ux%u T%.2f%s", rows, n, (double)temperature, in_place ? " in-place" : "");
    return HK_OK;
}

static hk_status record_softmax(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    /* in place, y's view is x's (the driver binds the alias to the same view) */
    return hk_softmax(run->ctx, s, v[0], v[1], run->shape.d[0], run->shape.d[1], (float)run->shape.d[2] / 100.0f);
}

/* Per row: a NaN row of the reference must come back all NaN; any other row within the gate of
 * its own largest output (scale_rel of the row, so a uniform row of tiny values counts as much as
 * a one-hot one). The largest row error. */
static double compare_softmax(const hk_case_run *run, char *detail, size_t size)
{
    uint32_t rows = run->shape.d[0], n = run->shape.d[1];
    const float *got = run->t[1].got; /* in place: the alias holds x's bytes */
    double worst = 0.0;
    uint32_t worst_row = 0, nan_rows = 0, bad_nan = 0;
    for (uint32_t r = 0; r < rows; r++) {
        const float *g = got + (size_t)r * n, *want = run->ref + (size_t)r * n;
        if (isnan(want[0])) {
            nan_rows++;
            for (uint32_t i = 0; i < n; i++)
                if (!isnan(g[i])) {
                    bad_nan++;
                    break;
                }
            continue;
        }
        double rel = hk_scale_rel(g, want, n);
        if (!(rel <= worst)) {
            worst = rel;
            worst_row = r;
        }
    }
    snprintf(detail, size, "worst row %u: scale_rel=%.3e; %u of %u NaN rows not all NaN", worst_row, worst, bad_nan,
             nan_rows);
    return bad_nan ? INFINITY : worst;
}

static const hk_case_shape softmax_tests[] = {
    {F32, {8, 1, 100}, 0, 0},    {F32, {8, 2, 100}, 1, 0},     {F32, {8, 31, 50}, 0, 0},
    {F32, {3, 33, 200}, 0, 0},   {F32, {8, 1000, 100}, 1, 0},  {F32, {70, 1500, 50}, 0, 0},
    {F32, {1, 32000, 100}, 0, 0}, {F32, {8, 32000, 50}, 1, 0}, /* Llama 2 */
    {F32, {3, 151936, 100}, 0, 0}, {F32, {8, 151936, 200}, 0, 0}, /* Qwen */
    {F32, {1, 262144, 100}, 1, 0}, /* Gemma 3 */
};
static const hk_case_shape softmax_quick[] = {{F32, {1, 32000, 100}, 0, 0}, {F32, {8, 151936, 100}, 0, 0}};
static const hk_case_shape softmax_full[] = {{F32, {1, 151936, 100}, 0, 0}, {F32, {1, 262144, 100}, 1, 0},
                                             {F32, {64, 151936, 100}, 0, 0}};

const hk_case hk_case_softmax = {
    .name = "softmax",
    .gate = HK_GATE_SOFTMAX,
    .prepare = prepare_softmax,
    .record = record_softmax,
    .compare = compare_softmax,
    CASE_SHAPES(softmax_tests, softmax_quick, softmax_full),
};
