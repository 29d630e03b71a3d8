/* vindex/vx_extract.c — writing a vindex from an input (GGUF file, safetensors checkpoint, synth).
 *
 * One streaming pass: dense tensors go to dense.bin, expert slices are gathered into one extent
 * per (layer, expert) in experts-LLL.bin, and every byte is hashed on the way (tensor digests for
 * the fingerprint, BLAKE2b + SHA-256 per extent and per dense file). The source files are hashed
 * for provenance by a second thread meanwhile, from the same mappings the tensors are read from.
 * Everything is written into a fresh sibling directory, OUT.partial-XXXXXX, renamed to OUT once
 * complete: a failed extract removes it, and one killed midway leaves only that directory, never a
 * partial vindex at OUT. */
#include "vindex/vx_vindex.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vindex/vx_gguf_internal.h"
#include "vindex/vx_io.h"
#include "vindex/vx_manifest.h"
#include "vindex/vx_map.h"
#include "vindex/vx_meta_internal.h"

#define CHUNK (4u << 20)

/* Source files hashed for provenance, on their own thread. */
typedef struct prov_hash {
    const vx_input *in;
    uint8_t (*sha)[VX_DIGEST_BYTES];
    uint64_t bytes;
    int rc;
    mw_err err;
} prov_hash;

typedef struct job {
    const vx_input *in;
    const vx_extract_opts *opts;
    const char *dir; /* where the files are written: the temporary directory */
    const char *out; /* the vindex's final path */
    char tmp[4096];
    mw_err *err;
    vx_manifest m;
    const vx_input_tensor **src;  /* per manifest tensor */
    vx_b2 *digest;                /* running tensor digests */
    kn_type to_experts, to_dense; /* transcode targets (KN_TYPE_COUNT = none) */
    kn_pool *pool;                /* parallel hashing */
    int batch;                    /* extents gathered, hashed and written together */
    uint8_t *row_in;              /* transcode scratch */
    float *row_f;
    uint64_t done, total;
    char **created; /* files written, removed on failure */
    size_t n_created;
    prov_hash ph;
    pthread_t th;
    bool th_started;
    bool made_tmp;
} job;

/* The SHA-256 of a mapped source, from the very bytes the tensors are read from, handing the
 * pages back behind it. */
static int hash_mapped(const vx_input_file *f, uint8_t sha[VX_DIGEST_BYTES], mw_err *err) {
    vx_sha h;
    if (vx_sha_init(&h)) return mw_errf(err, "%s: out of memory", f->path);
    for (uint64_t at = 0; at < f->size; at += CHUNK) {
        uint64_t n = f->size - at < CHUNK ? f->size - at : CHUNK;
        vx_sha_update(&h, f->data + at, (size_t)n);
        vx_map_release(f->data + at, n);
    }
    return vx_sha_final(&h, sha) ? mw_errf(err, "%s: SHA-256 failed", f->path) : 0;
}

static void *hash_sources(void *arg) {
    prov_hash *p = arg;
    for (size_t i = 0; i < p->in->n_files && p->rc == 0; i++) {
        const vx_input_file *f = &p->in->files[i];
        p->rc = f->data ? hash_mapped(f, p->sha[i], &p->err)
                        : vx_hash_range(f->path, 0, f->size, NULL, p->sha[i], NULL, NULL, &p->err);
        p->bytes += f->size;
    }
    return NULL;
}

/* Whether every source file still is the one opened: extract reads them through mappings, which
 * see rewrites in place. Checked before the first byte is read and before the manifest is
 * written, so a changed source never yields a vindex (best effort: a change undone in between
 * goes unseen, and a file shrunk under a page being read raises SIGBUS). */
static int check_sources(job *j) {
    for (size_t i = 0; i < j->in->n_files; i++) {
        const vx_input_file *f = &j->in->files[i];
        if ((f->id.dev || f->id.ino) && vx_file_unchanged(f->path, &f->id, j->err)) return -1;
    }
    return 0;
}

static void progress(job *j, uint64_t n) {
    j->done += n;
    if (j->opts && j->opts->progress) j->opts->progress(j->opts->progress_ctx, j->done, j->total);
}

static int note_created(job *j, const char *name) {
    char **c = realloc(j->created, (j->n_created + 1) * sizeof *c);
    if (!c || !(c[j->n_created] = strdup(name))) {
        j->created = c ? c : j->created;
        return mw_errf(j->err, "out of memory");
    }
    j->created = c;
    j->n_created++;
    return 0;
}

