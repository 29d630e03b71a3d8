/* tests/unit/test_co_metrics.c — the /metrics page (co_metrics) against the Prometheus text
 * exposition format 0.0.4, read back line by line by a small checker here: every sample belongs
 * to a family announced once by "# HELP" and "# TYPE" before it, counters end in _total,
 * histogram buckets are cumulative with a last le="+Inf" equal to _count, label values escape
 * \, " and newlines, numbers print as Prometheus reads them. Then the figures themselves: requests
 * by route and status, tokens, latency histograms, steps (rows, failures, unique experts), the
 * backend's traffic, movement ratio and readiness, per-node series only with nodes, and the
 * micro-batch figures (checked by promtool too when the tests are given it). */
#include "tests/support/mw_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/co_metrics.h"

static co_metrics *make(int n_nodes) {
    co_metrics *m = NULL;
    mw_err err;
    if (co_metrics_new(n_nodes, 4, 32, 4, &m, &err)) fail_msg("co_metrics_new: %s", err.msg);
    return m;
}

/* The page, NUL-terminated (the caller frees it). */
static char *page(co_metrics *m) {
    co_buf b = {0};
    co_metrics_write(m, &b);
    assert_false(b.failed);
    assert_non_null(b.p);
    return b.p;
}

/* ---- a checker of the exposition format ---------------------------------------------------- */

#define MAX_FAMILIES 128

typedef struct family {
    char name[128], type[16];
    bool help;
} family;

typedef struct expo {
    family f[MAX_FAMILIES];
    int n;
} expo;

static family *find_family(expo *x, const char *name) {
    for (int i = 0; i < x->n; i++)
        if (!strcmp(x->f[i].name, name)) return &x->f[i];
    return NULL;
}

/* The family a sample name belongs to: itself, or a histogram's without _bucket, _sum, _count. */
static family *family_of(expo *x, const char *sample) {
    family *f = find_family(x, sample);
    if (f) return f;
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    for (int i = 0; i < 3; i++) {
        const size_t n = strlen(sample), k = strlen(sfx[i]);
        if (n > k && !strcmp(sample + n - k, sfx[i])) {
            char base[128];
            snprintf(base, sizeof base, "%.*s", (int)(n - k), sample);
            f = find_family(x, base);
            if (f && !strcmp(f->type, "histogram")) return f;
        }
    }
    return NULL;
}

static bool name_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Checks a label set "{a="v",b="w"}" starting at *p; leaves *p after the brace. */
static void check_labels(const char **p, const char *line) {
    const char *s = *p + 1;
    while (*s != '}') {
        if (!name_char(*s, true)) fail_msg("bad label name in: %s", line);
        while (name_char(*s, false)) s++;
        if (s[0] != '=' || s[1] != '"') fail_msg("label without =\"value\" in: %s", line);
        s += 2;
        while (*s != '"') {
            if (!*s || *s == '\n') fail_msg("unterminated label value in: %s", line);
            if (*s == '\\') {
                if (s[1] != '\\' && s[1] != '"' && s[1] != 'n') fail_msg("bad escape in: %s", line);
                s++;
            }
            s++;
        }
        s++;
        if (*s == ',') s++;
    }
    *p = s + 1;
}

static void check_value(const char *v, const char *line) {
    if (!strcmp(v, "+Inf") || !strcmp(v, "-Inf") || !strcmp(v, "NaN")) return;
    char *end;
    strtod(v, &end);
    if (end == v || *end) fail_msg("bad value '%s' in: %s", v, line);
}

