/* hk-run's forward pass: the activations, the KV cache and the per-step inputs of a model, and
 * graphs: a batch of m tokens recorded once, through a wrapped stream, into a command buffer of
 * hk-run's own, and replayed for every batch of that size. What changes between replays (the
 * tokens, their positions, the number of keys) lives in a host-visible buffer the graph reads on
 * the device. */
#ifndef HK_RUN_FORWARD_H
#define HK_RUN_FORWARD_H

#include <volk.h>

#include "model.h"

/* What a graph does with the logits of its last token. */
typedef enum run_tail {
    RUN_TAIL_ARGMAX, /* the greedy id into io next */
    RUN_TAIL_LOGITS, /* that, and the logits copied into io out */
    RUN_TAIL_PROBS   /* the softmax at the temperature into io out */
} run_tail;

/* Where a recorded batch reads its tokens, their positions and the key count, and where its greedy
 * pick goes: words of the host-visible buffer. */
typedef struct run_slots {
    hk_view tokens, positions, count, pick;
} run_slots;

/* A graph's calls, each followed by a GPU timestamp (hk-bench --step's breakdown by call): the
 * call's source text and its timestamp's index, in recording order. */
typedef struct run_profile_marks {
    uint32_t capacity, marks;
    const char **call;
    uint32_t *timestamp;
} run_profile_marks;

typedef struct run_state {
    hk_context *ctx;
    run_profile_marks *profile; /* NULL, or the graph being built records a timestamp after each call */
    const run_model *model;
    uint32_t batch;    /* most tokens a graph takes */
    uint32_t chain;    /* most decode steps one graph chains */
    uint32_t capacity; /* KV cache rows */
    float temperature;
    int f32_activations; /* quantized weights meet f32 (decode) or f16 (prefill GEMM) activations */
    int quantize_in_matvec; /* a token's RMSNorm / Q8_1 quantization inside each matvec that reads it
                             * (hk_matvec_int8_f32x), not a dispatch of its own: for comparisons (it
                             * costs more than the dispatch it saves: docs/perf.md) */
    int quant_in_matvec; /* only the quantizations with no norm (of the attention's and the dense
                          * gated activation's output) inside the O and down matvecs */
    int attn_q8_1_out; /* hk_sdpa_blk writes a token's attention output as the O projection's Q8_1
                        * input itself (out_type Q8_1), not f32 for hk_quantize_q8_1: for
                        * comparisons (slower on the H200: docs/perf.md) */
    int dense_glu_q8_1_out; /* a token's dense gate and up write the down projection's Q8_1 input
                             * themselves (hk_matvec_int8_glu_q8_1), not f32 for hk_quantize_q8_1:
                             * for comparisons (slower on the H200: docs/perf.md) */
    int moe_glu_quantizer_apart; /* a token's experts' gated activation quantized by
                                  * hk_quantize_q8_1, not written as Q8_1 by
                                  * hk_moe_matvec_int8_glu_q8_1: for comparisons */
    int qk_norm_apart;        /* Qwen3's q and k norms as hk_rmsnorm dispatches, not inside hk_rope: for
                               * comparisons */
    int moe_glu_ranked; /* a token's experts' GLU ranks its slots' experts from the router's logits
                         * itself (hk_moe_matvec_int8_glu_q8_1_ranked), hk_moe_route beside it for
                         * the combine's ids and weights: one dependent dispatch less; for
                         * comparisons */
    int norm_in_tail; /* the RMSNorm after a token's O and dense down projections in the projection's
                       * tail (hk_matvec_int8_add_norm), not a dispatch of its own: for comparisons
                       * (slower on the H100: docs/perf.md) */
    int rope_apart; /* a token's RoPE and cache append by hk_rope after the projections, not in
                     * the Q, K and V projections' epilogue (hk_matvec_int8_qkv): for comparisons
                     * (slower on the H200: docs/perf.md) */
    const run_weight *norm_done; /* the RMSNorm the last projection's tail made (xq, and xn where f32
                                  * weights read it): the next norm_for of it records nothing */
    hk_kv_layout kv;
    hk_view *k_cache, *v_cache; /* per layer */
    /* activations: [batch, ...] f32 unless said */
    hk_view x, xn, q, k, v, attn, tmp, ff_a, ff_b, moe_out, xq /* Q8_1 */, router_logits, logits, workspace;
    hk_view norm_workspace; /* hk_matvec_int8_add_norm's arrival words (not shared with the attention's) */
    hk_view xq_spare; /* one token's Q8_1 activation: a projection's tail writes the next norm's here
                       * (its input is xq), then the two swap while a graph is recorded */
    hk_view ff_q; /* a token's gated activation as Q8_1, written by the GLU that reads xq */
    hk_view expert_ids, expert_weights, expert_offsets, expert_slots, expert_dropped;
    run_pack pack;
    /* host-visible inputs and outputs */
    VkDevice device;
    VkQueue queue;
    VkBuffer io_buffer;
    VkDeviceMemory io_memory;
    hk_buffer *io;
    uint8_t *io_map;
    hk_view io_count, io_next, io_tokens, io_positions, io_out;
    VkCommandPool pool;
    VkFence fence;
} run_state;

