/* test_ref.c — checks the plain-C reference layer (src/ref) on its own, no GPU.
 *
 * Every expected value here is computed independently of the code under test: f16 values
 * from their IEEE definition (ldexp), hand-built blocks from the GGUF formulas written out
 * per value index, kernels against double-precision sums. Prints one line per check and
 * finally "N passed, M failed"; exits non-zero if anything failed. */
#include "hk_ref.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- layouts ----------------------------------------------------------------------------------- */
_Static_assert(sizeof(hk_block_q8_0) == 34, "hk_block_q8_0 must be 34 bytes");
_Static_assert(sizeof(hk_block_q8_1) == 36, "hk_block_q8_1 must be 36 bytes");
_Static_assert(sizeof(hk_block_q4_k) == 144, "hk_block_q4_k must be 144 bytes");
_Static_assert(sizeof(hk_block_q5_k) == 176, "hk_block_q5_k must be 176 bytes");
_Static_assert(sizeof(hk_block_q6_k) == 210, "hk_block_q6_k must be 210 bytes");
_Static_assert(offsetof(hk_block_q8_0, qs) == 2, "q8_0 qs offset");
_Static_assert(offsetof(hk_block_q8_1, s) == 2 && offsetof(hk_block_q8_1, qs) == 4, "q8_1 offsets");
_Static_assert(offsetof(hk_block_q4_k, dmin) == 2 && offsetof(hk_block_q4_k, scales) == 4 &&
                   offsetof(hk_block_q4_k, qs) == 16,
               "q4_k offsets");
_Static_assert(offsetof(hk_block_q5_k, dmin) == 2 && offsetof(hk_block_q5_k, scales) == 4 &&
                   offsetof(hk_block_q5_k, qh) == 16 && offsetof(hk_block_q5_k, qs) == 48,
               "q5_k offsets");
_Static_assert(offsetof(hk_block_q6_k, qh) == 128 && offsetof(hk_block_q6_k, scales) == 192 &&
                   offsetof(hk_block_q6_k, d) == 208,
               "q6_k offsets");

/* ---- tiny harness ------------------------------------------------------------------------------ */
typedef struct {
    int passed;
    int failed;
} results;

__attribute__((format(printf, 3, 4))) static void check(results *res, int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok)
        res->passed++;
    else
        res->failed++;
}

/* ---- xorshift64 -------------------------------------------------------------------------------- */
typedef struct {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t x = r->s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    r->s = x;
    return x;
}

static float rng_unit(rng *r) /* [0, 1) */
{
    return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

static float rng_range(rng *r, float lo, float hi)
{
    return lo + (hi - lo) * rng_unit(r);
}

/* ---- independent helpers ----------------------------------------------------------------------- */
static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* binary16 value straight from the IEEE definition (finite patterns only) */
static double f16_value(uint16_t h)
{
    const int e = (h >> 10) & 0x1F;
    const int m = h & 0x3FF;
    const double mag = e == 0 ? ldexp((double)m, -24) : ldexp(1.0 + m / 1024.0, e - 15);
    return (h & 0x8000) ? -mag : mag;
}

static int f16_is_nan(uint16_t h)
{
    return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
}

/* ================================================================================================ */
/* f16                                                                                              */
/* ================================================================================================ */

typedef struct {
    float f;
    uint16_t h;
} f16_case;

static void test_f16(results *res)
{
    /* exactly representable: both directions must be exact (bitwise, so -0 counts) */
    static const f16_case exact[] = {
        {0.0f, 0x0000},          {-0.0f, 0x8000},           {1.0f, 0x3C00},
        {-1.0f, 0xBC00},         {0.5f, 0x3800},            {2.0f, 0x4000},
        {-2.0f, 0xC000},         {1.5f, 0x3E00},            {100.0f, 0x5640},
        {-0.1875f, 0xB200},      {1024.0f, 0x6400},         {65504.0f, 0x7BFF},
        {-65504.0f, 0xFBFF},     {0.333251953125f, 0x3555}, {3.140625f, 0x4248},
        {0.0999755859375f, 0x2E66}, {0x1p-14f, 0x0400},     {0x1p-15f, 0x0200},
        {0x1p-24f, 0x0001},      {-0x1p-24f, 0x8001},       {1023 * 0x1p-24f, 0x03FF},
        {0x1.ffcp-1f, 0x3BFF},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        const uint16_t h = hk_f32_to_f16(exact[i].f);
        const float f = hk_f16_to_f32(exact[i].h);
        if (h != exact[i].h || f32_bits(f) != f32_bits(exact[i].f)) {
            printf("  exact %.9g: got f16 0x%04X want 0x%04X; 0x%04X -> %.9g\n", (double)exact[i].f,
                   h, exact[i].h, exact[i].h, (double)f);
            bad++;
        }
    }
    check(res, bad == 0, "f16 exact round trips of %zu representative values (%d wrong)",
          sizeof exact / sizeof exact[0], bad);

    /* rounding: nearest, ties to even, in the normal range */
    static const f16_case rounding[] = {
        {1.0f + 0x1p-11f, 0x3C00},              /* tie: 1 (even) vs 1+2^-10 */
        {1.0f + 3 * 0x1p-11f, 0x3C02},          /* tie: 0x3C01 (odd) vs 0x3C02 */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},   /* just above the tie */
        {1.0f + 0x1p-11f - 0x1p-20f, 0x3C00},   /* just below the tie */
        {2049.0f, 0x6800},                      /* tie: 2048 vs 2050 */
        {2051.0f, 0x6802},                      /* tie: 2050 (odd) vs 2052 */
        {-2049.0f, 0xE800},
        {-2051.0f, 0xE802},
        {0.1f, 0x2E66},
        {1.0f / 3.0f, 0x3555},
        {65519.0f, 0x7BFF},                     /* below the overflow tie */
        {65520.0f, 0x7C00},                     /* tie 65504 (odd) vs 65536 -> inf */
        {65536.0f, 0x7C00},
        {1e10f, 0x7C00},
        {-1e10f, 0xFC00},
        {0x1.ffep-1f, 0x3C00},                  /* tie between 0x3BFF (odd) and 1.0 */
    };
    bad = 0;
    for (size_t i = 0; i < sizeof rounding / sizeof rounding[0]; i++) {
        const uint16_t h = hk_f32_to_f16(rounding[i].f);
        if (h != rounding[i].h) {
            printf("  round %.9g: got 0x%04X want 0x%04X\n", (double)rounding[i].f, h, rounding[i].h);
            bad++;
        }
    }
    check(res, bad == 0, "f16 round-to-nearest-even incl. ties and overflow (%zu cases, %d wrong)",
          sizeof rounding / sizeof rounding[0], bad);

    /* subnormal range: quantum 2^-24 */
    static const f16_case sub[] = {
        {0x1p-24f, 0x0001},
        {0x1p-25f, 0x0000},                 /* tie 0 (even) vs 1 */
        {0x1p-25f + 0x1p-40f, 0x0001},      /* just above the tie */
        {0x1p-26f, 0x0000},
        {-0x1p-26f, 0x8000},                /* underflow keeps the sign */
        {3 * 0x1p-25f, 0x0002},             /* tie 1 (odd) vs 2 */
        {5 * 0x1p-25f, 0x0002},             /* tie 2 (even) vs 3 */
        {7 * 0x1p-25f, 0x0004},             /* tie 3 (odd) vs 4 */
        {1.25f * 0x1p-24f, 0x0001},
        {1.75f * 0x1p-24f, 0x0002},
        {0x1p-14f - 0x1p-25f, 0x0400},      /* tie 0x3FF (odd) vs smallest normal */
        {0x1p-14f - 0x1p-24f, 0x03FF},
        {100 * 0x1p-24f, 0x0064},
        {-100 * 0x1p-24f, 0x8064},
        {1e-40f, 0x0000},                   /* f32 subnormal */
        {-1e-40f, 0x8000},
    };
    bad = 0;
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        const uint16_t h = hk_f32_to_f16(sub[i].f);
        if (h != sub[i].h) {
            printf("  subnormal %.9g: got 0x%04X want 0x%04X\n", (double)sub[i].f, h, sub[i].h);
            bad++;
        }
    }
    check(res, bad == 0, "f16 subnormal encoding and underflow (%zu cases, %d wrong)",
          sizeof sub / sizeof sub[0], bad);

    /* inf / nan */
    {
        const uint16_t hp = hk_f32_to_f16(INFINITY), hn = hk_f32_to_f16(-INFINITY);
        const uint16_t qn = hk_f32_to_f16(NAN), nn = hk_f32_to_f16(copysignf(NAN, -1.0f));
        const uint16_t pn = hk_f32_to_f16(bits_f32(0x7F800001u)); /* payload only in low bits */
        const float fp = hk_f16_to_f32(0x7C00), fn = hk_f16_to_f32(0xFC00);
        const float f1 = hk_f16_to_f32(0x7E00), f2 = hk_f16_to_f32(0x7C01), f3 = hk_f16_to_f32(0xFFFF);
        const int ok = hp == 0x7C00 && hn == 0xFC00 && f16_is_nan(qn) && !(qn & 0x8000) &&
                       f16_is_nan(nn) && (nn & 0x8000) && f16_is_nan(pn) && isinf(fp) && fp > 0 &&
                       isinf(fn) && fn < 0 && isnan(f1) && isnan(f2) && isnan(f3) && signbit(f3) &&
                       !signbit(f1);
        check(res, ok,
              "f16 inf/nan: +inf->0x%04X -inf->0x%04X nan->0x%04X -nan->0x%04X tiny-payload nan->0x%04X",
              hp, hn, qn, nn, pn);
    }

    /* all 65536 patterns: decode matches the IEEE definition, and re-encodes to itself */
    {
        int bad_val = 0, bad_rt = 0, bad_mono = 0;
        for (uint32_t u = 0; u < 65536; u++) {
            const uint16_t h = (uint16_t)u;
            const float f = hk_f16_to_f32(h);
            const uint16_t back = hk_f32_to_f16(f);
            if (f16_is_nan(h)) {
                if (!isnan(f) || !!signbit(f) != !!(h & 0x8000))
                    bad_val++;
                if (!f16_is_nan(back) || (back & 0x8000) != (h & 0x8000))
                    bad_rt++;
            } else if ((h & 0x7FFF) == 0x7C00) {
                if (!isinf(f) || !!signbit(f) != !!(h & 0x8000))
                    bad_val++;
                if (back != h)
                    bad_rt++;
            } else {
                const double want = f16_value(h);
                if ((double)f != want || !!signbit(f) != !!(h & 0x8000))
                    bad_val++;
                if (back != h)
                    bad_rt++;
            }
            if (h > 0 && h <= 0x7C00 && !(hk_f16_to_f32(h) > hk_f16_to_f32((uint16_t)(h - 1))))
                bad_mono++;
        }
        check(res, bad_val == 0 && bad_rt == 0 && bad_mono == 0,
              "f16 all 65536 patterns: decode == IEEE value (%d wrong), f32 round trip (%d wrong), "
              "monotonic (%d wrong)",
              bad_val, bad_rt, bad_mono);
    }

    /* random f32 in the f16 range: result is the nearest f16, ties to even */
    {
        rng r = {0x9E3779B97F4A7C15ull};
        int bad_n = 0;
        const int n = 1000000;
        for (int i = 0; i < n; i++) {
            const uint64_t b = rng_next(&r);
            const int e = (int)(b % 42) - 26; /* 2^-26 .. 2^15 */
            const uint32_t mant = (uint32_t)(b >> 8) & 0x7FFFFFu;
            const int neg = (int)((b >> 40) & 1);
            float x = ldexpf(1.0f + (float)mant * 0x1p-23f, e);
            if (x > 65504.0f)
                x = 65504.0f;
            if (neg)
                x = -x;
            const uint16_t h = hk_f32_to_f16(x);
            if (f16_is_nan(h) || (h & 0x7FFF) >= 0x7C00 || !!(h & 0x8000) != neg) {
                bad_n++;
                continue;
            }
            const double err = fabs((double)x - f16_value(h));
            const uint16_t mag = h & 0x7FFF;
            int ok = 1;
            if (mag > 0) {
                const double e_lo = fabs((double)x - f16_value((uint16_t)(h - 1)));
                if (e_lo < err || (e_lo == err && (h & 1)))
                    ok = 0;
            }
            if (mag < 0x7BFF) {
                const double e_hi = fabs((double)x - f16_value((uint16_t)(h + 1)));
                if (e_hi < err || (e_hi == err && (h & 1)))
                    ok = 0;
            }
            if (!ok) {
                if (bad_n < 5)
                    printf("  nearest: x=%.9g -> 0x%04X\n", (double)x, h);
                bad_n++;
            }
        }
        check(res, bad_n == 0, "f16 encode of %d random f32 is the nearest f16, ties to even (%d wrong)",
              n, bad_n);
    }
}