/* Checks a whole page; returns the families it announced. */
static void check_page(const char *text, expo *x) {
    memset(x, 0, sizeof *x);
    char *copy = strdup(text);
    assert_non_null(copy);
    assert_true(strlen(text) > 0 && text[strlen(text) - 1] == '\n');
    for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char name[128], word[32];
        if (!strncmp(line, "# HELP ", 7)) {
            assert_int_equal(sscanf(line + 7, "%127s", name), 1);
            family *f = find_family(x, name);
            if (f && f->help) fail_msg("HELP twice for %s", name);
            if (!f) {
                assert_true(x->n < MAX_FAMILIES);
                f = &x->f[x->n++];
                snprintf(f->name, sizeof f->name, "%s", name);
            }
            f->help = true;
            continue;
        }
        if (!strncmp(line, "# TYPE ", 7)) {
            assert_int_equal(sscanf(line + 7, "%127s %31s", name, word), 2);
            family *f = find_family(x, name);
            if (!f || !f->help) fail_msg("TYPE of %s without its HELP first", name);
            if (f->type[0]) fail_msg("TYPE twice for %s", name);
            if (strcmp(word, "counter") && strcmp(word, "gauge") && strcmp(word, "histogram"))
                fail_msg("type '%s' of %s", word, name);
            snprintf(f->type, sizeof f->type, "%s", word);
            if (!strcmp(word, "counter") && strlen(name) > 6 &&
                strcmp(name + strlen(name) - 6, "_total"))
                fail_msg("counter %s does not end in _total", name);
            continue;
        }
        if (line[0] == '#') fail_msg("stray comment: %s", line);
        const char *p = line;
        if (!name_char(*p, true)) fail_msg("bad metric name: %s", line);
        while (name_char(*p, false)) p++;
        snprintf(name, sizeof name, "%.*s", (int)(p - line), line);
        family *f = family_of(x, name);
        if (!f || !f->type[0]) fail_msg("sample %s before its family's TYPE", name);
        if (*p == '{') check_labels(&p, line);
        if (*p != ' ') fail_msg("no space before the value: %s", line);
        check_value(p + 1, line);
    }
    free(copy);
}

/* The value of the sample line that starts with `series` followed by a space (NAN: none). */
static double value_of(const char *text, const char *series) {
    const size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, series, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
    return NAN;
}

/* Every bucket series of histogram `name` (with `labels` before le, "" for none) is cumulative,
 * ends with +Inf and that equals _count; returns _count. */
static double check_histogram(const char *text, const char *name, const char *labels) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s_bucket{%s%sle=\"", name, labels, *labels ? "," : "");
    double last = -1;
    bool inf = false;
    const size_t n = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, prefix, n)) continue;
        if (inf) fail_msg("%s: a bucket after +Inf", name);
        inf = !strncmp(p + n, "+Inf\"", 5);
        const double v = strtod(strchr(p + n, '}') + 2, NULL);
        if (v < last) fail_msg("%s: buckets not cumulative (%g after %g)", name, v, last);
        last = v;
    }
    if (!inf) fail_msg("%s{%s}: no +Inf bucket", name, labels);
    char count[256];
    snprintf(count, sizeof count, "%s_count%s%s%s", name, *labels ? "{" : "", labels,
             *labels ? "}" : "");
    assert_true(value_of(text, count) == last);
    return last;
}

/* ---- the tests ------------------------------------------------------------------------------ */

/* A fresh server's page: well formed, every figure zero, no per-node family. */
static void test_empty_page(void **st) {
    (void)st;
    co_metrics *m = make(0);
    char *t = page(m);
    expo x;
    check_page(t, &x);
    assert_non_null(find_family(&x, "moewire_http_requests_total"));
    assert_non_null(find_family(&x, "moewire_time_to_first_token_seconds"));
    assert_null(find_family(&x, "moewire_node_up"));
    assert_true(value_of(t, "moewire_generation_tokens_total") == 0);
    assert_true(value_of(t, "moewire_movement_ratio") == 0);
    assert_true(value_of(t, "moewire_ready") == 0);
    assert_true(check_histogram(t, "moewire_batch_rows", "") == 0);
    free(t);
    co_metrics_free(m);
}

/* Requests by route and status; the HTTP front's gauges and stream stalls; tokens; the latency
 * histograms' buckets, sums and counts. */
