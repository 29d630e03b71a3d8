/* model/md_model.h — a loaded model (config + views of the dense weights) and the forward pass
 * over batches of (sequence, position, token) rows.
 *
 * md_model is immutable after load and may be shared. md_ctx holds what a forward pass mutates:
 * the sequences' KV caches, scratch buffers and counters. There is one layer loop: a prefill of a
 * whole prompt and a single-token decode step are the same call with different batches, and a
 * batch may mix sequences. */
#ifndef MD_MODEL_H
#define MD_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "model/md_config.h"
#include "model/md_moe.h"
#include "model/md_pin.h"
#include "util/mw_err.h"
#include "vindex/vx_source.h"

/* One layer's dense weights. Vectors (norms, biases, sinks) are f32 arrays the model owns,
 * converted at load from whatever type the source stores them in; NULL when the family has none.
 * Matrices are views of the source in their stored type. */
/* Per-head matrices of one tensor: head h is `m` with its data `stride` bytes further per head
 * (GGUF's 3-D attn_k_b / attn_v_b, or the rows of a legacy attn_kv_b). */
typedef struct md_heads {
    kn_mat m;
    size_t stride;
} md_heads;

static inline kn_mat md_head(const md_heads *h, int i) {
    kn_mat m = h->m;
    m.data = (const uint8_t *)m.data + (size_t)i * h->stride;
    return m;
}

typedef struct md_layer {
    const float *attn_norm;
    kn_mat wq, wk, wv, wo; /* MLA: wq is attn_q_b (or the lite attn_q); wk, wv unused */
    const float *bq, *bk, *bv, *bo;
    const float *q_norm, *k_norm; /* head_dim_k each */
    const float *sinks;           /* n_head */
    /* MLA (FORMATS.md §7) */
    kn_mat wq_a, wkv_a;    /* attn_q_a (q_lora × n_embd; absent when q_lora is 0), attn_kv_a_mqa */
    const float *q_a_norm; /* q_lora */
    const float *kv_a_norm; /* kv_lora */
    md_heads k_b;           /* head h: kv_lora × nope (q~ = K_h q_nope) */
    md_heads v_b;           /* head h: v × kv_lora */
    /* KDA (FORMATS.md §8): wq, wk, wv project before the convolution, wo is o_proj */
    const float
        *conv[3];      /* q, k, v taps, conv × D each, tap-major: tap j of channel c at j·D + c */
    kn_mat f_a, f_b;   /* decay: ssm_f_a (head_dim × E), ssm_f_b (D × head_dim) */
    const float *dt_b; /* ssm_dt.bias: D */
    const float *ssm_a; /* n_head: -exp(A_log) */
    kn_mat beta;        /* ssm_beta: n_head × E */
    kn_mat g_a, g_b; /* output gate ssm_g_b · ssm_g_a (head_dim × E, D × head_dim); a full-rank
                        ssm_g (D × E) is g_b with g_a absent */
    const float *o_norm; /* ssm_norm: head_dim */
    kn_mat wgate; /* attn_gate (n_head·v × E): a latent attention layer's sigmoid output gate */
    const float *res_attn, *res_ffn; /* attention residuals' score vectors (E), or NULL */
    kn_mat routed_down, routed_up;   /* latent MoE: ffn_routed_down (L × E), _up (E × L) */
    const float *routed_norm;        /* ffn_routed_norm (L), or NULL */
    const float *ffn_norm;
    /* the FFN run on the coordinator: a dense layer's FFN, or a MoE layer's shared experts
     * (gate.data == NULL when there is none) */
    kn_expert ffn;
    kn_mat router; /* n_expert × n_embd (MoE layers) */
    const float *router_b;
    const float *select_b; /* exp_probs_b.bias: selection-only bias, NULL when absent */
} md_layer;

