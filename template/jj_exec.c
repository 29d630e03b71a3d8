/* template/jj_exec.c — statements: output, if, for (loop.* and else, break / continue, a new
 * scope per iteration as jinja2 has it, so a plain set inside a loop does not leak out), set
 * (names, tuples, namespace attributes, blocks), macros and call blocks, filter and with. */
#include <string.h>

#include "template/jj_internal.h"

static jj__scope *scope_new(jj__rt *r, jj__scope *up) {
    jj__scope *s = jj__alloc(r->e, sizeof *s);
    s->up = up;
    return s;
}

static void assign(jj__rt *r, jj__scope *s, const jj__node *target, jj__val v) {
    if (target->kind == JN_NAME) {
        jj__scope_set(r, s, target->s, v);
        return;
    }
    if (target->kind == JN_GETATTR) {
        jj__val ns = jj__scope_get(r, s, target->a->s);
        if (ns.t != JV_DICT || !(ns.flags & JF_NS))
            jj__rfail(r, "can only assign attributes on a namespace, not on '%s'", target->a->s);
        jj__dict_set(r, ns.u.d, jj__str(target->s, target->sn), v);
        return;
    }
    /* a tuple of names */
    if (v.t == JV_UNDEF) jj__rfail(r, "%s", v.u.s.p ? v.u.s.p : "cannot unpack an undefined value");
    jj__list l = jj__iter(r, v);
    if (l.n != (size_t)target->n_kids)
        jj__rfail(r, "cannot unpack %zu values into %d names", l.n, target->n_kids);
    for (int k = 0; k < target->n_kids; k++) jj__scope_set(r, s, target->kids[k]->s, l.v[k]);
}

/* Runs body with output captured, returns the text. */
static jj__val capture(jj__rt *r, jj__scope *s, const jj__node *body) {
    jj__buf *saved = r->out, b = {0};
    b.max = r->max_output;
    jj__buf_put(r->e, &b, "", 0);
    r->out = &b;
    jj__exec(r, s, body);
    r->out = saved;
    return jj__str(b.p, b.n);
}

static jj__val loop_cycle(jj__rt *r, jj__val self, jj__val *args, int n, const char **kwn,
                          jj__val *kwv, int nkw) {
    if (!n) jj__rfail(r, "no items for cycling given");
    jj__val *i0 = jj__dict_gets(self.u.d, "index0");
    return args[i0->u.i % n];
}

static jj__val loop_object(jj__rt *r, const jj__list *items, size_t i, jj__val *cycle) {
    jj__val l = jj__dict_new(r, 12);
    l.flags = JF_LOOP;
    int64_t n = (int64_t)items->n, k = (int64_t)i;
    struct {
        const char *k;
        jj__val v;
    } f[] = {{"index", jj__int(k + 1)},
             {"index0", jj__int(k)},
             {"revindex", jj__int(n - k)},
             {"revindex0", jj__int(n - k - 1)},
             {"first", jj__bool(k == 0)},
             {"last", jj__bool(k == n - 1)},
             {"length", jj__int(n)},
             {"depth", jj__int(1)},
             {"depth0", jj__int(0)},
             {"previtem", i ? items->v[i - 1] : jj__undef("there is no previous item")},
             {"nextitem", k + 1 < n ? items->v[i + 1] : jj__undef("there is no next item")}};
    for (size_t j = 0; j < sizeof f / sizeof f[0]; j++)
        jj__dict_set(r, l.u.d, jj__cstr(f[j].k), f[j].v);
    *cycle = jj__fn_new(r, "cycle", loop_cycle, l);
    jj__dict_set(r, l.u.d, jj__cstr("cycle"), *cycle);
    return l;
}

