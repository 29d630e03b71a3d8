/* tests/integration/test_jinja_corpus.c — real models' chat templates (tests/fixtures/templates,
 * from llama.cpp's repository: see SOURCES there) rendered with every message list of cases/
 * (system and developer prompts, multi-turn, tool calls and results, reasoning, empty and unicode
 * content, content parts) with and without tools and the generation prompt: moewire's engine must
 * produce byte for byte what python3-jinja2 does in transformers' environment
 * (tests/jinja_ref.py), and fail where it fails. Then `coordinator chat-template` prints the same
 * text on one pair, and names the line and column of a broken template. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "template/jj.h"
#include "template/jj_chat.h"
#include "tests/support/mw_test.h"

/* Debian's python3-jinja2 when the system python has it (the reference), else a python3 on PATH */
static const char *python(void) {
    static char found[4096];
    char *out = NULL, *err = NULL;
    char *argv[] = {"/usr/bin/python3", "-c", "import jinja2", NULL};
    int rc = access(argv[0], X_OK) ? -1 : mwt_run(argv, &out, &err, 60000);
    free(out);
    free(err);
    if (rc == 0) return argv[0];
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        size_t k = strcspn(p, ":");
        snprintf(found, sizeof found, "%.*s/python3", (int)k, p);
        if (!access(found, X_OK)) return found;
        p += k + (p[k] == ':');
    }
    fail_msg("no python3 with jinja2 (deploy/deps.sh installs python3-jinja2)");
    return NULL;
}

static json_t *reference(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/ref.json", mwt_tmp);
    char *argv[] = {(char *)python(),
                    (char *)mwt_repo_path("tests/jinja_ref.py"),
                    "--corpus",
                    (char *)mwt_fixture("templates"),
                    path,
                    NULL};
    char *out = NULL, *err = NULL;
    int rc = mwt_run(argv, &out, &err, 600000);
    if (rc) fail_msg("jinja_ref.py failed (%d): %s", rc, err ? err : "");
    free(out);
    free(err);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fail_msg("%s: %s", path, je.text);
    return j;
}

static json_t *load(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fail_msg("%s: %s", path, je.text);
    return j;
}

/* what tests/jinja_ref.py's VARIANTS hold */
static json_t *context(const char *variant, json_t *msgs, json_t *tools) {
    bool gen = strcmp(variant, "nogen") != 0;
    json_t *kw = strcmp(variant, "nogen") ? NULL : json_pack("{s:b}", "enable_thinking", 0);
    jj_chat_in in = {.messages = msgs,
                     .tools = strcmp(variant, "tools") ? NULL : tools,
                     .add_generation_prompt = gen,
                     .bos_token = "<s>",
                     .eos_token = "</s>",
                     .kwargs = kw};
    mw_err err = {{0}};
    json_t *ctx = jj_chat_context(&in, &err);
    if (!ctx) fail_msg("%s", err.msg);
    json_decref(kw);
    return ctx;
}

/* one key "TEMPLATE|CASE|VARIANT": 1 when ours matches */
static int check(const char *key, const json_t *want, json_t *tools) {
    char tname[256], cname[256], variant[32];
    if (sscanf(key, "%255[^|]|%255[^|]|%31s", tname, cname, variant) != 3)
        fail_msg("bad key %s", key);
    const char *dir = mwt_fixture("templates");
    char tpath[4096], cdir[4096];
    snprintf(tpath, sizeof tpath, "%s/%s", dir, tname);
    snprintf(cdir, sizeof cdir, "%s/cases", dir);
    size_t len;
    char *src = mwt_read_file(tpath, &len);
    assert_non_null(src);
    json_t *msgs = load(cdir, cname), *ctx = context(variant, msgs, tools);
    jj_template *t = NULL;
    char *out = NULL;
    size_t n = 0;
    mw_err err = {{0}};
    int rc = jj_parse(src, len, &t, &err);
    if (!rc) rc = jj_render(t, ctx, NULL, &out, &n, &err);
    int ok;
    if (json_is_null(want)) {
        ok = rc != 0;
        if (!ok) print_error("%s: jinja2 fails, we render\n", key);
    } else if (rc) {
        ok = 0;
        print_error("%s: jinja2 renders, we fail: %s\n", key, err.msg);
    } else {
        const char *w = json_string_value(want);
        size_t wn = json_string_length(want), i = 0;
        while (i < n && i < wn && w[i] == out[i]) i++;
        ok = i == n && i == wn;
        if (!ok)
            print_error("%s: differs at byte %zu\n  want: %.80s\n  got:  %.80s\n", key, i,
                        w + (i > 20 ? i - 20 : 0), out + (i > 20 ? i - 20 : 0));
    }
    free(out);
    free(src);
    jj_free(t);
    json_decref(ctx);
    json_decref(msgs);
    return ok;
}

