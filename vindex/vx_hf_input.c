/* vindex/vx_hf_input.c — vx_input_open_hf: a Hugging Face checkpoint directory as extract's input.
 * config.json becomes the metadata, the family's tensor rules turn the safetensors tensors into
 * GGUF-named tensors (checking every shape against the config), the remaining source tensors are
 * dropped by a named rule or listed as unrecognised, and the tokenizer and chat-template files are
 * carried. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/kn.h"
#include "vindex/vx_hf_internal.h"
#include "vindex/vx_map.h"

#define HF_MAX_CONFIG (1u << 20) /* real ones are a few kB */

/* Files copied verbatim into the vindex when present. */
static const char *const carry_names[] = {
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    /* Kimi's tiktoken tokenizer: the ranks, and the class whose pattern the tokenizer checks */
    "tiktoken.model",
    "tokenization_kimi.py",
};

typedef struct hf_input {
    vx_input in;
    vx_st_set *set;
    char *dir;
    vx_confine conf; /* config.json and the carried files must resolve inside the directory */
    const vx__hf_family *fam;
    vx__hf_hparams hp;
    uint8_t *consumed; /* per set tensor */
    size_t cap_tensors;
} hf_input;

/* One stored tensor's private block: its impl, source list, provenance ranges and name. */
typedef struct hf_tensor_block {
    vx__hf_src impl;
    const vx_st_tensor *src[]; /* then vx_input_range[n_src], then the name */
} hf_tensor_block;

static void hf_close(vx_input *in) {
    if (!in) return;
    hf_input *h = (hf_input *)in;
    for (size_t i = 0; i < in->n_tensors; i++) free(in->tensors[i].impl);
    free(in->tensors);
    free(in->files);
    free(in->dropped);
    free(in->unrecognised);
    for (size_t i = 0; i < in->n_carry; i++) free((char *)in->carry[i]);
    free(in->carry);
    vx_meta_free(in->meta);
    vx_st_set_close(h->set);
    vx_confine_free(&h->conf);
    free(h->consumed);
    free(h->hp.mla);
    free(h->dir);
    free(h);
}

/* ---- names -------------------------------------------------------------------------------- */

/* Expands {L} and {E} in a name pattern. */
static void expand(char *out, size_t cap, const char *pat, long layer, long expert) {
    size_t n = 0;
    for (const char *p = pat; *p && n + 1 < cap;) {
        if ((p[0] == '{' && (p[1] == 'L' || p[1] == 'E') && p[2] == '}')) {
            n += (size_t)snprintf(out + n, cap - n, "%ld", p[1] == 'L' ? layer : expert);
            p += 3;
        } else
            out[n++] = *p++;
    }
    out[n < cap ? n : cap - 1] = '\0';
}

/* A source name: the family's prefix (K3's "language_model."), then the pattern expanded. */
static void src_name(const hf_input *h, char *out, size_t cap, const char *pat, long layer,
                     long expert) {
    const char *pre = h->fam->prefix ? h->fam->prefix : "";
    size_t n = strlen(pre) < cap ? strlen(pre) : cap - 1;
    memcpy(out, pre, n);
    expand(out + n, cap - n, pat, layer, expert);
}

/* Whether NAME matches a pattern whose {L} and {E} stand for decimal numbers (a trailing '*'
 * matches any rest). */
static bool matches(const char *pat, const char *name) {
    while (*pat) {
        if (pat[0] == '{' && (pat[1] == 'L' || pat[1] == 'E') && pat[2] == '}') {
            if (*name < '0' || *name > '9') return false;
            while (*name >= '0' && *name <= '9') name++;
            pat += 3;
        } else if (pat[0] == '*' && pat[1] == '\0') {
            return true;
        } else if (*pat++ != *name++)
            return false;
    }
    return *name == '\0';
}

static bool per_layer(const vx__hf_rule *r) {
    return strstr(r->src[0], "{L}") != NULL;
}

/* ---- shapes ------------------------------------------------------------------------------- */

static int64_t sym_value(const vx__hf_hparams *hp, vx__hd_sym s) {
    switch (s) {
    case VX__D_NONE:
        return 1;
    case VX__D_EMBD:
        return hp->v[VX__HP_EMBD];
    case VX__D_VOCAB:
        return hp->v[VX__HP_VOCAB];
    case VX__D_Q:
        return hp->v[VX__HP_HEADS] * hp->v[VX__HP_HEAD_DIM];
    case VX__D_KV:
        return hp->v[VX__HP_KV_HEADS] * hp->v[VX__HP_HEAD_DIM];
    case VX__D_HEADS:
        return hp->v[VX__HP_HEADS];
    case VX__D_HEAD_DIM:
        return hp->v[VX__HP_HEAD_DIM];
    case VX__D_EXPERTS:
        return hp->v[VX__HP_EXPERTS];
    case VX__D_FF_EXP:
        return hp->v[VX__HP_FF_EXP];
    case VX__D_Q_LORA:
        return hp->v[VX__HP_Q_LORA];
    case VX__D_KV_LORA:
        return hp->v[VX__HP_KV_LORA];
    case VX__D_KV_A:
        return hp->v[VX__HP_KV_LORA] + hp->v[VX__HP_ROPE_DIM];
    case VX__D_QK:
        return hp->v[VX__HP_HEADS] * (hp->v[VX__HP_NOPE] + hp->v[VX__HP_ROPE_DIM]);
    case VX__D_NOPE:
        return hp->v[VX__HP_NOPE];
    case VX__D_V:
        return hp->v[VX__HP_V_DIM];
    case VX__D_O:
        return hp->v[VX__HP_HEADS] * hp->v[VX__HP_V_DIM];
    case VX__D_FF:
        return hp->v[VX__HP_FF];
    case VX__D_FF_SH:
        return hp->v[VX__HP_FF_EXP] * hp->v[VX__HP_SHARED];
    case VX__D_ONE:
        return 1;
    case VX__D_KDA:
        return hp->v[VX__HP_HEADS] * hp->v[VX__HP_KDA_HEAD];
    case VX__D_KDA_HEAD:
        return hp->v[VX__HP_KDA_HEAD];
    case VX__D_CONV:
        return hp->v[VX__HP_CONV];
    case VX__D_LAT:
        return hp->v[VX__HP_LATENT] ? hp->v[VX__HP_LATENT] : hp->v[VX__HP_EMBD];
    }
    return -1;
}

