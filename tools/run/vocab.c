/* hk-run: token ids to text, from the GGUF vocabulary (tokenizer.ggml.tokens). */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int run_vocab_load(run_vocab *v, const gguf_file *f, uint32_t n_vocab, char *err, size_t err_size)
{
    memset(v, 0, sizeof *v);
    char model[32] = "";
    gguf_get_string(f, "tokenizer.ggml.model", model, sizeof model);
    v->byte_level = strcmp(model, "gpt2") == 0;
    uint32_t type;
    uint64_t count, bytes;
    const uint8_t *data;
    if (gguf_get_array(f, "tokenizer.ggml.tokens", &type, &count, &data, &bytes) != 0)
        return 0; /* no vocabulary: ids print without text */
    if (type != GGUF_STRING) {
        snprintf(err, err_size, "tokenizer.ggml.tokens is not an array of strings");
        return -1;
    }
    if (count < n_vocab) {
        snprintf(err, err_size, "tokenizer.ggml.tokens has %llu entries for %u embedding rows",
                 (unsigned long long)count, n_vocab);
        return -1;
    }
    v->piece = calloc(n_vocab, sizeof *v->piece);
    v->piece_len = calloc(n_vocab, sizeof *v->piece_len);
    if (!v->piece || !v->piece_len) {
        snprintf(err, err_size, "out of memory");
        run_vocab_free(v);
        return -1;
    }
    /* the parser checked that every string lies inside the value */
    uint64_t at = 0;
    for (uint32_t i = 0; i < n_vocab; i++) {
        uint64_t len = le64(data + at);
        v->piece[i] = data + at + 8;
        v->piece_len[i] = len;
        at += 8 + len;
    }
    v->n = n_vocab;
    return 0;
}

/* GPT-2's byte-level alphabet: bytes 33..126, 161..172 and 174..255 stand for themselves; the
 * others map to code points 256 + their rank. Inverse of that map, or -1. */
static int byte_of_codepoint(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    if (cp < 256 || cp > 511)
        return -1;
    uint32_t rank = cp - 256, seen = 0;
    for (uint32_t b = 0; b < 256; b++) {
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
            continue;
        if (seen++ == rank)
            return (int)b;
    }
    return -1;
}

static void put(char *out, size_t out_size, size_t *at, const void *bytes, size_t n)
{
    if (*at + n >= out_size)
        n = *at + 1 < out_size ? out_size - 1 - *at : 0;
    memcpy(out + *at, bytes, n);
    *at += n;
    out[*at] = 0;
}

void run_vocab_text(const run_vocab *v, uint32_t id, char *out, size_t out_size)
{
    if (!out_size)
        return;
    size_t at = strlen(out);
    if (id >= v->n)
        return;
    const uint8_t *p = v->piece[id];
    uint64_t n = v->piece_len[id];
    unsigned hex;
    if (!v->byte_level && n == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && p[5] == '>' &&
        sscanf((const char *)p + 3, "%2x", &hex) == 1) {
        unsigned char c = (unsigned char)hex;
        put(out, out_size, &at, &c, 1);
        return;
    }
    for (uint64_t i = 0; i < n;) {
        /* one UTF-8 sequence */
        uint32_t cp = p[i], len = 1;
        if (cp >= 0xC0 && cp < 0xE0 && i + 1 < n) {
            cp = (cp & 0x1F) << 6 | (p[i + 1] & 0x3F);
            len = 2;
        } else if (cp >= 0xE0 && cp < 0xF0 && i + 2 < n) {
            cp = (cp & 0x0F) << 12 | (p[i + 1] & 0x3F) << 6 | (p[i + 2] & 0x3F);
            len = 3;
        }
        if (v->byte_level) {
            int b = byte_of_codepoint(cp);
            if (b >= 0) {
                unsigned char c = (unsigned char)b;
                put(out, out_size, &at, &c, 1);
            } else
                put(out, out_size, &at, p + i, len);
        } else if (cp == 0x2581)
            put(out, out_size, &at, " ", 1);
        else
            put(out, out_size, &at, p + i, len);
        i += len;
    }
}

void run_vocab_free(run_vocab *v)
{
    free(v->piece);
    free(v->piece_len);
    memset(v, 0, sizeof *v);
}
