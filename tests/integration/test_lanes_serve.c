/* tests/integration/test_lanes_serve.c — micro-batches as `coordinator serve` reports them:
 * qwen3moe-tiny over two loopback nodes with --micro-batches 2; one request of a 40-token prompt.
 * Its prefill step runs split (a single sequence's rows cut in two lanes of 20), its decode steps
 * whole, and /metrics says so: steps by micro-batch count, rows per micro-batch, the exchanges'
 * time against the time blocked on them and the share hidden; the page passes
 * `promtool check metrics` (given MW_PROMTOOL). */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/mwt_http.h"

#define PROMPT_LEN 40

/* The value of the sample line that starts with `series` and a space (NAN: none). */
static double value_of(const char *page, const char *series) {
    const size_t n = strlen(series);
    for (const char *p = page; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, series, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
    return NAN;
}

static void promtool_check(const mwt_server *s, const char *page) {
    const char *promtool = getenv("MW_PROMTOOL");
    if (!promtool || access(promtool, X_OK)) {
        print_message("promtool not given (MW_PROMTOOL): the page's format is not checked\n");
        return;
    }
    char path[4200], cmd[8600];
    snprintf(path, sizeof path, "%s/metrics.txt", s->dir);
    assert_int_equal(mwt_write_file(path, page, strlen(page)), 0);
    snprintf(cmd, sizeof cmd, "%s check metrics < %s", promtool, path);
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    char *out = NULL, *err = NULL;
    if (mwt_run(sh, &out, &err, 60000)) fail_msg("promtool: %s%s", out ? out : "", err ? err : "");
    free(out);
    free(err);
}

static void test_a_long_prompt_splits_and_metrics_say_so(void **state) {
    (void)state;
    mwt_server s;
    const char *const extra[] = {"--loopback", "2", "--threads", "1", "--micro-batches", "2", NULL};
    assert_int_equal(
        mwt_serve_start(&s, mwt_fixture("llamacpp/qwen3moe-tiny/model.gguf"), extra, 300000), 0);
    char body[1024] = "{\"model\": \"model\", \"max_tokens\": 3, \"prompt\": [";
    for (int i = 0; i < PROMPT_LEN; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s%d", i ? "," : "",
                 (i * 37) % 200 + 5);
    strcat(body, "]}");
    mwt_resp r;
    assert_int_equal(mwt_http_request(s.port, "POST", "/v1/completions", body, &r), 0);
    if (r.status != 200) fail_msg("completion: %d %s", r.status, r.body ? r.body : "");
    mwt_resp_free(&r);
    assert_int_equal(mwt_http_request(s.port, "GET", "/metrics", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    const char *page = r.body;
    const double split = value_of(page, "moewire_step_micro_batches_total{micro_batches=\"2\"}");
    const double whole = value_of(page, "moewire_step_micro_batches_total{micro_batches=\"1\"}");
    const double lanes = value_of(page, "moewire_micro_batch_rows_count");
    const double rows = value_of(page, "moewire_micro_batch_rows_sum");
    const double ex = value_of(page, "moewire_expert_exchange_seconds_total");
    const double bl = value_of(page, "moewire_expert_blocked_seconds_total");
    const double hidden = value_of(page, "moewire_expert_exchange_hidden_ratio");
    print_message("serve: %g split step(s), %g whole; %g micro-batches of %g rows; exchanges "
                  "%.4f s, blocked %.4f s, hidden %.2f\n",
                  split, whole, lanes, rows, ex, bl, hidden);
    assert_true(split == 1); /* the prompt's step */
    assert_true(whole >= 1); /* the decode steps: one row each */
    assert_true(lanes == 2); /* its two micro-batches */
    assert_true(rows == PROMPT_LEN);
    assert_true(value_of(page, "moewire_micro_batch_rows_bucket{le=\"16\"}") == 0);
    assert_true(value_of(page, "moewire_micro_batch_rows_bucket{le=\"32\"}") == 2);
    assert_true(ex > 0 && bl >= 0 && bl <= ex);
    /* the distinct experts per layer: every layer of each of the three steps, the split one's
     * lanes counted together (its 40 rows chose more than one row's experts) */
    assert_true(value_of(page, "moewire_step_unique_experts_count") == 3 * 3);
    assert_true(value_of(page, "moewire_step_unique_experts_sum") > 9 * 2);
    assert_true(fabs(hidden - (1 - bl / ex)) < 1e-6);
    promtool_check(&s, page);
    mwt_resp_free(&r);
    assert_int_equal(mwt_serve_stop(&s, 30000), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_long_prompt_splits_and_metrics_say_so),
    };
    return cmocka_run_group_tests_name("micro-batches in serve", tests, NULL, NULL);
}
