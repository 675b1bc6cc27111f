/* hk-run: the model's hyperparameters and tensors (see model.h). Key and tensor names are
 * llama.cpp's (convert_hf_to_gguf.py), so files made for llama.cpp load as they are. */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES (1024ull << 20) /* weights per device buffer (one allocation each) */
#define VIEW_ALIGN 256u             /* every tensor view starts on this many bytes */

static int fail(char *err, size_t err_size, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(char *err, size_t err_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- hyperparameters ---- */

static int get_u32(const gguf_file *f, const char *arch, const char *key, uint32_t *out, int required, char *err,
                   size_t err_size)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", arch, key);
    uint64_t v;
    if (gguf_get_uint(f, name, &v) != 0) {
        if (!required)
            return 0;
        if (gguf_find_kv(f, name))
            return fail(err, err_size, "metadata %s is not a non-negative integer", name);
        return fail(err, err_size, "metadata %s is missing", name);
    }
    if (v == 0 || v > UINT32_MAX)
        return fail(err, err_size, "metadata %s = %llu is out of range", name, (unsigned long long)v);
    *out = (uint32_t)v;
    return 0;
}

static int get_f32(const gguf_file *f, const char *arch, const char *key, float *out, int required, char *err,
                   size_t err_size)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", arch, key);
    float v;
    if (gguf_get_f32(f, name, &v) != 0) {
        if (!required)
            return 0;
        return fail(err, err_size, "metadata %s is %s", name, gguf_find_kv(f, name) ? "not a float" : "missing");
    }
    if (!(v > 0) || v > 1e30f)
        return fail(err, err_size, "metadata %s = %g is out of range", name, (double)v);
    *out = v;
    return 0;
}

