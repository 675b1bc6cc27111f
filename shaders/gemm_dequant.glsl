// Weight staging of the f16 GEMM (gemm_f16.comp), split in two halves so that a k step's global
// loads can be issued before the previous step's multiplies and consumed after them (register
// double buffering):
//   gw_load(col0, k0)  global -> registers: the raw bytes of weights k0 .. k0+BK-1 of the BN rows
//                      from col0; nothing is computed from them here
//   gw_store()         registers -> the f16 tile (tiles[SB0 + r * SS + v/8] holds values v .. v+7
//                      of row r), dequantized in f32 and rounded once to f16
// Consecutive invocations take consecutive bytes of a row; rows past n stage zeros. GGUF blocks
// are only 2-byte aligned: Q8_0 and Q6_K are read through 16-bit words, Q4_K, Q5_K and F16 in
// 16-byte chunks as the view's alignment allows (WLOAD). K_TAIL: the type takes any k (F16), so the last
// k step may run past k, and stages zeros there (x_load too). Needs w16/w32/w128, tiles, SB0, SS,
// BN, BK, WG, WLOAD, tid, pc.k, pc.n, pc.view_offset[0].
#define HK_WIDE_WEIGHT_LOADS
#include "gemm_q4k.glsl"

// 8 values as f16, in the order of k
uvec4 pack8(vec4 lo, vec4 hi)
{
    return uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw), packHalf2x16(hi.xy), packHalf2x16(hi.zw));
}

#if defined(HK_F16)
const bool K_TAIL = true;
#else
const bool K_TAIL = false; // k is a multiple of BK: the host halves BK until it is
#endif

#if defined(HK_Q8_0)
// Q8_0: block of 32 = f16 d, i8 qs[32] (17 u16); value i is d * qs[i]. A unit is 8 values: four
// 16-bit quant words and the block's d.
const uint GWU = (BN * (BK / 8u) + WG - 1u) / WG;
uvec4 gq_raw[GWU];
uint gd_raw[GWU];

void gw_load(uint col0, uint k0)
{
    [[unroll]] for (uint j = 0; j < GWU; j++) {
        uint it = tid + j * WG, r = it / (BK / 8u), kk = k0 + 8u * (it % (BK / 8u));
        uvec4 q = uvec4(0u);
        uint d = 0u;
        if (it < BN * (BK / 8u) && col0 + r < pc.n) {
            uint b = pc.view_offset[0] / 2u + ((col0 + r) * (pc.k / 32u) + kk / 32u) * 17u;
            uint q16 = b + 1u + (kk % 32u) / 2u;
            d = uint(w16[b]);
            q = uvec4(w16[q16], w16[q16 + 1u], w16[q16 + 2u], w16[q16 + 3u]);
        }
        gq_raw[j] = q;
        gd_raw[j] = d;
    }
}

void gw_store()
{
    [[unroll]] for (uint j = 0; j < GWU; j++) {
        uint it = tid + j * WG, r = it / (BK / 8u), c = it % (BK / 8u);
        if (it < BN * (BK / 8u)) {
            float d = hk_half(gd_raw[j]);
            uvec4 q = gq_raw[j];
            tiles[SB0 + r * SS + c] = pack8(d * hk_i8x4(q.x | (q.y << 16)), d * hk_i8x4(q.z | (q.w << 16)));
        }
    }
}
#elif defined(HK_Q4_K) || defined(HK_Q5_K)
// Q4_K: super-block of 256 = 144 bytes, nine 16-byte chunks: the header (f16 d, f16 dmin,
// scales[12]), then qs: chunk 1 + q holds qs bytes 16q .., whose low nibbles are values 16(q%2) ..
// 16(q%2)+15 of sub-block 2(q/2) and whose high nibbles the same values of sub-block 2(q/2)+1.
// Value i of sub-block j is d*sc_j*q - dmin*m_j. A unit is one qs chunk and its super-block's
// header: a step of BK >= 64 values (sub-blocks j0 .. j0 + BK/32 - 1, j0 even) takes qs chunks
// j0 .. j0 + BK/32 - 1 of each row, both nibbles; a step of 32 values (sub-block j0) the two
// chunks of its pair, one nibble.
// Q5_K: super-block of 256 = 176 bytes, eleven chunks: Q4_K's header, qh[32] (chunks 1 and 2),
// then Q4_K's qs (chunk 3 + q); bit j of qh[l] is the 5th bit (16) of value l of sub-block j. A
// unit also takes qh chunk q%2, which holds its values' bits.
#ifdef HK_Q5_K
const uint SB_U16 = 88u, QS_CHUNK = 3u; // a super-block's 16-bit words, its first qs chunk
#else
const uint SB_U16 = 72u, QS_CHUNK = 1u;
#endif
const uint NCH = BK >= 64u ? BK / 32u : 2u;   // chunks per row and step
const uint GWU = (BN * NCH + WG - 1u) / WG;
uvec4 gh_raw[GWU], gc_raw[GWU];
#ifdef HK_Q5_K
uvec4 gx_raw[GWU]; // the qh chunk
#endif
uint g_j0;