static void test_requests_and_latencies(void **st) {
    (void)st;
    co_metrics *m = make(0);
    co_metrics_request(m, "/v1/completions", 200);
    co_metrics_request(m, "/v1/completions", 200);
    co_metrics_request(m, "/v1/completions", 400);
    co_metrics_request(m, "/health", 200);
    co_metrics_prompt_tokens(m, 12);
    co_metrics_generated_tokens(m, 5);
    co_metrics_generated_tokens(m, 2);
    co_metrics_ttft(m, 0.003); /* the first bucket */
    co_metrics_ttft(m, 0.2);
    co_metrics_ttft(m, 1000); /* beyond every bound: +Inf only */
    co_metrics_itl(m, 0.01);  /* on a bound: counted in it (le) */
    co_metrics_http(m, 7, 123456);
    co_metrics_stream_paused(m);
    co_metrics_stream_paused(m);
    co_metrics_stream_stalled(m);
    char *t = page(m);
    expo x;
    check_page(t, &x);
    assert_true(
        value_of(t, "moewire_http_requests_total{route=\"/v1/completions\",status=\"200\"}") == 2);
    assert_true(
        value_of(t, "moewire_http_requests_total{route=\"/v1/completions\",status=\"400\"}") == 1);
    assert_true(value_of(t, "moewire_http_requests_total{route=\"/health\",status=\"200\"}") == 1);
    assert_true(value_of(t, "moewire_prompt_tokens_total") == 12);
    assert_true(value_of(t, "moewire_generation_tokens_total") == 7);
    assert_true(value_of(t, "moewire_http_connections") == 7);
    assert_true(value_of(t, "moewire_http_held_bytes") == 123456);
    assert_true(value_of(t, "moewire_streams_paused_total") == 2);
    assert_true(value_of(t, "moewire_streams_stalled_total") == 1);
    assert_true(check_histogram(t, "moewire_time_to_first_token_seconds", "") == 3);
    assert_true(value_of(t, "moewire_time_to_first_token_seconds_bucket{le=\"0.005\"}") == 1);
    assert_true(value_of(t, "moewire_time_to_first_token_seconds_bucket{le=\"60\"}") == 2);
    assert_true(fabs(value_of(t, "moewire_time_to_first_token_seconds_sum") - 1000.203) < 1e-9);
    assert_true(value_of(t, "moewire_inter_token_latency_seconds_bucket{le=\"0.01\"}") == 1);
    assert_true(value_of(t, "moewire_inter_token_latency_seconds_bucket{le=\"0.005\"}") == 0);
    free(t);
    co_metrics_free(m);
}

/* More routes and statuses than the table holds: counted as far as it goes, never a crash. */
static void test_many_routes(void **st) {
    (void)st;
    co_metrics *m = make(0);
    for (int r = 0; r < 40; r++) {
        char route[48];
        snprintf(route, sizeof route, "/route/%d", r);
        for (int s = 0; s < 40; s++) co_metrics_request(m, route, 200 + s);
    }
    char *t = page(m);
    expo x;
    check_page(t, &x);
    assert_true(value_of(t, "moewire_http_requests_total{route=\"/route/0\",status=\"200\"}") == 1);
    free(t);
    co_metrics_free(m);
}

/* Steps: rows, durations, failures, queue and KV gauges, unique experts per layer against what
 * uniform routing would touch. */
static void test_steps(void **st) {
    (void)st;
    co_metrics *m = make(0);
    const int32_t unique[4] = {3, 4, 32, 1};
    co_step_stats s = {.rows = 6,
                       .prefill_rows = 5,
                       .decode_rows = 1,
                       .active = 2,
                       .queued = -1,
                       .kv_bytes = 1 << 20,
                       .kv_used_bytes = 4096,
                       .seconds = 0.02,
                       .unique_experts = unique,
                       .n_layers = 4};
    co_metrics_step(m, &s);
    s.failed = true;
    s.unique_experts = NULL; /* a failed step's routing is not counted */
    co_metrics_step(m, &s);
    co_metrics_queue(m, -1, 3);
    co_metrics_kv_used(m, 8192);
    char *t = page(m);
    expo x;
    check_page(t, &x);
    assert_true(check_histogram(t, "moewire_batch_rows", "") == 2);
    assert_true(value_of(t, "moewire_batch_rows_bucket{le=\"4\"}") == 0);
    assert_true(value_of(t, "moewire_batch_rows_bucket{le=\"8\"}") == 2);
    assert_true(check_histogram(t, "moewire_step_duration_seconds", "") == 2);
    assert_true(value_of(t, "moewire_step_failures_total") == 1);
    assert_true(value_of(t, "moewire_queue_depth") == 3);
    assert_true(value_of(t, "moewire_active_sequences") == 2);
    assert_true(value_of(t, "moewire_kv_cache_bytes") == 1 << 20);
    assert_true(value_of(t, "moewire_kv_cache_used_bytes") == 8192);
    /* unique experts: bounds 1, 2, 4, ..., 16, then the expert count (32) */
    assert_true(check_histogram(t, "moewire_step_unique_experts", "") == 4);
    assert_true(value_of(t, "moewire_step_unique_experts_bucket{le=\"1\"}") == 1);
    assert_true(value_of(t, "moewire_step_unique_experts_bucket{le=\"4\"}") == 3);
    assert_true(value_of(t, "moewire_step_unique_experts_bucket{le=\"16\"}") == 3);
    assert_true(value_of(t, "moewire_step_unique_experts_bucket{le=\"32\"}") == 4);
    assert_true(value_of(t, "moewire_step_unique_experts_sum") == 40);
    const double uniform = 4 * 32 * (1 - pow(1 - 4.0 / 32, 6));
    assert_true(fabs(value_of(t, "moewire_step_unique_experts_uniform_total") - uniform) < 1e-6);
    free(t);
    co_metrics_free(m);
}

