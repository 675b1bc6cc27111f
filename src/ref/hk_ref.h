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

typedef struct hk_block_q5_k {
    uint16_t d;        /* f16 super-block scale of the 6-bit scales */
    uint16_t dmin;     /* f16 super-block scale of the 6-bit mins */
    uint8_t scales[12];/* 8 x (6-bit scale, 6-bit min), packed as Q4_K's */
    uint8_t qh[32];    /* the 5th bit: bit j of qh[l] belongs to value 32j+l */
    uint8_t qs[128];   /* 256 x low 4 bits, as Q4_K's */
} hk_block_q5_k;       /* 176 bytes */

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

/* ---- Q4_K (and Q5_K) scale/min unpacking (sub-block j in 0..7) ------------------------------ */
void hk_q4k_scale_min(const uint8_t scales[12], int j, uint8_t *sc, uint8_t *m);

/* ---- dequantize: k values (k a multiple of the block size) ---------------------------------- */
void hk_dequant_row_f16(const uint16_t *x, float *y, size_t k); /* hk_f16_to_f32 of each value */
void hk_dequant_row_q8_0(const hk_block_q8_0 *x, float *y, size_t k);
void hk_dequant_row_q8_1(const hk_block_q8_1 *x, float *y, size_t k);
void hk_dequant_row_q4_k(const hk_block_q4_k *x, float *y, size_t k);
void hk_dequant_row_q5_k(const hk_block_q5_k *x, float *y, size_t k);
void hk_dequant_row_q6_k(const hk_block_q6_k *x, float *y, size_t k);

/* ---- quantize: reference quantizers (GGUF-compatible layouts; simple, not llama.cpp's search) */
/* Q8_0 and Q8_1 per 32 values: amax = max|x|, d = amax/127 in f32, stored as f16, q = roundf(x * (1/d))
 * against the f32 d (llama.cpp's quantize_row_q8_*_ref), except at the ends of the f16 d's range:
 *  - amax <= HK_Q8_1_AMAX_ZERO (127 * 2^-25 ~ 3.785e-6): d rounds to f16 0; the block is stored as
 *    all zeros (d = 0, every q 0; Q8_1 s = 0);
 *  - a NaN or inf in the block, or amax >= HK_Q8_1_AMAX_NAN (127 * 65520 = 8321040, where d rounds
 *    to f16 inf): d = NaN (f16 0x7E00), every q 0 (Q8_1 s = NaN), so that every dot product that
 *    reads the block is NaN rather than a silently finite number.
 * Between them the f16 d is subnormal for amax < HK_Q8_1_AMAX_NORMAL (~7.748e-3): its absolute
 * rounding error is then up to 2^-25, which adds up to 127 * 2^-25 ~ 3.8e-6 to the error of each
 * dequantized value (beside the d/2 ~ amax/254 of the rounding of q); for normal d the f16
 * rounding adds up to amax * 2^-11. */
#define HK_Q8_1_AMAX_ZERO 0x1.fcp-19f   /* 127 * 2^-25 */
#define HK_Q8_1_AMAX_NORMAL 0x1.fbc08p-8f /* the smallest amax whose f16(amax/127) is normal */
#define HK_Q8_1_AMAX_NAN 8321040.0f      /* 127 * 65520 */
void hk_quant_row_q8_0(const float *x, hk_block_q8_0 *y, size_t k);
/* Q8_1 is the activation format the int8 kernels consume: d and q as above, s = f16(d * sum(q))
 * with the f32 d (ggml's; it overflows to inf for blocks with amax above about 2047; the int8
 * kernels never read it). This is the exact definition the GPU quantizer kernel is held to. */
void hk_quant_row_q8_1(const float *x, hk_block_q8_1 *y, size_t k);
void hk_quant_row_q4_k(const float *x, hk_block_q4_k *y, size_t k);
void hk_quant_row_q5_k(const float *x, hk_block_q5_k *y, size_t k);
void hk_quant_row_q6_k(const float *x, hk_block_q6_k *y, size_t k);

/* ---- type traits (types.c): the one table the references and the public API share ---------- */
/* Types, numbered as in the public header's hk_type. */
enum {
    HK_REF_F32 = 0,
    HK_REF_Q8_0 = 1,
    HK_REF_Q4_K = 2,
    HK_REF_Q6_K = 3,
    HK_REF_Q8_1 = 4,
    HK_REF_F16 = 5,
    HK_REF_Q5_K = 6
};
typedef struct hk_type_traits {
    const char *name;      /* "q4_k", ... */
    uint32_t block_values; /* values per block (1 for f32/f16) */
    uint32_t block_bytes;  /* bytes per block */
    uint32_t align;        /* byte alignment of the type's natural storage (GGUF blocks: 2) */
    uint32_t ggml_type;    /* GGML_TYPE_* id as in a .gguf file */
    uint32_t roles;        /* HK_REF_ROLE_*: what the kernels take the type as */
} hk_type_traits;
/* Roles of a type: quantized weights (the matvecs, MMQ, the f16 GEMM; not F16, which hk_matvec
 * and hk_gemm_f16 take too: each kernel lists the types it takes in its own table), a KV cache's
 * rows, activations of the int8 kernels. */
