/* tests/integration/test_fleet.c — the fleet from the command line: routing traces written by
 * `coordinator generate` and `serve` (the in-process and the remote expert backends write the
 * same bytes), `vindex routing-stats` on them, refusing a corrupt trace; `vindex plan` on the
 * trace of a synth whose router favours a few experts (balance against even ranges, a fleet too
 * small refused with the numbers), and the four planned loopback nodes serving bit for bit what
 * the in-process backend computes. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_cli.h"
#include "tests/support/mwt_http.h"
#include "tests/support/mwt_node.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char *dir;
static char synth[4200], skewed[4200];

static char *path_in(const char *name) {
    static char buf[8][4300];
    static int n;
    char *p = buf[n++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static int run(char *const *argv, char **out, char **err) {
    return mwt_run_shown(argv, out, err, 300000);
}

static int setup(void **state) {
    if (mwt_tmp_setup(state)) return -1;
    dir = mwt_tmp;
    snprintf(synth, sizeof synth, "%s/synth.vindex", dir);
    mwt_gpt_oss shape = {
        .layers = 3, .hidden = 256, .experts = 16, .top_k = 4, .expert_ff = 128, .seed = 5};
    if (mwt_synth_gpt_oss(synth, shape, NULL)) return -1;
    /* the same shape, experts 0 .. 2 chosen far more often than the rest */
    snprintf(skewed, sizeof skewed, "%s/skewed.vindex", dir);
    shape.seed = 6;
    const char *more[] = {"--hot-experts", "3", "--hot-bias", "2", NULL};
    return mwt_synth_gpt_oss(skewed, shape, more) ? -1 : 0;
}

static int generate_model(const char *model, const char *trace, const char *const *extra) {
    char *argv[40];
    int n = 0;
    const char *head[] = {
        mwt_bin("coordinator"), "generate",     "--model", model,       "--tokens",
        "1,5,9,13,17,21,25,29", "--max-tokens", "24",      "--threads", "1",
        "--trace-routing",      trace,          NULL};
    for (int i = 0; head[i]; i++) argv[n++] = (char *)head[i];
    for (int i = 0; extra && extra[i]; i++) argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return run(argv, NULL, NULL);
}

