/* types.c — the one table of type traits: block values and bytes, view alignment, name and the
 * ggml type id. The references and the public API (hk_type_* in src/runtime/error.c) both read it. */
#include "hk_ref.h"

static const hk_type_traits traits[HK_REF_TYPES] = {
    [HK_REF_F32] = {"f32", 1, 4, 4, 0, HK_REF_ROLE_KV},
    [HK_REF_Q8_0] = {"q8_0", 32, 34, 2, 8, HK_REF_ROLE_WEIGHT | HK_REF_ROLE_KV},
    [HK_REF_Q4_K] = {"q4_k", 256, 144, 2, 12, HK_REF_ROLE_WEIGHT},
    [HK_REF_Q6_K] = {"q6_k", 256, 210, 2, 14, HK_REF_ROLE_WEIGHT},
    [HK_REF_Q8_1] = {"q8_1", 32, 36, 4, 9, HK_REF_ROLE_ACTIVATION},
    [HK_REF_F16] = {"f16", 1, 2, 2, 1, HK_REF_ROLE_KV},
    [HK_REF_Q5_K] = {"q5_k", 256, 176, 2, 13, HK_REF_ROLE_WEIGHT},
};

const hk_type_traits *hk_ref_type(int type)
{
    return type >= 0 && (size_t)type < sizeof traits / sizeof traits[0] && traits[type].name ? &traits[type] : NULL;
}

int hk_ref_type_from_ggml(uint32_t ggml_type)
{
    for (size_t i = 0; i < sizeof traits / sizeof traits[0]; i++)
        if (traits[i].name && traits[i].ggml_type == ggml_type)
            return (int)i;
    return -1;
}

size_t hk_ref_row_bytes(int type, size_t k)
{
    const hk_type_traits *t = hk_ref_type(type);
    return t && k % t->block_values == 0 ? k / t->block_values * t->block_bytes : 0;
}
