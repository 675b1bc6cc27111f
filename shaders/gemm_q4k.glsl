// Q4_K super-block header decode shared by the prefill GEMMs (mmq_weights.glsl, gemm_dequant.glsl).
// h: the first 16 bytes of a super-block as four little-endian words (f16 d, f16 dmin, then
// scales[12]). Sub-block j's 6-bit scale and min as llama.cpp's get_scale_min_k4, four at a time:
// scales[j] & 63 and scales[j + 4] & 63 for j < 4; for j >= 4 the low nibble (scale) or high
// nibble (min) of scales[j + 4] with the top two bits of scales[j - 4] (scale) or scales[j] (min)
// above them. Byte j % 4 of sc[j / 4] / mn[j / 4] holds sub-block j's.
#ifndef HK_GEMM_Q4K_GLSL
#define HK_GEMM_Q4K_GLSL
void hk_q4k_scales8(uvec4 h, out uvec2 sc, out uvec2 mn)
{
    sc = uvec2(h.y & 0x3F3F3F3Fu, (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u));
    mn = uvec2(h.z & 0x3F3F3F3Fu, ((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u));
}
// sub-block j's (scale, min) from hk_q4k_scales8
uvec2 hk_q4k_scale_of(uvec2 sc, uvec2 mn, uint j)
{
    uint sh = 8u * (j & 3u);
    return uvec2(((j < 4u ? sc.x : sc.y) >> sh) & 0xFFu, ((j < 4u ? mn.x : mn.y) >> sh) & 0xFFu);
}
#endif

// 16 weight bytes at u16 index b16 of the weight view as four little-endian words, loaded as the
// view's alignment allows: wload 2 one 16-byte load (b16 a multiple of 8 past a 16-byte aligned
// view), 1 four 32-bit loads (b16 even past a 4-byte aligned view), 0 eight 16-bit loads (whose
// halves are joined here: a prefetch through that path waits for them). The caller passes a
// constant (mmq's WLOAD, gemm_f16's WLOAD: specialization constants), so that a pipeline holds only
// its own loads. Needs w16[], w32[], w128[] on the weights.
#ifdef HK_WIDE_WEIGHT_LOADS
uvec4 hk_w_ld16(uint b16, uint wload)
{
    if (wload == 2u)
        return w128[b16 >> 3];
    if (wload == 1u) {
        uint b = b16 >> 1;
        return uvec4(w32[b], w32[b + 1u], w32[b + 2u], w32[b + 3u]);
    }
    return uvec4(uint(w16[b16]) | (uint(w16[b16 + 1u]) << 16), uint(w16[b16 + 2u]) | (uint(w16[b16 + 3u]) << 16),
                 uint(w16[b16 + 4u]) | (uint(w16[b16 + 5u]) << 16), uint(w16[b16 + 6u]) | (uint(w16[b16 + 7u]) << 16));
}
#endif
