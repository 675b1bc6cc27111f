/* Every kernel of the table (src/cases/cases.h) against its C reference on its test shapes: seeded
 * random inputs, tails and real model shapes, each input placed at an aligned offset, at its
 * minimal alignment and flush against its buffer's end, outputs poisoned and every byte outside
 * them checked; the portable twins on contexts without the accelerated features; a chain of
 * dependent kernels in one stream; hk_gemv_f32_tokens bit for bit against hk_gemv_f32; and
 * hk_rmsnorm_q8_1 bit for bit against hk_rmsnorm then hk_quantize_q8_1. */
#define _POSIX_C_SOURCE 200809L
#include "cases.h"
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hk_context *ctx;

/* Inputs up to this size run in every placement; bigger ones aligned and flush at the end. */
#define ALL_PLACEMENTS_BYTES (4u << 20)
/* --small (the GPU-assisted validation run, where lavapipe compiles every pipeline instrumented,
 * minutes each for the big ones): each case's first SMALL_SHAPES shapes whose tensors total at most
 * SMALL_SHAPE_BYTES, flush against their buffers' ends (where a read past a tensor leaves the
 * binding), at offset 0 and at the minimal alignment. The case files put their most telling small
 * shapes first. */
#define SMALL_SHAPE_BYTES (1u << 20)
#define SMALL_SHAPES 6
static int small_only;
/* --only NAMES (comma-separated): only these cases, for a quick look at one kernel.
 * --part I/N: the cases whose index in the table is I-1 modulo N (the GPU-assisted run is cut into
 * N ctest tests that run side by side, and every case of the table falls in one of them). */
static const char *only;
static uint32_t part_index, part_count = 1;

/* The next name of a comma-separated list into name[64]; 0 past the last. */
static int next_name(const char **list, char *name)
{
    if (!*list)
        return 0;
    size_t len = strcspn(*list, ",");
    snprintf(name, 64, "%.*s", (int)(len < 63 ? len : 63), *list);
    *list = (*list)[len] ? *list + len + 1 : NULL;
    return 1;
}

static int selected(const hk_case *kc)
{
    size_t c = 0;
    while (c < hk_case_count && hk_cases[c] != kc)
        c++;
    if (c % part_count != part_index)
        return 0;
    if (!only)
        return 1;
    char name[64];
    for (const char *p = only; next_name(&p, name);)
        if (!strcmp(name, kc->name))
            return 1;
    return 0;
}

/* One case on its test shapes (the first max_shapes of them) in the given placements. */
static void run_case(const hk_case *kc, uint32_t max_shapes, int all_placements, const char *suffix)
{
    char why[256];
    if (!selected(kc))
        return;
    if (!hk_case_available(kc, ctx, why, sizeof why)) {
        printf("%s: not on this device (%s)\n", kc->name, why);
        return;
    }
    uint32_t small_run = 0;
    for (uint32_t i = 0; i < kc->n_tests && i < max_shapes; i++) {
        if (small_only && small_run == SMALL_SHAPES)
            break;
        hk_case_run run;
        hk_status st = hk_case_prepare(kc, &kc->tests[i], ctx, HK_REF_ALL, 1000 + 17 * i, &run);
        if (st != HK_OK) {
            hk_check(0, kc->name, "shape %u: prepare failed (%s: %s)", i, hk_status_name(st), hk_last_error());
            continue;
        }
        uint64_t bytes = 0;
        for (uint32_t t = 0; t < run.n_tensors; t++)
            bytes += run.t[t].bytes;
        if (small_only && bytes > SMALL_SHAPE_BYTES) {
            hk_case_release(&run);
            continue;
        }
        small_run++;
        static const int few[] = {HK_PLACE_ALIGNED, HK_PLACE_END_MIN};
        static const int all[] = {HK_PLACE_ALIGNED, HK_PLACE_MINIMAL, HK_PLACE_END, HK_PLACE_END_MIN};
        static const int at_end[] = {HK_PLACE_END, HK_PLACE_END_MIN};
        int every = all_placements && bytes <= ALL_PLACEMENTS_BYTES;
        const int *places = small_only ? at_end : every ? all : few;
        int n_places = small_only ? 2 : every ? 4 : all_placements ? 2 : 1;
        /* flash prefill under GPU-assisted validation: flush and aligned only. lavapipe's LLVM
         * builds the instrumented 2-byte-load f16 pipeline for over ten minutes (the coroutine
         * frame of a shader cut at every barrier), the 16-byte one in about one; the narrow
         * loads run flush against the end in the plain and synchronization runs */
        if (small_only && kc->tune_family && kc->tune_family(&run) == HK_TUNE_FLASH_PREFILL)
            n_places = 1;
        for (int p = 0; p < n_places; p++) {
            char name[200], detail[320];
            snprintf(name, sizeof name, "%s %s %s%s", kc->name, run.label, hk_case_place_name(places[p]), suffix);
            hk_case_bound bound;
            if (hk_case_bind(&run, places[p], 1, &bound) != HK_OK) {
                hk_check(0, name, "bind: %s", bound.why);
                continue;
            }
            double err = hk_case_check(&run, &bound, 0, detail, sizeof detail), gate = hk_case_gate(&run);
            hk_check(err < gate, name, "%s (gate %.0e)", detail, gate);
            hk_case_unbind(&bound);
        }
        hk_case_release(&run);
    }
}

