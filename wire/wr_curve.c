/* wire/wr_curve.c — CURVE keys, allow-lists, the ZAP handler and socket setup (wr_curve.h). The
 * ZAP exchange is RFC 27: libzmq asks on inproc://zeromq.zap.01 (version, request id, domain,
 * address, routing id, mechanism, credentials) and waits for a status (200 admits, 400 refuses). */
#include "wire/wr_curve.h"
#include "util/mw_time.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN   "moewire"
#define MAX_KEY_FILE (64u << 10)
#define LOG_EVERY_NS (10ull * 1000000000ull)

bool wr_key_valid(const char *s) {
    uint8_t raw[32];
    return s && strlen(s) == WR_KEY_Z85 && zmq_z85_decode(raw, s) != NULL;
}

int wr_keypair_new(wr_keypair *k, mw_err *err) {
    memset(k, 0, sizeof *k);
    if (zmq_curve_keypair(k->pub, k->sec) != 0)
        return mw_errf(err, "cannot make a CURVE key pair: %s (libzmq without CURVE?)",
                       zmq_strerror(errno));
    return 0;
}

static int write_file(const char *path, const char *text, mode_t mode, mw_err *err) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return mw_errf(err, "%s: cannot create: %s", path, strerror(errno));
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    if (fchmod(fd, mode) != 0 || w != (ssize_t)n || close(fd) != 0) {
        unlink(path);
        return mw_errf(err, "%s: cannot write", path);
    }
    return 0;
}

int wr_keypair_write(const wr_keypair *k, const char *prefix, mw_err *err) {
    char key[4200], pub[4200], text[512];
    snprintf(key, sizeof key, "%s.key", prefix);
    snprintf(pub, sizeof pub, "%s.pub", prefix);
    snprintf(text, sizeof text,
             "# moewire CURVE key pair: keep this file private\n"
             "public-key = \"%s\"\nsecret-key = \"%s\"\n",
             k->pub, k->sec);
    if (write_file(key, text, 0600, err)) return -1;
    snprintf(text, sizeof text, "# moewire CURVE public key\npublic-key = \"%s\"\n", k->pub);
    if (write_file(pub, text, 0644, err)) {
        unlink(key);
        return -1;
    }
    return 0;
}

static char *read_small(const char *path, mw_err *err) {
    FILE *f = fopen(path, "r");
    if (!f) return mw_errf(err, "%s: cannot open: %s", path, strerror(errno)), NULL;
    char *buf = malloc(MAX_KEY_FILE + 1);
    size_t n = buf ? fread(buf, 1, MAX_KEY_FILE + 1, f) : 0;
    fclose(f);
    if (!buf) return mw_errf(err, "out of memory"), NULL;
    if (n > MAX_KEY_FILE) {
        free(buf);
        return mw_errf(err, "%s: larger than %u bytes: not a key file", path, MAX_KEY_FILE), NULL;
    }
    buf[n] = '\0';
    return buf;
}

static char *trim(char *line) {
    while (*line == ' ' || *line == '\t') line++;
    size_t n = strlen(line);
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r')) line[--n] = 0;
    return line;
}

/* The next line of *p (NUL-terminated in place), trimmed, its comment removed; NULL at the end.
 * '#' and '=' are Z85 digits too: a line that is one whole key stays as it is, and a comment
 * starts only at the line's beginning or after a blank. */
static char *next_line(char **p) {
    if (!**p) return NULL;
    char *line = *p, *end = line + strcspn(line, "\n");
    *p = *end ? end + 1 : end;
    *end = '\0';
    line = trim(line);
    if (wr_key_valid(line)) return line;
    for (char *h = line; (h = strchr(h, '#')); h++)
        if (h == line || h[-1] == ' ' || h[-1] == '\t') {
            *h = '\0';
            break;
        }
    return trim(line);
}

/* The key of a line `NAME = "KEY"` (quotes optional) when NAME is want, of a bare key line when
 * want is "public-key"; NULL otherwise. */
