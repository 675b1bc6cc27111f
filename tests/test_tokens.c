/* test_tokens.c — hk_matvec_int8_tokens: m tokens (x [m, k/32] Q8_1 blocks, y [m, rows]) against
 * one weight read.
 *
 *  - bit for bit (memcmp of the f32 outputs) against m separate hk_matvec_int8 calls on each
 *    token's blocks, for Q8_0, Q4_K, Q5_K and Q6_K, tokens 1, 2, 3, 5, 8, 16 (16 also at the k limit);
 *    rows 1, 7, 131, 2048 and 40000 (where one token runs 2 or 4 rows per subgroup and several
 *    tokens 2: a row's sums must not depend on it), k at one block, 2048, 6144 and the limit;
 *  - each token against the double reference hk_ref_matvec_q8_1 at HK_GATE_EXACT (on the scale of
 *    its outputs; below 8 rows on the sum of the absolute products, see terms_scale);
 *  - x from hk_quant_row_q8_1 on random activations of a different magnitude per token, and
 *    hand-made Q8_1 blocks whose s is wrong (finite, inf, NaN: never read); one token with a
 *    NaN-d block gives NaN for that token only;
 *  - every input flush against its buffer's end and at a padded offset (0xFF around it);
 *  - on the default context and on one without HK_FEATURE_INTEGER_DOT (the scalar-dot twin),
 *    which must give the same bits as the OpSDot kernel;
 *  - the tokens kernel's schedules (hkernel.h, HK_MATVEC_TOKENS_*, the autotuner's family
 *    HK_TUNE_MATVEC_TOKENS): every value of subgroups per workgroup, rows per subgroup, items per
 *    step, x resident or staged per step and workgroup caps down to 1, alone and together, on a
 *    tail of rows with x flush against its buffer's end or padded, give the same bits, and the
 *    kernel served what the hooks asked (hk_schedule_last) wherever it fits the device; x
 *    resident in several passes; tokens per pass; the one-token items per step and both Q8_0
 *    weight-load forms (against the separate calls, which the one-token hooks change instead);
 *  - lavapipe's loop limit: at the fewest workgroups the loop count allows, for shapes of many
 *    rows, x resident and staged, the bits are still the separate calls';
 *  - argument errors: tokens 0 and 17, xq or y too small for the tokens, misaligned views,
 *    overlap, the shape limits, bad tuning hooks; a refused call writes nothing.
 * Under GPU-assisted validation the many-rows shape is smaller (main says why).
 *
 * Each case is (1) tokens_build: seeded host inputs and the per-token reference, (2)
 * tokens_record / separate_record: the kernel (or the m single-token calls) on device views,
 * (3) tokens_compare: bit-identity and the reference gate.
 *
 * ---- shapes to bench (hk-bench on the H200, not here) --------------------------------------------
 * hk_matvec_int8_tokens, Q4_K, raw blocks, cold weights:
 *     4096 x 4096 at 8 tokens   (llama.cpp-vk 0.159 ms; goal <= 1.5 x our 1-token 0.0067 ms)
 *    14336 x 4096 at 8 tokens   (llama.cpp-vk 0.423 ms; goal <= 1.5 x our 1-token 0.0133 ms)
 *     4096 x 14336 at 8 tokens  (x too large to stay resident: staged per step)
 * each beside hk_matvec_int8 (1 token) on the same shape, and at tokens 2, 4, 16 for the curve.
 * Bytes of one op: the weights once (rows * k/256 * 144 for Q4_K) + tokens * k/32 * 36 (Q8_1 x) +
 * tokens * rows * 4 (y): 9.44 MB + 0.15 MB + 0.13 MB at 4096 x 4096 x 8.
 * ------------------------------------------------------------------------------------------------- */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- host data ------------------------------------------------------------------------------- */

enum { X_QUANTIZED, X_WRONG_S, X_NAN_BLOCK };
/* --small: the GPU-assisted validation run (main) */
static int small_only;

static const char *const x_kind_names[] = {"quantized x", "wrong-s x", "x with a NaN block"};

/* One case: weights, tokens rows of Q8_1 x and the per-token double reference. */
typedef struct tokens_case {
    hk_type type;
    uint32_t rows, k, tokens;
    int x_kind;
    uint8_t *w;
    size_t w_bytes;
    hk_block_q8_1 *xq; /* tokens * k/32 */
    size_t x_bytes;
    float *ref;        /* tokens * rows */
    char label[160];
} tokens_case;

