/* bench/bench_util.c — shared benchmark helpers (see bench_util.h). */
#include "bench/bench_util.h"
#include "kernels/kn.h"
#include "util/mw_time.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

double bu_now(void) {
    return mw_now_s();
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bu_min(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? v[0] : 0;
}

double bu_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0;
}

/* ---- the command line ------------------------------------------------------------------------ */

static void usage_line(const bu_cli *cli, FILE *f) {
    fprintf(f, "usage: %s%s%s%s\n", cli->prog, cli->n_opts ? " [OPTIONS]" : "",
            cli->operands ? " " : "", cli->operands ? cli->operands : "");
}

static void usage(const bu_cli *cli, FILE *f) {
    usage_line(cli, f);
    if (cli->about) fprintf(f, "%s\n", cli->about);
    fprintf(f, "\noptions:\n");
    for (int i = 0; i < cli->n_opts; i++) {
        const bu_opt *o = &cli->opts[i];
        char left[128];
        snprintf(left, sizeof left, "%s%s%s", o->name, o->kind == BU_FLAG ? "" : " ",
                 o->kind == BU_FLAG ? "" : o->arg);
        if (strlen(left) > 26)
            fprintf(f, "  %s\n  %-26s %s\n", left, "", o->help);
        else
            fprintf(f, "  %-26s %s\n", left, o->help);
    }
    fprintf(f, "  %-26s %s\n", "--help", "this text");
    if (cli->notes) fprintf(f, "\n%s\n", cli->notes);
}

/* The index of `word` among the '|'-separated `words`, or -1. */
static int choice(const char *words, const char *word) {
    const size_t n = strlen(word);
    int i = 0;
    for (const char *p = words; *p; i++) {
        const size_t len = strcspn(p, "|");
        if (len == n && !strncmp(p, word, n)) return i;
        p += len + (p[len] == '|');
    }
    return -1;
}

/* A whole string as a number in [lo, hi] (an integer when `integer`). */
static bool number_in(const char *s, double lo, double hi, bool integer, double *v) {
    char *end;
    errno = 0;
    *v = integer ? (double)strtoll(s, &end, 10) : strtod(s, &end);
    return end != s && !*end && !errno && *v >= lo && *v <= hi;
}

/* Comma-separated integers in [lo, hi] into out[max]: how many, or -1. */
static int ints_in(const char *s, int *out, int max, double lo, double hi) {
    int n = 0;
    char item[32];
    for (const char *p = s; n == 0 || *p; n++) {
        const size_t len = strcspn(p, ",");
        double v;
        if (n == max || len >= sizeof item) return -1;
        memcpy(item, p, len), item[len] = '\0';
        if (!number_in(item, lo, hi, true, &v)) return -1;
        out[n] = (int)v;
        p += len;
        if (*p == ',' && !*++p) return -1; /* a trailing comma */
    }
    return n;
}

/* Stores option o's value v; false (with the reason on stderr) when v is not one it takes. */
static bool set_value(const bu_cli *cli, const bu_opt *o, const char *v) {
    double x;
    int n = -1;
    switch (o->kind) {
    case BU_INT:
    case BU_NUM:
        if (!number_in(v, o->lo, o->hi, o->kind == BU_INT, &x)) break;
        if (o->kind == BU_INT)
            *(int *)o->out = (int)x;
        else
            *(double *)o->out = x;
        return true;
    case BU_STR:
        *(const char **)o->out = v;
        return true;
    case BU_INTS:
        if ((n = ints_in(v, o->out, o->max, o->lo, o->hi)) < 0) break;
        *o->count = n;
        return true;
    case BU_CHOICE:
        if ((n = choice(o->arg, v)) < 0) break;
        *(int *)o->out = n;
        return true;
    case BU_FLAG:
        break;
    }
    fprintf(stderr, "%s: %s takes ", cli->prog, o->name);
    if (o->kind == BU_CHOICE)
        fprintf(stderr, "one of %s", o->arg);
    else if (o->kind == BU_INTS)
        fprintf(stderr, "up to %d comma-separated integers in %.15g..%.15g", o->max, o->lo, o->hi);
    else
        fprintf(stderr, "%s in %.15g..%.15g", o->kind == BU_INT ? "an integer" : "a number", o->lo,
                o->hi);
    fprintf(stderr, ", not '%s'\n", v);
    return false;
}

