/* tests/unit/test_kn_pool.c — the thread pool: every task of every job runs exactly once,
 * with parks (kn_pool_park on one pool, and on every pool) and wakes (kn_pool_wake) between
 * jobs, and parked workers come back for the next job; a wake gets them up only after jobs that
 * used them; kn_pool_bind_cpus gives the caller and
 * each worker one CPU, in order from the first asked for, wrapping; per-thread scratch slots hold
 * their bytes inside the buffer, aligned, and at least 64 KiB from each other and its ends. */
#include <dirent.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kernels/kn.h"

#define MAX_TASKS 256

typedef struct job {
    atomic_int runs[MAX_TASKS];
    atomic_int seen_nth; /* nth as the tasks saw it; -1 on a mismatch */
    pthread_t threads[MAX_TASKS];
    long sleep_ns; /* per task, so a woken worker has time to claim some */
} job;

static void task(void *arg, int ith, int nth) {
    job *j = arg;
    int want = 0;
    if (!atomic_compare_exchange_strong(&j->seen_nth, &want, nth) && want != nth)
        atomic_store(&j->seen_nth, -1);
    atomic_fetch_add(&j->runs[ith], 1);
    j->threads[ith] = pthread_self();
    if (j->sleep_ns) {
        struct timespec ts = {0, j->sleep_ns};
        nanosleep(&ts, NULL);
    }
}

/* Runs one job on p and checks every task ran once; returns how many threads took part. */
static int run_job(kn_pool *p, long sleep_ns) {
    static job j;
    memset(&j, 0, sizeof j);
    j.sleep_ns = sleep_ns;
    kn_pool_run(p, task, &j);
    int nth = kn_pool_size(p);
    assert_int_equal(atomic_load(&j.seen_nth), nth);
    for (int i = 0; i < nth; i++) assert_int_equal(atomic_load(&j.runs[i]), 1);
    for (int i = nth; i < MAX_TASKS; i++) assert_int_equal(atomic_load(&j.runs[i]), 0);
    int distinct = 0;
    for (int i = 0; i < nth; i++) {
        int k = 0;
        while (k < i && !pthread_equal(j.threads[k], j.threads[i])) k++;
        distinct += k == i;
    }
    return distinct;
}

static void test_jobs_with_parks(void **state) {
    (void)state;
    static const int sizes[] = {1, 2, 3, 8};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        kn_pool *p = kn_pool_create(sizes[s]), *other = kn_pool_create(2);
        assert_non_null(p);
        assert_int_equal(kn_pool_size(p), sizes[s]);
        for (int k = 0; k < 300; k++) {
            run_job(p, 0);
            if (k % 3 == 1) kn_pool_park(p);
            if (k % 7 == 2) kn_pool_park(NULL);
            if (k % 11 == 3) kn_pool_park(other); /* another pool's park changes nothing here */
        }
        kn_pool_destroy(other);
        kn_pool_destroy(p);
    }
    kn_pool_park(NULL); /* with no pool at all */
}

/* After a park the workers sleep; the next job must still get them back: with tasks that take a
 * while, a woken worker claims some of them. */
static void test_parked_workers_return(void **state) {
    (void)state;
    kn_pool *p = kn_pool_create(4);
    assert_non_null(p);
    for (int k = 0; k < 3; k++) {
        kn_pool_park(k == 1 ? NULL : p);
        struct timespec ts = {0, 5 * 1000 * 1000}; /* let them reach their sleep */
        nanosleep(&ts, NULL);
        assert_true(run_job(p, 20 * 1000 * 1000) > 1);
    }
    kn_pool_destroy(p);
}

/* kn_pool_wake gets sleeping workers spinning without a job; jobs before and after stay whole,
 * and waking a pool of one, NULL or a pool nobody sleeps in is harmless. */
static void test_wake(void **state) {
    (void)state;
    kn_pool_wake(NULL);
    kn_pool *one = kn_pool_create(1), *p = kn_pool_create(3);
    assert_non_null(p);
    kn_pool_wake(one);
    run_job(one, 0);
    for (int k = 0; k < 20; k++) {
        kn_pool_park(p);
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
        kn_pool_wake(p);
        if (k % 2) kn_pool_wake(p);           /* twice: the second finds them awake */
        if (k % 4 == 3) nanosleep(&ts, NULL); /* spin times out: asleep again */
        assert_true(run_job(p, k % 5 == 0 ? 20 * 1000 * 1000 : 0) >= 1);
    }
    kn_pool_park(p);
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    kn_pool_wake(p);
    assert_true(run_job(p, 20 * 1000 * 1000) > 1);
    kn_pool_destroy(p);
    kn_pool_destroy(one);
}

