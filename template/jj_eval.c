/* template/jj_eval.c — expressions: names, literals, attribute and item access, slicing, calls,
 * filters and tests, comparisons, boolean operators returning their operands, conditionals and ~.
 */
#include <string.h>

#include "template/jj_internal.h"

/* Python's slice.indices() */
static int64_t slice_bound(jj__rt *r, jj__val v, int64_t n, int64_t step, bool is_start) {
    int64_t i;
    if (v.t == JV_NONE || v.t == JV_UNDEF)
        return is_start ? (step < 0 ? n - 1 : 0) : (step < 0 ? -1 : n);
    if (!jj__int_index(v, &i)) jj__rfail(r, "slice indices must be integers or None");
    if (i < 0) {
        i += n;
        if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
        i = step < 0 ? n - 1 : n;
    }
    return i;
}

static jj__val eval_slice(jj__rt *r, const jj__node *nd) {
    /* a slice inside a tuple subscript (x[:1, 2]): no object can take that key */
    if (!nd->a) return jj__undef("a slice in a tuple is not a key");
    jj__val obj = jj__eval(r, nd->a);
    jj__val vs = nd->b ? jj__eval(r, nd->b) : jj__none();
    jj__val ve = nd->c ? jj__eval(r, nd->c) : jj__none();
    jj__val vt = nd->d ? jj__eval(r, nd->d) : jj__none();
    int64_t step = 1;
    if (vt.t != JV_NONE && !jj__int_index(vt, &step)) jj__rfail(r, "slice step must be an integer");
    if (!step) jj__rfail(r, "slice step cannot be zero");
    if (obj.t == JV_UNDEF) jj__rfail(r, "%s", obj.u.s.p ? obj.u.s.p : "a value is undefined");
    bool str = obj.t == JV_STR;
    if (!str && (obj.t != JV_LIST || (obj.flags & JF_GEN))) return jj__undef("not sliceable");
    jj__list items = jj__iter(r, obj);
    int64_t n = (int64_t)items.n;
    int64_t a = slice_bound(r, vs, n, step, true), b = slice_bound(r, ve, n, step, false);
    jj__val out = jj__list_new(r, 0);
    out.flags = obj.flags & JF_TUPLE;
    jj__buf sb = {0};
    jj__buf_put(r->e, &sb, "", 0);
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
        jj__step(r);
        if (str)
            jj__buf_put(r->e, &sb, items.v[i].u.s.p, items.v[i].u.s.n);
        else
            jj__list_push(r, out.u.l, items.v[i]);
    }
    return str ? jj__str(sb.p, sb.n) : out;
}

static jj__val eval_seq(jj__rt *r, const jj__node *n) {
    if (n->kind == JN_DICT) {
        jj__val d = jj__dict_new(r, (size_t)n->n_kids);
        for (int k = 0; k < n->n_kids; k++) {
            jj__val key = jj__eval(r, n->kids[k]);
            if (key.t == JV_LIST || key.t == JV_DICT)
                jj__rfail(r, "unhashable type: '%s'", jj__type_name(key));
            jj__dict_set(r, d.u.d, key, jj__eval(r, n->vals[k]));
        }
        return d;
    }
    jj__val l = jj__list_new(r, (size_t)n->n_kids);
    if (n->kind == JN_TUPLE) l.flags = JF_TUPLE;
    for (int k = 0; k < n->n_kids; k++) jj__list_push(r, l.u.l, jj__eval(r, n->kids[k]));
    return l;
}

typedef struct arglist {
    jj__val *v, *kwv;
    const char **kwn;
    int n, nkw;
} arglist;

static arglist eval_args(jj__rt *r, const jj__node *n) {
    arglist a = {.n = n->n_kids, .nkw = n->n_vals, .kwn = n->names};
    a.v = jj__alloc(r->e, (size_t)(n->n_kids + 1) * sizeof *a.v);
    a.kwv = jj__alloc(r->e, (size_t)(n->n_vals + 1) * sizeof *a.kwv);
    for (int k = 0; k < n->n_kids; k++) a.v[k] = jj__eval(r, n->kids[k]);
    for (int k = 0; k < n->n_vals; k++) a.kwv[k] = jj__eval(r, n->vals[k]);
    return a;
}

