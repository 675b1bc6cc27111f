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
// Int8 GEMM for prefill (MMQ): out[i, j] = X[i, :] . W[j, :], X as Q8_1 blocks (one row of k/32
// blocks per token), W as GGUF blocks (HK_Q8_0 / HK_Q4_K / HK_Q6_K), decoded into shared memory
// one tile at a time and never expanded in memory. Per 32-value block the int8 quants are summed
// exactly in int32; the block scales are applied in f32 (mmq_weights.glsl says how per type).
//
// Tiling (specialization constants 1-5): a workgroup computes a BM x BN tile of out, BM = WARPS_M
// x RM x 16 rows (tokens), BN = WARPS_N x RN x 16 columns (weight rows); each group of LANES
// invocations ("warp") owns RM x RN subtiles of 16 x 16. The k loop stages KS blocks of 32 values
// per step: the int8 quants of the tile's X and W rows and their scales, in shared memory.
// Staging is split into loads (global -> registers: consecutive invocations take consecutive
// words of a row) and stores (registers -> decoded shared tiles), so that with PREFETCH the next
// step's loads are in flight while the warps multiply the current one (register double buffering;
// one barrier pair per step either way).
// Per block and subtile, each invocation owns L = 256 / LANES elements (row(i), col(i)) and
// accumulates them in f32 registers:
//   HK_COOPMAT   a warp is one subgroup of LANES invocations; the block's int32 sums of a subtile
//                come from one int8 x int8 -> int32 cooperative-matrix multiply (16x16x32), and
//                each invocation reads its own components of the result. Which elements those are
//                is implementation-defined: they are learnt once by loading a matrix of element
//                indices (components of matrices of one type are distributed alike, since
//                component-wise arithmetic between them is matrix arithmetic). Where they are the
//                fixed ownership below (NVIDIA's, on every device seen) the loop runs with it, so
//                that the compiler sees which elements share a row or column and loads each row's
//                and column's factors once; elsewhere the same loop runs on the learnt indices.
//   default      the same sums from packed int8 dot products (dot.glsl) of the staged words, with
//                the fixed ownership; the warps need not be subgroups.
// Everything else — staging, scales, epilogue order, stores — is the same code for both arms: the
// int32 sums are exact, so the arms agree bit for bit wherever the driver compiles the epilogue's
// fma the same way in both (Vulkan lets an fma be split into a multiply and an add).
//   HK_MMQ_ID    expert-indexed (MoE prefill): workgroups = experts x row groups x column tiles;
//                each takes the row tiles of its expert's slot list (offsets, slots) with a grid
//                stride, gathers X rows through the list and writes each result row to its slot.
#include "common.glsl"

layout(binding = 0) readonly buffer Weights { uint16_t w16[]; };
layout(binding = 0) readonly buffer Weights32 { uint w32[]; };   // pc.wload 1: 4-byte aligned view
layout(binding = 0) readonly buffer Weights128 { uvec4 w128[]; }; // pc.wload 2: 16-byte aligned view
layout(binding = 1) readonly buffer XQ { uint xq[]; };            // Q8_1 blocks of 9 words
layout(binding = 1) readonly buffer XQ4 { uvec4 xq4[]; };         // pc.xwide: 16-byte aligned steps
layout(binding = 2) writeonly buffer Out { float y[]; };
#ifdef HK_MMQ_ID
layout(binding = 3) readonly buffer Offsets { uint offs[]; };
layout(binding = 4) readonly buffer Slots { uint slot_list[]; };
#endif

layout(constant_id = 1) const uint WARPS_M = 2;
layout(constant_id = 2) const uint WARPS_N = 2;
layout(constant_id = 3) const uint RM = 2;
layout(constant_id = 4) const uint RN = 2;
layout(constant_id = 5) const uint KS = 4;    // 32-value blocks per k step: 1, 2, 4, 8 (even for Q4_K, Q6_K)
layout(constant_id = 6) const uint FLAGS = 0; // bit 0 PREFETCH, bit 1 GENERIC

const uint LANES = WG / (WARPS_M * WARPS_N);
const uint BM = WARPS_M * RM * 16u;
const uint BN = WARPS_N * RN * 16u;
const uint L = 256u / LANES;
// uvec4 per staged row: KS blocks of two (32 quants), plus one so that the 16-byte rows a matrix
// load reads from 8 consecutive rows fall into different banks
const uint SV = 2u * KS + 1u;
const uint NONE = 0xFFFFFFFFu;
const uint GROUP_STAGES = KS < 32u ? 32u / KS : 1u; // k steps summed before adding into the total
const bool PREFETCH = (FLAGS & 1u) != 0u;    // next step's loads before this step's multiplies
const bool GENERIC = (FLAGS & 2u) != 0u;     // coopmat: the learnt-index loop even where fixed would do

