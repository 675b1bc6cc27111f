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
// Tiling (specialization constants 1-6): a workgroup computes a BM x BN tile of out, BM = WARPS_M
// x RM x 16 rows (tokens), BN = WARPS_N x RN x 16 columns (weight rows); each group of LANES
// invocations ("warp") owns RM x RN subtiles of 16 x 16. The k loop stages KS blocks of 32 values
// per step: the int8 quants of the tile's X and W rows and their scales, in shared memory.
// Per block and subtile, each invocation owns L = 256 / LANES elements (erow[i], ecol[i]) and
// accumulates them in f32 registers:
//   HK_COOPMAT   a warp is one subgroup of LANES invocations; the block's int32 sums of a subtile
//                come from one int8 x int8 -> int32 cooperative-matrix multiply (16x16x32), and
//                each invocation reads its own components of the result. Which elements those are
//                is implementation-defined: they are learnt once by loading a matrix of element
//                indices (components of matrices of one type are distributed alike, since
//                component-wise arithmetic between them is matrix arithmetic). The f32 scale
//                epilogue therefore runs in registers, with no int32 round trip through memory.
//   default      the same sums from packed int8 dot products (dot.glsl) of the staged words; the
//                element ownership is fixed (below), and the warps need not be subgroups.
// Everything else — staging, scales, epilogue order, stores — is the same code for both arms: the
// int32 sums are exact, so the arms agree bit for bit wherever the driver compiles the epilogue's
// fma the same way in both (Vulkan lets an fma be split into a multiply and an add).
//   HK_MMQ_ID    expert-indexed (MoE prefill): workgroups = experts x row groups x column tiles;
//                each takes the row tiles of its expert's slot list (offsets, slots) with a grid
//                stride, gathers X rows through the list and writes each result row to its slot.
#include "common.glsl"

layout(binding = 0) readonly buffer Weights { uint16_t w16[]; };
layout(binding = 1) readonly buffer XQ { uint xq[]; }; // Q8_1 blocks of 9 words
layout(binding = 2) writeonly buffer Out { float y[]; };
#ifdef HK_MMQ_ID
layout(binding = 3) readonly buffer Offsets { uint offs[]; };
layout(binding = 4) readonly buffer Slots { uint slot_list[]; };
#endif

layout(constant_id = 1) const uint LANES = 32;
layout(constant_id = 2) const uint WARPS_M = 2;
layout(constant_id = 3) const uint WARPS_N = 2;
layout(constant_id = 4) const uint RM = 2;
layout(constant_id = 5) const uint RN = 2;
layout(constant_id = 6) const uint KS = 2;

const uint BM = WARPS_M * RM * 16u;
const uint BN = WARPS_N * RN * 16u;
const uint L = 256u / LANES;
// words per staged row: KS blocks of 8 words, plus 4 so that the 16-byte rows a matrix load
// reads from 8 consecutive rows fall into different banks
const uint STRIDE = 8u * KS + 4u;
const uint NONE = 0xFFFFFFFFu;
const uint GROUP_STAGES = KS < 32u ? 32u / KS : 1u; // k steps summed before adding into the total

HK_PUSH_BEGIN
    uint m;               // rows of X and out; HK_MMQ_ID: slots
    uint n;
    uint k;
    uint m_groups;        // workgroups along m: row tiles (dense), or per expert (grid stride)
    uint n_tiles;
    uint n_experts;       // HK_MMQ_ID
    uint slots_per_x_row; // HK_MMQ_ID
HK_PUSH_END