static bool contains(jj__rt *r, jj__val hay, jj__val x) {
    if (hay.t == JV_STR) {
        if (x.t != JV_STR)
            jj__rfail(r, "'in <string>' requires string as left operand, not %s", jj__type_name(x));
        if (!x.u.s.n) return true;
        if (x.u.s.n > hay.u.s.n) return false;
        return memmem(hay.u.s.p, hay.u.s.n, x.u.s.p, x.u.s.n) != NULL;
    }
    if (hay.t == JV_DICT && !(hay.flags & (JF_NS | JF_LOOP))) {
        if (x.t == JV_LIST || x.t == JV_DICT)
            jj__rfail(r, "unhashable type: '%s'", jj__type_name(x));
        return jj__dict_get(hay.u.d, x);
    }
    if (hay.t == JV_LIST || hay.t == JV_UNDEF) {
        jj__list l = jj__iter(r, hay);
        for (size_t i = 0; i < l.n; i++)
            if (jj__eq(l.v[i], x)) return true;
        return false;
    }
    jj__rfail(r, "argument of type '%s' is not iterable", jj__type_name(hay));
}

static jj__val eval_compare(jj__rt *r, const jj__node *n) {
    jj__val left = jj__eval(r, n->a);
    for (int k = 0; k < n->n_kids; k++) {
        const jj__node *w = n->kids[k];
        jj__val right = jj__eval(r, w->a);
        r->at = w;
        bool ok;
        switch (w->op) {
        case JO_EQ:
            ok = jj__eq(left, right);
            break;
        case JO_NE:
            ok = !jj__eq(left, right);
            break;
        case JO_IN:
            ok = contains(r, right, left);
            break;
        case JO_NOTIN:
            ok = !contains(r, right, left);
            break;
        default: {
            int c = jj__cmp(r, left, right);
            ok = w->op == JO_LT ? c < 0 : w->op == JO_LE ? c <= 0 : w->op == JO_GT ? c > 0 : c >= 0;
        }
        }
        if (!ok) return jj__bool(false);
        left = right;
    }
    return jj__bool(true);
}

static jj__val apply_chain(jj__rt *r, const jj__node *f, jj__val in);

static jj__val eval_filter(jj__rt *r, const jj__node *n) {
    jj__val in = n->a ? jj__eval(r, n->a) : jj__undef(NULL);
    arglist a = eval_args(r, n);
    r->at = n;
    return jj__apply_filter(r, n->s, in, a.v, a.n, a.kwn, a.kwv, a.nkw);
}

/* A filter chain whose innermost input is the given value (filter blocks, set blocks). */
static jj__val apply_chain(jj__rt *r, const jj__node *f, jj__val in) {
    if (!f || f->kind != JN_FILTER) return in;
    jj__nest_in(r);
    jj__val v = apply_chain(r, f->a, in);
    r->nest--;
    arglist a = eval_args(r, f);
    r->at = f;
    return jj__apply_filter(r, f->s, v, a.v, a.n, a.kwn, a.kwv, a.nkw);
}

jj__val jj__filter_value(jj__rt *r, const jj__node *chain, jj__val in) {
    return apply_chain(r, chain, in);
}

/* A builtin, a bound method or a macro: each carries its own code. */
jj__val jj__call(jj__rt *r, jj__val fn, jj__val *args, int n, const char **kwn, jj__val *kwv,
                 int nkw) {
    if (fn.t == JV_UNDEF) jj__rfail(r, "%s", fn.u.s.p ? fn.u.s.p : "a value is undefined");
    if (fn.t != JV_FN) jj__rfail(r, "'%s' object is not callable", jj__type_name(fn));
    return fn.u.fn->fn(r, fn.u.fn->self, args, n, kwn, kwv, nkw);
}

