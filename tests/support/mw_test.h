/* tests/support/mw_test.h — helpers shared by the cmocka tests: fixture paths, whole-file reads,
 * temporary directories, float comparisons that report where they fail, and spawning programs. */
#ifndef MW_TEST_H
#define MW_TEST_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>

/* Path of a file under tests/fixtures/ (or $MW_FIXTURES). The paths both hand out stay valid for
 * the life of the program, so several may be used at once (mwt_bin twice in one argv). */
const char *mwt_fixture(const char *rel);
/* Path of a program: $MW_BIN/name when set (the ASan builds under `make test`), else bin/name. */
const char *mwt_bin(const char *name);
/* Path of a benchmark program (the optimised build): build/rel/bench/name. */
const char *mwt_bench_bin(const char *name);
/* Path of a file of the repository (a script: "tests/run.sh"). */
const char *mwt_repo_path(const char *rel);

/* Reads a whole file; returns a malloc'ed buffer (NUL-terminated) or NULL. */
void *mwt_read_file(const char *path, size_t *len);
/* Writes len bytes; returns 0 or -1. */
int mwt_write_file(const char *path, const void *data, size_t len);
/* Writes a program (a shell script standing in for a reference tool) and makes it executable. */
int mwt_write_script(const char *path, const char *text);

/* Creates a fresh temporary directory; returns a malloc'ed path. mwt_rmrf removes a tree. */
char *mwt_tmpdir(const char *tag);
void mwt_rmrf(const char *path);

/* A cmocka setup/teardown pair giving a whole group (cmocka_run_group_tests) or one test
 * (cmocka_unit_test_setup_teardown) a fresh temporary directory named after the program: its path
 * is *state (cmocka hands a group's state to each of its tests) and mwt_tmp until the teardown
 * removes the tree. A group setup that does more calls mwt_tmp_setup first. */
extern char *mwt_tmp;
int mwt_tmp_setup(void **state);
int mwt_tmp_teardown(void **state);

/* Asserts that a tensor has the type (ggml name, any case), shape and byte count its entry of a
 * fixture's tensor_types.json states ({"ggml_type": .., "ne": [..], "n_bytes": ..}). */
struct json_t;
void mwt_check_tensor_entry(const struct json_t *entry, const char *type_name, int n_dims,
                            const int64_t *ne, uint64_t nbytes);

/* Compares n floats: passes when |a-b| <= abs_tol + rel_tol*|b| everywhere. On failure prints the
 * first and the worst offending index with `what`, and returns the max abs difference (>= 0).
 * Returns -1 on success. Use with assert_true(mwt_close(...) < 0). */
double mwt_close(const char *what, const float *a, const float *b, size_t n, double abs_tol,
                 double rel_tol);
/* Max |a-b| over n floats. */
double mwt_max_abs_diff(const float *a, const float *b, size_t n);

/* Runs argv (argv[0] is a path) to completion, capturing stdout and stderr into malloc'ed strings
 * (either may be NULL to discard). Returns the exit status, 128+signal when killed, -1 on error.
 * timeout_ms <= 0 means none; on timeout the child is killed and -2 is returned. */
int mwt_run(char *const argv[], char **out, char **err, int timeout_ms);
/* Starts argv in the background (stdout/stderr to log_path, or inherited when NULL); returns pid.
 * A child mwt_wait has not reaped when the program ends (a failed test's, or after a sanitizer
 * report) is killed then, with its process group when it leads one; mwt_run's child too. */
pid_t mwt_spawn(char *const argv[], const char *log_path);
/* The same, the child leading a process group of its own (as a shell starts a foreground job), so
 * kill(-pid, sig) reaches it and whatever it starts, as a terminal's Ctrl-C does. */
pid_t mwt_spawn_group(char *const argv[], const char *log_path);
/* Waits up to timeout_ms for pid; returns exit status, 128+signal, or -2 on timeout. */
int mwt_wait(pid_t pid, int timeout_ms);

/* Waits up to timeout_ms for `path` to exist with a non-empty first line (a program's ready
 * file) while `pid` runs; returns that line (malloc'ed, no newline), or NULL when pid exited or
 * time ran out. */
char *mwt_wait_ready(const char *path, pid_t pid, int timeout_ms);

/* A free TCP port on 127.0.0.1 (best effort). */
int mwt_free_port(void);

#endif
