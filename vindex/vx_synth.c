/* vindex/vx_synth.c — random-weight models of any shape, generated row by row on demand.
 *
 * Each tensor row is a function of (seed, tensor name, row index) only: a counter-based generator
 * fills it with values uniform around a centre with a chosen standard deviation, and the kernels'
 * quantizer encodes it in the stored format. Scales keep activations near unit RMS through many
 * layers: weights ~ 1/sqrt(fan_in), output projections further divided by sqrt(2 · layers) (the
 * residual stream grows by two sublayers per layer), norms near 1, small biases. */
#include "vindex/vx_synth.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_gguf_internal.h"
#include "vindex/vx_hash.h"

/* How one tensor's values are drawn. */
typedef struct gen {
    uint64_t seed;
    float center, spread; /* values uniform in center ± spread */
    /* a router bias made skewed (--hot-experts): its first hot_n values get hot_add more */
    int hot_n;
    float hot_add;
} gen;

typedef struct synth {
    vx_input in;
    kn_pool *pool; /* row generation runs on it */
    vx_input_tensor *t;
    gen *g;
    size_t n, cap;
} synth;

/* ---- families ------------------------------------------------------------------------------ */

/* One row per family synth can make, pointing at the family's row of vindex/vx_family.c (its name,
 * which is --arch, general.architecture and the metadata key prefix, and its sliding window): the
 * published model's values synth starts from, as llama.cpp's converter writes them, and the
 * layer's tensors. A new family is a new row (and its layer function); nothing else compares
 * family names. */
typedef struct synth_arch {
    const vx_family *family;
    int head_dim;        /* default head dimension; 0 = hidden / heads */
    kn_type expert_type; /* default expert format */
    int context;         /* default context_length */
    int ff_mult;         /* feed_forward_length = ff_mult × expert ff */
    float rope_base;     /* rope.freq_base */
    float rms_eps;       /* attention.layer_norm_rms_epsilon */
    bool yarn;           /* rope.scaling: YaRN ×32 over an original context of 4096 */
    /* The family's tokenizer (a per-family hook: a new family fills these in): the pre-tokenizer
     * name; 3 control tokens that end the vocabulary (BOS, then the padding token at
     * vocab - pad_from_end, EOS last); the family's other chat tokens (NULL-terminated), placed
     * just before them when the vocabulary has room (<think> / </think> user-defined, the rest
     * control); and a tokenizer.chat_template the tokenizer recognises as the family's chat
     * format (tokenizer/tk_chat.c), a working Jinja template too (serve renders it: content as
     * a string or text parts). */
    const char *tok_pre;
    const char *special[3];
    int pad_from_end;
    const char *chat_special[16];
    const char *chat_template;
    /* The router's bias tensor that --hot-experts raises (NULL: the family has none). */
    const char *router_bias;
    /* Adds layer l's tensors, in the order llama.cpp's converter writes them. */
    int (*layer)(synth *s, const vx_synth_opts *o, int l);
    /* Optional: model-level tensors of the family's own, after the output head. */
    int (*globals)(synth *s, const vx_synth_opts *o);
    /* Optional: metadata keys of the family's own, added after the common ones (replacing any
     * of those it restates). */
    int (*meta)(vx_meta *m, const vx_synth_opts *o);
    /* Optional: the family's own option defaults and constraints, before the common checks. */
    int (*complete)(vx_synth_opts *o, mw_err *err);
} synth_arch;

static int layer_gpt_oss(synth *s, const vx_synth_opts *o, int l);
static int layer_qwen3moe(synth *s, const vx_synth_opts *o, int l);
static int layer_deepseek2(synth *s, const vx_synth_opts *o, int l);
static int meta_deepseek2(vx_meta *m, const vx_synth_opts *o);
static int complete_deepseek2(vx_synth_opts *o, mw_err *err);
static int layer_kimi_linear(synth *s, const vx_synth_opts *o, int l);
static int meta_kimi_linear(vx_meta *m, const vx_synth_opts *o);
static int complete_kimi_linear(vx_synth_opts *o, mw_err *err);
static int layer_kimi_k3(synth *s, const vx_synth_opts *o, int l);
static int globals_kimi_k3(synth *s, const vx_synth_opts *o);
static int meta_kimi_k3(vx_meta *m, const vx_synth_opts *o);
static int complete_kimi_k3(vx_synth_opts *o, mw_err *err);

static const synth_arch archs[] = {
    {.family = &vx_families[VX_FAMILY_GPT_OSS],
     .head_dim = 64,
     .expert_type = KN_MXFP4,
     .context = 131072,
     .ff_mult = 1,
     .rope_base = 150000.0f,
     .rms_eps = 1e-5f,
     .yarn = true,
     .tok_pre = "gpt-4o",
     .special = {"<|startoftext|>", "<|endoftext|>", "<|return|>"},
     .pad_from_end = 2,
     .chat_special = {"<|constrain|>", "<|channel|>", "<|start|>", "<|end|>", "<|message|>",
                      "<|call|>"},
     .chat_template = "{#- harmony (gpt-oss) -#}"
                      "{%- macro text(c) -%}{%- if c is string -%}{{ c }}{%- else -%}{%- for p in "
                      "c -%}{{ p.text }}"
                      "{%- endfor -%}{%- endif -%}{%- endmacro -%}"
                      "{%- for m in messages -%}<|start|>{{ m.role }}"
                      "{%- if m.channel %}<|channel|>{{ m.channel }}{% endif -%}<|message|>"
                      "{{ text(m.content) }}<|end|>{%- endfor -%}{%- if add_generation_prompt -%}"
                      "<|start|>assistant{%- endif -%}",
     .router_bias = "ffn_gate_inp.bias",
     .layer = layer_gpt_oss},
    {.family = &vx_families[VX_FAMILY_QWEN3MOE],
     .head_dim = 0,
     .expert_type = KN_Q6_K,
     .context = 40960,
     .ff_mult = 3,
     .rope_base = 1000000.0f,
     .rms_eps = 1e-6f,
     .tok_pre = "qwen2",
     .special = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"},
     .pad_from_end = 3,
     .chat_special = {"<think>", "</think>"},
     .chat_template = "{#- ChatML with the Qwen3 thinking switch -#}"
                      "{%- macro text(c) -%}{%- if c is string -%}{{ c }}{%- else -%}{%- for p in "
                      "c -%}{{ p.text }}"
                      "{%- endfor -%}{%- endif -%}{%- endmacro -%}"
                      "{%- for m in messages -%}"
                      "<|im_start|>{{ m.role }}\n{{ text(m.content) }}<|im_end|>\n{%- endfor -%}"
                      "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- if "
                      "enable_thinking is defined and not enable_thinking -%}<think>\n\n</think>"
                      "\n\n{%- endif -%}{%- endif -%}",
     .layer = layer_qwen3moe},
    {.family = &vx_families[VX_FAMILY_DEEPSEEK2],
     .head_dim = 128,
     .expert_type = KN_Q6_K,
     .context = 163840,
     .ff_mult = 9,
     .rope_base = 10000.0f,
     .rms_eps = 1e-6f,
     .tok_pre = "deepseek-v3",
     .special = {"<｜begin▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜end▁of▁sentence｜>"},
     .pad_from_end = 2,
     .chat_special = {"<｜User｜>", "<｜Assistant｜>"},
     .chat_template =
         "{#- DeepSeek-V3 -#}"
         "{%- macro text(c) -%}{%- if c is string -%}{{ c }}{%- else -%}{%- for p in c -%}{{ "
         "p.text }}"
         "{%- endfor -%}{%- endif -%}{%- endmacro -%}"
         "{%- set ns = namespace(system='') -%}{%- for m in "
         "messages -%}{%- if m.role == 'system' -%}{%- set ns.system = ns.system + "
         "text(m.content) -%}{%- endif -%}{%- endfor -%}{{ bos_token }}{{ ns.system }}"
         "{%- for m in messages -%}{%- if m.role == 'user' -%}<｜User｜>{{ text(m.content) }}"
         "{%- elif m.role == 'assistant' -%}<｜Assistant｜>{{ text(m.content) }}"
         "<｜end▁of▁sentence｜>{%- endif -%}{%- endfor -%}{%- if "
         "add_generation_prompt -%}<｜Assistant｜>{%- endif -%}",
     .router_bias = "exp_probs_b.bias",
     .layer = layer_deepseek2,
     .meta = meta_deepseek2,
     .complete = complete_deepseek2},
    /* Kimi Linear 48B-A3B's values; its tiktoken vocabulary comes to GGUF as byte-level BPE with
     * the kimi-k2 pre-tokenizer */
    {.family = &vx_families[VX_FAMILY_KIMI_LINEAR],
     .head_dim = 128,
     .expert_type = KN_MXFP4,
     .context = 1048576,
     .ff_mult = 9,
     .rope_base = 10000.0f,
     .rms_eps = 1e-5f,
     .tok_pre = "kimi-k2",
     .special = {"[BOS]", "<|im_end|>", "[EOS]"},
     .pad_from_end = 2,
     .chat_special = {"<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>"},
     .chat_template = "{#- kimi-k2 -#}"
                      "{%- macro text(c) -%}{%- if c is string -%}{{ c }}{%- else -%}{%- for p in "
                      "c -%}{{ p.text }}"
                      "{%- endfor -%}{%- endif -%}{%- endmacro -%}"
                      "{%- for m in messages -%}<|im_{{ m.role }}|>{{ m.role }}"
                      "<|im_middle|>{{ text(m.content) }}<|im_end|>{%- endfor -%}{%- if "
                      "add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif "
                      "-%}",
     .layer = layer_kimi_linear,
     .meta = meta_kimi_linear,
     .complete = complete_kimi_linear},
    /* Kimi K3's published shape where the fixtures and FORMATS.md give it (a bounded decay of -5,
     * MXFP4 experts), Kimi Linear's elsewhere */
    {.family = &vx_families[VX_FAMILY_KIMI_K3],
     .head_dim = 128,
     .expert_type = KN_MXFP4,
     .context = 1048576,
     .ff_mult = 9,
     .rope_base = 10000.0f,
     .rms_eps = 1e-5f,
     .tok_pre = "kimi-k2",
     .special = {"[BOS]", "[EOS]", "<|end_of_msg|>"},
     .pad_from_end = 2,
     .layer = layer_kimi_k3,
     .globals = globals_kimi_k3,
     .meta = meta_kimi_k3,
     .complete = complete_kimi_k3},
};

