/* model/md_family.h — the model's family table: one row per family of vindex/vx_family.h (whose
 * row holds the family's name and the facts the vindex reads too), declaring the policies the
 * model layer runs it with as data (in the style of ggml's type traits). md_config_read starts
 * from the row and reads the hyperparameters from the metadata. Adding an architecture is adding
 * a row here and in vx_family.c (plus any policy the row needs that no other family has yet). */
#ifndef MD_FAMILY_H
#define MD_FAMILY_H

#include <stdbool.h>

#include "model/md_config.h"
#include "vindex/vx_family.h"

/* Where the latent attention's query rank comes from. */
typedef enum md_q_lora_rule {
    MD_Q_LORA_REQUIRED = 0, /* attention.q_lora_rank required, except llama.cpp's "lite" models */
    MD_Q_LORA_NONE = 1,     /* one attn_q; the key is not read (must be absent or 0) */
    MD_Q_LORA_OPTIONAL = 2, /* the key may be absent (0: one attn_q) */
} md_q_lora_rule;

struct md_family {
    const vx_family *family; /* the name, sliding window and YaRN log multiplier */
    /* attention */
    md_attn_kind attn;     /* MLA: reads the kv_lora_rank / q_lora_rank / *_length_mla keys */
    md_q_lora_rule q_lora; /* MLA's query down-projection */
    /* hybrid stack: attention.head_count_kv per layer, 0 marking a KDA layer (kda.head_dim and
     * ssm.conv_kernel then required) */
    bool kda;
    bool kda_gate_full;    /* the KDA output gate is one full-rank ssm_g */
    bool kda_lower_bound;  /* kda.gate_lower_bound may be present (the bounded decay then) */
    bool attn_gate;        /* latent attention layers may carry attn_gate, a sigmoid gate on the
                              heads' output before attn_output */
    bool attn_res;         /* attn_res.block_size (required): attention residuals (md_attnres.h) */
    bool latent_moe;       /* expert_latent_length (optional): routed experts at a latent width,
                              ffn_routed_down / ffn_routed_norm / ffn_routed_up around them */
    bool qkv_bias, o_bias; /* attn_{q,k,v}.bias / attn_output.bias tensors */
    bool qk_norm;          /* per-head RMSNorm of q and k (attn_q_norm / attn_k_norm) */
    bool sinks;            /* attn_sinks: one logit per query head in the softmax denominator */
    md_rope_layout rope_layout;
    /* YaRN: whether the correction range is rounded to whole dimensions when the metadata has no
     * rope.scaling.yarn_truncate (llama.cpp always rounds; HF's truncate defaults to true) */
    bool yarn_truncate;
    /* per-layer tensor names that differ between families */
    const char *ffn_norm; /* norm before the MoE block */
    bool output_optional; /* output.weight may be absent: token_embd is the LM head */
    /* FFN layout: leading_dense_block_count dense layers (width feed_forward_length) and
     * expert_shared_count shared experts per MoE layer; false = every layer is MoE, none shared */
    bool dense_and_shared;
    bool shared_optional; /* the shared experts' tensors may be absent (none then) */
    /* MoE */
    bool ff_exp_from_ff; /* expert_feed_forward_length may be absent: ff / expert_used_count */
    /* The router: a fixed policy whose restating keys must agree, or (router_from_keys) one read
     * from expert_gating_func, expert_weights_norm / _scale and expert_group_count / _used_count
     * with llama.cpp's defaults; router.select_bias then means exp_probs_b.bias may be present. */
    bool router_from_keys;
    bool gating_required;      /* router_from_keys: expert_gating_func has no default */
    bool norm_fixed;           /* router_from_keys: router.norm is the family's whatever
                                  expert_weights_norm says (the key must then agree) */
    bool select_bias_required; /* exp_probs_b.bias must be present in every MoE layer */
    md_router_policy router;
    kn_glu_kind glu;
    float glu_alpha; /* SWIGLU_OAI constants; the limit may be set by {arch}.swiglu_clamp_exp */
    float glu_limit;
    bool expert_bias; /* ffn_{gate,up,down}_exps.bias */
};

/* The row for arch, or NULL. */
const md_family *md_family_find(const char *arch);
/* The row of a family, or NULL (tests/unit/test_vx_family.c holds every family to have one, so
 * vx_family_names() lists the architectures known here). */
const md_family *md_family_of(const vx_family *f);

#endif
