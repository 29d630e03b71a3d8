/* template/jj_rt.c — the render state's bounds and failure: an error at the node being evaluated,
 * the step and nesting bounds every evaluation counts against, and the keyword-argument lookup
 * builtins share. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "template/jj_internal.h"

_Noreturn void jj__rfail(jj__rt *r, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jj__fail(r->e, r->at ? r->at->line : 0, r->at ? r->at->col : 0, "%s", msg);
}

void jj__nest_in(jj__rt *r) {
    if (++r->nest > JJ__MAX_NEST)
        jj__rfail(r, "values or expressions nested deeper than %d levels", JJ__MAX_NEST);
}

void jj__step(jj__rt *r) {
    if (++r->steps > r->max_steps)
        jj__rfail(r, "the template ran more than %llu steps", (unsigned long long)r->max_steps);
}

jj__val *jj__arg(jj__val *args, int n, const char **kwn, jj__val *kwv, int nkw, int pos,
                 const char *name) {
    if (pos >= 0 && pos < n) return &args[pos];
    for (int k = 0; k < nkw; k++)
        if (name && !strcmp(kwn[k], name)) return &kwv[k];
    return NULL;
}
