/* tests/integration/test_serve_tools.c — tool calling and structured outputs end to end: the
 * official openai npm client (tests/openai/tools_openai.mjs, with ajv validating what it gets)
 * against `coordinator serve --loopback 2` on a fixture of each family: qwen3moe-tiny
 * (--chat-template qwen3), deepseek2-tiny (deepseek-v3), kimi-linear-tiny (kimi-k2),
 * gpt-oss-tiny (harmony) and kimi-k3-tiny (kimi-k3); deepseek, kimi-k2 and harmony render with
 * their model's real template (--chat-template-file, tests/fixtures/templates) since their C
 * renderers write no tool turns, and kimi-k3 with both its C renderer and its own template:
 * forced tool calls (named and required), the tool's result sent back and an answer, whole and
 * streamed; with qwen3 also json_schema and json_object outputs and an unsupported schema feature
 * refused. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/mwt_http.h"

static mwt_server s; /* stopped by the teardown too, so a failing test leaves no server behind */

static int stop_server(void **st) {
    (void)st;
    mwt_serve_stop(&s, 60000);
    return 0;
}

/* The client's tests against serve on model with the chat format `family` (and template file
 * `tmpl` under tests/fixtures/templates, or NULL). */
static void client(const char *model, const char *family, const char *tmpl) {
    char tpath[4096];
    const char *extra[16] = {"--loopback",      "2",    "--threads", "2", "--max-seqs", "4",
                             "--chat-template", family, NULL};
    if (tmpl) {
        snprintf(tpath, sizeof tpath, "%s", mwt_fixture(tmpl));
        extra[8] = "--chat-template-file";
        extra[9] = tpath;
    }
    assert_int_equal(mwt_serve_start(&s, mwt_fixture(model), extra, 300000), 0);
    char script[4096];
    snprintf(script, sizeof script, "%s/tests/openai/tools_openai.mjs",
             getenv("MW_SRC") ? getenv("MW_SRC") : ".");
    setenv("MW_URL", s.url, 1);
    setenv("MW_MODEL", "model", 1);
    setenv("MW_FAMILY", family, 1);
    const char *npm = getenv("MW_NPM") && *getenv("MW_NPM") ? getenv("MW_NPM") : "build/npm";
    char *argv[] = {"/usr/bin/env", "node", "--test-reporter=spec", script, (char *)npm, NULL};
    char *out = NULL, *err = NULL;
    const int rc = mwt_run(argv, &out, &err, 900000);
    printf("%s%s", out ? out : "", err ? err : "");
    free(out);
    free(err);
    if (rc != 0) fail_msg("%s: the node client failed (exit %d)", family, rc);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
}

static void test_qwen3(void **st) {
    (void)st;
    client("llamacpp/qwen3moe-tiny/model.gguf", "qwen3", NULL);
}

static void test_deepseek(void **st) {
    (void)st;
    client("llamacpp/deepseek2-tiny/model.gguf", "deepseek-v3",
           "templates/deepseek-ai-DeepSeek-V3.1.jinja");
}

static void test_kimi_k2(void **st) {
    (void)st;
    client("llamacpp/kimi-linear-tiny/model.gguf", "kimi-k2", "templates/moonshotai-Kimi-K2.jinja");
}

static void test_kimi_k3(void **st) {
    (void)st;
    client("llamacpp/kimi-k3-tiny/model.gguf", "kimi-k3", NULL);
}

/* Kimi K3's own template, which thinks by `thinking`: a forced call's prompt opens the response */
static void test_kimi_k3_template(void **st) {
    (void)st;
    client("llamacpp/kimi-k3-tiny/model.gguf", "kimi-k3", "templates/Kimi-K3.jinja");
}

static void test_harmony(void **st) {
    (void)st;
    client("llamacpp/gpt-oss-tiny/model.gguf", "harmony", "templates/openai-gpt-oss-120b.jinja");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_qwen3, stop_server),
        cmocka_unit_test_teardown(test_deepseek, stop_server),
        cmocka_unit_test_teardown(test_kimi_k2, stop_server),
        cmocka_unit_test_teardown(test_harmony, stop_server),
        cmocka_unit_test_teardown(test_kimi_k3, stop_server),
        cmocka_unit_test_teardown(test_kimi_k3_template, stop_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
