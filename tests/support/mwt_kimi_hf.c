/* tests/support/mwt_kimi_hf.c — see mwt_kimi_hf.h. */
#include "tests/support/mwt_kimi_hf.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/support/mw_test.h"
#include "tests/support/mwt_st.h"
#include "tests/support/mwt_tiktoken.h"
#include "tokenizer/tk.h"
#include "vindex/vx_gguf.h"
#include "vindex/vx_meta.h"

/* GGUF name suffixes (after "blk.N." or at the top) and the HF names they came from */
static const char *const names[][2] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"ssm_conv1d_q.weight", "self_attn.q_conv1d.weight"},
    {"ssm_conv1d_k.weight", "self_attn.k_conv1d.weight"},
    {"ssm_conv1d_v.weight", "self_attn.v_conv1d.weight"},
    {"ssm_f_a.weight", "self_attn.f_a_proj.weight"},
    {"ssm_f_b.weight", "self_attn.f_b_proj.weight"},
    {"ssm_dt.bias", "self_attn.dt_bias"},
    {"ssm_beta.weight", "self_attn.b_proj.weight"},
    {"ssm_g_a.weight", "self_attn.g_a_proj.weight"},
    {"ssm_g_b.weight", "self_attn.g_b_proj.weight"},
    {"ssm_norm.weight", "self_attn.o_norm.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate_inp.weight", "block_sparse_moe.gate.weight"},
    {"exp_probs_b.bias", "block_sparse_moe.gate.e_score_correction_bias"},
    {"ffn_gate_shexp.weight", "block_sparse_moe.shared_experts.gate_proj.weight"},
    {"ffn_up_shexp.weight", "block_sparse_moe.shared_experts.up_proj.weight"},
    {"ffn_down_shexp.weight", "block_sparse_moe.shared_experts.down_proj.weight"},
    /* Kimi K3 */
    {"ssm_g.weight", "self_attn.g_proj.weight"},
    {"attn_gate.weight", "self_attn.g_proj.weight"},
    {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {"ffn_routed_down.weight", "block_sparse_moe.routed_expert_down_proj.weight"},
    {"ffn_routed_norm.weight", "block_sparse_moe.routed_expert_norm.weight"},
    {"ffn_routed_up.weight", "block_sparse_moe.routed_expert_up_proj.weight"},
};

void mwt_ct_from_block(const unsigned char blk[17], unsigned char packed[16],
                       unsigned char *scale) {
    unsigned char el[32];
    for (int j = 0; j < 16; j++) el[j] = blk[1 + j] & 15, el[j + 16] = blk[1 + j] >> 4;
    for (int k = 0; k < 16; k++) packed[k] = (unsigned char)(el[2 * k] | el[2 * k + 1] << 4);
    *scale = blk[0];
}

typedef struct writer {
    mwt_st *st[2];
    const char *skip;
    const char *prefix; /* "language_model." for K3, "" for Kimi Linear */
    bool k3;
    json_t *map; /* the index's weight_map */
    const vx_gguf *g;
} writer;

static void put(writer *w, int layer, const char *name, const char *dtype, int n, const int64_t *sh,
                const void *data, size_t nbytes) {
    int shard = layer >= 2;
    char full[256];
    snprintf(full, sizeof full, "%s%s", w->prefix, name);
    if (w->skip && !strcmp(w->skip, full)) return;
    mwt_st_add(w->st[shard], full, dtype, n, sh, data, nbytes);
    json_object_set_new(w->map, full,
                        json_string(shard ? "model-00002-of-00002.safetensors"
                                          : "model-00001-of-00002.safetensors"));
}

/* K3's residual score s as the pair the checkpoint holds: norm s / 2 and projection 2 (both
 * exact), whose product extract must form. */
static void put_res(writer *w, int layer, const char *pre, const char *what, const vx_tensor *t) {
    const int64_t n = t->ne[0];
    float *norm = malloc((size_t)n * sizeof *norm), *proj = malloc((size_t)n * sizeof *proj);
    for (int64_t i = 0; i < n; i++) norm[i] = ((const float *)t->data)[i] / 2, proj[i] = 2;
    char a[160], b[160];
    snprintf(a, sizeof a, "%s%s_res_norm.weight", pre, what);
    snprintf(b, sizeof b, "%s%s_res_proj.weight", pre, what);
    put(w, layer < 0 ? 0 : layer, a, "F32", 1, (int64_t[]){n}, norm, (size_t)n * 4);
    put(w, layer < 0 ? 0 : layer, b, "F32", 2, (int64_t[]){1, n}, proj, (size_t)n * 4);
    free(norm), free(proj);
}