/* ---- planning ------------------------------------------------------------------------------ */

static int parse_transcode(job *j) {
    j->to_experts = j->to_dense = KN_TYPE_COUNT;
    const char *spec = j->opts ? j->opts->transcode : NULL;
    if (!spec || !*spec) return 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        int t = eq ? kn_type_from_name(eq + 1) : -1;
        const kn_type_traits *tr = t >= 0 ? kn_traits((kn_type)t) : NULL;
        if (!eq || !tr) return mw_errf(j->err, "--transcode '%s': expected CLASS=TYPE", tok);
        if (!tr->from_float) return mw_errf(j->err, "--transcode: no quantizer for %s", tr->name);
        *eq = '\0';
        if (!strcmp(tok, "experts"))
            j->to_experts = (kn_type)t;
        else if (!strcmp(tok, "dense"))
            j->to_dense = (kn_type)t;
        else
            return mw_errf(j->err, "--transcode: unknown class '%s' (experts or dense)", tok);
    }
    return 0;
}

/* The type a tensor is stored as: its own unless a transcode rule covers it. Biases, norms (1-D)
 * and the router stay as they are. */
static kn_type target_type(const job *j, const vx_input_tensor *t, int role) {
    if (role >= 0)
        return j->to_experts != KN_TYPE_COUNT && !vx_role_is_bias((vx_role)role) ? j->to_experts
                                                                                 : t->type;
    size_t n = strlen(t->name);
    bool weight2d = t->n_dims >= 2 && n > 7 && !strcmp(t->name + n - 7, ".weight") &&
                    !strstr(t->name, "ffn_gate_inp");
    return j->to_dense != KN_TYPE_COUNT && weight2d ? j->to_dense : t->type;
}

static int add_tensor(job *j, const vx_input_tensor *t, int layer, int role) {
    vx_mf_tensor *mt = &j->m.tensors[j->m.n_tensors];
    j->src[j->m.n_tensors] = t;
    char why[120];
    uint64_t want;
    if (vx__tensor_nbytes(t->type, t->n_dims, t->ne, &want, why, sizeof why))
        return mw_errf(j->err, "input tensor '%s' %s", t->name, why);
    if (want != t->nbytes)
        return mw_errf(j->err, "input tensor '%s': %llu bytes, its type and shape make %llu",
                       t->name, (unsigned long long)t->nbytes, (unsigned long long)want);
    if (!(mt->name = strdup(t->name))) return mw_errf(j->err, "out of memory");
    j->m.n_tensors++;
    mt->type = target_type(j, t, role);
    mt->n_dims = t->n_dims;
    memcpy(mt->ne, t->ne, sizeof mt->ne);
    mt->layer = layer;
    mt->role = role >= 0 ? (vx_role)role : VX_R_GATE;
    if (mt->type != t->type) {
        const kn_type_traits *from = kn_traits(t->type);
        if (!from || !from->to_float)
            return mw_errf(j->err, "--transcode: cannot read '%s' (%s has no dequantizer)", t->name,
                           kn_type_name(t->type));
        if (from->planar || kn_traits(mt->type)->planar) /* whole matrices, not rows */
            return mw_errf(j->err,
                           "--transcode: '%s' is %s and %s is %s: planar formats are kept "
                           "as stored",
                           t->name, kn_type_name(t->type), kn_type_name(mt->type),
                           from->planar ? "not transcoded from" : "not a target");
    }
    if (vx__tensor_nbytes(mt->type, mt->n_dims, mt->ne, &mt->nbytes, why, sizeof why))
        return mw_errf(j->err, "tensor '%s' as %s: %s", t->name, kn_type_name(mt->type), why);
    j->total += mt->nbytes;
    return 0;
}

