#version 450
#extension GL_GOOGLE_include_directive : require
#if defined(HK_INT8) && !defined(HK_SCALAR_DOT)
#extension GL_EXT_spirv_intrinsics : require
#endif
#extension GL_EXT_control_flow_attributes : require
// Dense quantized matvec y[rows] = W[rows, k] . x[k], W in GGUF blocks (HK_Q8_0 / HK_Q4_K /
// HK_Q5_K / HK_Q6_K) or f16 rows (HK_F16: f32 x only, no HK_INT8 or HK_MOE), x and y f32. Layouts of the
// work, by define:
//   default       one workgroup per row: invocations stride over the row's units (32 values;
//                 F16 8), then a subgroup + shared-memory reduction (portable: any subgroup
//                 size, 2-byte aligned weights, 4-byte aligned x);
//   HK_SUBGROUP_ROWS  each subgroup computes HK_NROWS rows, so every x value a lane loads serves
//                 HK_NROWS rows; wide loads (16-byte aligned x, Q4_K, Q5_K and F16 weights); a
//                 subgroup-only reduction. Needs full subgroups (the host requires them at
//                 pipeline creation).
//   HK_INT8       subgroup rows with x given as Q8_1 blocks (hk_quantize_q8_1): packed int8 dot
//                 products of the weight quants with the activation quants (dot.glsl). HK_NTOK
//                 tokens at once (x [tokens, k/32] blocks, y [tokens, rows]): each weight word
//                 is loaded once and met by every token's activation; one token is HK_NTOK = 1.
//                 Each lane loads the weights of HK_NITEMS items before it computes them (more
//                 loads in flight where there are few subgroups). With HK_XSTAGE_BLOCKS (several
//                 tokens, dense) the workgroup copies x blocks into shared memory: those of each
//                 step before it (staged), or every block of every token once, before the row
//                 groups (HK_XRESIDENT).
//   HK_MOE        (with either of the two above) the MoE expert gather: W is [experts, n, k],
//                 output slot s is W[ids[s]] . x_s, rows = slots * n. With HK_INT8 it takes the GLU
//                 epilogue (hk_moe_matvec_int8_glu): W_up's bank at binding 4 (binding 3 holds the
//                 ids), a row group's rows inside one slot's expert in both banks.
// Epilogues of the dense HK_INT8 kernel, applied where each row's sum is written (the sums are
// the plain kernel's, so the outputs are bit-identical to the unfused calls):
//   HK_MATVEC_ADD y[r] = residual[r] + sum (residual at binding 3, which may be y itself: each
//                 output is read once, by the lane that then writes it), as hk_add rounds it.
//   HK_GLU_SILU, HK_GLU_GELU  y[r] = act(W_gate[r] . x) * (W_up[r] . x), W_up at binding 3
//                 (glu.glsl, hk_swiglu's formula): a row group's HK_NROWS slots are HK_NROWS / 2
//                 rows of W_gate, then the same rows of W_up, so each x load serves both.
//   HK_MATVEC_MULTI  up to three matrices W0, W1, W2 (bindings 0, 3, 4; rows pc.rows, pc.rows1,
//                 pc.rows2) into one y, concatenated: the row groups run over W0's rows, then W1's,
//                 then W2's, each matrix's rows padded to whole groups, so that a group's rows lie
//                 in one matrix and each row's sum is the plain kernel's.
//   HK_QKV_ROPE   (with HK_MATVEC_MULTI, one token) the attention's Q, K and V projections with
//                 hk_rope's epilogue (hk_matvec_int8_qkv): pc.rope's roles name each matrix Q, K or
//                 V; Q's rows are rotated into y, K's rotated and V's copied into the caches
//                 (bindings 7 and 8, HK_CACHE_F32 or HK_CACHE_F16) at row positions[0] (binding 5;
//                 none at or past pc.capacity), GGUF's "normal" pairs (2i, 2i + 1) turning by
//                 rope.glsl's angles (frequency factors at binding 6). A row group holds whole pairs
//                 (the host keeps HK_NROWS even where a matrix rotates); lane r of the subgroup
//                 finishes the group's row r, so the bits are the multi's sums through hk_rope's code.
//   HK_MOE_COMBINE  (HK_MOE with HK_INT8) the experts' products of each token weighted, summed and
//                 added to the residual (hk_moe_matvec_int8_combine: weights binding 4, residual 5):
//                 y[t, r] = sum_j weights[t, j] * (W[ids[t, j]] . x_(t, j))[r] + residual[t, r]. A
//                 workgroup takes a token's group of rows; its subgroups the token's slots, each
//                 slot's sums the plain gather's, through shared memory to the combine, which is
//                 moe_combine.comp's arithmetic in its order, so the two calls' bits.
//   HK_OUT_Q8_1   (with the GLU, dense or MoE; one token) y as GGUF Q8_1 blocks of 32 rows, the
//                 next matvec's input (hk_matvec_int8_glu_q8_1): a workgroup takes a block at a
//                 time and its subgroups the block's row groups in turn; the block's outputs meet
//                 in shared memory, then one invocation quantizes them (q8_1.glsl, so the blocks
//                 hk_quantize_q8_1 makes of the f32 outputs). The host keeps rows (the MoE's n) a
//                 multiple of 32.
//   HK_MOE_RANK   (the MoE GLU with HK_OUT_Q8_1) binding 3 holds the router's logits [tokens,
//                 n_experts] instead of the ids: each subgroup ranks its slot's expert itself
//                 (route.glsl's rounds, so the ids hk_moe_route writes; slot t * top_k + j takes
//                 round j's expert of token t), so the routing need not run before it.
//   HK_NORM_TAIL  (with HK_MATVEC_ADD, one token) the new residual's RMSNorm and Q8_1 blocks, made by
//                 the workgroup that finishes last (hk_matvec_int8_add_norm), in place of the
//                 hk_rmsnorm_q8_1 dispatch and barrier after the matvec: the norm's weight at
//                 binding 4, the blocks at 5, the normalised f32 values at 6 (pc.write_yn), the
//                 arrival counter at 7 (zero before the call). Each workgroup adds 1 to the
//                 counter once its rows are written; the one that adds last reads y back into
//                 shared memory with coalesced loads (norm.glsl's HK_NORM_STAGED), normalises it
//                 (norm.glsl's order, q8_1.glsl's code: hk_rmsnorm_q8_1's bits) and
//                 sets the counter back to zero for the next call. A counter rather than
//                 sdpa.comp's flags (which need no initialisation): every workgroup reading every
//                 flag cost more than the dispatch the tail saves.
//   HK_XF32       (dense HK_INT8, one token, x resident) x is f32 at binding 1: each workgroup
//                 quantizes it into its shared memory (q8_1.glsl's rules, so the blocks
//                 hk_quantize_q8_1 writes), RMSNorm'ed first where pc.norm (the weight at binding
//                 5; norm.glsl's order, so hk_rmsnorm_q8_1's blocks), in place of a dispatch and a
//                 barrier before the matvec. The row groups then run as on staged x.
#if defined(HK_GLU_SILU) || defined(HK_GLU_GELU)
#define HK_MATVEC_GLU
#endif
#if (defined(HK_MATVEC_ADD) || defined(HK_MATVEC_GLU) || defined(HK_MATVEC_MULTI)) && !defined(HK_INT8)
#error "the epilogues are the int8 kernel's"
#endif
#if defined(HK_XF32) && (!defined(HK_INT8) || defined(HK_MOE))
#error "HK_XF32 is the dense int8 kernel's"
#endif
#if defined(HK_OUT_Q8_1) && (!defined(HK_MATVEC_GLU) || defined(HK_XF32))
#error "HK_OUT_Q8_1 is the GLU's on Q8_1 x"
#endif
#if defined(HK_MOE_COMBINE) && (!defined(HK_MOE) || !defined(HK_INT8) || defined(HK_GLU_SILU) || defined(HK_GLU_GELU))
#error "HK_MOE_COMBINE is the int8 MoE gather's, without the GLU"
#endif
#if defined(HK_MOE_RANK) && (!defined(HK_MOE) || !defined(HK_OUT_Q8_1))
#error "HK_MOE_RANK is the MoE GLU's with Q8_1 output"
#endif
#if defined(HK_QKV_ROPE) && (!defined(HK_MATVEC_MULTI) || defined(HK_XF32) || !defined(HK_INT8))
#error "HK_QKV_ROPE is the int8 multi's on Q8_1 x"
#endif
#if defined(HK_NORM_TAIL) && (!defined(HK_MATVEC_ADD) || defined(HK_XF32))
#error "HK_NORM_TAIL is the residual add's on Q8_1 x"
#endif
#if (defined(HK_MATVEC_ADD) || defined(HK_MATVEC_MULTI)) && defined(HK_MOE)
#error "the MoE gather takes the GLU epilogue only"
#endif
// W_up's binding (the GLU): after the MoE's ids
#ifdef HK_MOE
#define HK_UP_BINDING 4
#else
#define HK_UP_BINDING 3
#endif
#if defined(HK_INT8) || defined(HK_SUBGROUP_ROWS)
#define HK_NO_WORKGROUP_SUM // no workgroup reduction: the int8 kernels' shared memory is hk_xs_q alone
#endif
#include "common.glsl"

