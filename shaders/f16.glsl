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
#endif
