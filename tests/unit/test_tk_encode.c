/* tests/unit/test_tk_encode.c — tokenizer behaviour beyond the llama.cpp fixtures, on a small
 * byte-level vocabulary built in the test: merges by rank, special tokens (longest first, control
 * ones only when asked, user-defined ones always), BOS on request, invalid UTF-8 refused with its
 * offset, unknown model / pre-tokenizer types named, every named pre-tokenizer compiles, and
 * streaming decode that never splits a character. */
#include <stdlib.h>
#include <string.h>

#include "tests/support/mw_test.h"
#include "tests/support/mwt_tk.h"
#include "tokenizer/tk.h"
#include "vindex/vx_meta.h"

enum { ID_AB = 256, ID_ABC, ID_SPACE_A, ID_IM_START, ID_IM, ID_THINK, ID_EOS, N_TOK };

static vx_meta *tiny_meta(const char *model, const char *pre) {
    static const mwt_tok extra[] = {{"ab", 1},
                                    {"abc", 1},
                                    {"\xc4\xa0"
                                     "a",
                                     1},
                                    {"<|im_start|>", 3},
                                    {"<|im", 3},
                                    {"<think>", 4},
                                    {"<|end|>", 3}};
    static const char *const merges[] = {"a b", "ab c", "\xc4\xa0 a"};
    return mwt_tk_meta("qwen3moe", model, pre, extra, N_TOK - 256, merges, 3, ID_IM_START, ID_EOS,
                       NULL);
}

static tk_tokenizer *tiny(const char *pre) {
    vx_meta *m = tiny_meta("gpt2", pre);
    tk_tokenizer *t;
    mw_err err = {{0}};
    if (tk_load_meta(m, "tiny", &t, &err)) fail_msg("%s", err.msg);
    vx_meta_free(m);
    return t;
}

static void expect_ids(const tk_tokenizer *t, const char *text, unsigned flags, const int32_t *want,
                       size_t n) {
    tk_ids ids = {0};
    mw_err err = {{0}};
    if (tk_encode(t, text, strlen(text), flags, &ids, &err)) fail_msg("'%s': %s", text, err.msg);
    if (ids.n != n) {
        for (size_t i = 0; i < ids.n; i++) print_error(" %d", ids.v[i]);
        fail_msg("'%s': %zu ids, want %zu", text, ids.n, n);
    }
    for (size_t i = 0; i < n; i++) assert_int_equal(ids.v[i], want[i]);
    tk_ids_free(&ids);
}

static void test_merges_and_specials(void **state) {
    (void)state;
    tk_tokenizer *t = tiny("qwen2");
    assert_int_equal(tk_n_vocab(t), N_TOK);
    assert_string_equal(tk_pre_type(t), "qwen2");
    assert_string_equal(tk_arch(t), "qwen3moe");
    expect_ids(t, "abc", 0, (int32_t[]){ID_ABC}, 1);
    expect_ids(t, "abd a", 0, (int32_t[]){ID_AB, 'd', ID_SPACE_A}, 3);
    /* control tokens are text unless asked for; the user-defined one always matches */
    expect_ids(t, "<think>x", 0, (int32_t[]){ID_THINK, 'x'}, 2);
    expect_ids(t, "<|im_start|>", TK_SPECIAL, (int32_t[]){ID_IM_START}, 1);
    /* longest first: <|im_start|> wins over its prefix <|im */
    expect_ids(t, "a<|im_start|><|imb", TK_SPECIAL, (int32_t[]){'a', ID_IM_START, ID_IM, 'b'}, 4);
    tk_ids ids = {0};
    mw_err err = {{0}};
    assert_int_equal(tk_encode(t, "<|im_start|>", 12, 0, &ids, &err), 0);
    assert_true(ids.n > 1); /* spelled out */
    for (size_t i = 0; i < ids.n; i++) assert_true(ids.v[i] != ID_IM_START);
    tk_ids_free(&ids);
    expect_ids(t, "ab", TK_ADD_BOS, (int32_t[]){ID_IM_START, ID_AB}, 2);
    assert_int_equal(tk_find(t, "<|end|>", 7), ID_EOS);
    assert_int_equal(tk_find(t, "<|nope|>", 8), -1);
    assert_true(tk_is_eog(t, ID_EOS));
    assert_false(tk_is_eog(t, ID_AB));
    assert_true(tk_is_control(t, ID_IM_START));
    /* invalid UTF-8 is refused with the offset of the bad byte */
    assert_int_equal(tk_encode(t, "ok\xff", 3, 0, &ids, &err), -1);
    assert_string_equal(err.msg, "the text is not valid UTF-8: byte 0xff at offset 2");
    assert_int_equal(tk_encode(t, "\xe2\x82", 2, 0, &ids, &err), -1);     /* truncated */
    assert_int_equal(tk_encode(t, "\xed\xa0\x80", 3, 0, &ids, &err), -1); /* a surrogate */
    tk_ids_free(&ids);
    tk_free(t);
}

