// MMQ weight staging, split in two halves so that a stage's global loads can be issued before the
// previous stage's compute and consumed after it (register double buffering, mmq.comp):
//   w_load(n0, kb0, wbase)  global -> registers (the raw words of KS 32-value blocks of BN rows);
//                           no arithmetic on the loaded values, so nothing waits for them here
//   w_store()               registers -> the int8 tile sb (eight words of four signed quants per
//                           block and row) and the block factors: swa (Q8_0) or sw = (a, b)
// Value i of a block is
//   Q8_0: a * q_i
//   Q4_K: a * q_i + b              (a = d*sc, b = -dmin*m of the 32-value sub-block)
//   Q6_K: a * q_i for i < 16, b * q_i for i >= 16  (d times the two 16-value scales)
// with q_i the quant in sb. Consecutive invocations take consecutive bytes of a row (coalesced
// loads); rows past n stage zeros. Needs w16/w32/w128, sb, swa or sw, KS, BN, SV, WG, pc.wload, tid.
#include "w16.glsl"
#define HK_WIDE_WEIGHT_LOADS
#include "gemm_q4k.glsl"

#if defined(HK_Q8_0)
#define HK_MMQ_BLOCK_VALUES 32u
#define HK_MMQ_BLOCK_U16 17u
// a block: f16 d, then 32 quant bytes from byte 2: quant word w of block b starts at byte
// 34b + 2 + 4w, 2-byte aligned only, so it is read as two 16-bit halves (as many load
// instructions as two aligned words and a funnel shift, and never a byte past the block)
const uint WQU = (BN * KS * 8u + WG - 1u) / WG; // quant words per invocation and stage
const uint WDU = (BN * KS + WG - 1u) / WG;      // block scales per invocation and stage
uvec2 wq_raw[WQU];
uint wd_raw[WDU];

void w_load(uint n0, uint kb0, uint wbase)
{
    const uint KB = pc.k / 32u, row_u16 = KB * 17u;
    [[unroll]] for (uint j = 0; j < WQU; j++) {
        uint it = tid + j * WG, r = it / (8u * KS), kk = (it / 8u) % KS, w = it % 8u;
        uvec2 v = uvec2(0u);
        if (it < BN * KS * 8u && n0 + r < pc.n && kb0 + kk < KB) {
            uint b = wbase + (n0 + r) * row_u16 + (kb0 + kk) * 17u + 1u + 2u * w;
            v = uvec2(w16[b], w16[b + 1u]);
        }
        wq_raw[j] = v;
    }
    [[unroll]] for (uint j = 0; j < WDU; j++) {
        uint it = tid + j * WG, r = it / KS, kk = it % KS;
        uint v = 0u;
        if (it < BN * KS && n0 + r < pc.n && kb0 + kk < KB)
            v = uint(w16[wbase + (n0 + r) * row_u16 + (kb0 + kk) * 17u]);
        wd_raw[j] = v;
    }
}

void w_store()
{
    [[unroll]] for (uint j = 0; j < WQU; j++) {
        uint it = tid + j * WG, r = it / (8u * KS), kk = (it / 8u) % KS, w = it % 8u;
        if (it < BN * KS * 8u)
            sb[r * SV + 2u * kk + (w >> 2)][w & 3u] = wq_raw[j].x | (wq_raw[j].y << 16);
    }
    [[unroll]] for (uint j = 0; j < WDU; j++) {
        uint it = tid + j * WG;
        if (it < BN * KS)
            swa[(it % KS) * BN + it / KS] = hk_half(wd_raw[j]);
    }
}
#elif defined(HK_Q4_K)
#define HK_MMQ_BLOCK_VALUES 256u
#define HK_MMQ_BLOCK_U16 72u
// A super-block is 144 bytes = nine 16-byte chunks: the header (f16 d, f16 dmin, 12 scale bytes),
// then qs: chunk 1 + q holds qs bytes 16q .. 16q+15, whose low nibbles are values 16(q%2) ..
// 16(q%2)+15 of sub-block 2(q/2) and whose high nibbles the same values of sub-block 2(q/2) + 1.
// So every chunk decodes on its own: a stage of KS (even) sub-blocks j0 .. j0+KS-1 is the header
// and the KS chunks 1 + j0 .. j0 + KS of each row. A chunk is read as one 16-byte load where the
// view is 16-byte aligned (pc.wload 2: every super-block then is, 144 = 9 x 16), four 32-bit
// loads where it is 4-byte aligned (1), else eight 16-bit loads (0).
const uint WHU = (BN + WG - 1u) / WG;      // headers per invocation and stage
const uint WCU = (BN * KS + WG - 1u) / WG; // qs chunks per invocation and stage
uvec4 wh_raw[WHU], wc_raw[WCU];
uint w_j0; // first sub-block of the staged super-block this stage covers

