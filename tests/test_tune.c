/* The autotuner (hk_tune, include/hkernel.h): a search on a small shape finds a feasible,
 * reference-exact winner; a second search hits the cache and measures nothing; calls (on this
 * context and on a new one reading the file) take the cached winner and hk_schedule_last says so;
 * a planted wrong schedule is rejected by the gate; corrupt and stale cache lines are ignored
 * with a warning (and an earlier format's lines too); two processes tuning at once leave a valid
 * file holding both winners. The prefill families (gemm_f16, mmq, mmq_id, flash prefill): each
 * search finds a feasible winner that matches the reference, the plant is rejected, the cache is
 * hit, and a winner serves another shape of its class and no shape outside it. The MoE matvec:
 * an exhaustive search whose every schedule passes a gate of the reference and the default's bits,
 * the plant rejected, the winner serving its class (bit-identical) and not the others, a cached
 * winner the shape cannot run giving the default. The genetic
 * search is repeatable under fake times (HK_TUNE_FAKE_TIMES), and under fake noise a candidate
 * within it leaves the default the winner. Every cache lives in a temporary
 * directory, never the user's. Small shapes, few candidates: about a minute on lavapipe. */
#define _POSIX_C_SOURCE 200809L
#include "hk_test.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ---- */

static hk_context *context_in(const char *dir, int validation)
{
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.enable_validation = validation;
    desc.disable_pipeline_cache = 1;
    desc.tune_cache_dir = dir;
    hk_context *context = NULL;
    if (hk_context_create(&desc, &context) != HK_OK) {
        hk_check(0, "context", "%s", hk_last_error());
        return NULL;
    }
    return context;
}

/* A context whose winner cache has been read: the first look-up reads it. */
static hk_context *context_read(const char *dir, int validation)
{
    hk_context *context = context_in(dir, validation);
    if (context)
        hk_tune_cache_file(context);
    return context;
}

/* stderr going to a temporary file between capture_begin and capture_end, which returns what was
 * written (malloc'ed) and shows it in the test log */
typedef struct captured {
    char path[32];
    int fd, saved;
} captured;

static void capture_begin(captured *c)
{
    snprintf(c->path, sizeof c->path, "/tmp/hk_tune_stderrXXXXXX");
    c->fd = mkstemp(c->path);
    fflush(stderr);
    c->saved = dup(2);
    dup2(c->fd, 2);
}

static char *capture_end(captured *c)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    off_t n = lseek(c->fd, 0, SEEK_END);
    char *text = calloc((size_t)n + 1, 1);
    if (text && n > 0 && pread(c->fd, text, (size_t)n, 0) != n)
        text[0] = 0;
    close(c->fd);
    unlink(c->path);
    fputs(text ? text : "", stdout);
    return text;
}

/* Runs f(context) with stderr captured; returns what was written (malloc'ed). */
static char *capture_stderr(hk_context *(*f)(const char *, int), const char *dir, hk_context **out)
{
    captured c;
    capture_begin(&c);
    *out = f(dir, 1);
    return capture_end(&c);
}

static unsigned count_of(const char *text, const char *needle)
{
    unsigned n = 0;
    for (const char *s = text; (s = strstr(s, needle)); s += strlen(needle))
        n++;
    return n;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = calloc((size_t)n + 1, 1);
    if (text && fread(text, 1, (size_t)n, f) != (size_t)n)
        text[0] = 0;
    fclose(f);
    return text;
}

/* Every non-comment line has 9 tab-separated fields, starts with a format tag (hkernel-tune-2, or
 * an earlier format's kept) and ends with a newline. */
static int file_valid(const char *text, unsigned *lines)
{
    *lines = 0;
    if (!text)
        return 0;
    for (const char *s = text; *s;) {
        const char *end = strchr(s, '\n');
        if (!end)
            return 0;
        if (*s != '#') {
            unsigned tabs = 0;
            for (const char *c = s; c < end; c++)
                tabs += *c == '\t';
            if (tabs != 8 || (strncmp(s, "hkernel-tune-2\t", 15) && strncmp(s, "hkernel-tune-1\t", 15)))
                return 0;
            (*lines)++;
        }
        s = end + 1;
    }
    return 1;
}

/* ---- the int8 matvec case: seeded inputs, the reference, one call ---- */

/* tokens 1: hk_matvec_int8; more: hk_matvec_int8_tokens (x and y token after token) */
typedef struct mv_case {
    uint32_t rows, k, tokens;
    hk_type wtype;
    hk_buffer *w, *xq;
    hk_test_out y;
    float *ref;
} mv_case;

static void mv_prepare_tokens(hk_context *ctx, mv_case *c, hk_type wtype, uint32_t rows, uint32_t k, uint32_t tokens,
                              uint64_t seed)
{
    hk_rng rng = {seed};
    c->rows = rows;
    c->k = k;
    c->tokens = tokens;
    c->wtype = wtype;
    size_t n = (size_t)tokens * rows;
    uint8_t *w = hk_random_weights(&rng, (int)wtype, rows, k, 0);
    float *x = malloc((size_t)tokens * k * sizeof *x);
    hk_block_q8_1 *xq = malloc((size_t)tokens * k / 32 * sizeof *xq);
    c->ref = malloc(n * sizeof *c->ref);
    hk_rng_fill(&rng, x, (size_t)tokens * k, -1, 1);
    hk_quant_row_q8_1(x, xq, (size_t)tokens * k);
    for (uint32_t t = 0; t < tokens; t++)
        hk_ref_matvec_q8_1((int)wtype, w, xq + (size_t)t * (k / 32), c->ref + (size_t)t * rows, rows, k);
    c->w = hk_test_buffer(ctx, (uint64_t)rows * hk_type_bytes(wtype, k), w);
    c->xq = hk_test_buffer(ctx, (uint64_t)tokens * k / 32 * sizeof *xq, xq);
    c->y = hk_test_out_create(ctx, n);
    free(w);
    free(x);
    free(xq);
}

static void mv_prepare(hk_context *ctx, mv_case *c, hk_type wtype, uint32_t rows, uint32_t k, uint64_t seed)
{
    mv_prepare_tokens(ctx, c, wtype, rows, k, 1, seed);
}

static const float *mv_run(hk_context *ctx, mv_case *c, const char *name)
{
    hk_test_out_poison(&c->y);
    hk_view w = {c->w, 0}, xq = {c->xq, 0};
    hk_status st = c->tokens == 1
                       ? hk_matvec_int8(ctx, NULL, c->wtype, w, xq, hk_test_out_view(&c->y), c->rows, c->k)
                       : hk_matvec_int8_tokens(ctx, NULL, c->wtype, w, xq, hk_test_out_view(&c->y), c->rows, c->k,
                                               c->tokens);
    if (!hk_check_status(name, st, HK_OK, NULL))
        return NULL;
    return hk_test_out_read(&c->y, name);
}

/* The case's outputs from one hk_matvec_int8 call per token (malloc'ed; NULL on failure): the bits
 * every tokens schedule must give. */
static float *mv_separate(hk_context *ctx, mv_case *c)
{
    hk_test_out_poison(&c->y);
    hk_view yv = hk_test_out_view(&c->y);
    hk_status st = HK_OK;
    for (uint32_t t = 0; t < c->tokens && st == HK_OK; t++)
        st = hk_matvec_int8(ctx, NULL, c->wtype, (hk_view){c->w, 0},
                            (hk_view){c->xq, (uint64_t)t * (c->k / 32) * sizeof(hk_block_q8_1)},
                            (hk_view){yv.buffer, yv.offset + (uint64_t)t * c->rows * 4}, c->rows, c->k);
    const float *y = hk_check_status("separate hk_matvec_int8 calls", st, HK_OK, NULL)
                         ? hk_test_out_read(&c->y, "separate calls")
                         : NULL;
    size_t n = (size_t)c->tokens * c->rows;
    float *out = y ? malloc(n * sizeof *out) : NULL;
    if (out)
        memcpy(out, y, n * sizeof *out);
    return out;
}

static void mv_release(mv_case *c)
{
    hk_buffer_destroy(c->w);
    hk_buffer_destroy(c->xq);
    hk_test_out_destroy(&c->y);
    free(c->ref);
}

static hk_tune_desc mv_desc(hk_type wtype, uint32_t rows, uint32_t k)
{
    hk_tune_desc d;
    hk_tune_desc_init(&d);
    d.kernel = HK_TUNE_MATVEC_INT8;
    d.shape.matvec = (hk_tune_matvec_shape){wtype, rows, k, 1};
    d.seed = 11;
    d.repeats = 1;
    d.batch = 2;
    d.copies = 2;
    return d;
}

/* flash-decoding, f16 cache, 4 heads over 2, head_dim 64 */
static hk_tune_desc sdpa_desc(uint32_t capacity)
{
    hk_tune_desc d;
    hk_tune_desc_init(&d);
    d.kernel = HK_TUNE_SDPA_DECODE;
    d.shape.attention = (hk_tune_attention_shape){HK_TYPE_F16, 4, 2, 64, capacity, 1, 0};
    d.seed = 3;
    d.max_measured = 8;
    d.repeats = 1;
    d.batch = 2;
    d.copies = 2;
    d.verbose = 1;
    return d;
}

/* ---- two processes tuning at once ---- */

static int child_tune(const char *dir, uint32_t rows)
{
    hk_context *ctx = context_in(dir, 0);
    if (!ctx)
        return 1;
    int bad = 0;
    for (uint32_t k = 64; k <= 128 && !bad; k += 64) {
        hk_tune_desc d = mv_desc(HK_TYPE_Q8_0, rows, k);
        d.max_measured = 3;
        hk_tune_report r;
        bad = hk_tune(ctx, &d, &r) != HK_OK;
        if (bad)
            fprintf(stderr, "child %u: %s\n", rows, hk_last_error());
    }
    hk_context_destroy(ctx);
    return bad;
}

