/* bench/bench_llama.c — runs llama.cpp's llama-bench (or another reference program) and reads its
 * JSON report (see bench_llama.h). The child's stdout (the JSON) comes through a pipe; its stderr
 * (model loading chatter) goes to an anonymous temporary file, shown only when the run fails. */
#include "bench/bench_llama.h"

#include <errno.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define BL_MAX_OUTPUT ((size_t)16 << 20) /* llama-bench's JSON is a few kB per test */

/* "1,2" from the thread counts. */
static void join_ints(const int *v, int n, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, i ? ",%d" : "%d", v[i]);
}

/* The last `len - 1` bytes of what the child wrote to stderr, from its last complete lines. */
static void stderr_tail(FILE *f, char *out, size_t len) {
    out[0] = '\0';
    if (!f || len < 2 || fseek(f, 0, SEEK_END)) return;
    long size = ftell(f), from = size > (long)len - 1 ? size - (long)len + 1 : 0;
    if (fseek(f, from, SEEK_SET)) return;
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    char *nl = from > 0 ? strchr(out, '\n') : NULL; /* drop a partial first line */
    if (nl) memmove(out, nl + 1, strlen(nl + 1) + 1);
    for (char *p = out; *p; p++)
        if (*p == '\n' && p[1]) *p = '|';
}

/* Reads fd to its end into a malloc'ed buffer (NUL-terminated), at most BL_MAX_OUTPUT bytes. */
static char *read_all(int fd, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap >= BL_MAX_OUTPUT) break;
            char *grown = realloc(buf, 2 * cap + 1);
            if (!grown) break;
            buf = grown, cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

