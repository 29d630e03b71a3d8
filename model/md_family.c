/* model/md_family.c — the model's family table (gpt-oss, qwen3moe, deepseek2, kimi-linear,
 * kimi-k3: one row per row of vindex/vx_family.c) and the metadata reader that turns a row plus a
 * model's keys into an md_config. The rules are those of llama.cpp's loader, written up in
 * tests/fixtures/llamacpp/FORMATS.md §4 (gpt-oss), §5 (qwen3moe), §7 (deepseek2), §8
 * (kimi-linear), §9 (kimi-k3). */
#include "model/md_family.h"

#include "model/md_rope.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/mw_names.h"

static const md_family families[] = {
    {
        .family = &vx_families[VX_FAMILY_GPT_OSS],
        .qkv_bias = true,
        .o_bias = true,
        .qk_norm = false,
        .sinks = true,
        .rope_layout = MD_ROPE_NEOX,
        .yarn_truncate = true,
        .ffn_norm = "post_attention_norm",
        .output_optional = false,
        .ff_exp_from_ff = false,
        .router = {.gate = MD_GATE_SOFTMAX_SELECTED, .logit_bias = true, .scale = 1.0f},
        .glu = KN_GLU_SWIGLU_OAI,
        .glu_alpha = 1.702f,
        .glu_limit = 7.0f,
        .expert_bias = true,
    },
    {
        .family = &vx_families[VX_FAMILY_QWEN3MOE],
        .qkv_bias = false,
        .o_bias = false,
        .qk_norm = true,
        .sinks = false,
        .rope_layout = MD_ROPE_NEOX,
        .yarn_truncate = true,
        .ffn_norm = "ffn_norm",
        .output_optional = true,
        .ff_exp_from_ff = true,
        .router = {.gate = MD_GATE_SOFTMAX, .norm = true, .scale = 1.0f},
        .glu = KN_GLU_SWIGLU,
        .expert_bias = false,
    },
    {
        /* DeepSeek-V2/V3, Kimi-K2 and relatives: latent attention, NORM rope pairs, YaRN with
         * a log multiplier, dense leading layers, shared experts, a router read from the keys */
        .family = &vx_families[VX_FAMILY_DEEPSEEK2],
        .attn = MD_ATTN_MLA,
        .rope_layout = MD_ROPE_NORM,
        .yarn_truncate = true,
        .ffn_norm = "ffn_norm",
        .output_optional = true,
        .dense_and_shared = true,
        .router_from_keys = true,
        .router = {.gate = MD_GATE_SOFTMAX, .select_bias = true},
        .glu = KN_GLU_SWIGLU,
    },
    {
        /* Kimi Linear: KDA layers interleaved with latent attention that carries no position
         * (FORMATS.md §8); DeepSeek-V3's MoE with a sigmoid router that always renormalizes */
        .family = &vx_families[VX_FAMILY_KIMI_LINEAR],
        .attn = MD_ATTN_MLA,
        .q_lora = MD_Q_LORA_NONE,
        .kda = true,
        .rope_layout = MD_ROPE_NONE,
        .ffn_norm = "ffn_norm",
        .output_optional = false,
        .dense_and_shared = true,
        .shared_optional = true,
        .router_from_keys = true,
        .gating_required = true,
        .norm_fixed = true,
        .select_bias_required = true,
        .router = {.gate = MD_GATE_SIGMOID, .select_bias = true, .norm = true},
        .glu = KN_GLU_SWIGLU,
    },
    {
        /* Kimi K3: kimi-linear plus attention residuals, a latent MoE, SiTU in every FFN, gated
         * latent attention with an optional query down-projection, a full-rank KDA output gate
         * and a bounded decay (FORMATS.md §9) */
        .family = &vx_families[VX_FAMILY_KIMI_K3],
        .attn = MD_ATTN_MLA,
        .q_lora = MD_Q_LORA_OPTIONAL,
        .kda = true,
        .kda_gate_full = true,
        .kda_lower_bound = true,
        .attn_gate = true,
        .attn_res = true,
        .latent_moe = true,
        .rope_layout = MD_ROPE_NONE,
        .ffn_norm = "ffn_norm",
        .output_optional = false,
        .dense_and_shared = true,
        .shared_optional = true,
        .router_from_keys = true,
        .gating_required = true,
        .select_bias_required = true,
        .router = {.gate = MD_GATE_SIGMOID, .select_bias = true},
        .glu = KN_GLU_SITU,
    },
};

const md_family *md_family_of(const vx_family *f) {
    for (size_t i = 0; f && i < sizeof families / sizeof families[0]; i++)
        if (families[i].family == f) return &families[i];
    return NULL;
}

const md_family *md_family_find(const char *arch) {
    return md_family_of(vx_family_find(arch));
}

