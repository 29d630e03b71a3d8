/* coordinator/co_toolcall_head.h — a tool call's head (its name, Kimi's id, where its arguments
 * start) read as it arrives, per format, so the call can be announced before it closes. Not for
 * other modules. */
#ifndef CO_TOOLCALL_HEAD_H
#define CO_TOOLCALL_HEAD_H

#include "coordinator/co_toolcall_formats.h"

#include <stddef.h>

/* The head of a call: 1 read (the name, Kimi's id, the arguments' '{' at *args; K3's argument
 * sections, or none, at *args with *sections set), 0 not yet, -1 not in the shape read as it
 * arrives (the call is then read whole when it closes). */
int co__tc_read_head(const co__tc_format *f, const char *s, size_t n, const char **nm, size_t *nl,
                     const char **id, size_t *il, size_t *args, bool *sections);

#endif
