#version 450
#extension GL_GOOGLE_include_directive : require
// Scaled dot-product attention by flash-decoding (hk_sdpa_blk). Two passes, variants by define:
//   default     pass 1: one workgroup per (kv head, chunk of HK_R query rows, split of the keys).
//               The rows are the n_heads/n_kv_heads query heads of the kv head (times the queries),
//               so each K/V row is read once for all of them. Keys go in tiles of WG: Q.K with
//               HK_LPK invocations per key (each a share of the 16-byte chunks of the row, so one
//               subgroup load covers a few whole rows), the partial dots summed through shared
//               memory; then one invocation per key for the softmax (the tile's max per row by
//               subgroup + shared reduction, an online rescale of the running max, sum and
//               accumulators); then P.V with invocations across the V row (4 values each) and key
//               groups over the keys. The split ends with its partial (max, sum, acc[d]) in the
//               workspace, or, when there is only one split, the normalised output.
//   HK_REDUCE   pass 2: a workgroup per (output row, HK_DB x 4 columns) combines the partials of
//               the splits that held keys, its invocations spread over the splits.
// Loads come in batches with no branch between them (indices clamped to a row the tile holds),
// so a GPU issues a batch before it waits: an in-order core would otherwise wait on each load.
// Cache types HK_F32, HK_F16 (HK_WIDE: 16-byte loads, for 16-byte aligned views and strides) and
// HK_Q8_0 (GGUF blocks read as 16-bit words). Any subgroup size; no subgroup-size control.
// The number of keys comes from the push constants or from a u32 on the device (replay); the
// splits divide whatever count is read, and rows at or past it are never read.
// Softmax in base 2: q is scaled by scale * log2(e) once, so every exponential is an exp2.
#include "common.glsl"

layout(constant_id = 1) const uint HK_D = 128;     // head_dim

layout(binding = 0) readonly buffer Q { float q[]; };
layout(binding = 1) readonly buffer K16 { uint16_t k16[]; };
layout(binding = 1) readonly buffer K128 { uvec4 k128[]; };
layout(binding = 1) readonly buffer KF { float kf[]; };
layout(binding = 1) readonly buffer KF4 { vec4 kf4[]; };
layout(binding = 2) readonly buffer V16 { uint16_t v16[]; };
layout(binding = 2) readonly buffer V64 { uvec2 v64[]; };
layout(binding = 2) readonly buffer VF { float vf[]; };
layout(binding = 2) readonly buffer VF4 { vec4 vf4[]; };
layout(binding = 3) writeonly buffer Out { float o[]; };
layout(binding = 4) buffer Workspace { float ws[]; };
layout(binding = 5) readonly buffer Counter { uint counter[]; };

HK_PUSH_BEGIN
    uint n_q;
    uint n_heads;
    uint group;       // n_heads / n_kv_heads
    uint seq_k;       // keys, when there is no counter
    uint flags;       // F_COUNTER | F_CAUSAL | F_DIRECT
    uint capacity;
    uint n_splits;    // fixed at record time (from kv.capacity), whatever the count
    uint split_align; // a split's keys are a multiple of this (but the last)
    uint n_chunks;    // row chunks per kv head
    uint k_row, k_head, v_row, v_head; // byte strides (0 where unused)
    float scale_log2; // scale * log2(e)
HK_PUSH_END

const uint F_COUNTER = 1u, F_CAUSAL = 2u, F_DIRECT = 4u;
const float NEG = -3.0e38; // the running max before any key: finite, so max - max is never NaN

// The number of keys: the counter (clamped to 1..capacity, and >= n_q when causal) or seq_k.
uint hk_seq_k()
{
    uint s = (pc.flags & F_COUNTER) != 0u ? counter[pc.view_offset[5] / 4u] : pc.seq_k;
    uint lo = (pc.flags & F_CAUSAL) != 0u ? max(pc.n_q, 1u) : 1u;
    return clamp(s, lo, pc.capacity);
}

// Keys per split: the count shared over the splits, rounded up to split_align. Splits from
// ceil(seq_k / chunk) on hold no keys; both passes agree on this.
uint hk_chunk(uint seq_k)
{
    uint per = (seq_k + pc.n_splits - 1u) / pc.n_splits;
    return (per + pc.split_align - 1u) / pc.split_align * pc.split_align;
}

