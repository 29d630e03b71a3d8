/* tests/integration/test_bench_model.c — bench_model's llama.cpp side by side, with a stand-in for
 * llama-bench (a shell script that logs its arguments and prints llama-bench's JSON with fixed
 * speeds): the same file and thread counts are passed, prefill and decode are asked for as ours
 * are measured, once per round; its figures are read back (best sample for prefill, mean for
 * decode) and the ratios are ours over its; a failing llama-bench is reported with its stderr;
 * without one the comparison is said to be skipped. */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Prints one result per thread count: prefill 100·t tok/s (samples 100·t and 100·t + 0.5),
 * decode 10·t. FAKE_FAIL=1 makes it fail as llama-bench does on a bad file. */
static const char fake_script[] =
    "#!/bin/sh\n"
    "echo \"$*\" >> \"$FAKE_LOG\"\n"
    "if [ -n \"$FAKE_FAIL\" ]; then echo 'llama_model_load: error loading model' >&2; exit 3; "
    "fi\n"
    "t= p= n= d=0\n"
    "while [ $# -gt 0 ]; do\n"
    "  case \"$1\" in -t) t=$2; shift ;; -p) p=$2; shift ;; -n) n=$2; shift ;; -d) d=$2; shift ;;"
    " esac\n"
    "  shift\n"
    "done\n"
    "echo 'loading the model' >&2\n"
    "printf '[\\n'; sep=\n"
    "for th in $(echo \"$t\" | tr , ' '); do\n"
    "  if [ \"$n\" -gt 0 ]; then ts=$((10 * th)); else ts=$((100 * th)); fi\n"
    "  printf '%s{\"build_commit\": \"fake1234\", \"model_type\": \"gpt-oss ?B\", \"n_threads\": "
    "%d, \"flash_attn\": 1, \"load_mode\": \"none\", \"n_prompt\": %d, \"n_gen\": %d, "
    "\"n_depth\": %d, \"avg_ts\": %d.0, \"samples_ts\": [ %d.0, %d.5 ]}\\n' \"$sep\" \"$th\" "
    "\"$p\" \"$n\" \"$d\" \"$ts\" \"$ts\" \"$ts\"\n"
    "  sep=,\n"
    "done\n"
    "printf ']\\n'\n";

static char fake[1024], fake_log[1024];

static const char *bench_bin(void) {
    return mwt_bench_bin("bench_model");
}

static int setup(void **state) {
    if (mwt_tmp_setup(state)) return -1;
    snprintf(fake, sizeof fake, "%s/llama-bench", mwt_tmp);
    snprintf(fake_log, sizeof fake_log, "%s/calls.log", mwt_tmp);
    if (mwt_write_script(fake, fake_script)) return -1;
    setenv("FAKE_LOG", fake_log, 1);
    return 0;
}

/* Runs bench_model on the gpt-oss fixture with a short prompt; extra arguments NULL-terminated. */
static int run_bench(char **out, char **err, const char *threads, ...) {
    char *argv[32] = {(char *)bench_bin(),
                      "--model",
                      (char *)mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"),
                      "--prompt",
                      "16",
                      "--decode",
                      "4",
                      "--threads",
                      (char *)threads};
    int n = 9;
    va_list ap;
    va_start(ap, threads);
    for (char *a; n < 31 && (a = va_arg(ap, char *));) argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return mwt_run(argv, out, err, 300000);
}

/* The JSON line of bench_model's output for a thread count. */
static json_t *result_line(const char *out, int threads) {
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "{\"bench\":\"model\"", 16)) continue;
        json_t *j = json_loadb(l, strcspn(l, "\n"), 0, NULL);
        if (j && json_integer_value(json_object_get(j, "threads")) == threads) return j;
        json_decref(j);
    }
    fail_msg("no JSON line for %d thread(s) in:\n%s", threads, out);
    return NULL;
}

static double num(const json_t *j, const char *key) {
    const json_t *v = json_object_get(j, key);
    if (!json_is_number(v)) fail_msg("no number %s", key);
    return json_number_value(v);
}

static void test_skipped_without_llama_bench(void **state) {
    (void)state;
    char *out, *err;
    int rc = run_bench(&out, &err, "1", NULL);
    if (rc != 0) fail_msg("bench_model: exit %d: %s", rc, err);
    assert_non_null(strstr(out, "llama.cpp comparison skipped"));
    json_t *j = result_line(out, 1);
    assert_true(num(j, "decode_tok_s") > 0);
    assert_null(json_object_get(j, "llama_decode_tok_s"));
    /* the read passes between the steps: a step's rate over theirs, the median of the steps,
     * near the run's rate over the passes' median (the same units: GB/s over GB/s) */
    const double pass = num(j, "pass_gb_s"), frac = num(j, "bandwidth_fraction_pass");
    const double gbs = num(j, "bytes_per_token") * num(j, "decode_tok_s") / 1e9;
    if (!(pass > 0.1 && frac > 0.2 * gbs / pass && frac < 5 * gbs / pass))
        fail_msg("pass %g GB/s, fraction %g, decode at %g GB/s", pass, frac, gbs);
    json_decref(j);
    free(out);
    free(err);
}

