/* vindex/vx_hf_config.c — config.json → GGUF-style metadata, driven by the family tables of
 * vx_hf_families.c. Every key of the config must be known to the family; values the family does
 * not support are errors naming the key. */
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_hf.h"
#include "vindex/vx_hf_internal.h"
#include "vindex/vx_json.h"

typedef struct hf_cfg {
    const vx__hf_family *fam;
    const vx_family *family; /* fam's */
    const char *what;        /* the config's path, for messages */
    json_t *root;
    vx_meta *meta;
    vx__hf_hparams *hp;
    const char *slot_key[VX__HP_COUNT]; /* which config key filled each slot */
} hf_cfg;

/* A short JSON rendering of v for messages (static buffer). */
static const char *show(const json_t *v) {
    static char buf[80];
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, sizeof buf, "%s", s ? s : "?");
    if (s && strlen(s) >= sizeof buf) strcpy(buf + sizeof buf - 4, "...");
    free(s);
    return buf;
}

/* ---- writing keys ------------------------------------------------------------------------- */

static const char *arch_key(const hf_cfg *c, const char *suffix) {
    static char key[256];
    snprintf(key, sizeof key, "%s.%s", c->family->arch, suffix);
    return key;
}

static int oom(const hf_cfg *c, mw_err *err) {
    return mw_errf(err, "%s: out of memory", c->what);
}

static int put_u32(hf_cfg *c, const char *suffix, uint32_t v, mw_err *err) {
    return vx_meta_set_u32(c->meta, arch_key(c, suffix), v) ? oom(c, err) : 0;
}
static int put_f32(hf_cfg *c, const char *suffix, double v, mw_err *err) {
    return vx_meta_set_f32(c->meta, arch_key(c, suffix), (float)v) ? oom(c, err) : 0;
}
static int put_str(hf_cfg *c, const char *key, const char *s, mw_err *err) {
    return vx_meta_set_str(c->meta, key, s, strlen(s)) ? oom(c, err) : 0;
}

/* ---- reading values ----------------------------------------------------------------------- */

/* A positive integer that fits a u32. `where` names it ("hidden_size", "rope_scaling.factor"). */
static int get_u32(const hf_cfg *c, const char *where, const json_t *v, uint32_t *out,
                   mw_err *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > UINT32_MAX)
        return mw_errf(err, "%s: '%s' is %s; expected a positive integer", c->what, where, show(v));
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* A positive finite number that fits a float. */
static int get_f32(const hf_cfg *c, const char *where, const json_t *v, double *out, mw_err *err) {
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(x > 0 && x <= FLT_MAX))
        return mw_errf(err, "%s: '%s' is %s; expected a positive number", c->what, where, show(v));
    *out = x;
    return 0;
}

static int fill_slot(hf_cfg *c, int slot, const char *key, int64_t v, mw_err *err) {
    if (slot == VX__HP_NONE) return 0;
    if (c->hp->v[slot] && c->hp->v[slot] != v)
        return mw_errf(err, "%s: '%s' (%lld) disagrees with '%s' (%lld)", c->what, key,
                       (long long)v, c->slot_key[slot], (long long)c->hp->v[slot]);
    c->hp->v[slot] = v;
    c->slot_key[slot] = key;
    return 0;
}

/* ---- the family's rows -------------------------------------------------------------------- */

static int apply_row(hf_cfg *c, const vx__hf_key *row, mw_err *err) {
    json_t *v = json_object_get(c->root, row->hf);
    json_t *dflt = NULL;
    int rc = 0;
    if (json_is_null(v)) v = NULL;
    if (!v && row->arg && (row->kind == VX__HK_U32 || row->kind == VX__HK_F32))
        v = dflt = json_loads(row->arg, JSON_DECODE_ANY, NULL); /* the HF class default */
    if (!v) return 0;
    switch (row->kind) {
    case VX__HK_U32: {
        uint32_t x;
        if (!(rc = get_u32(c, row->hf, v, &x, err)) &&
            !(rc = fill_slot(c, row->slot, row->hf, x, err)) && row->gguf)
            rc = put_u32(c, row->gguf, x, err);
        break;
    }
    case VX__HK_F32: {
        double x;
        if (!(rc = get_f32(c, row->hf, v, &x, err)) && row->gguf)
            rc = put_f32(c, row->gguf, x, err);
        break;
    }
    case VX__HK_EXPECT: {
        json_t *want = json_loads(row->arg, JSON_DECODE_ANY, NULL);
        if (!want) return oom(c, err);
        if (!json_equal(v, want))
            rc = mw_errf(err, "%s: '%s' is %s; family %s supports only %s", c->what, row->hf,
                         show(v), c->family->arch, row->arg);
        json_decref(want);
        break;
    }
    case VX__HK_IGNORE:
    case VX__HK_CODE:
        break;
    }
    json_decref(dflt);
    return rc;
}

