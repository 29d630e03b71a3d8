/* bench/bench_sampler.c — what md_sample costs per token at real vocabulary sizes: rows of
 * synthetic logits (a few leaders over a wide Gaussian tail, as a model's row looks) sampled with
 * OpenAI's defaults (temperature 1, top-p 1) and with the usual truncations (top-p 0.95, top-k 40,
 * min-p 0.05), the median over the steps per vocabulary and setting. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_util.h"
#include "model/md_sampler.h"

static uint64_t rs = 0x9e3779b97f4a7c15ULL;
static double unit(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (double)(rs >> 11) * 0x1.0p-53;
}

/* A row: standard normal logits times 2.5, with 8 tokens lifted 8 to 14 above (the likely ones). */
static void fill(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 2) {
        const double u = unit() + 1e-300, v = unit(), r = sqrt(-2 * log(u)) * 2.5;
        x[i] = (float)(r * cos(6.283185307179586 * v));
        if (i + 1 < n) x[i + 1] = (float)(r * sin(6.283185307179586 * v));
    }
    for (int k = 0; k < 8; k++) x[(int64_t)(unit() * (double)n)] += (float)(8 + 6 * unit());
}

int main(int argc, char **argv) {
    int steps = 60;
    const bu_opt table[] = {
        BU_OPT_IN("--steps", BU_INT, &steps, "N", "rows sampled per vocabulary and setting (60)", 1,
                  100000),
    };
    const bu_cli cli = {"bench_sampler",
                        "md_sample's cost per token at real vocabulary sizes",
                        "",
                        NULL,
                        table,
                        sizeof table / sizeof *table};
    int first;
    const int rc = bu_args(argc, argv, &cli, &first);
    if (rc != BU_RUN) return rc;
    static const int64_t vocab[] = {32000, 151936, 201088};
    static const struct {
        const char *name;
        float top_p, min_p;
        int32_t top_k;
    } set[] = {{"top_p_1", 1, 0, 0},
               {"top_p_0.95", 0.95f, 0, 0},
               {"top_k_40", 1, 0, 40},
               {"min_p_0.05", 1, 0.05f, 0}};
    const int n_set = (int)(sizeof set / sizeof *set);
    float *row = malloc((size_t)201088 * sizeof *row);
    double *t = malloc((size_t)steps * sizeof *t);
    if (!row || !t) return fprintf(stderr, "bench_sampler: out of memory\n"), 1;
    printf("bench_sampler: %s, %d rows per vocabulary and setting, temperature 1\n", bu_cpu_name(),
           steps);
    for (int vi = 0; vi < 3; vi++) {
        const int64_t n = vocab[vi];
        for (int si = 0; si < n_set; si++) {
            md_sampler_opts o = md_sampler_defaults();
            o.temperature = 1, o.top_p = set[si].top_p, o.top_k = set[si].top_k;
            o.min_p = set[si].min_p, o.seed = (uint64_t)(vi * 16 + si);
            md_sampler s;
            mw_err e = {{0}};
            if (md_sampler_init(&s, n, &o, &e))
                return fprintf(stderr, "bench_sampler: %s\n", e.msg), 1;
            for (int k = 0; k < steps; k++) {
                fill(row, n);
                const double t0 = bu_now();
                (void)md_sample(&s, row);
                t[k] = bu_now() - t0;
            }
            md_sampler_free(&s);
            const double med = bu_median(t, steps) * 1e3, best = bu_min(t, steps) * 1e3;
            printf("  vocab %6lld %-11s median %.3f ms, best %.3f ms per token\n", (long long)n,
                   set[si].name, med, best);
            printf("{\"bench\":\"sampler\",\"vocab\":%lld,\"setting\":\"%s\",\"steps\":%d,"
                   "\"median_ms\":%.4f,\"best_ms\":%.4f}\n",
                   (long long)n, set[si].name, steps, med, best);
        }
    }
    free(row), free(t);
    return 0;
}