enum { HK_REF_ROLE_WEIGHT = 1, HK_REF_ROLE_KV = 2, HK_REF_ROLE_ACTIVATION = 4 };
/* Number of type ids (some may be unused: hk_ref_type gives NULL). */
#define HK_REF_TYPES 7
/* The traits of a type, NULL for an unknown one. */
const hk_type_traits *hk_ref_type(int type);
/* The type with this ggml id, -1 if the library has none. */
int hk_ref_type_from_ggml(uint32_t ggml_type);
/* Bytes of k values of a type (0 for an unknown type or k off the block). */
size_t hk_ref_row_bytes(int type, size_t k);

/* ---- reference kernels ---------------------------------------------------------------------- */
/* y[r] = sum_i dequant(W[r])[i] * x[i], r < rows; W rows are contiguous GGUF rows (Q8_0, Q4_K,
 * Q5_K, Q6_K, or F16 values by hk_f16_to_f32). Products and sums in double, rounded to f32 once (gemv
 * and rmsnorm too). */
void hk_ref_matvec(int type, const void *w, const float *x, float *y, size_t rows, size_t k);
/* The int8 matvec: x given as k/32 Q8_1 blocks. The plain math: y[r] = sum_i deq(W[r])[i] *
 * deq(xq)[i] with deq(xq) = d * q (hk_dequant_row_q8_1; the s field is never read), each product
 * and the sum in double, stored as f32. IEEE throughout: a NaN or inf anywhere in the math gives
 * NaN or inf the same way for every weight type (0 * inf is NaN). */
void hk_ref_matvec_q8_1(int type, const void *w, const hk_block_q8_1 *x, float *y, size_t rows, size_t k);
/* MoE expert gather: w holds n_experts experts of n GGUF rows; y[s*n + r] = expert ids[s]'s row r
 * . x_s, x_s = x + s*k if x_per_slot else x. An id >= n_experts gives n zeros. */
void hk_ref_moe_matvec(int type, const void *w, const float *x, int x_per_slot, const uint32_t *ids, float *y,
                       size_t n_experts, size_t n, size_t k, size_t slots);
/* The same with x as Q8_1 blocks (x_s = x + s*k/32), each slot as hk_ref_matvec_q8_1 (double). */
void hk_ref_moe_matvec_q8_1(int type, const void *w, const hk_block_q8_1 *x, int x_per_slot, const uint32_t *ids,
                            float *y, size_t n_experts, size_t n, size_t k, size_t slots);
/* MoE router: per token, softmax over the n_experts logits; the top_k experts by logit in
 * descending order (ties: the lower index; NaN never chosen; missing ones 0xFFFFFFFF with weight
 * 0) and their softmax weights, rescaled to sum 1 over the k if renormalize. */
void hk_ref_moe_route(const float *logits, size_t tokens, size_t n_experts, size_t top_k, int renormalize,
                      uint32_t *ids, float *weights);
/* Argmax of each row of n logits: ids[r] = the lowest index of the largest x[r, i]; NaN never
 * chosen (0xFFFFFFFF for a row of NaN only). */
void hk_ref_argmax(const float *x, uint32_t *ids, size_t rows, size_t n);
/* Softmax of each row of n logits over temperature, in double: y[r, i] = exp((x[r, i] - m) / t) /
 * sum_j exp((x[r, j] - m) / t), m the row's maximum; a row with a NaN is NaN; a row whose maximum
 * is infinite shares 1 among its entries equal to it (the limit of equal logits), the others 0. */
void hk_ref_softmax(const float *x, float *y, size_t rows, size_t n, float temperature);
/* hk_softmax against hk_ref_softmax, per row: the device's exp (Vulkan allows 3 + 2|a| ulp) and
 * the f32 sum of up to a vocabulary of terms, far above the ~1e-7 of f32 rounding alone, far below
 * a lost term or a wrong maximum */