static const char *line_key(char *line, const char *want) {
    if (wr_key_valid(line)) return strcmp(want, "public-key") ? NULL : line;
    size_t w = strlen(want);
    if (strncmp(line, want, w)) return NULL;
    char *v = line + w;
    while (*v == ' ' || *v == '\t') v++;
    if (*v++ != '=') return NULL;
    while (*v == ' ' || *v == '\t') v++;
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v[n - 1] = '\0';
        v++;
    }
    return v;
}

int wr_keypair_read(const char *path, wr_keypair *k, mw_err *err) {
    memset(k, 0, sizeof *k);
    char *buf = read_small(path, err);
    if (!buf) return -1;
    char *p = buf, *line, pub[WR_KEY_Z85 + 1] = "";
    int lineno = 0, rc = 0;
    while (rc == 0 && (line = next_line(&p))) {
        lineno++;
        if (!*line) continue;
        const char *s = line_key(line, "secret-key");
        const char *v = s ? s : line_key(line, "public-key");
        if (!v) continue;
        if (!wr_key_valid(v))
            rc = mw_errf(err, "%s:%d: not a 40-character Z85 key", path, lineno);
        else
            snprintf(s ? k->sec : pub, WR_KEY_Z85 + 1, "%s", v);
    }
    free(buf);
    if (rc) return -1;
    if (!k->sec[0])
        return mw_errf(err, "%s: no secret-key line (a .pub file is not a key pair)", path);
    if (zmq_curve_public(k->pub, k->sec) != 0)
        return mw_errf(err, "%s: cannot derive the public key: %s", path, zmq_strerror(errno));
    if (pub[0] && strcmp(pub, k->pub))
        return mw_errf(err, "%s: its public-key does not belong to its secret-key", path);
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & 077))
        fprintf(stderr,
                "moewire: warning: %s holds a secret key and is readable by others "
                "(chmod 600 it)\n",
                path);
    return 0;
}

int wr_allow_read(const char *path, wr_allow *a, mw_err *err) {
    memset(a, 0, sizeof *a);
    char *buf = read_small(path, err);
    if (!buf) return -1;
    size_t cap = 0;
    char *p = buf, *line;
    int lineno = 0, rc = 0;
    while (rc == 0 && (line = next_line(&p))) {
        lineno++;
        if (!*line) continue;
        const char *v = line_key(line, "public-key");
        if (!v) v = line; /* neither a key nor a public-key line: refused below, named */
        if (!wr_key_valid(v)) {
            rc = mw_errf(err, "%s:%d: not a 40-character Z85 public key", path, lineno);
            break;
        }
        if (a->n == cap) {
            cap = cap ? 2 * cap : 16;
            void *q = realloc(a->keys, cap * sizeof *a->keys);
            if (!q) {
                rc = mw_errf(err, "out of memory");
                break;
            }
            a->keys = q;
        }
        snprintf(a->keys[a->n++], WR_KEY_Z85 + 1, "%s", v);
    }
    free(buf);
    if (rc == 0 && !a->n) rc = mw_errf(err, "%s: no public keys", path);
    if (rc == 0 && !(a->path = strdup(path))) rc = mw_errf(err, "out of memory");
    if (rc) wr_allow_free(a);
    return rc;
}

bool wr_allow_has(const wr_allow *a, const char *z85) {
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->keys[i], z85)) return true;
    return false;
}

void wr_allow_free(wr_allow *a) {
    free(a->keys);
    free(a->path);
    memset(a, 0, sizeof *a);
}

/* ---- the ZAP handler ------------------------------------------------------------------------ */

typedef struct refusal {
    char key[WR_KEY_Z85 + 1];
    uint64_t last_ns;
    unsigned long since;
} refusal;

struct wr_zap {
    void *rep;
    pthread_t th;
    atomic_bool stop;
    const wr_allow *allow;
    char name[256];
    atomic_ulong admitted, refused;
    refusal recent[64];
};

