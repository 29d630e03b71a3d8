/* tests/support/mwt_ref.h — the pieces the model tests' float64 reference evaluations share:
 * tensors of a source read row by row (dequantized), matrix-vector products, RMS norms, GLU FFNs
 * and DeepSeek-V3-style routing, all in double, written from FORMATS.md's rules rather than from
 * the model's code. */
#ifndef MWT_REF_H
#define MWT_REF_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "vindex/vx_source.h"

typedef struct mwt_ref {
    const char *what; /* names the model in failures */
    const vx_source *src;
    float *row; /* one dequantized row (65536 floats) */
} mwt_ref;

mwt_ref mwt_ref_open(const char *what, const vx_source *src);
void mwt_ref_close(mwt_ref *r);

/* Tensor fmt (with %d the layer) as rows of ne[0]; fails the test when absent. */
kn_mat mwt_ref_tensor(const mwt_ref *r, const char *fmt, int l);
bool mwt_ref_has(const mwt_ref *r, const char *fmt, int l);
/* y[i] = sum_k W[row0 + i][k] x[k] for i < n. */
void mwt_ref_mv(const mwt_ref *r, const kn_mat *W, int64_t row0, int64_t n, const double *x,
                double *y);
/* The first n values of a vector tensor. */
void mwt_ref_vec(const mwt_ref *r, const char *fmt, int l, int64_t n, double *w);
/* x = x / sqrt(mean(x²) + eps) · w (w NULL: no weight). */
void mwt_ref_rmsnorm(double *x, int64_t n, const double *w, double eps);
double mwt_ref_silu(double g);
double mwt_ref_sigmoid(double z);

/* The GLU of an FFN: silu(g) · u, or SiTU with betas (beta > 0). */
typedef struct mwt_glu {
    double beta, lbeta; /* beta 0: SwiGLU */
} mwt_glu;

/* y = down(glu(gate x, up x)). */
void mwt_ref_ffn(const mwt_ref *r, const mwt_glu *glu, const kn_mat *g, const kn_mat *u,
                 const kn_mat *d, const double *x, double *y);

/* DeepSeek-V3's routing (FORMATS.md §7, step 5). */
typedef struct mwt_route {
    int n_expert, top_k;
    int gating; /* 1 softmax, 2 sigmoid */
    bool norm;
    double scale; /* applied unless 0 or 1 */
    int groups, groups_used;
} mwt_route;

/* The experts chosen for one row (best first) and their weights. */
void mwt_ref_route(const mwt_route *p, const double *logit, const double *bias, int *ids,
                   double *w);

#endif