/* ================================================================================================ */
/* hand-built blocks                                                                                */
/* ================================================================================================ */

static void test_hand_q8(results *res)
{
    /* Q8_0: d = 0x3555 = 1365/4096, qs spanning -128..127 */
    hk_block_q8_0 b;
    b.d = 0x3555;
    for (int j = 0; j < 32; j++)
        b.qs[j] = (int8_t)(j * 8 - 128);
    b.qs[31] = 127;
    float y[32];
    hk_dequant_row_q8_0(&b, y, 32);
    int bad = 0;
    for (int j = 0; j < 32; j++)
        if ((double)y[j] != b.qs[j] * 1365.0 / 4096.0)
            bad++;
    const int spot = y[0] == -42.65625f && y[31] == 42.322998046875f && y[16] == 0.0f;
    check(res, bad == 0 && spot, "Q8_0 hand block: y = d*q with d=0x3555 (%d wrong, y[0]=%.9g y[31]=%.9g)",
          bad, (double)y[0], (double)y[31]);

    /* Q8_1: negative d = 0xB800 = -0.5; s must not affect the values */
    hk_block_q8_1 c;
    c.d = 0xB800;
    c.s = 0x7C00;
    for (int j = 0; j < 32; j++)
        c.qs[j] = (int8_t)(127 - j * 9);
    hk_dequant_row_q8_1(&c, y, 32);
    bad = 0;
    for (int j = 0; j < 32; j++)
        if ((double)y[j] != -0.5 * c.qs[j])
            bad++;
    check(res, bad == 0, "Q8_1 hand block: y = d*q with d=-0.5, s ignored (%d wrong)", bad);
}

static void test_hand_q4k(results *res)
{
    /* 6-bit (scale, min) per sub-block; sub-blocks 4..7 have values >= 16 so their high bits
     * land in the top bits of scales[0..7]. */
    static const uint8_t want_sc[8] = {1, 63, 17, 40, 33, 5, 63, 22};
    static const uint8_t want_m[8] = {0, 12, 63, 7, 45, 16, 2, 50};
    /* packed by hand:
     *   scales[0..3] = sc[0..3] | (sc[4..7] >> 4) << 6   = 1|2<<6, 63|0, 17|3<<6, 40|1<<6
     *   scales[4..7] = m[0..3]  | (m[4..7]  >> 4) << 6   = 0|2<<6, 12|1<<6, 63|0, 7|3<<6
     *   scales[8..11] = (sc[4..7] & 15) | (m[4..7] & 15) << 4 = 1|13<<4, 5|0, 15|2<<4, 6|2<<4 */
    hk_block_q4_k b;
    static const uint8_t packed[12] = {0x81, 0x3F, 0xD1, 0x68, 0x80, 0x4C, 0x3F, 0xC7, 0xD1, 0x05, 0x2F, 0x26};
    memcpy(b.scales, packed, 12);
    b.d = 0x2E66;    /* 819/8192 = 0.0999755859375 */
    b.dmin = 0x3400; /* 0.25 */
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)(i * 37 + 11);

    int bad = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc = 0xFF, m = 0xFF;
        hk_q4k_scale_min(b.scales, j, &sc, &m);
        if (sc != want_sc[j] || m != want_m[j]) {
            printf("  sub-block %d: got (%u,%u) want (%u,%u)\n", j, sc, m, want_sc[j], want_m[j]);
            bad++;
        }
    }
    check(res, bad == 0, "Q4_K hand-packed scales/mins unpack (j<4 low bits, j>=4 split bits) (%d wrong)", bad);

    float y[256];
    hk_dequant_row_q4_k(&b, y, 256);
    /* value i: 64-chunk c = i/64 uses bytes qs[32c .. 32c+31]; the first 32 values of the chunk
     * are the low nibbles, the next 32 the high nibbles; sub-block i/32. */
    bad = 0;
    for (int i = 0; i < 256; i++) {
        const int c = i / 64, sub = i / 32, l = i % 32;
        const uint8_t byte = b.qs[32 * c + l];
        const int nib = (i % 64) < 32 ? (byte & 0xF) : (byte >> 4);
        const double want = 819.0 / 8192.0 * want_sc[sub] * nib - 0.25 * want_m[sub];
        if ((double)y[i] != want) {
            if (bad < 5)
                printf("  y[%d] = %.9g want %.9g\n", i, (double)y[i], want);
            bad++;
        }
    }
    /* a few values worked out on paper */
    const int spot = y[0] == 1.0997314453125f && y[37] == 72.58154296875f && y[100] == 10.2470703125f &&
                     y[165] == -4.0f && y[200] == 18.3953857421875f && y[255] == 0.69677734375f;
    check(res, bad == 0 && spot, "Q4_K hand block dequant: y = d*sc*q - dmin*m (%d wrong, spot values %s)",
          bad, spot ? "ok" : "WRONG");
}

/* Q4_K's hand block with a 5th bit per value: qh[l] bit b adds 16 to value 32b+l. The spot values
 * are gguf-py's (gguf.quants.dequantize, 0.19) of these 176 bytes. */