/* promtool check metrics on the page, when the tests are given promtool (make test). */
static void promtool_check(const char *text) {
    const char *promtool = getenv("MW_PROMTOOL");
    if (!promtool || access(promtool, X_OK)) {
        print_message("promtool not given (MW_PROMTOOL): the page is checked here only\n");
        return;
    }
    char *dir = mwt_tmpdir("metrics"), path[4200], cmd[8600];
    snprintf(path, sizeof path, "%s/page.txt", dir);
    assert_int_equal(mwt_write_file(path, text, strlen(text)), 0);
    snprintf(cmd, sizeof cmd, "%s check metrics < %s", promtool, path);
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    char *out = NULL, *err = NULL;
    const int rc = mwt_run(sh, &out, &err, 60000);
    if (rc) fail_msg("promtool check metrics: %s%s\n%s", out ? out : "", err ? err : "", text);
    free(out);
    free(err);
    mwt_rmrf(dir);
    free(dir);
}

/* Ping-pong micro-batches: steps by how many micro-batches they ran in (a failed step in none),
 * the rows of each micro-batch of the split ones, and the share of the experts' exchanges hidden
 * behind other work. */
static void test_micro_batches(void **st) {
    (void)st;
    co_metrics *m = make(2);
    const int64_t two[2] = {3, 5}, four[4] = {16, 16, 17, 300};
    co_step_stats s = {.rows = 1, .micro_batches = 1, .exchange_s = 0.004, .blocked_s = 0.003};
    co_metrics_step(m, &s);
    s = (co_step_stats){
        .rows = 8, .micro_batches = 2, .micro_rows = two, .exchange_s = 0.004, .blocked_s = 0.001};
    co_metrics_step(m, &s);
    s = (co_step_stats){
        .rows = 349, .micro_batches = 4, .micro_rows = four, .exchange_s = 0.002, .blocked_s = 0};
    co_metrics_step(m, &s);
    s = (co_step_stats){.rows = 8, .failed = true}; /* counted in none */
    co_metrics_step(m, &s);
    char *t = page(m);
    expo x;
    check_page(t, &x);
    assert_string_equal(find_family(&x, "moewire_step_micro_batches_total")->type, "counter");
    assert_true(value_of(t, "moewire_step_micro_batches_total{micro_batches=\"1\"}") == 1);
    assert_true(value_of(t, "moewire_step_micro_batches_total{micro_batches=\"2\"}") == 1);
    assert_true(value_of(t, "moewire_step_micro_batches_total{micro_batches=\"3\"}") == 0);
    assert_true(value_of(t, "moewire_step_micro_batches_total{micro_batches=\"4\"}") == 1);
    assert_true(check_histogram(t, "moewire_micro_batch_rows", "") == 6);
    assert_true(value_of(t, "moewire_micro_batch_rows_bucket{le=\"4\"}") == 1);
    assert_true(value_of(t, "moewire_micro_batch_rows_bucket{le=\"16\"}") == 4);
    assert_true(value_of(t, "moewire_micro_batch_rows_bucket{le=\"256\"}") == 5);
    assert_true(value_of(t, "moewire_micro_batch_rows_sum") == 357);
    assert_true(fabs(value_of(t, "moewire_expert_exchange_seconds_total") - 0.010) < 1e-12);
    assert_true(fabs(value_of(t, "moewire_expert_blocked_seconds_total") - 0.004) < 1e-12);
    assert_true(fabs(value_of(t, "moewire_expert_exchange_hidden_ratio") - 0.6) < 1e-9);
    promtool_check(t);
    free(t);
    co_metrics_free(m);
}

