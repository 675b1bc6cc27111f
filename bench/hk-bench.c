/* hk-bench: decode throughput of every kernel over model shapes, measured cold (tools/measure.h),
 * beside llama.cpp's Vulkan backend on the H200 where the project has its number.
 *
 * usage: hk-bench [--device N|NAME] [--quick|--full] [--csv FILE] [--json FILE] [--only KERNEL]
 * Each row: kernel, weight type, shape, ms per op in a long stream, ms of one op alone, GB/s on
 * the real bytes moved (quantized weights as stored, the activation, the output), its ratio to the
 * copy bandwidth measured right after it, and llama.cpp-vk's time for the same op where known.
 * Parity is hk-check's job: the inputs here are random blocks.
 */
#include "hk_ref.h"
#include "measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's Vulkan backend on the same H200, same cold method, one op per dispatch in a long
 * graph (issue 3). 0: not measured. */
typedef struct llama_ref {
    const char *kernel;
    hk_type type;
    uint32_t rows, k;
    double ms;
} llama_ref;

static const llama_ref llama[] = {
    {"matvec", HK_TYPE_Q4_K, 151936, 2048, 0.726}, {"matvec", HK_TYPE_Q6_K, 151936, 2048, 0.601},
    {"matvec", HK_TYPE_Q8_0, 151936, 2048, 0.798}, {"matvec", HK_TYPE_Q4_K, 14336, 4096, 0.141},
    {"matvec", HK_TYPE_Q4_K, 4096, 4096, 0.0098},  {"matvec", HK_TYPE_Q6_K, 4096, 4096, 0.034},
    {"matvec", HK_TYPE_Q8_0, 4096, 4096, 0.049},   {"moe", HK_TYPE_Q4_K, 768, 2048, 0.057},
    {"moe", HK_TYPE_Q6_K, 2048, 768, 0.064},
};

static double llama_ms(const char *kernel, hk_type type, uint32_t rows, uint32_t k)
{
    for (size_t i = 0; i < sizeof llama / sizeof llama[0]; i++)
        if (strstr(kernel, llama[i].kernel) == kernel && llama[i].type == type && llama[i].rows == rows &&
            llama[i].k == k)
            return llama[i].ms;
    return 0;
}

static FILE *json;
static int json_rows;

static void row(bench *b, const char *kernel, hk_type type, uint32_t rows, uint32_t k, const char *shape, timing t,
                double bytes)
{
    double gbs = bytes / (t.stream_ms * 1e-3) / 1e9, copy = copy_gbs(b);
    double ref = llama_ms(kernel, type, rows, k);
    char vs[32] = "";
    if (ref > 0)
        snprintf(vs, sizeof vs, "%8.4f %5.1fx", ref, ref / t.stream_ms);
    printf("%-18s %-5s %-22s %10.4f %10.4f %9.1f %6.1f%% %8.0f  %s\n", kernel, hk_type_name(type), shape, t.stream_ms,
           t.single_ms, gbs, 100.0 * gbs / copy, copy, vs);
    if (b->csv)
        fprintf(b->csv, "%s,%s,%s,%s,%.6f,%.6f,%.2f,%.4f,%.1f,%.4f\n", b->caps.device_name, kernel, hk_type_name(type),
                shape, t.stream_ms, t.single_ms, gbs, gbs / copy, copy, ref);
    if (json)
        fprintf(json,
                "%s\n  {\"device\": \"%s\", \"kernel\": \"%s\", \"type\": \"%s\", \"shape\": \"%s\", \"ms\": %.6f, "
                "\"ms_single\": %.6f, \"gbs\": %.2f, \"ratio_to_copy\": %.4f, \"copy_gbs\": %.1f, \"llama_vk_ms\": %.4f}",
                json_rows++ ? "," : "", b->caps.device_name, kernel, hk_type_name(type), shape, t.stream_ms,
                t.single_ms, gbs, gbs / copy, copy, ref);
    fflush(stdout);
}

/* ---- dense matvec: f32 x and Q8_1 x ---- */

