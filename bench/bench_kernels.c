/* bench/bench_kernels.c — the kernel benchmark (not a test): first this machine's ceilings,
 * measured in the same run as the figures compared with them — the read bandwidth (STREAM-style, 1
 * and 2 threads) and the int8 dot-product peak of the active ISA's instruction — and the pool's
 * wake-up, then kn_matmul on MXFP4, Q6_K, Q4_K, Q8_0 and F32 matrices and the fused expert (T = 1
 * to 8, 16, 64; 1 and 2 threads), rotating over enough matrices that the working set exceeds the
 * last-level cache. Prints, per case, GB/s of stored weight bytes, % of the bandwidth of as many
 * threads, GB/s per thread against ONE thread's bandwidth (the per-core streaming rate) for the
 * best and for the median call, % of the int8 peak, rows x tokens per second, with one thread the
 * same call's rate on a few rows that stay in L2 (the kernel's ceiling without the memory: which
 * of the two bounds it), and one JSON line; with --ggml-mm PATH (bench/ggml/ggml_mm.c, built
 * against a ggml the user names) ggml's time for the same shape, T and threads, measured right
 * before each matrix case, and the ratio. `bench_kernels --help` lists the option and the
 * environment variables that select cases (ENV_NOTES). */
#include "bench/bench_llama.h"
#include "bench/bench_util.h"
#include "kernels/kn.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef struct shape {
    const char *name;
    kn_type type;
    int64_t rows, cols;
} shape;

/* gpt-oss-20b's expert matrices (gate_up fused: 5760 x 2880, down: 2880 x 2880) and a
 * qwen3-style Q6_K expert 3072 wide. */
static const shape shapes[] = {
    {"mxfp4_gate_up", KN_MXFP4, 5760, 2880},
    {"mxfp4_down", KN_MXFP4, 2880, 2880},
    {"q6_K_gate_up", KN_Q6_K, 5760, 3072},
    {"q4_K_gate_up", KN_Q4_K, 5760, 3072},
    /* the coordinator's dense weights: attention projections in Q8_0, a router / head in F32 */
    {"q8_0_dense", KN_Q8_0, 4096, 2880},
    {"q8_0_dense_k4096", KN_Q8_0, 4096, 4096}, /* rows with no tail group */
    {"f32_dense", KN_F32, 2880, 2880},
};
static const int64_t Ts[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 64};
#define N_TS ((int)(sizeof Ts / sizeof Ts[0]))

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next64(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* Random blocks with sane scales: speed does not depend on the values, but infinities would
 * make the outputs meaningless to print. */
static void fill_weights(kn_type t, uint8_t *p, size_t bytes) {
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        const uint64_t v = next64();
        memcpy(p + i, &v, 8);
    }
    const int bs = kn_traits(t)->type_size;
    for (size_t b = 0; b + (size_t)bs <= bytes; b += (size_t)bs) {
        if (t == KN_MXFP4) p[b] = (uint8_t)(118 + p[b] % 8);
        if (t == KN_F32) { /* random bits would be NaN, inf and subnormals (slow paths) */
            const float f = (float)((double)(next64() >> 11) * 0x1p-53 - 0.5);
            memcpy(p + b, &f, 4);
        }
        if (t == KN_Q6_K) {
            const uint16_t d = kn_f32_to_fp16(1e-3f);
            memcpy(p + b + 208, &d, 2);
        }
        if (t == KN_Q4_K) { /* d and dmin */
            const uint16_t d = kn_f32_to_fp16(1e-3f);
            memcpy(p + b, &d, 2), memcpy(p + b + 2, &d, 2);
        }
    }
}

/* The kernels in use, e.g. "avx512". */
static const char *isa_label(void) {
    return kn_isa_name(kn_isa_active());
}

static double env_double(const char *name, double dflt) {
    const char *v = getenv(name);
    return v && *v ? atof(v) : dflt;
}

/* One benchmark case: `n` instances of something that reads `bytes` of stored weights per call
 * (rotated over, so the working set exceeds the LLC), `rows` output rows per token. */
