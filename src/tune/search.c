/* The search: every schedule of a small space, else a seeded genetic search; each candidate
 * through the family's static tier, then measured (measure.c); the winner checked against the
 * default beyond the noise and kept in the context and the cache file (cache.c). */
#include "private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TUNE_MAX_REASONS 16

typedef struct cand {
    uint32_t v[HK_TUNE_MAX_PARAMS];
    int state; /* CAND_* */
    double ms;
    uint32_t sig[8];
} cand;
enum { CAND_STATIC, CAND_DUPLICATE, CAND_GATE, CAND_MEASURED };

typedef struct search {
    hk__tune_bench *b;
    const hk__tunable *f;
    const char *key;
    cand *c;
    uint32_t count, capacity;
    hk_tune_report *r;
    char reasons[TUNE_MAX_REASONS][128];
    uint32_t reason_count[TUNE_MAX_REASONS], n_reasons;
    uint32_t max_measured;
    int verbose;
} search;

/* A reason with its numbers taken out: "workgroup of 512 over the device's 256" and "workgroup
 * of 1024 over ..." are one kind. */
static void reason_kind(const char *why, char *out, size_t size)
{
    size_t n = 0;
    for (; *why && n + 1 < size; why++)
        if (!(*why >= '0' && *why <= '9'))
            out[n++] = *why;
    out[n] = 0;
}

static void add_reason(search *s, const char *why)
{
    char kind[128], other[128];
    reason_kind(why, kind, sizeof kind);
    for (uint32_t i = 0; i < s->n_reasons; i++) {
        reason_kind(s->reasons[i], other, sizeof other);
        if (!strcmp(kind, other)) {
            s->reason_count[i]++;
            return;
        }
    }
    if (s->n_reasons < TUNE_MAX_REASONS) {
        snprintf(s->reasons[s->n_reasons], sizeof s->reasons[0], "%s", why);
        s->reason_count[s->n_reasons++] = 1;
    }
}

/* A candidate rejected before any timing (the static tier, or the kernel refusing it): counted,
 * its reason tallied; a planted candidate is not kept among the search's candidates. */
static void reject_static(search *s, cand *c, const char *text, const char *verb, const char *why, int plant)
{
    c->state = CAND_STATIC;
    s->r->rejected_static++;
    add_reason(s, why);
    if (s->verbose)
        printf("  %-60s %s%s\n", text, verb, why);
    if (!plant)
        s->count++;
}

/* Evaluates a schedule once (memoized): its time, INFINITY where rejected. Every schedule seen
 * for the first time goes into the report's trace. */
static hk_status evaluate(search *s, const uint32_t *v, int plant, double *out_ms)
{
    *out_ms = INFINITY;
    if (!plant)
        for (uint32_t i = 0; i < s->count; i++)
            if (!memcmp(s->c[i].v, v, sizeof s->c[i].v)) {
                *out_ms = s->c[i].ms;
                return HK_OK;
            }
    if (s->count == s->capacity) {
        uint32_t cap = s->capacity ? 2 * s->capacity : 64;
        cand *c = realloc(s->c, cap * sizeof *c);
        if (!c)
            return hk__fail(HK_ERROR_OUT_OF_MEMORY, "hk_tune", "out of host memory");
        s->c = c;
        s->capacity = cap;
    }
    cand *c = &s->c[s->count];
    memset(c, 0, sizeof *c);
    memcpy(c->v, v, sizeof c->v);
    c->ms = INFINITY;
    s->r->evaluated++;
    s->r->trace = hk__tune_hash(s->r->trace, v, s->f->n_params);
    char why[160] = "", text[128];
    hk__tune_format(s->f, v, text, sizeof text);
    memset(c->sig, 0, sizeof c->sig);
    if (!s->f->feasible(s->b->ctx, s->b->desc, v, c->sig, why, sizeof why)) {
        reject_static(s, c, text, "rejected: ", why, plant);
        return HK_OK;
    }
    for (uint32_t i = 0; i < s->count && !plant; i++)
        if (s->c[i].state >= CAND_GATE && !memcmp(s->c[i].sig, c->sig, sizeof c->sig)) {
            c->state = CAND_DUPLICATE;
            c->ms = s->c[i].ms;
            s->r->duplicates++;
            *out_ms = c->ms;
            if (s->verbose)
                printf("  %-60s same plan as an earlier candidate\n", text);
            s->count++;
            return HK_OK;
        }
    double err = 0;
    hk_status st = hk__tune_bench_measure(s->b, s->key, v, plant, &c->ms, &err, why, sizeof why);
    if (st == HK_ERROR_DEVICE_LOST)
        return st;
    if (st != HK_OK) {
        /* a schedule the static tier passed but the kernel refused: a static-tier gap, recorded */
        snprintf(why, sizeof why, "refused by the kernel: %s", hk_last_error());
        reject_static(s, c, text, "", why, plant);
        return HK_OK;
    }
    if (!(c->ms < INFINITY)) {
        c->state = CAND_GATE;
        s->r->rejected_gate++;
        add_reason(s, why);
        if (s->verbose)
            printf("  %-60s%s rejected: %s\n", text, plant ? " (planted)" : "", why);
    } else {
        c->state = CAND_MEASURED;
        s->r->measured++;
        if (s->verbose)
            printf("  %-60s %10.5f ms  (scale_rel %.1e)\n", text, c->ms, err);
    }
    *out_ms = c->ms;
    if (!plant)
        s->count++;
    return HK_OK;
}

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 0x2545F4914F6CDD1Dull;
}

