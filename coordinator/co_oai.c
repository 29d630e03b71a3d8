/* coordinator/co_oai.c — OpenAI request checking and response building (co_oai.h). */
#include "coordinator/co_oai.h"

#include "coordinator/co_oai_format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

co_oai_limits co_oai_default_limits(void) {
    return (co_oai_limits){
        .max_messages = 2048, .max_logit_bias = 1024, .max_prompt_tokens = 65536};
}

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* An optional number in [lo, hi]; absent or null keeps *out. */
static int get_number(json_t *o, const char *k, double lo, double hi, double *out,
                      co_oai_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v))
        return co_oai_fail(e, 400, k, NULL, "'%s' must be a number, not %s", k, type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return co_oai_fail(e, 400, k, NULL, "'%s' is %g; it must be in [%g, %g]", k, x, lo, hi);
    *out = x;
    return 0;
}

/* An optional integer in [lo, hi]; returns 1 when present. */
static int get_int(json_t *o, const char *k, long long lo, long long hi, long long *out,
                   co_oai_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v))
        return co_oai_fail(e, 400, k, NULL, "'%s' must be an integer, not %s", k, type_name(v));
    long long x = json_integer_value(v);
    if (x < lo || x > hi)
        return co_oai_fail(e, 400, k, NULL, "'%s' is %lld; it must be in [%lld, %lld]", k, x, lo,
                           hi);
    *out = x;
    return 1;
}

static int get_bool(json_t *o, const char *k, bool *out, co_oai_error *e) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v))
        return co_oai_fail(e, 400, k, NULL, "'%s' must be a boolean, not %s", k, type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* Token ids from a JSON array (each an integer id >= 0). */
static int get_ids(json_t *a, const char *k, int32_t **ids, int64_t *n, co_oai_error *e) {
    size_t len = json_array_size(a);
    if (len == 0) return co_oai_fail(e, 400, k, NULL, "'%s' is empty", k);
    if (len > CO_OAI_MAX_PROMPT_IDS)
        return co_oai_fail(e, 400, k, NULL, "'%s' has more than %d token ids", k,
                           CO_OAI_MAX_PROMPT_IDS);
    int32_t *t = malloc(len * sizeof *t);
    if (!t) return co_oai_fail(e, 500, k, NULL, "out of memory");
    for (size_t i = 0; i < len; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            free(t);
            return co_oai_fail(e, 400, k, NULL, "'%s'[%zu] must be a token id (an integer >= 0)", k,
                               i);
        }
        t[i] = (int32_t)json_integer_value(v);
    }
    *ids = t;
    *n = (int64_t)len;
    return 0;
}

/* One prompt of a list: a string or an array of token ids (*total: the ids so far, every prompt
 * together, within the limit). */
static int prompt_item(json_t *v, const char *param, const co_oai_limits *lim, int64_t *total,
                       co_oai_prompt *out, co_oai_error *e) {
    if (json_is_string(v)) {
        out->text = json_string_value(v);
        return 0;
    }
    if (json_is_array(v) && *total + (int64_t)json_array_size(v) > lim->max_prompt_tokens)
        return co_oai_fail(e, 400, param, NULL,
                           "'%s' takes the prompts' token ids past %lld, the most this server "
                           "takes in one request (--max-prompt-tokens)",
                           param, (long long)lim->max_prompt_tokens);
    if (json_is_array(v)) {
        *total += (int64_t)json_array_size(v);
        return get_ids(v, param, &out->ids, &out->n_ids, e);
    }
    return co_oai_fail(e, 400, param, NULL,
                       "'%s' must be a string or an array of token ids, not %s", param,
                       type_name(v));
}

