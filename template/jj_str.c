/* template/jj_str.c — values as text, the way Python's str() and repr() write them (templates
 * print lists, dicts, None and floats, and the output must match jinja2's byte for byte), and
 * markupsafe's escape of a value's text. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj_internal.h"

/* Python's repr(float): the shortest digits that read back the same, fixed notation for decimal
 * exponents -4..15, else d.ddde+XX. */
void jj__fmt_float(char *out, size_t cap, double f) {
    if (isnan(f)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *p = buf;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.' && nd + 1 < sizeof digits) digits[nd++] = *p;
    digits[nd] = '\0';
    int exp = *p == 'e' ? atoi(p + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = '\0';
    char res[64];
    size_t w = 0;
    if (neg) res[w++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) res[w++] = (size_t)i < nd ? digits[i] : '0';
            res[w++] = '.';
            if ((size_t)exp + 1 < nd)
                for (size_t i = (size_t)exp + 1; i < nd; i++) res[w++] = digits[i];
            else
                res[w++] = '0';
        } else {
            res[w++] = '0';
            res[w++] = '.';
            for (int i = 0; i < -exp - 1; i++) res[w++] = '0';
            for (size_t i = 0; i < nd; i++) res[w++] = digits[i];
        }
        res[w] = '\0';
    } else {
        res[w++] = digits[0];
        if (nd > 1) {
            res[w++] = '.';
            for (size_t i = 1; i < nd; i++) res[w++] = digits[i];
        }
        snprintf(res + w, sizeof res - w, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    snprintf(out, cap, "%s", res);
}

/* What Python's repr escapes: controls, separators other than space, format characters. */
static bool printable(uint32_t c) {
    if (c < 0x20 || (c >= 0x7F && c < 0xA1) || c == 0xAD) return false;
    if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
    if ((c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF) return false;
    if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
    if (c == 0x61C || c == 0x180E || c >= 0xF0000) return false;
    return true;
}

static void repr_str(jj__rt *r, jj__buf *b, const char *s, size_t n) {
    bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    jj__buf_put(r->e, b, &q, 1);
    size_t i = 0;
    while (i < n) {
        size_t st = i;
        uint32_t c = jj__u8_get(s, n, &i);
        if (c == (uint32_t)q || c == '\\') {
            jj__buf_put(r->e, b, "\\", 1);
            jj__buf_put(r->e, b, s + st, 1);
        } else if (c == '\n' || c == '\r' || c == '\t') {
            jj__buf_puts(r->e, b, c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t");
        } else if (!printable(c)) {
            if (c < 0x100)
                jj__buf_printf(r->e, b, "\\x%02x", c);
            else if (c < 0x10000)
                jj__buf_printf(r->e, b, "\\u%04x", c);
            else
                jj__buf_printf(r->e, b, "\\U%08x", c);
        } else {
            jj__buf_put(r->e, b, s + st, i - st);
        }
    }
    jj__buf_put(r->e, b, &q, 1);
}

static void seq_repr(jj__rt *r, jj__buf *b, jj__val v) {
    if (v.flags & JF_GEN) {
        jj__buf_puts(r->e, b, "<generator object>");
        return;
    }
    bool tuple = v.flags & JF_TUPLE;
    const char *view = v.flags & JF_KEYS     ? "dict_keys("
                       : v.flags & JF_VALUES ? "dict_values("
                       : v.flags & JF_ITEMS  ? "dict_items("
                                             : "";
    jj__buf_puts(r->e, b, view);
    jj__buf_put(r->e, b, tuple ? "(" : "[", 1);
    for (size_t i = 0; i < v.u.l->n; i++) {
        if (i) jj__buf_put(r->e, b, ", ", 2);
        jj__repr(r, b, v.u.l->v[i]);
    }
    if (tuple && v.u.l->n == 1) jj__buf_put(r->e, b, ",", 1);
    jj__buf_put(r->e, b, tuple ? ")" : "]", 1);
    if (*view) jj__buf_put(r->e, b, ")", 1);
}

static void dict_repr(jj__rt *r, jj__buf *b, jj__val v) {
    if (v.flags & JF_LOOP) {
        jj__buf_puts(r->e, b, "<LoopContext>");
        return;
    }
    if (v.flags & JF_NS) jj__buf_puts(r->e, b, "<Namespace ");
    jj__buf_put(r->e, b, "{", 1);
    for (size_t i = 0; i < v.u.d->n; i++) {
        if (i) jj__buf_put(r->e, b, ", ", 2);
        jj__repr(r, b, v.u.d->k[i]);
        jj__buf_put(r->e, b, ": ", 2);
        jj__repr(r, b, v.u.d->v[i]);
    }
    jj__buf_put(r->e, b, "}", 1);
    if (v.flags & JF_NS) jj__buf_put(r->e, b, ">", 1);
}

static void scalar(jj__rt *r, jj__buf *b, jj__val v) {
    char t[64];
    switch (v.t) {
    case JV_NONE:
        jj__buf_puts(r->e, b, "None");
        break;
    case JV_BOOL:
        jj__buf_puts(r->e, b, v.u.b ? "True" : "False");
        break;
    case JV_INT:
        jj__buf_printf(r->e, b, "%" PRId64, v.u.i);
        break;
    case JV_FLOAT:
        jj__fmt_float(t, sizeof t, v.u.f);
        jj__buf_puts(r->e, b, t);
        break;
    case JV_LIST:
        seq_repr(r, b, v);
        break;
    case JV_DICT:
        dict_repr(r, b, v);
        break;
    case JV_FN:
        jj__buf_printf(r->e, b, "<function %s>", v.u.fn->name ? v.u.fn->name : "macro");
        break;
    default:
        break;
    }
}

void jj__str_of(jj__rt *r, jj__buf *b, jj__val v) {
    if (v.t == JV_STR)
        jj__buf_put(r->e, b, v.u.s.p, v.u.s.n);
    else if (v.t != JV_UNDEF)
        scalar(r, b, v);
}

void jj__repr(jj__rt *r, jj__buf *b, jj__val v) {
    jj__step(r);
    jj__nest_in(r);
    if (v.t == JV_STR)
        repr_str(r, b, v.u.s.p, v.u.s.n);
    else if (v.t == JV_UNDEF)
        jj__buf_puts(r->e, b, "Undefined");
    else
        scalar(r, b, v);
    r->nest--;
}

jj__val jj__to_str(jj__rt *r, jj__val v) {
    if (v.t == JV_STR) return v;
    jj__buf b = {0};
    jj__str_of(r, &b, v);
    return jj__str(b.p ? b.p : "", b.n);
}

jj__val jj__escape(jj__rt *r, jj__val in) {
    if (in.t == JV_STR && (in.flags & JF_SAFE)) return in;
    jj__val s = jj__to_str(r, in);
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    for (size_t i = 0; i < s.u.s.n; i++) {
        char c = s.u.s.p[i];
        const char *rep = c == '&'    ? "&amp;"
                          : c == '<'  ? "&lt;"
                          : c == '>'  ? "&gt;"
                          : c == '"'  ? "&#34;"
                          : c == '\'' ? "&#39;"
                                      : NULL;
        if (rep)
            jj__buf_puts(r->e, &b, rep);
        else
            jj__buf_put(r->e, &b, &c, 1);
    }
    jj__val out = jj__str(b.p, b.n);
    out.flags = JF_SAFE;
    return out;
}
