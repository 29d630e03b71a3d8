/* metal/mt_exec.c — md_moe_exec on a Metal device: a layer's batch as one list of dispatches.
 * Assignments are grouped by expert as the CPU executor groups them; the batch's rows are
 * quantized once (Q8 mode), each expert's gate and up read its rows through an index list (no
 * gather), the GLU runs over every expert's rows at once, down writes each row to its slot (or,
 * in exact mode, straight to its assignment's output), and the weighted partial sum reduces each
 * row's assignments in their order — the arithmetic of md_moe_exec, step for step. Everything
 * lives in one scratch buffer the CPU writes and reads in place (unified memory).
 *
 * Scratch, in order: the rows (floats); their prepared activations per format (Q8 mode); the
 * index lists (slot → row, slot → assignment, each row's assignments as CSR starts and entries);
 * the CSR weights; gate outputs then up outputs of every slot; down's prepared inputs per expert
 * (Q8 mode); down's outputs per slot (partial mode); the result. */
#include "metal/mt_dev.h"
#include "metal/mt_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/mw_grow.h"

typedef struct slot {
    int32_t expert, a;
} slot;

typedef struct group {
    const mt__expert *me;
    int64_t s0, count; /* its slots */
    int64_t ff;
    size_t g_off; /* floats from the start of the gate (and up) outputs */
    size_t hq;    /* bytes: its prepared down inputs (Q8 mode) */
} group;

typedef struct layout {
    size_t x, xq[2], idx, wts, g, u, y, out, total;
} layout;

#define GLU_CHUNK ((int64_t)1 << 30) /* elements per GLU dispatch: int indices in the kernel */

static int act_slot(kn_type act) {
    return act == KN_Q8_0 ? 0 : 1;
}

static int cmp_slot(const void *pa, const void *pb) {
    const slot *a = pa, *b = pb;
    if (a->expert != b->expert) return a->expert < b->expert ? -1 : 1;
    return (a->a > b->a) - (a->a < b->a);
}

/* The expert's table entry, after the caller's lookup (ownership) and checks agree with it; adds
 * its stored bytes to *bytes. */
static const mt__expert *expert_for(mt_dev *d, const md_moe_exec_args *a, int x, uint64_t *bytes,
                                    mw_err *err) {
    const kn_expert *e = a->lookup(a->lookup_ctx, a->layer, x, err);
    if (!e || kn_expert_check(e, a->glu, err))
        return mw_err_wrap(err, "MoE layer %d expert %d", a->layer, x), NULL;
    if (e->gate.cols != a->width)
        return mw_errf(err, "MoE layer %d expert %d takes rows of %lld, not %lld", a->layer, x,
                       (long long)e->gate.cols, (long long)a->width),
               NULL;
    *bytes += kn_expert_weight_bytes(e);
    const mt__expert *me =
        a->layer < d->n_layers && x < d->n_experts ? mt__at(d, a->layer, x) : NULL;
    if (!me || !me->loaded || me->m[MT_GATE].data != e->gate.data ||
        me->m[MT_UP].data != e->up.data || me->m[MT_DOWN].data != e->down.data)
        return mw_errf(err, "MoE layer %d expert %d: not on the Metal device", a->layer, x), NULL;
    return me;
}

/* Sorts the assignments by expert and forms one group per expert. */
static int make_groups(mt_dev *d, const md_moe_exec_args *a, int *n_groups, uint64_t *bytes,
                       mw_err *err) {
    mt__ws *ws = &d->ws;
    const int64_t n = a->n_assign;
    if (mw_grow(&ws->slots, &ws->slots_cap, (size_t)n, sizeof(slot)) ||
        mw_grow(&ws->groups, &ws->groups_cap, (size_t)n, sizeof(group)))
        return mw_errf(err, "MoE layer %d: out of memory", a->layer);
    slot *s = ws->slots;
    group *g = ws->groups;
    for (int64_t i = 0; i < n; i++) s[i] = (slot){a->assign[i].expert, (int32_t)i};
    qsort(s, (size_t)n, sizeof(slot), cmp_slot);
    int k = 0;
    for (int64_t i = 0; i < n;) {
        int64_t end = i + 1;
        while (end < n && s[end].expert == s[i].expert) end++;
        const mt__expert *me = expert_for(d, a, s[i].expert, bytes, err);
        if (!me) return -1;
        g[k++] = (group){.me = me, .s0 = i, .count = end - i, .ff = me->m[MT_GATE].rows};
        i = end;
    }
    *n_groups = k;
    return 0;
}

