/* tests/unit/test_tk_kimi.c — the Kimi tokenizer from its Hugging Face files (tiktoken.model,
 * tokenizer_config.json, tokenization_kimi.py, config.json) against the same vocabulary as
 * llama.cpp's converter writes it into a GGUF (gpt2 + kimi-k2): every token's text, type and
 * bytes, BOS / EOS, and the ids of a few hundred strings (scripts with combining marks, CJK runs
 * beside kana and Latin, emoji sequences, code, numbers, whitespace runs, contractions, special
 * tokens with and without special parsing) must be equal, and decode back to the text.
 *
 * Two vocabularies: a byte-level BPE trained here on a multilingual text (vocab_size below the
 * 258 special ids, as Kimi's 163840 is), and, when `make test` has built it ($MW_TK_O200K),
 * o200k's 199998 ranks dressed as a Kimi tokenizer (vocab_size beyond them: [PAD] tokens). Also:
 * what each file error says, and a vindex that carries the files (checked by their checksums). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/mw_test.h"
#include "tests/support/mwt_tiktoken.h"
#include "tests/support/mwt_st.h"
#include "tokenizer/tk.h"
#include "vindex/vx_gguf.h"
#include "vindex/vx_input.h"
#include "vindex/vx_meta.h"
#include "vindex/vx_vindex.h"

static const char *const train_text =
    "The quick brown fox jumps over the lazy dog. It's what they'll say, isn't it? "
    "We've been here before; I'd say they're right. The the the and and of of to to in in "
    "for (int i = 0; i < n; i++) { sum += a[i] * b[i]; } return sum; "
    "def main(): print('hello world') if __name__ == '__main__': main() "
    "你好，世界！今天天气很好。我们一起去公园散步吧。中文分词是一个有趣的问题。你好你好世界世界 "
    "こんにちは世界、ひらがなとカタカナと漢字。東京は日本の首都です。 "
    "안녕하세요 세계 한국어 문장입니다 "
    "Привет, мир! Как дела? Привет привет "
    "नमस्ते दुनिया, यह एक परीक्षण है। नमस्ते "
    "naïve café résumé coöperate façade naïve café "
    "3.14159 2718281828 1,000,000 12345 678 90 "
    "😀👍🏽 👨‍👩‍👧‍👦 🇯🇵 😀😀 👍🏽👍🏽 "
    "https://example.com/a?b=c&d=e https://example.com "
    "    \n\n\t  \r\n  \n";

/* strings to encode: each alone, and (below) joined pairwise */
static const char *const cases[] = {
    "",
    " ",
    "Hello world",
    "Hello, World! HELLO world hello",
    "It's what they'll say, isn't it? I'M SURE YOU'VE SEEN IT",
    "don't   stop\n\nbelieving\t\ttabs",
    "你好世界",
    "你好，世界！",
    "abc你好def",
    "你好abc",
    "Kimi是一个AI助手",
    "こんにちは世界",
    "ひらがな漢字カタカナ",
    "東京タワー",
    "안녕하세요 세계",
    "Привет, мир!",
    "नमस्ते दुनिया",
    "naïve café",
    "e\xcc\x81\xcc\x81 combining a\xcc\x8a",
    "😀",
    "👍🏽",
    "👨‍👩‍👧‍👦 family",
    "🇯🇵🇺🇸",
    "😀你好😀",
    "123",
    "1234567",
    "3.14159 2718281828",
    "１２３ full-width digits",
    "x=1;y=22;z=333;w=4444",
    "for (int i = 0; i < n; i++) {\n    sum += a[i];\n}\n",
    "    leading spaces",
    "trailing spaces    ",
    "\n\n\n",
    " \n \n ",
    "a\r\nb\r\n",
    "https://example.com/path?q=1&r=two#frag",
    "<|im_end|> is text unless special",
    "[BOS]hello[EOS]",
    "<|open|>message role=\"user\"<|sep|>hi<|close|>message<|sep|><|end_of_msg|>",
    "<|reserved_token_99999999|>",
    "mixed 中文 and English 和 日本語 text",
    "Ωmega αβγ ΑΒΓ",
    "עברית العربية",
    "ไทย ภาษาไทย",
    "\xe2\x80\x8bzero\xe2\x80\x8bwidth",
    "ſ'S long-s's 'LL",
};
#define N_CASES (sizeof cases / sizeof *cases)

