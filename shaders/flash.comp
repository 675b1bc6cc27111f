#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#if defined(HK_COOPMAT) && !defined(HK_COOPMAT_EMU)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#ifdef HK_COOPMAT
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
// Flash attention for prefill: out = softmax(scale * Q K^T) V per query head, K and V read in
// place from a strided KV cache (HK_KV_F32 / HK_KV_F16 / HK_KV_Q8_0).
//
// A workgroup owns BR rows of one kv head: (query token, query head of the group) pairs, so the
// group's heads share every K/V tile it stages. It walks the keys in tiles of BC, each tile
//   1. staged (K) into shared memory, rows past seq_k as zeros (never read);
//   2. S = Q K^T for the tile, into shared memory;
//   3. online softmax by threads, TPR per row: running max m and sum l per row (base-2 logits,
//      scale * log2(e) folded into Q), P = 2^(S - m), alpha = 2^(m_old - m); masked keys (past
//      the row's causal limit or seq_k) get P = 0. Meanwhile V is staged where K was;
//   4. O = alpha O + P V.
// Tiles past the workgroup's last visible key are not visited; the diagonal tile is masked.
// Keys may be split in chunks over workgroups (n_split > 1): each writes its unnormalised O with
// (m, l) to the workspace and flash_combine.comp merges them.
//
// HK_COOPMAT: the two products on the matrix cores (KHR cooperative matrix, 16x16x16 f16 x f16
// -> f32). Subgroup s owns MR 16-row blocks; its O stays in accumulators across the tiles and is
// rescaled by a matrix whose row i holds alpha of row i (component-wise product). Q (scaled), K,
// V and P are f16 in shared memory, 8 to a uvec4; S and the factors are vec4 arrays: every
// matrix load and store starts and strides on 16 bytes, as Vulkan requires
// (VUID-RuntimeSpirv-OpCooperativeMatrixLoadKHR-08986). Needs full subgroups (WG = subgroups x
// subgroup size).
// HK_COOPMAT_EMU (with HK_COOPMAT, testing only): the matrix-core arm with its five matrix
// operations emulated as the KHR specification defines them (flash_coopmat_emu.glsl), so that a
// device without matrix cores runs this arm's tiling, layouts and strides.
// Default (the portable twin): the same staging, loop, masking and softmax in f32, the products
// by threads: each thread owns D/TPR columns of its row of O (quads p, p + TPR, ...).
#include "common.glsl"
#include "flash_push.glsl"

layout(constant_id = 1) const uint D = 128;     // head_dim, a multiple of 16
layout(constant_id = 2) const uint BR = 64;     // rows per workgroup (WG / BR threads per row)
layout(constant_id = 3) const uint BC = 32;     // keys per tile, a multiple of 8
layout(constant_id = 4) const uint ALIGNED = 0; // K and V rows start on 16 bytes: vector loads
layout(constant_id = 5) const uint MR = 2;      // HK_COOPMAT: 16-row blocks per subgroup

const uint TPR = WG / BR;  // threads per row in the softmax (and the twin's products)
const uint CPT = BC / TPR; // keys of a tile per thread in the softmax (HK_COOPMAT: a multiple of 8)

layout(binding = 0) readonly buffer Qb { float q[]; };
#ifdef HK_KV_F32
layout(binding = 1) readonly buffer Kb { float k32[]; };
layout(binding = 1) readonly buffer Kb4 { vec4 k4[]; };
layout(binding = 2) readonly buffer Vb { float v32[]; };
layout(binding = 2) readonly buffer Vb4 { vec4 v4[]; };
#define K1 k32
#define V1 v32
#else // f16 values, or Q8_0 blocks (2-byte aligned: 16-bit reads)
layout(binding = 1) readonly buffer Kb { uint16_t k16[]; };
layout(binding = 1) readonly buffer Kb4 { uvec4 k4[]; };
layout(binding = 2) readonly buffer Vb { uint16_t v16[]; };
layout(binding = 2) readonly buffer Vb4 { uvec4 v4[]; };
#define K1 k16
#define V1 v16
#endif
layout(binding = 3) writeonly buffer Ob { float o[]; };
layout(binding = 4) writeonly buffer Wb { float ws[]; };
layout(binding = 5) readonly buffer Cb { uint counter[]; };

