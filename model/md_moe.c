/* model/md_moe.c — the MoE executor shared by the in-process backend and the expert node, and the
 * one combine rule (md_moe_accumulate). Assignments are grouped by expert so each expert's weights
 * are read once per batch, all experts run as one kernel call, and outputs are reduced per row in
 * the order the assignments were given. */
#include "model/md_moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/mw_grow.h"

/* Bounds on what one call may ask for (everything may come from a socket). */
#define MOE_MAX_ROWS   (1LL << 24)
#define MOE_MAX_WIDTH  (1LL << 20)
#define MOE_MAX_ASSIGN (1LL << 26)
#define MOE_MAX_FLOATS (1LL << 32)

void md_moe_accumulate(float *restrict acc, const float *restrict y, float w, int64_t width) {
    /* Blocks of 8, a count the compiler knows, so -O2 turns them into vector multiplies and adds
     * (it leaves loops of an unknown count scalar): each element still gets one rounded multiply
     * and one rounded add, as in the tail. The coordinator combines every answered row with it. */
    int64_t i = 0;
    for (; i + 8 <= width; i += 8)
        for (int j = 0; j < 8; j++) acc[i + j] = acc[i + j] + w * y[i + j];
    for (; i < width; i++) acc[i] = acc[i] + w * y[i];
}

int md_expert_submit(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    return b->submit && b->wait ? b->submit(b, batch, err) : b->run(b, batch, out, err);
}

int md_expert_wait(md_expert_backend *b, const md_moe_batch *batch, float *out, mw_err *err) {
    return b->submit && b->wait ? b->wait(b, batch, out, err) : 0;
}

typedef struct slot {
    int32_t expert;
    int32_t a; /* assignment index */
} slot;

struct md_moe_ws {
    slot *slots;
    size_t slots_cap;
    kn_expert_call *calls; /* one per expert named */
    kn_expert *experts;    /* copies of the looked-up views (a lookup may reuse its storage) */
    size_t calls_cap, experts_cap;
    float *xg; /* gathered rows of the experts with several rows, slot i at row i */
    float *yg; /* outputs by slot: every slot's in PARTIAL mode, gathered groups' in EXACT */
    size_t xg_cap, yg_cap;
    int32_t *slot_of; /* PARTIAL: assignment -> its slot */
    size_t slot_of_cap;
};

md_moe_ws *md_moe_ws_new(void) {
    return calloc(1, sizeof(md_moe_ws));
}

void md_moe_ws_free(md_moe_ws *ws) {
    if (!ws) return;
    free(ws->slots);
    free(ws->calls);
    free(ws->experts);
    free(ws->xg);
    free(ws->yg);
    free(ws->slot_of);
    free(ws);
}

static int cmp_slot(const void *pa, const void *pb) {
    const slot *a = pa, *b = pb;
    if (a->expert != b->expert) return a->expert < b->expert ? -1 : 1;
    return (a->a > b->a) - (a->a < b->a);
}

int md_moe_check_args(const md_moe_exec_args *a, mw_err *err) {
    if (a->rows < 0 || a->rows > MOE_MAX_ROWS || a->width < 1 || a->width > MOE_MAX_WIDTH ||
        a->n_assign < 0 || a->n_assign > MOE_MAX_ASSIGN)
        return mw_errf(err, "MoE layer %d: bad batch shape (%lld rows × %lld, %lld assignments)",
                       a->layer, (long long)a->rows, (long long)a->width, (long long)a->n_assign);
    if (a->rows * a->width > MOE_MAX_FLOATS || a->n_assign * a->width > MOE_MAX_FLOATS)
        return mw_errf(err, "MoE layer %d: batch of %lld rows × %lld is too large", a->layer,
                       (long long)a->rows, (long long)a->width);
    if (!a->glu || !a->lookup || (a->rows && !a->x) || (a->n_assign && !a->assign))
        return mw_errf(err, "MoE layer %d: incomplete executor arguments", a->layer);
    if (a->mode != MD_MOE_PARTIAL && a->mode != MD_MOE_EXACT)
        return mw_errf(err, "MoE layer %d: unknown output mode %d", a->layer, (int)a->mode);
    for (int64_t i = 0; i < a->n_assign; i++) {
        const md_assignment *s = &a->assign[i];
        if (s->row < 0 || s->row >= a->rows)
            return mw_errf(err, "MoE layer %d: assignment %lld names row %d of %lld", a->layer,
                           (long long)i, s->row, (long long)a->rows);
        if (s->expert < 0)
            return mw_errf(err, "MoE layer %d: assignment %lld names expert %d", a->layer,
                           (long long)i, s->expert);
        if (!isfinite(s->weight))
            return mw_errf(err, "MoE layer %d: assignment %lld has a non-finite weight", a->layer,
                           (long long)i);
    }
    return 0;
}

