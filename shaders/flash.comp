#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#if defined(HK_COOPMAT) && !defined(HK_COOPMAT_EMU)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#ifdef HK_COOPMAT
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
// Flash attention for prefill: out = softmax(scale * Q K^T) V per query head, K and V read in
// place from a strided KV cache (HK_KV_F32 / HK_KV_F16 / HK_KV_Q8_0).
//
// A workgroup owns BR rows of one kv head: (query token, query head of the group) pairs, so the
// group's heads share every K/V tile it stages. Its rows are split among units: a unit is one
// subgroup owning MR blocks of 16 rows (HK_COOPMAT), or the whole workgroup (the twin). The
// keys go by in tiles of BKV, staged (K and V, each in its own buffer, rows past seq_k as zeros
// that are never weighted, values of V that are not finite as 0: see vbad) into shared memory by
// the whole workgroup; with PREFETCH the next tile's global loads are issued before the current
// tile's work and stored after it, so their latency hides behind the arithmetic: two workgroup
// barriers per tile. Each unit walks a tile in chunks of BC keys, synchronising only its own
// invocations (a subgroup barrier on the matrix cores), in its own shared-memory region:
//   1. S = Q K^T for its rows and the chunk's keys;
//   2. online softmax, TPR invocations per row: running max m and sum l per row (base-2 logits,
//      scale * log2(e) folded into Q), P = 2^(S - m); masked keys (past the row's causal limit or
//      seq_k) get P = 0. m moves only when a row's maximum grows by more than 2^RESCALE (so P
//      <= 2^RESCALE; the output is the same, O and l being relative to the same m), and then
//      alpha = 2^(m_old - m) rescales O and l;
//   3. O = alpha O + P V.
// Tiles past the workgroup's last visible key are not visited, nor chunks past the unit's
// (matrix cores; the workgroup's elsewhere). Keys may be split in chunks over workgroups
// (n_split > 1): each writes its unnormalised O with (m, l) to the workspace and
// flash_combine.comp merges them.
//
// HK_COOPMAT: the two products on the matrix cores (KHR cooperative matrix, 16x16x16 f16 x f16
// -> f32). A subgroup's O stays in accumulators across the tiles and is rescaled by a matrix
// whose row i holds alpha of row i (component-wise product), skipped when no row of the subgroup
// moved its max. Q (scaled) stays in registers as A matrices (QREG) or in shared memory. Q, K, V
// and P are f16 in shared memory, 8 to a uvec4, S and the factors are f32 in the same uvec4
// array: every matrix load and store starts and strides on 16 bytes, as Vulkan requires
// (VUID-RuntimeSpirv-OpCooperativeMatrixLoadKHR-08986). Needs full subgroups (WG = subgroups x
// subgroup size). P and the factors overwrite the unit's S once every lane has read its S.
// HK_COOPMAT_EMU (with HK_COOPMAT, testing only): the matrix-core arm with its matrix
// operations emulated as the KHR specification defines them (flash_coopmat_emu.glsl) on virtual
// subgroups of 32 invocations synchronised by workgroup barriers, so that a device without
// matrix cores runs this arm's tiling, layouts, strides and staging (the unit-level skips, which
// are workgroup-divergent, are left out: they change no result).
// Default (the portable twin): the same staging, loop, masking and softmax in f32, one unit, the
// products by threads: each thread owns D/TPR columns of its row of O (quads p, p + TPR, ...).
#include "common.glsl"
#include "flash_push.glsl"

layout(constant_id = 1) const uint D = 128;    // head_dim, a multiple of 16
layout(constant_id = 2) const uint BR = 64;    // rows per workgroup
layout(constant_id = 3) const uint BC = 32;    // keys per chunk (HK_COOPMAT: a multiple of 16)
layout(constant_id = 4) const uint FLAGS = 0;  // bit 0: K and V rows start on 16 bytes (vector
                                               // loads); bit 1: Q in registers (HK_COOPMAT);
                                               // bit 2: PREFETCH; bit 3: WG_SYNC; bit 4: RSM;
                                               // bit 5: ZIGZAG
layout(constant_id = 5) const uint MR = 1;     // HK_COOPMAT: 16-row blocks per subgroup
layout(constant_id = 6) const uint BKV = 64;   // keys per staged tile, a multiple of BC

