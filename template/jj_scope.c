/* template/jj_scope.c — names in scopes: a name resolves through the enclosing scopes, innermost
 * first, and is bound in one scope. */
#include "template/jj_internal.h"

jj__val jj__scope_get(jj__rt *r, jj__scope *s, const char *name) {
    (void)r;
    jj__val k = jj__cstr(name);
    for (; s; s = s->up) {
        jj__val *v = jj__dict_get(&s->vars, k);
        if (v) return *v;
    }
    return jj__undef(NULL);
}

void jj__scope_set(jj__rt *r, jj__scope *s, const char *name, jj__val v) {
    jj__dict_set(r, &s->vars, jj__cstr(name), v);
}
