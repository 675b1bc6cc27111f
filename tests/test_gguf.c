/* test_gguf.c — the library fed by another producer. tests/gguf/make_gguf.py writes a real .gguf
 * file with gguf-py (the `gguf` package on PyPI: Q8_0 quantized by gguf-py, raw random Q4_K, Q5_K
 * and Q6_K blocks, hand-made edge blocks, expert banks, F16, F32, the activations and a MoE routing) and a
 * second GGUF file with what gguf-py and numpy say about it (numpy's dequantization and double
 * matvecs). This program reads both with the GGUF reader hk-check uses (tools/gguf_reader.c) and checks:
 *   - the reader: metadata of every type read back, and clean errors (no crash) on every
 *     truncation, on single-byte corruptions of the header and on hand-made malformed files;
 *   - our reference dequantizers and f16 conversion equal numpy's bit for bit, and our Q8_0
 *     quantizer writes gguf-py's bytes;
 *   - the GPU kernels on the tensor bytes exactly as they sit in the file (the data region uploaded
 *     as it is, views at the file's offsets; and one copy of each weight at a 2-byte offset flush
 *     against the end of its buffer): hk_matvec against numpy's double matvec (f32 gate; the
 *     quantized weights and the F16 matrix),
 *     hk_matvec_int8 on hk_quantize_q8_1(x) against the double contraction deq(W).deq(xq) from
 *     numpy's deq(W) and the Q8_1 blocks' d*q (1e-5; the Q8_1 s field is not used), hk_moe_matvec
 *     and hk_moe_matvec_int8 on the file's expert banks with the file's routing, hk_gemv_f32,
 *     hk_get_rows of every weight, F16 and F32 tensor against numpy's dequantization, bit for bit.
 * usage: test_gguf MODEL.gguf EXPECTED.gguf */
#include "gguf_reader.h"
#include "hk_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* int8 kernels against the exact contraction of the values they are given: only f32 summation
 * order separates them */
#define GATE_INT8_EXACT 1e-5
#define FLUSH_OFFSET 34 /* the copy at a 2-byte offset: 34 % 4 == 2, 34 % 16 == 2 */

static hk_context *ctx;
static gguf_file model, expected;
static uint8_t *model_bytes, *expected_bytes;
static hk_buffer *file_buffer; /* the model's data region, as it is in the file */

/* ---- files ------------------------------------------------------------------------------------ */

static uint8_t *read_file(const char *path, uint64_t *size)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        data = malloc(n ? (size_t)n : 1);
        if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
    }
    if (f)
        fclose(f);
    *size = data ? (uint64_t)n : 0;
    return data;
}

/* An expected tensor "<name>.<what>" of ggml type `type` and `values` values, copied out (the
 * file's bytes need not be aligned for the type); NULL and a failed check if it is missing. */
static void *expected_copy(const char *name, const char *what, uint32_t type, uint64_t values)
{
    char full[GGUF_MAX_NAME + 16];
    snprintf(full, sizeof full, "%s.%s", name, what);
    const gguf_tensor *t = gguf_find_tensor(&expected, full);
    if (!t || t->ggml_type != type || gguf_tensor_values(t) != values) {
        hk_check(0, full, "missing from the expected file, or of another type or size");
        return NULL;
    }
    void *copy = malloc(t->bytes ? t->bytes : 1);
    memcpy(copy, gguf_tensor_data(&expected, t), t->bytes);
    return copy;
}

static float *expected_f64_as_f32(const char *name, const char *what, uint64_t values)
{
    double *d = expected_copy(name, what, GGML_TYPE_F64, values);
    if (!d)
        return NULL;
    float *f = malloc(values * sizeof *f);
    for (uint64_t i = 0; i < values; i++)
        f[i] = (float)d[i];
    free(d);
    return f;
}

/* The x a weight multiplies (named in the expected file's metadata). */
static const gguf_tensor *x_of(const char *name)
{
    char key[GGUF_MAX_NAME + 16], xname[GGUF_MAX_NAME];
    snprintf(key, sizeof key, "hktest.x.%s", name);
    const gguf_tensor *x = NULL;
    if (gguf_get_string(&expected, key, xname, sizeof xname) == 0)
        x = gguf_find_tensor(&model, xname);
    if (!x || x->ggml_type != 0)
        hk_check(0, key, "the expected file names no f32 x of the model file");
    return x;
}

static int is_weight_type(uint32_t ggml_type, hk_type *type)
{
    return hk_type_from_ggml(ggml_type, type) == HK_OK &&
           (*type == HK_TYPE_Q8_0 || *type == HK_TYPE_Q4_K || *type == HK_TYPE_Q5_K || *type == HK_TYPE_Q6_K);
}

/* ---- the reader --------------------------------------------------------------------------------- */

