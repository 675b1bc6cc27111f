/* The row-wise kernels over logits (hk_argmax, hk_softmax) beyond their kernel-table rows
 * (src/cases/cases_rowwise.c, run by test_kernels on every shape and placement): the rules of
 * include/hkernel.h on rows with known answers (NaN, infinities, signed zeros, a temperature whose
 * reciprocal overflows), the tie rule swept over planted maxima in both workgroup widths, the
 * largest n and the next, and every argument error. */
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NONE 0xFFFFFFFFu

/* x (rows * n floats) on the device, run, and the outputs back: argmax ids or softmax y. */
static int run_argmax(hk_context *ctx, const float *x, uint32_t rows, uint32_t n, uint32_t *ids)
{
    hk_buffer *xb = hk_test_buffer(ctx, (uint64_t)rows * n * 4, x);
    hk_test_out out = hk_test_out_create(ctx, rows);
    hk_status st = hk_argmax(ctx, NULL, (hk_view){xb, 0}, hk_test_out_view(&out), rows, n);
    const float *got = st == HK_OK ? hk_test_out_read(&out, "argmax") : NULL;
    if (got)
        memcpy(ids, got, (size_t)rows * 4);
    else
        hk_check(0, "argmax runs", "%s", hk_last_error());
    hk_test_out_destroy(&out);
    hk_buffer_destroy(xb);
    return got != NULL;
}

static int run_softmax(hk_context *ctx, const float *x, uint32_t rows, uint32_t n, float temperature, float *y)
{
    hk_buffer *xb = hk_test_buffer(ctx, (uint64_t)rows * n * 4, x);
    hk_test_out out = hk_test_out_create(ctx, (size_t)rows * n);
    hk_status st = hk_softmax(ctx, NULL, (hk_view){xb, 0}, hk_test_out_view(&out), rows, n, temperature);
    const float *got = st == HK_OK ? hk_test_out_read(&out, "softmax") : NULL;
    if (got)
        memcpy(y, got, (size_t)rows * n * 4);
    else
        hk_check(0, "softmax runs", "%s", hk_last_error());
    hk_test_out_destroy(&out);
    hk_buffer_destroy(xb);
    return got != NULL;
}

/* ---- the rules, on rows with known answers (the reference held to them too) ---- */

static void test_argmax_rules(hk_context *ctx)
{
    const float inf = INFINITY, nan = NAN;
    static const char *what[] = {"NaN only: none", "-inf and NaN: the first -inf", "+inf beats numbers, first +inf",
                                 "-0 equals +0: the first zero", "ties: the first", "the maximum at the tail",
                                 "the maximum at the head"};
    const float x[7][5] = {
        {nan, nan, nan, nan, nan}, {nan, -inf, nan, -inf, nan}, {nan, -inf, 3, inf, inf},
        {-0.0f, 0.0f, -1, -0.0f, 0}, {1, 2, 2, nan, 2},       {1, 2, 3, 4, 5},
        {5, 4, 3, 2, 1},
    };
    const uint32_t want[7] = {NONE, 1, 3, 0, 1, 4, 0};
    uint32_t ref[7], got[7] = {0};
    hk_ref_argmax(&x[0][0], ref, 7, 5);
    int ran = run_argmax(ctx, &x[0][0], 7, 5, got);
    for (int r = 0; r < 7; r++) {
        char name[120];
        snprintf(name, sizeof name, "argmax rule: %s", what[r]);
        hk_check(ref[r] == want[r] && ran && got[r] == want[r], name, "got %u, reference %u, want %u", got[r], ref[r],
                 want[r]);
    }
}