typedef struct dense {
    hk_type type;
    uint32_t rows, k;
    uint64_t w_bytes;
    hk_buffer *w, *x, *xq, *y;
    int int8;
} dense;

static hk_status record_dense(bench *b, hk_stream *s, void *user, uint32_t copy)
{
    dense *c = user;
    hk_view w = {c->w, copy * c->w_bytes}, y = {c->y, 0};
    return c->int8 ? hk_matvec_int8(b->ctx, s, c->type, w, (hk_view){c->xq, 0}, y, c->rows, c->k)
                   : hk_matvec(b->ctx, s, c->type, w, (hk_view){c->x, 0}, y, c->rows, c->k);
}

/* Random weight blocks in `copies` back-to-back copies. */
static hk_buffer *weights(bench *b, hk_type type, uint64_t bytes, uint32_t copies, uint64_t seed)
{
    hk_rng rng = {seed};
    uint8_t *w = malloc(bytes);
    if (!w) {
        fprintf(stderr, "hk-bench: out of host memory\n");
        exit(2);
    }
    hk_random_blocks(&rng, (int)type, w, bytes / hk_type_block_bytes(type), 0.02f);
    hk_buffer *buf = make_copies(b, w, bytes, copies);
    free(w);
    return buf;
}

static hk_buffer *activation(bench *b, uint32_t k, uint32_t count, hk_buffer **xq)
{
    hk_rng rng = {99};
    float *x = malloc((size_t)k * count * sizeof(float));
    hk_rng_fill(&rng, x, (size_t)k * count, -1.0f, 1.0f);
    hk_buffer *xb = make_buffer(b, (uint64_t)k * count * sizeof(float), x);
    *xq = make_buffer(b, (uint64_t)k * count / 32 * 36, NULL);
    if (hk_quantize_q8_1(b->ctx, NULL, (hk_view){xb, 0}, (hk_view){*xq, 0}, k * count) != HK_OK)
        die(b, "quantize");
    free(x);
    return xb;
}

static void bench_dense(bench *b, hk_type type, uint32_t rows, uint32_t k)
{
    if (!wanted(b, "matvec"))
        return;
    dense c = {.type = type, .rows = rows, .k = k};
    c.w_bytes = hk_ref_row_bytes((int)type, k) * rows;
    uint32_t copies = copies_for(b, c.w_bytes);
    c.w = weights(b, type, c.w_bytes, copies, rows * 7u + k);
    c.x = activation(b, k, 1, &c.xq);
    c.y = make_buffer(b, rows * sizeof(float), NULL);
    char shape[48];
    snprintf(shape, sizeof shape, "%ux%u", rows, k);
    for (c.int8 = 0; c.int8 < 2; c.int8++) {
        timing t = time_kernel(b, record_dense, &c, copies);
        double x_bytes = c.int8 ? 36.0 * k / 32 : 4.0 * k;
        row(b, c.int8 ? "matvec_int8" : "matvec", type, rows, k, shape, t, (double)c.w_bytes + x_bytes + 4.0 * rows);
    }
    hk_buffer_destroy(c.w);
    hk_buffer_destroy(c.x);
    hk_buffer_destroy(c.xq);
    hk_buffer_destroy(c.y);
}

/* ---- MoE expert gather ---- */

#define ID_SETS 64 /* routings cycled through, so the experts read change from op to op */

typedef struct moe {
    hk_type type;
    hk_moe_shape shape;
    uint64_t w_bytes;
    hk_buffer *w, *x, *xq, *ids, *y;
    int int8;
    uint32_t calls;
} moe;

static hk_status record_moe(bench *b, hk_stream *s, void *user, uint32_t copy)
{
    moe *c = user;
    hk_view w = {c->w, copy * c->w_bytes}, y = {c->y, 0};
    hk_view ids = {c->ids, (uint64_t)(c->calls++ % ID_SETS) * c->shape.slots * 4};
    return c->int8 ? hk_moe_matvec_int8(b->ctx, s, c->type, w, (hk_view){c->xq, 0}, ids, y, &c->shape)
                   : hk_moe_matvec(b->ctx, s, c->type, w, (hk_view){c->x, 0}, ids, y, &c->shape);
}

