#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef HK_COOPMAT
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#elif !defined(HK_SCALAR_DOT)
#extension GL_EXT_spirv_intrinsics : require
#endif
// hk_mmq for a few tokens (m <= 8) and Q4_K weights: out[t, j] = X[t, :] . W[j, :] as mmq.comp
// computes it (int8 sums exact per 32-value block, Q4_K's d*sc*dot - dmin*m*sum(xq) in f32), laid
// out for a weight stream rather than for reuse: a workgroup owns 16 weight rows and all 8 token
// columns, its WARPS warps split k (warp w takes super-blocks w, w + WARPS, ...), and each warp
// stages its own super-block (16 rows of Q4_K, 8 tokens of Q8_1: 288 16-byte loads, all issued a
// super-block ahead), so no tile is shared and every load of the stream is in flight at once.
// Per 32-value sub-block the warp multiplies the 16 x 32 weight tile by the 32 x 8 tile of the
// tokens (W as A, X as B: int8 16x8x32 -> int32), and a tile of ones by the tokens' tile (each
// token's exact sum of quants, in the accumulator's own ownership). At the end the warps' partial
// sums are added in warp order (deterministic) and written.
//   HK_COOPMAT  a warp is a subgroup, the products KHR cooperative matrices; which elements of the
//               16 x 8 result an invocation holds is learnt by loading a matrix of indices.
//   default     the same tiles as views of shared memory, each element an invocation holds
//               (NVIDIA's m16n8 ownership: rows lane/4 and lane/4 + 8, columns 2 (lane % 4) + 0,
//               1) computed with packed int8 dot products (dot.glsl), on warps of 32.
// Needs 16-byte aligned views of W and X (the host takes mmq.comp otherwise).
#define HK_NO_WORKGROUP_SUM
#include "common.glsl"

layout(binding = 0) readonly buffer Weights128 { uvec4 w128[]; };
layout(binding = 1) readonly buffer XQ4 { uvec4 xq4[]; };
layout(binding = 2) writeonly buffer Out { float y[]; };

layout(constant_id = 1) const uint LANES = 32;
const uint WARPS = WG / LANES;
const uint L = 128u / LANES; // elements of a 16 x 8 result per invocation

HK_PUSH_BEGIN
    uint m;
    uint n;
    uint k;
HK_PUSH_END

// per warp: the 8 sub-blocks of its super-block as 16 x 32 int8 tiles, rows TW words apart (32
// bytes and 16 of padding, so that the 16-byte rows a matrix load reads from 8 rows fall into
// different banks); the rows' (wa, wb) per sub-block; the tokens' quants, token t's block j at
// t * XS + 8 j (XS = 68: the same bank spread); their d; the warp's partial sums
const uint TW = 12u;
const uint TILE = 16u * TW;
const uint XS = 68u;
shared uint sw[WARPS * 8u * TILE];
shared vec2 swf[WARPS * 128u];
shared uint sx[WARPS * 8u * XS];
shared float sxd[WARPS * 64u];
shared float sred[WARPS * 128u];
#ifdef HK_COOPMAT
shared int spat[128];
#endif

const uint NONE = 0xFFFFFFFFu;
// loads of one super-block per warp: 128 weight chunks (row r's qs bytes 16 q .. 16 q + 15 at
// unit 8 r + q), 16 headers, then 8 tokens x 18 uvec4 of Q8_1 blocks
const uint UNITS = 288u;
const uint NU = (UNITS + LANES - 1u) / LANES;

