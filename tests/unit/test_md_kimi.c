/* tests/unit/test_md_kimi.c — the Kimi line's hybrid stack on llama.cpp's fixtures: f32 numerics
 * against the F32-expert references (prefill, token-by-token decode, greedy continuation: 1e-4),
 * q8 against the quantized ones (greedy tokens equal), every captured intermediate (KDA, latent
 * attention, routing, residuals; the recurrent state after the prompt); and the delta rule's
 * chunked form against a float64 token-by-token recurrence on a prompt crossing many chunks, the
 * same bits whatever the passes (one batch, pieces, token by token, interleaved sequences), a
 * recurrent state that cannot step back, a failed pass changing nothing, the state's bytes. */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/mwt_capture.h"
#include "tests/support/mwt_model.h"

#include "model/md_kda.h"
#include "model/md_local.h"
#include "model/md_model.h"
#include "model/md_sampler.h"
#include "vindex/vx_gguf.h"

#define N_TOK 80
#define N_GEN 16
#define LONG  150 /* a prompt across nine chunks */

typedef struct fixture {
    const char *name;
    vx_source *src;
    md_model *model;
    md_expert_backend *experts;
    int32_t tokens[N_TOK];
    int64_t V;
} fixture;

static void open_fixture(fixture *f, const char *name) {
    const mwt_model m = mwt_model_fixture(name);
    *f = (fixture){.name = name, .src = m.src, .model = m.model, .experts = m.experts};
    f->V = f->model->cfg.n_vocab;
    mwt_model_tokens(name, f->tokens, N_TOK);
}

static void close_fixture(fixture *f) {
    mwt_model_close(&(mwt_model){f->src, f->model, f->experts});
}

static md_ctx *new_ctx(const fixture *f, kn_numerics num, int n_seq, kn_pool *pool,
                       md_expert_backend *experts) {
    md_ctx_params p = {.numerics = num,
                       .pool = pool,
                       .experts = experts ? experts : f->experts,
                       .n_seq = n_seq,
                       .n_ctx = 512};
    md_ctx *c;
    mw_err e;
    if (md_ctx_new(f->model, &p, &c, &e)) fail_msg("%s", e.msg);
    return c;
}

static float *ref_file(const fixture *f, const char *file, int rows) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/%s", f->name, file);
    size_t len;
    float *r = mwt_read_file(mwt_fixture(rel), &len);
    assert_non_null(r);
    assert_int_equal(len, (size_t)rows * (size_t)f->V * sizeof(float));
    return r;
}

/* gen.json's [section.]key, an array of n ints. */
static void gen_ints(const fixture *f, const char *section, const char *key, int32_t *out, int n) {
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/gen.json", f->name);
    json_error_t je;
    json_t *g = json_load_file(mwt_fixture(rel), 0, &je);
    if (!g) fail_msg("%s: %s", rel, je.text);
    json_t *o = section ? json_object_get(g, section) : g;
    json_t *a = json_object_get(o, key);
    assert_int_equal(json_array_size(a), (size_t)n);
    for (int i = 0; i < n; i++) out[i] = (int32_t)json_integer_value(json_array_get(a, i));
    json_decref(g);
}

static double check_close(const char *what, const float *a, const float *b, size_t n, double tol) {
    const double d = mwt_max_abs_diff(a, b, n);
    printf("    %-44s max |diff| %.3g (tolerance %g)\n", what, d, tol);
    if (!(d <= tol)) fail_msg("%s: max |diff| %.3g > %g", what, d, tol);
    return d;
}

/* Rows [0, n) of one sequence through one pass each of the given sizes (0-terminated; the rest
 * in one pass), logits of every row into out. */
static void feed(md_ctx *c, int seq, const int32_t *tok, int from, int n, const int *pieces,
                 float *out, int64_t V) {
    md_row *rows = malloc((size_t)n * sizeof *rows);
    mw_err e;
    int pos = from;
    while (pos < from + n) {
        int m = pieces && *pieces ? *pieces++ : from + n - pos;
        if (m > from + n - pos) m = from + n - pos;
        for (int j = 0; j < m; j++) rows[j] = (md_row){seq, pos + j, tok[pos + j], 1};
        if (md_forward(c, rows, m, out + (int64_t)(pos - from) * V, &e)) fail_msg("%s", e.msg);
        pos += m;
    }
    free(rows);
}

/* ---- llama.cpp's logits ------------------------------------------------------------------------
 */

/* The greedy continuation from the prompt's context: row 0 is the prompt's last row, row k the
 * logits after feeding continuation token k - 1 (llama.cpp's logits_gen layout). */
