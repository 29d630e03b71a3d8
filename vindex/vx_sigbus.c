/* vindex/vx_sigbus.c — naming the file behind a SIGBUS. Every file mapping vindex/ makes is noted
 * here (address range, path, file offset); a process that called vx_catch_sigbus turns a bus error
 * inside one — the file was truncated or shrunk under it, so a mapped page no longer exists — into
 * one line on stderr naming the file and the offset, and exit status 1, instead of dying of the
 * signal with no word. A fault outside every noted mapping keeps the default action.
 *
 * The handler reads the table without locking: slots are published with atomic stores and their
 * path strings are freed only after the slot is emptied. */
#include "vindex/vx_map.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vindex/vx_source.h"

#define CHUNK_SLOTS 256
#define MAX_CHUNKS  256 /* 65536 mappings; more are simply not named */

typedef struct slot {
    _Atomic(uintptr_t) start; /* 0 = free */
    _Atomic(size_t) len;
    _Atomic(uint64_t) off;
    _Atomic(char *) path;
} slot;

static _Atomic(slot *) chunks[MAX_CHUNKS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *program = "moewire";

void vx_map_note(const void *p, size_t len, uint64_t off, const char *path) {
    if (!p || !len) return;
    char *copy = strdup(path);
    if (!copy) return;
    pthread_mutex_lock(&lock);
    for (int c = 0; c < MAX_CHUNKS; c++) {
        slot *s = atomic_load(&chunks[c]);
        if (!s) {
            if (!(s = calloc(CHUNK_SLOTS, sizeof *s))) break;
            atomic_store(&chunks[c], s);
        }
        for (int i = 0; i < CHUNK_SLOTS; i++) {
            if (atomic_load(&s[i].start)) continue;
            atomic_store(&s[i].len, len);
            atomic_store(&s[i].off, off);
            atomic_store(&s[i].path, copy);
            atomic_store(&s[i].start, (uintptr_t)p);
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    pthread_mutex_unlock(&lock);
    free(copy);
}

void vx_map_forget(const void *p) {
    if (!p) return;
    pthread_mutex_lock(&lock);
    for (int c = 0; c < MAX_CHUNKS; c++) {
        slot *s = atomic_load(&chunks[c]);
        if (!s) break;
        for (int i = 0; i < CHUNK_SLOTS; i++) {
            if (atomic_load(&s[i].start) != (uintptr_t)p) continue;
            atomic_store(&s[i].start, 0);
            free(atomic_exchange(&s[i].path, NULL));
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    pthread_mutex_unlock(&lock);
}

/* ---- the handler: async-signal-safe calls only -------------------------------------------- */

static void put(const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t k = write(2, s, n);
        if (k <= 0) return;
        s += k;
        n -= (size_t)k;
    }
}

static void put_u64(uint64_t v, int base) {
    char b[24];
    int i = sizeof b - 1;
    b[i] = '\0';
    do {
        b[--i] = "0123456789abcdef"[v % (uint64_t)base];
        v /= (uint64_t)base;
    } while (v && i > 0);
    put(b + i);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int c = 0; c < MAX_CHUNKS; c++) {
        slot *s = atomic_load(&chunks[c]);
        if (!s) break;
        for (int i = 0; i < CHUNK_SLOTS; i++) {
            uintptr_t start = atomic_load(&s[i].start);
            if (!start || a < start || a - start >= atomic_load(&s[i].len)) continue;
            const char *path = atomic_load(&s[i].path);
            put(program);
            put(": ");
            put(path ? path : "a mapped model file");
            put(" changed under this process: its byte at offset ");
            put_u64(atomic_load(&s[i].off) + (a - start), 10);
            put(" is no longer in the file (truncated or rewritten while in use; replace a "
                "served model by writing a new one and restarting on it); exiting\n");
            _exit(1);
        }
    }
    /* not a model file: the default action, on return the fault repeats and kills */
    put(program);
    put(": bus error at address 0x");
    put_u64((uint64_t)a, 16);
    put("\n");
    signal(sig, SIG_DFL);
}

void vx_catch_sigbus(const char *prog) {
    if (prog) program = prog;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}
