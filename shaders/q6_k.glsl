// GGUF Q6_K decode: super-block of 256 = u8 ql[128], u8 qh[64], i8 scales[16], f16 d
// (210 bytes = 105 u16). Value 128*n + 32*g + l (n: half, g: 0..3, l: 0..31) is
// d * scales[8n + 2g + l/16] * (q - 32), q = nibble of ql[64n + 32*(g&1) + l] (high nibble when
// g >= 2) | ((qh[32n + l] >> 2g) & 3) << 4. A unit is one such (n, g): 32 values.
#define HK_Q6_K_U16 105u
#define HK_UNIT_VALUES 32u

// The helpers that read no buffer first: mmq_few.comp decodes rows it staged itself and
// includes only these (HK_Q6_K_PURE).

// The 64 6-bit quants of an item, one byte each, from its windows of ql (qla: the 16 bytes of
// groups 0 and 2, qlb: 1 and 3) and qh: group g (g0..g3) word i holds values 128n + 32g + 16q +
// 4i .. +3 of item (n, q) (before the -32).
void hk_q6k_groups(uvec4 qla, uvec4 qlb, uvec4 qh, out uvec4 g0, out uvec4 g1, out uvec4 g2, out uvec4 g3)
{
    g0 = (qla & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4);
    g1 = (qlb & 0x0F0F0F0Fu) | (((qh >> 2) & 0x03030303u) << 4);
    g2 = ((qla >> 4) & 0x0F0F0F0Fu) | (((qh >> 4) & 0x03030303u) << 4);
    g3 = ((qlb >> 4) & 0x0F0F0F0Fu) | (((qh >> 6) & 0x03030303u) << 4);
}

// the words a + e shifted down 2 bytes where `odd` (hk_q6k_shift2: two words, as the scales)
uvec4 hk_q6k_shift(uvec4 a, uint e, bool odd) { return odd ? (a >> 16) | (uvec4(a.yzw, e) << 16) : a; }
uvec2 hk_q6k_shift2(uvec2 a, uint e, bool odd) { return odd ? (a >> 16) | (uvec2(a.y, e) << 16) : a; }

// signed scales[8n + 2g + q] for g = 0..3 from the half's 8 scale bytes, as floats
vec4 hk_q6k_scales_f(uvec2 s, uint q)
{
    uint sh = 8u * q;
    return hk_i8_low(uvec4(s.x >> sh, s.x >> (sh + 16u), s.y >> sh, s.y >> (sh + 16u)));
}

#ifndef HK_Q6_K_PURE
#include "w16.glsl"

float hk_unit_dot(uint row16, uint u, uint xi)
{
    uint b = row16 + (u >> 3) * HK_Q6_K_U16;
    uint n = (u & 7u) >> 2, g = u & 3u;
    uint ql = 64u * n + 32u * (g & 1u), qh = 128u + 32u * n;
    uint lshift = (g >> 1) * 4u, hshift = 2u * g;
    float acc[2] = float[2](0.0, 0.0);
    for (uint l = 0; l < 32; l++) {
        int q = int(((hk_byte(b, ql + l) >> lshift) & 0xFu) | (((hk_byte(b, qh + l) >> hshift) & 3u) << 4)) - 32;
        acc[l >> 4] += float(q) * hk_x(xi + l);
    }
    uint s = 192u + 8u * n + 2u * g;
    float sc0 = float(int(hk_byte(b, s) << 24) >> 24), sc1 = float(int(hk_byte(b, s + 1u) << 24) >> 24);
    return hk_half(uint(w16[b + 104u])) * (sc0 * acc[0] + sc1 * acc[1]);
}

uint hk_row_u16(uint k) { return (k / 256u) * HK_Q6_K_U16; }

// Subgroup rows: a work item is 16 consecutive l (l0 = 16q) of one half n of a super-block, for
// all four g (64 values): item = 4*sb + 2*n + q. It reads ql[64n + l0 ..+16], ql[64n + 32 + l0
// ..+16], qh[32n + l0 ..+16] and the half's scales through 32-bit words: a block starts 2 bytes
// past a word boundary when its byte offset is 2 mod 4, and then each window's words are shifted
// together from one more word (hk_q6k_window).
uint hk_items(uint k) { return k / 64u; }

// 4 words of the 16 bytes at byte `at` (even) of the bound weights
uvec4 hk_q6k_window(uint at)
{
    uint w = at >> 2;
    uvec4 a = uvec4(w32[w], w32[w + 1u], w32[w + 2u], w32[w + 3u]);
    if ((at & 2u) == 0u)
        return a;
    uint e = w32[w + 4u];
    return (a >> 16) | (uvec4(a.yzw, e) << 16);
}

