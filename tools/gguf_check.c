/* hk-check --gguf MODEL.gguf: "does my model run right, and how fast, on my GPU?"
 *
 * The file is memory-mapped and parsed by tools/gguf_reader.c (GGUF v2 and v3). Every tensor of a
 * type a kernel takes is uploaded exactly as stored and multiplied by seeded activations:
 *  - Q8_0, Q4_K, Q5_K, Q6_K: hk_matvec (f32 x) against hk_ref_matvec at HK_GATE_F32, and
 *    hk_matvec_int8 (x as Q8_1 blocks, quantized on the host) against hk_ref_matvec_q8_1 at
 *    HK_GATE_EXACT: rows = ne[1] * ne[2] * ne[3] (an expert bank is one matrix), k = ne[0];
 *  - F16 of two or more rows: hk_matvec (f32 x) against hk_ref_matvec at HK_GATE_F32, the same
 *    rows and k (no int8 kernel takes F16);
 *  - F32 of two or more rows: hk_gemv_f32 against hk_ref_gemv_f32 at HK_GATE_F32;
 * every other tensor is listed as skipped, with its type and why. The references run on up to 256
 * rows spread over the tensor (first and last included); every output row is checked written, and
 * finite where the reference is (where a weight's inf or NaN makes the reference inf or NaN, the
 * output must not be finite either; the measure covers the finite rows). Each path is then timed
 * as hk-check times kernels (tools/measure.h: the weights rotated over copies past the last-level
 * cache, many dispatches per submit, GPU timestamps), and reported as GB/s on the bytes it must
 * move, beside the copy bandwidth measured right after the tensor.
 * A tensor that one view cannot hold (caps.max_storage_buffer_range) or one call cannot take
 * (HK_MATVEC_MAX_*) runs in row slices, each checked and timed; the tensor's time is their sum.
 */
#define _POSIX_C_SOURCE 200809L
#include "gguf_check.h"

#include "gguf_reader.h"
#include "hk_ref.h"
#include "measure.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define REF_ROWS 256        /* rows compared with the C reference, spread over the tensor */
#define POISON_WORD 0x7fc0deadu /* a NaN with a payload: an output row still holding it was never written */
#define VIEW_STRIDE_ALIGN 256u

typedef struct options {
    bench_options common;
    const char *path;
    const char *match; /* only tensors whose name contains it */
    int no_time;       /* parity only */
    uint64_t slice_bytes; /* 0: as large as the device binds */
} options;


static void usage(FILE *f)
{
    fprintf(f, "usage: hk-check --gguf MODEL.gguf [options]\n"
               "Multiplies every tensor of a GGUF model (v2 or v3) that a kernel takes, as stored in the file, by\n"
               "seeded activations: hk_matvec and hk_matvec_int8 for q8_0, q4_k, q5_k and q6_k, hk_matvec for f16\n"
               "and hk_gemv_f32 for f32 matrices; compares with the C references at the test gates and times each\n"
               "path cold. Tensors of other types are listed as skipped. Exit 0: all within their gates; 1: some\n"
               "failed; 2: error.\n"
               "Shapes print rows x k as hk-check tune and --shapes take them (GGUF lists k first): an expert\n"
               "bank experts x rows x k.\n"
               "  --gguf FILE      the model\n"
               "  --match TEXT     only tensors whose name contains TEXT\n"
               "  --no-time        parity only\n"
               "  --slice-bytes N  weight slices of at most N bytes (default: what one view can bind, the\n"
               "                   device's maxStorageBufferRange; every tensor larger runs in row slices)\n");
    bench_options_help(f);
}

static int parse(options *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->common = bench_options_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-time")) {
            o->no_time = 1;
            continue;
        }
        if (!strcmp(a, "--slice-bytes")) {
            char *end = NULL;
            unsigned long long v = i + 1 < argc ? strtoull(argv[i + 1], &end, 10) : 0;
            if (!end || *end || v == 0) {
                fprintf(stderr, "hk-check: --slice-bytes needs a positive number of bytes\n");
                return 2;
            }
            o->slice_bytes = v;
            i++;
            continue;
        }
        if (!strcmp(a, "--gguf") || !strcmp(a, "--match")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "hk-check: %s needs a value\n", a);
                usage(stderr);
                return 2;
            }
            *(!strcmp(a, "--gguf") ? &o->path : &o->match) = argv[++i];
            continue;
        }
        int taken = bench_option(&o->common, argc, argv, &i);
        if (taken == 1 && !o->common.only)
            continue;
        if (taken == 0)
            fprintf(stderr, "hk-check: unknown option %s\n", a);
        else if (o->common.only)
            fprintf(stderr, "hk-check: --only picks kernels; with --gguf, --match picks tensors\n");
        usage(stderr);
        return 2;
    }
    if (!o->path) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* ---- one tensor ---- */

