/* tests/support/mwt_node.c — starting and stopping expert nodes for tests (see mwt_node.h). */
#include "tests/support/mwt_node.h"
#include "tests/support/mw_test.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_ARGS = 64 };

int mwt_node_start(mwt_node *n, const char *prog, const char *model, const char *dir,
                   const char *tag, const char *const *args, int timeout_ms) {
    memset(n, 0, sizeof *n);
    char ready[4300];
    snprintf(ready, sizeof ready, "%s/%s.ready", dir, tag);
    snprintf(n->log, sizeof n->log, "%s/%s.log", dir, tag);
    unlink(ready);
    char *argv[MAX_ARGS];
    int k = 0;
    bool bind = false;
    argv[k++] = (char *)(prog ? prog : mwt_bin("expert-node"));
    argv[k++] = "--vindex";
    argv[k++] = (char *)model;
    argv[k++] = "--ready-file";
    argv[k++] = ready;
    for (int i = 0; args && args[i] && k < MAX_ARGS - 3; i++) {
        bind = bind || !strcmp(args[i], "--bind");
        argv[k++] = (char *)args[i];
    }
    if (!bind) {
        argv[k++] = "--bind";
        argv[k++] = "tcp://127.0.0.1:*";
    }
    argv[k] = NULL;
    n->pid = mwt_spawn(argv, n->log);
    if (n->pid <= 0) {
        n->pid = 0;
        return -1;
    }
    char *ep = mwt_wait_ready(ready, n->pid, timeout_ms);
    if (!ep) {
        mwt_node_kill(n);
        return -1;
    }
    snprintf(n->endpoint, sizeof n->endpoint, "%s", ep);
    free(ep);
    return 0;
}

mwt_node mwt_node_up(const char *model, const char *dir, const char *tag, const char *const *args,
                     int timeout_ms) {
    mwt_node n;
    if (mwt_node_start(&n, NULL, model, dir, tag, args, timeout_ms) != 0) {
        char *l = mwt_read_file(n.log, NULL);
        fail_msg("expert-node %s did not become ready; its log:\n%s", tag, l ? l : "(none)");
    }
    return n;
}

int mwt_node_stop(mwt_node *n, int timeout_ms) {
    if (n->pid <= 0) return -1;
    kill(n->pid, SIGCONT);
    kill(n->pid, SIGTERM);
    int st = mwt_wait(n->pid, timeout_ms);
    if (st == -2) {
        kill(n->pid, SIGKILL);
        st = mwt_wait(n->pid, 0);
    }
    n->pid = 0;
    return st;
}

void mwt_node_kill(mwt_node *n) {
    if (n->pid > 0) {
        kill(n->pid, SIGKILL);
        mwt_wait(n->pid, 0);
    }
    n->pid = 0;
}
