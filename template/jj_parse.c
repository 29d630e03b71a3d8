/* template/jj_parse.c — the statement parser: text, {{ output }}, and the tags if / elif / else,
 * for (with a filter, else, and loop controls), set (plain, namespace attribute, block), macro,
 * call, filter, with and transformers' generation block. Anything else is an error naming it. */
#include <string.h>

#include "template/jj_internal.h"

static jj__node *subparse(jj__parser *p, const char *const *ends);

static void expect_block_end(jj__parser *p) {
    if (jj__cur(p)->type != JT_BLOCK_END)
        jj__perr(p, "expected the end of the statement block ('%%}')");
    jj__next(p);
}

/* Ends the opening tag, parses the body up to one of ends (the cursor stays on that name). */
static jj__node *statements(jj__parser *p, const char *const *ends, bool drop) {
    expect_block_end(p);
    jj__node *body = subparse(p, ends);
    if (drop) jj__next(p);
    return body;
}

static bool at_end_name(jj__parser *p, const char *const *ends) {
    for (int k = 0; ends && ends[k]; k++)
        if (jj__is_name(jj__cur(p), ends[k])) return true;
    return false;
}

static jj__node *assign_target(jj__parser *p, bool with_ns) {
    const jj__tok *t = jj__cur(p);
    if (with_ns && t->type == JT_NAME && p->i + 2 < p->n && jj__is_op(&p->t[p->i + 1], ".") &&
        p->t[p->i + 2].type == JT_NAME) {
        jj__node *n = jj__node_new(p, JN_GETATTR, t);
        n->a = jj__node_new(p, JN_NAME, t);
        n->a->s = jj__strdup(p->e, t->p, t->n);
        jj__next(p);
        jj__next(p);
        const jj__tok *a = jj__next(p);
        n->s = jj__strdup(p->e, a->p, a->n);
        n->sn = a->n;
        return n;
    }
    jj__node *n = jj__parse_tuple(p, true, false);
    if (!n) jj__perr(p, "expected an assignment target");
    if (n->kind == JN_TUPLE) {
        for (int k = 0; k < n->n_kids; k++)
            if (n->kids[k]->kind != JN_NAME) jj__perr(p, "can't assign to this target");
    } else if (n->kind != JN_NAME) {
        jj__perr(p, "can't assign to this target");
    }
    return n;
}

static jj__node *parse_for(jj__parser *p, const jj__tok *at) {
    jj__node *n = jj__node_new(p, JN_FOR, at);
    n->a = assign_target(p, false);
    if (!jj__is_name(jj__cur(p), "in")) jj__perr(p, "expected 'in'");
    jj__next(p);
    n->b = jj__parse_tuple(p, false, false);
    if (!n->b) jj__perr(p, "expected an expression to loop over");
    if (jj__is_name(jj__cur(p), "if")) {
        jj__next(p);
        n->e = jj__parse_expr(p, true);
    }
    if (jj__is_name(jj__cur(p), "recursive")) jj__perr(p, "recursive loops are not supported");
    static const char *const ends[] = {"endfor", "else", NULL};
    static const char *const end_for[] = {"endfor", NULL};
    p->loops++;
    n->c = statements(p, ends, false);
    p->loops--;
    if (jj__is_name(jj__next(p), "else")) n->d = statements(p, end_for, true);
    return n;
}

static jj__node *parse_if(jj__parser *p, const jj__tok *at) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const end_if[] = {"endif", NULL};
    jj__node *n = jj__node_new(p, JN_IF, at), *top = n;
    for (;;) {
        n->a = jj__parse_tuple(p, false, false);
        if (!n->a) jj__perr(p, "expected a condition");
        n->b = statements(p, ends, false);
        const jj__tok *t = jj__next(p);
        if (jj__is_name(t, "elif")) {
            n->c = jj__node_new(p, JN_IF, t);
            n = n->c;
            continue;
        }
        if (jj__is_name(t, "else")) n->c = statements(p, end_if, true);
        return top;
    }
}

static jj__node *parse_set(jj__parser *p, const jj__tok *at) {
    jj__node *target = assign_target(p, true);
    if (jj__is_op(jj__cur(p), "=")) {
        jj__next(p);
        jj__node *n = jj__node_new(p, JN_SET, at);
        n->a = target;
        n->b = jj__parse_tuple(p, false, true);
        if (!n->b) jj__perr(p, "expected an expression");
        return n;
    }
    static const char *const ends[] = {"endset", NULL};
    jj__node *n = jj__node_new(p, JN_SETBLOCK, at);
    n->a = target;
    if (jj__is_op(jj__cur(p), "|")) n->e = jj__parse_filter_chain(p, jj__node_new(p, JN_BODY, at));
    n->c = statements(p, ends, true);
    return n;
}

/* (a, b=default, ...) into n's kids (names) and vals (defaults, NULL when none) */
static void signature(jj__parser *p, jj__node *n) {
    jj__expect_op(p, "(");
    while (!jj__is_op(jj__cur(p), ")")) {
        if (n->n_kids) jj__expect_op(p, ",");
        const jj__tok *t = jj__expect_name(p, "a parameter name");
        jj__node *name = jj__node_new(p, JN_NAME, t);
        name->s = jj__strdup(p->e, t->p, t->n);
        jj__node *def = NULL;
        if (jj__is_op(jj__cur(p), "=")) {
            jj__next(p);
            def = jj__parse_expr(p, true);
        } else if (n->n_vals && n->vals[n->n_vals - 1]) {
            jj__perr(p, "a parameter without a default follows one with a default");
        }
        jj__push_kid(p, &n->kids, &n->n_kids, name);
        jj__push_kw(p, n, name->s, def);
    }
    jj__next(p);
}

