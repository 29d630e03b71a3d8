/* tests/integration/test_vindex_synth.c — synthetic models are usable models: a deep gpt-oss, a
 * deep qwen3moe and a deep deepseek2 from `vindex synth` load through the model layer from their
 * vindex, and a prompt's
 * residual stream keeps a sane RMS through every layer (no blow-up, no collapse) with finite,
 * spread-out logits; the GGUF-backed and vindex-backed sources give identical logits. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_local.h"
#include "model/md_model.h"
#include "vindex/vx_synth.h"
#include "vindex/vx_vindex.h"

#define N_TOK 16

typedef struct rms_seen {
    double min, max;
    int layers;
} rms_seen;

static void observe(void *ud, int layer, md_probe p, const void *data, int64_t rows, int64_t cols) {
    rms_seen *r = ud;
    if (p != MD_PROBE_L_OUT) return;
    const float *x = data;
    for (int64_t t = 0; t < rows; t++) {
        double ss = 0;
        for (int64_t k = 0; k < cols; k++) ss += (double)x[t * cols + k] * x[t * cols + k];
        double rms = sqrt(ss / (double)cols);
        if (!isfinite(rms)) rms = INFINITY;
        if (rms < r->min) r->min = rms;
        if (rms > r->max) r->max = rms;
    }
    if (layer + 1 > r->layers) r->layers = layer + 1;
}

/* Runs a prompt through the model in `path`; returns the last row's logits (malloc'ed). */
static float *run(const char *path, rms_seen *seen, int64_t *n_vocab) {
    vx_source *src;
    md_model *m;
    md_expert_backend *be;
    mw_err e;
    if (vx_source_open(path, NULL, &src, &e) || md_model_load(src, &m, &e) ||
        md_local_backend_new(src, &m->cfg, NULL, &be, &e))
        fail_msg("%s: %s", path, e.msg);
    md_ctx_params p = {.numerics = KN_NUM_F32, .experts = be, .n_seq = 1, .n_ctx = 64};
    md_ctx *c;
    if (md_ctx_new(m, &p, &c, &e)) fail_msg("%s", e.msg);
    md_ctx_set_observer(c, observe, seen);
    *n_vocab = m->cfg.n_vocab;
    md_row rows[N_TOK];
    for (int i = 0; i < N_TOK; i++)
        rows[i] = (md_row){0, i, (int32_t)((i * 37 + 11) % (*n_vocab - 3)), i == N_TOK - 1};
    float *logits = malloc(sizeof(float) * (size_t)*n_vocab);
    if (md_forward(c, rows, N_TOK, logits, &e)) fail_msg("%s", e.msg);
    md_ctx_free(c);
    be->destroy(be);
    md_model_free(m);
    vx_source_close(src);
    return logits;
}

static void check_family(const char *const *args, const char *tag, int layers) {
    char gguf[1024], dir[1024];
    snprintf(gguf, sizeof gguf, "%s/%s.gguf", mwt_tmp, tag);
    snprintf(dir, sizeof dir, "%s/%s", mwt_tmp, tag);
    mw_err e;
    vx_input *in, *g;
    if (vx_synth_input_kv(args, &in, &e) || vx_input_write_gguf(in, gguf, NULL, NULL, &e))
        fail_msg("%s", e.msg);
    vx_input_close(in);
    if (vx_input_open(gguf, &g, &e) || vx_extract(g, dir, NULL, NULL, &e)) fail_msg("%s", e.msg);
    vx_input_close(g);
    rms_seen a = {INFINITY, 0, 0}, b = {INFINITY, 0, 0};
    int64_t nv;
    float *la = run(dir, &a, &nv), *lb = run(gguf, &b, &nv);
    assert_int_equal(a.layers, layers);
    fprintf(stderr, "%s: residual RMS over %d layers in [%.3f, %.3f]\n", tag, layers, a.min, a.max);
    if (!(a.min > 0.3 && a.max < 5.0))
        fail_msg("%s: residual RMS left [0.3, 5]: [%g, %g]", tag, a.min, a.max);
    assert_memory_equal(la, lb, sizeof(float) * (size_t)nv); /* same inputs, same numbers */
    double mean = 0, var = 0;
    for (int64_t i = 0; i < nv; i++) {
        assert_true(isfinite(la[i]));
        mean += la[i];
    }
    mean /= (double)nv;
    for (int64_t i = 0; i < nv; i++) var += (la[i] - mean) * (la[i] - mean);
    double sd = sqrt(var / (double)nv);
    fprintf(stderr, "%s: logits sd %.3f\n", tag, sd);
    assert_true(sd > 0.1 && sd < 10);
    free(la);
    free(lb);
}

static void test_deep_gpt_oss_stays_sane(void **state) {
    (void)state;
    const char *args[] = {"arch",    "gpt-oss", "layers",   "24", "hidden",         "96",
                          "heads",   "4",       "kv-heads", "2",  "head-dim",       "16",
                          "experts", "6",       "top-k",    "2",  "expert-ff",      "64",
                          "vocab",   "260",     "seed",     "21", "sliding-window", "4",
                          NULL};
    check_family(args, "oss24", 24);
}

static void test_deep_qwen3moe_stays_sane(void **state) {
    (void)state;
    const char *args[] = {"arch",    "qwen3moe", "layers",   "12", "hidden",       "256",
                          "heads",   "2",        "kv-heads", "1",  "head-dim",     "32",
                          "experts", "4",        "top-k",    "2",  "expert-ff",    "256",
                          "vocab",   "260",      "seed",     "4",  "dense-format", "f16",
                          NULL};
    check_family(args, "qwen12", 12);
}

/* latent attention, 2 dense layers, 8 groups of 4 experts, 2 shared experts, Q8_0 dense weights
 * (the 3-D attn_k_b / attn_v_b included) */
static void test_deep_deepseek2_stays_sane(void **state) {
    (void)state;
    const char *args[] = {"arch",
                          "deepseek2",
                          "layers",
                          "12",
                          "hidden",
                          "256",
                          "heads",
                          "4",
                          "head-dim",
                          "32",
                          "rope-dim",
                          "16",
                          "q-lora",
                          "64",
                          "kv-lora",
                          "64",
                          "experts",
                          "32",
                          "top-k",
                          "4",
                          "expert-ff",
                          "256",
                          "dense-layers",
                          "2",
                          "dense-ff",
                          "512",
                          "shared-experts",
                          "2",
                          "groups",
                          "8",
                          "groups-used",
                          "3",
                          "vocab",
                          "260",
                          "seed",
                          "9",
                          "dense-format",
                          "q8_0",
                          NULL};
    check_family(args, "ds12", 12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deep_gpt_oss_stays_sane),
        cmocka_unit_test(test_deep_qwen3moe_stays_sane),
        cmocka_unit_test(test_deep_deepseek2_stays_sane),
    };
    return cmocka_run_group_tests_name("vindex_synth", tests, mwt_tmp_setup, mwt_tmp_teardown);
}
