/* metal/mt_dev.c — the Metal device over an expert table: the tables of kernels (weight formats,
 * activation formats, GLU policies), the owned experts' matrices located in wrapped regions (no
 * copy; biases stored in another type converted once), the dispatches one matmul or quantization
 * needs, single-matrix runs for the tests and the self-test, and the bandwidth measurement. */
#include "metal/mt_dev.h"
#include "metal/mt_internal.h"
#include "metal/mt_regions.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/mw_grow.h"

/* ---- the tables ------------------------------------------------------------------------------ */

static const mt__format formats[] = {
    {KN_MXFP4, KN_Q8_0, "mt_mv_mxfp4", "mt_mm_mxfp4", "mt_f32_mxfp4"},
    {KN_Q8_0, KN_Q8_0, "mt_mv_q8_0", "mt_mm_q8_0", "mt_f32_q8_0"},
    {KN_Q4_K, KN_Q8_K, "mt_mv_q4_K", "mt_mm_q4_K", "mt_f32_q4_K"},
    {KN_Q6_K, KN_Q8_K, "mt_mv_q6_K", "mt_mm_q6_K", "mt_f32_q6_K"},
};

static const struct {
    kn_type act;
    const char *kernel;
    int per_group; /* blocks one threadgroup quantizes */
} quants[] = {
    {KN_Q8_0, "mt_quant_q8_0", MT_TG_THREADS},
    {KN_Q8_K, "mt_quant_q8_K", MT_SG_PER_TG},
};

/* GLU kinds without a row here have no Metal kernel yet: a node refuses such a model on Metal. */
static const char *const glu_kernels[KN_GLU_COUNT] = {
    [KN_GLU_SWIGLU] = "mt_glu_swiglu",
    [KN_GLU_SWIGLU_OAI] = "mt_glu_swiglu_oai",
    [KN_GLU_SITU] = "mt_glu_situ",
};

const mt__format *mt__format_of(kn_type t) {
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (formats[i].type == t) return &formats[i];
    return NULL;
}

bool mt_type_supported(kn_type t) {
    return mt__format_of(t) != NULL;
}

const char *mt__quant_kernel(kn_type act) {
    for (size_t i = 0; i < sizeof quants / sizeof quants[0]; i++)
        if (quants[i].act == act) return quants[i].kernel;
    return NULL;
}

const char *mt__glu_kernel(kn_glu_kind k) {
    return (int)k >= 0 && k < KN_GLU_COUNT ? glu_kernels[k] : NULL;
}

int mt_kernel_names(const char **names, int cap) {
    int n = 0;
#define NAME(s)                                                                                    \
    do {                                                                                           \
        if (n < cap) names[n] = (s);                                                               \
        n++;                                                                                       \
    } while (0)
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        NAME(formats[i].mv);
        NAME(formats[i].mm);
        NAME(formats[i].f32);
    }
    for (size_t i = 0; i < sizeof quants / sizeof quants[0]; i++) NAME(quants[i].kernel);
    for (int k = 0; k < KN_GLU_COUNT; k++)
        if (glu_kernels[k]) NAME(glu_kernels[k]);
    NAME("mt_combine");
    NAME("mt_read_bw");
#undef NAME
    return n;
}

int mt_glu_check(const kn_glu *glu, mw_err *err) {
    if (!mt__glu_kernel(glu->kind))
        return mw_errf(err,
                       "the GLU policy %s has no Metal kernel (run the node with --device cpu)",
                       kn_glu_name(glu->kind));
    return 0;
}

/* ---- dispatches ------------------------------------------------------------------------------ */

mt_dispatch *mt__dispatch(mt__ws *ws, const char *kernel, uint32_t gx, uint32_t gy) {
    if (mw_grow((void **)&ws->dsp, &ws->dsp_cap, (size_t)ws->n_dsp + 1, sizeof *ws->dsp))
        return NULL;
    mt_dispatch *d = &ws->dsp[ws->n_dsp++];
    *d = (mt_dispatch){.kernel = kernel, .grid = {gx, gy}};
    for (int b = 0; b < MT_N_BINDS; b++) d->bind[b] = (mt_bind){MT_BUF_NONE, 0};
    d->args.x_index = d->args.y_index = MT_NO_INDEX;
    return d;
}

