/* coordinator/co_serve_text.c — the model's text side for the server (co_serve_text.h), over the
 * tokenizer (tokenizer/tk.h). */
#include "coordinator/co_serve_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_jinja.h"
#include "coordinator/co_serve_grammar.h"
#include "coordinator/co_toolcall.h"
#include "tokenizer/tk.h"
#include "tokenizer/tk_chat.h"

struct co_stext {
    tk_tokenizer *tok;
    co_jinja *jinja;           /* the model's own template: renders chat prompts when present */
    tk_chat *chat;             /* the built-in format: renders otherwise, parses replies; or NULL */
    char chat_err[MW_ERR_MAX]; /* why not */
    char chat_name[96];        /* what renders and what parses, for the startup line */
    size_t max_token_bytes;    /* the most input bytes one token stands for */
    co_grammar_trie trie;      /* the constrained decoding's vocabulary, built on first use */
};

typedef struct job_text {
    co_stext *t;
    tk_stream stream;       /* completions */
    tk_chat_parser *parser; /* chat */
    tk_text tmp, rtmp;
    const char *const *specials; /* a chat with tools: the call markers kept as text */
} job_text;

static tk_chat_opts chat_opts(const co_stext_chat_opts *o) {
    return (tk_chat_opts){.add_generation_prompt = true,
                          .thinking = o ? o->thinking : -1,
                          .reasoning_effort = o ? o->reasoning_effort : NULL,
                          .answer_open = o && o->answer_open,
                          .tools = o ? o->tools_text : NULL};
}

const char *co_stext_format_name(const co_stext *t) {
    return t->chat ? tk_chat_name(t->chat) : NULL;
}

const gr_vocab *co_stext_vocab(co_stext *t, mw_err *err) {
    return co_grammar_trie_get(&t->trie, t->tok, t->chat, err);
}

void *co_stext_constraint(co_stext *t, const char *schema, const char *call_tools, mw_err *err) {
    const gr_vocab *v = co_stext_vocab(t, err);
    if (!v) return NULL;
    return call_tools ? co_grammar_call_constraint(v, co_stext_format_name(t), call_tools, err)
                      : co_grammar_constraint(v, schema, err);
}

int co_stext_open(const vx_source *src, const char *chat_template, co_stext **out, mw_err *err) {
    *out = NULL;
    const char *model = NULL;
    char path[4096];
    bool carried = vx_source_carried(src, "tokenizer.gguf", path, sizeof path, NULL) == 1 ||
                   vx_source_carried(src, "tokenizer.json", path, sizeof path, NULL) == 1;
    if (!carried && vx_meta_get_str(vx_source_meta(src), "tokenizer.ggml.model", &model, NULL) != 1)
        return 0;
    co_stext *t = calloc(1, sizeof *t);
    if (!t) return mw_errf(err, "out of memory");
    co_grammar_trie_init(&t->trie);
    if (tk_load_source(src, &t->tok, err)) {
        free(t);
        return mw_err_wrap(err, "the model's tokenizer");
    }
    /* the longest piece (special tokens' text included); an unknown character, whatever its
     * piece, stands for at most the 4 bytes of one UTF-8 character */
    t->max_token_bytes = 4;
    for (int32_t id = 0; id < tk_n_vocab(t->tok); id++) {
        const char *b;
        size_t len;
        if (!tk_piece(t->tok, id, true, &b, &len) && len > t->max_token_bytes)
            t->max_token_bytes = len;
    }
    mw_err cerr = {{0}};
    if (tk_chat_open(t->tok, chat_template, &t->chat, &cerr)) {
        if (chat_template) { /* asked for by name: it must work */
            co_stext_free(t);
            return mw_errf(err, "--chat-template: %s", cerr.msg);
        }
        t->chat = NULL;
        snprintf(t->chat_err, sizeof t->chat_err, "%s", cerr.msg);
    }
    if (co_jinja_open(t->tok, chat_template, &t->jinja, err)) {
        co_stext_free(t);
        return -1;
    }
    snprintf(t->chat_name, sizeof t->chat_name, "the model's template (jinja), %s%s",
             t->chat ? tk_chat_name(t->chat) : "plain-text",
             t->chat ? " replies" : " replies ended by end-of-generation tokens");
    *out = t;
    return 0;
}