static int plan_layers(job *j) {
    vx_manifest *m = &j->m;
    m->moe = calloc(m->n_layers ? (size_t)m->n_layers : 1, sizeof *m->moe);
    if (!m->moe) return mw_errf(j->err, "out of memory");
    for (int l = 0; l < m->n_layers; l++) {
        vx_mf_layer *L = &m->moe[m->n_moe];
        memset(L, 0, sizeof *L);
        L->layer = l;
        for (int r = 0; r < VX_ROLE_COUNT; r++) L->part_tensor[r] = -1;
        for (size_t i = m->n_dense; i < m->n_tensors; i++) {
            const vx_mf_tensor *t = &m->tensors[i];
            if (t->layer != l) continue;
            if (vx_layer_set_part(&L->shape, t->role, t->type, t->n_dims, t->ne, m->n_experts,
                                  t->name, j->err))
                return -1;
            L->part_tensor[t->role] = (int)i;
        }
        if (!L->shape.present) continue;
        if (vx_layer_check(&L->shape, l, m->expert_width, j->err)) return -1;
        vx_manifest_layout_parts(L);
        char name[64];
        vx_expert_file_name(l, name, sizeof name);
        if (!(L->file = strdup(name))) return mw_errf(j->err, "out of memory");
        m->n_moe++;
    }
    return 0;
}

static int plan(job *j) {
    const vx_input *in = j->in;
    vx_manifest *m = &j->m;
    if (parse_transcode(j)) return -1;
    if (j->opts && j->opts->strict && in->n_unrecognised > 0)
        return mw_errf(j->err, "--strict: %zu unrecognised source tensor(s), the first '%s'",
                       in->n_unrecognised, in->unrecognised[0]);
    if (!(m->meta = vx_meta_clone(in->meta))) return mw_errf(j->err, "out of memory");
    vx_model_shape sh;
    if (vx_model_shape_read(m->meta, in->n_files ? in->files[0].path : in->kind, &sh, j->err))
        return -1;
    m->arch = sh.arch;
    m->n_layers = sh.n_layers;
    m->n_experts = sh.n_experts;
    m->hidden = sh.hidden;
    m->expert_width = sh.expert_width;
    size_t n = in->n_tensors ? in->n_tensors : 1;
    m->tensors = calloc(n, sizeof *m->tensors);
    j->src = calloc(n, sizeof *j->src);
    j->digest = calloc(n, sizeof *j->digest);
    if (!m->tensors || !j->src || !j->digest) return mw_errf(j->err, "out of memory");
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < in->n_tensors; i++) {
            const vx_input_tensor *t = &in->tensors[i];
            int layer = -1, role = vx_expert_role(t->name, &layer);
            if ((role >= 0) != (pass == 1)) continue;
            if (role >= 0 && (m->n_experts == 0 || layer >= m->n_layers))
                return mw_errf(j->err,
                               "expert tensor '%s' is outside the model's %d layers × %d "
                               "experts",
                               t->name, m->n_layers, m->n_experts);
            if (add_tensor(j, t, role >= 0 ? layer : -1, role)) return -1;
            if (role < 0) m->n_dense++;
        }
    }
    m->has_dense = true;
    return plan_layers(j);
}

/* ---- writing ------------------------------------------------------------------------------- */

/* Reads rows [r0, r0 + n) of manifest tensor i (rows of ne[0] elements) as stored into dst,
 * converting when the tensor is transcoded. */
static int read_rows(job *j, size_t i, uint64_t r0, uint64_t n, uint8_t *dst) {
    const vx_input_tensor *t = j->src[i];
    const vx_mf_tensor *mt = &j->m.tensors[i];
    uint64_t rs_in = kn_row_size(t->type, t->ne[0]);
    if (mt->type == t->type) return t->read(j->in, t, r0 * rs_in, dst, n * rs_in, j->err);
    uint64_t rs_out = kn_row_size(mt->type, mt->ne[0]);
    const kn_type_traits *from = kn_traits(t->type), *to = kn_traits(mt->type);
    for (uint64_t r = 0; r < n; r++) {
        if (t->read_f32) { /* the exact values the stored type would round */
            if (t->read_f32(j->in, t, r0 + r, 1, j->row_f, j->err)) return -1;
        } else {
            if (t->read(j->in, t, (r0 + r) * rs_in, j->row_in, rs_in, j->err)) return -1;
            from->to_float(j->row_in, j->row_f, t->ne[0]);
        }
        to->from_float(j->row_f, dst + r * rs_out, t->ne[0]);
    }
    return 0;
}

static int alloc_scratch(job *j) {
    uint64_t max_in = 0, max_k = 0;
    for (size_t i = 0; i < j->m.n_tensors; i++) {
        if (j->m.tensors[i].type == j->src[i]->type) continue;
        uint64_t rs = kn_row_size(j->src[i]->type, j->src[i]->ne[0]);
        if (rs > max_in) max_in = rs;
        if ((uint64_t)j->src[i]->ne[0] > max_k) max_k = (uint64_t)j->src[i]->ne[0];
    }
    if (max_k == 0) return 0;
    j->row_in = malloc(max_in);
    j->row_f = malloc(max_k * sizeof(float));
    return j->row_in && j->row_f ? 0 : mw_errf(j->err, "out of memory");
}