typedef struct bench_case {
    const char *name, *type;
    int64_t rows, cols;
    size_t bytes;
    int n;
    void (*call)(void *ctx, int i, const float *X, int64_t T, float *Y, kn_numerics num,
                 kn_pool *pool);
    void *ctx;
    /* The same call on a few rows that stay in L2 (NULL: none): the kernel's rate without the
     * memory, its compute ceiling. */
    void *l2_ctx;
    size_t l2_bytes;
    bool packed;             /* the matrices are read from their packed copies (MW_BENCH_PACK) */
    double ggml_us[3][N_TS]; /* ggml's best per call by threads and T (0: not measured) */
} bench_case;

/* Instances so that they exceed 4x the LLC (at least 16, at most 3 GB): the LLC's replacement keeps
 * part of a cyclic set only 1.5x its size, and calls then read faster than memory. */
static int instances(size_t bytes) {
    int n = (int)ceil(4.0 * (double)bu_llc_bytes() / (double)bytes);
    if (n < 16) n = 16;
    if ((double)n * (double)bytes > 3e9) n = (int)(3e9 / (double)bytes);
    return n;
}

/* Room for weights or their packed copy. MW_BENCH_HUGE=1: on transparent huge pages (advised,
 * 2 MiB aligned), as a pinned model's are (md_pin); else on the allocator's pages, as a mapped
 * file's are. */
static void *alloc_weight_bytes(size_t bytes) {
    const char *hv = getenv("MW_BENCH_HUGE");
    const bool huge = hv && !strcmp(hv, "1");
    void *p = NULL;
    if (posix_memalign(&p, huge ? (size_t)2 << 20 : 64, bytes) != 0) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        exit(1);
    }
    if (huge) madvise(p, bytes, MADV_HUGEPAGE); /* advice: small pages if refused */
    return p;
}

static void *alloc_weights(kn_type t, size_t bytes) {
    uint8_t *p = alloc_weight_bytes(bytes);
    fill_weights(t, p, bytes);
    return p;
}

/* Whether a comma-separated list in environment variable `name` allows `item` (unset: all).
 * exact: items must equal an entry; otherwise an entry need only be a substring of item. */
static bool env_allows(const char *name, const char *item, bool exact) {
    const char *list = getenv(name);
    if (!list || !*list) return true;
    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ",");
        if (n > 0 && (exact ? strlen(item) == n && !strncmp(item, p, n)
                            : memmem(item, strlen(item), p, n) != NULL))
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

static bool env_allows_int(const char *name, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return env_allows(name, buf, true);
}

/* The ceilings of this run: read bandwidth (GB/s) and int8 dot-product peak (MAC/s; 0 where the
 * ISA has no probe), by thread count. */
typedef struct ceilings {
    double bw[3], peak[3];
    const char *dot;
} ceilings;

/* One line and one JSON record for a case's calls: GB/s overall and per thread (against one
 * thread's read bandwidth, the per-core streaming rate), and its multiply-adds against the peak. */
