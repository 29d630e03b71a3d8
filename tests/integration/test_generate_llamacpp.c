/* tests/integration/test_generate_llamacpp.c — `coordinator generate` (the ASan build) on the
 * llama.cpp fixture models with their prompts (40 tokens; 80 for the Kimi models): --numerics f32
 * against the F32-expert references (1e-4, same greedy continuation), --numerics q8 against the
 * quantized references (5e-2, same argmax at every row, same continuation); seeded sampling; error
 * exits. */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_sampler.h"

static int N_TOK; /* the prompt's length: prompt() sets it */
#define N_GEN 16
#define VOCAB 512

typedef struct run {
    int status;
    char *out, *err;
    float *logits; /* [N_TOK + N_GEN - 1][VOCAB] when asked for */
    int32_t tokens[N_GEN];
    int n_tokens;
} run;

static char *prompt(const char *model) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/tokens.txt", model);
    char *t = mwt_read_file(mwt_fixture(rel), NULL);
    assert_non_null(t);
    N_TOK = 0;
    for (char *p = t; *p; p++)
        if (*p == ' ' || *p == '\n') *p = ',', N_TOK += p[1] != '\0';
    N_TOK += 1;
    return t;
}

/* Runs `coordinator generate` with extra arguments (NULL-terminated). */
static void generate(run *r, const char *model_path, const char *tokens, bool logits,
                     const char *const *extra) {
    memset(r, 0, sizeof *r);
    char *dir = mwt_tmpdir("generate");
    char lpath[512];
    snprintf(lpath, sizeof lpath, "%s/logits.bin", dir);
    const char *argv[32] = {
        mwt_bin("coordinator"), "generate", "--model",   model_path, "--tokens", tokens,
        "--max-tokens",         "16",       "--threads", "2"};
    int n = 10;
    if (logits) {
        argv[n++] = "--logits-out";
        argv[n++] = lpath;
    }
    for (; extra && *extra; extra++) argv[n++] = *extra;
    argv[n] = NULL;
    r->status = mwt_run((char *const *)argv, &r->out, &r->err, 300000);
    if (r->status == 0) {
        const char *line = strstr(r->out, "tokens:");
        assert_non_null(line);
        char *p = (char *)line + 7, *end;
        for (long v; (v = strtol(p, &end, 10)), end != p; p = end)
            r->tokens[r->n_tokens++] = (int32_t)v;
        if (logits) {
            size_t len;
            r->logits = mwt_read_file(lpath, &len);
            assert_non_null(r->logits);
            assert_int_equal(len, (size_t)(N_TOK + N_GEN - 1) * VOCAB * sizeof(float));
        }
    }
    mwt_rmrf(dir);
    free(dir);
}

static void free_run(run *r) {
    free(r->out);
    free(r->err);
    free(r->logits);
}

static float *ref(const char *model, const char *file, size_t rows) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/%s", model, file);
    size_t len;
    float *f = mwt_read_file(mwt_fixture(rel), &len);
    assert_non_null(f);
    assert_int_equal(len, rows * VOCAB * sizeof(float));
    return f;
}

static void continuation(const char *model, const char *section, int32_t *out) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/gen.json", model);
    json_error_t je;
    json_t *g = json_load_file(mwt_fixture(rel), 0, &je);
    if (!g) fail_msg("%s: %s", rel, je.text);
    json_t *c = section ? json_object_get(json_object_get(g, section), "continuation")
                        : json_object_get(g, "continuation");
    assert_int_equal(json_array_size(c), N_GEN);
    for (int i = 0; i < N_GEN; i++) out[i] = (int32_t)json_integer_value(json_array_get(c, i));
    json_decref(g);
}

/* Compares rows [first, first + n) of our logits with a reference file; returns the max diff. */
static double compare(const char *model, const char *what, const float *ours, const float *theirs,
                      size_t n_rows, double tol, bool same_argmax) {
    double d = mwt_max_abs_diff(ours, theirs, n_rows * VOCAB);
    printf("    %-14s %-32s max |diff| %.3g (tolerance %g)\n", model, what, d, tol);
    if (d > tol) fail_msg("%s %s: max |diff| %.3g > %g", model, what, d, tol);
    for (size_t r = 0; same_argmax && r < n_rows; r++)
        if (md_argmax(ours + r * VOCAB, VOCAB) != md_argmax(theirs + r * VOCAB, VOCAB))
            fail_msg("%s %s: row %zu chose %d, llama.cpp %d", model, what, r,
                     md_argmax(ours + r * VOCAB, VOCAB), md_argmax(theirs + r * VOCAB, VOCAB));
    return d;
}