/* A string, an array of token ids, or an array of those (several prompts, a choice each). */
static int parse_prompt(json_t *root, const co_oai_limits *lim, co_oai_req *r, co_oai_error *e) {
    json_t *p = json_object_get(root, "prompt");
    if (!p || json_is_null(p)) return co_oai_fail(e, 400, "prompt", NULL, "'prompt' is required");
    if (!json_is_string(p) && !json_is_array(p))
        return co_oai_fail(e, 400, "prompt", NULL,
                           "'prompt' must be a string, an array of token ids, or an array of "
                           "those, not %s",
                           type_name(p));
    json_t *first = json_array_get(p, 0);
    const bool list = json_is_array(p) && (json_is_string(first) || json_is_array(first));
    const size_t n = list ? json_array_size(p) : 1;
    if (n > CO_OAI_MAX_PROMPTS)
        return co_oai_fail(e, 400, "prompt", NULL,
                           "'prompt' holds %zu prompts; a request takes at most %d", n,
                           CO_OAI_MAX_PROMPTS);
    r->prompts = calloc(n, sizeof *r->prompts);
    if (!r->prompts) return co_oai_fail(e, 500, "prompt", NULL, "out of memory");
    r->n_prompts = (int)n;
    int64_t total = 0;
    if (!list) return prompt_item(p, "prompt", lim, &total, &r->prompts[0], e);
    for (size_t i = 0; i < n; i++) {
        char param[32];
        snprintf(param, sizeof param, "prompt[%zu]", i);
        if (prompt_item(json_array_get(p, i), param, lim, &total, &r->prompts[i], e)) return -1;
    }
    return 0;
}

static int parse_messages(json_t *root, const co_oai_limits *lim, co_oai_req *r, co_oai_error *e) {
    json_t *m = json_object_get(root, "messages");
    if (!m || json_is_null(m))
        return co_oai_fail(e, 400, "messages", NULL, "'messages' is required");
    if (!json_is_array(m))
        return co_oai_fail(e, 400, "messages", NULL, "'messages' must be an array, not %s",
                           type_name(m));
    if (json_array_size(m) == 0)
        return co_oai_fail(e, 400, "messages", NULL, "'messages' must not be empty");
    if (json_array_size(m) > (size_t)lim->max_messages)
        return co_oai_fail(e, 400, "messages", NULL,
                           "'messages' holds %zu messages; this server takes at most %d "
                           "(--max-messages)",
                           json_array_size(m), lim->max_messages);
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg))
            return co_oai_fail(e, 400, param, NULL, "'%s' must be an object, not %s", param,
                               type_name(msg));
        json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role))
            return co_oai_fail(e, 400, param, NULL, "'%s.role' must be a string", param);
        const char *rs = json_string_value(role);
        if (strcmp(rs, "system") && strcmp(rs, "developer") && strcmp(rs, "user") &&
            strcmp(rs, "assistant") && strcmp(rs, "tool"))
            return co_oai_fail(e, 400, param, NULL,
                               "'%s.role' is '%.40s'; it must be system, developer, user, "
                               "assistant or tool",
                               param, rs);
        json_t *c = json_object_get(msg, "content");
        if (json_is_string(c) || (json_is_null(c) && !strcmp(rs, "assistant"))) continue;
        if (!json_is_array(c))
            return co_oai_fail(e, 400, param, NULL,
                               "'%s.content' must be a string or an array of text parts", param);
        size_t k;
        json_t *part;
        json_array_foreach(c, k, part) {
            json_t *type = json_object_get(part, "type");
            if (!json_is_object(part) || !json_is_string(type) ||
                strcmp(json_string_value(type), "text") ||
                !json_is_string(json_object_get(part, "text")))
                return co_oai_fail(e, 400, param, NULL,
                                   "'%s.content[%zu]' must be {\"type\": \"text\", \"text\": ...} "
                                   "(this server takes text only)",
                                   param, k);
        }
    }
    r->messages = m;
    return 0;
}

