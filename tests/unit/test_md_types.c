/* tests/unit/test_md_types.c — vectors and dense weights stored in BF16 / F16, as a checkpoint
 * keeps them. A copy of gpt-oss-tiny with every vector (norms, biases, sinks, router and expert
 * biases) and every dense matrix in the half type must compute exactly what an F32 twin holding
 * the same rounded values computes:
 *  - f32 numerics: bit for bit. Vectors are converted exactly at load, and the kernels use the
 *    same float-lane order for F32, F16 and BF16 weights over exactly dequantized values.
 *  - q8 numerics: a half-type matrix sees activations rounded to its own format (ggml's rule), an
 *    F32 one does not, so the twin keeps the matrices in the half type and converts only the
 *    vectors — again bit for bit.
 * The rounding must change the model (else the test would prove nothing), and a vector in a type
 * the kernels cannot dequantize is still an error. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_local.h"
#include "model/md_model.h"
#include "vindex/vx_gguf.h"

#define N_TOK 40

typedef enum form {
    FORM_HALF,        /* vectors and matrices in the half type */
    FORM_TWIN_F32,    /* both as F32 holding the half-rounded values */
    FORM_TWIN_VECTORS /* vectors as F32 (rounded), matrices in the half type */
} form;

static bool is_expert_weight(const char *name) {
    return strstr(name, "_exps.weight") != NULL;
}

