/* tests/unit/test_tk_tiktoken.c — o200k with the harmony special tokens against js-tiktoken.
 *
 * `make test` installs js-tiktoken (pinned) into build/npm and runs tests/tiktoken/o200k_cases.js,
 * which writes the vocabulary (a vocabulary-only GGUF built from o200k_base's ranks, harmony
 * tokens at their ids, padded to 201088 with reserved control tokens) and a few hundred strings
 * with js-tiktoken's ids into $MW_TK_O200K, and the same vocabulary with the merges a converted
 * gpt-oss GGUF carries. From either file every string must encode to exactly those ids (special
 * ones with special-token parsing on) and decode back to itself. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/mw_test.h"
#include "tokenizer/tk.h"

static const char *dir(void) {
    const char *d = getenv("MW_TK_O200K");
    return d && *d ? d : "build/tk-o200k";
}

static void check_o200k(const char *file) {
    char gguf[1024], cases[1024];
    snprintf(gguf, sizeof gguf, "%s/%s", dir(), file);
    snprintf(cases, sizeof cases, "%s/cases.json", dir());
    tk_tokenizer *t;
    mw_err err = {{0}};
    if (tk_load_gguf(gguf, &t, &err))
        fail_msg("%s (run through `make test`, which builds it with js-tiktoken)", err.msg);
    assert_int_equal(tk_n_vocab(t), 201088);
    const struct {
        const char *s;
        int32_t id;
    } harmony[] = {{"<|start|>", 200006},     {"<|end|>", 200007},      {"<|message|>", 200008},
                   {"<|channel|>", 200005},   {"<|return|>", 200002},   {"<|call|>", 200012},
                   {"<|constrain|>", 200003}, {"<|endoftext|>", 199999}};
    for (size_t i = 0; i < sizeof harmony / sizeof *harmony; i++)
        assert_int_equal(tk_find(t, harmony[i].s, strlen(harmony[i].s)), harmony[i].id);
    json_error_t je;
    json_t *j = json_load_file(cases, 0, &je);
    if (!j) fail_msg("%s: %s", cases, je.text);
    size_t n = json_array_size(j), fails = 0, n_special = 0;
    assert_true(n >= 300);
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(j, i);
        const char *text = json_string_value(json_object_get(c, "text"));
        size_t len = json_string_length(json_object_get(c, "text"));
        bool special = json_is_true(json_object_get(c, "special"));
        const json_t *want = json_object_get(c, "ids");
        n_special += special;
        tk_ids ids = {0};
        if (tk_encode(t, text, len, special ? TK_SPECIAL : 0, &ids, &err))
            fail_msg("#%zu: %s", i, err.msg);
        bool same = ids.n == json_array_size(want);
        for (size_t k = 0; same && k < ids.n; k++)
            same = ids.v[k] == json_integer_value(json_array_get(want, k));
        if (!same) {
            char got[4096] = "", exp[4096] = "";
            size_t gl = 0, el = 0;
            for (size_t k = 0; k < ids.n && gl + 16 < sizeof got; k++)
                gl += (size_t)snprintf(got + gl, sizeof got - gl, " %d", ids.v[k]);
            for (size_t k = 0; k < json_array_size(want) && el + 16 < sizeof exp; k++)
                el += (size_t)snprintf(exp + el, sizeof exp - el, " %lld",
                                       (long long)json_integer_value(json_array_get(want, k)));
            print_error("#%zu '%s':\n  tiktoken%s\n  moewire %s\n", i, text, exp, got);
            fails++;
        }
        tk_text out = {0};
        assert_int_equal(tk_decode(t, ids.v, ids.n, special ? TK_SPECIAL : 0, &out, &err), 0);
        if (out.n != len || (len && memcmp(out.s, text, len))) {
            print_error("#%zu decodes to '%s'\n", i, out.s ? out.s : "");
            fails++;
        }
        tk_text_free(&out);
        tk_ids_free(&ids);
    }
    print_message("%s: %zu strings (%zu with harmony tokens) against js-tiktoken, %zu differ\n",
                  file, n, n_special, fails);
    assert_int_equal(fails, 0);
    json_decref(j);
    tk_free(t);
}

static void test_o200k_matches_tiktoken(void **state) {
    (void)state;
    check_o200k("o200k-harmony.gguf");
}

/* merges as a converter writes them do not change a tiktoken encoding */
static void test_o200k_with_merges_matches_tiktoken(void **state) {
    (void)state;
    check_o200k("o200k-harmony-merges.gguf");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_o200k_matches_tiktoken),
        cmocka_unit_test(test_o200k_with_merges_matches_tiktoken),
    };
    return cmocka_run_group_tests_name("tk_tiktoken", tests, NULL, NULL);
}
