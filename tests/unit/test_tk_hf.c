/* tests/unit/test_tk_hf.c — tokenizers from Hugging Face tokenizer.json (+ tokenizer_config.json),
 * written by the test: the same vocabulary as a GGUF gives the same ids; added tokens (special →
 * control, others user-defined), the config's chat template, BOS/EOS and add_bos_token; the
 * file's own Split / Digits / ByteLevel steps; unknown model types, normalizers and pre-tokenizer
 * steps named; a vindex carrying the files loads them (and refuses them when tampered with). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/mw_test.h"
#include "tests/support/mwt_tk.h"
#include "tokenizer/tk.h"
#include "tokenizer/tk_chat.h"
#include "vindex/vx_input.h"
#include "vindex/vx_meta.h"
#include "vindex/vx_vindex.h"

#define QWEN_RE                                                                                    \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "                          \
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"                                                               \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* vocab: 256 bytes, "ab" (256), "abc" (257), "Ġa" (258); added <|im_start|> 259 (special),
 * <think> 260 (not special), <|im_end|> 261 (special) */
static json_t *tokenizer_json(const char *model_type, const json_t *pre, const char *normalizer) {
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        char c[4] = {0};
        mwt_byte_char(b, c);
        json_object_set_new(vocab, c, json_integer(b));
    }
    json_object_set_new(vocab, "ab", json_integer(256));
    json_object_set_new(vocab, "abc", json_integer(257));
    json_object_set_new(vocab,
                        "\xc4\xa0"
                        "a",
                        json_integer(258));
    json_t *merges = json_pack("[s, [s, s], s]", "a b", "ab", "c", "\xc4\xa0 a");
    json_t *added =
        json_pack("[{s:i, s:s, s:b}, {s:i, s:s, s:b}, {s:i, s:s, s:b}]", "id", 259, "content",
                  "<|im_start|>", "special", 1, "id", 260, "content", "<think>", "special", 0, "id",
                  261, "content", "<|im_end|>", "special", 1);
    json_t *j = json_pack("{s:{s:s, s:o, s:o}, s:o, s:o}", "model", "type", model_type, "vocab",
                          vocab, "merges", merges, "added_tokens", added, "pre_tokenizer", pre);
    json_object_set_new(j, "normalizer",
                        normalizer ? json_pack("{s:s}", "type", normalizer) : json_null());
    return j;
}

static json_t *qwen_pre(void) {
    return json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}", "type", "Sequence",
                     "pretokenizers", "type", "Split", "pattern", "Regex", QWEN_RE, "behavior",
                     "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space", 0,
                     "use_regex", 0);
}

static void write_dir(const char *dir, json_t *tok, const char *config) {
    char p[1024];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    assert_int_equal(json_dump_file(tok, p, 0), 0);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    if (config)
        assert_int_equal(mwt_write_file(p, config, strlen(config)), 0);
    else
        remove(p);
}

static void expect(const tk_tokenizer *t, const char *text, unsigned fl, const int32_t *want,
                   size_t n) {
    tk_ids ids = {0};
    mw_err err = {{0}};
    assert_int_equal(tk_encode(t, text, strlen(text), fl, &ids, &err), 0);
    assert_int_equal(ids.n, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(ids.v[i], want[i]);
    tk_ids_free(&ids);
}

static void test_hf_tokenizer(void **state) {
    const char *dir = *state;
    json_t *j = tokenizer_json("BPE", qwen_pre(), "NFC");
    write_dir(dir, j,
              "{\"chat_template\": \"{% for m in messages %}<|im_start|>{{ m.role }}\", "
              "\"eos_token\": {\"content\": \"<|im_end|>\"}, \"bos_token\": null, "
              "\"add_bos_token\": false}");
    json_decref(j);
    tk_tokenizer *t;
    mw_err err = {{0}};
    if (tk_load_path(dir, &t, &err)) fail_msg("%s", err.msg);
    assert_int_equal(tk_n_vocab(t), 262);
    assert_int_equal(tk_eos(t), 261);
    assert_true(tk_is_eog(t, 261));
    assert_true(tk_is_control(t, 259));
    assert_false(tk_is_control(t, 260));
    expect(t, "abc ab a", 0, (int32_t[]){257, ' ', 256, 258}, 4);
    expect(t, "<think>x", 0, (int32_t[]){260, 'x'}, 2);
    expect(t, "a<|im_start|>", TK_SPECIAL, (int32_t[]){'a', 259}, 2);
    /* the same vocabulary from GGUF metadata gives the same ids on mixed text */
    static const mwt_tok extra[] = {{"ab", 1},
                                    {"abc", 1},
                                    {"\xc4\xa0"
                                     "a",
                                     1},
                                    {"<|im_start|>", 3},
                                    {"<think>", 4},
                                    {"<|im_end|>", 3}};
    static const char *const merges[] = {"a b", "ab c", "\xc4\xa0 a"};
    vx_meta *m = mwt_tk_meta("qwen3moe", "gpt2", "qwen2", extra, 6, merges, 3, -1, 261, NULL);
    tk_tokenizer *g;
    assert_int_equal(tk_load_meta(m, "gguf twin", &g, &err), 0);
    vx_meta_free(m);
    const char *text = "abcab a\n\n  It's 42 <think>ok</think> naïve 你好 \t x";
    tk_ids a = {0}, b = {0};
    assert_int_equal(tk_encode(t, text, strlen(text), 0, &a, &err), 0);
    assert_int_equal(tk_encode(g, text, strlen(text), 0, &b, &err), 0);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.v, b.v, a.n * sizeof *a.v);
    tk_ids_free(&a);
    tk_ids_free(&b);
    tk_free(g);
    tk_chat *c;
    assert_int_equal(tk_chat_open(t, NULL, &c, &err), 0);
    assert_string_equal(tk_chat_name(c), "chatml");
    tk_chat_free(c);
    tk_free(t);
}

