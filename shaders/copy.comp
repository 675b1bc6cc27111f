#version 450
#extension GL_GOOGLE_include_directive : require
// dst = src in 16-byte words; a grid-stride loop over `words`.
#include "common.glsl"

layout(binding = 0) readonly buffer Src { uvec4 src[]; };
layout(binding = 1) writeonly buffer Dst { uvec4 dst[]; };

HK_PUSH_BEGIN
    uint words;
HK_PUSH_END

void main()
{
    uint s = pc.view_offset[0] / 16u, d = pc.view_offset[1] / 16u;
    uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * WG;
    for (uint i = hk_group_id() * WG + gl_LocalInvocationID.x; i < pc.words; i += stride)
        dst[d + i] = src[s + i];
}
