/* gemm.c — reference of the prefill GEMM (see hk_ref.h): dequantize each weight row, then dot it
 * with every activation row in double. */
#include "hk_ref.h"

#include <stdlib.h>
#include <string.h>

/* Dequantizes one GGUF row of k values (copied out first: raw GGUF bytes need no alignment). */
static int dequant_row(int type, const unsigned char *row, float *y, size_t k)
{
    size_t bytes = hk_ref_row_bytes(type, k);
    void *blocks = malloc(bytes ? bytes : 1);
    if (!blocks)
        return 0;
    memcpy(blocks, row, bytes);
    switch (type) {
    case HK_REF_F16:
        hk_dequant_row_f16(blocks, y, k);
        break;
    case HK_REF_Q8_0:
        hk_dequant_row_q8_0(blocks, y, k);
        break;
    case HK_REF_Q4_K:
        hk_dequant_row_q4_k(blocks, y, k);
        break;
    case HK_REF_Q5_K:
        hk_dequant_row_q5_k(blocks, y, k);
        break;
    case HK_REF_Q6_K:
        hk_dequant_row_q6_k(blocks, y, k);
        break;
    }
    free(blocks);
    return 1;
}

static float round_f16(float v) { return hk_f16_to_f32(hk_f32_to_f16(v)); }

static int gemm(int type, const void *w, const float *x, float *out, size_t m, size_t n, size_t k, int f16)
{
    const size_t row_bytes = hk_ref_row_bytes(type, k);
    if (!row_bytes || (type != HK_REF_Q8_0 && type != HK_REF_Q4_K && type != HK_REF_Q5_K && type != HK_REF_Q6_K &&
                       type != HK_REF_F16)) {
        memset(out, 0, m * n * sizeof *out);
        return 1;
    }
    float *wr = malloc(k * sizeof *wr), *xr = f16 ? malloc(m * k * sizeof *xr) : NULL;
    if (!wr || (f16 && !xr)) {
        free(wr);
        free(xr);
        return 0;
    }
    if (f16)
        for (size_t i = 0; i < m * k; i++)
            xr[i] = round_f16(x[i]);
    const float *xs = f16 ? xr : x;
    int ok = 1;
    for (size_t j = 0; j < n && ok; j++) {
        ok = dequant_row(type, (const unsigned char *)w + j * row_bytes, wr, k);
        if (f16)
            for (size_t l = 0; l < k; l++)
                wr[l] = round_f16(wr[l]);
        for (size_t i = 0; i < m && ok; i++) {
            double s = 0.0;
            for (size_t l = 0; l < k; l++)
                s += (double)xs[i * k + l] * (double)wr[l];
            out[i * n + j] = (float)s;
        }
    }
    free(wr);
    free(xr);
    return ok;
}

int hk_ref_gemm(int type, const void *w, const float *x, float *out, size_t m, size_t n, size_t k)
{
    return gemm(type, w, x, out, m, n, k, 0);
}

int hk_ref_gemm_f16(int type, const void *w, const float *x, float *out, size_t m, size_t n, size_t k)
{
    return gemm(type, w, x, out, m, n, k, 1);
}
