/* coordinator/co_info.c — /tokenize, /detokenize and /props (co_info.h). */
#include "coordinator/co_info.h"

#include <string.h>

#include "tokenizer/tk.h"

static int no_tokenizer(co_oai_error *e) {
    return co_oai_fail(e, 501, NULL, "not_implemented",
                       "this model has no tokenizer: prompts are token ids only");
}

/* The body as a JSON object, or -1 with a 400. */
static int body_object(const char *body, size_t len, json_t **root, co_oai_error *e) {
    json_error_t je;
    *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!*root)
        return co_oai_fail(e, 400, NULL, NULL, "the body is not JSON: %s (line %d, column %d)",
                           je.text, je.line, je.column);
    if (!json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return co_oai_fail(e, 400, NULL, NULL, "the body must be a JSON object");
    }
    return 0;
}

/* An optional boolean field; -1 with a 400 when it is something else. */
static int opt_bool(json_t *o, const char *k, bool def, bool *out, co_oai_error *e) {
    json_t *v = json_object_get(o, k);
    *out = def;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return co_oai_fail(e, 400, k, NULL, "'%s' must be a boolean", k);
    *out = json_is_true(v);
    return 0;
}

/* {"id": id, "piece": text}, the piece as an array of byte values when it is not whole UTF-8
 * (part of a character), as llama-server gives it. */
static json_t *with_piece(const tk_tokenizer *tok, int32_t id) {
    const char *b = "";
    size_t n = 0;
    if (tk_piece(tok, id, true, &b, &n)) n = 0;
    json_t *piece = json_stringn(b, n); /* NULL when not valid UTF-8 */
    if (!piece) {
        piece = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(piece, json_integer((unsigned char)b[i]));
    }
    return json_pack("{s:i, s:o}", "id", (int)id, "piece", piece);
}

int co_info_tokenize(const co_stext *t, const char *body, size_t len, json_t **out,
                     co_oai_error *e) {
    *out = NULL;
    if (!t) return no_tokenizer(e);
    json_t *root;
    if (body_object(body, len, &root, e)) return -1;
    bool add_special, parse_special, pieces;
    json_t *content = json_object_get(root, "content");
    int rc = -1;
    tk_ids ids = {0};
    if (opt_bool(root, "add_special", false, &add_special, e) ||
        opt_bool(root, "parse_special", true, &parse_special, e) ||
        opt_bool(root, "with_pieces", false, &pieces, e))
        goto done;
    if (!json_is_string(content)) {
        co_oai_fail(e, 400, "content", NULL, "'content' must be a string");
        goto done;
    }
    if (json_string_length(content) > CO_INFO_MAX_CONTENT) {
        co_oai_fail(e, 400, "content", NULL, "'content' has %zu bytes; at most %d are tokenized",
                    json_string_length(content), CO_INFO_MAX_CONTENT);
        goto done;
    }
    const tk_tokenizer *tok = co_stext_tokenizer(t);
    const unsigned flags =
        (parse_special ? TK_SPECIAL : 0u) | (add_special && tk_add_bos(tok) ? TK_ADD_BOS : 0u);
    mw_err err = {{0}};
    if (tk_encode(tok, json_string_value(content), json_string_length(content), flags, &ids,
                  &err)) {
        co_oai_fail(e, 400, "content", NULL, "%s", err.msg);
        goto done;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < ids.n; i++)
        json_array_append_new(list, pieces ? with_piece(tok, ids.v[i]) : json_integer(ids.v[i]));
    *out = json_pack("{s:o}", "tokens", list);
    rc = *out ? 0 : co_oai_fail(e, 500, NULL, NULL, "out of memory");
done:
    tk_ids_free(&ids);
    json_decref(root);
    return rc;
}

/* The ids of "tokens", each checked against the vocabulary; -1 with a 400. */
static int read_ids(json_t *a, int64_t n_vocab, tk_ids *ids, co_oai_error *e) {
    if (!json_is_array(a)) return co_oai_fail(e, 400, "tokens", NULL, "'tokens' must be an array");
    if (json_array_size(a) > CO_INFO_MAX_IDS)
        return co_oai_fail(e, 400, "tokens", NULL, "'tokens' has %zu ids; at most %d are decoded",
                           json_array_size(a), CO_INFO_MAX_IDS);
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= n_vocab)
            return co_oai_fail(e, 400, "tokens", NULL,
                               "tokens[%zu] is not a token id of the vocabulary of %lld", i,
                               (long long)n_vocab);
        if (tk_ids_push(ids, (int32_t)json_integer_value(v)))
            return co_oai_fail(e, 500, NULL, NULL, "out of memory");
    }
    return 0;
}