static void test_hand_q5k(results *res)
{
    static const uint8_t want_sc[8] = {1, 63, 17, 40, 33, 5, 63, 22};
    static const uint8_t want_m[8] = {0, 12, 63, 7, 45, 16, 2, 50};
    static const uint8_t packed[12] = {0x81, 0x3F, 0xD1, 0x68, 0x80, 0x4C, 0x3F, 0xC7, 0xD1, 0x05, 0x2F, 0x26};
    hk_block_q5_k b;
    memcpy(b.scales, packed, 12);
    b.d = 0x2E66;    /* 819/8192 */
    b.dmin = 0x3400; /* 0.25 */
    for (int i = 0; i < 128; i++)
        b.qs[i] = (uint8_t)(i * 37 + 11);
    for (int l = 0; l < 32; l++)
        b.qh[l] = (uint8_t)(l * 53 + 3);

    float y[256];
    hk_dequant_row_q5_k(&b, y, 256);
    int bad = 0, high = 0;
    for (int i = 0; i < 256; i++) {
        const int c = i / 64, sub = i / 32, l = i % 32;
        const uint8_t byte = b.qs[32 * c + l];
        const int nib = (i % 64) < 32 ? (byte & 0xF) : (byte >> 4);
        const int bit = (b.qh[l] >> sub) & 1;
        high += bit;
        const double want = 819.0 / 8192.0 * want_sc[sub] * (nib + 16 * bit) - 0.25 * want_m[sub];
        if ((double)y[i] != want) {
            if (bad < 5)
                printf("  y[%d] = %.9g want %.9g\n", i, (double)y[i], want);
            bad++;
        }
    }
    const int spot = y[0] == 2.6993408203125f && y[37] == 72.58154296875f && y[63] == 148.1630859375f &&
                     y[64] == 2.9454345703125f && y[130] == 5.2459716796875f && y[165] == -4.0f &&
                     y[200] == 18.3953857421875f && y[255] == 0.69677734375f;
    check(res, bad == 0 && spot && high > 64 && high < 192,
          "Q5_K hand block dequant: y = d*sc*(q + 16*qh bit) - dmin*m (%d wrong, %d high bits, gguf-py spot values %s)",
          bad, high, spot ? "ok" : "WRONG");
}

static void test_hand_q6k(results *res)
{
    static const int8_t sc[16] = {1, -2, 3, -4, 5, -6, 7, -8, 127, -128, 10, -10, 50, -50, 0, 33};
    hk_block_q6_k b;
    for (int i = 0; i < 128; i++)
        b.ql[i] = (uint8_t)(i * 29 + 7);
    for (int i = 0; i < 64; i++)
        b.qh[i] = (uint8_t)(i * 53 + 3);
    memcpy(b.scales, sc, 16);
    b.d = 0x3A00; /* 0.75 */

    float y[256];
    hk_dequant_row_q6_k(&b, y, 256);
    /* value i: half n = i/128, quarter t = (i%128)/32, lane l = i%32;
     * low 4 bits: ql[64n + l + 32*(t&1)], low nibble for t<2, high nibble for t>=2;
     * high 2 bits: qh[32n + l] >> 2t; q = 6-bit value - 32; scale scales[i/16]. */
    int bad = 0;
    for (int i = 0; i < 256; i++) {
        const int n = i / 128, t = (i % 128) / 32, l = i % 32;
        const uint8_t lo_byte = b.ql[64 * n + l + 32 * (t & 1)];
        const int lo = t < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
        const int hi = (b.qh[32 * n + l] >> (2 * t)) & 3;
        const int q = (lo | (hi << 4)) - 32;
        const double want = 0.75 * sc[i / 16] * q;
        if ((double)y[i] != want) {
            if (bad < 5)
                printf("  y[%d] = %.9g want %.9g\n", i, (double)y[i], want);
            bad++;
        }
    }
    const int spot = y[0] == 17.25f && y[1] == -21.0f && y[47] == 58.5f && y[70] == -78.75f &&
                     y[100] == 89.25f && y[130] == -1428.75f && y[150] == 1056.0f && y[200] == -1125.0f &&
                     y[255] == -643.5f && y[224] == 0.0f;
    check(res, bad == 0 && spot, "Q6_K hand block dequant: y = d*sc*(q-32) (%d wrong, spot values %s)", bad,
          spot ? "ok" : "WRONG");
}

/* dequantizing a 2-block row equals dequantizing each block alone */
static void test_multiblock(results *res)
{
    rng r = {12345};
    unsigned char raw[2 * 210];
    int ok = 1;
    float a[512], b0[256], b1[256];

    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = (unsigned char)rng_next(&r);

    hk_block_q8_0 q8[2];
    memcpy(q8, raw, sizeof q8);
    q8[0].d = 0x3C00;
    q8[1].d = 0x4200;
    hk_dequant_row_q8_0(q8, a, 64);
    hk_dequant_row_q8_0(&q8[0], b0, 32);
    hk_dequant_row_q8_0(&q8[1], b1, 32);
    ok &= !memcmp(a, b0, 32 * sizeof(float)) && !memcmp(a + 32, b1, 32 * sizeof(float));

    hk_block_q8_1 q81[2];
    memcpy(q81, raw, sizeof q81);
    q81[0].d = 0x3C00;
    q81[1].d = 0x4200;
    hk_dequant_row_q8_1(q81, a, 64);
    hk_dequant_row_q8_1(&q81[0], b0, 32);
    hk_dequant_row_q8_1(&q81[1], b1, 32);
    ok &= !memcmp(a, b0, 32 * sizeof(float)) && !memcmp(a + 32, b1, 32 * sizeof(float));

    hk_block_q4_k q4[2];
    memcpy(q4, raw, sizeof q4);
    q4[0].d = 0x3C00, q4[0].dmin = 0x3800;
    q4[1].d = 0x2E66, q4[1].dmin = 0x4500;
    hk_dequant_row_q4_k(q4, a, 512);
    hk_dequant_row_q4_k(&q4[0], b0, 256);
    hk_dequant_row_q4_k(&q4[1], b1, 256);
    ok &= !memcmp(a, b0, sizeof b0) && !memcmp(a + 256, b1, sizeof b1);

    hk_block_q5_k q5[2];
    memcpy(q5, raw, sizeof q5);
    q5[0].d = 0x3C00, q5[0].dmin = 0x3800;
    q5[1].d = 0x2E66, q5[1].dmin = 0x4500;
    hk_dequant_row_q5_k(q5, a, 512);
    hk_dequant_row_q5_k(&q5[0], b0, 256);
    hk_dequant_row_q5_k(&q5[1], b1, 256);
    ok &= !memcmp(a, b0, sizeof b0) && !memcmp(a + 256, b1, sizeof b1);

    hk_block_q6_k q6[2];
    memcpy(q6, raw, sizeof q6);
    q6[0].d = 0x3C00;
    q6[1].d = 0x2E66;
    hk_dequant_row_q6_k(q6, a, 512);
    hk_dequant_row_q6_k(&q6[0], b0, 256);
    hk_dequant_row_q6_k(&q6[1], b1, 256);
    ok &= !memcmp(a, b0, sizeof b0) && !memcmp(a + 256, b1, sizeof b1);

    check(res, ok, "2-block rows dequantize as the concatenation of their blocks (all 5 formats)");
}

/* ================================================================================================ */
/* quantize -> dequantize                                                                           */
/* ================================================================================================ */

#define RT_K 4096 /* 16 super-blocks, 128 Q8 blocks per data set */

typedef struct {
    const char *name;
    int kind;
} dataset;

static void fill_dataset(int kind, rng *r, float *x, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        float v = 0.0f;
        switch (kind) {
        case 0: v = rng_range(r, -1.0f, 1.0f); break;
        case 1: v = rng_range(r, 0.0f, 1.0f); break;
        case 2: v = rng_range(r, 0.5f, 2.0f); break;
        case 3: v = rng_range(r, -3.0f, -1.0f); break;
        case 4: v = rng_range(r, -100.0f, 50.0f); break;
        case 5: v = rng_range(r, -1e-3f, 3e-3f); break;
        case 6: /* bell-shaped with 1% outliers at ~20x */
            v = rng_unit(r) + rng_unit(r) + rng_unit(r) + rng_unit(r) - 2.0f;
            if (rng_next(r) % 100 == 0)
                v *= 20.0f;
            break;
        case 7: /* sparse: 90% exact zeros */
            v = rng_next(r) % 10 == 0 ? rng_range(r, -5.0f, 5.0f) : 0.0f;
            break;
        case 8: /* per-32 sub-block magnitudes spread over 2^-8 .. 2^0 */
            v = rng_range(r, -1.0f, 1.0f) * ldexpf(1.0f, -(int)((i / 32 * 7) % 9));
            break;
        }
        x[i] = v;
    }
}

static const dataset datasets[] = {
    {"uniform[-1,1]", 0},   {"positive[0,1]", 1}, {"positive[0.5,2]", 2},
    {"negative[-3,-1]", 3}, {"mixed[-100,50]", 4}, {"tiny[-1e-3,3e-3]", 5},
    {"bell+outliers", 6},   {"sparse", 7},         {"varying sub-block scale", 8},
};
#define N_DATASETS (sizeof datasets / sizeof datasets[0])

/* max over groups of g values of max|x - y| / max|x| (groups that are all zero must be exact) */
static double group_rel_err(const float *x, const float *y, size_t k, size_t g, int *zero_bad)
{
    double worst = 0.0;
    for (size_t b = 0; b < k / g; b++) {
        double amax = 0.0, emax = 0.0;
        for (size_t i = b * g; i < (b + 1) * g; i++) {
            amax = fmax(amax, fabs((double)x[i]));
            emax = fmax(emax, fabs((double)x[i] - (double)y[i]));
        }
        if (amax == 0.0) {
            if (emax != 0.0)
                (*zero_bad)++;
        } else {
            worst = fmax(worst, emax / amax);
        }
    }
    return worst;
}

