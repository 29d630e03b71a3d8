/* tests/unit/test_vx_hf.c — Hugging Face checkpoints as extract input: config.json → GGUF keys,
 * tensor names, gpt-oss MXFP4 relayout (checked value by value against an independent HF-layout
 * dequantizer), gate/up de-interleave, qwen3moe expert stacking, sharding, the coverage audit,
 * carried files, config/tensor errors, and hostile checkpoint directories (huge or deep JSON,
 * links out of the directory, FIFOs, odd tensor names, sources changing under extract); DeepSeek-V3
 * / Kimi-K2: the derived MLA and router keys, FP8 e4m3 decoding and block scales (bf16 stored, the
 * exact f32 read for a transcode), the kv_b_proj split, dense / MoE / shared layer rules, the
 * multi-token-prediction layer dropped, and their errors. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_st.h"
#include "kernels/kn.h"
#include "vindex/vx_hf.h"
#include "vindex/vx_hf_internal.h"
#include "vindex/vx_input.h"
#include "vindex/vx_manifest.h"
#include "vindex/vx_safetensors.h"
#include "vindex/vx_source.h"
#include "vindex/vx_vindex.h"

#include <dirent.h>
#include <math.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static vx_input *open_ok(const char *dir) {
    vx_input *in = NULL;
    mw_err err = {{0}};
    if (vx_input_open_hf(dir, &in, &err)) fail_msg("vx_input_open_hf: %s", err.msg);
    return in;
}

/* Writes the checkpoint o describes into f->ck, replacing an earlier one. */
static void write_ckpt(const mwt_fx *f, const mwt_hf_opts *o) {
    mwt_rmrf(f->ck);
    assert_int_equal(mwt_hf_write(f->ck, o), 0);
}

static vx_input *write_open(const mwt_fx *f, const mwt_hf_opts *o) {
    write_ckpt(f, o);
    return open_ok(f->ck);
}

static void *read_all(const vx_input *in, const char *name, uint64_t *nbytes) {
    const vx_input_tensor *t = vx_input_find(in, name);
    if (!t) fail_msg("no tensor %s", name);
    uint8_t *buf = malloc(t->nbytes + 1);
    mw_err err = {{0}};
    if (t->read(in, t, 0, buf, t->nbytes, &err)) fail_msg("read %s: %s", name, err.msg);
    if (nbytes) *nbytes = t->nbytes;
    return buf;
}

static int64_t meta_i(const vx_input *in, const char *key) {
    int64_t v = -1;
    mw_err err = {{0}};
    if (vx_meta_get_i64(in->meta, key, &v, &err) != 1) fail_msg("meta %s missing", key);
    return v;
}

static double meta_f(const vx_input *in, const char *key) {
    double v = -1;
    mw_err err = {{0}};
    if (vx_meta_get_f64(in->meta, key, &v, &err) != 1) fail_msg("meta %s missing", key);
    return v;
}

static const char *meta_s(const vx_input *in, const char *key) {
    const char *v = NULL;
    mw_err err = {{0}};
    if (vx_meta_get_str(in->meta, key, &v, &err) != 1) fail_msg("meta %s missing", key);
    return v;
}

static void check_ne(const vx_input_tensor *t, int n, int64_t a, int64_t b, int64_t c) {
    assert_int_equal(t->n_dims, n);
    assert_int_equal(t->ne[0], a);
    assert_int_equal(t->ne[1], b);
    assert_int_equal(t->ne[2], c);
}

/* ---- gpt-oss ------------------------------------------------------------------------------ */

static void test_gpt_oss_metadata(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.layers = 3;
    vx_input *in = write_open(f, &o);
    assert_string_equal(in->kind, "safetensors");
    assert_string_equal(meta_s(in, "general.architecture"), "gpt-oss");
    assert_string_equal(meta_s(in, "general.name"), "tiny-ckpt");
    assert_int_equal(meta_i(in, "gpt-oss.block_count"), 3);
    assert_int_equal(meta_i(in, "gpt-oss.context_length"), 2048);
    assert_int_equal(meta_i(in, "gpt-oss.embedding_length"), 96);
    assert_int_equal(meta_i(in, "gpt-oss.feed_forward_length"), 64);
    assert_int_equal(meta_i(in, "gpt-oss.expert_feed_forward_length"), 64);
    assert_int_equal(meta_i(in, "gpt-oss.attention.head_count"), 4);
    assert_int_equal(meta_i(in, "gpt-oss.attention.head_count_kv"), 2);
    assert_int_equal(meta_i(in, "gpt-oss.attention.key_length"), 16);
    assert_int_equal(meta_i(in, "gpt-oss.attention.value_length"), 16);
    assert_int_equal(meta_i(in, "gpt-oss.expert_count"), 3);
    assert_int_equal(meta_i(in, "gpt-oss.expert_used_count"), 2);
    assert_int_equal(meta_i(in, "gpt-oss.attention.sliding_window"), 8);
    assert_true(meta_f(in, "gpt-oss.attention.layer_norm_rms_epsilon") == (double)1e-5f);
    assert_true(meta_f(in, "gpt-oss.rope.freq_base") == 150000.0);
    assert_string_equal(meta_s(in, "gpt-oss.rope.scaling.type"), "yarn");
    assert_true(meta_f(in, "gpt-oss.rope.scaling.factor") == 32.0);
    assert_int_equal(meta_i(in, "gpt-oss.rope.scaling.original_context_length"), 64);
    assert_true(meta_f(in, "gpt-oss.rope.scaling.yarn_beta_fast") == 32.0);
    assert_true(meta_f(in, "gpt-oss.rope.scaling.yarn_beta_slow") == 1.0);
    assert_true(meta_f(in, "gpt-oss.swiglu_clamp_exp") == 7.0);
    bool b = true;
    mw_err err = {{0}};
    assert_int_equal(vx_meta_get_bool(in->meta, "gpt-oss.rope.scaling.yarn_truncate", &b, &err), 1);
    assert_false(b);
    /* the per-layer pattern, faithfully: sliding, full, sliding */
    long k = vx_meta_find(in->meta, "gpt-oss.attention.sliding_window_pattern");
    assert_true(k >= 0);
    assert_int_equal(vx_meta_type(in->meta, (size_t)k), VX_ARR);
    assert_int_equal(vx_meta_arr_type(in->meta, (size_t)k), VX_BOOL);
    assert_int_equal(vx_meta_arr_len(in->meta, (size_t)k), 3);
    int64_t want[3] = {1, 0, 1};
    for (int l = 0; l < 3; l++) {
        int64_t v;
        assert_int_equal(
            vx_meta_arr_i64(in->meta, "gpt-oss.attention.sliding_window_pattern", l, &v, &err), 1);
        assert_int_equal(v, want[l]);
    }
    vx_input_close(in);
    /* a non-default GLU limit is carried; an absent one is HF's class default, 7 */
    const char *patch[2] = {"{\"swiglu_limit\": 5.5}", "{\"swiglu_limit\": null}"};
    double limit[2] = {5.5, 7.0};
    for (int i = 0; i < 2; i++) {
        o.config_patch = patch[i];
        in = write_open(f, &o);
        assert_true(meta_f(in, "gpt-oss.swiglu_clamp_exp") == limit[i]);
        vx_input_close(in);
    }
}

