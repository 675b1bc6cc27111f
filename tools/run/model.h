/* hk-run's model: a GGUF file's hyperparameters and tensors, the tensors uploaded as stored into a
 * few large device buffers (one view per tensor), and the forward pass recorded from library
 * calls. An example engine: what an engine author writes on top of libhkernel. */
#ifndef HK_RUN_MODEL_H
#define HK_RUN_MODEL_H

#include <hkernel.h>

#include "gguf_reader.h"

#include <stdint.h>

typedef enum run_arch { RUN_LLAMA, RUN_QWEN2, RUN_QWEN3, RUN_QWEN3MOE } run_arch;

/* One tensor as uploaded: GGUF rows of k values, rows per expert, experts (1 for a plain matrix or
 * vector). present 0: an optional tensor the file does not have. */
typedef struct run_weight {
    int present;
    char name[GGUF_MAX_NAME];
    hk_type type;
    hk_view view;
    uint32_t k, rows, experts;
    uint64_t bytes;
    const uint8_t *data; /* in the mapped file, until uploaded */
} run_weight;

typedef struct run_layer {
    run_weight attn_norm, wq, wk, wv, wo;
    run_weight bq, bk, bv;         /* qwen2 */
    run_weight q_norm, k_norm;     /* qwen3, qwen3moe */
    run_weight ffn_norm;
    run_weight gate, up, down;     /* dense FFN */
    run_weight router, gate_exps, up_exps, down_exps; /* MoE */
} run_layer;

typedef struct run_hparams {
    run_arch arch;
    char arch_name[32];
    uint32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    uint32_t n_expert, n_expert_used, n_ff_exp;
    uint32_t ctx_train;
    float eps, rope_base, rope_freq_scale;
    int rope_neox;
} run_hparams;

/* Device memory for many tensors: each add places a view; create makes buffers of at most chunk
 * bytes (a larger tensor gets one of its own) and points the views at them. */
typedef struct run_pack {
    uint64_t chunk;
    uint32_t n_views, cap_views, n_buffers;
    hk_view **views;
    uint32_t *buffer_of;
    uint64_t *buffer_bytes; /* [n_views + 1]: at most one buffer per view */
    hk_buffer **buffers;
} run_pack;
void run_pack_init(run_pack *p, uint64_t chunk);
int run_pack_add(run_pack *p, hk_view *view, uint64_t bytes);
/* 0, or -1 with a message naming what (e.g. "weights") printed. */
int run_pack_create(run_pack *p, hk_context *ctx, const char *what);
uint64_t run_pack_bytes(const run_pack *p);
void run_pack_free(run_pack *p);

typedef struct run_model {
    run_hparams hp;
    run_weight tok_embd, output_norm, output, rope_freqs;
    run_layer *layers;
    int tied_output; /* no output.weight: the head is token_embd */
    run_pack pack;
} run_model;

/* Reads the hyperparameters and checks every tensor the architecture needs (present, shape,
 * type); err gets a message naming the key or tensor. Returns 0 or -1. */
int run_model_load(run_model *m, const gguf_file *f, char *err, size_t err_size);
/* A model of a named shape with random valid weights in llama.cpp's Q4_K_M layout (Q4_K; Q6_K for
 * attn_v, ffn_down and the head; F32 norms and router), generated as they are uploaded:
 * "llama3-8b" (32 layers), "qwen3-30b-a3b" (48), and for CPU devices "tiny-llama" and "tiny-moe"
 * (2). layers 0: the shape's own depth. Returns 0, or -1 with a message listing the shapes. */
int run_model_synthetic(run_model *m, const char *shape, uint32_t layers, char *err, size_t err_size);
extern const char *const run_synthetic_shapes[];

/* Uploads the tensors as stored into a few device buffers (a synthetic model's generated on the way). Returns 0, or -1 with the library's
 * message printed. */
int run_model_upload(run_model *m, hk_context *ctx);
void run_model_free(run_model *m);

/* The vocabulary: each token's text as the tokenizer's pieces decode (SentencePiece's U+2581 as a
 * space and <0xNN> bytes; GPT-2 byte-level pieces back to bytes). */
typedef struct run_vocab {
    uint32_t n;
    int byte_level;       /* gpt2 */
    const uint8_t **piece;
    uint64_t *piece_len;
} run_vocab;
int run_vocab_load(run_vocab *v, const gguf_file *f, uint32_t n_vocab, char *err, size_t err_size);
/* Appends token id's text to out (NUL-terminated, out_size bytes, truncated if long). */
void run_vocab_text(const run_vocab *v, uint32_t id, char *out, size_t out_size);
void run_vocab_free(run_vocab *v);

#endif