void mt__ws_free(mt__ws *ws) {
    free(ws->slots);
    free(ws->groups);
    free(ws->tmp);
    free(ws->dsp);
    memset(ws, 0, sizeof *ws);
}

static mt_bind mat_at(const mt__mat *m) {
    return (mt_bind){m->region, m->off};
}

int mt__add_matmul(mt__ws *ws, const mt__mm *m) {
    const mt__format *f = mt__format_of(m->W->type);
    const int64_t N = m->W->rows;
    const bool f32 = m->num == KN_NUM_F32;
    const bool mv = !f32 && (m->var == MT_MATVEC || (m->var == MT_AUTO && m->T == 1));
    mt_dispatch *d;
    if (f32)
        d = mt__dispatch(ws, f->f32, mt__cdiv(N, MT_SG_PER_TG), mt__cdiv(m->T, MT_F32_TOKENS));
    else if (mv)
        d = mt__dispatch(ws, f->mv, mt__cdiv(N, MT_SG_PER_TG * MT_MV_ROWS), (uint32_t)m->T);
    else
        d = mt__dispatch(ws, f->mm, mt__cdiv(N, MT_MM_ROWS),
                         mt__cdiv(m->T, MT_SG_PER_TG * MT_MM_TOKENS));
    if (!d) return -1;
    if (!f32 && !mv)
        d->tg_bytes = (uint32_t)(MT_MM_ROWS * MT_QLANES * kn_traits(m->W->type)->type_size);
    d->args = (mt_args){.rows = (int)N,
                        .cols = (int)m->W->cols,
                        .tokens = (int)m->T,
                        .w_stride = m->W->stride,
                        .x_stride = m->x_stride,
                        .y_stride = m->y_stride,
                        .x_index = m->x_index,
                        .y_index = m->y_index,
                        .has_bias = m->bias != NULL};
    d->bind[MT_B_W] = mat_at(m->W);
    d->bind[MT_B_X] = m->x;
    d->bind[MT_B_Y] = m->y;
    d->bind[MT_B_IX] = m->ix;
    if (m->bias) d->bind[MT_B_BIAS] = mat_at(m->bias);
    return 0;
}

int mt__add_quant(mt__ws *ws, kn_type act, int64_t K, int64_t T, mt_bind x, int x_stride, mt_bind y,
                  int y_stride) {
    const int i = act == KN_Q8_0 ? 0 : 1;
    const int64_t nb = K / kn_traits(act)->blck_size;
    mt_dispatch *d =
        mt__dispatch(ws, quants[i].kernel, mt__cdiv(nb, quants[i].per_group), (uint32_t)T);
    if (!d) return -1;
    d->args.cols = (int)K;
    d->args.tokens = (int)T;
    d->args.x_stride = x_stride;
    d->args.y_stride = y_stride;
    d->bind[MT_B_X] = x;
    d->bind[MT_B_Y] = y;
    return 0;
}

/* ---- opening: the experts' matrices, located in wrapped regions ------------------------------ */

static const char *const mat_names[MT_N_MATS] = {"gate",      "up",      "down",
                                                 "gate bias", "up bias", "down bias"};

static const kn_mat *view_mat(const kn_expert *e, int i) {
    const kn_mat *m[MT_N_MATS] = {&e->gate, &e->up, &e->down, &e->gate_b, &e->up_b, &e->down_b};
    return m[i];
}

/* A bias the kernels cannot read in place (another type, or a float misaligned): converted. */
static bool bias_converted(const kn_mat *b) {
    return b->type != KN_F32 || (uintptr_t)b->data % sizeof(float) != 0;
}

/* Checks expert (l, e)'s matrices; adds the floats its converted biases need to *bias_floats. */
static int check_expert(const kn_expert *e, int l, int x, size_t *bias_floats, mw_err *err) {
    for (int i = 0; i < MT_N_MATS; i++) {
        const kn_mat *m = view_mat(e, i);
        if (!m->data) continue;
        if (i < MT_GATE_B && !mt_type_supported(m->type))
            return mw_errf(err,
                           "expert (%d, %d): the %s is %s, which the Metal kernels do not read "
                           "(MXFP4, Q8_0, Q4_K, Q6_K); run the node with --device cpu",
                           l, x, mat_names[i], kn_type_name(m->type));
        if (m->rows > INT_MAX || m->cols > INT_MAX || m->row_bytes > INT_MAX)
            return mw_errf(err, "expert (%d, %d): the %s is too large for the Metal kernels", l, x,
                           mat_names[i]);
        if (i >= MT_GATE_B && bias_converted(m)) *bias_floats += mt__align((size_t)m->cols * 4);
    }
    return 0;
}

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* Fills expert (l, e)'s matrices and their ranges (converting biases into d->biases at *bias_off).
 */
