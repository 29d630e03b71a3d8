/* vindex/vx_hf_internal.h — what the Hugging Face reader's files share: the family table (config
 * keys and tensor rules), the hyperparameters the tensor rules check shapes against, and the
 * relayout read callbacks. */
#ifndef VX_HF_INTERNAL_H
#define VX_HF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "util/mw_err.h"
#include "vindex/vx_family.h"
#include "vindex/vx_input.h"
#include "vindex/vx_meta.h"
#include "vindex/vx_safetensors.h"

/* Hyperparameters the tensor rules need (filled from config.json). */
enum {
    VX__HP_LAYERS,
    VX__HP_CTX,
    VX__HP_EMBD,
    VX__HP_VOCAB,
    VX__HP_HEADS,
    VX__HP_KV_HEADS,
    VX__HP_HEAD_DIM,
    VX__HP_EXPERTS,
    VX__HP_EXPERTS_USED,
    VX__HP_FF_EXP,
    VX__HP_SWA,
    /* latent attention and the deepseek2 FFN layout */
    VX__HP_Q_LORA, /* 0 = one q_proj */
    VX__HP_KV_LORA,
    VX__HP_NOPE,       /* qk_nope_head_dim */
    VX__HP_ROPE_DIM,   /* qk_rope_head_dim */
    VX__HP_V_DIM,      /* v_head_dim */
    VX__HP_FF,         /* the dense layers' intermediate_size */
    VX__HP_DENSE_LEAD, /* first_k_dense_replace */
    VX__HP_SHARED,     /* n_shared_experts */
    VX__HP_NEXTN,      /* num_nextn_predict_layers: extra layers stored after the last, unused */
    /* the Kimi line's KDA layers */
    VX__HP_KDA_HEAD, /* linear_attn_config.head_dim */
    VX__HP_CONV,     /* linear_attn_config.short_conv_kernel_size */
    VX__HP_LATENT,   /* routed_expert_hidden_size: the width routed experts run at (0: hidden) */
    VX__HP_COUNT,
    VX__HP_NONE = -1
};

typedef struct vx__hf_hparams {
    int64_t v[VX__HP_COUNT]; /* 0 = unset */
    bool tied;               /* tie_word_embeddings: the LM head is token_embd */
    int64_t fp8_block[2];    /* quant_method fp8: rows × columns one weight_scale_inv covers */
    /* quant_method compressed-tensors, format mxfp4-pack-quantized: weights stored as
     * weight_packed (two e2m1 codes a byte) and weight_scale (one E8M0 per 32) */
    bool ct_mxfp4;
    /* Hybrid stacks (the Kimi line): per layer 1 = latent attention, 0 = KDA (linear attention
     * with a recurrent state); NULL for the families with one kind of layer. Freed with them. */
    uint8_t *mla;
} vx__hf_hparams;

/* ---- config keys -------------------------------------------------------------------------- */

typedef enum vx__hk_kind {
    VX__HK_U32,    /* a positive integer, written as a u32 key */
    VX__HK_F32,    /* a positive finite number, written as an f32 key */
    VX__HK_EXPECT, /* must equal `arg` (JSON text) when present */
    VX__HK_IGNORE, /* does not affect inference; `arg` says why */
    VX__HK_CODE,   /* read by the shared config code (rope, layer types, quantization, ...) */
} vx__hk_kind;

/* Missing is an error (for a slot: unless another row fills the slot). */
#define VX__HK_REQUIRED 1u

typedef struct vx__hf_key {
    const char *hf; /* config.json key */
    vx__hk_kind kind;
    const char *gguf; /* U32/F32: key after "<arch>."; NULL when only read */
    int slot;         /* VX__HP_* filled by a U32 row, or VX__HP_NONE */
    unsigned flags;
    const char *arg; /* EXPECT: the value as JSON; U32/F32: the HF class default (JSON) or NULL;
                        IGNORE: the reason */
} vx__hf_key;

/* ---- tensor rules ------------------------------------------------------------------------- */