#define N_ARCHS (sizeof archs / sizeof archs[0])

static const synth_arch *arch_of(const vx_family *f) {
    for (size_t i = 0; f && i < N_ARCHS; i++)
        if (archs[i].family == f) return &archs[i];
    return NULL;
}

static const synth_arch *find_arch(const char *name) {
    return arch_of(vx_family_find(name));
}

bool vx_synth_has_family(const vx_family *f) {
    return arch_of(f) != NULL;
}

const char *vx_synth_family_names(char *buf, size_t cap, const char *sep) {
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (size_t i = 0; i < N_ARCHS && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? sep : "", archs[i].family->arch);
    return buf;
}

/* ---- options ------------------------------------------------------------------------------- */

void vx_synth_defaults(vx_synth_opts *o) {
    memset(o, 0, sizeof *o);
    o->expert_type = o->dense_type = KN_TYPE_COUNT;
    o->seed = UINT64_MAX; /* unset */
    int *unset[] = {&o->q_lora,       &o->kv_lora,  &o->rope_dim,       &o->v_dim,
                    &o->dense_layers, &o->dense_ff, &o->shared_experts, &o->groups,
                    &o->groups_used,  &o->gating,   &o->weights_norm};
    for (size_t i = 0; i < sizeof unset / sizeof unset[0]; i++) *unset[i] = -1;
    o->weights_scale = -1.0f;
    o->attn_res_block = o->expert_latent = -1;
    o->situ_beta = o->situ_lbeta = o->gate_lb = NAN;
    o->hot_bias = 2.0f;
}

static int parse_int(const char *key, const char *val, int lo, int hi, int *out, mw_err *err) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi)
        return mw_errf(err, "--%s %s: expected an integer in %d..%d", key, val, lo, hi);
    *out = (int)v;
    return 0;
}

static int parse_type(const char *key, const char *val, const kn_type *allowed, size_t n,
                      kn_type *out, mw_err *err) {
    int t = kn_type_from_name(val);
    for (size_t i = 0; i < n && t >= 0; i++)
        if (allowed[i] == (kn_type)t) {
            *out = (kn_type)t;
            return 0;
        }
    return mw_errf(err, "--%s %s: unsupported format", key, val);
}

/* The options that take a number in a range (the Kimi K3 ones): 1 when key is one (set, or -1 with
 * err), 0 when it is not. */
static int set_float(vx_synth_opts *o, const char *key, const char *val, mw_err *err) {
    static const struct {
        const char *key;
        size_t off;
        double lo, hi;
    } floats[] = {{"situ-beta", offsetof(vx_synth_opts, situ_beta), 1e-3, 1e3},
                  {"situ-linear-beta", offsetof(vx_synth_opts, situ_lbeta), -1e3, 1e3},
                  {"gate-lower-bound", offsetof(vx_synth_opts, gate_lb), -1e3, -1e-3}};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        if (strcmp(key, floats[i].key)) continue;
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (errno || end == val || *end || !(v >= floats[i].lo) || !(v <= floats[i].hi))
            return mw_errf(err, "--%s %s: expected a number in [%g, %g]", key, val, floats[i].lo,
                           floats[i].hi);
        *(float *)((char *)o + floats[i].off) = (float)v;
        return 1;
    }
    return 0;
}

int vx_synth_set(vx_synth_opts *o, const char *key, const char *val, mw_err *err) {
    static const struct {
        const char *key;
        size_t off;
        int lo, hi;
    } ints[] = {
        {"layers", offsetof(vx_synth_opts, layers), 1, 4096},
        {"hidden", offsetof(vx_synth_opts, hidden), 1, 1 << 20},
        {"heads", offsetof(vx_synth_opts, heads), 1, 4096},
        {"kv-heads", offsetof(vx_synth_opts, kv_heads), 1, 4096},
        {"head-dim", offsetof(vx_synth_opts, head_dim), 2, 1024},
        {"experts", offsetof(vx_synth_opts, experts), 1, 1 << 16},
        {"top-k", offsetof(vx_synth_opts, top_k), 1, 1 << 16},
        {"expert-ff", offsetof(vx_synth_opts, expert_ff), 1, 1 << 20},
        {"vocab", offsetof(vx_synth_opts, vocab), 1, 1 << 24},
        {"sliding-window", offsetof(vx_synth_opts, sliding_window), 1, 1 << 30},
        {"context", offsetof(vx_synth_opts, context), 1, 1 << 30},
        {"q-lora", offsetof(vx_synth_opts, q_lora), 0, 1 << 20},
        {"kv-lora", offsetof(vx_synth_opts, kv_lora), 1, 1 << 16},
        {"rope-dim", offsetof(vx_synth_opts, rope_dim), 2, 512},
        {"v-dim", offsetof(vx_synth_opts, v_dim), 1, 1 << 16},
        {"dense-layers", offsetof(vx_synth_opts, dense_layers), 0, 4096},
        {"dense-ff", offsetof(vx_synth_opts, dense_ff), 1, 1 << 24},
        {"shared-experts", offsetof(vx_synth_opts, shared_experts), 0, 1024},
        {"groups", offsetof(vx_synth_opts, groups), 1, 1 << 16},
        {"groups-used", offsetof(vx_synth_opts, groups_used), 1, 1 << 16},
        {"gating", offsetof(vx_synth_opts, gating), 1, 2},
        {"weights-norm", offsetof(vx_synth_opts, weights_norm), 0, 1},
        {"kda-head-dim", offsetof(vx_synth_opts, kda_head_dim), 2, 1024},
        {"conv-kernel", offsetof(vx_synth_opts, conv_kernel), 1, 64},
        {"full-attn-every", offsetof(vx_synth_opts, full_attn_every), 1, 4096},
        {"expert-latent", offsetof(vx_synth_opts, expert_latent), 0, 1 << 20},
        {"attn-res-block", offsetof(vx_synth_opts, attn_res_block), 0, 4096},
        {"hot-experts", offsetof(vx_synth_opts, hot_experts), 0, 1 << 16},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(key, ints[i].key))
            return parse_int(key, val, ints[i].lo, ints[i].hi, (int *)((char *)o + ints[i].off),
                             err);
    if (!strcmp(key, "arch")) {
        const vx_family *f = vx_family_find(val);
        if (f && f->no_synth) return mw_errf(err, "--arch %s: %s", val, f->no_synth);
        if (!arch_of(f)) {
            char names[128];
            return mw_errf(err, "--arch %s: expected one of %s", val,
                           vx_synth_family_names(names, sizeof names, ", "));
        }
        snprintf(o->arch, sizeof o->arch, "%s", val);
        return 0;
    }
    if (!strcmp(key, "hot-bias")) {
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (errno || end == val || *end || !(fabs(v) <= 100))
            return mw_errf(err, "--hot-bias %s: expected a number in -100 .. 100", val);
        o->hot_bias = (float)v;
        return 0;
    }
    if (!strcmp(key, "weights-scale")) {
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (errno || end == val || *end || !(v >= 0) || v > 1e6)
            return mw_errf(err, "--weights-scale %s: expected a number >= 0", val);
        o->weights_scale = (float)v;
        return 0;
    }
    const int fl = set_float(o, key, val, err);
    if (fl) return fl < 0 ? -1 : 0;
    if (!strcmp(key, "seed")) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (errno || end == val || *end || v == UINT64_MAX || !isdigit((unsigned char)val[0]))
            return mw_errf(err, "--seed %s: expected a non-negative integer", val);
        o->seed = v;
        return 0;
    }
    static const kn_type expert_types[] = {KN_MXFP4, KN_Q6_K};
    static const kn_type dense_types[] = {KN_F32, KN_F16, KN_Q8_0};
    if (!strcmp(key, "expert-format"))
        return parse_type(key, val, expert_types, 2, &o->expert_type, err);
    if (!strcmp(key, "dense-format"))
        return parse_type(key, val, dense_types, 3, &o->dense_type, err);
    return mw_errf(err, "unknown option --%s", key);
}