/* ggml ne reversed: the HF shape */
static void put_f32(writer *w, int layer, const char *name, const vx_tensor *t) {
    int64_t sh[4];
    for (int i = 0; i < t->n_dims; i++) sh[i] = t->ne[t->n_dims - 1 - i];
    put(w, layer, name, "F32", t->n_dims, sh, t->data, t->nbytes);
}

/* attn_k_b [nope, r, H] and attn_v_b [r, v, H] back into kv_b_proj [H·(nope + v), r] */
static void put_kv_b(writer *w, int layer, const char *pre) {
    char kn[64], vn[64], hf[160];
    snprintf(kn, sizeof kn, "blk.%d.attn_k_b.weight", layer);
    snprintf(vn, sizeof vn, "blk.%d.attn_v_b.weight", layer);
    const vx_tensor *k = vx_gguf_find(w->g, kn), *v = vx_gguf_find(w->g, vn);
    const int64_t nope = k->ne[0], R = k->ne[1], H = k->ne[2], dv = v->ne[1];
    float *out = malloc((size_t)(H * (nope + dv) * R) * sizeof *out);
    const float *kd = k->data, *vd = v->data;
    for (int64_t h = 0; h < H; h++) {
        for (int64_t i = 0; i < nope; i++)
            for (int64_t j = 0; j < R; j++)
                out[(h * (nope + dv) + i) * R + j] = kd[(h * R + j) * nope + i];
        for (int64_t a = 0; a < dv; a++)
            for (int64_t j = 0; j < R; j++)
                out[(h * (nope + dv) + nope + a) * R + j] = vd[(h * dv + a) * R + j];
    }
    snprintf(hf, sizeof hf, "%sself_attn.kv_b_proj.weight", pre);
    put(w, layer, hf, "F32", 2, (int64_t[]){H * (nope + dv), R}, out,
        (size_t)(H * (nope + dv) * R) * sizeof *out);
    free(out);
}

/* ssm_a = −exp(A_log): A_log = log(−ssm_a), in HF's [1, 1, H, 1] */
static void put_a_log(writer *w, int layer, const char *pre, const vx_tensor *t) {
    const int64_t H = (int64_t)(t->nbytes / 4);
    float *a = malloc((size_t)H * sizeof *a);
    for (int64_t h = 0; h < H; h++) a[h] = logf(-((const float *)t->data)[h]);
    char hf[160];
    snprintf(hf, sizeof hf, "%sself_attn.A_log", pre);
    if (w->k3) /* K3 keeps one value per head */
        put(w, layer, hf, "F32", 1, (int64_t[]){H}, a, (size_t)H * sizeof *a);
    else
        put(w, layer, hf, "F32", 4, (int64_t[]){1, 1, H, 1}, a, (size_t)H * sizeof *a);
    free(a);
}

/* MXFP4 [cols, rows, E] → per expert weight_packed + weight_scale, or F32 weight */
static void put_experts(writer *w, int layer, const char *pre, const char *wid, const vx_tensor *t,
                        bool packed) {
    const int64_t cols = t->ne[0], rows = t->ne[1], E = t->ne[2], G = cols / 32;
    unsigned char *q = malloc((size_t)(rows * G * 16)), *sc = malloc((size_t)(rows * G));
    float *f = malloc((size_t)(rows * cols) * sizeof *f);
    char hf[200];
    for (int64_t e = 0; e < E; e++) {
        const unsigned char *m = (const unsigned char *)t->data + (size_t)(e * rows * G * 17);
        for (int64_t r = 0; r < rows; r++) {
            const unsigned char *row = m + (size_t)(r * G * 17);
            for (int64_t g = 0; g < G; g++)
                mwt_ct_from_block(row + g * 17, q + (r * G + g) * 16, sc + r * G + g);
            for (int64_t j = 0; j < cols; j++) f[r * cols + j] = mwt_ggml_mxfp4_value(row, j);
        }
        if (packed) {
            snprintf(hf, sizeof hf, "%sblock_sparse_moe.experts.%lld.%s.weight_packed", pre,
                     (long long)e, wid);
            put(w, layer, hf, "U8", 2, (int64_t[]){rows, cols / 2}, q, (size_t)(rows * G * 16));
            snprintf(hf, sizeof hf, "%sblock_sparse_moe.experts.%lld.%s.weight_scale", pre,
                     (long long)e, wid);
            put(w, layer, hf, "U8", 2, (int64_t[]){rows, G}, sc, (size_t)(rows * G));
        } else {
            snprintf(hf, sizeof hf, "%sblock_sparse_moe.experts.%lld.%s.weight", pre, (long long)e,
                     wid);
            put(w, layer, hf, "F32", 2, (int64_t[]){rows, cols}, f,
                (size_t)(rows * cols) * sizeof *f);
        }
    }
    free(q), free(sc), free(f);
}

