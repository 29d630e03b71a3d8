/* tests/integration/test_serve_openai.c — the official openai npm client (tests/openai/
 * serve_openai.mjs, Node's test runner) against `coordinator serve --loopback 2` on gpt-oss-tiny;
 * greedy output is compared with `coordinator generate --loopback 2` on the same prompt; the server
 * takes an API key file, the client sends the key, and a client with a wrong key gets
 * AuthenticationError. Then one
 * expert node is killed: requests fail with a server error (a stream with an error event), the
 * server keeps answering, and SIGTERM still exits 0. /metrics passes `promtool check metrics`
 * (promtool extracted from Debian's prometheus package by `make test`, no daemon). */
#include "tests/support/mw_test.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/mwt_http.h"

#define MODEL  "llamacpp/gpt-oss-tiny/model.gguf"
#define PROMPT "7,300,12,45,2,99,150,8"
#define N_REF  10

static mwt_server s; /* stopped by the teardown too, so a failing test leaves no server behind */

static int stop_server(void **st) {
    (void)st;
    mwt_serve_stop(&s, 60000);
    return 0;
}

static const char *npm_dir(void) {
    const char *d = getenv("MW_NPM");
    return d && *d ? d : "build/npm";
}

static void run_node(const char *phase, const char *ref_json) {
    char script[4096];
    snprintf(script, sizeof script, "%s/tests/openai/serve_openai.mjs",
             getenv("MW_SRC") ? getenv("MW_SRC") : ".");
    setenv("MW_URL", s.url, 1);
    setenv("MW_MODEL", "model", 1);
    setenv("MW_PROMPT_IDS", "[" PROMPT "]", 1);
    setenv("MW_REF_IDS", ref_json, 1);
    setenv("MW_CHAT", "1", 1);
    char *argv[] = {"/usr/bin/env", "node", "--test-reporter=spec", script, (char *)npm_dir(),
                    (char *)phase,  NULL};
    char *out = NULL, *err = NULL;
    int rc = mwt_run(argv, &out, &err, 600000);
    printf("%s%s", out ? out : "", err ? err : "");
    free(out);
    free(err);
    if (rc != 0) fail_msg("node %s phase failed (exit %d)", phase, rc);
}

/* A child expert-node of pid (from /proc). */
static pid_t child_node(pid_t pid) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = -1;
    while (d && (e = readdir(d)) && found < 0) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *rp = strrchr(buf, ')');
        int ppid = 0;
        if (rp && sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == pid &&
            strstr(buf, "(expert-node)"))
            found = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

static void test_openai_client(void **st) {
    (void)st;
    char nm[4096];
    snprintf(nm, sizeof nm, "%s/node_modules/openai/package.json", npm_dir());
    if (access(nm, R_OK)) fail_msg("%s is missing: `make test` installs the openai client", nm);
    /* the reference: coordinator generate over the same kind of cluster */
    char *argv[] = {(char *)mwt_bin("coordinator"),
                    "generate",
                    "--model",
                    (char *)mwt_fixture(MODEL),
                    "--loopback",
                    "2",
                    "--tokens",
                    PROMPT,
                    "--max-tokens",
                    "10",
                    NULL};
    char *out = NULL;
    assert_int_equal(mwt_run(argv, &out, NULL, 300000), 0);
    char ref[512] = "[";
    char *p = strstr(out, "tokens:");
    assert_non_null(p);
    p += 7;
    for (int k = 0; k < N_REF; k++) {
        char *end;
        long v = strtol(p, &end, 10);
        assert_true(end != p);
        snprintf(ref + strlen(ref), sizeof ref - strlen(ref), "%s%ld", k ? "," : "", v);
        p = end;
    }
    strcat(ref, "]");
    free(out);
    /* the fixture has no chat template: ChatML by name (its markers encode as plain text) */
    /* with an API key: every request the client sends carries it, and a wrong one is refused */
    char *kdir = mwt_tmpdir("keys");
    char keys[4096];
    snprintf(keys, sizeof keys, "%s/api-keys", kdir);
    const char *key_lines = "# test keys\nsk-moewire-other\nsk-moewire-test\n";
    assert_int_equal(mwt_write_file(keys, key_lines, strlen(key_lines)), 0);
    setenv("MW_API_KEY", "sk-moewire-test", 1);
    const char *const extra[] = {
        "--loopback",      "2",      "--threads",      "2",  "--max-seqs", "8",
        "--chat-template", "chatml", "--api-key-file", keys, NULL};
    assert_int_equal(mwt_serve_start(&s, mwt_fixture(MODEL), extra, 300000), 0);
    mwt_rmrf(kdir); /* read once, at startup */
    free(kdir);
    run_node("main", ref);
    /* the page is valid exposition format */
    mwt_resp r;
    assert_int_equal(mwt_http_request(s.port, "GET", "/metrics", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(mwt_resp_header(&r, "Content-Type"), "version=0.0.4"));
    assert_non_null(strstr(r.body, "moewire_node_up{node=\"1\""));
    assert_non_null(strstr(r.body, "moewire_node_rtt_seconds_bucket{node=\"0\""));
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s/metrics.txt", s.dir);
    assert_int_equal(mwt_write_file(mpath, r.body, r.body_len), 0);
    mwt_resp_free(&r);
    const char *promtool = getenv("MW_PROMTOOL");
    if (!promtool || access(promtool, X_OK))
        fail_msg("MW_PROMTOOL is not set: run under make test");
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "%s check metrics < %s", promtool, mpath);
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    char *pout = NULL, *perr = NULL;
    int prc = mwt_run(sh, &pout, &perr, 60000);
    if (prc) fail_msg("promtool check metrics: %s%s", pout ? pout : "", perr ? perr : "");
    free(pout);
    free(perr);
    /* a node dies */
    pid_t node = child_node(s.pid);
    assert_true(node > 0);
    kill(node, SIGKILL);
    run_node("nodefail", ref);
    /* some experts have no live owner: /health says 503 (a load balancer stops sending), while
     * the server goes on answering, serving the requests that need no lost expert */
    assert_int_equal(mwt_http_request(s.port, "GET", "/health", NULL, &r), 0);
    assert_int_equal(r.status, 503);
    if (!strstr(r.body, "\"unavailable\"") || !strstr(r.body, "\"experts_reachable\":false"))
        fail_msg("/health after a node died: %s", r.body);
    mwt_resp_free(&r);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(test_openai_client, stop_server)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
