/* bench/bench_attn.c — the trunk's attention for a decode step of gpt-oss-20b's shape (64 query
 * heads, 8 KV heads of 64, window 128): one row (or --rows R sequences, one row each) at contexts
 * of 1k, 4k and 16k positions: microseconds per full-attention layer and per sliding-window layer,
 * and the attention share of a 24-layer decode step (12 of each), with the active instruction set
 * and with the scalar code, 1 and 2 threads. The scalar/SIMD ratio is measured in the same run;
 * both give the same bits. `bench_attn --help` lists the options. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "kernels/kn.h"
#include "model/md_attn.h"

enum { HEADS = 64, KV_HEADS = 8, HEAD_DIM = 64, WINDOW = 128, LAYERS_EACH = 12, MAX_ROWS = 256 };

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) & 0xffffff) / (float)0x800000 - 1.0f;
}

/* Median seconds of md_attention on one layer for the R rows at position n (after n positions). */
static double time_layer(const md_config *cfg, md_kv *kv, const md_row *row, int64_t R, int layer,
                         const float *q, const float *k, const float *v, float *out, md_attn_ws *ws,
                         kn_pool *pool, int reps) {
    double t[16];
    md_attn_args a = {.cfg = cfg,
                      .kv = kv,
                      .layer = layer,
                      .rows = row,
                      .T = R,
                      .k = k,
                      .v = v,
                      .q = q,
                      .sinks = NULL,
                      .out = out};
    mw_err e;
    for (int r = 0; r < reps; r++) {
        double t0 = bu_now();
        if (md_attention(&a, ws, pool, &e)) {
            fprintf(stderr, "bench_attn: %s\n", e.msg);
            exit(1);
        }
        t[r] = bu_now() - t0;
    }
    return bu_median(t, reps);
}

/* One context length: R sequences of n positions (the same keys and values), then the decode
 * rows' attention over a full and a sliding layer, timed at each thread count with the SIMD
 * kernels and the scalar ones. */
static int bench_context(const md_config *cfg, int64_t n, int R, const int *threads, int n_thr) {
    const int64_t kd = KV_HEADS * HEAD_DIM;
    const kn_isa simd = kn_isa_active();
    md_kv kv;
    mw_err e;
    /* n cached positions, the first R rows also the decode rows' own K/V */
    const int64_t nk = n > R ? n : R;
    float *k = malloc((size_t)(nk * kd) * sizeof(float)), *v = malloc((size_t)(nk * kd) * 4);
    md_row *rows = malloc((size_t)n * sizeof *rows);
    if (!k || !v || !rows || md_kv_init(&kv, cfg, R, n + 1, true, KN_F32, &e)) {
        fprintf(stderr, "bench_attn: out of memory for %lld positions\n", (long long)n);
        return 1;
    }
    uint64_t rng = 7;
    for (int64_t i = 0; i < nk * kd; i++) k[i] = frand(&rng), v[i] = frand(&rng);
    for (int s = 0; s < R; s++) {
        for (int64_t t = 0; t < n; t++) rows[t] = (md_row){s, (int32_t)t, 0, 0};
        if (md_kv_begin(&kv, rows, n, &e)) return fprintf(stderr, "bench_attn: %s\n", e.msg), 1;
        md_kv_store(&kv, 0, k, v);
        md_kv_store(&kv, 1, k, v);
        md_kv_commit(&kv);
    }
    /* the decode rows: their own K/V are the batch's */
    md_row row[MAX_ROWS];
    for (int s = 0; s < R; s++) row[s] = (md_row){s, (int32_t)n, 0, 0};
    float *q = malloc((size_t)R * HEADS * HEAD_DIM * sizeof(float));
    float *out = malloc((size_t)R * HEADS * HEAD_DIM * sizeof(float));
    if (!q || !out) return fprintf(stderr, "bench_attn: out of memory\n"), 1;
    for (int i = 0; i < R * HEADS * HEAD_DIM; i++) q[i] = frand(&rng) * 0.3f;
    if (md_kv_begin(&kv, row, R, &e)) return fprintf(stderr, "bench_attn: %s\n", e.msg), 1;
    const int reps = n > 8192 ? 5 : 11;
    for (int ti = 0; ti < n_thr; ti++) {
        kn_pool *pool = kn_pool_create(threads[ti]);
        md_attn_ws ws = {0};
        if (md_attn_ws_reserve(&ws, cfg, row, R, kn_pool_size(pool), &e))
            return fprintf(stderr, "bench_attn: %s\n", e.msg), 1;
        const kn_isa isas[2] = {simd, KN_ISA_SCALAR};
        for (int s = 0; s < (simd == KN_ISA_SCALAR ? 1 : 2); s++) {
            kn_isa_force(isas[s]);
            double full = time_layer(cfg, &kv, row, R, 0, q, k, v, out, &ws, pool, reps);
            double slide = time_layer(cfg, &kv, row, R, 1, q, k, v, out, &ws, pool, reps);
            double step = LAYERS_EACH * (full + slide);
            printf("%8lld %5d %7d %7s %12.1f %12.1f %14.2f\n", (long long)n, R, threads[ti],
                   kn_isa_name(isas[s]), full * 1e6, slide * 1e6, step * 1e3);
            printf("{\"bench\":\"attn\",\"context\":%lld,\"rows\":%d,\"threads\":%d,"
                   "\"isa\":\"%s\",\"full_layer_us\":%.2f,\"sliding_layer_us\":%.2f,"
                   "\"gpt_oss_20b_step_ms\":%.3f}\n",
                   (long long)n, R, threads[ti], kn_isa_name(isas[s]), full * 1e6, slide * 1e6,
                   step * 1e3);
        }
        kn_isa_force(simd);
        md_attn_ws_free(&ws);
        kn_pool_destroy(pool);
    }
    md_kv_free(&kv);
    free(k);
    free(v);
    free(rows);
    free(q);
    free(out);
    return 0;
}