HK_PUSH_BEGIN
    uint m;               // rows of X and out; HK_MMQ_ID: slots
    uint n;
    uint k;
    uint m_groups;        // workgroups along m: row tiles (dense), or per expert (grid stride)
    uint n_tiles;
    uint n_experts;       // HK_MMQ_ID
    uint slots_per_x_row; // HK_MMQ_ID
    // load widths the views' alignment allows (uniform branches: one pipeline for every alignment)
    uint wload;           // Q4_K weight chunks: 2 one 16-byte load, 1 four 32-bit, 0 eight 16-bit
    uint xwide;           // 1: X steps as 16-byte loads
HK_PUSH_END

shared uvec4 sa[BM * SV]; // X quants: row r, block kk at r * SV + 2 kk (32 bytes)
shared uvec4 sb[BN * SV]; // W quants
shared float sxd[KS * BM]; // X block scale d
#ifdef HK_Q8_0
shared float swa[KS * BN]; // W block factors (mmq_weights.glsl)
#else
shared vec2 sw[KS * BN];
#endif
shared uint srow[BM];     // X row of each tile row (= out row; HK_MMQ_ID: the slot), or NONE
#ifdef HK_COOPMAT
shared int spat[256];     // element indices, to learn the accumulator layout
shared uint snonstd;      // set when some invocation's elements are not the fixed ones
#ifdef HK_Q6_K
shared uint smask[16 * 8]; // 16 x 32 int8: 1 in the first 16 columns
#endif
#endif

uint tid, lane, wm, wn;

#include "mmq_weights.glsl"
#ifndef HK_COOPMAT
#include "dot.glsl"
#endif

// |v| < 2^22 to f32 with two full-rate operations (2^23 + 2^22 + v has v in its low mantissa
// bits; the subtraction is exact) instead of an int-to-float conversion, a sixteenth-rate
// instruction on recent NVIDIA GPUs. Block sums stay below 2^22: at most 32 x 128 x 128 (Q8_0),
// 16 x 32 x 128 per Q6_K half, 32 x 15 x 128 (Q4_K), 32 x 128 (Q4_K's sum of X quants). (Folding
// the subtraction into the scale's fma would save an operation, but is exact only where fma is
// fused, which Vulkan does not promise: lavapipe splits some.)
float hk_i2f(int v) { return intBitsToFloat(v + 0x4B400000) - 12582912.0; }

// ---- element ownership ----
// The fixed ownership. With 32 lanes, the layout of NVIDIA's 16x16 accumulators (rows lane/4 and
// lane/4 + 8, columns 2(lane%4) + {0, 1, 8, 9}); other widths, a PR x PC patch per invocation.
const uint PC = L >= 4u ? 4u : L, PR = L / PC;
uint fixed_row(uint i)
{
    if (L == 8u)
        return (lane >> 2) + 8u * ((i >> 1) & 1u);
    return (lane / (16u / PC)) * PR + i / PC;
}
uint fixed_col(uint i)
{
    if (L == 8u)
        return 2u * (lane & 3u) + (i & 1u) + 8u * (i >> 2);
    return (lane % (16u / PC)) * PC + i % PC;
}
// the first element of the row of element i
uint fixed_rep(uint i) { return L == 8u ? (i & 2u) : (i / PC) * PC; }

uint erow[L], ecol[L]; // the learnt ownership (coopmat), used by the generic loop
bool layout_ok = true; // false: the matrices hold other than L components per invocation

#define ROW(i) (fixed_own ? fixed_row(i) : erow[i])
#define COL(i) (fixed_own ? fixed_col(i) : ecol[i])
#define REP(i) (fixed_own ? fixed_rep(i) : (i))

// ---- X (Q8_1) staging: KS blocks of 9 words per row and step, four words per unit ----
const uint XU = (9u * KS + 3u) / 4u;        // units per row and step
const uint XI = (BM * XU + WG - 1u) / WG;   // per invocation
uvec4 xr[XI];

