/* coordinator/co_toolcall.c — tool calls out of generated text (co_toolcall.h). */
#include "coordinator/co_toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CALL (1 << 20) /* bytes of one call's text: beyond, it is given back as text */
#define MAX_DROP 4         /* a format's section markers left out of the text */
#define MAX_NAME 64

/* How a call's text between its markers holds the name and the arguments. */
typedef enum body_kind {
    BODY_JSON, /* {"name": ..., "arguments": ...} */
    BODY_DEEPSEEK, /* function<｜tool▁sep｜>NAME\n```json\nARGS\n``` or NAME<｜tool▁sep｜>ARGS */
    BODY_KIMI,    /* functions.NAME:IDX<|tool_call_argument_begin|>ARGS */
    BODY_HARMONY, /* NAME [<|constrain|>json]<|message|>ARGS */
    BODY_K3,      /* NAME" index="N"<|sep|> then a json section, or argument sections */
} body_kind;

typedef struct format {
    const char *chat;
    const char *open, *close;   /* around one call */
    const char *drop[MAX_DROP]; /* a section's markers around the calls: left out of the text */
    body_kind body;
    const char *trailer; /* what may follow the arguments before close (whitespace around) */
    bool close_at_end;   /* the generation's end closes a call (its closing token is a stop) */
    bool parser_writes;  /* the chat parser writes a call's text (its tokens are its structure) */
    bool own_message;    /* a forced call is a message of its own, not in the opened answer */
    const char *specials[8];
    const char *forced_before, *forced_mid, *forced_after; /* before NAME mid ARGS after */
} format;

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALLS_END   "<｜tool▁calls▁end｜>"
#define DS_CALL_BEGIN  "<｜tool▁call▁begin｜>"
#define DS_CALL_END    "<｜tool▁call▁end｜>"
#define DS_SEP         "<｜tool▁sep｜>"
#define DEEPSEEK(name)                                                                             \
    {                                                                                              \
        .chat = name, .open = DS_CALL_BEGIN, .close = DS_CALL_END,                                 \
        .drop = {DS_CALLS_BEGIN, DS_CALLS_END}, .body = BODY_DEEPSEEK, .trailer = "```",           \
        .specials = {DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP, NULL},      \
        .forced_before = DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP,                           \
        .forced_mid = "\n```json\n", .forced_after = "\n```" DS_CALL_END DS_CALLS_END              \
    }

#define K3_OPEN  "<|open|>"
#define K3_CLOSE "<|close|>"
#define K3_SEP   "<|sep|>"

#define KIMI_SEC_BEGIN "<|tool_calls_section_begin|>"
#define KIMI_SEC_END   "<|tool_calls_section_end|>"
#define KIMI_BEGIN     "<|tool_call_begin|>"
#define KIMI_END       "<|tool_call_end|>"
#define KIMI_ARGS      "<|tool_call_argument_begin|>"