static void continue_greedy(md_ctx *c, const fixture *f, const float *last, float *gen,
                            int32_t *chosen) {
    memcpy(gen, last, (size_t)f->V * sizeof(float));
    for (int k = 0; k < N_GEN; k++) {
        chosen[k] = md_argmax(gen + (int64_t)k * f->V, f->V);
        if (k + 1 == N_GEN) break;
        const md_row r = {0, N_TOK + k, chosen[k], 1};
        mw_err e;
        if (md_forward(c, &r, 1, gen + (int64_t)(k + 1) * f->V, &e)) fail_msg("%s", e.msg);
    }
}

static void check_fixture_f32(const char *name) {
    fixture f;
    open_fixture(&f, name);
    const size_t row = (size_t)f.V;
    float *pre = malloc(N_TOK * row * sizeof(float)), *dec = malloc(N_TOK * row * sizeof(float));
    float *gen = malloc(N_GEN * row * sizeof(float));
    md_ctx *c = new_ctx(&f, KN_NUM_F32, 1, NULL, NULL);
    feed(c, 0, f.tokens, 0, N_TOK, NULL, pre, f.V);
    int32_t chosen[N_GEN], want[N_GEN];
    continue_greedy(c, &f, pre + (N_TOK - 1) * row, gen, chosen);
    md_ctx_free(c);
    float *ref_pre = ref_file(&f, "logits_prefill_f32experts.bin", N_TOK);
    float *ref_gen = ref_file(&f, "logits_gen_f32experts.bin", N_GEN);
    check_close("f32 prefill vs llama.cpp", pre, ref_pre, N_TOK * row, 1e-4);
    check_close("f32 greedy continuation vs llama.cpp", gen, ref_gen, N_GEN * row, 1e-4);
    gen_ints(&f, "f32experts", "continuation", want, N_GEN);
    assert_memory_equal(chosen, want, sizeof want);
    /* token by token on two threads: the prefill's bits */
    kn_pool *pool = kn_pool_create(2);
    static const int one[N_TOK + 1] = {[0 ... N_TOK - 1] = 1};
    c = new_ctx(&f, KN_NUM_F32, 1, pool, NULL);
    feed(c, 0, f.tokens, 0, N_TOK, one, dec, f.V);
    assert_memory_equal(dec, pre, N_TOK * row * sizeof(float));
    md_ctx_free(c);
    kn_pool_destroy(pool);
    free(pre), free(dec), free(gen), free(ref_pre), free(ref_gen);
    close_fixture(&f);
}

static void check_fixture_q8(const char *name) {
    fixture f;
    open_fixture(&f, name);
    const size_t row = (size_t)f.V;
    float *pre = malloc(N_TOK * row * sizeof(float)), *gen = malloc(N_GEN * row * sizeof(float));
    md_ctx *c = new_ctx(&f, KN_NUM_Q8, 1, NULL, NULL);
    feed(c, 0, f.tokens, 0, N_TOK, NULL, pre, f.V);
    int32_t chosen[N_GEN], want[N_GEN], argmax[N_TOK];
    continue_greedy(c, &f, pre + (N_TOK - 1) * row, gen, chosen);
    md_ctx_free(c);
    /* llama.cpp's own quantized prefill and decode part by a few 1e-2 on these models (an int8
     * rounding boundary carried in the recurrent state): the greedy tokens must agree */
    float *ref_pre = ref_file(&f, "logits_prefill.bin", N_TOK);
    check_close("q8 prefill vs llama.cpp", pre, ref_pre, N_TOK * row, 0.1);
    gen_ints(&f, NULL, "prefill_argmax", argmax, N_TOK);
    for (int i = 0; i < N_TOK; i++)
        if (md_argmax(pre + i * row, f.V) != argmax[i])
            fail_msg("%s q8: row %d chose %d, llama.cpp %d", name, i, md_argmax(pre + i * row, f.V),
                     argmax[i]);
    gen_ints(&f, NULL, "continuation", want, N_GEN);
    assert_memory_equal(chosen, want, sizeof want);
    free(pre), free(gen), free(ref_pre);
    close_fixture(&f);
}

/* ---- llama.cpp's intermediates --------------------------------------------------------------
 */

#define P_STATE (-3) /* gdn_state: read from the context after the pass */

/* llama.cpp's name (and op) → our probe; -2 for views we do not reproduce and quantities inside
 * the fused expert kernel, P_STATE for the recurrent state, -1 unknown. */