// Q and K/V rows in shared memory, in units of 8 values, padded by 8 values (16 bytes of f16)
// so that the 8 rows of a 16-byte column hit different banks.
const uint STR8 = (D + 8) / 8;
const uint SSTR = BC + 4; // S rows, in floats (a multiple of 4)
// An oct: 8 values of a row as shared memory holds them (HK_OCT from two vec4, HK_OCT_F16 from 8
// f16 in a uvec4), HK_PUT8 stores one at slot (in octs).
#ifdef HK_COOPMAT
shared uvec4 Qsh[BR * STR8]; // 8 f16 each
shared uvec4 KVsh[BC * STR8];
const uint PSTR8 = (BC + 8) / 8;
shared uvec4 Psh[BR * PSTR8];
shared vec4 Ash[BR * 4]; // per row, 16 copies of its factor (alpha, then 1/l): a 16x16 tile per block
#define OCT uvec4
#define HK_OCT(lo, hi)                                                                          \
    uvec4(packFloat2x16(f16vec2((lo).xy)), packFloat2x16(f16vec2((lo).zw)), packFloat2x16(f16vec2((hi).xy)), \
          packFloat2x16(f16vec2((hi).zw)))
#define HK_OCT_F16(u4) (u4)
#define HK_PUT8(arr, slot, oct) arr[slot] = (oct)
#else
shared vec4 Qsh[BR * STR8 * 2]; // 8 values = 2 vec4
shared vec4 KVsh[BC * STR8 * 2];
#define OCT mat2x4
#define HK_OCT(lo, hi) mat2x4(lo, hi)
#define HK_OCT_F16(u4)                                                                          \
    mat2x4(vec4(unpackHalf2x16((u4).x), unpackHalf2x16((u4).y)), vec4(unpackHalf2x16((u4).z), unpackHalf2x16((u4).w)))
#define HK_PUT8(arr, slot, oct)                                                                 \
    {                                                                                           \
        arr[2u * (slot)] = (oct)[0];                                                            \
        arr[2u * (slot) + 1u] = (oct)[1];                                                       \
    }
#endif
shared vec4 Ssh[BR * SSTR / 4]; // S; the twin's P in place
#define S_(i) Ssh[(i) >> 2][(i) & 3u]

#ifdef HK_COOPMAT
#ifdef HK_COOPMAT_EMU
#include "flash_coopmat_emu.glsl"
#else
// 16x16 tiles: f16 operands, f32 accumulators. CM_LOAD8 from uvec4 arrays of 8 f16, CM_LOAD4F
// and CM_STORE4 with vec4 arrays; offsets and strides in those elements.
#define CM_ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define CM_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define CM_ZERO CM_ACC(0.0)
#define CM_ROWS gl_CooperativeMatrixLayoutRowMajor
#define CM_COLS gl_CooperativeMatrixLayoutColumnMajor
#define CM_LOAD8(m, arr, off, stride, layout) coopMatLoad(m, arr, off, stride, layout)
#define CM_LOAD4F(m, arr, off, stride, layout) coopMatLoad(m, arr, off, stride, layout)
#define CM_STORE4(m, arr, off, stride, layout) coopMatStore(m, arr, off, stride, layout)
#define CM_MULADD(a, b, c) coopMatMulAdd(a, b, c)
#define CM_MUL(c, f) ((c) * (f))
#define CM_SUBGROUP gl_SubgroupID
#define CM_UNROLL [[unroll]] // the matrices stay in registers
#endif
CM_ACC oacc[MR][D / 16];
#else
vec4 oreg[D / 4 / TPR]; // row tid / TPR, quads tid % TPR + TPR * i
#endif

// dst = the 8 values c .. c+7 (c a multiple of 8) of the cache row starting at byte b, as an oct.
#if defined(HK_KV_F32)
#define HK_LOAD8(dst, B1, B4, b, c)                                                             \
    if (ALIGNED != 0u) {                                                                        \
        uint i_ = ((b) >> 4) + ((c) >> 2);                                                      \
        dst = HK_OCT(B4[i_], B4[i_ + 1u]);                                                      \
    } else {                                                                                    \
        uint i_ = ((b) >> 2) + (c);                                                             \
        dst = HK_OCT(vec4(B1[i_], B1[i_ + 1u], B1[i_ + 2u], B1[i_ + 3u]),                       \
                     vec4(B1[i_ + 4u], B1[i_ + 5u], B1[i_ + 6u], B1[i_ + 7u]));                 \
    }