/* Several dependent kernels in one stream: rmsnorm -> matvec -> matvec, the output of each the
 * input of the next, checked against the references chained on the host. */
static void test_stream_chain(void)
{
    hk_rng rng = {77};
    const uint32_t n = 512, mid = 256;
    float x[512], g[512], h[512], ref1[256], ref2[512];
    hk_rng_fill(&rng, x, n, -2.0f, 2.0f);
    hk_rng_fill(&rng, g, n, 0.5f, 1.5f);
    size_t rb1 = hk_ref_row_bytes(HK_REF_Q4_K, n), rb2 = hk_ref_row_bytes(HK_REF_Q8_0, mid);
    uint8_t *w1 = malloc(rb1 * mid), *w2 = malloc(rb2 * n);
    hk_random_blocks(&rng, HK_TYPE_Q4_K, w1, rb1 * mid / 144, 0.05f);
    hk_random_blocks(&rng, HK_TYPE_Q8_0, w2, rb2 * n / 34, 0.05f);
    hk_ref_rmsnorm(x, g, h, 1, n, 1e-5f);
    hk_ref_matvec(HK_REF_Q4_K, w1, h, ref1, mid, n);
    hk_ref_matvec(HK_REF_Q8_0, w2, ref1, ref2, n, mid);

    hk_buffer *xb = hk_test_buffer(ctx, n * 4, x), *gb = hk_test_buffer(ctx, n * 4, g);
    hk_buffer *w1b = hk_test_buffer(ctx, rb1 * mid, w1), *w2b = hk_test_buffer(ctx, rb2 * n, w2);
    hk_buffer *act = hk_test_buffer(ctx, (n + mid) * 4, NULL);
    hk_test_out y = hk_test_out_create(ctx, n);
    hk_view hv = {act, 0}, m = {act, n * 4};
    hk_stream *s = NULL;
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    hk_status st = hk_stream_create(ctx, caps.timestamps ? 4 : 0, &s);
    int timed = caps.timestamps;
    if (st == HK_OK && timed)
        st = hk_stream_timestamp(s, NULL);
    if (st == HK_OK)
        st = hk_rmsnorm(ctx, s, (hk_view){xb, 0}, (hk_view){gb, 0}, hv, 1, n, 1e-5f);
    if (st == HK_OK && timed)
        st = hk_stream_timestamp(s, NULL);
    if (st == HK_OK)
        st = hk_matvec_q4k(ctx, s, (hk_view){w1b, 0}, hv, m, mid, n);
    if (st == HK_OK && timed)
        st = hk_stream_timestamp(s, NULL);
    if (st == HK_OK)
        st = hk_matvec_q8_0(ctx, s, (hk_view){w2b, 0}, m, hk_test_out_view(&y), n, mid);
    if (st == HK_OK && timed)
        st = hk_stream_timestamp(s, NULL);
    hk_check(st == HK_OK && hk_stream_kernel_count(s) == 3, "stream records 3 kernels", "%s",
             st == HK_OK ? "" : hk_last_error());
    if (st == HK_OK)
        st = hk_stream_submit(s);
    if (st == HK_OK) {
        hk_check_close("stream rmsnorm->q4_k->q8_0", hk_test_out_read(&y, "stream chain"), ref2, n, HK_GATE_F32);
        hk_check(hk_stream_kernel_count(s) == 0, "stream empty after submit", NULL);
        if (caps.timestamps) {
            double ms = -1, all = -1;
            hk_status t1 = hk_stream_elapsed_ms(s, 1, 2, &ms), t2 = hk_stream_elapsed_ms(s, 0, 3, &all);
            hk_check(t1 == HK_OK && t2 == HK_OK && ms > 0 && all >= ms, "stream timestamps",
                     "kernel 1 %.4f ms, all %.4f ms", ms, all);
        }
        /* a stream is reusable after submit */
        st = hk_rmsnorm(ctx, s, (hk_view){xb, 0}, (hk_view){gb, 0}, hv, 1, n, 1e-5f);
        if (st == HK_OK)
            st = hk_stream_submit(s);
        hk_check(st == HK_OK, "stream reuse", "%s", st == HK_OK ? "" : hk_last_error());
    } else {
        hk_check(0, "stream chain", "%s", hk_last_error());
    }
    hk_stream_destroy(s);
    hk_test_out_destroy(&y);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(gb);
    hk_buffer_destroy(w1b);
    hk_buffer_destroy(w2b);
    hk_buffer_destroy(act);
    free(w1);
    free(w2);
}

