/* tokenizer/tk_chat_k3.c — Kimi K3's chat format: tagged sections instead of role tokens.
 *
 * A message is <|open|>message role="user"<|sep|> … <|close|>message<|sep|><|end_of_msg|>; an
 * assistant's body is a think section (when thinking is on, empty if it has no reasoning), a
 * response section and, when it called tools, a tools section of calls (each argument a section
 * of its own with its JSON type, or one json section); tool results are messages of role tool
 * naming the tool and their index; tools are declared in a system message of type tool-declare
 * holding their JSON with sorted keys; a thinking-effort system message says how much to think.
 * Attribute values escape & and ". The generation prompt opens the assistant's message and its
 * think (or response) section. K3 renders chats in Python; llama.cpp's Kimi-K3.jinja spells the
 * same rules, which this follows. <|end_of_msg|> ends a turn (the stop token), not [EOS].
 *
 * The output parser reads the same markers on token ids: think is reasoning, response is
 * content, tool sections are reasoning, text outside any section is content (shown, not lost);
 * the tag text between a marker and <|sep|> is shown to no one. With tools, a tools section is
 * content written as the text it is (markers and tags too), for the server's tool-call reader. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk_chat_internal.h"
#include "tokenizer/tk_internal.h"

#define MAX_ATTRS 3

static bool is(const tk_msg *m, const char *role) {
    return m->role && !strcmp(m->role, role);
}

/* ---- markers ------------------------------------------------------------------------------ */

static void attr_value(tk__pb *b, const char *v) {
    for (const char *p = v; *p; p++)
        if (*p == '&')
            tk__pb_txt(b, "&amp;");
        else if (*p == '"')
            tk__pb_txt(b, "&quot;");
        else
            tk__pb_txtn(b, p, 1);
}

/* <|open|>tag k="v" ...<|sep|>; attrs are name/value pairs, a NULL name ends them. */
static void open_tag(tk__pb *b, const char *tag, const char *const attrs[][2]) {
    tk__pb_special(b, "<|open|>");
    tk__pb_txt(b, tag);
    for (int i = 0; attrs && i < MAX_ATTRS && attrs[i][0]; i++) {
        tk__pb_txt(b, " ");
        tk__pb_txt(b, attrs[i][0]);
        tk__pb_txt(b, "=\"");
        attr_value(b, attrs[i][1]);
        tk__pb_txt(b, "\"");
    }
    tk__pb_special(b, "<|sep|>");
}

static void close_tag(tk__pb *b, const char *tag) {
    tk__pb_special(b, "<|close|>");
    tk__pb_txt(b, tag);
    tk__pb_special(b, "<|sep|>");
}

static void end_message(tk__pb *b) {
    close_tag(b, "message");
    tk__pb_special(b, "<|end_of_msg|>");
}

/* A system message K3 writes itself (body trimmed of surrounding whitespace). */
static void internal_message(tk__pb *b, const char *type, const char *body) {
    open_tag(b, "message", (const char *const[][2]){{"role", "system"}, {"type", type}, {NULL}});
    tk__pb_txt(b, body);
    end_message(b);
}

/* ---- JSON as Python's json.dumps writes it (ensure_ascii off) ------------------------------ */

/* Python's repr of a float: the shortest text that reads back, ".0" on integral values. */
static void py_real(tk_text *o, double v) {
    char s[40];
    if (!isfinite(v)) {
        snprintf(s, sizeof s, "%s", isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
    } else {
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(s, sizeof s, "%.*g", prec, v);
            if (strtod(s, NULL) == v) break;
        }
        if (strchr(s, 'e') && fabs(v) < 1e16 && v == floor(v)) snprintf(s, sizeof s, "%.1f", v);
        if (!strpbrk(s, ".e")) strcat(s, ".0");
    }
    tk_text_add(o, s, strlen(s));
}

static int by_key(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int c = strcasecmp(x, y); /* Jinja's dictsort folds case */
    return c ? c : strcmp(x, y);
}

/* compact: "," and ":" with keys sorted at every level (the template's json_sorted); else
 * json.dumps' ", " and ": " in the given order (its tojson). */