/* Opens the gpt-oss fixture and starts a writer holding its metadata. */
static vx_gguf_writer *start_copy(vx_gguf **g) {
    mw_err e;
    if (vx_gguf_open(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), g, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    const vx_meta *m = vx_gguf_meta(*g);
    for (size_t i = 0; i < vx_meta_count(m); i++)
        assert_int_equal(vx_meta_copy_entry(vx_gguf_writer_meta(w), m, i), 0);
    return w;
}

/* Writes a copy of the gpt-oss fixture where every non-expert-weight tensor is rounded through
 * `half` and stored per `f`. */
static void write_copy(const char *path, kn_type half, form f) {
    const kn_type_traits *tr = kn_traits(half);
    vx_gguf *g;
    mw_err e;
    vx_gguf_writer *w = start_copy(&g);
    int converted = 0;
    for (size_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_tensor *t = vx_gguf_tensor(g, i);
        if (is_expert_weight(t->name)) {
            if (vx_gguf_writer_add(w, t->name, t->type, t->n_dims, t->ne, t->data, &e))
                fail_msg("%s", e.msg);
            continue;
        }
        assert_int_equal(t->type, KN_F32); /* the fixture's dense tensors and vectors */
        const int64_t n = (int64_t)(t->nbytes / 4);
        float *rounded = malloc((size_t)n * sizeof(float));
        uint16_t *bits = malloc((size_t)n * sizeof(uint16_t));
        tr->from_float(t->data, bits, n);
        tr->to_float(bits, rounded, n);
        bool matrix = t->n_dims == 2 && !strstr(t->name, "_exps.bias");
        bool keep_half = f == FORM_HALF || (f == FORM_TWIN_VECTORS && matrix);
        if (vx_gguf_writer_add(w, t->name, keep_half ? half : KN_F32, t->n_dims, t->ne,
                               keep_half ? (const void *)bits : rounded, &e))
            fail_msg("%s", e.msg);
        converted++;
        free(rounded);
        free(bits);
    }
    assert_true(converted > 50);
    if (vx_gguf_writer_write(w, path, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer_free(w);
    vx_gguf_close(g);
}

static void read_tokens(int32_t *tok) {
    char *txt = mwt_read_file(mwt_fixture("llamacpp/gpt-oss-tiny/tokens.txt"), NULL);
    assert_non_null(txt);
    char *p = txt;
    for (int i = 0; i < N_TOK; i++) tok[i] = (int32_t)strtol(p, &p, 10);
    free(txt);
}

/* Prefill of the fixture's prompt (longer than the window of 8) with logits on every row;
 * returns N_TOK × n_vocab floats and the model's vocabulary in *V. */
static float *run(const char *path, kn_numerics num, int64_t *V) {
    char p[4096]; /* path may be mwt_fixture's buffer, which read_tokens reuses */
    snprintf(p, sizeof p, "%s", path);
    int32_t tok[N_TOK];
    read_tokens(tok);
    return mwt_prefill(p, num, tok, N_TOK, 64, V);
}

static void check_type(kn_type half) {
    char *dir = mwt_tmpdir("md_types");
    char p_half[512], p_twin[512], p_vec[512];
    snprintf(p_half, sizeof p_half, "%s/half.gguf", dir);
    snprintf(p_twin, sizeof p_twin, "%s/twin.gguf", dir);
    snprintf(p_vec, sizeof p_vec, "%s/twin-vectors.gguf", dir);
    write_copy(p_half, half, FORM_HALF);
    write_copy(p_twin, half, FORM_TWIN_F32);
    write_copy(p_vec, half, FORM_TWIN_VECTORS);

    int64_t V;
    const size_t n = (size_t)N_TOK * 512;
    float *orig = run(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), KN_NUM_F32, &V);
    assert_int_equal(V, 512);
    float *a = run(p_half, KN_NUM_F32, &V);
    float *b = run(p_twin, KN_NUM_F32, &V);
    double d_orig = mwt_max_abs_diff(a, orig, n);
    printf("    %s, f32 numerics: vs F32 twin max |diff| %.3g; vs the unrounded model %.3g\n",
           kn_type_name(half), mwt_max_abs_diff(a, b, n), d_orig);
    assert_true(d_orig > 0); /* the rounding changed the model */
    assert_memory_equal(a, b, n * sizeof(float));
    free(a);
    free(b);

    a = run(p_half, KN_NUM_Q8, &V);
    b = run(p_vec, KN_NUM_Q8, &V);
    float *twin = run(p_twin, KN_NUM_Q8, &V);
    printf("    %s, q8 numerics: vs vectors-only twin max |diff| %.3g; vs F32 twin %.3g\n",
           kn_type_name(half), mwt_max_abs_diff(a, b, n), mwt_max_abs_diff(a, twin, n));
    assert_memory_equal(a, b, n * sizeof(float));
    for (size_t i = 0; i < n; i++) assert_true(isfinite(a[i]));
    free(a);
    free(b);
    free(twin);
    free(orig);
    mwt_rmrf(dir);
    free(dir);
}

static void test_bf16(void **state) {
    (void)state;
    check_type(KN_BF16);
}

static void test_f16(void **state) {
    (void)state;
    check_type(KN_F16);
}

/* A vector in a type the kernels cannot dequantize is refused at load, naming the tensor. */
static void test_vector_types_refused(void **state) {
    (void)state;
    static const struct {
        const char *name;
        kn_type type;
        int64_t n;
        const char *needle;
    } cases[] = {
        {"blk.1.attn_sinks.weight", KN_I32, 4, "'blk.1.attn_sinks.weight' has type i32"},
        {"output_norm.weight", KN_Q4_1, 256, "'output_norm.weight' has type q4_1"},
    };
    char *dir = mwt_tmpdir("md_types");
    char path[512];
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        vx_gguf *g;
        mw_err e;
        vx_gguf_writer *w = start_copy(&g);
        static const uint8_t zeros[1024];
        for (size_t i = 0; i < vx_gguf_n_tensors(g); i++) {
            const vx_tensor *t = vx_gguf_tensor(g, i);
            bool alter = !strcmp(t->name, cases[c].name);
            int rc = alter ? vx_gguf_writer_add(w, t->name, cases[c].type, 1,
                                                (int64_t[]){cases[c].n, 1, 1, 1}, zeros, &e)
                           : vx_gguf_writer_add(w, t->name, t->type, t->n_dims, t->ne, t->data, &e);
            if (rc) fail_msg("%s", e.msg);
        }
        if (vx_gguf_writer_write(w, path, &e)) fail_msg("%s", e.msg);
        vx_gguf_writer_free(w);
        vx_gguf_close(g);

        vx_source *src;
        md_model *mod;
        if (vx_source_open(path, NULL, &src, &e)) fail_msg("%s", e.msg);
        assert_int_equal(md_model_load(src, &mod, &e), -1);
        printf("    error: %s\n", e.msg);
        if (!strstr(e.msg, cases[c].needle))
            fail_msg("expected '%s' in '%s'", cases[c].needle, e.msg);
        vx_source_close(src);
    }
    mwt_rmrf(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_f16),
        cmocka_unit_test(test_vector_types_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