static void report(const bench_case *c, kn_numerics num, const ceilings *cl, int threads, int64_t T,
                   int ti, double *dt, int calls, double l2_best) {
    const double best = bu_min(dt, calls), med = bu_median(dt, calls);
    const double gbps = c->bytes / best / 1e9, per = gbps / threads;
    const double pct = 100.0 * gbps / cl->bw[threads], pct1 = 100.0 * per / cl->bw[1];
    /* the median call: what a model's decode, which calls each matrix once, sees */
    const double per_med = c->bytes / med / 1e9 / threads, pct1_med = 100.0 * per_med / cl->bw[1];
    const double rt = (double)c->rows * (double)T / best;
    const double macs = (double)c->rows * (double)c->cols * (double)T / best;
    const double peak = cl->peak[threads] > 0 ? 100.0 * macs / cl->peak[threads] : 0;
    const double ggml = c->ggml_us[threads][ti];
    const double l2 = l2_best > 0 ? c->l2_bytes / l2_best / 1e9 / threads : 0;
    printf("  T=%-3lld threads=%d  best %9.1f us  median %9.1f us  %6.2f GB/s  %5.1f%% of "
           "%.1f GB/s  per thread %6.2f GB/s = %5.1f%% of 1-thread bw (median call %6.2f GB/s = "
           "%5.1f%%)  %5.1f%% of int8 peak  %8.2f M rows*tok/s",
           (long long)T, threads, best * 1e6, med * 1e6, gbps, pct, cl->bw[threads], per, pct1,
           per_med, pct1_med, peak, rt / 1e6);
    if (l2 > 0) printf("  in L2 %6.2f GB/s per thread", l2);
    if (ggml > 0) printf("  ggml %.0f us -> %.2fx", ggml, ggml * 1e-6 / best);
    printf("\n");
    printf("{\"bench\":\"kernels\",\"case\":\"%s\",\"type\":\"%s\",\"rows\":%lld,"
           "\"cols\":%lld,\"T\":%lld,\"threads\":%d,\"numerics\":\"%s\",\"isa\":\"%s\","
           "\"instances\":%d,\"calls\":%d,\"best_us\":%.2f,\"median_us\":%.2f,"
           "\"weight_bytes\":%zu,\"gbps\":%.3f,\"read_bw_gbps\":%.3f,\"pct_bw\":%.1f,"
           "\"gbps_per_thread\":%.3f,\"read_bw1_gbps\":%.3f,\"pct_bw1_per_thread\":%.1f,"
           "\"gbps_per_thread_median\":%.3f,\"pct_bw1_per_thread_median\":%.1f,\"gmacs\":%.2f,"
           "\"int8_peak_gmacs\":%.2f,\"pct_peak\":%.1f,"
           "\"rows_tokens_per_s\":%.0f,\"l2_gbps_per_thread\":%.3f,\"ggml_us\":%.0f,"
           "\"vs_ggml\":%.3f,\"packed\":%s}\n",
           c->name, c->type, (long long)c->rows, (long long)c->cols, (long long)T, threads,
           kn_numerics_name(num), isa_label(), c->n, calls, best * 1e6, med * 1e6, c->bytes, gbps,
           cl->bw[threads], pct, per, cl->bw[1], pct1, per_med, pct1_med, macs / 1e9,
           cl->peak[threads] / 1e9, peak, rt, l2, ggml, ggml > 0 ? ggml * 1e-6 / best : 0.0,
           c->packed ? "true" : "false");
    fflush(stdout);
}

static void run_case(const bench_case *c, kn_numerics num, const ceilings *cl, double budget) {
    printf("\n%s: %s %lld x %lld, %.1f MB per call, rotating over %d (%.0f MB; LLC %.0f MB), "
           "numerics %s\n",
           c->name, c->type, (long long)c->rows, (long long)c->cols, c->bytes / 1e6, c->n,
           c->n * c->bytes / 1e6, bu_llc_bytes() / 1e6, kn_numerics_name(num));
    const int64_t cols_max = c->cols > c->rows ? c->cols : c->rows;
    float *X = malloc((size_t)(Ts[N_TS - 1] * cols_max) * sizeof(float));
    float *Y = malloc((size_t)(Ts[N_TS - 1] * cols_max) * sizeof(float));
    for (int64_t i = 0; i < Ts[N_TS - 1] * cols_max; i++)
        X[i] = (float)((double)(next64() >> 11) * 0x1p-53 - 0.5);
    for (int threads = 1; threads <= 2; threads++) {
        if (!env_allows_int("MW_BENCH_THREADS", threads)) continue;
        kn_pool *pool = kn_pool_create(threads);
        for (int ti = 0; ti < N_TS; ti++) {
            const int64_t T = Ts[ti];
            if (!env_allows_int("MW_BENCH_T", T)) continue;
            enum { MAXCALLS = 20000 };
            static double dt[MAXCALLS];
            c->call(c->ctx, 0, X, T, Y, num, pool); /* warm-up: scratch, page tables */
            int calls = 0;
            const double start = bu_now();
            while (calls < MAXCALLS && (calls < c->n || bu_now() - start < budget)) {
                const double t0 = bu_now();
                c->call(c->ctx, calls % c->n, X, T, Y, num, pool);
                dt[calls++] = bu_now() - t0;
            }
            double l2_best = 0;
            /* one thread (a small call may not split across the pool), a quarter of the budget,
             * on the L2-resident rows */
            if (c->l2_ctx && threads == 1) {
                c->call(c->l2_ctx, 0, X, T, Y, num, pool);
                l2_best = 1e30;
                const double s0 = bu_now();
                for (int k = 0; k < 20 || (k < MAXCALLS && bu_now() - s0 < budget / 4); k++) {
                    const double t0 = bu_now();
                    c->call(c->l2_ctx, 0, X, T, Y, num, pool);
                    const double d = bu_now() - t0;
                    if (d < l2_best) l2_best = d;
                }
            }
            report(c, num, cl, threads, T, ti, dt, calls, l2_best);
        }
        kn_pool_destroy(pool);
    }
    free(X);
    free(Y);
}

