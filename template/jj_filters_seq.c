/* template/jj_filters_seq.c — the filters over sequences: unique, sort, dictsort, items, sum, min,
 * max, reverse, join, first, last, list, batch. Like jinja2's, map / select / reject / unique /
 * items / reverse give generators: truthy, with no length, printed as an object. */
#include <string.h>

#include "template/jj_internal.h"

jj__val jj__gen(jj__val l) {
    l.flags = JF_GEN;
    return l;
}

static jj__val sort_key(jj__rt *r, jj__val v, jj__val *attr, bool case_sensitive) {
    if (attr) v = jj__attr_path(r, v, *attr);
    if (!case_sensitive && v.t == JV_STR) v = jj__case(r, v, 'l');
    return v;
}

/* a stable merge sort of v[0..n) by keys k (Python's sorted is stable too) */
static void merge_sort(jj__rt *r, jj__val *v, jj__val *k, size_t n, bool reverse) {
    if (n < 2) return;
    jj__val *tv = jj__alloc(r->e, n * sizeof *tv), *tk = jj__alloc(r->e, n * sizeof *tk);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid || j < hi) {
                bool take_right = false;
                if (i < mid && j < hi) {
                    jj__step(r);
                    int c = jj__cmp(r, k[j], k[i]);
                    take_right = reverse ? c > 0 : c < 0;
                } else {
                    take_right = i >= mid;
                }
                size_t s = take_right ? j++ : i++;
                tv[o] = v[s];
                tk[o++] = k[s];
            }
        }
        memcpy(v, tv, n * sizeof *v);
        memcpy(k, tk, n * sizeof *k);
    }
}

static jj__val f_sort(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                      int nkw) {
    jj__val *rev = jj__arg(a, n, kwn, kwv, nkw, 0, "reverse");
    jj__val *cs = jj__arg(a, n, kwn, kwv, nkw, 1, "case_sensitive");
    jj__val *attr = jj__arg(a, n, kwn, kwv, nkw, 2, "attribute");
    jj__list l = jj__iter(r, in);
    jj__val out = jj__list_new(r, l.n);
    jj__val *keys = jj__alloc(r->e, (l.n + 1) * sizeof *keys);
    for (size_t i = 0; i < l.n; i++) {
        jj__list_push(r, out.u.l, l.v[i]);
        keys[i] = sort_key(r, l.v[i], attr, cs && jj__truthy(*cs));
    }
    merge_sort(r, out.u.l->v, keys, l.n, rev && jj__truthy(*rev));
    return out;
}

static jj__val f_dictsort(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                          int nkw) {
    if (in.t != JV_DICT) jj__rfail(r, "dictsort needs a mapping");
    jj__val *cs = jj__arg(a, n, kwn, kwv, nkw, 0, "case_sensitive");
    jj__val *by = jj__arg(a, n, kwn, kwv, nkw, 1, "by");
    jj__val *rev = jj__arg(a, n, kwn, kwv, nkw, 2, "reverse");
    bool by_value = by && by->t == JV_STR && by->u.s.n == 5 && !memcmp(by->u.s.p, "value", 5);
    size_t cnt = in.u.d->n;
    jj__val out = jj__list_new(r, cnt);
    jj__val *keys = jj__alloc(r->e, (cnt + 1) * sizeof *keys);
    for (size_t i = 0; i < cnt; i++) {
        jj__val t = jj__list_new(r, 2);
        t.flags = JF_TUPLE;
        jj__list_push(r, t.u.l, in.u.d->k[i]);
        jj__list_push(r, t.u.l, in.u.d->v[i]);
        jj__list_push(r, out.u.l, t);
        keys[i] = sort_key(r, by_value ? in.u.d->v[i] : in.u.d->k[i], NULL, cs && jj__truthy(*cs));
    }
    merge_sort(r, out.u.l->v, keys, cnt, rev && jj__truthy(*rev));
    return out;
}