/* Compares every element of the stored MXFP4 tensors with the HF layout read independently. */
static void check_mxfp4_values(const vx_input *in, const vx_st_set *src, const mwt_hf_opts *o,
                               int layer) {
    char name[256];
    int64_t H = o->hidden, F = o->ff, E = o->experts;
    const char *parts[3] = {"gate", "up", "down"};
    for (int p = 0; p < 3; p++) {
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%s_blocks", layer,
                 p < 2 ? "gate_up_proj" : "down_proj");
        const vx_st_tensor *bl = vx_st_set_find(src, name, NULL);
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%s_scales", layer,
                 p < 2 ? "gate_up_proj" : "down_proj");
        const vx_st_tensor *sc = vx_st_set_find(src, name, NULL);
        assert_non_null(bl);
        assert_non_null(sc);
        snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", layer, parts[p]);
        const vx_input_tensor *t = vx_input_find(in, name);
        assert_non_null(t);
        assert_int_equal(t->type, KN_MXFP4);
        int64_t rows = p < 2 ? F : H, cols = p < 2 ? H : F;
        check_ne(t, 3, cols, rows, E);
        assert_int_equal(t->nbytes, (uint64_t)(E * rows * cols / 32 * 17));
        assert_non_null(t->relayout);
        assert_non_null(strstr(t->relayout, "gpt-oss-mxfp4"));
        if (p < 2) assert_non_null(strstr(t->relayout, p == 0 ? "gate = even" : "up = odd"));
        assert_int_equal(t->n_ranges, 2);
        assert_string_equal(t->ranges[0].src_name, bl->name);
        assert_int_equal(t->ranges[0].offset, bl->offset);
        assert_int_equal(t->ranges[0].nbytes, bl->nbytes);
        assert_string_equal(t->ranges[1].src_name, sc->name);
        uint8_t *buf = read_all(in, name, NULL);
        size_t row_bytes = (size_t)cols / 32 * 17;
        int64_t src_rows = p < 2 ? 2 * F : H, mismatches = 0;
        for (int64_t e = 0; e < E; e++)
            for (int64_t r = 0; r < rows; r++) {
                int64_t sr = p == 0 ? 2 * r : p == 1 ? 2 * r + 1 : r;
                const uint8_t *row = buf + (size_t)(e * rows + r) * row_bytes;
                for (int64_t k = 0; k < cols; k++) {
                    float got = mwt_ggml_mxfp4_value(row, k);
                    float want = mwt_hf_mxfp4_value(bl->data, sc->data, src_rows, cols, e, sr, k);
                    mismatches += got != want;
                }
            }
        if (mismatches)
            fail_msg("%s: %lld values differ from the HF layout", name, (long long)mismatches);
        free(buf);
    }
}

/* Gate/up biases are the even/odd entries of gate_up_proj_bias; down's is copied. */
static void check_biases(const vx_input *in, const vx_st_set *src, const mwt_hf_opts *o,
                         int layer) {
    char name[256];
    int64_t F = o->ff, E = o->experts, H = o->hidden;
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj_bias", layer);
    const uint16_t *gu = (const uint16_t *)vx_st_set_find(src, name, NULL)->data;
    for (int p = 0; p < 2; p++) {
        snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.bias", layer, p ? "up" : "gate");
        const vx_input_tensor *t = vx_input_find(in, name);
        assert_int_equal(t->type, KN_BF16);
        check_ne(t, 2, F, E, 1);
        uint16_t *b = read_all(in, name, NULL);
        for (int64_t e = 0; e < E; e++)
            for (int64_t i = 0; i < F; i++)
                assert_int_equal(b[e * F + i], gu[e * 2 * F + 2 * i + p]);
        free(b);
    }
    snprintf(name, sizeof name, "blk.%d.ffn_down_exps.bias", layer);
    const vx_input_tensor *t = vx_input_find(in, name);
    check_ne(t, 2, H, E, 1);
    assert_null(t->relayout);
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj_bias", layer);
    const vx_st_tensor *s = vx_st_set_find(src, name, NULL);
    void *b = read_all(in, t->name, NULL);
    assert_memory_equal(b, s->data, s->nbytes);
    free(b);
}

static void check_gpt_oss_dense(const vx_input *in, const vx_st_set *src, const mwt_hf_opts *o) {
    static const struct {
        const char *hf, *gguf;
    } map[] = {
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"model.norm.weight", "output_norm.weight"},
        {"lm_head.weight", "output.weight"},
        {"model.layers.1.input_layernorm.weight", "blk.1.attn_norm.weight"},
        {"model.layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight"},
        {"model.layers.1.self_attn.q_proj.bias", "blk.1.attn_q.bias"},
        {"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight"},
        {"model.layers.1.self_attn.k_proj.bias", "blk.1.attn_k.bias"},
        {"model.layers.1.self_attn.v_proj.weight", "blk.1.attn_v.weight"},
        {"model.layers.1.self_attn.v_proj.bias", "blk.1.attn_v.bias"},
        {"model.layers.1.self_attn.o_proj.weight", "blk.1.attn_output.weight"},
        {"model.layers.1.self_attn.o_proj.bias", "blk.1.attn_output.bias"},
        {"model.layers.1.self_attn.sinks", "blk.1.attn_sinks.weight"},
        {"model.layers.1.post_attention_layernorm.weight", "blk.1.post_attention_norm.weight"},
        {"model.layers.1.mlp.router.weight", "blk.1.ffn_gate_inp.weight"},
        {"model.layers.1.mlp.router.bias", "blk.1.ffn_gate_inp.bias"},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        int file;
        const vx_st_tensor *s = vx_st_set_find(src, map[i].hf, &file);
        const vx_input_tensor *t = vx_input_find(in, map[i].gguf);
        if (!s || !t) fail_msg("%s -> %s missing", map[i].hf, map[i].gguf);
        /* dtype kept, ne = the HF shape reversed, bytes identical, provenance exact */
        assert_int_equal(t->type, vx_st_dtype_kn(s->dtype));
        assert_int_equal(t->n_dims, s->n_dims);
        for (int d = 0; d < s->n_dims; d++) assert_int_equal(t->ne[d], s->shape[s->n_dims - 1 - d]);
        assert_null(t->relayout);
        assert_int_equal(t->n_ranges, 1);
        assert_int_equal(t->ranges[0].file, file);
        assert_int_equal(t->ranges[0].offset, s->offset);
        assert_string_equal(in->files[file].name, vx_st_set_file_name(src, (size_t)file));
        void *b = read_all(in, map[i].gguf, NULL);
        assert_memory_equal(b, s->data, s->nbytes);
        free(b);
    }
    const vx_input_tensor *t = vx_input_find(in, "blk.1.attn_q.weight");
    assert_int_equal(t->type, KN_BF16);
    check_ne(t, 2, o->hidden, o->heads * o->head_dim, 1);
    assert_int_equal(vx_input_find(in, "blk.1.attn_norm.weight")->type, KN_F32);
}

static void test_gpt_oss_mxfp4_tensors(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.inv_freq = true;
    o.extra_tensor = "model.layers.0.mlp.mystery.weight";
    vx_input *in = write_open(f, &o);
    vx_st_set *src;
    mw_err err = {{0}};
    assert_int_equal(vx_st_set_open(f->ck, &src, &err), 0);
    /* 3 global + 19 per layer */
    assert_int_equal(in->n_tensors, 3 + 19 * (size_t)o.layers);
    assert_string_equal(in->tensors[0].name, "token_embd.weight");
    for (int l = 0; l < o.layers; l++) {
        check_mxfp4_values(in, src, &o, l);
        check_biases(in, src, &o, l);
    }
    check_gpt_oss_dense(in, src, &o);
    /* the audit: inv_freq dropped by rule, the extra tensor reported */
    assert_int_equal(in->n_dropped, (size_t)o.layers + 1);
    for (size_t i = 0; i < in->n_dropped; i++) {
        assert_non_null(strstr(in->dropped[i].src_name, "inv_freq"));
        assert_non_null(strstr(in->dropped[i].rule, "recomputed from config"));
    }
    assert_int_equal(in->n_unrecognised, 1);
    assert_string_equal(in->unrecognised[0], "model.layers.0.mlp.mystery.weight");
    /* every source tensor is accounted for exactly once */
    size_t consumed = 0;
    for (size_t i = 0; i < vx_st_set_n_tensors(src); i++) {
        const char *n = vx_st_set_tensor_at(src, i, NULL)->name;
        int uses = 0;
        for (size_t k = 0; k < in->n_tensors; k++)
            for (int r = 0; r < in->tensors[k].n_ranges; r++)
                uses += !strcmp(in->tensors[k].ranges[r].src_name, n);
        consumed += uses > 0;
    }
    assert_int_equal(consumed + in->n_dropped + in->n_unrecognised, vx_st_set_n_tensors(src));
    /* carried files */
    const char *want[] = {"config.json", "generation_config.json", "tokenizer_config.json",
                          "chat_template.jinja"};
    assert_int_equal(in->n_carry, 4);
    for (size_t i = 0; i < 4; i++) {
        bool found = false;
        for (size_t k = 0; k < in->n_carry; k++) found |= strstr(in->carry[k], want[i]) != NULL;
        if (!found) fail_msg("%s not carried", want[i]);
    }
    assert_int_equal(in->n_files, 1);
    assert_string_equal(in->files[0].name, "model.safetensors");
    vx_st_set_close(src);
    vx_input_close(in);
}

