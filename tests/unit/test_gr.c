/* tests/unit/test_gr.c — the grammar (grammar/gr.h): JSON accepted and refused, schema features
 * and refusals, and the token mask against a brute force (every token's bytes fed one by one) on
 * small vocabularies, along random walks that follow the mask to the end of a value. */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gr.h"

static gr_grammar *compile(const char *schema) {
    gr_grammar *g = NULL;
    mw_err err = {{0}};
    int rc =
        schema ? gr_compile_text(schema, strlen(schema), &g, &err) : gr_compile(NULL, &g, &err);
    if (rc) fail_msg("compile %s: %s", schema ? schema : "(json_object)", err.msg);
    return g;
}

/* Alternatives of schema texts between prefixes and suffixes. */
static gr_grammar *compile_alts(const char *const *schemas, const char *const *pre,
                                const char *const *post, int n) {
    json_t *js[8] = {0};
    for (int i = 0; i < n; i++) assert_non_null(js[i] = json_loads(schemas[i], 0, NULL));
    gr_grammar *g = NULL;
    mw_err err = {{0}};
    const int rc = gr_compile_alts((const json_t *const *)js, pre, post, n, &g, &err);
    for (int i = 0; i < n; i++) json_decref(js[i]);
    if (rc) fail_msg("compile alternatives: %s", err.msg);
    return g;
}

static bool acc(const gr_grammar *g, const char *s) {
    return gr_accepts(g, s, strlen(s));
}

