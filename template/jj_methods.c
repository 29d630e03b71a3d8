/* template/jj_methods.c — the methods templates call on strings (strip, split, startswith,
 * replace, join, ...), lists (index, count) and dicts (items, keys, values, get), with Python's
 * semantics; the sandbox has no mutating ones (append, update, pop: unsafe). */
#include <string.h>

#include "template/jj_internal.h"

typedef jj__val (*method_fn)(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn,
                             jj__val *kwv, int nkw);

static jj__val str_arg(jj__rt *r, jj__val *a, int n, int i, const char *what) {
    if (i >= n) jj__rfail(r, "%s: missing argument", what);
    if (a[i].t != JV_STR) jj__rfail(r, "%s: expected a string, not %s", what, jj__type_name(a[i]));
    return a[i];
}

static bool in_chars(jj__val chars, const char *s, size_t st, size_t en) {
    if (chars.t != JV_STR) return jj__space_at(s, en, st) == en - st;
    return en - st <= chars.u.s.n && memmem(chars.u.s.p, chars.u.s.n, s + st, en - st) != NULL;
}

/* strip family: which 'l', 'r', 'b'; chars NONE/UNDEF = whitespace */
jj__val jj__strip(jj__rt *r, jj__val s, jj__val chars, char which) {
    const char *p = s.u.s.p;
    size_t a = 0, b = s.u.s.n;
    if (which != 'r')
        while (a < b) {
            size_t j = a;
            jj__u8_get(p, b, &j);
            if (!in_chars(chars, p, a, j)) break;
            a = j;
        }
    if (which != 'l')
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            if (!in_chars(chars, p, st, b)) break;
            b = st;
        }
    return jj__str(p + a, b - a);
}

static jj__val m_strip(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn, jj__val *kwv,
                       int nkw, char which) {
    jj__val chars = n ? a[0] : jj__none();
    if (chars.t != JV_NONE && chars.t != JV_STR) jj__rfail(r, "strip arg must be None or str");
    return jj__strip(r, self, chars, which);
}
static jj__val m_bstrip(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                        int nk) {
    return m_strip(r, s, a, n, kn, kv, nk, 'b');
}
static jj__val m_lstrip(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                        int nk) {
    return m_strip(r, s, a, n, kn, kv, nk, 'l');
}
static jj__val m_rstrip(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                        int nk) {
    return m_strip(r, s, a, n, kn, kv, nk, 'r');
}

/* split / rsplit: sep None splits on whitespace runs */
static jj__val do_split(jj__rt *r, jj__val self, jj__val *a, int n, const char **kwn, jj__val *kwv,
                        int nkw, bool rev) {
    jj__val *sepv = jj__arg(a, n, kwn, kwv, nkw, 0, "sep");
    jj__val *maxv = jj__arg(a, n, kwn, kwv, nkw, 1, "maxsplit");
    int64_t max = maxv && maxv->t == JV_INT ? maxv->u.i : -1;
    jj__val out = jj__list_new(r, 0);
    const char *s = self.u.s.p;
    size_t len = self.u.s.n;
    if (!sepv || sepv->t == JV_NONE) {
        /* whitespace: collect all runs, then join the tail past maxsplit */
        jj__list parts = {0};
        size_t i = 0;
        while (i < len) {
            size_t k;
            while (i < len && (k = jj__space_at(s, len, i))) i += k;
            if (i >= len) break;
            size_t st = i;
            while (i < len && !jj__space_at(s, len, i)) jj__u8_get(s, len, &i);
            jj__list_push(r, &parts, jj__str(s + st, i - st));
        }
        if (max < 0 || (size_t)max >= parts.n) {
            *out.u.l = parts;
            return out;
        }
        if (!rev) {
            for (int64_t k = 0; k < max; k++) jj__list_push(r, out.u.l, parts.v[k]);
            const char *tail = parts.v[max].u.s.p;
            jj__val t = jj__strip(r, jj__str(tail, (size_t)(s + len - tail)), jj__none(), 'r');
            jj__list_push(r, out.u.l, t);
        } else {
            size_t first = parts.n - (size_t)max;
            const char *end = parts.v[first - 1].u.s.p + parts.v[first - 1].u.s.n;
            jj__list_push(r, out.u.l, jj__strip(r, jj__str(s, (size_t)(end - s)), jj__none(), 'l'));
            for (size_t k = first; k < parts.n; k++) jj__list_push(r, out.u.l, parts.v[k]);
        }
        return out;
    }
    if (sepv->t != JV_STR) jj__rfail(r, "split: must be str or None, not %s", jj__type_name(*sepv));
    if (!sepv->u.s.n) jj__rfail(r, "empty separator");
    const char *sep = sepv->u.s.p;
    size_t sn = sepv->u.s.n;
    if (!rev) {
        size_t st = 0;
        for (int64_t k = 0; max < 0 || k < max; k++) {
            const char *f = st <= len ? memmem(s + st, len - st, sep, sn) : NULL;
            if (!f) break;
            jj__list_push(r, out.u.l, jj__str(s + st, (size_t)(f - s) - st));
            st = (size_t)(f - s) + sn;
        }
        jj__list_push(r, out.u.l, jj__str(s + st, len - st));
        return out;
    }
    jj__list rparts = {0};
    size_t en = len;
    for (int64_t k = 0; max < 0 || k < max; k++) {
        const char *f = NULL;
        for (size_t i = en >= sn ? en - sn + 1 : 0; i-- > 0;)
            if (!memcmp(s + i, sep, sn)) {
                f = s + i;
                break;
            }
        if (!f) break;
        jj__list_push(r, &rparts, jj__str(f + sn, en - (size_t)(f - s) - sn));
        en = (size_t)(f - s);
    }
    jj__list_push(r, out.u.l, jj__str(s, en));
    for (size_t k = rparts.n; k-- > 0;) jj__list_push(r, out.u.l, rparts.v[k]);
    return out;
}
static jj__val m_split(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                       int nk) {
    return do_split(r, s, a, n, kn, kv, nk, false);
}
static jj__val m_rsplit(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                        int nk) {
    return do_split(r, s, a, n, kn, kv, nk, true);
}

