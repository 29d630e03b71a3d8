/* tests/integration/test_text_cli.c — text in, text out through the programs (ASan builds):
 * `coordinator tokenize` on a vocabulary-only GGUF gives llama.cpp's ids (plain, --json,
 * --stdin byte for byte, --special, --add-bos) and `detokenize` gives the text back (ids as
 * arguments or on stdin, tokenize | detokenize --stdin --raw byte for byte, bad ids named);
 * `generate --prompt` prints exactly the text of the ids `generate --tokens` produces for the
 * same prompt, in process and over --loopback 2 (exact mode); `--chat` renders with
 * --chat-template on a model without a template and refuses without one; bad UTF-8 and unknown
 * templates are clear errors; `coordinator --help` names every subcommand. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run(const char *const *argv, char **out, char **err) {
    return mwt_run((char *const *)argv, out, err, 300000);
}

static char *trim(char *s) {
    size_t n = strlen(s);
    while (n && s[n - 1] == '\n') s[--n] = '\0';
    return s;
}

/* tokenize: plain, --json, --special, --add-bos, --stdin byte for byte (in: a scratch file) */
static void check_tokenize(const char *co, const char *vocab, const char *in) {
    char *out, *err;
    /* the fixture's " Hello World!" line: 18435 2159 0 */
    assert_int_equal(
        run((const char *[]){co, "tokenize", "--model", vocab, " Hello World!", NULL}, &out, &err),
        0);
    assert_string_equal(trim(out), "18435 2159 0");
    free(out), free(err);
    assert_int_equal(
        run((const char *[]){co, "tokenize", "--model", vocab, "--json", " Hello World!", NULL},
            &out, &err),
        0);
    assert_string_equal(trim(out), "[18435, 2159, 0]");
    free(out), free(err);
    /* special text: tokens only with --special (<|endoftext|> is 50256 in GPT-2) */
    assert_int_equal(
        run((const char *[]){co, "tokenize", "--model", vocab, "--special", "a<|endoftext|>", NULL},
            &out, &err),
        0);
    assert_string_equal(trim(out), "64 50256");
    free(out), free(err);
    assert_int_equal(
        run((const char *[]){co, "tokenize", "--model", vocab, "a<|endoftext|>", NULL}, &out, &err),
        0);
    assert_true(strcmp(trim(out), "64 50256") != 0);
    free(out), free(err);
    /* --add-bos needs a BOS; GPT-2 declares <|endoftext|> */
    assert_int_equal(
        run((const char *[]){co, "tokenize", "--model", vocab, "--add-bos", "a", NULL}, &out, &err),
        0);
    assert_string_equal(trim(out), "50256 64");
    free(out), free(err);
    /* --stdin reads bytes exactly, trailing newlines included */
    char cmd[2048];
    assert_int_equal(mwt_write_file(in, "Hello\n\n", 7), 0);
    snprintf(cmd, sizeof cmd, "exec %s tokenize --model %s --stdin < %s", co, vocab, in);
    assert_int_equal(run((const char *[]){"/bin/sh", "-c", cmd, NULL}, &out, &err), 0);
    assert_string_equal(trim(out), "15496 628");
    free(out), free(err);
}

/* detokenize: ids separated by commas and spaces, as several arguments, as a JSON list */
static void check_detokenize(const char *co, const char *vocab) {
    char *out, *err;
    assert_int_equal(
        run((const char *[]){co, "detokenize", "--model", vocab, "15496,995, 11", NULL}, &out,
            &err),
        0);
    assert_string_equal(out, "Hello world,\n");
    free(out), free(err);
    /* ids as several arguments, as one spaced argument, as tokenize --json prints them */
    assert_int_equal(run((const char *[]){co, "detokenize", "--model", vocab, "15496", "995",
                                          "--special", "11", NULL},
                         &out, &err),
                     0);
    assert_string_equal(out, "Hello world,\n");
    free(out), free(err);
    assert_int_equal(
        run((const char *[]){co, "detokenize", "--model", vocab, "[15496, 995]", NULL}, &out, &err),
        0);
    assert_string_equal(out, "Hello world\n");
    free(out), free(err);
}