static void test_softmax_rules(hk_context *ctx)
{
    const float inf = INFINITY, nan = NAN;
    const float x[6][4] = {
        {inf, 1, inf, -inf},                /* the +inf entries share the row */
        {-inf, -inf, -inf, -inf},           /* uniform */
        {1, nan, 2, 3},                     /* NaN */
        {1, 1e30f, -1e30f, 1e30f},          /* huge logits: no overflow, the maxima share */
        {0.0f, logf(2), logf(3), logf(4)},  /* 0.1, 0.2, 0.3, 0.4 */
        {3, 3, 1, -inf},                    /* with a reciprocal temperature of +inf: 0.5, 0.5, 0, 0 */
    };
    static const char *what[] = {"+inf entries share the row", "-inf only: uniform", "NaN: the row NaN",
                                 "+-1e30: the maxima share", "log(1..4): 0.1 .. 0.4",
                                 "temperature 1e-45: argmax, ties shared"};
    const float want[6][4] = {
        {0.5f, 0, 0.5f, 0}, {0.25f, 0.25f, 0.25f, 0.25f}, {nan, nan, nan, nan}, {0, 0.5f, 0, 0.5f},
        {0.1f, 0.2f, 0.3f, 0.4f}, {0.5f, 0.5f, 0, 0},
    };
    for (int r = 0; r < 6; r++) {
        /* 1e-45 is subnormal: its reciprocal overflows f32 */
        float t = r == 5 ? 1e-45f : 1.0f, ref[4], got[4] = {0};
        hk_ref_softmax(x[r], ref, 1, 4, t);
        int ran = run_softmax(ctx, x[r], 1, 4, t, got);
        /* exact, except the logarithms (rounded logits, the device's exp) */
        double tol = r == 4 ? 1e-6 : 0.0, worst = 0.0;
        for (int i = 0; i < 4; i++) {
            double eg = isnan(want[r][i]) ? (isnan(got[i]) ? 0 : INFINITY) : fabs((double)got[i] - want[r][i]);
            double er = isnan(want[r][i]) ? (isnan(ref[i]) ? 0 : INFINITY) : fabs((double)ref[i] - want[r][i]);
            worst = fmax(worst, fmax(eg != eg ? INFINITY : eg, er != er ? INFINITY : er));
        }
        char name[120];
        snprintf(name, sizeof name, "softmax rule: %s", what[r]);
        hk_check(ran && worst <= tol, name, "got %g %g %g %g, reference %g %g %g %g", got[0], got[1], got[2], got[3],
                 ref[0], ref[1], ref[2], ref[3]);
    }
}

/* ---- the tie rule, whatever the order of the reduction ---- */

/* Rows of n values in [-1, 1) with 2.0 planted at the listed indices of each row: the id must be
 * the lowest of them (the reference must say so too). rows >= 64 runs 256-wide workgroups, fewer
 * rows of n >= 4096 1024-wide ones: the pairs put the lower index in the last lanes of a
 * workgroup-wide stride and the higher one in its first, across the halves of the workgroup, at
 * the tail, and at random. */
static void tie_sweep(hk_context *ctx, uint32_t rows, uint32_t n, uint32_t w, uint64_t seed)
{
    hk_rng rng = {seed};
    float *x = malloc((size_t)rows * n * 4);
    uint32_t *want = malloc(rows * 4), *ref = malloc(rows * 4), *got = malloc(rows * 4);
    hk_rng_fill(&rng, x, (size_t)rows * n, -1.0f, 1.0f);
    const uint32_t fixed[][3] = {
        {w - 1, w, NONE},         {w / 2 - 1, w / 2, NONE}, {w / 2, w - 1 + w / 2, NONE}, {2 * w - 1, 2 * w + 3, n - 1},
        {n - 2, n - 1, NONE},     {n - 1 - w, n - 1, NONE}, {0, w, n - 1},               {w + 7, 3 * w + 2, NONE},
        {3 * w - 5, 3 * w + 5, NONE},
    };
    const uint32_t n_fixed = sizeof fixed / sizeof fixed[0];
    for (uint32_t r = 0; r < rows; r++) {
        float *row = x + (size_t)r * n;
        uint32_t idx[3] = {NONE, NONE, NONE};
        if (r < n_fixed)
            memcpy(idx, fixed[r], sizeof idx);
        else
            for (int j = 0; j < 3; j++)
                idx[j] = (uint32_t)(hk_rng_next(&rng) % n);
        want[r] = NONE;
        for (int j = 0; j < 3; j++)
            if (idx[j] != NONE) {
                row[idx[j]] = 2.0f;
                want[r] = idx[j] < want[r] ? idx[j] : want[r];
            }
    }
    hk_ref_argmax(x, ref, rows, n);
    int ran = run_argmax(ctx, x, rows, n, got);
    uint32_t wrong = 0, ref_wrong = 0, first = 0;
    for (uint32_t r = 0; r < rows; r++) {
        ref_wrong += ref[r] != want[r];
        if (!ran || got[r] != want[r])
            if (wrong++ == 0)
                first = r;
    }
    char name[120];
    snprintf(name, sizeof name, "argmax planted ties, %u rows of %u (%u-wide)", rows, n, w);
    hk_check(ran && wrong == 0 && ref_wrong == 0, name, "%u rows wrong (row %u: %u, want %u); reference %u wrong",
             wrong, first, ran ? got[first] : NONE, want[first], ref_wrong);
    free(x);
    free(want);
    free(ref);
    free(got);
}