typedef struct md_model {
    md_config cfg;
    kn_mat tok_embd; /* n_vocab × n_embd */
    const float *out_norm;
    kn_mat output;        /* n_vocab × n_embd (token_embd when the family ties them) */
    const float *res_out; /* output_res_score: the final mix's score vector, or NULL */
    md_layer *layers;
    const vx_source *src;
    float **vecs; /* the f32 vectors above, owned */
    size_t n_vecs, cap_vecs;
    md_pin pin;    /* md_model_pin_dense's copy of the streamed matrices (empty: views of src) */
    md_pin packed; /* and the kernels' packed copies of them for batches (md_pin_pack) */
} md_model;

/* Reads the config from src's metadata and checks every dense tensor the family expects for
 * presence, shape and type; every dense tensor of src must be one of them (experts are the
 * backend's). src must outlive the model. */
int md_model_load(const vx_source *src, md_model **out, mw_err *err);
void md_model_free(md_model *m);

/* Copies the matrices every decode step streams (attention, router, LM head; not the embedding) out
 * of the source's mapping into a buffer the model owns, on transparent huge pages where the kernel
 * grants them (md_pin.h), and points the views there; a matrix whose packed copy the kernels read
 * at every T (kn_pack_replaces) gets that copy instead, unless
 * MOEWIRE_PACK=0 (a head set read per head, DeepSeek's k_b and v_b, always a plain copy), and one
 * read from a packed copy by batches only would get it beside the plain one. Costs about their
 * size in memory (md_model_pinned_bytes); the bits computed are the same. Call before contexts are
 * created. */
int md_model_pin_dense(md_model *m, mw_err *err);
size_t md_model_pinned_bytes(const md_model *m);

/* ---- forward pass --------------------------------------------------------------------------- */

