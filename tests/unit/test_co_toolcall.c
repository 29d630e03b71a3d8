/* tests/unit/test_co_toolcall.c — tool calls read out of generated text (co_toolcall.h), per
 * format: Qwen3's <tool_call> JSON, DeepSeek-V3's (and V3.1's) and Kimi-K2's tool-call sections,
 * harmony's commentary channel; the same result whatever way the text is split into pieces
 * (every byte boundary, every pair for short texts), the stream's deltas (the id and name first,
 * once per call, then argument fragments that add up to the call's arguments and are whole
 * characters, wherever the pieces were cut), calls whose head is malformed given back as text,
 * announced calls cut short kept as calls, and the text a forced call is written between (which
 * reads back as the call). */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_toolcall.h"

typedef struct got {
    co_buf text;
    json_t *calls, *deltas;
} got;

static const char *fmt = "qwen3"; /* the format under test */

/* Whether s is whole UTF-8 characters. */
static bool utf8_ok(const char *s) {
    json_t *j = json_string(s);
    json_decref(j);
    return j != NULL;
}

/* The text fed in pieces cut at `cuts` (sorted offsets; none: whole). */
static got run(const char *s, const size_t *cuts, int n_cuts) {
    got g = {.calls = json_array(), .deltas = json_array()};
    co_toolcall *p = co_toolcall_new(fmt, 7);
    assert_non_null(p);
    size_t at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        const size_t end = i < n_cuts ? cuts[i] : strlen(s);
        assert_int_equal(co_toolcall_feed(p, s + at, end - at, &g.text, g.calls, g.deltas), 0);
        at = end;
    }
    assert_int_equal(co_toolcall_finish(p, &g.text, g.calls, g.deltas), 0);
    co_toolcall_free(p);
    return g;
}

static void got_free(got *g) {
    co_buf_free(&g->text);
    json_decref(g->calls);
    json_decref(g->deltas);
}

/* The deltas say the calls: per index, a first with the id, type and name and empty arguments,
 * then fragments (valid UTF-8: json strings) adding up to the arguments. */
static void check_deltas(const got *g, const char *s) {
    const size_t n = json_array_size(g->calls);
    for (size_t k = 0; k < n; k++) {
        json_t *call = json_array_get(g->calls, k), *fn = json_object_get(call, "function");
        co_buf args = {0};
        int heads = 0;
        size_t i;
        json_t *d;
        json_array_foreach(g->deltas, i, d) {
            assert_true((size_t)json_integer_value(json_object_get(d, "index")) < n);
            if ((size_t)json_integer_value(json_object_get(d, "index")) != k) continue;
            json_t *df = json_object_get(d, "function");
            if (json_object_get(d, "id")) {
                assert_int_equal(heads++, 0);
                assert_int_equal(args.len, 0);
                assert_true(json_equal(json_object_get(d, "id"), json_object_get(call, "id")));
                assert_string_equal(json_string_value(json_object_get(d, "type")), "function");
                assert_true(json_equal(json_object_get(df, "name"), json_object_get(fn, "name")));
                assert_string_equal(json_string_value(json_object_get(df, "arguments")), "");
            } else {
                assert_int_equal(heads, 1);
                assert_true(json_string_length(json_object_get(df, "arguments")) > 0);
                assert_true(utf8_ok(json_string_value(json_object_get(df, "arguments"))));
                co_buf_puts(&args, json_string_value(json_object_get(df, "arguments")));
            }
        }
        assert_int_equal(heads, 1);
        const char *want = json_string_value(json_object_get(fn, "arguments"));
        if (strcmp(args.p ? args.p : "", want))
            fail_msg("%s: deltas add up to '%s', the call's arguments are '%s'", s,
                     args.p ? args.p : "", want);
        co_buf_free(&args);
    }
}

static void expect(const char *s, const char *text, int n_calls, const char *name0,
                   const char *args0) {
    const size_t n = strlen(s);
    /* whole, then split at every byte, then at every pair of bytes (short texts) */
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b += (n < 80 ? 1 : n)) {
            const size_t cuts[2] = {a, b};
            got g = run(s, cuts, 2);
            const char *t = g.text.p ? g.text.p : "";
            if (strcmp(t, text))
                fail_msg("%s cut at %zu, %zu: text '%s', expected '%s'", s, a, b, t, text);
            assert_int_equal((int)json_array_size(g.calls), n_calls);
            check_deltas(&g, s);
            if (n_calls) {
                json_t *f = json_object_get(json_array_get(g.calls, 0), "function");
                assert_string_equal(json_string_value(json_object_get(f, "name")), name0);
                if (strcmp(json_string_value(json_object_get(f, "arguments")), args0))
                    fail_msg("%s cut at %zu, %zu: arguments '%s', expected '%s'", s, a, b,
                             json_string_value(json_object_get(f, "arguments")), args0);
                assert_string_equal(
                    json_string_value(json_object_get(json_array_get(g.calls, 0), "type")),
                    "function");
                assert_non_null(
                    json_string_value(json_object_get(json_array_get(g.calls, 0), "id")));
            }
            got_free(&g);
        }
}