static double row_rel_err(const float *x, const float *y, size_t k)
{
    double amax = 0.0, emax = 0.0;
    for (size_t i = 0; i < k; i++) {
        amax = fmax(amax, fabs((double)x[i]));
        emax = fmax(emax, fabs((double)x[i] - (double)y[i]));
    }
    return amax > 0.0 ? emax / amax : emax;
}

/* Q8_0 per block: q = round(x/d) gives |x - d*q| <= d/2 with d = amax/127; storing d as f16
 * moves each value by |q|*|d - f16(d)| <= 127*max(d*2^-11, 2^-25) (2^-25: half the f16
 * subnormal quantum). */
static double q8_block_bound(double amax)
{
    const double d = amax / 127.0;
    return d / 2.0 + 127.0 * fmax(d * 0x1p-11, 0x1p-25) + 1e-6 * (double)amax;
}

/* bounds for the K-quants, relative to the super-block's amax (measured worst cases over the
 * data sets are printed; see the report in the check lines) */
#define Q4K_REL_BOUND 0.085
#define Q5K_REL_BOUND 0.045
#define Q6K_REL_BOUND 0.020

static void test_roundtrip(results *res)
{
    float *x = malloc(RT_K * sizeof(float));
    float *y = malloc(RT_K * sizeof(float));
    hk_block_q8_0 *b8 = malloc(RT_K / 32 * sizeof *b8);
    hk_block_q4_k *b4 = malloc(RT_K / 256 * sizeof *b4);
    hk_block_q5_k *b5 = malloc(RT_K / 256 * sizeof *b5);
    hk_block_q6_k *b6 = malloc(RT_K / 256 * sizeof *b6);
    if (!x || !y || !b8 || !b4 || !b5 || !b6) {
        check(res, 0, "round trip: out of memory");
        goto done;
    }

    double worst8 = 0.0, worst4 = 0.0, worst5 = 0.0, worst6 = 0.0, worst4_row = 0.0, worst5_row = 0.0;
    double worst6_row = 0.0;
    for (size_t s = 0; s < N_DATASETS; s++) {
        rng r = {0xC0FFEEull + 977 * s};
        fill_dataset(datasets[s].kind, &r, x, RT_K);

        /* Q8_0: per-block absolute bound */
        hk_quant_row_q8_0(x, b8, RT_K);
        hk_dequant_row_q8_0(b8, y, RT_K);
        int bad8 = 0;
        double ratio8 = 0.0;
        for (size_t b = 0; b < RT_K / 32; b++) {
            double amax = 0.0, emax = 0.0;
            for (size_t i = 32 * b; i < 32 * b + 32; i++) {
                amax = fmax(amax, fabs((double)x[i]));
                emax = fmax(emax, fabs((double)x[i] - (double)y[i]));
            }
            if (emax > q8_block_bound(amax))
                bad8++;
            if (amax > 0.0)
                ratio8 = fmax(ratio8, emax / amax);
        }
        worst8 = fmax(worst8, ratio8);
        check(res, bad8 == 0,
              "Q8_0 round trip %-24s max|err|/amax = %.5f (per-block bound amax/254 + f16(d) error; %d blocks over)",
              datasets[s].name, ratio8, bad8);

        /* Q4_K */
        hk_quant_row_q4_k(x, b4, RT_K);
        hk_dequant_row_q4_k(b4, y, RT_K);
        int zero_bad = 0, finite_bad = 0;
        for (size_t b = 0; b < RT_K / 256; b++) {
            const float d = hk_f16_to_f32(b4[b].d), dm = hk_f16_to_f32(b4[b].dmin);
            if (!isfinite(d) || !isfinite(dm) || d < 0.0f || dm < 0.0f)
                finite_bad++;
        }
        const double e4 = group_rel_err(x, y, RT_K, 256, &zero_bad);
        const double e4r = row_rel_err(x, y, RT_K);
        worst4 = fmax(worst4, e4);
        worst4_row = fmax(worst4_row, e4r);
        check(res, e4 <= Q4K_REL_BOUND && zero_bad == 0 && finite_bad == 0,
              "Q4_K round trip %-24s max|err|/amax = %.5f per super-block, %.5f per row (bound %.3f)",
              datasets[s].name, e4, e4r, Q4K_REL_BOUND);

        /* Q5_K */
        hk_quant_row_q5_k(x, b5, RT_K);
        hk_dequant_row_q5_k(b5, y, RT_K);
        zero_bad = 0;
        finite_bad = 0;
        for (size_t b = 0; b < RT_K / 256; b++) {
            const float d = hk_f16_to_f32(b5[b].d), dm = hk_f16_to_f32(b5[b].dmin);
            if (!isfinite(d) || !isfinite(dm) || d < 0.0f || dm < 0.0f)
                finite_bad++;
        }
        const double e5 = group_rel_err(x, y, RT_K, 256, &zero_bad);
        const double e5r = row_rel_err(x, y, RT_K);
        worst5 = fmax(worst5, e5);
        worst5_row = fmax(worst5_row, e5r);
        check(res, e5 <= Q5K_REL_BOUND && zero_bad == 0 && finite_bad == 0,
              "Q5_K round trip %-24s max|err|/amax = %.5f per super-block, %.5f per row (bound %.3f)",
              datasets[s].name, e5, e5r, Q5K_REL_BOUND);

        /* Q6_K */
        hk_quant_row_q6_k(x, b6, RT_K);
        hk_dequant_row_q6_k(b6, y, RT_K);
        zero_bad = 0;
        finite_bad = 0;
        for (size_t b = 0; b < RT_K / 256; b++) {
            const float d = hk_f16_to_f32(b6[b].d);
            if (!isfinite(d) || d < 0.0f)
                finite_bad++;
        }
        const double e6 = group_rel_err(x, y, RT_K, 256, &zero_bad);
        const double e6r = row_rel_err(x, y, RT_K);
        worst6 = fmax(worst6, e6);
        worst6_row = fmax(worst6_row, e6r);
        check(res, e6 <= Q6K_REL_BOUND && zero_bad == 0 && finite_bad == 0,
              "Q6_K round trip %-24s max|err|/amax = %.5f per super-block, %.5f per row (bound %.3f)",
              datasets[s].name, e6, e6r, Q6K_REL_BOUND);
    }
    printf("     worst over data sets: Q8_0 %.5f (per block), Q4_K %.5f (per super-block) %.5f (per row), "
           "Q5_K %.5f %.5f, Q6_K %.5f %.5f\n",
           worst8, worst4, worst4_row, worst5, worst5_row, worst6, worst6_row);

    /* all-zero input encodes and decodes to exact zeros */
    {
        memset(x, 0, RT_K * sizeof(float));
        int ok = 1;
        hk_block_q8_1 b81[RT_K / 32];
        hk_quant_row_q8_0(x, b8, RT_K);
        hk_dequant_row_q8_0(b8, y, RT_K);
        for (size_t i = 0; i < RT_K; i++)
            ok &= y[i] == 0.0f;
        hk_quant_row_q8_1(x, b81, RT_K);
        hk_dequant_row_q8_1(b81, y, RT_K);
        for (size_t i = 0; i < RT_K; i++)
            ok &= y[i] == 0.0f;
        for (size_t i = 0; i < RT_K / 32; i++)
            ok &= b81[i].s == 0 && b81[i].d == 0;
        hk_quant_row_q4_k(x, b4, RT_K);
        hk_dequant_row_q4_k(b4, y, RT_K);
        for (size_t i = 0; i < RT_K; i++)
            ok &= y[i] == 0.0f;
        hk_quant_row_q5_k(x, b5, RT_K);
        hk_dequant_row_q5_k(b5, y, RT_K);
        for (size_t i = 0; i < RT_K; i++)
            ok &= y[i] == 0.0f;
        hk_quant_row_q6_k(x, b6, RT_K);
        hk_dequant_row_q6_k(b6, y, RT_K);
        for (size_t i = 0; i < RT_K; i++)
            ok &= y[i] == 0.0f;
        check(res, ok, "all-zero rows quantize and dequantize to exact zeros (Q8_0, Q8_1, Q4_K, Q5_K, Q6_K)");
    }

done:
    free(x);
    free(y);
    free(b8);
    free(b4);
    free(b5);
    free(b6);
}

