/* model/md_pin.h — owned copies of weight matrices on transparent huge pages. A decode step streams
 * every dense matrix and the selected experts once at memory speed; views of a file mapping sit
 * mostly on 4 KiB pages, and the TLB misses of that stream cost measurably (docs/model.md). A copy
 * costs the matrices' size in memory and computes the same bits. */
#ifndef MD_PIN_H
#define MD_PIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kn.h"
#include "util/mw_err.h"

typedef struct md_pin {
    void *buf;
    size_t bytes;
    /* set before md_pin_mats to follow the copy (bytes copied of all); may be NULL */
    void (*copied)(void *ctx, uint64_t done, uint64_t total);
    void *copied_ctx;
} md_pin;

/* Whether pinning makes the kernels' packed copies (kn_pack): yes unless MOEWIRE_PACK=0, the switch
 * for comparing the two. */
bool md_pin_packing(void);
/* Copies the n matrices (those without data are skipped) into one buffer advised for huge pages
 * and points each view at its copy. With `pack`, a matrix whose packed copy the active kernels
 * read at every batch size (kn_pack_replaces: MXFP4 with AVX-512, AVX-VNNI or AVX2, Q4_K with
 * AVX-VNNI or AVX2) gets that copy in place of the plain one, as large, and its
 * view's `packed` points at it (its data stays the mapping's, which only other numerics and ISAs
 * read); except where plain[i] (plain may be NULL: none): a matrix whose copy's data the caller
 * hands on to views of its rows (a head set's), which would not carry the packed copy. `what`
 * names the owner in an out-of-memory message. */
int md_pin_mats(md_pin *p, kn_mat *const *mats, const bool *plain, size_t n, bool pack,
                const char *what, mw_err *err);
/* The kernels' packed copies of the n matrices beside them (kn_pack; those the active kernels
 * have no layout for, and those md_pin_mats already packed, take no room) in one buffer advised
 * for huge pages, each view's `packed` pointed at its own, which the kernels then read instead (the
 * bits are the same). */
int md_pin_pack(md_pin *p, kn_mat *const *mats, size_t n, const char *what, mw_err *err);
/* Maps every page of a view of a mapping into the process (MADV_POPULATE_READ, or one read per
 * page where the kernel lacks it), so reading its rows later never faults: for a matrix read a few
 * rows at a time, which a copy would not speed up (the token embedding). Costs no memory beyond
 * the page cache's. */
void md_pin_map_in(const kn_mat *w);
void md_pin_free(md_pin *p);

#endif