/* After all rows: a required key must be present (a slot may be filled by another row). */
static int check_required(const hf_cfg *c, mw_err *err) {
    for (size_t i = 0; i < c->fam->n_keys; i++) {
        const vx__hf_key *row = &c->fam->keys[i];
        if (!(row->flags & VX__HK_REQUIRED)) continue;
        bool have = row->slot != VX__HP_NONE ? c->hp->v[row->slot] != 0
                                             : !json_is_null(json_object_get(c->root, row->hf)) &&
                                                   json_object_get(c->root, row->hf);
        if (!have)
            return mw_errf(err, "%s: missing required key '%s' (family %s)", c->what, row->hf,
                           c->family->arch);
    }
    return 0;
}

/* ---- rope --------------------------------------------------------------------------------- */

/* Keys a rope dictionary may hold; anything else changes the rotary math in a way no family here
 * supports. */
static const char *const rope_dict_keys[] = {"rope_type",
                                             "type",
                                             "factor",
                                             "original_max_position_embeddings",
                                             "beta_fast",
                                             "beta_slow",
                                             "truncate",
                                             "rope_theta",
                                             "partial_rotary_factor",
                                             "mscale",
                                             "mscale_all_dim"};

/* An empty word is in no list (strstr would find it everywhere without moving on). */
static bool word_in(const char *word, const char *list) {
    size_t n = strlen(word);
    if (n == 0) return false;
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

/* DeepSeek's YaRN: cos/sin carry mscale(f, mscale) / mscale(f, mscale_all_dim) and the softmax
 * scale mscale(f, mscale_all_dim)². llama.cpp's deepseek2 reads only mscale_all_dim (as
 * rope.scaling.yarn_log_multiplier = 0.1 · mscale_all_dim) and takes the ratio as 1, which is HF's
 * math exactly when mscale equals mscale_all_dim (DeepSeek-V3 and Kimi-K2 ship 1 and 1); other
 * pairs have no GGUF form and are refused. */
static int read_mscale(hf_cfg *c, json_t *d, const char *dname, mw_err *err) {
    json_t *ms = json_object_get(d, "mscale"), *all = json_object_get(d, "mscale_all_dim");
    double m = 1, a = 0;
    if ((ms && !json_is_number(ms)) || (all && !json_is_number(all)))
        return mw_errf(err, "%s: '%s.mscale' and '%s.mscale_all_dim' must be numbers", c->what,
                       dname, dname);
    if (ms) m = json_number_value(ms);
    if (all) a = json_number_value(all);
    if (!(a > 0 && a <= 100) || m != a)
        return mw_errf(err,
                       "%s: %s mscale %g / mscale_all_dim %g: only equal, positive values have "
                       "llama.cpp's deepseek2 form",
                       c->what, dname, m, a);
    return put_f32(c, "rope.scaling.yarn_log_multiplier", 0.1 * a, err);
}

/* The rope dictionary: rope_scaling or (newer configs) rope_parameters, not both; NULL when
 * neither is set. Every key it holds must be one of rope_dict_keys. */
static int rope_dict(hf_cfg *c, json_t **out, const char **name, mw_err *err) {
    json_t *d = json_object_get(c->root, "rope_scaling");
    json_t *params = json_object_get(c->root, "rope_parameters");
    *name = "rope_scaling";
    if (json_is_null(d)) d = NULL;
    if (params && !json_is_null(params)) {
        if (d) return mw_errf(err, "%s: both rope_scaling and rope_parameters are set", c->what);
        d = params;
        *name = "rope_parameters";
    }
    *out = d;
    if (!d) return 0;
    if (!json_is_object(d))
        return mw_errf(err, "%s: '%s' is %s; expected an object", c->what, *name, show(d));
    const char *k;
    json_t *v;
    json_object_foreach(d, k, v) {
        bool known = false;
        for (size_t i = 0; i < sizeof rope_dict_keys / sizeof *rope_dict_keys; i++)
            known |= !strcmp(k, rope_dict_keys[i]);
        if (known && !c->family->yarn_log_mul && !strncmp(k, "mscale", 6)) known = false;
        if (!known)
            return mw_errf(err, "%s: '%s.%s' is not supported by family %s", c->what, *name, k,
                           c->family->arch);
    }
    return 0;
}

/* The base frequency: rope_theta at the top level or in the dictionary (the same if both). */
static int read_rope_theta(hf_cfg *c, json_t *d, const char *dname, mw_err *err) {
    json_t *theta = json_object_get(c->root, "rope_theta");
    json_t *dtheta = d ? json_object_get(d, "rope_theta") : NULL;
    if (theta && dtheta && !json_equal(theta, dtheta))
        return mw_errf(err, "%s: rope_theta %s disagrees with %s.rope_theta", c->what, show(theta),
                       dname);
    if (!theta) theta = dtheta;
    if (!theta) return mw_errf(err, "%s: missing required key 'rope_theta'", c->what);
    double base;
    int rc = get_f32(c, "rope_theta", theta, &base, err);
    return rc ? rc : put_f32(c, "rope.freq_base", base, err);
}

/* The dictionary's scaling type (rope_type or type, the same if both): "default" when absent. */
static int rope_type(hf_cfg *c, json_t *d, const char *dname, const char **out, mw_err *err) {
    json_t *t1 = json_object_get(d, "rope_type"), *t2 = json_object_get(d, "type");
    if (t1 && t2 && !json_equal(t1, t2))
        return mw_errf(err, "%s: '%s.rope_type' and '%s.type' disagree", c->what, dname, dname);
    json_t *type = t1 ? t1 : t2;
    if (type && !json_is_string(type))
        return mw_errf(err, "%s: '%s.rope_type' is %s; expected a string", c->what, dname,
                       show(type));
    *out = type ? json_string_value(type) : "default";
    return 0;
}

/* YaRN, the only scaling type any family here supports: its parameters as GGUF keys. */
static int read_yarn(hf_cfg *c, json_t *d, const char *dname, mw_err *err) {
    int rc = put_str(c, arch_key(c, "rope.scaling.type"), "yarn", err);
    if (rc) return rc;
    static const struct {
        const char *hf, *gguf;
        bool is_int, required;
    } yarn[] = {
        {"factor", "rope.scaling.factor", false, true},
        {"original_max_position_embeddings", "rope.scaling.original_context_length", true, true},
        {"beta_fast", "rope.scaling.yarn_beta_fast", false, false},
        {"beta_slow", "rope.scaling.yarn_beta_slow", false, false},
    };
    char where[96];
    for (size_t i = 0; i < sizeof yarn / sizeof *yarn; i++) {
        json_t *v = json_object_get(d, yarn[i].hf);
        snprintf(where, sizeof where, "%s.%s", dname, yarn[i].hf);
        if (!v) {
            if (yarn[i].required)
                return mw_errf(err, "%s: missing required key '%s'", c->what, where);
            continue;
        }
        uint32_t u;
        double x;
        if (yarn[i].is_int) {
            if ((rc = get_u32(c, where, v, &u, err)) || (rc = put_u32(c, yarn[i].gguf, u, err)))
                return rc;
        } else if ((rc = get_f32(c, where, v, &x, err)) || (rc = put_f32(c, yarn[i].gguf, x, err)))
            return rc;
    }
    /* HF's truncate (default true) rounds the YaRN correction range to whole dimensions, as
     * llama.cpp always does; gpt-oss ships false. Carried so the model layer can decide. */
    json_t *trunc = json_object_get(d, "truncate");
    if (trunc) {
        if (!json_is_boolean(trunc))
            return mw_errf(err, "%s: '%s.truncate' is %s; expected true or false", c->what, dname,
                           show(trunc));
        if (vx_meta_set_bool(c->meta, arch_key(c, "rope.scaling.yarn_truncate"),
                             json_is_true(trunc)))
            return oom(c, err);
    }
    if (c->family->yarn_log_mul && (rc = read_mscale(c, d, dname, err))) return rc;
    /* gpt-oss repeats the original context as initial_context_length */
    json_t *icl = json_object_get(c->root, "initial_context_length");
    json_t *orig = json_object_get(d, "original_max_position_embeddings");
    if (icl && !json_equal(icl, orig))
        return mw_errf(err, "%s: initial_context_length %s disagrees with %s.%s", c->what,
                       show(icl), dname, "original_max_position_embeddings");
    return 0;
}

/* A family that rotates nothing (the Kimi line's latent attention is NoPE): rope_theta is not
 * read, and a scaling would be a rotation the model does not have. */
static int no_rope(hf_cfg *c, mw_err *err) {
    json_t *d = NULL;
    const char *dname = "rope_scaling", *ty = "default";
    if (rope_dict(c, &d, &dname, err) || (d && rope_type(c, d, dname, &ty, err))) return -1;
    if (strcmp(ty, "default") || (d && json_object_get(d, "factor")))
        return mw_errf(err, "%s: '%s' scales a rotation family %s does not have", c->what, dname,
                       c->family->arch);
    return 0;
}

static int read_rope(hf_cfg *c, mw_err *err) {
    if (!c->fam->rope_types) return no_rope(c, err);
    json_t *d = NULL;
    const char *dname = "rope_scaling";
    int rc = rope_dict(c, &d, &dname, err);
    if (rc || (rc = read_rope_theta(c, d, dname, err))) return rc;
    if (!d) {
        if (c->fam->rope_required)
            return mw_errf(err, "%s: family %s needs a rope_scaling of type %s", c->what,
                           c->family->arch, c->fam->rope_types);
        return 0;
    }
    json_t *prf = json_object_get(d, "partial_rotary_factor");
    if (prf && !(json_is_number(prf) && json_number_value(prf) == 1.0))
        return mw_errf(err, "%s: '%s.partial_rotary_factor' is %s; family %s rotates whole heads",
                       c->what, dname, show(prf), c->family->arch);
    const char *ty = "default";
    if ((rc = rope_type(c, d, dname, &ty, err))) return rc;
    if (!strcmp(ty, "default")) {
        if (json_object_get(d, "factor"))
            return mw_errf(err, "%s: '%s' has a factor but no scaling type", c->what, dname);
        if (c->fam->rope_required)
            return mw_errf(err, "%s: family %s needs a rope scaling of type %s", c->what,
                           c->family->arch, c->fam->rope_types);
        return 0;
    }
    if (!word_in(ty, c->fam->rope_types))
        return mw_errf(err,
                       "%s: rope scaling type '%s' is not supported by family %s (supported: %s)",
                       c->what, ty, c->family->arch, c->fam->rope_types);
    return read_yarn(c, d, dname, err);
}

/* ---- layer types, quantization, head size ------------------------------------------------- */

static int read_layer_types(hf_cfg *c, mw_err *err) {
    json_t *lt = json_object_get(c->root, "layer_types");
    int64_t n = c->hp->v[VX__HP_LAYERS];
    if (json_is_null(lt)) lt = NULL;
    if (lt && (!json_is_array(lt) || (int64_t)json_array_size(lt) != n))
        return mw_errf(err,
                       "%s: 'layer_types' must be an array of %lld entries (num_hidden_layers)",
                       c->what, (long long)n);
    if (!lt && !c->family->swa) return 0;
    uint8_t *pattern = calloc((size_t)n, 1);
    if (!pattern) return oom(c, err);
    int rc = 0;
    for (int64_t i = 0; i < n && !rc; i++) {
        if (!lt) {
            /* the family's pattern (GptOssConfig's default layer_types alike) */
            const int64_t p = c->family->swa_period;
            pattern[i] = p == 0 || i % p < p - 1;
            continue;
        }
        json_t *v = json_array_get(lt, (size_t)i);
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        if (!strcmp(s, "sliding_attention") && c->family->swa)
            pattern[i] = 1;
        else if (strcmp(s, "full_attention"))
            rc = mw_errf(err, "%s: layer_types[%lld] is %s; family %s supports %s", c->what,
                         (long long)i, show(v), c->family->arch,
                         c->family->swa ? "\"sliding_attention\" and \"full_attention\""
                                        : "only \"full_attention\"");
    }
    if (!rc && c->family->swa &&
        vx_meta_set_arr(c->meta, arch_key(c, "attention.sliding_window_pattern"), VX_BOOL, pattern,
                        (uint64_t)n))
        rc = oom(c, err);
    free(pattern);
    return rc;
}

/* compressed-tensors keys and what each must hold: the JSON value (any of '|'-separated
 * alternatives), or NULL when it does not affect how the stored weights are read. */
typedef struct ct_key {
    const char *key, *want;
} ct_key;

static const ct_key ct_top[] = {
    {"quant_method", NULL},      /* checked by the caller */
    {"format", NULL},            /* checked by ct_format */
    {"config_groups", NULL},     /* each group checked by ct_group */
    {"ignore", NULL},            /* modules left unquantized: the tensors present say so */
    {"kv_cache_scheme", "null"}, /* a quantized cache would change the attention */
    {"quantization_status", "\"compressed\""},
    {"sparsity_config", "null|{}"},
    {"transform_config", "null|{}"},
    {"version", NULL},
    {"global_compression_ratio", NULL},
    {"provider", NULL},
};
static const ct_key ct_group_keys[] = {
    {"targets", NULL}, /* module classes or patterns: the tensors present say which are packed */
    {"format", NULL},
    {"weights", NULL},
    {"input_activations", "null"}, /* weight-only: activations follow --numerics */
    {"output_activations", "null"},
};
/* the MXFP4 scheme: e2m1 codes in groups of 32 with one E8M0 scale, symmetric, static */
static const ct_key ct_weights[] = {
    {"num_bits", "4"},     {"type", "\"float\""},
    {"group_size", "32"},  {"strategy", "\"group\""},
    {"symmetric", "true"}, {"dynamic", "false"},
    {"actorder", "null"},  {"block_structure", "null"},
    {"zp_dtype", "null"},  {"scale_dtype", "null|\"torch.uint8\"|\"uint8\""},
    {"observer", NULL},    {"observer_kwargs", NULL},
};

static bool ct_matches(const json_t *v, const char *want) {
    char alt[64];
    for (const char *p = want; *p;) {
        size_t n = strcspn(p, "|");
        snprintf(alt, sizeof alt, "%.*s", (int)n, p);
        json_t *w = json_loads(alt, JSON_DECODE_ANY, NULL);
        bool eq = w && json_equal(v, w);
        json_decref(w);
        if (eq) return true;
        p += n + (p[n] == '|');
    }
    return false;
}

/* Every key of obj must be in keys[] and hold what it says; `where` names obj in messages. */
static int ct_check(const hf_cfg *c, const json_t *obj, const char *where, const ct_key *keys,
                    size_t n, mw_err *err) {
    if (!json_is_object(obj))
        return mw_errf(err, "%s: '%s' is %s; expected an object", c->what, where, show(obj));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        size_t i = 0;
        while (i < n && strcmp(keys[i].key, k)) i++;
        if (i == n)
            return mw_errf(err, "%s: '%s.%s' (%s) is not supported", c->what, where, k, show(v));
        if (keys[i].want && !ct_matches(v, keys[i].want))
            return mw_errf(err, "%s: '%s.%s' is %s; the MXFP4 pack format reads only %s", c->what,
                           where, k, show(v), keys[i].want);
    }
    return 0;
}

