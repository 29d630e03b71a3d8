/* bench/bench_synth.c — a synthesized model's fit, vindex and loopback cluster (bench_synth.h). */
#include "bench/bench_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "coordinator/co_cluster.h"

int bs_fits(const char *who, const char *dir, double need) {
    struct statvfs fs;
    const double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (statvfs(dir, &fs) == 0 && (double)fs.f_bavail * fs.f_frsize < 1.2 * need)
        return fprintf(stderr, "%s: %.1f GB of disk needed: skipped\n", who, need / 1e9), -1;
    if (mem > 0 && need > 0.4 * mem)
        return fprintf(stderr, "%s: %.1f GB is too much of the memory: skipped\n", who, need / 1e9),
               -1;
    return 0;
}

int bs_extract(const char *who, const char *path, char *vx, size_t vx_len) {
    char cmd[2400], manifest[1200];
    snprintf(vx, vx_len, "%s.vindex", path);
    snprintf(manifest, sizeof manifest, "%s/manifest.json", vx);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s.tmp' && bin/vindex extract '%s' '%s.tmp' >&2 && mv '%s.tmp' '%s'", vx,
             path, vx, vx, vx);
    if (access(manifest, R_OK) && system(cmd) != 0)
        return fprintf(stderr, "%s: vindex extract %s failed\n", who, path), 1;
    return 0;
}

int bs_loopback2(const char *vx, const md_model *m, int threads, kn_pool *pool, vx_source **vsrc,
                 md_expert_backend **cluster, mw_err *e) {
    vx_expert_set none = {0};
    vx_source_opts vo = {.experts = &none, .dense = false};
    if (vx_source_open(vx, &vo, vsrc, e)) return -1;
    co_cluster_opts co = {.loopback = 2,
                          .model = vx,
                          .node_threads = threads,
                          .node_pin = true,
                          .node_affinity = true,
                          .ready_ms = 1200000,
                          .deadline_ms = 600000,
                          .connect_ms = 600000,
                          .codec = {WR_F16, false},
                          .src = *vsrc,
                          .width = md_expert_width(&m->cfg),
                          .glu = &m->cfg.glu,
                          .numerics = KN_NUM_Q8,
                          .pool = pool};
    return co_cluster_create(&co, cluster, e);
}
