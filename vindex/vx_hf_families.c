/* vindex/vx_hf_families.c — the Hugging Face families as data: which config.json keys each knows
 * (and the GGUF keys llama.cpp's converter writes for them), and how its tensors map to GGUF names.
 * docs/safetensors.md is the readable form of these tables. */
#include "vindex/vx_hf_internal.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Keys every family reads in code (vx_hf_config.c) rather than through a row's kind. */
#define CODE_KEYS                                                                                  \
    {"model_type", HK_CODE, NULL, HP_NONE, 0, NULL},                                               \
        {"architectures", HK_CODE, NULL, HP_NONE, 0, NULL},                                        \
        {"rope_theta", HK_CODE, NULL, HP_NONE, 0, NULL},                                           \
        {"rope_scaling", HK_CODE, NULL, HP_NONE, 0, NULL},                                         \
        {"rope_parameters", HK_CODE, NULL, HP_NONE, 0, NULL},                                      \
        {"layer_types", HK_CODE, NULL, HP_NONE, 0, NULL},                                          \
        {"quantization_config", HK_CODE, NULL, HP_NONE, 0, NULL}, {                                \
        "tie_word_embeddings", HK_CODE, NULL, HP_NONE, 0, NULL                                     \
    }

/* Keys that only matter for training or for the Python runtime. */
#define TRAINING_KEYS                                                                              \
    {"attention_dropout", HK_IGNORE, NULL, HP_NONE, 0, "training only"},                           \
        {"initializer_range", HK_IGNORE, NULL, HP_NONE, 0, "training only"},                       \
        {"router_aux_loss_coef", HK_IGNORE, NULL, HP_NONE, 0, "training only"},                    \
        {"output_router_logits", HK_IGNORE, NULL, HP_NONE, 0, "training only"},                    \
        {"use_cache", HK_IGNORE, NULL, HP_NONE, 0, "Python runtime setting"},                      \
        {"torch_dtype", HK_IGNORE, NULL, HP_NONE, 0, "each tensor carries its own dtype"},         \
        {"dtype", HK_IGNORE, NULL, HP_NONE, 0, "each tensor carries its own dtype"},               \
        {"transformers_version", HK_IGNORE, NULL, HP_NONE, 0, "provenance only"},                  \
        {"_name_or_path", HK_IGNORE, NULL, HP_NONE, 0, "provenance only"},                         \
        {"bos_token_id", HK_IGNORE, NULL, HP_NONE, 0, "tokenizer files are carried"},              \
        {"eos_token_id", HK_IGNORE, NULL, HP_NONE, 0, "tokenizer files are carried"}, {            \
        "pad_token_id", HK_IGNORE, NULL, HP_NONE, 0, "tokenizer files are carried"                 \
    }

/* The rotary table some checkpoints save: recomputed from rope.freq_base and the rope scaling. */
#define INV_FREQ_DROPS                                                                             \
    {HR_DROP, 0,   {"model.layers.{L}.self_attn.rotary_emb.inv_freq"},                             \
     {NULL},  {0}, "rotary inv_freq is recomputed from config (rope.freq_base, rope scaling)"},    \
    {                                                                                              \
        HR_DROP, 0, {"model.rotary_emb.inv_freq"}, {NULL}, {0},                                    \
            "rotary inv_freq is recomputed from config (rope.freq_base, rope scaling)"             \
    }

#define L_ "model.layers.{L}."
#define B_ "blk.{L}."

/* ---- gpt-oss (GptOssForCausalLM) ---------------------------------------------------------- */