// The tail's coherent y and memory barriers would otherwise have the compiler assume the weights
// and x may change under it, and read them past the read-only caches: they never alias an output
// (the host checks it), and their aliases of one binding are all read-only.
#ifdef HK_NORM_TAIL
#define HK_IN restrict readonly
#else
#define HK_IN readonly
#endif
layout(binding = 0) HK_IN buffer Weights { uint16_t w16[]; };
layout(binding = 0) HK_IN buffer Weights32 { uint w32[]; };
layout(binding = 0) HK_IN buffer Weights128 { uvec4 w128[]; };
layout(binding = 1) HK_IN buffer X { float x[]; };
layout(binding = 1) HK_IN buffer X4 { vec4 x4[]; };
layout(binding = 1) HK_IN buffer XQ { uint xq[]; }; // HK_INT8: Q8_1 blocks of 9 words
#ifdef HK_NORM_TAIL
layout(binding = 2) coherent buffer Y { float y[]; }; // read back by the tail
#else
layout(binding = 2) writeonly buffer Y { float y[]; };
#endif
#ifdef HK_OUT_Q8_1
layout(binding = 2) writeonly buffer YQ { uint yq[]; };
#define HK_Q8_1_BLOCK_ONLY
#include "q8_1.glsl"
// the outputs of the workgroup's current block
shared float hk_out_sh[32];
#endif
#if defined(HK_MOE_RANK)
layout(binding = 3) readonly buffer Logits { float logits[]; };
uint hk_rank_base; // the ranked token's logits (hk_slot_expert)
#define HK_ROUTE_LOGIT(i) logits[hk_rank_base + (i)]
#include "route.glsl"
#elif defined(HK_MOE)
layout(binding = 3) readonly buffer Ids { uint ids[]; };
#endif
#ifdef HK_MATVEC_ADD
layout(binding = 3) readonly buffer Residual { float residual[]; };
#endif
#ifdef HK_MATVEC_GLU
layout(binding = HK_UP_BINDING) readonly buffer Up16 { uint16_t u16[]; };
layout(binding = HK_UP_BINDING) readonly buffer Up32 { uint u32[]; };
layout(binding = HK_UP_BINDING) readonly buffer Up128 { uvec4 u128[]; };
#include "glu.glsl"
#endif
#ifdef HK_MATVEC_MULTI
layout(binding = 3) readonly buffer W1_16 { uint16_t m1_16[]; };
layout(binding = 3) readonly buffer W1_32 { uint m1_32[]; };
layout(binding = 3) readonly buffer W1_128 { uvec4 m1_128[]; };
layout(binding = 4) readonly buffer W2_16 { uint16_t m2_16[]; };
layout(binding = 4) readonly buffer W2_32 { uint m2_32[]; };
layout(binding = 4) readonly buffer W2_128 { uvec4 m2_128[]; };
#endif
#ifdef HK_XF32
layout(binding = 5) readonly buffer Norm { float norm_w[]; };
#endif
#ifdef HK_QKV_ROPE
layout(binding = 5) readonly buffer Positions { uint positions[]; };
layout(binding = 6) readonly buffer Factors { float factors[]; };
layout(binding = 7) writeonly buffer KCache { float kc[]; };
layout(binding = 7) writeonly buffer KCache16 { uint16_t kc16[]; };
layout(binding = 8) writeonly buffer VCache { float vc[]; };
layout(binding = 8) writeonly buffer VCache16 { uint16_t vc16[]; };
#endif
#ifdef HK_NORM_TAIL
layout(binding = 4) restrict readonly buffer Norm { float norm_w[]; };
layout(binding = 5) writeonly buffer TailQ { uint tail_q[]; };
layout(binding = 6) writeonly buffer TailN { float tail_n[]; };
layout(binding = 7) coherent buffer Arrival { uint wsu[]; };
#endif
#ifdef HK_MOE_COMBINE
layout(binding = 4) readonly buffer SlotWeights { float slot_w[]; };
layout(binding = 5) readonly buffer Residual { float residual[]; };
#endif