/* A pool that never polls: workers sleep after every job (and a wake leaves them asleep), yet
 * every job is whole and a job with long tasks still gets them back. */
static void test_no_poll(void **state) {
    (void)state;
    kn_pool *p = kn_pool_create(3);
    assert_non_null(p);
    kn_pool_set_poll(p, 0);
    kn_pool_set_poll(NULL, 0); /* harmless */
    for (int k = 0; k < 200; k++) {
        if (k % 3 == 0) kn_pool_wake(p);
        if (k % 5 == 0) kn_pool_park(p);
        assert_true(run_job(p, k % 50 == 0 ? 20 * 1000 * 1000 : 0) >= 1);
    }
    assert_true(run_job(p, 20 * 1000 * 1000) > 1);
    kn_pool_set_poll(p, 200); /* and back */
    assert_true(run_job(p, 20 * 1000 * 1000) > 1);
    kn_pool_destroy(p);
}

/* The threads of this process before the pool was made: the caller's, and any a runtime keeps
 * (qemu-user, which runs the arm64 check, has its own threads in /proc/self/task). */
#define MAX_PRIOR 64
static long prior_tid[MAX_PRIOR];
static int n_prior;

static void note_prior_threads(void) {
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    n_prior = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const long tid = atol(e->d_name);
        if (tid > 0 && n_prior < MAX_PRIOR) prior_tid[n_prior++] = tid;
    }
    closedir(d);
}

/* The state letter (R running or runnable, S sleeping, ...) of the one thread of this process
 * made since note_prior_threads: the pool's worker. */
static char other_thread_state(void) {
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    char state = '?';
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const long tid = atol(e->d_name);
        bool prior = tid <= 0;
        for (int i = 0; i < n_prior && !prior; i++) prior = tid == prior_tid[i];
        if (prior) continue;
        char path[64], buf[256];
        snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        const size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        const char *paren = strrchr(buf, ')'); /* "tid (name) S ..." */
        assert_non_null(paren);
        state = paren[2];
        n++;
    }
    closedir(d);
    assert_int_equal(n, 1);
    return state;
}

/* Waits (up to 2 s: a loaded machine may keep the worker off a core) for the worker to go to
 * sleep; its state then. */
static char worker_settles(void) {
    const struct timespec step = {0, 10 * 1000 * 1000};
    char st = other_thread_state();
    for (int i = 0; i < 200 && st != 'S'; i++) {
        nanosleep(&step, NULL);
        st = other_thread_state();
    }
    return st;
}

/* kn_pool_wake gets a parked worker up only when a job between the last two parks used it: after
 * parks with no job between (as after a node's batches too small to split), the worker stays
 * asleep; after one that ran a job, it gets up and polls (for a second here, so it is seen). */
static void test_wake_after_wide(void **state) {
    (void)state;
    note_prior_threads();
    kn_pool *p = kn_pool_create(2);
    assert_non_null(p);
    kn_pool_set_poll(p, 1000 * 1000);
    const struct timespec ts = {0, 20 * 1000 * 1000};
    run_job(p, 0);
    nanosleep(&ts, NULL); /* the worker has seen the job (a park before that would not count) */
    kn_pool_park(p);
    kn_pool_park(p); /* nothing between the two */
    assert_int_equal(worker_settles(), 'S');
    kn_pool_wake(p);
    nanosleep(&ts, NULL); /* woken, it would poll for a second: R */
    assert_int_equal(other_thread_state(), 'S');
    run_job(p, 0);
    nanosleep(&ts, NULL);
    kn_pool_park(p);
    assert_int_equal(worker_settles(), 'S');
    kn_pool_wake(p);
    nanosleep(&ts, NULL);
    assert_int_equal(other_thread_state(), 'R');
    kn_pool_park(p);
    assert_true(run_job(p, 20 * 1000 * 1000) > 1); /* and jobs get it as ever */
    kn_pool_destroy(p);
}

/* The CPUs a task's thread may run on: one CPU id, or -1 if it may run on several. */
static atomic_int bound_cpu[MAX_TASKS];
static void affinity_task(void *arg, int ith, int nth) {
    (void)nth;
    cpu_set_t set;
    int cpu = -2;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        cpu = CPU_COUNT(&set) == 1 ? -1 : -3;
        for (int c = 0; c < CPU_SETSIZE && cpu == -1; c++)
            if (CPU_ISSET(c, &set)) cpu = c;
    }
    atomic_store(&bound_cpu[ith], cpu);
    atomic_store(&((atomic_int *)arg)[ith], 1);
    struct timespec ts = {0, 20 * 1000 * 1000}; /* so that most threads claim a task */
    nanosleep(&ts, NULL);
}

