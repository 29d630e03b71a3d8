/* tests/integration/test_pool.c — several coordinators, one expert pool: two `coordinator
 * generate` processes decode at once over the same two expert-node processes, which group their
 * rows of a layer (--group-window-us, expert-node/en_group.h). In exact mode with the f32 wire each
 * coordinator's logits are --experts local's bit for bit, and the nodes' summaries show requests
 * of one coordinator that joined the other's held rows (so the bits were checked on joined
 * executions). */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_cli.h"
#include "tests/support/mwt_node.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROMPT "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"

static const mwt_gen how = {.prompt = PROMPT, .max_tokens = "24", .timeout_ms = 300000};
static char synth[4200];

static int setup(void **state) {
    if (mwt_tmp_setup(state)) return -1;
    snprintf(synth, sizeof synth, "%s/synth.vindex", mwt_tmp);
    mwt_gpt_oss shape = {
        .layers = 3, .hidden = 320, .experts = 12, .top_k = 4, .expert_ff = 288, .seed = 11};
    if (mwt_synth_gpt_oss(synth, shape, NULL)) fail_msg("vindex synth failed");
    return 0;
}

typedef struct run {
    const char *const *extra;
    char logits[4300];
    int rc;
} run;

static void *run_main(void *arg) {
    run *r = arg;
    r->rc = mwt_generate(&how, synth, "f32", r->logits, r->extra, NULL);
    return NULL;
}

static float *read_floats(const char *path, size_t *n) {
    size_t len = 0;
    float *f = mwt_read_file(path, &len);
    assert_non_null(f);
    *n = len / sizeof(float);
    return f;
}

/* The requests that joined held rows, from a stopped node's log (0 when it says none). */
static unsigned long joined(const mwt_node *nd) {
    size_t len = 0;
    char *log = mwt_read_file(nd->log, &len);
    assert_non_null(log);
    const char *at = strstr(log, "requests that joined them: ");
    unsigned long j = at ? strtoul(at + strlen("requests that joined them: "), NULL, 10) : 0;
    free(log);
    return j;
}

static void test_two_coordinators_share_the_nodes_bit_for_bit(void **state) {
    (void)state;
    run ref = {.extra = NULL};
    snprintf(ref.logits, sizeof ref.logits, "%s/local.bin", mwt_tmp);
    run_main(&ref);
    assert_int_equal(ref.rc, 0);
    /* a generous window: this box is loaded and the binaries sanitized */
    const char *a0[] = {"--experts", "0-2:0-5", "--group-window-us", "100000", NULL};
    const char *a1[] = {"--experts", "0-2:6-11", "--group-window-us", "100000", NULL};
    mwt_node n0 = mwt_node_up(synth, mwt_tmp, "node-0", a0, 60000);
    mwt_node n1 = mwt_node_up(synth, mwt_tmp, "node-1", a1, 60000);
    char nodes[600];
    snprintf(nodes, sizeof nodes, "%s,%s", n0.endpoint, n1.endpoint);
    const char *extra[] = {"--nodes", nodes, "--exact", "--wire", "f32", NULL};
    run r[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        r[i] = (run){.extra = extra};
        snprintf(r[i].logits, sizeof r[i].logits, "%s/pool-%d.bin", mwt_tmp, i);
        assert_int_equal(pthread_create(&t[i], NULL, run_main, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    assert_int_equal(mwt_node_stop(&n0, 10000), 0);
    assert_int_equal(mwt_node_stop(&n1, 10000), 0);
    const unsigned long j = joined(&n0) + joined(&n1);
    print_message("two coordinators on one pool: %lu requests joined another's held rows\n", j);
    size_t n_ref, n;
    float *want = read_floats(ref.logits, &n_ref);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r[i].rc, 0);
        float *got = read_floats(r[i].logits, &n);
        assert_int_equal(n, n_ref);
        assert_memory_equal(got, want, n * sizeof(float));
        free(got);
    }
    free(want);
    assert_true(j > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_coordinators_share_the_nodes_bit_for_bit),
    };
    return cmocka_run_group_tests_name("pool", tests, setup, mwt_tmp_teardown);
}