static const char *const rope_scaling_names[MD_ROPE_SCALING_COUNT] = {"none", "linear", "yarn",
                                                                      "llama3"};
static const char *const gate_names[MD_GATE_COUNT] = {"softmax", "sigmoid", "softmax-selected"};

const char *md_rope_scaling_name(md_rope_scaling s) {
    return (unsigned)s < MD_ROPE_SCALING_COUNT ? rope_scaling_names[s] : "unknown";
}

const char *md_gate_name(md_gate g) {
    return (unsigned)g < MD_GATE_COUNT ? gate_names[g] : "unknown";
}

/* ---- typed key access with the architecture prefix ------------------------------------------ */

typedef struct reader {
    const vx_meta *m;
    const vx_family *fam;
    char key[160];
} reader;

static const char *k(reader *r, const char *suffix) {
    snprintf(r->key, sizeof r->key, "%s.%s", r->fam->arch, suffix);
    return r->key;
}

/* 1 found, 0 absent, -1 error (err set). Integers must lie in [lo, hi]. */
static int get_int(reader *r, const char *suffix, int64_t lo, int64_t hi, int64_t *out,
                   mw_err *err) {
    int rc = vx_meta_get_i64(r->m, k(r, suffix), out, err);
    if (rc <= 0) return rc;
    if (*out < lo || *out > hi)
        return mw_errf(err, "model config: %s = %lld is out of range [%lld, %lld]", r->key,
                       (long long)*out, (long long)lo, (long long)hi);
    return 1;
}

static int req_int(reader *r, const char *suffix, int64_t lo, int64_t hi, int64_t *out,
                   mw_err *err) {
    int rc = get_int(r, suffix, lo, hi, out, err);
    if (rc == 0) return mw_errf(err, "model config: missing required key '%s'", r->key);
    return rc < 0 ? -1 : 0;
}

/* Floats must be finite and > lo (exclusive) when lo_excl, else >= lo. */
static int get_float(reader *r, const char *suffix, double lo, bool lo_excl, float *out,
                     mw_err *err) {
    double v;
    int rc = vx_meta_get_f64(r->m, k(r, suffix), &v, err);
    if (rc <= 0) return rc;
    if (!isfinite(v) || (lo_excl ? v <= lo : v < lo))
        return mw_errf(err, "model config: %s = %g is out of range (must be %s %g)", r->key, v,
                       lo_excl ? ">" : ">=", lo);
    *out = (float)v;
    return 1;
}

static int req_float(reader *r, const char *suffix, double lo, bool lo_excl, float *out,
                     mw_err *err) {
    int rc = get_float(r, suffix, lo, lo_excl, out, err);
    if (rc == 0) return mw_errf(err, "model config: missing required key '%s'", r->key);
    return rc < 0 ? -1 : 0;
}

/* ---- RoPE ----------------------------------------------------------------------------------- */

/* The scaling type and factor. llama.cpp's rule: no type key means linear scaling by
 * rope.scaling.factor (none if absent). *has_factor says whether the factor was stated. */
static int read_rope_scaling(reader *r, md_rope *p, int *has_factor, mw_err *err) {
    const char *type = NULL;
    int rc = vx_meta_get_str(r->m, k(r, "rope.scaling.type"), &type, err);
    if (rc < 0) return -1;
    float factor = 1.0f;
    *has_factor = get_float(r, "rope.scaling.factor", 0, true, &factor, err);
    if (*has_factor < 0) return -1;
    if (!type) {
        p->scaling = *has_factor ? MD_ROPE_SCALING_LINEAR : MD_ROPE_SCALING_NONE;
    } else {
        const int s = mw_names_find(type, rope_scaling_names, MD_ROPE_SCALING_COUNT,
                                    sizeof rope_scaling_names[0]);
        if (s < 0) {
            char names[64];
            return mw_errf(err, "model config: %s = '%s' is not a known RoPE scaling (%s)",
                           k(r, "rope.scaling.type"), type,
                           mw_names_join(names, sizeof names, rope_scaling_names,
                                         MD_ROPE_SCALING_COUNT, sizeof rope_scaling_names[0]));
        }
        p->scaling = (md_rope_scaling)s;
    }
    if (p->scaling != MD_ROPE_SCALING_NONE) p->factor = factor;
    return get_float(r, "rope.scaling.attn_factor", 0, true, &p->attn_factor, err) < 0 ? -1 : 0;
}