static void test_metadata(void)
{
    char s[64] = "";
    uint32_t u = 0;
    int found = gguf_get_string(&model, "general.architecture", s, sizeof s) == 0;
    hk_check(found && strcmp(s, "hktest") == 0, "gguf metadata: general.architecture", "\"%s\"", s);
    found = gguf_get_u32(&model, "hktest.block_count", &u) == 0;
    hk_check(found && u == 2, "gguf metadata: u32 after every type", "hktest.block_count=%u", u);
    const gguf_kv *f64 = gguf_find_kv(&model, "hktest.f64"), *tokens = gguf_find_kv(&model, "tokenizer.ggml.tokens");
    double v = 0;
    if (f64 && f64->type == GGUF_F64)
        memcpy(&v, f64->value, 8);
    hk_check(v == 1e300, "gguf metadata: f64", "%g", v);
    uint64_t count = 0;
    if (tokens && tokens->type == GGUF_ARRAY && tokens->value_bytes >= 12)
        memcpy(&count, tokens->value + 4, 8);
    hk_check(count == 5, "gguf metadata: string array", "%llu strings", (unsigned long long)count);
    hk_check(!gguf_find_kv(&model, "general.alignment") && model.alignment == 32 && model.data_start % 32 == 0,
             "gguf alignment: default 32", "alignment %u, data at %llu", model.alignment,
             (unsigned long long)model.data_start);
    hk_check(expected.alignment == 64 && expected.data_start % 64 == 0, "gguf alignment: general.alignment=64",
             "alignment %u, data at %llu", expected.alignment, (unsigned long long)expected.data_start);
}

/* Every truncation of the header and the first bytes of data, and a stride through the rest, must
 * be refused (the last tensor no longer fits); every single-byte corruption of the header must
 * either be refused or parse into tensors that lie inside the file. */
static void test_reader_robustness(void)
{
    uint64_t size = model.size;
    uint8_t *copy = malloc(size);
    memcpy(copy, model_bytes, size);
    char err[256];
    gguf_file f;
    uint32_t accepted = 0, tried = 0;
    for (uint64_t len = 0; len < model.data_end; len += len < model.data_start + 256 ? 1 : 4099) {
        tried++;
        if (gguf_parse(&f, copy, len, err, sizeof err) == 0) {
            accepted++;
            gguf_free(&f);
        }
    }
    hk_check(accepted == 0, "gguf reader: truncated files refused", "%u of %u truncations accepted", accepted, tried);

    static const uint8_t xors[] = {0x01, 0x80, 0xFF, 0x40};
    uint32_t parsed = 0, outside = 0, refused = 0;
    for (uint64_t p = 0; p < model.data_start; p++) {
        for (size_t v = 0; v < sizeof xors; v++) {
            copy[p] = (uint8_t)(model_bytes[p] ^ xors[v]);
            if (gguf_parse(&f, copy, size, err, sizeof err) == 0) {
                parsed++;
                for (uint64_t i = 0; i < f.n_tensors; i++)
                    outside += f.data_start + f.tensors[i].offset + f.tensors[i].bytes > size;
                gguf_free(&f);
            } else {
                refused += err[0] != 0;
            }
        }
        copy[p] = model_bytes[p];
    }
    hk_check(outside == 0 && refused + parsed == 4 * model.data_start, "gguf reader: corrupted headers",
             "%llu corruptions: %u parsed (all inside the file: %s), %u refused with a message",
             (unsigned long long)(4 * model.data_start), parsed, outside ? "no" : "yes", refused);

    /* seeded random damage: 1 to 8 header bytes set to random values, the file cut anywhere */
    hk_rng rng = {0x6767756675ull};
    parsed = outside = refused = 0;
    const uint32_t rounds = 3000;
    for (uint32_t round = 0; round < rounds; round++) {
        uint64_t pos[8];
        int n = 1 + (int)(hk_rng_next(&rng) % 8);
        for (int i = 0; i < n; i++) {
            pos[i] = hk_rng_next(&rng) % model.data_start;
            copy[pos[i]] = (uint8_t)(hk_rng_next(&rng) >> 56);
        }
        uint64_t len = round % 2 ? size : hk_rng_next(&rng) % (size + 1);
        if (gguf_parse(&f, copy, len, err, sizeof err) == 0) {
            parsed++;
            for (uint64_t i = 0; i < f.n_tensors; i++)
                outside += f.data_start + f.tensors[i].offset + f.tensors[i].bytes > len;
            gguf_free(&f);
        } else {
            refused += err[0] != 0;
        }
        for (int i = 0; i < n; i++)
            copy[pos[i]] = model_bytes[pos[i]];
    }
    hk_check(outside == 0 && refused + parsed == rounds, "gguf reader: random damage",
             "%u files: %u parsed (all inside the file: %s), %u refused with a message", rounds, parsed,
             outside ? "no" : "yes", refused);
    free(copy);
}

/* a tiny GGUF writer for hand-made malformed files */
typedef struct mini {
    uint8_t b[512];
    size_t n;
} mini;

static void put(mini *m, const void *p, size_t n)
{
    memcpy(m->b + m->n, p, n);
    m->n += n;
}
static void put_u32(mini *m, uint32_t v) { put(m, &v, 4); }
static void put_u64(mini *m, uint64_t v) { put(m, &v, 8); }
static void put_str(mini *m, const char *s)
{
    put_u64(m, strlen(s));
    put(m, s, strlen(s));
}

enum { BAD_NONE, BAD_MAGIC, BAD_VERSION, BAD_KEY_LEN, BAD_ARRAY_COUNT, BAD_NESTING, BAD_VALUE_TYPE, BAD_ALIGN_ZERO,
       BAD_ALIGN_48, BAD_ALIGN_TYPE, BAD_DIMS, BAD_TYPE, BAD_ROW, BAD_OFFSET_ALIGN, BAD_OFFSET_GAP, BAD_PAST_END,
       BAD_TENSOR_COUNT, BAD_NE_OVERFLOW, BAD_DUP_TENSOR, BAD_DUP_KEY, BAD_NAME_LEN, BAD_TYPE_GAP, GOOD_V2 };

/* One F32 [8] tensor "t" (and a second "u" for the duplicate case), general.alignment 32 and a
 * string array, each field replaced by a bad value where `bad` says. */