static int load_hparams(run_hparams *hp, const gguf_file *f, char *err, size_t err_size)
{
    static const struct { const char *name; run_arch arch; int neox; } archs[] = {
        {"llama", RUN_LLAMA, 0}, {"qwen2", RUN_QWEN2, 1}, {"qwen3", RUN_QWEN3, 1}, {"qwen3moe", RUN_QWEN3MOE, 1},
    };
    memset(hp, 0, sizeof *hp);
    if (gguf_get_string(f, "general.architecture", hp->arch_name, sizeof hp->arch_name) != 0)
        return fail(err, err_size, "metadata general.architecture is missing or not a short string");
    size_t i = 0;
    while (i < sizeof archs / sizeof archs[0] && strcmp(archs[i].name, hp->arch_name) != 0)
        i++;
    if (i == sizeof archs / sizeof archs[0])
        return fail(err, err_size, "architecture '%s' is not supported (llama, qwen2, qwen3, qwen3moe)", hp->arch_name);
    hp->arch = archs[i].arch;
    hp->rope_neox = archs[i].neox;
    const char *a = hp->arch_name;
    hp->rope_base = 10000.0f;
    hp->rope_freq_scale = 1.0f;
    hp->ctx_train = 4096;
    if (get_u32(f, a, "embedding_length", &hp->n_embd, 1, err, err_size) ||
        get_u32(f, a, "block_count", &hp->n_layer, 1, err, err_size) ||
        get_u32(f, a, "attention.head_count", &hp->n_head, 1, err, err_size) ||
        get_u32(f, a, "context_length", &hp->ctx_train, 0, err, err_size) ||
        get_f32(f, a, "attention.layer_norm_rms_epsilon", &hp->eps, 1, err, err_size) ||
        get_f32(f, a, "rope.freq_base", &hp->rope_base, 0, err, err_size))
        return -1;
    hp->n_head_kv = hp->n_head;
    if (get_u32(f, a, "attention.head_count_kv", &hp->n_head_kv, 0, err, err_size))
        return -1;
    if (hp->n_head % hp->n_head_kv)
        return fail(err, err_size, "%u attention heads are not a multiple of %u kv heads", hp->n_head, hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (get_u32(f, a, "attention.key_length", &hp->head_dim, 0, err, err_size))
        return -1;
    uint32_t value_length = hp->head_dim;
    if (get_u32(f, a, "attention.value_length", &value_length, 0, err, err_size))
        return -1;
    if (value_length != hp->head_dim)
        return fail(err, err_size, "key length %u and value length %u differ", hp->head_dim, value_length);
    if (hp->arch == RUN_QWEN3MOE) {
        if (get_u32(f, a, "expert_count", &hp->n_expert, 1, err, err_size) ||
            get_u32(f, a, "expert_used_count", &hp->n_expert_used, 1, err, err_size) ||
            get_u32(f, a, "expert_feed_forward_length", &hp->n_ff_exp, 1, err, err_size))
            return -1;
        if (hp->n_expert_used > hp->n_expert)
            return fail(err, err_size, "%u experts used of %u", hp->n_expert_used, hp->n_expert);
    } else if (get_u32(f, a, "feed_forward_length", &hp->n_ff, 1, err, err_size))
        return -1;
    char scaling[32];
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (gguf_get_string(f, key, scaling, sizeof scaling) == 0 && strcmp(scaling, "none") != 0) {
        if (strcmp(scaling, "linear") != 0)
            return fail(err, err_size, "rope scaling '%s' is not supported (none, linear)", scaling);
        float factor = 1.0f;
        if (get_f32(f, a, "rope.scaling.factor", &factor, 1, err, err_size))
            return -1;
        hp->rope_freq_scale = 1.0f / factor;
    }
    return 0;
}

/* ---- tensors ---- */

enum { NEED = 1, MATRIX = 2, VECTOR_F32 = 4, EXPERTS = 8, QUANTIZED = 16 };

static int tensor(run_weight *w, const gguf_file *f, const char *name, uint32_t flags, uint64_t k, uint64_t rows,
                  uint64_t experts, char *err, size_t err_size)
{
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) {
        if (flags & NEED)
            return fail(err, err_size, "tensor %s is missing", name);
        return 0;
    }
    uint64_t want[4] = {k, rows, experts, 1};
    if (t->ne[0] != want[0] || t->ne[1] != want[1] || t->ne[2] != want[2] || t->ne[3] != want[3])
        return fail(err, err_size, "tensor %s has shape [%llu, %llu, %llu, %llu], expected [%llu, %llu, %llu, 1]", name,
                    (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                    (unsigned long long)t->ne[3], (unsigned long long)k, (unsigned long long)rows,
                    (unsigned long long)experts);
    hk_type type;
    if (hk_type_from_ggml(t->ggml_type, &type) != HK_OK || type == HK_TYPE_Q8_1)
        return fail(err, err_size, "tensor %s is %s, a type hk-run does not take", name, gguf_type_name(t->ggml_type));
    if ((flags & VECTOR_F32) && type != HK_TYPE_F32)
        return fail(err, err_size, "tensor %s is %s; a norm or bias must be f32", name, hk_type_name(type));
    int quantized = type != HK_TYPE_F32 && type != HK_TYPE_F16;
    if ((flags & QUANTIZED) && !quantized)
        return fail(err, err_size, "tensor %s is %s; expert weights must be quantized (q8_0, k-quants)", name,
                    hk_type_name(type));
    if (k % hk_type_block_values(type))
        return fail(err, err_size, "tensor %s: %llu values per row is not a multiple of %s's block of %u", name,
                    (unsigned long long)k, hk_type_name(type), hk_type_block_values(type));
    w->present = 1;
    w->type = type;
    w->k = (uint32_t)k;
    w->rows = (uint32_t)rows;
    w->experts = (uint32_t)experts;
    w->bytes = t->bytes;
    w->data = gguf_tensor_data(f, t);
    return 0;
}

int run_model_load(run_model *m, const gguf_file *f, char *err, size_t err_size)
{
    memset(m, 0, sizeof *m);
    run_hparams *hp = &m->hp;
    if (load_hparams(hp, f, err, err_size))
        return -1;
    const gguf_tensor *embd = gguf_find_tensor(f, "token_embd.weight");
    if (!embd)
        return fail(err, err_size, "tensor token_embd.weight is missing");
    if (embd->ne[1] == 0 || embd->ne[1] > UINT32_MAX)
        return fail(err, err_size, "tensor token_embd.weight has %llu rows", (unsigned long long)embd->ne[1]);
    hp->n_vocab = (uint32_t)embd->ne[1];
    uint64_t e = hp->n_embd, q = (uint64_t)hp->n_head * hp->head_dim, kv = (uint64_t)hp->n_head_kv * hp->head_dim;
    if (tensor(&m->tok_embd, f, "token_embd.weight", NEED | MATRIX, e, hp->n_vocab, 1, err, err_size) ||
        tensor(&m->output_norm, f, "output_norm.weight", NEED | VECTOR_F32, e, 1, 1, err, err_size) ||
        tensor(&m->output, f, "output.weight", MATRIX, e, hp->n_vocab, 1, err, err_size) ||
        tensor(&m->rope_freqs, f, "rope_freqs.weight", VECTOR_F32, hp->head_dim / 2, 1, 1, err, err_size))
        return -1;
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return fail(err, err_size, "out of memory");
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        run_layer *l = &m->layers[i];
        char n[GGUF_MAX_NAME];
#define T(field, suffix, flags, k, rows, experts)                                                                     \
    do {                                                                                                               \
        snprintf(n, sizeof n, "blk.%u." suffix, i);                                                                    \
        if (tensor(&l->field, f, n, flags, k, rows, experts, err, err_size))                                           \
            return -1;                                                                                                 \
    } while (0)
        T(attn_norm, "attn_norm.weight", NEED | VECTOR_F32, e, 1, 1);
        T(wq, "attn_q.weight", NEED | MATRIX, e, q, 1);
        T(wk, "attn_k.weight", NEED | MATRIX, e, kv, 1);
        T(wv, "attn_v.weight", NEED | MATRIX, e, kv, 1);
        T(wo, "attn_output.weight", NEED | MATRIX, q, e, 1);
        T(ffn_norm, "ffn_norm.weight", NEED | VECTOR_F32, e, 1, 1);
        if (hp->arch == RUN_QWEN2) {
            T(bq, "attn_q.bias", NEED | VECTOR_F32, q, 1, 1);
            T(bk, "attn_k.bias", NEED | VECTOR_F32, kv, 1, 1);
            T(bv, "attn_v.bias", NEED | VECTOR_F32, kv, 1, 1);
        }
        if (hp->arch == RUN_QWEN3 || hp->arch == RUN_QWEN3MOE) {
            T(q_norm, "attn_q_norm.weight", NEED | VECTOR_F32, hp->head_dim, 1, 1);
            T(k_norm, "attn_k_norm.weight", NEED | VECTOR_F32, hp->head_dim, 1, 1);
        }
        if (hp->arch == RUN_QWEN3MOE) {
            T(router, "ffn_gate_inp.weight", NEED | MATRIX, e, hp->n_expert, 1);
            T(gate_exps, "ffn_gate_exps.weight", NEED | EXPERTS | QUANTIZED, e, hp->n_ff_exp, hp->n_expert);
            T(up_exps, "ffn_up_exps.weight", NEED | EXPERTS | QUANTIZED, e, hp->n_ff_exp, hp->n_expert);
            T(down_exps, "ffn_down_exps.weight", NEED | EXPERTS | QUANTIZED, hp->n_ff_exp, e, hp->n_expert);
        } else {
            T(gate, "ffn_gate.weight", NEED | MATRIX, e, hp->n_ff, 1);
            T(up, "ffn_up.weight", NEED | MATRIX, e, hp->n_ff, 1);
            T(down, "ffn_down.weight", NEED | MATRIX, hp->n_ff, e, 1);
        }
#undef T
    }
    if (!m->output.present) {
        m->output = m->tok_embd; /* tied embeddings */
        m->tied_output = 1;
    }
    return 0;
}

