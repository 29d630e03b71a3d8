/* tests/unit/test_md_family.c — reading configs: the fixtures' metadata gives the values llama.cpp
 * derives (hparams.json), and missing keys, unknown architectures and unknown values are errors
 * naming the key. */
#include "tests/support/mw_test.h"

#include <math.h>
#include <string.h>

#include "model/md_config.h"
#include "model/md_family.h"
#include "vindex/vx_gguf.h"

/* The metadata of a fixture model, minus `drop` (may be NULL). */
static vx_meta *fixture_meta(const char *model, const char *drop) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/model.gguf", model);
    vx_gguf *g;
    mw_err e;
    if (vx_gguf_open(mwt_fixture(rel), &g, &e)) fail_msg("%s", e.msg);
    const vx_meta *src = vx_gguf_meta(g);
    vx_meta *m = vx_meta_new();
    for (size_t i = 0; i < vx_meta_count(src); i++)
        if (!drop || strcmp(vx_meta_key(src, i), drop))
            assert_int_equal(vx_meta_copy_entry(m, src, i), 0);
    vx_gguf_close(g);
    return m;
}

static void expect_error(vx_meta *m, const char *needle) {
    md_config c;
    mw_err e = {{0}};
    assert_int_equal(md_config_read(m, &c, &e), -1);
    if (!strstr(e.msg, needle)) fail_msg("error '%s' does not mention '%s'", e.msg, needle);
    vx_meta_free(m);
}

static void test_gptoss_fixture(void **state) {
    (void)state;
    vx_meta *m = fixture_meta("gpt-oss-tiny", NULL);
    md_config c;
    mw_err e;
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_string_equal(c.arch, "gpt-oss");
    assert_int_equal(c.n_layer, 4);
    assert_int_equal(c.n_embd, 256);
    assert_int_equal(c.n_head, 4);
    assert_int_equal(c.n_head_kv, 2);
    assert_int_equal(c.head_dim_k, 64);
    assert_float_equal(c.kq_scale, 0.125, 0);
    assert_true(c.qkv_bias && c.o_bias && c.sinks && !c.qk_norm && c.expert_bias);
    assert_int_equal(c.n_swa, 8);
    const uint8_t swa[4] = {1, 0, 1, 0}; /* derived.swa_layers [0, 2] */
    assert_memory_equal(c.layer_swa, swa, 4);
    assert_int_equal(c.rope.scaling, MD_ROPE_SCALING_YARN);
    assert_int_equal(c.rope.n_rot, 64);
    assert_float_equal(c.rope.corr_dims[0], 8, 0);
    assert_float_equal(c.rope.corr_dims[1], 18, 0);
    assert_float_equal(c.rope.mscale, 1.3465735902799727, 1e-6);
    assert_float_equal(c.rope.freq_scale, 0.03125, 0);
    assert_memory_equal(&c.rope, &c.rope_swa, sizeof c.rope); /* no freq_base_swa key */
    assert_int_equal(c.router.gate, MD_GATE_SOFTMAX_SELECTED);
    assert_true(c.router.logit_bias && !c.router.norm);
    assert_int_equal(c.glu.kind, KN_GLU_SWIGLU_OAI);
    assert_float_equal(c.glu.alpha, 1.702, 1e-6);
    assert_float_equal(c.glu.limit, 7.0, 0);
    assert_int_equal(c.n_expert, 8);
    assert_int_equal(c.n_expert_used, 2);
    assert_int_equal(c.n_ff_exp, 256);
    assert_float_equal(c.norm_eps, 1e-5, 1e-12);
    md_config_free(&c);
    vx_meta_free(m);
}

static void test_qwen3moe_fixture(void **state) {
    (void)state;
    vx_meta *m = fixture_meta("qwen3moe-tiny", NULL);
    md_config c;
    mw_err e;
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_string_equal(c.arch, "qwen3moe");
    assert_int_equal(c.n_layer, 3);
    assert_true(c.qk_norm && !c.qkv_bias && !c.o_bias && !c.sinks && !c.expert_bias);
    assert_int_equal(c.n_swa, 0);
    for (int i = 0; i < 3; i++) assert_int_equal(c.layer_swa[i], 0);
    assert_int_equal(c.rope.scaling, MD_ROPE_SCALING_NONE);
    assert_float_equal(c.rope.mscale, 1, 0);
    assert_float_equal(c.rope.freq_base, 1e6, 0);
    assert_int_equal(c.router.gate, MD_GATE_SOFTMAX);
    assert_true(c.router.norm && !c.router.logit_bias);
    assert_int_equal(c.glu.kind, KN_GLU_SWIGLU);
    assert_float_equal(c.norm_eps, 1e-6, 1e-13);
    md_config_free(&c);
    vx_meta_free(m);
}

