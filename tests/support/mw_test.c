/* tests/support/mw_test.c — implementation of the shared test helpers. */
#include "tests/support/mw_test.h"
#include "util/mw_time.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *repo_root(void) {
    static char root[4096];
    if (root[0]) return root;
    const char *env = getenv("MW_ROOT");
    if (env) {
        snprintf(root, sizeof root, "%s", env);
        return root;
    }
    /* walk up from the cwd until a directory holding tests/fixtures is found */
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return ".";
    for (;;) {
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/tests/fixtures", cwd);
        struct stat st;
        if (stat(probe, &st) == 0 && S_ISDIR(st.st_mode)) {
            snprintf(root, sizeof root, "%s", cwd);
            return root;
        }
        char *slash = strrchr(cwd, '/');
        if (!slash || slash == cwd) break;
        *slash = '\0';
    }
    snprintf(root, sizeof root, ".");
    return root;
}

/* The paths mwt_fixture and mwt_bin hand out, each kept once for the life of the program so that
 * any number of them may be used together (two in one argv). */
static struct {
    char **v;
    size_t n;
    pthread_mutex_t mu;
} paths = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *keep_path(const char *fmt, const char *dir, const char *name) {
    char buf[4096];
    snprintf(buf, sizeof buf, fmt, dir, name);
    const char *found = NULL;
    pthread_mutex_lock(&paths.mu);
    for (size_t i = 0; i < paths.n && !found; i++)
        if (!strcmp(paths.v[i], buf)) found = paths.v[i];
    char **v = found ? NULL : realloc(paths.v, (paths.n + 1) * sizeof *paths.v);
    if (v) {
        paths.v = v;
        if ((v[paths.n] = strdup(buf))) found = v[paths.n++];
    }
    pthread_mutex_unlock(&paths.mu);
    if (!found) {
        fprintf(stderr, "mw_test: out of memory\n");
        abort();
    }
    return found;
}

const char *mwt_fixture(const char *rel) {
    const char *env = getenv("MW_FIXTURES");
    return env ? keep_path("%s/%s", env, rel) : keep_path("%s/tests/fixtures/%s", repo_root(), rel);
}

const char *mwt_bin(const char *name) {
    const char *env = getenv("MW_BIN");
    return env ? keep_path("%s/%s", env, name) : keep_path("%s/bin/%s", repo_root(), name);
}

const char *mwt_bench_bin(const char *name) {
    return keep_path("%s/build/rel/bench/%s", repo_root(), name);
}

const char *mwt_repo_path(const char *rel) {
    return keep_path("%s/%s", repo_root(), rel);
}

void *mwt_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long n = ftell(f);
    if (n < 0) {
        fclose(f);
        return NULL;
    }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

int mwt_write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    if (fclose(f) != 0 || w != len) return -1;
    return 0;
}

int mwt_write_script(const char *path, const char *text) {
    return mwt_write_file(path, text, strlen(text)) || chmod(path, 0755) ? -1 : 0;
}

char *mwt_tmpdir(const char *tag) {
    const char *base = getenv("TMPDIR");
    if (!base) base = "/tmp";
    size_t n = strlen(base) + strlen(tag) + 32;
    char *p = malloc(n);
    if (!p) return NULL;
    snprintf(p, n, "%s/mwt-%s-XXXXXX", base, tag);
    if (!mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

char *mwt_tmp;

int mwt_tmp_setup(void **state) {
    char *dir = mwt_tmpdir(program_invocation_short_name);
    if (!dir) return -1;
    *state = mwt_tmp = dir;
    return 0;
}

int mwt_tmp_teardown(void **state) {
    char *dir = *state;
    if (!dir) return 0;
    mwt_rmrf(dir);
    if (mwt_tmp == dir) mwt_tmp = NULL;
    free(dir);
    *state = NULL;
    return 0;
}

void mwt_rmrf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                size_t n = strlen(path) + strlen(e->d_name) + 2;
                char *c = malloc(n);
                if (!c) continue;
                snprintf(c, n, "%s/%s", path, e->d_name);
                mwt_rmrf(c);
                free(c);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

void mwt_check_tensor_entry(const json_t *entry, const char *type_name, int n_dims,
                            const int64_t *ne, uint64_t nbytes) {
    const char *want = json_string_value(json_object_get(entry, "ggml_type"));
    if (!want || strcasecmp(type_name, want) != 0)
        fail_msg("type %s, tensor_types.json says %s", type_name, want ? want : "(none)");
    json_t *jne = json_object_get(entry, "ne");
    assert_int_equal(n_dims, json_array_size(jne));
    for (int d = 0; d < n_dims; d++)
        assert_int_equal(ne[d], json_integer_value(json_array_get(jne, (size_t)d)));
    assert_int_equal(nbytes, json_integer_value(json_object_get(entry, "n_bytes")));
}

double mwt_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) return INFINITY;
        if (d > m) m = d;
    }
    return m;
}

