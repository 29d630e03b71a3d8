/* tests/integration/test_bench_tokenizer.c — bench_tokenizer's llama.cpp side by side, with a
 * stand-in for the llama_tok driver (a shell script that logs its arguments and the size of the
 * text file it is given, and prints the driver's JSON with a fixed encode time): it is called
 * once per round with the same vocabulary, the benchmark's text and the run count; its figures
 * come back with the ratios to ours, and whether its ids are ours (by the hash of the ids); a
 * failing driver is reported with its stderr; without one the comparison is said to be skipped.
 */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FAKE_FNV is the ids' hash it claims; FAKE_FAIL=1 makes it fail as the driver does. */
static const char fake_script[] =
    "#!/bin/sh\n"
    "echo \"$1 $(wc -c < \"$2\") $3\" >> \"$FAKE_LOG\"\n"
    "if [ -n \"$FAKE_FAIL\" ]; then echo 'llama_tok: llama.cpp cannot load it' >&2; exit 1; fi\n"
    "printf '{\"vocab\": \"%s\", \"tokens\": 52668, \"ids_fnv\": \"%s\", \"load_s\": 0.5, "
    "\"encode_ms\": 500.0, \"encode_ms_min\": 490.0, \"decode_ms\": 2.0, \"decodes_to_text\": "
    "true}\\n' \"$1\" \"$FAKE_FNV\"\n";

static char fake[1024], fake_log[1024];

static int setup(void **state) {
    if (mwt_tmp_setup(state)) return -1;
    snprintf(fake, sizeof fake, "%s/llama_tok", mwt_tmp);
    snprintf(fake_log, sizeof fake_log, "%s/calls.log", mwt_tmp);
    if (mwt_write_script(fake, fake_script)) return -1;
    setenv("FAKE_LOG", fake_log, 1);
    return 0;
}

/* Runs bench_tokenizer on the GPT-2 fixture vocabulary; returns its JSON line. */
static json_t *run_bench(const char *rounds, bool with_fake) {
    const char *vocab = mwt_fixture("vocab/ggml-vocab-gpt-2.gguf");
    char *argv[8] = {(char *)mwt_bench_bin("bench_tokenizer"), "--rounds", (char *)rounds};
    int n = 3;
    if (with_fake) argv[n++] = "--llama-tok", argv[n++] = fake;
    argv[n++] = (char *)vocab;
    char *out, *err;
    int rc = mwt_run(argv, &out, &err, 300000);
    if (rc != 0) fail_msg("bench_tokenizer: exit %d: %s", rc, err);
    const char *l = strstr(out, "{\"bench\":\"tokenizer\"");
    if (!l) fail_msg("no JSON line in:\n%s", out);
    json_t *j = json_loadb(l, strcspn(l, "\n"), 0, NULL);
    assert_non_null(j);
    free(out);
    free(err);
    return j;
}

static double num(const json_t *j, const char *key) {
    const json_t *v = json_object_get(j, key);
    if (!json_is_number(v)) fail_msg("no number %s", key);
    return json_number_value(v);
}

static void test_skipped_without_driver(void **state) {
    (void)state;
    json_t *j = run_bench("1", false);
    assert_int_equal(json_integer_value(json_object_get(j, "tokens")), 52668);
    assert_true(num(j, "encode_ms") > 0 && num(j, "encode_MBps") > 0);
    assert_non_null(strstr(json_string_value(json_object_get(j, "llama_cpp")), "skipped"));
    assert_string_equal(json_string_value(json_object_get(j, "js_tiktoken")),
                        "not an o200k vocabulary");
    json_decref(j);
}

static void test_side_by_side(void **state) {
    (void)state;
    remove(fake_log);
    setenv("FAKE_FNV", "0000000000000000", 1);
    json_t *j = run_bench("3", true);
    /* one call per round: the same vocabulary, the 100 KB text, 7 runs */
    char *log = mwt_read_file(fake_log, NULL);
    assert_non_null(log);
    char want[2048];
    snprintf(want, sizeof want, "%s %lld 7", mwt_fixture("vocab/ggml-vocab-gpt-2.gguf"),
             (long long)num(j, "text_bytes"));
    int lines = 0;
    for (char *l = strtok(log, "\n"); l; l = strtok(NULL, "\n"), lines++)
        if (strcmp(l, want)) fail_msg("call %d: '%s', expected '%s'", lines, l, want);
    assert_int_equal(lines, 3);
    free(log);
    assert_true(num(j, "text_bytes") >= 100 * 1024);
    const json_t *ll = json_object_get(j, "llama_cpp");
    assert_true(json_is_object(ll));
    assert_true(num(ll, "encode_ms") == 500.0);
    /* the ratio is the driver's time over ours (each round's; ours varies, so within its range) */
    double lo = json_number_value(json_array_get(json_object_get(j, "encode_ms_range"), 0));
    double hi = json_number_value(json_array_get(json_object_get(j, "encode_ms_range"), 1));
    double r = num(ll, "encode_vs_ours");
    assert_true(r >= 500.0 / hi - 0.1 && r <= 500.0 / lo + 0.1);
    assert_false(json_is_true(json_object_get(ll, "same_ids")));
    /* claiming our ids' hash makes them the same */
    setenv("FAKE_FNV", json_string_value(json_object_get(j, "ids_fnv")), 1);
    json_decref(j);
    j = run_bench("1", true);
    assert_true(json_is_true(json_object_get(json_object_get(j, "llama_cpp"), "same_ids")));
    json_decref(j);
    unsetenv("FAKE_FNV");
}

static void test_failing_driver(void **state) {
    (void)state;
    setenv("FAKE_FAIL", "1", 1);
    json_t *j = run_bench("2", true);
    unsetenv("FAKE_FAIL");
    const char *s = json_string_value(json_object_get(j, "llama_cpp"));
    if (!s || !strstr(s, "llama.cpp cannot load it")) fail_msg("llama_cpp: %s", s ? s : "?");
    assert_true(num(j, "encode_ms") > 0); /* ours is still measured */
    json_decref(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skipped_without_driver),
        cmocka_unit_test(test_side_by_side),
        cmocka_unit_test(test_failing_driver),
    };
    return cmocka_run_group_tests_name("bench_tokenizer", tests, setup, mwt_tmp_teardown);
}
