/* coordinator/co_loopback.c — starting and stopping a local cluster of expert nodes. Readiness is
 * the node's --ready-file (written once its socket is bound), so no port is guessed and nothing
 * races: each node binds tcp://127.0.0.1:* and reports the port it got. */
#include "coordinator/co_loopback.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kn.h"
#include "wire/wr_curve.h"
#include "util/mw_platform.h"
#include "util/mw_time.h"

struct co_loopback {
    int n;
    pid_t *pid;
    char **endpoint;
    char (*keys)[WR_KEY_Z85 + 1]; /* with CURVE: each node's public key */
    char dir[64];
};

/* The expert-node program: $MOEWIRE_EXPERT_NODE, else next to this executable. */
static int program_path(const co_loopback_opts *o, char *buf, size_t cap, mw_err *err) {
    const char *env = getenv("MOEWIRE_EXPERT_NODE");
    if (o->program || env) {
        snprintf(buf, cap, "%s", o->program ? o->program : env);
    } else {
        char self[PATH_MAX];
        if (mw_self_exe(self, sizeof self) != 0)
            return mw_errf(err, "loopback: cannot find this executable's directory (name the "
                                "node program with $MOEWIRE_EXPERT_NODE)");
        char *slash = strrchr(self, '/');
        *slash = '\0';
        snprintf(buf, cap, "%s/expert-node", self);
    }
    if (access(buf, X_OK) != 0) return mw_errf(err, "loopback: %s is not an executable", buf);
    return 0;
}

static pid_t spawn(char *const argv[]) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: the parent may have threads. A process group
         * of its own keeps a terminal's Ctrl-C (SIGINT to the foreground group) from killing the
         * node under requests the coordinator is still finishing; the coordinator stops it, and
         * its death stops the node (where the system can: mw_die_with_parent). */
        setpgid(0, 0);
        mw_die_with_parent(SIGTERM);
        if (getppid() != parent) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static char *ready_path(const co_loopback *lb, int i) {
    static char p[128];
    snprintf(p, sizeof p, "%s/node-%d", lb->dir, i);
    return p;
}

