#version 450
#extension GL_GOOGLE_include_directive : require
// Merges the key chunks of flash.comp (n_split > 1): per output row, the chunks' unnormalised O
// with their (m, l) from the workspace, in base 2: m = max m_s, w_s = 2^(m_s - m),
// out = sum w_s O_s / sum w_s l_s. Chunk 0 holds key 0, which every row sees, so the sum of
// w_s l_s is at least 1. One workgroup per output row (query token, query head).
#include "common.glsl"
#include "flash_push.glsl"

layout(constant_id = 1) const uint D = 128;

layout(binding = 3) writeonly buffer Ob { float o[]; };
layout(binding = 4) readonly buffer Wb { float ws[]; };

void main()
{
    uint nr = pc.n_q * pc.n_heads, row = hk_group_id();
    if (row >= nr)
        return;
    uint ws0 = pc.view_offset[4] / 4u, ml = ws0 + pc.n_split * nr * D;
    float m = -1e30;
    for (uint s = 0; s < pc.n_split; s++)
        m = max(m, ws[ml + (s * nr + row) * 2u]);
    float l = 0.0;
    for (uint s = 0; s < pc.n_split; s++)
        l += ws[ml + (s * nr + row) * 2u + 1u] * exp2(ws[ml + (s * nr + row) * 2u] - m);
    for (uint c = gl_LocalInvocationIndex; c < D; c += WG) {
        float acc = 0.0;
        for (uint s = 0; s < pc.n_split; s++)
            acc += ws[ws0 + (s * nr + row) * D + c] * exp2(ws[ml + (s * nr + row) * 2u] - m);
        o[pc.view_offset[3] / 4u + row * D + c] = acc / l;
    }
}