// Workspace: acc [rows][splits][d], then (max, sum) [rows][splits][2]; rows = n_q * n_heads.
uint hk_ws_acc(uint row, uint split) { return pc.view_offset[4] / 4u + (row * pc.n_splits + split) * HK_D; }
uint hk_ws_ml(uint row, uint split)
{
    return pc.view_offset[4] / 4u + pc.n_q * pc.n_heads * pc.n_splits * HK_D + (row * pc.n_splits + split) * 2u;
}

#ifndef HK_REDUCE

layout(constant_id = 2) const uint HK_R = 4;       // query rows per workgroup: 1, 2, 4 or 8
layout(constant_id = 3) const uint HK_LPK = 4;     // invocations per key in Q.K: 1, 2 or 4
layout(constant_id = 4) const uint HK_WORK = 2048; // floats of the work array (host-computed)
layout(constant_id = 5) const uint HK_KB = 2;      // keys per Q.K load batch (divides HK_LPK)

#if defined(HK_F16)
const uint CD = 8u;  // values per Q.K chunk: 16 bytes of the row
#elif defined(HK_F32)
const uint CD = 4u;
#elif defined(HK_Q8_0)
const uint CD = 16u; // half a block
#else
#error "define HK_F16, HK_F32 or HK_Q8_0"
#endif
const uint NC = HK_D / CD;       // chunks per row
const uint NCL = (NC + HK_LPK - 1u) / HK_LPK; // chunks per lane and key
const uint VB = 8u;              // keys per P.V load batch
const uint TK = WG;              // keys per tile: one per invocation in the softmax step
const uint NSLOT = WG / HK_LPK;  // keys scored at once in Q.K
const uint DL = HK_D / 4u;       // invocations across a V row in P.V (4 values each)
const uint KG = WG / DL;         // key groups in P.V

shared vec4 q_sh[HK_R * HK_D / 4u];  // the rows' q, times scale * log2(e)
shared float red_sh[HK_R * WG];      // per row, one value per subgroup
shared float p_sh[TK * HK_R];        // the tile's probabilities [key][row]
shared float work[HK_WORK];          // Q.K partial dots [lane][row][key], later the P.V reduction

uint pair16(uint b) { return uint(k16[b]) | (uint(k16[b + 1u]) << 16); }

// The 16 bytes of chunk c of the K row at byte rb (relative to the binding), as loaded; `scale`
// is the Q8_0 block's d (1 otherwise).
uvec4 load_k(uint rb, uint c, out float scale)
{
    scale = 1.0;
#if defined(HK_F16) && defined(HK_WIDE)
    return k128[rb / 16u + c];
#elif defined(HK_F16)
    uint b = rb / 2u + c * 8u;
    return uvec4(pair16(b), pair16(b + 2u), pair16(b + 4u), pair16(b + 6u));
#elif defined(HK_F32) && defined(HK_WIDE)
    return floatBitsToUint(kf4[rb / 16u + c]);
#elif defined(HK_F32)
    uint b = rb / 4u + c * 4u;
    return floatBitsToUint(vec4(kf[b], kf[b + 1u], kf[b + 2u], kf[b + 3u]));
#else
    uint b = rb / 2u + (c >> 1) * 17u; // block of 34 bytes: f16 d, 32 signed bytes
    scale = hk_half(uint(k16[b]));
    b += 1u + (c & 1u) * 8u;
    return uvec4(pair16(b), pair16(b + 2u), pair16(b + 4u), pair16(b + 6u));
#endif
}

// The CD values of a loaded chunk.
void unpack_k(uvec4 w, out vec4 kc[CD / 4u])
{
#if defined(HK_F16)
    kc[0] = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    kc[1] = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
#elif defined(HK_F32)
    kc[0] = uintBitsToFloat(w);
#else
    for (uint i = 0; i < 4u; i++)
        kc[i] = hk_i8x4(w[i]);
#endif
}

