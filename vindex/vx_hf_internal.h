/* vindex/vx_hf_internal.h — what the Hugging Face reader's files share: the family table (config
 * keys and tensor rules), the hyperparameters the tensor rules check shapes against, and the
 * relayout read callbacks. */
#ifndef VX_HF_INTERNAL_H
#define VX_HF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "util/mw_err.h"
#include "vindex/vx_input.h"
#include "vindex/vx_meta.h"
#include "vindex/vx_safetensors.h"

/* Hyperparameters the tensor rules need (filled from config.json). */
enum {
    HP_LAYERS,
    HP_CTX,
    HP_EMBD,
    HP_VOCAB,
    HP_HEADS,
    HP_KV_HEADS,
    HP_HEAD_DIM,
    HP_EXPERTS,
    HP_EXPERTS_USED,
    HP_FF_EXP,
    HP_SWA,
    /* latent attention and the deepseek2 FFN layout */
    HP_Q_LORA, /* 0 = one q_proj */
    HP_KV_LORA,
    HP_NOPE,       /* qk_nope_head_dim */
    HP_ROPE_DIM,   /* qk_rope_head_dim */
    HP_V_DIM,      /* v_head_dim */
    HP_FF,         /* the dense layers' intermediate_size */
    HP_DENSE_LEAD, /* first_k_dense_replace */
    HP_SHARED,     /* n_shared_experts */
    HP_NEXTN,      /* num_nextn_predict_layers: extra layers stored after the last, unused */
    HP_COUNT,
    HP_NONE = -1
};

typedef struct vx_hf_hparams {
    int64_t v[HP_COUNT];  /* 0 = unset */
    bool tied;            /* tie_word_embeddings: the LM head is token_embd */
    int64_t fp8_block[2]; /* quant_method fp8: rows × columns one weight_scale_inv covers */
} vx_hf_hparams;

/* ---- config keys -------------------------------------------------------------------------- */

typedef enum hk_kind {
    HK_U32,    /* a positive integer, written as a u32 key */
    HK_F32,    /* a positive finite number, written as an f32 key */
    HK_EXPECT, /* must equal `arg` (JSON text) when present */
    HK_IGNORE, /* does not affect inference; `arg` says why */
    HK_CODE,   /* read by the shared config code (rope, layer types, quantization, ...) */
} hk_kind;

#define HK_REQUIRED 1u /* missing is an error (for a slot: unless another row fills the slot) */

typedef struct hf_key {
    const char *hf; /* config.json key */
    hk_kind kind;
    const char *gguf; /* U32/F32: key after "<arch>."; NULL when only read */
    int slot;         /* HP_* filled by a U32 row, or HP_NONE */
    unsigned flags;
    const char *arg; /* EXPECT: the value as JSON; U32/F32: the HF class default (JSON) or NULL;
                        IGNORE: the reason */
} hf_key;

/* ---- tensor rules ------------------------------------------------------------------------- */

/* Shape symbols: a tensor's expected ggml ne, computed from the hyperparameters. */
typedef enum hd_sym {
    D_NONE = 0, /* unused dimension */
    D_EMBD,     /* hidden size */
    D_VOCAB,
    D_Q,  /* heads * head_dim */
    D_KV, /* kv heads * head_dim */
    D_HEADS,
    D_HEAD_DIM,
    D_EXPERTS,
    D_FF_EXP,
    D_Q_LORA,  /* q_lora_rank */
    D_KV_LORA, /* kv_lora_rank */
    D_KV_A,    /* kv_lora_rank + qk_rope_head_dim: the latent and the decoupled key */
    D_QK,      /* heads × (qk_nope + qk_rope) */
    D_NOPE,
    D_V,     /* v_head_dim */
    D_O,     /* heads × v_head_dim */
    D_FF,    /* the dense layers' FFN width */
    D_FF_SH, /* moe_intermediate_size × n_shared_experts */
} hd_sym;

typedef enum hr_kind {
    HR_DIRECT,    /* one source tensor, the same bytes; ne = the source shape reversed */
    HR_STACK,     /* per-expert source tensors ({E}) stacked along a new slowest dimension */
    HR_MXFP4,     /* gpt-oss *_blocks + *_scales → ggml block_mxfp4 */
    HR_ROWS,      /* rows copied (with an optional interleave split): gpt-oss expert biases */
    HR_TRANSPOSE, /* gpt-oss unquantized experts [E, in, out] → ggml [in, out, E] */
    HR_KV_B,      /* MLA kv_b_proj [H·(nope + v), kv_lora] → attn_k_b (each head's key rows
                     transposed: [nope, kv_lora, H]) and attn_v_b (its value rows: [kv_lora, v, H]) */
    HR_DROP,      /* not stored; `why` names the rule */
} hr_kind;