static int probe_of(const char *base, const char *op) {
    static const struct {
        const char *name;
        int p;
    } map[] = {
        {"attn_norm", MD_PROBE_ATTN_NORM},
        {"g1 f_b(f_a(cur))", MD_PROBE_KDA_F},
        {"kda_g1", MD_PROBE_KDA_G},
        {"gdn_q", MD_PROBE_KDA_Q},
        {"gdn_k", MD_PROBE_KDA_K},
        {"gdn_v", MD_PROBE_KDA_V_CONV},
        {"gdn_beta", MD_PROBE_KDA_BETA},
        {"kda_q_conv", MD_PROBE_KDA_Q_CONV},
        {"kda_k_conv", MD_PROBE_KDA_K_CONV},
        {"kda_v_conv", MD_PROBE_KDA_V_CONV},
        {"attn_output", MD_PROBE_KDA_SCAN},
        {"kda_scan_out", MD_PROBE_KDA_SCAN},
        {"gdn_state", P_STATE},
        {"g2 g_b(g_a(cur_2d))", MD_PROBE_KDA_G2},
        {"kda_g2", MD_PROBE_KDA_G2},
        {"kda_normed", MD_PROBE_KDA_NORMED},
        {"kda_out", MD_PROBE_ATTN_OUT},
        {"mla_out", MD_PROBE_ATTN_OUT},
        {"q_pe", MD_PROBE_Q_PE},
        {"q_nope_absorbed", MD_PROBE_Q_ABSORBED},
        {"Qcur", MD_PROBE_Q_ROPE},
        {"Kcur", MD_PROBE_K_ROPE},
        {"kqv", MD_PROBE_KQV},
        {"kqv_mla", MD_PROBE_KQV_MLA},
        {"kqv_out", MD_PROBE_KQV_OUT},
        {"ffn_inp", MD_PROBE_FFN_INP},
        {"ffn_norm", MD_PROBE_FFN_NORM},
        {"ffn_swiglu", MD_PROBE_FFN_SWIGLU},
        {"ffn_moe_logits", MD_PROBE_ROUTER_LOGITS},
        {"ffn_moe_probs", MD_PROBE_ROUTER_SCORES},
        {"ffn_moe_probs_biased", MD_PROBE_ROUTER_BIASED},
        {"ffn_moe_topk", MD_PROBE_TOPK},
        {"ffn_moe_weights", MD_PROBE_WEIGHTS_SEL},
        {"ffn_moe_weights_norm", MD_PROBE_WEIGHTS_NORM},
        {"ffn_moe_weights_scaled", MD_PROBE_WEIGHTS},
        {"ffn_moe_out", MD_PROBE_MOE_OUT},
        {"ffn_shexp", MD_PROBE_SHEXP},
        {"ffn_out", MD_PROBE_FFN_OUT},
        {"l_out", MD_PROBE_L_OUT},
        {"result_norm", MD_PROBE_RESULT_NORM},
        {"prefix_sum_attn", MD_PROBE_FFN_INP},
        {"mla_gated", MD_PROBE_MLA_GATED},
        {"norm", MD_PROBE_ROUTED_RMS},
    };
    /* kimi-linear names beta before its sigmoid, K3 after */
    if (!strcmp(base, "kda_beta"))
        return strcmp(op, "SIGMOID") ? MD_PROBE_KDA_BETA_RAW : MD_PROBE_KDA_BETA;
    if (!strcmp(base, "model.embed_tokens") || !strcmp(base, "inp_embd") || !strcmp(base, "q_nope"))
        return -2;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(base, map[i].name)) return map[i].p;
    if (!strncmp(base, "ffn_moe_", 8)) return -2; /* gate, up, the GLU, down: inside the kernel */
    return -1;
}

/* Our value of one intermediate (NULL when not observed with n values). */
static const float *ours(md_ctx *c, const mwt_capture *cap, int layer, int p, size_t n,
                         float *state) {
    if (p != P_STATE) return mwt_captured(cap, layer, (md_probe)p, n);
    mw_err e;
    if (md_ctx_kda_state(c, 0, layer, state, &e)) fail_msg("%s", e.msg);
    return state;
}

/* How llama.cpp lays an intermediate out against the observer. */
static mwt_layout layout_of(int p) {
    if (p == P_STATE) return MWT_STATE;
    const bool hm = p == MD_PROBE_Q_ABSORBED || p == MD_PROBE_KQV || p == MD_PROBE_KQV_MLA;
    return hm ? MWT_HEAD_MAJOR : MWT_ROWS;
}

/* The first row at which a quantity differs by more than tol (n values of `rows` rows). */
static int first_row_over(const float *a, const float *b, size_t n, int rows, double tol) {
    const size_t w = n / (size_t)rows;
    for (int r = 0; r < rows; r++)
        if (mwt_max_abs_diff(a + r * w, b + r * w, w) > tol) return r;
    return rows;
}

/* The q8 run quantizes the experts' activations as ggml does, and a value on an int8 rounding
 * boundary flips one step between two otherwise equal computations; the recurrent states carry it
 * into every later position (FORMATS.md §8). Rows before the first such event (the first row any
 * MoE output differs at) must agree to float32 noise in every quantity, and routing exactly;
 * later rows and the final state within the drift llama.cpp's own prefill and decode show. */
#define TIGHT 2e-4
#define LOOSE 0.1