static void check_round_trip(const char *co, const char *vocab, const char *in) {
    char *out, *err, cmd[2048];
    /* tokenize | detokenize --stdin --raw gives the text back byte for byte */
    const char text[] = "  Héllo, wörld 😀\n\tcode(x) != 42\n\n";
    assert_int_equal(mwt_write_file(in, text, sizeof text - 1), 0);
    snprintf(cmd, sizeof cmd,
             "%s tokenize --model %s --stdin < %s | %s detokenize --model %s --stdin --raw", co,
             vocab, in, co, vocab);
    assert_int_equal(run((const char *[]){"/bin/sh", "-c", cmd, NULL}, &out, &err), 0);
    assert_string_equal(out, text);
    free(out), free(err);
    snprintf(cmd, sizeof cmd,
             "%s tokenize --model %s --json --stdin < %s | %s detokenize --model %s --stdin", co,
             vocab, in, co, vocab);
    assert_int_equal(run((const char *[]){"/bin/sh", "-c", cmd, NULL}, &out, &err), 0);
    assert_int_equal(strlen(out), sizeof text);
    assert_memory_equal(out, text, sizeof text - 1);
    free(out), free(err);
}

static void check_bad_input(const char *co, const char *vocab) {
    char *out, *err, cmd[2048];
    /* a bad id is an error naming it: not a number (2), not in the vocabulary (1) */
    assert_int_equal(
        run((const char *[]){co, "detokenize", "--model", vocab, "15496", "99x", NULL}, &out, &err),
        2);
    assert_non_null(strstr(err, "'99x' is not a token id"));
    free(out), free(err);
    assert_int_equal(
        run((const char *[]){co, "detokenize", "--model", vocab, "15496,-3", NULL}, &out, &err), 2);
    assert_non_null(strstr(err, "'-3' is not a token id"));
    free(out), free(err);
    snprintf(cmd, sizeof cmd, "echo '1 2 50257 3' | %s detokenize --model %s --stdin", co, vocab);
    assert_int_equal(run((const char *[]){"/bin/sh", "-c", cmd, NULL}, &out, &err), 1);
    assert_non_null(strstr(err, "token id 50257 is out of range (the vocabulary has 50257"));
    free(out), free(err);
    assert_int_equal(
        run((const char *[]){co, "detokenize", "--model", vocab, "1", "--stdin", NULL}, &out, &err),
        2);
    assert_non_null(strstr(err, "either IDS or --stdin"));
    free(out), free(err);
    /* invalid UTF-8 and bad ids are errors */
    assert_int_equal(
        run((const char *[]){co, "tokenize", "--model", vocab, "bad \xc3", NULL}, &out, &err), 1);
    assert_non_null(strstr(err, "not valid UTF-8: byte 0xc3 at offset 4"));
    free(out), free(err);
    assert_int_equal(
        run((const char *[]){co, "detokenize", "--model", vocab, "99999999", NULL}, &out, &err), 1);
    assert_non_null(strstr(err, "out of range"));
    free(out), free(err);
}

/* `coordinator --help` answers on stdout with exit 0 and names every subcommand; no command or an
 * unknown one is a usage error (exit 2) that names them too. */
static void test_usage(void **state) {
    (void)state;
    const char *co = mwt_bin("coordinator");
    static const char *const cmds[] = {"generate", "serve", "keygen", "tokenize", "detokenize"};
    char *out, *err;
    assert_int_equal(run((const char *[]){co, "--help", NULL}, &out, &err), 0);
    assert_non_null(strstr(out, "usage: coordinator "));
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char line[64];
        snprintf(line, sizeof line, "coordinator %s ", cmds[i]);
        if (!strstr(out, line)) fail_msg("--help does not show '%s'", line);
    }
    assert_non_null(strstr(out, "--loopback N"));
    free(out), free(err);
    assert_int_equal(run((const char *[]){co, NULL}, &out, &err), 2);
    assert_non_null(strstr(err, "coordinator keygen "));
    free(out), free(err);
    assert_int_equal(run((const char *[]){co, "frobnicate", NULL}, &out, &err), 2);
    assert_non_null(strstr(err, "unknown command 'frobnicate'"));
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) assert_non_null(strstr(err, cmds[i]));
    free(out), free(err);
}

