/* tests/unit/test_co_oai.c — the OpenAI JSON (co_oai) without a server: request bodies of
 * /v1/completions and /v1/chat/completions mapped to their parameters (defaults, every prompt
 * form, messages, sampling, stop strings and ids, logprobs, logit_bias, streaming options, chat
 * options), every refusal naming its field with OpenAI's error shape, and the response, chunk and
 * usage objects built from a job's output (completion and chat, logprobs, token ids, bytes that
 * are not UTF-8). */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_oai.h"

static void parse_ok(const char *body, co_oai_kind kind, co_oai_req *r) {
    co_oai_error e = {0};
    if (co_oai_parse(body, strlen(body), kind, NULL, r, &e))
        fail_msg("%s: refused (%d, %s): %s", body, e.status, e.param, e.message);
}

/* The body is refused with `status`, naming `param` ("" for none), the message holding `needle`. */
static void refused_within(const char *body, co_oai_kind kind, const co_oai_limits *lim, int status,
                           const char *param, const char *needle) {
    co_oai_req r;
    co_oai_error e = {0};
    if (!co_oai_parse(body, strlen(body), kind, lim, &r, &e)) {
        co_oai_req_free(&r);
        fail_msg("%s: accepted", body);
    }
    if (e.status != status || strcmp(e.param, param) || !strstr(e.message, needle))
        fail_msg("%s: %d '%s' '%s', expected %d '%s' '...%s...'", body, e.status, e.param,
                 e.message, status, param, needle);
    assert_null(r.root); /* nothing held after a refusal */
    assert_null(r.prompts);
    assert_null(r.logit_bias);
}

static void refused(const char *body, co_oai_kind kind, int status, const char *param,
                    const char *needle) {
    refused_within(body, kind, NULL, status, param, needle);
}

static json_t *load(const co_buf *b) {
    assert_false(b->failed);
    json_error_t je;
    json_t *j = json_loadb(b->p, b->len, 0, &je);
    if (!j) fail_msg("not JSON (%s): %.*s", je.text, (int)b->len, b->p);
    return j;
}

static const char *str_at(json_t *j, const char *path) {
    json_t *v = json_object_get(j, path);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* ---- requests ------------------------------------------------------------------------------- */

static void test_completion_defaults(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"prompt\":\"Hello\"}", CO_OAI_COMPLETION, &r);
    assert_int_equal(r.kind, CO_OAI_COMPLETION);
    assert_string_equal(r.model, "m");
    assert_int_equal(r.n_prompts, 1);
    assert_string_equal(r.prompts[0].text, "Hello");
    assert_null(r.prompts[0].ids);
    assert_false(r.stream);
    assert_false(r.include_usage);
    assert_int_equal(r.max_tokens, -1);
    assert_true(r.temperature == 1.0 && r.top_p == 1.0 && r.repetition_penalty == 1.0);
    assert_true(r.min_p == 0 && r.presence_penalty == 0 && r.frequency_penalty == 0);
    assert_false(r.has_seed);
    assert_int_equal(r.top_logprobs, -1);
    assert_int_equal(r.thinking, -1);
    assert_int_equal(r.n_stop + r.n_stop_ids + r.n_logit_bias, 0);
    co_oai_req_free(&r);
}

static void test_prompt_forms(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"prompt\":[5,0,7]}", CO_OAI_COMPLETION, &r);
    assert_int_equal(r.n_prompts, 1);
    assert_int_equal(r.prompts[0].n_ids, 3);
    assert_int_equal(r.prompts[0].ids[0], 5);
    assert_int_equal(r.prompts[0].ids[2], 7);
    co_oai_req_free(&r);
    parse_ok("{\"model\":\"m\",\"prompt\":[\"a\",[1,2],\"b\"]}", CO_OAI_COMPLETION, &r);
    assert_int_equal(r.n_prompts, 3);
    assert_string_equal(r.prompts[0].text, "a");
    assert_int_equal(r.prompts[1].n_ids, 2);
    assert_string_equal(r.prompts[2].text, "b");
    co_oai_req_free(&r);
    refused("{\"model\":\"m\"}", CO_OAI_COMPLETION, 400, "prompt", "required");
    refused("{\"model\":\"m\",\"prompt\":3}", CO_OAI_COMPLETION, 400, "prompt", "an integer");
    refused("{\"model\":\"m\",\"prompt\":[]}", CO_OAI_COMPLETION, 400, "prompt", "empty");
    refused("{\"model\":\"m\",\"prompt\":[1,-2]}", CO_OAI_COMPLETION, 400, "prompt", "'prompt'[1]");
    refused("{\"model\":\"m\",\"prompt\":[1,2147483648]}", CO_OAI_COMPLETION, 400, "prompt",
            "token id");
    refused("{\"model\":\"m\",\"prompt\":[\"a\",[1,2.5]]}", CO_OAI_COMPLETION, 400, "prompt[1]",
            "'prompt[1]'[1]");
    refused("{\"model\":\"m\",\"prompt\":[\"a\",{}]}", CO_OAI_COMPLETION, 400, "prompt[1]",
            "an object");
    /* one prompt more than a request takes */
    co_buf b = {0};
    co_buf_puts(&b, "{\"model\":\"m\",\"prompt\":[");
    for (int i = 0; i <= CO_OAI_MAX_PROMPTS; i++) co_buf_puts(&b, i ? ",\"x\"" : "\"x\"");
    co_buf_puts(&b, "]}");
    refused(b.p, CO_OAI_COMPLETION, 400, "prompt", "at most");
    co_buf_free(&b);
}

