/* template/jj_parse_expr.c — the expression parser, with jinja2's precedence (lowest first):
 * conditional "a if b else c", or, and, not, comparisons and in / not in, + -, ~, * / // %, **,
 * unary - +, then primaries with .attr, [subscript or slice], (call), | filter and "is" test. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "template/jj_internal.h"

#define MAX_DEPTH 200

_Noreturn void jj__perr(jj__parser *p, const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const jj__tok *t = jj__cur(p);
    jj__fail(p->e, t->line, t->col, "%s", msg);
}

void jj__enter(jj__parser *p) {
    if (++p->depth > MAX_DEPTH) jj__perr(p, "the template is nested too deeply");
}

const jj__tok *jj__cur(jj__parser *p) {
    return &p->t[p->i];
}

const jj__tok *jj__next(jj__parser *p) {
    const jj__tok *t = &p->t[p->i];
    if (t->type != JT_EOF) p->i++;
    return t;
}

bool jj__is_name(const jj__tok *t, const char *name) {
    return t->type == JT_NAME && t->n == strlen(name) && !memcmp(t->p, name, t->n);
}

bool jj__is_op(const jj__tok *t, const char *op) {
    return t->type == JT_OP && t->n == strlen(op) && !memcmp(t->p, op, t->n);
}

static const char *describe(const jj__tok *t) {
    switch (t->type) {
    case JT_EOF:
        return "end of template";
    case JT_VAR_END:
        return "end of print statement";
    case JT_BLOCK_END:
        return "end of statement block";
    case JT_DATA:
        return "template data";
    default:
        return NULL;
    }
}

_Noreturn static void unexpected(jj__parser *p, const char *wanted) {
    const jj__tok *t = jj__cur(p);
    const char *d = describe(t);
    if (d) jj__perr(p, "unexpected %s, expected %s", d, wanted);
    jj__perr(p, "unexpected '%.*s', expected %s", (int)(t->n > 40 ? 40 : t->n), t->p, wanted);
}

const jj__tok *jj__expect_op(jj__parser *p, const char *op) {
    if (!jj__is_op(jj__cur(p), op)) {
        char w[16];
        snprintf(w, sizeof w, "'%s'", op);
        unexpected(p, w);
    }
    return jj__next(p);
}

const jj__tok *jj__expect_name(jj__parser *p, const char *what) {
    if (jj__cur(p)->type != JT_NAME) unexpected(p, what);
    return jj__next(p);
}

jj__node *jj__node_new(jj__parser *p, int kind, const jj__tok *at) {
    jj__node *n = jj__alloc(p->e, sizeof *n);
    n->kind = kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

void jj__push_kid(jj__parser *p, jj__node ***arr, int *count, jj__node *k) {
    if (*count >= 1 << 20) jj__perr(p, "too many items");
    if ((*count & (*count - 1)) == 0) { /* capacity doubles at powers of two */
        jj__node **a = jj__alloc(p->e, (size_t)(*count ? *count * 2 : 1) * sizeof *a);
        if (*count) memcpy(a, *arr, (size_t)*count * sizeof *a);
        *arr = a;
    }
    (*arr)[(*count)++] = k;
}

void jj__push_kw(jj__parser *p, jj__node *n, const char *name, jj__node *v) {
    int k = n->n_vals;
    jj__push_kid(p, &n->vals, &n->n_vals, v);
    if ((k & (k - 1)) == 0) {
        const char **a = jj__alloc(p->e, (size_t)(k ? k * 2 : 1) * sizeof *a);
        if (k) memcpy(a, n->names, (size_t)k * sizeof *a);
        n->names = a;
    }
    n->names[k] = name;
}

static jj__node *parse_or(jj__parser *p);
static jj__node *parse_unary(jj__parser *p, bool with_filter);
static jj__node *parse_primary(jj__parser *p);
static jj__node *parse_postfix(jj__parser *p, jj__node *n);

