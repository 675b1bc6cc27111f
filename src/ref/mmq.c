/* mmq.c — references of the prefill int8 GEMM (see hk_ref.h): dequantize both operands to f32
 * with the block decoders of formats.c, contract in double. Nothing here knows the kernel's tiling,
 * integer sums or scale order. */
#include "hk_ref.h"

#include <stdlib.h>
#include <string.h>

/* Row r of n GGUF rows of k values, dequantized into out[k]; scratch holds a row's bytes (GGUF
 * rows are only 2-byte aligned, the block structs want more: the row is copied out first). */
static void dequant_row(int type, const void *w, size_t r, size_t k, float *out, void *scratch)
{
    const size_t bytes = hk_ref_row_bytes(type, k);
    memcpy(scratch, (const unsigned char *)w + r * bytes, bytes);
    switch (type) {
    case HK_REF_Q8_0: hk_dequant_row_q8_0(scratch, out, k); break;
    case HK_REF_Q4_K: hk_dequant_row_q4_k(scratch, out, k); break;
    case HK_REF_Q5_K: hk_dequant_row_q5_k(scratch, out, k); break;
    case HK_REF_Q6_K: hk_dequant_row_q6_k(scratch, out, k); break;
    default: memset(out, 0, k * sizeof *out); break;
    }
}

static double dot(const float *a, const float *b, size_t k)
{
    double s = 0.0;
    for (size_t i = 0; i < k; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

int hk_ref_mmq(int type, const void *w, const hk_block_q8_1 *x, float *out, size_t m, size_t n, size_t k)
{
    float *xf = malloc((m * k + 1) * sizeof *xf), *wf = malloc((k + 1) * sizeof *wf);
    void *scratch = malloc(hk_ref_row_bytes(type, k) + 1);
    int ok = xf && wf && scratch;
    for (size_t i = 0; ok && i < m; i++)
        hk_dequant_row_q8_1(x + i * (k / 32), xf + i * k, k);
    for (size_t j = 0; ok && j < n; j++) {
        dequant_row(type, w, j, k, wf, scratch);
        for (size_t i = 0; i < m; i++)
            out[i * n + j] = (float)dot(xf + i * k, wf, k);
    }
    free(xf);
    free(wf);
    free(scratch);
    return ok;
}

void hk_ref_moe_expert_rows(const uint32_t *ids, size_t n_slots, size_t n_experts, uint32_t *offsets, uint32_t *slots,
                            uint32_t *dropped)
{
    uint32_t total = 0, drop = 0;
    for (size_t e = 0; e < n_experts; e++) {
        offsets[e] = total;
        for (size_t s = 0; s < n_slots; s++)
            if (ids[s] == e)
                slots[total++] = (uint32_t)s;
    }
    offsets[n_experts] = total;
    for (size_t s = 0; s < n_slots; s++)
        drop += ids[s] >= n_experts;
    for (size_t s = total; s < n_slots; s++)
        slots[s] = 0xFFFFFFFFu;
    *dropped = drop;
}

int hk_ref_mmq_id(int type, const void *w, const hk_block_q8_1 *x, const uint32_t *offsets, const uint32_t *slots,
                  float *out, size_t n_experts, size_t n, size_t k, size_t n_slots, size_t slots_per_x_row)
{
    const size_t expert_bytes = hk_ref_row_bytes(type, k) * n;
    float *xf = malloc((k + 1) * sizeof *xf), *wf = malloc((n * k + 1) * sizeof *wf);
    void *scratch = malloc(hk_ref_row_bytes(type, k) + 1);
    int ok = xf && wf && scratch;
    for (size_t e = 0; ok && e < n_experts; e++) {
        size_t begin = offsets[e] < n_slots ? offsets[e] : n_slots;
        size_t end = offsets[e + 1] < n_slots ? offsets[e + 1] : n_slots;
        if (end <= begin)
            continue;
        const unsigned char *we = (const unsigned char *)w + e * expert_bytes;
        for (size_t j = 0; j < n; j++)
            dequant_row(type, we, j, k, wf + j * k, scratch);
        for (size_t i = begin; i < end; i++) {
            const size_t s = slots[i];
            if (s >= n_slots)
                continue;
            hk_dequant_row_q8_1(x + s / slots_per_x_row * (k / 32), xf, k);
            for (size_t j = 0; j < n; j++)
                out[s * n + j] = (float)dot(xf, wf + j * k, k);
        }
    }
    free(xf);
    free(wf);
    free(scratch);
    return ok;
}
