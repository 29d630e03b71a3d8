/* tests/unit/test_vx_source.c — model weights through vx_source over GGUF files: dense tensors by
 * name, kn_expert views of 3-D expert tensors (separate and fused gate/up, biases), restricted
 * expert sets, and the fingerprint. */
#include "tests/support/mw_test.h"
#include "vindex/vx_gguf.h"
#include "vindex/vx_source.h"

#include <stdlib.h>
#include <string.h>

static vx_source *open_ok(const char *path, const vx_source_opts *opts) {
    vx_source *s;
    mw_err err;
    if (vx_source_open(path, opts, &s, &err)) fail_msg("%s", err.msg);
    return s;
}

/* The source's own listing of a tensor (expert tensors included), or NULL. */
static const vx_tensor *src_find(const vx_source *s, const char *name) {
    for (size_t i = 0; i < vx_source_n_tensors(s); i++)
        if (!strcmp(vx_source_tensor_at(s, i)->name, name)) return vx_source_tensor_at(s, i);
    return NULL;
}

/* Checks every expert view of every layer against the GGUF's 3-D tensors, byte offsets included. */
static void check_experts_against_gguf(const char *rel, kn_type want_type, bool biases) {
    const char *path = mwt_fixture(rel);
    vx_gguf *g;
    mw_err err;
    if (vx_gguf_open(path, &g, &err)) fail_msg("%s", err.msg);
    vx_source *s = open_ok(path, NULL);
    assert_int_equal(vx_source_n_tensors(s), vx_gguf_n_tensors(g));
    /* dense first, experts after; vx_source_tensor serves dense names only */
    bool seen_expert = false;
    for (size_t i = 0; i < vx_source_n_tensors(s); i++) {
        const vx_tensor *t = vx_source_tensor_at(s, i);
        bool is_exp = strstr(t->name, "_exps.") != NULL;
        if (!is_exp) assert_false(seen_expert);
        seen_expert |= is_exp;
        const vx_tensor *byname = vx_source_tensor(s, t->name);
        if (is_exp)
            assert_null(byname);
        else
            assert_ptr_equal(byname, t);
        const vx_tensor *gt = vx_gguf_find(g, t->name);
        assert_int_equal(t->offset, gt->offset);
        assert_int_equal(t->nbytes, gt->nbytes);
        assert_memory_equal(t->data, gt->data, t->nbytes);
    }
    assert_true(seen_expert);
    int64_t hidden = vx_gguf_find(g, "token_embd.weight")->ne[0];
    for (int l = 0; l < vx_source_n_layers(s); l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_gate_exps.weight", l);
        const vx_tensor *gate = src_find(s, name);
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", l);
        const vx_tensor *up = src_find(s, name);
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.weight", l);
        const vx_tensor *down = src_find(s, name);
        snprintf(name, sizeof name, "blk.%d.ffn_down_exps.bias", l);
        const vx_tensor *down_b = src_find(s, name);
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.bias", l);
        const vx_tensor *up_b = src_find(s, name);
        assert_int_equal(down_b != NULL, biases);
        for (int e = 0; e < vx_source_n_experts(s); e++) {
            kn_expert x;
            if (vx_source_expert(s, l, e, &x, &err)) fail_msg("%s", err.msg);
            uint64_t gslice = gate->nbytes / (uint64_t)gate->ne[2];
            uint64_t dslice = down->nbytes / (uint64_t)down->ne[2];
            assert_ptr_equal(x.gate.data, (const uint8_t *)gate->data + e * gslice);
            assert_ptr_equal(x.up.data, (const uint8_t *)up->data + e * gslice);
            assert_ptr_equal(x.down.data, (const uint8_t *)down->data + e * dslice);
            assert_int_equal(x.gate.type, want_type);
            assert_int_equal(x.gate.cols, hidden);
            assert_int_equal(x.gate.rows, gate->ne[1]);
            assert_int_equal(x.down.rows, hidden);
            assert_int_equal(x.down.cols, gate->ne[1]);
            assert_int_equal(x.gate.row_bytes, kn_row_size(want_type, hidden));
            if (biases) {
                assert_ptr_equal(x.down_b.data, (const float *)down_b->data + e * hidden);
                assert_ptr_equal(x.up_b.data, (const float *)up_b->data + e * gate->ne[1]);
                assert_int_equal(x.down_b.rows, 1);
                assert_int_equal(x.down_b.cols, hidden);
                assert_int_equal(x.up_b.type, KN_F32);
            } else {
                assert_null(x.gate_b.data);
                assert_null(x.up_b.data);
                assert_null(x.down_b.data);
            }
        }
    }
    kn_expert x;
    assert_int_equal(vx_source_expert(s, vx_source_n_layers(s), 0, &x, &err), -1);
    assert_non_null(strstr(err.msg, "not in the model"));
    vx_source_close(s);
    vx_gguf_close(g);
}

