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
// hk_mmq for a few tokens (m <= 16) and Q4_K, Q5_K (HK_Q5_K), Q8_0 (HK_Q8_0) or Q6_K (HK_Q6_K)
// weights: out[t, j] = X[t, :] . W[j, :] as mmq.comp computes it (int8 sums exact per 32-value
// block; Q4_K's and Q5_K's d*sc*dot - dmin*m*sum(xq), Q8_0's d*dot in f32), laid out for a weight
// stream rather than for reuse: a workgroup owns RT row tiles of 16 weight rows and all TOKENS (8
// or 16) token columns, its WARPS warps split k by super-blocks of 256 values (warp w takes
// super-blocks w, w + WARPS, ...; for Q8_0 a super-block is 8 blocks, 272 bytes), and each warp
// works alone through its own half super-blocks (16 RT rows x 128 values, and the tokens' 4 Q8_1
// blocks): it loads each half a super-block before it needs it (a set of registers per half),
// unpacks it into its own tiles in shared memory, and multiplies: per 32-value block each row
// tile's 16 x 32 weight tile by the 32 x TOKENS tile of the tokens (W as A, X as B: int8
// 16xTOKENSx32 -> int32); for Q4_K and Q5_K also a tile of ones by the tokens' tile (each token's
// exact sum of quants, in the accumulator's own ownership; the row tiles share it and the tokens'
// staging). At the end the warps' partial sums are added in warp order (deterministic) and
// written.
//   HK_COOPMAT  a warp is a subgroup, the products KHR cooperative matrices; which elements of the
//               16 x TOKENS result an invocation holds is learnt by loading a matrix of indices. A warp
//               only waits for itself (subgroup-scope barriers) until the final sum.
//   default     the same tiles as views of shared memory, each element an invocation holds
//               (NVIDIA's m16n8 ownership, per 8 columns: rows lane/4 and lane/4 + 8, columns
//               2 (lane % 4) + 0, 1) computed with packed int8 dot products (dot.glsl), on warps of
//               32 invocations that need not be subgroups (workgroup barriers).
// Staging takes 16-byte loads and stores: the tokens' 4 blocks of a half lie in 144 contiguous
// bytes on a 16-byte boundary (k a multiple of 256), loaded as 9 pieces and sorted into quants and
// d word by word at the store: fewer load and store instructions per byte than a 4-byte load per
// word. Every address an invocation stages to is fixed for the whole loop (computed once, before
// it: no divisions by 9 in the loop), and the stores and the epilogue's reads of shared memory are
// free of bank conflicts.
// Q8_0's blocks lie on 2 bytes, their quants on 4 (odd blocks) or 2 (even ones); its weights are
// still read in 16-byte pieces of the rows, 9 per half super-block, so the stream takes as few load
// instructions per byte as Q4_K's: which of a piece's 4 words start a block's quant word, which of
// them are shifted by 2 bytes (the quant word its high half and the next word's low half; for the
// last word of a piece the next piece's first word, loaded apart), and which hold a d is fixed by
// the piece's place in the super-block, so each invocation works it out once, before the loop
// (q8_plan).
// Q6_K's super-blocks (210 bytes) lie on 2 bytes, each somewhere else against 16 (a row's place
// repeats every 8 super-blocks, and rows start anywhere), so no plan fixed before the loop fits:
// a warp loads each of its rows' super-block as the 14 16-byte pieces that hold it (from its first
// byte rounded down to 16; 224 bytes) and stores them as they are into a raw area of its own
// (row stride RSW words, odd: the rows' words of one read fall into different banks); each invocation
// then reads its row's windows of ql and qh from there as words, shifted by 2 bytes where the
// super-block starts 2 bytes into a word (hk_q6k_shift), and unpacks them (hk_q6k_groups) into the
// tiles. Its 16-value scales split each 32-value block in two: the tokens' rows hold each block's
// quants as 12 words, the low 16 values, 4 words of zeros, the high 16, so that a matrix load at
// the block's word 0 reads the low half and zeros, at word 4 zeros and the high half (two
// products per block, each with its own factor d*scale). The quants are unpacked as 0..63, the
// -32 added as a product of a tile of -32 by the tokens' tile, the accumulator the products start
// from.
// Q5_K's super-blocks (176 bytes, 11 pieces: Q4_K's header, qh[32], Q4_K's qs) lie on 16 bytes and
// are staged as Q4_K's, with each quant's 5th bit put in at the store: bit j of qh byte l belongs
// to value l of sub-block j, so a qs piece (values 16 (q % 2) .. of a sub-block pair) takes qh
// piece q % 2. That piece is loaded with the headers, once per super-block for both halves.
// Needs 16-byte aligned views of W and X and k a multiple of 256, for Q6_K a tensor of a multiple
// of 16 bytes (its last piece inside it) and subgroups of a multiple of 32 (the host sends mmq.comp
// or the tokens matvec the rest).
#define HK_NO_WORKGROUP_SUM
#include "common.glsl"