/* Reading in odd pieces gives the same bytes as one read; reads past the end fail. */
static void test_partial_reads(void **state) {
    mwt_fx *f = *state;
    const char *names[] = {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.bias",
                           "blk.0.ffn_down_exps.weight", "token_embd.weight"};
    for (int bf16 = 0; bf16 < 2; bf16++) {
        mwt_hf_opts o;
        mwt_hf_defaults(&o, "gpt_oss");
        o.layers = 1;
        o.bf16_experts = bf16;
        vx_input *in = write_open(f, &o);
        for (size_t i = 0; i < 4; i++) {
            const vx_input_tensor *t = vx_input_find(in, names[i]);
            uint64_t n;
            uint8_t *whole = read_all(in, names[i], &n);
            uint8_t *pieces = malloc(n);
            mw_err err = {{0}};
            for (uint64_t off = 0, step = 1; off < n; off += step, step = step % 23 * 7 + 5) {
                uint64_t len = off + step > n ? n - off : step;
                assert_int_equal(t->read(in, t, off, pieces + off, len, &err), 0);
            }
            assert_memory_equal(whole, pieces, n);
            assert_int_equal(t->read(in, t, n - 1, pieces, 2, &err), -1);
            assert_non_null(strstr(err.msg, names[i]));
            assert_int_equal(t->read(in, t, n + 1, pieces, 0, &err), -1);
            assert_int_equal(t->read(in, t, n, pieces, 0, &err), 0);
            free(whole);
            free(pieces);
        }
        vx_input_close(in);
    }
}

/* The same model sharded through an index gives the same tensors, with provenance per shard. */
static void test_gpt_oss_sharded_equals_single(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    char one[4096], many[4096];
    snprintf(one, sizeof one, "%s/one", f->dir);
    snprintf(many, sizeof many, "%s/many", f->dir);
    assert_int_equal(mwt_hf_write(one, &o), 0);
    o.shards = 3;
    assert_int_equal(mwt_hf_write(many, &o), 0);
    vx_input *a = open_ok(one), *b = open_ok(many);
    assert_int_equal(b->n_files, 3);
    assert_int_equal(a->n_tensors, b->n_tensors);
    bool shard_used[3] = {false, false, false};
    for (size_t i = 0; i < a->n_tensors; i++) {
        const vx_input_tensor *ta = &a->tensors[i], *tb = &b->tensors[i];
        assert_string_equal(ta->name, tb->name);
        assert_int_equal(ta->nbytes, tb->nbytes);
        void *x = read_all(a, ta->name, NULL), *y = read_all(b, tb->name, NULL);
        assert_memory_equal(x, y, ta->nbytes);
        free(x);
        free(y);
        for (int r = 0; r < tb->n_ranges; r++) {
            assert_true(tb->ranges[r].file >= 0 && tb->ranges[r].file < 3);
            shard_used[tb->ranges[r].file] = true;
            const vx_st_tensor *s;
            vx_st_file *sf;
            mw_err err = {{0}};
            assert_int_equal(vx_st_open(b->files[tb->ranges[r].file].path, &sf, &err), 0);
            s = vx_st_find(sf, tb->ranges[r].src_name);
            assert_non_null(s);
            assert_int_equal(s->offset, tb->ranges[r].offset);
            vx_st_close(sf);
        }
    }
    assert_true(shard_used[0] && shard_used[1] && shard_used[2]);
    vx_input_close(a);
    vx_input_close(b);
}

/* Unquantized gpt-oss experts are [E, in, 2*ff] with gate/up interleaved along the last axis. */
static void test_gpt_oss_bf16_experts(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.bf16_experts = true;
    o.layers = 1;
    o.ff = 80; /* more than one 64-row transpose tile, and not a multiple of it */
    vx_input *in = write_open(f, &o);
    vx_st_set *src;
    mw_err err = {{0}};
    assert_int_equal(vx_st_set_open(f->ck, &src, &err), 0);
    int64_t H = o.hidden, F = o.ff, E = o.experts;
    const uint16_t *gu =
        (const uint16_t *)vx_st_set_find(src, "model.layers.0.mlp.experts.gate_up_proj", NULL)
            ->data;
    const uint16_t *dn =
        (const uint16_t *)vx_st_set_find(src, "model.layers.0.mlp.experts.down_proj", NULL)->data;
    for (int p = 0; p < 2; p++) {
        const char *name = p ? "blk.0.ffn_up_exps.weight" : "blk.0.ffn_gate_exps.weight";
        const vx_input_tensor *t = vx_input_find(in, name);
        assert_int_equal(t->type, KN_BF16);
        check_ne(t, 3, H, F, E);
        assert_non_null(strstr(t->relayout, "transposed"));
        uint16_t *w = read_all(in, name, NULL);
        for (int64_t e = 0; e < E; e++)
            for (int64_t r = 0; r < F; r++)
                for (int64_t k = 0; k < H; k++)
                    if (w[(e * F + r) * H + k] != gu[(e * H + k) * 2 * F + 2 * r + p])
                        fail_msg("%s[%lld][%lld][%lld] differs", name, (long long)e, (long long)r,
                                 (long long)k);
        free(w);
    }
    const vx_input_tensor *t = vx_input_find(in, "blk.0.ffn_down_exps.weight");
    check_ne(t, 3, F, H, E);
    uint16_t *w = read_all(in, t->name, NULL);
    for (int64_t e = 0; e < E; e++)
        for (int64_t r = 0; r < H; r++)
            for (int64_t k = 0; k < F; k++)
                assert_int_equal(w[(e * H + r) * F + k], dn[(e * F + k) * H + r]);
    free(w);
    assert_int_equal(in->n_unrecognised, 0);
    vx_st_set_close(src);
    vx_input_close(in);
}

/* The tests' ggml-block dequantizer agrees bit for bit with ggml's (the llama.cpp fixture), and
 * vx__hf_mxfp4_block inverts the HF packing of real ggml blocks. */
static void test_mxfp4_against_ggml_fixture(void **state) {
    (void)state;
    size_t nb, nd;
    uint8_t *blocks = mwt_read_file(mwt_fixture("llamacpp/kernels/mxfp4_blocks.bin"), &nb);
    float *deq = mwt_read_file(mwt_fixture("llamacpp/kernels/mxfp4_dequant.bin"), &nd);
    assert_non_null(blocks);
    assert_non_null(deq);
    assert_int_equal(nb, 80 * 17);
    assert_int_equal(nd, 80 * 32 * sizeof(float));
    for (int b = 0; b < 80; b++) {
        const uint8_t *g = blocks + b * 17;
        for (int j = 0; j < 32; j++) {
            float v = mwt_ggml_mxfp4_value(g, j);
            if (memcmp(&v, &deq[b * 32 + j], sizeof v))
                fail_msg("block %d element %d: %g vs ggml %g", b, j, v, deq[b * 32 + j]);
        }
        /* pack the block the HF way (element 2k low, 2k+1 high), then convert back */
        uint8_t hf[16] = {0}, back[17];
        for (int j = 0; j < 32; j++) {
            int code = j < 16 ? g[1 + j] & 15 : g[1 + j - 16] >> 4;
            hf[j / 2] |= (uint8_t)(code << (j % 2 * 4));
        }
        vx__hf_mxfp4_block(g[0], hf, back);
        assert_memory_equal(back, g, 17);
        for (int j = 0; j < 32; j++) {
            float v = mwt_hf_mxfp4_value(hf, g, 1, 32, 0, 0, j);
            if (memcmp(&v, &deq[b * 32 + j], sizeof v) && !(v == 0 && deq[b * 32 + j] == 0))
                fail_msg("HF reference, block %d element %d: %g vs %g", b, j, v, deq[b * 32 + j]);
        }
    }
    free(blocks);
    free(deq);
}

/* ---- qwen3moe ----------------------------------------------------------------------------- */