static bool affix(jj__val s, jj__val x, bool end) {
    if (x.u.s.n > s.u.s.n) return false;
    const char *p = end ? s.u.s.p + s.u.s.n - x.u.s.n : s.u.s.p;
    return !memcmp(p, x.u.s.p, x.u.s.n);
}

static jj__val do_affix(jj__rt *r, jj__val self, jj__val *a, int n, bool end) {
    if (n < 1) jj__rfail(r, "%s takes at least 1 argument", end ? "endswith" : "startswith");
    if (a[0].t == JV_LIST && (a[0].flags & JF_TUPLE)) {
        for (size_t i = 0; i < a[0].u.l->n; i++) {
            jj__val x = a[0].u.l->v[i];
            if (x.t != JV_STR) jj__rfail(r, "tuple for startswith must only contain str");
            if (affix(self, x, end)) return jj__bool(1);
        }
        return jj__bool(0);
    }
    return jj__bool(affix(self, str_arg(r, a, n, 0, end ? "endswith" : "startswith"), end));
}
static jj__val m_startswith(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                            int nk) {
    return do_affix(r, s, a, n, false);
}
static jj__val m_endswith(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                          int nk) {
    return do_affix(r, s, a, n, true);
}

jj__val jj__replace(jj__rt *r, jj__val s, jj__val old, jj__val new, int64_t count) {
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    if (!old.u.s.n) { /* Python inserts new between every character and at both ends */
        size_t i = 0;
        int64_t done = 0;
        while (count < 0 || done < count) {
            jj__buf_put(r->e, &b, new.u.s.p, new.u.s.n);
            done++;
            if (i >= s.u.s.n) break;
            size_t st = i;
            jj__u8_get(s.u.s.p, s.u.s.n, &i);
            jj__buf_put(r->e, &b, s.u.s.p + st, i - st);
        }
        jj__buf_put(r->e, &b, s.u.s.p + i, s.u.s.n - i);
        return jj__str(b.p, b.n);
    }
    size_t st = 0;
    for (int64_t k = 0; count < 0 || k < count; k++) {
        const char *f = memmem(s.u.s.p + st, s.u.s.n - st, old.u.s.p, old.u.s.n);
        if (!f) break;
        jj__step(r);
        jj__buf_put(r->e, &b, s.u.s.p + st, (size_t)(f - s.u.s.p) - st);
        jj__buf_put(r->e, &b, new.u.s.p, new.u.s.n);
        st = (size_t)(f - s.u.s.p) + old.u.s.n;
    }
    jj__buf_put(r->e, &b, s.u.s.p + st, s.u.s.n - st);
    return jj__str(b.p, b.n);
}