static void exec_for(jj__rt *r, jj__scope *s, const jj__node *n) {
    jj__val it = jj__eval_in(r, s, n->b);
    if (it.t == JV_DICT && (it.flags & (JF_NS | JF_LOOP)))
        jj__rfail(r, "'%s' object is not iterable", jj__type_name(it));
    jj__list all = jj__iter(r, it), items = all;
    if (n->e) { /* the loop's filter sees each item, not loop.* */
        items = (jj__list){0};
        for (size_t i = 0; i < all.n; i++) {
            jj__scope *fs = scope_new(r, s);
            assign(r, fs, n->a, all.v[i]);
            if (jj__truthy(jj__eval_in(r, fs, n->e))) jj__list_push(r, &items, all.v[i]);
        }
    }
    for (size_t i = 0; i < items.n; i++) {
        jj__step(r);
        jj__scope *is = scope_new(r, s);
        jj__val cycle;
        jj__scope_set(r, is, "loop", loop_object(r, &items, i, &cycle));
        r->at = n;
        assign(r, is, n->a, items.v[i]);
        if (jj__exec(r, is, n->c) == JJ__BREAK) break;
    }
    if (!items.n && n->d) jj__exec(r, scope_new(r, s), n->d);
}

static jj__val call_macro(jj__rt *r, jj__val self, jj__val *args, int n, const char **kwn,
                          jj__val *kwv, int nkw);

/* A macro (or a call block's caller) is a function whose code is call_macro, bound to the
 * function itself, so a call needs to know nothing of statements. */
static jj__val macro_fn(jj__rt *r, const char *name, const jj__node *n, jj__scope *s) {
    jj__val f = jj__fn_new(r, name, call_macro, jj__none());
    f.u.fn->self = f;
    f.u.fn->macro = n;
    f.u.fn->closure = s;
    return f;
}

static void exec_callblock(jj__rt *r, jj__scope *s, const jj__node *n) {
    const jj__node *call = n->a;
    jj__val fn = jj__eval_in(r, s, call->a);
    int nk = call->n_kids, nkw = call->n_vals;
    jj__val *args = jj__alloc(r->e, (size_t)(nk + 1) * sizeof *args);
    jj__val *kwv = jj__alloc(r->e, (size_t)(nkw + 2) * sizeof *kwv);
    const char **kwn = jj__alloc(r->e, (size_t)(nkw + 2) * sizeof *kwn);
    for (int k = 0; k < nk; k++) args[k] = jj__eval_in(r, s, call->kids[k]);
    for (int k = 0; k < nkw; k++) {
        kwv[k] = jj__eval_in(r, s, call->vals[k]);
        kwn[k] = call->names[k];
    }
    kwn[nkw] = "caller";
    kwv[nkw] = macro_fn(r, "caller", n, s);
    r->at = n;
    jj__val out = jj__call(r, fn, args, nk, kwn, kwv, nkw + 1);
    jj__str_of(r, r->out, out);
}

static int exec_node(jj__rt *r, jj__scope *s, const jj__node *n) {
    r->at = n;
    switch (n->kind) {
    case JN_BODY:
        return jj__exec(r, s, n);
    case JN_TEXT:
        jj__buf_put(r->e, r->out, n->s, n->sn);
        return 0;
    case JN_OUTPUT: {
        jj__val v = jj__eval_in(r, s, n->a);
        jj__str_of(r, r->out, v);
        return 0;
    }
    case JN_IF:
        if (jj__truthy(jj__eval_in(r, s, n->a))) return jj__exec(r, s, n->b);
        if (!n->c) return 0;
        return n->c->kind == JN_IF ? exec_node(r, s, n->c) : jj__exec(r, s, n->c);
    case JN_FOR:
        exec_for(r, s, n);
        return 0;
    case JN_SET:
        assign(r, s, n->a, jj__eval_in(r, s, n->b));
        return 0;
    case JN_SETBLOCK: {
        jj__val v = capture(r, scope_new(r, s), n->c);
        jj__scope *saved = r->cur;
        r->cur = s;
        if (n->e) v = jj__filter_value(r, n->e, v);
        r->cur = saved;
        assign(r, s, n->a, v);
        return 0;
    }
    case JN_MACRO:
        jj__scope_set(r, s, n->s, macro_fn(r, n->s, n, s));
        return 0;
    case JN_CALLBLOCK:
        exec_callblock(r, s, n);
        return 0;
    case JN_FILTERBLOCK: {
        jj__val v = capture(r, scope_new(r, s), n->c);
        jj__scope *saved = r->cur;
        r->cur = s;
        v = jj__filter_value(r, n->e, v);
        r->cur = saved;
        jj__str_of(r, r->out, v);
        return 0;
    }
    case JN_WITH: {
        jj__scope *w = scope_new(r, s);
        for (int k = 0; k < n->n_kids; k++) assign(r, w, n->kids[k], jj__eval_in(r, s, n->vals[k]));
        return jj__exec(r, w, n->c);
    }
    case JN_BREAK:
        return JJ__BREAK;
    case JN_CONTINUE:
        return JJ__CONTINUE;
    default:
        jj__rfail(r, "an expression where a statement was expected");
    }
}

