/* coordinator/co_stop.c — stop strings over streamed text (co_stop.h). */
#include "coordinator/co_stop.h"

#include <stdlib.h>
#include <string.h>

int co_stop_init(co_stop *st, const char *const *strs, int n, mw_err *err) {
    memset(st, 0, sizeof *st);
    if (n < 0 || n > CO_STOP_MAX) return mw_errf(err, "at most %d stop strings", CO_STOP_MAX);
    for (int i = 0; i < n; i++) {
        size_t l = strlen(strs[i]);
        if (l == 0 || l > CO_STOP_MAX_LEN) {
            co_stop_free(st);
            return mw_errf(err, "a stop string must have 1 to %d bytes", CO_STOP_MAX_LEN);
        }
        if (!(st->str[i] = strdup(strs[i]))) {
            co_stop_free(st);
            return mw_errf(err, "out of memory");
        }
        st->len[i] = l;
        st->n = i + 1;
    }
    return 0;
}

void co_stop_free(co_stop *st) {
    for (int i = 0; i < st->n; i++) free(st->str[i]);
    co_buf_free(&st->held);
    st->n = 0;
}

/* Length of the longest suffix of h that is a proper prefix of some stop string. */
static size_t partial_suffix(const co_stop *st, const char *h, size_t n) {
    size_t best = 0;
    for (int i = 0; i < st->n; i++) {
        size_t m = st->len[i] - 1 < n ? st->len[i] - 1 : n;
        for (size_t l = m; l > best; l--)
            if (!memcmp(h + n - l, st->str[i], l)) {
                best = l;
                break;
            }
    }
    return best;
}

bool co_stop_feed(co_stop *st, const char *text, size_t len, co_buf *out) {
    if (st->n == 0) {
        co_buf_add(out, text, len);
        return false;
    }
    co_buf_add(&st->held, text, len);
    const char *h = st->held.p ? st->held.p : "";
    size_t n = st->held.len;
    size_t first = n;
    for (int i = 0; i < st->n; i++) {
        const char *m = memmem(h, n, st->str[i], st->len[i]);
        if (m && (size_t)(m - h) < first) first = (size_t)(m - h);
    }
    if (first < n) {
        co_buf_add(out, h, first);
        co_buf_clear(&st->held);
        return true;
    }
    size_t keep = partial_suffix(st, h, n);
    co_buf_add(out, h, n - keep);
    memmove(st->held.p, h + n - keep, keep);
    st->held.len = keep;
    st->held.p[keep] = 0;
    return false;
}

void co_stop_flush(co_stop *st, co_buf *out) {
    if (st->held.len) co_buf_add(out, st->held.p, st->held.len);
    co_buf_clear(&st->held);
}