#elif defined(HK_KV_F16)
#define HK_U16X2(B1, i) (uint(B1[i]) | (uint(B1[(i) + 1u]) << 16))
#define HK_LOAD8(dst, B1, B4, b, c)                                                             \
    if (ALIGNED != 0u) {                                                                        \
        dst = HK_OCT_F16(B4[((b) >> 4) + ((c) >> 3)]);                                          \
    } else {                                                                                    \
        uint i_ = ((b) >> 1) + (c);                                                             \
        dst = HK_OCT_F16(uvec4(HK_U16X2(B1, i_), HK_U16X2(B1, i_ + 2u), HK_U16X2(B1, i_ + 4u), HK_U16X2(B1, i_ + 6u))); \
    }
#elif defined(HK_KV_Q8_0)
// a row is D/32 blocks of 17 u16 (f16 d, 32 x i8); 8 values never straddle two blocks
#define HK_LOAD8(dst, B1, B4, b, c)                                                             \
    {                                                                                           \
        uint i_ = ((b) >> 1) + ((c) >> 5) * 17u;                                                \
        float d_ = hk_half(uint(B1[i_]));                                                       \
        uint j_ = i_ + 1u + (((c) & 31u) >> 1);                                                 \
        uint w0_ = uint(B1[j_]), w1_ = uint(B1[j_ + 1u]), w2_ = uint(B1[j_ + 2u]), w3_ = uint(B1[j_ + 3u]); \
        dst = HK_OCT(d_ * vec4(hk_lo_i8(w0_), hk_hi_i8(w0_), hk_lo_i8(w1_), hk_hi_i8(w1_)),       \
                     d_ * vec4(hk_lo_i8(w2_), hk_hi_i8(w2_), hk_lo_i8(w3_), hk_hi_i8(w3_)));      \
    }
#else
#error "define HK_KV_F32, HK_KV_F16 or HK_KV_Q8_0"
#endif

uint seq_k_now()
{
    if (pc.seq_k != 0u)
        return pc.seq_k;
    // the host checked 1 <= n_q <= capacity when causal
    return clamp(counter[pc.view_offset[5] / 4u], pc.causal != 0u ? pc.n_q : 1u, pc.capacity);
}

// Stages rows j*BC .. j*BC+BC-1 of K (is_v 0) or V (1) of kv head kvh into KVsh; rows at or past
// sk are zeros and are not read. Each invocation issues all its loads before its stores, so
// their latencies overlap (the trip counts are constants).
const uint KV8 = BC * (D / 8);            // octs of a tile
const uint KV_PER = (KV8 + WG - 1) / WG; // per invocation
void stage_kv(uint is_v, uint kvh, uint j, uint sk)
{
    OCT buf[KV_PER];
    [[unroll]] for (uint i = 0; i < KV_PER; i++) {
        uint e = gl_LocalInvocationIndex + i * WG;
        uint c = e / (D / 8), c8 = (e % (D / 8)) * 8u, key = j * BC + c;
        buf[i] = HK_OCT(vec4(0.0), vec4(0.0));
        if (e < KV8 && key < sk) {
            if (is_v == 0u) {
                uint b = pc.view_offset[1] + kvh * pc.k_head + key * pc.k_row;
                HK_LOAD8(buf[i], K1, k4, b, c8)
            } else {
                uint b = pc.view_offset[2] + kvh * pc.v_head + key * pc.v_row;
                HK_LOAD8(buf[i], V1, v4, b, c8)
            }
        }
    }
    [[unroll]] for (uint i = 0; i < KV_PER; i++) {
        uint e = gl_LocalInvocationIndex + i * WG;
        if (e < KV8)
            HK_PUT8(KVsh, (e / (D / 8)) * STR8 + e % (D / 8), buf[i]);
    }
}

