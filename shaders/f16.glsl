// f32 -> f16 bits, round to nearest even, exactly as the C reference hk_f32_to_f16 (src/ref/f16.c):
// overflow to inf, subnormals, NaN quieted keeping sign and top payload bits. GLSL's
// packHalf2x16 leaves the rounding mode to the implementation, so caches written here use this.
#ifndef HK_F16_GLSL
#define HK_F16_GLSL
uint hk_f16_bits(float f)
{
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u;
    uint e8 = (x >> 23) & 0xFFu;
    uint mant = x & 0x7FFFFFu;
    if (e8 == 0xFFu)
        return mant == 0u ? sign | 0x7C00u : sign | 0x7E00u | (mant >> 13);
    int e = int(e8) - 127 + 15;
    if (e >= 31)
        return sign | 0x7C00u;
    if (e <= 0) {
        if (e < -10)
            return sign;
        mant |= 0x800000u;
        uint shift = uint(14 - e); // 14..24
        uint h = mant >> shift;
        uint rem = mant & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (h & 1u) != 0u))
            h++;
        return sign | h;
    }
    uint h = (uint(e) << 10) | (mant >> 13);
    uint rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u))
        h++;
    return sign | h;
}

// f16 bits (low 16 bits of h) -> the bits of the f32 of the same value, exactly as the C reference
// hk_f16_to_f32 (src/ref/f16.c): subnormals kept (Vulkan lets unpackHalf2x16 flush them to zero),
// a NaN's sign and payload kept. In integer arithmetic, so that no device can change a bit.
uint hk_f16_to_f32_bits(uint h)
{
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu)
        return sign | 0x7F800000u | (m << 13);
    if (e == 0u) {
        if (m == 0u)
            return sign;
        int top = findMSB(m); // 0..9: the value m * 2^-24 is 1.f * 2^(top - 24)
        return sign | (uint(top + 103) << 23) | ((m << uint(23 - top)) & 0x7FFFFFu);
    }
    return sign | ((e + 112u) << 23) | (m << 13);
}
float hk_half_exact(uint h) { return uintBitsToFloat(hk_f16_to_f32_bits(h)); }
#endif