/* (1) Builds the inputs and the reference; 0 if out of memory. */
static int tokens_build(tokens_case *c, hk_type type, uint32_t rows, uint32_t k, uint32_t tokens, int x_kind,
                        uint64_t seed)
{
    hk_rng rng = {seed};
    uint32_t blocks = k / 32;
    memset(c, 0, sizeof *c);
    c->type = type;
    c->rows = rows;
    c->k = k;
    c->tokens = tokens;
    c->x_kind = x_kind;
    c->w = hk_random_weights(&rng, (int)type, rows, k, (int)(seed & 1));
    c->w_bytes = hk_ref_row_bytes((int)type, k) * rows;
    c->x_bytes = (size_t)tokens * blocks * sizeof(hk_block_q8_1);
    c->xq = malloc(c->x_bytes);
    c->ref = malloc((size_t)tokens * rows * sizeof(float));
    float *x = malloc((size_t)k * sizeof(float));
    if (!c->w || !c->xq || !c->ref || !x) {
        free(x);
        return 0;
    }
    if (x_kind == X_WRONG_S) {
        hk_test_q8_1_wrong_s(&rng, c->xq, (size_t)tokens * blocks, 1);
    } else {
        /* each token its own magnitude, and within a token blocks from 1e-5 (subnormal d) up */
        static const float token_mags[] = {1.0f, 3e3f, 1e-3f, 0.02f, 7.0f, 300.0f, 0.5f};
        static const float block_mags[] = {1.0f, 1e-5f, 4.0f, 0.1f, 1.0f};
        for (uint32_t t = 0; t < tokens; t++) {
            for (uint32_t i = 0; i < k; i++)
                x[i] = hk_rng_uniform(&rng, -1.0f, 1.0f) * token_mags[t % 7] * block_mags[(i / 32) % 5];
            hk_quant_row_q8_1(x, c->xq + (size_t)t * blocks, k);
        }
        if (x_kind == X_NAN_BLOCK) /* token tokens/2: one block of d = NaN, as the quantizer writes it */
            c->xq[(size_t)(tokens / 2) * blocks + blocks / 2].d = 0x7E00;
    }
    free(x);
    for (uint32_t t = 0; t < tokens; t++)
        hk_ref_matvec_q8_1((int)type, c->w, c->xq + (size_t)t * blocks, c->ref + (size_t)t * rows, rows, k);
    snprintf(c->label, sizeof c->label, "%s %ux%u tokens=%u %s%s", hk_type_name(type), rows, k, tokens,
             x_kind_names[x_kind], seed & 1 ? " raw" : "");
    return 1;
}

static void tokens_free(tokens_case *c)
{
    free(c->w);
    free(c->xq);
    free(c->ref);
}

/* ---- (2) recorders ---------------------------------------------------------------------------- */

static hk_status tokens_record(hk_context *ctx, hk_stream *s, const tokens_case *c, hk_view w, hk_view xq, hk_view y)
{
    return hk_matvec_int8_tokens(ctx, s, c->type, w, xq, y, c->rows, c->k, c->tokens);
}

/* The same outputs from tokens separate hk_matvec_int8 calls on views into the same tensors. */
static hk_status separate_record(hk_context *ctx, hk_stream *s, const tokens_case *c, hk_view w, hk_view xq, hk_view y)
{
    for (uint32_t t = 0; t < c->tokens; t++) {
        hk_view xt = {xq.buffer, xq.offset + (uint64_t)t * (c->k / 32) * sizeof(hk_block_q8_1)};
        hk_view yt = {y.buffer, y.offset + (uint64_t)t * c->rows * sizeof(float)};
        hk_status st = hk_matvec_int8(ctx, s, c->type, w, xt, yt, c->rows, c->k);
        if (st != HK_OK)
            return st;
    }
    return HK_OK;
}

/* ---- (3) compare ------------------------------------------------------------------------------ */

/* Words of a and b that differ bit for bit (NaN against NaN counts as equal only where nan_equal:
 * the payload of a NaN result is not IEEE's to fix). */
static size_t words_differing(const float *a, const float *b, size_t n, int nan_equal)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&a[i], &b[i], 4) != 0 && !(nan_equal && isnan(a[i]) && isnan(b[i]));
    return bad;
}

/* The largest sum of absolute products of a token's rows, sum_i |deq(W[r])[i] * deq(x)[i]|: the
 * scale of a case of fewer than 8 rows, where the largest output may itself be a sum cancelled
 * to a fraction of its terms (seen: 7e-5 of them at 1 row, 16 tokens), which f32 rounding then
 * misses by far more than 1e-5 of that output. */
static double terms_scale(const tokens_case *c, uint32_t t)
{
    float *w = malloc(c->k * sizeof(float)), *x = malloc(c->k * sizeof(float));
    double scale = 0.0;
    if (!w || !x) {
        free(w);
        free(x);
        return NAN;
    }
    hk_dequant_row_q8_1(c->xq + (size_t)t * (c->k / 32), x, c->k);
    size_t row_bytes = hk_ref_row_bytes((int)c->type, c->k);
    for (uint32_t r = 0; r < c->rows; r++) {
        const void *row = c->w + r * row_bytes;
        if (c->type == HK_TYPE_Q8_0)
            hk_dequant_row_q8_0(row, w, c->k);
        else if (c->type == HK_TYPE_Q4_K)
            hk_dequant_row_q4_k(row, w, c->k);
        else if (c->type == HK_TYPE_Q5_K)
            hk_dequant_row_q5_k(row, w, c->k);
        else
            hk_dequant_row_q6_k(row, w, c->k);
        double sum = 0.0;
        for (uint32_t i = 0; i < c->k; i++)
            sum += fabs((double)w[i] * x[i]);
        if (sum > scale)
            scale = sum;
    }
    free(w);
    free(x);
    return scale;
}

/* Bit-identity with the separate calls, and each token at HK_GATE_EXACT of the reference on its
 * own scale: hk_scale_rel over its rows, or below 8 rows max|got - ref| / terms_scale. The NaN
 * token: every output that reads the NaN block NaN, i.e. all of its rows. */
