/* coordinator/co_toolcall.c — tool calls out of generated text (co_toolcall.h): the text passed
 * through, a call announced at its head and its JSON arguments streamed as they arrive. */
#include "coordinator/co_toolcall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_toolcall_body.h"
#include "coordinator/co_toolcall_head.h"
#include "coordinator/co_toolcall_k3.h"
#include "coordinator/co_toolcall_state.h"

#define MAX_CALL (1 << 20) /* bytes of one call's text: beyond, it is given back as text */

bool co_toolcall_known(const char *chat_name) {
    return co__tc_find(chat_name) != NULL;
}

const char *const *co_toolcall_specials(const char *chat_name) {
    const co__tc_format *f = co__tc_find(chat_name);
    return f && f->specials[0] ? f->specials : NULL;
}

bool co_toolcall_keeps_specials(const char *chat_name) {
    const co__tc_format *f = co__tc_find(chat_name);
    return f && !f->parser_writes;
}

bool co_toolcall_in_answer(const char *chat_name) {
    const co__tc_format *f = co__tc_find(chat_name);
    return f && !f->own_message;
}

bool co_toolcall_name_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
              (s[n] >= '0' && s[n] <= '9') || s[n] == '_' || s[n] == '-'))
            return false;
    return n >= 1 && n <= CO__TC_MAX_NAME;
}

int co_toolcall_forced(const char *chat_name, const char *name, char *before, char *after,
                       size_t cap) {
    const co__tc_format *f = co__tc_find(chat_name);
    if (!f || !name || !co_toolcall_name_ok(name)) return -1;
    const int a = snprintf(before, cap, "%s%s%s", f->forced_before, name, f->forced_mid);
    const int b = snprintf(after, cap, "%s", f->forced_after);
    return a < 0 || b < 0 || (size_t)a >= cap || (size_t)b >= cap ? -1 : 0;
}

co_toolcall *co_toolcall_new(const char *chat_name, unsigned long long id_seed) {
    const co__tc_format *f = co__tc_find(chat_name);
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

static json_t *read_call(co_toolcall *p, const char *s, size_t n) {
    char *name, *args, *id;
    if (co__tc_read_body(p->f, s, n, &name, &args, &id)) return NULL;
    json_t *call = co__tc_new_call(p, id, name, args);
    free(name), free(args), free(id);
    return call;
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
    const size_t upto = p->args_done ? p->scanned : co__tc_whole_chars(s, p->sent, p->scanned);
    if (upto == p->sent) return 0;
    json_t *frag = json_stringn_nocheck(s + p->sent, upto - p->sent);
    p->sent = upto;
    return co__tc_add_delta(
        deltas, json_pack("{s:i, s:{s:o}}", "index", p->n_calls, "function", "arguments", frag));
}

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
            const bool str = p->k3_in == 1 && !co__tc_put_json_str(&p->args_out, s + p->scanned,
                                                                   body - p->scanned, true);
            p->args_end = str ? body : p->k3_in == 2 ? p->k3_sec : p->scanned;
            co_buf_puts(&p->args_out, p->k3_in == 1 ? "\"}" : "}");
        }
        if (p->args_out.failed) return -1;
        a = p->args_out.p, al = p->args_out.len, sent = p->sent;
    } else {
        if (!p->args_done) p->args_end = body;
        size_t end = p->args_end;
        while (end > p->args_start && co__tc_is_ws(s[end - 1])) end--;
        a = s + p->args_start, al = end - p->args_start, sent = p->sent - p->args_start;
    }
    if (al > sent) {
        json_t *frag = json_stringn_nocheck(a + sent, al - sent);
        if (co__tc_add_delta(deltas, json_pack("{s:i, s:{s:o}}", "index", p->n_calls, "function",
                                               "arguments", frag)))
            return -1;
    }
    const char *t = s + p->args_end;
    size_t tl = body > p->args_end ? body - p->args_end : 0;
    co__tc_trim(&t, &tl);
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

/* Outside a call: the first marker in s (the call's opening or a section's), its length in *ml
 * and whether it opens a call; NULL when none. */
static const char *first_marker(const co__tc_format *f, const char *s, size_t n, size_t *ml,
                                bool *opens) {
    const char *best = NULL;
    const char *const ms[1 + CO__TC_MAX_DROP] = {f->open, f->drop[0], f->drop[1], f->drop[2],
                                                 f->drop[3]};
    for (int i = 0; i < 1 + CO__TC_MAX_DROP; i++) {
        const char *at = ms[i] ? co__tc_find_in(s, n, ms[i]) : NULL;
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
    const co__tc_format *f = p->f;
    for (;;) {
        const char *s = p->held.p ? p->held.p : "";
        const size_t n = p->held.len;
        if (!p->in_call) {
            size_t ml = 0;
            bool opens = false;
            const char *at = first_marker(f, s, n, &ml, &opens);
            size_t upto = at ? (size_t)(at - s) : n;
            if (!at && !end) {
                size_t hold = co__tc_partial_tail(s, n, f->open);
                for (int i = 0; i < CO__TC_MAX_DROP; i++) {
                    const size_t k = co__tc_partial_tail(s, n, f->drop[i]);
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
            if (co__tc_read_head(f, s, n, &nm, &nl, &id, &il, &args, &sections) == 1 &&
                (sections ? co__tc_k3_begin(p, nm, nl, args)
                          : co__tc_announce(p, nm, nl, id, il, args, deltas)))
                return -1;
        }
        if (p->k3 && !p->k3_whole) {
            if (!p->args_done && co__tc_scan_k3(p, deltas)) return -1;
        } else if (p->cur && !p->args_done && scan_args(p, deltas)) {
            return -1;
        }
        const size_t cl = strlen(f->close);
        const size_t from = p->cur ? (p->args_done ? p->args_end : n) : 0;
        const char *at = n > from ? co__tc_find_in(s + from, n - from, f->close) : NULL;
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
                if (co__tc_add_delta(deltas,
                                     json_pack("{s:i, s:O, s:s, s:{s:O, s:s}}", "index", p->n_calls,
                                               "id", json_object_get(call, "id"), "type",
                                               "function", "function", "name",
                                               json_object_get(fn, "name"), "arguments", "")) ||
                    co__tc_add_delta(deltas,
                                     json_pack("{s:i, s:{s:O}}", "index", p->n_calls, "function",
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
