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
// The two u16 at w16[i] as one word (the block is only 2-byte aligned)
uint hk_q8_0_word(uint i) { return uint(w16[i]) | (uint(w16[i + 1u]) << 16); }

// The first Q8_1 block that item it reads
uint hk_item_block(uint it) { return it >> 1; }

// Every row's 16 weight quants and d of the item (hk_load), held for all tokens (hk_compute);
// per (row, token) the same f32 expression whatever HK_NTOK (a precise sum: matvec.comp).
uvec4 hk_wq[HK_NROWS];
float hk_wd[HK_NROWS];

void hk_load(uint it)
{
    uint blk = it >> 1, h = it & 1u;
    [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
        uint b = row_byte[r] / 2u + blk * HK_Q8_0_U16, q = b + 1u + 8u * h;
        hk_wq[r] = uvec4(hk_q8_0_word(q), hk_q8_0_word(q + 2u), hk_q8_0_word(q + 4u), hk_q8_0_word(q + 6u));
        hk_wd[r] = hk_half(uint(w16[b]));
    }
}

void hk_compute(uint it)
{
    uint blk = it >> 1, h = it & 1u;
    [[unroll]] for (uint t = 0; t < HK_NTOK; t++) {
        float dx = hk_xd(t, blk);
        uvec4 xw = hk_x16(t, blk, h);
        [[unroll]] for (uint r = 0; r < HK_NROWS; r++) {
            precise float sum = acc[r * HK_NTOK + t] + hk_wd[r] * dx * float(hk_dot16(hk_wq[r], xw));
            acc[r * HK_NTOK + t] = sum;
        }
    }
}

void hk_item(uint it)
{
    hk_load(it);
    hk_compute(it);
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
