#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifdef HK_COOPMAT
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#elif !defined(HK_SCALAR_DOT)
#extension GL_EXT_spirv_intrinsics : require
#endif
// Int8 GEMM for prefill (MMQ): out[i, j] = X[i, :] . W[j, :], X as Q8_1 blocks (one row of k/32
// blocks per token), W as GGUF blocks (HK_Q8_0 / HK_Q4_K / HK_Q5_K / HK_Q6_K), decoded into shared
// memory one k step at a time and never expanded in memory. Per 32-value block the int8 quants are
// summed exactly in int32; the block scales are applied in f32 (mmq_weights.glsl says how per type).
//
// Tiling (specialization constants 1-7): a workgroup computes a BM x BN tile of out, BM = WARPS_M
// x RM x 16 rows (tokens), BN = WARPS_N x RN x 16 columns (weight rows); each warp of LANES
// invocations owns RM x RN subtiles of 16 x 16. A k step is KS blocks of 32 values: the int8
// quants of the tile's X and W rows and their factors, staged in shared memory in two halves
// (loads into registers, then stores), so that with PREFETCH the next step's loads are in flight
// while the warps multiply the current one. Per block and subtile, the int32 sums of a 16 x 16 x 32
// product land in L = 256 / LANES elements per invocation, which the f32 scale epilogue reads:
//   HK_COOPMAT  a warp is one subgroup; the products are int8 x int8 -> int32 cooperative-matrix
//               multiplies (16x16x32). Which elements of a result an invocation holds is
//               implementation-defined: it is learnt once by loading a matrix of element indices
//               (components of matrices of one type are distributed alike, since component-wise
//               arithmetic between them is matrix arithmetic).
//   default     the same matrices as views of the staged tiles, their products as packed int8 dot
//               products (dot.glsl) of the elements an invocation holds: NVIDIA's ownership of a
//               16x16 accumulator (below), or (HK_MMQ_EMU_GENERIC, testing only) another one, to
//               run the code that serves any other ownership. No subgroup operation.
// The epilogue has two forms: `fixed`, for the NVIDIA ownership (rows lane/4 and lane/4 + 8,
// columns 2(lane%4) + {0, 1, 8, 9}: each invocation loads its 2 rows' and 4 columns' factors per
// block), and `generic`, for any other (the factors of each element). Everything else — staging,
// the scale order, stores — is one code for all arms: the int32 sums are exact, so the arms agree
// bit for bit wherever the driver compiles the epilogue's fma the same way (Vulkan lets an fma be
// split into a multiply and an add).
//   HK_MMQ_ID   expert-indexed (MoE prefill): workgroups = experts x row groups x column tiles;
//               each takes the row tiles of its expert's slot list (offsets, slots) with a grid
//               stride, gathers X rows through the list and writes each result row to its slot.
// no workgroup sums here: every word of shared memory is budgeted (tile_shared_bytes in mmq.c)
#define HK_NO_WORKGROUP_SUM
#include "common.glsl"
#if defined(HK_Q4_K) || defined(HK_Q5_K)
#define HK_MMQ_MINS // d*sc*q - dmin*m per sub-block: the epilogue needs each block's sum of X quants
#endif

layout(binding = 0) readonly buffer Weights { uint16_t w16[]; };
layout(binding = 0) readonly buffer Weights32 { uint w32[]; };   // WLOAD 1: 4-byte aligned rows
layout(binding = 0) readonly buffer Weights128 { uvec4 w128[]; }; // WLOAD 2: 16-byte aligned view
layout(binding = 1) readonly buffer XQ { uint xq[]; };            // Q8_1 blocks of 9 words
layout(binding = 1) readonly buffer XQ4 { uvec4 xq4[]; };         // FLAGS X16
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
layout(constant_id = 6) const uint KS = 4;
// bit 0 PREFETCH; bit 1 GENERIC: the generic epilogue whatever the ownership (to measure it);
// bit 2 TWO_LEVEL: block sums in f32 per 32 blocks, then added into the total (a long k);
// bit 3 X16: X read 16 bytes per load (the host sets it where every step's rows are 16-byte aligned);
// bit 7 ROLLED: the blocks of a step in a loop the compiler keeps (fewer registers live) rather
// than unrolled (one block's multiplies may overlap another's epilogue)
layout(constant_id = 7) const uint FLAGS = 1;

