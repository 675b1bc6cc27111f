#version 450
#extension GL_GOOGLE_include_directive : require
#if !defined(HK_REDUCE) && !defined(HK_NO_SHUFFLE)
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
// Scaled dot-product attention by flash-decoding (hk_sdpa_blk). Variants by define:
//   default     one workgroup per (kv head, chunk of HK_R query rows, split of the keys). The rows
//               are the query heads of the kv head (times the queries), so each K/V row is read
//               once for all of them. The workgroup is cut into key groups of HK_LPK lanes (one
//               subgroup holds whole key groups): a key group takes HK_KB keys at a time and its
//               lanes span the row in 16-byte chunks, each lane keeping the same chunks of q and
//               of the output accumulator in registers. Per batch a lane issues the loads of the
//               K and V chunks of all HK_KB keys before using any (no branch between them), sums
//               its partial Q.K over the key group's lanes (subgroup shuffles), and runs the
//               online softmax and P.V on its own chunks: no barrier and no shared memory in the
//               key loop. The key groups' (max, sum, acc) are merged through shared memory at the
//               end of the split.
//               One split: the output directly. Several: the split's partial (max, sum, acc[d])
//               goes to the workspace; with F_SINGLE the last split to finish combines them (see
//               "Arrival" below) in the same dispatch, else the HK_REDUCE pass does.
//   HK_REDUCE   the combine pass: one workgroup per (kv head, chunk of rows).
//   HK_NO_SHUFFLE  for devices without subgroup shuffles: the key groups' sums by subgroupAdd.
// Cache types HK_F32, HK_F16 (HK_WIDE: 16-byte loads, for 16-byte aligned views and strides) and
// HK_Q8_0 (GGUF blocks read as 16-bit words, a lane taking a quarter block). Any subgroup size of
// at least HK_LPK (the host's choice).
// The number of keys comes from the push constants or from a u32 on the device (replay); the
// splits divide whatever count is read, and rows at or past it are never read.
// Softmax in base 2: q is scaled by scale * log2(e) once, so every exponential is an exp2.
// F_Q8_1: the output rows are written as GGUF Q8_1 blocks (q8_1.glsl, as hk_quantize_q8_1 makes
// them from the f32 rows): each writer stages its rows' f32 values in shared memory, then an
// invocation per block quantizes them.
//
// Arrival (F_SINGLE): the workspace holds, per (kv head, row chunk), a generation word G, an
// arrival word W and one flag per split. Every workgroup reads G when it starts; when its partial
// is written it sets its flag to flag_of(G, split) (release), adds 1 to W, and reads the flags of
// the splits that hold keys (acquire). The adds on W are ordered: the one that comes last
// follows every other workgroup's flag, so at least that workgroup sees all flags set and
// combines; any other that sees them all set combines the same partials into the same bytes.
// Each combiner then adds 1 to G, so the next call's flags differ from this call's. G changes
// only after every workgroup of the call has read it (all flags set), so a call agrees on G.
// Nothing needs initialising: whatever the workspace holds (poison, zeros, another shape's
// partials), a stale flag matches only if it happens to equal flag_of(G, split), which no earlier
// call of this layout wrote and a uniform fill never equals.
#include "common.glsl"
#define HK_Q8_1_BLOCK_ONLY
#include "q8_1.glsl"

layout(constant_id = 1) const uint HK_D = 128;     // head_dim
layout(constant_id = 2) const uint HK_R = 4;       // query rows per workgroup: 1, 2, 4 or 8
layout(constant_id = 3) const uint HK_LPK = 16;    // lanes per key: a power of 2, <= the subgroup size
layout(constant_id = 4) const uint HK_KB = 8;      // keys per key group and batch
layout(constant_id = 5) const uint HK_WORK = 4096; // floats of the merge array: a multiple of HK_R * HK_D

