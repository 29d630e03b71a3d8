/* model/md_forward.c — the forward pass: embedding → layers (attention with a KV cache, then a
 * dense FFN or the MoE step through the expert backend) → final norm → LM head, for a batch of
 * (sequence, position, token) rows. There is one layer loop for every family; prefill and decode
 * differ only in the batch they pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/md_attn.h"
#include "model/md_attnres.h"
#include "model/md_heads.h"
#include "model/md_kda.h"
#include "model/md_lanes.h"
#include "model/md_model.h"
#include "model/md_ops.h"
#include "model/md_rope.h"
#include "model/md_router.h"
#include "util/mw_time.h"

#define MAX_BATCH (1 << 20)

static const char *const probe_names[MD_PROBE_COUNT] = {
    [MD_PROBE_ATTN_NORM] = "attn_norm",
    [MD_PROBE_Q_A] = "q_a",
    [MD_PROBE_Q_A_NORM] = "q_a_norm",
    [MD_PROBE_Q] = "q",
    [MD_PROBE_Q_PE] = "q_pe",
    [MD_PROBE_Q_ABSORBED] = "q_nope_absorbed",
    [MD_PROBE_KV_CMPR_PE] = "kv_cmpr_pe",
    [MD_PROBE_KV_CMPR] = "kv_cmpr",
    [MD_PROBE_K_PE] = "k_pe",
    [MD_PROBE_KQV] = "kqv",
    [MD_PROBE_KQV_MLA] = "kqv_mla",
    [MD_PROBE_Q_NORMED] = "Qcur_normed",
    [MD_PROBE_K_NORMED] = "Kcur_normed",
    [MD_PROBE_Q_ROPE] = "Qcur",
    [MD_PROBE_K_ROPE] = "Kcur",
    [MD_PROBE_V] = "Vcur",
    [MD_PROBE_KQV_OUT] = "kqv_out",
    [MD_PROBE_ATTN_OUT] = "attn_out",
    [MD_PROBE_FFN_INP] = "ffn_inp",
    [MD_PROBE_FFN_NORM] = "ffn_norm",
    [MD_PROBE_FFN_SWIGLU] = "ffn_swiglu",
    [MD_PROBE_ROUTER_LOGITS] = "ffn_moe_logits",
    [MD_PROBE_ROUTER_SCORES] = "ffn_moe_probs",
    [MD_PROBE_ROUTER_BIASED] = "ffn_moe_probs_biased",
    [MD_PROBE_GROUP_TOPK] = "ffn_moe_group_topk",
    [MD_PROBE_ROUTER_MASKED] = "ffn_moe_probs_masked",
    [MD_PROBE_TOPK] = "ffn_moe_topk",
    [MD_PROBE_WEIGHTS_SEL] = "ffn_moe_weights",
    [MD_PROBE_WEIGHTS_NORM] = "ffn_moe_weights_norm",
    [MD_PROBE_WEIGHTS] = "ffn_moe_weights_scaled",
    [MD_PROBE_MOE_OUT] = "ffn_moe_out",
    [MD_PROBE_SHEXP] = "ffn_shexp",
    [MD_PROBE_FFN_OUT] = "ffn_out",
    [MD_PROBE_L_OUT] = "l_out",
    [MD_PROBE_RESULT_NORM] = "result_norm",
    [MD_PROBE_KDA_F] = "kda_f",
    [MD_PROBE_KDA_G] = "kda_g1",
    [MD_PROBE_KDA_BETA_RAW] = "kda_beta_raw",
    [MD_PROBE_KDA_BETA] = "kda_beta",
    [MD_PROBE_KDA_Q_CONV] = "kda_q_conv",
    [MD_PROBE_KDA_K_CONV] = "kda_k_conv",
    [MD_PROBE_KDA_V_CONV] = "kda_v_conv",
    [MD_PROBE_KDA_Q] = "kda_q",
    [MD_PROBE_KDA_K] = "kda_k",
    [MD_PROBE_KDA_SCAN] = "kda_scan_out",
    [MD_PROBE_KDA_G2] = "kda_g2",
    [MD_PROBE_KDA_NORMED] = "kda_normed",
    [MD_PROBE_RES_PROBS_ATTN] = "res_probs_attn",
    [MD_PROBE_RES_PROBS_FFN] = "res_probs_ffn",
    [MD_PROBE_MLA_GATED] = "mla_gated",
    [MD_PROBE_ROUTED_RMS] = "routed_rms",
};

const char *md_probe_name(md_probe p) {
    return (unsigned)p < MD_PROBE_COUNT && probe_names[p] ? probe_names[p] : "unknown";
}

/* Scratch of a pass, sized for T_cap rows. */
typedef struct scratch {
    float *x, *xn, *q, *k, *v, *att, *o, *moe;
    float *qa, *qraw, *ho; /* MLA: the query latent, q_b's output, the heads' outputs */
    float *fg, *fu, *fy;   /* coordinator FFN: gate, up, output */
    /* KDA: q, k, v (conv'd in place), decay, output gate, read-out (T × D each), the low-rank
     * projections f_a / g_a (T × head_dim each), beta (T × n_head) */
    float *kq, *kk, *kv, *kf, *kg, *ko, *kfa, *kga, *kb;
    float *gate;       /* a latent attention's output gate: T × n_head·v */
    float *lat, *lmoe; /* a latent MoE's routed input and sum: T × expert width each */
    float *rlog, *rsel, *rw, *cs, *cs_swa;
    int32_t *rids;
    void *rscratch;
    /* only while an observer watches */
    float *obs, *rbiased, *rsel_w, *rnorm;
    int32_t *rgroups;
} scratch;

struct md_ctx {
    const md_model *m;
    md_ctx_params p;
    int64_t n_ctx;
    md_kv kv;
    md_kda_state kda; /* the KDA layers' recurrent states */
    md_attnres ar;    /* attention residuals' per-pass stack */
    md_observer_fn obs;
    void *obs_ud;
    md_route_sink sink;
    int64_t *seq_rows; /* per sequence: rows of it seen so far in the batch being checked */
    int64_t T_cap;
    bool obs_cap; /* the scratch has the observer's buffers */
    scratch s;
    bool rope_differs; /* sliding-window layers use other RoPE parameters */
    md_attn_ws attn;
    md_heads_ws heads;
    uint64_t dense_bytes;
    md_moe_timing timing;
    /* the MoE step between its submit and its wait (moe_start .. moe_finish): mb points to the
     * running lane's batch (a backend tells in-flight batches apart by their address) */
    md_moe_batch mb_store, *mb;
    bool mb_on;
    uint64_t mt0, mt1, mt2; /* submitted, on its way, the shared experts done */
    /* ping-pong micro-batches (md_lanes.h): lanes 1 .. MD_LANES_MAX-1 hold the state a lane
     * swaps into the fields above while it runs (lane 0 is the context's own) */
    struct md_lane *lanes[MD_LANES_MAX];
    int32_t *lane_of, *seq_lane;
    int64_t lane_rows_cap;
    md_lanes_clock clock;
    md_lane_stats lstats;
    /* md_ctx_count_unique: per layer the experts chosen this md_forward (n_layer × n_expert
     * flags) and how many; shared by the lanes, so a split step counts its rows together */
    uint8_t *chosen;
    int32_t *unique;
};

/* What a lane swaps into the context while it runs: its rows' scratch, its KV, KDA and attention
 * residual passes (views sharing the context's sequences), workspaces, its MoE step in flight. */
typedef struct md_lane {
    scratch s;
    int64_t T_cap;
    bool obs_cap;
    md_kv kv;
    md_kda_state kda;
    md_attnres ar;
    md_attn_ws attn;
    md_heads_ws heads;
    md_moe_batch *mb;
    bool mb_on;
    uint64_t mt0, mt1, mt2;
    md_moe_batch mb_store;
    /* not swapped: the lane's rows, and their places in the step's batch and logits */
    md_row *rows;
    int64_t *at, *out_at;
    int64_t T, n_out, cap;
} md_lane;