#ifdef HK_COOPMAT
// S for the subgroup's row blocks: each K tile loaded once serves MR blocks.
void scores()
{
    CM_ACC sacc[MR][BC / 16];
    CM_UNROLL for (uint mr = 0; mr < MR; mr++)
        CM_UNROLL for (uint cb = 0; cb < BC / 16; cb++)
            sacc[mr][cb] = CM_ZERO;
    CM_UNROLL for (uint kd = 0; kd < D / 16; kd++) {
        CM_A qa[MR];
        CM_UNROLL for (uint mr = 0; mr < MR; mr++)
            CM_LOAD8(qa[mr], Qsh, (CM_SUBGROUP * MR + mr) * 16u * STR8 + kd * 2u, STR8, CM_ROWS);
        CM_UNROLL for (uint cb = 0; cb < BC / 16; cb++) {
            // B[k][n] = K[key n][dim k]: K's rows are B's columns
            CM_B kb;
            CM_LOAD8(kb, KVsh, cb * 16u * STR8 + kd * 2u, STR8, CM_COLS);
            CM_UNROLL for (uint mr = 0; mr < MR; mr++)
                sacc[mr][cb] = CM_MULADD(qa[mr], kb, sacc[mr][cb]);
        }
    }
    CM_UNROLL for (uint mr = 0; mr < MR; mr++)
        CM_UNROLL for (uint cb = 0; cb < BC / 16; cb++)
            CM_STORE4(sacc[mr][cb], Ssh, ((CM_SUBGROUP * MR + mr) * 16u * SSTR + cb * 16u) / 4u, SSTR / 4u, CM_ROWS);
}

// O = O * (the rows' factors in Ash), component-wise.
void scale_o()
{
    CM_UNROLL for (uint mr = 0; mr < MR; mr++) {
        CM_ACC f;
        CM_LOAD4F(f, Ash, (CM_SUBGROUP * MR + mr) * 64u, 4u, CM_ROWS);
        CM_UNROLL for (uint dt = 0; dt < D / 16; dt++)
            oacc[mr][dt] = CM_MUL(oacc[mr][dt], f);
    }
}

void accumulate_pv()
{
    scale_o();
    CM_UNROLL for (uint kc = 0; kc < BC / 16; kc++) {
        CM_A pa[MR];
        CM_UNROLL for (uint mr = 0; mr < MR; mr++)
            CM_LOAD8(pa[mr], Psh, (CM_SUBGROUP * MR + mr) * 16u * PSTR8 + kc * 2u, PSTR8, CM_ROWS);
        CM_UNROLL for (uint dt = 0; dt < D / 16; dt++) {
            CM_B vb;
            CM_LOAD8(vb, KVsh, kc * 16u * STR8 + dt * 2u, STR8, CM_ROWS);
            CM_UNROLL for (uint mr = 0; mr < MR; mr++)
                oacc[mr][dt] = CM_MULADD(pa[mr], vb, oacc[mr][dt]);
        }
    }
}
#else
// S for this thread's keys of its row (the softmax's own mapping).
void scores()
{
    uint r = gl_LocalInvocationIndex / TPR, c0 = (gl_LocalInvocationIndex % TPR) * CPT;
    for (uint i = 0; i < CPT; i++) {
        float s = 0.0;
        [[unroll]] for (uint k = 0; k < D / 4; k++)
            s += dot(Qsh[2u * r * STR8 + k], KVsh[2u * (c0 + i) * STR8 + k]);
        S_(r * SSTR + c0 + i) = s;
    }
}

void accumulate_pv(float alpha)
{
    uint r = gl_LocalInvocationIndex / TPR, p = gl_LocalInvocationIndex % TPR;
    [[unroll]] for (uint i = 0; i < D / 4 / TPR; i++)
        oreg[i] *= alpha;
    for (uint c = 0; c < BC; c++) {
        float pc_ = S_(r * SSTR + c);
        [[unroll]] for (uint i = 0; i < D / 4 / TPR; i++)
            oreg[i] += pc_ * KVsh[2u * c * STR8 + p + TPR * i];
    }
}
#endif

