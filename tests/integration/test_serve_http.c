/* tests/integration/test_serve_http.c — `coordinator serve` over raw sockets on gpt-oss-tiny:
 * greedy completions equal `coordinator generate`, /tokenize, /detokenize and /props, n choices
 * and the prompt cache's cached_tokens, streaming
 * (chunked SSE ending in [DONE]), keep-alive and pipelining, malformed HTTP (bad request lines,
 * huge heads, oversized bodies, slow clients within and past the deadline, versions other than 1.x,
 * HTTP/1.1 without Host, target bytes that are not ASCII; each counted on /metrics) and malformed
 * or invalid JSON get 4xx with OpenAI's error shape while the server keeps serving; an
 * absolute-form target is served; HEAD, OPTIONS and CORS for browser pages (the default policy and
 * a list); API keys; a list of prompts answered as a choice each; a client that disconnects frees
 * its slot; a full server answers 503 with Retry-After; SIGTERM lets an in-flight stream finish and
 * exits 0. */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/mwt_http.h"

#define MODEL "llamacpp/gpt-oss-tiny/model.gguf"

static mwt_server srv;
static mwt_server other; /* a test's own server; the teardown stops it should the test fail */

static int setup(void **st) {
    (void)st;
    static const char *const extra[] = {"--threads",
                                        "2",
                                        "--max-seqs",
                                        "3",
                                        "--max-queue",
                                        "1",
                                        "--ctx",
                                        "8192",
                                        "--max-body-bytes",
                                        "65536",
                                        "--request-timeout-ms",
                                        "1500",
                                        "--grace-ms",
                                        "20000",
                                        NULL};
    return mwt_serve_start(&srv, mwt_fixture(MODEL), extra, 120000);
}

static int teardown(void **st) {
    (void)st;
    mwt_serve_stop(&other, 30000);
    return mwt_serve_stop(&srv, 30000) == 0 ? 0 : -1;
}

static void post(const char *path, const char *body, mwt_resp *r) {
    assert_int_equal(mwt_http_request(srv.port, "POST", path, body, r), 0);
}

static void expect_error(const char *body, int status, const char *param, const char *needle) {
    mwt_resp r;
    post("/v1/completions", body, &r);
    if (r.status != status) fail_msg("%s -> %d %s", body, r.status, r.body);
    json_error_t je;
    json_t *j = json_loads(r.body, 0, &je);
    assert_non_null(j);
    json_t *e = json_object_get(j, "error");
    assert_true(json_is_string(json_object_get(e, "message")));
    assert_true(json_is_string(json_object_get(e, "type")));
    if (param) assert_string_equal(json_string_value(json_object_get(e, "param")), param);
    if (needle && !strstr(json_string_value(json_object_get(e, "message")), needle))
        fail_msg("'%s' not in '%s'", needle, json_string_value(json_object_get(e, "message")));
    json_decref(j);
    mwt_resp_free(&r);
}

static void health_ok(void) {
    mwt_resp r;
    assert_int_equal(mwt_http_request(srv.port, "GET", "/health", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
}

/* "tokens: 1 2 3" of coordinator generate */
static int generate_ref(const char *ids, int n, int32_t *out) {
    char nb[16];
    snprintf(nb, sizeof nb, "%d", n);
    char *argv[] = {(char *)mwt_bin("coordinator"),
                    "generate",
                    "--model",
                    (char *)mwt_fixture(MODEL),
                    "--tokens",
                    (char *)ids,
                    "--max-tokens",
                    nb,
                    "--threads",
                    "2",
                    NULL};
    char *out_s = NULL;
    int rc = mwt_run(argv, &out_s, NULL, 120000);
    assert_int_equal(rc, 0);
    int k = 0;
    char *p = strstr(out_s, "tokens:");
    assert_non_null(p);
    p += 7;
    for (char *end; k < n; k++, p = end) {
        out[k] = (int32_t)strtol(p, &end, 10);
        if (end == p) break;
    }
    free(out_s);
    return k;
}

static void test_greedy_equals_generate(void **st) {
    (void)st;
    int32_t ref[12];
    assert_int_equal(generate_ref("5,17,300,2,9,44", 12, ref), 12);
    mwt_resp r;
    post("/v1/completions",
         "{\"model\":\"model\",\"prompt\":[5,17,300,2,9,44],\"max_tokens\":12,\"temperature\":0,"
         "\"return_token_ids\":true}",
         &r);
    assert_int_equal(r.status, 200);
    json_t *j = json_loads(r.body, 0, NULL);
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *ids = json_object_get(c, "token_ids");
    assert_int_equal(json_array_size(ids), 12);
    for (int i = 0; i < 12; i++)
        assert_int_equal(json_integer_value(json_array_get(ids, i)), ref[i]);
    assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "length");
    json_t *u = json_object_get(j, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), 6);
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), 12);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 18);
    json_decref(j);
    mwt_resp_free(&r);
    /* the same tokens streamed, split over chunks */
    post("/v1/completions",
         "{\"model\":\"model\",\"prompt\":[5,17,300,2,9,44],\"max_tokens\":12,\"temperature\":0,"
         "\"return_token_ids\":true,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
         &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(mwt_resp_header(&r, "Content-Type"), "text/event-stream"));
    int got = 0;
    bool usage = false, done = false;
    for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
        assert_true(!strncmp(line, "data: ", 6));
        if (!strcmp(line + 6, "[DONE]")) {
            done = true;
            continue;
        }
        json_t *ch = json_loads(line + 6, 0, NULL);
        assert_non_null(ch);
        json_t *cs = json_object_get(ch, "choices");
        if (json_array_size(cs) == 0) {
            usage = json_integer_value(
                        json_object_get(json_object_get(ch, "usage"), "completion_tokens")) == 12;
        } else {
            json_t *t = json_object_get(json_array_get(cs, 0), "token_ids");
            for (size_t i = 0; i < json_array_size(t); i++)
                assert_int_equal(json_integer_value(json_array_get(t, i)), ref[got++]);
        }
        json_decref(ch);
    }
    assert_int_equal(got, 12);
    assert_true(usage && done);
    mwt_resp_free(&r);
}

static json_t *completion(const char *body) {
    mwt_resp r;
    post("/v1/completions", body, &r);
    if (r.status != 200) fail_msg("%s -> %d %s", body, r.status, r.body);
    json_t *j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    mwt_resp_free(&r);
    return j;
}

static const char *choice_text(json_t *j) {
    return json_string_value(
        json_object_get(json_array_get(json_object_get(j, "choices"), 0), "text"));
}

static int64_t token_id(json_t *j, size_t i) {
    return json_integer_value(json_array_get(
        json_object_get(json_array_get(json_object_get(j, "choices"), 0), "token_ids"), i));
}

/* logit_bias at temperature 0: -100 on the greedy token makes another win, +100 forces a token
 * at every step; biases of 0 change nothing. */
static void test_logit_bias(void **st) {
    (void)st;
    static const char fmt[] = "{\"model\":\"model\",\"prompt\":[5,17,300,2,9,44],\"max_tokens\":6,"
                              "\"temperature\":0,\"return_token_ids\":true,\"ignore_eos\":true,"
                              "\"logit_bias\":{%s}}";
    char body[512], bias[64];
    snprintf(body, sizeof body, fmt, "");
    json_t *plain = completion(body);
    const int64_t first = token_id(plain, 0);
    snprintf(bias, sizeof bias, "\"%lld\":-100", (long long)first);
    snprintf(body, sizeof body, fmt, bias);
    json_t *banned = completion(body);
    assert_true(token_id(banned, 0) != first);
    snprintf(body, sizeof body, fmt, "\"77\":100");
    json_t *forced = completion(body);
    for (size_t i = 0; i < 6; i++) assert_int_equal(token_id(forced, i), 77);
    snprintf(bias, sizeof bias, "\"%lld\":0,\"77\":0", (long long)first);
    snprintf(body, sizeof body, fmt, bias);
    json_t *zero = completion(body);
    for (size_t i = 0; i < 6; i++) assert_int_equal(token_id(zero, i), token_id(plain, i));
    json_decref(plain);
    json_decref(banned);
    json_decref(forced);
    json_decref(zero);
}

