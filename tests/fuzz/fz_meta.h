/* tests/fuzz/fz_meta.h — reads every entry of a metadata table through its typed getters, so a
 * harness exercises what a reader stored, not only that it returned. */
#ifndef FZ_META_H
#define FZ_META_H

#include "vindex/vx_meta.h"

static inline void fz_read_meta(const vx_meta *m) {
    for (size_t i = 0; i < vx_meta_count(m); i++) {
        const char *key = vx_meta_key(m, i);
        int64_t v;
        double f;
        bool b;
        const char *s;
        size_t len;
        mw_err e;
        vx_meta_get_i64(m, key, &v, &e);
        vx_meta_get_f64(m, key, &f, &e);
        vx_meta_get_bool(m, key, &b, &e);
        vx_meta_get_str(m, key, &s, &e);
        if (vx_meta_type(m, i) != VX_ARR) continue;
        uint64_t n = vx_meta_arr_len(m, i);
        for (uint64_t k = 0; k < n && k < 64; k++) {
            vx_meta_arr_i64(m, key, k, &v, &e);
            vx_meta_arr_f64(m, key, k, &f, &e);
            vx_meta_arr_str(m, key, k, &s, &len, &e);
        }
        if (n) vx_meta_arr_str(m, key, n - 1, &s, &len, &e);
    }
}

#endif