static void py_json(tk_text *o, const json_t *v, bool compact) {
    if (json_is_object(v)) {
        size_t n = json_object_size(v), k = 0;
        const char **keys = malloc((n ? n : 1) * sizeof *keys);
        const char *key;
        json_t *item;
        json_object_foreach((json_t *)v, key, item) keys[k++] = key;
        if (compact) qsort(keys, n, sizeof *keys, by_key);
        tk_text_add(o, "{", 1);
        for (size_t i = 0; i < n; i++) {
            if (i) tk_text_add(o, compact ? "," : ", ", compact ? 1 : 2);
            json_t *ks = json_string(keys[i]);
            py_json(o, ks, compact);
            json_decref(ks);
            tk_text_add(o, compact ? ":" : ": ", compact ? 1 : 2);
            py_json(o, json_object_get(v, keys[i]), compact);
        }
        tk_text_add(o, "}", 1);
        free(keys);
    } else if (json_is_array(v)) {
        tk_text_add(o, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) tk_text_add(o, compact ? "," : ", ", compact ? 1 : 2);
            py_json(o, json_array_get(v, i), compact);
        }
        tk_text_add(o, "]", 1);
    } else if (json_is_real(v)) {
        py_real(o, json_real_value(v));
    } else {
        char *s = json_dumps(v, JSON_ENCODE_ANY);
        if (s) tk_text_add(o, s, strlen(s));
        free(s);
    }
}

static const char *xtml_type(const json_t *v) {
    return json_is_boolean(v)  ? "boolean"
           : json_is_null(v)   ? "null"
           : json_is_number(v) ? "number"
           : json_is_string(v) ? "string"
           : json_is_object(v) ? "object"
                               : "array";
}

/* ---- tools ---------------------------------------------------------------------------------- */

static void tool_declare(tk__pb *b, const char *tools) {
    json_t *j = json_loads(tools, JSON_DECODE_ANY, NULL);
    if (!json_is_array(j)) {
        json_decref(j);
        b->rc = mw_errf(b->err, "kimi-k3: the tools are not a JSON list");
        return;
    }
    tk_text t = {0};
    static const char head[] =
        "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n";
    tk_text_add(&t, head, sizeof head - 1);
    py_json(&t, j, true);
    tk_text_add(&t, "\n```", 4);
    json_decref(j);
    internal_message(b, "tool-declare", t.s);
    tk_text_free(&t);
}

/* One call's arguments: a JSON object argument by argument, else its text as one json section. */
static void call_arguments(tk__pb *b, const tk_tool_call *c) {
    const char *a = c->arguments ? c->arguments : "";
    if (!c->args_object) {
        if (!*(a + strspn(a, " \t\n\r"))) return;
        open_tag(b, "json", (const char *const[][2]){{"type", "object"}, {NULL}});
        tk__pb_txt(b, a);
        close_tag(b, "json");
        return;
    }
    json_t *j = json_loads(a, JSON_DECODE_ANY, NULL);
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        open_tag(b, "argument",
                 (const char *const[][2]){{"key", key}, {"type", xtml_type(v)}, {NULL}});
        if (json_is_string(v)) {
            tk__pb_txtn(b, json_string_value(v), json_string_length(v));
        } else {
            tk_text t = {0};
            py_json(&t, v, false);
            tk__pb_txtn(b, t.s, t.n);
            tk_text_free(&t);
        }
        close_tag(b, "argument");
    }
    json_decref(j);
}

static void tool_calls(tk__pb *b, const tk_msg *m) {
    if (!m->n_tool_calls) return;
    open_tag(b, "tools", NULL);
    for (size_t i = 0; i < m->n_tool_calls; i++) {
        char index[24];
        snprintf(index, sizeof index, "%zu", i + 1);
        open_tag(
            b, "call",
            (const char *const[][2]){{"tool", m->tool_calls[i].name}, {"index", index}, {NULL}});
        call_arguments(b, &m->tool_calls[i]);
        close_tag(b, "call");
    }
    close_tag(b, "tools");
}

/* ---- messages ------------------------------------------------------------------------------- */

typedef struct k3_state {
    const tk_msg *calls; /* the last assistant message (its tool calls) */
    size_t tool_index;
    bool thinking;
} k3_state;

static void author_message(tk__pb *b, const tk_msg *m) {
    const char *attrs[3][2] = {{"role", m->role}, {NULL}, {NULL}};
    if (m->name && *m->name) attrs[1][0] = "name", attrs[1][1] = m->name;
    open_tag(b, "message", (const char *const(*)[2])attrs);
}