/* ---- context -------------------------------------------------------------------------------- */

int md_ctx_new(const md_model *m, const md_ctx_params *p, md_ctx **out, mw_err *err) {
    *out = NULL;
    if (!p->experts) return mw_errf(err, "model context: no expert backend");
    if (p->numerics != KN_NUM_F32 && p->numerics != KN_NUM_Q8)
        return mw_errf(err, "model context: unknown numerics %d", (int)p->numerics);
    const md_config *c = &m->cfg;
    int n_seq = p->n_seq > 0 ? p->n_seq : 1;
    int64_t n_ctx = p->n_ctx > 0 ? p->n_ctx : c->n_ctx_train;
    if (n_seq > 1 << 16 || n_ctx > c->n_ctx_train)
        return mw_errf(err,
                       "model context: %d sequences of %lld positions exceed the limits "
                       "(65536, context_length %lld)",
                       n_seq, (long long)n_ctx, (long long)c->n_ctx_train);
    md_ctx *x = calloc(1, sizeof *x);
    if (!x) return mw_errf(err, "out of memory");
    x->m = m;
    x->p = *p;
    x->p.n_seq = n_seq;
    x->n_ctx = n_ctx;
    x->mb = &x->mb_store;
    x->rope_differs = memcmp(&c->rope, &c->rope_swa, sizeof c->rope) != 0;
    md_attnres_init(&x->ar, c);
    x->seq_rows = calloc((size_t)n_seq, sizeof *x->seq_rows);
    if (!x->seq_rows) {
        md_ctx_free(x);
        return mw_errf(err, "model context: out of memory");
    }
    if (md_kv_init(&x->kv, c, n_seq, n_ctx, !p->swa_full, p->kv_type, err) ||
        md_kda_state_init(&x->kda, c, n_seq, err)) {
        md_ctx_free(x);
        return mw_err_wrap(err, "model context");
    }
    *out = x;
    return 0;
}

static void free_scratch(md_ctx *c) {
    scratch *s = &c->s;
    float **bufs[] = {&s->x,      &s->xn,    &s->q,    &s->k,  &s->v,      &s->att, &s->o,
                      &s->moe,    &s->qa,    &s->qraw, &s->ho, &s->fg,     &s->fu,  &s->fy,
                      &s->rlog,   &s->rsel,  &s->rw,   &s->cs, &s->cs_swa, &s->obs, &s->rbiased,
                      &s->rsel_w, &s->rnorm, &s->kq,   &s->kk, &s->kv,     &s->kf,  &s->kg,
                      &s->ko,     &s->kfa,   &s->kga,  &s->kb, &s->gate,   &s->lat, &s->lmoe};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(*bufs[i]);
    free(s->rids);
    free(s->rgroups);
    free(s->rscratch);
    memset(s, 0, sizeof *s);
}

static void lane_swap(md_ctx *c, md_lane *l);
static void lane_free(md_ctx *c, md_lane *l);

void md_ctx_free(md_ctx *c) {
    if (!c) return;
    for (int i = MD_LANES_MAX - 1; i >= 0; i--) lane_free(c, c->lanes[i]);
    free(c->lane_of);
    free(c->seq_lane);
    free_scratch(c);
    md_kv_free(&c->kv);
    md_kda_state_free(&c->kda);
    md_attnres_free(&c->ar);
    md_attn_ws_free(&c->attn);
    md_heads_ws_free(&c->heads);
    free(c->seq_rows);
    free(c->chosen);
    free(c->unique);
    free(c);
}

void md_ctx_set_observer(md_ctx *c, md_observer_fn fn, void *ud) {
    c->obs = fn;
    c->obs_ud = ud;
}

void md_ctx_set_route_sink(md_ctx *c, const md_route_sink *sink) {
    c->sink = sink ? *sink : (md_route_sink){0};
}

int md_ctx_count_unique(md_ctx *c, mw_err *err) {
    const md_config *m = &c->m->cfg;
    if (c->unique) return 0;
    c->chosen = calloc((size_t)m->n_layer * (size_t)(m->n_expert > 0 ? m->n_expert : 1), 1);
    c->unique = calloc((size_t)m->n_layer, sizeof *c->unique);
    if (!c->chosen || !c->unique) {
        free(c->chosen);
        free(c->unique);
        c->chosen = NULL;
        c->unique = NULL;
        return mw_errf(err, "model context: out of memory for the experts' counts");
    }
    return 0;
}

const int32_t *md_ctx_unique_experts(const md_ctx *c) {
    return c->unique;
}

/* A new md_forward: nothing chosen yet. */
static void unique_reset(md_ctx *c) {
    if (!c->unique) return;
    const md_config *m = &c->m->cfg;
    memset(c->chosen, 0, (size_t)m->n_layer * (size_t)(m->n_expert > 0 ? m->n_expert : 1));
    memset(c->unique, 0, (size_t)m->n_layer * sizeof *c->unique);
}

/* The experts T rows chose in layer il (T × k ids) into the layer's count. */
static void unique_add(md_ctx *c, int il, int64_t T, int k, const int32_t *ids) {
    if (!c->unique) return;
    const int X = c->m->cfg.n_expert;
    uint8_t *seen = c->chosen + (size_t)il * (size_t)X;
    for (int64_t i = 0; i < T * k; i++)
        if (ids[i] >= 0 && ids[i] < X && !seen[ids[i]]) {
            seen[ids[i]] = 1;
            c->unique[il]++;
        }
}

int64_t md_seq_len(const md_ctx *c, int seq) {
    return seq >= 0 && seq < c->p.n_seq ? c->kv.seqs[seq].n : -1;
}

int md_seq_truncate(md_ctx *c, int seq, int64_t n, mw_err *err) {
    if (seq < 0 || seq >= c->p.n_seq || n < 0)
        return mw_errf(err, "truncate: no sequence %d of %d, or negative length %lld", seq,
                       c->p.n_seq, (long long)n);
    if (!md_kv_can_truncate(&c->kv, seq, n))
        return mw_errf(err,
                       "truncate: sequence %d holds %lld positions; its sliding-window layers keep "
                       "only the last %lld, too few to go back to %lld (0 is always possible)",
                       seq, (long long)c->kv.seqs[seq].n, (long long)c->kv.ring, (long long)n);
    if (c->kda.n_kda && n > 0 && n < c->kv.seqs[seq].n)
        return mw_errf(err,
                       "truncate: sequence %d holds %lld positions; its KDA layers keep one "
                       "recurrent state, which cannot step back to %lld (0 is always possible)",
                       seq, (long long)c->kv.seqs[seq].n, (long long)n);
    if (n < c->kv.seqs[seq].n) c->kv.seqs[seq].n = n;
    return 0;
}

static int bad_seq(const md_ctx *c, int seq, mw_err *err) {
    return seq < 0 || seq >= c->p.n_seq ? mw_errf(err, "no sequence %d of %d", seq, c->p.n_seq) : 0;
}

uint64_t md_seq_pos_bytes(const md_ctx *c) {
    return md_kv_full_pos_bytes(&c->kv);
}

uint64_t md_seq_snap_bytes(const md_ctx *c) {
    return md_kv_ring_bytes(&c->kv) + md_kda_snap_bytes(&c->kda);
}

int md_seq_read_rows(const md_ctx *c, int seq, int64_t pos, int64_t n, void *dst, mw_err *err) {
    if (bad_seq(c, seq, err)) return -1;
    if (pos < 0 || n < 0 || pos + n > c->kv.seqs[seq].n)
        return mw_errf(err, "sequence %d holds %lld positions, not [%lld, %lld)", seq,
                       (long long)c->kv.seqs[seq].n, (long long)pos, (long long)(pos + n));
    md_kv_full_read(&c->kv, seq, pos, n, dst);
    return 0;
}