static int need_multiple(const char *what, int v, kn_type t, mw_err *err) {
    const kn_type_traits *tr = kn_traits(t);
    if (!tr || !tr->from_float)
        return mw_errf(err, "%s format %s has no quantizer", what, kn_type_name(t));
    if (v % tr->blck_size)
        return mw_errf(err, "%s = %d must be a multiple of %d for %s", what, v, tr->blck_size,
                       tr->name);
    return 0;
}

/* Fills defaults that depend on the family and checks every constraint. */
static int complete(vx_synth_opts *o, mw_err *err) {
    if (!o->arch[0]) return mw_errf(err, "--arch is required");
    const synth_arch *a = find_arch(o->arch);
    if (!a) return mw_errf(err, "--arch %s: unknown family", o->arch);
    const struct {
        const char *name;
        int v;
    } req[] = {{"layers", o->layers}, {"hidden", o->hidden},
               {"heads", o->heads},   {"experts", o->experts},
               {"top-k", o->top_k},   {"expert-ff", o->expert_ff},
               {"vocab", o->vocab},   {"seed", o->seed != UINT64_MAX}};
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
        if (!req[i].v) return mw_errf(err, "--%s is required", req[i].name);
    if (o->hot_experts && (!a->router_bias || o->hot_experts > o->experts))
        return mw_errf(err, "--hot-experts %d: %s", o->hot_experts,
                       a->router_bias ? "more than --experts" : "the family has no router bias");
    if (!o->kv_heads) o->kv_heads = o->heads;
    if (!o->head_dim) o->head_dim = a->head_dim ? a->head_dim : o->hidden / o->heads;
    if (o->expert_type == KN_TYPE_COUNT) o->expert_type = a->expert_type;
    if (o->dense_type == KN_TYPE_COUNT) o->dense_type = KN_F32;
    if (!o->sliding_window) o->sliding_window = 128;
    if (!o->context) o->context = a->context;
    if (a->complete && a->complete(o, err)) return -1;
    if (o->heads % o->kv_heads)
        return mw_errf(err, "--heads %d must be a multiple of --kv-heads %d", o->heads,
                       o->kv_heads);
    if (o->head_dim < 2 || o->head_dim % 2)
        return mw_errf(err, "head dimension %d must be even (RoPE rotates pairs)", o->head_dim);
    if (o->top_k > o->experts)
        return mw_errf(err, "--top-k %d exceeds --experts %d", o->top_k, o->experts);
    if (o->vocab < 259)
        return mw_errf(err,
                       "--vocab %d: the byte-level tokenizer needs at least 259 tokens "
                       "(256 bytes + 3 control tokens)",
                       o->vocab);
    return need_multiple("hidden", o->hidden, o->expert_type, err) ||
                   need_multiple("expert-ff", o->expert_ff, o->expert_type, err) ||
                   need_multiple("hidden", o->hidden, o->dense_type, err) ||
                   need_multiple("heads × head-dim", o->heads * o->head_dim, o->dense_type, err)
               ? -1
               : 0;
}

/* ---- generation ---------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Row r of a tensor: values uniform in center ± spread from a splitmix64 stream. */
static void gen_row(const gen *g, uint64_t r, float *out, int64_t n) {
    uint64_t s = mix64(g->seed ^ mix64(r + 0x9e3779b97f4a7c15ull));
    for (int64_t i = 0; i < n; i++) {
        s += 0x9e3779b97f4a7c15ull;
        uint64_t x = mix64(s);
        float u = (float)(x >> 40) * (1.0f / 8388608.0f) - 1.0f; /* [-1, 1) */
        out[i] = g->center + g->spread * u;
        if (i < g->hot_n) out[i] += g->hot_add;
    }
}

/* Whole rows [r0, r0 + n) of a tensor, generated and encoded in parallel on the pool. */
typedef struct rows_task {
    const vx_input_tensor *t;
    uint64_t r0, n, rs;
    uint8_t *dst;
    float **scratch; /* one row of floats per thread */
} rows_task;

static void gen_rows(void *arg, int ith, int nth) {
    const rows_task *rt = arg;
    const gen *g = rt->t->impl;
    const kn_type_traits *tr = kn_traits(rt->t->type);
    for (uint64_t r = (uint64_t)ith; r < rt->n; r += (uint64_t)nth) {
        gen_row(g, rt->r0 + r, rt->scratch[ith], rt->t->ne[0]);
        tr->from_float(rt->scratch[ith], rt->dst + r * rt->rs, rt->t->ne[0]);
    }
}

static int read_synth(const vx_input *in, const vx_input_tensor *t, uint64_t off, void *dst,
                      uint64_t len, mw_err *err) {
    const synth *s = in->impl;
    uint64_t rs = kn_row_size(t->type, t->ne[0]);
    if (off > t->nbytes || len > t->nbytes - off)
        return mw_errf(err, "synth: tensor '%s': read outside its %llu bytes", t->name,
                       (unsigned long long)t->nbytes);
    int nth = kn_pool_size(s->pool);
    float *scratch[8] = {0};
    uint8_t *row = malloc(rs);
    int rc = row ? 0 : -1;
    for (int i = 0; i < nth && rc == 0; i++)
        if (!(scratch[i] = malloc((size_t)t->ne[0] * sizeof(float)))) rc = -1;
    uint8_t *out = dst;
    /* a leading partial row, the whole rows (in parallel), a trailing partial row */
    uint64_t r = off / rs, skip = off - r * rs;
    rows_task whole = {t, 0, 0, rs, NULL, scratch};
    if (rc == 0 && skip > 0) {
        uint64_t n = rs - skip < len ? rs - skip : len;
        rows_task one = {t, r, 1, rs, row, scratch};
        gen_rows(&one, 0, 1);
        memcpy(out, row + skip, n);
        out += n;
        len -= n;
        r++;
    }
    if (rc == 0 && len >= rs) {
        whole.r0 = r;
        whole.n = len / rs;
        whole.dst = out;
        kn_pool_run(s->pool, gen_rows, &whole);
        out += whole.n * rs;
        len -= whole.n * rs;
        r += whole.n;
    }
    if (rc == 0 && len > 0) {
        rows_task one = {t, r, 1, rs, row, scratch};
        gen_rows(&one, 0, 1);
        memcpy(out, row, len);
    }
    for (int i = 0; i < nth; i++) free(scratch[i]);
    free(row);
    return rc ? mw_errf(err, "synth: out of memory") : 0;
}

