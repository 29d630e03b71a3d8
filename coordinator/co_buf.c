/* coordinator/co_buf.c — the growing byte buffer (co_buf.h). */
#include "coordinator/co_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/mw_grow.h"

static bool reserve(co_buf *b, size_t more) {
    if (b->failed) return false;
    if (more > ((size_t)-1) / 2 - b->len ||
        mw_grow((void **)&b->p, &b->cap, b->len + more + 1, 1)) {
        b->failed = true;
        return false;
    }
    return true;
}

void co_buf_add(co_buf *b, const void *data, size_t len) {
    if (!reserve(b, len)) return;
    if (len) memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = 0;
}

void co_buf_puts(co_buf *b, const char *s) {
    co_buf_add(b, s, strlen(s));
}

void co_buf_printf(co_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        co_buf_add(b, small, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void co_buf_clear(co_buf *b) {
    b->len = 0;
    if (b->p) b->p[0] = 0;
}

void co_buf_free(co_buf *b) {
    free(b->p);
    *b = (co_buf){0};
}
