/* tests/arm64/test_arm64_node.c — an aarch64 expert-node (run under qemu-user) serving this
 * machine's x86 coordinator over 127.0.0.1: exact mode with the f32 wire gives logits bit-identical
 * to in-process experts on x86 for every expert block format: MXFP4 (gpt-oss), Q6_K (qwen3moe,
 * deepseek2), Q4_K and Q8_0 (gpt-oss's experts transcoded), and kimi-k3's SiTU GLU, in q8 and f32
 * numerics; alone and beside an x86 node owning the other half of the experts. The NEON and x86
 * kernels sum in the same canonical order (docs/kernels.md), so nothing here has a tolerance.
 * MW_ARM64_NODE names a command that runs the aarch64 expert-node (tests/arm64-check.sh writes
 * one); without it every test skips. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_cli.h"
#include "tests/support/mwt_node.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROMPT "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"
#define GEN    "6"

static char *dir;
static char q4k[4200], q80[4200]; /* gpt-oss-tiny with its experts transcoded */
static const char *arm_node;      /* the command running the aarch64 node, NULL: skip */

static int setup(void **state) {
    const char *p = getenv("MW_ARM64_NODE");
    arm_node = p && *p && access(p, X_OK) == 0 ? p : NULL;
    if (!arm_node)
        fprintf(stderr, "    MW_ARM64_NODE is not an executable: the aarch64 node tests skip\n");
    if (mwt_tmp_setup(state)) return -1;
    dir = mwt_tmp;
    if (!arm_node) return 0;
    const char *types[2] = {"experts=q4_K", "experts=q8_0"};
    char *outs[2] = {q4k, q80};
    for (int i = 0; i < 2; i++) {
        snprintf(outs[i], sizeof q4k, "%s/%s.vindex", dir, types[i] + 8);
        char *argv[] = {(char *)mwt_bin("vindex"),
                        "extract",
                        (char *)mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"),
                        outs[i],
                        "--transcode",
                        (char *)types[i],
                        NULL};
        char *err = NULL;
        int rc = mwt_run(argv, NULL, &err, 120000);
        if (rc != 0) fail_msg("vindex extract --transcode %s failed (%d): %s", types[i], rc, err);
        free(err);
    }
    return 0;
}

/* `coordinator generate` on model, through nodes when given (exact mode, f32 wire); its logits
 * to out, its stderr to *err (when err). */
static int generate(const char *model, const char *numerics, const char *nodes, const char *out,
                    char **err) {
    static const mwt_gen how = {.prompt = PROMPT, .max_tokens = GEN, .timeout_ms = 600000};
    const char *cluster[] = {"--nodes", nodes, "--exact", "--wire", "f32", NULL};
    return mwt_generate(&how, model, numerics, out, nodes ? cluster : NULL, err);
}

static void same_logits(const char *what, const char *a, const char *b) {
    size_t na = 0, nb = 0;
    float *x = mwt_read_file(a, &na), *y = mwt_read_file(b, &nb);
    assert_non_null(x);
    assert_non_null(y);
    assert_true(na > 0);
    assert_int_equal(na, nb);
    if (memcmp(x, y, na))
        fail_msg("%s: logits differ from in-process experts (max |diff| %g)", what,
                 mwt_max_abs_diff(x, y, na / sizeof(float)));
    free(x);
    free(y);
}

/* The model served by one aarch64 node owning arm_spec (NULL: everything) and, when x86_spec is
 * given, an x86 node owning the rest; every numerics in the list compared with in-process. */
static void check(const char *rel, const char *arm_spec, const char *x86_spec,
                  const char *const *numerics) {
    if (!arm_node) skip();
    const char *model = rel[0] == '/' ? rel : mwt_fixture(rel);
    const char *arm_args[] = {"--threads", "1", arm_spec ? "--experts" : NULL, arm_spec, NULL};
    mwt_node arm, x86 = {0};
    /* qemu's start and its first page faults over the whole bank: a generous bound */
    if (mwt_node_start(&arm, arm_node, model, dir, "arm", arm_args, 120000) != 0) {
        char *l = mwt_read_file(arm.log, NULL);
        fail_msg("the aarch64 expert-node did not become ready; its log:\n%s", l ? l : "(none)");
    }
    char nodes[600];
    snprintf(nodes, sizeof nodes, "%s", arm.endpoint);
    if (x86_spec) {
        const char *x86_args[] = {"--threads", "1", "--experts", x86_spec, NULL};
        x86 = mwt_node_up(model, dir, "x86", x86_args, 60000);
        snprintf(nodes, sizeof nodes, "%s,%s", arm.endpoint, x86.endpoint);
    }
    for (int i = 0; numerics[i]; i++) {
        char local[4300], remote[4300];
        snprintf(local, sizeof local, "%s/local.bin", dir);
        snprintf(remote, sizeof remote, "%s/remote.bin", dir);
        unlink(local);
        unlink(remote);
        assert_int_equal(generate(model, numerics[i], NULL, local, NULL), 0);
        char *err = NULL;
        int rc = generate(model, numerics[i], nodes, remote, &err);
        if (rc != 0) fail_msg("coordinator exited %d:\n%s", rc, err ? err : "");
        /* the report names each node's device: the aarch64 one runs the NEON kernels */
        if (!err || !strstr(err, "cpu-neon")) fail_msg("no cpu-neon node in:\n%s", err ? err : "");
        free(err);
        char what[512];
        snprintf(what, sizeof what, "%s, numerics %s, %s", rel, numerics[i],
                 x86_spec ? "aarch64 + x86 nodes" : "one aarch64 node");
        same_logits(what, local, remote);
    }
    if (x86_spec) assert_int_equal(mwt_node_stop(&x86, 10000), 0);
    assert_int_equal(mwt_node_stop(&arm, 30000), 0);
}

static const char *const both[] = {"q8", "f32", NULL};

static void test_gpt_oss_mxfp4(void **state) {
    (void)state;
    check("llamacpp/gpt-oss-tiny/model.gguf", NULL, NULL, both);
}

static void test_qwen3moe(void **state) {
    (void)state;
    check("llamacpp/qwen3moe-tiny/model.gguf", NULL, NULL, both);
}

static void test_deepseek2(void **state) {
    (void)state;
    static const char *const q8[] = {"q8", NULL};
    check("llamacpp/deepseek2-tiny/model.gguf", NULL, NULL, q8);
}

static void test_q4_K_and_q8_0(void **state) {
    (void)state;
    check(q4k, NULL, NULL, both);
    check(q80, NULL, NULL, both);
}

static void test_kimi_k3_situ(void **state) {
    (void)state;
    static const char *const q8[] = {"q8", NULL};
    check("llamacpp/kimi-k3-tiny/model.gguf", NULL, NULL, q8);
}

/* Half the experts on each architecture: one round mixes NEON and x86 partial sums. */
static void test_gpt_oss_beside_an_x86_node(void **state) {
    (void)state;
    static const char *const q8[] = {"q8", NULL};
    check("llamacpp/gpt-oss-tiny/model.gguf", "0-3:0-3", "0-3:4-7", q8);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt_oss_mxfp4), cmocka_unit_test(test_qwen3moe),
        cmocka_unit_test(test_deepseek2),     cmocka_unit_test(test_q4_K_and_q8_0),
        cmocka_unit_test(test_kimi_k3_situ),  cmocka_unit_test(test_gpt_oss_beside_an_x86_node),
    };
    return cmocka_run_group_tests(tests, setup, mwt_tmp_teardown);
}
