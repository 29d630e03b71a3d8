/* coordinator/co_toolcall_body.h — a tool call read whole once it closes: its name, id and
 * arguments out of the text between its markers, per format. Not for other modules. */
#ifndef CO_TOOLCALL_BODY_H
#define CO_TOOLCALL_BODY_H

#include "coordinator/co_toolcall_formats.h"

#include <stddef.h>

/* The call's name and arguments out of its body, per format; -1 when it is not a call. */
int co__tc_read_body(const co__tc_format *f, const char *s, size_t n, char **name, char **args,
                     char **id);

#endif