/* The CPU of every other thread of this process that may run on one CPU only (at most cap). */
static int other_bound_threads(int *cpu, int cap) {
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    const long self = syscall(SYS_gettid);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        const long tid = atol(e->d_name);
        cpu_set_t set;
        if (tid <= 0 || tid == self || sched_getaffinity((pid_t)tid, sizeof set, &set) != 0 ||
            CPU_COUNT(&set) != 1)
            continue;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) cpu[n++] = c;
    }
    closedir(d);
    return n;
}

/* Removes one occurrence of v from the n values of a; whether there was one. */
static bool take(int *a, int *n, int v) {
    for (int i = 0; i < *n; i++)
        if (a[i] == v) {
            a[i] = a[--*n];
            return true;
        }
    return false;
}

static void test_bind_cpus(void **state) {
    (void)state;
    cpu_set_t saved;
    assert_int_equal(sched_getaffinity(0, sizeof saved, &saved), 0);
    int cpus[CPU_SETSIZE], n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &saved)) cpus[n++] = c;
    assert_int_equal(kn_cpus_allowed(), n);
    for (int i = 0; i < 3 * n + 2; i++) assert_int_equal(kn_cpu_at(i), cpus[i % n]);

    kn_pool *p = kn_pool_create(3);
    assert_int_equal(kn_pool_bind_cpus(p, -1, NULL), -1);
    assert_int_equal(kn_pool_bind_cpus(p, 1, NULL), 0);
    /* the caller (task 0 is always its own): allowed CPU 1 (mod n); the two workers: 2 and 3
     * (mod n), read from /proc since which thread claims which other task is not fixed */
    atomic_int ran[MAX_TASKS] = {0};
    kn_pool_run(p, affinity_task, ran);
    assert_int_equal(atomic_load(&bound_cpu[0]), cpus[1 % n]);
    int got[64], n_got = other_bound_threads(got, 64);
    assert_true(take(got, &n_got, cpus[2 % n]));
    assert_true(take(got, &n_got, cpus[3 % n]));
    for (int i = 0; i < 3; i++) assert_int_equal(atomic_load(&ran[i]), 1);
    /* Binding again never narrows the set it starts from: the caller now runs on one CPU, yet
     * first = 0 still means the first CPU the process was allowed. */
    assert_int_equal(kn_pool_bind_cpus(p, 0, NULL), 0);
    assert_int_equal(kn_cpus_allowed(), n);
    kn_pool_run(p, affinity_task, ran);
    assert_int_equal(atomic_load(&bound_cpu[0]), cpus[0]);
    /* a first CPU past the count wraps */
    assert_int_equal(kn_pool_bind_cpus(p, 5 * n + 1, NULL), 0);
    kn_pool_run(p, affinity_task, ran);
    assert_int_equal(atomic_load(&bound_cpu[0]), cpus[1 % n]);
    assert_true(run_job(p, 0) >= 1); /* jobs still whole */
    kn_pool_destroy(p);
    assert_int_equal(sched_setaffinity(0, sizeof saved, &saved), 0);
}

static void test_slots_apart(void **state) {
    (void)state;
    assert_int_equal(kn_slots_bytes(0, 4), 0);
    const size_t ns[] = {1, 64, 4095, 4096, 24768, 1 << 20};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
        for (int nth = 1; nth <= 5; nth++) {
            const size_t n = ns[k], total = kn_slots_bytes(n, nth);
            uint8_t *base = (uint8_t *)(uintptr_t)0x100000; /* addresses only, never touched */
            size_t prev_end = 0;
            for (int i = 0; i < nth; i++) {
                const size_t off = (size_t)((uint8_t *)kn_slot(base, n, i) - base);
                assert_int_equal(off % 64, 0);
                assert_true(off >= prev_end + 64 * 1024); /* from the start, or the slot before */
                prev_end = off + n;
            }
            assert_true(total >= prev_end + 64 * 1024);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_with_parks),
        cmocka_unit_test(test_parked_workers_return),
        cmocka_unit_test(test_wake),
        cmocka_unit_test(test_no_poll),
        cmocka_unit_test(test_bind_cpus),
        cmocka_unit_test(test_wake_after_wide),
        cmocka_unit_test(test_slots_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
