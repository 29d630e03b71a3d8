/* tests/integration/test_run_sh.c — the suite's runner (tests/run.sh) leaves no process behind: a
 * binary killed at its timeout, or one that ends without stopping what it started, has the
 * processes it started killed, even those in a session of their own (as servers and loopback
 * nodes are). The fake binaries are shell scripts that start such a process and write its pid. */
#include "tests/support/mw_test.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes a fake test binary `name` in the group's directory: it starts `sleep` in a session of its
 * own (its pid into name.pid), then runs `rest`. Returns its path (malloc'ed). */
static char *fake(const char *name, const char *rest) {
    char *path = NULL, *text = NULL;
    assert_true(asprintf(&path, "%s/%s", mwt_tmp, name) > 0);
    assert_true(asprintf(&text, "#!/bin/sh\nsetsid sleep 600 &\necho $! > \"$0.pid\"\n%s\n", rest) >
                0);
    assert_int_equal(mwt_write_script(path, text), 0);
    free(text);
    return path;
}

/* The pid the fake at `path` wrote. */
static pid_t kid_of(const char *path) {
    char *p = NULL;
    assert_true(asprintf(&p, "%s.pid", path) > 0);
    char *text = mwt_read_file(p, NULL);
    free(p);
    assert_non_null(text);
    const pid_t pid = (pid_t)atoi(text);
    free(text);
    assert_true(pid > 1);
    return pid;
}

/* True once pid is gone (killed and reaped by init, which may take a moment). */
static bool gone(pid_t pid) {
    for (int i = 0; i < 200; i++) {
        char stat[64], *text;
        snprintf(stat, sizeof stat, "/proc/%d/stat", (int)pid);
        if (!(text = mwt_read_file(stat, NULL))) return true;
        /* a zombie (state Z, after its name in parentheses) has been killed already */
        const char *r = strrchr(text, ')');
        const bool zombie = r && r[1] == ' ' && r[2] == 'Z';
        free(text);
        if (zombie) return true;
        usleep(10000);
    }
    return false;
}

static void run(char *bin, int want_rc, const char *want_out) {
    char *argv[] = {"/usr/bin/env",
                    "MW_TEST_TIMEOUT=2",
                    "MW_TEST_FILTER=",
                    "bash",
                    (char *)mwt_repo_path("tests/run.sh"),
                    bin,
                    NULL};
    char *out = NULL;
    const int rc = mwt_run(argv, &out, NULL, 60000);
    assert_non_null(out);
    if (rc != want_rc || !strstr(out, want_out)) fprintf(stderr, "run.sh said:\n%s", out);
    assert_int_equal(rc, want_rc);
    assert_non_null(strstr(out, want_out));
    free(out);
}

/* A fake `name` (its sleep, then `rest`) under run.sh: run.sh exits want_rc, reports the sleep
 * left behind, and the sleep is gone. */
static void check_reaped(const char *name, const char *rest, int want_rc) {
    char *bin = fake(name, rest);
    run(bin, want_rc, "left 1 process(es) running: killed");
    const pid_t kid = kid_of(bin);
    const bool ok = gone(kid);
    if (!ok) kill(kid, SIGKILL);
    assert_true(ok);
    free(bin);
}

static void test_timeout_kills_what_the_binary_started(void **state) {
    (void)state;
    check_reaped("hangs", "sleep 60", 1);
}

static void test_leftover_of_a_passing_binary_is_killed(void **state) {
    (void)state;
    check_reaped("leaks", "echo '[  PASSED  ] 1 test(s).'", 0);
}

static void test_clean_binary_has_no_report(void **state) {
    (void)state;
    char *path = NULL;
    assert_true(asprintf(&path, "%s/clean", mwt_tmp) > 0);
    assert_int_equal(mwt_write_script(path, "#!/bin/sh\necho '[  PASSED  ] 1 test(s).'\n"), 0);
    char *argv[] = {"/usr/bin/env", "MW_TEST_FILTER=",
                    "bash",         (char *)mwt_repo_path("tests/run.sh"),
                    path,           NULL};
    char *out = NULL;
    assert_int_equal(mwt_run(argv, &out, NULL, 60000), 0);
    assert_null(strstr(out, "left"));
    free(out);
    free(path);
}

/* The fakes' sleeps still running after a failed test (whose assertion ended it before its own
 * check), killed: only a pid whose command line is still that sleep's. */
static int teardown(void **state) {
    const char *names[] = {"hangs", "leaks"};
    for (int i = 0; i < 2; i++) {
        char path[4096], cmd[64];
        snprintf(path, sizeof path, "%s/%s.pid", mwt_tmp, names[i]);
        char *text = mwt_read_file(path, NULL);
        if (!text) continue;
        const int pid = atoi(text);
        free(text);
        snprintf(cmd, sizeof cmd, "/proc/%d/cmdline", pid);
        char line[16] = {0};
        FILE *f = pid > 1 ? fopen(cmd, "rb") : NULL; /* /proc files have no size to seek to */
        const size_t n = f ? fread(line, 1, sizeof line, f) : 0;
        if (f) fclose(f);
        if (n >= 9 && !memcmp(line,
                              "sleep\0"
                              "600",
                              9))
            kill(pid, SIGKILL);
    }
    return mwt_tmp_teardown(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeout_kills_what_the_binary_started),
        cmocka_unit_test(test_leftover_of_a_passing_binary_is_killed),
        cmocka_unit_test(test_clean_binary_has_no_report),
    };
    return cmocka_run_group_tests(tests, mwt_tmp_setup, teardown);
}
