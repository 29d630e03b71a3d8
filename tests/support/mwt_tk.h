/* tests/support/mwt_tk.h — small byte-level vocabularies built in a test: the 256 GPT-2 byte
 * tokens (id = byte), then the given extra tokens with their types, merges given as "left right"
 * in GPT-2's byte-level spelling, under a family name and pre-tokenizer. */
#ifndef MWT_TK_H
#define MWT_TK_H

#include <stddef.h>
#include <stdint.h>

struct vx_meta;

typedef struct mwt_tok {
    const char *text;
    int32_t type; /* 1 normal, 3 control, 4 user-defined */
} mwt_tok;

/* The special tokens of every chat format we render (harmony, ChatML / Qwen3, DeepSeek-V3 / R1,
 * Kimi-K2, Kimi K3) and [EOS], with their types (3 control, 4 user-defined): a vocabulary holding
 * all of them serves every chat test. */
#define MWT_N_CHAT_SPECIALS 25
extern const mwt_tok mwt_chat_specials[MWT_N_CHAT_SPECIALS];

/* The GPT-2 byte-level spelling of byte b (UTF-8, 1 or 2 bytes); returns its length. */
size_t mwt_byte_char(int b, char *out);
/* A metadata table holding such a vocabulary; eos/bos are ids (-1: none). */
struct vx_meta *mwt_tk_meta(const char *arch, const char *model, const char *pre,
                            const mwt_tok *extra, size_t n_extra, const char *const *merges,
                            size_t n_merges, int32_t bos, int32_t eos, const char *chat_template);

#endif
