/* The autotuner: search spaces of named integer parameters per kernel family, a two-tier
 * evaluator (a static tier that rejects a schedule before any GPU time, a measure tier that runs
 * it once against the C reference at the kernel's gate and then times it cold with GPU
 * timestamps), exhaustive or seeded genetic search, and a winner cache in a TSV file that every
 * context reads when it is created (include/hkernel.h, hk_tune). */
#define _POSIX_C_SOURCE 200809L
#include "tune.h"
#include "hk_ref.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if !defined(_WIN32)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#define TUNE_FILE "tune.tsv"
#define TUNE_TAG "hkernel-tune-1"
#define TUNE_MAX_VALUES 8
#define TUNE_MAX_REASONS 16

/* ---- search spaces ---- */

typedef struct tune_param {
    const char *name;
    uint32_t count;
    uint32_t values[TUNE_MAX_VALUES];
} tune_param;

typedef struct tune_family {
    const char *name;
    uint32_t count;
    tune_param p[HK_TUNE_MAX_PARAMS];
} tune_family;

/* Indexed by hk_tune_kernel. Constraints between the values live in the families' static tiers
 * (hk__matvec_int8_static, hk__matvec_tokens_static, hk__sdpa_decode_static). */
#define TUNE_FAMILIES (HK_TUNE_MATVEC_TOKENS + 1)
static const tune_family families[TUNE_FAMILIES] = {
    [HK_TUNE_MATVEC_INT8] = {"matvec_int8", MV_PARAMS,
                             {{"nrows", 3, {1, 2, 4}}, {"items", 3, {1, 2, 4}}, {"load_bits", 2, {16, 32}}}},
    [HK_TUNE_MATVEC_TOKENS] = {"matvec_int8_tokens", MT_PARAMS,
                               {{"subgroups", 4, {4, 8, 16, 32}},
                                {"nrows", 3, {1, 2, 4}},
                                {"items", 3, {1, 2, 4}},
                                {"resident", 2, {0, 1}},
                                {"wgs", 6, {64, 128, 256, 512, 1024, 8192}}}},
    [HK_TUNE_SDPA_DECODE] = {"sdpa_decode", SD_PARAMS,
                             {{"groups", 7, {8, 16, 32, 64, 128, 256, 512}},
                              {"wg", 4, {32, 64, 128, 256}},
                              {"lpk", 4, {2, 4, 8, 16}},
                              {"kb", 4, {1, 2, 4, 8}},
                              {"rows", 4, {1, 2, 4, 8}},
                              {"single", 2, {0, 1}}}},
};

static const tune_family *family_of(int kernel)
{
    return kernel > 0 && kernel < TUNE_FAMILIES && families[kernel].name ? &families[kernel] : NULL;
}

static void format_sched(const tune_family *f, const uint32_t *v, char *out, size_t size)
{
    size_t n = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < f->count && n < size; i++) {
        int w = snprintf(out + n, size - n, "%s%s=%u", i ? "," : "", f->p[i].name, v[i]);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

/* "name=value,..." with exactly the family's names in order; values are any unsigned integers
 * (a cached winner may hold a default outside the value lists, e.g. groups=160). */
static int parse_sched(const tune_family *f, const char *text, uint32_t *v)
{
    const char *s = text;
    for (uint32_t i = 0; i < f->count; i++) {
        size_t len = strlen(f->p[i].name);
        if (strncmp(s, f->p[i].name, len) || s[len] != '=')
            return 0;
        s += len + 1;
        char *end;
        errno = 0;
        unsigned long x = strtoul(s, &end, 10);
        if (end == s || errno || x > 1u << 20 || *s == '-')
            return 0;
        v[i] = (uint32_t)x;
        s = end;
        if (i + 1 < f->count && *s++ != ',')
            return 0;
    }
    return *s == 0;
}

void hk__tune_key_matvec(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t rows, uint32_t k)
{
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:%ux%u", hk_type_name(wtype), rows, k);
}

void hk__tune_key_matvec_tokens(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t rows, uint32_t k,
                                uint32_t tokens)
{
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:%ux%ux%u", hk_type_name(wtype), rows, k, tokens);
}

void hk__tune_key_sdpa(char key[HK_TUNE_SHAPE_CHARS], hk_type kv_type, uint32_t n_heads, uint32_t n_kv_heads,
                       uint32_t head_dim, uint32_t capacity)
{
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:h%u/kv%u/d%u/cap%u", hk_type_name(kv_type), n_heads, n_kv_heads, head_dim,
             capacity);
}

/* ---- per-context state ---- */

typedef struct tune_entry {
    int family;
    char key[HK_TUNE_SHAPE_CHARS];
    uint32_t v[HK_TUNE_MAX_PARAMS];
    double ms;
} tune_entry;

struct hk_tune_state {
    hk_mutex lock;
    char *dir, *file; /* NULL: no cache directory could be named */
    tune_entry *entries;
    uint32_t count, capacity;
    uint32_t last[TUNE_FAMILIES][HK_TUNE_MAX_PARAMS];
    int last_source[TUNE_FAMILIES], last_set[TUNE_FAMILIES];
};

/* The tuner's candidate on this thread: mode 1 forces it for (context, family, key), mode 2
 * forces "no schedule" (the built-in default or the hooks, ignoring the cache). */
static _Thread_local struct {
    int mode;
    const hk_context *context;
    int family;
    const char *key;
    hk__sched sched;
    uint32_t served[HK_TUNE_MAX_PARAMS]; /* what the family's last call on this thread ran */
} forced;

