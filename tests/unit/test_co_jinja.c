/* tests/unit/test_co_jinja.c — chat prompts through a model's own Jinja template (co_jinja.h) on
 * a small vocabulary holding every chat format's special tokens: the template sees the
 * messages, tools, add_generation_prompt, the vocabulary's bos/eos text, the request's
 * chat_template_kwargs, --think as enable_thinking and reasoning_effort (kwargs winning), and a
 * tool call's JSON-text arguments as an object; the special tokens it writes become single ids,
 * no BOS is added; a named format or a model without a template gives no co_jinja, and a
 * template that does not parse falls back (NULL, no error); a failing template names the line. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_jinja.h"
#include "tests/support/mw_test.h"
#include "tests/support/mwt_tk.h"
#include "vindex/vx_meta.h"

static int32_t sid(const char *s) {
    for (size_t i = 0; i < MWT_N_CHAT_SPECIALS; i++)
        if (!strcmp(mwt_chat_specials[i].text, s)) return (int32_t)(256 + i);
    return -1;
}

static tk_tokenizer *vocab(const char *tmpl) {
    vx_meta *m = mwt_tk_meta("qwen3moe", "gpt2", "gpt-4o", mwt_chat_specials, MWT_N_CHAT_SPECIALS,
                             NULL, 0, sid("<|endoftext|>"), sid("<|im_end|>"), tmpl);
    tk_tokenizer *t;
    mw_err err = {{0}};
    if (tk_load_meta(m, "jinja vocab", &t, &err)) fail_msg("%s", err.msg);
    vx_meta_free(m);
    return t;
}

static char *render(const tk_tokenizer *t, co_jinja *j, const char *msgs, const co_jinja_opts *o,
                    tk_ids *ids, mw_err *err) {
    json_t *m = json_loads(msgs, 0, NULL);
    assert_non_null(m);
    int rc = co_jinja_prompt(j, m, o, ids, err);
    json_decref(m);
    if (rc) return NULL;
    tk_text s = {0};
    assert_int_equal(tk_decode(t, ids->v, ids->n, TK_SPECIAL, &s, err), 0);
    return s.s;
}

static const char TMPL[] =
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% for c in m.tool_calls or [] %}[{{ c.function.name }}:{{ c.function.arguments.city }}]"
    "{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if tools %}tools={{ tools|map(attribute='function.name')|join(',') }}\n{% endif %}"
    "think={{ enable_thinking }} effort={{ reasoning_effort }} x={{ x }} eos={{ eos_token }}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

static void test_render(void **state) {
    (void)state;
    tk_tokenizer *t = vocab(TMPL);
    co_jinja *j = NULL;
    mw_err err = {{0}};
    assert_int_equal(co_jinja_open(t, NULL, &j, &err), 0);
    assert_non_null(j);
    const char *msgs =
        "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
        "\"content\":\"\",\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\","
        "\"function\":{\"name\":\"w\",\"arguments\":\"{\\\"city\\\": \\\"Oslo\\\"}\"}}]}]";
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"w\"}},"
                               "{\"type\":\"function\",\"function\":{\"name\":\"s\"}}]",
                               0, NULL);
    json_t *kw = json_loads("{\"x\": 5, \"reasoning_effort\": \"low\"}", 0, NULL);
    co_jinja_opts o = {.tools = tools, .kwargs = kw, .thinking = 0, .reasoning_effort = "high"};
    tk_ids ids = {0};
    char *s = render(t, j, msgs, &o, &ids, &err);
    if (!s) fail_msg("%s", err.msg);
    assert_string_equal(s, "<|endoftext|><|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
                           "[w:Oslo]<|im_end|>\ntools=w,s\nthink=False effort=low x=5 "
                           "eos=<|im_end|><|im_start|>assistant\n");
    /* special-token text became the tokens; nothing added in front */
    assert_int_equal(ids.v[0], sid("<|endoftext|>"));
    assert_int_equal(ids.v[1], sid("<|im_start|>"));
    free(s);
    tk_ids_free(&ids);
    /* no generation prompt, no tools, defaults */
    co_jinja_opts d = {.thinking = -1, .no_generation_prompt = true};
    s = render(t, j, "[{\"role\":\"user\",\"content\":\"a\"}]", &d, &ids, &err);
    assert_string_equal(s, "<|endoftext|><|im_start|>user\na<|im_end|>\nthink= effort= x= "
                           "eos=<|im_end|>");
    free(s);
    tk_ids_free(&ids);
    json_decref(tools);
    json_decref(kw);
    co_jinja_free(j);
    tk_free(t);
}

static void test_fallbacks(void **state) {
    (void)state;
    mw_err err = {{0}};
    co_jinja *j = NULL;
    tk_tokenizer *t = vocab(TMPL);
    assert_int_equal(co_jinja_open(t, "chatml", &j, &err), 0); /* a format named: not used */
    assert_null(j);
    tk_free(t);
    t = vocab(NULL);
    assert_int_equal(co_jinja_open(t, NULL, &j, &err), 0); /* no template */
    assert_null(j);
    tk_free(t);
    t = vocab("{% for m in messages %}"); /* does not parse: the built-in formats take over */
    assert_int_equal(co_jinja_open(t, NULL, &j, &err), 0);
    assert_null(j);
    tk_free(t);
    t = vocab("line one\n{{ raise_exception('no ' ~ messages|length) }}");
    assert_int_equal(co_jinja_open(t, NULL, &j, &err), 0);
    assert_non_null(j);
    tk_ids ids = {0};
    co_jinja_opts o = {.thinking = -1};
    assert_null(render(t, j, "[{\"role\":\"user\",\"content\":\"a\"}]", &o, &ids, &err));
    if (!strstr(err.msg, "line 2 column 4: raise_exception: no 1")) fail_msg("%s", err.msg);
    tk_ids_free(&ids);
    co_jinja_free(j);
    tk_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_render),
                                       cmocka_unit_test(test_fallbacks)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
