/* Attention: argument checks for hk_sdpa_blk and hk_rope, the choice between flash-decoding and
 * flash attention, and flash-decoding itself (shaders/sdpa.comp). */
#include "attention.h"

#include <math.h>

#define HK_MAX_HEAD_DIM 256u

hk_status hk__kv_layout_check(const char *fn, const hk_kv_layout *kv, uint32_t n_kv_heads, uint32_t head_dim,
                              uint64_t *k_bytes, uint64_t *v_bytes)
{
    if (kv->type != HK_TYPE_F32 && kv->type != HK_TYPE_F16 && kv->type != HK_TYPE_Q8_0)
        return hk__fail(HK_ERROR_UNSUPPORTED, fn, "kv.type=%s (%d) is not a KV-cache type (f32, f16, q8_0)",
                        hk_type_name(kv->type), (int)kv->type);
    uint32_t multiple = kv->type == HK_TYPE_Q8_0 ? 32 : 16;
    if (head_dim == 0 || head_dim % multiple || head_dim > HK_MAX_HEAD_DIM)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "head_dim=%u is not a positive multiple of %u up to %u (%s cache)",
                        head_dim, multiple, HK_MAX_HEAD_DIM, hk_type_name(kv->type));
    if (kv->capacity == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kv.capacity is 0");
    uint64_t row = hk_type_bytes(kv->type, head_dim), align = hk_type_alignment(kv->type);
    const struct {
        const char *name;
        uint64_t row_stride, head_stride;
        uint64_t *bytes;
    } t[2] = {{"k", kv->k_row_stride, kv->k_head_stride, k_bytes}, {"v", kv->v_row_stride, kv->v_head_stride, v_bytes}};
    for (int i = 0; i < 2; i++) {
        uint64_t rs = t[i].row_stride, hs = t[i].head_stride;
        if (rs % align || hs % align)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kv.%s_row_stride=%llu and kv.%s_head_stride=%llu must be multiples of %llu (%s)",
                            t[i].name, (unsigned long long)rs, t[i].name, (unsigned long long)hs,
                            (unsigned long long)align, hk_type_name(kv->type));
        if ((kv->capacity > 1 && rs < row) || (n_kv_heads > 1 && hs < row))
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                            "kv.%s_row_stride=%llu or kv.%s_head_stride=%llu is smaller than one row (%llu bytes: %u %s values)",
                            t[i].name, (unsigned long long)rs, t[i].name, (unsigned long long)hs,
                            (unsigned long long)row, head_dim, hk_type_name(kv->type));
        /* rows of two (head, row) pairs must not overlap: heads outside rows or rows outside heads */
        int heads_outer = n_kv_heads == 1 || hs / (kv->capacity > 1 ? rs : 1) >= kv->capacity;
        int rows_outer = kv->capacity == 1 || rs / (n_kv_heads > 1 ? hs : 1) >= n_kv_heads;
        if (kv->capacity > 1 && n_kv_heads > 1 && !heads_outer && !rows_outer)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn,
                            "kv.%s_row_stride=%llu and kv.%s_head_stride=%llu make rows of different heads overlap "
                            "(%u rows, %u kv heads)",
                            t[i].name, (unsigned long long)rs, t[i].name, (unsigned long long)hs, kv->capacity,
                            n_kv_heads);
        double span = (double)(n_kv_heads - 1) * (double)hs + (double)(kv->capacity - 1) * (double)rs + (double)row;
        if (span > 1.8e19)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "the %s cache spans more than 2^64 bytes", t[i].name);
        *t[i].bytes = (uint64_t)(n_kv_heads - 1) * hs + (uint64_t)(kv->capacity - 1) * rs + row;
    }
    return HK_OK;
}

/* Shape checks that need no views (shared by hk_sdpa_workspace_bytes and hk_sdpa_blk). */
static hk_status check_desc(const char *fn, const hk_context *context, const hk_sdpa_desc *d, int has_counter,
                            uint64_t *k_bytes, uint64_t *v_bytes)
{
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    if (!d)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "desc is NULL");
    if (d->n_q == 0 || d->n_heads == 0 || d->n_kv_heads == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_q=%u, n_heads=%u and n_kv_heads=%u must all be positive", d->n_q,
                        d->n_heads, d->n_kv_heads);
    if (d->n_heads % d->n_kv_heads)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_heads=%u is not a multiple of n_kv_heads=%u", d->n_heads,
                        d->n_kv_heads);
    if (!isfinite(d->scale))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "scale=%g is not finite", (double)d->scale);
    hk_status st = hk__kv_layout_check(fn, &d->kv, d->n_kv_heads, d->head_dim, k_bytes, v_bytes);
    if (st != HK_OK)
        return st;
    if (d->causal && d->n_q > d->kv.capacity)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "causal with n_q=%u queries needs at least as many keys, but kv.capacity=%u",
                        d->n_q, d->kv.capacity);
    if (!has_counter) {
        if (d->seq_k == 0 || d->seq_k > d->kv.capacity)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "seq_k=%u must be in 1..kv.capacity=%u", d->seq_k,
                            d->kv.capacity);
        if (d->causal && d->n_q > d->seq_k)
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "causal with n_q=%u queries needs seq_k >= n_q, got seq_k=%u",
                            d->n_q, d->seq_k);
    }
    if ((uint64_t)d->n_q * d->n_heads * d->head_dim > UINT32_MAX)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "n_q x n_heads x head_dim exceeds 2^32 values");
    return HK_OK;
}