static void bench_moe(bench *b, hk_type type, uint32_t n_experts, uint32_t n, uint32_t k, uint32_t top_k,
                      int x_per_slot)
{
    if (!wanted(b, "moe_matvec"))
        return;
    moe c = {.type = type, .shape = {n_experts, n, k, top_k, x_per_slot}};
    uint64_t expert_bytes = hk_ref_row_bytes((int)type, k) * n;
    c.w_bytes = expert_bytes * n_experts;
    uint32_t copies = copies_for(b, c.w_bytes);
    c.w = weights(b, type, c.w_bytes, copies, n_experts * 131u + n);
    c.x = activation(b, k, x_per_slot ? top_k : 1, &c.xq);
    c.y = make_buffer(b, (uint64_t)top_k * n * sizeof(float), NULL);
    /* ID_SETS routings of top_k distinct experts each */
    uint32_t *ids = malloc((size_t)ID_SETS * top_k * sizeof *ids);
    hk_rng rng = {7};
    for (uint32_t set = 0; set < ID_SETS; set++)
        for (uint32_t i = 0; i < top_k; i++) {
            uint32_t e, dup;
            do {
                e = (uint32_t)(hk_rng_next(&rng) % n_experts);
                dup = 0;
                for (uint32_t j = 0; j < i; j++)
                    dup |= ids[set * top_k + j] == e;
            } while (dup);
            ids[set * top_k + i] = e;
        }
    c.ids = make_buffer(b, (uint64_t)ID_SETS * top_k * 4, ids);
    free(ids);
    char shape[48];
    snprintf(shape, sizeof shape, "E%u %ux%u top%u", n_experts, n, k, top_k);
    for (c.int8 = 0; c.int8 < 2; c.int8++) {
        timing t = time_kernel(b, record_moe, &c, copies);
        double x_bytes = (c.int8 ? 36.0 * k / 32 : 4.0 * k) * (x_per_slot ? top_k : 1);
        /* llama.cpp's MoE numbers are for the 128-expert model */
        row(b, c.int8 ? "moe_matvec_int8" : "moe_matvec", type, n_experts == 128 ? n : 0, k, shape, t,
            (double)top_k * expert_bytes + x_bytes + 4.0 * top_k * (n + 1));
    }
    hk_buffer_destroy(c.w);
    hk_buffer_destroy(c.x);
    hk_buffer_destroy(c.xq);
    hk_buffer_destroy(c.ids);
    hk_buffer_destroy(c.y);
}

/* ---- the rest of the decode path: router gate, router, rmsnorm, activation quantizer ---- */

typedef struct small {
    int kind; /* 0 gemv, 1 route, 2 rmsnorm, 3 quantize */
    uint32_t rows, n;
    uint64_t a_bytes;
    hk_buffer *a, *v, *out, *out2;
} small;

static hk_status record_small(bench *b, hk_stream *s, void *user, uint32_t copy)
{
    small *c = user;
    hk_view a = {c->a, copy * c->a_bytes}, v = {c->v, 0}, out = {c->out, 0};
    switch (c->kind) {
    case 0: return hk_gemv_f32(b->ctx, s, a, v, out, c->rows, c->n);
    case 1: return hk_moe_route(b->ctx, s, a, out, (hk_view){c->out2, 0}, c->rows, c->n, 8, 1);
    case 2: return hk_rmsnorm(b->ctx, s, a, v, out, c->rows, c->n, 1e-6f);
    default: return hk_quantize_q8_1(b->ctx, s, a, out, c->n);
    }
}