static void test_body_and_model(void **st) {
    (void)st;
    refused("", CO_OAI_COMPLETION, 400, "", "not valid JSON");
    refused("{\"model\":", CO_OAI_CHAT, 400, "", "line 1");
    refused("[1,2]", CO_OAI_COMPLETION, 400, "", "must be a JSON object, not an array");
    refused("{\"prompt\":\"x\"}", CO_OAI_COMPLETION, 400, "model", "required");
    refused("{\"model\":null,\"prompt\":\"x\"}", CO_OAI_COMPLETION, 400, "model", "required");
    refused("{\"model\":7,\"prompt\":\"x\"}", CO_OAI_COMPLETION, 400, "model", "an integer");
    /* duplicate keys are refused, not resolved one way or the other */
    refused("{\"model\":\"m\",\"model\":\"n\",\"prompt\":\"x\"}", CO_OAI_COMPLETION, 400, "",
            "duplicate");
    /* a NUL inside the body is not the end of it */
    const char nul[] = "{\"model\":\"m\",\"prompt\":\"x\"}\0garbage";
    co_oai_req r;
    co_oai_error e = {0};
    assert_int_not_equal(co_oai_parse(nul, sizeof nul - 1, CO_OAI_COMPLETION, NULL, &r, &e), 0);
    assert_int_equal(e.status, 400);
}

static void test_chat_messages(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
             "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]},"
             "{\"role\":\"assistant\",\"content\":null},{\"role\":\"tool\",\"content\":\"t\"}]}",
             CO_OAI_CHAT, &r);
    assert_int_equal(json_array_size(r.messages), 4);
    assert_int_equal(r.n_prompts, 0);
    co_oai_req_free(&r);
    refused("{\"model\":\"m\"}", CO_OAI_CHAT, 400, "messages", "required");
    refused("{\"model\":\"m\",\"messages\":{}}", CO_OAI_CHAT, 400, "messages", "an array");
    refused("{\"model\":\"m\",\"messages\":[]}", CO_OAI_CHAT, 400, "messages", "empty");
    refused("{\"model\":\"m\",\"messages\":[\"hi\"]}", CO_OAI_CHAT, 400, "messages[0]",
            "an object");
    refused("{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", CO_OAI_CHAT, 400, "messages[0]",
            "role");
    refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"},"
            "{\"role\":\"robot\",\"content\":\"x\"}]}",
            CO_OAI_CHAT, 400, "messages[1]", "'robot'");
    refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":null}]}", CO_OAI_CHAT,
            400, "messages[0]", "content");
    refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
            "[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}",
            CO_OAI_CHAT, 400, "messages[0]", "text only");
}

static void test_sampling(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":5,\"temperature\":0,\"top_p\":0.5,"
             "\"top_k\":40,\"min_p\":0.1,\"presence_penalty\":-2,\"frequency_penalty\":2,"
             "\"repetition_penalty\":1.3,\"seed\":-1,\"n\":1,\"best_of\":1}",
             CO_OAI_COMPLETION, &r);
    assert_int_equal(r.max_tokens, 5);
    assert_true(r.temperature == 0 && r.top_p == 0.5 && r.top_k == 40 && r.min_p == 0.1);
    assert_true(r.presence_penalty == -2 && r.frequency_penalty == 2);
    assert_true(r.repetition_penalty == 1.3);
    assert_true(r.has_seed);
    assert_true(r.seed == UINT64_MAX); /* -1 as the unsigned seed */
    co_oai_req_free(&r);
    parse_ok("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
             "\"max_completion_tokens\":9,\"temperature\":null}",
             CO_OAI_CHAT, &r);
    assert_int_equal(r.max_tokens, 9);
    assert_true(r.temperature == 1.0); /* null: the default */
    co_oai_req_free(&r);
    static const struct {
        const char *field, *value, *param, *needle;
    } bad[] = {
        {"max_tokens", "0", "max_tokens", "[1, "},
        {"max_tokens", "1.5", "max_tokens", "an integer, not a number"},
        {"max_completion_tokens", "\"9\"", "max_completion_tokens", "not a string"},
        {"temperature", "2.5", "temperature", "[0, 2]"},
        {"temperature", "true", "temperature", "a number, not a boolean"},
        {"top_p", "0", "top_p", "greater than 0"},
        {"top_p", "1.01", "top_p", "[0, 1]"},
        {"top_k", "-2", "top_k", "[-1, "},
        {"min_p", "-0.1", "min_p", "[0, 1]"},
        {"presence_penalty", "2.1", "presence_penalty", "[-2, 2]"},
        {"frequency_penalty", "-3", "frequency_penalty", "[-2, 2]"},
        {"repetition_penalty", "0", "repetition_penalty", "greater than 0"},
        {"seed", "1.5", "seed", "an integer"},
        {"n", "17", "n", "[1, 16]"},
        {"n", "0", "n", "[1, 16]"},
        {"best_of", "3", "best_of", "one choice"},
        {"stream", "1", "stream", "a boolean"},
        {"ignore_eos", "\"yes\"", "ignore_eos", "a boolean"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"m\",\"prompt\":\"x\",\"%s\":%s}", bad[i].field,
                 bad[i].value);
        refused(body, CO_OAI_COMPLETION, 400, bad[i].param, bad[i].needle);
    }
}