static const char *model_path(const char *model) {
    static char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/model.gguf", model);
    return mwt_fixture(rel);
}

static void check_f32(const char *model) {
    char *toks = prompt(model);
    run r;
    const char *extra[] = {"--numerics", "f32", NULL};
    generate(&r, model_path(model), toks, true, extra);
    if (r.status) fail_msg("exit %d: %s", r.status, r.err);
    float *pre = ref(model, "logits_prefill_f32experts.bin", N_TOK);
    float *gen = ref(model, "logits_gen_f32experts.bin", N_GEN);
    compare(model, "f32 prefill", r.logits, pre, N_TOK, 1e-4, false);
    compare(model, "f32 greedy continuation", r.logits + (N_TOK - 1) * VOCAB, gen, N_GEN, 1e-4,
            false);
    int32_t want[N_GEN];
    continuation(model, "f32experts", want);
    assert_int_equal(r.n_tokens, N_GEN);
    assert_memory_equal(r.tokens, want, sizeof want);
    free(pre);
    free(gen);
    free_run(&r);
    free(toks);
}

/* drift: how far llama.cpp's own quantized decode may sit from our prefill (its prefill and
 * decode part by up to 8.1e-2 on kimi-k3-tiny, an int8 rounding boundary carried in the state) */
static void check_q8_within(const char *model, double drift) {
    char *toks = prompt(model);
    run r;
    const char *extra[] = {"--numerics", "q8", NULL};
    generate(&r, model_path(model), toks, true, extra);
    if (r.status) fail_msg("exit %d: %s", r.status, r.err);
    float *pre = ref(model, "logits_prefill.bin", N_TOK);
    float *dec = ref(model, "logits_decode.bin", N_TOK);
    float *gen = ref(model, "logits_gen.bin", N_GEN);
    compare(model, "q8 prefill", r.logits, pre, N_TOK, 5e-2, true);
    compare(model, "q8 vs llama.cpp decode", r.logits, dec, N_TOK, drift, true);
    compare(model, "q8 greedy continuation", r.logits + (N_TOK - 1) * VOCAB, gen, N_GEN, 5e-2,
            true);
    int32_t want[N_GEN];
    continuation(model, NULL, want);
    assert_int_equal(r.n_tokens, N_GEN);
    assert_memory_equal(r.tokens, want, sizeof want);
    free(pre);
    free(dec);
    free(gen);

    /* weights copied onto huge pages: the same bits */
    run pinned;
    const char *pin[] = {"--numerics", "q8", "--pin", NULL};
    generate(&pinned, model_path(model), toks, true, pin);
    if (pinned.status) fail_msg("--pin: exit %d: %s", pinned.status, pinned.err);
    assert_memory_equal(pinned.logits, r.logits,
                        (size_t)(N_TOK + N_GEN - 1) * VOCAB * sizeof(float));
    free_run(&pinned);
    free_run(&r);

    /* q8 is the default, and the same tokens come without --logits-out */
    generate(&r, model_path(model), toks, false, NULL);
    assert_int_equal(r.status, 0);
    assert_memory_equal(r.tokens, want, sizeof want);
    free_run(&r);
    free(toks);
}

static void check_q8(const char *model) {
    check_q8_within(model, 5e-2);
}

static void test_gptoss_f32(void **state) {
    (void)state;
    check_f32("gpt-oss-tiny");
}
static void test_gptoss_q8(void **state) {
    (void)state;
    check_q8("gpt-oss-tiny");
}
static void test_qwen3moe_f32(void **state) {
    (void)state;
    check_f32("qwen3moe-tiny");
}
static void test_qwen3moe_q8(void **state) {
    (void)state;
    check_q8("qwen3moe-tiny");
}