/* The sampling extensions reach the sampler: top_k 1 and min_p 1 sample greedily at any
 * temperature; penalties change a greedy reply (a random model's greedy reply repeats itself). */
static void test_sampling_options(void **st) {
    (void)st;
    static const char fmt[] = "{\"model\":\"model\",\"prompt\":[5,17,300,2,9,44],\"max_tokens\":24,"
                              "\"return_token_ids\":true,\"ignore_eos\":true,%s}";
    char body[512];
    snprintf(body, sizeof body, fmt, "\"temperature\":0");
    json_t *plain = completion(body);
    snprintf(body, sizeof body, fmt, "\"temperature\":1.5,\"seed\":3,\"top_k\":1");
    json_t *k1 = completion(body);
    snprintf(body, sizeof body, fmt, "\"temperature\":2,\"seed\":4,\"min_p\":1");
    json_t *p1 = completion(body);
    snprintf(body, sizeof body, fmt, "\"temperature\":1.5,\"seed\":3");
    json_t *free_run = completion(body);
    snprintf(body, sizeof body, fmt,
             "\"temperature\":0,\"frequency_penalty\":1.5,\"presence_penalty\":1,"
             "\"repetition_penalty\":1.3");
    json_t *pen = completion(body);
    /* the accepted forms of what is otherwise refused, and fields a server may ignore */
    snprintf(body, sizeof body, fmt,
             "\"temperature\":0,\"response_format\":{\"type\":\"text\"},\"best_of\":1,"
             "\"suffix\":\"\",\"tools\":[],\"user\":\"u-1\",\"metadata\":{\"k\":\"v\"}");
    json_t *same = completion(body);
    for (size_t i = 0; i < 24; i++) assert_int_equal(token_id(same, i), token_id(plain, i));
    json_decref(same);
    int same_k1 = 0, same_p1 = 0, same_free = 0, same_pen = 0;
    for (size_t i = 0; i < 24; i++) {
        same_k1 += token_id(k1, i) == token_id(plain, i);
        same_p1 += token_id(p1, i) == token_id(plain, i);
        same_free += token_id(free_run, i) == token_id(plain, i);
        same_pen += token_id(pen, i) == token_id(plain, i);
    }
    assert_int_equal(same_k1, 24);
    assert_int_equal(same_p1, 24);
    assert_true(same_free < 24); /* without them that temperature leaves the greedy path */
    assert_true(same_pen < 24);
    json_decref(plain);
    json_decref(k1);
    json_decref(p1);
    json_decref(free_run);
    json_decref(pen);
}

/* Text prompts through the model's tokenizer; streamed text = whole text; a stop string that
 * spans two tokens ends the text before it. */
static void test_text_and_stop_strings(void **st) {
    (void)st;
    json_t *a = completion("{\"model\":\"model\",\"prompt\":\"Hello world\",\"max_tokens\":16,"
                           "\"temperature\":0,\"logprobs\":0,\"ignore_eos\":true}");
    const char *text = choice_text(a);
    json_t *lp = json_object_get(json_array_get(json_object_get(a, "choices"), 0), "logprobs");
    json_t *toks = json_object_get(lp, "tokens"), *offs = json_object_get(lp, "text_offset");
    assert_int_equal(json_array_size(toks), 16);
    /* the streamed pieces add up to the same text */
    mwt_resp r;
    post("/v1/completions",
         "{\"model\":\"model\",\"prompt\":\"Hello world\",\"max_tokens\":16,\"temperature\":0,"
         "\"stream\":true,\"ignore_eos\":true}",
         &r);
    char joined[4096] = "";
    for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: {", 7)) continue;
        json_t *ch = json_loads(line + 6, 0, NULL);
        const char *t = choice_text(ch);
        if (t) strncat(joined, t, sizeof joined - strlen(joined) - 1);
        json_decref(ch);
    }
    mwt_resp_free(&r);
    assert_string_equal(joined, text);
    /* a stop string made of the end of one token and the start of the next */
    size_t k = 1;
    while (k < 16 && (strlen(json_string_value(json_array_get(toks, k - 1))) == 0 ||
                      strlen(json_string_value(json_array_get(toks, k))) == 0))
        k++;
    assert_true(k < 16);
    size_t cut = (size_t)json_integer_value(json_array_get(offs, k));
    char stop[3] = {text[cut - 1], text[cut], 0};
    if ((stop[0] & 0x80) || (stop[1] & 0x80)) { /* keep the test to whole ASCII characters */
        json_decref(a);
        skip();
    }
    json_t *stop_json = json_string(stop);
    char *stop_s = json_dumps(stop_json, JSON_ENCODE_ANY);
    char body[512];
    snprintf(body, sizeof body,
             "{\"model\":\"model\",\"prompt\":\"Hello world\",\"max_tokens\":16,\"temperature\":0,"
             "\"ignore_eos\":true,\"stop\":[%s]}",
             stop_s);
    json_t *b = completion(body);
    const char *first = strstr(text, stop);
    assert_non_null(first);
    assert_int_equal(strlen(choice_text(b)), (size_t)(first - text));
    assert_memory_equal(choice_text(b), text, (size_t)(first - text));
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(b, "choices"), 0), "finish_reason")),
                        "stop");
    free(stop_s);
    json_decref(stop_json);
    json_decref(a);
    json_decref(b);
}

/* /tokenize, /detokenize and /props in llama-server's shapes: the ids of a text are those its
 * completion runs on, the pieces and the decoded ids give the text back, bad ids are 400s. */
static void test_tokenize_props(void **st) {
    (void)st;
    mwt_resp r;
    post("/tokenize", "{\"content\":\"Hello world\",\"add_special\":true}", &r);
    assert_int_equal(r.status, 200);
    json_t *t = json_loads(r.body, 0, NULL);
    mwt_resp_free(&r);
    json_t *ids = json_object_get(t, "tokens");
    assert_true(json_array_size(ids) > 0);
    json_t *a = completion("{\"model\":\"model\",\"prompt\":\"Hello world\",\"max_tokens\":1}");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(a, "usage"), "prompt_tokens")),
        (json_int_t)json_array_size(ids));
    json_decref(a);
    /* pieces, without BOS: they join to the text */
    post("/tokenize", "{\"content\":\"Hello world\",\"with_pieces\":true}", &r);
    assert_int_equal(r.status, 200);
    json_t *p = json_loads(r.body, 0, NULL);
    mwt_resp_free(&r);
    char joined[256] = "";
    json_t *plain = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(p, "tokens"), i, v) {
        assert_true(json_is_string(json_object_get(v, "piece")));
        strncat(joined, json_string_value(json_object_get(v, "piece")),
                sizeof joined - strlen(joined) - 1);
        json_array_append(plain, json_object_get(v, "id"));
    }
    assert_string_equal(joined, "Hello world");
    json_t *req = json_pack("{s:O}", "tokens", plain);
    char *body = json_dumps(req, 0);
    post("/detokenize", body, &r);
    assert_int_equal(r.status, 200);
    json_t *d = json_loads(r.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(d, "content")), "Hello world");
    mwt_resp_free(&r);
    free(body);
    json_decref(req);
    json_decref(plain);
    json_decref(d);
    json_decref(p);
    json_decref(t);
    /* untrusted ids and fields */
    const char *bad[] = {"{\"tokens\":[-1]}",
                         "{\"tokens\":[1, 99999999]}",
                         "{\"tokens\":\"x\"}",
                         "{\"tokens\":[1.5]}",
                         "[1]",
                         "{"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        post("/detokenize", bad[k], &r);
        assert_int_equal(r.status, 400);
        mwt_resp_free(&r);
    }
    post("/tokenize", "{\"content\":7}", &r);
    assert_int_equal(r.status, 400);
    mwt_resp_free(&r);
    post("/tokenize", "{\"content\":\"x\",\"with_pieces\":1}", &r);
    assert_int_equal(r.status, 400);
    mwt_resp_free(&r);
    assert_int_equal(mwt_http_request(srv.port, "GET", "/tokenize", NULL, &r), 0);
    assert_int_equal(r.status, 405);
    mwt_resp_free(&r);
    /* /props */
    assert_int_equal(mwt_http_request(srv.port, "GET", "/props", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *pr = json_loads(r.body, 0, NULL);
    mwt_resp_free(&r);
    assert_non_null(pr);
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(pr, "default_generation_settings"), "n_ctx")),
                     8192);
    assert_int_equal(json_integer_value(json_object_get(pr, "total_slots")), 3);
    assert_true(json_is_string(json_object_get(pr, "chat_template")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(pr, "model"), "arch")),
                        "gpt-oss");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(pr, "limits"), "max_n")),
                     16);
    json_decref(pr);
}

