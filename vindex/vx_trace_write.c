/* vindex/vx_trace_write.c — the routing-trace writer: the forward pass copies each record into a
 * ring (one producer, never blocking), a thread of the writer's own drains the ring to the file
 * and keeps the body's checksum, and finishing writes the header with the counts.
 *
 * The producer only copies and publishes; it wakes the drain thread when the ring is an eighth
 * full or a fraction of a second has passed, so a decode step costs a memcpy, not a syscall. A
 * record that finds no room is dropped whole and counted (a step's layers with it), never partly
 * written: a reader then sees fewer records, not a corrupt file. */
#include "vindex/vx_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/mw_time.h"
#include "vindex/vx_hash.h"
#include "vindex/vx_trace_internal.h"

#define DEFAULT_RING  (16u << 20)
#define MIN_RING      (64u << 10)
#define WAKE_NS       200000000ull /* the drain thread hears from the producer at least this often */
#define IDLE_WAIT_SEC 1            /* and looks by itself this often */

struct vx_trace_writer {
    int fd;
    char *path;
    vx_trace_info info;
    uint8_t *ring;
    size_t cap;
    _Atomic uint64_t head, tail; /* bytes ever published / drained */
    _Atomic int sleeping;
    bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    /* the drain thread's */
    vx_b2 b2;
    int write_errno; /* the first failed write: later bytes are drained and discarded */
    /* the producer's */
    vx_trace_counts n;
    bool skip_step; /* the current step's record was dropped: so are its layers */
    int64_t step_T;
    uint64_t last_wake_ns;
};

/* ---- the drain thread ----------------------------------------------------------------------- */

static void write_all(vx_trace_writer *w, const uint8_t *p, size_t n) {
    vx_b2_update(&w->b2, p, n);
    while (n && !w->write_errno) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            w->write_errno = k < 0 ? errno : EIO;
            break;
        }
        p += k;
        n -= (size_t)k;
    }
}

static void drain(vx_trace_writer *w) {
    uint64_t head = atomic_load_explicit(&w->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&w->tail, memory_order_relaxed);
    while (tail < head) {
        size_t at = (size_t)(tail % w->cap), n = (size_t)(head - tail);
        if (n > w->cap - at) n = w->cap - at;
        write_all(w, w->ring + at, n);
        tail += n;
        atomic_store_explicit(&w->tail, tail, memory_order_release);
    }
}

static void *drain_main(void *arg) {
    vx_trace_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        bool stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        drain(w);
        pthread_mutex_lock(&w->mu);
        if (stop) break;
        if (atomic_load(&w->head) == atomic_load(&w->tail) && !w->stop) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += IDLE_WAIT_SEC;
            atomic_store(&w->sleeping, 1);
            pthread_cond_timedwait(&w->cv, &w->mu, &ts);
            atomic_store(&w->sleeping, 0);
        }
    }
    pthread_mutex_unlock(&w->mu);
    drain(w);
    return NULL;
}

