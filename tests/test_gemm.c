/* The prefill f16 GEMM (hk_gemm_f16) beyond its kernel-table row (src/cases/cases_prefill.c, run by
 * test_kernels on every shape and placement, with and without the cooperative-matrix arm): which
 * arm runs, the references on their own, two GEMMs chained in one stream on both arms, and every
 * argument error. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define Q8 HK_TYPE_Q8_0
#define Q4 HK_TYPE_Q4_K
#define Q5 HK_TYPE_Q5_K
#define Q6 HK_TYPE_Q6_K
#define F16 HK_TYPE_F16

/* ---- the tests ---------------------------------------------------------------------------------- */

/* The reference on its own: each output row agrees with the matvec reference (f32 sums per
 * block, another code path), and rounding the operands to f16 moves it by about f16 precision. */
static void test_reference(void)
{
    static const hk_type types[] = {Q8, Q4, Q6, F16, Q5};
    for (int t = 0; t < 5; t++) {
        const uint32_t m = 3, n = 5, k = 512;
        hk_rng rng = {91 + t};
        float x[3 * 512], ref[3 * 5], ref16[3 * 5], mv[5];
        hk_rng_fill(&rng, x, m * k, -1.0f, 1.0f);
        uint8_t *w = hk_random_weights(&rng, (int)types[t], n, k, t == 1 || t == 4);
        int ok = w && hk_ref_gemm((int)types[t], w, x, ref, m, n, k) &&
                 hk_ref_gemm_f16((int)types[t], w, x, ref16, m, n, k);
        double worst = ok ? 0.0 : INFINITY;
        for (uint32_t i = 0; i < m && ok; i++) {
            hk_ref_matvec((int)types[t], w, x + i * k, mv, n, k);
            double e = hk_scale_rel(ref + i * n, mv, n);
            worst = e > worst ? e : worst;
        }
        char name[80];
        snprintf(name, sizeof name, "hk_ref_gemm %s rows = hk_ref_matvec", hk_type_name(types[t]));
        hk_check(worst < 1e-5, name, "scale_rel=%.3e", worst);
        double r16 = ok ? hk_scale_rel(ref16, ref, m * n) : INFINITY;
        snprintf(name, sizeof name, "hk_ref_gemm_f16 %s: f16 operands", hk_type_name(types[t]));
        hk_check(r16 > 0 && r16 < 5e-3, name, "scale_rel to full precision %.3e", r16);
        free(w);
    }
}

/* Two GEMMs in one stream, the first's output the second's x: out2 = (x . W1^T) . W2^T against the
 * references chained on the host; the stream orders the second after the first. */
static void test_stream_chain(hk_context *ctx)
{
    const uint32_t m = 33, k1 = 512, n1 = 256, n2 = 40;
    hk_rng rng = {4242};
    float *x = malloc((size_t)m * k1 * 4), *mid = malloc((size_t)m * n1 * 4), *ref = malloc((size_t)m * n2 * 4);
    uint8_t *w1 = hk_random_weights(&rng, HK_REF_Q4_K, n1, k1, 0), *w2 = hk_random_weights(&rng, HK_REF_Q6_K, n2, n1, 0);
    hk_rng_fill(&rng, x, (size_t)m * k1, -1.0f, 1.0f);
    hk_ref_gemm(HK_REF_Q4_K, w1, x, mid, m, n1, k1);
    hk_ref_gemm(HK_REF_Q6_K, w2, mid, ref, m, n2, n1);
    uint64_t w1_bytes = hk_ref_row_bytes(HK_REF_Q4_K, k1) * n1, w2_bytes = hk_ref_row_bytes(HK_REF_Q6_K, n1) * n2;
    hk_buffer *xb = hk_test_buffer(ctx, (uint64_t)m * k1 * 4, x), *w1b = hk_test_buffer(ctx, w1_bytes, w1);
    hk_buffer *w2b = hk_test_buffer(ctx, w2_bytes, w2), *midb = hk_test_buffer(ctx, (uint64_t)m * n1 * 4, NULL);
    hk_test_out out = hk_test_out_create(ctx, (size_t)m * n2);
    hk_stream *s = NULL;
    hk_status st = hk_stream_create(ctx, 0, &s);
    if (st == HK_OK)
        st = hk_gemm_f16(ctx, s, Q4, (hk_view){w1b, 0}, (hk_view){xb, 0}, (hk_view){midb, 0}, m, n1, k1);
    if (st == HK_OK)
        st = hk_gemm_f16(ctx, s, Q6, (hk_view){w2b, 0}, (hk_view){midb, 0}, hk_test_out_view(&out), m, n2, n1);
    hk_check(st == HK_OK && hk_stream_kernel_count(s) == 2, "gemm stream records 2 kernels", "%s",
             st == HK_OK ? "" : hk_last_error());
    if (st == HK_OK)
        st = hk_stream_submit(s);
    if (st == HK_OK)
        hk_check_close("gemm stream q4_k -> q6_k", hk_test_out_read(&out, "gemm stream"), ref, (size_t)m * n2,
                       HK_GATE_F16);
    else
        hk_check(0, "gemm stream", "%s", hk_last_error());
    hk_stream_destroy(s);
    hk_test_out_destroy(&out);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(w1b);
    hk_buffer_destroy(w2b);
    hk_buffer_destroy(midb);
    free(x);
    free(mid);
    free(ref);
    free(w1);
    free(w2);
}