/* One intermediates file against a q8 run of its fixture. */
typedef struct icheck {
    const char *name;
    md_ctx *c;
    mwt_capture cap;
    float *state;
    const unsigned char *bin;
    size_t bin_len;
    int n_dense; /* the model's leading dense layers */
    int clean;   /* rows before the first rounding event */
    int res_seen[MWT_MAX_LAYERS + 1];
    int compared;
} icheck;

/* Our probe for an entry: a layer's res_probs are its attention-input mix's and then its FFN-input
 * mix's (layer 0 has only the FFN's: nothing is banked before its attention; the final mix is
 * observed as layer -1's FFN-input mix). */
static int entry_probe(icheck *ic, const char *base, const char *op, int layer) {
    if (strcmp(base, "res_probs")) return probe_of(base, op);
    const int l = layer < 0 ? MWT_MAX_LAYERS : layer;
    const int first = ic->res_seen[l]++ == 0 && layer > 0;
    return first ? MD_PROBE_RES_PROBS_ATTN : MD_PROBE_RES_PROBS_FFN;
}

/* Pass 0 finds the first rounding event (the first row any MoE output differs at), pass 1 checks
 * every quantity. */
static void check_entry(icheck *ic, json_t *ent, int pass) {
    const char *tname = json_string_value(json_object_get(ent, "name"));
    const char *op = json_string_value(json_object_get(ent, "op"));
    const size_t off = (size_t)json_integer_value(json_object_get(ent, "offset"));
    const size_t n = (size_t)json_integer_value(json_object_get(ent, "nbytes")) / 4;
    assert_true(off + 4 * n <= ic->bin_len);
    char base[64];
    const int layer = mwt_split_name(tname, base, sizeof base),
              p = entry_probe(ic, base, op, layer);
    if (p == -1) fail_msg("%s: intermediate '%s' has no counterpart", ic->name, tname);
    if (p == -2 || (pass == 0 && p != MD_PROBE_MOE_OUT)) return;
    const float *got = ours(ic->c, &ic->cap, layer, p, n, ic->state);
    if (!got) fail_msg("%s: '%s' was not observed with %zu values", ic->name, tname, n);
    float *ref = mwt_intermediate(ent, ic->bin + off, n, layout_of(p));
    if (pass == 0) {
        const int r = first_row_over(got, ref, n, N_TOK, TIGHT);
        ic->clean = r < ic->clean ? r : ic->clean;
        free(ref);
        return;
    }
    /* the states of the layers before the first MoE output see no expert at all */
    const bool st = p == P_STATE;
    const int rows = st ? 1 : N_TOK;
    const int ok = st ? layer <= ic->n_dense : ic->clean;
    const int bad = first_row_over(got, ref, n, rows, p == MD_PROBE_TOPK ? 0 : TIGHT);
    const double d = mwt_max_abs_diff(got, ref, n);
    printf("    %-16s %-22s layer %2d  max |diff| %.3g, first row over %g: %d\n", ic->name, base,
           layer, d, TIGHT, bad);
    if (bad < ok || (p != MD_PROBE_TOPK && d > LOOSE))
        fail_msg("%s: layer %d, %s drifts at row %d (clean rows: %d)", ic->name, layer, base, bad,
                 ok);
    free(ref);
    ic->compared++;
}

static void check_intermediates(const char *name) {
    fixture f;
    open_fixture(&f, name);
    icheck ic = {.name = name, .n_dense = f.model->cfg.n_dense_lead, .clean = N_TOK};
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/intermediates.bin", name);
    unsigned char *bin = mwt_read_file(mwt_fixture(rel), &ic.bin_len);
    snprintf(rel, sizeof rel, "llamacpp/%s/intermediates.json", name);
    json_error_t je;
    json_t *index = json_load_file(mwt_fixture(rel), 0, &je);
    if (!bin || !index) fail_msg("%s: %s", rel, je.text);
    ic.bin = bin;
    ic.c = new_ctx(&f, KN_NUM_Q8, 1, NULL, NULL);
    md_ctx_set_observer(ic.c, mwt_capture_observer, &ic.cap);
    float *logits = malloc((size_t)N_TOK * f.V * sizeof(float));
    feed(ic.c, 0, f.tokens, 0, N_TOK, NULL, logits, f.V);
    const md_kda *k = &f.model->cfg.kda;
    ic.state = malloc((size_t)k->n_head * k->head_dim * (size_t)k->head_dim * sizeof(float));
    size_t i;
    json_t *ent;
    for (int pass = 0; pass < 2; pass++) {
        memset(ic.res_seen, 0, sizeof ic.res_seen);
        json_array_foreach(index, i, ent) check_entry(&ic, ent, pass);
    }
    printf("    %s: rows 0..%d agree to %g before the first activation rounding event\n", name,
           ic.clean - 1, TIGHT);
    assert_true(ic.clean >= 8);
    assert_true(ic.compared >= 40);
    mwt_capture_free(&ic.cap);
    free(ic.state), free(logits), free(bin);
    json_decref(index);
    md_ctx_free(ic.c);
    close_fixture(&f);
}