static void test_deepseek2_f32(void **state) {
    (void)state;
    check_f32("deepseek2-tiny");
}
static void test_deepseek2_q8(void **state) {
    (void)state;
    check_q8("deepseek2-tiny");
}

static void test_kimi_linear_f32(void **state) {
    (void)state;
    check_f32("kimi-linear-tiny");
}
static void test_kimi_linear_q8(void **state) {
    (void)state;
    check_q8("kimi-linear-tiny");
}

static void test_kimi_k3_f32(void **state) {
    (void)state;
    check_f32("kimi-k3-tiny");
}
static void test_kimi_k3_q8(void **state) {
    (void)state;
    check_q8_within("kimi-k3-tiny", 0.1);
}

static void test_sampling_is_seeded(void **state) {
    (void)state;
    char *toks = prompt("qwen3moe-tiny");
    run a, b, c;
    const char *s1[] = {"--temperature", "0.9", "--top-p", "0.95", "--seed", "5", NULL};
    const char *s2[] = {"--temperature", "0.9", "--top-p", "0.95", "--seed", "6", NULL};
    generate(&a, model_path("qwen3moe-tiny"), toks, false, s1);
    generate(&b, model_path("qwen3moe-tiny"), toks, false, s1);
    generate(&c, model_path("qwen3moe-tiny"), toks, false, s2);
    assert_int_equal(a.status | b.status | c.status, 0);
    assert_memory_equal(a.tokens, b.tokens, sizeof a.tokens);
    assert_memory_not_equal(a.tokens, c.tokens, sizeof a.tokens);
    free_run(&a);
    free_run(&b);
    free_run(&c);
    free(toks);
}

static void expect_failure(const char *const *argv, const char *needle) {
    char *out = NULL, *err = NULL;
    int st = mwt_run((char *const *)argv, &out, &err, 60000);
    if (st == 0 || st >= 128 || !strstr(err, needle))
        fail_msg("expected a clean failure mentioning '%s'; exit %d, stderr: %s", needle, st, err);
    assert_true(out == NULL || strstr(out, "tokens:") == NULL);
    free(out);
    free(err);
}

static void test_errors(void **state) {
    (void)state;
    const char *bin = mwt_bin("coordinator");
    const char *m = model_path("gpt-oss-tiny");
    char m_copy[512];
    snprintf(m_copy, sizeof m_copy, "%s", m);
    const char *missing[] = {bin,        "generate", "--model",      "/nonexistent/model.gguf",
                             "--tokens", "1,2",      "--max-tokens", "2",
                             NULL};
    expect_failure(missing, "/nonexistent/model.gguf");
    const char *range[] = {bin,       "generate",     "--model", m_copy, "--tokens",
                           "1,512,3", "--max-tokens", "2",       NULL};
    expect_failure(range, "token id 512");
    const char *bad_opt[] = {bin, "generate",     "--model", m_copy,         "--tokens",
                             "1", "--max-tokens", "2",       "--frobnicate", NULL};
    expect_failure(bad_opt, "unknown option '--frobnicate'");
    const char *bad_num[] = {bin, "generate",   "--model", m_copy, "--tokens", "1", "--max-tokens",
                             "2", "--numerics", "f16",     NULL};
    expect_failure(bad_num, "--numerics");
    const char *bad_tok[] = {bin,   "generate",     "--model", m_copy, "--tokens",
                             "1,x", "--max-tokens", "2",       NULL};
    expect_failure(bad_tok, "--tokens");
    const char *no_model[] = {bin, "generate", "--tokens", "1", "--max-tokens", "2", NULL};
    expect_failure(no_model, "--model is required");
    const char *bad_backend[] = {bin, "generate",     "--model", m_copy,      "--tokens",
                                 "1", "--max-tokens", "2",       "--experts", "carrier-pigeon",
                                 NULL};
    expect_failure(bad_backend, "unknown backend 'carrier-pigeon'");
    const char *no_value[] = {bin,        "generate", "--model",      m_copy,
                              "--tokens", "1",        "--max-tokens", NULL};
    expect_failure(no_value, "--max-tokens needs a value");
    const char *threads0[] = {
        bin, "generate", "--model", m_copy, "--tokens=1,2", "--max-tokens=2", "--threads=0", NULL};
    expect_failure(threads0, "--threads");
    const char *affinity[] = {
        bin, "generate",        "--model",   m_copy, "--tokens", "1", "--max-tokens",
        "2", "--node-affinity", "sometimes", NULL};
    expect_failure(affinity, "--node-affinity: 'sometimes' is not on or off");
    const char *top_p[] = {bin, "generate", "--model", m_copy, "--tokens", "1", "--max-tokens",
                           "2", "--top-p",  "1.5",     NULL};
    expect_failure(top_p, "--top-p");
    const char *temp[] = {bin, "generate",      "--model", m_copy, "--tokens", "1", "--max-tokens",
                          "2", "--temperature", "-1",      NULL};
    expect_failure(temp, "--temperature");
    const char *ctx[] = {bin, "generate", "--model", m_copy, "--tokens", "1,2,3", "--max-tokens",
                         "4", "--ctx",    "5",       NULL};
    expect_failure(ctx, "need 6 positions");
    /* a file that is not a model at all */
    const char *not_model[] = {
        bin,        "generate", "--model",      mwt_fixture("llamacpp/README.md"),
        "--tokens", "1",        "--max-tokens", "2",
        NULL};
    expect_failure(not_model, "README.md");
}