static int use_flash(const hk_context *context, const hk_sdpa_desc *desc)
{
    return desc->n_q > 1 && hk__sdpa_flash_supported(context, desc);
}

hk_status hk_sdpa_workspace_bytes(hk_context *context, const hk_sdpa_desc *desc, uint64_t *out_bytes)
{
    static const char fn[] = "hk_sdpa_workspace_bytes";
    if (!out_bytes)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "out_bytes is NULL");
    *out_bytes = 0;
    uint64_t k_bytes, v_bytes;
    /* the counter form accepts any seq_k, so the size must not depend on it */
    hk_status st = check_desc(fn, context, desc, 1, &k_bytes, &v_bytes);
    if (st != HK_OK)
        return st;
    *out_bytes = use_flash(context, desc) ? hk__sdpa_flash_workspace(context, desc)
                                          : hk__sdpa_decode_workspace(context, desc);
    return HK_OK;
}

hk_status hk_sdpa_blk(hk_context *context, hk_stream *stream, const hk_sdpa_desc *desc, hk_view q, hk_view k_cache,
                      hk_view v_cache, hk_view out, hk_view workspace, hk_view seq_k_counter)
{
    static const char fn[] = "hk_sdpa_blk";
    static const char *const names[SDPA_BINDINGS] = {"q", "k_cache", "v_cache", "out", "workspace", "seq_k_counter"};
    hk_sdpa_call call = {.desc = desc, .has_counter = seq_k_counter.buffer != NULL};
    uint64_t k_bytes, v_bytes;
    hk_status st = check_desc(fn, context, desc, call.has_counter, &k_bytes, &v_bytes);
    if (st != HK_OK)
        return st;
    int flash = use_flash(context, desc);
    uint64_t ws = flash ? hk__sdpa_flash_workspace(context, desc) : hk__sdpa_decode_workspace(context, desc);
    if (ws && !workspace.buffer)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "workspace is NULL but this shape needs %llu bytes "
                        "(hk_sdpa_workspace_bytes)", (unsigned long long)ws);
    uint64_t qo_bytes = (uint64_t)desc->n_q * desc->n_heads * desc->head_dim * 4;
    hk_view none = {q.buffer, q.offset};
    call.b[SDPA_Q] = (hk_binding){q, qo_bytes, 4, 0, 0};
    call.b[SDPA_K] = (hk_binding){k_cache, k_bytes, hk_type_alignment(desc->kv.type), 0, 0};
    call.b[SDPA_V] = (hk_binding){v_cache, v_bytes, hk_type_alignment(desc->kv.type), 0, 0};
    call.b[SDPA_OUT] = (hk_binding){out, qo_bytes, 4, 1, 0};
    call.b[SDPA_WORKSPACE] = ws ? (hk_binding){workspace, ws, 4, 1, 0} : (hk_binding){none, 0, 1, 0, 0};
    call.b[SDPA_COUNTER] = call.has_counter ? (hk_binding){seq_k_counter, 4, 4, 0, 0} : (hk_binding){none, 0, 1, 0, 0};
    call.k_row_bytes = hk_type_bytes(desc->kv.type, desc->head_dim);
    st = hk__check_bindings(context, stream, fn, names, call.b, SDPA_BINDINGS);
    if (st != HK_OK)
        return st;
    return flash ? hk__sdpa_flash(context, stream, fn, &call) : hk__sdpa_decode(context, stream, fn, &call);
}

/* ---- flash-decoding ---- */

uint64_t hk__sdpa_decode_workspace(const hk_context *context, const hk_sdpa_desc *desc)
{
    (void)context;
    (void)desc;
    return 0;
}

hk_status hk__sdpa_decode(hk_context *context, hk_stream *stream, const char *fn, const hk_sdpa_call *call)
{
    (void)context;
    (void)stream;
    (void)call;
    return hk__fail(HK_ERROR_UNSUPPORTED, fn, "flash-decoding is not built yet");
}
