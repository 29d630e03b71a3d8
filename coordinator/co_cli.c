/* coordinator/co_cli.c — the option table and its parser. Add an option by adding a row and a
 * setter; the usage text is generated from the table. */
#include "coordinator/co_cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/co_auth.h"
#include "coordinator/co_cors.h"
#include "coordinator/co_topo.h"
#include "model/md_kv.h"
#include "model/md_lanes.h"

#define MAX_PROMPT     (1 << 20)
#define MAX_GENERATE   (1 << 24)
#define MAX_NODES_FILE (1 << 20)

static int parse_i64(const char *name, const char *v, int64_t lo, int64_t hi, int64_t *out,
                     mw_err *err) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return mw_errf(err, "%s: '%s' is not an integer in [%lld, %lld]", name, v, (long long)lo,
                       (long long)hi);
    *out = x;
    return 0;
}

static int parse_float(const char *name, const char *v, float *out, mw_err *err) {
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || end == v || *end || !isfinite(x))
        return mw_errf(err, "%s: '%s' is not a number", name, v);
    *out = x;
    return 0;
}

static int set_model(co_opts *o, const char *v, mw_err *err) {
    (void)err;
    o->model = v;
    return 0;
}

/* "1,2,3" (commas and/or whitespace between ids). */
static int set_tokens(co_opts *o, const char *v, mw_err *err) {
    free(o->tokens);
    o->tokens = NULL;
    o->n_tokens = 0;
    int64_t cap = 0;
    const char *p = v;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (errno || end == p || x < 0 || x > INT32_MAX || (*end && !strchr(", \t\n", *end)))
            return mw_errf(err, "--tokens: '%.*s' is not a token id", (int)strcspn(p, ", \t\n"), p);
        if (o->n_tokens == MAX_PROMPT)
            return mw_errf(err, "--tokens: more than %d ids", MAX_PROMPT);
        if (o->n_tokens == cap) {
            cap = cap ? 2 * cap : 64;
            int32_t *t = realloc(o->tokens, (size_t)cap * sizeof *t);
            if (!t) return mw_errf(err, "--tokens: out of memory");
            o->tokens = t;
        }
        o->tokens[o->n_tokens++] = (int32_t)x;
        p = end;
    }
    if (o->n_tokens == 0) return mw_errf(err, "--tokens: no token ids in '%s'", v);
    return 0;
}

static int set_prompt(co_opts *o, const char *v, mw_err *err) {
    (void)err;
    o->prompt = v;
    return 0;
}

/* "role: text"; text without a known role prefix is the user's */
static int set_chat(co_opts *o, const char *v, mw_err *err) {
    static const char *const roles[] = {"system", "developer", "user", "assistant"};
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
        size_t n = strlen(roles[i]);
        if (!strncmp(v, roles[i], n) && v[n] == ':')
            return tk_msgs_add(&o->chat, roles[i], v + n + 1 + (v[n + 1] == ' '), err);
    }
    return tk_msgs_add(&o->chat, "user", v, err);
}

static int set_messages(co_opts *o, const char *v, mw_err *err) {
    (void)err;
    o->messages = v;
    return 0;
}

static int set_chat_template(co_opts *o, const char *v, mw_err *err) {
    (void)err;
    o->chat_template = v;
    return 0;
}

static int set_chat_template_file(co_opts *o, const char *v, mw_err *err) {
    (void)err;
    o->chat_template_file = v;
    return 0;
}

static int set_think(co_opts *o, const char *v, mw_err *err) {
    if (strcmp(v, "on") && strcmp(v, "off"))
        return mw_errf(err, "--think: '%s' is not on or off", v);
    o->thinking = !strcmp(v, "on");
    return 0;
}

static int set_reasoning(co_opts *o, const char *v, mw_err *err) {
    (void)v, (void)err;
    o->show_reasoning = true;
    return 0;
}

static int set_max_tokens(co_opts *o, const char *v, mw_err *err) {
    return parse_i64("--max-tokens", v, 1, MAX_GENERATE, &o->max_tokens, err);
}

static int set_logits_out(co_opts *o, const char *v, mw_err *err) {
    (void)err;
    o->logits_out = v;
    return 0;
}