static void tokens_compare(const char *name, const tokens_case *c, const float *got, const float *separate)
{
    size_t n = (size_t)c->tokens * c->rows;
    int has_nan = c->x_kind == X_NAN_BLOCK;
    char label[512];
    size_t bad = words_differing(got, separate, n, has_nan);
    snprintf(label, sizeof label, "%s: bit-identical to %u hk_matvec_int8 calls", name, c->tokens);
    hk_check(bad == 0, label, "%zu of %zu outputs differ%s", bad, n, has_nan ? " (NaN = NaN)" : "");
    double worst = 0.0;
    uint32_t nan_wrong = 0;
    for (uint32_t t = 0; t < c->tokens; t++) {
        const float *g = got + (size_t)t * c->rows, *r = c->ref + (size_t)t * c->rows;
        if (has_nan && t == c->tokens / 2) {
            for (uint32_t i = 0; i < c->rows; i++)
                nan_wrong += !isnan(g[i]) || !isnan(r[i]);
            continue;
        }
        double rel = hk_scale_rel(g, r, c->rows);
        if (c->rows < 8 && isfinite(rel)) {
            double err = 0.0;
            for (uint32_t i = 0; i < c->rows; i++)
                err = fmax(err, fabs((double)g[i] - r[i]));
            rel = err / terms_scale(c, t);
        }
        if (!(rel <= worst))
            worst = rel;
    }
    snprintf(label, sizeof label, "%s: every token at HK_GATE_EXACT of the double reference%s", name,
             c->rows < 8 ? " (scale: sum of |products|)" : "");
    hk_check(worst < HK_GATE_EXACT && nan_wrong == 0, label, "worst scale_rel=%.3e gate=%.0e%s", worst,
             HK_GATE_EXACT, has_nan ? (nan_wrong ? ", NaN token not all NaN" : ", NaN token all NaN") : "");
}

/* ---- running a case --------------------------------------------------------------------------- */

/* The weight offset: the smallest nonzero one hk_matvec_int8 takes (Q4_K and Q5_K read 16-byte
 * words) when flush, so that the weights may end 2 bytes past a word at the buffer's end; 0 padded. */
static uint64_t w_offset(hk_type type, int flush)
{
    return flush ? (type == HK_TYPE_Q4_K || type == HK_TYPE_Q5_K ? 16 : 2) : 0;
}

/* Runs the case on ctx (inputs flush or padded) through the tokens kernel and the separate calls,
 * compares, and returns the tokens kernel's outputs (malloc'd; NULL after a failed check). */
static float *run_case(hk_context *ctx, const char *arm, const tokens_case *c, int flush)
{
    char name[300];
    snprintf(name, sizeof name, "matvec_int8_tokens%s %s, inputs %s", arm, c->label, flush ? "flush" : "padded");
    size_t n = (size_t)c->tokens * c->rows;
    hk_view pw = hk_test_place(ctx, c->w, c->w_bytes, w_offset(c->type, flush), flush);
    hk_view px = hk_test_place(ctx, c->xq, c->x_bytes, flush ? 4 : 8, flush);
    hk_test_out y = hk_test_out_create(ctx, n), ys = hk_test_out_create(ctx, n);
    float *got = NULL;
    hk_status st = tokens_record(ctx, NULL, c, pw, px, hk_test_out_view(&y));
    hk_stream *s = NULL;
    if (st == HK_OK)
        st = hk_stream_create(ctx, 0, &s);
    if (st == HK_OK)
        st = separate_record(ctx, s, c, pw, px, hk_test_out_view(&ys));
    if (st == HK_OK)
        st = hk_stream_submit(s);
    hk_stream_destroy(s);
    if (st != HK_OK) {
        hk_check(0, name, "%s", hk_last_error());
    } else {
        const float *v = hk_test_out_read(&y, name);
        char sname[512];
        snprintf(sname, sizeof sname, "%s (separate calls)", name);
        const float *vs = hk_test_out_read(&ys, sname);
        if (v && vs) {
            tokens_compare(name, c, v, vs);
            got = malloc(n * sizeof *got);
            if (got)
                memcpy(got, v, n * sizeof *got);
        }
    }
    hk_test_out_destroy(&y);
    hk_test_out_destroy(&ys);
    hk_buffer_destroy(pw.buffer);
    hk_buffer_destroy(px.buffer);
    return got;
}

/* The case on the default context and, where there is one, the scalar-dot context; the two arms'
 * outputs must be the same bits (integer dot products are exact, the float operations the same
 * and uncontracted in both). */
static void check_case(hk_context *full, hk_context *scalar, hk_type type, uint32_t rows, uint32_t k, uint32_t tokens,
                       int x_kind, int flush, uint64_t seed)
{
    tokens_case c;
    if (!tokens_build(&c, type, rows, k, tokens, x_kind, seed)) {
        hk_check(0, "tokens case", "out of host memory");
        tokens_free(&c);
        return;
    }
    float *a = run_case(full, "", &c, flush);
    float *b = scalar ? run_case(scalar, " scalar-dot", &c, !flush) : NULL;
    if (a && b) {
        char label[512];
        size_t n = (size_t)tokens * rows;
        snprintf(label, sizeof label, "matvec_int8_tokens %s: scalar-dot arm bit-identical to the OpSDot arm", c.label);
        size_t bad = words_differing(a, b, n, x_kind == X_NAN_BLOCK);
        hk_check(bad == 0, label, "%zu of %zu outputs differ", bad, n);
    }
    free(a);
    free(b);
    tokens_free(&c);
}

/* ---- tuning hooks and schedules ---------------------------------------------------------------- */

/* The served schedule of the tokens kernel's last call on ctx ("env subgroups=8,nrows=2,...") */
static const char *served_schedule(hk_context *ctx, char *out, size_t size)
{
    if (hk_schedule_last(ctx, HK_TUNE_MATVEC_TOKENS, out, size) != HK_OK)
        snprintf(out, size, "(none: %s)", hk_last_error());
    return out;
}

