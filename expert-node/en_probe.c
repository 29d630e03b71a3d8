/* expert-node/en_probe.c — `expert-node --probe`: what this machine brings to a fleet. On stdout,
 * one line of JSON that is a topology file's host entry once an endpoint and a key are added
 * (docs/operations.md, "Measuring a host"): the memory budget (a fifth of the physical memory
 * left to the system and the page cache), the read bandwidth of the device a node would serve
 * from, the cores, the platform. On stderr, the figures behind it, one `key: value` per line: the
 * instruction set, the CPU's read bandwidth with --threads threads (a serving CPU node does not
 * measure it at start), the GPU and its read bandwidth as the node measures it, the device. */
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
#define SLICE       ((size_t)8 << 20) /* about one expert: what a node streams at a time */

typedef struct read_job {
    const uint64_t *buf;
    size_t words;
    uint64_t sink[64];
} read_job;

/* Thread ith sums its share of the slice (one 64-bit word in eight: a word per cache line is what
 * the memory sees, the rest is the core's work). */
static void read_task(void *arg, int ith, int nth) {
    read_job *j = arg;
    const size_t per = j->words / (size_t)nth, lo = per * (size_t)ith;
    uint64_t s = 0;
    for (size_t i = lo; i < lo + per; i += 8) s += j->buf[i];
    j->sink[ith % 64] += s;
}

/* GB/s of the best slice over three passes: a moment the machine is busy elsewhere is not taken
 * for its speed. */
static double cpu_read_gbps(kn_pool *pool) {
    uint64_t *buf = malloc(PROBE_BYTES);
    if (!buf) return 0;
    memset(buf, 1, PROBE_BYTES); /* touched: real pages */
    read_job j = {.words = SLICE / 8};
    uint64_t best = UINT64_MAX;
    for (int pass = 0; pass < 3; pass++)
        for (size_t off = 0; off + SLICE <= PROBE_BYTES; off += SLICE) {
            j.buf = buf + off / 8;
            const uint64_t t = mw_now_ns();
            kn_pool_run(pool, read_task, &j);
            const uint64_t dt = mw_now_ns() - t;
            if (dt < best) best = dt;
        }
    free(buf);
    return best ? (double)SLICE / (double)best : 0;
}

/* "linux-x86_64", "darwin-arm64", ...: the topology's platform names. */
static void platform(char *out, size_t n) {
    struct utsname u;
    if (uname(&u)) {
        snprintf(out, n, "unknown");
        return;
    }
    const char *os = !strcmp(u.sysname, "Darwin") ? "darwin" : "linux";
    snprintf(out, n, "%s-%s", os, !strcmp(u.machine, "aarch64") ? "aarch64" : u.machine);
}

int en_probe(const en_opts *o, FILE *out) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    char host[256] = "host", plat[64];
    gethostname(host, sizeof host - 1);
    platform(plat, sizeof plat);
    fprintf(stderr, "platform: %s\ncpus: %ld\nmemory_gb: %.1f\nisa: %s\n", plat, cpus, mem * 1e-9,
            kn_isa_name(kn_isa_active()));
    kn_pool *pool = kn_pool_create(o->threads);
    const int threads = kn_pool_size(pool);
    const double cpu = cpu_read_gbps(pool);
    kn_pool_destroy(pool);
    fprintf(stderr, "threads: %d\ncpu_read_gbps: %.1f\n", threads, cpu);
    kn_expert empty;
    memset(&empty, 0, sizeof empty);
    md_expert_table none = {.n_layers = 1, .n_experts = 1, .experts = &empty};
    mt_dev *d = NULL;
    mw_err err;
    const bool gpu =
        mt_backend_gpu() && mt_dev_open(mt_backend_gpu(), &none, PROBE_BYTES, &d, &err) == 0;
    const double gpu_gbps = gpu ? mt_dev_read_gbps(d) : 0;
    if (gpu)
        fprintf(stderr, "gpu: %s\ngpu_read_gbps: %.1f\n", mt_dev_name(d), gpu_gbps);
    else
        fprintf(stderr, "gpu: none (%s)\n",
                mt_backend_gpu() ? err.msg : "this build has no Metal backend");
    const char *dev = o->device && strcmp(o->device, "auto") ? o->device : gpu ? "metal" : "cpu";
    fprintf(stderr, "device: %s\n", dev);
    mt_dev_close(d);
    fprintf(out,
            "{\"name\": \"%s\", \"memory_gib\": %.1f, \"read_gbs\": %.1f, \"cores\": %d, "
            "\"platform\": \"%s\"}\n",
            host, 0.8 * mem / (1 << 30), strcmp(dev, "metal") ? cpu : gpu_gbps, threads, plat);
    return cpu > 0 ? 0 : 1;
}