static void test_gpt_oss_fixture(void **state) {
    (void)state;
    vx_source *s = open_ok(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), NULL);
    assert_string_equal(vx_source_arch(s), "gpt-oss");
    assert_int_equal(vx_source_n_layers(s), 4);
    assert_int_equal(vx_source_n_experts(s), 8);
    int64_t x;
    mw_err err;
    assert_int_equal(vx_meta_get_i64(vx_source_meta(s), "gpt-oss.expert_used_count", &x, &err), 1);
    assert_int_equal(x, 2);
    vx_source_close(s);
    check_experts_against_gguf("llamacpp/gpt-oss-tiny/model.gguf", KN_MXFP4, true);
}

static void test_qwen3moe_fixture(void **state) {
    (void)state;
    check_experts_against_gguf("llamacpp/qwen3moe-tiny/model.gguf", KN_Q6_K, false);
}

static void test_restricted_set(void **state) {
    (void)state;
    const char *path = mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf");
    vx_expert_set set;
    mw_err err;
    assert_int_equal(vx_expert_set_parse("1-2:3-5", 3, 8, &set, &err), 0);
    vx_source_opts opts = {.experts = &set, .dense = false, .verify_on_mount = true};
    vx_source *s = open_ok(path, &opts);
    assert_true(vx_source_has_expert(s, 1, 3));
    assert_true(vx_source_has_expert(s, 2, 5));
    assert_false(vx_source_has_expert(s, 0, 3));
    assert_false(vx_source_has_expert(s, 1, 6));
    kn_expert x;
    assert_int_equal(vx_source_expert(s, 2, 4, &x, &err), 0);
    assert_int_equal(vx_source_expert(s, 0, 0, &x, &err), -1);
    assert_non_null(strstr(err.msg, "(layer 0, expert 0)"));
    assert_null(vx_source_tensor(s, "token_embd.weight")); /* dense not mapped */
    vx_source_close(s);
    vx_expert_set_free(&set);
    /* a set shaped for another model is refused */
    assert_int_equal(vx_expert_set_parse("all", 4, 8, &set, &err), 0);
    assert_int_equal(vx_source_open(path, &opts, &s, &err), -1);
    assert_non_null(strstr(err.msg, "4 layers × 8 experts"));
    vx_expert_set_free(&set);
}

static void test_fingerprint(void **state) {
    (void)state;
    vx_source *a = open_ok(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), NULL);
    vx_source *b = open_ok(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), NULL);
    vx_source *c = open_ok(mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf"), NULL);
    const char *fa = vx_source_fingerprint(a);
    assert_non_null(fa);
    assert_int_equal(strlen(fa), 64);
    assert_string_equal(fa, vx_source_fingerprint(b));
    assert_string_not_equal(fa, vx_source_fingerprint(c));
    vx_source_close(a);
    vx_source_close(b);
    vx_source_close(c);
}

/* A small gpt-oss-like GGUF with a fused gate_up expert tensor whose every value names its
 * (expert, row, column), so the split can be checked element by element. */
enum { H = 64, F = 8, E = 4 };