// Rows per subgroup (subgroup-rows layouts): specialization constant 1.
layout(constant_id = 1) const uint HK_NROWS = 4;
// Tokens per pass (HK_INT8): specialization constant 2; 1 for the MoE and for f32 x.
layout(constant_id = 2) const uint HK_NTOK = 1;
// HK_INT8, dense: Q8_1 blocks of one token held in shared memory (0: x read from the buffer).
// Staged per step: the blocks a step reads (HK_NITEMS * gl_SubgroupSize items: Q8_0
// HK_NITEMS * subgroup/2, K-quants 2 * HK_NITEMS * subgroup); resident: the capacity per token,
// at least k/32. Specialization constant 3.
layout(constant_id = 3) const uint HK_XSTAGE_BLOCKS = 0;
// HK_INT8: items whose weights each lane loads before computing them (a step: HK_NITEMS chunks
// of gl_SubgroupSize items; the staged kernel stages the x of a whole step). Specialization
// constant 4.
layout(constant_id = 4) const uint HK_NITEMS = 1;
#define HK_NSLOTS (HK_NROWS * HK_NITEMS)
// Output rows of a row group: HK_NROWS, or with the GLU epilogue half of them (each output row
// takes a slot of W_gate and one of W_up).
#ifdef HK_MATVEC_GLU
#define HK_GROUP_ROWS (HK_NROWS / 2u)
#else
#define HK_GROUP_ROWS HK_NROWS
#endif
// HK_INT8, dense, HK_XSTAGE_BLOCKS > 0: 1 = x resident (every block of every token staged once,
// then the row groups without a barrier), 0 = x staged per step. Specialization constant 6.
layout(constant_id = 6) const uint HK_XRESIDENT = 0;

HK_PUSH_BEGIN
    uint rows;      // HK_MOE: slots * n; HK_MATVEC_MULTI: W0's
    uint k;
#ifdef HK_MATVEC_MULTI
    uint rows1;     // W1's rows (0: no W1)
    uint rows2;     // W2's rows (0: no W2)
#else
    uint n;         // HK_MOE: rows of one expert
    uint n_experts; // HK_MOE
#endif
    uint x_stride;  // HK_MOE: words from one slot's x to the next (0: one x for every slot)
#ifdef HK_QKV_ROPE
    uint rope;      // rot_dim / 2 | head_dim << 8 | (role of matrix m) << (17 + 2m) | F_FACTORS << 23
    uint capacity;  // the caches' rows
    uint k_row, k_head, v_row, v_head; // byte strides (0 where unused)
    uint pad;
    vec2 turns;     // rope.glsl's: freq_scale / (2 pi), double-float
    vec2 pow2[4];   // theta^(-2 * 2^b / rot_dim), b = 0..3, double-float
#endif
#ifdef HK_XF32
    float eps;      // the RMSNorm's
    uint norm;      // 1: x RMSNorm'ed with the weight at binding 5 before it is quantized
#endif
#ifdef HK_NORM_TAIL
    float eps;      // the RMSNorm's
    uint write_yn;  // 1: the normalised values also as f32 (binding 6)
#endif
#ifdef HK_MOE_COMBINE
    uint top_k;     // slots per token (pc.rows: tokens * n, the output's rows)
    uint has_residual;
#endif
#ifdef HK_MOE_RANK
    uint top_k;     // slots per token
#endif
HK_PUSH_END

#ifdef HK_MATVEC_MULTI
// The current row group's matrix (0, 1, 2), its rows, and the index in y of its row 0.
uint mv_mat, mv_rows, mv_y;
#define HK_OUT_ROWS mv_rows
#define HK_OUT_Y0 mv_y
#define HK_W_VIEW (mv_mat == 0u ? 0u : mv_mat + 2u)
// The first row (in its matrix) of row group `group`, and the group's matrix: W0's
// ceil(rows / HK_NROWS) groups first, then W1's, then W2's.
uint hk_group_first(uint group)
{
    uint g0 = (pc.rows + HK_NROWS - 1u) / HK_NROWS, g1 = (pc.rows1 + HK_NROWS - 1u) / HK_NROWS;
    mv_mat = 0u;
    mv_rows = pc.rows;
    mv_y = 0u;
    if (group >= g0 + g1) {
        mv_mat = 2u;
        mv_rows = pc.rows2;
        mv_y = pc.rows + pc.rows1;
        group -= g0 + g1;
    } else if (group >= g0) {
        mv_mat = 1u;
        mv_rows = pc.rows1;
        mv_y = pc.rows;
        group -= g0;
    }
    return group * HK_NROWS;
}
#else
#define HK_OUT_ROWS pc.rows
#define HK_OUT_Y0 0u
#define HK_W_VIEW 0u
#endif

uint x_base;
float hk_x(uint i) { return x[x_base + i]; }
// subgroup rows: each lane's partial sums, and the byte offset of each row's weights
#ifdef HK_INT8
// acc[r * HK_NTOK + t]: row r, token t. hk_compute adds to it through a `precise` local
// (NoContraction on every float operation of the sum and of its terms; glslang 13.1 emits
// invalid SPIR-V for a `precise` global array): each product and sum rounds as SPIR-V defines
// it, never fused into a multiply-add that a compiler might form in one variant and not in
// another, so a token's sums are the same bits whatever HK_NTOK and HK_NROWS are
// (hk_matvec_int8_tokens against hk_matvec_int8).
float acc[HK_NROWS * HK_NTOK];
#else
float acc[HK_NROWS];
#endif
uint row_byte[HK_NROWS];

#ifdef HK_INT8
#include "dot.glsl"
// The weights of slot r of a row group (the int8 hk_load's reads): binding 0, or with the GLU
// epilogue W_up's binding for the second half of the slots, or with HK_MATVEC_MULTI the group's
// matrix's binding. A branch, not a select: a select would read both bindings, one of them past
// its view. r is an unrolled loop's index, so the GLU's branch folds away once the specialization
// constants are known; the multi's is uniform over the subgroup.
#ifdef HK_MATVEC_GLU
bool hk_up_slot(uint r) { return r >= HK_GROUP_ROWS; }
#else
bool hk_up_slot(uint r) { return false; }
#endif
uint hk_w16(uint r, uint i)
{
#ifdef HK_MATVEC_GLU
    if (hk_up_slot(r))
        return uint(u16[i]);
#elif defined(HK_MATVEC_MULTI)
    if (mv_mat == 1u)
        return uint(m1_16[i]);
    if (mv_mat == 2u)
        return uint(m2_16[i]);
#endif
    return uint(w16[i]);
}
uint hk_w32(uint r, uint i)
{
#ifdef HK_MATVEC_GLU
    if (hk_up_slot(r))
        return u32[i];
#elif defined(HK_MATVEC_MULTI)
    if (mv_mat == 1u)
        return m1_32[i];
    if (mv_mat == 2u)
        return m2_32[i];
#endif
    return w32[i];
}
uvec4 hk_w128(uint r, uint i)
{
#ifdef HK_MATVEC_GLU
    if (hk_up_slot(r))
        return u128[i];
#elif defined(HK_MATVEC_MULTI)
    if (mv_mat == 1u)
        return m1_128[i];
    if (mv_mat == 2u)
        return m2_128[i];
#endif
    return w128[i];
}
// words from one token's Q8_1 blocks to the next (k / 32 blocks of 9 words)
uint x_token;