static size_t mini_file(mini *m, int bad)
{
    m->n = 0;
    put(m, bad == BAD_MAGIC ? "GGUG" : "GGUF", 4);
    put_u32(m, bad == BAD_VERSION ? 1 : bad == GOOD_V2 ? 2 : 3);
    put_u64(m, bad == BAD_TENSOR_COUNT ? (1ull << 60) : bad == BAD_DUP_TENSOR ? 2 : 1);
    put_u64(m, bad == BAD_DUP_KEY ? 3 : 2);
    if (bad == BAD_KEY_LEN)
        put_u64(m, 1ull << 63);
    else
        put_str(m, "general.alignment");
    put_u32(m, bad == BAD_ALIGN_TYPE ? GGUF_U64 : GGUF_U32);
    put_u32(m, bad == BAD_ALIGN_ZERO ? 0 : bad == BAD_ALIGN_48 ? 48 : 32);
    if (bad == BAD_ALIGN_TYPE)
        put_u32(m, 0);
    put_str(m, "tokens");
    put_u32(m, bad == BAD_VALUE_TYPE ? 13 : GGUF_ARRAY);
    if (bad == BAD_NESTING) { /* arrays of arrays, 6 deep */
        for (int i = 0; i < 6; i++) {
            put_u32(m, GGUF_ARRAY);
            put_u64(m, 1);
        }
    }
    put_u32(m, GGUF_STRING);
    put_u64(m, bad == BAD_ARRAY_COUNT ? (1ull << 62) : 2);
    put_str(m, "a");
    put_str(m, "bc");
    if (bad == BAD_DUP_KEY) {
        put_str(m, "tokens");
        put_u32(m, GGUF_U8);
        put(m, "x", 1);
    }
    for (int t = 0; t < (bad == BAD_DUP_TENSOR ? 2 : 1); t++) {
        put_str(m, bad == BAD_NAME_LEN ? "a-tensor-name-of-sixty-four-bytes-which-ggml-does-not-allow-xxxx" : "t");
        put_u32(m, bad == BAD_DIMS ? 5 : bad == BAD_NE_OVERFLOW ? 2 : 1);
        put_u64(m, bad == BAD_ROW ? 100 : bad == BAD_NE_OVERFLOW ? (1ull << 40) : 8);
        if (bad == BAD_DIMS)
            for (int i = 0; i < 4; i++)
                put_u64(m, 1);
        if (bad == BAD_NE_OVERFLOW)
            put_u64(m, 1ull << 40);
        /* 99 and 4 (ggml's removed Q4_2) are no ggml type; Q5_K has no kernel but a known size */
        put_u32(m, bad == BAD_TYPE ? 99 : bad == BAD_TYPE_GAP ? 4 : bad == BAD_ROW ? 12 /* q4_k */ : 0);
        put_u64(m, bad == BAD_OFFSET_ALIGN ? 4 : bad == BAD_OFFSET_GAP ? 64 : t * 32);
    }
    while (m->n % 32)
        m->b[m->n++] = 0;
    size_t data = bad == BAD_PAST_END ? 31 : 64; /* 8 floats, or 16 for the duplicate */
    for (size_t i = 0; i < data; i++)
        m->b[m->n++] = (uint8_t)i;
    return m->n;
}

static void test_reader_malformed(void)
{
    static const struct {
        int bad;
        const char *name, *needle;
    } cases[] = {
        {BAD_MAGIC, "bad magic", "magic"},
        {BAD_VERSION, "version 1", "versions 2 and 3 (version 1 had 32-bit counts)"},
        {BAD_KEY_LEN, "key length 2^63", "past the file's end"},
        {BAD_ARRAY_COUNT, "string array of 2^62", "cannot fit"},
        {BAD_NESTING, "arrays nested 7 deep", "nested"},
        {BAD_VALUE_TYPE, "value type 13", "unknown metadata value type"},
        {BAD_ALIGN_ZERO, "general.alignment 0", "power of two"},
        {BAD_ALIGN_48, "general.alignment 48", "power of two"},
        {BAD_ALIGN_TYPE, "general.alignment as u64", "not u32"},
        {BAD_DIMS, "5 dims", "dims"},
        {BAD_TYPE, "tensor type 99", "supports"},
        {BAD_TYPE_GAP, "tensor type 4 (removed from ggml)", "type 4 is not a ggml type"},
        {BAD_ROW, "q4_k row of 100", "multiple of the type's block"},
        {BAD_OFFSET_ALIGN, "offset 4 at alignment 32", "multiple of the alignment"},
        {BAD_OFFSET_GAP, "offset past the previous end", "expected 0"},
        {BAD_PAST_END, "data past the end", "past the file's end"},
        {BAD_TENSOR_COUNT, "2^60 tensors", "cannot fit"},
        {BAD_NE_OVERFLOW, "2^40 x 2^40 x f32 bytes", "overflow"},
        {BAD_DUP_TENSOR, "duplicate tensor", "duplicate tensor name"},
        {BAD_DUP_KEY, "duplicate key", "duplicate key"},
        {BAD_NAME_LEN, "64-byte name", "name of 64 bytes"},
    };
    mini m;
    gguf_file f;
    char err[256], label[128];
    size_t n = mini_file(&m, BAD_NONE);
    int ok = gguf_parse(&f, m.b, n, err, sizeof err) == 0 && f.n_tensors == 1 && f.tensors[0].bytes == 32 &&
             f.data_start % 32 == 0 && gguf_tensor_data(&f, &f.tensors[0])[1] == 1;
    hk_check(ok, "gguf reader: hand-made file", "%s", err);
    gguf_free(&f);
    /* GGUF v2 is v3 for little-endian files */
    n = mini_file(&m, GOOD_V2);
    ok = gguf_parse(&f, m.b, n, err, sizeof err) == 0 && f.version == 2 && f.n_tensors == 1 && f.tensors[0].bytes == 32;
    hk_check(ok, "gguf reader: version 2", "%s", err);
    gguf_free(&f);
    hk_check(!strcmp(gguf_type_name(13), "q5_k") && !strcmp(gguf_type_name(30), "bf16") &&
                 !strcmp(gguf_type_name(4), "type 4") && !strcmp(gguf_type_name(1000), "type 1000"),
             "gguf reader: type names", "%s %s %s", gguf_type_name(13), gguf_type_name(4), gguf_type_name(39));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = mini_file(&m, cases[i].bad);
        int rc = gguf_parse(&f, m.b, n, err, sizeof err);
        snprintf(label, sizeof label, "gguf reader refuses: %s", cases[i].name);
        hk_check(rc != 0 && strstr(err, cases[i].needle), label, "\"%s\"", err);
        if (rc == 0)
            gguf_free(&f);
    }
}