/* ---- synthetic models ---- */

const char *const run_synthetic_shapes[] = {"llama3-8b", "qwen3-30b-a3b", "tiny-llama", "tiny-moe", NULL};

static void synthetic_weight(run_weight *w, const char *name, hk_type type, uint64_t k, uint64_t rows, uint64_t experts)
{
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->present = 1;
    w->type = type;
    w->k = (uint32_t)k;
    w->rows = (uint32_t)rows;
    w->experts = (uint32_t)experts;
    w->bytes = hk_type_bytes(type, k) * rows * experts;
}

int run_model_synthetic(run_model *m, const char *shape, uint32_t layers, char *err, size_t err_size)
{
    memset(m, 0, sizeof *m);
    run_hparams *hp = &m->hp;
    /* arch, embedding, layers, heads, kv heads, head size, ff, vocabulary, experts, used, expert ff */
    static const struct {
        const char *name;
        run_arch arch;
        uint32_t e, l, h, kv, d, ff, v, ne, nu, ffe;
        float eps, base;
    } shapes[] = {
        {"llama3-8b", RUN_LLAMA, 4096, 32, 32, 8, 128, 14336, 128256, 0, 0, 0, 1e-5f, 500000.0f},
        {"qwen3-30b-a3b", RUN_QWEN3MOE, 2048, 48, 32, 4, 128, 0, 151936, 128, 8, 768, 1e-6f, 1000000.0f},
        {"tiny-llama", RUN_LLAMA, 256, 2, 4, 2, 64, 512, 1024, 0, 0, 0, 1e-5f, 10000.0f},
        {"tiny-moe", RUN_QWEN3MOE, 256, 2, 4, 2, 64, 0, 1024, 8, 2, 256, 1e-6f, 1000000.0f},
    };
    size_t i = 0;
    while (i < sizeof shapes / sizeof shapes[0] && strcmp(shapes[i].name, shape) != 0)
        i++;
    if (i == sizeof shapes / sizeof shapes[0])
        return fail(err, err_size, "no synthetic shape '%s' (llama3-8b, qwen3-30b-a3b, tiny-llama, tiny-moe)", shape);
    hp->arch = shapes[i].arch;
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", shapes[i].arch == RUN_LLAMA ? "llama" : "qwen3moe");
    hp->n_embd = shapes[i].e;
    hp->n_layer = layers ? layers : shapes[i].l;
    hp->n_head = shapes[i].h;
    hp->n_head_kv = shapes[i].kv;
    hp->head_dim = shapes[i].d;
    hp->n_ff = shapes[i].ff;
    hp->n_vocab = shapes[i].v;
    hp->n_expert = shapes[i].ne;
    hp->n_expert_used = shapes[i].nu;
    hp->n_ff_exp = shapes[i].ffe;
    hp->ctx_train = 4096;
    hp->eps = shapes[i].eps;
    hp->rope_base = shapes[i].base;
    hp->rope_freq_scale = 1.0f;
    hp->rope_neox = hp->arch != RUN_LLAMA;
    uint64_t e = hp->n_embd, q = (uint64_t)hp->n_head * hp->head_dim, kv = (uint64_t)hp->n_head_kv * hp->head_dim;
    synthetic_weight(&m->tok_embd, "token_embd.weight", HK_TYPE_Q4_K, e, hp->n_vocab, 1);
    synthetic_weight(&m->output_norm, "output_norm.weight", HK_TYPE_F32, e, 1, 1);
    synthetic_weight(&m->output, "output.weight", HK_TYPE_Q6_K, e, hp->n_vocab, 1);
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers)
        return fail(err, err_size, "out of memory");
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        run_layer *y = &m->layers[l];
        synthetic_weight(&y->attn_norm, "attn_norm", HK_TYPE_F32, e, 1, 1);
        synthetic_weight(&y->wq, "attn_q", HK_TYPE_Q4_K, e, q, 1);
        synthetic_weight(&y->wk, "attn_k", HK_TYPE_Q4_K, e, kv, 1);
        synthetic_weight(&y->wv, "attn_v", HK_TYPE_Q6_K, e, kv, 1);
        synthetic_weight(&y->wo, "attn_output", HK_TYPE_Q4_K, q, e, 1);
        synthetic_weight(&y->ffn_norm, "ffn_norm", HK_TYPE_F32, e, 1, 1);
        if (hp->arch == RUN_QWEN3MOE) {
            synthetic_weight(&y->q_norm, "attn_q_norm", HK_TYPE_F32, hp->head_dim, 1, 1);
            synthetic_weight(&y->k_norm, "attn_k_norm", HK_TYPE_F32, hp->head_dim, 1, 1);
            synthetic_weight(&y->router, "ffn_gate_inp", HK_TYPE_F32, e, hp->n_expert, 1);
            synthetic_weight(&y->gate_exps, "ffn_gate_exps", HK_TYPE_Q4_K, e, hp->n_ff_exp, hp->n_expert);
            synthetic_weight(&y->up_exps, "ffn_up_exps", HK_TYPE_Q4_K, e, hp->n_ff_exp, hp->n_expert);
            synthetic_weight(&y->down_exps, "ffn_down_exps", HK_TYPE_Q6_K, hp->n_ff_exp, e, hp->n_expert);
        } else {
            synthetic_weight(&y->gate, "ffn_gate", HK_TYPE_Q4_K, e, hp->n_ff, 1);
            synthetic_weight(&y->up, "ffn_up", HK_TYPE_Q4_K, e, hp->n_ff, 1);
            synthetic_weight(&y->down, "ffn_down", HK_TYPE_Q6_K, hp->n_ff, e, 1);
        }
    }
    return 0;
}