void w_load(uint n0, uint kb0, uint wbase)
{
    const uint row_u16 = (pc.k / 256u) * 72u, sb16 = (kb0 >> 3) * 72u;
    w_j0 = kb0 & 7u;
    [[unroll]] for (uint j = 0; j < WHU; j++) {
        uint it = tid + j * WG;
        uvec4 v = uvec4(0u);
        if (it < BN && n0 + it < pc.n)
            v = hk_w_ld16(wbase + (n0 + it) * row_u16 + sb16, pc.wload);
        wh_raw[j] = v;
    }
    [[unroll]] for (uint j = 0; j < WCU; j++) {
        uint it = tid + j * WG, r = it / KS, c = it % KS;
        uvec4 v = uvec4(0u);
        if (it < BN * KS && n0 + r < pc.n)
            v = hk_w_ld16(wbase + (n0 + r) * row_u16 + sb16 + 8u * (1u + w_j0 + c), pc.wload);
        wc_raw[j] = v;
    }
}

void w_store()
{
    [[unroll]] for (uint j = 0; j < WHU; j++) {
        uint r = tid + j * WG;
        if (r < BN) {
            uvec4 h = wh_raw[j];
            uvec2 sc, mn;
            hk_q4k_scales8(h, sc, mn);
            vec2 dm = unpackHalf2x16(h.x); // d, dmin
            [[unroll]] for (uint kk = 0; kk < KS; kk++) {
                uvec2 s = hk_q4k_scale_of(sc, mn, w_j0 + kk);
                sw[kk * BN + r] = vec2(dm.x * float(s.x), -dm.y * float(s.y));
            }
        }
    }
    [[unroll]] for (uint j = 0; j < WCU; j++) {
        uint it = tid + j * WG, r = it / KS, c = it % KS;
        if (it < BN * KS) {
            uvec4 v = wc_raw[j];
            // chunk 1 + j0 + c: j0 and KS are even, so sub-blocks c & ~1 and (c & ~1) + 1 of the
            // stage, values 16 (c & 1) ..
            uint o = r * SV + 2u * (c & ~1u) + (c & 1u);
            sb[o] = v & 0x0F0F0F0Fu;
            sb[o + 2u] = (v >> 4) & 0x0F0F0F0Fu;
        }
    }
}
#elif defined(HK_Q6_K)
#define HK_MMQ_BLOCK_VALUES 256u
#define HK_MMQ_BLOCK_U16 105u
// A super-block is 210 bytes (only 2-byte aligned: read through 16-bit loads): ql[128], qh[64],
// i8 scales[16], f16 d. Sub-block j = 4h + g (half h, g 0..3), value l (0..31) is
// (ql[64h + 32(g&1) + l] nibble g>>1) | ((qh[32h + l] >> 2g) & 3) << 4, minus 32; its scales are
// scales[2j] (l < 16) and scales[2j + 1]. A unit (row, half, l/4) reads the ql words at 64h + l
// and 64h + 32 + l and the qh word at 32h + l, which hold value l .. l+3 of all four sub-blocks of
// the half; a stage of KS sub-blocks (2, 4: one half; 8: both) decodes those it covers.
const uint NH = (KS + 3u) / 4u;                // halves a stage touches
const uint GS = KS / NH;                       // sub-blocks of each half in the stage
const uint WQU = (BN * NH * 8u + WG - 1u) / WG; // (row, half, word) units per invocation
const uint WSU = (BN + WG - 1u) / WG;          // rows of scales per invocation
uvec2 wl_raw[WQU], wm_raw[WQU], wx_raw[WQU];   // ql (g even), ql (g odd), qh: two halves each
uint ws_raw[WSU * KS], wd_raw[WSU];
uint w_j0;