static void test_tokenize_detokenize(void **state) {
    (void)state;
    const char *co = mwt_bin("coordinator");
    const char *vocab = mwt_fixture("vocab/ggml-vocab-gpt-2.gguf");
    char *dir = mwt_tmpdir("textcli");
    char in[600];
    snprintf(in, sizeof in, "%s/in.txt", dir);
    check_tokenize(co, vocab, in);
    check_detokenize(co, vocab);
    check_round_trip(co, vocab, in);
    check_bad_input(co, vocab);
    mwt_rmrf(dir);
    free(dir);
}

/* generate --prompt prints the text of exactly the ids generate --tokens gives for that prompt */
static void check_prompt_matches_tokens(const char *model, const char *const *extra) {
    const char *co = mwt_bin("coordinator");
    char *out, *err, *ids, *gen_ids, *text;
    const char *prompt = "The quick brown fox";
    assert_int_equal(
        run((const char *[]){co, "tokenize", "--model", model, prompt, NULL}, &ids, &err), 0);
    free(err);
    trim(ids);
    const char *a1[24] = {co,  "generate",     "--model", model,       "--tokens",
                          ids, "--max-tokens", "12",      "--threads", "2"};
    const char *a2[24] = {co,     "generate",     "--model", model,       "--prompt",
                          prompt, "--max-tokens", "12",      "--threads", "2"};
    int n = 10;
    for (; extra && *extra; extra++, n++) a1[n] = a2[n] = *extra;
    assert_int_equal(run(a1, &out, &err), 0);
    free(err);
    gen_ids = strstr(out, "tokens:") + 7;
    /* text generation stops at the end-of-generation token (511 in both tiny models) */
    char *eog = strstr(gen_ids, " 511");
    if (eog && (eog[4] == ' ' || eog[4] == '\n')) *eog = '\0';
    assert_int_equal(
        run((const char *[]){co, "detokenize", "--model", model, gen_ids, NULL}, &text, &err), 0);
    free(err);
    char *got;
    if (run(a2, &got, &err) != 0) fail_msg("%s", err);
    assert_non_null(strstr(err, "text prompt of"));
    free(err);
    assert_string_equal(got, text);
    free(got);
    free(text);
    free(out);
    free(ids);
}

static void test_generate_prompt(void **state) {
    (void)state;
    const char *model = mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf");
    check_prompt_matches_tokens(model, NULL);
    check_prompt_matches_tokens(model, (const char *[]){"--loopback", "2", "--exact", "--wire",
                                                        "f32", "--node-threads", "1", NULL});
    check_prompt_matches_tokens(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), NULL);
}

static void test_generate_chat(void **state) {
    (void)state;
    const char *co = mwt_bin("coordinator");
    const char *model = mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf");
    const char *gptoss = mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf");
    char *out, *err;
    /* gpt-oss-tiny has no template nor harmony's tokens: chat is an error unless one is chosen */
    assert_int_equal(run((const char *[]){co, "generate", "--model", gptoss, "--chat", "user: hi",
                                          "--max-tokens", "4", NULL},
                         &out, &err),
                     1);
    assert_non_null(strstr(err, "no chat template"));
    assert_non_null(strstr(err, "--chat-template"));
    free(out), free(err);
    assert_int_equal(run((const char *[]){co, "generate", "--model", gptoss, "--chat", "user: hi",
                                          "--chat-template", "harmony", "--max-tokens", "4",
                                          "--threads", "2", NULL},
                         &out, &err),
                     0);
    assert_non_null(strstr(err, "spells them as plain text"));
    free(out), free(err);
    /* qwen3moe-tiny holds <|im_start|> / <|im_end|>: its family's format, qwen3 */
    assert_int_equal(run((const char *[]){co, "generate", "--model", model, "--chat", "user: hi",
                                          "--max-tokens", "4", "--threads", "2", NULL},
                         &out, &err),
                     0);
    assert_non_null(strstr(err, "template qwen3"));
    free(out), free(err);
    assert_int_equal(run((const char *[]){co, "generate", "--model", model, "--chat", "user: hi",
                                          "--chat-template", "chatml", "--max-tokens", "4",
                                          "--threads", "2", NULL},
                         &out, &err),
                     0);
    assert_non_null(strstr(err, "chat prompt of"));
    assert_non_null(strstr(err, "template chatml"));
    free(out), free(err);
    assert_int_equal(
        run((const char *[]){co, "generate", "--model", model, "--chat", "hi", "--chat-template",
                             "jinja-please", "--max-tokens", "4", NULL},
            &out, &err),
        1);
    assert_non_null(strstr(err, "unknown chat template 'jinja-please'"));
    free(out), free(err);
    /* --messages: an OpenAI message list */
    char *dir = mwt_tmpdir("textcli");
    char path[600];
    snprintf(path, sizeof path, "%s/m.json", dir);
    const char *j = "[{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", "
                    "\"content\": \"hi\"}]";
    assert_int_equal(mwt_write_file(path, j, strlen(j)), 0);
    assert_int_equal(run((const char *[]){co, "generate", "--model", model, "--messages", path,
                                          "--chat-template", "qwen3", "--think", "off",
                                          "--max-tokens", "3", "--threads", "2", NULL},
                         &out, &err),
                     0);
    free(out), free(err);
    assert_int_equal(mwt_write_file(path, "[{\"content\": 1}]", 16), 0);
    assert_int_equal(run((const char *[]){co, "generate", "--model", model, "--messages", path,
                                          "--chat-template", "qwen3", "--max-tokens", "3", NULL},
                         &out, &err),
                     1);
    assert_non_null(strstr(err, "has no role"));
    free(out), free(err);
    assert_int_equal(run((const char *[]){co, "generate", "--model", model, "--prompt", "x",
                                          "--tokens", "1", "--max-tokens", "3", NULL},
                         &out, &err),
                     2);
    assert_non_null(strstr(err, "exactly one of"));
    free(out), free(err);
    mwt_rmrf(dir);
    free(dir);
}