const uint ALIGNED = FLAGS & 1u;
#ifdef HK_COOPMAT
const uint QREG = (FLAGS >> 1) & 1u;
#else
const uint QREG = 0u; // the twin reads Q rows from shared memory
#endif
const uint PREFETCH = (FLAGS >> 2) & 1u;
// Diagnostic (HK_COOPMAT on a device): units synchronise by workgroup barriers and skip nothing
// on their own, as the emulation does
const bool WG_SYNC = ((FLAGS >> 3) & 1u) != 0u;
#ifdef HK_COOPMAT
// The softmax on the accumulators (the register softmax), where they hold the quad layout (see
// rsm_row): the host asks for it where a probe of the device found that layout.
const uint RSM_BIT = (FLAGS >> 4) & 1u; // as a number, for the sizes below
const bool RSM = RSM_BIT != 0u;
#endif
// The row tiles' launch order (flash.c set_order): heaviest first, or the first half heaviest
// first and the second half lightest first
const bool ZIGZAG = ((FLAGS >> 5) & 1u) != 0u;
const float RESCALE = 8.0; // log2 of the largest P

#ifdef HK_COOPMAT
const uint UR = 16u * MR; // rows of a unit
const uint NU = BR / UR;  // units per workgroup
const uint UT = WG / NU;  // invocations per unit: the subgroup size (32 when emulated)
const uint OCTW = 1u;     // array elements (16 bytes) per oct of 8 values
#else
const uint UR = BR;
const uint NU = 1u;
const uint UT = WG;
const uint OCTW = 2u;
#endif
const uint TPR = UT / UR;  // invocations per row in the softmax (and the twin's products)
const uint CPT = BC / TPR; // keys of a chunk per invocation (HK_COOPMAT: a multiple of 8)

layout(binding = 0) readonly buffer Qb { float q[]; };
layout(binding = 0) readonly buffer Qb4 { vec4 q4[]; };
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

// Shared memory: one array of 16-byte elements, in regions
//   Q   BR rows of D values (absent with QREG: Q passes through the start of the array once)
//   K   BKV rows, V  BKV rows
//   U   per unit: S (UR rows of SSTR floats); HK_COOPMAT: then P (UR rows of PSTR8 octs of f16)
//       and the factors (UR rows of 16 floats) over it; P alone for the register softmax
// Rows of D values are padded by 8 values (16 bytes of f16) so that the 8 rows of a 16-byte
// column hit different banks. An oct: 8 values of a row as shared memory holds them (HK_OCT from
// two vec4, HK_OCT_F16 from 8 f16 in a uvec4); HK_PUT8 stores one at element `at`.
const uint STR8 = (D + 8) / 8;  // row stride in octs
const uint SSTR = BC + 4;       // S rows, in floats (a multiple of 4)
const uint PSTR8 = (BC + 8) / 8; // P rows, in octs
const uint Q_BASE = 0u;
const uint K_BASE = QREG != 0u ? 0u : BR * STR8 * OCTW;
const uint V_BASE = K_BASE + BKV * STR8 * OCTW;
const uint U_BASE = V_BASE + BKV * STR8 * OCTW;
#ifdef HK_COOPMAT
const uint F_OFF = UR * PSTR8; // the factors, within a unit's region
// per row: S, or P and the factors; P alone for the register softmax
const uint USZ = UR * (RSM_BIT * PSTR8 + (1u - RSM_BIT) * (SSTR / 4u > PSTR8 + 4u ? SSTR / 4u : PSTR8 + 4u));
// Q in registers passes through the start of the array
const uint U_END = U_BASE + NU * USZ, Q_END = QREG * BR * STR8;
const uint SM_SIZE = Q_END > U_END ? Q_END : U_END;
shared uvec4 sm[SM_SIZE];
#define OCT uvec4
#define HK_OCT(lo, hi)                                                                          \
    uvec4(packFloat2x16(f16vec2((lo).xy)), packFloat2x16(f16vec2((lo).zw)), packFloat2x16(f16vec2((hi).xy)), \
          packFloat2x16(f16vec2((hi).zw)))
#define HK_OCT_F16(u4) (u4)
#define HK_PUT8(at, oct) sm[at] = (oct)
#define S4_(e) uintBitsToFloat(sm[e]) // 4 floats of S at element e
#else
const uint USZ = UR * SSTR / 4u;
shared vec4 sm[U_BASE + USZ];
#define OCT mat2x4
#define HK_OCT(lo, hi) mat2x4(lo, hi)
#define HK_OCT_F16(u4)                                                                          \
    mat2x4(vec4(unpackHalf2x16((u4).x), unpackHalf2x16((u4).y)), vec4(unpackHalf2x16((u4).z), unpackHalf2x16((u4).w)))
#define HK_PUT8(at, oct)                                                                        \
    {                                                                                           \
        sm[at] = (oct)[0];                                                                      \
        sm[(at) + 1u] = (oct)[1];                                                               \
    }
#define S_(i) sm[U_BASE + (i) / 4u][(i) % 4u] // float i of the (one) unit's S
#endif

// The unit of this invocation, its lane in the unit, and how the unit synchronises.
#if defined(HK_COOPMAT) && !defined(HK_COOPMAT_EMU)
#define UNIT gl_SubgroupID
#define LANE gl_SubgroupInvocationID
#define SYNC_UNIT()                                                                             \
    if (WG_SYNC) {                                                                              \
        barrier();                                                                              \
    } else {                                                                                    \
        subgroupMemoryBarrierShared();                                                          \
        subgroupBarrier();                                                                      \
    }
