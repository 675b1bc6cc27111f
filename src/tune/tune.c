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
/* The format of a cache line. 2: shape classes with bucketed counts (1 keyed exact shapes; its
 * lines are kept in the file but never read). */
#define TUNE_TAG "hkernel-tune-2"
#define TUNE_TAG_PREFIX "hkernel-tune-"
#define TUNE_LINE_CHARS 1024 /* a longer line is skipped with a warning */
#define TUNE_LOCK_SECONDS 5  /* the longest wait for another process's lock on the file */
#define TUNE_MAX_VALUES 8
#define TUNE_MAX_REASONS 16

/* ---- search spaces ---- */

typedef struct tune_param {
    const char *name;
    uint32_t count;
    uint32_t values[TUNE_MAX_VALUES]; /* searched */
    /* what a cached schedule may hold (the hooks' ranges: a default may lie outside the list,
     * e.g. groups=160): lo..hi, a power of two where pow2 */
    uint32_t lo, hi;
    int pow2;
} tune_param;

typedef struct tune_family {
    const char *name; /* NULL: no such family */
    uint32_t count;
    tune_param p[HK_TUNE_MAX_PARAMS];
} tune_family;

/* Indexed by hk_tune_kernel. Constraints between the values live in the families' static tiers
 * (hk__*_static, next to each family's planning code). The tokens matvec's workgroup cap ranges
 * over its hook's values (HK_MATVEC_TOKENS_WGS), since a default may lie outside the list. */
/* hk_matvec_int8 and hk_moe_matvec_int8 search the same one-token space (matvec.c's MV_*), hk_mmq
 * and hk_mmq_id the same tile space (mmq.c's mmq_tile) */
#define MV_SPACE                                                                                              \
    {                                                                                                         \
        {"nrows", 3, {1, 2, 4}, 1, 4, 1}, {"items", 3, {1, 2, 4}, 1, 4, 1}, {"load_bits", 2, {16, 32}, 16, 32, 1} \
    }
#define MMQ_SPACE                                                                                               \
    {                                                                                                           \
        {"wm", 4, {1, 2, 4, 8}, 1, 64, 0}, {"wn", 4, {1, 2, 4, 8}, 1, 64, 0}, {"rm", 3, {1, 2, 4}, 1, 8, 0},   \
            {"rn", 3, {1, 2, 4}, 1, 8, 0}, {"ks", 4, {1, 2, 4, 8}, 1, 8, 1}, {"prefetch", 2, {0, 1}, 0, 1, 0}, \
            {"rolled", 2, {0, 1}, 0, 1, 0}                                                                      \
    }
static const tune_family families[HK_TUNE_FAMILIES] = {
    [HK_TUNE_MATVEC_INT8] = {"matvec_int8", MV_PARAMS, MV_SPACE},
    [HK_TUNE_MATVEC_TOKENS] = {"matvec_int8_tokens", MT_PARAMS,
                               {{"subgroups", 4, {4, 8, 16, 32}, 4, 32, 1},
                                {"nrows", 3, {1, 2, 4}, 1, 4, 1},
                                {"items", 3, {1, 2, 4}, 1, 4, 1},
                                {"resident", 2, {0, 1}, 0, 1, 0},
                                {"wgs", 6, {64, 128, 256, 512, 1024, 8192}, 1, 8192, 0}}},
    [HK_TUNE_SDPA_DECODE] = {"sdpa_decode", SD_PARAMS,
                             {{"groups", 7, {8, 16, 32, 64, 128, 256, 512}, 1, 1u << 20, 0},
                              {"wg", 4, {32, 64, 128, 256}, 32, 1024, 1},
                              {"lpk", 4, {2, 4, 8, 16}, 1, 64, 1},
                              {"kb", 4, {1, 2, 4, 8}, 1, 16, 1},
                              {"rows", 4, {1, 2, 4, 8}, 1, 8, 1},
                              {"single", 2, {0, 1}, 0, 1, 0}}},
    [HK_TUNE_GEMM_F16] = {"gemm_f16", GM_PARAMS,
                          {{"wm", 4, {1, 2, 4, 8}, 1, 64, 0},
                           {"wn", 4, {1, 2, 4, 8}, 1, 64, 0},
                           {"rm", 3, {1, 2, 4}, 1, 8, 0},
                           {"rn", 3, {1, 2, 4}, 1, 8, 0},
                           {"bk", 3, {32, 64, 128}, 32, 256, 1},
                           {"prefetch", 2, {0, 1}, 0, 1, 0}}},
    [HK_TUNE_FLASH_PREFILL] = {"flash_prefill", FL_PARAMS,
                               {{"subgroups", 4, {1, 2, 4, 8}, 1, 16, 0},
                                {"rows", 4, {8, 16, 32, 64}, 8, 64, 1},
                                {"bc", 4, {8, 16, 32, 64}, 8, 128, 0},
                                {"bkv", 4, {16, 32, 64, 128}, 8, 256, 0},
                                {"qreg", 2, {0, 1}, 0, 1, 0},
                                {"prefetch", 2, {0, 1}, 0, 1, 0},
                                {"groups", 4, {64, 128, 256, 512}, 1, 1000000, 0}}},
    [HK_TUNE_MMQ] = {"mmq", MQ_PARAMS, MMQ_SPACE},
    [HK_TUNE_MMQ_ID] = {"mmq_id", MQ_PARAMS, MMQ_SPACE},
    [HK_TUNE_MOE_MATVEC_INT8] = {"moe_matvec_int8", MV_PARAMS, MV_SPACE},
};

static const tune_family *family_of(int kernel)
{
    return kernel > 0 && kernel < HK_TUNE_FAMILIES && families[kernel].name ? &families[kernel] : NULL;
}

static int family_named(const char *name)
{
    for (int i = 1; i < HK_TUNE_FAMILIES; i++)
        if (families[i].name && !strcmp(families[i].name, name))
            return i;
    return 0;
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
 * (values_valid checks their ranges). */
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

/* The values a cached schedule may hold (tune_param's ranges). */
static int values_valid(const tune_family *f, const uint32_t *v)
{
    for (uint32_t i = 0; i < f->count; i++) {
        const tune_param *p = &f->p[i];
        if (v[i] < p->lo || v[i] > p->hi || (p->pow2 && (v[i] & (v[i] - 1))))
            return 0;
    }
    return 1;
}

/* ---- shape classes ---- */

/* x's power-of-two range: "257-512" (1: "1-1", 3 and 4: "3-4") */
static void bucket(char *out, size_t size, uint32_t x)
{
    uint64_t hi = 1;
    while (hi < x)
        hi <<= 1;
    snprintf(out, size, "%llu-%llu", (unsigned long long)(hi / 2 + 1 < hi ? hi / 2 + 1 : hi),
             (unsigned long long)hi);
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
    char cap[32];
    bucket(cap, sizeof cap, capacity);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:h%u/kv%u/d%u/cap%s", hk_type_name(kv_type), n_heads, n_kv_heads, head_dim,
             cap);
}

void hk__tune_key_gemm(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, uint32_t m, uint32_t n, uint32_t k)
{
    char mb[32];
    bucket(mb, sizeof mb, m);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:m%s/n%u/k%u", hk_type_name(wtype), mb, n, k);
}

void hk__tune_key_mmq_id(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, const hk_mmq_id_shape *s)
{
    char mb[32];
    bucket(mb, sizeof mb, s->n_slots);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:e%u/n%u/k%u/m%s/x%u", hk_type_name(wtype), s->n_experts, s->n, s->k, mb,
             s->slots_per_x_row);
}