static void test_unknown_types_are_named(void **state) {
    (void)state;
    tk_tokenizer *t;
    mw_err err = {{0}};
    vx_meta *m = tiny_meta("gpt2", "klingon");
    assert_int_equal(tk_load_meta(m, "tiny", &t, &err), -1);
    assert_non_null(strstr(err.msg, "unknown pre-tokenizer type 'klingon'"));
    vx_meta_free(m);
    m = tiny_meta("wordpiece", "gpt-2");
    assert_int_equal(tk_load_meta(m, "tiny", &t, &err), -1);
    assert_non_null(strstr(err.msg, "unknown tokenizer model type 'wordpiece'"));
    vx_meta_free(m);
    m = tiny_meta("gpt2", NULL);
    assert_int_equal(tk_load_meta(m, "tiny", &t, &err), -1);
    assert_non_null(strstr(err.msg, "without tokenizer.ggml.pre"));
    vx_meta_free(m);
    m = vx_meta_new();
    assert_int_equal(tk_load_meta(m, "empty.gguf", &t, &err), -1);
    assert_non_null(strstr(err.msg, "empty.gguf: no tokenizer"));
    vx_meta_free(m);
}

/* Every named pre-tokenizer compiles and cuts text the way its family does. */
static void test_pre_tokenizers(void **state) {
    (void)state;
    const char *names[] = {"gpt-2", "gpt-4o", "qwen2", "deepseek-v3", "deepseek-llm", "kimi-k2"};
    const char *text =
        "Hello World's 12345 \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c\n\n  x";
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        tk_tokenizer *t = tiny(names[i]);
        tk_ids ids = {0};
        mw_err err = {{0}};
        if (tk_encode(t, text, strlen(text), 0, &ids, &err)) fail_msg("%s: %s", names[i], err.msg);
        tk_text out = {0};
        assert_int_equal(tk_decode(t, ids.v, ids.n, 0, &out, &err), 0);
        assert_string_equal(out.s, text);
        tk_text_free(&out);
        tk_ids_free(&ids);
        tk_free(t);
    }
}

static void test_stream_keeps_characters_whole(void **state) {
    (void)state;
    tk_tokenizer *t = tiny("gpt-2");
    /* "é€😀" as single-byte tokens: every push yields nothing or whole characters */
    const char *s = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80!";
    tk_stream st;
    tk_stream_init(&st, t, 0);
    tk_text out = {0};
    mw_err err = {{0}};
    size_t sizes[16], k = 0;
    for (size_t i = 0; i < strlen(s); i++) {
        size_t before = out.n;
        assert_int_equal(tk_stream_push(&st, (unsigned char)s[i], &out, &err), 0);
        sizes[k++] = out.n - before;
    }
    const size_t want[] = {0, 2, 0, 0, 3, 0, 0, 0, 4, 1};
    for (size_t i = 0; i < k; i++) assert_int_equal(sizes[i], want[i]);
    assert_int_equal(tk_stream_finish(&st, &out, &err), 0);
    assert_string_equal(out.s, s);
    tk_text_free(&out);
    /* a character cut short by another one becomes U+FFFD at once; one left open at the end only
     * when the stream finishes */
    tk_stream_init(&st, t, 0);
    assert_int_equal(tk_stream_push(&st, 0xe2, &out, &err), 0);
    assert_int_equal(tk_stream_push(&st, 'a', &out, &err), 0);
    assert_string_equal(out.s, "\xef\xbf\xbd"
                               "a");
    assert_int_equal(tk_stream_push(&st, 0xff, &out, &err), 0);
    assert_int_equal(tk_stream_push(&st, 0xf0, &out, &err), 0);
    assert_int_equal(tk_stream_push(&st, 0x9f, &out, &err), 0);
    assert_string_equal(out.s, "\xef\xbf\xbd"
                               "a\xef\xbf\xbd");
    assert_int_equal(tk_stream_finish(&st, &out, &err), 0);
    assert_string_equal(out.s, "\xef\xbf\xbd"
                               "a\xef\xbf\xbd\xef\xbf\xbd");
    tk_text_free(&out);
    /* control tokens print only when asked; an id out of range is an error */
    tk_stream_init(&st, t, 0);
    assert_int_equal(tk_stream_push(&st, ID_EOS, &out, &err), 0);
    assert_int_equal(out.n, 0);
    tk_stream_init(&st, t, TK_SPECIAL);
    assert_int_equal(tk_stream_push(&st, ID_EOS, &out, &err), 0);
    assert_string_equal(out.s, "<|end|>");
    assert_int_equal(tk_stream_push(&st, N_TOK, &out, &err), -1);
    assert_non_null(strstr(err.msg, "out of range"));
    tk_text_free(&out);
    tk_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merges_and_specials),
        cmocka_unit_test(test_unknown_types_are_named),
        cmocka_unit_test(test_pre_tokenizers),
        cmocka_unit_test(test_stream_keeps_characters_whole),
    };
    return cmocka_run_group_tests_name("tk_encode", tests, NULL, NULL);
}