static int set_experts(co_opts *o, const char *v, mw_err *err) {
    if (!co_backend_find(v))
        return mw_errf(err, "--experts: unknown backend '%s' (known: %s)", v, co_backend_names());
    o->experts = v;
    return 0;
}

static int set_numerics(co_opts *o, const char *v, mw_err *err) {
    int num = kn_numerics_from_name(v);
    if (num < 0) return mw_errf(err, "--numerics: '%s' is not f32 or q8", v);
    o->numerics = (kn_numerics)num;
    return 0;
}

static int set_temperature(co_opts *o, const char *v, mw_err *err) {
    if (parse_float("--temperature", v, &o->sampling.temperature, err)) return -1;
    if (o->sampling.temperature < 0) return mw_errf(err, "--temperature: %s must be >= 0", v);
    return 0;
}

static int set_top_p(co_opts *o, const char *v, mw_err *err) {
    float *p = &o->sampling.top_p;
    if (parse_float("--top-p", v, p, err)) return -1;
    if (!(*p > 0 && *p <= 1)) return mw_errf(err, "--top-p: %s is not in (0, 1]", v);
    return 0;
}

static int set_top_k(co_opts *o, const char *v, mw_err *err) {
    int64_t k;
    if (parse_i64("--top-k", v, 0, INT32_MAX, &k, err)) return -1;
    o->sampling.top_k = (int32_t)k;
    return 0;
}

static int set_min_p(co_opts *o, const char *v, mw_err *err) {
    float *p = &o->sampling.min_p;
    if (parse_float("--min-p", v, p, err)) return -1;
    if (!(*p >= 0 && *p <= 1)) return mw_errf(err, "--min-p: %s is not in [0, 1]", v);
    return 0;
}

static int parse_penalty(const char *name, const char *v, float *out, mw_err *err) {
    if (parse_float(name, v, out, err)) return -1;
    if (!(fabsf(*out) <= 2)) return mw_errf(err, "%s: %s is not in [-2, 2]", name, v);
    return 0;
}

static int set_presence_penalty(co_opts *o, const char *v, mw_err *err) {
    return parse_penalty("--presence-penalty", v, &o->sampling.presence_penalty, err);
}

static int set_frequency_penalty(co_opts *o, const char *v, mw_err *err) {
    return parse_penalty("--frequency-penalty", v, &o->sampling.frequency_penalty, err);
}

static int set_repeat_penalty(co_opts *o, const char *v, mw_err *err) {
    float *p = &o->sampling.repetition_penalty;
    if (parse_float("--repeat-penalty", v, p, err)) return -1;
    if (!(*p > 0)) return mw_errf(err, "--repeat-penalty: %s must be > 0", v);
    return 0;
}

static int set_seed(co_opts *o, const char *v, mw_err *err) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-')
        return mw_errf(err, "--seed: '%s' is not an unsigned integer", v);
    o->sampling.seed = x;
    return 0;
}

static int set_threads(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--threads", v, 1, 1024, &n, err)) return -1;
    o->threads = (int)n;
    return 0;
}

static int set_ctx(co_opts *o, const char *v, mw_err *err) {
    return parse_i64("--ctx", v, 1, INT32_MAX, &o->n_ctx, err);
}

int co_cli_read_nodes(const char *path, char **buf, const char **list, mw_err *err) {
    FILE *f = fopen(path, "r");
    if (!f) return mw_errf(err, "--nodes @%s: cannot open: %s", path, strerror(errno));
    free(*buf);
    *buf = calloc(MAX_NODES_FILE + 1, 1);
    size_t n = *buf ? fread(*buf, 1, MAX_NODES_FILE + 1, f) : 0;
    fclose(f);
    if (!*buf) return mw_errf(err, "out of memory");
    if (n > MAX_NODES_FILE)
        return mw_errf(err, "--nodes @%s: more than %d bytes", path, MAX_NODES_FILE);
    (*buf)[n] = 0;
    char *b = *buf + strspn(*buf, " \t\r\n");
    for (size_t e = strlen(b); e && strchr(" \t\r\n", b[e - 1]); e--) b[e - 1] = 0;
    if (!*b || strpbrk(b, "\n\r"))
        return mw_errf(err, "--nodes @%s: expected one line of endpoints", path);
    *list = b;
    return 0;
}

/* The list, or @FILE holding it (`vindex plan` writes coordinator.nodes; serve reads it again on
 * SIGHUP). */
