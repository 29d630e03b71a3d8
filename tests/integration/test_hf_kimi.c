/* tests/integration/test_hf_kimi.c — Kimi Linear from its own Hugging Face checkpoint: one written
 * from llama.cpp's kimi-linear-tiny fixture (every convention the converter resolves undone: names,
 * conv taps [D, 1, K], A_log for ssm_a, kv_b_proj for attn_k_b / attn_v_b, per-expert w1 / w3 / w2,
 * two shards, a tiktoken tokenizer) extracts with `vindex extract`, verifies, slices, and serves
 * the fixture's prompt as its GGUF does, in process and over --loopback 2.
 *
 * With compressed-tensors MXFP4 experts (weight_packed + weight_scale) the extents are the
 * GGUF's MXFP4 bytes exactly (the experts files of both vindexes are equal byte for byte, no
 * float in between), and the manifest names each expert's packed and scale tensors with their
 * shard and byte range; with F32 experts the logits match the fixture's F32-expert references.
 * An unknown quantization format, a missing tensor and a packed tensor outside the experts are
 * errors naming them. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/mw_test.h"
#include "tests/support/mwt_kimi_hf.h"

#define VOCAB 512
#define N_GEN 4

/* The fixture and the sizes of its layer-1 gate experts' packed and scale tensors. */
typedef struct family {
    const char *dir; /* "llamacpp/kimi-linear-tiny/" */
    const char *prefix;
    int64_t packed_bytes, scale_bytes;
} family;

static const family linear = {"llamacpp/kimi-linear-tiny/", "", 128 * 128, 128 * 8};
/* K3's experts run at the latent width (128) with FF 192 */
static const family k3 = {"llamacpp/kimi-k3-tiny/", "language_model.", 192 * 64, 192 * 4};

static const char *fx(const family *f, const char *file) {
    static char rel[2][256];
    static int k;
    k ^= 1;
    snprintf(rel[k], sizeof rel[k], "%s%s", f->dir, file);
    return mwt_fixture(rel[k]);
}

static int n_tok;

static char *prompt(const family *f) {
    char *t = mwt_read_file(fx(f, "tokens.txt"), NULL);
    assert_non_null(t);
    n_tok = 0;
    for (char *p = t; *p; p++)
        if (*p == ' ' || *p == '\n') *p = ',', n_tok += p[1] != '\0';
    n_tok += 1;
    return t;
}

static const char *tool(const char *name) {
    static char path[2][512];
    static int k;
    const char *rel = getenv("MW_REL_BIN");
    k ^= 1;
    snprintf(path[k], sizeof path[k], "%s", mwt_bin(name));
    if (rel) snprintf(path[k], sizeof path[k], "%s/%s", rel, name);
    return path[k];
}

/* Runs argv; returns the exit status, stderr in *err (may be NULL). */
static int run(const char *const *argv, char **err) {
    char *e = NULL;
    int st = mwt_run((char *const *)argv, NULL, &e, 300000);
    if (err)
        *err = e;
    else
        free(e);
    return st;
}

static void vindex(const char *const *args) {
    const char *argv[16] = {tool("vindex")};
    int n = 1;
    for (; *args; args++) argv[n++] = *args;
    argv[n] = NULL;
    char *err;
    if (run(argv, &err)) fail_msg("vindex %s: %s", argv[1], err);
    free(err);
}

/* `coordinator generate` with --numerics f32 and the logits written; extra arguments after */
static float *generate(const char *model, const char *toks, const char *const *extra) {
    char *dir = mwt_tmpdir("hfkimi"), lp[600];
    snprintf(lp, sizeof lp, "%s/logits.bin", dir);
    const char *argv[24] = {mwt_bin("coordinator"),
                            "generate",
                            "--model",
                            model,
                            "--tokens",
                            toks,
                            "--max-tokens",
                            "4",
                            "--numerics",
                            "f32",
                            "--logits-out",
                            lp,
                            "--threads",
                            "2"};
    int n = 14;
    for (; extra && *extra; extra++) argv[n++] = *extra;
    argv[n] = NULL;
    char *err;
    if (run(argv, &err)) fail_msg("generate %s: %s", model, err);
    free(err);
    size_t len;
    float *l = mwt_read_file(lp, &len);
    assert_int_equal(len, (size_t)(n_tok + N_GEN - 1) * VOCAB * sizeof(float));
    mwt_rmrf(dir);
    free(dir);
    return l;
}

static void same_file(const char *a, const char *b) {
    size_t la, lb;
    unsigned char *x = mwt_read_file(a, &la), *y = mwt_read_file(b, &lb);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(la, lb);
    assert_memory_equal(x, y, la);
    free(x), free(y);
}

/* The manifest's provenance of layer 1's gate experts: expert e's packed and scale tensors with
 * their shard and byte ranges; K3's vision tower reported as dropped. */