static kn_type act_of(const mt__expert *me, int which) {
    return mt__format_of(me->m[which].type)->act;
}

/* Places every array in the scratch buffer. */
static void plan_layout(const md_moe_exec_args *a, group *g, int n_groups, layout *L) {
    const int64_t n = a->n_assign, w = a->width, rows = a->rows;
    const bool q8 = a->numerics == KN_NUM_Q8;
    size_t at = 0, gu = 0;
    L->x = at;
    at += mt__align((size_t)(rows * w) * 4);
    bool need[2] = {false, false};
    for (int i = 0; q8 && i < n_groups; i++) {
        need[act_slot(act_of(g[i].me, MT_GATE))] = true;
        need[act_slot(act_of(g[i].me, MT_UP))] = true;
    }
    const kn_type acts[2] = {KN_Q8_0, KN_Q8_K};
    for (int f = 0; f < 2; f++) {
        L->xq[f] = need[f] ? at : SIZE_MAX;
        if (need[f]) at += mt__align((size_t)rows * kn_row_size(acts[f], w));
    }
    L->idx = at;
    at += mt__align((size_t)(3 * n + rows + 1) * 4);
    L->wts = at;
    at += mt__align((size_t)n * 4);
    for (int i = 0; i < n_groups; i++) {
        g[i].g_off = gu;
        gu += (size_t)(g[i].count * g[i].ff);
    }
    L->g = at;
    L->u = L->g + mt__align(gu * 4);
    at = L->u + mt__align(gu * 4);
    for (int i = 0; q8 && i < n_groups; i++) {
        g[i].hq = at;
        at += mt__align((size_t)g[i].count * kn_row_size(act_of(g[i].me, MT_DOWN), g[i].ff));
    }
    L->y = at;
    if (a->mode == MD_MOE_PARTIAL) at += mt__align((size_t)(n * w) * 4);
    L->out = at;
    at += (size_t)((a->mode == MD_MOE_PARTIAL ? rows : n) * w) * 4;
    L->total = at;
}

/* The rows, the index lists and the weights, written into the scratch buffer. tmp: n + rows
 * ints. */
static void fill_inputs(const md_moe_exec_args *a, const slot *s, uint8_t *base, const layout *L,
                 int32_t *tmp) {
    const int64_t n = a->n_assign, rows = a->rows;
    memcpy(base + L->x, a->x, (size_t)(rows * a->width) * 4);
    int32_t *ix = (int32_t *)(base + L->idx), *slot_of = tmp, *cursor = tmp + n;
    int32_t *starts = ix + 2 * n, *entries = starts + rows + 1;
    float *wts = (float *)(base + L->wts);
    for (int64_t i = 0; i < n; i++) {
        ix[i] = a->assign[s[i].a].row;
        ix[n + i] = s[i].a;
        slot_of[s[i].a] = (int32_t)i;
    }
    /* each row's assignments in their order: CSR over rows, an entry naming the slot to read */
    memset(starts, 0, (size_t)(rows + 1) * 4);
    for (int64_t i = 0; i < n; i++) starts[a->assign[i].row + 1]++;
    for (int64_t r = 0; r < rows; r++) starts[r + 1] += starts[r];
    memcpy(cursor, starts, (size_t)rows * 4);
    for (int64_t i = 0; i < n; i++) {
        const int32_t e = cursor[a->assign[i].row]++;
        entries[e] = slot_of[i];
        wts[e] = a->assign[i].weight;
    }
}

/* ---- the dispatches ----------------------------------------------------------------------------
 */

static const kn_type acts[2] = {KN_Q8_0, KN_Q8_K};

