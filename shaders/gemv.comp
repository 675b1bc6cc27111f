#version 450
#extension GL_GOOGLE_include_directive : require
// f32 GEMV y[t, :] = W[rows, k] . x[t, :] for t < tokens (the MoE router gate). One workgroup per
// row and block of up to TB tokens: the row's weights are read once for the block, with one
// accumulator per token.
#define HK_NO_WORKGROUP_SUM
#include "common.glsl"

// Tokens per workgroup (src/kernels/gemv.c, GEMV_TOKENS): acc's initializer and HK_ACC_ALL
// (tokens 1..7) spell out each.
#define TB 8u

layout(binding = 0) readonly buffer Weights { float w[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };

HK_PUSH_BEGIN
    uint rows;
    uint k;
    uint tokens;
HK_PUSH_END

// Each token's subgroup sums, [subgroup][token] (sized for subgroups of one lane).
shared float partial[WG * TB];

// Every output, whatever the block's token count, is the same sum: this invocation's products
// w * x in order of i, one subgroupAdd, then the subgroups' sums in order. The token statements
// are written out rather than looped, so no loop adds to lavapipe's count per invocation.
#define HK_ACC(j) acc[j] += wv * x[xb + (j) * pc.k + i];
#define HK_ACC_IF(j) if ((j) < nt) HK_ACC(j)
#define HK_ACC_ALL(A) A(1) A(2) A(3) A(4) A(5) A(6) A(7)
#define HK_SUM(j) { float s = subgroupAdd(acc[j]); if (subgroupElect()) partial[gl_SubgroupID * TB + (j)] = s; }
// nt is the workgroup's: the subgroup sums stay in uniform control flow
#define HK_SUM_IF(j) if ((j) < nt) HK_SUM(j)

void main()
{
    uint g = hk_group_id(), row = g % pc.rows, t0 = g / pc.rows * TB;
    if (t0 >= pc.tokens)
        return;
    uint nt = min(TB, pc.tokens - t0), lid = gl_LocalInvocationID.x;
    uint wb = pc.view_offset[0] / 4u + row * pc.k, xb = pc.view_offset[1] / 4u + t0 * pc.k;
    float acc[TB] = float[TB](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    // one loop per kind of block: a single token (decode) and a full block run without a test
    // per token, a tail block tests each token past the first
    if (nt == 1u) {
        for (uint i = lid; i < pc.k; i += WG) {
            float wv = w[wb + i];
            HK_ACC(0)
        }
    } else if (nt == TB) {
        for (uint i = lid; i < pc.k; i += WG) {
            float wv = w[wb + i];
            HK_ACC(0) HK_ACC_ALL(HK_ACC)
        }
    } else {
        for (uint i = lid; i < pc.k; i += WG) {
            float wv = w[wb + i];
            HK_ACC(0) HK_ACC_ALL(HK_ACC_IF)
        }
    }
    HK_SUM(0) HK_ACC_ALL(HK_SUM_IF)
    barrier();
    if (lid < nt) {
        float total = 0.0;
        for (uint i = 0; i < gl_NumSubgroups; i++)
            total += partial[i * TB + lid];
        y[pc.view_offset[2] / 4u + (t0 + lid) * pc.rows + row] = total;
    }
}