void w_load(uint n0, uint kb0, uint wbase)
{
    const uint row_u16 = (pc.k / 256u) * 105u, sb16 = (kb0 >> 3) * 105u;
    w_j0 = kb0 & 7u;
    [[unroll]] for (uint j = 0; j < WQU; j++) {
        uint it = tid + j * WG, r = it / (8u * NH), h = (w_j0 >> 2) + (it / 8u) % NH, lw = it % 8u;
        uvec2 a = uvec2(0u), b = uvec2(0u), c = uvec2(0u);
        if (it < BN * NH * 8u && n0 + r < pc.n) {
            uint base = wbase + (n0 + r) * row_u16 + sb16;
            uint ql = base + 32u * h + 2u * lw, qh = base + 64u + 16u * h + 2u * lw;
            a = uvec2(w16[ql], w16[ql + 1u]);
            b = uvec2(w16[ql + 16u], w16[ql + 17u]);
            c = uvec2(w16[qh], w16[qh + 1u]);
        }
        wl_raw[j] = a;
        wm_raw[j] = b;
        wx_raw[j] = c;
    }
    [[unroll]] for (uint j = 0; j < WSU; j++) {
        uint r = tid + j * WG;
        uint base = wbase + (n0 + r) * row_u16 + sb16;
        [[unroll]] for (uint kk = 0; kk < KS; kk++) // scales[2j], scales[2j + 1] of sub-block j
            ws_raw[j * KS + kk] = 0u;
        wd_raw[j] = 0u;
        if (r < BN && n0 + r < pc.n) {
            [[unroll]] for (uint kk = 0; kk < KS; kk++)
                ws_raw[j * KS + kk] = uint(w16[base + 96u + w_j0 + kk]);
            wd_raw[j] = uint(w16[base + 104u]);
        }
    }
}

void w_store()
{
    [[unroll]] for (uint j = 0; j < WQU; j++) {
        uint it = tid + j * WG, r = it / (8u * NH), hh = (it / 8u) % NH, lw = it % 8u;
        if (it < BN * NH * 8u) {
            uint a = wl_raw[j].x | (wl_raw[j].y << 16), b = wm_raw[j].x | (wm_raw[j].y << 16);
            uint c = wx_raw[j].x | (wx_raw[j].y << 16);
            [[unroll]] for (uint g = 0; g < GS; g++) {
                uint gg = (w_j0 & 3u) + g, kk = hh * GS + g;
                uint q = ((((gg & 1u) != 0u ? b : a) >> (4u * (gg >> 1))) & 0x0F0F0F0Fu) |
                         (((c >> (2u * gg)) & 0x03030303u) << 4);
                // q - 32 per byte without borrows: flip bit 5, then copy it into bits 6 and 7
                q ^= 0x20202020u;
                sb[r * SV + 2u * kk + (lw >> 2)][lw & 3u] = q | ((q & 0x20202020u) * 6u);
            }
        }
    }
    [[unroll]] for (uint j = 0; j < WSU; j++) {
        uint r = tid + j * WG;
        if (r < BN) {
            float d = hk_half(wd_raw[j]);
            [[unroll]] for (uint kk = 0; kk < KS; kk++) {
                uint s = ws_raw[j * KS + kk];
                sw[kk * BN + r] = vec2(d * float(int(s << 24) >> 24), d * float(int(s << 16) >> 24));
            }
        }
    }
}
#else
#error "define HK_Q8_0, HK_Q4_K or HK_Q6_K"
#endif