/* deepseek2-tiny's hparams.json "derived" block, and the defaults llama.cpp applies. */
static void test_deepseek2_fixture(void **state) {
    (void)state;
    vx_meta *m = fixture_meta("deepseek2-tiny", NULL);
    md_config c;
    mw_err e;
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_string_equal(c.arch, "deepseek2");
    assert_int_equal(c.attn, MD_ATTN_MLA);
    assert_int_equal(c.mla.q_lora, 96);
    assert_int_equal(c.mla.kv_lora, 64);
    assert_int_equal(c.mla.nope, 32);
    assert_int_equal(c.mla.rope, 16);
    assert_int_equal(c.mla.v, 32);
    assert_false(c.mla.legacy);
    /* attention sees one latent KV head: [c (64), rope(k_pe) (16)], value = c */
    assert_int_equal(c.n_head, 4);
    assert_int_equal(c.n_head_kv, 1);
    assert_int_equal(c.head_dim_k, 80);
    assert_int_equal(c.head_dim_v, 64);
    assert_float_equal(c.kq_scale, 0.2704675577217602, 1e-7);
    assert_int_equal(c.rope.layout, MD_ROPE_NORM);
    assert_int_equal(c.rope.scaling, MD_ROPE_SCALING_YARN);
    assert_int_equal(c.rope.n_rot, 16);
    assert_float_equal(c.rope.freq_scale, 0.025, 1e-9);
    assert_float_equal(c.rope.corr_dims[0], 2, 0);
    assert_float_equal(c.rope.corr_dims[1], 6, 0);
    assert_float_equal(c.rope.yarn_log_mul, 1, 0);
    assert_float_equal(c.rope.mscale, 1, 1e-6); /* yarn_cos_sin_magnitude */
    assert_int_equal(c.n_dense_lead, 1);
    assert_int_equal(c.n_ff, 512);
    assert_false(md_layer_is_moe(&c, 0));
    assert_true(md_layer_is_moe(&c, 1) && md_layer_is_moe(&c, 2));
    assert_int_equal(c.n_shared, 1);
    assert_int_equal(c.n_ff_shared, 256);
    assert_int_equal(c.n_ff_exp, 256);
    assert_int_equal(c.n_expert, 16);
    assert_int_equal(c.n_expert_used, 4);
    assert_int_equal(c.router.gate, MD_GATE_SIGMOID);
    assert_true(c.router.norm && c.router.select_bias && !c.router.logit_bias);
    assert_float_equal(c.router.scale, 2.5, 0);
    assert_int_equal(c.router.n_group, 4);
    assert_int_equal(c.router.n_group_used, 2);
    assert_int_equal(c.glu.kind, KN_GLU_SWIGLU);
    assert_float_equal(c.norm_eps, 1e-6, 1e-12);
    md_config_free(&c);
    vx_meta_free(m);
}

/* Without the log multiplier: magnitude 1 + 0.1 ln 40 on cos/sin, and the same in the scale. */
static void test_deepseek2_without_log_multiplier(void **state) {
    (void)state;
    md_config c;
    mw_err e;
    vx_meta *m = fixture_meta("deepseek2-tiny", "deepseek2.rope.scaling.yarn_log_multiplier");
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    const double m40 = 1 + 0.1 * log(40.0);
    assert_float_equal(c.rope.mscale, m40, 1e-6);
    assert_float_equal(c.kq_scale, m40 * m40 / sqrt(48.0), 1e-6);
    md_config_free(&c);
    vx_meta_free(m);
}

/* llama.cpp's defaults: gating softmax, no normalization, no scale, no groups, no dense layers;
 * a q_lora_rank of 0 means one attn_q projection. */