const uint BM = WARPS_M * RM * 16u;
const uint BN = WARPS_N * RN * 16u;
const uint L = 256u / LANES;
// words per staged row: KS blocks of 8 words, plus 4 so that the 16-byte rows a matrix load
// reads from 8 consecutive rows fall into different banks
const uint STRIDE = 8u * KS + 4u;
// X rows: Q6_K's blocks take 12 words, the low 16 values (4 words), 4 words of zeros, the high 16:
// the 8 words from 12 kk are the block with its high half zero, those from 12 kk + 4 the block
// with its low half zero, so that each 16-value scale has its own product with no operand
// arithmetic (a product with a mask compiles to many byte instructions per split on NVIDIA).
// 12 KS + 4 words keeps the rows of a matrix load in different banks (KS >= 2).
#ifdef HK_Q6_K
const uint A_BLOCK = 12u;
#else
const uint A_BLOCK = 8u;
#endif
const uint STRIDE_A = A_BLOCK * KS + 4u;
const uint NONE = 0xFFFFFFFFu;
const bool PREFETCH = (FLAGS & 1u) != 0u;
const bool FORCE_GENERIC = (FLAGS & 2u) != 0u;
const bool TWO_LEVEL = (FLAGS & 4u) != 0u;
const bool X16 = (FLAGS & 8u) != 0u;
const bool ROLLED = (FLAGS & 128u) != 0u;
// bits 8-9 WLOAD: the weight loads' width (mmq_weights.glsl), from the view's alignment: Q4_K, Q5_K 2
// 16-byte, 1 32-bit, 0 16-bit; Q8_0 and Q6_K 1 32-bit (every row on 4 bytes), else 0. A constant,
// so that each pipeline holds only its own loads.
const uint WLOAD = (FLAGS >> 8) & 3u;
const uint GROUP_STAGES = KS < 32u ? 32u / KS : 1u; // k steps summed before adding into the total
#ifdef HK_MMQ_PROBES
// development builds only (CMake HK_MMQ_PROBES, HK_MMQ_PROBE=bits): parts of the work left out, to
// time the rest; the results are wrong
const bool PROBE_NO_EPILOGUE = (FLAGS & 16u) != 0u; // one add per element instead of the epilogue
const bool PROBE_NO_MMA = (FLAGS & 32u) != 0u;      // products replaced by a value (no fragment loads)
const bool PROBE_NO_GLOBAL = (FLAGS & 64u) != 0u;   // staging without global loads
#else
const bool PROBE_NO_EPILOGUE = false, PROBE_NO_MMA = false, PROBE_NO_GLOBAL = false;
#endif

HK_PUSH_BEGIN
    uint m;               // rows of X and out; HK_MMQ_ID: slots
    uint n;
    uint k;
    uint m_groups;        // workgroups along m: row tiles (dense), or per expert (grid stride)
    uint n_tiles;
    uint n_experts;       // HK_MMQ_ID
    uint slots_per_x_row; // HK_MMQ_ID
HK_PUSH_END

shared uint sa[BM * STRIDE_A]; // X quants: row r, block kk at word r * STRIDE_A + A_BLOCK kk
shared uint sb[BN * STRIDE];  // W quants
shared float sxd[KS * BM];    // X block scale d: block kk of row r at kk * BM + r
shared vec4 sw4[KS * BN / 2]; // W block factors (wa, wb): block kk of column c in (kk * BN + c) / 2,
                              // .xy for even c, .zw for odd
