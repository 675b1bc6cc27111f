// The gated activation act(gate) * up of hk_swiglu (elementwise.comp) and of the fused
// hk_matvec_int8_glu (matvec.comp): one formula for both, so that they give the same bits.
// HK_GLU_GELU: GELU with the tanh approximation, else SiLU. HK_GLU_T: the type (float or vec4;
// float where undefined). Every operation is `precise` (NoContraction): a compiler may not fuse a
// product and a sum into an fma in one kernel and not in the other.
#ifndef HK_GLU_T
#define HK_GLU_T float
#endif

HK_GLU_T hk_glu(HK_GLU_T gate, HK_GLU_T up)
{
#ifdef HK_GLU_GELU
    // 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)) with u = sqrt(2/pi) (x + 0.044715 x^3): the same
    // value without the cancellation of 1 + tanh(u) where tanh(u) nears -1
    precise HK_GLU_T z = 1.5957691216057308 * (gate + 0.044715 * gate * gate * gate);
#else
    precise HK_GLU_T z = gate;
#endif
    precise HK_GLU_T act = gate / (1.0 + exp(-z));
    precise HK_GLU_T y = act * up;
    return y;
}
