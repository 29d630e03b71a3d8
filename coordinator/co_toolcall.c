/* coordinator/co_toolcall.c — tool calls out of generated text (co_toolcall.h). */
#include "coordinator/co_toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CALL (1 << 20) /* bytes of one call's text: beyond, it is given back as text */
#define MAX_NAME 64

/* How a call's text between its markers holds the name and the arguments. */
typedef enum body_kind {
    BODY_JSON, /* {"name": ..., "arguments": ...} */
    BODY_DEEPSEEK, /* function<｜tool▁sep｜>NAME\n```json\nARGS\n``` or NAME<｜tool▁sep｜>ARGS */
    BODY_KIMI,    /* functions.NAME:IDX<|tool_call_argument_begin|>ARGS */
    BODY_HARMONY, /* NAME [<|constrain|>json]<|message|>ARGS */
} body_kind;

typedef struct format {
    const char *chat;
    const char *open, *close; /* around one call */
    const char *drop[2];      /* a section's markers around the calls: left out of the text */
    body_kind body;
    bool close_at_end; /* the generation's end closes a call (its closing token is a stop) */
    const char *specials[8];
    const char *forced_before, *forced_mid, *forced_after; /* before NAME mid ARGS after */
    bool parser_writes; /* the chat parser writes a call's text (its tokens are its structure) */
} format;

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END   "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN  "<｜tool▁call▁begin｜>"
#define DS_CALL_END    "<｜tool▁call▁end｜>"
#define DS_SEP         "<｜tool▁sep｜>"
#define DEEPSEEK(name)                                                                             \
    {                                                                                              \
        name, DS_CALL_BEGIN, DS_CALL_END, {DS_CALLS_BEGIN, DS_CALLS_END}, BODY_DEEPSEEK, false,    \
            {DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP, NULL},              \
            DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP, "\n```json\n",                         \
            "\n```" DS_CALL_END DS_CALLS_END, false                                                \
    }

#define KIMI_SEC_BEGIN "<|tool_calls_section_begin|>"
#define KIMI_SEC_END   "<|tool_calls_section_end|>"
#define KIMI_BEGIN     "<|tool_call_begin|>"
#define KIMI_END       "<|tool_call_end|>"
#define KIMI_ARGS      "<|tool_call_argument_begin|>"

static const format formats[] = {
    {"qwen3",
     "<tool_call>",
     "</tool_call>",
     {NULL, NULL},
     BODY_JSON,
     false,
     {"<tool_call>", "</tool_call>", NULL},
     "<tool_call>\n{\"name\": \"",
     "\", \"arguments\": ",
     "}\n</tool_call>",
     false},
    DEEPSEEK("deepseek-v3"),
    DEEPSEEK("deepseek-r1"),
    {"kimi-k2",
     KIMI_BEGIN,
     KIMI_END,
     {KIMI_SEC_BEGIN, KIMI_SEC_END},
     BODY_KIMI,
     false,
     {KIMI_SEC_BEGIN, KIMI_SEC_END, KIMI_BEGIN, KIMI_END, KIMI_ARGS, NULL},
     KIMI_SEC_BEGIN KIMI_BEGIN "functions.",
     ":0" KIMI_ARGS,
     KIMI_END KIMI_SEC_END,
     false},
    /* harmony's header tokens are its parser's structure (tokenizer/tk_chat_parse.c), which
     * writes a call's text in the one shape read here, whether the model wrote them as tokens
     * or spelled them */
    {"harmony",
     "<|channel|>commentary to=functions.",
     "<|call|>",
     {NULL, NULL},
     BODY_HARMONY,
     true,
     {"<|channel|>", "<|constrain|>", "<|message|>", NULL},
     "<|channel|>commentary to=functions.",
     " <|constrain|>json<|message|>",
     "",
     true},
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

const char *const *co_toolcall_specials(const char *chat_name) {
    const format *f = find(chat_name);
    return f && f->specials[0] ? f->specials : NULL;
}

bool co_toolcall_keeps_specials(const char *chat_name) {
    const format *f = find(chat_name);
    return f && !f->parser_writes;
}

bool co_toolcall_in_answer(const char *chat_name) {
    const format *f = find(chat_name);
    return f && !f->parser_writes;
}

bool co_toolcall_name_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
              (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '-'))
            return false;
    return n >= 1 && n <= MAX_NAME;
}