// Staged x (HK_XSTAGE_BLOCKS > 0): each lane reads its own item's blocks, 72 bytes from its
// neighbour's, so from the buffer every load instruction of a subgroup touches a sector per lane
// for 4 useful bytes; with several tokens that load traffic, not the weights, would bound the
// kernel. The workgroup instead copies the blocks once (hk_stage_x: word for word, so that each
// load instruction of a subgroup reads 128 contiguous bytes), per step or, resident, all of them
// for the whole dispatch, and each lane reads them from shared memory 16 bytes at a time. Per
// token, each pair of blocks takes 4 uvec4 of quants (its even block's halves 0, 1, its odd
// block's) and an aux uvec4: the two blocks' d as f32 (.x even, .y odd) and their sums (.z even,
// .w odd: hk_xsum, the K-quants' activation sums, computed once per staging instead of once per
// item, token and row group). The K-quants keep the aux after the pair's quants, so that pairs
// lie 5 uvec4 apart and the 8 lanes of each 128-byte phase of a 16-byte read are on different
// banks (Q4_K and Q5_K lane l reads pair l, Q6_K lane l pairs l - (l & 1) and l + 1 - (l & 1)). Q8_0,
// whose lanes 4m .. 4m + 3 read one quants uvec4 each of pair m, keeps every aux apart after all
// the quants, so that its pairs lie 4 uvec4 apart and a phase's 8 lanes read 8 consecutive ones
// (5 apart, lanes 0 and 7 of each phase would share a bank). 80 bytes a pair either way.
#ifdef HK_Q8_0
#define HK_XSTAGE_PAIR 4u
#else
#define HK_XSTAGE_PAIR 5u
#endif
#define HK_XSTAGE_PAIRS (HK_NTOK * (HK_XSTAGE_BLOCKS / 2u))
shared uvec4 hk_xs_q[HK_XSTAGE_PAIRS * 5u + 1u];
uint xs_block0; // the first staged block (0 when resident)

// the index in hk_xs_q of pair of blocks p (relative to xs_block0) of token t: its quants, and
// its aux uvec4
uint hk_xs_pair(uint t, uint p) { return (t * (HK_XSTAGE_BLOCKS / 2u) + p) * HK_XSTAGE_PAIR; }
uint hk_xs_aux(uint t, uint p)
{
    return HK_XSTAGE_PAIR == 5u ? hk_xs_pair(t, p) + 4u : HK_XSTAGE_PAIRS * 4u + t * (HK_XSTAGE_BLOCKS / 2u) + p;
}

// d of Q8_1 block blk of token t
float hk_xd(uint t, uint blk)
{
    if (HK_XSTAGE_BLOCKS > 0u) {
        uint b = blk - xs_block0;
        return uintBitsToFloat(hk_xs_q[hk_xs_aux(t, b >> 1)][b & 1u]);
    }
    return unpackHalf2x16(xq[x_base + t * x_token + blk * 9u]).x;
}

// the aux uvec4 (d and sums as f32 bits: see hk_xs_q) of the staged pair holding Q8_1 block blk of
// token t (HK_XSTAGE_BLOCKS > 0 only)
uvec4 hk_xaux(uint t, uint blk) { return hk_xs_q[hk_xs_aux(t, (blk - xs_block0) >> 1)]; }

// d of Q8_1 blocks blk (even) and blk + 1 of token t
vec2 hk_xd2(uint t, uint blk)
{
    if (HK_XSTAGE_BLOCKS > 0u)
        return uintBitsToFloat(hk_xs_q[hk_xs_aux(t, (blk - xs_block0) >> 1)].xy);
    uint w = x_base + t * x_token + blk * 9u;
    return vec2(unpackHalf2x16(xq[w]).x, unpackHalf2x16(xq[w + 9u]).x);
}

// the 16 quants of half h of Q8_1 block blk of token t (4 words), written out: a loop would count
// towards lavapipe's iteration limit (src/kernels/matvec.c), straight-line code does not
uvec4 hk_x16(uint t, uint blk, uint h)
{
    if (HK_XSTAGE_BLOCKS > 0u) {
        uint b = blk - xs_block0;
        return hk_xs_q[hk_xs_pair(t, b >> 1) + 2u * (b & 1u) + h];
    }
    uint w = x_base + t * x_token + blk * 9u + 1u + 4u * h;
    return uvec4(xq[w], xq[w + 1u], xq[w + 2u], xq[w + 3u]);
}
#endif
#if defined(HK_Q8_0)
#include "q8_0.glsl"
#elif defined(HK_Q4_K)
#include "q4_k.glsl"
#elif defined(HK_Q5_K)
#include "q5_k.glsl"
#elif defined(HK_Q6_K)
#include "q6_k.glsl"
#elif defined(HK_F16)
#include "f16_weights.glsl"
#else
#error "define HK_Q8_0, HK_Q4_K, HK_Q5_K, HK_Q6_K or HK_F16"
#endif

#if defined(HK_SUBGROUP_ROWS) || defined(HK_INT8)
// Clears the sums of the row group starting at row `first` and points row_byte at its rows (rows
// past the end read the last row and are not written; GLU: slot r at W_gate's row first + r, slot
// HK_GROUP_ROWS + r at W_up's). row0: its first weight row (the MoE's expert rows; first for the
// dense kernel).
void hk_rows_begin(uint first, uint row0, uint row_bytes)
{
    for (uint r = 0; r < HK_NROWS; r++) {
#ifdef HK_INT8
        [[unroll]] for (uint t = 0; t < HK_NTOK; t++)
            acc[r * HK_NTOK + t] = 0.0;
#else
        acc[r] = 0.0;
#endif
#if defined(HK_MOE) && defined(HK_MATVEC_GLU)
        bool up = hk_up_slot(r);
        row_byte[r] = pc.view_offset[up ? HK_UP_BINDING : 0] + (row0 + (up ? r - HK_GROUP_ROWS : r)) * row_bytes;
#elif defined(HK_MOE)
        row_byte[r] = pc.view_offset[0] + (row0 + r) * row_bytes;
#elif defined(HK_MATVEC_GLU)
        bool up = hk_up_slot(r);
        row_byte[r] = pc.view_offset[up ? 3 : 0] + min(first + (up ? r - HK_GROUP_ROWS : r), pc.rows - 1u) * row_bytes;
#else
        row_byte[r] = pc.view_offset[HK_W_VIEW] + min(first + r, HK_OUT_ROWS - 1u) * row_bytes;
#endif
    }
}

