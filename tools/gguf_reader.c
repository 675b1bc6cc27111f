/* gguf_reader.c — see gguf_reader.h. Every read goes through `take`, which checks the length
 * against the bytes left first; counts are bounded by the bytes left before anything is allocated
 * or looped over, so no input can make the reader read outside the buffer or allocate more than a
 * few times the file's size. Duplicate keys and names are found by sorting (O(n log n)). */
#define _POSIX_C_SOURCE 200809L
#include "gguf_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct cursor {
    const uint8_t *data;
    uint64_t size, pos;
    char *err;
    size_t err_size;
} cursor;

static int fail(cursor *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int fail(cursor *c, const char *fmt, ...)
{
    if (c->err && c->err_size) {
        int n = snprintf(c->err, c->err_size, "at byte %llu: ", (unsigned long long)c->pos);
        if (n >= 0 && (size_t)n < c->err_size) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->err + n, c->err_size - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static uint64_t left(const cursor *c) { return c->size - c->pos; }

/* n bytes at the cursor, or NULL (and an error) if fewer are left */
static const uint8_t *take(cursor *c, uint64_t n, const char *what)
{
    if (n > left(c)) {
        fail(c, "%s needs %llu bytes, only %llu left in the file", what, (unsigned long long)n,
             (unsigned long long)left(c));
        return NULL;
    }
    const uint8_t *p = c->data + c->pos;
    c->pos += n;
    return p;
}

/* little-endian, whatever the host */
static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int read_u32(cursor *c, uint32_t *v, const char *what)
{
    const uint8_t *p = take(c, 4, what);
    if (!p)
        return -1;
    *v = (uint32_t)le(p, 4);
    return 0;
}

static int read_u64(cursor *c, uint64_t *v, const char *what)
{
    const uint8_t *p = take(c, 8, what);
    if (!p)
        return -1;
    *v = le(p, 8);
    return 0;
}

/* a string: u64 length, then that many bytes (not NUL-terminated) */
static int read_string(cursor *c, const uint8_t **s, uint64_t *len, const char *what)
{
    if (read_u64(c, len, what) != 0)
        return -1;
    if (*len > left(c))
        return fail(c, "%s of %llu bytes runs past the file's end (%llu bytes left)", what, (unsigned long long)*len,
                    (unsigned long long)left(c));
    *s = take(c, *len, what);
    return 0;
}

/* bytes of one value of a fixed-size type, 0 for strings, arrays and unknown types */
static uint64_t fixed_size(uint32_t type)
{
    switch (type) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

static int skip_value(cursor *c, uint32_t type, int depth)
{
    uint64_t size = fixed_size(type);
    if (size)
        return take(c, size, "a metadata value") ? 0 : -1;
    if (type == GGUF_STRING) {
        const uint8_t *s;
        uint64_t len;
        return read_string(c, &s, &len, "a metadata string");
    }
    if (type != GGUF_ARRAY)
        return fail(c, "unknown metadata value type %u", type);
    if (depth >= GGUF_MAX_NESTING)
        return fail(c, "arrays nested deeper than %d levels", GGUF_MAX_NESTING);
    uint32_t elem;
    uint64_t count;
    if (read_u32(c, &elem, "an array's element type") != 0 || read_u64(c, &count, "an array's length") != 0)
        return -1;
    size = fixed_size(elem);
    if (size) {
        if (count > left(c) / size)
            return fail(c, "array of %llu values of %llu bytes runs past the file's end", (unsigned long long)count,
                        (unsigned long long)size);
        c->pos += count * size;
        return 0;
    }
    if (elem != GGUF_STRING && elem != GGUF_ARRAY)
        return fail(c, "unknown array element type %u", elem);
    /* each string or array element takes at least 8 bytes, so a count the file cannot hold is
     * refused before looping over it */
    if (count > left(c) / 8)
        return fail(c, "array of %llu elements cannot fit in the %llu bytes left", (unsigned long long)count,
                    (unsigned long long)left(c));
    for (uint64_t i = 0; i < count; i++)
        if (skip_value(c, elem, depth + 1) != 0)
            return -1;
    return 0;
}

static int key_is(const gguf_kv *kv, const char *key)
{
    size_t n = strlen(key);
    return kv->key_len == n && memcmp(kv->key, key, n) == 0;
}

/* ggml's type table (ggml.c type_traits, GGML_TYPE_* ids as stored in GGUF files): name, values
 * per block, bytes per block. Ids 4, 5 (Q4_2, Q4_3) and 31-33, 36-38 were removed from ggml. */
static const gguf_type_info type_table[] = {
    [0] = {"f32", 1, 4},         [1] = {"f16", 1, 2},         [2] = {"q4_0", 32, 18},
    [3] = {"q4_1", 32, 20},      [6] = {"q5_0", 32, 22},      [7] = {"q5_1", 32, 24},
    [8] = {"q8_0", 32, 34},      [9] = {"q8_1", 32, 36},      [10] = {"q2_k", 256, 84},
    [11] = {"q3_k", 256, 110},   [12] = {"q4_k", 256, 144},   [13] = {"q5_k", 256, 176},
    [14] = {"q6_k", 256, 210},   [15] = {"q8_k", 256, 292},   [16] = {"iq2_xxs", 256, 66},
    [17] = {"iq2_xs", 256, 74},  [18] = {"iq3_xxs", 256, 98}, [19] = {"iq1_s", 256, 50},
    [20] = {"iq4_nl", 32, 18},   [21] = {"iq3_s", 256, 110},  [22] = {"iq2_s", 256, 82},
    [23] = {"iq4_xs", 256, 136}, [24] = {"i8", 1, 1},         [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},        [27] = {"i64", 1, 8},        [28] = {"f64", 1, 8},
    [29] = {"iq1_m", 256, 56},   [30] = {"bf16", 1, 2},       [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},   [39] = {"mxfp4", 32, 17},
};

int gguf_type_info_of(uint32_t ggml_type, gguf_type_info *out)
{
    if (ggml_type >= sizeof type_table / sizeof type_table[0] || !type_table[ggml_type].name) {
        *out = (gguf_type_info){NULL, 0, 0};
        return 0;
    }
    *out = type_table[ggml_type];
    return 1;
}

const char *gguf_type_name(uint32_t ggml_type)
{
    static _Thread_local char unknown[24];
    gguf_type_info info;
    if (gguf_type_info_of(ggml_type, &info))
        return info.name;
    snprintf(unknown, sizeof unknown, "type %u", ggml_type);
    return unknown;
}

/* (bytes per block, values per block) of a tensor type; 0 if unknown */
static uint32_t type_block(uint32_t ggml_type, uint32_t *values)
{
    gguf_type_info info;
    if (!gguf_type_info_of(ggml_type, &info))
        return 0;
    *values = info.block_values;
    return info.block_bytes;
}

/* ---- duplicates, by sorting ---- */

static int cmp_bytes(const uint8_t *a, uint64_t na, const uint8_t *b, uint64_t nb)
{
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}

static _Thread_local const gguf_file *sort_file; /* qsort has no context argument */

static int cmp_kv(const void *x, const void *y)
{
    const gguf_kv *a = &sort_file->kv[*(const uint64_t *)x], *b = &sort_file->kv[*(const uint64_t *)y];
    return cmp_bytes(a->key, a->key_len, b->key, b->key_len);
}

static int cmp_tensor(const void *x, const void *y)
{
    return strcmp(sort_file->tensors[*(const uint64_t *)x].name, sort_file->tensors[*(const uint64_t *)y].name);
}

/* the index of one of two equal entries, or -1 */
static int64_t find_duplicate(const gguf_file *f, uint64_t n, int (*cmp)(const void *, const void *))
{
    if (n < 2)
        return -1;
    uint64_t *order = malloc(n * sizeof *order);
    if (!order)
        return -2;
    for (uint64_t i = 0; i < n; i++)
        order[i] = i;
    sort_file = f;
    qsort(order, n, sizeof *order, cmp);
    int64_t dup = -1;
    for (uint64_t i = 1; i < n && dup < 0; i++)
        if (cmp(&order[i - 1], &order[i]) == 0)
            dup = (int64_t)order[i];
    sort_file = NULL;
    free(order);
    return dup;
}

static int mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a && b > UINT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

static int parse(gguf_file *f, cursor *c)
{
    const uint8_t *magic = take(c, 4, "the magic");
    if (!magic)
        return -1;
    if (memcmp(magic, "GGUF", 4) != 0)
        return fail(c, "not a GGUF file (magic %02x %02x %02x %02x)", magic[0], magic[1], magic[2], magic[3]);
    if (read_u32(c, &f->version, "the version") != 0)
        return -1;
    if (f->version != 2 && f->version != 3)
        return fail(c, "GGUF version %u, this reader reads versions 2 and 3%s", f->version,
                    f->version == 1 ? " (version 1 had 32-bit counts)" : "");
    if (read_u64(c, &f->n_tensors, "the tensor count") != 0 || read_u64(c, &f->n_kv, "the key/value count") != 0)
        return -1;
    /* a key/value takes at least 13 bytes (key length, type, a u8), a tensor info at least 32 */
    if (f->n_kv > left(c) / 13)
        return fail(c, "%llu key/values cannot fit in the %llu bytes left", (unsigned long long)f->n_kv,
                    (unsigned long long)left(c));
    if (f->n_tensors > left(c) / 32)
        return fail(c, "%llu tensor infos cannot fit in the %llu bytes left", (unsigned long long)f->n_tensors,
                    (unsigned long long)left(c));
    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors)
        return fail(c, "out of memory");

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        if (read_string(c, &kv->key, &kv->key_len, "a key") != 0 || read_u32(c, &kv->type, "a value type") != 0)
            return -1;
        uint64_t start = c->pos;
        if (skip_value(c, kv->type, 0) != 0)
            return -1;
        kv->value = c->data + start;
        kv->value_bytes = c->pos - start;
        if (key_is(kv, "general.alignment")) {
            if (kv->type != GGUF_U32)
                return fail(c, "general.alignment has value type %u, not u32", kv->type);
            uint32_t a = (uint32_t)le(kv->value, 4);
            if (a == 0 || (a & (a - 1)) != 0)
                return fail(c, "general.alignment %u is not a power of two", a);
            f->alignment = a;
        }
    }

    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        const uint8_t *name;
        uint64_t name_len;
        if (read_string(c, &name, &name_len, "a tensor name") != 0)
            return -1;
        if (name_len >= GGUF_MAX_NAME)
            return fail(c, "tensor %llu: name of %llu bytes (at most %d)", (unsigned long long)i,
                        (unsigned long long)name_len, GGUF_MAX_NAME - 1);
        memcpy(t->name, name, name_len);
        t->name[name_len] = 0;
        if (strlen(t->name) != name_len)
            return fail(c, "tensor %llu: name holds a NUL byte", (unsigned long long)i);
        if (read_u32(c, &t->n_dims, "a tensor's dims") != 0)
            return -1;
        if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
            return fail(c, "tensor '%s': %u dims (1 to %d)", t->name, t->n_dims, GGUF_MAX_DIMS);
        uint64_t values = 1;
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
            t->ne[d] = 1;
            if (d < t->n_dims && read_u64(c, &t->ne[d], "a tensor dim") != 0)
                return -1;
            if (t->ne[d] > INT64_MAX || !mul_ok(values, t->ne[d], &values) || values > INT64_MAX)
                return fail(c, "tensor '%s': dims overflow 63 bits", t->name);
        }
        if (read_u32(c, &t->ggml_type, "a tensor type") != 0 || read_u64(c, &t->offset, "a tensor offset") != 0)
            return -1;
        uint32_t block_values, block_bytes = type_block(t->ggml_type, &block_values);
        if (!block_bytes)
            return fail(c, "tensor '%s': type %u is not a ggml type this reader supports", t->name, t->ggml_type);
        if (t->ne[0] % block_values)
            return fail(c, "tensor '%s': %llu values per row is not a multiple of the type's block (%u)", t->name,
                        (unsigned long long)t->ne[0], block_values);
        /* values / block_values blocks, each block_bytes: no overflow, as values < 2^63 */
        if (!mul_ok(values / block_values, block_bytes, &t->bytes))
            return fail(c, "tensor '%s': byte size overflows", t->name);
        if (t->offset % f->alignment)
            return fail(c, "tensor '%s': offset %llu is not a multiple of the alignment %u", t->name,
                        (unsigned long long)t->offset, f->alignment);
    }

    int64_t dup = find_duplicate(f, f->n_kv, cmp_kv);
    if (dup >= 0)
        return fail(c, "duplicate key '%.*s'", (int)(f->kv[dup].key_len < 200 ? f->kv[dup].key_len : 200),
                    f->kv[dup].key);
    if (dup == -1)
        dup = find_duplicate(f, f->n_tensors, cmp_tensor);
    if (dup >= 0)
        return fail(c, "duplicate tensor name '%s'", f->tensors[dup].name);
    if (dup == -2)
        return fail(c, "out of memory");

    /* the data region starts at the next multiple of the alignment; tensors follow one another in
     * order, each padded to the alignment (ggml's rule), and each must lie inside the file */
    uint64_t pad = (f->alignment - c->pos % f->alignment) % f->alignment;
    f->data_start = c->pos + pad;
    f->data_end = f->data_start;
    uint64_t expect = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (t->offset != expect)
            return fail(c, "tensor '%s': offset %llu, expected %llu (the previous tensor's end, padded)", t->name,
                        (unsigned long long)t->offset, (unsigned long long)expect);
        if (f->data_start > c->size || t->offset > c->size - f->data_start ||
            t->bytes > c->size - f->data_start - t->offset)
            return fail(c, "tensor '%s': data [%llu, +%llu) runs past the file's end (%llu bytes)", t->name,
                        (unsigned long long)(f->data_start + t->offset), (unsigned long long)t->bytes,
                        (unsigned long long)c->size);
        f->data_end = f->data_start + t->offset + t->bytes;
        /* t->bytes <= size, so this neither overflows nor loops */
        expect = t->offset + t->bytes + (f->alignment - t->bytes % f->alignment) % f->alignment;
    }
    return 0;
}