static void test_concurrent(const char *dir)
{
    pid_t pid[2];
    for (int i = 0; i < 2; i++) {
        fflush(stdout);
        pid[i] = fork();
        if (pid[i] == 0)
            _exit(child_tune(dir, 32 * (uint32_t)(i + 1)));
    }
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        int status = 0;
        ok &= pid[i] > 0 && waitpid(pid[i], &status, 0) == pid[i] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    hk_check(ok, "two processes tune at once", "a child failed");
    char path[700];
    snprintf(path, sizeof path, "%s/tune.tsv", dir);
    char *text = read_file(path);
    unsigned lines;
    int valid = file_valid(text, &lines);
    hk_check(valid && lines == 4, "concurrent tuners leave a valid file with every winner", "valid %d, %u lines:\n%s",
             valid, lines, text ? text : "(none)");
    free(text);
}

/* ---- the prefill families: search checks, and calls checked against the reference ---- */

static void print_report(const hk_tune_report *r)
{
    printf("  evaluated %u, measured %u, rejected %u static + %u gate, %u duplicates; winner %s (%.4f ms, default "
           "%s %.4f ms); %s\n",
           r->evaluated, r->measured, r->rejected_static, r->rejected_gate, r->duplicates, r->schedule, r->best_ms,
           r->default_schedule, r->default_ms, r->rejects);
}

/* hk_tune with a planted wrong schedule: a feasible winner within the budget, no slower than the
 * default, the plant rejected by the gate; then a second search hits the cache and measures
 * nothing. */
static int search_checks(hk_context *ctx, const char *name, const hk_tune_desc *d, hk_tune_report *r)
{
    char label[200];
    setenv("HK_TUNE_PLANT_WRONG", "1", 1);
    hk_status st = hk_tune(ctx, d, r);
    unsetenv("HK_TUNE_PLANT_WRONG");
    snprintf(label, sizeof label, "hk_tune %s", name);
    if (!hk_check_status(label, st, HK_OK, NULL))
        return 0;
    print_report(r);
    snprintf(label, sizeof label, "%s: search finds a feasible winner within its budget", name);
    hk_check(!r->from_cache && r->space > 64 && r->measured >= 1 && r->measured <= d->max_measured &&
                 isfinite(r->best_ms) && r->best_ms > 0 && r->best_ms <= r->default_ms &&
                 r->evaluated == r->measured + r->rejected_static + r->rejected_gate + r->duplicates,
             label, "space %u, evaluated %u, measured %u, best %g, default %g", r->space, r->evaluated, r->measured,
             r->best_ms, r->default_ms);
    snprintf(label, sizeof label, "%s: the planted schedule is rejected by the gate", name);
    hk_check(r->rejected_gate == 1 && strstr(r->rejects, "gate: scale_rel") != NULL, label, "%u: %s",
             r->rejected_gate, r->rejects);
    hk_tune_report r2;
    st = hk_tune(ctx, d, &r2);
    snprintf(label, sizeof label, "%s: a second search hits the cache and measures nothing", name);
    hk_check(st == HK_OK && r2.from_cache && r2.measured == 0 && r2.evaluated == 0 && !strcmp(r2.schedule, r->schedule) &&
                 !strcmp(r2.shape, r->shape),
             label, "from_cache %d, measured %u, %s", r2.from_cache, r2.measured, r2.schedule);
    return 1;
}

/* hk_schedule_last of a family: "tuned <winner>" (winner set) or "default ..." (winner NULL) */
static void expect_schedule(hk_context *ctx, hk_tune_kernel kernel, const char *winner, const char *name)
{
    char sched[160], want[200];
    hk_status st = hk_schedule_last(ctx, kernel, sched, sizeof sched);
    if (winner)
        snprintf(want, sizeof want, "tuned %s", winner);
    else
        snprintf(want, sizeof want, "default ");
    hk_check(st == HK_OK && !strncmp(sched, want, strlen(want)) && (!winner || !strcmp(sched, want)), name,
             "hk_schedule_last \"%s\", want \"%s%s\"", st == HK_OK ? sched : hk_last_error(), want, winner ? "" : "...");
}

static hk_tune_desc quick_desc(hk_tune_kernel kernel, hk_type wtype, uint32_t m, uint32_t n, uint32_t k)
{
    hk_tune_desc d;
    hk_tune_desc_init(&d);
    d.kernel = kernel;
    if (kernel == HK_TUNE_MMQ_ID) /* 4 experts, top-2, x per token */
        d.shape.mmq_id = (hk_tune_mmq_id_shape){wtype, {4, n, k, m, 2}, 2};
    else
        d.shape.gemm = (hk_tune_gemm_shape){wtype, m, n, k};
    d.seed = 21;
    d.max_measured = 2; /* the default and one more: each schedule is a pipeline for lavapipe to build,
                         * seconds each */
    d.repeats = 1;
    d.batch = 1;
    d.copies = 2;
    d.verbose = 1;
    return d;
}

/* hk_gemm_f16 (f32 x) or hk_mmq (Q8_1 x) on seeded inputs against the reference at the arm's gate */
static void gemm_run(hk_context *ctx, int mmq, hk_type type, uint32_t m, uint32_t n, uint32_t k, const char *name)
{
    hk_rng rng = {1000 + m};
    uint8_t *w = hk_random_weights(&rng, (int)type, n, k, 0);
    float *x = malloc((size_t)m * k * 4), *ref = malloc((size_t)m * n * 4), *ref16 = malloc((size_t)m * n * 4);
    hk_block_q8_1 *xq = malloc((size_t)m * (k / 32) * sizeof *xq);
    hk_rng_fill(&rng, x, (size_t)m * k, -1, 1);
    for (uint32_t r = 0; r < m; r++)
        hk_quant_row_q8_1(x + (size_t)r * k, xq + (size_t)r * (k / 32), k);
    if (mmq)
        hk_ref_mmq((int)type, w, xq, ref, m, n, k);
    else
        hk_ref_gemm((int)type, w, x, ref, m, n, k), hk_ref_gemm_f16((int)type, w, x, ref16, m, n, k);
    hk_buffer *wb = hk_test_buffer(ctx, (uint64_t)n * hk_type_bytes(type, k), w);
    hk_buffer *xb = mmq ? hk_test_buffer(ctx, (uint64_t)m * (k / 32) * sizeof *xq, xq) : hk_test_buffer(ctx, (uint64_t)m * k * 4, x);
    hk_test_out o = hk_test_out_create(ctx, (size_t)m * n);
    hk_status st = mmq ? hk_mmq(ctx, NULL, type, (hk_view){wb, 0}, (hk_view){xb, 0}, hk_test_out_view(&o), m, n, k)
                       : hk_gemm_f16(ctx, NULL, type, (hk_view){wb, 0}, (hk_view){xb, 0}, hk_test_out_view(&o), m, n, k);
    if (hk_check_status(name, st, HK_OK, NULL)) {
        const float *got = hk_test_out_read(&o, name);
        const char *arm = mmq ? hk_mmq_path(ctx, type) : NULL;
        hk_check_close(name, got, ref, (size_t)m * n,
                       !mmq ? HK_GATE_F16 : arm && !strcmp(arm, "coopmat") ? HK_GATE_MMQ_COOPMAT : HK_GATE_MMQ);
        if (!mmq && got) {
            double r16 = hk_scale_rel(got, ref16, (size_t)m * n);
            hk_check(r16 < HK_GATE_F16_OPERANDS, name, "against the f16-operand reference %.3e", r16);
        }
    }
    hk_test_out_destroy(&o);
    hk_buffer_destroy(wb);
    hk_buffer_destroy(xb);
    free(w), free(x), free(ref), free(ref16), free(xq);
}

/* hk_mmq_id: a seeded routing of tokens x top_k slots, x per token (per_slot 0) or per slot */
static void mmq_id_run(hk_context *ctx, hk_type type, uint32_t E, uint32_t n, uint32_t k, uint32_t tokens,
                       uint32_t top_k, int per_slot, const char *name)
{
    hk_rng rng = {2000 + tokens};
    uint32_t m = tokens * top_k, per_x = per_slot ? 1 : top_k, x_rows = m / per_x;
    uint8_t *w = hk_random_weights(&rng, (int)type, (size_t)E * n, k, 0);
    hk_block_q8_1 *xq = malloc((size_t)x_rows * (k / 32) * sizeof *xq);
    float *xf = malloc((size_t)k * 4), *ref = malloc((size_t)m * n * 4);
    for (uint32_t r = 0; r < x_rows; r++) {
        hk_rng_fill(&rng, xf, k, -1, 1);
        hk_quant_row_q8_1(xf, xq + (size_t)r * (k / 32), k);
    }
    uint32_t *ids = hk_random_routing(&rng, tokens, top_k, E), *offsets = malloc((E + 1) * 4), *slots = malloc(m * 4);
    uint32_t dropped;
    hk_ref_moe_expert_rows(ids, m, E, offsets, slots, &dropped);
    hk_ref_mmq_id((int)type, w, xq, offsets, slots, ref, E, n, k, m, per_x);
    hk_buffer *wb = hk_test_buffer(ctx, (uint64_t)E * n * hk_type_bytes(type, k), w);
    hk_buffer *xb = hk_test_buffer(ctx, (uint64_t)x_rows * (k / 32) * sizeof *xq, xq);
    hk_buffer *ob = hk_test_buffer(ctx, (E + 1) * 4, offsets), *sb = hk_test_buffer(ctx, m * 4, slots);
    hk_test_out o = hk_test_out_create(ctx, (size_t)m * n);
    hk_mmq_id_shape shape = {E, n, k, m, per_x};
    hk_status st = hk_mmq_id(ctx, NULL, type, (hk_view){wb, 0}, (hk_view){xb, 0}, (hk_view){ob, 0}, (hk_view){sb, 0},
                             hk_test_out_view(&o), &shape);
    const char *arm = hk_mmq_path(ctx, type);
    if (hk_check_status(name, st, HK_OK, NULL))
        hk_check_close(name, hk_test_out_read(&o, name), ref, (size_t)m * n,
                       arm && !strcmp(arm, "coopmat") ? HK_GATE_MMQ_COOPMAT : HK_GATE_MMQ);
    hk_test_out_destroy(&o);
    hk_buffer_destroy(wb), hk_buffer_destroy(xb), hk_buffer_destroy(ob), hk_buffer_destroy(sb);
    free(w), free(xq), free(xf), free(ref), free(ids), free(offsets), free(slots);
}