#define HK_UNIT_SUBGROUP 1 // unit-uniform branches are allowed around SYNC_UNIT (unless WG_SYNC)
#elif defined(HK_COOPMAT)
#define UNIT (gl_LocalInvocationIndex / 32u)
#define LANE (gl_LocalInvocationIndex % 32u)
#define SYNC_UNIT() barrier()
#else
#define UNIT 0u
#define LANE gl_LocalInvocationIndex
#define SYNC_UNIT() barrier()
#endif

#ifdef HK_COOPMAT
#ifdef HK_COOPMAT_EMU
#include "flash_coopmat_emu.glsl"
#else
// 16x16 tiles: f16 operands, f32 accumulators. CM_LOAD8 from octs of 8 f16, CM_LOAD4F and
// CM_STORE4 f32 through the same uvec4 array (bit patterns); offsets and strides in elements.
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
#define CM_UNROLL [[unroll]] // the matrices stay in registers
#define CM_LEN(m) uint((m).length())
#define CM_EL(m, e) (m)[e]
#define CM_ACC16 coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define CM_STORE_P(m, arr, off, stride) coopMatStore(CM_ACC16(m), arr, off, stride, CM_ROWS)
float cm_xor(float v, uint x) { return subgroupShuffleXor(v, x); }
#endif
CM_ACC oacc[MR][D / 16];
CM_A qreg[MR][D / 16]; // QREG: the unit's rows of Q (scaled), for the whole walk
CM_ACC sacc[MR][BC / 16]; // S of a chunk
#else
vec4 oreg[D / 4 / TPR]; // row LANE / TPR, quads LANE % TPR + TPR * i
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

// The keys row `row` sees end here.
uint row_lim(uint row, uint sk) { return pc.causal != 0u ? sk - pc.n_q + row / pc.group + 1u : sk; }

uint seq_k_now()
{
    if (pc.seq_k != 0u)
        return pc.seq_k;
    // the host checked 1 <= n_q <= capacity when causal
    return clamp(counter[pc.view_offset[5] / 4u], pc.causal != 0u ? pc.n_q : 1u, pc.capacity);
}

// Staging of key tile j (rows j*BKV .. j*BKV+BKV-1 of K and V of kv head kvh): load_tile issues
// an invocation's global loads into registers (rows at or past sk: zeros, not read), store_tile
// writes them to the K and V regions. The trip counts are constants: every load is issued before
// any of them is waited for.
const uint KV8 = BKV * (D / 8);          // octs of a tile
const uint KV_PER = (KV8 + WG - 1) / WG; // per invocation
OCT kreg[KV_PER], vreg[KV_PER];
void load_tile(uint kvh, uint j, uint sk)
{
    [[unroll]] for (uint i = 0; i < KV_PER; i++) {
        uint e = gl_LocalInvocationIndex + i * WG;
        uint c = e / (D / 8), c8 = (e % (D / 8)) * 8u, key = j * BKV + c;
        kreg[i] = HK_OCT(vec4(0.0), vec4(0.0));
        vreg[i] = kreg[i];
        if (e < KV8 && key < sk) {
            uint bk = pc.view_offset[1] + kvh * pc.k_head + key * pc.k_row;
            HK_LOAD8(kreg[i], K1, k4, bk, c8)
            uint bv = pc.view_offset[2] + kvh * pc.v_head + key * pc.v_row;
            HK_LOAD8(vreg[i], V1, v4, bv, c8)
        }
    }
}

// Values of V that are not finite: P V weights every staged key of a chunk, with P = 0 for the
// keys a row does not see, and 0 x NaN is NaN, so a NaN or inf in V would reach rows that do not
// see its key (the matrix cores cannot leave out a key per row). Staging writes such a value as 0
// and keeps in vbad[c] the least key of the workgroup's walk that holds one in column c (~0u:
// none); the epilogue makes out[row][c] NaN where the row sees that key.
shared uint vbad[D];
#ifdef HK_COOPMAT
// an oct of f16 (value t in half t % 2 of word t / 2)
OCT finite_v(OCT w, uint key, uint c8)
{
    // bit 15 of a half set where its exponent bits (0x7C00) are all set: inf or NaN
    uvec4 bad = ((w & 0x7C007C00u) + 0x04000400u) & 0x80008000u;
    if (any(notEqual(bad, uvec4(0u)))) {
        for (uint t = 0; t < 8u; t++)
            if ((bad[t / 2u] & (0x8000u << (16u * (t % 2u)))) != 0u)
                atomicMin(vbad[c8 + t], key);
        w &= ~((bad >> 15) * 0xFFFFu);
    }
    return w;
}
#else
OCT finite_v(OCT v, uint key, uint c8)
{
    for (uint h = 0; h < 2u; h++) {
        bvec4 bad = equal(floatBitsToUint(v[h]) & 0x7F800000u, uvec4(0x7F800000u)); // inf or NaN
        if (any(bad)) {
            for (uint t = 0; t < 4u; t++)
                if (bad[t])
                    atomicMin(vbad[c8 + 4u * h + t], key);
            v[h] = mix(v[h], vec4(0.0), bad);
        }
    }
    return v;
}
#endif

