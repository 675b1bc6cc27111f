/* measure.h — the one timing method of hk-check and hk-bench (docs/perf.md says why):
 * weights rotated over copies whose footprint is well past the last-level cache, many dispatches
 * recorded in one stream, GPU timestamps, clocks warmed first, and the device's copy bandwidth
 * measured beside each row. Uses only the public API. */
#ifndef HK_MEASURE_H
#define HK_MEASURE_H

#include "hkernel.h"

#include <stdio.h>

#define MIB (1024.0 * 1024.0)

typedef struct bench {
    hk_context *ctx;
    hk_caps caps;
    uint64_t cold_bytes;     /* weight footprint to rotate over when timing */
    double copy_gbs;         /* at the start of the run */
    hk_buffer *copy_bufs[2]; /* kept for the copy measured beside every row */
    int failures;
    FILE *csv;
    const char *only;
    const char *tool;        /* for messages */
} bench;

/* A kernel under test: `record` records one dispatch using weight copy `copy`. */
typedef hk_status (*record_fn)(bench *b, hk_stream *s, void *user, uint32_t copy);

typedef struct timing {
    double stream_ms; /* per dispatch, many in one stream */
    double single_ms; /* one dispatch alone */
} timing;

/* The options every tool takes: --device N|NAME, --quick, --full, --csv FILE, --only KERNEL. */
typedef struct bench_options {
    int device_index;        /* -1: by name, HK_DEVICE or the best device */
    const char *device_name;
    int quick;               /* -1: quick on CPU devices */
    const char *csv;
    const char *only;
} bench_options;

/* Defaults for bench_options. */
bench_options bench_options_default(void);
/* Takes argv[*i] (and its value, advancing *i) if it is a common option; returns 0 if not. */
int bench_option(bench_options *o, int argc, char **argv, int *i);

/* Opens the device the options name, sizes the cold footprint (small when quick), opens the CSV
 * file with its header line and measures the copy bandwidth. Returns whether the run is quick. */
int bench_open(bench *b, const char *tool, const bench_options *o, const char *csv_header);
void bench_close(bench *b);
/* Prints "tool: what: <hk_last_error()>" and exits 2. */
void die(const bench *b, const char *what);
hk_buffer *make_buffer(bench *b, uint64_t size, const void *data);
/* Weight copies to rotate over so that `bytes` each fill the cold footprint. */
uint32_t copies_for(const bench *b, uint64_t bytes);
/* A buffer of `copies` back-to-back copies of `bytes` bytes of data: copy 0 uploaded, the rest
 * copied on the device. */
hk_buffer *make_copies(bench *b, const void *data, uint64_t bytes, uint32_t copies);
timing time_kernel(bench *b, record_fn record, void *user, uint32_t copies);
/* Copy bandwidth now, counting bytes read + written. */
double copy_gbs(bench *b);
/* Whether rows of this kernel are wanted (--only). */
int wanted(const bench *b, const char *kernel);

#endif