static void fmt_ne(char *buf, size_t cap, int n, const int64_t *ne) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)ne[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

static void fmt_shape(char *buf, size_t cap, const vx_st_tensor *t) {
    fmt_ne(buf, cap, t->n_dims, t->shape);
}

/* The output's ne must be what the config implies. */
static int check_ne(const hf_input *h, const vx__hf_rule *r, const char *out, const char *src,
                    int n_dims, const int64_t *ne, mw_err *err) {
    int want_n = 0;
    int64_t want[3];
    for (int i = 0; i < 3 && r->ne[i] != VX__D_NONE; i++)
        want[want_n++] = sym_value(&h->hp, r->ne[i]);
    bool ok = want_n == n_dims;
    for (int i = 0; ok && i < n_dims; i++) ok = ne[i] == want[i];
    if (ok) return 0;
    char got_s[96], want_s[96];
    fmt_ne(got_s, sizeof got_s, n_dims, ne);
    fmt_ne(want_s, sizeof want_s, want_n, want);
    return mw_errf(err, "%s: '%s' gives %s ne %s but config.json implies %s", h->dir, src, out,
                   got_s, want_s);
}

static int kn_of(const hf_input *h, const vx_st_tensor *t, mw_err *err) {
    int kn = vx_st_dtype_kn(t->dtype);
    if (kn < 0)
        mw_errf(err, "%s: tensor '%s' has dtype %s, which no ggml type holds", h->dir, t->name,
                vx_st_dtype_name(t->dtype));
    return kn;
}

/* ---- building one stored tensor ----------------------------------------------------------- */

static const char *relayout_name(vx__hr_kind kind, int parity) {
    static const char *const split[][2] = {
        [VX__HR_MXFP4] = {"gpt-oss-mxfp4: hf nibble order -> block_mxfp4 (E8M0 scale byte first); "
                          "gate_up rows de-interleaved, gate = even rows",
                          "gpt-oss-mxfp4: hf nibble order -> block_mxfp4 (E8M0 scale byte first); "
                          "gate_up rows de-interleaved, up = odd rows"},
        [VX__HR_ROWS] = {"gpt-oss gate_up bias de-interleaved, gate = even rows",
                         "gpt-oss gate_up bias de-interleaved, up = odd rows"},
        [VX__HR_TRANSPOSE] = {"gpt-oss experts [E, in, 2*out] transposed to [E, out, in]; gate_up "
                              "de-interleaved, gate = even rows",
                              "gpt-oss experts [E, in, 2*out] transposed to [E, out, in]; gate_up "
                              "de-interleaved, up = odd rows"},
    };
    switch (kind) {
    case VX__HR_DIRECT:
        return NULL;
    case VX__HR_CT_MXFP4:
        return "compressed-tensors mxfp4-pack-quantized as stored (mxfp4_ct): per expert its "
               "weight_packed bytes (element 2k low nibble, 2k+1 high), then its weight_scale "
               "bytes (E8M0 per 32 columns); experts concatenated in expert order";
    case VX__HR_STACK:
        return "stack-experts: per-expert tensors concatenated in expert order";
    case VX__HR_CONV:
        return "kda-conv: [channels, 1, taps] taken as ggml [taps, 1, channels], the same bytes";
    case VX__HR_NEG_EXP:
        return "kda-a_log: -exp(A_log) in f32, the decay rate llama.cpp's converter stores";
    case VX__HR_RES_PRODUCT:
        return "attn-res: *_res_norm.weight times *_res_proj.weight, element by element, in f32";
    case VX__HR_KV_B:
        return parity == 0 ? "mla-kv_b: each head's qk_nope key rows of kv_b_proj, transposed"
                           : "mla-kv_b: each head's v_head_dim value rows of kv_b_proj";
    case VX__HR_MXFP4:
        if (parity < 0)
            return "gpt-oss-mxfp4: hf nibble order -> block_mxfp4 (E8M0 scale byte first)";
        return split[kind][parity];
    case VX__HR_ROWS:
        return parity < 0 ? "rows copied" : split[kind][parity];
    case VX__HR_TRANSPOSE:
        if (parity < 0) return "gpt-oss experts [E, in, out] transposed to [E, out, in]";
        return split[kind][parity];
    }
    return NULL;
}

/* The rule of an FP8 tensor: the dequantization (and the rule's own relayout, if any). */
static const char *fp8_relayout(vx__hr_kind kind, int parity) {
    switch (kind) {
    case VX__HR_STACK:
        return "fp8-e4m3 x weight_scale_inv blocks -> f32 (exact product) -> bf16 (nearest even); "
               "per-expert tensors concatenated in expert order";
    case VX__HR_KV_B:
        return parity == 0 ? "fp8-e4m3 x weight_scale_inv blocks -> f32 -> bf16; mla-kv_b: each "
                             "head's qk_nope key rows of kv_b_proj, transposed"
                           : "fp8-e4m3 x weight_scale_inv blocks -> f32 -> bf16; mla-kv_b: each "
                             "head's v_head_dim value rows of kv_b_proj";
    default:
        return "fp8-e4m3 x weight_scale_inv blocks -> f32 (exact product) -> bf16 (nearest even)";
    }
}

static vx_input_tensor *new_tensor(hf_input *h, mw_err *err) {
    vx_input *in = &h->in;
    if (in->n_tensors == h->cap_tensors) {
        size_t cap = h->cap_tensors ? 2 * h->cap_tensors : 64;
        vx_input_tensor *t = realloc(in->tensors, cap * sizeof *t);
        if (!t) {
            mw_errf(err, "%s: out of memory", h->dir);
            return NULL;
        }
        in->tensors = t;
        h->cap_tensors = cap;
    }
    vx_input_tensor *t = &in->tensors[in->n_tensors];
    memset(t, 0, sizeof *t);
    return t;
}

/* Adds a stored tensor made from n sources (then n_scale FP8 block scales, src[n ..]); geometry
 * and type are filled by the caller after. */
static vx_input_tensor *add_tensor_scaled(hf_input *h, const char *name, vx__hr_kind kind,
                                          int parity, const vx_st_tensor *const *src,
                                          const int *file, int n, int n_scale, mw_err *err) {
    vx_input_tensor *t = new_tensor(h, err);
    if (!t) return NULL;
    const int n_src = n;
    n += n_scale;
    size_t head = sizeof(hf_tensor_block) + (size_t)n * sizeof(src[0]);
    size_t ranges_off = (head + 15) & ~(size_t)15;
    size_t name_off = ranges_off + (size_t)n * sizeof(vx_input_range);
    hf_tensor_block *b = calloc(1, name_off + strlen(name) + 1);
    if (!b) {
        mw_errf(err, "%s: out of memory", h->dir);
        return NULL;
    }
    vx_input_range *ranges = (vx_input_range *)((char *)b + ranges_off);
    char *nm = (char *)b + name_off;
    strcpy(nm, name);
    for (int i = 0; i < n; i++) {
        b->src[i] = src[i];
        ranges[i] = (vx_input_range){file[i], src[i]->name, src[i]->offset, src[i]->nbytes};
        h->consumed[vx_st_set_lookup(h->set, src[i]->name)] = 1;
    }
    b->impl = (vx__hf_src){.kind = kind, .parity = parity, .n_src = n_src, .src = b->src};
    if (n_scale) {
        b->impl.scale = b->src + n_src;
        b->impl.block[0] = h->hp.fp8_block[0];
        b->impl.block[1] = h->hp.fp8_block[1];
        t->read_f32 = vx__hf_read_f32;
    }
    t->name = nm;
    t->relayout = n_scale ? fp8_relayout(kind, parity) : relayout_name(kind, parity);
    t->n_ranges = n;
    t->ranges = ranges;
    t->read = vx__hf_read;
    t->impl = b;
    h->in.n_tensors++;
    return t;
}

static vx_input_tensor *add_tensor(hf_input *h, const char *name, vx__hr_kind kind, int parity,
                                   const vx_st_tensor *const *src, const int *file, int n,
                                   mw_err *err) {
    return add_tensor_scaled(h, name, kind, parity, src, file, n, 0, err);
}

/* FP8 e4m3 sources: each one's weight_scale_inv (named after it), one f32 or bf16 per block of
 * the quantization config's weight_block_size, appended to src / file after the n sources.
 * Returns the number of scales found: n when the sources are FP8, 0 when none is, -1 on error. */
static int fp8_scales(hf_input *h, const vx_st_tensor **src, int *file, int n, mw_err *err) {
    int fp8 = 0;
    for (int i = 0; i < n; i++) fp8 += src[i]->dtype == VX_ST_F8_E4M3;
    if (!fp8) return 0;
    if (fp8 != n)
        return mw_errf(err, "%s: '%s' mixes FP8 and other dtypes across its sources", h->dir,
                       src[0]->name);
    if (!h->hp.fp8_block[0])
        return mw_errf(err, "%s: tensor '%s' is F8_E4M3 but config.json has no fp8 quantization",
                       h->dir, src[0]->name);
    for (int i = 0; i < n; i++) {
        char name[600];
        snprintf(name, sizeof name, "%s_scale_inv", src[i]->name);
        const vx_st_tensor *sc = vx_st_set_find(h->set, name, &file[n + i]);
        if (!sc) return mw_errf(err, "%s: FP8 tensor '%s' has no '%s'", h->dir, src[i]->name, name);
        if (src[i]->n_dims != 2)
            return mw_errf(err, "%s: FP8 tensor '%s' has %d dimensions, expected 2", h->dir,
                           src[i]->name, src[i]->n_dims);
        const int64_t br = h->hp.fp8_block[0], bc = h->hp.fp8_block[1];
        const int64_t want0 = (src[i]->shape[0] + br - 1) / br,
                      want1 = (src[i]->shape[1] + bc - 1) / bc;
        if ((sc->dtype != VX_ST_F32 && sc->dtype != VX_ST_BF16) || sc->n_dims != 2 ||
            sc->shape[0] != want0 || sc->shape[1] != want1) {
            char a[96];
            fmt_shape(a, sizeof a, sc);
            return mw_errf(err, "%s: '%s' is %s %s; %s's %lld × %lld blocks need F32 [%lld, %lld]",
                           h->dir, name, vx_st_dtype_name(sc->dtype), a, src[i]->name,
                           (long long)br, (long long)bc, (long long)want0, (long long)want1);
        }
        src[n + i] = sc;
    }
    return n;
}

static void set_ne(vx_input_tensor *t, int n_dims, int64_t a, int64_t b, int64_t c) {
    t->n_dims = n_dims;
    t->ne[0] = a, t->ne[1] = b, t->ne[2] = c, t->ne[3] = 1;
}

/* Looks the rule's sources up for one layer. Returns 1 when all are present, 0 when none is,
 * -1 (with err) when only some are. */
static int gather(hf_input *h, const vx__hf_rule *r, long layer, const vx_st_tensor **src,
                  int *file, int *n, mw_err *err) {
    char name[512];
    const int n_exp = (int)h->hp.v[VX__HP_EXPERTS];
    int want = r->kind == VX__HR_STACK                                    ? n_exp
               : r->kind == VX__HR_CT_MXFP4                               ? 2 * n_exp
               : r->kind == VX__HR_MXFP4 || r->kind == VX__HR_RES_PRODUCT ? 2
                                                                          : 1;
    int found = 0;
    char missing[512] = "";
    const char *present = NULL;
    for (int i = 0; i < want; i++) {
        const char *pat = r->kind == VX__HR_STACK      ? r->src[0]
                          : r->kind == VX__HR_CT_MXFP4 ? r->src[i >= n_exp]
                                                       : r->src[i];
        src_name(h, name, sizeof name, pat, layer, r->kind == VX__HR_CT_MXFP4 ? i % n_exp : i);
        src[i] = vx_st_set_find(h->set, name, &file[i]);
        if (src[i]) {
            found++;
            present = src[i]->name;
        } else if (!missing[0])
            snprintf(missing, sizeof missing, "%s", name);
    }
    *n = want;
    if (found == want) return 1;
    if (!found) return 0;
    return mw_errf(err, "%s: '%s' is missing while '%s' is present", h->dir, missing, present);
}

static int build_direct(hf_input *h, const vx__hf_rule *r, const char *out,
                        const vx_st_tensor **src, int *file, mw_err *err) {
    const vx_st_tensor *s = src[0];
    const int n_scale = fp8_scales(h, src, file, 1, err);
    if (n_scale < 0) return -1;
    int kn = n_scale ? KN_BF16 : kn_of(h, s, err);
    if (kn < 0) return -1;
    if (s->n_dims < 1 || s->n_dims > 4)
        return mw_errf(err, "%s: tensor '%s' has %d dimensions", h->dir, s->name, s->n_dims);
    int64_t ne[4] = {1, 1, 1, 1};
    for (int i = 0; i < s->n_dims; i++) ne[i] = s->shape[s->n_dims - 1 - i];
    if (check_ne(h, r, out, s->name, s->n_dims, ne, err)) return -1;
    vx_input_tensor *t = add_tensor_scaled(h, out, VX__HR_DIRECT, -1, src, file, 1, n_scale, err);
    if (!t) return -1;
    t->type = (kn_type)kn;
    t->n_dims = s->n_dims;
    memcpy(t->ne, ne, sizeof ne);
    t->nbytes = n_scale ? (uint64_t)(ne[0] * ne[1]) * 2 : s->nbytes;
    vx__hf_src *si = t->impl;
    si->n_mat = 1, si->rows = ne[1], si->cols = ne[0];
    return 0;
}

static int build_stack(hf_input *h, const vx__hf_rule *r, const char *out, const vx_st_tensor **src,
                       int *file, int n, mw_err *err) {
    const vx_st_tensor *s0 = src[0];
    const int n_scale = fp8_scales(h, src, file, n, err);
    if (n_scale < 0) return -1;
    int kn = n_scale ? KN_BF16 : kn_of(h, s0, err);
    if (kn < 0) return -1;
    char a[96], b[96];
    for (int e = 0; e < n; e++) {
        const vx_st_tensor *s = src[e];
        if (s->n_dims != 2 || s->dtype != s0->dtype || s->shape[0] != s0->shape[0] ||
            s->shape[1] != s0->shape[1]) {
            fmt_shape(a, sizeof a, s0), fmt_shape(b, sizeof b, s);
            return mw_errf(err, "%s: expert tensors '%s' (%s %s) and '%s' (%s %s) differ", h->dir,
                           s0->name, vx_st_dtype_name(s0->dtype), a, s->name,
                           vx_st_dtype_name(s->dtype), b);
        }
    }
    int64_t ne[3] = {s0->shape[1], s0->shape[0], n};
    if (check_ne(h, r, out, s0->name, 3, ne, err)) return -1;
    vx_input_tensor *t = add_tensor_scaled(h, out, VX__HR_STACK, -1, src, file, n, n_scale, err);
    if (!t) return -1;
    t->type = (kn_type)kn;
    set_ne(t, 3, ne[0], ne[1], ne[2]);
    t->nbytes = n_scale ? (uint64_t)(ne[0] * ne[1] * n) * 2 : s0->nbytes * (uint64_t)n;
    vx__hf_src *si = t->impl;
    si->n_mat = n, si->rows = ne[1], si->cols = ne[0];
    return 0;
}

/* The interleave split needs an even number of source rows. */
static int split_rows(const hf_input *h, const vx_st_tensor *s, bool split, int64_t rows,
                      int64_t *out, mw_err *err) {
    if (split && rows % 2)
        return mw_errf(err, "%s: '%s' has %lld interleaved gate/up rows, an odd number", h->dir,
                       s->name, (long long)rows);
    *out = split ? rows / 2 : rows;
    return 0;
}

static int build_mxfp4(hf_input *h, const vx__hf_rule *r, const char *const *out,
                       const vx_st_tensor *const *src, const int *file, mw_err *err) {
    const vx_st_tensor *bl = src[0], *sc = src[1];
    bool split = r->flags & VX__HR_SPLIT;
    char a[96], b[96];
    fmt_shape(a, sizeof a, bl), fmt_shape(b, sizeof b, sc);
    if (bl->dtype != VX_ST_U8 || sc->dtype != VX_ST_U8 || bl->n_dims != 4 || sc->n_dims != 3 ||
        bl->shape[3] != 16 || bl->shape[0] != sc->shape[0] || bl->shape[1] != sc->shape[1] ||
        bl->shape[2] != sc->shape[2])
        return mw_errf(err,
                       "%s: MXFP4 pair '%s' (%s %s) / '%s' (%s %s) is not U8 [E, rows, G, 16] / U8 "
                       "[E, rows, G]",
                       h->dir, bl->name, vx_st_dtype_name(bl->dtype), a, sc->name,
                       vx_st_dtype_name(sc->dtype), b);
    int64_t n_mat = bl->shape[0], groups = bl->shape[2], rows = 0;
    if (split_rows(h, bl, split, bl->shape[1], &rows, err)) return -1;
    int64_t ne[3] = {groups * 32, rows, n_mat};
    for (int k = 0; k < (split ? 2 : 1); k++) {
        if (check_ne(h, r, out[k], bl->name, 3, ne, err)) return -1;
        vx_input_tensor *t = add_tensor(h, out[k], VX__HR_MXFP4, split ? k : -1, src, file, 2, err);
        if (!t) return -1;
        vx__hf_src *s = t->impl;
        s->n_mat = n_mat, s->rows = rows, s->cols = ne[0];
        t->type = KN_MXFP4;
        set_ne(t, 3, ne[0], ne[1], ne[2]);
        t->nbytes = (uint64_t)(n_mat * rows * groups) * 17;
    }
    return 0;
}

/* compressed-tensors MXFP4: n experts' weight_packed U8 [rows, cols/2] (src[0 .. n)) and
 * weight_scale U8 or F8_E8M0 [rows, cols/32] (src[n .. 2n)) → mxfp4_ct [cols, rows, n]: each
 * expert's two tensors' bytes one after the other, as they are. */
static int build_ct_mxfp4(hf_input *h, const vx__hf_rule *r, const char *out,
                          const vx_st_tensor *const *src, const int *file, int n, mw_err *err) {
    const vx_st_tensor *p0 = src[0];
    if (!h->hp.ct_mxfp4)
        return mw_errf(err,
                       "%s: '%s' is packed but config.json's quantization_config is not "
                       "compressed-tensors mxfp4-pack-quantized",
                       h->dir, p0->name);
    const int64_t rows = p0->n_dims == 2 ? p0->shape[0] : 0, cols = 2 * p0->shape[1];
    for (int e = 0; e < n; e++) {
        const vx_st_tensor *p = src[e], *sc = src[n + e];
        char a[96], b[96];
        fmt_shape(a, sizeof a, p), fmt_shape(b, sizeof b, sc);
        if (p->dtype != VX_ST_U8 || p->n_dims != 2 || p->shape[0] != rows ||
            2 * p->shape[1] != cols || cols % 32 ||
            (sc->dtype != VX_ST_U8 && sc->dtype != VX_ST_F8_E8M0) || sc->n_dims != 2 ||
            sc->shape[0] != rows || sc->shape[1] != cols / 32)
            return mw_errf(err,
                           "%s: MXFP4 pair '%s' (%s %s) / '%s' (%s %s) is not U8 [rows, cols/2] / "
                           "U8 [rows, cols/32] with cols a multiple of 32, as expert 0's [%lld, "
                           "%lld]",
                           h->dir, p->name, vx_st_dtype_name(p->dtype), a, sc->name,
                           vx_st_dtype_name(sc->dtype), b, (long long)rows, (long long)cols / 2);
    }
    int64_t ne[3] = {cols, rows, n};
    if (check_ne(h, r, out, p0->name, 3, ne, err)) return -1;
    vx_input_tensor *t = add_tensor(h, out, VX__HR_CT_MXFP4, -1, src, file, 2 * n, err);
    if (!t) return -1;
    vx__hf_src *s = t->impl;
    s->n_src = n, s->n_mat = n, s->rows = rows, s->cols = cols;
    t->type = KN_MXFP4_CT;
    set_ne(t, 3, ne[0], ne[1], ne[2]);
    t->nbytes = (uint64_t)(n * rows * (cols / 32)) * 17;
    return 0;
}

/* KDA conv taps: HF [D, 1, K] or [D, K] (taps fastest) → ggml [K, 1, D], the same bytes. */
static int build_conv(hf_input *h, const vx__hf_rule *r, const char *out, const vx_st_tensor **src,
                      int *file, mw_err *err) {
    const vx_st_tensor *s = src[0];
    const int kn = kn_of(h, s, err);
    if (kn < 0) return -1;
    const bool ok = (s->n_dims == 2) || (s->n_dims == 3 && s->shape[1] == 1);
    int64_t ne[3] = {ok ? s->shape[s->n_dims - 1] : 0, 1, ok ? s->shape[0] : 0};
    if (!ok) {
        char a[96];
        fmt_shape(a, sizeof a, s);
        return mw_errf(err,
                       "%s: conv weight '%s' is %s; expected [channels, 1, taps] or "
                       "[channels, taps]",
                       h->dir, s->name, a);
    }
    if (check_ne(h, r, out, s->name, 3, ne, err)) return -1;
    vx_input_tensor *t = add_tensor(h, out, VX__HR_CONV, -1, src, file, 1, err);
    if (!t) return -1;
    t->type = (kn_type)kn;
    set_ne(t, 3, ne[0], ne[1], ne[2]);
    t->nbytes = s->nbytes;
    return 0;
}

/* KDA A_log: H values in any shape (HF keeps [1, 1, H, 1]), F32 / BF16 / F16 → F32 −exp. */
static int build_neg_exp(hf_input *h, const vx__hf_rule *r, const char *out,
                         const vx_st_tensor **src, int *file, mw_err *err) {
    const vx_st_tensor *s = src[0];
    int64_t n = 1;
    for (int i = 0; i < s->n_dims; i++) n *= s->shape[i];
    if (s->dtype != VX_ST_F32 && s->dtype != VX_ST_BF16 && s->dtype != VX_ST_F16)
        return mw_errf(err, "%s: '%s' has dtype %s; A_log must be F32, BF16 or F16", h->dir,
                       s->name, vx_st_dtype_name(s->dtype));
    int n_dims = 0;
    int64_t ne[3] = {1, 1, 1};
    while (n_dims < 3 && r->ne[n_dims] != VX__D_NONE) n_dims++;
    ne[n_dims - 1] = n; /* the heads are the slowest of the GGUF's dimensions */
    if (check_ne(h, r, out, s->name, n_dims, ne, err)) return -1;
    vx_input_tensor *t = add_tensor(h, out, VX__HR_NEG_EXP, -1, src, file, 1, err);
    if (!t) return -1;
    vx__hf_src *si = t->impl;
    si->n_mat = 1, si->rows = 1, si->cols = n;
    si->esz = (uint64_t)vx_st_dtype_bits(s->dtype) / 8;
    t->type = KN_F32;
    set_ne(t, n_dims, ne[0], ne[1], ne[2]);
    t->nbytes = (uint64_t)n * 4;
    return 0;
}

/* K3's residual scores: a norm weight [E] and a projection [1, E] (or [E]) → F32 [E]. */
static int build_res_product(hf_input *h, const vx__hf_rule *r, const char *out,
                             const vx_st_tensor **src, int *file, mw_err *err) {
    int64_t n[2] = {1, 1};
    for (int k = 0; k < 2; k++) {
        const vx_st_tensor *s = src[k];
        for (int i = 0; i < s->n_dims; i++) n[k] *= s->shape[i];
        if ((s->dtype != VX_ST_F32 && s->dtype != VX_ST_BF16 && s->dtype != VX_ST_F16) ||
            (s->n_dims == 2 && s->shape[0] != 1) || s->n_dims > 2)
            return mw_errf(err, "%s: '%s' is not an F32, BF16 or F16 vector of one row", h->dir,
                           s->name);
    }
    if (n[0] != n[1])
        return mw_errf(err, "%s: '%s' has %lld values and '%s' %lld", h->dir, src[0]->name,
                       (long long)n[0], src[1]->name, (long long)n[1]);
    const int64_t ne[1] = {n[0]};
    if (check_ne(h, r, out, src[0]->name, 1, ne, err)) return -1;
    vx_input_tensor *t = add_tensor(h, out, VX__HR_RES_PRODUCT, -1, src, file, 2, err);
    if (!t) return -1;
    vx__hf_src *si = t->impl;
    si->n_mat = 1, si->rows = 1, si->cols = n[0];
    t->type = KN_F32;
    set_ne(t, 1, n[0], 1, 1);
    t->nbytes = (uint64_t)n[0] * 4;
    return 0;
}

/* VX__HR_ROWS ([M, rows] or [M, rows, C]) and VX__HR_TRANSPOSE ([M, C, rows]). */
static int build_rows(hf_input *h, const vx__hf_rule *r, const char *const *out,
                      const vx_st_tensor *const *src, const int *file, mw_err *err) {
    const vx_st_tensor *s = src[0];
    bool split = r->flags & VX__HR_SPLIT, tr = r->kind == VX__HR_TRANSPOSE;
    int kn = kn_of(h, s, err);
    if (kn < 0) return -1;
    if (s->n_dims != 3 && !(s->n_dims == 2 && !tr))
        return mw_errf(err, "%s: tensor '%s' has %d dimensions, expected %s", h->dir, s->name,
                       s->n_dims, tr ? "3" : "2 or 3");
    int64_t n_mat = s->shape[0], cols = s->n_dims == 2 ? 1 : s->shape[tr ? 1 : 2], rows = 0;
    if (split_rows(h, s, split, s->shape[tr ? 2 : 1], &rows, err)) return -1;
    int64_t ne[3] = {cols, rows, n_mat};
    int n_dims = s->n_dims;
    if (n_dims == 2) ne[0] = rows, ne[1] = n_mat, ne[2] = 1;
    for (int k = 0; k < (split ? 2 : 1); k++) {
        if (check_ne(h, r, out[k], s->name, n_dims, ne, err)) return -1;
        vx_input_tensor *t = add_tensor(h, out[k], r->kind, split ? k : -1, src, file, 1, err);
        if (!t) return -1;
        vx__hf_src *si = t->impl;
        si->n_mat = n_mat, si->rows = rows, si->cols = cols;
        si->esz = (uint64_t)vx_st_dtype_bits(s->dtype) / 8;
        t->type = (kn_type)kn;
        set_ne(t, n_dims, ne[0], ne[1], ne[2]);
        t->nbytes = (uint64_t)(n_mat * rows * cols) * si->esz;
    }
    return 0;
}

/* MLA's kv_b_proj [H·(nope + v), kv_lora] → attn_k_b [nope, kv_lora, H] (each head's key rows,
 * transposed: the matrix the absorbed query multiplies by) and attn_v_b [kv_lora, v, H]. */
static int build_kv_b(hf_input *h, const vx__hf_rule *r, const char *const *out,
                      const vx_st_tensor **src, int *file, mw_err *err) {
    const vx_st_tensor *s = src[0];
    const int n_scale = fp8_scales(h, src, file, 1, err);
    if (n_scale < 0) return -1;
    int kn = n_scale ? KN_BF16 : kn_of(h, s, err);
    if (kn < 0) return -1;
    const int64_t H = h->hp.v[VX__HP_HEADS], nope = h->hp.v[VX__HP_NOPE], v = h->hp.v[VX__HP_V_DIM];
    const int64_t R = h->hp.v[VX__HP_KV_LORA];
    if (s->n_dims != 2 || s->shape[0] != H * (nope + v) || s->shape[1] != R) {
        char a[96];
        fmt_shape(a, sizeof a, s);
        return mw_errf(err, "%s: '%s' is %s; config.json implies [%lld, %lld]", h->dir, s->name, a,
                       (long long)(H * (nope + v)), (long long)R);
    }
    for (int k = 0; k < 2; k++) {
        const int64_t ne[3] = {k ? R : nope, k ? v : R, H};
        if (k == 0 && check_ne(h, r, out[k], s->name, 3, ne, err)) return -1;
        vx_input_tensor *t =
            add_tensor_scaled(h, out[k], VX__HR_KV_B, k, src, file, 1, n_scale, err);
        if (!t) return -1;
        vx__hf_src *si = t->impl;
        si->n_mat = H, si->rows = ne[1], si->cols = ne[0];
        si->nope = nope, si->v = v, si->src_cols = R;
        si->esz = n_scale ? 2 : (uint64_t)vx_st_dtype_bits(s->dtype) / 8;
        t->type = (kn_type)kn;
        set_ne(t, 3, ne[0], ne[1], ne[2]);
        t->nbytes = (uint64_t)(ne[0] * ne[1] * ne[2]) * (n_scale ? 2 : si->esz);
    }
    return 0;
}

/* Applies the chain of alternative rules starting at rules[i] for one layer; returns the index
 * after the chain, or -1. */
static long apply_chain(hf_input *h, size_t i, long layer, mw_err *err) {
    const vx__hf_family *fam = h->fam;
    size_t end = i;
    while (end + 1 < fam->n_rules && (fam->rules[end].flags & VX__HR_ALT)) end++;
    long n_exp = (long)h->hp.v[VX__HP_EXPERTS];
    /* room for the sources and, for FP8, as many block scales */
    const vx_st_tensor **src = calloc(2 * (size_t)(n_exp > 2 ? n_exp : 2), sizeof *src);
    int *file = calloc(2 * (size_t)(n_exp > 2 ? n_exp : 2), sizeof *file);
    int rc = src && file ? 0 : mw_errf(err, "%s: out of memory", h->dir);
    size_t k = i;
    int present = 0;
    for (; !rc && k <= end; k++) {
        int n;
        present = gather(h, &fam->rules[k], layer, src, file, &n, err);
        if (present < 0) rc = -1;
        if (present) break;
    }
    if (!rc && present) {
        const vx__hf_rule *r = &fam->rules[k];
        char out[2][256];
        const char *outs[2] = {out[0], out[1]};
        for (int o = 0; o < 2; o++)
            if (r->out[o]) expand(out[o], sizeof out[o], r->out[o], layer, 0);
        switch (r->kind) {
        case VX__HR_DIRECT:
            rc = build_direct(h, r, out[0], src, file, err);
            break;
        case VX__HR_STACK:
            rc = build_stack(h, r, out[0], src, file, (int)n_exp, err);
            break;
        case VX__HR_MXFP4:
            rc = build_mxfp4(h, r, outs, src, file, err);
            break;
        case VX__HR_ROWS:
        case VX__HR_TRANSPOSE:
            rc = build_rows(h, r, outs, src, file, err);
            break;
        case VX__HR_KV_B:
            rc = build_kv_b(h, r, outs, src, file, err);
            break;
        case VX__HR_CT_MXFP4:
            rc = build_ct_mxfp4(h, r, out[0], src, file, (int)n_exp, err);
            break;
        case VX__HR_CONV:
            rc = build_conv(h, r, out[0], src, file, err);
            break;
        case VX__HR_NEG_EXP:
            rc = build_neg_exp(h, r, out[0], src, file, err);
            break;
        case VX__HR_RES_PRODUCT:
            rc = build_res_product(h, r, out[0], src, file, err);
            break;
        }
    } else if (!rc && !((fam->rules[end].flags & VX__HR_OPT_TIED) && h->hp.tied) &&
               !(fam->rules[end].flags & VX__HR_OPTIONAL)) {
        char want[512], out[256];
        src_name(h, want, sizeof want, fam->rules[i].src[0], layer, 0);
        expand(out, sizeof out, fam->rules[i].out[0], layer, 0);
        rc = mw_errf(
            err, "%s: family %s needs '%s'%s for %s, and the checkpoint has no such tensor", h->dir,
            fam->family->arch, want, end > i ? " (or an alternative layout)" : "", out);
    }
    free(src);
    free(file);
    return rc ? -1 : (long)end + 1;
}

/* Whether a rule applies to a layer (-1: the model's global tensors). */
static bool applies(const hf_input *h, const vx__hf_rule *r, long layer) {
    const bool dense = layer < h->hp.v[VX__HP_DENSE_LEAD];
    const bool q_lora = h->hp.v[VX__HP_Q_LORA] > 0;
    const unsigned f = r->flags;
    const bool mla = layer >= 0 && h->hp.mla && h->hp.mla[layer];
    if (((f & VX__HR_IF_KDA) && mla) || ((f & VX__HR_IF_MLA) && !mla)) return false;
    return !((f & VX__HR_IF_DENSE) && !dense) &&
           !((f & (VX__HR_IF_MOE | VX__HR_IF_SHARED)) && dense) &&
           !((f & VX__HR_IF_SHARED) && !h->hp.v[VX__HP_SHARED]) &&
           !((f & VX__HR_IF_Q_LORA) && !q_lora) && !((f & VX__HR_IF_NO_Q_LORA) && q_lora);
}

static int build_tensors(hf_input *h, mw_err *err) {
    const vx__hf_family *fam = h->fam;
    /* global tensors first, then layer by layer */
    for (long layer = -1; layer < (long)h->hp.v[VX__HP_LAYERS]; layer++) {
        for (size_t i = 0; i < fam->n_rules;) {
            const vx__hf_rule *r = &fam->rules[i];
            if (per_layer(r) != (layer >= 0) || !applies(h, r, layer)) {
                i++;
                continue;
            }
            long next = apply_chain(h, i, layer, err);
            if (next < 0) return -1;
            i = (size_t)next;
        }
    }
    return 0;
}

/* ---- coverage audit, files, carry --------------------------------------------------------- */

static int audit(hf_input *h, mw_err *err) {
    vx_input *in = &h->in;
    size_t n = vx_st_set_n_tensors(h->set);
    in->dropped = calloc(n ? n : 1, sizeof *in->dropped);
    in->unrecognised = calloc(n ? n : 1, sizeof *in->unrecognised);
    if (!in->dropped || !in->unrecognised) return mw_errf(err, "%s: out of memory", h->dir);
    for (size_t i = 0; i < n; i++) {
        if (h->consumed[i]) continue;
        const char *full = vx_st_set_tensor_at(h->set, i, NULL)->name, *name = full;
        const char *why = NULL;
        const size_t pl = h->fam->prefix ? strlen(h->fam->prefix) : 0, nl = strlen(full);
        if (pl && !strncmp(name, h->fam->prefix, pl)) name += pl; /* the text model's own name */
        for (const vx__hf_drop *d = h->fam->drops; d && d->src && !why; d++)
            if (matches(d->src, full)) why = d->why;
        /* packed weights no rule reads have no other path in: dropping them would lose a layer */
        if (!why && ((nl > 14 && !strcmp(full + nl - 14, ".weight_packed")) ||
                     (nl > 13 && !strcmp(full + nl - 13, ".weight_scale"))))
            return mw_errf(err,
                           "%s: '%s' is an MXFP4-packed tensor outside the ones family %s reads "
                           "packed (the routed experts)",
                           h->dir, full, h->fam->family->arch);
        long layer;
        int at = 0;
        if (!why && h->hp.v[VX__HP_NEXTN] &&
            sscanf(name, "model.layers.%ld.%n", &layer, &at) == 1 && at &&
            layer >= h->hp.v[VX__HP_LAYERS] &&
            layer < h->hp.v[VX__HP_LAYERS] + h->hp.v[VX__HP_NEXTN])
            why = "multi-token prediction layer (num_nextn_predict_layers): not used to generate";
        for (const vx__hf_drop *d = vx__hf_drops; d->src && !why; d++)
            if (matches(d->src, name)) why = d->why;
        if (why)
            in->dropped[in->n_dropped++] = (vx_input_drop){full, why};
        else
            in->unrecognised[in->n_unrecognised++] = full;
    }
    return 0;
}

static char *join(const char *dir, const char *name) {
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    if (p) sprintf(p, "%s/%s", dir, name);
    return p;
}

static int list_files_and_carry(hf_input *h, mw_err *err) {
    vx_input *in = &h->in;
    size_t nf = vx_st_set_n_files(h->set);
    in->files = calloc(nf ? nf : 1, sizeof *in->files);
    in->carry = calloc(sizeof carry_names / sizeof *carry_names, sizeof *in->carry);
    if (!in->files || !in->carry) return mw_errf(err, "%s: out of memory", h->dir);
    for (size_t i = 0; i < nf; i++) {
        const vx_st_file *f = vx_st_set_file(h->set, i);
        in->files[i] = (vx_input_file){vx_st_path(f), vx_st_set_file_name(h->set, i),
                                       vx_st_file_size(f), vx_st_base(f), *vx_st_file_id(f)};
    }
    in->n_files = nf;
    for (size_t i = 0; i < sizeof carry_names / sizeof *carry_names; i++) {
        char *p = join(h->dir, carry_names[i]);
        struct stat st;
        if (!p) return mw_errf(err, "%s: out of memory", h->dir);
        if (lstat(p, &st) != 0) {
            free(p);
            continue;
        }
        in->carry[in->n_carry++] = p; /* freed with the input from here on */
        if (vx_confine_check(&h->conf, p, err)) return -1;
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
            return mw_errf(err, "%s: not a regular file", p);
    }
    return 0;
}

/* The checkpoint's name: the last component of the directory's real path ("." names the cwd). */
static char *checkpoint_name(const char *dir) {
    char *real = realpath(dir, NULL);
    const char *p = real ? real : dir;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && p[start - 1] != '/') start--;
    char *name = strndup(p + start, n - start);
    free(real);
    return name;
}

