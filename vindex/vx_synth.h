/* vindex/vx_synth.h — synthetic models of any shape: random weights scaled so activations stay
 * sane through many layers, experts quantized with the kernels' quantizers, and the metadata keys
 * llama.cpp uses for the family (tests/fixtures/llamacpp/FORMATS.md §4, §5).
 *
 * A synthetic model is a vx_input whose tensors are generated on demand, row by row, from
 * (seed, tensor name, row): nothing is held in memory, and the same bytes come out whether the
 * model is written as GGUF (vx_input_write_gguf) or extracted straight into a vindex (vx_extract).
 */
#ifndef VX_SYNTH_H
#define VX_SYNTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "util/mw_err.h"
#include "vindex/vx_family.h"
#include "vindex/vx_input.h"
#include "vindex/vx_vindex.h"

typedef struct vx_synth_opts {
    char arch[16]; /* a family synth makes (vx_synth_family_names): "gpt-oss", "deepseek2", ... */
    int layers, hidden, heads, kv_heads, head_dim;
    int experts, top_k, expert_ff, vocab;
    uint64_t seed;
    kn_type expert_type; /* mxfp4 (gpt-oss default) or q6_K (qwen3moe default) */
    kn_type dense_type;  /* 2-D weights: f32 (default), f16 or q8_0 */
    int sliding_window;  /* gpt-oss only; default 128 */
    int context;         /* context_length; default 131072 (gpt-oss) / 40960 (qwen3moe) */
    /* deepseek2 only (head_dim is qk_nope there); -1 = DeepSeek-V3's value (in parentheses) */
    int q_lora;          /* query down-projection rank (1536); 0 = one attn_q */
    int kv_lora;         /* KV latent width (512) */
    int rope_dim;        /* qk_rope_head_dim (64) */
    int v_dim;           /* v_head_dim (= head_dim) */
    int dense_layers;    /* leading dense FFN layers (1) */
    int dense_ff;        /* their width (9 × expert_ff) */
    int shared_experts;  /* shared experts per MoE layer (1) */
    int groups;          /* expert groups (1: none) */
    int groups_used;     /* groups kept per token (1) */
    int gating;          /* llama.cpp's expert_gating_func: 1 softmax, 2 sigmoid (2) */
    int weights_norm;    /* expert_weights_norm: 0 / 1 (1) */
    float weights_scale; /* expert_weights_scale, < 0 = default (2.5) */
    /* the Kimi line (also the deepseek2 options above: latent attention and the MoE; kimi-linear's
     * queries have no down-projection); 0 = Kimi Linear 48B-A3B's value */
    int kda_head_dim;    /* KDA head width (128) */
    int conv_kernel;     /* the short convolution's taps (4) */
    int full_attn_every; /* layer l is latent attention when (l + 1) % this == 0, else KDA (4) */
    /* kimi-k3 only (-1 / NaN = the default in parentheses) */
    int expert_latent;  /* the routed experts' width (0: none, they run at hidden) */
    int attn_res_block; /* attention residuals' block size (8; 0 = a plain residual stream) */
    float situ_beta;    /* SiTU's gate beta (2) */
    float situ_lbeta;   /* its up branch's (2.5; <= 0 leaves it linear) */
    float gate_lb;      /* KDA's decay lower bound (-5) */
    /* a skewed router (families with a router bias): experts 0 .. N-1 get hot_bias added to
     * it, so they are chosen more often (the planner's tests) */
    int hot_experts;
    float hot_bias; /* default 2 */
} vx_synth_opts;

/* Whether synth makes models of family f (if not, f->no_synth says why). */
bool vx_synth_has_family(const vx_family *f);
/* The families synth makes, their names joined by sep into buf (cut at cap); returns buf. */
const char *vx_synth_family_names(char *buf, size_t cap, const char *sep);

/* Zero / unset everything (required options must then be set). */
void vx_synth_defaults(vx_synth_opts *o);
/* Sets one option by its command-line name ("layers", "expert-format", ...). */
int vx_synth_set(vx_synth_opts *o, const char *key, const char *val, mw_err *err);
/* Validates the options and builds the model as an input (kind "synth"). */
int vx_synth_input(const vx_synth_opts *o, vx_input **out, mw_err *err);
/* The same from a NULL-terminated list of option names and values: {"arch", "gpt-oss", "layers",
 * "2", ..., NULL}. */
int vx_synth_input_kv(const char *const *kv, vx_input **out, mw_err *err);

/* Writes any input as a GGUF v3 file through the project's writer, streaming tensor data; planar
 * MXFP4 (mxfp4_ct, a compressed-tensors checkpoint's experts) as ggml's block_mxfp4, the same
 * values, as llama.cpp's converter writes them. */
int vx_input_write_gguf(const vx_input *in, const char *path, vx_progress_fn progress, void *ctx,
                        mw_err *err);

#endif