int bu_args(int argc, char **argv, const bu_cli *cli, int *first) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(cli, stdout), 0;
        const bu_opt *o = NULL;
        for (int k = 0; k < cli->n_opts && !o; k++)
            if (!strcmp(a, cli->opts[k].name)) o = &cli->opts[k];
        if (!o) {
            fprintf(stderr, "%s: unknown option %s (--help lists them)\n", cli->prog, a);
            return 2;
        }
        if (o->kind == BU_FLAG) {
            *(bool *)o->out = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value: %s %s\n", cli->prog, a, a, o->arg);
            return 2;
        }
        if (!set_value(cli, o, argv[++i])) return 2;
    }
    if (i < argc && !cli->operands) {
        fprintf(stderr, "%s: unexpected argument %s\n", cli->prog, argv[i]);
        usage_line(cli, stderr);
        return 2;
    }
    if (first) *first = i;
    return BU_RUN;
}

size_t bu_llc_bytes(void) {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) return (size_t)l3;
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? (size_t)l2 : (size_t)32 << 20;
}

/* The read loop: 4 independent 64-bit sums over 32-byte strides keep enough loads in flight;
 * with AVX2 where the CPU has it (the kernels read with 256-bit loads too). `prefetch` > 0 also
 * prefetches that many bytes ahead in software, as the streaming kernels do: on some machines
 * (VMs especially) the hardware prefetchers alone leave bandwidth unused, and a kernel must not
 * be measured against less than the machine can deliver. */
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, size_t n,
                                                          size_t prefetch) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        if (prefetch) {
            _mm_prefetch((const char *)p + i + prefetch, _MM_HINT_T0);
            _mm_prefetch((const char *)p + i + prefetch + 64, _MM_HINT_T0);
        }
        a = _mm256_add_epi64(a, _mm256_load_si256((const __m256i *)(p + i)));
        b = _mm256_add_epi64(b, _mm256_load_si256((const __m256i *)(p + i + 32)));
        c = _mm256_add_epi64(c, _mm256_load_si256((const __m256i *)(p + i + 64)));
        d = _mm256_add_epi64(d, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, a);
    return out[0] + out[1] + out[2] + out[3];
}
#endif

static uint64_t read_plain(const uint8_t *p, size_t n) {
    const uint64_t *q = (const uint64_t *)p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= n / 8; i += 4)
        s0 += q[i], s1 += q[i + 1], s2 += q[i + 2], s3 += q[i + 3];
    return s0 + s1 + s2 + s3;
}

typedef struct bw_job {
    const uint8_t *buf; /* the slice being read */
    size_t bytes, prefetch;
    volatile uint64_t sink[64];
} bw_job;

static void bw_task(void *arg, int ith, int nth) {
    bw_job *j = arg;
    size_t share = (j->bytes / (size_t)nth) & ~(size_t)127;
    const uint8_t *p = j->buf + share * (size_t)ith;
    uint64_t s;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2"))
        s = read_avx2(p, share, j->prefetch);
    else
#endif
        s = read_plain(p, share);
    j->sink[ith & 63] = s;
}

/* Slices timed one by one: about what one matmul call reads, so that the best slice and a
 * kernel's best call are picked from samples of the same length (on a shared host the bandwidth
 * drifts within a pass, and a best-of-many over short calls would otherwise beat a best-of-few
 * over whole passes). */
#define BU_BW_SLICE ((size_t)8 << 20)