static void test_stop(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"prompt\":\"x\",\"stop\":\"\\n\\n\"}", CO_OAI_COMPLETION, &r);
    assert_int_equal(r.n_stop, 1);
    assert_string_equal(r.stop[0], "\n\n");
    co_oai_req_free(&r);
    parse_ok("{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"a\",7,\"b\"],\"stop_token_ids\":[9]}",
             CO_OAI_COMPLETION, &r);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[1], "b");
    assert_int_equal(r.n_stop_ids, 2);
    assert_int_equal(r.stop_ids[0], 7);
    assert_int_equal(r.stop_ids[1], 9);
    co_oai_req_free(&r);
    refused("{\"model\":\"m\",\"prompt\":\"x\",\"stop\":\"\"}", CO_OAI_COMPLETION, 400, "stop",
            "1 to");
    refused("{\"model\":\"m\",\"prompt\":\"x\",\"stop\":{}}", CO_OAI_COMPLETION, 400, "stop",
            "not an object");
    refused("{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"a\",null]}", CO_OAI_COMPLETION, 400,
            "stop", "'stop'[1]");
    refused("{\"model\":\"m\",\"prompt\":\"x\",\"stop_token_ids\":[-1]}", CO_OAI_COMPLETION, 400,
            "stop_token_ids", "token id");
    char body[4096];
    int n = snprintf(body, sizeof body, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[");
    for (int i = 0; i <= CO_STOP_MAX; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, "%s\"s%d\"", i ? "," : "", i);
    snprintf(body + n, sizeof body - (size_t)n, "]}");
    refused(body, CO_OAI_COMPLETION, 400, "stop", "more than");
    n = snprintf(body, sizeof body, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":\"");
    for (int i = 0; i <= CO_STOP_MAX_LEN; i++) body[n++] = 'a';
    snprintf(body + n, sizeof body - (size_t)n, "\"}");
    refused(body, CO_OAI_COMPLETION, 400, "stop", "1 to");
}

static void test_logprobs(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":3}", CO_OAI_COMPLETION, &r);
    assert_int_equal(r.top_logprobs, 3);
    co_oai_req_free(&r);
    parse_ok("{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":0}", CO_OAI_COMPLETION, &r);
    assert_int_equal(r.top_logprobs, 0);
    co_oai_req_free(&r);
    const char *msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char body[256];
    snprintf(body, sizeof body, "{\"model\":\"m\",%s,\"logprobs\":true,\"top_logprobs\":2}", msgs);
    parse_ok(body, CO_OAI_CHAT, &r);
    assert_int_equal(r.top_logprobs, 2);
    co_oai_req_free(&r);
    snprintf(body, sizeof body, "{\"model\":\"m\",%s,\"logprobs\":false}", msgs);
    parse_ok(body, CO_OAI_CHAT, &r);
    assert_int_equal(r.top_logprobs, -1);
    co_oai_req_free(&r);
    refused("{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":true}", CO_OAI_COMPLETION, 400,
            "logprobs", "number of alternatives");
    refused("{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":21}", CO_OAI_COMPLETION, 400,
            "logprobs", "[0, 20]");
    snprintf(body, sizeof body, "{\"model\":\"m\",%s,\"top_logprobs\":2}", msgs);
    refused(body, CO_OAI_CHAT, 400, "top_logprobs", "needs 'logprobs': true");
    snprintf(body, sizeof body, "{\"model\":\"m\",%s,\"logprobs\":3}", msgs);
    refused(body, CO_OAI_CHAT, 400, "logprobs", "a boolean");
}