/* Named points of the layer loop an observer can watch (llama.cpp's names in the comments). */
typedef enum md_probe {
    MD_PROBE_ATTN_NORM = 0, /* attn_norm: T × n_embd */
    /* MLA */
    MD_PROBE_Q_A,        /* q (attn_q_a · attn_norm): T × q_lora */
    MD_PROBE_Q_A_NORM,   /* q (after attn_q_a_norm) */
    MD_PROBE_Q,          /* q (attn_q_b or attn_q): T × n_head·(nope + rope) */
    MD_PROBE_Q_PE,       /* q_pe after RoPE: T × n_head·rope */
    MD_PROBE_Q_ABSORBED, /* q_nope_absorbed (K_h q_nope): T × n_head·kv_lora (llama.cpp: [head][T])
                          */
    MD_PROBE_KV_CMPR_PE, /* kv_cmpr_pe (attn_kv_a_mqa · attn_norm): T × (kv_lora + rope) */
    MD_PROBE_KV_CMPR,    /* kv_cmpr: the latent after attn_kv_a_norm, T × kv_lora */
    MD_PROBE_K_PE,       /* k_pe after RoPE: T × rope */
    MD_PROBE_KQV,        /* kqv: attended latent per head, T × n_head·kv_lora ([head][T]) */
    MD_PROBE_KQV_MLA,    /* kqv_mla: V_h of it, T × n_head·v ([head][T]) */
    /* attention, any kind */
    MD_PROBE_Q_NORMED,      /* Qcur_normed: T × n_head·dk (QK-norm families, before RoPE) */
    MD_PROBE_K_NORMED,      /* Kcur_normed */
    MD_PROBE_Q_ROPE,        /* Qcur after RoPE: T × n_head·dk */
    MD_PROBE_K_ROPE,        /* Kcur after RoPE: T × n_head_kv·dk */
    MD_PROBE_V,             /* Vcur (bias included): T × n_head_kv·dv */
    MD_PROBE_KQV_OUT,       /* kqv_out: heads concatenated, T × n_head·dv */
    MD_PROBE_ATTN_OUT,      /* attn_out: after the output projection (and bias) */
    MD_PROBE_FFN_INP,       /* ffn_inp: residual after attention */
    MD_PROBE_FFN_NORM,      /* attn_post_norm / ffn_norm: the FFN / MoE input */
    MD_PROBE_FFN_SWIGLU,    /* ffn_swiglu: a dense layer's silu(gate) · up, T × n_ff */
    MD_PROBE_ROUTER_LOGITS, /* ffn_moe_logits: W_r x, T × n_expert (before any bias) */
    MD_PROBE_ROUTER_SCORES, /* ffn_moe_probs: the gated scores (softmax / sigmoid / biased logits)
                             */
    MD_PROBE_ROUTER_BIASED, /* ffn_moe_probs_biased: scores + exp_probs_b (selection bias only) */
    MD_PROBE_GROUP_TOPK,    /* ffn_moe_group_topk: int32 T × n_group_used */
    MD_PROBE_ROUTER_MASKED, /* ffn_moe_probs_masked: selection scores, other groups -inf */
    MD_PROBE_TOPK,          /* ffn_moe_topk: int32 T × k */
    MD_PROBE_WEIGHTS_SEL,   /* ffn_moe_weights: the selected unbiased scores, T × k */
    MD_PROBE_WEIGHTS_NORM,  /* ffn_moe_weights_norm (families that normalize) */
    MD_PROBE_WEIGHTS,       /* the routing weights (ffn_moe_weights_softmax / _scaled): T × k */
    MD_PROBE_MOE_OUT,       /* ffn_moe_out: the routed experts' sum, T × n_embd */
    MD_PROBE_SHEXP,         /* ffn_shexp: the shared experts' output */
    MD_PROBE_FFN_OUT,       /* ffn_out: dense FFN output, or routed + shared */
    MD_PROBE_L_OUT,         /* l_out: residual after the layer */
    MD_PROBE_RESULT_NORM,   /* result_norm (layer -1): rows that asked for logits */
    /* KDA (T × D unless stated; MD_PROBE_ATTN_OUT is the block's output) */
    MD_PROBE_KDA_F,        /* g1 f_b(f_a(cur)): the decay's projection, before the dt bias */
    MD_PROBE_KDA_G,        /* kda_g1: the log decay g per key channel */
    MD_PROBE_KDA_BETA_RAW, /* ssm_beta · attn_norm, before the sigmoid: T × n_head */
    MD_PROBE_KDA_BETA,     /* beta: T × n_head */
    MD_PROBE_KDA_Q_CONV,   /* kda_q_conv: q after the convolution and SiLU */
    MD_PROBE_KDA_K_CONV,   /* kda_k_conv */
    MD_PROBE_KDA_V_CONV,   /* kda_v_conv: also the delta rule's v */
    MD_PROBE_KDA_Q,        /* q after the L2 norm: what the delta rule reads */
    MD_PROBE_KDA_K,        /* k after the L2 norm */
    MD_PROBE_KDA_SCAN,     /* the delta rule's read-out, divided by sqrt(head_dim) */
    MD_PROBE_KDA_G2,       /* the output gate before its sigmoid */
    MD_PROBE_KDA_NORMED,   /* kda_normed: the read-out's per-head RMSNorm · ssm_norm */
    /* Kimi K3 */
    MD_PROBE_RES_PROBS_ATTN, /* res_probs: the attention-input mix's weights, T × (banked + 1) */
    MD_PROBE_RES_PROBS_FFN,  /* res_probs: the FFN-input mix's (layer -1: the final mix's) */
    MD_PROBE_MLA_GATED,      /* mla_gated: kqv_out · sigmoid(attn_gate · attn_norm) */
    MD_PROBE_ROUTED_RMS,     /* norm: the routed sum's RMS normalization, before its weight */
    MD_PROBE_COUNT
} md_probe;

const char *md_probe_name(md_probe p);

/* Called synchronously with row-major data (int32 for MD_PROBE_TOPK and MD_PROBE_GROUP_TOPK,
 * float otherwise). */
typedef void (*md_observer_fn)(void *ud, int layer, md_probe p, const void *data, int64_t rows,
                               int64_t cols);

typedef struct md_ctx md_ctx;