enum { PATH_F32, PATH_INT8, PATH_GEMV };

typedef struct tensor_job {
    bench *b;
    const gguf_file *f;
    const gguf_tensor *t;
    hk_type type;
    int gemv;           /* f32 weights: hk_gemv_f32 */
    int int8;           /* the type has an int8 kernel (hk_matvec_int8): the quantized weights */
    uint32_t k;
    uint64_t rows, row_bytes;
    float *x;           /* [k] */
    hk_block_q8_1 *xq;  /* [k/32] */
    hk_buffer *xbuf, *xqbuf, *ybuf, *wbuf;
    uint64_t w_stride;  /* bytes from one weight copy to the next */
    uint32_t slice_rows;
    int path;           /* what time_kernel records */
    uint64_t slice_bytes; /* --slice-bytes, 0: none */
} tensor_job;

typedef struct tensor_result {
    double err[2];      /* f32 (or gemv), int8; -1: not run */
    double ms[2];
    uint32_t slices;
    int failed;
    char why[256];
} tensor_result;

static hk_status record_op(bench *b, hk_stream *s, void *user, uint32_t copy, uint32_t op)
{
    (void)op;
    tensor_job *j = user;
    hk_view w = {j->wbuf, copy * j->w_stride}, y = {j->ybuf, 0};
    if (j->path == PATH_GEMV)
        return hk_gemv_f32(b->ctx, s, w, (hk_view){j->xbuf, 0}, y, j->slice_rows, j->k);
    if (j->path == PATH_INT8)
        return hk_matvec_int8(b->ctx, s, j->type, w, (hk_view){j->xqbuf, 0}, y, j->slice_rows, j->k);
    return hk_matvec(b->ctx, s, j->type, w, (hk_view){j->xbuf, 0}, y, j->slice_rows, j->k);
}

/* Rows of the slice compared with the reference: all of a small slice, else REF_ROWS spread
 * evenly, the first and the last included. */
static uint32_t sample_rows(uint32_t rows, uint32_t *out)
{
    uint32_t n = rows < REF_ROWS ? rows : REF_ROWS;
    for (uint32_t i = 0; i < n; i++)
        out[i] = n == 1 ? 0 : (uint32_t)((uint64_t)i * (rows - 1) / (n - 1));
    return n;
}

/* Runs one path on the slice now (poisoned y), checks every row written, the sampled rows finite
 * where the reference is and not where it is not (IEEE from an inf or NaN weight), and the finite
 * ones against the reference. Returns the scale-relative error (INFINITY on any failure, with
 * why). */
static double check_path(tensor_job *j, const uint8_t *w_host, int path, char *why, size_t why_size)
{
    bench *b = j->b;
    uint32_t rows = j->slice_rows;
    float *y = malloc((size_t)rows * 4);
    uint32_t *pick = malloc(REF_ROWS * sizeof *pick);
    float *got = malloc(REF_ROWS * 4), *ref = malloc(REF_ROWS * 4);
    double err = INFINITY;
    if (!y || !pick || !got || !ref) {
        snprintf(why, why_size, "out of host memory");
        goto done;
    }
    for (uint32_t r = 0; r < rows; r++)
        memcpy(&y[r], &(uint32_t){POISON_WORD}, 4);
    j->path = path;
    hk_status st = hk_buffer_upload(j->ybuf, 0, y, (uint64_t)rows * 4);
    if (st == HK_OK)
        st = record_op(b, NULL, j, 0, 0);
    if (st == HK_OK)
        st = hk_buffer_download(j->ybuf, 0, y, (uint64_t)rows * 4);
    if (st != HK_OK) {
        snprintf(why, why_size, "%s", hk_last_error());
        goto done;
    }
    uint32_t unwritten = 0;
    for (uint32_t r = 0; r < rows; r++) {
        uint32_t bits;
        memcpy(&bits, &y[r], 4);
        unwritten += bits == POISON_WORD;
    }
    if (unwritten) {
        snprintf(why, why_size, "%u of %u rows never written", unwritten, rows);
        goto done;
    }
    uint32_t n = sample_rows(rows, pick), finite = 0, unmatched = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *row = w_host + (uint64_t)pick[i] * j->row_bytes;
        if (path == PATH_GEMV) {
            hk_ref_gemv_f32((const float *)(const void *)row, j->x, &ref[finite], 1, j->k);
        } else if (path == PATH_INT8) {
            hk_ref_matvec_q8_1((int)j->type, row, j->xq, &ref[finite], 1, j->k);
        } else {
            hk_ref_matvec((int)j->type, row, j->x, &ref[finite], 1, j->k);
        }
        if (isfinite(ref[finite]))
            got[finite++] = y[pick[i]];
        else
            unmatched += isfinite(y[pick[i]]) != 0;
    }
    if (unmatched) {
        snprintf(why, why_size, "%u of %u sampled rows finite where the reference is inf or NaN", unmatched, n);
        goto done;
    }
    err = hk_scale_rel(got, ref, finite);
    if (!(err < INFINITY))
        snprintf(why, why_size, "non-finite outputs where the reference is finite");