static void write_gguf(const char *path, vx_meta *meta) {
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    vx_meta *wm = vx_gguf_writer_meta(w);
    for (size_t i = 0; i < vx_meta_count(meta); i++)
        assert_int_equal(vx_meta_copy_entry(wm, meta, i), 0);
    mw_err err = {{0}};
    if (vx_gguf_writer_write(w, path, &err)) fail_msg("%s", err.msg);
    vx_gguf_writer_free(w);
}

static void same_vocabulary(const tk_tokenizer *a, const tk_tokenizer *b) {
    assert_int_equal(tk_n_vocab(a), tk_n_vocab(b));
    assert_int_equal(tk_bos(a), tk_bos(b));
    assert_int_equal(tk_eos(a), tk_eos(b));
    assert_string_equal(tk_pre_type(a), "kimi-k2");
    assert_string_equal(tk_pre_type(b), "kimi-k2");
    for (int32_t id = 0; id < tk_n_vocab(a); id++) {
        const char *pa, *pb;
        size_t la, lb;
        assert_int_equal(tk_piece(a, id, true, &pa, &la), 0);
        assert_int_equal(tk_piece(b, id, true, &pb, &lb), 0);
        if (la != lb || memcmp(pa, pb, la)) fail_msg("token %d differs", id);
        assert_int_equal(tk_is_control(a, id), tk_is_control(b, id));
    }
}

/* Encodes text both ways; the ids must agree and decode back. Returns the count. */
static size_t same_ids(const tk_tokenizer *a, const tk_tokenizer *b, const char *text, size_t len,
                       unsigned flags) {
    tk_ids x = {0}, y = {0};
    mw_err err = {{0}};
    if (tk_encode(a, text, len, flags, &x, &err)) fail_msg("%s", err.msg);
    if (tk_encode(b, text, len, flags, &y, &err)) fail_msg("%s", err.msg);
    bool same = x.n == y.n;
    for (size_t i = 0; same && i < x.n; i++) same = x.v[i] == y.v[i];
    if (!same)
        fail_msg("'%.*s' (flags %u): %zu ids from tiktoken.model, %zu from the GGUF", (int)len,
                 text, flags, x.n, y.n);
    tk_text back = {0};
    assert_int_equal(tk_decode(a, x.v, x.n, flags & TK_SPECIAL, &back, &err), 0);
    if (back.n != len || (len && memcmp(back.s, text, len)))
        fail_msg("'%.*s' decodes to '%s'", (int)len, text, back.s ? back.s : "");
    size_t n = x.n;
    tk_text_free(&back);
    tk_ids_free(&x);
    tk_ids_free(&y);
    return n;
}

static void compare_cases(const tk_tokenizer *hf, const tk_tokenizer *gg) {
    size_t ids = 0, strings = 0;
    char joined[1024];
    for (size_t i = 0; i < N_CASES; i++)
        for (unsigned f = 0; f <= TK_SPECIAL; f += TK_SPECIAL) {
            ids += same_ids(hf, gg, cases[i], strlen(cases[i]), f), strings++;
            for (size_t j = 0; j < N_CASES; j += 7) {
                int n = snprintf(joined, sizeof joined, "%s%s", cases[i], cases[j]);
                ids += same_ids(hf, gg, joined, (size_t)n, f), strings++;
            }
        }
    ids += same_ids(hf, gg, train_text, strlen(train_text), 0), strings++;
    print_message("%zu strings, %zu ids: equal from tiktoken.model and from the GGUF\n", strings,
                  ids);
}