void x_load(uint kb0)
{
    const uint KB = pc.k / 32u, nw = 9u * min(KS, KB - kb0), x0 = pc.view_offset[1] / 4u;
    [[unroll]] for (uint j = 0; j < XI; j++) {
        uint it = tid + j * WG, r = it / XU, c = it % XU;
        uvec4 v = uvec4(0u);
        if (it < BM * XU && 4u * c < nw) {
            uint xrow = srow[r];
            if (xrow != NONE) { // rows past the end and absent slots stage zeros
#ifdef HK_MMQ_ID
                xrow /= pc.slots_per_x_row;
#endif
                uint b = x0 + (xrow * KB + kb0) * 9u + 4u * c;
                if (pc.xwide != 0u) { // the host's promise: 16-byte aligned, nw a multiple of 4
                    v = xq4[b >> 2];
                } else {
                    v.x = xq[b];
                    [[unroll]] for (uint e = 1; e < 4u; e++)
                        if (4u * c + e < nw)
                            v[e] = xq[b + e];
                }
            }
        }
        xr[j] = v;
    }
}

void x_store()
{
    [[unroll]] for (uint j = 0; j < XI; j++) {
        uint it = tid + j * WG, r = it / XU, c = it % XU;
        if (it < BM * XU) {
            [[unroll]] for (uint e = 0; e < 4u; e++) {
                uint w = 4u * c + e, kk = w / 9u, pos = w - 9u * kk;
                if (w >= 9u * KS) // the last unit of a step of 2 or 1 blocks is partly past it
                    break;
                if (pos == 0u) {
                    sxd[kk * BM + r] = unpackHalf2x16(xr[j][e]).x;
                } else {
                    uint q = pos - 1u;
                    sa[r * SV + 2u * kk + (q >> 2)][q & 3u] = xr[j][e];
                }
            }
        }
    }
}

#ifdef HK_COOPMAT
#define MAT_A coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA>
#define MAT_B coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB>
#define MAT_C coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#endif

// Workgroup geometry, set once by main.
uint g_mg, g_count, g_first, g_n0, g_wbase;