static json_t *choice_at(json_t *j, size_t i) {
    return json_array_get(json_object_get(j, "choices"), i);
}

static json_int_t usage_of(json_t *j, const char *k) {
    return json_integer_value(json_object_get(json_object_get(j, "usage"), k));
}

/* n choices share the prompt's prefill: choice 0 is the request of one choice with the same seed,
 * the others streams of their own; the prompt is counted once; a stream's chunks carry each
 * choice's index; more choices than slots is a 400. A repeated prompt reports the positions the
 * prompt cache gave it, and its answer is the first one's. */
static void test_choices_and_cache(void **st) {
    (void)st;
    const char *ids = "[5,9,17,33,65,129,257,3,6,12,24,48,96,192,384,7,14,28,56,112,224,448,"
                      "11,22,44,88,176,352,13,26,52,104,208,416,15,30,60,120,240,480]";
    char body[1024];
    snprintf(body, sizeof body,
             "{\"model\":\"model\",\"prompt\":%s,\"max_tokens\":12,\"temperature\":1,"
             "\"seed\":7,\"ignore_eos\":true,\"logprobs\":0}",
             ids);
    json_t *one = completion(body);
    assert_int_equal(usage_of(one, "prompt_tokens"), 40);
    snprintf(body, sizeof body,
             "{\"model\":\"model\",\"prompt\":%s,\"max_tokens\":12,\"temperature\":1,"
             "\"seed\":7,\"ignore_eos\":true,\"n\":3,\"logprobs\":0}",
             ids);
    json_t *three = completion(body);
    assert_int_equal(json_array_size(json_object_get(three, "choices")), 3);
    assert_int_equal(usage_of(three, "prompt_tokens"), 40);
    assert_int_equal(usage_of(three, "completion_tokens"), 36);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(json_integer_value(json_object_get(choice_at(three, i), "index")), i);
    json_t *t0 = json_object_get(json_object_get(choice_at(one, 0), "logprobs"), "tokens");
    json_t *c0 = json_object_get(json_object_get(choice_at(three, 0), "logprobs"), "tokens");
    json_t *c1 = json_object_get(json_object_get(choice_at(three, 1), "logprobs"), "tokens");
    assert_true(json_equal(t0, c0));
    assert_false(json_equal(c0, c1));
    /* the same prompt again: the cache's blocks, and the same answer */
    json_t *again = completion(body);
    json_int_t cached = json_integer_value(
        json_object_get(json_object_get(json_object_get(again, "usage"), "prompt_tokens_details"),
                        "cached_tokens"));
    assert_int_equal(cached, 32);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_object_get(choice_at(again, i), "text")),
                            json_string_value(json_object_get(choice_at(three, i), "text")));
    json_decref(again);
    /* streamed: every chunk names its choice, each choice ends once */
    snprintf(body, sizeof body,
             "{\"model\":\"model\",\"prompt\":%s,\"max_tokens\":12,\"temperature\":1,"
             "\"seed\":7,\"ignore_eos\":true,\"n\":3,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}",
             ids);
    mwt_resp r;
    post("/v1/completions", body, &r);
    assert_int_equal(r.status, 200);
    char text[3][512] = {"", "", ""};
    int ends[3] = {0};
    json_int_t prompt_usage = -1;
    for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: {", 7)) continue;
        json_t *ch = json_loads(line + 6, 0, NULL);
        json_t *c = choice_at(ch, 0);
        if (c) {
            json_int_t i = json_integer_value(json_object_get(c, "index"));
            assert_true(i >= 0 && i < 3);
            const char *t = json_string_value(json_object_get(c, "text"));
            if (t) strncat(text[i], t, sizeof text[i] - strlen(text[i]) - 1);
            if (json_is_string(json_object_get(c, "finish_reason"))) ends[i]++;
        } else if (json_object_get(ch, "usage")) {
            prompt_usage = usage_of(ch, "prompt_tokens");
        }
        json_decref(ch);
    }
    mwt_resp_free(&r);
    assert_int_equal(prompt_usage, 40);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(ends[i], 1);
        assert_string_equal(text[i],
                            json_string_value(json_object_get(choice_at(three, i), "text")));
    }
    json_decref(one);
    json_decref(three);
    /* four choices need four slots at once: this server has three */
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"n\":4}", 400, NULL, "slots");
}

static void test_keepalive_pipelining(void **st) {
    (void)st;
    int fd = mwt_http_connect(srv.port);
    assert_true(fd >= 0);
    const char *body = "{\"model\":\"model\",\"prompt\":[1,2],\"max_tokens\":3,\"temperature\":0}";
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s"
                     "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                     strlen(body), body);
    assert_int_equal(mwt_http_send(fd, req, (size_t)n), 0);
    mwt_resp r;
    assert_int_equal(mwt_http_read(fd, &r, 60000), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"object\":\"list\""));
    assert_false(r.closed);
    mwt_resp_free(&r);
    assert_int_equal(mwt_http_read(fd, &r, 60000), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "text_completion"));
    mwt_resp_free(&r);
    assert_int_equal(mwt_http_read(fd, &r, 60000), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"ok\""));
    mwt_resp_free(&r);
    /* an offer to upgrade (curl --http2's h2c, a WebSocket handshake) is answered in HTTP/1.1 */
    const char *h2c = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n";
    assert_int_equal(mwt_http_send(fd, h2c, strlen(h2c)), 0);
    assert_int_equal(mwt_http_read(fd, &r, 60000), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"ok\""));
    mwt_resp_free(&r);
    char ws[512];
    n = snprintf(ws, sizeof ws,
                 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\n"
                 "Upgrade: websocket\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(body), body);
    assert_int_equal(mwt_http_send(fd, ws, (size_t)n), 0);
    assert_int_equal(mwt_http_read(fd, &r, 60000), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "text_completion"));
    mwt_resp_free(&r);
    /* the connection stays open for more */
    const char *again = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(mwt_http_send(fd, again, strlen(again)), 0);
    assert_int_equal(mwt_http_read(fd, &r, 60000), 0);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
    close(fd);
}

/* Raw bytes → the status of the answer, and the connection closed after it. */
static void raw_expect(const char *data, size_t len, int status) {
    int fd = mwt_http_connect(srv.port);
    assert_true(fd >= 0);
    mwt_http_send(fd, data, len);
    mwt_resp r;
    int rc = mwt_http_read(fd, &r, 10000);
    if (rc || r.status != status) fail_msg("expected %d, got %d for %.60s", status, r.status, data);
    assert_true(r.closed || mwt_http_eof(fd, 5000));
    mwt_resp_free(&r);
    close(fd);
}

static void raw_str_expect(const char *data, int status) {
    raw_expect(data, strlen(data), status);
}