int jj__exec(jj__rt *r, jj__scope *s, const jj__node *body) {
    jj__nest_in(r);
    int rc = 0;
    if (body->kind != JN_BODY) {
        rc = exec_node(r, s, body);
    } else {
        for (int k = 0; k < body->n_kids && !rc; k++) {
            jj__step(r);
            rc = exec_node(r, s, body->kids[k]);
        }
    }
    r->nest--;
    return rc;
}

jj__val jj__eval_in(jj__rt *r, jj__scope *s, const jj__node *n) {
    jj__scope *saved = r->cur;
    r->cur = s;
    jj__val v = jj__eval(r, n);
    r->cur = saved;
    return v;
}

/* Binds a macro's parameters (positional, keyword, defaults evaluated in the macro's scope;
 * extra positional arguments in varargs, unknown keywords in kwargs) and runs its body. */
static jj__val call_macro(jj__rt *r, jj__val self, jj__val *args, int n, const char **kwn,
                          jj__val *kwv, int nkw) {
    const jj__fn *f = self.u.fn;
    const jj__node *m = f->macro;
    if (++r->depth > r->max_depth) jj__rfail(r, "macros nested deeper than %d calls", r->max_depth);
    jj__scope *s = scope_new(r, f->closure);
    jj__val varargs = jj__list_new(r, 0), kwargs = jj__dict_new(r, 0);
    varargs.flags = JF_TUPLE;
    for (int k = n; k < m->n_kids; k++) jj__scope_set(r, s, m->kids[k]->s, jj__undef(NULL));
    for (int k = 0; k < n; k++) {
        if (k < m->n_kids)
            jj__scope_set(r, s, m->kids[k]->s, args[k]);
        else
            jj__list_push(r, varargs.u.l, args[k]);
    }
    bool *given = jj__alloc(r->e, (size_t)(m->n_kids + 1));
    for (int k = 0; k < n && k < m->n_kids; k++) given[k] = true;
    for (int j = 0; j < nkw; j++) {
        int k = 0;
        while (k < m->n_kids && strcmp(m->kids[k]->s, kwn[j])) k++;
        if (k < m->n_kids) {
            jj__scope_set(r, s, kwn[j], kwv[j]);
            given[k] = true;
        } else if (!strcmp(kwn[j], "caller")) {
            jj__scope_set(r, s, "caller", kwv[j]);
        } else {
            jj__dict_set(r, kwargs.u.d, jj__cstr(kwn[j]), kwv[j]);
        }
    }
    for (int k = 0; k < m->n_kids; k++)
        if (!given[k] && m->vals[k])
            jj__scope_set(r, s, m->kids[k]->s, jj__eval_in(r, s, m->vals[k]));
    jj__scope_set(r, s, "varargs", varargs);
    jj__scope_set(r, s, "kwargs", kwargs);
    jj__val out = capture(r, s, m->c);
    r->depth--;
    return out;
}