// 2 words of the 8 bytes at byte `at` (even)
uvec2 hk_q6k_window8(uint at)
{
    uint w = at >> 2;
    uvec2 a = uvec2(w32[w], w32[w + 1u]);
    return (at & 2u) == 0u ? a : (a >> 16) | (uvec2(a.y, w32[w + 2u]) << 16);
}

// The quants of item (n, q) of the block at byte b (hk_q6k_groups)
void hk_q6k_quants(uint b, uint n, uint q, out uvec4 g0, out uvec4 g1, out uvec4 g2, out uvec4 g3)
{
    hk_q6k_groups(hk_q6k_window(b + 64u * n + 16u * q), hk_q6k_window(b + 64u * n + 32u + 16u * q),
                  hk_q6k_window(b + 128u + 32u * n + 16u * q), g0, g1, g2, g3);
}

// signed scales[8n + 2g + q] for g = 0..3 from the half's 8 scale bytes
vec4 hk_q6k_scales(uvec2 s, uint q)
{
    uint sh = 8u * q;
    return vec4(ivec4(int(s.x << (24u - sh)), int(s.x << (8u - sh)), int(s.y << (24u - sh)), int(s.y << (8u - sh))) >> 24);
}

// the weights' f16 d at byte 208 of the block starting at byte b (even), read as 16 bits: the
// 32-bit word holding it reaches 2 bytes past the block, past the tensor for the last block
float hk_q6k_d(uint b) { return hk_half(uint(w16[(b + 208u) >> 1])); }

#ifdef HK_INT8
// The first Q8_1 block that item it reads, for an item with q = 0 (8 blocks per super-block, 4
// items; item (n, q) reads blocks 4n .. 4n+3, half q of each)
uint hk_item_block(uint it) { return 2u * (it & ~1u); }

// sum((q - 32) * xq) = dot(q, xq) - 32 * sum(xq), per group g of 16 values (one Q8_1 half-block),
// an exact integer. hk_load issues a row's loads (slot c * HK_NROWS + r: the c-th of the
// HK_NITEMS items in flight, row r) and nothing that waits for them, so that they fly while x is
// staged: the item's three 16-byte windows and the 8-byte window of its scales as the words that
// hold them (hk_q6k_window; the word past each when the block starts 2 bytes into a word, in
// hk_e) and d's 16 bits. hk_compute unpacks them and meets them with each token's activation:
// per token the groups' -32 * sum(xq) start the packed-dot sums of every row (biased for
// hk_biased_float), per (row, token) 16 packed dots, 4 exact int->float turns and 4 multiplies +
// 4 fma into the row's sum, the same operations whatever HK_NTOK (a precise sum: matvec.comp).
uvec4 hk_qla[HK_NSLOTS], hk_qlb[HK_NSLOTS], hk_qh[HK_NSLOTS], hk_e[HK_NSLOTS];
uvec2 hk_sc[HK_NSLOTS];
uint hk_dbits[HK_NSLOTS];

void hk_load(uint it, uint c)
{
    uint sb = it >> 2, n = (it >> 1) & 1u, q = it & 1u;
    [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
        uint i = c * HK_NROWS + r, b = row_byte[r] + sb * 210u;
        // every window starts a multiple of 8 bytes into the block: 2 bytes into a word with it
        uint wa = (b + 64u * n + 16u * q) >> 2, wb = wa + 8u, wh = (b + 128u + 32u * n + 16u * q) >> 2;
        uint ws = (b + 192u + 8u * n) >> 2;
        hk_qla[i] = uvec4(hk_w32(r, wa), hk_w32(r, wa + 1u), hk_w32(r, wa + 2u), hk_w32(r, wa + 3u));
        hk_qlb[i] = uvec4(hk_w32(r, wb), hk_w32(r, wb + 1u), hk_w32(r, wb + 2u), hk_w32(r, wb + 3u));
        hk_qh[i] = uvec4(hk_w32(r, wh), hk_w32(r, wh + 1u), hk_w32(r, wh + 2u), hk_w32(r, wh + 3u));
        hk_sc[i] = uvec2(hk_w32(r, ws), hk_w32(r, ws + 1u));
        if ((b & 2u) != 0u)
            hk_e[i] = uvec4(hk_w32(r, wa + 4u), hk_w32(r, wb + 4u), hk_w32(r, wh + 4u), hk_w32(r, ws + 2u));
        hk_dbits[i] = hk_w16(r, (b + 208u) >> 1); // as hk_q6k_d
    }
}