static void test_malformed_http(void **st) {
    (void)st;
    const char *bad[] = {
        "GARBAGE\r\n\r\n",
        "GET\r\n\r\n",
        "GET / HTTP/9.9\r\n\r\n",
        "GET /health HTTP/1.1\r\nBad Header Line\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nContent-Length: 12\r\nContent-Length: 13\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int fd = mwt_http_connect(srv.port);
        assert_true(fd >= 0);
        mwt_http_send(fd, bad[i], strlen(bad[i]));
        mwt_resp r;
        int rc = mwt_http_read(fd, &r, 10000);
        if (rc || r.status < 400 || r.status >= 600) fail_msg("case %zu: status %d", i, r.status);
        assert_true(r.closed || mwt_http_eof(fd, 5000));
        mwt_resp_free(&r);
        close(fd);
    }
    /* a head larger than the limit */
    size_t big = 40000;
    char *h = malloc(big + 100);
    int n = snprintf(h, 100, "GET /health HTTP/1.1\r\nX-Big: ");
    memset(h + n, 'a', big);
    memcpy(h + n + big, "\r\n\r\n", 5);
    raw_expect(h, strlen(h), 431);
    /* a request target larger than the limit */
    n = snprintf(h, 100, "GET /");
    memset(h + n, 'b', big);
    memcpy(h + n + big, " HTTP/1.1\r\n\r\n", 14);
    raw_expect(h, strlen(h), 414);
    free(h);
    /* an announced body over --max-body-bytes */
    const char *huge = "POST /v1/completions HTTP/1.1\r\nContent-Length: 100000\r\n\r\n{";
    raw_expect(huge, strlen(huge), 413);
    /* a chunked body growing over it */
    char *chunked = malloc(120000);
    n = sprintf(chunked,
                "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 20; i++) {
        n += sprintf(chunked + n, "1000\r\n");
        memset(chunked + n, ' ', 4096);
        n += 4096;
        n += sprintf(chunked + n, "\r\n");
    }
    raw_expect(chunked, (size_t)n, 413);
    free(chunked);
    health_ok();
}

/* One request on an open connection (extra: header lines, each ending in "\r\n") and its answer
 * (the head only for HEAD). */
static void ask(int fd, const char *method, const char *path, const char *extra, const char *body,
                mwt_resp *r) {
    char req[2048];
    int n =
        snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %zu\r\n\r\n%s",
                 method, path, extra, body ? strlen(body) : 0, body ? body : "");
    assert_int_equal(mwt_http_send(fd, req, (size_t)n), 0);
    assert_int_equal(
        strcmp(method, "HEAD") ? mwt_http_read(fd, r, 60000) : mwt_http_read_head(fd, r, 60000), 0);
}

static void expect_header(const mwt_resp *r, const char *name, const char *value) {
    const char *v = mwt_resp_header(r, name);
    if (!value) {
        if (v) fail_msg("unexpected %s: %s in\n%s", name, v, r->head);
        return;
    }
    if (!v || strcmp(v, value))
        fail_msg("%s: expected '%s', got '%s' in\n%s", name, value, v, r->head);
}

/* HEAD answers as GET without the body; OPTIONS says what a route takes (204, Allow); with the
 * default --cors-origins (*) every answer to a browser page (Origin) allows it, and a preflight
 * gets the methods, the asked-for headers (echoed when they are header names) and a max age. The
 * connection carries on after each of them. */
static void test_head_options_cors(void **st) {
    (void)st;
    int fd = mwt_http_connect(srv.port);
    assert_true(fd >= 0);
    mwt_resp g, h, r;
    ask(fd, "GET", "/v1/models", "", NULL, &g);
    ask(fd, "HEAD", "/v1/models", "", NULL, &h);
    assert_int_equal(h.status, 200);
    assert_int_equal(h.body_len, 0);
    char len[32];
    snprintf(len, sizeof len, "%zu", g.body_len);
    expect_header(&h, "Content-Length", len);
    expect_header(&h, "Access-Control-Allow-Origin", NULL);
    mwt_resp_free(&g);
    mwt_resp_free(&h);
    ask(fd, "HEAD", "/metrics", "", NULL, &h);
    assert_int_equal(h.status, 200);
    mwt_resp_free(&h);
    ask(fd, "HEAD", "/v1/completions", "", NULL, &h); /* a POST route */
    assert_int_equal(h.status, 405);
    expect_header(&h, "Allow", "POST, OPTIONS");
    mwt_resp_free(&h);
    /* OPTIONS without Origin: what the route takes, nothing about CORS */
    ask(fd, "OPTIONS", "/v1/models", "", NULL, &r);
    assert_int_equal(r.status, 204);
    expect_header(&r, "Allow", "GET, HEAD, OPTIONS");
    expect_header(&r, "Content-Length", NULL);
    expect_header(&r, "Access-Control-Allow-Origin", NULL);
    mwt_resp_free(&r);
    /* a browser's preflight */
    ask(fd, "OPTIONS", "/v1/chat/completions",
        "Origin: http://page.example:8000\r\nAccess-Control-Request-Method: POST\r\n"
        "Access-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n",
        NULL, &r);
    assert_int_equal(r.status, 204);
    expect_header(&r, "Access-Control-Allow-Origin", "*");
    expect_header(&r, "Access-Control-Allow-Methods", "POST, OPTIONS");
    expect_header(&r, "Access-Control-Allow-Headers",
                  "authorization, content-type, x-stainless-os");
    expect_header(&r, "Access-Control-Max-Age", "600");
    mwt_resp_free(&r);
    /* asked-for headers that are not header names are not echoed */
    ask(fd, "OPTIONS", "/v1/completions",
        "Origin: http://page.example\r\nAccess-Control-Request-Method: POST\r\n"
        "Access-Control-Request-Headers: x-a; <b>\r\n",
        NULL, &r);
    assert_int_equal(r.status, 204);
    assert_non_null(strstr(mwt_resp_header(&r, "Access-Control-Allow-Headers"), "Authorization"));
    mwt_resp_free(&r);
    /* answers to a page: whole, streamed, errors */
    const char *body = "{\"model\":\"model\",\"prompt\":[1,2],\"max_tokens\":2}";
    ask(fd, "POST", "/v1/completions", "Origin: http://page.example\r\n", body, &r);
    assert_int_equal(r.status, 200);
    expect_header(&r, "Access-Control-Allow-Origin", "*");
    mwt_resp_free(&r);
    const char *sbody = "{\"model\":\"model\",\"prompt\":[1,2],\"max_tokens\":2,\"stream\":true}";
    ask(fd, "POST", "/v1/completions", "Origin: http://page.example\r\n", sbody, &r);
    assert_int_equal(r.status, 200);
    expect_header(&r, "Access-Control-Allow-Origin", "*");
    assert_non_null(strstr(r.body, "data: [DONE]"));
    mwt_resp_free(&r);
    ask(fd, "POST", "/v1/completions", "Origin: http://page.example\r\n", "{", &r);
    assert_int_equal(r.status, 400);
    expect_header(&r, "Access-Control-Allow-Origin", "*");
    assert_false(r.closed);
    mwt_resp_free(&r);
    ask(fd, "GET", "/health", "", NULL, &r); /* still in step */
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"ok\""));
    mwt_resp_free(&r);
    close(fd);
}

/* --cors-origins with a list: a listed page gets its origin back (and Vary: Origin), another gets
 * no grant and its preflight 403; a malformed list stops serve before it loads anything. */
static void test_cors_origin_list(void **st) {
    (void)st;
    static const char *const extra[] = {"--threads", "1", "--cors-origins",
                                        "https://chat.example.com/, http://localhost:3000", NULL};
    assert_int_equal(mwt_serve_start(&other, mwt_fixture(MODEL), extra, 120000), 0);
    int fd = mwt_http_connect(other.port);
    assert_true(fd >= 0);
    mwt_resp r;
    ask(fd, "GET", "/v1/models", "Origin: https://chat.example.com\r\n", NULL, &r);
    expect_header(&r, "Access-Control-Allow-Origin", "https://chat.example.com");
    expect_header(&r, "Vary", "Origin");
    mwt_resp_free(&r);
    ask(fd, "OPTIONS", "/v1/completions",
        "Origin: http://localhost:3000\r\nAccess-Control-Request-Method: POST\r\n", NULL, &r);
    assert_int_equal(r.status, 204);
    expect_header(&r, "Access-Control-Allow-Origin", "http://localhost:3000");
    mwt_resp_free(&r);
    ask(fd, "GET", "/v1/models", "Origin: http://localhost:3001\r\n", NULL, &r);
    assert_int_equal(r.status, 200);
    expect_header(&r, "Access-Control-Allow-Origin", NULL);
    expect_header(&r, "Vary", "Origin");
    mwt_resp_free(&r);
    ask(fd, "OPTIONS", "/v1/completions",
        "Origin: https://evil.example\r\nAccess-Control-Request-Method: POST\r\n", NULL, &r);
    assert_int_equal(r.status, 403);
    expect_header(&r, "Access-Control-Allow-Origin", NULL);
    assert_non_null(strstr(r.body, "--cors-origins"));
    mwt_resp_free(&r);
    close(fd);
    assert_int_equal(mwt_serve_stop(&other, 30000), 0);
    char *const argv[] = {(char *)mwt_bin("coordinator"),
                          "serve",
                          "--model",
                          (char *)mwt_fixture(MODEL),
                          "--cors-origins",
                          "ftp://x",
                          NULL};
    char *out = NULL, *err = NULL;
    assert_int_not_equal(mwt_run(argv, &out, &err, 60000), 0);
    assert_non_null(strstr(err, "--cors-origins: 'ftp://x'"));
    free(out);
    free(err);
}