/* ---- matmul cases ---------------------------------------------------------------------------- */

static void call_matmul(void *ctx, int i, const float *X, int64_t T, float *Y, kn_numerics num,
                        kn_pool *pool) {
    kn_matmul((const kn_mat *)ctx + i, X, T, Y, num, pool);
}

/* ---- ggml on the same shapes (--ggml-mm) ------------------------------------------------------
 */

static const char *ggml_mm_bin; /* bench/ggml/ggml_mm, or NULL */

/* "1,4,16,64" from the entries of `all` that the environment variable `name` allows. */
static void allowed_list(const char *name, const int64_t *all, int n, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at < len; i++)
        if (env_allows_int(name, all[i]))
            at += (size_t)snprintf(buf + at, len - at, at ? ",%lld" : "%lld", (long long)all[i]);
}

/* Runs the ggml driver on the shape with as many matrices as ours rotate over; fills
 * us[threads][T index] with its best time per matmul. */
static void ggml_reference(const shape *s, int n, double budget, double us[3][N_TS]) {
    static const int64_t threads[2] = {1, 2};
    char rows[24], cols[24], mats[16], secs[24], tl[64], thl[16], err[600];
    snprintf(rows, sizeof rows, "%lld", (long long)s->rows);
    snprintf(cols, sizeof cols, "%lld", (long long)s->cols);
    snprintf(mats, sizeof mats, "%d", n);
    snprintf(secs, sizeof secs, "%g", budget);
    allowed_list("MW_BENCH_T", Ts, N_TS, tl, sizeof tl);
    allowed_list("MW_BENCH_THREADS", threads, 2, thl, sizeof thl);
    if (!tl[0] || !thl[0]) return;
    char *const argv[] = {(char *)ggml_mm_bin,
                          "--type",
                          (char *)kn_type_name(s->type),
                          "--rows",
                          rows,
                          "--cols",
                          cols,
                          "--mats",
                          mats,
                          "--seconds",
                          secs,
                          "--tokens",
                          tl,
                          "--threads",
                          thl,
                          NULL};
    size_t len;
    char *out = bl_capture(argv, &len, err, sizeof err);
    if (!out) {
        fprintf(stderr, "bench_kernels: --ggml-mm: %s\n", err);
        return;
    }
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, 0, NULL);
        const int th = (int)json_integer_value(json_object_get(j, "threads"));
        const int64_t T = json_integer_value(json_object_get(j, "T"));
        for (int ti = 0; ti < N_TS; ti++)
            if (Ts[ti] == T && th >= 1 && th <= 2)
                us[th][ti] = json_number_value(json_object_get(j, "best_us"));
        json_decref(j);
    }
    free(out);
}

/* W read from its packed copy (kn_pack), as a pinned model reads its experts. */
static void pack_matrix(kn_mat *W) {
    kn_pack(W, alloc_weight_bytes(kn_pack_bytes(W)));
}

/* MW_BENCH_PACK=1: matrices like W are read from their packed copies where these replace the
 * stored rows (a pinned model's experts); MW_BENCH_PACK=dense: also where the copy is kept beside
 * the stored rows (AVX-512 Q8_0's decoded pairs): every matrix a pinned model packs. The case
 * says so. */
static bool pack_asked(const kn_mat *W, const char *name) {
    const char *pk = getenv("MW_BENCH_PACK");
    const bool dense = pk && !strcmp(pk, "dense");
    const bool pack =
        pk && (dense ? kn_pack_bytes(W) > 0 : !strcmp(pk, "1") && kn_pack_replaces(W));
    if (pack) printf("\n%s: read from packed copies (MW_BENCH_PACK=%s)", name, pk);
    return pack;
}

