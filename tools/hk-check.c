/* hk-check: parity and bandwidth of every kernel of the table (src/cases/cases.h) on one device.
 *
 * For each kernel and shape: run it once into poisoned outputs and compare with the C reference
 * at the gate the tests use, then time it cold — weights rotated over enough copies that their
 * footprint is well past the GPU's last-level cache, many dispatches recorded in one stream, GPU
 * timestamps — and report GB/s on the real bytes moved (and TFLOP/s for compute-bound kernels)
 * beside the device's own copy bandwidth measured right after the row. Exits 1 if any row fails
 * its gate, 2 on a usage or setup error.
 */
#include "gguf_check.h"
#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: hk-check [options]\n"
               "Runs every kernel once against its C reference and times it on one device.\n"
               "       hk-check --gguf MODEL.gguf [options]\n"
               "Checks and times every tensor of your GGUF model (hk-check --gguf X --help: its options).\n"
               "       hk-check tune KERNEL [SHAPE] [--device N|NAME] [--force] [--seed N] [--budget N] [--quiet]\n"
               "Searches KERNEL's schedule for SHAPE on one device and writes the winner\n"
               "to the tune cache (hk-check tune --help).\n");
    bench_options_help(f);
}

static void tune_usage(FILE *f)
{
    fprintf(f, "usage: hk-check tune KERNEL [SHAPE] [--device N|NAME] [--force] [--seed N] [--budget N] [--quiet]\n"
               "  KERNEL matvec_int8   SHAPE TYPE:ROWSxK                 (default q8_0:4096x4096)\n"
               "  KERNEL matvec_int8_tokens SHAPE TYPE:ROWSxKxTOKENS    (default q4_k:4096x4096x8; tokens 2..16)\n"
               "  KERNEL sdpa_decode   SHAPE TYPE:hH/kvHKV/dD/capC       (default f16:h32/kv8/d128/cap4096)\n"
               "  KERNEL gemm_f16      SHAPE TYPE:MxNxK                  (default q4_k:512x4096x4096)\n"
               "  KERNEL mmq           SHAPE TYPE:MxNxK                  (default q4_k:512x4096x4096)\n"
               "  KERNEL mmq_id        SHAPE TYPE:eE/nN/kK/tTOKENS/topK[/per-slot]\n"
               "                                                         (default q4_k:e128/n768/k2048/t512/top8)\n"
               "  KERNEL flash_prefill SHAPE TYPE:hH/kvHKV/dD/qNQ/capC[/causal]\n"
               "                                                         (default f16:h32/kv8/d128/q512/cap4096/causal)\n"
               "  KERNEL moe_matvec_int8 SHAPE TYPE:eE/nN/kK/sSLOTS[/per-slot]\n"
               "                                                         (default q4_k:e128/n768/k2048/s8)\n"
               "  TYPE: q8_0, q4_k, q6_k for weights (gemm_f16 also f16; the matvecs also q5_k); f32, f16, q8_0 for\n"
               "  KV caches.\n"
               "  Every number: decimal digits, 1 to 4294967295 (the tuner then checks the kernel's limits).\n"
               "  mmq_id: TOKENS x topK slots,\n"
               "  x per token (per-slot: x per slot, the down projection). flash_prefill: seq_k = capacity.\n"
               "  moe_matvec_int8: SLOTS routed slots (one token's top-k), one x for all (per-slot: x per slot).\n"
               "  The winner serves the shape's class (hk-check prints it): m, slots, queries and capacities\n"
               "  in the same power-of-two range share it. The fastest schedule wins only if, timed again in\n"
               "  turn with the default, it beats it by more than the noise measured (and 2%%); else the\n"
               "  default is kept, and stored as the winner.\n"
               "  --device    the device: an index or a name substring (default: HK_DEVICE, else the best)\n"
               "  --force     search even when the cache has a winner for the shape\n"
               "  --seed N    inputs and genetic draws (default 1)\n"
               "  --budget N  schedules measured at most (default 32)\n"
               "  --quiet     no line per schedule\n"
               "The cache: HK_TUNE_CACHE_DIR, else\n"
               "$XDG_CACHE_HOME/hkernel, else ~/.cache/hkernel (file tune.tsv).\n");
}

