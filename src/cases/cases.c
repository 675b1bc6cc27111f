/* cases.c — the driver of the kernel table (cases.h): tensors on the device in a placement,
 * poisoned outputs, one checked run, guard checks, and the table itself. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POISON_WORD 0x7fc0deadu /* a NaN with a payload: an output still holding it was never written */
#define PAD 64                  /* bytes after a tensor in the padded placements */
/* inputs are read back (to catch a kernel writing into one) when they are this small */
#define VERIFY_INPUT_BYTES (16u << 20)

const char *hk_case_place_name(int placement)
{
    static const char *const names[HK_PLACE_COUNT] = {"aligned", "minimal", "at-end", "at-end-minimal"};
    return placement >= 0 && placement < HK_PLACE_COUNT ? names[placement] : "?";
}

void *hk_case_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        fprintf(stderr, "cases: out of host memory (%zu bytes)\n", n);
    return p;
}

int hk_case_tensor_add(hk_case_run *run, const char *name, int kind, uint64_t bytes, uint32_t align, int cold,
                       void *host)
{
    if (run->n_tensors == HK_CASE_MAX_TENSORS)
        return -1;
    int i = (int)run->n_tensors++;
    run->t[i] = (hk_case_tensor){name, kind, bytes, align ? align : 1, cold, -1, host, NULL};
    return i;
}

int hk_case_tensor_alias(hk_case_run *run, const char *name, int of)
{
    int i = hk_case_tensor_add(run, name, HK_CASE_OUT, run->t[of].bytes, run->t[of].align, 0, NULL);
    if (i >= 0)
        run->t[i].alias = of;
    return i;
}

hk_status hk_case_prepare(const hk_case *kcase, const hk_case_shape *shape, hk_context *ctx, int ref_mode,
                          uint64_t seed, hk_case_run *run)
{
    memset(run, 0, sizeof *run);
    run->kcase = kcase;
    run->shape = *shape;
    run->ctx = ctx;
    run->ref_mode = ref_mode;
    hk_status st = kcase->prepare(run, seed);
    for (uint32_t i = 0; st == HK_OK && i < run->n_tensors; i++)
        if (run->t[i].kind != HK_CASE_IN && !(run->t[i].got = hk_case_alloc(run->t[i].bytes)))
            st = HK_ERROR_OUT_OF_MEMORY;
    if (st != HK_OK)
        hk_case_release(run);
    return st;
}

void hk_case_release(hk_case_run *run)
{
    for (uint32_t i = 0; i < run->n_tensors; i++) {
        free(run->t[i].host);
        free(run->t[i].got);
    }
    free(run->ref);
    free(run->state);
    memset(run, 0, sizeof *run);
}

double hk_case_gate(const hk_case_run *run)
{
    return run->kcase->gate_of ? run->kcase->gate_of(run) : run->kcase->gate;
}

int hk_case_available(const hk_case *kcase, hk_context *ctx, char *why, size_t why_size)
{
    if (why_size)
        why[0] = '\0';
    return !kcase->available || kcase->available(ctx, why, why_size);
}

uint64_t hk_case_cold_bytes(const hk_case_run *run)
{
    uint64_t cold = 0;
    for (uint32_t t = 0; t < run->n_tensors; t++)
        cold += run->t[t].cold ? run->t[t].bytes : 0;
    return cold;
}

uint32_t hk_case_copies(uint64_t bytes, uint64_t footprint)
{
    uint64_t n = bytes ? (footprint + bytes - 1) / bytes : 1;
    return n < 1 ? 1 : n > 256 ? 256 : (uint32_t)n;
}

/* ---- device side ---- */

static uint64_t buffer_bytes(const hk_case_bound *bound, int i) { return hk_buffer_size(bound->buffer[i]); }

/* Every byte of the buffer set to the poison word (a tail shorter than a word by upload). */
static hk_status poison(hk_buffer *buffer)
{
    uint64_t size = hk_buffer_size(buffer), words = size / 4 * 4;
    hk_status st = words ? hk_buffer_fill(buffer, 0, words, POISON_WORD) : HK_OK;
    if (st == HK_OK && size > words) {
        uint32_t w = POISON_WORD;
        st = hk_buffer_upload(buffer, words, &w, size - words);
    }
    return st;
}

