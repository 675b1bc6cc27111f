/* kernels.c — scalar reference kernels (see hk_ref.h). The summation order here is part of
 * the definition: matvec sums each block in f32 in index order, then adds the block sums in
 * block order; gemv and rmsnorm sum in index order in f32. */
#include "hk_ref.h"

#include <math.h>
#include <string.h>

/* Dequantize block b of a row into out[0..block_values). The block is copied out first, so
 * w need not be aligned for the block structs (rows of raw GGUF bytes are fine). */
static size_t dequant_block(int type, const unsigned char *row, size_t b, float *out)
{
    switch (type) {
    case HK_REF_Q8_0: {
        hk_block_q8_0 blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        hk_dequant_row_q8_0(&blk, out, HK_QK8_0);
        return HK_QK8_0;
    }
    case HK_REF_Q4_K: {
        hk_block_q4_k blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        hk_dequant_row_q4_k(&blk, out, HK_QK_K);
        return HK_QK_K;
    }
    case HK_REF_Q6_K: {
        hk_block_q6_k blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        hk_dequant_row_q6_k(&blk, out, HK_QK_K);
        return HK_QK_K;
    }
    default:
        return 0;
    }
}

void hk_ref_matvec(int type, const void *w, const float *x, float *y, size_t rows, size_t k)
{
    const size_t row_bytes = hk_ref_row_bytes(type, k);
    if (row_bytes == 0) {
        /* unknown type, k off the block size, or k == 0: nothing to sum */
        for (size_t r = 0; r < rows; r++)
            y[r] = 0.0f;
        return;
    }
    const size_t qk = type == HK_REF_Q8_0 ? HK_QK8_0 : HK_QK_K;
    const size_t nb = k / qk;

    for (size_t r = 0; r < rows; r++) {
        const unsigned char *row = (const unsigned char *)w + r * row_bytes;
        float sum = 0.0f;
        for (size_t b = 0; b < nb; b++) {
            float buf[HK_QK_K];
            const size_t n = dequant_block(type, row, b, buf);
            const float *xb = x + b * qk;
            float bsum = 0.0f;
            for (size_t i = 0; i < n; i++)
                bsum += buf[i] * xb[i];
            sum += bsum;
        }
        y[r] = sum;
    }
}

void hk_ref_gemv_f32(const float *w, const float *x, float *y, size_t rows, size_t k)
{
    for (size_t r = 0; r < rows; r++) {
        const float *wr = w + r * k;
        float sum = 0.0f;
        for (size_t i = 0; i < k; i++)
            sum += wr[i] * x[i];
        y[r] = sum;
    }
}

void hk_ref_rmsnorm(const float *x, const float *weight, float *y, size_t rows, size_t n, float eps)
{
    if (n == 0)
        return;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float sum = 0.0f;
        for (size_t i = 0; i < n; i++)
            sum += xr[i] * xr[i];
        const float scale = 1.0f / sqrtf(sum / (float)n + eps);
        for (size_t i = 0; i < n; i++)
            yr[i] = xr[i] * scale * weight[i];
    }
}