// Values 4*dl .. 4*dl+3 of the V row at byte rb.
vec4 load_v(uint rb, uint dl)
{
#if defined(HK_F16) && defined(HK_WIDE)
    uvec2 w = v64[rb / 8u + dl];
    return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
#elif defined(HK_F16)
    uint b = rb / 2u + dl * 4u;
    return vec4(hk_half(uint(v16[b])), hk_half(uint(v16[b + 1u])), hk_half(uint(v16[b + 2u])),
                hk_half(uint(v16[b + 3u])));
#elif defined(HK_F32) && defined(HK_WIDE)
    return vf4[rb / 16u + dl];
#elif defined(HK_F32)
    uint b = rb / 4u + dl * 4u;
    return vec4(vf[b], vf[b + 1u], vf[b + 2u], vf[b + 3u]);
#else
    uint b = rb / 2u + (dl >> 3) * 17u;
    float d = hk_half(uint(v16[b]));
    b += 1u + (dl & 7u) * 2u;
    uint w0 = uint(v16[b]), w1 = uint(v16[b + 1u]);
    return d * vec4(hk_lo_i8(w0), hk_hi_i8(w0), hk_lo_i8(w1), hk_hi_i8(w1));
#endif
}

uint rr0;  // first row of this workgroup within its kv head (row rr = query rr / group, head rr % group)
uint kvh;

