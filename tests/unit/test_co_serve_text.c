/* tests/unit/test_co_serve_text.c — the server's text side on a synthesized gpt-oss model (which
 * carries a byte-level tokenizer and the harmony format): completion prompts round-trip through
 * the job's streaming detokenizer; a chat job maps harmony's analysis channel to the reasoning and
 * the final channel to the content and ends at <|return|>; messages render through the template;
 * a model without a chat format refuses chat jobs with the reason; Kimi K3's own template is
 * given its own thinking switch (off for a constrained output). */
#include "tests/support/mw_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_serve_text.h"
#include "tokenizer/tk.h"

static char model[4096];

static int setup(void **st) {
    if (mwt_tmp_setup(st)) return -1;
    snprintf(model, sizeof model, "%s/m.gguf", mwt_tmp);
    char *argv[] = {(char *)mwt_bin("vindex"),
                    "synth",
                    "--arch",
                    "gpt-oss",
                    "--layers",
                    "1",
                    "--hidden",
                    "64",
                    "--heads",
                    "2",
                    "--kv-heads",
                    "1",
                    "--head-dim",
                    "32",
                    "--experts",
                    "4",
                    "--top-k",
                    "2",
                    "--expert-ff",
                    "64",
                    "--vocab",
                    "1024",
                    "--seed",
                    "5",
                    "--format",
                    "gguf",
                    model,
                    NULL};
    return mwt_run(argv, NULL, NULL, 120000) == 0 ? 0 : -1;
}

/* Runs ids through a job; returns the stop position (-1 none). */
static int run_job(co_stext *t, const co_stext_chat_opts *chat, const int32_t *ids, size_t n,
                   co_buf *content, co_buf *reasoning) {
    mw_err err = {{0}};
    void *j = co_stext_job(t, chat, &err);
    if (!j) fail_msg("%s", err.msg);
    int stop = -1;
    for (size_t i = 0; i < n && stop < 0; i++)
        if (co_stext_ops.piece(j, ids[i], content, reasoning)) stop = (int)i;
    co_stext_ops.flush(j, content, reasoning);
    co_stext_ops.end(j);
    return stop;
}

static void test_completion_and_harmony(void **st) {
    (void)st;
    mw_err err = {{0}};
    vx_source *src;
    co_stext *t;
    tk_tokenizer *tok;
    if (vx_source_open(model, NULL, &src, &err) || co_stext_open(src, NULL, &t, &err) ||
        tk_load_gguf(model, &tok, &err))
        fail_msg("%s", err.msg);
    assert_non_null(t);
    /* the model's template renders, harmony parses the replies */
    assert_string_equal(co_stext_chat_name(t), "the model's template (jinja), harmony replies");
    /* completions: text -> ids -> streamed text */
    const char *text = "Hello, w\xc3\xb6rld 42!";
    int32_t *ids;
    int64_t n;
    assert_int_equal(co_stext_encode(t, text, strlen(text), &ids, &n, &err), 0);
    co_buf c = {0}, r = {0};
    assert_int_equal(run_job(t, NULL, ids, (size_t)n, &c, &r), -1);
    assert_string_equal(c.p, text);
    assert_int_equal(r.len, 0);
    free(ids);
    /* chat: a harmony reply */
    const char *reply = "<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant"
                        "<|channel|>final<|message|>Hi there.<|return|>ignored";
    tk_ids v = {0};
    assert_int_equal(tk_encode(tok, reply, strlen(reply), TK_SPECIAL, &v, &err), 0);
    co_buf_clear(&c);
    co_buf_clear(&r);
    co_stext_chat_opts o = {.thinking = -1};
    int stop = run_job(t, &o, v.v, v.n, &c, &r);
    assert_true(stop > 0 && (size_t)stop < v.n - 1);
    assert_string_equal(c.p, "Hi there.");
    assert_string_equal(r.p, "Think first.");
    tk_ids_free(&v);
    /* messages through the template */
    json_t *msgs =
        json_loads("[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                   "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}]}]",
                   0, NULL);
    assert_int_equal(co_stext_chat(t, msgs, &o, &ids, &n, &err), 0);
    tk_text out = {0};
    assert_int_equal(tk_decode(tok, ids, (size_t)n, TK_SPECIAL, &out, &err), 0);
    assert_non_null(strstr(out.s, "<|start|>user<|message|>Hi<|end|>"));
    assert_non_null(strstr(out.s + out.n - 20, "<|start|>assistant"));
    tk_text_free(&out);
    free(ids);
    json_decref(msgs);
    /* logprob names are the vocabulary's bytes */
    co_buf name = {0};
    co_stext_token_name(t, tk_find(tok, "<|return|>", 10), &name);
    assert_string_equal(name.p, "<|return|>");
    co_buf_free(&name);
    co_buf_free(&c);
    co_buf_free(&r);
    co_stext_free(t);
    tk_free(tok);
    vx_source_close(src);
}