/* Random valid blocks: random bytes, every f16 scale set to a small finite value (norm and router
 * vectors near 1 and near 0) so that no weight is NaN or inf. */
static void fill_random(const run_weight *w, uint8_t *dst, uint64_t seed)
{
    uint64_t state = seed;
    for (uint64_t i = 0; i + 8 <= w->bytes; i += 8) {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        memcpy(dst + i, &z, 8);
    }
    uint32_t block = hk_type_block_bytes(w->type);
    static const uint16_t scale = 0x1400; /* 2^-10 */
    if (w->type == HK_TYPE_F32) {
        for (uint64_t i = 0; i + 4 <= w->bytes; i += 4) {
            float v = w->rows == 1 ? 1.0f + (float)(dst[i] % 64) / 256.0f : ((float)dst[i] - 128.0f) / 4096.0f;
            memcpy(dst + i, &v, 4);
        }
    } else if (w->type == HK_TYPE_F16) {
        for (uint64_t i = 0; i + 2 <= w->bytes; i += 2)
            dst[i + 1] = (uint8_t)((dst[i + 1] & 0x83) | 0x1c); /* |v| < 2^-8 */
    } else {
        for (uint64_t b = 0; b + block <= w->bytes; b += block) {
            /* Q8_0: d first; Q4_K / Q5_K: d and dmin first; Q6_K: d last */
            uint64_t at = w->type == HK_TYPE_Q6_K ? b + block - 2 : b;
            memcpy(dst + at, &scale, 2);
            if (w->type != HK_TYPE_Q8_0 && w->type != HK_TYPE_Q6_K)
                memcpy(dst + at + 2, &scale, 2);
        }
    }
}

