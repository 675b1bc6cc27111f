/* cases_elementwise.c — table rows of the elementwise kernels: the residual add (hk_add,
 * hk_add_scaled) and the gated activations (hk_swiglu: SwiGLU, GeGLU). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32 HK_TYPE_F32

/* Shape variants (bits): the output is an input's view (in place); the inputs hold NaN, infinities
 * and exact cancellations (IEEE propagation); hk_add_scaled with an alpha whose products round. */
enum { EW_Y_IS_0 = 1, EW_Y_IS_1 = 2, EW_SPECIALS = 4, EW_SCALED = 8 };
#define ADD_ALPHA (-0.7f)

/* Seeded values in [lo, hi), NULL if out of host memory. */
static float *values(hk_rng *rng, size_t n, float lo, float hi)
{
    float *v = hk_case_alloc(n * sizeof(float));
    if (v)
        hk_rng_fill(rng, v, n, lo, hi);
    return v;
}

/* Every 7th pair of values (x[i], y[i]) set to one of the special pairs, in turn. */
static void specials(float *x, float *y, size_t n)
{
    static const float pairs[][2] = {
        {NAN, 1.0f}, {1.0f, NAN}, {INFINITY, 1.0f}, {-INFINITY, 1.0f}, {INFINITY, -INFINITY}, {1.0f, INFINITY},
        {0.0f, INFINITY}, {-INFINITY, 0.0f}, {-100.0f, 1.0f}, {100.0f, -1.0f}, {2.5f, -2.5f}, {-0.0f, -0.0f},
    };
    for (size_t i = 0, k = 0; i < n; i += 7, k++) {
        x[i] = pairs[k % 12][0];
        y[i] = pairs[k % 12][1];
    }
}

/* got against ref, value by value: a non-finite reference must come back as the same value (any
 * NaN for a NaN), a finite one finite; exact: the same bits, else within the scale-relative
 * measure of the finite values (max |got - ref| / max |ref|). INFINITY where anything fails. */
static double compare_values(const float *got, const float *ref, size_t n, int exact, char *detail, size_t size)
{
    size_t bad = 0, first = n;
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        float g = got[i], r = ref[i];
        int same = isnan(r) ? isnan(g) : !isfinite(r) ? g == r : exact ? !memcmp(&g, &r, 4) : isfinite(g);
        if (!same) {
            first = bad++ ? first : i;
            continue;
        }
        if (isfinite(r)) {
            err = fmax(err, fabs((double)g - r));
            scale = fmax(scale, fabs((double)r));
        }
    }
    double rel = scale > 0 ? err / scale : err;
    if (bad)
        snprintf(detail, size, "%zu of %zu values wrong%s, the first [%zu] %a (want %a)", bad, n,
                 exact ? " (not bit-identical)" : "", first, (double)got[first], (double)ref[first]);
    else if (exact)
        snprintf(detail, size, "bit-identical");
    else
        snprintf(detail, size, "scale_rel=%.3e", rel);
    return bad ? INFINITY : exact ? 0.0 : rel;
}

/* ---- hk_add / hk_add_scaled: d = {n}; variant: EW_Y_IS_0 (y is a), EW_Y_IS_1 (y is b),
 * EW_SPECIALS, EW_SCALED (hk_add_scaled with ADD_ALPHA) ---- */

static hk_status prepare_add(hk_case_run *run, uint64_t seed)
{
    uint32_t n = run->shape.d[0];
    int v = run->shape.variant, in_place = v & (EW_Y_IS_0 | EW_Y_IS_1);
    hk_rng rng = {seed};
    float *a = values(&rng, n, -4.0f, 4.0f), *b = values(&rng, n, -4.0f, 4.0f);
    if (!a || !b) {
        free(a);
        free(b);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    if (v & EW_SPECIALS)
        specials(a, b, n);
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = n;
        if (!(run->ref = hk_case_alloc((size_t)n * sizeof(float)))) {
            free(a);
            free(b);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        hk_ref_add(a, b, run->ref, n, v & EW_SCALED ? ADD_ALPHA : 1.0f);
    }
    int ai = hk_case_tensor_add(run, "a", v & EW_Y_IS_0 ? HK_CASE_INOUT : HK_CASE_IN, (uint64_t)n * 4, 4, !in_place, a);
    int bi = hk_case_tensor_add(run, "b", v & EW_Y_IS_1 ? HK_CASE_INOUT : HK_CASE_IN, (uint64_t)n * 4, 4, !in_place, b);
    if (in_place)
        hk_case_tensor_alias(run, "y", v & EW_Y_IS_0 ? ai : bi);
    else
        hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)n * 4, 4, 0, NULL);
    run->bytes = 12.0 * n;
    snprintf(run->label, sizeof run->label, "%u%s%s%s", n, v & EW_SCALED ? " scaled" : "",
             v & EW_Y_IS_0 ? " y=a" : v & EW_Y_IS_1 ? " y=b" : "", v & EW_SPECIALS ? " nan/inf" : "");
    return HK_OK;
}

