/* tokenizer/tk_msgs.c — chat messages from an OpenAI-style JSON message list (the coordinator's
 * --messages file; the HTTP server may hand its parsed request over the same way). Strings are
 * copied, so the list outlives the JSON. Untrusted: sizes are bounded before jansson builds it. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk_chat.h"
#include "vindex/vx_json.h"

#define MAX_MESSAGES 100000

static char *own(tk_msgs *m, const char *s, size_t n) {
    char **o = realloc(m->owned, (m->n_owned + 1) * sizeof *o);
    if (!o) return NULL;
    m->owned = o;
    char *c = malloc(n + 1);
    if (!c) return NULL;
    memcpy(c, s, n);
    c[n] = '\0';
    m->owned[m->n_owned++] = c;
    return c;
}

static int push(tk_msgs *m, tk_msg msg, mw_err *err) {
    tk_msg *v = realloc(m->v, (m->n + 1) * sizeof *v);
    if (!v) return mw_errf(err, "out of memory");
    m->v = v;
    m->v[m->n++] = msg;
    return 0;
}

int tk_msgs_add(tk_msgs *m, const char *role, const char *content, mw_err *err) {
    tk_msg msg = {0};
    if (!(msg.role = own(m, role, strlen(role))) ||
        !(msg.content = own(m, content ? content : "", content ? strlen(content) : 0)))
        return mw_errf(err, "out of memory");
    return push(m, msg, err);
}

/* content: a string, or parts [{"type": "text", "text": ...}] joined */
static const char *content_of(tk_msgs *m, const json_t *c, size_t i, mw_err *err) {
    if (!c || json_is_null(c)) return own(m, "", 0);
    if (json_is_string(c)) return own(m, json_string_value(c), json_string_length(c));
    if (!json_is_array(c))
        return mw_errf(err, "message %zu: content must be a string or a list of parts", i), NULL;
    size_t total = 0;
    for (size_t k = 0; k < json_array_size(c); k++) {
        const json_t *p = json_array_get(c, k);
        const char *type = json_string_value(json_object_get(p, "type"));
        if (!type || strcmp(type, "text") || !json_is_string(json_object_get(p, "text")))
            return mw_errf(
                       err,
                       "message %zu: content part %zu is not {\"type\": \"text\", \"text\": ...}",
                       i, k),
                   NULL;
        total += json_string_length(json_object_get(p, "text"));
    }
    char *s = own(m, "", 0);
    if (!s || !(s = realloc(s, total + 1))) return mw_errf(err, "out of memory"), NULL;
    m->owned[m->n_owned - 1] = s;
    size_t o = 0;
    for (size_t k = 0; k < json_array_size(c); k++) {
        const json_t *t = json_object_get(json_array_get(c, k), "text");
        memcpy(s + o, json_string_value(t), json_string_length(t));
        o += json_string_length(t);
    }
    s[o] = '\0';
    return s;
}

/* A string field (absent or null: NULL); -1 when it is something else. */
static int opt_str(tk_msgs *m, const json_t *o, const char *key, const char **out, size_t i,
                   mw_err *err) {
    const json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return mw_errf(err, "message %zu: '%s' must be a string", i, key);
    if (!(*out = own(m, json_string_value(v), json_string_length(v))))
        return mw_errf(err, "out of memory");
    return 0;
}

/* {"id": ..., "type": "function", "function": {"name": ..., "arguments": "..." | {...}}} (or the
 * function's fields at the top) */
static int tool_call(tk_msgs *m, const json_t *c, tk_tool_call *tc, size_t i, mw_err *err) {
    const json_t *fn = json_object_get(c, "function");
    if (!json_is_object(fn)) fn = c;
    if (opt_str(m, c, "id", &tc->id, i, err) || opt_str(m, fn, "name", &tc->name, i, err))
        return -1;
    if (!tc->name) return mw_errf(err, "message %zu: a tool call has no function name", i);
    const json_t *a = json_object_get(fn, "arguments");
    if (json_is_object(a)) {
        char *text = json_dumps(a, JSON_COMPACT | JSON_PRESERVE_ORDER);
        tc->args_object = true;
        tc->arguments = text ? own(m, text, strlen(text)) : NULL;
        free(text);
        return tc->arguments ? 0 : mw_errf(err, "out of memory");
    }
    if (a && !json_is_null(a) && !json_is_string(a))
        return mw_errf(err, "message %zu: tool call arguments must be a JSON object or a string",
                       i);
    return opt_str(m, fn, "arguments", &tc->arguments, i, err);
}