/* YaRN's parameters, and whether its correction range is rounded to whole dimensions. */
static int read_yarn(reader *r, const md_config *c, md_rope *p, mw_err *err) {
    /* Hugging Face rounds the YaRN correction range only when rope_scaling.truncate is true (its
     * default; released gpt-oss configs say false); extract carries it as this key. */
    bool truncate = c->family->yarn_truncate;
    int rc = vx_meta_get_bool(r->m, k(r, "rope.scaling.yarn_truncate"), &truncate, err);
    if (rc < 0) return -1;
    if (rc && p->scaling != MD_ROPE_SCALING_YARN)
        return mw_errf(err, "model config: %s is set, but the RoPE scaling is %s, not yarn", r->key,
                       md_rope_scaling_name(p->scaling));
    if (p->scaling != MD_ROPE_SCALING_YARN) return 0;
    /* llama.cpp's defaults (gpt-oss's and DeepSeek-V3's values); a file may state them. */
    p->beta_fast = 32.0f;
    p->beta_slow = 1.0f;
    if (get_float(r, "rope.scaling.yarn_beta_fast", 0, true, &p->beta_fast, err) < 0 ||
        get_float(r, "rope.scaling.yarn_beta_slow", 0, true, &p->beta_slow, err) < 0)
        return -1;
    p->yarn_fractional = !truncate;
    /* stored as 0.1 · mscale_all_dim (the converter multiplies, llama.cpp divides) */
    float mul = 0.0f;
    if (r->fam->yarn_log_mul &&
        get_float(r, "rope.scaling.yarn_log_multiplier", 0, false, &mul, err) < 0)
        return -1;
    p->yarn_log_mul = mul / 0.1f;
    return 0;
}

static int read_llama3(reader *r, md_rope *p, mw_err *err) {
    if (req_float(r, "rope.scaling.low_freq_factor", 0, true, &p->low_freq_factor, err) ||
        req_float(r, "rope.scaling.high_freq_factor", 0, true, &p->high_freq_factor, err))
        return -1;
    if (p->high_freq_factor <= p->low_freq_factor)
        return mw_errf(err, "model config: %s must exceed %s", "rope.scaling.high_freq_factor",
                       "rope.scaling.low_freq_factor");
    return 0;
}

/* No rotation (the Kimi line): only the width of the position part is read; llama.cpp reads the
 * other rope keys such a file may carry and never uses them. */
static int read_nope(reader *r, md_config *c, mw_err *err) {
    int64_t v;
    if (req_int(r, "rope.dimension_count", 0, c->head_dim_k - 1, &v, err)) return -1;
    c->rope.n_rot = (int)v;
    c->rope_swa = c->rope;
    return 0;
}

static int read_rope(reader *r, md_config *c, mw_err *err) {
    md_rope *p = &c->rope;
    memset(p, 0, sizeof *p);
    p->layout = c->family->rope_layout;
    p->factor = 1.0f;
    p->attn_factor = 1.0f;
    if (p->layout == MD_ROPE_NONE) return read_nope(r, c, err);
    int64_t v;
    int rc = get_int(r, "rope.dimension_count", 2, 2 * MD_ROPE_MAX_PAIRS, &v, err);
    if (rc < 0) return -1;
    p->n_rot = rc ? (int)v : c->head_dim_k;
    if (p->n_rot > c->head_dim_k || p->n_rot % 2)
        return mw_errf(err, "model config: %s = %d must be even and at most the key length %d",
                       k(r, "rope.dimension_count"), p->n_rot, c->head_dim_k);
    if (req_float(r, "rope.freq_base", 0, true, &p->freq_base, err)) return -1;
    int has_factor;
    if (read_rope_scaling(r, p, &has_factor, err)) return -1;
    if (p->scaling == MD_ROPE_SCALING_YARN || p->scaling == MD_ROPE_SCALING_LLAMA3) {
        if (!has_factor)
            return mw_errf(err, "model config: missing required key '%s' (%s RoPE scaling)",
                           k(r, "rope.scaling.factor"), md_rope_scaling_name(p->scaling));
        if (req_int(r, "rope.scaling.original_context_length", 1, INT32_MAX, &v, err)) return -1;
        p->n_ctx_orig = (int)v;
    }
    if (read_yarn(r, c, p, err) || (p->scaling == MD_ROPE_SCALING_LLAMA3 && read_llama3(r, p, err)))
        return -1;
    c->rope_swa = c->rope;
    if (r->fam->swa && get_float(r, "rope.freq_base_swa", 0, true, &c->rope_swa.freq_base, err) < 0)
        return -1;
    if (md_rope_init(&c->rope, err) || md_rope_init(&c->rope_swa, err))
        return mw_err_wrap(err, "model config (%s RoPE)", c->arch);
    return 0;
}

/* ---- sliding window ------------------------------------------------------------------------- */

