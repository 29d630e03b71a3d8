/* template/jj_filters_value.c — the filters over single values: tojson (as transformers
 * overrides it), default, length, trim, upper / lower / title / capitalize, replace, string, int,
 * float, abs, round, indent, center, wordcount, format, attr, escape, safe. */
#include <errno.h>
#include <fenv.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj_internal.h"

/* json.dumps' ensure_ascii: every non-ASCII character as \\uXXXX (a surrogate pair above the
 * BMP); the text is already JSON, so only characters inside strings are non-ASCII */
static jj__val jj__ascii_json(jj__rt *r, jj__val s) {
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    size_t i = 0;
    while (i < s.u.s.n) {
        size_t st = i;
        if ((unsigned char)s.u.s.p[i] < 0x80) {
            while (i < s.u.s.n && (unsigned char)s.u.s.p[i] < 0x80) i++;
            jj__buf_put(r->e, &b, s.u.s.p + st, i - st);
            continue;
        }
        uint32_t c = jj__u8_get(s.u.s.p, s.u.s.n, &i);
        if (c >= 0x10000) {
            c -= 0x10000;
            jj__buf_printf(r->e, &b, "\\u%04x\\u%04x", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
        } else {
            jj__buf_printf(r->e, &b, "\\u%04x", c);
        }
    }
    return jj__str(b.p, b.n);
}

static jj__val f_tojson(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                        int nkw) {
    jj__val *ind = jj__arg(a, n, kwn, kwv, nkw, 1, "indent");
    jj__val *seps = jj__arg(a, n, kwn, kwv, nkw, 2, "separators");
    jj__val *sk = jj__arg(a, n, kwn, kwv, nkw, 3, "sort_keys");
    jj__val *asc = jj__arg(a, n, kwn, kwv, nkw, 0, "ensure_ascii");
    const char *indent = NULL;
    if (ind && ind->t == JV_INT) {
        int64_t k = ind->u.i < 0 ? 0 : ind->u.i > 64 ? 64 : ind->u.i;
        char *sp = jj__alloc(r->e, (size_t)k + 1);
        memset(sp, ' ', (size_t)k);
        indent = sp;
    } else if (ind && ind->t == JV_STR) {
        indent = jj__strdup(r->e, ind->u.s.p, ind->u.s.n);
    } else if (ind && ind->t != JV_NONE) {
        jj__rfail(r, "tojson: indent must be an integer or a string");
    }
    const char *item_sep = indent ? "," : ", ", *key_sep = ": ";
    if (seps && seps->t == JV_LIST && seps->u.l->n == 2 && seps->u.l->v[0].t == JV_STR &&
        seps->u.l->v[1].t == JV_STR) {
        item_sep = jj__strdup(r->e, seps->u.l->v[0].u.s.p, seps->u.l->v[0].u.s.n);
        key_sep = jj__strdup(r->e, seps->u.l->v[1].u.s.p, seps->u.l->v[1].u.s.n);
    } else if (seps && seps->t != JV_NONE) {
        jj__rfail(r, "tojson: separators must be a pair of strings");
    }
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    jj__tojson(r, &b, in, indent, item_sep, key_sep, sk && jj__truthy(*sk), 0);
    if (asc && jj__truthy(*asc)) return jj__ascii_json(r, jj__str(b.p, b.n));
    return jj__str(b.p, b.n);
}

/* A string as Python's int() and float() read it: surrounding whitespace stripped, an underscore
 * between two digits dropped (any other stays, and the parse fails). */
static char *number_text(jj__rt *r, jj__val in) {
    jj__val s = jj__strip(r, in, jj__none(), 'b');
    char *t = jj__alloc(r->e, s.u.s.n + 1), *o = t;
    for (size_t i = 0; i < s.u.s.n; i++) {
        const char *p = s.u.s.p;
        if (p[i] == '_' && i && i + 1 < s.u.s.n && jj__digit(p[i - 1]) && jj__digit(p[i + 1]))
            continue;
        *o++ = p[i];
    }
    *o = '\0';
    return t;
}

static jj__val f_int(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                     int nkw) {
    jj__val *def = jj__arg(a, n, kwn, kwv, nkw, 0, "default");
    jj__val d = def ? *def : jj__int(0);
    if (in.t == JV_INT) return in;
    if (in.t == JV_BOOL) return jj__int(in.u.b);
    if (in.t == JV_FLOAT)
        return isfinite(in.u.f) && fabs(in.u.f) < 9.2e18 ? jj__int((int64_t)in.u.f) : d;
    if (in.t != JV_STR) return d;
    char *t = number_text(r, in);
    if (!*t) return d;
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (!*end && !errno) return jj__int(v);
    if (strpbrk(t, "xXpP")) return d; /* C reads hex floats; Python does not */
    double f = strtod(t, &end);
    if (!*end && isfinite(f) && fabs(f) < 9.2e18) return jj__int((int64_t)f);
    return d;
}

static jj__val f_float(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                       int nkw) {
    jj__val *def = jj__arg(a, n, kwn, kwv, nkw, 0, "default");
    jj__val d = def ? *def : jj__float(0);
    if (jj__is_num(in)) return jj__float(jj__num(in));
    if (in.t != JV_STR) return d;
    char *t = number_text(r, in), *end;
    if (!*t) return d;
    if (strpbrk(t, "xXpP")) return d; /* C reads hex floats; Python does not */
    double f = strtod(t, &end);
    return *end ? d : jj__float(f);
}

static jj__val f_round(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                       int nkw) {
    jj__val *pv = jj__arg(a, n, kwn, kwv, nkw, 0, "precision");
    jj__val *mv = jj__arg(a, n, kwn, kwv, nkw, 1, "method");
    int64_t p = pv && pv->t == JV_INT ? pv->u.i : 0;
    if (!jj__is_num(in)) jj__rfail(r, "round needs a number");
    bool common = !mv || (mv->t == JV_STR && mv->u.s.n == 6 && !memcmp(mv->u.s.p, "common", 6));
    if (common && in.t != JV_FLOAT) return jj__int(in.t == JV_INT ? in.u.i : in.u.b);
    double x = jj__num(in), m = pow(10.0, (double)p);
    const char *method = mv && mv->t == JV_STR ? jj__strdup(r->e, mv->u.s.p, mv->u.s.n) : "common";
    if (!strcmp(method, "ceil")) return jj__float(ceil(x * m) / m);
    if (!strcmp(method, "floor")) return jj__float(floor(x * m) / m);
    if (strcmp(method, "common")) jj__rfail(r, "method must be common, ceil or floor");
    fesetround(FE_TONEAREST);
    return jj__float(nearbyint(x * m) / m);
}

/* jinja2's indent: width spaces (or the string), first line too when first, blank lines too when
 * blank. */
static jj__val f_indent(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                        int nkw) {
    jj__val *wv = jj__arg(a, n, kwn, kwv, nkw, 0, "width");
    jj__val *fv = jj__arg(a, n, kwn, kwv, nkw, 1, "first");
    jj__val *bv = jj__arg(a, n, kwn, kwv, nkw, 2, "blank");
    jj__val ind;
    if (wv && wv->t == JV_STR) {
        ind = *wv;
    } else {
        int64_t w = wv && wv->t == JV_INT ? wv->u.i : 4;
        w = w < 0 ? 0 : w > 256 ? 256 : w;
        char *sp = jj__alloc(r->e, (size_t)w + 1);
        memset(sp, ' ', (size_t)w);
        ind = jj__str(sp, (size_t)w);
    }
    if (in.t != JV_STR) /* jinja2 appends a newline to it: only a string can take one */
        jj__rfail(r, "indent needs a string, not %s", jj__type_name(in));
    jj__val s = in;
    bool blank = bv && jj__truthy(*bv);
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    if (fv && jj__truthy(*fv)) jj__buf_put(r->e, &b, ind.u.s.p, ind.u.s.n);
    /* jinja2 appends a newline, then splits into lines: a trailing newline stays */
    size_t st = 0;
    for (size_t i = 0; i <= s.u.s.n; i++) {
        if (i < s.u.s.n && s.u.s.p[i] != '\n') continue;
        if (st) {
            jj__buf_put(r->e, &b, "\n", 1);
            if (blank || i > st) jj__buf_put(r->e, &b, ind.u.s.p, ind.u.s.n);
        }
        jj__buf_put(r->e, &b, s.u.s.p + st, i - st);
        st = i + 1;
    }
    return jj__str(b.p, b.n);
}

/* jinja2's title: words start after '-', whitespace or an opening bracket */
static jj__val f_title(jj__rt *r, jj__val in) {
    jj__val s = jj__to_str(r, in);
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    size_t i = 0;
    bool start = true;
    while (i < s.u.s.n) {
        size_t st = i;
        uint32_t c = jj__u8_get(s.u.s.p, s.u.s.n, &i);
        bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || jj__py_space(c);
        jj__val piece = jj__case(r, jj__str(s.u.s.p + st, i - st), sep ? 'l' : start ? 'u' : 'l');
        jj__buf_put(r->e, &b, piece.u.s.p, piece.u.s.n);
        start = sep;
    }
    return jj__str(b.p, b.n);
}

static jj__val f_center(jj__rt *r, jj__val in, jj__val *a, int n) {
    jj__val s = jj__to_str(r, in);
    int64_t w = n && a[0].t == JV_INT ? a[0].u.i : 80, len = (int64_t)jj__u8_len(s.u.s.p, s.u.s.n);
    if (w > 1 << 20) jj__rfail(r, "center: width too large");
    if (w <= len) return s;
    int64_t pad = w - len, left = pad / 2 + (pad & w & 1);
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    for (int64_t i = 0; i < left; i++) jj__buf_put(r->e, &b, " ", 1);
    jj__buf_put(r->e, &b, s.u.s.p, s.u.s.n);
    for (int64_t i = 0; i < pad - left; i++) jj__buf_put(r->e, &b, " ", 1);
    return jj__str(b.p, b.n);
}

static jj__val f_wordcount(jj__rt *r, jj__val in) {
    jj__val s = jj__to_str(r, in);
    int64_t count = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.u.s.n; i++) {
        unsigned char c = (unsigned char)s.u.s.p[i];
        bool w = c >= 0x80 || c == '_' || jj__alpha(c) || jj__digit(c);
        if (w && !in_word) count++;
        in_word = w;
    }
    return jj__int(count);
}