static void put_tensor(writer *w, const vx_tensor *t, bool packed) {
    int layer = -1, at = 0;
    char pre[64] = "";
    const char *suffix = t->name;
    if (sscanf(t->name, "blk.%d.%n", &layer, &at) == 1 && at) {
        suffix = t->name + at;
        snprintf(pre, sizeof pre, "model.layers.%d.", layer);
    }
    static const char *const experts[][2] = {{"ffn_gate_exps.weight", "w1"},
                                             {"ffn_up_exps.weight", "w3"},
                                             {"ffn_down_exps.weight", "w2"}};
    for (int i = 0; i < 3; i++)
        if (!strcmp(suffix, experts[i][0]))
            return put_experts(w, layer, pre, experts[i][1], t, packed);
    if (!strcmp(suffix, "ssm_a")) return put_a_log(w, layer, pre, t);
    if (!strcmp(suffix, "attn_res_score.weight"))
        return put_res(w, layer, pre, "self_attention", t);
    if (!strcmp(suffix, "ffn_res_score.weight")) return put_res(w, layer, pre, "mlp", t);
    if (!strcmp(suffix, "output_res_score.weight"))
        return put_res(w, -1, "model.", "output_attn", t);
    if (!strcmp(suffix, "attn_k_b.weight")) return put_kv_b(w, layer, pre);
    if (!strcmp(suffix, "attn_v_b.weight")) return;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(suffix, names[i][0])) {
            char hf[200];
            snprintf(hf, sizeof hf, "%s%s", pre, names[i][1]);
            return put_f32(w, layer < 0 ? 0 : layer, hf, t);
        }
    fprintf(stderr, "mwt_kimi_linear_hf: no HF name for %s\n", t->name);
    abort();
}

static const char *arch_of(const vx_meta *m) {
    const char *a = "";
    vx_meta_get_str(m, "general.architecture", &a, NULL);
    return a;
}

static int64_t gi(const vx_meta *m, const char *key) {
    char k[128];
    int64_t v = 0;
    snprintf(k, sizeof k, "%s.%s", arch_of(m), key);
    if (vx_meta_get_i64(m, k, &v, NULL) != 1) return -1;
    return v;
}

static double gf(const vx_meta *m, const char *key) {
    char k[128];
    double v = 0;
    snprintf(k, sizeof k, "%s.%s", arch_of(m), key);
    vx_meta_get_f64(m, k, &v, NULL);
    return v;
}

static json_t *quantization(void) {
    return json_pack(
        "{s:s, s:s, s:{s:{s:[s], s:{s:i, s:s, s:i, s:s, s:b, s:b, s:s, s:s}, s:n, s:n, s:s}}, "
        "s:[s, s], s:n, s:s, s:{}, s:s}",
        "quant_method", "compressed-tensors", "format", "mxfp4-pack-quantized", "config_groups",
        "group_0", "targets", "Linear", "weights", "num_bits", 4, "type", "float", "group_size", 32,
        "strategy", "group", "symmetric", 1, "dynamic", 0, "scale_dtype", "torch.uint8", "observer",
        "minmax", "input_activations", "output_activations", "format", "mxfp4-pack-quantized",
        "ignore", "lm_head", "re:.*self_attn.*", "kv_cache_scheme", "quantization_status",
        "compressed", "sparsity_config", "version", "0.12.2");
}