/* gpt-oss's tokenizer.json spells o200k's pattern: it is read as the tiktoken encoding it is */
static void test_hf_o200k_is_tiktoken(void **state) {
    const char *dir = *state;
    const char *o200k =
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"
        "\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}"
        "\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}|"
        " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    json_t *pre = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}", "type",
                            "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", o200k,
                            "behavior", "Isolated", "invert", 0, "type", "ByteLevel",
                            "add_prefix_space", 0, "use_regex", 0);
    json_t *j = tokenizer_json("BPE", pre, NULL);
    write_dir(dir, j, NULL);
    json_decref(j);
    tk_tokenizer *t;
    mw_err err = {{0}};
    if (tk_load_path(dir, &t, &err)) fail_msg("%s", err.msg);
    assert_string_equal(tk_pre_type(t), "gpt-4o");
    expect(t, "abc Abc", 0, (int32_t[]){257, ' ', 'A', 'b', 'c'}, 5);
    tk_free(t);
}

static void expect_error(const char *dir, json_t *j, const char *config, const char *want) {
    write_dir(dir, j, config);
    json_decref(j);
    tk_tokenizer *t;
    mw_err err = {{0}};
    assert_int_equal(tk_load_path(dir, &t, &err), -1);
    if (!strstr(err.msg, want)) fail_msg("'%s' does not say '%s'", err.msg, want);
}

static void test_hf_refusals(void **state) {
    const char *dir = *state;
    expect_error(dir, tokenizer_json("WordPiece", qwen_pre(), NULL), NULL,
                 "unknown tokenizer model type 'WordPiece'");
    expect_error(dir, tokenizer_json("BPE", qwen_pre(), "Lowercase"), NULL,
                 "unknown normalizer 'Lowercase'");
    expect_error(dir, tokenizer_json("BPE", json_pack("{s:s}", "type", "Metaspace"), NULL), NULL,
                 "unknown pre-tokenizer step 'Metaspace'");
    expect_error(dir,
                 tokenizer_json("BPE",
                                json_pack("{s:s, s:{s:s}, s:s}", "type", "Split", "pattern",
                                          "Regex", "(unclosed", "behavior", "Isolated"),
                                NULL),
                 NULL, "does not compile");
    expect_error(dir, tokenizer_json("BPE", qwen_pre(), NULL), "{\"eos_token\": \"<|nope|>\"}",
                 "eos_token '<|nope|>' is not in the vocabulary");
    expect_error(dir, tokenizer_json("BPE", qwen_pre(), NULL),
                 "{\"chat_template\": ", "not valid JSON");
}

/* extract writes the GGUF's tokenizer as tokenizer.gguf; the mount checks it before it is used */
static void test_vindex_carries_tokenizer(void **state) {
    const char *dir = *state;
    char out[1024], tokf[1100];
    snprintf(out, sizeof out, "%s/model.vindex", dir);
    vx_input *in;
    mw_err err = {{0}};
    assert_int_equal(vx_input_open(mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf"), &in, &err), 0);
    if (vx_extract(in, out, NULL, NULL, &err)) fail_msg("%s", err.msg);
    vx_input_close(in);
    snprintf(tokf, sizeof tokf, "%s/tokenizer.gguf", out);
    tk_tokenizer *a, *b;
    assert_int_equal(tk_load_gguf(tokf, &a, &err), 0);
    assert_int_equal(tk_load_path(out, &b, &err), 0);
    assert_int_equal(tk_n_vocab(a), 512);
    assert_int_equal(tk_n_vocab(b), 512);
    assert_string_equal(tk_pre_type(b), "qwen2");
    assert_int_equal(vx_verify(out, NULL, NULL, NULL, &err), 0);
    tk_free(a);
    tk_free(b);
    /* one byte changed: the mount refuses the tokenizer, verify names the file */
    size_t len;
    unsigned char *bytes = mwt_read_file(tokf, &len);
    bytes[len - 1] ^= 1;
    assert_int_equal(mwt_write_file(tokf, bytes, len), 0);
    free(bytes);
    assert_int_equal(tk_load_path(out, &b, &err), -1);
    assert_non_null(strstr(err.msg, "tokenizer.gguf: checksum mismatch"));
    assert_int_equal(vx_verify(out, NULL, NULL, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "tokenizer.gguf"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hf_tokenizer, mwt_tmp_setup, mwt_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_hf_refusals, mwt_tmp_setup, mwt_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_hf_o200k_is_tiktoken, mwt_tmp_setup, mwt_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_vindex_carries_tokenizer, mwt_tmp_setup,
                                        mwt_tmp_teardown),
    };
    return cmocka_run_group_tests_name("tk_hf", tests, NULL, NULL);
}