static jj__val f_unique(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                        int nkw) {
    jj__val *cs = jj__arg(a, n, kwn, kwv, nkw, 0, "case_sensitive");
    jj__val *attr = jj__arg(a, n, kwn, kwv, nkw, 1, "attribute");
    jj__list l = jj__iter(r, in);
    jj__val out = jj__list_new(r, 0), seen = jj__list_new(r, 0);
    for (size_t i = 0; i < l.n; i++) {
        jj__val k = sort_key(r, l.v[i], attr, cs && jj__truthy(*cs));
        if (k.t == JV_LIST || k.t == JV_DICT) /* Python keeps them in a set */
            jj__rfail(r, "unhashable type: '%s'", jj__type_name(k));
        bool dup = false;
        for (size_t j = 0; j < seen.u.l->n && !dup; j++) {
            jj__step(r);
            dup = jj__eq(seen.u.l->v[j], k);
        }
        if (dup) continue;
        jj__list_push(r, seen.u.l, k);
        jj__list_push(r, out.u.l, l.v[i]);
    }
    return jj__gen(out);
}

/* min (want < 0) and max (want > 0); empty: undefined */
static jj__val f_minmax(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                        int nkw, int want) {
    jj__val *cs = jj__arg(a, n, kwn, kwv, nkw, 0, "case_sensitive");
    jj__val *attr = jj__arg(a, n, kwn, kwv, nkw, 1, "attribute");
    jj__list l = jj__iter(r, in);
    if (!l.n) return jj__undef("no items in the sequence");
    size_t best = 0;
    jj__val bk = sort_key(r, l.v[0], attr, cs && jj__truthy(*cs));
    for (size_t i = 1; i < l.n; i++) {
        jj__val k = sort_key(r, l.v[i], attr, cs && jj__truthy(*cs));
        int c = jj__cmp(r, k, bk);
        if ((want < 0 && c < 0) || (want > 0 && c > 0)) best = i, bk = k;
    }
    return l.v[best];
}

static jj__val f_sum(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                     int nkw) {
    jj__val *attr = jj__arg(a, n, kwn, kwv, nkw, 0, "attribute");
    jj__val *start = jj__arg(a, n, kwn, kwv, nkw, 1, "start");
    jj__val acc = start ? *start : jj__int(0);
    jj__list l = jj__iter(r, in);
    for (size_t i = 0; i < l.n; i++)
        acc = jj__arith(r, JO_ADD, acc, attr ? jj__attr_path(r, l.v[i], *attr) : l.v[i]);
    return acc;
}

static jj__val f_join(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                      int nkw) {
    jj__val *sep = jj__arg(a, n, kwn, kwv, nkw, 0, "d");
    jj__val *attr = jj__arg(a, n, kwn, kwv, nkw, 1, "attribute");
    jj__val s = sep ? jj__to_str(r, *sep) : jj__str("", 0);
    jj__list l = jj__iter(r, in);
    jj__buf b = {0};
    jj__buf_put(r->e, &b, "", 0);
    for (size_t i = 0; i < l.n; i++) {
        if (i) jj__buf_put(r->e, &b, s.u.s.p, s.u.s.n);
        jj__str_of(r, &b, attr ? jj__attr_path(r, l.v[i], *attr) : l.v[i]);
    }
    return jj__str(b.p, b.n);
}

static jj__val f_items(jj__rt *r, jj__val in) {
    if (in.t == JV_UNDEF) return jj__gen(jj__list_new(r, 0));
    if (in.t != JV_DICT || (in.flags & (JF_NS | JF_LOOP)))
        jj__rfail(r, "can only get item pairs from a mapping");
    jj__val out = jj__list_new(r, in.u.d->n);
    for (size_t i = 0; i < in.u.d->n; i++) {
        jj__val t = jj__list_new(r, 2);
        t.flags = JF_TUPLE;
        jj__list_push(r, t.u.l, in.u.d->k[i]);
        jj__list_push(r, t.u.l, in.u.d->v[i]);
        jj__list_push(r, out.u.l, t);
    }
    return jj__gen(out);
}