// The tile loop. `fixed_own`: the element ownership is fixed_row/fixed_col (a constant in each call,
// so the compiler sees it); else the learnt erow/ecol.
void run_tiles(const bool fixed_own)
{
    const uint KB = pc.k / 32u, stages = (KB + KS - 1u) / KS;
#ifdef HK_COOPMAT
#ifdef HK_Q4_K
    MAT_B ones = MAT_B(int8_t(1));
#endif
#ifdef HK_Q6_K
    MAT_A mask_lo;
    coopMatLoad(mask_lo, smask, 0, 8, gl_CooperativeMatrixLayoutRowMajor);
#endif
#endif
    // row tiles: one (dense), or the expert's tiles mg, mg + m_groups, ... (grid stride)
    for (uint mt = g_mg; mt * BM < g_count; mt += pc.m_groups) {
        barrier(); // the previous tile's stores are done with srow
        for (uint r = tid; r < BM; r += WG) {
            uint i = mt * BM + r, xrow = NONE;
#ifdef HK_MMQ_ID
            if (i < g_count) {
                uint s = slot_list[pc.view_offset[4] / 4u + g_first + i];
                xrow = s < pc.m ? s : NONE;
            }
#else
            if (i < g_count)
                xrow = i;
#endif
            srow[r] = xrow;
        }
        barrier();
        // f32 sums of the blocks: `acc` over up to 32 blocks, then added into `total`, so that a
        // long k does not sum thousands of terms into one running f32 (its rounding grows with
        // the count: sqrt(k/64) ulps, 2e-6 of the result at k = 65536, against 6e-7 two-level)
        float acc[RM * RN * L], total[RM * RN * L];
        [[unroll]] for (uint a = 0; a < RM * RN * L; a++) {
            acc[a] = 0.0;
            total[a] = 0.0;
        }
        if (PREFETCH) {
            x_load(0u);
            w_load(g_n0, 0u, g_wbase);
        }

        for (uint st = 0; st < stages; st++) {
            const uint kb0 = st * KS;
            if (!PREFETCH) {
                x_load(kb0);
                w_load(g_n0, kb0, g_wbase);
            }
            barrier(); // the previous step's multiplies are done with the tiles
            x_store();
            w_store();
            barrier();
            if (PREFETCH && st + 1u < stages) {
                x_load(kb0 + KS);
                w_load(g_n0, kb0 + KS, g_wbase);
            }

            [[unroll]] for (uint kk = 0; kk < KS; kk++) {
                if (kb0 + kk >= KB)
                    break;
                // X factors of this invocation's rows, for every subtile row
                float xd[RM * L];
#ifdef HK_Q4_K
                float xs[RM * L]; // the exact sum of the row's quants in the block
#endif
#ifdef HK_COOPMAT
                MAT_A fa[RM];
#ifdef HK_Q6_K
                MAT_A fl[RM]; // two 16-value scales per block: the low half of k here, the high in fa
#endif
#endif
                [[unroll]] for (uint im = 0; im < RM; im++) {
                    const uint row0 = (wm * RM + im) * 16u;
#ifdef HK_COOPMAT
                    coopMatLoad(fa[im], sa, row0 * SV + 2u * kk, SV, gl_CooperativeMatrixLayoutRowMajor);
#ifdef HK_Q6_K
                    fl[im] = fa[im] * mask_lo;
                    fa[im] = fa[im] - fl[im];
#endif
#ifdef HK_Q4_K
                    // X . ones: every column holds its row's quant sum, in each invocation's own
                    // elements (an idle matrix unit instead of a shared-memory reduction)
                    MAT_C cs = coopMatMulAdd(fa[im], ones, MAT_C(0));
#endif
#endif
                    [[unroll]] for (uint i = 0; i < L; i++) {
                        xd[im * L + i] = sxd[kk * BM + row0 + ROW(i)];
#ifdef HK_Q4_K
#ifdef HK_COOPMAT
                        xs[im * L + i] = hk_i2f(cs[REP(i)]);
#else
                        uint ra = (row0 + ROW(i)) * SV + 2u * kk;
                        uvec4 a0 = sa[ra], a1 = sa[ra + 1u];
                        const uint one = 0x01010101u;
                        xs[im * L + i] = hk_i2f(hk_dot4(a0.x, one) + hk_dot4(a0.y, one) + hk_dot4(a0.z, one) +
                                                hk_dot4(a0.w, one) + hk_dot4(a1.x, one) + hk_dot4(a1.y, one) +
                                                hk_dot4(a1.z, one) + hk_dot4(a1.w, one));
#endif
#endif
                    }
                }
                [[unroll]] for (uint jn = 0; jn < RN; jn++) {
                    const uint col0 = (wn * RN + jn) * 16u;
#ifdef HK_Q8_0
                    float wa[L];
                    [[unroll]] for (uint i = 0; i < L; i++)
                        wa[i] = swa[kk * BN + col0 + COL(i)];
#else
                    vec2 wf[L];
                    [[unroll]] for (uint i = 0; i < L; i++)
                        wf[i] = sw[kk * BN + col0 + COL(i)];
#endif
#ifdef HK_COOPMAT
                    MAT_B fb;
                    coopMatLoad(fb, sb, col0 * SV + 2u * kk, SV, gl_CooperativeMatrixLayoutColumnMajor);
#endif
                    [[unroll]] for (uint im = 0; im < RM; im++) {
#ifdef HK_COOPMAT
#ifdef HK_Q6_K
                        MAT_C c0 = coopMatMulAdd(fl[im], fb, MAT_C(0));
                        MAT_C c1 = coopMatMulAdd(fa[im], fb, MAT_C(0));
#else
                        MAT_C c0 = coopMatMulAdd(fa[im], fb, MAT_C(0));
#endif
#endif
                        [[unroll]] for (uint i = 0; i < L; i++) {
#ifdef HK_COOPMAT
                            int q0 = c0[i];
#ifdef HK_Q6_K
                            int q1 = c1[i];
#endif
#else
                            uint ra = ((wm * RM + im) * 16u + ROW(i)) * SV + 2u * kk;
                            uint rb = (col0 + COL(i)) * SV + 2u * kk;
                            uvec4 a0 = sa[ra], a1 = sa[ra + 1u], b0 = sb[rb], b1 = sb[rb + 1u];
                            int q0 = hk_dot4(a0.x, b0.x) + hk_dot4(a0.y, b0.y) + hk_dot4(a0.z, b0.z) +
                                     hk_dot4(a0.w, b0.w);
                            int q1 = hk_dot4(a1.x, b1.x) + hk_dot4(a1.y, b1.y) + hk_dot4(a1.z, b1.z) +
                                     hk_dot4(a1.w, b1.w);
#ifndef HK_Q6_K
                            q0 += q1;
#endif
#endif
                            // the scale epilogue, one expression for both arms
                            uint a = (im * RN + jn) * L + i, x = im * L + i;
#if defined(HK_Q8_0)
                            acc[a] = fma(hk_i2f(q0) * wa[i], xd[x], acc[a]);
#elif defined(HK_Q4_K)
                            // d*sc*dot - dmin*m*sum(xq) (sw.y holds -dmin*m) rounded once where they cancel
                            acc[a] = fma(fma(hk_i2f(q0), wf[i].x, wf[i].y * xs[x]), xd[x], acc[a]);
#else
                            acc[a] = fma(fma(hk_i2f(q1), wf[i].y, hk_i2f(q0) * wf[i].x), xd[x], acc[a]);
#endif
                        }
                    }
                }
            }
            if ((st + 1u) % GROUP_STAGES == 0u || st + 1u == stages) {
                [[unroll]] for (uint a = 0; a < RM * RN * L; a++) {
                    total[a] += acc[a];
                    acc[a] = 0.0;
                }
            }
        }

        const uint y0 = pc.view_offset[2] / 4u;
        [[unroll]] for (uint im = 0; im < RM; im++)
            [[unroll]] for (uint jn = 0; jn < RN; jn++)
                [[unroll]] for (uint i = 0; i < L; i++) {
                    uint xrow = srow[(wm * RM + im) * 16u + ROW(i)], col = g_n0 + (wn * RN + jn) * 16u + COL(i);
                    if (xrow != NONE && col < pc.n)
                        y[y0 + xrow * pc.n + col] = layout_ok ? total[(im * RN + jn) * L + i] : uintBitsToFloat(0x7FC00000u);
                }
    }
}

