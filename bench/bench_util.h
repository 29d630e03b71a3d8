/* bench/bench_util.h — helpers every benchmark links (bench/bench_util.c): a monotonic clock,
 * order statistics, the command line (one option table per program, with --help), the machine's
 * last-level cache size, and the two ceilings measured in the same run as the figures compared
 * with them: a STREAM-style read bandwidth and the int8 dot-product rate of the kernels'
 * instruction. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Seconds on the project's monotonic clock (util/mw_time.h). */
double bu_now(void);
/* Sorts v (n values) and returns its minimum / median. */
double bu_min(double *v, int n);
double bu_median(double *v, int n);
/* Bytes of the last-level cache (sysconf / sysfs), or 32 MiB when unknown. */
size_t bu_llc_bytes(void);
/* Read bandwidth in GB/s (1e9 bytes/s): reps passes over a buffer of `bytes` with only the
 * hardware prefetchers and reps that also prefetch in software (as the streaming kernels do),
 * each pass timed in 8 MB slices (about one matmul call), each slice read by `threads` threads
 * summing their own contiguous shares (what a matmul's row split does); the best slice. */
double bu_read_bandwidth(size_t bytes, int threads, int reps);
/* The same probe, with the median slice beside the best: what the memory sustains over a run of
 * matmul-sized reads, where the best slice is what it reaches in its best moment. */
typedef struct bu_bw {
    double best, median;
} bu_bw;
bu_bw bu_read_probe(size_t bytes, int threads, int reps);
/* A read pass beside a measured figure: a buffer of `bytes` (on transparent huge pages, as pinned
 * weights are) read once through the caller's pool, in 8 MB slices, each a pool job like a
 * matmul call, with the kernels' software prefetch. A pass taken between two decode steps on the
 * same threads is the read bandwidth at that moment: on a VM whose memory switches between a slow
 * and a fast mode within seconds, a probe from another minute compares a step with the wrong mode.
 * NULL when out of memory. */
typedef struct bu_reader bu_reader;
struct kn_pool;
bu_reader *bu_reader_new(size_t bytes, struct kn_pool *pool);
double bu_reader_pass(bu_reader *r); /* GB/s of one whole pass */
void bu_reader_free(bu_reader *r);
/* The median over n steps of a step's read rate (`bytes` in step_s[k] seconds) over the mean of
 * the passes just before and after it (pass[k], pass[k + 1]; n + 1 of them, GB/s): how near the
 * memory of the same seconds a step streams. 0 when out of memory or a pass is 0. */
double bu_pass_fraction(double bytes, const double *step_s, const double *pass, int n);
/* The int8 multiply-adds per second (1e9 = one GMAC/s) that `threads` threads at once sustain with
 * the dot-product instruction of the active ISA's integer kernels (AVX-512: vpdpbusd on 512 bits,
 * AVX-VNNI: vpdpbusd on 256; AVX2: vpmaddubsw, vpmaddwd and vpaddd on 256): twelve independent
 * chains per thread, no memory operand, the best of 40 short runs (on a shared host, one no other
 * process interrupted). The ceiling a compute-bound phase is measured against; 0 where the active
 * ISA has no such instruction (the phase ratios are then not printed). *what names it. */
double bu_int8_dot_peak(int threads, const char **what);
/* ---- the command line ----------------------------------------------------------------------
 * Each program declares its options as a table; bu_args parses argv against it and prints the
 * usage from it, so every benchmark answers --help the same way and rejects what it does not
 * know. */
typedef enum bu_opt_kind {
    BU_FLAG,   /* no value: *(bool *)out = true */
    BU_INT,    /* an integer in [lo, hi]: *(int *)out */
    BU_NUM,    /* a number in [lo, hi]: *(double *)out */
    BU_STR,    /* any text: *(const char **)out */
    BU_INTS,   /* integers in [lo, hi], comma-separated: out is int[max], *count how many */
    BU_CHOICE, /* one of arg's '|'-separated words: *(int *)out = its index */
} bu_opt_kind;

typedef struct bu_opt {
    const char *name; /* "--layers" */
    bu_opt_kind kind;
    void *out;
    const char *arg;  /* the value as the usage shows it ("4,8,24", "PATH"); BU_CHOICE: the words */
    const char *help; /* one line */
    double lo, hi;    /* BU_INT, BU_NUM, BU_INTS: the accepted range */
    int *count;       /* BU_INTS */
    int max;          /* BU_INTS: room in out */
} bu_opt;

/* Table rows: an option without a range, one with a range, a list of integers. */
#define BU_OPT(name, kind, out, arg, help)                                                         \
    { name, kind, out, arg, help, 0, 0, NULL, 0 }
#define BU_OPT_IN(name, kind, out, arg, help, lo, hi)                                              \
    { name, kind, out, arg, help, lo, hi, NULL, 0 }
#define BU_OPT_INTS(name, out, n, max, arg, help, lo, hi)                                          \
    { name, BU_INTS, out, arg, help, lo, hi, n, max }

typedef struct bu_cli {
    const char *prog;     /* "bench_model" */
    const char *about;    /* what the program measures, for --help */
    const char *operands; /* what follows the options ("[VOCAB.gguf ...]"), NULL: nothing */
    const char *notes;    /* printed after the options (environment variables ...), or NULL */
    const bu_opt *opts;
    int n_opts;
} bu_cli;

/* bu_args' answer when the program should go on running. */
#define BU_RUN (-1)
/* Parses argv[1..] against cli's table: options first (a later one overrides an earlier one),
 * then the operands (*first: the index of the first, argc when none; "--" ends the options).
 * Returns BU_RUN, or the status main should return: 0 after --help / -h printed the usage on
 * stdout, 2 after a usage error, said on stderr. */
int bu_args(int argc, char **argv, const bu_cli *cli, int *first);

/* A short description of the CPU (model name, logical CPUs) for report headers. */
const char *bu_cpu_name(void);

#endif
