// MMQ weight staging (mmq.comp), in two halves so that a k step's global loads can be issued
// before the previous step's multiplies and consumed after them (register double buffering):
//   w_load(st)   global -> registers: the raw bytes of k step st (KS blocks of 32 values) of the
//                tile's BN weight rows; nothing is computed from them here
//   w_store(st)  registers -> shared: the quants as signed bytes (sb, the int8 operand, row r,
//                block kk at word r * STRIDE + 8 kk) and each block's two f32 factors (w_set)
// Value i of 32-value block kk of a row is
//   Q8_0: wa * q_i                                  (wa = d)
//   Q4_K, Q5_K: wa * q_i + wb                       (wa = d*sc, wb = -dmin*m of the sub-block)
//   Q6_K: wa * q_i for i < 16, wb * q_i for i >= 16 (d times the two 16-value scales)
// Consecutive invocations load consecutive bytes of a row (the loads of a subgroup cover a few
// contiguous runs, not one cache line per lane); rows past n stage zeros. GGUF blocks are only
// 2-byte aligned: the loads are as wide as the view's alignment allows (WLOAD, a constant): Q4_K
// and Q5_K 16-byte chunks, Q8_0 and Q6_K 32-bit words where every row starts on 4 bytes, else 16-bit
// words: fewer load instructions than 16-bit words throughout. The width is a constant rather
// than a branch on a push constant, so that each pipeline holds only its own loads. Needs
// w16/w32/w128, sb, w_set, STRIDE, BN, KS, WG, tid, n0, w_row0 (the tile's first row's first
// 16-bit word), row_u16, pc.n, KB.
#define HK_WIDE_WEIGHT_LOADS
#include "gemm_q4k.glsl"
#include "w16.glsl"

// the two 16-bit words at u16 index i16 as one little-endian word
uint hk_mmq_pair(uint i16) { return uint(w16[i16]) | (uint(w16[i16 + 1u]) << 16); }

#if defined(HK_Q8_0)
#define HK_MMQ_BLOCK_VALUES 32u
#define HK_MMQ_BLOCK_U16 17u
// Q8_0: block of 32 = f16 d, i8 qs[32] (34 bytes, 17 u16). A unit is half a block (4 quant words:
// 16 values) and, for the first half, the block's d. With WLOAD 1 (the view 4-byte aligned and
// k / 32 even, so that every row starts on 4 bytes) an even block starts on 4 bytes and an odd one
// 2 bytes past: each unit takes four aligned words and one 16-bit word (an even block's quants
// are the words shifted by 2 bytes, the last two bytes from the 16-bit word, so that nothing past
// the block is read; an odd block's d is the 16-bit word), 5 loads against 9 through 16-bit words.
const uint WU = (BN * KS * 2u + WG - 1u) / WG;
uvec4 wq_raw[WU];
uint wd_raw[WU];

uint hk_mmq_funnel(uint lo, uint hi) { return (lo >> 16) | (hi << 16); }

void w_load(uint st)
{
    [[unroll]] for (uint j = 0; j < WU; j++) {
        uint it = tid + j * WG, r = it / (KS * 2u), kk = (it / 2u) % KS, p = it % 2u, kb = st * KS + kk;
        uvec4 q = uvec4(0u);
        uint d = 0u;
        if (it < BN * KS * 2u && n0 + r < pc.n && kb < KB && !PROBE_NO_GLOBAL) {
            uint b = w_row0 + r * row_u16 + kb * 17u;
            if (WLOAD == 1u) {
                uint odd = kb & 1u, a0 = ((b + odd) >> 1) + 4u * p;
                uvec4 a = uvec4(w32[a0], w32[a0 + 1u], w32[a0 + 2u], w32[a0 + 3u]);
                uint e = uint(w16[odd != 0u ? b : b + 8u * p + 8u]);
                if (odd != 0u) {
                    q = a;
                    d = e;
                } else {
                    q = uvec4(hk_mmq_funnel(a.x, a.y), hk_mmq_funnel(a.y, a.z), hk_mmq_funnel(a.z, a.w),
                              hk_mmq_funnel(a.w, e));
                    d = a.x & 0xFFFFu;
                }
            } else {
                uint q16 = b + 1u + 8u * p;
                q = uvec4(hk_mmq_pair(q16), hk_mmq_pair(q16 + 2u), hk_mmq_pair(q16 + 4u), hk_mmq_pair(q16 + 6u));
                if (p == 0u)
                    d = uint(w16[b]);
            }
        }
        wq_raw[j] = q;
        wd_raw[j] = d;
    }
}

