/* vindex/vx_rstats.h — routing statistics from routing traces (vindex/vx_trace.h): per MoE layer
 * and expert the load (rows routed to it and their gate mass), how often pairs of experts are
 * chosen for the same row, and the batch-union curve (distinct experts a layer touches for a
 * batch of B consecutive rows, against E·(1 − (1 − k/E)^B) for uniform routing). `vindex
 * routing-stats` prints them as text or JSON; `vindex plan` reads either a trace or that JSON. */
#ifndef VX_RSTATS_H
#define VX_RSTATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util/mw_err.h"
#include "vindex/vx_trace.h"

#define VX_RSTATS_NB         9 /* batch sizes of the union curve: 1, 2, 4 .. 256 */
#define VX_RSTATS_MAX_PAIRS  4096
#define VX_RSTATS_MAX_TRACES 256

/* Batch size i of the union curve (1 << i). */
static inline int vx_rstats_batch(int i) {
    return 1 << i;
}

/* Two experts chosen together for `count` rows. */
typedef struct vx_rstats_pair {
    int a, b; /* a < b */
    uint64_t count;
} vx_rstats_pair;

typedef struct vx_rstats_layer {
    uint64_t rows;   /* routed rows seen (0: a dense layer, or none traced) */
    uint64_t *count; /* n_expert: rows routed to each expert */
    double *mass;    /* n_expert: the sum of their gate weights */
    /* every pair's count (a triangle, a < b) while traces are read; NULL once loaded from JSON */
    uint32_t *tri;
    vx_rstats_pair *top; /* the most frequent pairs, most first (vx_rstats_top_pairs, or JSON) */
    size_t n_top;
    double union_mean[VX_RSTATS_NB]; /* mean distinct experts per batch of 1 << i rows */
    uint64_t union_n[VX_RSTATS_NB];  /* batches counted */
    /* the batches being filled */
    uint8_t *cur[VX_RSTATS_NB];
    uint32_t fill[VX_RSTATS_NB], distinct[VX_RSTATS_NB];
} vx_rstats_layer;

typedef struct vx_rstats_source {
    char *path;
    char sha256[65];
    uint64_t steps, rows, dropped;
} vx_rstats_source;

typedef struct vx_rstats {
    vx_trace_info info;
    size_t n_src;
    vx_rstats_source *src;
    vx_rstats_layer *layers; /* info.n_layer (NULL before the first trace) */
} vx_rstats;

/* Reads a trace into s (the first one sets the model; the others must be of the same model). */
int vx_rstats_add_trace(vx_rstats *s, const char *path, mw_err *err);
/* Fills every layer's top list with its n most frequent pairs (from the triangle). */
int vx_rstats_top_pairs(vx_rstats *s, size_t n, mw_err *err);
void vx_rstats_free(vx_rstats *s);

/* The uniform-routing expectation of distinct experts in a batch of B rows: E·(1 − (1 − k/E)^B). */
double vx_rstats_uniform_union(int E, int k, int B);
/* max / mean of a layer's expert counts (1 when perfectly even; 0 for an untraced layer). */
double vx_rstats_max_mean(const vx_rstats *s, int layer);

/* Text for people; JSON (with the top pairs) for programs and `vindex plan`. */
void vx_rstats_print(const vx_rstats *s, FILE *out);
int vx_rstats_write_json(const vx_rstats *s, FILE *out, mw_err *err);
/* Reads what vx_rstats_write_json wrote (untrusted: every array and index bounded). */
int vx_rstats_load_json(const char *path, vx_rstats *s, mw_err *err);
/* A trace or a statistics JSON file, told apart by their first bytes. */
int vx_rstats_load(const char *path, vx_rstats *s, mw_err *err);

#endif