static void run_shape(const shape *s, kn_numerics num, const ceilings *cl, double budget) {
    const size_t bytes = kn_row_size(s->type, s->cols) * (size_t)s->rows;
    const int n = instances(bytes);
    kn_mat *W = calloc((size_t)n, sizeof *W);
    for (int i = 0; i < n; i++)
        W[i] = (kn_mat){
            s->type, s->rows, s->cols, kn_row_size(s->type, s->cols), alloc_weights(s->type, bytes),
            NULL};
    const bool pack = pack_asked(&W[0], s->name);
    for (int i = 0; pack && i < n; i++) pack_matrix(&W[i]);
    /* the first rows of the first matrix, about 384 KB: in L2 on any core this runs on */
    const size_t rb = kn_row_size(s->type, s->cols);
    int64_t l2_rows = (int64_t)((384u << 10) / rb) / 16 * 16;
    if (l2_rows < 16) l2_rows = 16;
    if (l2_rows > s->rows) l2_rows = s->rows;
    kn_mat l2 = W[0];
    l2.rows = l2_rows;
    l2.packed = NULL;
    if (pack) pack_matrix(&l2);
    bench_case c = {.name = s->name,
                    .type = kn_type_name(s->type),
                    .rows = s->rows,
                    .cols = s->cols,
                    .bytes = bytes,
                    .n = n,
                    .call = call_matmul,
                    .ctx = W,
                    .l2_ctx = &l2,
                    .l2_bytes = rb * (size_t)l2_rows,
                    .packed = pack};
    if (ggml_mm_bin && num == KN_NUM_Q8) ggml_reference(s, n, budget, c.ggml_us);
    run_case(&c, num, cl, budget);
    for (int i = 0; i < n; i++) free((void *)W[i].data), free((void *)W[i].packed);
    free((void *)l2.packed);
    free(W);
}

/* ---- the fused expert op: gpt-oss-20b's expert (MXFP4 gate, up, down 2880 x 2880, f32 biases,
 *      clamped GLU), as an expert node runs it ------------------------------------------------- */

static const kn_glu oai_glu = {.kind = KN_GLU_SWIGLU_OAI, .alpha = 1.702f, .limit = 7.0f};

static void call_expert(void *ctx, int i, const float *X, int64_t T, float *Y, kn_numerics num,
                        kn_pool *pool) {
    if (kn_expert_run((const kn_expert *)ctx + i, &oai_glu, X, T, Y, num, pool, NULL) != 0) {
        fprintf(stderr, "bench_kernels: expert run failed\n");
        exit(1);
    }
}

static void run_expert(kn_numerics num, const ceilings *cl, double budget) {
    const int64_t hidden = 2880, ff = 2880;
    const size_t mb = kn_row_size(KN_MXFP4, hidden) * (size_t)ff;
    kn_expert proto = {.gate = {KN_MXFP4, ff, hidden, kn_row_size(KN_MXFP4, hidden), NULL, NULL}};
    proto.up = proto.gate;
    proto.down = (kn_mat){KN_MXFP4, hidden, ff, kn_row_size(KN_MXFP4, ff), NULL, NULL};
    float *bias = calloc((size_t)(ff > hidden ? ff : hidden), sizeof(float));
    proto.gate_b = (kn_mat){KN_F32, 1, ff, (size_t)ff * 4, bias, NULL};
    proto.up_b = proto.gate_b;
    proto.down_b = (kn_mat){KN_F32, 1, hidden, (size_t)hidden * 4, bias, NULL};
    kn_expert sized = proto; /* kn_expert_weight_bytes counts the matrices that have data */
    sized.gate.data = sized.up.data = sized.down.data = bias;
    const size_t bytes = kn_expert_weight_bytes(&sized);
    const int n = instances(3 * mb);
    kn_expert *E = calloc((size_t)n, sizeof *E);
    for (int i = 0; i < n; i++) {
        E[i] = proto;
        E[i].gate.data = alloc_weights(KN_MXFP4, mb);
        E[i].up.data = alloc_weights(KN_MXFP4, mb);
        E[i].down.data = alloc_weights(KN_MXFP4, mb);
    }
    const bool pack = pack_asked(&E[0].gate, "expert_mxfp4");
    for (int i = 0; pack && i < n; i++) {
        pack_matrix(&E[i].gate);
        pack_matrix(&E[i].up);
        pack_matrix(&E[i].down);
    }
    const bench_case c = {.name = "expert_mxfp4",
                          .type = "mxfp4",
                          .rows = 2 * ff + hidden,
                          .cols = hidden,
                          .bytes = bytes,
                          .n = n,
                          .call = call_expert,
                          .ctx = E,
                          .packed = pack};
    run_case(&c, num, cl, budget);
    for (int i = 0; i < n; i++) {
        free((void *)E[i].gate.data), free((void *)E[i].up.data), free((void *)E[i].down.data);
        free((void *)E[i].gate.packed), free((void *)E[i].up.packed),
            free((void *)E[i].down.packed);
    }
    free(E);
    free(bias);
}