done:
    free(y);
    free(pick);
    free(got);
    free(ref);
    return err;
}

/* The largest row count one call and one view can take, and a buffer can hold with its copies. */
static uint32_t max_slice_rows(const tensor_job *j)
{
    const hk_caps *caps = &j->b->caps;
    uint64_t range = caps->max_storage_buffer_range - VIEW_STRIDE_ALIGN; /* room for the offset's remainder */
    if (j->slice_bytes && j->slice_bytes < range)
        range = j->slice_bytes < j->row_bytes ? j->row_bytes : j->slice_bytes;
    uint64_t rows = range / j->row_bytes;
    if (rows > HK_MATVEC_MAX_ROWS && !j->gemv)
        rows = HK_MATVEC_MAX_ROWS;
    if (!j->gemv) {
        uint64_t by_blocks = (uint64_t)(HK_MATVEC_MAX_K_ROW_BLOCKS / j->k) * 32768u;
        rows = rows < by_blocks ? rows : by_blocks;
    }
    if (rows > UINT32_MAX)
        rows = UINT32_MAX;
    return (uint32_t)rows;
}

static void check_tensor(bench *b, const gguf_file *f, const gguf_tensor *t, hk_type type, int gemv, int int8,
                         const options *o, const float *x, const hk_block_q8_1 *xq, tensor_result *res)
{
    int no_time = o->no_time;
    tensor_job j = {.b = b, .f = f, .t = t, .type = type, .gemv = gemv, .int8 = int8, .k = (uint32_t)t->ne[0],
                    .slice_bytes = o->slice_bytes};
    j.rows = gguf_tensor_values(t) / t->ne[0];
    j.row_bytes = t->bytes / j.rows;
    j.x = (float *)x;
    j.xq = (hk_block_q8_1 *)xq;
    res->err[0] = res->err[1] = -1;
    res->ms[0] = res->ms[1] = 0;
    uint32_t per_slice = max_slice_rows(&j);
    if (per_slice == 0) {
        snprintf(res->why, sizeof res->why, "one row (%llu bytes) is more than the device binds",
                 (unsigned long long)j.row_bytes);
        res->failed = 1;
        return;
    }
    uint64_t max_slice_bytes = (uint64_t)(per_slice < j.rows ? per_slice : j.rows) * j.row_bytes;
    j.w_stride = (max_slice_bytes + VIEW_STRIDE_ALIGN - 1) / VIEW_STRIDE_ALIGN * VIEW_STRIDE_ALIGN;
    uint32_t copies = no_time ? 1 : copies_for(b, j.w_stride);
    /* the copies replicate the slice for cold timing; fewer where the device will not hold them */
    while (hk_buffer_create(b->ctx, j.w_stride * copies, &j.wbuf) != HK_OK) {
        if (copies == 1) {
            snprintf(res->why, sizeof res->why, "%s", hk_last_error());
            res->failed = 1;
            return;
        }
        copies /= 2;
    }
    uint32_t slice_cap = per_slice < j.rows ? per_slice : (uint32_t)j.rows;
    hk_status st = hk_buffer_create(b->ctx, (uint64_t)j.k * 4, &j.xbuf);
    if (st == HK_OK)
        st = hk_buffer_upload(j.xbuf, 0, x, (uint64_t)j.k * 4);
    if (st == HK_OK && int8)
        st = hk_buffer_create(b->ctx, (uint64_t)j.k / 32 * sizeof(hk_block_q8_1), &j.xqbuf);
    if (st == HK_OK && int8)
        st = hk_buffer_upload(j.xqbuf, 0, xq, (uint64_t)j.k / 32 * sizeof(hk_block_q8_1));
    if (st == HK_OK)
        st = hk_buffer_create(b->ctx, (uint64_t)slice_cap * 4, &j.ybuf);
    if (st != HK_OK) {
        snprintf(res->why, sizeof res->why, "%s", hk_last_error());
        res->failed = 1;
        goto done;
    }
    const uint8_t *w_file = gguf_tensor_data(f, t);
    int paths = int8 ? 2 : 1;
    for (uint64_t row0 = 0; row0 < j.rows && !res->failed; row0 += slice_cap) {
        j.slice_rows = (uint32_t)(j.rows - row0 < slice_cap ? j.rows - row0 : slice_cap);
        res->slices++;
        const uint8_t *w_host = w_file + row0 * j.row_bytes;
        uint64_t bytes = (uint64_t)j.slice_rows * j.row_bytes;
        /* as stored in the file; the copies by the GPU */
        st = hk_buffer_upload(j.wbuf, 0, w_host, bytes);
        for (uint32_t c = 1; c < copies && st == HK_OK; c++)
            st = hk_copy(b->ctx, NULL, (hk_view){j.wbuf, 0}, (hk_view){j.wbuf, c * j.w_stride}, bytes);
        if (st != HK_OK) {
            snprintf(res->why, sizeof res->why, "%s", hk_last_error());
            res->failed = 1;
            break;
        }
        for (int p = 0; p < paths; p++) {
            int path = gemv ? PATH_GEMV : p == 0 ? PATH_F32 : PATH_INT8;
            double gate = path == PATH_INT8 ? HK_GATE_EXACT : HK_GATE_F32;
            char why[256] = "";
            double err = check_path(&j, w_host, path, why, sizeof why);
            if (err > res->err[p])
                res->err[p] = err;
            if (!(err < gate)) {
                res->failed = 1;
                if (!res->why[0])
                    snprintf(res->why, sizeof res->why, "%s at rows %llu..%llu: %s", path == PATH_INT8 ? "int8" : "f32",
                             (unsigned long long)row0, (unsigned long long)(row0 + j.slice_rows - 1),
                             why[0] ? why : "above the gate");
            }
            if (!no_time) {
                j.path = path;
                timing tm = time_kernel(b, record_op, &j, copies);
                res->ms[p] += tm.stream_ms;
            }
        }
    }
done:
    hk_buffer_destroy(j.wbuf);
    hk_buffer_destroy(j.xbuf);
    hk_buffer_destroy(j.xqbuf);
    hk_buffer_destroy(j.ybuf);
}

