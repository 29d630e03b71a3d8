/* tests/integration/test_fleet.c — the fleet from the command line: routing traces written by
 * `coordinator generate` and `serve` (the in-process and the remote expert backends write the
 * same bytes), `vindex routing-stats` on them, and refusing a corrupt trace. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_http.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *dir;
static char synth[4200];

static char *path_in(const char *name) {
    static char buf[8][4300];
    static int n;
    char *p = buf[n++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static int run(char *const *argv, char **out, char **err) {
    char *e = NULL;
    int rc = mwt_run(argv, out, &e, 300000);
    if (err)
        *err = e;
    else {
        if (rc) fprintf(stderr, "%s exited %d:\n%s\n", argv[0], rc, e ? e : "");
        free(e);
    }
    return rc;
}

static int setup(void **state) {
    (void)state;
    dir = mwt_tmpdir("fleet");
    snprintf(synth, sizeof synth, "%s/synth.vindex", dir);
    char *argv[] = {(char *)mwt_bin("vindex"),
                    "synth",
                    "--arch",
                    "gpt-oss",
                    "--layers",
                    "3",
                    "--hidden",
                    "256",
                    "--heads",
                    "4",
                    "--kv-heads",
                    "2",
                    "--head-dim",
                    "64",
                    "--experts",
                    "16",
                    "--top-k",
                    "4",
                    "--expert-ff",
                    "128",
                    "--vocab",
                    "300",
                    "--seed",
                    "5",
                    "--format",
                    "vindex",
                    synth,
                    NULL};
    return run(argv, NULL, NULL) ? -1 : 0;
}

static int teardown(void **state) {
    (void)state;
    mwt_rmrf(dir);
    free(dir);
    return 0;
}

static int generate(const char *trace, const char *const *extra) {
    char *argv[40];
    int n = 0;
    const char *head[] = {
        mwt_bin("coordinator"), "generate",     "--model", synth,       "--tokens",
        "1,5,9,13,17,21,25,29", "--max-tokens", "24",      "--threads", "1",
        "--trace-routing",      trace,          NULL};
    for (int i = 0; head[i]; i++) argv[n++] = (char *)head[i];
    for (int i = 0; extra && extra[i]; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return run(argv, NULL, NULL);
}

static json_t *stats_json(const char *trace) {
    char *argv[] = {(char *)mwt_bin("vindex"), "routing-stats", (char *)trace, "--json", NULL};
    char *out = NULL;
    assert_int_equal(run(argv, &out, NULL), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    if (!j) fail_msg("routing-stats --json: %s", je.text);
    free(out);
    return j;
}

/* The same prompt through the in-process backend and through two loopback nodes in exact mode
 * routes the same way: the two traces are the same bytes. */
static void test_trace_local_and_remote_agree(void **state) {
    (void)state;
    const char *a = path_in("local.trace"), *b = path_in("remote.trace");
    assert_int_equal(generate(a, NULL), 0);
    const char *remote[] = {"--loopback", "2", "--exact", "--wire", "f32", NULL};
    assert_int_equal(generate(b, remote), 0);
    size_t na, nb;
    char *x = mwt_read_file(a, &na), *y = mwt_read_file(b, &nb);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(na, nb);
    assert_memory_equal(x, y, na);
    free(x);
    free(y);
    json_t *j = stats_json(a);
    assert_int_equal(json_integer_value(json_object_get(j, "n_expert")), 16);
    json_t *layers = json_object_get(j, "layers");
    assert_int_equal(json_array_size(layers), 3);
    /* 8 prompt rows + 23 decode rows (the last token is not fed back) */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(layers, 0), "rows")), 31);
    json_decref(j);
    char *argv[] = {(char *)mwt_bin("vindex"), "routing-stats", (char *)a, NULL};
    char *out = NULL;
    assert_int_equal(run(argv, &out, NULL), 0);
    assert_non_null(strstr(out, "layer 2: 31 rows"));
    assert_non_null(strstr(out, "distinct experts per batch"));
    free(out);
}

static void test_corrupt_trace_is_refused(void **state) {
    (void)state;
    const char *a = path_in("c.trace");
    assert_int_equal(generate(a, NULL), 0);
    size_t n;
    char *b = mwt_read_file(a, &n);
    b[n - 3] ^= 1;
    assert_int_equal(mwt_write_file(a, b, n), 0);
    free(b);
    char *argv[] = {(char *)mwt_bin("vindex"), "routing-stats", (char *)a, NULL};
    char *err = NULL;
    assert_int_equal(run(argv, NULL, &err), 1);
    assert_non_null(strstr(err, "checksum does not match"));
    free(err);
}

/* serve writes the trace of every step it runs, and finishes it on SIGTERM. */
static void test_serve_traces(void **state) {
    (void)state;
    const char *t = path_in("serve.trace");
    const char *extra[] = {"--trace-routing", t, "--threads", "1", NULL};
    mwt_server s;
    assert_int_equal(mwt_serve_start(&s, synth, extra, 120000), 0);
    mwt_resp r;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(mwt_http_request(s.port, "POST", "/v1/completions",
                                          "{\"model\":\"synth\",\"prompt\":[3,4,5,6],\"max_tokens\":5}", &r),
                         0);
        if (r.status != 200) fail_msg("status %d: %s", r.status, r.body);
        mwt_resp_free(&r);
    }
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
    json_t *j = stats_json(t);
    json_t *l0 = json_array_get(json_object_get(j, "layers"), 0);
    /* each request: 4 prompt rows + 4 decode rows */
    assert_int_equal(json_integer_value(json_object_get(l0, "rows")), 16);
    json_decref(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_local_and_remote_agree),
        cmocka_unit_test(test_corrupt_trace_is_refused),
        cmocka_unit_test(test_serve_traces),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
