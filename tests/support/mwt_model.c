/* tests/support/mwt_model.c — see mwt_model.h. */
#include "tests/support/mwt_model.h"

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

float *mwt_prefill(const char *path, kn_numerics num, const int32_t *tok, int T, int64_t n_ctx,
                   int64_t *V) {
    vx_source *src;
    md_model *m;
    md_expert_backend *b;
    md_ctx *c;
    mw_err e;
    if (vx_source_open(path, NULL, &src, &e) || md_model_load(src, &m, &e) ||
        md_local_backend_new(src, &m->cfg, NULL, &b, &e))
        fail_msg("%s: %s", path, e.msg);
    md_ctx_params p = {.numerics = num, .experts = b, .n_ctx = n_ctx};
    if (md_ctx_new(m, &p, &c, &e)) fail_msg("%s", e.msg);
    md_row *rows = malloc((size_t)T * sizeof *rows);
    for (int i = 0; i < T; i++) rows[i] = (md_row){0, i, tok[i], 1};
    const int64_t n_vocab = m->cfg.n_vocab;
    if (V) *V = n_vocab;
    float *out = malloc((size_t)T * (size_t)n_vocab * sizeof(float));
    if (md_forward(c, rows, T, out, &e)) fail_msg("%s: %s", path, e.msg);
    free(rows);
    md_ctx_free(c);
    b->destroy(b);
    md_model_free(m);
    vx_source_close(src);
    return out;
}