static void test_json_object(void **state) {
    (void)state;
    gr_grammar *g = compile(NULL);
    const char *good[] = {"{}", "{\"a\":1}", "{\"a\": [1, 2.5e-3, -0, true, null, \"x\"]}",
                          "{\"k\":{\"n\":{\"m\":[]}}, \"s\":\"\\u00e9\\n\\\"\"}",
                          "{\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\":false}"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        if (!acc(g, good[i])) fail_msg("refused %s", good[i]);
    const char *bad[] = {"",
                         "[]",
                         "1",
                         "{",
                         "{\"a\"}",
                         "{\"a\":01}",
                         "{\"a\":1,}",
                         "{a:1}",
                         "{} ",
                         "{\"a\":tru}",
                         "{\"a\":\"\x01\"}",
                         "{\"a\":\"\\x\"}",
                         "{\"a\":\"\\ud800\"}",
                         "{\"a\":\"\xc0\xaf\"}",
                         "{\"a\":\"\xed\xa0\x80\"}",
                         "{\"a\":-}",
                         "{\"a\":1.}",
                         "{\"a\":1e}",
                         "{\"a\":  1}",
                         "{ \"a\":1}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (acc(g, bad[i])) fail_msg("accepted %s", bad[i]);
    gr_free(g);
}

static void test_schema_features(void **state) {
    (void)state;
    gr_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                            "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\","
                            "\"items\":{\"enum\":[\"a\",\"bc\",3]},\"minItems\":1,\"maxItems\":2},"
                            "\"opt\":{\"type\":[\"number\",\"null\"]}},\"required\":[\"name\","
                            "\"age\",\"tags\"],\"additionalProperties\":false}");
    assert_true(acc(g, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\"]}"));
    assert_true(acc(g, "{\"tags\":[3, \"bc\"],\"age\":-12,\"name\":\"\",\"opt\":null}"));
    assert_true(acc(g, "{\"name\":\"x\", \"age\":3, \"tags\":[\"a\"], \"opt\":1.5}"));
    assert_false(acc(g, "{\"name\":\"x\",\"age\":3}"));                          /* required */
    assert_false(acc(g, "{\"name\":\"x\",\"age\":3.5,\"tags\":[\"a\"]}"));       /* integer */
    assert_false(acc(g, "{\"name\":\"x\",\"age\":3,\"tags\":[]}"));              /* minItems */
    assert_false(acc(g, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\",3,3]}"));     /* maxItems */
    assert_false(acc(g, "{\"name\":\"x\",\"age\":3,\"tags\":[\"b\"]}"));         /* enum */
    assert_false(acc(g, "{\"name\":\"x\",\"age\":3,\"tags\":[\"a\"],\"z\":1}")); /* extra key */
    assert_false(acc(g, "{\"name\":\"x\",\"name\":\"y\",\"age\":3,\"tags\":[\"a\"]}"));
    assert_false(acc(g, "{\"name\":1,\"age\":3,\"tags\":[\"a\"]}"));
    gr_free(g);
    /* enums whose values prefix each other end where the next byte cannot continue them */
    g = compile("{\"type\":\"object\",\"properties\":{\"n\":{\"enum\":[1,12,123]}},"
                "\"required\":[\"n\"]}");
    assert_true(acc(g, "{\"n\":1}"));
    assert_true(acc(g, "{\"n\":12}"));
    assert_true(acc(g, "{\"n\":123}"));
    assert_false(acc(g, "{\"n\":13}"));
    gr_free(g);
    /* const, $ref with recursion, anyOf of different types, a top-level number */
    g = compile("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"const\":"
                "\"k\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},"
                "\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}");
    assert_true(acc(g, "{\"v\":\"k\",\"kids\":[{\"v\":\"k\"},{\"v\":\"k\",\"kids\":[]}]}"));
    assert_false(acc(g, "{\"v\":\"k\",\"kids\":[{\"v\":\"j\"}]}"));
    gr_free(g);
    g = compile("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"items\":{\"type\":"
                "\"boolean\"}}]}");
    assert_true(acc(g, "\"s\""));
    assert_true(acc(g, "[true, false]"));
    assert_false(acc(g, "[1]"));
    gr_free(g);
    g = compile("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
    assert_true(acc(g, "\"ab\""));
    assert_true(acc(g, "\"\xc3\xa9\\n\\u0041\"")); /* a character is a character */
    assert_false(acc(g, "\"a\""));
    assert_false(acc(g, "\"abcd\""));
    gr_free(g);
    g = compile_alts((const char *[]){"{\"type\":\"number\"}"}, (const char *[]){"<c>\n"},
                     (const char *[]){"\n</c>"}, 1);
    assert_true(acc(g, "<c>\n12\n</c>"));
    assert_false(acc(g, "12"));
    assert_false(acc(g, "<c>\n12\n</c"));
    assert_false(acc(g, "<c>\n\n</c>"));
    gr_free(g);
    g = compile("{\"type\":\"number\"}");
    assert_true(acc(g, "-1.5E+3"));
    assert_false(acc(g, "1.5E+"));
    gr_free(g);
    g = compile("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}");
    assert_true(acc(g, "{\"a\":1,\"b\":2}"));
    assert_false(acc(g, "{\"a\":\"x\"}"));
    gr_free(g);
}

static void test_refusals(void **state) {
    (void)state;
    struct {
        const char *schema, *names;
    } bad[] = {
        /* patterns: what the subset leaves out, named */
        {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "/pattern: the pattern's \\1"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\bx\"}", "\\b"},
        {"{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "lookaround"},
        {"{\"type\":\"string\",\"pattern\":\"a^b\"}", "anchor"},
        {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "top-level '|'"},
        {"{\"type\":\"string\",\"pattern\":\"é\"}", "non-ASCII"},
        {"{\"type\":\"string\",\"pattern\":\"[a\"}", "unclosed"},
        {"{\"type\":\"string\",\"pattern\":\"a)\"}", "unmatched"},
        {"{\"type\":\"string\",\"pattern\":\"*a\"}", "nothing before"},
        {"{\"type\":\"string\",\"pattern\":\"a{3,2}\"}", "{m,n}"},
        {"{\"type\":\"string\",\"pattern\":\"[a-z]{40}[0-9]{40}\"}", "too long"},
        {"{\"type\":\"string\",\"pattern\":\"^\\\"$\"}", "matches no string"},
        {"{\"type\":\"string\",\"pattern\":\"^\\\\t\\\\x41$\"}", "matches no string"},
        {"{\"pattern\":\"a\"}", "type string only"},
        {"{\"type\":\"string\",\"pattern\":\"a\",\"minLength\":2}", "minLength: beside a pattern"},
        {"{\"type\":\"string\",\"enum\":[\"b\"],\"pattern\":\"a\"}", "type string only"},
        {"{\"type\":\"string\",\"format\":\"date\"}", "'format'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":0}}}",
         "/properties/a/minimum"},
        {"{\"oneOf\":[{\"type\":\"string\"}]}", "'oneOf'"},
        {"{\"anyOf\":[{\"type\":\"object\"},{\"type\":\"object\"}]}", "anyOf"},
        {"{\"type\":[\"string\"],\"x-extra\":1}", "'x-extra'"},
        {"{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "required"},
        {"{\"$ref\":\"#/$defs/missing\"}", "$ref"},
        {"{\"type\":\"wat\"}", "unknown type"},
        {"{\"type\":\"array\",\"items\":[{}]}", "tuples"},
        {"{\"$ref\":\"#\"}", "itself"},
        {"{\"$defs\":{\"a\":{\"anyOf\":[{\"$ref\":\"#/$defs/b\"}]},\"b\":{\"anyOf\":[{\"$ref\":"
         "\"#/$defs/a\"}]}},\"$ref\":\"#/$defs/a\"}",
         "admits no value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        gr_grammar *g = NULL;
        mw_err err = {{0}};
        if (!gr_compile_text(bad[i].schema, strlen(bad[i].schema), &g, &err))
            fail_msg("accepted %s", bad[i].schema);
        if (!strstr(err.msg, bad[i].names))
            fail_msg("%s: '%s' does not name %s", bad[i].schema, err.msg, bad[i].names);
        assert_null(g);
    }
}

/* String patterns: searched unless anchored, classes, quantifiers, groups, alternation; the
 * characters JSON escapes are never generated under one. */
static void test_patterns(void **state) {
    (void)state;
    static const struct {
        const char *pattern, *yes[4], *no[4];
    } cases[] = {
        {"^[a-z]{2,4}$", {"\"ab\"", "\"abcd\""}, {"\"a\"", "\"abcde\"", "\"aB\"", "\"\""}},
        {"^\\d{3}-\\d{4}$", {"\"555-1234\""}, {"\"5551234\"", "\"555-123\"", "\"55a-1234\""}},
        {"b+c", {"\"xxbbcyy\"", "\"bc\""}, {"\"xxcb\"", "\"\""}},
        {"^(ab|cd)*x?$", {"\"\"", "\"abcdx\"", "\"x\""}, {"\"abc\"", "\"xx\""}},
        {"^.$", {"\"é\"", "\"a\""}, {"\"ab\"", "\"\""}},
        {"^[^a-z]+$", {"\"AB9\"", "\"é\""}, {"\"aB\""}},
        {"^\\w+@\\w+\\.com$", {"\"a_1@b.com\""}, {"\"a@b.org\"", "\"@b.com\""}},
        {"^a{2,}$", {"\"aa\"", "\"aaaa\""}, {"\"a\""}},
        {"^(?:x|y){0,2}z$", {"\"z\"", "\"xyz\""}, {"\"xyxz\""}},
        {"^a\\$$", {"\"a$\""}, {"\"a\""}},
        {"^[\\d.]+$", {"\"1.5\""}, {"\"1,5\""}},
        {"^a\\s[\\x41-\\x43\\n]$", {"\"a B\""}, {"\"a D\"", "\"aB\""}},
        {"", {"\"\"", "\"anything\""}, {"\"a\\\"b\"", "\"\\n\""}}, /* no escapes written */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *s = json_pack("{s:s, s:s}", "type", "string", "pattern", cases[i].pattern);
        gr_grammar *g = NULL;
        mw_err err = {{0}};
        if (gr_compile(s, &g, &err)) fail_msg("%s: %s", cases[i].pattern, err.msg);
        for (int k = 0; k < 4 && cases[i].yes[k]; k++)
            if (!acc(g, cases[i].yes[k]))
                fail_msg("%s refused %s", cases[i].pattern, cases[i].yes[k]);
        for (int k = 0; k < 4 && cases[i].no[k]; k++)
            if (acc(g, cases[i].no[k]))
                fail_msg("%s accepted %s", cases[i].pattern, cases[i].no[k]);
        gr_free(g);
        json_decref(s);
    }
}

/* A small vocabulary: single bytes, JSON pieces, multi-byte pieces, an empty (control) token
 * and two end ids. */
static const char *const VOCAB[] = {
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    " ",
    "{\"",
    "\":",
    "\",",
    "\"}",
    "a",
    "b",
    "na",
    "me",
    "name",
    "age",
    "0",
    "1",
    "12",
    "-",
    ".",
    "e",
    "true",
    "fal",
    "se",
    "null",
    "\\",
    "n",
    "u",
    "00e9",
    "\xc3",
    "\xa9",
    "\xc3\xa9",
    ", \"",
    "\": ",
    "},",
    "]}",
    "tags",
    "\"a",
    "bc",
    "\"]",
    "3",
    "x",
    "",
    "<eos>",
    "<end>",
    "\n",
    "1.5",
    /* every other letter and digit alone, so that any started word can be finished */
    "c",
    "d",
    "f",
    "g",
    "h",
    "i",
    "j",
    "k",
    "l",
    "m",
    "o",
    "p",
    "q",
    "r",
    "s",
    "t",
    "v",
    "w",
    "y",
    "z",
    "2",
    "4",
    "5",
    "6",
    "7",
    "8",
    "9",
    "E",
    "+",
    "A",
    "F",
    "D",
};
#define NV ((int32_t)(sizeof VOCAB / sizeof *VOCAB))
static const int32_t EOS[] = {46, 47};

static gr_vocab *small_vocab(void) {
    size_t lens[NV];
    for (int32_t i = 0; i < NV; i++) lens[i] = strlen(VOCAB[i]);
    gr_vocab *v = NULL;
    assert_int_equal(gr_vocab_new(VOCAB, lens, NV, EOS, 2, &v, NULL), 0);
    return v;
}

/* Brute force: feeds each token's bytes to a copy of the state. */
static bool allowed(const gr_grammar *g, const gr_state *s, int32_t id) {
    if (id == EOS[0] || id == EOS[1]) return gr_complete(g, s);
    const size_t n = strlen(VOCAB[id]);
    if (!n) return false;
    gr_state c = *s;
    for (size_t i = 0; i < n; i++)
        if (gr_feed(g, &c, (uint8_t)VOCAB[id][i])) return false;
    return true;
}

/* Random walks over g (schema names it in messages); frees g. */
static void check_walks_g(gr_grammar *g, const char *schema, unsigned seed) {
    gr_vocab *v = small_vocab();
    srand(seed);
    for (int walk = 0; walk < 40; walk++) {
        gr_matcher *m;
        assert_int_equal(gr_matcher_new(g, v, &m, NULL), 0);
        gr_state s;
        gr_state_init(g, &s);
        char text[4096];
        size_t tl = 0;
        for (int step = 0; step < 60; step++) {
            const uint64_t *bits = gr_matcher_mask(m);
            int32_t ok[NV], n_ok = 0;
            for (int32_t id = 0; id < NV; id++) {
                const bool want = allowed(g, &s, id), got = bits[id >> 6] >> (id & 63) & 1;
                if (want != got)
                    fail_msg("%s: after '%.*s' token %d '%s': mask %d, brute force %d",
                             schema ? schema : "{}", (int)tl, text, id, VOCAB[id], got, want);
                if (want) ok[n_ok++] = id;
            }
            float logits[NV + 3];
            for (int i = 0; i < NV + 3; i++) logits[i] = 1;
            assert_int_equal(gr_matcher_apply(m, logits, NV + 3), n_ok);
            for (int i = 0; i < NV + 3; i++)
                assert_int_equal(isinf(logits[i]) != 0, !(i < NV && allowed(g, &s, i)));
            if (n_ok == 0)
                fail_msg("%s: dead end after '%.*s'", schema ? schema : "{}", (int)tl, text);
            /* prefer closing once the text grows, so walks reach their end */
            int32_t pick = ok[rand() % n_ok];
            for (int i = 0; step > 30 && i < n_ok; i++)
                if (ok[i] == EOS[0] || VOCAB[ok[i]][0] == '}' || VOCAB[ok[i]][0] == ']' ||
                    VOCAB[ok[i]][0] == '"')
                    pick = ok[i];
            const int rc = gr_matcher_accept(m, pick);
            assert_true(rc >= 0);
            if (rc == 1) break;
            for (const char *p = VOCAB[pick]; *p; p++) {
                assert_int_equal(gr_feed(g, &s, (uint8_t)*p), 0);
                if (tl < sizeof text) text[tl++] = *p;
            }
        }
        assert_int_equal(gr_matcher_accept(m, -1), -1);
        gr_matcher_free(m);
    }
    gr_vocab_free(v);
    gr_free(g);
}

static void check_walks(const char *schema, unsigned seed) {
    check_walks_g(compile(schema), schema, seed);
}

static void test_mask_matches_brute_force(void **state) {
    (void)state;
    check_walks(NULL, 1);
    check_walks("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":"
                "{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\","
                "\"bc\",3]}}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
                2);
    check_walks("{\"type\":\"array\",\"items\":{\"type\":[\"number\",\"null\",\"boolean\"]},"
                "\"maxItems\":3}",
                3);
    check_walks("{\"type\":\"number\"}", 4);
    /* a pattern: every token walked, the mask still the brute force's, no dead end */
    check_walks("{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\",\"pattern\":"
                "\"^(na|me)+[0-9]?$\"},\"q\":{\"type\":[\"string\",\"null\"],\"pattern\":\"a.c\","
                "\"maxLength\":6}},\"required\":[\"p\",\"q\"],\"additionalProperties\":false}",
                8);
    check_walks_g(compile_alts((const char *[]){"{\"type\":\"number\"}"}, (const char *[]){"na:"},
                               (const char *[]){"\nme"}, 1),
                  "na: number", 6);
    /* alternatives told apart by their prefixes, each with its own value and suffix */
    check_walks_g(compile_alts((const char *[]){"{\"type\":\"number\"}",
                                                "{\"type\":\"object\",\"properties\":{\"a\":"
                                                "{\"enum\":[1,2]}},\"required\":[\"a\"]}",
                                                "{\"type\":\"string\",\"maxLength\":3}"},
                               (const char *[]){"na:", "nb", "x"}, (const char *[]){"\n", "", "me"},
                               3),
                  "three alternatives", 7);
    check_walks("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\","
                "\"maxLength\":4}},\"required\":[\"s\"]}",
                5);
}

/* gr_compile_alts: the prefix chooses; a prefix beginning another's is refused. */
static void test_alternatives(void **state) {
    (void)state;
    const char *schemas[] = {"{\"type\":\"integer\"}",
                             "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}},"
                             "\"required\":[\"x\"],\"additionalProperties\":false,"
                             "\"$defs\":{\"u\":{\"type\":\"null\"}}}",
                             "{\"$ref\":\"#/$defs/u\",\"$defs\":{\"u\":{\"type\":\"boolean\"}}}"};
    gr_grammar *g = compile_alts(schemas, (const char *[]){"<a ", "<b ", "<bb "},
                                 (const char *[]){">", "/>", ">"}, 3);
    assert_true(acc(g, "<a 12>"));
    assert_true(acc(g, "<b {\"x\":\"y\"}/>"));
    assert_true(acc(g, "<bb true>")); /* its own $defs, not the other schema's */
    assert_false(acc(g, "<bb null>"));
    assert_false(acc(g, "<a {\"x\":\"y\"}>"));
    assert_false(acc(g, "<b 12/>"));
    assert_false(acc(g, "<b {\"x\":\"y\"}>"));
    assert_false(acc(g, "<c 1>"));
    assert_false(acc(g, "<a "));
    gr_free(g);
    json_t *one = json_pack("{s:s}", "type", "null");
    const json_t *two[] = {one, one};
    mw_err err = {{0}};
    assert_int_equal(gr_compile_alts(two, (const char *[]){"f", "fg"}, NULL, 2, &g, &err), -1);
    assert_non_null(strstr(err.msg, "prefix"));
    assert_int_equal(gr_compile_alts(two, NULL, NULL, 2, &g, &err), -1);
    assert_null(g);
    json_decref(one);
}

/* The end ids only once the value is complete; the matcher refuses what the mask refuses. */
static void test_eos_and_refusal(void **state) {
    (void)state;
    gr_grammar *g = compile(NULL);
    gr_vocab *v = small_vocab();
    gr_matcher *m;
    assert_int_equal(gr_matcher_new(g, v, &m, NULL), 0);
    assert_int_equal(gr_matcher_accept(m, EOS[0]), -1);
    assert_int_equal(gr_matcher_accept(m, 2), -1);  /* "[": not an object */
    assert_int_equal(gr_matcher_accept(m, 45), -1); /* the empty token */
    assert_int_equal(gr_matcher_accept(m, 0), 0);
    assert_false(gr_matcher_complete(m));
    assert_int_equal(gr_matcher_accept(m, 1), 0);
    assert_true(gr_matcher_complete(m));
    const uint64_t *bits = gr_matcher_mask(m);
    for (int32_t id = 0; id < NV; id++)
        assert_int_equal(bits[id >> 6] >> (id & 63) & 1, id == EOS[0] || id == EOS[1]);
    assert_int_equal(gr_matcher_accept(m, EOS[1]), 1);
    gr_matcher_free(m);
    gr_vocab_free(v);
    gr_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_object),     cmocka_unit_test(test_schema_features),
        cmocka_unit_test(test_refusals),        cmocka_unit_test(test_mask_matches_brute_force),
        cmocka_unit_test(test_eos_and_refusal), cmocka_unit_test(test_alternatives),
        cmocka_unit_test(test_patterns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