static void test_unknown_family(void **state) {
    (void)state;
    /* a copy of the fixture renamed to an architecture no family knows (keys included, so the
     * file itself stays well-formed) */
    size_t len;
    unsigned char *g = mwt_read_file(model_path("qwen3moe-tiny"), &len);
    assert_non_null(g);
    int renamed = 0;
    for (unsigned char *p = g; (p = memmem(p, len - (size_t)(p - g), "qwen3moe", 8)); p += 8)
        memcpy(p, "qwen9zzz", 8), renamed++;
    assert_true(renamed > 10);
    char *dir = mwt_tmpdir("family");
    char path[512];
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    assert_int_equal(mwt_write_file(path, g, len), 0);
    const char *argv[] = {mwt_bin("coordinator"), "generate", "--model", path, "--tokens", "1",
                          "--max-tokens",         "2",        NULL};
    expect_failure(argv, "unknown model family 'qwen9zzz'");
    mwt_rmrf(dir);
    free(dir);
    free(g);
}

/* Runs the same prompt on a GGUF file and on the vindex made from it; returns when both gave the
 * same tokens and bit-identical logits. */
static void same_on_both(const char *gguf, const char *vindex, const char *toks,
                         const char *numerics) {
    const char *extra[] = {"--numerics", numerics, NULL};
    run a, b;
    generate(&a, gguf, toks, true, extra);
    generate(&b, vindex, toks, true, extra);
    if (a.status || b.status) fail_msg("exit %d / %d: %s %s", a.status, b.status, a.err, b.err);
    assert_memory_equal(a.tokens, b.tokens, sizeof a.tokens);
    assert_memory_equal(a.logits, b.logits, (size_t)(N_TOK + N_GEN - 1) * VOCAB * sizeof(float));
    free_run(&a);
    free_run(&b);
}

/* The vindex tool prepares inputs here; its optimised build ($MW_REL_BIN) is used when there is
 * one, since the program under test is the coordinator. */
static void vindex_cmd(const char *const *args) {
    char tool[512];
    const char *rel = getenv("MW_REL_BIN");
    snprintf(tool, sizeof tool, "%s", mwt_bin("vindex"));
    if (rel) snprintf(tool, sizeof tool, "%s/vindex", rel);
    const char *argv[40] = {tool};
    int n = 1;
    for (; *args; args++) argv[n++] = *args;
    argv[n] = NULL;
    char *err = NULL;
    int st = mwt_run((char *const *)argv, NULL, &err, 300000);
    if (st) fail_msg("vindex %s: exit %d: %s", argv[1], st, err);
    free(err);
}