layout(binding = 0) readonly buffer Q { float q[]; };
layout(binding = 1) readonly buffer K16 { uint16_t k16[]; };
layout(binding = 1) readonly buffer K128 { uvec4 k128[]; };
layout(binding = 1) readonly buffer KF { float kf[]; };
layout(binding = 1) readonly buffer KF4 { vec4 kf4[]; };
layout(binding = 2) readonly buffer V16 { uint16_t v16[]; };
layout(binding = 2) readonly buffer V128 { uvec4 v128[]; };
layout(binding = 2) readonly buffer VF { float vf[]; };
layout(binding = 2) readonly buffer VF4 { vec4 vf4[]; };
layout(binding = 3) writeonly buffer Out { float o[]; };
layout(binding = 3) writeonly buffer OutQ { uint oq[]; }; // F_Q8_1: [rows x head_dim / 32] blocks of 9 words
layout(binding = 4) coherent buffer Workspace { float ws[]; };
layout(binding = 4) coherent buffer WorkspaceU { uint wsu[]; };
layout(binding = 5) readonly buffer Counter { uint counter[]; };

HK_PUSH_BEGIN
    uint n_q;
    uint n_heads;
    uint group;       // n_heads / n_kv_heads
    uint seq_k;       // keys, when there is no counter
    uint flags;       // F_*
    uint capacity;
    uint n_splits;    // fixed at record time (from kv.capacity), whatever the count
    uint split_align; // a split's keys are a multiple of this (but the last)
    uint split_min;   // keys a split may be raised to, where that keeps the active splits within SB
    uint n_chunks;    // row chunks per kv head
    uint k_row, k_head, v_row, v_head; // byte strides (0 where unused)
    float scale_log2; // scale * log2(e)
HK_PUSH_END

const uint F_COUNTER = 1u, F_CAUSAL = 2u, F_DIRECT = 4u, F_SINGLE = 8u, F_Q8_1 = 16u;
const float NEG = -3.0e38; // the running max before any key: finite, so max - max is never NaN

// The number of keys: the counter (clamped to 1..capacity, and >= n_q when causal) or seq_k.
uint hk_seq_k()
{
    uint s = (pc.flags & F_COUNTER) != 0u ? counter[pc.view_offset[5] / 4u] : pc.seq_k;
    uint lo = (pc.flags & F_CAUSAL) != 0u ? max(pc.n_q, 1u) : 1u;
    return clamp(s, lo, pc.capacity);
}

// Splits whose partials the combine reads with one batch of loads.
const uint SB = 16u;

// Keys per split: the count shared over the splits, raised toward split_min only as far as keeps
// the splits that hold keys within one combine batch (SB), then rounded up to split_align. A short
// count so wakes few splits, each running few key batches. Splits from ceil(seq_k / chunk) on hold
// no keys; every workgroup agrees on this.
uint hk_chunk(uint seq_k)
{
    uint per = (seq_k + pc.n_splits - 1u) / pc.n_splits, few = (seq_k + SB - 1u) / SB;
    uint keys = max(per, min(few, pc.split_min));
    return (keys + pc.split_align - 1u) / pc.split_align * pc.split_align;
}

// Workspace: acc [rows][splits][d], (max, sum) [rows][splits][2] (rows = n_q * n_heads), then
// per (kv head, row chunk) the arrival words: G, W, flag[splits].
uint hk_ws_acc(uint row, uint split) { return pc.view_offset[4] / 4u + (row * pc.n_splits + split) * HK_D; }
uint hk_ws_ml(uint row, uint split)
{
    return pc.view_offset[4] / 4u + pc.n_q * pc.n_heads * pc.n_splits * HK_D + (row * pc.n_splits + split) * 2u;
}
uint hk_ws_sync(uint g)
{
    return pc.view_offset[4] / 4u + pc.n_q * pc.n_heads * pc.n_splits * (HK_D + 2u) + g * (pc.n_splits + 2u);
}
// The flag split s sets in the call of generation G: never G itself, nor any earlier call's.
uint flag_of(uint g, uint s) { return g ^ (0x9E3779B9u + s); }

uint rr0; // first row of this workgroup within its kv head (row rr: query rr / group, head rr % group)
uint kvh;