// Sums the lanes' partial sums and writes the group's outputs (token t's after token t-1's:
// y[t * rows + row]) if `write`.
#ifdef HK_QKV_ROPE
#include "f16.glsl"
#define HK_ROPE_HAS_FACTORS ((pc.rope & (1u << 23)) != 0u)
#define HK_ROPE_FACTOR(i) factors[pc.view_offset[6] / 4u + (i)]
#define HK_ROPE_K_VIEW 7
#define HK_ROPE_V_VIEW 8
#include "rope.glsl"
const uint ROLE_Q = 0u, ROLE_K = 1u, ROLE_V = 2u;

// The group's rows through hk_rope's epilogue: lane r takes row r (every lane holds every sum).
void hk_qkv_rows_end(uint first, bool write)
{
    float sums[HK_GROUP_ROWS];
    for (uint r = 0; r < HK_GROUP_ROWS; r++)
        sums[r] = subgroupAdd(acc[r]);
    uint r = gl_SubgroupInvocationID, row = first + r;
    if (!write || r >= HK_GROUP_ROWS || row >= HK_OUT_ROWS)
        return;
    float v = 0.0, partner = 0.0;
    for (uint j = 0; j < HK_GROUP_ROWS; j++) { // a select, not an indexed local array
        v = j == r ? sums[j] : v;
        partner = j == (r ^ 1u) ? sums[j] : partner;
    }
    uint role = (pc.rope >> (17u + 2u * mv_mat)) & 3u, half_rot = pc.rope & 0xFFu, head_dim = (pc.rope >> 8) & 0x1FFu;
    uint pos = positions[pc.view_offset[5] / 4u], head = row / head_dim, d = row - head * head_dim;
    if (role != ROLE_V && d < 2u * half_rot) {
        vec2 cs = pair_cos_sin(pos, d / 2u);
        bool even = (d & 1u) == 0u;
        v = even ? rope_rotated(v, partner, cs, true) : rope_rotated(partner, v, cs, false);
    }
    if (role == ROLE_Q) {
        y[pc.view_offset[2] / 4u + row] = v;
        return;
    }
    if (pos >= pc.capacity) // no cache row for this position
        return;
    bool is_v = role == ROLE_V;
    rope_cache_store(is_v, rope_cache_row(is_v, head, pos), d, v);
}
#define hk_rows_end hk_qkv_rows_end
#else
void hk_rows_end(uint first, bool write)
{
    for (uint r = 0; r < HK_GROUP_ROWS; r++)
#ifdef HK_INT8
        [[unroll]] for (uint t = 0; t < HK_NTOK; t++) {
            float sum = subgroupAdd(acc[r * HK_NTOK + t]);
#ifdef HK_MATVEC_GLU
            float up = subgroupAdd(acc[(r + HK_GROUP_ROWS) * HK_NTOK + t]);
#endif
            uint at = t * pc.rows + HK_OUT_Y0 + first + r;
            if (write && subgroupElect() && first + r < HK_OUT_ROWS) {
#ifdef HK_MATVEC_ADD
                // hk_add's sum a + 1 * b with a the residual: 1 * sum is sum, bit for bit
                precise float s = residual[pc.view_offset[3] / 4u + at] + sum;
                y[pc.view_offset[2] / 4u + at] = s;
#elif defined(HK_OUT_Q8_1)
                hk_out_sh[at & 31u] = hk_glu(sum, up);
#elif defined(HK_MATVEC_GLU)
                y[pc.view_offset[2] / 4u + at] = hk_glu(sum, up);
#else
                y[pc.view_offset[2] / 4u + at] = sum;
#endif
            }
        }
#else
    {
        float sum = subgroupAdd(acc[r]);
        if (write && subgroupElect() && first + r < pc.rows)
            y[pc.view_offset[2] / 4u + first + r] = sum;
    }
#endif
}
#endif

#if defined(HK_INT8) && !defined(HK_MOE)
// Word u of a staged chunk of token t whose first block is block cb of the staged range (cb even;
// block cb + u / 9, its word u % 9: d|s, then the quants) into hk_xs_q: d as f32 (the s half never
// read), quants as they are.
void hk_stage_word(uint t, uint cb, uint u, uint v)
{
    uint bu = u / 9u, b = cb + bu, j = u - 9u * bu;
    uint at = j == 0u ? hk_xs_aux(t, b >> 1) : hk_xs_pair(t, b >> 1) + 2u * (b & 1u) + ((j - 1u) >> 2);
    hk_xs_q[at][j == 0u ? b & 1u : (j - 1u) & 3u] = j == 0u ? floatBitsToUint(unpackHalf2x16(v).x) : v;
}

// Words of each token that an invocation loads before its first store (at most 40 loads in flight
// in all: registers), and the blocks of a chunk (even, so that chunks start on a pair; at least 2
// for the smallest workgroup the host takes, 4 subgroups of 4 lanes)
const uint HK_XSTAGE_LOADS = 40u / HK_NTOK > 5u ? 5u : 40u / HK_NTOK;
const uint HK_XSTAGE_CHUNK = (HK_XSTAGE_LOADS * WG / 9u) & ~1u;

// Copies Q8_1 blocks first .. first + n - 1 (n <= HK_XSTAGE_CHUNK, first - xs_block0 even) of every
// token into hk_xs_q. Neighbouring invocations take neighbouring words of a token's blocks, and
// every invocation issues the loads of all tokens before its first store, so that the chunk waits
// on one round trip, not one per token: 9n words per token over WG invocations, at most
// HK_XSTAGE_LOADS each.
void hk_stage_chunk(uint first, uint n)
{
    uint words = 9u * n, lid = gl_LocalInvocationIndex, cb = first - xs_block0;
    uint v[HK_NTOK * HK_XSTAGE_LOADS];
    [[unroll]] for (uint t = 0; t < HK_NTOK; t++) {
        uint w = x_base + t * x_token + first * 9u;
        [[unroll]] for (uint l = 0; l < HK_XSTAGE_LOADS; l++)
            if (lid + l * WG < words)
                v[t * HK_XSTAGE_LOADS + l] = xq[w + lid + l * WG];
    }
    [[unroll]] for (uint t = 0; t < HK_NTOK; t++)
        [[unroll]] for (uint l = 0; l < HK_XSTAGE_LOADS; l++)
            if (lid + l * WG < words)
                hk_stage_word(t, cb, lid + l * WG, v[t * HK_XSTAGE_LOADS + l]);
}

