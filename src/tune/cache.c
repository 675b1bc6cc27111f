/* The context's autotuner state and the winner cache file (include/hkernel.h, hk_tune): the
 * file is read at the context's first look-up; its lines of this device, driver and library
 * version are kept as text and each family's checked against its parameters at the family's
 * first look-up (a line that no longer matches is ignored with a warning). */
#define _POSIX_C_SOURCE 200809L
#include "private.h"

#include <errno.h>
#include <stdarg.h>
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
#define TUNE_NAME_CHARS 32

_Thread_local hk__tune_forced hk__forced;

void hk__tune_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hkernel: tune cache: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A winner: read from the file (its schedule checked at the family's first look-up), or found by
 * hk_tune on this context. */
typedef struct tune_entry {
    char family[TUNE_NAME_CHARS];
    char key[HK_TUNE_SHAPE_CHARS];
    char sched[HK_TUNE_SHAPE_CHARS];
    unsigned line;                  /* its line in the file (0: found here) */
    int state;                      /* ENTRY_* */
    uint32_t v[HK_TUNE_MAX_PARAMS]; /* ENTRY_OK */
    double ms;
} tune_entry;
enum { ENTRY_UNCHECKED, ENTRY_OK, ENTRY_STALE, ENTRY_REPLACED };

struct hk_tune_state {
    hk_mutex lock;
    char *dir, *file; /* NULL: no cache directory could be named */
    tune_entry *entries;
    uint32_t count, capacity;
    uint32_t last[HK_TUNE_FAMILIES][HK_TUNE_MAX_PARAMS];
    int last_source[HK_TUNE_FAMILIES], last_set[HK_TUNE_FAMILIES];
};

/* A new entry for (family, key) after those there are (the file may hold a key twice: the last
 * line that checks out serves); NULL when out of host memory (under t->lock). */
static tune_entry *entry_add(struct hk_tune_state *t, const char *family, const char *key)
{
    tune_entry *e;
    if (t->count == t->capacity) {
        uint32_t cap = t->capacity ? 2 * t->capacity : 16;
        tune_entry *grown = realloc(t->entries, cap * sizeof *grown);
        if (!grown)
            return NULL;
        t->entries = grown;
        t->capacity = cap;
    }
    e = &t->entries[t->count++];
    memset(e, 0, sizeof *e);
    snprintf(e->family, sizeof e->family, "%s", family);
    snprintf(e->key, sizeof e->key, "%s", key);
    return e;
}

/* ---- the cache file ---- */

static void identity(const hk_context *context, char *out, size_t size)
{
    snprintf(out, size, "%04x\t%04x\t%08x\t%d.%d.%d", context->caps.vendor_id, context->caps.device_id,
             context->caps.driver_version, HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH);
}

enum { LINE_OTHER_DEVICE, LINE_STALE, LINE_OK };

/* One line of the file: TAG vendor device driver version kernel shape schedule ms. */
typedef struct tune_line {
    char *col[9];
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
    return SPLIT_OK;
}

/* Classifies a split line for this context: another device's (kept, unused), stale (this device,
 * another format or library version), ok (its schedule is checked at its family's first
 * look-up). */
static int classify(const hk_context *context, int split, const tune_line *l, char *why, size_t why_size)
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
    if (strlen(l->col[5]) >= TUNE_NAME_CHARS) {
        snprintf(why, why_size, "unknown kernel \"%.40s\"", l->col[5]);
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
        hk__tune_warn("%s: a symbolic link, not followed; %s", path, then);
    else if (status == HK_FILE_NOT_REGULAR)
        hk__tune_warn("%s: not a regular file; %s", path, then);
    else if (status == HK_FILE_TOO_LARGE)
        hk__tune_warn("%s: larger than HK_TUNE_CACHE_MAX_BYTES (%u MiB); %s", path, HK_TUNE_CACHE_MAX_BYTES >> 20, then);
    else
        hk__tune_warn("cannot read %s: %s; %s", path, strerror(err), then);
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
            hk__tune_warn("%s:%u: line too long, ignored", t->file, number);
            continue;
        }
        if (line[0] == '#' || line[0] == 0)
            continue;
        tune_line l;
        char why[160] = "";
        int split = split_line(line, &l);
        if (split == SPLIT_BAD) {
            hk__tune_warn("%s:%u: malformed line ignored", t->file, number);
            continue;
        }
        int c = classify(context, split, &l, why, sizeof why);
        if (c == LINE_STALE) {
            hk__tune_warn("%s:%u: stale line ignored (%s)", t->file, number, why);
        } else if (c == LINE_OK) {
            tune_entry *e = entry_add(t, l.col[5], l.col[6]);
            if (!e) {
                hk__tune_warn("out of host memory");
                break;
            }
            snprintf(e->sched, sizeof e->sched, "%s", l.col[7]);
            e->line = number;
            e->state = ENTRY_UNCHECKED;
            e->ms = l.ms;
        }
    }
    free(text);
}