/* ---- device memory ---- */

void run_pack_init(run_pack *p, uint64_t chunk)
{
    memset(p, 0, sizeof *p);
    p->chunk = chunk;
}

int run_pack_add(run_pack *p, hk_view *view, uint64_t bytes)
{
    if (p->n_views == p->cap_views) {
        uint32_t cap = p->cap_views ? 2 * p->cap_views : 64;
        hk_view **views = realloc(p->views, cap * sizeof *views);
        if (views)
            p->views = views;
        uint32_t *of = realloc(p->buffer_of, cap * sizeof *of);
        if (of)
            p->buffer_of = of;
        uint64_t *bb = realloc(p->buffer_bytes, (cap + 1) * sizeof *bb);
        if (bb)
            p->buffer_bytes = bb;
        if (!views || !of || !bb)
            return -1;
        if (!p->cap_views)
            p->buffer_bytes[0] = 0;
        p->cap_views = cap;
    }
    uint32_t b = p->n_buffers ? p->n_buffers - 1 : 0;
    if (!p->n_buffers) {
        p->n_buffers = 1;
        p->buffer_bytes[0] = 0;
    }
    uint64_t at = (p->buffer_bytes[b] + VIEW_ALIGN - 1) / VIEW_ALIGN * VIEW_ALIGN;
    if (at > 0 && at + bytes > p->chunk) {
        b = p->n_buffers++;
        at = 0;
    }
    view->buffer = NULL;
    view->offset = at;
    p->buffer_bytes[b] = at + (bytes ? bytes : 4);
    p->views[p->n_views] = view;
    p->buffer_of[p->n_views++] = b;
    return 0;
}