/* The text model's config: Kimi Linear's keys, and K3's beyond them. */
static json_t *text_config(const vx_meta *m, bool k3) {
    const int64_t L = gi(m, "block_count"), rope = gi(m, "rope.dimension_count");
    const int64_t H = gi(m, "attention.head_count");
    json_t *full = json_array(), *kda = json_array();
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch_of(m));
    for (int64_t l = 0; l < L; l++) {
        int64_t kv = 0;
        vx_meta_arr_i64(m, key, (uint64_t)l, &kv, NULL);
        json_array_append_new(kv ? full : kda, json_integer(l + 1));
    }
    json_t *la =
        json_pack("{s:o, s:o, s:I, s:I, s:I}", "full_attn_layers", full, "kda_layers", kda,
                  "num_heads", (json_int_t)H, "head_dim", (json_int_t)gi(m, "kda.head_dim"),
                  "short_conv_kernel_size", (json_int_t)gi(m, "ssm.conv_kernel"));
    json_t *c = json_pack(
        "{s:s, s:[s], s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:f, s:I, s:I, s:b, s:s, s:b, s:b, s:f, s:o}",
        "model_type", "kimi_linear", "architectures", "KimiLinearForCausalLM", "num_hidden_layers",
        (json_int_t)L, "max_position_embeddings", (json_int_t)gi(m, "context_length"),
        "hidden_size", (json_int_t)gi(m, "embedding_length"), "intermediate_size",
        (json_int_t)gi(m, "feed_forward_length"), "moe_intermediate_size",
        (json_int_t)gi(m, "expert_feed_forward_length"), "num_attention_heads", (json_int_t)H,
        "num_key_value_heads", (json_int_t)H, "rms_norm_eps",
        gf(m, "attention.layer_norm_rms_epsilon"), "num_experts", (json_int_t)gi(m, "expert_count"),
        "num_experts_per_token", (json_int_t)gi(m, "expert_used_count"), "vocab_size",
        (json_int_t)gi(m, "vocab_size"), "kv_lora_rank",
        (json_int_t)gi(m, "attention.kv_lora_rank"), "qk_nope_head_dim",
        (json_int_t)(gi(m, "attention.key_length_mla") - rope), "qk_rope_head_dim",
        (json_int_t)rope, "v_head_dim", (json_int_t)gi(m, "attention.value_length_mla"),
        "routed_scaling_factor", gf(m, "expert_weights_scale"), "first_k_dense_replace",
        (json_int_t)gi(m, "leading_dense_block_count"), "num_shared_experts",
        (json_int_t)gi(m, "expert_shared_count"), "moe_renormalize", 1,
        "moe_router_activation_func", "sigmoid", "mla_use_nope", 1, "tie_word_embeddings", 0,
        "rope_theta", 10000.0, "linear_attn_config", la);
    if (!k3) {
        json_object_set_new(c, "q_lora_rank", json_null());
        json_object_set_new(c, "hidden_act", json_string("silu"));
        return c;
    }
    bool norm = false;
    vx_meta_get_bool(m, "kimi-k3.expert_weights_norm", &norm, NULL);
    json_object_set_new(c, "moe_renormalize", json_boolean(norm));
    json_object_set_new(la, "use_full_rank_gate", json_true());
    json_object_set_new(la, "gate_lower_bound", json_real(gf(m, "kda.gate_lower_bound")));
    json_t *more = json_pack("{s:I, s:I, s:I, s:s, s:f, s:f, s:b, s:b}", "q_lora_rank",
                             (json_int_t)gi(m, "attention.q_lora_rank"), "attn_res_block_size",
                             (json_int_t)gi(m, "attn_res.block_size"), "routed_expert_hidden_size",
                             (json_int_t)gi(m, "expert_latent_length"), "hidden_act", "situ",
                             "activation_situ_beta", gf(m, "activation.situ_beta"),
                             "activation_situ_linear_beta", gf(m, "activation.situ_linear_beta"),
                             "latent_moe_use_norm", 1, "mla_use_output_gate", 1);
    json_object_update(c, more);
    json_decref(more);
    return c;
}

/* config.json: Kimi Linear's at the top; K3's text model under text_config, beside the vision
 * tower's config, the quantization at the top. */