static void test_qwen3moe(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "qwen3_moe");
    o.experts = 4;
    o.shards = 2;
    o.inv_freq = true;
    o.head_dim = 96 / 4; /* and no head_dim key: the HF class derives it */
    o.config_patch = "{\"head_dim\": null}";
    vx_input *in = write_open(f, &o);
    assert_string_equal(meta_s(in, "general.architecture"), "qwen3moe");
    assert_int_equal(meta_i(in, "qwen3moe.block_count"), 2);
    assert_int_equal(meta_i(in, "qwen3moe.expert_feed_forward_length"), 64);
    assert_int_equal(meta_i(in, "qwen3moe.feed_forward_length"), 192);
    assert_int_equal(meta_i(in, "qwen3moe.expert_count"), 4);
    assert_int_equal(meta_i(in, "qwen3moe.expert_used_count"), 2);
    assert_int_equal(meta_i(in, "qwen3moe.attention.key_length"), 96 / 4); /* derived */
    assert_true(meta_f(in, "qwen3moe.rope.freq_base") == 1e6);
    assert_true(meta_f(in, "qwen3moe.attention.layer_norm_rms_epsilon") == (double)1e-6f);
    assert_int_equal(vx_meta_find(in->meta, "qwen3moe.rope.scaling.type"), -1);
    assert_int_equal(vx_meta_find(in->meta, "qwen3moe.attention.sliding_window_pattern"), -1);
    vx_st_set *src;
    mw_err err = {{0}};
    assert_int_equal(vx_st_set_open(f->ck, &src, &err), 0);
    static const struct {
        const char *hf, *gguf;
    } map[] = {
        {"model.layers.1.self_attn.q_norm.weight", "blk.1.attn_q_norm.weight"},
        {"model.layers.1.self_attn.k_norm.weight", "blk.1.attn_k_norm.weight"},
        {"model.layers.1.post_attention_layernorm.weight", "blk.1.ffn_norm.weight"},
        {"model.layers.1.mlp.gate.weight", "blk.1.ffn_gate_inp.weight"},
        {"lm_head.weight", "output.weight"},
    };
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        const vx_st_tensor *s = vx_st_set_find(src, map[i].hf, NULL);
        void *b = read_all(in, map[i].gguf, NULL);
        assert_memory_equal(b, s->data, s->nbytes);
        free(b);
    }
    const char *proj[3] = {"gate", "up", "down"};
    for (int l = 0; l < o.layers; l++)
        for (int p = 0; p < 3; p++) {
            char name[256];
            snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", l, proj[p]);
            const vx_input_tensor *t = vx_input_find(in, name);
            assert_int_equal(t->type, KN_BF16);
            if (p < 2)
                check_ne(t, 3, o.hidden, o.ff, o.experts);
            else
                check_ne(t, 3, o.ff, o.hidden, o.experts);
            assert_int_equal(t->n_ranges, o.experts);
            assert_non_null(strstr(t->relayout, "stack"));
            uint8_t *b = read_all(in, name, NULL);
            uint64_t slice = t->nbytes / (uint64_t)o.experts;
            for (int e = 0; e < o.experts; e++) {
                snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.%s_proj.weight", l, e,
                         proj[p]);
                const vx_st_tensor *s = vx_st_set_find(src, name, NULL);
                assert_int_equal(s->nbytes, slice);
                assert_memory_equal(b + slice * (uint64_t)e, s->data, slice);
                assert_string_equal(t->ranges[e].src_name, name);
            }
            free(b);
        }
    assert_int_equal(in->n_dropped, 3);
    assert_int_equal(in->n_unrecognised, 0);
    vx_st_set_close(src);
    vx_input_close(in);

    /* tied embeddings: no lm_head, no output.weight */
    o.tied = true;
    o.shards = 1;
    o.config_patch = NULL;
    in = write_open(f, &o);
    assert_null(vx_input_find(in, "output.weight"));
    assert_non_null(vx_input_find(in, "token_embd.weight"));
    vx_input_close(in);
}

/* ---- errors ------------------------------------------------------------------------------- */

/* Opening f->ck fails with every needle in the message. */
static void expect_hf_error(const mwt_fx *f, const char *const *needles) {
    vx_input *in = (vx_input *)1;
    mw_err err = {{0}};
    assert_int_equal(vx_input_open_hf(f->ck, &in, &err), -1);
    assert_null(in);
    for (; *needles; needles++)
        if (!strstr(err.msg, *needles)) fail_msg("message lacks '%s': %s", *needles, err.msg);
}

static void expect_open_error(mwt_fx *f, mwt_hf_opts *o, const char *const *needles) {
    write_ckpt(f, o);
    expect_hf_error(f, needles);
}

#define OPEN_ERROR(o, ...) expect_open_error(f, o, (const char *const[]){__VA_ARGS__, NULL})

static void test_config_errors(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.layers = 1;
#define PATCH(json, ...)                                                                           \
    do {                                                                                           \
        o.config_patch = json;                                                                     \
        OPEN_ERROR(&o, __VA_ARGS__);                                                               \
    } while (0)
    PATCH("{\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}}", "config.json",
          "'linear'", "gpt-oss");
    PATCH("{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 32.0, "
          "\"original_max_position_embeddings\": 64, \"attention_factor\": 1.5}}",
          "attention_factor");
    PATCH("{\"rope_scaling\": {\"rope_type\": \"yarn\", \"original_max_position_embeddings\": 64}}",
          "factor");
    PATCH("{\"rope_scaling\": null}", "yarn");
    /* An empty type once looped forever looking itself up in the family's list. */
    PATCH("{\"rope_scaling\": {\"rope_type\": \"\", \"factor\": 32.0}}", "type ''");
    PATCH("{\"model_type\": \"llama\"}", "'llama'");
    PATCH("{\"model_type\": null}", "model_type");
    PATCH("{\"hidden_size\": null}", "missing required key 'hidden_size'");
    PATCH("{\"head_dim\": null}", "'head_dim'");
    PATCH("{\"num_experts_per_tok\": null, \"experts_per_token\": null}", "num_experts_per_tok");
    PATCH("{\"experts_per_token\": 3}", "experts_per_token", "num_experts_per_tok");
    PATCH("{\"sliding_window\": 0}", "'sliding_window'", "positive integer");
    PATCH("{\"hidden_size\": 96.5}", "'hidden_size'");
    PATCH("{\"rms_norm_eps\": -1}", "'rms_norm_eps'");
    PATCH("{\"rms_norm_eps\": \"small\"}", "'rms_norm_eps'");
    PATCH("{\"hidden_act\": \"gelu\"}", "'hidden_act'", "gelu");
    PATCH("{\"attention_bias\": false}", "'attention_bias'");
    PATCH("{\"some_new_knob\": 3}", "'some_new_knob'", "not known");
    PATCH("{\"layer_types\": [\"full_attention\"], \"num_hidden_layers\": 2}", "layer_types");
    PATCH("{\"layer_types\": [\"chunked_attention\"]}", "layer_types[0]", "chunked_attention");
    PATCH("{\"quantization_config\": {\"quant_method\": \"fp8\"}}", "'fp8'");
    PATCH("{\"initial_context_length\": 4096}", "initial_context_length");
    PATCH("{\"architectures\": [\"LlamaForCausalLM\"]}", "GptOssForCausalLM");
    PATCH("{\"num_local_experts\": 1}", "exceeds");
    PATCH("{\"num_key_value_heads\": 3}", "num_key_value_heads");
    PATCH("{\"num_hidden_layers\": 100000}", "num_hidden_layers");

    mwt_hf_defaults(&o, "qwen3_moe");
    o.layers = 1;
    PATCH("{\"norm_topk_prob\": false}", "'norm_topk_prob'");
    PATCH("{\"norm_topk_prob\": null}", "'norm_topk_prob'");
    PATCH("{\"mlp_only_layers\": [0]}", "'mlp_only_layers'");
    PATCH("{\"use_sliding_window\": true}", "'use_sliding_window'");
    PATCH("{\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}}", "'dynamic'", "qwen3moe");
    PATCH("{\"rope_scaling\": {\"factor\": 2.0}}", "no scaling type");
    PATCH("{\"rope_theta\": null}", "rope_theta");
    PATCH("{\"quantization_config\": {\"quant_method\": \"fp8\"}}", "'fp8'", "qwen3moe");
    PATCH("{\"layer_types\": [\"sliding_attention\"]}", "layer_types[0]");
#undef PATCH
}

/* ---- DeepSeek-V3 / Kimi-K2 ---------------------------------------------------------------- */

static void test_fp8_e4m3_decoding(void **state) {
    (void)state;
    for (int b = 0; b < 256; b++) {
        const float got = vx__fp8_e4m3((uint8_t)b), want = mwt_fp8_e4m3((uint8_t)b);
        if (isnan(want))
            assert_true(isnan(got));
        else
            assert_true(got == want && signbit(got) == signbit(want));
    }
    assert_true(vx__fp8_e4m3(0x7E) == 448.0f);  /* the largest */
    assert_true(vx__fp8_e4m3(0x01) == 0x1p-9f); /* the smallest subnormal */
    assert_true(vx__fp8_e4m3(0x08) == 0x1p-6f); /* the smallest normal */
    assert_true(isnan(vx__fp8_e4m3(0xFF)) && isnan(vx__fp8_e4m3(0x7F)));
}

/* deepseek_v3's config read as llama.cpp's converter writes deepseek2 (the MLA layout, the
 * router), and the tensors each kind of layer has. */
