/* tests/unit/test_jj.c — the Jinja engine (template/jj.h) on tricky constructs: every case of
 * tests/fixtures/templates/engine_cases.json (loops and loop.*, scoping, namespaces, macros and
 * call blocks, whitespace control, filters, tests, methods, slicing, Python number and repr text,
 * tojson) renders byte-identically to what python3-jinja2 rendered (the file holds its output);
 * its error cases fail with the line and column named; the sandbox's bounds hold (output, steps,
 * recursion, memory); a template renders from several threads at once. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj.h"
#include "template/jj_chat.h"
#include "tests/support/mw_test.h"

static json_t *load_cases(const char *name) {
    json_error_t je;
    json_t *j = json_load_file(mwt_fixture(name), 0, &je);
    if (!j) fail_msg("%s: %s", name, je.text);
    return j;
}

static json_t *cases(void) {
    return load_cases("templates/engine_cases.json");
}

static int render(const char *src, const json_t *ctx, const jj_limits *lim, char **out,
                  mw_err *err) {
    jj_template *t;
    if (jj_parse(src, strlen(src), &t, err)) return -1;
    size_t n;
    int rc = jj_render(t, ctx, lim, out, &n, err);
    if (!rc) assert_int_equal(n, strlen(*out));
    jj_free(t);
    return rc;
}

static void test_cases(void **state) {
    (void)state;
    json_t *j = cases(), *ctx = json_object_get(j, "ctx"), *c;
    size_t i, ok = 0, n = 0;
    json_array_foreach(json_object_get(j, "cases"), i, c) {
        if (json_object_get(c, "err")) continue;
        const char *src = json_string_value(json_object_get(c, "t"));
        const char *want = json_string_value(json_object_get(c, "out"));
        char *got = NULL;
        mw_err err = {{0}};
        n++;
        if (render(src, ctx, NULL, &got, &err))
            print_error("case %zu %s\n  failed: %s\n", i, src, err.msg);
        else if (strcmp(got, want))
            print_error("case %zu %s\n  want: %s\n  got:  %s\n", i, src, want, got);
        else
            ok++;
        free(got);
    }
    json_decref(j);
    assert_int_equal(ok, n);
}

/* engine_random.json (tests/jinja_random.py): random expressions; errors where jinja2 errs */
static void random_file(const char *name) {
    json_t *j = load_cases(name), *ctx = json_object_get(j, "ctx"), *c;
    size_t i, ok = 0;
    json_array_foreach(json_object_get(j, "cases"), i, c) {
        const char *src = json_string_value(json_object_get(c, "t"));
        const char *want = json_string_value(json_object_get(c, "out"));
        char *got = NULL;
        mw_err err = {{0}};
        int rc = render(src, ctx, NULL, &got, &err);
        if (!want && !rc)
            print_error("case %zu %s: jinja2 fails, we render '%s'\n", i, src, got);
        else if (want && rc)
            print_error("case %zu %s: we fail: %s\n", i, src, err.msg);
        else if (want && strcmp(got, want))
            print_error("case %zu %s\n  want: %s\n  got:  %s\n", i, src, want, got);
        else
            ok++;
        free(got);
    }
    size_t n = json_array_size(json_object_get(j, "cases"));
    json_decref(j);
    assert_true(n >= 1000);
    assert_int_equal(ok, n);
}

/* engine_whitespace.json (tests/jinja_random_ws.py): statements under every whitespace marker */
static void test_random(void **state) {
    (void)state;
    random_file("templates/engine_random.json");
    random_file("templates/engine_whitespace.json");
}

