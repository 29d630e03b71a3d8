/* tests/integration/test_bench_lan_model.c — bench/bench_lan_model.sh, docs/scale.md's check of
 * the fleet model on the emulated LAN, on parts written by hand: a linked decode's one-batch round
 * trip W and ping-pong's three terms come out as the formulas of the script's comment say with
 * those parts (a node batch keeps t = min(T, cores) threads busy, the delay lines' CPU is not
 * added, the shared-core term is the CPU sum of both lanes plus the last call's wake and link),
 * and a run without the nodes' thread count is refused unless --node-threads gives it. */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One unlinked (0 ms) LAN on 2 free cores and one linked (1 ms) on 1.5, 8 nodes of 2 threads.
 * The unlinked decodes give the parts: wake = min(800 − 2·8·20/2, 900 − 2·8·20/2) = 640, C1 =
 * 150, C(4) = 400, node(4) = 60, node₂ = 40. The linked LAN's probes: link(2) = 996, ser(2) =
 * 24, link(4) = 1046, ser(4) = 104 (and the lines' CPU, which W does not add). */
static const char parts[] =
    "{\"bench\":\"lan_colocation\",\"label\":\"lan-0ms-10gbit\",\"shared\":1%s}\n"
    "{\"bench\":\"lan_colocation\",\"label\":\"lan-1ms-1gbit\",\"shared\":1%s}\n"
    "{\"bench\":\"lan_cores\",\"label\":\"lan-0ms-10gbit\",\"procs\":2,\"cores_free\":2}\n"
    "{\"bench\":\"lan_cores\",\"label\":\"lan-0ms-10gbit\",\"procs\":2,\"cores_free\":2}\n"
    "{\"bench\":\"lan_cores\",\"label\":\"lan-1ms-1gbit\",\"procs\":2,\"cores_free\":1.4}\n"
    "{\"bench\":\"lan_cores\",\"label\":\"lan-1ms-1gbit\",\"procs\":2,\"cores_free\":1.6}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-0ms-10gbit/1\",\"rtt_us_median\":150,"
    "\"line_cpu_us\":0}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-0ms-10gbit/1/direct\",\"rtt_us_median\":150}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-0ms-10gbit/2\",\"rtt_us_median\":160,"
    "\"line_cpu_us\":0}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-0ms-10gbit/2/direct\",\"rtt_us_median\":160}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-0ms-10gbit/4\",\"rtt_us_median\":170,"
    "\"line_cpu_us\":0}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-0ms-10gbit/4/direct\",\"rtt_us_median\":170}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-1ms-1gbit/1\",\"rtt_us_median\":1150,"
    "\"line_cpu_us\":300}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-1ms-1gbit/1/direct\",\"rtt_us_median\":150}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-1ms-1gbit/2\",\"rtt_us_median\":1170,"
    "\"line_cpu_us\":320}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-1ms-1gbit/2/direct\",\"rtt_us_median\":174}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-1ms-1gbit/4\",\"rtt_us_median\":1300,"
    "\"line_cpu_us\":400}\n"
    "{\"bench\":\"lan_link\",\"label\":\"lan-1ms-1gbit/4/direct\",\"rtt_us_median\":254}\n";

/* A decode's line: label, streams, micro-batches, layer round trip, node compute, trunk. */
static void decode(FILE *f, const char *label, int S, int m, double rtt, double node, double C) {
    fprintf(f,
            "{\"bench\":\"lan\",\"label\":\"%s\",\"moe_layers\":7,\"streams\":%d,"
            "\"micro_batches\":%d,\"tok_s\":%.1f,\"step_us\":%.0f,\"trunk_us_per_layer\":%.1f,"
            "\"layer_rtt_us\":%.1f,\"node_compute_us\":%.1f}\n",
            label, S, m, S / (7 * (C + rtt)) * 1e6, 7 * (C + rtt), C, rtt, node);
}

/* Writes the run (with node_threads in its lan_colocation lines or not) and runs the script with
 * `args` on it; returns its exit status, *out and *err its output. */
static int run_model(bool threads, const char *args, char **out, char **err) {
    char path[1024], cmd[4096];
    snprintf(path, sizeof path, "%s/run.jsonl", mwt_tmp);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    const char *t = threads ? ",\"node_threads\":2" : "";
    fprintf(f, parts, t, t);
    const char *z = "lan-0ms-10gbit", *l = "lan-1ms-1gbit";
    decode(f, z, 1, 1, 800, 20, 150);
    decode(f, z, 1, 2, 900, 20, 160);
    decode(f, z, 4, 1, 1500, 60, 400);
    decode(f, z, 4, 2, 1600, 40, 500);
    decode(f, l, 1, 1, 1900, 20, 150);
    decode(f, l, 1, 2, 1950, 20, 150);
    decode(f, l, 4, 1, 2500, 60, 420);
    decode(f, l, 4, 2, 2600, 40, 520);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' %s <'%s'", mwt_repo_path("bench/bench_lan_model.sh"), args,
             path);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    return mwt_run(argv, out, err, 60000);
}

