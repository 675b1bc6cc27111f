// Testing only: the cooperative-matrix operations flash.comp uses, emulated as
// GL_KHR_cooperative_matrix defines them, for a device without matrix cores (HK_COOPMAT_EMU).
// A 16x16 matrix lives in a virtual subgroup of 32 consecutive invocations (flash.comp's UNIT),
// 8 elements each: invocation l holds elements l*8 .. l*8+7 in row-major order. Loads and
// stores follow the specification's layouts (row-major: element (r, c) at arr[off + r*stride] +
// c, column-major: at arr[off + c*stride] + r, strides in elements of the array, values taken in
// order from there); the product goes through shared memory, with workgroup barriers, so every
// invocation must reach each operation the same number of times (flash.comp's matrix code is
// workgroup-uniform in this arm).

struct cm_emu {
    float v[8];
};
#define CM_ACC cm_emu
#define CM_A cm_emu
#define CM_B cm_emu
#define CM_ZERO cm_emu(float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0))
#define CM_ROWS 0u
#define CM_COLS 1u
// one copy of each emulated product, in loops (the real arm unrolls them to keep registers)
#define CM_UNROLL [[dont_unroll]]

uint cm_lane() { return gl_LocalInvocationIndex % 32u; }

// m from an array of uvec4, 8 f16 each: value (r, c) is f16 number c % 8 of element
// off + r * stride + c / 8 (row-major), number r % 8 of element off + c * stride + r / 8
// (column-major)
float cm_half(uvec4 w, uint k) { return unpackHalf2x16(w[k >> 1])[k & 1u]; }
#define CM_LOAD8(m, arr, off, stride, layout)                                                   \
    [[unroll]] for (uint e_ = 0; e_ < 8u; e_++) {                                               \
        uint i_ = cm_lane() * 8u + e_, r_ = i_ / 16u, c_ = i_ % 16u;                            \
        m.v[e_] = (layout) == CM_ROWS ? cm_half(arr[(off) + r_ * (stride) + c_ / 8u], c_ % 8u)  \
                                      : cm_half(arr[(off) + c_ * (stride) + r_ / 8u], r_ % 8u); \
    }
// f32 m from / to an array of uvec4 holding f32 bit patterns, row-major (the only layout
// flash.comp uses with them): value (r, c) is word c % 4 of element off + r * stride + c / 4
#define CM_LOAD4F(m, arr, off, stride, layout)                                                  \
    [[unroll]] for (uint e_ = 0; e_ < 8u; e_++) {                                               \
        uint i_ = cm_lane() * 8u + e_, r_ = i_ / 16u, c_ = i_ % 16u;                            \
        m.v[e_] = uintBitsToFloat(arr[(off) + r_ * (stride) + c_ / 4u][c_ % 4u]);               \
    }
#define CM_STORE4(m, arr, off, stride, layout)                                                  \
    [[unroll]] for (uint e_ = 0; e_ < 8u; e_++) {                                               \
        uint i_ = cm_lane() * 8u + e_, r_ = i_ / 16u, c_ = i_ % 16u;                            \
        arr[(off) + r_ * (stride) + c_ / 4u][c_ % 4u] = floatBitsToUint(m.v[e_]);               \
    }

shared float cm_a[WG / 32u * 256u];
shared float cm_b[WG / 32u * 256u];

// c + a b, with a and b exchanged through shared memory
cm_emu cm_muladd(cm_emu a, cm_emu b, cm_emu c)
{
    uint base = UNIT * 256u, l = cm_lane();
    barrier(); // the last product's reads are done
    [[unroll]] for (uint e = 0; e < 8u; e++) {
        cm_a[base + l * 8u + e] = a.v[e];
        cm_b[base + l * 8u + e] = b.v[e];
    }
    barrier();
    [[unroll]] for (uint e = 0; e < 8u; e++) {
        uint i = l * 8u + e, r = i / 16u, col = i % 16u;
        float s = c.v[e];
        [[unroll]] for (uint k = 0; k < 16u; k++)
            s += cm_a[base + r * 16u + k] * cm_b[base + k * 16u + col];
        c.v[e] = s;
    }
    return c;
}
#define CM_MULADD(a, b, c) cm_muladd(a, b, c)

cm_emu cm_mul(cm_emu c, cm_emu f)
{
    [[unroll]] for (uint e = 0; e < 8u; e++)
        c.v[e] *= f.v[e];
    return c;
}
#define CM_MUL(c, f) cm_mul(c, f)