shared uint sa[BM * STRIDE]; // X quants: row r, block kk at word r * STRIDE + 8 kk
shared uint sb[BN * STRIDE]; // W quants
shared float sxd[KS * BM];   // X block scale d
#ifdef HK_Q4_K
shared float sxs[KS * BM];   // sum(quants), exact: the X side of the "- dmin*m*sum(x)" term
#endif
shared float swa[KS * BN];   // W block factors (mmq_weights.glsl)
#if defined(HK_Q4_K) || defined(HK_Q6_K)
shared float swb[KS * BN];
#endif
shared uint srow[BM];        // X row of each tile row (= out row; HK_MMQ_ID: the slot), or NONE
#ifdef HK_COOPMAT
shared int spat[256];        // element indices, to learn the accumulator layout
#ifdef HK_Q6_K
shared uint smask[16 * 8];   // 16 x 32 int8: 1 in the first 16 columns
#endif
#endif

#include "mmq_weights.glsl"
#ifndef HK_COOPMAT
#include "dot.glsl"
#endif

// |v| < 2^22 to f32 with two full-rate operations (2^23 + 2^22 + v has v in its low mantissa
// bits; the subtraction is exact) instead of an int-to-float conversion, a sixteenth-rate
// instruction on recent NVIDIA GPUs. Block sums stay below 2^22: at most 32 x 128 x 128 (Q8_0),
// 16 x 32 x 128 per Q6_K half, 32 x 15 x 128 (Q4_K). (Folding the subtraction into the scale's
// fma would save an operation, but is exact only where fma is fused, which Vulkan does not
// promise: lavapipe splits some.)
float hk_i2f(int v) { return intBitsToFloat(v + 0x4B400000) - 12582912.0; }

// sum of the signed bytes of 8 words (a Q8_1 block's quants)
int hk_byte_sum8(uvec4 a, uvec4 b)
{
    uvec4 u = a ^ 0x80808080u, v = b ^ 0x80808080u; // biased to unsigned bytes
    uvec4 s = (u & 0x00FF00FFu) + ((u >> 8) & 0x00FF00FFu) + (v & 0x00FF00FFu) + ((v >> 8) & 0x00FF00FFu);
    uint t = s.x + s.y + s.z + s.w;
    return int((t & 0xFFFFu) + (t >> 16)) - 4096;
}

#ifdef HK_COOPMAT
#define MAT_A coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA>
#define MAT_B coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB>
#define MAT_C coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#endif

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint gid = hk_group_id();
    const uint KB = pc.k / 32u;
    const uint stages = (KB + KS - 1u) / KS;
    const uint row_u16 = (pc.k / HK_MMQ_BLOCK_VALUES) * HK_MMQ_BLOCK_U16;
#ifdef HK_COOPMAT
    const uint warp = gl_SubgroupID;
#else
    const uint warp = tid / LANES, lane = tid % LANES;
#endif
    const uint wm = warp / WARPS_N, wn = warp % WARPS_N;

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
    const uint n0 = nt * BN;
    const uint w0 = pc.view_offset[0] / 2u + wrow0 * row_u16;

    // the elements of each subtile this invocation owns
    uint erow[L], ecol[L];
    bool layout_ok = true;
#ifdef HK_COOPMAT
    for (uint i = tid; i < 256u; i += WG)
        spat[i] = int(i);
#ifdef HK_Q6_K
    for (uint i = tid; i < 128u; i += WG)
        smask[i] = (i & 7u) < 4u ? 0x01010101u : 0u;