static int parse_stop(json_t *root, co_oai_req *r, co_oai_error *e) {
    json_t *s = json_object_get(root, "stop");
    if (s && !json_is_null(s)) {
        if (json_is_string(s)) {
            r->stop[r->n_stop++] = json_string_value(s);
        } else if (json_is_array(s)) {
            size_t i;
            json_t *v;
            json_array_foreach(s, i, v) {
                if (json_is_string(v)) {
                    if (r->n_stop == CO_STOP_MAX)
                        return co_oai_fail(e, 400, "stop", NULL, "'stop' has more than %d strings",
                                           CO_STOP_MAX);
                    r->stop[r->n_stop++] = json_string_value(v);
                } else if (json_is_integer(v) && json_integer_value(v) >= 0 &&
                           json_integer_value(v) <= INT32_MAX) {
                    if (r->n_stop_ids == CO_OAI_MAX_STOP_IDS)
                        return co_oai_fail(e, 400, "stop", NULL, "'stop' has more than %d ids",
                                           CO_OAI_MAX_STOP_IDS);
                    r->stop_ids[r->n_stop_ids++] = (int32_t)json_integer_value(v);
                } else {
                    return co_oai_fail(e, 400, "stop", NULL,
                                       "'stop'[%zu] must be a string or a token id", i);
                }
            }
        } else {
            return co_oai_fail(e, 400, "stop", NULL,
                               "'stop' must be a string or an array of strings, not %s",
                               type_name(s));
        }
        for (int i = 0; i < r->n_stop; i++) {
            size_t l = strlen(r->stop[i]);
            if (l == 0 || l > CO_STOP_MAX_LEN)
                return co_oai_fail(e, 400, "stop", NULL, "a stop string must have 1 to %d bytes",
                                   CO_STOP_MAX_LEN);
        }
    }
    json_t *ids = json_object_get(root, "stop_token_ids");
    if (ids && !json_is_null(ids)) {
        if (!json_is_array(ids))
            return co_oai_fail(e, 400, "stop_token_ids", NULL,
                               "'stop_token_ids' must be an array of token ids");
        size_t i;
        json_t *v;
        json_array_foreach(ids, i, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > INT32_MAX)
                return co_oai_fail(e, 400, "stop_token_ids", NULL,
                                   "'stop_token_ids'[%zu] must be a token id", i);
            if (r->n_stop_ids == CO_OAI_MAX_STOP_IDS)
                return co_oai_fail(e, 400, "stop_token_ids", NULL, "more than %d stop ids",
                                   CO_OAI_MAX_STOP_IDS);
            r->stop_ids[r->n_stop_ids++] = (int32_t)json_integer_value(v);
        }
    }
    return 0;
}

static int parse_logprobs(json_t *root, co_oai_req *r, co_oai_error *e) {
    long long n = 0;
    if (r->kind == CO_OAI_COMPLETION) {
        json_t *v = json_object_get(root, "logprobs");
        if (json_is_boolean(v))
            return co_oai_fail(e, 400, "logprobs", NULL,
                               "'logprobs' of a completion is the number of alternatives (an "
                               "integer 0 to %d)",
                               CO_TOP_LOGPROBS_MAX);
        int got = get_int(root, "logprobs", 0, CO_TOP_LOGPROBS_MAX, &n, e);
        if (got < 0) return -1;
        r->top_logprobs = got ? (int)n : -1;
        return 0;
    }
    bool lp = false;
    if (get_bool(root, "logprobs", &lp, e)) return -1;
    int got = get_int(root, "top_logprobs", 0, CO_TOP_LOGPROBS_MAX, &n, e);
    if (got < 0) return -1;
    if (got && !lp)
        return co_oai_fail(e, 400, "top_logprobs", NULL, "'top_logprobs' needs 'logprobs': true");
    r->top_logprobs = lp ? (int)n : -1;
    return 0;
}

static int cmp_bias(const void *pa, const void *pb) {
    const co_logit_bias *a = pa, *b = pb;
    return (a->token > b->token) - (a->token < b->token);
}

/* logit_bias: {"token id": bias, ...}, ids in decimal without leading zeros (so no id appears
 * twice: the parser refuses duplicate keys), biases in [-100, 100]. Whether the ids are in the
 * vocabulary is the caller's check. */