static void check_deepseek_metadata(vx_input *in) {
    assert_string_equal(meta_s(in, "general.architecture"), "deepseek2");
    static const struct {
        const char *key;
        int64_t v;
    } want[] = {{"deepseek2.attention.head_count_kv", 1},
                {"deepseek2.attention.key_length", 32 + 8}, /* kv_lora + rope: the cached row */
                {"deepseek2.attention.value_length", 32},
                {"deepseek2.attention.key_length_mla", 16 + 8},
                {"deepseek2.attention.value_length_mla", 24},
                {"deepseek2.attention.q_lora_rank", 40},
                {"deepseek2.attention.kv_lora_rank", 32},
                {"deepseek2.rope.dimension_count", 8},
                {"deepseek2.leading_dense_block_count", 1},
                {"deepseek2.feed_forward_length", 80},
                {"deepseek2.expert_feed_forward_length", 32},
                {"deepseek2.expert_shared_count", 1},
                {"deepseek2.expert_count", 8},
                {"deepseek2.expert_gating_func", 2},
                {"deepseek2.expert_group_count", 4},
                {"deepseek2.expert_group_used_count", 2},
                {"deepseek2.vocab_size", 40}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (meta_i(in, want[i].key) != want[i].v)
            fail_msg("%s = %lld, want %lld", want[i].key, (long long)meta_i(in, want[i].key),
                     (long long)want[i].v);
    assert_true(meta_f(in, "deepseek2.expert_weights_scale") == 2.5);
    assert_true(meta_f(in, "deepseek2.rope.scaling.yarn_log_multiplier") == (double)0.1f);
    assert_true(meta_f(in, "deepseek2.rope.scaling.factor") == 40.0);
    bool norm = false;
    mw_err err = {{0}};
    assert_int_equal(vx_meta_get_bool(in->meta, "deepseek2.expert_weights_norm", &norm, &err), 1);
    assert_true(norm);
    /* the dense layer has an FFN, the MoE layers experts, a router bias and a shared expert */
    assert_non_null(vx_input_find(in, "blk.0.ffn_gate.weight"));
    assert_null(vx_input_find(in, "blk.0.ffn_gate_inp.weight"));
    assert_null(vx_input_find(in, "blk.1.ffn_gate.weight"));
    check_ne(vx_input_find(in, "blk.2.ffn_up_exps.weight"), 3, 96, 32, 8);
    check_ne(vx_input_find(in, "blk.1.ffn_down_shexp.weight"), 2, 32, 96, 1);
    check_ne(vx_input_find(in, "blk.1.attn_k_b.weight"), 3, 16, 32, 2);
    check_ne(vx_input_find(in, "blk.1.attn_v_b.weight"), 3, 32, 24, 2);
    assert_int_equal(vx_input_find(in, "blk.1.exp_probs_b.bias")->type, KN_F32);
}

/* FP8 matrices are stored as bf16 of the exact products, which read_f32 gives. */
static void check_fp8_products(vx_input *in, vx_st_set *set) {
    mw_err err = {{0}};
    const vx_st_tensor *w = vx_st_set_find(set, "model.layers.1.self_attn.q_a_proj.weight", NULL),
                       *sc = vx_st_set_find(
                           set, "model.layers.1.self_attn.q_a_proj.weight_scale_inv", NULL);
    assert_true(w && sc && w->dtype == VX_ST_F8_E4M3 && sc->shape[0] == 2 && sc->shape[1] == 2);
    const vx_input_tensor *t = vx_input_find(in, "blk.1.attn_q_a.weight");
    assert_int_equal(t->type, KN_BF16);
    assert_non_null(t->read_f32);
    assert_non_null(strstr(t->relayout, "fp8-e4m3"));
    uint16_t *bf = read_all(in, "blk.1.attn_q_a.weight", NULL);
    float *exact = malloc(sizeof(float) * 40 * 96);
    if (t->read_f32(in, t, 0, 40, exact, &err)) fail_msg("%s", err.msg);
    for (int64_t r = 0; r < 40; r++)
        for (int64_t c = 0; c < 96; c++) {
            float scale;
            memcpy(&scale, sc->data + 4 * ((r / 32) * 2 + c / 48), 4);
            const float v = mwt_fp8_e4m3(w->data[r * 96 + c]) * scale;
            assert_true(exact[r * 96 + c] == v);
            assert_int_equal(bf[r * 96 + c], mwt_bf16_rne(v));
        }
    free(exact);
    free(bf);
}

/* kv_b_proj split: attn_k_b's head h, row c, column i = kv_b row h·(nope + v) + i, column c. */
static void check_kv_b_split(vx_input *in, vx_st_set *set) {
    mw_err err = {{0}};
    const vx_st_tensor *kv = vx_st_set_find(set, "model.layers.2.self_attn.kv_b_proj.weight", NULL),
                       *kvs = vx_st_set_find(
                           set, "model.layers.2.self_attn.kv_b_proj.weight_scale_inv", NULL);
    const vx_input_tensor *kb = vx_input_find(in, "blk.2.attn_k_b.weight");
    float *k_exact = malloc(sizeof(float) * 2 * 32 * 16);
    if (kb->read_f32(in, kb, 0, 2 * 32, k_exact, &err)) fail_msg("%s", err.msg);
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < 32; c++)
            for (int i = 0; i < 16; i++) {
                const int64_t r = h * (16 + 24) + i;
                float scale;
                memcpy(&scale, kvs->data + 4 * ((r / 32) * kvs->shape[1] + c / 48), 4);
                assert_true(k_exact[(h * 32 + c) * 16 + i] ==
                            mwt_fp8_e4m3(kv->data[r * 32 + c]) * scale);
            }
    free(k_exact);
}

/* Transcoded, a format rounds the exact products once: dense to f32 keeps them, experts to q8_0
 * are quantized from them (not from their bf16 rounding). */
static void check_transcode(mwt_fx *f, vx_input *in) {
    mw_err err = {{0}};
    vx_extract_opts eo = {.strict = true, .transcode = "experts=q8_0,dense=f32"};
    if (vx_extract(in, f->out, &eo, NULL, &err)) fail_msg("%s", err.msg);
    vx_source *vs;
    if (vx_source_open(f->out, NULL, &vs, &err)) fail_msg("%s", err.msg);
    const vx_tensor *qa = vx_source_tensor(vs, "blk.1.attn_q_a.weight");
    assert_int_equal(qa->type, KN_F32);
    float *exact_qa = malloc(sizeof(float) * 40 * 96);
    const vx_input_tensor *t = vx_input_find(in, "blk.1.attn_q_a.weight");
    if (t->read_f32(in, t, 0, 40, exact_qa, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(qa->data, exact_qa, sizeof(float) * 40 * 96);
    free(exact_qa);
    kn_expert ex;
    if (vx_source_expert(vs, 2, 5, &ex, &err)) fail_msg("%s", err.msg);
    assert_int_equal(ex.up.type, KN_Q8_0);
    const vx_input_tensor *up = vx_input_find(in, "blk.2.ffn_up_exps.weight");
    float row[96];
    uint8_t q8[96 / 32 * 34];
    for (int r = 0; r < 32; r++) {
        if (up->read_f32(in, up, 5 * 32 + (uint64_t)r, 1, row, &err)) fail_msg("%s", err.msg);
        kn_traits(KN_Q8_0)->from_float(row, q8, 96);
        assert_memory_equal((const uint8_t *)ex.up.data + (size_t)r * ex.up.row_bytes, q8,
                            sizeof q8);
    }
    vx_source_close(vs);
}

/* Every scale is consumed; the multi-token-prediction layer is dropped by name. */
static void check_mtp_dropped(const vx_input *in) {
    assert_int_equal(in->n_unrecognised, 0);
    size_t mtp = 0;
    for (size_t i = 0; i < in->n_dropped; i++)
        mtp += strstr(in->dropped[i].src_name, "model.layers.3.") != NULL &&
               strstr(in->dropped[i].rule, "multi-token prediction") != NULL;
    assert_int_equal(mtp, 4); /* enorm, eh_proj (+ its scale), shared_head.norm */
}

/* Kimi-K2's model_type, BF16 weights, no groups, one q_proj, no shared expert. */
static void check_kimi_k2(mwt_fx *f) {
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "kimi_k2");
    o.fp8 = false, o.q_lora = 0, o.shared = 0, o.groups = 1, o.groups_used = 1;
    vx_input *in = write_open(f, &o);
    assert_int_equal(meta_i(in, "deepseek2.attention.q_lora_rank"), 0);
    assert_int_equal(meta_i(in, "deepseek2.expert_group_count"), 1);
    assert_int_equal(meta_i(in, "deepseek2.expert_shared_count"), 0);
    assert_non_null(vx_input_find(in, "blk.0.attn_q.weight"));
    assert_null(vx_input_find(in, "blk.0.attn_q_a.weight"));
    assert_null(vx_input_find(in, "blk.1.ffn_up_shexp.weight"));
    const vx_input_tensor *t = vx_input_find(in, "blk.1.attn_v_b.weight");
    assert_int_equal(t->type, KN_BF16);
    assert_null(t->read_f32);
    vx_input_close(in);
}

static void test_deepseek_metadata_and_tensors(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "deepseek_v3");
    o.mtp_layer = true;
    vx_input *in = write_open(f, &o);
    check_deepseek_metadata(in);
    vx_st_set *set;
    mw_err err = {{0}};
    if (vx_st_set_open(f->ck, &set, &err)) fail_msg("%s", err.msg);
    check_fp8_products(in, set);
    check_kv_b_split(in, set);
    check_transcode(f, in);
    vx_st_set_close(set);
    check_mtp_dropped(in);
    vx_input_close(in);
    check_kimi_k2(f);
}