#define HK_GATE_SOFTMAX 1e-5
/* Embedding lookup: y[i*k .. +k] = row ids[i] of W (rows GGUF rows of k values of `type`: f32 copied
 * bit for bit, f16 by hk_f16_to_f32, Q8_0, Q4_K, Q5_K, Q6_K by hk_dequant_row_*), i < n_ids; zeros for an
 * id >= rows (or a type without rows). Dequantization is a fixed f32 formula per value, so this is
 * exactly what hk_get_rows must give. */
void hk_ref_get_rows(int type, const void *w, const uint32_t *ids, float *y, size_t n_ids, size_t rows, size_t k);
/* MoE combine: y[t*n + i] = w[t,0]*x[s0, i] + w[t,1]*x[s0+1, i] + ... (+ residual[t*n + i] where
 * residual is not NULL), s0 = t*top_k, x [tokens*top_k, n]: in f32, each product and each sum
 * rounded in that order, with no FMA. The kernel is held to these bits, so unlike the other
 * references this one is not in double. y may be residual (in place). */
void hk_ref_moe_combine(const float *x, const float *weights, const float *residual, float *y, size_t tokens,
                        size_t top_k, size_t n);
/* y[r] = sum_i W[r*k + i] * x[i] (f32). */
void hk_ref_gemv_f32(const float *w, const float *x, float *y, size_t rows, size_t k);
/* y[r,i] = x[r,i] / sqrt(mean_i(x[r,:]^2) + eps) * weight[i]. */
void hk_ref_rmsnorm(const float *x, const float *weight, float *y, size_t rows, size_t n, float eps);
/* y[i] = a[i] + alpha * b[i] as two f32 operations, each rounded to nearest even: p = alpha * b[i]
 * rounded to f32, then a[i] + p rounded to f32 (no fma). IEEE for NaN and inf. y may be a or b. */
void hk_ref_add(const float *a, const float *b, float *y, size_t n, float alpha);
/* y[r*n + i] = act(gate[r*in_stride + i]) * up[r*in_stride + i] in double, rounded to f32 once:
 * act(x) = x / (1 + exp(-x)) (gelu 0), 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (gelu 1).
 * y may be gate where in_stride is n. */
void hk_ref_glu(const float *gate, const float *up, float *y, size_t rows, size_t n, size_t in_stride, int gelu);

/* Scaled dot-product attention, two-pass softmax in double: q [n_q, n_heads, head_dim], k and v
 * packed [n_kv_heads, seq_k, head_dim], out [n_q, n_heads, head_dim]; query head h reads kv head
 * h / (n_heads / n_kv_heads); causal: query i sees keys 0 .. seq_k - n_q + i. */
void hk_ref_sdpa(const float *q, const float *k, const float *v, float *out, size_t n_q, size_t n_heads,
                 size_t n_kv_heads, size_t seq_k, size_t head_dim, float scale, int causal);
/* Attention on the matrix cores (f16 q, k, v; f32 accumulation) against hk_ref_sdpa */
#define HK_GATE_SDPA_F16 5e-3
/* Rotary embedding in place on x [n_tokens, n_heads, head_dim]: pair i (of rot_dim/2) of token t
 * turns by positions[t] * freq_scale * theta_base^(-2i/rot_dim) / freq_factors[i] (angles and
 * rotation in double); neox pairs dims (i, i + rot_dim/2), else (2i, 2i+1); rot_dim 0 means
 * head_dim; freq_factors may be NULL. */
void hk_ref_rope(float *x, const uint32_t *positions, size_t n_tokens, size_t n_heads, size_t head_dim,
                 size_t rot_dim, int neox, float theta_base, float freq_scale, const float *freq_factors);

/* ---- gates: how close each GPU kernel must come to its reference (scale-relative) ----------- */
/* f32 arithmetic in another summation order: far above rounding, far below any decode bug */
#define HK_GATE_F32 1e-4
/* the activation is quantized to int8 (Q8_1): about 1/254 of each block's amax; measures only the
 * Q8_1 rounding of x (an int8 kernel against the f32 matvec on the unquantized x) */
#define HK_GATE_INT8 1e-2
/* an int8 kernel against hk_ref_matvec_q8_1 (double) on the same Q8_1 x: the kernel computes the
 * same contraction in f32 (integer dot products are exact; the f32 rounding of per-block terms and
 * of the sum stays near 1e-6 of the output scale at the shapes of the tests); anything that is not
 * that contraction (a trusted s, a wrong scale) lands far above it */
#define HK_GATE_EXACT 1e-5
/* hk_swiglu against hk_ref_glu: f32 exp, one division and two products (a few units in the last
 * place of the largest outputs); a wrong constant or a lost term lands far above it */
#define HK_GATE_GLU 1e-6

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