/* One line per refused key per 10 s, with how many refusals it stands for. */
static void log_refusal(wr_zap *z, const char *key, const char *address, const char *why) {
    uint64_t now = mw_now_ns();
    refusal *r = NULL, *oldest = &z->recent[0];
    for (size_t i = 0; i < sizeof z->recent / sizeof z->recent[0]; i++) {
        if (!strcmp(z->recent[i].key, key)) r = &z->recent[i];
        if (z->recent[i].last_ns < oldest->last_ns) oldest = &z->recent[i];
    }
    if (r && now - r->last_ns < LOG_EVERY_NS) {
        r->since++;
        return;
    }
    unsigned long more = r ? r->since : 0;
    if (!r) {
        r = oldest;
        snprintf(r->key, sizeof r->key, "%s", key);
    }
    r->last_ns = now;
    r->since = 0;
    /* a connection through the receive relay (wire/wr_relay.h) has no IP address here (libzmq
     * gives ":uid:gid:pid" for a unix connection): the relay's own line names the peer */
    if (address[0] && address[0] != ':')
        fprintf(stderr, "%s: refused a client from %s: %s%s", z->name, address, why,
                more ? "" : "\n");
    else
        fprintf(stderr, "%s: refused a client: %s%s", z->name, why, more ? "" : "\n");
    if (more) fprintf(stderr, " (and %lu more times in the last 10 s)\n", more);
}

static void zap_answer(void *rep, const char *id, size_t id_len, const char *status,
                       const char *text) {
    zmq_send(rep, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(rep, id, id_len, ZMQ_SNDMORE);
    zmq_send(rep, status, strlen(status), ZMQ_SNDMORE);
    zmq_send(rep, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(rep, "", 0, ZMQ_SNDMORE); /* user id */
    zmq_send(rep, "", 0, 0);           /* metadata */
}

static void zap_one(wr_zap *z) {
    enum { N = 8 };
    char part[N][256];
    size_t len[N];
    int n = 0;
    for (int more = 1; more;) {
        char buf[256];
        int k = zmq_recv(z->rep, buf, sizeof buf, 0);
        if (k < 0) return;
        if (n < N) {
            len[n] = (size_t)k < sizeof buf ? (size_t)k : sizeof buf;
            memcpy(part[n], buf, len[n]);
            n++;
        }
        int m = 0;
        size_t ml = sizeof m;
        zmq_getsockopt(z->rep, ZMQ_RCVMORE, &m, &ml);
        more = m;
    }
    if (n < 6) { /* not a ZAP request: a REP socket must still answer something */
        zap_answer(z->rep, "", 0, "500", "malformed request");
        return;
    }
    char address[64] = "?", key[WR_KEY_Z85 + 1] = "";
    snprintf(address, sizeof address, "%.*s", (int)(len[3] < 63 ? len[3] : 63), part[3]);
    bool curve = len[5] == 5 && !memcmp(part[5], "CURVE", 5);
    if (curve && n >= 7 && len[6] == 32) zmq_z85_encode(key, (const uint8_t *)part[6], 32);
    if (curve && key[0] && wr_allow_has(z->allow, key)) {
        atomic_fetch_add(&z->admitted, 1);
        zap_answer(z->rep, part[1], len[1], "200", "OK");
        return;
    }
    atomic_fetch_add(&z->refused, 1);
    char why[160];
    if (!curve)
        snprintf(why, sizeof why, "mechanism %.*s (CURVE is required)",
                 (int)(len[5] < 16 ? len[5] : 16), part[5]);
    else
        snprintf(why, sizeof why, "key %s is not on the allow-list %s", key, z->allow->path);
    log_refusal(z, key[0] ? key : "-", address, why);
    zap_answer(z->rep, part[1], len[1], "400", "not allowed");
}

static void *zap_loop(void *arg) {
    wr_zap *z = arg;
    zmq_pollitem_t it = {z->rep, 0, ZMQ_POLLIN, 0};
    while (!atomic_load(&z->stop)) {
        int rc = zmq_poll(&it, 1, 100);
        if (rc < 0 && errno == ETERM) break;
        if (rc > 0) zap_one(z);
    }
    return NULL;
}

int wr_zap_start(void *ctx, const wr_allow *allow, const char *name, wr_zap **out, mw_err *err) {
    *out = NULL;
    wr_zap *z = calloc(1, sizeof *z);
    if (!z) return mw_errf(err, "out of memory");
    z->allow = allow;
    snprintf(z->name, sizeof z->name, "%s", name ? name : "moewire");
    atomic_init(&z->stop, false);
    int zero = 0;
    if (!(z->rep = zmq_socket(ctx, ZMQ_REP)) ||
        zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_bind(z->rep, ZAP_ENDPOINT) != 0) {
        mw_errf(err, "cannot start the ZAP handler: %s", zmq_strerror(errno));
        if (z->rep) zmq_close(z->rep);
        free(z);
        return -1;
    }
    if (pthread_create(&z->th, NULL, zap_loop, z) != 0) {
        zmq_close(z->rep);
        free(z);
        return mw_errf(err, "cannot start the ZAP handler's thread");
    }
    *out = z;
    return 0;
}

void wr_zap_stop(wr_zap *z) {
    if (!z) return;
    atomic_store(&z->stop, true);
    pthread_join(z->th, NULL);
    zmq_close(z->rep);
    free(z);
}

void wr_zap_counts(wr_zap *z, unsigned long *admitted, unsigned long *refused) {
    *admitted = z ? atomic_load(&z->admitted) : 0;
    *refused = z ? atomic_load(&z->refused) : 0;
}

/* ---- sockets -------------------------------------------------------------------------------- */

int wr_curve_server(void *sock, const wr_keypair *k, mw_err *err) {
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->sec, WR_KEY_Z85) != 0 ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) != 0)
        return mw_errf(err, "CURVE server options: %s", zmq_strerror(errno));
    return 0;
}

