/* hk-bench --step (bench/step.c): a model's decode step on synthetic weights. */
#ifndef HK_BENCH_STEP_H
#define HK_BENCH_STEP_H

#include "measure.h"

/* Times the decode step of each SHAPE[:LAYERS] of the comma-separated list (NULL: the model shapes,
 * or the tiny ones on a CPU device). Returns the exit code: 0, 1 (a failure) or 2 (a bad list). */
int bench_step(bench *b, const char *list);

#endif