static int parse_type(const char *s, size_t n, hk_type *out)
{
    static const hk_type types[] = {HK_TYPE_F32, HK_TYPE_F16, HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q5_K, HK_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strlen(hk_type_name(types[i])) == n && !strncmp(s, hk_type_name(types[i]), n)) {
            *out = types[i];
            return 1;
        }
    return 0;
}

/* Reads a shape's dimensions (text, after "TYPE:") by a pattern: its literal characters match
 * themselves and each {NAME} a decimal number from 1 to UINT32_MAX, stored in the next of out;
 * then the text ends or holds option (NULL: none), which sets *has_option. Every number is read
 * whole and checked, so none wraps into another. 0 after a message naming the field and text. */
static int read_dims(const char *shape, const char *text, const char *pattern, uint32_t *const *out,
                     const char *option, int *has_option)
{
    const char *field = "the type";
    int n_field = (int)strlen(field);
    for (const char *p = pattern; *p;) {
        if (*p != '{') {
            size_t lit = strcspn(p, "{");
            if (strncmp(text, p, lit)) {
                fprintf(stderr, "hk-check tune: shape \"%s\": expected \"%.*s\" after %.*s, not \"%s\"\n", shape,
                        (int)lit, p, n_field, field, text);
                return 0;
            }
            text += lit;
            p += lit;
            continue;
        }
        field = p + 1;
        n_field = (int)strcspn(field, "}");
        p = field + n_field + 1;
        uint64_t v;
        const char *end;
        if (!option_number(text, UINT32_MAX, &v, &end) || v == 0) {
            /* the bad text: the digits, else what stands before the pattern's next character */
            size_t bad = strspn(text, "0123456789");
            if (!bad)
                bad = *p ? strcspn(text, (const char[]){*p, 0}) : strlen(text);
            fprintf(stderr, "hk-check tune: shape \"%s\": %.*s \"%.*s\" is not a number from 1 to %u\n", shape,
                    n_field, field, (int)bad, text, UINT32_MAX);
            return 0;
        }
        **out++ = (uint32_t)v;
        text = end;
    }
    if (option && !strcmp(text, option))
        *has_option = 1;
    else if (*text) {
        fprintf(stderr, "hk-check tune: shape \"%s\": unexpected \"%s\" after %.*s (%s%s%s)\n", shape, text,
                n_field, field, option ? "only \"" : "the shape ends there", option ? option : "",
                option ? "\" may follow" : "");
        return 0;
    }
    return 1;
}

