/* tests/fuzz/fuzz_tiktoken.c — a Hugging Face tiktoken tokenizer (Kimi's) from arbitrary files:
 * the input up to its first NUL is tiktoken.model, the rest tokenizer_config.json (a valid Kimi
 * one when the rest is empty, so the ranks parser is reached). Whatever loads encodes a mixed
 * text to ids inside the vocabulary that decode back to the same bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fz.h"
#include "tokenizer/tk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char kimi_config[] =
    "{\"auto_map\": {\"AutoTokenizer\": [\"tokenization_kimi.TikTokenTokenizer\", null]}, "
    "\"added_tokens_decoder\": {}}";

static void check(const tk_tokenizer *t) {
    static const char text[] = "Hello, 世界! It's 2026 👍🏽\n\tdone";
    tk_ids ids = {0};
    mw_err err;
    if (tk_encode(t, text, sizeof text - 1, 0, &ids, &err) == 0) {
        for (size_t i = 0; i < ids.n; i++)
            if (ids.v[i] < 0 || ids.v[i] >= tk_n_vocab(t)) abort();
        tk_text back = {0};
        if (tk_decode(t, ids.v, ids.n, 0, &back, &err) == 0 &&
            (back.n != sizeof text - 1 || memcmp(back.s, text, back.n)))
            abort();
        tk_text_free(&back);
    }
    tk_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_model = nul ? (size_t)(nul - data) : size;
    const bool own = nul && size > n_model + 1;
    const uint8_t *cfg = own ? nul + 1 : (const uint8_t *)kimi_config;
    size_t n_cfg = own ? size - n_model - 1 : sizeof kimi_config - 1;
    fz_file("tokenizer_config.json", cfg, n_cfg);
    const char *model = fz_file("tiktoken.model", data, n_model);
    tk_tokenizer *t;
    mw_err err;
    if (tk_load_tiktoken(model, NULL, &t, &err) == 0) {
        check(t);
        tk_free(t);
    }
    return 0;
}
