/* coordinator/co_toolcall_head.c — a tool call's head read as it arrives (co_toolcall_head.h). */
#include "coordinator/co_toolcall_head.h"

#include <string.h>

#include "coordinator/co_toolcall_text.h"

/* A cursor over a call's text so far: `more` when it ran out before it could tell. */
typedef struct cur {
    const char *s;
    size_t n, i;
    bool more;
} cur;

static void skip_space(cur *c) {
    while (c->i < c->n && co__tc_is_ws(c->s[c->i])) c->i++;
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
    while (c->i < c->n && !strchr(stops, c->s[c->i]) && c->i - st <= CO__TC_MAX_NAME) c->i++;
    if (c->i == c->n) return c->more = c->i - st <= CO__TC_MAX_NAME, false;
    *nm = c->s + st, *nl = c->i - st;
    return co__tc_good_name(*nm, *nl);
}

/* The head of a call: 1 read (the name, Kimi's id, the arguments' '{' at *args; K3's argument
 * sections, or none, at *args with *sections set), 0 not yet, -1 not in the shape read as it
 * arrives (the call is then read whole when it closes). */
int co__tc_read_head(const co__tc_format *f, const char *s, size_t n, const char **nm, size_t *nl,
                     const char **id, size_t *il, size_t *args, bool *sections) {
    cur c = {.s = s, .n = n};
    *id = NULL, *il = 0, *sections = false;
    bool ok = false;
    if (f->body == CO__TC_JSON) {
        skip_space(&c);
        ok = lit(&c, "{");
        if (ok) skip_space(&c), ok = lit(&c, "\"name\"");
        if (ok) skip_space(&c), ok = lit(&c, ":");
        if (ok) skip_space(&c), ok = lit(&c, "\"");
        if (ok) ok = name_upto(&c, "\"\\", nm, nl) && lit(&c, "\"");
        if (ok) skip_space(&c), ok = lit(&c, ",");
        if (ok) skip_space(&c), ok = lit(&c, "\"arguments\"");
        if (ok) skip_space(&c), ok = lit(&c, ":");
    } else if (f->body == CO__TC_DEEPSEEK) {
        ok = lit(&c, "function" DS_SEP);
        if (ok) ok = name_upto(&c, "\n", nm, nl) && lit(&c, "\n");
        if (ok) skip_space(&c), ok = lit(&c, "```json");
        if (!ok && !c.more) { /* V3.1: NAME<｜tool▁sep｜>ARGS */
            c = (cur){.s = s, .n = n};
            ok = name_upto(&c, "<", nm, nl) && lit(&c, DS_SEP);
        }
    } else if (f->body == CO__TC_KIMI) {
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
    } else if (f->body == CO__TC_K3) { /* NAME" index="N"<|sep|><|open|>json type="object"<|sep|> */
        ok = name_upto(&c, "\"&", nm, nl) && lit(&c, "\"");
        const char *sep = ok ? co__tc_find_in(s + c.i, n - c.i, K3_SEP) : NULL;
        if (ok && !sep) c.more = n - c.i < 64, ok = false;
        if (ok) c.i = (size_t)(sep - s) + 7, skip_space(&c);
        if (ok) { /* argument sections (or none) ahead */
            cur a = c, z = c;
            if (lit(&a, K3_OPEN "argument") || lit(&z, f->close))
                return *args = c.i, *sections = true, 1;
            if (a.more || z.more) return 0;
        }
        if (ok) ok = lit(&c, K3_OPEN "json");
        sep = ok ? co__tc_find_in(s + c.i, n - c.i, K3_SEP) : NULL;
        if (ok && !sep) c.more = n - c.i < 64, ok = false;
        if (ok) c.i = (size_t)(sep - s) + 7;
    } else { /* harmony: NAME, what the header holds more, <|message|> */
        ok = name_upto(&c, " <", nm, nl);
        const char *msg = ok ? co__tc_find_in(s + c.i, n - c.i, "<|message|>") : NULL;
        if (ok && !msg) c.more = n - c.i < 256, ok = false;
        if (ok) c.i = (size_t)(msg - s) + 11;
    }
    if (ok) skip_space(&c), ok = lit(&c, "{");
    if (!ok) return c.more ? 0 : -1;
    *args = c.i - 1;
    return 1;
}
