/* Test helpers shared by every test program: seeded data, poisoning, the one reference-compare
 * helper, pass/fail counting, and a context with the validation layer on. */
#ifndef HK_TEST_H
#define HK_TEST_H

#include "hkernel.h"
#include "hk_ref.h"

#include <stddef.h>
#include <stdint.h>

/* A NaN with a recognisable payload: any output element still equal to it was never written. */
#define HK_POISON_WORD 0x7fc0dead
float hk_poison_value(void);
void hk_poison(float *v, size_t n);

/* Records one check: prints "PASS|FAIL name: detail" and counts it. */
void hk_check(int ok, const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Checks that scale_rel(got, ref) < gate (got NULL fails). Returns 1 on pass. */
int hk_check_close(const char *name, const float *got, const float *ref, size_t n, double gate);
/* Checks a status (and, for a failure, that hk_last_error() contains `needle`). */
int hk_check_status(const char *name, hk_status got, hk_status want, const char *needle);

/* A context on the device HK_DEVICE picks (default: best present), validation enabled where the
 * layer is installed, no pipeline cache on disk, the given HK_FEATURE_* bits disabled. NULL (and a
 * failed check) if it cannot be created. */
hk_context *hk_test_context_without(uint32_t disable_features);
/* hk_test_context_without(0), printing the device; exits the test program (1) on failure. */
hk_context *hk_test_context(void);
/* Counts one failure per validation message seen on the context, destroys it, prints the
 * "N passed, M failed" line and returns the exit code. */
int hk_test_finish(hk_context *context);

/* Creates a buffer of size bytes and uploads data (if not NULL); exits on failure. */
hk_buffer *hk_test_buffer(hk_context *context, uint64_t size, const void *data);

/* An input tensor on the device: a view at `offset` of a buffer of its own, flush against the
 * buffer's end or followed by HK_TEST_PAD bytes; every byte around it is 0xFF (an f16 or f32 NaN
 * wherever a kernel would use it). The caller destroys view.buffer. Exits on failure. */
#define HK_TEST_PAD 64
hk_view hk_test_place(hk_context *context, const void *data, size_t bytes, uint64_t offset, int flush);

/* Q8_1 blocks made by hand, as another producer might: random quants over the whole int8 range
 * (-128 included), random d of either sign, and an s that has nothing to do with them (random
 * finite f16; with nonfinite_s, some blocks inf or NaN). */
void hk_test_q8_1_wrong_s(hk_rng *r, hk_block_q8_1 *x, size_t blocks, int nonfinite_s);

/* Attention with non-finite inputs (include/hkernel.h, hk_sdpa_blk). hk_test_sdpa_plant changes
 * in place one row of head_dim values of tensor 'q' (query a, head b), 'k' or 'v' (kv head a,
 * key b) of a shape with n_kv_heads >= 4 and seq_k keys, kv head a % 4 taking plant a % 4:
 *   0: K NaN in a key the second half of the queries sees (causal; all otherwise);
 *   1: K +inf in column 2 of a key every query sees, q's column 2 positive in the group's first
 *      head (score +inf: the row NaN) and negative in its others (score -inf: the key left out);
 *      V +inf and -inf in keys every query sees;
 *   2: V NaN in the last key (the last query's alone when causal);
 *   3: q NaN in the first query's first head, q +inf in the last query's second head, K NaN in
 *      the last key.
 * Rows past seq_k are the caller's (NaN in the tests). */
void hk_test_sdpa_plant(const hk_sdpa_desc *shape, uint32_t seq_k, char tensor, uint32_t a, uint32_t b, float *row);
/* The class the rule gives each output out[n_q][n_heads][head_dim] for hk_ref_sdpa's inputs. */
enum { HK_TEST_FINITE, HK_TEST_NONFINITE, HK_TEST_NAN };
void hk_test_sdpa_classes(const float *q, const float *k, const float *v, uint8_t *cls, size_t n_q, size_t n_heads,
                          size_t n_kv_heads, size_t seq_k, size_t head_dim, float scale, int causal);
/* Checks that got is NaN where cls is HK_TEST_NAN, not finite where HK_TEST_NONFINITE, and
 * elsewhere finite and within gate of ref (scale_rel over those outputs); that ref, hk_ref_sdpa on
 * the same inputs, falls in the same classes; and that every class occurs (the planted inputs
 * reached each case). Returns 1 on pass. */
int hk_check_sdpa_classes(const char *name, const float *got, const float *ref, const uint8_t *cls, size_t n,
                          double gate);

/* An output of n floats with HK_TEST_GUARD poisoned floats before and after it, all poisoned. */
#define HK_TEST_GUARD 16
typedef struct hk_test_out {
    hk_buffer *buffer;
    size_t n;
    float *host;
} hk_test_out;
hk_test_out hk_test_out_create(hk_context *context, size_t n);
/* The view of the output itself (past the leading guard). */
hk_view hk_test_out_view(const hk_test_out *out);
/* Downloads the output and checks (one hk_check named "<name> guards") that the guards are still
 * poison; returns the n output values (NULL, after a failed check, if the download failed). */
const float *hk_test_out_read(hk_test_out *out, const char *name);
/* Poisons the output and its guards again (host copy and device). */
void hk_test_out_poison(hk_test_out *out);
void hk_test_out_destroy(hk_test_out *out);

/* Makes a character device at path with /dev/zero's numbers (reading it never ends): 1, or 0
 * (printing why) where this process may not make one or its file system does not open devices. */
int hk_test_zero_device(const char *path);

/* A tuner descriptor for kernel that searches briefly and stores nothing: seed 5, two schedules
 * measured (the default and one more: each is a pipeline to build on lavapipe), one repeat of one
 * op over two copies; the caller sets the shape. */
hk_tune_desc hk_test_short_tune(hk_tune_kernel kernel);

#endif