static int set_nodes(co_opts *o, const char *v, mw_err *err) {
    o->experts = "remote";
    o->topology_file = NULL;
    o->nodes_file = v[0] == '@' ? v + 1 : NULL;
    if (v[0] != '@') {
        o->nodes = v;
        return 0;
    }
    return co_cli_read_nodes(v + 1, &o->nodes_buf, &o->nodes, err);
}

/* The hosts of a topology file as the node list (co_topo.c). */
static int set_topology(co_opts *o, const char *v, mw_err *err) {
    o->experts = "remote";
    o->nodes_file = NULL;
    o->topology_file = v;
    return co_topo_nodes(v, &o->nodes_buf, &o->nodes, err);
}

static int set_loopback(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--loopback", v, 1, 1024, &n, err)) return -1;
    o->loopback = (int)n;
    o->experts = "remote";
    return 0;
}

static int set_node_threads(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--node-threads", v, 1, 1024, &n, err)) return -1;
    o->node_threads = (int)n;
    return 0;
}

static int set_node_affinity(co_opts *o, const char *v, mw_err *err) {
    if (strcmp(v, "on") && strcmp(v, "off"))
        return mw_errf(err, "--node-affinity: '%s' is not on or off", v);
    o->node_affinity = !strcmp(v, "on");
    return 0;
}

static int set_trace_routing(co_opts *o, const char *v, mw_err *err) {
    (void)err;
    o->trace_routing = v;
    return 0;
}

static int set_pin(co_opts *o, const char *v, mw_err *err) {
    (void)v, (void)err;
    o->pin = true;
    return 0;
}

static int set_exact(co_opts *o, const char *v, mw_err *err) {
    (void)v, (void)err;
    o->exact = true;
    return 0;
}

static int set_wire(co_opts *o, const char *v, mw_err *err) {
    return wr_codec_parse(v, &o->wire, err);
}

static int set_curve_secret(co_opts *o, const char *v, mw_err *err) {
    (void)err;
    o->curve_secret = v;
    return 0;
}

static int set_curve(co_opts *o, const char *v, mw_err *err) {
    (void)v, (void)err;
    o->curve = true;
    return 0;
}

static int set_down_ms(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--down-ms", v, 10, 600000, &n, err)) return -1;
    o->down_ms = (int)n;
    return 0;
}

static int set_on_missing(co_opts *o, const char *v, mw_err *err) {
    if (strcmp(v, "fail") && strcmp(v, "skip"))
        return mw_errf(err, "--on-missing: '%s' is not fail or skip", v);
    o->on_missing_skip = !strcmp(v, "skip");
    return 0;
}

static int set_replicas(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--replicas", v, 1, 1024, &n, err)) return -1;
    o->replicas = (int)n;
    return 0;
}

static int set_deadline(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--deadline-ms", v, 1, 3600000, &n, err)) return -1;
    o->deadline_ms = (int)n;
    return 0;
}

static int set_listen(co_opts *o, const char *v, mw_err *err) {
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v || !colon[1])
        return mw_errf(err, "--listen: '%s' is not HOST:PORT", v);
    int64_t port;
    if (parse_i64("--listen port", colon + 1, 0, 65535, &port, err)) return -1;
    o->listen = v;
    return 0;
}

static int set_ready_file(co_opts *o, const char *v, mw_err *err) {
    (void)err;
    o->ready_file = v;
    return 0;
}

static int set_served_name(co_opts *o, const char *v, mw_err *err) {
    if (!*v || strlen(v) > 200) return mw_errf(err, "--served-model-name: 1 to 200 characters");
    o->served_name = v;
    return 0;
}

static int set_cors(co_opts *o, const char *v, mw_err *err) {
    co_cors *c;
    if (co_cors_new(v, &c, err)) return -1; /* checked now, made again by serve */
    co_cors_free(c);
    o->cors = v;
    return 0;
}

static int set_api_key(co_opts *o, const char *v, mw_err *err) {
    if (co_auth_key_check(v, "--api-key", err)) return -1;
    o->api_key = v;
    return 0;
}

static int set_api_key_file(co_opts *o, const char *v, mw_err *err) {
    (void)err; /* read (and checked) when serve starts */
    o->api_key_file = v;
    return 0;
}

