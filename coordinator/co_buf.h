/* coordinator/co_buf.h — a growing byte buffer (responses, SSE frames, streamed text, the metrics
 * page). Appending never truncates: on allocation failure the buffer is marked failed and
 * further appends are ignored, so a writer checks once at the end. */
#ifndef CO_BUF_H
#define CO_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct co_buf {
    char *p; /* NUL-terminated when non-NULL */
    size_t len, cap;
    bool failed;
} co_buf;

void co_buf_add(co_buf *b, const void *data, size_t len);
void co_buf_puts(co_buf *b, const char *s);
void co_buf_printf(co_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void co_buf_clear(co_buf *b); /* len = 0, memory kept */
void co_buf_free(co_buf *b);

#endif
