/* coordinator/co_sse.c — Server-Sent Events framing (co_sse.h). A payload with a line break would
 * end the event early, so each line of it gets its own "data:" field, as the format defines. */
#include "coordinator/co_sse.h"

#include <string.h>

void co_sse_event(co_buf *out, const char *payload, size_t len) {
    const char *p = payload, *end = payload + len;
    do {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        co_buf_puts(out, "data: ");
        co_buf_add(out, p, (size_t)(stop - p));
        co_buf_puts(out, "\n");
        p = nl ? nl + 1 : end;
    } while (p < end);
    co_buf_puts(out, "\n");
}

void co_sse_done(co_buf *out) {
    co_buf_puts(out, "data: [DONE]\n\n");
}
