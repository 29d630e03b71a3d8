/* tests/integration/test_node_cli.c — the expert-node command line: `--help` (and `-h`) prints
 * the usage on stdout and exits 0, listing every option; every example the usage shows starts a
 * node that serves (on loopback without keys, beyond it with the keys it names); and an unknown
 * option, a missing value or a missing --vindex / --bind stops the program with exit 2, named. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_node.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every option the node has: a row dropped from its table fails here. */
static const char *const option_names[] = {
    "--vindex",     "--experts",    "--bind",         "--threads",  "--numerics", "--capacity",
    "--node-id",    "--ready-file", "--pin",          "--affinity", "--poll-us",  "--peer-limit",
    "--recv-limit", "--recv-bound", "--curve-secret", "--allow",    "--insecure", "--quiet",
    "--device",     "--self-test",  "--probe",        "--help"};

static char *help_text(const char *flag) {
    char *argv[] = {(char *)mwt_bin("expert-node"), (char *)flag, NULL};
    char *out = NULL, *err = NULL;
    int rc = mwt_run(argv, &out, &err, 30000);
    if (rc != 0 || !out || !err || err[0]) fail_msg("%s: exit %d, stderr: %s", flag, rc, err);
    free(err);
    return out;
}

static void test_help_lists_every_option(void **state) {
    (void)state;
    const char *flags[] = {"--help", "-h"};
    for (size_t f = 0; f < 2; f++) {
        char *out = help_text(flags[f]);
        if (strncmp(out, "usage: expert-node ", 19)) fail_msg("%s:\n%s", flags[f], out);
        for (size_t i = 0; i < sizeof option_names / sizeof option_names[0]; i++) {
            char line[64];
            snprintf(line, sizeof line, "\n  %s ", option_names[i]);
            if (!strstr(out, line)) fail_msg("%s lacks %s:\n%s", flags[f], option_names[i], out);
        }
        free(out);
    }
}

/* The arguments of one example (after "expert-node"), joined across "\" line ends and made to
 * run here: the model is the fixture, key files are the test's own, a fixed port becomes a
 * wildcard one (tests run side by side) and the owned set "all" (the example's ranges are for a
 * larger model than the fixture). --vindex is left out: mwt_node_start gives it. */
static int example_args(const char **p, char words[][4300], const char **args, int max,
                        const char *dir) {
    int n = 0;
    const char *s = *p;
    bool skip_value = false;
    for (;;) {
        size_t w = strcspn(s, " \n");
        if (w == 1 && s[0] == '\\') {
            s += 1 + strspn(s + 1, " \n");
            continue;
        }
        if (w == 0) break;
        char word[4300];
        snprintf(word, sizeof word, "%.*s", (int)w, s);
        s += w;
        if (skip_value) {
            skip_value = false;
        } else if (!strcmp(word, "--vindex")) {
            skip_value = true;
        } else if (n < max) {
            char *slot = words[n];
            const char *port = strstr(word, ":5555");
            if (n > 0 && !strcmp(args[n - 1], "--experts"))
                snprintf(slot, 4300, "all");
            else if (port)
                snprintf(slot, 4300, "%.*s:*", (int)(port - word), word);
            else if (!strcmp(word, "node.key") || !strcmp(word, "coordinator.pub"))
                snprintf(slot, 4300, "%s/%s", dir, word);
            else
                snprintf(slot, 4300, "%s", word);
            args[n] = slot;
            n++;
        }
        if (*s != ' ') break;
        s++;
    }
    *p = s;
    return n;
}

static void keygen(const char *prog, const char *prefix) {
    char *argv[] = {(char *)mwt_bin(prog), "keygen", "--out", (char *)prefix, NULL};
    char *err = NULL;
    int rc = mwt_run(argv, NULL, &err, 30000);
    if (rc != 0) fail_msg("%s keygen: exit %d: %s", prog, rc, err);
    free(err);
}

static void test_help_examples_serve(void **state) {
    const char *dir = *state;
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s/node", dir);
    keygen("expert-node", prefix);
    snprintf(prefix, sizeof prefix, "%s/coordinator", dir);
    keygen("coordinator", prefix);
    const char *model = mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf");
    char *out = help_text("--help");
    const char *p = strstr(out, "\nexamples:\n");
    if (!p) fail_msg("no examples:\n%s", out);
    int n_examples = 0;
    static char words[24][4300];
    for (p = strstr(p, "\n    expert-node "); p; p = strstr(p, "\n    expert-node ")) {
        p += strlen("\n    expert-node ");
        const char *args[25];
        int n = example_args(&p, words, args, 24, dir);
        args[n] = NULL;
        char tag[32];
        snprintf(tag, sizeof tag, "example%d", n_examples++);
        mwt_node node;
        if (mwt_node_start(&node, NULL, model, dir, tag, args, 60000) != 0) {
            char *l = mwt_read_file(node.log, NULL);
            fail_msg("example %d did not serve:\n%s", n_examples, l ? l : "(no log)");
        }
        assert_int_equal(mwt_node_stop(&node, 10000), 0);
    }
    if (n_examples < 2)
        fail_msg("%d example(s), expected one on loopback and one with keys", n_examples);
    free(out);
}

