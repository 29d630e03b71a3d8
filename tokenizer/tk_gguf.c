/* tokenizer/tk_gguf.c — a tokenizer from GGUF metadata (`tokenizer.ggml.*`), as llama.cpp's
 * converters write it: model type, pre-tokenizer name, tokens, token types, scores, merges,
 * special ids and the add_bos / add_eos / add_space_prefix switches. Works on a full model, a
 * vocabulary-only GGUF, and a vindex's metadata alike. Every count, type and id is checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tk_internal.h"
#include "vindex/vx_gguf.h"
#include "vindex/vx_meta.h"

/* The raw elements of a numeric array of the expected type and at least n elements; NULL with
 * *bad set when present but wrong. */
static const void *num_array(const vx_meta *m, const char *key, vx_vtype want, uint64_t n,
                             const char *what, bool *bad, mw_err *err) {
    *bad = false;
    long i = vx_meta_find(m, key);
    if (i < 0) return NULL;
    if (vx_meta_type(m, (size_t)i) != VX_ARR || vx_meta_arr_type(m, (size_t)i) != want) {
        *bad = true;
        mw_errf(err, "%s: %s must be an array of %s", what, key, vx_vtype_name(want));
        return NULL;
    }
    if (vx_meta_arr_len(m, (size_t)i) < n) {
        *bad = true;
        mw_errf(err, "%s: %s has %llu entries for %llu tokens", what, key,
                (unsigned long long)vx_meta_arr_len(m, (size_t)i), (unsigned long long)n);
        return NULL;
    }
    return vx_meta_arr_raw(m, (size_t)i);
}

static int get_id(const vx_meta *m, const char *key, int32_t *id, const char *what, mw_err *err) {
    int64_t v;
    int rc = vx_meta_get_i64(m, key, &v, err);
    if (rc < 0) return mw_err_wrap(err, "%s", what);
    if (rc == 0) return 0;
    if (v < 0 || v > INT32_MAX)
        return mw_errf(err, "%s: %s = %lld is not a token id", what, key, (long long)v);
    *id = (int32_t)v;
    return 0;
}

static int get_flag(const vx_meta *m, const char *key, bool *flag, const char *what, mw_err *err) {
    int rc = vx_meta_get_bool(m, key, flag, err);
    return rc < 0 ? mw_err_wrap(err, "%s", what) : 0;
}

static int load_tokens(tk_tokenizer *t, const vx_meta *m, uint64_t n, const char *what,
                       mw_err *err) {
    bool bad;
    const int32_t *types = num_array(m, "tokenizer.ggml.token_type", VX_I32, n, what, &bad, err);
    if (bad) return -1;
    const float *scores = num_array(m, "tokenizer.ggml.scores", VX_F32, n, what, &bad, err);
    if (bad) return -1;
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (vx_meta_arr_str(m, "tokenizer.ggml.tokens", i, &s, &len, err) != 1)
            return mw_err_wrap(err, "%s", what);
        int32_t ty = TK_T_NORMAL;
        float sc = 0;
        if (types) memcpy(&ty, types + i, sizeof ty);
        if (scores) memcpy(&sc, scores + i, sizeof sc);
        if (ty < 0 || ty > TK_T_BYTE)
            return mw_errf(err, "%s: token %llu has unknown type %d", what, (unsigned long long)i,
                           ty);
        if (tk__set_token(t, (int32_t)i, s, len, ty, sc, err)) return mw_err_wrap(err, "%s", what);
    }
    return 0;
}

static int load_merges(tk_tokenizer *t, const vx_meta *m, const char *what, mw_err *err) {
    long k = vx_meta_find(m, "tokenizer.ggml.merges");
    if (k < 0) return 0;
    if (vx_meta_type(m, (size_t)k) != VX_ARR || vx_meta_arr_type(m, (size_t)k) != VX_STR)
        return mw_errf(err, "%s: tokenizer.ggml.merges must be an array of strings", what);
    uint64_t n = vx_meta_arr_len(m, (size_t)k);
    if (n > TK_MAX_MERGES)
        return mw_errf(err, "%s: %llu merges (at most %d)", what, (unsigned long long)n,
                       TK_MAX_MERGES);
    for (uint64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (vx_meta_arr_str(m, "tokenizer.ggml.merges", i, &s, &len, err) != 1)
            return mw_err_wrap(err, "%s", what);
        /* "left right": the separator is the first space after the first character */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp)
            return mw_errf(err, "%s: merge %llu ('%.*s') has no space", what, (unsigned long long)i,
                           (int)(len > 40 ? 40 : len), s);
        if (tk__add_merge(t, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp - s) - 1, (uint32_t)i,
                          err))
            return -1;
    }
    return 0;
}