static int parse_logit_bias(json_t *root, const co_oai_limits *lim, co_oai_req *r,
                            co_oai_error *e) {
    json_t *lb = json_object_get(root, "logit_bias");
    if (!lb || json_is_null(lb)) return 0;
    if (!json_is_object(lb))
        return co_oai_fail(e, 400, "logit_bias", NULL,
                           "'logit_bias' must be an object mapping token ids to biases, not %s",
                           type_name(lb));
    const size_t n = json_object_size(lb);
    if (n == 0) return 0;
    if (n > (size_t)lim->max_logit_bias)
        return co_oai_fail(e, 400, "logit_bias", NULL,
                           "'logit_bias' has %zu entries; this server takes at most %d "
                           "(--max-logit-bias)",
                           n, lim->max_logit_bias);
    r->logit_bias = malloc(n * sizeof *r->logit_bias);
    if (!r->logit_bias) return co_oai_fail(e, 500, "logit_bias", NULL, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(lb, key, v) {
        const size_t kl = strlen(key);
        bool digits = kl > 0 && kl <= 10 && (key[0] != '0' || kl == 1);
        for (size_t i = 0; digits && i < kl; i++) digits = key[i] >= '0' && key[i] <= '9';
        const long long id = digits ? strtoll(key, NULL, 10) : -1;
        if (!digits || id > INT32_MAX)
            return co_oai_fail(e, 400, "logit_bias", NULL,
                               "'logit_bias' key '%.40s' is not a token id (a decimal integer "
                               ">= 0)",
                               key);
        if (!json_is_number(v))
            return co_oai_fail(e, 400, "logit_bias", NULL,
                               "'logit_bias'['%s'] must be a number, not %s", key, type_name(v));
        const double b = json_number_value(v);
        if (!isfinite(b) || b < -CO_OAI_LOGIT_BIAS_MAX || b > CO_OAI_LOGIT_BIAS_MAX)
            return co_oai_fail(e, 400, "logit_bias", NULL,
                               "'logit_bias'['%s'] is %g; a bias must be in [%g, %g]", key, b,
                               -CO_OAI_LOGIT_BIAS_MAX, CO_OAI_LOGIT_BIAS_MAX);
        r->logit_bias[r->n_logit_bias++] = (co_logit_bias){(int32_t)id, (float)b};
    }
    qsort(r->logit_bias, (size_t)r->n_logit_bias, sizeof *r->logit_bias, cmp_bias);
    return 0;
}

/* stream and stream_options. */
static int parse_stream(json_t *root, co_oai_req *r, co_oai_error *e) {
    if (get_bool(root, "stream", &r->stream, e)) return -1;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return co_oai_fail(e, 400, "stream_options", NULL,
                               "'stream_options' must be an object, not %s", type_name(so));
        if (!r->stream)
            return co_oai_fail(e, 400, "stream_options", NULL,
                               "'stream_options' is only allowed with 'stream': true");
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu))
            return co_oai_fail(e, 400, "stream_options.include_usage", NULL,
                               "'stream_options.include_usage' must be a boolean");
        r->include_usage = json_is_true(iu);
    }
    return 0;
}

/* max_tokens / max_completion_tokens, temperature, top_p, seed, n; OpenAI's presence and frequency
 * penalties, and vLLM's and llama.cpp's top_k, min_p and repetition_penalty. */
static int parse_sampling(json_t *root, co_oai_req *r, co_oai_error *e) {
    long long v;
    int got = get_int(root, "max_tokens", 1, INT32_MAX, &v, e);
    if (got < 0) return -1;
    if (got) r->max_tokens = v;
    if ((got = get_int(root, "max_completion_tokens", 1, INT32_MAX, &v, e)) < 0) return -1;
    if (got) r->max_tokens = v;
    if (get_number(root, "temperature", 0, 2, &r->temperature, e)) return -1;
    if (get_number(root, "top_p", 0, 1, &r->top_p, e)) return -1;
    if (r->top_p <= 0) return co_oai_fail(e, 400, "top_p", NULL, "'top_p' must be greater than 0");
    if (get_int(root, "top_k", -1, INT32_MAX, &r->top_k, e) < 0) return -1;
    if (get_number(root, "min_p", 0, 1, &r->min_p, e) ||
        get_number(root, "presence_penalty", -2, 2, &r->presence_penalty, e) ||
        get_number(root, "frequency_penalty", -2, 2, &r->frequency_penalty, e) ||
        get_number(root, "repetition_penalty", 0, 1e9, &r->repetition_penalty, e))
        return -1;
    if (r->repetition_penalty <= 0)
        return co_oai_fail(e, 400, "repetition_penalty", NULL,
                           "'repetition_penalty' must be greater than 0");
    json_t *seed = json_object_get(root, "seed");
    if (seed && !json_is_null(seed)) {
        if (!json_is_integer(seed))
            return co_oai_fail(e, 400, "seed", NULL, "'seed' must be an integer, not %s",
                               type_name(seed));
        r->has_seed = true;
        r->seed = (uint64_t)json_integer_value(seed);
    }
    if ((got = get_int(root, "n", 1, CO_OAI_MAX_N, &v, e)) < 0) return -1;
    r->n = got ? (int)v : 1;
    return 0;
}