static void destroy_state(hk_context *context)
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
    context->tune_destroy = NULL;
}

/* The context's tuner state, made and its cache file read at the first use; NULL when out of
 * host memory. */
static struct hk_tune_state *state_of(hk_context *context)
{
    hk__mutex_lock(&context->attach_lock);
    struct hk_tune_state *t = context->tune;
    if (!t && (t = calloc(1, sizeof *t)) != NULL) {
        hk__mutex_init(&t->lock);
        t->dir = hk__cache_dir(context->tune_cache_dir, "HK_TUNE_CACHE_DIR");
        t->file = t->dir ? join_path(t->dir, TUNE_FILE) : NULL;
        if (t->file)
            load_file(context, t);
        context->tune = t;
        context->tune_destroy = destroy_state;
    }
    hk__mutex_unlock(&context->attach_lock);
    return t;
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
    hk__tune_warn("cannot lock %s: %s; the winner stays in memory", path, *why ? why : strerror(err));
    if (fd >= 0)
        close(fd);
    return -1;
}
#endif

static void store(hk_context *context, struct hk_tune_state *t, const hk__tunable *f, const char *key, const char *sched,
                  double ms)
{
    if (!t || !t->file)
        return;
#if defined(_WIN32)
    (void)context, (void)f, (void)key, (void)sched, (void)ms;
    hk__tune_warn("not written: no file locking on this platform yet");
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
        hk__tune_warn("cannot create %s: %s", t->dir, strerror(dir_err));
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
        hk__tune_warn("cannot write %s: %s", tmp_path, strerror(errno));
        if (tmp_fd >= 0) {
            close(tmp_fd);
            remove(tmp_path);
        }
        goto done;
    }
    char id[64];
    identity(context, id, sizeof id);
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
        hk__tune_warn("%s: would be larger than HK_TUNE_CACHE_MAX_BYTES (%u MiB); not replaced, the winner stays in memory",
             t->file, HK_TUNE_CACHE_MAX_BYTES >> 20);
        remove(tmp_path);
    } else if (bad || rename(tmp_path, t->file) != 0) {
        hk__tune_warn("cannot write %s: %s", t->file, strerror(errno));
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

/* ---- winners ---- */

int hk__tune_lookup(hk_context *context, const hk__tunable *family, const char *key, hk__sched *out, int *source)
{
    if (hk__forced.mode && hk__forced.context == context && hk__forced.family == family &&
        !strcmp(hk__forced.key, key)) {
        if (hk__forced.mode == 2)
            return 0;
        *out = hk__forced.sched;
        *source = HK_SCHED_SEARCH;
        return 1;
    }
    struct hk_tune_state *t = state_of(context);
    if (!t)
        return 0;
    int found = 0;
    hk__mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->count; i++) {
        tune_entry *e = &t->entries[i];
        if (strcmp(e->family, family->name) || strcmp(e->key, key))
            continue;
        if (e->state == ENTRY_UNCHECKED) { /* a line of the file: its schedule, now that its family is known */
            int parsed = hk__tune_parse(family, e->sched, e->v);
            e->state = parsed && hk__tune_valid(family, e->v) ? ENTRY_OK : ENTRY_STALE;
            if (e->state == ENTRY_STALE)
                hk__tune_warn("%s:%u: stale line ignored (schedule \"%s\" %s)", t->file ? t->file : "", e->line,
                              e->sched, parsed ? "has a value out of range" : "does not match the kernel's parameters");
        }
        if (e->state == ENTRY_OK) {
            memset(out, 0, sizeof *out);
            memcpy(out->v, e->v, sizeof out->v);
            found = 1;
        }
    }
    hk__mutex_unlock(&t->lock);
    if (found)
        *source = HK_SCHED_TUNED;
    return found;
}