int run_pack_create(run_pack *p, hk_context *ctx, const char *what)
{
    p->buffers = calloc(p->n_buffers + 1, sizeof *p->buffers);
    if (!p->buffers) {
        fprintf(stderr, "hk-run: %s: out of memory\n", what);
        return -1;
    }
    for (uint32_t i = 0; i < p->n_buffers; i++)
        if (hk_buffer_create(ctx, p->buffer_bytes[i], &p->buffers[i]) != HK_OK) {
            fprintf(stderr, "hk-run: %s: %s\n", what, hk_last_error());
            return -1;
        }
    for (uint32_t i = 0; i < p->n_views; i++)
        p->views[i]->buffer = p->buffers[p->buffer_of[i]];
    return 0;
}

uint64_t run_pack_bytes(const run_pack *p)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < p->n_buffers; i++)
        sum += p->buffer_bytes[i];
    return sum;
}

void run_pack_free(run_pack *p)
{
    if (p->buffers)
        for (uint32_t i = 0; i < p->n_buffers; i++)
            hk_buffer_destroy(p->buffers[i]);
    free(p->buffers);
    free(p->views);
    free(p->buffer_of);
    free(p->buffer_bytes);
    memset(p, 0, sizeof *p);
}

/* ---- upload ---- */

int run_model_upload(run_model *m, hk_context *ctx)
{
    uint32_t per_layer = sizeof(run_layer) / sizeof(run_weight);
    run_weight *top[] = {&m->tok_embd, &m->output_norm, &m->output, &m->rope_freqs};
    int tied = m->tied_output;
    run_pack_init(&m->pack, CHUNK_BYTES);
    uint8_t *scratch = NULL;
    uint64_t scratch_bytes = 0, seed = 1;
    /* every present tensor, in file order within a layer; a tied output shares the embedding */
    for (uint32_t pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < 4 + m->hp.n_layer; i++) {
            run_weight *w = i < 4 ? top[i] : (run_weight *)&m->layers[i - 4];
            uint32_t count = i < 4 ? 1 : per_layer;
            for (uint32_t j = 0; j < count; j++) {
                if (!w[j].present || (tied && &w[j] == &m->output))
                    continue;
                if (pass == 0 && run_pack_add(&m->pack, &w[j].view, w[j].bytes) != 0) {
                    fprintf(stderr, "hk-run: out of memory\n");
                    return -1;
                }
                if (pass == 0)
                    continue;
                const uint8_t *data = w[j].data;
                if (!data) { /* synthetic */
                    if (w[j].bytes > scratch_bytes) {
                        free(scratch);
                        scratch_bytes = w[j].bytes;
                        if (!(scratch = malloc(scratch_bytes))) {
                            fprintf(stderr, "hk-run: out of memory\n");
                            return -1;
                        }
                    }
                    fill_random(&w[j], scratch, seed++);
                    data = scratch;
                }
                if (hk_buffer_upload(w[j].view.buffer, w[j].view.offset, data, w[j].bytes) != HK_OK) {
                    fprintf(stderr, "hk-run: uploading %s: %s\n", w[j].name, hk_last_error());
                    free(scratch);
                    return -1;
                }
            }
        }
        if (pass == 0 && run_pack_create(&m->pack, ctx, "weights") != 0)
            return -1;
    }
    free(scratch);
    if (tied)
        m->output = m->tok_embd;
    return 0;
}

void run_model_free(run_model *m)
{
    run_pack_free(&m->pack);
    free(m->layers);
    memset(m, 0, sizeof *m);
}