layout(binding = 0) readonly buffer Weights128 { uvec4 w128[]; };
#ifdef HK_Q8_0
layout(binding = 0) readonly buffer Weights32 { uint w32[]; };
#endif
layout(binding = 1) readonly buffer XQ128 { uvec4 xq128[]; };
layout(binding = 2) writeonly buffer Out { float y[]; };

layout(constant_id = 1) const uint LANES = 32;
// row tiles of 16 per warp (1 or 2): two share the tokens' staging, their tile loads and the
// ones product
layout(constant_id = 2) const uint RT = 2;
// register sets of loads (1 or 2): with two a warp's loads fly a super-block ahead of its products,
// with one half a super-block
layout(constant_id = 3) const uint SETS = 2;
// token columns: 8 (m <= 8) or 16 (the products 16x16x32, twice the token staging and sums)
layout(constant_id = 4) const uint TOKENS = 8;
#ifdef HK_MMQ_PROBES
// development builds only (CMake HK_MMQ_PROBES, HK_MMQ_FEW_PROBE=bits): parts of the work left
// out, to time the rest (wrong results)
layout(constant_id = 5) const uint PROBE = 0;
#else
const uint PROBE = 0;
#endif
const bool PROBE_NO_X = (PROBE & 1u) != 0u;   // the tokens' blocks not loaded (zeros staged)
const bool PROBE_NO_W = (PROBE & 2u) != 0u;   // the weights not loaded (zeros staged)
const bool PROBE_NO_MMA = (PROBE & 4u) != 0u; // no products and no epilogue
const uint WARPS = WG / LANES;
const uint L = 16u * TOKENS / LANES; // elements of a 16 x TOKENS result per invocation
const uint NONE = 0xFFFFFFFFu;

HK_PUSH_BEGIN
    uint m;
    uint n;
    uint k;
HK_PUSH_END

// A warp's weight tiles (shw, in uvec4), for one half super-block: per row tile its 4 sub-blocks as
// 16 x 32 int8 tiles (tile i of row tile g at (4 g + i) TILE), rows TV uvec4 apart (32 bytes and 16
// of padding, so that the 16-byte rows a matrix load reads from 8 rows fall into different banks),
// tiles one uvec4 more than 16 rows apart: a store instruction's 8-invocation phase writes rows x
// and x + 4 (wrow) into tiles 2 apart, 32 bytes apart in the banks, so its 8 pieces fill all 32.
// Q8_0's quant words are stored one by one (8 invocations per row, 4 rows a store): with tiles 4
// uvec4 more than 16 rows apart a store instruction meets at most 2-way bank conflicts (1 apart: 3).
const uint TV = 3u;
#ifdef HK_Q8_0
const uint TILE = 16u * TV + 4u;
#else
const uint TILE = 16u * TV + 1u; // Q6_K's stores: 8 rows of one tile per phase, 3 uvec4 apart
#endif
const uint WSHW = 4u * RT * TILE;
// Q8_0 stores its tiles word by word, so they are an array of words there (offsets below stay in
// uvec4, SHW_WORDS words each): a uvec4 array stored a component at a time is slower
#ifdef HK_Q8_0
const uint SHW_WORDS = 4u;
shared uint shw[WARPS * WSHW * 4u];
uvec4 shw_vec(uint i) { return uvec4(shw[4u * i], shw[4u * i + 1u], shw[4u * i + 2u], shw[4u * i + 3u]); }
#else
const uint SHW_WORDS = 1u;
shared uvec4 shw[WARPS * WSHW];
uvec4 shw_vec(uint i) { return shw[i]; }
#endif
// A warp's words of shs, for the same half: token t's row at t * XS (XS = 36: the 8 columns of 4
// lanes of a matrix load fall into 32 banks) holds its block b's quants at 8 b and the block's
// first word (f16 d, f16 s; s is never read) at 32 + b; Q4_K's factor pairs (d*sc, -dmin*m),
// row r's (over the row tiles) of local sub-blocks 2 c and 2 c + 1 at FAC + 8 r + 4 (c ^ (r / 4 %
// 2)): a row's 16 bytes for the two sub-blocks the epilogue reads together, and rows x and x + 4
// in different banks; Q8_0's d of row r's local block b (f32) at FAC + 4 r + b. After the loop its
// first 16 TOKENS RT words hold its partial sums. WSHS is a multiple of 4, so that every warp's
// token rows start on 16 bytes, as matrix loads need.
// Q6_K's rows take 52 words (each block's 12: low quants, zeros, high quants; the first words at
// 48 + b; 52 columns apart the 8 columns of a matrix load still fall into 32 banks) and its
// factors (d*scale of the low and high 16 values of local block b, row r) sit where Q4_K's pairs do.
#ifdef HK_Q6_K
const uint XS = 52u, XHDR = 48u, XBLK = 12u;
#else
const uint XS = 36u, XHDR = 32u, XBLK = 8u;
#endif
const uint FAC = TOKENS * XS;
#ifdef HK_Q8_0
const uint WSHS = FAC + 64u * RT;
#else
const uint WSHS = FAC + 128u * RT;
#endif
shared uint shs[WARPS * WSHS];
#ifdef HK_Q6_K
// a warp's raw super-blocks: row r's 14 pieces at words r RSW ..
const uint RSW = 57u, WSHR = 16u * RT * RSW;
shared uint shr[WARPS * WSHR];
#endif
uint fac_word(uint r, uint b) { return FAC + 8u * r + 4u * ((b >> 1) ^ ((r >> 2) & 1u)) + 2u * (b & 1u); }
// the weight row that invocation u's piece of a half belongs to: rows x and x + 4 (not x + 1) in
// each 8-invocation phase of a store, within the same 8 rows
uint wrow(uint u) { uint v = u >> 2; return (v & ~7u) | ((v & 1u) << 2) | ((v >> 1) & 3u); }
#ifdef HK_COOPMAT
shared int spat[16u * TOKENS];
#endif