/* Reads SHAPE (TYPE:dimensions in the kernel's format, tune_usage) into d. 0 after a message. */
static int read_shape(const char *shape, hk_tune_desc *d)
{
    const char *colon = strchr(shape, ':');
    hk_type type = HK_TYPE_F32;
    if (!colon || !parse_type(shape, (size_t)(colon - shape), &type)) {
        fprintf(stderr,
                "hk-check tune: shape \"%s\" does not start with a type and ':' (q8_0, q4_k, q5_k, q6_k, f32, f16)\n",
                shape);
        return 0;
    }
    const char *rest = colon + 1;
    int per_slot = 0;
    uint32_t tokens = 0;
    hk_tune_matvec_shape *mv = &d->shape.matvec;
    hk_tune_gemm_shape *gm = &d->shape.gemm;
    hk_tune_attention_shape *at = &d->shape.attention;
    switch (d->kernel) {
    case HK_TUNE_MATVEC_INT8:
        mv->wtype = type;
        mv->tokens = 1;
        return read_dims(shape, rest, "{rows}x{k}", (uint32_t *[]){&mv->rows, &mv->k}, NULL, NULL);
    case HK_TUNE_MATVEC_TOKENS:
        mv->wtype = type;
        return read_dims(shape, rest, "{rows}x{k}x{tokens}", (uint32_t *[]){&mv->rows, &mv->k, &mv->tokens}, NULL,
                         NULL);
    case HK_TUNE_SDPA_DECODE:
        at->kv_type = type;
        at->n_q = 1;
        return read_dims(shape, rest, "h{heads}/kv{kv_heads}/d{head_dim}/cap{capacity}",
                         (uint32_t *[]){&at->n_heads, &at->n_kv_heads, &at->head_dim, &at->capacity}, NULL, NULL);
    case HK_TUNE_GEMM_F16:
    case HK_TUNE_MMQ:
        gm->wtype = type;
        return read_dims(shape, rest, "{m}x{n}x{k}", (uint32_t *[]){&gm->m, &gm->n, &gm->k}, NULL, NULL);
    case HK_TUNE_MMQ_ID: {
        hk_tune_mmq_id_shape *id = &d->shape.mmq_id;
        id->wtype = type;
        if (!read_dims(shape, rest, "e{experts}/n{n}/k{k}/t{tokens}/top{top_k}",
                       (uint32_t *[]){&id->shape.n_experts, &id->shape.n, &id->shape.k, &tokens, &id->top_k},
                       "/per-slot", &per_slot))
            return 0;
        if ((uint64_t)tokens * id->top_k > UINT32_MAX) {
            fprintf(stderr, "hk-check tune: shape \"%s\": tokens x top_k = %llu slots, more than %u\n", shape,
                    (unsigned long long)tokens * id->top_k, UINT32_MAX);
            return 0;
        }
        id->shape.n_slots = tokens * id->top_k;
        id->shape.slots_per_x_row = per_slot ? 1 : id->top_k;
        return 1;
    }
    case HK_TUNE_MOE_MATVEC_INT8: {
        hk_tune_moe_shape *moe = &d->shape.moe;
        moe->wtype = type;
        if (!read_dims(shape, rest, "e{experts}/n{n}/k{k}/s{slots}",
                       (uint32_t *[]){&moe->shape.n_experts, &moe->shape.n, &moe->shape.k, &moe->shape.slots},
                       "/per-slot", &per_slot))
            return 0;
        moe->shape.x_per_slot = per_slot;
        return 1;
    }
    default:
        at->kv_type = type;
        return read_dims(shape, rest, "h{heads}/kv{kv_heads}/d{head_dim}/q{queries}/cap{capacity}",
                         (uint32_t *[]){&at->n_heads, &at->n_kv_heads, &at->head_dim, &at->n_q, &at->capacity},
                         "/causal", &at->causal);
    }
}