bool row_valid(uint r) { return rr0 + r < pc.n_q * pc.group; }
// The output row (query * n_heads + head) of row r.
uint row_out(uint r)
{
    uint rr = rr0 + r;
    return (rr / pc.group) * pc.n_heads + kvh * pc.group + rr % pc.group;
}

// F_Q8_1: the workgroup's output rows as f32, [HK_R][HK_D] (pass 1 reuses its merge array, free
// once the key groups are merged)
#ifndef HK_REDUCE
shared float merge_sh[HK_WORK]; // HK_WORK >= HK_R * HK_D
#define out_sh merge_sh
#else
shared float out_sh[HK_R * HK_D];
#endif

// F_Q8_1: after every row of the workgroup is in out_sh (a barrier), its Q8_1 blocks, an
// invocation per block (HK_D is a multiple of 32 here). Called by every invocation.
void write_q8_1()
{
    barrier();
    uint per_row = HK_D / 32u;
    for (uint e = gl_LocalInvocationID.x; e < HK_R * per_row; e += WG) {
        uint r = e / per_row, blk = e % per_row;
        if (!row_valid(r))
            continue;
        vec4 v[8];
        for (uint j = 0; j < 8u; j++) {
            uint c = r * HK_D + blk * 32u + 4u * j;
            v[j] = vec4(out_sh[c], out_sh[c + 1u], out_sh[c + 2u], out_sh[c + 3u]);
        }
        uint quants[8];
        uint head = hk_q8_1_block(v, quants);
        uint at = pc.view_offset[3] / 4u + (row_out(r) * per_row + blk) * 9u;
        oq[at] = head;
        for (uint j = 0; j < 8u; j++)
            oq[at + 1u + j] = quants[j];
    }
}

// Combines the partials of splits 0 .. n_active-1 into the output rows of this workgroup: an
// invocation per (row, 4 columns), its splits in batches of SB (the loads of a batch issued
// together: the last workgroup's combine is the tail of the call, a few L2 round trips).
void combine(uint n_active)
{
    for (uint e = gl_LocalInvocationID.x; e < HK_R * (HK_D / 4u); e += WG) {
        uint r = e / (HK_D / 4u), dv = e % (HK_D / 4u);
        if (!row_valid(r))
            continue;
        uint row = row_out(r);
        float m = NEG, l = 0.0;
        vec4 a = vec4(0.0);
        for (uint s0 = 0; s0 < n_active; s0 += SB) {
            float ms[SB], ls[SB];
            vec4 x[SB];
            for (uint b = 0; b < SB; b++) { // past the last split: its copy, weighted 0
                uint s = min(s0 + b, n_active - 1u), mi = hk_ws_ml(row, s), ai = hk_ws_acc(row, s) + dv * 4u;
                ms[b] = ws[mi];
                ls[b] = ws[mi + 1u];
                x[b] = vec4(ws[ai], ws[ai + 1u], ws[ai + 2u], ws[ai + 3u]);
            }
            float mb = m;
            for (uint b = 0; b < SB; b++)
                mb = max(mb, ms[b]);
            float alpha = exp2(m - mb);
            a *= alpha;
            l *= alpha;
            for (uint b = 0; b < SB; b++) {
                float w = s0 + b < n_active ? exp2(ms[b] - mb) : 0.0;
                a += w * x[b];
                l += w * ls[b];
            }
            m = mb;
        }
        a /= l; // no guard: l >= 1 for finite inputs (split 0 holds key 0), and a NaN l must reach the row
        if ((pc.flags & F_Q8_1) != 0u) {
            uint c = r * HK_D + dv * 4u;
            out_sh[c] = a.x;
            out_sh[c + 1u] = a.y;
            out_sh[c + 2u] = a.z;
            out_sh[c + 3u] = a.w;
            continue;
        }
        uint b = pc.view_offset[3] / 4u + row * HK_D + dv * 4u;
        o[b] = a.x;
        o[b + 1u] = a.y;
        o[b + 2u] = a.z;
        o[b + 3u] = a.w;
    }
    if ((pc.flags & F_Q8_1) != 0u)
        write_q8_1();
}