#ifdef HK_COOPMAT
#define MAT_A coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA>
#define MAT_B coopmat<int8_t, gl_ScopeSubgroup, 32, 8, gl_MatrixUseB>
#define MAT_C coopmat<int, gl_ScopeSubgroup, 16, 8, gl_MatrixUseAccumulator>
MAT_C cbias; // every element HK_I2F_BIAS (common.glsl): int32 sums become floats by a subtraction
MAT_A ones;
MAT_A load_a(uint off)
{
    MAT_A a;
    coopMatLoad(a, sw, off, TW, gl_CooperativeMatrixLayoutRowMajor);
    return a;
}
MAT_B load_b(uint off)
{
    MAT_B b;
    coopMatLoad(b, sx, off, XS, gl_CooperativeMatrixLayoutColumnMajor);
    return b;
}
#define ONES() ones
MAT_C mma(MAT_A a, MAT_B b) { return coopMatMulAdd(a, b, cbias); }
#define ELEM(c, e) c[e]
uint epos[L];
uint el_row(uint e) { return epos[e] >> 3; }
uint el_col(uint e) { return epos[e] & 7u; }
#else
#include "dot.glsl"
struct MAT_A {
    uint off; // NONE: every element 1
};
struct MAT_B {
    uint off;
};
struct MAT_C {
    int v[4]; // the host runs this arm on warps of 32 invocations: L = 4
};
MAT_A load_a(uint off) { return MAT_A(off); }
MAT_B load_b(uint off) { return MAT_B(off); }
#define ONES() MAT_A(NONE)
#define ELEM(c, e) c.v[e]
uint lane;
uint el_row(uint e) { return (lane >> 2) + 8u * (e >> 1); }
uint el_col(uint e) { return 2u * (lane & 3u) + (e & 1u); }
MAT_C mma(MAT_A a, MAT_B b)
{
    MAT_C c;
    [[unroll]] for (uint e = 0; e < 4u; e++) {
        uint ra = a.off + el_row(e) * TW, rb = b.off + el_col(e) * XS;
        int s = HK_I2F_BIAS;
        [[unroll]] for (uint w = 0; w < 8u; w++)
            s += hk_dot4(a.off == NONE ? 0x01010101u : sw[ra + w], sx[rb + w]);
        c.v[e] = s;
    }
    return c;
}
#endif

#include "gemm_q4k.glsl"