/* One GET on a fresh connection with an Authorization header (NULL: none). */
static int get_auth(int port, const char *path, const char *auth, mwt_resp *r) {
    int fd = mwt_http_connect(port);
    assert_true(fd >= 0);
    char extra[1024] = "";
    if (auth) snprintf(extra, sizeof extra, "Authorization: %s\r\n", auth);
    ask(fd, "GET", path, extra, NULL, r);
    close(fd);
    return r->status;
}

static void expect_401(int port, const char *auth, const char *needle) {
    mwt_resp r;
    assert_int_equal(get_auth(port, "/v1/models", auth, &r), 401);
    expect_header(&r, "WWW-Authenticate", "Bearer");
    assert_non_null(strstr(r.body, "\"code\":\"invalid_api_key\""));
    if (!strstr(r.body, needle)) fail_msg("'%s' not in %s", needle, r.body);
    mwt_resp_free(&r);
}

/* API keys: $MOEWIRE_API_KEY alone, or --api-key / --api-key-file (the environment then unused);
 * /v1/ needs "Authorization: Bearer KEY", /health, /metrics and preflights do not; a bad key file
 * stops serve. */
static void test_api_keys(void **st) {
    (void)st;
    static const char *const none[] = {"--threads", "1", NULL};
    setenv("MOEWIRE_API_KEY", "sk-from-env", 1);
    int rc = mwt_serve_start(&other, mwt_fixture(MODEL), none, 120000);
    unsetenv("MOEWIRE_API_KEY");
    assert_int_equal(rc, 0);
    mwt_resp r;
    expect_401(other.port, NULL, "Missing API key");
    expect_401(other.port, "Bearer sk-wrong", "Incorrect API key");
    expect_401(other.port, "Basic c2stZnJvbS1lbnY6", "Incorrect API key");
    expect_401(other.port, "Bearer sk-from-env-and-more", "Incorrect API key");
    char huge[900] = "Bearer ";
    memset(huge + 7, 'k', sizeof huge - 8);
    expect_401(other.port, huge, "Incorrect API key");
    assert_int_equal(get_auth(other.port, "/v1/models", "Bearer sk-from-env", &r), 200);
    mwt_resp_free(&r);
    assert_int_equal(get_auth(other.port, "/v1/models", "bearer   sk-from-env", &r), 200);
    mwt_resp_free(&r);
    assert_int_equal(get_auth(other.port, "/health", NULL, &r), 200);
    mwt_resp_free(&r);
    assert_int_equal(get_auth(other.port, "/metrics", NULL, &r), 200);
    assert_non_null(strstr(r.body, "status=\"401\""));
    mwt_resp_free(&r);
    int fd = mwt_http_connect(other.port);
    ask(fd, "OPTIONS", "/v1/completions",
        "Origin: http://page.example\r\nAccess-Control-Request-Method: POST\r\n"
        "Access-Control-Request-Headers: authorization, content-type\r\n",
        NULL, &r);
    assert_int_equal(r.status, 204);
    mwt_resp_free(&r);
    close(fd);
    assert_int_equal(mwt_serve_stop(&other, 30000), 0);

    static const char *const opt[] = {"--threads", "1", "--api-key", "sk-from-option", NULL};
    setenv("MOEWIRE_API_KEY", "sk-from-env", 1);
    rc = mwt_serve_start(&other, mwt_fixture(MODEL), opt, 120000);
    unsetenv("MOEWIRE_API_KEY");
    assert_int_equal(rc, 0);
    expect_401(other.port, "Bearer sk-from-env", "Incorrect API key");
    assert_int_equal(get_auth(other.port, "/v1/models", "Bearer sk-from-option", &r), 200);
    mwt_resp_free(&r);
    assert_int_equal(mwt_serve_stop(&other, 30000), 0);

    char *dir = mwt_tmpdir("keys");
    char path[4096];
    snprintf(path, sizeof path, "%s/keys", dir);
    assert_int_equal(mwt_write_file(path, "# no key here\n\n", 15), 0);
    char *const argv[] = {(char *)mwt_bin("coordinator"),
                          "serve",
                          "--model",
                          (char *)mwt_fixture(MODEL),
                          "--api-key-file",
                          path,
                          NULL};
    char *out = NULL, *err = NULL;
    assert_int_not_equal(mwt_run(argv, &out, &err, 60000), 0);
    assert_non_null(strstr(err, "no key in it"));
    free(out);
    free(err);
    mwt_rmrf(dir);
    free(dir);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void test_slow_clients(void **st) {
    (void)st;
    /* within the 1.5 s request deadline: byte by byte over ~0.6 s */
    const char *req = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    int fd = mwt_http_connect(srv.port);
    for (size_t i = 0; req[i]; i++) {
        mwt_http_send(fd, req + i, 1);
        if (i % 4 == 0) sleep_ms(40);
    }
    mwt_resp r;
    assert_int_equal(mwt_http_read(fd, &r, 10000), 0);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
    close(fd);
    /* past it: a head that never ends gets 408 and the connection closes */
    fd = mwt_http_connect(srv.port);
    const char *part = "GET /health HTTP/1.1\r\nX-Slow: ";
    mwt_http_send(fd, part, strlen(part));
    for (int i = 0; i < 3; i++) {
        sleep_ms(400);
        mwt_http_send(fd, "a", 1);
    }
    assert_int_equal(mwt_http_read(fd, &r, 10000), 0);
    assert_int_equal(r.status, 408);
    assert_true(r.closed || mwt_http_eof(fd, 5000));
    mwt_resp_free(&r);
    close(fd);
    /* several idle connections hold nothing up */
    int idle[8];
    for (int i = 0; i < 8; i++) idle[i] = mwt_http_connect(srv.port);
    health_ok();
    for (int i = 0; i < 8; i++) close(idle[i]);
}

/* A request body whose prompt is an array of n copies of item (malloc'ed). */
static char *prompt_of(int n, const char *item) {
    const size_t cap = 64 + (size_t)n * (strlen(item) + 1);
    char *b = malloc(cap);
    assert_non_null(b);
    size_t len = (size_t)snprintf(b, cap, "{\"model\":\"model\",\"prompt\":[");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(b + len, cap - len, "%s%s", i ? "," : "", item);
    snprintf(b + len, cap - len, "]}");
    return b;
}

static void test_bad_json(void **st) {
    (void)st;
    expect_error("{\"model\":\"model\",\"prompt\":[1,2", 400, NULL, "not valid JSON");
    expect_error("[1,2,3]", 400, NULL, "JSON object");
    expect_error("", 400, NULL, "JSON");
    expect_error("{\"prompt\":[1]}", 400, "model", "required");
    expect_error("{\"model\":7,\"prompt\":[1]}", 400, "model", "string");
    expect_error("{\"model\":\"model\"}", 400, "prompt", "required");
    expect_error("{\"model\":\"model\",\"prompt\":{}}", 400, "prompt", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1,-2]}", 400, "prompt", "token id");
    expect_error("{\"model\":\"model\",\"prompt\":[1,100000]}", 400, NULL, "vocabulary");
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"max_tokens\":\"8\"}", 400, "max_tokens",
                 "integer");
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"max_tokens\":0}", 400, "max_tokens", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"temperature\":3}", 400, "temperature",
                 NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"top_p\":0}", 400, "top_p", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"top_k\":\"5\"}", 400, "top_k", "integer");
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"top_k\":-2}", 400, "top_k", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"min_p\":1.5}", 400, "min_p", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"presence_penalty\":2.5}", 400,
                 "presence_penalty", "[-2, 2]");
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"frequency_penalty\":true}", 400,
                 "frequency_penalty", "number");
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"repetition_penalty\":0}", 400,
                 "repetition_penalty", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"n\":17}", 400, "n", "[1, 16]");
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"best_of\":3}", 400, "best_of", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"suffix\":\"end\"}", 400, "suffix", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],"
                 "\"response_format\":{\"type\":\"regex\"}}",
                 400, "response_format", "not supported");
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"response_format\":{\"type\":"
                 "\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"oneOf\":[]}}}}",
                 400, "response_format.json_schema.schema", "'oneOf' is not supported");
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"response_format\":\"json\"}", 400,
                 "response_format", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"functions\":[{\"name\":\"f\"}]}", 400,
                 "functions", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"logprobs\":21}", 400, "logprobs", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"stop\":[\"\"]}", 400, "stop", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"stop\":5.5}", 400, "stop", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"stream_options\":{}}", 400,
                 "stream_options", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"seed\":\"x\"}", 400, "seed", NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"model\":\"model\"}", 400, NULL, "JSON");
    expect_error("{\"model\":\"nope\",\"prompt\":[1]}", 404, "model", "does not exist");
    expect_error("{\"model\":\"model\",\"prompt\":\"bad \\udc00 utf-16\"}", 400, NULL, NULL);
    expect_error("{\"model\":\"model\",\"prompt\":[1],\"max_tokens\":8193}", 400, "max_tokens",
                 "context");
    /* logit_bias: an object of decimal token ids to biases in [-100, 100], ids in the vocabulary */
    static const char *const bad_bias[][2] = {{"[1]", "object"},
                                              {"{\"x\":1}", "token id"},
                                              {"{\"01\":1}", "token id"},
                                              {"{\"-1\":1}", "token id"},
                                              {"{\"1.5\":1}", "token id"},
                                              {"{\"99999999999\":1}", "token id"},
                                              {"{\"5\":\"1\"}", "number"},
                                              {"{\"5\":100.5}", "[-100, 100]"},
                                              {"{\"5\":-101}", "[-100, 100]"},
                                              {"{\"100000\":1}", "vocabulary"}};
    for (size_t i = 0; i < sizeof bad_bias / sizeof bad_bias[0]; i++) {
        char b[256];
        snprintf(b, sizeof b, "{\"model\":\"model\",\"prompt\":[1],\"logit_bias\":%s}",
                 bad_bias[i][0]);
        expect_error(b, 400, "logit_bias", bad_bias[i][1]);
    }
    /* a prompt longer than the context */
    char *p = prompt_of(8200, "7");
    expect_error(p, 400, "prompt", "context");
    free(p);
    /* routes and methods */
    mwt_resp r;
    assert_int_equal(mwt_http_request(srv.port, "GET", "/v1/completions", NULL, &r), 0);
    assert_int_equal(r.status, 405);
    assert_non_null(mwt_resp_header(&r, "Allow"));
    mwt_resp_free(&r);
    assert_int_equal(mwt_http_request(srv.port, "GET", "/nowhere", NULL, &r), 0);
    assert_int_equal(r.status, 404);
    mwt_resp_free(&r);
    assert_int_equal(mwt_http_request(srv.port, "GET", "/v1/models/model", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
    health_ok();
}

/* Reads the first SSE event of a streamed request started on fd. */
static int start_stream(int max_tokens) {
    int fd = mwt_http_connect(srv.port);
    char body[256], req[512];
    snprintf(body, sizeof body,
             "{\"model\":\"model\",\"prompt\":[3,4,5],\"max_tokens\":%d,\"stream\":true,"
             "\"ignore_eos\":true,\"return_token_ids\":true}",
             max_tokens);
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    mwt_http_send(fd, req, (size_t)n);
    char buf[4096];
    size_t got = 0;
    while (got < sizeof buf - 1) {
        ssize_t k = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (k <= 0) break;
        got += (size_t)k;
        buf[got] = 0;
        if (strstr(buf, "\r\n\r\n") && strstr(buf, "data: ")) break;
        if (strstr(buf, "HTTP/1.1 5")) break;
    }
    buf[got] = 0;
    return strstr(buf, "HTTP/1.1 200") ? fd : (close(fd), -1);
}

static double metric(const char *name) {
    mwt_resp r;
    assert_int_equal(mwt_http_request(srv.port, "GET", "/metrics", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    double v = -1;
    char key[256];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(r.body, key);
    if (p) v = strtod(p + strlen(key), NULL);
    mwt_resp_free(&r);
    return v;
}

static void test_disconnect_and_full(void **st) {
    (void)st;
    /* three slots and one queue place: the fifth request is refused with 503 + Retry-After */
    int fds[4];
    for (int i = 0; i < 3; i++) {
        fds[i] = start_stream(8000);
        assert_true(fds[i] >= 0);
    }
    assert_int_equal(metric("moewire_active_sequences"), 3);
    /* the fourth waits in the queue (its head comes only once admitted) */
    fds[3] = mwt_http_connect(srv.port);
    const char *body = "{\"model\":\"model\",\"prompt\":[3],\"max_tokens\":4}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    mwt_http_send(fds[3], req, (size_t)n);
    for (int i = 0; i < 200 && metric("moewire_queue_depth") < 1; i++) sleep_ms(20);
    assert_int_equal(metric("moewire_queue_depth"), 1);
    mwt_resp r;
    post("/v1/completions", body, &r);
    assert_int_equal(r.status, 503);
    assert_non_null(mwt_resp_header(&r, "Retry-After"));
    assert_non_null(strstr(r.body, "capacity"));
    mwt_resp_free(&r);
    /* clients that go away free their slots: the queued one runs */
    for (int i = 0; i < 3; i++) close(fds[i]);
    assert_int_equal(mwt_http_read(fds[3], &r, 60000), 0);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
    close(fds[3]);
    for (int i = 0; i < 500 && metric("moewire_active_sequences") > 0; i++) sleep_ms(20);
    assert_int_equal(metric("moewire_active_sequences"), 0);
    assert_int_equal(metric("moewire_kv_cache_used_bytes"), 0); /* no live positions left */
    health_ok();
}

/* choices[i].token_ids of a response as a string "a,b,c" (for comparing). */
static void ids_of(json_t *choice, char *out, size_t cap) {
    json_t *ids = json_object_get(choice, "token_ids");
    size_t n = 0;
    out[0] = 0;
    for (size_t i = 0; i < json_array_size(ids) && n + 16 < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? "," : "",
                              (long long)json_integer_value(json_array_get(ids, i)));
}

/* A list of prompts: a choice each (index = the prompt's place), each the same as the prompt
 * alone (greedy: batch-invariant), usage the sums; streamed, every chunk names its choice and each
 * choice ends once. The list is refused whole when one prompt is bad or it cannot all be taken. */
static void test_several_prompts(void **st) {
    (void)st;
    static const char *const prompts[] = {"[5,17,300,2,9,44]", "[3,4,5]", "\"Hello there\""};
    enum { K = 3, MAXT = 6 };
    char alone[K][256], body[1024];
    int64_t prompt_tokens = 0;
    for (int i = 0; i < K; i++) {
        snprintf(body, sizeof body,
                 "{\"model\":\"model\",\"prompt\":%s,\"max_tokens\":%d,\"temperature\":0,"
                 "\"ignore_eos\":true,\"return_token_ids\":true}",
                 prompts[i], MAXT);
        json_t *j = completion(body);
        ids_of(json_array_get(json_object_get(j, "choices"), 0), alone[i], sizeof alone[i]);
        prompt_tokens +=
            json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens"));
        json_decref(j);
    }
    const char *fmt = "{\"model\":\"model\",\"prompt\":[%s,%s,%s],\"max_tokens\":%d,"
                      "\"temperature\":0,\"ignore_eos\":true,\"return_token_ids\":true%s}";
    snprintf(body, sizeof body, fmt, prompts[0], prompts[1], prompts[2], MAXT, "");
    json_t *j = completion(body);
    json_t *cs = json_object_get(j, "choices");
    assert_int_equal(json_array_size(cs), K);
    for (int i = 0; i < K; i++) {
        char got[256];
        json_t *c = json_array_get(cs, (size_t)i);
        assert_int_equal(json_integer_value(json_object_get(c, "index")), i);
        ids_of(c, got, sizeof got);
        assert_string_equal(got, alone[i]);
        assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "length");
    }
    json_t *u = json_object_get(j, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), prompt_tokens);
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), K * MAXT);
    json_decref(j);
    /* streamed */
    snprintf(body, sizeof body, fmt, prompts[0], prompts[1], prompts[2], MAXT,
             ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    mwt_resp r;
    post("/v1/completions", body, &r);
    assert_int_equal(r.status, 200);
    char got[K][256] = {{0}};
    int finishes[K] = {0};
    bool usage = false, done = false;
    for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
        assert_true(!strncmp(line, "data: ", 6));
        assert_false(done); /* [DONE] comes last */
        if (!strcmp(line + 6, "[DONE]")) {
            done = true;
            continue;
        }
        json_t *ch = json_loads(line + 6, 0, NULL);
        assert_non_null(ch);
        json_t *c = json_array_get(json_object_get(ch, "choices"), 0);
        if (!c) {
            for (int i = 0; i < K; i++) assert_int_equal(finishes[i], 1); /* usage after all */
            usage = json_integer_value(json_object_get(json_object_get(ch, "usage"),
                                                       "completion_tokens")) == K * MAXT;
        } else {
            const int i = (int)json_integer_value(json_object_get(c, "index"));
            assert_true(i >= 0 && i < K);
            assert_int_equal(finishes[i], 0); /* nothing after a choice's end */
            char part[256];
            ids_of(c, part, sizeof part);
            if (part[0])
                snprintf(got[i] + strlen(got[i]), sizeof got[i] - strlen(got[i]), "%s%s",
                         got[i][0] ? "," : "", part);
            if (json_is_string(json_object_get(c, "finish_reason"))) finishes[i]++;
        }
        json_decref(ch);
    }
    for (int i = 0; i < K; i++) assert_string_equal(got[i], alone[i]);
    assert_true(usage && done);
    mwt_resp_free(&r);
    /* refused whole: a bad prompt (named), more than the server holds at once (3 slots and 1
     * queue place here), more than a request may hold */
    expect_error("{\"model\":\"model\",\"prompt\":[[1],5]}", 400, "prompt[1]", "token ids");
    expect_error("{\"model\":\"model\",\"prompt\":[[1],[]]}", 400, "prompt[1]", "empty");
    expect_error("{\"model\":\"model\",\"prompt\":[\"a\",\"\"]}", 400, NULL, "prompt[1]");
    expect_error("{\"model\":\"model\",\"prompt\":[[1],[100000]]}", 400, NULL, "prompt[1]");
    expect_error("{\"model\":\"model\",\"prompt\":[[1],[2],[3],[4],[5]]}", 400, "prompt",
                 "at most 4");
    char *big = prompt_of(257, "[1]");
    expect_error(big, 400, "prompt", "at most 256");
    free(big);
    /* two slots busy: three prompts find one slot and one queue place, so the third is refused
     * (503) and the two taken are given back */
    int fds[2];
    for (int i = 0; i < 2; i++) {
        fds[i] = start_stream(8000);
        assert_true(fds[i] >= 0);
    }
    post("/v1/completions", "{\"model\":\"model\",\"prompt\":[[1],[2],[3]],\"max_tokens\":4}", &r);
    assert_int_equal(r.status, 503);
    assert_non_null(mwt_resp_header(&r, "Retry-After"));
    mwt_resp_free(&r);
    /* the withdrawn jobs leave the queue at the model thread's next step */
    for (int i = 0;
         i < 500 && (metric("moewire_active_sequences") != 2 || metric("moewire_queue_depth") != 0);
         i++)
        sleep_ms(20);
    assert_int_equal(metric("moewire_active_sequences"), 2);
    assert_int_equal(metric("moewire_queue_depth"), 0);
    for (int i = 0; i < 2; i++) close(fds[i]);
    for (int i = 0; i < 500 && metric("moewire_active_sequences") > 0; i++) sleep_ms(20);
    /* a client that goes away ends every choice of its request */
    int fd = mwt_http_connect(srv.port);
    const char *sb = "{\"model\":\"model\",\"prompt\":[[3,4],[5],[6,7]],\"max_tokens\":8000,"
                     "\"stream\":true,\"ignore_eos\":true}";
    char req[512];
    const int n = snprintf(req, sizeof req,
                           "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                           "%zu\r\n\r\n%s",
                           strlen(sb), sb);
    mwt_http_send(fd, req, (size_t)n);
    for (int i = 0; i < 500 && metric("moewire_active_sequences") < 3; i++) sleep_ms(20);
    assert_int_equal(metric("moewire_active_sequences"), 3);
    close(fd);
    for (int i = 0; i < 500 && metric("moewire_active_sequences") > 0; i++) sleep_ms(20);
    assert_int_equal(metric("moewire_active_sequences"), 0);
    health_ok();
}