/* ---- the references against numpy -------------------------------------------------------------- */

static void dequant(hk_type type, const void *blocks, float *y, size_t n)
{
    switch (type) {
    case HK_TYPE_Q8_0: hk_dequant_row_q8_0(blocks, y, n); break;
    case HK_TYPE_Q4_K: hk_dequant_row_q4_k(blocks, y, n); break;
    case HK_TYPE_Q5_K: hk_dequant_row_q5_k(blocks, y, n); break;
    case HK_TYPE_Q6_K: hk_dequant_row_q6_k(blocks, y, n); break;
    default: break;
    }
}

/* Our dequantizer on the file's bytes equals gguf-py's numpy dequantization bit for bit: both
 * compute each value with the same f32 operations in the same order (Q8_0 q*d; Q4_K and Q5_K
 * (d*sc)*q - dmin*m; Q6_K (d*sc)*q), the f16 fields are converted exactly, and the host compiles ISO C
 * without contracting a*b-c into an FMA. */
static void test_dequant(const gguf_tensor *t, hk_type type)
{
    uint64_t n = gguf_tensor_values(t);
    float *ours = malloc(n * sizeof *ours), *theirs = expected_copy(t->name, "deq", 0, n);
    char label[128];
    snprintf(label, sizeof label, "dequant %s (%s) = gguf-py numpy", t->name, hk_type_name(type));
    if (theirs) {
        dequant(type, gguf_tensor_data(&model, t), ours, n);
        uint64_t differ = 0, first = 0;
        for (uint64_t i = 0; i < n; i++) {
            if (memcmp(&ours[i], &theirs[i], 4) != 0 && differ++ == 0)
                first = i;
        }
        hk_check(differ == 0, label, "%llu of %llu values differ in their bits", (unsigned long long)differ,
                 (unsigned long long)n);
        if (differ)
            printf("  first at %llu: ours %.9g, numpy %.9g\n", (unsigned long long)first, ours[first], theirs[first]);
    }
    free(ours);
    free(theirs);
}

/* Every f16 bit pattern: equal bits, except that a NaN need only stay a NaN of the same sign
 * (numpy may convert with the CPU's F16C, which quiets signalling NaNs). */
static void test_f16(const gguf_tensor *t)
{
    uint64_t n = gguf_tensor_values(t);
    float *theirs = expected_copy(t->name, "deq", 0, n);
    if (!theirs)
        return;
    const uint8_t *h = gguf_tensor_data(&model, t);
    uint64_t differ = 0, nan_payload = 0;
    for (uint64_t i = 0; i < n; i++) {
        float ours = hk_f16_to_f32((uint16_t)(h[2 * i] | h[2 * i + 1] << 8));
        if (isnan(ours) && isnan(theirs[i])) {
            differ += signbit(ours) != signbit(theirs[i]);
            nan_payload += memcmp(&ours, &theirs[i], 4) != 0;
        } else {
            differ += memcmp(&ours, &theirs[i], 4) != 0;
        }
    }
    char label[128];
    snprintf(label, sizeof label, "hk_f16_to_f32 = numpy on %s", t->name);
    hk_check(differ == 0, label, "%llu of %llu differ (NaN payloads differing: %llu)", (unsigned long long)differ,
             (unsigned long long)n, (unsigned long long)nan_payload);
    free(theirs);
}

/* Our Q8_0 quantizer on the f32 rows gguf-py quantized writes gguf-py's bytes (both are
 * llama.cpp's quantize_row_q8_0_ref: rows holding exact .5 ties and an all-zero block). */
static void test_quantizer(const gguf_tensor *t)
{
    uint64_t n = gguf_tensor_values(t);
    float *src = expected_copy(t->name, "source", 0, n);
    if (!src)
        return;
    uint8_t *ours = malloc(t->bytes);
    hk_quant_row_q8_0(src, (hk_block_q8_0 *)ours, n);
    uint64_t differ = 0;
    for (uint64_t b = 0; b < t->bytes / 34; b++)
        differ += memcmp(ours + 34 * b, gguf_tensor_data(&model, t) + 34 * b, 34) != 0;
    char label[128];
    snprintf(label, sizeof label, "hk_quant_row_q8_0 %s = gguf-py quantize", t->name);
    hk_check(differ == 0, label, "%llu of %llu blocks differ", (unsigned long long)differ,
             (unsigned long long)(t->bytes / 34));
    free(src);
    free(ours);
}