// For the K-quants, once blocks xs_block0 .. + n - 1 of every token are staged (a barrier), the
// blocks' sums into the aux words (n is even for them: k is a multiple of 256).
void hk_stage_sums(uint n)
{
    if (HK_XSUMS) {
        barrier();
        uint pairs = n / 2u;
        for (uint e = gl_LocalInvocationIndex; e < HK_NTOK * pairs; e += WG) {
            uint t = e / pairs, s = hk_xs_pair(t, e - t * pairs), a = hk_xs_aux(t, e - t * pairs);
            uvec4 aux = hk_xs_q[a];
            hk_xs_q[a].zw = uvec2(hk_xsum(hk_xs_q[s], hk_xs_q[s + 1u], uintBitsToFloat(aux.x)),
                                  hk_xsum(hk_xs_q[s + 2u], hk_xs_q[s + 3u], uintBitsToFloat(aux.y)));
        }
    }
}

// Stages Q8_1 blocks first .. first + n - 1 of every token (first = xs_block0; none past k), then
// their sums. Every invocation of the workgroup calls it with the same arguments (it has barriers).
void hk_stage_x(uint first, uint n)
{
    for (uint c = 0; c < n; c += HK_XSTAGE_CHUNK)
        hk_stage_chunk(first + c, min(HK_XSTAGE_CHUNK, n - c));
    hk_stage_sums(n);
}

#ifdef HK_XF32
#include "q8_1.glsl"
// The norm's row in chunks of HK_F32X_SB blocks (specialization constant 7; the host takes the
// whole row where it is short), its group sums one per 32 blocks of x
#define HK_NORM_SRC(i) x[pc.view_offset[1] / 4u + (i)]
layout(constant_id = 7) const uint HK_F32X_SB = 32;
#define HK_NORM_SB HK_F32X_SB
#define HK_NORM_GROUPS ((HK_XSTAGE_BLOCKS + 31u) / 32u)
#define HK_NORM_STAGED
#include "norm.glsl"

// Stages the k / 32 blocks of f32 x (binding 1), RMSNorm'ed where pc.norm, as Q8_1 blocks, then
// their sums. The loads are coalesced: the sum of squares walks the row staged in shared memory
// (norm.glsl), and the quantizer takes four consecutive values per invocation, eight invocations a
// block (q8_1.glsl's quad), from the staged row where it was one chunk. A block per invocation
// would have each load instruction touch a line per lane, in every workgroup. Every invocation
// calls it (it has barriers).
void hk_stage_x_f32()
{
    uint lid = gl_LocalInvocationIndex, x0 = pc.view_offset[1] / 4u, w0 = pc.view_offset[5] / 4u;
    bool norm = pc.norm != 0u, staged = norm && pc.k <= 32u * HK_NORM_SB;
    float scale = norm ? hk_norm_scale(hk_norm_sumsq_staged(pc.k), pc.k, pc.eps) : 1.0;
    // uniform steps of 4 * WG values (k is a multiple of 32: whole blocks); invocations past the
    // end quantize zeros for the quad's barriers
    for (uint c = 0; c < pc.k; c += 4u * WG) {
        uint i = c + 4u * lid;
        vec4 v = vec4(0.0);
        if (i < pc.k) {
            v = staged ? vec4(hk_norm_staged(i), hk_norm_staged(i + 1u), hk_norm_staged(i + 2u), hk_norm_staged(i + 3u))
                       : vec4(x[x0 + i], x[x0 + i + 1u], x[x0 + i + 2u], x[x0 + i + 3u]);
            if (norm)
                v = hk_norm_apply4(v, scale, vec4(norm_w[w0 + i], norm_w[w0 + i + 1u], norm_w[w0 + i + 2u],
                                                  norm_w[w0 + i + 3u]));
        }
        uint head, packed = hk_q8_1_quad(v, head);
        if (i < pc.k) {
            uint b = i / 32u, word = lid % 8u;
            hk_xs_q[hk_xs_pair(0u, b >> 1) + 2u * (b & 1u) + word / 4u][word % 4u] = packed;
            if (word == 0u)
                hk_xs_q[hk_xs_aux(0u, b >> 1)][b & 1u] = floatBitsToUint(unpackHalf2x16(head).x);
        }
    }
    hk_stage_sums(pc.k / 32u);
}
#endif
#endif

#ifdef HK_INT8
// A row group's items, unstaged x: each lane's items in the order of the staged loop, so the same
// sums (item it0 is in range: c = 0 needs no test)
void hk_rows_items(uint items)
{
    for (uint it0 = gl_SubgroupInvocationID; it0 < items; it0 += gl_SubgroupSize * HK_NITEMS) {
        [[unroll]] for (uint c = 0; c < HK_NITEMS; c++)
            if (c == 0u || it0 + c * gl_SubgroupSize < items)
                hk_load(it0 + c * gl_SubgroupSize, c);
        [[unroll]] for (uint c = 0; c < HK_NITEMS; c++)
            if (c == 0u || it0 + c * gl_SubgroupSize < items)
                hk_compute(it0 + c * gl_SubgroupSize, c);
    }
}
#endif

#if defined(HK_MOE) && !defined(HK_MOE_COMBINE)
// The expert and x of the row group starting at row `first` (the host keeps n a multiple of
// HK_GROUP_ROWS, so a group's rows belong to one slot): row0 its first weight row. An id out of
// range reads no weights: the group's outputs are 0 (GLU: act(0) * 0, which is +0 in both modes),
// written here, and false returned.
#ifdef HK_MOE_RANK
// The expert of a slot (uniform in the subgroup): round slot % top_k of its token's ranking, the
// rounds route.comp runs, the logits re-read from the cache in each round.
uint hk_slot_expert(uint slot)
{
    uint rounds = slot % pc.top_k + 1u, win = HK_NONE;
    hk_rank_base = pc.view_offset[3] / 4u + slot / pc.top_k * pc.n_experts;
    uvec2 taken = uvec2(0u);
    float best;
    for (uint r = 0; r < rounds; r++)
        win = hk_route_round(gl_SubgroupInvocationID, gl_SubgroupSize, pc.n_experts, taken, best);
    return win;
}
#endif

