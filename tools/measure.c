#define _POSIX_C_SOURCE 200809L
#include "measure.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void die(const bench *b, const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", b->tool, what, hk_last_error());
    exit(2);
}

static hk_buffer *make_buffer(bench *b, uint64_t size)
{
    hk_buffer *buf = NULL;
    if (hk_buffer_create(b->ctx, size, &buf) != HK_OK)
        die(b, "buffer");
    return buf;
}

/* Median of n values (sorts them). */
static double median(double *v, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (v[j] < v[i]) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
            }
    return v[n / 2];
}

/* GPU milliseconds of `reps` dispatches recorded back to back in one submit. */
static double timed_batch(bench *b, hk_stream *s, record_fn record, void *user, uint32_t copies, uint32_t reps)
{
    double ms = 0;
    if (hk_stream_timestamp(s, NULL) != HK_OK)
        die(b, "timestamp");
    for (uint32_t i = 0; i < reps; i++)
        if (record(b, s, user, i % copies, i) != HK_OK)
            die(b, "record");
    if (hk_stream_timestamp(s, NULL) != HK_OK || hk_stream_submit(s) != HK_OK || hk_stream_elapsed_ms(s, 0, 1, &ms) != HK_OK)
        die(b, "timed submit");
    return ms;
}

/* GPU clocks fall in the idle gaps while the host prepares a case: keep the device busy this long
 * before measuring, and make each measured batch at least this long. */
#define WARM_MS 150.0
#define BATCH_MS 8.0

timing time_kernel(bench *b, record_fn record, void *user, uint32_t copies)
{
    timing t = {NAN, NAN};
    if (!b->caps.timestamps)
        return t;
    hk_stream *s = NULL;
    if (hk_stream_create(b->ctx, 2, &s) != HK_OK)
        die(b, "stream");
    /* at least a few passes over every weight copy; an op that alone outlasts a batch (a big
     * GEMM on a CPU device) runs in batches of one */
    double probe = timed_batch(b, s, record, user, copies, 1);
    uint32_t reps = copies * 3 < 32 ? 32 : copies * 3;
    if (probe * reps > 10 * BATCH_MS)
        reps = probe > BATCH_MS ? 1 : (uint32_t)ceil(BATCH_MS / probe);
    double busy = probe, last = 0;
    for (int i = 0; i < 1000 && busy < WARM_MS; i++)
        busy += last = timed_batch(b, s, record, user, copies, reps);
    if (last < BATCH_MS && last > 0) {
        double grow = ceil(BATCH_MS / last * reps);
        reps = grow > 40000 ? 40000 : (uint32_t)grow;
    }
    double runs[3], lone[7];
    for (int run = 0; run < 3; run++)
        runs[run] = timed_batch(b, s, record, user, copies, reps);
    t.stream_ms = median(runs, 3) / reps;
    /* single-dispatch latency: one dispatch alone in a submit, right after the warm batches */
    int singles = probe > BATCH_MS ? 3 : 7;
    for (int i = 0; i < singles; i++)
        lone[i] = timed_batch(b, s, record, user, copies, 1);
    t.single_ms = median(lone, singles);
    hk_stream_destroy(s);
    return t;
}

/* ---- copy bandwidth ---- */

static hk_status record_copy(bench *b, hk_stream *s, void *user, uint32_t copy, uint32_t op)
{
    hk_buffer **bufs = user;
    (void)copy;
    (void)op;
    return hk_copy(b->ctx, s, (hk_view){bufs[0], 0}, (hk_view){bufs[1], 0}, hk_buffer_size(bufs[0]));
}

double copy_gbs(bench *b)
{
    uint64_t size = hk_buffer_size(b->copy_bufs[0]);
    timing t = time_kernel(b, record_copy, b->copy_bufs, 1);
    return 2.0 * (double)size / (t.stream_ms * 1e-3) / 1e9;
}

static void measure_copy(bench *b)
{
    uint64_t size = b->cold_bytes / 2;
    b->copy_bufs[0] = make_buffer(b, size);
    b->copy_bufs[1] = make_buffer(b, size);
    hk_buffer_fill(b->copy_bufs[0], 0, size, 0x3f800000u);
    b->copy_gbs = copy_gbs(b);
    printf("device-to-device copy: %.0f MiB, %.1f GB/s (read + write); each row's ratio is to a copy measured "
           "right after it\n\n", size / MIB, b->copy_gbs);
}

uint32_t copies_for(const bench *b, uint64_t bytes) { return hk_case_copies(bytes, b->cold_bytes); }

/* ---- options ---- */

/* Whether the comma-separated list holds item; a NULL list holds everything. */
static int list_has(const char *list, const char *item)
{
    if (!list)
        return 1;
    size_t n = strlen(item);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, item, n))
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

int wanted(const bench *b, const char *name) { return list_has(b->only, name); }

