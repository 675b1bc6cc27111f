// MMQ weight staging: one 32-value block kb of weight row `row16` (the row's first 16-bit word in
// w16) decoded to eight words of four signed 8-bit quants (sb, as the int8 operand of the GEMM)
// and the block's f32 scale factors (swa, swb). Value i of the block is
//   Q8_0: swa * q_i
//   Q4_K: swa * q_i + swb              (swa = d*sc, swb = -dmin*m of the 32-value sub-block)
//   Q6_K: swa * q_i for i < 16, swb * q_i for i >= 16  (d times the two 16-value scales)
// with q_i the quant in sb. Everything is read through 16-bit words: GGUF blocks are 2-byte
// aligned, and no read reaches past the block. Needs w16[], sb[], swa[], swb[], STRIDE, BN.
#include "w16.glsl"

// quants i = 4w .. 4w+3 of the two 16-bit words at u16 index i16 (bytes in memory order)
uint hk_mmq_pair(uint i16) { return uint(w16[i16]) | (uint(w16[i16 + 1u]) << 16); }

#if defined(HK_Q8_0)
#define HK_MMQ_BLOCK_VALUES 32u
#define HK_MMQ_BLOCK_U16 17u
void hk_mmq_stage_w(uint r, uint kk, uint row16, uint kb)
{
    uint b = row16 + kb * HK_MMQ_BLOCK_U16;
    [[unroll]] for (uint w = 0; w < 8u; w++)
        sb[r * STRIDE + kk * 8u + w] = hk_mmq_pair(b + 1u + 2u * w);
    swa[kk * BN + r] = hk_half(uint(w16[b]));
}
#elif defined(HK_Q4_K)
#define HK_MMQ_BLOCK_VALUES 256u
#define HK_MMQ_BLOCK_U16 72u
// sub-block j (0..7) of a super-block: the low (j even) or high (j odd) nibbles of the 32 quant
// bytes qs[32*(j/2) ..]; the 6-bit scale and min unpacked as llama.cpp's get_scale_min_k4 (the
// same unpacking as hk_q4k_scale_min of q4_k.glsl, read through hk_byte here).
void hk_mmq_stage_w(uint r, uint kk, uint row16, uint kb)
{
    uint b = row16 + (kb >> 3) * HK_MMQ_BLOCK_U16, j = kb & 7u;
    uint q16 = b + 8u + 16u * (j >> 1), shift = 4u * (j & 1u);
    [[unroll]] for (uint w = 0; w < 8u; w++)
        sb[r * STRIDE + kk * 8u + w] = (hk_mmq_pair(q16 + 2u * w) >> shift) & 0x0F0F0F0Fu;
    uint sc, m;
    if (j < 4u) {
        sc = hk_byte(b, 4u + j) & 63u;
        m = hk_byte(b, 8u + j) & 63u;
    } else {
        sc = (hk_byte(b, 8u + j) & 0xFu) | ((hk_byte(b, j) >> 6) << 4);
        m = (hk_byte(b, 8u + j) >> 4) | ((hk_byte(b, 4u + j) >> 6) << 4);
    }
    swa[kk * BN + r] = hk_half(uint(w16[b])) * float(sc);
    swb[kk * BN + r] = -hk_half(uint(w16[b + 1u])) * float(m);
}
#elif defined(HK_Q6_K)
#define HK_MMQ_BLOCK_VALUES 256u
#define HK_MMQ_BLOCK_U16 105u
// 32-value block t = 4h + g (h: half, g: 0..3) of a super-block: value l is
// (ql[64h + 32(g&1) + l] nibble g>>1) | ((qh[32h + l] >> 2g) & 3) << 4, minus 32; scales
// scales[8h + 2g] (l < 16) and scales[8h + 2g + 1].
void hk_mmq_stage_w(uint r, uint kk, uint row16, uint kb)
{
    uint b = row16 + (kb >> 3) * HK_MMQ_BLOCK_U16, t = kb & 7u, h = t >> 2, g = t & 3u;
    uint ql16 = b + 32u * h + 16u * (g & 1u), qh16 = b + 64u + 16u * h;
    uint lshift = 4u * (g >> 1), hshift = 2u * g;
    [[unroll]] for (uint w = 0; w < 8u; w++) {
        uint q = ((hk_mmq_pair(ql16 + 2u * w) >> lshift) & 0x0F0F0F0Fu) |
                 (((hk_mmq_pair(qh16 + 2u * w) >> hshift) & 0x03030303u) << 4);
        // q - 32 per byte without borrows: flip bit 5, then copy it into bits 6 and 7
        q ^= 0x20202020u;
        sb[r * STRIDE + kk * 8u + w] = q | ((q & 0x20202020u) * 6u);
    }
    uint s = uint(w16[b + 96u + 4u * h + g]); // scales[8h + 2g], scales[8h + 2g + 1]
    float d = hk_half(uint(w16[b + 104u]));
    swa[kk * BN + r] = d * float(int(s << 24) >> 24);
    swb[kk * BN + r] = d * float(int(s << 16) >> 24);
}
#else
#error "define HK_Q8_0, HK_Q4_K or HK_Q6_K"
#endif
