/* kernels/kn_pool.c — the persistent thread pool. Workers are created once and park between jobs:
 * they spin on a generation counter for a short while (a decode step runs hundreds of matmuls
 * back to back, so the next job usually arrives within microseconds) and then sleep on a
 * condition variable. A caller about to block on something else (a socket) calls kn_pool_park:
 * the workers then sleep at once instead of spinning on cores that other processes (the expert
 * nodes, the coordinator) need meanwhile. A spinning thread only pauses for its first few
 * microseconds and then yields the core at every turn: when threads outnumber cores (nodes and a
 * coordinator sharing a machine), the thread it waits for, or another process, runs instead; on an
 * idle core a yield returns at once. kn_pool_wake gets the workers up only when the jobs since the
 * last park used them. Task indices are claimed dynamically, so a worker that is late (the CPU is
 * shared) never delays a job: the caller runs whatever nobody claimed and waits only for tasks
 * already started. */
#include "kernels/kn_internal.h"
#include "util/mw_err.h"
#include "util/mw_platform.h"
#include "util/mw_time.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KN_POOL_MAX       256
#define KN_POOL_MAX_TASKS 4096 /* fits the 16-bit fields of next_task with room for over-claims */
#define KN_POOL_PAUSES    512  /* spin turns that only pause (a few microseconds) before yielding */
/* Between per-thread slots, and around the pool's scratch (kn_slots_bytes): narrower gaps still
 * let the threads slow each other down. */
#define KN_SLOT_GAP (64 * 1024)

struct kn_pool {
    int n; /* threads, the caller included */
    pthread_t *threads;
    pthread_mutex_t call_lock; /* one job (and one user of the scratch) at a time */

    /* the current job; fn and arg are written by the caller before it publishes next_task */
    kn_task_fn fn;
    void *arg;
    atomic_uint next_task; /* nth << 16 | next unclaimed task index: one atomic, so a claim
                              always reads a task index and the task count of the same job */
    atomic_int active;     /* workers inside a job (claiming or running) */

    atomic_uint gen;  /* bumped once per job: wakes the workers */
    atomic_uint park; /* bumped by kn_pool_park: spinning workers go to sleep */
    atomic_uint wake; /* bumped by kn_pool_wake: sleeping workers spin again */
    atomic_int sleepers, done_waiter;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t wake_cv, done_cv;
    _Atomic int64_t spin_ns; /* how long an idle thread polls before sleeping */
    atomic_bool wide;        /* a job since the last park woke workers */
    atomic_bool wide_before; /* the jobs between the last two parks did */

    void *scratch;
    size_t scratch_cap;
};

/* Bumped by kn_pool_park(NULL): every pool's workers stop spinning. */
static atomic_uint park_all;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Turn i of a spin-wait: pause, or past the first few microseconds give the core away. Returns
 * whether to look at the clock now: every turn once yielding (a yield may last a whole time
 * slice of another thread), every 64 pauses before. */
static inline bool spin_turn(unsigned i) {
    if (i < KN_POOL_PAUSES) {
        cpu_relax();
        return (i & 63) == 0;
    }
    sched_yield();
    return true;
}

/* The pool whose task this thread is running (NULL outside tasks): a task that calls back into
 * the same pool (a matmul inside a pool job) runs inline instead of deadlocking on call_lock. */
static _Thread_local kn_pool *inside;

/* Claims and runs tasks of the current job until none is left. */
static void run_tasks(kn_pool *p) {
    kn_pool *const outer = inside;
    inside = p;
    for (;;) {
        const unsigned v = atomic_fetch_add(&p->next_task, 1);
        const int ith = (int)(v & 0xFFFF), nth = (int)(v >> 16);
        if (ith >= nth) break;
        p->fn(p->arg, ith, nth);
    }
    inside = outer;
}

/* The park counters, read when a worker takes a job: a park requested after that (even one that
 * came before the worker finished its tasks) sends it to sleep without spinning. */
static inline unsigned park_stamp(const kn_pool *p) {
    return atomic_load_explicit(&p->park, memory_order_relaxed) +
           atomic_load_explicit(&park_all, memory_order_relaxed);
}