/* Wake-up latency: task 0 (the caller) waits until task 1 has started on the worker; the time
 * from publishing the job to that start is the latency a matmul pays to get its second thread. */
typedef struct wake_job {
    volatile int started;
    double t_start;
} wake_job;

static void wake_task(void *arg, int ith, int nth) {
    wake_job *j = arg;
    (void)nth;
    if (ith == 1) {
        j->t_start = bu_now();
        __atomic_store_n(&j->started, 1, __ATOMIC_RELEASE);
        return;
    }
    const double t0 = bu_now();
    while (!__atomic_load_n(&j->started, __ATOMIC_ACQUIRE) && bu_now() - t0 < 0.05) {
    }
}

static void bench_wake(kn_pool *pool, double idle_s, const char *label) {
    enum { N = 400 };
    double lat[N];
    int n = 0;
    for (int i = 0; i < N; i++) {
        if (idle_s > 0) {
            const double t0 = bu_now();
            while (bu_now() - t0 < idle_s) {
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
            }
        }
        wake_job j = {0, 0};
        const double t0 = bu_now();
        kn_pool_run(pool, wake_task, &j);
        if (j.started) lat[n++] = j.t_start - t0;
    }
    const double med = bu_median(lat, n);
    printf("pool wake-up (%s): median %.2f us, best %.2f us, %d of %d jobs reached the worker\n",
           label, med * 1e6, lat[0] * 1e6, n, N);
    printf("{\"bench\":\"kernels\",\"case\":\"pool_wake\",\"idle_us\":%.0f,\"median_us\":%.3f,"
           "\"best_us\":%.3f}\n",
           idle_s * 1e6, med * 1e6, lat[0] * 1e6);
}

static const char ENV_NOTES[] =
    "environment:\n"
    "  MW_BENCH_NUMERICS=q8|f32|both  numerics of the cases (q8)\n"
    "  MW_BENCH_SECONDS=S             time budget per case (0.5)\n"
    "  MW_BENCH_CASES=substr,...      only the cases whose name contains one of them\n"
    "  MW_BENCH_T=1,64                only these token counts\n"
    "  MW_BENCH_THREADS=1|2           only this thread count\n"
    "  MW_BENCH_PACK=1                matrices read from their packed copy (as pinned), where\n"
    "                                 the kernels read it at every T (MXFP4; AVX2 and\n"
    "                                 AVX-VNNI Q4_K)\n"
    "  MW_BENCH_PACK=dense            every matrix a pinned model packs, also those whose copy\n"
    "                                 some T only read (AVX-512 Q8_0: T = 1 where K % 256 = 0,\n"
    "                                 T >= 7)\n"
    "  MW_BENCH_HUGE=1                weights on transparent huge pages (as a pinned model's)\n"
    "  MOEWIRE_ISA=scalar|avx2|avxvnni|avx512|neon  the kernels, as everywhere";