/* The C reference matvec on the file's bytes against numpy's double matvec. */
static void test_ref_matvec(const gguf_tensor *t, hk_type type, const gguf_tensor *x)
{
    uint64_t rows = gguf_tensor_values(t) / t->ne[0];
    float *ref = expected_f64_as_f32(t->name, "matvec", rows), *got = malloc(rows * sizeof *got);
    float *xv = malloc(x->bytes);
    memcpy(xv, gguf_tensor_data(&model, x), x->bytes);
    if (ref) {
        hk_ref_matvec((int)type, gguf_tensor_data(&model, t), xv, got, rows, t->ne[0]);
        char label[128];
        snprintf(label, sizeof label, "hk_ref_matvec %s = numpy", t->name);
        hk_check_close(label, got, ref, rows, HK_GATE_F32);
    }
    free(ref);
    free(got);
    free(xv);
}

/* ---- GPU ---------------------------------------------------------------------------------------- */

/* Where a weight's bytes sit on the device. */
typedef struct placement {
    const char *label;
    hk_view view;
    hk_buffer *own; /* the flush copy's buffer, NULL for the file's */
} placement;

static placement in_file(const gguf_tensor *t) { return (placement){"file", {file_buffer, t->offset}, NULL}; }

/* A copy at a 2-byte offset whose last byte is the buffer's last byte. */
static placement flush_copy(const gguf_tensor *t)
{
    hk_buffer *b = hk_test_buffer(ctx, FLUSH_OFFSET + t->bytes, NULL);
    if (hk_buffer_upload(b, FLUSH_OFFSET, gguf_tensor_data(&model, t), t->bytes) != HK_OK)
        hk_check(0, "flush copy upload", "%s", hk_last_error());
    return (placement){"flush@2", {b, FLUSH_OFFSET}, b};
}

/* x quantized by the GPU (hk_quantize_q8_1), read back: the int8 kernels' input and the source
 * of their expectation. */
typedef struct q8_1_x {
    hk_buffer *buffer;
    hk_block_q8_1 *host;
    uint64_t values;
} q8_1_x;

static q8_1_x quantize_x(const gguf_tensor *x)
{
    q8_1_x q = {NULL, NULL, gguf_tensor_values(x)};
    size_t bytes = q.values / 32 * sizeof(hk_block_q8_1);
    q.buffer = hk_test_buffer(ctx, bytes, NULL);
    q.host = malloc(bytes);
    hk_status st = hk_quantize_q8_1(ctx, NULL, (hk_view){file_buffer, x->offset}, (hk_view){q.buffer, 0},
                                    (uint32_t)q.values);
    if (st == HK_OK)
        st = hk_buffer_download(q.buffer, 0, q.host, bytes);
    if (st != HK_OK) {
        hk_check(0, "hk_quantize_q8_1 of x", "%s", hk_last_error());
        memset(q.host, 0, bytes);
    }
    return q;
}

static void q8_1_x_free(q8_1_x *q)
{
    hk_buffer_destroy(q->buffer);
    free(q->host);
}

/* sum_i deq(W)[row, i] * d_b * q_i in double, from numpy's deq(W) and the Q8_1 blocks (their s
 * is not used) */
static double contract_q8_1(const float *w_row, const hk_block_q8_1 *xq, uint64_t k)
{
    double sum = 0.0;
    for (uint64_t b = 0; b < k / 32; b++) {
        double d = hk_f16_to_f32(xq[b].d);
        for (int j = 0; j < 32; j++)
            sum += (double)w_row[b * 32 + j] * (d * xq[b].qs[j]);
    }
    return sum;
}

/* A kernel case: one dense weight tensor, its x, and what numpy says. */
typedef struct matvec_case {
    const gguf_tensor *w, *x;
    hk_type type;
    uint32_t rows, k;
    float *ref_f32;  /* numpy's double matvec */
    float *deq;      /* numpy's dequantization */
    q8_1_x xq;
    float *ref_int8; /* deq(W) . deq(xq), double */
} matvec_case;

static int matvec_case_make(matvec_case *c, const gguf_tensor *w, hk_type type)
{
    memset(c, 0, sizeof *c);
    c->w = w;
    c->type = type;
    c->x = x_of(w->name);
    c->k = (uint32_t)w->ne[0];
    c->rows = (uint32_t)(gguf_tensor_values(w) / w->ne[0]);
    if (!c->x || gguf_tensor_values(c->x) != c->k)
        return 0;
    c->ref_f32 = expected_f64_as_f32(w->name, "matvec", c->rows);
    c->deq = expected_copy(w->name, "deq", 0, gguf_tensor_values(w));
    if (!c->ref_f32 || !c->deq)
        return 0;
    c->xq = quantize_x(c->x);
    c->ref_int8 = malloc(c->rows * sizeof(float));
    for (uint32_t r = 0; r < c->rows; r++)
        c->ref_int8[r] = (float)contract_q8_1(c->deq + (size_t)r * c->k, c->xq.host, c->k);
    return 1;
}

static void matvec_case_free(matvec_case *c)
{
    free(c->ref_f32);
    free(c->deq);
    free(c->ref_int8);
    q8_1_x_free(&c->xq);
}

static hk_status matvec_record(const matvec_case *c, hk_view w, hk_view y, int int8)
{
    return int8 ? hk_matvec_int8(ctx, NULL, c->type, w, (hk_view){c->xq.buffer, 0}, y, c->rows, c->k)
                : hk_matvec(ctx, NULL, c->type, w, (hk_view){file_buffer, c->x->offset}, y, c->rows, c->k);
}

