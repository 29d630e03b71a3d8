/* model/md_attnres.c — the stack of banked block sums and the softmax mix over it (llama.cpp's
 * res_mix): score(v) = sum_i w_i · v_i / sqrt(mean(v²) + eps) for every banked v and for the
 * current stream c, p = softmax over them (c last), mix = sum_k p_k · B_k + p_c · c over the raw
 * vectors. */
#include "model/md_attnres.h"

#include <stdlib.h>
#include <string.h>

#include "model/md_ops.h"

void md_attnres_init(md_attnres *a, const md_config *cfg) {
    memset(a, 0, sizeof *a);
    a->block = cfg->attn_res_block;
    if (a->block <= 0) return;
    a->n_ckpt = (cfg->n_layer + a->block - 1) / a->block;
    a->E = cfg->n_embd;
    a->eps = cfg->norm_eps;
}

void md_attnres_free(md_attnres *a) {
    free(a->stack);
    free(a->mix);
    free(a->probs);
    free(a->tmp);
    memset(a, 0, sizeof *a);
}

uint64_t md_attnres_bytes_per_token(const md_config *cfg) {
    if (cfg->attn_res_block <= 0) return 0;
    const uint64_t k = (uint64_t)(cfg->n_layer + cfg->attn_res_block - 1) / cfg->attn_res_block;
    return ((k + 1) * (uint64_t)cfg->n_embd + k + 1) * sizeof(float);
}

int md_attnres_begin(md_attnres *a, int64_t T, mw_err *err) {
    a->n = 0;
    if (!md_attnres_on(a) || T <= a->T_cap) return 0;
    const size_t n = (size_t)T, E = (size_t)a->E, k = (size_t)a->n_ckpt;
    float *s = realloc(a->stack, n * k * E * sizeof(float));
    if (s) a->stack = s;
    float *m = s ? realloc(a->mix, n * E * sizeof(float)) : NULL;
    if (m) a->mix = m;
    float *p = m ? realloc(a->probs, n * (k + 1) * sizeof(float)) : NULL;
    if (p) a->probs = p;
    float *t = p && !a->tmp ? malloc(E * sizeof(float)) : a->tmp;
    if (!s || !m || !p || !t)
        return mw_errf(err, "attention residuals: out of memory for %lld rows", (long long)T);
    a->tmp = t;
    a->T_cap = T;
    return 0;
}

void md_attnres_bank(md_attnres *a, const float *cur, int64_t T) {
    for (int64_t t = 0; t < T; t++)
        memcpy(a->stack + ((size_t)t * a->n_ckpt + a->n) * a->E, cur + t * a->E,
               (size_t)a->E * sizeof(float));
    a->n++;
}

/* One vector's score: its RMS-normalized values (no weight) dotted with w. */
static float score(md_attnres *a, const float *v, const float *w) {
    md_rmsnorm(a->tmp, v, NULL, a->E, a->eps);
    return md_dot(a->tmp, w, a->E);
}

const float *md_attnres_mix(md_attnres *a, const float *w, const float *cur, int64_t T) {
    if (!md_attnres_on(a) || a->n == 0) return cur;
    const int n = a->n;
    const int64_t E = a->E;
    for (int64_t t = 0; t < T; t++) {
        const float *B = a->stack + (size_t)t * a->n_ckpt * E, *c = cur + t * E;
        float *p = a->probs + t * (n + 1), *out = a->mix + t * E;
        for (int k = 0; k < n; k++) p[k] = score(a, B + k * E, w);
        p[n] = score(a, c, w);
        md_softmax(p, n + 1, NULL);
        for (int64_t i = 0; i < E; i++) out[i] = p[0] * B[i];
        for (int k = 1; k < n; k++)
            for (int64_t i = 0; i < E; i++) out[i] = out[i] + p[k] * B[k * E + i];
        for (int64_t i = 0; i < E; i++) out[i] = out[i] + p[n] * c[i];
    }
    return a->mix;
}
