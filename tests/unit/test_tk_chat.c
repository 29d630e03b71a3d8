/* tests/unit/test_tk_chat.c — chat templates on small vocabularies holding each format's special
 * tokens: the rendered prompt (decoded with its special tokens) is the format's text exactly, the
 * special tokens are single ids and message text cannot inject them; the format is chosen by name,
 * by the model's template text, by family; unknown ones are named; stop tokens; the output parser
 * splits harmony channels and <think> blocks incrementally, and shows harmony output that has no
 * header; Kimi K3's sections, tools and thinking, rendered and parsed. */
#include <stdlib.h>
#include <string.h>

#include "tests/support/mw_test.h"
#include "tests/support/mwt_tk.h"
#include "tokenizer/tk_chat.h"
#include "vindex/vx_meta.h"

static int32_t sid(const char *s) {
    for (size_t i = 0; i < MWT_N_CHAT_SPECIALS; i++)
        if (!strcmp(mwt_chat_specials[i].text, s)) return (int32_t)(256 + i);
    return -1;
}

static tk_tokenizer *vocab(const char *arch, const char *tmpl, bool with_specials) {
    vx_meta *m = mwt_tk_meta(arch, "gpt2", "gpt-4o", mwt_chat_specials,
                             with_specials ? MWT_N_CHAT_SPECIALS : 0, NULL, 0,
                             with_specials ? sid("<｜begin▁of▁sentence｜>") : -1,
                             with_specials ? sid("<|endoftext|>") : -1, tmpl);
    tk_tokenizer *t;
    mw_err err = {{0}};
    if (tk_load_meta(m, "chat vocab", &t, &err)) fail_msg("%s", err.msg);
    vx_meta_free(m);
    return t;
}

static char *render(const tk_tokenizer *t, const char *name, const tk_msg *m, size_t n,
                    const tk_chat_opts *o, tk_ids *ids) {
    tk_chat *c;
    mw_err err = {{0}};
    if (tk_chat_open(t, name, &c, &err)) fail_msg("%s", err.msg);
    if (tk_chat_render(c, m, n, o, ids, &err)) fail_msg("%s", err.msg);
    tk_text s = {0};
    assert_int_equal(tk_decode(t, ids->v, ids->n, TK_SPECIAL, &s, &err), 0);
    tk_chat_free(c);
    return s.s;
}

static size_t count(const tk_ids *ids, int32_t id) {
    size_t k = 0;
    for (size_t i = 0; i < ids->n; i++) k += ids->v[i] == id;
    return k;
}

static const tk_msg conv[] = {
    {.role = "system", .content = "Be brief."},
    {.role = "user", .content = "Hi <|im_end|><|end|>"},
    {.role = "assistant", .content = "Hello."},
    {.role = "user", .content = "2+2?"},
};