static void test_logit_bias(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"50\":-100,\"0\":2.5,\"7\":100}}",
             CO_OAI_COMPLETION, &r);
    assert_int_equal(r.n_logit_bias, 3);
    assert_int_equal(r.logit_bias[0].token, 0); /* sorted by token */
    assert_true(r.logit_bias[0].bias == 2.5f);
    assert_int_equal(r.logit_bias[1].token, 7);
    assert_int_equal(r.logit_bias[2].token, 50);
    assert_true(r.logit_bias[2].bias == -100.0f);
    co_oai_req_free(&r);
    parse_ok("{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{}}", CO_OAI_COMPLETION, &r);
    assert_int_equal(r.n_logit_bias, 0);
    co_oai_req_free(&r);
    static const char *const bad[][2] = {
        {"[]", "an object"},
        {"{\"01\":1}", "'01'"},
        {"{\"a\":1}", "'a'"},
        {"{\"-1\":1}", "'-1'"},
        {"{\"2147483648\":1}", "not a token id"},
        {"{\"\":1}", "''"},
        {"{\"5\":\"1\"}", "a number"},
        {"{\"5\":100.5}", "[-100, 100]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":%s}",
                 bad[i][0]);
        refused(body, CO_OAI_COMPLETION, 400, "logit_bias", bad[i][1]);
    }
}

/* response_format: json_object, json_schema (its schema kept as text past the detach) */
static void test_response_format(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"prompt\":\"x\",\"response_format\":{\"type\":\"text\"}}",
             CO_OAI_COMPLETION, &r);
    assert_int_equal(r.fmt.format, CO_FORMAT_TEXT);
    assert_null(r.fmt.schema);
    co_oai_req_free(&r);
    parse_ok("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
             "\"response_format\":{\"type\":\"json_object\"}}",
             CO_OAI_CHAT, &r);
    assert_int_equal(r.fmt.format, CO_FORMAT_JSON_OBJECT);
    assert_null(r.fmt.schema);
    co_oai_req_free(&r);
    parse_ok("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
             "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
             "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":"
             "{\"type\":\"integer\"}},\"required\":[\"a\"],\"additionalProperties\":false}}}}",
             CO_OAI_CHAT, &r);
    assert_int_equal(r.fmt.format, CO_FORMAT_JSON_SCHEMA);
    co_oai_error e = {0};
    assert_int_equal(co_oai_req_detach(&r, &e), 0);
    assert_non_null(r.fmt.schema);
    assert_non_null(strstr(r.fmt.schema, "\"required\":[\"a\"]"));
    co_oai_req_free(&r);
}

/* tools, tool_choice: the tools a call is forced among under required / named; refusals name the
 * field */
static void test_tools(void **st) {
    (void)st;
    const char *m = "\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    const char *tools = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                        "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                        "\"integer\"}},\"required\":[\"a\"]}}},{\"type\":\"function\","
                        "\"function\":{\"name\":\"g\"}}]";
    char body[1024];
    co_oai_req r;
    snprintf(body, sizeof body, "{%s,%s}", m, tools);
    parse_ok(body, CO_OAI_CHAT, &r);
    assert_int_equal(r.fmt.tool_choice, CO_TOOLS_AUTO);
    assert_non_null(r.fmt.tools);
    assert_null(r.fmt.call_tools);
    assert_true(r.fmt.parallel_tool_calls);
    co_oai_req_free(&r);
    snprintf(body, sizeof body,
             "{%s,%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
             "\"parallel_tool_calls\":false}",
             m, tools);
    parse_ok(body, CO_OAI_CHAT, &r);
    assert_int_equal(r.fmt.tool_choice, CO_TOOLS_NAMED);
    assert_false(r.fmt.parallel_tool_calls);
    /* the named tool only, with its parameters */
    assert_non_null(strstr(r.fmt.call_tools, "[{\"name\":\"f\",\"parameters\":{"));
    assert_non_null(strstr(r.fmt.call_tools, "\"required\":[\"a\"]"));
    assert_null(strstr(r.fmt.call_tools, "\"g\""));
    co_oai_req_free(&r);
    snprintf(body, sizeof body, "{%s,%s,\"tool_choice\":\"required\"}", m, tools);
    parse_ok(body, CO_OAI_CHAT, &r);
    assert_int_equal(r.fmt.tool_choice, CO_TOOLS_REQUIRED);
    /* every tool, each with its own parameters (none given: any object) */
    assert_non_null(strstr(r.fmt.call_tools, "\"required\":[\"a\"]"));
    assert_non_null(
        strstr(r.fmt.call_tools, "{\"name\":\"g\",\"parameters\":{\"type\":\"object\"}}"));
    co_oai_req_free(&r);
    snprintf(body, sizeof body, "{%s,%s,\"tool_choice\":\"none\"}", m, tools);
    parse_ok(body, CO_OAI_CHAT, &r);
    assert_null(r.fmt.tools); /* not shown to the model */
    co_oai_req_free(&r);
    static const struct {
        const char *rest, *param, *needle;
    } bad[] = {
        {"\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"h\"}}", "tool_choice",
         "not one of the tools"},
        {"\"tool_choice\":\"sometimes\"", "tool_choice", "\"required\""},
        {"\"parallel_tool_calls\":1", "parallel_tool_calls", "a boolean"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body, "{%s,%s,%s}", m, tools, bad[i].rest);
        refused(body, CO_OAI_CHAT, 400, bad[i].param, bad[i].needle);
    }
    snprintf(body, sizeof body,
             "{%s,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"bad name\"}}]}", m);
    refused(body, CO_OAI_CHAT, 400, "tools[0]", "letters, digits");
    snprintf(body, sizeof body,
             "{%s,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"p\","
             "\"parameters\":{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\","
             "\"format\":\"date\"}}}}}],\"tool_choice\":\"required\"}",
             m);
    refused(body, CO_OAI_CHAT, 400, "tools", "'format' is not supported");
    snprintf(body, sizeof body, "{%s,\"tool_choice\":\"required\"}", m);
    refused(body, CO_OAI_CHAT, 400, "tool_choice", "needs 'tools'");
}

