/* tests/integration/test_vx_hf_extract.c — `vindex extract` on synthetic Hugging Face checkpoints,
 * then the vindex opened through vx_source: every expert view must decode to the values of the
 * HF layout (gpt-oss MXFP4, gate = even rows, up = odd rows) or hold the per-expert bytes
 * (qwen3moe), dense tensors must be the source bytes, and the audit must reach the program. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_st.h"
#include "kernels/kn.h"
#include "vindex/vx_safetensors.h"
#include "vindex/vx_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs `vindex ARGS...`; returns the exit status, stderr in *err_out (caller frees). */
static int run_vindex(char **err_out, const char *a1, const char *a2, const char *a3,
                      const char *a4) {
    char *argv[] = {
        (char *)mwt_bin("vindex"), (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
    char *out = NULL, *err = NULL;
    int rc = mwt_run(argv, &out, &err, 120000);
    free(out);
    if (err_out)
        *err_out = err;
    else
        free(err);
    return rc;
}

static vx_source *open_source(const char *path) {
    vx_source *s = NULL;
    mw_err err = {{0}};
    if (vx_source_open(path, NULL, &s, &err)) fail_msg("vx_source_open: %s", err.msg);
    return s;
}

/* Writes the checkpoint o describes, extracts it with the vindex program, and opens both the
 * source tensors (*src) and the vindex (returned). */
static vx_source *extract_and_open(const mwt_fx *f, const mwt_hf_opts *o, const char *arch,
                                   vx_st_set **src) {
    assert_int_equal(mwt_hf_write(f->ck, o), 0);
    char *err = NULL;
    int rc = run_vindex(&err, "extract", f->ck, f->out, NULL);
    if (rc != 0) fail_msg("vindex extract exited %d: %s", rc, err ? err : "");
    free(err);
    mw_err e = {{0}};
    if (vx_st_set_open(f->ck, src, &e)) fail_msg("%s", e.msg);
    vx_source *s = open_source(f->out);
    assert_string_equal(vx_source_arch(s), arch);
    return s;
}

static int64_t meta_i(const vx_source *s, const char *key) {
    int64_t v = -1;
    mw_err err = {{0}};
    if (vx_meta_get_i64(vx_source_meta(s), key, &v, &err) != 1) fail_msg("meta %s missing", key);
    return v;
}

/* Every element of an MXFP4 view against the HF blocks/scales (source rows 2r+parity, or r). */
static void check_mxfp4_view(const kn_mat *m, const vx_st_tensor *bl, const vx_st_tensor *sc,
                             int64_t src_rows, int64_t e, int parity, const char *what) {
    assert_int_equal(m->type, KN_MXFP4);
    int64_t bad = 0;
    for (int64_t r = 0; r < m->rows; r++) {
        const uint8_t *row = (const uint8_t *)m->data + (size_t)r * m->row_bytes;
        int64_t sr = parity < 0 ? r : 2 * r + parity;
        for (int64_t k = 0; k < m->cols; k++) {
            float got = mwt_ggml_mxfp4_value(row, k);
            float want = mwt_hf_mxfp4_value(bl->data, sc->data, src_rows, m->cols, e, sr, k);
            bad += got != want;
        }
    }
    if (bad)
        fail_msg("%s expert %lld: %lld values differ from the HF layout", what, (long long)e,
                 (long long)bad);
}

/* A BF16 bias view against entries stride*i + parity of row e of an [E, n] source. */
static void check_bias_view(const kn_mat *m, const vx_st_tensor *src, int64_t e, int stride,
                            int parity) {
    assert_non_null(m->data);
    assert_int_equal(m->type, KN_BF16);
    assert_int_equal(m->rows, 1);
    const uint16_t *got = m->data, *s = (const uint16_t *)src->data;
    int64_t n = m->cols, row = src->shape[1];
    for (int64_t i = 0; i < n; i++) assert_int_equal(got[i], s[e * row + stride * i + parity]);
}

static void test_gpt_oss_extract_and_load(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.shards = 2;
    o.inv_freq = true;
    vx_st_set *src;
    vx_source *s = extract_and_open(f, &o, "gpt-oss", &src);
    mw_err err = {{0}};
    assert_int_equal(vx_source_n_layers(s), o.layers);
    assert_int_equal(vx_source_n_experts(s), o.experts);
    assert_int_equal(meta_i(s, "gpt-oss.expert_feed_forward_length"), o.ff);
    assert_int_equal(meta_i(s, "gpt-oss.attention.key_length"), o.head_dim);
    char name[256];
    for (int l = 0; l < o.layers; l++) {
#define SRC(part)                                                                                  \
    (snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%s", l, part),                       \
     vx_st_set_find(src, name, NULL))
        const vx_st_tensor *gub = SRC("gate_up_proj_blocks"), *gus = SRC("gate_up_proj_scales");
        const vx_st_tensor *db = SRC("down_proj_blocks"), *ds = SRC("down_proj_scales");
        const vx_st_tensor *gubias = SRC("gate_up_proj_bias"), *dbias = SRC("down_proj_bias");
#undef SRC
        for (int e = 0; e < o.experts; e++) {
            kn_expert x;
            if (vx_source_expert(s, l, e, &x, &err)) fail_msg("expert %d/%d: %s", l, e, err.msg);
            assert_int_equal(x.gate.rows, o.ff);
            assert_int_equal(x.gate.cols, o.hidden);
            assert_int_equal(x.down.rows, o.hidden);
            assert_int_equal(x.down.cols, o.ff);
            check_mxfp4_view(&x.gate, gub, gus, 2 * o.ff, e, 0, "gate");
            check_mxfp4_view(&x.up, gub, gus, 2 * o.ff, e, 1, "up");
            check_mxfp4_view(&x.down, db, ds, o.hidden, e, -1, "down");
            check_bias_view(&x.gate_b, gubias, e, 2, 0);
            check_bias_view(&x.up_b, gubias, e, 2, 1);
            check_bias_view(&x.down_b, dbias, e, 1, 0);
        }
    }
    /* dense tensors keep dtype and bytes */
    const char *pairs[][2] = {{"model.layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight"},
                              {"model.layers.0.self_attn.sinks", "blk.0.attn_sinks.weight"},
                              {"model.embed_tokens.weight", "token_embd.weight"},
                              {"model.norm.weight", "output_norm.weight"}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        const vx_st_tensor *st = vx_st_set_find(src, pairs[i][0], NULL);
        const vx_tensor *t = vx_source_tensor(s, pairs[i][1]);
        if (!t) fail_msg("%s missing from the vindex", pairs[i][1]);
        assert_int_equal(t->type, vx_st_dtype_kn(st->dtype));
        assert_int_equal(t->nbytes, st->nbytes);
        assert_memory_equal(t->data, st->data, st->nbytes);
    }
    vx_source_close(s);
    vx_st_set_close(src);
    /* the vindex passes its own verification */
    char *msg = NULL;
    int rc = run_vindex(&msg, "verify", f->out, NULL, NULL);
    if (rc != 0) fail_msg("vindex verify exited %d: %s", rc, msg ? msg : "");
    free(msg);
}

static void test_qwen3moe_extract_and_load(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "qwen3_moe");
    o.experts = 4;
    vx_st_set *src;
    vx_source *s = extract_and_open(f, &o, "qwen3moe", &src);
    mw_err err = {{0}};
    const char *proj[3] = {"gate", "up", "down"};
    for (int l = 0; l < o.layers; l++)
        for (int e = 0; e < o.experts; e++) {
            kn_expert x;
            if (vx_source_expert(s, l, e, &x, &err)) fail_msg("expert %d/%d: %s", l, e, err.msg);
            const kn_mat *m[3] = {&x.gate, &x.up, &x.down};
            for (int p = 0; p < 3; p++) {
                char name[256];
                snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.%s_proj.weight", l, e,
                         proj[p]);
                const vx_st_tensor *st = vx_st_set_find(src, name, NULL);
                assert_int_equal(m[p]->type, KN_BF16);
                assert_int_equal(m[p]->rows, st->shape[0]);
                assert_int_equal(m[p]->cols, st->shape[1]);
                for (int64_t r = 0; r < m[p]->rows; r++)
                    assert_memory_equal((const uint8_t *)m[p]->data + (size_t)r * m[p]->row_bytes,
                                        st->data + (size_t)r * (size_t)st->shape[1] * 2,
                                        (size_t)st->shape[1] * 2);
            }
            assert_null(x.gate_b.data);
        }
    vx_source_close(s);
    vx_st_set_close(src);
}

/* An unrecognised tensor is reported, and fatal with --strict; a bad config fails by name. */
static void test_audit_and_errors_reach_the_program(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.layers = 1;
    o.extra_tensor = "model.layers.0.mlp.mystery.weight";
    assert_int_equal(mwt_hf_write(f->ck, &o), 0);
    char *msg = NULL;
    int rc = run_vindex(&msg, "extract", "--strict", f->ck, f->out);
    assert_int_not_equal(rc, 0);
    if (!msg || !strstr(msg, "mystery")) fail_msg("--strict did not name the tensor: %s", msg);
    free(msg);
    mwt_rmrf(f->out);
    mwt_rmrf(f->ck);
    o.extra_tensor = NULL;
    o.config_patch = "{\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}}";
    assert_int_equal(mwt_hf_write(f->ck, &o), 0);
    rc = run_vindex(&msg, "extract", f->ck, f->out, NULL);
    assert_int_not_equal(rc, 0);
    if (!msg || !strstr(msg, "linear")) fail_msg("the rope error was not reported: %s", msg);
    free(msg);
    /* text from the checkpoint reaches the terminal with its control characters escaped */
    mwt_rmrf(f->ck);
    o.config_patch = "{\"\\u001b]0;owned\\u0007x\": 1}";
    assert_int_equal(mwt_hf_write(f->ck, &o), 0);
    rc = run_vindex(&msg, "extract", f->ck, f->out, NULL);
    assert_int_equal(rc, 1);
    if (!msg || !strstr(msg, "'\\x1b]0;owned\\x07x' is not known"))
        fail_msg("the key was not named, escaped: %s", msg);
    for (const char *p = msg; *p; p++) assert_true(*p == '\n' || (unsigned char)*p >= 0x20);
    free(msg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        MWT_FX_TEST(test_gpt_oss_extract_and_load),
        MWT_FX_TEST(test_qwen3moe_extract_and_load),
        MWT_FX_TEST(test_audit_and_errors_reach_the_program),
    };
    return cmocka_run_group_tests_name("vx_hf_extract", tests, NULL, NULL);
}