static int set_max_seqs(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--max-seqs", v, 1, 4096, &n, err)) return -1;
    o->max_seqs = (int)n;
    return 0;
}

static int set_micro_batches(co_opts *o, const char *v, mw_err *err) {
    if (!strcmp(v, "auto")) {
        o->micro_batches = 0;
        return 0;
    }
    int64_t n;
    if (parse_i64("--micro-batches", v, 1, MD_LANES_MAX, &n, err)) return -1;
    o->micro_batches = (int)n;
    return 0;
}

static int set_kv_type(co_opts *o, const char *v, mw_err *err) {
    const int t = md_kv_type_from_name(v);
    if (t < 0) return mw_errf(err, "--kv-type %s: expected f32, f16 or bf16", v);
    o->kv_type = (kn_type)t;
    return 0;
}

static int set_kv_mb(co_opts *o, const char *v, mw_err *err) {
    return parse_i64("--kv-mb", v, 1, INT64_C(1) << 30, &o->kv_mb, err);
}

static int set_cache_mb(co_opts *o, const char *v, mw_err *err) {
    return parse_i64("--cache-mb", v, 0, INT64_C(1) << 30, &o->cache_mb, err);
}

static int set_chunk(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--chunk", v, 1, 1 << 20, &n, err)) return -1;
    o->chunk = (int)n;
    return 0;
}

static int set_max_queue(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--max-queue", v, 0, 1 << 20, &n, err)) return -1;
    o->max_queue = (int)n;
    return 0;
}

static int set_max_body(co_opts *o, const char *v, mw_err *err) {
    return parse_i64("--max-body-bytes", v, 1024, INT64_C(1) << 32, &o->max_body, err);
}

static int set_max_head(co_opts *o, const char *v, mw_err *err) {
    return parse_i64("--max-head-bytes", v, 1024, INT64_C(1) << 24, &o->max_head, err);
}

static int set_int(const char *name, const char *v, int64_t lo, int64_t hi, int *out, mw_err *err) {
    int64_t n;
    if (parse_i64(name, v, lo, hi, &n, err)) return -1;
    *out = (int)n;
    return 0;
}

static int set_max_headers(co_opts *o, const char *v, mw_err *err) {
    return set_int("--max-headers", v, 1, 10000, &o->max_headers, err);
}

static int set_max_held(co_opts *o, const char *v, mw_err *err) {
    return parse_i64("--max-held-bytes", v, 65536, INT64_C(1) << 40, &o->max_held, err);
}

static int set_max_conns(co_opts *o, const char *v, mw_err *err) {
    return set_int("--max-conns", v, 1, 1 << 20, &o->max_conns, err);
}

static int set_idle_timeout(co_opts *o, const char *v, mw_err *err) {
    return set_int("--idle-timeout-ms", v, 1, 3600000, &o->idle_timeout_ms, err);
}

static int set_max_unsent(co_opts *o, const char *v, mw_err *err) {
    return parse_i64("--max-unsent-bytes", v, 4096, INT64_C(1) << 30, &o->max_unsent, err);
}

static int set_stall_timeout(co_opts *o, const char *v, mw_err *err) {
    return set_int("--stall-timeout-ms", v, 1, 3600000, &o->stall_timeout_ms, err);
}

static int set_max_messages(co_opts *o, const char *v, mw_err *err) {
    return set_int("--max-messages", v, 1, 1 << 20, &o->max_messages, err);
}

static int set_max_logit_bias(co_opts *o, const char *v, mw_err *err) {
    return set_int("--max-logit-bias", v, 0, 1 << 20, &o->max_logit_bias, err);
}

static int set_max_prompt_tokens(co_opts *o, const char *v, mw_err *err) {
    return parse_i64("--max-prompt-tokens", v, 1, INT64_C(1) << 31, &o->max_prompt_tokens, err);
}

static int set_request_timeout(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--request-timeout-ms", v, 1, 3600000, &n, err)) return -1;
    o->request_timeout_ms = (int)n;
    return 0;
}

static int set_grace(co_opts *o, const char *v, mw_err *err) {
    int64_t n;
    if (parse_i64("--grace-ms", v, 0, 3600000, &n, err)) return -1;
    o->grace_ms = (int)n;
    return 0;
}

