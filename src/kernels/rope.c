/* Rotary position embedding fused with the KV-cache append (shaders/rope.comp). */
#include "attention.h"

hk_status hk_rope(hk_context *context, hk_stream *stream, const hk_rope_desc *desc, hk_view q, hk_view k, hk_view v,
                  hk_view positions, hk_view freq_factors, hk_view q_out, hk_view k_cache, hk_view v_cache)
{
    static const char fn[] = "hk_rope";
    (void)context;
    (void)stream;
    (void)desc;
    (void)q;
    (void)k;
    (void)v;
    (void)positions;
    (void)freq_factors;
    (void)q_out;
    (void)k_cache;
    (void)v_cache;
    return hk__fail(HK_ERROR_UNSUPPORTED, fn, "not built yet");
}
