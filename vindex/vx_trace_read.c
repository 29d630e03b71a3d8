/* vindex/vx_trace_read.c — reading a routing trace, an untrusted file: the header is checked
 * (magic, version, its own checksum, bounds, closed), then the body's checksum over the whole
 * mapping before the first record is handed out, then every record as it is read (tags, layers,
 * counts, ids, weights); the counts at the end must be the header's. Also the header's encoding,
 * which the writer shares. */
#include "vindex/vx_trace.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_map.h"
#include "vindex/vx_trace_internal.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "routing traces are little-endian; this host is not"
#endif

struct vx_trace_reader {
    char *path;
    vx_map map;
    vx_trace_info info;
    vx_trace_counts want, seen;
    char sha[VX_DIGEST_HEX];
    uint64_t off;   /* next record, from the start of the body */
    int64_t step_T; /* rows of the current step; 0 before the first */
};

static bool is_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

int vx_trace__check_info(const vx_trace_info *i, const char *where, mw_err *err) {
    if (strlen(i->fingerprint) != VX_TRACE_FP_HEX || !is_hex(i->fingerprint, VX_TRACE_FP_HEX))
        return mw_errf(err, "%s: the model fingerprint is not 64 hex digits", where);
    size_t fl = strnlen(i->family, sizeof i->family);
    if (fl == 0 || fl > VX_TRACE_FAMILY_MAX)
        return mw_errf(err, "%s: the family name is empty or longer than %d bytes", where,
                       VX_TRACE_FAMILY_MAX);
    for (size_t c = 0; c < fl; c++)
        if ((unsigned char)i->family[c] < 0x20 || (unsigned char)i->family[c] > 0x7e)
            return mw_errf(err, "%s: the family name is not printable ASCII", where);
    if (i->n_layer < 1 || i->n_layer > VX_TRACE_MAX_LAYERS || i->n_expert < 1 ||
        i->n_expert > VX_TRACE_MAX_EXPERTS || i->k < 1 || i->k > VX_TRACE_MAX_K ||
        i->k > i->n_expert)
        return mw_errf(err,
                       "%s: %u layers, %u experts, top-%u is out of bounds (at most %d layers, "
                       "%d experts, top-%d, k <= experts)",
                       where, i->n_layer, i->n_expert, i->k, VX_TRACE_MAX_LAYERS,
                       VX_TRACE_MAX_EXPERTS, VX_TRACE_MAX_K);
    return 0;
}

static void put_u32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, 4);
}
static void put_u64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, 8);
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

void vx_trace__encode_header(const vx_trace_info *info, const vx_trace_counts *c,
                             const uint8_t body_b2[VX_DIGEST_BYTES],
                             uint8_t h[VX_TRACE_HEADER_BYTES]) {
    memset(h, 0, VX_TRACE_HEADER_BYTES);
    memcpy(h + VX_TH_MAGIC, VX_TRACE_MAGIC, 8);
    put_u32(h + VX_TH_VERSION, VX_TRACE_VERSION);
    put_u32(h + VX_TH_SIZE, VX_TRACE_HEADER_BYTES);
    memcpy(h + VX_TH_FP, info->fingerprint, VX_TRACE_FP_HEX);
    memcpy(h + VX_TH_FAMILY, info->family, strnlen(info->family, VX_TRACE_FAMILY_MAX));
    put_u32(h + VX_TH_N_LAYER, info->n_layer);
    put_u32(h + VX_TH_N_EXPERT, info->n_expert);
    put_u32(h + VX_TH_K, info->k);
    if (c) {
        put_u32(h + VX_TH_FLAGS, VX_TRACE_CLOSED);
        const uint64_t v[6] = {c->steps,       c->layer_records, c->rows,
                               c->assignments, c->dropped,       c->body_bytes};
        for (int i = 0; i < 6; i++) put_u64(h + VX_TH_COUNTS + 8 * i, v[i]);
        memcpy(h + VX_TH_BODY_B2, body_b2, VX_DIGEST_BYTES);
    }
    vx_blake2b(h, VX_TH_SELF_B2, h + VX_TH_SELF_B2);
}

/* ---- opening -------------------------------------------------------------------------------- */