/* hk_gemv_f32_tokens against hk_gemv_f32 on each token alone, bit for bit (include/hkernel.h): one
 * call and `tokens` single-token calls in one stream, their outputs compared with memcmp (and with
 * the reference, so that two untouched outputs cannot pass); blocks of 8 tokens full, full ones
 * and a tail of one or five, a tail alone; k with a tail of the 128-wide loop. Each token's x has
 * its own magnitude. */
static void test_gemv_tokens(void)
{
    static const uint32_t shapes[][3] = {{128, 2048, 512}, {128, 2048, 17}, {1000, 131, 13}, {5, 33, 3}, {3, 4999, 8}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        uint32_t rows = shapes[c][0], k = shapes[c][1], tokens = shapes[c][2];
        size_t nw = (size_t)rows * k, nx = (size_t)tokens * k, ny = (size_t)tokens * rows;
        hk_rng rng = {500 + c};
        float *w = malloc(nw * 4), *x = malloc(nx * 4), *ref = malloc(ny * 4), *got = malloc(ny * 4),
              *one = malloc(ny * 4);
        hk_rng_fill(&rng, w, nw, -0.1f, 0.1f);
        hk_rng_fill(&rng, x, nx, -1.0f, 1.0f);
        for (uint32_t t = 0; t < tokens; t++) {
            for (uint32_t i = 0; i < k; i++)
                x[(size_t)t * k + i] *= ldexpf(1.0f, (int)(t % 7) - 3);
            hk_ref_gemv_f32(w, x + (size_t)t * k, ref + (size_t)t * rows, rows, k);
        }
        hk_poison(got, ny);
        hk_buffer *wb = hk_test_buffer(ctx, nw * 4, w), *xb = hk_test_buffer(ctx, nx * 4, x);
        hk_buffer *yb = hk_test_buffer(ctx, ny * 4, got), *ob = hk_test_buffer(ctx, ny * 4, got);
        char name[160];
        snprintf(name, sizeof name, "gemv_f32_tokens %ux%u x%u tok", rows, k, tokens);
        hk_status st = hk_gemv_f32_tokens(ctx, NULL, (hk_view){wb, 0}, (hk_view){xb, 0}, (hk_view){yb, 0}, rows, k,
                                          tokens);
        hk_stream *s = NULL;
        if (st == HK_OK)
            st = hk_stream_create(ctx, 0, &s);
        for (uint32_t t = 0; t < tokens && st == HK_OK; t++)
            st = hk_gemv_f32(ctx, s, (hk_view){wb, 0}, (hk_view){xb, (uint64_t)t * k * 4},
                             (hk_view){ob, (uint64_t)t * rows * 4}, rows, k);
        if (st == HK_OK)
            st = hk_stream_submit(s);
        hk_stream_destroy(s);
        if (st == HK_OK)
            st = hk_buffer_download(yb, 0, got, ny * 4);
        if (st == HK_OK)
            st = hk_buffer_download(ob, 0, one, ny * 4);
        if (st == HK_OK) {
            size_t differ = 0;
            for (size_t i = 0; i < ny; i++)
                differ += memcmp(&got[i], &one[i], 4) != 0;
            hk_check(differ == 0, name, "%zu of %zu outputs differ from hk_gemv_f32 on each token", differ, ny);
            snprintf(name + strlen(name), sizeof name - strlen(name), " vs the reference");
            hk_check_close(name, got, ref, ny, HK_GATE_F32);
        } else {
            hk_check(0, name, "%s", hk_last_error());
        }
        hk_buffer_destroy(wb);
        hk_buffer_destroy(xb);
        hk_buffer_destroy(yb);
        hk_buffer_destroy(ob);
        free(w);
        free(x);
        free(ref);
        free(got);
        free(one);
    }
}