static int write_dense(job *j) {
    vx_manifest *m = &j->m;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", j->dir, VX_DENSE_FILE);
    vx_sink s;
    if (note_created(j, VX_DENSE_FILE) || vx_sink_open(&s, path, true, j->err)) return -1;
    s.pool = j->pool;
    uint8_t *buf = NULL;
    size_t buf_len = 0;
    int rc = 0;
    for (size_t i = 0; i < m->n_dense && rc == 0; i++) {
        vx_mf_tensor *t = &m->tensors[i];
        uint64_t rs = kn_row_size(t->type, t->ne[0]);
        /* a row is at most the tensor, which the reader bounded by its file */
        if (rs == 0 || rs > t->nbytes) {
            rc = mw_errf(j->err, "tensor '%s': row of %llu bytes in a tensor of %llu", t->name,
                         (unsigned long long)rs, (unsigned long long)t->nbytes);
            break;
        }
        uint64_t rows = t->nbytes / rs, per = rs >= CHUNK ? 1 : CHUNK / rs;
        if (per * rs > buf_len) {
            free(buf);
            buf_len = per * rs;
            if (!(buf = malloc(buf_len))) rc = mw_errf(j->err, "out of memory");
        }
        if (rc || (rc = vx_sink_pad(&s, VX_ALIGN, j->err))) break;
        t->offset = s.pos;
        vx_b2_init(&j->digest[i]);
        for (uint64_t r = 0; r < rows && rc == 0; r += per) {
            uint64_t n = rows - r < per ? rows - r : per;
            rc = read_rows(j, i, r, n, buf);
            if (rc == 0) {
                rc = vx_sink_write_digest(&s, buf, n * rs, &j->digest[i], j->err);
                progress(j, n * rs);
            }
        }
        vx_b2_final(&j->digest[i], t->digest);
    }
    if (rc == 0) rc = vx_sink_pad(&s, VX_ALIGN, j->err);
    free(buf);
    m->dense.size = s.pos;
    if (rc) {
        vx_sink_abort(&s);
        return -1;
    }
    if (!(m->dense.name = strdup(VX_DENSE_FILE))) return mw_errf(j->err, "out of memory");
    return vx_sink_close(&s, m->dense.b2, m->dense.sha, j->err);
}

/* Gathers expert e's slice of every part into buf (zero padding between parts). */
static int gather_extent(job *j, const vx_mf_layer *L, int e, uint8_t *buf) {
    memset(buf, 0, L->extent_bytes);
    for (int r = 0; r < VX_ROLE_COUNT; r++) {
        int ti = L->part_tensor[r];
        if (ti < 0) continue;
        const vx_part *p = &L->shape.part[r];
        if (read_rows(j, (size_t)ti, (uint64_t)e * (uint64_t)p->rows, (uint64_t)p->rows,
                      buf + L->part_off[r]))
            return mw_err_wrap(j->err, "expert (layer %d, expert %d)", L->layer, e);
        progress(j, p->slice_bytes);
    }
    return 0;
}

/* Writes a layer's expert file, a batch of extents at a time: gathered in order, hashed in
 * parallel (BLAKE2b, SHA-256, the running tensor digests), written in order. */
