// Rotary position embedding's angles (rope.comp, and the Q/K projection's epilogue in
// matvec.comp's HK_QKV_ROPE): pair i turns by pos * f_i turns, f_i = freq_scale/(2 pi) *
// theta^(-2i/rot_dim) / factor_i. f_i is formed as a double-float (about 46 bits): the host passes
// freq_scale/(2 pi) and theta^(-2 * 2^b / rot_dim) (b = 0..3) as float pairs, the shader squares
// the last for b = 4..6 and multiplies the powers named by the bits of i (Dekker products: exact
// without a fused multiply-add, kept exact by `precise`). pos * f_i mod 1 is then taken in
// integers: each float of the pair is mantissa * 2^e, the 32x24-bit product is exact, and its bits
// below the binary point give the turn as a 32-bit fraction, so the integer part drops out however
// large pos is. Sine and cosine of the remainder come from polynomials on a quarter turn (Vulkan
// only promises 2^-11 for sin/cos). The angle error is about 2e-13 * pos * |f_i| turns: ~1e-7 rad
// at pos 2^20 and ~2e-6 rad at pos 2^24 for frequencies up to 1 rad per position.
// The includer declares the push block (pc.turns: vec2, pc.pow2: vec2[4]; the caches' pc.k_row,
// k_head, v_row, v_head) and the caches kc, kc16, vc, vc16, and defines HK_ROPE_HAS_FACTORS,
// HK_ROPE_FACTOR(i) and the caches' view indices HK_ROPE_K_VIEW, HK_ROPE_V_VIEW; the cache type is
// HK_CACHE_F32, HK_CACHE_F16 or HK_CACHE_Q8_0.
// ---- double-float arithmetic (value = x + y, |y| <= ulp(x)/2) ----
vec2 quick_two_sum(float a, float b)
{
    precise float s = a + b;
    precise float e = b - (s - a);
    return vec2(s, e);
}

// a * b = p + e exactly: Veltkamp splits into 12-bit halves, whose products are exact.
vec2 two_prod(float a, float b)
{
    precise float p = a * b;
    precise float ca = 4097.0 * a;
    precise float ah = ca - (ca - a);
    precise float al = a - ah;
    precise float cb = 4097.0 * b;
    precise float bh = cb - (cb - b);
    precise float bl = b - bh;
    precise float e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    return vec2(p, e);
}

vec2 df_mul(vec2 a, vec2 b)
{
    vec2 p = two_prod(a.x, b.x);
    precise float e = p.y + (a.x * b.y + a.y * b.x);
    return quick_two_sum(p.x, e);
}

vec2 df_div(vec2 a, float b)
{
    precise float q1 = a.x / b; // any rounding: the remainder below corrects it
    vec2 p = two_prod(q1, b);
    precise float r = ((a.x - p.x) - p.y) + a.y;
    precise float q2 = r / b;
    return quick_two_sum(q1, q2);
}

// frac(pos * x) as a 32-bit fraction of a turn (x = mantissa * 2^e; pos * mantissa exact in 64 bits)
uint turn_fraction(uint pos, float x)
{
    uint bits = floatBitsToUint(x);
    uint e8 = (bits >> 23) & 0xFFu;
    if (e8 == 0u) // zero or subnormal: below 2^-126 turns per position
        return 0u;
    uint hi, lo;
    umulExtended(pos, (bits & 0x7FFFFFu) | 0x800000u, hi, lo);
    int s = 150 - int(e8); // pos * x = (hi:lo) * 2^-s; the fraction is bits s-32 .. s-1
    uint f;
    if (s <= 0)
        f = 0u; // an integer number of turns
    else if (s < 32)
        f = lo << uint(32 - s);
    else if (s == 32)
        f = lo;
    else if (s < 64)
        f = (lo >> uint(s - 32)) | (hi << uint(64 - s));
    else if (s == 64)
        f = hi;
    else if (s < 96)
        f = hi >> uint(s - 64);
    else
        f = 0u;
    return (bits >> 31) != 0u ? 0u - f : f;
}

// (cos, sin) of u / 2^32 turns
vec2 cos_sin_turns(uint u)
{
    uint quadrant = (u + 0x20000000u) >> 30; // the nearest quarter turn
    int rem = int(u - (quadrant << 30));      // [-2^29, 2^29): at most an eighth of a turn
    // uncontracted, so that every kernel that rotates has the same angles, bit for bit
    precise float a = float(rem) * 1.4629180792671596e-09; // 2 pi / 2^32
    precise float a2 = a * a;
    // Taylor to a^9 and a^10: truncation below 2e-9 on [-pi/4, pi/4]
    precise float s = a * (1.0 + a2 * (-1.0 / 6.0 + a2 * (1.0 / 120.0 + a2 * (-1.0 / 5040.0 + a2 * (1.0 / 362880.0)))));
    precise float c =
        1.0 + a2 * (-0.5 + a2 * (1.0 / 24.0 + a2 * (-1.0 / 720.0 + a2 * (1.0 / 40320.0 - a2 / 3628800.0))));
    switch (quadrant & 3u) {
    case 0u: return vec2(c, s);
    case 1u: return vec2(-s, c);
    case 2u: return vec2(-c, -s);
    default: return vec2(s, -c);
    }
}

// (cos, sin) of pair i at position pos: the includer's pc.turns and pc.pow2, and where
// HK_ROPE_HAS_FACTORS, HK_ROPE_FACTOR(i)
vec2 pair_cos_sin(uint pos, uint i)
{
    vec2 f = pc.turns, p = pc.pow2[3];
    for (uint b = 0; b < 7u; b++) {
        if (b < 4u)
            p = pc.pow2[b];
        else
            p = df_mul(p, p); // theta^(-2 * 2^b / rot_dim) from b - 1's
        if (((i >> b) & 1u) != 0u)
            f = df_mul(f, p);
    }
    if (HK_ROPE_HAS_FACTORS)
        f = df_div(f, HK_ROPE_FACTOR(i));
    return cos_sin_turns(turn_fraction(pos, f.x) + turn_fraction(pos, f.y));
}

// The byte offset of kv head `head`'s row `pos` in the K cache, or the V cache
uint rope_cache_row(bool is_v, uint head, uint pos)
{
    return is_v ? pc.view_offset[HK_ROPE_V_VIEW] + head * pc.v_head + pos * pc.v_row
                : pc.view_offset[HK_ROPE_K_VIEW] + head * pc.k_head + pos * pc.k_row;
}

#if defined(HK_CACHE_F32) || defined(HK_CACHE_F16)
// Value d of the cache row at byte rb, converted to the cache type (f16: round to nearest even)
void rope_cache_store(bool is_v, uint rb, uint d, float x)
{
#ifdef HK_CACHE_F16
    if (is_v)
        vc16[rb / 2u + d] = uint16_t(hk_f16_bits(x));
    else
        kc16[rb / 2u + d] = uint16_t(hk_f16_bits(x));
#else
    if (is_v)
        vc[rb / 4u + d] = x;
    else
        kc[rb / 4u + d] = x;
#endif
}
#endif

// A pair (x0, x1) turned by cs = (cos, sin): its first value x0 cos - x1 sin, or its second
// x0 sin + x1 cos.
// Uncontracted, so that every kernel that rotates gives the same bits.
float rope_rotated(float x0, float x1, vec2 cs, bool first)
{
    precise float a = x0 * (first ? cs.x : cs.y);
    precise float b = x1 * (first ? cs.y : cs.x);
    precise float r = first ? a - b : a + b;
    return r;
}