/* A float buffer of n values: x, or poisoned where x is NULL. */
static hk_buffer *floats(const float *x, size_t n)
{
    float *p = NULL;
    if (!x) {
        p = malloc(n * 4);
        hk_poison(p, n);
    }
    hk_buffer *b = hk_test_buffer(ctx, n * 4, x ? x : p);
    free(p);
    return b;
}

/* hk_rmsnorm_q8_1 against hk_rmsnorm then hk_quantize_q8_1 on its y, bit for bit (include/hkernel.h):
 * every shape of its table row with y separate, in place and absent, both outputs compared with
 * memcmp. Where there are three rows or more, row 1 holds a NaN and row 2 an inf: every block of
 * row 1 must be d = NaN. No word of the fused outputs may still hold the poison, so two untouched
 * outputs cannot pass; the case row holds the values to the references. */
static void test_rmsnorm_q8_1(void)
{
    static const char *const modes[] = {"y", "in place", "no y"};
    const hk_case *kc = hk_case_find("rmsnorm_q8_1");
    for (uint32_t c = 0; c < kc->n_tests; c++) {
        uint32_t rows = kc->tests[c].d[0], n = kc->tests[c].d[1], seen = 0;
        for (uint32_t e = 0; e < c; e++) /* a shape listed again with another y: all three run below */
            seen |= kc->tests[e].d[0] == rows && kc->tests[e].d[1] == n;
        if (seen)
            continue;
        size_t count = (size_t)rows * n, blocks = count / 32;
        hk_rng rng = {900 + c};
        float *x = malloc(count * 4), *w = malloc((size_t)n * 4), *y1 = malloc(count * 4), *y2 = malloc(count * 4);
        hk_block_q8_1 *q1 = malloc(blocks * sizeof *q1), *q2 = malloc(blocks * sizeof *q2);
        hk_rng_fill(&rng, x, count, -3.0f, 3.0f);
        hk_rng_fill(&rng, w, n, 0.5f, 1.5f);
        if (rows >= 3) {
            x[n + 5] = NAN;
            x[2 * (size_t)n + n / 2] = INFINITY;
        }
        hk_buffer *wb = floats(w, n);
        for (int mode = 0; mode < 3; mode++) {
            /* the two calls, then the fused one, each on its own copy of x and poisoned outputs */
            hk_buffer *xa = floats(x, count), *ya = mode == 1 ? xa : floats(NULL, count);
            hk_buffer *qa = floats(NULL, blocks * 9), *xf = floats(x, count);
            hk_buffer *yf = mode == 1 ? xf : mode == 0 ? floats(NULL, count) : NULL, *qf = floats(NULL, blocks * 9);
            hk_stream *s = NULL;
            hk_status st = hk_stream_create(ctx, 0, &s);
            if (st == HK_OK)
                st = hk_rmsnorm(ctx, s, (hk_view){xa, 0}, (hk_view){wb, 0}, (hk_view){ya, 0}, rows, n, 1e-6f);
            if (st == HK_OK)
                st = hk_quantize_q8_1(ctx, s, (hk_view){ya, 0}, (hk_view){qa, 0}, (uint32_t)count);
            if (st == HK_OK)
                st = hk_rmsnorm_q8_1(ctx, s, (hk_view){xf, 0}, (hk_view){wb, 0}, (hk_view){yf, 0}, (hk_view){qf, 0},
                                     rows, n, 1e-6f);
            if (st == HK_OK)
                st = hk_stream_submit(s);
            hk_stream_destroy(s);
            if (st == HK_OK)
                st = hk_buffer_download(ya, 0, y1, count * 4);
            if (st == HK_OK && yf)
                st = hk_buffer_download(yf, 0, y2, count * 4);
            if (st == HK_OK)
                st = hk_buffer_download(qa, 0, q1, blocks * sizeof *q1);
            if (st == HK_OK)
                st = hk_buffer_download(qf, 0, q2, blocks * sizeof *q2);
            char name[160];
            snprintf(name, sizeof name, "rmsnorm_q8_1 %ux%u %s = hk_rmsnorm + hk_quantize_q8_1, bit for bit", rows, n,
                     modes[mode]);
            if (st != HK_OK) {
                hk_check(0, name, "%s", hk_last_error());
            } else {
                size_t y_differ = 0, q_differ = 0, poisoned = 0, nan_row_bad = 0;
                for (size_t i = 0; yf && i < count; i++) {
                    y_differ += memcmp(&y1[i], &y2[i], 4) != 0;
                    uint32_t u;
                    memcpy(&u, &y2[i], 4);
                    poisoned += u == HK_POISON_WORD;
                }
                for (size_t b = 0; b < blocks; b++) {
                    q_differ += memcmp(&q1[b], &q2[b], sizeof q2[b]) != 0;
                    uint32_t u[9];
                    memcpy(u, &q2[b], sizeof u);
                    for (int i = 0; i < 9; i++)
                        poisoned += u[i] == HK_POISON_WORD;
                    nan_row_bad += rows >= 3 && b / (n / 32) == 1 && q2[b].d != 0x7E00;
                }
                hk_check(y_differ == 0 && q_differ == 0 && poisoned == 0 && nan_row_bad == 0, name,
                         "y values differing %zu, yq blocks differing %zu of %zu, words left poisoned %zu, NaN row's "
                         "blocks without d = NaN %zu", y_differ, q_differ, blocks, poisoned, nan_row_bad);
            }
            hk_buffer_destroy(xa);
            if (ya != xa)
                hk_buffer_destroy(ya);
            hk_buffer_destroy(qa);
            hk_buffer_destroy(xf);
            if (yf && yf != xf)
                hk_buffer_destroy(yf);
            hk_buffer_destroy(qf);
        }
        hk_buffer_destroy(wb);
        free(x);
        free(w);
        free(y1);
        free(y2);
        free(q1);
        free(q2);
    }
}