/* tiktoken.model splits as Kimi's pattern does: a Han run is a piece of its own */
static void check_han_pieces(const tk_tokenizer *t) {
    static const char *const parts[][2] = {{"abc", "你好"}, {"你好", "abc"}, {"ひらがな", "漢字"}};
    for (size_t i = 0; i < 3; i++) {
        tk_ids a = {0}, b = {0}, ab = {0};
        mw_err err = {{0}};
        char both[64];
        snprintf(both, sizeof both, "%s%s", parts[i][0], parts[i][1]);
        assert_int_equal(tk_encode(t, parts[i][0], strlen(parts[i][0]), 0, &a, &err), 0);
        assert_int_equal(tk_encode(t, parts[i][1], strlen(parts[i][1]), 0, &b, &err), 0);
        assert_int_equal(tk_encode(t, both, strlen(both), 0, &ab, &err), 0);
        assert_int_equal(ab.n, a.n + b.n);
        assert_memory_equal(ab.v, a.v, a.n * sizeof *a.v);
        assert_memory_equal(ab.v + a.n, b.v, b.n * sizeof *b.v);
        tk_ids_free(&a), tk_ids_free(&b), tk_ids_free(&ab);
    }
}

static tk_tokenizer *load(const char *path) {
    tk_tokenizer *t;
    mw_err err = {{0}};
    if (tk_load_path(path, &t, &err)) fail_msg("%s", err.msg);
    return t;
}

/* The trained vocabulary: vocab_size = ranks + 256, as Kimi's (the last two specials fall off). */
static void test_trained_vocabulary(void **state) {
    const char *dir = *state;
    mwt_ranks r = {0};
    char *twice = malloc(2 * strlen(train_text) + 1); /* every pair is frequent enough to merge */
    sprintf(twice, "%s%s", train_text, train_text);
    mwt_ranks_train(&r, twice, 4000);
    free(twice);
    assert_true(r.n > 700);
    char config[256], gguf[1024];
    const int32_t eom = r.n + 23; /* <|end_of_msg|>, K3's end of turn */
    snprintf(config, sizeof config, "{\"vocab_size\": %d, \"eos_token_id\": %d}", r.n + 256, eom);
    assert_int_equal(mwt_kimi_write_hf(dir, &r, config), 0);
    snprintf(gguf, sizeof gguf, "%s/vocab.gguf", dir);
    vx_meta *m = mwt_kimi_gguf_meta(&r, r.n + 256, r.n + 1, true);
    write_gguf(gguf, m);
    vx_meta_free(m);
    tk_tokenizer *hf = load(dir), *gg = load(gguf);
    same_vocabulary(hf, gg);
    assert_int_equal(tk_bos(hf), r.n);
    assert_int_equal(tk_eos(hf), r.n + 1);
    assert_true(tk_is_eog(hf, r.n + 1) && tk_is_eog(hf, eom));
    assert_int_equal(tk_find(hf, "<|reserved_token_5|>", 20), -1);
    char name[64];
    snprintf(name, sizeof name, "<|reserved_token_%d|>", r.n + 5);
    assert_int_equal(tk_find(hf, name, strlen(name)), r.n + 5);
    compare_cases(hf, gg);
    check_han_pieces(hf);
    tk_free(hf);
    tk_free(gg);
    mwt_ranks_free(&r);
}