/* The GMAC column (per step) of phase `name` in the profile of B sequences; *of_peak gets the last
 * column ("-" or a percentage). */
static double profile_gmac(const char *out, int B, const char *name, char *of_peak, size_t n) {
    char head[64];
    snprintf(head, sizeof head, " %d sequence(s),", B);
    const char *block = strstr(out, head);
    if (!block) fail_msg("no profile of %d sequence(s) in:\n%s", B, out);
    const char *line = strstr(block, name);
    if (!line) fail_msg("no phase '%s' in the profile of %d sequence(s)", name, B);
    /* mean ms, share, MB, GB/s, best ms, GB/s, GMAC, of peak */
    double v[7];
    char pct[16];
    const char *p = line + strlen(name);
    if (sscanf(p, "%lf %lf%% %lf %lf %lf %lf %lf %15s", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
               &v[6], pct) != 8)
        fail_msg("cannot read the phase line: %.*s", (int)strcspn(line, "\n"), line);
    snprintf(of_peak, n, "%s", pct);
    return v[6];
}

/* --profile counts each phase's multiply-adds from the model's shapes (the fixture: hidden 256,
 * 4 layers, q 4 x 64 and k, v 2 x 64 wide, 2 of 8 experts of ff 256, vocabulary 512), B times
 * for B rows, and sets them against the int8 peak it measures when the ISA has a dot product. */
static void test_profile_macs(void **state) {
    (void)state;
    char *out, *err;
    int rc = run_bench(&out, &err, "1", "--profile-seqs", "1,3", NULL);
    if (rc != 0) fail_msg("bench_model: exit %d: %s\n%s", rc, err, out);
    const bool peak = strstr(out, "int8 dot peak, 1 thread(s): ") != NULL;
    struct {
        const char *name;
        double macs; /* per row */
    } want[] = {
        {"q k v matmuls + RoPE", 4.0 * 256 * (256 + 128 + 128)},
        {"output projection", 4.0 * 256 * 256},
        {"router matmul", 4.0 * 8 * 256},
        {"experts (backend)", 4.0 * 2 * 3 * 256 * 256},
        {"LM head", 512.0 * 256},
    };
    for (int B = 1; B <= 3; B += 2)
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            char of_peak[16];
            const double g = profile_gmac(out, B, want[i].name, of_peak, sizeof of_peak);
            const double expect = B * want[i].macs / 1e9;
            if (fabs(g - expect) > 1e-3 * expect)
                fail_msg("%s, %d row(s): %g GMAC, expected %g", want[i].name, B, g, expect);
            if (peak ? of_peak[strlen(of_peak) - 1] != '%' : strcmp(of_peak, "-"))
                fail_msg("%s, %d row(s): of peak '%s'", want[i].name, B, of_peak);
        }
    /* no multiply-adds: no ratio */
    char of_peak[16];
    assert_true(profile_gmac(out, 3, "KV store + attention", of_peak, sizeof of_peak) == 0);
    assert_string_equal(of_peak, "-");
    /* the batch gain: 3 x one sequence's mean step over 3 sequences', both as their profiles
     * printed them */
    double step[4] = {0};
    int n_paired = 0;
    for (int B = 1; B <= 3; B += 2) {
        char head[128];
        snprintf(head, sizeof head, "%d sequence(s), ", B);
        const char *h = strstr(out, head);
        assert_non_null(h);
        assert_int_equal(sscanf(strchr(h, ':') + 1, "%lf", &step[B]), 1);
    }
    /* each profile sets its steps against the read passes between them too */
    for (const char *r = out; (r = strstr(r, "\"slice\":\"pass\"")) != NULL; r++) {
        double f;
        const char *k = strstr(r, "\"roofline_fraction_paired\":");
        assert_non_null(k);
        assert_int_equal(sscanf(k + strlen("\"roofline_fraction_paired\":"), "%lf", &f), 1);
        assert_true(f > 0 && f < 2);
        n_paired++;
    }
    assert_int_equal(n_paired, 2);
    const char *g = strstr(out, "batch gain, 3 sequences: ");
    if (!g) fail_msg("no batch gain line:\n%s", out);
    double gain, one, three;
    int n;
    assert_int_equal(sscanf(g + strlen("batch gain, 3 sequences: "),
                            "%lfx one sequence's tokens/s (%d x %lf ms / %lf ms per step)", &gain,
                            &n, &one, &three),
                     4);
    assert_int_equal(n, 3);
    /* the profiles print their steps to 0.01 ms, the gain line to 3 significant digits (a
     * decode step of the fixture takes a fraction of a millisecond) and the gain to 0.01 */
    assert_true(fabs(one - step[1]) < 0.006 + 0.005 * one);
    assert_true(fabs(three - step[3]) < 0.006 + 0.005 * three);
    const double from_steps = 3 * one / three;
    if (fabs(gain - from_steps) > 0.006 + 0.011 * from_steps)
        fail_msg("batch gain %.2f, but 3 x %g ms / %g ms = %.4f", gain, one, three, from_steps);
    free(out);
    free(err);
}

