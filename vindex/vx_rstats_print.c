/* vindex/vx_rstats_print.c — routing statistics as text: a summary of the traces, then per
 * traced layer its imbalance, hottest and coldest experts, most frequent pairs, and the
 * batch-union curve beside the uniform expectation. */
#include <stdlib.h>

#include "vindex/vx_rstats.h"

#define SHOW 5 /* experts and pairs shown per layer */

static void print_extremes(const vx_rstats *s, const vx_rstats_layer *L, FILE *out) {
    const int E = (int)s->info.n_expert;
    int *order = malloc((size_t)E * sizeof *order);
    if (!order) return;
    for (int e = 0; e < E; e++) order[e] = e;
    /* a selection of the SHOW largest and smallest: E is small enough for insertion order */
    for (int i = 1; i < E; i++)
        for (int j = i; j > 0 && L->count[order[j]] > L->count[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    const double rows = (double)L->rows;
    double mass = 0;
    for (int e = 0; e < E; e++) mass += L->mass[e];
    fputs("  hottest:", out);
    for (int i = 0; i < SHOW && i < E; i++)
        fprintf(out, " %d (%.1f%% of rows, %.1f%% of gate mass)", order[i],
                100.0 * (double)L->count[order[i]] / rows,
                mass > 0 ? 100.0 * L->mass[order[i]] / mass : 0.0);
    fputs("\n  coldest:", out);
    for (int i = E - 1; i >= E - SHOW && i >= 0; i--)
        fprintf(out, " %d (%.1f%%)", order[i], 100.0 * (double)L->count[order[i]] / rows);
    fputc('\n', out);
    free(order);
}

static void print_layer(const vx_rstats *s, int l, FILE *out) {
    const vx_rstats_layer *L = &s->layers[l];
    const int E = (int)s->info.n_expert, k = (int)s->info.k;
    const double mm = vx_rstats_max_mean(s, l);
    fprintf(out, "layer %d: %llu rows, max/mean %.2f (balance %.2f)\n", l,
            (unsigned long long)L->rows, mm, mm > 0 ? 1.0 / mm : 0.0);
    print_extremes(s, L, out);
    if (L->n_top) {
        fputs("  pairs:", out);
        for (size_t i = 0; i < L->n_top && i < SHOW; i++) {
            const vx_rstats_pair *p = &L->top[i];
            fprintf(out, " %d+%d %llu (lift %.2f)", p->a, p->b, (unsigned long long)p->count,
                    (double)p->count * (double)L->rows /
                        ((double)L->count[p->a] * (double)L->count[p->b]));
        }
        fputc('\n', out);
    }
    fputs("  distinct experts per batch (uniform):", out);
    for (int i = 0; i < VX_RSTATS_NB; i += 2) {
        if (!L->union_n[i]) break;
        fprintf(out, " B=%d %.1f (%.1f)", vx_rstats_batch(i), L->union_mean[i],
                vx_rstats_uniform_union(E, k, vx_rstats_batch(i)));
    }
    fputc('\n', out);
}

void vx_rstats_print(const vx_rstats *s, FILE *out) {
    uint64_t rows = 0;
    for (size_t i = 0; i < s->n_src; i++) rows += s->src[i].rows;
    fprintf(out,
            "routing statistics: %s (model %.16s…), %u layers, %u experts, top-%u; %zu "
            "trace(s), %llu rows\n",
            s->info.family, s->info.fingerprint, s->info.n_layer, s->info.n_expert, s->info.k,
            s->n_src, (unsigned long long)rows);
    for (size_t i = 0; i < s->n_src; i++) {
        fprintf(out, "  %s: sha256 %s, %llu steps, %llu rows", s->src[i].path, s->src[i].sha256,
                (unsigned long long)s->src[i].steps, (unsigned long long)s->src[i].rows);
        if (s->src[i].dropped)
            fprintf(out, ", %llu layer record(s) dropped by its writer",
                    (unsigned long long)s->src[i].dropped);
        fputc('\n', out);
    }
    double sum = 0, worst = 0;
    int n = 0;
    for (uint32_t l = 0; l < s->info.n_layer; l++) {
        if (!s->layers[l].rows) continue;
        print_layer(s, (int)l, out);
        double mm = vx_rstats_max_mean(s, (int)l);
        sum += mm;
        worst = mm > worst ? mm : worst;
        n++;
    }
    if (n)
        fprintf(out, "%d traced MoE layer(s): max/mean load %.2f on average, %.2f at worst\n", n,
                sum / n, worst);
}
