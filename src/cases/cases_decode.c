/* cases_decode.c — table rows of the decode family: quantized matvec (f32 and Q8_1 x), MoE
 * expert gather, router, f32 GEMV (one token or several), RMSNorm (alone and fused with the Q8_1
 * quantizer), the Q8_1 quantizer. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q8 HK_TYPE_Q8_0
#define Q4 HK_TYPE_Q4_K
#define Q5 HK_TYPE_Q5_K
#define Q6 HK_TYPE_Q6_K
#define F32 HK_TYPE_F32
#define F16 HK_TYPE_F16

/* The weights' alignment the rows-layout kernels ask (hk_matvec_int8 and the MoE always; hk_matvec
 * falls back to its portable kernel below it): Q4_K and Q5_K read weights 16 bytes at a time. */
static uint32_t wide_align(hk_type type) { return type == Q4 || type == Q5 ? 16 : 2; }

/* Seeded activations in [-1, 1). */
static float *activations(hk_rng *rng, size_t n)
{
    float *x = hk_case_alloc(n * sizeof(float));
    if (x)
        hk_rng_fill(rng, x, n, -1.0f, 1.0f);
    return x;
}

/* Q8_1 blocks of x, as hk_quantize_q8_1 makes them. */
static hk_block_q8_1 *quantized(const float *x, size_t n)
{
    hk_block_q8_1 *xq = hk_case_alloc(n / 32 * sizeof *xq);
    if (xq)
        hk_quant_row_q8_1(x, xq, n);
    return xq;
}

/* ---- quantized matvec: d = {rows, k}, variant 1 = raw random blocks (never F16: its raw bits
 * hold infinities and NaNs) ---- */

static hk_status prepare_matvec_any(hk_case_run *run, uint64_t seed, int int8)
{
    hk_type type = run->shape.type;
    uint32_t rows = run->shape.d[0], k = run->shape.d[1];
    hk_rng rng = {seed};
    uint64_t w_bytes = hk_ref_row_bytes((int)type, k) * rows;
    float *x = activations(&rng, k);
    uint8_t *w = hk_random_weights(&rng, (int)type, rows, k, run->shape.variant);
    hk_block_q8_1 *xq = x && int8 ? quantized(x, k) : NULL;
    if (!x || !w || (int8 && !xq)) {
        free(x);
        free(w);
        free(xq);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    hk_case_tensor_add(run, "w", HK_CASE_IN, w_bytes, int8 ? wide_align(type) : 2, 1, w);
    if (int8)
        hk_case_tensor_add(run, "xq", HK_CASE_IN, (uint64_t)k / 32 * 36, 4, 0, xq);
    else
        hk_case_tensor_add(run, "x", HK_CASE_IN, (uint64_t)k * 4, 4, 0, x);
    hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)rows * 4, 4, 0, NULL);
    run->bytes = (double)w_bytes + (int8 ? 36.0 * k / 32 : 4.0 * k) + 4.0 * rows;
    snprintf(run->label, sizeof run->label, "%s %ux%u%s", hk_type_name(type), rows, k,
             run->shape.variant ? " raw" : "");
    hk_status st = HK_OK;
    if (run->ref_mode != HK_REF_NONE) {
        /* int8: run->state holds the f32 matvec on the unquantized x beside the exact reference */
        run->ref_count = rows;
        run->ref = hk_case_alloc(rows * sizeof(float));
        run->state = int8 ? hk_case_alloc(rows * sizeof(float)) : NULL;
        if (!run->ref || (int8 && !run->state))
            st = HK_ERROR_OUT_OF_MEMORY;
        else if (int8) {
            hk_ref_matvec_q8_1((int)type, w, xq, run->ref, rows, k);
            hk_ref_matvec((int)type, w, x, run->state, rows, k);
        } else {
            hk_ref_matvec((int)type, w, x, run->ref, rows, k);
        }
    }
    if (int8)
        free(x);
    return st;
}

static hk_status prepare_matvec(hk_case_run *run, uint64_t seed) { return prepare_matvec_any(run, seed, 0); }
static hk_status prepare_matvec_int8(hk_case_run *run, uint64_t seed) { return prepare_matvec_any(run, seed, 1); }

static hk_status record_matvec(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    return hk_matvec(run->ctx, s, run->shape.type, v[0], v[1], v[2], run->shape.d[0], run->shape.d[1]);
}

static hk_status record_matvec_int8(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    return hk_matvec_int8(run->ctx, s, run->shape.type, v[0], v[1], v[2], run->shape.d[0], run->shape.d[1]);
}

/* Int8: the exact contraction of the dequantized values (the gate), and beside it the distance to
 * the f32 matvec on the unquantized x, which only measures the Q8_1 rounding: it is held to
 * HK_GATE_INT8 where there are enough rows for the scale of many outputs to mean something. */
static double compare_int8(const hk_case_run *run, char *detail, size_t size)
{
    const float *got = run->t[2].got;
    double rel = hk_scale_rel(got, run->ref, run->ref_count);
    double vs_f32 = hk_scale_rel(got, run->state, run->ref_count);
    snprintf(detail, size, "scale_rel=%.3e, vs f32 x %.3e (gate %.0e)", rel, vs_f32, HK_GATE_INT8);
    return run->ref_count >= 32 && !(vs_f32 < HK_GATE_INT8) ? INFINITY : rel;
}

/* One shape per type: {type, {rows, k}, raw}. */
#define PER_TYPE(rows, k, raw)                                                                                         \
    {Q4, {rows, k}, raw, 0}, {Q5, {rows, k}, raw, 0}, {Q6, {rows, k}, raw, 0}, {Q8, {rows, k}, raw, 0}

static const hk_case_shape matvec_tests[] = {
    /* one row at the smallest k, a tail of rows, an odd number of blocks, a Qwen3-1.7B projection,
     * more row groups than workgroups launched; raw blocks (every bit pattern) and real rows; an
     * F16 row ending inside a unit among the first (the GPU-assisted run takes those) */
    {Q4, {1, 256}, 1, 0},     {Q5, {1, 256}, 1, 0},     {Q6, {1, 256}, 1, 0},     {Q8, {1, 32}, 1, 0},
    {F16, {7, 13}, 0, 0},     {Q4, {7, 768}, 0, 0},     {Q5, {7, 768}, 0, 0},     {Q6, {7, 768}, 0, 0},
    {Q8, {7, 96}, 0, 0},      {Q4, {131, 1280}, 1, 0},  {Q5, {131, 1280}, 1, 0},  {Q6, {131, 1280}, 1, 0},
    {Q8, {131, 160}, 1, 0},   {Q4, {17, 512}, 0, 0},    {Q5, {17, 512}, 0, 0},    {Q6, {17, 512}, 1, 0},
    {Q8, {17, 64}, 0, 0},     PER_TYPE(2048, 2048, 0),  PER_TYPE(300, 6144, 1),   {Q4, {40000, 256}, 0, 0},
    {Q5, {40000, 256}, 0, 0}, {Q6, {40000, 256}, 1, 0}, {Q8, {40000, 32}, 0, 0},
    /* F16 (f32 x only): k of one value, off 8 (the portable kernel, rows ending inside a unit),
     * multiples of 8 (subgroup rows) at 1, 2 and 4 rows per subgroup, a real width */
    {F16, {1, 1}, 0, 0},     {F16, {17, 100}, 0, 0},  {F16, {131, 8}, 0, 0},    {F16, {5, 40}, 0, 0},
    {F16, {4100, 24}, 0, 0}, {F16, {300, 2048}, 0, 0}, {F16, {40000, 16}, 0, 0}, {F16, {40001, 3}, 0, 0},
};
static const hk_case_shape matvec_int8_tests[] = {
    {Q4, {1, 256}, 1, 0},     {Q5, {1, 256}, 1, 0},     {Q6, {1, 256}, 1, 0},     {Q8, {1, 32}, 1, 0},
    {Q4, {5, 768}, 0, 0},     {Q5, {5, 768}, 0, 0},     {Q6, {5, 768}, 0, 0},     {Q8, {5, 96}, 0, 0},
    PER_TYPE(37, 256, 1),     PER_TYPE(2048, 2048, 0),  PER_TYPE(100, 6144, 1),   {Q4, {40001, 256}, 0, 0},
    {Q5, {40001, 256}, 0, 0}, {Q6, {40001, 256}, 1, 0}, {Q8, {40001, 32}, 0, 0},
};
#define MATVEC_QUICK PER_TYPE(2048, 2048, 1), PER_TYPE(512, 6144, 1)
static const hk_case_shape matvec_quick[] = {MATVEC_QUICK, {F16, {2048, 2048}, 0, 0}, {F16, {512, 6144}, 0, 0}};
static const hk_case_shape matvec_int8_quick[] = {MATVEC_QUICK};
/* hk-bench/hk-check on GPUs: Llama-3-8B / Qwen3 projections and the 151936-row vocab head, with
 * llama.cpp-vk's time on the H200 where issue 3 gives it */
#define MATVEC_FULL                                                                                                    \
    {Q4, {4096, 4096}, 1, 0.0098},  {Q4, {14336, 4096}, 1, 0.141}, {Q4, {4096, 14336}, 1, 0},                          \
    {Q4, {2048, 2048}, 1, 0},       {Q4, {6144, 2048}, 1, 0},      {Q4, {2048, 6144}, 1, 0},                           \
    {Q4, {151936, 2048}, 1, 0.726}, {Q5, {4096, 4096}, 1, 0},      {Q5, {14336, 4096}, 1, 0},                          \
    {Q5, {4096, 14336}, 1, 0},      {Q5, {2048, 2048}, 1, 0},      {Q5, {6144, 2048}, 1, 0},                           \
    {Q5, {2048, 6144}, 1, 0},       {Q5, {151936, 2048}, 1, 0},    {Q5, {4096, 2048}, 1, 0},                           \
    {Q5, {512, 2048}, 1, 0},        {Q6, {4096, 4096}, 1, 0.034},  {Q6, {14336, 4096}, 1, 0},                          \
    {Q6, {4096, 14336}, 1, 0},      {Q6, {2048, 2048}, 1, 0},      {Q6, {6144, 2048}, 1, 0},                           \
    {Q6, {2048, 6144}, 1, 0},       {Q6, {151936, 2048}, 1, 0.601}, {Q8, {4096, 4096}, 1, 0.049},                      \
    {Q8, {14336, 4096}, 1, 0},      {Q8, {4096, 14336}, 1, 0},     {Q8, {2048, 2048}, 1, 0},                           \
    {Q8, {6144, 2048}, 1, 0},       {Q8, {2048, 6144}, 1, 0},      {Q8, {151936, 2048}, 1, 0.798}
static const hk_case_shape matvec_full[] = {
    MATVEC_FULL,
    /* F16 weights (f32 x): the same projections, and an F16 output head */
    {F16, {4096, 4096}, 0, 0},   {F16, {14336, 4096}, 0, 0}, {F16, {4096, 14336}, 0, 0},
    {F16, {2048, 2048}, 0, 0},   {F16, {6144, 2048}, 0, 0},  {F16, {2048, 6144}, 0, 0},
    {F16, {151936, 2048}, 0, 0},
};
static const hk_case_shape matvec_int8_full[] = {MATVEC_FULL};

const hk_case hk_case_matvec = {
    .name = "matvec",
    .gate = HK_GATE_F32,
    .prepare = prepare_matvec,
    .record = record_matvec,
    CASE_SHAPES(matvec_tests, matvec_quick, matvec_full),
};
static int tune_matvec_int8(const hk_case_run *run)
{
    (void)run;
    return HK_TUNE_MATVEC_INT8;
}

const hk_case hk_case_matvec_int8 = {
    .name = "matvec_int8",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_matvec_int8,
    .record = record_matvec_int8,
    .compare = compare_int8,
    .tune_family = tune_matvec_int8,
    CASE_SHAPES(matvec_int8_tests, matvec_int8_quick, matvec_int8_full),
};

/* ---- the int8 matvec's fused epilogues: hk_matvec_int8_add, d = {rows, k}; hk_matvec_int8_glu,
 * d = {rows, k, gelu}; variant bits FUSED_RAW (raw random blocks), FUSED_IN_PLACE (add: y is the
 * residual). Each is held to the bits of the unfused calls it replaces, run on the device at
 * prepare, and to the unfused references composed (hk_ref_matvec_q8_1, then hk_ref_add or
 * hk_ref_glu). ---- */
enum { FUSED_RAW = 1, FUSED_IN_PLACE = 2 };

/* run->state: the unfused calls' outputs, and the scale of the reference's error. The matvec's
 * error is relative to its own output scale, which the epilogue does not keep: added to the
 * residual it is relative to the larger of the two operands' scales, and multiplied with the
 * other sum, to the product of the two sums' scales (one output far out in the activation's tail
 * has a tiny value but the product's absolute error). */
typedef struct fused_state {
    double scale;
    int out;           /* the output's tensor */
    int q8;            /* the output is Q8_1 blocks: unfused holds the unfused calls' blocks */
    uint32_t routings; /* the MoE GLU's: the routings that the timed ops cycle through */
    float unfused[];
} fused_state;

/* max |v[i]| */
static double max_abs(const float *v, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)v[i]));
    return m;
}

/* Offsets of the unfused run's sections in one buffer: 256-byte aligned, as every view asks. */
static uint64_t section(uint64_t *end, uint64_t bytes)
{
    uint64_t at = *end;
    *end += (bytes + 255) / 256 * 256;
    return at;
}

/* The calls the fused kernel replaces, on the device, into out[rows]: hk_matvec_int8 into t, then
 * hk_add(residual, t) (w_up NULL), or hk_matvec_int8 of w and of w_up, then hk_swiglu of the two
 * (in_stride rows). */
static hk_status unfused(hk_context *ctx, hk_type type, const void *w, const void *w_up, const hk_block_q8_1 *xq,
                         const float *residual, uint32_t rows, uint32_t k, hk_glu_mode mode, float *out)
{
    uint64_t w_bytes = hk_ref_row_bytes((int)type, k) * rows, x_bytes = (uint64_t)k / 32 * 36, y_bytes = 4ull * rows;
    uint64_t end = 0, wo = section(&end, w_bytes), uo = section(&end, w_up ? w_bytes : 0), xo = section(&end, x_bytes);
    uint64_t ro = section(&end, w_up ? 0 : y_bytes), go = section(&end, y_bytes), to = section(&end, y_bytes);
    uint64_t yo = section(&end, y_bytes);
    hk_buffer *b = NULL;
    hk_status st = hk_buffer_create(ctx, end, &b);
    if (st == HK_OK)
        st = hk_buffer_upload(b, wo, w, w_bytes);
    if (st == HK_OK && w_up)
        st = hk_buffer_upload(b, uo, w_up, w_bytes);
    if (st == HK_OK)
        st = hk_buffer_upload(b, xo, xq, x_bytes);
    if (st == HK_OK && !w_up)
        st = hk_buffer_upload(b, ro, residual, y_bytes);
    hk_view v_w = {b, wo}, v_x = {b, xo}, v_g = {b, go}, v_t = {b, to}, v_y = {b, yo};
    if (st == HK_OK)
        st = hk_matvec_int8(ctx, NULL, type, v_w, v_x, v_g, rows, k);
    if (st == HK_OK && w_up)
        st = hk_matvec_int8(ctx, NULL, type, (hk_view){b, uo}, v_x, v_t, rows, k);
    if (st == HK_OK)
        st = w_up ? hk_swiglu(ctx, NULL, v_g, v_t, v_y, 1, rows, rows, mode)
                  : hk_add(ctx, NULL, (hk_view){b, ro}, v_g, v_y, rows);
    if (st == HK_OK)
        st = hk_buffer_download(b, yo, out, y_bytes);
    hk_buffer_destroy(b);
    return st;
}

/* The device's hk_quantize_q8_1 of the n f32 values v, written over v (n / 32 blocks of 36 bytes:
 * fewer than v's 4n): the unfused calls' last step for the Q8_1-output GLUs. With weight (f32 [n]):
 * hk_rmsnorm_q8_1 of v as one row instead (eps NORM_EPS), its normalised values into yn. */