void gw_load(uint col0, uint k0)
{
    g_j0 = (k0 % 256u) / 32u;
    [[unroll]] for (uint j = 0; j < GWU; j++) {
        uint it = tid + j * WG, r = it / NCH, c = it % NCH;
        uvec4 h = uvec4(0u), v = uvec4(0u);
#ifdef HK_Q5_K
        uvec4 x = uvec4(0u);
#endif
        if (it < BN * NCH && col0 + r < pc.n) {
            uint b = pc.view_offset[0] / 2u + ((col0 + r) * (pc.k / 256u) + k0 / 256u) * SB_U16;
            uint q = BK >= 64u ? g_j0 + c : (g_j0 & ~1u) + c;
            h = hk_w_ld16(b, WLOAD);
            v = hk_w_ld16(b + 8u * (QS_CHUNK + q), WLOAD);
#ifdef HK_Q5_K
            x = hk_w_ld16(b + 8u * (1u + (q & 1u)), WLOAD);
#endif
        }
        gh_raw[j] = h;
        gc_raw[j] = v;
#ifdef HK_Q5_K
        gx_raw[j] = x;
#endif
    }
}

void gw_store()
{
    [[unroll]] for (uint j = 0; j < GWU; j++) {
        uint it = tid + j * WG, r = it / NCH, c = it % NCH;
        if (it < BN * NCH) {
            uvec4 h = gh_raw[j], v = gc_raw[j];
            uvec2 sc, mn;
            hk_q4k_scales8(h, sc, mn);
            vec2 dm = unpackHalf2x16(h.x);
            [[unroll]] for (uint nib = 0; nib < 2u; nib++) {
                // BK >= 64: sub-block j0 + (c & ~1) + nib, values 16 (c & 1) ..; BK 32: only the
                // nibble of sub-block j0, values 16 c ..
                if (BK < 64u && nib != (g_j0 & 1u))
                    continue;
                uint jj = BK >= 64u ? g_j0 + (c & ~1u) + nib : g_j0;
                uint vi = BK >= 64u ? (jj - g_j0) * 32u + 16u * (c & 1u) : 16u * c;
                uvec2 s = hk_q4k_scale_of(sc, mn, jj);
                float d = dm.x * float(s.x), m = dm.y * float(s.y);
                uvec4 q = (v >> (4u * nib)) & 0x0F0F0F0Fu;
#ifdef HK_Q5_K
                q |= ((gx_raw[j] >> jj) & 0x01010101u) << 4;
#endif
                uint o = SB0 + r * SS + vi / 8u;
                tiles[o] = pack8(d * hk_lanes(q.x, 0xFFu) - m, d * hk_lanes(q.y, 0xFFu) - m);
                tiles[o + 1u] = pack8(d * hk_lanes(q.z, 0xFFu) - m, d * hk_lanes(q.w, 0xFFu) - m);
            }
        }
    }
}
#elif defined(HK_Q6_K)
// Q6_K: super-block of 256 = u8 ql[128], u8 qh[64], i8 scales[16], f16 d (105 u16). Value
// 128h + 32g + l is d * scales[8h + 2g + l/16] * (q - 32), q = nibble (high when g >= 2) of
// ql[64h + 32(g&1) + l] | ((qh[32h + l] >> 2g) & 3) << 4. A unit is 8 values: four 16-bit words
// of ql, four of qh, the 16-bit word holding the scale byte, and d.
const uint GWU = (BN * (BK / 8u) + WG - 1u) / WG;
uvec4 gql_raw[GWU], gx_raw[GWU];
uvec2 gs_raw[GWU]; // scale word, d
uint gw_k0;