/* ---- the largest n (HK_ROWWISE_MAX_N) runs and is right; the next is refused ---- */

static void test_limit(hk_context *ctx)
{
    const uint32_t n = HK_ROWWISE_MAX_N;
    hk_rng rng = {31};
    float *x = malloc((size_t)n * 4), *ref = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    hk_rng_fill(&rng, x, n, -8.0f, 8.0f);
    x[n - 1] = 9.0f; /* the maximum at the very end: a loop cut short misses it */
    uint32_t id = NONE;
    int ran = run_argmax(ctx, x, 1, n, &id);
    hk_check(ran && id == n - 1, "argmax at n = HK_ROWWISE_MAX_N (2097152)", "got %u, want %u", id, n - 1);
    hk_ref_softmax(x, ref, 1, n, 1.0f);
    if (run_softmax(ctx, x, 1, n, 1.0f, y))
        hk_check_close("softmax at n = HK_ROWWISE_MAX_N (2097152)", y, ref, n, HK_GATE_SOFTMAX);
    hk_buffer *xb = hk_test_buffer(ctx, 64, NULL);
    hk_view v = {xb, 0}, o = {xb, 32};
    hk_check_status("argmax past HK_ROWWISE_MAX_N", hk_argmax(ctx, NULL, v, o, 1, n + 1), HK_ERROR_INVALID_ARGUMENT,
                    "n=2097153 exceeds the limit n <= 2097152");
    hk_check_status("softmax past HK_ROWWISE_MAX_N", hk_softmax(ctx, NULL, v, o, 1, n + 1, 1.0f),
                    HK_ERROR_INVALID_ARGUMENT, "n=2097153 exceeds the limit n <= 2097152");
    hk_buffer_destroy(xb);
    free(x);
    free(ref);
    free(y);
}

/* ---- argument errors: the status, a message naming the problem, nothing recorded or written ---- */

static hk_stream *err_stream;
static hk_test_out err_out;

static void expect(const char *name, hk_status got, hk_status want, const char *needle)
{
    hk_check_status(name, got, want, needle);
    hk_check(hk_stream_kernel_count(err_stream) == 0, name, "nothing recorded");
    if (hk_stream_submit(err_stream) != HK_OK)
        hk_check(0, name, "submit: %s", hk_last_error());
    const float *o = hk_test_out_read(&err_out, name);
    uint32_t bad = 0;
    for (size_t i = 0; o && i < err_out.n; i++) {
        uint32_t word;
        memcpy(&word, &o[i], 4);
        bad += word != HK_POISON_WORD;
    }
    hk_check(o && bad == 0, name, "%u output words written", bad);
}

