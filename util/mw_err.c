/* util/mw_err.c — formatting of mw_err messages. */
#include "util/mw_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int mw_errf(mw_err *err, const char *fmt, ...) {
    if (!err) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int mw_err_wrap(mw_err *err, const char *fmt, ...) {
    if (!err) return -1;
    char prefix[MW_ERR_MAX];
    char old[MW_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return -1;
}

void mw_err_clear(mw_err *err) {
    if (err) err->msg[0] = '\0';
}