/* Whether a schedule fits this device by hkernel.h's rule (the test's own copy of it): a workgroup
 * of subgroups * subgroup_size invocations; x resident, 40 bytes per block and token of all of k
 * (16 more); staged, 40 per block and token of a step's blocks (Q8_0 items * subgroup / 2, the
 * K-quants 2 * items * subgroup). The loop budget is left out: the shapes here are small. */
static int schedule_fits(hk_context *ctx, hk_type type, uint32_t k, uint32_t tokens, uint32_t subgroups,
                         uint32_t items, int resident)
{
    hk_caps caps;
    hk_context_caps(ctx, &caps);
    uint32_t sg = caps.subgroup_size;
    uint64_t blocks = resident ? k / 32 + (k / 32) % 2 : type == HK_TYPE_Q8_0 ? items * sg / 2 : 2 * items * sg;
    return sg * subgroups <= caps.max_workgroup_size && 16 + 40 * blocks * tokens <= caps.shared_memory_bytes;
}

/* The hooks set in `env` ("VAR=value ...") for one case of each type on a tail of rows (131: not a
 * multiple of any rows per workgroup) and a k of several staging chunks and sums-loop rounds on
 * every device here (Q8_0: 33 blocks, odd), inputs flush or padded: the tokens kernel and the
 * separate hk_matvec_int8 calls must give the same bits (and the reference gate), and where the
 * schedule fits the device the tokens kernel must have served exactly the hooks' values (else a
 * fallback would test nothing). types: bit 0 Q8_0, 1 Q4_K, 2 Q6_K, 3 Q5_K. */
static void check_hooks(hk_context *full, const char *env, uint32_t tokens, unsigned types, int resident_hint,
                        uint64_t *seed)
{
    static const struct {
        const char *var, *param;
    } names[] = {{"HK_MATVEC_TOKENS_SUBGROUPS", "subgroups"}, {"HK_MATVEC_TOKENS_NROWS", "nrows"},
                 {"HK_MATVEC_TOKENS_ITEMS", "items"},         {"HK_MATVEC_TOKENS_RESIDENT", "resident"},
                 {"HK_MATVEC_TOKENS_WGS", "wgs"}};
    static const hk_type all[] = {HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q6_K, HK_TYPE_Q5_K};
    char vars[8][48], want[8][48];
    int n = 0, nwant = 0;
    uint32_t subgroups = 0, items = 0;
    int resident = -1;
    printf("-- %s (%u tokens)\n", env, tokens);
    for (const char *p = env; *p && n < 8;) {
        size_t len = strcspn(p, " ");
        snprintf(vars[n], sizeof vars[n], "%.*s", (int)len, p);
        char *eq = strchr(vars[n], '=');
        if (eq) {
            *eq = 0;
            setenv(vars[n], eq + 1, 1);
            for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
                if (!strcmp(vars[n], names[i].var)) {
                    snprintf(want[nwant++], sizeof want[0], "%s=%s", names[i].param, eq + 1);
                    if (i == 0)
                        subgroups = (uint32_t)atoi(eq + 1);
                    if (i == 2)
                        items = (uint32_t)atoi(eq + 1);
                    if (i == 3)
                        resident = atoi(eq + 1);
                }
            n++;
        }
        p += len;
        p += *p == ' ';
    }
    for (int t = 0; t < 4; t++) {
        if (!(types >> t & 1))
            continue;
        uint32_t k = hk_type_block_values(all[t]) == 32 ? 1056 : 1024;
        /* the Q8_0-only hooks (the weight-load forms): the weights flush (a Q8_0 row 2 bytes into a
         * word) and padded; the others one placement, alternating */
        int one = (int)(*seed / 3 % 2);
        for (int flush = 0; flush < 2; flush++)
            if (types == 1 || flush == one)
                check_case(full, NULL, all[t], 131, k, tokens, X_QUANTIZED, flush, ++*seed);
        int res = resident >= 0 ? resident : resident_hint;
        uint32_t sub = subgroups ? subgroups : 8, it = items ? items : all[t] == HK_TYPE_Q8_0 ? 2 : 1;
        if (!nwant)
            continue; /* the one-token hooks, and the pass hook, which the schedule does not name */
        if (!schedule_fits(full, all[t], k, tokens, sub, it, res)) {
            printf("   (%s: the schedule does not fit this device; a fallback served it)\n", hk_type_name(all[t]));
            continue;
        }
        char sched[160], label[400];
        served_schedule(full, sched, sizeof sched);
        int ok = !strncmp(sched, "env ", 4);
        for (int i = 0; i < nwant; i++) {
            char *at = strstr(sched, want[i]);
            size_t len = strlen(want[i]);
            ok &= at && (at[len] == ',' || at[len] == 0) && (at == sched || at[-1] == ',' || at[-1] == ' ');
        }
        snprintf(label, sizeof label, "matvec_int8_tokens %s %s: the hooks' schedule served", hk_type_name(all[t]), env);
        hk_check(ok, label, "\"%s\"", sched);
    }
    for (int i = 0; i < n; i++)
        unsetenv(vars[i]);
}

/* The bisection over HK_MATVEC_TOKENS_WGS for the smallest workgroup cap the kernel takes as asked
 * for this shape (fewer workgroups: more row groups per subgroup, more loop iterations), probed on
 * a prepare stream (nothing runs); 0 if even 8192 is not served. */