static void *worker_main(void *vp) {
    kn_pool *p = vp;
    unsigned seen = atomic_load(&p->gen), parked = park_stamp(p);
    for (;;) {
        /* park: spin for spin_ns (unless parked meanwhile), then sleep until a job or a
         * kn_pool_wake, which starts the spin over */
        int64_t t0 = (int64_t)mw_now_ns();
        for (unsigned i = 1; atomic_load_explicit(&p->gen, memory_order_acquire) == seen; i++) {
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
            const bool check = spin_turn(i);
            if (park_stamp(p) != parked ||
                (check && (int64_t)mw_now_ns() - t0 >
                              atomic_load_explicit(&p->spin_ns, memory_order_relaxed))) {
                pthread_mutex_lock(&p->mu);
                atomic_fetch_add(&p->sleepers, 1);
                const unsigned woken = atomic_load(&p->wake);
                while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop) &&
                       atomic_load(&p->wake) == woken)
                    pthread_cond_wait(&p->wake_cv, &p->mu);
                atomic_fetch_sub(&p->sleepers, 1);
                pthread_mutex_unlock(&p->mu);
                t0 = (int64_t)mw_now_ns();
                i = 0;
                parked = park_stamp(p);
            }
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = atomic_load(&p->gen);
        parked = park_stamp(p);
        atomic_fetch_add(&p->active, 1);
        run_tasks(p);
        if (atomic_fetch_sub(&p->active, 1) == 1 && atomic_load(&p->done_waiter)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

kn_pool *kn_pool_create(int n_threads) {
    kn_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads < 1 ? 1 : n_threads > KN_POOL_MAX ? KN_POOL_MAX : n_threads;
    const char *spin = getenv("MOEWIRE_POOL_SPIN_US");
    atomic_init(&p->spin_ns, (spin ? atoll(spin) : 200) * 1000);
    atomic_init(&p->wide, false);
    atomic_init(&p->wide_before, true);
    pthread_mutex_init(&p->call_lock, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->next_task, 0);
    if (p->n > 1) {
        p->threads = calloc((size_t)p->n - 1, sizeof(pthread_t));
        if (!p->threads) goto fail;
        for (int i = 0; i < p->n - 1; i++) {
            if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0) {
                p->n = i + 1; /* keep the workers that started */
                break;
            }
        }
    }
    return p;
fail:
    free(p);
    return NULL;
}

void kn_pool_destroy(kn_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->wake_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n - 1; i++) pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->scratch);
    pthread_cond_destroy(&p->wake_cv);
    pthread_cond_destroy(&p->done_cv);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->call_lock);
    free(p);
}

void kn_pool_park(kn_pool *p) {
    atomic_fetch_add_explicit(p ? &p->park : &park_all, 1, memory_order_relaxed);
    if (p) atomic_store(&p->wide_before, atomic_exchange(&p->wide, false));
}

