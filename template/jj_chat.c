/* template/jj_chat.c — transformers' chat-template variables from an OpenAI request's parts. */
#include <jansson.h>
#include <string.h>

#include "template/jj_chat.h"

json_t *jj_chat_context(const jj_chat_in *in, mw_err *err) {
    if (!json_is_array(in->messages)) return mw_errf(err, "messages must be a list"), NULL;
    if (in->tools && !json_is_array(in->tools) && !json_is_null(in->tools))
        return mw_errf(err, "tools must be a list"), NULL;
    if (in->kwargs && !json_is_object(in->kwargs))
        return mw_errf(err, "chat_template_kwargs must be an object"), NULL;
    json_t *c = json_object();
    if (!c) return mw_errf(err, "out of memory"), NULL;
    int bad = json_object_set(c, "messages", (json_t *)in->messages);
    bad |=
        json_object_set_new(c, "tools", in->tools ? json_incref((json_t *)in->tools) : json_null());
    bad |= json_object_set_new(c, "documents", json_null());
    bad |= json_object_set_new(c, "add_generation_prompt", json_boolean(in->add_generation_prompt));
    if (in->bos_token) bad |= json_object_set_new(c, "bos_token", json_string(in->bos_token));
    if (in->eos_token) bad |= json_object_set_new(c, "eos_token", json_string(in->eos_token));
    if (in->kwargs) bad |= json_object_update(c, (json_t *)in->kwargs);
    if (bad) {
        json_decref(c);
        return mw_errf(err, "out of memory (or a token that is not UTF-8)"), NULL;
    }
    return c;
}

static json_t *call_with_object(json_t *call) {
    json_t *fn = json_object_get(call, "function");
    json_t *args = json_object_get(fn, "arguments");
    if (!json_is_string(args)) return json_incref(call);
    json_t *obj = json_loadb(json_string_value(args), json_string_length(args),
                             JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return json_incref(call);
    }
    json_t *c = json_copy(call), *f = json_copy(fn);
    if (!c || !f || json_object_set_new(f, "arguments", obj) ||
        json_object_set_new(c, "function", f)) {
        json_decref(c);
        return NULL;
    }
    return c;
}

json_t *jj_chat_args_to_objects(const json_t *messages, mw_err *err) {
    if (!json_is_array(messages)) return mw_errf(err, "messages must be a list"), NULL;
    json_t *out = json_array();
    for (size_t i = 0; out && i < json_array_size(messages); i++) {
        json_t *m = json_array_get(messages, i), *calls = json_object_get(m, "tool_calls");
        if (!json_is_array(calls) || !json_array_size(calls)) {
            json_array_append(out, m);
            continue;
        }
        json_t *nm = json_copy(m), *nc = json_array();
        for (size_t k = 0; nm && nc && k < json_array_size(calls); k++) {
            json_t *c = call_with_object(json_array_get(calls, k));
            if (!c || json_array_append_new(nc, c)) {
                json_decref(nc);
                nc = NULL;
            }
        }
        const json_t *content = json_object_get(m, "content");
        if (!nm || !nc || json_object_set_new(nm, "tool_calls", nc) ||
            ((!content || json_is_null(content)) &&
             json_object_set_new(nm, "content", json_string(""))) ||
            json_array_append_new(out, nm)) {
            json_decref(out);
            out = NULL;
        }
    }
    if (!out) mw_errf(err, "out of memory");
    return out;
}