static void test_kimi_linear_intermediates(void **state) {
    (void)state;
    check_intermediates("kimi-linear-tiny");
}

/* ---- the chunked delta rule ------------------------------------------------------------------
 */

/* A prompt of LONG tokens from the fixture's, crossing nine chunks. */
static void long_prompt(const fixture *f, int32_t *tok, int salt) {
    for (int i = 0; i < LONG; i++)
        tok[i] = (int32_t)((f->tokens[i % N_TOK] * 7 + i * (3 + salt)) % f->V);
}

/* The recurrence as FORMATS.md §8 states it, token by token in float64, from the delta rule's
 * captured inputs (q, k after the L2 norm, v, log decay g, beta): o (T × D, divided by sqrt(d))
 * and the final state S[h][i][j]. */
static void recurrence(const mwt_capture *cap, int l, int T, int H, int d, double *o, double *S) {
    const float *q = cap->data[l][MD_PROBE_KDA_Q], *k = cap->data[l][MD_PROBE_KDA_K];
    const float *v = cap->data[l][MD_PROBE_KDA_V_CONV], *g = cap->data[l][MD_PROBE_KDA_G];
    const float *beta = cap->data[l][MD_PROBE_KDA_BETA];
    double *delta = malloc((size_t)d * sizeof *delta);
    memset(S, 0, (size_t)H * d * d * sizeof *S);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            const size_t at = ((size_t)t * H + h) * d;
            double *Sh = S + (size_t)h * d * d;
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) Sh[i * d + j] *= exp((double)g[at + i]);
            for (int j = 0; j < d; j++) {
                double kv = 0;
                for (int i = 0; i < d; i++) kv += Sh[i * d + j] * k[at + i];
                delta[j] = beta[t * H + h] * (v[at + j] - kv);
            }
            for (int i = 0; i < d; i++)
                for (int j = 0; j < d; j++) Sh[i * d + j] += k[at + i] * delta[j];
            for (int j = 0; j < d; j++) {
                double s = 0;
                for (int i = 0; i < d; i++) s += Sh[i * d + j] * q[at + i];
                o[at + j] = s / sqrt((double)d);
            }
        }
    free(delta);
}

static double max_diff_d(const float *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* Every KDA layer's read-out and final state of a LONG-token prompt in one pass against the
 * float64 recurrence on the same inputs. */
static void test_chunks_match_recurrence(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "kimi-linear-tiny");
    const md_config *cfg = &f.model->cfg;
    const int H = cfg->kda.n_head, d = cfg->kda.head_dim;
    const size_t D = (size_t)H * d;
    int32_t tok[LONG];
    long_prompt(&f, tok, 0);
    mwt_capture cap = {0};
    md_ctx *c = new_ctx(&f, KN_NUM_F32, 1, NULL, NULL);
    md_ctx_set_observer(c, mwt_capture_observer, &cap);
    float *logits = malloc((size_t)LONG * f.V * sizeof(float));
    feed(c, 0, tok, 0, LONG, NULL, logits, f.V);
    double *o = malloc(LONG * D * sizeof *o), *S = malloc(D * d * sizeof *S);
    float *ours_S = malloc(D * d * sizeof *ours_S);
    for (int l = 0; l < cfg->n_layer; l++) {
        if (!md_layer_is_kda(cfg, l)) continue;
        recurrence(&cap, l, LONG, H, d, o, S);
        mw_err e;
        if (md_ctx_kda_state(c, 0, l, ours_S, &e)) fail_msg("%s", e.msg);
        const double dout = max_diff_d(cap.data[l][MD_PROBE_KDA_SCAN], o, LONG * D);
        const double dst = max_diff_d(ours_S, S, D * d);
        printf("    layer %d: %d positions in chunks of %d vs the recurrence: read-out %.3g, "
               "state %.3g\n",
               l, LONG, MD_KDA_CHUNK, dout, dst);
        assert_true(dout < 1e-5 && dst < 1e-5);
    }
    mwt_capture_free(&cap);
    free(o), free(S), free(ours_S), free(logits);
    md_ctx_free(c);
    close_fixture(&f);
}

/* The same LONG-token prompt as one pass, in pieces that start and end anywhere in a chunk, and
 * token by token on two threads; and interleaved with another sequence in mixed batches: the
 * same logits and the same state, bit for bit. */