static int read_swa(reader *r, md_config *c, mw_err *err) {
    c->layer_swa = calloc((size_t)c->n_layer, 1);
    if (!c->layer_swa) return mw_errf(err, "model config: out of memory");
    int64_t v;
    if (!r->fam->swa) {
        int rc = get_int(r, "attention.sliding_window", 0, INT64_MAX, &v, err);
        if (rc < 0) return -1;
        if (rc && v != 0)
            return mw_errf(err, "model config: %s = %lld, but %s models have no sliding window",
                           r->key, (long long)v, c->arch);
        return 0;
    }
    if (req_int(r, "attention.sliding_window", 1, INT32_MAX, &v, err)) return -1;
    c->n_swa = (int)v;
    const char *pkey = k(r, "attention.sliding_window_pattern");
    long idx = vx_meta_find(r->m, pkey);
    if (idx >= 0 && vx_meta_type(r->m, (size_t)idx) == VX_ARR) {
        if (vx_meta_arr_len(r->m, (size_t)idx) != (uint64_t)c->n_layer)
            return mw_errf(err, "model config: %s has %llu entries for %d layers", pkey,
                           (unsigned long long)vx_meta_arr_len(r->m, (size_t)idx), c->n_layer);
        for (int il = 0; il < c->n_layer; il++) {
            int64_t f;
            if (vx_meta_arr_i64(r->m, pkey, (uint64_t)il, &f, err) != 1)
                return mw_err_wrap(err, "model config: %s[%d]", pkey, il);
            c->layer_swa[il] = f != 0;
        }
        return 0;
    }
    int64_t period = r->fam->swa_period;
    if (get_int(r, "attention.sliding_window_pattern", 0, INT32_MAX, &period, err) < 0) return -1;
    /* llama.cpp's pattern rule: within each period the last layer is full attention; period 0
     * means every layer slides. */
    for (int il = 0; il < c->n_layer; il++)
        c->layer_swa[il] = period == 0 || (il % period < period - 1);
    return 0;
}

/* ---- router and GLU ------------------------------------------------------------------------- */

/* llama.cpp's gating-function ids for the expert_gating_func key. */
static int gate_from_llama_id(int64_t id) {
    switch (id) {
    case 1:
        return MD_GATE_SOFTMAX;
    case 2:
        return MD_GATE_SIGMOID;
    case 3:
        return MD_GATE_SOFTMAX_SELECTED;
    default:
        return -1;
    }
}

/* These families fix their router; keys that restate it must agree. */
static int check_router_keys(reader *r, md_config *c, mw_err *err) {
    const md_router_policy *p = &c->router;
    int64_t v;
    int rc = get_int(r, "expert_gating_func", 0, 16, &v, err);
    if (rc < 0) return -1;
    if (rc && gate_from_llama_id(v) != (int)p->gate)
        return mw_errf(err, "model config: %s = %lld, but %s routes with %s", r->key, (long long)v,
                       c->arch, md_gate_name(p->gate));
    bool b;
    rc = vx_meta_get_bool(r->m, k(r, "expert_weights_norm"), &b, err);
    if (rc < 0) return -1;
    if (rc && b != p->norm)
        return mw_errf(err, "model config: %s = %s, but %s %s its routing weights", r->key,
                       b ? "true" : "false", c->arch,
                       p->norm ? "normalizes" : "does not normalize");
    rc = get_int(r, "expert_group_count", 0, INT32_MAX, &v, err);
    if (rc < 0) return -1;
    if (rc && v > 1)
        return mw_errf(err, "model config: %s = %lld, but %s does not route by expert groups",
                       r->key, (long long)v, c->arch);
    float s;
    rc = get_float(r, "expert_weights_scale", 0, false, &s, err);
    if (rc < 0) return -1;
    if (rc && s != 0.0f && s != p->scale)
        return mw_errf(err, "model config: %s = %g, but %s scales its routing weights by %g",
                       r->key, s, c->arch, p->scale);
    return 0;
}

/* The vocabulary size llama.cpp's deepseek2 loader tests against: {arch}.vocab_size, else the
 * tokenizer's token count (0 when neither is present). */
static int64_t meta_vocab(reader *r) {
    int64_t v = 0;
    mw_err e;
    if (vx_meta_get_i64(r->m, k(r, "vocab_size"), &v, &e) == 1 && v > 0) return v;
    long idx = vx_meta_find(r->m, "tokenizer.ggml.tokens");
    return idx >= 0 && vx_meta_type(r->m, (size_t)idx) == VX_ARR
               ? (int64_t)vx_meta_arr_len(r->m, (size_t)idx)
               : 0;
}

/* A router read from the keys (deepseek2), with llama.cpp's defaults: gating softmax when the key
 * is absent or 0 (DeepSeek-V2 files predate it; 47/48-layer models with a 154880-token vocabulary
 * get sigmoid), no normalization, no scaling, no groups. */