#define NORM_EPS 1e-5f
static hk_status quantize_on_device(hk_context *ctx, float *v, const float *weight, float *yn, size_t n)
{
    uint64_t end = 0, fo = section(&end, 4ull * n), qo = section(&end, n / 32 * 36);
    uint64_t wo = section(&end, weight ? 4ull * n : 0), no = section(&end, weight ? 4ull * n : 0);
    hk_buffer *b = NULL;
    hk_status st = hk_buffer_create(ctx, end, &b);
    if (st == HK_OK)
        st = hk_buffer_upload(b, fo, v, 4ull * n);
    if (st == HK_OK && weight)
        st = hk_buffer_upload(b, wo, weight, 4ull * n);
    if (st == HK_OK)
        st = weight ? hk_rmsnorm_q8_1(ctx, NULL, (hk_view){b, fo}, (hk_view){b, wo}, (hk_view){b, no},
                                      (hk_view){b, qo}, 1, (uint32_t)n, NORM_EPS)
                    : hk_quantize_q8_1(ctx, NULL, (hk_view){b, fo}, (hk_view){b, qo}, (uint32_t)n);
    if (st == HK_OK)
        st = hk_buffer_download(b, qo, v, n / 32 * 36);
    if (st == HK_OK && weight)
        st = hk_buffer_download(b, no, yn, 4ull * n);
    hk_buffer_destroy(b);
    return st;
}

/* glu: 0 hk_matvec_int8_add, 1 hk_matvec_int8_glu, 2 hk_matvec_int8_glu_q8_1 */
static hk_status prepare_fused(hk_case_run *run, uint64_t seed, int glu)
{
    hk_type type = run->shape.type;
    uint32_t rows = run->shape.d[0], k = run->shape.d[1], gelu = glu && run->shape.d[2];
    int raw = run->shape.variant & FUSED_RAW, in_place = !glu && (run->shape.variant & FUSED_IN_PLACE);
    hk_rng rng = {seed};
    uint64_t w_bytes = hk_ref_row_bytes((int)type, k) * rows;
    float *x = activations(&rng, k), *res = glu ? NULL : hk_case_alloc((size_t)rows * sizeof(float));
    uint8_t *w = hk_random_weights(&rng, (int)type, rows, k, raw);
    /* W_up one row into a tensor of rows + 1 (record_matvec_glu binds it there), so that its view's
     * offset differs from W_gate's in every placement: a kernel reading W_up at W_gate's offset fails */
    uint64_t row_bytes = hk_ref_row_bytes((int)type, k);
    uint8_t *up_tensor = glu ? hk_random_weights(&rng, (int)type, (uint64_t)rows + 1, k, raw) : NULL;
    const uint8_t *w_up = up_tensor ? up_tensor + row_bytes : NULL;
    hk_block_q8_1 *xq = x ? quantized(x, k) : NULL;
    free(x);
    if (!w || !xq || (glu ? !up_tensor : !res)) {
        free(res);
        free(w);
        free(up_tensor);
        free(xq);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    if (res)
        hk_rng_fill(&rng, res, rows, -2.0f, 2.0f);
    hk_status st = HK_OK;
    if (run->ref_mode != HK_REF_NONE) {
        /* the sums of W (W_gate) and of W_up, then the epilogue's reference */
        float *sum = hk_case_alloc(2 * (size_t)rows * sizeof(float)), *sum_up = sum ? sum + rows : NULL;
        fused_state *fs = hk_case_alloc(sizeof *fs + (size_t)rows * sizeof(float));
        run->state = fs;
        run->ref_count = rows;
        run->ref = hk_case_alloc(rows * sizeof(float));
        if (!sum || !fs || !run->ref) {
            st = HK_ERROR_OUT_OF_MEMORY;
        } else {
            hk_ref_matvec_q8_1((int)type, w, xq, sum, rows, k);
            if (glu) {
                hk_ref_matvec_q8_1((int)type, w_up, xq, sum_up, rows, k);
                hk_ref_glu(sum, sum_up, run->ref, 1, rows, rows, (int)gelu);
                fs->scale = max_abs(sum, rows) * max_abs(sum_up, rows);
            } else {
                hk_ref_add(res, sum, run->ref, rows, 1.0f);
                fs->scale = fmax(max_abs(sum, rows), max_abs(res, rows));
            }
            fs->out = 3;
            fs->q8 = glu == 2;
            st = unfused(run->ctx, type, w, w_up, xq, res, rows, k, gelu ? HK_GLU_GELU_TANH : HK_GLU_SILU, fs->unfused);
            if (st == HK_OK && fs->q8)
                st = quantize_on_device(run->ctx, fs->unfused, NULL, NULL, rows);
        }
        free(sum);
    }
    hk_case_tensor_add(run, glu ? "w_gate" : "w", HK_CASE_IN, w_bytes, wide_align(type), 1, w);
    if (glu)
        hk_case_tensor_add(run, "w_up", HK_CASE_IN, w_bytes + row_bytes, wide_align(type), 1, up_tensor);
    hk_case_tensor_add(run, "xq", HK_CASE_IN, (uint64_t)k / 32 * 36, 4, 0, xq);
    if (glu) {
        hk_case_tensor_add(run, glu == 2 ? "yq" : "y", HK_CASE_OUT, glu == 2 ? (uint64_t)rows / 32 * 36 : rows * 4ull, 4,
                           0, NULL);
    } else {
        int ri = hk_case_tensor_add(run, "residual", in_place ? HK_CASE_INOUT : HK_CASE_IN, (uint64_t)rows * 4, 4, 0,
                                    res);
        if (in_place)
            hk_case_tensor_alias(run, "y", ri);
        else
            hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)rows * 4, 4, 0, NULL);
    }
    /* the weights, x, and per row the residual (add) and the output */
    run->bytes = (glu ? 2.0 : 1.0) * (double)w_bytes + 36.0 * k / 32 + (glu == 2 ? 1.125 : glu ? 4.0 : 8.0) * rows;
    snprintf(run->label, sizeof run->label, "%s %ux%u%s%s%s%s", hk_type_name(type), rows, k,
             glu ? (gelu ? " gelu" : " silu") : "", glu == 2 ? " q8_1" : "", in_place ? " y=residual" : "",
             raw ? " raw" : "");
    return st;
}

static hk_status prepare_matvec_add(hk_case_run *run, uint64_t seed) { return prepare_fused(run, seed, 0); }
static hk_status prepare_matvec_glu(hk_case_run *run, uint64_t seed) { return prepare_fused(run, seed, 1); }
static hk_status prepare_matvec_glu_q8(hk_case_run *run, uint64_t seed) { return prepare_fused(run, seed, 2); }

static hk_status record_matvec_add(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    return hk_matvec_int8_add(run->ctx, s, run->shape.type, v[0], v[1], v[2], v[3], run->shape.d[0], run->shape.d[1]);
}

static hk_status record_glu_any(const hk_case_run *run, hk_stream *s, const hk_view *v, int q8)
{
    hk_glu_mode mode = run->shape.d[2] ? HK_GLU_GELU_TANH : HK_GLU_SILU;
    hk_view up = {v[1].buffer, v[1].offset + hk_ref_row_bytes((int)run->shape.type, run->shape.d[1])};
    return (q8 ? hk_matvec_int8_glu_q8_1 : hk_matvec_int8_glu)(run->ctx, s, run->shape.type, v[0], up, v[2], v[3],
                                                               run->shape.d[0], run->shape.d[1], mode);
}

static hk_status record_matvec_glu(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    return record_glu_any(run, s, v, 0);
}

static hk_status record_matvec_glu_q8(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    return record_glu_any(run, s, v, 1);
}

/* The unfused calls' bits, every output; then the composed reference, within the int8 matvec's
 * gate of the operands' scale (fused_state). */
static double compare_fused(const hk_case_run *run, char *detail, size_t size)
{
    const fused_state *fs = run->state;
    const float *got = run->t[fs->out].got, *want = fs->unfused;
    size_t differ = 0, first = 0;
    double err = 0.0;
    for (size_t i = 0; i < run->ref_count; i++) {
        if (memcmp(&got[i], &want[i], 4) && !differ++)
            first = i;
        err = isfinite(got[i]) ? fmax(err, fabs((double)got[i] - run->ref[i])) : INFINITY;
    }
    double rel = err / (fs->scale > 1e-30 ? fs->scale : 1e-30);
    if (differ)
        snprintf(detail, size, "%zu of %zu outputs differ from the unfused calls' bits, the first [%zu] %a (want %a); "
                 "%.3e of the operands' scale", differ, run->ref_count, first, (double)got[first],
                 (double)want[first], rel);
    else
        snprintf(detail, size, "the unfused calls' bits, %.3e of the operands' scale", rel);
    return differ ? INFINITY : rel;
}

/* Q8_1 outputs: the blocks of the unfused calls and hk_quantize_q8_1, byte for byte; then each
 * dequantized value against the composed reference, less its block's own quantization error (half
 * a step d, and d's f16 rounding: at most 2^-11 d times |q| <= 127), within the int8 gate of the
 * operands' scale (fused_state). */
static double compare_fused_q8(const hk_case_run *run, char *detail, size_t size)
{
    const fused_state *fs = run->state;
    const uint8_t *got = run->t[fs->out].got, *want = (const uint8_t *)fs->unfused;
    size_t blocks = run->ref_count / 32, differ = 0, first = 0;
    double err = 0.0;
    for (size_t b = 0; b < blocks; b++) {
        if (memcmp(got + 36 * b, want + 36 * b, 36) && !differ++)
            first = b;
        hk_block_q8_1 blk;
        memcpy(&blk, got + 36 * b, sizeof blk);
        double d = hk_f16_to_f32(blk.d), allow = fabs(d) * (0.5 + 127.0 / 2048);
        for (int i = 0; i < 32; i++) {
            double v = d * blk.qs[i];
            err = isfinite(v) ? fmax(err, fabs(v - run->ref[32 * b + i]) - allow) : INFINITY;
        }
    }
    double rel = err / (fs->scale > 1e-30 ? fs->scale : 1e-30);
    if (differ)
        snprintf(detail, size, "%zu of %zu blocks differ from the unfused calls' bytes, the first %zu; %.3e of the "
                 "operands' scale past the blocks' rounding", differ, blocks, first, rel);
    else
        snprintf(detail, size, "the unfused calls' bytes, %.3e of the operands' scale past the blocks' rounding", rel);
    return differ ? INFINITY : rel;
}

static int tune_fused(const hk_case_run *run)
{
    (void)run;
    return HK_TUNE_MATVEC_INT8;
}

/* {type, {rows, k}, variant} of hk_matvec_int8_add: tails of rows (1, 5, 33: in a row group, and
 * past the last of 2 or 4 rows) and of k (1 to 3 super-blocks), in place, raw blocks; 4 rows per
 * subgroup (Q6_K from 16384 rows) and more row groups than workgroups; Qwen3's o-projection
 * (2048 x 4096) */
#define IP FUSED_IN_PLACE
#define RAW FUSED_RAW
static const hk_case_shape add_tests[] = {
    {Q4, {1, 256}, 0, 0},      {Q5, {1, 512}, IP, 0},     {Q6, {1, 768}, RAW, 0},    {Q8, {1, 256}, IP | RAW, 0},
    {Q4, {5, 512}, IP, 0},     {Q5, {5, 768}, RAW, 0},    {Q6, {5, 256}, IP, 0},     {Q8, {5, 768}, 0, 0},
    {Q4, {33, 768}, RAW, 0},   {Q5, {33, 256}, 0, 0},     {Q6, {33, 512}, 0, 0},     {Q8, {33, 512}, RAW, 0},
    {Q6, {16385, 256}, IP, 0}, {Q4, {40001, 256}, 0, 0},  {Q8, {40001, 32}, IP, 0},
    {Q4, {2048, 4096}, IP, 0}, {Q5, {2048, 4096}, 0, 0},  {Q6, {2048, 4096}, IP, 0}, {Q8, {2048, 4096}, RAW, 0},
};
/* {type, {rows, k, gelu}, variant} of hk_matvec_int8_glu: the same tails in both modes; 2 slots of
 * 1 row (below 4096 rows), of 2 (from 4096), 4 slots (Q6_K from 16384 rows: 2 rows of each
 * matrix); Qwen3's gate and up (6144 x 2048) */
static const hk_case_shape glu_tests[] = {
    {Q4, {1, 256, 0}, 0, 0},      {Q5, {1, 512, 1}, 0, 0},      {Q6, {1, 768, 0}, RAW, 0},  {Q8, {1, 256, 1}, RAW, 0},
    {Q4, {5, 512, 1}, 0, 0},      {Q5, {5, 768, 0}, RAW, 0},    {Q6, {5, 256, 1}, 0, 0},    {Q8, {5, 768, 0}, 0, 0},
    {Q4, {33, 768, 0}, RAW, 0},   {Q5, {33, 256, 1}, 0, 0},     {Q6, {33, 512, 1}, 0, 0},   {Q8, {33, 512, 0}, RAW, 0},
    {Q6, {16385, 256, 0}, 0, 0},  {Q4, {4097, 256, 1}, 0, 0},   {Q8, {40001, 32, 1}, 0, 0},
    {Q4, {6144, 2048, 0}, 0, 0},  {Q5, {6144, 2048, 1}, 0, 0},  {Q6, {6144, 2048, 0}, 0, 0}, {Q8, {6144, 2048, 0}, RAW, 0},
};
#undef IP
#undef RAW
static const hk_case_shape add_quick[] = {{Q4, {2048, 4096}, FUSED_IN_PLACE, 0}, {Q8, {2048, 4096}, FUSED_IN_PLACE, 0}};
static const hk_case_shape glu_quick[] = {{Q4, {6144, 2048, 0}, 0, 0}, {Q8, {6144, 2048, 0}, 0, 0}};
/* hk-check/hk-bench on GPUs: Llama-3-8B's o-projection (4096 x 4096) and down projection (4096 x
 * 14336) into the residual, its gate and up (14336 x 4096); Qwen3's (2048 x 4096, 2048 x 6144; 6144
 * x 2048) */
#define FUSED_ADD_FULL(t)                                                                                              \
    {t, {4096, 4096}, FUSED_IN_PLACE, 0}, {t, {4096, 14336}, FUSED_IN_PLACE, 0}, {t, {2048, 4096}, FUSED_IN_PLACE, 0}, \
        {t, {2048, 6144}, FUSED_IN_PLACE, 0}
#define FUSED_GLU_FULL(t) {t, {14336, 4096, 0}, 0, 0}, {t, {6144, 2048, 0}, 0, 0}, {t, {14336, 4096, 1}, 0, 0}
static const hk_case_shape add_full[] = {FUSED_ADD_FULL(Q4), FUSED_ADD_FULL(Q5), FUSED_ADD_FULL(Q6),
                                         FUSED_ADD_FULL(Q8)};
static const hk_case_shape glu_full[] = {FUSED_GLU_FULL(Q4), FUSED_GLU_FULL(Q5), FUSED_GLU_FULL(Q6),
                                         FUSED_GLU_FULL(Q8)};

const hk_case hk_case_matvec_int8_add = {
    .name = "matvec_int8_add",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_matvec_add,
    .record = record_matvec_add,
    .compare = compare_fused,
    .tune_family = tune_fused,
    CASE_SHAPES(add_tests, add_quick, add_full),
};

/* ---- hk_matvec_int8_add_norm: d = {rows, k}; variant bits FUSED_RAW, FUSED_IN_PLACE, NORM_YN (the
 * f32 normalised values too). Held to the bits of the unfused calls (hk_matvec_int8 and hk_add,
 * which hk_matvec_int8_add's case holds to its bits, then hk_rmsnorm_q8_1 of the sum), run on the
 * device at prepare (y, yq and yn), and to the references composed (hk_ref_matvec_q8_1,
 * hk_ref_add, hk_ref_rmsnorm; yq's values less their blocks' rounding). A checked run where y is
 * not the residual records the call twice: the second must find the counter the first left at
 * zero, and the compare checks it is zero after. ---- */