static const format formats[] = {
    {.chat = "qwen3",
     .open = "<tool_call>",
     .close = "</tool_call>",
     .body = BODY_JSON,
     .trailer = "}",
     .specials = {"<tool_call>", "</tool_call>", NULL},
     .forced_before = "<tool_call>\n{\"name\": \"",
     .forced_mid = "\", \"arguments\": ",
     .forced_after = "}\n</tool_call>"},
    DEEPSEEK("deepseek-v3"),
    DEEPSEEK("deepseek-r1"),
    {.chat = "kimi-k2",
     .open = KIMI_BEGIN,
     .close = KIMI_END,
     .drop = {KIMI_SEC_BEGIN, KIMI_SEC_END},
     .body = BODY_KIMI,
     .trailer = "",
     .specials = {KIMI_SEC_BEGIN, KIMI_SEC_END, KIMI_BEGIN, KIMI_END, KIMI_ARGS, NULL},
     .forced_before = KIMI_SEC_BEGIN KIMI_BEGIN "functions.",
     .forced_mid = ":0" KIMI_ARGS,
     .forced_after = KIMI_END KIMI_SEC_END},
    /* harmony's header tokens are its parser's structure (tokenizer/tk_chat_parse.c), which
     * writes a call's text in the one shape read here, whether the model wrote them as tokens
     * or spelled them */
    {.chat = "harmony",
     .open = "<|channel|>commentary to=functions.",
     .close = "<|call|>",
     .body = BODY_HARMONY,
     .trailer = "",
     .close_at_end = true,
     .parser_writes = true,
     .own_message = true,
     .specials = {"<|channel|>", "<|constrain|>", "<|message|>", NULL},
     .forced_before = "<|channel|>commentary to=functions.",
     .forced_mid = " <|constrain|>json<|message|>",
     .forced_after = ""},
    /* Kimi K3's tagged sections (tokenizer/tk_chat_k3.c): the parser writes a tools section as
     * its text; a forced call closes the response the prompt opened and gives its arguments as
     * one json section */
    {.chat = "kimi-k3",
     .open = K3_OPEN "call tool=\"",
     .close = K3_CLOSE "call" K3_SEP,
     .drop = {K3_OPEN "tools" K3_SEP, K3_CLOSE "tools" K3_SEP, K3_CLOSE "response" K3_SEP,
              K3_CLOSE "message" K3_SEP},
     .body = BODY_K3,
     .trailer = K3_CLOSE "json" K3_SEP,
     .parser_writes = true,
     .specials = {K3_OPEN, K3_CLOSE, K3_SEP, NULL},
     .forced_before = K3_CLOSE "response" K3_SEP K3_OPEN "tools" K3_SEP K3_OPEN "call tool=\"",
     .forced_mid = "\" index=\"1\"" K3_SEP K3_OPEN "json type=\"object\"" K3_SEP,
     .forced_after = K3_CLOSE "json" K3_SEP K3_CLOSE "call" K3_SEP K3_CLOSE "tools" K3_SEP K3_CLOSE
                              "message" K3_SEP},
};

struct co_toolcall {
    const format *f;
    bool in_call;
    co_buf held; /* outside a call: a tail that may open one; inside: the call's text */
    unsigned long long seed;
    int n_calls; /* calls given (announced or whole): the next one's index */
    /* the call under way once its head (the name, the arguments' '{') is read: announced */
    json_t *cur; /* {"id", "type", "function": {"name", "arguments"}}, arguments still "" */
    size_t args_start, scanned, sent, args_end; /* offsets in held */
    bool args_done, in_str, esc;
    int depth;
    /* Kimi K3's argument sections, given as the JSON object they make as they arrive (k3_args'
     * text, fragment by fragment): the call is announced at its first section that reads */
    bool k3, k3_whole; /* sections ahead; the first one did not read: read whole at the close */
    int k3_in;         /* 0 between sections, 1 in a string's value, 2 in another type's */
    int k3_keys_n;     /* keys given */
    size_t k3_sec;     /* offset in held of the section under way */
    char k3_name[MAX_NAME + 1];
    char *k3_key, *k3_type;
    json_t *k3_keys; /* the keys given: a repeated one ends the arguments */
    co_buf args_out; /* the arguments as given; sent counts into it */
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
    return f && !f->own_message;
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
    json_decref(p->cur);
    json_decref(p->k3_keys);
    free(p->k3_key), free(p->k3_type);
    co_buf_free(&p->args_out);
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

/* An attribute value as K3 escapes it (&amp; &quot;) back to its text; NULL when malformed. */
static char *unescape_attr(const char *s, size_t n) {
    char *o = malloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; o && i < n; i++) {
        if (s[i] == '&' && n - i >= 5 && !memcmp(s + i, "&amp;", 5))
            o[k++] = '&', i += 4;
        else if (s[i] == '&' && n - i >= 6 && !memcmp(s + i, "&quot;", 6))
            o[k++] = '"', i += 5;
        else
            o[k++] = s[i];
    }
    if (o) o[k] = '\0';
    return o;
}

/* The value of attribute `key="..."` in a tag's text, unescaped; NULL when absent. */
static char *attr_of(const char *tag, size_t n, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, " %s=\"", key);
    const char *at = find_in(tag, n, pat);
    if (!at) return NULL;
    const char *v = at + strlen(pat), *q = memchr(v, '"', (size_t)(tag + n - v));
    return q ? unescape_attr(v, (size_t)(q - v)) : NULL;
}