/* The llama.cpp fixture has a tokenizer but no chat template: chat is refused with the reason,
 * unless a format is named. */
static void test_no_chat_format(void **st) {
    (void)st;
    mw_err err = {{0}};
    vx_source *src;
    co_stext *t;
    if (vx_source_open(mwt_fixture("llamacpp/gpt-oss-tiny/model.gguf"), NULL, &src, &err) ||
        co_stext_open(src, NULL, &t, &err))
        fail_msg("%s", err.msg);
    assert_non_null(t);
    assert_null(co_stext_chat_name(t));
    co_stext_chat_opts o = {.thinking = -1};
    assert_null(co_stext_job(t, &o, &err));
    assert_non_null(strstr(err.msg, "no chat format"));
    co_stext_free(t);
    assert_int_equal(co_stext_open(src, "no-such-format", &t, &err), -1);
    assert_non_null(strstr(err.msg, "--chat-template"));
    vx_source_close(src);
}

/* The prompt's text through co_stext_chat, decoded with its special tokens. */
static char *chat_text(co_stext *t, const char *msgs, const co_stext_chat_opts *o) {
    mw_err err = {{0}};
    json_t *m = json_loads(msgs, 0, NULL);
    assert_non_null(m);
    int32_t *ids = NULL;
    int64_t n = 0;
    if (co_stext_chat(t, m, o, &ids, &n, &err)) fail_msg("%s", err.msg);
    json_decref(m);
    tk_text s = {0};
    if (tk_decode(co_stext_tokenizer(t), ids, (size_t)n, TK_SPECIAL, &s, &err))
        fail_msg("%s", err.msg);
    free(ids);
    return s.s;
}

static bool ends_with(const char *s, const char *tail) {
    const size_t a = strlen(s), b = strlen(tail);
    return a >= b && !memcmp(s + a - b, tail, b);
}

/* Kimi K3's own template thinks by `thinking`, not enable_thinking: a constrained output (the
 * answer opened) renders a prompt opening the response, whatever the request's kwargs say, and a
 * request's `thinking` kwarg is read as the switch the reply is parsed by. */
static void test_k3_template_thinking(void **st) {
    (void)st;
    mw_err err = {{0}};
    vx_source *src;
    co_stext *t;
    if (vx_source_open(mwt_fixture("llamacpp/kimi-k3-tiny/model.gguf"), NULL, &src, &err) ||
        co_stext_open(src, "kimi-k3", &t, &err) ||
        co_stext_template_file(t, mwt_fixture("templates/Kimi-K3.jinja"), &err))
        fail_msg("%s", err.msg);
    const char *msgs = "[{\"role\":\"user\",\"content\":\"hi\"}]";
    co_stext_chat_opts o = {.thinking = -1};
    char *s = chat_text(t, msgs, &o);
    assert_true(ends_with(s, "<|open|>think<|sep|>")); /* the template's default: thinking */
    free(s);
    json_t *kw = json_loads("{\"thinking\": true}", 0, NULL);
    o.answer_open = true, o.kwargs = kw;
    s = chat_text(t, msgs, &o);
    if (!ends_with(s, "<|open|>response<|sep|>")) fail_msg("an opened answer renders: %s", s);
    free(s);
    o.answer_open = false, o.thinking = 0, o.kwargs = NULL; /* enable_thinking: false, --think */
    s = chat_text(t, msgs, &o);
    assert_true(ends_with(s, "<|open|>response<|sep|>"));
    free(s);
    assert_int_equal(co_stext_thinking(t, kw), 1);
    json_decref(kw);
    kw = json_loads("{\"thinking\": false, \"enable_thinking\": true}", 0, NULL);
    assert_int_equal(co_stext_thinking(t, kw), 0);
    assert_int_equal(co_stext_thinking(t, NULL), -1);
    json_decref(kw);
    co_stext_free(t);
    vx_source_close(src);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_completion_and_harmony),
        cmocka_unit_test(test_no_chat_format),
        cmocka_unit_test(test_k3_template_thinking),
    };
    return cmocka_run_group_tests(tests, setup, mwt_tmp_teardown);
}
