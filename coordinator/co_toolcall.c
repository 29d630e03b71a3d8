/* coordinator/co_toolcall.c — tool calls out of generated text (co_toolcall.h). */
#include "coordinator/co_toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CALL (1 << 20) /* bytes of one call's text: beyond, it is given back as text */

typedef struct format {
    const char *chat;
    const char *open, *close;   /* the markers around a call's JSON */
    const char *before, *after; /* what a forced call is written between */
} format;

static const format formats[] = {
    {"qwen3", "<tool_call>", "</tool_call>", "<tool_call>\n", "\n</tool_call>"},
};

struct co_toolcall {
    const format *f;
    bool in_call;
    co_buf held; /* outside a call: a tail that may open one; inside: the call's text */
    unsigned long long seed;
    int n_calls;
};

static const format *find(const char *chat) {
    for (size_t i = 0; chat && i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(formats[i].chat, chat)) return &formats[i];
    return NULL;
}

bool co_toolcall_known(const char *chat_name) {
    return find(chat_name) != NULL;
}

void co_toolcall_markers(const char *chat_name, const char **before, const char **after) {
    const format *f = find(chat_name);
    *before = f ? f->before : NULL;
    *after = f ? f->after : NULL;
}

co_toolcall *co_toolcall_new(const char *chat_name, unsigned long long id_seed) {
    const format *f = find(chat_name);
    co_toolcall *p = f ? calloc(1, sizeof *p) : NULL;
    if (!p) return NULL;
    p->f = f;
    p->seed = id_seed;
    return p;
}

void co_toolcall_free(co_toolcall *p) {
    if (!p) return;
    co_buf_free(&p->held);
    free(p);
}

static const char *skip_ws(const char *s, const char *end) {
    while (s < end && (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t')) s++;
    return s;
}

/* A call's JSON: {"name": "...", "arguments": {...} | "..."}; NULL when it is not one. */
static json_t *read_call(co_toolcall *p, const char *s, size_t n) {
    const char *b = skip_ws(s, s + n), *e = s + n;
    while (e > b && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' || e[-1] == '\t')) e--;
    json_t *j = json_loadb(b, (size_t)(e - b), JSON_REJECT_DUPLICATES, NULL);
    json_t *name = json_object_get(j, "name"), *args = json_object_get(j, "arguments");
    if (!json_is_object(j) || !json_is_string(name) || !json_string_length(name) ||
        (args && !json_is_object(args) && !json_is_string(args))) {
        json_decref(j);
        return NULL;
    }
    char *text = !args                  ? strdup("{}")
                 : json_is_string(args) ? strdup(json_string_value(args))
                                        : json_dumps(args, JSON_COMPACT);
    char id[40];
    snprintf(id, sizeof id, "call_%012llx%04x", p->seed & 0xffffffffffffull,
             (unsigned)p->n_calls++ & 0xffff);
    json_t *call = text ? json_pack("{s:s, s:s, s:{s:O, s:s}}", "id", id, "type", "function",
                                    "function", "name", name, "arguments", text)
                        : NULL;
    free(text);
    json_decref(j);
    return call;
}

/* The longest tail of s that is a proper prefix of m. */
static size_t partial_tail(const char *s, size_t n, const char *m) {
    const size_t ml = strlen(m);
    for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, m, k)) return k;
    return 0;
}

/* Moves what can be decided out of held. */
static int scan(co_toolcall *p, co_buf *text, json_t *calls, bool end) {
    for (;;) {
        const char *s = p->held.p ? p->held.p : "";
        const size_t n = p->held.len;
        const char *m = p->in_call ? p->f->close : p->f->open;
        const size_t ml = strlen(m);
        const char *at = n >= ml ? memmem(s, n, m, ml) : NULL;
        if (!p->in_call) {
            const size_t upto = at ? (size_t)(at - s) : end ? n : n - partial_tail(s, n, m);
            co_buf_add(text, s, upto);
            const size_t used = at ? upto + ml : upto;
            if (p->held.p) memmove(p->held.p, s + used, n - used);
            p->held.len = n - used;
            if (!at) return text->failed ? -1 : 0;
            p->in_call = true;
            continue;
        }
        if (!at && !end && n <= MAX_CALL) return 0;
        json_t *call = at ? read_call(p, s, (size_t)(at - s)) : NULL;
        const size_t used = at ? (size_t)(at - s) + ml : n;
        if (call) {
            json_array_append_new(calls, call);
        } else { /* not a call after all: the text as it came */
            co_buf_puts(text, p->f->open);
            co_buf_add(text, s, used);
        }
        if (p->held.p) memmove(p->held.p, s + used, n - used);
        p->held.len = n - used;
        p->in_call = false;
        if (text->failed) return -1;
    }
}

int co_toolcall_feed(co_toolcall *p, const char *s, size_t n, co_buf *text, json_t *calls) {
    co_buf_add(&p->held, s, n);
    if (p->held.failed) return -1;
    return scan(p, text, calls, false);
}

int co_toolcall_finish(co_toolcall *p, co_buf *text, json_t *calls) {
    return scan(p, text, calls, true);
}