/* flash prefill on an f16 head-major cache of `capacity` rows, seq_k = capacity */
static void flash_run(hk_context *ctx, uint32_t n_q, uint32_t H, uint32_t Hkv, uint32_t D, uint32_t cap, int causal,
                      const char *name)
{
    hk_rng rng = {3000 + n_q};
    hk_sdpa_desc sd = {0};
    sd.n_q = n_q;
    sd.n_heads = H;
    sd.n_kv_heads = Hkv;
    sd.head_dim = D;
    sd.seq_k = cap;
    sd.scale = 1.0f / sqrtf((float)D);
    sd.causal = causal;
    sd.kv.type = HK_TYPE_F16;
    sd.kv.capacity = cap;
    sd.kv.k_row_stride = sd.kv.v_row_stride = 2 * D;
    sd.kv.k_head_stride = sd.kv.v_head_stride = (uint64_t)cap * 2 * D;
    size_t nq = (size_t)n_q * H * D, nv = (size_t)Hkv * cap * D;
    float *q = malloc(nq * 4), *kf = malloc(nv * 4), *vf = malloc(nv * 4), *ref = malloc(nq * 4);
    uint16_t *kh = malloc(nv * 2), *vh = malloc(nv * 2);
    hk_rng_fill(&rng, q, nq, -1, 1);
    hk_rng_fill(&rng, kf, nv, -1, 1);
    hk_rng_fill(&rng, vf, nv, -1, 1);
    for (size_t i = 0; i < nv; i++) {
        kh[i] = hk_f32_to_f16(kf[i]);
        vh[i] = hk_f32_to_f16(vf[i]);
        kf[i] = hk_f16_to_f32(kh[i]);
        vf[i] = hk_f16_to_f32(vh[i]);
    }
    hk_ref_sdpa(q, kf, vf, ref, n_q, H, Hkv, cap, D, sd.scale, causal); /* seq_k = capacity: packed */
    uint64_t ws = 0;
    hk_status st = hk_sdpa_workspace_bytes(ctx, &sd, &ws);
    hk_buffer *bq = hk_test_buffer(ctx, nq * 4, q), *bk = hk_test_buffer(ctx, nv * 2, kh),
              *bv = hk_test_buffer(ctx, nv * 2, vh), *bw = hk_test_buffer(ctx, ws ? ws : 4, NULL);
    hk_test_out o = hk_test_out_create(ctx, nq);
    if (st == HK_OK)
        st = hk_sdpa_blk(ctx, NULL, &sd, (hk_view){bq, 0}, (hk_view){bk, 0}, (hk_view){bv, 0}, hk_test_out_view(&o),
                         (hk_view){bw, 0}, (hk_view){NULL, 0});
    const char *arm = hk_sdpa_path(ctx, &sd);
    if (hk_check_status(name, st, HK_OK, NULL))
        hk_check_close(name, hk_test_out_read(&o, name), ref, nq,
                       arm && !strcmp(arm, "flash-coopmat") ? HK_GATE_SDPA_F16 : HK_GATE_F32);
    hk_test_out_destroy(&o);
    hk_buffer_destroy(bq), hk_buffer_destroy(bk), hk_buffer_destroy(bv), hk_buffer_destroy(bw);
    free(q), free(kf), free(vf), free(ref), free(kh), free(vh);
}

/* Each prefill family: a search on a small shape (genetic: the spaces are large), the plant
 * rejected, the cache hit; then a call at another shape of the class takes the winner and matches
 * the reference, and a call of another class takes the default. */
static void test_prefill_families(hk_context *ctx)
{
    hk_tune_report r;
    /* gemm_f16: tuned at m=20 (class m17-32), served at m=30 */
    hk_tune_desc d = quick_desc(HK_TUNE_GEMM_F16, HK_TYPE_Q4_K, 20, 48, 256);
    if (search_checks(ctx, "gemm_f16", &d, &r)) {
        hk_check(!strcmp(r.shape, "q4_k:m17-32/n48/k256"), "gemm_f16 shape class", "%s", r.shape);
        gemm_run(ctx, 0, HK_TYPE_Q4_K, 30, 48, 256, "gemm_f16 m=30 with the winner of m=20");
        expect_schedule(ctx, HK_TUNE_GEMM_F16, r.schedule, "gemm_f16: a shape of the class takes the winner");
        gemm_run(ctx, 0, HK_TYPE_Q4_K, 40, 48, 256, "gemm_f16 m=40 (another class)");
        expect_schedule(ctx, HK_TUNE_GEMM_F16, NULL, "gemm_f16: another class takes the default");
    }
    /* mmq: Q8_0 tuned at m=20, served at m=25 */
    d = quick_desc(HK_TUNE_MMQ, HK_TYPE_Q8_0, 20, 40, 96);
    if (search_checks(ctx, "mmq", &d, &r)) {
        gemm_run(ctx, 1, HK_TYPE_Q8_0, 25, 40, 96, "mmq m=25 with the winner of m=20");
        expect_schedule(ctx, HK_TUNE_MMQ, r.schedule, "mmq: a shape of the class takes the winner");
        gemm_run(ctx, 1, HK_TYPE_Q8_0, 25, 41, 96, "mmq n=41 (another class)");
        expect_schedule(ctx, HK_TUNE_MMQ, NULL, "mmq: another class takes the default");
    }
    /* mmq_id: 10 tokens top-2 over 4 experts (m=20, x per token), served at 14 tokens (m=28) */
    d = quick_desc(HK_TUNE_MMQ_ID, HK_TYPE_Q4_K, 20, 32, 256);
    if (search_checks(ctx, "mmq_id", &d, &r)) {
        hk_check(!strcmp(r.shape, "q4_k:e4/n32/k256/m17-32/x2"), "mmq_id shape class", "%s", r.shape);
        mmq_id_run(ctx, HK_TYPE_Q4_K, 4, 32, 256, 14, 2, 0, "mmq_id 14 tokens with the winner of 10");
        expect_schedule(ctx, HK_TUNE_MMQ_ID, r.schedule, "mmq_id: a shape of the class takes the winner");
        mmq_id_run(ctx, HK_TYPE_Q4_K, 4, 32, 256, 14, 2, 1, "mmq_id x per slot (another class)");
        expect_schedule(ctx, HK_TUNE_MMQ_ID, NULL, "mmq_id: another class takes the default");
    }
    /* flash prefill: causal, f16, tuned at 20 queries over 64 keys, served at 24 over 60 (the
     * flash-decoding test's heads) */
    d = sdpa_desc(64);
    d.kernel = HK_TUNE_FLASH_PREFILL;
    d.shape.attention.n_q = 20;
    d.shape.attention.causal = 1;
    d.seed = 4;
    d.max_measured = 2;
    d.batch = 1;
    if (search_checks(ctx, "flash_prefill", &d, &r)) {
        hk_check(!strcmp(r.shape, "f16:h4/kv2/d64/q17-32/cap33-64/causal"), "flash_prefill shape class", "%s", r.shape);
        flash_run(ctx, 24, 4, 2, 64, 60, 1, "flash 24 x 60 causal with the winner of 20 x 64");
        expect_schedule(ctx, HK_TUNE_FLASH_PREFILL, r.schedule, "flash_prefill: a shape of the class takes the winner");
        flash_run(ctx, 24, 4, 2, 64, 60, 0, "flash 24 x 60 not causal (another class)");
        expect_schedule(ctx, HK_TUNE_FLASH_PREFILL, NULL, "flash_prefill: another class takes the default");
    }
}

/* ---- the MoE matvec (hk_moe_matvec_int8) ---- */

typedef struct moe_case {
    hk_moe_shape shape;
    hk_type wtype;
    hk_buffer *w, *xq, *ids;
    hk_test_out y;
    float *ref;
} moe_case;

/* Raw random experts, a seeded routing with one id out of range (its outputs are zeros) where
 * there are 3 slots or more, x one Q8_1 row or one per slot; the reference
 * hk_ref_moe_matvec_q8_1. */