/* Q8_1: d = f16(amax/127), q = round(x/d), s = f16(d*sum(q)) with the f32 d */
static void test_q8_1(results *res)
{
    enum { K = 2048 };
    float x[K], y[K];
    hk_block_q8_1 b1[K / 32];
    hk_block_q8_0 b0[K / 32];
    int bad_d = 0, bad_s = 0, bad_def = 0, bad_err32 = 0, bad_err16 = 0, bad_deq = 0, bad_q8_0 = 0;
    int bad_amax = 0;

    for (size_t s = 0; s < N_DATASETS; s++) {
        rng r = {0xABCDEF12345ull + 31 * s};
        fill_dataset(datasets[s].kind, &r, x, K);
        hk_quant_row_q8_1(x, b1, K);
        hk_quant_row_q8_0(x, b0, K);
        hk_dequant_row_q8_1(b1, y, K);
        for (size_t b = 0; b < K / 32; b++) {
            const float *xb = x + 32 * b;
            float amax = 0.0f;
            for (int j = 0; j < 32; j++)
                amax = fmaxf(amax, fabsf(xb[j]));
            const float d = amax / 127.0f;
            const float id = d != 0.0f ? 1.0f / d : 0.0f;
            if (b1[b].d != hk_f32_to_f16(d))
                bad_d++;
            int sum = 0, has127 = 0;
            for (int j = 0; j < 32; j++) {
                sum += b1[b].qs[j];
                has127 |= b1[b].qs[j] == 127 || b1[b].qs[j] == -127;
            }
            if (amax > 0.0f && !has127)
                bad_amax++;
            if (b1[b].s != hk_f32_to_f16(d * (float)sum))
                bad_s++;
            const double dh = (double)hk_f16_to_f32(b1[b].d);
            const double eps = 127.0 * fabs(dh - (double)d) + 1e-6 * (double)amax;
            for (int j = 0; j < 32; j++) {
                const double q = b1[b].qs[j];
                /* the definition: q = roundf(x * id), id = 1/d in f32 (llama.cpp), so ... */
                if (q != (double)roundf(xb[j] * id))
                    bad_def++;
                /* ... with the f32 d the rounding is to nearest, up to the two f32 roundings in
                 * x*id (<= 2^-23 relative on |x/d| <= 127), which can move a near-tie */
                if (fabs((double)xb[j] - (double)d * q) > (double)d * (0.5 + 128.0 * 0x1p-23))
                    bad_err32++;
                /* with the stored f16 d: d/2 plus the d rounding error carried by q */
                if (fabs((double)xb[j] - dh * q) > dh / 2.0 + eps)
                    bad_err16++;
                if ((double)y[32 * b + (size_t)j] != (double)(float)(dh * q))
                    bad_deq++;
            }
            if (b0[b].d != b1[b].d || memcmp(b0[b].qs, b1[b].qs, 32) != 0)
                bad_q8_0++;
        }
    }
    check(res, bad_d == 0, "Q8_1 d == f16(amax/127) (%d blocks wrong)", bad_d);
    check(res, bad_s == 0, "Q8_1 s == f16(d*sum(qs)) with the f32 d (%d blocks wrong)", bad_s);
    check(res, bad_amax == 0, "Q8_1 the largest |x| of each block quantizes to +-127 (%d blocks wrong)", bad_amax);
    check(res, bad_def == 0, "Q8_1 q == roundf(x * (1/d)) (%d values wrong)", bad_def);
    check(res, bad_err32 == 0, "Q8_1 |x - d*q| <= d/2 (+2 f32 roundings) with the f32 d (%d values over)",
          bad_err32);
    check(res, bad_err16 == 0, "Q8_1 |x - f16(d)*q| <= f16(d)/2 + eps (%d values over)", bad_err16);
    check(res, bad_deq == 0, "Q8_1 dequant == f16(d)*q (%d values wrong)", bad_deq);
    check(res, bad_q8_0 == 0, "Q8_0 and Q8_1 quantize d and qs identically (%d blocks differ)", bad_q8_0);
}

/* ================================================================================================ */
/* kernels                                                                                          */
/* ================================================================================================ */

/* random finite f16 with exponent field in [emin, emax] and random sign */
static uint16_t rand_f16(rng *r, int emin, int emax, int allow_neg)
{
    const uint64_t b = rng_next(r);
    const uint16_t e = (uint16_t)(emin + (int)(b % (uint64_t)(emax - emin + 1)));
    const uint16_t m = (uint16_t)((b >> 16) & 0x3FF);
    const uint16_t s = (uint16_t)(allow_neg && ((b >> 32) & 1) ? 0x8000 : 0);
    return (uint16_t)(s | (e << 10) | m);
}

static void put_u16(unsigned char *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}

static void test_matvec(results *res)
{
    enum { ROWS = 8, K = 2048 };
    static const int types[4] = {HK_REF_Q8_0, HK_REF_Q4_K, HK_REF_Q5_K, HK_REF_Q6_K};
    static const char *names[4] = {"Q8_0", "Q4_K", "Q5_K", "Q6_K"};
    float x[K], wrow[K], y[ROWS], y2[ROWS];

    for (int t = 0; t < 4; t++) {
        const int type = types[t];
        const size_t rb = hk_ref_row_bytes(type, K);
        const size_t qk = type == HK_REF_Q8_0 ? 32 : 256;
        const size_t bsz = type == HK_REF_Q8_0 ? 34 : type == HK_REF_Q4_K ? 144 : type == HK_REF_Q5_K ? 176 : 210;
        unsigned char *w = malloc(ROWS * rb);
        unsigned char *wu = malloc(ROWS * rb + 1);
        if (!w || !wu || rb == 0) {
            check(res, 0, "matvec %s: setup failed", names[t]);
            free(w);
            free(wu);
            continue;
        }
        rng r = {0x5151515151ull + (unsigned)t};
        for (size_t i = 0; i < ROWS * rb; i++)
            w[i] = (unsigned char)rng_next(&r);
        /* force the f16 fields finite and moderate; dmin up to 2^7 so mins dominate */
        for (size_t b = 0; b < ROWS * K / qk; b++) {
            unsigned char *blk = w + b * bsz;
            if (type == HK_REF_Q8_0) {
                put_u16(blk, rand_f16(&r, 9, 17, 1));
            } else if (type == HK_REF_Q4_K || type == HK_REF_Q5_K) {
                put_u16(blk, rand_f16(&r, 9, 17, 0));
                put_u16(blk + 2, rand_f16(&r, 12, 22, 0)); /* large dmin */
            } else {
                put_u16(blk + 208, rand_f16(&r, 9, 17, 1));
            }
        }
        for (int i = 0; i < K; i++)
            x[i] = rng_range(&r, -1.0f, 1.0f);

        hk_ref_matvec(type, w, x, y, ROWS, K);

        double worst = 0.0;
        int bad = 0, bad_order = 0;
        for (int row = 0; row < ROWS; row++) {
            const void *wr = w + (size_t)row * rb;
            if (type == HK_REF_Q8_0)
                hk_dequant_row_q8_0(wr, wrow, K);
            else if (type == HK_REF_Q4_K)
                hk_dequant_row_q4_k(wr, wrow, K);
            else if (type == HK_REF_Q5_K)
                hk_dequant_row_q5_k(wr, wrow, K);
            else
                hk_dequant_row_q6_k(wr, wrow, K);
            double ref = 0.0, mag = 0.0;
            for (size_t i = 0; i < K; i++) {
                ref += (double)wrow[i] * (double)x[i];
                mag += fabs((double)wrow[i] * (double)x[i]);
            }
            const double rel = fabs((double)y[row] - ref) / mag;
            worst = fmax(worst, rel);
            if (!(rel <= 1e-5))
                bad++;
            if (f32_bits(y[row]) != f32_bits((float)ref))
                bad_order++;
        }
        check(res, bad == 0, "matvec %s random blocks vs double dot: max |err|/sum|w*x| = %.2e (bound 1e-5)",
              names[t], worst);
        check(res, bad_order == 0,
              "matvec %s equals the double sum in index order rounded once to f32, bit for bit (%d rows differ)",
              names[t], bad_order);

        /* unaligned weights (raw GGUF bytes at an odd address) give identical results */
        memcpy(wu + 1, w, ROWS * rb);
        hk_ref_matvec(type, wu + 1, x, y2, ROWS, K);
        check(res, memcmp(y, y2, sizeof y) == 0, "matvec %s with weights at an odd address is identical",
              names[t]);

        free(w);
        free(wu);
    }

    /* unknown type / bad k: rows come back zero, nothing read */
    {
        float yy[3] = {1.0f, 2.0f, 3.0f};
        const unsigned char dummy[1] = {0};
        hk_ref_matvec(99, dummy, x, yy, 3, 256);
        const int ok1 = yy[0] == 0.0f && yy[1] == 0.0f && yy[2] == 0.0f;
        yy[0] = yy[1] = yy[2] = 1.0f;
        hk_ref_matvec(HK_REF_Q4_K, dummy, x, yy, 3, 100);
        const int ok2 = yy[0] == 0.0f && yy[1] == 0.0f && yy[2] == 0.0f;
        check(res, ok1 && ok2, "matvec with an unknown type or k off the block size writes zeros");
    }
}

/* F16 weight rows (hk_ref_matvec, hk_ref_gemm): any k, each value exact (subnormals kept), the
 * double sum in index order rounded once; rows at an odd address (raw GGUF bytes); and the test
 * data's F16 rows (hk_random_weights) finite. */