/* Byte i of a poisoned buffer. */
static uint8_t poison_byte(uint64_t i) { return (uint8_t)(POISON_WORD >> (8 * (i % 4))); }

static hk_status fail_bind(hk_case_bound *bound, hk_status st, const char *fmt, const char *name, unsigned long long a,
                           unsigned long long b)
{
    snprintf(bound->why, sizeof bound->why, fmt, name, a, b);
    return st;
}

hk_status hk_case_bind(hk_case_run *run, int placement, uint32_t copies, hk_case_bound *bound)
{
    memset(bound, 0, sizeof *bound);
    bound->copies = copies ? copies : 1;
    hk_caps caps;
    hk_context_caps(run->ctx, &caps);
    hk_status st = HK_OK;
    for (uint32_t i = 0; i < run->n_tensors && st == HK_OK; i++) {
        const hk_case_tensor *t = &run->t[i];
        if (t->alias >= 0) {
            bound->view[i] = bound->view[t->alias];
            continue;
        }
        if (t->bytes > caps.max_storage_buffer_range) {
            st = fail_bind(bound, HK_ERROR_UNSUPPORTED, "%s is %llu bytes, more than this device binds (%llu)", t->name,
                           (unsigned long long)t->bytes, (unsigned long long)caps.max_storage_buffer_range);
            break;
        }
        int at_end = placement == HK_PLACE_END || placement == HK_PLACE_END_MIN;
        uint64_t offset = placement == HK_PLACE_ALIGNED ? (t->align > 64 ? t->align : 64)
                          : placement == HK_PLACE_END    ? 0
                                                         : t->align;
        uint32_t n = t->cold ? bound->copies : 1;
        /* copies 256 bytes apart keep each copy's offset as aligned as the first */
        uint64_t stride = (t->bytes + 255) / 256 * 256;
        uint64_t size = offset + stride * (n - 1) + t->bytes + (at_end ? 0 : PAD);
        st = hk_buffer_create(run->ctx, size ? size : 4, &bound->buffer[i]);
        if (st != HK_OK) {
            snprintf(bound->why, sizeof bound->why, "%s (%llu bytes): %s", t->name, (unsigned long long)size,
                     hk_last_error());
            break;
        }
        bound->view[i] = (hk_view){bound->buffer[i], offset};
        bound->stride[i] = t->cold ? stride : 0;
        /* inputs too sit among poison, so a read past them shows in the outputs; big timed copies
         * are only uploaded */
        if (n == 1 || t->kind != HK_CASE_IN)
            st = poison(bound->buffer[i]);
        if (st == HK_OK && t->host && t->bytes)
            st = hk_buffer_upload(bound->buffer[i], offset, t->host, t->bytes);
        for (uint32_t c = 1; c < n && st == HK_OK; c++)
            st = hk_copy(run->ctx, NULL, bound->view[i], (hk_view){bound->buffer[i], offset + c * stride}, t->bytes);
        if (st != HK_OK)
            snprintf(bound->why, sizeof bound->why, "%s: %s", t->name, hk_last_error());
    }
    if (st != HK_OK)
        hk_case_unbind(bound);
    return st;
}

void hk_case_unbind(hk_case_bound *bound)
{
    for (int i = 0; i < HK_CASE_MAX_TENSORS; i++)
        hk_buffer_destroy(bound->buffer[i]);
    char why[sizeof bound->why];
    memcpy(why, bound->why, sizeof why);
    memset(bound, 0, sizeof *bound);
    memcpy(bound->why, why, sizeof why);
}

hk_status hk_case_record(const hk_case_run *run, const hk_case_bound *bound, hk_stream *stream, uint32_t copy,
                         uint32_t op)
{
    hk_view views[HK_CASE_MAX_TENSORS];
    for (uint32_t i = 0; i < run->n_tensors; i++) {
        views[i] = bound->view[i];
        views[i].offset += (uint64_t)(copy % bound->copies) * bound->stride[i];
    }
    for (uint32_t i = 0; i < run->n_tensors; i++)
        if (run->t[i].alias >= 0)
            views[i] = views[run->t[i].alias];
    return run->kcase->record(run, stream, views, op);
}

