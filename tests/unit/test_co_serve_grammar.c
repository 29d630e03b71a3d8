/* tests/unit/test_co_serve_grammar.c — the server's constrained vocabulary and forced calls
 * (co_serve_grammar.h) on a byte-level vocabulary that has Kimi-K2's tool-call markers as
 * control tokens: a marker is its own token (MARK and its text) and a forced call writes it as
 * that token, never spelled; a raw 0xFF byte token is never allowed; no JSON value (a response
 * format, or a call's arguments) can take a marker token; each tool's call, chosen by its name,
 * is held to its own parameters; a vocabulary without the markers spells them. */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_serve_grammar.h"
#include "coordinator/co_toolcall.h"
#include "tests/support/mwt_tk.h"
#include "tokenizer/tk.h"
#include "tokenizer/tk_chat.h"
#include "vindex/vx_meta.h"

static const mwt_tok kimi[] = {
    {"<|im_system|>", 3},
    {"<|im_user|>", 3},
    {"<|im_assistant|>", 3},
    {"<|im_middle|>", 3},
    {"<|im_end|>", 3},
    {"<|tool_calls_section_begin|>", 3},
    {"<|tool_calls_section_end|>", 3},
    {"<|tool_call_begin|>", 3},
    {"<|tool_call_end|>", 3},
    {"<|tool_call_argument_begin|>", 3},
};
#define N_KIMI (sizeof kimi / sizeof *kimi)
#define IM_END 260 /* 256 + the index of <|im_end|> */

static tk_tokenizer *vocab(size_t n_extra) {
    vx_meta *m = mwt_tk_meta("kimi-linear", "gpt2", "gpt-4o", kimi, n_extra, NULL, 0, -1,
                             n_extra > 4 ? IM_END : -1, NULL);
    tk_tokenizer *t;
    mw_err err = {{0}};
    if (tk_load_meta(m, "kimi vocab", &t, &err)) fail_msg("%s", err.msg);
    vx_meta_free(m);
    return t;
}

static int32_t id_of(const tk_tokenizer *t, const char *s) {
    const int32_t id = tk_find(t, s, strlen(s));
    assert_true(id >= 0);
    return id;
}

/* Follows the constraint greedily: at each step the lowest allowed id that is not an end,
 * preferring `prefer` when allowed; the text written (control tokens as their text). */
static void follow(void *st, const tk_tokenizer *t, int32_t prefer, tk_text *out) {
    const int32_t n = tk_n_vocab(t);
    float *logits = malloc((size_t)n * sizeof *logits);
    assert_non_null(logits);
    for (int step = 0; step < 400; step++) {
        for (int32_t i = 0; i < n; i++) logits[i] = 0;
        const int64_t n_ok = co_grammar_constraint_ops.mask(st, logits, n);
        assert_true(n_ok > 0);
        int32_t pick = -1;
        if (prefer >= 0 && !isinf(logits[prefer])) pick = prefer;
        for (int32_t i = 0; pick < 0 && i < n; i++)
            if (!isinf(logits[i]) && i != IM_END) pick = i;
        if (pick < 0) pick = IM_END;
        assert_int_equal(co_grammar_constraint_ops.accept(st, pick), 0);
        if (pick == IM_END) break;
        const char *b;
        size_t len;
        assert_int_equal(tk_piece(t, pick, true, &b, &len), 0);
        assert_int_equal(tk_text_add(out, b, len), 0);
    }
    free(logits);
}