static int ct_format(const hf_cfg *c, const json_t *f, const char *where, mw_err *err) {
    if (!f || json_is_null(f)) return 0;
    if (json_is_string(f) && !strcmp(json_string_value(f), "mxfp4-pack-quantized")) return 1;
    return mw_errf(err,
                   "%s: '%s' is %s; the compressed-tensors format moewire reads byte for byte is "
                   "\"mxfp4-pack-quantized\"",
                   c->what, where, show(f));
}

/* quant_method compressed-tensors: the MXFP4 pack format only, stated at the top or by every
 * group; any other format, scheme or switch is an error naming it. */
static int read_compressed_tensors(hf_cfg *c, const json_t *q, mw_err *err) {
    char where[160];
    if (ct_check(c, q, "quantization_config", ct_top, sizeof ct_top / sizeof *ct_top, err))
        return -1;
    int fmt = ct_format(c, json_object_get(q, "format"), "quantization_config.format", err);
    if (fmt < 0) return -1;
    const json_t *groups = json_object_get(q, "config_groups");
    if (!json_is_object(groups) || json_object_size(groups) == 0)
        return mw_errf(err, "%s: quantization_config.config_groups must be a non-empty object",
                       c->what);
    const char *name;
    json_t *g;
    json_object_foreach((json_t *)groups, name, g) {
        snprintf(where, sizeof where, "quantization_config.config_groups.%.40s", name);
        if (ct_check(c, g, where, ct_group_keys, sizeof ct_group_keys / sizeof *ct_group_keys, err))
            return -1;
        snprintf(where, sizeof where, "quantization_config.config_groups.%.40s.format", name);
        int gf = ct_format(c, json_object_get(g, "format"), where, err);
        if (gf < 0) return -1;
        if (!gf && !fmt)
            return mw_errf(err, "%s: quantization_config names no format (for group '%s')", c->what,
                           name);
        snprintf(where, sizeof where, "quantization_config.config_groups.%.40s.weights", name);
        if (ct_check(c, json_object_get(g, "weights"), where, ct_weights,
                     sizeof ct_weights / sizeof *ct_weights, err))
            return -1;
    }
    c->hp->ct_mxfp4 = true;
    return 0;
}