/* Loads the Vulkan functions hk-run's own calls need (its volk) from the context's device: 0, or -1
 * with a message printed. */
int run_vulkan_load(hk_context *ctx);

/* The step's forms hk-run does not take by default, each a run_state flag (for comparisons:
 * hk-bench --step times each beside the default, hk-run --form takes them). Every form gives the
 * default's bits. */
typedef struct run_form {
    const char *tag;  /* hk-bench --step's CSV tag and hk-run --form's name */
    const char *what; /* hk-bench --step's line */
    size_t flag;      /* offsetof the int in run_state */
    int needs;        /* RUN_FORM_*: what the model must have for the form to change anything */
} run_form;
enum { RUN_FORM_ANY, RUN_FORM_DENSE_FFN, RUN_FORM_EXPERTS, RUN_FORM_QK_NORM, RUN_FORM_NORMAL_ROPE };
extern const run_form run_forms[];
extern const size_t run_form_count;
/* The form of this tag (NULL: none); whether a form changes anything in model m */
const run_form *run_form_find(const char *tag);
int run_form_applies(const run_form *f, const run_model *m);
/* Sets (on 1) or clears a form's flag, or (f NULL) clears every form's */
void run_form_set(run_state *s, const run_form *f, int on);

/* Allocates everything for graphs of up to batch tokens, or chains of up to chain decode steps, over
 * a cache of capacity rows of kv_type. graph_sizes: the batch sizes that will be recorded (the
 * attention workspace fits them all). Returns 0, or -1 with a message printed. */
int run_state_create(run_state *s, hk_context *ctx, const run_model *m, uint32_t batch, uint32_t chain,
                     uint32_t capacity, hk_type kv_type, const uint32_t *graph_sizes, uint32_t n_graph_sizes,
                     float temperature);
void run_state_destroy(run_state *s);

/* Records the forward pass of m tokens (at io->tokens, at io->positions, the cache then holding
 * io->count keys) into stream: the prepare stream or a graph's. 0, or -1 with the failing call
 * named. */
int run_record(run_state *s, hk_stream *stream, uint32_t m, run_tail tail, const run_slots *io);
/* What run_graph_build records: the batch, or each step of a chain. */
int run_record_graph(run_state *s, hk_stream *stream, uint32_t m, uint32_t steps, run_tail tail);

/* A recorded graph: a batch of m tokens, or a chain of steps single-token decode steps, each
 * step's greedy pick (hk_argmax) being the next step's token, so that the host reads the ids once
 * per chain instead of once per token. */
typedef struct run_graph {
    VkCommandBuffer cmd;
    hk_stream *stream;
    uint32_t m, steps;
    uint32_t kernels, barriers; /* recorded */
    uint32_t first_timestamp, last_timestamp;
} run_graph;

int run_graph_build(run_state *s, run_graph *g, uint32_t m, uint32_t steps, run_tail tail);
/* Runs the graph once and waits: a batch for tokens[0 .. m) at positions first .., a chain from
 * tokens[0] at position first. gpu_ms, if not NULL, gets the GPU time of the whole graph. */
int run_graph_exec(run_state *s, run_graph *g, const uint32_t *tokens, uint32_t first, double *gpu_ms);
/* GPU clocks fall while the host uploads a model or builds a graph: runs the graph as
 * run_graph_exec does, at least at_least times and until the device has been busy RUN_WARM_MS
 * (at most RUN_WARM_MAX runs; at_least where the device has no timestamps), before timing it. */
#define RUN_WARM_MS 150.0
#define RUN_WARM_MAX 4096u
int run_graph_warm(run_state *s, run_graph *g, const uint32_t *tokens, uint32_t first, uint32_t at_least);
void run_graph_free(run_state *s, run_graph *g);

/* The outputs after run_graph_exec: a batch's or single step's greedy pick, a chain's picks
 * (steps ids), the logits or probabilities of RUN_TAIL_LOGITS / RUN_TAIL_PROBS. */
uint32_t run_next_token(const run_state *s);
const uint32_t *run_chain_tokens(const run_state *s);
const float *run_out(const run_state *s);

/* Weight bytes one decode step reads: every matrix and vector of the layers and the head, the routed
 * experts' share of each bank (top-k of n_experts), one embedding row. */
uint64_t run_step_weight_bytes(const run_model *m);
/* Prints the GPU time of a graph of m tokens at position first by kind of call (a timestamp after
 * each call, the median of `replays` replays), beside the graph's own dispatches and time. 0, or
 * -1 with a message printed. Needs caps.timestamps. */
int run_profile(run_state *s, uint32_t m, uint32_t first, uint32_t replays, uint32_t dispatches, double whole_ms);
/* Prints a decode step's dispatches and barriers per token, its weight bytes and, where gpu_ms (per
 * token) and copy_gbs (device-to-device copy, read + write) are known, its share of the roofline. */
void run_print_step(const run_model *m, const run_graph *step, double gpu_ms, double copy_gbs);

#endif