enum { NORM_YN = 4 };

typedef struct add_norm_state {
    double scale, norm_scale; /* of y's error (the add's operands) and of the normalised values */
    int y, yq, yn, ws;        /* the outputs' tensors (yn -1: none), the workspace's */
    uint64_t ws_bytes;
    float *want_y, *want_yn, *ref_yn;
    uint8_t *want_yq; /* 4 bytes a row: quantize_on_device writes the blocks over a copy of y */
} add_norm_state;

static hk_status prepare_add_norm(hk_case_run *run, uint64_t seed)
{
    hk_type type = run->shape.type;
    uint32_t rows = run->shape.d[0], k = run->shape.d[1];
    int raw = run->shape.variant & FUSED_RAW, in_place = run->shape.variant & FUSED_IN_PLACE;
    int with_yn = run->shape.variant & NORM_YN;
    hk_rng rng = {seed};
    uint64_t w_bytes = hk_ref_row_bytes((int)type, k) * rows, ws_bytes = 0;
    hk_status st = hk_matvec_int8_add_norm_workspace_bytes(run->ctx, rows, &ws_bytes);
    if (st != HK_OK)
        return st;
    float *x = activations(&rng, k), *res = hk_case_alloc((size_t)rows * sizeof(float));
    float *weight = hk_case_alloc((size_t)rows * sizeof(float));
    uint8_t *w = hk_random_weights(&rng, (int)type, rows, k, raw);
    hk_block_q8_1 *xq = x ? quantized(x, k) : NULL;
    free(x);
    if (!w || !xq || !res || !weight) {
        free(res);
        free(weight);
        free(w);
        free(xq);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    hk_rng_fill(&rng, res, rows, -2.0f, 2.0f);
    hk_rng_fill(&rng, weight, rows, 0.5f, 1.5f);
    if (run->ref_mode != HK_REF_NONE) {
        size_t n = rows;
        add_norm_state *ns = hk_case_alloc(sizeof *ns + 4 * n * sizeof(float));
        float *sum = hk_case_alloc(n * sizeof(float));
        run->state = ns;
        run->ref_count = n;
        run->ref = hk_case_alloc(n * sizeof(float));
        if (!ns || !sum || !run->ref) {
            st = HK_ERROR_OUT_OF_MEMORY;
        } else {
            ns->want_y = (float *)(ns + 1);
            ns->want_yn = ns->want_y + n;
            ns->ref_yn = ns->want_yn + n;
            ns->want_yq = (uint8_t *)(ns->ref_yn + n);
            hk_ref_matvec_q8_1((int)type, w, xq, sum, rows, k);
            hk_ref_add(res, sum, run->ref, rows, 1.0f);
            hk_ref_rmsnorm(run->ref, weight, ns->ref_yn, 1, rows, NORM_EPS);
            ns->scale = fmax(max_abs(sum, rows), max_abs(res, rows));
            ns->norm_scale = max_abs(ns->ref_yn, rows);
            /* the unfused calls: hk_matvec_int8 and hk_add (hk_matvec_int8_add's bits), then
             * hk_rmsnorm_q8_1 of the sum */
            st = unfused(run->ctx, type, w, NULL, xq, res, rows, k, HK_GLU_SILU, ns->want_y);
            if (st == HK_OK) {
                memcpy(ns->want_yq, ns->want_y, n * sizeof(float));
                st = quantize_on_device(run->ctx, (float *)ns->want_yq, weight, ns->want_yn, n);
            }
        }
        free(sum);
    }
    add_norm_state *ns = run->state;
    hk_case_tensor_add(run, "w", HK_CASE_IN, w_bytes, wide_align(type), 1, w);
    hk_case_tensor_add(run, "xq", HK_CASE_IN, (uint64_t)k / 32 * 36, 4, 0, xq);
    int ri = hk_case_tensor_add(run, "residual", in_place ? HK_CASE_INOUT : HK_CASE_IN, (uint64_t)rows * 4, 4, 0, res);
    int yi = ri;
    if (in_place)
        hk_case_tensor_alias(run, "y", ri);
    else
        yi = hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)rows * 4, 4, 0, NULL);
    hk_case_tensor_add(run, "norm", HK_CASE_IN, (uint64_t)rows * 4, 4, 0, weight);
    int qi = hk_case_tensor_add(run, "yq", HK_CASE_OUT, (uint64_t)rows / 32 * 36, 4, 0, NULL);
    int ni = with_yn ? hk_case_tensor_add(run, "yn", HK_CASE_OUT, (uint64_t)rows * 4, 4, 0, NULL) : -1;
    /* the arrival counter: zero before the first call, and left zero by each */
    uint8_t *zeros = hk_case_alloc(ws_bytes);
    if (zeros)
        memset(zeros, 0, ws_bytes);
    else if (st == HK_OK)
        st = HK_ERROR_OUT_OF_MEMORY;
    int wi = hk_case_tensor_add(run, "workspace", HK_CASE_INOUT, ws_bytes, 4, 0, zeros);
    if (ns) {
        ns->y = yi;
        ns->yq = qi;
        ns->yn = ni;
        ns->ws = wi;
        ns->ws_bytes = ws_bytes;
    }
    /* the weights, x, the residual, y, the norm's weight, the blocks (and yn) */
    run->bytes = (double)w_bytes + 36.0 * k / 32 + (with_yn ? 17.125 : 13.125) * rows;
    snprintf(run->label, sizeof run->label, "%s %ux%u%s%s%s", hk_type_name(type), rows, k, with_yn ? " yn" : "",
             in_place ? " y=residual" : "", raw ? " raw" : "");
    return st;
}

/* views: w, xq, residual, y (an alias of the residual in place), norm, yq, [yn,] workspace */
static hk_status record_add_norm(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    int in_place = run->shape.variant & FUSED_IN_PLACE, with_yn = run->shape.variant & NORM_YN;
    hk_norm_out norm = {v[4], NORM_EPS, v[5], with_yn ? v[6] : (hk_view){NULL, 0}, v[with_yn ? 7 : 6]};
    hk_status st = HK_OK;
    for (int rep = 0; rep < (op == 0 && !in_place ? 2 : 1) && st == HK_OK; rep++)
        st = hk_matvec_int8_add_norm(run->ctx, s, run->shape.type, v[0], v[1], v[2], v[3], run->shape.d[0],
                                     run->shape.d[1], &norm);
    return st;
}

/* Bits: y, yq and yn against the unfused calls'; then y against the composed reference (the
 * operands' scale), yn against hk_ref_rmsnorm (its own scale), and yq's values against it less
 * their blocks' rounding (compare_fused_q8's allowance). */
static double compare_add_norm(const hk_case_run *run, char *detail, size_t size)
{
    const add_norm_state *ns = run->state;
    size_t n = run->ref_count, blocks = n / 32;
    const float *y = run->t[ns->y].got, *yn = ns->yn >= 0 ? run->t[ns->yn].got : NULL;
    const uint8_t *yq = run->t[ns->yq].got;
    size_t differ_y = 0, differ_yn = 0, differ_q = 0;
    double err_y = 0.0, err_n = 0.0;
    for (size_t i = 0; i < n; i++) {
        differ_y += memcmp(&y[i], &ns->want_y[i], 4) != 0;
        err_y = isfinite(y[i]) ? fmax(err_y, fabs((double)y[i] - run->ref[i])) : INFINITY;
        if (yn) {
            differ_yn += memcmp(&yn[i], &ns->want_yn[i], 4) != 0;
            err_n = isfinite(yn[i]) ? fmax(err_n, fabs((double)yn[i] - ns->ref_yn[i])) : INFINITY;
        }
    }
    for (size_t b = 0; b < blocks; b++) {
        differ_q += memcmp(yq + 36 * b, ns->want_yq + 36 * b, 36) != 0;
        hk_block_q8_1 blk;
        memcpy(&blk, yq + 36 * b, sizeof blk);
        double d = hk_f16_to_f32(blk.d), allow = fabs(d) * (0.5 + 127.0 / 2048);
        for (int i = 0; i < 32; i++) {
            double v = d * blk.qs[i];
            err_n = isfinite(v) ? fmax(err_n, fabs(v - ns->ref_yn[32 * b + i]) - allow) : INFINITY;
        }
    }
    const uint8_t *ws = run->t[ns->ws].got;
    size_t ws_nonzero = 0;
    for (uint64_t i = 0; i < ns->ws_bytes; i++)
        ws_nonzero += ws[i] != 0;
    double rel_y = err_y / (ns->scale > 1e-30 ? ns->scale : 1e-30);
    double rel_n = err_n / (ns->norm_scale > 1e-30 ? ns->norm_scale : 1e-30);
    size_t bad = differ_y + differ_q + differ_yn + ws_nonzero;
    snprintf(detail, size, "%s: %zu of %zu y, %zu of %zu yq blocks, %zu yn differ from the unfused calls, %zu workspace "
             "bytes not zero after; %.3e of the operands' scale, %.3e of the normalised values'", bad ? "FAIL" : "bits",
             differ_y, n, differ_q, blocks, differ_yn, ws_nonzero, rel_y, rel_n);
    return bad ? INFINITY : fmax(rel_y, rel_n);
}

/* {type, {rows, k}, variant} of hk_matvec_int8_add_norm: one block of rows and several groups of 32
 * blocks (the norm's order), tails of k, in place, raw blocks, with and without yn; Qwen3's
 * o-projection (2048 x 4096) and more rows than one pass of workgroups */
#define IP FUSED_IN_PLACE
#define RAW FUSED_RAW
#define YN NORM_YN
static const hk_case_shape add_norm_tests[] = {
    {Q4, {32, 256}, 0, 0},          {Q5, {32, 512}, IP | YN, 0},   {Q6, {64, 768}, RAW | YN, 0}, {Q8, {96, 256}, IP, 0},
    {Q4, {1056, 512}, YN, 0},       {Q5, {1056, 768}, RAW, 0},     {Q6, {2080, 256}, IP, 0},     {Q8, {1056, 32}, RAW | YN, 0},
    {Q4, {2048, 4096}, IP | YN, 0}, {Q6, {2048, 4096}, IP, 0},     {Q8, {4096, 512}, YN, 0},
    {Q4, {32768, 256}, 0, 0},
};
#undef IP
#undef RAW
#undef YN
static const hk_case_shape add_norm_quick[] = {{Q4, {2048, 4096}, FUSED_IN_PLACE, 0}};
#define ADD_NORM_FULL(t)                                                                                               \
    {t, {4096, 4096}, FUSED_IN_PLACE, 0}, {t, {4096, 14336}, FUSED_IN_PLACE, 0},                                        \
        {t, {2048, 4096}, FUSED_IN_PLACE | NORM_YN, 0}
static const hk_case_shape add_norm_full[] = {ADD_NORM_FULL(Q4), ADD_NORM_FULL(Q6), ADD_NORM_FULL(Q8)};

const hk_case hk_case_matvec_int8_add_norm = {
    .name = "matvec_int8_add_norm",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_add_norm,
    .record = record_add_norm,
    .compare = compare_add_norm,
    .tune_family = tune_fused,
    CASE_SHAPES(add_norm_tests, add_norm_quick, add_norm_full),
};

/* {type, {rows, k, gelu}, variant} of hk_matvec_int8_glu_q8_1: one block and several, 2 slots of 1 row
 * and of 2 (from 4096), 4 (Q6_K from 16384), more blocks than workgroups (8193 blocks); Qwen3's gate
 * and up */
static const hk_case_shape glu_q8_tests[] = {
    {Q4, {32, 256, 0}, 0, 0},     {Q5, {64, 512, 1}, FUSED_RAW, 0}, {Q6, {96, 768, 0}, 0, 0}, {Q8, {160, 256, 1}, 0, 0},
    {Q4, {4128, 256, 1}, 0, 0},   {Q6, {16416, 256, 0}, 0, 0}, {Q8, {40000, 32, 1}, 0, 0}, {Q8, {262176, 32, 0}, 0, 0},
    {Q4, {6144, 2048, 0}, 0, 0},  {Q5, {6144, 2048, 1}, 0, 0}, {Q6, {6144, 2048, 0}, 0, 0},
    {Q8, {6144, 2048, 0}, FUSED_RAW, 0},
};
static const hk_case_shape glu_q8_quick[] = {{Q4, {6144, 2048, 0}, 0, 0}, {Q8, {6144, 2048, 0}, 0, 0}};
static const hk_case_shape glu_q8_full[] = {FUSED_GLU_FULL(Q4), FUSED_GLU_FULL(Q5), FUSED_GLU_FULL(Q6),
                                            FUSED_GLU_FULL(Q8)};

const hk_case hk_case_matvec_int8_glu_q8_1 = {
    .name = "matvec_int8_glu_q8_1",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_matvec_glu_q8,
    .record = record_matvec_glu_q8,
    .compare = compare_fused_q8,
    .tune_family = tune_fused,
    CASE_SHAPES(glu_q8_tests, glu_q8_quick, glu_q8_full),
};

const hk_case hk_case_matvec_int8_glu = {
    .name = "matvec_int8_glu",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_matvec_glu,
    .record = record_matvec_glu,
    .compare = compare_fused,
    .tune_family = tune_fused,
    CASE_SHAPES(glu_tests, glu_quick, glu_full),
};

/* ---- several matrices on one x (hk_matvec_int8_multi): d = {rows[0], rows[1], rows[2], k}, n the
 * leading rows that are not 0; variant FUSED_RAW. Held to the bits of n hk_matvec_int8 calls into
 * y at the concatenation's offsets, run on the device at prepare, and to hk_ref_matvec_q8_1 of each
 * matrix. ---- */

/* the number of matrices of a multi row */
static uint32_t multi_n(const hk_case_shape *shape) { return !shape->d[1] ? 1 : !shape->d[2] ? 2 : 3; }

/* "type rows[0]+rows[1]+...xk" and tail: the label of a row of n matrices */
static void multi_label(hk_case_run *run, uint32_t n, uint32_t k, const char *tail)
{
    const uint32_t *rows = run->shape.d;
    int len = snprintf(run->label, sizeof run->label, "%s %u", hk_type_name(run->shape.type), rows[0]);
    for (uint32_t i = 1; i < n && len > 0 && (size_t)len < sizeof run->label; i++)
        len += snprintf(run->label + len, sizeof run->label - (size_t)len, "+%u", rows[i]);
    if (len > 0 && (size_t)len < sizeof run->label)
        snprintf(run->label + len, sizeof run->label - (size_t)len, "x%u%s", k, tail);
}

/* The n hk_matvec_int8 calls hk_matvec_int8_multi replaces, on the device, into out[sum of rows]. */
static hk_status unfused_multi(hk_context *ctx, hk_type type, uint8_t *const *w, const uint32_t *rows, uint32_t n,
                               const hk_block_q8_1 *xq, uint32_t k, uint32_t total, float *out)
{
    uint64_t row_bytes = hk_ref_row_bytes((int)type, k), x_bytes = (uint64_t)k / 32 * 36, end = 0, wo[3];
    for (uint32_t i = 0; i < n; i++)
        wo[i] = section(&end, row_bytes * rows[i]);
    uint64_t xo = section(&end, x_bytes), yo = section(&end, 4ull * total);
    hk_buffer *b = NULL;
    hk_status st = hk_buffer_create(ctx, end, &b);
    for (uint32_t i = 0; i < n && st == HK_OK; i++)
        st = hk_buffer_upload(b, wo[i], w[i], row_bytes * rows[i]);
    if (st == HK_OK)
        st = hk_buffer_upload(b, xo, xq, x_bytes);
    for (uint32_t i = 0, at = 0; i < n && st == HK_OK; at += rows[i++])
        st = hk_matvec_int8(ctx, NULL, type, (hk_view){b, wo[i]}, (hk_view){b, xo}, (hk_view){b, yo + 4ull * at},
                            rows[i], k);
    if (st == HK_OK)
        st = hk_buffer_download(b, yo, out, 4ull * total);
    hk_buffer_destroy(b);
    return st;
}