static void matvec_run(const matvec_case *c, placement p, int int8)
{
    char name[160];
    snprintf(name, sizeof name, "%s %s %ux%u (%s) %s", int8 ? "hk_matvec_int8" : "hk_matvec", c->w->name, c->rows,
             c->k, hk_type_name(c->type), p.label);
    hk_test_out y = hk_test_out_create(ctx, c->rows);
    hk_status st = matvec_record(c, p.view, hk_test_out_view(&y), int8);
    if (st != HK_OK) {
        hk_check(0, name, "%s", hk_last_error());
    } else {
        const float *got = hk_test_out_read(&y, name);
        if (got && !hk_check_close(name, got, int8 ? c->ref_int8 : c->ref_f32, c->rows,
                                   int8 ? GATE_INT8_EXACT : HK_GATE_F32) && int8) {
            /* say whether the library's own int8 reference, on the same Q8_1 x, agrees with the
             * GPU or with the exact contraction (it reads the Q8_1 s field for Q4_K) */
            float *lib = malloc(c->rows * sizeof *lib);
            hk_ref_matvec_q8_1((int)c->type, gguf_tensor_data(&model, c->w), c->xq.host, lib, c->rows, c->k);
            printf("  hk_ref_matvec_q8_1 on the same x: scale_rel %.3e to the GPU, %.3e to the exact contraction\n",
                   hk_scale_rel(got, lib, c->rows), hk_scale_rel(lib, c->ref_int8, c->rows));
            free(lib);
        }
    }
    hk_test_out_destroy(&y);
}

static void test_matvec(const gguf_tensor *w, hk_type type)
{
    matvec_case c;
    if (matvec_case_make(&c, w, type)) {
        placement flush = flush_copy(w);
        matvec_run(&c, in_file(w), 0);
        matvec_run(&c, flush, 0);
        /* no int8 kernel takes F16 rows (test_errors checks the refusal) */
        if (type != HK_TYPE_F16)
            matvec_run(&c, in_file(w), 1);
        int wide16 = type == HK_TYPE_Q4_K || type == HK_TYPE_Q5_K;
        if (!wide16 && type != HK_TYPE_F16) {
            matvec_run(&c, flush, 1);
        } else if (wide16) { /* the int8 Q4_K and Q5_K kernels ask 16-byte aligned weights, and say so */
            hk_test_out y = hk_test_out_create(ctx, c.rows);
            char label[96];
            snprintf(label, sizeof label, "hk_matvec_int8 %s at a 2-byte offset is refused", hk_type_name(type));
            hk_check_status(label, matvec_record(&c, flush.view, hk_test_out_view(&y), 1), HK_ERROR_INVALID_ARGUMENT,
                            "is not a multiple of 16");
            hk_test_out_destroy(&y);
        }
        hk_buffer_destroy(flush.own);
    }
    matvec_case_free(&c);
}

/* The matvec tests of a weight the expected file has a matvec for (1; else nothing, 0). */
static int test_matvecs(const gguf_tensor *w, hk_type type)
{
    char mv[GGUF_MAX_NAME + 16];
    snprintf(mv, sizeof mv, "%s.matvec", w->name);
    if (!gguf_find_tensor(&expected, mv))
        return 0;
    const gguf_tensor *x = x_of(w->name);
    if (x)
        test_ref_matvec(w, type, x);
    test_matvec(w, type);
    return 1;
}

/* MoE: the file's expert bank [experts, n, k], the file's routing (ids with a repeat, one past the
 * last expert and 0xFFFFFFFF), the file's x (one for all slots, or one per slot). */
typedef struct moe_case {
    const gguf_tensor *w, *x, *ids;
    hk_type type;
    hk_moe_shape shape;
    uint64_t outputs;
    uint32_t *id;    /* the routing, as the kernel reads it */
    float *ref_f32;  /* numpy's double matvec of each slot's expert */
    float *deq;      /* numpy's dequantization of the bank */
    q8_1_x xq;
    float *ref_int8; /* deq(W[id]) . deq(xq_slot), double; 0 for ids out of range */
} moe_case;

static int moe_case_make(moe_case *c, const gguf_tensor *w, hk_type type)
{
    memset(c, 0, sizeof *c);
    c->w = w;
    c->type = type;
    c->ids = gguf_find_tensor(&model, "moe.ids");
    c->x = x_of(w->name);
    char key[GGUF_MAX_NAME + 32];
    snprintf(key, sizeof key, "hktest.x_per_slot.%s", w->name);
    uint32_t x_per_slot = 0;
    if (!c->ids || c->ids->ggml_type != GGML_TYPE_I32 || !c->x || gguf_get_u32(&expected, key, &x_per_slot) != 0 ||
        w->n_dims != 3) {
        hk_check(0, w->name, "no routing, x or x_per_slot for this expert bank");
        return 0;
    }
    c->shape = (hk_moe_shape){(uint32_t)w->ne[2], (uint32_t)w->ne[1], (uint32_t)w->ne[0],
                              (uint32_t)gguf_tensor_values(c->ids), (int)x_per_slot};
    const hk_moe_shape *sh = &c->shape;
    c->outputs = (uint64_t)sh->slots * sh->n;
    if (gguf_tensor_values(c->x) != (x_per_slot ? sh->slots : 1) * (uint64_t)sh->k) {
        hk_check(0, w->name, "x has %llu values", (unsigned long long)gguf_tensor_values(c->x));
        return 0;
    }
    c->id = malloc(c->ids->bytes);
    memcpy(c->id, gguf_tensor_data(&model, c->ids), c->ids->bytes);
    c->ref_f32 = expected_f64_as_f32(w->name, "moe", c->outputs);
    c->deq = expected_copy(w->name, "deq", 0, gguf_tensor_values(w));
    if (!c->ref_f32 || !c->deq)
        return 0;
    c->xq = quantize_x(c->x);
    c->ref_int8 = malloc(c->outputs * sizeof(float));
    for (uint32_t s = 0; s < sh->slots; s++)
        for (uint32_t r = 0; r < sh->n; r++)
            c->ref_int8[(size_t)s * sh->n + r] =
                c->id[s] < sh->n_experts
                    ? (float)contract_q8_1(c->deq + ((size_t)c->id[s] * sh->n + r) * sh->k,
                                           c->xq.host + (x_per_slot ? (size_t)s * sh->k / 32 : 0), sh->k)
                    : 0.0f;
    return 1;
}