int gguf_parse(gguf_file *f, const uint8_t *data, uint64_t size, char *err, size_t err_size)
{
    memset(f, 0, sizeof *f);
    if (err && err_size)
        err[0] = 0;
    cursor c = {data, size, 0, err, err_size};
    f->data = data;
    f->size = size;
    if (!data)
        return fail(&c, "no data");
    if (parse(f, &c) != 0) {
        gguf_free(f);
        return -1;
    }
    return 0;
}

void gguf_free(gguf_file *f)
{
    free(f->kv);
    free(f->tensors);
    memset(f, 0, sizeof *f);
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0)
            return &f->tensors[i];
    return NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key)
{
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (key_is(&f->kv[i], key))
            return &f->kv[i];
    return NULL;
}

int gguf_get_string(const gguf_file *f, const char *key, char *out, size_t out_size)
{
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || kv->type != GGUF_STRING || kv->value_bytes < 8)
        return -1;
    uint64_t len = le(kv->value, 8);
    if (len != kv->value_bytes - 8 || len >= out_size)
        return -1;
    memcpy(out, kv->value + 8, len);
    out[len] = 0;
    return 0;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out)
{
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || kv->type != GGUF_U32 || kv->value_bytes != 4)
        return -1;
    *out = (uint32_t)le(kv->value, 4);
    return 0;
}

