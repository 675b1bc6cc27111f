/* f16.c — IEEE binary16 <-> binary32 conversion (reference; see hk_ref.h).
 * Bit-exact, table-free, no reliance on the host FPU's half-precision support.
 * f32 -> f16 rounds to nearest, ties to even; overflow goes to +-inf; values below half the
 * smallest subnormal go to +-0; NaN stays NaN (quieted, sign and top payload bits kept, as
 * x86 F16C and GPU conversions do). */
#include "hk_ref.h"

#include <string.h>

float hk_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    uint32_t bits;

    if (exp == 0x1Fu) {
        /* inf (mant == 0) or NaN (payload shifted into the top of the f32 mantissa) */
        bits = sign | 0x7F800000u | (mant << 13);
    } else if (exp == 0) {
        if (mant == 0) {
            bits = sign; /* +-0 */
        } else {
            /* subnormal: value = mant * 2^-24; normalise so the leading 1 sits at bit 10 */
            int e = 1;
            while ((mant & 0x400u) == 0) {
                mant <<= 1;
                e--;
            }
            mant &= 0x3FFu;
            bits = sign | ((uint32_t)(e + 112) << 23) | (mant << 13);
        }
    } else {
        bits = sign | ((exp + 112u) << 23) | (mant << 13); /* rebias 15 -> 127 */
    }

    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t hk_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);

    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t exp = (x >> 23) & 0xFFu;
    uint32_t mant = x & 0x7FFFFFu;

    if (exp == 0xFFu) {
        if (mant == 0)
            return (uint16_t)(sign | 0x7C00u); /* +-inf */
        return (uint16_t)(sign | 0x7E00u | (mant >> 13)); /* NaN, quieted */
    }

    const int e = (int)exp - 127 + 15; /* f16 biased exponent if the result were normal */

    if (e >= 31)
        return (uint16_t)(sign | 0x7C00u); /* |f| >= 65536: overflow to inf */

    if (e <= 0) {
        /* f16 subnormal (or zero). |f| < 2^-25 (this also covers f32 zeros and subnormals)
         * rounds to zero; 2^-25 itself is a tie and goes to the even value 0. */
        if (e < -10)
            return sign;
        mant |= 0x800000u; /* implicit leading 1 */
        const unsigned shift = (unsigned)(14 - e); /* 14..24 */
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (h & 1u)))
            h++; /* may carry into the smallest normal, 0x0400: still correct */
        return (uint16_t)(sign | h);
    }

    uint32_t h = ((uint32_t)e << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* a carry into the exponent is correct, up to and including 0x7C00 (inf) */
    return (uint16_t)(sign | h);
}