static jj__val str_filter(jj__rt *r, const char *name, jj__val in, jj__val *a, int n,
                          const char **kwn, jj__val *kwv, int nkw, bool *done) {
    *done = true;
    if (!strcmp(name, "trim")) {
        jj__val *chars = jj__arg(a, n, kwn, kwv, nkw, 0, "chars");
        return jj__strip(r, jj__to_str(r, in), chars ? *chars : jj__none(), 'b');
    }
    if (!strcmp(name, "upper")) return jj__case(r, jj__to_str(r, in), 'u');
    if (!strcmp(name, "lower")) return jj__case(r, jj__to_str(r, in), 'l');
    if (!strcmp(name, "capitalize")) return jj__case(r, jj__to_str(r, in), 'c');
    if (!strcmp(name, "title")) return f_title(r, in);
    if (!strcmp(name, "string")) return jj__to_str(r, in);
    if (!strcmp(name, "replace")) {
        if (n < 2 || a[0].t != JV_STR || a[1].t != JV_STR)
            jj__rfail(r, "replace needs two strings");
        jj__val *c = jj__arg(a, n, kwn, kwv, nkw, 2, "count");
        return jj__replace(r, jj__to_str(r, in), a[0], a[1], c && c->t == JV_INT ? c->u.i : -1);
    }
    if (!strcmp(name, "indent")) return f_indent(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "center")) return f_center(r, in, a, n);
    if (!strcmp(name, "wordcount")) return f_wordcount(r, in);
    if (!strcmp(name, "escape") || !strcmp(name, "e")) return jj__escape(r, in);
    if (!strcmp(name, "forceescape")) {
        jj__val v = jj__to_str(r, in);
        v.flags = 0;
        return jj__escape(r, v);
    }
    if (!strcmp(name, "format")) {
        jj__val t = jj__list_new(r, (size_t)n);
        t.flags = JF_TUPLE;
        for (int k = 0; k < n; k++) jj__list_push(r, t.u.l, a[k]);
        return jj__format_percent(r, jj__to_str(r, in), t);
    }
    *done = false;
    return in;
}

