#version 450
#extension GL_GOOGLE_include_directive : require
// Activation quantizer f32 -> GGUF Q8_1 blocks: d = amax/127, q = round(x/d) (half away from
// zero, as C's roundf), s = d*sum(q). One invocation per 32-value block; a block is 9 words:
// (f16 d | f16 s << 16), then 32 signed bytes.
#include "common.glsl"

layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 1) writeonly buffer Y { uint y[]; };

HK_PUSH_BEGIN
    uint blocks;
HK_PUSH_END

void main()
{
    uint blk = hk_group_id() * WG + gl_LocalInvocationID.x;
    if (blk >= pc.blocks)
        return;
    uint xb = pc.view_offset[0] / 4u + blk * 32u, yb = pc.view_offset[1] / 4u + blk * 9u;
    float amax = 0.0;
    for (uint i = 0; i < 32; i++)
        amax = max(amax, abs(x[xb + i]));
    float d = amax / 127.0;
    float id = d != 0.0 ? 1.0 / d : 0.0;
    int sum = 0;
    for (uint i = 0; i < 32; i += 4) {
        uint packed = 0u;
        for (uint j = 0; j < 4; j++) {
            float v = x[xb + i + j] * id;
            int q = int(sign(v) * floor(abs(v) + 0.5));
            sum += q;
            packed |= (uint(q) & 0xFFu) << (8u * j);
        }
        y[yb + 1u + i / 4u] = packed;
    }
    y[yb] = packHalf2x16(vec2(d, d * float(sum)));
}
