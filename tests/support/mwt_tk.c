/* tests/support/mwt_tk.c — see mwt_tk.h. */
#include "tests/support/mwt_tk.h"

#include <stdlib.h>
#include <string.h>

#include "vindex/vx_meta.h"

const mwt_tok mwt_chat_specials[MWT_N_CHAT_SPECIALS] = {
    {"<|start|>", 3},
    {"<|message|>", 3},
    {"<|end|>", 3},
    {"<|channel|>", 3},
    {"<|return|>", 3},
    {"<|call|>", 3},
    {"<|constrain|>", 3},
    {"<|im_start|>", 3},
    {"<|im_end|>", 3},
    {"<|endoftext|>", 3},
    {"<think>", 4},
    {"</think>", 4},
    {"<｜begin▁of▁sentence｜>", 3},
    {"<｜end▁of▁sentence｜>", 3},
    {"<｜User｜>", 3},
    {"<｜Assistant｜>", 3},
    {"<|im_system|>", 3},
    {"<|im_user|>", 3},
    {"<|im_assistant|>", 3},
    {"<|im_middle|>", 3},
    {"[EOS]", 3},
    {"<|open|>", 3},
    {"<|close|>", 3},
    {"<|sep|>", 3},
    {"<|end_of_msg|>", 3},
};

static int printable(int b) {
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

size_t mwt_byte_char(int b, char *out) {
    int cp = b;
    if (!printable(b)) {
        int k = 0;
        for (int i = 0; i < b; i++) k += !printable(i);
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

struct vx_meta *mwt_tk_meta(const char *arch, const char *model, const char *pre,
                            const mwt_tok *extra, size_t n_extra, const char *const *merges,
                            size_t n_merges, int32_t bos, int32_t eos, const char *chat_template) {
    size_t n = 256 + n_extra;
    char(*store)[4] = calloc(256, sizeof *store);
    const char **tok = calloc(n, sizeof *tok);
    size_t *len = calloc(n, sizeof *len), *mlen = calloc(n_merges + 1, sizeof *mlen);
    int32_t *type = calloc(n, sizeof *type);
    for (int b = 0; b < 256; b++) {
        len[b] = mwt_byte_char(b, store[b]);
        tok[b] = store[b];
        type[b] = 1;
    }
    for (size_t i = 0; i < n_extra; i++) {
        tok[256 + i] = extra[i].text;
        len[256 + i] = strlen(extra[i].text);
        type[256 + i] = extra[i].type;
    }
    for (size_t i = 0; i < n_merges; i++) mlen[i] = strlen(merges[i]);
    vx_meta *m = vx_meta_new();
    if (arch) vx_meta_set_str(m, "general.architecture", arch, strlen(arch));
    vx_meta_set_str(m, "tokenizer.ggml.model", model, strlen(model));
    if (pre) vx_meta_set_str(m, "tokenizer.ggml.pre", pre, strlen(pre));
    vx_meta_set_arr_str(m, "tokenizer.ggml.tokens", tok, len, n);
    vx_meta_set_arr(m, "tokenizer.ggml.token_type", VX_I32, type, n);
    if (n_merges) vx_meta_set_arr_str(m, "tokenizer.ggml.merges", merges, mlen, n_merges);
    if (eos >= 0) vx_meta_set_scalar(m, "tokenizer.ggml.eos_token_id", VX_I32, &eos);
    if (bos >= 0) vx_meta_set_scalar(m, "tokenizer.ggml.bos_token_id", VX_I32, &bos);
    if (chat_template)
        vx_meta_set_str(m, "tokenizer.chat_template", chat_template, strlen(chat_template));
    free(store);
    free(tok);
    free(len);
    free(mlen);
    free(type);
    return m;
}
