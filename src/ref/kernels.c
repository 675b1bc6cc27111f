/* kernels.c — scalar reference kernels (see hk_ref.h): the plain math, each value dequantized as
 * the GGUF dequantizers do (f32), products and sums in double, the result rounded to f32 once.
 * No summation order of a kernel is shared: the gates measure the kernels' own rounding (except
 * hk_ref_moe_combine, whose f32 order is the kernel's contract). */
#include "hk_ref.h"

#include <math.h>
#include <string.h>

/* Dequantize block b of a row into out[0..block_values). The block is copied out first, so
 * w need not be aligned for the block structs (rows of raw GGUF bytes are fine). F16's block is
 * one value. */
static size_t dequant_block(int type, const unsigned char *row, size_t b, float *out)
{
    switch (type) {
    case HK_REF_F16: {
        uint16_t h;
        memcpy(&h, row + b * sizeof h, sizeof h);
        hk_dequant_row_f16(&h, out, 1);
        return 1;
    }
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
    case HK_REF_Q5_K: {
        hk_block_q5_k blk;
        memcpy(&blk, row + b * sizeof blk, sizeof blk);
        hk_dequant_row_q5_k(&blk, out, HK_QK_K);
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

/* An unknown type, k off the block size, or k == 0 (row_bytes 0): nothing to sum, y = 0. */
static int zero_if_no_blocks(size_t row_bytes, float *y, size_t rows)
{
    if (row_bytes)
        return 0;
    for (size_t r = 0; r < rows; r++)
        y[r] = 0.0f;
    return 1;
}

void hk_ref_matvec(int type, const void *w, const float *x, float *y, size_t rows, size_t k)
{
    const size_t row_bytes = hk_ref_row_bytes(type, k);
    if (zero_if_no_blocks(row_bytes, y, rows))
        return;
    const size_t qk = hk_ref_type(type)->block_values;
    const size_t nb = k / qk;

    for (size_t r = 0; r < rows; r++) {
        const unsigned char *row = (const unsigned char *)w + r * row_bytes;
        double sum = 0.0;
        for (size_t b = 0; b < nb; b++) {
            float buf[HK_QK_K];
            const size_t n = dequant_block(type, row, b, buf);
            const float *xb = x + b * qk;
            for (size_t i = 0; i < n; i++)
                sum += (double)buf[i] * (double)xb[i];
        }
        y[r] = (float)sum;
    }
}

void hk_ref_gemv_f32(const float *w, const float *x, float *y, size_t rows, size_t k)
{
    for (size_t r = 0; r < rows; r++) {
        const float *wr = w + r * k;
        double sum = 0.0;
        for (size_t i = 0; i < k; i++)
            sum += (double)wr[i] * (double)x[i];
        y[r] = (float)sum;
    }
}

void hk_ref_rmsnorm(const float *x, const float *weight, float *y, size_t rows, size_t n, float eps)
{
    if (n == 0)
        return;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double sum = 0.0;
        for (size_t i = 0; i < n; i++)
            sum += (double)xr[i] * (double)xr[i];
        const double scale = 1.0 / sqrt(sum / (double)n + (double)eps);
        for (size_t i = 0; i < n; i++)
            yr[i] = (float)((double)xr[i] * scale * (double)weight[i]);
    }
}

/* In double, each step rounded to f32 as the contract says: the product of two floats is exact in
 * double, and a double sum of two floats rounded to f32 is their correctly rounded f32 sum (53 >=
 * 2 * 24 + 2 bits: rounding twice is harmless), so this is the f32 arithmetic without relying on
 * the compiler's contraction or evaluation settings. */
void hk_ref_add(const float *a, const float *b, float *y, size_t n, float alpha)
{
    for (size_t i = 0; i < n; i++) {
        const float p = (float)((double)alpha * (double)b[i]);
        y[i] = (float)((double)a[i] + (double)p);
    }
}

void hk_ref_glu(const float *gate, const float *up, float *y, size_t rows, size_t n, size_t in_stride, int gelu)
{
    const double pi = 3.14159265358979323846;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < n; i++) {
            const double x = gate[r * in_stride + i], u = up[r * in_stride + i];
            const double act = gelu ? 0.5 * x * (1.0 + tanh(sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)))
                                    : x / (1.0 + exp(-x));
            y[r * n + i] = (float)(act * u);
        }
}

/* The plain math, in double: nothing of the Q8_1 block but d and q is read (its s is another
 * producer's rounding of d*sum(q), and may be wrong or overflowed). */
void hk_ref_matvec_q8_1(int type, const void *w, const hk_block_q8_1 *x, float *y, size_t rows, size_t k)
{
    const size_t row_bytes = hk_ref_row_bytes(type, k);
    if (zero_if_no_blocks(row_bytes, y, rows))
        return;
    const size_t qk = type == HK_REF_Q8_0 ? HK_QK8_0 : HK_QK_K;
    for (size_t r = 0; r < rows; r++) {
        const unsigned char *row = (const unsigned char *)w + r * row_bytes;
        double sum = 0.0;
        for (size_t b = 0; b < k / qk; b++) {
            float wv[HK_QK_K], xv[HK_QK_K];
            const size_t n = dequant_block(type, row, b, wv);
            hk_dequant_row_q8_1(x + b * qk / HK_QK8_0, xv, n);
            for (size_t i = 0; i < n; i++)
                sum += (double)wv[i] * (double)xv[i];
        }
        y[r] = (float)sum;
    }
}

/* Expert `id`'s rows, or NULL for an id out of range (whose outputs are zero). */
static const unsigned char *expert_rows(int type, const void *w, uint32_t id, size_t n_experts, size_t n, size_t k)
{
    return id < n_experts ? (const unsigned char *)w + (size_t)id * n * hk_ref_row_bytes(type, k) : NULL;
}

