/* The search space's text form: a schedule as "name=value,..." in its family's order, as the
 * cache file and the reports write it. */
#include "private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void hk__tune_format(const hk__tunable *f, const uint32_t *v, char *out, size_t size)
{
    size_t n = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < f->n_params && n < size; i++) {
        int w = snprintf(out + n, size - n, "%s%s=%u", i ? "," : "", f->params[i].name, v[i]);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

/* values are any unsigned integers here; hk__tune_valid checks their ranges */
int hk__tune_parse(const hk__tunable *f, const char *text, uint32_t *v)
{
    const char *s = text;
    memset(v, 0, HK_TUNE_MAX_PARAMS * sizeof *v);
    for (uint32_t i = 0; i < f->n_params; i++) {
        size_t len = strlen(f->params[i].name);
        if (strncmp(s, f->params[i].name, len) || s[len] != '=')
            return 0;
        s += len + 1;
        char *end;
        errno = 0;
        unsigned long x = strtoul(s, &end, 10);
        if (end == s || errno || x > 1u << 20 || *s == '-')
            return 0;
        v[i] = (uint32_t)x;
        s = end;
        if (i + 1 < f->n_params && *s++ != ',')
            return 0;
    }
    return *s == 0;
}

int hk__tune_valid(const hk__tunable *f, const uint32_t *v)
{
    for (uint32_t i = 0; i < f->n_params; i++) {
        const hk__tune_param *p = &f->params[i];
        if (v[i] < p->lo || v[i] > p->hi || (p->pow2 && (v[i] & (v[i] - 1))))
            return 0;
    }
    return 1;
}

uint64_t hk__tune_space(const hk__tunable *f)
{
    uint64_t space = 1;
    for (uint32_t i = 0; i < f->n_params; i++)
        space *= f->params[i].count;
    return space;
}

void hk__tune_bucket(char *out, size_t size, uint32_t x)
{
    uint64_t hi = 1;
    while (hi < x)
        hi <<= 1;
    snprintf(out, size, "%llu-%llu", (unsigned long long)(hi / 2 + 1 < hi ? hi / 2 + 1 : hi),
             (unsigned long long)hi);
}

uint64_t hk__tune_hash(uint64_t h, const uint32_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        for (int byte = 0; byte < 4; byte++) {
            h ^= (v[i] >> (8 * byte)) & 0xFFu;
            h *= 0x100000001B3ull;
        }
    return h;
}

hk_status hk__tune_check_sizes(uint64_t weights, uint64_t x, uint64_t out)
{
    if (weights > (1ull << 28) || x > (1ull << 27) || out > (1ull << 27))
        return hk__fail(HK_ERROR_INVALID_ARGUMENT, "hk_tune", "%llu weight, %llu activation and %llu output values: "
                        "more than the tuner's 2^28, 2^27 and 2^27", (unsigned long long)weights,
                        (unsigned long long)x, (unsigned long long)out);
    return HK_OK;
}