static void assistant(tk__pb *b, const tk_msg *m, k3_state *st) {
    st->calls = m;
    st->tool_index = 0;
    author_message(b, m);
    if (st->thinking) {
        open_tag(b, "think", NULL);
        const char *r = m->reasoning ? m->reasoning : "";
        if (*(r + strspn(r, " \t\n\r"))) tk__pb_txt(b, r);
        close_tag(b, "think");
    }
    open_tag(b, "response", NULL);
    tk__pb_txt(b, m->content);
    close_tag(b, "response");
    tool_calls(b, m);
    end_message(b);
}

/* A tool result; its tool is `name`, else the message's, else the call at its position. */
static void tool_message(tk__pb *b, const tk_msg *m, const char *name, k3_state *st) {
    st->tool_index++;
    if (!name) name = m->name;
    if (!name && st->calls && st->tool_index <= st->calls->n_tool_calls)
        name = st->calls->tool_calls[st->tool_index - 1].name;
    if (!name) {
        b->rc = mw_errf(b->err, "kimi-k3: a tool message names no tool and answers no call");
        return;
    }
    char index[24];
    snprintf(index, sizeof index, "%zu", st->tool_index);
    open_tag(b, "message",
             (const char *const[][2]){{"role", "tool"}, {"tool", name}, {"index", index}});
    tk__pb_txt(b, m->content);
    end_message(b);
}

static const tk_tool_call *call_of(const k3_state *st, const char *id) {
    for (size_t i = 0; id && st->calls && i < st->calls->n_tool_calls; i++)
        if (st->calls->tool_calls[i].id && !strcmp(st->calls->tool_calls[i].id, id))
            return &st->calls->tool_calls[i];
    return NULL;
}

/* A run of tool messages: when every one answers a call of the last assistant message by id, in
 * the order of the calls (each call's results under its name), else as they come. Returns the
 * messages used. */
static size_t tool_run(tk__pb *b, const tk_msg *m, size_t n, k3_state *st) {
    size_t k = 0, resolved = 0;
    while (k < n && is(&m[k], "tool")) resolved += call_of(st, m[k++].tool_call_id) != NULL;
    if (resolved < k) {
        for (size_t i = 0; i < k && !b->rc; i++) tool_message(b, &m[i], NULL, st);
        return k;
    }
    for (size_t c = 0; c < st->calls->n_tool_calls && !b->rc; c++) {
        const tk_tool_call *call = &st->calls->tool_calls[c];
        bool seen = false; /* a repeated id is emitted once */
        for (size_t e = 0; e < c && !seen; e++)
            seen = call->id && st->calls->tool_calls[e].id &&
                   !strcmp(st->calls->tool_calls[e].id, call->id);
        for (size_t i = 0; call->id && !seen && i < k && !b->rc; i++)
            if (!strcmp(m[i].tool_call_id, call->id)) tool_message(b, &m[i], call->name, st);
    }
    return k;
}

static int effort(tk__pb *b, const tk_chat_opts *o, const char **out) {
    *out = o->reasoning_effort ? o->reasoning_effort : "max";
    if (!strcmp(*out, "low") || !strcmp(*out, "high") || !strcmp(*out, "max")) return 0;
    return b->rc = mw_errf(b->err, "kimi-k3: thinking effort '%s' is not low, high or max", *out);
}

void tk__render_kimi_k3(tk__pb *b, const tk_msg *m, size_t n, const tk_chat_opts *o) {
    k3_state st = {.thinking = o->thinking != 0};
    const char *eff = NULL;
    if (st.thinking && effort(b, o, &eff)) return;
    if (o->tools) tool_declare(b, o->tools);
    if (st.thinking) {
        char body[400];
        snprintf(body, sizeof body,
                 "`thinking_effort` guides on how much to think in your thinking channel (not "
                 "including the response channel), supported values include `low`, `medium`, "
                 "`high`, and `max`.\nNow the system is invoked with `thinking_effort=%s`.",
                 eff);
        internal_message(b, "thinking-effort", body);
    }
    for (size_t i = 0; i < n && !b->rc;) {
        if (is(&m[i], "tool")) {
            i += tool_run(b, m + i, n - i, &st);
            continue;
        }
        if (is(&m[i], "assistant"))
            assistant(b, &m[i], &st);
        else if (is(&m[i], "user") || is(&m[i], "system")) {
            author_message(b, &m[i]);
            tk__pb_txt(b, m[i].content);
            end_message(b);
        } else
            tk__pb_bad_role(b, "kimi-k3", m[i].role ? m[i].role : "(none)");
        i++;
    }
    if (o->add_generation_prompt) {
        open_tag(b, "message", (const char *const[][2]){{"role", "assistant"}, {NULL}});
        open_tag(b, st.thinking ? "think" : "response", NULL);
    }
}