int md_seq_write_rows(md_ctx *c, int seq, int64_t pos, int64_t n, const void *src, mw_err *err) {
    if (bad_seq(c, seq, err)) return -1;
    if (pos < 0 || n < 0 || pos + n > c->n_ctx)
        return mw_errf(err, "positions [%lld, %lld) are not in a context of %lld", (long long)pos,
                       (long long)(pos + n), (long long)c->n_ctx);
    return md_kv_full_write(&c->kv, seq, pos, n, src, err);
}

int md_seq_read_snap(const md_ctx *c, int seq, void *dst, mw_err *err) {
    if (bad_seq(c, seq, err)) return -1;
    md_kv_ring_read(&c->kv, seq, dst);
    return md_kda_snap_read(&c->kda, seq, (uint8_t *)dst + md_kv_ring_bytes(&c->kv), err);
}

int md_seq_restore(md_ctx *c, int seq, int64_t n, const void *snap, mw_err *err) {
    if (bad_seq(c, seq, err)) return -1;
    if (n < 1 || n >= c->n_ctx || (!snap && md_seq_snap_bytes(c)))
        return mw_errf(err, "restore: %lld positions, or no snapshot", (long long)n);
    if (snap &&
        (md_kv_ring_write(&c->kv, seq, n, snap, err) ||
         md_kda_snap_write(&c->kda, seq, (const uint8_t *)snap + md_kv_ring_bytes(&c->kv), err)))
        return -1;
    md_kv_set_len(&c->kv, seq, n);
    return 0;
}

int md_seq_copy(md_ctx *c, int dst, int src, mw_err *err) {
    if (bad_seq(c, dst, err) || bad_seq(c, src, err)) return -1;
    const int64_t n = c->kv.seqs[src].n;
    if (n == 0) return md_seq_truncate(c, dst, 0, err);
    const size_t rows = (size_t)n * md_seq_pos_bytes(c), snap = md_seq_snap_bytes(c);
    uint8_t *buf = malloc(rows + snap + 1);
    if (!buf)
        return mw_errf(err, "out of memory copying a sequence of %lld positions", (long long)n);
    int rc = md_seq_read_rows(c, src, 0, n, buf, err) ||
                     md_seq_read_snap(c, src, buf + rows, err) ||
                     md_seq_write_rows(c, dst, 0, n, buf, err) ||
                     md_seq_restore(c, dst, n, snap ? buf + rows : NULL, err)
                 ? -1
                 : 0;
    free(buf);
    return rc;
}

int md_ctx_kda_state(const md_ctx *c, int seq, int layer, float *S, mw_err *err) {
    if (seq < 0 || seq >= c->p.n_seq)
        return mw_errf(err, "KDA state: no sequence %d of %d", seq, c->p.n_seq);
    return md_kda_state_read(&c->kda, seq, c->kv.seqs[seq].n, layer, S, err);
}

uint64_t md_ctx_dense_bytes(const md_ctx *c) {
    return c->dense_bytes;
}

uint64_t md_ctx_kv_bytes(const md_ctx *c) {
    return md_kv_bytes(&c->kv) + md_kda_state_bytes(&c->kda);
}

md_moe_timing md_ctx_moe_timing(const md_ctx *c) {
    return c->timing;
}

void md_ctx_reset_moe_timing(md_ctx *c) {
    memset(&c->timing, 0, sizeof c->timing);
}

static int64_t max64(int64_t a, int64_t b) {
    return a > b ? a : b;
}

#define ALLOC(p, count) (p = malloc((n * (count) > 0 ? n * (count) : 1) * sizeof *(p))) != NULL

/* The observer's buffers for n rows: the widest quantity it is handed in a gathered copy, the
 * router's intermediates. */
static bool reserve_obs(md_ctx *c, size_t n) {
    const md_config *m = &c->m->cfg;
    scratch *s = &c->s;
    const size_t X = (size_t)m->n_expert, K = (size_t)m->n_expert_used;
    const size_t qd = (size_t)m->n_head * m->head_dim_k, ad = (size_t)m->n_head * m->head_dim_v;
    const size_t wide =
        (size_t)max64(max64((int64_t)qd, (int64_t)ad), max64(m->n_embd, (int64_t)X));
    const size_t g = m->router.n_group_used > 0 ? (size_t)m->router.n_group_used : 1;
    c->obs_cap = ALLOC(s->obs, wide) && ALLOC(s->rbiased, X) && ALLOC(s->rsel_w, K) &&
                 ALLOC(s->rnorm, K) && ALLOC(s->rgroups, g);
    return c->obs_cap;
}

static int reserve_rows(md_ctx *c, int64_t T, mw_err *err) {
    const bool want_obs = c->obs != NULL;
    if (T <= c->T_cap && (!want_obs || c->obs_cap)) return 0;
    /* an observer attached to a context that has the rows: its buffers only (a profiler attached
     * after a long prompt must not free and refault the prompt's scratch) */
    if (T <= c->T_cap) {
        if (reserve_obs(c, (size_t)c->T_cap)) return 0;
        free_scratch(c);
        c->T_cap = 0;
        return mw_errf(err, "model context: out of memory for a batch of %lld rows", (long long)T);
    }
    const md_config *m = &c->m->cfg;
    const size_t E = (size_t)m->n_embd, X = (size_t)m->n_expert, K = (size_t)m->n_expert_used;
    const size_t qd = (size_t)m->n_head * m->head_dim_k, kd = (size_t)m->n_head_kv * m->head_dim_k;
    const size_t vd = (size_t)m->n_head_kv * m->head_dim_v, ad = (size_t)m->n_head * m->head_dim_v;
    const bool mla = m->attn == MD_ATTN_MLA;
    const size_t qa = mla ? (size_t)m->mla.q_lora : 0;
    const size_t qraw = mla ? (size_t)m->n_head * (m->mla.nope + m->mla.rope) : 0;
    const size_t od = mla ? (size_t)m->n_head * m->mla.v : 0;
    const size_t ff = (size_t)max64(m->n_ff, m->n_ff_shared);
    const size_t rot = (size_t)m->rope.n_rot;
    const size_t kD = m->n_kda ? (size_t)m->kda.n_head * m->kda.head_dim : 0;
    const size_t kdh = m->n_kda ? (size_t)m->kda.head_dim : 0;
    const size_t kH = m->n_kda ? (size_t)m->kda.n_head : 0;
    const size_t lw = m->n_expert_latent > 0 ? (size_t)m->n_expert_latent : 0;
    int64_t cap = c->T_cap ? c->T_cap : 1;
    while (cap < T) cap *= 2;
    free_scratch(c);
    c->T_cap = 0;
    c->obs_cap = false;
    const size_t n = (size_t)cap;
    scratch *s = &c->s;
    bool ok = ALLOC(s->x, E) && ALLOC(s->xn, E) && ALLOC(s->q, qd) && ALLOC(s->k, kd) &&
              ALLOC(s->v, vd) && ALLOC(s->att, ad) && ALLOC(s->o, E) && ALLOC(s->moe, E) &&
              ALLOC(s->qa, qa) && ALLOC(s->qraw, qraw) && ALLOC(s->ho, od) && ALLOC(s->fg, ff) &&
              ALLOC(s->fu, ff) && ALLOC(s->fy, E) && ALLOC(s->rlog, X) && ALLOC(s->rsel, X) &&
              ALLOC(s->rw, K) && ALLOC(s->rids, K) && ALLOC(s->cs, rot) && ALLOC(s->cs_swa, rot) &&
              ALLOC(s->kq, kD) && ALLOC(s->kk, kD) && ALLOC(s->kv, kD) && ALLOC(s->kf, kD) &&
              ALLOC(s->kg, kD) && ALLOC(s->ko, kD) && ALLOC(s->kfa, kdh) && ALLOC(s->kga, kdh) &&
              ALLOC(s->kb, kH) && ALLOC(s->gate, od) && ALLOC(s->lat, lw) && ALLOC(s->lmoe, lw);
    ok = ok && (s->rscratch = malloc(md_route_scratch_bytes(m->n_expert))) != NULL;
    if (ok && want_obs) ok = reserve_obs(c, n);
    if (!ok) {
        free_scratch(c);
        return mw_errf(err, "model context: out of memory for a batch of %lld rows", (long long)T);
    }
    c->T_cap = cap;
    return 0;
}
#undef ALLOC