static uint32_t smallest_cap(hk_context *ctx, const tokens_case *c, hk_view w, hk_view xq, hk_view y)
{
    hk_stream *ps = NULL;
    if (hk_stream_create_prepare(ctx, &ps) != HK_OK)
        return 0;
    uint32_t lo = 1, hi = 8193; /* the answer lies in [lo, hi); hi: none */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        char value[16], sched[160], want[32];
        snprintf(value, sizeof value, "%u", mid);
        setenv("HK_MATVEC_TOKENS_WGS", value, 1);
        snprintf(want, sizeof want, "wgs=%u", mid);
        int served = hk_matvec_int8_tokens(ctx, ps, c->type, w, xq, y, c->rows, c->k, c->tokens) == HK_OK &&
                     strstr(served_schedule(ctx, sched, sizeof sched), want) != NULL;
        if (served)
            hi = mid;
        else
            lo = mid + 1;
    }
    unsetenv("HK_MATVEC_TOKENS_WGS");
    hk_stream_destroy(ps);
    return hi <= 8192 ? hi : 0;
}

/* lavapipe ends loops after 65535 iterations per invocation and returns wrong numbers: the kernel
 * counts its loops (src/kernels/matvec.c, int8_loop_count) and refuses a schedule past 63000. A
 * schedule at the edge, the fewest workgroups it takes for a shape of many rows (each subgroup
 * then runs thousands of row groups), x resident and staged per step, must still give the bits of
 * the separate calls: a count that missed loops would fail here on lavapipe. */
static void test_loop_edge(hk_context *full, uint64_t *seed)
{
    static const struct {
        hk_type type;
        uint32_t rows, k;
    } shapes[] = {{HK_TYPE_Q8_0, 26096, 64}, {HK_TYPE_Q4_K, 38144, 256}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int resident = 1; resident >= 0; resident--) {
            tokens_case c;
            if (!tokens_build(&c, shapes[i].type, shapes[i].rows, shapes[i].k, 2, X_QUANTIZED, ++*seed)) {
                hk_check(0, "loop edge case", "out of host memory");
                tokens_free(&c);
                continue;
            }
            setenv("HK_MATVEC_TOKENS_RESIDENT", resident ? "1" : "0", 1);
            hk_view pw = hk_test_place(full, c.w, c.w_bytes, 0, 1), px = hk_test_place(full, c.xq, c.x_bytes, 4, 1);
            hk_test_out y = hk_test_out_create(full, (size_t)c.tokens * c.rows);
            uint32_t cap = smallest_cap(full, &c, pw, px, hk_test_out_view(&y));
            hk_test_out_destroy(&y);
            hk_buffer_destroy(pw.buffer);
            hk_buffer_destroy(px.buffer);
            char label[300], value[16];
            snprintf(label, sizeof label, "matvec_int8_tokens %s %s: a workgroup cap the kernel takes", c.label,
                     resident ? "resident" : "staged");
            hk_check(cap > 0, label, "smallest cap %u", cap);
            if (cap) {
                printf("-- %s, x %s: HK_MATVEC_TOKENS_WGS=%u, the fewest workgroups inside the loop budget\n",
                       c.label, resident ? "resident" : "staged", cap);
                snprintf(value, sizeof value, "%u", cap);
                setenv("HK_MATVEC_TOKENS_WGS", value, 1);
                float *got = run_case(full, resident ? " (loop edge, resident)" : " (loop edge, staged)", &c, 1);
                free(got);
                unsetenv("HK_MATVEC_TOKENS_WGS");
            }
            unsetenv("HK_MATVEC_TOKENS_RESIDENT");
            tokens_free(&c);
        }
}

/* Each hook on its own, then schedules of several at once: every value of every schedule
 * parameter (subgroups 4..32, nrows, items, x resident or staged, workgroup caps from 1 to 8192)
 * at least once in each mode; x resident in several passes (16 tokens of a k that does not fit
 * them all: on lavapipe passes of 12 and 4); the one-token hooks and both Q8_0 weight-load forms,
 * which the separate calls take too. The scalar-dot arm is left out: the hooks change no
 * arithmetic. */
