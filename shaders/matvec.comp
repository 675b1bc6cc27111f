#version 450
#extension GL_GOOGLE_include_directive : require
#if defined(HK_INT8) && !defined(HK_SCALAR_DOT)
#extension GL_EXT_spirv_intrinsics : require
#endif
#extension GL_EXT_control_flow_attributes : require
// Dense quantized matvec y[rows] = W[rows, k] . x[k], W in GGUF blocks (HK_Q8_0 / HK_Q4_K /
// HK_Q6_K), x and y f32. Layouts of the work, by define:
//   default       one workgroup per row: invocations stride over the row's 32-value units, then
//                 a subgroup + shared-memory reduction (portable: any subgroup size, 2-byte
//                 aligned weights, 4-byte aligned x);
//   HK_SUBGROUP_ROWS  each subgroup computes HK_NROWS rows, so every x value a lane loads serves
//                 HK_NROWS rows; wide loads (16-byte aligned x, and Q4_K weights); a subgroup-only
//                 reduction. Needs full subgroups (the host requires them at pipeline creation).
//   HK_INT8       subgroup rows with x given as Q8_1 blocks (hk_quantize_q8_1): packed int8 dot
//                 products of the weight quants with the activation quants (dot.glsl). HK_NTOK
//                 tokens at once (x [tokens, k/32] blocks, y [tokens, rows]): each weight word
//                 is loaded once and met by every token's activation; one token is HK_NTOK = 1.
//                 With HK_XSTAGE_BLOCKS (several tokens, dense) the workgroup copies the x blocks
//                 of each subgroup-wide chunk of items into shared memory first.
//   HK_MOE        (with either of the two above) the MoE expert gather: W is [experts, n, k],
//                 output slot s is W[ids[s]] . x_s, rows = slots * n.
#include "common.glsl"