static void test_deepseek2_defaults(void **state) {
    (void)state;
    md_config c;
    mw_err e;
    vx_meta *m = fixture_meta("deepseek2-tiny", NULL);
    const char *drop[] = {
        "deepseek2.expert_gating_func",      "deepseek2.expert_weights_norm",
        "deepseek2.expert_weights_scale",    "deepseek2.expert_group_count",
        "deepseek2.expert_group_used_count", "deepseek2.leading_dense_block_count"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) {
        long idx = vx_meta_find(m, drop[i]);
        assert_true(idx >= 0);
        vx_meta *n = vx_meta_new();
        for (size_t j = 0; j < vx_meta_count(m); j++)
            if ((long)j != idx) assert_int_equal(vx_meta_copy_entry(n, m, j), 0);
        vx_meta_free(m);
        m = n;
    }
    vx_meta_set_u32(m, "deepseek2.attention.q_lora_rank", 0);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.router.gate, MD_GATE_SOFTMAX);
    assert_true(!c.router.norm && c.router.scale == 0 && c.router.n_group == 0);
    assert_int_equal(c.n_dense_lead, 0);
    assert_int_equal(c.mla.q_lora, 0);
    md_config_free(&c);
    vx_meta_free(m);
}

/* The legacy layout (attn_kv_b): per-head key_length / value_length, no *_mla keys. */
static void test_deepseek2_legacy_layout(void **state) {
    (void)state;
    md_config c;
    mw_err e;
    vx_meta *m = fixture_meta("deepseek2-tiny", "deepseek2.attention.key_length_mla");
    vx_meta_set_u32(m, "deepseek2.attention.value_length_mla", 0);
    vx_meta_set_u32(m, "deepseek2.attention.key_length", 48);
    vx_meta_set_u32(m, "deepseek2.attention.value_length", 32);
    vx_meta_set_u32(m, "deepseek2.attention.head_count_kv", 4);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_true(c.mla.legacy);
    assert_int_equal(c.mla.nope, 32);
    assert_int_equal(c.mla.v, 32);
    assert_int_equal(c.head_dim_k, 80);
    assert_int_equal(c.n_head_kv, 1);
    md_config_free(&c);
    vx_meta_free(m);
}

/* 27 layers: llama.cpp's lite rule, one attn_q whatever q_lora_rank says. */
static void test_deepseek2_lite_rule(void **state) {
    (void)state;
    md_config c;
    mw_err e;
    vx_meta *m = fixture_meta("deepseek2-tiny", "deepseek2.attention.q_lora_rank");
    vx_meta_set_u32(m, "deepseek2.block_count", 27);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.mla.q_lora, 0);
    md_config_free(&c);
    vx_meta_free(m);
}