static void test_deepseek_errors(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "deepseek_v3");
#define PATCH(json, ...)                                                                           \
    do {                                                                                           \
        o.config_patch = json;                                                                     \
        OPEN_ERROR(&o, __VA_ARGS__);                                                               \
    } while (0)
    PATCH("{\"scoring_func\": \"tanh\"}", "scoring_func");
    PATCH("{\"topk_method\": \"group_limited_greedy\"}", "topk_method", "noaux_tc");
    PATCH("{\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 40.0, "
          "\"original_max_position_embeddings\": 4096, \"mscale\": 0.707, "
          "\"mscale_all_dim\": 1.0}}",
          "mscale 0.707");
    PATCH("{\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 40.0, "
          "\"original_max_position_embeddings\": 4096}}",
          "mscale_all_dim");
    PATCH("{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e5m2\", "
          "\"weight_block_size\": [32, 48]}}",
          "quantization_config.fmt");
    PATCH("{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\"}}",
          "weight_block_size");
    PATCH("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\"}}",
          "'compressed-tensors'");
    PATCH("{\"quantization_config\": null}", "F8_E4M3", "no fp8 quantization");
    PATCH("{\"kv_lora_rank\": null}", "kv_lora_rank");
    PATCH("{\"moe_layer_freq\": 2}", "moe_layer_freq");
    PATCH("{\"rope_interleave\": false}", "rope_interleave");
    PATCH("{\"first_k_dense_replace\": -1}", "first_k_dense_replace");
    /* scales of another block size do not fit */
    PATCH("{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
          "\"weight_block_size\": [128, 128]}}",
          "weight_scale_inv", "blocks need");
    /* the dense layer count must leave a MoE layer its experts: too many dense layers means a
     * MoE tensor has no rule */
    o.config_patch = "{\"first_k_dense_replace\": 2}";
    OPEN_ERROR(&o, "mlp.gate_proj.weight");
#undef PATCH
}

static void test_qwen3moe_accepts_yarn_and_rope_parameters(void **state) {
    (void)state;
    const char *base =
        "{\"model_type\": \"qwen3_moe\", \"num_hidden_layers\": 2, \"max_position_embeddings\": "
        "131072, \"hidden_size\": 64, \"moe_intermediate_size\": 32, \"num_attention_heads\": 4, "
        "\"num_key_value_heads\": 2, \"head_dim\": 32, \"rms_norm_eps\": 1e-6, \"num_experts\": 8, "
        "\"num_experts_per_tok\": 2, \"vocab_size\": 100, \"norm_topk_prob\": true, %s}";
    char text[2048];
    snprintf(text, sizeof text, base,
             "\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 1e6, \"factor\": 4.0, "
             "\"original_max_position_embeddings\": 32768}");
    vx_meta *m = vx_meta_new();
    mw_err err = {{0}};
    if (vx_hf_config_parse(text, strlen(text), "cfg", "q", m, &err)) fail_msg("%s", err.msg);
    int64_t v;
    double d;
    const char *s;
    assert_int_equal(vx_meta_get_i64(m, "qwen3moe.attention.key_length", &v, &err), 1);
    assert_int_equal(v, 32); /* head_dim given: not hidden / heads */
    assert_int_equal(vx_meta_get_str(m, "qwen3moe.rope.scaling.type", &s, &err), 1);
    assert_string_equal(s, "yarn");
    assert_int_equal(vx_meta_get_f64(m, "qwen3moe.rope.scaling.factor", &d, &err), 1);
    assert_true(d == 4.0);
    assert_int_equal(vx_meta_get_i64(m, "qwen3moe.rope.scaling.original_context_length", &v, &err),
                     1);
    assert_int_equal(v, 32768);
    assert_int_equal(vx_meta_get_f64(m, "qwen3moe.rope.freq_base", &d, &err), 1);
    assert_true(d == 1e6);
    assert_int_equal(vx_meta_find(m, "qwen3moe.rope.scaling.yarn_beta_fast"), -1);
    vx_meta_free(m);
    /* rope_theta in both places must agree; both dictionaries at once is ambiguous */
    snprintf(text, sizeof text, base,
             "\"rope_theta\": 5e5, \"rope_parameters\": {\"rope_type\": \"default\", "
             "\"rope_theta\": 1e6}");
    m = vx_meta_new();
    assert_int_equal(vx_hf_config_parse(text, strlen(text), "cfg", "q", m, &err), -1);
    assert_non_null(strstr(err.msg, "rope_theta"));
    vx_meta_free(m);
    snprintf(text, sizeof text, base,
             "\"rope_theta\": 1e6, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
             "\"original_max_position_embeddings\": 32768}, \"rope_parameters\": {}");
    m = vx_meta_new();
    assert_int_equal(vx_hf_config_parse(text, strlen(text), "cfg", "q", m, &err), -1);
    assert_non_null(strstr(err.msg, "both"));
    vx_meta_free(m);
    m = vx_meta_new();
    assert_int_equal(vx_hf_config_parse("[1]", 3, "cfg", "q", m, &err), -1);
    assert_non_null(strstr(err.msg, "not a JSON object"));
    assert_int_equal(vx_hf_config_parse("{\"a\":", 5, "cfg", "q", m, &err), -1);
    assert_non_null(strstr(err.msg, "not valid JSON"));
    vx_meta_free(m);
}

/* Kimi Linear's config: the hybrid stack from linear_attn_config (1-based), the keys llama.cpp's
 * converter derives; compressed-tensors: only the MXFP4 pack format and scheme, every other
 * format, scheme value or key named. */
static const char kimi_base[] =
    "{\"model_type\": \"kimi_linear\", \"architectures\": [\"KimiLinearForCausalLM\"], "
    "\"num_hidden_layers\": 4, \"max_position_embeddings\": 4096, \"hidden_size\": 64, "
    "\"intermediate_size\": 96, \"moe_intermediate_size\": 32, \"num_attention_heads\": 2, "
    "\"rms_norm_eps\": 1e-5, \"num_experts\": 4, \"num_experts_per_token\": 2, \"vocab_size\": "
    "300, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4, \"v_head_dim\": "
    "8, \"first_k_dense_replace\": 1, \"num_shared_experts\": 1, \"rope_theta\": 10000.0, "
    "\"linear_attn_config\": {\"full_attn_layers\": [2, 4], \"kda_layers\": [1, 3], \"num_heads\": "
    "2, \"head_dim\": 32, \"short_conv_kernel_size\": 4}%s}";

static int kimi_parse(const char *extra, vx_meta **m, mw_err *err) {
    char text[4096];
    snprintf(text, sizeof text, kimi_base, extra);
    *m = vx_meta_new();
    return vx_hf_config_parse(text, strlen(text), "cfg", "k", *m, err);
}

static void kimi_refused(const char *extra, const char *want) {
    vx_meta *m;
    mw_err err = {{0}};
    assert_int_equal(kimi_parse(extra, &m, &err), -1);
    if (!strstr(err.msg, want)) fail_msg("'%s' does not say '%s'", err.msg, want);
    vx_meta_free(m);
}

#define CT_GROUP                                                                                   \
    "\"config_groups\": {\"g\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, "       \
    "\"type\": \"float\", \"group_size\": 32, \"strategy\": \"group\", \"symmetric\": true, "      \
    "\"dynamic\": false%s}%s}}"