void kn_pool_wake(kn_pool *p) {
    /* with no polling they would only go back to sleep; and with the last jobs run by the
     * caller alone (too small to split), they would only spin */
    if (!p || p->n == 1 || atomic_load(&p->sleepers) == 0 ||
        atomic_load_explicit(&p->spin_ns, memory_order_relaxed) == 0 ||
        !atomic_load(&p->wide_before))
        return;
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->wake, 1);
    pthread_cond_broadcast(&p->wake_cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- CPU binding ----------------------------------------------------------------------------- */

#define KN_MAX_CPUS 1024

static pthread_once_t cpus_once = PTHREAD_ONCE_INIT;
static int cpus_n;
static short cpus_id[KN_MAX_CPUS];

static void cpus_read(void) {
    int ids[KN_MAX_CPUS];
    cpus_n = mw_cpus_allowed(ids, KN_MAX_CPUS);
    for (int c = 0; c < cpus_n; c++) cpus_id[c] = (short)ids[c];
    if (cpus_n == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cpus_n = n < 1 ? 1 : n > KN_MAX_CPUS ? KN_MAX_CPUS : (int)n;
        for (int c = 0; c < cpus_n; c++) cpus_id[c] = (short)c;
    }
}

int kn_cpus_allowed(void) {
    pthread_once(&cpus_once, cpus_read);
    return cpus_n;
}

int kn_cpu_at(int index) {
    return cpus_id[(index < 0 ? 0 : index) % kn_cpus_allowed()];
}

int kn_pool_bind_cpus(kn_pool *p, int first, mw_err *err) {
    if (first < 0) return mw_errf(err, "CPU binding: first CPU %d is negative", first);
    first %= kn_cpus_allowed(); /* so first + i cannot overflow */
    for (int i = 0; i < kn_pool_size(p); i++) {
        const int cpu = kn_cpu_at(first + i);
        const int rc = mw_thread_bind_cpu(i == 0 ? pthread_self() : p->threads[i - 1], cpu);
        if (rc != 0)
            return mw_errf(err, "cannot bind thread %d to CPU %d: %s", i, cpu, strerror(rc));
    }
    return 0;
}

void kn_pool_set_poll(kn_pool *p, int64_t us) {
    if (p) atomic_store_explicit(&p->spin_ns, (us < 0 ? 0 : us) * 1000, memory_order_relaxed);
}

int kn_pool_size(const kn_pool *p) {
    return p ? p->n : 1;
}

kn_pool *kn__pool_acquire(kn_pool *p) {
    if (!p || p == inside) return NULL;
    pthread_mutex_lock(&p->call_lock);
    return p;
}

void kn__pool_release(kn_pool *p) {
    if (p) pthread_mutex_unlock(&p->call_lock);
}

void *kn__pool_scratch(kn_pool *p, size_t bytes, void **tmp) {
    bytes = kn__align64(bytes ? bytes : 64);
    if (!p) {
        void *m = NULL;
        if (posix_memalign(&m, 64, bytes) != 0) m = NULL;
        *tmp = m;
        return m;
    }
    *tmp = NULL;
    if (bytes > p->scratch_cap) {
        /* with a gap on either side: what the threads read here (a job's prepared activations)
         * must not share a neighbourhood with what they write elsewhere (kn_slots_bytes) */
        void *m = NULL;
        if (bytes > SIZE_MAX - 2 * KN_SLOT_GAP ||
            posix_memalign(&m, 4096, bytes + 2 * KN_SLOT_GAP) != 0)
            return NULL;
        free(p->scratch);
        p->scratch = m;
        p->scratch_cap = bytes;
    }
    return (uint8_t *)p->scratch + KN_SLOT_GAP;
}

void kn__pool_run_locked(kn_pool *p, kn_task_fn fn, void *arg, int nth) {
    if (nth < 1) return;
    if (!p || p->n == 1 || nth == 1 || nth > KN_POOL_MAX_TASKS) {
        for (int i = 0; i < nth; i++) fn(arg, i, nth);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->next_task, (unsigned)nth << 16 | 1u); /* task 0 is the caller's */
    atomic_fetch_add(&p->gen, 1);
    if (!atomic_load_explicit(&p->wide, memory_order_relaxed)) atomic_store(&p->wide, true);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake_cv);
        pthread_mutex_unlock(&p->mu);
    }
    kn_pool *const outer = inside;
    inside = p;
    fn(arg, 0, nth);
    inside = outer;
    run_tasks(p);
    /* wait for the tasks other threads started */
    const int64_t t0 = (int64_t)mw_now_ns();
    for (unsigned i = 1; atomic_load(&p->active) != 0; i++) {
        if (spin_turn(i) &&
            (int64_t)mw_now_ns() - t0 > atomic_load_explicit(&p->spin_ns, memory_order_relaxed)) {
            pthread_mutex_lock(&p->mu);
            atomic_store(&p->done_waiter, 1);
            while (atomic_load(&p->active) != 0) pthread_cond_wait(&p->done_cv, &p->mu);
            atomic_store(&p->done_waiter, 0);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

void kn_pool_run(kn_pool *p, kn_task_fn fn, void *arg) {
    const int nth = kn_pool_size(p); /* nested in one of p's own tasks: nth tasks, run inline */
    kn_pool *q = kn__pool_acquire(p);
    if (q)
        kn__pool_run_locked(q, fn, arg, nth);
    else
        for (int i = 0; i < nth; i++) fn(arg, i, nth);
    kn__pool_release(q);
}

static size_t slot_stride(size_t n) {
    return (n + 4095) / 4096 * 4096 + KN_SLOT_GAP;
}

size_t kn_slots_bytes(size_t n, int nth) {
    return n && nth > 0 ? KN_SLOT_GAP + (size_t)nth * slot_stride(n) : 0;
}

void *kn_slot(void *base, size_t n, int i) {
    return n ? (uint8_t *)base + KN_SLOT_GAP + (size_t)i * slot_stride(n) : base;
}