static void moe_case_free(moe_case *c)
{
    free(c->id);
    free(c->ref_f32);
    free(c->deq);
    free(c->ref_int8);
    q8_1_x_free(&c->xq);
}

static hk_status moe_record(const moe_case *c, hk_view w, hk_view y, int int8)
{
    hk_view ids = {file_buffer, c->ids->offset};
    return int8 ? hk_moe_matvec_int8(ctx, NULL, c->type, w, (hk_view){c->xq.buffer, 0}, ids, y, &c->shape)
                : hk_moe_matvec(ctx, NULL, c->type, w, (hk_view){file_buffer, c->x->offset}, ids, y, &c->shape);
}

static void moe_run(const moe_case *c, placement p, int int8)
{
    const hk_moe_shape *sh = &c->shape;
    char name[200], label[240];
    snprintf(name, sizeof name, "%s %s E%u %ux%u slots=%u%s (%s) %s", int8 ? "hk_moe_matvec_int8" : "hk_moe_matvec",
             c->w->name, sh->n_experts, sh->n, sh->k, sh->slots, sh->x_per_slot ? " x-per-slot" : "",
             hk_type_name(c->type), p.label);
    hk_test_out y = hk_test_out_create(ctx, c->outputs);
    hk_status st = moe_record(c, p.view, hk_test_out_view(&y), int8);
    const float *got = st == HK_OK ? hk_test_out_read(&y, name) : NULL;
    if (st != HK_OK)
        hk_check(0, name, "%s", hk_last_error());
    if (got) {
        hk_check_close(name, got, int8 ? c->ref_int8 : c->ref_f32, c->outputs, int8 ? GATE_INT8_EXACT : HK_GATE_F32);
        uint32_t nonzero = 0, routed_off = 0;
        for (uint32_t s = 0; s < sh->slots; s++) {
            if (c->id[s] < sh->n_experts)
                continue;
            routed_off++;
            for (uint32_t r = 0; r < sh->n; r++)
                nonzero += got[(size_t)s * sh->n + r] != 0.0f;
        }
        snprintf(label, sizeof label, "%s: out-of-range ids give zeros", name);
        hk_check(nonzero == 0 && routed_off >= 2, label, "%u slots routed nowhere, %u nonzero outputs", routed_off,
                 nonzero);
    }
    hk_test_out_destroy(&y);
}

static void test_moe(const gguf_tensor *w, hk_type type)
{
    moe_case c;
    if (moe_case_make(&c, w, type)) {
        for (int int8 = 0; int8 < 2; int8++)
            moe_run(&c, in_file(w), int8);
        if (type != HK_TYPE_Q4_K && type != HK_TYPE_Q5_K) { /* Q4_K and Q5_K expert banks must be 16-byte aligned */
            placement flush = flush_copy(w);
            for (int int8 = 0; int8 < 2; int8++)
                moe_run(&c, flush, int8);
            hk_buffer_destroy(flush.own);
        }
    }
    moe_case_free(&c);
}

static void test_gemv(const gguf_tensor *w)
{
    const gguf_tensor *x = x_of(w->name);
    uint32_t rows = (uint32_t)w->ne[1], k = (uint32_t)w->ne[0];
    float *ref = expected_f64_as_f32(w->name, "matvec", rows);
    if (x && ref && gguf_tensor_values(x) == k) {
        char name[128];
        snprintf(name, sizeof name, "hk_gemv_f32 %s %ux%u file", w->name, rows, k);
        hk_test_out y = hk_test_out_create(ctx, rows);
        hk_status st = hk_gemv_f32(ctx, NULL, (hk_view){file_buffer, w->offset}, (hk_view){file_buffer, x->offset},
                                   hk_test_out_view(&y), rows, k);
        const float *got = st == HK_OK ? hk_test_out_read(&y, name) : NULL;
        if (st != HK_OK)
            hk_check(0, name, "%s", hk_last_error());
        if (got)
            hk_check_close(name, got, ref, rows, HK_GATE_F32);
        hk_test_out_destroy(&y);
    }
    free(ref);
}

/* hk_get_rows on the file's bytes (in place, and a copy flush against its buffer's end at a 2-byte
 * offset where the type allows one) against numpy's dequantization (an F32 tensor: its own
 * bytes): rows last, first, one past the end (zeros), the last again and 0xFFFFFFFF (zeros). Bit
 * for bit, except that a NaN need only stay a NaN of the same sign (numpy may quiet signalling
 * NaNs: test_f16). */