static hk_status prepare_matvec_multi(hk_case_run *run, uint64_t seed)
{
    static const char *const names[] = {"w0", "w1", "w2"};
    hk_type type = run->shape.type;
    uint32_t n = multi_n(&run->shape), k = run->shape.d[3], total = 0;
    const uint32_t *rows = run->shape.d;
    int raw = run->shape.variant & FUSED_RAW;
    hk_rng rng = {seed};
    float *x = activations(&rng, k);
    uint8_t *w[3] = {NULL, NULL, NULL};
    int ok = x != NULL;
    for (uint32_t i = 0; i < n; i++) {
        w[i] = hk_random_weights(&rng, (int)type, rows[i], k, raw);
        ok = ok && w[i];
        total += rows[i];
    }
    hk_block_q8_1 *xq = x ? quantized(x, k) : NULL;
    free(x);
    if (!ok || !xq) {
        for (uint32_t i = 0; i < n; i++)
            free(w[i]);
        free(xq);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    hk_status st = HK_OK;
    if (run->ref_mode != HK_REF_NONE) {
        fused_state *fs = hk_case_alloc(sizeof *fs + (size_t)total * sizeof(float));
        run->state = fs;
        run->ref_count = total;
        run->ref = hk_case_alloc((size_t)total * sizeof(float));
        if (!fs || !run->ref) {
            st = HK_ERROR_OUT_OF_MEMORY;
        } else {
            for (uint32_t i = 0, at = 0; i < n; at += rows[i++])
                hk_ref_matvec_q8_1((int)type, w[i], xq, run->ref + at, rows[i], k);
            fs->scale = max_abs(run->ref, total);
            fs->out = (int)n + 1;
            st = unfused_multi(run->ctx, type, w, rows, n, xq, k, total, fs->unfused);
        }
    }
    uint64_t row_bytes = hk_ref_row_bytes((int)type, k);
    for (uint32_t i = 0; i < n; i++)
        hk_case_tensor_add(run, names[i], HK_CASE_IN, row_bytes * rows[i], wide_align(type), 1, w[i]);
    hk_case_tensor_add(run, "xq", HK_CASE_IN, (uint64_t)k / 32 * 36, 4, 0, xq);
    hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)total * 4, 4, 0, NULL);
    run->bytes = (double)row_bytes * total + 36.0 * k / 32 + 4.0 * total;
    multi_label(run, n, k, raw ? " raw" : "");
    return st;
}

static hk_status record_matvec_multi(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    uint32_t n = multi_n(&run->shape);
    return hk_matvec_int8_multi(run->ctx, s, run->shape.type, n, v, run->shape.d, v[n], v[n + 1], run->shape.d[3]);
}

/* {type, {rows[0], rows[1], rows[2], k}, variant} of hk_matvec_int8_multi: tails (1+1, 5+33+7 and
 * 33 alone at k 256 and 512: rows of a row group in two matrices without the padding), matrices
 * padded past 4096 and 16384 rows (2 and, Q6_K, 4 rows per subgroup), raw blocks; Qwen3-30B-A3B's
 * q, k and v (4096+512+512 x 2048); Llama-3-8B's (4096+1024+1024 x 4096) */
#define RAW FUSED_RAW
static const hk_case_shape multi_tests[] = {
    {Q4, {1, 1, 0, 256}, 0, 0},     {Q5, {1, 1, 0, 512}, RAW, 0},   {Q6, {1, 1, 0, 256}, 0, 0},
    {Q8, {1, 1, 0, 512}, RAW, 0},   {Q4, {5, 33, 7, 512}, RAW, 0},  {Q5, {5, 33, 7, 256}, 0, 0},
    {Q6, {5, 33, 7, 512}, 0, 0},    {Q8, {5, 33, 7, 256}, 0, 0},    {Q4, {33, 0, 0, 256}, 0, 0},
    {Q5, {33, 0, 0, 512}, 0, 0},    {Q6, {33, 0, 0, 256}, RAW, 0},  {Q8, {33, 0, 0, 512}, 0, 0},
    {Q4, {4097, 33, 7, 256}, 0, 0}, {Q6, {16385, 5, 3, 256}, 0, 0}, {Q8, {4097, 5, 0, 64}, 0, 0},
    {Q4, {4096, 512, 512, 2048}, 0, 0}, {Q5, {4096, 512, 512, 2048}, 0, 0}, {Q6, {4096, 512, 512, 2048}, 0, 0},
    {Q8, {4096, 512, 512, 2048}, RAW, 0}, {Q4, {4096, 1024, 1024, 4096}, 0, 0}, {Q8, {4096, 1024, 1024, 4096}, 0, 0},
};
#undef RAW
static const hk_case_shape multi_quick[] = {{Q4, {4096, 512, 512, 2048}, 0, 0}, {Q8, {4096, 1024, 1024, 4096}, 0, 0}};
/* hk-check/hk-bench on GPUs: Llama-3-8B's and Qwen3-30B-A3B's q, k and v */
#define MULTI_FULL(t) {t, {4096, 1024, 1024, 4096}, 0, 0}, {t, {4096, 512, 512, 2048}, 0, 0}
static const hk_case_shape multi_full[] = {MULTI_FULL(Q4), MULTI_FULL(Q5), MULTI_FULL(Q6), MULTI_FULL(Q8)};

const hk_case hk_case_matvec_int8_multi = {
    .name = "matvec_int8_multi",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_matvec_multi,
    .record = record_matvec_multi,
    .compare = compare_fused,
    .tune_family = tune_fused,
    CASE_SHAPES(multi_tests, multi_quick, multi_full),
};

/* ---- the int8 matvecs on f32 x (hk_matvec_int8_f32x): d = {rows[0], rows[1], rows[2], k}, n the
 * leading rows that are not 0 (several: plain only); variant bits F32X_* (the norm, the epilogue,
 * in place, raw blocks). Held to the bits of the two calls it replaces, run on the device at
 * prepare (hk_rmsnorm_q8_1 or hk_quantize_q8_1 into xq, then hk_matvec_int8_multi,
 * hk_matvec_int8_add or hk_matvec_int8_glu on xq), and to the references composed: hk_ref_rmsnorm,
 * the reference quantizer, hk_ref_matvec_q8_1 and the epilogue's (a block the kernel rounds the
 * other way near a half step moves an output by far less than the gate). ---- */
enum { F32X_NORM = 1, F32X_ADD = 2, F32X_GLU = 4, F32X_GELU = 8, F32X_IN_PLACE = 16, F32X_RAW = 32 };

static hk_matvec_epilogue f32x_epilogue(int variant)
{
    return variant & F32X_ADD   ? HK_MATVEC_ADD
           : variant & F32X_GLU ? (variant & F32X_GELU ? HK_MATVEC_GLU_GELU_TANH : HK_MATVEC_GLU_SILU)
                                : HK_MATVEC_PLAIN;
}

/* The calls hk_matvec_int8_f32x replaces, on the device, into out[total]: w holds the n matrices
 * (the GLU: W_gate, W_up), operand the residual where one is added. */
static hk_status unfused_f32x(hk_context *ctx, hk_type type, uint8_t *const *w, const uint32_t *rows, uint32_t n,
                              const float *x, const float *norm, const float *residual, uint32_t k, int variant,
                              uint32_t total, float *out)
{
    int glu = variant & F32X_GLU, add = variant & F32X_ADD;
    uint32_t mats = glu ? 2 : n;
    uint64_t row_bytes = hk_ref_row_bytes((int)type, k), end = 0, wo[3];
    for (uint32_t i = 0; i < mats; i++)
        wo[i] = section(&end, row_bytes * rows[glu ? 0 : i]);
    uint64_t xo = section(&end, 4ull * k), no = section(&end, 4ull * k), qo = section(&end, (uint64_t)k / 32 * 36);
    uint64_t ro = section(&end, 4ull * total), yo = section(&end, 4ull * total), to = section(&end, 4ull * k);
    hk_buffer *b = NULL;
    hk_status st = hk_buffer_create(ctx, end, &b);
    for (uint32_t i = 0; i < mats && st == HK_OK; i++)
        st = hk_buffer_upload(b, wo[i], w[i], row_bytes * rows[glu ? 0 : i]);
    if (st == HK_OK)
        st = hk_buffer_upload(b, xo, x, 4ull * k);
    if (st == HK_OK && norm)
        st = hk_buffer_upload(b, no, norm, 4ull * k);
    if (st == HK_OK && add)
        st = hk_buffer_upload(b, ro, residual, 4ull * total);
    hk_view vx = {b, xo}, vq = {b, qo}, vy = {b, yo};
    if (st == HK_OK)
        st = norm ? hk_rmsnorm_q8_1(ctx, NULL, vx, (hk_view){b, no}, (hk_view){b, to}, vq, 1, k, 1e-6f)
                  : hk_quantize_q8_1(ctx, NULL, vx, vq, k);
    if (st == HK_OK) {
        hk_view vw[3] = {{b, wo[0]}, {b, wo[1]}, {b, wo[2]}};
        if (add)
            st = hk_matvec_int8_add(ctx, NULL, type, vw[0], vq, (hk_view){b, ro}, vy, rows[0], k);
        else if (glu)
            st = hk_matvec_int8_glu(ctx, NULL, type, vw[0], vw[1], vq, vy, rows[0], k,
                                    variant & F32X_GELU ? HK_GLU_GELU_TANH : HK_GLU_SILU);
        else
            st = hk_matvec_int8_multi(ctx, NULL, type, n, vw, rows, vq, vy, k);
    }
    if (st == HK_OK)
        st = hk_buffer_download(b, yo, out, 4ull * total);
    hk_buffer_destroy(b);
    return st;
}

static hk_status prepare_matvec_f32x(hk_case_run *run, uint64_t seed)
{
    static const char *const names[] = {"w0", "w1", "w2"};
    hk_type type = run->shape.type;
    int variant = run->shape.variant, glu = variant & F32X_GLU, add = variant & F32X_ADD;
    int in_place = add && (variant & F32X_IN_PLACE), has_norm = variant & F32X_NORM, raw = variant & F32X_RAW;
    uint32_t n = multi_n(&run->shape), k = run->shape.d[3], total = 0, mats = glu ? 2 : n;
    const uint32_t *rows = run->shape.d;
    uint64_t row_bytes = hk_ref_row_bytes((int)type, k);
    hk_rng rng = {seed};
    float *x = hk_case_alloc(4ull * k), *norm = has_norm ? hk_case_alloc(4ull * k) : NULL, *res = NULL;
    uint8_t *w[3] = {NULL, NULL, NULL};
    int ok = x && (!has_norm || norm);
    for (uint32_t i = 0; i < n; i++)
        total += rows[i];
    /* the GLU's W_up one row into a tensor of rows + 1 (record_matvec_f32x binds it there), as
     * hk_matvec_int8_glu's rows do */
    for (uint32_t i = 0; i < mats; i++) {
        w[i] = hk_random_weights(&rng, (int)type, (uint64_t)rows[glu ? 0 : i] + (glu && i == 1), k, raw);
        ok = ok && w[i];
    }
    if (add && ok)
        ok = (res = hk_case_alloc(4ull * total)) != NULL;
    if (!ok) {
        for (uint32_t i = 0; i < mats; i++)
            free(w[i]);
        free(x);
        free(norm);
        free(res);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    hk_rng_fill(&rng, x, k, -3.0f, 3.0f);
    if (norm)
        hk_rng_fill(&rng, norm, k, 0.5f, 1.5f);
    if (res)
        hk_rng_fill(&rng, res, total, -2.0f, 2.0f);
    const uint8_t *mat[3] = {w[0], glu ? w[1] + row_bytes : w[1], w[2]};
    hk_status st = HK_OK;
    if (run->ref_mode != HK_REF_NONE) {
        fused_state *fs = hk_case_alloc(sizeof *fs + (size_t)total * sizeof(float));
        float *xn = hk_case_alloc(4ull * k), *sum = hk_case_alloc(8ull * total);
        hk_block_q8_1 *xq = NULL;
        run->state = fs;
        run->ref_count = total;
        run->ref = hk_case_alloc((size_t)total * sizeof(float));
        if (fs && xn && sum && run->ref) {
            if (norm)
                hk_ref_rmsnorm(x, norm, xn, 1, k, 1e-6f);
            else
                memcpy(xn, x, 4ull * k);
            xq = quantized(xn, k);
        }
        if (!xq) {
            st = HK_ERROR_OUT_OF_MEMORY;
        } else {
            for (uint32_t i = 0, at = 0; i < mats; at += rows[glu ? 0 : i], i++)
                hk_ref_matvec_q8_1((int)type, mat[i], xq, sum + at, rows[glu ? 0 : i], k);
            if (glu) {
                hk_ref_glu(sum, sum + total, run->ref, 1, total, total, (variant & F32X_GELU) != 0);
                fs->scale = max_abs(sum, total) * max_abs(sum + total, total);
            } else if (add) {
                hk_ref_add(res, sum, run->ref, total, 1.0f);
                fs->scale = fmax(max_abs(sum, total), max_abs(res, total));
            } else {
                memcpy(run->ref, sum, 4ull * total);
                fs->scale = max_abs(sum, total);
            }
            /* the unfused calls read W_up at its row */
            uint8_t *unfused_w[3] = {w[0], glu ? w[1] + row_bytes : w[1], w[2]};
            st = unfused_f32x(run->ctx, type, unfused_w, rows, n, x, norm, res, k, variant, total, fs->unfused);
        }
        free(xn);
        free(sum);
        free(xq);
    }
    for (uint32_t i = 0; i < mats; i++)
        hk_case_tensor_add(run, glu ? (i ? "w_up" : "w_gate") : names[i], HK_CASE_IN,
                           row_bytes * (rows[glu ? 0 : i] + (glu && i == 1)), wide_align(type), 1, w[i]);
    hk_case_tensor_add(run, "x", HK_CASE_IN, 4ull * k, 4, 0, x);
    if (norm)
        hk_case_tensor_add(run, "norm", HK_CASE_IN, 4ull * k, 4, 0, norm);
    int ri = -1;
    if (add)
        ri = hk_case_tensor_add(run, "residual", in_place ? HK_CASE_INOUT : HK_CASE_IN, 4ull * total, 4, 0, res);
    if (in_place)
        hk_case_tensor_alias(run, "y", ri);
    else
        hk_case_tensor_add(run, "y", HK_CASE_OUT, 4ull * total, 4, 0, NULL);
    if (run->state)
        ((fused_state *)run->state)->out = (int)mats + 1 + (norm != NULL) + (add != 0); /* y, or its alias */
    run->bytes = (double)row_bytes * total * (glu ? 2 : 1) + 4.0 * k * (norm ? 2 : 1) + (add ? 8.0 : 4.0) * total;
    static const char *const epis[] = {"", " add", " silu", " gelu"};
    char tail[64];
    snprintf(tail, sizeof tail, "%s%s%s%s", norm ? " norm" : "", epis[f32x_epilogue(variant)],
             in_place ? " y=residual" : "", raw ? " raw" : "");
    multi_label(run, n, k, tail);
    return st;
}

static hk_status record_matvec_f32x(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    int variant = run->shape.variant, glu = variant & F32X_GLU, add = variant & F32X_ADD;
    uint32_t n = multi_n(&run->shape), mats = glu ? 2 : n, i = 0;
    hk_matvec_f32x_desc d = {.wtype = run->shape.type, .n = n, .k = run->shape.d[3], .eps = 1e-6f,
                             .epilogue = f32x_epilogue(variant)};
    for (; i < n; i++) {
        d.w[i] = v[i];
        d.rows[i] = run->shape.d[i];
    }
    if (glu)
        d.operand = (hk_view){v[1].buffer, v[1].offset + hk_ref_row_bytes((int)run->shape.type, d.k)};
    i = mats;
    d.x = v[i++];
    if (variant & F32X_NORM)
        d.norm = v[i++];
    if (add)
        d.operand = v[i++];
    d.y = v[i]; /* in place: the residual's alias */
    return hk_matvec_int8_f32x(run->ctx, s, &d);
}

/* {type, {rows[0], rows[1], rows[2], k}, variant} of hk_matvec_int8_f32x: every epilogue with and
 * without the norm, tails of rows and k (1 and 33 rows, k of 1 to 3 super-blocks, Q8_0 at k 32 and
 * 96), raw blocks, in place; Llama-3-8B's q, k and v, o and down into the residual, gate and up;
 * Qwen3-30B-A3B's q, k and v (k 2048) */
#define N F32X_NORM
#define ADD F32X_ADD
#define GLU F32X_GLU
#define IP F32X_IN_PLACE
#define RAW F32X_RAW
static const hk_case_shape f32x_tests[] = {
    {Q4, {1, 0, 0, 256}, N, 0},          {Q5, {33, 0, 0, 512}, 0, 0},           {Q6, {5, 33, 7, 768}, N | RAW, 0},
    {Q8, {1, 1, 0, 32}, N, 0},           {Q8, {33, 5, 0, 96}, RAW, 0},          {Q4, {5, 0, 0, 512}, ADD, 0},
    {Q5, {33, 0, 0, 256}, N | ADD | IP, 0}, {Q6, {1, 0, 0, 512}, ADD | IP | RAW, 0}, {Q8, {5, 0, 0, 64}, N | ADD, 0},
    {Q4, {33, 0, 0, 768}, N | GLU, 0},   {Q5, {1, 0, 0, 256}, GLU, 0},     {Q6, {5, 0, 0, 512}, N | GLU | F32X_GELU, 0},
    {Q8, {33, 0, 0, 32}, GLU | RAW, 0},  {Q4, {4097, 33, 7, 256}, N, 0},
    {Q4, {4096, 1024, 0, 4096}, N, 0},   {Q6, {1024, 0, 0, 4096}, N, 0},        {Q4, {4096, 0, 0, 4096}, ADD | IP, 0},
    {Q6, {4096, 0, 0, 14336}, ADD | IP, 0}, {Q4, {14336, 0, 0, 4096}, N | GLU, 0}, {Q8, {4096, 512, 512, 2048}, N, 0},
    {Q8, {64, 0, 0, 8192}, N, 0}, /* a norm over more than one of rmsnorm.comp's staged chunks */
};
#undef N
#undef ADD
#undef GLU
#undef IP
#undef RAW
static const hk_case_shape f32x_quick[] = {{Q4, {4096, 512, 512, 2048}, F32X_NORM, 0},
                                           {Q4, {2048, 0, 0, 4096}, F32X_ADD | F32X_IN_PLACE, 0}};
/* hk-check/hk-bench on GPUs: a Llama-3-8B layer in the Q4_K_M layout (q and k, v, o, gate and up,
 * down) */
static const hk_case_shape f32x_full[] = {
    {Q4, {4096, 1024, 0, 4096}, F32X_NORM, 0},          {Q6, {1024, 0, 0, 4096}, F32X_NORM, 0},
    {Q4, {4096, 0, 0, 4096}, F32X_ADD | F32X_IN_PLACE, 0}, {Q4, {14336, 0, 0, 4096}, F32X_NORM | F32X_GLU, 0},
    {Q6, {4096, 0, 0, 14336}, F32X_ADD | F32X_IN_PLACE, 0}};

const hk_case hk_case_matvec_int8_f32x = {
    .name = "matvec_int8_f32x",
    .gate = HK_GATE_INT8,
    .prepare = prepare_matvec_f32x,
    .record = record_matvec_f32x,
    .compare = compare_fused,
    .tune_family = tune_fused,
    CASE_SHAPES(f32x_tests, f32x_quick, f32x_full),
};

/* ---- few-token int8 matvec: d = {rows, k, tokens}, variant 1 = raw random blocks ---- */

static hk_status prepare_tokens(hk_case_run *run, uint64_t seed)
{
    hk_type type = run->shape.type;
    uint32_t rows = run->shape.d[0], k = run->shape.d[1], tokens = run->shape.d[2];
    hk_rng rng = {seed};
    uint64_t w_bytes = hk_ref_row_bytes((int)type, k) * rows;
    float *x = activations(&rng, (size_t)tokens * k);
    uint8_t *w = hk_random_weights(&rng, (int)type, rows, k, run->shape.variant);
    hk_block_q8_1 *xq = x ? quantized(x, (size_t)tokens * k) : NULL;
    free(x);
    if (!w || !xq) {
        free(w);
        free(xq);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    hk_case_tensor_add(run, "w", HK_CASE_IN, w_bytes, wide_align(type), 1, w);
    hk_case_tensor_add(run, "xq", HK_CASE_IN, (uint64_t)tokens * k / 32 * 36, 4, 0, xq);
    hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)tokens * rows * 4, 4, 0, NULL);
    /* the weights once for every token, each token's activation and outputs */
    run->bytes = (double)w_bytes + tokens * (36.0 * k / 32 + 4.0 * rows);
    snprintf(run->label, sizeof run->label, "%s %ux%u x%u tok%s", hk_type_name(type), rows, k, tokens,
             run->shape.variant ? " raw" : "");
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = (size_t)tokens * rows;
        if (!(run->ref = hk_case_alloc(run->ref_count * sizeof(float))))
            return HK_ERROR_OUT_OF_MEMORY;
        for (uint32_t t = 0; t < tokens; t++)
            hk_ref_matvec_q8_1((int)type, w, xq + (size_t)t * (k / 32), run->ref + (size_t)t * rows, rows, k);
    }
    return HK_OK;
}

