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

// Subgroup rows: a work item is half a block (16 values): item = 2*block + h.
uint hk_items(uint k) { return k / 16u; }

#ifdef HK_INT8
// The two u16 at u16 index i of slot r's weights (hk_w16) as one word (the block is only 2-byte
// aligned)
uint hk_q8_0_word(uint r, uint i) { return hk_w16(r, i) | (hk_w16(r, i + 1u) << 16); }

// The first Q8_1 block that item it reads
uint hk_item_block(uint it) { return it >> 1; }

// hk_load issues a row's loads of the item (slot c * HK_NROWS + r: the c-th of the HK_NITEMS
// items in flight, row r): d's 16 bits and the 16 quants (2-byte aligned), either as 8 16-bit
// loads put together in pairs (HK_Q8_0_W16, a tuning choice of the one-token kernel) or, loading
// nothing that waits for a load so that they fly while x is staged, as the 4 words from the one
// holding their first byte and, when they start 2 bytes into a word, the 16 bits after those
// (every byte read is the block's). hk_compute aligns them and meets them with each token's
// activation: per (row, token) 4 packed dots, an exact int->float turn, a multiply and an fma
// into the row's sum, the same operations whatever HK_NTOK (a precise sum: matvec.comp).
// Specialization constant 5 (1: 16-bit loads).
layout(constant_id = 5) const uint HK_Q8_0_W16 = 1;
uvec4 hk_wa[HK_NSLOTS];
uint hk_we[HK_NSLOTS], hk_wdb[HK_NSLOTS];

void hk_load(uint it, uint c)
{
    uint blk = it >> 1, h = it & 1u;
    [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
        uint i = c * HK_NROWS + r, b = row_byte[r] + blk * 34u, at = b + 2u + 16u * h, w = at >> 2;
        if (HK_Q8_0_W16 != 0u) {
            uint q = at >> 1;
            hk_wa[i] = uvec4(hk_q8_0_word(r, q), hk_q8_0_word(r, q + 2u), hk_q8_0_word(r, q + 4u),
                             hk_q8_0_word(r, q + 6u));
        } else {
            hk_wa[i] = uvec4(hk_w32(r, w), hk_w32(r, w + 1u), hk_w32(r, w + 2u), hk_w32(r, w + 3u));
            if ((at & 2u) != 0u)
                hk_we[i] = hk_w16(r, (at + 14u) >> 1);
        }
        hk_wdb[i] = hk_w16(r, b >> 1);
    }
}

// Q8_0 needs no activation sums: staged x carries none (hk_stage_x)
const bool HK_XSUMS = false;
uint hk_xsum(uvec4 h0, uvec4 h1, float d) { return 0u; }

void hk_compute(uint it, uint c)
{
    uint blk = it >> 1, h = it & 1u;
    uvec4 wq[HK_NROWS];
    float wd[HK_NROWS];
    [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
        uint i = c * HK_NROWS + r;
        uvec4 a = hk_wa[i];
        bool odd = HK_Q8_0_W16 == 0u && ((row_byte[r] + blk * 34u) & 2u) == 0u; // quants 2 bytes into a word
        wq[r] = odd ? (a >> 16) | (uvec4(a.yzw, hk_we[i]) << 16) : a;
        wd[r] = hk_half(hk_wdb[i]);
    }
    [[unroll]] for (uint t = 0; t < HK_NTOK; t++) {
        float dx = hk_xd(t, blk);
        uvec4 xw = hk_x16(t, blk, h);
        [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
            precise float sum = acc[r * HK_NTOK + t];
            sum = fma(wd[r] * dx, hk_biased_float(hk_dot16(wq[r], xw, HK_I2F_BIAS)), sum);
            acc[r * HK_NTOK + t] = sum;
        }
    }
}
#else
void hk_item(uint it)
{
    uint blk = it >> 1, h = it & 1u;
    uint x4i = x_base / 4u + blk * 8u + h * 4u;
    vec4 xv[4];
    for (uint i = 0; i < 4; i++)
        xv[i] = x4[x4i + i];
    for (uint r = 0; r < HK_NROWS; r++) {
        uint b = row_byte[r] / 2u + blk * HK_Q8_0_U16;
        float sum = 0.0;
        for (uint i = 0; i < 4; i++) {
            uint v = uint(w16[b + 1u + 8u * h + 2u * i]) | (uint(w16[b + 2u + 8u * h + 2u * i]) << 16);
            sum += dot(hk_i8x4(v), xv[i]);
        }
        acc[r] += hk_half(uint(w16[b])) * sum;
    }
}
#endif
