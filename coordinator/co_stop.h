/* coordinator/co_stop.h — stop strings over streamed text: text is released as soon as no stop
 * string can begin in it, so a stop string split across tokens is still found and never reaches
 * the client, and nothing before it is delayed longer than the longest stop string needs. */
#ifndef CO_STOP_H
#define CO_STOP_H

#include <stdbool.h>
#include <stddef.h>

#include "coordinator/co_buf.h"
#include "util/mw_err.h"

#define CO_STOP_MAX     16   /* stop strings per request */
#define CO_STOP_MAX_LEN 1024 /* bytes per stop string */

typedef struct co_stop {
    char *str[CO_STOP_MAX];
    size_t len[CO_STOP_MAX];
    int n;
    co_buf held; /* text that may be the start of a stop string */
} co_stop;

/* Copies the strings (none empty, at most CO_STOP_MAX of at most CO_STOP_MAX_LEN bytes). */
int co_stop_init(co_stop *st, const char *const *strs, int n, mw_err *err);
void co_stop_free(co_stop *st);
/* Appends text; what is safe to show goes to out. Returns true when a stop string is complete:
 * out then holds everything before it and the rest is dropped. */
bool co_stop_feed(co_stop *st, const char *text, size_t len, co_buf *out);
/* The stream ended without a stop string: releases what was held. */
void co_stop_flush(co_stop *st, co_buf *out);

#endif
