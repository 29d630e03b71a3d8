/* tests/support/mwt_model.h — running a model file in process for the model tests: open the
 * source, load the model and its local experts (a fixture's too, with its prompt), one prefill
 * with logits on every row. */
#ifndef MWT_MODEL_H
#define MWT_MODEL_H

#include <stdint.h>

#include "kernels/kn.h"
#include "model/md_model.h"
#include "model/md_moe.h"
#include "vindex/vx_source.h"

/* A model file opened in process: its source, the model and its local experts. */
typedef struct mwt_model {
    vx_source *src;
    md_model *model;
    md_expert_backend *experts;
} mwt_model;

/* The model at path with its local experts; fails the test, naming path, on any error. */
mwt_model mwt_model_open(const char *path);
/* The same of the fixture tests/fixtures/llamacpp/NAME/model.gguf. */
mwt_model mwt_model_fixture(const char *name);
void mwt_model_close(mwt_model *m);
/* The first n token ids of the fixture NAME's prompt (tests/fixtures/llamacpp/NAME/tokens.txt). */
void mwt_model_tokens(const char *name, int32_t *tokens, int n);

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