static const hf_key gpt_oss_keys[] = {
    {"num_hidden_layers", HK_U32, "block_count", HP_LAYERS, HK_REQUIRED, NULL},
    {"max_position_embeddings", HK_U32, "context_length", HP_CTX, HK_REQUIRED, NULL},
    {"hidden_size", HK_U32, "embedding_length", HP_EMBD, HK_REQUIRED, NULL},
    {"intermediate_size", HK_U32, "feed_forward_length", HP_NONE, HK_REQUIRED, NULL},
    {"intermediate_size", HK_U32, "expert_feed_forward_length", HP_FF_EXP, HK_REQUIRED, NULL},
    {"num_attention_heads", HK_U32, "attention.head_count", HP_HEADS, HK_REQUIRED, NULL},
    {"num_key_value_heads", HK_U32, "attention.head_count_kv", HP_KV_HEADS, HK_REQUIRED, NULL},
    {"head_dim", HK_U32, "attention.key_length", HP_HEAD_DIM, HK_REQUIRED, NULL},
    {"head_dim", HK_U32, "attention.value_length", HP_NONE, HK_REQUIRED, NULL},
    {"rms_norm_eps", HK_F32, "attention.layer_norm_rms_epsilon", HP_NONE, HK_REQUIRED, NULL},
    {"num_local_experts", HK_U32, "expert_count", HP_EXPERTS, HK_REQUIRED, NULL},
    {"num_experts_per_tok", HK_U32, "expert_used_count", HP_EXPERTS_USED, HK_REQUIRED, NULL},
    {"experts_per_token", HK_U32, "expert_used_count", HP_EXPERTS_USED, HK_REQUIRED, NULL},
    {"sliding_window", HK_U32, "attention.sliding_window", HP_SWA, HK_REQUIRED, NULL},
    /* The clamp of the gpt-oss GLU (gate <= limit, -limit <= up <= limit). llama.cpp hard-codes 7
     * (and alpha 1.702, which HF's config does not carry either); the model layer reads the limit
     * from {arch}.swiglu_clamp_exp, the key llama.cpp uses for clamped SwiGLU experts. */
    {"swiglu_limit", HK_F32, "swiglu_clamp_exp", HP_NONE, 0, "7.0"},
    {"vocab_size", HK_U32, NULL, HP_VOCAB, HK_REQUIRED, NULL},
    {"hidden_act", HK_EXPECT, NULL, HP_NONE, 0, "\"silu\""},
    {"attention_bias", HK_EXPECT, NULL, HP_NONE, 0, "true"},
    {"initial_context_length", HK_CODE, NULL, HP_NONE, 0, NULL},
    CODE_KEYS,
    TRAINING_KEYS,
};

static const hf_rule gpt_oss_rules[] = {
    {HR_DIRECT, 0, {"model.embed_tokens.weight"}, {"token_embd.weight"}, {D_EMBD, D_VOCAB}, NULL},
    {HR_DIRECT, 0, {"model.norm.weight"}, {"output_norm.weight"}, {D_EMBD}, NULL},
    {HR_DIRECT, 0, {"lm_head.weight"}, {"output.weight"}, {D_EMBD, D_VOCAB}, NULL},
    {HR_DIRECT, 0, {L_ "input_layernorm.weight"}, {B_ "attn_norm.weight"}, {D_EMBD}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.q_proj.weight"}, {B_ "attn_q.weight"}, {D_EMBD, D_Q}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.q_proj.bias"}, {B_ "attn_q.bias"}, {D_Q}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.k_proj.weight"}, {B_ "attn_k.weight"}, {D_EMBD, D_KV}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.k_proj.bias"}, {B_ "attn_k.bias"}, {D_KV}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.v_proj.weight"}, {B_ "attn_v.weight"}, {D_EMBD, D_KV}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.v_proj.bias"}, {B_ "attn_v.bias"}, {D_KV}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.o_proj.weight"}, {B_ "attn_output.weight"}, {D_Q, D_EMBD}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.o_proj.bias"}, {B_ "attn_output.bias"}, {D_EMBD}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.sinks"}, {B_ "attn_sinks.weight"}, {D_HEADS}, NULL},
    {HR_DIRECT,
     0,
     {L_ "post_attention_layernorm.weight"},
     {B_ "post_attention_norm.weight"},
     {D_EMBD},
     NULL},
    {HR_DIRECT, 0, {L_ "mlp.router.weight"}, {B_ "ffn_gate_inp.weight"}, {D_EMBD, D_EXPERTS}, NULL},
    {HR_DIRECT, 0, {L_ "mlp.router.bias"}, {B_ "ffn_gate_inp.bias"}, {D_EXPERTS}, NULL},
    /* experts: native MXFP4, else unquantized [E, in, out] */
    {HR_MXFP4,
     HR_SPLIT | HR_ALT,
     {L_ "mlp.experts.gate_up_proj_blocks", L_ "mlp.experts.gate_up_proj_scales"},
     {B_ "ffn_gate_exps.weight", B_ "ffn_up_exps.weight"},
     {D_EMBD, D_FF_EXP, D_EXPERTS},
     NULL},
    {HR_TRANSPOSE,
     HR_SPLIT,
     {L_ "mlp.experts.gate_up_proj"},
     {B_ "ffn_gate_exps.weight", B_ "ffn_up_exps.weight"},
     {D_EMBD, D_FF_EXP, D_EXPERTS},
     NULL},
    {HR_ROWS,
     HR_SPLIT,
     {L_ "mlp.experts.gate_up_proj_bias"},
     {B_ "ffn_gate_exps.bias", B_ "ffn_up_exps.bias"},
     {D_FF_EXP, D_EXPERTS},
     NULL},
    {HR_MXFP4,
     HR_ALT,
     {L_ "mlp.experts.down_proj_blocks", L_ "mlp.experts.down_proj_scales"},
     {B_ "ffn_down_exps.weight"},
     {D_FF_EXP, D_EMBD, D_EXPERTS},
     NULL},
    {HR_TRANSPOSE,
     0,
     {L_ "mlp.experts.down_proj"},
     {B_ "ffn_down_exps.weight"},
     {D_FF_EXP, D_EMBD, D_EXPERTS},
     NULL},
    {HR_DIRECT,
     0,
     {L_ "mlp.experts.down_proj_bias"},
     {B_ "ffn_down_exps.bias"},
     {D_EMBD, D_EXPERTS},
     NULL},
    INV_FREQ_DROPS,
};