bool hk_moe_group(uint first, uint x0, out uint row0)
{
    uint slot = first / pc.n;
#ifdef HK_MOE_RANK
    uint expert = hk_slot_expert(slot);
#else
    uint expert = ids[pc.view_offset[3] / 4u + slot];
#endif
    x_base = x0 + slot * pc.x_stride;
    row0 = expert * pc.n + (first - slot * pc.n);
    if (expert < pc.n_experts)
        return true;
    if (subgroupElect())
        for (uint r = 0; r < HK_GROUP_ROWS; r++)
#ifdef HK_OUT_Q8_1
            hk_out_sh[(first + r) & 31u] = 0.0;
#else
            y[pc.view_offset[2] / 4u + first + r] = 0.0;
#endif
    return false;
}
#endif

#ifdef HK_MOE_COMBINE
// each slot's sums of the workgroup's rows, for the combine (top_k <= 64)
shared float hk_slot_sums[64u * HK_GROUP_ROWS];

void main()
{
    uint x0 = pc.view_offset[1] / 4u, row_bytes = hk_row_u16(pc.k) * 2u, items = hk_items(pc.k);
    // the host keeps n a multiple of HK_GROUP_ROWS: a group's rows belong to one token
    uint groups = pc.n / HK_GROUP_ROWS, units = pc.rows / HK_GROUP_ROWS;
    for (uint unit = hk_group_id(); unit < units; unit += gl_NumWorkGroups.x * gl_NumWorkGroups.y) {
        uint t = unit / groups, first = (unit - t * groups) * HK_GROUP_ROWS;
        for (uint j = gl_SubgroupID; j < pc.top_k; j += gl_NumSubgroups) {
            uint slot = t * pc.top_k + j, expert = ids[pc.view_offset[3] / 4u + slot];
            x_base = x0 + slot * pc.x_stride;
            if (expert >= pc.n_experts) { // reads no weights: the gather's zeros
                if (subgroupElect())
                    for (uint r = 0; r < HK_GROUP_ROWS; r++)
                        hk_slot_sums[j * HK_GROUP_ROWS + r] = 0.0;
                continue;
            }
            hk_rows_begin(first, expert * pc.n + first, row_bytes);
            hk_rows_items(items); // the gather's loop: the same sums
            for (uint r = 0; r < HK_GROUP_ROWS; r++) {
                float sum = subgroupAdd(acc[r]);
                if (subgroupElect())
                    hk_slot_sums[j * HK_GROUP_ROWS + r] = sum;
            }
        }
        barrier();
        // moe_combine.comp's sum: slot 0's product, each next one's added, then the residual
        uint r = gl_LocalInvocationIndex;
        if (r < HK_GROUP_ROWS) {
            uint wb = pc.view_offset[4] / 4u + t * pc.top_k, at = t * pc.n + first + r;
            precise float a = slot_w[wb] * hk_slot_sums[r];
            for (uint j = 1u; j < pc.top_k; j++) {
                precise float p = slot_w[wb + j] * hk_slot_sums[j * HK_GROUP_ROWS + r];
                a = a + p;
            }
            if (pc.has_residual != 0u)
                a = a + residual[pc.view_offset[5] / 4u + at];
            y[pc.view_offset[2] / 4u + at] = a;
        }
        barrier();
    }
}
#else
#ifdef HK_NORM_TAIL
#define HK_Q8_1_BLOCK_ONLY
#include "q8_1.glsl"
// norm.glsl's order over y staged in shared memory (the host keeps rows <= 2^20), in chunks of
// HK_TAIL_SB blocks (specialization constant 7)
#define HK_NORM_SRC(i) y[pc.view_offset[2] / 4u + (i)]
layout(constant_id = 7) const uint HK_TAIL_SB = 128;
#define HK_NORM_SB HK_TAIL_SB
#define HK_NORM_STAGED
#include "norm.glsl"
shared uint tail_arrived; // the counter before this workgroup's add

