/* hk-run: a small example engine on libhkernel. It reads a GGUF model (llama, qwen2, qwen3,
 * qwen3moe), uploads its tensors as stored, builds its pipelines before the first token (a
 * prepare stream), runs the prompt as batches and then decodes token after token by replaying one
 * recorded step (tools/run/forward.h). --logits writes what the model computed for a teacher-forced
 * sequence, for checking against an independent forward pass (tests/model); --bench times prompt
 * processing and generation as llama-bench does. */
#define _POSIX_C_SOURCE 200809L
#include <volk.h>
#include <hkernel.h>

#include "forward.h"
#include "gguf_reader.h"
#include "measure.h"
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_TOKENS 1048576u
#define BENCH_PROMPT 512u
#define BENCH_GENERATE 128u

typedef struct options {
    const char *path;
    uint32_t *tokens;
    uint32_t n_tokens;
    uint32_t n_generate;
    int have_prompt_len;
    uint32_t prompt_len;
    const char *logits_path;
    float temperature;
    uint32_t top_k;
    uint64_t seed;
    uint32_t capacity; /* 0: the default */
    uint32_t batch;
    uint32_t chain;
    hk_type kv_type;
    int bench;
    int profile;
    uint32_t reps;
    int device_index;
    const char *device_name;
    int validate;
    int no_coopmat;
    int f32_activations;
    const run_form *forms[16]; /* --form, in order */
    uint32_t n_forms;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: hk-run MODEL.gguf --tokens ID,ID,... [options]\n"
            "       hk-run MODEL.gguf --bench [options]\n"
            "Runs a GGUF model (architectures llama, qwen2, qwen3, qwen3moe; tensors q8_0, q4_k, q5_k, q6_k, f16,\n"
            "f32) on libhkernel: the prompt as one batch (or batches of --batch), then -n tokens decoded one at a\n"
            "time by replaying one recorded step. Prints the generated ids, their text and the speed.\n"
            "  --tokens LIST     the prompt's token ids, comma-separated\n"
            "  -n N              tokens to generate (default 16)\n"
            "  --temp T          sample at temperature T (default 0: greedy)\n"
            "  --top-k K         sample among the K most likely (default 40; 0: all)\n"
            "  --seed S          the sampler's seed (default 1)\n"
            "  --logits FILE     teacher forcing: the first --prompt-len ids are the prompt, each other id is fed as\n"
            "                    a decode step; FILE gets \"HKLG\", int32 n_vocab, n_prompt, n_decode, the ids, then\n"
            "                    float32 logits of the prompt's last token and of each step (little-endian)\n"
            "  --prompt-len P    with --logits (default: every id)\n"
            "  --bench           pp%u and tg%u as llama-bench runs them (warm-up, repetitions, median)\n"
            "  --reps N          repetitions of --bench (default 5)\n"
            "  --profile         with --bench: the prompt's batch and a decode step again, with a GPU timestamp\n"
            "                    after every call, their time by kind of call\n"
            "  --ctx N           KV cache rows (default: the model's context length, at most 4096)\n"
            "  --batch N         prompt tokens per batch (default 512)\n"
            "  --chain N         greedy decode steps per submit, each step's pick fed to the next on the\n"
            "                    device (default 16; 1: a host round trip per token)\n"
            "  --kv-type T       f16 (default), f32 or q8_0\n"
            "  --device D        a device index or name substring (default: HK_DEVICE, else the first GPU)\n"
            "  --validate        the Vulkan validation layer on; any message fails the run\n"
            "  --no-coopmat      the portable arms instead of the cooperative-matrix ones\n"
            "  --activations A   int8 (default: Q8_1 activations, the int8 kernels) or f32 (hk_matvec for a token,\n"
            "                    hk_gemm_f16 for a batch: slower, without the activations' rounding)\n"
            "  --form F,F,...    decode steps in these of hk-bench --step's forms (one the model has no place for\n"
            "                    changes nothing): the same bits, other dispatches, for comparisons. Forms:\n"
            "                   ",
            BENCH_PROMPT, BENCH_GENERATE);
    for (size_t i = 0; i < run_form_count; i++) /* the forms' table: the help never lags it */
        fprintf(f, " %s", run_forms[i].tag);
    fprintf(f, "\nExit 0: done; 1: a failure on the device; 2: bad input (file, model, options).\n");
}

