/* kernels/kn_expert.c — the fused expert operation: y = down · glu(gate·x + gate_b, up·x + up_b)
 * + down_b for T rows at once, for one expert or several. In Q8 mode x is quantized once and shared
 * by gate and up (and by every expert given the same rows), and the GLU output is quantized before
 * down, as ggml does. Gate and up of all the experts run as one pool job (their rows split together
 * across threads, each chunk adding its biases while its outputs are in cache), then the GLU and
 * down's preparation row by row, then down of all of them (with its bias): three round trips
 * through the pool per call, whatever the number of experts. */
#include "kernels/kn_internal.h"
#include "util/mw_err.h"

#include <stdlib.h>

static int check_bias(const kn_mat *b, int64_t n, const char *what, mw_err *err) {
    if (!b->data) return 0;
    if (kn_mat_check(b, what, err) != 0) return -1;
    if (b->rows != 1 || b->cols != n)
        return mw_errf(err, "expert: %s is %lld x %lld, expected 1 x %lld", what,
                       (long long)b->rows, (long long)b->cols, (long long)n);
    return 0;
}

int kn_expert_check(const kn_expert *e, const kn_glu *glu, mw_err *err) {
    if (!e || !glu) return mw_errf(err, "expert: missing expert or GLU policy");
    if (kn_glu_check(glu, err)) return mw_err_wrap(err, "expert");
    if (kn_mat_check(&e->gate, "expert gate", err) || kn_mat_check(&e->up, "expert up", err) ||
        kn_mat_check(&e->down, "expert down", err))
        return -1;
    const int64_t hidden = e->gate.cols, ff = e->gate.rows;
    if (e->up.rows != ff || e->up.cols != hidden)
        return mw_errf(err, "expert: up is %lld x %lld but gate is %lld x %lld",
                       (long long)e->up.rows, (long long)e->up.cols, (long long)ff,
                       (long long)hidden);
    if (e->down.rows != hidden || e->down.cols != ff)
        return mw_errf(err, "expert: down is %lld x %lld, expected %lld x %lld",
                       (long long)e->down.rows, (long long)e->down.cols, (long long)hidden,
                       (long long)ff);
    if (ff == 0) return mw_errf(err, "expert: no rows in gate");
    return check_bias(&e->gate_b, ff, "gate bias", err) ||
                   check_bias(&e->up_b, ff, "up bias", err) ||
                   check_bias(&e->down_b, hidden, "down bias", err)
               ? -1
               : 0;
}

size_t kn_expert_weight_bytes(const kn_expert *e) {
    const kn_mat *m[6] = {&e->gate, &e->up, &e->down, &e->gate_b, &e->up_b, &e->down_b};
    size_t total = 0;
    for (int i = 0; i < 6; i++)
        if (m[i]->data) total += (size_t)m[i]->rows * kn_row_size(m[i]->type, m[i]->cols);
    return total;
}

/* ---- several experts at once ----------------------------------------------------------------- */

/* One expert call (with rows) and where its buffers are in the scratch (offsets, then pointers). */
typedef struct call_state {
    const kn_expert_call *c;
    const kn__kernel *kg, *ku, *kd;
    int64_t hidden, ff;
    int in_g, in_u;             /* the input preparations gate and up read */
    size_t off_g, off_u, off_a; /* G and U (T × ff floats), down's prepared input */
    size_t off_b;               /* gate_b, up_b (ff floats each), down_b (hidden floats) */
    float *G, *U;
} call_state;

/* What one kn_experts_run call keeps, in one allocation for n calls. An input preparation is
 * shared by every matrix reading the same rows in the same activation format. */
typedef struct experts_ws {
    call_state *cs;
    kn__prep *in; /* up to 2n distinct input preparations */
    kn__act *in_x;
    size_t *in_off;
    kn__part *gu, *dn; /* 2n gate/up parts, n down parts */
    int n, n_in;
} experts_ws;

#define KN_EXPERTS_SMALL 8 /* calls handled without an allocation */
/* Per call: its state, two input preparations (with their activations and offsets), 3 parts. */
#define WS_INPUT_BYTES (sizeof(kn__prep) + sizeof(kn__act) + sizeof(size_t))
#define WS_BYTES(n)    ((size_t)(n) * (sizeof(call_state) + 2 * WS_INPUT_BYTES + 3 * sizeof(kn__part)))