// After every row of this workgroup is written: the counter; the workgroup that adds last
// normalises and quantizes y (every invocation calls it).
void hk_norm_tail()
{
    uint lid = gl_LocalInvocationIndex, ws = pc.view_offset[7] / 4u;
    memoryBarrierBuffer();
    barrier();
    if (lid == 0u)
        tail_arrived = atomicAdd(wsu[ws], 1u);
    barrier();
    if (tail_arrived != gl_NumWorkGroups.x * gl_NumWorkGroups.y - 1u)
        return;
    memoryBarrierBuffer();
    float scale = hk_norm_scale(hk_norm_sumsq_staged(pc.rows), pc.rows, pc.eps);
    // per chunk (staged again unless y was one chunk): four consecutive values per invocation
    // normalised in place, then a block per invocation quantized from there
    uint nb = pc.rows / 32u, w0 = pc.view_offset[4] / 4u, q0 = pc.view_offset[5] / 4u, n0 = pc.view_offset[6] / 4u;
    for (uint c = 0; c < nb; c += HK_NORM_SB) {
        uint count = 32u * min(HK_NORM_SB, nb - c);
        if (nb > HK_NORM_SB) {
            hk_norm_stage(32u * c, count);
            barrier();
        }
        for (uint e = 4u * lid; e < count; e += 4u * WG) {
            uint i = 32u * c + e, at = e / 32u * HK_NORM_STRIDE + e % 32u;
            vec4 v = vec4(hk_norm_xs[at], hk_norm_xs[at + 1u], hk_norm_xs[at + 2u], hk_norm_xs[at + 3u]);
            v = hk_norm_apply4(v, scale, vec4(norm_w[w0 + i], norm_w[w0 + i + 1u], norm_w[w0 + i + 2u],
                                              norm_w[w0 + i + 3u]));
            if (pc.write_yn != 0u)
                for (uint t = 0; t < 4u; t++)
                    tail_n[n0 + i + t] = v[t];
            for (uint t = 0; t < 4u; t++)
                hk_norm_xs[at + t] = v[t];
        }
        barrier();
        for (uint b = lid; b < count / 32u; b += WG) {
            vec4 v[8];
            for (uint j = 0; j < 8u; j++) {
                uint at = b * HK_NORM_STRIDE + 4u * j;
                v[j] = vec4(hk_norm_xs[at], hk_norm_xs[at + 1u], hk_norm_xs[at + 2u], hk_norm_xs[at + 3u]);
            }
            uint quants[8];
            uint head = hk_q8_1_block(v, quants), at = q0 + 9u * (c + b);
            tail_q[at] = head;
            for (uint j = 0; j < 8u; j++)
                tail_q[at + 1u + j] = quants[j];
        }
        barrier(); // before the next chunk is staged
    }
    if (lid == 0u)
        atomicExchange(wsu[ws], 0u); // every workgroup has added: the next call starts from zero
}
#define HK_DENSE_MAIN hk_dense_main
#else
#define HK_DENSE_MAIN main
#endif
void HK_DENSE_MAIN()
{
    uint x0 = pc.view_offset[1] / 4u;
    x_base = x0;
#ifdef HK_INT8
    x_token = (pc.k / 32u) * 9u;
#endif
    uint row_bytes = hk_row_u16(pc.k) * 2u, items = hk_items(pc.k);
#ifdef HK_MATVEC_MULTI
    uint row_groups = (pc.rows + HK_NROWS - 1u) / HK_NROWS + (pc.rows1 + HK_NROWS - 1u) / HK_NROWS +
                      (pc.rows2 + HK_NROWS - 1u) / HK_NROWS;
#else
    uint row_groups = (pc.rows + HK_GROUP_ROWS - 1u) / HK_GROUP_ROWS;
#endif
    // a grid-stride loop over groups of rows: the host caps the workgroup count near what the
    // device holds at once, so subgroups live long rather than launching in many short waves
    uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumSubgroups;
#if defined(HK_INT8) && !defined(HK_MOE)
    if (HK_XSTAGE_BLOCKS > 0u && HK_XRESIDENT == 0u) {
        // Staged per step: the same groups and the same items in the same lanes in the same order
        // as below (so the same sums), but the workgroup moves through them together: its loops
        // are uniform so that every invocation meets every barrier. A subgroup past the last group
        // repeats it, stages and waits with the others, and writes nothing.
        for (uint group0 = hk_group_id() * gl_NumSubgroups; group0 < row_groups; group0 += stride) {
#ifdef HK_MATVEC_MULTI
            uint group = group0 + gl_SubgroupID, first = hk_group_first(min(group, row_groups - 1u));
#else
            uint group = group0 + gl_SubgroupID, first = min(group, row_groups - 1u) * HK_GROUP_ROWS;
#endif
            hk_rows_begin(first, first, row_bytes);
            for (uint it0 = 0; it0 < items; it0 += gl_SubgroupSize * HK_NITEMS) {
                // the weights' loads fly while the step is staged
                [[unroll]] for (uint c = 0; c < HK_NITEMS; c++) {
                    uint it = it0 + c * gl_SubgroupSize + gl_SubgroupInvocationID;
                    if (it < items)
                        hk_load(it, c);
                }
                barrier(); // every lane is done with the previous step
                xs_block0 = hk_item_block(it0);
                hk_stage_x(xs_block0, min(HK_XSTAGE_BLOCKS, pc.k / 32u - xs_block0));
                barrier();
                [[unroll]] for (uint c = 0; c < HK_NITEMS; c++) {
                    uint it = it0 + c * gl_SubgroupSize + gl_SubgroupInvocationID;
                    if (it < items)
                        hk_compute(it, c);
                }
            }
            hk_rows_end(first, group < row_groups);
        }
        return;
    }
    if (HK_XRESIDENT != 0u) {
        // Resident: every block of every token once (the host keeps k/32 <= HK_XSTAGE_BLOCKS),
        // then the row groups below read x from shared memory with no barrier: each subgroup runs
        // on by itself, exactly as without staging (the same sums).
        xs_block0 = 0u;
#ifdef HK_XF32
        hk_stage_x_f32();
#else
        hk_stage_x(0u, pc.k / 32u);
#endif
        barrier();
    }
#endif
#ifdef HK_OUT_Q8_1
    // Q8_1 output: a workgroup takes a block of 32 output rows at a time, its subgroups the block's
    // row groups in turn (the same rows, items and lanes as below, so the same sums); the block's
    // outputs meet in hk_out_sh, then one invocation quantizes them
    uint per_block = 32u / HK_GROUP_ROWS;
    for (uint blk = hk_group_id(); blk < pc.rows / 32u; blk += gl_NumWorkGroups.x * gl_NumWorkGroups.y) {
        for (uint g = gl_SubgroupID; g < per_block; g += gl_NumSubgroups) {
            uint first = blk * 32u + g * HK_GROUP_ROWS, row0 = first;
#ifdef HK_MOE
            if (!hk_moe_group(first, x0, row0))
                continue;
#endif
            hk_rows_begin(first, row0, row_bytes);
            hk_rows_items(items);
            hk_rows_end(first, true);
        }
        barrier();
        if (gl_LocalInvocationIndex == 0u) {
            vec4 v[8];
            for (uint j = 0; j < 8u; j++)
                v[j] = vec4(hk_out_sh[4u * j], hk_out_sh[4u * j + 1u], hk_out_sh[4u * j + 2u], hk_out_sh[4u * j + 3u]);
            uint quants[8];
            uint head = hk_q8_1_block(v, quants), at = pc.view_offset[2] / 4u + blk * 9u;
            yq[at] = head;
            for (uint j = 0; j < 8u; j++)
                yq[at + 1u + j] = quants[j];
        }
        barrier();
    }
#else
    for (uint group = hk_group_id() * gl_NumSubgroups + gl_SubgroupID; group < row_groups; group += stride) {
#ifdef HK_MATVEC_MULTI
        uint first = hk_group_first(group), row0 = first;
#else
        uint first = group * HK_GROUP_ROWS, row0 = first;
#endif
#ifdef HK_MOE
        if (!hk_moe_group(first, x0, row0))
            continue;
#endif
        hk_rows_begin(first, row0, row_bytes);
#ifdef HK_INT8
        hk_rows_items(items);
#else
        for (uint it = gl_SubgroupInvocationID; it < items; it += gl_SubgroupSize)
            hk_item(it);
#endif
        hk_rows_end(first, true);
    }
#endif
}
#ifdef HK_NORM_TAIL
void main()
{
    hk_dense_main();
    hk_norm_tail();
}
#endif
#endif // HK_MOE_COMBINE
#else
void main()
{
    uint row = hk_group_id();
    if (row >= pc.rows)
        return;
    x_base = pc.view_offset[1] / 4u;
    uint row16 = pc.view_offset[0] / 2u + row * hk_row_u16(pc.k);
    uint units = (pc.k + HK_UNIT_VALUES - 1u) / HK_UNIT_VALUES; // an F16 row may end inside one
    float acc = 0.0;
    for (uint u = gl_LocalInvocationID.x; u < units; u += WG)
        acc += hk_unit_dot(row16, u, u * HK_UNIT_VALUES);
    acc = hk_workgroup_sum(acc);
    if (gl_LocalInvocationID.x == 0)
        y[pc.view_offset[2] / 4u + row] = acc;
}
#endif