int main(int argc, char **argv) {
    const bu_opt opt[] = {
        BU_OPT("--ggml-mm", BU_STR, &ggml_mm_bin, "PATH",
               "ggml's matmul driver (make ggml-mm), timed beside each case"),
    };
    const bu_cli cli = {"bench_kernels",
                        "The read bandwidth, the pool's wake-up, then kn_matmul and the fused "
                        "expert on gpt-oss-20b's\nshapes, T = 1 to 64 tokens, 1 and 2 threads, "
                        "rotating over more weights than the last-level cache.",
                        NULL,
                        ENV_NOTES,
                        opt,
                        (int)(sizeof opt / sizeof opt[0])};
    const int status = bu_args(argc, argv, &cli, NULL);
    if (status != BU_RUN) return status;
    if (ggml_mm_bin && access(ggml_mm_bin, X_OK)) {
        fprintf(stderr, "bench_kernels: --ggml-mm %s: not an executable file\n", ggml_mm_bin);
        return 2;
    }
    const double budget = env_double("MW_BENCH_SECONDS", 0.5);
    const char *nums = getenv("MW_BENCH_NUMERICS");
    const bool q8 = !nums || !strcmp(nums, "q8") || !strcmp(nums, "both");
    const bool f32 = nums && (!strcmp(nums, "f32") || !strcmp(nums, "both"));
    printf("bench_kernels: %s; kernels %s; LLC %.0f MB\n", bu_cpu_name(), isa_label(),
           bu_llc_bytes() / 1e6);
    printf(ggml_mm_bin ? "ggml: %s, run on each matrix case right before ours (q8 numerics)\n"
                       : "ggml comparison skipped: no --ggml-mm PATH%s\n",
           ggml_mm_bin ? ggml_mm_bin : " (make ggml-mm builds one)");

    /* read bandwidth, same run */
    size_t bw_bytes = 4 * bu_llc_bytes();
    if (bw_bytes < ((size_t)1 << 30)) bw_bytes = (size_t)1 << 30;
    if (bw_bytes > ((size_t)3 << 30)) bw_bytes = (size_t)3 << 30;
    ceilings cl = {.dot = "none"};
    double *bw = cl.bw;
    for (int t = 1; t <= 2; t++) {
        const bu_bw probe = bu_read_probe(bw_bytes, t, 5);
        bw[t] = probe.best;
        printf("read bandwidth, %d thread%s: %.2f GB/s (best 8 MB slice of 10 passes over %.0f MB; "
               "median slice %.2f)\n",
               t, t > 1 ? "s" : "", bw[t], bw_bytes / 1e6, probe.median);
        printf("{\"bench\":\"kernels\",\"case\":\"read_bandwidth\",\"threads\":%d,\"gbps\":%.3f,"
               "\"median_gbps\":%.3f,\"bytes\":%zu}\n",
               t, bw[t], probe.median, bw_bytes);
    }
    /* the int8 dot-product peak, same run: the ceiling of a kernel that computes as it reads */
    for (int t = 1; t <= 2; t++) {
        cl.peak[t] = bu_int8_dot_peak(t, &cl.dot);
        printf("int8 dot peak, %d thread%s: %.1f GMAC/s (%s)\n", t, t > 1 ? "s" : "",
               cl.peak[t] / 1e9, cl.dot);
        printf("{\"bench\":\"kernels\",\"case\":\"int8_peak\",\"threads\":%d,\"gmacs\":%.3f,"
               "\"instruction\":\"%s\"}\n",
               t, cl.peak[t] / 1e9, cl.dot);
    }

    /* the pool: wake-up latency back to back (workers spinning) and after 2 ms idle (asleep) */
    kn_pool *pool = kn_pool_create(2);
    bench_wake(pool, 0, "back to back");
    bench_wake(pool, 0.002, "after 2 ms idle");
    kn_pool_destroy(pool);

    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        if (!env_allows("MW_BENCH_CASES", shapes[i].name, false)) continue;
        if (q8) run_shape(&shapes[i], KN_NUM_Q8, &cl, budget);
        if (f32) run_shape(&shapes[i], KN_NUM_F32, &cl, budget);
    }
    if (!env_allows("MW_BENCH_CASES", "expert_mxfp4", false)) return 0;
    if (q8) run_expert(KN_NUM_Q8, &cl, budget);
    if (f32) run_expert(KN_NUM_F32, &cl, budget);
    return 0;
}