static void warn(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static void warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hkernel: tune cache: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int entry_set(struct hk_tune_state *t, int family, const char *key, const uint32_t *v, double ms)
{
    for (uint32_t i = 0; i < t->count; i++)
        if (t->entries[i].family == family && !strcmp(t->entries[i].key, key)) {
            memcpy(t->entries[i].v, v, sizeof t->entries[i].v);
            t->entries[i].ms = ms;
            return 1;
        }
    if (t->count == t->capacity) {
        uint32_t cap = t->capacity ? 2 * t->capacity : 16;
        tune_entry *e = realloc(t->entries, cap * sizeof *e);
        if (!e)
            return 0;
        t->entries = e;
        t->capacity = cap;
    }
    tune_entry *e = &t->entries[t->count++];
    memset(e, 0, sizeof *e);
    e->family = family;
    snprintf(e->key, sizeof e->key, "%s", key);
    memcpy(e->v, v, sizeof e->v);
    e->ms = ms;
    return 1;
}

int hk__tune_lookup(hk_context *context, int family, const char *key, hk__sched *out, int *source)
{
    if (forced.mode && forced.context == context && forced.family == family && !strcmp(forced.key, key)) {
        if (forced.mode == 2)
            return 0;
        *out = forced.sched;
        *source = HK_SCHED_SEARCH;
        return 1;
    }
    struct hk_tune_state *t = context->tune;
    if (!t)
        return 0;
    int found = 0;
    hk__mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->count && !found; i++)
        if (t->entries[i].family == family && !strcmp(t->entries[i].key, key)) {
            memset(out, 0, sizeof *out);
            memcpy(out->v, t->entries[i].v, sizeof out->v);
            found = 1;
        }
    hk__mutex_unlock(&t->lock);
    if (found)
        *source = HK_SCHED_TUNED;
    return found;
}

void hk__tune_note(hk_context *context, int family, const uint32_t *v, int source)
{
    struct hk_tune_state *t = context->tune;
    const tune_family *f = family_of(family);
    if (!t || !f)
        return;
    if (forced.mode && forced.context == context && forced.family == family) {
        memset(forced.served, 0, sizeof forced.served);
        memcpy(forced.served, v, f->count * sizeof *v);
    }
    hk__mutex_lock(&t->lock);
    memset(t->last[family], 0, sizeof t->last[family]);
    memcpy(t->last[family], v, f->count * sizeof *v);
    t->last_source[family] = source;
    t->last_set[family] = 1;
    hk__mutex_unlock(&t->lock);
}

/* ---- the cache file ---- */

static void identity(const hk_context *context, char *out, size_t size)
{
    snprintf(out, size, "%04x\t%04x\t%08x\t%d.%d.%d", context->caps.vendor_id, context->caps.device_id,
             context->caps.driver_version, HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH);
}

enum { LINE_BAD, LINE_OTHER_DEVICE, LINE_STALE, LINE_OK };

/* One line of the file: TAG vendor device driver version kernel shape schedule ms. */
typedef struct tune_line {
    char *col[9];
    int family;
    uint32_t v[HK_TUNE_MAX_PARAMS];
    double ms;
} tune_line;

static int split_line(char *line, tune_line *l)
{
    memset(l, 0, sizeof *l);
    size_t len = strlen(line);
    if (len && line[len - 1] == '\n')
        line[--len] = 0;
    char *s = line;
    for (int i = 0; i < 9; i++) {
        l->col[i] = s;
        char *tab = strchr(s, '\t');
        if (i < 8) {
            if (!tab)
                return 0;
            *tab = 0;
            s = tab + 1;
        } else if (tab) {
            return 0;
        }
    }
    if (strcmp(l->col[0], TUNE_TAG))
        return 0;
    for (int i = 1; i < 9; i++)
        if (!*l->col[i] || strlen(l->col[i]) >= HK_TUNE_SHAPE_CHARS)
            return 0;
    char *end;
    l->ms = strtod(l->col[8], &end);
    if (*end || !(l->ms >= 0) || l->ms > 1e9)
        return 0;
    l->family = 0;
    for (int i = 1; i < TUNE_FAMILIES; i++)
        if (family_of(i) && !strcmp(l->col[5], families[i].name))
            l->family = i;
    return 1;
}

/* Classifies a split line for this context: another device's (kept, unused), stale (this device,
 * another library version, an unknown kernel or a schedule whose names no longer match), ok. */
static int pow2_in(uint32_t x, uint32_t lo, uint32_t hi) { return x >= lo && x <= hi && !(x & (x - 1)); }

/* The values a cached schedule may hold: the matvec's value lists; the tokens matvec's, but for
 * its workgroup cap, and flash-decoding's, their hook ranges (hkernel.h, HK_MATVEC_TOKENS_WGS,
 * HK_SDPA_*), since a default or a hook's value (measured first, so possibly the winner) may lie
 * outside the searched list. */
static int values_valid(int family, const uint32_t *v)
{
    if (family == HK_TUNE_MATVEC_TOKENS)
        return pow2_in(v[MT_SUBGROUPS], 4, 32) && pow2_in(v[MT_NROWS], 1, 4) && pow2_in(v[MT_ITEMS], 1, 4) &&
               v[MT_RESIDENT] <= 1 && v[MT_WGS] >= 1 && v[MT_WGS] <= 8192;
    if (family == HK_TUNE_MATVEC_INT8) {
        for (uint32_t i = 0; i < MV_PARAMS; i++) {
            const tune_param *p = &families[family].p[i];
            int found = 0;
            for (uint32_t j = 0; j < p->count; j++)
                found |= p->values[j] == v[i];
            if (!found)
                return 0;
        }
        return 1;
    }
    return v[SD_GROUPS] >= 1 && v[SD_GROUPS] <= (1u << 20) && pow2_in(v[SD_WG], 32, 1024) &&
           pow2_in(v[SD_LPK], 1, 64) && pow2_in(v[SD_KB], 1, 16) && pow2_in(v[SD_ROWS], 1, 8) && v[SD_SINGLE] <= 1;
}