int co_toolcall_forced(const char *chat_name, const char *name, char *before, char *after,
                       size_t cap) {
    const format *f = find(chat_name);
    if (!f || !name || !co_toolcall_name_ok(name)) return -1;
    const int a = snprintf(before, cap, "%s%s%s", f->forced_before, name, f->forced_mid);
    const int b = snprintf(after, cap, "%s", f->forced_after);
    return a < 0 || b < 0 || (size_t)a >= cap || (size_t)b >= cap ? -1 : 0;
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

static bool is_ws(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* s[0..n) without the whitespace around it. */
static void trim(const char **s, size_t *n) {
    while (*n && is_ws(**s)) (*s)++, (*n)--;
    while (*n && is_ws((*s)[*n - 1])) (*n)--;
}

static const char *find_in(const char *s, size_t n, const char *m) {
    return memmem(s, n, m, strlen(m));
}

/* A function's name: printable, no space, at most MAX_NAME bytes. */
static bool good_name(const char *s, size_t n) {
    if (n == 0 || n > MAX_NAME) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == '"' || s[i] == '<') return false;
    return true;
}

/* The arguments' text as a JSON object's compact text; NULL when it is not one. */
static char *args_text(const char *s, size_t n) {
    trim(&s, &n);
    json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
    char *t = json_is_object(j) ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return t;
}

/* The call's name and arguments out of its body, per format; -1 when it is not a call. */
static int read_body(const format *f, const char *s, size_t n, char **name, char **args,
                     char **id) {
    *name = *args = *id = NULL;
    const char *nm = NULL, *a = NULL;
    size_t nl = 0, al = 0;
    if (f->body == BODY_JSON) {
        trim(&s, &n);
        json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
        json_t *jn = json_object_get(j, "name"), *ja = json_object_get(j, "arguments");
        if (json_is_object(j) && json_is_string(jn) && json_string_length(jn) &&
            (!ja || json_is_object(ja) || json_is_string(ja))) {
            *name = strdup(json_string_value(jn));
            *args = !ja                  ? strdup("{}")
                    : json_is_string(ja) ? args_text(json_string_value(ja), json_string_length(ja))
                                         : json_dumps(ja, JSON_COMPACT);
        }
        json_decref(j);
    } else if (f->body == BODY_DEEPSEEK) {
        const char *sep = find_in(s, n, DS_SEP);
        if (!sep) return -1;
        const char *rest = sep + strlen(DS_SEP);
        size_t rl = (size_t)(s + n - rest);
        if (sep - s == 8 && !memcmp(s, "function", 8)) { /* V3: the name, then a json block */
            const char *nlp = memchr(rest, '\n', rl);
            if (!nlp) return -1;
            nm = rest, nl = (size_t)(nlp - rest);
            a = nlp + 1, al = (size_t)(s + n - a);
            trim(&a, &al);
            if (al >= 7 && !memcmp(a, "```json", 7)) a += 7, al -= 7;
            if (al >= 3 && !memcmp(a + al - 3, "```", 3)) al -= 3;
        } else { /* V3.1: the name, the arguments */
            nm = s, nl = (size_t)(sep - s);
            a = rest, al = rl;
        }
    } else if (f->body == BODY_KIMI) {
        const char *ab = find_in(s, n, KIMI_ARGS);
        if (!ab) return -1;
        const char *h = s;
        size_t hl = (size_t)(ab - s);
        trim(&h, &hl);
        const char *colon = memrchr(h, ':', hl);
        if (!colon || !good_name(h, hl)) return -1;
        for (const char *d = colon + 1; d < h + hl; d++)
            if (*d < '0' || *d > '9') return -1;
        nm = h, nl = (size_t)(colon - h);
        if (nl > 10 && !memcmp(nm, "functions.", 10)) nm += 10, nl -= 10;
        if (!(*id = strndup(h, hl))) return -1;
        a = ab + strlen(KIMI_ARGS), al = (size_t)(s + n - a);
    } else { /* harmony */
        const char *msg = find_in(s, n, "<|message|>");
        if (!msg) return -1;
        nm = s;
        while (nl < (size_t)(msg - s) && s[nl] != ' ' && s[nl] != '<') nl++;
        a = msg + 11, al = (size_t)(s + n - a);
    }
    if (f->body != BODY_JSON) {
        trim(&nm, &nl);
        if (good_name(nm, nl)) {
            *name = strndup(nm, nl);
            *args = args_text(a, al);
        }
    }
    if (*name && *args) return 0;
    free(*name), free(*args), free(*id);
    *name = *args = *id = NULL;
    return -1;
}

static json_t *read_call(co_toolcall *p, const char *s, size_t n) {
    char *name, *args, *id;
    if (read_body(p->f, s, n, &name, &args, &id)) return NULL;
    char gen[40];
    snprintf(gen, sizeof gen, "call_%012llx%04x", p->seed & 0xffffffffffffull,
             (unsigned)p->n_calls++ & 0xffff);
    json_t *call = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id ? id : gen, "type", "function",
                             "function", "name", name, "arguments", args);
    free(name), free(args), free(id);
    return call;
}

