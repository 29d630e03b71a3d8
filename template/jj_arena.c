/* template/jj_arena.c — the arena every parse and render allocates from (bounded: a template or a
 * render that builds too much fails instead of exhausting memory), its byte buffers, and the
 * failure exit that unwinds to the entry point. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj_internal.h"

#define CHUNK 65536

struct jj__chunk {
    jj__chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char mem[];
};

void *jj__alloc(jj__env *e, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n > e->limit || e->used > e->limit - n)
        jj__fail(e, 0, 0, "the template used more than %zu bytes of memory", e->limit);
    jj__chunk *c = e->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK ? n : CHUNK;
        c = malloc(sizeof *c + cap);
        if (!c) jj__fail(e, 0, 0, "out of memory");
        c->cap = cap;
        c->used = 0;
        /* a big block gets a chunk of its own behind the current one, so the rest stays usable */
        if (e->chunks && cap == n) {
            c->next = e->chunks->next;
            e->chunks->next = c;
        } else {
            c->next = e->chunks;
            e->chunks = c;
        }
    }
    void *p = c->mem + c->used;
    c->used += n;
    e->used += n;
    memset(p, 0, n);
    return p;
}

char *jj__strdup(jj__env *e, const char *s, size_t n) {
    char *p = jj__alloc(e, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void jj__arena_free(jj__env *e) {
    while (e->chunks) {
        jj__chunk *c = e->chunks;
        e->chunks = c->next;
        free(c);
    }
    e->used = 0;
}

_Noreturn void jj__fail(jj__env *e, int line, int col, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0)
        mw_errf(e->err, "line %d column %d: %s", line, col, msg);
    else
        mw_errf(e->err, "%s", msg);
    longjmp(e->jmp, 1);
}

void jj__buf_put(jj__env *e, jj__buf *b, const char *s, size_t n) {
    if (!n) return;
    if (b->max && (n > b->max || b->n > b->max - n))
        jj__fail(e, 0, 0, "the template's output is longer than %zu bytes", b->max);
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n + 1) {
            if (cap > ((size_t)-1) / 4) jj__fail(e, 0, 0, "out of memory");
            cap *= 2;
        }
        char *p = jj__alloc(e, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void jj__buf_puts(jj__env *e, jj__buf *b, const char *s) {
    jj__buf_put(e, b, s, strlen(s));
}

void jj__buf_printf(jj__env *e, jj__buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) jj__buf_put(e, b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}
