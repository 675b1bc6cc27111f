// Testing only: the cooperative-matrix operations flash.comp uses, emulated as
// GL_KHR_cooperative_matrix defines them, for a device without matrix cores (HK_COOPMAT_EMU).
// A 16x16 matrix lives in a virtual subgroup of 32 consecutive invocations (flash.comp's UNIT),
// 8 elements each, in the quad layout of every use (cm_rc: the one flash.comp's register softmax
// relies on, so that it runs here as on the matrix cores). Loads and
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
#define CM_LEN(m) 8u
#define CM_EL(m, e) (m).v[e]

// (row, column) of element e of this invocation: NVIDIA's mma layout of 16x16 accumulators
uvec2 cm_rc(uint e)
{
    uint l = cm_lane();
    return uvec2((l >> 2) + 8u * (e >> 2), 8u * ((e >> 1) & 1u) + 2u * (l & 3u) + (e & 1u));
}

// m from an array of uvec4, 8 f16 each: value (r, c) is f16 number c % 8 of element
// off + r * stride + c / 8 (row-major), number r % 8 of element off + c * stride + r / 8
// (column-major)
float cm_half(uvec4 w, uint k) { return unpackHalf2x16(w[k >> 1])[k & 1u]; }
#define CM_LOAD8(m, arr, off, stride, layout)                                                   \
    [[unroll]] for (uint e_ = 0; e_ < 8u; e_++) {                                               \
        uint r_ = cm_rc(e_).x, c_ = cm_rc(e_).y;                                                \
        m.v[e_] = (layout) == CM_ROWS ? cm_half(arr[(off) + r_ * (stride) + c_ / 8u], c_ % 8u)  \
                                      : cm_half(arr[(off) + c_ * (stride) + r_ / 8u], r_ % 8u); \
    }
// f32 m from / to an array of uvec4 holding f32 bit patterns, row-major (the only layout
// flash.comp uses with them): value (r, c) is word c % 4 of element off + r * stride + c / 4
#define CM_LOAD4F(m, arr, off, stride, layout)                                                  \
    [[unroll]] for (uint e_ = 0; e_ < 8u; e_++) {                                               \
        uint r_ = cm_rc(e_).x, c_ = cm_rc(e_).y;                                                \
        m.v[e_] = uintBitsToFloat(arr[(off) + r_ * (stride) + c_ / 4u][c_ % 4u]);               \
    }
#define CM_STORE4(m, arr, off, stride, layout)                                                  \
    [[unroll]] for (uint e_ = 0; e_ < 8u; e_++) {                                               \
        uint r_ = cm_rc(e_).x, c_ = cm_rc(e_).y;                                                \
        arr[(off) + r_ * (stride) + c_ / 4u][c_ % 4u] = floatBitsToUint(m.v[e_]);               \
    }
// m rounded to f16 into an array of uvec4 as CM_LOAD8 reads it, row-major: the two values of a
// 32-bit word (elements e, e + 1) are this invocation's
#define CM_STORE_P(m, arr, off, stride)                                                         \
    [[unroll]] for (uint e_ = 0; e_ < 8u; e_ += 2u) {                                           \
        uint r_ = cm_rc(e_).x, c_ = cm_rc(e_).y;                                                \
        arr[(off) + r_ * (stride) + c_ / 8u][(c_ % 8u) / 2u] = packHalf2x16(vec2(m.v[e_], m.v[e_ + 1u])); \
    }

shared float cm_a[WG / 32u * 256u];
shared float cm_b[WG / 32u * 256u];

// c + a b, with a and b exchanged through shared memory
cm_emu cm_muladd(cm_emu a, cm_emu b, cm_emu c)
{
    uint base = UNIT * 256u;
    barrier(); // the last product's reads are done
    [[unroll]] for (uint e = 0; e < 8u; e++) {
        uvec2 rc = cm_rc(e);
        cm_a[base + rc.x * 16u + rc.y] = a.v[e];
        cm_b[base + rc.x * 16u + rc.y] = b.v[e];
    }
    barrier();
    [[unroll]] for (uint e = 0; e < 8u; e++) {
        uint r = cm_rc(e).x, col = cm_rc(e).y;
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

// v of invocation LANE ^ x of the unit (x < 32): through hk_partial, synchronised by workgroup
// barriers (workgroup-uniform calls)
float cm_xor(float v, uint x)
{
    barrier(); // hk_partial's last reads are done
    hk_partial[gl_LocalInvocationIndex] = v;
    barrier();
    return hk_partial[gl_LocalInvocationIndex ^ x];
}