static json_t *config(const vx_meta *m, bool packed, bool k3) {
    json_t *tc = text_config(m, k3);
    json_t *q = packed ? quantization() : NULL;
    if (!k3) {
        json_object_set_new(tc, "bos_token_id", json_integer(509));
        if (q) json_object_set_new(tc, "quantization_config", q);
        return tc;
    }
    json_t *c = json_pack("{s:s, s:[s], s:o, s:{s:s, s:i}, s:b, s:i, s:i, s:s}", "model_type",
                          "kimi_k3", "architectures", "KimiK3ForConditionalGeneration",
                          "text_config", tc, "vision_config", "model_type", "moonvit",
                          "hidden_size", 64, "tie_word_embeddings", 0, "bos_token_id", 509,
                          "eos_token_id", 511, "torch_dtype", "float32");
    if (q) json_object_set_new(c, "quantization_config", q);
    return c;
}

/* The vision tower and projector a K3 checkpoint carries beside the text model (never read). */
static void put_vision(writer *w) {
    float v[64] = {0};
    mwt_st_add(w->st[0], "vision_tower.encoder.blocks.0.wqkv.weight", "F32", 2, (int64_t[]){8, 8},
               v, sizeof v);
    mwt_st_add(w->st[0], "mm_projector.proj.0.weight", "F32", 1, (int64_t[]){64}, v, sizeof v);
    json_object_set_new(w->map, "vision_tower.encoder.blocks.0.wqkv.weight",
                        json_string("model-00001-of-00002.safetensors"));
    json_object_set_new(w->map, "mm_projector.proj.0.weight",
                        json_string("model-00001-of-00002.safetensors"));
}

/* tiktoken.model and tokenizer_config.json from the GGUF's vocabulary: the tokens before [BOS]
 * are the ranks, the specials (the GGUF's texts) follow them as Kimi's do. */
static int tokenizer(const char *gguf, const char *dir) {
    tk_tokenizer *t;
    mw_err err;
    if (tk_load_gguf(gguf, &t, &err)) return fprintf(stderr, "%s\n", err.msg), -1;
    mwt_ranks r = {0};
    const char *specials[8];
    int n_specials = 0;
    for (int32_t id = 0; id < tk_n_vocab(t); id++) {
        const char *p;
        size_t len;
        tk_piece(t, id, id >= tk_bos(t), &p, &len);
        if (id < tk_bos(t))
            mwt_ranks_add(&r, p, len);
        else if (n_specials < 8)
            specials[n_specials++] = strndup(p, len);
    }
    tk_free(t);
    int rc = mwt_tiktoken_write(dir, &r, specials, n_specials);
    for (int i = 0; i < n_specials; i++) free((char *)specials[i]);
    mwt_ranks_free(&r);
    return rc;
}

int mwt_kimi_hf(const char *gguf, const char *dir, bool packed_experts, const char *skip) {
    vx_gguf *g;
    mw_err err;
    mkdir(dir, 0755);
    if (vx_gguf_open(gguf, &g, &err)) return fprintf(stderr, "%s\n", err.msg), -1;
    const bool k3 = !strcmp(arch_of(vx_gguf_meta(g)), "kimi-k3");
    writer w = {
        {mwt_st_new(), mwt_st_new()}, skip, k3 ? "language_model." : "", k3, json_object(), g};
    for (size_t i = 0; i < vx_gguf_n_tensors(g); i++)
        put_tensor(&w, vx_gguf_tensor(g, i), packed_experts);
    if (k3) put_vision(&w);
    char p[4200];
    int rc = 0;
    for (int s = 0; s < 2 && !rc; s++) {
        snprintf(p, sizeof p, "%s/model-0000%d-of-00002.safetensors", dir, s + 1);
        rc = mwt_st_write(w.st[s], p);
        mwt_st_free(w.st[s]);
    }
    json_t *index = json_pack("{s:{}, s:o}", "metadata", "weight_map", w.map);
    json_t *cfg = config(vx_gguf_meta(g), packed_experts, k3);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    rc = rc || json_dump_file(index, p, JSON_INDENT(1));
    snprintf(p, sizeof p, "%s/config.json", dir);
    rc = rc || json_dump_file(cfg, p, JSON_INDENT(1));
    json_decref(index);
    json_decref(cfg);
    vx_gguf_close(g);
    return rc || tokenizer(gguf, dir) ? -1 : 0;
}
