/* tests/support/mwt_model.c — see mwt_model.h. */
#include "tests/support/mwt_model.h"

#include <stdio.h>
#include <stdlib.h>

#include "model/md_local.h"
#include "model/md_model.h"
#include "tests/support/mw_test.h"

static int flaky_run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    mwt_flaky *f = b->impl;
    if (batch->layer == f->fail_layer) {
        f->fail_layer = -1;
        return mw_errf(err, "node lost");
    }
    return f->inner->run(f->inner, batch, out, err);
}

void mwt_flaky_init(mwt_flaky *f, md_expert_backend *inner) {
    *f = (mwt_flaky){.b = {.name = "flaky", .run = flaky_run}, .inner = inner, .fail_layer = -1};
    f->b.impl = f;
}

mwt_model mwt_model_open(const char *path) {
    mwt_model m = {0};
    mw_err e;
    if (vx_source_open(path, NULL, &m.src, &e) || md_model_load(m.src, &m.model, &e) ||
        md_local_backend_new(m.src, &m.model->cfg, NULL, &m.experts, &e))
        fail_msg("%s: %s", path, e.msg);
    return m;
}

mwt_model mwt_model_fixture(const char *name) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/model.gguf", name);
    return mwt_model_open(mwt_fixture(rel));
}

void mwt_model_close(mwt_model *m) {
    if (m->experts) m->experts->destroy(m->experts);
    md_model_free(m->model);
    vx_source_close(m->src);
    *m = (mwt_model){0};
}

void mwt_model_tokens(const char *name, int32_t *tokens, int n) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/tokens.txt", name);
    char *txt = mwt_read_file(mwt_fixture(rel), NULL), *p = txt;
    assert_non_null(txt);
    for (int i = 0; i < n; i++) tokens[i] = (int32_t)strtol(p, &p, 10);
    free(txt);
}

float *mwt_prefill(const char *path, kn_numerics num, const int32_t *tok, int T, int64_t n_ctx,
                   int64_t *V) {
    mwt_model mm = mwt_model_open(path);
    md_model *m = mm.model;
    md_ctx *c;
    mw_err e;
    md_ctx_params p = {.numerics = num, .experts = mm.experts, .n_ctx = n_ctx};
    if (md_ctx_new(m, &p, &c, &e)) fail_msg("%s", e.msg);
    md_row *rows = malloc((size_t)T * sizeof *rows);
    for (int i = 0; i < T; i++) rows[i] = (md_row){0, i, tok[i], 1};
    const int64_t n_vocab = m->cfg.n_vocab;
    if (V) *V = n_vocab;
    float *out = malloc((size_t)T * (size_t)n_vocab * sizeof(float));
    if (md_forward(c, rows, T, out, &e)) fail_msg("%s: %s", path, e.msg);
    free(rows);
    md_ctx_free(c);
    mwt_model_close(&mm);
    return out;
}