static void test_deepseek2_errors(void **state) {
    (void)state;
    const char *required[] = {"deepseek2.attention.kv_lora_rank", "deepseek2.attention.q_lora_rank",
                              "deepseek2.expert_shared_count",
                              "deepseek2.expert_feed_forward_length",
                              "deepseek2.feed_forward_length"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        expect_error(fixture_meta("deepseek2-tiny", required[i]), required[i]);
    vx_meta *m = fixture_meta("deepseek2-tiny", NULL);
    vx_meta_set_u32(m, "deepseek2.expert_gating_func", 4); /* sqrt(softplus): not ours */
    expect_error(m, "deepseek2.expert_gating_func = 4 is not a gating function");
    m = fixture_meta("deepseek2-tiny", NULL);
    vx_meta_set_u32(m, "deepseek2.expert_group_count", 3); /* does not divide 16 */
    expect_error(m, "deepseek2.expert_group_count = 3 must divide");
    m = fixture_meta("deepseek2-tiny", NULL);
    vx_meta_set_u32(m, "deepseek2.expert_group_used_count", 4); /* all groups */
    expect_error(m, "deepseek2.expert_group_used_count = 4");
    m = fixture_meta("deepseek2-tiny", NULL);
    vx_meta_set_u32(m, "deepseek2.expert_group_used_count", 1); /* 4 experts in 1 group of 4: ok */
    vx_meta_set_u32(m, "deepseek2.expert_used_count", 5);       /* 5 of 4 */
    expect_error(m, "expert_used_count 5 exceeds the 4 experts");
    m = fixture_meta("deepseek2-tiny", "deepseek2.attention.value_length_mla");
    expect_error(m, "key_length_mla and attention.value_length_mla must both be set");
    m = fixture_meta("deepseek2-tiny", NULL);
    vx_meta_set_u32(m, "deepseek2.attention.key_length", 96); /* not kv_lora + rope = 80 */
    expect_error(m, "deepseek2.attention.key_length = 96");
    m = fixture_meta("deepseek2-tiny", NULL);
    vx_meta_set_u32(m, "deepseek2.rope.dimension_count", 48); /* no q_nope left */
    expect_error(m, "no non-rotated dimensions");
    m = fixture_meta("deepseek2-tiny", NULL);
    vx_meta_set_f32(m, "deepseek2.expert_weights_scale", -1.0f);
    expect_error(m, "deepseek2.expert_weights_scale");
    m = fixture_meta("deepseek2-tiny", NULL);
    vx_meta_set_u32(m, "deepseek2.leading_dense_block_count", 4); /* more than the 3 layers */
    expect_error(m, "deepseek2.leading_dense_block_count");
    /* a fixed router's family does not group */
    m = fixture_meta("qwen3moe-tiny", NULL);
    vx_meta_set_u32(m, "qwen3moe.expert_group_count", 2);
    expect_error(m, "does not route by expert groups");
}

static void test_missing_required_keys(void **state) {
    (void)state;
    const char *keys[] = {"gpt-oss.block_count",
                          "gpt-oss.attention.sliding_window",
                          "gpt-oss.expert_feed_forward_length",
                          "gpt-oss.attention.key_length",
                          "gpt-oss.rope.scaling.original_context_length",
                          "gpt-oss.attention.layer_norm_rms_epsilon",
                          "general.architecture"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        expect_error(fixture_meta("gpt-oss-tiny", keys[i]), keys[i]);
}

static void test_unknown_values(void **state) {
    (void)state;
    vx_meta *m = fixture_meta("gpt-oss-tiny", NULL);
    vx_meta_set_str(m, "gpt-oss.rope.scaling.type", "foo", 3);
    expect_error(m, "rope.scaling.type");

    m = fixture_meta("gpt-oss-tiny", NULL);
    vx_meta_set_str(m, "general.architecture", "llama9", 6);
    expect_error(m, "unknown model family 'llama9'");

    m = fixture_meta("gpt-oss-tiny", NULL);
    vx_meta_set_u32(m, "gpt-oss.expert_used_count", 9); /* more than the 8 experts */
    expect_error(m, "gpt-oss.expert_used_count");

    m = fixture_meta("gpt-oss-tiny", NULL);
    vx_meta_set_u32(m, "gpt-oss.attention.head_count_kv", 3); /* does not divide 4 */
    expect_error(m, "head_count_kv");

    m = fixture_meta("gpt-oss-tiny", NULL);
    vx_meta_set_u32(m, "gpt-oss.expert_gating_func", 2); /* sigmoid: not gpt-oss's router */
    expect_error(m, "expert_gating_func");

    m = fixture_meta("qwen3moe-tiny", NULL);
    vx_meta_set_u32(m, "qwen3moe.attention.sliding_window", 128);
    expect_error(m, "no sliding window");

    m = fixture_meta("qwen3moe-tiny", NULL);
    vx_meta_set_bool(m, "qwen3moe.expert_weights_norm", false);
    expect_error(m, "expert_weights_norm");

    m = fixture_meta("gpt-oss-tiny", NULL);
    vx_meta_set_str(m, "gpt-oss.block_count", "four", 4);
    expect_error(m, "gpt-oss.block_count");
}

static void test_sliding_window_patterns(void **state) {
    (void)state;
    md_config c;
    mw_err e;
    vx_meta *m = fixture_meta("gpt-oss-tiny", NULL);
    vx_meta_set_u32(m, "gpt-oss.attention.sliding_window_pattern", 3);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    const uint8_t p3[4] = {1, 1, 0, 1};
    assert_memory_equal(c.layer_swa, p3, 4);
    md_config_free(&c);
    const uint8_t flags[4] = {0, 0, 1, 1};
    vx_meta_set_arr(m, "gpt-oss.attention.sliding_window_pattern", VX_BOOL, flags, 4);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_memory_equal(c.layer_swa, flags, 4);
    md_config_free(&c);
    vx_meta_set_arr(m, "gpt-oss.attention.sliding_window_pattern", VX_BOOL, flags, 3);
    expect_error(m, "3 entries for 4 layers");
}

static void test_overrides_read_from_config(void **state) {
    (void)state;
    md_config c;
    mw_err e;
    vx_meta *m = fixture_meta("gpt-oss-tiny", NULL);
    vx_meta_set_f32(m, "gpt-oss.swiglu_clamp_exp", 10.0f);
    vx_meta_set_f32(m, "gpt-oss.rope.freq_base_swa", 10000.0f);
    vx_meta_set_f32(m, "gpt-oss.rope.scaling.yarn_beta_fast", 16.0f);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_float_equal(c.glu.limit, 10.0, 0);
    assert_float_equal(c.rope_swa.freq_base, 10000, 0);
    assert_float_equal(c.rope.freq_base, 150000, 0);
    /* beta_fast 16 moves the low correction dim: 64 ln(4096/(16·2π)) / (2 ln 150000) = 9.95 */
    assert_float_equal(c.rope.corr_dims[0], 9, 0);
    md_config_free(&c);
    vx_meta_free(m);

    /* qwen3moe: expert width from feed_forward_length / expert_used_count when absent */
    m = fixture_meta("qwen3moe-tiny", "qwen3moe.expert_feed_forward_length");
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.n_ff_exp, 768 / 2);
    md_config_free(&c);
    /* a qwen3moe file with YaRN gets YaRN */
    vx_meta_set_str(m, "qwen3moe.rope.scaling.type", "yarn", 4);
    vx_meta_set_f32(m, "qwen3moe.rope.scaling.factor", 4.0f);
    vx_meta_set_u32(m, "qwen3moe.rope.scaling.original_context_length", 32768);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.rope.scaling, MD_ROPE_SCALING_YARN);
    assert_float_equal(c.rope.mscale, 1 + 0.1 * log(4.0), 1e-6);
    md_config_free(&c);
    vx_meta_free(m);
}