static hk_status record_tokens(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const uint32_t *d = run->shape.d;
    return hk_matvec_int8_tokens(run->ctx, s, run->shape.type, v[0], v[1], v[2], d[0], d[1], d[2]);
}

static const hk_case_shape tokens_tests[] = {
    {Q4, {7, 768, 2}, 1, 0},     {Q5, {7, 768, 2}, 1, 0},     {Q6, {131, 256, 3}, 0, 0},
    {Q8, {5, 96, 8}, 1, 0},      {Q4, {300, 2048, 16}, 0, 0}, {Q5, {300, 2048, 16}, 0, 0},
    {Q6, {2048, 2048, 5}, 1, 0}, {Q8, {40000, 32, 4}, 0, 0},
};
static const hk_case_shape tokens_quick[] = {{Q4, {2048, 2048, 8}, 1, 0}, {Q5, {2048, 2048, 8}, 1, 0}};
/* issue 8: 8 tokens, with llama.cpp-vk's time on the H200 (goal: <= 1.5x our 1-token time) */
static const hk_case_shape tokens_full[] = {
    {Q4, {4096, 4096, 8}, 1, 0.159}, {Q4, {14336, 4096, 8}, 1, 0.423}, {Q4, {4096, 14336, 8}, 1, 0},
    {Q4, {4096, 4096, 2}, 1, 0},     {Q4, {4096, 4096, 4}, 1, 0},      {Q4, {4096, 4096, 16}, 1, 0},
    {Q6, {4096, 4096, 8}, 1, 0},     {Q8, {4096, 4096, 8}, 1, 0},      {Q8, {14336, 4096, 8}, 1, 0},
    {Q4, {14336, 4096, 16}, 1, 0},   {Q6, {14336, 4096, 8}, 1, 0},     {Q6, {4096, 14336, 8}, 1, 0},
    {Q6, {4096, 4096, 16}, 1, 0},    {Q5, {4096, 4096, 8}, 1, 0},      {Q5, {14336, 4096, 8}, 1, 0},
    {Q5, {4096, 14336, 8}, 1, 0},    {Q5, {4096, 4096, 16}, 1, 0},
};

static int tune_matvec_tokens(const hk_case_run *run)
{
    (void)run;
    return HK_TUNE_MATVEC_TOKENS;
}

const hk_case hk_case_matvec_int8_tokens = {
    .name = "matvec_int8_tokens",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_tokens,
    .record = record_tokens,
    .tune_family = tune_matvec_tokens,
    CASE_SHAPES(tokens_tests, tokens_quick, tokens_full),
};

/* ---- MoE expert gather: d = {n_experts, n, k, slots}, variant 1 = one x per slot; the GLU
 * (hk_moe_matvec_int8_glu) d[4] = gelu, held as the dense epilogues are (fused_state,
 * compare_fused) to the unfused calls' bits: two hk_moe_matvec_int8 and hk_swiglu ---- */

/* routings the timed ops cycle through, so the experts read change from op to op */
#define MOE_ROUTINGS 64

typedef struct moe_state {
    uint32_t routings;
} moe_state;

/* The unfused calls of hk_moe_matvec_int8_glu on the device into out[slots * n]: hk_moe_matvec_int8
 * of each bank, then hk_swiglu over the slots' rows. */
static hk_status unfused_moe_glu(hk_context *ctx, hk_type type, const void *w, const void *w_up,
                                 const hk_block_q8_1 *xq, const uint32_t *ids, const hk_moe_shape *sh, hk_glu_mode mode,
                                 float *out)
{
    uint64_t w_bytes = hk_ref_row_bytes((int)type, sh->k) * sh->n * sh->n_experts;
    uint64_t x_bytes = (uint64_t)sh->k / 32 * 36 * (sh->x_per_slot ? sh->slots : 1), y_bytes = 4ull * sh->slots * sh->n;
    uint64_t end = 0, wo = section(&end, w_bytes), uo = section(&end, w_bytes), xo = section(&end, x_bytes);
    uint64_t io = section(&end, 4ull * sh->slots), go = section(&end, y_bytes), to = section(&end, y_bytes);
    uint64_t yo = section(&end, y_bytes);
    hk_buffer *b = NULL;
    hk_status st = hk_buffer_create(ctx, end, &b);
    if (st == HK_OK)
        st = hk_buffer_upload(b, wo, w, w_bytes);
    if (st == HK_OK)
        st = hk_buffer_upload(b, uo, w_up, w_bytes);
    if (st == HK_OK)
        st = hk_buffer_upload(b, xo, xq, x_bytes);
    if (st == HK_OK)
        st = hk_buffer_upload(b, io, ids, 4ull * sh->slots);
    hk_view v_x = {b, xo}, v_i = {b, io}, v_g = {b, go}, v_t = {b, to}, v_y = {b, yo};
    if (st == HK_OK)
        st = hk_moe_matvec_int8(ctx, NULL, type, (hk_view){b, wo}, v_x, v_i, v_g, sh);
    if (st == HK_OK)
        st = hk_moe_matvec_int8(ctx, NULL, type, (hk_view){b, uo}, v_x, v_i, v_t, sh);
    if (st == HK_OK)
        st = hk_swiglu(ctx, NULL, v_g, v_t, v_y, sh->slots, sh->n, sh->n, mode);
    if (st == HK_OK)
        st = hk_buffer_download(b, yo, out, y_bytes);
    hk_buffer_destroy(b);
    return st;
}

/* A router's logits, tokens rows of n_experts (the moe_route and the ranking GLU cases' input): on
 * a coarse grid with pairs of equal logits (ties), from the second token NaN, -inf and a dominant
 * expert; where top_k > 2 a third token has only two numbers, so its later picks are none. */
static void router_logits(hk_rng *rng, uint32_t tokens, uint32_t n_experts, uint32_t top_k, float *l)
{
    size_t n = (size_t)tokens * n_experts;
    for (size_t i = 0; i < n; i++)
        l[i] = (float)(hk_rng_next(rng) % 4000) / 1000.0f - 2.0f;
    for (size_t i = 0; i + 1 < n; i += 2)
        l[i + 1] = l[i];
    if (tokens > 1 && n_experts >= 3) {
        l[n_experts + 0] = NAN;
        l[n_experts + 1] = -INFINITY;
        l[n_experts + 2] = 50.0f;
    }
    if (tokens > 2 && top_k > 2)
        for (uint32_t i = 2; i < n_experts; i++)
            l[2 * n_experts + i] = NAN;
}

/* routings sets of router_logits (hk_moe_matvec_int8_glu_q8_1_ranked's input) and the ids
 * hk_ref_moe_route ranks from them. weights: scratch of tokens x top_k. */
static void ranked_logits(hk_rng *rng, uint32_t routings, uint32_t tokens, uint32_t n_experts, uint32_t top_k,
                          float *logits, uint32_t *ids, float *weights)
{
    size_t n = (size_t)tokens * n_experts;
    for (uint32_t r = 0; r < routings; r++) {
        router_logits(rng, tokens, n_experts, top_k, logits + r * n);
        hk_ref_moe_route(logits + r * n, tokens, n_experts, top_k, 0, ids + (size_t)r * tokens * top_k, weights);
    }
}

/* glu: 0 the plain gather, 1 hk_moe_matvec_int8_glu, 2 hk_moe_matvec_int8_glu_q8_1, 3
 * hk_moe_matvec_int8_glu_q8_1_ranked (d[5] top_k) */
