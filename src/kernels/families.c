/* The one list of kernel families, and what walks it: hk_context_prepare, and the autotuner's
 * public entry points, which find a tunable family here by its id. A new family adds its
 * descriptor's line here and nothing elsewhere in the runtime or the tuner. */
#include "family.h"

#include <stdio.h>
#include <string.h>

extern const hk__family hk__family_matvec, hk__family_matvec_int8, hk__family_matvec_int8_tokens,
    hk__family_moe_matvec, hk__family_moe_matvec_int8, hk__family_moe_route, hk__family_gemv_f32,
    hk__family_rmsnorm, hk__family_quantize_q8_1, hk__family_copy, hk__family_sdpa, hk__family_rope,
    hk__family_mmq, hk__family_moe_expert_rows, hk__family_mmq_id, hk__family_gemm_f16;
extern const hk__family hk__family_add, hk__family_swiglu;
extern const hk__family hk__family_argmax, hk__family_softmax;
extern const hk__family hk__family_moe_combine, hk__family_get_rows;
extern const hk__family hk__family_rmsnorm_q8_1;
extern const hk__family hk__family_matvec_int8_add, hk__family_matvec_int8_add_norm, hk__family_matvec_int8_glu, hk__family_matvec_int8_glu_q8_1,
    hk__family_matvec_int8_multi, hk__family_matvec_int8_qkv, hk__family_matvec_int8_f32x;
extern const hk__family hk__family_moe_matvec_int8_glu, hk__family_moe_matvec_int8_glu_q8_1,
    hk__family_moe_matvec_int8_combine;

/* In the order hk_context_prepare builds them (hkernel.h lists the names). */
const hk__family *const hk__families[] = {
    &hk__family_matvec,        &hk__family_matvec_int8,     &hk__family_matvec_int8_tokens,
    &hk__family_matvec_int8_add, &hk__family_matvec_int8_add_norm, &hk__family_matvec_int8_glu, &hk__family_matvec_int8_glu_q8_1,
    &hk__family_matvec_int8_multi, &hk__family_matvec_int8_qkv, &hk__family_matvec_int8_f32x,
    &hk__family_moe_matvec,    &hk__family_moe_matvec_int8, &hk__family_moe_matvec_int8_glu,
    &hk__family_moe_matvec_int8_glu_q8_1, &hk__family_moe_matvec_int8_combine,
    &hk__family_moe_route,
    &hk__family_moe_combine,   &hk__family_get_rows,
    &hk__family_gemv_f32,      &hk__family_rmsnorm,         &hk__family_quantize_q8_1,
    &hk__family_rmsnorm_q8_1,
    &hk__family_copy,          &hk__family_sdpa,            &hk__family_rope,
    &hk__family_mmq,           &hk__family_moe_expert_rows, &hk__family_mmq_id,
    &hk__family_gemm_f16,
    &hk__family_add,           &hk__family_swiglu,         &hk__family_argmax,
    &hk__family_softmax,
    NULL,
};

uint32_t hk__types_of(uint32_t role, hk_type out[8])
{
    uint32_t n = 0;
    for (int t = 0; t < HK_REF_TYPES && n < 8; t++) {
        const hk_type_traits *traits = hk_ref_type(t);
        if (traits && (traits->roles & role))
            out[n++] = (hk_type)t;
    }
    return n;
}

hk_view hk__prep_view(const hk__prep *p, int i) { return (hk_view){p->buf, (uint64_t)i << 32}; }

hk_status hk__prep_check(const hk__prep *p, hk_status st)
{
    if (st == HK_OK || st == HK_ERROR_UNSUPPORTED)
        return HK_OK;
    if (st == HK_ERROR_INVALID_ARGUMENT) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hk_last_error());
        return hk__fail(HK_ERROR_STATE, "hk_context_prepare", "internal: a shape for %s was refused (%s)", p->kernel,
                        msg);
    }
    return st;
}

/* The family named by the first len characters of name, NULL if none. */
static const hk__family *family_named(const char *name, size_t len)
{
    for (const hk__family *const *f = hk__families; *f; f++)
        if (strlen((*f)->name) == len && strncmp(name, (*f)->name, len) == 0)
            return *f;
    return NULL;
}

/* 1 if the comma-separated list names the family. */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *q = list; *q;) {
        size_t len = strcspn(q, ",");
        if (len == n && strncmp(q, name, n) == 0)
            return 1;
        q += len + (q[len] == ',');
    }
    return 0;
}

hk_status hk_context_prepare(hk_context *context, const char *list)
{
    static const char fn[] = "hk_context_prepare";
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    hk_status st = hk__check_alive(context, fn);
    if (st != HK_OK)
        return st;
    for (const char *q = list ? list : ""; *q;) { /* every name must be a family */
        size_t len = strcspn(q, ",");
        if (!family_named(q, len)) {
            char names[512] = "";
            for (const hk__family *const *f = hk__families; *f; f++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", f > hk__families ? ", " : "",
                         (*f)->name);
            return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "\"%.*s\" is not a kernel (the kernels: %s)",
                            (int)(len < 64 ? len : 64), q, names);
        }
        q += len + (q[len] == ',');
    }
    hk_buffer fake = {.context = context, .buffer = VK_NULL_HANDLE, .memory = VK_NULL_HANDLE, .size = 16ull << 32};
    hk__prep p = {context, NULL, &fake, NULL};
    st = hk__stream_create_prepare(context, &p.s);
    if (st != HK_OK)
        return st;
    for (const hk__family *const *f = hk__families; *f && st == HK_OK; f++) {
        if (list && !listed(list, (*f)->name))
            continue;
        p.kernel = (*f)->name;
        st = (*f)->prepare(&p);
    }
    hk_stream_destroy(p.s);
    return st;
}

/* ---- the autotuner's entry points ---- */

/* The tunable family of this id, NULL if none. */
static const hk__tunable *tunable_of(int id)
{
    for (const hk__family *const *f = hk__families; *f; f++)
        for (int i = 0; i < 2; i++)
            if ((*f)->tunables[i] && (int)(*f)->tunables[i]->id == id)
                return (*f)->tunables[i];
    return NULL;
}

void hk_tune_desc_init_sized(hk_tune_desc *desc, size_t desc_size)
{
    if (!desc)
        return;
    memset(desc, 0, desc_size);
    desc->struct_size = (uint32_t)desc_size;
}

hk_status hk_tune_sized(hk_context *context, const hk_tune_desc *desc, hk_tune_report *out_report, size_t report_size)
{
    static const char fn[] = "hk_tune";
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    if (!desc)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "desc is NULL");
    if (desc->struct_size < sizeof *desc)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "desc->struct_size=%u is not sizeof(hk_tune_desc)=%zu "
                        "(hk_tune_desc_init)", desc->struct_size, sizeof *desc);
    const hk__tunable *t = tunable_of((int)desc->kernel);
    if (!t)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kernel=%d is not a tuned family (hk_tune_kernel)",
                        (int)desc->kernel);
    return hk__tune_run(context, t, desc, out_report, report_size);
}

hk_status hk_schedule_last(hk_context *context, hk_tune_kernel kernel, char *out, size_t out_size)
{
    static const char fn[] = "hk_schedule_last";
    if (!context)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "context is NULL");
    const hk__tunable *t = tunable_of((int)kernel);
    if (!t)
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, fn, "kernel=%d is not a tuned family (hk_tune_kernel)", (int)kernel);
    return hk__tune_last(context, t, out, out_size);
}
