#define _XOPEN_SOURCE 700 /* mknod */
#include "hk_test.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned passed, failed;

float hk_poison_value(void)
{
    uint32_t w = HK_POISON_WORD;
    float f;
    memcpy(&f, &w, 4);
    return f;
}

void hk_poison(float *v, size_t n)
{
    float p = hk_poison_value();
    for (size_t i = 0; i < n; i++)
        v[i] = p;
}

void hk_check(int ok, const char *name, const char *fmt, ...)
{
    char detail[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, *detail ? ": " : "", detail);
    fflush(stdout);
    if (ok)
        passed++;
    else
        failed++;
}

int hk_check_close(const char *name, const float *got, const float *ref, size_t n, double gate)
{
    double rel = got ? hk_scale_rel(got, ref, n) : INFINITY;
    int ok = rel < gate;
    hk_check(ok, name, "scale_rel=%.3e gate=%.0e n=%zu", rel, gate, n);
    return ok;
}

int hk_check_status(const char *name, hk_status got, hk_status want, const char *needle)
{
    const char *msg = hk_last_error();
    int ok = got == want && (got == HK_OK || !needle || strstr(msg, needle));
    hk_check(ok, name, "%s (want %s) \"%s\"", hk_status_name(got), hk_status_name(want), got == HK_OK ? "" : msg);
    return ok;
}

hk_context *hk_test_context_without(uint32_t disable_features)
{
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.enable_validation = 1;
    desc.disable_pipeline_cache = 1;
    desc.disable_features = disable_features;
    hk_context *context = NULL;
    if (hk_context_create(&desc, &context) != HK_OK) {
        hk_check(0, "test context", "%s", hk_last_error());
        return NULL;
    }
    return context;
}

hk_context *hk_test_context(void)
{
    hk_context *context = hk_test_context_without(0);
    if (!context)
        exit(1);
    hk_caps caps;
    hk_context_caps(context, &caps);
    printf("device: %s (subgroup %u, validation %s)\n", caps.device_name, caps.subgroup_size,
           hk_context_validation_active(context) ? "on" : "not installed");
    return context;
}

int hk_test_finish(hk_context *context)
{
    uint32_t messages = hk_context_validation_messages(context);
    hk_check(messages == 0, "no validation messages", "%u seen", messages);
    hk_context_destroy(context);
    printf("%u passed, %u failed\n", passed, failed);
    return failed ? 1 : 0;
}

hk_buffer *hk_test_buffer(hk_context *context, uint64_t size, const void *data)
{
    hk_buffer *buffer = NULL;
    if (hk_buffer_create(context, size, &buffer) != HK_OK || (data && hk_buffer_upload(buffer, 0, data, size) != HK_OK)) {
        fprintf(stderr, "buffer setup failed: %s\n", hk_last_error());
        exit(1);
    }
    return buffer;
}

hk_test_out hk_test_out_create(hk_context *context, size_t n)
{
    hk_test_out o = {NULL, n, malloc((n + 2 * HK_TEST_GUARD) * sizeof(float))};
    if (!o.host) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    hk_poison(o.host, n + 2 * HK_TEST_GUARD);
    o.buffer = hk_test_buffer(context, (n + 2 * HK_TEST_GUARD) * sizeof(float), o.host);
    return o;
}

hk_view hk_test_out_view(const hk_test_out *o) { return (hk_view){o->buffer, HK_TEST_GUARD * sizeof(float)}; }

const float *hk_test_out_read(hk_test_out *o, const char *name)
{
    if (hk_buffer_download(o->buffer, 0, o->host, (o->n + 2 * HK_TEST_GUARD) * sizeof(float)) != HK_OK) {
        hk_check(0, name, "download failed: %s", hk_last_error());
        return NULL;
    }
    uint32_t bad = 0;
    for (size_t i = 0; i < HK_TEST_GUARD; i++) {
        uint32_t a, b;
        memcpy(&a, &o->host[i], 4);
        memcpy(&b, &o->host[HK_TEST_GUARD + o->n + i], 4);
        bad += (a != HK_POISON_WORD) + (b != HK_POISON_WORD);
    }
    char label[160];
    snprintf(label, sizeof label, "%s guards", name);
    hk_check(bad == 0, label, "%u words written outside the output", bad);
    return o->host + HK_TEST_GUARD;
}