static void genes_to_values(const hk__tunable *f, const uint32_t *g, uint32_t *v)
{
    memset(v, 0, HK_TUNE_MAX_PARAMS * sizeof *v);
    for (uint32_t i = 0; i < f->n_params; i++)
        v[i] = f->params[i].values[g[i]];
}

static hk_status search_exhaustive(search *s, uint64_t space)
{
    uint32_t g[HK_TUNE_MAX_PARAMS] = {0}, v[HK_TUNE_MAX_PARAMS];
    for (uint64_t n = 0; n < space && s->r->measured < s->max_measured; n++) {
        uint64_t rest = n;
        for (uint32_t i = 0; i < s->f->n_params; i++) {
            g[i] = (uint32_t)(rest % s->f->params[i].count);
            rest /= s->f->params[i].count;
        }
        genes_to_values(s->f, g, v);
        double ms;
        hk_status st = evaluate(s, v, 0, &ms);
        if (st != HK_OK)
            return st;
    }
    return HK_OK;
}

/* The genes (value indices) of v, 1 if every value is in its list. */
static int values_to_genes(const hk__tunable *f, const uint32_t *v, uint32_t *g)
{
    memset(g, 0, HK_TUNE_MAX_PARAMS * sizeof *g);
    for (uint32_t i = 0; i < f->n_params; i++) {
        uint32_t j = 0;
        while (j < f->params[i].count && f->params[i].values[j] != v[i])
            j++;
        if (j == f->params[i].count)
            return 0;
        g[i] = j;
    }
    return 1;
}

#define GA_POP 8
/* Seeded genetic search: a random population (the default's genes first where it has some), then
 * per generation the two best kept, the rest children of two tournament winners (uniform
 * crossover, each gene redrawn with probability 1/params). Times are only ever compared (a
 * stable sort and strict comparisons: a tie keeps the earlier place, or the first drawn of a
 * tournament), so the draws are a function of the seed and of the order of the measured times. Ends when max_measured schedules were
 * measured or generations stop finding new schedules. */