static int read_router_keys(reader *r, md_config *c, mw_err *err) {
    md_router_policy *p = &c->router;
    int64_t v = 0;
    int rc = get_int(r, "expert_gating_func", 0, 1 << 16, &v, err);
    if (rc < 0) return -1;
    if (rc == 0 && c->family->gating_required)
        return mw_errf(err, "model config: missing required key '%s'", r->key);
    if (v == 0) v = (c->n_layer == 47 || c->n_layer == 48) && meta_vocab(r) == 154880 ? 2 : 1;
    int g = gate_from_llama_id(v);
    if (g < 0)
        return mw_errf(err,
                       "model config: %s = %lld is not a gating function moewire knows (1 "
                       "softmax, 2 sigmoid, 3 softmax over the selected)",
                       k(r, "expert_gating_func"), (long long)v);
    p->gate = (md_gate)g;
    const bool fixed = c->family->norm_fixed;
    bool norm = fixed && p->norm;
    rc = vx_meta_get_bool(r->m, k(r, "expert_weights_norm"), &norm, err);
    if (rc < 0) return -1;
    if (rc && fixed && norm != p->norm)
        return mw_errf(err, "model config: %s = %s, but %s %s its routing weights", r->key,
                       norm ? "true" : "false", c->arch,
                       p->norm ? "always normalizes" : "never normalizes");
    p->norm = norm;
    p->scale = 0.0f;
    if (get_float(r, "expert_weights_scale", 0, false, &p->scale, err) < 0) return -1;
    int64_t groups = 0, used = 0;
    if (get_int(r, "expert_group_count", 0, c->n_expert, &groups, err) < 0 ||
        get_int(r, "expert_group_used_count", 0, c->n_expert, &used, err) < 0)
        return -1;
    p->n_group = p->n_group_used = 0;
    if (groups <= 1) return 0;
    const int64_t per = c->n_expert / groups;
    if (c->n_expert % groups || per < 2)
        return mw_errf(err, "model config: %s = %lld must divide %s = %d into groups of at least 2",
                       k(r, "expert_group_count"), (long long)groups, "expert_count", c->n_expert);
    if (used < 1 || used >= groups)
        return mw_errf(err, "model config: %s = %lld must be in [1, %lld] (expert_group_count - 1)",
                       k(r, "expert_group_used_count"), (long long)used, (long long)groups - 1);
    if (c->n_expert_used > used * per)
        return mw_errf(err,
                       "model config: expert_used_count %d exceeds the %lld experts of the %lld "
                       "groups %s allows",
                       c->n_expert_used, (long long)(used * per), (long long)used,
                       k(r, "expert_group_used_count"));
    p->n_group = (int)groups;
    p->n_group_used = (int)used;
    return 0;
}

/* Dense leading layers and shared experts (deepseek2): leading_dense_block_count (default 0)
 * layers of a dense FFN of width feed_forward_length, then MoE layers with expert_shared_count
 * shared experts (required) of expert_feed_forward_length each. */
static int read_ffn_layout(reader *r, md_config *c, mw_err *err) {
    if (!c->family->dense_and_shared) return 0;
    int64_t v = 0;
    if (get_int(r, "leading_dense_block_count", 0, c->n_layer, &v, err) < 0) return -1;
    c->n_dense_lead = (int)v;
    if (c->n_dense_lead > 0 && req_int(r, "feed_forward_length", 1, 1 << 24, &c->n_ff, err))
        return -1;
    if (req_int(r, "expert_shared_count", 0, 1 << 10, &v, err)) return -1;
    c->n_shared = (int)v;
    /* llama.cpp's kimi loaders size optional shared tensors as one expert when the count is 0 */
    c->n_ff_shared = c->n_ff_exp * (c->family->shared_optional && v == 0 ? 1 : v);
    return 0;
}

/* Multi-head latent attention's widths, before RoPE is read: the current layout states the
 * per-head key_length_mla / value_length_mla (and key_length = kv_lora + rope, value_length =
 * kv_lora, the cached row); the legacy one (attn_kv_b) the per-head key_length / value_length.
 * The query goes through a q_lora_rank down-projection, except on llama.cpp's "lite" models (26 or
 * 27 layers, or 48 with a 128256-token vocabulary) and when the rank is 0: one attn_q. */
