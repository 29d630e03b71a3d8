/* model/md_pin.c — copying matrices out of a mapping into one buffer on transparent huge pages, and
 * the kernels' packed copies of them (kn_pack) into another. */
#include "model/md_pin.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PIN_ALIGN ((size_t)2 << 20) /* a transparent huge page */

/* Bytes of a matrix as stored (the last row without its stride's padding). */
static size_t stored(const kn_mat *w) {
    if (!w->data || w->rows == 0) return 0;
    return (size_t)(w->rows - 1) * w->row_bytes + kn_row_size(w->type, w->cols);
}

/* Its room in the buffer: rounded up to a cache line, so each copy starts on one. */
static size_t span(const kn_mat *w) {
    return (stored(w) + 63) & ~(size_t)63;
}

/* p's buffer of `bytes` (rounded up to huge pages), advised for huge pages; none for 0 bytes. */
static int pin_alloc(md_pin *p, size_t bytes, const char *what, mw_err *err) {
    bytes = (bytes + PIN_ALIGN - 1) & ~(PIN_ALIGN - 1);
    *p = (md_pin){.copied = p->copied, .copied_ctx = p->copied_ctx};
    if (bytes == 0) return 0;
    if (posix_memalign(&p->buf, PIN_ALIGN, bytes) != 0) {
        p->buf = NULL;
        return mw_errf(err, "%s: out of memory for %zu bytes of weights", what, bytes);
    }
#ifdef MADV_HUGEPAGE
    madvise(p->buf, bytes, MADV_HUGEPAGE); /* advice: without huge pages the copy is still right */
#endif
    p->bytes = bytes;
    return 0;
}

void md_pin_map_in(const kn_mat *w) {
    const size_t n = stored(w);
    if (n == 0) return;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)w->data & ~(uintptr_t)(page - 1);
    const size_t len = (uintptr_t)w->data + n - a;
#ifdef MADV_POPULATE_READ
    if (madvise((void *)a, len, MADV_POPULATE_READ) == 0) return;
#endif
    /* an older kernel: fault the pages in by reading one byte of each */
    volatile const uint8_t *p = (const uint8_t *)a;
    uint8_t sink = 0;
    for (size_t o = 0; o < len; o += page) sink ^= p[o];
    (void)sink;
}

bool md_pin_packing(void) {
    const char *v = getenv("MOEWIRE_PACK");
    return !(v && strcmp(v, "0") == 0);
}

/* A packed copy's room in its buffer: rounded up to a cache line, as span(). */
static size_t pack_span(const kn_mat *w) {
    return w->data ? (kn_pack_bytes(w) + 63) & ~(size_t)63 : 0;
}

/* Whether md_pin_mats gives mats[i] its packed copy instead of a plain one. */
static bool packs_instead(kn_mat *const *mats, const bool *plain, size_t i, bool pack) {
    return pack && !(plain && plain[i]) && mats[i]->data && kn_pack_replaces(mats[i]);
}

int md_pin_mats(md_pin *p, kn_mat *const *mats, const bool *plain, size_t n, bool pack,
                const char *what, mw_err *err) {
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += packs_instead(mats, plain, i, pack) ? pack_span(mats[i]) : span(mats[i]);
    if (pin_alloc(p, bytes, what, err)) return -1;
    uint8_t *dst = p->buf;
    size_t next = 0; /* bytes at which the progress is told next */
    for (size_t i = 0; i < n; i++) {
        if (p->copied && (size_t)(dst - (uint8_t *)p->buf) >= next) {
            p->copied(p->copied_ctx, (uint64_t)(dst - (uint8_t *)p->buf), bytes);
            next += 64u << 20;
        }
        if (packs_instead(mats, plain, i, pack)) {
            kn_pack(mats[i], dst);
            dst += pack_span(mats[i]);
            continue;
        }
        const size_t s = span(mats[i]);
        if (!s) continue;
        memcpy(dst, mats[i]->data, stored(mats[i]));
        mats[i]->data = dst;
        dst += s;
    }
    if (p->copied) p->copied(p->copied_ctx, bytes, bytes);
    return 0;
}

/* Room for a packed copy kept beside the stored rows (none where md_pin_mats packed instead). */
static size_t batch_pack_span(const kn_mat *w) {
    return kn_pack_replaces(w) ? 0 : pack_span(w);
}

int md_pin_pack(md_pin *p, kn_mat *const *mats, size_t n, const char *what, mw_err *err) {
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += batch_pack_span(mats[i]);
    if (pin_alloc(p, bytes, what, err)) return -1;
    uint8_t *dst = p->buf;
    for (size_t i = 0; i < n; i++) {
        const size_t s = batch_pack_span(mats[i]);
        if (!s) continue;
        kn_pack(mats[i], dst);
        dst += s;
    }
    return 0;
}

void md_pin_free(md_pin *p) {
    free(p->buf);
    *p = (md_pin){0};
}