static void test_stream_and_options(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"prompt\":\"x\",\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true},\"ignore_eos\":true,"
             "\"return_token_ids\":true,\"echo\":false,\"tools\":[],\"suffix\":\"\","
             "\"response_format\":{\"type\":\"text\"}}",
             CO_OAI_COMPLETION, &r);
    assert_true(r.stream && r.include_usage && r.ignore_eos && r.return_token_ids);
    co_oai_req_free(&r);
    parse_ok("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
             "\"reasoning_effort\":\"high\",\"chat_template_kwargs\":{\"enable_thinking\":false}}",
             CO_OAI_CHAT, &r);
    assert_string_equal(r.reasoning_effort, "high");
    assert_int_equal(r.thinking, 0);
    co_oai_req_free(&r);
    const char *p = "\"model\":\"m\",\"prompt\":\"x\"";
    static const struct {
        const char *rest, *param, *needle;
    } bad[] = {
        {"\"stream_options\":{\"include_usage\":true}", "stream_options", "'stream': true"},
        {"\"stream\":true,\"stream_options\":[]", "stream_options", "an object"},
        {"\"stream\":true,\"stream_options\":{\"include_usage\":1}", "stream_options.include_usage",
         "a boolean"},
        {"\"echo\":true", "echo", "not supported"},
        {"\"tools\":[{\"type\":\"function\"}]", "tools", "chat completions"},
        {"\"functions\":[{}]", "functions", "older API"},
        {"\"response_format\":{\"type\":\"grammar\"}", "response_format", "'grammar'"},
        {"\"ignore_eos\":true,\"response_format\":{\"type\":\"json_object\"}", "ignore_eos",
         "cannot go"},
        {"\"response_format\":{\"type\":\"json_schema\"}", "response_format.json_schema",
         "'name' and 'schema'"},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\","
         "\"schema\":{\"type\":\"string\",\"pattern\":\"(?=x)\"}}}",
         "response_format.json_schema.schema", "/pattern: the pattern's (? (lookaround"},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\","
         "\"schema\":{\"type\":\"string\",\"format\":\"date\"}}}",
         "response_format.json_schema.schema", "'format' is not supported"},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\","
         "\"strict\":1,\"schema\":{}}}",
         "response_format.json_schema.strict", "a boolean"},
        {"\"response_format\":\"text\"", "response_format", "string 'type'"},
        {"\"suffix\":\"end\"", "suffix", "not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{%s,%s}", p, bad[i].rest);
        refused(body, CO_OAI_COMPLETION, 400, bad[i].param, bad[i].needle);
    }
    const char *m = "\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char body[512];
    snprintf(body, sizeof body, "{%s,\"reasoning_effort\":\"max\"}", m);
    refused(body, CO_OAI_CHAT, 400, "reasoning_effort", "\"low\"");
    snprintf(body, sizeof body, "{%s,\"chat_template_kwargs\":{\"enable_thinking\":\"no\"}}", m);
    refused(body, CO_OAI_CHAT, 400, "chat_template_kwargs", "a boolean");
}

/* OpenAI's error object: message, type (server_error from 500 on), param and code (null when
 * none). */
static void test_error_json(void **st) {
    (void)st;
    co_oai_error e;
    assert_int_equal(co_oai_fail(&e, 404, "model", "model_not_found", "no model '%s'", "x"), -1);
    co_buf b = {0};
    co_oai_error_json(&e, &b);
    json_t *j = load(&b);
    json_t *err = json_object_get(j, "error");
    assert_string_equal(str_at(err, "message"), "no model 'x'");
    assert_string_equal(str_at(err, "type"), "invalid_request_error");
    assert_string_equal(str_at(err, "param"), "model");
    assert_string_equal(str_at(err, "code"), "model_not_found");
    json_decref(j);
    co_buf_clear(&b);
    co_oai_fail(&e, 503, NULL, NULL, "%s", "busy \"now\"");
    co_oai_error_json(&e, &b);
    j = load(&b);
    err = json_object_get(j, "error");
    assert_string_equal(str_at(err, "message"), "busy \"now\"");
    assert_string_equal(str_at(err, "type"), "server_error");
    assert_true(json_is_null(json_object_get(err, "param")));
    assert_true(json_is_null(json_object_get(err, "code")));
    json_decref(j);
    co_buf_free(&b);
}