// loads of one half super-block per invocation: its 64 RT 16-byte weight pieces (row wrow(u)'s
// quants 16 q .. 16 q + 15 of the half, q = u % 4) and the 9 TOKENS 16-byte pieces of the tokens' 4
// Q8_1 blocks (TPL tokens per load: token TPL j + ln / 9's piece ln % 9); and once per super-block its
// 32 RT headers (row u / 2, twice: in each half each of the two invocations decodes two of the
// half's sub-blocks), in one set of registers, loaded right after the second half's decode. Rows
// past n, tokens past m and super-blocks past k load the last ones (in bounds; their results are
// never written).
// Q8_0: a half's pieces 0 .. 7 of each row, 8 invocations per row (piece u % 8 of row u / 8), with
// the words after them that a shifted last word needs (rn), and its ninth piece (one invocation per
// row; it never needs the next word): 9 loads of 16 bytes per row where Q4_K takes 4 and a header.
const uint TPL = LANES / 9u;
const uint NX = (TOKENS + TPL - 1u) / TPL;
#ifdef HK_Q8_0
const uint NQ = (128u * RT + LANES - 1u) / LANES;
const uint N9 = (16u * RT + LANES - 1u) / LANES;
uvec4 rq[SETS][NQ + N9], rx[SETS][NX];
uint rn[SETS][NQ];
#elif defined(HK_Q6_K)
// Q6_K: a super-block's raw pieces in one set, loaded a super-block ahead (piece u = ln + j LANES of
// the warp's: row u / 2 % 16 RT's pieces 2 (u / 32 RT) + u % 2 of 14, 32 bytes of a row per pair of
// invocations), the tokens' halves in two; decode items: u = ln + j LANES of the half's 32 RT, row
// u % 16 RT's 16 values 16 (u / 16 RT) .. of each of its 4 blocks
const uint NR = (224u * RT + LANES - 1u) / LANES, ND = (32u * RT + LANES - 1u) / LANES;
uvec4 rq[NR], rx[2][NX];
#else
const uint NQ = (64u * RT + LANES - 1u) / LANES;
const uint NH = (32u * RT + LANES - 1u) / LANES;
uvec4 rq[SETS][NQ], rh[NH], rx[SETS][NX];
#ifdef HK_Q5_K
const uint SBP = 11u, QS0 = 3u; // a super-block's 16-byte pieces, its first qs piece
// qh piece q % 2 of each qs piece's row, shifted right by 2 (q / 2) (its sub-block pair in the
// half): the 5th bits of half h's low nibbles are then bits 4 h, of its high nibbles 4 h + 1
uvec4 rqh[NQ];
#else
const uint SBP = 9u, QS0 = 1u;
#endif
#endif