void hk__tune_key_moe_matvec(char key[HK_TUNE_SHAPE_CHARS], hk_type wtype, const hk_moe_shape *s)
{
    char sb[32];
    bucket(sb, sizeof sb, s->slots);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:e%u/n%u/k%u/s%s%s", hk_type_name(wtype), s->n_experts, s->n, s->k, sb,
             s->x_per_slot ? "/per-slot" : "");
}

void hk__tune_key_flash(char key[HK_TUNE_SHAPE_CHARS], const hk_sdpa_desc *d)
{
    char q[32], cap[32];
    bucket(q, sizeof q, d->n_q);
    bucket(cap, sizeof cap, d->kv.capacity);
    snprintf(key, HK_TUNE_SHAPE_CHARS, "%s:h%u/kv%u/d%u/q%s/cap%s%s", hk_type_name(d->kv.type), d->n_heads,
             d->n_kv_heads, d->head_dim, q, cap, d->causal ? "/causal" : "");
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
    uint32_t last[HK_TUNE_FAMILIES][HK_TUNE_MAX_PARAMS];
    int last_source[HK_TUNE_FAMILIES], last_set[HK_TUNE_FAMILIES];
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
    int noted;                           /* served is set */
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
        forced.noted = 1;
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

enum { SPLIT_BAD, SPLIT_OK, SPLIT_OTHER_FORMAT };

/* SPLIT_OK: a line of this format, its columns split in place. SPLIT_OTHER_FORMAT: another
 * hkernel-tune-N line (col[0..3] split where it has them, the others NULL). SPLIT_BAD: neither. */
static int split_line(char *line, tune_line *l)
{
    memset(l, 0, sizeof *l);
    int n = 0;
    for (char *s = line; n < 9;) {
        l->col[n++] = s;
        char *tab = strchr(s, '\t');
        if (!tab)
            break;
        *tab = 0;
        s = tab + 1;
        if (n == 9)
            return SPLIT_BAD; /* a tenth column */
    }
    if (strcmp(l->col[0], TUNE_TAG)) {
        if (strncmp(l->col[0], TUNE_TAG_PREFIX, strlen(TUNE_TAG_PREFIX)) || !l->col[0][strlen(TUNE_TAG_PREFIX)])
            return SPLIT_BAD;
        for (int i = 4; i < 9; i++)
            l->col[i] = NULL;
        return SPLIT_OTHER_FORMAT;
    }
    if (n != 9)
        return SPLIT_BAD;
    for (int i = 1; i < 9; i++)
        if (!*l->col[i] || strlen(l->col[i]) >= HK_TUNE_SHAPE_CHARS)
            return SPLIT_BAD;
    char *end;
    l->ms = strtod(l->col[8], &end);
    if (*end || !(l->ms >= 0) || l->ms > 1e9)
        return SPLIT_BAD;
    l->family = family_named(l->col[5]);
    return SPLIT_OK;
}

/* Classifies a split line for this context: another device's (kept, unused), stale (this device,
 * another format or library version, an unknown kernel or a schedule whose names or ranges no
 * longer match), ok. */
static int classify(const hk_context *context, int split, tune_line *l, char *why, size_t why_size)
{
    char id[64];
    identity(context, id, sizeof id);
    if (!l->col[1] || !l->col[2] || !l->col[3])
        return LINE_OTHER_DEVICE; /* another format with too few columns to say whose: kept */
    char dev[64];
    snprintf(dev, sizeof dev, "%s\t%s\t%s", l->col[1], l->col[2], l->col[3]);
    size_t dev_len = strlen(dev);
    if (strncmp(id, dev, dev_len) || id[dev_len] != '\t')
        return LINE_OTHER_DEVICE;
    if (split == SPLIT_OTHER_FORMAT) {
        snprintf(why, why_size, "cache format %.40s, this library reads %s", l->col[0], TUNE_TAG);
        return LINE_STALE;
    }
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
    if (!values_valid(&families[l->family], l->v)) {
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

/* The next line of text[*pos, size) into line, without its newline: 1, or 0 past the end. A line
 * longer than line holds is skipped, *too_long set. */
static int next_line(const char *text, size_t size, size_t *pos, char *line, size_t line_size, int *too_long)
{
    if (*pos >= size)
        return 0;
    const char *start = text + *pos, *newline = memchr(start, '\n', size - *pos);
    size_t len = newline ? (size_t)(newline - start) : size - *pos;
    *pos += len + (newline != NULL);
    *too_long = len >= line_size;
    if (!*too_long) {
        memcpy(line, start, len);
        line[len] = 0;
    }
    return 1;
}

/* A warning that the file at path was not read (hk__read_file's status and errno), ending in what
 * follows from it. */
static void warn_file(const char *path, hk_file_status status, int err, const char *then)
{
    if (status == HK_FILE_LINK)
        warn("%s: a symbolic link, not followed; %s", path, then);
    else if (status == HK_FILE_NOT_REGULAR)
        warn("%s: not a regular file; %s", path, then);
    else if (status == HK_FILE_TOO_LARGE)
        warn("%s: larger than HK_TUNE_CACHE_MAX_BYTES (%u MiB); %s", path, HK_TUNE_CACHE_MAX_BYTES >> 20, then);
    else
        warn("cannot read %s: %s; %s", path, strerror(err), then);
}

static void load_file(hk_context *context, struct hk_tune_state *t)
{
    char *text;
    size_t size;
    int err;
    hk_file_status status = hk__read_file(t->file, HK_TUNE_CACHE_MAX_BYTES, &text, &size, &err);
    if (status != HK_FILE_READ) {
        if (status != HK_FILE_ABSENT) /* absent: no winners yet */
            warn_file(t->file, status, err, "ignored, new winners stay in memory");
        return;
    }
    char line[TUNE_LINE_CHARS];
    unsigned number = 0;
    int too_long;
    for (size_t pos = 0; next_line(text, size, &pos, line, sizeof line, &too_long);) {
        number++;
        if (too_long) {
            warn("%s:%u: line too long, ignored", t->file, number);
            continue;
        }
        if (line[0] == '#' || line[0] == 0)
            continue;
        tune_line l;
        char why[160] = "";
        int split = split_line(line, &l);
        if (split == SPLIT_BAD) {
            warn("%s:%u: malformed line ignored", t->file, number);
            continue;
        }
        int c = classify(context, split, &l, why, sizeof why);
        if (c == LINE_STALE)
            warn("%s:%u: stale line ignored (%s)", t->file, number, why);
        else if (c == LINE_OK && !entry_set(t, l.family, l.col[6], l.v, l.ms))
            warn("out of host memory");
    }
    free(text);
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
 * two tuners at once both land. Anything but a regular file at TUNE_FILE is left alone. Failures
 * are warnings: the winner stays in the context. */
#if !defined(_WIN32)
static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER; /* threads of one process: fcntl locks are per process */

/* The lock file, open and locked (closing it releases the lock), or -1 after a warning. Only a
 * regular file is locked, and another process's lock is waited for TUNE_LOCK_SECONDS at most, so
 * that a stuck process cannot hang hk_tune. */
static int lock_file(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0644), err = 0;
    char why[64] = "";
    struct stat st;
    if (fd < 0) {
        err = errno;
        if (err == ELOOP)
            snprintf(why, sizeof why, "a symbolic link, not followed");
    } else if (fstat(fd, &st) != 0) {
        err = errno;
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(why, sizeof why, "not a regular file");
    } else {
        struct timespec start, now, pause = {0, 20 * 1000 * 1000};
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
            struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            if (fcntl(fd, F_SETLK, &fl) == 0)
                return fd;
            if (errno != EACCES && errno != EAGAIN && errno != EINTR) {
                err = errno;
                break;
            }
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - start.tv_sec >= TUNE_LOCK_SECONDS) {
                snprintf(why, sizeof why, "held by another process for %d s", TUNE_LOCK_SECONDS);
                break;
            }
            nanosleep(&pause, NULL);
        }
    }
    warn("cannot lock %s: %s; the winner stays in memory", path, *why ? why : strerror(err));
    if (fd >= 0)
        close(fd);
    return -1;
}
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
    int fd = -1, err = 0;
    FILE *out = NULL;
    char *old = NULL;
    size_t old_size = 0;
    int dir_err = lock_path && tmp_path ? hk__make_dirs(t->dir) : ENOMEM;
    if (dir_err) {
        warn("cannot create %s: %s", t->dir, strerror(dir_err));
        goto done;
    }
    fd = lock_file(lock_path);
    if (fd < 0)
        goto done;
    hk_file_status status = hk__read_file(t->file, HK_TUNE_CACHE_MAX_BYTES, &old, &old_size, &err);
    if (status != HK_FILE_READ && status != HK_FILE_ABSENT) {
        warn_file(t->file, status, err, "not replaced, the winner stays in memory");
        goto done;
    }
    /* under the lock a file of this name is a crashed writer's: replaced, never opened */
    unlink(tmp_path);
    int tmp_fd = open(tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    out = tmp_fd >= 0 ? fdopen(tmp_fd, "w") : NULL;
    if (!out) {
        warn("cannot write %s: %s", tmp_path, strerror(errno));
        if (tmp_fd >= 0) {
            close(tmp_fd);
            remove(tmp_path);
        }
        goto done;
    }
    const tune_family *f = &families[family];
    char id[64], sched[128];
    identity(context, id, sizeof id);
    format_sched(f, v, sched, sizeof sched);
    char mine[512];
    snprintf(mine, sizeof mine, "%s\t%s\t%s\t%s", TUNE_TAG, id, f->name, key);
    fprintf(out, "# libhkernel autotuner winners: tag, vendor, device, driver, library, kernel, shape, schedule, ms\n");
    char line[TUNE_LINE_CHARS], copy[TUNE_LINE_CHARS];
    int too_long;
    for (size_t pos = 0; next_line(old, old_size, &pos, line, sizeof line, &too_long);) {
        if (too_long)
            continue;
        memcpy(copy, line, sizeof copy);
        tune_line l;
        int split = line[0] == '#' ? SPLIT_BAD : split_line(copy, &l);
        if (split == SPLIT_BAD)
            continue;
        char key_of[512];
        if (split == SPLIT_OK) {
            snprintf(key_of, sizeof key_of, "%s\t%s\t%s\t%s\t%s\t%s\t%s", l.col[0], l.col[1], l.col[2], l.col[3],
                     l.col[4], l.col[5], l.col[6]);
            if (!strcmp(key_of, mine))
                continue;
        }
        fprintf(out, "%s\n", line);
    }
    fprintf(out, "%s\t%s\t%.6f\n", mine, sched, ms);
    long bytes = ftell(out);
    int bad = ferror(out);
    bad |= fflush(out) != 0 || fsync(fileno(out)) != 0;
    bad |= fclose(out) != 0;
    out = NULL;
    if (!bad && bytes > (long)HK_TUNE_CACHE_MAX_BYTES) { /* it would not be read back */
        warn("%s: would be larger than HK_TUNE_CACHE_MAX_BYTES (%u MiB); not replaced, the winner stays in memory",
             t->file, HK_TUNE_CACHE_MAX_BYTES >> 20);
        remove(tmp_path);
    } else if (bad || rename(tmp_path, t->file) != 0) {
        warn("cannot write %s: %s", t->file, strerror(errno));
        remove(tmp_path);
    }
done:
    if (fd >= 0)
        close(fd); /* releases the lock */
    free(old);
    free(lock_path);
    free(tmp_path);
    pthread_mutex_unlock(&store_lock);
#endif
}

/* ---- the measure tier: seeded inputs, the reference, cold timing ---- */

/* The reference covers every output row up to TUNE_ALL_ROWS, else TUNE_SAMPLE_ROWS spread over
 * them (the first and the last among them). */
#define TUNE_ALL_ROWS 64u
#define TUNE_SAMPLE_ROWS 8u

typedef struct bench {
    hk_context *ctx;
    int family;
    const char *key;
    const hk_tune_desc *desc;
    /* the rotated inputs (the weights; the K and V caches): `copies` copies `stride` bytes apart */
    uint32_t copies;
    uint64_t stride;
    hk_buffer *w, *k, *v;
    hk_buffer *x, *out, *ws, *offsets, *slots; /* x: the activation (xq, x or q) */
    hk_buffer *ids;                            /* the MoE matvec's routing */
    uint64_t ws_bytes;
    hk_sdpa_desc sdpa;
    hk_mmq_id_shape id;
    hk_moe_shape moe;
    /* the gate: out holds out_rows rows of row_len floats; the reference covers n_ref of them
     * (ref_row), held to gate against ref and, where ref2 is set, to gate2 against ref2 */
    uint32_t out_rows, row_len, n_ref, ref_row[TUNE_ALL_ROWS];
    float *ref, *ref2, *got, *sample;
    double gate, gate2;
    /* outputs every schedule must give bit for bit (NULL: none), and whose they are: the tokens
     * matvec hk_matvec_int8's per token (setup_matvec); the MoE matvec the default schedule's
     * (exact_default: hk_tune keeps them from its default call) */
    float *exact;
    const char *exact_of;
    int exact_default;
} bench;

static void bench_free(bench *b)
{
    hk_buffer *bufs[] = {b->w, b->k, b->v, b->x, b->out, b->ws, b->offsets, b->slots, b->ids};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        hk_buffer_destroy(bufs[i]);
    free(b->ref);
    free(b->ref2);
    free(b->got);
    free(b->sample);
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

/* `copies` copies of data (bytes each, 256 bytes apart at least) in one new buffer */
static hk_status upload_copies(bench *b, const void *data, uint64_t bytes, hk_buffer **out)
{
    hk_status st = upload_new(b->ctx, b->stride * b->copies, NULL, out);
    for (uint32_t c = 0; c < b->copies && st == HK_OK; c++)
        st = hk_buffer_upload(*out, c * b->stride, data, bytes);
    return st;
}

/* The output's shape, the rows the reference covers and the host arrays of the gate (the
 * reference itself is the family's to fill). */
static hk_status bench_rows(bench *b, uint32_t rows, uint32_t row_len, int second_ref)
{
    b->out_rows = rows;
    b->row_len = row_len;
    b->n_ref = rows <= TUNE_ALL_ROWS ? rows : TUNE_SAMPLE_ROWS;
    for (uint32_t i = 0; i < b->n_ref; i++)
        b->ref_row[i] = b->n_ref == rows ? i : (uint32_t)((uint64_t)i * (rows - 1) / (b->n_ref - 1));
    size_t n_ref = (size_t)b->n_ref * row_len;
    b->ref = malloc(n_ref * sizeof *b->ref);
    b->ref2 = second_ref ? malloc(n_ref * sizeof *b->ref2) : NULL;
    b->sample = malloc(n_ref * sizeof *b->sample);
    b->got = malloc((size_t)rows * row_len * sizeof *b->got);
    if (!b->ref || (second_ref && !b->ref2) || !b->sample || !b->got)
        return hk__fail(HK_ERROR_OUT_OF_MEMORY, "hk_tune", "out of host memory");
    return upload_new(b->ctx, (uint64_t)rows * row_len * 4, NULL, &b->out);
}

static hk_status host_oom(void) { return hk__fail(HK_ERROR_OUT_OF_MEMORY, "hk_tune", "out of host memory"); }

/* Q8_1 rows of random activations in [-1, 1) */
static hk_block_q8_1 *q8_1_rows(hk_rng *rng, uint32_t rows, uint32_t k)
{
    float *x = malloc((size_t)k * sizeof *x);
    hk_block_q8_1 *xq = x ? malloc((size_t)rows * (k / 32) * sizeof *xq + 1) : NULL;
    for (uint32_t r = 0; xq && r < rows; r++) {
        hk_rng_fill(rng, x, k, -1.0f, 1.0f);
        hk_quant_row_q8_1(x, xq + (size_t)r * (k / 32), k);
    }
    free(x);
    return xq;
}

/* The int8 matvec: one token, or (HK_TUNE_MATVEC_TOKENS) d->tokens of them, output row t token t */
static hk_status setup_matvec(bench *b, hk_rng *rng)
{
    const hk_tune_desc *d = b->desc;
    uint32_t tokens = b->family == HK_TUNE_MATVEC_TOKENS ? d->tokens : 1, blocks = d->k / 32;
    uint64_t wbytes = (uint64_t)d->rows * hk_type_bytes(d->wtype, d->k);
    b->stride = (wbytes + 255) & ~(uint64_t)255;
    b->copies = copies_for(d, wbytes);
    uint8_t *w = hk_random_weights(rng, (int)d->wtype, d->rows, d->k, 0);
    hk_block_q8_1 *xq = q8_1_rows(rng, tokens, d->k);
    hk_status st = w && xq ? bench_rows(b, tokens, d->rows, 0) : host_oom();
    if (st == HK_OK && tokens > 1 && !(b->exact = malloc((size_t)tokens * d->rows * sizeof *b->exact)))
        st = host_oom();
    b->exact_of = "hk_matvec_int8";
    if (st == HK_OK) {
        for (uint32_t i = 0; i < b->n_ref; i++)
            hk_ref_matvec_q8_1((int)d->wtype, w, xq + (size_t)b->ref_row[i] * blocks, b->ref + (size_t)i * d->rows,
                               d->rows, d->k);
        b->gate = HK_GATE_EXACT;
        st = upload_copies(b, w, wbytes, &b->w);
    }
    if (st == HK_OK)
        st = upload_new(b->ctx, (uint64_t)tokens * blocks * sizeof *xq, xq, &b->x);
    /* the bits every tokens schedule must give: hk_matvec_int8 on each token */
    for (uint32_t t = 0; t < tokens && tokens > 1 && st == HK_OK; t++)
        st = hk_matvec_int8(b->ctx, NULL, d->wtype, (hk_view){b->w, 0}, (hk_view){b->x, (uint64_t)t * blocks * 36},
                            (hk_view){b->out, (uint64_t)t * d->rows * 4}, d->rows, d->k);
    if (st == HK_OK && tokens > 1)
        st = hk_buffer_download(b->out, 0, b->exact, (size_t)tokens * d->rows * 4);
    free(w);
    free(xq);
    return st;
}

/* Flash-decoding (n_q = 1) and flash prefill: a head-major cache of capacity rows per kv head,
 * each row stored in the cache type, the reference reading back what is stored; timed with
 * seq_k = capacity. The reference of query i runs kv head by kv head on its group's heads. */
static hk_status setup_attention(bench *b, hk_rng *rng)
{
    const hk_tune_desc *d = b->desc;
    int prefill = b->family == HK_TUNE_FLASH_PREFILL;
    uint32_t nq = prefill ? d->n_q : 1, H = d->n_heads, Hkv = d->n_kv_heads, D = d->head_dim, cap = d->capacity;
    uint32_t G = H / Hkv;
    uint64_t row = hk_type_bytes(d->kv_type, D), cache = (uint64_t)Hkv * cap * row;
    hk_sdpa_desc *s = &b->sdpa;
    memset(s, 0, sizeof *s);
    s->n_q = nq;
    s->n_heads = H;
    s->n_kv_heads = Hkv;
    s->head_dim = D;
    s->seq_k = cap;
    s->scale = 1.0f / sqrtf((float)D);
    s->causal = prefill && d->causal;
    s->kv.type = d->kv_type;
    s->kv.capacity = cap;
    s->kv.k_row_stride = s->kv.v_row_stride = row;
    s->kv.k_head_stride = s->kv.v_head_stride = cap * row;
    const char *path = hk_sdpa_path(b->ctx, s);
    if (!path)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, "hk_tune", "hk_sdpa_blk refuses this shape: %s", hk_last_error());
    if (prefill != !!strcmp(path, "decode"))
        return hk__fail(HK_ERROR_UNSUPPORTED, "hk_tune", "%s", prefill ? "flash attention does not serve this shape "
                        "on this device (hk_sdpa_path: decode)" : "internal: a one-query call runs as flash attention");
    b->stride = (cache + 255) & ~(uint64_t)255;
    b->copies = copies_for(d, 2 * cache);
    size_t n_vals = (size_t)Hkv * cap * D, n_q_vals = (size_t)nq * H * D;
    float *q = malloc(n_q_vals * sizeof *q), *kv[2] = {malloc(n_vals * 4), malloc(n_vals * 4)};
    uint8_t *img[2] = {malloc(cache), malloc(cache)};
    hk_status st = q && kv[0] && kv[1] && img[0] && img[1] ? bench_rows(b, nq, H * D, 0) : host_oom();
    if (st == HK_OK) {
        hk_rng_fill(rng, q, n_q_vals, -1.0f, 1.0f);
        for (int i = 0; i < 2; i++) {
            hk_rng_fill(rng, kv[i], n_vals, -1.0f, 1.0f);
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
        for (uint32_t i = 0; i < b->n_ref; i++) {
            uint32_t qi = b->ref_row[i], seen = s->causal ? cap - nq + qi + 1 : cap;
            for (uint32_t h = 0; h < Hkv; h++)
                hk_ref_sdpa(q + ((size_t)qi * H + (size_t)h * G) * D, kv[0] + (size_t)h * cap * D,
                            kv[1] + (size_t)h * cap * D, b->ref + ((size_t)i * H + (size_t)h * G) * D, 1, G, 1, seen,
                            D, s->scale, 0);
        }
        /* f32 arithmetic against the double softmax: about 1e-6 (hkernel.h); flash prefill at
         * its arm's gate (tests/test_flash.c) */
        b->gate = !prefill ? 1e-5 : !strcmp(path, "flash-coopmat") ? HK_GATE_SDPA_F16 : HK_GATE_F32;
        st = upload_new(b->ctx, n_q_vals * 4, q, &b->x);
        if (st == HK_OK)
            st = upload_copies(b, img[0], cache, &b->k);
        if (st == HK_OK)
            st = upload_copies(b, img[1], cache, &b->v);
    }
    free(q);
    free(kv[0]);
    free(kv[1]);
    free(img[0]);
    free(img[1]);
    return st;
}

/* hk_gemm_f16 (f32 x) and hk_mmq (Q8_1 x): raw random weight blocks (every bit pattern) */
static hk_status setup_gemm(bench *b, hk_rng *rng)
{
    const hk_tune_desc *d = b->desc;
    int f16 = b->family == HK_TUNE_GEMM_F16;
    uint32_t m = d->m, n = d->n, k = d->k;
    uint64_t wbytes = (uint64_t)n * hk_type_bytes(d->wtype, k);
    b->stride = (wbytes + 255) & ~(uint64_t)255;
    b->copies = copies_for(d, wbytes);
    uint8_t *w = hk_random_weights(rng, (int)d->wtype, n, k, 1);
    float *x = f16 ? malloc((size_t)m * k * sizeof *x + 1) : NULL;
    hk_block_q8_1 *xq = f16 ? NULL : q8_1_rows(rng, m, k);
    hk_status st = w && (f16 ? x != NULL : xq != NULL) ? bench_rows(b, m, n, f16) : host_oom();
    float *xs = NULL;
    if (st == HK_OK && f16) {
        hk_rng_fill(rng, x, (size_t)m * k, -1.0f, 1.0f);
        xs = malloc((size_t)b->n_ref * k * sizeof *xs);
        if (!xs)
            st = host_oom();
        for (uint32_t i = 0; st == HK_OK && i < b->n_ref; i++)
            memcpy(xs + (size_t)i * k, x + (size_t)b->ref_row[i] * k, (size_t)k * sizeof *xs);
        if (st == HK_OK && !(hk_ref_gemm((int)d->wtype, w, xs, b->ref, b->n_ref, n, k) &&
                             hk_ref_gemm_f16((int)d->wtype, w, xs, b->ref2, b->n_ref, n, k)))
            st = host_oom();
        b->gate = HK_GATE_F16;
        b->gate2 = HK_GATE_F16_OPERANDS;
        if (st == HK_OK)
            st = upload_new(b->ctx, (uint64_t)m * k * 4, x, &b->x);
    } else if (st == HK_OK) {
        /* the sampled rows together: the reference dequantizes W once */
        hk_block_q8_1 *xr = malloc((size_t)b->n_ref * (k / 32) * sizeof *xr);
        if (!xr)
            st = host_oom();
        for (uint32_t i = 0; st == HK_OK && i < b->n_ref; i++)
            memcpy(xr + (size_t)i * (k / 32), xq + (size_t)b->ref_row[i] * (k / 32), (k / 32) * sizeof *xr);
        if (st == HK_OK && !hk_ref_mmq((int)d->wtype, w, xr, b->ref, b->n_ref, n, k))
            st = host_oom();
        free(xr);
        const char *arm = hk_mmq_path(b->ctx, d->wtype);
        b->gate = arm && !strcmp(arm, "coopmat") ? HK_GATE_MMQ_COOPMAT : HK_GATE_MMQ;
        if (st == HK_OK)
            st = upload_new(b->ctx, (uint64_t)m * (k / 32) * sizeof *xq, xq, &b->x);
    }
    if (st == HK_OK)
        st = upload_copies(b, w, wbytes, &b->w);
    free(w);
    free(x);
    free(xq);
    free(xs);
    return st;
}

/* hk_mmq_id: a bank of raw random experts, a seeded routing of m / top_k tokens grouped on the
 * host (hk_ref_moe_expert_rows), each sampled slot's row from its routed expert */
static hk_status setup_mmq_id(bench *b, hk_rng *rng)
{
    const hk_tune_desc *d = b->desc;
    uint32_t E = d->n_experts, n = d->n, k = d->k, m = d->m, per_x = d->slots_per_x_row;
    b->id = (hk_mmq_id_shape){E, n, k, m, per_x};
    uint64_t expert = (uint64_t)n * hk_type_bytes(d->wtype, k), wbytes = expert * E;
    b->stride = (wbytes + 255) & ~(uint64_t)255;
    b->copies = copies_for(d, wbytes);
    uint8_t *w = hk_random_weights(rng, (int)d->wtype, (size_t)E * n, k, 1);
    hk_block_q8_1 *xq = q8_1_rows(rng, m / per_x, k);
    uint32_t *ids = hk_random_routing(rng, m / d->top_k, d->top_k, E);
    uint32_t *offsets = malloc(((size_t)E + 1) * 4), *slots = malloc((size_t)m * 4), dropped = 0;
    hk_status st = w && xq && ids && offsets && slots ? bench_rows(b, m, n, 0) : host_oom();
    if (st == HK_OK) {
        hk_ref_moe_expert_rows(ids, m, E, offsets, slots, &dropped);
        for (uint32_t i = 0; st == HK_OK && i < b->n_ref; i++) {
            uint32_t sl = b->ref_row[i];
            if (!hk_ref_mmq((int)d->wtype, w + (size_t)ids[sl] * expert, xq + (size_t)(sl / per_x) * (k / 32),
                            b->ref + (size_t)i * n, 1, n, k))
                st = host_oom();
        }
        const char *arm = hk_mmq_path(b->ctx, d->wtype);
        b->gate = arm && !strcmp(arm, "coopmat") ? HK_GATE_MMQ_COOPMAT : HK_GATE_MMQ;
        if (st == HK_OK)
            st = upload_copies(b, w, wbytes, &b->w);
    }
    if (st == HK_OK)
        st = upload_new(b->ctx, (uint64_t)(m / per_x) * (k / 32) * sizeof *xq, xq, &b->x);
    if (st == HK_OK)
        st = upload_new(b->ctx, ((uint64_t)E + 1) * 4, offsets, &b->offsets);
    if (st == HK_OK)
        st = upload_new(b->ctx, (uint64_t)m * 4, slots, &b->slots);
    free(w);
    free(xq);
    free(ids);
    free(offsets);
    free(slots);
    return st;
}

/* hk_moe_matvec_int8: a bank of raw random experts, a seeded routing of m slots (distinct experts
 * within each run of n_experts slots), x one Q8_1 row for every slot or one per slot; output row s
 * is slot s's n outputs, its reference hk_ref_moe_matvec_q8_1 on that slot alone. The weight
 * copies are enough for the experts a call reads to total 64 MiB (a fixed routing reads the same
 * experts of each copy). Every schedule must give the default's bits (exact_default). */
static hk_status setup_moe_matvec(bench *b, hk_rng *rng)
{
    const hk_tune_desc *d = b->desc;
    uint32_t E = d->n_experts, n = d->n, k = d->k, slots = d->m, blocks = k / 32;
    uint32_t xs = d->x_per_slot ? slots : 1, run = slots < E ? slots : E;
    b->moe = (hk_moe_shape){E, n, k, slots, d->x_per_slot};
    uint64_t expert = (uint64_t)n * hk_type_bytes(d->wtype, k), wbytes = expert * E;
    b->stride = (wbytes + 255) & ~(uint64_t)255;
    b->copies = copies_for(d, expert * run);
    uint8_t *w = hk_random_weights(rng, (int)d->wtype, (size_t)E * n, k, 1);
    hk_block_q8_1 *xq = q8_1_rows(rng, xs, k);
    uint32_t *ids = hk_random_routing(rng, (slots + run - 1) / run, run, E); /* the first `slots` */
    hk_status st = w && xq && ids ? bench_rows(b, slots, n, 0) : host_oom();
    if (st == HK_OK && !(b->exact = malloc((size_t)slots * n * sizeof *b->exact)))
        st = host_oom();
    b->exact_of = "the default schedule";
    b->exact_default = 1;
    for (uint32_t i = 0; st == HK_OK && i < b->n_ref; i++) {
        uint32_t sl = b->ref_row[i];
        hk_ref_moe_matvec_q8_1((int)d->wtype, w, xq + (d->x_per_slot ? (size_t)sl * blocks : 0), 0, ids + sl,
                               b->ref + (size_t)i * n, E, n, k, 1);
    }
    b->gate = HK_GATE_EXACT;
    if (st == HK_OK)
        st = upload_copies(b, w, wbytes, &b->w);
    if (st == HK_OK)
        st = upload_new(b->ctx, (uint64_t)xs * blocks * sizeof *xq, xq, &b->x);
    if (st == HK_OK)
        st = upload_new(b->ctx, (uint64_t)slots * 4, ids, &b->ids);
    free(w);
    free(xq);
    free(ids);
    return st;
}

static hk_status bench_setup(bench *b)
{
    hk_rng rng = {b->desc->seed ? b->desc->seed : 1};
    switch (b->family) {
    case HK_TUNE_MATVEC_INT8:
    case HK_TUNE_MATVEC_TOKENS: return setup_matvec(b, &rng);
    case HK_TUNE_SDPA_DECODE:
    case HK_TUNE_FLASH_PREFILL: return setup_attention(b, &rng);
    case HK_TUNE_GEMM_F16:
    case HK_TUNE_MMQ: return setup_gemm(b, &rng);
    case HK_TUNE_MOE_MATVEC_INT8: return setup_moe_matvec(b, &rng);
    default: return setup_mmq_id(b, &rng);
    }
}

static hk_status bench_record(bench *b, hk_stream *stream, uint32_t copy)
{
    const hk_tune_desc *d = b->desc;
    hk_view w = {b->w, copy * b->stride}, x = {b->x, 0}, out = {b->out, 0};
    switch (b->family) {
    case HK_TUNE_MATVEC_INT8: return hk_matvec_int8(b->ctx, stream, d->wtype, w, x, out, d->rows, d->k);
    case HK_TUNE_MATVEC_TOKENS:
        return hk_matvec_int8_tokens(b->ctx, stream, d->wtype, w, x, out, d->rows, d->k, d->tokens);
    case HK_TUNE_GEMM_F16: return hk_gemm_f16(b->ctx, stream, d->wtype, w, x, out, d->m, d->n, d->k);
    case HK_TUNE_MMQ: return hk_mmq(b->ctx, stream, d->wtype, w, x, out, d->m, d->n, d->k);
    case HK_TUNE_MMQ_ID:
        return hk_mmq_id(b->ctx, stream, d->wtype, w, x, (hk_view){b->offsets, 0}, (hk_view){b->slots, 0}, out, &b->id);
    case HK_TUNE_MOE_MATVEC_INT8:
        return hk_moe_matvec_int8(b->ctx, stream, d->wtype, w, x, (hk_view){b->ids, 0}, out, &b->moe);
    default:
        return hk_sdpa_blk(b->ctx, stream, &b->sdpa, x, (hk_view){b->k, copy * b->stride},
                           (hk_view){b->v, copy * b->stride}, out, (hk_view){b->ws, 0}, (hk_view){NULL, 0});
    }
}

/* The workspace the current schedule needs (attention): grown as candidates ask. */
static hk_status bench_workspace(bench *b)
{
    if (b->family != HK_TUNE_SDPA_DECODE && b->family != HK_TUNE_FLASH_PREFILL)
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

static uint64_t fnv1a(uint64_t h, const uint32_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        for (int byte = 0; byte < 4; byte++) {
            h ^= (v[i] >> (8 * byte)) & 0xFFu;
            h *= 0x100000001B3ull;
        }
    return h;
}
#define FNV_BASIS 0xCBF29CE484222325ull

/* HK_TUNE_FAKE_TIMES (testing): 1, 2 or 3, else 0 */
static int fake_times(void)
{
    const char *e = getenv("HK_TUNE_FAKE_TIMES");
    return e && (!strcmp(e, "1") || !strcmp(e, "2") || !strcmp(e, "3")) ? e[0] - '0' : 0;
}

/* A pseudo-time of a schedule: 1 + u (mode 1), 1000 (1 + u)^3 (mode 2, the same order), or 1 +
 * u / 4 made 1.5x slower on two measurements of every three on this thread (mode 3: noise larger
 * than any difference between schedules, which every schedule measured three times in turn with
 * another sees whole), u in [0, 1) a hash of the values. */
static double fake_ms(int mode, const uint32_t *v, uint32_t n)
{
    static _Thread_local uint32_t measurements;
    double u = (double)(fnv1a(FNV_BASIS, v, n) >> 11) * 0x1p-53;
    if (mode == 3)
        return (1.0 + u / 4) * (measurements++ % 3 ? 1.5 : 1.0);
    return mode == 1 ? 1.0 + u : 1000.0 * (1.0 + u) * (1.0 + u) * (1.0 + u);
}

/* Fills the output with a NaN that no kernel writes (b->got is scratch). */
static hk_status bench_poison(bench *b)
{
    size_t n_out = (size_t)b->out_rows * b->row_len;
    union {
        float f;
        uint32_t u;
    } poison = {.u = 0x7FC0BEEFu};
    for (size_t i = 0; i < n_out; i++)
        b->got[i] = poison.f;
    return hk_buffer_upload(b->out, 0, b->got, n_out * 4);
}

/* Runs the current schedule (v) once into a poisoned output and compares the reference's rows
 * with it; then times it: repeats batches of `batch` calls rotating over the copies, each batch
 * between two GPU timestamps (host time where the queue has none), the minimum kept. *ms =
 * INFINITY and a reason where the gate fails. */
static hk_status bench_measure(bench *b, const uint32_t *v, uint32_t n_params, double *ms, double *err, char *why,
                               size_t why_size)
{
    const hk_tune_desc *d = b->desc;
    *ms = INFINITY;
    hk_status st = bench_workspace(b);
    if (st != HK_OK)
        return st;
    size_t n_out = (size_t)b->out_rows * b->row_len, n_ref = (size_t)b->n_ref * b->row_len;
    st = bench_poison(b);
    if (st == HK_OK)
        st = bench_record(b, NULL, b->copies - 1);
    if (st == HK_OK)
        st = hk_buffer_download(b->out, 0, b->got, n_out * 4);
    if (st != HK_OK)
        return st;
    for (uint32_t i = 0; i < b->n_ref; i++)
        memcpy(b->sample + (size_t)i * b->row_len, b->got + (size_t)b->ref_row[i] * b->row_len,
               (size_t)b->row_len * sizeof *b->sample);
    *err = hk_scale_rel(b->sample, b->ref, n_ref);
    if (!(*err < b->gate)) {
        snprintf(why, why_size, "gate: scale_rel %.2e against the reference (gate %.0e)", *err, b->gate);
        return HK_OK;
    }
    size_t differ = 0;
    for (size_t i = 0; b->exact && i < n_out; i++)
        differ += memcmp(&b->got[i], &b->exact[i], 4) != 0;
    if (differ) {
        snprintf(why, why_size, "gate: %zu of %zu outputs not bit-identical to %s", differ, n_out, b->exact_of);
        return HK_OK;
    }
    double err2 = b->ref2 ? hk_scale_rel(b->sample, b->ref2, n_ref) : 0;
    if (b->ref2 && !(err2 < b->gate2)) {
        snprintf(why, why_size, "gate: scale_rel %.2e against the f16-operand reference (gate %.0e)", err2, b->gate2);
        return HK_OK;
    }
    int fake = fake_times();
    if (fake) {
        *ms = fake_ms(fake, v, n_params);
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
    switch (b->family) {
    case HK_TUNE_MATVEC_INT8:
    case HK_TUNE_MOE_MATVEC_INT8:
        if (b->family == HK_TUNE_MATVEC_INT8 ? !hk__matvec_int8_static(b->ctx, d->wtype, d->rows, d->k, v, why, why_size)
                                             : !hk__moe_matvec_int8_static(b->ctx, d->wtype, &b->moe, v, why, why_size))
            return 0;
        for (int i = 0; i < MV_PARAMS; i++)
            sig[i] = v[i];
        return 1;
    case HK_TUNE_MATVEC_TOKENS:
        return hk__matvec_tokens_static(b->ctx, d->wtype, d->rows, d->k, d->tokens, v, sig, why, why_size);
    case HK_TUNE_SDPA_DECODE: return hk__sdpa_decode_static(b->ctx, &b->sdpa, v, sig, why, why_size);
    case HK_TUNE_FLASH_PREFILL: return hk__flash_static(b->ctx, &b->sdpa, v, sig, why, why_size);
    case HK_TUNE_GEMM_F16: return hk__gemm_f16_static(b->ctx, d->k, v, sig, why, why_size);
    default: return hk__mmq_static(b->ctx, b->family == HK_TUNE_MMQ_ID, d->wtype, v, sig, why, why_size);
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

/* bench_measure with v forced as the schedule of the family's calls on this thread. */
static hk_status measure_forced(search *s, const uint32_t *v, int plant, double *ms, double *err, char *why,
                                size_t why_size)
{
    forced.mode = 1;
    forced.context = s->b->ctx;
    forced.family = s->b->family;
    forced.key = s->b->key;
    memset(&forced.sched, 0, sizeof forced.sched);
    memcpy(forced.sched.v, v, sizeof forced.sched.v);
    forced.sched.plant = plant;
    hk_status st = bench_measure(s->b, v, s->f->count, ms, err, why, why_size);
    forced.mode = 0;
    return st;
}

/* Evaluates a schedule once (memoized): its time, INFINITY where rejected. Every schedule seen
 * for the first time goes into the report's trace. */
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
    s->r->trace = fnv1a(s->r->trace, v, s->f->count);
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
                printf("  %-60s same plan as an earlier candidate\n", text);
            s->count++;
            return HK_OK;
        }
    double err = 0;
    hk_status st = measure_forced(s, v, plant, &c->ms, &err, why, sizeof why);
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

/* The genes (value indices) of v, 1 if every value is in its list. */
static int values_to_genes(const tune_family *f, const uint32_t *v, uint32_t *g)
{
    memset(g, 0, HK_TUNE_MAX_PARAMS * sizeof *g);
    for (uint32_t i = 0; i < f->count; i++) {
        uint32_t j = 0;
        while (j < f->p[i].count && f->p[i].values[j] != v[i])
            j++;
        if (j == f->p[i].count)
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
    const tune_family *f = s->f;
    uint64_t x = seed ? seed * 0x9E3779B97F4A7C15ull : 0x9E3779B97F4A7C15ull;
    uint32_t pop[GA_POP][HK_TUNE_MAX_PARAMS], next[GA_POP][HK_TUNE_MAX_PARAMS], v[HK_TUNE_MAX_PARAMS];
    double fit[GA_POP];
    memset(pop, 0, sizeof pop);
    hk_status st = HK_OK;
    for (int i = 0; i < GA_POP && st == HK_OK; i++) {
        for (uint32_t j = 0; j < f->count; j++)
            pop[i][j] = (uint32_t)(rng_next(&x) % f->p[j].count);
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
            hk_status st = measure_forced(s, v[i], 0, &ms, &err, why, sizeof why);
            if (st != HK_OK)
                return st;
            lo[i] = ms < lo[i] ? ms : lo[i];
            hi[i] = ms > hi[i] ? ms : hi[i];
            format_sched(s->f, v[i], text, sizeof text);
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

/* ---- public API ---- */

void hk_tune_desc_init_sized(hk_tune_desc *desc, size_t desc_size)
{
    if (!desc)
        return;
    memset(desc, 0, desc_size);
    desc->struct_size = (uint32_t)desc_size;
}

static hk_status check_weight_type(const char *fn, hk_type wtype, uint32_t k)
{
    if (wtype != HK_TYPE_Q8_0 && wtype != HK_TYPE_Q4_K && wtype != HK_TYPE_Q6_K)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "wtype=%s is not q8_0, q4_k or q6_k", hk_type_name(wtype));
    uint32_t block = hk_type_block_values(wtype);
    if (!k || k % block)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "k=%u must be a positive multiple of %u", k, block);
    return HK_OK;
}

/* The tuner's own inputs and reference stay within host memory and seconds: at most 2^28
 * weight values and 2^27 activation or output values. */
static hk_status check_sizes(const char *fn, uint64_t weights, uint64_t x, uint64_t out)
{
    if (weights > (1ull << 28) || x > (1ull << 27) || out > (1ull << 27))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "%llu weight, %llu activation and %llu output values: more than "
                        "the tuner's 2^28, 2^27 and 2^27", (unsigned long long)weights, (unsigned long long)x,
                        (unsigned long long)out);
    return HK_OK;
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
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kernel=%d is not a tuned family (hk_tune_kernel)",
                        (int)d->kernel);
    if (d->copies > 64)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "copies=%u is more than 64", d->copies);
    if (d->repeats > 1000 || d->batch > 1000)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "repeats=%u or batch=%u is more than 1000", d->repeats,
                        d->batch);
    hk_status st;
    switch (d->kernel) {
    case HK_TUNE_MATVEC_INT8:
        if ((st = check_weight_type(fn, d->wtype, d->k)) != HK_OK)
            return st;
        if (!d->rows || d->rows > HK_MATVEC_MAX_ROWS || d->k > HK_MATVEC_MAX_K)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u or k=%u is 0 or past hk_matvec_int8's limits",
                            d->rows, d->k);
        if ((st = check_sizes(fn, (uint64_t)d->rows * d->k, d->k, d->rows)) != HK_OK)
            return st;
        hk__tune_key_matvec(key, d->wtype, d->rows, d->k);
        return HK_OK;
    case HK_TUNE_MATVEC_TOKENS: {
        if ((st = check_weight_type(fn, d->wtype, d->k)) != HK_OK)
            return st;
        if (!d->rows || d->rows > HK_MATVEC_MAX_ROWS || d->k > HK_MATVEC_MAX_K)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rows=%u or k=%u is 0 or past hk_matvec_int8's limits",
                            d->rows, d->k);
        if (d->tokens < 2 || d->tokens > HK_MATVEC_MAX_TOKENS)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "tokens=%u is not in 2..%u (HK_TUNE_MATVEC_TOKENS)",
                            d->tokens, HK_MATVEC_MAX_TOKENS);
        uint64_t limit = ((uint64_t)d->rows + 32767) / 32768 * d->k * (d->tokens + 1);
        if (limit > HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "ceil(rows/32768)*k*(tokens+1)=%llu past "
                            "hk_matvec_int8_tokens' limit %u", (unsigned long long)limit,
                            HK_MATVEC_MAX_K_ROW_BLOCKS_TOKENS);
        if ((st = check_sizes(fn, (uint64_t)d->rows * d->k, (uint64_t)d->tokens * d->k,
                              (uint64_t)d->tokens * d->rows)) != HK_OK)
            return st;
        hk__tune_key_matvec_tokens(key, d->wtype, d->rows, d->k, d->tokens);
        return HK_OK;
    }
    case HK_TUNE_GEMM_F16:
    case HK_TUNE_MMQ:
        if ((st = check_weight_type(fn, d->wtype, d->k)) != HK_OK)
            return st;
        if (!d->m || !d->n)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "m=%u and n=%u must both be positive", d->m, d->n);
        if ((st = check_sizes(fn, (uint64_t)d->n * d->k, (uint64_t)d->m * d->k, (uint64_t)d->m * d->n)) != HK_OK)
            return st;
        hk__tune_key_gemm(key, d->wtype, d->m, d->n, d->k);
        return HK_OK;
    case HK_TUNE_MMQ_ID: {
        if ((st = check_weight_type(fn, d->wtype, d->k)) != HK_OK)
            return st;
        if (!d->n_experts || !d->n || !d->top_k || d->top_k > d->n_experts || !d->m || d->m % d->top_k ||
            (d->slots_per_x_row != 1 && d->slots_per_x_row != d->top_k))
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts=%u, n=%u, top_k=%u (1..n_experts), m=%u (a "
                            "multiple of top_k) and slots_per_x_row=%u (1 or top_k) is not an expert-indexed shape",
                            d->n_experts, d->n, d->top_k, d->m, d->slots_per_x_row);
        if ((st = check_sizes(fn, (uint64_t)d->n_experts * d->n * d->k, (uint64_t)d->m / d->slots_per_x_row * d->k,
                              (uint64_t)d->m * d->n)) != HK_OK)
            return st;
        hk_mmq_id_shape shape = {d->n_experts, d->n, d->k, d->m, d->slots_per_x_row};
        hk__tune_key_mmq_id(key, d->wtype, &shape);
        return HK_OK;
    }
    case HK_TUNE_MOE_MATVEC_INT8: {
        if ((st = check_weight_type(fn, d->wtype, d->k)) != HK_OK)
            return st;
        if (!d->n_experts || !d->n || !d->m || (d->x_per_slot != 0 && d->x_per_slot != 1))
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_experts=%u, n=%u, m=%u (slots) and x_per_slot=%d (0 or 1) "
                            "is not a MoE matvec shape", d->n_experts, d->n, d->m, d->x_per_slot);
        uint64_t rows = (uint64_t)d->m * d->n, blocks_k = (rows + 32767) / 32768 * d->k;
        if (rows > HK_MATVEC_MAX_ROWS || d->k > HK_MATVEC_MAX_K || blocks_k > HK_MATVEC_MAX_K_ROW_BLOCKS)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "slots*n=%llu, k=%u or ceil(slots*n/32768)*k=%llu past "
                            "hk_moe_matvec_int8's limits", (unsigned long long)rows, d->k,
                            (unsigned long long)blocks_k);
        if ((st = check_sizes(fn, (uint64_t)d->n_experts * d->n * d->k, (uint64_t)(d->x_per_slot ? d->m : 1) * d->k,
                              rows)) != HK_OK)
            return st;
        hk_moe_shape shape = {d->n_experts, d->n, d->k, d->m, d->x_per_slot};
        hk__tune_key_moe_matvec(key, d->wtype, &shape);
        return HK_OK;
    }
    default:
        break;
    }
    /* attention: flash-decoding or flash prefill */
    int prefill = d->kernel == HK_TUNE_FLASH_PREFILL;
    if (d->kv_type != HK_TYPE_F32 && d->kv_type != HK_TYPE_F16 && d->kv_type != HK_TYPE_Q8_0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kv_type=%s is not f32, f16 or q8_0", hk_type_name(d->kv_type));
    uint32_t multiple = d->kv_type == HK_TYPE_Q8_0 ? 32 : 16;
    if (!d->n_heads || !d->n_kv_heads || d->n_heads % d->n_kv_heads || !d->head_dim || d->head_dim % multiple ||
        d->head_dim > 256 || !d->capacity || d->capacity > 2097152)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_heads=%u, n_kv_heads=%u, head_dim=%u, capacity=%u is not an "
                        "attention shape (hk_sdpa_blk)", d->n_heads, d->n_kv_heads, d->head_dim, d->capacity);
    if (prefill && (d->n_q < 2 || (d->causal && d->n_q > d->capacity)))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_q=%u must be at least 2 (and, causal, at most capacity=%u)",
                        d->n_q, d->capacity);
    uint32_t nq = prefill ? d->n_q : 1;
    if ((st = check_sizes(fn, (uint64_t)d->n_kv_heads * d->capacity * d->head_dim, (uint64_t)nq * d->n_heads * d->head_dim,
                          (uint64_t)nq * d->n_heads * d->head_dim)) != HK_OK)
        return st;
    if ((uint64_t)d->n_kv_heads * d->capacity * d->head_dim > (1ull << 26))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_kv_heads x capacity x head_dim = %llu is more than the "
                        "tuner's 2^26 values", (unsigned long long)d->n_kv_heads * d->capacity * d->head_dim);
    hk_sdpa_desc sd = {0};
    sd.n_q = nq;
    sd.n_heads = d->n_heads;
    sd.n_kv_heads = d->n_kv_heads;
    sd.head_dim = d->head_dim;
    sd.causal = prefill && d->causal;
    sd.kv.type = d->kv_type;
    sd.kv.capacity = d->capacity;
    if (prefill)
        hk__tune_key_flash(key, &sd);
    else
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
    r.default_ms = r.best_ms = r.candidate_ms = r.noise = NAN;
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
        forced.noted = 0;
        st = bench_workspace(&b);
        if (st == HK_OK && b.exact_default)
            st = bench_poison(&b);
        if (st == HK_OK)
            st = bench_record(&b, NULL, 0);
        forced.mode = 0;
        if (st == HK_OK && !forced.noted)
            st = hk__fail(HK_ERROR_UNSUPPORTED, fn, "%s %s: the call ran no schedule of the family", f->name, key);
        /* the bits every schedule must give (the default's own run below holds them to the
         * reference) */
        if (st == HK_OK && b.exact_default)
            st = hk_buffer_download(b.out, 0, b.exact, (size_t)b.out_rows * b.row_len * 4);
        memcpy(dv, forced.served, sizeof dv);
        format_sched(f, dv, r.default_schedule, sizeof r.default_schedule);
        if (s.verbose && st == HK_OK)
            printf("%s %s: default %s\n", f->name, key, r.default_schedule);
    }
    r.trace = FNV_BASIS;
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
                format_sched(f, wv, r.candidate, sizeof r.candidate);
                st = confirm(&s, dv, wv);
                if (r.default_kept)
                    wv = dv;
                r.best_ms = r.default_kept ? r.default_ms : r.candidate_ms;
            }
            format_sched(f, wv, r.schedule, sizeof r.schedule);
            struct hk_tune_state *t = context->tune;
            if (st == HK_OK) {
                hk__mutex_lock(&t->lock);
                int ok = entry_set(t, desc->kernel, key, wv, r.best_ms);
                hk__mutex_unlock(&t->lock);
                if (!ok)
                    st = hk__fail(HK_ERROR_OUT_OF_MEMORY, fn, "out of host memory");
                else if (!desc->no_store)
                    store(context, desc->kernel, key, wv, r.best_ms);
            }
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
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kernel=%d is not a tuned family (hk_tune_kernel)", (int)kernel);
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