/* ---- responses ------------------------------------------------------------------------------ */

static void name_token(void *ud, int32_t tok, co_buf *out) {
    (void)ud;
    co_buf_printf(out, "<%d>", tok);
}

static const int32_t toks[2] = {11, 12};
static const co_logprob lps[2] = {
    {.token = 11, .logprob = -0.5f, .n_top = 2, .top_id = {11, 4}, .top_lp = {-0.5f, -1.5f}},
    {.token = 12, .logprob = -0.25f, .n_top = 0},
};

static void test_completion_response(void **st) {
    (void)st;
    co_oai_meta m = {.id = "cmpl-1", .model = "m", .created = 42, .return_token_ids = true};
    co_oai_piece p[2] = {
        {.content = "ab",
         .content_len = 2,
         .tokens = toks,
         .n_tokens = 2,
         .logprobs = lps,
         .finish = CO_FINISH_LENGTH,
         .index = 0},
        {.content = "c", .content_len = 1, .finish = CO_FINISH_STOP, .index = 1},
    };
    co_buf b = {0};
    co_oai_response(CO_OAI_COMPLETION, &m, p, 2, 5, 3, &b);
    json_t *j = load(&b);
    assert_string_equal(str_at(j, "id"), "cmpl-1");
    assert_string_equal(str_at(j, "object"), "text_completion");
    assert_string_equal(str_at(j, "model"), "m");
    assert_int_equal(json_integer_value(json_object_get(j, "created")), 42);
    json_t *u = json_object_get(j, "usage");
    assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), 5);
    assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), 3);
    assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 8);
    json_t *ch = json_object_get(j, "choices");
    assert_int_equal(json_array_size(ch), 2);
    json_t *c0 = json_array_get(ch, 0), *c1 = json_array_get(ch, 1);
    assert_string_equal(str_at(c0, "text"), "ab");
    assert_string_equal(str_at(c0, "finish_reason"), "length");
    assert_int_equal(json_integer_value(json_object_get(c1, "index")), 1);
    assert_string_equal(str_at(c1, "finish_reason"), "stop");
    assert_true(json_is_null(json_object_get(c1, "logprobs")));
    json_t *ids = json_object_get(c0, "token_ids");
    assert_int_equal(json_array_size(ids), 2);
    assert_int_equal(json_integer_value(json_array_get(ids, 1)), 12);
    /* without a tokenizer a token is named by its id; text_offset counts those names' bytes */
    json_t *lp = json_object_get(c0, "logprobs");
    assert_string_equal(json_string_value(json_array_get(json_object_get(lp, "tokens"), 1)),
                        "token_id:12");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(lp, "text_offset"), 1)),
                     strlen("token_id:11"));
    assert_true(json_real_value(json_array_get(json_object_get(lp, "token_logprobs"), 0)) == -0.5);
    json_t *top0 = json_array_get(json_object_get(lp, "top_logprobs"), 0);
    assert_int_equal(json_object_size(top0), 2);
    assert_true(json_real_value(json_object_get(top0, "token_id:4")) == -1.5);
    json_decref(j);
    co_buf_free(&b);
}

static void test_chat_response_and_chunks(void **st) {
    (void)st;
    co_oai_meta m = {.id = "chatcmpl-1", .model = "m", .created = 1, .token_name = name_token};
    co_oai_piece p = {.content = "hi",
                      .content_len = 2,
                      .reasoning = "think",
                      .reasoning_len = 5,
                      .tokens = toks,
                      .n_tokens = 2,
                      .logprobs = lps,
                      .finish = CO_FINISH_STOP};
    co_buf b = {0};
    co_oai_response(CO_OAI_CHAT, &m, &p, 1, 1, 2, &b);
    json_t *j = load(&b);
    assert_string_equal(str_at(j, "object"), "chat.completion");
    json_t *c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *msg = json_object_get(c, "message");
    assert_string_equal(str_at(msg, "role"), "assistant");
    assert_string_equal(str_at(msg, "content"), "hi");
    assert_string_equal(str_at(msg, "reasoning_content"), "think");
    assert_null(json_object_get(c, "token_ids")); /* not asked for */
    json_t *content = json_object_get(json_object_get(c, "logprobs"), "content");
    assert_int_equal(json_array_size(content), 2);
    json_t *l0 = json_array_get(content, 0);
    assert_string_equal(str_at(l0, "token"), "<11>");
    json_t *bytes = json_object_get(l0, "bytes");
    assert_int_equal(json_array_size(bytes), 4);
    assert_int_equal(json_integer_value(json_array_get(bytes, 0)), '<');
    json_t *top = json_object_get(l0, "top_logprobs");
    assert_int_equal(json_array_size(top), 2);
    assert_string_equal(str_at(json_array_get(top, 1), "token"), "<4>");
    json_decref(j);
    /* chunks: the role on the first only, no empty content, finish_reason null until the end */
    co_buf_clear(&b);
    co_oai_piece first = {.content = "h", .content_len = 1, .first = true};
    co_oai_chunk(CO_OAI_CHAT, &m, &first, &b);
    j = load(&b);
    assert_string_equal(str_at(j, "object"), "chat.completion.chunk");
    c = json_array_get(json_object_get(j, "choices"), 0);
    json_t *d = json_object_get(c, "delta");
    assert_string_equal(str_at(d, "role"), "assistant");
    assert_string_equal(str_at(d, "content"), "h");
    assert_true(json_is_null(json_object_get(c, "finish_reason")));
    assert_true(json_is_null(json_object_get(c, "logprobs")));
    json_decref(j);
    co_buf_clear(&b);
    co_oai_piece end = {.finish = CO_FINISH_LENGTH};
    co_oai_chunk(CO_OAI_CHAT, &m, &end, &b);
    j = load(&b);
    c = json_array_get(json_object_get(j, "choices"), 0);
    d = json_object_get(c, "delta");
    assert_int_equal(json_object_size(d), 0);
    assert_string_equal(str_at(c, "finish_reason"), "length");
    json_decref(j);
    co_buf_clear(&b);
    co_oai_usage_chunk(CO_OAI_CHAT, &m, 3, 4, &b);
    j = load(&b);
    assert_int_equal(json_array_size(json_object_get(j, "choices")), 0);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")), 7);
    json_decref(j);
    co_buf_free(&b);
}

