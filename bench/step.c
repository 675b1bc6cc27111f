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
#define WARMUP 16u /* replays at least, before timing (run_graph_warm) */
#define PROFILE_REPLAYS 32u

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

/* The step's GPU time per token: the median of REPLAYS replays after the warm-up (ms: REPLAYS
 * scratch) */
static int time_step(run_state *s, run_graph *g, double *ms, double *median)
{
    uint32_t token = 1;
    if (run_graph_warm(s, g, &token, POSITION, WARMUP) != 0)
        return -1;
    for (uint32_t i = 0; i < REPLAYS; i++)
        if (run_graph_exec(s, g, &token, POSITION, &ms[i]) != 0)
            return -1;
    qsort(ms, REPLAYS, sizeof *ms, cmp_double);
    *median = ms[REPLAYS / 2];
    return 0;
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
    if (run_model_upload(&m, b->ctx) != 0 ||
        run_state_create(&s, b->ctx, &m, 1, 1, CAPACITY, HK_TYPE_F16, sizes, 1, 0.0f) != 0 ||
        run_graph_build(&s, &g, 1, 1, RUN_TAIL_ARGMAX) != 0)
        goto done;
    double median;
    if (time_step(&s, &g, ms, &median) != 0)
        goto done;
    double copy = copy_gbs(b), ref = llama_ms(shape, m.hp.n_layer);
    printf("%s, %u layers: %.4f ms per token (GPU, median of %u replays), %.1f tokens/s", shape, m.hp.n_layer, median,
           REPLAYS, median > 0 ? 1e3 / median : 0.0);
    if (ref > 0)
        printf("; llama.cpp-vk %.2f ms, %.2fx", ref, median > 0 ? ref / median : 0.0);
    printf("\n  ");
    run_print_step(&m, &g, median, copy);
    if (b->caps.timestamps && run_profile(&s, 1, POSITION, PROFILE_REPLAYS, g.kernels, median) != 0)
        goto done;
    if (b->csv)
        fprintf(b->csv, "%s,step,%s/%u,%.6f,%u,%u,%llu,%.1f,%.4f\n", b->caps.device_name, shape, m.hp.n_layer, median,
                g.kernels, g.barriers, (unsigned long long)run_step_weight_bytes(&m), copy, ref);
    /* the same step in the forms hk-run does not take, each beside the default */
    for (size_t f = 0; f < run_form_count; f++) {
        if (!run_form_applies(&run_forms[f], &m))
            continue;
        run_graph_free(&s, &g);
        run_form_set(&s, NULL, 0);
        run_form_set(&s, &run_forms[f], 1);
        if (run_graph_build(&s, &g, 1, 1, RUN_TAIL_ARGMAX) != 0 || time_step(&s, &g, ms, &median) != 0)
            goto done;
        printf("  with %s: %.4f ms per token, %u dispatches and %u barriers\n", run_forms[f].what, median, g.kernels,
               g.barriers);
        if (b->csv)
            fprintf(b->csv, "%s,step,%s/%u %s,%.6f,%u,%u,%llu,%.1f,%.4f\n", b->caps.device_name, shape, m.hp.n_layer,
                    run_forms[f].tag, median, g.kernels, g.barriers, (unsigned long long)run_step_weight_bytes(&m),
                    copy, 0.0);
    }
    rc = 0;
done:
    run_graph_free(&s, &g);
    run_state_destroy(&s);
    run_model_free(&m);
    free(ms);
    return rc;
}

/* The floor a step's dispatches stand on: FLOOR_DISPATCHES one-value hk_add calls in one submit,
 * each reading the one before (the stream puts a barrier before each), and as many independent
 * ones (no barrier between them); GPU time per dispatch, median of FLOOR_RUNS submits. */
#define FLOOR_DISPATCHES 256u
#define FLOOR_RUNS 16u
static int dispatch_floor(bench *b)
{
    hk_buffer *buf = NULL;
    hk_stream *st = NULL;
    double ms[2][FLOOR_RUNS];
    uint32_t barriers[2] = {0, 0};
    int rc = -1;
    if (hk_buffer_create(b->ctx, 4096 * (FLOOR_DISPATCHES + 1), &buf) != HK_OK ||
        hk_buffer_fill(buf, 0, 4096 * (FLOOR_DISPATCHES + 1), 0) != HK_OK || hk_stream_create(b->ctx, 2, &st) != HK_OK)
        goto done;
    for (uint32_t r = 0; r < FLOOR_RUNS + 1; r++)
        for (int dep = 0; dep < 2; dep++) {
            hk_view one = {buf, 0};
            if (hk_stream_timestamp(st, NULL) != HK_OK)
                goto done;
            for (uint32_t i = 0; i < FLOOR_DISPATCHES; i++) {
                /* dependent: y = y + one in one place; independent: each into its own 4 KB */
                hk_view y = {buf, dep ? 4096 : 4096ull * (i + 1)};
                if (hk_add(b->ctx, st, dep ? y : one, one, y, 1) != HK_OK)
                    goto done;
            }
            if (hk_stream_timestamp(st, NULL) != HK_OK)
                goto done;
            barriers[dep] = hk_stream_barrier_count(st);
            if (hk_stream_submit(st) != HK_OK || (r && hk_stream_elapsed_ms(st, 0, 1, &ms[dep][r - 1]) != HK_OK))
                goto done;
        }
    for (int dep = 0; dep < 2; dep++)
        qsort(ms[dep], FLOOR_RUNS, sizeof ms[dep][0], cmp_double);
    printf("dispatch floor: %u one-value dispatches, %.2f us each with a barrier before each (%u barriers), %.2f us "
           "each independent (%u barriers)\n\n", FLOOR_DISPATCHES, ms[1][FLOOR_RUNS / 2] * 1e3 / FLOOR_DISPATCHES, barriers[1],
           ms[0][FLOOR_RUNS / 2] * 1e3 / FLOOR_DISPATCHES, barriers[0]);
    rc = 0;
done:
    if (rc)
        fprintf(stderr, "hk-bench: --step: the dispatch floor: %s\n", hk_last_error());
    hk_stream_destroy(st);
    hk_buffer_destroy(buf);
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
    int failures = b->caps.timestamps && dispatch_floor(b) != 0;
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