static void test_tuning(hk_context *full, uint64_t seed)
{
    static const struct {
        const char *env;
        uint32_t tokens;
        unsigned types;
        int resident; /* the default's choice at this shape: k of 32 or 33 blocks fits */
        int small;    /* run under --small */
    } hooks[] = {
        {"HK_MATVEC_TOKENS_NROWS=1", 5, 7, 1, 0},
        {"HK_MATVEC_TOKENS_NROWS=4", 5, 7, 1, 0},
        {"HK_MATVEC_TOKENS_NROWS=4", 16, 15, 1, 0},
        {"HK_MATVEC_TOKENS_ITEMS=1", 5, 7, 1, 0},
        {"HK_MATVEC_TOKENS_ITEMS=4", 5, 15, 1, 0},
        {"HK_MATVEC_TOKENS_PASS=3", 5, 7, 1, 0},
        {"HK_MATVEC_TOKENS_SUBGROUPS=4", 5, 7, 1, 0},
        {"HK_MATVEC_TOKENS_SUBGROUPS=16", 5, 7, 1, 0},
        {"HK_MATVEC_TOKENS_SUBGROUPS=32", 3, 7, 1, 0},
        {"HK_MATVEC_TOKENS_RESIDENT=0", 5, 15, 1, 0},
        {"HK_MATVEC_TOKENS_RESIDENT=1", 7, 7, 1, 0},
        {"HK_MATVEC_TOKENS_WGS=1", 5, 7, 1, 1},
        {"HK_MATVEC_TOKENS_WGS=3", 5, 7, 1, 0},
        /* several at once: resident, then staged per step */
        {"HK_MATVEC_TOKENS_SUBGROUPS=4 HK_MATVEC_TOKENS_NROWS=4 HK_MATVEC_TOKENS_ITEMS=4 HK_MATVEC_TOKENS_RESIDENT=1 "
         "HK_MATVEC_TOKENS_WGS=2", 7, 15, 1, 0},
        {"HK_MATVEC_TOKENS_SUBGROUPS=32 HK_MATVEC_TOKENS_NROWS=1 HK_MATVEC_TOKENS_ITEMS=2 HK_MATVEC_TOKENS_RESIDENT=1 "
         "HK_MATVEC_TOKENS_WGS=8192", 5, 7, 1, 0},
        {"HK_MATVEC_TOKENS_SUBGROUPS=8 HK_MATVEC_TOKENS_NROWS=2 HK_MATVEC_TOKENS_ITEMS=4 HK_MATVEC_TOKENS_RESIDENT=0 "
         "HK_MATVEC_TOKENS_WGS=3", 4, 15, 0, 1},
        {"HK_MATVEC_TOKENS_SUBGROUPS=16 HK_MATVEC_TOKENS_NROWS=4 HK_MATVEC_TOKENS_ITEMS=1 HK_MATVEC_TOKENS_RESIDENT=0 "
         "HK_MATVEC_TOKENS_WGS=64", 9, 7, 0, 0},
        {"HK_MATVEC_TOKENS_SUBGROUPS=32 HK_MATVEC_TOKENS_NROWS=2 HK_MATVEC_TOKENS_ITEMS=2 HK_MATVEC_TOKENS_RESIDENT=0 "
         "HK_MATVEC_TOKENS_WGS=1", 2, 7, 0, 0},
        /* the one-token hooks (the separate calls take them too) */
        {"HK_MATVEC_INT8_ITEMS=2", 3, 7, 1, 1},
        {"HK_MATVEC_INT8_ITEMS=4", 3, 7, 1, 1},
        {"HK_MATVEC_Q8_0_LOAD_BITS=32", 3, 1, 1, 1},
        {"HK_MATVEC_Q8_0_LOAD_BITS=16", 5, 1, 1, 1},
    };
    for (size_t h = 0; h < sizeof hooks / sizeof hooks[0]; h++)
        if (!small_only || hooks[h].small)
            check_hooks(full, hooks[h].env, hooks[h].tokens, hooks[h].types, hooks[h].resident, &seed);
    if (small_only)
        return;
    /* x resident in passes: 16 tokens of Q4_K k = 2048 (64 blocks a token) */
    printf("-- HK_MATVEC_TOKENS_RESIDENT=1, 16 tokens of k = 2048\n");
    setenv("HK_MATVEC_TOKENS_RESIDENT", "1", 1);
    check_case(full, NULL, HK_TYPE_Q4_K, 131, 2048, 16, X_QUANTIZED, 1, ++seed);
    char sched[160];
    hk_check(strstr(served_schedule(full, sched, sizeof sched), "resident=1") != NULL,
             "matvec_int8_tokens q4_k 131x2048 x16: x resident (in passes where 16 tokens do not fit)", "\"%s\"", sched);
    unsetenv("HK_MATVEC_TOKENS_RESIDENT");
    test_loop_edge(full, &seed);
}

/* ---- argument errors ---------------------------------------------------------------------------- */

