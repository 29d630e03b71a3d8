/* coordinator/co_serve_grammar.c — the server's constrained decoding (co_serve_grammar.h). */
#include "coordinator/co_serve_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_toolcall.h"
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
    char *marks = NULL; /* the markers' bytes: MARK and their text, one after another */
    size_t marks_len = 0;
    size_t *moff = calloc((size_t)n, sizeof *moff); /* a marker's offset in marks + 1, or 0 */
    size_t *lens = calloc((size_t)n, sizeof *lens);
    int32_t *eos = calloc((size_t)n, sizeof *eos);
    gr_vocab *v = NULL;
    int n_eos = 0;
    const char *const *specials = chat ? co_toolcall_specials(tk_chat_name(chat)) : NULL;
    if (!bytes || !lens || !eos || !moff) {
        mw_errf(err, "out of memory");
        goto out;
    }
    for (int32_t id = 0; id < n; id++) {
        /* a chat's turn ends at its format's stop tokens only (harmony's <|end|> goes on) */
        if (chat ? tk_chat_is_stop(chat, id) : tk_is_eog(tok, id)) eos[n_eos++] = id;
        /* a control token decodes to nothing: never part of the value, unless it is a tool
         * call's marker, written as its text */
        if (tk_is_control(tok, id) && specials) {
            const char *b;
            size_t len;
            bool marker = false;
            if (!tk_piece(tok, id, true, &b, &len))
                for (int i = 0; specials[i] && !marker; i++)
                    marker = strlen(specials[i]) == len && !memcmp(specials[i], b, len);
            if (marker) { /* its bytes: MARK and its text, kept after the table (below) */
                char *m = realloc(marks, marks_len + len + 1);
                if (!m) {
                    mw_errf(err, "out of memory");
                    goto out;
                }
                marks = m;
                marks[marks_len] = CO_GRAMMAR_MARK;
                memcpy(marks + marks_len + 1, b, len);
                moff[id] = marks_len + 1;
                lens[id] = len + 1;
                marks_len += len + 1;
                continue;
            }
        }
        if (tk_is_control(tok, id) || tk_piece(tok, id, false, &bytes[id], &lens[id]))
            bytes[id] = "", lens[id] = 0;
        /* a byte MARK stands only for a marker: a token holding it (a raw byte token) is never
         * part of a value (not UTF-8) nor of a marker */
        if (lens[id] && memchr(bytes[id], CO_GRAMMAR_MARK, lens[id])) bytes[id] = "", lens[id] = 0;
    }
    for (int32_t id = 0; id < n; id++)
        if (moff[id]) bytes[id] = marks + moff[id] - 1;
    if (gr_vocab_new(bytes, lens, n, eos, n_eos, &v, err)) v = NULL;
out:
    free(marks);
    free(moff);
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

static void *with_grammar(const gr_vocab *v, constraint *c, int rc, mw_err *err) {
    if (rc || gr_matcher_new(c->g, v, &c->m, err)) {
        c_end(c);
        return NULL;
    }
    return c;
}

void *co_grammar_constraint(const gr_vocab *v, const char *schema, mw_err *err) {
    constraint *c = calloc(1, sizeof *c);
    if (!c) {
        mw_errf(err, "out of memory");
        return NULL;
    }
    const int rc =
        schema ? gr_compile_text(schema, strlen(schema), &c->g, err) : gr_compile(NULL, &c->g, err);
    return with_grammar(v, c, rc, err);
}

/* Which of the format's markers (bit i: specials[i]) the vocabulary has as tokens. */
static uint32_t markers_held(const gr_vocab *v, const char *const *sp) {
    uint32_t has = 0;
    for (int i = 0; sp && sp[i] && i < 32; i++) {
        char mk[64];
        const int ml = snprintf(mk, sizeof mk, "%c%s", CO_GRAMMAR_MARK, sp[i]);
        if (ml > 0 && (size_t)ml < sizeof mk && gr_vocab_find(v, mk, (size_t)ml) >= 0)
            has |= 1u << i;
    }
    return has;
}

/* The markers in text that the vocabulary has as tokens (has, of sp) written as their bytes there
 * (MARK first), so that the model writes the tokens, not their spelling. -1: too long. */
static int mark_markers(const char *const *sp, uint32_t has, char *text, size_t cap) {
    for (int i = 0; sp && sp[i] && i < 32; i++) {
        if (!(has >> i & 1)) continue;
        const size_t ml = strlen(sp[i]) + 1;
        for (char *at = strstr(text, sp[i]); at; at = strstr(at + ml, sp[i])) {
            if (at > text && at[-1] == CO_GRAMMAR_MARK) continue;
            const size_t tl = strlen(text);
            if (tl + 2 > cap) return -1;
            memmove(at + 1, at, tl - (size_t)(at - text) + 1);
            *at = CO_GRAMMAR_MARK;
        }
    }
    return 0;
}

void *co_grammar_call_constraint(const gr_vocab *v, const char *chat, const char *tools,
                                 mw_err *err) {
    json_t *list = json_loads(tools, 0, NULL);
    const size_t n = json_array_size(list);
    constraint *c = calloc(1, sizeof *c);
    char(*aff)[2][GR_MAX_AFFIX + 1] = n && n <= GR_MAX_BRANCHES ? calloc(n, sizeof *aff) : NULL;
    const json_t *schemas[GR_MAX_BRANCHES];
    const char *const *sp = co_toolcall_specials(chat);
    const uint32_t has = markers_held(v, sp);
    const char *pre[GR_MAX_BRANCHES], *post[GR_MAX_BRANCHES];
    int rc =
        !c || !aff
            ? mw_errf(err, n > GR_MAX_BRANCHES ? "more than %d tools to force" : "out of memory",
                      GR_MAX_BRANCHES)
            : 0;
    for (size_t i = 0; !rc && i < n; i++) {
        const json_t *t = json_array_get(list, i);
        const char *name = json_string_value(json_object_get(t, "name"));
        if (co_toolcall_forced(chat, name, aff[i][0], aff[i][1], GR_MAX_AFFIX + 1) ||
            mark_markers(sp, has, aff[i][0], GR_MAX_AFFIX + 1) ||
            mark_markers(sp, has, aff[i][1], GR_MAX_AFFIX + 1))
            rc = mw_errf(err,
                         "the call of tool '%.64s' cannot be forced in the chat format %s (a "
                         "name of 1 to 64 letters, digits, '_' and '-')",
                         name ? name : "", chat ? chat : "(none)");
        schemas[i] = json_object_get(t, "parameters");
        pre[i] = aff[i][0];
        post[i] = aff[i][1];
    }
    if (!rc) rc = gr_compile_alts(schemas, pre, post, (int)n, &c->g, err);
    free(aff);
    json_decref(list);
    if (!c) return NULL;
    return with_grammar(v, c, rc, err);
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