static hk_status record_add(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    uint32_t n = run->shape.d[0];
    if (run->shape.variant & EW_SCALED)
        return hk_add_scaled(run->ctx, s, v[0], v[1], v[2], n, ADD_ALPHA);
    return hk_add(run->ctx, s, v[0], v[1], v[2], n);
}

/* bit for bit (any NaN for a NaN) */
static double compare_add(const hk_case_run *run, char *detail, size_t size)
{
    return compare_values(run->t[2].got, run->ref, run->ref_count, 1, detail, size);
}

static const hk_case_shape add_tests[] = {
    /* tails (the scalar variant), hidden and intermediate sizes (16-byte loads) */
    {F32, {1}, 0, 0}, {F32, {3}, 0, 0}, {F32, {5}, 0, 0}, {F32, {1023}, 0, 0}, {F32, {4096}, 0, 0},
    {F32, {14336}, 0, 0},
    /* in place and scaled (-0.7 * b rounds: an fma would give other bits) */
    {F32, {4096}, EW_Y_IS_0, 0}, {F32, {1023}, EW_Y_IS_1 | EW_SCALED, 0}, {F32, {14336}, EW_SCALED, 0},
    {F32, {4096}, EW_Y_IS_0 | EW_SCALED, 0},
    /* NaN, infinities, inf - inf, exact cancellation, signed zeros */
    {F32, {1000}, EW_SPECIALS, 0}, {F32, {1028}, EW_SPECIALS | EW_SCALED, 0},
    {F32, {16777217}, 0, 0}, /* scalar, more workgroups than one dispatch dimension holds */
};
static const hk_case_shape add_quick[] = {{F32, {4096}, 0, 0}, {F32, {512 * 4096}, 0, 0}};
/* the residual of a decode step and of a 512-token prefill chunk (Qwen3-1.7B, Llama-3-8B) */
static const hk_case_shape add_full[] = {
    {F32, {2048}, 0, 0},       {F32, {4096}, 0, 0}, {F32, {512 * 2048}, 0, 0},
    {F32, {512 * 4096}, 0, 0}, {F32, {512 * 4096}, EW_SCALED, 0},
};

const hk_case hk_case_add = {
    .name = "add",
    .gate = 1.0, /* compare is exact: 0 or infinity */
    .prepare = prepare_add,
    .record = record_add,
    .compare = compare_add,
    CASE_SHAPES(add_tests, add_quick, add_full),
};

/* ---- hk_swiglu: d = {rows, n, fused, gelu}; fused: one [rows, 2n] tensor, gate then up
 * (in_stride 2n), else two [rows, n] tensors; variant: EW_Y_IS_0 (y is gate: separate, or fused with
 * one row), EW_Y_IS_1 (y is up, separate), EW_SPECIALS ---- */

static hk_status prepare_swiglu(hk_case_run *run, uint64_t seed)
{
    uint32_t rows = run->shape.d[0], n = run->shape.d[1], fused = run->shape.d[2], gelu = run->shape.d[3];
    int v = run->shape.variant, in_place = v & (EW_Y_IS_0 | EW_Y_IS_1);
    size_t count = (size_t)rows * n, stride = fused ? 2 * (size_t)n : n;
    hk_rng rng = {seed};
    /* fused: gate and up interleaved by rows in one tensor, held in g */
    float *g = values(&rng, fused ? 2 * count : count, -8.0f, 8.0f);
    float *u = fused ? NULL : values(&rng, count, -2.0f, 2.0f);
    if (!g || (!fused && !u)) {
        free(g);
        free(u);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    float *up = fused ? g + n : u;
    for (uint32_t r = 0; fused && r < rows; r++) /* up's half in up's range */
        for (uint32_t i = 0; i < n; i++)
            up[r * stride + i] /= 4.0f;
    for (uint32_t r = 0; (v & EW_SPECIALS) && r < rows; r++)
        specials(g + r * stride, up + r * stride, n);
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = count;
        if (!(run->ref = hk_case_alloc(count * sizeof(float)))) {
            free(g);
            free(u);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        hk_ref_glu(g, up, run->ref, rows, n, stride, (int)gelu);
    }
    int gi = hk_case_tensor_add(run, fused ? "gate_up" : "gate", v & EW_Y_IS_0 ? HK_CASE_INOUT : HK_CASE_IN,
                                (uint64_t)(fused ? 2 * count : count) * 4, 4, !in_place, g);
    int ui = fused ? gi
                   : hk_case_tensor_add(run, "up", v & EW_Y_IS_1 ? HK_CASE_INOUT : HK_CASE_IN, (uint64_t)count * 4, 4,
                                        !in_place, u);
    if (in_place)
        hk_case_tensor_alias(run, "y", v & EW_Y_IS_0 ? gi : ui);
    else
        hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)count * 4, 4, 0, NULL);
    run->bytes = 12.0 * count;
    snprintf(run->label, sizeof run->label, "%ux%u %s %s%s%s", rows, n, fused ? "fused" : "separate",
             gelu ? "gelu" : "silu", v & EW_Y_IS_0 ? " y=gate" : v & EW_Y_IS_1 ? " y=up" : "",
             v & EW_SPECIALS ? " nan/inf" : "");
    return HK_OK;
}

