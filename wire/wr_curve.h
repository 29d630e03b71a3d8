/* wire/wr_curve.h — CURVE between coordinators and expert nodes (libzmq's CurveZMQ, keys from
 * libsodium through zmq_curve_keypair): key files, the allow-list, the ZAP handler that admits
 * only listed coordinator keys, and the socket options of either side.
 *
 * Keys are Z85 text (40 characters for 32 bytes). A key file (`NAME.key`, mode 0600) holds both
 * halves of a pair, `NAME.pub` the public half:
 *
 *     # moewire CURVE key pair: keep this file private
 *     public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
 *     secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
 *
 * An allow-list file lists public keys, one per line, bare or as `public-key = "..."` (so .pub
 * files can be concatenated into one); `#` starts a comment. */
#ifndef WR_CURVE_H
#define WR_CURVE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/mw_err.h"

#define WR_KEY_Z85 40 /* characters of a Z85 key */

typedef struct wr_keypair {
    char pub[WR_KEY_Z85 + 1], sec[WR_KEY_Z85 + 1];
} wr_keypair;

/* A fresh key pair. */
int wr_keypair_new(wr_keypair *k, mw_err *err);
/* Writes PREFIX.key (the pair, mode 0600, refusing to replace an existing file) and PREFIX.pub. */
int wr_keypair_write(const wr_keypair *k, const char *prefix, mw_err *err);
/* Reads a key file: a secret key is required, the public half is derived from it (and checked
 * against the file's public-key line when there is one). */
int wr_keypair_read(const char *path, wr_keypair *k, mw_err *err);
/* Whether s is a well-formed Z85 key (40 Z85 characters decoding to 32 bytes). */
bool wr_key_valid(const char *s);

/* The coordinator keys a node admits. */
typedef struct wr_allow {
    char (*keys)[WR_KEY_Z85 + 1];
    size_t n;
    char *path;
} wr_allow;

int wr_allow_read(const char *path, wr_allow *a, mw_err *err);
bool wr_allow_has(const wr_allow *a, const char *z85);
void wr_allow_free(wr_allow *a);

/* The ZAP handler of a ZeroMQ context: a thread answering libzmq's authentication requests for
 * every CURVE socket of ctx, admitting a client only when its public key is on the allow-list
 * (anything else, including another mechanism, is refused). A refusal is logged at most once per
 * key per 10 s, prefixed by `name`. Start it before binding the socket it guards. */
typedef struct wr_zap wr_zap;
int wr_zap_start(void *ctx, const wr_allow *allow, const char *name, wr_zap **out, mw_err *err);
void wr_zap_stop(wr_zap *z);
/* Clients admitted and refused so far. */
void wr_zap_counts(wr_zap *z, unsigned long *admitted, unsigned long *refused);

/* Makes sock a CURVE server with the secret key of k (ZMQ_CURVE_SERVER, ZAP domain "moewire"). */
int wr_curve_server(void *sock, const wr_keypair *k, mw_err *err);
/* Makes sock a CURVE client of the server whose public key is server_pub. */
int wr_curve_client(void *sock, const wr_keypair *k, const char *server_pub, mw_err *err);

/* `PROG keygen [--out PREFIX]`: writes a pair (wr_keypair_write) and prints its public key on
 * stdout. Returns the exit status. */
int wr_keygen_cli(const char *prog, const char *default_prefix, int argc, char **argv);

/* Whether a ZeroMQ endpoint is reachable only from this machine: tcp:// on 127.0.0.0/8, ::1 or
 * localhost, ipc:// and inproc://. A node bound anywhere else needs keys, or --insecure. */
bool wr_endpoint_is_local(const char *endpoint);

#endif