bool row_valid(uint r) { return rr0 + r < pc.n_q * pc.group; }
// The output row (query * n_heads + head) of row r.
uint row_out(uint r)
{
    uint rr = rr0 + r;
    return (rr / pc.group) * pc.n_heads + kvh * pc.group + rr % pc.group;
}

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint gid = hk_group_id();
    uint split = gid % pc.n_splits, rest = gid / pc.n_splits;
    kvh = rest / pc.n_chunks;
    rr0 = (rest % pc.n_chunks) * HK_R;
    if (kvh >= pc.n_heads / pc.group)
        return;
    uint seq_k = hk_seq_k(), chunk = hk_chunk(seq_k);
    if (split * chunk >= seq_k) // no keys at this count: pass 2 does not read this split
        return;
    bool causal = (pc.flags & F_CAUSAL) != 0u;
    // keys each row sees (0 for rows past the end); the workgroup stops at the last one
    uint lim[HK_R];
    uint kend = 0u;
    for (uint r = 0; r < HK_R; r++) {
        uint query = (rr0 + r) / pc.group;
        lim[r] = !row_valid(r) ? 0u : causal ? seq_k - pc.n_q + query + 1u : seq_k;
        kend = max(kend, lim[r]);
    }
    uint key0 = split * chunk, key1 = min(min(key0 + chunk, seq_k), kend);

    for (uint e = t; e < HK_R * HK_D / 4u; e += WG) {
        uint r = e / (HK_D / 4u);
        vec4 v = vec4(0.0);
        if (row_valid(r)) {
            uint b = pc.view_offset[0] / 4u + row_out(r) * HK_D + (e % (HK_D / 4u)) * 4u;
            v = vec4(q[b], q[b + 1u], q[b + 2u], q[b + 3u]) * pc.scale_log2;
        }
        q_sh[e] = v;
    }
    barrier();

    float m_run[HK_R], l_own[HK_R], s_own[HK_R];
    vec4 acc[HK_R];
    for (uint r = 0; r < HK_R; r++) {
        m_run[r] = NEG;
        l_own[r] = 0.0;
        acc[r] = vec4(0.0);
    }
    uint slot = t / HK_LPK, lane = t % HK_LPK;
    uint kg = t / DL, dl = t % DL;
    uint k_base = pc.view_offset[1] + kvh * pc.k_head, v_base = pc.view_offset[2] + kvh * pc.v_head;
    // at most MAX_CHUNK / WG tiles (the host bounds the keys per split)
    uint tiles = key1 > key0 ? (key1 - key0 + TK - 1u) / TK : 0u;
    for (uint tile = 0; tile < tiles; tile++) {
        uint base = key0 + tile * TK, n = min(TK, key1 - base);
        // Q.K: slot scores keys slot, slot + NSLOT, ...; its HK_LPK lanes take every
        // HK_LPK-th chunk of the row. A lane writes its partial dots to its own plane of
        // `work`, at a column swizzled by the lane so the lanes of one slot hit different banks.
        for (uint k0 = 0; k0 < HK_LPK; k0 += HK_KB) {
            if (k0 * NSLOT >= n) // the same for the whole workgroup; `work` past n is never read
                break;
            uvec4 raw[HK_KB * NCL];
            float scl[HK_KB * NCL];
            for (uint kb = 0; kb < HK_KB; kb++) { // keys past the tile re-read its last row
                uint rb = k_base + (base + min(slot + (k0 + kb) * NSLOT, n - 1u)) * pc.k_row;
                for (uint i = 0; i < NCL; i++)
                    raw[kb * NCL + i] = load_k(rb, min(lane + i * HK_LPK, NC - 1u), scl[kb * NCL + i]);
            }
            for (uint kb = 0; kb < HK_KB; kb++) {
                float s[HK_R];
                for (uint r = 0; r < HK_R; r++)
                    s[r] = 0.0;
                for (uint i = 0; i < NCL; i++) {
                    uint c = lane + i * HK_LPK;
                    if (c < NC) {
                        vec4 kc[CD / 4u];
                        unpack_k(raw[kb * NCL + i], kc);
                        for (uint r = 0; r < HK_R; r++) {
                            uint qi = (r * HK_D + c * CD) / 4u;
                            float d = 0.0;
                            for (uint u = 0; u < CD / 4u; u++)
                                d += dot(q_sh[qi + u], kc[u]);
                            s[r] += scl[kb * NCL + i] * d;
                        }
                    }
                }
                uint col = (slot + (k0 + kb) * NSLOT) ^ (lane << 3);
                for (uint r = 0; r < HK_R; r++)
                    work[(lane * HK_R + r) * TK + col] = s[r];
            }
        }
        barrier();
        // softmax: invocation t owns key base + t
        bool in_tile = t < n;
        for (uint r = 0; r < HK_R; r++) {
            float v = 0.0;
            for (uint l = 0; l < HK_LPK; l++)
                v += work[(l * HK_R + r) * TK + (t ^ (l << 3))];
            s_own[r] = in_tile && base + t < lim[r] ? v : NEG;
            float mx = subgroupMax(s_own[r]);
            if (subgroupElect())
                red_sh[r * WG + gl_SubgroupID] = mx;
        }
        barrier();
        for (uint r = 0; r < HK_R; r++) {
            float mt = NEG;
            for (uint g = 0; g < gl_NumSubgroups; g++)
                mt = max(mt, red_sh[r * WG + g]);
            float m_new = max(m_run[r], mt);
            float alpha = exp2(m_run[r] - m_new);
            m_run[r] = m_new;
            float p = in_tile && base + t < lim[r] ? exp2(s_own[r] - m_new) : 0.0;
            l_own[r] = l_own[r] * alpha + p;
            acc[r] *= alpha;
            p_sh[t * HK_R + r] = p;
        }
        barrier();
        // P.V: key group kg takes keys kg, kg + KG, ...; its DL invocations span the V row. The
        // next tile writes p_sh only after a barrier every invocation reaches after this loop.
        if (kg < KG) {
            for (uint j0 = kg; j0 < n; j0 += KG * VB) {
                vec4 vv[VB];
                for (uint b = 0; b < VB; b++) // keys past the tile re-read its last row, weighted 0
                    vv[b] = load_v(v_base + (base + min(j0 + b * KG, n - 1u)) * pc.v_row, dl);
                for (uint b = 0; b < VB; b++) {
                    uint j = j0 + b * KG;
                    for (uint r = 0; r < HK_R; r++)
                        acc[r] += (j < n ? p_sh[min(j, n - 1u) * HK_R + r] : 0.0) * vv[b];
                }
            }
        }
    }

    // the sums over the workgroup; the accumulators of key groups 1.. into key group 0
    for (uint r = 0; r < HK_R; r++) {
        float v = subgroupAdd(l_own[r]);
        if (subgroupElect())
            red_sh[r * WG + gl_SubgroupID] = v;
    }
    if (kg > 0u && kg < KG)
        for (uint r = 0; r < HK_R; r++)
            for (uint i = 0; i < 4u; i++)
                work[((kg - 1u) * HK_R + r) * HK_D + dl * 4u + i] = acc[r][i];
    barrier();
    if (kg != 0u)
        return;
    for (uint r = 0; r < HK_R; r++) {
        if (!row_valid(r))
            continue;
        float l = 0.0;
        for (uint g = 0; g < gl_NumSubgroups; g++)
            l += red_sh[r * WG + g];
        vec4 a = acc[r];
        for (uint g = 1; g < KG; g++) {
            uint w = ((g - 1u) * HK_R + r) * HK_D + dl * 4u;
            a += vec4(work[w], work[w + 1u], work[w + 2u], work[w + 3u]);
        }
        uint row = row_out(r);
        if ((pc.flags & F_DIRECT) != 0u) {
            uint b = pc.view_offset[3] / 4u + row * HK_D + dl * 4u;
            a = l > 0.0 ? a / l : vec4(0.0);
            o[b] = a.x;
            o[b + 1u] = a.y;
            o[b + 2u] = a.z;
            o[b + 3u] = a.w;
        } else {
            uint b = hk_ws_acc(row, split) + dl * 4u;
            ws[b] = a.x;
            ws[b + 1u] = a.y;
            ws[b + 2u] = a.z;
            ws[b + 3u] = a.w;
            if (dl == 0u) {
                ws[hk_ws_ml(row, split)] = m_run[r];
                ws[hk_ws_ml(row, split) + 1u] = l;
            }
        }
    }
}