#define HR_SPLIT    1u /* source rows interleave two outputs: out[0] = even rows, out[1] = odd */
#define HR_ALT      2u /* when the sources are absent, the next rule provides the same outputs */
#define HR_OPT_TIED 4u /* may be absent when tie_word_embeddings is true */
#define HR_OPTIONAL 8u /* may be absent (DeepSeek's e_score_correction_bias) */
/* Which layers a rule applies to (none of these: every layer) */
#define HR_IF_DENSE     16u  /* layers before first_k_dense_replace */
#define HR_IF_MOE       32u  /* the others */
#define HR_IF_Q_LORA    64u  /* q_lora_rank > 0 */
#define HR_IF_NO_Q_LORA 128u /* q_lora_rank 0 / null: one q_proj */
#define HR_IF_SHARED    256u /* MoE layers of a model with shared experts */

typedef struct hf_rule {
    hr_kind kind;
    unsigned flags;
    const char *src[2]; /* source name patterns ({L} layer, {E} expert); src[1]: MXFP4 scales */
    const char *out[2]; /* GGUF name patterns ({L}); out[1] only with HR_SPLIT / HR_KV_B */
    hd_sym ne[3];       /* expected ggml ne of each output (HR_KV_B: of attn_k_b) */
    const char *why;    /* HR_DROP: the rule's reason */
} hf_rule;

typedef struct vx_hf_family {
    const char *model_type; /* config.json model_type */
    const char *hf_class;   /* an entry of config.json architectures */
    const char *arch;       /* GGUF general.architecture */
    const hf_key *keys;
    size_t n_keys;
    const hf_rule *rules;
    size_t n_rules;
    const char *rope_types;   /* rope scaling types supported, space separated */
    bool rope_required;       /* a rope scaling (of a supported type) must be present */
    bool sliding_layers;      /* layer_types may mix sliding and full attention */
    bool derive_head_dim;     /* head_dim defaults to hidden / heads (the HF class does so) */
    const char *quant_method; /* the quantization_config.quant_method accepted, or NULL */
    bool rope_mscale;         /* the yarn dict may carry mscale / mscale_all_dim (DeepSeek) */
    /* Optional: keys derived from several config values (after every row and the rope); `root`
     * is config.json. */
    int (*derive)(json_t *root, const char *what, const char *arch, vx_meta *meta,
                  vx_hf_hparams *hp, mw_err *err);
} vx_hf_family;

/* The family whose model_type is `model_type` (vx_hf_families.c's table), or NULL. */
const vx_hf_family *vx_hf_family_find(const char *model_type);
/* Every family's model_type, joined by ", " (for messages). */
const char *vx_hf_family_names(void);

/* Reads config.json text: meta gets the GGUF-style keys, *fam the family, *hp the slots. */
int vx_hf_config_read(const char *text, size_t len, const char *what, const char *name,
                      vx_meta *meta, const vx_hf_family **fam, vx_hf_hparams *hp, mw_err *err);

/* ---- relayouts ---------------------------------------------------------------------------- */

/* What a stored tensor is made of; vx_input_tensor.impl points to one. */
typedef struct hf_src_impl {
    hr_kind kind;
    int parity; /* -1 no split; 0 even source rows; 1 odd source rows; HR_KV_B: 0 k_b, 1 v_b */
    int n_src;
    const vx_st_tensor **src;  /* DIRECT/ROWS/TRANSPOSE/KV_B 1, STACK n_expert, MXFP4 2 */
    uint64_t esz;              /* bytes per element (not MXFP4) */
    int64_t n_mat, rows, cols; /* output geometry: n_mat matrices of rows x cols elements */
    /* Sources in FP8 e4m3 (DeepSeek's quant_method fp8): each source's weight_scale_inv, one f32
     * per block of block[0] rows × block[1] columns; the tensor is stored as bf16 of the exact f32
     * product (and reads as that f32 through vx_input_tensor.read_f32). NULL otherwise. */
    const vx_st_tensor **scale;
    int64_t block[2];
    int64_t src_cols; /* HR_KV_B: the source's columns (kv_lora); nope and v per head */
    int64_t nope, v;
} hf_src_impl;

int vx_hf_read(const vx_input *in, const vx_input_tensor *t, uint64_t off, void *dst, uint64_t len,
               mw_err *err);
/* The same rows as exact f32 values: FP8 tensors before their bf16 rounding. */
int vx_hf_read_f32(const vx_input *in, const vx_input_tensor *t, uint64_t row0, uint64_t n,
                   float *dst, mw_err *err);
/* FP8 e4m3 (OCP, "fn": no infinities, 0x7F / 0xFF NaN) as float, exactly. */
float vx_fp8_e4m3(uint8_t b);

/* gpt-oss MXFP4: one 17-byte ggml block from a 16-byte HF block and its E8M0 scale. */
void vx_hf_mxfp4_block(uint8_t scale, const uint8_t hf[16], uint8_t out[17]);

#endif
