/* tests/support/mwt_node.h — expert-node processes for the tests that serve through real nodes:
 * one way to start one (its ready file and log in the test's directory, its endpoint read back)
 * and to stop it, instead of a copy in each test. */
#ifndef MWT_NODE_H
#define MWT_NODE_H

#include <sys/types.h>

typedef struct mwt_node {
    pid_t pid; /* 0 once stopped (or when it did not start) */
    char endpoint[256];
    char log[4300]; /* its stdout and stderr */
} mwt_node;

/* Starts prog (NULL: mwt_bin("expert-node")) as `prog --vindex MODEL --ready-file DIR/TAG.ready
 * ARGS...` (args NULL-terminated, may be NULL; "--bind tcp://127.0.0.1:*" is added unless args
 * has a --bind), its output to DIR/TAG.log, and waits up to timeout_ms for it to be ready.
 * Returns 0, or -1 when it did not become ready (then it is killed; n->log names its log). */
int mwt_node_start(mwt_node *n, const char *prog, const char *model, const char *dir,
                   const char *tag, const char *const *args, int timeout_ms);
/* The same, failing the test with the node's log when it does not become ready. */
mwt_node mwt_node_up(const char *model, const char *dir, const char *tag, const char *const *args,
                     int timeout_ms);
/* Stops it gently: SIGCONT (it may be stopped), SIGTERM, and SIGKILL when it has not exited
 * within timeout_ms. Returns its exit status (mwt_wait's), -1 when it was not running. */
int mwt_node_stop(mwt_node *n, int timeout_ms);
/* Kills it (SIGKILL) and reaps it; nothing when it is not running. */
void mwt_node_kill(mwt_node *n);

#endif
