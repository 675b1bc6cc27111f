#include "hk_test.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
