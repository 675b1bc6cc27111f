// GGUF Q4_K decode: super-block of 256 = f16 d, f16 dmin, u8 scales[12], u8 qs[128]
// (144 bytes = 72 u16). A unit is one 32-value sub-block j (0..7): value i is
// d*sc_j*q_i - dmin*m_j with q from the low (j even) or high (j odd) nibbles of qs[32*(j/2) ..].
#define HK_Q4_K_U16 72u
#define HK_UNIT_VALUES 32u

#include "w16.glsl"

// 6-bit scale and min of sub-block j from the packed scales[12] at byte 4 of the block
void hk_q4k_scale_min(uint b, uint j, out uint sc, out uint m)
{
    if (j < 4u) {
        sc = hk_byte(b, 4u + j) & 63u;
        m = hk_byte(b, 4u + j + 4u) & 63u;
    } else {
        sc = (hk_byte(b, 4u + j + 4u) & 0xFu) | ((hk_byte(b, 4u + j - 4u) >> 6) << 4);
        m = (hk_byte(b, 4u + j + 4u) >> 4) | ((hk_byte(b, 4u + j) >> 6) << 4);
    }
}

float hk_unit_dot(uint row16, uint u, uint xi)
{
    uint b = row16 + (u >> 3) * HK_Q4_K_U16;
    uint j = u & 7u;
    uint sc, m;
    hk_q4k_scale_min(b, j, sc, m);
    uint q16 = b + 8u + 16u * (j >> 1);
    uint shift = (j & 1u) * 4u;
    float qx = 0.0, xs = 0.0;
    for (uint i = 0; i < 16; i++) {
        uint w = uint(w16[q16 + i]) >> shift;
        float x0 = hk_x(xi + 2 * i), x1 = hk_x(xi + 2 * i + 1);
        qx += float(w & 0xFu) * x0 + float((w >> 8) & 0xFu) * x1;
        xs += x0 + x1;
    }
    return hk_half(uint(w16[b])) * float(sc) * qx - hk_half(uint(w16[b + 1])) * float(m) * xs;
}

uint hk_row_u16(uint k) { return (k / 256u) * HK_Q4_K_U16; }