void hk__tune_note(hk_context *context, const hk__tunable *family, const uint32_t *v, int source)
{
    if (hk__forced.mode && hk__forced.context == context && hk__forced.family == family) {
        memset(hk__forced.served, 0, sizeof hk__forced.served);
        memcpy(hk__forced.served, v, family->n_params * sizeof *v);
        hk__forced.noted = 1;
    }
    struct hk_tune_state *t = state_of(context);
    if (!t)
        return;
    hk__mutex_lock(&t->lock);
    memset(t->last[family->id], 0, sizeof t->last[family->id]);
    memcpy(t->last[family->id], v, family->n_params * sizeof *v);
    t->last_source[family->id] = source;
    t->last_set[family->id] = 1;
    hk__mutex_unlock(&t->lock);
}

int hk__tune_set_winner(hk_context *context, const hk__tunable *family, const char *key, const uint32_t *v, double ms,
                        int no_store)
{
    struct hk_tune_state *t = state_of(context);
    if (!t)
        return 0;
    char sched[HK_TUNE_SHAPE_CHARS];
    hk__tune_format(family, v, sched, sizeof sched);
    hk__mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->count; i++)
        if (!strcmp(t->entries[i].family, family->name) && !strcmp(t->entries[i].key, key))
            t->entries[i].state = ENTRY_REPLACED;
    tune_entry *e = entry_add(t, family->name, key);
    if (e) {
        snprintf(e->sched, sizeof e->sched, "%s", sched);
        memcpy(e->v, v, sizeof e->v);
        e->state = ENTRY_OK;
        e->line = 0;
        e->ms = ms;
    }
    hk__mutex_unlock(&t->lock);
    if (e && !no_store && t->file)
        store(context, t, family, key, sched, ms);
    return e != NULL;
}

hk_status hk__tune_last(hk_context *context, const hk__tunable *family, char *out, size_t out_size)
{
    static const char fn[] = "hk_schedule_last";
    static const char *const sources[] = {"default", "env", "tuned", "search"};
    if (!out || out_size < 2)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out is NULL or out_size=%zu under 2", out_size);
    struct hk_tune_state *t = state_of(context);
    uint32_t v[HK_TUNE_MAX_PARAMS];
    int set = 0, source = 0;
    if (t) {
        hk__mutex_lock(&t->lock);
        set = t->last_set[family->id];
        memcpy(v, t->last[family->id], sizeof v);
        source = t->last_source[family->id];
        hk__mutex_unlock(&t->lock);
    }
    if (!set)
        return hk__fail(HK_ERROR_STATE, fn, "no %s call has run on this context yet", family->name);
    char text[128], line[160];
    hk__tune_format(family, v, text, sizeof text);
    int w = snprintf(line, sizeof line, "%s %s", sources[source], text);
    if (w < 0 || (size_t)w >= out_size)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_size=%zu is too small (%d bytes needed)", out_size, w + 1);
    memcpy(out, line, (size_t)w + 1);
    return HK_OK;
}

const char *hk_tune_cache_file(const hk_context *context)
{
    struct hk_tune_state *t = context ? state_of((hk_context *)context) : NULL;
    return t ? t->file : NULL;
}