int co_stext_template_file(co_stext *t, const char *path, mw_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return mw_errf(err, "--chat-template-file %s: cannot open it", path);
    enum { MAX = 1 << 20 };
    char *src = malloc(MAX + 1);
    const size_t n = src ? fread(src, 1, MAX + 1, f) : 0;
    const bool bad = ferror(f) || n > MAX;
    fclose(f);
    co_jinja *j = NULL;
    int rc = !src  ? mw_errf(err, "out of memory")
             : bad ? mw_errf(err, "--chat-template-file %s: unreadable or over 1 MiB", path)
                   : co_jinja_open_text(t->tok, src, n, &j, err);
    free(src);
    if (rc) return mw_err_wrap(err, "%s", path);
    co_jinja_free(t->jinja);
    t->jinja = j;
    snprintf(t->chat_name, sizeof t->chat_name, "the template file (jinja), %s%s",
             t->chat ? tk_chat_name(t->chat) : "plain-text",
             t->chat ? " replies" : " replies ended by end-of-generation tokens");
    return 0;
}

void co_stext_free(co_stext *t) {
    if (!t) return;
    co_grammar_trie_free(&t->trie);
    co_jinja_free(t->jinja);
    tk_chat_free(t->chat);
    tk_free(t->tok);
    free(t);
}

size_t co_stext_max_token_bytes(const co_stext *t) {
    return t->max_token_bytes;
}

const char *co_stext_chat_name(const co_stext *t) {
    if (!t->jinja) return t->chat ? tk_chat_name(t->chat) : NULL;
    return t->chat_name;
}

static int take_ids(tk_ids *ids, int32_t **out, int64_t *n, mw_err *err) {
    *out = malloc((ids->n ? ids->n : 1) * sizeof **out);
    if (!*out) {
        tk_ids_free(ids);
        return mw_errf(err, "out of memory");
    }
    if (ids->n) memcpy(*out, ids->v, ids->n * sizeof **out);
    *n = (int64_t)ids->n;
    tk_ids_free(ids);
    return 0;
}

int co_stext_encode(co_stext *t, const char *s, size_t n, int32_t **ids, int64_t *n_ids,
                    mw_err *err) {
    tk_ids v = {0};
    unsigned flags = TK_SPECIAL | (tk_add_bos(t->tok) ? TK_ADD_BOS : 0);
    if (tk_encode(t->tok, s, n, flags, &v, err)) {
        tk_ids_free(&v);
        return -1;
    }
    return take_ids(&v, ids, n_ids, err);
}

/* A constrained output after the model's template: harmony's final channel opened, as the C
 * renderer opens it (thinking is off in the template already), so that the parser, made with
 * answer_open, reads the first token as the answer. */
static int open_answer(const co_stext *t, tk_ids *v, mw_err *err) {
    if (!t->chat || strcmp(tk_chat_name(t->chat), "harmony")) return 0;
    static const char *const parts[] = {"<|channel|>", "final", "<|message|>"};
    for (int i = 0; i < 3; i++)
        if (tk_encode(t->tok, parts[i], strlen(parts[i]), i == 1 ? 0 : TK_SPECIAL, v, err))
            return -1;
    return 0;
}

