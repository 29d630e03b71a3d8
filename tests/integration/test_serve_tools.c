/* tests/integration/test_serve_tools.c — tool calling and structured outputs end to end: the
 * official openai npm client (tests/openai/tools_openai.mjs, with ajv validating what it gets)
 * against `coordinator serve --loopback 2 --chat-template qwen3` on the qwen3moe-tiny fixture:
 * forced tool calls (named and required), the tool's result sent back and an answer, whole and
 * streamed; json_schema and json_object outputs; an unsupported schema feature refused. */
#include "tests/support/mw_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/mwt_http.h"

#define MODEL "llamacpp/qwen3moe-tiny/model.gguf"

static mwt_server s; /* stopped by the teardown too, so a failing test leaves no server behind */

static int stop_server(void **st) {
    (void)st;
    mwt_serve_stop(&s, 60000);
    return 0;
}

static void test_tools_client(void **st) {
    (void)st;
    const char *const extra[] = {"--loopback",      "2",     "--threads", "2", "--max-seqs", "4",
                                 "--chat-template", "qwen3", NULL};
    assert_int_equal(mwt_serve_start(&s, mwt_fixture(MODEL), extra, 300000), 0);
    char script[4096];
    snprintf(script, sizeof script, "%s/tests/openai/tools_openai.mjs",
             getenv("MW_SRC") ? getenv("MW_SRC") : ".");
    setenv("MW_URL", s.url, 1);
    setenv("MW_MODEL", "model", 1);
    const char *npm = getenv("MW_NPM") && *getenv("MW_NPM") ? getenv("MW_NPM") : "build/npm";
    char *argv[] = {"/usr/bin/env", "node", "--test-reporter=spec", script, (char *)npm, NULL};
    char *out = NULL, *err = NULL;
    const int rc = mwt_run(argv, &out, &err, 900000);
    printf("%s%s", out ? out : "", err ? err : "");
    free(out);
    free(err);
    if (rc != 0) fail_msg("the node client failed (exit %d)", rc);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(test_tools_client, stop_server)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