#else // HK_REDUCE

layout(constant_id = 2) const uint HK_DB = 8; // output columns per workgroup, in vec4s
const uint SG = WG / HK_DB;                   // split groups
const uint SB = 8u;                           // splits per load batch

// Splits are at most 1024 (the host's SDPA_MAX_SPLITS).
shared float w_sh[1024];
shared vec4 part_sh[WG];

void main()
{
    uint blocks = (HK_D / 4u + HK_DB - 1u) / HK_DB;
    uint g = hk_group_id(), t = gl_LocalInvocationID.x;
    uint row = g / blocks, blk = g % blocks;
    if (row >= pc.n_q * pc.n_heads)
        return;
    uint seq_k = hk_seq_k(), chunk = hk_chunk(seq_k);
    uint n_active = min((seq_k + chunk - 1u) / chunk, min(pc.n_splits, 1024u));
    // each split's weight exp2(m_s - max); the total sum
    float mx = NEG;
    for (uint s = t; s < n_active; s += WG)
        mx = max(mx, ws[hk_ws_ml(row, s)]);
    mx = hk_workgroup_max(mx);
    float l = 0.0;
    for (uint s = t; s < n_active; s += WG) {
        uint m = hk_ws_ml(row, s);
        float w = exp2(ws[m] - mx);
        w_sh[s] = w;
        l += w * ws[m + 1u];
    }
    l = hk_workgroup_sum(l); // its barriers also publish w_sh
    // invocation (sg, db) sums splits sg, sg + SG, ... of column dv
    uint sg = t / HK_DB, db = t % HK_DB, dv = blk * HK_DB + db;
    vec4 a = vec4(0.0);
    if (sg < SG && dv < HK_D / 4u) {
        for (uint s0 = sg; s0 < n_active; s0 += SG * SB) {
            vec4 x[SB];
            for (uint b = 0; b < SB; b++) {
                uint i = hk_ws_acc(row, min(s0 + b * SG, n_active - 1u)) + dv * 4u;
                x[b] = vec4(ws[i], ws[i + 1u], ws[i + 2u], ws[i + 3u]);
            }
            for (uint b = 0; b < SB; b++) {
                uint s = s0 + b * SG;
                a += (s < n_active ? w_sh[min(s, n_active - 1u)] : 0.0) * x[b];
            }
        }
    }
    part_sh[t] = a;
    barrier();
    if (sg == 0u && dv < HK_D / 4u) {
        for (uint g2 = 1; g2 < SG; g2++)
            a += part_sh[g2 * HK_DB + db];
        a = l > 0.0 ? a / l : vec4(0.0);
        uint o0 = pc.view_offset[3] / 4u + row * HK_D + dv * 4u;
        o[o0] = a.x;
        o[o0 + 1u] = a.y;
        o[o0 + 2u] = a.z;
        o[o0 + 3u] = a.w;
    }
}
#endif