void gw_load(uint col0, uint k0)
{
    gw_k0 = k0;
    [[unroll]] for (uint j = 0; j < GWU; j++) {
        uint it = tid + j * WG, r = it / (BK / 8u), kk = k0 + 8u * (it % (BK / 8u));
        uvec4 ql = uvec4(0u), qh = uvec4(0u);
        uvec2 s = uvec2(0u);
        if (it < BN * (BK / 8u) && col0 + r < pc.n) {
            uint b = pc.view_offset[0] / 2u + ((col0 + r) * (pc.k / 256u) + kk / 256u) * 105u;
            uint v = kk % 256u, h = v / 128u, g = (v % 128u) / 32u, l = v % 32u;
            uint l16 = b + (64u * h + 32u * (g & 1u) + l) / 2u, h16 = b + (128u + 32u * h + l) / 2u;
            ql = uvec4(w16[l16], w16[l16 + 1u], w16[l16 + 2u], w16[l16 + 3u]);
            qh = uvec4(w16[h16], w16[h16 + 1u], w16[h16 + 2u], w16[h16 + 3u]);
            s = uvec2(w16[b + (192u + 8u * h + 2u * g + l / 16u) / 2u], w16[b + 104u]);
        }
        gql_raw[j] = ql;
        gx_raw[j] = qh;
        gs_raw[j] = s;
    }
}

void gw_store()
{
    [[unroll]] for (uint j = 0; j < GWU; j++) {
        uint it = tid + j * WG, r = it / (BK / 8u), c = it % (BK / 8u);
        if (it < BN * (BK / 8u)) {
            // this unit's place in its super-block, from the step's (k0 is a multiple of BK)
            uint v = (gw_k0 % 256u) + 8u * c, h = v / 128u, g = (v % 128u) / 32u, l = v % 32u;
            uvec4 a = gql_raw[j], x = gx_raw[j];
            uvec2 ql = uvec2(a.x | (a.y << 16), a.z | (a.w << 16)) >> ((g / 2u) * 4u);
            uvec2 qh = uvec2(x.x | (x.y << 16), x.z | (x.w << 16)) >> (2u * g);
            uvec2 q = (ql & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4);
            uint sbyte = (gs_raw[j].x >> (8u * ((192u + 8u * h + 2u * g + l / 16u) & 1u))) & 0xFFu;
            float d = hk_half(gs_raw[j].y) * float(int(sbyte << 24) >> 24);
            tiles[SB0 + r * SS + c] = pack8(d * (hk_lanes(q.x, 0xFFu) - 32.0), d * (hk_lanes(q.y, 0xFFu) - 32.0));
        }
    }
}
#elif defined(HK_F16)
// F16: rows of k f16 values (2k bytes), staged as they are. A unit is 8 values: one 16-byte
// chunk, loaded as wide as WLOAD allows (the host folds the rows' 2k bytes into the alignment it
// picks WLOAD by), or, where the row ends inside it, value by value, zeros past k.
const uint GWU = (BN * (BK / 8u) + WG - 1u) / WG;
uvec4 gq_raw[GWU];

// the f16 bits at u16 index b16 if value kk of its row is below k, else 0 (an `if`: a load in a
// conditional expression may be issued whatever the condition)
uint gw_half(uint b16, uint kk)
{
    uint h = 0u;
    if (kk < pc.k)
        h = uint(w16[b16]);
    return h;
}

void gw_load(uint col0, uint k0)
{
    [[unroll]] for (uint j = 0; j < GWU; j++) {
        uint it = tid + j * WG, r = it / (BK / 8u), kk = k0 + 8u * (it % (BK / 8u));
        uvec4 q = uvec4(0u);
        if (it < BN * (BK / 8u) && col0 + r < pc.n && kk < pc.k) {
            uint b = pc.view_offset[0] / 2u + (col0 + r) * pc.k + kk;
            if (kk + 8u <= pc.k)
                q = hk_w_ld16(b, WLOAD);
            else
                q = uvec4(gw_half(b, kk) | (gw_half(b + 1u, kk + 1u) << 16),
                          gw_half(b + 2u, kk + 2u) | (gw_half(b + 3u, kk + 3u) << 16),
                          gw_half(b + 4u, kk + 4u) | (gw_half(b + 5u, kk + 5u) << 16),
                          gw_half(b + 6u, kk + 6u) | (gw_half(b + 7u, kk + 7u) << 16));
        }
        gq_raw[j] = q;
    }
}

void gw_store()
{
    [[unroll]] for (uint j = 0; j < GWU; j++) {
        uint it = tid + j * WG;
        if (it < BN * (BK / 8u))
            tiles[SB0 + (it / (BK / 8u)) * SS + it % (BK / 8u)] = gq_raw[j];
    }
}
#else
#error "define HK_Q8_0, HK_Q4_K, HK_Q5_K, HK_Q6_K or HK_F16"
#endif