jj__val jj__value_filter(jj__rt *r, const char *name, jj__val in, jj__val *a, int n,
                         const char **kwn, jj__val *kwv, int nkw, bool *done) {
    *done = true;
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jj__val *dv = jj__arg(a, n, kwn, kwv, nkw, 0, "default_value");
        jj__val *bv = jj__arg(a, n, kwn, kwv, nkw, 1, "boolean");
        bool boolean = bv && jj__truthy(*bv);
        if (in.t == JV_UNDEF || (boolean && !jj__truthy(in))) return dv ? *dv : jj__str("", 0);
        return in;
    }
    if (!strcmp(name, "tojson")) return f_tojson(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "length") || !strcmp(name, "count")) return jj__int(jj__len(r, in));
    if (!strcmp(name, "safe")) {
        jj__val v = jj__to_str(r, in);
        v.flags = JF_SAFE;
        return v;
    }
    if (!strcmp(name, "int")) return f_int(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "float")) return f_float(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "round")) return f_round(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "abs")) {
        if (in.t == JV_INT && in.u.i != INT64_MIN) return jj__int(in.u.i < 0 ? -in.u.i : in.u.i);
        if (in.t == JV_BOOL) return jj__int(in.u.b);
        if (in.t == JV_FLOAT) return jj__float(fabs(in.u.f));
        jj__rfail(r, "bad operand type for abs(): '%s'", jj__type_name(in));
    }
    if (!strcmp(name, "attr")) {
        if (n < 1 || a[0].t != JV_STR) jj__rfail(r, "attr needs a name");
        return jj__getattr(r, in, a[0].u.s.p, a[0].u.s.n);
    }
    return str_filter(r, name, in, a, n, kwn, kwv, nkw, done);
}
