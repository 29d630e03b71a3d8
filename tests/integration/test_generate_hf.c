/* tests/integration/test_generate_hf.c — a synthetic Hugging Face gpt-oss checkpoint (BF16
 * matrices, biases and sinks, F32 norms, MXFP4 experts with BF16 biases) through `vindex extract`
 * and `coordinator generate`, against GGUF files built from the same values:
 *  - "vectors f32": every vector (norms, biases, sinks, expert biases) as F32, matrices as the
 *    checkpoint's BF16 bytes. Vectors are converted exactly at load, so both numerics modes must
 *    give the same tokens and the same logits bit for bit.
 *  - "all f32": the matrices as F32 too. In f32 numerics the kernels treat F32 and BF16 weights
 *    the same way over exactly dequantized values: bit for bit again. (In q8 numerics a BF16
 *    matrix sees bf16-rounded activations, as ggml does, so that pair is not compared.)
 * The dense bytes of the vindex are the checkpoint's (test_vx_hf_extract checks that); the values
 * are decoded here with the test's own bf16 decoder.
 * And a DeepSeek-V3 checkpoint (FP8 e4m3 matrices with 32 × 48 weight_scale_inv blocks, partial at
 * the edges; BF16 norms, router and embeddings; kv_b_proj per head; a multi-token-prediction layer
 * to drop) against a GGUF the test builds itself: each FP8 weight times its block's scale in f32,
 * rounded to bf16, kv_b_proj split into the transposed key rows (attn_k_b) and the value rows
 * (attn_v_b), experts stacked — bit for bit in both numerics. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_st.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_gguf.h"
#include "vindex/vx_safetensors.h"
#include "vindex/vx_source.h"

#define N_PROMPT 30 /* the window is 8 */
#define N_GEN    8
#define VOCAB    64