shared uint srow[BM];         // out row of each tile row (HK_MMQ_ID: the slot), or NONE
#ifdef HK_MMQ_ID
shared uint sxrow_id[BM];     // X row of each tile row (the slot's x row, divided once), or NONE
#define sxrow sxrow_id
#else
#define sxrow srow            // dense: the X row is the out row
#endif
#ifdef HK_COOPMAT
shared int spat[256];         // element indices, to learn the accumulator ownership
#endif

uint tid, n0, w_row0, row_u16, KB;

void w_set(uint kk, uint r, vec2 f)
{
    uint i = (kk * BN + r) / 2u;
    if ((r & 1u) == 0u)
        sw4[i].xy = f;
    else
        sw4[i].zw = f;
}

#include "mmq_weights.glsl"
#ifndef HK_COOPMAT
#include "dot.glsl"
#endif

// ---- the matrix operations ----
// A product starts from a zero accumulator and its int32 sums (exact in f32: below 2^24, at most
// 32 x 128 x 128 for Q8_0) become f32 by a conversion. Not common.glsl's biased start
// (HK_I2F_BIAS and a subtraction): an accumulator is overwritten by its product, so the compiler
// writes the bias constant into every product's registers first, moves that cost more than the
// conversion saves.
#ifdef HK_COOPMAT
#define MAT_A coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA>
#define MAT_B coopmat<int8_t, gl_ScopeSubgroup, 32, 16, gl_MatrixUseB>
#define MAT_C coopmat<int, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
// rows of A from sa at word offset off, columns of B from sb (each column a staged W row)
MAT_A cm_load_a(uint off)
{
    MAT_A a;
    coopMatLoad(a, sa, off, STRIDE_A, gl_CooperativeMatrixLayoutRowMajor);
    return a;
}
MAT_B cm_load_b(uint off)
{
    MAT_B b;
    coopMatLoad(b, sb, off, STRIDE, gl_CooperativeMatrixLayoutColumnMajor);
    return b;
}
MAT_B ones;  // every element 1 (set in main)
#define cm_ones() ones
#define cm_mma(a, b) (PROBE_NO_MMA ? MAT_C(int(tid)) : coopMatMulAdd(a, b, MAT_C(0)))
#define cm_elem(c, e) c[e]
#else
// a matrix is its place in the staged tile; the product is computed where it is read
struct MAT_A {
    uint off;
    uint part; // k words 0 .. 7 (0), 0 .. 3 (1), 4 .. 7 (2)
};
struct MAT_B {
    uint off; // NONE: every element 1
};
struct MAT_C {
    int v[8]; // the host runs this arm on warps of 32 invocations: L = 8
};
MAT_A cm_load_a(uint off) { return MAT_A(off, 0u); }
MAT_B cm_load_b(uint off) { return MAT_B(off); }
#define cm_ones() MAT_B(NONE)
#define cm_elem(c, e) c.v[e]
uint lane;
// the element ownership of this arm: NVIDIA's (the fixed epilogue's), or row-major runs of L
uint el_row(uint e)
{
#ifdef HK_MMQ_EMU_GENERIC
    return (lane * L + e) / 16u;
#else
    return (lane >> 2) + 8u * ((e >> 1) & 1u);
#endif
}
uint el_col(uint e)
{
#ifdef HK_MMQ_EMU_GENERIC
    return (lane * L + e) % 16u;
#else
    return 2u * (lane & 3u) + (e & 1u) + 8u * (e >> 2);
#endif
}
MAT_C cm_mma(MAT_A a, MAT_B b)
{
    MAT_C c;
    if (PROBE_NO_MMA) {
        [[unroll]] for (uint e = 0; e < L; e++)
            c.v[e] = int(tid);
        return c;
    }
    [[unroll]] for (uint e = 0; e < L; e++) {
        uint ra = a.off + el_row(e) * STRIDE_A, rb = b.off + el_col(e) * STRIDE;
        int s = 0;
        [[unroll]] for (uint w = 0; w < 8u; w++) {
            if ((a.part == 1u && w >= 4u) || (a.part == 2u && w < 4u))
                continue;
            uint bw = 0x01010101u;
            if (b.off != NONE)
                bw = sb[rb + w];
            s += hk_dot4(sa[ra + w], bw);
        }
        c.v[e] = s;
    }
    return c;
}
#endif

