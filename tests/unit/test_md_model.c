/* tests/unit/test_md_model.c — loading checks on altered copies of the fixture models: a missing
 * tensor, a wrong shape, a tensor the family does not use, a missing
 * expert bias; and qwen3moe's tied LM head when output.weight is absent. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_local.h"
#include "model/md_model.h"
#include "vindex/vx_gguf.h"

typedef struct alter {
    const char *drop; /* tensor left out */
    const char *add;  /* tensor added (after the drop, so it may replace it) */
    kn_type add_type;
    int add_dims;
    int64_t add_ne[4];
} alter;

/* Writes a copy of a fixture model with one alteration; returns the path (static buffer). */
static const char *altered(const char *model, const alter *a, const char *dir) {
    static char out[512];
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/model.gguf", model);
    snprintf(out, sizeof out, "%s/altered.gguf", dir);
    vx_gguf *g;
    mw_err e;
    if (vx_gguf_open(mwt_fixture(rel), &g, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    const vx_meta *m = vx_gguf_meta(g);
    for (size_t i = 0; i < vx_meta_count(m); i++)
        assert_int_equal(vx_meta_copy_entry(vx_gguf_writer_meta(w), m, i), 0);
    for (size_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_tensor *t = vx_gguf_tensor(g, i);
        if (a->drop && !strcmp(t->name, a->drop)) continue;
        if (vx_gguf_writer_add(w, t->name, t->type, t->n_dims, t->ne, t->data, &e))
            fail_msg("%s", e.msg);
    }
    if (a->add) {
        static uint8_t zeros[1 << 20];
        if (vx_gguf_writer_add(w, a->add, a->add_type, a->add_dims, a->add_ne, zeros, &e))
            fail_msg("%s", e.msg);
    }
    if (vx_gguf_writer_write(w, out, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer_free(w);
    vx_gguf_close(g);
    return out;
}

/* Loads PATH and its local experts; returns the error message ("" on success). */
static const char *load(const char *path) {
    static mw_err e;
    e.msg[0] = '\0';
    vx_source *src;
    if (vx_source_open(path, NULL, &src, &e)) return e.msg;
    md_model *m;
    if (md_model_load(src, &m, &e) == 0) {
        md_expert_backend *b;
        if (md_local_backend_new(src, &m->cfg, NULL, &b, &e) == 0) b->destroy(b);
        md_model_free(m);
    }
    vx_source_close(src);
    return e.msg;
}

static void expect(const char *model, const alter *a, const char *needle) {
    char *dir = mwt_tmpdir("md_model");
    const char *msg = load(altered(model, a, dir));
    printf("    error: %s\n", msg);
    if (!strstr(msg, needle)) fail_msg("expected an error mentioning '%s', got '%s'", needle, msg);
    mwt_rmrf(dir);
    free(dir);
}

static void test_fixtures_load(void **state) {
    (void)state;
    assert_string_equal(load(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf")), "");
    assert_string_equal(load(mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf")), "");
}

static void test_missing_tensors(void **state) {
    (void)state;
    expect("gpt-oss-tiny", &(alter){.drop = "blk.2.attn_sinks.weight"},
           "missing tensor 'blk.2.attn_sinks.weight'");
    expect("gpt-oss-tiny", &(alter){.drop = "blk.3.post_attention_norm.weight"},
           "missing tensor 'blk.3.post_attention_norm.weight'");
    expect("qwen3moe-tiny", &(alter){.drop = "blk.1.attn_k_norm.weight"},
           "missing tensor 'blk.1.attn_k_norm.weight'");
    expect("gpt-oss-tiny", &(alter){.drop = "output.weight"}, "missing tensor 'output.weight'");
    expect("gpt-oss-tiny", &(alter){.drop = "blk.0.ffn_up_exps.bias"}, "missing up bias");
}

static void test_wrong_shapes_and_types(void **state) {
    (void)state;
    expect("gpt-oss-tiny",
           &(alter){.drop = "blk.1.attn_q.weight",
                    .add = "blk.1.attn_q.weight",
                    .add_type = KN_F32,
                    .add_dims = 2,
                    .add_ne = {256, 128, 1, 1}},
           "'blk.1.attn_q.weight' has shape [256, 128], expected [256, 256]");
    expect("qwen3moe-tiny",
           &(alter){.drop = "blk.0.ffn_norm.weight",
                    .add = "blk.0.ffn_norm.weight",
                    .add_type = KN_F16,
                    .add_dims = 1,
                    .add_ne = {128, 1, 1, 1}},
           "'blk.0.ffn_norm.weight' has shape [128], expected [256]");
    expect("gpt-oss-tiny",
           &(alter){.drop = "token_embd.weight",
                    .add = "token_embd.weight",
                    .add_type = KN_F32,
                    .add_dims = 2,
                    .add_ne = {255, 512, 1, 1}},
           "token_embd.weight");
}

static void test_unused_tensor_is_reported(void **state) {
    (void)state;
    expect("gpt-oss-tiny",
           &(alter){.add = "blk.0.mystery.weight",
                    .add_type = KN_F32,
                    .add_dims = 1,
                    .add_ne = {16, 1, 1, 1}},
           "'blk.0.mystery.weight' is not part of a gpt-oss model");
    /* qwen3moe has no attention biases */
    expect("qwen3moe-tiny",
           &(alter){.add = "blk.0.attn_q.bias",
                    .add_type = KN_F32,
                    .add_dims = 1,
                    .add_ne = {256, 1, 1, 1}},
           "not part of a qwen3moe model");
}

static void test_qwen3moe_ties_the_lm_head(void **state) {
    (void)state;
    char *dir = mwt_tmpdir("md_model");
    const char *path = altered("qwen3moe-tiny", &(alter){.drop = "output.weight"}, dir);
    vx_source *src;
    md_model *m;
    mw_err e;
    if (vx_source_open(path, NULL, &src, &e) || md_model_load(src, &m, &e)) fail_msg("%s", e.msg);
    assert_ptr_equal(m->output.data, m->tok_embd.data);
    md_model_free(m);
    vx_source_close(src);
    mwt_rmrf(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_load),
        cmocka_unit_test(test_missing_tensors),
        cmocka_unit_test(test_wrong_shapes_and_types),
        cmocka_unit_test(test_unused_tensor_is_reported),
        cmocka_unit_test(test_qwen3moe_ties_the_lm_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