void w_store(uint st)
{
    [[unroll]] for (uint j = 0; j < WU; j++) {
        uint it = tid + j * WG, r = it / (KS * 2u), kk = (it / 2u) % KS, p = it % 2u;
        if (it < BN * KS * 2u) {
            uint o = r * STRIDE + kk * 8u + 4u * p;
            [[unroll]] for (uint w = 0; w < 4u; w++)
                sb[o + w] = wq_raw[j][w];
            if (p == 0u)
                w_set(kk, r, vec2(hk_half(wd_raw[j]), 0.0));
        }
    }
}
#elif defined(HK_Q4_K) || defined(HK_Q5_K)
#define HK_MMQ_BLOCK_VALUES 256u
// Q4_K: super-block of 256 = 144 bytes, nine 16-byte chunks: the header (f16 d, f16 dmin,
// scales[12]), then qs: chunk 1 + q holds qs bytes 16q .. 16q+15, whose low nibbles are values
// 16(q%2) .. 16(q%2)+15 of sub-block 2(q/2) and whose high nibbles the same values of sub-block
// 2(q/2)+1. A step of KS sub-blocks (KS even, j0 = the step's first sub-block in its super-block)
// takes qs chunks j0 .. j0+KS-1 of each row. A unit is a pair of chunks, j0 + 2p and j0 + 2p + 1
// (the whole of sub-blocks j0 + 2p and j0 + 2p + 1), and its super-block's header: every invocation
// decodes the factors of its own two sub-blocks (with a unit of one chunk, half the invocations
// would load and decode a header for nothing).
// Q5_K: super-block of 256 = 176 bytes, eleven chunks: Q4_K's header, then qh[32] (chunks 1 and 2),
// then Q4_K's qs (chunk 3 + q). Bit j of qh[l] is the 5th bit of value l of sub-block j, so chunk c
// of a unit's pair (values 16c .. 16c+15 of its two sub-blocks) takes qh chunk c: a unit loads both.
#ifdef HK_Q5_K
#define HK_MMQ_BLOCK_U16 88u
const uint QS_CHUNK = 3u;
#else
#define HK_MMQ_BLOCK_U16 72u
const uint QS_CHUNK = 1u;
#endif
const uint WU = (BN * KS / 2u + WG - 1u) / WG;
uvec4 wh_raw[WU], wc_raw[WU][2];
#ifdef HK_Q5_K
uvec4 wx_raw[WU][2]; // qh chunks 0 and 1
#endif

void w_load(uint st)
{
    uint sbk = (st * KS) / 8u, j0 = (st * KS) % 8u;
    [[unroll]] for (uint j = 0; j < WU; j++) {
        uint it = tid + j * WG, r = it / (KS / 2u), p = it % (KS / 2u);
        uvec4 h = uvec4(0u), c0 = uvec4(0u), c1 = uvec4(0u);
#ifdef HK_Q5_K
        uvec4 x0 = uvec4(0u), x1 = uvec4(0u);
#endif
        if (it < BN * KS / 2u && n0 + r < pc.n && !PROBE_NO_GLOBAL) {
            uint b = w_row0 + r * row_u16 + sbk * HK_MMQ_BLOCK_U16, c = b + 8u * (QS_CHUNK + j0 + 2u * p);
            h = hk_w_ld16(b, WLOAD);
            c0 = hk_w_ld16(c, WLOAD);
            c1 = hk_w_ld16(c + 8u, WLOAD);
#ifdef HK_Q5_K
            x0 = hk_w_ld16(b + 8u, WLOAD);
            x1 = hk_w_ld16(b + 16u, WLOAD);
#endif
        }
        wh_raw[j] = h;
        wc_raw[j][0] = c0;
        wc_raw[j][1] = c1;
#ifdef HK_Q5_K
        wx_raw[j][0] = x0;
        wx_raw[j][1] = x1;
#endif
    }
}