static int wait_ready(co_loopback *lb, int timeout_ms, mw_err *err) {
    long long deadline = mw_now_ms() + timeout_ms;
    for (int i = 0; i < lb->n; i++) {
        for (;;) {
            FILE *f = fopen(ready_path(lb, i), "r");
            if (f) {
                char line[256] = "";
                char *ok = fgets(line, sizeof line, f);
                fclose(f);
                line[strcspn(line, "\n")] = '\0';
                if (ok && line[0] && !(lb->endpoint[i] = strdup(line)))
                    return mw_errf(err, "out of memory");
                if (ok && line[0]) break;
            }
            int st;
            if (waitpid(lb->pid[i], &st, WNOHANG) == lb->pid[i]) {
                lb->pid[i] = 0;
                return mw_errf(err, "loopback node %d exited (%s %d) before serving", i,
                               WIFEXITED(st) ? "status" : "signal",
                               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            }
            if (mw_now_ms() > deadline)
                return mw_errf(err, "loopback node %d is not serving after %d ms", i, timeout_ms);
            usleep(5000);
        }
    }
    return 0;
}

/* CURVE for the run: a fresh key pair per node in the temporary directory (removed with it),
 * and the allow-list of the one coordinator key. */
static int make_keys(co_loopback *lb, const char *client, mw_err *err) {
    char path[160], text[128];
    snprintf(path, sizeof path, "%s/allow", lb->dir);
    snprintf(text, sizeof text, "public-key = \"%s\"\n", client);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        return mw_errf(err, "loopback: cannot write %s", path);
    if (!(lb->keys = calloc((size_t)lb->n, sizeof *lb->keys))) return mw_errf(err, "out of memory");
    for (int i = 0; i < lb->n; i++) {
        wr_keypair k;
        snprintf(path, sizeof path, "%s/key-%d", lb->dir, i);
        if (wr_keypair_new(&k, err) || wr_keypair_write(&k, path, err)) return -1;
        snprintf(lb->keys[i], sizeof lb->keys[i], "%s", k.pub);
        memset(&k, 0, sizeof k);
    }
    return 0;
}

/* Each endpoint carries its node's public key: "tcp://127.0.0.1:P#KEY". */
static int pin_keys(co_loopback *lb, mw_err *err) {
    for (int i = 0; i < lb->n; i++) {
        size_t n = strlen(lb->endpoint[i]) + 2 + WR_KEY_Z85;
        char *e = malloc(n);
        if (!e) return mw_errf(err, "out of memory");
        snprintf(e, n, "%s#%s", lb->endpoint[i], lb->keys[i]);
        free(lb->endpoint[i]);
        lb->endpoint[i] = e;
    }
    return 0;
}

/* Node i's --experts: every layer, its share of the experts and, with replicas, the shares of
 * the next R - 1 nodes. */
static void owned_spec(const co_loopback_opts *o, int n, int i, char *spec, size_t cap) {
    size_t sl = 0;
    const int R = o->replicas > 1 ? (o->replicas < n ? o->replicas : n) : 1;
    for (int k = 0; k < R; k++) { /* the shares of nodes i .. i+R-1 */
        const int j = (i + k) % n;
        int lo = (int)((long)j * o->n_experts / n);
        int hi = (int)((long)(j + 1) * o->n_experts / n) - 1;
        sl += (size_t)snprintf(spec + sl, cap - sl, "%s0-%d:%d-%d", k ? "," : "", o->n_layers - 1,
                               lo, hi);
    }
}

/* Starts node i (prog) on 127.0.0.1, its threads from CPU i × cpus / n unless unbound. */
static int start_node(const co_loopback_opts *o, co_loopback *lb, const char *prog, int i,
                      mw_err *err) {
    char spec[1024], threads[16], id[32], ready[128], first[16];
    owned_spec(o, lb->n, i, spec, sizeof spec);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(threads, sizeof threads, "%ld", o->threads > 0 ? o->threads : cpus > 0 ? cpus : 1);
    snprintf(id, sizeof id, "loopback-%d", i);
    snprintf(ready, sizeof ready, "%s", ready_path(lb, i));
    char key[160], allow[160];
    snprintf(key, sizeof key, "%s/key-%d.key", lb->dir, i);
    snprintf(allow, sizeof allow, "%s/allow", lb->dir);
    snprintf(first, sizeof first, "%ld", (long)i * kn_cpus_allowed() / lb->n);
    if (!o->bind_cpus) snprintf(first, sizeof first, "off");
    char *argv[32] = {(char *)prog,
                      "--vindex",
                      (char *)o->model,
                      "--experts",
                      spec,
                      "--bind",
                      "tcp://127.0.0.1:*",
                      "--threads",
                      threads,
                      "--node-id",
                      id,
                      "--ready-file",
                      ready,
                      "--quiet",
                      "--affinity",
                      first,
                      "--poll-us",
                      "0"};
    int at = 18;
    if (o->curve_client) {
        argv[at++] = "--curve-secret";
        argv[at++] = key;
        argv[at++] = "--allow";
        argv[at++] = allow;
    }
    if (o->pin) argv[at++] = "--pin";
    argv[at] = NULL;
    lb->pid[i] = spawn(argv);
    if (lb->pid[i] < 0) {
        lb->pid[i] = 0;
        return mw_errf(err, "loopback: cannot start %s: %s", prog, strerror(errno));
    }
    return 0;
}

int co_loopback_start(const co_loopback_opts *o, co_loopback **out, mw_err *err) {
    *out = NULL;
    if (o->n_nodes < 1 || o->n_nodes > o->n_experts)
        return mw_errf(err, "--loopback %d: must be 1 .. %d (the model's experts)", o->n_nodes,
                       o->n_experts);
    char prog[PATH_MAX];
    if (program_path(o, prog, sizeof prog, err)) return -1;
    co_loopback *lb = calloc(1, sizeof *lb);
    if (!lb) return mw_errf(err, "out of memory");
    lb->n = o->n_nodes;
    lb->pid = calloc((size_t)lb->n, sizeof *lb->pid);
    lb->endpoint = calloc((size_t)lb->n, sizeof *lb->endpoint);
    snprintf(lb->dir, sizeof lb->dir, "/tmp/moewire-loopback-XXXXXX");
    if (!lb->pid || !lb->endpoint || !mkdtemp(lb->dir)) {
        lb->dir[0] = '\0';
        co_loopback_stop(lb);
        return mw_errf(err, "loopback: cannot create a temporary directory");
    }
    int rc = o->curve_client ? make_keys(lb, o->curve_client, err) : 0;
    for (int i = 0; i < lb->n && !rc; i++) rc = start_node(o, lb, prog, i, err);
    if (rc || wait_ready(lb, o->timeout_ms, err) || (o->curve_client && pin_keys(lb, err))) {
        co_loopback_stop(lb);
        return -1;
    }
    *out = lb;
    return 0;
}

const char *const *co_loopback_endpoints(const co_loopback *lb) {
    return (const char *const *)lb->endpoint;
}

void co_loopback_stop(co_loopback *lb) {
    if (!lb) return;
    if (!lb->pid || !lb->endpoint) lb->n = 0; /* a start that failed allocating */
    for (int i = 0; i < lb->n; i++)
        if (lb->pid[i] > 0) kill(lb->pid[i], SIGTERM);
    long long deadline = mw_now_ms() + 2000;
    for (int i = 0; i < lb->n; i++) {
        while (lb->pid[i] > 0) {
            int st;
            pid_t w = waitpid(lb->pid[i], &st, WNOHANG);
            if (w == lb->pid[i] || (w < 0 && errno != EINTR)) {
                lb->pid[i] = 0;
            } else if (mw_now_ms() > deadline) {
                kill(lb->pid[i], SIGKILL);
                waitpid(lb->pid[i], &st, 0);
                lb->pid[i] = 0;
            } else {
                usleep(2000);
            }
        }
        if (lb->dir[0]) {
            unlink(ready_path(lb, i));
            char p[160];
            snprintf(p, sizeof p, "%s/key-%d.key", lb->dir, i);
            unlink(p);
            snprintf(p, sizeof p, "%s/key-%d.pub", lb->dir, i);
            unlink(p);
        }
        free(lb->endpoint[i]);
    }
    if (lb->dir[0]) {
        char p[160];
        snprintf(p, sizeof p, "%s/allow", lb->dir);
        unlink(p);
        rmdir(lb->dir);
    }
    free(lb->keys);
    free(lb->pid);
    free(lb->endpoint);
    free(lb);
}
