/* tests/support/mwt_tiktoken.h — Kimi's tokenizer written by a test both ways: the Hugging Face
 * files (tiktoken.model, tokenizer_config.json, tokenization_kimi.py's pattern, config.json) and
 * the GGUF keys llama.cpp's converter writes for the same vocabulary (tokens as GPT-2 byte-level
 * text, specials as control tokens, `[PAD<id>]` up to vocab_size, merges recovered by running BPE
 * over the ranks below each token's own, pre-tokenizer kimi-k2). The vocabulary is a byte-level
 * BPE trained here on a text, or any ranks the test has. */
#ifndef MWT_TIKTOKEN_H
#define MWT_TIKTOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vx_meta;

/* Token r's bytes are b[r][0 .. len[r]) (the rank is the id). */
typedef struct mwt_ranks {
    unsigned char **b;
    size_t *len;
    int32_t n;
} mwt_ranks;

/* The 256 bytes (ranked in a shuffled order, as tiktoken's are not byte order) and n_merges
 * merges of the most frequent adjacent pair over text's space-led words. */
void mwt_ranks_train(mwt_ranks *r, const char *text, int n_merges);
/* An empty vocabulary to mwt_ranks_add to. */
void mwt_ranks_add(mwt_ranks *r, const void *bytes, size_t len);
void mwt_ranks_free(mwt_ranks *r);

/* Kimi's named special tokens: base + k holds text (the rest of the 258 are reserved). */
typedef struct mwt_kimi_special {
    int k;
    const char *text;
} mwt_kimi_special;
#define MWT_KIMI_N_SPECIALS 14
extern const mwt_kimi_special mwt_kimi_specials[MWT_KIMI_N_SPECIALS];

/* tiktoken.model, tokenizer_config.json (auto_map, added_tokens_decoder, [BOS] / [EOS]) and a
 * tokenization_kimi.py holding the pattern into dir; config.json too when config_json is
 * non-NULL (its text). Returns 0 or -1. */
int mwt_kimi_write_hf(const char *dir, const mwt_ranks *r, const char *config_json);
/* The same with the named specials given: specials[k] is the text of id ranks + k (k < n; the
 * rest reserved); no config.json. */
int mwt_tiktoken_write(const char *dir, const mwt_ranks *r, const char *const *specials, int n);
/* The same vocabulary as llama.cpp's converter writes it into a GGUF, vocab_size tokens; eos is
 * the id written as tokenizer.ggml.eos_token_id. */
struct vx_meta *mwt_kimi_gguf_meta(const mwt_ranks *r, int64_t vocab_size, int32_t eos,
                                   bool merges);

#endif