/* quantization_config: the family's quant_method; for fp8 (DeepSeek's e4m3 weights with one f32
 * weight_scale_inv per block) the block size, read by the tensor rules; for compressed-tensors the
 * MXFP4 pack format. */
static int read_quantization(hf_cfg *c, mw_err *err) {
    json_t *q = json_object_get(c->root, "quantization_config");
    if (!q || json_is_null(q)) return 0;
    json_t *m = json_is_object(q) ? json_object_get(q, "quant_method") : NULL;
    if (!json_is_string(m))
        return mw_errf(err, "%s: quantization_config has no quant_method string", c->what);
    const char *method = json_string_value(m);
    if (!c->fam->quant_method || strcmp(method, c->fam->quant_method))
        return mw_errf(err,
                       "%s: quantization_config.quant_method '%s' is not supported by family %s",
                       c->what, method, c->family->arch);
    if (!strcmp(method, "compressed-tensors")) return read_compressed_tensors(c, q, err);
    const bool fp8 = !strcmp(method, "fp8");
    const char *k;
    json_t *v;
    json_object_foreach(q, k, v) {
        if (!strcmp(k, "quant_method") || !strcmp(k, "modules_to_not_convert")) continue;
        /* activations are quantized at run time by DeepSeek's kernels; ours follow --numerics */
        if (fp8 && !strcmp(k, "activation_scheme") && json_is_string(v) &&
            !strcmp(json_string_value(v), "dynamic"))
            continue;
        if (fp8 && !strcmp(k, "fmt") && json_is_string(v) && !strcmp(json_string_value(v), "e4m3"))
            continue;
        if (fp8 && !strcmp(k, "weight_block_size")) continue;
        return mw_errf(err, "%s: 'quantization_config.%s' (%s) is not supported", c->what, k,
                       show(v));
    }
    if (!fp8) return 0;
    json_t *bs = json_object_get(q, "weight_block_size");
    for (int i = 0; i < 2; i++) {
        json_t *b =
            json_is_array(bs) && json_array_size(bs) == 2 ? json_array_get(bs, (size_t)i) : NULL;
        if (!json_is_integer(b) || json_integer_value(b) < 1 || json_integer_value(b) > 1 << 16)
            return mw_errf(err,
                           "%s: 'quantization_config.weight_block_size' must be two positive "
                           "integers",
                           c->what);
        c->hp->fp8_block[i] = json_integer_value(b);
    }
    return 0;
}

