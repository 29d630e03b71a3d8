/* util/mw_progress.h — progress of long work (an extract, a verify, a plan, a node's mount and
 * pin, a GGUF fingerprint), one helper for every program: on a terminal a bar redrawn at most ten
 * times a second; anywhere else (a log file, the journal) one plain line every few seconds, so a
 * service's log says how far a start-up got without filling with redraws. */
#ifndef MW_PROGRESS_H
#define MW_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct mw_progress {
    FILE *out;
    char what[64]; /* "vindex extract", "expert-node n1: mount" */
    bool bytes;    /* done and total count bytes (MB and MB/s shown), else items */
    bool tty;
    double start, last, every;
    bool shown; /* a bar or a line has been written */
} mw_progress;

/* Starts reporting on out (stderr when NULL). Lines come every MOEWIRE_PROGRESS_SECONDS (default
 * 5); MOEWIRE_PROGRESS=lines gives lines on a terminal too, =off nothing. */
void mw_progress_init(mw_progress *p, FILE *out, const char *what, bool bytes);
/* done of total so far; the end (done == total) closes the bar, or writes a last line when lines
 * were written before. */
void mw_progress_update(mw_progress *p, uint64_t done, uint64_t total);
/* The same shaped as a callback: ctx is an mw_progress. */
void mw_progress_cb(void *ctx, uint64_t done, uint64_t total);

#endif