/* ---- the output ----------------------------------------------------------------------------- */

/* Sections nest (message > tools > call > argument): a stack of their kinds; text goes where the
 * innermost says. */
enum { K3_OTHER, K3_THINK, K3_RESPONSE, K3_HIDDEN, K3_TOOLS };

static void k3_push(tk__k3_parse *k, int kind) {
    if (k->depth < TK__K3_DEPTH) k->stack[k->depth] = (uint8_t)kind;
    k->depth++;
}

void tk__k3_parse_init(tk__k3_parse *k, const tk_tokenizer *t, const tk_chat_opts *o) {
    *k = (tk__k3_parse){.open = tk_find(t, "<|open|>", 8),
                        .close = tk_find(t, "<|close|>", 9),
                        .sep = tk_find(t, "<|sep|>", 7),
                        .marker = -1,
                        .tools = o && o->tools};
    if (o && !o->add_generation_prompt) return;
    /* the generation prompt opened the assistant's message and its first section */
    k3_push(k, K3_OTHER);
    k3_push(k, o && o->thinking == 0 ? K3_RESPONSE : K3_THINK);
}

void tk__k3_parse_free(tk__k3_parse *k) {
    tk_text_free(&k->tag);
}

static int kind_of(const tk_text *tag) {
    size_t n = strcspn(tag->s ? tag->s : "", " ");
    if (n == 5 && !memcmp(tag->s, "think", 5)) return K3_THINK;
    if (n == 8 && !memcmp(tag->s, "response", 8)) return K3_RESPONSE;
    if (n == 7 && !memcmp(tag->s, "message", 7)) return K3_OTHER;
    return K3_HIDDEN; /* tools, call, argument, json: not for the user */
}

static int top_kind(const tk__k3_parse *k) {
    return k->depth == 0              ? K3_OTHER
           : k->depth <= TK__K3_DEPTH ? k->stack[k->depth - 1]
                                      : K3_HIDDEN;
}

/* A tools section's marker, its tag and <|sep|>, as text. */
static int raw_tag(const tk__k3_parse *k, tk_text *raw, mw_err *err) {
    const char *m = k->marker == k->open ? "<|open|>" : "<|close|>";
    if (tk_text_add(raw, m, strlen(m)) || tk_text_add(raw, k->tag.s ? k->tag.s : "", k->tag.n) ||
        tk_text_add(raw, "<|sep|>", 7))
        return mw_errf(err, "out of memory");
    return 0;
}

int tk__k3_parse_push(tk__k3_parse *k, const tk_tokenizer *t, int32_t id, bool *text,
                      bool *to_reasoning, tk_text *raw, mw_err *err) {
    *text = false;
    if (id >= 0 && (id == k->open || id == k->close)) {
        k->marker = id;
        k->tag.n = 0;
        return 0;
    }
    if (k->marker >= 0 && id == k->sep) {
        int kind = k->marker == k->open ? kind_of(&k->tag) : -1;
        const size_t n = strcspn(k->tag.s ? k->tag.s : "", " ");
        if (k->tools && k->marker == k->open &&
            (top_kind(k) == K3_TOOLS || (n == 5 && !memcmp(k->tag.s, "tools", 5))))
            kind = K3_TOOLS;
        const bool shown = kind == K3_TOOLS || (kind < 0 && top_kind(k) == K3_TOOLS);
        if (shown && raw_tag(k, raw, err)) return -1;
        if (kind >= 0)
            k3_push(k, kind);
        else if (k->depth > 0)
            k->depth--;
        k->marker = -1;
        return 0;
    }
    if (k->marker >= 0) { /* a tag's text, up to a length no tag has */
        const char *b;
        size_t n;
        tk_piece(t, id, false, &b, &n);
        if (k->tag.n + n <= 256)
            return tk_text_add(&k->tag, b, n) ? mw_errf(err, "out of memory") : 0;
        k->marker = -1;
    }
    const int top = top_kind(k);
    *text = true;
    *to_reasoning = top == K3_THINK || top == K3_HIDDEN;
    return 0;
}