static jj__val m_replace(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                         int nk) {
    jj__val *c = jj__arg(a, n, kn, kv, nk, 2, "count");
    return jj__replace(r, s, str_arg(r, a, n, 0, "replace"), str_arg(r, a, n, 1, "replace"),
                       c && c->t == JV_INT ? c->u.i : -1);
}

#define CASE_METHOD(NAME, MODE)                                                                    \
    static jj__val NAME(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,     \
                        int nk) {                                                                  \
        return jj__case(r, s, MODE);                                                               \
    }
CASE_METHOD(m_upper, 'u')
CASE_METHOD(m_lower, 'l')
CASE_METHOD(m_title, 't')
CASE_METHOD(m_capitalize, 'c')

static int64_t find(jj__val s, jj__val x, bool rev) {
    if (x.u.s.n > s.u.s.n) return -1;
    const char *f = NULL;
    if (!rev) {
        f = x.u.s.n ? memmem(s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n) : s.u.s.p;
    } else {
        for (size_t i = s.u.s.n - x.u.s.n + 1; i-- > 0;)
            if (!memcmp(s.u.s.p + i, x.u.s.p, x.u.s.n)) {
                f = s.u.s.p + i;
                break;
            }
    }
    return f ? (int64_t)jj__u8_len(s.u.s.p, (size_t)(f - s.u.s.p)) : -1;
}
static jj__val m_find(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                      int nk) {
    return jj__int(find(s, str_arg(r, a, n, 0, "find"), false));
}
static jj__val m_rfind(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                       int nk) {
    return jj__int(find(s, str_arg(r, a, n, 0, "rfind"), true));
}

static jj__val m_count(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                       int nk) {
    if (s.t == JV_LIST) {
        if (n < 1) jj__rfail(r, "count() takes exactly one argument");
        int64_t c = 0;
        for (size_t i = 0; i < s.u.l->n; i++) c += jj__eq(s.u.l->v[i], a[0]);
        return jj__int(c);
    }
    jj__val x = str_arg(r, a, n, 0, "count");
    if (!x.u.s.n) return jj__int((int64_t)jj__u8_len(s.u.s.p, s.u.s.n) + 1);
    int64_t c = 0;
    size_t st = 0;
    const char *f;
    while (st <= s.u.s.n && (f = memmem(s.u.s.p + st, s.u.s.n - st, x.u.s.p, x.u.s.n))) {
        c++;
        st = (size_t)(f - s.u.s.p) + x.u.s.n;
    }
    return jj__int(c);
}

static jj__val m_index(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                       int nk) {
    if (n < 1) jj__rfail(r, "index() takes at least 1 argument");
    if (s.t == JV_STR) {
        int64_t i = find(s, str_arg(r, a, n, 0, "index"), false);
        if (i < 0) jj__rfail(r, "substring not found");
        return jj__int(i);
    }
    for (size_t i = 0; i < s.u.l->n; i++)
        if (jj__eq(s.u.l->v[i], a[0])) return jj__int((int64_t)i);
    jj__rfail(r, "value is not in list");
}

static jj__val m_join(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                      int nk) {
    if (n < 1) jj__rfail(r, "join() takes exactly one argument");
    jj__list l = jj__iter(r, a[0]);
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    for (size_t i = 0; i < l.n; i++) {
        if (l.v[i].t != JV_STR)
            jj__rfail(r, "sequence item %zu: expected str instance, %s found", i,
                      jj__type_name(l.v[i]));
        if (i) jj__buf_put(r->e, &b, s.u.s.p, s.u.s.n);
        jj__buf_put(r->e, &b, l.v[i].u.s.p, l.v[i].u.s.n);
    }
    return jj__str(b.p, b.n);
}

static jj__val m_splitlines(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                            int nk) {
    jj__val out = jj__list_new(r, 0);
    const char *p = s.u.s.p;
    size_t st = 0, i = 0;
    while (i < s.u.s.n) {
        char c = p[i];
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d ||
            c == 0x1e) {
            jj__list_push(r, out.u.l, jj__str(p + st, i - st));
            i += (c == '\r' && i + 1 < s.u.s.n && p[i + 1] == '\n') ? 2 : 1;
            st = i;
        } else {
            i++;
        }
    }
    if (st < s.u.s.n) jj__list_push(r, out.u.l, jj__str(p + st, s.u.s.n - st));
    return out;
}

bool jj__cp_upper_p(uint32_t c);
bool jj__cp_lower_p(uint32_t c);