/* The schedule hk_matvec_int8_glu served for rows x k of wtype (hk_schedule_last): nrows counts
 * the rows of both matrices. */
static void check_glu_schedule(hk_type wtype, uint32_t rows, uint32_t k, const char *want)
{
    uint64_t w_bytes = hk_ref_row_bytes((int)wtype, k) * rows;
    hk_buffer *w = hk_test_buffer(ctx, 2 * w_bytes, NULL), *x = hk_test_buffer(ctx, (uint64_t)k / 32 * 36, NULL);
    hk_test_out y = hk_test_out_create(ctx, rows);
    char name[160], sched[160] = "";
    snprintf(name, sizeof name, "matvec_int8_glu %s %ux%u serves %s", hk_type_name(wtype), rows, k, want);
    hk_status st = hk_matvec_int8_glu(ctx, NULL, wtype, (hk_view){w, 0}, (hk_view){w, w_bytes}, (hk_view){x, 0},
                                      hk_test_out_view(&y), rows, k, HK_GLU_SILU);
    if (st == HK_OK)
        st = hk_schedule_last(ctx, HK_TUNE_MATVEC_INT8, sched, sizeof sched);
    hk_check(st == HK_OK && strstr(sched, want), name, "\"%s\"%s", sched, st == HK_OK ? "" : hk_last_error());
    hk_test_out_destroy(&y);
    hk_buffer_destroy(w);
    hk_buffer_destroy(x);
}

