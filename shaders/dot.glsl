// Packed int8 dot product: the sum of the products of the four signed bytes of a and b.
// HK_SCALAR_DOT: plain arithmetic, for devices without shaderIntegerDotProduct. Otherwise
// OpSDot (SPV_KHR_integer_dot_product), emitted through GL_EXT_spirv_intrinsics because glslang
// has no GL_EXT_integer_dot_product; the including shader enables that extension.
#ifdef HK_SCALAR_DOT
int hk_dot4(uint a, uint b)
{
    ivec4 va = ivec4(int(a << 24), int(a << 16), int(a << 8), int(a)) >> 24;
    ivec4 vb = ivec4(int(b << 24), int(b << 16), int(b << 8), int(b)) >> 24;
    return va.x * vb.x + va.y * vb.y + va.z * vb.z + va.w * vb.w;
}
#else
// 6019 DotProduct, 6018 DotProductInput4x8BitPacked; 4450 OpSDot; format 0 PackedVectorFormat4x8Bit
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int hk_sdot(uint a, uint b, spirv_literal int packed_format);
int hk_dot4(uint a, uint b) { return hk_sdot(a, b, 0); }
#endif

// acc + the sum of the 16 products of the signed bytes of a and b (an exact integer), one chain
// of dependent adds that packed-dot hardware takes as its accumulator
int hk_dot16(uvec4 a, uvec4 b, int acc)
{
    return acc + hk_dot4(a.x, b.x) + hk_dot4(a.y, b.y) + hk_dot4(a.z, b.z) + hk_dot4(a.w, b.w);
}