static int tune_main(int argc, char **argv)
{
    if (argc < 3 || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) {
        tune_usage(argc < 3 ? stderr : stdout);
        return argc < 3 ? 2 : 0;
    }
    hk_tune_desc d;
    hk_tune_desc_init(&d);
    d.verbose = 1;
    d.seed = 1;
    const char *shape = NULL;
    hk_context_desc cdesc;
    hk_context_desc_init(&cdesc);
    static const struct {
        const char *name;
        hk_tune_kernel kernel;
        const char *shape;
    } kernels[] = {
        {"matvec_int8", HK_TUNE_MATVEC_INT8, "q8_0:4096x4096"},
        {"matvec_int8_tokens", HK_TUNE_MATVEC_TOKENS, "q4_k:4096x4096x8"},
        {"sdpa_decode", HK_TUNE_SDPA_DECODE, "f16:h32/kv8/d128/cap4096"},
        {"gemm_f16", HK_TUNE_GEMM_F16, "q4_k:512x4096x4096"},
        {"mmq", HK_TUNE_MMQ, "q4_k:512x4096x4096"},
        {"mmq_id", HK_TUNE_MMQ_ID, "q4_k:e128/n768/k2048/t512/top8"},
        {"flash_prefill", HK_TUNE_FLASH_PREFILL, "f16:h32/kv8/d128/q512/cap4096/causal"},
        {"moe_matvec_int8", HK_TUNE_MOE_MATVEC_INT8, "q4_k:e128/n768/k2048/s8"},
    };
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0] && !shape; i++)
        if (!strcmp(argv[2], kernels[i].name)) {
            d.kernel = kernels[i].kernel;
            shape = kernels[i].shape;
        }
    if (!shape) {
        fprintf(stderr, "hk-check tune: unknown kernel \"%s\" (matvec_int8, matvec_int8_tokens, sdpa_decode, gemm_f16, "
                        "mmq, mmq_id, flash_prefill, moe_matvec_int8)\n", argv[2]);
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--force"))
            d.force = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            if (!device_option("hk-check tune: ", argv[++i], &cdesc.device_index, &cdesc.device_name))
                return 2;
        } else if (!strcmp(argv[i], "--quiet"))
            d.verbose = 0;
        else if ((!strcmp(argv[i], "--seed") || !strcmp(argv[i], "--budget")) && i + 1 < argc) {
            int budget = argv[i][2] == 'b';
            uint64_t v;
            const char *end;
            if (!option_number(argv[i + 1], budget ? 100000 : UINT64_MAX, &v, &end) || *end || (budget && !v)) {
                fprintf(stderr, "hk-check tune: %s \"%s\" is not a number from %d to %s\n", argv[i], argv[i + 1],
                        budget, budget ? "100000" : "2^64 - 1");
                return 2;
            }
            if (budget)
                d.max_measured = (uint32_t)v;
            else
                d.seed = v;
            i++;
        } else if (argv[i][0] != '-' && i == 3)
            shape = argv[i];
        else {
            fprintf(stderr, "hk-check tune: unknown argument \"%s\"\n", argv[i]);
            tune_usage(stderr);
            return 2;
        }
    }
    if (!read_shape(shape, &d)) {
        fprintf(stderr, "(hk-check tune --help lists each kernel's shape)\n");
        return 2;
    }
    hk_context *ctx = NULL;
    if (hk_context_create(&cdesc, &ctx) != HK_OK) {
        fprintf(stderr, "hk-check tune: %s\n", hk_last_error());
        return 2;
    }
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    printf("device: %s (subgroup %u, %u B shared memory)\ncache: %s\n", caps.device_name, caps.subgroup_size,
           caps.shared_memory_bytes, hk_tune_cache_file(ctx) ? hk_tune_cache_file(ctx) : "(none)");
    /* the arm the family runs here: a winner is this arm's */
    const char *arm = NULL;
    if (d.kernel == HK_TUNE_GEMM_F16)
        arm = hk_gemm_f16_path(ctx, d.shape.gemm.wtype);
    else if (d.kernel == HK_TUNE_MMQ)
        arm = hk_mmq_path(ctx, d.shape.gemm.wtype);
    else if (d.kernel == HK_TUNE_MMQ_ID)
        arm = hk_mmq_path(ctx, d.shape.mmq_id.wtype);
    if (arm)
        printf("arm: %s\n", arm);
    hk_tune_report r;
    hk_status st = hk_tune(ctx, &d, &r);
    int rc = 0;
    if (st != HK_OK) {
        fprintf(stderr, "hk-check tune: %s\n", hk_last_error());
        rc = 1;
    } else if (r.from_cache) {
        printf("%s %s: cached winner %s (nothing measured; --force searches again)\n", argv[2], r.shape, r.schedule);
    } else {
        printf("%s %s: %u schedules in the space, %u evaluated, %u measured, %u rejected before running, %u by the "
               "gate, %u the same plan as another\n",
               argv[2], r.shape, r.space, r.evaluated, r.measured, r.rejected_static, r.rejected_gate, r.duplicates);
        if (r.rejects[0])
            printf("rejected: %s\n", r.rejects);
        /* a winner must beat the default by more than the noise its repetitions showed, and 2% */
        char margin[96];
        if (r.noise >= 0.02)
            snprintf(margin, sizeof margin, "the measured noise of %.1f%%", 100 * r.noise);
        else
            snprintf(margin, sizeof margin, "the 2%% minimum; measured noise %.1f%%", 100 * r.noise);
        printf("default %-60s %10.5f ms\nwinner  %-60s %10.5f ms ", r.default_schedule, r.default_ms, r.schedule,
               r.best_ms);
        if (!r.candidate[0])
            printf("(%s)\n", isfinite(r.default_ms) ? "the default: no schedule measured faster"
                                                     : "the default failed its gate");
        else if (r.default_kept)
            printf("(default kept: the best candidate %s, %.5f ms, %.2fx, was within %s)\n", r.candidate,
                   r.candidate_ms, r.default_ms / r.candidate_ms, margin);
        else
            printf("(%.2fx, beyond %s)\n", r.default_ms / r.best_ms, margin);
    }
    hk_context_destroy(ctx);
    return rc;
}