static void check_provenance(const family *fam, const char *vx) {
    char p[600], want[200];
    snprintf(p, sizeof p, "%s/manifest.json", vx);
    json_error_t je;
    json_t *m = json_load_file(p, 0, &je);
    assert_non_null(m);
    json_t *prov = json_object_get(m, "provenance"), *tensors = json_object_get(prov, "tensors");
    const json_t *t = NULL;
    for (size_t i = 0; i < json_array_size(tensors) && !t; i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(tensors, i), "tensor")),
                    "blk.1.ffn_gate_exps.weight"))
            t = json_array_get(tensors, i);
    assert_non_null(t);
    assert_non_null(strstr(json_string_value(json_object_get(t, "relayout")), "bits moved"));
    const json_t *ranges = json_object_get(t, "ranges");
    assert_int_equal(json_array_size(ranges), 32); /* 16 packed, 16 scales */
    const json_t *r3 = json_array_get(ranges, 3), *s3 = json_array_get(ranges, 16 + 3);
    snprintf(want, sizeof want, "%smodel.layers.1.block_sparse_moe.experts.3.w1.weight_packed",
             fam->prefix);
    assert_string_equal(json_string_value(json_object_get(r3, "tensor")), want);
    snprintf(want, sizeof want, "%smodel.layers.1.block_sparse_moe.experts.3.w1.weight_scale",
             fam->prefix);
    assert_string_equal(json_string_value(json_object_get(s3, "tensor")), want);
    assert_int_equal(json_integer_value(json_object_get(r3, "nbytes")), fam->packed_bytes);
    assert_int_equal(json_integer_value(json_object_get(s3, "nbytes")), fam->scale_bytes);
    const json_t *src = json_array_get(json_object_get(prov, "sources"),
                                       (size_t)json_integer_value(json_object_get(r3, "file")));
    assert_string_equal(json_string_value(json_object_get(src, "name")),
                        "model-00001-of-00002.safetensors");
    const json_t *dropped = json_object_get(prov, "dropped");
    size_t vision = 0;
    for (size_t i = 0; i < json_array_size(dropped); i++)
        vision += strstr(json_string_value(json_object_get(json_array_get(dropped, i), "rule")),
                         "the text model is served") != NULL;
    assert_int_equal(vision, *fam->prefix ? 2 : 0);
    assert_int_equal(json_array_size(json_object_get(prov, "unrecognised")), 0);
    json_decref(m);
}

static void check_packed(const family *fam) {
    char *dir = mwt_tmpdir("hfkimi"), ck[600], vx[600], gv[600], sl[600], a[700], b[700];
    snprintf(ck, sizeof ck, "%s/Kimi-tiny", dir);
    snprintf(vx, sizeof vx, "%s/hf.vindex", dir);
    snprintf(gv, sizeof gv, "%s/gguf.vindex", dir);
    snprintf(sl, sizeof sl, "%s/slice.vindex", dir);
    const char *gguf = fx(fam, "model.gguf");
    assert_int_equal(mwt_kimi_hf(gguf, ck, true, NULL), 0);
    vindex((const char *[]){"extract", ck, vx, "--strict", NULL});
    vindex((const char *[]){"verify", vx, NULL});
    vindex((const char *[]){"extract", gguf, gv, NULL});
    /* the experts: the GGUF's MXFP4 bytes, extent for extent */
    for (int l = 1; l <= 3; l++) {
        snprintf(a, sizeof a, "%s/experts-%03d.bin", vx, l);
        snprintf(b, sizeof b, "%s/experts-%03d.bin", gv, l);
        same_file(a, b);
    }
    check_provenance(fam, vx);
    /* the tokenizer is the checkpoint's tiktoken one */
    snprintf(a, sizeof a, "%s/tiktoken.model", vx);
    assert_int_equal(access(a, F_OK), 0);
    /* served as the GGUF is: A_log's round trip through exp and log leaves the last bit */
    char *toks = prompt(fam);
    const size_t n = (size_t)(n_tok + N_GEN - 1) * VOCAB;
    float *ref = generate(gguf, toks, NULL);
    float *got = generate(vx, toks, NULL);
    assert_true(mwt_close("hf vs gguf", got, ref, n, 1e-4, 0) < 0);
    /* over two loopback nodes, exact mode: the same bits as in process */
    float *net = generate(vx, toks, (const char *[]){"--loopback", "2", "--exact", NULL});
    assert_memory_equal(net, got, n * sizeof *net);
    free(net);
    /* a slice holding half the experts verifies */
    vindex((const char *[]){"slice", vx, "--experts", "1-3:0-7", sl, NULL});
    vindex((const char *[]){"verify", sl, NULL});
    free(ref), free(got), free(toks);
    mwt_rmrf(dir);
    free(dir);
}

static void test_linear_packed(void **state) {
    (void)state;
    check_packed(&linear);
}

