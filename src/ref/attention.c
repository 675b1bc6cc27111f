/* attention.c — references for the attention family: scaled dot-product attention as a two-pass
 * softmax in double over packed K/V, and rotary position embedding with angles in double. */
#include "hk_ref.h"

#include <math.h>
#include <stdlib.h>

void hk_ref_sdpa(const float *q, const float *k, const float *v, float *out, size_t n_q, size_t n_heads,
                 size_t n_kv_heads, size_t seq_k, size_t head_dim, float scale, int causal)
{
    const size_t group = n_heads / n_kv_heads;
    double *logit = malloc((seq_k ? seq_k : 1) * sizeof *logit);
    if (!logit)
        return;
    for (size_t i = 0; i < n_q; i++)
        for (size_t h = 0; h < n_heads; h++) {
            const float *qi = q + (i * n_heads + h) * head_dim;
            const float *kh = k + (h / group) * seq_k * head_dim, *vh = v + (h / group) * seq_k * head_dim;
            float *o = out + (i * n_heads + h) * head_dim;
            /* causal: the queries are the last n_q positions of the seq_k keys */
            size_t visible = causal ? seq_k - n_q + i + 1 : seq_k;
            double max = -INFINITY;
            for (size_t j = 0; j < visible; j++) {
                double dot = 0.0;
                for (size_t c = 0; c < head_dim; c++)
                    dot += (double)qi[c] * (double)kh[j * head_dim + c];
                logit[j] = (double)scale * dot;
                if (logit[j] > max)
                    max = logit[j];
            }
            double denom = 0.0;
            for (size_t j = 0; j < visible; j++)
                denom += exp(logit[j] - max);
            for (size_t c = 0; c < head_dim; c++) {
                double acc = 0.0;
                for (size_t j = 0; j < visible; j++)
                    acc += exp(logit[j] - max) * (double)vh[j * head_dim + c];
                o[c] = visible ? (float)(acc / denom) : 0.0f;
            }
        }
    free(logit);
}

void hk_ref_rope(float *x, const uint32_t *positions, size_t n_tokens, size_t n_heads, size_t head_dim,
                 size_t rot_dim, int neox, float theta_base, float freq_scale, const float *freq_factors)
{
    if (rot_dim == 0)
        rot_dim = head_dim;
    const size_t half = rot_dim / 2;
    for (size_t t = 0; t < n_tokens; t++)
        for (size_t h = 0; h < n_heads; h++) {
            float *row = x + (t * n_heads + h) * head_dim;
            for (size_t i = 0; i < half; i++) {
                double freq = pow((double)theta_base, -2.0 * (double)i / (double)rot_dim);
                if (freq_factors)
                    freq /= (double)freq_factors[i];
                double angle = (double)positions[t] * (double)freq_scale * freq;
                double c = cos(angle), s = sin(angle);
                size_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
                double x0 = row[a], x1 = row[b];
                row[a] = (float)(x0 * c - x1 * s);
                row[b] = (float)(x0 * s + x1 * c);
            }
        }
}