/* rope.scaling.yarn_truncate (carried from HF's rope_scaling.truncate): false keeps the YaRN
 * correction range fractional; true or absent rounds it (llama.cpp, GGUF files). */
static void test_yarn_truncate(void **state) {
    (void)state;
    md_config c;
    mw_err e;
    vx_meta *m = fixture_meta("gpt-oss-tiny", NULL);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_false(c.rope.yarn_fractional);
    assert_float_equal(c.rope.corr_dims[0], 8, 0);
    assert_float_equal(c.rope.corr_dims[1], 18, 0);
    md_config_free(&c);
    vx_meta_set_bool(m, "gpt-oss.rope.scaling.yarn_truncate", true);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_float_equal(c.rope.corr_dims[1], 18, 0);
    md_config_free(&c);
    vx_meta_set_bool(m, "gpt-oss.rope.scaling.yarn_truncate", false);
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_true(c.rope.yarn_fractional && c.rope_swa.yarn_fractional);
    /* 64 ln(4096 / (β 2π)) / (2 ln 150000) for β = 32 and 1 */
    assert_float_equal(c.rope.corr_dims[0], 64 * log(4096 / (64 * M_PI)) / (2 * log(150000.0)),
                       1e-5);
    assert_float_equal(c.rope.corr_dims[1], 64 * log(4096 / (2 * M_PI)) / (2 * log(150000.0)),
                       1e-5);
    md_config_free(&c);
    vx_meta_set_str(m, "gpt-oss.rope.scaling.yarn_truncate", "no", 2);
    assert_int_equal(md_config_read(m, &c, &e), -1);
    if (!strstr(e.msg, "gpt-oss.rope.scaling.yarn_truncate")) fail_msg("%s", e.msg);
    vx_meta_free(m);

    /* the key belongs to YaRN: on a model without it the file contradicts itself */
    m = fixture_meta("qwen3moe-tiny", NULL);
    vx_meta_set_bool(m, "qwen3moe.rope.scaling.yarn_truncate", false);
    expect_error(m, "qwen3moe.rope.scaling.yarn_truncate is set, but the RoPE scaling is none");
}

/* kimi-linear (FORMATS.md §8): the layer kinds from head_count_kv per layer, KDA's widths, a
 * latent attention without rotation scaled by 1/sqrt(key_length_mla), a sigmoid router that
 * always renormalizes. */