static int write_layer(job *j, vx_mf_layer *L) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", j->dir, L->file);
    size_t B = (size_t)j->batch;
    uint8_t *bufs[16] = {0};
    uint8_t b2[16][VX_DIGEST_BYTES], sha[16][VX_DIGEST_BYTES];
    L->ext = calloc((size_t)j->m.n_experts, sizeof *L->ext);
    int rc = L->ext ? 0 : -1;
    for (size_t i = 0; i < B && rc == 0; i++)
        if (!(bufs[i] = aligned_alloc(VX_ALIGN, L->extent_bytes))) rc = -1;
    rc = rc ? mw_errf(j->err, "out of memory") : note_created(j, L->file);
    vx_sink s = {.fd = -1};
    if (rc == 0) rc = vx_sink_open(&s, path, false, j->err);
    vx_b2 dig[VX_ROLE_COUNT];
    for (int r = 0; r < VX_ROLE_COUNT; r++) vx_b2_init(&dig[r]);
    for (size_t e0 = 0; e0 < (size_t)j->m.n_experts && rc == 0; e0 += B) {
        size_t k = (size_t)j->m.n_experts - e0 < B ? (size_t)j->m.n_experts - e0 : B;
        for (size_t i = 0; i < k && rc == 0; i++) rc = gather_extent(j, L, (int)(e0 + i), bufs[i]);
        if (rc == 0 && vx_hash_extents(j->pool, L, (const uint8_t *const *)bufs, k, b2, sha, dig))
            rc = mw_errf(j->err, "out of memory");
        for (size_t i = 0; i < k && rc == 0; i++) {
            vx_mf_extent *x = &L->ext[e0 + i];
            x->expert = (int)(e0 + i);
            x->offset = s.pos;
            memcpy(x->b2, b2[i], VX_DIGEST_BYTES);
            memcpy(x->sha, sha[i], VX_DIGEST_BYTES);
            rc = vx_sink_write(&s, bufs[i], L->extent_bytes, j->err);
            L->n_ext = e0 + i + 1;
        }
    }
    for (size_t i = 0; i < B; i++) free(bufs[i]);
    for (int r = 0; r < VX_ROLE_COUNT; r++)
        if (L->part_tensor[r] >= 0) vx_b2_final(&dig[r], j->m.tensors[L->part_tensor[r]].digest);
    L->file_size = s.pos;
    if (rc) {
        if (s.fd >= 0) vx_sink_abort(&s);
        return -1;
    }
    return vx_sink_close(&s, NULL, NULL, j->err);
}

static int copy_carried(job *j) {
    vx_manifest *m = &j->m;
    m->carried = calloc(j->in->n_carry ? j->in->n_carry : 1, sizeof *m->carried);
    if (!m->carried) return mw_errf(j->err, "out of memory");
    for (size_t i = 0; i < j->in->n_carry; i++) {
        const char *src = j->in->carry[i], *slash = strrchr(src, '/');
        const char *name = slash ? slash + 1 : src;
        if (!vx_safe_file_name(name) || !strcmp(name, VX_MANIFEST) ||
            !strcmp(name, VX_DENSE_FILE) || !strncmp(name, "experts-", 8))
            return mw_errf(j->err, "%s: cannot carry a file of that name into a vindex", src);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", j->dir, name);
        int fd = vx_open_file(src, NULL, j->err);
        if (fd < 0) return -1;
        vx_sink s;
        if (note_created(j, name) || vx_sink_open(&s, path, true, j->err)) {
            close(fd);
            return -1;
        }
        uint8_t buf[65536];
        ssize_t k;
        int rc = 0;
        while (rc == 0 && ((k = read(fd, buf, sizeof buf)) > 0 || (k < 0 && errno == EINTR)))
            if (k > 0) rc = vx_sink_write(&s, buf, (uint64_t)k, j->err);
        if (rc == 0 && k < 0) rc = mw_errf(j->err, "%s: read failed: %s", src, strerror(errno));
        close(fd);
        vx_mf_file *cf = &m->carried[m->n_carried++];
        cf->size = s.pos;
        if (rc == 0 && !(cf->name = strdup(name))) rc = mw_errf(j->err, "out of memory");
        if (rc) {
            vx_sink_abort(&s);
            return -1;
        }
        if (vx_sink_close(&s, cf->b2, cf->sha, j->err)) return -1;
    }
    return 0;
}

/* The source's tokenizer as a file of its own (tokenizer.gguf: a vocabulary-only GGUF holding its
 * tokenizer.* keys and general.architecture), carried and checksummed like any other file, so a
 * coordinator that mounts the vindex reads its tokenizer from one small file. A Hugging Face
 * source carries its tokenizer.json instead (copy_carried). */
