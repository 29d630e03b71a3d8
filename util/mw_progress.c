/* util/mw_progress.c — the progress helper: a bar on a terminal, periodic plain lines elsewhere
 * (mw_progress.h). */
#include "util/mw_progress.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/mw_time.h"

void mw_progress_init(mw_progress *p, FILE *out, const char *what, bool bytes) {
    memset(p, 0, sizeof *p);
    p->out = out ? out : stderr;
    snprintf(p->what, sizeof p->what, "%s", what);
    p->bytes = bytes;
    const char *mode = getenv("MOEWIRE_PROGRESS"), *secs = getenv("MOEWIRE_PROGRESS_SECONDS");
    p->tty = isatty(fileno(p->out)) == 1 && !(mode && !strcmp(mode, "lines"));
    p->every = secs ? atof(secs) : 5.0;
    if (!(p->every >= 0)) p->every = 5.0;
    if (mode && !strcmp(mode, "off")) p->out = NULL;
    p->start = p->last = mw_now_s();
}

static void amount(const mw_progress *p, uint64_t done, uint64_t total, double t, char *buf,
                   size_t n) {
    const double dt = t - p->start > 1e-9 ? t - p->start : 1e-9;
    if (p->bytes)
        snprintf(buf, n, "%.1f of %.1f MB, %.0f MB/s", (double)done / 1e6, (double)total / 1e6,
                 (double)done / 1e6 / dt);
    else
        snprintf(buf, n, "%llu of %llu", (unsigned long long)done, (unsigned long long)total);
}

static void bar(mw_progress *p, uint64_t done, uint64_t total, double t) {
    const int width = 30, pct = total ? (int)(100.0 * (double)done / (double)total) : 100;
    const int fill = total ? (int)((double)done / (double)total * width) : width;
    char a[96];
    amount(p, done, total, t, a, sizeof a);
    fprintf(p->out, "\r%s [%.*s%*s] %3d%% %s ", p->what, fill, "##############################",
            width - fill, "", pct, a);
    if (done >= total) fputc('\n', p->out);
    fflush(p->out);
    p->shown = true;
}

void mw_progress_update(mw_progress *p, uint64_t done, uint64_t total) {
    if (!p->out) return;
    const double t = mw_now_s();
    const bool end = done >= total;
    if (p->tty) {
        if (end || t - p->last >= 0.1) {
            p->last = t;
            bar(p, done, total, t);
        }
        return;
    }
    if (!(end ? p->shown : t - p->last >= p->every)) return;
    p->last = t;
    char a[96];
    amount(p, done, total, t, a, sizeof a);
    fprintf(p->out, "%s: %s %d%% (%s, %.1f s)\n", p->what, end ? "done," : "",
            total ? (int)(100.0 * (double)done / (double)total) : 100, a, t - p->start);
    fflush(p->out);
    p->shown = true;
}

void mw_progress_cb(void *ctx, uint64_t done, uint64_t total) {
    mw_progress_update(ctx, done, total);
}