static void test_f16_weights(results *res)
{
    /* 1, -2, 0.5, 2^-24 (the smallest subnormal), 65504; -0, 0.333251953125, 2^-14, -65504, 3 */
    static const uint16_t h[2][5] = {{0x3C00, 0xC000, 0x3800, 0x0001, 0x7BFF},
                                     {0x8000, 0x3555, 0x0400, 0xFBFF, 0x4200}};
    const float x[5] = {0.25f, 1.0f, -3.0f, 1048576.0f, 0.125f};
    const double want[2] = {0.25 - 2.0 - 1.5 + 0x1p-24 * 1048576.0 + 65504.0 * 0.125,
                            0.333251953125 - 3.0 * 0x1p-14 - 65504.0 * 1048576.0 + 3.0 * 0.125};
    unsigned char odd[1 + sizeof h];
    memcpy(odd + 1, h, sizeof h);
    float y[2] = {0}, out[2] = {0};
    hk_ref_matvec(HK_REF_F16, odd + 1, x, y, 2, 5);
    int gemm_ok = hk_ref_gemm(HK_REF_F16, odd + 1, x, out, 1, 2, 5);
    check(res, f32_bits(y[0]) == f32_bits((float)want[0]) && f32_bits(y[1]) == f32_bits((float)want[1]),
          "matvec f16 (k = 5, a subnormal, +-65504, at an odd address) = the double sum rounded once: %.9g %.9g",
          y[0], y[1]);
    check(res, gemm_ok && f32_bits(out[0]) == f32_bits(y[0]) && f32_bits(out[1]) == f32_bits(y[1]),
          "gemm f16 = matvec f16, bit for bit: %.9g %.9g", out[0], out[1]);

    hk_rng r = {77};
    uint8_t *w = hk_random_weights(&r, HK_REF_F16, 3, 100, 0);
    int finite = w != NULL, distinct = 0;
    for (size_t i = 0; w && i < 300; i++) {
        uint16_t v, first;
        memcpy(&v, w + 2 * i, 2);
        memcpy(&first, w, 2);
        finite &= isfinite(hk_f16_to_f32(v)) != 0;
        distinct += v != first;
    }
    check(res, finite && distinct > 200, "hk_random_weights f16 rows: finite values (%d of 299 differ from the first)",
          distinct);
    free(w);
}

/* ---- the int8 matvec reference: deq(W) . deq(xq), s never read ------------------------------------ */

/* Weight value i of a block, from the GGUF formulas written out per value index (as in the hand
 * tests above), in double. */
static double hand_value(int type, const void *block, int i)
{
    if (type == HK_REF_Q8_0) {
        const hk_block_q8_0 *b = block;
        return f16_value(b->d) * b->qs[i];
    }
    if (type == HK_REF_Q4_K || type == HK_REF_Q5_K) {
        /* Q5_K is Q4_K's layout with qh[32] between scales and qs: bit i/32 of qh[i%32] adds 16 */
        const hk_block_q4_k *b = block;
        const hk_block_q5_k *b5 = block;
        const int c = i / 64, sub = i / 32, l = i % 32;
        const uint8_t byte = type == HK_REF_Q5_K ? b5->qs[32 * c + l] : b->qs[32 * c + l];
        const int high = type == HK_REF_Q5_K ? 16 * ((b5->qh[l] >> sub) & 1) : 0;
        const int nib = ((i % 64) < 32 ? (byte & 0xF) : (byte >> 4)) + high;
        /* scale/min of sub-block `sub`: 6 bits, split as llama.cpp's get_scale_min_k4 */
        int sc, m;
        if (sub < 4) {
            sc = b->scales[sub] & 63;
            m = b->scales[sub + 4] & 63;
        } else {
            sc = (b->scales[sub + 4] & 0xF) | ((b->scales[sub - 4] >> 6) << 4);
            m = (b->scales[sub + 4] >> 4) | ((b->scales[sub] >> 6) << 4);
        }
        return f16_value(b->d) * sc * nib - f16_value(b->dmin) * m;
    }
    const hk_block_q6_k *b = block;
    const int n = i / 128, t = (i % 128) / 32, l = i % 32;
    const uint8_t lo_byte = b->ql[64 * n + l + 32 * (t & 1)];
    const int lo = t < 2 ? (lo_byte & 0xF) : (lo_byte >> 4);
    const int hi = (b->qh[32 * n + l] >> (2 * t)) & 3;
    return f16_value(b->d) * b->scales[i / 16] * ((lo | (hi << 4)) - 32);
}

static void test_int8_ref(results *res)
{
    static const int types[4] = {HK_REF_Q8_0, HK_REF_Q4_K, HK_REF_Q6_K, HK_REF_Q5_K};
    static const char *names[4] = {"Q8_0", "Q4_K", "Q6_K", "Q5_K"};
    enum { K = 256 };
    rng r = {0x1D8u};
    hk_block_q8_1 x[K / 32];
    /* x: d = +-2^-e (exact), quants over the whole int8 range, s garbage (inf, NaN, random) */
    for (int b = 0; b < K / 32; b++) {
        x[b].d = (uint16_t)((b & 1 ? 0x8000 : 0) | ((15 - 1 - b % 5) << 10)); /* +-2^-(1 + b%5) */
        for (int i = 0; i < 32; i++)
            x[b].qs[i] = (int8_t)(rng_next(&r) >> 56);
        x[b].qs[3] = -128;
        x[b].qs[4] = 127;
        x[b].s = b == 0 ? 0x7C00 : b == 1 ? 0x7E00 : (uint16_t)(rng_next(&r) & 0x7BFF);
    }
    for (int t = 0; t < 4; t++) {
        /* one hand-made weight block per type (the hand blocks above, 2 rows: the second with
         * every byte flipped), exact binary values so the double sum is exact */
        unsigned char w[2 * 8 * 34]; /* the largest: 2 rows of 8 Q8_0 blocks */
        const size_t bsz = t == 0 ? 34 : t == 1 ? 144 : t == 2 ? 210 : 176, blocks = t == 0 ? K / 32 : 1;
        for (int row = 0; row < 2; row++)
            for (size_t b = 0; b < blocks; b++) {
                unsigned char *wp = w + ((size_t)row * blocks + b) * bsz;
                for (size_t i = 0; i < bsz; i++)
                    wp[i] = (unsigned char)(i * 37 + 11 + b * 5 + (size_t)row * 101);
                if (t == 0) {
                    put_u16(wp, row ? 0xB400 : 0x3555); /* -0.25, 1365/4096 */
                } else if (t == 1 || t == 3) {
                    put_u16(wp, row ? 0x3000 : 0x2E66); /* 0.125, 819/8192 */
                    put_u16(wp + 2, 0x3400);            /* dmin 0.25 */
                } else {
                    put_u16(wp + 208, row ? 0xB000 : 0x3A00); /* -0.125, 0.75 */
                }
            }
        float y[2], y2[2];
        double want[2];
        for (int row = 0; row < 2; row++) {
            want[row] = 0.0;
            for (int i = 0; i < K; i++) {
                const size_t b = (size_t)i / (t == 0 ? 32 : 256);
                const void *blk = w + ((size_t)row * blocks + b) * bsz;
                want[row] += hand_value(types[t], blk, i % (t == 0 ? 32 : 256)) * f16_value(x[i / 32].d) *
                             x[i / 32].qs[i % 32];
            }
        }
        hk_ref_matvec_q8_1(types[t], w, x, y, 2, K);
        /* the same with every s changed: identical bits */
        hk_block_q8_1 xs[K / 32];
        memcpy(xs, x, sizeof x);
        for (int b = 0; b < K / 32; b++)
            xs[b].s ^= 0x1234;
        hk_ref_matvec_q8_1(types[t], w, xs, y2, 2, K);
        check(res, (double)y[0] == (double)(float)want[0] && (double)y[1] == (double)(float)want[1],
              "int8 ref %s: deq(W).deq(xq) of hand blocks, exact (%.9g %.9g, want %.9g %.9g)", names[t], (double)y[0],
              (double)y[1], want[0], want[1]);
        check(res, memcmp(y, y2, sizeof y) == 0, "int8 ref %s: the Q8_1 s field is never read", names[t]);
    }
}

/* The Q8_0/Q8_1 quantizer at the ends of the f16 d's range, and IEEE NaN through the int8
 * reference: 0 * inf is NaN for every weight type alike. */
