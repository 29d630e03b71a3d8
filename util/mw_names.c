/* util/mw_names.c — see mw_names.h. */
#include "util/mw_names.h"

#include <stdio.h>
#include <string.h>

static const char *name_at(const char *const *first, size_t i, size_t stride) {
    return *(const char *const *)((const char *)first + i * stride);
}

int mw_names_find(const char *name, const char *const *first, size_t n, size_t stride) {
    for (size_t i = 0; name && i < n; i++)
        if (!strcmp(name_at(first, i, stride), name)) return (int)i;
    return -1;
}

const char *mw_names_join(char *buf, size_t cap, const char *const *first, size_t n,
                          size_t stride) {
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (size_t i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "",
                                name_at(first, i, stride));
    return buf;
}