void w_store(uint st)
{
    uint j0 = (st * KS) % 8u;
    [[unroll]] for (uint j = 0; j < WU; j++) {
        uint it = tid + j * WG, r = it / (KS / 2u), p = it % (KS / 2u);
        if (it < BN * KS / 2u) {
            // sub-block 2p at words o .. o + 7 (chunk 2p's low nibbles, then chunk 2p + 1's), 2p + 1
            // at o + 8 .. o + 15 (their high nibbles)
            uint o = r * STRIDE + 16u * p;
            uvec4 q[4] = uvec4[4](wc_raw[j][0] & 0x0F0F0F0Fu, wc_raw[j][1] & 0x0F0F0F0Fu,
                                  (wc_raw[j][0] >> 4) & 0x0F0F0F0Fu, (wc_raw[j][1] >> 4) & 0x0F0F0F0Fu);
#ifdef HK_Q5_K
            // the 5th bits: bit j0 + 2p (low nibbles) and j0 + 2p + 1 (high) of each qh byte
            [[unroll]] for (uint i = 0; i < 4u; i++)
                q[i] |= ((wx_raw[j][i & 1u] >> (j0 + 2u * p + (i >> 1))) & 0x01010101u) << 4;
#endif
            [[unroll]] for (uint i = 0; i < 4u; i++)
                [[unroll]] for (uint w = 0; w < 4u; w++)
                    sb[o + 4u * i + w] = q[i][w];
            uvec4 h = wh_raw[j];
            uvec2 sc, mn;
            hk_q4k_scales8(h, sc, mn);
            vec2 dm = unpackHalf2x16(h.x);
            [[unroll]] for (uint s = 0; s < 2u; s++) {
                uvec2 f = hk_q4k_scale_of(sc, mn, j0 + 2u * p + s);
                w_set(2u * p + s, r, vec2(dm.x * float(f.x), -dm.y * float(f.y)));
            }
        }
    }
}
#elif defined(HK_Q6_K)
#define HK_MMQ_BLOCK_VALUES 256u
#define HK_MMQ_BLOCK_U16 105u
// Q6_K: super-block of 256 = u8 ql[128], u8 qh[64], i8 scales[16], f16 d (105 u16). Value l of
// 32-value block 4h + g (h: half 0..1, g: 0..3) is (ql[64h + 32(g&1) + l] nibble g>>1) |
// ((qh[32h + l] >> 2g) & 3) << 4, minus 32; its scales are scales[8h + 2g] (l < 16) and
// scales[8h + 2g + 1]. The four blocks of a half share their bytes: a unit is values l = 4 QW p
// .. 4 QW p + 4 QW - 1 (p < 8 / QW) of the step's blocks of one half (QG of them from block g0),
// from QW words of each 32 ql bytes and QW qh words, and the half's scales and d for p = 0; it
// stores QW consecutive words of each block at once: fewer, wider loads and stores than units of
// one word. QW is the widest of 4, 2, 1 that leaves no invocation without a unit (idle invocations
// cost more than the wider units gain). A step is two blocks of a half (KS 2), one half (KS 4) or
// both (KS 8). With WLOAD 1 (the view on 4 bytes, k / 256 even: every row on 4 bytes) the even
// super-blocks (210 bytes each) start on 4 bytes and are read in 32-bit words.
const uint QH = KS >= 4u ? KS / 4u : 1u; // halves per step
const uint QG = KS >= 4u ? 4u : KS;      // blocks per half and step
const uint QW = BN * QH * 2u >= WG ? 4u : BN * QH * 4u >= WG ? 2u : 1u;
const uint UP = 8u / QW; // units per half of a row
const uint WU = (BN * QH * UP + WG - 1u) / WG;
uint wq_raw[WU][3][QW]; // ql words QW p .. of the half's first 32 bytes, of its second 32, qh words
uvec2 ws_raw[WU];       // scales[8h .. 8h+7] as two words (p = 0)
uint wd_raw[WU];        // d (p = 0)