static int add(synth *s, const char *name, kn_type type, int n_dims, int64_t ne0, int64_t ne1,
               int64_t ne2, float center, float std, uint64_t seed) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        vx_input_tensor *t = realloc(s->t, cap * sizeof *t);
        gen *g = t ? realloc(s->g, cap * sizeof *g) : NULL;
        if (t) s->t = t;
        if (g) s->g = g;
        if (!t || !g) return -1;
        s->cap = cap;
    }
    vx_input_tensor *t = &s->t[s->n];
    memset(t, 0, sizeof *t);
    char *nm = strdup(name);
    if (!nm) return -1;
    t->name = nm;
    t->type = type;
    t->n_dims = n_dims;
    int64_t ne[4] = {ne0, ne1, ne2, 1};
    memcpy(t->ne, ne, sizeof ne);
    char why[120];
    if (vx__tensor_nbytes(type, n_dims, t->ne, &t->nbytes, why, sizeof why)) {
        free(nm);
        return -1;
    }
    t->read = read_synth;
    s->g[s->n] = (gen){seed ^ name_hash(name), center, std * sqrtf(3.0f), 0, 0};
    s->n++;
    return 0;
}

/* ---- the model ----------------------------------------------------------------------------- */

#define BIAS_STD    0.02f
#define NORM_JITTER 0.05f

/* The sizes and scales a model's tensors are drawn with. */
typedef struct dims {
    int64_t H, V, E, F, Q, KV; /* hidden, vocab, experts, expert ff, query and KV widths */
    float w_h;                 /* weights reading the hidden state: 1/sqrt(hidden) */
    float resid;               /* output projections: 1/sqrt(2 · layers) more */
    float norm_std;            /* norm weights: 1 ± NORM_JITTER */
    kn_type D, X;              /* dense and expert formats */
} dims;

static dims dims_of(const vx_synth_opts *o) {
    return (dims){.H = o->hidden,
                  .V = o->vocab,
                  .E = o->experts,
                  .F = o->expert_ff,
                  .Q = (int64_t)o->heads * o->head_dim,
                  .KV = (int64_t)o->kv_heads * o->head_dim,
                  .w_h = 1.0f / sqrtf((float)o->hidden),
                  .resid = 1.0f / sqrtf(2.0f * (float)o->layers),
                  .norm_std = NORM_JITTER / sqrtf(3.0f),
                  .D = o->dense_type,
                  .X = o->expert_type};
}

/* Adds layer l's tensor "blk.l.<suffix>". */
static int add_blk(synth *s, const vx_synth_opts *o, int l, const char *suffix, kn_type type,
                   int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, float center, float std) {
    char n[96];
    snprintf(n, sizeof n, "blk.%d.%s", l, suffix);
    if (add(s, n, type, n_dims, ne0, ne1, ne2, center, std, o->seed)) return -1;
    const synth_arch *a = find_arch(o->arch);
    if (o->hot_experts && a->router_bias && !strcmp(suffix, a->router_bias)) {
        gen *g = &s->g[s->n - 1];
        g->hot_n = o->hot_experts;
        g->hot_add = o->hot_bias;
    }
    return 0;
}

/* The attention norm and the Q, K, V and output projections. */
static int add_attn(synth *s, const vx_synth_opts *o, int l, const dims *d) {
    return add_blk(s, o, l, "attn_norm.weight", KN_F32, 1, d->H, 1, 1, 1.0f, d->norm_std) ||
                   add_blk(s, o, l, "attn_q.weight", d->D, 2, d->H, d->Q, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "attn_k.weight", d->D, 2, d->H, d->KV, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "attn_v.weight", d->D, 2, d->H, d->KV, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "attn_output.weight", d->D, 2, d->Q, d->H, 1, 0,
                           d->resid / sqrtf((float)d->Q))
               ? -1
               : 0;
}

