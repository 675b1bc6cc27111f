/* Flash attention for prefill (shaders/flash.comp): Q.K^T and P.V on the matrix cores (KHR
 * cooperative matrix, f16 inputs, f32 accumulation) with an online softmax, causal tiles past
 * the diagonal skipped; a portable twin with the same tiling where the device has none. */
#include "attention.h"

int hk__sdpa_flash_supported(const hk_context *context, const hk_sdpa_desc *desc)
{
    (void)context;
    (void)desc;
    return 0;
}

const char *hk__sdpa_flash_arm(const hk_context *context, const hk_sdpa_desc *desc)
{
    (void)context;
    (void)desc;
    return "flash";
}

uint64_t hk__sdpa_flash_workspace(const hk_context *context, const hk_sdpa_desc *desc)
{
    (void)context;
    (void)desc;
    return 0;
}

hk_status hk__sdpa_flash(hk_context *context, hk_stream *stream, const char *fn, const hk_sdpa_call *call)
{
    (void)context;
    (void)stream;
    (void)call;
    return hk__fail(HK_ERROR_UNSUPPORTED, fn, "flash attention is not built yet");
}
