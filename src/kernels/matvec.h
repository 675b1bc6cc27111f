/* Internal interface of the matvec family for another family: hk_mmq hands a few tokens to
 * hk_matvec_int8_tokens's kernels where they take the call (the few-token GEMM's tiles would
 * spend most of their work on rows past m). */
#ifndef HK_MATVEC_H
#define HK_MATVEC_H

#include "family.h"

/* Whether hk_matvec_int8_tokens's kernels take `tokens` rows of Q8_1 x against `rows` weight rows
 * of wtype at w's offset on this context (its alignment, subgroup-size control and loop limits);
 * the caller has checked the type, k and sizes. */
int hk__matvec_tokens_takes(const hk_context *context, hk_type wtype, hk_view w, uint32_t rows, uint32_t k,
                            uint32_t tokens);
/* Records hk_matvec_int8_tokens (tokens = 1: hk_matvec_int8) with errors reported as fn's. */
hk_status hk__matvec_tokens(hk_context *context, hk_stream *stream, const char *fn, hk_type wtype, hk_view w,
                            hk_view xq, hk_view y, uint32_t rows, uint32_t k, uint32_t tokens);

#endif