static void moe_prepare(hk_context *ctx, moe_case *c, hk_type wtype, uint32_t E, uint32_t n, uint32_t k,
                        uint32_t slots, int per_slot, uint64_t seed)
{
    hk_rng rng = {seed};
    c->shape = (hk_moe_shape){E, n, k, slots, per_slot};
    c->wtype = wtype;
    uint32_t xs = per_slot ? slots : 1;
    uint8_t *w = hk_random_weights(&rng, (int)wtype, (size_t)E * n, k, 1);
    float *x = malloc((size_t)xs * k * sizeof *x);
    hk_block_q8_1 *xq = malloc((size_t)xs * (k / 32) * sizeof *xq);
    uint32_t *ids = malloc(slots * sizeof *ids);
    hk_rng_fill(&rng, x, (size_t)xs * k, -1, 1);
    hk_quant_row_q8_1(x, xq, (size_t)xs * k);
    for (uint32_t s = 0; s < slots; s++)
        ids[s] = (uint32_t)(hk_rng_next(&rng) % E);
    if (slots >= 3)
        ids[1] = E;
    c->ref = malloc((size_t)slots * n * sizeof *c->ref);
    hk_ref_moe_matvec_q8_1((int)wtype, w, xq, per_slot, ids, c->ref, E, n, k, slots);
    c->w = hk_test_buffer(ctx, (uint64_t)E * n * hk_type_bytes(wtype, k), w);
    c->xq = hk_test_buffer(ctx, (uint64_t)xs * (k / 32) * sizeof *xq, xq);
    c->ids = hk_test_buffer(ctx, (uint64_t)slots * 4, ids);
    c->y = hk_test_out_create(ctx, (size_t)slots * n);
    free(w);
    free(x);
    free(xq);
    free(ids);
}

/* One call into a poisoned output, checked against the reference at the int8 gate */
static const float *moe_run(hk_context *ctx, moe_case *c, const char *name)
{
    hk_test_out_poison(&c->y);
    hk_status st = hk_moe_matvec_int8(ctx, NULL, c->wtype, (hk_view){c->w, 0}, (hk_view){c->xq, 0},
                                      (hk_view){c->ids, 0}, hk_test_out_view(&c->y), &c->shape);
    if (!hk_check_status(name, st, HK_OK, NULL))
        return NULL;
    const float *y = hk_test_out_read(&c->y, name);
    hk_check_close(name, y, c->ref, (size_t)c->shape.slots * c->shape.n, HK_GATE_EXACT);
    return y;
}

static void moe_release(moe_case *c)
{
    hk_buffer_destroy(c->w);
    hk_buffer_destroy(c->xq);
    hk_buffer_destroy(c->ids);
    hk_test_out_destroy(&c->y);
    free(c->ref);
}

/* Q8_0, 4 experts of 12 rows, k = 64: calls at 3 and 4 slots (class s3-4), 5 slots (s5-8) and 3
 * slots with x per slot take the default first (their bits kept). An exhaustive search at 3 slots
 * measures all 18 schedules (12 rows take nrows 1, 2 and 4), each held by the gate to the
 * reference and to the default's bits: so every schedule passes, bit-identical, and only the
 * planted one (half the rows) is rejected. The winner then serves 3 and 4 slots with the default's
 * bits, and the other two classes keep the default; a second search hits the cache. */
static void test_moe(hk_context *ctx)
{
    static const struct {
        uint32_t slots;
        int per_slot;
        const char *name;
    } cases[4] = {{3, 0, "moe 3 slots"}, {4, 0, "moe 4 slots (the class)"}, {5, 0, "moe 5 slots (another class)"},
                  {3, 1, "moe 3 slots x per slot (another class)"}};
    moe_case c[4];
    float *bits[4];
    char sched[160], label[200];
    for (int i = 0; i < 4; i++) {
        moe_prepare(ctx, &c[i], HK_TYPE_Q8_0, 4, 12, 64, cases[i].slots, cases[i].per_slot, 40 + (uint64_t)i);
        size_t n = (size_t)cases[i].slots * 12;
        const float *y = moe_run(ctx, &c[i], cases[i].name);
        bits[i] = malloc(n * sizeof *bits[i]);
        if (y)
            memcpy(bits[i], y, n * sizeof *bits[i]);
        else
            memset(bits[i], 0xFF, n * sizeof *bits[i]);
        hk_schedule_last(ctx, HK_TUNE_MOE_MATVEC_INT8, sched, sizeof sched);
        snprintf(label, sizeof label, "%s: without a winner, today's default", cases[i].name);
        hk_check(!strcmp(sched, "default nrows=1,items=1,load_bits=32"), label, "\"%s\"", sched);
    }

    hk_tune_desc d;
    hk_tune_desc_init(&d);
    d.kernel = HK_TUNE_MOE_MATVEC_INT8;
    d.shape.moe = (hk_tune_moe_shape){HK_TYPE_Q8_0, {4, 12, 64, 3, 0}};
    d.seed = 17;
    d.max_measured = 18;
    d.repeats = 1;
    d.batch = 1;
    d.copies = 2;
    d.verbose = 1;
    hk_tune_report r;
    setenv("HK_TUNE_PLANT_WRONG", "1", 1);
    hk_status st = hk_tune(ctx, &d, &r);
    unsetenv("HK_TUNE_PLANT_WRONG");
    if (hk_check_status("hk_tune moe_matvec_int8", st, HK_OK, NULL)) {
        print_report(&r);
        hk_check(!r.from_cache && r.space == 18 && !strcmp(r.shape, "q8_0:e4/n12/k64/s3-4") &&
                     !strcmp(r.default_schedule, "nrows=1,items=1,load_bits=32") && isfinite(r.best_ms) &&
                     r.best_ms > 0 && r.best_ms <= r.default_ms,
                 "moe search finds a feasible winner", "space %u, shape %s, default %s, best %g, default %g", r.space,
                 r.shape, r.default_schedule, r.best_ms, r.default_ms);
        hk_check(r.evaluated == 19 && r.measured == 18 && r.rejected_static == 0 && r.duplicates == 0,
                 "moe: every schedule passes the gate (the reference and the default's bits)",
                 "evaluated %u, measured %u, %u static, %u duplicates: %s", r.evaluated, r.measured, r.rejected_static,
                 r.duplicates, r.rejects);
        hk_check(r.rejected_gate == 1 && strstr(r.rejects, "gate: scale_rel") != NULL,
                 "moe: the planted schedule (half the rows) is rejected by the gate", "%u: %s", r.rejected_gate,
                 r.rejects);
        for (int i = 0; i < 4; i++) {
            const float *y = moe_run(ctx, &c[i], cases[i].name);
            snprintf(label, sizeof label, "%s: the same bits as the default", cases[i].name);
            hk_check(y && !memcmp(y, bits[i], (size_t)cases[i].slots * 12 * sizeof *y), label, "outputs differ");
            snprintf(label, sizeof label, "%s: %s", cases[i].name, i < 2 ? "takes the winner" : "takes the default");
            expect_schedule(ctx, HK_TUNE_MOE_MATVEC_INT8, i < 2 ? r.schedule : NULL, label);
        }
        hk_tune_report r2;
        st = hk_tune(ctx, &d, &r2);
        hk_check(st == HK_OK && r2.from_cache && r2.measured == 0 && r2.evaluated == 0 &&
                     !strcmp(r2.schedule, r.schedule),
                 "moe: a second search hits the cache", "from_cache %d, measured %u, %s", r2.from_cache, r2.measured,
                 r2.schedule);
    }
    hk_tune_desc bad = d;
    bad.shape.moe.shape.x_per_slot = 2;
    hk_check_status("hk_tune moe x_per_slot=2", hk_tune(ctx, &bad, &r), HK_ERROR_INVALID_ARGUMENT, "x_per_slot=2");
    bad = d;
    bad.shape.moe.shape.slots = 0;
    hk_check_status("hk_tune moe no slots", hk_tune(ctx, &bad, &r), HK_ERROR_INVALID_ARGUMENT, "slots=0");
    for (int i = 0; i < 4; i++) {
        moe_release(&c[i]);
        free(bits[i]);
    }
}

/* The genetic search (HK_TUNE_GENETIC) with HK_TUNE_FAKE_TIMES on the int8 matvec, whose 18
 * pipelines the exhaustive search already built: one seed, one sequence (trace) and winner; times
 * of another magnitude in the same order, the same; another seed, another sequence. 12 measured:
 * more than a first population holds, so generations (sorts and tournaments) ran. */
static void test_determinism(hk_context *ctx)
{
    hk_tune_desc d = mv_desc(HK_TYPE_Q8_0, 64, 256);
    d.max_measured = 12;
    d.force = 1;
    d.no_store = 1;
    hk_tune_report r[4];
    hk_status st[4];
    setenv("HK_TUNE_GENETIC", "1", 1);
    for (int i = 0; i < 4; i++) {
        setenv("HK_TUNE_FAKE_TIMES", i == 2 ? "2" : "1", 1);
        d.seed = i == 3 ? 8 : 7;
        st[i] = hk_tune(ctx, &d, &r[i]);
        printf("  seed %llu, times %d: trace %016llx, %u evaluated, %u measured, winner %s (%.4f ms)\n",
               (unsigned long long)d.seed, i == 2 ? 2 : 1, (unsigned long long)r[i].trace, r[i].evaluated,
               r[i].measured, r[i].schedule, r[i].best_ms);
    }
    unsetenv("HK_TUNE_FAKE_TIMES");
    unsetenv("HK_TUNE_GENETIC");
    hk_check(st[0] == HK_OK && st[1] == HK_OK && st[2] == HK_OK && st[3] == HK_OK, "searches with fake times", "%s",
             hk_last_error());
    hk_check(r[0].space == 18 && r[0].measured == 12 && r[0].best_ms >= 1 && r[0].best_ms < 2 && r[2].best_ms >= 1000,
             "a genetic search over generations, on fake times", "space %u, measured %u, best %g and %g", r[0].space,
             r[0].measured, r[0].best_ms, r[2].best_ms);
    hk_check(r[0].trace == r[1].trace && r[0].evaluated == r[1].evaluated && !strcmp(r[0].schedule, r[1].schedule),
             "one seed and one order of times: the same sequence and winner", "%016llx vs %016llx",
             (unsigned long long)r[0].trace, (unsigned long long)r[1].trace);
    hk_check(r[0].trace == r[2].trace && !strcmp(r[0].schedule, r[2].schedule),
             "times of another magnitude in the same order: the same sequence", "%016llx vs %016llx",
             (unsigned long long)r[0].trace, (unsigned long long)r[2].trace);
    hk_check(r[0].trace != r[3].trace, "another seed draws another sequence", "%016llx", (unsigned long long)r[3].trace);
}