/* ---- the pass ------------------------------------------------------------------------------- */

static void observe(md_ctx *c, int il, md_probe p, const void *data, int64_t rows, int64_t cols) {
    if (c->obs) c->obs(c->obs_ud, il, p, data, rows, cols);
}

/* Observes n pieces of `width` floats per row, piece i of row t at base + t·row + i·stride, as one
 * T × n·width array. */
static void observe_strided(md_ctx *c, int il, md_probe p, const float *base, int64_t T, int n,
                            int64_t width, int64_t row, int64_t stride) {
    if (!c->obs) return;
    for (int64_t t = 0; t < T; t++)
        for (int i = 0; i < n; i++)
            memcpy(c->s.obs + (t * n + i) * width, base + t * row + i * stride,
                   (size_t)width * sizeof(float));
    c->obs(c->obs_ud, il, p, c->s.obs, T, n * width);
}

static void count_bytes(md_ctx *c, const kn_mat *w) {
    c->dense_bytes += (uint64_t)w->row_bytes * (uint64_t)w->rows;
}

/* Y[i] = W[i] · X (+ bias[i]) for n matrices reading the same X, as one kernel call (the input
 * prepared once, one round trip through the pool). */
static void matmuls(md_ctx *c, int n, const kn_mat *const *W, const float *X, int64_t T,
                    float *const *Y, const float *const *bias) {
    kn_matmul_many(W, Y, n, X, T, c->p.numerics, c->p.pool);
    for (int m = 0; m < n; m++) {
        count_bytes(c, W[m]);
        if (bias[m])
            for (int64_t t = 0; t < T; t++) md_add(Y[m] + t * W[m]->rows, bias[m], W[m]->rows);
    }
}

static void matmul(md_ctx *c, const kn_mat *w, const float *X, int64_t T, float *Y,
                   const float *bias) {
    matmuls(c, 1, &w, X, T, &Y, &bias);
}

static int heads_matmul(md_ctx *c, const md_heads *w, md_strided x, md_strided y, int64_t T,
                        mw_err *err) {
    const int H = c->m->cfg.n_head;
    c->dense_bytes += (uint64_t)w->m.row_bytes * (uint64_t)w->m.rows * (uint64_t)H;
    return md_heads_matmul(w, H, x, y, T, c->p.numerics, c->p.pool, &c->heads, err);
}

/* y = (x · (1 / rms)) · w for T rows of n floats at `stride` floats apart (in place allowed). */
static void norm_rows(const float *x, float *y, const float *w, int64_t T, int64_t n,
                      int64_t stride, float eps) {
    for (int64_t t = 0; t < T; t++) md_rmsnorm(y + t * stride, x + t * stride, w, n, eps);
}

static int check_row(md_ctx *c, const md_row *row, int64_t r, int64_t *n_out, mw_err *err) {
    if (row->seq < 0 || row->seq >= c->p.n_seq)
        return mw_errf(err, "forward: row %lld names sequence %d (context has %d)", (long long)r,
                       row->seq, c->p.n_seq);
    if (row->token < 0 || row->token >= c->m->cfg.n_vocab)
        return mw_errf(err, "forward: row %lld: token id %d is out of range (vocabulary %lld)",
                       (long long)r, row->token, (long long)c->m->cfg.n_vocab);
    int64_t want = c->kv.seqs[row->seq].n + c->seq_rows[row->seq]++;
    if (row->pos != want)
        return mw_errf(err, "forward: row %lld: sequence %d continues at position %lld, not %d",
                       (long long)r, row->seq, (long long)want, row->pos);
    if (row->pos >= c->n_ctx)
        return mw_errf(err, "forward: sequence %d is full (context %lld positions)", row->seq,
                       (long long)c->n_ctx);
    if (row->logits) (*n_out)++;
    return 0;
}

/* Every row valid and continuing its sequence. The per-sequence counters are zero between calls
 * and reset through the rows, so a step costs O(T) however many sequences the context has. */
static int check_rows(md_ctx *c, const md_row *rows, int64_t T, int64_t *n_out, mw_err *err) {
    if (T < 1 || T > MAX_BATCH)
        return mw_errf(err, "forward: batch of %lld rows (must be 1 .. %d)", (long long)T,
                       MAX_BATCH);
    *n_out = 0;
    int rc = 0;
    int64_t r = 0;
    for (; r < T && !rc; r++) rc = check_row(c, &rows[r], r, n_out, err);
    for (int64_t i = 0; i < r; i++)
        if (rows[i].seq >= 0 && rows[i].seq < c->p.n_seq) c->seq_rows[rows[i].seq] = 0;
    return rc;
}

static const float *angles(const md_ctx *c, int il) {
    return c->m->cfg.layer_swa[il] && c->rope_differs ? c->s.cs_swa : c->s.cs;
}

/* GQA: q, k, v projections, per-head Q/K norm, RoPE, the K/V rows into the caches. */
static void gqa_qkv(md_ctx *c, int il, int64_t T) {
    const md_config *m = &c->m->cfg;
    const md_layer *w = &c->m->layers[il];
    scratch *s = &c->s;
    const int Hq = m->n_head, Hk = m->n_head_kv, dk = m->head_dim_k;
    const md_rope *rope = m->layer_swa[il] ? &m->rope_swa : &m->rope;
    const float *cs = angles(c, il);
    const kn_mat *qkv[3] = {&w->wq, &w->wk, &w->wv};
    matmuls(c, 3, qkv, s->xn, T, (float *const[]){s->q, s->k, s->v},
            (const float *const[]){w->bq, w->bk, w->bv});
    if (m->qk_norm) {
        norm_rows(s->q, s->q, w->q_norm, T * Hq, dk, dk, m->norm_eps);
        norm_rows(s->k, s->k, w->k_norm, T * Hk, dk, dk, m->norm_eps);
        observe(c, il, MD_PROBE_Q_NORMED, s->q, T, (int64_t)Hq * dk);
        observe(c, il, MD_PROBE_K_NORMED, s->k, T, (int64_t)Hk * dk);
    }
    for (int64_t t = 0; t < T; t++) {
        const float *a = cs + t * rope->n_rot;
        for (int h = 0; h < Hq; h++) md_rope_apply(rope, a, s->q + (t * Hq + h) * dk);
        for (int h = 0; h < Hk; h++) md_rope_apply(rope, a, s->k + (t * Hk + h) * dk);
    }
    observe(c, il, MD_PROBE_Q_ROPE, s->q, T, (int64_t)Hq * dk);
    observe(c, il, MD_PROBE_K_ROPE, s->k, T, (int64_t)Hk * dk);
    observe(c, il, MD_PROBE_V, s->v, T, (int64_t)Hk * m->head_dim_v);
    md_kv_store(&c->kv, il, s->k, s->v);
}

/* MLA, absorbed (FORMATS.md §7): the query [K_h q_nope_h, rope(q_pe_h)] per head, the cached row
 * [RMSNorm(latent), rope(k_pe)] per position (its latent is also the value). */