#ifdef HK_COOPMAT
#define MAT_A coopmat<int8_t, gl_ScopeSubgroup, 16, 32, gl_MatrixUseA>
#define MAT_B coopmat<int8_t, gl_ScopeSubgroup, 32, TOKENS, gl_MatrixUseB>
#define MAT_C coopmat<int, gl_ScopeSubgroup, 16, TOKENS, gl_MatrixUseAccumulator>
#define WARP_BARRIER() controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease)
MAT_A ones;
MAT_A m32;
MAT_A load_a(uint off)
{
    MAT_A a;
    coopMatLoad(a, shw, off * SHW_WORDS, TV * SHW_WORDS, gl_CooperativeMatrixLayoutRowMajor);
    return a;
}
MAT_B load_b(uint off)
{
    MAT_B b;
    coopMatLoad(b, shs, off, XS, gl_CooperativeMatrixLayoutColumnMajor);
    return b;
}
#define ONES() ones
#define M32() m32
// from a zero accumulator, its int32 sums converted to f32 (as mmq.comp, which says why: no
// moves of a bias constant into every product's registers)
MAT_C mma(MAT_A a, MAT_B b) { return coopMatMulAdd(a, b, MAT_C(0)); }
MAT_C mma_add(MAT_A a, MAT_B b, MAT_C c) { return coopMatMulAdd(a, b, c); }
#define ELEM(c, e) c[e]
uint epos[L];
uint el_row(uint e) { return epos[e] / TOKENS; }
uint el_col(uint e) { return epos[e] % TOKENS; }
#else
#include "dot.glsl"
#define WARP_BARRIER() barrier()
struct MAT_A {
    uint off; // NONE: every element 1; NONE - 1: every element -32
};
struct MAT_B {
    uint off;
};
struct MAT_C {
    int v[8]; // the host runs this arm on warps of 32 invocations: L = TOKENS / 2 of them
};
MAT_A load_a(uint off) { return MAT_A(off); }
MAT_B load_b(uint off) { return MAT_B(off); }
#define ONES() MAT_A(NONE)
#define M32() MAT_A(NONE - 1u)
#define ELEM(c, e) c.v[e]
uint lane;
uint el_row(uint e) { return (lane >> 2) + 8u * ((e >> 1) & 1u); }
uint el_col(uint e) { return 2u * (lane & 3u) + (e & 1u) + 8u * (e >> 2); }
MAT_C mma_add(MAT_A a, MAT_B b, MAT_C c)
{
    [[unroll]] for (uint e = 0; e < L; e++) {
        uint rb = b.off + el_col(e) * XS;
        uvec4 a0 = uvec4(a.off == NONE ? 0x01010101u : 0xE0E0E0E0u), a1 = a0;
        if (a.off < NONE - 1u) {
            a0 = shw_vec(a.off + el_row(e) * TV);
            a1 = shw_vec(a.off + el_row(e) * TV + 1u);
        }
        int s = hk_dot16(a0, uvec4(shs[rb], shs[rb + 1u], shs[rb + 2u], shs[rb + 3u]), c.v[e]);
        c.v[e] = hk_dot16(a1, uvec4(shs[rb + 4u], shs[rb + 5u], shs[rb + 6u], shs[rb + 7u]), s);
    }
    return c;
}
MAT_C mma(MAT_A a, MAT_B b)
{
    MAT_C c;
    [[unroll]] for (uint e = 0; e < 8u; e++)
        c.v[e] = 0;
    return mma_add(a, b, c);
}
#endif

#ifdef HK_Q8_0
// words from a warp's tiles (bw) to row r's 32 bytes in the row tiles' tile 0 (tile b is 4 TILE b on)
uint q8_row_words(uint r) { return 4u * ((r >> 4) * 4u * TILE + (r & 15u) * TV); }
// Word w of piece p (bytes 16 p + 4 w of a super-block's 8 blocks of 34 bytes), for half h (blocks
// 4 h .. 4 h + 3): returns where the quant word starting in it goes (4 TILE b + j: word j of local
// block b's tile row; NONE if none of the half's starts there), with `shifted` when that quant
// word is its high half and the next word's low half (even blocks, on 2 bytes). The half's d
// need no plan: local block b's lies in piece 8 h + 2 b, word 2 h + b / 2, its low half for even
// b, else its high one.
uint q8_plan(uint p, uint w, uint h, out bool shifted)
{
    const uint a = 16u * p + 4u * w, i = a / 34u, o = a - 34u * i;
    shifted = (i & 1u) == 0u;
    // odd blocks lie on 4 bytes, their quants from byte 2; an even block's word at byte 32 holds
    // its last 2 quants and the next block's d
    uint j = !shifted ? (o - 2u) / 4u : o == 32u ? NONE : o / 4u;
    return j == NONE || i < 4u * h || i >= 4u * h + 4u ? NONE : 4u * TILE * (i - 4u * h) + j;
}
#elif defined(HK_Q6_K)
#define HK_Q6_K_PURE
#include "q6_k.glsl"
#else
#include "gemm_q4k.glsl"
#endif

