#version 450
#extension GL_GOOGLE_include_directive : require
#if defined(HK_INT8) && !defined(HK_SCALAR_DOT)
#extension GL_EXT_spirv_intrinsics : require
#endif
// Dense quantized matvec y[rows] = W[rows, k] . x[k], W in GGUF blocks (HK_Q8_0 / HK_Q4_K /
// HK_Q6_K), x and y f32. Two layouts of the work:
//   default       one workgroup per row: invocations stride over the row's 32-value units, then
//                 a subgroup + shared-memory reduction (portable: any subgroup size, 2-byte
//                 aligned weights, 4-byte aligned x);
//   HK_SUBGROUP_ROWS  each subgroup computes HK_NROWS rows, so every x value a lane loads serves
//                 HK_NROWS rows; wide loads (16-byte aligned x, and Q4_K weights); a subgroup-only
//                 reduction. Needs full subgroups (the host requires them at pipeline creation).
//   HK_INT8       subgroup rows with x given as Q8_1 blocks (hk_quantize_q8_1): packed int8 dot
//                 products of the weight quants with the activation quants (dot.glsl).
#include "common.glsl"

layout(binding = 0) readonly buffer Weights { uint16_t w16[]; };
layout(binding = 0) readonly buffer Weights128 { uvec4 w128[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) readonly buffer XQ { uint xq[]; }; // HK_INT8: Q8_1 blocks of 9 words
layout(binding = 2) writeonly buffer Y { float y[]; };

#ifndef HK_NROWS
#define HK_NROWS 4
#endif

HK_PUSH_BEGIN
    uint rows;
    uint k;
HK_PUSH_END

uint x_base;
float hk_x(uint i) { return x[x_base + i]; }
// subgroup rows: each lane's partial sums, and the byte offset of each row's weights
float acc[HK_NROWS];
uint row_byte[HK_NROWS];

#ifdef HK_INT8
#include "dot.glsl"
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
void main()
{
    x_base = pc.view_offset[1] / 4u;
    uint row_bytes = hk_row_u16(pc.k) * 2u, items = hk_items(pc.k);
    uint row_groups = (pc.rows + HK_NROWS - 1u) / HK_NROWS;
    // a grid-stride loop over groups of rows: the host caps the workgroup count near what the
    // device holds at once, so subgroups live long rather than launching in many short waves
    uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumSubgroups;
    for (uint group = hk_group_id() * gl_NumSubgroups + gl_SubgroupID; group < row_groups; group += stride) {
        uint first = group * HK_NROWS;
        for (uint r = 0; r < HK_NROWS; r++) {
            acc[r] = 0.0;
            // rows past the end read the last row and are not written
            row_byte[r] = pc.view_offset[0] + min(first + r, pc.rows - 1u) * row_bytes;
        }
        for (uint it = gl_SubgroupInvocationID; it < items; it += gl_SubgroupSize)
            hk_item(it);
        for (uint r = 0; r < HK_NROWS; r++) {
            float sum = subgroupAdd(acc[r]);
            if (subgroupElect() && first + r < pc.rows)
                y[pc.view_offset[2] / 4u + first + r] = sum;
        }
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
