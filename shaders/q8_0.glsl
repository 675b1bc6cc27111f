// GGUF Q8_0 decode: block of 32 = f16 d, i8 qs[32] (34 bytes = 17 u16). Expects the weights
// declared as `uint16_t w16[]`.
#define HK_Q8_0_U16 17u
#define HK_UNIT_VALUES 32u

// Dot of unit u (= block u) of the row starting at u16 index row16 with x[xi .. xi+31].
float hk_unit_dot(uint row16, uint u, uint xi)
{
    uint b = row16 + u * HK_Q8_0_U16;
    float acc = 0.0;
    for (uint i = 0; i < 16; i++) {
        uint w = uint(w16[b + 1 + i]);
        acc += float(hk_lo_i8(w)) * hk_x(xi + 2 * i) + float(hk_hi_i8(w)) * hk_x(xi + 2 * i + 1);
    }
    return hk_half(uint(w16[b])) * acc;
}

uint hk_row_u16(uint k) { return (k / 32u) * HK_Q8_0_U16; }