static void check_passes(const char *name) {
    fixture f;
    open_fixture(&f, name);
    int32_t a[LONG], b[LONG];
    long_prompt(&f, a, 0);
    long_prompt(&f, b, 1);
    const size_t n = (size_t)LONG * f.V;
    float *ref_a = malloc(n * sizeof(float)), *ref_b = malloc(n * sizeof(float));
    float *out = malloc(n * sizeof(float));
    md_ctx *c = new_ctx(&f, KN_NUM_F32, 1, NULL, NULL);
    feed(c, 0, a, 0, LONG, NULL, ref_a, f.V);
    md_ctx_free(c);
    c = new_ctx(&f, KN_NUM_F32, 1, NULL, NULL);
    feed(c, 0, b, 0, LONG, NULL, ref_b, f.V);
    md_ctx_free(c);
    static const int pieces[] = {1, 15, 17, 3, 40, 16, 2, 31, 0};
    kn_pool *pool = kn_pool_create(2);
    c = new_ctx(&f, KN_NUM_F32, 1, pool, NULL);
    feed(c, 0, a, 0, LONG, pieces, out, f.V);
    assert_memory_equal(out, ref_a, n * sizeof(float));
    md_ctx_free(c);
    static int one[LONG + 1];
    for (int i = 0; i < LONG; i++) one[i] = 1;
    c = new_ctx(&f, KN_NUM_F32, 1, pool, NULL);
    feed(c, 0, a, 0, LONG, one, out, f.V);
    assert_memory_equal(out, ref_a, n * sizeof(float));
    md_ctx_free(c);
    /* two sequences, each step a piece of both in alternating rows */
    c = new_ctx(&f, KN_NUM_F32, 2, pool, NULL);
    float *out_b = malloc(n * sizeof(float));
    md_row rows[2 * LONG];
    float *step = malloc(2 * n * sizeof(float));
    mw_err e;
    for (int pos = 0, k = 0; pos < LONG; k++) {
        const int m = pos + pieces[k % 8] > LONG ? LONG - pos : pieces[k % 8];
        for (int j = 0; j < m; j++) {
            rows[2 * j] = (md_row){1, pos + j, b[pos + j], 1};
            rows[2 * j + 1] = (md_row){0, pos + j, a[pos + j], 1};
        }
        if (md_forward(c, rows, 2 * m, step, &e)) fail_msg("%s", e.msg);
        for (int j = 0; j < m; j++) {
            memcpy(out_b + (size_t)(pos + j) * f.V, step + (size_t)(2 * j) * f.V,
                   (size_t)f.V * sizeof(float));
            memcpy(out + (size_t)(pos + j) * f.V, step + (size_t)(2 * j + 1) * f.V,
                   (size_t)f.V * sizeof(float));
        }
        pos += m;
    }
    assert_memory_equal(out, ref_a, n * sizeof(float));
    assert_memory_equal(out_b, ref_b, n * sizeof(float));
    md_ctx_free(c);
    kn_pool_destroy(pool);
    free(ref_a), free(ref_b), free(out), free(out_b), free(step);
    close_fixture(&f);
}

/* One recurrent state per sequence: it cannot step back, only start over, and starting over gives
 * a fresh sequence's bits. Its bytes: both banks of every KDA layer, whatever the length, beside
 * the latent cache of the attention layer. */
static void test_state_truncate_and_bytes(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "kimi-linear-tiny");
    const md_config *cfg = &f.model->cfg;
    int32_t a[LONG];
    long_prompt(&f, a, 0);
    const size_t n = (size_t)LONG * f.V;
    float *ref = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    md_ctx *c = new_ctx(&f, KN_NUM_F32, 1, NULL, NULL);
    feed(c, 0, a, 0, LONG, NULL, ref, f.V);
    md_ctx_free(c);
    c = new_ctx(&f, KN_NUM_F32, 2, NULL, NULL);
    feed(c, 0, a + 7, 0, 40, NULL, out, f.V);
    mw_err e;
    assert_int_equal(md_seq_truncate(c, 0, 20, &e), -1);
    printf("    %s\n", e.msg);
    assert_non_null(strstr(e.msg, "recurrent state"));
    assert_int_equal(md_seq_len(c, 0), 40);
    assert_int_equal(md_seq_truncate(c, 0, 40, &e), 0);
    assert_int_equal(md_seq_truncate(c, 0, 0, &e), 0);
    feed(c, 0, a, 0, LONG, NULL, out, f.V);
    assert_memory_equal(out, ref, n * sizeof(float));
    /* the latent cache: kv_lora + rope floats per position on the one attention layer, LONG
     * positions rounded up to the doubling (256); the recurrent state: a fixed size */
    const md_seq_cost cost = md_seq_cost_of(cfg, 512, KN_F32);
    const uint64_t state_bytes = md_kda_seq_bytes(cfg);
    assert_int_equal(cost.per_pos_full, (cfg->mla.kv_lora + cfg->mla.rope) * sizeof(float));
    assert_int_equal(cost.fixed, state_bytes);
    const uint64_t per_layer =
        2 * (uint64_t)(cfg->kda.n_head * cfg->kda.head_dim) *
        (cfg->kda.head_dim + (uint64_t)MD_KDA_CHUNK * 3 + 3 * (cfg->kda.conv - 1)) * sizeof(float);
    assert_int_equal(state_bytes, per_layer * cfg->n_kda);
    assert_int_equal(md_ctx_kv_bytes(c), cost.per_pos_full * 256 + state_bytes);
    printf("    one sequence's recurrent state: %llu bytes (%d KDA layers)\n",
           (unsigned long long)state_bytes, cfg->n_kda);
    md_ctx_free(c);
    free(ref), free(out);
    close_fixture(&f);
}