static void test_kimi_linear_fixture(void **state) {
    (void)state;
    vx_meta *m = fixture_meta("kimi-linear-tiny", NULL);
    md_config c;
    mw_err e;
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_string_equal(c.arch, "kimi-linear");
    assert_int_equal(c.n_kda, 3);
    const uint8_t kda[4] = {1, 1, 1, 0}; /* derived.kda_layers [0, 1, 2] */
    assert_memory_equal(c.layer_kda, kda, 4);
    assert_int_equal(c.kda.n_head, 4);
    assert_int_equal(c.kda.head_dim, 64);
    assert_int_equal(c.kda.conv, 4);
    assert_false(c.kda.lower_bound || c.kda.gate_full);
    assert_int_equal(c.attn, MD_ATTN_MLA);
    assert_int_equal(c.mla.q_lora, 0);
    assert_int_equal(c.mla.kv_lora, 64);
    assert_int_equal(c.mla.nope, 32);
    assert_int_equal(c.mla.rope, 16);
    assert_int_equal(c.mla.v, 32);
    assert_int_equal(c.rope.layout, MD_ROPE_NONE);
    assert_float_equal(c.kq_scale, 0.14433756729740646, 1e-7); /* derived.mla_kq_scale */
    assert_int_equal(c.n_dense_lead, 1);
    assert_int_equal(c.n_ff, 384);
    assert_int_equal(c.n_shared, 1);
    assert_int_equal(c.n_ff_shared, 128);
    assert_int_equal(c.router.gate, MD_GATE_SIGMOID);
    assert_true(c.router.norm && c.router.select_bias);
    assert_float_equal(c.router.scale, 2.446, 1e-6);
    md_config_free(&c);
    vx_meta_free(m);
}

static void test_kimi_linear_errors(void **state) {
    (void)state;
    const char *required[] = {"kimi-linear.kda.head_dim", "kimi-linear.ssm.conv_kernel",
                              "kimi-linear.attention.head_count_kv",
                              "kimi-linear.expert_gating_func", "kimi-linear.rope.dimension_count"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        expect_error(fixture_meta("kimi-linear-tiny", required[i]), required[i]);
    vx_meta *m = fixture_meta("kimi-linear-tiny", NULL);
    const int32_t three[3] = {0, 0, 1};
    vx_meta_set_arr(m, "kimi-linear.attention.head_count_kv", VX_I32, three, 3);
    expect_error(m, "kimi-linear.attention.head_count_kv has 3 entries for 4 layers");
    m = fixture_meta("kimi-linear-tiny", NULL);
    const int32_t neg[4] = {0, -1, 0, 1};
    vx_meta_set_arr(m, "kimi-linear.attention.head_count_kv", VX_I32, neg, 4);
    expect_error(m, "kimi-linear.attention.head_count_kv[1] = -1");
    m = fixture_meta("kimi-linear-tiny", NULL);
    vx_meta_set_f32(m, "kimi-linear.kda.gate_lower_bound", -5.0f); /* K3's, not kimi-linear's */
    expect_error(m, "kimi-linear.kda.gate_lower_bound is set");
    m = fixture_meta("kimi-linear-tiny", NULL);
    vx_meta_set_bool(m, "kimi-linear.expert_weights_norm", false);
    expect_error(m, "kimi-linear always normalizes");
    m = fixture_meta("kimi-linear-tiny", NULL);
    vx_meta_set_u32(m, "kimi-linear.attention.q_lora_rank", 96);
    expect_error(m, "queries have no down-projection");
    m = fixture_meta("kimi-linear-tiny", NULL);
    vx_meta_set_u32(m, "kimi-linear.ssm.conv_kernel", 0);
    expect_error(m, "kimi-linear.ssm.conv_kernel = 0");
    /* a scalar head_count_kv applies to every layer: 0 makes them all KDA */
    m = fixture_meta("kimi-linear-tiny", NULL);
    vx_meta_set_u32(m, "kimi-linear.attention.head_count_kv", 0);
    md_config c;
    mw_err e;
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.n_kda, 4);
    md_config_free(&c);
    vx_meta_free(m);
}

/* kimi-k3 (FORMATS.md §9): kimi-linear's stack plus a query rank, the bounded decay, the full-rank
 * KDA gate, attention residuals, a latent MoE, SiTU, and expert_weights_norm read (default off). */