static void test_errors(hk_context *ctx)
{
    const uint32_t rows = 2, n = 8;
    const hk_status INV = HK_ERROR_INVALID_ARGUMENT;
    err_out = hk_test_out_create(ctx, (size_t)rows * n);
    if (hk_stream_create(ctx, 0, &err_stream) != HK_OK) {
        hk_check(0, "rowwise errors: stream", "%s", hk_last_error());
        hk_test_out_destroy(&err_out);
        return;
    }
    float data[16];
    hk_rng rng = {3};
    hk_rng_fill(&rng, data, 16, -1.0f, 1.0f);
    hk_buffer *xb = hk_test_buffer(ctx, sizeof data, data);
    hk_view x = {xb, 0}, o = hk_test_out_view(&err_out);
    hk_stream *s = err_stream;

    /* the valid calls work, so every failure below is down to its one bad argument */
    hk_check_status("valid argmax", hk_argmax(ctx, s, x, o, rows, n), HK_OK, NULL);
    hk_check_status("valid softmax", hk_softmax(ctx, s, x, o, rows, n, 0.7f), HK_OK, NULL);
    hk_check_status("valid calls run", hk_stream_submit(s), HK_OK, NULL);
    hk_test_out_poison(&err_out);

    expect("argmax null context", hk_argmax(NULL, s, x, o, rows, n), INV, "context is NULL");
    expect("argmax rows = 0", hk_argmax(ctx, s, x, o, 0, n), INV, "rows=0 and n=8 must both be positive");
    expect("argmax n = 0", hk_argmax(ctx, s, x, o, rows, 0), INV, "rows=2 and n=0 must both be positive");
    expect("argmax null x buffer", hk_argmax(ctx, s, (hk_view){NULL, 0}, o, rows, n), INV, "x.buffer is NULL");
    expect("argmax null ids buffer", hk_argmax(ctx, s, x, (hk_view){NULL, 0}, rows, n), INV, "ids.buffer is NULL");
    expect("argmax x misaligned", hk_argmax(ctx, s, (hk_view){xb, 2}, o, 1, n), INV,
           "x.offset=2 is not a multiple of 4");
    expect("argmax ids misaligned", hk_argmax(ctx, s, x, (hk_view){o.buffer, o.offset + 2}, rows, n), INV,
           "ids.offset=66 is not a multiple of 4");
    expect("argmax x past the end", hk_argmax(ctx, s, x, o, rows + 1, n), INV,
           "x needs 96 bytes at offset 0, past the end of its 64-byte buffer");
    expect("argmax x view past the end", hk_argmax(ctx, s, (hk_view){xb, 4}, o, rows, n), INV,
           "x needs 64 bytes at offset 4");
    hk_view ids_end = {o.buffer, o.offset + (16 + HK_TEST_GUARD - 1) * 4}; /* one word left in the buffer */
    expect("argmax ids past the end", hk_argmax(ctx, s, x, ids_end, rows, n), INV, "ids needs 8 bytes at offset 188");
    expect("argmax ids overlap x", hk_argmax(ctx, s, (hk_view){o.buffer, 40}, o, 1, n), INV, "output ids overlaps x");
    expect("argmax ids exactly x (no in place)", hk_argmax(ctx, s, o, o, 1, 1), INV, "output ids overlaps x");

    expect("softmax null context", hk_softmax(NULL, s, x, o, rows, n, 1.0f), INV, "context is NULL");
    static const float bad_t[] = {0.0f, -0.0f, -1.0f, NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 6; i++) {
        char name[80];
        snprintf(name, sizeof name, "softmax temperature %g", (double)bad_t[i]);
        expect(name, hk_softmax(ctx, s, x, o, rows, n, bad_t[i]), INV, "must be positive and finite");
    }
    expect("softmax temperature 0 named", hk_softmax(ctx, s, x, o, rows, n, 0.0f), INV, "temperature=0 must be");
    expect("softmax rows = 0", hk_softmax(ctx, s, x, o, 0, n, 1.0f), INV, "rows=0 and n=8 must both be positive");
    expect("softmax n = 0", hk_softmax(ctx, s, x, o, rows, 0, 1.0f), INV, "rows=2 and n=0 must both be positive");
    expect("softmax null y buffer", hk_softmax(ctx, s, x, (hk_view){NULL, 0}, rows, n, 1.0f), INV, "y.buffer is NULL");
    expect("softmax x misaligned", hk_softmax(ctx, s, (hk_view){xb, 2}, o, 1, n, 1.0f), INV,
           "x.offset=2 is not a multiple of 4");
    expect("softmax y misaligned", hk_softmax(ctx, s, x, (hk_view){o.buffer, o.offset - 2}, rows, n, 1.0f), INV,
           "y.offset=62 is not a multiple of 4");
    expect("softmax x past the end", hk_softmax(ctx, s, x, o, rows + 1, n, 1.0f), INV,
           "x needs 96 bytes at offset 0, past the end of its 64-byte buffer");
    hk_view y_end = {o.buffer, o.offset + 4 * HK_TEST_GUARD + 4}; /* 60 bytes left in the buffer */
    expect("softmax y past the end", hk_softmax(ctx, s, x, y_end, rows, n, 1.0f), INV,
           "y needs 64 bytes at offset 132");
    expect("softmax y overlaps x", hk_softmax(ctx, s, (hk_view){o.buffer, 40}, o, 1, n, 1.0f), INV,
           "output y overlaps x");

    hk_stream_destroy(err_stream);
    hk_test_out_destroy(&err_out);
    hk_buffer_destroy(xb);
}

int main(void)
{
    hk_context *ctx = hk_test_context();
    test_argmax_rules(ctx);
    test_softmax_rules(ctx);
    tie_sweep(ctx, 100, 3000, 256, 71);
    tie_sweep(ctx, 12, 5000, 1024, 72);
    test_limit(ctx);
    test_errors(ctx);
    return hk_test_finish(ctx);
}