static double default_compare(const hk_case_run *run, char *detail, size_t detail_size)
{
    for (uint32_t i = 0; i < run->n_tensors; i++) {
        const hk_case_tensor *t = &run->t[i];
        if (t->kind != HK_CASE_OUT && t->kind != HK_CASE_INOUT)
            continue;
        double rel = hk_scale_rel(t->got, run->ref, run->ref_count);
        snprintf(detail, detail_size, "scale_rel=%.3e", rel);
        return rel;
    }
    snprintf(detail, detail_size, "no output to compare");
    return INFINITY;
}

/* Reads a whole buffer back; counts the bytes outside [begin, end) that are not `expect`-ed
 * (poison, or for inputs their uploaded contents) and copies [begin, end) into dst (may be NULL). */
static hk_status read_back(hk_buffer *buffer, uint64_t begin, uint64_t end, const void *input, void *dst,
                           uint64_t *bad)
{
    uint64_t size = hk_buffer_size(buffer);
    uint8_t *all = hk_case_alloc(size);
    if (!all)
        return HK_ERROR_OUT_OF_MEMORY;
    hk_status st = hk_buffer_download(buffer, 0, all, size);
    if (st == HK_OK) {
        for (uint64_t i = 0; i < size; i++) {
            if (i >= begin && i < end) {
                if (input)
                    *bad += all[i] != ((const uint8_t *)input)[i - begin];
                continue;
            }
            *bad += all[i] != poison_byte(i);
        }
        if (dst)
            memcpy(dst, all + begin, end - begin);
    }
    free(all);
    return st;
}

double hk_case_check(hk_case_run *run, const hk_case_bound *bound, uint32_t copy, char *detail, size_t detail_size)
{
    double err = INFINITY;
    return hk_case_try(run, bound, copy, &err, detail, detail_size) == HK_OK ? err : INFINITY;
}

hk_status hk_case_try(hk_case_run *run, const hk_case_bound *bound, uint32_t copy, double *err, char *detail,
                      size_t detail_size)
{
    hk_status st = HK_OK;
    *err = INFINITY;
    copy %= bound->copies;
    for (uint32_t i = 0; i < run->n_tensors && st == HK_OK; i++) {
        const hk_case_tensor *t = &run->t[i];
        if (t->alias >= 0 || t->kind == HK_CASE_IN)
            continue;
        st = poison(bound->buffer[i]);
        if (st == HK_OK && t->kind == HK_CASE_INOUT && t->bytes)
            st = hk_buffer_upload(bound->buffer[i], bound->view[i].offset, t->host, t->bytes);
    }
    if (st == HK_OK)
        st = hk_case_record(run, bound, NULL, copy, 0);
    if (st != HK_OK) {
        snprintf(detail, detail_size, "%s", hk_last_error());
        return st;
    }
    uint64_t outside = 0, inputs_changed = 0;
    for (uint32_t i = 0; i < run->n_tensors && st == HK_OK; i++) {
        hk_case_tensor *t = &run->t[i];
        if (t->alias >= 0)
            continue;
        uint64_t begin = bound->view[i].offset + copy * bound->stride[i], end = begin + t->bytes;
        if (t->kind != HK_CASE_IN)
            st = read_back(bound->buffer[i], begin, end, NULL, t->got, &outside);
        else if (bound->copies == 1 && buffer_bytes(bound, (int)i) <= VERIFY_INPUT_BYTES)
            st = read_back(bound->buffer[i], begin, end, t->host, NULL, &inputs_changed);
    }
    for (uint32_t i = 0; i < run->n_tensors && st == HK_OK; i++)
        if (run->t[i].alias >= 0)
            memcpy(run->t[i].got, run->t[run->t[i].alias].got, run->t[i].bytes);
    if (st != HK_OK) {
        snprintf(detail, detail_size, "read back: %s", hk_last_error());
        return st;
    }
    if (outside || inputs_changed) {
        snprintf(detail, detail_size, "%llu bytes written outside the outputs, %llu bytes of inputs changed",
                 (unsigned long long)outside, (unsigned long long)inputs_changed);
        return HK_OK;
    }
    *err = run->kcase->compare ? run->kcase->compare(run, detail, detail_size)
                               : default_compare(run, detail, detail_size);
    return HK_OK;
}

