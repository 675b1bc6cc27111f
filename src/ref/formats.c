/* formats.c — GGUF block formats: dequantizers, reference quantizers, row sizes.
 * Dequantizers follow llama.cpp's ggml-quants.c (dequantize_row_*) operation for operation,
 * so their f32 results are the definition every GPU kernel is checked against.
 * Quantizers produce valid GGUF blocks for test data; Q8_0/Q8_1 match llama.cpp's
 * quantize_row_q8_*_ref exactly, Q4_K/Q5_K/Q6_K are simpler than llama.cpp's (no search). */
#include "hk_ref.h"

#include <math.h>
#include <string.h>

/* ---- Q4_K scale/min packing ------------------------------------------------------------------ */

/* Same as llama.cpp get_scale_min_k4. Sub-blocks 0..3 keep their 6-bit scale/min in the low
 * six bits of scales[j] / scales[j+4]; sub-blocks 4..7 keep the low four bits in a nibble of
 * scales[j+4] and the high two bits in the top two bits of scales[j-4] / scales[j]. */
void hk_q4k_scale_min(const uint8_t scales[12], int j, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = (uint8_t)(scales[j] & 63);
        *m = (uint8_t)(scales[j + 4] & 63);
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
        *m = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

/* Exact inverse of hk_q4k_scale_min: ls[j], lm[j] in 0..63. */
static void q4k_pack_scales(const uint8_t ls[8], const uint8_t lm[8], uint8_t scales[12])
{
    for (int j = 0; j < 12; j++)
        scales[j] = 0;
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            scales[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* ---- dequantize ------------------------------------------------------------------------------ */

void hk_dequant_row_f16(const uint16_t *x, float *y, size_t k)
{
    for (size_t i = 0; i < k; i++)
        y[i] = hk_f16_to_f32(x[i]);
}

void hk_dequant_row_q8_0(const hk_block_q8_0 *x, float *y, size_t k)
{
    const size_t nb = k / HK_QK8_0;
    for (size_t i = 0; i < nb; i++) {
        const float d = hk_f16_to_f32(x[i].d);
        for (size_t j = 0; j < HK_QK8_0; j++)
            y[i * HK_QK8_0 + j] = (float)x[i].qs[j] * d;
    }
}

void hk_dequant_row_q8_1(const hk_block_q8_1 *x, float *y, size_t k)
{
    const size_t nb = k / HK_QK8_0;
    for (size_t i = 0; i < nb; i++) {
        const float d = hk_f16_to_f32(x[i].d);
        for (size_t j = 0; j < HK_QK8_0; j++)
            y[i * HK_QK8_0 + j] = (float)x[i].qs[j] * d;
    }
}

/* One Q4_K or Q5_K super-block, as ggml's dequantize_row_q4_K / _q5_K: 8 sub-blocks of 32 with
 * 6-bit scales and mins; a Q5_K value 32b+l adds 16 to its quant where bit b of qh[l] is set (qh
 * NULL: Q4_K). */
static void dequant_k4(const uint8_t *scales, const uint8_t *ql, const uint8_t *qh, uint16_t d16, uint16_t dmin16,
                       float *y)
{
    const float d = hk_f16_to_f32(d16);
    const float min = hk_f16_to_f32(dmin16);
    unsigned u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2) {
        uint8_t sc, m;
        hk_q4k_scale_min(scales, is + 0, &sc, &m);
        const float d1 = d * sc;
        const float m1 = min * m;
        hk_q4k_scale_min(scales, is + 1, &sc, &m);
        const float d2 = d * sc;
        const float m2 = min * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)((ql[l] & 0xF) + (qh && (qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)((ql[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0)) - m2;
        ql += 32;
        u1 <<= 2;
        u2 <<= 2;
    }
}

void hk_dequant_row_q4_k(const hk_block_q4_k *x, float *y, size_t k)
{
    for (size_t i = 0; i < k / HK_QK_K; i++)
        dequant_k4(x[i].scales, x[i].qs, NULL, x[i].d, x[i].dmin, y + i * HK_QK_K);
}

void hk_dequant_row_q5_k(const hk_block_q5_k *x, float *y, size_t k)
{
    for (size_t i = 0; i < k / HK_QK_K; i++)
        dequant_k4(x[i].scales, x[i].qs, x[i].qh, x[i].d, x[i].dmin, y + i * HK_QK_K);
}

void hk_dequant_row_q6_k(const hk_block_q6_k *x, float *y, size_t k)
{
    const size_t nb = k / HK_QK_K;
    for (size_t i = 0; i < nb; i++) {
        const float d = hk_f16_to_f32(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n = 0; n < HK_QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = (int)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = (int)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * (float)q1;
                y[l + 32] = d * sc[is + 2] * (float)q2;
                y[l + 64] = d * sc[is + 4] * (float)q3;
                y[l + 96] = d * sc[is + 6] * (float)q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

/* ---- quantize -------------------------------------------------------------------------------- */

/* One 32-value block as llama.cpp's quantize_row_q8_0_ref / q8_1_ref do it (d = amax/127 in f32,
 * then f16; q = roundf(x * (1/d))), except at the two ends of the f16 d's range, where ggml's result
 * would be undefined (1/d overflows, a NaN cast to int) or silently finite: amax <=
 * HK_Q8_1_AMAX_ZERO (d rounds to f16 0) gives d = 0 and every q 0; amax >= HK_Q8_1_AMAX_NAN
 * (d rounds to f16 inf), or a NaN or inf in the block, gives d = NaN (f16 0x7E00) and every q 0.
 * Returns the f32 d (NaN for the NaN block) and sum(q). */
static float q8_block(const float *xb, uint16_t *d16, int8_t qs[32], int *sum)
{
    float amax = 0.0f;
    int finite = 1;
    for (int j = 0; j < 32; j++) {
        finite &= isfinite(xb[j]) != 0;
        amax = fmaxf(amax, fabsf(xb[j])); /* fmaxf drops a NaN: `finite` catches it */
    }
    *sum = 0;
    if (!finite || amax >= HK_Q8_1_AMAX_NAN || amax <= HK_Q8_1_AMAX_ZERO) {
        const int zero = finite && amax <= HK_Q8_1_AMAX_ZERO;
        for (int j = 0; j < 32; j++)
            qs[j] = 0;
        *d16 = zero ? 0x0000 : 0x7E00;
        return zero ? 0.0f : NAN;
    }
    const float d = amax / 127.0f;
    const float id = 1.0f / d; /* finite: d > 2^-25 */
    *d16 = hk_f32_to_f16(d);
    for (int j = 0; j < 32; j++) {
        qs[j] = (int8_t)roundf(xb[j] * id); /* |x * id| <= 127 plus rounding */
        *sum += qs[j];
    }
    return d;
}

void hk_quant_row_q8_0(const float *x, hk_block_q8_0 *y, size_t k)
{
    for (size_t i = 0; i < k / HK_QK8_0; i++) {
        int sum;
        q8_block(x + i * HK_QK8_0, &y[i].d, y[i].qs, &sum);
    }
}

/* s = f16(d * sum(q)) with the f32 d, as ggml (it may overflow to inf for blocks with amax above
 * about 2047; no kernel here reads it); the NaN block has s = NaN, the zero block s = 0. */
void hk_quant_row_q8_1(const float *x, hk_block_q8_1 *y, size_t k)
{
    for (size_t i = 0; i < k / HK_QK8_0; i++) {
        int sum;
        const float d = q8_block(x + i * HK_QK8_0, &y[i].d, y[i].qs, &sum);
        y[i].s = hk_f32_to_f16((float)sum * d);
    }
}

/* round(v) clamped to lo..hi; the clamp happens in float first so the conversion to int is
 * always in range, however extreme v is. */
static int round_clamp(float v, int lo, int hi)
{
    v = fmaxf(v, (float)lo);
    v = fminf(v, (float)hi);
    return (int)lroundf(v);
}

/* Smallest f16 >= v (v >= 0, finite): v / f16(v) <= 1, so sub-block scales quantized against
 * it never need clamping, even where the f16 is subnormal and coarse (tiny data). */
static uint16_t f16_round_up(float v)
{
    uint16_t h = hk_f32_to_f16(v);
    if (hk_f16_to_f32(h) < v && h < 0x7C00u)
        h++;
    return h;
}

/* Simple Q4_K and Q5_K: per 32-value sub-block, min = min(0, min x), scale = (max - min)/nmax
 * (nmax 15 or 31); the sub-block scales and mins are quantized to 6 bits against d = max scale/63
 * and dmin = max min/63 (both rounded up to f16 first); the quants L[256] are then chosen against
 * the quantized effective scale/min, so the block decodes consistently. */
static void kquant_asym_block(const float *xb, int nmax, uint16_t *d16, uint16_t *dmin16, uint8_t scales[12],
                              uint8_t L[HK_QK_K])
{
    float scale[8], mins[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        float lo = xb[32 * j], hi = xb[32 * j];
        for (int l = 1; l < 32; l++) {
            lo = fminf(lo, xb[32 * j + l]);
            hi = fmaxf(hi, xb[32 * j + l]);
        }
        if (lo > 0.0f)
            lo = 0.0f;
        scale[j] = (hi - lo) / (float)nmax;
        mins[j] = -lo; /* >= 0: decode is d*sc*q - dmin*m */
        max_scale = fmaxf(max_scale, scale[j]);
        max_min = fmaxf(max_min, mins[j]);
    }

    *d16 = f16_round_up(max_scale / 63.0f);
    *dmin16 = f16_round_up(max_min / 63.0f);
    const float d = hk_f16_to_f32(*d16);
    const float dmin = hk_f16_to_f32(*dmin16);

    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        int s = d > 0.0f ? round_clamp(scale[j] / d, 0, 63) : 0;
        /* a sub-block with any spread keeps a nonzero scale, else it would decode flat */
        if (s == 0 && scale[j] > 0.0f && d > 0.0f)
            s = 1;
        ls[j] = (uint8_t)s;
        lm[j] = (uint8_t)(dmin > 0.0f ? round_clamp(mins[j] / dmin, 0, 63) : 0);
    }
    q4k_pack_scales(ls, lm, scales);

    for (int j = 0; j < 8; j++) {
        const float s_eff = d * ls[j];
        const float m_eff = dmin * lm[j];
        for (int l = 0; l < 32; l++) {
            int q = 0;
            if (s_eff > 0.0f)
                q = round_clamp((xb[32 * j + l] + m_eff) / s_eff, 0, nmax);
            L[32 * j + l] = (uint8_t)q;
        }
    }
}

void hk_quant_row_q4_k(const float *x, hk_block_q4_k *y, size_t k)
{
    for (size_t i = 0; i < k / HK_QK_K; i++) {
        uint8_t L[HK_QK_K];
        kquant_asym_block(x + i * HK_QK_K, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        /* value 64c+l (l < 32) is the low nibble of qs[32c+l], value 64c+32+l the high one */
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

void hk_quant_row_q5_k(const float *x, hk_block_q5_k *y, size_t k)
{
    for (size_t i = 0; i < k / HK_QK_K; i++) {
        uint8_t L[HK_QK_K];
        kquant_asym_block(x + i * HK_QK_K, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
        /* the low 4 bits as Q4_K's nibbles; the 5th bit of value 32b+l is bit b of qh[l] */
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * c + l] = (uint8_t)((L[64 * c + l] & 0xF) | ((L[64 * c + 32 + l] & 0xF) << 4));
        for (int b = 0; b < 8; b++)
            for (int l = 0; l < 32; l++)
                y[i].qh[l] |= (uint8_t)((L[32 * b + l] >> 4) << b);
    }
}

/* Simple Q6_K: per 16-value sub-block, |scale| = amax/32 with the sign chosen so the value of
 * largest magnitude maps to q = -32 (as llama.cpp does). If the other side comes within 31/32
 * of that magnitude it would need q = 32, so the scale is widened just enough (or the sign
 * flipped, whichever is smaller) for every q to fit in -32..31. The 16 scales are quantized
 * to int8 against d = max|scale|/127 (rounded up to f16 first);
 * q = clamp(round(x / (d*sc)), -32, 31) + 32. */
void hk_quant_row_q6_k(const float *x, hk_block_q6_k *y, size_t k)
{
    const size_t nb = k / HK_QK_K;
    for (size_t i = 0; i < nb; i++) {
        const float *xb = x + i * HK_QK_K;
        float scale[16];
        float max_abs_scale = 0.0f;
        for (int j = 0; j < 16; j++) {
            float pos = 0.0f, neg = 0.0f; /* largest positive value, largest |negative| */
            for (int l = 0; l < 16; l++) {
                pos = fmaxf(pos, xb[16 * j + l]);
                neg = fmaxf(neg, -xb[16 * j + l]);
            }
            /* scale > 0 sends negatives towards -32; scale < 0 sends positives there */
            const float s_neg_low = fmaxf(neg / 32.0f, pos / 31.0f);
            const float s_pos_low = fmaxf(pos / 32.0f, neg / 31.0f);
            scale[j] = s_neg_low <= s_pos_low ? s_neg_low : -s_pos_low;
            max_abs_scale = fmaxf(max_abs_scale, fabsf(scale[j]));
        }

        y[i].d = f16_round_up(max_abs_scale / 127.0f);
        const float d = hk_f16_to_f32(y[i].d);

        for (int j = 0; j < 16; j++) {
            int s = d > 0.0f ? round_clamp(scale[j] / d, -128, 127) : 0;
            if (s == 0 && scale[j] != 0.0f && d > 0.0f)
                s = scale[j] > 0.0f ? 1 : -1;
            y[i].scales[j] = (int8_t)s;
        }

        uint8_t L[HK_QK_K]; /* biased quants, 0..63 */
        for (int j = 0; j < 16; j++) {
            const float s_eff = d * y[i].scales[j];
            for (int l = 0; l < 16; l++) {
                int q = 0;
                if (s_eff != 0.0f)
                    q = round_clamp(xb[16 * j + l] / s_eff, -32, 31);
                L[16 * j + l] = (uint8_t)(q + 32);
            }
        }

        /* inverse of hk_dequant_row_q6_k: in each 128-value half n, position l < 32 holds
         * values l, l+32, l+64, l+96 in ql[l] lo, ql[l+32] lo, ql[l] hi, ql[l+32] hi and
         * the high two bits in qh[l] bits 0-1, 2-3, 4-5, 6-7. */
        for (int n = 0; n < 2; n++) {
            const uint8_t *Lh = L + 128 * n;
            uint8_t *ql = y[i].ql + 64 * n;
            uint8_t *qh = y[i].qh + 32 * n;
            for (int l = 0; l < 32; l++) {
                const uint8_t q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
                ql[l] = (uint8_t)((q1 & 0xF) | ((q3 & 0xF) << 4));
                ql[l + 32] = (uint8_t)((q2 & 0xF) | ((q4 & 0xF) << 4));
                qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
            }
        }
    }
}