// seen: the keys every row of the workgroup sees. Only a tile holding a key past it needs V
// checked: a non-finite value of a key every row sees reaches every row through P V as it should.
void store_tile(uint j, uint seen)
{
    bool check = (j + 1u) * BKV > seen;
    [[unroll]] for (uint i = 0; i < KV_PER; i++) {
        uint e = gl_LocalInvocationIndex + i * WG;
        if (e < KV8) {
            uint at = ((e / (D / 8)) * STR8 + e % (D / 8)) * OCTW;
            HK_PUT8(K_BASE + at, kreg[i]);
            // the check in a branch of its own (a select of both costs the matrix path), its
            // result named once (the twin's HK_PUT8 reads its argument twice)
            if (check) {
                OCT v = finite_v(vreg[i], j * BKV + e / (D / 8), (e % (D / 8)) * 8u);
                HK_PUT8(V_BASE + at, v);
            } else {
                HK_PUT8(V_BASE + at, vreg[i]);
            }
        }
    }
}

// out[row][c], v as computed, for a row whose keys end at lim: NaN where V was not finite
float v_checked(float v, uint c, uint lim) { return vbad[c] < lim ? uintBitsToFloat(0x7FC00000u) : v; }

// The epilogue's stores. Output row orow's (m, l) for the combine pass, after every split's O
void put_ml(uint split, uint orow, float m, float l)
{
    uint nr = pc.n_q * pc.n_heads, i = pc.view_offset[4] / 4u + pc.n_split * nr * D + (split * nr + orow) * 2u;
    ws[i] = m;
    ws[i + 1u] = l;
}

// Value col of output row orow: the split's partial O where the keys are split, else the output
void put_out(uint split, uint orow, uint col, float v)
{
    if (pc.n_split > 1u)
        ws[pc.view_offset[4] / 4u + (split * pc.n_q * pc.n_heads + orow) * D + col] = v;
    else
        o[pc.view_offset[3] / 4u + orow * D + col] = v;
}

#ifdef HK_COOPMAT
// S of the unit's rows for chunk c of the staged tile, into sacc: each K matrix loaded once
// serves MR row blocks.
void scores(uint c)
{
    uint u = UNIT;
    CM_UNROLL for (uint mr = 0; mr < MR; mr++)
        CM_UNROLL for (uint cb = 0; cb < BC / 16; cb++)
            sacc[mr][cb] = CM_ZERO;
    CM_UNROLL for (uint kd = 0; kd < D / 16; kd++) {
        CM_A qa[MR];
        CM_UNROLL for (uint mr = 0; mr < MR; mr++) {
            if (QREG != 0u)
                qa[mr] = qreg[mr][kd];
            else
                CM_LOAD8(qa[mr], sm, Q_BASE + (u * UR + mr * 16u) * STR8 + kd * 2u, STR8, CM_ROWS);
        }
        CM_UNROLL for (uint cb = 0; cb < BC / 16; cb++) {
            // B[k][n] = K[key n][dim k]: K's rows are B's columns
            CM_B kb;
            CM_LOAD8(kb, sm, K_BASE + (c * BC + cb * 16u) * STR8 + kd * 2u, STR8, CM_COLS);
            CM_UNROLL for (uint mr = 0; mr < MR; mr++)
                sacc[mr][cb] = CM_MULADD(qa[mr], kb, sacc[mr][cb]);
        }
    }
}

// S into the unit's region (the softmax through shared memory)
void store_scores()
{
    CM_UNROLL for (uint mr = 0; mr < MR; mr++)
        CM_UNROLL for (uint cb = 0; cb < BC / 16; cb++)
            CM_STORE4(sacc[mr][cb], sm, U_BASE + UNIT * USZ + (mr * 16u * SSTR + cb * 16u) / 4u, SSTR / 4u, CM_ROWS);
}

// O = O * (the rows' factors in the unit's region), component-wise.
void scale_o()
{
    CM_UNROLL for (uint mr = 0; mr < MR; mr++) {
        CM_ACC f;
        CM_LOAD4F(f, sm, U_BASE + UNIT * USZ + F_OFF + mr * 64u, 4u, CM_ROWS);
        CM_UNROLL for (uint dt = 0; dt < D / 16; dt++)
            oacc[mr][dt] = CM_MUL(oacc[mr][dt], f);
    }
}