static int write_tokenizer(job *j) {
    const vx_meta *src = j->in->meta;
    if (vx_meta_find(src, "tokenizer.ggml.model") < 0) return 0;
    for (size_t i = 0; i < j->in->n_carry; i++) {
        const char *slash = strrchr(j->in->carry[i], '/');
        if (!strcmp(slash ? slash + 1 : j->in->carry[i], VX_TOKENIZER_FILE)) return 0;
    }
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    if (!w) return mw_errf(j->err, "out of memory");
    vx_meta *m = vx_gguf_writer_meta(w);
    int rc = 0;
    for (size_t i = 0; i < vx_meta_count(src) && rc == 0; i++) {
        const char *k = vx_meta_key(src, i);
        if (!strncmp(k, "tokenizer.", 10) || !strcmp(k, "general.architecture"))
            rc = vx_meta_copy_entry(m, src, i) ? mw_errf(j->err, "out of memory") : 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", j->dir, VX_TOKENIZER_FILE);
    if (rc == 0) rc = note_created(j, VX_TOKENIZER_FILE);
    if (rc == 0) rc = vx_gguf_writer_write(w, path, j->err);
    vx_gguf_writer_free(w);
    if (rc) return -1;
    vx_mf_file f = {.name = strdup(VX_TOKENIZER_FILE)};
    FILE *fp = fopen(path, "rb");
    if (!f.name || !fp) {
        free(f.name);
        if (fp) fclose(fp);
        return mw_errf(j->err, "%s: cannot read back", path);
    }
    fseek(fp, 0, SEEK_END);
    f.size = (uint64_t)ftell(fp);
    fclose(fp);
    vx_mf_file *c = realloc(j->m.carried, (j->m.n_carried + 1) * sizeof *c);
    if (!c || vx_hash_range(path, 0, f.size, f.b2, f.sha, NULL, NULL, j->err)) {
        free(f.name);
        if (c) j->m.carried = c;
        return c ? -1 : mw_errf(j->err, "out of memory");
    }
    j->m.carried = c;
    j->m.carried[j->m.n_carried++] = f;
    return 0;
}

/* ---- provenance ---------------------------------------------------------------------------- */

static json_t *hexj(const uint8_t d[VX_DIGEST_BYTES]) {
    char h[VX_DIGEST_HEX];
    vx_hex(d, h);
    return json_string(h);
}

static json_t *provenance(job *j) {
    const vx_input *in = j->in;
    json_t *sources = json_array(), *tensors = json_array(), *dropped = json_array(),
           *unrec = json_array(), *trans = json_array();
    for (size_t i = 0; i < in->n_files; i++)
        json_array_append_new(sources, json_pack("{s:s,s:I,s:o}", "name", in->files[i].name, "size",
                                                 (json_int_t)in->files[i].size, "sha256",
                                                 hexj(j->ph.sha[i])));
    for (size_t i = 0; i < j->m.n_tensors; i++) {
        const vx_input_tensor *t = j->src[i];
        json_t *ranges = json_array();
        for (int r = 0; r < t->n_ranges; r++)
            json_array_append_new(ranges, json_pack("{s:i,s:s,s:I,s:I}", "file", t->ranges[r].file,
                                                    "tensor", t->ranges[r].src_name, "offset",
                                                    (json_int_t)t->ranges[r].offset, "nbytes",
                                                    (json_int_t)t->ranges[r].nbytes));
        json_array_append_new(tensors, json_pack("{s:s,s:s?,s:o}", "tensor", t->name, "relayout",
                                                 t->relayout, "ranges", ranges));
        if (j->m.tensors[i].type != t->type)
            json_array_append_new(trans, json_pack("{s:s,s:s,s:s}", "tensor", t->name, "from",
                                                   kn_type_name(t->type), "to",
                                                   kn_type_name(j->m.tensors[i].type)));
    }
    for (size_t i = 0; i < in->n_dropped; i++)
        json_array_append_new(dropped, json_pack("{s:s,s:s}", "tensor", in->dropped[i].src_name,
                                                 "rule", in->dropped[i].rule));
    for (size_t i = 0; i < in->n_unrecognised; i++)
        json_array_append_new(unrec, json_string(in->unrecognised[i]));
    return json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:o}", "tool", "moewire vindex extract", "input",
                     in->kind, "sources", sources, "tensors", tensors, "dropped", dropped,
                     "unrecognised", unrec, "transcoded", trans);
}

/* ---- the whole run ------------------------------------------------------------------------- */

static void cleanup(job *j, bool failed) {
    if (j->th_started) pthread_join(j->th, NULL);
    for (size_t i = 0; i < j->n_created; i++) {
        if (failed) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", j->dir, j->created[i]);
            unlink(path);
        }
        free(j->created[i]);
    }
    free(j->created);
    if (failed && j->made_tmp) rmdir(j->tmp);
    free(j->ph.sha);
    free(j->src);
    free(j->digest);
    free(j->row_in);
    free(j->row_f);
    kn_pool_destroy(j->pool);
    vx_manifest_free(&j->m);
}

