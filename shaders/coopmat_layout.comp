#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
// Where a 16x16 f32 accumulator of KHR cooperative matrices keeps each element on this device:
// the matrix of row * 16 + column loaded from shared memory, and lane l of subgroup 0 writes its
// element e to out[l * 8 + e] (e < 8 and below its count) and its element count to out[WG * 8 + l]. The layout is
// implementation-defined; src/runtime/context.c reads it when a context is created.
#include "common.glsl"

layout(binding = 0) writeonly buffer Ob { float o[]; };

HK_PUSH_BEGIN
HK_PUSH_END

shared float ids[256];

void main()
{
    for (uint i = gl_LocalInvocationIndex; i < 256u; i += WG)
        ids[i] = float(i);
    barrier();
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> m;
    coopMatLoad(m, ids, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    uint lane = gl_SubgroupInvocationID, n = uint(m.length()), base = pc.view_offset[0] / 4u;
    if (gl_SubgroupID == 0u) {
        for (uint e = 0; e < 8u; e++)
            if (e < n)
                o[base + lane * 8u + e] = m[e];
        o[base + WG * 8u + lane] = float(n);
    }
}
