/* hk-check: parity and bandwidth of every kernel on one device.
 *
 * For each kernel and shape: run it once and compare against the C reference (the gate the tests
 * use), then time it cold — weights rotated over enough copies that their footprint is well past
 * the GPU's last-level cache, many dispatches recorded in one stream, GPU timestamps — and report
 * GB/s on the real bytes moved beside the device's own copy bandwidth measured in the same run.
 * Exits 1 if any row fails its gate.
 *
 * usage: hk-check [--device N|NAME] [--quick|--full] [--csv FILE] [--only KERNEL]
 *   --quick  small shapes only (the default on CPU devices such as lavapipe)
 *   --full   model shapes (the default on GPUs)
 *   --only   only the rows of kernels whose name contains KERNEL (matvec, gemv, rmsnorm, ...)
 */
#include "hk_ref.h"
#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void report(bench *b, const char *kernel, const char *shape, double err, double gate, timing t, double bytes)
{
    int ok = err < gate;
    b->failures += !ok;
    double gbs = bytes / (t.stream_ms * 1e-3) / 1e9, copy = copy_gbs(b);
    printf("%-17s %-14s %9.2e %7.0e %-4s %10.4f %10.4f %9.1f %6.1f%% %8.0f\n", kernel, shape, err, gate,
           ok ? "ok" : "FAIL", t.stream_ms, t.single_ms, gbs, 100.0 * gbs / copy, copy);
    if (b->csv)
        fprintf(b->csv, "%s,%s,%s,%.3e,%.0e,%d,%.6f,%.6f,%.2f,%.4f,%.1f\n", b->caps.device_name, kernel, shape, err,
                gate, ok, t.stream_ms, t.single_ms, gbs, gbs / copy, copy);
    fflush(stdout);
}

/* ---- quantized matvec ---- */

typedef struct matvec_case {
    hk_type type;
    uint32_t rows, k;
    hk_buffer *w; /* `copies` copies of the weights back to back */
    uint64_t w_bytes;
    hk_buffer *x, *xq, *y;
    int int8; /* hk_matvec_int8 on xq rather than hk_matvec on x */
} matvec_case;

static hk_status record_matvec(bench *b, hk_stream *s, void *user, uint32_t copy)
{
    matvec_case *c = user;
    hk_view w = {c->w, copy * c->w_bytes}, y = {c->y, 0};
    if (c->int8)
        return hk_matvec_int8(b->ctx, s, c->type, w, (hk_view){c->xq, 0}, y, c->rows, c->k);
    return hk_matvec(b->ctx, s, c->type, w, (hk_view){c->x, 0}, y, c->rows, c->k);
}

/* Runs the case once into a poisoned y and returns its scale_rel against ref. */
static double run_once(bench *b, matvec_case *c, uint32_t copy, float *y, const float *ref)
{
    hk_buffer_fill(c->y, 0, c->rows * sizeof(float), 0x7fc0deadu);
    if (record_matvec(b, NULL, c, copy) != HK_OK || hk_buffer_download(c->y, 0, y, c->rows * sizeof(float)) != HK_OK) {
        fprintf(stderr, "hk-check: matvec %s: %s\n", hk_type_name(c->type), hk_last_error());
        return INFINITY;
    }
    return hk_scale_rel(y, ref, c->rows);
}