int main(int argc, char **argv) {
    int contexts[8] = {1024, 4096, 16384}, n_ctx = 3, threads[4] = {1, 2}, n_thr = 2, R = 1;
    const bu_opt opt[] = {
        BU_OPT_INTS("--contexts", contexts, &n_ctx, 8, "1024,4096,16384", "cached positions", 1,
                    1 << 20),
        BU_OPT_INTS("--threads", threads, &n_thr, 4, "1,2", "thread counts", 1, 4096),
        BU_OPT_IN("--rows", BU_INT, &R, "1", "decode rows (sequences, one row each)", 1, MAX_ROWS),
    };
    const bu_cli cli = {"bench_attn",
                        "The trunk's attention for a decode step of gpt-oss-20b's shape: time per "
                        "full-attention and\nsliding-window layer at each context, SIMD against "
                        "scalar (the same bits), per thread count.",
                        NULL,
                        NULL,
                        opt,
                        (int)(sizeof opt / sizeof opt[0])};
    const int status = bu_args(argc, argv, &cli, NULL);
    if (status != BU_RUN) return status;
    uint8_t swa[2] = {0, 1}; /* layer 0 sees everything, layer 1 slides */
    md_config cfg = {.n_layer = 2,
                     .n_head = HEADS,
                     .n_head_kv = KV_HEADS,
                     .head_dim_k = HEAD_DIM,
                     .head_dim_v = HEAD_DIM,
                     .kq_scale = 1.0f / sqrtf((float)HEAD_DIM),
                     .n_swa = WINDOW,
                     .layer_swa = swa};
    printf("   attention of %d decode row(s), gpt-oss-20b shape (%d/%d heads of %d, window %d); "
           "%s vs scalar, same bits\n",
           R, HEADS, KV_HEADS, HEAD_DIM, WINDOW, kn_isa_name(kn_isa_active()));
    printf("%8s %5s %7s %7s %12s %12s %14s\n", "context", "rows", "threads", "isa", "full us",
           "sliding us", "24 layers ms");
    for (int c = 0; c < n_ctx; c++)
        if (bench_context(&cfg, contexts[c], R, threads, n_thr)) return 1;
    return 0;
}