// ---- X staging: the KS blocks of a step of each tile row, 9 words per block (d|s, 8 quant
// words), read word for word (or 16 bytes at a time with X16) so that consecutive invocations
// read consecutive words of a row's run of 9 KS words ----
const uint XW = 9u * KS;
const uint XU = X16 ? 4u : 1u; // words per load
const uint XN = (BM * XW / XU + WG - 1u) / WG;
uvec4 xr[XN];

void x_load(uint st)
{
    const uint x0 = pc.view_offset[1] / 4u;
    [[unroll]] for (uint j = 0; j < XN; j++) {
        uint it = tid + j * WG, r = it / (XW / XU), c = (it % (XW / XU)) * XU;
        uvec4 v = uvec4(0u);
        uint xrow = it < BM * XW / XU ? sxrow[min(r, BM - 1u)] : NONE;
        if (xrow != NONE && st * KS + c / 9u < KB && !PROBE_NO_GLOBAL) {
            uint wi = x0 + (xrow * KB + st * KS) * 9u + c;
            if (X16)
                v = xq4[wi / 4u];
            else
                v.x = xq[wi];
        }
        xr[j] = v;
    }
}

void x_store()
{
    [[unroll]] for (uint j = 0; j < XN; j++) {
        uint it = tid + j * WG, r = it / (XW / XU), c0 = (it % (XW / XU)) * XU;
        if (it < BM * XW / XU) {
            [[unroll]] for (uint u = 0; u < XU; u++) {
                uint c = c0 + u, kk = c / 9u, wi = c % 9u;
                if (wi == 0u)
                    sxd[kk * BM + r] = unpackHalf2x16(xr[j][u]).x; // the s half is never read
                else // Q6_K's high half A_BLOCK - 8 = 4 words on (the zeros between are never written)
                    sa[r * STRIDE_A + kk * A_BLOCK + wi - 1u + (wi > 4u ? A_BLOCK - 8u : 0u)] = xr[j][u];
            }
        }
    }
}

// ---- the f32 epilogue of one block ----
// acc[(im * RN + jn) * L + e]: element e of subtile (im, jn)
float acc[RM * RN * L];
uint wm0, wn0;

// one element's share of block kk: its int32 sums and factors
void epilogue(uint a, int c0, int c1, float xd, float xs, vec2 w)
{
    if (PROBE_NO_EPILOGUE) {
        acc[a] += intBitsToFloat(c0);
        return;
    }
#if defined(HK_Q8_0)
    acc[a] = fma(float(c0) * w.x, xd, acc[a]);
#elif defined(HK_MMQ_MINS)
    // d*sc*dot - dmin*m*sum(xq) (w.y holds -dmin*m) rounded once where they cancel
    acc[a] = fma(fma(float(c0), w.x, w.y * xs), xd, acc[a]);
#else
    // c0: the low 16 values (first scale), c1 the high 16
    acc[a] = fma(fma(float(c1), w.y, float(c0) * w.x), xd, acc[a]);
#endif
}

// the fixed ownership: element e of a 16x16 subtile in lane ln
uint fixed_row(uint ln, uint e) { return (ln >> 2) + 8u * ((e >> 1) & 1u); }
uint fixed_col(uint ln, uint e) { return 2u * (ln & 3u) + (e & 1u) + 8u * (e >> 2); }