bu_bw bu_read_probe(size_t bytes, int threads, int reps) {
    bu_bw r = {0, 0};
    uint8_t *buf = NULL;
    const size_t slice = bytes < BU_BW_SLICE ? bytes : BU_BW_SLICE;
    const int n_slices = 2 * reps * (int)(bytes / slice);
    double *gbps = calloc((size_t)n_slices, sizeof *gbps);
    if (!gbps || posix_memalign((void **)&buf, 4096, bytes) != 0) {
        free(gbps);
        return r;
    }
    memset(buf, 1, bytes); /* fault every page in before timing */
    kn_pool *pool = kn_pool_create(threads);
    bw_job *j = calloc(1, sizeof *j);
    j->buf = buf;
    j->bytes = slice;
    kn_pool_run(pool, bw_task, j); /* warm-up */
    int n = 0;
    for (int rep = 0; rep < 2 * reps; rep++) { /* alternately without and with software prefetch */
        j->prefetch = rep % 2 ? 4096 : 0;
        for (size_t off = 0; off + slice <= bytes && n < n_slices; off += slice) {
            j->buf = buf + off;
            const double t0 = bu_now();
            kn_pool_run(pool, bw_task, j);
            const double dt = bu_now() - t0;
            gbps[n++] = (double)((slice / (size_t)threads) & ~(size_t)127) * threads / dt / 1e9;
        }
    }
    kn_pool_destroy(pool);
    free(j);
    free(buf);
    r.median = bu_median(gbps, n); /* sorts gbps */
    r.best = n ? gbps[n - 1] : 0;
    free(gbps);
    return r;
}

double bu_read_bandwidth(size_t bytes, int threads, int reps) {
    return bu_read_probe(bytes, threads, reps).best;
}

struct bu_reader {
    uint8_t *buf;
    size_t bytes;
    kn_pool *pool;
    bw_job job;
};

