/* tests/integration/test_hf_kimi.c — Kimi Linear from its own Hugging Face checkpoint: one written
 * from llama.cpp's kimi-linear-tiny fixture (every convention the converter resolves undone: names,
 * conv taps [D, 1, K], A_log for ssm_a, kv_b_proj for attn_k_b / attn_v_b, per-expert w1 / w3 / w2,
 * two shards, a tiktoken tokenizer) extracts with `vindex extract`, verifies, slices, and serves
 * the fixture's prompt as its GGUF does, in process and over --loopback 2.
 *
 * With compressed-tensors MXFP4 experts (weight_packed + weight_scale) every expert's extent holds
 * the checkpoint's bytes as they are (mxfp4_ct: each matrix's packed bytes, then its scale bytes,
 * compared with the shards' bytes at the ranges the manifest names), the same values as the
 * GGUF's block_mxfp4 extents, and the logits are the GGUF twin's in process, over --loopback 2
 * and from `coordinator serve --loopback 2` (greedy completion tokens); with F32 experts the
 * logits match the fixture's F32-expert references.
 * An unknown quantization format, a missing tensor and a packed tensor outside the experts are
 * errors naming them. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kn.h"
#include "tests/support/mw_test.h"
#include "tests/support/mwt_http.h"
#include "tests/support/mwt_kimi_hf.h"
#include "vindex/vx_input.h"
#include "vindex/vx_synth.h"

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
    assert_non_null(strstr(json_string_value(json_object_get(t, "relayout")), "as stored"));
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

/* The manifest's provenance entry of stored tensor `name`. */
static const json_t *provenance_of(const json_t *m, const char *name) {
    const json_t *tensors = json_object_get(json_object_get(m, "provenance"), "tensors");
    for (size_t i = 0; i < json_array_size(tensors); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(tensors, i), "tensor")), name))
            return json_array_get(tensors, i);
    return NULL;
}

/* n bytes of file `path` at `off`. */
static unsigned char *file_bytes(const char *path, long off, size_t n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *b = malloc(n ? n : 1);
    assert_int_equal(fseek(f, off, SEEK_SET), 0);
    assert_int_equal(fread(b, 1, n, f), n);
    fclose(f);
    return b;
}

/* The manifest's ne of stored tensor `name` (mxfp4_ct: its type records the planar layout). */
static void planar_shape(const json_t *m, const char *name, int64_t *cols, int64_t *rows) {
    const json_t *tensors = json_object_get(m, "tensors");
    for (size_t i = 0; i < json_array_size(tensors); i++) {
        const json_t *t = json_array_get(tensors, i);
        if (strcmp(json_string_value(json_object_get(t, "name")), name)) continue;
        assert_string_equal(json_string_value(json_object_get(t, "type")), "mxfp4_ct");
        *cols = json_integer_value(json_array_get(json_object_get(t, "ne"), 0));
        *rows = json_integer_value(json_array_get(json_object_get(t, "ne"), 1));
        return;
    }
    fail_msg("%s: not in the manifest", name);
}

/* Every expert extent of MoE layer l: each matrix's bytes are its weight_packed bytes, then its
 * weight_scale bytes, as the shards hold them (the ranges the provenance names); and they are the
 * GGUF vindex's block_mxfp4 extent (gv, the same layout) written planar: the same values. */
static void check_extents(const char *ck, const char *vx, const char *gv, int l) {
    char p[700];
    snprintf(p, sizeof p, "%s/manifest.json", vx);
    json_t *m = json_load_file(p, 0, NULL);
    assert_non_null(m);
    const json_t *layers = json_object_get(m, "moe_layers"), *L = NULL;
    for (size_t i = 0; i < json_array_size(layers) && !L; i++)
        if (json_integer_value(json_object_get(json_array_get(layers, i), "layer")) == l)
            L = json_array_get(layers, i);
    assert_non_null(L);
    char gp[700];
    snprintf(gp, sizeof gp, "%s/%s", gv, json_string_value(json_object_get(L, "file")));
    snprintf(p, sizeof p, "%s/%s", vx, json_string_value(json_object_get(L, "file")));
    const json_t *parts = json_object_get(L, "parts"), *ext = json_object_get(L, "extents");
    const json_t *sources = json_object_get(json_object_get(m, "provenance"), "sources");
    int checked = 0;
    for (size_t k = 0; k < json_array_size(parts); k++) {
        const json_t *part = json_array_get(parts, k);
        const char *tn = json_string_value(json_object_get(part, "tensor"));
        const json_t *prov = provenance_of(m, tn), *ranges = json_object_get(prov, "ranges");
        assert_non_null(prov);
        const size_t n_exp = json_array_size(ext),
                     nb = (size_t)json_integer_value(json_object_get(part, "nbytes"));
        assert_int_equal(json_array_size(ranges), 2 * n_exp);
        int64_t cols = 0, rows = 0;
        planar_shape(m, tn, &cols, &rows);
        assert_int_equal((int64_t)nb, rows * cols / 32 * 17);
        for (size_t e = 0; e < n_exp; e++) {
            const json_t *x = json_array_get(ext, e);
            const long at = (long)(json_integer_value(json_object_get(x, "offset")) +
                                   json_integer_value(json_object_get(part, "offset")));
            unsigned char *got = file_bytes(p, at, nb), *want = malloc(nb);
            size_t w = 0;
            for (int h = 0; h < 2; h++) { /* the packed range, then the scale range */
                const json_t *rg = json_array_get(
                    ranges,
                    (size_t)h * n_exp + (size_t)json_integer_value(json_object_get(x, "expert")));
                const json_t *src = json_array_get(
                    sources, (size_t)json_integer_value(json_object_get(rg, "file")));
                char sp[800];
                snprintf(sp, sizeof sp, "%s/%s", ck,
                         json_string_value(json_object_get(src, "name")));
                const size_t rn = (size_t)json_integer_value(json_object_get(rg, "nbytes"));
                assert_true(w + rn <= nb);
                unsigned char *b =
                    file_bytes(sp, (long)json_integer_value(json_object_get(rg, "offset")), rn);
                memcpy(want + w, b, rn);
                w += rn;
                free(b);
            }
            assert_int_equal(w, nb);
            assert_memory_equal(got, want, nb);
            unsigned char *blocks = file_bytes(gp, at, nb);
            kn_mxfp4_ct_from_blocks(blocks, rows, cols, want);
            assert_memory_equal(got, want, nb);
            free(got), free(want), free(blocks);
            checked++;
        }
    }
    assert_int_equal(checked, 3 * (int)json_array_size(ext)); /* gate, up, down */
    json_decref(m);
}

