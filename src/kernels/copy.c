/* Buffer copy: a compute kernel with 16-byte loads and stores where both views and the size are
 * 16-byte aligned (the device's real copy bandwidth, the yardstick of hk-check and hk-bench),
 * a transfer copy otherwise. */
#include "family.h"

#define COPY_WG 256u
/* each invocation moves this many 16-byte words, strided by the grid, so big copies need no
 * more workgroups than a dispatch holds */
#define COPY_WORDS_PER_INVOCATION 4u

hk_status hk_copy(hk_context *context, hk_stream *stream, hk_view src, hk_view dst, uint64_t size)
{
    static const char fn[] = "hk_copy";
    static const char *const names[] = {"src", "dst"};
    hk_binding b[2] = {{src, size, 1, 0, 0}, {dst, size, 1, 1, 0}};
    hk_status st = hk__check_bindings(context, stream, fn, names, b, 2);
    if (st != HK_OK)
        return st;
    if (size == 0)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "size is 0");
    if ((src.offset | dst.offset | size) % 16 || size / 16 > UINT32_MAX)
        return hk__record_transfer_copy(context, stream, fn, b);
    uint32_t words = (uint32_t)(size / 16);
    /* Vulkan guarantees only 128 invocations per workgroup */
    uint32_t wg = COPY_WG < context->caps.max_workgroup_size ? COPY_WG : context->caps.max_workgroup_size;
    uint64_t groups = (words + (uint64_t)wg * COPY_WORDS_PER_INVOCATION - 1) / ((uint64_t)wg * COPY_WORDS_PER_INVOCATION);
    hk_dispatch_desc d = {.shader = HK_SHADER_COPY, .spec = &wg, .spec_count = 1, .bindings = b, .binding_count = 2,
                          .params = &words, .params_bytes = sizeof words, .groups = groups};
    return hk__dispatch(context, stream, fn, &d);
}

static hk_status prepare_copy(hk__prep *p)
{
    HK_PREP_TRY(p, hk_copy(p->ctx, p->s, hk__prep_view(p, 0), hk__prep_view(p, 1), 4096));
    return HK_OK;
}

const hk__family hk__family_copy = {"hk_copy", prepare_copy, {NULL}};
