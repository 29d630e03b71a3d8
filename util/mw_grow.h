/* util/mw_grow.h — growing a heap array on demand (capacity doubles, contents kept), the one
 * helper behind every reusable scratch buffer, so steady-state loops allocate nothing. */
#ifndef MW_GROW_H
#define MW_GROW_H

#include <stddef.h>

/* Makes *p hold at least `need` elements of `elem` bytes. Returns 0, or -1 (and leaves *p and
 * *cap unchanged) when memory runs out or the size overflows. */
int mw_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
