// Byte access to GGUF weights read as `uint16_t w16[]` (blocks are only 2-byte aligned).
#ifndef HK_W16_GLSL
#define HK_W16_GLSL
uint hk_byte(uint base16, uint byte_index) { return (uint(w16[base16 + (byte_index >> 1)]) >> ((byte_index & 1u) * 8u)) & 0xFFu; }
#endif
