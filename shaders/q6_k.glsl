// GGUF Q6_K decode: super-block of 256 = u8 ql[128], u8 qh[64], i8 scales[16], f16 d
// (210 bytes = 105 u16). Value 128*n + 32*g + l (n: half, g: 0..3, l: 0..31) is
// d * scales[8n + 2g + l/16] * (q - 32), q = nibble of ql[64n + 32*(g&1) + l] (high nibble when
// g >= 2) | ((qh[32n + l] >> 2g) & 3) << 4. A unit is one such (n, g): 32 values.
#define HK_Q6_K_U16 105u
#define HK_UNIT_VALUES 32u

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

// The 64 6-bit quants of item (n, q) of the block at byte b, one byte each: group g (g0..g3)
// word i holds values 128n + 32g + 16q + 4i .. +3 (before the -32).
void hk_q6k_quants(uint b, uint n, uint q, out uvec4 g0, out uvec4 g1, out uvec4 g2, out uvec4 g3)
{
    uvec4 qla = hk_q6k_window(b + 64u * n + 16u * q);
    uvec4 qlb = hk_q6k_window(b + 64u * n + 32u + 16u * q);
    uvec4 qh = hk_q6k_window(b + 128u + 32u * n + 16u * q);
    g0 = (qla & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4);
    g1 = (qlb & 0x0F0F0F0Fu) | (((qh >> 2) & 0x03030303u) << 4);
    g2 = ((qla >> 4) & 0x0F0F0F0Fu) | (((qh >> 4) & 0x03030303u) << 4);
    g3 = ((qlb >> 4) & 0x0F0F0F0Fu) | (((qh >> 6) & 0x03030303u) << 4);
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

// sum((q - 32) * xq) = dot(q, xq) - 32 * sum(xq), per group g of 16 values (one Q8_1 half-block).
// Every row's quants, scales and d are loaded once (hk_load) and met by each token's activation
// (hk_compute); per (row, token) the same f32 expression whatever HK_NTOK (a precise sum:
// matvec.comp).
uvec4 hk_g0[HK_NROWS], hk_g1[HK_NROWS], hk_g2[HK_NROWS], hk_g3[HK_NROWS]; // groups 0..3
vec4 hk_wsc[HK_NROWS];
float hk_wd[HK_NROWS];

void hk_load(uint it)
{
    uint sb = it >> 2, n = (it >> 1) & 1u, q = it & 1u;
    [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
        uint b = row_byte[r] + sb * 210u;
        hk_q6k_quants(b, n, q, hk_g0[r], hk_g1[r], hk_g2[r], hk_g3[r]);
        hk_wsc[r] = hk_q6k_scales(hk_q6k_window8(b + 192u + 8u * n), q);
        hk_wd[r] = hk_q6k_d(b);
    }
}

void hk_compute(uint it)
{
    uint q = it & 1u, xb = hk_item_block(it); // group g: block xb + g
    const uvec4 ones = uvec4(0x01010101u);
    [[unroll]] for (uint t = 0; t < HK_NTOK; t++) {
        vec4 dx = vec4(hk_xd(t, xb), hk_xd(t, xb + 1u), hk_xd(t, xb + 2u), hk_xd(t, xb + 3u));
        uvec4 x0 = hk_x16(t, xb, q), x1 = hk_x16(t, xb + 1u, q), x2 = hk_x16(t, xb + 2u, q), x3 = hk_x16(t, xb + 3u, q);
        vec4 xs = 32.0 * vec4(float(hk_dot16(ones, x0)), float(hk_dot16(ones, x1)), float(hk_dot16(ones, x2)),
                              float(hk_dot16(ones, x3)));
        [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
            vec4 idot = vec4(float(hk_dot16(hk_g0[r], x0)), float(hk_dot16(hk_g1[r], x1)),
                             float(hk_dot16(hk_g2[r], x2)), float(hk_dot16(hk_g3[r], x3)));
            vec4 g4 = dx * (idot - xs);
            precise float sum = acc[r * HK_NTOK + t] + hk_wd[r] * (hk_wsc[r].x * g4.x + hk_wsc[r].y * g4.y +
                                                                   hk_wsc[r].z * g4.z + hk_wsc[r].w * g4.w);
            acc[r * HK_NTOK + t] = sum;
        }
    }
}

void hk_item(uint it)
{
    hk_load(it);
    hk_compute(it);
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
