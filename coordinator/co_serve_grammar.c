/* coordinator/co_serve_grammar.c — the server's constrained decoding (co_serve_grammar.h). */
#include "coordinator/co_serve_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk.h"
#include "tokenizer/tk_chat.h"

void co_grammar_trie_init(co_grammar_trie *t) {
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
}

void co_grammar_trie_free(co_grammar_trie *t) {
    gr_vocab_free(t->v);
    pthread_mutex_destroy(&t->mu);
}

gr_vocab *co_grammar_vocab_new(const tk_tokenizer *tok, const tk_chat *chat, mw_err *err) {
    const int32_t n = tk_n_vocab(tok);
    const char **bytes = calloc((size_t)n, sizeof *bytes);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    int32_t *eos = calloc((size_t)n, sizeof *eos);
    gr_vocab *v = NULL;
    int n_eos = 0;
    if (!bytes || !lens || !eos) {
        mw_errf(err, "out of memory");
        goto out;
    }
    for (int32_t id = 0; id < n; id++) {
        /* a chat's turn ends at its format's stop tokens only (harmony's <|end|> goes on) */
        if (chat ? tk_chat_is_stop(chat, id) : tk_is_eog(tok, id)) eos[n_eos++] = id;
        /* a control token decodes to nothing: never part of the value */
        if (tk_is_control(tok, id) || tk_piece(tok, id, false, &bytes[id], &lens[id]))
            bytes[id] = "", lens[id] = 0;
    }
    if (gr_vocab_new(bytes, lens, n, eos, n_eos, &v, err)) v = NULL;
out:
    free(bytes);
    free(lens);
    free(eos);
    return v;
}

const gr_vocab *co_grammar_trie_get(co_grammar_trie *t, const tk_tokenizer *tok,
                                    const tk_chat *chat, mw_err *err) {
    pthread_mutex_lock(&t->mu);
    if (!t->v && !t->err[0]) {
        mw_err e = {{0}};
        t->v = co_grammar_vocab_new(tok, chat, &e);
        if (!t->v) snprintf(t->err, sizeof t->err, "the vocabulary's trie: %s", e.msg);
    }
    const gr_vocab *v = t->v;
    if (!v) mw_errf(err, "%s", t->err);
    pthread_mutex_unlock(&t->mu);
    return v;
}

typedef struct constraint {
    gr_grammar *g;
    gr_matcher *m;
} constraint;

static void c_end(void *state) {
    constraint *c = state;
    gr_matcher_free(c->m);
    gr_free(c->g);
    free(c);
}

void *co_grammar_constraint(const gr_vocab *v, const char *schema, const char *before,
                            const char *after, mw_err *err) {
    constraint *c = calloc(1, sizeof *c);
    if (!c) {
        mw_errf(err, "out of memory");
        return NULL;
    }
    const int rc =
        schema ? gr_compile_text(schema, strlen(schema), &c->g, err) : gr_compile(NULL, &c->g, err);
    if (rc || gr_wrap(c->g, before, after, err) || gr_matcher_new(c->g, v, &c->m, err)) {
        c_end(c);
        return NULL;
    }
    return c;
}

static int64_t c_mask(void *state, float *logits, int64_t n) {
    constraint *c = state;
    return gr_matcher_apply(c->m, logits, n);
}

static int c_accept(void *state, int32_t token) {
    constraint *c = state;
    return gr_matcher_accept(c->m, token) < 0 ? -1 : 0;
}

const co_constraint_ops co_grammar_constraint_ops = {
    .mask = c_mask, .accept = c_accept, .end = c_end};