/* A token can end inside a character: bytes that are not UTF-8 become U+FFFD, the rest stays. */
static void test_invalid_utf8(void **st) {
    (void)st;
    co_oai_meta m = {.id = "cmpl-2", .model = "m", .created = 1};
    const char text[] = "a\xE2\x82" /* a cut euro sign */ "b\xC0\xAF" /* overlong '/' */ "\xC3\xA9";
    co_oai_piece p = {.content = text, .content_len = sizeof text - 1, .finish = CO_FINISH_STOP};
    co_buf b = {0};
    co_oai_chunk(CO_OAI_COMPLETION, &m, &p, &b);
    json_t *j = load(&b);
    const char *got = str_at(json_array_get(json_object_get(j, "choices"), 0), "text");
    assert_non_null(got);
    assert_string_equal(got, "a\xEF\xBF\xBD\xEF\xBF\xBD"
                             "b\xEF\xBF\xBD\xEF\xBF\xBD\xC3\xA9");
    json_decref(j);
    co_buf_free(&b);
}

/* The limits that bound what checking a request costs, each refusal naming its option; at the
 * limit a request passes. */
static void test_limits(void **st) {
    (void)st;
    const co_oai_limits lim = {.max_messages = 3, .max_logit_bias = 2, .max_prompt_tokens = 5};
    co_oai_req r;
    co_oai_error e = {0};
    const char *msgs3 =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
        "{\"role\":\"assistant\",\"content\":\"b\"},{\"role\":\"user\",\"content\":\"c\"}]}";
    assert_int_equal(co_oai_parse(msgs3, strlen(msgs3), CO_OAI_CHAT, &lim, &r, &e), 0);
    co_oai_req_free(&r);
    refused_within("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                   "{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"a\"},"
                   "{\"role\":\"user\",\"content\":\"a\"}]}",
                   CO_OAI_CHAT, &lim, 400, "messages",
                   "holds 4 messages; this server takes at most 3 (--max-messages)");
    /* counted before any message is looked at: the fourth's flaw is not what is reported */
    refused_within("{\"model\":\"m\",\"messages\":[1,2,3,4]}", CO_OAI_CHAT, &lim, 400, "messages",
                   "--max-messages");
    const char *bias2 = "{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"1\":1,\"2\":2}}";
    assert_int_equal(co_oai_parse(bias2, strlen(bias2), CO_OAI_COMPLETION, &lim, &r, &e), 0);
    co_oai_req_free(&r);
    refused_within("{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"1\":1,\"2\":2,\"3\":3}}",
                   CO_OAI_COMPLETION, &lim, 400, "logit_bias",
                   "has 3 entries; this server takes at most 2 (--max-logit-bias)");
    const char *ids5 = "{\"model\":\"m\",\"prompt\":[[1,2],[3,4,5]]}";
    assert_int_equal(co_oai_parse(ids5, strlen(ids5), CO_OAI_COMPLETION, &lim, &r, &e), 0);
    co_oai_req_free(&r);
    refused_within("{\"model\":\"m\",\"prompt\":[[1,2],[3,4,5],[6]]}", CO_OAI_COMPLETION, &lim, 400,
                   "prompt[2]",
                   "past 5, the most this server takes in one request (--max-prompt-tokens)");
    refused_within("{\"model\":\"m\",\"prompt\":[1,2,3,4,5,6]}", CO_OAI_COMPLETION, &lim, 400,
                   "prompt", "--max-prompt-tokens");
    /* the defaults */
    const co_oai_limits d = co_oai_default_limits();
    assert_int_equal(d.max_messages, 2048);
    assert_int_equal(d.max_logit_bias, 1024);
    assert_int_equal(d.max_prompt_tokens, 65536);
}

/* A parse whose result nobody wants stops (499) instead of reading the rest of the JSON. */
static void test_stoppable(void **st) {
    (void)st;
    co_buf b = {0};
    co_buf_puts(&b, "{\"model\":\"m\",\"prompt\":[");
    for (int i = 0; i < 100000; i++) co_buf_puts(&b, i ? ",1" : "1");
    co_buf_puts(&b, "]}");
    atomic_bool stop;
    atomic_init(&stop, false);
    co_oai_req r;
    co_oai_error e = {0};
    const co_oai_limits lim = {
        .max_messages = 1, .max_logit_bias = 1, .max_prompt_tokens = 1 << 20};
    assert_int_equal(co_oai_parse_stoppable(b.p, b.len, CO_OAI_COMPLETION, &lim, &stop, &r, &e), 0);
    assert_int_equal(r.prompts[0].n_ids, 100000);
    co_oai_req_free(&r);
    atomic_store(&stop, true);
    assert_int_equal(co_oai_parse_stoppable(b.p, b.len, CO_OAI_COMPLETION, &lim, &stop, &r, &e),
                     -1);
    assert_int_equal(e.status, 499);
    assert_null(r.root);
    co_buf_free(&b);
}

/* Detached, a request keeps what submitting it needs (stop strings, ids, options) without its
 * JSON. */
static void test_detach(void **st) {
    (void)st;
    co_oai_req r;
    parse_ok("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
             "\"stop\":[\"ab\",\"\u00e9t\u00e9\"],\"reasoning_effort\":\"high\",\"logit_bias\":{"
             "\"3\":1}}",
             CO_OAI_CHAT, &r);
    co_oai_error e = {0};
    assert_int_equal(co_oai_req_detach(&r, &e), 0);
    assert_null(r.root);
    assert_null(r.messages);
    assert_null(r.model);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[0], "ab");
    assert_string_equal(r.stop[1], "\xc3\xa9t\xc3\xa9");
    assert_string_equal(r.reasoning_effort, "high");
    assert_int_equal(r.n_logit_bias, 1);
    assert_int_equal(co_oai_req_detach(&r, &e), 0); /* once is enough */
    co_oai_req_free(&r);
    parse_ok("{\"model\":\"m\",\"prompt\":[\"a\",[1,2]]}", CO_OAI_COMPLETION, &r);
    assert_int_equal(co_oai_req_detach(&r, &e), 0);
    assert_null(r.prompts[0].text);
    assert_int_equal(r.prompts[1].n_ids, 2);
    co_oai_req_free(&r);
}

