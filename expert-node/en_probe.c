/* expert-node/en_probe.c — the probe: the read bandwidth a node's threads reach streaming a buffer
 * far larger than the caches, timed in slices of about one expert's size (each thread summing its
 * own contiguous share of a slice, as a node's kernels read an expert; the best slice, so a busy
 * moment of the machine does not pass for its speed), the online CPUs, the physical memory (the
 * suggested budget leaves a fifth of it to the system and the page cache) and the platform name
 * the topology uses. */
#include "expert-node/en_probe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "kernels/kn.h"
#include "util/mw_time.h"

#define PROBE_BYTES ((size_t)1 << 30)
#define SLICE       ((size_t)8 << 20)
#define PASSES      3

typedef struct job {
    const uint64_t *buf;
    size_t words;
    uint64_t sums[256];
} job;

static void sum_share(void *arg, int ith, int nth) {
    job *j = arg;
    const size_t per = j->words / (size_t)nth, lo = per * (size_t)ith;
    const uint64_t *p = j->buf + lo;
    uint64_t a[8] = {0};
    for (size_t i = 0; i + 8 <= per; i += 8)
        for (int k = 0; k < 8; k++) a[k] += p[i + k];
    j->sums[ith % 256] = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

static double read_gbs(int threads) {
    uint64_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, PROBE_BYTES)) return 0;
    memset(buf, 1, PROBE_BYTES); /* every page faulted in before timing */
    kn_pool *pool = kn_pool_create(threads);
    job j = {.buf = buf, .words = PROBE_BYTES / 8};
    kn_pool_run(pool, sum_share, &j); /* warm-up */
    double best = 0;
    j.words = SLICE / 8;
    for (int r = 0; r < PASSES; r++)
        for (size_t off = 0; off + SLICE <= PROBE_BYTES; off += SLICE) {
            j.buf = buf + off / 8;
            const double t0 = mw_now_s();
            kn_pool_run(pool, sum_share, &j);
            const double gbs = (double)SLICE / (mw_now_s() - t0) / 1e9;
            if (gbs > best) best = gbs;
        }
    kn_pool_destroy(pool);
    free(buf);
    return best;
}

/* "linux-x86_64", "darwin-arm64", ...: the topology's platform names. */
static void platform(char *out, size_t n) {
    struct utsname u;
    if (uname(&u)) {
        snprintf(out, n, "unknown");
        return;
    }
    const char *os = !strcmp(u.sysname, "Darwin") ? "darwin" : "linux";
    const char *arch = !strcmp(u.machine, "arm64") ? "arm64" : u.machine;
    snprintf(out, n, "%s-%s", os, arch);
}

int en_probe(int threads, FILE *out) {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (threads < 1) threads = cpus > 0 ? (int)cpus : 1;
    char host[256] = "host", plat[64];
    gethostname(host, sizeof host - 1);
    platform(plat, sizeof plat);
    fprintf(stderr, "expert-node --probe: reading %zu MiB with %d thread(s)...\n",
            PROBE_BYTES >> 20, threads);
    const double gbs = read_gbs(threads);
    if (gbs <= 0) {
        fprintf(stderr, "expert-node --probe: no memory for the %zu MiB probe buffer\n",
                PROBE_BYTES >> 20);
        return -1;
    }
    fprintf(stderr,
            "expert-node --probe: %.1f GiB of memory (the budget below leaves a fifth to the "
            "system); add \"endpoint\" and \"curve_public_key\" (expert-node keygen) to make it "
            "a host of a topology file\n",
            mem / (1 << 30));
    fprintf(out,
            "{\"name\": \"%s\", \"memory_gib\": %.1f, \"read_gbs\": %.1f, \"cores\": %d, "
            "\"platform\": \"%s\"}\n",
            host, 0.8 * mem / (1 << 30), gbs, threads, plat);
    return 0;
}