static hk_status prepare_moe_any(hk_case_run *run, uint64_t seed, int int8, int glu)
{
    hk_type type = run->shape.type;
    uint32_t n_experts = run->shape.d[0], n = run->shape.d[1], k = run->shape.d[2], slots = run->shape.d[3];
    int per_slot = run->shape.variant, gelu = glu && run->shape.d[4], ranked = glu == 3;
    uint32_t top_k = ranked ? run->shape.d[5] : 1, tokens = slots / top_k;
    hk_rng rng = {seed};
    uint64_t expert_bytes = hk_ref_row_bytes((int)type, k) * n, xs = per_slot ? slots : 1;
    uint32_t routings = run->ref_mode == HK_REF_ALL ? 1 : MOE_ROUTINGS;
    size_t outs = (size_t)slots * n;
    moe_state *state = glu ? NULL : hk_case_alloc(sizeof *state);
    size_t unfused_bytes = (run->ref_mode != HK_REF_NONE ? outs : 0) * sizeof(float);
    fused_state *fs = glu ? hk_case_alloc(sizeof *fs + unfused_bytes) : NULL;
    uint8_t *w = hk_random_weights(&rng, (int)type, (uint64_t)n_experts * n, k, 1);
    /* W_up's bank lies one expert into its tensor (record_moe_glu), so that a kernel reading it at
     * W_gate's offset reads other weights */
    uint8_t *w_up = glu ? hk_random_weights(&rng, (int)type, (uint64_t)(n_experts + 1) * n, k, 1) : NULL;
    const uint8_t *up_bank = glu ? w_up + expert_bytes : NULL;
    float *x = activations(&rng, xs * k);
    hk_block_q8_1 *xq = x ? quantized(x, xs * k) : NULL;
    uint32_t *ids = hk_case_alloc((size_t)routings * slots * sizeof *ids);
    float *logits = ranked ? hk_case_alloc((size_t)routings * tokens * n_experts * sizeof *logits) : NULL;
    float *route_w = ranked ? hk_case_alloc((size_t)slots * sizeof *route_w) : NULL;
    if (!(glu ? fs && w_up : state != NULL) || !w || !x || !xq || !ids || (ranked && (!logits || !route_w))) {
        free(state);
        free(fs);
        free(w);
        free(w_up);
        free(x);
        free(xq);
        free(ids);
        free(logits);
        free(route_w);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    if (glu) {
        fs->routings = routings;
        fs->out = 4;
        run->state = fs;
    } else {
        state->routings = routings;
        run->state = state;
    }
    /* routing r: distinct experts per token's slots where there are enough experts (ranked: the
     * logits' ranking) */
    for (uint32_t r = 0; r < routings && !ranked; r++)
        for (uint32_t s = 0; s < slots; s++) {
            uint32_t e, dup, tries = 0;
            do {
                e = (uint32_t)(hk_rng_next(&rng) % n_experts);
                dup = 0;
                for (uint32_t j = 0; j < s && slots <= n_experts; j++)
                    dup |= ids[r * slots + j] == e;
            } while (dup && ++tries < 100);
            ids[r * slots + s] = e;
        }
    if (ranked) {
        ranked_logits(&rng, routings, tokens, n_experts, top_k, logits, ids, route_w);
        free(route_w);
    } else if (run->ref_mode != HK_REF_NONE && slots > 2) {
        /* malformed routing from the GPU side must read and write nothing out of bounds, and
         * the same expert may come twice */
        ids[1] = n_experts;
        ids[slots - 1] = 0xFFFFFFFFu;
        ids[2] = ids[0];
    }
    hk_case_tensor_add(run, glu ? "w_gate" : "w", HK_CASE_IN, expert_bytes * n_experts, wide_align(type), 1, w);
    if (glu)
        hk_case_tensor_add(run, "w_up", HK_CASE_IN, expert_bytes * (n_experts + 1), wide_align(type), 1, w_up);
    if (int8)
        hk_case_tensor_add(run, "xq", HK_CASE_IN, xs * k / 32 * 36, 4, 0, xq);
    else
        hk_case_tensor_add(run, "x", HK_CASE_IN, xs * k * 4, 16, 0, x);
    if (ranked)
        hk_case_tensor_add(run, "logits", HK_CASE_IN, (uint64_t)routings * tokens * n_experts * 4, 4, 0, logits);
    else
        hk_case_tensor_add(run, "ids", HK_CASE_IN, (uint64_t)routings * slots * 4, 4, 0, ids);
    hk_case_tensor_add(run, glu >= 2 ? "yq" : "y", HK_CASE_OUT,
                       glu >= 2 ? (uint64_t)slots * n / 32 * 36 : (uint64_t)slots * n * 4, 4, 0, NULL);
    run->bytes = (glu ? 2.0 : 1.0) * slots * expert_bytes + (int8 ? 36.0 * k / 32 : 4.0 * k) * xs +
                 (glu >= 2 ? 1.125 : 4.0) * slots * n + (ranked ? 4.0 * tokens * n_experts : 4.0 * slots);
    char top[24] = "";
    if (ranked)
        snprintf(top, sizeof top, " top%u ranked", top_k);
    snprintf(run->label, sizeof run->label, "%s E%u %ux%u x%u%s%s%s%s", hk_type_name(type), n_experts, n, k, slots,
             per_slot ? " per-slot" : "", glu ? (gelu ? " gelu" : " silu") : "", glu >= 2 ? " q8_1" : "", top);
    hk_status st = HK_OK;
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = outs;
        float *sums = glu ? hk_case_alloc(2 * outs * sizeof(float)) : NULL;
        if (!(run->ref = hk_case_alloc(run->ref_count * sizeof(float))) || (glu && !sums)) {
            st = HK_ERROR_OUT_OF_MEMORY;
        } else if (glu) {
            /* the sums of each bank, then the activation's reference */
            hk_moe_shape sh = {n_experts, n, k, slots, per_slot};
            hk_ref_moe_matvec_q8_1((int)type, w, xq, per_slot, ids, sums, n_experts, n, k, slots);
            hk_ref_moe_matvec_q8_1((int)type, up_bank, xq, per_slot, ids, sums + outs, n_experts, n, k, slots);
            hk_ref_glu(sums, sums + outs, run->ref, slots, n, n, gelu);
            fs->scale = max_abs(sums, outs) * max_abs(sums + outs, outs);
            st = unfused_moe_glu(run->ctx, type, w, up_bank, xq, ids, &sh, gelu ? HK_GLU_GELU_TANH : HK_GLU_SILU,
                                 fs->unfused);
            fs->q8 = glu >= 2;
            if (st == HK_OK && fs->q8)
                st = quantize_on_device(run->ctx, fs->unfused, NULL, NULL, outs);
        } else if (int8)
            hk_ref_moe_matvec_q8_1((int)type, w, xq, per_slot, ids, run->ref, n_experts, n, k, slots);
        else
            hk_ref_moe_matvec((int)type, w, x, per_slot, ids, run->ref, n_experts, n, k, slots);
        free(sums);
    }
    free(int8 ? (void *)x : (void *)xq); /* the other one is the run's */
    if (ranked)
        free(ids); /* the logits are the run's */
    return st;
}

static hk_status prepare_moe(hk_case_run *run, uint64_t seed) { return prepare_moe_any(run, seed, 0, 0); }
static hk_status prepare_moe_int8(hk_case_run *run, uint64_t seed) { return prepare_moe_any(run, seed, 1, 0); }
static hk_status prepare_moe_glu(hk_case_run *run, uint64_t seed) { return prepare_moe_any(run, seed, 1, 1); }
static hk_status prepare_moe_glu_q8(hk_case_run *run, uint64_t seed) { return prepare_moe_any(run, seed, 1, 2); }
static hk_status prepare_moe_glu_ranked(hk_case_run *run, uint64_t seed) { return prepare_moe_any(run, seed, 1, 3); }

static hk_status record_moe_any(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op, int int8)
{
    const moe_state *state = run->state;
    const hk_case_shape *sh = &run->shape;
    hk_moe_shape shape = {sh->d[0], sh->d[1], sh->d[2], sh->d[3], sh->variant};
    hk_view ids = v[2];
    ids.offset += (uint64_t)(op % state->routings) * sh->d[3] * 4;
    return int8 ? hk_moe_matvec_int8(run->ctx, s, sh->type, v[0], v[1], ids, v[3], &shape)
                : hk_moe_matvec(run->ctx, s, sh->type, v[0], v[1], ids, v[3], &shape);
}

static hk_status record_moe_glu_any(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op, int q8)
{
    const fused_state *fs = run->state;
    const hk_case_shape *sh = &run->shape;
    hk_moe_shape shape = {sh->d[0], sh->d[1], sh->d[2], sh->d[3], sh->variant};
    hk_view ids = v[3], up = v[1];
    ids.offset += (uint64_t)(op % fs->routings) * sh->d[3] * 4;
    up.offset += hk_ref_row_bytes((int)sh->type, sh->d[2]) * sh->d[1]; /* past the leading expert */
    return (q8 ? hk_moe_matvec_int8_glu_q8_1 : hk_moe_matvec_int8_glu)(run->ctx, s, sh->type, v[0], up, v[2], ids,
                                                                       v[4], &shape,
                                                                       sh->d[4] ? HK_GLU_GELU_TANH : HK_GLU_SILU);
}

static hk_status record_moe_glu_ranked(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    const fused_state *fs = run->state;
    const hk_case_shape *sh = &run->shape;
    hk_moe_shape shape = {sh->d[0], sh->d[1], sh->d[2], sh->d[3], sh->variant};
    hk_view logits = v[3], up = v[1];
    logits.offset += (uint64_t)(op % fs->routings) * sh->d[3] / sh->d[5] * sh->d[0] * 4;
    up.offset += hk_ref_row_bytes((int)sh->type, sh->d[2]) * sh->d[1]; /* past the leading expert */
    return hk_moe_matvec_int8_glu_q8_1_ranked(run->ctx, s, sh->type, v[0], up, v[2], logits, v[4], &shape, sh->d[5],
                                              sh->d[4] ? HK_GLU_GELU_TANH : HK_GLU_SILU);
}

static hk_status record_moe_glu(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    return record_moe_glu_any(run, s, v, op, 0);
}

static hk_status record_moe_glu_q8(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    return record_moe_glu_any(run, s, v, op, 1);
}

static hk_status record_moe(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    return record_moe_any(run, s, v, op, 0);
}

static hk_status record_moe_int8(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    return record_moe_any(run, s, v, op, 1);
}

static const hk_case_shape moe_tests[] = {
    {Q4, {8, 64, 512, 5}, 0, 0},   {Q5, {8, 64, 512, 5}, 0, 0},   {Q6, {8, 64, 512, 5}, 0, 0},
    {Q8, {8, 64, 64, 5}, 0, 0},
    /* n not a multiple of 4 */
    {Q4, {8, 63, 256, 4}, 1, 0},   {Q5, {8, 63, 256, 4}, 1, 0},   {Q6, {8, 63, 256, 4}, 1, 0},
    {Q8, {8, 63, 32, 4}, 1, 0},
    {Q4, {4, 4100, 256, 4}, 0, 0}, {Q5, {4, 4100, 256, 4}, 0, 0}, {Q6, {4, 4100, 256, 4}, 0, 0},
    {Q8, {4, 4100, 32, 4}, 0, 0},
    /* Qwen3-30B-A3B decode, top-8: gate/up Q4_K E128 768x2048; down Q6_K 2048x768 with 96 experts
     * (all 128 are 165 MB, more than lavapipe's 128 MiB binding); gate/up Q5_K (Q5_K_M) with 96
     * experts (all 128 are 138 MB) */
    {Q4, {128, 768, 2048, 8}, 0, 0}, {Q6, {96, 2048, 768, 8}, 1, 0}, {Q5, {96, 768, 2048, 8}, 0, 0},
};
static const hk_case_shape moe_quick[] = {
    {Q4, {16, 768, 2048, 8}, 0, 0}, {Q6, {16, 2048, 768, 8}, 1, 0}, {Q5, {16, 768, 2048, 8}, 0, 0}};
static const hk_case_shape moe_full[] = {
    {Q4, {128, 768, 2048, 8}, 0, 0.057}, {Q6, {128, 2048, 768, 8}, 1, 0.064}, {Q5, {128, 768, 2048, 8}, 0, 0}};

const hk_case hk_case_moe_matvec = {
    .name = "moe_matvec",
    .gate = HK_GATE_F32,
    .prepare = prepare_moe,
    .record = record_moe,
    CASE_SHAPES(moe_tests, moe_quick, moe_full),
};
static int tune_moe_int8(const hk_case_run *run)
{
    (void)run;
    return HK_TUNE_MOE_MATVEC_INT8;
}

const hk_case hk_case_moe_matvec_int8 = {
    .name = "moe_matvec_int8",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_moe_int8,
    .record = record_moe_int8,
    .tune_family = tune_moe_int8,
    CASE_SHAPES(moe_tests, moe_quick, moe_full),
};

/* {type, {n_experts, n, k, slots, gelu}, per-slot x} of hk_moe_matvec_int8_glu: tails of n (5: one
 * row of each bank per subgroup; 33) and of k, 4 to 8 experts, 1 to 8 slots (from 3 slots an id
 * out of range, one of 0xFFFFFFFF and a repeated expert), both modes, a per-slot x; 2 slots of 2
 * rows (from 4096 rows) and 4 (Q6_K from 16384); Qwen3-30B-A3B's
 * gate and up (768 x 2048, 128 experts in Q4_K, 96 in Q5_K (lavapipe's binding range), top-8) */
static const hk_case_shape moe_glu_tests[] = {
    {Q4, {4, 5, 256, 1, 0}, 0, 0},  {Q5, {6, 5, 512, 3, 1}, 0, 0},  {Q6, {8, 33, 256, 8, 0}, 0, 0},
    {Q8, {8, 33, 512, 5, 1}, 0, 0}, {Q4, {8, 33, 512, 4, 1}, 1, 0}, {Q6, {5, 5, 512, 2, 1}, 1, 0},
    {Q8, {4, 64, 256, 8, 0}, 1, 0}, {Q5, {8, 1024, 256, 4, 0}, 0, 0}, {Q6, {4, 4096, 256, 4, 1}, 0, 0},
    {Q4, {128, 768, 2048, 8, 0}, 0, 0}, {Q5, {96, 768, 2048, 8, 1}, 0, 0},
};
static const hk_case_shape moe_glu_quick[] = {{Q4, {16, 768, 2048, 8, 0}, 0, 0}, {Q5, {16, 768, 2048, 8, 0}, 0, 0}};
static const hk_case_shape moe_glu_full[] = {{Q4, {128, 768, 2048, 8, 0}, 0, 0}, {Q5, {128, 768, 2048, 8, 0}, 0, 0},
                                             {Q6, {128, 768, 2048, 8, 0}, 0, 0}, {Q8, {128, 768, 2048, 8, 0}, 0, 0}};

/* {type, {n_experts, n, k, slots, gelu}, per-slot x} of hk_moe_matvec_int8_glu_q8_1: n of one block
 * and of several, 1 to 8 slots (ids out of range from 3 slots), both modes, a per-slot x, 2 slots of
 * 2 rows (from 4096 rows) and 4 (Q6_K from 16384); Qwen3-30B-A3B's gate and up */
static const hk_case_shape moe_glu_q8_tests[] = {
    {Q4, {4, 32, 256, 1, 0}, 0, 0},   {Q5, {6, 64, 512, 3, 1}, 0, 0},    {Q6, {8, 96, 256, 8, 0}, 1, 0},
    {Q8, {8, 32, 512, 5, 1}, 0, 0},   {Q5, {8, 1024, 256, 4, 0}, 0, 0}, {Q6, {4, 4096, 256, 4, 1}, 0, 0},
    {Q4, {128, 768, 2048, 8, 0}, 0, 0}, {Q5, {96, 768, 2048, 8, 1}, 0, 0},
};

const hk_case hk_case_moe_matvec_int8_glu_q8_1 = {
    .name = "moe_matvec_int8_glu_q8_1",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_moe_glu_q8,
    .record = record_moe_glu_q8,
    .compare = compare_fused_q8,
    .tune_family = tune_moe_int8,
    CASE_SHAPES(moe_glu_q8_tests, moe_glu_quick, moe_glu_full),
};

/* {type, {n_experts, n, k, slots, gelu, top_k}, per-slot x} of hk_moe_matvec_int8_glu_q8_1_ranked:
 * the experts ranked from logits with ties, NaN, -inf and a token of two numbers (its later slots
 * none); top-1 to top-8, more experts than a 32-wide subgroup has lanes; Qwen3-30B-A3B's gate and
 * up (top-8 of 128, one token and four) */
static const hk_case_shape moe_glu_ranked_tests[] = {
    {Q4, {4, 32, 256, 1, 0, 1}, 0, 0},    {Q5, {6, 64, 512, 6, 1, 2}, 0, 0},  {Q6, {8, 96, 256, 9, 0, 3}, 1, 0},
    {Q8, {40, 32, 512, 12, 1, 4}, 0, 0},  {Q4, {128, 768, 2048, 8, 0, 8}, 0, 0},
    {Q5, {96, 768, 2048, 32, 1, 8}, 1, 0},
};
static const hk_case_shape moe_glu_ranked_quick[] = {{Q4, {16, 768, 2048, 8, 0, 8}, 0, 0}};
static const hk_case_shape moe_glu_ranked_full[] = {{Q4, {128, 768, 2048, 8, 0, 8}, 0, 0},
                                                    {Q5, {128, 768, 2048, 8, 0, 8}, 0, 0}};

const hk_case hk_case_moe_matvec_int8_glu_q8_1_ranked = {
    .name = "moe_matvec_int8_glu_q8_1_ranked",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_moe_glu_ranked,
    .record = record_moe_glu_ranked,
    .compare = compare_fused_q8,
    .tune_family = tune_moe_int8,
    CASE_SHAPES(moe_glu_ranked_tests, moe_glu_ranked_quick, moe_glu_ranked_full),
};

const hk_case hk_case_moe_matvec_int8_glu = {
    .name = "moe_matvec_int8_glu",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_moe_glu,
    .record = record_moe_glu,
    .compare = compare_fused,
    .tune_family = tune_moe_int8,
    CASE_SHAPES(moe_glu_tests, moe_glu_quick, moe_glu_full),
};

/* ---- the MoE down projection with the weighted combine (hk_moe_matvec_int8_combine): d =
 * {n_experts, n, k, slots, top_k}, variant bits COMBINE_* (one x per slot, a residual, in place).
 * Held to the bits of hk_moe_matvec_int8 then hk_moe_combine, run on the device at prepare, and to
 * hk_ref_moe_matvec_q8_1 then hk_ref_moe_combine. ---- */
enum { COMBINE_PER_SLOT = 1, COMBINE_RESIDUAL = 2, COMBINE_IN_PLACE = 4 };