const vx_hf_family vx_hf_gpt_oss = {
    .model_type = "gpt_oss",
    .hf_class = "GptOssForCausalLM",
    .arch = "gpt-oss",
    .keys = gpt_oss_keys,
    .n_keys = ARRAY_LEN(gpt_oss_keys),
    .rules = gpt_oss_rules,
    .n_rules = ARRAY_LEN(gpt_oss_rules),
    .rope_types = "yarn",
    .rope_required = true,
    .sliding_layers = true,
    .derive_head_dim = false,
    .quant_method = "mxfp4",
};

/* ---- qwen3moe (Qwen3MoeForCausalLM) ------------------------------------------------------- */

static const hf_key qwen3moe_keys[] = {
    {"num_hidden_layers", HK_U32, "block_count", HP_LAYERS, HK_REQUIRED, NULL},
    {"max_position_embeddings", HK_U32, "context_length", HP_CTX, HK_REQUIRED, NULL},
    {"hidden_size", HK_U32, "embedding_length", HP_EMBD, HK_REQUIRED, NULL},
    {"intermediate_size", HK_U32, "feed_forward_length", HP_NONE, 0, NULL},
    {"moe_intermediate_size", HK_U32, "expert_feed_forward_length", HP_FF_EXP, HK_REQUIRED, NULL},
    {"num_attention_heads", HK_U32, "attention.head_count", HP_HEADS, HK_REQUIRED, NULL},
    {"num_key_value_heads", HK_U32, "attention.head_count_kv", HP_KV_HEADS, HK_REQUIRED, NULL},
    {"head_dim", HK_U32, "attention.key_length", HP_HEAD_DIM, 0, NULL},
    {"head_dim", HK_U32, "attention.value_length", HP_NONE, 0, NULL},
    {"rms_norm_eps", HK_F32, "attention.layer_norm_rms_epsilon", HP_NONE, HK_REQUIRED, NULL},
    {"num_experts", HK_U32, "expert_count", HP_EXPERTS, HK_REQUIRED, NULL},
    {"num_experts_per_tok", HK_U32, "expert_used_count", HP_EXPERTS_USED, HK_REQUIRED, NULL},
    {"vocab_size", HK_U32, NULL, HP_VOCAB, HK_REQUIRED, NULL},
    {"hidden_act", HK_EXPECT, NULL, HP_NONE, 0, "\"silu\""},
    {"attention_bias", HK_EXPECT, NULL, HP_NONE, 0, "false"},
    {"decoder_sparse_step", HK_EXPECT, NULL, HP_NONE, 0, "1"},
    {"mlp_only_layers", HK_EXPECT, NULL, HP_NONE, 0, "[]"},
    /* llama.cpp always renormalizes the selected weights for qwen3moe; HF's default is false */
    {"norm_topk_prob", HK_EXPECT, NULL, HP_NONE, HK_REQUIRED, "true"},
    {"use_sliding_window", HK_EXPECT, NULL, HP_NONE, 0, "false"},
    {"sliding_window", HK_IGNORE, NULL, HP_NONE, 0, "used only with use_sliding_window"},
    {"max_window_layers", HK_IGNORE, NULL, HP_NONE, 0, "used only with use_sliding_window"},
    CODE_KEYS,
    TRAINING_KEYS,
};