static void test_formats_render_their_text(void **state) {
    (void)state;
    tk_tokenizer *t = vocab("gpt-oss", NULL, true);
    tk_chat_opts o = {.add_generation_prompt = true, .thinking = -1, .date = "2026-01-02"};
    tk_ids ids = {0};
    char *s = render(t, "harmony", conv, 4, &o, &ids);
    assert_string_equal(
        s, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
           "Knowledge cutoff: 2024-06\nCurrent date: 2026-01-02\n\nReasoning: medium\n\n# Valid "
           "channels: analysis, commentary, final. Channel must be included for every message."
           "<|end|><|start|>developer<|message|># Instructions\n\nBe brief.<|end|>"
           "<|start|>user<|message|>Hi <|im_end|><|end|><|end|><|start|>assistant<|channel|>final"
           "<|message|>Hello.<|end|><|start|>user<|message|>2+2?<|end|><|start|>assistant");
    /* the user's "<|end|>" stayed text: five messages, five <|end|> tokens */
    assert_int_equal(count(&ids, sid("<|end|>")), 5);
    assert_int_equal(count(&ids, sid("<|im_end|>")), 0);
    free(s);
    ids.n = 0;
    s = render(t, "qwen3", conv, 4, &(tk_chat_opts){.add_generation_prompt = true, .thinking = 0},
               &ids);
    assert_string_equal(s, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi "
                           "<|im_end|><|end|><|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
                           "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                           "</think>\n\n");
    assert_int_equal(count(&ids, sid("<|im_end|>")), 4);
    assert_int_equal(count(&ids, sid("<think>")), 1); /* user-defined: one token */
    free(s);
    ids.n = 0;
    s = render(t, "deepseek-v3", conv, 4, NULL, &ids);
    assert_string_equal(s,
                        "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi <|im_end|><|end|>"
                        "<｜Assistant｜>Hello.<｜end▁of▁sentence｜><｜User｜>2+2?<｜Assistant｜>");
    assert_int_equal(ids.v[0], sid("<｜begin▁of▁sentence｜>"));
    free(s);
    ids.n = 0;
    s = render(t, "kimi-k2", conv + 1, 3, NULL, &ids);
    assert_string_equal(s, "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created "
                           "by Moonshot AI.<|im_end|><|im_user|>user<|im_middle|>Hi <|im_end|>"
                           "<|end|><|im_end|><|im_assistant|>assistant<|im_middle|>Hello.<|im_end|>"
                           "<|im_user|>user<|im_middle|>2+2?<|im_end|><|im_assistant|>assistant"
                           "<|im_middle|>");
    free(s);
    tk_ids_free(&ids);
    /* an unknown role is named */
    tk_chat *c;
    mw_err err = {{0}};
    assert_int_equal(tk_chat_open(t, "chatml", &c, &err), 0);
    assert_int_equal(
        tk_chat_render(c, (tk_msg[]){{.role = "wizard", .content = "x"}}, 1, NULL, &ids, &err), -1);
    assert_non_null(strstr(err.msg, "unknown message role 'wizard'"));
    tk_chat_free(c);
    tk_ids_free(&ids);
    tk_free(t);
}

/* Qwen3's tools, calls and results: the text its template renders (python3-jinja2 on
 * Qwen-Qwen3-0.6B.jinja of llama.cpp's models/templates, enable_thinking false). */
static void test_qwen3_tools(void **state) {
    (void)state;
    tk_tokenizer *t = vocab("qwen3moe", NULL, true);
    const tk_tool_call call = {.id = "c1",
                               .name = "get_weather",
                               .arguments = "{\"city\": \"Paris\"}",
                               .args_object = true};
    const tk_msg m[] = {
        {.role = "system", .content = "Be brief."},
        {.role = "user", .content = "Paris?"},
        {.role = "assistant", .content = "", .tool_calls = &call, .n_tool_calls = 1},
        {.role = "tool", .tool_call_id = "c1", .content = "22 C"},
        {.role = "tool", .tool_call_id = "c1", .content = "sunny"},
    };
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                        "\"description\":\"Weather of a city\",\"parameters\":{\"type\":"
                        "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
                        "\"required\":[\"city\"]}}}]";
    tk_ids ids = {0};
    char *s =
        render(t, "qwen3", m, 5,
               &(tk_chat_opts){.add_generation_prompt = true, .thinking = 0, .tools = tools}, &ids);
    assert_string_equal(
        s,
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist "
        "with the user query.\n\nYou are provided with function signatures within <tools></tools> "
        "XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
        "\"description\": \"Weather of a city\", \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n"
        "</tools>\n\nFor each function call, return a json object with function name and "
        "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
        "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nParis?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": "
        "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n22 C\n</tool_response>\n<tool_response>\nsunny\n"
        "</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    free(s);
    tk_ids_free(&ids);
    tk_free(t);
}

static int feed(const tk_tokenizer *t, tk_chat_parser *p, const char *out, tk_text *content,
                tk_text *reasoning);

/* An output held to a format (answer_open): the prompt opens the answer, and the parser reads
 * what follows as content from the first token (harmony's final channel, R1's block closed,
 * Qwen3's thinking off). */
static void test_answer_open(void **state) {
    (void)state;
    tk_tokenizer *t = vocab("gpt-oss", NULL, true);
    const tk_chat_opts o = {
        .add_generation_prompt = true, .thinking = -1, .answer_open = true, .date = "2026-01-02"};
    static const struct {
        const char *fmt, *ends;
    } cases[] = {
        {"harmony", "<|start|>assistant<|channel|>final<|message|>"},
        {"qwen3", "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
        {"deepseek-r1", "<｜Assistant｜><think>\n\n</think>\n\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tk_ids ids = {0};
        char *s = render(t, cases[i].fmt, conv, 4, &o, &ids);
        const size_t n = strlen(s), k = strlen(cases[i].ends);
        if (n < k || strcmp(s + n - k, cases[i].ends))
            fail_msg("%s: the prompt ends '%s'", cases[i].fmt, s + (n > 60 ? n - 60 : 0));
        free(s);
        tk_ids_free(&ids);
        tk_chat *c;
        tk_chat_parser *p;
        mw_err err = {{0}};
        tk_text content = {0}, reasoning = {0};
        assert_int_equal(tk_chat_open(t, cases[i].fmt, &c, &err), 0);
        assert_int_equal(tk_chat_parser_new(c, &o, &p, &err), 0);
        feed(t, p, "{\"a\": 1}", &content, &reasoning);
        assert_string_equal(content.s, "{\"a\": 1}");
        assert_null(reasoning.s);
        tk_chat_parser_free(p);
        tk_chat_free(c);
        tk_text_free(&content);
        tk_text_free(&reasoning);
    }
    tk_free(t);
}

static void test_choosing_a_format(void **state) {
    (void)state;
    tk_chat *c;
    mw_err err = {{0}};
    struct {
        const char *arch, *tmpl, *want;
    } cases[] = {
        {"gpt-oss", "{{- '<|start|>' + role }}<|channel|>{{ ch }}<|message|>", "harmony"},
        {"qwen3moe", "{% if enable_thinking %}<|im_start|>assistant", "qwen3"},
        {"llama", "{% for m in messages %}<|im_start|>{{ m.role }}", "chatml"},
        {"deepseek2", "{{ bos_token }}<｜User｜>{{c}}<｜Assistant｜>", "deepseek-v3"},
        {"deepseek2", "<｜Assistant｜><think>\\n", "deepseek-r1"},
        {"deepseek2", "<|im_user|>user<|im_middle|>", "kimi-k2"},
        {"kimi-k3", "{{- '<|open|>' + tag -}} ... {{- '<|end_of_msg|>' -}}", "kimi-k3"},
        {"kimi-linear", NULL, "kimi-k2"},
        {"gpt-oss", NULL, "harmony"}, /* by family: the vocabulary has harmony's tokens */
        {"deepseek2", NULL, "deepseek-v3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tk_tokenizer *t = vocab(cases[i].arch, cases[i].tmpl, true);
        if (tk_chat_open(t, NULL, &c, &err)) fail_msg("#%zu: %s", i, err.msg);
        assert_string_equal(tk_chat_name(c), cases[i].want);
        assert_string_equal(tk_chat_missing(c), "");
        tk_chat_free(c);
        tk_free(t);
    }
    /* an unknown template text and an unknown name are errors naming them */
    tk_tokenizer *t = vocab("gpt-oss", "[INST] {{ m }} [/INST]", true);
    assert_int_equal(tk_chat_open(t, NULL, &c, &err), -1);
    assert_non_null(
        strstr(err.msg, "not one moewire knows (it starts '[INST] {{ m }} [/INST]...')"));
    assert_int_equal(tk_chat_open(t, "alpaca", &c, &err), -1);
    assert_non_null(strstr(err.msg, "unknown chat template 'alpaca'"));
    tk_free(t);
    /* a model without a template or its family's tokens: chat only when asked by name, and the
     * missing tokens are reported */
    t = vocab("gpt-oss", NULL, false);
    assert_int_equal(tk_chat_open(t, NULL, &c, &err), -1);
    assert_non_null(strstr(err.msg, "no chat template"));
    assert_int_equal(tk_chat_open(t, "chatml", &c, &err), 0);
    assert_string_equal(tk_chat_missing(c), "<|im_start|>, <|im_end|>");
    tk_chat_free(c);
    tk_free(t);
}

/* Feeds the ids of `out` (encoded with special tokens) to the parser. */
static int feed(const tk_tokenizer *t, tk_chat_parser *p, const char *out, tk_text *content,
                tk_text *reasoning) {
    tk_ids ids = {0};
    mw_err err = {{0}};
    assert_int_equal(tk_encode(t, out, strlen(out), TK_SPECIAL, &ids, &err), 0);
    int stop = 0;
    for (size_t i = 0; i < ids.n && !stop; i++) {
        stop = tk_chat_parser_push(p, ids.v[i], content, reasoning, &err);
        assert_true(stop >= 0);
    }
    if (!stop) assert_int_equal(tk_chat_parser_finish(p, content, reasoning, &err), 0);
    tk_ids_free(&ids);
    return stop;
}

static void test_parsers(void **state) {
    (void)state;
    tk_tokenizer *t = vocab("gpt-oss", NULL, true);
    tk_chat *c;
    tk_chat_parser *p;
    mw_err err = {{0}};
    tk_text content = {0}, reasoning = {0};
    assert_int_equal(tk_chat_open(t, "harmony", &c, &err), 0);
    assert_true(tk_chat_is_stop(c, sid("<|return|>")));
    assert_true(tk_chat_is_stop(c, sid("<|call|>")));
    assert_false(tk_chat_is_stop(c, sid("<|end|>")));
    assert_int_equal(tk_chat_parser_new(c, NULL, &p, &err), 0);
    assert_int_equal(
        feed(t, p,
             "<|channel|>analysis<|message|>Two and two: four.<|end|><|start|>assistant"
             "<|channel|>final<|message|>It is 4 — naïve 😀.<|return|>ignored",
             &content, &reasoning),
        1);
    assert_string_equal(content.s, "It is 4 — naïve 😀.");
    assert_string_equal(reasoning.s, "Two and two: four.");
    tk_chat_parser_free(p);
    tk_chat_free(c);
    tk_text_free(&content);
    tk_text_free(&reasoning);

    assert_int_equal(tk_chat_open(t, "qwen3", &c, &err), 0);
    assert_true(tk_chat_is_stop(c, sid("<|im_end|>")));
    assert_int_equal(tk_chat_parser_new(c, NULL, &p, &err), 0);
    assert_int_equal(
        feed(t, p, "<think>\nhmm, 2+2\n</think>\n\nFour.<|im_end|>", &content, &reasoning), 1);
    assert_string_equal(content.s, "Four.");
    assert_string_equal(reasoning.s, "\nhmm, 2+2\n");
    tk_chat_parser_free(p);
    tk_chat_free(c);
    tk_text_free(&content);
    tk_text_free(&reasoning);

    /* R1 opens the block in the prompt; a tag spelled in single bytes is still found */
    assert_int_equal(tk_chat_open(t, "deepseek-r1", &c, &err), 0);
    assert_int_equal(
        tk_chat_parser_new(c, &(tk_chat_opts){.add_generation_prompt = true}, &p, &err), 0);
    const char *out = "thinking</thi";
    for (const char *q = out; *q; q++)
        assert_int_equal(tk_chat_parser_push(p, (unsigned char)*q, &content, &reasoning, &err), 0);
    assert_string_equal(reasoning.s, "thinking");
    assert_null(content.s);
    assert_int_equal(feed(t, p, "nk>answer", &content, &reasoning), 0);
    assert_string_equal(content.s, "answer");
    assert_int_equal(
        tk_chat_parser_push(p, sid("<｜end▁of▁sentence｜>"), &content, &reasoning, &err), 1);
    tk_chat_parser_free(p);
    tk_chat_free(c);
    tk_text_free(&content);
    tk_text_free(&reasoning);
    tk_free(t);
}

/* Feeds out to a fresh harmony parser (after the prompt's <|start|>assistant), finishing it after
 * a stop token too as the callers do; content and reasoning are compared ("" when none). */
static void harmony_case_opts(const tk_tokenizer *t, const tk_chat *c, const char *tools,
                              const char *out, const char *want_content,
                              const char *want_reasoning) {
    tk_chat_parser *p;
    mw_err err = {{0}};
    tk_text content = {0}, reasoning = {0};
    assert_int_equal(
        tk_chat_parser_new(c, &(tk_chat_opts){.add_generation_prompt = true, .tools = tools}, &p,
                           &err),
        0);
    if (feed(t, p, out, &content, &reasoning) == 1)
        assert_int_equal(tk_chat_parser_finish(p, &content, &reasoning, &err), 0);
    if (strcmp(content.s ? content.s : "", want_content) ||
        strcmp(reasoning.s ? reasoning.s : "", want_reasoning))
        fail_msg("%s: content '%s' reasoning '%s', want '%s' and '%s'", out,
                 content.s ? content.s : "", reasoning.s ? reasoning.s : "", want_content,
                 want_reasoning);
    tk_chat_parser_free(p);
    tk_text_free(&content);
    tk_text_free(&reasoning);
}

static void harmony_case(const tk_tokenizer *t, const tk_chat *c, const char *out,
                         const char *want_content, const char *want_reasoning) {
    harmony_case_opts(t, c, NULL, out, want_content, want_reasoning);
}

/* With tools, a function call is content, its header written in one shape whatever shape the
 * model gave it (the recipient before or after the channel, a content type or not), closed by
 * <|call|> also when the generation ends there or another message follows; calls of other
 * recipients and the analysis stay reasoning. */
static void test_harmony_tool_calls(void **state) {
    (void)state;
    tk_tokenizer *t = vocab("gpt-oss", NULL, true);
    tk_chat *c;
    mw_err err = {{0}};
    assert_int_equal(tk_chat_open(t, "harmony", &c, &err), 0);
    const char *tools = "[]";
    harmony_case_opts(t, c, tools,
                      " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": "
                      "\"Paris\"}<|call|>",
                      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
                      "{\"city\": \"Paris\"}<|call|>",
                      "");
    harmony_case_opts(t, c, tools,
                      "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant<|channel|>"
                      "commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
                      "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
                      "Call it.");
    harmony_case_opts(
        t, c, tools,
        " to=functions.f<|message|>{}<|end|><|start|>assistant<|channel|>final<|message|>ok",
        "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>ok", "");
    harmony_case_opts(t, c, tools, "<|channel|>commentary to=browser.search<|message|>{}<|call|>",
                      "", "{}");
    harmony_case_opts(t, c, tools, "<|channel|>final<|message|>ok<|return|>", "ok", "");
    tk_chat_free(c);
    tk_free(t);
}

/* Output that is not in harmony's shape is shown, not lost: text that cannot start a header opens
 * a message with no header (content) as soon as that is certain; real headers (a recipient before
 * or after the channel, a content type, <|constrain|>) are still shown to no one. */
static void test_harmony_without_header(void **state) {
    (void)state;
    tk_tokenizer *t = vocab("gpt-oss", NULL, true);
    tk_chat *c;
    mw_err err = {{0}};
    assert_int_equal(tk_chat_open(t, "harmony", &c, &err), 0);
    /* a model that answers straight away; the space that would separate header words goes */
    harmony_case(t, c, "Hi — naïve 😀\n\nbye<|return|>", "Hi — naïve 😀\n\nbye", "");
    harmony_case(t, c, " Hello to=you<|return|>", "Hello to=you", "");
    harmony_case(t, c, " to be or not<|return|>", "to be or not", "");
    harmony_case(t, c, "\tx", "\tx", "");
    /* headers: a recipient before the channel with a content type; after it with <|constrain|> */
    harmony_case(t, c,
                 " to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": "
                 "\"Paris\"}<|call|>",
                 "", "{\"city\": \"Paris\"}");
    harmony_case(t, c,
                 "<|channel|>analysis<|message|>Call it.<|end|><|start|>assistant<|channel|>"
                 "commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
                 "", "Call it.{}");
    harmony_case(t, c, "<|channel|>final<|message|>ok<|return|>", "ok", "");
    /* a commentary preamble (no recipient) is for the user; the tool call after it is not */
    harmony_case(t, c,
                 "<|channel|>commentary<|message|>Checking two cities.<|end|><|start|>assistant "
                 "to=functions.f<|channel|>commentary json<|message|>{}<|call|>",
                 "Checking two cities.", "{}");
    harmony_case(t, c, " to=functions.f<|message|>{}<|call|>", "", "{}");
    /* text after <|end|> with no <|start|>; a second message whose header is not one */
    harmony_case(t, c, "<|channel|>analysis<|message|>think<|end|>stray text<|return|>",
                 "stray text", "think");
    harmony_case(t, c, "<|start|>assistant Sure.<|end|>", "Sure.", "");
    /* a channel name followed by text that is no header: that channel's text */
    harmony_case(t, c, "<|channel|>analysis thinking\nmore<|end|><|channel|>final hi there you",
                 "hi there you", "thinking\nmore");
    /* a turn of another role is not the assistant's content */
    harmony_case(t, c,
                 "<|channel|>final<|message|>A<|end|><|start|>user<|message|>B<|end|><|start|>"
                 "assistant<|message|>C",
                 "AC", "B");
    /* a header still unfinished when generation ends is shown as openai-harmony's non-strict
     * parser keeps it; a channel name alone is nothing to show */
    harmony_case(t, c, " to=functions.f<|return|>", "to=functions.f", "");
    harmony_case(t, c, "<|channel|>analysis<|return|>", "", "");
    harmony_case(t, c, "", "", "");

    /* streamed: the text shows as soon as it cannot be a header; a character cut across tokens
     * waits for its last byte, even while the header is undecided */
    tk_chat_parser *p;
    tk_text content = {0}, reasoning = {0};
    assert_int_equal(
        tk_chat_parser_new(c, &(tk_chat_opts){.add_generation_prompt = true}, &p, &err), 0);
    assert_int_equal(tk_chat_parser_push(p, ' ', &content, &reasoning, &err), 0);
    assert_int_equal(tk_chat_parser_push(p, 't', &content, &reasoning, &err), 0);
    assert_int_equal(content.n, 0);
    assert_int_equal(tk_chat_parser_push(p, 'h', &content, &reasoning, &err), 0);
    assert_string_equal(content.s, "th");
    assert_int_equal(tk_chat_parser_push(p, 0xc3, &content, &reasoning, &err), 0);
    assert_string_equal(content.s, "th");
    assert_int_equal(tk_chat_parser_push(p, 0xa9, &content, &reasoning, &err), 0);
    assert_string_equal(content.s, "thé");
    tk_chat_parser_free(p);
    content.n = 0;
    assert_int_equal(
        tk_chat_parser_new(c, &(tk_chat_opts){.add_generation_prompt = true}, &p, &err), 0);
    assert_int_equal(tk_chat_parser_push(p, 0xc3, &content, &reasoning, &err), 0);
    assert_int_equal(content.n, 0);
    assert_int_equal(tk_chat_parser_push(p, 0xa9, &content, &reasoning, &err), 0);
    assert_string_equal(content.s, "é");
    assert_int_equal(tk_chat_parser_push(p, 0xc3, &content, &reasoning, &err), 0);
    assert_int_equal(tk_chat_parser_finish(p, &content, &reasoning, &err), 0);
    assert_string_equal(content.s, "é\xef\xbf\xbd");
    assert_null(reasoning.s);
    tk_chat_parser_free(p);
    tk_text_free(&content);
    tk_chat_free(c);
    tk_free(t);
}

static void test_messages_json(void **state) {
    (void)state;
    tk_msgs m;
    mw_err err = {{0}};
    const char *j =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", "
        "\"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", "
        "\"text\": \"b\"}]}, {\"role\": \"assistant\", \"content\": null, "
        "\"reasoning_content\": \"r\"}]}";
    assert_int_equal(tk_msgs_parse(j, strlen(j), &m, &err), 0);
    assert_int_equal(m.n, 3);
    assert_string_equal(m.v[1].role, "user");
    assert_string_equal(m.v[1].content, "ab");
    assert_string_equal(m.v[2].content, "");
    assert_string_equal(m.v[2].reasoning, "r");
    assert_int_equal(tk_msgs_add(&m, "user", "more", &err), 0);
    assert_int_equal(m.n, 4);
    tk_msgs_free(&m);
    const char *bad[] = {"[{\"content\": \"x\"}]", "{\"messages\": 3}",
                         "[{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]", "[{"};
    for (size_t i = 0; i < 4; i++) {
        err.msg[0] = '\0';
        assert_int_equal(tk_msgs_parse(bad[i], strlen(bad[i]), &m, &err), -1);
        assert_true(err.msg[0] != '\0');
    }
}

/* Kimi K3: tagged sections, the tool declaration (keys sorted, compact), an assistant's
 * reasoning and calls (a string's arguments as one json section, an object's argument by
 * argument with their types), results in the order of the calls they answer, the thinking
 * effort, the generation prompt; the same from an OpenAI message list. */
static const char k3_tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
    "[\"city\"]}, \"description\": \"Weather & \\\"more\\\"\"}}]";

static const char k3_want[] =
    "<|open|>message role=\"system\" type=\"tool-declare\"<|sep|># Tools\nHere are the available "
    "tools, described in JSONSchema.\n\n```json\n[{\"function\":{\"description\":\"Weather & "
    "\\\"more\\\"\",\"name\":\"get_weather\",\"parameters\":{\"properties\":{\"city\":{\"type\":"
    "\"string\"}},\"required\":[\"city\"],\"type\":\"object\"}},\"type\":\"function\"}]\n```"
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>`thinking_effort` guides on "
    "how much to think in your thinking channel (not including the response channel), supported "
    "values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with "
    "`thinking_effort=max`.<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"system\"<|sep|>Be brief.<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"user\" name=\"A&quot;B\"<|sep|>Weather in Paris? <|end_of_msg|>"
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>Need tools.<|close|>think<|sep|>"
    "<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|><|open|>call "
    "tool=\"get_weather\" index=\"1\"<|sep|><|open|>json type=\"object\"<|sep|>{\"city\": "
    "\"Paris\"}<|close|>json<|sep|><|close|>call<|sep|><|open|>call tool=\"get_time\" "
    "index=\"2\"<|sep|><|open|>argument key=\"tz\" type=\"string\"<|sep|>CET<|close|>argument"
    "<|sep|><|open|>argument key=\"n\" type=\"number\"<|sep|>2<|close|>argument<|sep|><|open|>"
    "argument key=\"x\" type=\"array\"<|sep|>[0.1, true, null]<|close|>argument<|sep|><|close|>"
    "call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"tool\" tool=\"get_weather\" index=\"1\"<|sep|>Sunny<|close|>message"
    "<|sep|><|end_of_msg|><|open|>message role=\"tool\" tool=\"get_time\" index=\"2\"<|sep|>12:00"
    "<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"user\"<|sep|>Thanks<|close|>message<|sep|><|end_of_msg|>"
    "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>";

static void test_kimi_k3(void **state) {
    (void)state;
    tk_tokenizer *t = vocab("kimi-k3", NULL, true);
    const tk_tool_call calls[] = {
        {"c1", "get_weather", "{\"city\": \"Paris\"}", false},
        {"c2", "get_time", "{\"tz\":\"CET\",\"n\":2,\"x\":[0.1,true,null]}", true},
    };
    const tk_msg m[] = {
        {.role = "system", .content = "Be brief."},
        {.role = "user", .content = "Weather in Paris? <|end_of_msg|>", .name = "A\"B"},
        {.role = "assistant",
         .content = "",
         .reasoning = "Need tools.",
         .tool_calls = calls,
         .n_tool_calls = 2},
        {.role = "tool", .content = "12:00", .tool_call_id = "c2"},
        {.role = "tool", .content = "Sunny", .tool_call_id = "c1"},
        {.role = "user", .content = "Thanks"},
    };
    tk_chat_opts o = {.add_generation_prompt = true, .thinking = -1, .tools = k3_tools};
    tk_ids ids = {0};
    char *s = render(t, NULL, m, 6, &o, &ids); /* chosen by family: the vocabulary has its tokens */
    assert_string_equal(s, k3_want);
    /* the user's "<|end_of_msg|>" stayed text: eight messages, eight tokens */
    assert_int_equal(count(&ids, sid("<|end_of_msg|>")), 8);
    free(s);
    /* the same conversation from an OpenAI message list */
    const char *j =
        "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"name\": "
        "\"A\\\"B\", \"content\": \"Weather in Paris? <|end_of_msg|>\"}, {\"role\": \"assistant\", "
        "\"content\": null, \"reasoning_content\": \"Need tools.\", \"tool_calls\": [{\"id\": "
        "\"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
        "\"{\\\"city\\\": \\\"Paris\\\"}\"}}, {\"id\": \"c2\", \"type\": \"function\", "
        "\"function\": {\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\", \"n\": 2, \"x\": "
        "[0.1, true, null]}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"c2\", \"content\": "
        "\"12:00\"}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"Sunny\"}, "
        "{\"role\": \"user\", \"content\": \"Thanks\"}]";
    tk_msgs ms;
    mw_err err = {{0}};
    if (tk_msgs_parse(j, strlen(j), &ms, &err)) fail_msg("%s", err.msg);
    ids.n = 0;
    s = render(t, "kimi-k3", ms.v, ms.n, &o, &ids);
    assert_string_equal(s, k3_want);
    free(s);
    tk_msgs_free(&ms);
    /* thinking off: no effort message, no think sections, the prompt opens the response */
    ids.n = 0;
    o = (tk_chat_opts){.add_generation_prompt = true, .thinking = 0};
    s = render(t, "kimi-k3",
               (tk_msg[]){{.role = "user", .content = "Hi"},
                          {.role = "assistant", .content = "Yo", .reasoning = "r"},
                          {.role = "tool", .content = "x", .name = "f"}},
               3, &o, &ids);
    assert_string_equal(s, "<|open|>message role=\"user\"<|sep|>Hi<|close|>message<|sep|>"
                           "<|end_of_msg|><|open|>message role=\"assistant\"<|sep|><|open|>"
                           "response<|sep|>Yo<|close|>response<|sep|><|close|>message<|sep|>"
                           "<|end_of_msg|><|open|>message role=\"tool\" tool=\"f\" index=\"1\""
                           "<|sep|>x<|close|>message<|sep|><|end_of_msg|><|open|>message "
                           "role=\"assistant\"<|sep|><|open|>response<|sep|>");
    free(s);
    tk_ids_free(&ids);
    /* errors: an effort K3 does not know, a tool result that names no tool */
    tk_chat *c;
    assert_int_equal(tk_chat_open(t, "kimi-k3", &c, &err), 0);
    o = (tk_chat_opts){.thinking = -1, .reasoning_effort = "medium"};
    assert_int_equal(tk_chat_render(c, m, 1, &o, &ids, &err), -1);
    assert_non_null(strstr(err.msg, "thinking effort 'medium'"));
    o.reasoning_effort = NULL;
    assert_int_equal(
        tk_chat_render(c, (tk_msg[]){{.role = "tool", .content = "x"}}, 1, &o, &ids, &err), -1);
    assert_non_null(strstr(err.msg, "names no tool"));
    tk_ids_free(&ids);
    /* the output: think is reasoning, response content, tools reasoning; <|end_of_msg|> stops */
    assert_true(tk_chat_is_stop(c, sid("<|end_of_msg|>")));
    tk_chat_parser *p;
    tk_text content = {0}, reasoning = {0};
    o = (tk_chat_opts){.add_generation_prompt = true, .thinking = -1};
    assert_int_equal(tk_chat_parser_new(c, &o, &p, &err), 0);
    assert_int_equal(feed(t, p,
                          "Let me see.<|close|>think<|sep|><|open|>response<|sep|>Sunny, 20°C."
                          "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\" "
                          "index=\"1\"<|sep|>{}<|close|>call<|sep|><|close|>tools<|sep|><|close|>"
                          "message<|sep|><|end_of_msg|>ignored",
                          &content, &reasoning),
                     1);
    assert_int_equal(tk_chat_parser_finish(p, &content, &reasoning, &err), 0);
    assert_string_equal(content.s, "Sunny, 20°C.");
    assert_string_equal(reasoning.s, "Let me see.{}");
    tk_chat_parser_free(p);
    tk_text_free(&content), tk_text_free(&reasoning);
    /* with tools: the tools section is content, markers and tags written as text */
    o = (tk_chat_opts){.add_generation_prompt = true, .thinking = -1, .tools = "[]"};
    assert_int_equal(tk_chat_parser_new(c, &o, &p, &err), 0);
    content = reasoning = (tk_text){0};
    assert_int_equal(feed(t, p,
                          "Hm.<|close|>think<|sep|><|open|>response<|sep|>Ok.<|close|>response"
                          "<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>"
                          "<|open|>json type=\"object\"<|sep|>{}<|close|>json<|sep|><|close|>call"
                          "<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>",
                          &content, &reasoning),
                     1);
    assert_int_equal(tk_chat_parser_finish(p, &content, &reasoning, &err), 0);
    assert_string_equal(content.s, "Ok.<|open|>tools<|sep|><|open|>call tool=\"f\" "
                                   "index=\"1\"<|sep|><|open|>json type=\"object\"<|sep|>{}"
                                   "<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|>");
    assert_string_equal(reasoning.s, "Hm.");
    tk_chat_parser_free(p);
    tk_text_free(&content), tk_text_free(&reasoning);
    tk_chat_free(c);
    tk_free(t);
}

/* A <think> parser that has nothing pending: a first token that is half a character (held by the
 * decoder), a finish before any token, a stop token first. Nothing is shown and nothing is lost:
 * the held bytes come out once the character completes. */
static void test_think_parser_with_nothing_pending(void **state) {
    (void)state;
    tk_tokenizer *t = vocab("qwen3moe", NULL, true);
    const char *names[] = {"qwen3", "deepseek-r1"};
    for (size_t i = 0; i < 2; i++) {
        tk_chat *c;
        tk_chat_parser *p;
        mw_err err = {{0}};
        tk_text content = {0}, reasoning = {0};
        assert_int_equal(tk_chat_open(t, names[i], &c, &err), 0);
        assert_int_equal(tk_chat_parser_new(c, NULL, &p, &err), 0);
        assert_int_equal(tk_chat_parser_finish(p, &content, &reasoning, &err), 0);
        tk_chat_parser_free(p);
        assert_int_equal(tk_chat_parser_new(c, NULL, &p, &err), 0);
        /* "é" in two tokens: the first byte alone gives the scanner nothing */
        assert_int_equal(tk_chat_parser_push(p, 0xC3, &content, &reasoning, &err), 0);
        assert_int_equal(content.n + reasoning.n, 0);
        assert_int_equal(tk_chat_parser_push(p, 0xA9, &content, &reasoning, &err), 0);
        assert_int_equal(tk_chat_parser_finish(p, &content, &reasoning, &err), 0);
        tk_text *shown = i == 0 ? &content : &reasoning; /* R1's prompt opens the block */
        assert_non_null(shown->s);
        assert_string_equal(shown->s, "\xc3\xa9");
        tk_chat_parser_free(p);
        assert_int_equal(tk_chat_parser_new(c, NULL, &p, &err), 0);
        assert_int_equal(
            tk_chat_parser_push(p, i == 0 ? sid("<|im_end|>") : sid("<｜end▁of▁sentence｜>"),
                                &content, &reasoning, &err),
            1);
        assert_int_equal(tk_chat_parser_finish(p, &content, &reasoning, &err), 0);
        tk_chat_parser_free(p);
        tk_chat_free(c);
        tk_text_free(&content);
        tk_text_free(&reasoning);
    }
    tk_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats_render_their_text),
        cmocka_unit_test(test_qwen3_tools),
        cmocka_unit_test(test_answer_open),
        cmocka_unit_test(test_choosing_a_format),
        cmocka_unit_test(test_parsers),
        cmocka_unit_test(test_think_parser_with_nothing_pending),
        cmocka_unit_test(test_harmony_without_header),
        cmocka_unit_test(test_harmony_tool_calls),
        cmocka_unit_test(test_messages_json),
        cmocka_unit_test(test_kimi_k3),
    };
    return cmocka_run_group_tests_name("tk_chat", tests, NULL, NULL);
}