/* The two calls hk_moe_matvec_int8_combine replaces, on the device, into out[tokens * n]. */
static hk_status unfused_moe_combine(hk_context *ctx, hk_type type, const void *w, const hk_block_q8_1 *xq,
                                     const uint32_t *ids, const float *weights, const float *residual,
                                     const hk_moe_shape *sh, uint32_t top_k, float *out)
{
    uint32_t tokens = sh->slots / top_k;
    uint64_t w_bytes = hk_ref_row_bytes((int)type, sh->k) * sh->n * sh->n_experts;
    uint64_t x_bytes = (uint64_t)sh->k / 32 * 36 * (sh->x_per_slot ? sh->slots : 1), y_bytes = 4ull * tokens * sh->n;
    uint64_t end = 0, wo = section(&end, w_bytes), xo = section(&end, x_bytes), io = section(&end, 4ull * sh->slots);
    uint64_t go = section(&end, 4ull * sh->slots), po = section(&end, 4ull * sh->slots * sh->n);
    uint64_t ro = section(&end, y_bytes), yo = section(&end, y_bytes);
    hk_buffer *b = NULL;
    hk_status st = hk_buffer_create(ctx, end, &b);
    if (st == HK_OK)
        st = hk_buffer_upload(b, wo, w, w_bytes);
    if (st == HK_OK)
        st = hk_buffer_upload(b, xo, xq, x_bytes);
    if (st == HK_OK)
        st = hk_buffer_upload(b, io, ids, 4ull * sh->slots);
    if (st == HK_OK)
        st = hk_buffer_upload(b, go, weights, 4ull * sh->slots);
    if (st == HK_OK && residual)
        st = hk_buffer_upload(b, ro, residual, y_bytes);
    if (st == HK_OK)
        st = hk_moe_matvec_int8(ctx, NULL, type, (hk_view){b, wo}, (hk_view){b, xo}, (hk_view){b, io}, (hk_view){b, po},
                                sh);
    if (st == HK_OK)
        st = hk_moe_combine(ctx, NULL, (hk_view){b, po}, (hk_view){b, go}, residual ? (hk_view){b, ro} : (hk_view){0},
                            (hk_view){b, yo}, tokens, top_k, sh->n);
    if (st == HK_OK)
        st = hk_buffer_download(b, yo, out, y_bytes);
    hk_buffer_destroy(b);
    return st;
}

static hk_status prepare_moe_combine(hk_case_run *run, uint64_t seed)
{
    hk_type type = run->shape.type;
    uint32_t n_experts = run->shape.d[0], n = run->shape.d[1], k = run->shape.d[2], slots = run->shape.d[3];
    uint32_t top_k = run->shape.d[4], tokens = slots / top_k;
    int variant = run->shape.variant, per_slot = variant & COMBINE_PER_SLOT, has_res = variant & COMBINE_RESIDUAL;
    int in_place = has_res && (variant & COMBINE_IN_PLACE);
    hk_rng rng = {seed};
    uint64_t expert_bytes = hk_ref_row_bytes((int)type, k) * n, xs = per_slot ? slots : 1;
    size_t outs = (size_t)tokens * n;
    fused_state *fs = hk_case_alloc(sizeof *fs + (run->ref_mode != HK_REF_NONE ? outs : 0) * sizeof(float));
    uint8_t *w = hk_random_weights(&rng, (int)type, (uint64_t)n_experts * n, k, 1);
    float *x = activations(&rng, xs * k), *weights = hk_case_alloc(4ull * slots);
    float *res = has_res ? hk_case_alloc(4 * outs) : NULL;
    hk_block_q8_1 *xq = x ? quantized(x, xs * k) : NULL;
    uint32_t *ids = hk_case_alloc(4ull * slots);
    free(x);
    if (!fs || !w || !xq || !ids || !weights || (has_res && !res)) {
        free(fs);
        free(w);
        free(xq);
        free(ids);
        free(weights);
        free(res);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    fs->routings = 1;
    run->state = fs;
    for (uint32_t s = 0; s < slots; s++)
        ids[s] = (uint32_t)(hk_rng_next(&rng) % n_experts);
    if (slots > 2) { /* an id out of range and one of 0xFFFFFFFF: no weights read, zero products */
        ids[1] = n_experts;
        ids[slots - 1] = 0xFFFFFFFFu;
    }
    hk_rng_fill(&rng, weights, slots, 0.0f, 1.0f);
    if (res)
        hk_rng_fill(&rng, res, outs, -2.0f, 2.0f);
    hk_status st = HK_OK;
    if (run->ref_mode != HK_REF_NONE) {
        float *products = hk_case_alloc(4ull * slots * n);
        run->ref_count = outs;
        run->ref = hk_case_alloc(4 * outs);
        if (!products || !run->ref) {
            st = HK_ERROR_OUT_OF_MEMORY;
        } else {
            hk_moe_shape sh = {n_experts, n, k, slots, per_slot};
            hk_ref_moe_matvec_q8_1((int)type, w, xq, per_slot, ids, products, n_experts, n, k, slots);
            hk_ref_moe_combine(products, weights, res, run->ref, tokens, top_k, n);
            fs->scale = fmax(max_abs(products, (size_t)slots * n), res ? max_abs(res, outs) : 0.0);
            st = unfused_moe_combine(run->ctx, type, w, xq, ids, weights, res, &sh, top_k, fs->unfused);
        }
        free(products);
    }
    hk_case_tensor_add(run, "w", HK_CASE_IN, expert_bytes * n_experts, wide_align(type), 1, w);
    hk_case_tensor_add(run, "xq", HK_CASE_IN, xs * k / 32 * 36, 4, 0, xq);
    hk_case_tensor_add(run, "ids", HK_CASE_IN, 4ull * slots, 4, 0, ids);
    hk_case_tensor_add(run, "weights", HK_CASE_IN, 4ull * slots, 4, 0, weights);
    int ri = res ? hk_case_tensor_add(run, "residual", in_place ? HK_CASE_INOUT : HK_CASE_IN, 4 * outs, 4, 0, res) : -1;
    if (in_place)
        hk_case_tensor_alias(run, "y", ri);
    else
        hk_case_tensor_add(run, "y", HK_CASE_OUT, 4 * outs, 4, 0, NULL);
    fs->out = res ? 5 : 4;
    run->bytes = (double)slots * expert_bytes + 36.0 * k / 32 * xs + 8.0 * slots + (res ? 8.0 : 4.0) * outs;
    snprintf(run->label, sizeof run->label, "%s E%u %ux%u x%u/%u%s%s%s", hk_type_name(type), n_experts, n, k, slots,
             top_k, per_slot ? " per-slot" : "", res ? " +residual" : "", in_place ? " y=residual" : "");
    return st;
}

static hk_status record_moe_combine(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const hk_case_shape *sh = &run->shape;
    hk_moe_shape shape = {sh->d[0], sh->d[1], sh->d[2], sh->d[3], sh->variant & COMBINE_PER_SLOT};
    int has_res = sh->variant & COMBINE_RESIDUAL;
    return hk_moe_matvec_int8_combine(run->ctx, s, sh->type, v[0], v[1], v[2], v[3], has_res ? v[4] : (hk_view){0},
                                      v[has_res ? 5 : 4], &shape, sh->d[4]);
}

/* {type, {n_experts, n, k, slots, top_k}, variant} of hk_moe_matvec_int8_combine: tails of n (5,
 * 33) and k, top_k 1 to 8 over 1 to 3 tokens (from 3 slots ids out of range), with and without the
 * residual, in place, one x or a per-slot x; 4 rows per group (Q6_K from 16384 rows); more slots
 * than the workgroup's subgroups; Qwen3-30B-A3B's down projection (2048 x 768, 96 experts: all 128
 * are more than lavapipe's binding range, top-8, into the residual) */
#define PS COMBINE_PER_SLOT
#define RES COMBINE_RESIDUAL
#define IP COMBINE_IN_PLACE
static const hk_case_shape combine_tests[] = {
    {Q4, {4, 5, 256, 1, 1}, RES, 0},          {Q5, {6, 5, 512, 3, 3}, PS, 0},
    {Q6, {8, 33, 256, 8, 8}, PS | RES | IP, 0}, {Q8, {8, 33, 512, 6, 2}, RES, 0},
    {Q4, {8, 33, 512, 8, 4}, PS | RES, 0},     {Q6, {5, 5, 512, 2, 1}, PS, 0},
    {Q8, {4, 64, 256, 16, 8}, PS | RES | IP, 0}, {Q5, {8, 1024, 256, 4, 4}, RES | IP, 0},
    {Q6, {4, 4096, 256, 4, 2}, PS | RES, 0}, {Q6, {96, 2048, 768, 8, 8}, PS | RES | IP, 0},
};
#undef PS
#undef RES
#undef IP
static const hk_case_shape combine_quick[] = {
    {Q6, {16, 2048, 768, 8, 8}, COMBINE_PER_SLOT | COMBINE_RESIDUAL | COMBINE_IN_PLACE, 0}};
static const hk_case_shape combine_full[] = {
    {Q6, {128, 2048, 768, 8, 8}, COMBINE_PER_SLOT | COMBINE_RESIDUAL | COMBINE_IN_PLACE, 0},
    {Q4, {128, 2048, 768, 8, 8}, COMBINE_PER_SLOT | COMBINE_RESIDUAL | COMBINE_IN_PLACE, 0}};

const hk_case hk_case_moe_matvec_int8_combine = {
    .name = "moe_matvec_int8_combine",
    .gate = HK_GATE_EXACT,
    .prepare = prepare_moe_combine,
    .record = record_moe_combine,
    .compare = compare_fused,
    .tune_family = tune_moe_int8,
    CASE_SHAPES(combine_tests, combine_quick, combine_full),
};

/* ---- router: d = {tokens, n_experts, top_k}, variant 1 = renormalised ---- */

/* The logits and the reference ids, for the tie rule of compare_route. */
typedef struct route_state {
    uint32_t *ids;
    float logits[];
} route_state;

static hk_status prepare_route(hk_case_run *run, uint64_t seed)
{
    uint32_t tokens = run->shape.d[0], n_experts = run->shape.d[1], top_k = run->shape.d[2];
    size_t n = (size_t)tokens * n_experts, picks = (size_t)tokens * top_k;
    hk_rng rng = {seed};
    route_state *state = hk_case_alloc(sizeof *state + n * sizeof(float) + picks * sizeof(uint32_t));
    float *logits = hk_case_alloc(n * sizeof(float));
    if (!logits || !state) {
        free(logits);
        free(state);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    run->state = state;
    state->ids = (uint32_t *)(state->logits + n);
    router_logits(&rng, tokens, n_experts, top_k, logits);
    memcpy(state->logits, logits, n * sizeof(float));
    hk_case_tensor_add(run, "logits", HK_CASE_IN, n * 4, 4, 1, logits);
    hk_case_tensor_add(run, "ids", HK_CASE_OUT, picks * 4, 4, 0, NULL);
    hk_case_tensor_add(run, "weights", HK_CASE_OUT, picks * 4, 4, 0, NULL);
    run->bytes = 4.0 * n + 8.0 * picks;
    snprintf(run->label, sizeof run->label, "%u tok E%u top%u%s", tokens, n_experts, top_k,
             run->shape.variant ? " renorm" : "");
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = picks;
        if (!(run->ref = hk_case_alloc(picks * sizeof(float))))
            return HK_ERROR_OUT_OF_MEMORY;
        hk_ref_moe_route(state->logits, tokens, n_experts, top_k, run->shape.variant, state->ids, run->ref);
    }
    return HK_OK;
}

static hk_status record_route(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const hk_case_shape *sh = &run->shape;
    return hk_moe_route(run->ctx, s, v[0], v[1], v[2], sh->d[0], sh->d[1], sh->d[2], sh->variant);
}

/* Ids must match, except where two experts tie on their logit at the boundary (either is right);
 * the weights are held to the f32 gate. */
static double compare_route(const hk_case_run *run, char *detail, size_t size)
{
    const route_state *state = run->state;
    uint32_t tokens = run->shape.d[0], n_experts = run->shape.d[1], top_k = run->shape.d[2];
    const uint32_t *got = run->t[1].got;
    uint32_t ties = 0, wrong = 0;
    for (uint32_t t = 0; t < tokens; t++)
        for (uint32_t r = 0; r < top_k; r++) {
            uint32_t a = state->ids[t * top_k + r], b = got[t * top_k + r];
            const float *l = state->logits + (size_t)t * n_experts;
            if (a == b)
                continue;
            if (a < n_experts && b < n_experts && l[a] == l[b])
                ties++;
            else
                wrong++;
        }
    double rel = hk_scale_rel(run->t[2].got, run->ref, run->ref_count);
    snprintf(detail, size, "ids: %u wrong, %u boundary ties; weights scale_rel=%.3e", wrong, ties, rel);
    return wrong ? INFINITY : rel;
}

static const hk_case_shape route_tests[] = {
    {F32, {1, 4, 1}, 0, 0},
    {F32, {5, 128, 8}, 1, 0}, /* Qwen3-30B-A3B: 128 experts, top-8, renormalised */
    {F32, {33, 128, 8}, 0, 0},
    {F32, {3, 300, 64}, 1, 0}, /* more experts than a subgroup has lanes, the largest top_k */
    {F32, {4, 256, 16}, 0, 0}, /* 64 staged logits per lane on a 4-wide subgroup */
};
static const hk_case_shape route_quick[] = {{F32, {1, 128, 8}, 1, 0}, {F32, {64, 128, 8}, 1, 0}};
static const hk_case_shape route_full[] = {{F32, {1, 128, 8}, 1, 0}, {F32, {512, 128, 8}, 1, 0}};

const hk_case hk_case_moe_route = {
    .name = "moe_route",
    .gate = HK_GATE_F32,
    .prepare = prepare_route,
    .record = record_route,
    .compare = compare_route,
    CASE_SHAPES(route_tests, route_quick, route_full),
};

/* ---- f32 GEMV: d = {rows, k, tokens} (tokens 0: hk_gemv_f32's one) ---- */

static hk_status prepare_gemv(hk_case_run *run, uint64_t seed)
{
    uint32_t rows = run->shape.d[0], k = run->shape.d[1], tokens = run->shape.d[2] ? run->shape.d[2] : 1;
    hk_rng rng = {seed};
    float *w = hk_case_alloc((size_t)rows * k * sizeof(float)), *x = activations(&rng, (size_t)tokens * k);
    if (!w || !x) {
        free(w);
        free(x);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    hk_rng_fill(&rng, w, (size_t)rows * k, -0.1f, 0.1f);
    hk_case_tensor_add(run, "w", HK_CASE_IN, (uint64_t)rows * k * 4, 4, 1, w);
    hk_case_tensor_add(run, "x", HK_CASE_IN, (uint64_t)tokens * k * 4, 4, 0, x);
    hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)tokens * rows * 4, 4, 0, NULL);
    run->bytes = 4.0 * rows * k + tokens * (4.0 * k + 4.0 * rows);
    if (run->shape.d[2])
        snprintf(run->label, sizeof run->label, "%ux%u x%u tok", rows, k, tokens);
    else
        snprintf(run->label, sizeof run->label, "%ux%u", rows, k);
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = (size_t)tokens * rows;
        if (!(run->ref = hk_case_alloc(run->ref_count * sizeof(float))))
            return HK_ERROR_OUT_OF_MEMORY;
        for (uint32_t t = 0; t < tokens; t++)
            hk_ref_gemv_f32(w, x + (size_t)t * k, run->ref + (size_t)t * rows, rows, k);
    }
    return HK_OK;
}

static hk_status record_gemv(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    return hk_gemv_f32(run->ctx, s, v[0], v[1], v[2], run->shape.d[0], run->shape.d[1]);
}

static const hk_case_shape gemv_tests[] = {
    {F32, {1, 1}, 0, 0}, {F32, {5, 33}, 0, 0},
    {F32, {128, 2048}, 0, 0}, /* the Qwen3-30B-A3B router gate: 128 experts x 2048 */
    {F32, {1000, 131}, 0, 0},
};
static const hk_case_shape gemv_quick[] = {{F32, {128, 2048}, 0, 0}, {F32, {1024, 2048}, 0, 0}};
static const hk_case_shape gemv_full[] = {{F32, {128, 2048}, 0, 0}, {F32, {151936, 2048}, 0, 0}};