int co_stext_thinking(const co_stext *t, const json_t *kwargs) {
    const char *name = t && t->chat ? tk_chat_thinking_kwarg(t->chat) : NULL;
    const json_t *v = name && json_is_object(kwargs) ? json_object_get(kwargs, name) : NULL;
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

/* The model's template. An opened answer turns thinking off by the family's own kwarg (Qwen3's
 * enable_thinking, Kimi K3's thinking), over what the request's kwargs say: the constraint's
 * grammar starts at the answer, so the prompt must not open a reasoning section. */
static int jinja_chat(co_stext *t, json_t *messages, const co_stext_chat_opts *o, tk_ids *v,
                      mw_err *err) {
    const bool open = o && o->answer_open;
    const char *name = t->chat ? tk_chat_thinking_kwarg(t->chat) : NULL;
    json_t *kw = NULL;
    if (open && name) {
        kw = json_is_object(o->kwargs) ? json_copy((json_t *)o->kwargs) : json_object();
        if (!kw || json_object_set_new(kw, name, json_false())) {
            json_decref(kw);
            return mw_errf(err, "out of memory");
        }
    }
    co_jinja_opts jo = {.tools = o ? o->tools : NULL,
                        .kwargs = kw  ? kw
                                  : o ? o->kwargs
                                      : NULL,
                        .thinking = open ? 0
                                    : o  ? o->thinking
                                         : -1,
                        .thinking_kwarg = name,
                        .reasoning_effort = o ? o->reasoning_effort : NULL};
    const int rc =
        co_jinja_prompt(t->jinja, messages, &jo, v, err) || (open && open_answer(t, v, err));
    json_decref(kw);
    return rc ? -1 : 0;
}

int co_stext_chat(co_stext *t, json_t *messages, const co_stext_chat_opts *o, int32_t **ids,
                  int64_t *n_ids, mw_err *err) {
    if (t->jinja) {
        tk_ids v = {0};
        if (jinja_chat(t, messages, o, &v, err)) {
            tk_ids_free(&v);
            return -1;
        }
        return take_ids(&v, ids, n_ids, err);
    }
    if (!t->chat) return mw_errf(err, "this model has no chat format: %s", t->chat_err);
    tk_msgs msgs = {0};
    tk_ids v = {0};
    tk_chat_opts co = chat_opts(o);
    if (tk_msgs_from_json(messages, &msgs, err) ||
        tk_chat_render(t->chat, msgs.v, msgs.n, &co, &v, err)) {
        tk_msgs_free(&msgs);
        tk_ids_free(&v);
        return -1;
    }
    tk_msgs_free(&msgs);
    return take_ids(&v, ids, n_ids, err);
}

void *co_stext_job(co_stext *t, const co_stext_chat_opts *chat, mw_err *err) {
    if (chat && !t->chat && !t->jinja) {
        mw_errf(err, "this model has no chat format: %s", t->chat_err);
        return NULL;
    }
    job_text *j = calloc(1, sizeof *j);
    if (!j) {
        mw_errf(err, "out of memory");
        return NULL;
    }
    j->t = t;
    tk_chat_opts co = chat_opts(chat);
    /* a template the built-in formats do not know: its replies are plain text ended by the
     * model's end-of-generation tokens */
    if (chat && t->chat && tk_chat_parser_new(t->chat, &co, &j->parser, err)) {
        free(j);
        return NULL;
    }
    if (chat && chat->tools_text && t->chat && co_toolcall_keeps_specials(tk_chat_name(t->chat)))
        j->specials = co_toolcall_specials(tk_chat_name(t->chat));
    tk_stream_init(&j->stream, t->tok, 0);
    return j;
}

static void take_text(tk_text *b, co_buf *out) {
    if (b->n) co_buf_add(out, b->s, b->n);
    b->n = 0;
}

/* A tool call's marker that decodes to nothing (a control token) is kept as its text, where the
 * call reader (co_toolcall.h) looks for it. */
static void keep_marker(job_text *j, int32_t token) {
    const char *b;
    size_t n;
    if (tk_piece(j->t->tok, token, true, &b, &n)) return;
    for (int i = 0; j->specials[i]; i++)
        if (strlen(j->specials[i]) == n && !memcmp(j->specials[i], b, n)) {
            tk_text_add(&j->tmp, b, n);
            return;
        }
}

static int job_piece(void *state, int32_t token, co_buf *content, co_buf *reasoning) {
    job_text *j = state;
    int rc = 0;
    if (j->parser)
        rc = tk_chat_parser_push(j->parser, token, &j->tmp, &j->rtmp, NULL);
    else if (tk_is_eog(j->t->tok, token))
        rc = 1;
    else
        tk_stream_push(&j->stream, token, &j->tmp, NULL);
    if (rc != 1 && j->specials && tk_is_control(j->t->tok, token)) keep_marker(j, token);
    take_text(&j->tmp, content);
    take_text(&j->rtmp, reasoning);
    return rc == 1;
}

static void job_flush(void *state, co_buf *content, co_buf *reasoning) {
    job_text *j = state;
    if (j->parser)
        tk_chat_parser_finish(j->parser, &j->tmp, &j->rtmp, NULL);
    else
        tk_stream_finish(&j->stream, &j->tmp, NULL);
    take_text(&j->tmp, content);
    take_text(&j->rtmp, reasoning);
}

static void job_end(void *state) {
    job_text *j = state;
    tk_chat_parser_free(j->parser);
    tk_text_free(&j->tmp);
    tk_text_free(&j->rtmp);
    free(j);
}

const co_text_ops co_stext_ops = {.piece = job_piece, .flush = job_flush, .end = job_end};

void co_stext_token_name(void *ud, int32_t token, co_buf *out) {
    const co_stext *t = ud;
    const char *b;
    size_t n;
    if (tk_piece(t->tok, token, true, &b, &n) == 0)
        co_buf_add(out, b, n);
    else
        co_buf_printf(out, "token_id:%d", token);
}

const tk_tokenizer *co_stext_tokenizer(const co_stext *t) {
    return t->tok;
}
