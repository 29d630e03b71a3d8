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
 * are decoded here with the test's own bf16 decoder. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_st.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_gguf.h"
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

static void test_hf_checkpoint_generates(void **state) {
    mwt_fx *f = *state;
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "gpt_oss");
    o.layers = 4;
    o.experts = 4;
    o.vocab = VOCAB;
    o.seed = 31;
    assert_int_equal(mwt_hf_write(f->ck, &o), 0);
    /* the optimised vindex tool when there is one: the program under test is the coordinator */
    const char *rel = getenv("MW_REL_BIN");
    char tool[512];
    if (rel)
        snprintf(tool, sizeof tool, "%s/vindex", rel);
    else
        snprintf(tool, sizeof tool, "%s", mwt_bin("vindex"));
    const char *argv[] = {tool, "extract", f->ck, f->out, NULL};
    char *err = NULL;
    int st = mwt_run((char *const *)argv, NULL, &err, 120000);
    if (st) fail_msg("vindex extract: exit %d: %s", st, err);
    free(err);

    char vec_gguf[4096 + 32], f32_gguf[4096 + 32];
    snprintf(vec_gguf, sizeof vec_gguf, "%s/vectors-f32.gguf", f->dir);
    snprintf(f32_gguf, sizeof f32_gguf, "%s/all-f32.gguf", f->dir);
    write_gguf(f->out, vec_gguf, false);
    write_gguf(f->out, f32_gguf, true);
    same(f->out, vec_gguf, "q8", f->dir);
    same(f->out, vec_gguf, "f32", f->dir);
    same(f->out, f32_gguf, "f32", f->dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        MWT_FX_TEST(test_hf_checkpoint_generates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