static const co_option options[] = {
    {"--model", "PATH", "GGUF file or vindex directory (required)", set_model},
    {"--tokens", "1,2,3", "prompt token ids, comma-separated; prints the generated ids",
     set_tokens},
    {"--prompt", "TEXT",
     "prompt text (special-token text is parsed; BOS as the model asks); streams the generated "
     "text to stdout",
     set_prompt},
    {"--chat", "'ROLE: TEXT'",
     "a chat message (role system, developer, user or assistant; none = user); repeat for more; "
     "rendered with the model's chat template, the answer streamed to stdout",
     set_chat},
    {"--messages", "FILE.json", "chat messages as an OpenAI message list", set_messages},
    {"--chat-template", "NAME", "chat format instead of the model's own (see below)",
     set_chat_template},
    {"--chat-template-file", "FILE.jinja",
     "serve: render chat prompts with this Jinja template instead of the model's (replies are "
     "parsed by the format --chat-template names, else the model's family's)",
     set_chat_template_file},
    {"--think", "on|off", "qwen3: open the answer with thinking on or off (default: the model's)",
     set_think},
    {"--reasoning", NULL, "chat: stream the reasoning (analysis, <think>) to stderr",
     set_reasoning},
    {"--max-tokens", "N", "tokens to generate (required, >= 1)", set_max_tokens},
    {"--logits-out", "FILE",
     "write float32 logits [P + N - 1][vocab]: the P prompt rows, then one per further step",
     set_logits_out},
    {"--experts", "NAME", "expert backend (default local: in this process)", set_experts},
    {"--numerics", "f32|q8",
     "activation numerics. q8 (default) quantizes activations as ggml does before quantized "
     "weights and reproduces llama.cpp on quantized models; f32 uses float activations against "
     "dequantized weights",
     set_numerics},
    {"--temperature", "T", "sampling temperature (default 0: greedy, ties to the lowest id)",
     set_temperature},
    {"--top-p", "P", "nucleus sampling mass in (0, 1] (default 1)", set_top_p},
    {"--top-k", "K", "sample among the K most likely tokens only (default 0: all)", set_top_k},
    {"--min-p", "P",
     "drop tokens less likely than P times the most likely one, P in [0, 1] (default 0)",
     set_min_p},
    {"--presence-penalty", "X",
     "subtract X in [-2, 2] from the logit of every token generated so far (default 0)",
     set_presence_penalty},
    {"--frequency-penalty", "X",
     "subtract X in [-2, 2] times its count from the logit of every token generated so far "
     "(default 0)",
     set_frequency_penalty},
    {"--repeat-penalty", "X",
     "divide the positive logits (multiply the others) of the prompt's and generated tokens by "
     "X > 0 (default 1: none)",
     set_repeat_penalty},
    {"--seed", "S", "sampling seed (default 0); same seed, same tokens", set_seed},
    {"--threads", "N", "threads (default: one per CPU)", set_threads},
    {"--ctx", "N", "positions to allow (default: prompt + max-tokens)", set_ctx},
    {"--pin", NULL,
     "copy the dense matrices (and local experts) out of the file mapping onto huge pages: "
     "faster decoding for their size in memory",
     set_pin},
    {"--trace-routing", "FILE",
     "write every routing decision (layer, row, experts, gate weights) to FILE for `vindex "
     "routing-stats` and `vindex plan`",
     set_trace_routing},
    {"--nodes", "tcp://h:p,...",
     "expert nodes, in node order, or @FILE holding the list (`vindex "
     "plan` writes coordinator.nodes); selects --experts remote",
     set_nodes},
    {"--topology", "FILE",
     "expert nodes: the hosts of a topology file (endpoints and CURVE keys; serve reads it "
     "again on SIGHUP); selects --experts remote",
     set_topology},
    {"--loopback", "N",
     "start N expert nodes on 127.0.0.1 splitting the experts evenly, stop them at the end "
     "(selects --experts remote)",
     set_loopback},
    {"--node-threads", "N", "threads per loopback node (default: one per CPU)", set_node_threads},
    {"--node-affinity", "on|off",
     "bind loopback node i's threads to CPUs from i*CPUs/N on (default on: the nodes' busy "
     "threads are spread over the cores instead of stacked by the scheduler)",
     set_node_affinity},
    {"--exact", NULL,
     "exact mode: nodes return one row per (row, expert), reduced here in selection order "
     "(bit-identical to local experts with --wire f32)",
     set_exact},
    {"--wire", "CODEC",
     "row codec between coordinator and nodes: f32, f16 or bf16, optionally +lz4 (default f32)",
     set_wire},
    {"--deadline-ms", "N", "per-layer deadline for every node's answer (default 10000)",
     set_deadline},
    {"--curve-secret", "FILE",
     "the coordinator's CURVE key pair (coordinator keygen); nodes listed as tcp://h:p#KEY are "
     "spoken to over CURVE, their public key pinned",
     set_curve_secret},
    {"--down-ms", "N",
     "a node that leaves its liveness pings unanswered this long (UDP on its port, every N/10 "
     "ms, answered by a thread of its own while it computes) is down: its work goes to "
     "replicas (default 750, --loopback too; ZMTP heartbeats drop its connection after "
     "max(4N, 5000) ms)",
     set_down_ms},
    {"--on-missing", "fail|skip",
     "experts with no live owner: fail the requests that need them (default), or skip them and "
     "renormalise the gate weights over the reachable experts (counted and reported)",
     set_on_missing},
    {"--replicas", "R",
     "with --loopback: every expert is owned by R nodes (node i also serves the shares of the "
     "next R-1 nodes; default 1)",
     set_replicas},
    {"--curve", NULL,
     "with --loopback: the nodes run CURVE, with key pairs made for the run (measures its cost)",
     set_curve},
    {"--listen", "HOST:PORT",
     "serve: address to listen on (default 127.0.0.1:8080; port 0 picks a free one)", set_listen},
    {"--ready-file", "PATH", "serve: write the server's URL there once it accepts requests",
     set_ready_file},
    {"--served-model-name", "NAME",
     "serve: the model id clients name (default: the model file's name)", set_served_name},
    {"--max-seqs", "N",
     "serve: sequences decoding at once, each with a KV slot of --ctx positions (default 16)",
     set_max_seqs},
    {"--kv-mb", "MB",
     "serve: KV cache budget; as many slots of --ctx positions as it holds (counted in "
     "--kv-type's bytes)",
     set_kv_mb},
    {"--kv-type", "f32|f16|bf16",
     "the KV cache's element type: f16 and bf16 take half of f32's bytes per position and round "
     "the cached keys and values (llama.cpp's default is f16; default f32)",
     set_kv_type},
    {"--micro-batches", "auto|N",
     "ping-pong micro-batches: a step's rows (a long prompt's too) cut into N (1 .. 4) lanes "
     "whose expert exchanges overlap each other's trunk work, the same bits; auto (default) "
     "splits when the measured wait for the experts outgrows the trunk's time per layer",
     set_micro_batches},
    {"--cache-mb", "MB",
     "serve: prompt cache budget: computed prefixes kept by blocks of 32 tokens for requests "
     "that begin with them, least recently used evicted first (default 512; 0: off)",
     set_cache_mb},
    {"--chunk", "N",
     "serve: prompt tokens prefilled per step next to the decoding rows (default 256)", set_chunk},
    {"--max-queue", "N",
     "serve: requests waiting for a slot; beyond it the server answers 503 (default 64)",
     set_max_queue},
    {"--max-body-bytes", "N", "serve: largest request body (default 8388608; 413 beyond)",
     set_max_body},
    {"--max-head-bytes", "N",
     "serve: largest request line and headers (default 32768; 431, or 414 for the target, "
     "beyond)",
     set_max_head},
    {"--max-headers", "N", "serve: header lines of a request (default 100; 431 beyond)",
     set_max_headers},
    {"--max-held-bytes", "N",
     "serve: request bytes (bodies being read, unparsed input) every connection together may "
     "hold; a request that would take more gets 503 + Retry-After, small ones (16 KiB) always "
     "pass (default 67108864)",
     set_max_held},
    {"--request-timeout-ms", "N",
     "serve: a request must arrive in full within this, from its first byte or, on a new "
     "connection, from its opening: 408, or a connection that sent nothing is closed (default "
     "30000)",
     set_request_timeout},
    {"--idle-timeout-ms", "N",
     "serve: a kept-alive connection that starts no next request within this is closed (default "
     "60000)",
     set_idle_timeout},
    {"--max-conns", "N",
     "serve: connections at once; a new one beyond takes the place of the connection idle the "
     "longest, 503 only when every one waits for its answer (default 1024, lowered to what "
     "the open-file limit allows)",
     set_max_conns},
    {"--max-unsent-bytes", "N",
     "serve: a stream's bytes its client has not taken (past a kernel buffer of the same size) "
     "before its sequence is paused, leaving the batch and keeping its slot (default 16384)",
     set_max_unsent},
    {"--stall-timeout-ms", "N",
     "serve: a stream paused this long is cancelled, its slot freed; 1000 at most while requests "
     "wait for a slot (default 10000)",
     set_stall_timeout},
    {"--max-messages", "N", "serve: messages of a chat request (default 2048; 400 beyond)",
     set_max_messages},
    {"--max-logit-bias", "N", "serve: logit_bias entries of a request (default 1024; 400 beyond)",
     set_max_logit_bias},
    {"--max-prompt-tokens", "N",
     "serve: prompt tokens of a request, every prompt of a list together; a text prompt is "
     "refused before it is tokenized when its bytes alone mean more (default 65536; 400 beyond)",
     set_max_prompt_tokens},
    {"--grace-ms", "N", "serve: on SIGTERM, time in-flight requests get to finish (default 30000)",
     set_grace},
    {"--cors-origins", "LIST",
     "serve: web pages (browser origins) that may call the API: * (default), localhost, none, or "
     "a comma-separated list like https://chat.example.com,http://127.0.0.1:3000",
     set_cors},
    {"--api-key", "KEY",
     "serve: /v1/ requests must send 'Authorization: Bearer KEY' (else 401); visible to other "
     "users in the process list: prefer --api-key-file or $MOEWIRE_API_KEY",
     set_api_key},
    {"--api-key-file", "PATH",
     "serve: accepted keys, one per line ('#' comments); with --api-key, either is accepted",
     set_api_key_file},
};