static int classify(const hk_context *context, tune_line *l, char *why, size_t why_size)
{
    char id[64];
    identity(context, id, sizeof id);
    char dev[64];
    snprintf(dev, sizeof dev, "%s\t%s\t%s", l->col[1], l->col[2], l->col[3]);
    size_t dev_len = strlen(dev);
    if (strncmp(id, dev, dev_len) || id[dev_len] != '\t')
        return LINE_OTHER_DEVICE;
    if (strcmp(id + dev_len + 1, l->col[4])) {
        snprintf(why, why_size, "written by library %s, this is %d.%d.%d", l->col[4], HK_VERSION_MAJOR,
                 HK_VERSION_MINOR, HK_VERSION_PATCH);
        return LINE_STALE;
    }
    if (!l->family) {
        snprintf(why, why_size, "unknown kernel \"%s\"", l->col[5]);
        return LINE_STALE;
    }
    if (!parse_sched(&families[l->family], l->col[7], l->v)) {
        snprintf(why, why_size, "schedule \"%s\" does not match %s's parameters", l->col[7], l->col[5]);
        return LINE_STALE;
    }
    if (!values_valid(l->family, l->v)) {
        snprintf(why, why_size, "schedule \"%s\" has a value out of range", l->col[7]);
        return LINE_STALE;
    }
    return LINE_OK;
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void load_file(hk_context *context, struct hk_tune_state *t)
{
    FILE *f = fopen(t->file, "r");
    if (!f)
        return; /* no winners yet */
    char line[1024];
    unsigned number = 0;
    while (fgets(line, sizeof line, f)) {
        number++;
        int whole = strchr(line, '\n') || feof(f);
        if (!whole) { /* skip the rest of an overlong line */
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            warn("%s:%u: line too long, ignored", t->file, number);
            continue;
        }
        if (line[0] == '#' || line[0] == '\n')
            continue;
        tune_line l;
        char why[160] = "";
        if (!split_line(line, &l)) {
            warn("%s:%u: malformed line ignored", t->file, number);
            continue;
        }
        int c = classify(context, &l, why, sizeof why);
        if (c == LINE_STALE)
            warn("%s:%u: stale line ignored (%s)", t->file, number, why);
        else if (c == LINE_OK && !entry_set(t, l.family, l.col[6], l.v, l.ms))
            warn("out of host memory");
    }
    fclose(f);
}

void hk__tune_open(hk_context *context, const char *dir)
{
    struct hk_tune_state *t = calloc(1, sizeof *t);
    if (!t)
        return;
    hk__mutex_init(&t->lock);
    t->dir = hk__cache_dir(dir, "HK_TUNE_CACHE_DIR");
    t->file = t->dir ? join_path(t->dir, TUNE_FILE) : NULL;
    context->tune = t;
    if (t->file)
        load_file(context, t);
}

void hk__tune_close(hk_context *context)
{
    struct hk_tune_state *t = context->tune;
    if (!t)
        return;
    hk__mutex_destroy(&t->lock);
    free(t->entries);
    free(t->dir);
    free(t->file);
    free(t);
    context->tune = NULL;
}

/* Writes the winner into the file: under an exclusive lock on TUNE_FILE.lock, the current file is
 * read again (other processes' winners kept, malformed lines dropped, this key replaced) and
 * written to a temporary file renamed over it, so a reader sees the old file or the new one and
 * two tuners at once both land. Failures are warnings: the winner stays in the context. */
#if !defined(_WIN32)
static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER; /* threads of one process: fcntl locks are per process */
#endif

static void store(hk_context *context, int family, const char *key, const uint32_t *v, double ms)
{
    struct hk_tune_state *t = context->tune;
    if (!t || !t->file)
        return;
#if defined(_WIN32)
    (void)family, (void)key, (void)v, (void)ms;
    warn("not written: no file locking on this platform yet");
#else
    pthread_mutex_lock(&store_lock);
    char *lock_path = join_path(t->dir, TUNE_FILE ".lock");
    char tmp_name[64];
    snprintf(tmp_name, sizeof tmp_name, TUNE_FILE ".%ld.tmp", (long)getpid());
    char *tmp_path = join_path(t->dir, tmp_name);
    int fd = -1;
    FILE *out = NULL;
    int dir_err = lock_path && tmp_path ? hk__make_dirs(t->dir) : ENOMEM;
    if (dir_err) {
        warn("cannot create %s: %s", t->dir, strerror(dir_err));
        goto done;
    }
    fd = open(lock_path, O_RDWR | O_CREAT, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int locked = 0;
    while (fd >= 0 && !(locked = fcntl(fd, F_SETLKW, &fl) == 0) && errno == EINTR)
        ;
    if (!locked) {
        warn("cannot lock %s: %s", lock_path, strerror(errno));
        goto done;
    }
    out = fopen(tmp_path, "w");
    if (!out) {
        warn("cannot write %s: %s", tmp_path, strerror(errno));
        goto done;
    }
    const tune_family *f = &families[family];
    char id[64], sched[128];
    identity(context, id, sizeof id);
    format_sched(f, v, sched, sizeof sched);
    char mine[512];
    snprintf(mine, sizeof mine, "%s\t%s\t%s\t%s", TUNE_TAG, id, f->name, key);
    fprintf(out, "# libhkernel autotuner winners: tag, vendor, device, driver, library, kernel, shape, schedule, ms\n");
    FILE *in = fopen(t->file, "r");
    if (in) {
        char line[1024], copy[1024];
        while (fgets(line, sizeof line, in)) {
            if (!strchr(line, '\n') && !feof(in)) {
                int c;
                while ((c = fgetc(in)) != EOF && c != '\n')
                    ;
                continue;
            }
            memcpy(copy, line, sizeof copy);
            tune_line l;
            if (line[0] == '#' || !split_line(copy, &l))
                continue;
            char key_of[512];
            snprintf(key_of, sizeof key_of, "%s\t%s\t%s\t%s\t%s\t%s\t%s", l.col[0], l.col[1], l.col[2], l.col[3],
                     l.col[4], l.col[5], l.col[6]);
            if (!strcmp(key_of, mine))
                continue;
            fputs(line, out);
            if (!strchr(line, '\n'))
                fputc('\n', out);
        }
        fclose(in);
    }
    fprintf(out, "%s\t%s\t%.6f\n", mine, sched, ms);
    int bad = ferror(out);
    bad |= fflush(out) != 0 || fsync(fileno(out)) != 0;
    bad |= fclose(out) != 0;
    out = NULL;
    if (bad || rename(tmp_path, t->file) != 0) {
        warn("cannot write %s: %s", t->file, strerror(errno));
        remove(tmp_path);
    }
done:
    if (out) {
        fclose(out);
        remove(tmp_path);
    }
    if (fd >= 0)
        close(fd); /* releases the lock */
    free(lock_path);
    free(tmp_path);
    pthread_mutex_unlock(&store_lock);
#endif
}

/* ---- the measure tier: seeded inputs, the reference, cold timing ---- */

typedef struct bench {
    hk_context *ctx;
    int family;
    const char *key;
    const hk_tune_desc *desc;
    uint32_t copies;
    /* matvec (one token), matvec_int8_tokens (tokens of x and y; exact: hk_matvec_int8's outputs
     * of each token, which every schedule must give bit for bit) */
    hk_buffer *w, *xq, *y;
    uint64_t w_stride;
    uint32_t tokens;
    float *exact;
    /* sdpa */
    hk_sdpa_desc sdpa;
    hk_buffer *q, *k, *v, *out, *ws;
    uint64_t kv_stride, ws_bytes;
    float *ref, *got;
    size_t n_out;
    double gate;
} bench;

static void bench_free(bench *b)
{
    hk_buffer *bufs[] = {b->w, b->xq, b->y, b->q, b->k, b->v, b->out, b->ws};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        hk_buffer_destroy(bufs[i]);
    free(b->ref);
    free(b->got);
    free(b->exact);
}

static hk_status upload_new(hk_context *ctx, uint64_t size, const void *data, hk_buffer **out)
{
    hk_status st = hk_buffer_create(ctx, size, out);
    if (st == HK_OK && data)
        st = hk_buffer_upload(*out, 0, data, size);
    return st;
}

static uint32_t copies_for(const hk_tune_desc *d, uint64_t bytes)
{
    if (d->copies)
        return d->copies;
    /* rotate over at least 64 MiB where it takes up to 8 copies (past most last-level caches) */
    uint64_t c = (64ull << 20) / (bytes ? bytes : 1) + 1;
    return c < 2 ? 2 : c > 8 ? 8 : (uint32_t)c;
}

static hk_status bench_setup(bench *b)
{
    const hk_tune_desc *d = b->desc;
    hk_context *ctx = b->ctx;
    hk_rng rng = {d->seed ? d->seed : 1};
    hk_status st;
    if (b->family == HK_TUNE_MATVEC_INT8 || b->family == HK_TUNE_MATVEC_TOKENS) {
        uint32_t m = b->tokens = b->family == HK_TUNE_MATVEC_TOKENS ? d->tokens : 1, blocks = d->k / 32;
        uint64_t wbytes = (uint64_t)d->rows * hk_type_bytes(d->wtype, d->k);
        size_t n = (size_t)m * d->rows;
        b->w_stride = (wbytes + 255) & ~(uint64_t)255;
        b->copies = copies_for(d, wbytes);
        uint8_t *w = hk_random_weights(&rng, (int)d->wtype, d->rows, d->k, 0);
        float *x = malloc((size_t)m * d->k * sizeof *x);
        hk_block_q8_1 *xq = malloc((size_t)m * blocks * sizeof *xq);
        b->ref = malloc(n * sizeof *b->ref);
        b->got = malloc(n * sizeof *b->got);
        b->exact = m > 1 ? malloc(n * sizeof *b->exact) : NULL;
        st = w && x && xq && b->ref && b->got && (m == 1 || b->exact)
                 ? HK_OK
                 : hk__fail(HK_ERROR_OUT_OF_MEMORY, "hk_tune", "out of host memory");
        if (st == HK_OK) {
            hk_rng_fill(&rng, x, (size_t)m * d->k, -1.0f, 1.0f);
            hk_quant_row_q8_1(x, xq, (size_t)m * d->k);
            for (uint32_t t = 0; t < m; t++)
                hk_ref_matvec_q8_1((int)d->wtype, w, xq + (size_t)t * blocks, b->ref + (size_t)t * d->rows, d->rows,
                                   d->k);
            b->n_out = n;
            b->gate = HK_GATE_EXACT;
            st = upload_new(ctx, b->w_stride * b->copies, NULL, &b->w);
            for (uint32_t c = 0; c < b->copies && st == HK_OK; c++)
                st = hk_buffer_upload(b->w, c * b->w_stride, w, wbytes);
            if (st == HK_OK)
                st = upload_new(ctx, (uint64_t)m * blocks * sizeof *xq, xq, &b->xq);
            if (st == HK_OK)
                st = upload_new(ctx, (uint64_t)n * 4, NULL, &b->y);
            /* the bits every tokens schedule must give: hk_matvec_int8 on each token */
            for (uint32_t t = 0; t < m && m > 1 && st == HK_OK; t++)
                st = hk_matvec_int8(ctx, NULL, d->wtype, (hk_view){b->w, 0}, (hk_view){b->xq, (uint64_t)t * blocks * 36},
                                    (hk_view){b->y, (uint64_t)t * d->rows * 4}, d->rows, d->k);
            if (st == HK_OK && m > 1)
                st = hk_buffer_download(b->y, 0, b->exact, n * 4);
        }
        free(w);
        free(x);
        free(xq);
        return st;
    }
    uint32_t H = d->n_heads, Hkv = d->n_kv_heads, D = d->head_dim, cap = d->capacity;
    uint64_t row = hk_type_bytes(d->kv_type, D), cache = (uint64_t)Hkv * cap * row;
    hk_sdpa_desc *s = &b->sdpa;
    memset(s, 0, sizeof *s);
    s->n_q = 1;
    s->n_heads = H;
    s->n_kv_heads = Hkv;
    s->head_dim = D;
    s->seq_k = cap;
    s->scale = 1.0f / sqrtf((float)D);
    s->kv.type = d->kv_type;
    s->kv.capacity = cap;
    s->kv.k_row_stride = s->kv.v_row_stride = row;
    s->kv.k_head_stride = s->kv.v_head_stride = cap * row;
    b->kv_stride = (cache + 255) & ~(uint64_t)255;
    b->copies = copies_for(d, 2 * cache);
    size_t n_vals = (size_t)Hkv * cap * D;
    float *q = malloc((size_t)H * D * sizeof *q), *kv[2] = {malloc(n_vals * 4), malloc(n_vals * 4)};
    uint8_t *img[2] = {malloc(cache), malloc(cache)};
    b->ref = malloc((size_t)H * D * sizeof *b->ref);
    b->got = malloc((size_t)H * D * sizeof *b->got);
    st = q && kv[0] && kv[1] && img[0] && img[1] && b->ref && b->got
             ? HK_OK
             : hk__fail(HK_ERROR_OUT_OF_MEMORY, "hk_tune", "out of host memory");
    if (st == HK_OK) {
        hk_rng_fill(&rng, q, (size_t)H * D, -1.0f, 1.0f);
        for (int i = 0; i < 2; i++) {
            hk_rng_fill(&rng, kv[i], n_vals, -1.0f, 1.0f);
            /* each row stored in the cache type, the reference reading back what is stored */
            for (size_t r = 0; r < (size_t)Hkv * cap; r++) {
                float *xr = kv[i] + r * D;
                uint8_t *dst = img[i] + r * row;
                if (d->kv_type == HK_TYPE_F32) {
                    memcpy(dst, xr, row);
                } else if (d->kv_type == HK_TYPE_F16) {
                    for (uint32_t j = 0; j < D; j++) {
                        uint16_t h = hk_f32_to_f16(xr[j]);
                        memcpy(dst + 2 * j, &h, 2);
                        xr[j] = hk_f16_to_f32(h);
                    }
                } else {
                    hk_quant_row_q8_0(xr, (hk_block_q8_0 *)dst, D);
                    hk_dequant_row_q8_0((const hk_block_q8_0 *)dst, xr, D);
                }
            }
        }
        hk_ref_sdpa(q, kv[0], kv[1], b->ref, 1, H, Hkv, cap, D, s->scale, 0);
        b->n_out = (size_t)H * D;
        b->gate = 1e-5; /* f32 arithmetic against the double reference: about 1e-6 (hkernel.h) */
        st = upload_new(ctx, (uint64_t)H * D * 4, q, &b->q);
        if (st == HK_OK)
            st = upload_new(ctx, b->kv_stride * b->copies, NULL, &b->k);
        if (st == HK_OK)
            st = upload_new(ctx, b->kv_stride * b->copies, NULL, &b->v);
        for (uint32_t c = 0; c < b->copies && st == HK_OK; c++) {
            st = hk_buffer_upload(b->k, c * b->kv_stride, img[0], cache);
            if (st == HK_OK)
                st = hk_buffer_upload(b->v, c * b->kv_stride, img[1], cache);
        }
        if (st == HK_OK)
            st = upload_new(ctx, (uint64_t)H * D * 4, NULL, &b->out);
    }
    free(q);
    free(kv[0]);
    free(kv[1]);
    free(img[0]);
    free(img[1]);
    return st;
}

static hk_status bench_record(bench *b, hk_stream *stream, uint32_t copy)
{
    const hk_tune_desc *d = b->desc;
    if (b->family == HK_TUNE_MATVEC_INT8)
        return hk_matvec_int8(b->ctx, stream, d->wtype, (hk_view){b->w, copy * b->w_stride}, (hk_view){b->xq, 0},
                              (hk_view){b->y, 0}, d->rows, d->k);
    if (b->family == HK_TUNE_MATVEC_TOKENS)
        return hk_matvec_int8_tokens(b->ctx, stream, d->wtype, (hk_view){b->w, copy * b->w_stride},
                                     (hk_view){b->xq, 0}, (hk_view){b->y, 0}, d->rows, d->k, d->tokens);
    return hk_sdpa_blk(b->ctx, stream, &b->sdpa, (hk_view){b->q, 0}, (hk_view){b->k, copy * b->kv_stride},
                       (hk_view){b->v, copy * b->kv_stride}, (hk_view){b->out, 0}, (hk_view){b->ws, 0},
                       (hk_view){NULL, 0});
}

/* The workspace the current schedule needs (sdpa): grown as candidates ask. */
static hk_status bench_workspace(bench *b)
{
    if (b->family != HK_TUNE_SDPA_DECODE)
        return HK_OK;
    uint64_t bytes;
    hk_status st = hk_sdpa_workspace_bytes(b->ctx, &b->sdpa, &bytes);
    if (st != HK_OK || bytes <= b->ws_bytes)
        return st;
    hk_buffer_destroy(b->ws);
    b->ws = NULL;
    b->ws_bytes = 0;
    st = hk_buffer_create(b->ctx, bytes, &b->ws);
    if (st == HK_OK)
        b->ws_bytes = bytes;
    return st;
}

static double now_ms(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Runs the current schedule once into a poisoned output and compares it with the reference;
 * then times it: repeats batches of `batch` calls rotating over the copies, each batch between
 * two GPU timestamps (host time where the queue has none), the minimum kept. *ms = INFINITY and
 * a reason where the gate fails. */
static hk_status bench_measure(bench *b, double *ms, double *err, char *why, size_t why_size)
{
    const hk_tune_desc *d = b->desc;
    *ms = INFINITY;
    hk_status st = bench_workspace(b);
    if (st != HK_OK)
        return st;
    hk_buffer *out = b->family == HK_TUNE_SDPA_DECODE ? b->out : b->y;
    union {
        float f;
        uint32_t u;
    } poison = {.u = 0x7FC0BEEFu};
    for (size_t i = 0; i < b->n_out; i++)
        b->got[i] = poison.f;
    st = hk_buffer_upload(out, 0, b->got, b->n_out * 4);
    if (st == HK_OK)
        st = bench_record(b, NULL, b->copies - 1);
    if (st == HK_OK)
        st = hk_buffer_download(out, 0, b->got, b->n_out * 4);
    if (st != HK_OK)
        return st;
    *err = hk_scale_rel(b->got, b->ref, b->n_out);
    if (!(*err < b->gate)) {
        snprintf(why, why_size, "gate: scale_rel %.2e against the reference (gate %.0e)", *err, b->gate);
        return HK_OK;
    }
    size_t differ = 0;
    for (size_t i = 0; b->exact && i < b->n_out; i++)
        differ += memcmp(&b->got[i], &b->exact[i], 4) != 0;
    if (differ) {
        snprintf(why, why_size, "gate: %zu of %zu outputs not bit-identical to hk_matvec_int8", differ, b->n_out);
        return HK_OK;
    }
    uint32_t repeats = d->repeats ? d->repeats : 5, batch = d->batch ? d->batch : 8;
    int gpu = b->ctx->caps.timestamps;
    hk_stream *s = NULL;
    st = hk_stream_create(b->ctx, gpu ? 2 : 0, &s);
    double best = INFINITY;
    for (uint32_t r = 0; r <= repeats && st == HK_OK; r++) { /* r == 0 warms up */
        double t0 = now_ms(), t = 0;
        if (gpu)
            st = hk_stream_timestamp(s, NULL);
        for (uint32_t i = 0; i < batch && st == HK_OK; i++)
            st = bench_record(b, s, i % b->copies);
        if (st == HK_OK && gpu)
            st = hk_stream_timestamp(s, NULL);
        if (st == HK_OK)
            st = hk_stream_submit(s);
        if (st == HK_OK && gpu)
            st = hk_stream_elapsed_ms(s, 0, 1, &t);
        else
            t = now_ms() - t0;
        if (st == HK_OK && r > 0 && t / batch < best)
            best = t / batch;
        /* GPUs: batches of at least ~2 ms, so that launch gaps and clock ramps weigh little */
        if (st == HK_OK && r == 0 && !d->batch && t < 2.0) {
            double grow = 2.0 / (t > 0.005 ? t : 0.005);
            batch = batch * grow > 256 ? 256 : (uint32_t)(batch * grow) + 1;
        }
    }
    hk_stream_destroy(s);
    *ms = best;
    return st;
}

/* ---- search ---- */

typedef struct cand {
    uint32_t v[HK_TUNE_MAX_PARAMS];
    int state; /* CAND_* */
    double ms;
    uint32_t sig[8];
} cand;
enum { CAND_STATIC, CAND_DUPLICATE, CAND_GATE, CAND_MEASURED };

typedef struct search {
    bench *b;
    const tune_family *f;
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

static int static_tier(bench *b, const uint32_t *v, uint32_t sig[8], char *why, size_t why_size)
{
    const hk_tune_desc *d = b->desc;
    memset(sig, 0, 8 * sizeof *sig);
    if (b->family == HK_TUNE_MATVEC_INT8) {
        if (!hk__matvec_int8_static(b->ctx, d->wtype, d->rows, d->k, v, why, why_size))
            return 0;
        for (int i = 0; i < MV_PARAMS; i++)
            sig[i] = v[i];
        return 1;
    }
    if (b->family == HK_TUNE_MATVEC_TOKENS)
        return hk__matvec_tokens_static(b->ctx, d->wtype, d->rows, d->k, d->tokens, v, sig, why, why_size);
    return hk__sdpa_decode_static(b->ctx, &b->sdpa, v, sig, why, why_size);
}

/* Evaluates a schedule once (memoized): its time, INFINITY where rejected. */
/* A candidate rejected before any timing (the static tier, or the kernel refusing it): counted,
 * its reason tallied; a planted candidate is not kept among the search's candidates. */
static void reject_static(search *s, cand *c, const char *text, const char *verb, const char *why, int plant)
{
    c->state = CAND_STATIC;
    s->r->rejected_static++;
    add_reason(s, why);
    if (s->verbose)
        printf("  %-48s %s%s\n", text, verb, why);
    if (!plant)
        s->count++;
}

static hk_status evaluate(search *s, const uint32_t *v, int plant, double *out_ms)
{
    bench *b = s->b;
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
    char why[160] = "", text[128];
    format_sched(s->f, v, text, sizeof text);
    if (!static_tier(b, v, c->sig, why, sizeof why)) {
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
                printf("  %-48s same plan as an earlier candidate\n", text);
            s->count++;
            return HK_OK;
        }
    forced.mode = 1;
    forced.context = b->ctx;
    forced.family = b->family;
    forced.key = b->key;
    memset(&forced.sched, 0, sizeof forced.sched);
    memcpy(forced.sched.v, v, sizeof forced.sched.v);
    forced.sched.plant = plant;
    double err = 0;
    hk_status st = bench_measure(b, &c->ms, &err, why, sizeof why);
    forced.mode = 0;
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
            printf("  %-48s%s rejected: %s\n", text, plant ? " (planted)" : "", why);
    } else {
        c->state = CAND_MEASURED;
        s->r->measured++;
        if (s->verbose)
            printf("  %-48s %10.5f ms  (scale_rel %.1e)\n", text, c->ms, err);
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

static void genes_to_values(const tune_family *f, const uint32_t *g, uint32_t *v)
{
    memset(v, 0, HK_TUNE_MAX_PARAMS * sizeof *v);
    for (uint32_t i = 0; i < f->count; i++)
        v[i] = f->p[i].values[g[i]];
}

static hk_status search_exhaustive(search *s, uint64_t space)
{
    uint32_t g[HK_TUNE_MAX_PARAMS] = {0}, v[HK_TUNE_MAX_PARAMS];
    for (uint64_t n = 0; n < space && s->r->measured < s->max_measured; n++) {
        uint64_t rest = n;
        for (uint32_t i = 0; i < s->f->count; i++) {
            g[i] = (uint32_t)(rest % s->f->p[i].count);
            rest /= s->f->p[i].count;
        }
        genes_to_values(s->f, g, v);
        double ms;
        hk_status st = evaluate(s, v, 0, &ms);
        if (st != HK_OK)
            return st;
    }
    return HK_OK;
}

#define GA_POP 8
/* Seeded genetic search: a random population, then per generation the two best kept, the rest
 * children of two tournament winners (uniform crossover, each gene redrawn with probability
 * 1/params). The draws are a function of the seed and of the measured order. Ends when
 * max_measured schedules were measured or generations stop finding new schedules. */
static hk_status search_genetic(search *s, uint64_t seed)
{
    const tune_family *f = s->f;
    uint64_t x = seed ? seed * 0x9E3779B97F4A7C15ull : 0x9E3779B97F4A7C15ull;
    uint32_t pop[GA_POP][HK_TUNE_MAX_PARAMS], next[GA_POP][HK_TUNE_MAX_PARAMS], v[HK_TUNE_MAX_PARAMS];
    double fit[GA_POP];
    memset(pop, 0, sizeof pop);
    hk_status st = HK_OK;
    for (int i = 0; i < GA_POP && st == HK_OK; i++) {
        for (uint32_t j = 0; j < f->count; j++)
            pop[i][j] = (uint32_t)(rng_next(&x) % f->p[j].count);
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
            for (uint32_t j = 0; j < f->count; j++) {
                next[i][j] = rng_next(&x) & 1 ? pop[a][j] : pop[b][j];
                if (rng_next(&x) % f->count == 0)
                    next[i][j] = (uint32_t)(rng_next(&x) % f->p[j].count);
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

/* ---- public API ---- */

void hk_tune_desc_init_sized(hk_tune_desc *desc, size_t desc_size)
{
    if (!desc)
        return;
    memset(desc, 0, desc_size);
    desc->struct_size = (uint32_t)desc_size;
}

static hk_status check_desc(hk_context *context, const hk_tune_desc *d, char key[HK_TUNE_SHAPE_CHARS])
{
    static const char fn[] = "hk_tune";
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    if (!d)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "desc is NULL");
    if (d->struct_size < sizeof *d)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "desc->struct_size=%u is not sizeof(hk_tune_desc)=%zu "
                        "(hk_tune_desc_init)", d->struct_size, sizeof *d);
    if (!family_of(d->kernel))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kernel=%d is not HK_TUNE_MATVEC_INT8, HK_TUNE_SDPA_DECODE or "
                        "HK_TUNE_MATVEC_TOKENS", (int)d->kernel);
    if (d->copies > 64)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "copies=%u is more than 64", d->copies);
    if (d->repeats > 1000 || d->batch > 1000)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "repeats=%u or batch=%u is more than 1000", d->repeats,
                        d->batch);
    if (d->kernel == HK_TUNE_MATVEC_INT8 || d->kernel == HK_TUNE_MATVEC_TOKENS) {
        if (d->wtype != HK_TYPE_Q8_0 && d->wtype != HK_TYPE_Q4_K && d->wtype != HK_TYPE_Q6_K)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "wtype=%s is not q8_0, q4_k or q6_k", hk_type_name(d->wtype));
        uint32_t block = hk_type_block_values(d->wtype);
        if (!d->rows || !d->k || d->k % block)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u and k=%u must be positive, k a multiple of %u",
                            d->rows, d->k, block);
        if (d->rows > HK_MATVEC_MAX_ROWS || d->k > HK_MATVEC_MAX_K)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u or k=%u past hk_matvec_int8's limits", d->rows, d->k);
        if ((uint64_t)d->rows * d->k > (1ull << 28))
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows x k = %llu is more than the tuner's 2^28 values",
                            (unsigned long long)d->rows * d->k);
        if (d->kernel == HK_TUNE_MATVEC_INT8) {
            hk__tune_key_matvec(key, d->wtype, d->rows, d->k);
            return HK_OK;
        }
        if (d->tokens < 2 || d->tokens > HK_MATVEC_MAX_TOKENS)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=%u is not in 2..%u (HK_TUNE_MATVEC_TOKENS)",
                            d->tokens, HK_MATVEC_MAX_TOKENS);
        uint64_t limit = ((uint64_t)d->rows + 32767) / 32768 * d->k * (d->tokens + 1);
        if (limit > HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "ceil(rows/32768)*k*(tokens+1)=%llu past "
                            "hk_matvec_int8_tokens' limit %u", (unsigned long long)limit,
                            HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS);
        hk__tune_key_matvec_tokens(key, d->wtype, d->rows, d->k, d->tokens);
        return HK_OK;
    }
    if (d->kv_type != HK_TYPE_F32 && d->kv_type != HK_TYPE_F16 && d->kv_type != HK_TYPE_Q8_0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kv_type=%s is not f32, f16 or q8_0", hk_type_name(d->kv_type));
    uint32_t multiple = d->kv_type == HK_TYPE_Q8_0 ? 32 : 16;
    if (!d->n_heads || !d->n_kv_heads || d->n_heads % d->n_kv_heads || !d->head_dim || d->head_dim % multiple ||
        d->head_dim > 256 || !d->capacity || d->capacity > 2097152)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_heads=%u, n_kv_heads=%u, head_dim=%u, capacity=%u is not a "
                        "flash-decoding shape (hk_sdpa_blk)", d->n_heads, d->n_kv_heads, d->head_dim, d->capacity);
    if ((uint64_t)d->n_kv_heads * d->capacity * d->head_dim > (1ull << 26))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_kv_heads x capacity x head_dim = %llu is more than the "
                        "tuner's 2^26 values", (unsigned long long)d->n_kv_heads * d->capacity * d->head_dim);
    hk__tune_key_sdpa(key, d->kv_type, d->n_heads, d->n_kv_heads, d->head_dim, d->capacity);
    return HK_OK;
}