/* Whether v is of K3's argument type (NULL v: no type is). */
static bool k3_type_ok(const char *type, const json_t *v) {
    return (!strcmp(type, "string") && json_is_string(v)) ||
           (!strcmp(type, "number") && json_is_number(v)) ||
           (!strcmp(type, "boolean") && json_is_boolean(v)) ||
           (!strcmp(type, "null") && json_is_null(v)) ||
           (!strcmp(type, "object") && json_is_object(v)) ||
           (!strcmp(type, "array") && json_is_array(v));
}

/* K3's arguments: one json section, or argument sections (each a key, a JSON type, the value:
 * a string's text, else its JSON), into a JSON object's compact text; NULL when malformed. */
static char *k3_args(const char *s, size_t n) {
    trim(&s, &n);
    if (n >= 12 && !memcmp(s, K3_OPEN "json", 12)) {
        const char *sep = find_in(s, n, K3_SEP), *end = find_in(s, n, K3_CLOSE "json" K3_SEP);
        if (!sep || !end || end < sep) return NULL;
        const char *a = sep + 7;
        return args_text(a, (size_t)(end - a));
    }
    json_t *obj = json_object();
    const char *p = s, *e = s + n;
    while (obj && p < e) {
        size_t rest = (size_t)(e - p);
        const char *sep = find_in(p, rest, K3_SEP);
        const char *end = sep ? find_in(sep, (size_t)(e - sep), K3_CLOSE "argument" K3_SEP) : NULL;
        if (rest < 16 || memcmp(p, K3_OPEN "argument", 16) || !sep || !end) break;
        char *key = attr_of(p + 16, (size_t)(sep - p - 16), "key");
        char *type = attr_of(p + 16, (size_t)(sep - p - 16), "type");
        const char *v = sep + 7;
        const size_t vl = (size_t)(end - v);
        json_t *val = !key || !type             ? NULL
                      : !strcmp(type, "string") ? json_stringn(v, vl)
                                                : json_loadb(v, vl, JSON_DECODE_ANY, NULL);
        const bool ok = val && !json_object_get(obj, key) && k3_type_ok(type, val);
        if (ok) json_object_set(obj, key, val);
        json_decref(val);
        free(key), free(type);
        if (!ok) break;
        p = end + strlen(K3_CLOSE "argument" K3_SEP);
        while (p < e && is_ws(*p)) p++;
    }
    char *t = obj && p >= e ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    return t;
}

/* K3's body: NAME" index="N"<|sep|> then its arguments. */
static int read_k3(const char *s, size_t n, char **name, char **args) {
    const char *q = memchr(s, '"', n), *sep = find_in(s, n, K3_SEP);
    if (!q || !sep || sep < q) return -1;
    char *nm = unescape_attr(s, (size_t)(q - s));
    if (!nm || !good_name(nm, strlen(nm))) {
        free(nm);
        return -1;
    }
    char *a = k3_args(sep + 7, (size_t)(s + n - sep - 7));
    if (!a) {
        free(nm);
        return -1;
    }
    *name = nm, *args = a;
    return 0;
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
        const char *colon = NULL; /* the last ':' (memrchr is a GNU extension) */
        for (size_t i = hl; i > 0 && !colon; i--)
            if (h[i - 1] == ':') colon = h + i - 1;
        if (!colon || !good_name(h, hl)) return -1;
        for (const char *d = colon + 1; d < h + hl; d++)
            if (*d < '0' || *d > '9') return -1;
        nm = h, nl = (size_t)(colon - h);
        if (nl > 10 && !memcmp(nm, "functions.", 10)) nm += 10, nl -= 10;
        if (!(*id = strndup(h, hl))) return -1;
        a = ab + strlen(KIMI_ARGS), al = (size_t)(s + n - a);
    } else if (f->body == BODY_K3) {
        return read_k3(s, n, name, args);
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

static json_t *new_call(co_toolcall *p, const char *id, const char *name, const char *args) {
    char gen[40];
    snprintf(gen, sizeof gen, "call_%012llx%04x", p->seed & 0xffffffffffffull,
             (unsigned)p->n_calls & 0xffff);
    return json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id ? id : gen, "type", "function",
                     "function", "name", name, "arguments", args);
}

static json_t *read_call(co_toolcall *p, const char *s, size_t n) {
    char *name, *args, *id;
    if (read_body(p->f, s, n, &name, &args, &id)) return NULL;
    json_t *call = new_call(p, id, name, args);
    free(name), free(args), free(id);
    return call;
}