/* Upper bounds that keep later allocations sane whatever the config says. */
static const struct {
    int slot;
    int64_t max;
} slot_max[] = {{VX__HP_LAYERS, 1 << 16}, {VX__HP_EXPERTS, 1 << 16},  {VX__HP_KV_LORA, 1 << 16},
                {VX__HP_NOPE, 1 << 16},   {VX__HP_ROPE_DIM, 512},     {VX__HP_V_DIM, 1 << 16},
                {VX__HP_HEADS, 1 << 16},  {VX__HP_KV_HEADS, 1 << 16}, {VX__HP_HEAD_DIM, 1 << 16}};

static int check_bounds(const hf_cfg *c, mw_err *err) {
    const vx__hf_hparams *hp = c->hp;
    for (size_t i = 0; i < sizeof slot_max / sizeof *slot_max; i++)
        if (hp->v[slot_max[i].slot] > slot_max[i].max)
            return mw_errf(err, "%s: '%s' is %lld, more than the %lld supported", c->what,
                           c->slot_key[slot_max[i].slot], (long long)hp->v[slot_max[i].slot],
                           (long long)slot_max[i].max);
    return 0;
}

static int read_rest(hf_cfg *c, mw_err *err) {
    vx__hf_hparams *hp = c->hp;
    json_t *tie = json_object_get(c->root, "tie_word_embeddings");
    if (tie && !json_is_boolean(tie))
        return mw_errf(err, "%s: 'tie_word_embeddings' is %s; expected true or false", c->what,
                       show(tie));
    hp->tied = json_is_true(tie); /* both families' HF classes default to false */
    if (!hp->v[VX__HP_HEAD_DIM] && c->fam->derive_head_dim) {
        if (hp->v[VX__HP_EMBD] % hp->v[VX__HP_HEADS])
            return mw_errf(err,
                           "%s: no head_dim and hidden_size %lld is not a multiple of %lld heads",
                           c->what, (long long)hp->v[VX__HP_EMBD], (long long)hp->v[VX__HP_HEADS]);
        hp->v[VX__HP_HEAD_DIM] = hp->v[VX__HP_EMBD] / hp->v[VX__HP_HEADS];
        int rc = put_u32(c, "attention.key_length", (uint32_t)hp->v[VX__HP_HEAD_DIM], err);
        if (rc ||
            (rc = put_u32(c, "attention.value_length", (uint32_t)hp->v[VX__HP_HEAD_DIM], err)))
            return rc;
    }
    if (hp->v[VX__HP_KV_HEADS] && hp->v[VX__HP_HEADS] % hp->v[VX__HP_KV_HEADS])
        return mw_errf(err,
                       "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                       c->what, (long long)hp->v[VX__HP_HEADS], (long long)hp->v[VX__HP_KV_HEADS]);
    if (hp->v[VX__HP_EXPERTS_USED] > hp->v[VX__HP_EXPERTS])
        return mw_errf(err, "%s: %s (%lld) exceeds the expert count (%lld)", c->what,
                       c->slot_key[VX__HP_EXPERTS_USED], (long long)hp->v[VX__HP_EXPERTS_USED],
                       (long long)hp->v[VX__HP_EXPERTS]);
    return 0;
}

/* ---- entry points ------------------------------------------------------------------------- */

static int find_family(hf_cfg *c, mw_err *err) {
    json_t *mt = json_object_get(c->root, "model_type");
    if (!json_is_string(mt)) return mw_errf(err, "%s: missing or non-string model_type", c->what);
    c->fam = vx__hf_family_find(json_string_value(mt));
    if (!c->fam)
        return mw_errf(err, "%s: model_type '%s' is not a supported family (supported: %s)",
                       c->what, json_string_value(mt), vx__hf_family_names());
    c->family = c->fam->family;
    json_t *archs = json_object_get(c->root, "architectures");
    if (!archs || json_is_null(archs)) return 0;
    bool found = false;
    for (size_t i = 0; json_is_array(archs) && i < json_array_size(archs); i++) {
        json_t *a = json_array_get(archs, i);
        found |= json_is_string(a) && !strcmp(json_string_value(a), c->fam->hf_class);
    }
    if (!found)
        return mw_errf(err, "%s: architectures %s does not name %s (model_type %s)", c->what,
                       show(archs), c->fam->hf_class, json_string_value(mt));
    return 0;
}

/* A multimodal config (K3): every key beside text_config must be one of the family's outer keys;
 * the text model's config is text_config, given the outer quantization_config when it has none. */
static int enter_text_config(hf_cfg *c, mw_err *err) {
    const char *k;
    json_t *v;
    json_object_foreach(c->root, k, v) {
        const vx__hf_key *row = NULL;
        for (size_t i = 0; i < c->fam->n_outer_keys && !row; i++)
            if (!strcmp(c->fam->outer_keys[i].hf, k)) row = &c->fam->outer_keys[i];
        if (!row)
            return mw_errf(err, "%s: key '%s' is not known to family %s (it may change the math)",
                           c->what, k, c->family->arch);
        if (row->kind == VX__HK_EXPECT && apply_row(c, row, err)) return -1;
    }
    json_t *tc = json_object_get(c->root, "text_config"), *q;
    if (!json_is_object(tc))
        return mw_errf(err, "%s: family %s reads its text model from a 'text_config' object",
                       c->what, c->family->arch);
    json_t *inner = json_deep_copy(tc);
    if (!inner) return oom(c, err);
    q = json_object_get(c->root, "quantization_config");
    if (q && !json_is_null(q) && json_object_get(inner, "quantization_config")) {
        json_decref(inner);
        return mw_errf(err, "%s: quantization_config is given twice (top level and text_config)",
                       c->what);
    }
    if (q && !json_is_null(q)) json_object_set(inner, "quantization_config", q);
    json_decref(c->root);
    c->root = inner;
    return 0;
}

int vx__hf_config_read(const char *text, size_t len, const char *what, const char *name,
                       vx_meta *meta, const vx__hf_family **fam, vx__hf_hparams *hp, mw_err *err) {
    memset(hp, 0, sizeof *hp);
    static const vx_json_limits lim = {
        .max_depth = 16, .bytes_per_object = 16, .bytes_per_array = 16, .bytes_per_item = 4};
    hf_cfg c = {.what = what, .meta = meta, .hp = hp};
    c.root = vx_json_parse(text, len, what, &lim, err);
    if (!c.root) return -1;
    int rc = 0;
    if (!json_is_object(c.root)) {
        rc = mw_errf(err, "%s: not a JSON object", what);
        goto out;
    }
    if ((rc = find_family(&c, err))) goto out;
    if (c.fam->outer_keys && (rc = enter_text_config(&c, err))) goto out;
    const char *k;
    json_t *v;
    json_object_foreach(c.root, k, v) {
        if (!vx__hf_key_find(c.fam, k)) {
            rc = mw_errf(err, "%s: key '%s' is not known to family %s (it may change the math)",
                         what, k, c.family->arch);
            goto out;
        }
    }
    for (size_t i = 0; i < c.fam->n_keys && !rc; i++) rc = apply_row(&c, &c.fam->keys[i], err);
    if (rc || (rc = check_required(&c, err)) || (rc = check_bounds(&c, err)) ||
        (rc = read_rope(&c, err)) || (rc = read_layer_types(&c, err)) ||
        (rc = read_quantization(&c, err)) || (rc = read_rest(&c, err)) ||
        (c.fam->derive && (rc = c.fam->derive(c.root, what, c.family->arch, meta, hp, err))))
        goto out;
    if ((rc = put_str(&c, "general.architecture", c.family->arch, err))) goto out;
    if (name && (rc = put_str(&c, "general.name", name, err))) goto out;
    *fam = c.fam;
out:
    json_decref(c.root);
    if (rc) {
        free(hp->mla);
        hp->mla = NULL;
    }
    return rc;
}

int vx_hf_config_parse(const char *text, size_t len, const char *what, const char *name,
                       vx_meta *meta, mw_err *err) {
    const vx__hf_family *fam;
    vx__hf_hparams hp;
    int rc = vx__hf_config_read(text, len, what, name, meta, &fam, &hp, err);
    free(hp.mla);
    return rc;
}