/* isdigit 'd', isalpha 'a', isalnum 'n', isspace 's', isupper 'u', islower 'l' */
static jj__val m_is(jj__val s, char kind) {
    if (!s.u.s.n) return jj__bool(0);
    bool any_cased = false;
    size_t i = 0;
    while (i < s.u.s.n) {
        uint32_t c = jj__u8_get(s.u.s.p, s.u.s.n, &i);
        bool digit = c >= '0' && c <= '9';
        bool alpha = jj__alpha(c) || (c >= 0xC0 && c != 0xD7 && c != 0xF7 && !jj__py_space(c));
        bool ok = kind == 'd'   ? digit
                  : kind == 'a' ? alpha
                  : kind == 'n' ? alpha || digit
                  : kind == 's' ? jj__py_space(c)
                  : kind == 'u' ? !jj__cp_lower_p(c)
                                : !jj__cp_upper_p(c);
        if (!ok) return jj__bool(0);
        any_cased |= jj__cp_cased(c);
    }
    return jj__bool(kind == 'u' || kind == 'l' ? any_cased : true);
}

#define IS_METHOD(NAME, KIND)                                                                      \
    static jj__val NAME(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,     \
                        int nk) {                                                                  \
        return m_is(s, KIND);                                                                      \
    }
IS_METHOD(m_isdigit, 'd')
IS_METHOD(m_isalpha, 'a')
IS_METHOD(m_isalnum, 'n')
IS_METHOD(m_isspace, 's')
IS_METHOD(m_isupper, 'u')
IS_METHOD(m_islower, 'l')

static jj__val m_items(jj__rt *r, jj__val d, jj__val *a, int n, const char **kn, jj__val *kv,
                       int nk) {
    jj__val out = jj__list_new(r, d.u.d->n);
    for (size_t i = 0; i < d.u.d->n; i++) {
        jj__val t = jj__list_new(r, 2);
        t.flags = JF_TUPLE;
        jj__list_push(r, t.u.l, d.u.d->k[i]);
        jj__list_push(r, t.u.l, d.u.d->v[i]);
        jj__list_push(r, out.u.l, t);
    }
    out.flags = JF_ITEMS;
    return out;
}

static jj__val m_keys(jj__rt *r, jj__val d, jj__val *a, int n, const char **kn, jj__val *kv,
                      int nk) {
    jj__val out = jj__list_new(r, d.u.d->n);
    for (size_t i = 0; i < d.u.d->n; i++) jj__list_push(r, out.u.l, d.u.d->k[i]);
    out.flags = JF_KEYS;
    return out;
}

static jj__val m_values(jj__rt *r, jj__val d, jj__val *a, int n, const char **kn, jj__val *kv,
                        int nk) {
    jj__val out = jj__list_new(r, d.u.d->n);
    for (size_t i = 0; i < d.u.d->n; i++) jj__list_push(r, out.u.l, d.u.d->v[i]);
    out.flags = JF_VALUES;
    return out;
}

static jj__val m_get(jj__rt *r, jj__val d, jj__val *a, int n, const char **kn, jj__val *kv,
                     int nk) {
    if (n < 1) jj__rfail(r, "get expected at least 1 argument");
    if (a[0].t == JV_LIST || a[0].t == JV_DICT) jj__rfail(r, "unhashable type");
    jj__val *v = jj__dict_get(d.u.d, a[0]);
    return v ? *v : n > 1 ? a[1] : jj__none();
}

static jj__val m_copy(jj__rt *r, jj__val d, jj__val *a, int n, const char **kn, jj__val *kv,
                      int nk) {
    if (d.t == JV_LIST) {
        jj__val l = jj__list_new(r, d.u.l->n);
        for (size_t i = 0; i < d.u.l->n; i++) jj__list_push(r, l.u.l, d.u.l->v[i]);
        return l;
    }
    jj__val o = jj__dict_new(r, d.u.d->n);
    for (size_t i = 0; i < d.u.d->n; i++) jj__dict_set(r, o.u.d, d.u.d->k[i], d.u.d->v[i]);
    return o;
}

jj__val jj__str_format(jj__rt *r, jj__val fmt, jj__val *a, int n, const char **kwn, jj__val *kwv,
                       int nkw);

