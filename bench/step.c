/* hk-bench --step: a whole decode step of a model shape, as an engine records it (hk-run's forward
 * pass, tools/run/forward.h), on synthetic weights in llama.cpp's Q4_K_M layout: KV capacity 4096,
 * the token at position 512, one recorded step replayed; GPU time per token (median of the
 * replays), dispatches and barriers per token, weight bytes per token and the share of the copy
 * roofline. No model file is needed. */
#include "step.h"

#include "forward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAPACITY 4096u
#define POSITION 512u
#define REPLAYS 128u
#define WARMUP 16u

/* llama.cpp-vk b11669 on the H200, all layers on the GPU (tg128), where the project has it */
static double llama_ms(const char *shape, uint32_t layers)
{
    if (!strcmp(shape, "llama3-8b") && layers == 8)
        return 1.48;
    if (!strcmp(shape, "qwen3-30b-a3b") && layers == 8)
        return 1.10;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int one_shape(bench *b, const char *shape, uint32_t layers)
{
    run_model m;
    run_state s;
    run_graph g;
    memset(&s, 0, sizeof s);
    memset(&g, 0, sizeof g);
    char err[256];
    int rc = -1;
    double *ms = calloc(REPLAYS, sizeof *ms);
    if (!ms || run_model_synthetic(&m, shape, layers, err, sizeof err) != 0) {
        fprintf(stderr, "hk-bench: --step: %s\n", ms ? err : "out of memory");
        free(ms);
        return -1;
    }
    uint32_t sizes[1] = {1};
    uint32_t token = 1;
    if (run_model_upload(&m, b->ctx) != 0 ||
        run_state_create(&s, b->ctx, &m, 1, 1, CAPACITY, HK_TYPE_F16, sizes, 1, 0.0f) != 0 ||
        run_graph_build(&s, &g, 1, 1, RUN_TAIL_ARGMAX) != 0)
        goto done;
    for (uint32_t i = 0; i < WARMUP + REPLAYS; i++) {
        double t;
        if (run_graph_exec(&s, &g, &token, POSITION, &t) != 0)
            goto done;
        if (i >= WARMUP)
            ms[i - WARMUP] = t;
    }
    qsort(ms, REPLAYS, sizeof *ms, cmp_double);
    double median = ms[REPLAYS / 2], copy = copy_gbs(b), ref = llama_ms(shape, m.hp.n_layer);
    printf("%s, %u layers: %.4f ms per token (GPU, median of %u replays), %.1f tokens/s", shape, m.hp.n_layer, median,
           REPLAYS, median > 0 ? 1e3 / median : 0.0);
    if (ref > 0)
        printf("; llama.cpp-vk %.2f ms, %.2fx", ref, median > 0 ? ref / median : 0.0);
    printf("\n  ");
    run_print_step(&m, &g, median, copy);
    if (b->csv)
        fprintf(b->csv, "%s,step,%s/%u,%.6f,%u,%u,%llu,%.1f,%.4f\n", b->caps.device_name, shape, m.hp.n_layer, median,
                g.kernels, g.barriers, (unsigned long long)run_step_weight_bytes(&m), copy, ref);
    rc = 0;
done:
    run_graph_free(&s, &g);
    run_state_destroy(&s);
    run_model_free(&m);
    free(ms);
    return rc;
}

int bench_step(bench *b, const char *list)
{
    static const char *const gpu_default = "llama3-8b:8,llama3-8b:32,qwen3-30b-a3b:8,qwen3-30b-a3b:48";
    static const char *const cpu_default = "tiny-llama,tiny-moe";
    if (run_vulkan_load(b->ctx) != 0)
        return 1;
    if (!list)
        list = b->quick ? cpu_default : gpu_default;
    int failures = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char item[64];
        if (len == 0 || len >= sizeof item) {
            fprintf(stderr, "hk-bench: --step: '%.*s' is not SHAPE[:LAYERS]\n", (int)len, p);
            return 2;
        }
        memcpy(item, p, len);
        item[len] = 0;
        char *colon = strchr(item, ':');
        uint64_t layers = 0;
        const char *end = "";
        if (colon) {
            *colon = 0;
            if (!option_number(colon + 1, 4096, &layers, &end) || *end || layers == 0) {
                fprintf(stderr, "hk-bench: --step: layers of '%s' must be 1 to 4096, not '%s'\n", item, colon + 1);
                return 2;
            }
        }
        failures += one_shape(b, item, (uint32_t)layers) != 0;
        p += len + (p[len] == ',');
    }
    return failures ? 1 : 0;
}
