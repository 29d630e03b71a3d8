/* vindex/vx_hash.c — thin wrappers over libsodium's BLAKE2b and OpenSSL's SHA-256, parallel hash
 * batches, and hex forms. */
#include "vindex/vx_hash.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_sodium(void) {
    /* sodium_init only fails when no entropy source exists; hashing does not need one. */
    if (sodium_init() < 0) return;
}

void vx_hash_init(void) {
    pthread_once(&once, init_sodium);
}

void vx_b2_init(vx_b2 *h) {
    vx_hash_init();
    crypto_generichash_init(&h->st, NULL, 0, VX_DIGEST_BYTES);
}

void vx_b2_update(vx_b2 *h, const void *p, size_t n) {
    crypto_generichash_update(&h->st, p, n);
}

void vx_b2_final(vx_b2 *h, uint8_t out[VX_DIGEST_BYTES]) {
    crypto_generichash_final(&h->st, out, VX_DIGEST_BYTES);
}

void vx_blake2b(const void *p, size_t n, uint8_t out[VX_DIGEST_BYTES]) {
    vx_b2 h;
    vx_b2_init(&h);
    vx_b2_update(&h, p, n);
    vx_b2_final(&h, out);
}

int vx_sha_init(vx_sha *h) {
    h->failed = false;
    h->ctx = EVP_MD_CTX_new();
    if (h->ctx && EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) == 1) return 0;
    vx_sha_free(h);
    return -1;
}

void vx_sha_update(vx_sha *h, const void *p, size_t n) {
    if (h->ctx && EVP_DigestUpdate(h->ctx, p, n) != 1) h->failed = true;
}

int vx_sha_final(vx_sha *h, uint8_t out[VX_DIGEST_BYTES]) {
    unsigned int len = 0;
    bool ok = h->ctx && !h->failed && EVP_DigestFinal_ex(h->ctx, out, &len) == 1 &&
              len == VX_DIGEST_BYTES;
    vx_sha_free(h);
    return ok ? 0 : -1;
}

void vx_sha_free(vx_sha *h) {
    EVP_MD_CTX_free(h->ctx);
    h->ctx = NULL;
}

typedef struct run_ctx {
    const vx_hash_job *jobs;
    size_t n;
    atomic_size_t next;
} run_ctx;

static void run_jobs(void *arg, int ith, int nth) {
    run_ctx *c = arg;
    for (size_t i; (i = atomic_fetch_add(&c->next, 1)) < c->n;) {
        const vx_hash_job *j = &c->jobs[i];
        for (size_t k = 0; k < j->n_segs; k++) {
            if (j->b2) vx_b2_update(j->b2, j->segs[k].p, j->segs[k].n);
            if (j->sha) vx_sha_update(j->sha, j->segs[k].p, j->segs[k].n);
        }
    }
}

void vx_hash_run(kn_pool *pool, const vx_hash_job *jobs, size_t n) {
    vx_hash_init();
    run_ctx c = {jobs, n, 0};
    if (pool && n > 1)
        kn_pool_run(pool, run_jobs, &c);
    else
        run_jobs(&c, 0, 1);
}

kn_pool *vx_pool_new(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n > 8) n = 8;
    return n > 1 ? kn_pool_create((int)n) : NULL;
}

void vx_hex(const uint8_t d[VX_DIGEST_BYTES], char out[VX_DIGEST_HEX]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < VX_DIGEST_BYTES; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * VX_DIGEST_BYTES] = '\0';
}

static int nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int vx_unhex(const char *s, uint8_t d[VX_DIGEST_BYTES]) {
    if (!s || strlen(s) != 2 * VX_DIGEST_BYTES) return -1;
    for (int i = 0; i < VX_DIGEST_BYTES; i++) {
        int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        d[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}