/* rows GGUF rows of k values of a weight type (malloc'ed; NULL if out of memory): raw random
 * blocks (raw_blocks: every bit pattern, finite f16 fields; for F16 and F32, whose blocks are one
 * value, every bit pattern of the values, infinities and NaNs too) or rows quantized (F16:
 * rounded) from random values of a different magnitude and sign balance per row, like real weight
 * matrices. */
uint8_t *hk_random_weights(hk_rng *r, int type, size_t rows, size_t k, int raw_blocks);
/* A MoE routing: ids [tokens x top_k] (malloc'ed; NULL if out of memory), each token's experts
 * drawn at random, distinct within the token (where n_experts allows: after 1000 draws a repeat
 * stays). */
uint32_t *hk_random_routing(hk_rng *r, uint32_t tokens, uint32_t top_k, uint32_t n_experts);

/* The compare measure of every gate: max|got - ref| / max|ref| (per-element relative error
 * explodes on outputs that cancel to near zero). Infinite if any got is not finite. */
double hk_scale_rel(const float *got, const float *ref, size_t n);

/* ---- prefill: int8 GEMM (MMQ) and MoE expert grouping (mmq.c) ------------------------------ */
/* out[i*n + j] = dequant(W row j) . dequant(x row i) for i < m, j < n: W n GGUF rows of k values of
 * `type` (hk_dequant_row_*), x m rows of k/32 Q8_1 blocks dequantized as d*q (s is never read),
 * the dot in double, stored as f32. Returns 0 if out of host memory (out then incomplete; the
 * library's tuner calls it, so it never aborts). */
int hk_ref_mmq(int type, const void *w, const hk_block_q8_1 *x, float *out, size_t m, size_t n, size_t k);
/* Groups slots by expert: offsets[e] (n_experts + 1 entries) the exclusive prefix of the counts of
 * ids == e, slots the slot indices of expert 0, 1, ... in ascending order within each, entries
 * past offsets[n_experts] set to 0xFFFFFFFF, *dropped the number of ids >= n_experts. */
void hk_ref_moe_expert_rows(const uint32_t *ids, size_t n_slots, size_t n_experts, uint32_t *offsets, uint32_t *slots,
                            uint32_t *dropped);
/* For each expert e and each listed slot s in slots[offsets[e] .. offsets[e+1]) (offsets clamped
 * into 0..n_slots, slot values >= n_slots skipped): out[s*n .. +n] = W[e] . x row
 * s / slots_per_x_row, as hk_ref_mmq (W: n_experts experts of n rows). Rows of unlisted slots are
 * left as they were. Returns 0 if out of host memory (out then incomplete). */
int hk_ref_mmq_id(int type, const void *w, const hk_block_q8_1 *x, const uint32_t *offsets, const uint32_t *slots,
                  float *out, size_t n_experts, size_t n, size_t k, size_t n_slots, size_t slots_per_x_row);
/* Gates of the int8 GEMM against hk_ref_mmq: the int32 block sums are exact, so only f32 rounding
 * of the scale products and of the sum over blocks remains. */
#define HK_GATE_MMQ 1e-6
#define HK_GATE_MMQ_COOPMAT 1e-5

/* ---- prefill GEMM ---------------------------------------------------------------------------- */
/* out[i*n + j] = sum_l x[i*k + l] * dequant(W[j])[l], i < m, j < n: W is n contiguous GGUF rows of k
 * values (Q8_0, Q4_K, Q5_K, Q6_K or F16; raw bytes, any alignment), x f32 row-major [m, k]. Full precision:
 * the dequantized weights and x as given, products and sums in double, stored as f32. An unknown
 * type or k off the block gives zeros. Returns 0 if out of host memory (out then incomplete). */
int hk_ref_gemm(int type, const void *w, const float *x, float *out, size_t m, size_t n, size_t k);
/* The same with x and the dequantized weights first rounded to f16 (round to nearest even): what
 * hk_gemm_f16's products see, so the GPU differs from it only by its f32 summation order and its
 * f32 -> f16 rounding (Vulkan allows round-to-zero as well as to nearest even). */
int hk_ref_gemm_f16(int type, const void *w, const float *x, float *out, size_t m, size_t n, size_t k);
/* prefill f16 GEMM against hk_ref_gemm: the f16 rounding of both operands (the bound) */
#define HK_GATE_F16 5e-2
/* ... and against hk_ref_gemm_f16 (the same f16 operands, summed in double), which a correct
 * kernel stays far under: f32 summation order (~1e-6) and a device that rounds f32 -> f16 toward
 * zero (~1e-3) */
#define HK_GATE_F16_OPERANDS 1e-2

#ifdef __cplusplus
}
#endif
#endif