static void test_bad_command_lines_named(void **state) {
    (void)state;
    const char *model = mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf");
    static const char *const cases[][7] = {
        {"--vindex", "M", "--bind", "tcp://127.0.0.1:*", "--frobnicate", "1",
         "unknown option --frobnicate"},
        {"--vindex", "M", "--bind", "tcp://127.0.0.1:*", "--threads", NULL,
         "--threads needs a value"},
        {"--vindex", "M", "--bind", "tcp://127.0.0.1:*", "--capacity", "0",
         "--capacity 0: expected an integer in 1 .. 65536"},
        {"--vindex", "M", "--bind", "tcp://127.0.0.1:*", "--numerics", "f16",
         "--numerics f16: expected f32, q8 or any"},
        {"--vindex", "M", "--bind", "tcp://127.0.0.1:*", "--recv-bound", "none",
         "--recv-bound none: expected relay or off"},
        {"--vindex", "M", NULL, NULL, NULL, NULL, "--vindex and --bind are required"},
        {"--self-test", "--device", "gpu", NULL, NULL, NULL,
         "--device gpu: expected metal, cpu or auto"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[8] = {(char *)mwt_bin("expert-node")};
        int k = 1;
        for (int j = 0; j < 6 && cases[i][j]; j++)
            argv[k++] = (char *)(strcmp(cases[i][j], "M") ? cases[i][j] : model);
        argv[k] = NULL;
        char *err = NULL;
        int rc = mwt_run(argv, NULL, &err, 30000);
        if (rc != 2 || !err || !strstr(err, cases[i][6]))
            fail_msg("case %zu: exit %d: %s", i, rc, err);
        free(err);
    }
}

/* The node's program as the test runs it: the optimised build where there is one (the self-test's
 * reference and timing take minutes under ASan), else the ASan one. */
static const char *fast_node(void) {
    static char path[4200];
    const char *rel = getenv("MW_REL_BIN");
    if (!rel) return mwt_bin("expert-node");
    snprintf(path, sizeof path, "%s/expert-node", rel);
    return path;
}

/* --self-test on the CPU: every case bit-identical to the scalar reference, rates printed, exit 0;
 * --probe: a topology host entry on stdout, the figures behind it on stderr; a device this build
 * lacks: exit 1, named. */
static void test_self_test_and_probe(void **state) {
    (void)state;
    char *argv[] = {(char *)fast_node(), "--self-test", "--device", "cpu", "--threads", "2", NULL};
    char *out = NULL, *err = NULL;
    int rc = mwt_run(argv, &out, &err, 600000);
    if (rc != 0 || !strstr(out, "self-test: device cpu") || !strstr(out, "q4_K+q6_K   q8  T=64 ") ||
        strstr(out, "differ") || !strstr(out, "matvec q6_K") ||
        !strstr(out, "result: every case within tolerance"))
        fail_msg("exit %d\n%s\n%s", rc, out, err);
    free(out);
    free(err);
    char *probe[] = {(char *)fast_node(), "--probe", "--threads", "1", NULL};
    rc = mwt_run(probe, &out, &err, 120000);
    char text[8192]; /* the figures, on stderr: every line starts after a newline */
    snprintf(text, sizeof text, "\n%s", err ? err : "");
    const char *keys[] = {"\nplatform: ",      "\ncpus: ", "\nmemory_gb: ",
                          "\ncpu_read_gbps: ", "\ngpu: ",  "\ndevice: cpu\n"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (rc != 0 || !strstr(text, keys[i]))
            fail_msg("--probe: exit %d, no %s\n%s", rc, keys[i] + 1, text);
    /* on stdout, a topology host entry (test_fleet plans with one) */
    if (!out || strncmp(out, "{\"name\": ", 9) || !strstr(out, "\"read_gbs\": ") ||
        !strstr(out, "\"cores\": 1,"))
        fail_msg("--probe printed: %s", out ? out : "");
    free(out);
    free(err);
#ifndef __APPLE__
    char *metal[] = {(char *)fast_node(), "--self-test", "--device", "metal", NULL};
    rc = mwt_run(metal, &out, &err, 120000);
    if (rc != 1 || !strstr(err, "no Metal backend")) fail_msg("exit %d: %s", rc, err);
    free(out);
    free(err);
#endif
}

/* The launchd plist of a Mac node (deploy/launchd) runs the node with options it has: each
 * `--name` among its ProgramArguments is in the usage. */
static void test_launchd_plist_options_exist(void **state) {
    (void)state;
    char *plist =
        mwt_read_file(mwt_repo_path("deploy/launchd/org.moewire.expert-node.plist"), NULL);
    assert_non_null(plist);
    char *help = help_text("--help");
    const char *p = strstr(plist, "<key>ProgramArguments</key>");
    const char *end = p ? strstr(p, "</array>") : NULL;
    assert_true(p && end);
    int n = 0;
    while ((p = strstr(p, "<string>")) && p < end) {
        p += 8;
        const size_t len = strcspn(p, "<");
        char line[80];
        snprintf(line, sizeof line, "\n  %.*s ", (int)len, p);
        if (len > 2 && !strncmp(p, "--", 2) && (n++, !strstr(help, line)))
            fail_msg("the plist passes %.*s, which the node does not have", (int)len, p);
    }
    assert_true(n >= 5);
    free(help);
    free(plist);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_lists_every_option),
        cmocka_unit_test(test_help_examples_serve),
        cmocka_unit_test(test_bad_command_lines_named),
        cmocka_unit_test(test_self_test_and_probe),
        cmocka_unit_test(test_launchd_plist_options_exist),
    };
    return cmocka_run_group_tests_name("expert-node command line", tests, mwt_tmp_setup,
                                       mwt_tmp_teardown);
}