/* A pass that fails after every KDA layer advanced its states (inside and across chunks) leaves
 * the sequence as it was: the retry gives an undisturbed run's bits. */
static void check_failed_pass(const char *name) {
    fixture f;
    open_fixture(&f, name);
    int32_t a[LONG];
    long_prompt(&f, a, 0);
    const size_t n = (size_t)LONG * f.V;
    float *ref = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    md_ctx *c = new_ctx(&f, KN_NUM_F32, 1, NULL, NULL);
    feed(c, 0, a, 0, LONG, NULL, ref, f.V);
    md_ctx_free(c);
    mwt_flaky fl;
    mwt_flaky_init(&fl, f.experts);
    c = new_ctx(&f, KN_NUM_F32, 1, NULL, &fl.b);
    static const int pieces[] = {20, 9, 1, 1, 30, 8, 6, 16, 59};
    md_row rows[LONG];
    mw_err e;
    for (int i = 0, pos = 0; pos < LONG; pos += pieces[i++]) {
        for (int j = 0; j < pieces[i]; j++) rows[j] = (md_row){0, pos + j, a[pos + j], 1};
        fl.fail_layer = f.model->cfg.n_layer - 1; /* after the KDA layers ran */
        assert_int_equal(md_forward(c, rows, pieces[i], out + (size_t)pos * f.V, &e), -1);
        assert_int_equal(md_seq_len(c, 0), pos);
        if (md_forward(c, rows, pieces[i], out + (size_t)pos * f.V, &e)) fail_msg("%s", e.msg);
    }
    assert_memory_equal(out, ref, n * sizeof(float));
    md_ctx_free(c);
    free(ref), free(out);
    close_fixture(&f);
}

/* ---- the file's forms --------------------------------------------------------------------------
 */

/* How a copy of a fixture differs: tensors whose name contains `match` are dropped (dims 0) or
 * stored with other dimensions (the same bytes). */
typedef struct reshape {
    const char *match;
    int n_dims;
    int64_t ne[4];
} reshape;