int tk_load_meta(const vx_meta *m, const char *what, tk_tokenizer **out, mw_err *err) {
    *out = NULL;
    const char *model = NULL, *pre = NULL, *arch = NULL, *tmpl = NULL;
    if (vx_meta_get_str(m, "tokenizer.ggml.model", &model, err) != 1)
        return mw_errf(err, "%s: no tokenizer (tokenizer.ggml.model is absent)", what);
    tk__kind kind;
    if (!strcmp(model, "gpt2"))
        kind = TK_BPE;
    else if (!strcmp(model, "llama"))
        kind = TK_SPM;
    else
        return mw_errf(err, "%s: unknown tokenizer model type '%s' (known: gpt2, llama)", what,
                       model);
    if (vx_meta_get_str(m, "tokenizer.ggml.pre", &pre, err) < 0)
        return mw_err_wrap(err, "%s", what);
    if (kind == TK_BPE && !pre)
        return mw_errf(err, "%s: byte-level BPE tokenizer without tokenizer.ggml.pre", what);
    if (vx_meta_get_str(m, "general.architecture", &arch, err) < 0 ||
        vx_meta_get_str(m, "tokenizer.chat_template", &tmpl, err) < 0)
        return mw_err_wrap(err, "%s", what);
    long ti = vx_meta_find(m, "tokenizer.ggml.tokens");
    if (ti < 0 || vx_meta_type(m, (size_t)ti) != VX_ARR ||
        vx_meta_arr_type(m, (size_t)ti) != VX_STR)
        return mw_errf(err, "%s: tokenizer.ggml.tokens must be an array of strings", what);
    uint64_t n = vx_meta_arr_len(m, (size_t)ti);
    if (n == 0 || n > TK_MAX_VOCAB)
        return mw_errf(err, "%s: %llu tokens (1 to %d allowed)", what, (unsigned long long)n,
                       TK_MAX_VOCAB);
    tk_tokenizer *t = tk__new(kind, (int32_t)n);
    if (!t) return mw_errf(err, "out of memory");
    if (kind == TK_SPM) { /* SentencePiece's conventions unless the file says otherwise */
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_bos = true;
        t->add_space_prefix = true;
    }
    int32_t eot = -1, eom = -1;
    int rc = load_tokens(t, m, n, what, err);
    if (!rc) rc = tk__finish(t, what, err);
    if (!rc && kind == TK_BPE) rc = tk__set_pre(t, pre, what, err);
    if (!rc && kind == TK_BPE) rc = load_merges(t, m, what, err);
    if (!rc) rc = get_id(m, "tokenizer.ggml.bos_token_id", &t->bos, what, err);
    if (!rc) rc = get_id(m, "tokenizer.ggml.eos_token_id", &t->eos, what, err);
    if (!rc) rc = get_id(m, "tokenizer.ggml.unknown_token_id", &t->unk, what, err);
    if (!rc) rc = get_id(m, "tokenizer.ggml.eot_token_id", &eot, what, err);
    if (!rc) rc = get_id(m, "tokenizer.ggml.eom_token_id", &eom, what, err);
    if (!rc) rc = get_flag(m, "tokenizer.ggml.add_bos_token", &t->add_bos, what, err);
    if (!rc) rc = get_flag(m, "tokenizer.ggml.add_eos_token", &t->add_eos, what, err);
    if (!rc) rc = get_flag(m, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, what, err);
    if (!rc && (eot >= t->n || eom >= t->n))
        rc = mw_errf(err, "%s: end-of-turn token id out of range", what);
    if (!rc && (tk__add_eog(t, t->eos) || tk__add_eog(t, eot) || tk__add_eog(t, eom)))
        rc = mw_errf(err, "out of memory");
    if (!rc && arch) {
        free(t->arch);
        if (!(t->arch = strdup(arch))) rc = mw_errf(err, "out of memory");
    }
    if (!rc && tmpl && !(t->chat_template = strdup(tmpl))) rc = mw_errf(err, "out of memory");
    if (!rc) rc = tk__ready(t, what, err);
    if (rc) {
        tk_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int tk_load_gguf(const char *path, tk_tokenizer **out, mw_err *err) {
    vx_gguf *g;
    *out = NULL;
    if (vx_gguf_open(path, &g, err)) return -1;
    int rc = tk_load_meta(vx_gguf_meta(g), path, out, err);
    vx_gguf_close(g);
    return rc;
}