int gguf_get_uint(const gguf_file *f, const char *key, uint64_t *out)
{
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return -1;
    uint64_t size = fixed_size(kv->type);
    int is_signed = kv->type == GGUF_I8 || kv->type == GGUF_I16 || kv->type == GGUF_I32 || kv->type == GGUF_I64;
    if (!size || size != kv->value_bytes || kv->type == GGUF_F32 || kv->type == GGUF_F64 || kv->type == GGUF_BOOL)
        return -1;
    uint64_t v = le(kv->value, (int)size);
    if (is_signed && (v >> (size * 8 - 1)) & 1)
        return -1;
    *out = v;
    return 0;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out)
{
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || fixed_size(kv->type) != kv->value_bytes)
        return -1;
    if (kv->type == GGUF_F32) {
        uint32_t bits = (uint32_t)le(kv->value, 4);
        memcpy(out, &bits, 4);
        return 0;
    }
    if (kv->type == GGUF_F64) {
        uint64_t bits = le(kv->value, 8);
        double d;
        memcpy(&d, &bits, 8);
        *out = (float)d;
        return 0;
    }
    return -1;
}

int gguf_get_array(const gguf_file *f, const char *key, uint32_t *elem_type, uint64_t *count, const uint8_t **data,
                   uint64_t *bytes)
{
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv || kv->type != GGUF_ARRAY || kv->value_bytes < 12)
        return -1;
    *elem_type = (uint32_t)le(kv->value, 4);
    *count = le(kv->value + 4, 8);
    *data = kv->value + 12;
    *bytes = kv->value_bytes - 12;
    return 0;
}

uint64_t gguf_tensor_values(const gguf_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

const uint8_t *gguf_tensor_data(const gguf_file *f, const gguf_tensor *t) { return f->data + f->data_start + t->offset; }

int gguf_map(const char *path, gguf_mapping *m, char *err, size_t err_size)
{
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, err_size, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_size == 0) {
        snprintf(err, err_size, "%s: not a GGUF file: it is empty", path);
        close(fd);
        return -1;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, err_size, "%s: cannot map: %s", path, strerror(errno));
        return -1;
    }
    m->data = p;
    m->size = (uint64_t)st.st_size;
    return 0;
}

void gguf_unmap(gguf_mapping *m)
{
    if (m->data)
        munmap((void *)m->data, m->size);
    memset(m, 0, sizeof *m);
}