double mwt_close(const char *what, const float *a, const float *b, size_t n, double abs_tol,
                 double rel_tol) {
    size_t first = n, worst = n;
    double worst_d = -1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        int bad = !(d <= abs_tol + rel_tol * fabs((double)b[i])); /* NaN counts as bad */
        if (bad) {
            if (first == n) first = i;
            if (isnan(d) || d > worst_d) {
                worst_d = isnan(d) ? INFINITY : d;
                worst = i;
            }
        }
    }
    if (first == n) return -1;
    fprintf(stderr,
            "%s: mismatch at %zu (got %.9g want %.9g); worst at %zu (got %.9g want %.9g, |d| "
            "%.3g; tol %.3g abs + %.3g rel)\n",
            what, first, (double)a[first], (double)b[first], worst, (double)a[worst],
            (double)b[worst], worst_d, abs_tol, rel_tol);
    return worst_d;
}

static char *slurp_fd(int fd) {
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    return buf;
}

/* The children mwt_spawn, mwt_spawn_group and mwt_run started and mwt_wait has not reaped: killed
 * when the program ends, however it ends (a failed assertion's longjmp leaves its test's nodes
 * running; a sanitizer's report ends the program without unwinding), so a failing run leaves no
 * process behind. */
enum { MAX_KIDS = 256 };
static struct {
    pid_t pid[MAX_KIDS];
    bool group[MAX_KIDS];
    int n;
    pthread_mutex_t mu;
    pthread_once_t once;
} kids = {.mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT};

void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void kill_kids(void) {
    /* no lock: this may run from a sanitizer's death callback while another thread holds it */
    for (int i = 0; i < kids.n; i++) {
        /* still a child of ours (running or a zombie), not a number reused by someone else */
        pid_t p = kids.pid[i];
        pid_t r = waitpid(p, NULL, WNOHANG);
        if (r < 0) continue;
        if (kids.group[i]) kill(-p, SIGKILL);
        if (r == 0) {
            kill(p, SIGCONT);
            kill(p, SIGKILL);
            waitpid(p, NULL, 0);
        }
    }
    kids.n = 0;
}

static void kids_init(void) {
    atexit(kill_kids);
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(kill_kids);
}

static void kid_add(pid_t pid, bool group) {
    pthread_once(&kids.once, kids_init);
    pthread_mutex_lock(&kids.mu);
    if (kids.n < MAX_KIDS) {
        kids.pid[kids.n] = pid;
        kids.group[kids.n++] = group;
    }
    pthread_mutex_unlock(&kids.mu);
}

static void kid_reaped(pid_t pid) {
    pthread_mutex_lock(&kids.mu);
    for (int i = 0; i < kids.n; i++)
        if (kids.pid[i] == pid) {
            kids.pid[i] = kids.pid[--kids.n];
            kids.group[i] = kids.group[kids.n];
            break;
        }
    pthread_mutex_unlock(&kids.mu);
}

int mwt_wait(pid_t pid, int timeout_ms) {
    long long deadline = mw_now_ms() + timeout_ms;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, timeout_ms > 0 ? WNOHANG : 0);
        if (r == pid) {
            kid_reaped(pid);
            if (WIFEXITED(status)) return WEXITSTATUS(status);
            if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
            return -1;
        }
        if (r < 0 && errno != EINTR) return -1;
        if (timeout_ms > 0 && mw_now_ms() > deadline) return -2;
        usleep(2000);
    }
}

int mwt_run(char *const argv[], char **out, char **err, int timeout_ms) {
    char tmpl_o[] = "/tmp/mwt-out-XXXXXX", tmpl_e[] = "/tmp/mwt-err-XXXXXX";
    int fo = mkstemp(tmpl_o), fe = mkstemp(tmpl_e);
    if (fo < 0 || fe < 0) return -1;
    unlink(tmpl_o);
    unlink(tmpl_e);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        close(fo);
        close(fe);
        return -1;
    }
    kid_add(pid, false);
    int st = mwt_wait(pid, timeout_ms);
    if (st == -2) {
        kill(pid, SIGKILL);
        mwt_wait(pid, 0);
    }
    lseek(fo, 0, SEEK_SET);
    lseek(fe, 0, SEEK_SET);
    if (out) *out = slurp_fd(fo);
    if (err) *err = slurp_fd(fe);
    close(fo);
    close(fe);
    return st;
}

static pid_t spawn(char *const argv[], const char *log_path, bool own_group) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (log_path) {
        posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    if (own_group) {
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&at, 0);
    }
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    kid_add(pid, own_group);
    return pid;
}

pid_t mwt_spawn(char *const argv[], const char *log_path) {
    return spawn(argv, log_path, false);
}

pid_t mwt_spawn_group(char *const argv[], const char *log_path) {
    return spawn(argv, log_path, true);
}

char *mwt_wait_ready(const char *path, pid_t pid, int timeout_ms) {
    long long deadline = mw_now_ms() + timeout_ms;
    for (;;) {
        char *s = mwt_read_file(path, NULL);
        if (s) {
            s[strcspn(s, "\n")] = '\0';
            if (s[0]) return s;
            free(s);
        }
        if (mwt_wait(pid, 1) != -2 || mw_now_ms() > deadline) return NULL;
        usleep(10000);
    }
}

int mwt_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}