/* Everything until the server closes (NUL-terminated, cut at cap), then closes fd. */
/* Everything the server sends until it closes (a string; the caller frees it): a stream that runs
 * on through a grace period can send far more than a fixed buffer holds, and its end is what the
 * tests read. */
static char *read_to_end(int fd) {
    size_t got = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (cap - got < 4096) {
            buf = realloc(buf, cap *= 2);
            assert_non_null(buf);
        }
        ssize_t k = recv(fd, buf + got, cap - 1 - got, 0);
        if (k <= 0) break;
        got += (size_t)k;
    }
    buf[got] = 0;
    close(fd);
    return buf;
}

static void test_sigterm_finishes_inflight(void **st) {
    (void)st;
    int fd = start_stream(60);
    assert_true(fd >= 0);
    kill(srv.pid, SIGTERM);
    /* the stream completes with [DONE] */
    char *buf = read_to_end(fd);
    assert_non_null(strstr(buf, "data: [DONE]"));
    assert_non_null(strstr(buf, "\"finish_reason\":\"length\""));
    free(buf);
    assert_int_equal(mwt_wait(srv.pid, 30000), 0);
    /* no longer listening */
    assert_int_equal(mwt_http_connect(srv.port), -1);
    srv.pid = 0;
}

/* Starts a test's own server (`other`, in a process group of its own when own_group) with extra
 * arguments and a stream of max_tokens on it; returns the stream's socket. */