/* Chat's reasoning_effort and chat_template_kwargs.enable_thinking. */
static int parse_chat_options(json_t *root, co_oai_req *r, co_oai_error *e) {
    json_t *re = json_object_get(root, "reasoning_effort");
    if (re && !json_is_null(re)) {
        const char *eff = json_is_string(re) ? json_string_value(re) : "";
        if (strcmp(eff, "low") && strcmp(eff, "medium") && strcmp(eff, "high"))
            return co_oai_fail(e, 400, "reasoning_effort", NULL,
                               "'reasoning_effort' must be \"low\", \"medium\" or \"high\"");
        r->reasoning_effort = eff;
    }
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        json_t *th = json_object_get(kw, "enable_thinking");
        if (!json_is_object(kw) || (th && !json_is_null(th) && !json_is_boolean(th)))
            return co_oai_fail(e, 400, "chat_template_kwargs", NULL,
                               "'chat_template_kwargs' must be an object; its "
                               "'enable_thinking' a boolean");
        if (json_is_boolean(th)) r->thinking = json_is_true(th);
    }
    return 0;
}

/* What this server refuses rather than ignores: echo, the older functions, completions' suffix
 * and best_of > 1. */
static int parse_unsupported(json_t *root, co_oai_error *e) {
    bool echo = false;
    if (get_bool(root, "echo", &echo, e)) return -1;
    if (echo) return co_oai_fail(e, 400, "echo", NULL, "'echo' is not supported");
    json_t *fn = json_object_get(root, "functions");
    if (fn && !json_is_null(fn) && json_array_size(fn) > 0)
        return co_oai_fail(e, 400, "functions", NULL,
                           "'functions' (the older API) is not supported: use 'tools'");
    json_t *suffix = json_object_get(root, "suffix");
    if (suffix && !json_is_null(suffix) &&
        (!json_is_string(suffix) || json_string_length(suffix) > 0))
        return co_oai_fail(e, 400, "suffix", NULL, "'suffix' is not supported");
    long long best_of = 1;
    if (get_int(root, "best_of", 1, INT32_MAX, &best_of, e) < 0) return -1;
    if (best_of != 1)
        return co_oai_fail(e, 400, "best_of", NULL,
                           "'best_of' is %lld; this server generates one choice", best_of);
    return 0;
}

/* The body fed to jansson piece by piece, so that a parse whose result nobody wants any more
 * stops at the next piece. */
typedef struct body_reader {
    const char *p;
    size_t len, off;
    const atomic_bool *stop;
} body_reader;

static size_t read_body(void *buf, size_t cap, void *ud) {
    body_reader *b = ud;
    if (b->stop && atomic_load_explicit(b->stop, memory_order_relaxed)) return (size_t)-1;
    const size_t n = b->len - b->off < cap ? b->len - b->off : cap;
    memcpy(buf, b->p + b->off, n);
    b->off += n;
    return n;
}