#ifndef HK_REDUCE

#if defined(HK_F16)
const uint CD = 8u; // values per chunk: 16 bytes of the row
#elif defined(HK_F32)
const uint CD = 4u;
#elif defined(HK_Q8_0)
const uint CD = 8u; // a quarter block: 8 bytes, and the block's d
#else
#error "define HK_F16, HK_F32 or HK_Q8_0"
#endif
const uint CV = CD / 4u;                           // vec4s per chunk
const uint NC = HK_D / CD;                         // chunks per row
const uint NCL = (NC + HK_LPK - 1u) / HK_LPK;      // chunks per lane
const uint NKG = WG / HK_LPK;                      // key groups
const uint KGB = HK_WORK / (HK_R * HK_D);          // key groups merged per round
const uint DPT = (HK_D + WG - 1u) / WG;            // output columns per invocation

shared float kg_m[NKG * HK_R]; // per key group and row: running max, sum
shared float kg_l[NKG * HK_R];
shared float row_sh[2 * HK_R]; // the workgroup's max and sum per row
shared uint sync_sh[2];        // G; 1 if some flag is not set

uint pair16k(uint b) { return uint(k16[b]) | (uint(k16[b + 1u]) << 16); }
uint pair16v(uint b) { return uint(v16[b]) | (uint(v16[b + 1u]) << 16); }

// Chunk c of the K (V) row at byte rb (relative to the binding), as loaded: f16 and f32 its 16
// bytes; Q8_0 its 8 bytes in .xy and the block's d in .z.
#if defined(HK_F16) && defined(HK_WIDE)
uvec4 load_k(uint rb, uint c) { return k128[rb / 16u + c]; }
uvec4 load_v(uint rb, uint c) { return v128[rb / 16u + c]; }
#elif defined(HK_F16)
uvec4 load_k(uint rb, uint c)
{
    uint b = rb / 2u + c * 8u;
    return uvec4(pair16k(b), pair16k(b + 2u), pair16k(b + 4u), pair16k(b + 6u));
}
uvec4 load_v(uint rb, uint c)
{
    uint b = rb / 2u + c * 8u;
    return uvec4(pair16v(b), pair16v(b + 2u), pair16v(b + 4u), pair16v(b + 6u));
}
#elif defined(HK_F32) && defined(HK_WIDE)
uvec4 load_k(uint rb, uint c) { return floatBitsToUint(kf4[rb / 16u + c]); }
uvec4 load_v(uint rb, uint c) { return floatBitsToUint(vf4[rb / 16u + c]); }
#elif defined(HK_F32)
uvec4 load_k(uint rb, uint c)
{
    uint b = rb / 4u + c * 4u;
    return floatBitsToUint(vec4(kf[b], kf[b + 1u], kf[b + 2u], kf[b + 3u]));
}
uvec4 load_v(uint rb, uint c)
{
    uint b = rb / 4u + c * 4u;
    return floatBitsToUint(vec4(vf[b], vf[b + 1u], vf[b + 2u], vf[b + 3u]));
}
#else
// block c / 4 of 34 bytes (f16 d, 32 signed bytes), its quarter c % 4
uvec4 load_k(uint rb, uint c)
{
    uint b = rb / 2u + (c >> 2) * 17u, s = 1u + (c & 3u) * 4u;
    return uvec4(pair16k(b + s), pair16k(b + s + 2u), uint(k16[b]), 0u);
}
uvec4 load_v(uint rb, uint c)
{
    uint b = rb / 2u + (c >> 2) * 17u, s = 1u + (c & 3u) * 4u;
    return uvec4(pair16v(b + s), pair16v(b + s + 2u), uint(v16[b]), 0u);
}
#endif