hk_status hk_tune_sized(hk_context *context, const hk_tune_desc *desc, hk_tune_report *out_report, size_t report_size)
{
    static const char fn[] = "hk_tune";
    char key[HK_TUNE_SHAPE_CHARS];
    hk_status st = check_desc(context, desc, key);
    if (st != HK_OK)
        return st;
    if (out_report && report_size < offsetof(hk_tune_report, rejects))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "report_size=%zu is too small", report_size);
    if ((st = hk__check_alive(context, fn)) != HK_OK)
        return st;
    if (!context->tune)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "the context has no tuner state (out of host memory)");
    const tune_family *f = family_of(desc->kernel);
    hk_tune_report r;
    memset(&r, 0, sizeof r);
    r.struct_size = (uint32_t)sizeof r;
    snprintf(r.shape, sizeof r.shape, "%s", key);
    r.default_ms = r.best_ms = NAN;
    uint64_t space = 1;
    for (uint32_t i = 0; i < f->count; i++)
        space *= f->p[i].count;
    r.space = (uint32_t)space;
    hk__sched cached;
    int source;
    if (!desc->force && hk__tune_lookup(context, desc->kernel, key, &cached, &source)) {
        r.from_cache = 1;
        format_sched(f, cached.v, r.schedule, sizeof r.schedule);
        goto out;
    }
    bench b = {.ctx = context, .family = desc->kernel, .key = key, .desc = desc};
    search s = {.b = &b, .f = f, .r = &r, .max_measured = desc->max_measured ? desc->max_measured : 32,
                .verbose = desc->verbose};
    st = bench_setup(&b);
    /* the built-in default (or the hooks), served and measured first: the winner is never one
     * the search measured slower than it */
    uint32_t dv[HK_TUNE_MAX_PARAMS] = {0};
    if (st == HK_OK) {
        forced.mode = 2;
        forced.context = context;
        forced.family = desc->kernel;
        forced.key = key;
        st = bench_workspace(&b);
        if (st == HK_OK)
            st = bench_record(&b, NULL, 0);
        forced.mode = 0;
        memcpy(dv, forced.served, sizeof dv);
        format_sched(f, dv, r.default_schedule, sizeof r.default_schedule);
        if (s.verbose && st == HK_OK)
            printf("%s %s: default %s\n", f->name, key, r.default_schedule);
    }
    if (st == HK_OK)
        st = evaluate(&s, dv, 0, &r.default_ms);
    const char *plant = getenv("HK_TUNE_PLANT_WRONG");
    if (st == HK_OK && plant && !strcmp(plant, "1")) {
        double ignored;
        st = evaluate(&s, dv, 1, &ignored);
    }
    if (st == HK_OK)
        st = space <= 64 ? search_exhaustive(&s, space) : search_genetic(&s, desc->seed);
    if (st == HK_OK) {
        int best = -1;
        for (uint32_t i = 0; i < s.count; i++)
            if (s.c[i].state == CAND_MEASURED && (best < 0 || s.c[i].ms < s.c[best].ms))
                best = (int)i;
        if (best < 0) {
            st = hk__fail(HK_ERROR_UNSUPPORTED, fn, "no schedule of %s passed the gate for %s (%u rejected)", f->name,
                          key, r.rejected_static + r.rejected_gate);
        } else {
            r.best_ms = s.c[best].ms;
            format_sched(f, s.c[best].v, r.schedule, sizeof r.schedule);
            struct hk_tune_state *t = context->tune;
            hk__mutex_lock(&t->lock);
            int ok = entry_set(t, desc->kernel, key, s.c[best].v, r.best_ms);
            hk__mutex_unlock(&t->lock);
            if (!ok)
                st = hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
            else if (!desc->no_store)
                store(context, desc->kernel, key, s.c[best].v, r.best_ms);
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
    bench_free(&b);
    if (st != HK_OK)
        return st;
out:
    if (out_report)
        memcpy(out_report, &r, report_size < sizeof r ? report_size : sizeof r);
    return HK_OK;
}

hk_status hk_schedule_last(hk_context *context, hk_tune_kernel kernel, char *out, size_t out_size)
{
    static const char fn[] = "hk_schedule_last";
    static const char *const sources[] = {"default", "env", "tuned", "search"};
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    const tune_family *f = family_of(kernel);
    if (!f)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kernel=%d is not HK_TUNE_MATVEC_INT8, HK_TUNE_SDPA_DECODE or "
                        "HK_TUNE_MATVEC_TOKENS", (int)kernel);
    if (!out || out_size < 2)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out is NULL or out_size=%zu under 2", out_size);
    struct hk_tune_state *t = context->tune;
    uint32_t v[HK_TUNE_MAX_PARAMS];
    int set = 0, source = 0;
    if (t) {
        hk__mutex_lock(&t->lock);
        set = t->last_set[kernel];
        memcpy(v, t->last[kernel], sizeof v);
        source = t->last_source[kernel];
        hk__mutex_unlock(&t->lock);
    }
    if (!set)
        return hk__fail(HK_ERROR_STATE, fn, "no %s call has run on this context yet", f->name);
    char text[128], line[160];
    format_sched(f, v, text, sizeof text);
    int w = snprintf(line, sizeof line, "%s %s", sources[source], text);
    if (w < 0 || (size_t)w >= out_size)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_size=%zu is too small (%d bytes needed)", out_size, w + 1);
    memcpy(out, line, (size_t)w + 1);
    return HK_OK;
}

const char *hk_tune_cache_file(const hk_context *context)
{
    return context && context->tune ? context->tune->file : NULL;
}