void hk_test_out_poison(hk_test_out *o)
{
    hk_poison(o->host, o->n + 2 * HK_TEST_GUARD);
    if (hk_buffer_upload(o->buffer, 0, o->host, (o->n + 2 * HK_TEST_GUARD) * sizeof(float)) != HK_OK)
        hk_check(0, "poison upload", "%s", hk_last_error());
}

void hk_test_out_destroy(hk_test_out *o)
{
    hk_buffer_destroy(o->buffer);
    free(o->host);
}

hk_view hk_test_place(hk_context *context, const void *data, size_t bytes, uint64_t offset, int flush)
{
    size_t size = (size_t)offset + bytes + (flush ? 0 : HK_TEST_PAD);
    uint8_t *image = malloc(size);
    if (!image) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    memset(image, 0xFF, size);
    memcpy(image + offset, data, bytes);
    hk_view view = {hk_test_buffer(context, size, image), offset};
    free(image);
    return view;
}

void hk_test_q8_1_wrong_s(hk_rng *r, hk_block_q8_1 *x, size_t blocks, int nonfinite_s)
{
    for (size_t b = 0; b < blocks; b++) {
        x[b].d = hk_f32_to_f16(hk_rng_uniform(r, -1.0f, 1.0f) / 64.0f);
        for (int i = 0; i < 32; i++)
            x[b].qs[i] = (int8_t)(hk_rng_next(r) >> 56);
        uint16_t s = (uint16_t)(hk_rng_next(r) >> 48);
        if ((s & 0x7C00) == 0x7C00) /* keep most finite; a few inf and NaN below */
            s ^= 0x4000;
        x[b].s = nonfinite_s && b % 7 == 3 ? 0x7C00 : nonfinite_s && b % 11 == 5 ? 0x7E00 : s;
    }
}

void hk_test_sdpa_plant(const hk_sdpa_desc *shape, uint32_t seq_k, char tensor, uint32_t a, uint32_t b, float *row)
{
    uint32_t n_q = shape->n_q, group = shape->n_heads / shape->n_kv_heads;
    uint32_t all = shape->causal ? seq_k - n_q : seq_k - 1; /* every query sees keys 0..all */
    uint32_t half = shape->causal ? seq_k - n_q + n_q / 2 : seq_k / 2;
    if (tensor == 'q') {
        uint32_t plant = (b / group) % 4, first = b % group == 0, second = b % group == (group > 1);
        if (plant == 1)
            row[2] = first ? 1.5f : -1.5f;
        if (plant == 3 && first && a == 0)
            row[0] = NAN;
        if (plant == 3 && second && a == n_q - 1)
            row[4] = INFINITY;
        return;
    }
    uint32_t plant = a % 4;
    if (tensor == 'k') {
        if (plant == 0 && b == half)
            row[1] = NAN;
        if (plant == 1 && b == all / 3)
            row[2] = INFINITY;
        if (plant == 3 && b == seq_k - 1)
            row[7] = NAN;
    } else {
        if (plant == 1 && b == 0)
            row[shape->head_dim / 2 + 5] = INFINITY;
        if (plant == 1 && b == all / 2)
            row[shape->head_dim / 2 + 6] = -INFINITY;
        if (plant == 2 && b == seq_k - 1)
            row[3] = NAN;
    }
}