static void check_row(bench *b, hk_case_run *run, hk_case_bound *bound)
{
    char detail[320];
    /* the last copy: the replication is checked too */
    double err = hk_case_check(run, bound, bound->copies - 1, detail, sizeof detail);
    timing t = time_case(b, run, bound);
    double gate = hk_case_gate(run);
    int ok = err < gate;
    b->failures += !ok;
    double gbs = run->bytes / (t.stream_ms * 1e-3) / 1e9, copy = copy_gbs(b);
    double tflops = run->flops ? run->flops / (t.stream_ms * 1e-3) / 1e12 : 0;
    char tf[16] = "-";
    if (run->flops)
        snprintf(tf, sizeof tf, "%.1f", tflops);
    char sched[160];
    printf("%-17s %-36s %9.2e %7.0e %-4s %10.4f %10.4f %9.1f %6.1f%% %8s %8.0f  %s\n", run->kcase->name, run->label,
           err, gate, ok ? "ok" : "FAIL", t.stream_ms, t.single_ms, gbs, 100.0 * gbs / copy, tf, copy,
           row_schedule(b, run, sched, sizeof sched));
    if (!ok)
        printf("    %s\n", detail);
    if (b->csv)
        fprintf(b->csv, "%s,%s,%s,%.3e,%.0e,%d,%.6f,%.6f,%.2f,%.4f,%.2f,%.1f\n", b->caps.device_name, run->kcase->name,
                run->label, err, gate, ok, t.stream_ms, t.single_ms, gbs, gbs / copy, tflops, copy);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "tune"))
        return tune_main(argc, argv);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--gguf"))
            return gguf_check_main(argc, argv);
    bench_options o;
    int rc = bench_parse(&o, argc, argv, "hk-check", usage, NULL);
    if (rc >= 0)
        return rc;
    bench b = {0};
    bench_open(&b, "hk-check", &o,
               "device,kernel,shape,scale_rel,gate,ok,ms_stream,ms_single,gbs,ratio_to_copy,tflops,copy_gbs");
    printf("%-17s %-36s %9s %7s %-4s %10s %10s %9s %7s %8s %8s  %s\n", "kernel", "shape", "error", "gate", "ok", "ms/op",
           "ms single", "GB/s", "of copy", "TFLOP/s", "copy", "schedule (tuned families)");
    for_each_case(&b, b.quick ? HK_REF_ALL : HK_REF_SAMPLE, check_row);
    printf("\n%s: %d row(s) failed their gate\n", b.failures ? "FAIL" : "OK", b.failures);
    int failures = b.failures;
    bench_close(&b);
    return failures ? 1 : 0;
}