int vx_input_open_hf(const char *dir, vx_input **out, mw_err *err) {
    *out = NULL;
    hf_input *h = calloc(1, sizeof *h);
    if (!h || !(h->dir = strdup(dir)) || !(h->in.meta = vx_meta_new())) {
        if (h) free(h->dir);
        free(h);
        return mw_errf(err, "%s: out of memory", dir);
    }
    h->in.kind = "safetensors";
    h->in.close = hf_close;
    h->in.impl = h;
    char *name = checkpoint_name(dir);
    char *cfg_path = join(h->dir, "config.json");
    size_t len = 0;
    char *text = NULL;
    if (!cfg_path)
        mw_errf(err, "%s: out of memory", dir);
    else if (vx_confine_init(&h->conf, dir, err) == 0 &&
             vx_confine_check(&h->conf, cfg_path, err) == 0)
        text = vx_read_file(cfg_path, HF_MAX_CONFIG, &len, err);
    int rc =
        text ? vx__hf_config_read(text, len, cfg_path, name, h->in.meta, &h->fam, &h->hp, err) : -1;
    free(text);
    free(cfg_path);
    free(name);
    if (!rc) rc = vx_st_set_open(h->dir, &h->set, err);
    if (!rc && !(h->consumed = calloc(vx_st_set_n_tensors(h->set) + 1, 1)))
        rc = mw_errf(err, "%s: out of memory", dir);
    if (!rc) rc = build_tensors(h, err);
    if (!rc) rc = audit(h, err);
    if (!rc) rc = list_files_and_carry(h, err);
    if (rc) {
        hf_close(&h->in);
        return -1;
    }
    *out = &h->in;
    return 0;
}