/* One GEMM against the references: full precision at HK_GATE_F16, the f16-rounded operands at
 * 1e-2 (as the table row). w at a 16-byte aligned offset or at 2 mod 4, x at 0 or 4 mod 16; raw
 * weight blocks for odd seeds (never F16, whose raw bits hold infinities and NaNs). */
static void check_gemm(hk_context *ctx, hk_type type, uint32_t m, uint32_t n, uint32_t k, int aligned, uint64_t seed,
                       const char *label)
{
    hk_rng rng = {seed};
    uint64_t w_bytes = hk_ref_row_bytes((int)type, k) * n, x_bytes = (uint64_t)m * k * 4;
    float *x = malloc(x_bytes), *ref = malloc((size_t)m * n * 4), *ref16 = malloc((size_t)m * n * 4);
    uint8_t *w = hk_random_weights(&rng, (int)type, n, k, (int)(seed & 1) && type != F16);
    hk_rng_fill(&rng, x, (size_t)m * k, -1.0f, 1.0f);
    int ok = w && hk_ref_gemm((int)type, w, x, ref, m, n, k) && hk_ref_gemm_f16((int)type, w, x, ref16, m, n, k);
    uint64_t w_off = aligned ? 64 : 34, x_off = aligned ? 0 : 4;
    hk_buffer *wb = hk_test_buffer(ctx, w_off + w_bytes, NULL), *xb = hk_test_buffer(ctx, x_off + x_bytes, NULL);
    hk_status st = hk_buffer_upload(wb, w_off, w, w_bytes);
    if (st == HK_OK)
        st = hk_buffer_upload(xb, x_off, x, x_bytes);
    hk_test_out out = hk_test_out_create(ctx, (size_t)m * n);
    char name[200];
    snprintf(name, sizeof name, "gemm %s m=%u n=%u k=%u %s%s", hk_type_name(type), m, n, k,
             aligned ? "aligned" : "unaligned", label);
    if (st == HK_OK)
        st = hk_gemm_f16(ctx, NULL, type, (hk_view){wb, w_off}, (hk_view){xb, x_off}, hk_test_out_view(&out), m, n, k);
    if (st == HK_ERROR_UNSUPPORTED && getenv("HK_GEMM_TILE") && strstr(hk_last_error(), "bytes of shared memory")) {
        printf("note: %s skipped: %s\n", name, hk_last_error()); /* a tuning tile past this device */
    } else if (st != HK_OK || !ok) {
        hk_check(0, name, "%s", st != HK_OK ? hk_last_error() : "reference failed");
    } else {
        const float *got = hk_test_out_read(&out, name);
        if (got) {
            double r16 = hk_scale_rel(got, ref16, (size_t)m * n);
            hk_check(r16 < HK_GATE_F16_OPERANDS, name, "scale_rel to the f16-operand reference %.3e", r16);
            hk_check_close(name, got, ref, (size_t)m * n, HK_GATE_F16);
        }
    }
    hk_test_out_destroy(&out);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    free(x);
    free(ref);
    free(ref16);
    free(w);
}

