/* util/mw_err.h — the error value every fallible moewire call fills in.
 *
 * Convention: a function that can fail returns int (0 = success, -1 = failure) and takes a
 * `mw_err *err` as its last argument. On failure it writes one human sentence naming the object
 * (file, extent, node, ...) and the fault. `err` may be NULL when the caller does not care. */
#ifndef MW_ERR_H
#define MW_ERR_H

#include <stddef.h>

#define MW_ERR_MAX 512

typedef struct mw_err {
    char msg[MW_ERR_MAX];
} mw_err;

/* Formats the message into err (if non-NULL) and returns -1, so `return mw_errf(err, ...)` works. */
int mw_errf(mw_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes the existing message with more context ("loading X: <old message>"); returns -1. */
int mw_err_wrap(mw_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears the message. */
void mw_err_clear(mw_err *err);

#endif