/* The check of a winner against the default, on the int8 matvec's 18 schedules: with fake times
 * whose noise is larger than any gain (HK_TUNE_FAKE_TIMES=3) the search's best candidate, timed
 * again in turn with the default, is more than 2% faster yet within the noise, and the default
 * is stored and served; with noiseless fake times (=1) a candidate more than 2% faster is stored
 * and served. */
static void test_noise(hk_context *ctx, mv_case *mv)
{
    hk_tune_desc d = mv_desc(HK_TYPE_Q8_0, 64, 256);
    d.force = 1;
    d.verbose = 1;
    for (int noisy = 1; noisy >= 0; noisy--) {
        setenv("HK_TUNE_FAKE_TIMES", noisy ? "3" : "1", 1);
        hk_tune_report r;
        hk_status st = hk_tune(ctx, &d, &r);
        unsetenv("HK_TUNE_FAKE_TIMES");
        if (!hk_check_status(noisy ? "hk_tune, noisy fake times" : "hk_tune, fake times", st, HK_OK, NULL))
            return;
        printf("  winner %s (%.4f ms), default %s (%.4f ms), candidate %s (%.4f ms), noise %.3f, default kept %d\n",
               r.schedule, r.best_ms, r.default_schedule, r.default_ms, r.candidate, r.candidate_ms, r.noise,
               r.default_kept);
        const char *winner = noisy ? r.default_schedule : r.candidate;
        if (noisy)
            hk_check(r.candidate[0] && strcmp(r.candidate, r.default_schedule) && r.default_kept &&
                         fabs(r.noise - 0.5) < 1e-9 && r.default_ms > 1.02 * r.candidate_ms &&
                         !strcmp(r.schedule, r.default_schedule) && r.best_ms == r.default_ms,
                     "a candidate faster than the default within the noise: the default kept",
                     "candidate \"%s\", noise %g, kept %d, winner %s", r.candidate, r.noise, r.default_kept,
                     r.schedule);
        else
            hk_check(r.candidate[0] && !r.default_kept && r.noise == 0 && r.default_ms > 1.02 * r.best_ms &&
                         !strcmp(r.schedule, r.candidate) && r.best_ms == r.candidate_ms,
                     "a candidate beyond the noise and 2% faster: the winner",
                     "candidate \"%s\", noise %g, kept %d, default %g, best %g", r.candidate, r.noise,
                     r.default_kept, r.default_ms, r.best_ms);
        /* what the cache file holds and a call runs: the winner */
        char path[700], line[300];
        snprintf(path, sizeof path, "%s", hk_tune_cache_file(ctx));
        snprintf(line, sizeof line, "\tmatvec_int8\tq8_0:64x256\t%s\t", winner);
        char *text = read_file(path);
        hk_check(text && strstr(text, line), noisy ? "the default is stored" : "the candidate is stored",
                 "no line with \"%s\" in:\n%s", line, text ? text : "(none)");
        free(text);
        mv_run(ctx, mv, noisy ? "matvec, default kept" : "matvec, candidate stored");
        char sched[160], want[200];
        hk_schedule_last(ctx, HK_TUNE_MATVEC_INT8, sched, sizeof sched);
        snprintf(want, sizeof want, "tuned %s", winner);
        hk_check(!strcmp(sched, want), noisy ? "calls take the default kept" : "calls take the candidate stored",
                 "hk_schedule_last \"%s\", want \"%s\"", sched, want);
    }
}

/* ---- the winner cache when something is wrong at its path ----------------------------------
 * Each case: a fresh directory under base, something placed at tune.tsv or beside it, then a
 * context on it and a search that stores its winner: both come back (alarm), each warns on
 * stderr where it should, the winner serves the context from memory, and what was at the path is
 * left as it was. */

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL tune cache: hung (no answer within 60 s)\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(2);
    _exit(1);
}

/* base/name, created empty, into dir; its tune.tsv into file */
#define DIR_CHARS 500
#define FILE_CHARS 600
static void fresh_dir(const char *base, const char *name, char dir[DIR_CHARS], char file[FILE_CHARS])
{
    snprintf(dir, DIR_CHARS, "%s/%s", base, name);
    hk_check(mkdir(dir, 0755) == 0, "tune cache: a fresh directory", "%s", dir);
    snprintf(file, FILE_CHARS, "%s/tune.tsv", dir);
}

/* load_want, store_want: what creating the context and storing a winner must warn (NULL: no
 * warning of the tuner's) */
static void cache_case(const char *name, const char *dir, const char *load_want, const char *store_want)
{
    char label[200];
    alarm(60);
    captured cap;
    capture_begin(&cap);
    hk_context *c = context_in(dir, 0);
    char *text = capture_end(&cap);
    snprintf(label, sizeof label, "tune cache %s: context created without reading it", name);
    hk_check(c && text && !strstr(text, "hkernel: tune cache: "), label, "%s", text ? text : "");
    free(text);
    capture_begin(&cap);
    if (c)
        hk_tune_cache_file(c);
    text = capture_end(&cap);
    snprintf(label, sizeof label, "tune cache %s: read at the first look-up, %s", name,
             load_want ? "warned" : "no warning");
    hk_check(c && text && (load_want ? strstr(text, "hkernel: tune cache: ") && strstr(text, load_want)
                                   : !strstr(text, "hkernel: tune cache: ")), label,
             "want \"%s\"", load_want ? load_want : "");
    free(text);
    if (c) {
        hk_tune_desc d = mv_desc(HK_TYPE_Q8_0, 32, 128);
        d.max_measured = 2;
        hk_tune_report r, r2;
        capture_begin(&cap);
        hk_status st = hk_tune(c, &d, &r);
        text = capture_end(&cap);
        snprintf(label, sizeof label, "tune cache %s: a winner stored, %s", name, store_want ? "warned" : "no warning");
        hk_check(st == HK_OK && text &&
                     (store_want ? strstr(text, "hkernel: tune cache: ") && strstr(text, store_want)
                                 : !strstr(text, "hkernel: tune cache: ")),
                 label, "%s; want \"%s\"", hk_status_name(st), store_want ? store_want : "");
        free(text);
        st = hk_tune(c, &d, &r2);
        snprintf(label, sizeof label, "tune cache %s: the winner serves from memory", name);
        hk_check(st == HK_OK && r2.from_cache && !strcmp(r2.schedule, r.schedule), label, "from_cache %d", r2.from_cache);
        hk_context_destroy(c);
    }
    alarm(0);
}

