/* tests/fuzz/fuzz_grammar.c — the grammar (grammar/gr.h) on arbitrary input: a JSON schema up to
 * the first NUL, then text. A schema that compiles gets the text fed byte by byte, and a small
 * vocabulary cut out of the text (pieces of 1 to 4 bytes) gets its mask computed along the way:
 * each token's bit must say exactly whether the automaton takes its bytes (the brute force). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NV 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    const size_t sl = nul ? (size_t)(nul - data) : size;
    const uint8_t *text = nul ? nul + 1 : data + size;
    const size_t tl = nul ? size - sl - 1 : 0;
    gr_grammar *g = NULL;
    if (gr_compile_text((const char *)data, sl, &g, NULL)) return 0;
    /* the vocabulary: pieces of the text, and one end token (id NV) */
    const char *bytes[NV + 1];
    size_t lens[NV + 1];
    int32_t n = 0;
    for (size_t at = 0; at < tl && n < NV; n++) {
        const size_t l = 1 + (at + (size_t)n) % 4 < tl - at ? 1 + (at + (size_t)n) % 4 : tl - at;
        bytes[n] = (const char *)text + at;
        lens[n] = l;
        at += l;
    }
    bytes[n] = "";
    lens[n] = 0;
    const int32_t eos = n++;
    gr_vocab *v = NULL;
    gr_matcher *m = NULL;
    if (gr_vocab_new(bytes, lens, n, &eos, 1, &v, NULL) || gr_matcher_new(g, v, &m, NULL))
        __builtin_trap(); /* a valid vocabulary and grammar */
    gr_state s;           /* the matcher's state, kept beside it by the same tokens */
    gr_state_init(g, &s);
    for (size_t step = 0; step < 256; step++) {
        const uint64_t *bits = gr_matcher_mask(m);
        for (int32_t id = 0; id < n; id++) { /* the mask against the brute force */
            bool want = id == eos ? gr_complete(g, &s) : true;
            gr_state c = s;
            for (size_t k = 0; id != eos && k < lens[id] && want; k++)
                want = gr_feed(g, &c, (uint8_t)bytes[id][k]) == 0;
            if (want != (bool)(bits[id >> 6] >> (id & 63) & 1)) __builtin_trap();
        }
        /* the next token: the first allowed from a place the text picks */
        if (!tl) break;
        int32_t pick = -1;
        for (int32_t k = 0; k < n && pick < 0; k++) {
            const int32_t id = (int32_t)((text[step % tl] + (size_t)k) % (size_t)n);
            if (bits[id >> 6] >> (id & 63) & 1) pick = id;
        }
        if (pick < 0) break;
        const int rc = gr_matcher_accept(m, pick);
        if (rc < 0) __builtin_trap(); /* the mask allowed it */
        if (rc == 1) break;
        for (size_t k = 0; k < lens[pick]; k++)
            if (gr_feed(g, &s, (uint8_t)bytes[pick][k])) __builtin_trap();
    }
    gr_matcher_free(m);
    gr_vocab_free(v);
    gr_free(g);
    return 0;
}