void main()
{
    tid = gl_LocalInvocationID.x;
    const uint gid = hk_group_id();
    const uint row_u16 = (pc.k / HK_MMQ_BLOCK_VALUES) * HK_MMQ_BLOCK_U16;
#ifdef HK_COOPMAT
    const uint warp = gl_SubgroupID;
    lane = gl_SubgroupInvocationID;
#else
    const uint warp = tid / LANES;
    lane = tid % LANES;
#endif
    wm = warp / WARPS_N;
    wn = warp % WARPS_N;

#ifdef HK_MMQ_ID
    const uint per_expert = pc.m_groups * pc.n_tiles;
    const uint expert = gid / per_expert;
    if (expert >= pc.n_experts)
        return;
    const uint nt = (gid % per_expert) % pc.n_tiles, mg = (gid % per_expert) / pc.n_tiles;
    // the grouping is device data: clamp it, so that nothing outside the tensors is touched
    const uint o = pc.view_offset[3] / 4u;
    const uint first = min(offs[o + expert], pc.m), last = min(offs[o + expert + 1u], pc.m);
    const uint count = last > first ? last - first : 0u;
    if (mg * BM >= count) // also every empty expert: nothing staged, nothing written
        return;
    const uint wrow0 = expert * pc.n;
#else
    const uint mg = gid % pc.m_groups, nt = gid / pc.m_groups;
    if (nt >= pc.n_tiles)
        return;
    const uint count = pc.m, first = 0u, wrow0 = 0u;
#endif
    g_mg = mg;
    g_count = count;
    g_first = first;
    g_n0 = nt * BN;
    g_wbase = pc.view_offset[0] / 2u + wrow0 * row_u16;

#ifdef HK_COOPMAT
    for (uint i = tid; i < 256u; i += WG)
        spat[i] = int(i);
#ifdef HK_Q6_K
    for (uint i = tid; i < 128u; i += WG)
        smask[i] = (i & 7u) < 4u ? 0x01010101u : 0u;
#endif
    if (tid == 0u)
        snonstd = 0u;
    barrier();
    MAT_C pat;
    coopMatLoad(pat, spat, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    // an implementation that spreads a 16x16 matrix otherwise (replicated components) writes NaN
    // below rather than a partial answer
    layout_ok = pat.length() == int(L);
    bool mine = layout_ok;
    [[unroll]] for (uint i = 0; i < L; i++) {
        uint e = layout_ok ? uint(pat[i]) & 255u : 0u;
        erow[i] = e >> 4;
        ecol[i] = e & 15u;
        mine = mine && erow[i] == fixed_row(i) && ecol[i] == fixed_col(i);
    }
    if (!mine)
        snonstd = 1u;
    barrier();
    if (snonstd == 0u && !GENERIC)
        run_tiles(true);
    else
        run_tiles(false);
#else
    run_tiles(true);
#endif
}