/* Spawns argv with stdout to a pipe and stderr to errf; returns its stdout and exit status. */
static char *spawn_capture(char *const argv[], FILE *errf, size_t *len, int *status, char *err,
                           size_t errlen) {
    int pfd[2];
    if (pipe(pfd)) return snprintf(err, errlen, "pipe: %s", strerror(errno)), NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, fileno(errf), STDERR_FILENO);
    posix_spawn_file_actions_addclose(&fa, pfd[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (rc) {
        close(pfd[0]);
        snprintf(err, errlen, "cannot run %s: %s", argv[0], strerror(rc));
        return NULL;
    }
    char *out = read_all(pfd[0], len);
    close(pfd[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    return out;
}

char *bl_capture(char *const argv[], size_t *len, char *err, size_t errlen) {
    FILE *errf = tmpfile();
    if (!errf) return snprintf(err, errlen, "tmpfile: %s", strerror(errno)), NULL;
    int status = 0;
    char *out = spawn_capture(argv, errf, len, &status, err, errlen);
    if (out && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        char tail[400];
        stderr_tail(errf, tail, sizeof tail);
        snprintf(err, errlen, "%s: %s %d; its stderr ends: %s", argv[0],
                 WIFEXITED(status) ? "exit status" : "killed by signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), tail);
        free(out);
        out = NULL;
    }
    fclose(errf);
    return out;
}

int bl_run(const bl_params *p, bl_result *out, int max, bl_info *info, char *err, size_t errlen) {
    char threads[64], np[16], ng[16], nd[16], reps[16];
    join_ints(p->threads, p->n_threads, threads, sizeof threads);
    snprintf(np, sizeof np, "%d", p->n_prompt);
    snprintf(ng, sizeof ng, "%d", p->n_gen);
    snprintf(nd, sizeof nd, "%d", p->n_depth);
    snprintf(reps, sizeof reps, "%d", p->reps);
    char *const argv[] = {(char *)p->bin,
                          "-m",
                          (char *)p->model,
                          "-t",
                          threads,
                          "-p",
                          np,
                          "-n",
                          ng,
                          "-d",
                          nd,
                          "-r",
                          reps,
                          "-fa",
                          p->flash_attn < 0 ? "auto"
                          : p->flash_attn   ? "1"
                                            : "0",
                          "-mmp",
                          p->mmap ? "1" : "0",
                          "-o",
                          "json",
                          NULL};
    size_t len = 0;
    char *json = bl_capture(argv, &len, err, errlen);
    int n = json ? bl_parse(json, len, out, max, info, err, errlen) : -1;
    free(json);
    return n;
}

/* ---- its JSON ---------------------------------------------------------------------------------
 */

static int int_field(const json_t *o, const char *key, int dflt) {
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

static void str_field(const json_t *o, const char *key, char *buf, size_t len) {
    const json_t *v = json_object_get(o, key);
    snprintf(buf, len, "%s", json_is_string(v) ? json_string_value(v) : "?");
}

/* Settings as the run reports them; older builds give booleans where newer ones give modes. */
static void read_info(const json_t *o, bl_info *info) {
    str_field(o, "build_commit", info->commit, sizeof info->commit);
    str_field(o, "model_type", info->model_type, sizeof info->model_type);
    str_field(o, "cpu_info", info->cpu, sizeof info->cpu);
    const json_t *fa = json_object_get(o, "flash_attn");
    int fav = json_is_integer(fa) ? (int)json_integer_value(fa) : json_is_true(fa) ? 1 : 0;
    snprintf(info->flash_attn, sizeof info->flash_attn, "%s",
             fav < 0 ? "auto"
             : fav   ? "on"
                     : "off");
    const json_t *lm = json_object_get(o, "load_mode"), *mm = json_object_get(o, "use_mmap");
    if (json_is_string(lm))
        snprintf(info->load, sizeof info->load, "%s", json_string_value(lm));
    else
        snprintf(info->load, sizeof info->load, "%s", json_is_false(mm) ? "no mmap" : "mmap");
}

int bl_parse(const char *json, size_t len, bl_result *out, int max, bl_info *info, char *err,
             size_t errlen) {
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!json_is_array(root)) {
        snprintf(err, errlen, "llama-bench output is not a JSON array (%s)",
                 root ? "another JSON value" : je.text);
        json_decref(root);
        return -1;
    }
    int n = 0;
    for (size_t i = 0; i < json_array_size(root); i++) {
        const json_t *t = json_array_get(root, i), *avg = json_object_get(t, "avg_ts");
        const json_t *samples = json_object_get(t, "samples_ts");
        if (!json_is_object(t) || !json_is_number(avg) || int_field(t, "n_threads", 0) < 1) {
            snprintf(err, errlen, "llama-bench result %zu lacks n_threads or avg_ts", i);
            json_decref(root);
            return -1;
        }
        if (n == max) break;
        bl_result *r = &out[n++];
        *r = (bl_result){.threads = int_field(t, "n_threads", 0),
                         .n_prompt = int_field(t, "n_prompt", 0),
                         .n_gen = int_field(t, "n_gen", 0),
                         .n_depth = int_field(t, "n_depth", 0),
                         .avg_ts = json_number_value(avg)};
        r->best_ts = r->avg_ts;
        for (size_t k = 0; k < json_array_size(samples); k++) {
            double s = json_number_value(json_array_get(samples, k));
            if (s > r->best_ts) r->best_ts = s;
        }
        if (info && n == 1) read_info(t, info);
    }
    json_decref(root);
    if (n == 0) snprintf(err, errlen, "llama-bench reported no test");
    return n ? n : -1;
}

int bl_prefill_decode(const char *bin, const char *model, int threads, int n_prompt, int n_gen,
                      double *pp, double *tg, bl_info *info, const char *who) {
    bl_params p = {.bin = bin,
                   .model = model,
                   .threads = &threads,
                   .n_threads = 1,
                   .n_prompt = n_prompt,
                   .reps = 1,
                   .flash_attn = 1,
                   .mmap = false};
    bl_result res;
    char err[512];
    if (bl_run(&p, &res, 1, info, err, sizeof err) != 1)
        return fprintf(stderr, "%s: llama-bench: %s\n", who, err), -1;
    *pp = res.best_ts;
    p.n_prompt = 0, p.n_gen = n_gen, p.n_depth = n_prompt;
    if (bl_run(&p, &res, 1, NULL, err, sizeof err) != 1)
        return fprintf(stderr, "%s: llama-bench: %s\n", who, err), -1;
    *tg = res.best_ts;
    return 0;
}
