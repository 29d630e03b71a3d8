/* coordinator/co_toolcall_k3.c — Kimi K3's tool-call arguments, whole and streamed
 * (co_toolcall_k3.h). */
#include "coordinator/co_toolcall_k3.h"

#include <stdio.h>
#include <stdlib.h>

#define K3_ARG_OPEN  K3_OPEN "argument"
#define K3_ARG_CLOSE K3_CLOSE "argument" K3_SEP

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
    co__tc_trim(&s, &n);
    if (n >= 12 && !memcmp(s, K3_OPEN "json", 12)) {
        const char *sep = co__tc_find_in(s, n, K3_SEP),
                   *end = co__tc_find_in(s, n, K3_CLOSE "json" K3_SEP);
        if (!sep || !end || end < sep) return NULL;
        const char *a = sep + 7;
        return co__tc_args_text(a, (size_t)(end - a));
    }
    json_t *obj = json_object();
    const char *p = s, *e = s + n;
    while (obj && p < e) {
        size_t rest = (size_t)(e - p);
        const char *sep = co__tc_find_in(p, rest, K3_SEP);
        const char *end =
            sep ? co__tc_find_in(sep, (size_t)(e - sep), K3_CLOSE "argument" K3_SEP) : NULL;
        if (rest < 16 || memcmp(p, K3_OPEN "argument", 16) || !sep || !end) break;
        char *key = co__tc_attr_of(p + 16, (size_t)(sep - p - 16), "key");
        char *type = co__tc_attr_of(p + 16, (size_t)(sep - p - 16), "type");
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
        while (p < e && co__tc_is_ws(*p)) p++;
    }
    char *t = obj && p >= e ? json_dumps(obj, JSON_COMPACT) : NULL;
    json_decref(obj);
    return t;
}

/* A K3 call's body (NAME" index="N"<|sep|> then its arguments) read whole: its name and its
 * arguments as compact JSON; -1 when it is malformed. */
int co__tc_k3_read(const char *s, size_t n, char **name, char **args) {
    const char *q = memchr(s, '"', n), *sep = co__tc_find_in(s, n, K3_SEP);
    if (!q || !sep || sep < q) return -1;
    char *nm = co__tc_unescape_attr(s, (size_t)(q - s));
    if (!nm || !co__tc_good_name(nm, strlen(nm))) {
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

/* s[0..n) as JSON string text, bare: without its quotes, escaped as jansson writes it, so that
 * the parts add up to k3_args' text; -1 when it is not UTF-8 (or memory runs out). */
int co__tc_put_json_str(co_buf *b, const char *s, size_t n, bool bare) {
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
int co__tc_k3_begin(struct co_toolcall *p, const char *nm, size_t nl, size_t args) {
    snprintf(p->k3_name, sizeof p->k3_name, "%.*s", (int)nl, nm);
    p->k3 = true, p->k3_whole = p->args_done = false;
    p->k3_in = p->k3_keys_n = 0;
    p->scanned = args, p->sent = 0;
    co_buf_clear(&p->args_out);
    json_decref(p->k3_keys);
    return (p->k3_keys = json_object()) ? 0 : -1;
}

/* The section whose tag was read gives its key: the call is announced at its first. */
static int k3_key(struct co_toolcall *p, json_t *deltas) {
    if (!p->cur) {
        if (co__tc_announce(p, p->k3_name, strlen(p->k3_name), NULL, 0, p->scanned, deltas))
            return -1;
        p->sent = 0; /* counting into args_out */
    }
    co_buf_puts(&p->args_out, p->k3_keys_n++ ? "," : "{");
    if (co__tc_put_json_str(&p->args_out, p->k3_key, strlen(p->k3_key), false)) return -1;
    co_buf_puts(&p->args_out, ":");
    return json_object_set_new(p->k3_keys, p->k3_key, json_true());
}

/* K3's argument sections from where it stopped, into args_out as k3_args writes them: a
 * string's value escaped as it arrives, another type's once its section closes (checked against
 * the type, written compact). The call is announced at its first section that reads; when the
 * first does not, the call is left to be read whole at its close; a later one ends the arguments
 * there (what follows goes to the text). The text added goes out as a delta. */
int co__tc_scan_k3(struct co_toolcall *p, json_t *deltas) {
    const char *s = p->held.p;
    const size_t n = p->held.len, cl = strlen(p->f->close), ol = strlen(K3_ARG_OPEN);
    size_t i = p->scanned, bad_at = 0;
    bool bad = false;
    while (!p->args_done && !bad) {
        if (p->k3_in == 0) { /* between sections: the next one's tag, or the call's close */
            while (i < n && co__tc_is_ws(s[i])) i++;
            if (i == n) break;
            const size_t kc = n - i < cl ? n - i : cl, ko = n - i < ol ? n - i : ol;
            if (!memcmp(s + i, p->f->close, kc)) {
                if (kc < cl) break;
                co_buf_puts(&p->args_out, p->k3_keys_n ? "}" : "{}");
                p->args_done = true, p->args_end = i;
                break;
            }
            const char *sep = ko == ol ? co__tc_find_in(s + i, n - i, K3_SEP) : NULL;
            if (memcmp(s + i, K3_ARG_OPEN, ko) || (!sep && n - i > CO__TC_MAX_NAME + 256)) {
                bad = true, bad_at = i;
                break;
            }
            if (!sep) break;
            const size_t tl = (size_t)(sep - s) - i - ol;
            free(p->k3_key), free(p->k3_type);
            p->k3_key = co__tc_attr_of(s + i + ol, tl, "key");
            p->k3_type = co__tc_attr_of(s + i + ol, tl, "type");
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
        const char *end = co__tc_find_in(s + i, n - i, K3_ARG_CLOSE);
        const char *stop = co__tc_find_in(s + i, n - i, p->f->close);
        if (stop && (!end || stop < end)) { /* the call closes inside the value: cut short */
            if (p->k3_in == 2 ||
                co__tc_put_json_str(&p->args_out, s + i, (size_t)(stop - s) - i, true))
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
                size_t hold = co__tc_partial_tail(s + i, n - i, K3_ARG_CLOSE);
                const size_t h2 = co__tc_partial_tail(s + i, n - i, p->f->close);
                upto = co__tc_whole_chars(s, i, n - (h2 > hold ? h2 : hold));
            }
            if (co__tc_put_json_str(&p->args_out, s + i, upto - i, true)) {
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
    return co__tc_add_delta(
        deltas, json_pack("{s:i, s:{s:o}}", "index", p->n_calls, "function", "arguments", frag));
}