// Staged x carries each block's two half-block sums of xq (16 values each, |sum| <= 2048) as the
// low and high 16 bits of its sums word (hk_stage_x): exact integers, so the same bits.
const bool HK_XSUMS = true;
uint hk_xsum(uvec4 h0, uvec4 h1, float d)
{
    const uvec4 ones = uvec4(0x01010101u);
    return (uint(hk_dot16(ones, h0, 0)) & 0xFFFFu) | (uint(hk_dot16(ones, h1, 0)) << 16);
}

void hk_compute(uint it, uint c)
{
    uint sb = it >> 2, q = it & 1u, xb = hk_item_block(it); // group g: block xb + g
    uvec4 g0[HK_NROWS], g1[HK_NROWS], g2[HK_NROWS], g3[HK_NROWS];
    vec4 wsc[HK_NROWS];
    [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
        uint i = c * HK_NROWS + r;
        bool odd = ((row_byte[r] + sb * 210u) & 2u) != 0u;
        hk_q6k_groups(hk_q6k_shift(hk_qla[i], hk_e[i].x, odd), hk_q6k_shift(hk_qlb[i], hk_e[i].y, odd),
                      hk_q6k_shift(hk_qh[i], hk_e[i].z, odd), g0[r], g1[r], g2[r], g3[r]);
        precise vec4 d_sc = hk_half(hk_dbits[i]) * hk_q6k_scales_f(hk_q6k_shift2(hk_sc[i], hk_e[i].w, odd), q);
        wsc[r] = d_sc;
    }
    const uvec4 ones = uvec4(0x01010101u);
    [[unroll]] for (uint t = 0; t < HK_NTOK; t++) {
        uvec4 x0 = hk_x16(t, xb, q), x1 = hk_x16(t, xb + 1u, q), x2 = hk_x16(t, xb + 2u, q), x3 = hk_x16(t, xb + 3u, q);
        // the groups' sum(xq): staged, summed once when they were staged (hk_xsum)
        vec4 dx;
        ivec4 sx;
        if (HK_XSTAGE_BLOCKS > 0u) {
            uvec4 a = hk_xaux(t, xb), b = hk_xaux(t, xb + 2u);
            dx = uintBitsToFloat(uvec4(a.xy, b.xy));
            sx = ivec4(uvec4(a.zw, b.zw) << (16u - 16u * q)) >> 16;
        } else {
            dx = vec4(hk_xd2(t, xb), hk_xd2(t, xb + 2u));
            sx = ivec4(hk_dot16(ones, x0, 0), hk_dot16(ones, x1, 0), hk_dot16(ones, x2, 0), hk_dot16(ones, x3, 0));
        }
        ivec4 base = HK_I2F_BIAS - 32 * sx;
        [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
            precise float sum = acc[r * HK_NTOK + t];
            sum = fma(wsc[r].x * dx.x, hk_biased_float(hk_dot16(g0[r], x0, base.x)), sum);
            sum = fma(wsc[r].y * dx.y, hk_biased_float(hk_dot16(g1[r], x1, base.y)), sum);
            sum = fma(wsc[r].z * dx.z, hk_biased_float(hk_dot16(g2[r], x2, base.z)), sum);
            sum = fma(wsc[r].w * dx.w, hk_biased_float(hk_dot16(g3[r], x3, base.w)), sum);
            acc[r * HK_NTOK + t] = sum;
        }
    }
}
#else
void hk_item(uint it)
{
    uint sb = it >> 2, n = (it >> 1) & 1u, q = it & 1u;
    uint x4i = x_base / 4u + sb * 64u + n * 32u + q * 4u;
    vec4 xg[16]; // group g, words i: values 128n + 32g + 16q + 4i ..
    for (uint g = 0; g < 4; g++)
        for (uint i = 0; i < 4; i++)
            xg[4u * g + i] = x4[x4i + 8u * g + i];
    for (uint r = 0; r < HK_NROWS; r++) {
        uint b = row_byte[r] + sb * 210u;
        uvec4 qs[4];
        hk_q6k_quants(b, n, q, qs[0], qs[1], qs[2], qs[3]);
        vec4 dots = vec4(0.0);
        for (uint g = 0; g < 4; g++)
            for (uint i = 0; i < 4; i++)
                dots[g] += dot(hk_lanes(qs[g][i], 0xFFu) - 32.0, xg[4u * g + i]);
        vec4 sc = hk_q6k_scales(hk_q6k_window8(b + 192u + 8u * n), q);
        acc[r] += hk_q6k_d(b) * dot(sc, dots);
    }
}
#endif
#endif // HK_Q6_K_PURE