/* n values of a BF16 or F32 tensor as floats (malloc'ed). */
static float *as_f32(kn_type type, const void *data, int64_t n) {
    float *f = malloc((size_t)n * sizeof *f);
    if (type == KN_F32) {
        memcpy(f, data, (size_t)n * sizeof *f);
    } else {
        assert_int_equal(type, KN_BF16);
        const uint8_t *p = data;
        for (int64_t i = 0; i < n; i++) f[i] = mwt_bf16((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    }
    return f;
}

/* Adds tensor `name` (ne, n elements of type `type` at data) as F32 or as stored. */
static void add(vx_gguf_writer *w, const char *name, kn_type type, int n_dims, const int64_t *ne,
                const void *data, bool to_f32) {
    mw_err e;
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++) n *= ne[d];
    int rc;
    if (to_f32 && type != KN_F32) {
        float *f = as_f32(type, data, n);
        rc = vx_gguf_writer_add(w, name, KN_F32, n_dims, ne, f, &e);
        free(f);
    } else {
        rc = vx_gguf_writer_add(w, name, type, n_dims, ne, data, &e);
    }
    if (rc) fail_msg("%s: %s", name, e.msg);
}

/* One expert part of every expert of a layer, stacked as GGUF stores it ([cols, rows, E]). */
static void add_experts(vx_gguf_writer *w, vx_source *s, int layer, const char *part, int which,
                        bool bias) {
    const int E = vx_source_n_experts(s);
    kn_expert x;
    mw_err e;
    if (vx_source_expert(s, layer, 0, &x, &e)) fail_msg("%s", e.msg);
    const kn_mat *m0 =
        (const kn_mat *[]){&x.gate, &x.up, &x.down, &x.gate_b, &x.up_b, &x.down_b}[which];
    const kn_type type = m0->type;
    const int64_t rows = m0->rows, cols = m0->cols;
    const size_t rb = kn_row_size(type, cols), slice = rb * (size_t)rows;
    uint8_t *stack = malloc(slice * (size_t)E);
    for (int ex = 0; ex < E; ex++) {
        if (vx_source_expert(s, layer, ex, &x, &e)) fail_msg("%s", e.msg);
        const kn_mat *m =
            (const kn_mat *[]){&x.gate, &x.up, &x.down, &x.gate_b, &x.up_b, &x.down_b}[which];
        for (int64_t r = 0; r < rows; r++)
            memcpy(stack + ex * slice + (size_t)r * rb,
                   (const uint8_t *)m->data + (size_t)r * m->row_bytes, rb);
    }
    char name[128];
    snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.%s", layer, part, bias ? "bias" : "weight");
    if (bias)
        add(w, name, type, 2, (int64_t[]){cols, E}, stack, true);
    else
        add(w, name, type, 3, (int64_t[]){cols, rows, E}, stack, false);
    free(stack);
}

/* The vindex's model as a GGUF file: vectors as F32, matrices as F32 when all_f32, else as stored;
 * experts as stored, their biases as F32. */
static void write_gguf(const char *vx, const char *path, bool all_f32) {
    vx_source *s;
    mw_err e;
    if (vx_source_open(vx, NULL, &s, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    const vx_meta *m = vx_source_meta(s);
    for (size_t i = 0; i < vx_meta_count(m); i++)
        assert_int_equal(vx_meta_copy_entry(vx_gguf_writer_meta(w), m, i), 0);
    int vectors = 0, bf16 = 0;
    for (size_t i = 0; i < vx_source_n_tensors(s); i++) {
        const vx_tensor *t = vx_source_tensor_at(s, i);
        if (strstr(t->name, "_exps.")) continue;
        assert_non_null(t->data);
        vectors += t->n_dims == 1;
        bf16 += t->type == KN_BF16;
        add(w, t->name, t->type, t->n_dims, t->ne, t->data, t->n_dims == 1 || all_f32);
    }
    for (int l = 0; l < vx_source_n_layers(s); l++) {
        static const char *const parts[3] = {"gate", "up", "down"};
        for (int p = 0; p < 3; p++) {
            add_experts(w, s, l, parts[p], p, false);
            add_experts(w, s, l, parts[p], 3 + p, true);
        }
    }
    /* the checkpoint stores biases, sinks and matrices in BF16: the test covers them */
    assert_true(vectors >= 10 && bf16 >= 10);
    if (vx_gguf_writer_write(w, path, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer_free(w);
    vx_source_close(s);
}

typedef struct run {
    char *out;
    float *logits;
} run;

static void generate(run *r, const char *model, const char *numerics, const char *dir) {
    char lpath[512], toks[256];
    snprintf(lpath, sizeof lpath, "%s/logits.bin", dir);
    size_t o = 0;
    for (int i = 0; i < N_PROMPT; i++)
        o += (size_t)snprintf(toks + o, sizeof toks - o, "%s%d", i ? "," : "", (i * 7 + 3) % VOCAB);
    const char *argv[] = {mwt_bin("coordinator"),
                          "generate",
                          "--model",
                          model,
                          "--tokens",
                          toks,
                          "--max-tokens",
                          "8",
                          "--numerics",
                          numerics,
                          "--logits-out",
                          lpath,
                          "--threads",
                          "2",
                          NULL};
    char *err = NULL;
    int st = mwt_run((char *const *)argv, &r->out, &err, 300000);
    if (st) fail_msg("coordinator generate --model %s: exit %d: %s", model, st, err);
    free(err);
    size_t len;
    r->logits = mwt_read_file(lpath, &len);
    assert_non_null(r->logits);
    assert_int_equal(len, (size_t)(N_PROMPT + N_GEN - 1) * VOCAB * sizeof(float));
    for (size_t i = 0; i < len / sizeof(float); i++) assert_true(isfinite(r->logits[i]));
}

static void same(const char *a_path, const char *b_path, const char *numerics, const char *dir) {
    run a, b;
    generate(&a, a_path, numerics, dir);
    generate(&b, b_path, numerics, dir);
    printf("    %s: %.*s, max |diff| %.3g\n", numerics, (int)strcspn(a.out, "\n"), a.out,
           mwt_max_abs_diff(a.logits, b.logits, (size_t)(N_PROMPT + N_GEN - 1) * VOCAB));
    assert_string_equal(a.out, b.out);
    assert_memory_equal(a.logits, b.logits, (size_t)(N_PROMPT + N_GEN - 1) * VOCAB * sizeof(float));
    free(a.out);
    free(a.logits);
    free(b.out);
    free(b.logits);
}

/* `vindex extract --strict`: the optimised tool when there is one (the program under test is the
 * coordinator). */
static void extract(const char *ck, const char *out) {
    const char *rel = getenv("MW_REL_BIN");
    char tool[512];
    if (rel)
        snprintf(tool, sizeof tool, "%s/vindex", rel);
    else
        snprintf(tool, sizeof tool, "%s", mwt_bin("vindex"));
    const char *argv[] = {tool, "extract", ck, out, "--strict", NULL};
    char *err = NULL;
    int st = mwt_run((char *const *)argv, NULL, &err, 120000);
    if (st) fail_msg("vindex extract: exit %d: %s", st, err);
    free(err);
}

static void test_hf_checkpoint_generates(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.layers = 4;
    o.experts = 4;
    o.vocab = VOCAB;
    o.seed = 31;
    assert_int_equal(mwt_hf_write(f->ck, &o), 0);
    extract(f->ck, f->out);

    char vec_gguf[4096 + 32], f32_gguf[4096 + 32];
    snprintf(vec_gguf, sizeof vec_gguf, "%s/vectors-f32.gguf", f->dir);
    snprintf(f32_gguf, sizeof f32_gguf, "%s/all-f32.gguf", f->dir);
    write_gguf(f->out, vec_gguf, false);
    write_gguf(f->out, f32_gguf, true);
    same(f->out, vec_gguf, "q8", f->dir);
    same(f->out, vec_gguf, "f32", f->dir);
    same(f->out, f32_gguf, "f32", f->dir);
}

/* ---- DeepSeek-V3 (FP8) --------------------------------------------------------------------- */

typedef struct ds_ref {
    vx_st_set *set;
    int64_t block[2];
    vx_gguf_writer *w;
} ds_ref;

static const vx_st_tensor *st(const ds_ref *r, const char *name) {
    int file;
    const vx_st_tensor *t = vx_st_set_find(r->set, name, &file);
    if (!t) fail_msg("checkpoint has no %s", name);
    return t;
}

/* Element (i, k) of a 2-D checkpoint matrix as the float the vindex should keep: FP8 times its
 * block's scale in f32 (then rounded to bf16 by the caller), BF16 as it is. */
static float ds_value(const ds_ref *r, const vx_st_tensor *t, const vx_st_tensor *sc, int64_t i,
                      int64_t k) {
    const int64_t cols = t->shape[t->n_dims - 1];
    if (t->dtype == VX_ST_BF16) {
        const uint8_t *p = t->data + 2 * (i * cols + k);
        return mwt_bf16((uint16_t)(p[0] | p[1] << 8));
    }
    assert_int_equal(t->dtype, VX_ST_F8_E4M3);
    float s;
    memcpy(&s, sc->data + 4 * ((i / r->block[0]) * sc->shape[1] + k / r->block[1]), 4);
    return mwt_fp8_e4m3(t->data[i * cols + k]) * s;
}

static const vx_st_tensor *scale_of(const ds_ref *r, const vx_st_tensor *t) {
    if (t->dtype != VX_ST_F8_E4M3) return NULL;
    char n[300];
    snprintf(n, sizeof n, "%s_scale_inv", t->name);
    return st(r, n);
}

/* GGUF tensor `out` [ne0, ne1, ne2] as BF16 from matrices of the checkpoint: n_mat sources (one
 * per expert, or one), element (m, row, col) read through `pick`. */
typedef void (*pick_fn)(int64_t m, int64_t row, int64_t col, int *src, int64_t *i, int64_t *k);

static void pick_plain(int64_t m, int64_t row, int64_t col, int *src, int64_t *i, int64_t *k) {
    *src = (int)m, *i = row, *k = col;
}

static int64_t kv_nope, kv_v;
static void pick_k_b(int64_t h, int64_t row, int64_t col, int *src, int64_t *i, int64_t *k) {
    *src = 0, *i = h * (kv_nope + kv_v) + col, *k = row; /* K_h = key rows transposed */
}
static void pick_v_b(int64_t h, int64_t row, int64_t col, int *src, int64_t *i, int64_t *k) {
    *src = 0, *i = h * (kv_nope + kv_v) + kv_nope + row, *k = col;
}

static void ds_put(ds_ref *r, const char *out, const char *const *srcs, int n_dims,
                   const int64_t *ne, pick_fn pick) {
    const int64_t n_mat = n_dims == 3 ? ne[2] : 1, rows = n_dims >= 2 ? ne[1] : 1, cols = ne[0];
    uint16_t *b = malloc(sizeof(uint16_t) * (size_t)(n_mat * rows * cols));
    for (int64_t m = 0; m < n_mat; m++)
        for (int64_t row = 0; row < rows; row++)
            for (int64_t col = 0; col < cols; col++) {
                int si;
                int64_t i, k;
                pick(m, row, col, &si, &i, &k);
                const vx_st_tensor *t = st(r, srcs[si]);
                const float v =
                    n_dims == 1 ? ds_value(r, t, NULL, 0, k) : ds_value(r, t, scale_of(r, t), i, k);
                b[(m * rows + row) * cols + col] = mwt_bf16_rne(v);
            }
    mw_err e;
    int64_t ne4[4] = {ne[0], n_dims > 1 ? ne[1] : 1, n_dims > 2 ? ne[2] : 1, 1};
    if (vx_gguf_writer_add(r->w, out, KN_BF16, n_dims, ne4, b, &e)) fail_msg("%s", e.msg);
    free(b);
}

/* The checkpoint as the GGUF file the extract should amount to, metadata from the vindex. */
static void ds_gguf(const char *ck, const char *vx, const mwt_hf_opts *o, const char *path) {
    ds_ref r = {.block = {o->fp8_block[0], o->fp8_block[1]}, .w = vx_gguf_writer_new(32)};
    mw_err e;
    vx_source *s;
    if (vx_st_set_open(ck, &r.set, &e) || vx_source_open(vx, NULL, &s, &e)) fail_msg("%s", e.msg);
    const vx_meta *m = vx_source_meta(s);
    for (size_t i = 0; i < vx_meta_count(m); i++)
        assert_int_equal(vx_meta_copy_entry(vx_gguf_writer_meta(r.w), m, i), 0);
    vx_source_close(s);
    const int64_t H = o->hidden, NH = o->heads, qk = o->head_dim + o->rope_dim, R = o->kv_lora;
    const int64_t F = o->ff, E = o->experts;
    kv_nope = o->head_dim, kv_v = o->v_dim;
    char a[160], b[160];
#define ONE(src, out, nd, ...)                                                                     \
    ds_put(&r, out, (const char *const[]){src}, nd, (int64_t[]){__VA_ARGS__}, pick_plain)
    ONE("model.embed_tokens.weight", "token_embd.weight", 2, H, o->vocab);
    ONE("model.norm.weight", "output_norm.weight", 1, H);
    ONE("lm_head.weight", "output.weight", 2, H, o->vocab);
    for (int l = 0; l < o->layers; l++) {
#define HF(x) (snprintf(a, sizeof a, "model.layers.%d.%s", l, x), a)
#define GG(x) (snprintf(b, sizeof b, "blk.%d.%s", l, x), b)
        ONE(HF("input_layernorm.weight"), GG("attn_norm.weight"), 1, H);
        ONE(HF("self_attn.q_a_proj.weight"), GG("attn_q_a.weight"), 2, H, o->q_lora);
        ONE(HF("self_attn.q_a_layernorm.weight"), GG("attn_q_a_norm.weight"), 1, o->q_lora);
        ONE(HF("self_attn.q_b_proj.weight"), GG("attn_q_b.weight"), 2, o->q_lora, NH * qk);
        ONE(HF("self_attn.kv_a_proj_with_mqa.weight"), GG("attn_kv_a_mqa.weight"), 2, H,
            R + o->rope_dim);
        ONE(HF("self_attn.kv_a_layernorm.weight"), GG("attn_kv_a_norm.weight"), 1, R);
        HF("self_attn.kv_b_proj.weight");
        ds_put(&r, GG("attn_k_b.weight"), (const char *const[]){a}, 3,
               (int64_t[]){o->head_dim, R, NH}, pick_k_b);
        ds_put(&r, GG("attn_v_b.weight"), (const char *const[]){a}, 3, (int64_t[]){R, o->v_dim, NH},
               pick_v_b);
        ONE(HF("self_attn.o_proj.weight"), GG("attn_output.weight"), 2, NH * o->v_dim, H);
        ONE(HF("post_attention_layernorm.weight"), GG("ffn_norm.weight"), 1, H);
        if (l < o->dense_layers) {
            ONE(HF("mlp.gate_proj.weight"), GG("ffn_gate.weight"), 2, H, o->dense_ff);
            ONE(HF("mlp.up_proj.weight"), GG("ffn_up.weight"), 2, H, o->dense_ff);
            ONE(HF("mlp.down_proj.weight"), GG("ffn_down.weight"), 2, o->dense_ff, H);
            continue;
        }
        ONE(HF("mlp.gate.weight"), GG("ffn_gate_inp.weight"), 2, H, E);
        const vx_st_tensor *bias = st(&r, HF("mlp.gate.e_score_correction_bias"));
        if (vx_gguf_writer_add(r.w, GG("exp_probs_b.bias"), KN_F32, 1, (int64_t[]){E, 1, 1, 1},
                               bias->data, &e))
            fail_msg("%s", e.msg);
        static const char *const parts[3] = {"gate", "up", "down"};
        for (int p = 0; p < 3; p++) {
            char names[64][160];
            const char *srcs[64];
            for (int x = 0; x < E; x++) {
                snprintf(names[x], sizeof names[x], "model.layers.%d.mlp.experts.%d.%s_proj.weight",
                         l, x, parts[p]);
                srcs[x] = names[x];
            }
            char out[64];
            snprintf(out, sizeof out, "blk.%d.ffn_%s_exps.weight", l, parts[p]);
            ds_put(&r, out, srcs, 3, p == 2 ? (int64_t[]){F, H, E} : (int64_t[]){H, F, E},
                   pick_plain);
        }
        ONE(HF("mlp.shared_experts.gate_proj.weight"), GG("ffn_gate_shexp.weight"), 2, H,
            F * o->shared);
        ONE(HF("mlp.shared_experts.up_proj.weight"), GG("ffn_up_shexp.weight"), 2, H,
            F * o->shared);
        ONE(HF("mlp.shared_experts.down_proj.weight"), GG("ffn_down_shexp.weight"), 2,
            F * o->shared, H);
#undef HF
#undef GG
    }
#undef ONE
    if (vx_gguf_writer_write(r.w, path, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer_free(r.w);
    vx_st_set_close(r.set);
}

static void test_deepseek_fp8_checkpoint_generates(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "deepseek_v3");
    o.vocab = VOCAB;
    o.mtp_layer = true;
    o.shards = 2;
    o.seed = 5;
    assert_int_equal(mwt_hf_write(f->ck, &o), 0);
    extract(f->ck, f->out);
    char gguf[4096 + 32];
    snprintf(gguf, sizeof gguf, "%s/deepseek.gguf", f->dir);
    ds_gguf(f->ck, f->out, &o, gguf);
    same(f->out, gguf, "f32", f->dir);
    same(f->out, gguf, "q8", f->dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        MWT_FX_TEST(test_hf_checkpoint_generates),
        MWT_FX_TEST(test_deepseek_fp8_checkpoint_generates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