/* The router and the stacked experts. */
static int add_moe(synth *s, const vx_synth_opts *o, int l, const dims *d) {
    return add_blk(s, o, l, "ffn_gate_inp.weight", KN_F32, 2, d->H, d->E, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ffn_gate_exps.weight", d->X, 3, d->H, d->F, d->E, 0, d->w_h) ||
                   add_blk(s, o, l, "ffn_up_exps.weight", d->X, 3, d->H, d->F, d->E, 0, d->w_h) ||
                   add_blk(s, o, l, "ffn_down_exps.weight", d->X, 3, d->F, d->H, d->E, 0,
                           d->resid / sqrtf((float)d->F))
               ? -1
               : 0;
}

/* gpt-oss: biases on the projections, the router and the experts; attention sinks; a norm
 * after attention. */
static int layer_gpt_oss(synth *s, const vx_synth_opts *o, int l) {
    const dims d = dims_of(o);
    return add_attn(s, o, l, &d) ||
                   add_blk(s, o, l, "attn_q.bias", KN_F32, 1, d.Q, 1, 1, 0, BIAS_STD) ||
                   add_blk(s, o, l, "attn_k.bias", KN_F32, 1, d.KV, 1, 1, 0, BIAS_STD) ||
                   add_blk(s, o, l, "attn_v.bias", KN_F32, 1, d.KV, 1, 1, 0, BIAS_STD) ||
                   add_blk(s, o, l, "attn_output.bias", KN_F32, 1, d.H, 1, 1, 0, BIAS_STD) ||
                   add_blk(s, o, l, "attn_sinks.weight", KN_F32, 1, o->heads, 1, 1, 0, 0.5f) ||
                   add_blk(s, o, l, "post_attention_norm.weight", KN_F32, 1, d.H, 1, 1, 1.0f,
                           d.norm_std) ||
                   add_blk(s, o, l, "ffn_gate_inp.bias", KN_F32, 1, d.E, 1, 1, 0, BIAS_STD) ||
                   add_moe(s, o, l, &d) ||
                   add_blk(s, o, l, "ffn_gate_exps.bias", KN_F32, 2, d.F, d.E, 1, 0, BIAS_STD) ||
                   add_blk(s, o, l, "ffn_up_exps.bias", KN_F32, 2, d.F, d.E, 1, 0, BIAS_STD) ||
                   add_blk(s, o, l, "ffn_down_exps.bias", KN_F32, 2, d.H, d.E, 1, 0, BIAS_STD)
               ? -1
               : 0;
}

/* qwen3moe: RMS norms on each head's queries and keys, a norm before the experts. */
static int layer_qwen3moe(synth *s, const vx_synth_opts *o, int l) {
    const dims d = dims_of(o);
    return add_attn(s, o, l, &d) ||
                   add_blk(s, o, l, "attn_q_norm.weight", KN_F32, 1, o->head_dim, 1, 1, 1.0f,
                           d.norm_std) ||
                   add_blk(s, o, l, "attn_k_norm.weight", KN_F32, 1, o->head_dim, 1, 1, 1.0f,
                           d.norm_std) ||
                   add_blk(s, o, l, "ffn_norm.weight", KN_F32, 1, d.H, 1, 1, 1.0f, d.norm_std) ||
                   add_moe(s, o, l, &d)
               ? -1
               : 0;
}

/* deepseek2: DeepSeek-V3's values where an option is unset, and the widths the formats need. */
static int complete_deepseek2(vx_synth_opts *o, mw_err *err) {
    const struct {
        int *v;
        int def;
    } defs[] = {{&o->q_lora, 1536},       {&o->kv_lora, 512},    {&o->rope_dim, 64},
                {&o->v_dim, o->head_dim}, {&o->dense_layers, 1}, {&o->dense_ff, 9 * o->expert_ff},
                {&o->shared_experts, 1},  {&o->groups, 1},       {&o->groups_used, 1},
                {&o->gating, 2},          {&o->weights_norm, 1}};
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (*defs[i].v < 0) *defs[i].v = defs[i].def;
    if (o->weights_scale < 0) o->weights_scale = 2.5f;
    if (o->dense_layers > o->layers)
        return mw_errf(err, "--dense-layers %d exceeds --layers %d", o->dense_layers, o->layers);
    if (o->rope_dim % 2) return mw_errf(err, "--rope-dim %d must be even", o->rope_dim);
    if (o->groups > 1) {
        const int per = o->experts / o->groups;
        if (o->experts % o->groups || per < 2)
            return mw_errf(err, "--groups %d must divide --experts %d into groups of 2 or more",
                           o->groups, o->experts);
        if (o->groups_used >= o->groups || o->top_k > o->groups_used * per)
            return mw_errf(err,
                           "--groups-used %d must be below --groups %d and hold --top-k %d "
                           "experts",
                           o->groups_used, o->groups, o->top_k);
    }
    const kn_type D = o->dense_type == KN_TYPE_COUNT ? KN_F32 : o->dense_type;
    return (o->q_lora && need_multiple("q-lora", o->q_lora, D, err)) ||
                   need_multiple("kv-lora", o->kv_lora, D, err) ||
                   need_multiple("head-dim (qk_nope)", o->head_dim, D, err) ||
                   need_multiple("heads × v-dim", o->heads * o->v_dim, D, err) ||
                   (o->dense_layers && need_multiple("dense-ff", o->dense_ff, D, err)) ||
                   need_multiple("expert-ff × shared-experts",
                                 o->expert_ff * (o->shared_experts ? o->shared_experts : 1), D, err)
               ? -1
               : 0;
}

/* Latent attention (deepseek2, the Kimi line): attn_q_a → attn_q_a_norm → attn_q_b, or attn_q;
 * attn_kv_a_mqa, attn_kv_a_norm, the per-head attn_k_b / attn_v_b; with `gate`, K3's attn_gate;
 * attn_output. */
static int add_mla(synth *s, const vx_synth_opts *o, int l, const dims *d, bool gate) {
    const int64_t H = o->heads, qk = (int64_t)o->head_dim + o->rope_dim, v = o->v_dim;
    const int64_t R = o->kv_lora;
    int rc = 0;
    if (o->q_lora) {
        rc = add_blk(s, o, l, "attn_q_a.weight", d->D, 2, d->H, o->q_lora, 1, 0, d->w_h) ||
             add_blk(s, o, l, "attn_q_a_norm.weight", KN_F32, 1, o->q_lora, 1, 1, 1.0f,
                     d->norm_std) ||
             add_blk(s, o, l, "attn_q_b.weight", d->D, 2, o->q_lora, H * qk, 1, 0,
                     1.0f / sqrtf((float)o->q_lora));
    } else {
        rc = add_blk(s, o, l, "attn_q.weight", d->D, 2, d->H, H * qk, 1, 0, d->w_h);
    }
    return rc ||
                   add_blk(s, o, l, "attn_kv_a_mqa.weight", d->D, 2, d->H, R + o->rope_dim, 1, 0,
                           d->w_h) ||
                   add_blk(s, o, l, "attn_kv_a_norm.weight", KN_F32, 1, R, 1, 1, 1.0f,
                           d->norm_std) ||
                   add_blk(s, o, l, "attn_k_b.weight", d->D, 3, o->head_dim, R, H, 0,
                           1.0f / sqrtf((float)o->head_dim)) ||
                   add_blk(s, o, l, "attn_v_b.weight", d->D, 3, R, v, H, 0,
                           1.0f / sqrtf((float)R)) ||
                   (gate &&
                    add_blk(s, o, l, "attn_gate.weight", d->D, 2, d->H, H * v, 1, 0, d->w_h)) ||
                   add_blk(s, o, l, "attn_output.weight", d->D, 2, H * v, d->H, 1, 0,
                           d->resid / sqrtf((float)(H * v)))
               ? -1
               : 0;
}

/* DeepSeek-V3's FFN part of a layer: ffn_norm, then a dense FFN in the leading layers, else the
 * router with its selection bias, the experts and the shared experts. */
static int add_ds_ffn(synth *s, const vx_synth_opts *o, int l, const dims *d) {
    const int64_t Fs = (int64_t)o->expert_ff * o->shared_experts;
    int rc = add_blk(s, o, l, "ffn_norm.weight", KN_F32, 1, d->H, 1, 1, 1.0f, d->norm_std);
    if (l < o->dense_layers)
        return rc ||
                       add_blk(s, o, l, "ffn_gate.weight", d->D, 2, d->H, o->dense_ff, 1, 0,
                               d->w_h) ||
                       add_blk(s, o, l, "ffn_up.weight", d->D, 2, d->H, o->dense_ff, 1, 0,
                               d->w_h) ||
                       add_blk(s, o, l, "ffn_down.weight", d->D, 2, o->dense_ff, d->H, 1, 0,
                               d->resid / sqrtf((float)o->dense_ff))
                   ? -1
                   : 0;
    rc = rc || add_moe(s, o, l, d) ||
         add_blk(s, o, l, "exp_probs_b.bias", KN_F32, 1, d->E, 1, 1, 0, BIAS_STD);
    if (o->shared_experts)
        rc = rc || add_blk(s, o, l, "ffn_gate_shexp.weight", d->D, 2, d->H, Fs, 1, 0, d->w_h) ||
             add_blk(s, o, l, "ffn_up_shexp.weight", d->D, 2, d->H, Fs, 1, 0, d->w_h) ||
             add_blk(s, o, l, "ffn_down_shexp.weight", d->D, 2, Fs, d->H, 1, 0,
                     d->resid / sqrtf((float)Fs));
    return rc ? -1 : 0;
}

/* deepseek2: latent attention, then DeepSeek-V3's FFN. */
static int layer_deepseek2(synth *s, const vx_synth_opts *o, int l) {
    const dims d = dims_of(o);
    return add_blk(s, o, l, "attn_norm.weight", KN_F32, 1, d.H, 1, 1, 1.0f, d.norm_std) ||
                   add_mla(s, o, l, &d, false) || add_ds_ffn(s, o, l, &d)
               ? -1
               : 0;
}

/* deepseek2's keys as llama.cpp's converter writes them for the MLA layout: one KV head whose key
 * is the cached row (kv_lora + rope) and value the latent; YaRN ×40 over 4096 positions with
 * mscale_all_dim 1 (stored × 0.1). */
static int meta_deepseek2(vx_meta *m, const vx_synth_opts *o) {
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", o->arch, suffix), key)
    const uint32_t R = (uint32_t)o->kv_lora, r = (uint32_t)o->rope_dim;
    return vx_meta_set_u32(m, KEY("attention.head_count_kv"), 1) ||
                   vx_meta_set_u32(m, KEY("attention.key_length"), R + r) ||
                   vx_meta_set_u32(m, KEY("attention.value_length"), R) ||
                   vx_meta_set_u32(m, KEY("attention.key_length_mla"), (uint32_t)o->head_dim + r) ||
                   vx_meta_set_u32(m, KEY("attention.value_length_mla"), (uint32_t)o->v_dim) ||
                   vx_meta_set_u32(m, KEY("attention.q_lora_rank"), (uint32_t)o->q_lora) ||
                   vx_meta_set_u32(m, KEY("attention.kv_lora_rank"), R) ||
                   vx_meta_set_u32(m, KEY("rope.dimension_count"), r) ||
                   vx_meta_set_str(m, KEY("rope.scaling.type"), "yarn", 4) ||
                   vx_meta_set_f32(m, KEY("rope.scaling.factor"), 40.0f) ||
                   vx_meta_set_u32(m, KEY("rope.scaling.original_context_length"), 4096) ||
                   vx_meta_set_f32(m, KEY("rope.scaling.yarn_beta_fast"), 32.0f) ||
                   vx_meta_set_f32(m, KEY("rope.scaling.yarn_beta_slow"), 1.0f) ||
                   vx_meta_set_f32(m, KEY("rope.scaling.yarn_log_multiplier"), 0.1f) ||
                   vx_meta_set_u32(m, KEY("feed_forward_length"), (uint32_t)o->dense_ff) ||
                   vx_meta_set_u32(m, KEY("leading_dense_block_count"),
                                   (uint32_t)o->dense_layers) ||
                   vx_meta_set_u32(m, KEY("expert_shared_count"), (uint32_t)o->shared_experts) ||
                   vx_meta_set_u32(m, KEY("expert_group_count"), (uint32_t)o->groups) ||
                   vx_meta_set_u32(m, KEY("expert_group_used_count"), (uint32_t)o->groups_used) ||
                   vx_meta_set_u32(m, KEY("expert_gating_func"), (uint32_t)o->gating) ||
                   vx_meta_set_bool(m, KEY("expert_weights_norm"), o->weights_norm != 0) ||
                   vx_meta_set_f32(m, KEY("expert_weights_scale"), o->weights_scale) ||
                   vx_meta_set_u32(m, KEY("vocab_size"), (uint32_t)o->vocab)
               ? -1
               : 0;
#undef KEY
}

/* ---- the Kimi line ---------------------------------------------------------------------------
 */

static bool kimi_is_kda(const vx_synth_opts *o, int l) {
    return (l + 1) % o->full_attn_every != 0;
}

/* The Kimi line's common values where an option is unset (Kimi Linear 48B-A3B's: its latent
 * attention as deepseek2's options say, without expert groups), and the widths the formats need.
 * q_lora and weights_norm are the family's to set first. */
static int complete_kimi(vx_synth_opts *o, mw_err *err) {
    const struct {
        int *v;
        int def;
    } defs[] = {{&o->kv_lora, 512},
                {&o->rope_dim, 64},
                {&o->v_dim, o->head_dim},
                {&o->dense_layers, 1},
                {&o->shared_experts, 1},
                {&o->gating, 2},
                {&o->dense_ff, 9 * o->expert_ff}};
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (*defs[i].v < 0) *defs[i].v = defs[i].def;
    if (!o->kda_head_dim) o->kda_head_dim = 128;
    if (!o->conv_kernel) o->conv_kernel = 4;
    if (!o->full_attn_every) o->full_attn_every = 4;
    if (o->weights_scale < 0) o->weights_scale = 2.446f;
    if (o->groups > 1) return mw_errf(err, "--groups: %s does not route by groups", o->arch);
    o->groups = o->groups_used = 1;
    const kn_type D = o->dense_type == KN_TYPE_COUNT ? KN_F32 : o->dense_type;
    if (complete_deepseek2(o, err)) return -1;
    return need_multiple("kda-head-dim", o->kda_head_dim, D, err) ||
                   need_multiple("heads × kda-head-dim", o->heads * o->kda_head_dim, D, err)
               ? -1
               : 0;
}

/* kimi-linear: no query down-projection, always normalized weights. */
static int complete_kimi_linear(vx_synth_opts *o, mw_err *err) {
    if (o->q_lora > 0) return mw_errf(err, "--q-lora: kimi-linear queries have no down-projection");
    if (o->weights_norm >= 0) return mw_errf(err, "--weights-norm: kimi-linear always normalizes");
    o->q_lora = 0;
    o->weights_norm = 1;
    return complete_kimi(o, err);
}

/* A KDA layer's attention block (FORMATS.md §8): the q/k/v projections and their causal
 * convolutions, the decay's low-rank projections, dt bias and per-head -exp(A_log), beta, the
 * output gate, the read-out's norm and o_proj. */
static int add_kda(synth *s, const vx_synth_opts *o, int l, const dims *d) {
    const int64_t H = o->heads, dk = o->kda_head_dim, D = H * dk, K = o->conv_kernel;
    const float w_d = 1.0f / sqrtf((float)dk);
    return add_blk(s, o, l, "attn_q.weight", d->D, 2, d->H, D, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "attn_k.weight", d->D, 2, d->H, D, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "attn_v.weight", d->D, 2, d->H, D, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ssm_conv1d_q.weight", KN_F32, 3, K, 1, D, 0,
                           1.0f / sqrtf((float)K)) ||
                   add_blk(s, o, l, "ssm_conv1d_k.weight", KN_F32, 3, K, 1, D, 0,
                           1.0f / sqrtf((float)K)) ||
                   add_blk(s, o, l, "ssm_conv1d_v.weight", KN_F32, 3, K, 1, D, 0,
                           1.0f / sqrtf((float)K)) ||
                   add_blk(s, o, l, "ssm_f_a.weight", d->D, 2, d->H, dk, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ssm_f_b.weight", d->D, 2, dk, D, 1, 0, w_d) ||
                   add_blk(s, o, l, "ssm_dt.bias", KN_F32, 1, D, 1, 1, 0, 0.5f) ||
                   add_blk(s, o, l, "ssm_a", KN_F32, 2, 1, H, 1, -2.0f, 0.5f) ||
                   add_blk(s, o, l, "ssm_beta.weight", d->D, 2, d->H, H, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ssm_g_a.weight", d->D, 2, d->H, dk, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ssm_g_b.weight", d->D, 2, dk, D, 1, 0, w_d) ||
                   add_blk(s, o, l, "ssm_norm.weight", KN_F32, 1, dk, 1, 1, 1.0f, d->norm_std) ||
                   add_blk(s, o, l, "attn_output.weight", d->D, 2, D, d->H, 1, 0,
                           d->resid / sqrtf((float)D))
               ? -1
               : 0;
}

/* kimi-linear: a KDA or latent attention block, then DeepSeek-V3's FFN. */
static int layer_kimi_linear(synth *s, const vx_synth_opts *o, int l) {
    const dims d = dims_of(o);
    return add_blk(s, o, l, "attn_norm.weight", KN_F32, 1, d.H, 1, 1, 1.0f, d.norm_std) ||
                   (kimi_is_kda(o, l) ? add_kda(s, o, l, &d) : add_mla(s, o, l, &d, false)) ||
                   add_ds_ffn(s, o, l, &d)
               ? -1
               : 0;
}

/* The Kimi line's keys as llama.cpp's converters write them: one head_count_kv per layer (0 for
 * a KDA layer), KDA's widths, the latent attention's (no rotation: rope.dimension_count only
 * sizes q_pe / k_pe), DeepSeek-V3's MoE keys. */
static int meta_kimi_linear(vx_meta *m, const vx_synth_opts *o) {
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", o->arch, suffix), key)
    int32_t kinds[4096];
    for (int l = 0; l < o->layers; l++) kinds[l] = kimi_is_kda(o, l) ? 0 : 1;
    const uint32_t R = (uint32_t)o->kv_lora, r = (uint32_t)o->rope_dim;
    return vx_meta_set_arr(m, KEY("attention.head_count_kv"), VX_I32, kinds, (uint64_t)o->layers) ||
                   vx_meta_set_u32(m, KEY("kda.head_dim"), (uint32_t)o->kda_head_dim) ||
                   vx_meta_set_u32(m, KEY("ssm.conv_kernel"), (uint32_t)o->conv_kernel) ||
                   vx_meta_set_u32(m, KEY("attention.key_length"), R + r) ||
                   vx_meta_set_u32(m, KEY("attention.value_length"), R) ||
                   vx_meta_set_u32(m, KEY("attention.key_length_mla"), (uint32_t)o->head_dim + r) ||
                   vx_meta_set_u32(m, KEY("attention.value_length_mla"), (uint32_t)o->v_dim) ||
                   vx_meta_set_u32(m, KEY("attention.kv_lora_rank"), R) ||
                   vx_meta_set_u32(m, KEY("rope.dimension_count"), r) ||
                   vx_meta_set_u32(m, KEY("feed_forward_length"), (uint32_t)o->dense_ff) ||
                   vx_meta_set_u32(m, KEY("leading_dense_block_count"),
                                   (uint32_t)o->dense_layers) ||
                   vx_meta_set_u32(m, KEY("expert_shared_count"), (uint32_t)o->shared_experts) ||
                   vx_meta_set_u32(m, KEY("expert_gating_func"), (uint32_t)o->gating) ||
                   vx_meta_set_f32(m, KEY("expert_weights_scale"), o->weights_scale) ||
                   vx_meta_set_u32(m, KEY("vocab_size"), (uint32_t)o->vocab)
               ? -1
               : 0;
#undef KEY
}

/* Kimi K3's values where an option is unset: Kimi Linear's, plus a query down-projection, the
 * bounded decay, SiTU's betas and attention residuals every 8 layers. */
static int complete_kimi_k3(vx_synth_opts *o, mw_err *err) {
    if (o->q_lora < 0) o->q_lora = 1536;
    if (o->weights_norm < 0) o->weights_norm = 1;
    if (complete_kimi(o, err)) return -1;
    if (o->expert_latent < 0) o->expert_latent = 0;
    if (o->attn_res_block < 0) o->attn_res_block = 8;
    if (isnan(o->situ_beta)) o->situ_beta = 2.0f;
    if (isnan(o->situ_lbeta)) o->situ_lbeta = 2.5f;
    if (isnan(o->gate_lb)) o->gate_lb = -5.0f;
    const kn_type D = o->dense_type == KN_TYPE_COUNT ? KN_F32 : o->dense_type;
    return o->expert_latent &&
                   (need_multiple("expert-latent", o->expert_latent, o->expert_type, err) ||
                    need_multiple("expert-latent", o->expert_latent, D, err))
               ? -1
               : 0;
}

/* K3's KDA block: kimi-linear's with one full-rank output gate ssm_g, and ssm_a as [H]. */
static int add_kda_k3(synth *s, const vx_synth_opts *o, int l, const dims *d) {
    const int64_t H = o->heads, dk = o->kda_head_dim, D = H * dk, K = o->conv_kernel;
    const float w_d = 1.0f / sqrtf((float)dk), w_k = 1.0f / sqrtf((float)K);
    return add_blk(s, o, l, "attn_q.weight", d->D, 2, d->H, D, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "attn_k.weight", d->D, 2, d->H, D, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "attn_v.weight", d->D, 2, d->H, D, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ssm_conv1d_q.weight", KN_F32, 3, K, 1, D, 0, w_k) ||
                   add_blk(s, o, l, "ssm_conv1d_k.weight", KN_F32, 3, K, 1, D, 0, w_k) ||
                   add_blk(s, o, l, "ssm_conv1d_v.weight", KN_F32, 3, K, 1, D, 0, w_k) ||
                   add_blk(s, o, l, "ssm_f_a.weight", d->D, 2, d->H, dk, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ssm_f_b.weight", d->D, 2, dk, D, 1, 0, w_d) ||
                   add_blk(s, o, l, "ssm_dt.bias", KN_F32, 1, D, 1, 1, 0, 0.5f) ||
                   add_blk(s, o, l, "ssm_a", KN_F32, 1, H, 1, 1, -2.0f, 0.5f) ||
                   add_blk(s, o, l, "ssm_beta.weight", d->D, 2, d->H, H, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ssm_g.weight", d->D, 2, d->H, D, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ssm_norm.weight", KN_F32, 1, dk, 1, 1, 1.0f, d->norm_std) ||
                   add_blk(s, o, l, "attn_output.weight", d->D, 2, D, d->H, 1, 0,
                           d->resid / sqrtf((float)D))
               ? -1
               : 0;
}

/* K3's FFN part: kimi-linear's, with the routed experts at the latent width between
 * ffn_routed_down and ffn_routed_norm / ffn_routed_up when there is one. */
static int add_k3_ffn(synth *s, const vx_synth_opts *o, int l, dims *d) {
    const int64_t L = o->expert_latent;
    if (l < o->dense_layers || !L) return add_ds_ffn(s, o, l, d);
    dims lat = *d;
    lat.H = L;
    lat.w_h = 1.0f / sqrtf((float)L);
    const int64_t Fs = (int64_t)o->expert_ff * o->shared_experts;
    return add_blk(s, o, l, "ffn_norm.weight", KN_F32, 1, d->H, 1, 1, 1.0f, d->norm_std) ||
                   add_blk(s, o, l, "ffn_gate_inp.weight", KN_F32, 2, d->H, d->E, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ffn_gate_exps.weight", d->X, 3, L, d->F, d->E, 0, lat.w_h) ||
                   add_blk(s, o, l, "ffn_up_exps.weight", d->X, 3, L, d->F, d->E, 0, lat.w_h) ||
                   add_blk(s, o, l, "ffn_down_exps.weight", d->X, 3, d->F, L, d->E, 0,
                           1.0f / sqrtf((float)d->F)) ||
                   add_blk(s, o, l, "exp_probs_b.bias", KN_F32, 1, d->E, 1, 1, 0, BIAS_STD) ||
                   add_blk(s, o, l, "ffn_routed_down.weight", d->D, 2, d->H, L, 1, 0, d->w_h) ||
                   add_blk(s, o, l, "ffn_routed_norm.weight", KN_F32, 1, L, 1, 1, 1.0f,
                           d->norm_std) ||
                   add_blk(s, o, l, "ffn_routed_up.weight", d->D, 2, L, d->H, 1, 0,
                           d->resid / sqrtf((float)L)) ||
                   (o->shared_experts &&
                    (add_blk(s, o, l, "ffn_gate_shexp.weight", d->D, 2, d->H, Fs, 1, 0, d->w_h) ||
                     add_blk(s, o, l, "ffn_up_shexp.weight", d->D, 2, d->H, Fs, 1, 0, d->w_h) ||
                     add_blk(s, o, l, "ffn_down_shexp.weight", d->D, 2, Fs, d->H, 1, 0,
                             d->resid / sqrtf((float)Fs))))
               ? -1
               : 0;
}

/* kimi-k3: the residual mixes' score vectors, a KDA or gated latent attention block, the FFN. */
static int layer_kimi_k3(synth *s, const vx_synth_opts *o, int l) {
    dims d = dims_of(o);
    return add_blk(s, o, l, "attn_norm.weight", KN_F32, 1, d.H, 1, 1, 1.0f, d.norm_std) ||
                   (o->attn_res_block &&
                    (add_blk(s, o, l, "attn_res_score.weight", KN_F32, 1, d.H, 1, 1, 0, d.w_h) ||
                     add_blk(s, o, l, "ffn_res_score.weight", KN_F32, 1, d.H, 1, 1, 0, d.w_h))) ||
                   (kimi_is_kda(o, l) ? add_kda_k3(s, o, l, &d) : add_mla(s, o, l, &d, true)) ||
                   add_k3_ffn(s, o, l, &d)
               ? -1
               : 0;
}

static int globals_kimi_k3(synth *s, const vx_synth_opts *o) {
    return o->attn_res_block ? add(s, "output_res_score.weight", KN_F32, 1, o->hidden, 1, 1, 0,
                                   1.0f / sqrtf((float)o->hidden), o->seed)
                             : 0;
}

/* kimi-k3's keys: kimi-linear's and its own. */
static int meta_kimi_k3(vx_meta *m, const vx_synth_opts *o) {
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", o->arch, suffix), key)
    return meta_kimi_linear(m, o) ||
                   vx_meta_set_u32(m, KEY("attention.q_lora_rank"), (uint32_t)o->q_lora) ||
                   vx_meta_set_f32(m, KEY("kda.gate_lower_bound"), o->gate_lb) ||
                   vx_meta_set_bool(m, KEY("expert_weights_norm"), o->weights_norm != 0) ||
                   vx_meta_set_u32(m, KEY("expert_latent_length"), (uint32_t)o->expert_latent) ||
                   vx_meta_set_u32(m, KEY("attn_res.block_size"), (uint32_t)o->attn_res_block) ||
                   vx_meta_set_f32(m, KEY("activation.situ_beta"), o->situ_beta) ||
                   vx_meta_set_f32(m, KEY("activation.situ_linear_beta"), o->situ_lbeta)
               ? -1
               : 0;
#undef KEY
}

/* The embedding, every layer (the family's row says which tensors), the output norm and head. */
static int add_tensors(synth *s, const vx_synth_opts *o, const synth_arch *a) {
    const dims d = dims_of(o);
    int rc = add(s, "token_embd.weight", d.D, 2, d.H, d.V, 1, 0, 1.0f, o->seed);
    for (int l = 0; l < o->layers && rc == 0; l++) rc = a->layer(s, o, l);
    if (rc == 0) rc = add(s, "output_norm.weight", KN_F32, 1, d.H, 1, 1, 1.0f, d.norm_std, o->seed);
    if (rc == 0) rc = add(s, "output.weight", d.D, 2, d.H, d.V, 1, 0, d.w_h, o->seed);
    if (rc == 0 && a->globals) rc = a->globals(s, o);
    for (size_t i = 0; i < s->n; i++) s->t[i].impl = &s->g[i];
    return rc;
}

/* GPT-2's byte-level alphabet: byte b as one Unicode character, in UTF-8. */
static void byte_token(int b, char out[4]) {
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
        int k = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) k++;
        cp = 256 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* A byte-level BPE vocabulary: 256 byte tokens, two-byte merges of the most common bytes first
 * (anti-diagonals of a frequency ranking), reserved tokens past 65536 merges, the family's chat
 * tokens when there is room, and 3 control tokens at the end. */
static int add_tokenizer(vx_meta *m, const vx_synth_opts *o, const synth_arch *fam) {
    static const char rank_src[] = " etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ0123456789"
                                   ".,'\"-!?:;()";
    int rank[256], n_rank = 0;
    bool used[256] = {false};
    for (const char *c = rank_src; *c; c++) {
        rank[n_rank++] = (uint8_t)*c;
        used[(uint8_t)*c] = true;
    }
    for (int b = 0; b < 256; b++)
        if (!used[b]) rank[n_rank++] = b;
    int n_chat = 0;
    while (fam->chat_special[n_chat]) n_chat++;
    if (o->vocab < 259 + n_chat) n_chat = 0; /* too small a vocabulary to chat in */
    int n_sp = n_chat + 3;
    int V = o->vocab, n_merges = V - 256 - n_sp < 65536 ? V - 256 - n_sp : 65536;
    char **tok = calloc((size_t)V, sizeof *tok), **mer = calloc((size_t)n_merges + 1, sizeof *mer);
    int32_t *type = calloc((size_t)V, sizeof *type);
    int rc = tok && mer && type ? 0 : -1;
    for (int b = 0; b < 256 && rc == 0; b++) {
        char u[4];
        byte_token(b, u);
        tok[b] = strdup(u);
        type[b] = 1;
    }
    int k = 0;
    for (int d = 0; d < 511 && k < n_merges && rc == 0; d++) {
        for (int a = 0; a <= d && k < n_merges; a++) {
            if (a > 255 || d - a > 255) continue;
            char ua[4], ub[4], t[16];
            byte_token(rank[a], ua);
            byte_token(rank[d - a], ub);
            snprintf(t, sizeof t, "%s%s", ua, ub);
            tok[256 + k] = strdup(t);
            type[256 + k] = 1;
            snprintf(t, sizeof t, "%s %s", ua, ub);
            mer[k++] = strdup(t);
        }
    }
    for (int i = 256 + k; i < V - n_sp; i++) {
        char t[32];
        snprintf(t, sizeof t, "<|reserved_%d|>", i);
        tok[i] = strdup(t);
        type[i] = 5; /* unused */
    }
    for (int i = 0; i < n_sp; i++) {
        const char *name = i < n_chat ? fam->chat_special[i] : fam->special[i - n_chat];
        tok[V - n_sp + i] = strdup(name);
        /* <think> and </think> are text the model writes (user-defined), the rest control */
        type[V - n_sp + i] = strstr(name, "think>") ? 4 : 3;
    }
    for (int i = 0; i < V && rc == 0; i++)
        if (!tok[i]) rc = -1;
    for (int i = 0; i < k && rc == 0; i++)
        if (!mer[i]) rc = -1;
    if (rc == 0)
        rc =
            vx_meta_set_str(m, "tokenizer.ggml.model", "gpt2", 4) ||
            vx_meta_set_str(m, "tokenizer.ggml.pre", fam->tok_pre, strlen(fam->tok_pre)) ||
            vx_meta_set_arr_str(m, "tokenizer.ggml.tokens", (const char *const *)tok, NULL,
                                (uint64_t)V) ||
            vx_meta_set_arr(m, "tokenizer.ggml.token_type", VX_I32, type, (uint64_t)V) ||
            vx_meta_set_arr_str(m, "tokenizer.ggml.merges", (const char *const *)mer, NULL,
                                (uint64_t)k) ||
            vx_meta_set_u32(m, "tokenizer.ggml.bos_token_id", (uint32_t)(V - 3)) ||
            vx_meta_set_u32(m, "tokenizer.ggml.eos_token_id", (uint32_t)(V - 1)) ||
            vx_meta_set_u32(m, "tokenizer.ggml.padding_token_id",
                            (uint32_t)(V - fam->pad_from_end)) ||
            vx_meta_set_bool(m, "tokenizer.ggml.add_bos_token", false) ||
            (fam->chat_template && vx_meta_set_str(m, "tokenizer.chat_template", fam->chat_template,
                                                   strlen(fam->chat_template)));
    for (int i = 0; tok && i < V; i++) free(tok[i]);
    for (int i = 0; mer && i < n_merges; i++) free(mer[i]);
    free(tok);
    free(mer);
    free(type);
    return rc;
}

/* The family's hyperparameter keys, as llama.cpp's converter writes them. */
static int add_meta(vx_meta *m, const vx_synth_opts *o, const synth_arch *a) {
    char key[128], name[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", o->arch, suffix), key)
    snprintf(name, sizeof name, "moewire-synth-%s-seed%llu", o->arch, (unsigned long long)o->seed);
    int rc =
        vx_meta_set_str(m, "general.architecture", o->arch, strlen(o->arch)) ||
        vx_meta_set_str(m, "general.name", name, strlen(name)) ||
        vx_meta_set_u32(m, KEY("block_count"), (uint32_t)o->layers) ||
        vx_meta_set_u32(m, KEY("context_length"), (uint32_t)o->context) ||
        vx_meta_set_u32(m, KEY("embedding_length"), (uint32_t)o->hidden) ||
        vx_meta_set_u32(m, KEY("feed_forward_length"), (uint32_t)(o->expert_ff * a->ff_mult)) ||
        vx_meta_set_u32(m, KEY("attention.head_count"), (uint32_t)o->heads) ||
        vx_meta_set_u32(m, KEY("attention.head_count_kv"), (uint32_t)o->kv_heads) ||
        vx_meta_set_f32(m, KEY("rope.freq_base"), a->rope_base);
    if (a->yarn)
        rc = rc || vx_meta_set_str(m, KEY("rope.scaling.type"), "yarn", 4) ||
             vx_meta_set_f32(m, KEY("rope.scaling.factor"), 32.0f) ||
             vx_meta_set_u32(m, KEY("rope.scaling.original_context_length"), 4096) ||
             vx_meta_set_f32(m, KEY("rope.scaling.yarn_beta_fast"), 32.0f) ||
             vx_meta_set_f32(m, KEY("rope.scaling.yarn_beta_slow"), 1.0f);
    rc = rc || vx_meta_set_f32(m, KEY("attention.layer_norm_rms_epsilon"), a->rms_eps) ||
         vx_meta_set_u32(m, KEY("expert_count"), (uint32_t)o->experts) ||
         vx_meta_set_u32(m, KEY("expert_used_count"), (uint32_t)o->top_k) ||
         vx_meta_set_u32(m, KEY("attention.key_length"), (uint32_t)o->head_dim) ||
         vx_meta_set_u32(m, KEY("attention.value_length"), (uint32_t)o->head_dim);
    if (a->family->swa)
        rc = rc ||
             vx_meta_set_u32(m, KEY("attention.sliding_window"), (uint32_t)o->sliding_window) ||
             vx_meta_set_u32(m, KEY("attention.sliding_window_pattern"),
                             (uint32_t)a->family->swa_period);
    rc = rc || vx_meta_set_u32(m, KEY("expert_feed_forward_length"), (uint32_t)o->expert_ff);
#undef KEY
    rc = rc || (a->meta && a->meta(m, o)) || add_tokenizer(m, o, a) ||
         vx_meta_set_u32(m, "general.quantization_version", 2) ||
         vx_meta_set_u32(m, "general.file_type", o->expert_type == KN_MXFP4 ? 38 : 18);
    return rc ? -1 : 0;
}

static void close_synth(vx_input *in) {
    synth *s = in->impl;
    for (size_t i = 0; i < s->n; i++) free((char *)s->t[i].name);
    free(s->t);
    free(s->g);
    kn_pool_destroy(s->pool);
    vx_meta_free(in->meta);
    free(s);
}

int vx_synth_input(const vx_synth_opts *opts, vx_input **out, mw_err *err) {
    *out = NULL;
    vx_synth_opts o = *opts;
    if (complete(&o, err)) return -1;
    synth *s = calloc(1, sizeof *s);
    if (!s) return mw_errf(err, "synth: out of memory");
    s->in.kind = "synth";
    s->in.impl = s;
    s->in.close = close_synth;
    const synth_arch *a = find_arch(o.arch);
    if (!(s->in.meta = vx_meta_new()) || add_meta(s->in.meta, &o, a) || add_tensors(s, &o, a)) {
        close_synth(&s->in);
        return mw_errf(err, "synth: out of memory building the model");
    }
    s->pool = vx_pool_new();
    s->in.tensors = s->t;
    s->in.n_tensors = s->n;
    *out = &s->in;
    return 0;
}

int vx_synth_input_kv(const char *const *kv, vx_input **out, mw_err *err) {
    *out = NULL;
    vx_synth_opts o;
    vx_synth_defaults(&o);
    for (size_t i = 0; kv[i]; i += 2) {
        if (!kv[i + 1]) return mw_errf(err, "synth option '%s' has no value", kv[i]);
        if (vx_synth_set(&o, kv[i], kv[i + 1], err)) return -1;
    }
    return vx_synth_input(&o, out, err);
}