static void test_kimi_k3_fixture(void **state) {
    (void)state;
    vx_meta *m = fixture_meta("kimi-k3-tiny", NULL);
    md_config c;
    mw_err e;
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_string_equal(c.arch, "kimi-k3");
    const uint8_t kda[4] = {1, 1, 1, 0};
    assert_memory_equal(c.layer_kda, kda, 4);
    assert_true(c.kda.gate_full && c.kda.lower_bound);
    assert_float_equal(c.kda.gate_lb, -5.0, 0);
    assert_int_equal(c.mla.q_lora, 96);
    assert_int_equal(c.mla.kv_lora, 64);
    assert_int_equal(c.rope.layout, MD_ROPE_NONE);
    assert_float_equal(c.kq_scale, 0.14433756729740646, 1e-7);
    assert_int_equal(c.attn_res_block, 2);
    assert_int_equal(c.n_expert_latent, 128);
    assert_int_equal(md_expert_width(&c), 128);
    assert_int_equal(c.glu.kind, KN_GLU_SITU);
    assert_float_equal(c.glu.beta, 2.0, 0);
    assert_float_equal(c.glu.lbeta, 2.5, 0);
    assert_int_equal(c.router.gate, MD_GATE_SIGMOID);
    assert_true(c.router.norm && c.router.select_bias);
    assert_float_equal(c.router.scale, 2.446, 1e-6);
    md_config_free(&c);
    vx_meta_free(m);
    /* expert_weights_norm absent: K3 does not normalize */
    m = fixture_meta("kimi-k3-tiny", "kimi-k3.expert_weights_norm");
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_false(c.router.norm);
    md_config_free(&c);
    vx_meta_free(m);
}

static void test_kimi_k3_errors(void **state) {
    (void)state;
    const char *required[] = {"kimi-k3.attn_res.block_size", "kimi-k3.activation.situ_beta",
                              "kimi-k3.activation.situ_linear_beta"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        expect_error(fixture_meta("kimi-k3-tiny", required[i]), required[i]);
    vx_meta *m = fixture_meta("kimi-k3-tiny", NULL);
    vx_meta_set_f32(m, "kimi-k3.kda.gate_lower_bound", 1.0f);
    expect_error(m, "kimi-k3.kda.gate_lower_bound = 1 must be a negative number");
    m = fixture_meta("kimi-k3-tiny", NULL);
    vx_meta_set_f32(m, "kimi-k3.activation.situ_beta", 0.0f);
    expect_error(m, "kimi-k3.activation.situ_beta");
    /* a block longer than the 4 layers is one bank at layer 0, as llama.cpp reads it */
    m = fixture_meta("kimi-k3-tiny", NULL);
    vx_meta_set_u32(m, "kimi-k3.attn_res.block_size", 5);
    md_config c;
    mw_err e;
    if (md_config_read(m, &c, &e)) fail_msg("%s", e.msg);
    assert_int_equal(c.attn_res_block, 5);
    md_config_free(&c);
    vx_meta_free(m);
    m = fixture_meta("kimi-k3-tiny", NULL);
    vx_meta_set_u32(m, "kimi-k3.attn_res.block_size", 1u << 21);
    expect_error(m, "kimi-k3.attn_res.block_size = 2097152");
    m = fixture_meta("kimi-k3-tiny", NULL);
    vx_meta_set_u32(m, "kimi-k3.expert_latent_length", 1 << 21);
    expect_error(m, "kimi-k3.expert_latent_length");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gptoss_fixture),
        cmocka_unit_test(test_qwen3moe_fixture),
        cmocka_unit_test(test_deepseek2_fixture),
        cmocka_unit_test(test_deepseek2_without_log_multiplier),
        cmocka_unit_test(test_deepseek2_defaults),
        cmocka_unit_test(test_deepseek2_legacy_layout),
        cmocka_unit_test(test_deepseek2_lite_rule),
        cmocka_unit_test(test_deepseek2_errors),
        cmocka_unit_test(test_missing_required_keys),
        cmocka_unit_test(test_unknown_values),
        cmocka_unit_test(test_sliding_window_patterns),
        cmocka_unit_test(test_overrides_read_from_config),
        cmocka_unit_test(test_yarn_truncate),
        cmocka_unit_test(test_kimi_linear_fixture),
        cmocka_unit_test(test_kimi_linear_errors),
        cmocka_unit_test(test_kimi_k3_fixture),
        cmocka_unit_test(test_kimi_k3_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