/* Shape symbols: a tensor's expected ggml ne, computed from the hyperparameters. */
typedef enum vx__hd_sym {
    VX__D_NONE = 0, /* unused dimension */
    VX__D_EMBD,     /* hidden size */
    VX__D_VOCAB,
    VX__D_Q,  /* heads * head_dim */
    VX__D_KV, /* kv heads * head_dim */
    VX__D_HEADS,
    VX__D_HEAD_DIM,
    VX__D_EXPERTS,
    VX__D_FF_EXP,
    VX__D_Q_LORA,  /* q_lora_rank */
    VX__D_KV_LORA, /* kv_lora_rank */
    VX__D_KV_A,    /* kv_lora_rank + qk_rope_head_dim: the latent and the decoupled key */
    VX__D_QK,      /* heads × (qk_nope + qk_rope) */
    VX__D_NOPE,
    VX__D_V,     /* v_head_dim */
    VX__D_O,     /* heads × v_head_dim */
    VX__D_FF,    /* the dense layers' FFN width */
    VX__D_FF_SH, /* moe_intermediate_size × n_shared_experts */
    VX__D_ONE,   /* a dimension of 1 the GGUF form keeps (conv taps [K, 1, D]) */
    VX__D_KDA,   /* KDA heads × head_dim: the inner width */
    VX__D_KDA_HEAD,
    VX__D_CONV, /* the short convolution's taps */
    VX__D_LAT,  /* the routed experts' width: the latent width, else the hidden size */
} vx__hd_sym;

typedef enum vx__hr_kind {
    VX__HR_DIRECT,    /* one source tensor, the same bytes; ne = the source shape reversed */
    VX__HR_STACK,     /* per-expert source tensors ({E}) stacked along a new slowest dimension */
    VX__HR_MXFP4,     /* gpt-oss *_blocks + *_scales → ggml block_mxfp4 */
    VX__HR_ROWS,      /* rows copied (with an optional interleave split): gpt-oss expert biases */
    VX__HR_TRANSPOSE, /* gpt-oss unquantized experts [E, in, out] → ggml [in, out, E] */
    /* MLA kv_b_proj [H·(nope + v), kv_lora] → attn_k_b (each head's key rows transposed:
     * [nope, kv_lora, H]) and attn_v_b (its value rows: [kv_lora, v, H]) */
    VX__HR_KV_B,
    /* compressed-tensors MXFP4 per expert ({E}): src[0] weight_packed [rows, cols/2] (two e2m1
     * codes a byte), src[1] weight_scale [rows, cols/32] (E8M0) → block_mxfp4 [cols, rows, E] */
    VX__HR_CT_MXFP4,
    /* KDA conv taps [D, 1, K] or [D, K] → ne [K, 1, D]: the same bytes (taps fastest both ways) */
    VX__HR_CONV,
    /* KDA A_log (H values, any float dtype) → F32 −exp(A_log), the decay rate llama.cpp stores */
    VX__HR_NEG_EXP,
    /* K3's attention residual scores: src[0] *_res_norm.weight [E] times src[1] *_res_proj.weight
     * [1, E] element by element, in F32 (the model only ever uses their product) */
    VX__HR_RES_PRODUCT,
} vx__hr_kind;

#define VX__HR_SPLIT    1u /* source rows interleave two outputs: out[0] = even rows, out[1] = odd */
#define VX__HR_ALT      2u /* when the sources are absent, the next rule provides the same outputs */
#define VX__HR_OPT_TIED 4u /* may be absent when tie_word_embeddings is true */
#define VX__HR_OPTIONAL 8u /* may be absent (DeepSeek's e_score_correction_bias) */
/* Which layers a rule applies to (none of these: every layer) */
#define VX__HR_IF_DENSE     16u   /* layers before first_k_dense_replace */
#define VX__HR_IF_MOE       32u   /* the others */
#define VX__HR_IF_Q_LORA    64u   /* q_lora_rank > 0 */
#define VX__HR_IF_NO_Q_LORA 128u  /* q_lora_rank 0 / null: one q_proj */
#define VX__HR_IF_SHARED    256u  /* MoE layers of a model with shared experts */
#define VX__HR_IF_KDA       512u  /* hybrid stacks: KDA layers */
#define VX__HR_IF_MLA       1024u /* hybrid stacks: latent attention layers */

typedef struct vx__hf_rule {
    vx__hr_kind kind;
    unsigned flags;
    const char *src[2]; /* source name patterns ({L} layer, {E} expert); src[1]: MXFP4 scales */
    const char *out[2]; /* GGUF name patterns ({L}); out[1] only with VX__HR_SPLIT / VX__HR_KV_B */
    vx__hd_sym ne[3];   /* expected ggml ne of each output (VX__HR_KV_B: of attn_k_b) */
} vx__hf_rule;

/* A checkpoint tensor no rule reads, left out on purpose: its name pattern ({L} a layer) and why
 * (the coverage audit reports it as dropped). */
typedef struct vx__hf_drop {
    const char *src;
    const char *why;
} vx__hf_drop;

/* Every family's drops, ended by a row whose src is NULL. */
extern const vx__hf_drop vx__hf_drops[];

/* ---- the family table --------------------------------------------------------------------- */

#define VX__HF_TYPES 4 /* model_type names one row may answer to (the list ends at a NULL) */

/* One row per Hugging Face form of a family; what the family is (its GGUF architecture, sliding
 * window, YaRN log multiplier) is its vx_family row's. */