/* Why a tensor is not checked (NULL: it is), and which paths take it: hk_gemv_f32 (gemv), or
 * hk_matvec and, where int8, hk_matvec_int8. */
static const char *classify(const gguf_tensor *t, hk_type *type, int *gemv, int *int8)
{
    *gemv = *int8 = 0;
    if (gguf_tensor_values(t) == 0)
        return "empty";
    if (hk_type_from_ggml(t->ggml_type, type) != HK_OK)
        return "no kernel takes this type";
    uint64_t rows = gguf_tensor_values(t) / (t->ne[0] ? t->ne[0] : 1);
    if ((*type == HK_TYPE_F32 || *type == HK_TYPE_F16) && rows < 2)
        return "a vector (norm or bias): nothing to multiply";
    if (*type == HK_TYPE_F32) {
        if (t->ne[0] > HK_GEMV_MAX_K)
            return "k past HK_GEMV_MAX_K";
        *gemv = 1;
        return NULL;
    }
    if (*type != HK_TYPE_Q8_0 && *type != HK_TYPE_Q4_K && *type != HK_TYPE_Q5_K && *type != HK_TYPE_Q6_K &&
        *type != HK_TYPE_F16)
        return "no kernel multiplies weights of this type";
    *int8 = *type != HK_TYPE_F16;
    if (t->ne[0] > HK_MATVEC_MAX_K)
        return "k past HK_MATVEC_MAX_K (98304)";
    return NULL;
}

/* The shape rows x k, as hk-check tune and --shapes take it: GGUF's ne[] reversed (ne[0] is k),
 * the outermost first (an expert bank experts x rows x k). */
static void shape_text(const gguf_tensor *t, char *out, size_t size)
{
    uint32_t last = t->n_dims ? t->n_dims - 1 : 0;
    int n = snprintf(out, size, "%llu", (unsigned long long)t->ne[last]);
    for (uint32_t d = last; d-- > 0 && n > 0 && (size_t)n < size;)
        n += snprintf(out + n, size - (size_t)n, "x%llu", (unsigned long long)t->ne[d]);
}

