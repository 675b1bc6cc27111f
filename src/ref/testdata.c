/* Seeded test data and the one reference-compare measure, shared by tests, tools and bench. */
#include "hk_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t hk_rng_next(hk_rng *r)
{
    /* xorshift64*: seeded, reproducible across platforms */
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}

float hk_rng_uniform(hk_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((hk_rng_next(r) >> 40) * (1.0 / 16777216.0));
}

void hk_rng_fill(hk_rng *r, float *v, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        v[i] = hk_rng_uniform(r, lo, hi);
}

static void set_f16(uint8_t *p, float v)
{
    uint16_t h = hk_f32_to_f16(v);
    memcpy(p, &h, 2);
}

void hk_random_blocks(hk_rng *r, int type, void *blocks, size_t n_blocks, float scale)
{
    const hk_type_traits *t = hk_ref_type(type);
    size_t bytes = t ? t->block_bytes : 0;
    uint8_t *p = blocks;
    for (size_t i = 0; i < n_blocks * bytes; i++)
        p[i] = (uint8_t)(hk_rng_next(r) >> 56);
    for (size_t b = 0; b < n_blocks; b++, p += bytes) {
        switch (type) {
        case HK_REF_Q8_0: set_f16(p, hk_rng_uniform(r, -scale, scale)); break;
        case HK_REF_Q8_1: set_f16(p, hk_rng_uniform(r, -scale, scale)); set_f16(p + 2, hk_rng_uniform(r, -scale, scale)); break;
        case HK_REF_Q4_K: /* dmin as large as d: the "- M*xsum" term must be right too */
        case HK_REF_Q5_K:
            set_f16(p, hk_rng_uniform(r, -scale, scale));
            set_f16(p + 2, hk_rng_uniform(r, -scale, scale));
            break;
        case HK_REF_Q6_K: set_f16(p + 208, hk_rng_uniform(r, -scale, scale)); break;
        default: break;
        }
    }
}

uint8_t *hk_random_weights(hk_rng *r, int type, size_t rows, size_t k, int raw_blocks)
{
    size_t row_bytes = hk_ref_row_bytes(type, k);
    uint8_t *w = malloc(row_bytes * rows + 1);
    if (!w || !row_bytes)
        return w;
    if (raw_blocks) {
        hk_random_blocks(r, type, w, row_bytes * rows / hk_ref_type(type)->block_bytes, 0.05f);
        return w;
    }
    float *row = malloc(k * sizeof(float));
    if (!row) {
        free(w);
        return NULL;
    }
    for (size_t i = 0; i < rows; i++) {
        float scale = hk_rng_uniform(r, 0.01f, 0.5f), bias = hk_rng_uniform(r, -0.3f, 0.3f) * scale;
        for (size_t j = 0; j < k; j++)
            row[j] = hk_rng_uniform(r, -scale, scale) + bias;
        uint8_t *dst = w + i * row_bytes;
        if (type == HK_REF_Q8_0)
            hk_quant_row_q8_0(row, (hk_block_q8_0 *)dst, k);
        else if (type == HK_REF_Q4_K)
            hk_quant_row_q4_k(row, (hk_block_q4_k *)dst, k);
        else if (type == HK_REF_Q5_K)
            hk_quant_row_q5_k(row, (hk_block_q5_k *)dst, k);
        else if (type == HK_REF_Q6_K)
            hk_quant_row_q6_k(row, (hk_block_q6_k *)dst, k);
        else if (type == HK_REF_F16)
            for (size_t j = 0; j < k; j++) {
                uint16_t h = hk_f32_to_f16(row[j]);
                memcpy(dst + 2 * j, &h, 2);
            }
        else
            hk_random_blocks(r, type, dst, row_bytes / hk_ref_type(type)->block_bytes, 0.05f);
    }
    free(row);
    return w;
}

uint32_t *hk_random_routing(hk_rng *r, uint32_t tokens, uint32_t top_k, uint32_t n_experts)
{
    size_t n = (size_t)tokens * top_k;
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids)
        return NULL;
    for (uint32_t t = 0; t < tokens; t++)
        for (uint32_t j = 0; j < top_k; j++) {
            uint32_t e, taken, tries = 0;
            do {
                e = (uint32_t)(hk_rng_next(r) % n_experts);
                taken = 0;
                for (uint32_t i = 0; i < j; i++)
                    taken |= ids[(size_t)t * top_k + i] == e;
            } while (taken && ++tries < 1000);
            ids[(size_t)t * top_k + j] = e;
        }
    return ids;
}

double hk_scale_rel(const float *got, const float *ref, size_t n)
{
    double scale = 0.0, err = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            return INFINITY;
        double d = fabs((double)got[i] - (double)ref[i]);
        err = d > err ? d : err;
        double a = fabs((double)ref[i]);
        scale = a > scale ? a : scale;
    }
    return err / (scale > 1e-30 ? scale : 1e-30);
}