static int read_mla(reader *r, md_config *c, mw_err *err) {
    md_mla *a = &c->mla;
    int64_t v;
    if (req_int(r, "attention.kv_lora_rank", 1, 1 << 16, &v, err)) return -1;
    a->kv_lora = (int)v;
    const bool lite =
        c->n_layer == 26 || c->n_layer == 27 || (c->n_layer == 48 && meta_vocab(r) == 128256);
    a->q_lora = 0;
    if (c->family->q_lora == MD_Q_LORA_NONE) {
        int rc = get_int(r, "attention.q_lora_rank", 0, 1 << 20, &v, err);
        if (rc < 0) return -1;
        if (rc && v != 0)
            return mw_errf(err, "model config: %s = %lld, but %s queries have no down-projection",
                           r->key, (long long)v, c->arch);
    } else if (c->family->q_lora == MD_Q_LORA_OPTIONAL) {
        v = 0;
        if (get_int(r, "attention.q_lora_rank", 0, 1 << 20, &v, err) < 0) return -1;
        a->q_lora = (int)v;
    } else if (!lite) {
        if (req_int(r, "attention.q_lora_rank", 0, 1 << 20, &v, err)) return -1;
        a->q_lora = (int)v;
    }
    int64_t km = 0, vm = 0;
    int rk = get_int(r, "attention.key_length_mla", 0, 1 << 16, &km, err);
    int rv = rk < 0 ? -1 : get_int(r, "attention.value_length_mla", 0, 1 << 16, &vm, err);
    if (rk < 0 || rv < 0) return -1;
    if ((km > 0) != (vm > 0))
        return mw_errf(err, "model config: %s and %s must both be set (MLA layout) or both absent",
                       k(r, "attention.key_length_mla"), "attention.value_length_mla");
    a->legacy = km == 0;
    if (a->legacy) {
        if (req_int(r, "attention.key_length", 2, 1 << 16, &km, err) ||
            req_int(r, "attention.value_length", 1, 1 << 16, &vm, err))
            return -1;
    }
    c->head_dim_k = (int)km; /* per head, for RoPE's bounds; the attended widths follow */
    a->v = (int)vm;
    return 0;
}

/* After RoPE: the rotated part is the decoupled key, the rest q_nope; attention runs absorbed
 * (one latent KV head). kq_scale = mscale² / sqrt(qk_nope + qk_rope) (llama.cpp's deepseek2). */
static int finish_mla(reader *r, md_config *c, mw_err *err) {
    md_mla *a = &c->mla;
    const int dk = c->head_dim_k;
    a->rope = c->rope.n_rot;
    a->nope = dk - a->rope;
    if (a->nope < 1)
        return mw_errf(err,
                       "model config: key length %d leaves no non-rotated dimensions (%s = %d)", dk,
                       k(r, "rope.dimension_count"), a->rope);
    int64_t v;
    int rc;
    if (!a->legacy) {
        if ((rc = get_int(r, "attention.key_length", 1, 1 << 16, &v, err)) < 0) return -1;
        if (rc && v != a->kv_lora + a->rope)
            return mw_errf(err, "model config: %s = %lld, but kv_lora_rank + rope is %d", r->key,
                           (long long)v, a->kv_lora + a->rope);
        if ((rc = get_int(r, "attention.value_length", 1, 1 << 16, &v, err)) < 0) return -1;
        if (rc && v != a->kv_lora)
            return mw_errf(err, "model config: %s = %lld, but kv_lora_rank is %d", r->key,
                           (long long)v, a->kv_lora);
    }
    const float m = c->rope.layout == MD_ROPE_NONE ? 1.0f : md_rope_attn_mscale(&c->rope);
    c->kq_scale = 1.0f * m * m / sqrtf((float)dk);
    c->n_head_kv = 1;
    c->head_dim_k = a->kv_lora + a->rope;
    c->head_dim_v = a->kv_lora;
    return 0;
}

/* SiTU's two betas (K3): activation.situ_beta > 0, activation.situ_linear_beta any finite value
 * (<= 0 leaves the up branch linear). */
static int read_situ(reader *r, md_config *c, mw_err *err) {
    if (req_float(r, "activation.situ_beta", 0, true, &c->glu.beta, err)) return -1;
    double lb;
    const char *key = k(r, "activation.situ_linear_beta");
    int rc = vx_meta_get_f64(r->m, key, &lb, err);
    if (rc < 0) return -1;
    if (rc == 0) return mw_errf(err, "model config: missing required key '%s'", key);
    if (!isfinite(lb)) return mw_errf(err, "model config: %s = %g must be finite", key, lb);
    c->glu.lbeta = (float)lb;
    return 0;
}