int gguf_check_main(int argc, char **argv)
{
    options o;
    int rc = parse(&o, argc, argv);
    if (rc >= 0)
        return rc;
    gguf_mapping m;
    char map_err[512];
    if (gguf_map(o.path, &m, map_err, sizeof map_err) != 0) {
        fprintf(stderr, "hk-check: %s\n", map_err);
        return 2;
    }
    gguf_file f;
    char err[512];
    if (gguf_parse(&f, m.data, m.size, err, sizeof err) != 0) {
        fprintf(stderr, "hk-check: %s: not a valid GGUF file: %s\n", o.path, err);
        gguf_unmap(&m);
        return 2;
    }
    printf("%s: GGUF v%u, %llu tensors, %llu key/values, alignment %u, %.1f MiB\n", o.path, f.version,
           (unsigned long long)f.n_tensors, (unsigned long long)f.n_kv, f.alignment, m.size / MIB);
    bench b = {0};
    bench_open(&b, "hk-check", &o.common,
               "device,tensor,type,shape,path,scale_rel,gate,ok,ms,gbs,ratio_to_copy,copy_gbs");
    printf("%-40s %-6s %-18s %-34s %-34s %s\n", "tensor", "type", "shape", "f32 x: error ok ms GB/s of-copy",
           "int8 x: error ok ms GB/s of-copy", "");

    /* seeded activations, one set per k (the same for every tensor of that width) */
    hk_rng rng = {0x6767756663686bull};
    uint32_t checked = 0, skipped = 0, failed = 0;
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        if (o.match && !strstr(t->name, o.match))
            continue;
        char shape[96];
        shape_text(t, shape, sizeof shape);
        hk_type type;
        int gemv, int8;
        const char *skip = classify(t, &type, &gemv, &int8);
        if (skip) {
            printf("%-40s %-6s %-18s skipped: %s\n", t->name, gguf_type_name(t->ggml_type), shape, skip);
            skipped++;
            continue;
        }
        uint32_t k = (uint32_t)t->ne[0];
        float *x = malloc((size_t)k * 4);
        hk_block_q8_1 *xq = malloc((size_t)k / 32 * sizeof *xq + 1);
        if (!x || !xq) {
            fprintf(stderr, "hk-check: out of host memory\n");
            exit(2);
        }
        hk_rng_fill(&rng, x, k, -1.0f, 1.0f);
        if (int8)
            hk_quant_row_q8_1(x, xq, k);
        tensor_result r = {0};
        check_tensor(&b, &f, t, type, gemv, int8, &o, x, xq, &r);
        free(x);
        free(xq);
        checked++;
        failed += r.failed;
        double copy = o.no_time ? 0 : copy_gbs(&b);
        double bytes = (double)t->bytes + (double)k * 4 + (double)(gguf_tensor_values(t) / k) * 4;
        char cols[2][64];
        for (int p = 0; p < 2; p++) {
            double gate = gemv || p == 0 ? HK_GATE_F32 : HK_GATE_EXACT;
            if (r.err[p] < 0) {
                snprintf(cols[p], sizeof cols[p], "-");
                continue;
            }
            int n = snprintf(cols[p], sizeof cols[p], "%.1e %s", r.err[p], r.err[p] < gate ? "ok" : "FAIL");
            if (!o.no_time && r.ms[p] > 0) {
                double gbs = bytes / (r.ms[p] * 1e-3) / 1e9;
                snprintf(cols[p] + n, sizeof cols[p] - (size_t)n, " %.4f %.1f %.0f%%", r.ms[p], gbs, 100.0 * gbs / copy);
            }
            if (b.csv) {
                double gbs = r.ms[p] > 0 ? bytes / (r.ms[p] * 1e-3) / 1e9 : 0;
                fprintf(b.csv, "%s,%s,%s,%s,%s,%.3e,%.0e,%d,%.6f,%.2f,%.4f,%.1f\n", b.caps.device_name, t->name,
                        gguf_type_name(t->ggml_type), shape, gemv ? "gemv_f32" : p ? "matvec_int8" : "matvec",
                        r.err[p], gate, r.err[p] < gate, r.ms[p], gbs, copy > 0 ? gbs / copy : 0, copy);
            }
        }
        char slices[32] = "";
        if (r.slices > 1)
            snprintf(slices, sizeof slices, "(%u row slices)", r.slices);
        printf("%-40s %-6s %-18s %-34s %-34s %s%s\n", t->name, gguf_type_name(t->ggml_type), shape, cols[0], cols[1],
               r.failed ? "FAIL " : "", slices);
        if (r.failed)
            printf("    %s\n", r.why);
        fflush(stdout);
    }
    printf("\n%s: %u tensor(s) checked, %u failed, %u skipped\n", failed ? "FAIL" : "OK", checked, failed, skipped);
    bench_close(&b);
    gguf_free(&f);
    gguf_unmap(&m);
    return failed ? 1 : 0;
}