/* The fused int8 matvecs under the one-token hooks: 4 items per step (W_up's slots among each
 * item's loads) and Q8_0's 16-bit weight loads, still the unfused calls' bits (each row's compare)
 * on the first shapes; and the GLU's schedule: hk_matvec_int8's rows per subgroup counting both
 * matrices' rows, 2 where hk_matvec_int8 takes 1 (below 4096 rows), 4 where it takes 4 (Q6_K from
 * 16384 rows), the hook's items. */
static void test_fused_hooks(void)
{
    setenv("HK_MATVEC_INT8_ITEMS", "4", 1);
    setenv("HK_MATVEC_Q8_0_LOAD_BITS", "16", 1);
    run_case(hk_case_find("matvec_int8_add"), 12, 0, " (4 items, 16-bit loads)");
    run_case(hk_case_find("matvec_int8_glu"), 12, 0, " (4 items, 16-bit loads)");
    if (selected(hk_case_find("matvec_int8_glu")))
        check_glu_schedule(HK_TYPE_Q8_0, 1, 64, "env nrows=2,items=4,load_bits=16");
    unsetenv("HK_MATVEC_INT8_ITEMS");
    unsetenv("HK_MATVEC_Q8_0_LOAD_BITS");
    if (selected(hk_case_find("matvec_int8_glu"))) {
        check_glu_schedule(HK_TYPE_Q4_K, 1, 256, "default nrows=2,items=1,load_bits=32");
        check_glu_schedule(HK_TYPE_Q6_K, 16385, 256, "default nrows=4,items=1,load_bits=32");
    }
}

/* y of hk_rmsnorm with each form of its sum of squares (HK_RMSNORM_STAGED 0 and 1: a block per
 * invocation read from x, or the row staged in shared memory), bit for bit: two codes of
 * norm.glsl's order, one row or a few, over one staged chunk and several, the last block short */
