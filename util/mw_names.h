/* util/mw_names.h — a table's row names, for the tables that pick a row by name (expert backends,
 * model families, synth's families): finding a row, and listing every name in a message ("unknown
 * backend 'x' (known: local, remote)"). A table passes the address of its first row's name field
 * and its row size, as MW_NAMES(table, field) does. */
#ifndef MW_NAMES_H
#define MW_NAMES_H

#include <stddef.h>

#define MW_NAMES(table, field)                                                                     \
    &(table)[0].field, sizeof(table) / sizeof((table)[0]), sizeof((table)[0])

/* The index of the row named `name` (NULL finds none), or -1. */
int mw_names_find(const char *name, const char *const *first, size_t n, size_t stride);
/* The n names joined by ", " into buf (cut at cap); returns buf. */
const char *mw_names_join(char *buf, size_t cap, const char *const *first, size_t n, size_t stride);

#endif