static int parse(const char *body, size_t len, co_oai_kind kind, const co_oai_limits *lim,
                 const atomic_bool *stop, co_oai_req *r, co_oai_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->temperature = 1.0;
    r->top_p = 1.0;
    r->repetition_penalty = 1.0;
    r->top_logprobs = -1;
    r->thinking = -1;
    json_error_t jerr;
    body_reader rd = {.p = body, .len = len, .stop = stop};
    r->root = json_load_callback(read_body, &rd, JSON_REJECT_DUPLICATES, &jerr);
    if (!r->root && stop && atomic_load(stop))
        return co_oai_fail(e, 499, NULL, NULL, "the request was withdrawn");
    if (!r->root)
        return co_oai_fail(e, 400, NULL, NULL,
                           "the body is not valid JSON (line %d, column %d: %s)", jerr.line,
                           jerr.column, jerr.text);
    json_t *root = r->root;
    if (!json_is_object(root))
        return co_oai_fail(e, 400, NULL, NULL, "the body must be a JSON object, not %s",
                           type_name(root));
    json_t *model = json_object_get(root, "model");
    if (!model || json_is_null(model))
        return co_oai_fail(e, 400, "model", NULL, "'model' is required");
    if (!json_is_string(model))
        return co_oai_fail(e, 400, "model", NULL, "'model' must be a string, not %s",
                           type_name(model));
    r->model = json_string_value(model);
    if ((kind == CO_OAI_COMPLETION ? parse_prompt(root, lim, r, e)
                                   : parse_messages(root, lim, r, e)))
        return -1;
    if (parse_stream(root, r, e) || parse_sampling(root, r, e)) return -1;
    if (parse_stop(root, r, e) || parse_logprobs(root, r, e) || parse_logit_bias(root, lim, r, e))
        return -1;
    if (get_bool(root, "ignore_eos", &r->ignore_eos, e) ||
        get_bool(root, "return_token_ids", &r->return_token_ids, e))
        return -1;
    if (kind == CO_OAI_CHAT && parse_chat_options(root, r, e)) return -1;
    const co_oai_fmt_in in = {.chat = kind == CO_OAI_CHAT, .n = r->n, .ignore_eos = r->ignore_eos};
    if (co__oai_response_format(root, &in, &r->fmt, e) || co__oai_tools(root, &in, &r->fmt, e))
        return -1;
    return parse_unsupported(root, e);
}

int co_oai_parse_stoppable(const char *body, size_t len, co_oai_kind kind, const co_oai_limits *lim,
                           const atomic_bool *stop, co_oai_req *r, co_oai_error *e) {
    const co_oai_limits def = co_oai_default_limits();
    if (parse(body, len, kind, lim ? lim : &def, stop, r, e) == 0) return 0;
    co_oai_req_free(r);
    return -1;
}

int co_oai_parse(const char *body, size_t len, co_oai_kind kind, const co_oai_limits *lim,
                 co_oai_req *r, co_oai_error *e) {
    return co_oai_parse_stoppable(body, len, kind, lim, NULL, r, e);
}

/* The reasoning effort as one of this file's own strings (the request's goes with its JSON). */
static const char *effort_name(const char *s) {
    static const char *const names[] = {"low", "medium", "high"};
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i])) return names[i];
    return NULL;
}

int co_oai_req_detach(co_oai_req *r, co_oai_error *e) {
    if (!r->root) return 0;
    size_t need = 0;
    for (int i = 0; i < r->n_stop; i++) need += strlen(r->stop[i]) + 1;
    if (need && !(r->stop_store = malloc(need)))
        return co_oai_fail(e, 500, NULL, NULL, "out of memory");
    char *p = r->stop_store;
    for (int i = 0; i < r->n_stop; i++) {
        const size_t n = strlen(r->stop[i]) + 1;
        memcpy(p, r->stop[i], n);
        r->stop[i] = p;
        p += n;
    }
    r->reasoning_effort = effort_name(r->reasoning_effort);
    r->model = NULL;
    r->messages = NULL;
    for (int i = 0; i < r->n_prompts; i++) r->prompts[i].text = NULL;
    json_decref(r->root);
    r->root = NULL;
    return 0;
}

void co_oai_req_free(co_oai_req *r) {
    json_decref(r->root);
    for (int i = 0; i < r->n_prompts; i++) free(r->prompts[i].ids);
    free(r->prompts);
    free(r->logit_bias);
    free(r->stop_store);
    co__oai_fmt_free(&r->fmt);
    memset(r, 0, sizeof *r);
}

/* ---- responses ------------------------------------------------------------------------------ */

