/* Rotary position embedding fused with the KV-cache append (shaders/rope.comp). */
#include "attention.h"

#include <math.h>

/* One workgroup per (token, row); head_dim <= 256 values, rot_dim/2 <= 128 pairs. */
#define ROPE_WG 128u
/* n_heads and n_kv_heads share one push-constant word */
#define ROPE_MAX_HEADS 65535u

enum {
    ROPE_Q,
    ROPE_K,
    ROPE_V,
    ROPE_POSITIONS,
    ROPE_FACTORS,
    ROPE_Q_OUT,
    ROPE_K_CACHE,
    ROPE_V_CACHE,
    ROPE_Q_NORM,
    ROPE_K_NORM,
    ROPE_BINDINGS
};

/* the shader per KV-cache type */
typedef struct rope_type {
    int takes, shader;
} rope_type;

static const rope_type rope_types[HK_REF_TYPES] = {
    [HK_TYPE_F32] = {1, HK_SHADER_ROPE_F32},
    [HK_TYPE_F16] = {1, HK_SHADER_ROPE_F16},
    [HK_TYPE_Q8_0] = {1, HK_SHADER_ROPE_Q8_0},
};

typedef struct rope_params {
    uint32_t n_tokens, heads, rot;
    hk__rope_cache cache;
    float turns[2];   /* freq_scale / (2 pi) as a double-float */
    float pow2[4][2]; /* theta^(-2 * 2^b / rot_dim), b = 0..3, as double-floats (the shader squares on) */
    float eps;        /* the q and k norms' */
} rope_params;

static void split_double(double x, float out[2])
{
    out[0] = (float)x;
    out[1] = (float)(x - (double)out[0]);
}

hk_status hk__rope_check(const char *fn, const hk_rope_desc *d, hk_view freq_factors, uint32_t *rot, int *factors,
                         uint64_t *k_bytes, uint64_t *v_bytes)
{
    if (d->n_tokens == 0 || d->n_heads == 0 || d->n_kv_heads == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_tokens=%u, n_heads=%u and n_kv_heads=%u must all be positive",
                        d->n_tokens, d->n_heads, d->n_kv_heads);
    if (d->n_heads > ROPE_MAX_HEADS || d->n_kv_heads > ROPE_MAX_HEADS)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_heads=%u or n_kv_heads=%u is more than %u", d->n_heads,
                        d->n_kv_heads, ROPE_MAX_HEADS);
    hk_status st = hk__kv_layout_check(fn, &d->kv, d->n_kv_heads, d->head_dim, k_bytes, v_bytes);
    if (st != HK_OK)
        return st;
    if (!HK_TYPE_TAKES(rope_types, d->kv.type))
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "kv.type=%s (%d) has no rope kernel", hk_type_name(d->kv.type),
                        (int)d->kv.type);
    *rot = d->rot_dim ? d->rot_dim : d->head_dim;
    if (*rot % 2 || *rot > d->head_dim)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "rot_dim=%u is not even and at most head_dim=%u", d->rot_dim,
                        d->head_dim);
    if (!isfinite(d->theta_base) || d->theta_base <= 0.0f)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "theta_base=%g is not a positive number", (double)d->theta_base);
    if (!isfinite(d->freq_scale) || d->freq_scale <= 0.0f)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "freq_scale=%g is not a positive number", (double)d->freq_scale);
    uint64_t q_values = (uint64_t)d->n_tokens * d->n_heads * d->head_dim;
    uint64_t kv_values = (uint64_t)d->n_tokens * d->n_kv_heads * d->head_dim;
    if (q_values > UINT32_MAX || kv_values > UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_tokens x heads x head_dim exceeds 2^32 values");
    return hk__optional_view(fn, "freq_factors", freq_factors, factors);
}

void hk__rope_angles(const hk_rope_desc *d, uint32_t rot, float turns[2], float pow2[4][2])
{
    split_double((double)d->freq_scale / (2.0 * 3.14159265358979323846), turns);
    for (int i = 0; i < 4; i++)
        split_double(pow((double)d->theta_base, -2.0 * (double)(1u << i) / (double)rot), pow2[i]);
}

hk__rope_cache hk__rope_cache_of(const hk_rope_desc *d)
{
    const hk_kv_layout *kv = &d->kv;
    /* strides in use stay below the cache spans, which the device can bind */
    return (hk__rope_cache){
        .capacity = kv->capacity,
        .k_row = kv->capacity > 1 ? (uint32_t)kv->k_row_stride : 0,
        .k_head = d->n_kv_heads > 1 ? (uint32_t)kv->k_head_stride : 0,
        .v_row = kv->capacity > 1 ? (uint32_t)kv->v_row_stride : 0,
        .v_head = d->n_kv_heads > 1 ? (uint32_t)kv->v_head_stride : 0,
    };
}