jj__node *jj__parse_expr(jj__parser *p, bool with_cond) {
    jj__enter(p);
    jj__node *n = parse_or(p);
    while (with_cond && jj__is_name(jj__cur(p), "if")) {
        jj__node *c = jj__node_new(p, JN_COND, jj__next(p));
        c->b = n;
        c->a = parse_or(p);
        if (jj__is_name(jj__cur(p), "else")) {
            jj__next(p);
            c->c = jj__parse_expr(p, true);
        }
        n = c;
    }
    p->depth--;
    return n;
}

static jj__node *binary(jj__parser *p, int kind, int op, jj__node *a, const jj__tok *at,
                        jj__node *b) {
    jj__node *n = jj__node_new(p, kind, at);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jj__node *parse_not(jj__parser *p);

static jj__node *parse_and(jj__parser *p) {
    jj__node *n = parse_not(p);
    while (jj__is_name(jj__cur(p), "and")) {
        const jj__tok *t = jj__next(p);
        n = binary(p, JN_AND, 0, n, t, parse_not(p));
    }
    return n;
}

static jj__node *parse_or(jj__parser *p) {
    jj__node *n = parse_and(p);
    while (jj__is_name(jj__cur(p), "or")) {
        const jj__tok *t = jj__next(p);
        n = binary(p, JN_OR, 0, n, t, parse_and(p));
    }
    return n;
}

static jj__node *parse_math1(jj__parser *p);

static int compare_op(jj__parser *p) {
    const jj__tok *t = jj__cur(p);
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    for (int k = 0; k < 6; k++)
        if (jj__is_op(t, ops[k])) return JO_EQ + k;
    if (jj__is_name(t, "in")) return JO_IN;
    if (jj__is_name(t, "not") && p->i + 1 < p->n && jj__is_name(&p->t[p->i + 1], "in"))
        return JO_NOTIN;
    return 0;
}

static jj__node *parse_compare(jj__parser *p) {
    jj__node *first = parse_math1(p);
    int op = compare_op(p);
    if (!op) return first;
    jj__node *n = jj__node_new(p, JN_COMPARE, jj__cur(p));
    n->a = first;
    while ((op = compare_op(p))) {
        jj__node *w = jj__node_new(p, JN_COMPARE, jj__next(p));
        if (op == JO_NOTIN) jj__next(p);
        w->op = op;
        w->a = parse_math1(p);
        jj__push_kid(p, &n->kids, &n->n_kids, w);
    }
    return n;
}

static jj__node *parse_not(jj__parser *p) {
    if (jj__is_name(jj__cur(p), "not")) {
        jj__enter(p);
        jj__node *n = jj__node_new(p, JN_NOT, jj__next(p));
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static jj__node *parse_pow(jj__parser *p) {
    jj__node *n = parse_unary(p, true);
    while (jj__is_op(jj__cur(p), "**")) {
        const jj__tok *t = jj__next(p);
        n = binary(p, JN_BINOP, JO_POW, n, t, parse_unary(p, true));
    }
    return n;
}

static jj__node *parse_math2(jj__parser *p) {
    jj__node *n = parse_pow(p);
    for (;;) {
        const jj__tok *t = jj__cur(p);
        int op = jj__is_op(t, "*")    ? JO_MUL
                 : jj__is_op(t, "/")  ? JO_DIV
                 : jj__is_op(t, "//") ? JO_FLOORDIV
                 : jj__is_op(t, "%")  ? JO_MOD
                                      : 0;
        if (!op) return n;
        jj__next(p);
        n = binary(p, JN_BINOP, op, n, t, parse_pow(p));
    }
}

static jj__node *parse_concat(jj__parser *p) {
    jj__node *n = parse_math2(p);
    while (jj__is_op(jj__cur(p), "~")) {
        const jj__tok *t = jj__next(p);
        n = binary(p, JN_CONCAT, 0, n, t, parse_math2(p));
    }
    return n;
}

static jj__node *parse_math1(jj__parser *p) {
    jj__node *n = parse_concat(p);
    for (;;) {
        const jj__tok *t = jj__cur(p);
        int op = jj__is_op(t, "+") ? JO_ADD : jj__is_op(t, "-") ? JO_SUB : 0;
        if (!op) return n;
        jj__next(p);
        n = binary(p, JN_BINOP, op, n, t, parse_concat(p));
    }
}

static jj__node *parse_test(jj__parser *p, jj__node *in);

/* Filters, tests and calls after a unary expression, in the order written. */
static jj__node *parse_filter_expr(jj__parser *p, jj__node *n) {
    for (;;) {
        const jj__tok *t = jj__cur(p);
        if (jj__is_op(t, "|"))
            n = jj__parse_filter_chain(p, n);
        else if (jj__is_name(t, "is"))
            n = parse_test(p, n);
        else if (jj__is_op(t, "(")) {
            jj__node *c = jj__node_new(p, JN_CALL, t);
            c->a = n;
            c->line = n->line; /* errors point at what is called */
            c->col = n->col;
            jj__parse_call_args(p, c);
            n = c;
        } else
            return n;
    }
}

static jj__node *parse_unary(jj__parser *p, bool with_filter) {
    jj__enter(p);
    const jj__tok *t = jj__cur(p);
    jj__node *n;
    if (jj__is_op(t, "-") || jj__is_op(t, "+")) {
        n = jj__node_new(p, jj__is_op(t, "-") ? JN_NEG : JN_POS, jj__next(p));
        n->a = parse_unary(p, false);
    } else {
        n = parse_postfix(p, parse_primary(p));
    }
    if (with_filter) n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static const char *dotted_name(jj__parser *p) {
    const jj__tok *t = jj__expect_name(p, "a name");
    jj__buf b = {0};
    jj__buf_put(p->e, &b, t->p, t->n);
    while (jj__is_op(jj__cur(p), ".")) {
        jj__next(p);
        t = jj__expect_name(p, "a name");
        jj__buf_put(p->e, &b, ".", 1);
        jj__buf_put(p->e, &b, t->p, t->n);
    }
    return b.p;
}

void jj__parse_call_args(jj__parser *p, jj__node *call) {
    jj__expect_op(p, "(");
    bool first = true;
    while (!jj__is_op(jj__cur(p), ")")) {
        if (!first) {
            jj__expect_op(p, ",");
            if (jj__is_op(jj__cur(p), ")")) break;
        }
        first = false;
        const jj__tok *t = jj__cur(p);
        if (jj__is_op(t, "*") || jj__is_op(t, "**"))
            jj__perr(p, "*args and **kwargs in calls are not supported");
        if (t->type == JT_NAME && p->i + 1 < p->n && jj__is_op(&p->t[p->i + 1], "=")) {
            jj__next(p);
            jj__next(p);
            jj__push_kw(p, call, jj__strdup(p->e, t->p, t->n), jj__parse_expr(p, true));
        } else {
            if (call->n_vals) jj__perr(p, "a positional argument follows a keyword argument");
            jj__push_kid(p, &call->kids, &call->n_kids, jj__parse_expr(p, true));
        }
    }
    jj__expect_op(p, ")");
}

/* "| name(args) | ..." ; input NULL: a filter block's chain, which starts without a pipe. */
jj__node *jj__parse_filter_chain(jj__parser *p, jj__node *input) {
    bool inline_start = input == NULL;
    while (inline_start || jj__is_op(jj__cur(p), "|")) {
        if (!inline_start) jj__next(p);
        inline_start = false;
        jj__node *f = jj__node_new(p, JN_FILTER, jj__cur(p));
        f->s = dotted_name(p);
        f->a = input;
        if (jj__is_op(jj__cur(p), "(")) jj__parse_call_args(p, f);
        input = f;
    }
    return input;
}

static jj__node *parse_test(jj__parser *p, jj__node *in) {
    jj__node *n = jj__node_new(p, JN_TEST, jj__next(p));
    if (jj__is_name(jj__cur(p), "not")) {
        jj__next(p);
        n->op = 1;
    }
    n->s = dotted_name(p);
    n->a = in;
    const jj__tok *t = jj__cur(p);
    if (jj__is_op(t, "(")) {
        jj__parse_call_args(p, n);
    } else if ((t->type == JT_NAME || t->type == JT_STRING || t->type == JT_INT ||
                t->type == JT_FLOAT || jj__is_op(t, "[") || jj__is_op(t, "{")) &&
               !jj__is_name(t, "else") && !jj__is_name(t, "or") && !jj__is_name(t, "and")) {
        if (jj__is_name(t, "is")) jj__perr(p, "you cannot chain multiple tests with is");
        jj__push_kid(p, &n->kids, &n->n_kids, parse_postfix(p, parse_primary(p)));
    }
    return n;
}

static jj__node *parse_subscribed(jj__parser *p) {
    const jj__tok *t = jj__cur(p);
    jj__node *parts[3] = {NULL, NULL, NULL};
    if (!jj__is_op(t, ":")) {
        parts[0] = jj__parse_expr(p, true);
        if (!jj__is_op(jj__cur(p), ":")) return parts[0];
    }
    jj__next(p);
    const jj__tok *c = jj__cur(p);
    if (!jj__is_op(c, "]") && !jj__is_op(c, ",") && !jj__is_op(c, ":"))
        parts[1] = jj__parse_expr(p, true);
    if (jj__is_op(jj__cur(p), ":")) {
        jj__next(p);
        c = jj__cur(p);
        if (!jj__is_op(c, "]") && !jj__is_op(c, ",")) parts[2] = jj__parse_expr(p, true);
    }
    jj__node *s = jj__node_new(p, JN_SLICE, t);
    s->b = parts[0];
    s->c = parts[1];
    s->d = parts[2];
    return s;
}

static jj__node *parse_postfix(jj__parser *p, jj__node *n) {
    for (;;) {
        const jj__tok *t = jj__cur(p);
        if (jj__is_op(t, ".")) {
            jj__next(p);
            const jj__tok *a = jj__next(p);
            jj__node *g;
            if (a->type == JT_NAME) {
                g = jj__node_new(p, JN_GETATTR, a);
                g->s = jj__strdup(p->e, a->p, a->n);
                g->sn = a->n;
            } else if (a->type == JT_INT) {
                g = jj__node_new(p, JN_GETITEM, a);
                g->b = jj__node_new(p, JN_CONST, a);
                g->b->v = jj__int(a->i);
            } else {
                p->i--;
                jj__perr(p, "expected a name or a number after '.'");
            }
            g->a = n;
            n = g;
        } else if (jj__is_op(t, "[")) {
            jj__next(p);
            jj__node *g = jj__node_new(p, JN_GETITEM, t);
            jj__node *tuple = NULL, *first = NULL;
            int count = 0;
            while (!jj__is_op(jj__cur(p), "]")) {
                if (count) jj__expect_op(p, ",");
                jj__node *k = parse_subscribed(p);
                if (!count) first = k;
                if (count == 1) {
                    tuple = jj__node_new(p, JN_TUPLE, t);
                    jj__push_kid(p, &tuple->kids, &tuple->n_kids, first);
                }
                if (count >= 1) jj__push_kid(p, &tuple->kids, &tuple->n_kids, k);
                count++;
            }
            jj__expect_op(p, "]");
            if (!count) jj__perr(p, "expected a subscript");
            g->a = n;
            if (first->kind == JN_SLICE && count == 1) {
                first->a = n;
                n = first;
            } else {
                g->b = count == 1 ? first : tuple;
                n = g;
            }
        } else if (jj__is_op(t, "(")) {
            jj__node *c = jj__node_new(p, JN_CALL, t);
            c->a = n;
            c->line = n->line; /* errors point at what is called */
            c->col = n->col;
            jj__parse_call_args(p, c);
            n = c;
        } else {
            return n;
        }
    }
}

static jj__node *parse_seq(jj__parser *p, int kind, const char *close) {
    jj__node *n = jj__node_new(p, kind, jj__next(p));
    bool first = true;
    while (!jj__is_op(jj__cur(p), close)) {
        if (!first) {
            jj__expect_op(p, ",");
            if (jj__is_op(jj__cur(p), close)) break;
        }
        first = false;
        jj__node *k = jj__parse_expr(p, true);
        if (kind == JN_DICT) {
            jj__expect_op(p, ":");
            jj__push_kw(p, n, NULL, jj__parse_expr(p, true));
        }
        jj__push_kid(p, &n->kids, &n->n_kids, k);
    }
    jj__expect_op(p, close);
    return n;
}

static jj__node *const_node(jj__parser *p, const jj__tok *t, jj__val v) {
    jj__node *n = jj__node_new(p, JN_CONST, t);
    n->v = v;
    return n;
}

static jj__node *parse_primary(jj__parser *p) {
    const jj__tok *t = jj__cur(p);
    if (t->type == JT_NAME) {
        jj__next(p);
        if (jj__is_name(t, "true") || jj__is_name(t, "True")) return const_node(p, t, jj__bool(1));
        if (jj__is_name(t, "false") || jj__is_name(t, "False"))
            return const_node(p, t, jj__bool(0));
        if (jj__is_name(t, "none") || jj__is_name(t, "None")) return const_node(p, t, jj__none());
        jj__node *n = jj__node_new(p, JN_NAME, t);
        n->s = jj__strdup(p->e, t->p, t->n);
        n->sn = t->n;
        return n;
    }
    if (t->type == JT_STRING) {
        jj__buf b = {0};
        jj__buf_put(p->e, &b, "", 0);
        while (jj__cur(p)->type == JT_STRING) {
            const jj__tok *s = jj__next(p);
            jj__buf_put(p->e, &b, s->p, s->n);
        }
        return const_node(p, t, jj__str(b.p ? b.p : "", b.n));
    }
    if (t->type == JT_INT) return const_node(p, jj__next(p), jj__int(t->i));
    if (t->type == JT_FLOAT) return const_node(p, jj__next(p), jj__float(t->f));
    if (jj__is_op(t, "(")) {
        jj__next(p);
        jj__node *n = jj__parse_tuple(p, false, true);
        if (!n) n = jj__node_new(p, JN_TUPLE, t);
        jj__expect_op(p, ")");
        return n;
    }
    if (jj__is_op(t, "[")) return parse_seq(p, JN_LIST, "]");
    if (jj__is_op(t, "{")) return parse_seq(p, JN_DICT, "}");
    unexpected(p, "an expression");
}

static bool tuple_end(jj__parser *p) {
    const jj__tok *t = jj__cur(p);
    return t->type == JT_VAR_END || t->type == JT_BLOCK_END || t->type == JT_EOF ||
           jj__is_op(t, ")") || jj__is_name(t, "in") || jj__is_name(t, "recursive");
}

/* Comma-separated expressions; one without a comma is itself, none is NULL (the caller decides
 * whether that is an error). simplified: names and literals only (assignment targets). */
jj__node *jj__parse_tuple(jj__parser *p, bool simplified, bool with_cond) {
    jj__enter(p);
    jj__node *tuple = jj__node_new(p, JN_TUPLE, jj__cur(p));
    bool is_tuple = false;
    for (;;) {
        if (tuple->n_kids) jj__expect_op(p, ",");
        if (tuple_end(p)) break;
        jj__node *k = simplified ? parse_primary(p) : jj__parse_expr(p, with_cond);
        jj__push_kid(p, &tuple->kids, &tuple->n_kids, k);
        if (!jj__is_op(jj__cur(p), ",")) break;
        is_tuple = true;
    }
    p->depth--;
    if (!is_tuple) return tuple->n_kids ? tuple->kids[0] : NULL;
    return tuple;
}
