/* tests/support/mwt_ref.c — see mwt_ref.h. */
#include "tests/support/mwt_ref.h"

#include "tests/support/mw_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mwt_ref mwt_ref_open(const char *what, const vx_source *src) {
    mwt_ref r = {what, src, malloc(sizeof(float) * 65536)};
    assert_non_null(r.row);
    return r;
}

void mwt_ref_close(mwt_ref *r) {
    free(r->row);
    r->row = NULL;
}

bool mwt_ref_has(const mwt_ref *r, const char *fmt, int l) {
    char name[96];
    snprintf(name, sizeof name, fmt, l);
    return vx_source_tensor(r->src, name) != NULL;
}

kn_mat mwt_ref_tensor(const mwt_ref *r, const char *fmt, int l) {
    char name[96];
    snprintf(name, sizeof name, fmt, l);
    const vx_tensor *t = vx_source_tensor(r->src, name);
    if (!t) fail_msg("%s: no tensor %s", r->what, name);
    int64_t rows = 1;
    for (int d = 1; d < t->n_dims; d++) rows *= t->ne[d];
    return (kn_mat){t->type, rows, t->ne[0], kn_row_size(t->type, t->ne[0]), t->data, NULL};
}

void mwt_ref_mv(const mwt_ref *r, const kn_mat *W, int64_t row0, int64_t n, const double *x,
                double *y) {
    for (int64_t i = 0; i < n; i++) {
        kn_mat_row(W, row0 + i, r->row);
        double s = 0;
        for (int64_t k = 0; k < W->cols; k++) s += (double)r->row[k] * x[k];
        y[i] = s;
    }
}

void mwt_ref_vec(const mwt_ref *r, const char *fmt, int l, int64_t n, double *w) {
    kn_mat m = mwt_ref_tensor(r, fmt, l);
    m.cols = m.cols * m.rows; /* a vector stored with unit dimensions: one row */
    m.row_bytes = kn_row_size(m.type, m.cols);
    kn_mat_row(&m, 0, r->row);
    for (int64_t i = 0; i < n; i++) w[i] = r->row[i];
}

void mwt_ref_rmsnorm(double *x, int64_t n, const double *w, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const double s = 1 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) x[i] *= s * (w ? w[i] : 1);
}

double mwt_ref_silu(double g) {
    return g / (1 + exp(-g));
}

double mwt_ref_sigmoid(double z) {
    return 1 / (1 + exp(-z));
}

void mwt_ref_ffn(const mwt_ref *r, const mwt_glu *glu, const kn_mat *g, const kn_mat *u,
                 const kn_mat *d, const double *x, double *y) {
    const int64_t F = g->rows;
    double *a = malloc((size_t)F * sizeof *a), *b = malloc((size_t)F * sizeof *b);
    mwt_ref_mv(r, g, 0, F, x, a);
    mwt_ref_mv(r, u, 0, F, x, b);
    for (int64_t i = 0; i < F; i++) {
        if (glu->beta > 0) {
            const double up = glu->lbeta > 0 ? glu->lbeta * tanh(b[i] / glu->lbeta) : b[i];
            a[i] = glu->beta * tanh(a[i] / glu->beta) * mwt_ref_sigmoid(a[i]) * up;
        } else {
            a[i] = mwt_ref_silu(a[i]) * b[i];
        }
    }
    mwt_ref_mv(r, d, 0, d->rows, a, y);
    free(a);
    free(b);
}

/* Group-limited selection: only the groups_used best groups (a group scores the sum of its two
 * best selection scores) keep their experts. */
static void limit_groups(const mwt_route *p, double *b) {
    const int E = p->n_expert, per = E / p->groups;
    double gs[p->groups];
    bool keep[p->groups];
    for (int g = 0; g < p->groups; g++) {
        double m1 = -INFINITY, m2 = -INFINITY;
        for (int e = g * per; e < (g + 1) * per; e++) {
            if (b[e] > m1)
                m2 = m1, m1 = b[e];
            else if (b[e] > m2)
                m2 = b[e];
        }
        gs[g] = m1 + m2;
        keep[g] = false;
    }
    for (int j = 0; j < p->groups_used; j++) {
        int best = -1;
        for (int g = 0; g < p->groups; g++)
            if (!keep[g] && (best < 0 || gs[g] > gs[best])) best = g;
        keep[best] = true;
    }
    for (int e = 0; e < E; e++)
        if (!keep[e / per]) b[e] = -INFINITY;
}

void mwt_ref_route(const mwt_route *p, const double *logit, const double *bias, int *ids,
                   double *w) {
    const int E = p->n_expert;
    double s[E], b[E];
    double mx = -INFINITY, z = 0;
    for (int e = 0; e < E; e++) mx = fmax(mx, logit[e]);
    for (int e = 0; e < E; e++) z += exp(logit[e] - mx);
    for (int e = 0; e < E; e++)
        s[e] = p->gating == 2 ? mwt_ref_sigmoid(logit[e]) : exp(logit[e] - mx) / z;
    for (int e = 0; e < E; e++) b[e] = s[e] + (bias ? bias[e] : 0);
    if (p->groups > 1) limit_groups(p, b);
    bool used[E];
    memset(used, 0, sizeof used);
    double sum = 0;
    for (int j = 0; j < p->top_k; j++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!used[e] && (best < 0 || b[e] > b[best])) best = e;
        used[best] = true;
        ids[j] = best;
        w[j] = s[best];
        sum += w[j];
    }
    for (int j = 0; j < p->top_k; j++) {
        if (p->norm) w[j] /= fmax(sum, 6.103515625e-5);
        if (p->scale != 0 && p->scale != 1) w[j] *= p->scale;
    }
}