/* Micro-batches a step runs in at most (model/md_lanes.h). */
#define MD_LANES_MAX 4

typedef struct md_ctx_params {
    kn_numerics numerics;       /* for every matmul and the experts */
    kn_pool *pool;              /* NULL = this thread only; must outlive the context */
    md_expert_backend *experts; /* not owned */
    int n_seq;                  /* sequence ids 0 .. n_seq-1 (0 means 1) */
    int64_t n_ctx;              /* positions per sequence (0 = the model's context_length) */
    bool swa_full; /* sliding-window layers keep every position, as full layers do; by default they
                      keep a ring of the window (results are the same bits either way) */
    kn_type kv_type; /* the KV cache's rows: KN_F32 (0, the default), KN_F16 or KN_BF16 */
    /* Ping-pong micro-batches (model/md_lanes.h): a batch of several sequences is split by
     * sequence into this many micro-batches whose expert exchanges overlap each other's trunk
     * work. 0 = auto (from measured trunk and round-trip times), 1 = never, 2 .. MD_LANES_MAX. */
    int micro_batches;
} md_ctx_params;

int md_ctx_new(const md_model *m, const md_ctx_params *p, md_ctx **out, mw_err *err);
void md_ctx_free(md_ctx *c);
void md_ctx_set_observer(md_ctx *c, md_observer_fn fn, void *ud);

/* Positions held by a sequence (the next row of it must have this position). */
int64_t md_seq_len(const md_ctx *c, int seq);
/* Drops a sequence's positions >= n (n = 0 empties it); its KV memory is kept for reuse. The
 * rings of sliding-window layers hold only the window, so they can step back only as far as that
 * still covers the next query (one position); a model with KDA layers keeps one recurrent state,
 * so it can only start over (n = 0); otherwise -1 with err and nothing changes. */
int md_seq_truncate(md_ctx *c, int seq, int64_t n, mw_err *err);

/* Copies of a sequence's state, for a prefix cache and for forks (n choices of one prompt). What
 * a sequence of n positions holds is rows per position on its full-attention layers
 * (md_seq_pos_bytes each, read and written by ranges) and, on models with sliding-window or KDA
 * layers, a part whatever its length (md_seq_snap_bytes: the window and the recurrent state, read
 * as they stand at the sequence's length). Restored, a sequence goes on with the same bits as the
 * one the copies came from: the cache keeps rows rounded to its type and every batch split gives
 * the same values. */
uint64_t md_seq_pos_bytes(const md_ctx *c);
uint64_t md_seq_snap_bytes(const md_ctx *c); /* 0: the rows alone rebuild any length */
int md_seq_read_rows(const md_ctx *c, int seq, int64_t pos, int64_t n, void *dst, mw_err *err);
int md_seq_write_rows(md_ctx *c, int seq, int64_t pos, int64_t n, const void *src, mw_err *err);
int md_seq_read_snap(const md_ctx *c, int seq, void *dst, mw_err *err);
/* Makes seq n positions long: its rows [0, n) written before, snap what md_seq_read_snap gave at
 * length n (NULL when md_seq_snap_bytes is 0). */
int md_seq_restore(md_ctx *c, int seq, int64_t n, const void *snap, mw_err *err);
/* dst becomes a copy of src. */
int md_seq_copy(md_ctx *c, int dst, int src, mw_err *err);

/* One row of a batch. Rows of one sequence must be in position order and continue it. */
typedef struct md_row {
    int32_t seq;
    int32_t pos;
    int32_t token;
    int32_t logits; /* non-zero: produce this row's logits */
} md_row;

/* Hears every routing decision of the layer loop (a routing trace, statistics): step once per
 * md_forward with its rows, before the first layer; layer once per MoE layer after routing, with
 * the T × k selected experts (best first) and their gate weights. Both run on the forward pass's
 * thread and must be quick (copy, never wait); the arrays are valid only during the call. The same
 * calls are made whichever expert backend the context has. */