static void test_errors(hk_context *ctx)
{
    const uint32_t rows = 4, k = 256, tokens = 3;
    const size_t x_row = k / 32 * sizeof(hk_block_q8_1);
    hk_rng rng = {77};
    uint8_t *w = hk_random_weights(&rng, HK_REF_Q4_K, rows, k, 1);
    size_t w_bytes = hk_ref_row_bytes(HK_REF_Q4_K, k) * rows;
    hk_block_q8_1 xq[3 * 8];
    hk_test_q8_1_wrong_s(&rng, xq, 3 * 8, 1);
    hk_buffer *bw = hk_test_buffer(ctx, w_bytes + 32, NULL), *bx = hk_test_buffer(ctx, 4 * x_row + 16, NULL);
    hk_check(hk_buffer_upload(bw, 16, w, w_bytes) == HK_OK && hk_buffer_upload(bx, 0, xq, sizeof xq) == HK_OK,
             "matvec_int8_tokens errors: upload", "%s", hk_last_error());
    hk_test_out y = hk_test_out_create(ctx, (size_t)rows * tokens);
    /* a y view with room for rows * tokens - 1 outputs before its buffer's end */
    hk_view vy_short = {y.buffer, hk_buffer_size(y.buffer) - ((uint64_t)rows * tokens - 1) * sizeof(float)};
    hk_view vw = {bw, 16}, vx = {bx, 0}, vy = hk_test_out_view(&y);
    hk_stream *s = NULL;
    if (hk_stream_create(ctx, 0, &s) != HK_OK) {
        hk_check(0, "tokens errors: stream", "%s", hk_last_error());
        return;
    }
    hk_type q4 = HK_TYPE_Q4_K;
#define EXPECT(label, call, want, needle) hk_check_status("matvec_int8_tokens error: " label, call, want, needle)
    EXPECT("tokens 0", hk_matvec_int8_tokens(ctx, s, q4, vw, vx, vy, rows, k, 0), HK_ERROR_INVALID_ARGUMENT,
           "tokens=0");
    EXPECT("tokens 17", hk_matvec_int8_tokens(ctx, s, q4, vw, vx, vy, rows, k, 17), HK_ERROR_INVALID_ARGUMENT,
           "tokens=17");
    /* xq holding 3 tokens at offset x_row + 16: the buffer has 4 * x_row + 16 bytes, so 3 fit and 4 do not */
    EXPECT("xq too small for the tokens",
           hk_matvec_int8_tokens(ctx, s, q4, vw, (hk_view){bx, x_row + 16}, vy, rows, k, 4), HK_ERROR_INVALID_ARGUMENT,
           "xq needs");
    EXPECT("y too small for the tokens", hk_matvec_int8_tokens(ctx, s, q4, vw, vx, vy_short, rows, k, tokens),
           HK_ERROR_INVALID_ARGUMENT, "y needs");
    EXPECT("misaligned xq", hk_matvec_int8_tokens(ctx, s, q4, vw, (hk_view){bx, 2}, vy, rows, k, tokens),
           HK_ERROR_INVALID_ARGUMENT, "xq.offset=2");
    EXPECT("q4_k w not 16-byte aligned", hk_matvec_int8_tokens(ctx, s, q4, (hk_view){bw, 2}, vx, vy, rows, k, tokens),
           HK_ERROR_INVALID_ARGUMENT, "w.offset=2");
    EXPECT("misaligned y",
           hk_matvec_int8_tokens(ctx, s, q4, vw, vx, (hk_view){y.buffer, vy.offset + 2}, rows, k, tokens),
           HK_ERROR_INVALID_ARGUMENT, "y.offset=");
    EXPECT("y overlapping xq", hk_matvec_int8_tokens(ctx, s, q4, vw, vx, vx, rows, k, 1), HK_ERROR_INVALID_ARGUMENT,
           "overlaps");
    EXPECT("f32 weights", hk_matvec_int8_tokens(ctx, s, HK_TYPE_F32, vw, vx, vy, rows, k, tokens),
           HK_ERROR_UNSUPPORTED, "wtype");
    EXPECT("k off the block", hk_matvec_int8_tokens(ctx, s, q4, vw, vx, vy, rows, 128, tokens),
           HK_ERROR_INVALID_ARGUMENT, "k=128");
    EXPECT("rows 0", hk_matvec_int8_tokens(ctx, s, q4, vw, vx, vy, 0, k, tokens), HK_ERROR_INVALID_ARGUMENT, "rows");
    EXPECT("k past HK_MATVEC_MAX_K",
           hk_matvec_int8_tokens(ctx, s, q4, vw, vx, vy, rows, HK_MATVEC_MAX_K + 256, tokens),
           HK_ERROR_INVALID_ARGUMENT, "k=98560 exceeds");
    /* 16 tokens: ceil(rows/32768) * k * 17 <= 2^20 allows k = 61664 (Q8_0) at one row, not 61696 */
    EXPECT("ceil(rows/32768)*k*(tokens+1) past the limit",
           hk_matvec_int8_tokens(ctx, s, HK_TYPE_Q8_0, vw, vx, vy, 1, 61696, 16), HK_ERROR_INVALID_ARGUMENT,
           "ceil(rows/32768)*k*(tokens+1)=1048832 exceeds");
    /* 2 tokens: the single-token rule ceil(rows/32768) * k <= 2^18 binds first (4 * 65568 > 2^18) */
    EXPECT("ceil(rows/32768)*k past the limit at 2 tokens",
           hk_matvec_int8_tokens(ctx, s, HK_TYPE_Q8_0, vw, vx, vy, 98305, 65568, 2), HK_ERROR_INVALID_ARGUMENT,
           "ceil(rows/32768)*k=262272 exceeds");
    EXPECT("rows past HK_MATVEC_MAX_ROWS",
           hk_matvec_int8_tokens(ctx, s, HK_TYPE_Q8_0, vw, vx, vy, HK_MATVEC_MAX_ROWS + 1, 32, 2),
           HK_ERROR_INVALID_ARGUMENT, "rows=16777217 exceeds");
    EXPECT("NULL context", hk_matvec_int8_tokens(NULL, s, q4, vw, vx, vy, rows, k, tokens), HK_ERROR_INVALID_ARGUMENT,
           "context");
    static const struct {
        const char *var, *value;
    } bad_hooks[] = {{"HK_MATVEC_TOKENS_NROWS", "3"},      {"HK_MATVEC_TOKENS_PASS", "17"},
                     {"HK_MATVEC_TOKENS_ITEMS", "2x"},     {"HK_MATVEC_Q8_0_LOAD_BITS", "8"},
                     {"HK_MATVEC_TOKENS_SUBGROUPS", "2"},  {"HK_MATVEC_TOKENS_SUBGROUPS", "64"},
                     {"HK_MATVEC_TOKENS_SUBGROUPS", "12"}, {"HK_MATVEC_TOKENS_RESIDENT", "2"},
                     {"HK_MATVEC_TOKENS_WGS", "0"},        {"HK_MATVEC_TOKENS_WGS", "8193"}};
    for (size_t i = 0; i < sizeof bad_hooks / sizeof bad_hooks[0]; i++) {
        char label[96];
        snprintf(label, sizeof label, "matvec_int8_tokens error: %s=%s", bad_hooks[i].var, bad_hooks[i].value);
        setenv(bad_hooks[i].var, bad_hooks[i].value, 1);
        /* one Q8_0 row fits in the weights' buffer (HK_MATVEC_Q8_0_LOAD_BITS is read for Q8_0 only) */
        hk_check_status(label, hk_matvec_int8_tokens(ctx, s, HK_TYPE_Q8_0, vw, vx, vy, 1, k, tokens),
                        HK_ERROR_INVALID_ARGUMENT, bad_hooks[i].var);
        unsetenv(bad_hooks[i].var);
    }
    setenv("HK_MATVEC_INT8_ITEMS", "0", 1);
    hk_check_status("matvec_int8 error: HK_MATVEC_INT8_ITEMS=0", hk_matvec_int8(ctx, s, q4, vw, vx, vy, rows, k),
                    HK_ERROR_INVALID_ARGUMENT, "HK_MATVEC_INT8_ITEMS");
    unsetenv("HK_MATVEC_INT8_ITEMS");
#undef EXPECT
    hk_check(hk_stream_kernel_count(s) == 0, "matvec_int8_tokens errors: nothing recorded", "%u kernels recorded",
             hk_stream_kernel_count(s));
    hk_stream_submit(s);
    hk_stream_destroy(s);
    const float *v = hk_test_out_read(&y, "matvec_int8_tokens errors");
    uint32_t written = 0;
    for (size_t i = 0; v && i < (size_t)rows * tokens; i++) {
        uint32_t word;
        memcpy(&word, &v[i], 4);
        written += word != HK_POISON_WORD;
    }
    hk_check(v && written == 0, "matvec_int8_tokens errors: refused calls wrote nothing", "%u outputs written",
             written);
    hk_test_out_destroy(&y);
    hk_buffer_destroy(bw);
    hk_buffer_destroy(bx);
    free(w);
}

