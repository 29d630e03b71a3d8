/* tests/unit/test_co_toolcall.c — tool calls read out of generated text (co_toolcall.h): Qwen3's
 * <tool_call> JSON, the same result whatever way the text is split into pieces (every byte
 * boundary), malformed and unclosed calls given back as text, and the markers a forced call is
 * written between. */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_toolcall.h"

typedef struct got {
    co_buf text;
    json_t *calls;
} got;

/* The text fed in pieces cut at `cuts` (sorted offsets; none: whole). */
static got run(const char *s, const size_t *cuts, int n_cuts) {
    got g = {.calls = json_array()};
    co_toolcall *p = co_toolcall_new("qwen3", 7);
    assert_non_null(p);
    size_t at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        const size_t end = i < n_cuts ? cuts[i] : strlen(s);
        assert_int_equal(co_toolcall_feed(p, s + at, end - at, &g.text, g.calls), 0);
        at = end;
    }
    assert_int_equal(co_toolcall_finish(p, &g.text, g.calls), 0);
    co_toolcall_free(p);
    return g;
}

static void got_free(got *g) {
    co_buf_free(&g->text);
    json_decref(g->calls);
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
            if (n_calls) {
                json_t *f = json_object_get(json_array_get(g.calls, 0), "function");
                assert_string_equal(json_string_value(json_object_get(f, "name")), name0);
                assert_string_equal(json_string_value(json_object_get(f, "arguments")), args0);
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
    expect("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", 1, "f",
           "{\"a\":1}");
    expect("Sure. <tool_call>{\"name\":\"g\",\"arguments\":\"{\\\"x\\\":2}\"}</tool_call> done",
           "Sure.  done", 1, "g", "{\"x\":2}");
    expect("<tool_call>{\"name\":\"h\"}</tool_call>", "", 1, "h", "{}");
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
        "<tool_call>{\"name\":\"f\",\"arguments\":{}",               /* never closed */
        "text <tool_call",                                           /* a marker cut short */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect(bad[i], bad[i], 0, NULL, NULL);
}

static void test_formats(void **state) {
    (void)state;
    assert_true(co_toolcall_known("qwen3"));
    assert_false(co_toolcall_known("harmony"));
    assert_false(co_toolcall_known(NULL));
    assert_null(co_toolcall_new("deepseek-v3", 1));
    const char *before, *after;
    co_toolcall_markers("qwen3", &before, &after);
    assert_string_equal(before, "<tool_call>\n");
    assert_string_equal(after, "\n</tool_call>");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls),
        cmocka_unit_test(test_malformed_is_text),
        cmocka_unit_test(test_formats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