#endif
    barrier();
    MAT_C pat;
    coopMatLoad(pat, spat, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    // an implementation that spreads a 16x16 matrix otherwise (replicated components) writes NaN
    // below rather than a partial answer
    layout_ok = pat.length() == int(L);
    [[unroll]] for (uint i = 0; i < L; i++) {
        uint e = layout_ok ? uint(pat[i]) & 255u : 0u;
        erow[i] = e >> 4;
        ecol[i] = e & 15u;
    }
#ifdef HK_Q6_K
    MAT_A mask_lo;
    coopMatLoad(mask_lo, smask, 0, 8, gl_CooperativeMatrixLayoutRowMajor);
#endif
#else
    // fixed here. With 32 lanes, the layout NVIDIA's 16x16 accumulators are likely to have (rows
    // lane/4 and lane/4 + 8, columns 2(lane%4) + {0, 1, 8, 9}), so that the scattered ownership the
    // cooperative-matrix arm learns is what the portable arm runs on every device; other widths,
    // a PR x PC patch per invocation
    if (L == 8u) {
        [[unroll]] for (uint i = 0; i < L; i++) {
            erow[i] = (lane >> 2) + 8u * ((i >> 1) & 1u);
            ecol[i] = 2u * (lane & 3u) + (i & 1u) + 8u * (i >> 2);
        }
    } else {
        const uint PC = L >= 4u ? 4u : L, PR = L / PC;
        const uint rg = lane / (16u / PC), cg = lane % (16u / PC);
        [[unroll]] for (uint i = 0; i < L; i++) {
            erow[i] = rg * PR + i / PC;
            ecol[i] = cg * PC + i % PC;
        }
    }
#endif

    // row tiles: one (dense), or the expert's tiles mg, mg + m_groups, ... (grid stride)
    for (uint mt = mg; mt * BM < count; mt += pc.m_groups) {
        barrier(); // the previous tile's stores are done with srow
        for (uint r = tid; r < BM; r += WG) {
            uint i = mt * BM + r, xrow = NONE;
#ifdef HK_MMQ_ID
            if (i < count) {
                uint s = slot_list[pc.view_offset[4] / 4u + first + i];
                xrow = s < pc.m ? s : NONE;
            }
#else
            if (i < count)
                xrow = i;
#endif
            srow[r] = xrow;
        }
        // f32 sums of the blocks: `acc` over up to 32 blocks, then added into `total`, so that a
        // long k does not sum thousands of terms into one running f32 (its rounding grows with
        // the count: sqrt(k/64) ulps, 2e-6 of the result at k = 65536, against 6e-7 two-level)
        float acc[RM * RN * L], total[RM * RN * L];
        [[unroll]] for (uint a = 0; a < RM * RN * L; a++) {
            acc[a] = 0.0;
            total[a] = 0.0;
        }

        for (uint st = 0; st < stages; st++) {
            barrier(); // srow written; the previous stage's compute is done with the tiles
            // X: one Q8_1 block (9 words) per item; rows past the end and absent slots stage zeros
            for (uint it = tid; it < BM * KS; it += WG) {
                uint r = it / KS, kk = it % KS, kb = st * KS + kk, xrow = srow[r];
                uvec4 qa = uvec4(0u), qb = uvec4(0u); // the block's 32 quants
                float d = 0.0;
                if (xrow != NONE && kb < KB) {
#ifdef HK_MMQ_ID
                    xrow /= pc.slots_per_x_row;
#endif
                    uint xb = pc.view_offset[1] / 4u + (xrow * KB + kb) * 9u;
                    d = unpackHalf2x16(xq[xb]).x;
                    qa = uvec4(xq[xb + 1u], xq[xb + 2u], xq[xb + 3u], xq[xb + 4u]);
                    qb = uvec4(xq[xb + 5u], xq[xb + 6u], xq[xb + 7u], xq[xb + 8u]);
                }
                [[unroll]] for (uint w = 0; w < 4u; w++) {
                    sa[r * STRIDE + kk * 8u + w] = qa[w];
                    sa[r * STRIDE + kk * 8u + 4u + w] = qb[w];
                }
                sxd[kk * BM + r] = d;
#ifdef HK_Q4_K
                sxs[kk * BM + r] = float(hk_byte_sum8(qa, qb));
#endif
            }
            // W: one 32-value block per item; columns past n stage zeros
            for (uint it = tid; it < BN * KS; it += WG) {
                uint r = it / KS, kk = it % KS, kb = st * KS + kk;
                if (n0 + r < pc.n && kb < KB) {
                    hk_mmq_stage_w(r, kk, w0 + (n0 + r) * row_u16, kb);
                } else {
                    [[unroll]] for (uint w = 0; w < 8u; w++)
                        sb[r * STRIDE + kk * 8u + w] = 0u;
                    swa[kk * BN + r] = 0.0;
#if defined(HK_Q4_K) || defined(HK_Q6_K)
                    swb[kk * BN + r] = 0.0;
#endif
                }
            }
            barrier();

            [[unroll]] for (uint kk = 0; kk < KS; kk++) {
                if (st * KS + kk >= KB)
                    break;
                // X factors of this invocation's rows, for every subtile row
                float xd[RM * L];
#ifdef HK_Q4_K
                float xs[RM * L];
#endif
                [[unroll]] for (uint im = 0; im < RM; im++)
                    [[unroll]] for (uint i = 0; i < L; i++) {
                        uint row = (wm * RM + im) * 16u + erow[i];
                        xd[im * L + i] = sxd[kk * BM + row];
#ifdef HK_Q4_K
                        xs[im * L + i] = sxs[kk * BM + row];
#endif
                    }
#ifdef HK_COOPMAT
                MAT_A fa[RM];
#ifdef HK_Q6_K
                MAT_A fl[RM]; // two 16-value scales per block: the low half of k here, the high in fa
#endif
                [[unroll]] for (uint im = 0; im < RM; im++) {
                    coopMatLoad(fa[im], sa, (wm * RM + im) * 16u * STRIDE + kk * 8u, STRIDE,
                                gl_CooperativeMatrixLayoutRowMajor);
#ifdef HK_Q6_K
                    fl[im] = fa[im] * mask_lo;
                    fa[im] = fa[im] - fl[im];
#endif
                }
#endif
                [[unroll]] for (uint jn = 0; jn < RN; jn++) {
                    float wa[L];
#if defined(HK_Q4_K) || defined(HK_Q6_K)
                    float wb[L];
#endif
                    [[unroll]] for (uint i = 0; i < L; i++) {
                        uint col = (wn * RN + jn) * 16u + ecol[i];
                        wa[i] = swa[kk * BN + col];
#if defined(HK_Q4_K) || defined(HK_Q6_K)
                        wb[i] = swb[kk * BN + col];
#endif
                    }
#ifdef HK_COOPMAT
                    MAT_B fb;
                    coopMatLoad(fb, sb, (wn * RN + jn) * 16u * STRIDE + kk * 8u, STRIDE,
                                gl_CooperativeMatrixLayoutColumnMajor);
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
                            uint ra = ((wm * RM + im) * 16u + erow[i]) * STRIDE + kk * 8u;
                            uint rb = ((wn * RN + jn) * 16u + ecol[i]) * STRIDE + kk * 8u;
                            int q0 = 0, q1 = 0;
                            [[unroll]] for (uint w = 0; w < 4u; w++) {
                                q0 += hk_dot4(sa[ra + w], sb[rb + w]);
                                q1 += hk_dot4(sa[ra + 4u + w], sb[rb + 4u + w]);
                            }
#ifndef HK_Q6_K
                            q0 += q1;
#endif
#endif
                            // the scale epilogue, one expression for both arms
                            uint a = (im * RN + jn) * L + i, x = im * L + i;
#if defined(HK_Q8_0)
                            acc[a] = fma(hk_i2f(q0) * wa[i], xd[x], acc[a]);
#elif defined(HK_Q4_K)
                            // d*sc*dot - dmin*m*sum(xq) (swb holds -dmin*m) rounded once where they cancel
                            acc[a] = fma(fma(hk_i2f(q0), wa[i], wb[i] * xs[x]), xd[x], acc[a]);
#else
                            acc[a] = fma(fma(hk_i2f(q1), wb[i], hk_i2f(q0) * wa[i]), xd[x], acc[a]);
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
                    uint xrow = srow[(wm * RM + im) * 16u + erow[i]], col = n0 + (wn * RN + jn) * 16u + ecol[i];
                    if (xrow != NONE && col < pc.n)
                        y[y0 + xrow * pc.n + col] = layout_ok ? total[(im * RN + jn) * L + i] : uintBitsToFloat(0x7FC00000u);
                }
    }
}