static void test_kimi_linear_config(void **state) {
    (void)state;
    vx_meta *m;
    mw_err err = {{0}};
    if (kimi_parse("", &m, &err)) fail_msg("%s", err.msg);
    const struct {
        const char *key;
        int64_t want;
    } keys[] = {{"kimi-linear.kda.head_dim", 32},
                {"kimi-linear.ssm.conv_kernel", 4},
                {"kimi-linear.attention.key_length", 20},
                {"kimi-linear.attention.value_length", 16},
                {"kimi-linear.attention.key_length_mla", 12},
                {"kimi-linear.rope.dimension_count", 4},
                {"kimi-linear.expert_gating_func", 2},
                {"kimi-linear.leading_dense_block_count", 1}};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        int64_t v = -1;
        assert_int_equal(vx_meta_get_i64(m, keys[i].key, &v, &err), 1);
        if (v != keys[i].want) fail_msg("%s = %lld", keys[i].key, (long long)v);
    }
    for (int l = 0; l < 4; l++) { /* layers 2 and 4 (1-based) are latent attention */
        int64_t kv = -1;
        assert_int_equal(
            vx_meta_arr_i64(m, "kimi-linear.attention.head_count_kv", (uint64_t)l, &kv, &err), 1);
        assert_int_equal(kv, l % 2);
    }
    assert_int_equal(vx_meta_find(m, "kimi-linear.rope.freq_base"), -1); /* nothing rotates */
    vx_meta_free(m);
    char ct[1024];
    snprintf(ct, sizeof ct,
             ", \"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": "
             "\"mxfp4-pack-quantized\", \"quantization_status\": \"compressed\", " CT_GROUP "}",
             ", \"scale_dtype\": \"torch.uint8\"", ", \"input_activations\": null");
    if (kimi_parse(ct, &m, &err)) fail_msg("%s", err.msg);
    vx_meta_free(m);
    static const struct {
        const char *from, *to, *want;
    } bad[] = {
        {"\"mxfp4-pack-quantized\"", "\"pack-quantized\"", "format' is \"pack-quantized\""},
        {"\"num_bits\": 4", "\"num_bits\": 8", "num_bits' is 8"},
        {"\"group_size\": 32", "\"group_size\": 16", "group_size' is 16"},
        {"\"input_activations\": null", "\"input_activations\": {}", "input_activations' is {}"},
        {"\"quantization_status\": \"compressed\"", "\"quantization_status\": \"frozen\"",
         "quantization_status' is \"frozen\""},
        {"\"quantization_status\"", "\"kv_cache_scheme\": {}, \"quantization_status\"",
         "kv_cache_scheme' is {}"},
        {"\"targets\"", "\"zero_point\": 1, \"targets\"",
         "'quantization_config.config_groups.g."
         "zero_point' (1) is not supported"},
        {"\"format\": \"mxfp4-pack-quantized\", ", "", "names no format (for group 'g')"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char b[1200];
        const char *at = strstr(ct, bad[i].from);
        assert_non_null(at);
        snprintf(b, sizeof b, "%.*s%s%s", (int)(at - ct), ct, bad[i].to, at + strlen(bad[i].from));
        kimi_refused(b, bad[i].want);
    }
    kimi_refused(", \"q_lora_rank\": 8", "'q_lora_rank' is 8");
    kimi_refused(", \"moe_renormalize\": false", "'moe_renormalize' is false");
    kimi_refused(", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 2.0}",
                 "scales a rotation family kimi-linear does not have");
}

#undef CT_GROUP

static void test_tensor_errors(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.layers = 1;
    /* the config disagrees with the tensors */
    o.config_patch = "{\"intermediate_size\": 32}";
    OPEN_ERROR(&o, "model.layers.0.mlp.experts.gate_up_proj_blocks", "ffn_gate_exps.weight",
               "[96, 64, 3]", "[96, 32, 3]");
    o.config_patch = "{\"vocab_size\": 41}";
    OPEN_ERROR(&o, "model.embed_tokens.weight", "[96, 41]");
    /* a layer the checkpoint does not have */
    o.config_patch = "{\"num_hidden_layers\": 2, \"layer_types\": null}";
    OPEN_ERROR(&o, "needs 'model.layers.1.input_layernorm.weight'");
    o.config_patch = NULL;
    /* qwen3moe without lm_head and not tied */
    mwt_hf_defaults(&o, "qwen3_moe");
    o.layers = 1;
    o.tied = true;
    o.config_patch = "{\"tie_word_embeddings\": false}";
    OPEN_ERROR(&o, "lm_head.weight", "output.weight");
    /* no config.json at all */
    mwt_rmrf(f->ck);
    vx_input *in;
    mw_err err = {{0}};
    assert_int_equal(vx_input_open_hf(f->dir, &in, &err), -1);
    assert_non_null(strstr(err.msg, "config.json"));
}

/* Rewrites the checkpoint in dir as one file without the tensors whose name contains `drop`. */
static void rewrite_without(const char *dir, const char *drop) {
    vx_st_set *src;
    mw_err err = {{0}};
    assert_int_equal(vx_st_set_open(dir, &src, &err), 0);
    mwt_st *w = mwt_st_new();
    for (size_t i = 0; i < vx_st_set_n_tensors(src); i++) {
        const vx_st_tensor *t = vx_st_set_tensor_at(src, i, NULL);
        if (strstr(t->name, drop)) continue;
        mwt_st_add(w, t->name, vx_st_dtype_name(t->dtype), t->n_dims, t->shape, t->data, t->nbytes);
    }
    vx_st_set_close(src);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(mwt_st_write(w, path), 0);
    mwt_st_free(w);
}

static void expect_error_after_drop(mwt_fx *f, const mwt_hf_opts *o, const char *drop,
                                    const char *needle) {
    write_ckpt(f, o);
    rewrite_without(f->ck, drop);
    vx_input *in;
    mw_err err = {{0}};
    assert_int_equal(vx_input_open_hf(f->ck, &in, &err), -1);
    if (!strstr(err.msg, needle)) fail_msg("message lacks '%s': %s", needle, err.msg);
}

/* Companion tensors must come in pairs; a missing expert breaks the stack. */
static void test_incomplete_tensor_sets(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.layers = 1;
    expect_error_after_drop(f, &o, "gate_up_proj_scales",
                            "'model.layers.0.mlp.experts.gate_up_proj_scales' is missing");
    expect_error_after_drop(f, &o, "down_proj_blocks", "down_proj_blocks");
    mwt_hf_defaults(&o, "qwen3_moe");
    o.layers = 1;
    expect_error_after_drop(f, &o, "experts.2.up_proj",
                            "'model.layers.0.mlp.experts.2.up_proj.weight' is missing");
    expect_error_after_drop(f, &o, "q_norm", "model.layers.0.self_attn.q_norm.weight");
}

/* ---- hostile checkpoint directories ------------------------------------------------------ */

/* A family's defaults with one layer: these tests only need some valid checkpoint. */
static mwt_hf_opts one_layer(const char *model_type) {
    mwt_hf_opts o;
    mwt_hf_defaults(&o, model_type);
    o.layers = 1;
    return o;
}

#define HF_ERROR(...) expect_hf_error(f, (const char *const[]){__VA_ARGS__, NULL})

static void ck_path(const mwt_fx *f, const char *name, char *path, size_t n) {
    snprintf(path, n, "%s/%s", f->ck, name);
}

/* config.json with `value` (repeated n times between head and tail) as its rope_scaling. */
static void write_config_with(const mwt_fx *f, const char *head, const char *unit, size_t n,
                              const char *tail) {
    char path[4200];
    ck_path(f, "config.json", path, sizeof path);
    size_t len;
    char *cfg = mwt_read_file(path, &len);
    assert_non_null(cfg);
    char *at = strstr(cfg, "\"rope_scaling\"");
    assert_non_null(at);
    FILE *out = fopen(path, "wb");
    assert_non_null(out);
    fprintf(out, "%.*s\"rope_scaling\": %s", (int)(at - cfg), cfg, head);
    for (size_t i = 0; i < n; i++) fputs(unit, out);
    fprintf(out, "%s, \"rope_parameters\": null}", tail);
    fclose(out);
    free(cfg);
}

static void test_hostile_config(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o = one_layer("gpt_oss");
    write_ckpt(f, &o);
    write_config_with(f, "", "[", 100000, "");
    HF_ERROR("config.json", "nested deeper than 16 levels");
    write_config_with(f, "[", "{},", 300000, "{}]");
    HF_ERROR("config.json", "too many JSON objects");
    write_config_with(f, "[", "1,", 400000, "1]");
    HF_ERROR("config.json", "too many JSON keys and values");
    write_config_with(f, "\"", "x", 2 << 20, "\"");
    HF_ERROR("config.json", "exceeds the 1048576-byte limit");
    /* a FIFO is refused at once, not waited on */
    char path[4200], target[4200];
    ck_path(f, "config.json", path, sizeof path);
    unlink(path);
    assert_int_equal(mkfifo(path, 0644), 0);
    HF_ERROR("config.json: not a regular file");
    /* a link out of the directory */
    unlink(path);
    snprintf(target, sizeof target, "%s/elsewhere.json", f->dir);
    assert_int_equal(mwt_write_file(target, "{}", 2), 0);
    assert_int_equal(symlink(target, path), 0);
    HF_ERROR("config.json: resolves to", "outside the checkpoint directory");
}