static int read_glu(reader *r, md_config *c, mw_err *err) {
    const md_family *f = c->family;
    c->glu.kind = f->glu;
    c->glu.alpha = f->glu_alpha;
    c->glu.limit = f->glu_limit;
    if (f->glu == KN_GLU_SITU && read_situ(r, c, err)) return -1;
    const char *key = k(r, "swiglu_clamp_exp");
    long idx = vx_meta_find(r->m, key);
    if (idx < 0) return 0;
    /* One limit for every layer: a scalar, or an array whose entries are all equal. */
    float limit = 0;
    if (vx_meta_type(r->m, (size_t)idx) == VX_ARR) {
        uint64_t n = vx_meta_arr_len(r->m, (size_t)idx);
        for (uint64_t i = 0; i < n; i++) {
            double d;
            if (vx_meta_arr_f64(r->m, key, i, &d, err) != 1)
                return mw_err_wrap(err, "model config: %s[%llu]", key, (unsigned long long)i);
            if (i && (float)d != limit)
                return mw_errf(err, "model config: %s differs between layers (unsupported)", key);
            limit = (float)d;
        }
    } else if (get_float(r, "swiglu_clamp_exp", 0, false, &limit, err) < 0) {
        return -1;
    }
    if (f->glu != KN_GLU_SWIGLU_OAI) {
        if (limit != 0.0f)
            return mw_errf(err, "model config: %s = %g, but %s experts do not clamp", key, limit,
                           c->arch);
        return 0;
    }
    if (!(limit > 0.0f)) return mw_errf(err, "model config: %s = %g must be > 0", key, limit);
    c->glu.limit = limit;
    return 0;
}

/* ---- hybrid stacks (KDA) -------------------------------------------------------------------- */

/* attention.head_count_kv per layer: 0 marks a KDA (recurrent) layer, any other value a layer of
 * the family's attention (llama.cpp's rule; the converter writes 1 there). A scalar applies to
 * every layer. */
static int read_layer_kinds(reader *r, md_config *c, mw_err *err) {
    c->layer_kda = calloc((size_t)c->n_layer, 1);
    if (!c->layer_kda) return mw_errf(err, "model config: out of memory");
    const char *key = k(r, "attention.head_count_kv");
    long idx = vx_meta_find(r->m, key);
    if (idx < 0) return mw_errf(err, "model config: missing required key '%s'", key);
    const bool arr = vx_meta_type(r->m, (size_t)idx) == VX_ARR;
    if (arr && vx_meta_arr_len(r->m, (size_t)idx) != (uint64_t)c->n_layer)
        return mw_errf(err, "model config: %s has %llu entries for %d layers", key,
                       (unsigned long long)vx_meta_arr_len(r->m, (size_t)idx), c->n_layer);
    int64_t v = 0;
    if (!arr && req_int(r, "attention.head_count_kv", 0, 4096, &v, err)) return -1;
    for (int il = 0; il < c->n_layer; il++) {
        if (arr && vx_meta_arr_i64(r->m, key, (uint64_t)il, &v, err) != 1)
            return mw_err_wrap(err, "model config: %s[%d]", key, il);
        if (v < 0 || v > 4096)
            return mw_errf(err, "model config: %s[%d] = %lld is out of range [0, 4096]", key, il,
                           (long long)v);
        c->layer_kda[il] = v == 0;
        c->n_kda += v == 0;
    }
    return 0;
}

/* The KDA layers' widths and gate: kda.head_dim and ssm.conv_kernel. */
static int read_kda(reader *r, md_config *c, mw_err *err) {
    if (read_layer_kinds(r, c, err)) return -1;
    md_kda *d = &c->kda;
    int64_t v;
    d->n_head = c->n_head;
    if (req_int(r, "kda.head_dim", 1, 1024, &v, err)) return -1;
    d->head_dim = (int)v;
    if (req_int(r, "ssm.conv_kernel", 1, 64, &v, err)) return -1;
    d->conv = (int)v;
    d->gate_full = c->family->kda_gate_full;
    d->lower_bound = false;
    const char *lb = k(r, "kda.gate_lower_bound");
    if (vx_meta_find(r->m, lb) < 0) return 0;
    if (!c->family->kda_lower_bound)
        return mw_errf(err, "model config: %s is set, but %s's decay has no lower bound", lb,
                       c->arch);
    /* the bound scales a sigmoid: the decay exp(g) stays in (exp(lb), 1) only for lb < 0 */
    double v_lb;
    if (vx_meta_get_f64(r->m, lb, &v_lb, err) != 1) return mw_err_wrap(err, "model config");
    if (!(v_lb < 0) || !isfinite(v_lb))
        return mw_errf(err, "model config: %s = %g must be a negative number", lb, v_lb);
    d->lower_bound = true;
    d->gate_lb = (float)v_lb;
    return 0;
}

/* Kimi K3's attention residuals and latent MoE. */
static int read_k3_parts(reader *r, md_config *c, mw_err *err) {
    int64_t v = 0;
    if (c->family->attn_res) {
        /* a block longer than the model is one bank at layer 0, as llama.cpp reads it */
        if (req_int(r, "attn_res.block_size", 0, 1 << 20, &v, err)) return -1;
        c->attn_res_block = (int)v;
    }
    v = 0;
    if (c->family->latent_moe && get_int(r, "expert_latent_length", 0, 1 << 20, &v, err) < 0)
        return -1;
    c->n_expert_latent = v;
    return 0;
}