void main()
{
    const uint tid = gl_LocalInvocationIndex, warp = tid / LANES, ln = tid % LANES;
#ifndef HK_COOPMAT
    lane = ln;
#endif
    const uint n0 = hk_group_id() * 16u;
    if (n0 >= pc.n)
        return;
    const uint KB = pc.k / 32u, SB = pc.k / 256u, iters = (SB + WARPS - 1u) / WARPS;
    const uint w0 = pc.view_offset[0] / 16u + n0 * SB * 9u; // row n0's first 16-byte chunk
    const uint x0 = pc.view_offset[1] / 16u;
    const uint y0 = pc.view_offset[2] / 4u;
    const uint swb = warp * 8u * TILE, swfb = warp * 128u, sxb = warp * 8u * XS, sxdb = warp * 64u;

    bool layout_ok = true;
#ifdef HK_COOPMAT
    for (uint i = tid; i < 128u; i += WG)
        spat[i] = int(i);
    barrier();
    {
        MAT_C pat;
        coopMatLoad(pat, spat, 0, 8, gl_CooperativeMatrixLayoutRowMajor);
        // an implementation that spreads a 16 x 8 matrix otherwise writes NaN below rather than
        // a partial answer
        layout_ok = pat.length() == int(L);
        [[unroll]] for (uint e = 0; e < L; e++)
            epos[e] = layout_ok ? uint(pat[e]) & 127u : 0u;
    }
    cbias = MAT_C(HK_I2F_BIAS);
    ones = MAT_A(int8_t(1));
#endif

    float acc[L];
    [[unroll]] for (uint e = 0; e < L; e++)
        acc[e] = 0.0;

    uvec4 raw[NU];
    // super-block sb of the warp's rows and tokens into raw (zeros past n, m and k)
#define LOAD(sb)                                                                              \
    [[unroll]] for (uint j = 0; j < NU; j++) {                                                \
        uint u = ln + j * LANES;                                                              \
        uvec4 v = uvec4(0u);                                                                  \
        if ((sb) < SB && u < 128u) {                                                          \
            if (n0 + u / 8u < pc.n)                                                           \
                v = w128[w0 + (u / 8u) * SB * 9u + (sb) * 9u + 1u + u % 8u];                 \
        } else if ((sb) < SB && u < 144u) {                                                   \
            if (n0 + u - 128u < pc.n)                                                         \
                v = w128[w0 + (u - 128u) * SB * 9u + (sb) * 9u];                              \
        } else if ((sb) < SB && u < UNITS) {                                                  \
            uint t = (u - 144u) / 18u;                                                        \
            if (t < pc.m)                                                                     \
                v = xq4[x0 + (t * KB + (sb) * 8u) * 9u / 4u + (u - 144u) % 18u];              \
        }                                                                                     \
        raw[j] = v;                                                                           \
    }

    LOAD(warp)
    for (uint it = 0; it < iters; it++) {
        const uint sb = warp + it * WARPS;
        barrier(); // the last super-block's products are done with the warp's tiles
        [[unroll]] for (uint j = 0; j < NU; j++) {
            uint u = ln + j * LANES;
            uvec4 v = raw[j];
            if (u < 128u) {
                // qs chunk q of row r: its low nibbles are values 16 (q % 2) .. of sub-block
                // 2 (q / 2), its high nibbles the same values of sub-block 2 (q / 2) + 1
                uint r = u / 8u, q = u % 8u;
                uint o = swb + (q & ~1u) * TILE + r * TW + 4u * (q & 1u);
                [[unroll]] for (uint w = 0; w < 4u; w++) {
                    sw[o + w] = v[w] & 0x0F0F0F0Fu;
                    sw[o + TILE + w] = (v[w] >> 4) & 0x0F0F0F0Fu;
                }
            } else if (u < 144u) {
                uint r = u - 128u;
                uvec2 sc, mn;
                hk_q4k_scales8(v, sc, mn);
                vec2 dm = unpackHalf2x16(v.x);
                [[unroll]] for (uint s = 0; s < 8u; s++) {
                    uvec2 f = hk_q4k_scale_of(sc, mn, s);
                    swf[swfb + r * 8u + s] = vec2(dm.x * float(f.x), -dm.y * float(f.y));
                }
            } else if (u < UNITS) {
                // words 4 q' .. 4 q' + 3 of token t's 8 blocks of 9 words (d|s, then 8 of quants)
                uint t = (u - 144u) / 18u, q = (u - 144u) % 18u;
                [[unroll]] for (uint w = 0; w < 4u; w++) {
                    uint i = 4u * q + w, blk = i / 9u, wi = i % 9u;
                    if (wi == 0u)
                        sxd[sxdb + t * 8u + blk] = unpackHalf2x16(v[w]).x; // the s half is never read
                    else
                        sx[sxb + t * XS + blk * 8u + wi - 1u] = v[w];
                }
            }
        }
        barrier();
        LOAD(sb + WARPS)
        if (sb < SB) { // uniform in the warp
            // the super-block's 8 terms summed apart, then added: a long k adds k / 256 / WARPS
            // terms into acc rather than 8 times as many (the rounding grows with the count)
            float part[L];
            [[unroll]] for (uint e = 0; e < L; e++)
                part[e] = 0.0;
            [[unroll]] for (uint j = 0; j < 8u; j++) {
                MAT_B b = load_b(sxb + 8u * j);
                MAT_C c = mma(load_a(swb + j * TILE), b);
                MAT_C s = mma(ONES(), b);
                [[unroll]] for (uint e = 0; e < L; e++) {
                    uint r = el_row(e), t = el_col(e);
                    vec2 wf = swf[swfb + r * 8u + j];
                    // d*sc*dot - dmin*m*sum(xq), rounded once where they cancel (as mmq.comp)
                    part[e] = fma(fma(hk_biased_float(ELEM(c, e)), wf.x, wf.y * hk_biased_float(ELEM(s, e))),
                                  sxd[sxdb + t * 8u + j], part[e]);
                }
            }
            [[unroll]] for (uint e = 0; e < L; e++)
                acc[e] += part[e];
        }
    }

    [[unroll]] for (uint e = 0; e < L; e++)
        sred[warp * 128u + el_row(e) * 8u + el_col(e)] = acc[e];
    barrier();
    for (uint i = tid; i < 128u; i += WG) {
        uint r = i / 8u, t = i % 8u;
        float sum = 0.0;
        for (uint w = 0; w < WARPS; w++)
            sum += sred[w * 128u + i];
        if (t < pc.m && n0 + r < pc.n)
            y[y0 + t * pc.n + n0 + r] = layout_ok ? sum : uintBitsToFloat(0x7FC00000u);
    }
}