// O += P V for chunk c
void accumulate_pv(uint c)
{
    CM_UNROLL for (uint kc = 0; kc < BC / 16; kc++) {
        CM_A pa[MR];
        CM_UNROLL for (uint mr = 0; mr < MR; mr++)
            CM_LOAD8(pa[mr], sm, U_BASE + UNIT * USZ + mr * 16u * PSTR8 + kc * 2u, PSTR8, CM_ROWS);
        CM_UNROLL for (uint dt = 0; dt < D / 16; dt++) {
            CM_B vb;
            CM_LOAD8(vb, sm, V_BASE + (c * BC + kc * 16u) * STR8 + dt * 2u, STR8, CM_ROWS);
            CM_UNROLL for (uint mr = 0; mr < MR; mr++)
                oacc[mr][dt] = CM_MULADD(pa[mr], vb, oacc[mr][dt]);
        }
    }
}

// The register softmax (RSM): S stays in its accumulators. In the quad layout element e of a
// lane's 16x16 accumulator is row rsm_row(e), column rsm_col(e): a row's 16 columns lie in the 4
// lanes of a quad, so a row's maximum and sum take two exchanges and O is rescaled element by
// element; only P goes through shared memory, as the A operand of P V. Each lane keeps its two
// rows' running max, and the sum over its own columns (a row's lanes rescale alike). The
// layout is implementation-defined: the host asks for this path only where a probe found it.
uint rsm_half(uint e) { return e >> 2; } // which of the lane's two rows
uint rsm_row(uint e) { return (LANE >> 2) + 8u * rsm_half(e); }
uint rsm_col(uint e) { return 8u * ((e >> 1) & 1u) + 2u * (LANE & 3u) + (e & 1u); }
float rsm_m[MR][2], rsm_l[MR][2]; // [row block][half]: rows rsm_row(0) and rsm_row(4)
uint rsm_lim[MR][2];              // the keys those rows see end here

// The softmax of chunk c (its first key key0) on sacc, then O = alpha O + P V.
void rsm_chunk(uint c, uint key0)
{
    uint ub = U_BASE + UNIT * USZ; // the unit's region
    bool full = true; // every key of the chunk visible to both rows of every block
    [[unroll]] for (uint mr = 0; mr < MR; mr++)
        full = full && key0 + BC <= min(rsm_lim[mr][0], rsm_lim[mr][1]);
    float mx[MR][2];
    [[unroll]] for (uint mr = 0; mr < MR; mr++) {
        mx[mr][0] = -1e30;
        mx[mr][1] = -1e30;
    }
    CM_UNROLL for (uint mr = 0; mr < MR; mr++)
        CM_UNROLL for (uint cb = 0; cb < BC / 16; cb++)
            [[unroll]] for (uint e = 0; e < 8u; e++) {
                uint h = rsm_half(e);
                if (full || key0 + cb * 16u + rsm_col(e) < rsm_lim[mr][h])
                    mx[mr][h] = max(mx[mr][h], CM_EL(sacc[mr][cb], e));
            }
    float alpha[MR][2];
    bool moved = false;
    [[unroll]] for (uint mr = 0; mr < MR; mr++)
        [[unroll]] for (uint h = 0; h < 2u; h++) {
            float m = max(mx[mr][h], cm_xor(mx[mr][h], 1u));
            m = max(m, cm_xor(m, 2u));
            float m_new = max(rsm_m[mr][h], m);
            float m_use = m_new > rsm_m[mr][h] + RESCALE ? m_new : rsm_m[mr][h];
            alpha[mr][h] = exp2(rsm_m[mr][h] - m_use);
            moved = moved || alpha[mr][h] != 1.0;
            rsm_m[mr][h] = m_use;
        }
    float lsum[MR][2];
    CM_UNROLL for (uint mr = 0; mr < MR; mr++) {
        lsum[mr][0] = 0.0;
        lsum[mr][1] = 0.0;
        CM_UNROLL for (uint cb = 0; cb < BC / 16; cb++) {
            [[unroll]] for (uint e = 0; e < 8u; e++) {
                uint h = rsm_half(e);
                bool seen = full || key0 + cb * 16u + rsm_col(e) < rsm_lim[mr][h];
                // l sums the P that V is weighted with: rounded to f16 first
                float p = seen ? float(float16_t(exp2(CM_EL(sacc[mr][cb], e) - rsm_m[mr][h]))) : 0.0;
                lsum[mr][h] += p;
                CM_EL(sacc[mr][cb], e) = p;
            }
            CM_STORE_P(sacc[mr][cb], sm, ub + mr * 16u * PSTR8 + cb * 2u, PSTR8);
        }
        rsm_l[mr][0] = rsm_l[mr][0] * alpha[mr][0] + lsum[mr][0];
        rsm_l[mr][1] = rsm_l[mr][1] * alpha[mr][1] + lsum[mr][1];
    }
    if (moved)
        CM_UNROLL for (uint mr = 0; mr < MR; mr++)
            CM_UNROLL for (uint dt = 0; dt < D / 16; dt++)
                [[unroll]] for (uint e = 0; e < 8u; e++)
                    CM_EL(oacc[mr][dt], e) *= alpha[mr][rsm_half(e)];
    SYNC_UNIT(); // P written
    accumulate_pv(c);
    SYNC_UNIT(); // P read before the next chunk writes it
}
#else
// S for this thread's keys of its row in chunk c (the softmax's own mapping).
void scores(uint c)
{
    uint r = LANE / TPR, c0 = (LANE % TPR) * CPT;
    for (uint i = 0; i < CPT; i++) {
        float s = 0.0;
        [[unroll]] for (uint k = 0; k < D / 4; k++)
            s += dot(sm[Q_BASE + 2u * r * STR8 + k], sm[K_BASE + 2u * (c * BC + c0 + i) * STR8 + k]);
        S_(r * SSTR + c0 + i) = s;
    }
}