static int mla_qkv(md_ctx *c, int il, int64_t T, mw_err *err) {
    const md_config *m = &c->m->cfg;
    const md_mla *a = &m->mla;
    const md_layer *w = &c->m->layers[il];
    scratch *s = &c->s;
    const int H = m->n_head, dq = a->nope + a->rope, dk = m->head_dim_k;
    const float *cs = angles(c, il);
    /* the query's down-projection and the KV latent read the same input: one kernel call */
    if (a->q_lora) {
        const kn_mat *down[2] = {&w->wq_a, &w->wkv_a};
        matmuls(c, 2, down, s->xn, T, (float *const[]){s->qa, s->k},
                (const float *const[]){NULL, NULL});
        observe(c, il, MD_PROBE_Q_A, s->qa, T, a->q_lora);
        norm_rows(s->qa, s->qa, w->q_a_norm, T, a->q_lora, a->q_lora, m->norm_eps);
        observe(c, il, MD_PROBE_Q_A_NORM, s->qa, T, a->q_lora);
        matmul(c, &w->wq, s->qa, T, s->qraw, NULL);
    } else {
        const kn_mat *both[2] = {&w->wq, &w->wkv_a};
        matmuls(c, 2, both, s->xn, T, (float *const[]){s->qraw, s->k},
                (const float *const[]){NULL, NULL});
    }
    observe(c, il, MD_PROBE_Q, s->qraw, T, (int64_t)H * dq);
    observe(c, il, MD_PROBE_KV_CMPR_PE, s->k, T, dk);
    /* cached row: normalized latent, roped k_pe; query: roped q_pe after the absorbed q_nope */
    norm_rows(s->k, s->k, w->kv_a_norm, T, a->kv_lora, dk, m->norm_eps);
    for (int64_t t = 0; t < T; t++) {
        const float *ang = cs + t * a->rope;
        md_rope_apply(&m->rope, ang, s->k + t * dk + a->kv_lora);
        for (int h = 0; h < H; h++) {
            float *pe = s->q + (t * H + h) * dk + a->kv_lora;
            memcpy(pe, s->qraw + (t * H + h) * dq + a->nope, (size_t)a->rope * sizeof *pe);
            md_rope_apply(&m->rope, ang, pe);
        }
    }
    observe_strided(c, il, MD_PROBE_Q_PE, s->q + a->kv_lora, T, H, a->rope, (int64_t)H * dk, dk);
    observe_strided(c, il, MD_PROBE_KV_CMPR, s->k, T, 1, a->kv_lora, dk, 0);
    observe_strided(c, il, MD_PROBE_K_PE, s->k + a->kv_lora, T, 1, a->rope, dk, 0);
    /* q~_h = K_h q_nope_h: the query's no-rope part mapped into the latent space */
    md_strided qn = {s->qraw, (int64_t)H * dq, dq}, qt = {s->q, (int64_t)H * dk, dk};
    if (heads_matmul(c, &w->k_b, qn, qt, T, err)) return -1;
    observe_strided(c, il, MD_PROBE_Q_ABSORBED, s->q, T, H, a->kv_lora, (int64_t)H * dk, dk);
    observe(c, il, MD_PROBE_Q_ROPE, s->q, T, (int64_t)H * dk);
    observe(c, il, MD_PROBE_K_ROPE, s->k, T, dk);
    md_kv_store(&c->kv, il, s->k, s->k);
    return 0;
}

/* A KDA block (FORMATS.md §8, §9): the projections of the normed input, the convolution, the
 * gates, the delta rule over the sequences' states, the gated per-head norm, o_proj. */
static void kda_block(md_ctx *c, int il, int64_t T) {
    const md_config *m = &c->m->cfg;
    const md_kda *k = &m->kda;
    const md_layer *w = &c->m->layers[il];
    scratch *s = &c->s;
    const int H = k->n_head, d = k->head_dim;
    const int64_t D = (int64_t)H * d;
    /* everything reading the normed input in one kernel call; a full-rank gate is one of them */
    const kn_mat *in[6] = {&w->wq,  &w->wk,   &w->wv,
                           &w->f_a, &w->beta, k->gate_full ? &w->g_b : &w->g_a};
    float *out[6] = {s->kq, s->kk, s->kv, s->kfa, s->kb, k->gate_full ? s->kg : s->kga};
    matmuls(c, 6, in, s->xn, T, out, (const float *const[]){NULL, NULL, NULL, NULL, NULL, NULL});
    matmul(c, &w->f_b, s->kfa, T, s->kf, NULL);
    if (!k->gate_full) matmul(c, &w->g_b, s->kga, T, s->kg, NULL);
    observe(c, il, MD_PROBE_KDA_F, s->kf, T, D);
    md_kda_decay(k, s->kf, w->dt_b, w->ssm_a, T);
    observe(c, il, MD_PROBE_KDA_G, s->kf, T, D);
    observe(c, il, MD_PROBE_KDA_BETA_RAW, s->kb, T, H);
    md_kda_sigmoid(s->kb, T * H);
    observe(c, il, MD_PROBE_KDA_BETA, s->kb, T, H);
    md_kda_conv(&c->kda, il, (float *const[]){s->kq, s->kk, s->kv}, w->conv);
    observe(c, il, MD_PROBE_KDA_Q_CONV, s->kq, T, D);
    observe(c, il, MD_PROBE_KDA_K_CONV, s->kk, T, D);
    observe(c, il, MD_PROBE_KDA_V_CONV, s->kv, T, D);
    md_kda_l2norm(s->kq, T, H, d, m->norm_eps);
    md_kda_l2norm(s->kk, T, H, d, m->norm_eps);
    observe(c, il, MD_PROBE_KDA_Q, s->kq, T, D);
    observe(c, il, MD_PROBE_KDA_K, s->kk, T, D);
    md_kda_scan(&c->kda, il, s->kq, s->kk, s->kv, s->kf, s->kb, s->ko, c->p.pool);
    observe(c, il, MD_PROBE_KDA_SCAN, s->ko, T, D);
    observe(c, il, MD_PROBE_KDA_G2, s->kg, T, D);
    md_kda_out_norm(s->ko, w->o_norm, T, H, d, m->norm_eps);
    observe(c, il, MD_PROBE_KDA_NORMED, s->ko, T, D);
    md_kda_sigmoid(s->kg, T * D);
    for (int64_t i = 0; i < T * D; i++) s->ko[i] *= s->kg[i];
    matmul(c, &w->wo, s->ko, T, s->o, NULL);
}

static int attention(md_ctx *c, int il, const md_row *rows, int64_t T, mw_err *err) {
    const md_config *m = &c->m->cfg;
    const md_layer *w = &c->m->layers[il];
    scratch *s = &c->s;
    const int64_t E = m->n_embd;
    if (md_layer_is_kda(m, il)) {
        kda_block(c, il, T);
        observe(c, il, MD_PROBE_ATTN_OUT, s->o, T, E);
        return 0;
    }
    const bool mla = m->attn == MD_ATTN_MLA;
    if (mla ? mla_qkv(c, il, T, err) : (gqa_qkv(c, il, T), 0)) return -1;
    md_attn_args aa = {
        .cfg = m,
        .kv = &c->kv,
        .layer = il,
        .rows = rows,
        .T = T,
        .k = s->k,
        .v = mla ? s->k : s->v,
        .q = s->q,
        .sinks = w->sinks,
        .out = s->att,
    };
    if (md_attention(&aa, &c->attn, c->p.pool, err)) return -1;
    const float *heads_out = s->att;
    int64_t width = (int64_t)m->n_head * m->head_dim_v;
    if (mla) {
        /* each head's attended latent through V_h */
        const md_mla *a = &m->mla;
        observe(c, il, MD_PROBE_KQV, s->att, T, width);
        md_strided lat = {s->att, width, a->kv_lora},
                   out = {s->ho, (int64_t)m->n_head * a->v, a->v};
        if (heads_matmul(c, &w->v_b, lat, out, T, err)) return -1;
        heads_out = s->ho;
        width = (int64_t)m->n_head * a->v;
        observe(c, il, MD_PROBE_KQV_MLA, heads_out, T, width);
    }
    observe(c, il, MD_PROBE_KQV_OUT, heads_out, T, width);
    if (w->wgate.data) {
        /* K3's output gate, read from the layer's normed input: the heads' output (s->ho) times
         * sigmoid(attn_gate · attn_norm) */
        matmul(c, &w->wgate, s->xn, T, s->gate, NULL);
        md_kda_sigmoid(s->gate, T * width);
        for (int64_t i = 0; i < T * width; i++) s->ho[i] *= s->gate[i];
        observe(c, il, MD_PROBE_MLA_GATED, heads_out, T, width);
    }
    matmul(c, &w->wo, heads_out, T, s->o, w->bo);
    observe(c, il, MD_PROBE_ATTN_OUT, s->o, T, E);
    return 0;
}