const hk_case hk_case_gemv_f32 = {
    .name = "gemv_f32",
    .gate = HK_GATE_F32,
    .prepare = prepare_gemv,
    .record = record_gemv,
    CASE_SHAPES(gemv_tests, gemv_quick, gemv_full),
};

static hk_status record_gemv_tokens(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    const uint32_t *d = run->shape.d;
    return hk_gemv_f32_tokens(run->ctx, s, v[0], v[1], v[2], d[0], d[1], d[2]);
}

/* tokens: one, a tail block alone, a full block of 8, full blocks and a tail, a 512-token prompt */
static const hk_case_shape gemv_tokens_tests[] = {
    {F32, {1, 1, 1}, 0, 0},      {F32, {5, 33, 3}, 0, 0},    {F32, {1000, 131, 17}, 0, 0},
    {F32, {128, 2048, 1}, 0, 0}, /* the Qwen3-30B-A3B router gate: 128 experts x 2048 */
    {F32, {128, 2048, 3}, 0, 0}, {F32, {128, 2048, 8}, 0, 0}, {F32, {128, 2048, 17}, 0, 0},
    {F32, {128, 2048, 512}, 0, 0},
    {F32, {40000, 3, 17}, 0, 0}, /* 120000 workgroups: over x and y, the grid's last ones past the end */
};
static const hk_case_shape gemv_tokens_quick[] = {{F32, {128, 2048, 8}, 0, 0}, {F32, {128, 2048, 512}, 0, 0}};
static const hk_case_shape gemv_tokens_full[] = {
    {F32, {128, 2048, 1}, 0, 0}, {F32, {128, 2048, 8}, 0, 0}, {F32, {128, 2048, 17}, 0, 0},
    {F32, {128, 2048, 512}, 0, 0},
};

const hk_case hk_case_gemv_f32_tokens = {
    .name = "gemv_f32_tokens",
    .gate = HK_GATE_F32,
    .prepare = prepare_gemv,
    .record = record_gemv_tokens,
    CASE_SHAPES(gemv_tokens_tests, gemv_tokens_quick, gemv_tokens_full),
};

/* ---- Q8_1 blocks (the quantizer's row and the fused RMSNorm's) against the reference quantizer of
 * the k values x quantized: the GPU divides and rounds with its own precision, so a value within
 * rounding of .5 may round the other way: each q may differ by one, rarely (at most one per block
 * on average); d by one f16 step; s must be f16(d * sum(q)) of the GPU's own q (to one step); and
 * every value must come back within half a quantization step (plus d's rounding). The result is
 * the dequantized blocks' scale_rel against x, held to HK_GATE_INT8. ---- */
static double q8_1_check(const float *x, const hk_block_q8_1 *got, uint32_t k, char *detail, size_t size)
{
    uint32_t blocks = k / 32;
    hk_block_q8_1 *ref = hk_case_alloc(blocks * sizeof *ref);
    float *deq = hk_case_alloc((size_t)k * sizeof(float));
    if (!ref || !deq) {
        free(ref);
        free(deq);
        snprintf(detail, size, "out of host memory");
        return INFINITY;
    }
    hk_quant_row_q8_1(x, ref, k);
    uint32_t d_bad = 0, q_far = 0, q_off = 0, s_bad = 0, err_bad = 0;
    for (uint32_t b = 0; b < blocks; b++) {
        int dd = (int)got[b].d - (int)ref[b].d;
        d_bad += dd < -1 || dd > 1;
        float d = hk_f16_to_f32(got[b].d), amax = 0.0f;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        float bound = 0.5f * (amax / 127.0f) * 1.001f + 127.0f * fabsf(d - amax / 127.0f) + 1e-7f;
        int sum = 0;
        for (int i = 0; i < 32; i++) {
            int dq = got[b].qs[i] - ref[b].qs[i];
            q_far += dq < -1 || dq > 1;
            q_off += dq != 0;
            sum += got[b].qs[i];
            err_bad += fabsf(x[b * 32 + i] - d * got[b].qs[i]) > bound;
        }
        int ds = (int)got[b].s - (int)hk_f32_to_f16(d * (float)sum);
        s_bad += ds < -1 || ds > 1;
    }
    hk_dequant_row_q8_1(got, deq, k);
    double rel = hk_scale_rel(deq, x, k);
    int ok = d_bad == 0 && q_far == 0 && q_off <= blocks && s_bad == 0 && err_bad == 0;
    snprintf(detail, size, "dequantized scale_rel=%.3e; d off=%u, q off by >1=%u, by 1=%u, s off=%u, |x-dq| over bound=%u",
             rel, d_bad, q_far, q_off, s_bad, err_bad);
    free(ref);
    free(deq);
    return ok ? rel : INFINITY;
}

/* ---- RMSNorm, alone or fused with the Q8_1 quantizer: d = {rows, n}, variant RQ_* (where y goes;
 * RQ_NO_Y only with the quantizer) ---- */

enum { RQ_Y, RQ_IN_PLACE, RQ_NO_Y };

static hk_status prepare_norm(hk_case_run *run, uint64_t seed, int q8_1)
{
    uint32_t rows = run->shape.d[0], n = run->shape.d[1];
    size_t count = (size_t)rows * n;
    int variant = run->shape.variant;
    hk_rng rng = {seed};
    float *x = hk_case_alloc(count * sizeof(float)), *w = hk_case_alloc(n * sizeof(float));
    if (!x || !w) {
        free(x);
        free(w);
        return HK_ERROR_OUT_OF_MEMORY;
    }
    hk_rng_fill(&rng, x, count, -3.0f, 3.0f);
    hk_rng_fill(&rng, w, n, 0.5f, 1.5f);
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = count;
        if (!(run->ref = hk_case_alloc(count * sizeof(float)))) {
            free(x);
            free(w);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        hk_ref_rmsnorm(x, w, run->ref, rows, n, 1e-6f);
    }
    int xi = hk_case_tensor_add(run, "x", variant == RQ_IN_PLACE ? HK_CASE_INOUT : HK_CASE_IN, count * 4, 4,
                                variant != RQ_IN_PLACE, x);
    hk_case_tensor_add(run, "weight", HK_CASE_IN, (uint64_t)n * 4, 4, 0, w);
    if (variant == RQ_IN_PLACE)
        hk_case_tensor_alias(run, "y", xi);
    else if (variant == RQ_Y)
        hk_case_tensor_add(run, "y", HK_CASE_OUT, count * 4, 4, 0, NULL);
    if (q8_1)
        hk_case_tensor_add(run, "yq", HK_CASE_OUT, count / 32 * 36, 4, 0, NULL);
    run->bytes = 4.0 * count + 4.0 * n + (variant == RQ_NO_Y ? 0.0 : 4.0 * count) + (q8_1 ? 36.0 * count / 32 : 0.0);
    static const char *const kinds[] = {"", " in-place", " no-y"};
    snprintf(run->label, sizeof run->label, "%ux%u%s", rows, n, kinds[variant]);
    return HK_OK;
}

static hk_status prepare_rmsnorm(hk_case_run *run, uint64_t seed) { return prepare_norm(run, seed, 0); }

static hk_status record_rmsnorm(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    return hk_rmsnorm(run->ctx, s, v[0], v[1], v[2], run->shape.d[0], run->shape.d[1], 1e-6f);
}

static const hk_case_shape rmsnorm_tests[] = {
    {F32, {1, 1}, 0, 0},    {F32, {3, 100}, 0, 0}, {F32, {4, 2048}, 0, 0},
    {F32, {5, 2048}, 1, 0}, {F32, {70000, 4}, 0, 0}, /* more rows than one dispatch dimension holds */
    /* Qwen3's per-head q and k norm of one token: rows = heads (32 q, 8 kv), n = head_dim, in place */
    {F32, {32, 128}, 1, 0}, {F32, {8, 128}, 1, 0},
    /* rows over more than one staged chunk of 4096 values, the last block short (the wide
     * workgroup and the default) */
    {F32, {2, 4196}, 1, 0}, {F32, {1, 9000}, 0, 0}, {F32, {64, 4200}, 0, 0},
};
static const hk_case_shape rmsnorm_quick[] = {{F32, {1, 2048}, 0, 0}, {F32, {64, 4096}, 0, 0}, {F32, {32, 128}, 1, 0}};
/* ... and the q/k norm of Qwen3-8B for a decode token and a 512-token chunk (rows = tokens x heads) */
static const hk_case_shape rmsnorm_full[] = {{F32, {1, 2048}, 0, 0},   {F32, {1, 4096}, 0, 0},
                                             {F32, {512, 4096}, 0, 0}, {F32, {32, 128}, 1, 0},
                                             {F32, {8, 128}, 1, 0},    {F32, {512 * 32, 128}, 1, 0}};

const hk_case hk_case_rmsnorm = {
    .name = "rmsnorm",
    .gate = HK_GATE_F32,
    .prepare = prepare_rmsnorm,
    .record = record_rmsnorm,
    CASE_SHAPES(rmsnorm_tests, rmsnorm_quick, rmsnorm_full),
};

/* ---- RMSNorm fused with the Q8_1 quantizer: d = {rows, n}, variant RQ_* (where y goes) ---- */

static hk_status prepare_rmsnorm_q8_1(hk_case_run *run, uint64_t seed) { return prepare_norm(run, seed, 1); }

static hk_status record_rmsnorm_q8_1(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    int no_y = run->shape.variant == RQ_NO_Y;
    return hk_rmsnorm_q8_1(run->ctx, s, v[0], v[1], no_y ? (hk_view){NULL, 0} : v[2], v[no_y ? 2 : 3],
                           run->shape.d[0], run->shape.d[1], 1e-6f);
}

/* y against hk_ref_rmsnorm at rmsnorm's gate; yq as the quantizer's row holds its blocks, against
 * the reference quantizer of the values the kernel quantized: its own y where it wrote one, else the
 * reference's (which differs from the kernel's by the sums' rounding, far inside the blocks' bounds).
 * Bit-identity with hk_rmsnorm then hk_quantize_q8_1 is test_kernels' own check. */
static double compare_rmsnorm_q8_1(const hk_case_run *run, char *detail, size_t size)
{
    size_t count = (size_t)run->shape.d[0] * run->shape.d[1];
    int no_y = run->shape.variant == RQ_NO_Y;
    const float *y = no_y ? NULL : run->t[2].got;
    double y_rel = y ? hk_scale_rel(y, run->ref, count) : 0.0;
    char q[240];
    double q_rel = q8_1_check(y ? y : run->ref, run->t[no_y ? 2 : 3].got, (uint32_t)count, q, sizeof q);
    if (y)
        snprintf(detail, size, "y scale_rel=%.3e (gate %.0e); yq %s", y_rel, HK_GATE_F32, q);
    else
        snprintf(detail, size, "yq %s", q);
    return y_rel < HK_GATE_F32 ? q_rel : INFINITY;
}

/* decode hidden sizes (2048, 4096, 5120: one token, the wide workgroup, whose 2048-value steps
 * leave 5120 a tail), 768 and 32 over a few rows (the default workgroup, steps of 512), 2080 (one
 * block past a step), a 512-token chunk, more rows than one dispatch dimension holds; y separate,
 * in place and absent. The first ones are small (test_kernels --small). */
static const hk_case_shape rmsnorm_q8_1_tests[] = {
    {F32, {7, 32}, RQ_Y, 0},         {F32, {3, 768}, RQ_NO_Y, 0},     {F32, {2, 2080}, RQ_Y, 0},
    {F32, {1, 5120}, RQ_IN_PLACE, 0}, {F32, {5, 160}, RQ_IN_PLACE, 0}, {F32, {3, 768}, RQ_Y, 0},
    {F32, {1, 2048}, RQ_Y, 0},       {F32, {1, 2048}, RQ_NO_Y, 0},    {F32, {1, 4096}, RQ_Y, 0},
    {F32, {1, 4096}, RQ_NO_Y, 0},    {F32, {1, 5120}, RQ_Y, 0},       {F32, {512, 4096}, RQ_Y, 0},
    {F32, {512, 4096}, RQ_NO_Y, 0},  {F32, {70000, 32}, RQ_NO_Y, 0},
};
static const hk_case_shape rmsnorm_q8_1_quick[] = {
    {F32, {1, 2048}, RQ_Y, 0}, {F32, {1, 4096}, RQ_NO_Y, 0}, {F32, {64, 4096}, RQ_Y, 0}};
static const hk_case_shape rmsnorm_q8_1_full[] = {
    {F32, {1, 2048}, RQ_Y, 0},   {F32, {1, 4096}, RQ_Y, 0},      {F32, {1, 4096}, RQ_NO_Y, 0},
    {F32, {1, 5120}, RQ_NO_Y, 0}, {F32, {512, 4096}, RQ_Y, 0}, {F32, {512, 4096}, RQ_NO_Y, 0}};

const hk_case hk_case_rmsnorm_q8_1 = {
    .name = "rmsnorm_q8_1",
    .gate = HK_GATE_INT8,
    .prepare = prepare_rmsnorm_q8_1,
    .record = record_rmsnorm_q8_1,
    .compare = compare_rmsnorm_q8_1,
    CASE_SHAPES(rmsnorm_q8_1_tests, rmsnorm_q8_1_quick, rmsnorm_q8_1_full),
};

/* ---- Q8_1 quantizer: d = {k} ---- */

static hk_status prepare_quantize(hk_case_run *run, uint64_t seed)
{
    uint32_t k = run->shape.d[0];
    hk_rng rng = {seed};
    float *x = hk_case_alloc((size_t)k * sizeof(float));
    if (!x)
        return HK_ERROR_OUT_OF_MEMORY;
    /* blocks of different magnitude, one all-zero block */
    for (uint32_t i = 0; i < k; i++)
        x[i] = (i / 32 == 1) ? 0.0f : hk_rng_uniform(&rng, -1.0f, 1.0f) * (float)(1 + (i / 32) % 7);
    if (run->ref_mode != HK_REF_NONE) {
        run->ref_count = k;
        if (!(run->ref = hk_case_alloc((size_t)k * sizeof(float)))) {
            free(x);
            return HK_ERROR_OUT_OF_MEMORY;
        }
        memcpy(run->ref, x, (size_t)k * sizeof(float));
    }
    hk_case_tensor_add(run, "x", HK_CASE_IN, (uint64_t)k * 4, 4, 1, x);
    hk_case_tensor_add(run, "y", HK_CASE_OUT, (uint64_t)k / 32 * 36, 4, 0, NULL);
    run->bytes = 4.0 * k + 36.0 * k / 32;
    snprintf(run->label, sizeof run->label, "%u", k);
    return HK_OK;
}

static hk_status record_quantize(const hk_case_run *run, hk_stream *s, const hk_view *v, uint32_t op)
{
    (void)op;
    return hk_quantize_q8_1(run->ctx, s, v[0], v[1], run->shape.d[0]);
}

/* The blocks against the reference quantizer of x (q8_1_check). */
static double compare_quantize(const hk_case_run *run, char *detail, size_t size)
{
    return q8_1_check(run->ref, run->t[1].got, run->shape.d[0], detail, size);
}

static const hk_case_shape quantize_tests[] = {{F32, {32}, 0, 0}, {F32, {96}, 0, 0}, {F32, {2048}, 0, 0}, {F32, {6144}, 0, 0}};
static const hk_case_shape quantize_quick[] = {{F32, {2048}, 0, 0}, {F32, {16384}, 0, 0}};
static const hk_case_shape quantize_full[] = {{F32, {2048}, 0, 0}, {F32, {4096}, 0, 0}, {F32, {1u << 20}, 0, 0}};

const hk_case hk_case_quantize_q8_1 = {
    .name = "quantize_q8_1",
    .gate = HK_GATE_INT8,
    .prepare = prepare_quantize,
    .record = record_quantize,
    .compare = compare_quantize,
    CASE_SHAPES(quantize_tests, quantize_quick, quantize_full),
};