void accumulate_pv(uint c, float alpha)
{
    uint r = LANE / TPR, p = LANE % TPR;
    if (alpha != 1.0)
        [[unroll]] for (uint i = 0; i < D / 4 / TPR; i++)
            oreg[i] *= alpha;
    for (uint k = 0; k < BC; k++) {
        float pk = S_(r * SSTR + k);
        [[unroll]] for (uint i = 0; i < D / 4 / TPR; i++)
            oreg[i] += pk * sm[V_BASE + 2u * (c * BC + k) * STR8 + p + TPR * i];
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
    // kv heads innermost, then chunks, then the row tiles, last first: under a causal mask the
    // workgroups that see the most keys start first, on every kv head. ZIGZAG: the second half
    // of the row tiles (in launch order) lightest first instead.
    uint kvh = gid % n_kv;
    uint split = (gid / n_kv) % pc.n_split;
    uint t = gid / (n_kv * pc.n_split), half_tiles = (pc.row_tiles + 1u) / 2u;
    uint rt = !ZIGZAG || t < half_tiles ? pc.row_tiles - 1u - t : t - half_tiles;
    uint n_rows = pc.n_q * pc.group, r0 = rt * BR;
    uint sk = seq_k_now();

    // this invocation's unit, softmax row and its keys' exclusive bound; rows past the end act as
    // the last row (computed, never stored)
    uint u = UNIT, lane = LANE;
    uint r = lane / TPR, part = lane % TPR;
    uint urow0 = r0 + u * UR;
    uint row = min(urow0 + r, n_rows - 1u);
    uint lim = row_lim(row, sk);
    uint kend = row_lim(min(r0 + BR - 1u, n_rows - 1u), sk), seen = row_lim(r0, sk);
    uint j0 = split * pc.split_tiles;
    uint j1 = min(j0 + pc.split_tiles, (kend + BKV - 1u) / BKV);
#ifdef HK_UNIT_SUBGROUP
    // chunks at or past the unit's last visible key are skipped (subgroup-uniform)
    uint ulast = min(urow0 + UR - 1u, n_rows - 1u);
    uint skip_from = urow0 >= n_rows ? 0u : row_lim(ulast, sk);
    if (WG_SYNC)
        skip_from = kend;
#else
    uint skip_from = kend;
#endif

    for (uint c = tid; c < D; c += WG)
        vbad[c] = ~0u;
    // the first tile's loads in flight while Q is staged (scaled; f16 on the matrix cores)
    load_tile(kvh, j0, sk);
    bool q_vec = (pc.view_offset[0] & 15u) == 0u;
    [[unroll]] for (uint i = 0; i < (BR * (D / 8) + WG - 1) / WG; i++) {
        uint e = tid + i * WG, rr = e / (D / 8), c8 = (e % (D / 8)) * 8u;
        if (e < BR * (D / 8)) {
            vec4 lo = vec4(0.0), hi = vec4(0.0);
            if (r0 + rr < n_rows) {
                uint qi = pc.view_offset[0] / 4u + hk_out_row(r0 + rr, kvh) * D + c8;
                if (q_vec) {
                    lo = q4[qi / 4u];
                    hi = q4[qi / 4u + 1u];
                } else {
                    lo = vec4(q[qi], q[qi + 1u], q[qi + 2u], q[qi + 3u]);
                    hi = vec4(q[qi + 4u], q[qi + 5u], q[qi + 6u], q[qi + 7u]);
                }
                lo *= pc.scale;
                hi *= pc.scale;
            }
            HK_PUT8(Q_BASE + (rr * STR8 + c8 / 8u) * OCTW, HK_OCT(lo, hi));
        }
    }
#ifdef HK_COOPMAT
    if (QREG != 0u) {
        barrier(); // Q staged at the start of the array
        CM_UNROLL for (uint mr = 0; mr < MR; mr++)
            CM_UNROLL for (uint kd = 0; kd < D / 16; kd++)
                CM_LOAD8(qreg[mr][kd], sm, Q_BASE + (u * UR + mr * 16u) * STR8 + kd * 2u, STR8, CM_ROWS);
        barrier(); // read by every unit before the tiles overwrite it
    }
    CM_UNROLL for (uint mr = 0; mr < MR; mr++)
        CM_UNROLL for (uint dt = 0; dt < D / 16; dt++)
            oacc[mr][dt] = CM_ZERO;
#else
    [[unroll]] for (uint i = 0; i < D / 4 / TPR; i++)
        oreg[i] = vec4(0.0);
#endif
    barrier(); // vbad set before any store_tile
    store_tile(j0, seen);
    barrier(); // Q and the first tile staged

    // finite start: 2^(m_old - m) is 0, not NaN, when the first keys arrive
    float m_run = -1e30, l_run = 0.0;
    uint ub = U_BASE + u * USZ; // the unit's region
#ifdef HK_COOPMAT
    [[unroll]] for (uint mr = 0; mr < MR; mr++)
        [[unroll]] for (uint h = 0; h < 2u; h++) {
            rsm_m[mr][h] = -1e30;
            rsm_l[mr][h] = 0.0;
            rsm_lim[mr][h] = row_lim(min(urow0 + mr * 16u + rsm_row(4u * h), n_rows - 1u), sk);
        }
#endif

    for (uint j = j0; j < j1; j++) {
        bool more = j + 1u < j1;
        if (PREFETCH != 0u && more)
            load_tile(kvh, j + 1u, sk);
        [[dont_unroll]] for (uint c = 0; c < BKV / BC; c++) {
            uint key0 = j * BKV + c * BC;
            if (key0 >= skip_from)
                continue;
            scores(c);
#ifdef HK_COOPMAT
            if (RSM) {
                rsm_chunk(c, key0);
                continue;
            }
            store_scores();
#endif
            SYNC_UNIT(); // S of the unit's rows complete

            uint kk = key0 + part * CPT;
            uint valid = lim > kk ? min(lim - kk, CPT) : 0u; // this invocation's visible keys, a prefix
            float sv[CPT];
#ifdef HK_COOPMAT
            // CPT is a multiple of 8 here: 16-byte reads (rows SSTR/4 = 1 mod 8 elements apart
            // meet no bank conflict)
            [[unroll]] for (uint i = 0; i < CPT; i += 4) {
                vec4 s4 = S4_(ub + (r * SSTR + part * CPT + i) / 4u);
                sv[i] = s4.x;
                sv[i + 1u] = s4.y;
                sv[i + 2u] = s4.z;
                sv[i + 3u] = s4.w;
            }
#else
            [[unroll]] for (uint i = 0; i < CPT; i++)
                sv[i] = S_(r * SSTR + part * CPT + i);
#endif
            float mx = -1e30;
            [[unroll]] for (uint i = 0; i < CPT; i++)
                if (i < valid)
                    mx = max(mx, sv[i]);
            if (TPR > 1u)
                hk_partial[u * UT + lane] = mx;
            SYNC_UNIT(); // the row's partial maxima written; every lane has read its S
            if (TPR > 1u)
                for (uint k = 0; k < TPR; k++)
                    mx = max(mx, hk_partial[u * UT + r * TPR + k]);
            float m_new = max(m_run, mx);
            float m_use = m_new > m_run + RESCALE ? m_new : m_run;
            float alpha = exp2(m_run - m_use);
            m_run = m_use;
            float lsum = 0.0;
#ifdef HK_COOPMAT
            [[unroll]] for (uint i = 0; i < CPT; i += 8) {
                vec4 lo, hi;
                [[unroll]] for (uint k = 0; k < 4; k++) {
                    lo[k] = i + k < valid ? exp2(sv[i + k] - m_run) : 0.0;
                    hi[k] = i + k + 4u < valid ? exp2(sv[i + k + 4u] - m_run) : 0.0;
                }
                // l sums the P that V is weighted with: rounded to f16 first
                lsum += dot(vec4(f16vec4(lo)), vec4(1.0)) + dot(vec4(f16vec4(hi)), vec4(1.0));
                HK_PUT8(ub + r * PSTR8 + (part * CPT + i) / 8u, HK_OCT(lo, hi));
            }
#ifdef HK_UNIT_SUBGROUP
            bool rescale = WG_SYNC || subgroupMin(alpha) != 1.0; // subgroup-uniform: does any row move its max?
#else
            const bool rescale = true;
#endif
            if (rescale)
                [[unroll]] for (uint k = 0; k < 4 / TPR; k++) // TPR <= 4
                    sm[ub + F_OFF + r * 4u + part * (4u / TPR) + k] = floatBitsToUint(vec4(alpha));
#else
            [[unroll]] for (uint i = 0; i < CPT; i++) {
                float p = i < valid ? exp2(sv[i] - m_run) : 0.0;
                lsum += p;
                S_(r * SSTR + part * CPT + i) = p;
            }
#endif
            l_run = l_run * alpha + lsum;
            SYNC_UNIT(); // P and the factors written
#ifdef HK_COOPMAT
            if (rescale)
                scale_o();
            accumulate_pv(c);
#else
            accumulate_pv(c, alpha);
#endif
            SYNC_UNIT(); // P, the factors and the partial maxima read before the next chunk
        }
        if (more) {
            barrier(); // every unit is done with tile j
            if (PREFETCH == 0u)
                load_tile(kvh, j + 1u, sk);
            store_tile(j + 1u, seen);
            barrier(); // tile j + 1 staged
        }
    }

    // epilogue: l over the row's invocations; normalise, or hand (O, m, l) to the combine pass
    bool split_out = pc.n_split > 1u;
#ifdef HK_COOPMAT
    if (RSM) {
        float f[MR][2];
        [[unroll]] for (uint mr = 0; mr < MR; mr++)
            [[unroll]] for (uint h = 0; h < 2u; h++) {
                float l = rsm_l[mr][h] + cm_xor(rsm_l[mr][h], 1u);
                l += cm_xor(l, 2u);
                uint rr = urow0 + mr * 16u + rsm_row(4u * h);
                if (split_out && (LANE & 3u) == 0u && rr < n_rows)
                    put_ml(split, hk_out_row(rr, kvh), rsm_m[mr][h], l);
                f[mr][h] = split_out ? 1.0 : 1.0 / l;
            }
        // each lane writes its elements where they go
        CM_UNROLL for (uint mr = 0; mr < MR; mr++)
            CM_UNROLL for (uint dt = 0; dt < D / 16; dt++)
                [[unroll]] for (uint e = 0; e < 8u; e++) {
                    uint rr = urow0 + mr * 16u + rsm_row(e), col = dt * 16u + rsm_col(e);
                    if (rr < n_rows)
                        put_out(split, hk_out_row(rr, kvh), col,
                                v_checked(CM_EL(oacc[mr][dt], e) * f[mr][rsm_half(e)], col, rsm_lim[mr][rsm_half(e)]));
                }
        return;
    }
#endif
    if (TPR > 1u) {
        hk_partial[u * UT + lane] = l_run;
        SYNC_UNIT();
        l_run = 0.0;
        for (uint k = 0; k < TPR; k++)
            l_run += hk_partial[u * UT + r * TPR + k];
    }
    if (split_out && part == 0u && urow0 + r < n_rows)
        put_ml(split, hk_out_row(urow0 + r, kvh), m_run, l_run);
    // without a split every row saw key 0, and its largest P is at least 1: l >= 1
    float f = split_out ? 1.0 : 1.0 / l_run;
#ifdef HK_COOPMAT
    [[unroll]] for (uint k = 0; k < 4 / TPR; k++)
        sm[ub + F_OFF + r * 4u + part * (4u / TPR) + k] = floatBitsToUint(vec4(f));
    SYNC_UNIT();
    scale_o();
    SYNC_UNIT(); // the factors read before O overwrites them
    // out through the unit's region, BC columns at a time
    const uint TILES = BC / 16;
    CM_UNROLL for (uint g = 0; g < (D / 16 + TILES - 1) / TILES; g++) {
        CM_UNROLL for (uint mr = 0; mr < MR; mr++)
            CM_UNROLL for (uint k = 0; k < TILES; k++)
                if (g * TILES + k < D / 16)
                    CM_STORE4(oacc[mr][g * TILES + k], sm, ub + (mr * 16u * SSTR + k * 16u) / 4u, SSTR / 4u, CM_ROWS);
        SYNC_UNIT();
        for (uint e = lane; e < UR * BC; e += UT) {
            uint rr = e / BC, cc = e % BC, col = g * BC + cc;
            if (col < D && urow0 + rr < n_rows)
                put_out(split, hk_out_row(urow0 + rr, kvh), col,
                        v_checked(uintBitsToFloat(sm[ub + (rr * SSTR + cc) / 4u][cc % 4u]), col, row_lim(urow0 + rr, sk)));
        }
        SYNC_UNIT();
    }
#else
    if (urow0 + r < n_rows) {
        uint orow = hk_out_row(urow0 + r, kvh);
        [[unroll]] for (uint i = 0; i < D / 4 / TPR; i++) {
            vec4 v = oreg[i] * f;
            uint c = 4u * (part + TPR * i);
            for (uint e = 0; e < 4u; e++)
                put_out(split, orow, c + e, v_checked(v[e], c + e, lim));
        }
    }
#endif
}
