/* hk_ref.h — plain-C specification of every libhkernel kernel: GGUF block formats, f16
 * conversion, reference quantizers (for test data) and scalar reference kernels.
 * No Vulkan here: tests, tools and the tuner call these, and they are meant to be read as the
 * definition of what each GPU kernel computes. Written for clarity, not speed. */
#ifndef HK_REF_H
#define HK_REF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GGUF block layouts, byte for byte ------------------------------------------------------ */
#define HK_QK8_0 32  /* values per Q8_0 / Q8_1 block */
#define HK_QK_K 256  /* values per K-quant super-block */

typedef struct hk_block_q8_0 {
    uint16_t d;        /* f16 scale */
    int8_t qs[32];
} hk_block_q8_0;       /* 34 bytes */

typedef struct hk_block_q8_1 {
    uint16_t d;        /* f16 scale */
    uint16_t s;        /* f16 of d * sum(qs) */
    int8_t qs[32];
} hk_block_q8_1;       /* 36 bytes */

typedef struct hk_block_q4_k {
    uint16_t d;        /* f16 super-block scale of the 6-bit scales */
    uint16_t dmin;     /* f16 super-block scale of the 6-bit mins */
    uint8_t scales[12];/* 8 x (6-bit scale, 6-bit min), packed */
    uint8_t qs[128];   /* 256 x 4-bit quants */
} hk_block_q4_k;       /* 144 bytes */

typedef struct hk_block_q6_k {
    uint8_t ql[128];   /* low 4 bits */
    uint8_t qh[64];    /* high 2 bits */
    int8_t scales[16]; /* 8-bit scale per 16 values */
    uint16_t d;        /* f16 super-block scale */
} hk_block_q6_k;       /* 210 bytes */

/* ---- f16 ------------------------------------------------------------------------------------ */
/* IEEE binary16 <-> binary32; f32->f16 rounds to nearest even, handles inf/nan/subnormals. */
float hk_f16_to_f32(uint16_t h);
uint16_t hk_f32_to_f16(float f);

/* ---- Q4_K scale/min unpacking (sub-block j in 0..7) ------------------------------------------ */
void hk_q4k_scale_min(const uint8_t scales[12], int j, uint8_t *sc, uint8_t *m);

/* ---- dequantize: k values (k a multiple of the block size) ---------------------------------- */
void hk_dequant_row_q8_0(const hk_block_q8_0 *x, float *y, size_t k);
void hk_dequant_row_q8_1(const hk_block_q8_1 *x, float *y, size_t k);
void hk_dequant_row_q4_k(const hk_block_q4_k *x, float *y, size_t k);
void hk_dequant_row_q6_k(const hk_block_q6_k *x, float *y, size_t k);

/* ---- quantize: reference quantizers (GGUF-compatible layouts; simple, not llama.cpp's search) */
void hk_quant_row_q8_0(const float *x, hk_block_q8_0 *y, size_t k);
/* Q8_1 is the activation format the int8 kernels consume: d = amax/127, q = round(x/d),
 * s = d * sum(q). This is the exact definition the GPU quantizer kernel is held to. */
void hk_quant_row_q8_1(const float *x, hk_block_q8_1 *y, size_t k);
void hk_quant_row_q4_k(const float *x, hk_block_q4_k *y, size_t k);
void hk_quant_row_q6_k(const float *x, hk_block_q6_k *y, size_t k);

/* ---- type traits (types.c): the one table the references and the public API share ---------- */
/* Types, numbered as in the public header's hk_type. */
enum { HK_REF_F32 = 0, HK_REF_Q8_0 = 1, HK_REF_Q4_K = 2, HK_REF_Q6_K = 3, HK_REF_Q8_1 = 4, HK_REF_F16 = 5 };
typedef struct hk_type_traits {
    const char *name;      /* "q4_k", ... */
    uint32_t block_values; /* values per block (1 for f32/f16) */
    uint32_t block_bytes;  /* bytes per block */
    uint32_t align;        /* byte alignment of the type's natural storage (GGUF blocks: 2) */
    uint32_t ggml_type;    /* GGML_TYPE_* id as in a .gguf file */
} hk_type_traits;
/* The traits of a type, NULL for an unknown one. */
const hk_type_traits *hk_ref_type(int type);
/* The type with this ggml id, -1 if the library has none. */
int hk_ref_type_from_ggml(uint32_t ggml_type);
/* Bytes of k values of a type (0 for an unknown type or k off the block). */
size_t hk_ref_row_bytes(int type, size_t k);

/* ---- reference kernels ---------------------------------------------------------------------- */
/* y[r] = sum_i dequant(W[r])[i] * x[i], r < rows; W rows are contiguous GGUF rows.
 * Accumulates in f32 per block, then adds the block sums in order. */
void hk_ref_matvec(int type, const void *w, const float *x, float *y, size_t rows, size_t k);
/* The int8 matvec: x given as k/32 Q8_1 blocks. Per 16 values, scale * dx * sum(q * xq) with the
 * weight's integer quants q (Q6_K: q - 32) and scale (d*sc); Q4_K subtracts dmin*m * s per 32
 * values, using the Q8_1 block's s for sum(x) as llama.cpp's vec_dot_q4_K_q8_1 does. */
