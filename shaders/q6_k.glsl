// GGUF Q6_K decode: super-block of 256 = u8 ql[128], u8 qh[64], i8 scales[16], f16 d
// (210 bytes = 105 u16). Value 128*n + 32*g + l (n: half, g: 0..3, l: 0..31) is
// d * scales[8n + 2g + l/16] * (q - 32), q = nibble of ql[64n + 32*(g&1) + l] (high nibble when
// g >= 2) | ((qh[32n + l] >> 2g) & 3) << 4. A unit is one such (n, g): 32 values.
#define HK_Q6_K_U16 105u
#define HK_UNIT_VALUES 32u

#include "w16.glsl"

float hk_unit_dot(uint row16, uint u, uint xi)
{
    uint b = row16 + (u >> 3) * HK_Q6_K_U16;
    uint n = (u & 7u) >> 2, g = u & 3u;
    uint ql = 64u * n + 32u * (g & 1u), qh = 128u + 32u * n;
    uint lshift = (g >> 1) * 4u, hshift = 2u * g;
    float acc[2] = float[2](0.0, 0.0);
    for (uint l = 0; l < 32; l++) {
        int q = int(((hk_byte(b, ql + l) >> lshift) & 0xFu) | (((hk_byte(b, qh + l) >> hshift) & 3u) << 4)) - 32;
        acc[l >> 4] += float(q) * hk_x(xi + l);
    }
    uint s = 192u + 8u * n + 2u * g;
    float sc0 = float(int(hk_byte(b, s) << 24) >> 24), sc1 = float(int(hk_byte(b, s + 1u) << 24) >> 24);
    return hk_half(uint(w16[b + 104u])) * (sc0 * acc[0] + sc1 * acc[1]);
}

uint hk_row_u16(uint k) { return (k / 256u) * HK_Q6_K_U16; }