#define N_OPTIONS (sizeof options / sizeof options[0])

void co_opts_init(co_opts *o) {
    memset(o, 0, sizeof *o);
    o->experts = "local";
    o->numerics = KN_NUM_Q8;
    o->sampling = md_sampler_defaults();
    o->node_threads = 0; /* one per CPU */
    o->node_affinity = true;
    o->wire = (wr_codec){WR_F32, false};
    o->deadline_ms = 10000;
    o->listen = "127.0.0.1:8080";
    o->chunk = 256;
    o->cache_mb = 512;
    o->max_queue = 64;
    o->max_body = 8 << 20;
    o->max_head = 32 << 10;
    o->max_headers = 100;
    o->max_held = 64 << 20;
    o->max_conns = 1024;
    o->idle_timeout_ms = 60000;
    o->max_unsent = 16 << 10;
    o->stall_timeout_ms = 10000;
    o->max_messages = 2048;
    o->max_logit_bias = 1024;
    o->max_prompt_tokens = 65536;
    o->request_timeout_ms = 30000;
    o->grace_ms = 30000;
    o->thinking = -1;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = n > 0 && n <= 1024 ? (int)n : 1;
}

void co_opts_free(co_opts *o) {
    free(o->tokens);
    o->tokens = NULL;
    free(o->nodes_buf);
    o->nodes_buf = NULL;
    tk_msgs_free(&o->chat);
}