static void test_k3_packed(void **state) {
    (void)state;
    check_packed(&k3);
}

/* F32 experts (dequantized): the fixture's F32-expert logits, f32 numerics, 1e-4 */
static void check_f32(const family *fam) {
    char *dir = mwt_tmpdir("hfkimi"), ck[600], vx[600];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(vx, sizeof vx, "%s/hf.vindex", dir);
    assert_int_equal(mwt_kimi_hf(fx(fam, "model.gguf"), ck, false, NULL), 0);
    vindex((const char *[]){"extract", ck, vx, "--strict", NULL});
    char *toks = prompt(fam);
    float *got = generate(vx, toks, NULL);
    size_t len;
    float *ref = mwt_read_file(fx(fam, "logits_prefill_f32experts.bin"), &len);
    assert_int_equal(len, (size_t)n_tok * VOCAB * sizeof(float));
    assert_true(mwt_close("prefill", got, ref, (size_t)n_tok * VOCAB, 1e-4, 0) < 0);
    free(ref), free(got), free(toks);
    mwt_rmrf(dir);
    free(dir);
}

static void test_linear_f32(void **state) {
    (void)state;
    check_f32(&linear);
}

static void test_k3_f32(void **state) {
    (void)state;
    check_f32(&k3);
}

static void expect_extract_error(const char *ck, const char *out, const char *want) {
    const char *argv[] = {tool("vindex"), "extract", ck, out, NULL};
    char *err;
    assert_int_not_equal(run(argv, &err), 0);
    if (!strstr(err, want)) fail_msg("'%s' does not say '%s'", err, want);
    free(err);
}

/* Edits config.json's text: the first `from` becomes `to`. */
static void edit(const char *ck, const char *file, const char *from, const char *to) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", ck, file);
    size_t len;
    char *s = mwt_read_file(p, &len), *at = strstr(s, from);
    assert_non_null(at);
    char *o = malloc(len + strlen(to) + 1);
    size_t k = (size_t)(at - s);
    memcpy(o, s, k);
    strcpy(o + k, to);
    strcat(o, at + strlen(from));
    assert_int_equal(mwt_write_file(p, o, strlen(o)), 0);
    free(s), free(o);
}

static void test_errors(void **state) {
    (void)state;
    char *dir = mwt_tmpdir("hfkimi"), ck[600], out[600];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(out, sizeof out, "%s/out.vindex", dir);
    const char *gguf = fx(&linear, "model.gguf");
    assert_int_equal(mwt_kimi_hf(gguf, ck, true, NULL), 0);
    edit(ck, "config.json", "\"mxfp4-pack-quantized\"", "\"nvfp4-pack-quantized\"");
    expect_extract_error(ck, out, "'quantization_config.format' is \"nvfp4-pack-quantized\"");
    static const struct {
        const char *skip, *want;
    } missing[] = {
        {"model.layers.2.self_attn.A_log",
         "needs 'model.layers.2.self_attn.A_log' for blk.2.ssm_a"},
        {"model.layers.1.block_sparse_moe.experts.5.w3.weight_scale",
         "'model.layers.1.block_sparse_moe.experts.5.w3.weight_scale' is missing"},
        {"model.layers.3.self_attn.kv_b_proj.weight",
         "'model.layers.3.self_attn.kv_b_proj.weight'"},
    };
    for (size_t i = 0; i < sizeof missing / sizeof *missing; i++) {
        mwt_rmrf(ck);
        assert_int_equal(mwt_kimi_hf(gguf, ck, true, missing[i].skip), 0);
        expect_extract_error(ck, out, missing[i].want);
    }
    mwt_rmrf(dir);
    free(dir);
}

/* K3's own errors: a residual score's projection without its norm, a text_config missing */
static void test_k3_errors(void **state) {
    (void)state;
    char *dir = mwt_tmpdir("hfkimi"), ck[600], out[600];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(out, sizeof out, "%s/out.vindex", dir);
    const char *gguf = fx(&k3, "model.gguf");
    assert_int_equal(
        mwt_kimi_hf(gguf, ck, true, "language_model.model.layers.2.mlp_res_norm.weight"), 0);
    expect_extract_error(ck, out, "'language_model.model.layers.2.mlp_res_norm.weight' is missing");
    mwt_rmrf(ck);
    assert_int_equal(mwt_kimi_hf(gguf, ck, true, NULL), 0);
    edit(ck, "config.json", "\"text_config\"", "\"txt_config\"");
    expect_extract_error(ck, out, "key 'txt_config' is not known to family kimi-k3");
    mwt_rmrf(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_packed), cmocka_unit_test(test_linear_f32),
        cmocka_unit_test(test_k3_packed),     cmocka_unit_test(test_k3_f32),
        cmocka_unit_test(test_errors),        cmocka_unit_test(test_k3_errors),
    };
    return cmocka_run_group_tests_name("hf_kimi", tests, NULL, NULL);
}