static void test_rmsnorm_forms(void)
{
    static const uint32_t shapes[][2] = {{1, 4096}, {2, 4196}, {1, 9000}, {65, 4200}, {3, 100}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        uint32_t rows = shapes[c][0], n = shapes[c][1];
        size_t count = (size_t)rows * n, differ = 0, poisoned = 0;
        hk_rng rng = {700 + c};
        float *x = malloc(count * 4), *w = malloc((size_t)n * 4), *y[2] = {malloc(count * 4), malloc(count * 4)};
        hk_rng_fill(&rng, x, count, -3.0f, 3.0f);
        hk_rng_fill(&rng, w, n, 0.5f, 1.5f);
        hk_buffer *xb = floats(x, count), *wb = floats(w, n);
        hk_status st = HK_OK;
        for (int form = 0; form < 2 && st == HK_OK; form++) {
            setenv("HK_RMSNORM_STAGED", form ? "1" : "0", 1);
            hk_buffer *yb = floats(NULL, count);
            st = hk_rmsnorm(ctx, NULL, (hk_view){xb, 0}, (hk_view){wb, 0}, (hk_view){yb, 0}, rows, n, 1e-6f);
            if (st == HK_OK)
                st = hk_buffer_download(yb, 0, y[form], count * 4);
            hk_buffer_destroy(yb);
        }
        unsetenv("HK_RMSNORM_STAGED");
        for (size_t i = 0; st == HK_OK && i < count; i++) {
            uint32_t u;
            memcpy(&u, &y[1][i], 4);
            differ += memcmp(&y[0][i], &y[1][i], 4) != 0;
            poisoned += u == HK_POISON_WORD;
        }
        char name[160];
        snprintf(name, sizeof name, "rmsnorm %ux%u staged = unstaged, bit for bit", rows, n);
        hk_check(st == HK_OK && differ == 0 && poisoned == 0, name, "%s%zu values differ, %zu left poisoned",
                 st == HK_OK ? "" : hk_last_error(), differ, poisoned);
        hk_buffer_destroy(xb);
        hk_buffer_destroy(wb);
        free(x);
        free(w);
        free(y[0]);
        free(y[1]);
    }
    /* a malformed value: refused by name, y not written */
    float x[64], w[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = w[i] = 1.0f;
    hk_buffer *xb = floats(x, 64), *wb = floats(w, 64), *yb = floats(NULL, 64);
    setenv("HK_RMSNORM_STAGED", "2", 1);
    hk_check_status("rmsnorm: malformed HK_RMSNORM_STAGED",
                    hk_rmsnorm(ctx, NULL, (hk_view){xb, 0}, (hk_view){wb, 0}, (hk_view){yb, 0}, 1, 64, 1e-6f),
                    HK_ERROR_INVALID_ARGUMENT, "HK_RMSNORM_STAGED=\"2\" is not an integer in 0..1");
    unsetenv("HK_RMSNORM_STAGED");
    uint32_t u = 0;
    if (hk_buffer_download(yb, 0, y, sizeof y) == HK_OK)
        memcpy(&u, &y[0], 4);
    hk_check(u == HK_POISON_WORD, "rmsnorm: a refused call writes nothing", "y[0] = 0x%08x", u);
    hk_buffer_destroy(xb);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(yb);
}

/* hk_rmsnorm and hk_rmsnorm_q8_1 with the row staged in shared memory (HK_RMSNORM_STAGED=1): the
 * case rows against the references, the fused row against the two calls, and the f32x matvec's own
 * normalisation against them, bit for bit, past one chunk */
static void test_rmsnorm_staged(void)
{
    if (selected(hk_case_find("rmsnorm")))
        test_rmsnorm_forms();
    setenv("HK_RMSNORM_STAGED", "1", 1);
    run_case(hk_case_find("rmsnorm"), UINT32_MAX, 0, " (staged)");
    run_case(hk_case_find("rmsnorm_q8_1"), UINT32_MAX, 0, " (staged)");
    run_case(hk_case_find("matvec_int8_f32x"), UINT32_MAX, 0, " (staged)");
    if (selected(hk_case_find("rmsnorm_q8_1")))
        test_rmsnorm_q8_1();
    unsetenv("HK_RMSNORM_STAGED");
}

/* hk_matvec_int8_f32x on its narrowest workgroups, few of them: a subgroup loops over several
 * row groups, each workgroup having quantized x itself; the same bits as the unfused calls */
static void test_f32x_narrow(void)
{
    setenv("HK_MATVEC_F32X_SUBGROUPS", "2", 1);
    setenv("HK_MATVEC_F32X_GROUPS", "64", 1);
    run_case(hk_case_find("matvec_int8_f32x"), UINT32_MAX, 0, " (64 narrow workgroups)");
    unsetenv("HK_MATVEC_F32X_SUBGROUPS");
    unsetenv("HK_MATVEC_F32X_GROUPS");
}

int main(int argc, char **argv)
{
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--small"))
            small_only = 1;
        else if (!strcmp(argv[a], "--only") && a + 1 < argc)
            only = argv[++a];
        else if (!strcmp(argv[a], "--part") && a + 1 < argc &&
                 sscanf(argv[++a], "%u/%u", &part_index, &part_count) == 2 && part_index >= 1 &&
                 part_index <= part_count)
            part_index--;
        else {
            fprintf(stderr, "usage: test_kernels [--small] [--only CASE,CASE...] [--part I/N]\n");
            return 2;
        }
    }
    char name[64];
    for (const char *p = only; next_name(&p, name);) /* a name that is no case would pass with nothing run */
        if (!hk_case_find(name)) {
            fprintf(stderr, "test_kernels: --only: no case named \"%s\"\n", name);
            return 2;
        }
    ctx = hk_test_context();
    for (size_t c = 0; c < hk_case_count; c++)
        run_case(hk_cases[c], UINT32_MAX, 1, "");
    if (selected(hk_case_find("matvec")))
        test_stream_chain();
    if (selected(hk_case_find("gemv_f32_tokens")))
        test_gemv_tokens();
    if (selected(hk_case_find("rmsnorm_q8_1")))
        test_rmsnorm_q8_1();
    test_fused_hooks();
    test_rmsnorm_staged();
    test_f32x_narrow();

    /* the portable twins, on contexts that may not use the accelerated paths: the cases whose arm
     * the feature picks, on their first shapes */
    hk_context *full = ctx;
    static const struct {
        uint32_t feature;
        const char *label;
        const char *cases[8];
    } twins[] = {
        {HK_FEATURE_INTEGER_DOT,
         " (scalar dot)",
         {"matvec_int8", "matvec_int8_tokens", "matvec_int8_add", "matvec_int8_glu", "moe_matvec_int8", "mmq", "mmq_id"}},
        {HK_FEATURE_SUBGROUP_SIZE_CONTROL, " (portable)", {"matvec"}},
        {HK_FEATURE_COOPMAT_KHR, " (no coopmat)", {"mmq", "mmq_id", "gemm_f16", "sdpa"}},
    };
    hk_caps full_caps;
    hk_context_caps(full, &full_caps);
    for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++) {
        if (!(full_caps.features & twins[i].feature)) {
            /* the default context already ran these cases on the arms the twin would pick */
            printf("-- without feature 0x%x: not on this context, so the runs above were the twin's\n",
                   twins[i].feature);
            continue;
        }
        ctx = hk_test_context_without(twins[i].feature);
        if (!ctx) {
            ctx = full;
            continue;
        }
        printf("-- without feature 0x%x\n", twins[i].feature);
        for (int c = 0; c < 8 && twins[i].cases[c]; c++) {
            /* --small: test_mmq's and test_tokens' GPU-assisted runs hold these twins already
             * (lavapipe builds each pipeline again per context, a minute or more instrumented) */
            const char *name = twins[i].cases[c];
            if (small_only && (!strcmp(name, "mmq") || !strcmp(name, "mmq_id") || !strcmp(name, "matvec_int8_tokens")))
                continue;
            run_case(hk_case_find(name), 12, 0, twins[i].label);
        }
        if (twins[i].feature == HK_FEATURE_SUBGROUP_SIZE_CONTROL) {
            static const hk_type types[] = {HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q5_K, HK_TYPE_Q6_K};
            for (int t = 0; t < 4; t++) {
                hk_buffer *any = hk_test_buffer(ctx, 1024, NULL), *out = hk_test_buffer(ctx, 16, NULL);
                hk_check_status("int8 matvec needs subgroup size control",
                                hk_matvec_int8(ctx, NULL, types[t], (hk_view){any, 0}, (hk_view){any, 512},
                                               (hk_view){out, 0}, 1, hk_type_block_values(types[t])),
                                HK_ERROR_UNSUPPORTED, "cannot require full subgroups");
                hk_buffer_destroy(any);
                hk_buffer_destroy(out);
            }
        }
        uint32_t messages = hk_context_validation_messages(ctx);
        hk_check(messages == 0, "no validation messages on the twin context", "%u seen", messages);
        hk_context_destroy(ctx);
        ctx = full;
    }
    return hk_test_finish(ctx);
}