static int number(const char *opt, const char *s, uint64_t max, uint64_t *out)
{
    const char *end;
    if (!s || !option_number(s, max, out, &end) || *end) {
        fprintf(stderr, "hk-run: %s needs a whole number from 0 to %llu, not '%s'\n", opt, (unsigned long long)max,
                s ? s : "");
        return -1;
    }
    return 0;
}

static int parse_tokens(options *o, const char *s)
{
    o->n_tokens = 0;
    free(o->tokens);
    o->tokens = NULL;
    uint32_t cap = 0;
    while (*s) {
        uint64_t v;
        const char *end;
        if (!option_number(s, UINT32_MAX, &v, &end) || (*end && *end != ',')) {
            fprintf(stderr, "hk-run: --tokens takes ids from 0 to %u, comma-separated: '%s'\n", UINT32_MAX, s);
            return -1;
        }
        if (o->n_tokens == MAX_TOKENS) {
            fprintf(stderr, "hk-run: --tokens: more than %u ids\n", MAX_TOKENS);
            return -1;
        }
        if (o->n_tokens == cap) {
            cap = cap ? 2 * cap : 64;
            uint32_t *t = realloc(o->tokens, cap * sizeof *t);
            if (!t) {
                fprintf(stderr, "hk-run: out of memory\n");
                return -1;
            }
            o->tokens = t;
        }
        o->tokens[o->n_tokens++] = (uint32_t)v;
        s = *end ? end + 1 : end;
    }
    if (!o->n_tokens) {
        fprintf(stderr, "hk-run: --tokens names no id\n");
        return -1;
    }
    return 0;
}

/* --form's comma-separated tags (run_forms) */
static int parse_forms(options *o, const char *list)
{
    o->n_forms = 0;
    for (const char *p = list ? list : ""; ; p++) {
        size_t len = strcspn(p, ",");
        char tag[32];
        const run_form *f = NULL;
        if (len < sizeof tag) {
            memcpy(tag, p, len);
            tag[len] = 0;
            f = run_form_find(tag);
        }
        if (!f || o->n_forms == sizeof o->forms / sizeof o->forms[0]) {
            fprintf(stderr, "hk-run: --form: '%.*s' is not one of", (int)(len < 64 ? len : 64), p);
            for (size_t i = 0; i < run_form_count; i++)
                fprintf(stderr, " %s", run_forms[i].tag);
            fprintf(stderr, "\n");
            return -1;
        }
        o->forms[o->n_forms++] = f;
        p += len;
        if (!*p)
            return 0;
    }
}