/* Q8 mode: the batch's rows quantized once per activation format some gate or up reads. */
static int plan_inputs(mt_dev *d, const md_moe_exec_args *a, const layout *L) {
    for (int f = 0; f < 2; f++)
        if (L->xq[f] != SIZE_MAX &&
            mt__add_quant(&d->ws, acts[f], a->width, a->rows, mt__scratch_at(L->x),
                          (int)(a->width * 4), mt__scratch_at(L->xq[f]),
                          (int)kn_row_size(acts[f], a->width)))
            return -1;
    return 0;
}

static const mt__mat *bias_of(const mt__expert *me, int which) {
    return me->m[which + MT_GATE_B].data ? &me->m[which + MT_GATE_B] : NULL;
}

/* Gate and up of every expert, its rows read through the slot → row list. */
static int plan_gate_up(mt_dev *d, const md_moe_exec_args *a, const group *g, int ng,
                        const layout *L) {
    const bool q8 = a->numerics == KN_NUM_Q8;
    for (int i = 0; i < ng; i++) {
        for (int which = MT_GATE; which <= MT_UP; which++) {
            const kn_type act = act_of(g[i].me, which);
            const size_t y = (which == MT_GATE ? L->g : L->u) + g[i].g_off * 4;
            const mt__mm m = {.W = &g[i].me->m[which],
                              .bias = bias_of(g[i].me, which),
                              .num = a->numerics,
                              .T = g[i].count,
                              .x = mt__scratch_at(q8 ? L->xq[act_slot(act)] : L->x),
                              .y = mt__scratch_at(y),
                              .ix = mt__scratch_at(L->idx),
                              .x_stride =
                                  (int)(q8 ? kn_row_size(act, a->width) : (size_t)a->width * 4),
                              .x_index = (int)g[i].s0,
                              .y_stride = (int)(g[i].ff * 4),
                              .y_index = MT_NO_INDEX};
            if (mt__add_matmul(&d->ws, &m)) return -1;
        }
    }
    return 0;
}

/* The GLU over every slot's gate and up outputs at once (they lie side by side). */
static int plan_glu(mt_dev *d, const md_moe_exec_args *a, const layout *L, int64_t total) {
    for (int64_t c0 = 0; c0 < total; c0 += GLU_CHUNK) {
        const int64_t c = total - c0 < GLU_CHUNK ? total - c0 : GLU_CHUNK;
        mt_dispatch *k =
            mt__dispatch(&d->ws, mt__glu_kernel(a->glu->kind), mt__cdiv(c, MT_TG_THREADS), 1);
        if (!k) return -1;
        k->args.count = (int)c;
        k->args.alpha = a->glu->alpha;
        k->args.limit = a->glu->limit;
        k->args.beta = a->glu->beta;
        k->args.lbeta = a->glu->lbeta;
        k->bind[MT_B_Y] = mt__scratch_at(L->g + (size_t)c0 * 4);
        k->bind[MT_B_X] = mt__scratch_at(L->u + (size_t)c0 * 4);
    }
    return 0;
}

/* Down of every expert (after quantizing its GLU outputs in Q8 mode): to its slots' rows, or in
 * exact mode to its assignments' output rows. */
static int plan_down(mt_dev *d, const md_moe_exec_args *a, const group *g, int ng,
                     const layout *L) {
    const bool q8 = a->numerics == KN_NUM_Q8, partial = a->mode == MD_MOE_PARTIAL;
    const int64_t w = a->width;
    for (int i = 0; i < ng; i++) {
        const kn_type act = act_of(g[i].me, MT_DOWN);
        const size_t in = L->g + g[i].g_off * 4;
        const int qb = (int)kn_row_size(act, g[i].ff), fb = (int)(g[i].ff * 4);
        if (q8 && mt__add_quant(&d->ws, act, g[i].ff, g[i].count, mt__scratch_at(in), fb,
                                mt__scratch_at(g[i].hq), qb))
            return -1;
        const mt__mm m = {.W = &g[i].me->m[MT_DOWN],
                          .bias = bias_of(g[i].me, MT_DOWN),
                          .num = a->numerics,
                          .T = g[i].count,
                          .x = mt__scratch_at(q8 ? g[i].hq : in),
                          .y = mt__scratch_at(partial ? L->y + (size_t)(g[i].s0 * w) * 4 : L->out),
                          .ix = mt__scratch_at(L->idx),
                          .x_stride = q8 ? qb : fb,
                          .x_index = MT_NO_INDEX,
                          .y_stride = (int)(w * 4),
                          .y_index = partial ? MT_NO_INDEX : (int)(a->n_assign + g[i].s0)};
        if (mt__add_matmul(&d->ws, &m)) return -1;
    }
    return 0;
}