static void test_calls(void **state) {
    (void)state;
    expect("no call here < tool", "no call here < tool", 0, NULL, NULL);
    /* read as it arrives: the arguments as written */
    expect("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", 1, "f",
           "{\"a\": 1}");
    expect(
        "<tool_call>{\"name\":\"f\",\"arguments\":{\"s\":\"}</tool_call> é\\\"{\"}}</tool_call>!",
        "!", 1, "f", "{\"s\":\"}</tool_call> é\\\"{\"}");
    /* read whole when it closes: arguments as a string, keys in another order */
    expect("Sure. <tool_call>{\"name\":\"g\",\"arguments\":\"{\\\"x\\\":2}\"}</tool_call> done",
           "Sure.  done", 1, "g", "{\"x\":2}");
    expect("<tool_call>{\"name\":\"h\"}</tool_call>", "", 1, "h", "{}");
    expect("<tool_call>{\"arguments\":{\"b\": 2},\"name\":\"k\"}</tool_call>", "", 1, "k",
           "{\"b\":2}");
    /* an announced call is a call: cut short, or with something after its arguments */
    expect("<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":", "", 1, "f", "{\"a\":");
    expect("<tool_call>{\"name\":\"f\",\"arguments\":{}", "", 1, "f", "{}");
    expect("<tool_call>{\"name\":\"f\",\"arguments\":{} x}</tool_call>", "x}", 1, "f", "{}");
    /* two calls, ids distinct */
    got g = run("<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":"
                "\"b\",\"arguments\":{}}</tool_call>",
                NULL, 0);
    assert_int_equal(json_array_size(g.calls), 2);
    assert_string_not_equal(json_string_value(json_object_get(json_array_get(g.calls, 0), "id")),
                            json_string_value(json_object_get(json_array_get(g.calls, 1), "id")));
    assert_string_equal(g.text.p, "\n");
    got_free(&g);
}

static void test_malformed_is_text(void **state) {
    (void)state;
    const char *bad[] = {
        "<tool_call>not json</tool_call>",
        "<tool_call>{\"arguments\":{}}</tool_call>",                 /* no name */
        "<tool_call>{\"name\":\"\",\"arguments\":{}}</tool_call>",   /* an empty name */
        "<tool_call>{\"name\":\"f\",\"arguments\":[1]}</tool_call>", /* arguments not an object */
        "text <tool_call",                                           /* a marker cut short */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect(bad[i], bad[i], 0, NULL, NULL);
}

#define DS_CALLS     "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"
#define DS_CALL      "<｜tool▁call▁begin｜>"
#define DS_END       "<｜tool▁call▁end｜>"
#define DS_SEP       "<｜tool▁sep｜>"

static void test_deepseek(void **state) {
    (void)state;
    fmt = "deepseek-v3";
    expect("Let me check." DS_CALLS DS_CALL "function" DS_SEP
           "get_w\n```json\n{\"c\": \"P\"}\n```" DS_END DS_CALLS_END,
           "Let me check.", 1, "get_w", "{\"c\": \"P\"}");
    /* V3.1: the name, then the arguments */
    expect(DS_CALLS DS_CALL "f" DS_SEP "{\"a\":[1]}" DS_END DS_CALLS_END, "", 1, "f",
           "{\"a\":[1]}");
    /* announced: cut short by the closing marker, or by the end */
    expect(DS_CALL "function" DS_SEP "f\n```json\n{\"a\":\n```" DS_END, "", 1, "f", "{\"a\":\n```");
    expect(DS_CALL "function" DS_SEP "f\n```json\n{}\n```", "", 1, "f", "{}");
    const char *bad[] = {
        DS_CALL "function" DS_SEP "f\n```json\n[1]\n```" DS_END, /* not an object */
        DS_CALL "no separator {}" DS_END,
        "text " DS_CALL "fun",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect(bad[i], bad[i], 0, NULL, NULL);
    fmt = "qwen3";
}

#define K_SEC     "<|tool_calls_section_begin|>"
#define K_SEC_END "<|tool_calls_section_end|>"
#define K_CALL    "<|tool_call_begin|>"
#define K_ARGS    "<|tool_call_argument_begin|>"
#define K_END     "<|tool_call_end|>"

static void test_kimi(void **state) {
    (void)state;
    fmt = "kimi-k2";
    expect("ok" K_SEC K_CALL "functions.get_time:0" K_ARGS "{\"tz\": \"UTC\"}" K_END K_SEC_END,
           "ok", 1, "get_time", "{\"tz\": \"UTC\"}");
    /* two calls in one section; the id is Kimi's own */
    got g = run(K_SEC K_CALL "functions.a:0" K_ARGS "{}" K_END K_CALL " functions.b:1 " K_ARGS
                             "{\"x\":1}" K_END K_SEC_END,
                NULL, 0);
    assert_int_equal(json_array_size(g.calls), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(g.calls, 1), "id")),
                        "functions.b:1");
    assert_null(g.text.p ? (g.text.len ? g.text.p : NULL) : NULL);
    got_free(&g);
    const char *bad[] = {
        K_CALL "functions.a" K_ARGS "{}" K_END,   /* no index */
        K_CALL "functions.a:x" K_ARGS "{}" K_END, /* not an index */
        K_CALL "functions.a:0 {}" K_END,          /* no arguments marker */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect(bad[i], bad[i], 0, NULL, NULL);
    /* announced: cut short by the closing marker, or by the end */
    expect(K_CALL "functions.a:0" K_ARGS "{\"x\"" K_END, "", 1, "a", "{\"x\"");
    expect(K_CALL "functions.a:0" K_ARGS "{}", "", 1, "a", "{}");
    fmt = "qwen3";
}

static void test_harmony(void **state) {
    (void)state;
    fmt = "harmony";
    /* <|call|> is a stop token: the end of the generation closes the call */
    expect("<|channel|>commentary to=functions.get_w <|constrain|>json<|message|>{\"c\":\"P\"}", "",
           1, "get_w", "{\"c\":\"P\"}");
    expect("<|channel|>commentary to=functions.f<|message|>{}<|call|>", "", 1, "f", "{}");
    expect("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":", "", 1, "f",
           "{\"a\":");
    const char *bad[] = {
        "<|channel|>commentary to=functions.f json",         /* no message */
        "<|channel|>commentary to=functions. <|message|>{}", /* no name */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect(bad[i], bad[i], 0, NULL, NULL);
    fmt = "qwen3";
}

#define K3_O "<|open|>"
#define K3_C "<|close|>"
#define K3_S "<|sep|>"

/* Kimi K3's tools section as its parser writes it: a json section, or argument sections with
 * their JSON types (given as the JSON object they make), both read as they arrive; attribute
 * values unescaped. */
static void test_kimi_k3(void **state) {
    (void)state;
    fmt = "kimi-k3";
    expect("Sure." K3_C "response" K3_S K3_O "tools" K3_S K3_O
           "call tool=\"get_w\" index=\"1\"" K3_S K3_O "json type=\"object\"" K3_S
           "{\"c\": \"P\"}" K3_C "json" K3_S K3_C "call" K3_S K3_C "tools" K3_S K3_C "message" K3_S,
           "Sure.", 1, "get_w", "{\"c\": \"P\"}");
    expect(K3_O "tools" K3_S K3_O "call tool=\"f\" index=\"1\"" K3_S K3_O
                "argument key=\"city\" type=\"string\"" K3_S "Paris \"&\" co" K3_C
                "argument" K3_S K3_O "argument key=\"a&quot;b\" type=\"number\"" K3_S "2.5" K3_C
                "argument" K3_S K3_O "argument key=\"o\" type=\"object\"" K3_S
                "{\"x\": [true, null]}" K3_C "argument" K3_S K3_C "call" K3_S K3_C "tools" K3_S,
           "", 1, "f",
           "{\"city\":\"Paris \\\"&\\\" co\",\"a\\\"b\":2.5,\"o\":{\"x\":[true,null]}}");
    expect(K3_O "call tool=\"f\" index=\"1\"" K3_S K3_C "call" K3_S, "", 1, "f", "{}");
    /* a string escaped as jansson writes it (control characters, quotes, backslashes, UTF-8) */
    expect(K3_O "call tool=\"f\" index=\"1\"" K3_S K3_O "argument key=\"s\" type=\"string\"" K3_S
                "a\n\t\\\"\x01\xc3\xa9\xe2\x82\xac<|x" K3_C "argument" K3_S K3_C "call" K3_S,
           "", 1, "f", "{\"s\":\"a\\n\\t\\\\\\\"\\u0001\xc3\xa9\xe2\x82\xac<|x\"}");
    /* cut short in a string (the generation's end): closed where it stands */
    expect(K3_O "call tool=\"f\" index=\"1\"" K3_S K3_O "argument key=\"c\" type=\"string\"" K3_S
                "Par",
           "", 1, "f", "{\"c\":\"Par\"}");
    /* a later section that does not read ends the arguments; it goes to the text */
    expect(K3_O "call tool=\"f\" index=\"1\"" K3_S K3_O "argument key=\"c\" type=\"string\"" K3_S
                "P" K3_C "argument" K3_S K3_O "argument key=\"n\" type=\"number\"" K3_S "ten" K3_C
                "argument" K3_S K3_C "call" K3_S,
           K3_O "argument key=\"n\" type=\"number\"" K3_S "ten" K3_C "argument" K3_S, 1, "f",
           "{\"c\":\"P\"}");
    expect(K3_O "call tool=\"f\" index=\"1\"" K3_S K3_O "argument key=\"c\" type=\"string\"" K3_S
                "P" K3_C "argument" K3_S K3_O "argument key=\"c\" type=\"string\"" K3_S "Q" K3_C
                "argument" K3_S K3_C "call" K3_S,
           K3_O "argument key=\"c\" type=\"string\"" K3_S "Q" K3_C "argument" K3_S, 1, "f",
           "{\"c\":\"P\"}"); /* a key given twice */
    /* streamed: the call is announced and its string given before the section closes */
    {
        const char *head = K3_O "tools" K3_S K3_O "call tool=\"get_w\" index=\"1\"" K3_S K3_O
                                "argument key=\"city\" type=\"string\"" K3_S "Pari";
        got g = {.calls = json_array(), .deltas = json_array()};
        co_toolcall *p = co_toolcall_new(fmt, 7);
        assert_int_equal(co_toolcall_feed(p, head, strlen(head), &g.text, g.calls, g.deltas), 0);
        assert_int_equal((int)json_array_size(g.calls), 0);
        co_buf args = {0};
        size_t i;
        json_t *d;
        json_array_foreach(g.deltas, i, d) {
            json_t *fn = json_object_get(d, "function");
            if (i == 0)
                assert_string_equal(json_string_value(json_object_get(fn, "name")), "get_w");
            co_buf_puts(&args, json_string_value(json_object_get(fn, "arguments")));
        }
        co_buf_add(&args, "", 1);
        assert_string_equal(args.p, "{\"city\":\"Pari");
        co_buf_free(&args);
        co_toolcall_free(p);
        got_free(&g);
    }
    const char *bad[] = {
        K3_O "call tool=\"f\" index=\"1\"" K3_S K3_O "argument key=\"n\" type=\"number\"" K3_S
             "ten" K3_C "argument" K3_S K3_C "call" K3_S, /* not its type */
        K3_O "call tool=\"f\" index=\"1\"" K3_S "stray" K3_C "call" K3_S,
        K3_O "call tool=\"\" index=\"1\"" K3_S K3_C "call" K3_S, /* no name */
        K3_O "call tool=\"f\" index=\"1\"" K3_S,                 /* never closed */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect(bad[i], bad[i], 0, NULL, NULL);
    fmt = "qwen3";
}

/* A forced call's text, with arguments between, reads back as that call in every format. */
static void test_forced(void **state) {
    (void)state;
    static const char *const all[] = {"qwen3",   "deepseek-v3", "deepseek-r1",
                                      "kimi-k2", "harmony",     "kimi-k3"};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
        fmt = all[k];
        assert_true(co_toolcall_known(fmt));
        char before[300], after[300], text[700];
        assert_int_equal(co_toolcall_forced(fmt, "get_weather", before, after, sizeof before), 0);
        snprintf(text, sizeof text, "%s{\"city\": \"Paris\"}%s", before, after);
        expect(text, "", 1, "get_weather", "{\"city\": \"Paris\"}");
        assert_int_equal(co_toolcall_forced(fmt, "bad name", before, after, sizeof before), -1);
        assert_int_equal(co_toolcall_forced(fmt, "f", before, after, 8), -1); /* too small */
    }
    fmt = "qwen3";
    assert_false(co_toolcall_known("chatml"));
    assert_false(co_toolcall_known(NULL));
    assert_null(co_toolcall_new("chatml", 1));
    assert_true(co_toolcall_name_ok("a-b_9"));
    assert_false(co_toolcall_name_ok(""));
    assert_false(co_toolcall_name_ok("a.b"));
    assert_non_null(co_toolcall_specials("kimi-k2"));
    assert_non_null(co_toolcall_specials("harmony"));
    assert_false(co_toolcall_keeps_specials("harmony"));
    assert_false(co_toolcall_in_answer("harmony"));
    assert_true(co_toolcall_keeps_specials("deepseek-v3"));
    assert_true(co_toolcall_in_answer("qwen3"));
    assert_true(co_toolcall_in_answer("kimi-k3"));
    assert_false(co_toolcall_keeps_specials("kimi-k3"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls),    cmocka_unit_test(test_malformed_is_text),
        cmocka_unit_test(test_deepseek), cmocka_unit_test(test_kimi),
        cmocka_unit_test(test_harmony),  cmocka_unit_test(test_kimi_k3),
        cmocka_unit_test(test_forced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
