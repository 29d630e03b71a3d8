/* model/md_config.h — a model's hyperparameters and declared policies, read from its metadata.
 *
 * A family (one row per GGUF architecture in model/md_family.c) declares which policies the
 * architecture has (biases, QK-norm, sinks, sliding window rule, router, GLU); md_config_read fills
 * an md_config from the family row and the metadata keys. Keys the architecture needs are
 * required, values the family does not know are errors naming the key, and the few defaults are
 * the family's declared constants (the ones llama.cpp itself uses for that architecture). */
#ifndef MD_CONFIG_H
#define MD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "util/mw_err.h"
#include "vindex/vx_meta.h"

#define MD_ROPE_MAX_PAIRS 256 /* head dims up to 512 */
#define MD_ARCH_MAX       64

/* Which dimensions RoPE rotates together: NEOX pairs i with i + n_rot/2, NORM pairs 2i and 2i+1;
 * NONE rotates nothing (the Kimi line's latent attention: its q_pe / k_pe parts keep their width
 * but carry no position). */
typedef enum md_rope_layout { MD_ROPE_NEOX = 0, MD_ROPE_NORM = 1, MD_ROPE_NONE = 2 } md_rope_layout;

typedef enum md_rope_scaling {
    MD_ROPE_SCALING_NONE = 0,
    MD_ROPE_SCALING_LINEAR = 1, /* positions divided by the factor */
    MD_ROPE_SCALING_YARN = 2,   /* ramp between interpolated and extrapolated angles, magnitude */
    MD_ROPE_SCALING_LLAMA3 = 3, /* per-frequency factors in three wavelength bands */
    MD_ROPE_SCALING_COUNT
} md_rope_scaling;

/* Everything RoPE needs for one kind of layer; the derived values are filled by md_rope_init. */
typedef struct md_rope {
    md_rope_layout layout;
    int n_rot; /* rotated dimensions (even, <= head dim); the rest pass through */
    float freq_base;
    md_rope_scaling scaling;
    float factor;    /* scaling factor; 1 when none */
    int n_ctx_orig;  /* YaRN / llama3: the original training context */
    float beta_fast; /* YaRN correction range */
    float beta_slow;
    bool yarn_fractional; /* YaRN: keep the correction range as computed (Hugging Face with
                             rope_scaling.truncate = false); false = floor/ceil, llama.cpp's rule */
    float attn_factor;    /* extra cos/sin magnitude (rope.scaling.attn_factor), 1 when absent */
    /* YaRN: mscale_all_dim (deepseek2's rope.scaling.yarn_log_multiplier / 0.1), 0 when absent.
     * Non-zero, the cos/sin magnitude is mscale(f, mscale) / mscale(f, mscale_all_dim) (exactly 1,
     * since the rope's mscale equals mscale_all_dim) and the attention scale carries the factor. */
    float yarn_log_mul;
    float low_freq_factor, high_freq_factor; /* llama3 bands */
    /* derived */
    float theta_scale; /* powf(freq_base, -2/n_rot) */
    float freq_scale;  /* 1 / factor */
    float ext_factor;  /* 1 for YaRN, else 0 */
    float corr_dims[2];
    float mscale; /* cos/sin magnitude */
    bool has_freq_factors;
    float freq_factors[MD_ROPE_MAX_PAIRS]; /* angle divisors per pair (llama3) */
} md_rope;

/* How the router turns logits into (expert, weight) selections. */
typedef enum md_gate {
    MD_GATE_SOFTMAX = 0,          /* scores = softmax over all experts; weights = selected scores */
    MD_GATE_SIGMOID = 1,          /* scores = sigmoid(logit); weights = selected scores */
    MD_GATE_SOFTMAX_SELECTED = 2, /* scores = logits; weights = softmax over the selected k */
    MD_GATE_COUNT
} md_gate;

typedef struct md_router_policy {
    md_gate gate;
    bool logit_bias;  /* ffn_gate_inp.bias is added to the logits (gpt-oss) */
    bool select_bias; /* a selection-only bias (exp_probs_b.bias) decides the top-k (deepseek2) */
    bool norm;        /* weights divided by their sum, the sum clamped below at 6.103515625e-5 */
    float scale;      /* weights multiplied by this unless it is 0 or 1 */
    /* Group-limited selection (deepseek2): experts form n_group consecutive groups; a group's score
     * is the sum of its two largest selection scores, and only the n_group_used best groups may
     * be selected from. n_group <= 1: no grouping. */
    int n_group, n_group_used;
} md_router_policy;

/* How a layer attends. */
typedef enum md_attn_kind {
    MD_ATTN_GQA = 0, /* q, k, v projections, K and V cached per KV head */
    MD_ATTN_MLA =
        1, /* multi-head latent attention (deepseek2): one cached latent row per position */
} md_attn_kind;

/* Multi-head latent attention's widths (FORMATS.md §7). The layer loop runs it absorbed: per head
 * the query [K_h q_nope, rope(q_pe)] attends over cached rows [latent c, rope(k_pe)] with the
 * latent as the value, and V_h maps the attended latent to the head's output. So attention sees
 * one KV head (n_head_kv = 1) of head_dim_k = kv_lora + rope and head_dim_v = kv_lora. */
