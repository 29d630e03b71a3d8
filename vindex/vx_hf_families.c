/* vindex/vx_hf_families.c — the Hugging Face families as data: which config.json keys each knows
 * (and the GGUF keys llama.cpp's converter writes for them), and how its tensors map to GGUF names;
 * DeepSeek-V3's router and latent-attention keys, derived from several config values, in code.
 * Each row points at its family's row of vindex/vx_family.c, which holds the GGUF architecture
 * and the facts the model layer reads too. docs/safetensors.md is the readable form of these
 * tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_hf_internal.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define L_ "model.layers.{L}."
#define B_ "blk.{L}."

/* ---- what every family shares ------------------------------------------------------------- */

/* Config keys every family knows, found by vx__hf_key_find after the family's own. Only CODE and
 * IGNORE rows belong here: the rows that write keys or are required are a family's. */
static const vx__hf_key common_keys[] = {
    /* read in code (vx_hf_config.c) rather than through a row's kind */
    {"model_type", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"architectures", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"rope_theta", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"rope_scaling", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"rope_parameters", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"layer_types", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"quantization_config", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"tie_word_embeddings", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    /* only for training or the Python runtime */
    {"attention_dropout", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "training only"},
    {"initializer_range", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "training only"},
    {"router_aux_loss_coef", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "training only"},
    {"output_router_logits", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "training only"},
    {"use_cache", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "Python runtime setting"},
    {"torch_dtype", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "each tensor carries its own dtype"},
    {"dtype", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "each tensor carries its own dtype"},
    {"transformers_version", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "provenance only"},
    {"_name_or_path", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "provenance only"},
    {"bos_token_id", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "tokenizer files are carried"},
    {"eos_token_id", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "tokenizer files are carried"},
    {"pad_token_id", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "tokenizer files are carried"},
};

/* The rotary table some checkpoints save: recomputed from rope.freq_base and the rope scaling. */
#define INV_FREQ_WHY "rotary inv_freq is recomputed from config (rope.freq_base, rope scaling)"

const vx__hf_drop vx__hf_drops[] = {
    {L_ "self_attn.rotary_emb.inv_freq", INV_FREQ_WHY},
    {"model.rotary_emb.inv_freq", INV_FREQ_WHY},
    {NULL, NULL},
};

/* ---- gpt-oss (GptOssForCausalLM) ---------------------------------------------------------- */

static const vx__hf_key gpt_oss_keys[] = {
    {"num_hidden_layers", VX__HK_U32, "block_count", VX__HP_LAYERS, VX__HK_REQUIRED, NULL},
    {"max_position_embeddings", VX__HK_U32, "context_length", VX__HP_CTX, VX__HK_REQUIRED, NULL},
    {"hidden_size", VX__HK_U32, "embedding_length", VX__HP_EMBD, VX__HK_REQUIRED, NULL},
    {"intermediate_size", VX__HK_U32, "feed_forward_length", VX__HP_NONE, VX__HK_REQUIRED, NULL},
    {"intermediate_size", VX__HK_U32, "expert_feed_forward_length", VX__HP_FF_EXP, VX__HK_REQUIRED,
     NULL},
    {"num_attention_heads", VX__HK_U32, "attention.head_count", VX__HP_HEADS, VX__HK_REQUIRED,
     NULL},
    {"num_key_value_heads", VX__HK_U32, "attention.head_count_kv", VX__HP_KV_HEADS, VX__HK_REQUIRED,
     NULL},
    {"head_dim", VX__HK_U32, "attention.key_length", VX__HP_HEAD_DIM, VX__HK_REQUIRED, NULL},
    {"head_dim", VX__HK_U32, "attention.value_length", VX__HP_NONE, VX__HK_REQUIRED, NULL},
    {"rms_norm_eps", VX__HK_F32, "attention.layer_norm_rms_epsilon", VX__HP_NONE, VX__HK_REQUIRED,
     NULL},
    {"num_local_experts", VX__HK_U32, "expert_count", VX__HP_EXPERTS, VX__HK_REQUIRED, NULL},
    {"num_experts_per_tok", VX__HK_U32, "expert_used_count", VX__HP_EXPERTS_USED, VX__HK_REQUIRED,
     NULL},
    {"experts_per_token", VX__HK_U32, "expert_used_count", VX__HP_EXPERTS_USED, VX__HK_REQUIRED,
     NULL},
    {"sliding_window", VX__HK_U32, "attention.sliding_window", VX__HP_SWA, VX__HK_REQUIRED, NULL},
    /* The clamp of the gpt-oss GLU (gate <= limit, -limit <= up <= limit). llama.cpp hard-codes 7
     * (and alpha 1.702, which HF's config does not carry either); the model layer reads the limit
     * from {arch}.swiglu_clamp_exp, the key llama.cpp uses for clamped SwiGLU experts. */
    {"swiglu_limit", VX__HK_F32, "swiglu_clamp_exp", VX__HP_NONE, 0, "7.0"},
    {"vocab_size", VX__HK_U32, NULL, VX__HP_VOCAB, VX__HK_REQUIRED, NULL},
    {"hidden_act", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"silu\""},
    {"attention_bias", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "true"},
    {"initial_context_length", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
};

static const vx__hf_rule gpt_oss_rules[] = {
    {VX__HR_DIRECT,
     0,
     {"model.embed_tokens.weight"},
     {"token_embd.weight"},
     {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_DIRECT, 0, {"model.norm.weight"}, {"output_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT, 0, {"lm_head.weight"}, {"output.weight"}, {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_DIRECT, 0, {L_ "input_layernorm.weight"}, {B_ "attn_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT, 0, {L_ "self_attn.q_proj.weight"}, {B_ "attn_q.weight"}, {VX__D_EMBD, VX__D_Q}},
    {VX__HR_DIRECT, 0, {L_ "self_attn.q_proj.bias"}, {B_ "attn_q.bias"}, {VX__D_Q}},
    {VX__HR_DIRECT,
     0,
     {L_ "self_attn.k_proj.weight"},
     {B_ "attn_k.weight"},
     {VX__D_EMBD, VX__D_KV}},
    {VX__HR_DIRECT, 0, {L_ "self_attn.k_proj.bias"}, {B_ "attn_k.bias"}, {VX__D_KV}},
    {VX__HR_DIRECT,
     0,
     {L_ "self_attn.v_proj.weight"},
     {B_ "attn_v.weight"},
     {VX__D_EMBD, VX__D_KV}},
    {VX__HR_DIRECT, 0, {L_ "self_attn.v_proj.bias"}, {B_ "attn_v.bias"}, {VX__D_KV}},
    {VX__HR_DIRECT,
     0,
     {L_ "self_attn.o_proj.weight"},
     {B_ "attn_output.weight"},
     {VX__D_Q, VX__D_EMBD}},
    {VX__HR_DIRECT, 0, {L_ "self_attn.o_proj.bias"}, {B_ "attn_output.bias"}, {VX__D_EMBD}},
    {VX__HR_DIRECT, 0, {L_ "self_attn.sinks"}, {B_ "attn_sinks.weight"}, {VX__D_HEADS}},
    {VX__HR_DIRECT,
     0,
     {L_ "post_attention_layernorm.weight"},
     {B_ "post_attention_norm.weight"},
     {VX__D_EMBD}},
    {VX__HR_DIRECT,
     0,
     {L_ "mlp.router.weight"},
     {B_ "ffn_gate_inp.weight"},
     {VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_DIRECT, 0, {L_ "mlp.router.bias"}, {B_ "ffn_gate_inp.bias"}, {VX__D_EXPERTS}},
    /* experts: native MXFP4, else unquantized [E, in, out] */
    {VX__HR_MXFP4,
     VX__HR_SPLIT | VX__HR_ALT,
     {L_ "mlp.experts.gate_up_proj_blocks", L_ "mlp.experts.gate_up_proj_scales"},
     {B_ "ffn_gate_exps.weight", B_ "ffn_up_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_TRANSPOSE,
     VX__HR_SPLIT,
     {L_ "mlp.experts.gate_up_proj"},
     {B_ "ffn_gate_exps.weight", B_ "ffn_up_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_ROWS,
     VX__HR_SPLIT,
     {L_ "mlp.experts.gate_up_proj_bias"},
     {B_ "ffn_gate_exps.bias", B_ "ffn_up_exps.bias"},
     {VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_MXFP4,
     VX__HR_ALT,
     {L_ "mlp.experts.down_proj_blocks", L_ "mlp.experts.down_proj_scales"},
     {B_ "ffn_down_exps.weight"},
     {VX__D_FF_EXP, VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_TRANSPOSE,
     0,
     {L_ "mlp.experts.down_proj"},
     {B_ "ffn_down_exps.weight"},
     {VX__D_FF_EXP, VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_DIRECT,
     0,
     {L_ "mlp.experts.down_proj_bias"},
     {B_ "ffn_down_exps.bias"},
     {VX__D_EMBD, VX__D_EXPERTS}},
};

/* ---- qwen3moe (Qwen3MoeForCausalLM) ------------------------------------------------------- */

static const vx__hf_key qwen3moe_keys[] = {
    {"num_hidden_layers", VX__HK_U32, "block_count", VX__HP_LAYERS, VX__HK_REQUIRED, NULL},
    {"max_position_embeddings", VX__HK_U32, "context_length", VX__HP_CTX, VX__HK_REQUIRED, NULL},
    {"hidden_size", VX__HK_U32, "embedding_length", VX__HP_EMBD, VX__HK_REQUIRED, NULL},
    {"intermediate_size", VX__HK_U32, "feed_forward_length", VX__HP_NONE, 0, NULL},
    {"moe_intermediate_size", VX__HK_U32, "expert_feed_forward_length", VX__HP_FF_EXP,
     VX__HK_REQUIRED, NULL},
    {"num_attention_heads", VX__HK_U32, "attention.head_count", VX__HP_HEADS, VX__HK_REQUIRED,
     NULL},
    {"num_key_value_heads", VX__HK_U32, "attention.head_count_kv", VX__HP_KV_HEADS, VX__HK_REQUIRED,
     NULL},
    {"head_dim", VX__HK_U32, "attention.key_length", VX__HP_HEAD_DIM, 0, NULL},
    {"head_dim", VX__HK_U32, "attention.value_length", VX__HP_NONE, 0, NULL},
    {"rms_norm_eps", VX__HK_F32, "attention.layer_norm_rms_epsilon", VX__HP_NONE, VX__HK_REQUIRED,
     NULL},
    {"num_experts", VX__HK_U32, "expert_count", VX__HP_EXPERTS, VX__HK_REQUIRED, NULL},
    {"num_experts_per_tok", VX__HK_U32, "expert_used_count", VX__HP_EXPERTS_USED, VX__HK_REQUIRED,
     NULL},
    {"vocab_size", VX__HK_U32, NULL, VX__HP_VOCAB, VX__HK_REQUIRED, NULL},
    {"hidden_act", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"silu\""},
    {"attention_bias", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "false"},
    {"decoder_sparse_step", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "1"},
    {"mlp_only_layers", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "[]"},
    /* llama.cpp always renormalizes the selected weights for qwen3moe; HF's default is false */
    {"norm_topk_prob", VX__HK_EXPECT, NULL, VX__HP_NONE, VX__HK_REQUIRED, "true"},
    {"use_sliding_window", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "false"},
    {"sliding_window", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "used only with use_sliding_window"},
    {"max_window_layers", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "used only with use_sliding_window"},
};

static const vx__hf_rule qwen3moe_rules[] = {
    {VX__HR_DIRECT,
     0,
     {"model.embed_tokens.weight"},
     {"token_embd.weight"},
     {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_DIRECT, 0, {"model.norm.weight"}, {"output_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT,
     VX__HR_OPT_TIED,
     {"lm_head.weight"},
     {"output.weight"},
     {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_DIRECT, 0, {L_ "input_layernorm.weight"}, {B_ "attn_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT, 0, {L_ "self_attn.q_proj.weight"}, {B_ "attn_q.weight"}, {VX__D_EMBD, VX__D_Q}},
    {VX__HR_DIRECT,
     0,
     {L_ "self_attn.k_proj.weight"},
     {B_ "attn_k.weight"},
     {VX__D_EMBD, VX__D_KV}},
    {VX__HR_DIRECT,
     0,
     {L_ "self_attn.v_proj.weight"},
     {B_ "attn_v.weight"},
     {VX__D_EMBD, VX__D_KV}},
    {VX__HR_DIRECT,
     0,
     {L_ "self_attn.o_proj.weight"},
     {B_ "attn_output.weight"},
     {VX__D_Q, VX__D_EMBD}},
    {VX__HR_DIRECT, 0, {L_ "self_attn.q_norm.weight"}, {B_ "attn_q_norm.weight"}, {VX__D_HEAD_DIM}},
    {VX__HR_DIRECT, 0, {L_ "self_attn.k_norm.weight"}, {B_ "attn_k_norm.weight"}, {VX__D_HEAD_DIM}},
    {VX__HR_DIRECT,
     0,
     {L_ "post_attention_layernorm.weight"},
     {B_ "ffn_norm.weight"},
     {VX__D_EMBD}},
    {VX__HR_DIRECT,
     0,
     {L_ "mlp.gate.weight"},
     {B_ "ffn_gate_inp.weight"},
     {VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_STACK,
     0,
     {L_ "mlp.experts.{E}.gate_proj.weight"},
     {B_ "ffn_gate_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_STACK,
     0,
     {L_ "mlp.experts.{E}.up_proj.weight"},
     {B_ "ffn_up_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_STACK,
     0,
     {L_ "mlp.experts.{E}.down_proj.weight"},
     {B_ "ffn_down_exps.weight"},
     {VX__D_FF_EXP, VX__D_EMBD, VX__D_EXPERTS}},
};

/* ---- deepseek2 (DeepseekV3ForCausalLM: DeepSeek-V3 / R1, Kimi-K2) ------------------------- */

static const vx__hf_key deepseek_keys[] = {
    {"num_hidden_layers", VX__HK_U32, "block_count", VX__HP_LAYERS, VX__HK_REQUIRED, NULL},
    {"max_position_embeddings", VX__HK_U32, "context_length", VX__HP_CTX, VX__HK_REQUIRED, NULL},
    {"hidden_size", VX__HK_U32, "embedding_length", VX__HP_EMBD, VX__HK_REQUIRED, NULL},
    {"intermediate_size", VX__HK_U32, "feed_forward_length", VX__HP_FF, VX__HK_REQUIRED, NULL},
    {"moe_intermediate_size", VX__HK_U32, "expert_feed_forward_length", VX__HP_FF_EXP,
     VX__HK_REQUIRED, NULL},
    {"num_attention_heads", VX__HK_U32, "attention.head_count", VX__HP_HEADS, VX__HK_REQUIRED,
     NULL},
    /* multi-head in the HF form; absorbed, the one latent is the only KV head (derived) */
    {"num_key_value_heads", VX__HK_U32, NULL, VX__HP_KV_HEADS, 0, NULL},
    {"rms_norm_eps", VX__HK_F32, "attention.layer_norm_rms_epsilon", VX__HP_NONE, VX__HK_REQUIRED,
     NULL},
    {"n_routed_experts", VX__HK_U32, "expert_count", VX__HP_EXPERTS, VX__HK_REQUIRED, NULL},
    {"num_experts_per_tok", VX__HK_U32, "expert_used_count", VX__HP_EXPERTS_USED, VX__HK_REQUIRED,
     NULL},
    {"vocab_size", VX__HK_U32, "vocab_size", VX__HP_VOCAB, VX__HK_REQUIRED, NULL},
    {"kv_lora_rank", VX__HK_U32, "attention.kv_lora_rank", VX__HP_KV_LORA, VX__HK_REQUIRED, NULL},
    {"qk_nope_head_dim", VX__HK_U32, NULL, VX__HP_NOPE, VX__HK_REQUIRED, NULL},
    {"qk_rope_head_dim", VX__HK_U32, "rope.dimension_count", VX__HP_ROPE_DIM, VX__HK_REQUIRED,
     NULL},
    {"v_head_dim", VX__HK_U32, "attention.value_length_mla", VX__HP_V_DIM, VX__HK_REQUIRED, NULL},
    {"routed_scaling_factor", VX__HK_F32, "expert_weights_scale", VX__HP_NONE, 0, "1.0"},
    /* read by deepseek_derive: they may be null or 0, or map to keys of their own */
    {"q_lora_rank", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"first_k_dense_replace", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"n_shared_experts", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"n_group", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"topk_group", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"topk_method", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"scoring_func", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"norm_topk_prob", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"num_nextn_predict_layers", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"moe_layer_freq", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "1"},
    {"hidden_act", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"silu\""},
    {"attention_bias", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "false"},
    {"pretraining_tp", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "1"},
    /* transformers' own DeepseekV3 class: rope on adjacent pairs (as DeepSeek's code and
     * llama.cpp's NORM rope), head_dim = qk_rope_head_dim */
    {"rope_interleave", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "true"},
    {"head_dim", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "transformers' alias of qk_rope_head_dim"},
    {"ep_size", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "expert parallelism of the reference code"},
    {"aux_loss_alpha", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "training only"},
    {"seq_aux", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "training only"},
    {"auto_map", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "Python class mapping"},
};

static const vx__hf_rule deepseek_rules[] = {
    {VX__HR_DIRECT,
     0,
     {"model.embed_tokens.weight"},
     {"token_embd.weight"},
     {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_DIRECT, 0, {"model.norm.weight"}, {"output_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT,
     VX__HR_OPT_TIED,
     {"lm_head.weight"},
     {"output.weight"},
     {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_DIRECT, 0, {L_ "input_layernorm.weight"}, {B_ "attn_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT,
     VX__HR_IF_Q_LORA,
     {L_ "self_attn.q_a_proj.weight"},
     {B_ "attn_q_a.weight"},
     {VX__D_EMBD, VX__D_Q_LORA}},
    {VX__HR_DIRECT,
     VX__HR_IF_Q_LORA,
     {L_ "self_attn.q_a_layernorm.weight"},
     {B_ "attn_q_a_norm.weight"},
     {VX__D_Q_LORA}},
    {VX__HR_DIRECT,
     VX__HR_IF_Q_LORA,
     {L_ "self_attn.q_b_proj.weight"},
     {B_ "attn_q_b.weight"},
     {VX__D_Q_LORA, VX__D_QK}},
    {VX__HR_DIRECT,
     VX__HR_IF_NO_Q_LORA,
     {L_ "self_attn.q_proj.weight"},
     {B_ "attn_q.weight"},
     {VX__D_EMBD, VX__D_QK}},
    {VX__HR_DIRECT,
     0,
     {L_ "self_attn.kv_a_proj_with_mqa.weight"},
     {B_ "attn_kv_a_mqa.weight"},
     {VX__D_EMBD, VX__D_KV_A}},
    {VX__HR_DIRECT,
     0,
     {L_ "self_attn.kv_a_layernorm.weight"},
     {B_ "attn_kv_a_norm.weight"},
     {VX__D_KV_LORA}},
    {VX__HR_KV_B,
     0,
     {L_ "self_attn.kv_b_proj.weight"},
     {B_ "attn_k_b.weight", B_ "attn_v_b.weight"},
     {VX__D_NOPE, VX__D_KV_LORA, VX__D_HEADS}},
    {VX__HR_DIRECT,
     0,
     {L_ "self_attn.o_proj.weight"},
     {B_ "attn_output.weight"},
     {VX__D_O, VX__D_EMBD}},
    {VX__HR_DIRECT,
     0,
     {L_ "post_attention_layernorm.weight"},
     {B_ "ffn_norm.weight"},
     {VX__D_EMBD}},
    /* the leading dense layers */
    {VX__HR_DIRECT,
     VX__HR_IF_DENSE,
     {L_ "mlp.gate_proj.weight"},
     {B_ "ffn_gate.weight"},
     {VX__D_EMBD, VX__D_FF}},
    {VX__HR_DIRECT,
     VX__HR_IF_DENSE,
     {L_ "mlp.up_proj.weight"},
     {B_ "ffn_up.weight"},
     {VX__D_EMBD, VX__D_FF}},
    {VX__HR_DIRECT,
     VX__HR_IF_DENSE,
     {L_ "mlp.down_proj.weight"},
     {B_ "ffn_down.weight"},
     {VX__D_FF, VX__D_EMBD}},
    /* MoE layers: router, its selection bias (noaux_tc), experts, shared experts */
    {VX__HR_DIRECT,
     VX__HR_IF_MOE,
     {L_ "mlp.gate.weight"},
     {B_ "ffn_gate_inp.weight"},
     {VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_DIRECT,
     VX__HR_OPTIONAL | VX__HR_IF_MOE,
     {L_ "mlp.gate.e_score_correction_bias"},
     {B_ "exp_probs_b.bias"},
     {VX__D_EXPERTS}},
    {VX__HR_STACK,
     VX__HR_IF_MOE,
     {L_ "mlp.experts.{E}.gate_proj.weight"},
     {B_ "ffn_gate_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_STACK,
     VX__HR_IF_MOE,
     {L_ "mlp.experts.{E}.up_proj.weight"},
     {B_ "ffn_up_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_STACK,
     VX__HR_IF_MOE,
     {L_ "mlp.experts.{E}.down_proj.weight"},
     {B_ "ffn_down_exps.weight"},
     {VX__D_FF_EXP, VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_DIRECT,
     VX__HR_IF_SHARED,
     {L_ "mlp.shared_experts.gate_proj.weight"},
     {B_ "ffn_gate_shexp.weight"},
     {VX__D_EMBD, VX__D_FF_SH}},
    {VX__HR_DIRECT,
     VX__HR_IF_SHARED,
     {L_ "mlp.shared_experts.up_proj.weight"},
     {B_ "ffn_up_shexp.weight"},
     {VX__D_EMBD, VX__D_FF_SH}},
    {VX__HR_DIRECT,
     VX__HR_IF_SHARED,
     {L_ "mlp.shared_experts.down_proj.weight"},
     {B_ "ffn_down_shexp.weight"},
     {VX__D_FF_SH, VX__D_EMBD}},
};

/* An optional non-negative integer (null = absent); 1 found, 0 absent, -1 error. */
static int opt_count(json_t *root, const char *key, const char *what, int64_t max, int64_t *out,
                     mw_err *err) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return mw_errf(err, "%s: '%s' must be an integer in [0, %lld]", what, key, (long long)max);
    *out = json_integer_value(v);
    return 1;
}

static int put_u32(vx_meta *m, const char *arch, const char *suffix, int64_t v, const char *what,
                   mw_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return vx_meta_set_u32(m, key, (uint32_t)v) ? mw_errf(err, "%s: out of memory", what) : 0;
}

/* The router (scoring_func, topk_method with n_group / topk_group, norm_topk_prob) as llama.cpp's
 * keys. noaux_tc scores a group by the sum of its two best biased scores, as llama.cpp does;
 * greedy has no groups; group_limited_greedy (DeepSeek-V2: a group's best score) is only taken
 * when its groups limit nothing. */
static int deepseek_router(json_t *root, const char *what, const char *arch, vx_meta *meta,
                           mw_err *err) {
    json_t *sf = json_object_get(root, "scoring_func");
    const char *scoring = json_is_string(sf) ? json_string_value(sf) : sf ? "" : "sigmoid";
    int gating = !strcmp(scoring, "sigmoid") ? 2 : !strcmp(scoring, "softmax") ? 1 : 0;
    if (!gating) return mw_errf(err, "%s: 'scoring_func' must be \"sigmoid\" or \"softmax\"", what);
    json_t *tm = json_object_get(root, "topk_method");
    const char *method = json_is_string(tm) ? json_string_value(tm) : tm ? "" : "noaux_tc";
    int64_t groups = 1, used = 1;
    if (opt_count(root, "n_group", what, 1 << 16, &groups, err) < 0 ||
        opt_count(root, "topk_group", what, 1 << 16, &used, err) < 0)
        return -1;
    const bool limits = groups > 1 && used < groups;
    if (!strcmp(method, "greedy") || !limits) {
        groups = used = 1;
    } else if (strcmp(method, "noaux_tc")) {
        return mw_errf(err,
                       "%s: 'topk_method' %s with %lld of %lld groups: moewire (as llama.cpp) "
                       "scores groups as noaux_tc does",
                       what, json_is_string(tm) ? method : "?", (long long)used, (long long)groups);
    }
    json_t *norm = json_object_get(root, "norm_topk_prob");
    if (norm && !json_is_boolean(norm))
        return mw_errf(err, "%s: 'norm_topk_prob' must be true or false", what);
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
    if (vx_meta_set_bool(meta, key, norm ? json_is_true(norm) : true))
        return mw_errf(err, "%s: out of memory", what);
    return put_u32(meta, arch, "expert_gating_func", gating, what, err) ||
                   put_u32(meta, arch, "expert_group_count", groups, what, err) ||
                   put_u32(meta, arch, "expert_group_used_count", used, what, err)
               ? -1
               : 0;
}

/* The keys llama.cpp's converter derives for deepseek2: the MLA layout (one KV head whose key is
 * the cached row kv_lora + rope and value the latent), q_lora_rank (0 for one q_proj), the dense
 * leading layers and shared experts, the router. */
static int deepseek_derive(json_t *root, const char *what, const char *arch, vx_meta *meta,
                           vx__hf_hparams *hp, mw_err *err) {
    int64_t q_lora = 0, dense = 0, shared = 0, nextn = 0;
    if (opt_count(root, "q_lora_rank", what, 1 << 20, &q_lora, err) < 0 ||
        opt_count(root, "first_k_dense_replace", what, hp->v[VX__HP_LAYERS], &dense, err) < 0 ||
        opt_count(root, "n_shared_experts", what, 1 << 10, &shared, err) < 0 ||
        opt_count(root, "num_nextn_predict_layers", what, 1 << 10, &nextn, err) < 0)
        return -1;
    hp->v[VX__HP_Q_LORA] = q_lora;
    hp->v[VX__HP_DENSE_LEAD] = dense;
    hp->v[VX__HP_SHARED] = shared;
    hp->v[VX__HP_NEXTN] = nextn;
    const int64_t R = hp->v[VX__HP_KV_LORA], r = hp->v[VX__HP_ROPE_DIM], nope = hp->v[VX__HP_NOPE];
    return put_u32(meta, arch, "attention.q_lora_rank", q_lora, what, err) ||
                   put_u32(meta, arch, "attention.head_count_kv", 1, what, err) ||
                   put_u32(meta, arch, "attention.key_length", R + r, what, err) ||
                   put_u32(meta, arch, "attention.value_length", R, what, err) ||
                   put_u32(meta, arch, "attention.key_length_mla", nope + r, what, err) ||
                   put_u32(meta, arch, "leading_dense_block_count", dense, what, err) ||
                   put_u32(meta, arch, "expert_shared_count", shared, what, err) ||
                   deepseek_router(root, what, arch, meta, err)
               ? -1
               : 0;
}

/* ---- kimi-linear (KimiLinearForCausalLM) ------------------------------------------------- */

static const vx__hf_key kimi_linear_keys[] = {
    {"num_hidden_layers", VX__HK_U32, "block_count", VX__HP_LAYERS, VX__HK_REQUIRED, NULL},
    /* the released configs name the context one way or the other */
    {"max_position_embeddings", VX__HK_U32, "context_length", VX__HP_CTX, VX__HK_REQUIRED, NULL},
    {"model_max_length", VX__HK_U32, "context_length", VX__HP_CTX, VX__HK_REQUIRED, NULL},
    {"hidden_size", VX__HK_U32, "embedding_length", VX__HP_EMBD, VX__HK_REQUIRED, NULL},
    {"intermediate_size", VX__HK_U32, "feed_forward_length", VX__HP_FF, VX__HK_REQUIRED, NULL},
    {"moe_intermediate_size", VX__HK_U32, "expert_feed_forward_length", VX__HP_FF_EXP,
     VX__HK_REQUIRED, NULL},
    {"num_attention_heads", VX__HK_U32, "attention.head_count", VX__HP_HEADS, VX__HK_REQUIRED,
     NULL},
    /* multi-head in the HF form; absorbed, the latent is the one KV head (derived per layer) */
    {"num_key_value_heads", VX__HK_U32, NULL, VX__HP_KV_HEADS, 0, NULL},
    {"rms_norm_eps", VX__HK_F32, "attention.layer_norm_rms_epsilon", VX__HP_NONE, VX__HK_REQUIRED,
     NULL},
    {"num_experts", VX__HK_U32, "expert_count", VX__HP_EXPERTS, VX__HK_REQUIRED, NULL},
    {"num_experts_per_token", VX__HK_U32, "expert_used_count", VX__HP_EXPERTS_USED, VX__HK_REQUIRED,
     NULL},
    {"vocab_size", VX__HK_U32, "vocab_size", VX__HP_VOCAB, VX__HK_REQUIRED, NULL},
    {"kv_lora_rank", VX__HK_U32, "attention.kv_lora_rank", VX__HP_KV_LORA, VX__HK_REQUIRED, NULL},
    {"qk_nope_head_dim", VX__HK_U32, NULL, VX__HP_NOPE, VX__HK_REQUIRED, NULL},
    /* the width of the unrotated position part of q and k (no rotation is applied) */
    {"qk_rope_head_dim", VX__HK_U32, "rope.dimension_count", VX__HP_ROPE_DIM, VX__HK_REQUIRED,
     NULL},
    {"v_head_dim", VX__HK_U32, "attention.value_length_mla", VX__HP_V_DIM, VX__HK_REQUIRED, NULL},
    {"routed_scaling_factor", VX__HK_F32, "expert_weights_scale", VX__HP_NONE, 0, "1.0"},
    /* read by kimi_derive */
    {"linear_attn_config", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"q_lora_rank", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"first_k_dense_replace", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"num_shared_experts", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"hidden_act", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"silu\""},
    /* llama.cpp's kimi-linear always renormalizes and scores with a sigmoid, without groups */
    {"moe_renormalize", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "true"},
    {"moe_router_activation_func", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"sigmoid\""},
    {"num_expert_group", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "1"},
    {"topk_group", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "1"},
    {"use_grouped_topk", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "false"},
    {"moe_layer_freq", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "1"},
    {"mla_use_nope", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "true"},
    {"num_nextn_predict_layers", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "0"},
    {"head_dim", VX__HK_IGNORE, NULL, VX__HP_NONE, 0,
     "the KDA head size is linear_attn_config.head_dim, the latent one qk_nope + qk_rope"},
    {"auto_map", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "Python class mapping"},
};

static const vx__hf_rule kimi_linear_rules[] = {
    {VX__HR_DIRECT,
     0,
     {"model.embed_tokens.weight"},
     {"token_embd.weight"},
     {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_DIRECT, 0, {"model.norm.weight"}, {"output_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT, 0, {"lm_head.weight"}, {"output.weight"}, {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_DIRECT, 0, {L_ "input_layernorm.weight"}, {B_ "attn_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT,
     0,
     {L_ "post_attention_layernorm.weight"},
     {B_ "ffn_norm.weight"},
     {VX__D_EMBD}},
    /* KDA layers */
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.q_proj.weight"},
     {B_ "attn_q.weight"},
     {VX__D_EMBD, VX__D_KDA}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.k_proj.weight"},
     {B_ "attn_k.weight"},
     {VX__D_EMBD, VX__D_KDA}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.v_proj.weight"},
     {B_ "attn_v.weight"},
     {VX__D_EMBD, VX__D_KDA}},
    {VX__HR_CONV,
     VX__HR_IF_KDA,
     {L_ "self_attn.q_conv1d.weight"},
     {B_ "ssm_conv1d_q.weight"},
     {VX__D_CONV, VX__D_ONE, VX__D_KDA}},
    {VX__HR_CONV,
     VX__HR_IF_KDA,
     {L_ "self_attn.k_conv1d.weight"},
     {B_ "ssm_conv1d_k.weight"},
     {VX__D_CONV, VX__D_ONE, VX__D_KDA}},
    {VX__HR_CONV,
     VX__HR_IF_KDA,
     {L_ "self_attn.v_conv1d.weight"},
     {B_ "ssm_conv1d_v.weight"},
     {VX__D_CONV, VX__D_ONE, VX__D_KDA}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.f_a_proj.weight"},
     {B_ "ssm_f_a.weight"},
     {VX__D_EMBD, VX__D_KDA_HEAD}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.f_b_proj.weight"},
     {B_ "ssm_f_b.weight"},
     {VX__D_KDA_HEAD, VX__D_KDA}},
    {VX__HR_DIRECT, VX__HR_IF_KDA, {L_ "self_attn.dt_bias"}, {B_ "ssm_dt.bias"}, {VX__D_KDA}},
    {VX__HR_NEG_EXP, VX__HR_IF_KDA, {L_ "self_attn.A_log"}, {B_ "ssm_a"}, {VX__D_ONE, VX__D_HEADS}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.b_proj.weight"},
     {B_ "ssm_beta.weight"},
     {VX__D_EMBD, VX__D_HEADS}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.g_a_proj.weight"},
     {B_ "ssm_g_a.weight"},
     {VX__D_EMBD, VX__D_KDA_HEAD}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.g_b_proj.weight"},
     {B_ "ssm_g_b.weight"},
     {VX__D_KDA_HEAD, VX__D_KDA}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.o_norm.weight"},
     {B_ "ssm_norm.weight"},
     {VX__D_KDA_HEAD}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.o_proj.weight"},
     {B_ "attn_output.weight"},
     {VX__D_KDA, VX__D_EMBD}},
    /* latent attention layers (no rotation) */
    {VX__HR_DIRECT,
     VX__HR_IF_MLA,
     {L_ "self_attn.q_proj.weight"},
     {B_ "attn_q.weight"},
     {VX__D_EMBD, VX__D_QK}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA,
     {L_ "self_attn.kv_a_proj_with_mqa.weight"},
     {B_ "attn_kv_a_mqa.weight"},
     {VX__D_EMBD, VX__D_KV_A}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA,
     {L_ "self_attn.kv_a_layernorm.weight"},
     {B_ "attn_kv_a_norm.weight"},
     {VX__D_KV_LORA}},
    {VX__HR_KV_B,
     VX__HR_IF_MLA,
     {L_ "self_attn.kv_b_proj.weight"},
     {B_ "attn_k_b.weight", B_ "attn_v_b.weight"},
     {VX__D_NOPE, VX__D_KV_LORA, VX__D_HEADS}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA,
     {L_ "self_attn.o_proj.weight"},
     {B_ "attn_output.weight"},
     {VX__D_O, VX__D_EMBD}},
    /* the leading dense layers */
    {VX__HR_DIRECT,
     VX__HR_IF_DENSE,
     {L_ "mlp.gate_proj.weight"},
     {B_ "ffn_gate.weight"},
     {VX__D_EMBD, VX__D_FF}},
    {VX__HR_DIRECT,
     VX__HR_IF_DENSE,
     {L_ "mlp.up_proj.weight"},
     {B_ "ffn_up.weight"},
     {VX__D_EMBD, VX__D_FF}},
    {VX__HR_DIRECT,
     VX__HR_IF_DENSE,
     {L_ "mlp.down_proj.weight"},
     {B_ "ffn_down.weight"},
     {VX__D_FF, VX__D_EMBD}},
    /* MoE layers: the router and its selection bias, the experts (w1 gate, w3 up, w2 down: packed
     * MXFP4 from compressed-tensors, else plain per-expert weights), the shared experts */
    {VX__HR_DIRECT,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.gate.weight"},
     {B_ "ffn_gate_inp.weight"},
     {VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_DIRECT,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.gate.e_score_correction_bias"},
     {B_ "exp_probs_b.bias"},
     {VX__D_EXPERTS}},
    {VX__HR_CT_MXFP4,
     VX__HR_IF_MOE | VX__HR_ALT,
     {L_ "block_sparse_moe.experts.{E}.w1.weight_packed",
      L_ "block_sparse_moe.experts.{E}.w1.weight_scale"},
     {B_ "ffn_gate_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_STACK,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.experts.{E}.w1.weight"},
     {B_ "ffn_gate_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_CT_MXFP4,
     VX__HR_IF_MOE | VX__HR_ALT,
     {L_ "block_sparse_moe.experts.{E}.w3.weight_packed",
      L_ "block_sparse_moe.experts.{E}.w3.weight_scale"},
     {B_ "ffn_up_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_STACK,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.experts.{E}.w3.weight"},
     {B_ "ffn_up_exps.weight"},
     {VX__D_EMBD, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_CT_MXFP4,
     VX__HR_IF_MOE | VX__HR_ALT,
     {L_ "block_sparse_moe.experts.{E}.w2.weight_packed",
      L_ "block_sparse_moe.experts.{E}.w2.weight_scale"},
     {B_ "ffn_down_exps.weight"},
     {VX__D_FF_EXP, VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_STACK,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.experts.{E}.w2.weight"},
     {B_ "ffn_down_exps.weight"},
     {VX__D_FF_EXP, VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_DIRECT,
     VX__HR_IF_SHARED,
     {L_ "block_sparse_moe.shared_experts.gate_proj.weight"},
     {B_ "ffn_gate_shexp.weight"},
     {VX__D_EMBD, VX__D_FF_SH}},
    {VX__HR_DIRECT,
     VX__HR_IF_SHARED,
     {L_ "block_sparse_moe.shared_experts.up_proj.weight"},
     {B_ "ffn_up_shexp.weight"},
     {VX__D_EMBD, VX__D_FF_SH}},
    {VX__HR_DIRECT,
     VX__HR_IF_SHARED,
     {L_ "block_sparse_moe.shared_experts.down_proj.weight"},
     {B_ "ffn_down_shexp.weight"},
     {VX__D_FF_SH, VX__D_EMBD}},
};

/* A 1-based layer list of linear_attn_config into flags (value v for each layer it names). */
static int layer_list(const json_t *list, const char *key, const char *what, int64_t n,
                      uint8_t *flags, uint8_t v, mw_err *err) {
    if (!json_is_array(list))
        return mw_errf(err, "%s: 'linear_attn_config.%s' must be a list of layers", what, key);
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *e = json_array_get(list, i);
        if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > n)
            return mw_errf(err,
                           "%s: 'linear_attn_config.%s' holds an entry that is not a layer "
                           "(1 .. %lld)",
                           what, key, (long long)n);
        uint8_t *f = &flags[json_integer_value(e) - 1];
        if (*f != 2)
            return mw_errf(err, "%s: layer %lld is listed twice in linear_attn_config", what,
                           (long long)json_integer_value(e));
        *f = v;
    }
    return 0;
}

/* linear_attn_config: which layers are KDA (the lists are 1-based, full_attn_layers the latent
 * attention ones), the KDA heads (the attention heads), head size and convolution taps. */
static int kimi_layers(json_t *root, const char *what, vx__hf_hparams *hp, bool k3, mw_err *err) {
    const json_t *la = json_object_get(root, "linear_attn_config");
    if (!json_is_object(la))
        return mw_errf(err, "%s: missing required key 'linear_attn_config'", what);
    /* K3's gate: full rank (g_proj) and bounded (read by k3_derive) */
    static const char *const known[] = {
        "full_attn_layers",       "kda_layers",         "num_heads",       "head_dim",
        "short_conv_kernel_size", "use_full_rank_gate", "gate_lower_bound"};
    const size_t n_known = k3 ? 7 : 5;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)la, k, v) {
        size_t i = 0;
        while (i < n_known && strcmp(known[i], k)) i++;
        if (i == n_known)
            return mw_errf(err, "%s: 'linear_attn_config.%s' is not known to this family", what, k);
    }
    const int64_t n = hp->v[VX__HP_LAYERS];
    int64_t heads = 0;
    if (opt_count((json_t *)la, "num_heads", what, 1 << 16, &heads, err) < 0 ||
        opt_count((json_t *)la, "head_dim", what, 1 << 12, &hp->v[VX__HP_KDA_HEAD], err) < 0 ||
        opt_count((json_t *)la, "short_conv_kernel_size", what, 64, &hp->v[VX__HP_CONV], err) < 0)
        return -1;
    if (heads != hp->v[VX__HP_HEADS] || !hp->v[VX__HP_KDA_HEAD] || !hp->v[VX__HP_CONV])
        return mw_errf(err,
                       "%s: linear_attn_config needs num_heads (= num_attention_heads, as "
                       "llama.cpp reads one head count), head_dim and short_conv_kernel_size",
                       what);
    if (!(hp->mla = malloc((size_t)n))) return mw_errf(err, "%s: out of memory", what);
    memset(hp->mla, 2, (size_t)n); /* 2: not listed yet */
    if (layer_list(json_object_get(la, "full_attn_layers"), "full_attn_layers", what, n, hp->mla, 1,
                   err))
        return -1;
    const json_t *kda = json_object_get(la, "kda_layers");
    if (kda && layer_list(kda, "kda_layers", what, n, hp->mla, 0, err)) return -1;
    for (int64_t l = 0; l < n; l++) {
        if (hp->mla[l] == 2 && kda)
            return mw_errf(err, "%s: layer %lld is in neither list of linear_attn_config", what,
                           (long long)l + 1);
        if (hp->mla[l] == 2) hp->mla[l] = 0; /* KimiLinearConfig: a layer not full is KDA */
    }
    return 0;
}

/* What both Kimi families' converters derive: the hybrid stack (head_count_kv 0 on KDA layers, 1
 * on latent ones), the KDA sizes, the MLA layout (one KV head whose key is the cached row
 * kv_lora + rope and value the latent), the dense lead, the shared experts, the sigmoid router. */
static int kimi_common(json_t *root, const char *what, const char *arch, vx_meta *meta,
                       vx__hf_hparams *hp, bool k3, mw_err *err) {
    int64_t dense = 0, shared = 0;
    if (opt_count(root, "first_k_dense_replace", what, hp->v[VX__HP_LAYERS], &dense, err) < 0 ||
        opt_count(root, "num_shared_experts", what, 1 << 10, &shared, err) < 0)
        return -1;
    hp->v[VX__HP_DENSE_LEAD] = dense;
    hp->v[VX__HP_SHARED] = shared;
    if (kimi_layers(root, what, hp, k3, err)) return -1;
    const int64_t n = hp->v[VX__HP_LAYERS];
    int32_t *kv = malloc((size_t)n * sizeof *kv);
    if (!kv) return mw_errf(err, "%s: out of memory", what);
    for (int64_t l = 0; l < n; l++) kv[l] = hp->mla[l];
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    int rc =
        vx_meta_set_arr(meta, key, VX_I32, kv, (uint64_t)n) ? mw_errf(err, "out of memory") : 0;
    free(kv);
    const int64_t R = hp->v[VX__HP_KV_LORA], r = hp->v[VX__HP_ROPE_DIM], nope = hp->v[VX__HP_NOPE];
    return rc || put_u32(meta, arch, "ssm.conv_kernel", hp->v[VX__HP_CONV], what, err) ||
                   put_u32(meta, arch, "kda.head_dim", hp->v[VX__HP_KDA_HEAD], what, err) ||
                   put_u32(meta, arch, "attention.key_length", R + r, what, err) ||
                   put_u32(meta, arch, "attention.value_length", R, what, err) ||
                   put_u32(meta, arch, "attention.key_length_mla", nope + r, what, err) ||
                   put_u32(meta, arch, "leading_dense_block_count", dense, what, err) ||
                   put_u32(meta, arch, "expert_shared_count", shared, what, err) ||
                   put_u32(meta, arch, "expert_gating_func", 2, what, err)
               ? -1
               : 0;
}

/* kimi-linear: one q_proj (llama.cpp's loader refuses a low-rank query). */
static int kimi_derive(json_t *root, const char *what, const char *arch, vx_meta *meta,
                       vx__hf_hparams *hp, mw_err *err) {
    int64_t q_lora = 0;
    if (opt_count(root, "q_lora_rank", what, 1 << 20, &q_lora, err) < 0) return -1;
    if (q_lora)
        return mw_errf(err,
                       "%s: 'q_lora_rank' is %lld; kimi-linear's latent attention has one q_proj "
                       "(llama.cpp's loader refuses a low-rank query)",
                       what, (long long)q_lora);
    return kimi_common(root, what, arch, meta, hp, false, err);
}

/* A finite number (any sign) of obj at key as an f32 key; 1 found, 0 absent, -1 error. */
static int put_finite(const json_t *obj, const char *key, const char *where, const char *what,
                      const char *arch, const char *suffix, vx_meta *meta, mw_err *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return mw_errf(err, "%s: '%s' must be a finite number", what, where);
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    return vx_meta_set_f32(meta, k, (float)json_number_value(v)) ? mw_errf(err, "out of memory")
                                                                 : 1;
}

/* Kimi K3 beyond Kimi Linear (conversion/kimi_k3.py): an optional low-rank query, the bounded
 * full-rank KDA gate, the attention residuals' block size, the latent MoE's width, SiTU's linear
 * beta (any sign: <= 0 leaves the up branch linear), the routing weights' normalization. */
static int k3_derive(json_t *root, const char *what, const char *arch, vx_meta *meta,
                     vx__hf_hparams *hp, mw_err *err) {
    int64_t q_lora = 0, block = 0, latent = 0;
    if (opt_count(root, "q_lora_rank", what, 1 << 20, &q_lora, err) < 0 ||
        opt_count(root, "attn_res_block_size", what, 1 << 20, &block, err) < 0 ||
        opt_count(root, "routed_expert_hidden_size", what, 1 << 20, &latent, err) < 0)
        return -1;
    if (!json_object_get(root, "attn_res_block_size"))
        return mw_errf(err, "%s: missing required key 'attn_res_block_size'", what);
    const json_t *la = json_object_get(root, "linear_attn_config");
    const json_t *full = json_object_get(la, "use_full_rank_gate");
    if (full && !json_is_true(full))
        return mw_errf(err,
                       "%s: 'linear_attn_config.use_full_rank_gate' is false; family %s "
                       "reads the full-rank gate (g_proj)",
                       what, arch);
    const json_t *norm = json_object_get(root, "moe_renormalize");
    if (norm && !json_is_boolean(norm))
        return mw_errf(err, "%s: 'moe_renormalize' must be true or false", what);
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", arch);
    hp->v[VX__HP_Q_LORA] = q_lora;
    hp->v[VX__HP_LATENT] = latent;
    if (vx_meta_set_bool(meta, key, json_is_true(norm))) return mw_errf(err, "out of memory");
    if (put_finite(la, "gate_lower_bound", "linear_attn_config.gate_lower_bound", what, arch,
                   "kda.gate_lower_bound", meta, err) < 0)
        return -1;
    const int lb = put_finite(root, "activation_situ_linear_beta", "activation_situ_linear_beta",
                              what, arch, "activation.situ_linear_beta", meta, err);
    if (lb <= 0)
        return lb < 0
                   ? -1
                   : mw_errf(err, "%s: missing required key 'activation_situ_linear_beta'", what);
    return kimi_common(root, what, arch, meta, hp, true, err) ||
                   (q_lora && put_u32(meta, arch, "attention.q_lora_rank", q_lora, what, err)) ||
                   put_u32(meta, arch, "attn_res.block_size", block, what, err) ||
                   (latent && put_u32(meta, arch, "expert_latent_length", latent, what, err))
               ? -1
               : 0;
}

/* ---- kimi-k3 (KimiK3ForConditionalGeneration) -------------------------------------------- */

/* config.json beside text_config: the vision tower's and the processor's keys are not read */
static const vx__hf_key k3_outer_keys[] = {
    {"model_type", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"architectures", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"text_config", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"quantization_config", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"tie_word_embeddings", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "false"},
    {"vision_config", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "the vision tower is not served"},
    {"media_placeholder_token_id", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "image input"},
    {"bos_token_id", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "tokenizer files are carried"},
    {"eos_token_id", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "tokenizer files are carried"},
    {"pad_token_id", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "tokenizer files are carried"},
    {"torch_dtype", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "each tensor carries its own dtype"},
    {"dtype", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "each tensor carries its own dtype"},
    {"transformers_version", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "provenance only"},
    {"auto_map", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "Python class mapping"},
    {"use_cache", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "Python runtime setting"},
};

static const vx__hf_key k3_keys[] = {
    /* the text model is Kimi Linear's class with K3's parts */
    {"model_type", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"kimi_linear\""},
    {"architectures", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "[\"KimiLinearForCausalLM\"]"},
    {"num_hidden_layers", VX__HK_U32, "block_count", VX__HP_LAYERS, VX__HK_REQUIRED, NULL},
    {"max_position_embeddings", VX__HK_U32, "context_length", VX__HP_CTX, VX__HK_REQUIRED, NULL},
    {"model_max_length", VX__HK_U32, "context_length", VX__HP_CTX, VX__HK_REQUIRED, NULL},
    {"hidden_size", VX__HK_U32, "embedding_length", VX__HP_EMBD, VX__HK_REQUIRED, NULL},
    {"intermediate_size", VX__HK_U32, "feed_forward_length", VX__HP_FF, VX__HK_REQUIRED, NULL},
    {"moe_intermediate_size", VX__HK_U32, "expert_feed_forward_length", VX__HP_FF_EXP,
     VX__HK_REQUIRED, NULL},
    {"num_attention_heads", VX__HK_U32, "attention.head_count", VX__HP_HEADS, VX__HK_REQUIRED,
     NULL},
    {"num_key_value_heads", VX__HK_U32, NULL, VX__HP_KV_HEADS, 0, NULL},
    {"rms_norm_eps", VX__HK_F32, "attention.layer_norm_rms_epsilon", VX__HP_NONE, VX__HK_REQUIRED,
     NULL},
    {"num_experts", VX__HK_U32, "expert_count", VX__HP_EXPERTS, VX__HK_REQUIRED, NULL},
    {"num_experts_per_token", VX__HK_U32, "expert_used_count", VX__HP_EXPERTS_USED, VX__HK_REQUIRED,
     NULL},
    {"vocab_size", VX__HK_U32, "vocab_size", VX__HP_VOCAB, VX__HK_REQUIRED, NULL},
    {"kv_lora_rank", VX__HK_U32, "attention.kv_lora_rank", VX__HP_KV_LORA, VX__HK_REQUIRED, NULL},
    {"qk_nope_head_dim", VX__HK_U32, NULL, VX__HP_NOPE, VX__HK_REQUIRED, NULL},
    {"qk_rope_head_dim", VX__HK_U32, "rope.dimension_count", VX__HP_ROPE_DIM, VX__HK_REQUIRED,
     NULL},
    {"v_head_dim", VX__HK_U32, "attention.value_length_mla", VX__HP_V_DIM, VX__HK_REQUIRED, NULL},
    {"routed_scaling_factor", VX__HK_F32, "expert_weights_scale", VX__HP_NONE, 0, "1.0"},
    {"activation_situ_beta", VX__HK_F32, "activation.situ_beta", VX__HP_NONE, VX__HK_REQUIRED,
     NULL},
    /* read by k3_derive and kimi_common */
    {"linear_attn_config", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"q_lora_rank", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"first_k_dense_replace", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"num_shared_experts", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"attn_res_block_size", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"routed_expert_hidden_size", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"activation_situ_linear_beta", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"moe_renormalize", VX__HK_CODE, NULL, VX__HP_NONE, 0, NULL},
    {"hidden_act", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"situ\""},
    {"moe_router_activation_func", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"sigmoid\""},
    {"scoring_func", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"sigmoid\""},
    {"topk_method", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "\"noaux_tc\""},
    {"num_expert_group", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "1"},
    {"topk_group", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "1"},
    {"use_grouped_topk", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "false"},
    {"moe_layer_freq", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "1"},
    {"mla_use_nope", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "true"},
    {"num_nextn_predict_layers", VX__HK_EXPECT, NULL, VX__HP_NONE, 0, "0"},
    {"norm_topk_prob", VX__HK_IGNORE, NULL, VX__HP_NONE, 0,
     "the model normalizes as moe_renormalize says"},
    {"latent_moe_use_norm", VX__HK_IGNORE, NULL, VX__HP_NONE, 0,
     "the checkpoint holds routed_expert_norm when the model has one"},
    {"mla_use_output_gate", VX__HK_IGNORE, NULL, VX__HP_NONE, 0,
     "the checkpoint holds the latent layers' g_proj when the model has one"},
    {"head_dim", VX__HK_IGNORE, NULL, VX__HP_NONE, 0,
     "the KDA head size is linear_attn_config.head_dim, the latent one qk_nope + qk_rope"},
    {"auto_map", VX__HK_IGNORE, NULL, VX__HP_NONE, 0, "Python class mapping"},
};

static const vx__hf_drop k3_drops[] = {
    {"vision_tower.*", "vision tower: the text model is served"},
    {"mm_projector.*", "multimodal projector: the text model is served"},
    {NULL, NULL},
};

#define RES_(x) L_ x "_res_norm.weight", L_ x "_res_proj.weight"

static const vx__hf_rule k3_rules[] = {
    {VX__HR_DIRECT,
     0,
     {"model.embed_tokens.weight"},
     {"token_embd.weight"},
     {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_DIRECT, 0, {"model.norm.weight"}, {"output_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT, 0, {"lm_head.weight"}, {"output.weight"}, {VX__D_EMBD, VX__D_VOCAB}},
    {VX__HR_RES_PRODUCT,
     VX__HR_OPTIONAL,
     {"model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight"},
     {"output_res_score.weight"},
     {VX__D_EMBD}},
    {VX__HR_DIRECT, 0, {L_ "input_layernorm.weight"}, {B_ "attn_norm.weight"}, {VX__D_EMBD}},
    {VX__HR_DIRECT,
     0,
     {L_ "post_attention_layernorm.weight"},
     {B_ "ffn_norm.weight"},
     {VX__D_EMBD}},
    {VX__HR_RES_PRODUCT,
     VX__HR_OPTIONAL,
     {RES_("self_attention")},
     {B_ "attn_res_score.weight"},
     {VX__D_EMBD}},
    {VX__HR_RES_PRODUCT, VX__HR_OPTIONAL, {RES_("mlp")}, {B_ "ffn_res_score.weight"}, {VX__D_EMBD}},
    /* KDA layers: as Kimi Linear's, with a full-rank output gate */
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.q_proj.weight"},
     {B_ "attn_q.weight"},
     {VX__D_EMBD, VX__D_KDA}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.k_proj.weight"},
     {B_ "attn_k.weight"},
     {VX__D_EMBD, VX__D_KDA}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.v_proj.weight"},
     {B_ "attn_v.weight"},
     {VX__D_EMBD, VX__D_KDA}},
    {VX__HR_CONV,
     VX__HR_IF_KDA,
     {L_ "self_attn.q_conv1d.weight"},
     {B_ "ssm_conv1d_q.weight"},
     {VX__D_CONV, VX__D_ONE, VX__D_KDA}},
    {VX__HR_CONV,
     VX__HR_IF_KDA,
     {L_ "self_attn.k_conv1d.weight"},
     {B_ "ssm_conv1d_k.weight"},
     {VX__D_CONV, VX__D_ONE, VX__D_KDA}},
    {VX__HR_CONV,
     VX__HR_IF_KDA,
     {L_ "self_attn.v_conv1d.weight"},
     {B_ "ssm_conv1d_v.weight"},
     {VX__D_CONV, VX__D_ONE, VX__D_KDA}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.f_a_proj.weight"},
     {B_ "ssm_f_a.weight"},
     {VX__D_EMBD, VX__D_KDA_HEAD}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.f_b_proj.weight"},
     {B_ "ssm_f_b.weight"},
     {VX__D_KDA_HEAD, VX__D_KDA}},
    {VX__HR_DIRECT, VX__HR_IF_KDA, {L_ "self_attn.dt_bias"}, {B_ "ssm_dt.bias"}, {VX__D_KDA}},
    {VX__HR_NEG_EXP, VX__HR_IF_KDA, {L_ "self_attn.A_log"}, {B_ "ssm_a"}, {VX__D_HEADS}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.b_proj.weight"},
     {B_ "ssm_beta.weight"},
     {VX__D_EMBD, VX__D_HEADS}},
    /* g_proj is the KDA gate on KDA layers and the output gate on latent ones */
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.g_proj.weight"},
     {B_ "ssm_g.weight"},
     {VX__D_EMBD, VX__D_KDA}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.o_norm.weight"},
     {B_ "ssm_norm.weight"},
     {VX__D_KDA_HEAD}},
    {VX__HR_DIRECT,
     VX__HR_IF_KDA,
     {L_ "self_attn.o_proj.weight"},
     {B_ "attn_output.weight"},
     {VX__D_KDA, VX__D_EMBD}},
    /* latent attention layers: a low-rank query or one q_proj, an optional output gate */
    {VX__HR_DIRECT,
     VX__HR_IF_MLA | VX__HR_IF_Q_LORA,
     {L_ "self_attn.q_a_proj.weight"},
     {B_ "attn_q_a.weight"},
     {VX__D_EMBD, VX__D_Q_LORA}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA | VX__HR_IF_Q_LORA,
     {L_ "self_attn.q_a_layernorm.weight"},
     {B_ "attn_q_a_norm.weight"},
     {VX__D_Q_LORA}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA | VX__HR_IF_Q_LORA,
     {L_ "self_attn.q_b_proj.weight"},
     {B_ "attn_q_b.weight"},
     {VX__D_Q_LORA, VX__D_QK}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA | VX__HR_IF_NO_Q_LORA,
     {L_ "self_attn.q_proj.weight"},
     {B_ "attn_q.weight"},
     {VX__D_EMBD, VX__D_QK}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA,
     {L_ "self_attn.kv_a_proj_with_mqa.weight"},
     {B_ "attn_kv_a_mqa.weight"},
     {VX__D_EMBD, VX__D_KV_A}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA,
     {L_ "self_attn.kv_a_layernorm.weight"},
     {B_ "attn_kv_a_norm.weight"},
     {VX__D_KV_LORA}},
    {VX__HR_KV_B,
     VX__HR_IF_MLA,
     {L_ "self_attn.kv_b_proj.weight"},
     {B_ "attn_k_b.weight", B_ "attn_v_b.weight"},
     {VX__D_NOPE, VX__D_KV_LORA, VX__D_HEADS}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA | VX__HR_OPTIONAL,
     {L_ "self_attn.g_proj.weight"},
     {B_ "attn_gate.weight"},
     {VX__D_EMBD, VX__D_O}},
    {VX__HR_DIRECT,
     VX__HR_IF_MLA,
     {L_ "self_attn.o_proj.weight"},
     {B_ "attn_output.weight"},
     {VX__D_O, VX__D_EMBD}},
    /* the leading dense layers */
    {VX__HR_DIRECT,
     VX__HR_IF_DENSE,
     {L_ "mlp.gate_proj.weight"},
     {B_ "ffn_gate.weight"},
     {VX__D_EMBD, VX__D_FF}},
    {VX__HR_DIRECT,
     VX__HR_IF_DENSE,
     {L_ "mlp.up_proj.weight"},
     {B_ "ffn_up.weight"},
     {VX__D_EMBD, VX__D_FF}},
    {VX__HR_DIRECT,
     VX__HR_IF_DENSE,
     {L_ "mlp.down_proj.weight"},
     {B_ "ffn_down.weight"},
     {VX__D_FF, VX__D_EMBD}},
    /* MoE layers: the router on the full width; the routed input down to the latent width, the
     * experts there, the sum normed and back up; the shared experts on the full width */
    {VX__HR_DIRECT,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.gate.weight"},
     {B_ "ffn_gate_inp.weight"},
     {VX__D_EMBD, VX__D_EXPERTS}},
    {VX__HR_DIRECT,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.gate.e_score_correction_bias"},
     {B_ "exp_probs_b.bias"},
     {VX__D_EXPERTS}},
    {VX__HR_DIRECT,
     VX__HR_IF_MOE | VX__HR_OPTIONAL,
     {L_ "block_sparse_moe.routed_expert_down_proj.weight"},
     {B_ "ffn_routed_down.weight"},
     {VX__D_EMBD, VX__D_LAT}},
    {VX__HR_DIRECT,
     VX__HR_IF_MOE | VX__HR_OPTIONAL,
     {L_ "block_sparse_moe.routed_expert_norm.weight"},
     {B_ "ffn_routed_norm.weight"},
     {VX__D_LAT}},
    {VX__HR_DIRECT,
     VX__HR_IF_MOE | VX__HR_OPTIONAL,
     {L_ "block_sparse_moe.routed_expert_up_proj.weight"},
     {B_ "ffn_routed_up.weight"},
     {VX__D_LAT, VX__D_EMBD}},
    {VX__HR_CT_MXFP4,
     VX__HR_IF_MOE | VX__HR_ALT,
     {L_ "block_sparse_moe.experts.{E}.w1.weight_packed",
      L_ "block_sparse_moe.experts.{E}.w1.weight_scale"},
     {B_ "ffn_gate_exps.weight"},
     {VX__D_LAT, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_STACK,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.experts.{E}.w1.weight"},
     {B_ "ffn_gate_exps.weight"},
     {VX__D_LAT, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_CT_MXFP4,
     VX__HR_IF_MOE | VX__HR_ALT,
     {L_ "block_sparse_moe.experts.{E}.w3.weight_packed",
      L_ "block_sparse_moe.experts.{E}.w3.weight_scale"},
     {B_ "ffn_up_exps.weight"},
     {VX__D_LAT, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_STACK,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.experts.{E}.w3.weight"},
     {B_ "ffn_up_exps.weight"},
     {VX__D_LAT, VX__D_FF_EXP, VX__D_EXPERTS}},
    {VX__HR_CT_MXFP4,
     VX__HR_IF_MOE | VX__HR_ALT,
     {L_ "block_sparse_moe.experts.{E}.w2.weight_packed",
      L_ "block_sparse_moe.experts.{E}.w2.weight_scale"},
     {B_ "ffn_down_exps.weight"},
     {VX__D_FF_EXP, VX__D_LAT, VX__D_EXPERTS}},
    {VX__HR_STACK,
     VX__HR_IF_MOE,
     {L_ "block_sparse_moe.experts.{E}.w2.weight"},
     {B_ "ffn_down_exps.weight"},
     {VX__D_FF_EXP, VX__D_LAT, VX__D_EXPERTS}},
    {VX__HR_DIRECT,
     VX__HR_IF_SHARED,
     {L_ "block_sparse_moe.shared_experts.gate_proj.weight"},
     {B_ "ffn_gate_shexp.weight"},
     {VX__D_EMBD, VX__D_FF_SH}},
    {VX__HR_DIRECT,
     VX__HR_IF_SHARED,
     {L_ "block_sparse_moe.shared_experts.up_proj.weight"},
     {B_ "ffn_up_shexp.weight"},
     {VX__D_EMBD, VX__D_FF_SH}},
    {VX__HR_DIRECT,
     VX__HR_IF_SHARED,
     {L_ "block_sparse_moe.shared_experts.down_proj.weight"},
     {B_ "ffn_down_shexp.weight"},
     {VX__D_FF_SH, VX__D_EMBD}},
};

#undef RES_

/* ---- the table ---------------------------------------------------------------------------- */

static const vx__hf_family families[] = {
    {
        .family = &vx_families[VX_FAMILY_GPT_OSS],
        .model_types = {"gpt_oss"},
        .hf_class = "GptOssForCausalLM",
        .keys = gpt_oss_keys,
        .n_keys = ARRAY_LEN(gpt_oss_keys),
        .rules = gpt_oss_rules,
        .n_rules = ARRAY_LEN(gpt_oss_rules),
        .rope_types = "yarn",
        .rope_required = true,
        .derive_head_dim = false,
        .quant_method = "mxfp4",
    },
    {
        .family = &vx_families[VX_FAMILY_QWEN3MOE],
        .model_types = {"qwen3_moe"},
        .hf_class = "Qwen3MoeForCausalLM",
        .keys = qwen3moe_keys,
        .n_keys = ARRAY_LEN(qwen3moe_keys),
        .rules = qwen3moe_rules,
        .n_rules = ARRAY_LEN(qwen3moe_rules),
        .rope_types = "yarn",
        .rope_required = false,
        .derive_head_dim = true,
        .quant_method = NULL,
    },
    {
        .family = &vx_families[VX_FAMILY_DEEPSEEK2],
        /* Kimi-K2 ships DeepSeek-V3's class under a model_type of its own */
        .model_types = {"deepseek_v3", "kimi_k2"},
        .hf_class = "DeepseekV3ForCausalLM",
        .keys = deepseek_keys,
        .n_keys = ARRAY_LEN(deepseek_keys),
        .rules = deepseek_rules,
        .n_rules = ARRAY_LEN(deepseek_rules),
        .rope_types = "yarn",
        .rope_required = false,
        .derive_head_dim = false,
        .quant_method = "fp8",
        .derive = deepseek_derive,
    },
    {
        .family = &vx_families[VX_FAMILY_KIMI_LINEAR],
        .model_types = {"kimi_linear"},
        .hf_class = "KimiLinearForCausalLM",
        .keys = kimi_linear_keys,
        .n_keys = ARRAY_LEN(kimi_linear_keys),
        .rules = kimi_linear_rules,
        .n_rules = ARRAY_LEN(kimi_linear_rules),
        .rope_types = NULL,
        .rope_required = false,
        .derive_head_dim = false,
        /* routed experts packed as MXFP4 (mxfp4-pack-quantized) are read byte for byte */
        .quant_method = "compressed-tensors",
        .derive = kimi_derive,
    },
    {
        .family = &vx_families[VX_FAMILY_KIMI_K3],
        .model_types = {"kimi_k3"},
        .hf_class = "KimiK3ForConditionalGeneration",
        .keys = k3_keys,
        .n_keys = ARRAY_LEN(k3_keys),
        .rules = k3_rules,
        .n_rules = ARRAY_LEN(k3_rules),
        .rope_types = NULL,
        .rope_required = false,
        .derive_head_dim = false,
        /* its routed experts ship as MXFP4 (mxfp4-pack-quantized), read byte for byte */
        .quant_method = "compressed-tensors",
        .derive = k3_derive,
        .prefix = "language_model.",
        .outer_keys = k3_outer_keys,
        .n_outer_keys = ARRAY_LEN(k3_outer_keys),
        .drops = k3_drops,
    },
};

const vx__hf_family *vx__hf_family_find(const char *model_type) {
    for (size_t i = 0; model_type && i < ARRAY_LEN(families); i++)
        for (int j = 0; j < VX__HF_TYPES && families[i].model_types[j]; j++)
            if (!strcmp(families[i].model_types[j], model_type)) return &families[i];
    return NULL;
}

const vx__hf_family *vx__hf_family_of(const vx_family *f) {
    for (size_t i = 0; f && i < ARRAY_LEN(families); i++)
        if (families[i].family == f) return &families[i];
    return NULL;
}

const char *vx__hf_family_names(void) {
    static char names[256];
    if (names[0]) return names;
    size_t len = 0;
    for (size_t i = 0; i < ARRAY_LEN(families); i++)
        for (int j = 0; j < VX__HF_TYPES && families[i].model_types[j] && len < sizeof names; j++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "",
                                    families[i].model_types[j]);
    return names;
}

const vx__hf_key *vx__hf_key_find(const vx__hf_family *fam, const char *key) {
    for (size_t i = 0; i < fam->n_keys; i++)
        if (!strcmp(fam->keys[i].hf, key)) return &fam->keys[i];
    for (size_t i = 0; i < ARRAY_LEN(common_keys); i++)
        if (!strcmp(common_keys[i].hf, key)) return &common_keys[i];
    return NULL;
}
