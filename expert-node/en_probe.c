/* expert-node/en_probe.c — `expert-node --probe`: this machine's figures for a topology file, as
 * `key: value` lines. The CPU's read bandwidth is measured here with the node's thread count (a
 * serving CPU node does not measure it at start); a GPU measures its own as the node would. */
#include "expert-node/en_tools.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "kernels/kn.h"
#include "metal/mt_dev.h"
#include "util/mw_time.h"

#define PROBE_BYTES ((size_t)256 << 20)

typedef struct read_job {
    const uint64_t *buf;
    size_t words;
    uint64_t sink[64];
} read_job;

/* Thread ith sums its share of the buffer (one 64-bit word in eight: a word per cache line is
 * what the memory sees, the rest is the core's work). */
static void read_task(void *arg, int ith, int nth) {
    read_job *j = arg;
    const size_t per = j->words / (size_t)nth, lo = per * (size_t)ith;
    uint64_t s = 0;
    for (size_t i = lo; i < lo + per; i += 8) s += j->buf[i];
    j->sink[ith % 64] += s;
}

/* Best of three passes over PROBE_BYTES with the pool's threads: GB/s. */
static double cpu_read_gbps(kn_pool *pool) {
    read_job j = {.words = PROBE_BYTES / 8};
    uint64_t *buf = malloc(PROBE_BYTES);
    if (!buf) return 0;
    memset(buf, 1, PROBE_BYTES); /* touched: real pages */
    j.buf = buf;
    uint64_t best = UINT64_MAX;
    for (int pass = 0; pass < 3; pass++) {
        const uint64_t t = mw_now_ns();
        kn_pool_run(pool, read_task, &j);
        const uint64_t dt = mw_now_ns() - t;
        if (dt < best) best = dt;
    }
    free(buf);
    return best ? (double)PROBE_BYTES / (double)best : 0;
}

int en_probe(const en_opts *o, FILE *out) {
    struct utsname u;
    if (uname(&u) == 0) fprintf(out, "platform: %s %s\n", u.sysname, u.machine);
    fprintf(out, "cpus: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    const double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    fprintf(out, "memory_gb: %.1f\n", mem * 1e-9);
    fprintf(out, "isa: %s\n", kn_isa_name(kn_isa_active()));
    kn_pool *pool = kn_pool_create(o->threads);
    fprintf(out, "threads: %d\ncpu_read_gbps: %.1f\n", kn_pool_size(pool), cpu_read_gbps(pool));
    kn_pool_destroy(pool);
    kn_expert empty;
    memset(&empty, 0, sizeof empty);
    md_expert_table none = {.n_layers = 1, .n_experts = 1, .experts = &empty};
    mt_dev *d = NULL;
    mw_err err;
    const bool gpu =
        mt_backend_gpu() && mt_dev_open(mt_backend_gpu(), &none, PROBE_BYTES, &d, &err) == 0;
    if (gpu)
        fprintf(out, "gpu: %s\ngpu_read_gbps: %.1f\n", mt_dev_name(d), mt_dev_read_gbps(d));
    else
        fprintf(out, "gpu: none (%s)\n",
                mt_backend_gpu() ? err.msg : "this build has no Metal backend");
    const char *dev = o->device && strcmp(o->device, "auto") ? o->device : gpu ? "metal" : "cpu";
    fprintf(out, "device: %s\n", dev);
    mt_dev_close(d);
    return 0;
}