/* ---- a call's head, read as it arrives ---------------------------------------------------- */

/* A cursor over a call's text so far: `more` when it ran out before it could tell. */
typedef struct cur {
    const char *s;
    size_t n, i;
    bool more;
} cur;

static void skip_space(cur *c) {
    while (c->i < c->n && is_ws(c->s[c->i])) c->i++;
}

static bool lit(cur *c, const char *m) {
    const size_t ml = strlen(m);
    for (size_t k = 0; k < ml; k++) {
        if (c->i + k == c->n) return c->more = true, false;
        if (c->s[c->i + k] != m[k]) return false;
    }
    c->i += ml;
    return true;
}

/* A name up to one of stops. */
static bool name_upto(cur *c, const char *stops, const char **nm, size_t *nl) {
    const size_t st = c->i;
    while (c->i < c->n && !strchr(stops, c->s[c->i]) && c->i - st <= MAX_NAME) c->i++;
    if (c->i == c->n) return c->more = c->i - st <= MAX_NAME, false;
    *nm = c->s + st, *nl = c->i - st;
    return good_name(*nm, *nl);
}

/* The head of a call: 1 read (the name, Kimi's id, the arguments' '{' at *args; K3's argument
 * sections, or none, at *args with *sections set), 0 not yet, -1 not in the shape read as it
 * arrives (the call is then read whole when it closes). */
static int read_head(const format *f, const char *s, size_t n, const char **nm, size_t *nl,
                     const char **id, size_t *il, size_t *args, bool *sections) {
    cur c = {.s = s, .n = n};
    *id = NULL, *il = 0, *sections = false;
    bool ok = false;
    if (f->body == BODY_JSON) {
        skip_space(&c);
        ok = lit(&c, "{");
        if (ok) skip_space(&c), ok = lit(&c, "\"name\"");
        if (ok) skip_space(&c), ok = lit(&c, ":");
        if (ok) skip_space(&c), ok = lit(&c, "\"");
        if (ok) ok = name_upto(&c, "\"\\", nm, nl) && lit(&c, "\"");
        if (ok) skip_space(&c), ok = lit(&c, ",");
        if (ok) skip_space(&c), ok = lit(&c, "\"arguments\"");
        if (ok) skip_space(&c), ok = lit(&c, ":");
    } else if (f->body == BODY_DEEPSEEK) {
        ok = lit(&c, "function" DS_SEP);
        if (ok) ok = name_upto(&c, "\n", nm, nl) && lit(&c, "\n");
        if (ok) skip_space(&c), ok = lit(&c, "```json");
        if (!ok && !c.more) { /* V3.1: NAME<｜tool▁sep｜>ARGS */
            c = (cur){.s = s, .n = n};
            ok = name_upto(&c, "<", nm, nl) && lit(&c, DS_SEP);
        }
    } else if (f->body == BODY_KIMI) {
        skip_space(&c);
        const size_t st = c.i;
        lit(&c, "functions.");
        c.more = false;
        ok = name_upto(&c, ":", nm, nl) && lit(&c, ":");
        const size_t digits = c.i;
        while (ok && c.i < c.n && c.s[c.i] >= '0' && c.s[c.i] <= '9') c.i++;
        if (ok && c.i == c.n) c.more = true, ok = false;
        if (ok && c.i == digits) ok = false;
        *id = s + st, *il = c.i - st;
        if (ok) skip_space(&c), ok = lit(&c, KIMI_ARGS);
    } else if (f->body == BODY_K3) { /* NAME" index="N"<|sep|><|open|>json type="object"<|sep|> */
        ok = name_upto(&c, "\"&", nm, nl) && lit(&c, "\"");
        const char *sep = ok ? find_in(s + c.i, n - c.i, K3_SEP) : NULL;
        if (ok && !sep) c.more = n - c.i < 64, ok = false;
        if (ok) c.i = (size_t)(sep - s) + 7, skip_space(&c);
        if (ok) { /* argument sections (or none) ahead */
            cur a = c, z = c;
            if (lit(&a, K3_OPEN "argument") || lit(&z, f->close))
                return *args = c.i, *sections = true, 1;
            if (a.more || z.more) return 0;
        }
        if (ok) ok = lit(&c, K3_OPEN "json");
        sep = ok ? find_in(s + c.i, n - c.i, K3_SEP) : NULL;
        if (ok && !sep) c.more = n - c.i < 64, ok = false;
        if (ok) c.i = (size_t)(sep - s) + 7;
    } else { /* harmony: NAME, what the header holds more, <|message|> */
        ok = name_upto(&c, " <", nm, nl);
        const char *msg = ok ? find_in(s + c.i, n - c.i, "<|message|>") : NULL;
        if (ok && !msg) c.more = n - c.i < 256, ok = false;
        if (ok) c.i = (size_t)(msg - s) + 11;
    }
    if (ok) skip_space(&c), ok = lit(&c, "{");
    if (!ok) return c.more ? 0 : -1;
    *args = c.i - 1;
    return 1;
}