int co_cli_parse(int argc, char **argv, co_opts *o, int *help, mw_err *err) {
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            *help = 1;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const co_option *opt = NULL;
        for (size_t j = 0; j < N_OPTIONS && !opt; j++)
            if (strlen(options[j].name) == len && !strncmp(options[j].name, a, len))
                opt = &options[j];
        if (!opt) return mw_errf(err, "unknown option '%.*s' (see --help)", (int)len, a);
        const char *val = NULL;
        if (opt->arg) {
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else
                return mw_errf(err, "%s needs a value (%s)", opt->name, opt->arg);
        } else if (eq) {
            return mw_errf(err, "%s takes no value", opt->name);
        }
        if (opt->set(o, val, err)) return -1;
    }
    return 0;
}

static int check_backend(const co_opts *o, const char *cmd, mw_err *err) {
    bool remote = !strcmp(o->experts, "remote");
    if (o->nodes && o->loopback)
        return mw_errf(err, "%s: --nodes and --loopback exclude each other", cmd);
    if (remote && !o->nodes && !o->loopback)
        return mw_errf(err, "%s: --experts remote needs --nodes or --loopback", cmd);
    if (!remote && (o->nodes || o->loopback))
        return mw_errf(err, "%s: --nodes and --loopback need --experts remote", cmd);
    return 0;
}