static int parse(options *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->n_generate = 16;
    o->top_k = 40;
    o->seed = 1;
    o->batch = 512;
    o->chain = 16;
    o->kv_type = HK_TYPE_F16;
    o->reps = 5;
    o->device_index = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (a[0] != '-') {
            if (o->path) {
                fprintf(stderr, "hk-run: one model only: '%s' and '%s'\n", o->path, a);
                return 2;
            }
            o->path = a;
            continue;
        }
        int takes_value = 1;
        if (!strcmp(a, "--bench"))
            o->bench = 1, takes_value = 0;
        else if (!strcmp(a, "--profile"))
            o->profile = 1, takes_value = 0;
        else if (!strcmp(a, "--validate"))
            o->validate = 1, takes_value = 0;
        else if (!strcmp(a, "--no-coopmat"))
            o->no_coopmat = 1, takes_value = 0;
        else if (!v) {
            fprintf(stderr, "hk-run: %s needs a value\n", a);
            return 2;
        } else if (!strcmp(a, "--tokens")) {
            if (parse_tokens(o, v))
                return 2;
        } else if (!strcmp(a, "-n")) {
            if (number(a, v, MAX_TOKENS, &n))
                return 2;
            o->n_generate = (uint32_t)n;
        } else if (!strcmp(a, "--prompt-len")) {
            if (number(a, v, MAX_TOKENS, &n))
                return 2;
            o->prompt_len = (uint32_t)n;
            o->have_prompt_len = 1;
        } else if (!strcmp(a, "--logits"))
            o->logits_path = v;
        else if (!strcmp(a, "--temp")) {
            char *end;
            double t = strtod(v, &end);
            if (*end || !(t >= 0) || t > 1e6) {
                fprintf(stderr, "hk-run: --temp needs a number from 0 to 1e6, not '%s'\n", v);
                return 2;
            }
            o->temperature = (float)t;
        } else if (!strcmp(a, "--top-k")) {
            if (number(a, v, UINT32_MAX, &n))
                return 2;
            o->top_k = (uint32_t)n;
        } else if (!strcmp(a, "--seed")) {
            if (number(a, v, UINT64_MAX, &n))
                return 2;
            o->seed = n;
        } else if (!strcmp(a, "--ctx")) {
            if (number(a, v, 2097152, &n) || n == 0) {
                if (n == 0)
                    fprintf(stderr, "hk-run: --ctx must be at least 1\n");
                return 2;
            }
            o->capacity = (uint32_t)n;
        } else if (!strcmp(a, "--batch")) {
            if (number(a, v, 65536, &n) || n == 0) {
                if (n == 0)
                    fprintf(stderr, "hk-run: --batch must be at least 1\n");
                return 2;
            }
            o->batch = (uint32_t)n;
        } else if (!strcmp(a, "--chain")) {
            if (number(a, v, 256, &n) || n == 0) {
                if (n == 0)
                    fprintf(stderr, "hk-run: --chain must be at least 1\n");
                return 2;
            }
            o->chain = (uint32_t)n;
        } else if (!strcmp(a, "--reps")) {
            if (number(a, v, 1000, &n) || n == 0) {
                if (n == 0)
                    fprintf(stderr, "hk-run: --reps must be at least 1\n");
                return 2;
            }
            o->reps = (uint32_t)n;
        } else if (!strcmp(a, "--form")) {
            if (parse_forms(o, v) != 0)
                return 2;
        } else if (!strcmp(a, "--activations")) {
            if (strcmp(v, "int8") && strcmp(v, "f32")) {
                fprintf(stderr, "hk-run: --activations takes int8 or f32, not '%s'\n", v);
                return 2;
            }
            o->f32_activations = !strcmp(v, "f32");
        } else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f16"))
                o->kv_type = HK_TYPE_F16;
            else if (!strcmp(v, "f32"))
                o->kv_type = HK_TYPE_F32;
            else if (!strcmp(v, "q8_0"))
                o->kv_type = HK_TYPE_Q8_0;
            else {
                fprintf(stderr, "hk-run: --kv-type takes f16, f32 or q8_0, not '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--device")) {
            if (!device_option("hk-run: ", v, &o->device_index, &o->device_name))
                return 2;
        } else {
            fprintf(stderr, "hk-run: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        i += takes_value;
    }
    if (!o->path) {
        usage(stderr);
        return 2;
    }
    if (!o->bench && !o->n_tokens) {
        fprintf(stderr, "hk-run: give the prompt's ids with --tokens (or --bench)\n");
        return 2;
    }
    if (o->profile && !o->bench) {
        fprintf(stderr, "hk-run: --profile goes with --bench\n");
        return 2;
    }
    if (o->bench && (o->logits_path || o->temperature > 0 || o->n_tokens)) {
        fprintf(stderr, "hk-run: --bench draws its own tokens and decodes greedily: no --tokens, --logits or --temp\n");
        return 2;
    }
    if (o->have_prompt_len && !o->logits_path) {
        fprintf(stderr, "hk-run: --prompt-len goes with --logits\n");
        return 2;
    }
    if (o->logits_path && o->have_prompt_len && (o->prompt_len == 0 || o->prompt_len > o->n_tokens)) {
        fprintf(stderr, "hk-run: --prompt-len %u: the prompt takes 1 to %u of the %u ids\n", o->prompt_len,
                o->n_tokens, o->n_tokens);
        return 2;
    }
    return -1;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- sampling ---- */

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct candidate {
    float p;
    uint32_t id;
} candidate;

static int cmp_candidate(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->p != y->p)
        return x->p > y->p ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* draws from the probabilities (hk_softmax at the temperature) among the top_k most likely */
static uint32_t sample(const float *probs, uint32_t n, uint32_t top_k, uint64_t *rng, candidate *scratch)
{
    for (uint32_t i = 0; i < n; i++)
        scratch[i] = (candidate){isnan(probs[i]) ? 0 : probs[i], i};
    qsort(scratch, n, sizeof *scratch, cmp_candidate);
    uint32_t k = top_k && top_k < n ? top_k : n;
    double sum = 0;
    for (uint32_t i = 0; i < k; i++)
        sum += scratch[i].p;
    double r = (double)(next_random(rng) >> 11) / 9007199254740992.0 * sum;
    for (uint32_t i = 0; i < k; i++) {
        r -= scratch[i].p;
        if (r < 0)
            return scratch[i].id;
    }
    return scratch[0].id;
}

/* ---- the run ---- */

typedef struct engine {
    options *o;
    hk_context *ctx;
    run_model model;
    run_vocab vocab;
    run_state state;
    run_graph prefill[2]; /* batch-sized, and the prompt's last partial batch */
    run_graph decode;
    run_graph chain; /* greedy steps chained on the device (steps 0: none) */
    FILE *logits;
    candidate *scratch;
    uint64_t rng;
} engine;

static int write_logits_row(engine *e)
{
    size_t n = e->model.hp.n_vocab;
    if (fwrite(run_out(&e->state), 4, n, e->logits) != n) {
        fprintf(stderr, "hk-run: writing %s failed\n", e->o->logits_path);
        return -1;
    }
    return 0;
}

/* the token after the graph that just ran */
static uint32_t pick(engine *e)
{
    if (e->o->temperature > 0)
        return sample(run_out(&e->state), e->model.hp.n_vocab, e->o->top_k, &e->rng, e->scratch);
    return run_next_token(&e->state);
}

/* runs n tokens from position first through the prefill graphs; 0 or -1 */
static int run_prompt(engine *e, const uint32_t *tokens, uint32_t n, uint32_t first)
{
    for (uint32_t done = 0; done < n;) {
        run_graph *g = n - done >= e->prefill[0].m ? &e->prefill[0] : &e->prefill[1];
        if (run_graph_exec(&e->state, g, tokens + done, first + done, NULL) != 0)
            return -1;
        done += g->m;
    }
    return 0;
}

static run_tail tail_of(const options *o)
{
    return o->temperature > 0 ? RUN_TAIL_PROBS : o->logits_path ? RUN_TAIL_LOGITS : RUN_TAIL_ARGMAX;
}

static int generate(engine *e)
{
    const options *o = e->o;
    uint32_t n_prompt = o->logits_path ? (o->have_prompt_len ? o->prompt_len : o->n_tokens) : o->n_tokens;
    /* generating n tokens feeds all but the last back */
    uint32_t n_decode = o->logits_path ? o->n_tokens - n_prompt : o->n_generate ? o->n_generate - 1 : 0;
    uint32_t n_vocab = e->model.hp.n_vocab;
    if (o->logits_path) {
        int32_t head[4];
        memcpy(head, "HKLG", 4);
        head[1] = (int32_t)n_vocab;
        head[2] = (int32_t)n_prompt;
        head[3] = (int32_t)n_decode;
        if (fwrite(head, 4, 4, e->logits) != 4 || fwrite(o->tokens, 4, o->n_tokens, e->logits) != o->n_tokens) {
            fprintf(stderr, "hk-run: writing %s failed\n", o->logits_path);
            return 1;
        }
    }
    double t0 = now_ms();
    if (run_prompt(e, o->tokens, n_prompt, 0) != 0)
        return 1;
    double prompt_ms = now_ms() - t0;
    if (o->logits_path && write_logits_row(e) != 0)
        return 1;
    uint32_t *generated = calloc(n_decode + 1, sizeof *generated);
    if (!generated) {
        fprintf(stderr, "hk-run: out of memory\n");
        return 1;
    }
    uint32_t next = pick(e);
    t0 = now_ms();
    for (uint32_t i = 0; i < n_decode;) {
        if (e->chain.steps && n_decode - i >= e->chain.steps) {
            /* greedy: the chain's picks come back together */
            if (run_graph_exec(&e->state, &e->chain, &next, n_prompt + i, NULL) != 0) {
                free(generated);
                return 1;
            }
            const uint32_t *picks = run_chain_tokens(&e->state);
            generated[i] = next;
            for (uint32_t j = 1; j < e->chain.steps; j++)
                generated[i + j] = picks[j - 1];
            next = picks[e->chain.steps - 1];
            i += e->chain.steps;
            continue;
        }
        uint32_t token = o->logits_path ? o->tokens[n_prompt + i] : next;
        generated[i] = token;
        if (run_graph_exec(&e->state, &e->decode, &token, n_prompt + i, NULL) != 0) {
            free(generated);
            return 1;
        }
        if (o->logits_path && write_logits_row(e) != 0) {
            free(generated);
            return 1;
        }
        next = pick(e);
        i++;
    }
    double decode_ms = now_ms() - t0;
    if (!o->logits_path && o->n_generate)
        generated[n_decode] = next; /* the last pick is shown, not fed back */
    uint32_t shown = o->logits_path ? n_decode : o->n_generate;
    printf("generated:");
    for (uint32_t i = 0; i < shown; i++)
        printf(" %u", generated[i]);
    printf("\n");
    if (e->vocab.n) {
        char text[4096] = "";
        for (uint32_t i = 0; i < shown; i++)
            run_vocab_text(&e->vocab, generated[i], text, sizeof text);
        printf("text: %s\n", text);
    }
    printf("prompt: %u tokens in %.2f ms, %.1f tokens/s\n", n_prompt, prompt_ms,
           prompt_ms > 0 ? n_prompt / prompt_ms * 1e3 : 0.0);
    if (n_decode)
        printf("decode: %u tokens in %.2f ms, %.1f tokens/s, %.3f ms per token\n", n_decode, decode_ms,
               decode_ms > 0 ? n_decode / decode_ms * 1e3 : 0.0, decode_ms / n_decode);
    free(generated);
    return 0;
}

/* device-to-device copy bandwidth (read + write), measured as hk-bench measures it */
static double copy_bandwidth(engine *e)
{
    bench b = {0};
    b.ctx = e->ctx;
    b.tool = "hk-run";
    hk_context_caps(e->ctx, &b.caps);
    uint64_t size = b.caps.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU ? 16u << 20 : 512u << 20;
    double gbs = 0;
    if (hk_buffer_create(e->ctx, size, &b.copy_bufs[0]) == HK_OK &&
        hk_buffer_create(e->ctx, size, &b.copy_bufs[1]) == HK_OK &&
        hk_buffer_fill(b.copy_bufs[0], 0, size, 0x3f800000u) == HK_OK)
        gbs = copy_gbs(&b);
    hk_buffer_destroy(b.copy_bufs[0]);
    hk_buffer_destroy(b.copy_bufs[1]);
    return gbs;
}

static int run_bench(engine *e)
{
    const options *o = e->o;
    uint32_t n_vocab = e->model.hp.n_vocab;
    uint32_t *tokens = malloc(BENCH_PROMPT * sizeof *tokens);
    double *pp = calloc(o->reps, sizeof *pp), *pp_gpu = calloc(o->reps, sizeof *pp_gpu),
           *tg = calloc(o->reps, sizeof *tg), *tg_gpu = calloc(o->reps, sizeof *tg_gpu);
    int rc = 1;
    if (!tokens || !pp || !pp_gpu || !tg || !tg_gpu) {
        fprintf(stderr, "hk-run: out of memory\n");
        goto done;
    }
    for (uint32_t i = 0; i < BENCH_PROMPT; i++)
        tokens[i] = (uint32_t)(next_random(&e->rng) % n_vocab);
    /* a warm-up of each, then the repetitions */
    if (run_graph_warm(&e->state, &e->prefill[0], tokens, 0, 1) != 0)
        goto done;
    for (uint32_t r = 0; r < o->reps; r++) {
        double gpu, t0 = now_ms();
        if (run_graph_exec(&e->state, &e->prefill[0], tokens, 0, &gpu) != 0)
            goto done;
        pp[r] = now_ms() - t0;
        pp_gpu[r] = gpu;
    }
    /* generation as llama-bench runs it: from an empty cache, greedy, chained where --chain */
    run_graph *g = e->chain.steps ? &e->chain : &e->decode;
    if (run_graph_warm(&e->state, g, tokens, 0, 1) != 0)
        goto done;
    for (uint32_t r = 0; r < o->reps; r++) {
        uint32_t token = tokens[0];
        double gpu_sum = 0, t0 = now_ms();
        for (uint32_t i = 0; i < BENCH_GENERATE; i += g->steps) {
            double gpu;
            if (run_graph_exec(&e->state, g, &token, i, &gpu) != 0)
                goto done;
            gpu_sum += gpu;
            token = g->steps > 1 ? run_chain_tokens(&e->state)[g->steps - 1] : run_next_token(&e->state);
        }
        tg[r] = now_ms() - t0;
        tg_gpu[r] = gpu_sum;
    }
    double pp_ms = median(pp, o->reps), pp_gpu_ms = median(pp_gpu, o->reps);
    double tg_ms = median(tg, o->reps), tg_gpu_ms = median(tg_gpu, o->reps);
    printf("%-8s %12s %12s %14s %14s\n", "test", "t/s", "ms", "GPU t/s", "GPU ms");
    printf("pp%-6u %12.1f %12.3f %14.1f %14.3f\n", BENCH_PROMPT, BENCH_PROMPT / pp_ms * 1e3, pp_ms,
           pp_gpu_ms > 0 ? BENCH_PROMPT / pp_gpu_ms * 1e3 : 0.0, pp_gpu_ms);
    printf("tg%-6u %12.1f %12.3f %14.1f %14.3f   (%.4f ms per token; GPU %.4f; %u per submit)\n",
           BENCH_GENERATE, BENCH_GENERATE / tg_ms * 1e3, tg_ms, tg_gpu_ms > 0 ? BENCH_GENERATE / tg_gpu_ms * 1e3 : 0.0,
           tg_gpu_ms, tg_ms / BENCH_GENERATE, tg_gpu_ms / BENCH_GENERATE, g->steps);
    run_print_step(&e->model, &e->decode, tg_gpu_ms / BENCH_GENERATE, copy_bandwidth(e));
    if (o->profile) {
        hk_caps caps;
        hk_context_caps(e->ctx, &caps);
        if (!caps.timestamps) {
            fprintf(stderr, "hk-run: --profile needs GPU timestamps, which this device lacks\n");
            goto done;
        }
        printf("pp%u:\n", BENCH_PROMPT);
        if (run_profile(&e->state, BENCH_PROMPT, 0, o->reps, e->prefill[0].kernels, pp_gpu_ms) != 0)
            goto done;
        printf("a decode step at position %u:\n", BENCH_PROMPT);
        if (run_profile(&e->state, 1, BENCH_PROMPT, 4 * o->reps, e->decode.kernels, tg_gpu_ms / BENCH_GENERATE) != 0)
            goto done;
    }
    rc = 0;
done:
    free(tokens);
    free(pp);
    free(pp_gpu);
    free(tg);
    free(tg_gpu);
    return rc;
}

/* builds every pipeline the graphs need, then the graphs */
static int build(engine *e, const uint32_t *sizes, uint32_t n_sizes)
{
    run_tail tail = tail_of(e->o);
    /* greedy decoding without logits chains its steps */
    uint32_t chain = tail == RUN_TAIL_ARGMAX && e->o->chain > 1 ? e->o->chain : 0;
    hk_stream *prep;
    double t0 = now_ms();
    if (hk_stream_create_prepare(e->ctx, &prep) != HK_OK) {
        fprintf(stderr, "hk-run: %s\n", hk_last_error());
        return -1;
    }
    int rc = 0;
    for (uint32_t i = 0; i < n_sizes && rc == 0; i++)
        if (sizes[i])
            rc = run_record_graph(&e->state, prep, sizes[i], 1, tail);
    if (rc == 0 && chain)
        rc = run_record_graph(&e->state, prep, 1, chain, tail);
    hk_stream_destroy(prep);
    if (rc != 0)
        return -1;
    double prepare_ms = now_ms() - t0;
    for (uint32_t i = 0; i < 2; i++)
        if (sizes[i] && run_graph_build(&e->state, &e->prefill[i], sizes[i], 1, tail) != 0)
            return -1;
    if (run_graph_build(&e->state, &e->decode, 1, 1, tail) != 0)
        return -1;
    if (chain && run_graph_build(&e->state, &e->chain, 1, chain, tail) != 0)
        return -1;
    fprintf(stderr, "hk-run: %u pipelines built in %.0f ms, graphs recorded\n", hk_context_pipeline_count(e->ctx),
            prepare_ms);
    return 0;
}

static int run(engine *e, const gguf_file *f)
{
    options *o = e->o;
    char err[512];
    if (run_model_load(&e->model, f, err, sizeof err) != 0 ||
        run_vocab_load(&e->vocab, f, e->model.hp.n_vocab, err, sizeof err) != 0) {
        fprintf(stderr, "hk-run: %s: %s\n", o->path, err);
        return 2;
    }
    const run_hparams *hp = &e->model.hp;
    for (uint32_t i = 0; i < o->n_tokens; i++)
        if (o->tokens[i] >= hp->n_vocab) {
            fprintf(stderr, "hk-run: token id %u is past the vocabulary of %u\n", o->tokens[i], hp->n_vocab);
            return 2;
        }
    /* positions the run needs, and the batch sizes its graphs take */
    uint32_t n_prompt = o->bench ? BENCH_PROMPT
                        : o->logits_path ? (o->have_prompt_len ? o->prompt_len : o->n_tokens)
                                         : o->n_tokens;
    uint64_t needed = o->bench ? BENCH_PROMPT + BENCH_GENERATE
                      : o->logits_path            ? o->n_tokens
                      : o->n_generate             ? (uint64_t)o->n_tokens + o->n_generate - 1
                                                  : o->n_tokens;
    uint32_t capacity = o->capacity ? o->capacity : hp->ctx_train < 4096 ? hp->ctx_train : 4096;
    if (!o->capacity && o->bench && capacity < needed)
        capacity = (uint32_t)needed;
    if (needed > capacity) {
        fprintf(stderr, "hk-run: the run needs %llu positions, past the KV cache of %u (--ctx)\n",
                (unsigned long long)needed, capacity);
        return 2;
    }
    uint32_t batch = o->bench ? BENCH_PROMPT : o->batch < n_prompt ? o->batch : n_prompt;
    uint32_t sizes[3] = {batch, n_prompt % batch, 1};
    printf("%s: %s, %u layers, %u embedding, %u heads (%u kv) of %u, vocabulary %u", o->path, hp->arch_name,
           hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_vocab);
    if (hp->n_expert)
        printf(", %u experts (%u used) of %u", hp->n_expert, hp->n_expert_used, hp->n_ff_exp);
    else
        printf(", feed-forward %u", hp->n_ff);
    printf("\n");

    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.device_index = o->device_index;
    desc.device_name = o->device_name;
    desc.enable_validation = o->validate;
    desc.disable_features = o->no_coopmat ? HK_FEATURE_COOPMAT_KHR : 0;
    if (hk_context_create(&desc, &e->ctx) != HK_OK) {
        fprintf(stderr, "hk-run: %s\n", hk_last_error());
        return 1;
    }
    if (run_vulkan_load(e->ctx) != 0)
        return 1;
    hk_caps caps;
    hk_context_caps(e->ctx, &caps);
    if (o->validate && !hk_context_validation_active(e->ctx)) {
        fprintf(stderr, "hk-run: --validate: the validation layer is not installed\n");
        return 1;
    }
    double t0 = now_ms();
    if (run_model_upload(&e->model, e->ctx) != 0)
        return 1;
    printf("device: %s; weights %.1f MiB uploaded in %.0f ms; matrix path %s\n", caps.device_name,
           run_pack_bytes(&e->model.pack) / MIB, now_ms() - t0,
           hk_mmq_path(e->ctx, HK_TYPE_Q4_K) ? hk_mmq_path(e->ctx, HK_TYPE_Q4_K) : "-");
    if (run_state_create(&e->state, e->ctx, &e->model, batch, o->chain, capacity, o->kv_type, sizes, 3,
                         o->temperature) != 0)
        return 1;
    e->state.f32_activations = o->f32_activations;
    for (uint32_t i = 0; i < o->n_forms; i++)
        run_form_set(&e->state, o->forms[i], 1);
    if (build(e, sizes, 3) != 0)
        return 1;
    if (o->temperature > 0 && !(e->scratch = calloc(hp->n_vocab, sizeof *e->scratch))) {
        fprintf(stderr, "hk-run: out of memory\n");
        return 1;
    }
    e->rng = o->seed;
    return o->bench ? run_bench(e) : generate(e);
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(&o, argc, argv);
    if (rc >= 0) {
        free(o.tokens);
        return rc;
    }
    engine e = {0};
    e.o = &o;
    gguf_mapping map;
    gguf_file f;
    char err[512];
    if (gguf_map(o.path, &map, err, sizeof err) != 0) {
        fprintf(stderr, "hk-run: %s\n", err);
        free(o.tokens);
        return 2;
    }
    if (gguf_parse(&f, map.data, map.size, err, sizeof err) != 0) {
        fprintf(stderr, "hk-run: %s: not a valid GGUF file: %s\n", o.path, err);
        gguf_unmap(&map);
        free(o.tokens);
        return 2;
    }
    if (o.logits_path && !(e.logits = bench_create("hk-run", o.logits_path)))
        rc = 2;
    else
        rc = run(&e, &f);
    if (e.logits && fclose(e.logits) != 0 && rc == 0) {
        fprintf(stderr, "hk-run: writing %s failed\n", o.logits_path);
        rc = 1;
    }
    for (uint32_t i = 0; i < 2; i++)
        run_graph_free(&e.state, &e.prefill[i]);
    run_graph_free(&e.state, &e.decode);
    run_graph_free(&e.state, &e.chain);
    run_state_destroy(&e.state);
    run_model_free(&e.model);
    run_vocab_free(&e.vocab);
    free(e.scratch);
    if (e.ctx) {
        uint32_t messages = hk_context_validation_messages(e.ctx);
        hk_context_destroy(e.ctx);
        if (messages) {
            fprintf(stderr, "hk-run: %u validation messages\n", messages);
            if (rc == 0)
                rc = 1;
        }
    }
    gguf_free(&f);
    gguf_unmap(&map);
    free(o.tokens);
    return rc;
}