static jj__node *parse_macro(jj__parser *p, const jj__tok *at) {
    static const char *const ends[] = {"endmacro", NULL};
    jj__node *n = jj__node_new(p, JN_MACRO, at);
    const jj__tok *t = jj__expect_name(p, "the macro's name");
    n->s = jj__strdup(p->e, t->p, t->n);
    signature(p, n);
    int loops = p->loops;
    p->loops = 0;
    n->c = statements(p, ends, true);
    p->loops = loops;
    return n;
}

static jj__node *parse_call(jj__parser *p, const jj__tok *at) {
    static const char *const ends[] = {"endcall", NULL};
    jj__node *n = jj__node_new(p, JN_CALLBLOCK, at);
    if (jj__is_op(jj__cur(p), "(")) signature(p, n);
    n->a = jj__parse_expr(p, true);
    if (n->a->kind != JN_CALL) jj__perr(p, "expected a call");
    int loops = p->loops;
    p->loops = 0;
    n->c = statements(p, ends, true);
    p->loops = loops;
    return n;
}

static jj__node *parse_with(jj__parser *p, const jj__tok *at) {
    static const char *const ends[] = {"endwith", NULL};
    jj__node *n = jj__node_new(p, JN_WITH, at);
    while (jj__cur(p)->type != JT_BLOCK_END) {
        if (n->n_kids) jj__expect_op(p, ",");
        jj__node *target = assign_target(p, false);
        jj__expect_op(p, "=");
        jj__push_kid(p, &n->kids, &n->n_kids, target);
        jj__push_kw(p, n, NULL, jj__parse_expr(p, true));
    }
    n->c = statements(p, ends, true);
    return n;
}

static jj__node *parse_statement(jj__parser *p) {
    const jj__tok *t = jj__cur(p);
    if (t->type != JT_NAME) jj__perr(p, "expected a tag name");
    jj__next(p);
    jj__node *n;
    if (jj__is_name(t, "if")) {
        n = parse_if(p, t);
    } else if (jj__is_name(t, "for")) {
        n = parse_for(p, t);
    } else if (jj__is_name(t, "set")) {
        n = parse_set(p, t);
    } else if (jj__is_name(t, "macro")) {
        n = parse_macro(p, t);
    } else if (jj__is_name(t, "call")) {
        n = parse_call(p, t);
    } else if (jj__is_name(t, "filter")) {
        static const char *const ends[] = {"endfilter", NULL};
        n = jj__node_new(p, JN_FILTERBLOCK, t);
        n->e = jj__parse_filter_chain(p, NULL);
        n->c = statements(p, ends, true);
    } else if (jj__is_name(t, "with")) {
        n = parse_with(p, t);
    } else if (jj__is_name(t, "generation")) {
        static const char *const ends[] = {"endgeneration", NULL};
        n = statements(p, ends, true);
    } else if (jj__is_name(t, "break") || jj__is_name(t, "continue")) {
        if (!p->loops) {
            p->i--;
            jj__perr(p, "'%.*s' outside of a loop", (int)t->n, t->p);
        }
        n = jj__node_new(p, jj__is_name(t, "break") ? JN_BREAK : JN_CONTINUE, t);
    } else {
        p->i--;
        jj__perr(p, "unknown or unsupported tag '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p);
    }
    expect_block_end(p);
    return n;
}

static jj__node *subparse(jj__parser *p, const char *const *ends) {
    jj__enter(p);
    jj__node *body = jj__node_new(p, JN_BODY, jj__cur(p));
    for (;;) {
        const jj__tok *t = jj__cur(p);
        if (t->type == JT_EOF) {
            if (ends) jj__perr(p, "unexpected end of template: missing '%s'", ends[0]);
            break;
        }
        if (t->type == JT_DATA) {
            jj__node *n = jj__node_new(p, JN_TEXT, jj__next(p));
            n->s = t->p;
            n->sn = t->n;
            jj__push_kid(p, &body->kids, &body->n_kids, n);
        } else if (t->type == JT_VAR_BEGIN) {
            jj__node *n = jj__node_new(p, JN_OUTPUT, jj__next(p));
            n->a = jj__parse_tuple(p, false, true);
            if (!n->a) jj__perr(p, "expected an expression");
            if (jj__cur(p)->type != JT_VAR_END) jj__perr(p, "expected the end of the print ('}}')");
            jj__next(p);
            jj__push_kid(p, &body->kids, &body->n_kids, n);
        } else if (t->type == JT_BLOCK_BEGIN) {
            jj__next(p);
            if (at_end_name(p, ends)) break;
            const jj__tok *name = jj__cur(p);
            if (name->type == JT_NAME && name->n > 3 && !memcmp(name->p, "end", 3))
                jj__perr(p, "unexpected '%.*s'", (int)(name->n > 40 ? 40 : name->n), name->p);
            if (jj__is_name(name, "else") || jj__is_name(name, "elif"))
                jj__perr(p, "unexpected '%.*s'", (int)name->n, name->p);
            jj__push_kid(p, &body->kids, &body->n_kids, parse_statement(p));
        } else {
            jj__perr(p, "unexpected token");
        }
    }
    p->depth--;
    return body;
}

jj__node *jj__parse_tokens(jj__env *e, jj__tok *toks, size_t n) {
    jj__parser p = {.e = e, .t = toks, .n = n};
    return subparse(&p, NULL);
}
