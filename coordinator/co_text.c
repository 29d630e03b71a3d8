/* coordinator/co_text.c — the model's text side for the server (co_text.h). */
#include "coordinator/co_text.h"

int co_text_open(const vx_source *src, co_text **out, mw_err *err) {
    (void)src, (void)err;
    *out = NULL;
    return 0;
}

void co_text_free(co_text *t) {
    (void)t;
}

int co_text_encode(co_text *t, const char *s, size_t n, int32_t **ids, int64_t *n_ids,
                   mw_err *err) {
    (void)t, (void)s, (void)n, (void)ids, (void)n_ids;
    return mw_errf(err, "the model has no tokenizer: give the prompt as token ids");
}

int co_text_chat(co_text *t, json_t *messages, int32_t **ids, int64_t *n_ids, mw_err *err) {
    (void)t, (void)messages, (void)ids, (void)n_ids;
    return mw_errf(err, "the model has no tokenizer or chat template");
}

co_text_ops co_text_stream_ops(co_text *t) {
    (void)t;
    return (co_text_ops){0};
}

void co_text_token_name(void *t, int32_t token, co_buf *out) {
    (void)t;
    co_buf_printf(out, "token_id:%d", token);
}

int co_text_eos(const co_text *t, const int32_t **ids) {
    (void)t;
    *ids = NULL;
    return 0;
}