static void place_expert(mt_dev *d, const kn_expert *e, int l, int x, mt_range *r, size_t *n,
                         mt__mat **owner, size_t *bias_off) {
    mt__expert *me = mt__at(d, l, x);
    me->loaded = true;
    for (int i = 0; i < MT_N_MATS; i++) {
        const kn_mat *m = view_mat(e, i);
        if (!m->data) continue;
        mt__mat *o = &me->m[i];
        *o = (mt__mat){.type = m->type,
                       .rows = m->rows,
                       .cols = m->cols,
                       .stride = (int)m->row_bytes,
                       .data = m->data};
        const void *p = m->data;
        size_t len = (size_t)(m->rows - 1) * m->row_bytes + kn_row_size(m->type, m->cols);
        if (i >= MT_GATE_B && bias_converted(m)) {
            float *dst = (float *)((uint8_t *)d->biases + *bias_off);
            kn_mat_row(m, 0, dst);
            *bias_off += mt__align((size_t)m->cols * 4);
            o->type = KN_F32;
            o->stride = (int)(m->cols * 4);
            p = dst;
            len = (size_t)m->cols * 4;
        }
        r[*n] = (mt_range){.p = p, .len = len};
        owner[(*n)++] = o;
    }
}

static int load_experts(mt_dev *d, const md_expert_table *t, mw_err *err) {
    size_t n_mats = 0, bias_floats = 0;
    for (int l = 0; l < t->n_layers; l++)
        for (int x = 0; x < t->n_experts; x++) {
            const kn_expert *e = md_expert_table_at(t, l, x);
            if (!e->gate.data) continue;
            if (check_expert(e, l, x, &bias_floats, err)) return -1;
            n_mats += MT_N_MATS;
        }
    const size_t page = page_size();
    const size_t bias_bytes = (bias_floats + page - 1) / page * page;
    if (bias_bytes && posix_memalign((void **)&d->biases, page, bias_bytes))
        return mw_errf(err, "out of memory for %zu bytes of converted biases", bias_bytes);
    mt_range *r = malloc((n_mats + 1) * sizeof *r);
    mt__mat **owner = malloc((n_mats + 1) * sizeof *owner);
    size_t n = 0, bias_off = 0;
    int rc = -1;
    if (!r || !owner) {
        mw_errf(err, "out of memory for %zu matrices", n_mats);
        goto done;
    }
    for (int l = 0; l < t->n_layers; l++)
        for (int x = 0; x < t->n_experts; x++) {
            const kn_expert *e = md_expert_table_at(t, l, x);
            if (e->gate.data) place_expert(d, e, l, x, r, &n, owner, &bias_off);
        }
    if (mt_regions_plan(r, n, page, d->info.max_buffer, &d->regions, &d->n_regions, err)) goto done;
    for (size_t i = 0; i < n; i++) {
        owner[i]->region = r[i].region;
        owner[i]->off = r[i].off;
    }
    rc = d->be->wrap(d->impl, d->regions, d->n_regions, err);
done:
    free(r);
    free(owner);
    return rc;
}

int mt_dev_open(const mt_backend *be, const md_expert_table *t, size_t bw_bytes, mt_dev **out,
                mw_err *err) {
    *out = NULL;
    if (!be) return mw_errf(err, "this build has no Metal backend (it is built on macOS only)");
    mt_dev *d = calloc(1, sizeof *d);
    if (!d) return mw_errf(err, "out of memory");
    d->be = be;
    d->n_layers = t->n_layers;
    d->n_experts = t->n_experts;
    d->experts = calloc((size_t)t->n_layers * (size_t)t->n_experts + 1, sizeof *d->experts);
    if (!d->experts) {
        free(d);
        return mw_errf(err, "out of memory");
    }
    if (be->open(&d->impl, &d->info, err) || load_experts(d, t, err) ||
        (bw_bytes && mt_dev_measure(d, bw_bytes, &d->read_gbps, err))) {
        mt_dev_close(d);
        return -1;
    }
    *out = d;
    return 0;
}