const char *co_oai_finish_name(co_finish f) {
    switch (f) {
    case CO_FINISH_STOP:
        return "stop";
    case CO_FINISH_LENGTH:
        return "length";
    case CO_FINISH_ERROR:
        return "error";
    case CO_FINISH_CANCELLED:
        return "cancelled";
    default:
        return NULL;
    }
}

/* A JSON string of bytes that may not be valid UTF-8 (a token can end inside a character):
 * invalid sequences become U+FFFD. */
static json_t *utf8_string(const char *p, size_t n) {
    json_t *ok = json_stringn(p, n);
    if (ok) return ok;
    co_buf b = {0};
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)p[i];
        size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool good = l > 0 && i + l <= n;
        for (size_t k = 1; good && k < l; k++) good = ((unsigned char)p[i + k] >> 6) == 2;
        if (good && l > 1) { /* overlongs, surrogates: jansson's own check */
            json_t *t = json_stringn(p + i, l);
            good = t != NULL;
            json_decref(t);
        }
        if (good) {
            co_buf_add(&b, p + i, l);
            i += l;
        } else {
            co_buf_puts(&b, "\xEF\xBF\xBD");
            i++;
        }
    }
    json_t *s = json_stringn(b.p ? b.p : "", b.len);
    co_buf_free(&b);
    return s ? s : json_string("");
}

static json_t *token_string(const co_oai_meta *m, int32_t tok, co_buf *scratch) {
    co_buf_clear(scratch);
    if (m->token_name)
        m->token_name(m->token_ud, tok, scratch);
    else
        co_buf_printf(scratch, "token_id:%d", tok);
    return utf8_string(scratch->p ? scratch->p : "", scratch->len);
}

static json_t *byte_array(const co_buf *b) {
    json_t *a = json_array();
    for (size_t i = 0; i < b->len; i++)
        json_array_append_new(a, json_integer((unsigned char)b->p[i]));
    return a;
}

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}]} */
static json_t *chat_logprobs(const co_oai_meta *m, const co_oai_piece *p) {
    if (!p->logprobs) return json_null();
    co_buf s = {0};
    json_t *content = json_array();
    for (int64_t i = 0; i < p->n_tokens; i++) {
        const co_logprob *lp = &p->logprobs[i];
        json_t *top = json_array();
        for (int k = 0; k < lp->n_top; k++) {
            json_t *name = token_string(m, lp->top_id[k], &s);
            json_array_append_new(top, json_pack("{s:o, s:f, s:o}", "token", name, "logprob",
                                                 (double)lp->top_lp[k], "bytes", byte_array(&s)));
        }
        json_t *name = token_string(m, lp->token, &s);
        json_array_append_new(content, json_pack("{s:o, s:f, s:o, s:o}", "token", name, "logprob",
                                                 (double)lp->logprob, "bytes", byte_array(&s),
                                                 "top_logprobs", top));
    }
    co_buf_free(&s);
    return json_pack("{s:o}", "content", content);
}

/* completions: {tokens, token_logprobs, top_logprobs: [{tok: lp}], text_offset} */
static json_t *completion_logprobs(const co_oai_meta *m, const co_oai_piece *p) {
    if (!p->logprobs) return json_null();
    co_buf s = {0};
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = 0;
    for (int64_t i = 0; i < p->n_tokens; i++) {
        const co_logprob *lp = &p->logprobs[i];
        json_array_append_new(tokens, token_string(m, lp->token, &s));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += s.len;
        json_array_append_new(lps, json_real(lp->logprob));
        json_t *top = json_object();
        for (int k = 0; k < lp->n_top; k++) {
            json_t *name = token_string(m, lp->top_id[k], &s);
            json_object_set_new(top, json_string_value(name), json_real(lp->top_lp[k]));
            json_decref(name);
        }
        json_array_append_new(tops, top);
    }
    co_buf_free(&s);
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", lps,
                     "top_logprobs", tops, "text_offset", offs);
}

static json_t *token_ids(const co_oai_piece *p) {
    json_t *a = json_array();
    for (int64_t i = 0; i < p->n_tokens; i++) json_array_append_new(a, json_integer(p->tokens[i]));
    return a;
}