static int generate(const char *trace, const char *const *extra) {
    return generate_model(synth, trace, extra);
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
        assert_int_equal(
            mwt_http_request(s.port, "POST", "/v1/completions",
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

/* ---- planning -------------------------------------------------------------------------------- */

/* A topology of 4 hosts on this machine (free ports), each with memory_gib, speed 10 GB/s. */
static const char *topology(const char *name, const char *memory_gib, int ports[4]) {
    char *path = path_in(name);
    char hosts[2048] = "";
    for (int h = 0; h < 4; h++) {
        ports[h] = mwt_free_port();
        char one[400];
        snprintf(one, sizeof one,
                 "%s{\"name\":\"n%d\",\"endpoint\":\"tcp://127.0.0.1:%d\",\"memory_gib\":%s,"
                 "\"read_gbs\":10,\"cores\":1,\"platform\":\"linux-x86_64\"}",
                 h ? "," : "", h, ports[h], memory_gib);
        strcat(hosts, one);
    }
    char text[4096];
    snprintf(text, sizeof text,
             "{\"format\":\"moewire-topology\",\"version\":1,\"name\":\"four\","
             "\"model\":{\"path\":\"%s\",\"wire\":\"f32\"},\"hosts\":[%s],"
             "\"coordinators\":[{\"name\":\"c\",\"address\":\"127.0.0.1\","
             "\"listen\":\"127.0.0.1:0\"}],"
             "\"links\":[{\"from\":\"*\",\"to\":\"*\",\"rtt_us\":30,\"gbit\":40}]}",
             skewed, hosts);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
    return path;
}

static int plan(const char *topo, const char *stats, const char *out, char **err) {
    char *argv[] = {
        (char *)mwt_bin("vindex"), "plan",        "--topology", (char *)topo, "--model", skewed,
        "--routing-stats",         (char *)stats, "--out",      (char *)out,  NULL};
    return run(argv, NULL, err);
}

/* The trace of the skewed synth, once. */
static const char *skewed_trace(void) {
    const char *t = path_in("skewed.trace");
    if (access(t, R_OK)) assert_int_equal(generate_model(skewed, t, NULL), 0);
    return t;
}

static void test_plan_balances_skewed_load(void **state) {
    (void)state;
    int ports[4];
    /* room for 8 of the 16 extents (53 KiB each) of each of the 3 layers per host */
    const char *topo = topology("four.json", "0.00125", ports), *out = path_in("plan");
    const char *trace = skewed_trace();
    assert_int_equal(plan(topo, trace, out, NULL), 0);
    char pj[4400];
    snprintf(pj, sizeof pj, "%s/plan.json", out);
    json_error_t je;
    json_t *j = json_load_file(pj, 0, &je);
    if (!j) fail_msg("plan.json: %s", je.text);
    json_t *layers = json_object_get(j, "layers");
    assert_int_equal(json_array_size(layers), 3);
    for (size_t l = 0; l < 3; l++) {
        json_t *o = json_array_get(layers, l);
        double bal = json_real_value(json_object_get(o, "balance")),
               range = json_real_value(json_object_get(o, "range_balance"));
        print_message("layer %zu: planned balance %.3f, even ranges %.3f\n", l, bal, range);
        assert_true(bal >= 0.9);
        assert_true(range < 0.75); /* ranges leave experts 0 .. 2 on one host */
    }
    /* the trace it came from is named by its sha256 */
    char *argv[] = {(char *)mwt_bin("vindex"), "routing-stats", (char *)trace, "--json", NULL};
    char *stats = NULL;
    assert_int_equal(run(argv, &stats, NULL), 0);
    json_t *sj = json_loads(stats, 0, &je);
    const char *sha = json_string_value(
        json_object_get(json_array_get(json_object_get(sj, "traces"), 0), "sha256"));
    const char *rec = json_string_value(
        json_array_get(json_object_get(json_object_get(j, "routing_stats"), "trace_sha256"), 0));
    assert_non_null(sha);
    assert_non_null(rec);
    assert_string_equal(sha, rec);
    json_decref(sj);
    json_decref(j);
    free(stats);
}

static void test_plan_refuses_a_small_fleet(void **state) {
    (void)state;
    int ports[4];
    const char *topo = topology("small.json", "0.0002", ports);
    char *err = NULL;
    assert_int_equal(plan(topo, skewed_trace(), path_in("small-plan"), &err), 1);
    assert_non_null(strstr(err, "cannot hold the model"));
    assert_non_null(strstr(err, "GiB short"));
    free(err);
}

/* The value of a /metrics sample line that starts with `series ` (-1 when absent). */
static double metric(const char *page, const char *series) {
    char want[256];
    snprintf(want, sizeof want, "\n%s ", series);
    const char *at = strstr(page, want);
    return at ? atof(at + strlen(want)) : -1;
}

/* promtool check metrics on a page, when make test provides promtool. */
static void promtool_check(const char *page) {
    const char *promtool = getenv("MW_PROMTOOL");
    if (!promtool || access(promtool, X_OK))
        fail_msg("MW_PROMTOOL is not set: run under make test");
    const char *mpath = path_in("metrics.txt");
    assert_int_equal(mwt_write_file(mpath, page, strlen(page)), 0);
    char cmd[8600];
    snprintf(cmd, sizeof cmd, "%s check metrics < %s", promtool, mpath);
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    char *out = NULL, *err = NULL;
    if (mwt_run(sh, &out, &err, 60000))
        fail_msg("promtool check metrics: %s%s", out ? out : "", err ? err : "");
    free(out);
    free(err);
}

/* Serves the skewed synth with `extra`, runs the same requests (greedy: the same tokens, so the
 * same routing, every run), and returns each layer's measured balance (/metrics
 * moewire_layer_balance). */
static void serve_balance(const char *const *extra, double bal[3]) {
    mwt_server s;
    assert_int_equal(mwt_serve_start(&s, skewed, extra, 120000), 0);
    for (int i = 0; i < 6; i++) {
        char body[160];
        snprintf(body, sizeof body,
                 "{\"model\":\"skewed\",\"prompt\":[%d,%d,%d,%d],\"max_tokens\":12,"
                 "\"temperature\":0}",
                 3 + i, 40 + 7 * i, 90 + i, 200 - i);
        mwt_resp r;
        assert_int_equal(mwt_http_request(s.port, "POST", "/v1/completions", body, &r), 0);
        if (r.status != 200) fail_msg("status %d: %s", r.status, r.body);
        mwt_resp_free(&r);
    }
    mwt_resp r;
    assert_int_equal(mwt_http_request(s.port, "GET", "/metrics", NULL, &r), 0);
    promtool_check(r.body);
    for (int l = 0; l < 3; l++) {
        char series[64];
        snprintf(series, sizeof series, "moewire_layer_balance{layer=\"%d\"}", l);
        bal[l] = metric(r.body, series);
        assert_true(bal[l] > 0);
    }
    mwt_resp_free(&r);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
}

/* The planned shards on four loopback nodes: exact mode gives the in-process logits bit for bit,
 * and serving spreads each layer's work evenly where even expert ranges (--loopback 4) cannot. */
static void test_planned_fleet_serves(void **state) {
    (void)state;
    int ports[4];
    const char *topo = topology("serve.json", "0.00125", ports), *out = path_in("serve-plan");
    assert_int_equal(plan(topo, skewed_trace(), out, NULL), 0);
    mwt_node nodes[4];
    for (int h = 0; h < 4; h++) {
        char bind[64], shard[4400], tag[16];
        snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", ports[h]);
        snprintf(shard, sizeof shard, "@%s/shard-n%d.json", out, h);
        snprintf(tag, sizeof tag, "n%d", h);
        const char *args[] = {"--bind", bind, "--experts", shard, "--threads", "1", NULL};
        nodes[h] = mwt_node_up(skewed, dir, tag, args, 60000);
    }
    char list[4400];
    snprintf(list, sizeof list, "@%s/coordinator.nodes", out);
    const char *a = path_in("local.logits"), *b = path_in("fleet.logits");
    const char *local[] = {"--numerics", "f32", "--logits-out", a, NULL};
    const char *fleet[] = {"--numerics", "f32",     "--logits-out", b,     "--nodes",
                           list,         "--exact", "--wire",       "f32", NULL};
    assert_int_equal(generate_model(skewed, path_in("l.trace"), local), 0);
    assert_int_equal(generate_model(skewed, path_in("f.trace"), fleet), 0);
    size_t na, nb;
    char *x = mwt_read_file(a, &na), *y = mwt_read_file(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(x, y, na);
    free(x);
    free(y);
    double planned[3], ranges[3];
    /* the default --down-ms: a node taken for lost on a loaded machine would move its work and
     * the balance with it, which the liveness channel's own thread prevents */
    const char *planned_args[] = {"--nodes", list, "--exact", "--threads", "1", NULL};
    serve_balance(planned_args, planned);
    for (int h = 0; h < 4; h++) assert_int_equal(mwt_node_stop(&nodes[h], 30000), 0);
    const char *range_args[] = {"--loopback", "4", "--exact", "--threads", "1", NULL};
    serve_balance(range_args, ranges);
    for (int l = 0; l < 3; l++) {
        print_message("layer %d: measured balance %.3f planned, %.3f with even ranges\n", l,
                      planned[l], ranges[l]);
        assert_true(planned[l] >= 0.9);
        assert_true(ranges[l] < planned[l]);
    }
}

/* /health until its body holds needle (or 60 s): the last answer's status. */
static int health_until(int port, const char *needle, char *body, size_t cap) {
    int status = 0;
    for (int i = 0; i < 600; i++) {
        mwt_resp r;
        if (mwt_http_request(port, "GET", "/health", NULL, &r) == 0) {
            status = r.status;
            snprintf(body, cap, "%s", r.body ? r.body : "");
            mwt_resp_free(&r);
            if (strstr(body, needle)) return status;
        }
        usleep(100000);
    }
    return status;
}

static void complete(int port) {
    mwt_resp r;
    assert_int_equal(mwt_http_request(port, "POST", "/v1/completions",
                                      "{\"model\":\"synth\",\"prompt\":[5,6,7],\"max_tokens\":4}",
                                      &r),
                     0);
    if (r.status != 200) fail_msg("status %d: %s", r.status, r.body);
    mwt_resp_free(&r);
}

/* Two nodes owning every expert: serve starts with one of them, the other joins when it comes up
 * (more rows go to it), /health says degraded while one is down and 503 once none is. */
static void test_serve_with_a_node_missing(void **state) {
    (void)state;
    int port[2] = {mwt_free_port(), mwt_free_port()};
    char nodes[256], bind[2][64];
    for (int i = 0; i < 2; i++) snprintf(bind[i], sizeof bind[i], "tcp://127.0.0.1:%d", port[i]);
    snprintf(nodes, sizeof nodes, "%s,%s", bind[0], bind[1]);
    const char *a0[] = {"--bind", bind[0], "--threads", "1", NULL};
    const char *a1[] = {"--bind", bind[1], "--threads", "1", NULL};
    mwt_node n0 = mwt_node_up(synth, dir, "m0", a0, 60000);
    const char *extra[] = {"--nodes", nodes, "--threads", "1", NULL};
    mwt_server s;
    assert_int_equal(mwt_serve_start(&s, synth, extra, 120000), 0);
    char body[512];
    assert_int_equal(health_until(s.port, "\"degraded\"", body, sizeof body), 200);
    assert_non_null(strstr(body, "\"experts_reachable\":true"));
    complete(s.port);
    mwt_node n1 = mwt_node_up(synth, dir, "m1", a1, 60000);
    if (health_until(s.port, "\"ok\"", body, sizeof body) != 200)
        fail_msg("the late node did not join: %s", body);
    complete(s.port);
    mwt_resp r;
    assert_int_equal(mwt_http_request(s.port, "GET", "/metrics", NULL, &r), 0);
    char want[128];
    snprintf(want, sizeof want, "moewire_node_rows_total{node=\"1\",endpoint=\"%s\"} ", bind[1]);
    const char *at = strstr(r.body, want);
    if (!at || atof(at + strlen(want)) <= 0) fail_msg("node 1 served no rows:\n%s", r.body);
    mwt_resp_free(&r);
    mwt_node_kill(&n1);
    assert_int_equal(health_until(s.port, "\"degraded\"", body, sizeof body), 200);
    mwt_node_kill(&n0);
    assert_int_equal(health_until(s.port, "\"unavailable\"", body, sizeof body), 503);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
}

/* node_rows_total of an endpoint on a /metrics page (-1: no such node). */
static double node_rows(int port, const char *endpoint) {
    mwt_resp r;
    assert_int_equal(mwt_http_request(port, "GET", "/metrics", NULL, &r), 0);
    const char *at = strstr(r.body, "moewire_node_rows_total{");
    double v = -1;
    char want[160];
    snprintf(want, sizeof want, "endpoint=\"%s\"} ", endpoint);
    for (; at; at = strstr(at + 1, "moewire_node_rows_total{")) {
        const char *end = strchr(at, '\n');
        const char *hit = strstr(at, want);
        if (hit && (!end || hit < end)) {
            v = atof(hit + strlen(want));
            break;
        }
    }
    mwt_resp_free(&r);
    return v;
}

/* The serve log, once the coordinator has written `needle` (or 20 s). */
static bool log_says(const mwt_server *s, const char *needle) {
    for (int i = 0; i < 200; i++) {
        char *log = mwt_read_file(s->log, NULL);
        bool hit = log && strstr(log, needle);
        free(log);
        if (hit) return true;
        usleep(100000);
    }
    return false;
}

/* serve --nodes @FILE: a node at a new address joins on SIGHUP and takes work; a node left out of
 * the file is drained (no more work), unless it holds the only copy of some expert. */
static void test_join_and_drain(void **state) {
    (void)state;
    char bind[3][64];
    const char *args[3][5];
    mwt_node n[3];
    for (int i = 0; i < 3; i++) {
        snprintf(bind[i], sizeof bind[i], "tcp://127.0.0.1:%d", mwt_free_port());
        const char *a[] = {"--bind", bind[i], "--threads", "1", NULL};
        memcpy(args[i], a, sizeof a);
    }
    n[0] = mwt_node_up(synth, dir, "j0", args[0], 60000);
    const char *file = path_in("live.nodes");
    char list[256];
    assert_int_equal(mwt_write_file(file, bind[0], strlen(bind[0])), 0);
    char at[4400];
    snprintf(at, sizeof at, "@%s", file);
    const char *extra[] = {"--nodes", at, "--threads", "1", NULL};
    mwt_server s;
    assert_int_equal(mwt_serve_start(&s, synth, extra, 120000), 0);
    complete(s.port);
    /* a new node, at an address the coordinator has never seen */
    n[1] = mwt_node_up(synth, dir, "j1", args[1], 60000);
    snprintf(list, sizeof list, "%s,%s", bind[0], bind[1]);
    assert_int_equal(mwt_write_file(file, list, strlen(list)), 0);
    kill(s.pid, SIGHUP);
    if (!log_says(&s, "node 1 (tcp://127.0.0.1:")) fail_msg("no join in %s", s.log);
    char body[512];
    assert_int_equal(health_until(s.port, "\"nodes_up\":2", body, sizeof body), 200);
    complete(s.port);
    complete(s.port);
    assert_true(node_rows(s.port, bind[1]) > 0);
    /* drain node 0: no more work for it */
    assert_int_equal(mwt_write_file(file, bind[1], strlen(bind[1])), 0);
    kill(s.pid, SIGHUP);
    if (!log_says(&s, "is drained")) fail_msg("no drain in %s", s.log);
    assert_int_equal(health_until(s.port, "\"nodes\":1", body, sizeof body), 200);
    const double before = node_rows(s.port, bind[0]);
    complete(s.port);
    assert_true(node_rows(s.port, bind[0]) == before);
    mwt_node_kill(&n[0]); /* a drained node leaving costs nothing */
    complete(s.port);
    assert_int_equal(health_until(s.port, "\"ok\"", body, sizeof body), 200);
    /* draining the last owner is refused: the nodes stay */
    assert_int_equal(mwt_write_file(file, bind[2], strlen(bind[2])), 0);
    kill(s.pid, SIGHUP);
    if (!log_says(&s, "stay as they were")) fail_msg("the drain was not refused: %s", s.log);
    complete(s.port);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
    mwt_node_kill(&n[1]);
}

/* Greedy completions with their log-probabilities, sent one after another until told to stop:
 * what a client sees while the fleet changes under it. */
typedef struct load {
    int port;
    atomic_bool stop;
    int sent, failed, differed;
    char first[4096]; /* the first answer's choices: every later one must be this */
} load;

static void *keep_asking(void *arg) {
    load *l = arg;
    while (!atomic_load(&l->stop)) {
        mwt_resp r;
        int rc = mwt_http_request(l->port, "POST", "/v1/completions",
                                  "{\"model\":\"synth\",\"prompt\":[5,6,7,8,9],\"max_tokens\":6,"
                                  "\"temperature\":0,\"logprobs\":2}",
                                  &r);
        l->sent++;
        const char *ch =
            rc == 0 && r.status == 200 && r.body ? strstr(r.body, "\"choices\"") : NULL;
        if (!ch) {
            l->failed++;
        } else {
            const char *end = strstr(ch, "\"usage\"");
            size_t n = end ? (size_t)(end - ch) : strlen(ch);
            if (n >= sizeof l->first) n = sizeof l->first - 1;
            if (!l->first[0])
                memcpy(l->first, ch, n);
            else if (strncmp(l->first, ch, n) || l->first[n])
                l->differed++;
        }
        if (rc == 0) mwt_resp_free(&r);
    }
    return NULL;
}

/* GET /admin/nodes until request id is applied (or 20 s): whether it succeeded. */
static bool admin_applied(int port, long long id, char *body, size_t cap) {
    for (int i = 0; i < 200; i++) {
        mwt_resp r;
        if (mwt_http_request(port, "GET", "/admin/nodes", NULL, &r) == 0) {
            snprintf(body, cap, "%s", r.body ? r.body : "");
            mwt_resp_free(&r);
            json_t *j = json_loads(body, 0, NULL);
            long long applied = j ? json_integer_value(json_object_get(j, "applied")) : 0;
            bool ok = j && json_is_true(json_object_get(j, "ok"));
            json_decref(j);
            if (applied >= id) return ok;
        }
        usleep(100000);
    }
    return false;
}

/* POST /admin/nodes: a node at a new address joins a coordinator that serves without pause, exact
 * mode: it takes work from the next step on, and no request fails or changes a bit of its
 * answer (tokens and log-probabilities) before, during or after the join; a list that would leave
 * experts without an owner is refused and the nodes stay. */
static void test_admin_join_while_serving(void **state) {
    (void)state;
    char bind[2][64];
    for (int i = 0; i < 2; i++)
        snprintf(bind[i], sizeof bind[i], "tcp://127.0.0.1:%d", mwt_free_port());
    const char *a0[] = {"--bind", bind[0], "--threads", "1", NULL};
    const char *a1[] = {"--bind", bind[1], "--threads", "1", NULL};
    mwt_node n0 = mwt_node_up(synth, dir, "a0", a0, 60000);
    const char *extra[] = {"--nodes", bind[0], "--threads", "1", "--exact", "--wire", "f32", NULL};
    mwt_server s;
    assert_int_equal(mwt_serve_start(&s, synth, extra, 120000), 0);
    load l = {.port = s.port};
    atomic_init(&l.stop, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, keep_asking, &l), 0);
    mwt_node n1 = mwt_node_up(synth, dir, "a1", a1, 60000);
    char list[256], body[1024];
    snprintf(list, sizeof list, "%s,%s", bind[0], bind[1]);
    mwt_resp r;
    assert_int_equal(mwt_http_request(s.port, "POST", "/admin/nodes", list, &r), 0);
    if (r.status != 202) fail_msg("POST /admin/nodes: %d %s", r.status, r.body);
    json_t *j = json_loads(r.body, 0, NULL);
    const long long id = json_integer_value(json_object_get(j, "request"));
    json_decref(j);
    mwt_resp_free(&r);
    if (!admin_applied(s.port, id, body, sizeof body)) fail_msg("not applied: %s", body);
    assert_int_equal(health_until(s.port, "\"nodes_up\":2", body, sizeof body), 200);
    for (int i = 0; i < 100 && node_rows(s.port, bind[1]) <= 0; i++) usleep(100000);
    assert_true(node_rows(s.port, bind[1]) > 0);
    /* node 0 alone cannot be left out while it holds what node 1 does not... both hold all:
     * leaving out an unknown address instead drains both, which would orphan every expert */
    assert_int_equal(mwt_http_request(s.port, "POST", "/admin/nodes", "tcp://127.0.0.1:1", &r), 0);
    assert_int_equal(r.status, 202);
    j = json_loads(r.body, 0, NULL);
    const long long id2 = json_integer_value(json_object_get(j, "request"));
    json_decref(j);
    mwt_resp_free(&r);
    assert_false(admin_applied(s.port, id2, body, sizeof body));
    if (!strstr(body, "without a live owner")) fail_msg("refusal not named: %s", body);
    assert_int_equal(mwt_http_request(s.port, "POST", "/admin/nodes", "  \n", &r), 0);
    assert_int_equal(r.status, 400);
    mwt_resp_free(&r);
    usleep(500000);
    atomic_store(&l.stop, true);
    pthread_join(th, NULL);
    print_message("%d requests while node 1 joined: %d failed, %d answered differently\n", l.sent,
                  l.failed, l.differed);
    assert_true(l.sent > 2);
    assert_int_equal(l.failed, 0);
    assert_int_equal(l.differed, 0);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
    mwt_node_kill(&n0);
    mwt_node_kill(&n1);
}

/* A topology of the given binds (every host on this machine, no keys) at path. */
static void write_topology(const char *path, char bind[][64], int n) {
    char hosts[2048] = "", text[4096];
    for (int h = 0; h < n; h++) {
        char one[400];
        snprintf(one, sizeof one,
                 "%s{\"name\":\"t%d\",\"endpoint\":\"%s\",\"memory_gib\":1,\"read_gbs\":10,"
                 "\"cores\":1,\"platform\":\"linux-x86_64\"}",
                 h ? "," : "", h, bind[h]);
        strcat(hosts, one);
    }
    snprintf(text, sizeof text,
             "{\"format\":\"moewire-topology\",\"version\":1,\"name\":\"live\","
             "\"model\":{\"path\":\"%s\"},\"hosts\":[%s],"
             "\"coordinators\":[{\"name\":\"c\",\"address\":\"127.0.0.1\","
             "\"listen\":\"127.0.0.1:0\"}],"
             "\"links\":[{\"from\":\"*\",\"to\":\"*\",\"rtt_us\":30,\"gbit\":40}]}",
             synth, hosts);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
}

/* serve --topology T: the nodes are T's hosts; a host added to T (a new address) joins on SIGHUP
 * and takes work. */
static void test_topology_reload_joins(void **state) {
    (void)state;
    char bind[2][64];
    for (int i = 0; i < 2; i++)
        snprintf(bind[i], sizeof bind[i], "tcp://127.0.0.1:%d", mwt_free_port());
    const char *a0[] = {"--bind", bind[0], "--threads", "1", NULL};
    const char *a1[] = {"--bind", bind[1], "--threads", "1", NULL};
    mwt_node n0 = mwt_node_up(synth, dir, "t0", a0, 60000);
    const char *topo = path_in("live-topology.json");
    write_topology(topo, bind, 1);
    const char *extra[] = {"--topology", topo, "--threads", "1", NULL};
    mwt_server s;
    assert_int_equal(mwt_serve_start(&s, synth, extra, 120000), 0);
    complete(s.port);
    mwt_node n1 = mwt_node_up(synth, dir, "t1", a1, 60000);
    write_topology(topo, bind, 2);
    kill(s.pid, SIGHUP);
    if (!log_says(&s, "the nodes are those of")) fail_msg("no reload in %s", s.log);
    char body[512];
    assert_int_equal(health_until(s.port, "\"nodes_up\":2", body, sizeof body), 200);
    for (int i = 0; i < 20 && node_rows(s.port, bind[1]) <= 0; i++) complete(s.port);
    assert_true(node_rows(s.port, bind[1]) > 0);
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
    mwt_node_kill(&n0);
    mwt_node_kill(&n1);
}

/* This machine's first IPv4 address that is not loopback ("" when it has none). */
static void outer_address(char *ip, size_t cap) {
    struct ifaddrs *all, *a;
    ip[0] = '\0';
    if (getifaddrs(&all) != 0) return;
    for (a = all; a && !ip[0]; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)a->ifa_addr;
            if ((ntohl(in->sin_addr.s_addr) >> 24) != 127)
                inet_ntop(AF_INET, &in->sin_addr, ip, (socklen_t)cap);
        }
    freeifaddrs(all);
}

/* POST /admin/nodes on a raw connection to ip:port with an optional bearer key: the status. */
static int admin_post(const char *ip, int port, const char *key, const char *list) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, ip, &sa.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    char req[1024], auth[128] = "";
    if (key) snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", key);
    int n = snprintf(req, sizeof req,
                     "POST /admin/nodes HTTP/1.1\r\nHost: x\r\n%sContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     auth, strlen(list), list);
    mwt_resp r;
    int status = -1;
    if (mwt_http_send(fd, req, (size_t)n) == 0 && mwt_http_read(fd, &r, 10000) == 0) {
        status = r.status;
        mwt_resp_free(&r);
    }
    close(fd);
    return status;
}

/* /admin/nodes answers only clients on this machine (403 from the machine's outer address, even
 * with the key) and, with --api-key, only with the key (401 without). */
static void test_admin_is_local_and_keyed(void **state) {
    (void)state;
    char bind[64];
    snprintf(bind, sizeof bind, "tcp://127.0.0.1:%d", mwt_free_port());
    const char *a0[] = {"--bind", bind, "--threads", "1", NULL};
    mwt_node n0 = mwt_node_up(synth, dir, "k0", a0, 60000);
    const char *extra[] = {"--nodes",   bind,        "--threads", "1", "--listen",
                           "0.0.0.0:0", "--api-key", "sesame",    NULL};
    mwt_server s;
    assert_int_equal(mwt_serve_start(&s, synth, extra, 120000), 0);
    assert_int_equal(admin_post("127.0.0.1", s.port, NULL, bind), 401);
    assert_int_equal(admin_post("127.0.0.1", s.port, "wrong", bind), 401);
    assert_int_equal(admin_post("127.0.0.1", s.port, "sesame", bind), 202);
    char ip[64];
    outer_address(ip, sizeof ip);
    if (ip[0])
        assert_int_equal(admin_post(ip, s.port, "sesame", bind), 403);
    else
        print_message("no address beyond loopback: the 403 is not checked\n");
    assert_int_equal(mwt_serve_stop(&s, 60000), 0);
    mwt_node_kill(&n0);
}

/* expert-node --probe prints a host entry: with an endpoint added, a topology plans with it. */
static void test_probe_makes_a_host(void **state) {
    (void)state;
    char *const argv[] = {(char *)mwt_bin("expert-node"), "--probe", "--threads", "1", NULL};
    char *out = NULL;
    assert_int_equal(run(argv, &out, NULL), 0);
    json_error_t je;
    json_t *h = json_loads(out, 0, &je);
    if (!h) fail_msg("--probe printed '%s': %s", out, je.text);
    assert_true(json_real_value(json_object_get(h, "read_gbs")) > 0);
    assert_true(json_real_value(json_object_get(h, "memory_gib")) > 0);
    assert_int_equal(json_integer_value(json_object_get(h, "cores")), 1);
    json_object_set_new(h, "endpoint", json_string("tcp://127.0.0.1:5999"));
    char *host = json_dumps(h, JSON_COMPACT);
    char text[2048];
    snprintf(text, sizeof text,
             "{\"format\":\"moewire-topology\",\"version\":1,\"name\":\"p\","
             "\"model\":{\"path\":\"%s\"},\"hosts\":[%s],\"coordinators\":[{\"name\":\"c\","
             "\"address\":\"127.0.0.1\",\"listen\":\"127.0.0.1:0\"}],"
             "\"links\":[{\"from\":\"*\",\"to\":\"*\",\"rtt_us\":30,\"gbit\":40}]}",
             synth, host);
    const char *topo = path_in("probe.json");
    assert_int_equal(mwt_write_file(topo, text, strlen(text)), 0);
    char *const plan_argv[] = {
        (char *)mwt_bin("vindex"),     "plan", "--topology", (char *)topo, "--out",
        (char *)path_in("probe-plan"), NULL};
    assert_int_equal(run(plan_argv, NULL, NULL), 0);
    free(host);
    json_decref(h);
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_local_and_remote_agree),
        cmocka_unit_test(test_corrupt_trace_is_refused),
        cmocka_unit_test(test_serve_traces),
        cmocka_unit_test(test_plan_balances_skewed_load),
        cmocka_unit_test(test_plan_refuses_a_small_fleet),
        cmocka_unit_test(test_planned_fleet_serves),
        cmocka_unit_test(test_probe_makes_a_host),
        cmocka_unit_test(test_serve_with_a_node_missing),
        cmocka_unit_test(test_join_and_drain),
        cmocka_unit_test(test_admin_join_while_serving),
        cmocka_unit_test(test_topology_reload_joins),
        cmocka_unit_test(test_admin_is_local_and_keyed),
    };
    return cmocka_run_group_tests(tests, setup, mwt_tmp_teardown);
}