/* whether the --shapes list holds dims, bare or after the type (q8_0:8x4096x4096) */
static int dims_wanted(const char *list, hk_type type, const char *dims)
{
    char typed[96];
    snprintf(typed, sizeof typed, "%s:%s", hk_type_name(type), dims);
    return list_has(list, dims) || list_has(list, typed);
}

/* --shapes: whether shape's first three dimensions are one of the list's D0xD1xD2, or with its
 * type TYPE:D0xD1xD2 (q8_0:8x4096x4096); a two-dimensional shape (a matvec's rows x k) also as
 * D0xD1 */
static int shape_wanted(const char *list, const hk_case_shape *shape)
{
    char dims[64];
    snprintf(dims, sizeof dims, "%ux%ux%u", shape->d[0], shape->d[1], shape->d[2]);
    if (dims_wanted(list, shape->type, dims))
        return 1;
    snprintf(dims, sizeof dims, "%ux%u", shape->d[0], shape->d[1]);
    return shape->d[2] == 0 && dims_wanted(list, shape->type, dims);
}

static int bench_only_valid(const char *tool, const char *only)
{
    if (!only)
        return 1;
    for (const char *p = only; *p;) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (size_t i = 0; i < hk_case_count; i++)
            found |= strlen(hk_cases[i]->name) == len && !strncmp(p, hk_cases[i]->name, len);
        if (!found) {
            fprintf(stderr, "%s: --only: no kernel named \"%.*s\"; the kernels are:", tool, (int)len, p);
            for (size_t i = 0; i < hk_case_count; i++)
                fprintf(stderr, " %s", hk_cases[i]->name);
            fprintf(stderr, "\n");
            return 0;
        }
        p += len + (p[len] == ',');
    }
    return 1;
}

bench_options bench_options_default(void) { return (bench_options){-1, NULL, -1, NULL, NULL, NULL}; }

int option_number(const char *s, uint64_t max, uint64_t *out, const char **end)
{
    uint64_t v = 0;
    size_t n = 0;
    for (; s[n] >= '0' && s[n] <= '9'; n++) {
        unsigned digit = (unsigned)(s[n] - '0');
        if (v > (max - digit) / 10)
            return 0;
        v = v * 10 + digit;
    }
    *out = v;
    *end = s + n;
    return n > 0;
}

int device_option(const char *prefix, const char *value, int *index, const char **name)
{
    uint64_t v;
    const char *end;
    if (*value && value[strspn(value, "0123456789")] == 0) {
        /* all digits: an index, never a name, so that a number past the range is not taken as one */
        if (!option_number(value, 1000000, &v, &end)) {
            fprintf(stderr, "%s--device \"%s\": a device index is 0 to 1000000\n", prefix, value);
            return 0;
        }
        *index = (int)v;
    } else {
        *name = value;
    }
    return 1;
}

void bench_options_help(FILE *f)
{
    fprintf(f, "  --device N|NAME  the device with this index or name substring (default: HK_DEVICE, else the best)\n"
               "  --quick          small shapes (the default on CPU devices such as lavapipe)\n"
               "  --full           the model shapes (the default on GPUs)\n"
               "  --csv FILE       also write the rows as CSV\n"
               "  --only NAMES     only these kernels, comma-separated (a name that is none lists them)\n"
               "  --shapes DIMS    only the shapes of these dimensions, comma-separated D0xD1xD2 (8x4096x4096),\n"
               "                   or D0xD1 for a matvec's rows x k (4096x4096), each optionally of one type\n"
               "                   (q8_0:8x4096x4096)\n"
               "  --help           this text\n");
}

int bench_option(bench_options *o, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    if (!strcmp(arg, "--quick") || !strcmp(arg, "--full")) {
        o->quick = !strcmp(arg, "--quick");
        return 1;
    }
    if (strcmp(arg, "--device") && strcmp(arg, "--csv") && strcmp(arg, "--only") && strcmp(arg, "--shapes"))
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s needs a value\n", arg);
        return -1;
    }
    const char *value = argv[++*i];
    if (!strcmp(arg, "--device")) {
        if (!device_option("", value, &o->device_index, &o->device_name))
            return -1;
    } else if (!strcmp(arg, "--csv")) {
        o->csv = value;
    } else if (!strcmp(arg, "--shapes")) {
        o->shapes = value;
    } else {
        o->only = value;
    }
    return 1;
}


int bench_parse(bench_options *o, int argc, char **argv, const char *tool, void (*usage)(FILE *f),
                const char **json_path)
{
    *o = bench_options_default();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (json_path && !strcmp(argv[i], "--json") && i + 1 < argc) {
            *json_path = argv[++i];
            continue;
        }
        int taken = bench_option(o, argc, argv, &i);
        if (taken == 1)
            continue;
        if (taken == 0)
            fprintf(stderr, "%s: unknown option %s\n", tool, argv[i]);
        usage(stderr);
        return 2;
    }
    return bench_only_valid(tool, o->only) ? -1 : 2;
}

/* ---- the case loop ---- */

typedef struct case_timing {
    const hk_case_run *run;
    const hk_case_bound *bound;
} case_timing;