static void write_fused(const char *path, bool bad_down, int block_count) {
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    vx_meta *m = vx_gguf_writer_meta(w);
    vx_meta_set_str(m, "general.architecture", "gpt-oss", 7);
    vx_meta_set_u32(m, "gpt-oss.block_count", (uint32_t)block_count);
    vx_meta_set_u32(m, "gpt-oss.expert_count", E);
    vx_meta_set_u32(m, "gpt-oss.embedding_length", H);
    float *gu = malloc(sizeof(float) * H * 2 * F * E);
    for (int e = 0; e < E; e++)
        for (int r = 0; r < 2 * F; r++)
            for (int k = 0; k < H; k++)
                gu[(e * 2 * F + r) * H + k] = (float)(e * 10000 + r * 100 + k);
    float *down = calloc((size_t)F * H * E, sizeof(float));
    float gub[2 * F * E];
    for (int i = 0; i < 2 * F * E; i++) gub[i] = (float)i;
    mw_err err;
    int64_t ne_gu[3] = {H, 2 * F, E}, ne_d[3] = {F, bad_down ? H + 32 : H, E}, ne_b[2] = {2 * F, E};
    float *down_big = calloc((size_t)F * (H + 32) * E, sizeof(float));
    assert_int_equal(
        vx_gguf_writer_add(w, "blk.0.ffn_gate_up_exps.weight", KN_F32, 3, ne_gu, gu, &err), 0);
    assert_int_equal(vx_gguf_writer_add(w, "blk.0.ffn_down_exps.weight", KN_F32, 3, ne_d,
                                        bad_down ? down_big : down, &err),
                     0);
    assert_int_equal(
        vx_gguf_writer_add(w, "blk.0.ffn_gate_up_exps.bias", KN_F32, 2, ne_b, gub, &err), 0);
    int64_t ne_n[1] = {H};
    assert_int_equal(vx_gguf_writer_add(w, "output_norm.weight", KN_F32, 1, ne_n, gu, &err), 0);
    if (vx_gguf_writer_write(w, path, &err)) fail_msg("%s", err.msg);
    vx_gguf_writer_free(w);
    free(gu);
    free(down);
    free(down_big);
}

static void test_fused_gate_up(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/fused.gguf", mwt_tmp);
    write_fused(path, false, 1);
    vx_source *s = open_ok(path, NULL);
    mw_err err;
    for (int e = 0; e < E; e++) {
        kn_expert x;
        if (vx_source_expert(s, 0, e, &x, &err)) fail_msg("%s", err.msg);
        assert_int_equal(x.gate.rows, F);
        assert_int_equal(x.up.rows, F);
        assert_int_equal(x.gate.cols, H);
        for (int r = 0; r < F; r++) {
            const float *g = (const float *)((const uint8_t *)x.gate.data + r * x.gate.row_bytes);
            const float *u = (const float *)((const uint8_t *)x.up.data + r * x.up.row_bytes);
            for (int k = 0; k < H; k++) {
                assert_true(g[k] == (float)(e * 10000 + r * 100 + k));
                assert_true(u[k] == (float)(e * 10000 + (F + r) * 100 + k));
            }
            assert_true(((const float *)x.gate_b.data)[r] == (float)(e * 2 * F + r));
            assert_true(((const float *)x.up_b.data)[r] == (float)(e * 2 * F + F + r));
        }
        assert_int_equal(x.gate_b.cols, F);
        assert_null(x.down_b.data);
    }
    vx_source_close(s);

    write_fused(path, true, 1);
    assert_int_equal(vx_source_open(path, NULL, &s, &err), -1);
    assert_non_null(strstr(err.msg, "layer 0"));
    assert_non_null(strstr(err.msg, "ffn_down_exps.weight is 96 × 8, expected 64 × 8"));

    write_fused(path, false, 0);
    assert_int_equal(vx_source_open(path, NULL, &s, &err), -1);
    assert_non_null(strstr(err.msg, "beyond gpt-oss.block_count"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_oss_fixture), cmocka_unit_test(test_qwen3moe_fixture),
        cmocka_unit_test(test_restricted_set),  cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_fused_gate_up),
    };
    return cmocka_run_group_tests_name("vx_source", tests, mwt_tmp_setup, mwt_tmp_teardown);
}