static jj__val f_reverse(jj__rt *r, jj__val in) {
    if (in.t == JV_STR) {
        jj__list l = jj__iter(r, in);
        jj__buf b = {0};
        jj__buf_put(r->e, &b, "", 0);
        for (size_t i = l.n; i-- > 0;) jj__buf_put(r->e, &b, l.v[i].u.s.p, l.v[i].u.s.n);
        return jj__str(b.p, b.n);
    }
    jj__list l = jj__iter(r, in);
    jj__val out = jj__list_new(r, l.n);
    for (size_t i = l.n; i-- > 0;) jj__list_push(r, out.u.l, l.v[i]);
    if (in.t == JV_LIST && !(in.flags & JF_GEN)) return jj__gen(out);
    return out;
}

static jj__val f_first_last(jj__rt *r, jj__val in, bool last) {
    if (!last && in.t == JV_LIST && (in.flags & JF_GEN)) { /* next(): one item consumed */
        if (in.u.l->next >= in.u.l->n) return jj__undef("No first item, sequence was empty.");
        return in.u.l->v[in.u.l->next++];
    }
    if (last && (in.t == JV_UNDEF || (in.t == JV_LIST && (in.flags & JF_GEN))))
        jj__rfail(r, "'%s' object is not reversible", jj__type_name(in));
    jj__list l = jj__iter(r, in);
    if (!l.n)
        return jj__undef(last ? "No last item, sequence was empty."
                              : "No first item, sequence was empty.");
    return l.v[last ? l.n - 1 : 0];
}

static jj__val f_list(jj__rt *r, jj__val in) {
    jj__list l = jj__iter(r, in);
    jj__val out = jj__list_new(r, l.n);
    for (size_t i = 0; i < l.n; i++) jj__list_push(r, out.u.l, l.v[i]);
    return out;
}

/* batch(n, fill_with=None): lists of n items, the last filled up when fill_with is given */
static jj__val f_batch(jj__rt *r, jj__val in, jj__val *a, int n, const char **kwn, jj__val *kwv,
                       int nkw) {
    jj__val *cnt = jj__arg(a, n, kwn, kwv, nkw, 0, "linecount");
    jj__val *fill = jj__arg(a, n, kwn, kwv, nkw, 1, "fill_with");
    if (!cnt || cnt->t != JV_INT || cnt->u.i < 1) jj__rfail(r, "batch needs a count of at least 1");
    jj__list l = jj__iter(r, in);
    jj__val out = jj__list_new(r, 0), cur = jj__list_new(r, 0);
    for (size_t i = 0; i < l.n; i++) {
        if ((int64_t)cur.u.l->n == cnt->u.i) {
            jj__list_push(r, out.u.l, cur);
            cur = jj__list_new(r, 0);
        }
        jj__list_push(r, cur.u.l, l.v[i]);
    }
    if (cur.u.l->n) {
        if (fill && fill->t != JV_NONE)
            while ((int64_t)cur.u.l->n < cnt->u.i) jj__list_push(r, cur.u.l, *fill);
        jj__list_push(r, out.u.l, cur);
    }
    return jj__gen(out);
}

jj__val jj__seq_filter(jj__rt *r, const char *name, jj__val in, jj__val *a, int n, const char **kwn,
                       jj__val *kwv, int nkw, bool *done) {
    *done = true;
    if (!strcmp(name, "unique")) return f_unique(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "sort")) return f_sort(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "dictsort")) return f_dictsort(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "items")) return f_items(r, in);
    if (!strcmp(name, "sum")) return f_sum(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "min")) return f_minmax(r, in, a, n, kwn, kwv, nkw, -1);
    if (!strcmp(name, "max")) return f_minmax(r, in, a, n, kwn, kwv, nkw, 1);
    if (!strcmp(name, "reverse")) return f_reverse(r, in);
    if (!strcmp(name, "join")) return f_join(r, in, a, n, kwn, kwv, nkw);
    if (!strcmp(name, "first")) return f_first_last(r, in, false);
    if (!strcmp(name, "last")) return f_first_last(r, in, true);
    if (!strcmp(name, "list")) return f_list(r, in);
    if (!strcmp(name, "batch")) return f_batch(r, in, a, n, kwn, kwv, nkw);
    *done = false;
    return in;
}