static void test_errors(void **state) {
    (void)state;
    json_t *j = cases(), *ctx = json_object_get(j, "ctx"), *c;
    size_t i, n = 0;
    json_array_foreach(json_object_get(j, "cases"), i, c) {
        if (!json_object_get(c, "err")) continue;
        const char *src = json_string_value(json_object_get(c, "t"));
        char *got = NULL;
        mw_err err = {{0}};
        n++;
        if (!render(src, ctx, NULL, &got, &err)) fail_msg("case %zu %s rendered: %s", i, src, got);
        if (strncmp(err.msg, "line ", 5)) fail_msg("case %zu: no position in '%s'", i, err.msg);
        json_t *line = json_object_get(c, "line");
        if (json_is_integer(line)) {
            char want[32];
            snprintf(want, sizeof want, "line %lld ", (long long)json_integer_value(line));
            if (strncmp(err.msg, want, strlen(want)))
                fail_msg("case %zu: '%s' does not start with '%s'", i, err.msg, want);
        }
    }
    assert_true(n >= 8);
    json_decref(j);
    /* the column too */
    char *got = NULL;
    mw_err err = {{0}};
    assert_int_equal(render("ab\ncd {{ 1 + }}", NULL, NULL, &got, &err), -1);
    assert_string_equal(err.msg, "line 2 column 11: unexpected end of print statement, expected "
                                 "an expression");
}

static void test_bounds(void **state) {
    (void)state;
    char *got = NULL;
    mw_err err = {{0}};
    jj_limits lim = jj_default_limits();
    lim.max_output = 1000;
    assert_int_equal(
        render("{% for i in range(100) %}{{ 'x' * 20 }}{% endfor %}", NULL, &lim, &got, &err), -1);
    assert_non_null(strstr(err.msg, "output is longer than 1000 bytes"));
    lim = jj_default_limits();
    lim.max_steps = 10000;
    assert_int_equal(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor "
                            "%}{% endfor %}",
                            NULL, &lim, &got, &err),
                     -1);
    assert_non_null(strstr(err.msg, "steps"));
    lim = jj_default_limits();
    assert_int_equal(
        render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, &lim, &got, &err),
        -1);
    assert_non_null(strstr(err.msg, "nested deeper"));
    lim.max_memory = 1 << 20;
    assert_int_equal(render("{% set ns = namespace(s='x') %}{% for i in range(30) %}{% set ns.s = "
                            "ns.s + ns.s %}{% endfor %}{{ ns.s|length }}",
                            NULL, &lim, &got, &err),
                     -1);
    assert_non_null(strstr(err.msg, "memory"));
    assert_int_equal(render("{{ range(1000000)|length }}", NULL, NULL, &got, &err), -1);
    /* values and expressions built deeper than the stack allows fail cleanly */
    assert_int_equal(render("{% set ns = namespace(x=1) %}{% for i in range(5000) %}{% set ns.x = "
                            "[ns.x] %}{% endfor %}{{ ns.x }}",
                            NULL, NULL, &got, &err),
                     -1);
    assert_non_null(strstr(err.msg, "nested deeper"));
    assert_int_equal(
        render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", NULL, NULL, &got, &err),
        -1);
    char *chain = malloc(100000);
    size_t w = (size_t)sprintf(chain, "{{ 1");
    for (int k = 0; k < 20000; k++) w += (size_t)sprintf(chain + w, " + 1");
    sprintf(chain + w, " }}");
    assert_int_equal(render(chain, NULL, NULL, &got, &err), -1);
    assert_non_null(strstr(err.msg, "nested deeper"));
    free(chain);
    /* deep nesting is refused at parse time, not by a stack overflow */
    size_t depth = 5000;
    char *deep = malloc(depth * 2 + 16);
    strcpy(deep, "{{ ");
    for (size_t k = 0; k < depth; k++) strcat(deep, "(");
    strcat(deep, "1");
    for (size_t k = 0; k < depth; k++) strcat(deep, ")");
    strcat(deep, " }}");
    assert_int_equal(render(deep, NULL, NULL, &got, &err), -1);
    assert_non_null(strstr(err.msg, "nested too deeply"));
    free(deep);
}

typedef struct job {
    jj_template *t;
    json_t *ctx;
    char *out;
} job;

