// GGUF Q5_K decode: super-block of 256 = f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]
// (176 bytes = 88 u16 = 11 x 16 bytes). Q4_K's decode (q4_k.glsl: the same scales and mins, the
// same nibbles of qs, at byte 48 here) with a 5th bit per value: value 32j + l (sub-block j) adds
// 16 to its quant where bit j of qh[l] is set, as ggml's dequantize_row_q5_K. The layout and the
// bit are all this file sets; the kernels' body is q4_k.glsl's.
#define HK_KQ_U16 88u // u16 per super-block
#define HK_KQ_QS 48u  // byte offset of qs in the block
#define HK_KQ_QH      // qh[32] at byte 16: the 5th bits
#include "q4_k.glsl"