/* Every round asks for one prefill and one decode run, on the same file and thread counts. */
static void check_calls(int rounds) {
    char *log = mwt_read_file(fake_log, NULL);
    assert_non_null(log);
    char want_pp[2048], want_tg[2048];
    const char *model = mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf");
    snprintf(want_pp, sizeof want_pp, "-m %s -t 1,2 -p 16 -n 0 -d 0 -r 2 -fa 1 -mmp 0 -o json",
             model);
    snprintf(want_tg, sizeof want_tg, "-m %s -t 1,2 -p 0 -n 4 -d 16 -r 1 -fa 1 -mmp 0 -o json",
             model);
    int lines = 0;
    for (char *l = strtok(log, "\n"); l; l = strtok(NULL, "\n"), lines++)
        if (strcmp(l, lines % 2 ? want_tg : want_pp))
            fail_msg("call %d: '%s', expected '%s'", lines, l, lines % 2 ? want_tg : want_pp);
    assert_int_equal(lines, 2 * rounds);
    free(log);
}

static void test_side_by_side(void **state) {
    (void)state;
    remove(fake_log);
    char *out, *err;
    int rc = run_bench(&out, &err, "1,2", "--rounds", "3", "--llama-bench", fake, NULL);
    if (rc != 0) fail_msg("bench_model: exit %d: %s\n%s", rc, err, out);
    check_calls(3);
    assert_non_null(strstr(out, "llama.cpp fake1234"));
    for (int t = 1; t <= 2; t++) {
        json_t *j = result_line(out, t);
        assert_int_equal(json_integer_value(json_object_get(j, "rounds")), 3);
        assert_string_equal(json_string_value(json_object_get(j, "llama_commit")), "fake1234");
        assert_string_equal(json_string_value(json_object_get(j, "llama_flash_attn")), "on");
        /* prefill: best of its two samples; decode: its mean */
        assert_true(num(j, "llama_prefill_tok_s") == 100.0 * t + 0.5);
        assert_true(num(j, "llama_decode_tok_s") == 10.0 * t);
        /* its figure is the same every round, so the median ratio is our median over it */
        const char *modes[2][3] = {{"decode_ratio", "decode_tok_s", "llama_decode_tok_s"},
                                   {"prefill_ratio", "prefill_tok_s", "llama_prefill_tok_s"}};
        for (int m = 0; m < 2; m++) {
            double ratio = num(j, modes[m][0]), want = num(j, modes[m][1]) / num(j, modes[m][2]);
            char lo[32], hi[32];
            snprintf(lo, sizeof lo, "%s_min", modes[m][0]);
            snprintf(hi, sizeof hi, "%s_max", modes[m][0]);
            if (ratio < want * 0.999 || ratio > want * 1.001)
                fail_msg("%s %g, ours over llama.cpp's is %g", modes[m][0], ratio, want);
            assert_true(num(j, lo) <= ratio && ratio <= num(j, hi));
        }
        json_decref(j);
    }
    free(out);
    free(err);
}

static void test_llama_bench_fails(void **state) {
    (void)state;
    remove(fake_log);
    setenv("FAKE_FAIL", "1", 1);
    char *out, *err;
    int rc = run_bench(&out, &err, "1", "--rounds", "1", "--llama-bench", fake, NULL);
    unsetenv("FAKE_FAIL");
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "exit status 3"));
    assert_non_null(strstr(err, "error loading model"));
    assert_non_null(strstr(out, "llama.cpp comparison failed"));
    free(out);
    free(err);
    rc = run_bench(&out, &err, "1", "--llama-bench", "/nonexistent/llama-bench", NULL);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, "not an executable file"));
    free(out);
    free(err);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skipped_without_llama_bench),
        cmocka_unit_test(test_side_by_side),
        cmocka_unit_test(test_llama_bench_fails),
        cmocka_unit_test(test_profile_macs),
    };
    return cmocka_run_group_tests(tests, setup, mwt_tmp_teardown);
}