static json_t *finish_json(co_finish f) {
    const char *n = co_oai_finish_name(f);
    return n ? json_string(n) : json_null();
}

static json_t *choice(co_oai_kind kind, const co_oai_meta *m, const co_oai_piece *p, bool chunk) {
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(p->index));
    if (kind == CO_OAI_COMPLETION) {
        json_object_set_new(c, "text", utf8_string(p->content ? p->content : "", p->content_len));
        json_object_set_new(c, "logprobs", completion_logprobs(m, p));
    } else {
        json_t *msg = json_object();
        if (!chunk || p->first) json_object_set_new(msg, "role", json_string("assistant"));
        if (!chunk && p->tool_calls && !p->content_len) /* OpenAI: a call's content is null */
            json_object_set_new(msg, "content", json_null());
        else if (!chunk || p->content_len)
            json_object_set_new(msg, "content",
                                utf8_string(p->content ? p->content : "", p->content_len));
        if (p->tool_calls) json_object_set(msg, "tool_calls", p->tool_calls);
        if (p->reasoning && (!chunk || p->reasoning_len))
            json_object_set_new(msg, "reasoning_content",
                                utf8_string(p->reasoning, p->reasoning_len));
        json_object_set_new(c, chunk ? "delta" : "message", msg);
        json_object_set_new(c, "logprobs", chat_logprobs(m, p));
    }
    json_object_set_new(c, "finish_reason",
                        p->called && p->finish == CO_FINISH_STOP ? json_string("tool_calls")
                                                                 : finish_json(p->finish));
    if (m->return_token_ids) json_object_set_new(c, "token_ids", token_ids(p));
    return c;
}

static json_t *envelope(co_oai_kind kind, const co_oai_meta *m, bool chunk) {
    const char *object = kind == CO_OAI_COMPLETION ? "text_completion"
                         : chunk                   ? "chat.completion.chunk"
                                                   : "chat.completion";
    return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", m->id, "object", object, "created",
                     (json_int_t)m->created, "model", m->model, "system_fingerprint", "moewire");
}

/* OpenAI's usage (cached: prompt tokens restored from the prompt cache, OpenAI's
 * prompt_tokens_details), and where experts were skipped (co_oai_meta), moewire's extension:
 * clients that do not know it ignore it. */
static json_t *usage(const co_oai_meta *m, int64_t prompt, int64_t completion) {
    json_t *u = json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)prompt,
                          "completion_tokens", (json_int_t)completion, "total_tokens",
                          (json_int_t)(prompt + completion), "prompt_tokens_details",
                          "cached_tokens", (json_int_t)m->cached_tokens);
    if (u && m->skipped_assignments > 0)
        json_object_set_new(
            u, "moewire",
            json_pack("{s:I}", "skipped_assignments", (json_int_t)m->skipped_assignments));
    return u;
}

static void dump(json_t *o, co_buf *out) {
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (s)
        co_buf_puts(out, s);
    else
        out->failed = true;
    free(s);
    json_decref(o);
}

void co_oai_response(co_oai_kind kind, const co_oai_meta *m, const co_oai_piece *p, int n,
                     int64_t prompt_tokens, int64_t completion_tokens, co_buf *out) {
    json_t *o = envelope(kind, m, false);
    json_t *choices = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(choices, choice(kind, m, &p[i], false));
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage(m, prompt_tokens, completion_tokens));
    dump(o, out);
}

void co_oai_chunk(co_oai_kind kind, const co_oai_meta *m, const co_oai_piece *p, co_buf *out) {
    json_t *o = envelope(kind, m, true);
    json_t *choices = json_array();
    json_array_append_new(choices, choice(kind, m, p, true));
    json_object_set_new(o, "choices", choices);
    dump(o, out);
}

void co_oai_usage_chunk(co_oai_kind kind, const co_oai_meta *m, int64_t prompt_tokens,
                        int64_t completion_tokens, co_buf *out) {
    json_t *o = envelope(kind, m, true);
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", usage(m, prompt_tokens, completion_tokens));
    dump(o, out);
}
