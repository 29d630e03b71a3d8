/* tests/fuzz/fuzz_jinja.c — a chat template (the input) parsed and rendered with a message list
 * holding tool calls, reasoning and unicode, under small bounds: never a crash, a hang or more
 * output than the bound; a render is deterministic (twice the same bytes, unless the template
 * reads the clock) and an error always names a position or a bound. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/jj.h"
#include "template/jj_chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *context(void) {
    static json_t *ctx;
    if (ctx) return ctx;
    const char *msgs =
        "[{\"role\":\"system\",\"content\":\" Be brief. \"},"
        "{\"role\":\"user\",\"content\":\"h\\u00e9llo \\ud83c\\udf89 <tag> \\\"q\\\"\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"think\","
        "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","
        "\"arguments\":{\"a\":[1,2.5,null,true],\"b\":{\"c\":\"d\"}}}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"part\"}]}]";
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":"
                        "\"d\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{"
                        "\"type\":\"array\",\"items\":{\"type\":\"number\"}}},\"required\":["
                        "\"a\"]}}}]";
    json_t *m = json_loads(msgs, 0, NULL), *t = json_loads(tools, 0, NULL);
    json_t *kw = json_pack("{s:b}", "enable_thinking", 1);
    jj_chat_in in = {.messages = m, .tools = t, .add_generation_prompt = true,
                     .bos_token = "<s>", .eos_token = "</s>", .kwargs = kw};
    ctx = jj_chat_context(&in, NULL);
    json_decref(m);
    json_decref(t);
    json_decref(kw);
    if (!ctx) __builtin_trap();
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    jj_template *t;
    mw_err err;
    if (jj_parse((const char *)data, size, &t, &err)) {
        if (strncmp(err.msg, "line ", 5) && !strstr(err.msg, "longer than")) __builtin_trap();
        return 0;
    }
    jj_limits lim = {.max_output = 1 << 16, .max_memory = 16 << 20, .max_steps = 20000,
                     .max_depth = 16};
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int ra = jj_render(t, context(), &lim, &a, &na, &err);
    if (!ra && na > lim.max_output) __builtin_trap();
    bool clock = memmem(data, size, "strftime", 8) != NULL;
    int rb = jj_render(t, context(), &lim, &b, &nb, &err);
    if (!clock && (ra != rb || (!ra && (na != nb || memcmp(a, b, na))))) __builtin_trap();
    free(a);
    free(b);
    jj_free(t);
    return 0;
}