static void test_get_rows(const gguf_tensor *t, hk_type type)
{
    uint32_t k = (uint32_t)t->ne[0], rows = (uint32_t)(gguf_tensor_values(t) / t->ne[0]);
    const uint32_t ids[5] = {rows - 1, 0, rows, rows - 1, 0xFFFFFFFFu};
    float *src = type == HK_TYPE_F32 ? malloc(t->bytes) : expected_copy(t->name, "deq", 0, gguf_tensor_values(t));
    if (!src)
        return;
    if (type == HK_TYPE_F32)
        memcpy(src, gguf_tensor_data(&model, t), t->bytes);
    float *want = calloc(5 * (size_t)k, sizeof *want);
    for (int i = 0; i < 5; i++)
        if (ids[i] < rows)
            memcpy(want + (size_t)i * k, src + (size_t)ids[i] * k, (size_t)k * sizeof *want);
    hk_buffer *idb = hk_test_buffer(ctx, sizeof ids, ids);
    placement places[2] = {in_file(t), {NULL, {NULL, 0}, NULL}};
    int n_places = hk_type_alignment(type) <= 2 ? 2 : 1; /* FLUSH_OFFSET is 2 mod 4 */
    if (n_places == 2)
        places[1] = flush_copy(t);
    for (int p = 0; p < n_places; p++) {
        char name[160];
        snprintf(name, sizeof name, "hk_get_rows %s (%s) %u of %ux%u %s = numpy", t->name, hk_type_name(type), 5, rows,
                 k, places[p].label);
        hk_test_out y = hk_test_out_create(ctx, 5 * (size_t)k);
        hk_status st =
            hk_get_rows(ctx, NULL, type, places[p].view, (hk_view){idb, 0}, hk_test_out_view(&y), 5, rows, k);
        const float *got = st == HK_OK ? hk_test_out_read(&y, name) : NULL;
        if (st != HK_OK)
            hk_check(0, name, "%s", hk_last_error());
        if (got) {
            uint64_t differ = 0;
            for (size_t i = 0; i < 5 * (size_t)k; i++)
                differ += isnan(got[i]) && isnan(want[i]) ? signbit(got[i]) != signbit(want[i])
                                                          : memcmp(&got[i], &want[i], 4) != 0;
            hk_check(differ == 0, name, "%llu of %zu values differ in their bits", (unsigned long long)differ,
                     5 * (size_t)k);
        }
        hk_test_out_destroy(&y);
    }
    hk_buffer_destroy(places[1].own);
    hk_buffer_destroy(idb);
    free(want);
    free(src);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_gguf MODEL.gguf EXPECTED.gguf (written by tests/gguf/make_gguf.py)\n");
        return 2;
    }
    uint64_t model_size, expected_size;
    char err[256];
    model_bytes = read_file(argv[1], &model_size);
    expected_bytes = read_file(argv[2], &expected_size);
    if (!model_bytes || !expected_bytes) {
        fprintf(stderr, "test_gguf: cannot read %s or %s\n", argv[1], argv[2]);
        return 1;
    }
    if (gguf_parse(&model, model_bytes, model_size, err, sizeof err) != 0) {
        fprintf(stderr, "test_gguf: %s: %s\n", argv[1], err);
        return 1;
    }
    if (gguf_parse(&expected, expected_bytes, expected_size, err, sizeof err) != 0) {
        fprintf(stderr, "test_gguf: %s: %s\n", argv[2], err);
        return 1;
    }
    printf("%s: %llu tensors, %llu key/values, data [%llu, %llu) of %llu bytes\n", argv[1],
           (unsigned long long)model.n_tensors, (unsigned long long)model.n_kv, (unsigned long long)model.data_start,
           (unsigned long long)model.data_end, (unsigned long long)model.size);
    ctx = hk_test_context();
    test_metadata();
    test_reader_robustness();
    test_reader_malformed();

    /* the data region, uploaded as it is: every view below is at the tensor's own file offset */
    file_buffer = hk_test_buffer(ctx, model.data_end - model.data_start, model_bytes + model.data_start);

    uint32_t weights = 0, banks = 0, f16_weights = 0;
    for (uint64_t i = 0; i < model.n_tensors; i++) {
        const gguf_tensor *t = &model.tensors[i];
        hk_type type;
        if (t->ggml_type == 1) {
            test_f16(t);
            test_get_rows(t, HK_TYPE_F16);
            f16_weights += test_matvecs(t, HK_TYPE_F16);
        } else if (t->ggml_type == 0 && strcmp(t->name, "f32.router") == 0) {
            test_gemv(t);
            test_get_rows(t, HK_TYPE_F32);
        } else if (is_weight_type(t->ggml_type, &type)) {
            test_dequant(t, type);
            test_get_rows(t, type);
            char source[GGUF_MAX_NAME + 16];
            snprintf(source, sizeof source, "%s.source", t->name);
            if (gguf_find_tensor(&expected, source))
                test_quantizer(t);
            if (t->n_dims == 3) {
                test_moe(t, type);
                banks++;
            }
            weights += test_matvecs(t, type);
        }
    }
    hk_check(weights >= 20 && banks == 4 && f16_weights == 1, "every weight tensor of the file tested",
             "%u matvec weights, %u expert banks, %u F16 matrices", weights, banks, f16_weights);
    hk_buffer_destroy(file_buffer);
    gguf_free(&model);
    gguf_free(&expected);
    free(model_bytes);
    free(expected_bytes);
    return hk_test_finish(ctx);
}