/* synthetic models carry a byte-level tokenizer, their family's chat tokens and template */
static void test_synth_models_chat(void **state) {
    (void)state;
    const char *co = mwt_bin("coordinator"), *vx = mwt_bin("vindex");
    char *dir = mwt_tmpdir("textcli");
    const char *fam[][3] = {{"gpt-oss", "harmony", "<|start|>"},
                            {"qwen3moe", "qwen3", "<|im_start|>"},
                            {"deepseek2", "deepseek-v3", "<｜User｜>"}};
    for (int f = 0; f < 3; f++) {
        char model[600];
        snprintf(model, sizeof model, "%s/%s.vindex", dir, fam[f][0]);
        char *out, *err;
        const char *synth[] = {vx,          "synth", "--arch",  fam[f][0], "--layers",    "2",
                               "--hidden",  "256",   "--heads", "4",       "--kv-heads",  "2",
                               "--experts", "4",     "--top-k", "2",       "--expert-ff", "256",
                               "--vocab",   "1000",  "--seed",  "7",       "--format",    "vindex",
                               model,       NULL};
        if (run(synth, &out, &err)) fail_msg("%s", err);
        free(out), free(err);
        if (run((const char *[]){co, "generate", "--model", model, "--chat", "user: hello",
                                 "--max-tokens", "6", "--threads", "2", NULL},
                &out, &err))
            fail_msg("%s: %s", fam[f][0], err);
        char want[64];
        snprintf(want, sizeof want, "template %s", fam[f][1]);
        if (!strstr(err, want)) fail_msg("%s: %s", fam[f][0], err);
        assert_null(strstr(err, "spells them as plain text"));
        /* random weights write no harmony header: their text is shown all the same */
        if (strlen(out) < 2) fail_msg("%s: no text printed (%s)", fam[f][0], err);
        free(out), free(err);
        /* the chat's special tokens are single ids of the vocabulary */
        assert_int_equal(
            run((const char *[]){co, "tokenize", "--model", model, "--special", fam[f][2], NULL},
                &out, &err),
            0);
        assert_null(strchr(trim(out), ' '));
        free(out), free(err);
        check_prompt_matches_tokens(model, (const char *[]){"--loopback", "2", "--node-threads",
                                                            "1", "--exact", "--wire", "f32", NULL});
    }
    mwt_rmrf(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_tokenize_detokenize),
        cmocka_unit_test(test_generate_prompt),
        cmocka_unit_test(test_generate_chat),
        cmocka_unit_test(test_synth_models_chat),
    };
    return cmocka_run_group_tests_name("text_cli", tests, NULL, NULL);
}