/* `coordinator serve --loopback 2` on the HF vindex answers a greedy completion of the prompt
 * with the tokens `coordinator generate` gives on the GGUF twin. */
static void check_serve(const char *gguf, const char *vx, const char *toks) {
    char nb[16];
    snprintf(nb, sizeof nb, "%d", N_GEN);
    const char *argv[] = {
        mwt_bin("coordinator"), "generate", "--model",   gguf, "--tokens", toks, "--max-tokens", nb,
        "--numerics",           "f32",      "--threads", "2",  NULL};
    char *out = NULL;
    assert_int_equal(mwt_run((char *const *)argv, &out, NULL, 300000), 0);
    int32_t ref[N_GEN];
    char *p = strstr(out, "tokens:");
    assert_non_null(p);
    p += 7;
    for (int k = 0; k < N_GEN; k++) {
        char *end;
        ref[k] = (int32_t)strtol(p, &end, 10);
        assert_true(end != p);
        p = end;
    }
    free(out);
    mwt_server srv;
    const char *extra[] = {"--loopback", "2", "--numerics", "f32", "--threads", "2", NULL};
    assert_int_equal(mwt_serve_start(&srv, vx, extra, 300000), 0);
    char body[4096], ids_s[3000];
    snprintf(ids_s, sizeof ids_s, "%s", toks);
    for (size_t n = strlen(ids_s); n && (ids_s[n - 1] == ',' || ids_s[n - 1] == '\n');)
        ids_s[--n] = '\0'; /* the prompt file's last separator */
    snprintf(body, sizeof body,
             "{\"model\":\"hf\",\"prompt\":[%s],\"max_tokens\":%d,\"temperature\":0,"
             "\"return_token_ids\":true}",
             ids_s, N_GEN);
    mwt_resp r;
    assert_int_equal(mwt_http_request(srv.port, "POST", "/v1/completions", body, &r), 0);
    if (r.status != 200) fail_msg("serve --loopback 2: %d %s", r.status, r.body ? r.body : "");
    json_t *j = json_loads(r.body, 0, NULL);
    json_t *ids = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "token_ids");
    assert_int_equal(json_array_size(ids), N_GEN);
    for (int i = 0; i < N_GEN; i++)
        assert_int_equal(json_integer_value(json_array_get(ids, i)), ref[i]);
    json_decref(j);
    mwt_resp_free(&r);
    assert_int_equal(mwt_serve_stop(&srv, 60000), 0);
}

static void check_packed(const family *fam) {
    char *dir = mwt_tmpdir("hfkimi"), ck[600], vx[600], gv[600], sl[600], a[700];
    snprintf(ck, sizeof ck, "%s/Kimi-tiny", dir);
    snprintf(vx, sizeof vx, "%s/hf.vindex", dir);
    snprintf(gv, sizeof gv, "%s/gguf.vindex", dir);
    snprintf(sl, sizeof sl, "%s/slice.vindex", dir);
    const char *gguf = fx(fam, "model.gguf");
    assert_int_equal(mwt_kimi_hf(gguf, ck, true, NULL), 0);
    vindex((const char *[]){"extract", ck, vx, "--strict", NULL});
    vindex((const char *[]){"verify", vx, NULL});
    vindex((const char *[]){"extract", gguf, gv, NULL});
    /* the experts: the checkpoint's bytes, extent for extent; the GGUF's values */
    for (int l = 1; l <= 3; l++) check_extents(ck, vx, gv, l);
    /* the checkpoint written as a GGUF holds the fixture GGUF's block_mxfp4 experts, byte for
     * byte (the planar planes repacked as llama.cpp's converter does) */
    char rg[600], rv[600];
    snprintf(rg, sizeof rg, "%s/rewritten.gguf", dir);
    snprintf(rv, sizeof rv, "%s/rewritten.vindex", dir);
    vx_input *in;
    mw_err e;
    if (vx_input_open(ck, &in, &e) || vx_input_write_gguf(in, rg, NULL, NULL, &e))
        fail_msg("%s", e.msg);
    vx_input_close(in);
    vindex((const char *[]){"extract", rg, rv, NULL});
    for (int l = 1; l <= 3; l++) {
        char x[700], y[700];
        snprintf(x, sizeof x, "%s/experts-%03d.bin", rv, l);
        snprintf(y, sizeof y, "%s/experts-%03d.bin", gv, l);
        size_t lx, ly;
        unsigned char *bx = mwt_read_file(x, &lx), *by = mwt_read_file(y, &ly);
        assert_non_null(bx);
        assert_non_null(by);
        assert_int_equal(lx, ly);
        assert_memory_equal(bx, by, lx);
        free(bx), free(by);
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
    check_serve(gguf, vx, toks);
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