void hk_ref_matvec_q8_1(int type, const void *w, const hk_block_q8_1 *x, float *y, size_t rows, size_t k);
/* MoE expert gather: w holds n_experts experts of n GGUF rows; y[s*n + r] = expert ids[s]'s row r
 * . x_s, x_s = x + s*k if x_per_slot else x. An id >= n_experts gives n zeros. */
void hk_ref_moe_matvec(int type, const void *w, const float *x, int x_per_slot, const uint32_t *ids, float *y,
                       size_t n_experts, size_t n, size_t k, size_t slots);
/* The same with x as Q8_1 blocks (x_s = x + s*k/32), each slot as hk_ref_matvec_q8_1. */
void hk_ref_moe_matvec_q8_1(int type, const void *w, const hk_block_q8_1 *x, int x_per_slot, const uint32_t *ids,
                            float *y, size_t n_experts, size_t n, size_t k, size_t slots);
/* MoE router: per token, softmax over the n_experts logits; the top_k experts by logit in
 * descending order (ties: the lower index; NaN never chosen; missing ones 0xFFFFFFFF with weight
 * 0) and their softmax weights, rescaled to sum 1 over the k if renormalize. */
void hk_ref_moe_route(const float *logits, size_t tokens, size_t n_experts, size_t top_k, int renormalize,
                      uint32_t *ids, float *weights);
/* y[r] = sum_i W[r*k + i] * x[i] (f32). */
void hk_ref_gemv_f32(const float *w, const float *x, float *y, size_t rows, size_t k);
/* y[r,i] = x[r,i] / sqrt(mean_i(x[r,:]^2) + eps) * weight[i]. */
void hk_ref_rmsnorm(const float *x, const float *weight, float *y, size_t rows, size_t n, float eps);

/* Scaled dot-product attention, two-pass softmax in double: q [n_q, n_heads, head_dim], k and v
 * packed [n_kv_heads, seq_k, head_dim], out [n_q, n_heads, head_dim]; query head h reads kv head
 * h / (n_heads / n_kv_heads); causal: query i sees keys 0 .. seq_k - n_q + i. */
void hk_ref_sdpa(const float *q, const float *k, const float *v, float *out, size_t n_q, size_t n_heads,
                 size_t n_kv_heads, size_t seq_k, size_t head_dim, float scale, int causal);
/* Rotary embedding in place on x [n_tokens, n_heads, head_dim]: pair i (of rot_dim/2) of token t
 * turns by positions[t] * freq_scale * theta_base^(-2i/rot_dim) / freq_factors[i] (angles and
 * rotation in double); neox pairs dims (i, i + rot_dim/2), else (2i, 2i+1); rot_dim 0 means
 * head_dim; freq_factors may be NULL. */
void hk_ref_rope(float *x, const uint32_t *positions, size_t n_tokens, size_t n_heads, size_t head_dim,
                 size_t rot_dim, int neox, float theta_base, float freq_scale, const float *freq_factors);

/* ---- gates: how close each GPU kernel must come to its reference (scale-relative) ----------- */
/* f32 arithmetic in another summation order: far above rounding, far below any decode bug */
#define HK_GATE_F32 1e-4
/* the activation is quantized to int8 (Q8_1): about 1/254 of each block's amax */
#define HK_GATE_INT8 1e-2

/* ---- test data ------------------------------------------------------------------------------ */
typedef struct hk_rng {
    uint64_t s; /* seed: any non-zero value */
} hk_rng;

uint64_t hk_rng_next(hk_rng *r);
/* uniform in [lo, hi) */
float hk_rng_uniform(hk_rng *r, float lo, float hi);
void hk_rng_fill(hk_rng *r, float *v, size_t n, float lo, float hi);
/* Raw GGUF blocks of a type (HK_REF_*): random bytes, then every f16 field set to a finite random
 * value in [-scale, scale], so every quant bit pattern occurs without inf/nan. */
void hk_random_blocks(hk_rng *r, int type, void *blocks, size_t n_blocks, float scale);

/* The compare measure of every gate: max|got - ref| / max|ref| (per-element relative error
 * explodes on outputs that cancel to near zero). Infinite if any got is not finite. */
double hk_scale_rel(const float *got, const float *ref, size_t n);

/* ---- prefill GEMM ---------------------------------------------------------------------------- */
/* out[i*n + j] = sum_l x[i*k + l] * dequant(W[j])[l], i < m, j < n: W is n contiguous GGUF rows of k
 * values (Q8_0, Q4_K or Q6_K; raw bytes, any alignment), x f32 row-major [m, k]. Full precision:
 * the dequantized weights and x as given, products and sums in double, stored as f32. An unknown
 * type or k off the block gives zeros. Returns 0 if out of host memory (out then incomplete). */
int hk_ref_gemm(int type, const void *w, const float *x, float *out, size_t m, size_t n, size_t k);
/* The same with x and the dequantized weights first rounded to f16 (round to nearest even): what
 * hk_gemm_f16's products see, so the GPU differs from it only by its f32 summation order and its
 * f32 -> f16 rounding (Vulkan allows round-to-zero as well as to nearest even). */
int hk_ref_gemm_f16(int type, const void *w, const float *x, float *out, size_t m, size_t n, size_t k);
/* prefill f16 GEMM against hk_ref_gemm: the f16 rounding of both operands (the bound) */
#define HK_GATE_F16 5e-2

#ifdef __cplusplus
}
#endif
#endif