/* ---- main -------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    /* Under GPU-assisted validation (ctest tokens_gpuav) lavapipe is many times slower: the
     * many-rows shape runs at 4100 rows there (a tail of rows still). With --small (that run:
     * lavapipe compiles each pipeline instrumented, half a minute apiece on a cold machine) only
     * the plan's marked shapes run, and of the tuning hooks only those that change the loads. */
    const char *layers = getenv("VK_LAYER_ENABLES");
    int gpuav = layers && strstr(layers, "GPU_ASSISTED") != NULL;
    small_only = argc > 1 && !strcmp(argv[1], "--small");
    if (gpuav)
        printf("-- GPU-assisted validation: 40000 rows run as 4100\n");
    if (small_only)
        printf("-- --small: the shapes marked small, the load-changing tuning hooks\n");
    hk_context *full = hk_test_context();
    hk_context *scalar = hk_test_context_without(HK_FEATURE_INTEGER_DOT);
    if (!scalar)
        printf("-- no context without HK_FEATURE_INTEGER_DOT: the scalar-dot arm is not tested\n");
    static const hk_type types[] = {HK_TYPE_Q8_0, HK_TYPE_Q4_K, HK_TYPE_Q6_K, HK_TYPE_Q5_K};
    uint64_t seed = 1000;
    for (int t = 0; t < 4; t++) {
        hk_type type = types[t];
        uint32_t block = hk_type_block_values(type);
        /* {rows, k, tokens..., 0}: tails of rows, one block, several; 40000 rows run 2 rows per
         * subgroup for several tokens and 2 (Q8_0, Q4_K, Q5_K) or 4 (Q6_K) for one */
        static const uint32_t plan[][8] = {
            {1, 0, 1, 2, 3, 8, 16, 0}, {7, 2048, 2, 16, 0}, {131, 0, 3, 8, 0}, {2048, 0, 1, 8, 0},
            {40000, 0, 2, 16, 0},      {5, 6144, 3, 16, 0},
        };
        /* --small: a row tail at the most tokens, and the many-rows shape (row groups past the
         * first pass) at two */
        static const int small_plan[sizeof plan / sizeof plan[0]] = {0, 1, 0, 0, 1, 0};
        for (size_t p = 0; p < sizeof plan / sizeof plan[0]; p++) {
            if (small_only && !small_plan[p])
                continue;
            uint32_t rows = gpuav && plan[p][0] == 40000 ? 4100 : plan[p][0], k = plan[p][1] ? plan[p][1] : block;
            for (int i = 2; i < 8 && plan[p][i]; i++) {
                seed++;
                if (small_only && i > 2 && i + 1 < 8 && plan[p][i + 1]) /* the first and last token counts */
                    continue;
                int x_kind = seed % 3 == 0 ? X_WRONG_S : X_QUANTIZED;
                /* --small: the scalar-dot twin on the row tail and at the limit only (each of its
                 * pipelines is built again, instrumented, for up to 45 s) */
                hk_context *twin = small_only && plan[p][0] != 7 ? NULL : scalar;
                check_case(full, twin, type, rows, k, plan[p][i], x_kind, (int)(seed / 2 % 2), seed);
            }
        }
        /* a NaN block in one token: NaN for that token only */
        check_case(full, small_only ? NULL : scalar, type, 9, 2 * block, 5, X_NAN_BLOCK, 1, ++seed);
        /* at the limit: 16 tokens, k the largest multiple of the block with k * 17 <= 2^20 */
        uint32_t k16 = HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS / (HK_MATVEC_MAX_TOKENS + 1) / block * block;
        check_case(full, scalar, type, 3, k16, HK_MATVEC_MAX_TOKENS, X_QUANTIZED, 1, ++seed);
    }
    test_tuning(full, seed);
    test_errors(full);
    if (scalar) {
        uint32_t messages = hk_context_validation_messages(scalar);
        hk_check(messages == 0, "no validation messages on the scalar-dot context", "%u seen", messages);
        hk_context_destroy(scalar);
    }
    return hk_test_finish(full);
}