int co_info_detokenize(const co_stext *t, int64_t n_vocab, const char *body, size_t len,
                       json_t **out, co_oai_error *e) {
    *out = NULL;
    if (!t) return no_tokenizer(e);
    json_t *root;
    if (body_object(body, len, &root, e)) return -1;
    tk_ids ids = {0};
    tk_text txt = {0};
    int rc = -1;
    json_t *a = json_object_get(root, "tokens");
    if (a && read_ids(a, n_vocab, &ids, e)) goto done;
    mw_err err = {{0}};
    if (ids.n && tk_decode(co_stext_tokenizer(t), ids.v, ids.n, TK_SPECIAL, &txt, &err)) {
        co_oai_fail(e, 400, "tokens", NULL, "%s", err.msg);
        goto done;
    }
    /* the decoder replaces bytes that make no character, so the text is UTF-8 */
    *out = json_pack("{s:s%}", "content", txt.s ? txt.s : "", txt.n);
    rc = *out ? 0 : co_oai_fail(e, 500, NULL, NULL, "out of memory");
done:
    tk_text_free(&txt);
    tk_ids_free(&ids);
    json_decref(root);
    return rc;
}

/* A special token's text, "" when the model has none. */
static json_t *token_text(const tk_tokenizer *tok, int32_t id) {
    const char *b = "";
    size_t n = 0;
    if (id < 0 || tk_piece(tok, id, true, &b, &n)) n = 0;
    json_t *s = json_stringn(b, n);
    return s ? s : json_string("");
}

static json_t *model_json(const co_info_props *p) {
    json_t *m = json_pack("{s:s, s:I, s:I}", "id", p->model_id, "n_vocab", (json_int_t)p->n_vocab,
                          "n_ctx", (json_int_t)p->n_ctx);
    if (p->cfg) {
        json_object_set_new(m, "arch", json_string(p->cfg->arch));
        json_object_set_new(m, "n_layer", json_integer(p->cfg->n_layer));
        json_object_set_new(m, "n_embd", json_integer(p->cfg->n_embd));
        json_object_set_new(m, "n_ctx_train", json_integer(p->cfg->n_ctx_train));
        json_object_set_new(m, "n_expert", json_integer(p->cfg->n_expert));
        json_object_set_new(m, "n_expert_used", json_integer(p->cfg->n_expert_used));
    }
    return m;
}

/* The settings a request gets for what it leaves out (co_oai's defaults). */
static json_t *defaults_json(const co_info_props *p) {
    json_t *params = json_pack("{s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:i, s:i, s:b, s:i}",
                               "temperature", 1.0, "top_p", 1.0, "top_k", 0, "min_p", 0.0,
                               "presence_penalty", 0.0, "frequency_penalty", 0.0, "repeat_penalty",
                               1.0, "n_predict", -1, "n_probs", 0, "ignore_eos", 0, "n", 1);
    return json_pack("{s:o, s:I}", "params", params, "n_ctx", (json_int_t)p->n_ctx);
}

json_t *co_info_props_json(const co_info_props *p) {
    const tk_tokenizer *tok = p->text ? co_stext_tokenizer(p->text) : NULL;
    const char *tmpl = tok ? tk_chat_template_text(tok) : NULL;
    const char *chat = p->text ? co_stext_chat_name(p->text) : NULL;
    json_t *limits =
        json_pack("{s:I, s:I, s:i, s:i, s:i, s:i, s:i, s:I}", "n_ctx", (json_int_t)p->n_ctx,
                  "max_prompt_tokens", (json_int_t)p->limits.max_prompt_tokens, "max_messages",
                  p->limits.max_messages, "max_logit_bias", p->limits.max_logit_bias, "max_n",
                  p->max_n, "total_slots", p->n_slots, "max_queue", p->max_queue, "cache_bytes",
                  (json_int_t)p->cache_bytes);
    json_t *props = json_pack(
        "{s:o, s:i, s:s, s:s, s:{s:b, s:b, s:b}, s:b, s:b, s:b, s:s, s:o, s:o, s:s, s:o, s:o}",
        "default_generation_settings", defaults_json(p), "total_slots", p->n_slots, "model_alias",
        p->model_id, "model_path", p->model_id, "modalities", "vision", 0, "video", 0, "audio", 0,
        "endpoint_slots", 0, "endpoint_props", 1, "endpoint_metrics", 1, "chat_template",
        tmpl ? tmpl : "", "bos_token", tok ? token_text(tok, tk_bos(tok)) : json_string(""),
        "eos_token", tok ? token_text(tok, tk_eos(tok)) : json_string(""), "build_info", "moewire",
        "limits", limits, "model", model_json(p));
    if (props) json_object_set_new(props, "chat_format", chat ? json_string(chat) : json_null());
    return props;
}