static void test_corpus(void **state) {
    (void)state;
    json_t *ref = reference(), *tools = load(mwt_fixture("templates"), "tools.json"), *v;
    const char *key;
    size_t ok = 0, rendered = 0;
    json_object_foreach(ref, key, v) {
        ok += (size_t)check(key, v, tools);
        rendered += !json_is_null(v);
    }
    fprintf(stderr, "jinja corpus: %zu of %zu pairs identical (%zu rendered by jinja2)\n", ok,
            json_object_size(ref), rendered);
    assert_true(json_object_size(ref) >= 1000);
    assert_true(rendered * 10 >= json_object_size(ref) * 7); /* the corpus mostly renders */
    assert_int_equal(ok, json_object_size(ref));
    json_decref(tools);
    json_decref(ref);
}

static void test_cli(void **state) {
    (void)state;
    const char *co = mwt_bin("coordinator");
    char tmpl[4096], cases[4096], tools[4096];
    snprintf(tmpl, sizeof tmpl, "%s", mwt_fixture("templates/Qwen-Qwen3-0.6B.jinja"));
    snprintf(cases, sizeof cases, "%s", mwt_fixture("templates/cases/tool_calls.json"));
    snprintf(tools, sizeof tools, "%s", mwt_fixture("templates/tools.json"));
    char *argv[] = {(char *)co, "chat-template", "--template", tmpl,    "--messages",
                    cases,      "--tools",       tools,        "--bos", "<s>",
                    "--eos",    "</s>",          NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(mwt_run(argv, &out, &err, 60000), 0);
    char *pargv[] = {(char *)python(),
                     (char *)mwt_repo_path("tests/jinja_ref.py"),
                     tmpl,
                     cases,
                     "--tools",
                     tools,
                     "--bos",
                     "<s>",
                     "--eos",
                     "</s>",
                     NULL};
    char *pout = NULL, *perr = NULL;
    assert_int_equal(mwt_run(pargv, &pout, &perr, 60000), 0);
    assert_string_equal(out, pout);
    assert_non_null(strstr(out, "<tool_call>"));
    assert_int_equal(out[strlen(out) - 1], '\n'); /* the template's own; nothing added */
    free(out);
    free(err);
    free(pout);
    free(perr);
    /* a broken template: line and column, exit 1 */
    char bad[4096];
    snprintf(bad, sizeof bad, "%s/bad.jinja", mwt_tmp);
    const char *text = "{% for m in messages %}\n  {{ m.content | }}\n{% endfor %}";
    assert_int_equal(mwt_write_file(bad, text, strlen(text)), 0);
    char *bargv[] = {(char *)co, "chat-template", "--template", bad, "--messages", cases, NULL};
    assert_int_equal(mwt_run(bargv, &out, &err, 60000), 1);
    assert_string_equal(out, "");
    assert_non_null(strstr(err, "line 2 column 18"));
    free(out);
    free(err);
    char *uargv[] = {(char *)co, "chat-template", "--messages", cases, NULL};
    assert_int_equal(mwt_run(uargv, &out, &err, 60000), 2);
    free(out);
    free(err);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_corpus), cmocka_unit_test(test_cli)};
    return cmocka_run_group_tests(tests, mwt_tmp_setup, mwt_tmp_teardown);
}