static void *run_job(void *p) {
    job *j = p;
    size_t n;
    if (jj_render(j->t, j->ctx, NULL, &j->out, &n, NULL)) j->out = NULL;
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    const char *src = "{% for m in messages %}<{{ m.role }}>{{ m.content|trim }}{% endfor %}"
                      "{% if add_generation_prompt %}<assistant>{% endif %}";
    jj_template *t;
    mw_err err = {{0}};
    assert_int_equal(jj_parse(src, strlen(src), &t, &err), 0);
    json_t *msgs = json_pack("[{s:s,s:s},{s:s,s:s}]", "role", "user", "content", " hi ", "role",
                             "assistant", "content", "yo");
    jj_chat_in in = {.messages = msgs, .add_generation_prompt = true};
    job jobs[4];
    pthread_t th[4];
    for (int k = 0; k < 4; k++) {
        jobs[k] = (job){.t = t, .ctx = jj_chat_context(&in, &err)};
        assert_non_null(jobs[k].ctx);
        pthread_create(&th[k], NULL, run_job, &jobs[k]);
    }
    for (int k = 0; k < 4; k++) {
        pthread_join(th[k], NULL);
        assert_string_equal(jobs[k].out, "<user>hi<assistant>yo<assistant>");
        free(jobs[k].out);
        json_decref(jobs[k].ctx);
    }
    json_decref(msgs);
    jj_free(t);
}

static void test_chat_context(void **state) {
    (void)state;
    mw_err err = {{0}};
    json_t *msgs = json_pack("[{s:s,s:[{s:s,s:{s:s,s:s}}]}]", "role", "assistant", "tool_calls",
                             "id", "c1", "function", "name", "f", "arguments", "{\"x\": 1}");
    json_t *conv = jj_chat_args_to_objects(msgs, &err);
    json_t *args = json_object_get(
        json_object_get(json_array_get(json_object_get(json_array_get(conv, 0), "tool_calls"), 0),
                        "function"),
        "arguments");
    assert_true(json_is_object(args));
    assert_int_equal(json_integer_value(json_object_get(args, "x")), 1);
    /* no content with the calls: "" (a null too) */
    assert_string_equal(json_string_value(json_object_get(json_array_get(conv, 0), "content")), "");
    json_t *with_null =
        json_pack("[{s:s,s:n,s:[{s:s,s:{s:s,s:s}}]}]", "role", "assistant", "content", "tool_calls",
                  "id", "c1", "function", "name", "f", "arguments", "{}");
    json_t *conv2 = jj_chat_args_to_objects(with_null, &err);
    assert_string_equal(json_string_value(json_object_get(json_array_get(conv2, 0), "content")),
                        "");
    json_decref(conv2);
    json_decref(with_null);
    /* the original is left alone */
    assert_true(json_is_string(json_object_get(
        json_object_get(json_array_get(json_object_get(json_array_get(msgs, 0), "tool_calls"), 0),
                        "function"),
        "arguments")));
    json_t *kw = json_pack("{s:b,s:s}", "enable_thinking", 0, "bos_token", "<B>");
    jj_chat_in in = {.messages = conv, .bos_token = "<s>", .eos_token = "</s>", .kwargs = kw};
    json_t *ctx = jj_chat_context(&in, &err);
    assert_non_null(ctx);
    assert_true(json_is_null(json_object_get(ctx, "tools")));
    assert_string_equal(json_string_value(json_object_get(ctx, "bos_token")), "<B>");
    assert_string_equal(json_string_value(json_object_get(ctx, "eos_token")), "</s>");
    assert_true(json_is_false(json_object_get(ctx, "add_generation_prompt")));
    json_decref(ctx);
    json_decref(kw);
    json_decref(conv);
    json_decref(msgs);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),   cmocka_unit_test(test_random),
        cmocka_unit_test(test_errors),  cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_threads), cmocka_unit_test(test_chat_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