static void check_matvec(bench *b, hk_type type, uint32_t rows, uint32_t k)
{
    if (!wanted(b, "matvec"))
        return;
    matvec_case c = {.type = type, .rows = rows, .k = k};
    c.w_bytes = hk_ref_row_bytes((int)type, k) * rows;
    hk_rng rng = {0x9E3779B97F4A7C15ull ^ (rows * 31u + k)};
    uint8_t *w = malloc(c.w_bytes);
    float *x = malloc(k * sizeof(float)), *y = malloc(rows * sizeof(float)), *ref = malloc(rows * sizeof(float));
    hk_block_q8_1 *xq = malloc(k / 32 * sizeof *xq);
    if (!w || !x || !y || !ref || !xq) {
        fprintf(stderr, "hk-check: out of host memory\n");
        exit(2);
    }
    hk_random_blocks(&rng, (int)type, w, c.w_bytes / hk_type_block_bytes(type), 0.02f);
    hk_rng_fill(&rng, x, k, -1.0f, 1.0f);
    hk_ref_matvec((int)type, w, x, ref, rows, k);
    uint32_t copies = copies_for(b, c.w_bytes);
    c.w = make_copies(b, w, c.w_bytes, copies);
    c.x = make_buffer(b, k * sizeof(float), x);
    c.y = make_buffer(b, rows * sizeof(float), NULL);
    char name[32], shape[32];
    snprintf(shape, sizeof shape, "%ux%u", rows, k);
    /* the last copy: replication is checked too */
    double err = run_once(b, &c, copies - 1, y, ref);
    timing t = time_kernel(b, record_matvec, &c, copies);
    snprintf(name, sizeof name, "matvec %s", hk_type_name(type));
    report(b, name, shape, err, HK_GATE_F32, t, (double)c.w_bytes + 4.0 * k + 4.0 * rows);

    /* int8: x quantized on the device, held to the int8 reference on the same Q8_1 blocks */
    c.xq = make_buffer(b, k / 32 * 36, NULL);
    c.int8 = 1;
    if (hk_quantize_q8_1(b->ctx, NULL, (hk_view){c.x, 0}, (hk_view){c.xq, 0}, k) != HK_OK ||
        hk_buffer_download(c.xq, 0, xq, k / 32 * 36) != HK_OK)
        die(b, "quantize");
    hk_ref_matvec_q8_1((int)type, w, xq, ref, rows, k);
    err = run_once(b, &c, copies - 1, y, ref);
    t = time_kernel(b, record_matvec, &c, copies);
    snprintf(name, sizeof name, "matvec_int8 %s", hk_type_name(type));
    report(b, name, shape, err, HK_GATE_F32, t, (double)c.w_bytes + 36.0 * k / 32 + 4.0 * rows);
    hk_buffer_destroy(c.xq);
    free(xq);
    hk_buffer_destroy(c.w);
    hk_buffer_destroy(c.x);
    hk_buffer_destroy(c.y);
    free(w);
    free(x);
    free(y);
    free(ref);
}

/* ---- f32 kernels: gemv, rmsnorm, quantize ---- */

typedef struct f32_case {
    int kind; /* 0 gemv, 1 rmsnorm, 2 quantize */
    uint32_t rows, n;
    hk_buffer *a, *v, *out; /* gemv: w x y; rmsnorm: x weight y; quantize: x - y */
    uint64_t a_bytes;
} f32_case;

static hk_status record_f32(bench *b, hk_stream *s, void *user, uint32_t copy)
{
    f32_case *c = user;
    hk_view a = {c->a, copy * c->a_bytes}, v = {c->v, 0}, out = {c->out, 0};
    switch (c->kind) {
    case 0: return hk_gemv_f32(b->ctx, s, a, v, out, c->rows, c->n);
    case 1: return hk_rmsnorm(b->ctx, s, a, v, out, c->rows, c->n, 1e-6f);
    default: return hk_quantize_q8_1(b->ctx, s, a, out, c->n);
    }
}

