/* vindex/vx_strmap.c — open-addressing string map (FNV-1a, linear probing, load <= 1/2). */
#include "vindex/vx_strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

void vx_strmap_free(vx_strmap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

long vx_strmap_get(const vx_strmap *m, const char *key) {
    if (m->cap == 0) return -1;
    for (size_t i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return -1;
        if (!strcmp(m->keys[i], key)) return (long)m->vals[i];
    }
}

static void insert_slot(const char **keys, size_t *vals, size_t cap, const char *key, size_t val) {
    size_t i = hash_str(key) & (cap - 1);
    while (keys[i]) i = (i + 1) & (cap - 1);
    keys[i] = key;
    vals[i] = val;
}

static int grow(vx_strmap *m) {
    size_t cap = m->cap ? m->cap * 2 : 16;
    const char **keys = calloc(cap, sizeof *keys);
    size_t *vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) insert_slot(keys, vals, cap, m->keys[i], m->vals[i]);
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

int vx_strmap_put(vx_strmap *m, const char *key, size_t val) {
    if (vx_strmap_get(m, key) >= 0) return 1;
    if ((m->n + 1) * 2 > m->cap && grow(m) != 0) return -1;
    insert_slot(m->keys, m->vals, m->cap, key, val);
    m->n++;
    return 0;
}