static int read_header(vx_trace_reader *r, mw_err *err) {
    const uint8_t *h = r->map.p;
    const char *p = r->path;
    if (r->map.len < VX_TRACE_HEADER_BYTES || memcmp(h + VX_TH_MAGIC, VX_TRACE_MAGIC, 8))
        return mw_errf(err, "%s: not a moewire routing trace", p);
    if (get_u32(h + VX_TH_VERSION) != VX_TRACE_VERSION ||
        get_u32(h + VX_TH_SIZE) != VX_TRACE_HEADER_BYTES)
        return mw_errf(err, "%s: routing trace version %u (this build reads version %d)", p,
                       get_u32(h + VX_TH_VERSION), VX_TRACE_VERSION);
    uint8_t self[VX_DIGEST_BYTES];
    vx_blake2b(h, VX_TH_SELF_B2, self);
    if (memcmp(self, h + VX_TH_SELF_B2, VX_DIGEST_BYTES))
        return mw_errf(err, "%s: the trace header's checksum does not match (corrupt)", p);
    if (!(get_u32(h + VX_TH_FLAGS) & VX_TRACE_CLOSED))
        return mw_errf(err,
                       "%s: the trace was never finished (its writer was killed or is still "
                       "writing): its counts and checksum are missing",
                       p);
    vx_trace_info *i = &r->info;
    memcpy(i->fingerprint, h + VX_TH_FP, VX_TRACE_FP_HEX);
    memcpy(i->family, h + VX_TH_FAMILY, VX_TRACE_FAMILY_MAX);
    i->n_layer = get_u32(h + VX_TH_N_LAYER);
    i->n_expert = get_u32(h + VX_TH_N_EXPERT);
    i->k = get_u32(h + VX_TH_K);
    if (vx_trace__check_info(i, p, err)) return -1;
    uint64_t *c[6] = {&r->want.steps,       &r->want.layer_records, &r->want.rows,
                      &r->want.assignments, &r->want.dropped,       &r->want.body_bytes};
    for (int k = 0; k < 6; k++) *c[k] = get_u64(h + VX_TH_COUNTS + 8 * k);
    if (r->want.body_bytes != r->map.len - VX_TRACE_HEADER_BYTES)
        return mw_errf(err, "%s: the header says %llu body bytes, the file holds %llu", p,
                       (unsigned long long)r->want.body_bytes,
                       (unsigned long long)(r->map.len - VX_TRACE_HEADER_BYTES));
    return 0;
}

static int check_body(vx_trace_reader *r, mw_err *err) {
    uint8_t b2[VX_DIGEST_BYTES], sha[VX_DIGEST_BYTES];
    vx_blake2b(r->map.p + VX_TRACE_HEADER_BYTES, r->want.body_bytes, b2);
    if (memcmp(b2, r->map.p + VX_TH_BODY_B2, VX_DIGEST_BYTES))
        return mw_errf(err, "%s: the trace body's checksum does not match (corrupt or truncated)",
                       r->path);
    vx_sha s;
    if (vx_sha_init(&s)) return mw_errf(err, "%s: no SHA-256 context", r->path);
    vx_sha_update(&s, r->map.p, r->map.len);
    if (vx_sha_final(&s, sha)) return mw_errf(err, "%s: SHA-256 failed", r->path);
    vx_hex(sha, r->sha);
    return 0;
}

int vx_trace_open(const char *path, vx_trace_reader **out, mw_err *err) {
    *out = NULL;
    vx_trace_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return mw_errf(err, "out of memory");
    }
    vx_hash_init();
    if (vx_map_file(path, 0, &r->map, NULL, err) || read_header(r, err) || check_body(r, err)) {
        vx_trace_close(r);
        return -1;
    }
    *out = r;
    return 0;
}

void vx_trace_close(vx_trace_reader *r) {
    if (!r) return;
    vx_unmap(&r->map);
    free(r->path);
    free(r);
}

const vx_trace_info *vx_trace_info_of(const vx_trace_reader *r) {
    return &r->info;
}
const vx_trace_counts *vx_trace_counts_of(const vx_trace_reader *r) {
    return &r->want;
}
const char *vx_trace_sha256(const vx_trace_reader *r) {
    return r->sha;
}

/* ---- records -------------------------------------------------------------------------------- */

static const uint8_t *body(const vx_trace_reader *r) {
    return r->map.p + VX_TRACE_HEADER_BYTES;
}

/* n more bytes of the body at r->off, or NULL when the body ends first. */
static const uint8_t *take(vx_trace_reader *r, uint64_t n) {
    if (n > r->want.body_bytes - r->off) return NULL;
    const uint8_t *p = body(r) + r->off;
    r->off += n;
    return p;
}

