/* bench/bench_llama.h — llama.cpp as a reference measured in the same run: runs the `llama-bench`
 * the user names on the same GGUF file a benchmark measures, with the same thread counts, and
 * reads its JSON report (`-o json`); bl_capture runs any such reference program (bench_kernels'
 * ggml matmul driver too). Nothing of llama.cpp is built or linked here: the binaries are paths
 * given at run time. */
#ifndef BENCH_LLAMA_H
#define BENCH_LLAMA_H

#include <stdbool.h>
#include <stddef.h>

/* One llama-bench invocation: a prompt-processing test (n_prompt > 0, n_gen 0) or a generation
 * test (n_gen > 0, n_prompt 0) after n_depth tokens already in the context, for every thread
 * count, reps samples each. */
typedef struct bl_params {
    const char *bin;   /* llama-bench */
    const char *model; /* GGUF file */
    const int *threads;
    int n_threads;
    int n_prompt, n_gen, n_depth, reps;
    int flash_attn; /* -fa: 1 on, 0 off, -1 auto */
    bool mmap;      /* false: -mmp 0, weights read into memory instead of mapped */
} bl_params;

/* One test's figures (tokens/s). */
typedef struct bl_result {
    int threads, n_prompt, n_gen, n_depth;
    double avg_ts, best_ts; /* mean and best over the samples */
} bl_result;

/* What llama-bench says of itself and its settings (from its first result). */
typedef struct bl_info {
    char commit[48];     /* build_commit */
    char flash_attn[8];  /* "on", "off", "auto" as it ran */
    char load[16];       /* load_mode, or "mmap" / "no mmap" from older builds' use_mmap */
    char model_type[96]; /* how it read the model (model_type) */
    char cpu[128];       /* cpu_info */
} bl_info;

/* Runs llama-bench once. Fills up to max results (one per thread count, in p->threads order)
 * and *info (may be NULL); returns the number of results, or -1 with a message in err (the
 * binary's exit status and the tail of its stderr, or what was wrong with its output). */
int bl_run(const bl_params *p, bl_result *out, int max, bl_info *info, char *err, size_t errlen);

/* llama-bench on a file as our model benchmarks run theirs: prefill of n_prompt tokens from an
 * empty context, then n_gen decode steps after the prompt (-d), on one thread count, weights read
 * into memory (-mmp 0), flash attention on. Best tokens/s of each into *pp and *tg; -1 with a line
 * on stderr naming who (e.g. "bench_kimi") when llama-bench fails. */
int bl_prefill_decode(const char *bin, const char *model, int threads, int n_prompt, int n_gen,
                      double *pp, double *tg, bl_info *info, const char *who);

/* Runs argv (argv[0] a path) to its end; returns its stdout (malloc'ed, NUL-terminated, *len
 * bytes) when it exits 0, else NULL with its exit status and the tail of its stderr in err. */
char *bl_capture(char *const argv[], size_t *len, char *err, size_t errlen);

/* Parses llama-bench's JSON output (an array of test objects; bl_run's second half). */
int bl_parse(const char *json, size_t len, bl_result *out, int max, bl_info *info, char *err,
             size_t errlen);

#endif