/* The backend's figures, the movement ratio, readiness, and per-node series with escaped
 * endpoints and their round-trip histograms. */
static void test_backend_and_nodes(void **st) {
    (void)st;
    co_metrics *m = make(2);
    co_node_stats nodes[2] = {
        {.endpoint = "tcp://127.0.0.1:5555",
         .member = true,
         .up = true,
         .tx_bytes = 100,
         .rx_bytes = 50,
         .weight_bytes = 1000,
         .rows = 7,
         .batches = 3,
         .errors = 1,
         .rtt_sum_s = 0.5},
        {.endpoint = "tcp://odd\"name\\with\nnewline", .member = true, .up = false},
    };
    nodes[0].rtt_buckets[3] = 2;              /* under 8 us */
    nodes[0].rtt_buckets[CO_RTT_BUCKETS] = 1; /* the rest */
    co_backend_stats b = {.tx_bytes = 300, .rx_bytes = 100, .weight_bytes = 800000, .nodes = nodes};
    co_metrics_backend(m, &b);
    co_metrics_set_ready(m, true);
    assert_true(co_metrics_ready(m));
    int up, n;
    co_metrics_nodes_up(m, &up, &n);
    assert_int_equal(n, 2);
    assert_int_equal(up, 1);
    char *t = page(m);
    expo x;
    check_page(t, &x);
    assert_true(value_of(t, "moewire_wire_sent_bytes_total") == 300);
    assert_true(value_of(t, "moewire_wire_received_bytes_total") == 100);
    assert_true(value_of(t, "moewire_expert_weight_read_bytes_total") == 800000);
    assert_true(value_of(t, "moewire_movement_ratio") == 0.0005);
    assert_true(value_of(t, "moewire_ready") == 1);
    const char *n0 = "node=\"0\",endpoint=\"tcp://127.0.0.1:5555\"";
    char series[256];
    snprintf(series, sizeof series, "moewire_node_up{%s}", n0);
    assert_true(value_of(t, series) == 1);
    snprintf(series, sizeof series, "moewire_node_rows_total{%s}", n0);
    assert_true(value_of(t, series) == 7);
    snprintf(series, sizeof series, "moewire_node_errors_total{%s}", n0);
    assert_true(value_of(t, series) == 1);
    assert_true(check_histogram(t, "moewire_node_rtt_seconds", n0) == 3);
    snprintf(series, sizeof series, "moewire_node_rtt_seconds_bucket{%s,le=\"8e-06\"}", n0);
    assert_true(value_of(t, series) == 2);
    const char *n1 = "node=\"1\",endpoint=\"tcp://odd\\\"name\\\\with\\nnewline\"";
    snprintf(series, sizeof series, "moewire_node_up{%s}", n1);
    assert_true(value_of(t, series) == 0);
    assert_true(check_histogram(t, "moewire_node_rtt_seconds", n1) == 0);
    free(t);
    /* a later snapshot replaces the last, the endpoints kept from the first */
    nodes[0].rows = 9;
    nodes[0].endpoint = "changed";
    co_metrics_backend(m, &b);
    t = page(m);
    snprintf(series, sizeof series, "moewire_node_rows_total{%s}", n0);
    assert_true(value_of(t, series) == 9);
    free(t);
    co_metrics_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_page),        cmocka_unit_test(test_requests_and_latencies),
        cmocka_unit_test(test_many_routes),       cmocka_unit_test(test_steps),
        cmocka_unit_test(test_backend_and_nodes), cmocka_unit_test(test_micro_batches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