/* ---- the whole config ----------------------------------------------------------------------- */

static int read_all(reader *r, md_config *c, mw_err *err) {
    int64_t v;
    if (req_int(r, "block_count", 1, 4096, &v, err)) return -1;
    c->n_layer = (int)v;
    if (req_int(r, "embedding_length", 1, 1 << 20, &c->n_embd, err)) return -1;
    if (req_int(r, "context_length", 1, INT32_MAX, &c->n_ctx_train, err)) return -1;
    if (req_float(r, "attention.layer_norm_rms_epsilon", 0, true, &c->norm_eps, err)) return -1;

    if (req_int(r, "attention.head_count", 1, 4096, &v, err)) return -1;
    c->n_head = (int)v;
    int rc = 0;
    if (c->family->kda) {
        if (read_kda(r, c, err)) return -1;
        c->n_head_kv = 1; /* the latent attention's one KV head */
    } else {
        rc = get_int(r, "attention.head_count_kv", 1, 4096, &v, err);
        if (rc < 0) return -1;
        c->n_head_kv = rc ? (int)v : c->n_head; /* llama.cpp: plain multi-head attention */
    }
    if (c->n_head % c->n_head_kv)
        return mw_errf(err, "model config: %s = %d does not divide %s = %d",
                       k(r, "attention.head_count_kv"), c->n_head_kv, "attention.head_count",
                       c->n_head);
    c->attn = c->family->attn;
    if (c->attn == MD_ATTN_MLA) {
        if (read_mla(r, c, err)) return -1;
    } else {
        if (req_int(r, "attention.key_length", 2, 2 * MD_ROPE_MAX_PAIRS, &v, err)) return -1;
        c->head_dim_k = (int)v;
        if (req_int(r, "attention.value_length", 1, 2 * MD_ROPE_MAX_PAIRS, &v, err)) return -1;
        c->head_dim_v = (int)v;
    }
    c->kq_scale = 1.0f / sqrtf((float)c->head_dim_k);
    c->qkv_bias = c->family->qkv_bias;
    c->o_bias = c->family->o_bias;
    c->qk_norm = c->family->qk_norm;
    c->sinks = c->family->sinks;

    if (req_int(r, "expert_count", 1, 65536, &v, err)) return -1;
    c->n_expert = (int)v;
    /* bounded so routing stays cheap and buffers small whatever the file says */
    if (req_int(r, "expert_used_count", 1, c->n_expert < 256 ? c->n_expert : 256, &v, err))
        return -1;
    c->n_expert_used = (int)v;
    rc = get_int(r, "expert_feed_forward_length", 1, 1 << 24, &c->n_ff_exp, err);
    if (rc < 0) return -1;
    if (!rc) {
        if (!c->family->ff_exp_from_ff)
            return mw_errf(err, "model config: missing required key '%s'", r->key);
        /* llama.cpp's qwen3moe rule */
        if (req_int(r, "feed_forward_length", 1, 1 << 30, &v, err)) return -1;
        c->n_ff_exp = v / c->n_expert_used;
        if (c->n_ff_exp < 1)
            return mw_errf(err, "model config: %s / expert_used_count is 0", r->key);
    }
    c->router = c->family->router;
    c->expert_bias = c->family->expert_bias;
    if ((c->family->router_from_keys ? read_router_keys(r, c, err)
                                     : check_router_keys(r, c, err)) ||
        read_glu(r, c, err) || read_ffn_layout(r, c, err) || read_k3_parts(r, c, err))
        return -1;
    if (read_swa(r, c, err) || read_rope(r, c, err)) return -1;
    if (c->attn == MD_ATTN_MLA && finish_mla(r, c, err)) return -1;
    return 0;
}

int md_config_read(const vx_meta *m, md_config *cfg, mw_err *err) {
    memset(cfg, 0, sizeof *cfg);
    const char *arch = NULL;
    int rc = vx_meta_get_str(m, "general.architecture", &arch, err);
    if (rc < 0) return -1;
    if (rc == 0) return mw_errf(err, "model config: missing required key 'general.architecture'");
    cfg->family = md_family_find(arch);
    if (!cfg->family)
        return mw_errf(err,
                       "model config: unknown model family '%s' (general.architecture); "
                       "known: %s",
                       arch, vx_family_names());
    snprintf(cfg->arch, sizeof cfg->arch, "%s", arch);
    reader r = {.m = m, .fam = cfg->family->family};
    if (read_all(&r, cfg, err)) {
        md_config_free(cfg);
        return -1;
    }
    return 0;
}

void md_config_free(md_config *cfg) {
    free(cfg->layer_swa);
    free(cfg->layer_kda);
    cfg->layer_swa = NULL;
    cfg->layer_kda = NULL;
}