static void wake(vx_trace_writer *w) {
    pthread_mutex_lock(&w->mu);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* ---- the producer --------------------------------------------------------------------------- */

static void put(vx_trace_writer *w, uint64_t *at, const void *p, size_t n) {
    const uint8_t *s = p;
    while (n) {
        size_t off = (size_t)(*at % w->cap), k = n < w->cap - off ? n : w->cap - off;
        memcpy(w->ring + off, s, k);
        s += k;
        n -= k;
        *at += k;
    }
}

static void put_u32(vx_trace_writer *w, uint64_t *at, uint32_t v) {
    put(w, at, &v, sizeof v);
}

/* Room for n more bytes now (the drain thread only ever makes more). */
static bool room(vx_trace_writer *w, uint64_t n) {
    uint64_t used = atomic_load_explicit(&w->head, memory_order_relaxed) -
                    atomic_load_explicit(&w->tail, memory_order_acquire);
    return n <= w->cap - used;
}

/* Makes [old head, head) visible to the drain thread. Wakes it when the ring is an eighth full,
 * or, at a step's start (at_step), when it sleeps and was last woken long enough ago: a step
 * reads the clock once, a layer never. */
static void publish(vx_trace_writer *w, uint64_t head, bool at_step) {
    atomic_store_explicit(&w->head, head, memory_order_release);
    const uint64_t pending = head - atomic_load_explicit(&w->tail, memory_order_relaxed);
    bool due = pending >= w->cap / 8;
    if (!due && at_step && atomic_load_explicit(&w->sleeping, memory_order_relaxed)) {
        const uint64_t now = mw_now_ns();
        due = now - w->last_wake_ns >= WAKE_NS;
    }
    if (due) {
        w->last_wake_ns = mw_now_ns();
        wake(w);
    }
}

void vx_trace_step(vx_trace_writer *w, int64_t T, const int32_t *seq, const int32_t *pos,
                   const int32_t *token, size_t stride) {
    w->step_T = T;
    const uint64_t bytes = 8 + 12 * (uint64_t)T;
    w->skip_step = T < 1 || T > VX_TRACE_MAX_ROWS || !room(w, bytes);
    if (w->skip_step) return;
    uint64_t at = atomic_load_explicit(&w->head, memory_order_relaxed);
    put_u32(w, &at, VX_TRACE_STEP);
    put_u32(w, &at, (uint32_t)T);
    for (int64_t t = 0; t < T; t++) {
        const int32_t r[3] = {seq[t * stride], pos[t * stride], token[t * stride]};
        put(w, &at, r, sizeof r);
    }
    w->n.steps++;
    w->n.rows += (uint64_t)T;
    publish(w, at, true);
}

void vx_trace_layer(vx_trace_writer *w, int layer, int64_t T, int k, const int32_t *ids,
                    const float *weights) {
    const uint64_t tk = (uint64_t)T * (uint64_t)k, id_bytes = (2 * tk + 3) & ~3ull;
    const uint64_t bytes = 16 + id_bytes + 4 * tk;
    if (w->skip_step || T != w->step_T || layer < 0 || (uint32_t)layer >= w->info.n_layer ||
        (uint32_t)k != w->info.k || !room(w, bytes)) {
        w->n.dropped++;
        return;
    }
    uint64_t at = atomic_load_explicit(&w->head, memory_order_relaxed);
    const uint32_t h[4] = {VX_TRACE_LAYER, (uint32_t)layer, (uint32_t)T, (uint32_t)k};
    put(w, &at, h, sizeof h);
    uint16_t chunk[256];
    for (uint64_t i = 0; i < tk;) {
        size_t n = tk - i < 256 ? (size_t)(tk - i) : 256;
        for (size_t j = 0; j < n; j++) chunk[j] = (uint16_t)ids[i + j];
        put(w, &at, chunk, n * 2);
        i += n;
    }
    if (2 * tk != id_bytes) put(w, &at, (const uint16_t[1]){0}, 2);
    put(w, &at, weights, 4 * tk);
    w->n.layer_records++;
    w->n.assignments += tk;
    publish(w, at, false);
}

/* ---- open and finish ------------------------------------------------------------------------ */

static int write_header(vx_trace_writer *w, bool closed, mw_err *err) {
    uint8_t h[VX_TRACE_HEADER_BYTES];
    uint8_t body[VX_DIGEST_BYTES] = {0};
    if (closed) vx_b2_final(&w->b2, body);
    vx_trace__encode_header(&w->info, closed ? &w->n : NULL, body, h);
    size_t off = 0;
    while (off < sizeof h) {
        ssize_t k = pwrite(w->fd, h + off, sizeof h - off, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return mw_errf(err, "%s: cannot write the trace header: %s", w->path,
                           k < 0 ? strerror(errno) : "short write");
        off += (size_t)k;
    }
    return 0;
}

static void free_writer(vx_trace_writer *w) {
    if (w->fd >= 0) close(w->fd);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->ring);
    free(w->path);
    free(w);
}

static int init_sync(vx_trace_writer *w) {
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca)) return -1;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc || pthread_mutex_init(&w->mu, NULL) ? -1 : 0;
}

int vx_trace_create(const char *path, const vx_trace_info *info, size_t ring_bytes,
                    vx_trace_writer **out, mw_err *err) {
    *out = NULL;
    if (vx_trace__check_info(info, path, err)) return -1;
    vx_trace_writer *w = calloc(1, sizeof *w);
    if (!w) return mw_errf(err, "out of memory");
    w->fd = -1;
    w->info = *info;
    w->cap = ring_bytes ? (ring_bytes < MIN_RING ? MIN_RING : ring_bytes) : DEFAULT_RING;
    w->ring = malloc(w->cap);
    w->path = strdup(path);
    if (!w->ring || !w->path || init_sync(w)) {
        free_writer(w);
        return mw_errf(err, "%s: out of memory for the trace writer", path);
    }
    memset(w->ring, 0, w->cap); /* its pages faulted in now, not by the decode steps */
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        mw_errf(err, "%s: cannot create the routing trace: %s", path, strerror(errno));
        free_writer(w);
        return -1;
    }
    vx_hash_init();
    vx_b2_init(&w->b2);
    /* an unfinished trace (the process killed) keeps this header: readers refuse it by name */
    if (write_header(w, false, err)) {
        free_writer(w);
        return -1;
    }
    if (lseek(w->fd, VX_TRACE_HEADER_BYTES, SEEK_SET) < 0 ||
        pthread_create(&w->thread, NULL, drain_main, w)) {
        free_writer(w);
        return mw_errf(err, "%s: cannot start the trace writer", path);
    }
    w->last_wake_ns = mw_now_ns();
    *out = w;
    return 0;
}

int vx_trace_finish(vx_trace_writer *w, vx_trace_counts *counts, mw_err *err) {
    if (!w) return 0;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    w->n.body_bytes = atomic_load(&w->head);
    int rc = 0;
    if (w->write_errno)
        rc = mw_errf(err, "%s: writing the routing trace failed: %s", w->path,
                     strerror(w->write_errno));
    else if (write_header(w, true, err))
        rc = -1;
    else if (fsync(w->fd))
        rc = mw_errf(err, "%s: cannot sync the trace: %s", w->path, strerror(errno));
    if (counts) *counts = w->n;
    if (close(w->fd) && !rc) rc = mw_errf(err, "%s: closing the trace failed", w->path);
    w->fd = -1;
    free_writer(w);
    return rc;
}