static int add_delta(json_t *deltas, json_t *d) {
    if (!deltas) return json_decref(d), 0;
    return !d || json_array_append_new(deltas, d) ? -1 : 0;
}

/* The head read: the call is given its id and name now (a first delta). */
static int announce(co_toolcall *p, const char *nm, size_t nl, const char *id, size_t il,
                    size_t args, json_t *deltas) {
    char name[MAX_NAME + 1], idb[MAX_NAME + 32];
    snprintf(name, sizeof name, "%.*s", (int)nl, nm);
    if (id) snprintf(idb, sizeof idb, "%.*s", (int)(il < MAX_NAME + 31 ? il : MAX_NAME + 31), id);
    if (!(p->cur = new_call(p, id ? idb : NULL, name, ""))) return -1;
    p->args_start = p->scanned = p->sent = args;
    p->args_done = p->in_str = p->esc = false;
    p->depth = 0;
    json_t *f = json_object_get(p->cur, "function");
    return add_delta(deltas,
                     json_pack("{s:i, s:O, s:s, s:{s:O, s:s}}", "index", p->n_calls, "id",
                               json_object_get(p->cur, "id"), "type", "function", "function",
                               "name", json_object_get(f, "name"), "arguments", ""));
}

/* s[from..upto) up to its last whole character: the text may have been cut inside one. */
static size_t whole_chars(const char *s, size_t from, size_t upto) {
    for (size_t back = 1; back <= 3 && back <= upto - from; back++) {
        const unsigned char b = (unsigned char)s[upto - back];
        if (b < 0x80) break;
        if (b >= 0xc0) { /* a lead byte: its sequence whole or not */
            const size_t len = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
            if (len > back) upto -= back;
            break;
        }
    }
    return upto;
}

/* Reads the arguments on from where it stopped: they end where their braces close (outside
 * strings), or where the call's closing marker stands outside a string (arguments cut short);
 * it waits where the marker may be starting. The bytes read go out as a delta. */
static int scan_args(co_toolcall *p, json_t *deltas) {
    const char *s = p->held.p;
    const size_t n = p->held.len, cl = strlen(p->f->close);
    size_t i = p->scanned;
    for (; i < n && !p->args_done; i++) {
        const char b = s[i];
        if (p->in_str) {
            if (p->esc)
                p->esc = false;
            else if (b == '\\')
                p->esc = true;
            else if (b == '"')
                p->in_str = false;
            continue;
        }
        if (b == p->f->close[0]) {
            const size_t k = n - i < cl ? n - i : cl;
            if (!memcmp(s + i, p->f->close, k)) {
                if (k < cl) break; /* perhaps the marker: wait */
                p->args_done = true, p->args_end = i;
                break;
            }
        }
        if (b == '"') p->in_str = true;
        if (b == '{' || b == '[') p->depth++;
        if ((b == '}' || b == ']') && --p->depth == 0) p->args_done = true, p->args_end = i + 1;
    }
    p->scanned = p->args_done ? p->args_end : i;
    const size_t upto = p->args_done ? p->scanned : whole_chars(s, p->sent, p->scanned);
    if (upto == p->sent) return 0;
    json_t *frag = json_stringn_nocheck(s + p->sent, upto - p->sent);
    p->sent = upto;
    return add_delta(
        deltas, json_pack("{s:i, s:{s:o}}", "index", p->n_calls, "function", "arguments", frag));
}