void w_load(uint st)
{
    uint sbk = (st * KS) / 8u, h0 = ((st * KS) % 8u) / 4u;
    [[unroll]] for (uint j = 0; j < WU; j++) {
        uint it = tid + j * WG, r = it / (QH * UP), hs = (it / UP) % QH, p = it % UP;
        uint q[3][QW];
        [[unroll]] for (uint a = 0; a < 3u; a++)
            [[unroll]] for (uint w = 0; w < QW; w++)
                q[a][w] = 0u;
        uvec2 s = uvec2(0u);
        uint d = 0u;
        if (it < BN * QH * UP && n0 + r < pc.n && !PROBE_NO_GLOBAL) {
            uint h = h0 + hs, b = w_row0 + r * row_u16 + sbk * 105u;
            // the unit's first words in the super-block (its ql runs, its qh run; the scales at
            // word 48 + 2h), read as words or as pairs of 16-bit words
            const uint o[3] = uint[3](16u * h + QW * p, 16u * h + 8u + QW * p, 32u + 8u * h + QW * p);
            // d loaded inside each branch: one load after both slows the 16-bit branch
            if (WLOAD == 1u && (sbk & 1u) == 0u) { // the super-block on 4 bytes: 32-bit words
                uint b2 = b >> 1;
                [[unroll]] for (uint a = 0; a < 3u; a++)
                    [[unroll]] for (uint w = 0; w < QW; w++)
                        q[a][w] = w32[b2 + o[a] + w];
                if (p == 0u) {
                    s = uvec2(w32[b2 + 48u + 2u * h], w32[b2 + 49u + 2u * h]);
                    d = uint(w16[b + 104u]);
                }
            } else {
                [[unroll]] for (uint a = 0; a < 3u; a++)
                    [[unroll]] for (uint w = 0; w < QW; w++)
                        q[a][w] = hk_mmq_pair(b + 2u * (o[a] + w));
                if (p == 0u) {
                    s = uvec2(hk_mmq_pair(b + 2u * (48u + 2u * h)), hk_mmq_pair(b + 2u * (49u + 2u * h)));
                    d = uint(w16[b + 104u]);
                }
            }
        }
        wq_raw[j] = q;
        ws_raw[j] = s;
        wd_raw[j] = d;
    }
}

void w_store(uint st)
{
    uint g0 = (st * KS) % 4u; // the step's first block in its half (KS 2: 0 or 2)
    [[unroll]] for (uint j = 0; j < WU; j++) {
        uint it = tid + j * WG, r = it / (QH * UP), hs = (it / UP) % QH, p = it % UP;
        if (it < BN * QH * UP) {
            [[unroll]] for (uint g = 0; g < QG; g++) {
                uint gh = g0 + g; // the block in its half
                uint o = r * STRIDE + (QG * hs + g) * 8u + QW * p;
                [[unroll]] for (uint w = 0; w < QW; w++) {
                    uint ql = (gh & 1u) != 0u ? wq_raw[j][1][w] : wq_raw[j][0][w];
                    uint q = (ql >> (4u * (gh >> 1))) & 0x0F0F0F0Fu;
                    q |= ((wq_raw[j][2][w] >> (2u * gh)) & 0x03030303u) << 4;
                    // q - 32 per byte without borrows: flip bit 5, then copy it into bits 6 and 7
                    q ^= 0x20202020u;
                    sb[o + w] = q | ((q & 0x20202020u) * 6u);
                }
            }
            if (p == 0u) {
                float d = hk_half(wd_raw[j]);
                [[unroll]] for (uint g = 0; g < QG; g++) {
                    uint gh = g0 + g;
                    uint pair = ((gh < 2u ? ws_raw[j].x : ws_raw[j].y) >> (16u * (gh & 1u))) & 0xFFFFu;
                    w_set(QG * hs + g, r, vec2(d * float(hk_lo_i8(pair)), d * float(hk_hi_i8(pair))));
                }
            }
        }
    }
}
#else
#error "define HK_Q8_0, HK_Q4_K, HK_Q5_K or HK_Q6_K"
#endif