void mt_dev_close(mt_dev *d) {
    if (!d) return;
    if (d->impl) d->be->close(d->impl);
    mt__ws_free(&d->ws);
    free(d->experts);
    free(d->biases);
    free(d->regions);
    free(d);
}

const char *mt_dev_name(const mt_dev *d) {
    return d->info.device;
}

double mt_dev_read_gbps(const mt_dev *d) {
    return d->read_gbps;
}

/* ---- one matrix, and the bandwidth ----------------------------------------------------------- */

int mt_matmul(mt_dev *d, int layer, int expert, int which, const float *X, int64_t T, float *Y,
              kn_numerics num, mt_variant v, uint64_t *ns, mw_err *err) {
    if (layer < 0 || layer >= d->n_layers || expert < 0 || expert >= d->n_experts ||
        !mt__at(d, layer, expert)->loaded || which < MT_GATE || which > MT_DOWN || T < 1 ||
        T > INT_MAX)
        return mw_errf(err, "mt_matmul: no matrix %d of expert (%d, %d), or T = %lld", which, layer,
                       expert, (long long)T);
    const mt__mat *W = &mt__at(d, layer, expert)->m[which];
    const kn_type act = mt__format_of(W->type)->act;
    const size_t xb = (size_t)W->cols * 4, qb = kn_row_size(act, W->cols);
    const size_t off_q = mt__align((size_t)T * xb), off_y = off_q + mt__align((size_t)T * qb);
    uint8_t *s = d->be->scratch(d->impl, off_y + (size_t)T * (size_t)W->rows * 4, err);
    if (!s) return -1;
    memcpy(s, X, (size_t)T * xb);
    mt__ws *ws = &d->ws;
    ws->n_dsp = 0;
    const bool q8 = num == KN_NUM_Q8;
    mt__mm m = {.W = W,
                .num = num,
                .var = v,
                .T = T,
                .x = mt__scratch_at(q8 ? off_q : 0),
                .y = mt__scratch_at(off_y),
                .ix = mt__scratch_at(0),
                .x_stride = (int)(q8 ? qb : xb),
                .x_index = MT_NO_INDEX,
                .y_stride = (int)(W->rows * 4),
                .y_index = MT_NO_INDEX};
    if ((q8 && mt__add_quant(ws, act, W->cols, T, mt__scratch_at(0), (int)xb, mt__scratch_at(off_q),
                             (int)qb)) ||
        mt__add_matmul(ws, &m))
        return mw_errf(err, "out of memory");
    uint64_t t;
    if (d->be->run(d->impl, ws->dsp, ws->n_dsp, &t, err)) return -1;
    memcpy(Y, s + off_y, (size_t)T * (size_t)W->rows * 4);
    if (ns) *ns = t;
    return 0;
}

int mt_dev_measure(mt_dev *d, size_t bytes, double *gbps, mw_err *err) {
    const size_t words = bytes / 16;
    if (words < 1 || words > INT_MAX) return mw_errf(err, "bandwidth: %zu bytes", bytes);
    /* enough threads in flight to cover the memory's latency, none without a word to read */
    size_t threads = words < 1024 * MT_TG_THREADS ? words : 1024 * MT_TG_THREADS;
    threads = (threads + MT_TG_THREADS - 1) / MT_TG_THREADS * MT_TG_THREADS;
    uint8_t *s = d->be->scratch(d->impl, words * 16 + threads * 4, err);
    if (!s) return -1;
    memset(s, 1, words * 16); /* touched, so the pages are real */
    mt__ws *ws = &d->ws;
    ws->n_dsp = 0;
    mt_dispatch *k = mt__dispatch(ws, "mt_read_bw", (uint32_t)(threads / MT_TG_THREADS), 1);
    if (!k) return mw_errf(err, "out of memory");
    k->args.rows = (int)threads;
    k->args.count = (int)words;
    k->bind[MT_B_W] = mt__scratch_at(0);
    k->bind[MT_B_Y] = mt__scratch_at(words * 16);
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t t;
        if (d->be->run(d->impl, ws->dsp, 1, &t, err)) return -1;
        if (t && t < best) best = t;
    }
    *gbps = best == UINT64_MAX ? 0 : (double)(words * 16) / (double)best;
    return 0;
}
