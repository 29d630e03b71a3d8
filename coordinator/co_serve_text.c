/* coordinator/co_serve_text.c — the model's text side for the server (co_serve_text.h), over the
 * tokenizer (tokenizer/tk.h). */
#include "coordinator/co_serve_text.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk.h"

struct co_stext {
    tk_tokenizer *tok;
};

typedef struct job_text {
    co_stext *t;
    tk_stream stream;
    tk_text tmp;
} job_text;

int co_stext_open(const vx_source *src, const char *chat_template, co_stext **out, mw_err *err) {
    (void)chat_template;
    *out = NULL;
    const char *model = NULL;
    char path[4096];
    bool carried = vx_source_carried(src, "tokenizer.gguf", path, sizeof path, NULL) == 1 ||
                   vx_source_carried(src, "tokenizer.json", path, sizeof path, NULL) == 1;
    if (!carried && vx_meta_get_str(vx_source_meta(src), "tokenizer.ggml.model", &model, NULL) != 1)
        return 0;
    co_stext *t = calloc(1, sizeof *t);
    if (!t) return mw_errf(err, "out of memory");
    if (tk_load_source(src, &t->tok, err)) {
        free(t);
        return mw_err_wrap(err, "the model's tokenizer");
    }
    *out = t;
    return 0;
}

void co_stext_free(co_stext *t) {
    if (!t) return;
    tk_free(t->tok);
    free(t);
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

int co_stext_chat(co_stext *t, json_t *messages, int32_t **ids, int64_t *n_ids, mw_err *err) {
    (void)t, (void)messages, (void)ids, (void)n_ids;
    return mw_errf(err, "chat templates are not available on this server yet");
}

void *co_stext_job(co_stext *t, bool chat, mw_err *err) {
    if (chat) {
        mw_errf(err, "chat templates are not available on this server yet");
        return NULL;
    }
    job_text *j = calloc(1, sizeof *j);
    if (!j) {
        mw_errf(err, "out of memory");
        return NULL;
    }
    j->t = t;
    tk_stream_init(&j->stream, t->tok, 0);
    return j;
}

static int job_piece(void *state, int32_t token, co_buf *content, co_buf *reasoning) {
    (void)reasoning;
    job_text *j = state;
    if (tk_is_eog(j->t->tok, token)) return 1;
    j->tmp.n = 0;
    if (tk_stream_push(&j->stream, token, &j->tmp, NULL) == 0)
        co_buf_add(content, j->tmp.s, j->tmp.n);
    return 0;
}

static void job_flush(void *state, co_buf *content, co_buf *reasoning) {
    (void)reasoning;
    job_text *j = state;
    j->tmp.n = 0;
    if (tk_stream_finish(&j->stream, &j->tmp, NULL) == 0) co_buf_add(content, j->tmp.s, j->tmp.n);
}

static void job_end(void *state) {
    job_text *j = state;
    tk_text_free(&j->tmp);
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