static void bench_small(bench *b, int kind, uint32_t rows, uint32_t n)
{
    static const char *const names[] = {"gemv", "moe_route", "rmsnorm", "quantize_q8_1"};
    if (!wanted(b, names[kind]))
        return;
    small c = {.kind = kind, .rows = rows, .n = n};
    c.a_bytes = (uint64_t)rows * n * 4;
    uint32_t copies = copies_for(b, c.a_bytes);
    float *a = malloc(c.a_bytes);
    hk_rng rng = {5};
    hk_rng_fill(&rng, a, (size_t)rows * n, -1.0f, 1.0f);
    c.a = make_copies(b, a, c.a_bytes, copies);
    c.v = make_buffer(b, (uint64_t)n * 4, a);
    uint64_t out_bytes = kind == 0 ? rows * 4ull : kind == 1 ? rows * 32ull : kind == 2 ? c.a_bytes : n / 32 * 36ull;
    c.out = make_buffer(b, out_bytes, NULL);
    c.out2 = make_buffer(b, rows * 32ull, NULL);
    timing t = time_kernel(b, record_small, &c, copies);
    char shape[48];
    snprintf(shape, sizeof shape, kind == 1 ? "%u tok E%u top8" : "%ux%u", rows, n);
    double bytes = kind == 0 ? c.a_bytes + 4.0 * n + 4.0 * rows
                 : kind == 1 ? c.a_bytes + 64.0 * rows
                 : kind == 2 ? 2.0 * c.a_bytes + 4.0 * n
                             : c.a_bytes + 36.0 * n / 32;
    row(b, names[kind], HK_TYPE_F32, rows, n, shape, t, bytes);
    hk_buffer_destroy(c.a);
    hk_buffer_destroy(c.v);
    hk_buffer_destroy(c.out);
    hk_buffer_destroy(c.out2);
    free(a);
}

int main(int argc, char **argv)
{
    bench_options o = bench_options_default();
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (bench_option(&o, argc, argv, &i))
            continue;
        if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json_path = argv[++i];
            continue;
        }
        fprintf(stderr, "usage: hk-bench [--device N|NAME] [--quick|--full] [--csv FILE] [--json FILE] [--only KERNEL]\n");
        return 2;
    }
    bench b = {0};
    int quick = bench_open(&b, "hk-bench", &o, "device,kernel,type,shape,ms,ms_single,gbs,ratio_to_copy,copy_gbs,llama_vk_ms");
    if (json_path && !(json = fopen(json_path, "w")))
        fprintf(stderr, "hk-bench: cannot write %s\n", json_path);
    if (json)
        fprintf(json, "[");
    printf("%-18s %-5s %-22s %10s %10s %9s %7s %8s  %s\n", "kernel", "type", "shape", "ms/op", "ms single", "GB/s",
           "of copy", "copy", "llama-vk ms, speedup");

    static const hk_type types[] = {HK_TYPE_Q4_K, HK_TYPE_Q6_K, HK_TYPE_Q8_0};
    static const uint32_t full[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336},
                                       {2048, 2048}, {6144, 2048},  {151936, 2048}};
    static const uint32_t few[][2] = {{2048, 2048}, {512, 6144}};
    size_t n_shapes = quick ? sizeof few / sizeof few[0] : sizeof full / sizeof full[0];
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < n_shapes; i++)
            bench_dense(&b, types[t], quick ? few[i][0] : full[i][0], quick ? few[i][1] : full[i][1]);
    /* Qwen3-30B-A3B decode: 128 experts, top-8; gate/up Q4_K 768x2048 (one x), down Q6_K 2048x768
     * (one x per slot); fewer experts where one binding of the device cannot hold them all */
    uint32_t experts = quick ? 16 : 128;
    uint64_t down_expert = hk_ref_row_bytes(HK_REF_Q6_K, 768) * 2048;
    if (experts * down_expert > b.caps.max_storage_buffer_range)
        experts = (uint32_t)(b.caps.max_storage_buffer_range / down_expert);
    bench_moe(&b, HK_TYPE_Q4_K, experts, 768, 2048, 8, 0);
    bench_moe(&b, HK_TYPE_Q6_K, experts, 2048, 768, 8, 1);
    bench_small(&b, 0, 128, 2048); /* router gate */
    bench_small(&b, 1, 1, 128);    /* router */
    bench_small(&b, 2, 1, 2048);   /* rmsnorm, one token */
    bench_small(&b, 2, 1, 4096);
    bench_small(&b, 3, 1, 2048); /* activation quantizer */
    bench_small(&b, 3, 1, 4096);
    if (json) {
        fprintf(json, "\n]\n");
        fclose(json);
    }
    bench_close(&b);
    return 0;
}