typedef struct vx__hf_family {
    const vx_family *family;
    const char *model_types[VX__HF_TYPES]; /* config.json model_type */
    const char *hf_class;                  /* an entry of config.json architectures */
    const vx__hf_key *keys; /* the family's own config keys; vx__hf_key_find adds the shared ones */
    size_t n_keys;
    const vx__hf_rule *rules;
    size_t n_rules;
    const char *rope_types;   /* rope scaling types supported, space separated; NULL: the family
                                 rotates nothing (its rope keys are not read) */
    bool rope_required;       /* a rope scaling (of a supported type) must be present */
    bool derive_head_dim;     /* head_dim defaults to hidden / heads (the HF class does so) */
    const char *quant_method; /* the quantization_config.quant_method accepted, or NULL */
    /* A multimodal checkpoint (K3): the text model's config is config.json's text_config, its
     * tensor names carry this prefix ("language_model."), and the keys config.json holds beside
     * text_config are outer_keys (the vision tower's among them: it is not read). NULL: a text
     * model's config and names. */
    const char *prefix;
    const vx__hf_key *outer_keys;
    size_t n_outer_keys;
    /* Tensors of the checkpoint this family leaves out on purpose (name patterns; a trailing '*'
     * matches any rest), reported as dropped; ended by a NULL src. NULL: none. */
    const vx__hf_drop *drops;
    /* Optional: keys derived from several config values (after every row and the rope); `root`
     * is config.json. */
    int (*derive)(json_t *root, const char *what, const char *arch, vx_meta *meta,
                  vx__hf_hparams *hp, mw_err *err);
} vx__hf_family;

/* The row one of whose model_types is `model_type`, or NULL. */
const vx__hf_family *vx__hf_family_find(const char *model_type);
/* The (first) row of a family, or NULL (tests/unit/test_vx_family.c: unless the family says why
 * it has none, it has one). */
const vx__hf_family *vx__hf_family_of(const vx_family *f);
/* Every model_type, joined by ", " (for messages). */
const char *vx__hf_family_names(void);
/* The row of config key `key`: the family's own, else one every family shares; NULL if unknown. */
const vx__hf_key *vx__hf_key_find(const vx__hf_family *fam, const char *key);

/* Reads config.json text: meta gets the GGUF-style keys, *fam the family, *hp the slots. */
int vx__hf_config_read(const char *text, size_t len, const char *what, const char *name,
                       vx_meta *meta, const vx__hf_family **fam, vx__hf_hparams *hp, mw_err *err);

/* ---- relayouts ---------------------------------------------------------------------------- */

/* What a stored tensor is made of; vx_input_tensor.impl points to one. */
typedef struct vx__hf_src {
    vx__hr_kind kind;
    int parity; /* -1 no split; 0 even source rows; 1 odd source rows; VX__HR_KV_B: 0 k_b, 1 v_b */
    int n_src;
    /* DIRECT/ROWS/TRANSPOSE/KV_B 1, STACK n_expert, MXFP4 2, CT_MXFP4 2 × n_expert (the packed
     * tensors in expert order, then the scales) */
    const vx_st_tensor **src;
    uint64_t esz;              /* bytes per element (not MXFP4) */
    int64_t n_mat, rows, cols; /* output geometry: n_mat matrices of rows x cols elements */
    /* Sources in FP8 e4m3 (DeepSeek's quant_method fp8): each source's weight_scale_inv, one f32
     * per block of block[0] rows × block[1] columns; the tensor is stored as bf16 of the exact f32
     * product (and reads as that f32 through vx_input_tensor.read_f32). NULL otherwise. */
    const vx_st_tensor **scale;
    int64_t block[2];
    int64_t src_cols; /* VX__HR_KV_B: the source's columns (kv_lora); nope and v per head */
    int64_t nope, v;
} vx__hf_src;

int vx__hf_read(const vx_input *in, const vx_input_tensor *t, uint64_t off, void *dst, uint64_t len,
                mw_err *err);
/* The same rows as exact f32 values: FP8 tensors before their bf16 rounding. */
int vx__hf_read_f32(const vx_input *in, const vx_input_tensor *t, uint64_t row0, uint64_t n,
                    float *dst, mw_err *err);
/* FP8 e4m3 (OCP, "fn": no infinities, 0x7F / 0xFF NaN) as float, exactly. */
float vx__fp8_e4m3(uint8_t b);

/* gpt-oss MXFP4: one 17-byte ggml block from a 16-byte HF block and its E8M0 scale. */
void vx__hf_mxfp4_block(uint8_t scale, const uint8_t hf[16], uint8_t out[17]);

#endif