static void test_q8_1_limits(results *res)
{
    /* amax, want d (f16 bits), want all quants 0 */
    static const struct {
        float amax;
        uint16_t d;
        int zero_q;
    } cases[] = {
        {0.0f, 0x0000, 1},
        {0x1.fcp-19f, 0x0000, 1},      /* 127 * 2^-25: d = 2^-25, a tie, rounds to 0 */
        {0x1.fc0002p-19f, 0x0001, 0},  /* the next float: d just above 2^-25 -> 2^-24 */
        {0x1.fbc08p-8f, 0x0400, 0},    /* the smallest normal d: 2^-14 */
        {0x1.fbc07ep-8f, 0x03FF, 0},   /* the float before: the largest subnormal */
        {8321039.5f, 0x7BFF, 0},       /* d = 65519.996...: 65504 */
        {8321040.0f, 0x7E00, 1},       /* 127 * 65520: d = 65520 rounds to inf: NaN block */
        {1e7f, 0x7E00, 1},
        {INFINITY, 0x7E00, 1},
        {NAN, 0x7E00, 1},
    };
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float xb[32];
        for (int j = 0; j < 32; j++)
            xb[j] = isfinite(cases[c].amax) ? cases[c].amax * (float)(j - 16) / 32.0f : 0.5f;
        xb[9] = -cases[c].amax;
        hk_block_q8_1 q1;
        hk_block_q8_0 q0;
        hk_quant_row_q8_1(xb, &q1, 32);
        hk_quant_row_q8_0(xb, &q0, 32);
        int zero = 1;
        for (int j = 0; j < 32; j++)
            zero &= q1.qs[j] == 0;
        const uint16_t want_s = cases[c].d == 0x7E00 ? 0x7E00 : cases[c].zero_q ? 0x0000 : q1.s;
        const int ok = q1.d == cases[c].d && zero == cases[c].zero_q && q1.s == want_s && q0.d == q1.d &&
                       memcmp(q0.qs, q1.qs, 32) == 0 && (cases[c].zero_q || q1.qs[9] == -127);
        if (!ok) {
            printf("  amax %a: d=0x%04X (want 0x%04X) s=0x%04X q[9]=%d zero=%d\n", (double)cases[c].amax, q1.d,
                   cases[c].d, q1.s, q1.qs[9], zero);
            bad++;
        }
    }
    check(res, bad == 0, "Q8_1/Q8_0 quantizer limits: zero at amax <= 127*2^-25, NaN block from 127*65520 or "
                         "non-finite, subnormal d below 0x1.fbc08p-8 (%d wrong)", bad);
    check(res, HK_Q8_1_AMAX_ZERO == 0x1.fcp-19f && HK_Q8_1_AMAX_NORMAL == 0x1.fbc08p-8f &&
                   HK_Q8_1_AMAX_NAN == 127.0f * 65520.0f,
          "HK_Q8_1_AMAX_* constants are the limits above");

    /* IEEE: weights of d = 0 (every value 0) against x of d = inf (no quant 0): 0 * inf = NaN for
     * every weight type; x of d = NaN likewise */
    static const int types[4] = {HK_REF_Q8_0, HK_REF_Q4_K, HK_REF_Q6_K, HK_REF_Q5_K};
    unsigned char w[8 * 34];
    hk_block_q8_1 x[8];
    for (int b = 0; b < 8; b++) {
        x[b].d = 0x7C00;
        x[b].s = 0x3C00;
        for (int j = 0; j < 32; j++)
            x[b].qs[j] = (int8_t)(1 + j);
    }
    int nan_inf = 0, nan_nan = 0;
    for (int t = 0; t < 4; t++) {
        memset(w, 0x11, sizeof w); /* quants nonzero; every f16 scale 0 below */
        const size_t bsz = t == 0 ? 34 : t == 1 ? 144 : t == 2 ? 210 : 176;
        for (size_t b = 0; b * bsz + bsz <= sizeof w && b < (t == 0 ? 8u : 1u); b++) {
            if (t == 0)
                put_u16(w + b * bsz, 0x0000);
            else if (t == 1 || t == 3) {
                put_u16(w, 0x0000);
                put_u16(w + 2, 0x0000);
            } else {
                put_u16(w + 208, 0x0000);
            }
        }
        float y;
        hk_ref_matvec_q8_1(types[t], w, x, &y, 1, 256);
        nan_inf += isnan(y) != 0;
        x[5].d = 0x7E00;
        for (int b = 0; b < 8; b++)
            if (b != 5)
                x[b].d = 0x3C00;
        hk_ref_matvec_q8_1(types[t], w, x, &y, 1, 256);
        nan_nan += isnan(y) != 0;
        for (int b = 0; b < 8; b++)
            x[b].d = 0x7C00;
    }
    check(res, nan_inf == 4 && nan_nan == 4,
          "int8 ref IEEE: 0-valued weights . inf x = NaN for Q8_0, Q4_K, Q6_K, Q5_K (%d/4), a NaN x block gives NaN "
          "(%d/4)", nan_inf, nan_nan);
}

static void test_gemv(results *res)
{
    enum { ROWS = 7, K = 1000 };
    float *w = malloc(ROWS * K * sizeof(float));
    float x[K], y[ROWS];
    if (!w) {
        check(res, 0, "gemv: out of memory");
        return;
    }
    rng r = {777};
    for (int i = 0; i < ROWS * K; i++)
        w[i] = rng_range(&r, -2.0f, 2.0f);
    for (int i = 0; i < K; i++)
        x[i] = rng_range(&r, -1.0f, 1.0f) + 0.25f;
    hk_ref_gemv_f32(w, x, y, ROWS, K);
    double worst = 0.0;
    int bad_order = 0;
    for (int row = 0; row < ROWS; row++) {
        double ref = 0.0, mag = 0.0;
        for (int i = 0; i < K; i++) {
            ref += (double)w[row * K + i] * (double)x[i];
            mag += fabs((double)w[row * K + i] * (double)x[i]);
        }
        worst = fmax(worst, fabs((double)y[row] - ref) / mag);
        if (f32_bits((float)ref) != f32_bits(y[row]))
            bad_order++;
    }
    check(res, worst <= 1e-5, "gemv_f32 vs double: max |err|/sum|w*x| = %.2e (bound 1e-5)", worst);
    check(res, bad_order == 0, "gemv_f32 equals the double sum rounded once to f32, bit for bit (%d rows differ)", bad_order);
    free(w);
}

static void test_rmsnorm(results *res)
{
    enum { ROWS = 5, N = 1000 };
    static const float row_scale[ROWS] = {1.0f, 100.0f, 1e-3f, 0.0f, 3e-2f};
    const float eps = 1e-5f;
    float *x = malloc(ROWS * N * sizeof(float));
    float *y = malloc(ROWS * N * sizeof(float));
    float wt[N];
    if (!x || !y) {
        check(res, 0, "rmsnorm: out of memory");
        free(x);
        free(y);
        return;
    }
    rng r = {4242};
    for (int i = 0; i < N; i++)
        wt[i] = rng_range(&r, 0.5f, 1.5f);
    for (int row = 0; row < ROWS; row++)
        for (int i = 0; i < N; i++)
            x[row * N + i] = rng_range(&r, -1.0f, 1.0f) * row_scale[row];
    hk_ref_rmsnorm(x, wt, y, ROWS, N, eps);

    double worst = 0.0;
    int bad_zero = 0;
    for (int row = 0; row < ROWS; row++) {
        double ss = 0.0;
        for (int i = 0; i < N; i++)
            ss += (double)x[row * N + i] * (double)x[row * N + i];
        const double inv = 1.0 / sqrt(ss / N + (double)eps);
        for (int i = 0; i < N; i++) {
            const double want = (double)x[row * N + i] * inv * (double)wt[i];
            const double got = y[row * N + i];
            if (want == 0.0) {
                if (got != 0.0)
                    bad_zero++;
            } else {
                worst = fmax(worst, fabs(got - want) / fabs(want));
            }
        }
    }
    check(res, worst <= 1e-5 && bad_zero == 0,
          "rmsnorm vs double (rows of scale 1, 100, 1e-3 where eps matters, 0, 3e-2): max rel err %.2e "
          "(bound 1e-5), %d zero-row values nonzero",
          worst, bad_zero);
    free(x);
    free(y);
}

/* hk_ref_add is the f32 arithmetic of its contract (each step rounded, no fma), checked against
 * float operations forced through memory one at a time; hk_ref_glu against the same math written
 * another way (silu(x) = x (1 + tanh(x / 2)) / 2, GELU's 1 + tanh(u) = 2 / (1 + e^(-2u))), on
 * two layouts, with IEEE specials. */