/* The coordinator's FFN (a dense layer's, or the shared experts'): y = down(glu(gate x, up x)),
 * gate and up as one kernel call, with the family's GLU (the one its experts run). */
static void ffn(md_ctx *c, int il, const kn_expert *e, const float *X, int64_t T, float *Y,
                bool dense) {
    scratch *s = &c->s;
    const kn_mat *gu[2] = {&e->gate, &e->up};
    matmuls(c, 2, gu, X, T, (float *const[]){s->fg, s->fu}, (const float *const[]){NULL, NULL});
    kn_glu_apply(&c->m->cfg.glu, s->fg, s->fu, s->fg, T * e->gate.rows);
    if (dense) observe(c, il, MD_PROBE_FFN_SWIGLU, s->fg, T, e->gate.rows);
    matmul(c, &e->down, s->fg, T, Y, NULL);
}

static void route(md_ctx *c, int il, int64_t T) {
    const md_config *m = &c->m->cfg;
    const md_layer *w = &c->m->layers[il];
    scratch *s = &c->s;
    const int k = m->n_expert_used, X = m->n_expert;
    matmul(c, &w->router, s->xn, T, s->rlog, NULL);
    observe(c, il, MD_PROBE_ROUTER_LOGITS, s->rlog, T, X);
    if (w->router_b)
        for (int64_t t = 0; t < T; t++) md_add(s->rlog + t * X, w->router_b, X);
    const bool o = c->obs != NULL;
    md_route_out out = {
        .scores = s->rlog,
        .select = s->rsel,
        .ids = s->rids,
        .weights = s->rw,
        .biased = o ? s->rbiased : NULL,
        .groups = o ? s->rgroups : NULL,
        .selected = o ? s->rsel_w : NULL,
        .normed = o ? s->rnorm : NULL,
        .scratch = s->rscratch,
    };
    md_route_rows(&m->router, s->rlog, w->select_b, T, X, k, &out);
    if (c->sink.layer) c->sink.layer(c->sink.ud, il, T, k, s->rids, s->rw);
    unique_add(c, il, T, k, s->rids);
    if (!o) return;
    const md_router_policy *p = &m->router;
    observe(c, il, MD_PROBE_ROUTER_SCORES, s->rlog, T, X);
    if (w->select_b) observe(c, il, MD_PROBE_ROUTER_BIASED, s->rbiased, T, X);
    if (p->n_group > 1) {
        observe(c, il, MD_PROBE_GROUP_TOPK, s->rgroups, T, p->n_group_used);
        observe(c, il, MD_PROBE_ROUTER_MASKED, s->rsel, T, X);
    }
    observe(c, il, MD_PROBE_TOPK, s->rids, T, k);
    observe(c, il, MD_PROBE_WEIGHTS_SEL, s->rsel_w, T, k);
    if (p->norm) observe(c, il, MD_PROBE_WEIGHTS_NORM, s->rnorm, T, k);
    observe(c, il, MD_PROBE_WEIGHTS, s->rw, T, k);
}

/* A latent MoE's routed sum back to the model's width: RMS-normalized (ffn_routed_norm, when
 * present), then ffn_routed_up. */
static void latent_up(md_ctx *c, int il, int64_t T) {
    const md_layer *w = &c->m->layers[il];
    scratch *s = &c->s;
    const int64_t L = md_expert_width(&c->m->cfg);
    if (w->routed_norm) {
        norm_rows(s->lmoe, s->lmoe, NULL, T, L, L, c->m->cfg.norm_eps);
        observe(c, il, MD_PROBE_ROUTED_RMS, s->lmoe, T, L);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < L; i++) s->lmoe[t * L + i] *= w->routed_norm[i];
    }
    matmul(c, &w->routed_up, s->lmoe, T, s->moe, NULL);
}

/* The MoE step's first half: routing, the routed batch handed to the backend, the shared experts
 * run here meanwhile (their output is added to the routed sum unweighted, llama.cpp's order:
 * routed + shared). */
static int moe_start(md_ctx *c, int il, int64_t T, mw_err *err) {
    const md_config *m = &c->m->cfg;
    const md_layer *w = &c->m->layers[il];
    scratch *s = &c->s;
    route(c, il, T);
    /* a latent MoE's experts read the routed input projected down (the router and the shared
     * experts the full row) and return sums at that width */
    const bool latent = w->routed_down.data != NULL;
    if (latent) matmul(c, &w->routed_down, s->xn, T, s->lat, NULL);
    *c->mb = (md_moe_batch){
        .layer = il,
        .T = T,
        .width = md_expert_width(m),
        .x = latent ? s->lat : s->xn,
        .k = m->n_expert_used,
        .experts = s->rids,
        .weights = s->rw,
        .numerics = c->p.numerics,
    };
    md_expert_backend *be = c->p.experts;
    c->mt0 = mw_now_ns();
    if (md_expert_submit(be, c->mb, latent ? s->lmoe : s->moe, err))
        return mw_err_wrap(err, "layer %d experts (%s)", il, be->name);
    c->mb_on = true;
    c->mt1 = mw_now_ns();
    if (w->ffn.gate.data) ffn(c, il, &w->ffn, s->xn, T, s->fy, false);
    c->mt2 = mw_now_ns();
    return 0;
}

/* The second half: the routed sum, the shared experts' added, into the residual stream. */
static int moe_finish(md_ctx *c, int il, int64_t T, mw_err *err) {
    const md_config *m = &c->m->cfg;
    const md_layer *w = &c->m->layers[il];
    scratch *s = &c->s;
    const int64_t E = m->n_embd, L = md_expert_width(m);
    const bool latent = w->routed_down.data != NULL, shared = w->ffn.gate.data != NULL;
    float *routed = latent ? s->lmoe : s->moe;
    md_expert_backend *be = c->p.experts;
    c->mb_on = false;
    /* blocked from here (other micro-batches may have run since the shared experts) */
    const uint64_t tw = mw_now_ns();
    if (md_expert_wait(be, c->mb, routed, err))
        return mw_err_wrap(err, "layer %d experts (%s)", il, be->name);
    const uint64_t t3 = mw_now_ns();
    c->timing.layers++;
    c->timing.submit_ns += c->mt1 - c->mt0;
    c->timing.shared_ns += c->mt2 - c->mt1;
    c->timing.wait_ns += t3 - tw;
    if (be->submit) c->timing.exchange_ns += t3 - c->mt0;
    observe(c, il, MD_PROBE_MOE_OUT, routed, T, L);
    if (latent) latent_up(c, il, T);
    if (shared) {
        observe(c, il, MD_PROBE_SHEXP, s->fy, T, E);
        md_add(s->moe, s->fy, T * E);
        observe(c, il, MD_PROBE_FFN_OUT, s->moe, T, E);
    }
    md_add(s->x, s->moe, T * E);
    return 0;
}

/* The input of a block: the residual stream, or with attention residuals its mix with the banked
 * checkpoints (whose weights the observer sees as `p`). */
static const float *block_input(md_ctx *c, int il, const float *score, md_probe p, int64_t T) {
    md_attnres *ar = &c->ar;
    const float *in = md_attnres_mix(ar, score, c->s.x, T);
    if (in != c->s.x) observe(c, il, p, ar->probs, T, ar->n + 1);
    return in;
}

