// Tile dequantizers of the f16 GEMM (gemm_f16.comp): 8 consecutive weights of one GGUF row as
// f32, read through 16-bit words (GGUF blocks are only 2-byte aligned) and never outside the
// row's block. Expects `uint16_t w16[]` at binding 0, pc.view_offset[0] and pc.k.
//   hk_deq8(row, kk, lo, hi): weights kk .. kk+7 of weight row `row`, kk a multiple of 8.

// 8 bytes from u16 index q as two words (byte i of the 8 in bits 8*(i%4) of word i/4)
uvec2 hk_deq_words(uint q)
{
    return uvec2(uint(w16[q]) | (uint(w16[q + 1u]) << 16), uint(w16[q + 2u]) | (uint(w16[q + 3u]) << 16));
}

// byte i of the block starting at u16 index b
uint hk_deq_byte(uint b, uint i) { return (uint(w16[b + (i >> 1)]) >> ((i & 1u) * 8u)) & 0xFFu; }

#if defined(HK_Q8_0)
// Q8_0: block of 32 = f16 d, i8 qs[32] (17 u16); value i is d * qs[i]
void hk_deq8(uint row, uint kk, out vec4 lo, out vec4 hi)
{
    uint b = pc.view_offset[0] / 2u + (row * (pc.k / 32u) + kk / 32u) * 17u;
    float d = hk_half(uint(w16[b]));
    uvec2 q = hk_deq_words(b + 1u + (kk % 32u) / 2u);
    lo = d * hk_i8x4(q.x);
    hi = d * hk_i8x4(q.y);
}
#elif defined(HK_Q4_K)
// Q4_K: super-block of 256 = f16 d, f16 dmin, u8 scales[12], u8 qs[128] (72 u16). Value
// 32j + i (sub-block j) is d*sc_j*q - dmin*m_j, q the low (j even) or high (j odd) nibble of
// qs[32*(j/2) + i]; (sc_j, m_j) 6-bit, packed in scales[] as llama.cpp's get_scale_min_k4.
void hk_deq8(uint row, uint kk, out vec4 lo, out vec4 hi)
{
    uint b = pc.view_offset[0] / 2u + (row * (pc.k / 256u) + kk / 256u) * 72u;
    uint j = (kk % 256u) / 32u, i = kk % 32u;
    uint sc, mn; // scales[x] is byte 4 + x of the block
    if (j < 4u) {
        sc = hk_deq_byte(b, 4u + j) & 63u;
        mn = hk_deq_byte(b, 8u + j) & 63u;
    } else {
        sc = (hk_deq_byte(b, 8u + j) & 0xFu) | ((hk_deq_byte(b, j) >> 6) << 4);
        mn = (hk_deq_byte(b, 8u + j) >> 4) | ((hk_deq_byte(b, 4u + j) >> 6) << 4);
    }
    float d = hk_half(uint(w16[b])) * float(sc), dm = hk_half(uint(w16[b + 1u])) * float(mn);
    uvec2 q = hk_deq_words(b + 8u + 16u * (j / 2u) + i / 2u) >> ((j & 1u) * 4u);
    lo = d * hk_lanes(q.x, 0xFu) - dm;
    hi = d * hk_lanes(q.y, 0xFu) - dm;
}
#elif defined(HK_Q6_K)
// Q6_K: super-block of 256 = u8 ql[128], u8 qh[64], i8 scales[16], f16 d (105 u16). Value
// 128h + 32g + l is d * scales[8h + 2g + l/16] * (q - 32), q = nibble (high when g >= 2) of
// ql[64h + 32(g&1) + l] | ((qh[32h + l] >> 2g) & 3) << 4.
void hk_deq8(uint row, uint kk, out vec4 lo, out vec4 hi)
{
    uint b = pc.view_offset[0] / 2u + (row * (pc.k / 256u) + kk / 256u) * 105u;
    uint v = kk % 256u, h = v / 128u, g = (v % 128u) / 32u, l = v % 32u;
    uvec2 ql = hk_deq_words(b + (64u * h + 32u * (g & 1u) + l) / 2u) >> ((g / 2u) * 4u);
    uvec2 qh = hk_deq_words(b + (128u + 32u * h + l) / 2u) >> (2u * g);
    uvec2 q = (ql & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4);
    float sc = float(int(hk_deq_byte(b, 192u + 8u * h + 2u * g + l / 16u) << 24) >> 24);
    float d = hk_half(uint(w16[b + 104u])) * sc;
    lo = d * (hk_lanes(q.x, 0xFFu) - 32.0);
    hi = d * (hk_lanes(q.y, 0xFFu) - 32.0);
}
#else
#error "define HK_Q8_0, HK_Q4_K or HK_Q6_K"
#endif