hk_status hk_case_fit_scratch(hk_case_run *run, hk_case_bound *bound)
{
    for (uint32_t i = 0; i < run->n_tensors && run->kcase->scratch_bytes; i++) {
        hk_case_tensor *t = &run->t[i];
        uint64_t need = run->kcase->scratch_bytes(run);
        if (t->kind != HK_CASE_SCRATCH || need <= t->bytes)
            continue;
        void *got = realloc(t->got, need);
        if (!got)
            return HK_ERROR_OUT_OF_MEMORY;
        t->got = got;
        t->bytes = need;
        hk_buffer_destroy(bound->buffer[i]);
        bound->buffer[i] = NULL;
        uint64_t offset = t->align > 64 ? t->align : 64;
        hk_status st = hk_buffer_create(run->ctx, offset + need + PAD, &bound->buffer[i]);
        if (st == HK_OK)
            st = poison(bound->buffer[i]);
        if (st != HK_OK)
            return st;
        bound->view[i] = (hk_view){bound->buffer[i], offset};
    }
    return HK_OK;
}

/* ---- the table ---- */

/* decode (cases_decode.c) */
extern const hk_case hk_case_matvec, hk_case_matvec_int8, hk_case_matvec_int8_tokens, hk_case_moe_matvec,
    hk_case_moe_matvec_int8, hk_case_moe_route, hk_case_gemv_f32, hk_case_gemv_f32_tokens, hk_case_rmsnorm,
    hk_case_quantize_q8_1, hk_case_matvec_int8_add, hk_case_matvec_int8_add_norm, hk_case_matvec_int8_glu, hk_case_matvec_int8_glu_q8_1,
    hk_case_matvec_int8_multi, hk_case_matvec_int8_f32x, hk_case_moe_matvec_int8_glu,
    hk_case_moe_matvec_int8_glu_q8_1, hk_case_moe_matvec_int8_glu_q8_1_ranked, hk_case_moe_matvec_int8_combine;
extern const hk_case hk_case_rmsnorm_q8_1;
/* attention (cases_attention.c) */
extern const hk_case hk_case_sdpa, hk_case_rope, hk_case_matvec_int8_qkv;
/* prefill (cases_prefill.c) */
extern const hk_case hk_case_mmq, hk_case_moe_expert_rows, hk_case_mmq_id, hk_case_gemm_f16;
/* elementwise (cases_elementwise.c) */
extern const hk_case hk_case_add, hk_case_swiglu;
/* logits (cases_rowwise.c) */
extern const hk_case hk_case_argmax, hk_case_softmax;
/* gathers (cases_gather.c) */
extern const hk_case hk_case_get_rows, hk_case_moe_combine;

const hk_case *const hk_cases[] = {
    &hk_case_matvec,    &hk_case_matvec_int8, &hk_case_matvec_int8_tokens, &hk_case_moe_matvec, &hk_case_moe_matvec_int8,
    &hk_case_matvec_int8_add, &hk_case_matvec_int8_add_norm, &hk_case_matvec_int8_glu, &hk_case_matvec_int8_glu_q8_1, &hk_case_matvec_int8_multi,
    &hk_case_matvec_int8_qkv,    &hk_case_matvec_int8_f32x, &hk_case_moe_matvec_int8_glu, &hk_case_moe_matvec_int8_glu_q8_1, &hk_case_moe_matvec_int8_glu_q8_1_ranked,
    &hk_case_moe_matvec_int8_combine,
    &hk_case_moe_route, &hk_case_gemv_f32,    &hk_case_gemv_f32_tokens, &hk_case_rmsnorm, &hk_case_quantize_q8_1,
    &hk_case_rmsnorm_q8_1,
    &hk_case_sdpa,      &hk_case_rope,
    &hk_case_mmq,       &hk_case_moe_expert_rows, &hk_case_mmq_id, &hk_case_gemm_f16,
    &hk_case_add,       &hk_case_swiglu,
    &hk_case_argmax,    &hk_case_softmax,
    &hk_case_get_rows,  &hk_case_moe_combine,
};
const size_t hk_case_count = sizeof hk_cases / sizeof hk_cases[0];

const hk_case *hk_case_find(const char *name)
{
    for (size_t i = 0; i < hk_case_count; i++)
        if (!strcmp(hk_cases[i]->name, name))
            return hk_cases[i];
    return NULL;
}