static int put_json_str(co_buf *b, const char *s, size_t n, bool bare);

/* The announced call ends at body (its closing marker, or the generation's end): its arguments
 * are the text read, whatever it holds (K3's sections: the JSON given, closed where it stands, a
 * value not given whole left to the text); what follows them that is not the format's trailer
 * goes to text. */
static int close_announced(co_toolcall *p, size_t body, co_buf *text, json_t *calls,
                           json_t *deltas) {
    const char *s = p->held.p, *a;
    size_t al, sent;
    if (p->k3) {
        if (!p->args_done) {
            const bool str = p->k3_in == 1 &&
                             !put_json_str(&p->args_out, s + p->scanned, body - p->scanned, true);
            p->args_end = str ? body : p->k3_in == 2 ? p->k3_sec : p->scanned;
            co_buf_puts(&p->args_out, p->k3_in == 1 ? "\"}" : "}");
        }
        if (p->args_out.failed) return -1;
        a = p->args_out.p, al = p->args_out.len, sent = p->sent;
    } else {
        if (!p->args_done) p->args_end = body;
        size_t end = p->args_end;
        while (end > p->args_start && is_ws(s[end - 1])) end--;
        a = s + p->args_start, al = end - p->args_start, sent = p->sent - p->args_start;
    }
    if (al > sent) {
        json_t *frag = json_stringn_nocheck(a + sent, al - sent);
        if (add_delta(deltas, json_pack("{s:i, s:{s:o}}", "index", p->n_calls, "function",
                                        "arguments", frag)))
            return -1;
    }
    const char *t = s + p->args_end;
    size_t tl = body > p->args_end ? body - p->args_end : 0;
    trim(&t, &tl);
    if (tl && !(strlen(p->f->trailer) == tl && !memcmp(t, p->f->trailer, tl)))
        co_buf_add(text, t, tl);
    json_t *f = json_object_get(p->cur, "function");
    json_t *args = json_stringn_nocheck(a, al);
    if (!args || json_object_set_new(f, "arguments", args) ||
        json_array_append_new(calls, p->cur)) {
        p->cur = NULL;
        return -1;
    }
    p->cur = NULL;
    p->n_calls++;
    return 0;
}

/* The longest tail of s that is a proper prefix of m (NULL m: none). */
static size_t partial_tail(const char *s, size_t n, const char *m) {
    if (!m) return 0;
    const size_t ml = strlen(m);
    for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, m, k)) return k;
    return 0;
}

#define K3_ARG_OPEN  K3_OPEN "argument"
#define K3_ARG_CLOSE K3_CLOSE "argument" K3_SEP

/* s[0..n) as JSON string text, bare: without its quotes, escaped as jansson writes it, so that
 * the parts add up to k3_args' text; -1 when it is not UTF-8 (or memory runs out). */
static int put_json_str(co_buf *b, const char *s, size_t n, bool bare) {
    json_t *j = json_stringn_nocheck(s, n);
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!t) return -1;
    const size_t tl = strlen(t);
    co_buf_add(b, bare ? t + 1 : t, bare ? tl - 2 : tl);
    free(t);
    return 0;
}

/* K3 sections are ahead of the call named nm, from args in held: nothing announced yet. */
static int k3_begin(co_toolcall *p, const char *nm, size_t nl, size_t args) {
    snprintf(p->k3_name, sizeof p->k3_name, "%.*s", (int)nl, nm);
    p->k3 = true, p->k3_whole = p->args_done = false;
    p->k3_in = p->k3_keys_n = 0;
    p->scanned = args, p->sent = 0;
    co_buf_clear(&p->args_out);
    json_decref(p->k3_keys);
    return (p->k3_keys = json_object()) ? 0 : -1;
}

/* The section whose tag was read gives its key: the call is announced at its first. */
static int k3_key(co_toolcall *p, json_t *deltas) {
    if (!p->cur) {
        if (announce(p, p->k3_name, strlen(p->k3_name), NULL, 0, p->scanned, deltas)) return -1;
        p->sent = 0; /* counting into args_out */
    }
    co_buf_puts(&p->args_out, p->k3_keys_n++ ? "," : "{");
    if (put_json_str(&p->args_out, p->k3_key, strlen(p->k3_key), false)) return -1;
    co_buf_puts(&p->args_out, ":");
    return json_object_set_new(p->k3_keys, p->k3_key, json_true());
}