static void test_markers_are_tokens(void **state) {
    (void)state;
    tk_tokenizer *t = vocab(N_KIMI);
    tk_chat *c;
    mw_err err = {{0}};
    assert_int_equal(tk_chat_open(t, "kimi-k2", &c, &err), 0);
    gr_vocab *v = co_grammar_vocab_new(t, c, &err);
    assert_non_null(v);
    /* a marker's bytes are MARK and its text; the raw byte 0xFF is no token */
    char mk[64];
    snprintf(mk, sizeof mk, "%c<|tool_call_begin|>", CO_GRAMMAR_MARK);
    assert_int_equal(gr_vocab_find(v, mk, strlen(mk)), id_of(t, "<|tool_call_begin|>"));
    assert_int_equal(gr_vocab_find(v, "\xff", 1), -1);
    assert_int_equal(gr_vocab_find(v, "<|im_middle|>", 13), -1); /* not a call's marker */

    /* a forced call: the section's marker token first, the byte '<' refused */
    const char *tools = "[{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\","
                        "\"properties\":{\"tz\":{\"enum\":[\"UTC\"]}},\"required\":[\"tz\"],"
                        "\"additionalProperties\":false}},{\"name\":\"ping\",\"parameters\":"
                        "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},"
                        "\"required\":[\"n\"],\"additionalProperties\":false}}]";
    void *st = co_grammar_call_constraint(v, "kimi-k2", tools, &err);
    if (!st) fail_msg("%s", err.msg);
    const int32_t n = tk_n_vocab(t);
    float *logits = malloc((size_t)n * sizeof *logits);
    for (int32_t i = 0; i < n; i++) logits[i] = 0;
    assert_int_equal(co_grammar_constraint_ops.mask(st, logits, n), 1);
    assert_false(isinf(logits[id_of(t, "<|tool_calls_section_begin|>")]));
    assert_true(isinf(logits['<']));
    free(logits);
    tk_text out = {0};
    follow(st, t, -1, &out);
    co_grammar_constraint_ops.end(st);
    /* read back: the lowest ids write get_time (the alternatives' first differing byte) */
    co_toolcall *p = co_toolcall_new("kimi-k2", 1);
    co_buf text = {0};
    json_t *calls = json_array();
    assert_int_equal(co_toolcall_feed(p, out.s, out.n, &text, calls, NULL), 0);
    assert_int_equal(co_toolcall_finish(p, &text, calls, NULL), 0);
    if (json_array_size(calls) != 1) fail_msg("not one call: '%s'", out.s);
    json_t *f = json_object_get(json_array_get(calls, 0), "function");
    assert_string_equal(json_string_value(json_object_get(f, "name")), "get_time");
    assert_string_equal(json_string_value(json_object_get(f, "arguments")), "{\"tz\": \"UTC\"}");
    assert_int_equal(text.len, 0);
    json_decref(calls);
    co_buf_free(&text);
    co_toolcall_free(p);
    tk_text_free(&out);

    /* a JSON value never takes a marker token, even where its text would fit a string */
    st = co_grammar_constraint(v, "{\"type\":\"string\"}", &err);
    assert_non_null(st);
    out = (tk_text){0};
    follow(st, t, id_of(t, "<|tool_call_end|>"), &out);
    assert_null(strstr(out.s, "<|tool_call_end|>"));
    co_grammar_constraint_ops.end(st);
    tk_text_free(&out);

    gr_vocab_free(v);
    tk_chat_free(c);
    tk_free(t);
}

/* A vocabulary without the markers: a forced call spells them, and reads back. */
static void test_markers_spelled(void **state) {
    (void)state;
    tk_tokenizer *t = vocab(5); /* the chat's tokens only */
    tk_chat *c;
    mw_err err = {{0}};
    assert_int_equal(tk_chat_open(t, "kimi-k2", &c, &err), 0);
    gr_vocab *v = co_grammar_vocab_new(t, c, &err);
    assert_non_null(v);
    void *st = co_grammar_call_constraint(
        v, "kimi-k2",
        "[{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{},"
        "\"additionalProperties\":false}}]",
        &err);
    if (!st) fail_msg("%s", err.msg);
    tk_text out = {0};
    follow(st, t, -1, &out);
    co_grammar_constraint_ops.end(st);
    assert_string_equal(out.s, "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
                               "<|tool_call_argument_begin|>{}<|tool_call_end|>"
                               "<|tool_calls_section_end|>");
    tk_text_free(&out);
    gr_vocab_free(v);
    tk_chat_free(c);
    tk_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_markers_are_tokens),
        cmocka_unit_test(test_markers_spelled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