static jj__val do_remove(jj__rt *r, jj__val s, jj__val *a, int n, bool suffix) {
    jj__val x = str_arg(r, a, n, 0, suffix ? "removesuffix" : "removeprefix");
    if (!affix(s, x, suffix)) return s;
    return jj__str(s.u.s.p + (suffix ? 0 : x.u.s.n), s.u.s.n - x.u.s.n);
}
static jj__val m_removeprefix(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                              int nk) {
    return do_remove(r, s, a, n, false);
}
static jj__val m_removesuffix(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                              int nk) {
    return do_remove(r, s, a, n, true);
}

/* ljust 'l', rjust 'r', zfill 'z' (zeros after a sign) */
static jj__val do_just(jj__rt *r, jj__val s, jj__val *a, int n, char how) {
    if (n < 1 || a[0].t != JV_INT) jj__rfail(r, "expected an integer width");
    int64_t w = a[0].u.i, len = (int64_t)jj__u8_len(s.u.s.p, s.u.s.n);
    if (w > 1 << 20) jj__rfail(r, "width too large");
    if (w <= len) return s;
    jj__val fill = how == 'z' ? jj__cstr("0") : n > 1 ? str_arg(r, a, n, 1, "fill") : jj__cstr(" ");
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    size_t sign = how == 'z' && s.u.s.n && (s.u.s.p[0] == '-' || s.u.s.p[0] == '+');
    if (how == 'l') jj__buf_put(r->e, &b, s.u.s.p, s.u.s.n);
    if (sign) jj__buf_put(r->e, &b, s.u.s.p, 1);
    for (int64_t k = len; k < w; k++) jj__buf_put(r->e, &b, fill.u.s.p, fill.u.s.n);
    if (how != 'l') jj__buf_put(r->e, &b, s.u.s.p + sign, s.u.s.n - sign);
    return jj__str(b.p, b.n);
}
static jj__val m_ljust(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                       int nk) {
    return do_just(r, s, a, n, 'l');
}
static jj__val m_rjust(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                       int nk) {
    return do_just(r, s, a, n, 'r');
}
static jj__val m_zfill(jj__rt *r, jj__val s, jj__val *a, int n, const char **kn, jj__val *kv,
                       int nk) {
    return do_just(r, s, a, n, 'z');
}

enum { S = 1, L = 2, D = 4 };

static const struct {
    int types;
    const char *name;
    method_fn fn;
} METHODS[] = {
    {S, "strip", m_bstrip},
    {S, "lstrip", m_lstrip},
    {S, "rstrip", m_rstrip},
    {S, "split", m_split},
    {S, "rsplit", m_rsplit},
    {S, "startswith", m_startswith},
    {S, "endswith", m_endswith},
    {S, "replace", m_replace},
    {S, "upper", m_upper},
    {S, "lower", m_lower},
    {S, "title", m_title},
    {S, "capitalize", m_capitalize},
    {S, "find", m_find},
    {S, "rfind", m_rfind},
    {S | L, "count", m_count},
    {S | L, "index", m_index},
    {S, "join", m_join},
    {S, "splitlines", m_splitlines},
    {S, "isdigit", m_isdigit},
    {S, "isalpha", m_isalpha},
    {S, "isalnum", m_isalnum},
    {S, "isspace", m_isspace},
    {S, "isupper", m_isupper},
    {S, "islower", m_islower},
    {D, "items", m_items},
    {D, "keys", m_keys},
    {D, "values", m_values},
    {D, "get", m_get},
    {D | L, "copy", m_copy},
    {S, "format", jj__str_format},
    {S, "removeprefix", m_removeprefix},
    {S, "removesuffix", m_removesuffix},
    {S, "ljust", m_ljust},
    {S, "rjust", m_rjust},
    {S, "zfill", m_zfill},
    {S, "isnumeric", m_isdigit},
    {S, "isdecimal", m_isdigit},
};

jj__val jj__method(jj__rt *r, jj__val obj, const char *name, size_t n, bool *found) {
    int t = obj.t == JV_STR                                        ? S
            : obj.t == JV_LIST && !(obj.flags & JF_GEN)            ? L
            : obj.t == JV_DICT && !(obj.flags & (JF_NS | JF_LOOP)) ? D
                                                                   : 0;
    *found = false;
    if (!t) return jj__undef(NULL);
    for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++)
        if ((METHODS[i].types & t) && strlen(METHODS[i].name) == n &&
            !memcmp(METHODS[i].name, name, n)) {
            if ((obj.flags & JF_TUPLE) && !strcmp(METHODS[i].name, "copy")) continue;
            *found = true;
            return jj__fn_new(r, METHODS[i].name, METHODS[i].fn, obj);
        }
    return jj__undef(NULL);
}
