#version 450
#extension GL_GOOGLE_include_directive : require
// Activation quantizer f32 -> GGUF Q8_1 blocks (q8_1.glsl has the rules). Eight invocations per
// 32-value block, each reading four consecutive values and writing one word of the quants (the
// first of the eight also the block's d and s).
#include "common.glsl"
#include "q8_1.glsl"

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Y { uint y[]; };

HK_PUSH_BEGIN
    uint blocks;
HK_PUSH_END

void main()
{
    uint group = hk_group_id();
    if (group * (WG / 8u) >= pc.blocks) // the whole workgroup past the end
        return;
    uint word = group * WG + gl_LocalInvocationID.x, blk = word / 8u;
    // invocations past the last block quantize zeros: the workgroup's barriers need every one
    bool live = blk < pc.blocks;
    uint xb = pc.view_offset[0] / 4u + word * 4u, yb = pc.view_offset[1] / 4u + blk * 9u;
    vec4 v = vec4(0.0);
    if (live)
        v = vec4(x[xb], x[xb + 1u], x[xb + 2u], x[xb + 3u]);
    uint head, packed = hk_q8_1_quad(v, head);
    if (!live)
        return;
    y[yb + 1u + word % 8u] = packed;
    if (word % 8u == 0u)
        y[yb] = head;
}