/* Every expert the assignments name runs once, over all its rows, in one kn_experts_run (two
 * round trips through the pool per layer, however many experts). An expert with a single row reads
 * it in place; others gather their rows. In PARTIAL mode every output stays in its slot's row of
 * yg (an expert's rows side by side) and the sums read it there; in EXACT mode a single row's
 * output goes straight to its assignment's row and gathered groups are copied back. */
static int exec(const md_moe_exec_args *a, md_moe_ws *ws, float *out, uint64_t *weight_bytes,
                mw_err *err) {
    const int64_t w = a->width, n = a->n_assign;
    if (mw_grow((void **)&ws->slots, &ws->slots_cap, (size_t)n, sizeof(slot)) ||
        mw_grow((void **)&ws->calls, &ws->calls_cap, (size_t)n, sizeof(kn_expert_call)) ||
        mw_grow((void **)&ws->experts, &ws->experts_cap, (size_t)n, sizeof(kn_expert)))
        return mw_errf(err, "MoE layer %d: out of memory", a->layer);
    for (int64_t i = 0; i < n; i++) ws->slots[i] = (slot){a->assign[i].expert, (int32_t)i};
    qsort(ws->slots, (size_t)n, sizeof(slot), cmp_slot);

    const bool partial = a->mode == MD_MOE_PARTIAL;
    if (mw_grow((void **)&ws->xg, &ws->xg_cap, (size_t)(n * w), sizeof(float)) ||
        mw_grow((void **)&ws->yg, &ws->yg_cap, (size_t)(n * w), sizeof(float)) ||
        (partial && mw_grow((void **)&ws->slot_of, &ws->slot_of_cap, (size_t)n, sizeof(int32_t))))
        return mw_errf(err, "MoE layer %d: out of memory", a->layer);
    int n_calls = 0;
    uint64_t bytes = 0;
    for (int64_t g = 0; g < n;) {
        const slot *s = ws->slots + g;
        int64_t end = g + 1;
        while (end < n && ws->slots[end].expert == s->expert) end++;
        const kn_expert *e = a->lookup(a->lookup_ctx, a->layer, s->expert, err);
        if (!e || kn_expert_check(e, a->glu, err))
            return mw_err_wrap(err, "MoE layer %d expert %d", a->layer, s->expert);
        if (e->gate.cols != w)
            return mw_errf(err, "MoE layer %d expert %d takes rows of %lld, the batch's are %lld",
                           a->layer, s->expert, (long long)e->gate.cols, (long long)w);
        ws->experts[n_calls] = *e;
        kn_expert_call *c = &ws->calls[n_calls];
        *c = (kn_expert_call){&ws->experts[n_calls++], ws->xg + g * w, end - g, ws->yg + g * w};
        if (end - g == 1) {
            c->X = a->x + (int64_t)a->assign[s->a].row * w;
            if (!partial) c->Y = out + (int64_t)s->a * w;
        } else {
            for (int64_t i = g; i < end; i++)
                memcpy(ws->xg + i * w, a->x + (int64_t)a->assign[ws->slots[i].a].row * w,
                       (size_t)w * sizeof(float));
        }
        bytes += kn_expert_weight_bytes(e);
        g = end;
    }
    if (kn_experts_run(ws->calls, n_calls, a->glu, a->numerics, a->pool, err))
        return mw_err_wrap(err, "MoE layer %d", a->layer);
    if (weight_bytes) *weight_bytes += bytes;
    if (partial) {
        for (int64_t i = 0; i < n; i++) ws->slot_of[ws->slots[i].a] = (int32_t)i;
        memset(out, 0, (size_t)(a->rows * w) * sizeof(float));
        for (int64_t i = 0; i < n; i++) /* in assignment order */
            md_moe_accumulate(out + (int64_t)a->assign[i].row * w,
                              ws->yg + (int64_t)ws->slot_of[i] * w, a->assign[i].weight, w);
        return 0;
    }
    for (int64_t i = 0; i < n; i++) { /* outputs of gathered groups back to their assignments */
        const int32_t e = ws->slots[i].expert;
        if ((i > 0 && ws->slots[i - 1].expert == e) || (i + 1 < n && ws->slots[i + 1].expert == e))
            memcpy(out + (int64_t)ws->slots[i].a * w, ws->yg + i * w, (size_t)w * sizeof(float));
    }
    return 0;
}

int md_moe_exec(const md_moe_exec_args *a, float *out, uint64_t *weight_bytes, mw_err *err) {
    if (md_moe_check_args(a, err)) return -1;
    if (a->ws) return exec(a, a->ws, out, weight_bytes, err);
    md_moe_ws *ws = md_moe_ws_new();
    if (!ws) return mw_errf(err, "MoE layer %d: out of memory", a->layer);
    int rc = exec(a, ws, out, weight_bytes, err);
    md_moe_ws_free(ws);
    return rc;
}