/* The longest tail of s that is a proper prefix of m (NULL m: none). */
static size_t partial_tail(const char *s, size_t n, const char *m) {
    if (!m) return 0;
    const size_t ml = strlen(m);
    for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, m, k)) return k;
    return 0;
}

/* Outside a call: the first marker in s (the call's opening or a section's), its length in *ml
 * and whether it opens a call; NULL when none. */
static const char *first_marker(const format *f, const char *s, size_t n, size_t *ml, bool *opens) {
    const char *best = NULL;
    const char *const ms[3] = {f->open, f->drop[0], f->drop[1]};
    for (int i = 0; i < 3; i++) {
        const char *at = ms[i] ? find_in(s, n, ms[i]) : NULL;
        if (at && (!best || at < best)) best = at, *ml = strlen(ms[i]), *opens = i == 0;
    }
    return best;
}

static void drop_front(co_buf *b, size_t used) {
    if (b->p) memmove(b->p, b->p + used, b->len - used);
    b->len -= used;
}

/* Moves what can be decided out of held. */
static int scan(co_toolcall *p, co_buf *text, json_t *calls, bool end) {
    const format *f = p->f;
    for (;;) {
        const char *s = p->held.p ? p->held.p : "";
        const size_t n = p->held.len;
        if (!p->in_call) {
            size_t ml = 0;
            bool opens = false;
            const char *at = first_marker(f, s, n, &ml, &opens);
            size_t upto = at ? (size_t)(at - s) : n;
            if (!at && !end) {
                size_t hold = partial_tail(s, n, f->open);
                for (int i = 0; i < 2; i++) {
                    const size_t k = partial_tail(s, n, f->drop[i]);
                    if (k > hold) hold = k;
                }
                upto = n - hold;
            }
            co_buf_add(text, s, upto);
            drop_front(&p->held, at ? upto + ml : upto);
            if (!at) return text->failed ? -1 : 0;
            p->in_call = opens;
            continue;
        }
        const size_t cl = strlen(f->close);
        const char *at = find_in(s, n, f->close);
        if (!at && !end && n <= MAX_CALL) return 0;
        const bool whole = at || (end && f->close_at_end);
        const size_t body = at ? (size_t)(at - s) : n;
        json_t *call = whole && body <= MAX_CALL ? read_call(p, s, body) : NULL;
        const size_t used = at ? body + cl : n;
        if (call) {
            json_array_append_new(calls, call);
        } else { /* not a call after all: the text as it came */
            co_buf_puts(text, f->open);
            co_buf_add(text, s, used);
        }
        drop_front(&p->held, used);
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