/* OUT must be absent or an empty directory; the files go to a fresh OUT.partial-XXXXXX beside
 * it (same file system, so the final rename is atomic). */
static int make_tmp_dir(job *j) {
    size_t n = strlen(j->out);
    while (n > 1 && j->out[n - 1] == '/') n--;
    if (n + 16 >= sizeof j->tmp) return mw_errf(j->err, "%s: path too long", j->out);
    if (access(j->out, F_OK) == 0) {
        if (vx_mkdir_fresh(j->out, j->err)) return -1; /* exists: must be an empty directory */
    } else if (errno != ENOENT) {
        return mw_errf(j->err, "%s: %s", j->out, strerror(errno));
    }
    snprintf(j->tmp, sizeof j->tmp, "%.*s.partial-XXXXXX", (int)n, j->out);
    if (!mkdtemp(j->tmp))
        return mw_errf(j->err, "cannot create a directory beside %s: %s", j->out, strerror(errno));
    chmod(j->tmp, 0755); /* mkdtemp makes it 0700; a vindex is as readable as any directory */
    j->made_tmp = true;
    j->dir = j->tmp;
    return 0;
}

static int run(job *j, vx_extract_stats *st) {
    if (plan(j) || alloc_scratch(j) || check_sources(j)) return -1;
    j->pool = vx_pool_new();
    j->batch = 2 * kn_pool_size(j->pool);
    if (j->batch > 16) j->batch = 16;
    if (make_tmp_dir(j)) return -1;
    j->ph.in = j->in;
    j->ph.sha = calloc(j->in->n_files ? j->in->n_files : 1, VX_DIGEST_BYTES);
    if (!j->ph.sha) return mw_errf(j->err, "out of memory");
    if (pthread_create(&j->th, NULL, hash_sources, &j->ph) != 0)
        return mw_errf(j->err, "cannot start the provenance hashing thread");
    j->th_started = true;
    if (write_dense(j)) return -1;
    for (size_t i = 0; i < j->m.n_moe; i++)
        if (write_layer(j, &j->m.moe[i])) return -1;
    if (copy_carried(j) || write_tokenizer(j)) return -1;
    pthread_join(j->th, NULL);
    j->th_started = false;
    if (j->ph.rc) {
        *j->err = j->ph.err;
        return mw_err_wrap(j->err, "hashing the source for provenance");
    }
    if (check_sources(j)) return -1;
    if (!(j->m.provenance = provenance(j))) return mw_errf(j->err, "out of memory");
    if (vx_manifest_fingerprint(&j->m, j->m.fingerprint, j->err)) return -1;
    if (note_created(j, VX_MANIFEST) || vx_manifest_write(&j->m, j->dir, j->err)) return -1;
    /* Complete: the temporary directory becomes the vindex (replacing OUT when it is an empty
     * directory; refused when something was put there meanwhile). */
    if (rename(j->tmp, j->out) != 0)
        return mw_errf(j->err, "cannot rename %s to %s: %s", j->tmp, j->out, strerror(errno));
    j->made_tmp = false;
    if (st) {
        memset(st, 0, sizeof *st);
        st->n_dense = j->m.n_dense;
        st->n_expert_tensors = j->m.n_tensors - j->m.n_dense;
        st->n_moe_layers = j->m.n_moe;
        st->dense_bytes = j->m.dense.size;
        st->source_bytes = j->ph.bytes;
        for (size_t i = 0; i < j->m.n_moe; i++) {
            st->n_extents += j->m.moe[i].n_ext;
            st->expert_bytes += j->m.moe[i].file_size;
        }
        for (size_t i = 0; i < j->m.n_tensors; i++)
            st->n_transcoded += j->m.tensors[i].type != j->src[i]->type;
    }
    return 0;
}

int vx_extract(const vx_input *in, const char *out_dir, const vx_extract_opts *opts,
               vx_extract_stats *stats, mw_err *err) {
    job j = {.in = in, .opts = opts, .dir = out_dir, .out = out_dir, .err = err};
    int rc = run(&j, stats);
    if (rc) mw_err_wrap(err, "extract into %s", out_dir);
    cleanup(&j, rc != 0);
    return rc;
}
