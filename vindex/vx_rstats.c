/* vindex/vx_rstats.c — accumulating routing statistics from traces: per layer the expert counts
 * and gate mass, the pair triangle, and the batch-union curve (consecutive rows of a layer in
 * trace order, batches of 1, 2, 4 .. 256 rows; a trace's last partial batch is not counted). */
#include "vindex/vx_rstats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The pair triangle is allocated per layer; beyond this many experts it would not fit. */
#define MAX_TRI_EXPERTS 4096

static size_t tri_index(int E, int a, int b) {
    return (size_t)a * (size_t)(2 * E - a - 1) / 2 + (size_t)(b - a - 1);
}

static int layer_alloc(vx_rstats_layer *L, int E, mw_err *err) {
    L->count = calloc((size_t)E, sizeof *L->count);
    L->mass = calloc((size_t)E, sizeof *L->mass);
    if (E <= MAX_TRI_EXPERTS && E > 1) L->tri = calloc((size_t)E * (E - 1) / 2, sizeof *L->tri);
    bool ok = L->count && L->mass && (E > MAX_TRI_EXPERTS || E < 2 || L->tri);
    for (int i = 0; i < VX_RSTATS_NB && ok; i++) ok = (L->cur[i] = calloc((size_t)E / 8 + 1, 1));
    return ok ? 0 : mw_errf(err, "out of memory for the statistics of %d experts", E);
}

static void layer_free(vx_rstats_layer *L) {
    free(L->count);
    free(L->mass);
    free(L->tri);
    free(L->top);
    for (int i = 0; i < VX_RSTATS_NB; i++) free(L->cur[i]);
}

void vx_rstats_free(vx_rstats *s) {
    for (uint32_t l = 0; s->layers && l < s->info.n_layer; l++) layer_free(&s->layers[l]);
    free(s->layers);
    for (size_t i = 0; i < s->n_src; i++) free(s->src[i].path);
    free(s->src);
    memset(s, 0, sizeof *s);
}

/* The first trace sets the model, each other one must match it. */
static int adopt(vx_rstats *s, const vx_trace_info *in, const char *path, mw_err *err) {
    if (s->layers) {
        const vx_trace_info *a = &s->info;
        if (strcmp(a->fingerprint, in->fingerprint) || a->n_layer != in->n_layer ||
            a->n_expert != in->n_expert || a->k != in->k)
            return mw_errf(err,
                           "%s: a trace of model %.12s… (%u layers, %u experts, top-%u), "
                           "the others are of %.12s… (%u, %u, top-%u)",
                           path, in->fingerprint, in->n_layer, in->n_expert, in->k, a->fingerprint,
                           a->n_layer, a->n_expert, a->k);
        return 0;
    }
    s->info = *in;
    s->layers = calloc(in->n_layer, sizeof *s->layers);
    return s->layers ? 0 : mw_errf(err, "out of memory");
}

static void add_row(vx_rstats_layer *L, int E, int k, const uint16_t *ids, const float *w) {
    for (int j = 0; j < k; j++) {
        L->count[ids[j]]++;
        L->mass[ids[j]] += w[j];
        for (int i = 0; L->tri && i < j; i++) {
            int a = ids[i] < ids[j] ? ids[i] : ids[j], b = ids[i] < ids[j] ? ids[j] : ids[i];
            if (a != b && L->tri[tri_index(E, a, b)] != UINT32_MAX) L->tri[tri_index(E, a, b)]++;
        }
    }
    for (int i = 0; i < VX_RSTATS_NB; i++) {
        uint8_t *bits = L->cur[i];
        for (int j = 0; j < k; j++) {
            const int e = ids[j];
            if (!(bits[e / 8] >> (e % 8) & 1)) L->distinct[i]++;
            bits[e / 8] |= (uint8_t)(1u << (e % 8));
        }
        if (++L->fill[i] < (uint32_t)vx_rstats_batch(i)) continue;
        L->union_n[i]++;
        L->union_mean[i] += ((double)L->distinct[i] - L->union_mean[i]) / (double)L->union_n[i];
        memset(bits, 0, (size_t)E / 8 + 1);
        L->fill[i] = L->distinct[i] = 0;
    }
    L->rows++;
}

static int add_layer(vx_rstats *s, const vx_trace_event *ev, mw_err *err) {
    vx_rstats_layer *L = &s->layers[ev->layer];
    const int E = (int)s->info.n_expert, k = (int)s->info.k;
    if (!L->count && layer_alloc(L, E, err)) return -1;
    for (int64_t t = 0; t < ev->T; t++) add_row(L, E, k, ev->ids + t * k, ev->weights + t * k);
    return 0;
}