static jj__val eval_call(jj__rt *r, const jj__node *n) {
    jj__val fn = jj__eval(r, n->a);
    arglist a = eval_args(r, n);
    r->at = n;
    return jj__call(r, fn, a.v, a.n, a.kwn, a.kwv, a.nkw);
}

static jj__val eval_test(jj__rt *r, const jj__node *n) {
    jj__val in = jj__eval(r, n->a);
    arglist a = eval_args(r, n);
    r->at = n;
    bool ok = jj__apply_test(r, n->s, in, a.v, a.n);
    return jj__bool(n->op ? !ok : ok);
}

static jj__val eval_name(jj__rt *r, const jj__node *n) {
    jj__val v = jj__scope_get(r, r->cur, n->s);
    if (v.t == JV_UNDEF && !v.u.s.p) {
        jj__buf h = {0};
        jj__buf_printf(r->e, &h, "'%s' is undefined", n->s);
        return jj__undef(h.p);
    }
    return v;
}

static jj__val eval_node(jj__rt *r, const jj__node *n);

jj__val jj__eval(jj__rt *r, const jj__node *n) {
    jj__step(r);
    jj__nest_in(r);
    jj__val v = eval_node(r, n);
    r->nest--;
    return v;
}

static jj__val eval_node(jj__rt *r, const jj__node *n) {
    r->at = n;
    switch (n->kind) {
    case JN_CONST:
        return n->v;
    case JN_NAME:
        return eval_name(r, n);
    case JN_TUPLE:
    case JN_LIST:
    case JN_DICT:
        return eval_seq(r, n);
    case JN_GETATTR: {
        jj__val o = jj__eval(r, n->a);
        r->at = n;
        return jj__getattr(r, o, n->s, n->sn);
    }
    case JN_GETITEM: {
        jj__val o = jj__eval(r, n->a), k = jj__eval(r, n->b);
        r->at = n;
        return jj__getitem(r, o, k);
    }
    case JN_SLICE:
        return eval_slice(r, n);
    case JN_CALL:
        return eval_call(r, n);
    case JN_FILTER:
        return eval_filter(r, n);
    case JN_TEST:
        return eval_test(r, n);
    case JN_BINOP: {
        jj__val a = jj__eval(r, n->a), b = jj__eval(r, n->b);
        r->at = n;
        return jj__arith(r, n->op, a, b);
    }
    case JN_NEG:
    case JN_POS: {
        jj__val a = jj__eval(r, n->a);
        r->at = n;
        if (a.t == JV_BOOL) a = jj__int(a.u.b);
        if (n->kind == JN_POS && (a.t == JV_INT || a.t == JV_FLOAT)) return a;
        if (a.t == JV_INT && a.u.i != INT64_MIN) return jj__int(-a.u.i);
        if (a.t == JV_FLOAT) return jj__float(-a.u.f);
        if (a.t == JV_UNDEF) jj__rfail(r, "%s", a.u.s.p ? a.u.s.p : "a value is undefined");
        jj__rfail(r, "bad operand type for unary -: '%s'", jj__type_name(a));
    }
    case JN_NOT:
        return jj__bool(!jj__truthy(jj__eval(r, n->a)));
    case JN_AND: {
        jj__val a = jj__eval(r, n->a);
        return jj__truthy(a) ? jj__eval(r, n->b) : a;
    }
    case JN_OR: {
        jj__val a = jj__eval(r, n->a);
        return jj__truthy(a) ? a : jj__eval(r, n->b);
    }
    case JN_COMPARE:
        return eval_compare(r, n);
    case JN_COND:
        if (jj__truthy(jj__eval(r, n->a))) return jj__eval(r, n->b);
        return n->c ? jj__eval(r, n->c) : jj__undef("the inline if expression evaluated to false");
    case JN_CONCAT: {
        jj__val a = jj__eval(r, n->a), b = jj__eval(r, n->b);
        jj__buf s = {0};
        jj__buf_put(r->e, &s, "", 0);
        jj__str_of(r, &s, a);
        jj__str_of(r, &s, b);
        return jj__str(s.p, s.n);
    }
    default:
        jj__rfail(r, "a statement where an expression was expected");
    }
}