static hk_status search_genetic(search *s, uint64_t seed, const uint32_t *start)
{
    const hk__tunable *f = s->f;
    uint64_t x = seed ? seed * 0x9E3779B97F4A7C15ull : 0x9E3779B97F4A7C15ull;
    uint32_t pop[GA_POP][HK_TUNE_MAX_PARAMS], next[GA_POP][HK_TUNE_MAX_PARAMS], v[HK_TUNE_MAX_PARAMS];
    double fit[GA_POP];
    memset(pop, 0, sizeof pop);
    hk_status st = HK_OK;
    for (int i = 0; i < GA_POP && st == HK_OK; i++) {
        for (uint32_t j = 0; j < f->n_params; j++)
            pop[i][j] = (uint32_t)(rng_next(&x) % f->params[j].count);
        if (i == 0 && start)
            memcpy(pop[0], start, sizeof pop[0]);
        genes_to_values(f, pop[i], v);
        fit[i] = INFINITY;
        if (s->r->measured < s->max_measured)
            st = evaluate(s, v, 0, &fit[i]);
    }
    uint32_t idle = 0;
    for (uint32_t gen = 0; st == HK_OK && s->r->measured < s->max_measured && idle < 8 && gen < 256; gen++) {
        /* order by fitness (insertion sort: 8 entries) */
        for (int i = 1; i < GA_POP; i++)
            for (int j = i; j > 0 && fit[j] < fit[j - 1]; j--) {
                double t = fit[j];
                fit[j] = fit[j - 1];
                fit[j - 1] = t;
                uint32_t tg[HK_TUNE_MAX_PARAMS];
                memcpy(tg, pop[j], sizeof tg);
                memcpy(pop[j], pop[j - 1], sizeof tg);
                memcpy(pop[j - 1], tg, sizeof tg);
            }
        memcpy(next, pop, 2 * sizeof pop[0]);
        double next_fit[GA_POP] = {fit[0], fit[1]};
        uint32_t before = s->r->evaluated;
        for (int i = 2; i < GA_POP && st == HK_OK; i++) {
            int a = (int)(rng_next(&x) % GA_POP), a2 = (int)(rng_next(&x) % GA_POP);
            int b = (int)(rng_next(&x) % GA_POP), b2 = (int)(rng_next(&x) % GA_POP);
            a = fit[a2] < fit[a] ? a2 : a;
            b = fit[b2] < fit[b] ? b2 : b;
            for (uint32_t j = 0; j < f->n_params; j++) {
                next[i][j] = rng_next(&x) & 1 ? pop[a][j] : pop[b][j];
                if (rng_next(&x) % f->n_params == 0)
                    next[i][j] = (uint32_t)(rng_next(&x) % f->params[j].count);
            }
            genes_to_values(f, next[i], v);
            next_fit[i] = INFINITY;
            if (s->r->measured < s->max_measured)
                st = evaluate(s, v, 0, &next_fit[i]);
        }
        memcpy(pop, next, sizeof pop);
        memcpy(fit, next_fit, sizeof fit);
        idle = s->r->evaluated == before ? idle + 1 : 0;
    }
    return st;
}

/* The check of the search's winner against the default: both timed again in turn, TUNE_REPEATS
 * times each, so that drift between the default's early measurement and the candidate's late one
 * cannot make the winner; the candidate must beat the default by more than the run-to-run noise
 * these repetitions show, and by TUNE_MIN_GAIN at least. */
#define TUNE_REPEATS 3
#define TUNE_MIN_GAIN 0.02

/* Times the default (dv) and the candidate (cv) in turn; sets the report's default_ms and
 * candidate_ms (the fastest repetition of each), noise (the larger of slowest over fastest
 * repetition, less 1; INFINITY where a repetition failed) and default_kept (a tie keeps it). */
static hk_status confirm(search *s, const uint32_t *dv, const uint32_t *cv)
{
    const uint32_t *v[2] = {dv, cv};
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {0, 0};
    for (int rep = 0; rep < TUNE_REPEATS; rep++)
        for (int i = 0; i < 2; i++) {
            double ms, err = 0;
            char why[160] = "", text[128];
            hk_status st = hk__tune_bench_measure(s->b, s->key, v[i], 0, &ms, &err, why, sizeof why);
            if (st != HK_OK)
                return st;
            lo[i] = ms < lo[i] ? ms : lo[i];
            hi[i] = ms > hi[i] ? ms : hi[i];
            hk__tune_format(s->f, v[i], text, sizeof text);
            if (s->verbose)
                printf("  %-60s %10.5f ms  (%s again%s%s)\n", text, ms, i ? "the best candidate" : "the default",
                       why[0] ? ": " : "", why);
        }
    hk_tune_report *r = s->r;
    double spread[2] = {hi[0] / lo[0] - 1, hi[1] / lo[1] - 1};
    r->noise = spread[0] > spread[1] ? spread[0] : spread[1];
    if (!(r->noise < INFINITY))
        r->noise = INFINITY;
    r->default_ms = lo[0];
    r->candidate_ms = lo[1];
    double margin = r->noise > TUNE_MIN_GAIN ? r->noise : TUNE_MIN_GAIN;
    r->default_kept = !(lo[0] > lo[1] * (1 + margin));
    return HK_OK;
}


/* ---- hk_tune ---- */