hk_status hk_rope(hk_context *context, hk_stream *stream, const hk_rope_desc *desc, hk_view q, hk_view k, hk_view v,
                  hk_view positions, hk_view freq_factors, hk_view q_out, hk_view k_cache, hk_view v_cache)
{
    static const char fn[] = "hk_rope";
    static const char *const names[ROPE_BINDINGS] = {"q",       "k",       "v",           "positions",
                                                     "freq_factors", "q_out", "k_cache", "v_cache",
                                                     "desc->q_norm", "desc->k_norm"};
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    if (!desc)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "desc is NULL");
    const hk_rope_desc *d = desc;
    uint64_t k_bytes, v_bytes;
    uint32_t rot;
    int factors, q_norm, k_norm;
    hk_status st = hk__rope_check(fn, d, freq_factors, &rot, &factors, &k_bytes, &v_bytes);
    if (st == HK_OK)
        st = hk__optional_view(fn, "desc->q_norm", d->q_norm, &q_norm);
    if (st == HK_OK)
        st = hk__optional_view(fn, "desc->k_norm", d->k_norm, &k_norm);
    if (st != HK_OK)
        return st;
    if ((q_norm || k_norm) && (!(d->norm_eps > 0.0f) || !isfinite(d->norm_eps)))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "norm_eps=%g must be positive and finite", (double)d->norm_eps);
    uint64_t q_values = (uint64_t)d->n_tokens * d->n_heads * d->head_dim;
    uint64_t kv_values = (uint64_t)d->n_tokens * d->n_kv_heads * d->head_dim;
    uint32_t align = hk_type_alignment(d->kv.type);
    hk_view none = {q.buffer, q.offset};
    hk_binding b[ROPE_BINDINGS] = {
        [ROPE_Q] = {q, q_values * 4, 4, 0, 0},
        [ROPE_K] = {k, kv_values * 4, 4, 0, 0},
        [ROPE_V] = {v, kv_values * 4, 4, 0, 0},
        [ROPE_POSITIONS] = {positions, (uint64_t)d->n_tokens * 4, 4, 0, 0},
        [ROPE_FACTORS] = factors ? (hk_binding){freq_factors, (uint64_t)rot / 2 * 4, 4, 0, 0}
                                 : (hk_binding){none, 0, 1, 0, 0},
        [ROPE_Q_OUT] = {q_out, q_values * 4, 4, 1, 1},
        [ROPE_K_CACHE] = {k_cache, k_bytes, align, 1, 0},
        [ROPE_V_CACHE] = {v_cache, v_bytes, align, 1, 0},
        [ROPE_Q_NORM] = q_norm ? (hk_binding){d->q_norm, (uint64_t)d->head_dim * 4, 4, 0, 0}
                               : (hk_binding){none, 0, 1, 0, 0},
        [ROPE_K_NORM] = k_norm ? (hk_binding){d->k_norm, (uint64_t)d->head_dim * 4, 4, 0, 0}
                               : (hk_binding){none, 0, 1, 0, 0},
    };
    st = hk__check_bindings(context, stream, fn, names, b, ROPE_BINDINGS);
    if (st != HK_OK)
        return st;
    /* in place means q itself: q_out exactly on another input would be read after it is written */
    for (int i = ROPE_K; i < ROPE_BINDINGS; i++) {
        if (i == ROPE_Q_OUT || i == ROPE_K_CACHE || i == ROPE_V_CACHE)
            continue;
        const hk_binding *o = &b[ROPE_Q_OUT], *in = &b[i];
        if (in->view.buffer->buffer == o->view.buffer->buffer && in->view.offset < o->view.offset + o->bytes &&
            o->view.offset < in->view.offset + in->bytes)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "output q_out overlaps %s", names[i]);
    }
    rope_params params = {
        .n_tokens = d->n_tokens,
        .heads = d->n_heads | d->n_kv_heads << 16,
        .rot = rot / 2 | (d->neox ? 1u : 0u) << 16 | (factors ? 2u : 0u) << 16 | (q_norm ? 4u : 0u) << 16 |
               (k_norm ? 8u : 0u) << 16,
        .cache = hk__rope_cache_of(d),
    };
    hk__rope_angles(d, rot, params.turns, params.pow2);
    params.eps = d->norm_eps;
    uint32_t spec[2] = {ROPE_WG, d->head_dim};
    hk_dispatch_desc dd = {.shader = rope_types[d->kv.type].shader, .spec = spec, .spec_count = 2, .bindings = b,
                           .binding_count = ROPE_BINDINGS, .params = &params, .params_bytes = sizeof params,
                           .groups = (uint64_t)d->n_tokens * (d->n_heads + 2ull * d->n_kv_heads)};
    return hk__dispatch(context, stream, fn, &dd);
}

static hk_status prepare_rope(hk__prep *p)
{
    static const uint32_t n_tokens[] = {1, 64};
    hk_type types[8];
    uint32_t n_types = hk__types_of(HK_REF_ROLE_KV, types);
    hk_view none = {NULL, 0};
    for (uint32_t t = 0; t < n_types; t++)
        for (int h = 0; h < HK_PREP_HEAD_DIMS; h++)
            for (int n = 0; n < 2; n++)
                for (int neox = 0; neox < 2; neox++)
                    for (int factors = 0; factors < 2; factors++) {
                        hk_rope_desc d = {.n_tokens = n_tokens[n], .n_heads = 8, .n_kv_heads = 2,
                                          .head_dim = hk__prep_head_dims[h], .rot_dim = 0, .neox = neox,
                                          .theta_base = 10000.0f, .freq_scale = 1.0f,
                                          .kv = hk__prep_kv(types[t], hk__prep_head_dims[h], 4096)};
                        HK_PREP_TRY(p, hk_rope(p->ctx, p->s, &d, hk__prep_view(p, 0), hk__prep_view(p, 1),
                                               hk__prep_view(p, 2), hk__prep_view(p, 3),
                                               factors ? hk__prep_view(p, 4) : none, hk__prep_view(p, 5),
                                               hk__prep_view(p, 6), hk__prep_view(p, 7)));
                    }
    return HK_OK;
}

const hk__family hk__family_rope = {"hk_rope", prepare_rope, {NULL}};
