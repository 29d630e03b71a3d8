/* tests/support/mwt_kimi_hf.h — a Hugging Face Kimi Linear checkpoint written from a GGUF's
 * weights (llama.cpp's fixtures), undoing each of the converter's steps: names back to the HF
 * ones, shapes reversed, conv taps [D, 1, K], ssm_a (−exp(A_log)) back to A_log, attn_k_b /
 * attn_v_b joined into kv_b_proj, the stacked experts split per expert (w1 gate, w3 up, w2 down)
 * either as compressed-tensors MXFP4 (weight_packed + weight_scale, the GGUF's MXFP4 bits moved
 * back) or as F32 (dequantized), the config.json llama.cpp's keys came from, and the tokenizer
 * files (tiktoken.model + tokenizer_config.json from the GGUF's vocabulary). Two shards and an
 * index. */
#ifndef MWT_KIMI_HF_H
#define MWT_KIMI_HF_H

#include <stdbool.h>

/* Kimi Linear's layout from a kimi-linear GGUF; Kimi K3's from a kimi-k3 one (the text model under
 * `language_model.` and text_config, the residual scores as a norm / projection pair, g_proj for
 * both gates, the latent MoE's projections, a vision tower's tensors beside them). Returns 0, or
 * -1 with a message printed. The HF tensor named `skip` (or none) is left out. */
int mwt_kimi_hf(const char *gguf, const char *dir, bool packed_experts, const char *skip);

/* The compressed-tensors MXFP4 of one ggml block_mxfp4 (17 bytes): 16 packed bytes (element 2k in
 * the low nibble of byte k, 2k+1 in its high one) and the E8M0 scale. */
void mwt_ct_from_block(const unsigned char blk[17], unsigned char packed[16], unsigned char *scale);

#endif
