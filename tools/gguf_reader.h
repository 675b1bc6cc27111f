/* gguf_reader.h — a minimal, careful GGUF v2/v3 reader for the tests (tests/test_gguf.c) and
 * hk-check --gguf (tools/gguf_check.c).
 *
 * It parses a whole file held in memory (read or memory-mapped): the header, every metadata key/value (skipped by type,
 * strings and arrays included, arrays nested at most GGUF_MAX_NESTING deep), the tensor infos, the
 * general.alignment rule (a u32 power of two; 32 if absent) and the data offsets. Every count and
 * length is checked against the bytes left before it is used, so a truncated or malformed file gives
 * an error message, never a read outside the buffer or a huge allocation, and the work is
 * O(n log n) in the counts (a real model has thousands of tensors). The rules are ggml's: version 2
 * or 3 (they differ only in that version 3 may be big-endian; version 1 had 32-bit counts and is
 * refused), names shorter than 64 bytes, 1..4 dims, no duplicate keys or tensor names, each
 * tensor's offset a multiple of the alignment and equal to the previous tensor's end padded to it,
 * and each tensor's bytes inside the file (the padding after the last one may be missing).
 *
 * Tensor types: every GGML_TYPE_* whose block size this reader knows (gguf_type_info: F32, F16,
 * BF16, the legacy quants, the K-quants, the IQ quants, TQ, MXFP4, the integer types, F64); a type
 * id it does not know is refused, since the tensor's bytes, and so every later offset, cannot be
 * checked. Whether a kernel exists for a type is the caller's business. Little-endian files only.
 */
#ifndef HK_GGUF_READER_H
#define HK_GGUF_READER_H

#include <stddef.h>
#include <stdint.h>

#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 64     /* names are shorter than this (ggml's GGML_MAX_NAME) */
#define GGUF_MAX_NESTING 4   /* arrays of arrays: at most this many levels */
#define GGUF_DEFAULT_ALIGNMENT 32

/* metadata value types, as numbered in the file */
enum {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6,
    GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10, GGUF_I64 = 11, GGUF_F64 = 12
};
/* tensor types beyond the library's (GGML_TYPE_*) */
enum { GGML_TYPE_I32 = 26, GGML_TYPE_F64 = 28 };

/* A GGML_TYPE_*'s name ("q4_k", as ggml writes it) and block: values and bytes per block. 0 (and
 * name NULL) for a type id this reader does not know. */
typedef struct gguf_type_info {
    const char *name;
    uint32_t block_values, block_bytes;
} gguf_type_info;
int gguf_type_info_of(uint32_t ggml_type, gguf_type_info *out);
/* The type's name, "type <id>" (in a static buffer) when unknown. */
const char *gguf_type_name(uint32_t ggml_type);

typedef struct gguf_kv {
    const uint8_t *key;   /* not NUL-terminated */
    uint64_t key_len;
    uint32_t type;        /* GGUF_* */
    const uint8_t *value; /* the value's bytes as stored (a string: its u64 length, then the bytes) */
    uint64_t value_bytes;
} gguf_kv;

typedef struct gguf_tensor {
    char name[GGUF_MAX_NAME];
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0]: values per row (innermost); unused dims are 1 */
    uint32_t ggml_type;
    uint64_t offset;            /* from the start of the data region, as stored */
    uint64_t bytes;
} gguf_tensor;

typedef struct gguf_file {
    const uint8_t *data;        /* the whole file (borrowed) */
    uint64_t size;
    uint32_t version;
    uint32_t alignment;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    uint64_t data_start;        /* file offset of the data region (a multiple of the alignment) */
    uint64_t data_end;          /* file offset just past the last tensor's bytes */
} gguf_file;

/* A file mapped read-only whole, for gguf_parse. */
typedef struct gguf_mapping {
    const uint8_t *data;
    uint64_t size;
} gguf_mapping;
/* Maps path: 0, or -1 with a message that names the path in err. Opens without blocking, so a
 * FIFO is refused ("not a regular file") instead of waited on, as are directories, devices and
 * empty files. */
int gguf_map(const char *path, gguf_mapping *m, char *err, size_t err_size);
void gguf_unmap(gguf_mapping *m);

/* Parses size bytes. Returns 0 and fills *f (free it with gguf_free), or -1 with a message in
 * err (err_size bytes) and *f empty. */
int gguf_parse(gguf_file *f, const uint8_t *data, uint64_t size, char *err, size_t err_size);
void gguf_free(gguf_file *f);

/* The tensor called name, NULL if none. */
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
/* The key/value called key, NULL if none. */
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
/* A string value copied into out with a NUL (out_size bytes): 0, or -1 if missing, of another
 * type or too long. */
int gguf_get_string(const gguf_file *f, const char *key, char *out, size_t out_size);
/* A u32 value: 0, or -1 if missing or of another type. */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
/* An integer value of any integer type (converters write u32, i32 or u64 for the same key) that
 * is >= 0: 0, or -1 if missing, of another type or negative. */
int gguf_get_uint(const gguf_file *f, const char *key, uint64_t *out);
/* A float value stored as F32 or F64 (converted to float): 0, or -1 if missing or of another type. */
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
/* An array value: its element type (GGUF_*), its count and its elements' bytes (for strings: each
 * a u64 length then the bytes, already checked to lie inside the value by the parser): 0, or -1
 * if missing or not an array. */
int gguf_get_array(const gguf_file *f, const char *key, uint32_t *elem_type, uint64_t *count, const uint8_t **data,
                   uint64_t *bytes);
/* Values in a tensor (product of ne). */
uint64_t gguf_tensor_values(const gguf_tensor *t);
/* The tensor's bytes in the file. */
const uint8_t *gguf_tensor_data(const gguf_file *f, const gguf_tensor *t);

#endif