/* o200k's ranks as a Kimi tokenizer: a real 200k vocabulary, with [PAD] ids after the specials */
static void test_o200k_as_kimi(void **state) {
    const char *dir = *state, *o200k = getenv("MW_TK_O200K");
    char path[1024], gguf[1024], config[128];
    snprintf(path, sizeof path, "%s/o200k-harmony.gguf",
             o200k && *o200k ? o200k : "build/tk-o200k");
    tk_tokenizer *src;
    mw_err err = {{0}};
    if (tk_load_gguf(path, &src, &err)) {
        print_message("skipped: %s (`make test` builds it)\n", err.msg);
        skip();
    }
    mwt_ranks r = {0};
    for (int32_t id = 0; id < 199998; id++) {
        const char *p;
        size_t len;
        assert_int_equal(tk_piece(src, id, false, &p, &len), 0);
        mwt_ranks_add(&r, p, len);
    }
    tk_free(src);
    const int64_t vocab = r.n + 258 + 64;
    snprintf(config, sizeof config, "{\"vocab_size\": %lld}", (long long)vocab);
    assert_int_equal(mwt_kimi_write_hf(dir, &r, config), 0);
    snprintf(gguf, sizeof gguf, "%s/vocab.gguf", dir);
    vx_meta *m = mwt_kimi_gguf_meta(&r, vocab, r.n + 1, false);
    write_gguf(gguf, m);
    vx_meta_free(m);
    tk_tokenizer *hf = load(dir), *gg = load(gguf);
    same_vocabulary(hf, gg);
    assert_true(tk_find(hf, "[PAD200300]", 11) == 200300 && !tk_is_control(hf, 200300));
    compare_cases(hf, gg);
    check_han_pieces(hf);
    tk_free(hf);
    tk_free(gg);
    mwt_ranks_free(&r);
}

static void expect_error(const char *dir, const char *want) {
    tk_tokenizer *t;
    mw_err err = {{0}};
    assert_int_equal(tk_load_path(dir, &t, &err), -1);
    if (!strstr(err.msg, want)) fail_msg("'%s' does not say '%s'", err.msg, want);
}

static void write_text(const char *dir, const char *name, const char *text) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    assert_int_equal(mwt_write_file(p, text, strlen(text)), 0);
}

static void test_refusals(void **state) {
    const char *dir = *state;
    mwt_ranks r = {0};
    mwt_ranks_train(&r, "abab abab cdcd", 3);
    assert_int_equal(mwt_kimi_write_hf(dir, &r, "{\"vocab_size\": 10}"), 0);
    expect_error(dir, "vocab_size 10 is smaller than the 259 ranks");
    assert_int_equal(mwt_kimi_write_hf(dir, &r, "{}"), 0);
    char p[1024];
    snprintf(p, sizeof p, "%s/tokenization_kimi.py", dir);
    size_t len;
    char *py = mwt_read_file(p, &len);
    char *at = strstr(py, "\\p{N}{1,3}");
    at[8] = '4'; /* {1,4} */
    write_text(dir, "tokenization_kimi.py", py);
    free(py);
    expect_error(dir, "pat_str part 4 is not kimi-k2's");
    assert_int_equal(mwt_kimi_write_hf(dir, &r, "{}"), 0);
    write_text(dir, "tokenizer_config.json",
               "{\"auto_map\": {\"AutoTokenizer\": [\"tokenization_other.Tok\", null]}}");
    expect_error(dir, "tokenizer class 'tokenization_other.Tok'");
    write_text(dir, "tokenizer_config.json",
               "{\"auto_map\": {\"AutoTokenizer\": [\"tokenization_kimi.TikTokenTokenizer\"]}, "
               "\"added_tokens_decoder\": {\"12\": {\"content\": \"<x>\"}}}");
    expect_error(dir, "added_tokens_decoder names id '12', outside the special ids 259 .. 516");
    static const struct {
        const char *model, *want;
    } bad[] = {
        {"YQ== 0\nYg== 0\n", "rank 0 is given twice"},
        {"YQ== 0\nYg== 2\nYw== 3\n", "rank 1 is missing"},
        {"YQ== 0\nYQ== 1\n", "rank 1 repeats the bytes of rank 0"},
        {"Y!== 0\n", "is not base64"},
        {"YQ==\n", "not 'BASE64 RANK'"},
        {"YQ== -1\n", "rank '-1' is not an integer"},
        {"\n\n", "no tokens"},
    };
    write_text(dir, "tokenizer_config.json",
               "{\"auto_map\": {\"AutoTokenizer\": [\"tokenization_kimi.TikTokenTokenizer\"]}}");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_text(dir, "tiktoken.model", bad[i].model);
        expect_error(dir, bad[i].want);
    }
    write_text(dir, "tiktoken.model", "YQ== 0\r\nYg== 1\r\n");
    expect_error(dir, "no rank holds the single byte 0x00");
    char model[8192] = "";
    for (int b = 0; b < 256; b++) { /* every byte, CRLF line ends */
        static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t n = strlen(model);
        snprintf(model + n, sizeof model - n, "%c%c== %d\r\n", a[b >> 2], a[(b & 3) << 4], b);
    }
    write_text(dir, "tiktoken.model", model);
    tk_tokenizer *t = load(dir);
    assert_int_equal(tk_n_vocab(t), 256 + 258);
    tk_free(t);
    mwt_ranks_free(&r);
}

