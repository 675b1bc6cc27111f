/* measure.h — the one timing method of hk-check and hk-bench (docs/perf.md, Method, says why):
 * weights rotated over copies whose footprint is well past the last-level cache, many dispatches
 * recorded in one stream, GPU timestamps, clocks warmed first, and the device's copy bandwidth
 * measured beside each row; and the options and case loop both tools share. Uses only the public
 * API and the kernel table (cases.h). */
#ifndef HK_MEASURE_H
#define HK_MEASURE_H

#include "cases.h"
#include "hkernel.h"

#include <stdio.h>

#define MIB (1024.0 * 1024.0)

typedef struct bench {
    hk_context *ctx;
    hk_caps caps;
    int quick;               /* the quick shapes (CPU devices) rather than the model shapes */
    uint64_t cold_bytes;     /* weight footprint to rotate over when timing */
    double copy_gbs;         /* at the start of the run */
    hk_buffer *copy_bufs[2]; /* kept for the copy measured beside every row */
    int failures;
    FILE *csv;
    const char *only;        /* comma-separated case names, NULL: all */
    const char *shapes;      /* comma-separated D0xD1xD2 dimensions, NULL: all */
    const char *tool;        /* for messages */
} bench;

/* Records one op: `copy` picks the weight copy, `op` counts the ops of the batch. */
typedef hk_status (*record_fn)(bench *b, hk_stream *s, void *user, uint32_t copy, uint32_t op);

typedef struct timing {
    double stream_ms; /* per dispatch, many in one stream */
    double single_ms; /* one dispatch alone */
} timing;

/* The options every tool takes: --device N|NAME, --quick, --full, --csv FILE, --only NAMES. */
typedef struct bench_options {
    int device_index;        /* -1: by name, HK_DEVICE or the best device */
    const char *device_name;
    int quick;               /* -1: quick on CPU devices */
    const char *csv;
    const char *only;
    const char *shapes; /* NULL: every shape; else "D0xD1xD2" dims, comma-separated */
} bench_options;

/* Defaults for bench_options. */
bench_options bench_options_default(void);
/* Takes argv[*i] (and its value, advancing *i) if it is a common option: returns 1; 0 if it is
 * not one; -1 if it is one but its value is missing or wrong (a message was printed). */
int bench_option(bench_options *o, int argc, char **argv, int *i);
/* A decimal number at s: digits only (no sign, space or base prefix), at most max; *end is set after
 * the digits. 0 where s starts with no digit or the number is past max. */
int option_number(const char *s, uint64_t max, uint64_t *out, const char **end);
/* --device's value: all digits, an index from 0 to 1000000 into *index; anything else a name
 * substring into *name. 0 after a message (prefix first) where the digits are out of range. */
int device_option(const char *prefix, const char *value, int *index, const char **name);
/* The common options' help lines. */
void bench_options_help(FILE *f);
/* Parses a tool's command line: the common options, --help (usage to stdout), and --json FILE
 * where json_path is not NULL. Returns -1 to go on, or the exit code (0 after --help, 2 after a
 * usage error or an --only name that matches no case, whose message lists the names). */
int bench_parse(bench_options *o, int argc, char **argv, const char *tool, void (*usage)(FILE *f),
                const char **json_path);

/* Opens a file the user named for writing (--csv, --json): a regular file (created or truncated),
 * a device, or a FIFO that a process reads; NULL, after a message, for one that no process reads
 * (never a wait) or anything that cannot be written. */
FILE *bench_create(const char *tool, const char *path);
/* Opens the device the options name, sizes the cold footprint (small when quick), opens the CSV
 * file with its header line and measures the copy bandwidth. Exits 2 on failure. */
void bench_open(bench *b, const char *tool, const bench_options *o, const char *csv_header);
void bench_close(bench *b);
/* Prints "tool: what: <hk_last_error()>" and exits 2. */
void die(const bench *b, const char *what);
/* Weight copies to rotate over so that `bytes` each fill the cold footprint. */
uint32_t copies_for(const bench *b, uint64_t bytes);
timing time_kernel(bench *b, record_fn record, void *user, uint32_t copies);
/* Copy bandwidth now, counting bytes read + written. */
double copy_gbs(bench *b);
/* Whether rows of this case are wanted (--only). */
int wanted(const bench *b, const char *name);

/* The loop both tools run: every wanted case, each of its shapes for this device (quick or
 * full), prepared with ref_mode, bound with the cold tensors replicated; `row` reports it.
 * Cases the device cannot run and shapes it cannot bind get a line saying why. */
typedef void (*row_fn)(bench *b, hk_case_run *run, hk_case_bound *bound);
void for_each_case(bench *b, int ref_mode, row_fn row);
/* Times a bound run (cold tensors rotated over their copies). */
timing time_case(bench *b, const hk_case_run *run, const hk_case_bound *bound);

/* The schedule a row's case ran with ("tuned nrows=4,..."), for the families the autotuner knows
 * (hk_schedule_last); "" for the others. `out` holds it. */
const char *row_schedule(bench *b, const hk_case_run *run, char *out, size_t size);

#endif