void hk_ref_moe_matvec(int type, const void *w, const float *x, int x_per_slot, const uint32_t *ids, float *y,
                       size_t n_experts, size_t n, size_t k, size_t slots)
{
    for (size_t s = 0; s < slots; s++) {
        const unsigned char *we = expert_rows(type, w, ids[s], n_experts, n, k);
        if (we)
            hk_ref_matvec(type, we, x + (x_per_slot ? s * k : 0), y + s * n, n, k);
        else
            memset(y + s * n, 0, n * sizeof *y);
    }
}

void hk_ref_moe_matvec_q8_1(int type, const void *w, const hk_block_q8_1 *x, int x_per_slot, const uint32_t *ids,
                            float *y, size_t n_experts, size_t n, size_t k, size_t slots)
{
    for (size_t s = 0; s < slots; s++) {
        const unsigned char *we = expert_rows(type, w, ids[s], n_experts, n, k);
        if (we)
            hk_ref_matvec_q8_1(type, we, x + (x_per_slot ? s * k / 32 : 0), y + s * n, n, k);
        else
            memset(y + s * n, 0, n * sizeof *y);
    }
}

void hk_ref_moe_route(const float *logits, size_t tokens, size_t n_experts, size_t top_k, int renormalize,
                      uint32_t *ids, float *weights)
{
    for (size_t t = 0; t < tokens; t++) {
        const float *l = logits + t * n_experts;
        float m = -INFINITY;
        for (size_t i = 0; i < n_experts; i++)
            m = fmaxf(m, l[i]);
        float denom = 0.0f;
        for (size_t i = 0; i < n_experts; i++)
            denom += isnan(l[i]) ? 0.0f : expf(l[i] - m);
        uint32_t *id = ids + t * top_k;
        float *w = weights + t * top_k, total = 0.0f;
        for (size_t r = 0; r < top_k; r++) {
            uint32_t best = UINT32_MAX;
            for (size_t i = 0; i < n_experts; i++) {
                int taken = 0;
                for (size_t j = 0; j < r; j++)
                    taken |= id[j] == i;
                if (taken || isnan(l[i]))
                    continue;
                if (best == UINT32_MAX || l[i] > l[best]) /* ties keep the lower index */
                    best = (uint32_t)i;
            }
            id[r] = best;
            w[r] = best == UINT32_MAX ? 0.0f : expf(l[best] - m) / denom;
            total += w[r];
        }
        if (renormalize && total > 0.0f)
            for (size_t r = 0; r < top_k; r++)
                w[r] /= total;
    }
}

void hk_ref_argmax(const float *x, uint32_t *ids, size_t rows, size_t n)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        uint32_t best = UINT32_MAX;
        for (size_t i = 0; i < n; i++)
            if (!isnan(xr[i]) && (best == UINT32_MAX || xr[i] > xr[best])) /* ties keep the lower index */
                best = (uint32_t)i;
        ids[r] = best;
    }
}

void hk_ref_softmax(const float *x, float *y, size_t rows, size_t n, float temperature)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double m = -INFINITY;
        int nan = 0;
        for (size_t i = 0; i < n; i++) {
            nan |= isnan(xr[i]);
            if (xr[i] > m)
                m = xr[i];
        }
        if (nan) {
            for (size_t i = 0; i < n; i++)
                yr[i] = NAN;
        } else if (isinf(m)) {
            size_t count = 0;
            for (size_t i = 0; i < n; i++)
                count += xr[i] == m;
            for (size_t i = 0; i < n; i++)
                yr[i] = xr[i] == m ? (float)(1.0 / (double)count) : 0.0f;
        } else {
            double sum = 0.0;
            for (size_t i = 0; i < n; i++)
                sum += exp(((double)xr[i] - m) / (double)temperature);
            for (size_t i = 0; i < n; i++)
                yr[i] = (float)(exp(((double)xr[i] - m) / (double)temperature) / sum);
        }
    }
}

void hk_ref_get_rows(int type, const void *w, const uint32_t *ids, float *y, size_t n_ids, size_t rows, size_t k)
{
    size_t row_bytes = hk_ref_row_bytes(type, k);
    int known = type == HK_REF_F32 || type == HK_REF_F16 || type == HK_REF_Q8_0 || type == HK_REF_Q4_K ||
                type == HK_REF_Q5_K || type == HK_REF_Q6_K;
    for (size_t i = 0; i < n_ids; i++) {
        float *out = y + i * k;
        if (!known || !row_bytes || ids[i] >= rows) {
            memset(out, 0, k * sizeof *out);
            continue;
        }
        const unsigned char *row = (const unsigned char *)w + ids[i] * row_bytes;
        if (type == HK_REF_F32) {
            memcpy(out, row, k * sizeof *out);
        } else {
            for (size_t b = 0, v = 0; v < k; b++)
                v += dequant_block(type, row, b, out + v);
        }
    }
}

void hk_ref_moe_combine(const float *x, const float *weights, const float *residual, float *y, size_t tokens,
                        size_t top_k, size_t n)
{
    for (size_t t = 0; t < tokens; t++)
        for (size_t i = 0; i < n; i++) {
            const float *w = weights + t * top_k, *xs = x + t * top_k * n + i;
            /* one f32 operation per statement: ISO C contracts nothing into an FMA across them */
            float acc = w[0] * xs[0];
            for (size_t j = 1; j < top_k; j++) {
                float p = w[j] * xs[j * n];
                acc = acc + p;
            }
            if (residual) {
                float r = residual[t * n + i];
                acc = acc + r;
            }
            y[t * n + i] = acc;
        }
}