static hk_status record_case(bench *b, hk_stream *s, void *user, uint32_t copy, uint32_t op)
{
    (void)b;
    case_timing *c = user;
    return hk_case_record(c->run, c->bound, s, copy, op);
}

timing time_case(bench *b, const hk_case_run *run, const hk_case_bound *bound)
{
    case_timing c = {run, bound};
    return time_kernel(b, record_case, &c, bound->copies);
}

void for_each_case(bench *b, int ref_mode, row_fn row)
{
    uint32_t matched = 0;
    for (size_t c = 0; c < hk_case_count; c++) {
        const hk_case *kc = hk_cases[c];
        if (!wanted(b, kc->name))
            continue;
        char why[256];
        if (!hk_case_available(kc, b->ctx, why, sizeof why)) {
            printf("%-17s skipped: %s\n", kc->name, why);
            continue;
        }
        const hk_case_shape *shapes = b->quick ? kc->quick : kc->full;
        uint32_t n = b->quick ? kc->n_quick : kc->n_full;
        for (uint32_t i = 0; i < n; i++) {
            if (!shape_wanted(b->shapes, &shapes[i]))
                continue;
            matched++;
            hk_case_run run;
            hk_status st = hk_case_prepare(kc, &shapes[i], b->ctx, ref_mode, 0x9E3779B97F4A7C15ull + 131 * i + c, &run);
            if (st != HK_OK) {
                printf("%-17s shape %u skipped: could not prepare it (%s)\n", kc->name, i, hk_status_name(st));
                continue;
            }
            uint64_t cold = hk_case_cold_bytes(&run);
            hk_case_bound bound;
            st = hk_case_bind(&run, HK_PLACE_ALIGNED, copies_for(b, cold ? cold : 1), &bound);
            if (st != HK_OK) {
                printf("%-17s %-36s skipped: %s\n", kc->name, run.label, bound.why);
                hk_case_release(&run);
                continue;
            }
            row(b, &run, &bound);
            hk_case_unbind(&bound);
            hk_case_release(&run);
            fflush(stdout);
        }
    }
    if (b->shapes && !matched) { /* a typo in --shapes should not pass for an empty, green run */
        printf("%s: --shapes %s: no shape of the chosen kernels has these dimensions (%s shapes)\n", b->tool, b->shapes,
               b->quick ? "quick" : "full");
        b->failures++;
    }
}

FILE *bench_create(const char *tool, const char *path)
{
    /* opened without blocking, so that a FIFO with no reader fails at once instead of waiting for
     * one; then blocking again, so that writes wait for a slow reader instead of failing */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0644);
    int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        fprintf(stderr, "%s: cannot write %s: %s\n", tool, path,
                err == ENXIO ? "a FIFO that no process reads" : strerror(err));
    }
    return f;
}

void bench_open(bench *b, const char *tool, const bench_options *o, const char *csv_header)
{
    b->tool = tool;
    b->only = o->only;
    b->shapes = o->shapes;
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.device_index = o->device_index;
    desc.device_name = o->device_name;
    if (hk_context_create(&desc, &b->ctx) != HK_OK)
        die(b, "context");
    hk_context_caps(b->ctx, &b->caps);
    int cpu = b->caps.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU;
    int quick = b->quick = o->quick >= 0 ? o->quick : cpu;
    /* cold: weights rotate over a footprint several times a GPU's L2 (the H200's is 50+ MB) */
    b->cold_bytes = quick ? (64u << 20) : (1024u << 20);
    printf("%s %d.%d.%d on %s (%s), subgroup %u%s, int8 dot %s, KHR coopmat %s (%u shapes), %s shapes\n", tool,
           HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH, b->caps.device_name, cpu ? "CPU" : "GPU",
           b->caps.subgroup_size, b->caps.subgroup_size_control ? " (size control)" : "",
           b->caps.integer_dot_accelerated ? "accelerated" : b->caps.integer_dot ? "yes" : "no",
           b->caps.coopmat_khr ? "yes" : "no", b->caps.coopmat_khr_count, quick ? "quick" : "full");
    if (!b->caps.timestamps)
        printf("(no timestamps on this device: times are not measured)\n");
    if (o->csv)
        b->csv = bench_create(tool, o->csv);
    if (b->csv)
        fprintf(b->csv, "%s\n", csv_header);
    measure_copy(b);
}

void bench_close(bench *b)
{
    if (b->csv)
        fclose(b->csv);
    hk_buffer_destroy(b->copy_bufs[0]);
    hk_buffer_destroy(b->copy_bufs[1]);
    hk_context_destroy(b->ctx);
}

/* The schedule a row ran with, for the families the autotuner knows (the case's tune_family,
 * hk_schedule_last). */
const char *row_schedule(bench *b, const hk_case_run *run, char *out, size_t size)
{
    int family = run->kcase->tune_family ? run->kcase->tune_family(run) : 0;
    if (!family || hk_schedule_last(b->ctx, (hk_tune_kernel)family, out, size) != HK_OK)
        return "";
    return out;
}