/* K3's argument sections from where it stopped, into args_out as k3_args writes them: a
 * string's value escaped as it arrives, another type's once its section closes (checked against
 * the type, written compact). The call is announced at its first section that reads; when the
 * first does not, the call is left to be read whole at its close; a later one ends the arguments
 * there (what follows goes to the text). The text added goes out as a delta. */
static int scan_k3(co_toolcall *p, json_t *deltas) {
    const char *s = p->held.p;
    const size_t n = p->held.len, cl = strlen(p->f->close), ol = strlen(K3_ARG_OPEN);
    size_t i = p->scanned, bad_at = 0;
    bool bad = false;
    while (!p->args_done && !bad) {
        if (p->k3_in == 0) { /* between sections: the next one's tag, or the call's close */
            while (i < n && is_ws(s[i])) i++;
            if (i == n) break;
            const size_t kc = n - i < cl ? n - i : cl, ko = n - i < ol ? n - i : ol;
            if (!memcmp(s + i, p->f->close, kc)) {
                if (kc < cl) break;
                co_buf_puts(&p->args_out, p->k3_keys_n ? "}" : "{}");
                p->args_done = true, p->args_end = i;
                break;
            }
            const char *sep = ko == ol ? find_in(s + i, n - i, K3_SEP) : NULL;
            if (memcmp(s + i, K3_ARG_OPEN, ko) || (!sep && n - i > MAX_NAME + 256)) {
                bad = true, bad_at = i;
                break;
            }
            if (!sep) break;
            const size_t tl = (size_t)(sep - s) - i - ol;
            free(p->k3_key), free(p->k3_type);
            p->k3_key = attr_of(s + i + ol, tl, "key");
            p->k3_type = attr_of(s + i + ol, tl, "type");
            static const char *const types[] = {"string", "number", "boolean",
                                                "null",   "object", "array"};
            bool known = false;
            for (size_t t = 0; p->k3_type && t < sizeof types / sizeof *types; t++)
                known = known || !strcmp(p->k3_type, types[t]);
            if (!p->k3_key || !known || json_object_get(p->k3_keys, p->k3_key)) {
                bad = true, bad_at = i;
                break;
            }
            p->k3_sec = i, p->scanned = i = (size_t)(sep - s) + strlen(K3_SEP);
            p->k3_in = strcmp(p->k3_type, "string") ? 2 : 1;
            if (p->k3_in == 1) {
                if (k3_key(p, deltas)) return -1;
                co_buf_puts(&p->args_out, "\"");
            }
            continue;
        }
        const char *end = find_in(s + i, n - i, K3_ARG_CLOSE);
        const char *stop = find_in(s + i, n - i, p->f->close);
        if (stop && (!end || stop < end)) { /* the call closes inside the value: cut short */
            if (p->k3_in == 2 || put_json_str(&p->args_out, s + i, (size_t)(stop - s) - i, true))
                bad = true, bad_at = p->k3_in == 2 ? p->k3_sec : i;
            else
                i = (size_t)(stop - s), bad = true, bad_at = i;
            break;
        }
        if (p->k3_in == 2) { /* another type: whole once its section closes */
            if (!end) break;
            const size_t vs = p->scanned;
            json_t *v = json_loadb(s + vs, (size_t)(end - s) - vs, JSON_DECODE_ANY, NULL);
            char *t =
                k3_type_ok(p->k3_type, v) ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
            json_decref(v);
            if (!t) {
                bad = true, bad_at = p->k3_sec;
                break;
            }
            const int rc = k3_key(p, deltas);
            co_buf_puts(&p->args_out, t);
            free(t);
            if (rc) return -1;
        } else { /* a string: what arrived, short of a marker perhaps starting, whole characters */
            size_t upto = end ? (size_t)(end - s) : n;
            if (!end) {
                size_t hold = partial_tail(s + i, n - i, K3_ARG_CLOSE);
                const size_t h2 = partial_tail(s + i, n - i, p->f->close);
                upto = whole_chars(s, i, n - (h2 > hold ? h2 : hold));
            }
            if (put_json_str(&p->args_out, s + i, upto - i, true)) {
                bad = true, bad_at = i;
                break;
            }
            p->scanned = i = upto;
            if (!end) break;
            co_buf_puts(&p->args_out, "\"");
        }
        p->scanned = i = (size_t)(end - s) + strlen(K3_ARG_CLOSE);
        p->k3_in = 0;
    }
    if (bad && !p->cur) {
        p->k3_whole = true;
        return 0;
    }
    if (bad) { /* the arguments end here, closed */
        co_buf_puts(&p->args_out, p->k3_in == 1 ? "\"}" : "}");
        p->args_done = true, p->args_end = bad_at;
    }
    if (!p->args_done) p->scanned = i;
    if (p->args_out.failed) return -1;
    if (!p->cur || p->args_out.len == p->sent) return 0;
    json_t *frag = json_stringn_nocheck(p->args_out.p + p->sent, p->args_out.len - p->sent);
    p->sent = p->args_out.len;
    return add_delta(
        deltas, json_pack("{s:i, s:{s:o}}", "index", p->n_calls, "function", "arguments", frag));
}