void hk_test_sdpa_classes(const float *q, const float *k, const float *v, uint8_t *cls, size_t n_q, size_t n_heads,
                          size_t n_kv_heads, size_t seq_k, size_t head_dim, float scale, int causal)
{
    size_t group = n_heads / n_kv_heads;
    for (size_t i = 0; i < n_q; i++)
        for (size_t h = 0; h < n_heads; h++) {
            const float *qi = q + (i * n_heads + h) * head_dim;
            const float *kh = k + (h / group) * seq_k * head_dim, *vh = v + (h / group) * seq_k * head_dim;
            uint8_t *c = cls + (i * n_heads + h) * head_dim;
            size_t seen = causal ? seq_k - n_q + i + 1 : seq_k;
            int nan_score = 0, all_minus_inf = 1;
            for (size_t j = 0; j < seen; j++) {
                double dot = 0.0;
                for (size_t x = 0; x < head_dim; x++)
                    dot += (double)qi[x] * (double)kh[j * head_dim + x];
                double s = (double)scale * dot;
                nan_score |= isnan(s) || s == INFINITY;
                all_minus_inf &= s == -INFINITY;
            }
            for (size_t x = 0; x < head_dim; x++) {
                int v_bad = 0;
                for (size_t j = 0; j < seen; j++)
                    v_bad |= !isfinite(vh[j * head_dim + x]);
                c[x] = nan_score || all_minus_inf ? HK_TEST_NAN : v_bad ? HK_TEST_NONFINITE : HK_TEST_FINITE;
            }
        }
}

int hk_check_sdpa_classes(const char *name, const float *got, const float *ref, const uint8_t *cls, size_t n,
                          double gate)
{
    size_t count[3] = {0, 0, 0}, wrong[3] = {0, 0, 0}, ref_wrong = 0;
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; i++) {
        int c = cls[i];
        count[c]++;
        if (c == HK_TEST_NAN) {
            wrong[c] += !isnan(got[i]);
            ref_wrong += !isnan(ref[i]);
        } else if (c == HK_TEST_NONFINITE) {
            wrong[c] += isfinite(got[i]) != 0;
            ref_wrong += isfinite(ref[i]) != 0;
        } else {
            wrong[c] += !isfinite(got[i]);
            ref_wrong += !isfinite(ref[i]);
            if (isfinite(got[i]) && isfinite(ref[i])) {
                double d = fabs((double)got[i] - (double)ref[i]), a = fabs((double)ref[i]);
                err = d > err ? d : err;
                scale = a > scale ? a : scale;
            }
        }
    }
    double rel = err / (scale > 1e-30 ? scale : 1e-30);
    int ok = !wrong[0] && !wrong[1] && !wrong[2] && !ref_wrong && count[0] && count[1] && count[2] && rel < gate;
    hk_check(ok, name,
             "NaN %zu (%zu not NaN), NaN or inf %zu (%zu finite), finite %zu (%zu not finite, "
             "scale_rel=%.3e gate=%.0e); %zu of the reference off the rule",
             count[HK_TEST_NAN], wrong[HK_TEST_NAN], count[HK_TEST_NONFINITE], wrong[HK_TEST_NONFINITE],
             count[HK_TEST_FINITE], wrong[HK_TEST_FINITE], rel, gate, ref_wrong);
    return ok;
}

int hk_test_zero_device(const char *path)
{
    struct stat zero;
    if (stat("/dev/zero", &zero) != 0 || !S_ISCHR(zero.st_mode) ||
        mknod(path, S_IFCHR | 0644, zero.st_rdev) != 0) {
        printf("(no device made at %s: %s)\n", path, strerror(errno));
        return 0;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) { /* a file system mounted nodev */
        printf("(the device made at %s does not open: %s)\n", path, strerror(errno));
        unlink(path);
        return 0;
    }
    close(fd);
    return 1;
}

hk_tune_desc hk_test_short_tune(hk_tune_kernel kernel)
{
    hk_tune_desc d;
    hk_tune_desc_init(&d);
    d.kernel = kernel;
    d.seed = 5;
    d.max_measured = 2;
    d.repeats = 1;
    d.batch = 1;
    d.copies = 2;
    d.no_store = 1;
    return d;
}
