/* tests/support/mwt_model.h — running a model file in process for the model tests: open the
 * source, load the model and its local experts, one prefill with logits on every row. */
#ifndef MWT_MODEL_H
#define MWT_MODEL_H

#include <stdint.h>

#include "kernels/kn.h"

/* Prefill of tok[0 .. T) as one batch (a context of n_ctx positions) of the model at path; returns
 * T × n_vocab logits (malloc'ed) and the vocabulary in *V (may be NULL). Fails the test on any
 * error. */
float *mwt_prefill(const char *path, kn_numerics num, const int32_t *tok, int T, int64_t n_ctx,
                   int64_t *V);

#endif