/* --model takes a vindex directory as well: the fixtures extracted give the same bits. */
static void test_vindex_directory(void **state) {
    (void)state;
    char *dir = mwt_tmpdir("genvx");
    char vx[512];
    snprintf(vx, sizeof vx, "%s/gpt-oss.vindex", dir);
    const char *args[] = {"extract", model_path("gpt-oss-tiny"), vx, NULL};
    vindex_cmd(args);
    char *toks = prompt("gpt-oss-tiny");
    same_on_both(model_path("gpt-oss-tiny"), vx, toks, "q8");
    same_on_both(model_path("gpt-oss-tiny"), vx, toks, "f32");
    free(toks);
    /* deepseek2: a dense leading layer without experts, 3-D attn_k_b / attn_v_b, shared experts
     * and the selection bias all live in dense.bin */
    snprintf(vx, sizeof vx, "%s/deepseek2.vindex", dir);
    const char *ds[] = {"extract", model_path("deepseek2-tiny"), vx, NULL};
    vindex_cmd(ds);
    toks = prompt("deepseek2-tiny");
    same_on_both(model_path("deepseek2-tiny"), vx, toks, "q8");
    free(toks);
    /* kimi-linear: KDA layers' convolutions and per-head vectors (3-D and 2-D), an attention
     * layer without KV heads of its own in the metadata array */
    snprintf(vx, sizeof vx, "%s/kimi-linear.vindex", dir);
    const char *kl[] = {"extract", model_path("kimi-linear-tiny"), vx, NULL};
    vindex_cmd(kl);
    toks = prompt("kimi-linear-tiny");
    same_on_both(model_path("kimi-linear-tiny"), vx, toks, "f32");
    free(toks);
    /* kimi-k3: experts at the latent width, the residual mixes' score vectors */
    snprintf(vx, sizeof vx, "%s/kimi-k3.vindex", dir);
    const char *k3[] = {"extract", model_path("kimi-k3-tiny"), vx, NULL};
    vindex_cmd(k3);
    toks = prompt("kimi-k3-tiny");
    same_on_both(model_path("kimi-k3-tiny"), vx, toks, "q8");
    free(toks);
    mwt_rmrf(dir);
    free(dir);
}

/* Held-out shapes from `vindex synth`: gpt-oss with hidden 320 (not a multiple of 256) and a
 * window of 8 under a 55-token sequence, qwen3moe with hidden 512, another seed; the GGUF and
 * vindex forms agree bit for bit. */
static void test_synthetic_models(void **state) {
    (void)state;
    char *dir = mwt_tmpdir("gensynth");
    char *toks = prompt("gpt-oss-tiny");
    static const char *const shapes[][3] = {{"gpt-oss", "320", "8"}, {"qwen3moe", "512", NULL}};
    for (int i = 0; i < 2; i++) {
        char path[2][512];
        for (int f = 0; f < 2; f++) {
            snprintf(path[f], sizeof path[f], "%s/%s.%s", dir, shapes[i][0], f ? "vindex" : "gguf");
            const char *args[32] = {
                "synth",      "--arch",    shapes[i][0], "--layers",   "3", "--hidden",
                shapes[i][1], "--heads",   "4",          "--kv-heads", "2", "--head-dim",
                "64",         "--experts", "8",          "--top-k",    "2", "--expert-ff",
                "256",        "--vocab",   "512",        "--seed",     "77"};
            int n = 23;
            if (shapes[i][2]) args[n++] = "--sliding-window", args[n++] = shapes[i][2];
            args[n++] = "--format";
            args[n++] = f ? "vindex" : "gguf";
            args[n++] = path[f];
            args[n] = NULL;
            vindex_cmd(args);
        }
        same_on_both(path[0], path[1], toks, "q8");
    }
    free(toks);
    mwt_rmrf(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gptoss_f32),         cmocka_unit_test(test_gptoss_q8),
        cmocka_unit_test(test_qwen3moe_f32),       cmocka_unit_test(test_qwen3moe_q8),
        cmocka_unit_test(test_deepseek2_f32),      cmocka_unit_test(test_deepseek2_q8),
        cmocka_unit_test(test_kimi_linear_f32),    cmocka_unit_test(test_kimi_linear_q8),
        cmocka_unit_test(test_kimi_k3_f32),        cmocka_unit_test(test_kimi_k3_q8),
        cmocka_unit_test(test_sampling_is_seeded), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_unknown_family),     cmocka_unit_test(test_vindex_directory),
        cmocka_unit_test(test_synthetic_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
