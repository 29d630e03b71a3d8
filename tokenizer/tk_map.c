/* tokenizer/tk_map.c — the tokenizer's hash maps (token bytes → id, (id, id) → merge).
 *
 * Open addressing with linear probing at most half full; keys are never removed. The bytes map
 * stores ids only and compares against the tokenizer's own blob, so it costs 4 bytes a slot. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk_internal.h"

uint64_t tk__hash(const void *p, size_t n) {
    /* FNV-1a, then a final avalanche so the low bits used for the slot are well mixed */
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static bool same(const char *blob, const uint64_t *off, uint32_t id, const void *key, size_t len) {
    return off[id + 1] - off[id] == len && !memcmp(blob + off[id], key, len);
}

int32_t tk__map_get(const tk__map *m, const char *blob, const uint64_t *off, const void *key,
                    size_t len) {
    if (!m->cap) return -1;
    size_t mask = m->cap - 1;
    for (size_t i = tk__hash(key, len) & mask;; i = (i + 1) & mask) {
        uint32_t v = m->slot[i];
        if (!v) return -1;
        if (same(blob, off, v - 1, key, len)) return (int32_t)(v - 1);
    }
}

int tk__map_put(tk__map *m, const char *blob, const uint64_t *off, int32_t id, size_t n_total) {
    if (!m->cap) {
        size_t cap = 16;
        while (cap < 2 * n_total + 2) cap <<= 1;
        if (!(m->slot = calloc(cap, sizeof *m->slot))) return -1;
        m->cap = cap;
    }
    const char *key = blob + off[id];
    size_t len = (size_t)(off[id + 1] - off[id]);
    size_t mask = m->cap - 1;
    for (size_t i = tk__hash(key, len) & mask;; i = (i + 1) & mask) {
        uint32_t v = m->slot[i];
        if (!v) {
            m->slot[i] = (uint32_t)id + 1;
            return 0;
        }
        if (same(blob, off, v - 1, key, len)) return 1;
    }
}

void tk__map_free(tk__map *m) {
    free(m->slot);
    *m = (tk__map){0};
}

static uint64_t pair_hash(uint64_t k) {
    k ^= k >> 31;
    k *= 0x7fb5d329728ea185ull;
    k ^= k >> 27;
    k *= 0x81dadef4bc2dd44dull;
    k ^= k >> 33;
    return k;
}

static int pairs_grow(tk__pairs *p) {
    size_t cap = p->cap ? p->cap * 2 : 1024;
    tk__pairs q = {.cap = cap,
                   .key = calloc(cap, sizeof *q.key),
                   .rank = malloc(cap * sizeof *q.rank),
                   .merged = malloc(cap * sizeof *q.merged)};
    if (!q.key || !q.rank || !q.merged) {
        tk__pairs_free(&q);
        return -1;
    }
    for (size_t i = 0; i < p->cap; i++) {
        if (!p->key[i]) continue;
        size_t j = pair_hash(p->key[i]) & (cap - 1);
        while (q.key[j]) j = (j + 1) & (cap - 1);
        q.key[j] = p->key[i];
        q.rank[j] = p->rank[i];
        q.merged[j] = p->merged[i];
    }
    q.n = p->n;
    tk__pairs_free(p);
    *p = q;
    return 0;
}

int tk__pairs_put(tk__pairs *p, uint32_t a, uint32_t b, uint32_t rank, uint32_t merged) {
    if (2 * (p->n + 1) > p->cap && pairs_grow(p)) return -1;
    uint64_t k = (((uint64_t)a << 32) | b) + 1;
    size_t mask = p->cap - 1;
    for (size_t i = pair_hash(k) & mask;; i = (i + 1) & mask) {
        if (!p->key[i]) {
            p->key[i] = k;
            p->rank[i] = rank;
            p->merged[i] = merged;
            p->n++;
            return 0;
        }
        if (p->key[i] == k) return 1; /* the first (best-ranked) merge of a pair stays */
    }
}

bool tk__pairs_get(const tk__pairs *p, uint32_t a, uint32_t b, uint32_t *rank, uint32_t *merged) {
    if (!p->cap) return false;
    uint64_t k = (((uint64_t)a << 32) | b) + 1;
    size_t mask = p->cap - 1;
    for (size_t i = pair_hash(k) & mask;; i = (i + 1) & mask) {
        if (!p->key[i]) return false;
        if (p->key[i] == k) {
            *rank = p->rank[i];
            *merged = p->merged[i];
            return true;
        }
    }
}

void tk__pairs_free(tk__pairs *p) {
    free(p->key);
    free(p->rank);
    free(p->merged);
    *p = (tk__pairs){0};
}