static void ws_carve(experts_ws *w, void *mem, int n) {
    w->cs = mem;
    w->in = (kn__prep *)(w->cs + n);
    w->in_x = (kn__act *)(w->in + 2 * n);
    w->in_off = (size_t *)(w->in_x + 2 * n);
    w->gu = (kn__part *)(w->in_off + 2 * n);
    w->dn = w->gu + 2 * n;
}

/* The input preparation for (kernel k, the call's rows), found among those listed or added;
 * *bytes grows by a new one's scratch. */
static int input_for(experts_ws *w, const kn__kernel *k, const kn_expert_call *c, int64_t hidden,
                     size_t *bytes) {
    for (int i = 0; i < w->n_in; i++) {
        const kn__prep *p = &w->in[i];
        if (p->k->act_prep == k->act_prep && p->X == c->X && p->T == c->T && p->K == hidden)
            return i;
    }
    const int i = w->n_in++;
    w->in[i] = (kn__prep){k, c->X, hidden, c->T, NULL, &w->in_x[i]};
    w->in_off[i] = *bytes;
    *bytes += kn__align64(kn__act_scratch(k, hidden, c->T));
    return i;
}

/* Lays out the calls that have rows and their parts; returns the scratch bytes before the
 * per-thread part. */
static size_t plan(experts_ws *w, const kn_expert_call *calls, int n, kn_numerics num) {
    size_t bytes = 0;
    w->n = w->n_in = 0;
    for (int i = 0; i < n; i++) {
        const kn_expert_call *c = &calls[i];
        if (c->T == 0) continue;
        const kn_expert *e = c->e;
        const int j = w->n++;
        call_state *s = &w->cs[j];
        *s = (call_state){.c = c,
                          .kg = kn__kernel_for(e->gate.type, num),
                          .ku = kn__kernel_for(e->up.type, num),
                          .kd = kn__kernel_for(e->down.type, num),
                          .hidden = e->gate.cols,
                          .ff = e->gate.rows};
        s->in_g = input_for(w, s->kg, c, s->hidden, &bytes);
        s->in_u = input_for(w, s->ku, c, s->hidden, &bytes);
        const size_t g = kn__align64((size_t)(c->T * s->ff) * sizeof(float));
        s->off_g = bytes;
        s->off_u = bytes + g;
        s->off_a = bytes + 2 * g;
        s->off_b = s->off_a + kn__align64(kn__act_scratch(s->kd, s->ff, c->T));
        bytes = s->off_b + kn__align64((size_t)(2 * s->ff + s->hidden) * sizeof(float));
        w->gu[2 * j] = (kn__part){.W = &e->gate, .kern = s->kg, .ldy = s->ff};
        w->gu[2 * j + 1] = (kn__part){.W = &e->up, .kern = s->ku, .ldy = s->ff};
        w->dn[j] = (kn__part){.W = &e->down, .kern = s->kd, .Y = c->Y, .ldy = s->hidden};
        w->gu[2 * j].x.T = w->gu[2 * j + 1].x.T = w->dn[j].x.T = c->T;
    }
    return bytes;
}

/* The middle step, row by row over every call's rows: GLU, down's preparation. */
typedef struct mid_job {
    const experts_ws *w;
    const kn_glu *glu;
    int64_t total;
} mid_job;

static void mid_row(const call_state *s, const kn__act *a, const kn_glu *glu, int64_t t) {
    float *g = s->G + t * s->ff, *u = s->U + t * s->ff; /* biases added by the gate/up job */
    kn_glu_apply(glu, g, u, g, s->ff);
    if (s->kd->act_prep) s->kd->act_prep(g, (uint8_t *)a->data + (size_t)t * a->stride, s->ff);
}

static void mid_task(void *arg, int ith, int nth) {
    const mid_job *j = arg;
    int i = 0;
    int64_t base = 0;
    for (int64_t r = ith; r < j->total; r += nth) {
        while (r - base >= j->w->cs[i].c->T) base += j->w->cs[i++].c->T;
        mid_row(&j->w->cs[i], &j->w->dn[i].x, j->glu, r - base);
    }
}

/* A bias as floats: F32 read in place, other types converted into dst. */
static const float *bias_floats(const kn_mat *b, float *dst) {
    if (!b->data) return NULL;
    if (b->type == KN_F32) return (const float *)b->data;
    kn_mat_row(b, 0, dst);
    return dst;
}

