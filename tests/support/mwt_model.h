/* tests/support/mwt_model.h — running a model file in process for the model tests: open the
 * source, load the model and its local experts, one prefill with logits on every row. */
#ifndef MWT_MODEL_H
#define MWT_MODEL_H

#include <stdint.h>

#include "kernels/kn.h"
#include "model/md_moe.h"

/* Prefill of tok[0 .. T) as one batch (a context of n_ctx positions) of the model at path; returns
 * T × n_vocab logits (malloc'ed) and the vocabulary in *V (may be NULL). Fails the test on any
 * error. */
float *mwt_prefill(const char *path, kn_numerics num, const int32_t *tok, int T, int64_t n_ctx,
                   int64_t *V);

/* An expert backend that fails once at layer fail_layer (which then becomes -1) and passes every
 * other call through to inner: a node lost mid-pass. */
typedef struct mwt_flaky {
    md_expert_backend b;
    md_expert_backend *inner;
    int fail_layer;
} mwt_flaky;

void mwt_flaky_init(mwt_flaky *f, md_expert_backend *inner);

#endif