static void check_f32(bench *b, int kind, uint32_t rows, uint32_t n)
{
    static const char *const names[] = {"gemv f32", "rmsnorm", "quantize q8_1"};
    if (!wanted(b, names[kind]))
        return;
    f32_case c = {.kind = kind, .rows = kind == 2 ? 1 : rows, .n = n};
    size_t count = (size_t)c.rows * n, out_count = kind == 0 ? c.rows : kind == 1 ? count : n / 32 * 9;
    c.a_bytes = count * sizeof(float);
    hk_rng rng = {12345u + (uint64_t)kind};
    float *a = malloc(c.a_bytes), *v = malloc(n * sizeof(float)), *got = malloc(out_count * 4 + 64),
          *ref = malloc(count * sizeof(float) + 64);
    hk_rng_fill(&rng, a, count, -1.0f, 1.0f);
    hk_rng_fill(&rng, v, n, 0.5f, 1.5f);
    double gate = HK_GATE_F32;
    size_t compare = c.rows;
    if (kind == 0) {
        hk_ref_gemv_f32(a, v, ref, c.rows, n);
    } else if (kind == 1) {
        hk_ref_rmsnorm(a, v, ref, c.rows, n, 1e-6f);
        compare = count;
    } else { /* compare the dequantized GPU blocks with the input */
        memcpy(ref, a, n * sizeof(float));
        compare = n;
        gate = HK_GATE_INT8;
    }
    uint32_t copies = copies_for(b, c.a_bytes);
    c.a = make_copies(b, a, c.a_bytes, copies);
    c.v = make_buffer(b, n * sizeof(float), v);
    c.out = make_buffer(b, out_count * 4, NULL);
    hk_buffer_fill(c.out, 0, out_count * 4, 0x7fc0deadu);
    double err = INFINITY;
    if (record_f32(b, NULL, &c, copies - 1) == HK_OK && hk_buffer_download(c.out, 0, got, out_count * 4) == HK_OK) {
        if (kind == 2) {
            float *deq = malloc(n * sizeof(float));
            hk_dequant_row_q8_1((const hk_block_q8_1 *)got, deq, n);
            err = hk_scale_rel(deq, ref, compare);
            free(deq);
        } else {
            err = hk_scale_rel(got, ref, compare);
        }
    } else {
        fprintf(stderr, "hk-check: %s: %s\n", names[kind], hk_last_error());
    }
    timing t = time_kernel(b, record_f32, &c, copies);
    char shape[32];
    snprintf(shape, sizeof shape, "%ux%u", c.rows, n);
    double bytes = kind == 0 ? c.a_bytes + 4.0 * n + 4.0 * c.rows
                 : kind == 1 ? 2.0 * c.a_bytes + 4.0 * n
                             : c.a_bytes + 36.0 * (n / 32);
    report(b, names[kind], shape, err, gate, t, bytes);
    hk_buffer_destroy(c.a);
    hk_buffer_destroy(c.v);
    hk_buffer_destroy(c.out);
    free(a);
    free(v);
    free(got);
    free(ref);
}

int main(int argc, char **argv)
{
    bench_options o = bench_options_default();
    for (int i = 1; i < argc; i++)
        if (!bench_option(&o, argc, argv, &i)) {
            fprintf(stderr, "usage: hk-check [--device N|NAME] [--quick|--full] [--csv FILE] [--only KERNEL]\n");
            return 2;
        }
    bench b = {0};
    int quick = bench_open(&b, "hk-check", &o,
                           "device,kernel,shape,scale_rel,gate,ok,ms_stream,ms_single,gbs,ratio_to_copy,copy_gbs");
    printf("%-17s %-14s %9s %7s %-4s %10s %10s %9s %7s %8s\n", "kernel", "shape", "scale_rel", "gate", "ok", "ms/disp",
           "ms single", "GB/s", "of copy", "copy");

    static const hk_type types[] = {HK_TYPE_Q4_K, HK_TYPE_Q6_K, HK_TYPE_Q8_0};
    static const uint32_t quick_shapes[][2] = {{2048, 2048}, {512, 6144}};
    static const uint32_t full_shapes[][2] = {{2048, 2048},  {6144, 2048},   {2048, 6144},
                                              {4096, 4096},  {14336, 4096},  {4096, 14336},
                                              {151936, 2048}};
    const uint32_t(*shapes)[2] = quick ? quick_shapes : full_shapes;
    size_t n_shapes = quick ? sizeof quick_shapes / sizeof quick_shapes[0] : sizeof full_shapes / sizeof full_shapes[0];
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < n_shapes; i++)
            check_matvec(&b, types[t], shapes[i][0], shapes[i][1]);
    check_f32(&b, 0, 128, 2048); /* MoE router gate, Qwen3-30B-A3B */
    check_f32(&b, 0, quick ? 1024 : 151936, 2048);
    check_f32(&b, 1, 1, 2048);
    check_f32(&b, 1, quick ? 64 : 512, 4096);
    check_f32(&b, 2, 1, 2048);
    check_f32(&b, 2, 1, quick ? 16384 : 1u << 20);
    printf("\n%s: %d row(s) failed their gate\n", b.failures ? "FAIL" : "OK", b.failures);
    int failures = b.failures;
    bench_close(&b);
    return failures ? 1 : 0;
}
