/* coordinator/co_jinja.c — see co_jinja.h. */
#include "coordinator/co_jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj_chat.h"

struct co_jinja {
    const tk_tokenizer *tok;
    jj_template *tmpl;
    char *bos, *eos; /* the special tokens' text, or NULL */
};

static char *token_text(const tk_tokenizer *tok, int32_t id) {
    const char *b;
    size_t n;
    if (id < 0 || tk_piece(tok, id, true, &b, &n)) return NULL;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, b, n);
        s[n] = '\0';
    }
    return s;
}

/* A parsed template over tok; NULL (perr set) when it does not parse. */
static co_jinja *make(const tk_tokenizer *tok, const char *src, size_t n, mw_err *perr,
                      mw_err *err) {
    co_jinja *j = calloc(1, sizeof *j);
    if (!j) {
        mw_errf(err, "out of memory");
        return NULL;
    }
    if (jj_parse(src, n, &j->tmpl, perr)) {
        free(j);
        return NULL;
    }
    j->tok = tok;
    j->bos = token_text(tok, tk_bos(tok));
    j->eos = token_text(tok, tk_eos(tok));
    return j;
}

int co_jinja_open(const tk_tokenizer *tok, const char *name, co_jinja **out, mw_err *err) {
    *out = NULL;
    const char *src = tk_chat_template_text(tok);
    if (name || !src || !*src) return 0;
    mw_err perr = {{0}};
    *out = make(tok, src, strlen(src), &perr, err);
    if (!*out && perr.msg[0])
        fprintf(stderr,
                "coordinator: note: the model's chat template does not parse (%s); using the "
                "built-in chat formats\n",
                perr.msg);
    return *out || perr.msg[0] ? 0 : -1;
}

int co_jinja_open_text(const tk_tokenizer *tok, const char *src, size_t n, co_jinja **out,
                       mw_err *err) {
    mw_err perr = {{0}};
    *out = make(tok, src, n, &perr, err);
    if (!*out && perr.msg[0]) return mw_errf(err, "the chat template: %s", perr.msg);
    return *out ? 0 : -1;
}

void co_jinja_free(co_jinja *j) {
    if (!j) return;
    jj_free(j->tmpl);
    free(j->bos);
    free(j->eos);
    free(j);
}

/* chat_template_kwargs, with the request's thinking switch and reasoning effort added where the
 * caller did not set them (Qwen3's enable_thinking, Kimi K3's thinking, gpt-oss's
 * reasoning_effort). */
static json_t *kwargs_of(const co_jinja_opts *o) {
    json_t *kw = json_is_object(o->kwargs) ? json_copy((json_t *)o->kwargs) : json_object();
    if (!kw) return NULL;
    const char *think = o->thinking_kwarg ? o->thinking_kwarg : "enable_thinking";
    if (o->thinking >= 0 && !json_object_get(kw, think))
        json_object_set_new(kw, think, json_boolean(o->thinking));
    if (o->reasoning_effort && !json_object_get(kw, "reasoning_effort"))
        json_object_set_new(kw, "reasoning_effort", json_string(o->reasoning_effort));
    return kw;
}

int co_jinja_prompt(const co_jinja *j, const json_t *messages, const co_jinja_opts *o, tk_ids *out,
                    mw_err *err) {
    json_t *msgs = jj_chat_args_to_objects(messages, err), *kw = kwargs_of(o), *ctx = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = -1;
    if (!msgs) goto done;
    if (!kw) {
        mw_errf(err, "out of memory");
        goto done;
    }
    jj_chat_in in = {.messages = msgs,
                     .tools = o->tools,
                     .add_generation_prompt = !o->no_generation_prompt,
                     .bos_token = j->bos,
                     .eos_token = j->eos,
                     .kwargs = kw};
    if (!(ctx = jj_chat_context(&in, err))) goto done;
    if (jj_render(j->tmpl, ctx, NULL, &text, &len, err)) {
        mw_err_wrap(err, "the model's chat template");
        goto done;
    }
    rc = tk_encode(j->tok, text, len, TK_SPECIAL, out, err);
done:
    free(text);
    json_decref(msgs);
    json_decref(kw);
    json_decref(ctx);
    return rc;
}

json_t *co_jinja_msgs_json(const tk_msgs *m) {
    json_t *l = json_array();
    for (size_t i = 0; l && i < m->n; i++) {
        const tk_msg *g = &m->v[i];
        json_t *o =
            json_pack("{s:s, s:s}", "role", g->role, "content", g->content ? g->content : "");
        if (!o || json_array_append_new(l, o)) {
            json_decref(l);
            return NULL;
        }
    }
    return l;
}