/* A checkpoint whose tokenizer is tiktoken.model: extract carries the files, the vindex's
 * tokenizer is the checkpoint's, and a changed byte is refused by its checksum. */
static void test_vindex_carries_tiktoken(void **state) {
    const char *dir = *state;
    char ck[1024], out[1024], p[1100];
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(out, sizeof out, "%s/out.vindex", dir);
    mwt_hf_opts o;
    mwt_hf_defaults(&o, "qwen3_moe");
    o.vocab = 600; /* 256 bytes, some merges, the first specials */
    assert_int_equal(mwt_hf_write(ck, &o), 0);
    snprintf(p, sizeof p, "%s/tokenizer.json", ck);
    unlink(p);
    mwt_ranks r = {0};
    mwt_ranks_train(&r, train_text, 200);
    assert_int_equal(mwt_kimi_write_hf(ck, &r, NULL), 0);
    vx_input *in;
    mw_err err = {{0}};
    if (vx_input_open(ck, &in, &err) || vx_extract(in, out, NULL, NULL, &err))
        fail_msg("%s", err.msg);
    vx_input_close(in);
    tk_tokenizer *a = load(ck), *b = load(out);
    assert_int_equal(tk_n_vocab(b), 600);
    assert_string_equal(tk_arch(b), "qwen3moe");
    for (size_t i = 0; i < N_CASES; i++) {
        tk_ids x = {0}, y = {0};
        assert_int_equal(tk_encode(a, cases[i], strlen(cases[i]), TK_SPECIAL, &x, &err), 0);
        assert_int_equal(tk_encode(b, cases[i], strlen(cases[i]), TK_SPECIAL, &y, &err), 0);
        assert_int_equal(x.n, y.n);
        if (x.n) assert_memory_equal(x.v, y.v, x.n * sizeof *x.v);
        tk_ids_free(&x), tk_ids_free(&y);
    }
    tk_free(a);
    tk_free(b);
    snprintf(p, sizeof p, "%s/tiktoken.model", out);
    size_t len;
    unsigned char *bytes = mwt_read_file(p, &len);
    bytes[0] ^= 1;
    assert_int_equal(mwt_write_file(p, bytes, len), 0);
    free(bytes);
    assert_int_equal(tk_load_path(out, &a, &err), -1);
    assert_non_null(strstr(err.msg, "tiktoken.model: checksum mismatch"));
    mwt_ranks_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_trained_vocabulary, mwt_tmp_setup, mwt_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_o200k_as_kimi, mwt_tmp_setup, mwt_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, mwt_tmp_setup, mwt_tmp_teardown),
        cmocka_unit_test_setup_teardown(test_vindex_carries_tiktoken, mwt_tmp_setup,
                                        mwt_tmp_teardown),
    };
    return cmocka_run_group_tests_name("tk_kimi", tests, NULL, NULL);
}
