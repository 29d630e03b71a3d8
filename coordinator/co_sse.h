/* coordinator/co_sse.h — Server-Sent Events framing for streamed responses: one "data:" event
 * per JSON chunk and the "[DONE]" sentinel OpenAI clients wait for. */
#ifndef CO_SSE_H
#define CO_SSE_H

#include "coordinator/co_buf.h"

#define CO_SSE_CONTENT_TYPE "text/event-stream"
#define CO_SSE_HEADERS      "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"

/* Appends "data: <payload>\n\n". The payload is one line (compact JSON has no newline). */
void co_sse_event(co_buf *out, const char *payload, size_t len);
void co_sse_done(co_buf *out);

#endif