void main()
{
    const uint tid = gl_LocalInvocationIndex;
    uint gid = hk_group_id();
    uint n_kv = pc.n_heads / pc.group;
    if (gid >= n_kv * pc.n_split * pc.row_tiles)
        return;
    // the last row tiles first: under a causal mask they see the most keys
    uint rt = pc.row_tiles - 1u - gid % pc.row_tiles;
    uint split = (gid / pc.row_tiles) % pc.n_split;
    uint kvh = gid / (pc.row_tiles * pc.n_split);
    uint n_rows = pc.n_q * pc.group, r0 = rt * BR;
    uint sk = seq_k_now();

    // this thread's softmax row and its keys' exclusive bound; rows past the end act as the last
    // row (computed, never stored)
    uint r = tid / TPR, part = tid % TPR;
    uint row = min(r0 + r, n_rows - 1u);
    uint lim = pc.causal != 0u ? sk - pc.n_q + row / pc.group + 1u : sk;
    uint last_row = min(r0 + BR - 1u, n_rows - 1u);
    uint kend = pc.causal != 0u ? sk - pc.n_q + last_row / pc.group + 1u : sk;
    uint j0 = split * pc.split_tiles;
    uint j1 = min(j0 + pc.split_tiles, (kend + BC - 1u) / BC);

    [[unroll]] for (uint i = 0; i < (BR * (D / 8) + WG - 1) / WG; i++) {
        uint e = tid + i * WG, rr = e / (D / 8), c8 = (e % (D / 8)) * 8u;
        if (e < BR * (D / 8)) {
            vec4 lo = vec4(0.0), hi = vec4(0.0);
            if (r0 + rr < n_rows) {
                uint qi = pc.view_offset[0] / 4u + hk_out_row(r0 + rr, kvh) * D + c8;
                lo = vec4(q[qi], q[qi + 1u], q[qi + 2u], q[qi + 3u]) * pc.scale;
                hi = vec4(q[qi + 4u], q[qi + 5u], q[qi + 6u], q[qi + 7u]) * pc.scale;
            }
            HK_PUT8(Qsh, rr * STR8 + c8 / 8u, HK_OCT(lo, hi));
        }
    }
#ifdef HK_COOPMAT
    CM_UNROLL for (uint mr = 0; mr < MR; mr++)
        CM_UNROLL for (uint dt = 0; dt < D / 16; dt++)
            oacc[mr][dt] = CM_ZERO;
#else
    [[unroll]] for (uint i = 0; i < D / 4 / TPR; i++)
        oreg[i] = vec4(0.0);
#endif
    // finite start: 2^(m_old - m) is 0, not NaN, when the first keys arrive
    float m_run = -1e30, l_run = 0.0;

    for (uint j = j0; j < j1; j++) {
        stage_kv(0u, kvh, j, sk);
        barrier(); // K (and Q) staged
        scores();
        barrier(); // S complete; K no longer read
        stage_kv(1u, kvh, j, sk);

        uint key0 = j * BC + part * CPT;
        uint valid = lim > key0 ? min(lim - key0, CPT) : 0u; // this thread's visible keys, a prefix
        float sv[CPT];
        float mx = -1e30;
#ifdef HK_COOPMAT
        // CPT is a multiple of 8 here: 16-byte reads (rows 9 vec4 apart meet no bank conflict)
        [[unroll]] for (uint i = 0; i < CPT; i += 4) {
            vec4 s4 = Ssh[(r * SSTR + part * CPT + i) / 4u];
            sv[i] = s4.x;
            sv[i + 1u] = s4.y;
            sv[i + 2u] = s4.z;
            sv[i + 3u] = s4.w;
        }
#else
        [[unroll]] for (uint i = 0; i < CPT; i++)
            sv[i] = S_(r * SSTR + part * CPT + i);
#endif
        [[unroll]] for (uint i = 0; i < CPT; i++)
            if (i < valid)
                mx = max(mx, sv[i]);
        if (TPR > 1u) {
            hk_partial[tid] = mx;
            barrier();
            for (uint k = 0; k < TPR; k++)
                mx = max(mx, hk_partial[r * TPR + k]);
        }
        float m_new = max(m_run, mx);
        float alpha = exp2(m_run - m_new);
        m_run = m_new;
        float lsum = 0.0;
#ifdef HK_COOPMAT
        [[unroll]] for (uint i = 0; i < CPT; i += 8) {
            vec4 lo, hi;
            [[unroll]] for (uint k = 0; k < 4; k++) {
                lo[k] = i + k < valid ? exp2(sv[i + k] - m_new) : 0.0;
                hi[k] = i + k + 4u < valid ? exp2(sv[i + k + 4u] - m_new) : 0.0;
            }
            // l sums the P that V is weighted with: rounded to f16 first
            lsum += dot(vec4(f16vec4(lo)), vec4(1.0)) + dot(vec4(f16vec4(hi)), vec4(1.0));
            HK_PUT8(Psh, r * PSTR8 + (part * CPT + i) / 8u, HK_OCT(lo, hi));
        }
        [[unroll]] for (uint k = 0; k < 4 / TPR; k++) // TPR <= 4
            Ash[r * 4u + part * (4u / TPR) + k] = vec4(alpha);
#else
        [[unroll]] for (uint i = 0; i < CPT; i++) {
            float p = i < valid ? exp2(sv[i] - m_new) : 0.0;
            lsum += p;
            S_(r * SSTR + part * CPT + i) = p;
        }
#endif
        l_run = l_run * alpha + lsum;
        barrier(); // V, P and the factors staged
#ifdef HK_COOPMAT
        accumulate_pv();
#else
        accumulate_pv(alpha);
#endif
        barrier(); // KVsh, P and Ash free for the next tile
    }

    // epilogue: l over the row's threads; normalise, or hand (O, m, l) to the combine pass
    if (TPR > 1u) {
        hk_partial[tid] = l_run;
        barrier();
        l_run = 0.0;
        for (uint k = 0; k < TPR; k++)
            l_run += hk_partial[r * TPR + k];
    }
    uint nr = pc.n_q * pc.n_heads;
    uint ws0 = pc.view_offset[4] / 4u;
    bool split_out = pc.n_split > 1u;
    if (split_out && part == 0u && r0 + r < n_rows) {
        uint i = ws0 + pc.n_split * nr * D + (split * nr + hk_out_row(r0 + r, kvh)) * 2u;
        ws[i] = m_run;
        ws[i + 1u] = l_run;
    }
    // without a split every row saw key 0, and its largest P is 1: l >= 1
    float f = split_out ? 1.0 : 1.0 / l_run;
#ifdef HK_COOPMAT
    [[unroll]] for (uint k = 0; k < 4 / TPR; k++)
        Ash[r * 4u + part * (4u / TPR) + k] = vec4(f);
    barrier();
    scale_o();
    // out through Ssh, BC columns at a time
    const uint TILES = BC / 16;
    CM_UNROLL for (uint g = 0; g < (D / 16 + TILES - 1) / TILES; g++) {
        CM_UNROLL for (uint mr = 0; mr < MR; mr++)
            CM_UNROLL for (uint k = 0; k < TILES; k++)
                if (g * TILES + k < D / 16)
                    CM_STORE4(oacc[mr][g * TILES + k], Ssh, ((CM_SUBGROUP * MR + mr) * 16u * SSTR + k * 16u) / 4u,
                              SSTR / 4u, CM_ROWS);
        barrier();
        for (uint e = tid; e < BR * BC; e += WG) {
            uint rr = e / BC, c = e % BC, col = g * BC + c;
            if (col < D && r0 + rr < n_rows) {
                uint orow = hk_out_row(r0 + rr, kvh);
                if (split_out)
                    ws[ws0 + (split * nr + orow) * D + col] = S_(rr * SSTR + c);
                else
                    o[pc.view_offset[3] / 4u + orow * D + col] = S_(rr * SSTR + c);
            }
        }
        barrier();
    }
#else
    if (r0 + r < n_rows) {
        uint orow = hk_out_row(r0 + r, kvh);
        uint base = split_out ? ws0 + (split * nr + orow) * D : pc.view_offset[3] / 4u + orow * D;
        [[unroll]] for (uint i = 0; i < D / 4 / TPR; i++) {
            vec4 v = oreg[i] * f;
            uint c = 4u * (part + TPR * i);
            if (split_out) {
                ws[base + c] = v.x;
                ws[base + c + 1u] = v.y;
                ws[base + c + 2u] = v.z;
                ws[base + c + 3u] = v.w;
            } else {
                o[base + c] = v.x;
                o[base + c + 1u] = v.y;
                o[base + c + 2u] = v.z;
                o[base + c + 3u] = v.w;
            }
        }
    }
#endif
}