static const char *rewritten(const char *model, const reshape *rs, int n, const char *dir) {
    static char out[512];
    char rel[128];
    snprintf(rel, sizeof rel, "llamacpp/%s/model.gguf", model);
    snprintf(out, sizeof out, "%s/rewritten.gguf", dir);
    vx_gguf *g;
    mw_err e;
    if (vx_gguf_open(mwt_fixture(rel), &g, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer *w = vx_gguf_writer_new(32);
    const vx_meta *m = vx_gguf_meta(g);
    for (size_t i = 0; i < vx_meta_count(m); i++)
        assert_int_equal(vx_meta_copy_entry(vx_gguf_writer_meta(w), m, i), 0);
    for (size_t i = 0; i < vx_gguf_n_tensors(g); i++) {
        const vx_tensor *t = vx_gguf_tensor(g, i);
        int dims = t->n_dims;
        const int64_t *ne = t->ne;
        for (int j = 0; j < n; j++)
            if (strstr(t->name, rs[j].match)) dims = rs[j].n_dims, ne = rs[j].ne;
        if (dims && vx_gguf_writer_add(w, t->name, t->type, dims, ne, t->data, &e))
            fail_msg("%s", e.msg);
    }
    if (vx_gguf_writer_write(w, out, &e)) fail_msg("%s", e.msg);
    vx_gguf_writer_free(w);
    vx_gguf_close(g);
    return out;
}

/* Prefill logits of the fixture's prompt from a model file (NULL with *msg on a load error). */
static float *prefill_of(const char *path, const int32_t *tok, const char **msg) {
    static mw_err e;
    fixture f = {.name = path};
    *msg = NULL;
    if (vx_source_open(path, NULL, &f.src, &e)) return *msg = e.msg, NULL;
    if (md_model_load(f.src, &f.model, &e) ||
        md_local_backend_new(f.src, &f.model->cfg, NULL, &f.experts, &e)) {
        md_model_free(f.model);
        vx_source_close(f.src);
        return *msg = e.msg, NULL;
    }
    f.V = f.model->cfg.n_vocab;
    float *out = malloc((size_t)N_TOK * f.V * sizeof(float));
    md_ctx *c = new_ctx(&f, KN_NUM_F32, 1, NULL, NULL);
    feed(c, 0, tok, 0, N_TOK, NULL, out, f.V);
    md_ctx_free(c);
    close_fixture(&f);
    return out;
}

/* The forms converters and llama-quantize write (4-D convolution taps, ssm_a padded or plain), and
 * optional shared experts, load and compute the same bits; a wrong shape or a missing tensor is an
 * error naming it. */
static void test_file_forms(void **state) {
    (void)state;
    fixture f;
    open_fixture(&f, "kimi-linear-tiny");
    const int64_t K = f.model->cfg.kda.conv, H = f.model->cfg.kda.n_head;
    const int64_t D = H * f.model->cfg.kda.head_dim;
    const char *msg;
    char *dir = mwt_tmpdir("kimi");
    float *ref = prefill_of(mwt_fixture("llamacpp/kimi-linear-tiny/model.gguf"), f.tokens, &msg);
    const reshape padded[] = {{"ssm_conv1d", 4, {K, 1, D, 1}}, {"ssm_a", 4, {1, H, 1, 1}}};
    const reshape plain[] = {{"ssm_a", 1, {H}}};
    const reshape *same[] = {padded, plain};
    const int n_same[] = {2, 1};
    for (int i = 0; i < 2; i++) {
        float *got = prefill_of(rewritten(f.name, same[i], n_same[i], dir), f.tokens, &msg);
        if (!got) fail_msg("%s", msg);
        assert_memory_equal(got, ref, (size_t)N_TOK * f.V * sizeof(float));
        free(got);
    }
    const reshape wrong[] = {{"blk.1.ssm_conv1d_k", 3, {K + 1, 1, D}}};
    assert_null(prefill_of(rewritten(f.name, wrong, 1, dir), f.tokens, &msg));
    printf("    %s\n", msg);
    assert_non_null(strstr(msg, "'blk.1.ssm_conv1d_k.weight' has shape [5, 1, 256]"));
    const reshape missing[] = {{"blk.2.exp_probs_b", 0, {0}}};
    assert_null(prefill_of(rewritten(f.name, missing, 1, dir), f.tokens, &msg));
    assert_non_null(strstr(msg, "missing tensor 'blk.2.exp_probs_b.bias'"));
    const reshape part[] = {{"blk.3.ffn_up_shexp", 0, {0}}};
    assert_null(prefill_of(rewritten(f.name, part, 1, dir), f.tokens, &msg));
    assert_non_null(strstr(msg, "missing tensor 'blk.3.ffn_up_shexp.weight'"));
    /* no shared expert at all: optional for these families */
    const reshape none[] = {{"_shexp", 0, {0}}};
    float *got = prefill_of(rewritten(f.name, none, 1, dir), f.tokens, &msg);
    if (!got) fail_msg("%s", msg);
    free(got);
    free(ref);
    mwt_rmrf(dir);
    free(dir);
    close_fixture(&f);
}

static void test_passes_give_the_same_bits(void **state) {
    (void)state;
    check_passes("kimi-linear-tiny");
}

static void test_failed_pass_changes_nothing(void **state) {
    (void)state;
    check_failed_pass("kimi-linear-tiny");
}

static void test_kimi_linear_f32(void **state) {
    (void)state;
    check_fixture_f32("kimi-linear-tiny");
}

static void test_kimi_linear_q8(void **state) {
    (void)state;
    check_fixture_q8("kimi-linear-tiny");
}

/* Kimi K3: the attention residuals' mixes, the latent MoE, SiTU, the gated latent attention with
 * a query down-projection, the full-rank KDA gate and the bounded decay. */
static void test_kimi_k3_f32(void **state) {
    (void)state;
    check_fixture_f32("kimi-k3-tiny");
}

static void test_kimi_k3_q8(void **state) {
    (void)state;
    check_fixture_q8("kimi-k3-tiny");
}

static void test_kimi_k3_intermediates(void **state) {
    (void)state;
    check_intermediates("kimi-k3-tiny");
}

static void test_kimi_k3_passes(void **state) {
    (void)state;
    check_passes("kimi-k3-tiny");
    check_failed_pass("kimi-k3-tiny");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kimi_linear_f32),
        cmocka_unit_test(test_kimi_linear_q8),
        cmocka_unit_test(test_kimi_linear_intermediates),
        cmocka_unit_test(test_chunks_match_recurrence),
        cmocka_unit_test(test_passes_give_the_same_bits),
        cmocka_unit_test(test_state_truncate_and_bytes),
        cmocka_unit_test(test_failed_pass_changes_nothing),
        cmocka_unit_test(test_file_forms),
        cmocka_unit_test(test_kimi_k3_f32),
        cmocka_unit_test(test_kimi_k3_q8),
        cmocka_unit_test(test_kimi_k3_intermediates),
        cmocka_unit_test(test_kimi_k3_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