static int experts_run(experts_ws *w, const kn_expert_call *calls, int n, const kn_glu *glu,
                       kn_numerics num, kn_pool *caller_pool, mw_err *err) {
    const size_t bytes = plan(w, calls, n, num);
    if (w->n == 0) return 0;
    kn_pool *pool = kn__pool_acquire(caller_pool);
    const size_t thr_gu =
        kn__parts_scratch(w->gu, 2 * w->n, kn__parts_threads(w->gu, 2 * w->n, pool));
    const size_t thr_dn = kn__parts_scratch(w->dn, w->n, kn__parts_threads(w->dn, w->n, pool));
    void *tmp;
    uint8_t *buf = kn__pool_scratch(pool, bytes + (thr_gu > thr_dn ? thr_gu : thr_dn), &tmp);
    if (!buf) {
        kn__pool_release(pool);
        return mw_errf(err, "experts: out of memory for %d expert calls", w->n);
    }
    /* gate and up of every call, each distinct input prepared once */
    for (int i = 0; i < w->n_in; i++) w->in[i].dst = buf + w->in_off[i];
    kn__act_prepare_many(w->in, w->n_in, pool);
    mid_job mj = {w, glu, 0};
    double work = 0;
    for (int j = 0; j < w->n; j++) {
        call_state *s = &w->cs[j];
        s->G = (float *)(buf + s->off_g);
        s->U = (float *)(buf + s->off_u);
        w->gu[2 * j].x = w->in_x[s->in_g];
        w->gu[2 * j + 1].x = w->in_x[s->in_u];
        w->gu[2 * j].Y = s->G;
        w->gu[2 * j + 1].Y = s->U;
        float *b = (float *)(buf + s->off_b);
        w->gu[2 * j].bias = bias_floats(&s->c->e->gate_b, b);
        w->gu[2 * j + 1].bias = bias_floats(&s->c->e->up_b, b + s->ff);
        w->dn[j].bias = bias_floats(&s->c->e->down_b, b + 2 * s->ff);
        kn__act *a = &w->dn[j].x; /* down reads the GLU output, prepared or as floats */
        a->data = s->kd->act_prep ? (const void *)(buf + s->off_a) : (const void *)s->G;
        a->stride = s->kd->act_prep ? kn__act_scratch(s->kd, s->ff, 1) : s->ff * sizeof(float);
        mj.total += s->c->T;
        work += (double)s->c->T * (double)s->ff;
    }
    kn__run_parts(w->gu, 2 * w->n, pool, buf + bytes);
    const int nth = mj.total >= 8 && work >= 32768 ? kn_pool_size(pool) : 1;
    kn__pool_run_locked(pool, mid_task, &mj, nth < mj.total ? nth : (int)mj.total);
    kn__run_parts(w->dn, w->n, pool, buf + bytes);
    kn__pool_release(pool);
    free(tmp);
    return 0;
}

int kn_experts_run(const kn_expert_call *calls, int n, const kn_glu *glu, kn_numerics num,
                   kn_pool *pool, mw_err *err) {
    if (n < 0 || (n > 0 && !calls)) return mw_errf(err, "experts: bad call list (%d calls)", n);
    for (int i = 0; i < n; i++) {
        if (kn_expert_check(calls[i].e, glu, err) != 0) return -1;
        if (calls[i].T < 0)
            return mw_errf(err, "expert: negative row count %lld", (long long)calls[i].T);
        if (calls[i].T > 0 && (!calls[i].X || !calls[i].Y))
            return mw_errf(err, "expert: missing input or output rows");
    }
    _Alignas(64) uint8_t small[WS_BYTES(KN_EXPERTS_SMALL)];
    void *heap = n > KN_EXPERTS_SMALL ? malloc(WS_BYTES(n)) : NULL;
    if (n > KN_EXPERTS_SMALL && !heap)
        return mw_errf(err, "experts: out of memory for %d expert calls", n);
    experts_ws w;
    ws_carve(&w, heap ? heap : small, n > KN_EXPERTS_SMALL ? n : KN_EXPERTS_SMALL);
    const int rc = experts_run(&w, calls, n, glu, num, pool, err);
    free(heap);
    return rc;
}

int kn_expert_run(const kn_expert *e, const kn_glu *glu, const float *X, int64_t T, float *Y,
                  kn_numerics num, kn_pool *pool, mw_err *err) {
    const kn_expert_call c = {e, X, T, Y};
    return kn_experts_run(&c, 1, glu, num, pool, err);
}