int co_cli_check_generate(const co_opts *o, mw_err *err) {
    if (!o->model) return mw_errf(err, "generate: --model is required");
    int forms = !!o->tokens + !!o->prompt + (o->chat.n > 0) + !!o->messages;
    if (forms != 1)
        return mw_errf(err, "generate: give exactly one of --tokens, --prompt, --chat, --messages");
    if (o->max_tokens < 1) return mw_errf(err, "generate: --max-tokens is required");
    return check_backend(o, "generate", err);
}

int co_cli_check_serve(const co_opts *o, mw_err *err) {
    if (!o->model) return mw_errf(err, "serve: --model is required");
    if (o->tokens || o->max_tokens || o->logits_out || o->prompt || o->chat.n || o->messages)
        return mw_errf(err, "serve: --tokens, --prompt, --chat, --messages, --max-tokens and "
                            "--logits-out are generate's (requests carry their own)");
    if (o->kv_mb && o->max_seqs)
        return mw_errf(err, "serve: --kv-mb and --max-seqs exclude each other (either sets the "
                            "number of slots)");
    if (o->max_held < o->max_body)
        return mw_errf(err,
                       "serve: --max-held-bytes %lld is less than --max-body-bytes %lld (a "
                       "body of the largest size could never be read)",
                       (long long)o->max_held, (long long)o->max_body);
    return check_backend(o, "serve", err);
}

void co_cli_usage(FILE *f) {
    fprintf(
        f,
        "generate runs the prompt through the model in one batch, then generates up to N tokens\n"
        "one at a time. Text and chat prompts stream the generated text to stdout (flushed per\n"
        "token) and stop at the model's end-of-generation tokens; --tokens prints the N generated\n"
        "ids as one line 'tokens: 38 364 ...'. The report goes to stderr.\n"
        "serve answers the OpenAI API (/v1/completions, /v1/chat/completions, /v1/models)\n"
        "plus /health and /metrics, batching every request's decoding into shared steps,\n"
        "until SIGTERM or SIGINT.\n"
        "keygen writes the coordinator's CURVE key pair (see coordinator keygen --help);\n"
        "tokenize and detokenize: see coordinator tokenize --help.\n"
        "chat-template renders a Jinja chat template with a message list and prints the text\n"
        "(see coordinator chat-template --help).\n"
        "\n"
        "options of generate and serve:\n");
    for (size_t j = 0; j < N_OPTIONS; j++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", options[j].name, options[j].arg ? " " : "",
                 options[j].arg ? options[j].arg : "");
        fprintf(f, "  %-22s ", head);
        /* the help text wrapped at 100 columns under its own column */
        int col = 25;
        for (const char *h = options[j].help; *h;) {
            size_t w = strcspn(h, " ");
            if (col > 25 && col + 1 + (int)w > 100) {
                fprintf(f, "\n%25s", "");
                col = 25;
            } else if (col > 25) {
                fputc(' ', f);
                col++;
            }
            fprintf(f, "%.*s", (int)w, h);
            col += (int)w;
            h += w;
            while (*h == ' ') h++;
        }
        fputc('\n', f);
    }
    fprintf(f, "\nexpert backends: %s\nchat templates: %s\n", co_backend_names(), tk_chat_known());
}

co_backend_opts co_cli_backend_opts(const co_opts *o) {
    return (co_backend_opts){.model = o->model,
                             .numerics = o->numerics,
                             .pin = o->pin,
                             .nodes = o->nodes,
                             .loopback = o->loopback,
                             .node_threads = o->node_threads,
                             .node_affinity = o->node_affinity,
                             .replicas = o->replicas,
                             .wire = o->wire,
                             .exact = o->exact,
                             .deadline_ms = o->deadline_ms,
                             .down_ms = o->down_ms,
                             .on_missing_skip = o->on_missing_skip,
                             .curve_secret = o->curve_secret,
                             .curve = o->curve};
}
