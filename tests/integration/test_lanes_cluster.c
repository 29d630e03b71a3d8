/* tests/integration/test_lanes_cluster.c — ping-pong micro-batches on expert nodes: with the
 * remote backend in exact mode over two loopback nodes, 2, 3 and 4 micro-batches (their
 * ExpertBatches in flight together, replies taken in whatever order they come) give the same
 * logits, bit for bit, as the in-process experts on one batch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/md_lanes.h"
#include "model/md_local.h"
#include "tests/support/mw_test.h"
#include "tests/support/mwt_lanes.h"
#include "tests/support/mwt_model.h"

static void same_on_nodes(const char *name) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/model.gguf", name);
    const char *path = mwt_fixture(rel);
    mwt_model m = mwt_model_open(path);
    md_model *model = m.model;
    md_expert_backend *local = m.experts, *remote;
    vx_source *src = m.src;
    remote = mwt_lanes_cluster(model, src, path, NULL, 0, 2);
    assert_int_equal(remote->in_flight, 4);
    size_t n1, n;
    md_lane_stats st;
    float *whole = mwt_lanes_run(model, local, 1, &n1, &st);
    for (int lanes = 1; lanes <= MD_LANES_MAX; lanes++) {
        float *split = mwt_lanes_run(model, remote, lanes, &n, &st);
        assert_int_equal(n, n1);
        if (memcmp(whole, split, n * sizeof *split))
            fail_msg("%s: %d micro-batches on the nodes change the logits", name, lanes);
        assert_int_equal(st.split_steps, lanes > 1 ? 1 + MWT_LANES_STEPS : 0);
        free(split);
    }
    free(whole);
    remote->destroy(remote);
    mwt_model_close(&m);
}

static void test_gptoss(void **state) {
    (void)state;
    same_on_nodes("gpt-oss-tiny");
}

static void test_deepseek2(void **state) {
    (void)state;
    same_on_nodes("deepseek2-tiny");
}

static void test_kimi_k3(void **state) {
    (void)state;
    same_on_nodes("kimi-k3-tiny");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gptoss),
        cmocka_unit_test(test_deepseek2),
        cmocka_unit_test(test_kimi_k3),
    };
    return cmocka_run_group_tests_name("micro-batches on expert nodes", tests, NULL, NULL);
}
