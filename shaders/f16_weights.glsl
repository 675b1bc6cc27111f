// GGUF F16 weights for the f32 matvec: rows of k f16 values (2k bytes, 2-byte aligned), any k.
// Expects the weights declared as `uint16_t w16[]` (portable) and `uvec4 w128[]` (subgroup rows).
// A unit is 8 values; a row whose k is not a multiple of 8 ends inside its last one.
#define HK_UNIT_VALUES 8u

// Dot of unit u (values 8u .. 8u + 7 below k) of the row starting at u16 index row16 with
// x[xi ..]. 16-bit loads: the portable kernel takes rows at any 2-byte offset.
float hk_unit_dot(uint row16, uint u, uint xi)
{
    uint v0 = u * HK_UNIT_VALUES, n = min(HK_UNIT_VALUES, pc.k - v0);
    float acc = 0.0;
    for (uint i = 0; i < n; i++)
        acc += hk_half(uint(w16[row16 + v0 + i])) * hk_x(xi + i);
    return acc;
}

uint hk_row_u16(uint k) { return k; }

// Subgroup rows: a work item is 8 values, one 16-byte load per row (the host takes this layout
// only where k is a multiple of 8 and the view is 16-byte aligned, so every row starts on 16
// bytes) and two of x.
uint hk_items(uint k) { return k / 8u; }

void hk_item(uint it)
{
    uint x4i = x_base / 4u + it * 2u;
    vec4 xa = x4[x4i], xb = x4[x4i + 1u];
    for (uint r = 0; r < HK_NROWS; r++) {
        uvec4 w = w128[row_byte[r] / 16u + it];
        acc[r] += dot(vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), xa) +
                  dot(vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)), xb);
    }
}