bu_reader *bu_reader_new(size_t bytes, kn_pool *pool) {
    const size_t huge = (size_t)2 << 20;
    bytes = (bytes + huge - 1) & ~(huge - 1);
    bu_reader *r = calloc(1, sizeof *r);
    if (!r || posix_memalign((void **)&r->buf, huge, bytes) != 0) {
        free(r);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    madvise(r->buf, bytes, MADV_HUGEPAGE);
#endif
    memset(r->buf, 1, bytes); /* fault every page in before timing */
    r->bytes = bytes;
    r->pool = pool;
    /* with or without the kernels' software prefetch, whichever reads faster here: a plain
     * stream needs none on some machines and loses a little to it, on others it needs it */
    double best[2] = {0, 0};
    for (int i = 0; i < 6; i++) {
        r->job.prefetch = i % 2 ? 4096 : 0;
        const double g = bu_reader_pass(r);
        if (g > best[i % 2]) best[i % 2] = g;
    }
    r->job.prefetch = best[1] > best[0] ? 4096 : 0;
    return r;
}

double bu_reader_pass(bu_reader *r) {
    const size_t slice = r->bytes < BU_BW_SLICE ? r->bytes : BU_BW_SLICE;
    const size_t nth = (size_t)kn_pool_size(r->pool);
    const size_t per_slice = ((slice / nth) & ~(size_t)127) * nth; /* what bw_task reads */
    r->job.bytes = slice;
    size_t read = 0;
    const double t0 = bu_now();
    for (size_t off = 0; off + slice <= r->bytes; off += slice) {
        r->job.buf = r->buf + off;
        kn_pool_run(r->pool, bw_task, &r->job);
        read += per_slice;
    }
    const double dt = bu_now() - t0;
    return dt > 0 ? (double)read / dt / 1e9 : 0;
}

double bu_pass_fraction(double bytes, const double *step_s, const double *pass, int n) {
    double *f = n > 0 ? malloc((size_t)n * sizeof *f) : NULL;
    if (!f) return 0;
    for (int k = 0; k < n; k++) {
        const double around = (pass[k] + pass[k + 1]) / 2;
        f[k] = around > 0 && step_s[k] > 0 ? bytes / step_s[k] / 1e9 / around : 0;
    }
    const double m = bu_median(f, n);
    free(f);
    return m;
}

void bu_reader_free(bu_reader *r) {
    if (!r) return;
    free(r->buf);
    free(r);
}

/* ---- int8 dot-product peak ------------------------------------------------------------------- */

#define BU_DOT_CHAINS 12 /* independent accumulators: enough to cover the latency */
/* short runs, many of them: on a shared host the best one is the one no other process interrupted
 */
#define BU_DOT_ITERS (1 << 16)
#define BU_DOT_RUNS  40

#if defined(__x86_64__)
/* The vpdpbusd forms' loops in asm: with 12 chains GCC 12 moved every chain through a scratch
 * register (and, with the 16 ymm registers of the VEX form, through the stack) at each iteration,
 * which cost the loops a fifth to a third of the instruction's rate. */
#define BU_CHAINS_ASM(op, r)                                                                       \
    op " %%" r "1, %%" r "0, %%" r "2\n\t" op " %%" r "1, %%" r "0, %%" r "3\n\t" op " %%" r       \
       "1, %%" r "0, %%" r "4\n\t" op " %%" r "1, %%" r "0, %%" r "5\n\t" op " %%" r "1, %%" r     \
       "0, %%" r "6\n\t" op " %%" r "1, %%" r "0, %%" r "7\n\t" op " %%" r "1, %%" r "0, %%" r     \
       "8\n\t" op " %%" r "1, %%" r "0, %%" r "9\n\t" op " %%" r "1, %%" r "0, %%" r "10\n\t" op   \
       " %%" r "1, %%" r "0, %%" r "11\n\t" op " %%" r "1, %%" r "0, %%" r "12\n\t" op " %%" r     \
       "1, %%" r "0, %%" r "13\n\t"
#define BU_DOT_ASM(name, features, op, r)                                                          \
    __attribute__((target(features))) static uint64_t name(long iters) {                           \
        uint64_t s = 0;                                                                            \
        __asm__ volatile(                                                                          \
            "vpxor %%ymm2, %%ymm2, %%ymm2\n\t" BU_CHAINS_ASM(                                      \
                "vpor", "ymm") "vpcmpeqb %%ymm0, %%ymm0, %%ymm0\n\tvpabsb %%ymm0, %%ymm1\n\t"      \
                               "test %[n], %[n]\n\tjle 2f\n1:\n\t" BU_CHAINS_ASM(                  \
                                   op, r) "dec %[n]\n\tjnz 1b\n2:\n\t"                             \
                                          "vpaddd %%ymm3, %%ymm2, %%ymm2\n\tvpaddd %%ymm13, "      \
                                          "%%ymm2, %%ymm2\n\t"                                     \
                                          "vmovd %%xmm2, %k[s]\n\tvzeroupper"                      \
            : [n] "+r"(iters), [s] "+r"(s)                                                         \
            :                                                                                      \
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",      \
              "xmm10", "xmm11", "xmm12", "xmm13", "cc");                                           \
        return s;                                                                                  \
    }
BU_DOT_ASM(dot_ymm, "avx2,avxvnni", "%{vex%} vpdpbusd", "ymm")
BU_DOT_ASM(dot_zmm, "avx512f,avx512bw,avx512vnni", "vpdpbusd", "zmm")
/* AVX2 has no fused u8 x s8 dot product: the kernels' equivalent of one vpdpbusd is vpmaddubsw
 * (pairs to int16), vpmaddwd by ones (pairs to int32) and vpaddd, three instructions for the same
 * 32 multiply-adds; its 12 chains, the operands, the ones and a product take all 16 registers, so
 * the loop is asm too. */
#define BU_MADD_ASM(i)                                                                             \
    "vpmaddubsw %%ymm0, %%ymm1, %%ymm3\n\tvpmaddwd %%ymm2, %%ymm3, %%ymm3\n\t"                     \
    "vpaddd %%ymm3, %%ymm" #i ", %%ymm" #i "\n\t"
__attribute__((target("avx2"))) static uint64_t dot_avx2(long iters) {
    uint64_t s = 0;
    __asm__ volatile(
        "vpxor %%ymm4, %%ymm4, %%ymm4\n\tvmovdqa %%ymm4, %%ymm5\n\t"
        "vmovdqa %%ymm4, %%ymm6\n\tvmovdqa %%ymm4, %%ymm7\n\tvmovdqa %%ymm4, %%ymm8\n\t"
        "vmovdqa %%ymm4, %%ymm9\n\tvmovdqa %%ymm4, %%ymm10\n\tvmovdqa %%ymm4, %%ymm11\n\t"
        "vmovdqa %%ymm4, %%ymm12\n\tvmovdqa %%ymm4, %%ymm13\n\tvmovdqa %%ymm4, %%ymm14\n\t"
        "vmovdqa %%ymm4, %%ymm15\n\t"
        "vpcmpeqb %%ymm0, %%ymm0, %%ymm0\n\tvpabsb %%ymm0, %%ymm1\n\t"
        "vpcmpeqw %%ymm2, %%ymm2, %%ymm2\n\tvpsrlw $15, %%ymm2, %%ymm2\n\t"
        "test %[n], %[n]\n\tjle 2f\n1:\n\t" BU_MADD_ASM(4) BU_MADD_ASM(5) BU_MADD_ASM(6)
            BU_MADD_ASM(7) BU_MADD_ASM(8) BU_MADD_ASM(9) BU_MADD_ASM(10) BU_MADD_ASM(11)
                BU_MADD_ASM(12) BU_MADD_ASM(13) BU_MADD_ASM(14) BU_MADD_ASM(
                    15) "dec %[n]\n\tjnz 1b\n2:\n\t"
                        "vpaddd %%ymm5, %%ymm4, %%ymm4\n\tvpaddd %%ymm15, %%ymm4, %%ymm4\n\t"
                        "vmovd %%xmm4, %k[s]\n\tvzeroupper"
        : [n] "+r"(iters), [s] "+r"(s)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");
    return s;
}
#endif

/* The dot-product instruction of each ISA's integer kernels: one row per ISA that has one. */
typedef struct dot_form {
    kn_isa isa;
    const char *name;
    double macs; /* int8 multiply-adds per instruction */
    uint64_t (*run)(long iters);
} dot_form;

static const dot_form dot_forms[] = {
#if defined(__x86_64__)
    {KN_ISA_AVX512, "vpdpbusd zmm", 64, dot_zmm},
    {KN_ISA_AVXVNNI, "vpdpbusd ymm", 32, dot_ymm},
    {KN_ISA_AVX2, "vpmaddubsw+vpmaddwd ymm", 32, dot_avx2},
#endif
    {KN_ISA_SCALAR, "none", 0, NULL},
};

typedef struct dot_job {
    const dot_form *form;
    volatile uint64_t sink[64];
} dot_job;

static void dot_task(void *arg, int ith, int nth) {
    dot_job *j = arg;
    (void)nth;
    j->sink[ith & 63] = j->form->run(BU_DOT_ITERS);
}

double bu_int8_dot_peak(int threads, const char **what) {
    const kn_isa isa = kn_isa_active();
    const dot_form *f = dot_forms;
    while (f->run && f->isa != isa) f++;
    *what = f->name;
    if (!f->run) return 0;
    dot_job j = {.form = f};
    kn_pool *pool = kn_pool_create(threads);
    double best = 0;
    for (int r = 0; r < BU_DOT_RUNS; r++) { /* the first warms the clocks up */
        const double t0 = bu_now();
        kn_pool_run(pool, dot_task, &j);
        const double dt = bu_now() - t0;
        const double rate =
            (double)BU_DOT_ITERS * BU_DOT_CHAINS * f->macs * kn_pool_size(pool) / dt;
        if (r > 0 && rate > best) best = rate;
    }
    kn_pool_destroy(pool);
    return best;
}

const char *bu_cpu_name(void) {
    static char name[256];
    if (name[0]) return name;
    snprintf(name, sizeof name, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                const char *c = strchr(line, ':');
                if (c) snprintf(name, sizeof name, "%s", c + 2);
                name[strcspn(name, "\n")] = '\0';
                break;
            }
        }
        fclose(f);
    }
    size_t len = strlen(name);
    snprintf(name + len, sizeof name - len, ", %ld logical CPUs", sysconf(_SC_NPROCESSORS_ONLN));
    return name;
}