/* A layer up to its MoE step in flight (all of it for a dense layer). */
static int layer_head(md_ctx *c, int il, const md_row *rows, int64_t T, mw_err *err) {
    const md_config *m = &c->m->cfg;
    const md_layer *w = &c->m->layers[il];
    scratch *s = &c->s;
    const int64_t E = m->n_embd;

    const float *in = block_input(c, il, w->res_attn, MD_PROBE_RES_PROBS_ATTN, T);
    /* a checkpoint layer banks its raw input and restarts the block's running sum */
    const bool banked = md_attnres_banks(&c->ar, il);
    if (banked) md_attnres_bank(&c->ar, s->x, T);
    norm_rows(in, s->xn, w->attn_norm, T, E, E, m->norm_eps);
    observe(c, il, MD_PROBE_ATTN_NORM, s->xn, T, E);
    if (attention(c, il, rows, T, err)) return -1;
    if (banked)
        memcpy(s->x, s->o, (size_t)(T * E) * sizeof(float));
    else
        md_add(s->x, s->o, T * E);
    observe(c, il, MD_PROBE_FFN_INP, s->x, T, E);

    in = block_input(c, il, w->res_ffn, MD_PROBE_RES_PROBS_FFN, T);
    norm_rows(in, s->xn, w->ffn_norm, T, E, E, m->norm_eps);
    observe(c, il, MD_PROBE_FFN_NORM, s->xn, T, E);
    if (md_layer_is_moe(m, il)) return moe_start(c, il, T, err);
    ffn(c, il, &w->ffn, s->xn, T, s->fy, true);
    observe(c, il, MD_PROBE_FFN_OUT, s->fy, T, E);
    md_add(s->x, s->fy, T * E);
    observe(c, il, MD_PROBE_L_OUT, s->x, T, E);
    return 0;
}

/* The rest of a MoE layer, once its experts are back. */
static int layer_tail(md_ctx *c, int il, int64_t T, mw_err *err) {
    if (!c->mb_on) return 0;
    if (moe_finish(c, il, T, err)) return -1;
    observe(c, il, MD_PROBE_L_OUT, c->s.x, T, c->m->cfg.n_embd);
    return 0;
}

/* The pass's start for the active rows: scratch, the KV, KDA and attention-residual passes, the
 * embeddings and RoPE angles. */
static int pass_begin(md_ctx *c, const md_row *rows, int64_t T, mw_err *err) {
    const md_model *mod = c->m;
    const md_config *m = &mod->cfg;
    const int64_t E = m->n_embd;
    if (reserve_rows(c, T, err) || md_kv_begin(&c->kv, rows, T, err) ||
        md_kda_begin(&c->kda, &c->kv, kn_pool_size(c->p.pool), err) ||
        md_attnres_begin(&c->ar, T, err) ||
        md_attn_ws_reserve(&c->attn, m, rows, T, kn_pool_size(c->p.pool), err))
        return -1;
    scratch *s = &c->s;
    for (int64_t t = 0; t < T; t++) {
        kn_mat_row(&mod->tok_embd, rows[t].token, s->x + t * E);
        c->dense_bytes += mod->tok_embd.row_bytes;
        md_rope_angles(&m->rope, rows[t].pos, s->cs + t * m->rope.n_rot);
        if (c->rope_differs)
            md_rope_angles(&m->rope_swa, rows[t].pos, s->cs_swa + t * m->rope.n_rot);
    }
    return 0;
}

/* The final norm of the active rows that want logits (of the final mix, with attention
 * residuals), gathered, then the LM head once. */
static void pass_logits(md_ctx *c, const md_row *rows, int64_t T, int64_t n_out, float *logits) {
    const md_model *mod = c->m;
    const int64_t E = mod->cfg.n_embd;
    scratch *s = &c->s;
    const float *x = block_input(c, -1, mod->res_out, MD_PROBE_RES_PROBS_FFN, T);
    int64_t j = 0;
    for (int64_t t = 0; t < T; t++)
        if (rows[t].logits)
            md_rmsnorm(s->xn + j++ * E, x + t * E, mod->out_norm, E, mod->cfg.norm_eps);
    observe(c, -1, MD_PROBE_RESULT_NORM, s->xn, n_out, E);
    matmul(c, &mod->output, s->xn, n_out, logits, NULL);
}

/* ---- ping-pong micro-batches (md_lanes.h) --------------------------------------------------- */

#define SWAP(a, b)                                                                                 \
    do {                                                                                           \
        __typeof__(a) swap_ = (a);                                                                 \
        (a) = (b);                                                                                 \
        (b) = swap_;                                                                               \
    } while (0)

/* Makes lane l's state the context's (and the context's the lane's): the same call again undoes
 * it. The layer loop's code then runs on the lane unchanged. */
static void lane_swap(md_ctx *c, md_lane *l) {
    SWAP(c->s, l->s);
    SWAP(c->T_cap, l->T_cap);
    SWAP(c->obs_cap, l->obs_cap);
    SWAP(c->kv, l->kv);
    SWAP(c->kda, l->kda);
    SWAP(c->ar, l->ar);
    SWAP(c->attn, l->attn);
    SWAP(c->heads, l->heads);
    SWAP(c->mb, l->mb);
    SWAP(c->mb_on, l->mb_on);
    SWAP(c->mt0, l->mt0);
    SWAP(c->mt1, l->mt1);
    SWAP(c->mt2, l->mt2);
}

static void lane_act(md_ctx *c, int i) {
    if (i > 0) lane_swap(c, c->lanes[i]);
}

static void lane_free(md_ctx *c, md_lane *l) {
    if (!l) return;
    if (l != c->lanes[0]) {
        lane_swap(c, l);
        free_scratch(c);
        md_attn_ws_free(&c->attn);
        md_heads_ws_free(&c->heads);
        md_attnres_free(&c->ar);
        md_kda_lane_free(&c->kda);
        md_kv_lane_free(&c->kv);
        lane_swap(c, l);
    }
    free(l->rows);
    free(l->at);
    free(l->out_at);
    free(l);
}

/* Lane i, made the first time (its KV and KDA passes views of the context's), with room for
 * T rows. Called while lane 0 is the context's. */
static md_lane *lane_get(md_ctx *c, int i, int64_t T, mw_err *err) {
    md_lane *l = c->lanes[i];
    if (!l) {
        if (!(l = calloc(1, sizeof *l))) {
            mw_errf(err, "forward: out of memory for micro-batches");
            return NULL;
        }
        if (i > 0) {
            if (md_kv_lane_init(&l->kv, &c->kv, err)) {
                free(l);
                return NULL;
            }
            if (md_kda_lane_init(&l->kda, &c->kda, err)) {
                md_kv_lane_free(&l->kv);
                free(l);
                return NULL;
            }
            md_attnres_init(&l->ar, &c->m->cfg);
        }
        l->mb = &l->mb_store;
        c->lanes[i] = l;
    }
    if (T > l->cap) {
        md_row *r = realloc(l->rows, (size_t)T * sizeof *r);
        if (r) l->rows = r;
        int64_t *a = r ? realloc(l->at, (size_t)T * sizeof *a) : NULL;
        if (a) l->at = a;
        int64_t *o = a ? realloc(l->out_at, (size_t)T * sizeof *o) : NULL;
        if (o) l->out_at = o;
        if (!o) {
            mw_errf(err, "forward: out of memory for micro-batches");
            return NULL;
        }
        l->cap = T;
    }
    l->T = l->n_out = 0;
    return l;
}

/* How many lanes this step runs in. Observers and routing sinks see one batch per step, so they
 * keep it whole; a backend without separate submit and wait cannot overlap anything (auto
 * leaves it whole, a fixed count still splits: the same bits, no gain). */
static int lanes_for(md_ctx *c, int64_t T) {
    const int mode = c->p.micro_batches;
    if (mode == 1 || T < 2 || c->obs || c->sink.step || c->sink.layer) return 1;
    const md_expert_backend *be = c->p.experts;
    /* a backend that skips counts each row's skipped experts per call: a lane's rows are not the
     * step's, so a step is kept whole for its requests' counts to stay theirs */
    if (be->row_skipped) return 1;
    const bool halves = be->submit && be->wait;
    if (!halves && mode == 0) return 1;
    const int in_flight = !halves ? MD_LANES_MAX : be->in_flight > 0 ? be->in_flight : 1;
    return md_lanes_choose(&c->clock, mode, in_flight, T > INT32_MAX ? INT32_MAX : (int)T);
}