/* An error message quoting the request stays UTF-8 where a length cut a character in two (JSON
 * carries UTF-8 only: the answer must not become "out of memory"). */
static void test_error_utf8(void **st) {
    (void)st;
    co_oai_error e;
    co_oai_fail(&e, 404, "p\xff", NULL, "no route for %.2s|", "a\xc3\xa9"); /* cuts the é */
    assert_string_equal(e.message, "no route for a?|");
    assert_string_equal(e.param, "p?");
    co_oai_fail(&e, 400, NULL, NULL, "%s", "ok \xe2\x82\xac \xed\xa0\x80 \xc0\xaf");
    assert_string_equal(e.message, "ok \xe2\x82\xac ??? ??");
    co_buf b = {0};
    co_oai_error_json(&e, &b);
    json_t *j = load(&b);
    assert_string_equal(str_at(json_object_get(j, "error"), "message"), e.message);
    json_decref(j);
    co_buf_free(&b);
}

static void test_finish_names(void **st) {
    (void)st;
    assert_null(co_oai_finish_name(CO_FINISH_NONE));
    assert_string_equal(co_oai_finish_name(CO_FINISH_STOP), "stop");
    assert_string_equal(co_oai_finish_name(CO_FINISH_LENGTH), "length");
    assert_string_equal(co_oai_finish_name(CO_FINISH_ERROR), "error");
    assert_string_equal(co_oai_finish_name(CO_FINISH_CANCELLED), "cancelled");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_completion_defaults),
        cmocka_unit_test(test_response_format),
        cmocka_unit_test(test_tools),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_detach),
        cmocka_unit_test(test_stoppable),
        cmocka_unit_test(test_error_utf8),
        cmocka_unit_test(test_prompt_forms),
        cmocka_unit_test(test_body_and_model),
        cmocka_unit_test(test_chat_messages),
        cmocka_unit_test(test_sampling),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_stream_and_options),
        cmocka_unit_test(test_error_json),
        cmocka_unit_test(test_completion_response),
        cmocka_unit_test(test_chat_response_and_chunks),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_finish_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