hk_status hk__tune_run(hk_context *context, const hk__tunable *f, const hk_tune_desc *desc, hk_tune_report *out_report,
                       size_t report_size)
{
    static const char fn[] = "hk_tune";
    if (desc->copies > 64)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "copies=%u is more than 64", desc->copies);
    if (desc->repeats > 1000 || desc->batch > 1000)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "repeats=%u or batch=%u is more than 1000", desc->repeats,
                        desc->batch);
    if (out_report && report_size < offsetof(hk_tune_report, rejects))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "report_size=%zu is too small", report_size);
    char key[HK_TUNE_SHAPE_CHARS];
    hk_status st = f->shape_key(context, desc, key);
    if (st != HK_OK)
        return st;
    if ((st = hk__check_alive(context, fn)) != HK_OK)
        return st;
    hk_tune_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = (uint32_t)sizeof r;
    snprintf(r.shape, sizeof r.shape, "%s", key);
    r.default_ms = r.best_ms = r.candidate_ms = r.noise = NAN;
    uint64_t space = hk__tune_space(f);
    r.space = (uint32_t)space;
    hk__sched cached;
    int source;
    if (!desc->force && hk__tune_lookup(context, f, key, &cached, &source)) {
        r.from_cache = 1;
        hk__tune_format(f, cached.v, r.schedule, sizeof r.schedule);
        goto out;
    }
    hk__tune_bench b;
    search s = {.b = &b, .f = f, .key = key, .r = &r,
                .max_measured = desc->max_measured ? desc->max_measured : 32, .verbose = desc->verbose};
    st = hk__tune_bench_open(&b, context, f, desc);
    /* the built-in default (or the hooks), served and measured first: the winner is never one
     * the search measured slower than it */
    uint32_t dv[HK_TUNE_MAX_PARAMS] = {0};
    if (st == HK_OK)
        st = hk__tune_bench_default(&b, key, dv);
    if (st == HK_OK) {
        hk__tune_format(f, dv, r.default_schedule, sizeof r.default_schedule);
        if (s.verbose)
            printf("%s %s: default %s\n", f->name, key, r.default_schedule);
    }
    r.trace = HK_TUNE_HASH_BASIS;
    if (st == HK_OK)
        st = evaluate(&s, dv, 0, &r.default_ms);
    const char *plant = getenv("HK_TUNE_PLANT_WRONG");
    if (st == HK_OK && plant && !strcmp(plant, "1")) {
        double ignored;
        st = evaluate(&s, dv, 1, &ignored);
    }
    uint32_t start[HK_TUNE_MAX_PARAMS];
    const char *genetic = getenv("HK_TUNE_GENETIC"); /* testing: the genetic search on a small space */
    if (st == HK_OK)
        st = space <= 64 && !(genetic && !strcmp(genetic, "1"))
                 ? search_exhaustive(&s, space)
                 : search_genetic(&s, desc->seed, values_to_genes(f, dv, start) ? start : NULL);
    if (st == HK_OK) {
        int best = -1;
        for (uint32_t i = 0; i < s.count; i++)
            if (s.c[i].state == CAND_MEASURED && (best < 0 || s.c[i].ms < s.c[best].ms))
                best = (int)i;
        if (best < 0) {
            st = hk__fail(HK_ERROR_UNSUPPORTED, fn, "no schedule of %s passed the gate for %s (%u rejected)", f->name,
                          key, r.rejected_static + r.rejected_gate);
        } else {
            const uint32_t *wv = s.c[best].v;
            r.best_ms = s.c[best].ms;
            /* a candidate faster than a default that passed: timed again against it, kept only
             * beyond the noise; else the default is the winner, stored so that the shape is not
             * searched again */
            if (memcmp(wv, dv, sizeof dv) && r.default_ms < INFINITY) {
                hk__tune_format(f, wv, r.candidate, sizeof r.candidate);
                st = confirm(&s, dv, wv);
                if (r.default_kept)
                    wv = dv;
                r.best_ms = r.default_kept ? r.default_ms : r.candidate_ms;
            }
            hk__tune_format(f, wv, r.schedule, sizeof r.schedule);
            if (st == HK_OK && !hk__tune_set_winner(context, f, key, wv, r.best_ms, desc->no_store))
                st = hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
        }
    }
    size_t n = 0;
    for (uint32_t i = 0; i < s.n_reasons && n < sizeof r.rejects; i++) {
        int w = snprintf(r.rejects + n, sizeof r.rejects - n, "%s%u x %s", i ? "; " : "", s.reason_count[i],
                         s.reasons[i]);
        if (w < 0)
            break;
        n += (size_t)w;
    }
    free(s.c);
    hk__tune_bench_close(&b);
    if (st != HK_OK)
        return st;
out:
    if (out_report)
        memcpy(out_report, &r, report_size < sizeof r ? report_size : sizeof r);
    return HK_OK;
}