/* Carried files are copied into the vindex: one linking out (a local secret, say) must not be. */
static void test_carried_files_stay_inside(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o = one_layer("gpt_oss");
    write_ckpt(f, &o);
    char path[4200], target[4200];
    ck_path(f, "tokenizer.json", path, sizeof path);
    snprintf(target, sizeof target, "%s/secret", f->dir);
    assert_int_equal(mwt_write_file(target, "key", 3), 0);
    assert_int_equal(symlink(target, path), 0);
    HF_ERROR("tokenizer.json: resolves to", "outside the checkpoint directory");
    unlink(path);
    assert_int_equal(symlink("/etc/hostname", path), 0);
    HF_ERROR("tokenizer.json", "outside the checkpoint directory");
    unlink(path);
    assert_int_equal(mkfifo(path, 0644), 0);
    HF_ERROR("tokenizer.json: not a regular file");
    unlink(path);
    /* a link inside the directory is carried with the content it points to */
    char sub[4200];
    ck_path(f, "tok", sub, sizeof sub);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(target, sizeof target, "%s/t.json", sub);
    assert_int_equal(mwt_write_file(target, "{\"v\": 1}", 8), 0);
    assert_int_equal(symlink("tok/t.json", path), 0);
    vx_input *in = open_ok(f->ck);
    mw_err err = {{0}};
    if (vx_extract(in, f->out, NULL, NULL, &err)) fail_msg("%s", err.msg);
    vx_input_close(in);
    snprintf(path, sizeof path, "%s/tokenizer.json", f->out);
    size_t len;
    char *got = mwt_read_file(path, &len);
    assert_non_null(got);
    assert_string_equal(got, "{\"v\": 1}");
    free(got);
}

/* A Hugging Face hub cache snapshot is all links into ../../blobs: it extracts. */
static void test_hub_cache_snapshot(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o = one_layer("qwen3_moe");
    o.shards = 2;
    write_ckpt(f, &o);
    char repo[4200], blobs[4300], snap[4300];
    snprintf(repo, sizeof repo, "%s/models--org--tiny", f->dir);
    snprintf(blobs, sizeof blobs, "%s/blobs", repo);
    snprintf(snap, sizeof snap, "%s/snapshots", repo);
    assert_int_equal(mkdir(repo, 0755), 0);
    assert_int_equal(mkdir(blobs, 0755), 0);
    assert_int_equal(mkdir(snap, 0755), 0);
    strcat(snap, "/9f3c");
    assert_int_equal(mkdir(snap, 0755), 0);
    DIR *d = opendir(f->ck);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char from[4600], to[4600], link[4600];
        snprintf(from, sizeof from, "%s/%s", f->ck, e->d_name);
        snprintf(to, sizeof to, "%s/blob%d", blobs, n);
        snprintf(link, sizeof link, "%s/%s", snap, e->d_name);
        assert_int_equal(rename(from, to), 0);
        snprintf(to, sizeof to, "../../blobs/blob%d", n++);
        assert_int_equal(symlink(to, link), 0);
    }
    closedir(d);
    assert_true(n >= 4);
    vx_input *in = open_ok(snap);
    assert_int_equal(in->n_files, 2);
    mw_err err = {{0}};
    if (vx_extract(in, f->out, NULL, NULL, &err)) fail_msg("%s", err.msg);
    vx_input_close(in);
    if (vx_verify(f->out, NULL, NULL, NULL, &err)) fail_msg("%s", err.msg);
    /* the provenance names each shard with the SHA-256 of its bytes (libsodium's, here) */
    vx_manifest m;
    if (vx_manifest_read(f->out, &m, &err)) fail_msg("%s", err.msg);
    json_t *srcs = json_object_get(m.provenance, "sources");
    assert_int_equal(json_array_size(srcs), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(srcs, i);
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", snap, json_string_value(json_object_get(e, "name")));
        size_t len;
        uint8_t *bytes = mwt_read_file(path, &len), got[32], want[32];
        assert_non_null(bytes);
        crypto_hash_sha256(got, bytes, len);
        free(bytes);
        assert_int_equal(vx_unhex(json_string_value(json_object_get(e, "sha256")), want), 0);
        assert_memory_equal(got, want, 32);
    }
    vx_manifest_free(&m);
}

/* Tensor names never become paths: '/' and ".." are only text; control characters are refused. */
static void test_odd_tensor_names(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o = one_layer("gpt_oss");
    o.extra_tensor = "../../outside/model/layers/0/x";
    vx_input *in = write_open(f, &o);
    assert_int_equal(in->n_unrecognised, 1);
    assert_string_equal(in->unrecognised[0], o.extra_tensor);
    mw_err err = {{0}};
    if (vx_extract(in, f->out, NULL, NULL, &err)) fail_msg("%s", err.msg);
    vx_input_close(in);
    char path[4200];
    snprintf(path, sizeof path, "%s/outside", f->dir);
    assert_int_not_equal(access(path, F_OK), 0);
    DIR *d = opendir(f->out);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) assert_null(strchr(e->d_name, '/'));
    closedir(d);
    o.extra_tensor = "model.layers.0.\x1b]0;owned\x07";
    write_ckpt(f, &o);
    HF_ERROR("model.safetensors", "control character U+001B");
}

/* Sources are mapped while extract runs: one that changes is refused before a manifest exists. */
static void test_source_changed_under_extract(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o = one_layer("gpt_oss");
    char path[4200], tmp[4200];
    ck_path(f, "model.safetensors", path, sizeof path);
    for (int how = 0; how < 3; how++) {
        vx_input *in = write_open(f, &o);
        if (how == 0) { /* grown */
            int fd = open(path, O_WRONLY | O_APPEND);
            assert_true(fd >= 0);
            assert_int_equal(write(fd, "x", 1), 1);
            close(fd);
        } else if (how == 1) { /* rewritten in place, same size */
            struct timespec t[2] = {{0, UTIME_OMIT}, {12345, 0}};
            assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
        } else { /* replaced */
            snprintf(tmp, sizeof tmp, "%s.new", path);
            size_t len;
            void *bytes = mwt_read_file(path, &len);
            assert_int_equal(mwt_write_file(tmp, bytes, len), 0);
            free(bytes);
            assert_int_equal(rename(tmp, path), 0);
        }
        mw_err err = {{0}};
        assert_int_equal(vx_extract(in, f->out, NULL, NULL, &err), -1);
        vx_input_close(in);
        static const char *const why[] = {"now", "modified", "replaced"};
        if (!strstr(err.msg, "model.safetensors: changed while being read") ||
            !strstr(err.msg, why[how]))
            fail_msg("case %d: %s", how, err.msg);
        assert_int_not_equal(access(f->out, F_OK), 0); /* nothing left behind */
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        MWT_FX_TEST(test_gpt_oss_metadata),
        MWT_FX_TEST(test_gpt_oss_mxfp4_tensors),
        MWT_FX_TEST(test_partial_reads),
        cmocka_unit_test(test_mxfp4_against_ggml_fixture),
        MWT_FX_TEST(test_gpt_oss_sharded_equals_single),
        MWT_FX_TEST(test_gpt_oss_bf16_experts),
        MWT_FX_TEST(test_qwen3moe),
        MWT_FX_TEST(test_config_errors),
        cmocka_unit_test(test_fp8_e4m3_decoding),
        MWT_FX_TEST(test_deepseek_metadata_and_tensors),
        MWT_FX_TEST(test_deepseek_errors),
        cmocka_unit_test(test_qwen3moe_accepts_yarn_and_rope_parameters),
        MWT_FX_TEST(test_tensor_errors),
        MWT_FX_TEST(test_incomplete_tensor_sets),
        MWT_FX_TEST(test_hostile_config),
        MWT_FX_TEST(test_kimi_linear_config),
        MWT_FX_TEST(test_carried_files_stay_inside),
        MWT_FX_TEST(test_hub_cache_snapshot),
        MWT_FX_TEST(test_odd_tensor_names),
        MWT_FX_TEST(test_source_changed_under_extract),
    };
    return cmocka_run_group_tests_name("vx_hf", tests, NULL, NULL);
}
