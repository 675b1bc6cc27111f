/* A kernel family as the rest of the library sees it: one const descriptor beside the family's
 * public entry points, listed once in families.c. hk_context_prepare walks the list; the tuner
 * finds a tunable family's search space, shape checks and measuring case through it. */
#ifndef HK_FAMILY_H
#define HK_FAMILY_H

#include "cases.h"
#include "hk_ref.h"
#include "internal.h"
#include "tune.h"

/* Per-type tables of the kernels are indexed by hk_type (HK_REF_TYPES rows, designated
 * initializers), each row with a member `takes`, 1 where the kernel takes the type: a row left
 * out reads as zeros, and shader id 0 is a real shader. HK_TYPE_TAKES(table, t): whether the
 * table has a row for t. HK_NO_SHADER marks a variant a row does not have. */
#define HK_TYPE_TAKES(table, t) ((unsigned)(t) < HK_REF_TYPES && (table)[t].takes)
#define HK_NO_SHADER (-1)

/* What hk_context_prepare hands a family: a stream that records nothing (a dispatch only builds
 * its pipeline there) and views of a buffer without memory, so that one call per shape class the
 * family distinguishes builds exactly the pipeline that class takes on this device. */
typedef struct hk__prep {
    hk_context *ctx;
    hk_stream *s;
    hk_buffer *buf;
    const char *kernel;
} hk__prep;

/* View i of the memoryless buffer: 4 GiB apart, so that no two overlap and every offset is
 * aligned. */
hk_view hk__prep_view(const hk__prep *p, int i);
/* A shape the device cannot run (HK_ERROR_UNSUPPORTED) builds nothing and is fine; any other
 * refusal means the family's prepare shapes no longer fit its own checks: an internal error. */
hk_status hk__prep_check(const hk__prep *p, hk_status st);
#define HK_PREP_TRY(p, call)                                                                                        \
    do {                                                                                                            \
        hk_status st_ = hk__prep_check((p), (call));                                                                \
        if (st_ != HK_OK)                                                                                           \
            return st_;                                                                                             \
    } while (0)

typedef struct hk__family {
    const char *name;                  /* the public kernel, as hk_context_prepare's list names it */
    hk_status (*prepare)(hk__prep *p); /* calls that build every pipeline the family takes here */
    const hk__tunable *tunables[2];    /* the autotuner families it owns (NULL: none) */
} hk__family;

/* The list of every family (families.c), NULL-terminated. */
extern const hk__family *const hk__families[];

/* The types of a role (HK_REF_ROLE_WEIGHT: the quantized kernels' weights; HK_REF_ROLE_KV: KV
 * caches), from the type traits. */
uint32_t hk__types_of(uint32_t role, hk_type out[8]);

/* Blocks of 32 values per chunk of a row staged for its sum of squares (shaders/norm.glsl,
 * HK_NORM_STAGED): the most of 128, 64 and 32 whose shared memory, with `other_bytes` of the
 * kernel's own, fits the device; 0 where none does. rmsnorm.c. */
uint32_t hk__norm_stage_blocks(const hk_context *context, uint32_t other_bytes);

/* Shared memory of a row's staging (shaders/norm.glsl, HK_NORM_STAGED) in chunks of `blocks`
 * blocks, with room for `groups` group sums (HK_NORM_GROUPS). rmsnorm.c. */
uint32_t hk__norm_stage_bytes(uint32_t blocks, uint32_t groups);

#endif