int wr_curve_client(void *sock, const wr_keypair *k, const char *server_pub, mw_err *err) {
    if (!wr_key_valid(server_pub)) return mw_errf(err, "'%s' is not a Z85 public key", server_pub);
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server_pub, WR_KEY_Z85) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, k->pub, WR_KEY_Z85) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, k->sec, WR_KEY_Z85) != 0)
        return mw_errf(err, "CURVE client options: %s", zmq_strerror(errno));
    return 0;
}

bool wr_endpoint_is_local(const char *ep) {
    if (!strncmp(ep, "ipc://", 6) || !strncmp(ep, "inproc://", 9)) return true;
    if (strncmp(ep, "tcp://", 6)) return false;
    const char *h = ep + 6;
    /* tcp://IFACE;HOST:PORT binds on IFACE: the part before ';' decides for a bind */
    const char *semi = strchr(h, ';');
    size_t n = semi ? (size_t)(semi - h) : strlen(h);
    char host[256];
    if (n >= sizeof host) return false;
    memcpy(host, h, n);
    host[n] = '\0';
    char *colon = strrchr(host, ':');
    if (colon) *colon = '\0';
    if (!strcmp(host, "localhost") || !strcmp(host, "[::1]") || !strcmp(host, "::1") ||
        !strcmp(host, "lo") || !strcmp(host, "lo0")) /* Linux's loopback name, the BSDs' */
        return true;
    unsigned a, b, c, d;
    char tail;
    return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
           c < 256 && d < 256;
}

int wr_keygen_cli(const char *prog, const char *default_prefix, int argc, char **argv) {
    const char *prefix = default_prefix;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            prefix = argv[++i];
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: %s keygen [--out PREFIX]\n"
                   "  writes a CURVE key pair: PREFIX.key (both halves, mode 0600) and PREFIX.pub\n"
                   "  (the public key, for the peers' lists); default PREFIX %s\n",
                   prog, default_prefix);
            return 0;
        } else {
            fprintf(stderr, "%s keygen: unknown option '%s' (see --help)\n", prog, argv[i]);
            return 2;
        }
    }
    wr_keypair k;
    mw_err err;
    if (wr_keypair_new(&k, &err) || wr_keypair_write(&k, prefix, &err)) {
        fprintf(stderr, "%s keygen: %s\n", prog, err.msg);
        return 1;
    }
    printf("%s\n", k.pub);
    fprintf(stderr, "%s keygen: wrote %s.key (keep it private) and %s.pub\n", prog, prefix, prefix);
    memset(&k, 0, sizeof k);
    return 0;
}