void main()
{
    const uint tid = gl_LocalInvocationIndex, warp = tid / LANES, ln = tid % LANES;
#ifndef HK_COOPMAT
    lane = ln;
#endif
    const uint n0 = hk_group_id() * 16u * RT;
    if (n0 >= pc.n)
        return;
    const uint KB = pc.k / 32u, SB = pc.k / 256u, iters = (SB + WARPS - 1u) / WARPS;
#ifdef HK_Q8_0
    const uint SBW = SB * 17u; // a row's 16-byte pieces
#elif !defined(HK_Q6_K) // Q6_K addresses its rows by bytes (wbyte below)
    const uint SBW = SB * SBP;
#endif
#ifndef HK_Q6_K
    const uint w0 = pc.view_offset[0] / 16u + n0 * SBW; // row n0's first 16-byte chunk
#endif
    const uint x0 = pc.view_offset[1] / 16u;
    const uint y0 = pc.view_offset[2] / 4u;
    const uint last_row = pc.n - 1u - n0, last_token = pc.m - 1u;
    const uint bw = warp * WSHW, bs = warp * WSHS;
#ifdef HK_Q6_K
    const uint br = warp * WSHR;
#endif

    bool layout_ok = true;
#ifdef HK_COOPMAT
    for (uint i = tid; i < 16u * TOKENS; i += WG)
        spat[i] = int(i);
    barrier();
    {
        MAT_C pat;
        coopMatLoad(pat, spat, 0, TOKENS, gl_CooperativeMatrixLayoutRowMajor);
        // an implementation that spreads a 16 x TOKENS matrix otherwise writes NaN below rather
        // than a partial answer
        layout_ok = pat.length() == int(L);
        [[unroll]] for (uint e = 0; e < L; e++)
            epos[e] = layout_ok ? uint(pat[e]) & (16u * TOKENS - 1u) : 0u;
    }
    ones = MAT_A(int8_t(1));
    m32 = MAT_A(int8_t(-32));
#endif

    float acc[RT][L], part[RT][L];
    [[unroll]] for (uint g = 0; g < RT; g++)
        [[unroll]] for (uint e = 0; e < L; e++)
            acc[g][e] = 0.0;

    // where this invocation stages to, the same at every half: its weight pieces' first tile (the
    // high nibbles go one tile on); its tokens' words: word w of piece v = ln % 9 (group word i =
    // 4 v + w of the 4 blocks' 36) goes to token TPL j + ln / 9's row, at xst[w] + TPL j XS: a
    // quant word of block i / 9 or the block's first word (i % 9 == 0)
    uint xst[4];
#ifdef HK_Q8_0
    // Q8_0: per half where each word of its piece 8 h + ln % 8 goes in the tiles of row ln / 8
    // (q8_plan; load j's rows are j LANES / 8 further, a constant offset), and its d word (even ln
    // % 8: the d of local block ln % 8 / 2); the ninth pieces' rows (their plan is a constant)
    const uint q = ln & 7u, dfac = bs + FAC + 4u * (ln >> 3) + (q >> 1);
    uint qdst[2][4], w9[N9];
    bool qsh[2][4], nb[2];
    [[unroll]] for (uint h = 0; h < 2u; h++) {
        [[unroll]] for (uint w = 0; w < 4u; w++) {
            qdst[h][w] = q8_plan(8u * h + q, w, h, qsh[h][w]);
            if (qdst[h][w] != NONE)
                qdst[h][w] += 4u * bw + q8_row_words(ln >> 3);
        }
        nb[h] = qdst[h][3] != NONE && qsh[h][3];
    }
    [[unroll]] for (uint j = 0; j < N9; j++) {
        w9[j] = 4u * bw + q8_row_words(ln + j * LANES);
    }
#elif defined(HK_Q6_K)
    // raw loads: load j's row rr0 + (HL j) % M16 (its bytes rbyte[(HL j) % M16 / HL]) and pair of
    // pieces rp0 + HL j / M16 (constants but for rr0 and rp0, LANES a multiple of 32); decode item j:
    // row dr, values 16 dq .., at dst in the tiles, its row's raw words from draw
    const uint M16 = 16u * RT, HL = LANES / 2u, NRR = HL >= M16 ? 1u : M16 / HL, RB = SB * 210u;
    const uint wbyte = pc.view_offset[0] + n0 * RB, rr0 = (ln >> 1) % M16, rp0 = (ln >> 1) / M16;
    const uint rst = br + rr0 * RSW + 8u * rp0 + 4u * (ln & 1u), rpiece = 2u * rp0 + (ln & 1u);
    uint rbyte[NRR], dbyte[ND], dr[ND], dq[ND], draw[ND], dst[ND];
    [[unroll]] for (uint i = 0; i < NRR; i++)
        rbyte[i] = wbyte + min(rr0 + HL * i, last_row) * RB;
    [[unroll]] for (uint j = 0; j < ND; j++) {
        const uint u = ln + j * LANES;
        dr[j] = u % M16;
        dq[j] = u / M16;
        dbyte[j] = wbyte + min(dr[j], last_row) * RB;
        draw[j] = br + dr[j] * RSW;
        dst[j] = bw + 4u * (dr[j] >> 4) * TILE + (dr[j] & 15u) * TV + dq[j];
    }
    // the zeros beside each block's halves in the tokens' rows, never written again
    for (uint i = ln; i < 16u * TOKENS; i += LANES)
        shs[bs + (i >> 4) * XS + XBLK * ((i >> 2) & 3u) + 4u + (i & 3u)] = 0u;
#else
    uint wst[NQ];
    [[unroll]] for (uint j = 0; j < NQ; j++) {
        uint u = ln + j * LANES, r = wrow(u), q = u & 3u;
        wst[j] = bw + (4u * (r >> 4) + 2u * (q >> 1)) * TILE + (r & 15u) * TV + (q & 1u);
    }
#endif
    const uint xa = ln / 9u, xv = ln - 9u * xa;
    [[unroll]] for (uint w = 0; w < 4u; w++) {
        uint i = 4u * xv + w, b = i / 9u, pos = i - 9u * b;
        // Q6_K: a block's quant words 4 .. 7 after its 4 zeros
        xst[w] = bs + xa * XS + (pos == 0u ? XHDR + b : XBLK * b + pos - 1u + (XBLK == 12u && pos > 4u ? 4u : 0u));
    }

    // half h of super-block sb into register set `set`, and with hdr the super-block's headers
#ifdef HK_Q8_0
#define LOAD_W(set, h, sbc, hdr)                                                              \
    {                                                                                         \
        const uint wsb = w0 + (sbc) * 17u + 8u * (h); /* row n0's piece 8 h of super-block sbc */ \
        [[unroll]] for (uint j = 0; j < NQ; j++) {                                            \
            uint u = ln + j * LANES, r = min(u >> 3, last_row), a = wsb + r * SBW + (u & 7u);  \
            if (u < 128u * RT) {                                                              \
                rq[set][j] = PROBE_NO_W ? uvec4(0u) : w128[a];                                \
                rn[set][j] = PROBE_NO_W || !nb[h] ? 0u : w32[4u * a + 4u];                    \
            }                                                                                 \
        }                                                                                     \
        [[unroll]] for (uint j = 0; j < N9; j++) {                                            \
            uint u = ln + j * LANES, r = min(u, last_row);                                    \
            if (u < 16u * RT)                                                                 \
                rq[set][NQ + j] = PROBE_NO_W ? uvec4(0u) : w128[wsb + r * SBW + 8u];          \
        }                                                                                     \
    }
#elif defined(HK_Q6_K)
// with hdr the raw pieces of super-block sbc of every row (one set: the loop loads them once its
// raw area holds the last ones)
#define LOAD_W(set, h, sbc, hdr)                                                              \
    if (hdr)                                                                                  \
        [[unroll]] for (uint j = 0; j < NR; j++) {                                            \
            if (ln + j * LANES < 224u * RT)                                                   \
                rq[j] = PROBE_NO_W ? uvec4(0u)                                                \
                                   : w128[((rbyte[(HL * j) % M16 / HL] + (sbc) * 210u) >> 4) + rpiece + 2u * (HL * j / M16)]; \
        }
#else
#ifdef HK_Q5_K
// the qh piece of each of the invocation's qs pieces (rqh)
#define LOAD_QH(wsb)                                                                          \
    [[unroll]] for (uint j = 0; j < NQ; j++) {                                                \
        uint u = ln + j * LANES, r = min(wrow(u), last_row);                                  \
        if (u < 64u * RT)                                                                     \
            rqh[j] = PROBE_NO_W ? uvec4(0u) : w128[(wsb) + r * SBW + 1u + (u & 1u)] >> (u & 2u); \
    }
#else
#define LOAD_QH(wsb)
#endif
#define LOAD_W(set, h, sbc, hdr)                                                              \
    {                                                                                         \
        const uint wsb = w0 + (sbc) * SBP; /* row n0's super-block */                         \
        [[unroll]] for (uint j = 0; j < NQ; j++) {                                            \
            uint u = ln + j * LANES, r = min(wrow(u), last_row);                              \
            if (u < 64u * RT)                                                                 \
                rq[set][j] = PROBE_NO_W ? uvec4(0u) : w128[wsb + r * SBW + QS0 + 4u * (h) + (u & 3u)]; \
        }                                                                                     \
        if (hdr) {                                                                            \
            [[unroll]] for (uint j = 0; j < NH; j++) {                                        \
                uint u = ln + j * LANES, r = min(u >> 1, last_row);                           \
                if (u < 32u * RT)                                                             \
                    rh[j] = PROBE_NO_W ? uvec4(0u) : w128[wsb + r * SBW];                     \
            }                                                                                 \
            LOAD_QH(wsb)                                                                      \
        }                                                                                     \
    }
#endif
#define LOAD(set, h, sb, hdr)                                                                 \
    {                                                                                         \
        const uint sbc = min(sb, SB - 1u);                                                    \
        LOAD_W(set, h, sbc, hdr)                                                              \
        [[unroll]] for (uint j = 0; j < NX; j++) {                                            \
            uint t = min(TPL * j + xa, last_token);                                           \
            if (xa < TPL && TPL * j + xa < TOKENS) /* token t's blocks 8 sbc + 4 h ..: 144 bytes on 16 bytes */ \
                rx[set][j] = PROBE_NO_X ? uvec4(0u) : xq128[x0 + t * (KB / 4u) * 9u + sbc * 18u + 9u * (h) + xv]; \
        }                                                                                     \
    }
    // the half whose loads bring the weights' headers (Q4_K; Q5_K's with their qh pieces) or raw
    // super-block (Q6_K) along: Q6_K's raw area is free for the next super-block once the first
    // half is decoded
#ifdef HK_Q6_K
    const uint HDR_HALF = 0u;
#else
    const uint HDR_HALF = 1u;
#endif

    LOAD(0, 0, warp, true)
    if (SETS == 2u)
        LOAD(SETS - 1u, 1, warp, false)
    for (uint it = 0; it < iters; it++) {
        const uint sb = warp + it * WARPS;
        // the super-block's 8 terms summed apart, then added: a long k adds k / 256 / WARPS
        // terms into acc rather than 8 times as many (the rounding grows with the count)
        [[unroll]] for (uint g = 0; g < RT; g++)
            [[unroll]] for (uint e = 0; e < L; e++)
                part[g][e] = 0.0;
        [[unroll]] for (uint h = 0; h < 2u; h++) {
            const uint set = h % SETS;
            WARP_BARRIER(); // the warp is done with its tiles' last half
#ifdef HK_Q6_K
            const uint sbc = min(sb, SB - 1u);
            if (h == 0u) {
                [[unroll]] for (uint j = 0; j < NR; j++)
                    if (ln + j * LANES < 224u * RT)
                        [[unroll]] for (uint w = 0; w < 4u; w++)
                            shr[rst + (HL * j % M16) * RSW + 8u * (HL * j / M16) + w] = rq[j][w];
                WARP_BARRIER();
            }
            [[unroll]] for (uint j = 0; j < ND; j++) {
                if (ln + j * LANES < 32u * RT) {
                    // the super-block starts s bytes into its row's raw words (even; 2 into a word
                    // where odd)
                    const uint s = (dbyte[j] + sbc * 210u) & 15u, o = draw[j] + (s >> 2), oq = o + 4u * dq[j];
                    const bool odd = (s & 2u) != 0u;
#define HK_WIN(a) hk_q6k_shift(uvec4(shr[a], shr[(a) + 1u], shr[(a) + 2u], shr[(a) + 3u]), shr[(a) + 4u], odd)
                    uvec4 g[4];
                    hk_q6k_groups(HK_WIN(oq + 16u * h), HK_WIN(oq + 16u * h + 8u), HK_WIN(oq + 32u + 8u * h), g[0], g[1],
                                  g[2], g[3]);
#undef HK_WIN
                    [[unroll]] for (uint b = 0; b < 4u; b++)
                        shw[dst[j] + b * TILE] = g[b];
                    const uint a = o + 48u + 2u * h, dw = shr[o + 52u];
                    uvec2 sc = hk_q6k_shift2(uvec2(shr[a], shr[a + 1u]), shr[a + 2u], odd);
                    vec4 f = unpackHalf2x16(odd ? dw >> 16 : dw).x * hk_q6k_scales_f(sc, dq[j]);
                    [[unroll]] for (uint b = 0; b < 4u; b++)
                        shs[bs + fac_word(dr[j], b) + dq[j]] = floatBitsToUint(f[b]);
                }
            }
#elif defined(HK_Q8_0)
            [[unroll]] for (uint j = 0; j < NQ; j++) {
                if (ln + j * LANES < 128u * RT) {
                    // rows ln / 8 + j LPR: LPR divides 16, so a load's rows share a row tile
                    const uint LPR = LANES / 8u, r0 = j * LPR, roff = q8_row_words(r0);
                    const uvec4 v = rq[set][j];
                    [[unroll]] for (uint w = 0; w < 4u; w++) {
                        uint next = w < 3u ? v[min(w + 1u, 3u)] : rn[set][j];
                        if (qdst[h][w] != NONE)
                            shw[qdst[h][w] + roff] = qsh[h][w] ? (v[w] >> 16) | (next << 16) : v[w];
                    }
                    if ((q & 1u) == 0u) {
                        vec2 d = unpackHalf2x16(q >= 4u ? v[2u * h + 1u] : v[2u * h]);
                        shs[dfac + 4u * r0] = floatBitsToUint((q & 2u) != 0u ? d.y : d.x);
                    }
                }
            }
            [[unroll]] for (uint j = 0; j < N9; j++) {
                if (ln + j * LANES < 16u * RT) {
                    [[unroll]] for (uint w = 0; w < 4u; w++) {
                        bool sh;
                        uint dst = q8_plan(8u + 8u * h, w, h, sh); // a constant, never shifted
                        if (dst != NONE)
                            shw[w9[j] + dst] = rq[set][NQ + j][w];
                    }
                }
            }
#else
            [[unroll]] for (uint j = 0; j < NQ; j++) {
                // piece q of a row: its low nibbles are values 16 (q % 2) .. of local sub-block
                // 2 (q / 2), its high nibbles the same values of the next
                if (ln + j * LANES < 64u * RT) {
#ifdef HK_Q5_K
                    const uvec4 qh = rqh[j] >> (4u * h); // the 5th bits: the low nibbles' bit 0, the high's bit 1
                    shw[wst[j]] = (rq[set][j] & 0x0F0F0F0Fu) | ((qh & 0x01010101u) << 4);
                    shw[wst[j] + TILE] = ((rq[set][j] >> 4) & 0x0F0F0F0Fu) | ((qh & 0x02020202u) << 3);
#else
                    shw[wst[j]] = rq[set][j] & 0x0F0F0F0Fu;
                    shw[wst[j] + TILE] = (rq[set][j] >> 4) & 0x0F0F0F0Fu;
#endif
                }
            }
            [[unroll]] for (uint j = 0; j < NH; j++) {
                uint u = ln + j * LANES;
                if (u < 32u * RT) {
                    // row u / 2's factors of local sub-blocks 2 (u % 2) and 2 (u % 2) + 1
                    uint r = u >> 1, p = u & 1u, o = bs + fac_word(r, 2u * p);
                    uvec2 sc, mn;
                    hk_q4k_scales8(rh[j], sc, mn);
                    vec2 dm = unpackHalf2x16(rh[j].x);
                    [[unroll]] for (uint i = 0; i < 2u; i++) {
                        uvec2 f = hk_q4k_scale_of(sc, mn, 4u * h + 2u * p + i);
                        shs[o + 2u * i] = floatBitsToUint(dm.x * float(f.x));
                        shs[o + 2u * i + 1u] = floatBitsToUint(-dm.y * float(f.y));
                    }
                }
            }
#endif
            [[unroll]] for (uint j = 0; j < NX; j++)
                if (xa < TPL && TPL * j + xa < TOKENS)
                    [[unroll]] for (uint w = 0; w < 4u; w++)
                        shs[xst[w] + TPL * j * XS] = rx[set][j][w];
            WARP_BARRIER();
            // the next loads into the set just staged: with two sets the same half of the next
            // super-block, with one the other half; the next super-block's headers once this one's
            // second half is decoded
            if (SETS == 2u)
                LOAD(set, h, sb + WARPS, h == HDR_HALF)
            else if (h == 0u)
                LOAD(set, 1, sb, false)
            else
                LOAD(set, 0, sb + WARPS, true)
            if (sb < SB && !PROBE_NO_MMA) { // uniform in the warp
                [[unroll]] for (uint b = 0; b < 4u; b++) {
                    MAT_B xt = load_b(bs + XBLK * b);
#ifdef HK_Q6_K
                    // the low and high 16 values apart (xt: the low ones and zeros), each from -32
                    // times the tokens' sum
                    MAT_B xh = load_b(bs + XBLK * b + 4u);
                    MAT_C zl = mma(M32(), xt); // one declarator each: glslang 13 drops a second one's use
                    MAT_C zh = mma(M32(), xh);
#elif !defined(HK_Q8_0)
                    MAT_C s = mma(ONES(), xt);
#endif
                    [[unroll]] for (uint g = 0; g < RT; g++) {
#ifdef HK_Q6_K
                        MAT_A a = load_a(bw + (4u * g + b) * TILE);
                        MAT_C c = mma_add(a, xt, zl);
                        MAT_C ch = mma_add(a, xh, zh);
#else
                        MAT_C c = mma(load_a(bw + (4u * g + b) * TILE), xt);
#endif
                        [[unroll]] for (uint e = 0; e < L; e++) {
#ifdef HK_Q6_K
                            uint f = bs + fac_word(16u * g + el_row(e), b), t = el_col(e);
                            part[g][e] = fma(fma(float(ELEM(c, e)), uintBitsToFloat(shs[f]),
                                                 float(ELEM(ch, e)) * uintBitsToFloat(shs[f + 1u])),
                                             unpackHalf2x16(shs[bs + t * XS + XHDR + b]).x, part[g][e]);
#elif defined(HK_Q8_0)
                            uint t = el_col(e);
                            // d*dot, then the token block's d (as mmq.comp)
                            part[g][e] = fma(float(ELEM(c, e)) * uintBitsToFloat(shs[bs + FAC + 4u * (16u * g + el_row(e)) + b]),
                                             unpackHalf2x16(shs[bs + t * XS + XHDR + b]).x, part[g][e]);
#else
                            uint f = bs + fac_word(16u * g + el_row(e), b), t = el_col(e);
                            // d*sc*dot - dmin*m*sum(xq), rounded once where they cancel (as mmq.comp)
                            part[g][e] = fma(fma(float(ELEM(c, e)), uintBitsToFloat(shs[f]),
                                                 uintBitsToFloat(shs[f + 1u]) * float(ELEM(s, e))),
                                             unpackHalf2x16(shs[bs + t * XS + XHDR + b]).x, part[g][e]);
#endif
                        }
                    }
                }
            }
        }
        [[unroll]] for (uint g = 0; g < RT; g++)
            [[unroll]] for (uint e = 0; e < L; e++)
                acc[g][e] += part[g][e];
    }

    barrier(); // every warp is done with its tiles
    [[unroll]] for (uint g = 0; g < RT; g++)
        [[unroll]] for (uint e = 0; e < L; e++)
            shs[bs + 16u * TOKENS * g + el_row(e) * TOKENS + el_col(e)] = floatBitsToUint(acc[g][e]);
    barrier();
    for (uint i = tid; i < 16u * TOKENS * RT; i += WG) {
        uint r = i / TOKENS, t = i % TOKENS; // r: the workgroup's row, over its row tiles
        float sum = 0.0;
        for (uint w = 0; w < WARPS; w++)
            sum += uintBitsToFloat(shs[w * WSHS + i]);
        if (t < pc.m && n0 + r < pc.n)
            y[y0 + t * pc.n + n0 + r] = layout_ok ? sum : uintBitsToFloat(0x7FC00000u);
    }
}