static void test_cache_problems(const char *base, const char *line)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    char dir[DIR_CHARS], file[FILE_CHARS], target[700];
    struct stat st;

    /* a FIFO: opening it to read waits for a writer forever */
    fresh_dir(base, "fifo", dir, file);
    hk_check(mkfifo(file, 0644) == 0, "tune cache fifo: mkfifo", NULL);
    cache_case("fifo", dir, "not a regular file", "not replaced");
    hk_check(lstat(file, &st) == 0 && S_ISFIFO(st.st_mode), "tune cache fifo: left as it was", NULL);

    /* a device whose reads never end (/dev/zero's numbers) */
    fresh_dir(base, "device", dir, file);
    if (hk_test_zero_device(file)) {
        cache_case("device", dir, "not a regular file", "not replaced");
        hk_check(lstat(file, &st) == 0 && S_ISCHR(st.st_mode), "tune cache device: left as it was", NULL);
    }

    /* a directory */
    fresh_dir(base, "directory", dir, file);
    hk_check(mkdir(file, 0755) == 0, "tune cache directory: mkdir", NULL);
    cache_case("directory", dir, "not a regular file", "not replaced");
    hk_check(lstat(file, &st) == 0 && S_ISDIR(st.st_mode), "tune cache directory: left as it was", NULL);

    /* links to /dev/zero, to a FIFO, to a directory and to a valid cache: never followed */
    static const char *const links[] = {"/dev/zero", "fifo", "directory", "file"};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "link-%d", i);
        fresh_dir(base, name, dir, file);
        if (i == 0)
            snprintf(target, sizeof target, "%s", links[i]);
        else
            snprintf(target, sizeof target, "%s/target", dir);
        int made = i == 0 || (i == 1 && mkfifo(target, 0644) == 0) || (i == 2 && mkdir(target, 0755) == 0);
        if (i == 3) {
            FILE *f = fopen(target, "w");
            made = f && fputs(line, f) >= 0;
            made &= f && fclose(f) == 0;
        }
        snprintf(name, sizeof name, "tune cache link to %s: setup", links[i]);
        hk_check(made && symlink(target, file) == 0, name, NULL);
        snprintf(name, sizeof name, "link to %s", links[i]);
        cache_case(name, dir, "a symbolic link, not followed", "not replaced");
        snprintf(name, sizeof name, "tune cache link to %s: left as it was", links[i]);
        char *text = i == 3 ? read_file(target) : NULL;
        hk_check(lstat(file, &st) == 0 && S_ISLNK(st.st_mode) && (i != 3 || (text && !strcmp(text, line))), name, NULL);
        free(text);
    }

    /* a file past HK_TUNE_CACHE_MAX_BYTES (sparse): neither read nor replaced */
    fresh_dir(base, "huge", dir, file);
    int fd = open(file, O_WRONLY | O_CREAT, 0644);
    hk_check(fd >= 0 && ftruncate(fd, (off_t)HK_TUNE_CACHE_MAX_BYTES + 1) == 0, "tune cache huge: sparse file", NULL);
    if (fd >= 0)
        close(fd);
    cache_case("huge file", dir, "larger than HK_TUNE_CACHE_MAX_BYTES", "not replaced");
    long long bytes = stat(file, &st) == 0 ? (long long)st.st_size : -1;
    hk_check(bytes == (long long)HK_TUNE_CACHE_MAX_BYTES + 1, "tune cache huge: left as it was", "%lld bytes", bytes);

    /* overlong lines, one of them 3 MiB without a newline at the end: each skipped with a warning,
     * the valid line between them read; the rewritten file drops them */
    fresh_dir(base, "long-lines", dir, file);
    FILE *f = fopen(file, "w");
    for (int i = 0; f && i < 2000; i++)
        fputc('x', f);
    if (f)
        fprintf(f, "\n%s", line);
    for (int i = 0; f && i < 3 << 20; i++)
        fputc('\t', f);
    hk_check(f && fclose(f) == 0, "tune cache long lines: written", NULL);
    alarm(60);
    captured cap;
    capture_begin(&cap);
    hk_context *c = context_read(dir, 0);
    char *text = capture_end(&cap);
    hk_check(c && text && count_of(text, "line too long, ignored") == 2 && count_of(text, "hkernel: tune cache: ") == 2,
             "tune cache long lines: each warned about", "%s", text ? text : "");
    free(text);
    if (c) {
        hk_tune_report r;
        hk_tune_desc d = mv_desc(HK_TYPE_Q8_0, 64, 256);
        hk_status status = hk_tune(c, &d, &r);
        hk_check(status == HK_OK && r.from_cache, "tune cache long lines: the valid line between them read",
                 "%s, from_cache %d", hk_status_name(status), r.from_cache);
        hk_context_destroy(c);
    }
    alarm(0);
    cache_case("long lines", dir, "line too long", NULL);
    text = read_file(file);
    unsigned lines = 0;
    int valid = file_valid(text, &lines);
    hk_check(valid && lines == 2, "tune cache long lines: the rewritten file drops them", "%u lines", lines);
    free(text);

    /* a FIFO at the temporary file's name (tune.tsv.<pid>.tmp): under the lock it is a crashed
     * writer's, replaced */
    fresh_dir(base, "tmp-fifo", dir, file);
    snprintf(target, sizeof target, "%s.%ld.tmp", file, (long)getpid());
    hk_check(mkfifo(target, 0644) == 0, "tune cache temporary fifo: mkfifo", NULL);
    cache_case("temporary fifo", dir, NULL, NULL);
    text = read_file(file);
    valid = file_valid(text, &lines);
    hk_check(valid && lines == 1 && lstat(target, &st) != 0, "tune cache temporary fifo: file written", "%u lines", lines);
    free(text);

    /* the lock file a FIFO, or a link: neither opened */
    fresh_dir(base, "lock-fifo", dir, file);
    snprintf(target, sizeof target, "%s.lock", file);
    hk_check(mkfifo(target, 0644) == 0, "tune cache lock fifo: mkfifo", NULL);
    cache_case("lock fifo", dir, NULL, "not a regular file");
    hk_check(lstat(file, &st) != 0, "tune cache lock fifo: nothing written", NULL);
    fresh_dir(base, "lock-link", dir, file);
    snprintf(target, sizeof target, "%s.lock", file);
    hk_check(symlink("/dev/zero", target) == 0, "tune cache lock link: symlink", NULL);
    cache_case("lock link", dir, NULL, "a symbolic link, not followed");
    hk_check(lstat(file, &st) != 0, "tune cache lock link: nothing written", NULL);

    /* another process holding the lock and never letting go: the store gives up */
    fresh_dir(base, "lock-held", dir, file);
    snprintf(target, sizeof target, "%s.lock", file);
    int ready[2], hold[2];
    if (pipe(ready) != 0 || pipe(hold) != 0) {
        hk_check(0, "tune cache lock held: pipe", NULL);
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) { /* async-signal-safe calls only: this process has threads */
        close(ready[0]);
        close(hold[1]);
        char ok = 0;
        int lock = open(target, O_RDWR | O_CREAT, 0644);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        ok = lock >= 0 && fcntl(lock, F_SETLK, &fl) == 0;
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        while (read(hold[0], &ok, 1) > 0) /* until the parent closes its end */
            ;
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    char locked = 0;
    hk_check(pid > 0 && read(ready[0], &locked, 1) == 1 && locked, "tune cache lock held: another process locks", NULL);
    if (locked) {
        cache_case("lock held", dir, NULL, "held by another process");
        hk_check(lstat(file, &st) != 0, "tune cache lock held: nothing written", NULL);
    }
    close(ready[0]);
    close(hold[1]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

/* ---- main ---- */

int main(void)
{
    char base[] = "/tmp/hk_tune_testXXXXXX";
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    char dir_a[600], dir_b[600], dir_c[600];
    snprintf(dir_a, sizeof dir_a, "%s/a", base);
    snprintf(dir_b, sizeof dir_b, "%s/b", base);
    snprintf(dir_c, sizeof dir_c, "%s/c", base);
    /* never the user's cache: contexts that name no directory use this one */
    setenv("HK_TUNE_CACHE_DIR", dir_a, 1);
    unsetenv("HK_TUNE_PLANT_WRONG");

    /* before this process touches Vulkan: children fork from a clean process */
    test_concurrent(dir_c);

    hk_context *ctx = hk_test_context();
    hk_check(hk_tune_cache_file(ctx) && strstr(hk_tune_cache_file(ctx), dir_a) != NULL, "cache file from HK_TUNE_CACHE_DIR",
             "%s", hk_tune_cache_file(ctx) ? hk_tune_cache_file(ctx) : "(null)");
    char sched[160];
    hk_check_status("schedule before any call", hk_schedule_last(ctx, HK_TUNE_MATVEC_INT8, sched, sizeof sched),
                    HK_ERROR_STATE, "no matvec_int8 call");

    /* the default schedule's output, to compare the tuned one with bit for bit */
    mv_case mv;
    mv_prepare(ctx, &mv, HK_TYPE_Q8_0, 64, 256, 5);
    const float *y = mv_run(ctx, &mv, "matvec default");
    float *y_default = malloc(mv.rows * sizeof *y_default);
    if (y)
        memcpy(y_default, y, mv.rows * sizeof *y_default);
    hk_schedule_last(ctx, HK_TUNE_MATVEC_INT8, sched, sizeof sched);
    hk_check(!strncmp(sched, "default nrows=", 14), "a call without a winner takes the default", "%s", sched);

    /* search: exhaustive (18 schedules), a planted wrong one rejected by the gate */
    setenv("HK_TUNE_PLANT_WRONG", "1", 1);
    hk_tune_desc d = mv_desc(HK_TYPE_Q8_0, 64, 256);
    d.verbose = 1;
    hk_tune_report r;
    hk_status st = hk_tune(ctx, &d, &r);
    unsetenv("HK_TUNE_PLANT_WRONG");
    hk_check_status("hk_tune matvec_int8", st, HK_OK, NULL);
    printf("  evaluated %u, measured %u, rejected %u static + %u gate, %u duplicates; winner %s (%.4f ms, default "
           "%s %.4f ms); %s\n",
           r.evaluated, r.measured, r.rejected_static, r.rejected_gate, r.duplicates, r.schedule, r.best_ms,
           r.default_schedule, r.default_ms, r.rejects);
    hk_check(!r.from_cache && r.space == 18 && r.measured >= 1 && r.best_ms > 0 && isfinite(r.best_ms) &&
                 r.best_ms <= r.default_ms,
             "search finds a feasible winner", "measured %u, best %g, default %g", r.measured, r.best_ms, r.default_ms);
    /* every schedule once, and the planted one */
    hk_check(r.evaluated == r.measured + r.rejected_static + r.duplicates + r.rejected_gate && r.evaluated == 19,
             "search is exhaustive on a small space", "evaluated %u", r.evaluated);
    hk_check(r.rejected_gate == 1 && strstr(r.rejects, "gate: scale_rel") != NULL,
             "the planted schedule (half the rows) is rejected by the gate", "rejected_gate %u: %s", r.rejected_gate,
             r.rejects);

    /* the winner serves the next call, reference-exact and bit-identical to the default */
    y = mv_run(ctx, &mv, "matvec tuned");
    hk_check_close("tuned matvec against the reference", y, mv.ref, mv.rows, HK_GATE_EXACT);
    hk_check(y && !memcmp(y, y_default, mv.rows * sizeof *y), "tuned matvec bit-identical to the default", "outputs differ");
    hk_schedule_last(ctx, HK_TUNE_MATVEC_INT8, sched, sizeof sched);
    char want[200];
    snprintf(want, sizeof want, "tuned %s", r.schedule);
    hk_check(!strcmp(sched, want), "dispatch uses the winner", "hk_schedule_last \"%s\", want \"%s\"", sched, want);

    /* a second search hits the cache and measures nothing */
    hk_tune_report r2;
    st = hk_tune(ctx, &d, &r2);
    hk_check(st == HK_OK && r2.from_cache && r2.measured == 0 && r2.evaluated == 0 && !strcmp(r2.schedule, r.schedule),
             "second search hits the cache", "from_cache %d, measured %u, %s", r2.from_cache, r2.measured, r2.schedule);

    /* the tokens matvec: a genetic search (432 schedules) on a small shape with a row tail; the gate
     * is the reference at 1e-5 and the bits of hk_matvec_int8 on each token, which a planted
     * schedule (half the rows) fails; the winner serves hk_matvec_int8_tokens, bit-identical; a
     * second search hits the cache */
    mv_case mt;
    mv_prepare_tokens(ctx, &mt, HK_TYPE_Q4_K, 37, 512, 3, 21);
    float *y_separate = mv_separate(ctx, &mt);
    hk_tune_desc dt = mv_desc(HK_TYPE_Q4_K, 37, 512);
    dt.kernel = HK_TUNE_MATVEC_TOKENS;
    dt.shape.matvec.tokens = 3;
    dt.max_measured = 4;
    dt.verbose = 1;
    hk_tune_report rt;
    setenv("HK_TUNE_PLANT_WRONG", "1", 1);
    st = hk_tune(ctx, &dt, &rt);
    unsetenv("HK_TUNE_PLANT_WRONG");
    hk_check_status("hk_tune matvec_int8_tokens", st, HK_OK, NULL);
    printf("  evaluated %u, measured %u, rejected %u static + %u gate, %u duplicates; winner %s (%.4f ms, default "
           "%s %.4f ms); %s\n",
           rt.evaluated, rt.measured, rt.rejected_static, rt.rejected_gate, rt.duplicates, rt.schedule, rt.best_ms,
           rt.default_schedule, rt.default_ms, rt.rejects);
    hk_check(!rt.from_cache && rt.space == 432 && rt.measured >= 1 && rt.measured <= dt.max_measured &&
                 isfinite(rt.best_ms) && rt.best_ms <= rt.default_ms && !strcmp(rt.shape, "q4_k:37x512x3"),
             "tokens search finds a feasible winner within its budget", "space %u, measured %u, shape %s", rt.space,
             rt.measured, rt.shape);
    hk_check(!strcmp(rt.default_schedule, "subgroups=16,nrows=1,items=2,resident=1,wgs=128"),
             "tokens search starts from the default schedule (x resident)", "%s", rt.default_schedule);
    hk_check(rt.rejected_gate == 1 && strstr(rt.rejects, "gate: scale_rel") != NULL,
             "the planted tokens schedule (half the rows) is the only one the gate rejects", "rejected_gate %u: %s",
             rt.rejected_gate, rt.rejects);
    y = mv_run(ctx, &mt, "tokens matvec tuned");
    hk_check_close("tuned tokens matvec against the reference", y, mt.ref, (size_t)mt.tokens * mt.rows, HK_GATE_EXACT);
    hk_check(y && y_separate && !memcmp(y, y_separate, (size_t)mt.tokens * mt.rows * sizeof *y),
             "tuned tokens matvec bit-identical to hk_matvec_int8 per token", "outputs differ");
    hk_schedule_last(ctx, HK_TUNE_MATVEC_TOKENS, sched, sizeof sched);
    char want_t[200];
    snprintf(want_t, sizeof want_t, "tuned %s", rt.schedule);
    hk_check(!strcmp(sched, want_t), "hk_matvec_int8_tokens uses the winner", "hk_schedule_last \"%s\", want \"%s\"",
             sched, want_t);
    st = hk_tune(ctx, &dt, &r2);
    hk_check(st == HK_OK && r2.from_cache && r2.measured == 0 && r2.evaluated == 0 && !strcmp(r2.schedule, rt.schedule),
             "second tokens search hits the cache", "from_cache %d, measured %u, %s", r2.from_cache, r2.measured,
             r2.schedule);
    hk_tune_desc bad_tokens = dt;
    bad_tokens.shape.matvec.tokens = 1;
    hk_check_status("hk_tune tokens=1", hk_tune(ctx, &bad_tokens, &r2), HK_ERROR_INVALID_ARGUMENT, "tokens=1");
    bad_tokens.shape.matvec.tokens = 17;
    hk_check_status("hk_tune tokens=17", hk_tune(ctx, &bad_tokens, &r2), HK_ERROR_INVALID_ARGUMENT, "tokens=17");

    /* a new context reads the file when it is created */
    hk_context *ctx2 = context_in(NULL, 1);
    if (ctx2) {
        hk_tune_report r3;
        st = hk_tune(ctx2, &d, &r3);
        hk_check(st == HK_OK && r3.from_cache && r3.measured == 0, "a new context has the winner from the file",
                 "from_cache %d", r3.from_cache);
        mv_case mv2;
        mv_prepare(ctx2, &mv2, HK_TYPE_Q8_0, 64, 256, 5);
        y = mv_run(ctx2, &mv2, "matvec on a new context");
        hk_check(y && !memcmp(y, y_default, mv.rows * sizeof *y), "new context's tuned matvec bit-identical", "outputs differ");
        hk_schedule_last(ctx2, HK_TUNE_MATVEC_INT8, sched, sizeof sched);
        hk_check(!strcmp(sched, want), "new context dispatches the cached winner", "\"%s\"", sched);
        mv_release(&mv2);
        hk_check(hk_context_validation_messages(ctx2) == 0, "new context: no validation messages", "%u",
                 hk_context_validation_messages(ctx2));
        hk_context_destroy(ctx2);
    }

    /* flash-decoding: a large space (genetic search), static rejects with reasons, a planted
     * schedule that skips half the keys */
    hk_tune_desc ds = sdpa_desc(512);
    setenv("HK_TUNE_PLANT_WRONG", "1", 1);
    st = hk_tune(ctx, &ds, &r);
    unsetenv("HK_TUNE_PLANT_WRONG");
    hk_check_status("hk_tune sdpa_decode", st, HK_OK, NULL);
    printf("  evaluated %u, measured %u, rejected %u static + %u gate, %u duplicates; winner %s (%.4f ms, default "
           "%s %.4f ms); %s\n",
           r.evaluated, r.measured, r.rejected_static, r.rejected_gate, r.duplicates, r.schedule, r.best_ms,
           r.default_schedule, r.default_ms, r.rejects);
    hk_check(r.space > 64 && r.measured >= 1 && r.measured <= ds.max_measured && r.best_ms <= r.default_ms &&
                 r.rejected_static >= 1,
             "genetic search finds a winner within its budget", "space %u, measured %u", r.space, r.measured);
    hk_check(r.rejected_gate == 1 && strstr(r.rejects, "gate: scale_rel"), "planted sdpa schedule (half the keys) "
             "rejected by the gate", "%u: %s", r.rejected_gate, r.rejects);
    {
        /* the winner serves hk_sdpa_blk: compare with the reference at every seq_k's plan */
        hk_sdpa_desc sd = {0};
        sd.n_q = 1;
        sd.n_heads = 4;
        sd.n_kv_heads = 2;
        sd.head_dim = 64;
        sd.seq_k = 300;
        sd.scale = 0.125f;
        sd.kv.type = HK_TYPE_F16;
        sd.kv.capacity = 512;
        sd.kv.k_row_stride = sd.kv.v_row_stride = 128;
        sd.kv.k_head_stride = sd.kv.v_head_stride = 512 * 128;
        size_t nv = 2 * 512 * 64;
        hk_rng rng = {9};
        float *q = malloc(4 * 64 * 4), *kf = malloc(nv * 4), *vf = malloc(nv * 4), *ref = malloc(4 * 64 * 4);
        uint16_t *kh = malloc(nv * 2), *vh = malloc(nv * 2);
        hk_rng_fill(&rng, q, 256, -1, 1);
        hk_rng_fill(&rng, kf, nv, -1, 1);
        hk_rng_fill(&rng, vf, nv, -1, 1);
        for (size_t i = 0; i < nv; i++) {
            kh[i] = hk_f32_to_f16(kf[i]);
            vh[i] = hk_f32_to_f16(vf[i]);
            kf[i] = hk_f16_to_f32(kh[i]);
            vf[i] = hk_f16_to_f32(vh[i]);
        }
        /* packed [head][seq_k][d] for the reference */
        float *kp = malloc(2 * 300 * 64 * 4), *vp = malloc(2 * 300 * 64 * 4);
        for (int h = 0; h < 2; h++) {
            memcpy(kp + (size_t)h * 300 * 64, kf + (size_t)h * 512 * 64, 300 * 64 * 4);
            memcpy(vp + (size_t)h * 300 * 64, vf + (size_t)h * 512 * 64, 300 * 64 * 4);
        }
        hk_ref_sdpa(q, kp, vp, ref, 1, 4, 2, 300, 64, sd.scale, 0);
        uint64_t ws = 0;
        hk_sdpa_workspace_bytes(ctx, &sd, &ws);
        hk_buffer *bq = hk_test_buffer(ctx, 256 * 4, q), *bk = hk_test_buffer(ctx, nv * 2, kh),
                  *bv = hk_test_buffer(ctx, nv * 2, vh), *bw = hk_test_buffer(ctx, ws ? ws : 4, NULL);
        hk_test_out o = hk_test_out_create(ctx, 256);
        st = hk_sdpa_blk(ctx, NULL, &sd, (hk_view){bq, 0}, (hk_view){bk, 0}, (hk_view){bv, 0}, hk_test_out_view(&o),
                         (hk_view){bw, 0}, (hk_view){NULL, 0});
        hk_check_status("tuned hk_sdpa_blk", st, HK_OK, NULL);
        hk_check_close("tuned flash-decoding against the reference", hk_test_out_read(&o, "tuned sdpa"), ref, 256,
                       HK_GATE_F32);
        hk_schedule_last(ctx, HK_TUNE_SDPA_DECODE, sched, sizeof sched);
        snprintf(want, sizeof want, "tuned %s", r.schedule);
        hk_check(!strcmp(sched, want), "flash-decoding uses the winner", "\"%s\", want \"%s\"", sched, want);
        hk_test_out_destroy(&o);
        hk_buffer_destroy(bq);
        hk_buffer_destroy(bk);
        hk_buffer_destroy(bv);
        hk_buffer_destroy(bw);
        free(q), free(kf), free(vf), free(ref), free(kh), free(vh), free(kp), free(vp);
    }

    /* corrupt and stale lines: ignored with a warning, never a failure; other devices' kept */
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    char id[80];
    snprintf(id, sizeof id, "%04x\t%04x\t%08x", caps.vendor_id, caps.device_id, caps.driver_version);
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH);
    char path[700];
    snprintf(path, sizeof path, "%s", dir_b);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/tune.tsv", dir_b);
    FILE *f = fopen(path, "w");
    fprintf(f, "# a comment\n");
    fprintf(f, "this is not a cache line\n");
    fprintf(f, "hkernel-tune-2\t%s\t%s\tmatvec_int8\n", id, version); /* too few fields */
    fprintf(f, "hkernel-tune-2\t%s\t0.0.1\tmatvec_int8\tq8_0:64x256\tnrows=4,items=4,load_bits=16\t0.1\n", id);
    fprintf(f, "hkernel-tune-2\t%s\t%s\tmatvec_int8\tq8_0:64x256\tnrows=4,wide=1\t0.1\n", id, version);
    fprintf(f, "hkernel-tune-2\t%s\t%s\tmatvec_int8\tq8_0:64x256\tnrows=3,items=1,load_bits=32\t0.1\n", id, version);
    fprintf(f, "hkernel-tune-2\tbeef\t0001\t00000001\t%s\tmatvec_int8\tq8_0:64x256\tnrows=4,items=4,load_bits=16\t0.1\n",
            version);
    /* the previous format (exact shapes): this device's line is stale, never read, and kept */
    fprintf(f, "hkernel-tune-1\t%s\t%s\tmatvec_int8\tq8_0:64x256\tnrows=4,items=4,load_bits=16\t0.1\n", id, version);
    fprintf(f, "hkernel-tune-2\t%s\t%s\tmatvec_int8\tq8_0:64x256\tnrows=1,items=2,load_bits=16\t0.1\n", id, version);
    fprintf(f, "hkernel-tune-2\t%s\t%s\tmatvec_int8_tokens\tq4_k:37x512x3\tsubgroups=16,nrows=1,items=2,resident=0,"
               "wgs=3\t0.1\n", id, version);
    fprintf(f, "hkernel-tune-2\t%s\t%s\tmatvec_int8_tokens\tq4_k:37x512x3\tsubgroups=12,nrows=1,items=2,resident=0,"
               "wgs=3\t0.1\n", id, version); /* 12 subgroups: out of range */
    /* in range, but nrows=4 does not divide n=10: the call takes the default */
    fprintf(f, "hkernel-tune-2\t%s\t%s\tmoe_matvec_int8\tq8_0:e4/n10/k64/s3-4\tnrows=4,items=2,load_bits=16\t0.1\n",
            id, version);
    fclose(f);
    hk_context *ctx3 = NULL;
    char *warnings = capture_stderr(context_read, dir_b, &ctx3);
    hk_check(ctx3 != NULL, "a corrupt cache never fails context creation", "%s", hk_last_error());
    hk_check(warnings && count_of(warnings, "malformed line ignored") == 2 && count_of(warnings, "stale line ignored") == 2 &&
                 count_of(warnings, "cache format hkernel-tune-1") == 1 && count_of(warnings, "library 0.0.1") == 1,
             "corrupt lines and other formats and versions warned about when the cache is read", "%s",
             warnings ? warnings : "");
    free(warnings);
    if (ctx3) {
        /* a family's lines are checked against its parameters at its first look-up */
        captured lookups;
        capture_begin(&lookups);
        mv_case mv3;
        mv_prepare(ctx3, &mv3, HK_TYPE_Q8_0, 64, 256, 5);
        y = mv_run(ctx3, &mv3, "matvec from a repaired cache");
        hk_check(y && !memcmp(y, y_default, mv.rows * sizeof *y), "valid line's schedule bit-identical", "outputs differ");
        hk_schedule_last(ctx3, HK_TUNE_MATVEC_INT8, sched, sizeof sched);
        hk_check(!strcmp(sched, "tuned nrows=1,items=2,load_bits=16"), "the valid line serves, the others do not",
                 "\"%s\"", sched);
        mv_case mt3;
        mv_prepare_tokens(ctx3, &mt3, HK_TYPE_Q4_K, 37, 512, 3, 21);
        y = mv_run(ctx3, &mt3, "tokens matvec from a repaired cache");
        hk_check(y && y_separate && !memcmp(y, y_separate, (size_t)mt3.tokens * mt3.rows * sizeof *y),
                 "a cached tokens schedule is bit-identical too", "outputs differ");
        hk_schedule_last(ctx3, HK_TUNE_MATVEC_TOKENS, sched, sizeof sched);
        hk_check(!strcmp(sched, "tuned subgroups=16,nrows=1,items=2,resident=0,wgs=3"),
                 "the valid tokens line serves, the out-of-range one does not", "\"%s\"", sched);
        mv_release(&mt3);
        moe_case mc3;
        moe_prepare(ctx3, &mc3, HK_TYPE_Q8_0, 4, 10, 64, 3, 0, 50);
        moe_run(ctx3, &mc3, "moe with a cached winner it cannot run");
        hk_schedule_last(ctx3, HK_TUNE_MOE_MATVEC_INT8, sched, sizeof sched);
        hk_check(!strcmp(sched, "default nrows=1,items=1,load_bits=32"),
                 "a cached moe schedule whose nrows does not divide n gives the default", "\"%s\"", sched);
        moe_release(&mc3);
        warnings = capture_end(&lookups);
        hk_check(warnings && count_of(warnings, "stale line ignored (schedule") == 3 &&
                     count_of(warnings, "\"nrows=4,wide=1\" does not match") == 1 &&
                     count_of(warnings, "has a value out of range") == 2,
                 "schedules that no longer match their family warned about at its first look-up", "%s",
                 warnings ? warnings : "");
        free(warnings);
        /* a store rewrites the file: malformed lines dropped, other devices' and versions' kept */
        hk_tune_desc d3 = mv_desc(HK_TYPE_Q8_0, 32, 128);
        d3.max_measured = 2;
        st = hk_tune(ctx3, &d3, &r);
        hk_check_status("hk_tune into a repaired cache", st, HK_OK, NULL);
        char *text = read_file(path);
        unsigned lines = 0;
        int valid = file_valid(text, &lines);
        hk_check(valid && lines == 10 && strstr(text, "beef\t0001") && strstr(text, "\t0.0.1\t") &&
                     strstr(text, "hkernel-tune-1\t") && strstr(text, "q8_0:32x128"),
                 "rewritten file is valid and keeps others' lines", "%u lines:\n%s", lines, text ? text : "");
        free(text);
        mv_release(&mv3);
        hk_check(hk_context_validation_messages(ctx3) == 0, "repaired-cache context: no validation messages", "%u",
                 hk_context_validation_messages(ctx3));
        hk_context_destroy(ctx3);
    }

    test_prefill_families(ctx);
    test_moe(ctx);
    test_determinism(ctx);
    test_noise(ctx, &mv);
    {
        /* a valid line of this device: the winner of mv_desc(Q8_0, 64, 256) */
        char line[300];
        snprintf(line, sizeof line, "hkernel-tune-2\t%s\t%s\tmatvec_int8\tq8_0:64x256\tnrows=1,items=2,load_bits=16\t0.1\n",
                 id, version);
        test_cache_problems(base, line);
    }

    /* argument checks */
    hk_tune_desc bad = mv_desc(HK_TYPE_Q8_0, 64, 100);
    hk_check_status("hk_tune k not a block multiple", hk_tune(ctx, &bad, &r), HK_ERROR_INVALID_ARGUMENT, "k=100");
    bad = mv_desc(HK_TYPE_Q8_0, 64, 256);
    bad.kernel = (hk_tune_kernel)99;
    hk_check_status("hk_tune unknown kernel", hk_tune(ctx, &bad, &r), HK_ERROR_INVALID_ARGUMENT, "kernel=99");
    hk_check_status("hk_schedule_last small buffer", hk_schedule_last(ctx, HK_TUNE_MATVEC_INT8, sched, 4),
                    HK_ERROR_INVALID_ARGUMENT, "too small");
    bad = quick_desc(HK_TUNE_MMQ_ID, HK_TYPE_Q4_K, 21, 32, 256);
    hk_check_status("hk_tune mmq_id slots not a multiple of top_k", hk_tune(ctx, &bad, &r), HK_ERROR_INVALID_ARGUMENT,
                    "does not divide n_slots=21");
    bad = quick_desc(HK_TUNE_GEMM_F16, HK_TYPE_Q4_K, 0, 48, 256);
    hk_check_status("hk_tune gemm_f16 m=0", hk_tune(ctx, &bad, &r), HK_ERROR_INVALID_ARGUMENT, "m=0");
    hk_tune_desc_init(&bad);
    bad.kernel = HK_TUNE_FLASH_PREFILL;
    bad.shape.attention = (hk_tune_attention_shape){HK_TYPE_F16, 1, 1, 64, 16, 20, 1};
    hk_check_status("hk_tune flash_prefill causal past the capacity", hk_tune(ctx, &bad, &r), HK_ERROR_INVALID_ARGUMENT,
                    "n_q=20");

    free(y_default);
    free(y_separate);
    mv_release(&mt);
    mv_release(&mv);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        printf("could not remove %s\n", base);
    return hk_test_finish(ctx);
}
