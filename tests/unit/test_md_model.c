/* tests/unit/test_md_model.c — loading checks on altered copies of the fixture models: a missing
 * tensor, a wrong shape, a tensor the family does not use, a missing
 * expert bias; qwen3moe's tied LM head when output.weight is absent; deepseek2's dense and shared
 * FFNs, latent attention tensors and optional selection bias, and its legacy attn_kv_b layout
 * computing the same bits as the split attn_k_b / attn_v_b; deepseek2 in Q8_0 pinned (packed
 * copies in place of the matrices, plain ones of the head sets) computing the same bits. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kn_internal.h"
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

/* Opens a fixture model and a writer holding its metadata: where a test's copy starts. */
static vx_gguf_writer *copy_start(const char *model, vx_gguf **g) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/model.gguf", model);
    mw_err e;
    if (vx_gguf_open(mwt_fixture(rel), g, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    const vx_meta *m = vx_gguf_meta(*g);
    for (size_t i = 0; i < vx_meta_count(m); i++)
        assert_int_equal(vx_meta_copy_entry(vx_gguf_writer_meta(w), m, i), 0);
    return w;
}

/* Adds a tensor to a copy (fails the test on an error). */
static void copy_add(vx_gguf_writer *w, const char *name, kn_type type, int n_dims,
                     const int64_t *ne, const void *data) {
    mw_err e;
    if (vx_gguf_writer_add(w, name, type, n_dims, ne, data, &e)) fail_msg("%s", e.msg);
}

/* Writes the copy to out and closes it and its fixture: where a test's copy ends. */
static const char *copy_finish(vx_gguf_writer *w, vx_gguf *g, const char *out) {
    mw_err e;
    if (vx_gguf_writer_write(w, out, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer_free(w);
    vx_gguf_close(g);
    return out;
}

/* Writes a copy of a fixture model with one alteration; returns the path (static buffer). */
static const char *altered(const char *model, const alter *a, const char *dir) {
    static char out[512];
    snprintf(out, sizeof out, "%s/altered.gguf", dir);
    vx_gguf *g;
    vx_gguf_writer *w = copy_start(model, &g);
    for (size_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_tensor *t = vx_gguf_tensor(g, i);
        if (a->drop && !strcmp(t->name, a->drop)) continue;
        copy_add(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    if (a->add) {
        static uint8_t zeros[1 << 20];
        copy_add(w, a->add, a->add_type, a->add_dims, a->add_ne, zeros);
    }
    return copy_finish(w, g, out);
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
    assert_string_equal(load(mwt_fixture("llamacpp/deepseek2-tiny/model.gguf")), "");
}

static void test_deepseek2_tensors(void **state) {
    (void)state;
    const char *required[] = {"blk.0.ffn_gate.weight",       "blk.0.attn_q_a_norm.weight",
                              "blk.1.attn_k_b.weight",       "blk.2.attn_kv_a_mqa.weight",
                              "blk.1.ffn_down_shexp.weight", "blk.2.attn_kv_a_norm.weight",
                              "blk.2.ffn_gate_inp.weight",   "blk.0.attn_q_b.weight"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "missing tensor '%s'", required[i]);
        expect("deepseek2-tiny", &(alter){.drop = required[i]}, want);
    }
    expect("deepseek2-tiny",
           &(alter){.drop = "blk.1.attn_v_b.weight",
                    .add = "blk.1.attn_v_b.weight",
                    .add_type = KN_F32,
                    .add_dims = 3,
                    .add_ne = {64, 32, 3, 1}},
           "'blk.1.attn_v_b.weight' has shape [64, 32, 3], expected [64, 32, 4]");
    /* a dense layer has no router; MoE layers have no dense FFN */
    expect("deepseek2-tiny",
           &(alter){.add = "blk.0.ffn_gate_inp.weight",
                    .add_type = KN_F32,
                    .add_dims = 2,
                    .add_ne = {256, 16, 1, 1}},
           "'blk.0.ffn_gate_inp.weight' is not part of a deepseek2 model");
    expect("deepseek2-tiny",
           &(alter){.add = "blk.1.ffn_up.weight",
                    .add_type = KN_F32,
                    .add_dims = 2,
                    .add_ne = {256, 512, 1, 1}},
           "'blk.1.ffn_up.weight' is not part of a deepseek2 model");
    /* exp_probs_b is optional: without it the selection is by the scores alone */
    char *dir = mwt_tmpdir("md_model");
    const char *path = altered("deepseek2-tiny", &(alter){.drop = "blk.2.exp_probs_b.bias"}, dir);
    vx_source *src;
    md_model *m;
    mw_err e;
    if (vx_source_open(path, NULL, &src, &e) || md_model_load(src, &m, &e)) fail_msg("%s", e.msg);
    assert_non_null(m->layers[1].select_b);
    assert_null(m->layers[2].select_b);
    assert_non_null(m->layers[0].ffn_norm);
    assert_non_null(m->layers[0].ffn.gate.data); /* dense FFN */
    assert_null(m->layers[0].router.data);
    assert_non_null(m->layers[2].ffn.down.data); /* shared expert */
    md_model_free(m);
    vx_source_close(src);
    mwt_rmrf(dir);
    free(dir);
}

/* The fixture rewritten in the legacy layout: attn_kv_b [kv_lora, H·(nope + v)] holding per head
 * K_h^T (nope rows) then V_h (v rows), no *_mla keys, per-head key_length / value_length. */
static const char *legacy_copy(const char *dir) {
    static char out[512];
    snprintf(out, sizeof out, "%s/legacy.gguf", dir);
    vx_gguf *g;
    mw_err e;
    if (vx_gguf_open(mwt_fixture("llamacpp/deepseek2-tiny/model.gguf"), &g, &e))
        fail_msg("%s", e.msg);
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    vx_meta *wm = vx_gguf_writer_meta(w);
    const vx_meta *m = vx_gguf_meta(g);
    for (size_t i = 0; i < vx_meta_count(m); i++)
        if (!strstr(vx_meta_key(m, i), "_length_mla"))
            assert_int_equal(vx_meta_copy_entry(wm, m, i), 0);
    vx_meta_set_u32(wm, "deepseek2.attention.key_length", 48);
    vx_meta_set_u32(wm, "deepseek2.attention.value_length", 32);
    vx_meta_set_u32(wm, "deepseek2.attention.head_count_kv", 4);
    enum { H = 4, R = 64, N = 32, V = 32 };
    static float kv[H * (N + V) * R];
    for (size_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_tensor *t = vx_gguf_tensor(g, i);
        int il;
        char part[64];
        if (sscanf(t->name, "blk.%d.%63[a-z_]", &il, part) == 2 && !strcmp(part, "attn_v_b"))
            continue;
        if (sscanf(t->name, "blk.%d.%63[a-z_]", &il, part) == 2 && !strcmp(part, "attn_k_b")) {
            char vn[64];
            snprintf(vn, sizeof vn, "blk.%d.attn_v_b.weight", il);
            const float *kb = t->data, *vb = NULL;
            for (size_t j = 0; j < vx_gguf_n_tensors(g); j++)
                if (!strcmp(vx_gguf_tensor(g, j)->name, vn)) vb = vx_gguf_tensor(g, j)->data;
            assert_non_null(vb);
            assert_int_equal(t->type, KN_F32);
            for (int h = 0; h < H; h++) {
                for (int n = 0; n < N; n++)
                    for (int r = 0; r < R; r++)
                        kv[((size_t)h * (N + V) + n) * R + r] = kb[((size_t)h * R + r) * N + n];
                memcpy(kv + ((size_t)h * (N + V) + N) * R, vb + (size_t)h * V * R,
                       (size_t)V * R * sizeof(float));
            }
            char kn[64];
            snprintf(kn, sizeof kn, "blk.%d.attn_kv_b.weight", il);
            const int64_t ne[4] = {R, H * (N + V), 1, 1};
            copy_add(w, kn, KN_F32, 2, ne, kv);
            continue;
        }
        copy_add(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    return copy_finish(w, g, out);
}

static float *logits_of(const char *path, kn_numerics num) {
    int32_t tok[24];
    for (int i = 0; i < 24; i++) tok[i] = (i * 37 + 11) % 512;
    return mwt_prefill(path, num, tok, 24, 64, NULL);
}

static void test_deepseek2_legacy_layout(void **state) {
    (void)state;
    char *dir = mwt_tmpdir("md_model");
    const char *legacy = legacy_copy(dir);
    for (int num = KN_NUM_F32; num <= KN_NUM_Q8; num++) {
        float *a = logits_of(mwt_fixture("llamacpp/deepseek2-tiny/model.gguf"), (kn_numerics)num);
        float *b = logits_of(legacy, (kn_numerics)num);
        /* K_h transposed back exactly, V_h a view of the same values: the same bits */
        assert_memory_equal(a, b, (size_t)24 * 512 * sizeof(float));
        free(a);
        free(b);
    }
    mwt_rmrf(dir);
    free(dir);
}

/* The fixture with every matrix (2 or more dims, rows a multiple of 32 wide) quantized to Q8_0. */
static const char *q8_0_copy(const char *model, const char *dir) {
    static char out[512];
    snprintf(out, sizeof out, "%s/q8_0.gguf", dir);
    vx_gguf *g;
    vx_gguf_writer *w = copy_start(model, &g);
    for (size_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_tensor *t = vx_gguf_tensor(g, i);
        if (t->type != KN_F32 || t->n_dims < 2 || t->ne[0] % 32 != 0) {
            copy_add(w, t->name, t->type, t->n_dims, t->ne, t->data);
            continue;
        }
        int64_t rows = 1;
        for (int d = 1; d < t->n_dims; d++) rows *= t->ne[d];
        const size_t rb = kn_row_size(KN_Q8_0, t->ne[0]);
        uint8_t *q = malloc((size_t)rows * rb);
        for (int64_t r = 0; r < rows; r++)
            kn__quant_q8_0((const float *)t->data + r * t->ne[0], q + (size_t)r * rb, t->ne[0]);
        copy_add(w, t->name, KN_Q8_0, t->n_dims, t->ne, q);
        free(q);
    }
    return copy_finish(w, g, out);
}

/* Logits of a 24-token prefill (the batch kernels) and of 6 tokens decoded after it one at a time
 * (the one-token kernels), of the model at path, pinned (md_model_pin_dense) or not. */
static float *forward_q8(const char *path, bool pin, kn_pool *pool) {
    mwt_model mm = mwt_model_open(path);
    md_model *m = mm.model;
    mw_err e;
    if (pin) {
        if (md_model_pin_dense(m, &e)) fail_msg("%s", e.msg);
        /* the head sets read per head from their plain pinned copies, every other Q8_0 matrix
         * from a pinned copy: its packed one where the kernels read that at every T */
        const uint8_t *p0 = m->pin.buf, *p1 = p0 + m->pin.bytes;
        for (int il = 0; il < m->cfg.n_layer; il++) {
            const md_layer *w = &m->layers[il];
            const kn_mat *in[] = {&w->k_b.m, &w->v_b.m, &w->wq_a, &w->wkv_a, &w->wo};
            for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
                assert_int_equal(in[i]->type, KN_Q8_0);
                const uint8_t *at = i < 2 || !kn_pack_replaces(in[i]) ? in[i]->data : in[i]->packed;
                assert_true(at >= p0 && at < p1);
                if (i < 2) assert_null(in[i]->packed);
            }
        }
    }
    md_ctx *c;
    md_ctx_params p = {.numerics = KN_NUM_Q8, .experts = mm.experts, .n_ctx = 64, .pool = pool};
    if (md_ctx_new(m, &p, &c, &e)) fail_msg("%s", e.msg);
    enum { PRE = 24, DEC = 6 };
    const int64_t V = m->cfg.n_vocab;
    float *out = malloc((size_t)(PRE + DEC) * (size_t)V * sizeof(float));
    md_row rows[PRE];
    for (int i = 0; i < PRE; i++) rows[i] = (md_row){0, i, (i * 37 + 11) % 512, 1};
    if (md_forward(c, rows, PRE, out, &e)) fail_msg("%s", e.msg);
    for (int i = 0; i < DEC; i++) {
        const md_row r = {0, PRE + i, (i * 53 + 5) % 512, 1};
        if (md_forward(c, &r, 1, out + (size_t)(PRE + i) * V, &e)) fail_msg("%s", e.msg);
    }
    md_ctx_free(c);
    mwt_model_close(&mm);
    return out;
}

static void test_deepseek2_q8_0_pinned(void **state) {
    (void)state;
    char *dir = mwt_tmpdir("md_model");
    const char *path = q8_0_copy("deepseek2-tiny", dir);
    kn_pool *pool = kn_pool_create(2);
    float *a = forward_q8(path, false, NULL), *b = forward_q8(path, true, pool);
    assert_memory_equal(a, b, (size_t)30 * 512 * sizeof(float));
    free(a);
    free(b);
    kn_pool_destroy(pool);
    mwt_rmrf(dir);
    free(dir);
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
        cmocka_unit_test(test_deepseek2_tensors),
        cmocka_unit_test(test_deepseek2_legacy_layout),
        cmocka_unit_test(test_deepseek2_q8_0_pinned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