/* name (or tool), tool_call_id and tool_calls */
static int tool_fields(tk_msgs *m, const json_t *e, tk_msg *msg, size_t i, mw_err *err) {
    if (opt_str(m, e, "name", &msg->name, i, err) ||
        (!msg->name && opt_str(m, e, "tool", &msg->name, i, err)) ||
        opt_str(m, e, "tool_call_id", &msg->tool_call_id, i, err))
        return -1;
    const json_t *calls = json_object_get(e, "tool_calls");
    if (!calls || json_is_null(calls) || json_array_size(calls) == 0) return 0;
    if (!json_is_array(calls)) return mw_errf(err, "message %zu: tool_calls must be a list", i);
    size_t n = json_array_size(calls);
    tk_tool_call *tc = calloc(n, sizeof *tc);
    char **o = realloc(m->owned, (m->n_owned + 1) * sizeof *o);
    if (!tc || !o) {
        free(tc);
        if (o) m->owned = o;
        return mw_errf(err, "out of memory");
    }
    m->owned = o;
    m->owned[m->n_owned++] = (char *)tc; /* freed with the strings */
    msg->tool_calls = tc;
    msg->n_tool_calls = n;
    for (size_t k = 0; k < n; k++)
        if (tool_call(m, json_array_get(calls, k), &tc[k], i, err)) return -1;
    return 0;
}

int tk_msgs_parse(const char *text, size_t len, tk_msgs *out, mw_err *err) {
    *out = (tk_msgs){0};
    const vx_json_limits lim = {
        .max_depth = 16, .bytes_per_object = 16, .bytes_per_array = 16, .bytes_per_item = 4};
    json_t *j = vx_json_parse(text, len, "messages", &lim, err);
    if (!j) return -1;
    int rc = tk_msgs_from_json(j, out, err);
    json_decref(j);
    return rc;
}

int tk_msgs_from_json(const json_t *j, tk_msgs *out, mw_err *err) {
    *out = (tk_msgs){0};
    const json_t *list = json_is_object(j) ? json_object_get(j, "messages") : j;
    int rc = 0;
    if (!json_is_array(list))
        rc = mw_errf(err, "messages: expected a list of messages (or {\"messages\": [...]})");
    else if (json_array_size(list) > MAX_MESSAGES)
        rc = mw_errf(err, "messages: more than %d messages", MAX_MESSAGES);
    for (size_t i = 0; rc == 0 && i < json_array_size(list); i++) {
        const json_t *e = json_array_get(list, i);
        const json_t *role = json_object_get(e, "role");
        if (!json_is_string(role)) {
            rc = mw_errf(err, "message %zu has no role", i);
            break;
        }
        tk_msg msg = {0};
        const json_t *ch = json_object_get(e, "channel");
        const json_t *rs = json_object_get(e, "reasoning_content");
        if (!rs) rs = json_object_get(e, "reasoning");
        if (!(msg.role = own(out, json_string_value(role), json_string_length(role))) ||
            !(msg.content = content_of(out, json_object_get(e, "content"), i, err)) ||
            (json_is_string(ch) &&
             !(msg.channel = own(out, json_string_value(ch), json_string_length(ch)))) ||
            (json_is_string(rs) &&
             !(msg.reasoning = own(out, json_string_value(rs), json_string_length(rs))))) {
            if (!err || !err->msg[0]) mw_errf(err, "out of memory");
            rc = -1;
            break;
        }
        if (tool_fields(out, e, &msg, i, err)) {
            rc = -1;
            break;
        }
        rc = push(out, msg, err);
    }
    if (rc) tk_msgs_free(out);
    return rc;
}

void tk_msgs_free(tk_msgs *m) {
    for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->v);
    *m = (tk_msgs){0};
}