#ifdef HK_COOPMAT
uint epos[L]; // learnt: element e of a subtile is row epos[e] >> 4, column epos[e] & 15
uint el_row(uint e) { return epos[e] >> 4; }
uint el_col(uint e) { return epos[e] & 15u; }
// Loads the matrix of element indices (spat) and reads which ones this invocation holds; false
// where the implementation spreads a 16x16 matrix otherwise (replicated components). Learnt
// again where it is used, so that the fixed epilogue's registers need not hold it.
bool learn_layout()
{
    MAT_C pat;
    coopMatLoad(pat, spat, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    bool ok = pat.length() == int(L);
    [[unroll]] for (uint e = 0; e < L; e++)
        epos[e] = ok ? uint(pat[e]) & 255u : 0u;
    return ok;
}
#endif

// The block's A operands (Q6_K: its halves at the 16-value scales, as staged) and, for Q4_K and
// Q5_K, the sums of its X quants per row (a product with a matrix of ones: in the elements' own
// ownership).
#ifdef HK_Q6_K
#define A_OPS 2u
#else
#define A_OPS 1u
#endif
#ifdef HK_COOPMAT
#define A_HALF(off, part) cm_load_a(off)
#else
#define A_HALF(off, part) MAT_A(off, part) // the portable product reads only the half's words
#endif
#ifdef HK_Q6_K
#define BLOCK_OPERANDS(kk, fa)                                                 \
    MAT_A fa[RM * 2u];                                                         \
    [[unroll]] for (uint im = 0; im < RM; im++) {                              \
        uint off_ = (wm0 + 16u * im) * STRIDE_A + 12u * (kk);                  \
        fa[2u * im] = A_HALF(off_, 1u);                                        \
        fa[2u * im + 1u] = A_HALF(off_ + 4u, 2u);                              \
    }
#else
#define BLOCK_OPERANDS(kk, fa)                                                 \
    MAT_A fa[RM];                                                              \
    [[unroll]] for (uint im = 0; im < RM; im++)                                \
        fa[im] = cm_load_a((wm0 + 16u * im) * STRIDE_A + 8u * (kk));
#endif

// fixed ownership: element e is row lane/4 + 8 ((e >> 1) & 1), column 2 (lane % 4) + (e & 1) + 8 (e >> 2)
void compute_fixed(uint kk, uint ln)
{
    const uint lr = ln >> 2, lc = 2u * (ln & 3u);
    BLOCK_OPERANDS(kk, fa)
    float xd[RM * 2u], xs[RM * 2u];
    [[unroll]] for (uint im = 0; im < RM; im++) {
        [[unroll]] for (uint h = 0; h < 2u; h++)
            xd[2u * im + h] = sxd[kk * BM + wm0 + 16u * im + lr + 8u * h];
#ifdef HK_MMQ_MINS
        MAT_C s = cm_mma(fa[im], cm_ones());
        xs[2u * im] = float(cm_elem(s, 0));
        xs[2u * im + 1u] = float(cm_elem(s, 2));
#else
        xs[2u * im] = 0.0;
        xs[2u * im + 1u] = 0.0;
#endif
    }
    [[unroll]] for (uint jn = 0; jn < RN; jn++) {
        uint c = kk * BN + wn0 + 16u * jn + lc;
        vec4 wlo = sw4[c / 2u], whi = sw4[(c + 8u) / 2u];
        vec2 w[4] = vec2[4](wlo.xy, wlo.zw, whi.xy, whi.zw);
        MAT_B fb = cm_load_b((wn0 + 16u * jn) * STRIDE + 8u * kk);
        [[unroll]] for (uint im = 0; im < RM; im++) {
            MAT_C c0 = cm_mma(fa[A_OPS * im], fb);
#ifdef HK_Q6_K
            MAT_C c1 = cm_mma(fa[2u * im + 1u], fb);
#endif
            [[unroll]] for (uint e = 0; e < L; e++) { // L is 8 here
                uint h = (e >> 1) & 1u, ci = (e & 1u) + 2u * (e >> 2);
#ifdef HK_Q6_K
                int q1 = cm_elem(c1, e);
#else
                int q1 = 0;
#endif
                epilogue((im * RN + jn) * L + e, cm_elem(c0, e), q1, xd[2u * im + h], xs[2u * im + h], w[ci]);
            }
        }
    }
}

// any ownership: each element's own factors
void compute_generic(uint kk)
{
    BLOCK_OPERANDS(kk, fa)
#ifdef HK_MMQ_MINS
    MAT_C s[RM];
    [[unroll]] for (uint im = 0; im < RM; im++)
        s[im] = cm_mma(fa[im], cm_ones());
#endif
    [[unroll]] for (uint jn = 0; jn < RN; jn++) {
        MAT_B fb = cm_load_b((wn0 + 16u * jn) * STRIDE + 8u * kk);
        [[unroll]] for (uint im = 0; im < RM; im++) {
            MAT_C c0 = cm_mma(fa[A_OPS * im], fb);
#ifdef HK_Q6_K
            MAT_C c1 = cm_mma(fa[2u * im + 1u], fb);
#endif
            [[unroll]] for (uint e = 0; e < L; e++) {
                uint row = wm0 + 16u * im + el_row(e), col = wn0 + 16u * jn + el_col(e);
                vec4 wv = sw4[(kk * BN + col) / 2u];
#ifdef HK_MMQ_MINS
                float xs = float(cm_elem(s[im], e));
#else
                float xs = 0.0;
#endif
#ifdef HK_Q6_K
                int q1 = cm_elem(c1, e);
#else
                int q1 = 0;
#endif
                epilogue((im * RN + jn) * L + e, cm_elem(c0, e), q1, sxd[kk * BM + row], xs,
                         (col & 1u) != 0u ? wv.zw : wv.xy);
            }
        }
    }
}

// The k loop of one row tile: stage each step (loads issued a step ahead with PREFETCH), then
// COMPUTE (one block kk) for its KS blocks.
#define K_LOOP(COMPUTE)                                                                   \
    if (PREFETCH) {                                                                       \
        x_load(0u);                                                                       \
        w_load(0u);                                                                       \
    }                                                                                     \
    for (uint st = 0; st < stages; st++) {                                                \
        if (!PREFETCH) {                                                                  \
            x_load(st);                                                                   \
            w_load(st);                                                                   \
        }                                                                                 \
        barrier(); /* the previous step's multiplies are done with the tiles */           \
        x_store();                                                                        \
        w_store(st);                                                                      \
        barrier();                                                                        \
        if (PREFETCH && st + 1u < stages) {                                               \
            x_load(st + 1u);                                                              \
            w_load(st + 1u);                                                              \
        }                                                                                 \
        if (ROLLED) {                                                                     \
            [[dont_unroll]] for (uint kk = 0; kk < KS; kk++)                              \
                COMPUTE;                                                                  \
        } else {                                                                          \
            [[unroll]] for (uint kk = 0; kk < KS; kk++)                                   \
                COMPUTE;                                                                  \
        }                                                                                 \
        if (TWO_LEVEL && ((st + 1u) % GROUP_STAGES == 0u || st + 1u == stages)) {         \
            [[unroll]] for (uint a = 0; a < RM * RN * L; a++) {                           \
                total[a] += acc[a];                                                       \
                acc[a] = 0.0;                                                             \
            }                                                                             \
        }                                                                                 \
    }

void main()
{
    tid = gl_LocalInvocationIndex;
    const uint gid = hk_group_id();
    KB = pc.k / 32u;
    const uint stages = (KB + KS - 1u) / KS;
    row_u16 = (pc.k / HK_MMQ_BLOCK_VALUES) * HK_MMQ_BLOCK_U16;
#ifdef HK_COOPMAT
    const uint warp = gl_SubgroupID, ln = gl_SubgroupInvocationID;
#else
    const uint warp = tid / LANES, ln = tid % LANES;
    lane = ln;
#endif
    wm0 = (warp / WARPS_N) * RM * 16u;
    wn0 = (warp % WARPS_N) * RN * 16u;

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
    n0 = nt * BN;
    w_row0 = pc.view_offset[0] / 2u + (wrow0 + n0) * row_u16;

    // which elements of a subtile this invocation holds, and whether that is the fixed ownership
    bool layout_ok = true, own_fixed = !FORCE_GENERIC && L == 8u;
#ifdef HK_Q6_K
    // the zeros between the halves of each staged X block, never written again (barriers below
    // order them before any staging)
    for (uint i = tid; i < BM * STRIDE_A; i += WG)
        sa[i] = 0u;
#endif
#ifdef HK_COOPMAT
    for (uint i = tid; i < 256u; i += WG)
        spat[i] = int(i);
    barrier();
    // an implementation that spreads a 16x16 matrix otherwise writes NaN below rather than a
    // partial answer
    layout_ok = learn_layout();
    [[unroll]] for (uint e = 0; e < L; e++)
        if (L == 8u)
            own_fixed = own_fixed && el_row(e) == fixed_row(ln, e) && el_col(e) == fixed_col(ln, e);
    own_fixed = subgroupAll(own_fixed); // the multiplies below are the subgroup's: one form for all of it
    ones = MAT_B(int8_t(1));
#else
    [[unroll]] for (uint e = 0; e < L; e++)
        if (L == 8u)
            own_fixed = own_fixed && el_row(e) == fixed_row(ln, e) && el_col(e) == fixed_col(ln, e);
#endif

    // row tiles: one (dense), or the expert's tiles mg, mg + m_groups, ... (grid stride)
    for (uint mt = mg; mt * BM < count; mt += pc.m_groups) {
        barrier(); // the previous tile's loads and stores are done with srow
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
#ifdef HK_MMQ_ID
            sxrow_id[r] = xrow != NONE ? xrow / pc.slots_per_x_row : NONE;
#endif
        }
        barrier();
        // f32 sums of the blocks; TWO_LEVEL: `acc` over 32 blocks, then added into `total`, so
        // that a long k does not sum thousands of terms into one running f32 (its rounding grows
        // with the count: sqrt(k/64) ulps, 2e-6 of the result at k = 65536, against 6e-7)
        float total[TWO_LEVEL ? RM * RN * L : 1];
        [[unroll]] for (uint a = 0; a < RM * RN * L; a++) {
            acc[a] = 0.0;
            if (TWO_LEVEL)
                total[a] = 0.0;
        }

        // the epilogue's form is chosen outside the k loop, so that the compiler may interleave one
        // block's multiplies with the last one's epilogue; blocks past k (a partial last step of
        // Q8_0) are staged as zeros and add nothing
        if (own_fixed) {
            K_LOOP(compute_fixed(kk, ln))
        } else {
#ifdef HK_COOPMAT
            learn_layout();
#endif
            K_LOOP(compute_generic(kk))
        }

        const uint y0 = pc.view_offset[2] / 4u;
#ifdef HK_COOPMAT
        if (!own_fixed)
            learn_layout();
#endif
        [[unroll]] for (uint im = 0; im < RM; im++)
            [[unroll]] for (uint jn = 0; jn < RN; jn++)
                [[unroll]] for (uint e = 0; e < L; e++) {
                    uint er = own_fixed ? fixed_row(ln, e) : el_row(e), ec = own_fixed ? fixed_col(ln, e) : el_col(e);
                    uint xrow = srow[wm0 + 16u * im + er], col = n0 + wn0 + 16u * jn + ec;
                    uint a = (im * RN + jn) * L + e;
                    if (xrow != NONE && col < pc.n)
                        y[y0 + xrow * pc.n + col] = !layout_ok ? uintBitsToFloat(0x7FC00000u) : TWO_LEVEL ? total[a] : acc[a];
                }
    }
}