// The values of a loaded chunk; returns its scale (Q8_0's d, 1 otherwise), not applied.
float unpack(uvec4 w, out vec4 x[CV])
{
#if defined(HK_F16)
    x[0] = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    x[1] = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
    return 1.0;
#elif defined(HK_F32)
    x[0] = uintBitsToFloat(w);
    return 1.0;
#else
    x[0] = hk_i8x4(w.x);
    x[1] = hk_i8x4(w.y);
    return hk_half(w.z);
#endif
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
    if (split * chunk >= seq_k) // no keys at this count: nobody reads this split
        return;
    uint n_active = (seq_k + chunk - 1u) / chunk;
    bool single = (pc.flags & F_SINGLE) != 0u;
    bool direct = (pc.flags & F_DIRECT) != 0u || (single && n_active == 1u);
    uint sync = hk_ws_sync(rest);
    if (t == 0u) {
        sync_sh[0] = (pc.flags & (F_DIRECT | F_SINGLE)) == F_SINGLE ? wsu[sync] : 0u;
        sync_sh[1] = 0u;
    }
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
    // from here lim[r] ends the keys of this split that row r sees; every valid row sees those
    // below lmin
    uint lmin = key1;
    for (uint r = 0; r < HK_R; r++) {
        lim[r] = min(lim[r], key1);
        if (row_valid(r))
            lmin = min(lmin, lim[r]);
    }

    // this invocation's key group and lane; the lanes of a key group are one subgroup's
    uint lane = gl_SubgroupInvocationID % HK_LPK;
    uint kg = gl_SubgroupID * (gl_SubgroupSize / HK_LPK) + gl_SubgroupInvocationID / HK_LPK;

    // q of this lane's chunks (lane, lane + HK_LPK, ...), times scale * log2(e); 0 past the row
    vec4 qr[HK_R * NCL * CV];
    for (uint r = 0; r < HK_R; r++)
        for (uint i = 0; i < NCL; i++) {
            uint c = lane + i * HK_LPK;
            bool ok = row_valid(r) && c < NC;
            uint b = ok ? pc.view_offset[0] / 4u + row_out(r) * HK_D + c * CD : 0u;
            for (uint u = 0; u < CV; u++) {
                vec4 v = vec4(0.0);
                if (ok)
                    v = vec4(q[b + 4u * u], q[b + 4u * u + 1u], q[b + 4u * u + 2u], q[b + 4u * u + 3u]) * pc.scale_log2;
                qr[(r * NCL + i) * CV + u] = v;
            }
        }

    float m[HK_R], l[HK_R];
    vec4 acc[HK_R * NCL * CV];
    for (uint r = 0; r < HK_R; r++) {
        m[r] = NEG;
        l[r] = 0.0;
    }
    for (uint j = 0; j < HK_R * NCL * CV; j++)
        acc[j] = vec4(0.0);
    uint k_base = pc.view_offset[1] + kvh * pc.k_head, v_base = pc.view_offset[2] + kvh * pc.v_head;
    // the workgroup takes NKG * HK_KB consecutive keys per batch, key group kg its HK_KB of them;
    // the trip count is the workgroup's (shuffles need every lane), at most MAX_CHUNK / (NKG * HK_KB)
    uint span = NKG * HK_KB;
    uint batches = key1 > key0 ? (key1 - key0 + span - 1u) / span : 0u;
    for (uint it = 0; it < batches; it++) {
        uint first = key0 + it * span + kg * HK_KB;
        // every load of the batch first; keys past the split re-read its last row, weighted 0
        uvec4 kr[HK_KB * NCL], vr[HK_KB * NCL];
        for (uint b = 0; b < HK_KB; b++) {
            uint key = min(first + b, key1 - 1u);
            uint kb = k_base + key * pc.k_row, vb = v_base + key * pc.v_row;
            for (uint i = 0; i < NCL; i++) {
                uint c = min(lane + i * HK_LPK, NC - 1u); // lanes past the row: a real chunk, q 0
                kr[b * NCL + i] = load_k(kb, c);
                vr[b * NCL + i] = load_v(vb, c);
            }
        }
        // this lane's share of q . k for each (key, row), then summed over the key group
        float s[HK_KB * HK_R];
        for (uint b = 0; b < HK_KB; b++) {
            for (uint r = 0; r < HK_R; r++)
                s[b * HK_R + r] = 0.0;
            for (uint i = 0; i < NCL; i++) {
                vec4 x[CV];
                float d = unpack(kr[b * NCL + i], x);
                for (uint r = 0; r < HK_R; r++) {
                    float dot_ = 0.0;
                    for (uint u = 0; u < CV; u++)
                        dot_ += dot(qr[(r * NCL + i) * CV + u], x[u]);
                    s[b * HK_R + r] += d * dot_;
                }
            }
        }
#ifndef HK_NO_SHUFFLE
        for (uint o = 1u; o < HK_LPK; o <<= 1)
            for (uint j = 0; j < HK_KB * HK_R; j++)
                s[j] += subgroupShuffleXor(s[j], o);
#else
        if (HK_LPK > 1u) {
            uint slots = gl_SubgroupSize / HK_LPK, mine = gl_SubgroupInvocationID / HK_LPK;
            for (uint j = 0; j < HK_KB * HK_R; j++) {
                float mine_sum = 0.0;
                for (uint k = 0; k < slots; k++) {
                    float v = subgroupAdd(mine == k ? s[j] : 0.0);
                    mine_sum = mine == k ? v : mine_sum;
                }
                s[j] = mine_sum;
            }
        }
#endif
        // online softmax per row: s becomes the weights p
        // (a NaN score makes p, so l, NaN whichever operand max() returns for it)
        for (uint r = 0; r < HK_R; r++) {
            float mb = m[r];
            for (uint b = 0; b < HK_KB; b++)
                mb = first + b < lim[r] ? max(mb, s[b * HK_R + r]) : mb;
            float alpha = exp2(m[r] - mb);
            m[r] = mb;
            float ls = l[r] * alpha;
            for (uint b = 0; b < HK_KB; b++) {
                float p = first + b < lim[r] ? exp2(s[b * HK_R + r] - mb) : 0.0;
                s[b * HK_R + r] = p;
                ls += p;
            }
            l[r] = ls;
            for (uint j = 0; j < NCL * CV; j++)
                acc[r * NCL * CV + j] *= alpha;
        }
        // a key a row does not see (past its causal limit, or a re-read past the split) must not
        // reach its acc even with weight 0: 0 x NaN is NaN. Batches of keys every row sees (all
        // but a split's last) run a copy of the loop without the test, whose branches would
        // keep the compiler from interleaving the products.
        if (first + HK_KB <= lmin) {
            for (uint b = 0; b < HK_KB; b++)
                for (uint i = 0; i < NCL; i++) {
                    vec4 x[CV];
                    float d = unpack(vr[b * NCL + i], x);
                    for (uint r = 0; r < HK_R; r++) {
                        float p = s[b * HK_R + r] * d;
                        for (uint u = 0; u < CV; u++)
                            acc[(r * NCL + i) * CV + u] += p * x[u];
                    }
                }
        } else {
            for (uint b = 0; b < HK_KB; b++)
                for (uint i = 0; i < NCL; i++) {
                    vec4 x[CV];
                    float d = unpack(vr[b * NCL + i], x);
                    for (uint r = 0; r < HK_R; r++) {
                        if (first + b >= lim[r])
                            continue;
                        float p = s[b * HK_R + r] * d;
                        for (uint u = 0; u < CV; u++)
                            acc[(r * NCL + i) * CV + u] += p * x[u];
                    }
                }
        }
    }

    // merge the key groups: the workgroup's max and sum per row, every key group's acc rescaled
    // to that max, then summed over the key groups through shared memory
    if (lane == 0u)
        for (uint r = 0; r < HK_R; r++) {
            kg_m[kg * HK_R + r] = m[r];
            kg_l[kg * HK_R + r] = l[r];
        }
    barrier();
    if (t < HK_R) { // row t's max and sum over the key groups
        float mx = NEG;
        for (uint g = 0; g < NKG; g++)
            mx = max(mx, kg_m[g * HK_R + t]);
        float sum = 0.0;
        for (uint g = 0; g < NKG; g++)
            sum += kg_l[g * HK_R + t] * exp2(kg_m[g * HK_R + t] - mx);
        row_sh[t] = mx;
        row_sh[HK_R + t] = sum;
    }
    barrier();
    float mw[HK_R], lw[HK_R];
    for (uint r = 0; r < HK_R; r++) {
        mw[r] = row_sh[r];
        lw[r] = row_sh[HK_R + r];
        float f = exp2(m[r] - mw[r]);
        for (uint j = 0; j < NCL * CV; j++)
            acc[r * NCL * CV + j] *= f;
    }
    // the key groups' accumulators summed: KGB key groups (all rows) per round
    float tot[HK_R * DPT];
    for (uint j = 0; j < HK_R * DPT; j++)
        tot[j] = 0.0;
    for (uint g0 = 0; g0 < NKG; g0 += KGB) {
        if (kg >= g0 && kg < g0 + KGB)
            for (uint r = 0; r < HK_R; r++)
                for (uint i = 0; i < NCL; i++) {
                    uint c = lane + i * HK_LPK;
                    if (c < NC)
                        for (uint u = 0; u < CV; u++)
                            for (uint e = 0; e < 4u; e++)
                                merge_sh[((kg - g0) * HK_R + r) * HK_D + c * CD + u * 4u + e] =
                                    acc[(r * NCL + i) * CV + u][e];
                }
        barrier();
        uint ng = min(KGB, NKG - g0);
        for (uint r = 0; r < HK_R; r++)
            for (uint j = 0; j < DPT; j++) {
                uint col = t + j * WG;
                if (col < HK_D)
                    for (uint g = 0; g < ng; g++)
                        tot[r * DPT + j] += merge_sh[(g * HK_R + r) * HK_D + col];
            }
        barrier();
    }
    for (uint r = 0; r < HK_R; r++) {
        if (!row_valid(r))
            continue;
        uint row = row_out(r);
        for (uint j = 0; j < DPT; j++) {
            uint col = t + j * WG;
            if (col >= HK_D)
                continue;
            if (direct && (pc.flags & F_Q8_1) != 0u)
                out_sh[r * HK_D + col] = tot[r * DPT + j] / lw[r];
            else if (direct)
                o[pc.view_offset[3] / 4u + row * HK_D + col] = tot[r * DPT + j] / lw[r]; // no guard, as in combine
            else
                ws[hk_ws_acc(row, split) + col] = tot[r * DPT + j];
        }
        if (!direct && t == 0u) {
            ws[hk_ws_ml(row, split)] = mw[r];
            ws[hk_ws_ml(row, split) + 1u] = lw[r];
        }
    }
    if (direct && (pc.flags & F_Q8_1) != 0u)
        write_q8_1();
    if (direct || !single)
        return;

    // arrival (see the top): flag, W, then the flags of the active splits
    uint g = sync_sh[0];
    memoryBarrierBuffer();
    barrier();
    if (t == 0u) {
        atomicExchange(wsu[sync + 2u + split], flag_of(g, split));
        memoryBarrierBuffer();
        atomicAdd(wsu[sync + 1u], 1u);
        memoryBarrierBuffer();
    }
    barrier();
    memoryBarrierBuffer();
    bool all_set = true;
    for (uint s = t; s < n_active; s += WG)
        all_set = all_set && wsu[sync + 2u + s] == flag_of(g, s);
    if (!all_set)
        sync_sh[1] = 1u;
    barrier();
    if (sync_sh[1] != 0u)
        return;
    memoryBarrierBuffer();
    combine(n_active);
    if (t == 0u)
        atomicAdd(wsu[sync], 1u);
}

#else // HK_REDUCE

void main()
{
    uint rest = hk_group_id();
    kvh = rest / pc.n_chunks;
    rr0 = (rest % pc.n_chunks) * HK_R;
    if (kvh >= pc.n_heads / pc.group)
        return;
    uint seq_k = hk_seq_k(), chunk = hk_chunk(seq_k);
    combine((seq_k + chunk - 1u) / chunk);
}
#endif
