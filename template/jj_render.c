/* template/jj_render.c — the entry points: parse into an arena the template owns, render with a
 * fresh arena per call (so one template serves many threads) under the caller's limits. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj_internal.h"

struct jj_template {
    jj__env env;
    jj__node *root;
};

jj_limits jj_default_limits(void) {
    return (jj_limits){
        .max_output = 16u << 20, .max_memory = 256u << 20, .max_steps = 50000000, .max_depth = 64};
}

int jj_parse(const char *src, size_t len, jj_template **out, mw_err *err) {
    *out = NULL;
    jj_template *t = calloc(1, sizeof *t);
    if (!t) return mw_errf(err, "out of memory");
    t->env.err = err;
    t->env.limit = 64u << 20;
    if (len > (8u << 20)) {
        free(t);
        return mw_errf(err, "the template is longer than 8 MiB");
    }
    if (setjmp(t->env.jmp)) {
        jj__arena_free(&t->env);
        free(t);
        return -1;
    }
    size_t n;
    jj__tok *toks = jj__lex(&t->env, src ? src : "", len, &n);
    t->root = jj__parse_tokens(&t->env, toks, n);
    t->env.err = NULL;
    *out = t;
    return 0;
}

void jj_free(jj_template *t) {
    if (!t) return;
    jj__arena_free(&t->env);
    free(t);
}

static void render(jj__rt *r, const jj_template *t, const json_t *ctx, jj__buf *out) {
    r->globals = jj__alloc(r->e, sizeof *r->globals);
    jj__add_globals(r, r->globals);
    jj__scope *top = jj__alloc(r->e, sizeof *top);
    top->up = r->globals;
    if (ctx && json_is_object(ctx)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)ctx, k, v) {
            jj__scope_set(r, top, jj__strdup(r->e, k, strlen(k)), jj__from_json(r, v, 0));
        }
    }
    r->out = out;
    r->cur = top;
    jj__exec(r, top, t->root);
}

int jj_render(const jj_template *t, const json_t *ctx, const jj_limits *lim, char **out,
              size_t *out_len, mw_err *err) {
    *out = NULL;
    if (out_len) *out_len = 0;
    jj_limits L = lim ? *lim : jj_default_limits();
    /* on the heap: what the render changes must survive the longjmp of a failure */
    jj__env *env = calloc(1, sizeof *env);
    jj__rt *r = calloc(1, sizeof *r);
    jj__buf *b = calloc(1, sizeof *b);
    volatile int rc = -1;
    if (!env || !r || !b) {
        mw_errf(err, "out of memory");
        goto done;
    }
    *env = (jj__env){.err = err, .limit = L.max_memory};
    *r = (jj__rt){
        .e = env, .max_output = L.max_output, .max_steps = L.max_steps, .max_depth = L.max_depth};
    b->max = L.max_output;
    if (setjmp(env->jmp)) goto done;
    render(r, t, ctx, b);
    char *s = malloc(b->n + 1);
    if (!s) {
        mw_errf(err, "out of memory");
        goto done;
    }
    if (b->n) memcpy(s, b->p, b->n);
    s[b->n] = '\0';
    *out = s;
    if (out_len) *out_len = b->n;
    rc = 0;
done:
    if (env) jj__arena_free(env);
    free(env);
    free(r);
    free(b);
    return rc;
}