static int step_record(vx_trace_reader *r, uint64_t at, vx_trace_event *ev, mw_err *err) {
    const uint8_t *p = take(r, 4);
    uint32_t T = p ? get_u32(p) : 0;
    if (!p || T < 1 || T > VX_TRACE_MAX_ROWS)
        return mw_errf(err, "%s: step record at body byte %llu: %u rows (1 .. %d)", r->path,
                       (unsigned long long)at, T, VX_TRACE_MAX_ROWS);
    const uint8_t *rows = take(r, 12ull * T);
    if (!rows)
        return mw_errf(err, "%s: step record at body byte %llu is cut short", r->path,
                       (unsigned long long)at);
    *ev =
        (vx_trace_event){.kind = VX_TRACE_STEP, .layer = -1, .T = T, .rows = (const int32_t *)rows};
    r->step_T = T;
    r->seen.steps++;
    r->seen.rows += T;
    return 1;
}

static int check_assignments(vx_trace_reader *r, uint64_t at, const uint16_t *ids, const float *w,
                             uint64_t n, mw_err *err) {
    for (uint64_t i = 0; i < n; i++) {
        if (ids[i] >= r->info.n_expert)
            return mw_errf(err, "%s: layer record at body byte %llu: expert %u (the model has %u)",
                           r->path, (unsigned long long)at, ids[i], r->info.n_expert);
        if (!isfinite(w[i]))
            return mw_errf(err, "%s: layer record at body byte %llu: a weight is not finite",
                           r->path, (unsigned long long)at);
    }
    return 0;
}

static int layer_record(vx_trace_reader *r, uint64_t at, vx_trace_event *ev, mw_err *err) {
    const uint8_t *p = take(r, 12);
    if (!p)
        return mw_errf(err, "%s: layer record at body byte %llu is cut short", r->path,
                       (unsigned long long)at);
    const uint32_t layer = get_u32(p), T = get_u32(p + 4), k = get_u32(p + 8);
    if (r->step_T == 0)
        return mw_errf(err, "%s: layer record at body byte %llu comes before any step", r->path,
                       (unsigned long long)at);
    if (layer >= r->info.n_layer || T != r->step_T || k != r->info.k)
        return mw_errf(err,
                       "%s: layer record at body byte %llu: layer %u, %u rows, top-%u (the trace "
                       "has %u layers, its step %lld rows, top-%u)",
                       r->path, (unsigned long long)at, layer, T, k, r->info.n_layer,
                       (long long)r->step_T, r->info.k);
    const uint64_t tk = (uint64_t)T * k;
    const uint8_t *ids = take(r, (2 * tk + 3) & ~3ull), *w = ids ? take(r, 4 * tk) : NULL;
    if (!w)
        return mw_errf(err, "%s: layer record at body byte %llu is cut short", r->path,
                       (unsigned long long)at);
    if (check_assignments(r, at, (const uint16_t *)ids, (const float *)w, tk, err)) return -1;
    *ev = (vx_trace_event){.kind = VX_TRACE_LAYER,
                           .layer = (int)layer,
                           .T = T,
                           .ids = (const uint16_t *)ids,
                           .weights = (const float *)w};
    r->seen.layer_records++;
    r->seen.assignments += tk;
    return 1;
}

static int check_end(vx_trace_reader *r, mw_err *err) {
    const vx_trace_counts *a = &r->seen, *b = &r->want;
    if (a->steps != b->steps || a->layer_records != b->layer_records || a->rows != b->rows ||
        a->assignments != b->assignments)
        return mw_errf(err,
                       "%s: the records hold %llu steps, %llu layer records, %llu rows; the "
                       "header says %llu, %llu, %llu",
                       r->path, (unsigned long long)a->steps, (unsigned long long)a->layer_records,
                       (unsigned long long)a->rows, (unsigned long long)b->steps,
                       (unsigned long long)b->layer_records, (unsigned long long)b->rows);
    return 0;
}

int vx_trace_next(vx_trace_reader *r, vx_trace_event *ev, mw_err *err) {
    if (r->off == r->want.body_bytes) return check_end(r, err) ? -1 : 0;
    const uint64_t at = r->off;
    const uint8_t *p = take(r, 4);
    uint32_t tag = p ? get_u32(p) : 0;
    if (tag == VX_TRACE_STEP) return step_record(r, at, ev, err);
    if (tag == VX_TRACE_LAYER) return layer_record(r, at, ev, err);
    return mw_errf(err, "%s: unknown record tag %u at body byte %llu", r->path, tag,
                   (unsigned long long)at);
}
