#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_memory_scope_semantics : require
// MoE slot grouping (hk_moe_expert_rows): one workgroup.
//  1. count the slots of each expert (shared atomics: counts are order-free);
//  2. exclusive prefix of the counts -> offsets, and each expert's write cursor;
//  3. scatter in chunks of WG slots, in slot order: a slot's place is its expert's cursor plus
//     the number of earlier slots of the chunk with the same expert, read from a per-expert
//     bitmask of the chunk's invocations (atomicOr: order-free), so the lists come out ascending
//     and the result is the same on every run.
// Ids >= n_experts are counted in `dropped` and listed nowhere. Loops: n_slots / WG chunks plus
// NE_CAP / WG experts per invocation.
#include "common.glsl"

layout(binding = 0) readonly buffer Ids { uint ids[]; };
layout(binding = 1) writeonly buffer Offsets { uint offs[]; };
layout(binding = 2) writeonly buffer Slots { uint slots[]; };
layout(binding = 3) writeonly buffer Dropped { uint dropped[]; };

// experts the shared arrays hold (>= n_experts, a multiple of 32)
layout(constant_id = 1) const uint NE_CAP = 128;
const uint MW = WG / 32u; // mask words per expert
const uint NONE_SLOT = 0xFFFFFFFFu;
// shared-memory atomics at workgroup scope (plain atomicAdd means device scope, which a device
// with the Vulkan memory model but without vulkanMemoryModelDeviceScope must not see); relaxed:
// the barriers between the phases order them
#define HK_WG_ATOMIC gl_ScopeWorkgroup, gl_StorageSemanticsNone, gl_SemanticsRelaxed

HK_PUSH_BEGIN
    uint n_slots;
    uint n_experts;
HK_PUSH_END

shared uint cursor[NE_CAP];
shared uint masks[NE_CAP * MW];
shared uint partial[WG];
shared uint n_dropped;

void main()
{
    const uint tid = gl_LocalInvocationID.x, n = pc.n_slots, ne = pc.n_experts;
    const uint io = pc.view_offset[0] / 4u, oo = pc.view_offset[1] / 4u, so = pc.view_offset[2] / 4u;
    for (uint e = tid; e < NE_CAP; e += WG)
        cursor[e] = 0u;
    for (uint i = tid; i < NE_CAP * MW; i += WG)
        masks[i] = 0u;
    if (tid == 0u)
        n_dropped = 0u;
    barrier();

    for (uint s = tid; s < n; s += WG) {
        uint e = ids[io + s];
        if (e < ne)
            atomicAdd(cursor[e], 1u, HK_WG_ATOMIC);
        else
            atomicAdd(n_dropped, 1u, HK_WG_ATOMIC);
    }
    barrier();

    // invocation t owns experts [t * per, (t + 1) * per)
    const uint per = (ne + WG - 1u) / WG, e0 = min(tid * per, ne), e1 = min(e0 + per, ne);
    uint own = 0u;
    for (uint e = e0; e < e1; e++)
        own += cursor[e];
    partial[tid] = own;
    barrier();
    uint base = 0u;
    for (uint t = 0u; t < tid; t++)
        base += partial[t];
    for (uint e = e0; e < e1; e++) {
        uint c = cursor[e];
        offs[oo + e] = base;
        cursor[e] = base;
        base += c;
    }
    const uint total = n - n_dropped;
    if (tid == 0u) {
        offs[oo + ne] = total;
        dropped[pc.view_offset[3] / 4u] = n_dropped;
    }
    for (uint s = total + tid; s < n; s += WG)
        slots[so + s] = NONE_SLOT;
    barrier();

    const uint word = tid / 32u, bit = 1u << (tid % 32u);
    for (uint c0 = 0u; c0 < n; c0 += WG) {
        uint s = c0 + tid, e = s < n ? ids[io + s] : ne;
        bool mine = e < ne;
        if (mine)
            atomicOr(masks[e * MW + word], bit, HK_WG_ATOMIC);
        barrier();
        if (mine) {
            uint rank = uint(bitCount(masks[e * MW + word] & (bit - 1u)));
            for (uint w = 0u; w < word; w++)
                rank += uint(bitCount(masks[e * MW + w]));
            slots[so + cursor[e] + rank] = s;
        }
        barrier();
        if (mine) {
            atomicAnd(masks[e * MW + word], ~bit, HK_WG_ATOMIC);
            atomicAdd(cursor[e], 1u, HK_WG_ATOMIC);
        }
        barrier();
    }
}