/* Outside a call: the first marker in s (the call's opening or a section's), its length in *ml
 * and whether it opens a call; NULL when none. */
static const char *first_marker(const format *f, const char *s, size_t n, size_t *ml, bool *opens) {
    const char *best = NULL;
    const char *const ms[1 + MAX_DROP] = {f->open, f->drop[0], f->drop[1], f->drop[2], f->drop[3]};
    for (int i = 0; i < 1 + MAX_DROP; i++) {
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
static int scan(co_toolcall *p, co_buf *text, json_t *calls, json_t *deltas, bool end) {
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
                for (int i = 0; i < MAX_DROP; i++) {
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
        if (!p->cur && !p->k3) {
            const char *nm, *id;
            size_t nl, il, args;
            bool sections;
            if (read_head(f, s, n, &nm, &nl, &id, &il, &args, &sections) == 1 &&
                (sections ? k3_begin(p, nm, nl, args) : announce(p, nm, nl, id, il, args, deltas)))
                return -1;
        }
        if (p->k3 && !p->k3_whole) {
            if (!p->args_done && scan_k3(p, deltas)) return -1;
        } else if (p->cur && !p->args_done && scan_args(p, deltas)) {
            return -1;
        }
        const size_t cl = strlen(f->close);
        const size_t from = p->cur ? (p->args_done ? p->args_end : n) : 0;
        const char *at = n > from ? find_in(s + from, n - from, f->close) : NULL;
        if (!at && !end && n <= MAX_CALL) return 0;
        const size_t body = at ? (size_t)(at - s) : n;
        const size_t used = at ? body + cl : n;
        if (p->cur) {
            if (close_announced(p, body, text, calls, deltas)) return -1;
        } else {
            const bool whole = at || (end && f->close_at_end);
            json_t *call = whole && body <= MAX_CALL ? read_call(p, s, body) : NULL;
            if (call) { /* read whole: its id and name, then its arguments */
                json_t *fn = json_object_get(call, "function");
                if (add_delta(deltas,
                              json_pack("{s:i, s:O, s:s, s:{s:O, s:s}}", "index", p->n_calls, "id",
                                        json_object_get(call, "id"), "type", "function", "function",
                                        "name", json_object_get(fn, "name"), "arguments", "")) ||
                    add_delta(deltas, json_pack("{s:i, s:{s:O}}", "index", p->n_calls, "function",
                                                "arguments", json_object_get(fn, "arguments"))) ||
                    json_array_append_new(calls, call))
                    return -1;
                p->n_calls++;
            } else { /* not a call after all: the text as it came */
                co_buf_puts(text, f->open);
                co_buf_add(text, s, used);
            }
        }
        drop_front(&p->held, used);
        p->in_call = p->k3 = p->k3_whole = false;
        if (text->failed) return -1;
    }
}

int co_toolcall_feed(co_toolcall *p, const char *s, size_t n, co_buf *text, json_t *calls,
                     json_t *deltas) {
    co_buf_add(&p->held, s, n);
    if (p->held.failed) return -1;
    return scan(p, text, calls, deltas, false);
}

int co_toolcall_finish(co_toolcall *p, co_buf *text, json_t *calls, json_t *deltas) {
    return scan(p, text, calls, deltas, true);
}