static int other_stream(const char *const *extra, bool own_group, int max_tokens) {
    mwt_server saved = srv;
    assert_int_equal(own_group ? mwt_serve_start_group(&other, mwt_fixture(MODEL), extra, 120000)
                               : mwt_serve_start(&other, mwt_fixture(MODEL), extra, 120000),
                     0);
    srv = other; /* start_stream talks to srv */
    int fd = start_stream(max_tokens);
    srv = saved;
    assert_true(fd >= 0);
    return fd;
}

/* Waits for `other` to exit 0 and forgets it. */
static void other_exits_0(void) {
    assert_int_equal(mwt_wait(other.pid, 30000), 0);
    other.pid = 0;
    mwt_serve_stop(&other, 1000);
}

/* Past --grace-ms a request still running ends with an error event, and the server exits 0. */
static void test_sigterm_grace_over(void **st) {
    (void)st;
    static const char *const extra[] = {"--grace-ms", "300", "--threads", "1", NULL};
    int fd = other_stream(extra, false, 4000);
    kill(other.pid, SIGTERM);
    char *buf = read_to_end(fd);
    assert_non_null(strstr(buf, "data: {\"error\""));
    assert_non_null(strstr(buf, "shutting down"));
    assert_non_null(strstr(buf, "data: [DONE]"));
    free(buf);
    other_exits_0();
}