/* The lan_predict line of the linked LAN from the unlinked parts at S = 4 and m micro-batches. */
static json_t *prediction(const char *out, int m) {
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        json_t *j = json_loadb(p, strcspn(p, "\n"), 0, NULL);
        if (j && !strcmp(json_string_value(json_object_get(j, "label")), "lan-1ms-1gbit") &&
            !strcmp(json_string_value(json_object_get(j, "parts")), "unlinked") &&
            json_integer_value(json_object_get(j, "streams")) == 4 &&
            json_integer_value(json_object_get(j, "micro_batches")) == m)
            return j;
        json_decref(j);
    }
    fail_msg("no prediction of the linked 4-stream decode with %d micro-batch(es) in:\n%s", m, out);
    return NULL;
}

/* A field of a prediction: the whole microseconds the script rounds it to. */
static void expect_us(const json_t *j, const char *key, long want) {
    const json_t *v = json_object_get(j, key);
    if (!json_is_integer(v) || json_integer_value(v) != want)
        fail_msg("%s: %lld (-1: not an integer), the parts say %ld", key,
                 json_is_integer(v) ? (long long)json_integer_value(v) : -1LL, want);
}

static void test_terms_from_parts(void **state) {
    (void)state;
    char *out, *err;
    int rc = run_model(true, "", &out, &err);
    if (rc != 0) fail_msg("bench_lan_model.sh: exit %d: %s", rc, err);
    /* one batch: t = min(2, 1.5); W = 640 + 1046 + max(104 + 60, 1.5·8·60/1.5 + 104/8) */
    json_t *j = prediction(out, 1);
    expect_us(j, "wake_us", 640);
    expect_us(j, "W_us", 2179);
    expect_us(j, "step_us_predicted", 18053); /* 7·(400 + 2179) */
    json_decref(j);
    /* ping-pong: W₂ = 640 + 996 + 1.5·8·40/1.5 + 24/8 = 1959, C₂ = 2·150 + 250/3·2, X₂ = 480:
     * the chain C₂/2 + W₂, the shared cores max(C₂, (C₂ + 2·X₂)/1.5 + 640 + 996), the nodes
     * 2·(W₂ − 640 − 996) */
    j = prediction(out, 2);
    const json_t *t = json_object_get(j, "max_terms_us");
    assert_int_equal(json_array_size(t), 3);
    assert_int_equal(json_integer_value(json_array_get(t, 0)), 2192);
    assert_int_equal(json_integer_value(json_array_get(t, 1)), 2587);
    assert_int_equal(json_integer_value(json_array_get(t, 2)), 646);
    expect_us(j, "W_us", 1959);
    json_decref(j);
    free(out);
    free(err);
}

static void test_node_threads_needed(void **state) {
    (void)state;
    char *out, *err;
    int rc = run_model(false, "", &out, &err);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err, "node_threads"));
    free(out);
    free(err);
    rc = run_model(false, "--node-threads 2", &out, &err);
    if (rc != 0) fail_msg("bench_lan_model.sh --node-threads 2: exit %d: %s", rc, err);
    json_t *j = prediction(out, 1);
    expect_us(j, "W_us", 2179);
    json_decref(j);
    free(out);
    free(err);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_terms_from_parts),
        cmocka_unit_test(test_node_threads_needed),
    };
    return cmocka_run_group_tests(tests, mwt_tmp_setup, mwt_tmp_teardown);
}