/* Partial mode: each row's weighted sum of its assignments' outputs, in assignment order. */
static int plan_combine(mt_dev *d, const md_moe_exec_args *a, const layout *L) {
    const int64_t n = a->n_assign;
    mt_dispatch *k =
        mt__dispatch(&d->ws, "mt_combine", mt__cdiv(a->width, MT_TG_THREADS), (uint32_t)a->rows);
    if (!k) return -1;
    k->args.cols = (int)a->width;
    k->args.x_index = (int)(2 * n);
    k->args.y_index = (int)(2 * n + a->rows + 1);
    k->args.x_stride = k->args.y_stride = (int)(a->width * 4);
    k->bind[MT_B_W] = mt__scratch_at(L->wts);
    k->bind[MT_B_X] = mt__scratch_at(L->y);
    k->bind[MT_B_Y] = mt__scratch_at(L->out);
    k->bind[MT_B_IX] = mt__scratch_at(L->idx);
    return 0;
}

static int plan(mt_dev *d, const md_moe_exec_args *a, const group *g, int ng, const layout *L) {
    int64_t glu = 0;
    for (int i = 0; i < ng; i++) glu += g[i].count * g[i].ff;
    d->ws.n_dsp = 0;
    if ((a->numerics == KN_NUM_Q8 && plan_inputs(d, a, L)) || plan_gate_up(d, a, g, ng, L) ||
        plan_glu(d, a, L, glu) || plan_down(d, a, g, ng, L) ||
        (a->mode == MD_MOE_PARTIAL && plan_combine(d, a, L)))
        return -1;
    return 0;
}

int mt_moe_exec(mt_dev *d, const md_moe_exec_args *a, float *out, uint64_t *weight_bytes,
                mw_err *err) {
    if (md_moe_check_args(a, err)) return -1;
    if (mt_glu_check(a->glu, err)) return mw_err_wrap(err, "MoE layer %d", a->layer);
    const bool partial = a->mode == MD_MOE_PARTIAL;
    if (a->n_assign == 0) {
        if (partial) memset(out, 0, (size_t)(a->rows * a->width) * 4);
        return 0;
    }
    int ng = 0;
    uint64_t bytes = 0;
    if (make_groups(d, a, &ng, &bytes, err)) return -1;
    group *g = d->ws.groups;
    layout L;
    plan_layout(a, g, ng, &L);
    if (mw_grow(&d->ws.tmp, &d->ws.tmp_cap, (size_t)(a->n_assign + a->rows), sizeof(int32_t)))
        return mw_errf(err, "MoE layer %d: out of memory", a->layer);
    uint8_t *base = d->be->scratch(d->impl, L.total, err);
    if (!base) return mw_err_wrap(err, "MoE layer %d", a->layer);
    fill_inputs(a, d->ws.slots, base, &L, d->ws.tmp);
    if (plan(d, a, g, ng, &L)) return mw_errf(err, "MoE layer %d: out of memory", a->layer);
    uint64_t ns;
    if (d->be->run(d->impl, d->ws.dsp, d->ws.n_dsp, &ns, err))
        return mw_err_wrap(err, "MoE layer %d on %s", a->layer, d->info.device);
    memcpy(out, base + L.out, (size_t)((partial ? a->rows : a->n_assign) * a->width) * 4);
    if (weight_bytes) *weight_bytes += bytes;
    return 0;
}