layout(binding = 0) readonly buffer Weights { uint16_t w16[]; };
layout(binding = 0) readonly buffer Weights32 { uint w32[]; };
layout(binding = 0) readonly buffer Weights128 { uvec4 w128[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) readonly buffer XQ { uint xq[]; }; // HK_INT8: Q8_1 blocks of 9 words
layout(binding = 2) writeonly buffer Y { float y[]; };
#ifdef HK_MOE
layout(binding = 3) readonly buffer Ids { uint ids[]; };
#endif

// Rows per subgroup (subgroup-rows layouts): specialization constant 1.
layout(constant_id = 1) const uint HK_NROWS = 4;
// Tokens per pass (HK_INT8): specialization constant 2; 1 for the MoE and for f32 x.
layout(constant_id = 2) const uint HK_NTOK = 1;
// HK_INT8, dense: Q8_1 blocks of one token staged per chunk of gl_SubgroupSize items (the
// blocks those items read: Q8_0 subgroup/2, K-quants 2*subgroup); 0: x read from the buffer.
// Specialization constant 3.
layout(constant_id = 3) const uint HK_XSTAGE_BLOCKS = 0;

HK_PUSH_BEGIN
    uint rows;      // HK_MOE: slots * n
    uint k;
    uint n;         // HK_MOE: rows of one expert
    uint n_experts; // HK_MOE
    uint x_stride;  // HK_MOE: words from one slot's x to the next (0: one x for every slot)
HK_PUSH_END

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
// words from one token's Q8_1 blocks to the next (k / 32 blocks of 9 words)
uint x_token;

// Staged x (HK_XSTAGE_BLOCKS > 0): each lane reads its own item's blocks, 72 bytes from its
// neighbour's, so from the buffer every load instruction of a subgroup touches a sector per lane
// for 4 useful bytes; with several tokens that load traffic, not the weights, would bound the
// kernel. The workgroup instead copies the chunk's blocks once (hk_stage_x), and each lane reads
// them from shared memory 16 bytes at a time: per token, the d of each block as f32 (hk_xs_d)
// and the quants of each pair of blocks as HK_XSTAGE_PAIR uvec4 (hk_xs_q: 4 of data; K-quants 1
// of padding, so that the 8 lanes of each 128-byte phase hit different banks: Q4_K lane l reads
// pair l, Q6_K lane l pairs l - (l & 1) and l + 1 - (l & 1)).
#ifdef HK_Q8_0
#define HK_XSTAGE_PAIR 4u
#else
#define HK_XSTAGE_PAIR 5u
#endif
shared uvec4 hk_xs_q[HK_NTOK * (HK_XSTAGE_BLOCKS / 2u) * HK_XSTAGE_PAIR + 1u];
shared float hk_xs_d[HK_NTOK * HK_XSTAGE_BLOCKS + 1u];
uint xs_block0; // the first block of the staged chunk

// d of Q8_1 block blk of token t
float hk_xd(uint t, uint blk)
{
    if (HK_XSTAGE_BLOCKS > 0u)
        return hk_xs_d[t * HK_XSTAGE_BLOCKS + (blk - xs_block0)];
    return unpackHalf2x16(xq[x_base + t * x_token + blk * 9u]).x;
}

// the 16 quants of half h of Q8_1 block blk of token t (4 words), written out: a loop would count
// towards lavapipe's iteration limit (src/kernels/matvec.c), straight-line code does not
uvec4 hk_x16(uint t, uint blk, uint h)
{
    if (HK_XSTAGE_BLOCKS > 0u) {
        uint b = blk - xs_block0;
        return hk_xs_q[(t * (HK_XSTAGE_BLOCKS / 2u) + (b >> 1)) * HK_XSTAGE_PAIR + 2u * (b & 1u) + h];
    }
    uint w = x_base + t * x_token + blk * 9u + 1u + 4u * h;
    return uvec4(xq[w], xq[w + 1u], xq[w + 2u], xq[w + 3u]);
}

// sum of the 16 products of the signed bytes of a and b (an exact integer)
int hk_dot16(uvec4 a, uvec4 b) { return hk_dot4(a.x, b.x) + hk_dot4(a.y, b.y) + hk_dot4(a.z, b.z) + hk_dot4(a.w, b.w); }
#endif
#if defined(HK_Q8_0)
#include "q8_0.glsl"
#elif defined(HK_Q4_K)
#include "q4_k.glsl"
#elif defined(HK_Q6_K)
#include "q6_k.glsl"
#else
#error "define HK_Q8_0, HK_Q4_K or HK_Q6_K"
#endif

#if defined(HK_SUBGROUP_ROWS) || defined(HK_INT8)
// Clears the sums of the row group starting at row `first` and points row_byte at its rows (rows
// past the end read the last row and are not written). row0: its first weight row (the MoE's
// expert rows; first for the dense kernel).
void hk_rows_begin(uint first, uint row0, uint row_bytes)
{
    for (uint r = 0; r < HK_NROWS; r++) {
#ifdef HK_INT8
        [[unroll]] for (uint t = 0; t < HK_NTOK; t++)
            acc[r * HK_NTOK + t] = 0.0;
#else
        acc[r] = 0.0;
#endif
#ifdef HK_MOE
        row_byte[r] = pc.view_offset[0] + (row0 + r) * row_bytes;
#else
        row_byte[r] = pc.view_offset[0] + min(first + r, pc.rows - 1u) * row_bytes;
#endif
    }
}

// Sums the lanes' partial sums and writes the group's outputs (token t's after token t-1's:
// y[t * rows + row]) if `write`.
void hk_rows_end(uint first, bool write)
{
    for (uint r = 0; r < HK_NROWS; r++)
#ifdef HK_INT8
        [[unroll]] for (uint t = 0; t < HK_NTOK; t++) {
            float sum = subgroupAdd(acc[r * HK_NTOK + t]);
            if (write && subgroupElect() && first + r < pc.rows)
                y[pc.view_offset[2] / 4u + t * pc.rows + first + r] = sum;
        }
#else
    {
        float sum = subgroupAdd(acc[r]);
        if (write && subgroupElect() && first + r < pc.rows)
            y[pc.view_offset[2] / 4u + first + r] = sum;
    }
#endif
}

#if defined(HK_INT8) && !defined(HK_MOE)
// Copies the Q8_1 blocks of every token that items it0 .. it0 + gl_SubgroupSize - 1 read into
// hk_xs_d / hk_xs_q. A unit is half a block of one token (its 4 quant words, one 16-byte store,
// and for half 0 the d): neighbouring invocations take neighbouring halves, so a subgroup's loads
// cover a contiguous stretch of the tokens' blocks. Blocks past k are skipped (items past k read
// none).
void hk_stage_x(uint it0)
{
    xs_block0 = hk_item_block(it0);
    uint blocks = pc.k / 32u, sb = max(HK_XSTAGE_BLOCKS, 1u); // never called with 0; no division by it
    for (uint u = gl_LocalInvocationIndex; u < HK_NTOK * sb * 2u; u += WG) {
        uint t = u / (2u * sb), b = (u >> 1) % sb, h = u & 1u;
        if (xs_block0 + b < blocks) {
            uint w = x_base + t * x_token + (xs_block0 + b) * 9u, q = w + 1u + 4u * h;
            hk_xs_q[(t * (sb / 2u) + (b >> 1)) * HK_XSTAGE_PAIR + 2u * (b & 1u) + h] =
                uvec4(xq[q], xq[q + 1u], xq[q + 2u], xq[q + 3u]);
            if (h == 0u)
                hk_xs_d[t * sb + b] = unpackHalf2x16(xq[w]).x;
        }
    }
}
#endif

void main()
{
    uint x0 = pc.view_offset[1] / 4u;
    x_base = x0;
#ifdef HK_INT8
    x_token = (pc.k / 32u) * 9u;
#endif
    uint row_bytes = hk_row_u16(pc.k) * 2u, items = hk_items(pc.k);
    uint row_groups = (pc.rows + HK_NROWS - 1u) / HK_NROWS;
    // a grid-stride loop over groups of rows: the host caps the workgroup count near what the
    // device holds at once, so subgroups live long rather than launching in many short waves
    uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumSubgroups;
#if defined(HK_INT8) && !defined(HK_MOE)
    if (HK_XSTAGE_BLOCKS > 0u) {
        // Staged: the same groups and the same items in the same lanes in the same order as below
        // (so the same sums), but the workgroup moves through them together: its loops are
        // uniform so that every invocation meets every barrier. A subgroup past the last group
        // repeats it, stages and waits with the others, and writes nothing.
        for (uint group0 = hk_group_id() * gl_NumSubgroups; group0 < row_groups; group0 += stride) {
            uint group = group0 + gl_SubgroupID, first = min(group, row_groups - 1u) * HK_NROWS;
            hk_rows_begin(first, first, row_bytes);
            for (uint it0 = 0; it0 < items; it0 += gl_SubgroupSize) {
                uint it = it0 + gl_SubgroupInvocationID;
                if (it < items)
                    hk_load(it); // the weights' loads fly while the chunk is staged
                barrier();       // every lane is done with the previous chunk
                hk_stage_x(it0);
                barrier();
                if (it < items)
                    hk_compute(it);
            }
            hk_rows_end(first, group < row_groups);
        }
        return;
    }
#endif
    for (uint group = hk_group_id() * gl_NumSubgroups + gl_SubgroupID; group < row_groups; group += stride) {
        uint first = group * HK_NROWS, row0 = first;
#ifdef HK_MOE
        // the host keeps n a multiple of HK_NROWS, so a group's rows belong to one slot
        uint slot = first / pc.n;
        uint expert = ids[pc.view_offset[3] / 4u + slot];
        x_base = x0 + slot * pc.x_stride;
        if (expert >= pc.n_experts) { // an id out of range reads no weights; its outputs are 0
            if (subgroupElect())
                for (uint r = 0; r < HK_NROWS; r++)
                    y[pc.view_offset[2] / 4u + first + r] = 0.0;
            continue;
        }
        row0 = expert * pc.n + (first - slot * pc.n);
#endif
        hk_rows_begin(first, row0, row_bytes);
        for (uint it = gl_SubgroupInvocationID; it < items; it += gl_SubgroupSize)
            hk_item(it);
        hk_rows_end(first, true);
    }
}
#else
void main()
{
    uint row = hk_group_id();
    if (row >= pc.rows)
        return;
    x_base = pc.view_offset[1] / 4u;
    uint row16 = pc.view_offset[0] / 2u + row * hk_row_u16(pc.k);
    uint units = pc.k / HK_UNIT_VALUES;
    float acc = 0.0;
    for (uint u = gl_LocalInvocationID.x; u < units; u += WG)
        acc += hk_unit_dot(row16, u, u * HK_UNIT_VALUES);
    acc = hk_workgroup_sum(acc);
    if (gl_LocalInvocationID.x == 0)
        y[pc.view_offset[2] / 4u + row] = acc;
}
#endif