typedef struct md_route_sink {
    void (*step)(void *ud, const md_row *rows, int64_t T);
    void (*layer)(void *ud, int layer, int64_t T, int k, const int32_t *ids, const float *weights);
    void *ud;
} md_route_sink;

/* Attaches a sink (copied; NULL detaches). */
void md_ctx_set_route_sink(md_ctx *c, const md_route_sink *sink);

/* Counting, for each md_forward, the distinct experts its rows chose per layer (a server's
 * figure): unlike an observer or a sink it leaves the step free to run as micro-batches (their
 * choices are counted together). md_ctx_count_unique turns it on (-1 when out of memory);
 * md_ctx_unique_experts gives n_layer counts of the last md_forward (0 for a dense layer), or NULL
 * while it is off. */
int md_ctx_count_unique(md_ctx *c, mw_err *err);
const int32_t *md_ctx_unique_experts(const md_ctx *c);

/* Runs T rows through the model. logits receives one n_vocab row per row with .logits set, in
 * batch order (may be NULL when none is asked for). Invalid rows (sequence, position, token out of
 * range) are an error before anything is computed. */
int md_forward(md_ctx *c, const md_row *rows, int64_t T, float *logits, mw_err *err);

/* Dense weight bytes (as stored) read by md_forward so far: every dense matrix once per call, the
 * LM head once per call that asks for logits, embedding rows per token. */
uint64_t md_ctx_dense_bytes(const md_ctx *c);

/* Bytes the KV cache holds now (caches of every sequence, staging, KDA layers' recurrent states).
 */
uint64_t md_ctx_kv_bytes(const md_ctx *c);

/* What one sequence of n_ctx positions costs in a cache of `type` (md_kv_type_from_name): bytes per
 * position on full-attention layers and on sliding-window layers (which keep at most the window),
 * and a fixed part (the KDA layers' recurrent state, f32 whatever the cache's type, whatever the
 * length). */
typedef struct md_seq_cost {
    uint64_t per_pos_full, per_pos_ring, fixed;
    int64_t ring; /* positions a sliding-window layer keeps (0: none) */
} md_seq_cost;

md_seq_cost md_seq_cost_of(const md_config *c, int64_t n_ctx, kn_type type);

/* A KDA layer's delta-rule state of a sequence now, as the token-by-token recurrence would hold it:
 * S[h][i][j] (key index i, value index j), n_head × head_dim × head_dim floats. */
int md_ctx_kda_state(const md_ctx *c, int seq, int layer, float *S, mw_err *err);

/* Where the MoE layers' time went, summed over them since the context was made (or reset): handing
 * the routed batch to the backend (md_expert_submit; an in-process backend computes it there),
 * the shared experts meanwhile, then waiting for the routed experts (md_expert_wait). With a
 * remote backend a layer's MoE step takes about max(shared, exchange), not their sum. */
typedef struct md_moe_timing {
    uint64_t layers; /* MoE layer passes */
    uint64_t submit_ns, shared_ns, wait_ns;
    /* with a backend in two halves: from each submit to its results in hand (the wait's end).
     * While the caller is blocked the results are not back yet, so a layer's exchange is its
     * round trip or, when the reply waited for the caller, longer with none of it blocked: the
     * share of the round trips hidden behind other work is 1 - wait_ns / exchange_ns. */
    uint64_t exchange_ns;
} md_moe_timing;

md_moe_timing md_ctx_moe_timing(const md_ctx *c);
/* Ping-pong micro-batches so far: steps run split, the micro-batches they ran in all and the rows
 * of those; the last split step's micro-batches (last_lanes, 0 before any) and their rows. */
typedef struct md_lane_stats {
    uint64_t split_steps, lanes, rows;
    int last_lanes;
    int64_t last_rows[MD_LANES_MAX];
    double trunk_us, rtt_us; /* the auto choice's measured per-layer trunk and round trip */
} md_lane_stats;
md_lane_stats md_ctx_lane_stats(const md_ctx *c);
void md_ctx_reset_moe_timing(md_ctx *c);

#endif