static const hf_rule qwen3moe_rules[] = {
    {HR_DIRECT, 0, {"model.embed_tokens.weight"}, {"token_embd.weight"}, {D_EMBD, D_VOCAB}, NULL},
    {HR_DIRECT, 0, {"model.norm.weight"}, {"output_norm.weight"}, {D_EMBD}, NULL},
    {HR_DIRECT, HR_OPT_TIED, {"lm_head.weight"}, {"output.weight"}, {D_EMBD, D_VOCAB}, NULL},
    {HR_DIRECT, 0, {L_ "input_layernorm.weight"}, {B_ "attn_norm.weight"}, {D_EMBD}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.q_proj.weight"}, {B_ "attn_q.weight"}, {D_EMBD, D_Q}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.k_proj.weight"}, {B_ "attn_k.weight"}, {D_EMBD, D_KV}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.v_proj.weight"}, {B_ "attn_v.weight"}, {D_EMBD, D_KV}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.o_proj.weight"}, {B_ "attn_output.weight"}, {D_Q, D_EMBD}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.q_norm.weight"}, {B_ "attn_q_norm.weight"}, {D_HEAD_DIM}, NULL},
    {HR_DIRECT, 0, {L_ "self_attn.k_norm.weight"}, {B_ "attn_k_norm.weight"}, {D_HEAD_DIM}, NULL},
    {HR_DIRECT, 0, {L_ "post_attention_layernorm.weight"}, {B_ "ffn_norm.weight"}, {D_EMBD}, NULL},
    {HR_DIRECT, 0, {L_ "mlp.gate.weight"}, {B_ "ffn_gate_inp.weight"}, {D_EMBD, D_EXPERTS}, NULL},
    {HR_STACK,
     0,
     {L_ "mlp.experts.{E}.gate_proj.weight"},
     {B_ "ffn_gate_exps.weight"},
     {D_EMBD, D_FF_EXP, D_EXPERTS},
     NULL},
    {HR_STACK,
     0,
     {L_ "mlp.experts.{E}.up_proj.weight"},
     {B_ "ffn_up_exps.weight"},
     {D_EMBD, D_FF_EXP, D_EXPERTS},
     NULL},
    {HR_STACK,
     0,
     {L_ "mlp.experts.{E}.down_proj.weight"},
     {B_ "ffn_down_exps.weight"},
     {D_FF_EXP, D_EMBD, D_EXPERTS},
     NULL},
    INV_FREQ_DROPS,
};

const vx_hf_family vx_hf_qwen3moe = {
    .model_type = "qwen3_moe",
    .hf_class = "Qwen3MoeForCausalLM",
    .arch = "qwen3moe",
    .keys = qwen3moe_keys,
    .n_keys = ARRAY_LEN(qwen3moe_keys),
    .rules = qwen3moe_rules,
    .n_rules = ARRAY_LEN(qwen3moe_rules),
    .rope_types = "yarn",
    .rope_required = false,
    .sliding_layers = false,
    .derive_head_dim = true,
    .quant_method = NULL,
};