/* A trace's last partial batches are dropped: a batch never spans two traces. */
static void end_trace(vx_rstats *s) {
    for (uint32_t l = 0; l < s->info.n_layer; l++) {
        vx_rstats_layer *L = &s->layers[l];
        for (int i = 0; L->count && i < VX_RSTATS_NB; i++) {
            memset(L->cur[i], 0, s->info.n_expert / 8 + 1);
            L->fill[i] = L->distinct[i] = 0;
        }
    }
}

static int note_source(vx_rstats *s, const char *path, const vx_trace_reader *r, mw_err *err) {
    if (s->n_src >= VX_RSTATS_MAX_TRACES)
        return mw_errf(err, "more than %d traces", VX_RSTATS_MAX_TRACES);
    vx_rstats_source *n = realloc(s->src, (s->n_src + 1) * sizeof *n);
    if (!n) return mw_errf(err, "out of memory");
    s->src = n;
    vx_rstats_source *src = &s->src[s->n_src];
    memset(src, 0, sizeof *src);
    if (!(src->path = strdup(path))) return mw_errf(err, "out of memory");
    s->n_src++;
    snprintf(src->sha256, sizeof src->sha256, "%s", vx_trace_sha256(r));
    const vx_trace_counts *c = vx_trace_counts_of(r);
    src->steps = c->steps;
    src->rows = c->rows;
    src->dropped = c->dropped;
    return 0;
}

int vx_rstats_add_trace(vx_rstats *s, const char *path, mw_err *err) {
    vx_trace_reader *r;
    if (vx_trace_open(path, &r, err)) return -1;
    int rc = adopt(s, vx_trace_info_of(r), path, err) || note_source(s, path, r, err) ? -1 : 0;
    vx_trace_event ev;
    int got;
    while (!rc && (got = vx_trace_next(r, &ev, err)) != 0) {
        if (got < 0)
            rc = -1;
        else if (ev.kind == VX_TRACE_LAYER)
            rc = add_layer(s, &ev, err);
    }
    end_trace(s);
    vx_trace_close(r);
    return rc;
}

/* ---- summaries ------------------------------------------------------------------------------ */

static int by_count_desc(const void *x, const void *y) {
    const vx_rstats_pair *a = x, *b = y;
    if (a->count != b->count) return a->count < b->count ? 1 : -1;
    return a->a != b->a ? a->a - b->a : a->b - b->b;
}

/* Keeps the n largest pairs of a triangle in top[0..*m) (a min-heap would be faster; a layer has
 * at most a few hundred thousand pairs and this runs once). */
static void collect_top(const vx_rstats_layer *L, int E, vx_rstats_pair *top, size_t n, size_t *m) {
    *m = 0;
    for (int a = 0; a < E; a++)
        for (int b = a + 1; b < E; b++) {
            uint32_t c = L->tri[tri_index(E, a, b)];
            if (!c || (*m == n && c <= top[n - 1].count)) continue;
            size_t at = *m < n ? (*m)++ : n - 1;
            top[at] = (vx_rstats_pair){a, b, c};
            while (at > 0 && by_count_desc(&top[at], &top[at - 1]) < 0) {
                vx_rstats_pair t = top[at];
                top[at] = top[at - 1];
                top[--at] = t;
            }
        }
}

int vx_rstats_top_pairs(vx_rstats *s, size_t n, mw_err *err) {
    if (n > VX_RSTATS_MAX_PAIRS) n = VX_RSTATS_MAX_PAIRS;
    for (uint32_t l = 0; l < s->info.n_layer; l++) {
        vx_rstats_layer *L = &s->layers[l];
        if (!L->tri || !n) continue;
        free(L->top);
        if (!(L->top = calloc(n, sizeof *L->top))) return mw_errf(err, "out of memory");
        collect_top(L, (int)s->info.n_expert, L->top, n, &L->n_top);
    }
    return 0;
}

double vx_rstats_uniform_union(int E, int k, int B) {
    return (double)E * (1.0 - pow(1.0 - (double)k / (double)E, (double)B));
}

double vx_rstats_max_mean(const vx_rstats *s, int layer) {
    const vx_rstats_layer *L = &s->layers[layer];
    if (!L->rows) return 0;
    uint64_t mx = 0;
    for (uint32_t e = 0; e < s->info.n_expert; e++) mx = L->count[e] > mx ? L->count[e] : mx;
    const double mean = (double)L->rows * s->info.k / s->info.n_expert;
    return (double)mx / mean;
}