static void set_env(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* The tiling and staging variants (HK_GEMM_TILE, HK_GEMM_PREFETCH, HK_GEMM_WIDE) on a few shapes of
 * every type (F16 at a k that ends inside a step): k steps of 32 (one Q4_K / Q5_K nibble per
 * chunk), 64, 128 and 256 values, other warp grids, no prefetch, 16-bit weight loads. Tiles for the portable
 * arm (32-wide warps, lavapipe's 32 KiB) or the cooperative-matrix one (32-wide subgroups assumed;
 * all within 48 KiB of shared memory, and a tile a device cannot hold is skipped with a note). */
static void test_variants(hk_context *ctx, int coopmat)
{
    typedef struct variant {
        const char *tile, *prefetch, *wide;
    } variant;
    static const variant portable[] = {
        {"1,1,1,1,64", NULL, NULL}, {"2,1,1,1,128", "0", NULL}, {"1,1,1,1,32", NULL, "0"}, {"1,2,1,1,64", "0", "0"}};
    static const variant matrix[] = {
        {"2,4,4,2,64", NULL, NULL}, {"2,2,2,4,32", "0", NULL}, {"2,2,2,2,128", NULL, "0"}, {"1,2,1,2,256", NULL, NULL}};
    const variant *vs = coopmat ? matrix : portable;
    static const hk_type types[] = {Q8, Q4, Q6};
    uint64_t seed = 500;
    for (int v = 0; v < 4; v++) {
        set_env("HK_GEMM_TILE", vs[v].tile);
        set_env("HK_GEMM_PREFETCH", vs[v].prefetch);
        set_env("HK_GEMM_WIDE", vs[v].wide);
        char label[120];
        snprintf(label, sizeof label, ", HK_GEMM_TILE=%s%s%s", vs[v].tile, vs[v].prefetch ? " HK_GEMM_PREFETCH=0" : "",
                 vs[v].wide ? " HK_GEMM_WIDE=0" : "");
        /* Q4_K (its chunk loads) and one other type per variant, in turn: each tile is a pipeline
         * of its own to build, seconds on lavapipe */
        check_gemm(ctx, Q4, 40, 70, 512, v & 1, ++seed, label);
        check_gemm(ctx, Q5, 33, 40, 512, !(v & 1), ++seed, label); /* Q4_K's chunks and the qh chunks */
        check_gemm(ctx, types[v % 2 ? 2 : 0], 17, 140, 768, !(v & 1), ++seed, label);
        if (v == 0)
            check_gemm(ctx, Q8, 9, 33, 96, 1, ++seed, label); /* k steps halved to 32 */
        /* F16 at a k no step divides: the last step (at 256, the only one) partial */
        check_gemm(ctx, F16, 9, 33, 200, v & 1, ++seed, label);
    }
    set_env("HK_GEMM_TILE", NULL);
    set_env("HK_GEMM_PREFETCH", NULL);
    set_env("HK_GEMM_WIDE", NULL);
}

/* ---- argument errors: the status, a message naming the problem, nothing recorded or written ---- */

static hk_context *err_ctx;
static hk_stream *err_stream;
static hk_test_out err_out;

static void expect(const char *name, hk_status got, hk_status want, const char *needle)
{
    hk_check_status(name, got, want, needle);
    hk_check(hk_stream_kernel_count(err_stream) == 0, name, "nothing recorded");
    const float *o = hk_test_out_read(&err_out, name);
    uint32_t bad = 0;
    for (size_t i = 0; o && i < err_out.n; i++) {
        uint32_t word;
        memcpy(&word, &o[i], 4);
        bad += word != HK_POISON_WORD;
    }
    hk_check(o && bad == 0, name, "%u output words written", bad);
}

static void test_errors(hk_context *ctx, hk_context *other)
{
    const uint32_t m = 2, n = 4, k = 256;
    const uint64_t w_bytes = hk_ref_row_bytes(HK_REF_Q4_K, k) * n, x_bytes = (uint64_t)m * k * 4;
    err_ctx = ctx;
    err_out = hk_test_out_create(ctx, (size_t)m * n);
    if (hk_stream_create(ctx, 0, &err_stream) != HK_OK) {
        hk_check(0, "gemm errors: stream", "%s", hk_last_error());
        hk_test_out_destroy(&err_out);
        return;
    }
    hk_buffer *wb = hk_test_buffer(ctx, w_bytes, NULL), *xb = hk_test_buffer(ctx, x_bytes, NULL);
    hk_view w = {wb, 0}, x = {xb, 0}, o = hk_test_out_view(&err_out);
    hk_stream *s = err_stream;
    const hk_status INV = HK_ERROR_INVALID_ARGUMENT;

    expect("gemm null context", hk_gemm_f16(NULL, s, Q4, w, x, o, m, n, k), INV, "context is NULL");
    static const hk_type bad_types[] = {HK_TYPE_F32, HK_TYPE_Q8_1, (hk_type)99};
    for (int i = 0; i < 3; i++)
        expect("gemm unsupported wtype", hk_gemm_f16(ctx, s, bad_types[i], w, x, o, m, n, k), HK_ERROR_UNSUPPORTED,
               "not a GEMM weight type (q8_0, q4_k, q5_k, q6_k, f16)");
    expect("gemm f16 k = 0", hk_gemm_f16(ctx, s, HK_TYPE_F16, w, x, o, m, n, 0), INV,
           "k=0 is not a positive multiple of 1 (f16 block)");
    expect("gemm f16 w past the end", hk_gemm_f16(ctx, s, HK_TYPE_F16, w, x, o, m, n, 73), INV,
           "w needs 584 bytes at offset 0, past the end of its 576-byte buffer");
    expect("gemm m = 0", hk_gemm_f16(ctx, s, Q4, w, x, o, 0, n, k), INV, "m=0 and n=4 must both be positive");
    expect("gemm n = 0", hk_gemm_f16(ctx, s, Q4, w, x, o, m, 0, k), INV, "m=2 and n=0 must both be positive");
    expect("gemm k = 0", hk_gemm_f16(ctx, s, Q4, w, x, o, m, n, 0), INV, "k=0 is not a positive multiple of 256");
    expect("gemm k off the q4_k block", hk_gemm_f16(ctx, s, Q4, w, x, o, m, n, 320), INV,
           "k=320 is not a positive multiple of 256 (q4_k block)");
    expect("gemm k off the q6_k block", hk_gemm_f16(ctx, s, Q6, w, x, o, m, n, 128), INV, "multiple of 256 (q6_k");
    expect("gemm k off the q5_k block", hk_gemm_f16(ctx, s, Q5, w, x, o, m, n, 384), INV, "multiple of 256 (q5_k");
    expect("gemm q5_k w past the end", hk_gemm_f16(ctx, s, Q5, w, x, o, m, n, k), INV,
           "w needs 704 bytes at offset 0, past the end of its 576-byte buffer");
    expect("gemm k off the q8_0 block", hk_gemm_f16(ctx, s, Q8, w, x, o, m, n, 48), INV, "multiple of 32 (q8_0");
    expect("gemm m past the limit", hk_gemm_f16(ctx, s, Q4, w, x, o, HK_GEMM_MAX_M + 1, n, k), INV,
           "m=16777217 exceeds the limit m <= 16777216");
    expect("gemm n past the limit", hk_gemm_f16(ctx, s, Q4, w, x, o, m, HK_GEMM_MAX_N + 1, k), INV,
           "n=16777217 exceeds the limit n <= 16777216");
    expect("gemm k past the limit", hk_gemm_f16(ctx, s, Q4, w, x, o, m, n, HK_GEMM_MAX_K + 256), INV,
           "k=1048832 exceeds the limit k <= 1048576");
    /* the limits come before the buffers: the shape one step inside them is refused for its views */
    expect("gemm k at the limit, views too small", hk_gemm_f16(ctx, s, Q4, w, x, o, m, n, HK_GEMM_MAX_K), INV,
           "past the end");
    expect("gemm null w buffer", hk_gemm_f16(ctx, s, Q4, (hk_view){NULL, 0}, x, o, m, n, k), INV, "w.buffer is NULL");
    expect("gemm null x buffer", hk_gemm_f16(ctx, s, Q4, w, (hk_view){NULL, 0}, o, m, n, k), INV, "x.buffer is NULL");
    expect("gemm null out buffer", hk_gemm_f16(ctx, s, Q4, w, x, (hk_view){NULL, 0}, m, n, k), INV,
           "out.buffer is NULL");
    expect("gemm w past the end", hk_gemm_f16(ctx, s, Q4, (hk_view){wb, 2}, x, o, m, n, k), INV,
           "w needs 576 bytes at offset 2, past the end");
    expect("gemm x past the end", hk_gemm_f16(ctx, s, Q4, w, (hk_view){xb, 4}, o, m, n, k), INV,
           "x needs 2048 bytes at offset 4, past the end");
    expect("gemm x rows past the end", hk_gemm_f16(ctx, s, Q4, w, x, o, m + 1, n, k), INV, "x needs 3072 bytes");
    expect("gemm w rows past the end", hk_gemm_f16(ctx, s, Q4, w, x, o, 1, n + 1, k), INV, "w needs 720 bytes");
    expect("gemm out past the end",
           hk_gemm_f16(ctx, s, Q4, w, x, (hk_view){o.buffer, o.offset + (HK_TEST_GUARD + 1) * 4}, m, n, k), INV,
           "out needs 32 bytes");
    expect("gemm w misaligned", hk_gemm_f16(ctx, s, Q4, (hk_view){wb, 1}, x, o, 1, 1, k), INV,
           "w.offset=1 is not a multiple of 2");
    expect("gemm x misaligned", hk_gemm_f16(ctx, s, Q4, w, (hk_view){xb, 2}, o, 1, n, k), INV,
           "x.offset=2 is not a multiple of 4");
    expect("gemm out misaligned", hk_gemm_f16(ctx, s, Q4, w, x, (hk_view){o.buffer, o.offset - 2}, m, n, k), INV,
           "out.offset=62 is not a multiple of 4");
    expect("gemm out overlaps x", hk_gemm_f16(ctx, s, Q4, w, x, (hk_view){xb, 0}, m, n, k), INV,
           "output out overlaps x");
    expect("gemm out overlaps w", hk_gemm_f16(ctx, s, Q4, w, x, (hk_view){wb, 0}, 1, 1, k), INV,
           "output out overlaps w");
    setenv("HK_GEMM_TILE", "2,2,2", 1);
    expect("gemm HK_GEMM_TILE malformed", hk_gemm_f16(ctx, s, Q4, w, x, o, m, n, k), INV,
           "HK_GEMM_TILE=\"2,2,2\" is not \"wm,wn,rm,rn,bk\"");
    setenv("HK_GEMM_TILE", "8,8,8,8,64", 1);
    expect("gemm HK_GEMM_TILE too big", hk_gemm_f16(ctx, s, Q4, w, x, o, m, n, k), HK_ERROR_UNSUPPORTED,
           "HK_GEMM_TILE=\"8,8,8,8,64\"");
    unsetenv("HK_GEMM_TILE");
    if (other) {
        hk_stream *foreign = NULL;
        if (hk_stream_create(other, 0, &foreign) == HK_OK) {
            expect("gemm stream of another context", hk_gemm_f16(ctx, foreign, Q4, w, x, o, m, n, k), INV,
                   "stream belongs to another context");
            hk_stream_destroy(foreign);
        }
        expect("gemm buffer of another context", hk_gemm_f16(other, NULL, Q4, w, x, o, m, n, k), INV,
               "w.buffer belongs to another context");
    }
    hk_check(hk_gemm_f16_path(NULL, Q4) == NULL && hk_gemm_f16_path(ctx, HK_TYPE_F32) == NULL, "gemm_f16_path refuses",
             "a NULL context and a type without the GEMM give NULL");
    hk_stream_destroy(err_stream);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    hk_test_out_destroy(&err_out);
}

/* The tuner's family takes every GEMM weight type: a search of two schedules at a Q5_K shape of its
 * own class (kept in the context only). */
static void test_tune_q5k(hk_context *ctx)
{
    hk_tune_desc d = hk_test_short_tune(HK_TUNE_GEMM_F16);
    d.shape.gemm = (hk_tune_gemm_shape){Q5, 20, 24, 256};
    hk_tune_report r;
    hk_status st = hk_tune(ctx, &d, &r);
    if (hk_check_status("hk_tune gemm_f16 on q5_k", st, HK_OK, NULL))
        hk_check(!strcmp(r.shape, "q5_k:m17-32/n24/k256") && r.measured >= 1 && isfinite(r.best_ms),
                 "hk_tune gemm_f16 on q5_k", "shape class %s, %u measured, winner %s", r.shape, r.measured,
                 r.schedule);
}

/* Which arm runs on this context (1 coopmat, 0 portable). */
static int report_arm(hk_context *ctx, const char *label, int want_coopmat)
{
    const char *arm = hk_gemm_f16_path(ctx, Q4);
    int coopmat = arm && !strcmp(arm, "coopmat");
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    printf("gemm_f16 on %s%s: %s arm (coopmat_khr %d, %u property entries, subgroup %u, shared %u bytes)\n",
           caps.device_name, label, arm ? arm : "none", caps.coopmat_khr, caps.coopmat_khr_count, caps.subgroup_size,
           caps.shared_memory_bytes);
    hk_check(arm && (want_coopmat < 0 || coopmat == want_coopmat), "gemm_f16 arm", "%s%s", arm ? arm : "none", label);
    return coopmat;
}

int main(void)
{
    hk_context *ctx = hk_test_context();
    test_reference();
    int coopmat = report_arm(ctx, "", -1);
    test_stream_chain(ctx);
    test_variants(ctx, coopmat);
    test_tune_q5k(ctx);
    hk_context *portable = hk_test_context_without(HK_FEATURE_COOPMAT_KHR);
    if (portable) {
        report_arm(portable, " without HK_FEATURE_COOPMAT_KHR", 0);
        if (coopmat) {
            test_stream_chain(portable);
            test_variants(portable, 0);
        }
    }
    test_errors(ctx, portable);
    if (portable) {
        uint32_t messages = hk_context_validation_messages(portable);
        hk_check(messages == 0, "no validation messages on the portable context", "%u seen", messages);
        hk_context_destroy(portable);
    }
    return hk_test_finish(ctx);
}