static void test_elementwise(results *res)
{
    enum { N = 4000 };
    static const float alphas[] = {1.0f, -0.7f, 3.0f};
    static float a[N], b[N], y[N], g[2 * N], sep_g[N], sep_u[N], y_sep[N], y_fused[N];
    rng r = {777};
    for (int i = 0; i < N; i++) {
        a[i] = rng_range(&r, -4.0f, 4.0f);
        b[i] = rng_range(&r, -4.0f, 4.0f) * (i % 3 ? 1.0f : 1e-4f);
    }
    a[0] = NAN, b[1] = INFINITY, a[2] = -INFINITY, b[2] = INFINITY, a[3] = 2.5f, b[3] = -2.5f;
    int bad_add = 0, fma_differs = 0;
    for (size_t k = 0; k < sizeof alphas / sizeof alphas[0]; k++) {
        memcpy(y, a, sizeof y);
        hk_ref_add(y, b, y, N, alphas[k]); /* in place: y is a */
        for (int i = 0; i < N; i++) {
            volatile float p = alphas[k] * b[i];
            volatile float want = a[i] + p;
            float w = want;
            bad_add += isnan(w) ? !isnan(y[i]) : memcmp(&w, &y[i], 4) != 0;
            fma_differs += isfinite(w) && fmaf(alphas[k], b[i], a[i]) != w;
        }
    }
    check(res, bad_add == 0 && fma_differs > 0,
          "hk_ref_add: f32 product then f32 sum, bit for bit, in place (%d differ; an fma would differ in %d)",
          bad_add, fma_differs);

    for (int i = 0; i < N; i++) {
        sep_g[i] = g[(i / 100) * 200 + i % 100] = rng_range(&r, -8.0f, 8.0f);
        sep_u[i] = g[(i / 100) * 200 + 100 + i % 100] = rng_range(&r, -2.0f, 2.0f);
    }
    const double pi = 3.14159265358979323846;
    for (int gelu = 0; gelu <= 1; gelu++) {
        hk_ref_glu(sep_g, sep_u, y_sep, N / 100, 100, 100, gelu);
        hk_ref_glu(g, g + 100, y_fused, N / 100, 100, 200, gelu);
        double err = 0.0, scale = 0.0;
        for (int i = 0; i < N; i++) {
            double x = sep_g[i], u = sqrt(2.0 / pi) * (x + 0.044715 * x * x * x);
            double act = gelu ? x / (1.0 + exp(-2.0 * u)) : x * (1.0 + tanh(x / 2.0)) / 2.0;
            double want = act * sep_u[i];
            err = fmax(err, fabs(y_sep[i] - want));
            scale = fmax(scale, fabs(want));
        }
        /* scale-relative: far out on the negative side the tanh form's 1 + tanh(u) is 0 in double
         * where the other form keeps a value near 1e-21 */
        check(res, err / scale <= 1e-7 && !memcmp(y_sep, y_fused, sizeof y_sep),
              "hk_ref_glu %s vs the same math written another way: scale_rel %.2e (bound 1e-7: f32 rounding), "
              "the fused layout gives the same values",
              gelu ? "gelu" : "silu", err / scale);
    }
    static const float x[] = {NAN, INFINITY, -INFINITY, 0.0f, 1.0f, -1000.0f};
    static const float up[] = {1.0f, 1.0f, 1.0f, INFINITY, NAN, 1.0f};
    float out[6];
    int bad_special = 0;
    for (int gelu = 0; gelu <= 1; gelu++) {
        hk_ref_glu(x, up, out, 1, 6, 6, gelu);
        bad_special += !isnan(out[0]) + (out[1] != INFINITY) + !isnan(out[2]) + !isnan(out[3]) + !isnan(out[4]) +
                       (out[5] != 0.0f || !signbit(out[5]));
    }
    check(res, bad_special == 0, "hk_ref_glu: NaN in, NaN out; act(inf) = inf, act(-inf) = NaN, 0 * inf = NaN, "
          "act(-1000) = -0 (%d wrong)", bad_special);
}

static void test_row_bytes(results *res)
{
    static const struct {
        int type;
        size_t k;
        size_t want;
    } cases[] = {
        {HK_REF_Q8_0, 32, 34},    {HK_REF_Q8_0, 4096, 4352}, {HK_REF_Q8_0, 11008, 11696},
        {HK_REF_Q4_K, 256, 144},  {HK_REF_Q4_K, 4096, 2304}, {HK_REF_Q6_K, 256, 210},
        {HK_REF_Q6_K, 14336, 11760},
        {HK_REF_Q8_0, 33, 0},     {HK_REF_Q8_0, 16, 0},      {HK_REF_Q4_K, 128, 0},
        {HK_REF_Q4_K, 32, 0},     {HK_REF_Q4_K, 4097, 0},    {HK_REF_Q6_K, 300, 0},
        {HK_REF_Q6_K, 64, 0},     {-1, 256, 0},              {7, 256, 0},
        {HK_REF_Q5_K, 256, 176},  {HK_REF_Q5_K, 2048, 1408}, {HK_REF_Q5_K, 300, 0},
        {HK_REF_F16, 256, 512},   {HK_REF_F32, 3, 12},       {HK_REF_Q8_1, 64, 72},
        {99, 32, 0},              {HK_REF_Q4_K, 0, 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const size_t got = hk_ref_row_bytes(cases[i].type, cases[i].k);
        if (got != cases[i].want) {
            printf("  row_bytes(%d, %zu) = %zu want %zu\n", cases[i].type, cases[i].k, got, cases[i].want);
            bad++;
        }
    }
    check(res, bad == 0, "hk_ref_row_bytes sizes, k off the block size -> 0, unknown type -> 0 (%zu cases, %d wrong)",
          sizeof cases / sizeof cases[0], bad);
}

/* hk_ref_get_rows picks rows and writes zeros for ids past them; hk_ref_moe_combine is the f32
 * operations in their documented order, with no FMA. */
static void test_gather(results *res)
{
    /* three Q8_0 rows of 64: row r block b has d = 2^r / 8 (negative in block 1), q[i] = i - 16 */
    hk_block_q8_0 w[3][2];
    for (int r = 0; r < 3; r++)
        for (int b = 0; b < 2; b++) {
            w[r][b].d = (uint16_t)((b ? 0x8000 : 0) | (0x3000 + 0x400 * r));
            for (int i = 0; i < 32; i++)
                w[r][b].qs[i] = (int8_t)(i - 16);
        }
    const uint32_t ids[5] = {2, 3, 0, 2, 0xFFFFFFFFu};
    float y[5 * 64];
    hk_ref_get_rows(HK_REF_Q8_0, w, ids, y, 5, 3, 64);
    int bad = 0;
    for (int i = 0; i < 5; i++)
        for (int v = 0; v < 64; v++) {
            double want = ids[i] < 3 ? f16_value(w[ids[i]][v / 32].d) * (v % 32 - 16) : 0.0;
            bad += f32_bits(y[i * 64 + v]) != f32_bits((float)want);
        }
    check(res, bad == 0, "get_rows q8_0: rows 2, 0, 2 by the formula, ids 3 and 0xFFFFFFFF +0 (%d wrong)", bad);
    const uint32_t f32_rows[4] = {0x7FC0DEADu, 0x80000001u, 0x3F800000u, 0xFF800000u}; /* NaN payload, -subnormal */
    const uint32_t f32_ids[3] = {1, 0, 2};
    float fy[6];
    hk_ref_get_rows(HK_REF_F32, f32_rows, f32_ids, fy, 3, 2, 2);
    check(res, f32_bits(fy[0]) == f32_rows[2] && f32_bits(fy[1]) == f32_rows[3] && f32_bits(fy[2]) == f32_rows[0] &&
                   f32_bits(fy[3]) == f32_rows[1] && f32_bits(fy[4]) == 0 && f32_bits(fy[5]) == 0,
          "get_rows f32: bits copied (NaN payload, subnormal), id past the rows +0");

    /* exact dyadic values: the sums are exact in any order */
    const float x[2 * 2 * 3] = {1, 2, 3, 4, 5, 6, -0.5f, 0.25f, 8, 16, 32, 64}, wts[4] = {0.5f, 0.25f, 2, -1};
    const float resid[6] = {100, 200, 300, 400, 500, 600};
    const float want_no[6] = {1.5f, 2.25f, 3, -17, -31.5f, -48}, want_res[6] = {101.5f, 202.25f, 303, 383, 468.5f, 552};
    float out[6], inplace[6];
    hk_ref_moe_combine(x, wts, NULL, out, 2, 2, 3);
    check(res, memcmp(out, want_no, sizeof out) == 0, "moe_combine without residual");
    hk_ref_moe_combine(x, wts, resid, out, 2, 2, 3);
    memcpy(inplace, resid, sizeof inplace);
    hk_ref_moe_combine(x, wts, inplace, inplace, 2, 2, 3);
    check(res, memcmp(out, want_res, sizeof out) == 0 && memcmp(inplace, want_res, sizeof out) == 0,
          "moe_combine with a residual, and in place on it");
    /* order: 2^24 + 1 + 1 is 2^24 from the left, 2^24 + 2 from the right; FMA: 1 * -(1 + 2^-22) +
     * (1 + 2^-23)^2 is 0 with the product rounded, 2^-46 fused; a first product of -0 stays -0 */
    const float ox[3] = {0x1p24f, 1, 1}, ow[3] = {1, 1, 1};
    const float fx[2] = {-(1.0f + 0x1p-22f), 1.0f + 0x1p-23f}, fw[2] = {1, 1.0f + 0x1p-23f};
    const float zx[1] = {-3}, zw[1] = {0};
    float o, f, z;
    hk_ref_moe_combine(ox, ow, NULL, &o, 1, 3, 1);
    hk_ref_moe_combine(fx, fw, NULL, &f, 1, 2, 1);
    hk_ref_moe_combine(zx, zw, NULL, &z, 1, 1, 1);
    check(res, o == 0x1p24f && f32_bits(f) == 0 && f32_bits(z) == 0x80000000u,
          "moe_combine: j ascending (%.9g), no FMA (%.3g), the first product is the start (%g)", o, f, z);
}

int main(void)
{
    results res = {0, 0};
    test_f16(&res);
    test_hand_q8(&res);
    test_hand_q4k(&res);
    test_hand_q5k(&res);
    test_hand_q6k(&res);
    test_multiblock(&res);
    test_roundtrip(&res);
    test_q8_1(&res);
    test_matvec(&res);
    test_f16_weights(&res);
    test_int8_ref(&res);
    test_q8_1_limits(&res);
    test_gemv(&res);
    test_rmsnorm(&res);
    test_elementwise(&res);
    test_row_bytes(&res);
    test_gather(&res);
    printf("%d passed, %d failed\n", res.passed, res.failed);
    return res.failed == 0 ? 0 : 1;
}