static hk_status record_swiglu(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    uint32_t rows = run->shape.d[0], n = run->shape.d[1], fused = run->shape.d[2];
    hk_glu_mode mode = run->shape.d[3] ? HK_GLU_GELU_TANH : HK_GLU_SILU;
    hk_view up = fused ? (hk_view){v[0].buffer, v[0].offset + (uint64_t)n * 4} : v[1];
    hk_view y = v[fused ? 1 : 2];
    return hk_swiglu(run->ctx, s, v[0], up, y, rows, n, fused ? 2 * n : n, mode);
}

/* Within HK_GATE_GLU, non-finite values as the reference has them. Fused in place (one row: y is
 * the gate half), the up half must come back as it went in. */
static double compare_swiglu(const hk_case_run *run, char *detail, size_t size)
{
    uint32_t n = run->shape.d[1], fused = run->shape.d[2];
    const hk_case_tensor *y = &run->t[fused ? 1 : 2];
    if (fused && y->alias >= 0 && memcmp((const float *)y->got + n, (const float *)run->t[0].host + n, (size_t)n * 4)) {
        snprintf(detail, size, "the up half of the fused tensor changed");
        return INFINITY;
    }
    return compare_values(y->got, run->ref, run->ref_count, 0, detail, size);
}

/* {rows, n, fused, gelu} */
#define SILU 0
#define GELU 1
#define SEP 0
#define FUSED 1
static const hk_case_shape swiglu_tests[] = {
    /* tails (n = 1, 3, 5, 1023: the scalar variant), Llama-3-8B's and Qwen3-1.7B's intermediate
     * sizes (14336, 6144: 16-byte loads), decode and 8 rows, both layouts and modes */
    {F32, {1, 1, SEP, SILU}, 0, 0},
    {F32, {1, 3, FUSED, GELU}, 0, 0},
    {F32, {1, 5, SEP, GELU}, 0, 0},
    {F32, {8, 1023, FUSED, SILU}, 0, 0},
    {F32, {8, 1023, SEP, GELU}, 0, 0},
    {F32, {1, 4096, SEP, SILU}, 0, 0},
    {F32, {1, 4096, FUSED, GELU}, 0, 0},
    {F32, {8, 6144, FUSED, SILU}, 0, 0},
    {F32, {1, 14336, FUSED, SILU}, 0, 0},
    {F32, {8, 14336, SEP, GELU}, 0, 0},
    /* in place: y is gate (separate; fused with one row) or up */
    {F32, {8, 4096, SEP, SILU}, EW_Y_IS_0, 0},
    {F32, {3, 1023, SEP, GELU}, EW_Y_IS_1, 0},
    {F32, {1, 1024, FUSED, SILU}, EW_Y_IS_0, 0},
    /* NaN, infinities, gates far out in both directions */
    {F32, {2, 100, SEP, SILU}, EW_SPECIALS, 0},
    {F32, {2, 100, FUSED, GELU}, EW_SPECIALS, 0},
};
static const hk_case_shape swiglu_quick[] = {{F32, {1, 14336, FUSED, SILU}, 0, 0},
                                             {F32, {64, 14336, FUSED, SILU}, 0, 0}};
static const hk_case_shape swiglu_full[] = {
    {F32, {1, 14336, SEP, SILU}, 0, 0},  {F32, {1, 14336, FUSED, SILU}, 0, 0},  {F32, {512, 14336, FUSED, SILU}, 0, 0},
    {F32, {1, 6144, SEP, SILU}, 0, 0},   {F32, {512, 6144, SEP, SILU}, 0, 0},   {F32, {512, 14336, SEP, GELU}, 0, 0},
};

const hk_case hk_case_swiglu = {
    .name = "swiglu",
    .gate = HK_GATE_GLU,
    .prepare = prepare_swiglu,
    .record = record_swiglu,
    .compare = compare_swiglu,
    CASE_SHAPES(swiglu_tests, swiglu_quick, swiglu_full),
};