typedef struct md_mla {
    int q_lora;  /* rank of the query down-projection; 0 = one attn_q projection */
    int kv_lora; /* width of the compressed KV latent */
    int nope;    /* per head: qk_nope_head_dim */
    int rope;    /* per head: qk_rope_head_dim (= rope.dimension_count) */
    int v;       /* per head: v_head_dim */
    bool legacy; /* the file stores attn_kv_b (decompression) rather than attn_k_b / attn_v_b */
} md_mla;

/* Kimi Delta Attention (FORMATS.md §8, §9): a gated delta-rule linear attention whose state per
 * head is a head_dim × head_dim matrix, fed through a short causal convolution of q, k and v. */
typedef struct md_kda {
    int n_head;       /* heads (attention.head_count, shared with the latent attention's queries) */
    int head_dim;     /* kda.head_dim: key and value width of a head */
    int conv;         /* ssm.conv_kernel: taps of the causal convolution (the last conv - 1
                         inputs of a sequence are state) */
    bool lower_bound; /* kda.gate_lower_bound present: decay = lb · sigmoid(exp(A_log) · f), else
                         -exp(A_log) · softplus(f) */
    float gate_lb;    /* that bound (< 0) */
    bool gate_full;   /* the output gate is one ssm_g (E → D), not ssm_g_b · ssm_g_a */
} md_kda;

typedef struct md_family md_family;

typedef struct md_config {
    const md_family *family;
    char arch[MD_ARCH_MAX];
    int n_layer;
    int64_t n_embd;
    int64_t n_vocab; /* from the embedding tensor (md_model fills it) */
    int64_t n_ctx_train;
    float norm_eps;
    /* attention */
    md_attn_kind attn;
    md_mla mla;            /* MD_ATTN_MLA only */
    int n_head, n_head_kv; /* as attention sees them (MLA: 1 KV head, the latent) */
    int head_dim_k, head_dim_v;
    float kq_scale;
    bool qkv_bias, o_bias, qk_norm, sinks;
    int n_swa;          /* sliding window (keys p - t < n_swa are visible); 0 = none */
    uint8_t *layer_swa; /* n_layer flags: 1 = sliding-window layer */
    md_rope rope;       /* full-attention layers */
    md_rope rope_swa;   /* sliding-window layers */
    /* hybrid stacks (kimi-linear): per layer 1 = a KDA (recurrent) layer, 0 = the family's
     * attention kind; NULL when the family has no recurrent layers */
    uint8_t *layer_kda;
    int n_kda; /* layers flagged in layer_kda */
    md_kda kda;
    /* attention residuals (kimi-k3, md_attnres.h): attn_res.block_size; 0 = a plain residual
     * stream */
    int attn_res_block;
    /* FFN: layers 0 .. n_dense_lead - 1 run a dense FFN of width n_ff on the coordinator; the
     * others are MoE layers, each with n_shared shared experts (one FFN of width n_ff_shared, on
     * the coordinator, added to the routed sum unweighted) */
    int n_dense_lead;
    int64_t n_ff;
    int n_shared;
    int64_t n_ff_shared;
    /* MoE */
    int n_expert, n_expert_used;
    int64_t n_ff_exp;
    md_router_policy router;
    kn_glu glu;
    bool expert_bias;
    /* A latent MoE's expert width (kimi-k3's expert_latent_length): the routed experts take and
     * return rows of this many values, the trunk projecting down to it and back up. 0 = no
     * latent: they run at n_embd. Read md_expert_width, never this field. */
    int64_t n_expert_latent;
} md_config;

/* Whether layer il is a KDA (recurrent) layer rather than an attention layer. */
static inline bool md_layer_is_kda(const md_config *c, int il) {
    return c->layer_kda && c->layer_kda[il];
}

/* Whether layer il routes to experts (false: a leading dense layer). */
static inline bool md_layer_is_moe(const md_config *c, int il) {
    return il >= c->n_dense_lead;
}

/* The width of the routed experts' rows, in and out (the expert bank's width): the latent width
 * of a latent MoE, else the model's. The expert table, the backends, the wire and the nodes all
 * size rows by it. */
static inline int64_t md_expert_width(const md_config *c) {
    return c->n_expert_latent > 0 ? c->n_expert_latent : c->n_embd;
}

/* Reads the config of the model whose metadata is m. Unknown architectures, missing required keys
 * and unknown values are errors naming the key. Free with md_config_free. */
int md_config_read(const vx_meta *m, md_config *cfg, mw_err *err);
void md_config_free(md_config *cfg);

/* Fills the derived fields of r (angles, correction dims, magnitude, llama3 factors) from the
 * declared ones; -1 with err on values RoPE cannot use. */
int md_rope_init(md_rope *r, mw_err *err);

const char *md_rope_scaling_name(md_rope_scaling s);
const char *md_gate_name(md_gate g);

#endif