/* Ctrl-C in the terminal running `make run`: SIGINT reaches the whole foreground process group.
 * The loopback nodes must not be in it, or they die at once and the requests in flight fail
 * ("node 0 ... is not connected") instead of finishing within the grace period. */
static void test_sigint_to_group_finishes_inflight(void **st) {
    (void)st;
    static const char *const extra[] = {"--loopback", "2", "--node-threads", "1", "--threads",
                                        "1",          NULL};
    int fd = other_stream(extra, true, 60);
    kill(-other.pid, SIGINT);
    char *buf = read_to_end(fd);
    if (!strstr(buf, "\"finish_reason\":\"length\"") || strstr(buf, "data: {\"error\""))
        fail_msg("the stream did not finish: ...%s",
                 buf + (strlen(buf) > 400 ? strlen(buf) - 400 : 0));
    assert_non_null(strstr(buf, "data: [DONE]"));
    free(buf);
    other_exits_0();
}

/* The request line and target as RFC 9112 has them: versions other than 1.x get 505 and a line
 * without one 400 (llhttp takes 0.9 and 2.0), HTTP/1.1 needs Host, an absolute-form target is
 * served by its path, target bytes that are not visible ASCII get a 400 that is a JSON error (not
 * "out of memory"); every answer the HTTP layer gives by itself is counted on /metrics. */
static void test_versions_targets_counted(void **st) {
    (void)st;
    raw_str_expect("GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505);
    raw_str_expect("GET /health HTTP/0.9\r\n\r\n", 505);
    raw_str_expect("GET /health\r\n\r\n", 400);
    raw_str_expect("GET /health HTTP/1.1\r\n\r\n", 400);
    const char *nonascii = "GET /\xff\xfe\xc3 HTTP/1.1\r\nHost: x\r\n\r\n";
    int fd = mwt_http_connect(srv.port);
    mwt_http_send(fd, nonascii, strlen(nonascii));
    mwt_resp r;
    assert_int_equal(mwt_http_read(fd, &r, 10000), 0);
    assert_int_equal(r.status, 400);
    json_t *j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    assert_non_null(strstr(msg, "not visible ASCII"));
    json_decref(j);
    mwt_resp_free(&r);
    close(fd);
    /* absolute form, and HTTP/1.0 without Host */
    const char *body = "{\"model\":\"model\",\"prompt\":[1,2],\"max_tokens\":2}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST http://127.0.0.1:%d/v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     srv.port, strlen(body), body);
    fd = mwt_http_connect(srv.port);
    mwt_http_send(fd, req, (size_t)n);
    assert_int_equal(mwt_http_read(fd, &r, 60000), 0);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "text_completion"));
    mwt_resp_free(&r);
    close(fd);
    fd = mwt_http_connect(srv.port);
    mwt_http_send(fd, "GET /health HTTP/1.0\r\n\r\n", 24);
    assert_int_equal(mwt_http_read(fd, &r, 10000), 0);
    assert_int_equal(r.status, 200);
    mwt_resp_free(&r);
    close(fd);
    /* the HTTP layer's own answers (here and in test_malformed_http, test_slow_clients) */
    assert_true(metric("moewire_http_requests_total{route=\"/health\",status=\"505\"}") >= 2);
    assert_true(metric("moewire_http_requests_total{route=\"/health\",status=\"400\"}") >= 2);
    assert_true(metric("moewire_http_requests_total{route=\"other\",status=\"400\"}") >= 1);
    assert_true(metric("moewire_http_requests_total{route=\"/health\",status=\"431\"}") >= 1);
    assert_true(metric("moewire_http_requests_total{route=\"other\",status=\"414\"}") >= 1);
    assert_true(metric("moewire_http_requests_total{route=\"/v1/completions\",status=\"413\"}") >=
                2);
    assert_true(metric("moewire_http_requests_total{route=\"/v1/completions\",status=\"415\"}") >=
                1);
    assert_true(metric("moewire_http_requests_total{route=\"/health\",status=\"408\"}") >= 1);
    health_ok();
}

/* --kv-mb sizes the slots from the KV bytes a sequence of --ctx positions needs (gpt-oss-tiny:
 * 2 full layers × 2 KV heads × (64 + 64) floats = 2 KiB a position, plus the two ring layers'
 * window of 8): 8192 positions need 16 MiB and a little, so 40 MiB hold 2 slots, 1 MiB none; with
 * an f16 cache (--kv-type) half as much, so 4 slots. */
static void test_kv_budget(void **st) {
    (void)st;
    static const char *const two[] = {"--kv-mb", "40", "--ctx", "8192", "--threads", "1", NULL};
    assert_int_equal(mwt_serve_start(&other, mwt_fixture(MODEL), two, 120000), 0);
    char *log = mwt_read_file(other.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, " 2 slot(s) x 8192 positions"));
    free(log);
    assert_int_equal(mwt_serve_stop(&other, 30000), 0);
    static const char *const f16[] = {"--kv-mb", "40",        "--ctx", "8192", "--kv-type",
                                      "f16",     "--threads", "1",     NULL};
    assert_int_equal(mwt_serve_start(&other, mwt_fixture(MODEL), f16, 120000), 0);
    log = mwt_read_file(other.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, " 4 slot(s) x 8192 positions"));
    free(log);
    assert_int_equal(mwt_serve_stop(&other, 30000), 0);
    char *argv[] = {(char *)mwt_bin("coordinator"),
                    "serve",
                    "--model",
                    (char *)mwt_fixture(MODEL),
                    "--kv-mb",
                    "1",
                    "--ctx",
                    "8192",
                    "--listen",
                    "127.0.0.1:0",
                    NULL};
    char *err = NULL;
    assert_int_equal(mwt_run(argv, NULL, &err, 120000), 1);
    assert_non_null(strstr(err, "holds no sequence of 8192 positions"));
    free(err);
    char *both[] = {(char *)mwt_bin("coordinator"),
                    "serve",
                    "--model",
                    (char *)mwt_fixture(MODEL),
                    "--kv-mb",
                    "40",
                    "--max-seqs",
                    "2",
                    NULL};
    assert_int_equal(mwt_run(both, NULL, NULL, 120000), 2);
    /* kimi-linear-tiny: 320 bytes a position on its one latent attention layer (64 + 16 floats)
     * and 726 KiB of recurrent state per sequence on its three KDA layers, whatever the length:
     * 1024 positions need 1.02 MiB, so 2 MiB hold one slot (six without the state) and 1 none */
    static const char *const kimi[] = {"--kv-mb", "2", "--ctx", "1024", "--threads", "1", NULL};
    assert_int_equal(
        mwt_serve_start(&other, mwt_fixture("llamacpp/kimi-linear-tiny/model.gguf"), kimi, 120000),
        0);
    log = mwt_read_file(other.log, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, " 1 slot(s) x 1024 positions"));
    free(log);
    assert_int_equal(mwt_serve_stop(&other, 30000), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_equals_generate),
        cmocka_unit_test(test_text_and_stop_strings),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_tokenize_props),
        cmocka_unit_test(test_choices_and_cache),
        cmocka_unit_test(test_sampling_options),
        cmocka_unit_test(test_keepalive_pipelining),
        cmocka_unit_test(test_head_options_cors),
        cmocka_unit_test(test_cors_origin_list),
        cmocka_unit_test(test_api_keys),
        cmocka_unit_test(test_malformed_http),
        cmocka_unit_test(test_slow_clients),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_versions_targets_counted),
        cmocka_unit_test(test_disconnect_and_full),
        cmocka_unit_test(test_several_prompts),
        cmocka_unit_test(test_sigterm_finishes_inflight),
        cmocka_unit_test(test_sigterm_grace_over),
        cmocka_unit_test(test_sigint_to_group_finishes_inflight),
        cmocka_unit_test(test_kv_budget),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