/* Cuts the step's rows into n lanes, each linked to the one before; -1 when memory runs out. */
static int lanes_split(md_ctx *c, const md_row *rows, int64_t T, int n, mw_err *err) {
    if (T > c->lane_rows_cap) {
        int32_t *a = realloc(c->lane_of, (size_t)T * sizeof *a);
        if (!a) return mw_errf(err, "forward: out of memory for micro-batches");
        c->lane_of = a;
        c->lane_rows_cap = T;
    }
    if (!c->seq_lane) {
        if (!(c->seq_lane = malloc((size_t)c->p.n_seq * sizeof *c->seq_lane)))
            return mw_errf(err, "forward: out of memory for micro-batches");
        for (int i = 0; i < c->p.n_seq; i++) c->seq_lane[i] = -1;
    }
    md_lanes_cut(rows, T, n, c->lane_of, c->seq_lane, c->seq_rows);
    md_lane *L[MD_LANES_MAX];
    for (int i = 0; i < n; i++)
        if (!(L[i] = lane_get(c, i, T, err))) return -1;
    /* lane 0's state is the context's (it is the running lane here) */
    for (int i = 1; i < n; i++) {
        md_kv_lane_link(&L[i]->kv, i > 1 ? &L[i - 1]->kv : &c->kv);
        md_kda_lane_link(&L[i]->kda, i > 1 ? &L[i - 1]->kda : &c->kda);
    }
    int64_t out = 0;
    for (int64_t t = 0; t < T; t++) {
        md_lane *l = L[c->lane_of[t]];
        if (rows[t].logits) l->out_at[l->n_out++] = out++;
        l->at[l->T] = t;
        l->rows[l->T++] = rows[t];
    }
    return 0;
}

/* After a failure: every lane's batch still at the backend is waited for (its result dropped), so
 * none is left in flight. */
static void lanes_drain(md_ctx *c, int n) {
    for (int i = 0; i < n; i++) {
        lane_act(c, i);
        if (c->mb_on) {
            mw_err ignored = {0};
            const bool latent = c->m->layers[c->mb->layer].routed_down.data != NULL;
            md_expert_wait(c->p.experts, c->mb, latent ? c->s.lmoe : c->s.moe, &ignored);
            c->mb_on = false;
        }
        lane_act(c, i);
    }
}

/* Each lane's logits, computed on its rows, into their places in the step's. */
static int lanes_logits(md_ctx *c, int n, float *logits, mw_err *err) {
    const int64_t V = c->m->cfg.n_vocab;
    int64_t most = 0;
    for (int i = 0; i < n; i++) most = c->lanes[i]->n_out > most ? c->lanes[i]->n_out : most;
    float *tmp = most ? malloc((size_t)(most * V) * sizeof *tmp) : NULL;
    if (most && !tmp) return mw_errf(err, "forward: out of memory for micro-batches' logits");
    for (int i = 0; i < n; i++) {
        md_lane *l = c->lanes[i];
        if (!l->n_out) continue;
        lane_act(c, i);
        pass_logits(c, l->rows, l->T, l->n_out, tmp);
        lane_act(c, i);
        for (int64_t j = 0; j < l->n_out; j++)
            memcpy(logits + l->out_at[j] * V, tmp + j * V, (size_t)V * sizeof *tmp);
    }
    free(tmp);
    return 0;
}

/* Runs every lane's step for one stage (the pass's start, a layer's head, a layer's tail then the
 * next layer's head), lane after lane: lane i's exchange is in flight while lanes i+1, ... compute.
 */
static int lanes_stage(md_ctx *c, int n, int il, mw_err *err) {
    const int L = c->m->cfg.n_layer;
    for (int i = 0; i < n; i++) {
        md_lane *l = c->lanes[i];
        lane_act(c, i);
        int rc = il < 0 ? pass_begin(c, l->rows, l->T, err) || layer_head(c, 0, l->rows, l->T, err)
                        : layer_tail(c, il, l->T, err) ||
                              (il + 1 < L && layer_head(c, il + 1, l->rows, l->T, err));
        lane_act(c, i);
        if (rc) return -1;
    }
    return 0;
}

static int forward_lanes(md_ctx *c, const md_row *rows, int64_t T, int n, int64_t n_out,
                         float *logits, mw_err *err) {
    if (lanes_split(c, rows, T, n, err)) return -1;
    for (int il = -1; il < c->m->cfg.n_layer; il++)
        if (lanes_stage(c, n, il, err)) {
            lanes_drain(c, n);
            return -1;
        }
    for (int i = 0; i < n; i++) {
        lane_act(c, i);
        md_kda_commit(&c->kda);
        md_kv_commit(&c->kv);
        lane_act(c, i);
    }
    c->lstats.split_steps++;
    c->lstats.lanes += (uint64_t)n;
    c->lstats.rows += (uint64_t)T;
    c->lstats.last_lanes = n;
    for (int i = 0; i < n; i++) c->lstats.last_rows[i] = c->lanes[i]->T;
    return n_out ? lanes_logits(c, n, logits, err) : 0;
}

/* After a failed split step: whether the backend says rows of the failed lane's batch needed
 * experts no live node serves. */
static bool lanes_lost_rows(const md_ctx *c, int n) {
    const md_expert_backend *be = c->p.experts;
    if (!be->row_lost) return false;
    int64_t most = 0;
    for (int i = 0; i < n; i++) most = c->lanes[i]->T > most ? c->lanes[i]->T : most;
    for (int64_t r = 0; r < most; r++)
        if (be->row_lost(be, r)) return true;
    return false;
}

md_lane_stats md_ctx_lane_stats(const md_ctx *c) {
    md_lane_stats st = c->lstats;
    st.trunk_us = c->clock.trunk_ns * 1e-3;
    st.rtt_us = c->clock.wait_ns * 1e-3;
    return st;
}

int md_forward(md_ctx *c, const md_row *rows, int64_t T, float *logits, mw_err *err) {
    const md_config *m = &c->m->cfg;
    int64_t n_out = 0;
    if (check_rows(c, rows, T, &n_out, err)) return -1;
    if (n_out && !logits) return mw_errf(err, "forward: logits requested but no output buffer");
    unique_reset(c);
    const int lanes = lanes_for(c, T);
    if (lanes > 1) {
        const uint64_t s0 = mw_now_ns(), sl0 = c->timing.layers;
        if (forward_lanes(c, rows, T, lanes, n_out, logits, err) == 0) {
            /* each lane finishes every MoE layer once */
            md_lanes_measure_split(&c->clock, mw_now_ns() - s0,
                                   (c->timing.layers - sl0) / (uint64_t)lanes);
            return 0;
        }
        if (!lanes_lost_rows(c, lanes)) return -1;
        /* the backend named rows of a lane's batch, which are not the step's: the step again,
         * whole, so that a failure names the step's own rows (experts with no live owner fail
         * at once, before anything is sent) */
    }
    const uint64_t t0 = mw_now_ns(), w0 = c->timing.wait_ns, l0 = c->timing.layers;
    if (pass_begin(c, rows, T, err)) return -1;
    if (c->sink.step) c->sink.step(c->sink.ud, rows, T);
    for (int il = 0; il < m->n_layer; il++)
        if (layer_head(c, il, rows, T, err) || layer_tail(c, il, T, err)) return -1;
    md_kda_commit(&c->kda);
    md_kv_commit(&c->kv);
    if (n_out) pass_logits(c, rows, T, n_out, logits);
    md_lanes_measure(&c->clock, mw_now_ns() - t0, c->timing.wait_ns - w0, c->timing.layers - l0);
    return 0;
}
