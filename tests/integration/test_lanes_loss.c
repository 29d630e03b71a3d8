/* tests/integration/test_lanes_loss.c — a node lost while several layer calls are in flight: five
 * sequences decoded in 4 micro-batches over expert-node processes in exact mode; before one step
 * a node is stopped (SIGSTOP), so each micro-batch's call of the step's first MoE layer goes out
 * and none comes back, then killed 300 ms later with those calls outstanding.
 *  - every expert with two owners (three nodes): the step completes, the calls' unanswered pieces
 *    re-sent to the replicas, and every step's logits are the same bits as the in-process experts'
 *    on whole batches;
 *  - without a replica (two nodes, disjoint experts): the step fails within seconds, the error
 *    naming the experts nobody serves, and a watchdog makes a hang a failure. */
#include "tests/support/mw_test.h"
#include "tests/support/mwt_lanes.h"
#include "tests/support/mwt_node.h"

#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coordinator/co_remote.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "util/mw_time.h"
#include "vindex/vx_source.h"

#define SEQS      5
#define STEPS     6
#define LOSS_STEP 3 /* the decode step during which the node is lost */
#define KILL_MS   300

static char *dir;
static char gguf[4096];
static vx_source *src;
static md_model *model;

static int setup(void **state) {
    (void)state;
    dir = mwt_tmpdir("lanes-loss");
    snprintf(gguf, sizeof gguf, "%s", mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"));
    mw_err e;
    if (vx_source_open(gguf, NULL, &src, &e) || md_model_load(src, &model, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    md_model_free(model);
    vx_source_close(src);
    mwt_rmrf(dir);
    free(dir);
    return 0;
}

static void hung(int sig) {
    (void)sig;
    static const char msg[] = "test_lanes_loss: a step hung after the node loss\n";
    if (write(2, msg, sizeof msg - 1)) _exit(1);
    _exit(1);
}

/* The remote backend with a count of the layer calls submitted and not yet waited for. */
typedef struct counted {
    md_expert_backend be, *inner;
    atomic_int out;
} counted;

static int counted_submit(md_expert_backend *b, const md_moe_batch *batch, mw_err *err) {
    counted *c = b->impl;
    const int rc = c->inner->submit(c->inner, batch, err);
    if (!rc) atomic_fetch_add(&c->out, 1);
    return rc;
}

static int counted_wait(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    counted *c = b->impl;
    const int rc = c->inner->wait(c->inner, batch, out, err);
    atomic_fetch_sub(&c->out, 1);
    return rc;
}

static int counted_run(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    counted *c = b->impl;
    return c->inner->run(c->inner, batch, out, err);
}

static bool counted_row_lost(const md_expert_backend *b, int64_t row) {
    const counted *c = b->impl;
    return c->inner->row_lost(c->inner, row);
}

static void counted_wrap(counted *c, md_expert_backend *inner) {
    *c = (counted){.be = {.name = "counted",
                          .run = counted_run,
                          .submit = counted_submit,
                          .wait = counted_wait,
                          .row_lost = inner->row_lost ? counted_row_lost : NULL,
                          .in_flight = inner->in_flight},
                   .inner = inner};
    c->be.impl = c;
    atomic_init(&c->out, 0);
}

typedef struct killer {
    pid_t pid;
    pthread_t th;
    const counted *calls; /* NULL: not counted */
    int out_at_kill;      /* calls outstanding when the node was killed */
} killer;

static void *kill_later(void *arg) {
    killer *k = arg;
    const struct timespec t = {0, KILL_MS * 1000000L};
    nanosleep(&t, NULL);
    k->out_at_kill = k->calls ? atomic_load(&k->calls->out) : -1;
    kill(k->pid, SIGKILL);
    return NULL;
}

/* The steps' logits (the prompts' then each decode step's, concatenated) with `experts` in
 * `micro_batches`; before step LOSS_STEP `victim` (when given) is stopped and killed KILL_MS
 * later. Returns the failed step's error in err (and NULL), or the logits. *blocked_ms gets the
 * lossy step's time. */
static float *run(md_expert_backend *experts, int micro_batches, mwt_node *victim,
                  double *blocked_ms, int *out_at_kill, mw_err *err) {
    counted calls;
    if (victim) {
        counted_wrap(&calls, experts);
        experts = &calls.be;
    }
    md_ctx *c = mwt_lanes_ctx(model, experts, micro_batches, SEQS + 1);
    const int64_t V = model->cfg.n_vocab;
    const int len[SEQS] = {6, 2, 5, 3, 4};
    md_row rows[64];
    int T = 0;
    for (int i = 0; i < 6; i++)
        for (int s = 0; s < SEQS; s++)
            if (i < len[s]) rows[T++] = (md_row){s, i, (s * 31 + i * 7) % 200 + 3, i + 1 == len[s]};
    float *out = malloc((size_t)(SEQS * (1 + STEPS)) * (size_t)V * sizeof *out);
    assert_non_null(out);
    if (md_forward(c, rows, T, out, err)) fail_msg("prefill: %s", err->msg);
    for (int step = 0; step < STEPS; step++) {
        for (int s = 0; s < SEQS; s++)
            rows[s] = (md_row){s, len[s] + step, (step * 17 + s * 5) % 200 + 9, 1};
        killer k = {0};
        const bool lose = victim && step == LOSS_STEP;
        if (lose) {
            kill(victim->pid, SIGSTOP);
            k.pid = victim->pid;
            k.calls = &calls;
            assert_int_equal(pthread_create(&k.th, NULL, kill_later, &k), 0);
            alarm(60);
        }
        const uint64_t t0 = mw_now_ns();
        const int rc =
            md_forward(c, rows, SEQS, out + (size_t)(SEQS * (1 + step)) * (size_t)V, err);
        if (lose) {
            alarm(0);
            *blocked_ms = (double)(mw_now_ns() - t0) * 1e-6;
            pthread_join(k.th, NULL);
            *out_at_kill = k.out_at_kill;
            waitpid(victim->pid, NULL, 0);
            victim->pid = 0;
        }
        if (rc) {
            free(out);
            md_ctx_free(c);
            return NULL;
        }
    }
    md_lane_stats st = md_ctx_lane_stats(c);
    assert_int_equal(st.split_steps, micro_batches > 1 ? 1 + STEPS : 0);
    md_ctx_free(c);
    return out;
}

static md_expert_backend *cluster(mwt_node *n, int k) {
    const char *eps[3];
    for (int i = 0; i < k; i++) eps[i] = n[i].endpoint;
    md_expert_backend *b = mwt_lanes_cluster(model, src, gguf, eps, k, 0);
    assert_int_equal(b->in_flight, 4);
    return b;
}

static void start_nodes(mwt_node *n, const char *const *specs, int k, const char *tag) {
    for (int i = 0; i < k; i++) {
        char t[64];
        snprintf(t, sizeof t, "%s-%d", tag, i);
        const char *args[] = {"--experts", specs[i], "--threads", "1", NULL};
        n[i] = mwt_node_up(gguf, dir, t, args, 60000);
    }
}

static void test_replicas_take_the_calls_in_flight(void **state) {
    (void)state;
    signal(SIGALRM, hung);
    mw_err e;
    md_expert_backend *local;
    if (md_local_backend_new(src, &model->cfg, NULL, &local, &e)) fail_msg("%s", e.msg);
    double ms = 0;
    int out_at_kill = 0;
    float *want = run(local, 1, NULL, &ms, &out_at_kill, &e);
    local->destroy(local);
    static const char *const specs[3] = {"0-3:0-5", "0-3:3-7", "0-3:6-7,0-3:0-2"};
    mwt_node n[3];
    start_nodes(n, specs, 3, "replicas");
    md_expert_backend *remote = cluster(n, 3);
    float *got = run(remote, 4, &n[1], &ms, &out_at_kill, &e);
    if (!got) fail_msg("a node lost with replicas failed the step: %s", e.msg);
    const co_remote_health h = co_remote_get_health(remote);
    print_message("lost node with calls in flight: %d layer calls out at the kill; the step took "
                  "%.0f ms (killed after %d ms), %llu batches re-sent to replicas, %d of 3 up\n",
                  out_at_kill, ms, KILL_MS, (unsigned long long)h.failovers, h.n_up);
    assert_in_range(out_at_kill, 2, 4);
    assert_true(ms >= KILL_MS * 0.9); /* the calls were out when the node died */
    assert_true(h.failovers >= 2);    /* several calls' pieces went to the replicas */
    assert_int_equal(h.n_up, 2);
    const size_t nf = (size_t)(SEQS * (1 + STEPS)) * (size_t)model->cfg.n_vocab;
    if (memcmp(want, got, nf * sizeof *got))
        fail_msg("the logits changed after a node was lost with calls in flight");
    free(want);
    free(got);
    remote->destroy(remote);
    for (int i = 0; i < 3; i++) mwt_node_stop(&n[i], 5000);
}

static void test_without_replica_the_step_fails(void **state) {
    (void)state;
    signal(SIGALRM, hung);
    static const char *const specs[2] = {"0-3:0-3", "0-3:4-7"};
    mwt_node n[2];
    start_nodes(n, specs, 2, "alone");
    md_expert_backend *remote = cluster(n, 2);
    mw_err e = {{0}};
    double ms = 0;
    int out_at_kill = 0;
    float *got = run(remote, 4, &n[1], &ms, &out_at_kill, &e);
    print_message("lost node without replica: %d layer calls out at the kill; the step failed "
                  "after %.0f ms: %s\n",
                  out_at_kill, ms, e.msg);
    assert_null(got);
    assert_in_range(out_at_kill, 2, 4);
    assert_non_null(strstr(e.msg, "no live owner"));
    assert_true(ms >= KILL_MS * 0.9);
    assert_true(ms < KILL_MS + 10000);
    remote->destroy(remote);
    for (int i = 0; i < 2; i++) mwt_node_stop(&n[i], 5000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replicas_take_the_calls_in_flight),
        cmocka_unit_test(test_without_replica_the_step_fails),
    };
    return cmocka_run_group_tests_name("node loss with calls in flight", tests, setup, teardown);
}
