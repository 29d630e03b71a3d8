/* coordinator/co_toolcall_formats.c — the table of the chat formats that carry tool calls
 * (co_toolcall_formats.h). */
#include "coordinator/co_toolcall_formats.h"

#include <string.h>

#define DEEPSEEK(name)                                                                             \
    {                                                                                              \
        .chat = name, .open = DS_CALL_BEGIN, .close = DS_CALL_END,                                 \
        .drop = {DS_CALLS_BEGIN, DS_CALLS_END}, .body = CO__TC_DEEPSEEK, .trailer = "```",         \
        .specials = {DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP, NULL},      \
        .forced_before = DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP,                           \
        .forced_mid = "\n```json\n", .forced_after = "\n```" DS_CALL_END DS_CALLS_END              \
    }

static const co__tc_format formats[] = {
    {.chat = "qwen3",
     .open = "<tool_call>",
     .close = "</tool_call>",
     .body = CO__TC_JSON,
     .trailer = "}",
     .specials = {"<tool_call>", "</tool_call>", NULL},
     .forced_before = "<tool_call>\n{\"name\": \"",
     .forced_mid = "\", \"arguments\": ",
     .forced_after = "}\n</tool_call>"},
    DEEPSEEK("deepseek-v3"),
    DEEPSEEK("deepseek-r1"),
    {.chat = "kimi-k2",
     .open = KIMI_BEGIN,
     .close = KIMI_END,
     .drop = {KIMI_SEC_BEGIN, KIMI_SEC_END},
     .body = CO__TC_KIMI,
     .trailer = "",
     .specials = {KIMI_SEC_BEGIN, KIMI_SEC_END, KIMI_BEGIN, KIMI_END, KIMI_ARGS, NULL},
     .forced_before = KIMI_SEC_BEGIN KIMI_BEGIN "functions.",
     .forced_mid = ":0" KIMI_ARGS,
     .forced_after = KIMI_END KIMI_SEC_END},
    /* harmony's header tokens are its parser's structure (tokenizer/tk_chat_parse.c), which
     * writes a call's text in the one shape read here, whether the model wrote them as tokens
     * or spelled them */
    {.chat = "harmony",
     .open = "<|channel|>commentary to=functions.",
     .close = "<|call|>",
     .body = CO__TC_HARMONY,
     .trailer = "",
     .close_at_end = true,
     .parser_writes = true,
     .own_message = true,
     .specials = {"<|channel|>", "<|constrain|>", "<|message|>", NULL},
     .forced_before = "<|channel|>commentary to=functions.",
     .forced_mid = " <|constrain|>json<|message|>",
     .forced_after = ""},
    /* Kimi K3's tagged sections (tokenizer/tk_chat_k3.c): the parser writes a tools section as
     * its text; a forced call closes the response the prompt opened and gives its arguments as
     * one json section */
    {.chat = "kimi-k3",
     .open = K3_OPEN "call tool=\"",
     .close = K3_CLOSE "call" K3_SEP,
     .drop = {K3_OPEN "tools" K3_SEP, K3_CLOSE "tools" K3_SEP, K3_CLOSE "response" K3_SEP,
              K3_CLOSE "message" K3_SEP},
     .body = CO__TC_K3,
     .trailer = K3_CLOSE "json" K3_SEP,
     .parser_writes = true,
     .specials = {K3_OPEN, K3_CLOSE, K3_SEP, NULL},
     .forced_before = K3_CLOSE "response" K3_SEP K3_OPEN "tools" K3_SEP K3_OPEN "call tool=\"",
     .forced_mid = "\" index=\"1\"" K3_SEP K3_OPEN "json type=\"object\"" K3_SEP,
     .forced_after = K3_CLOSE "json" K3_SEP K3_CLOSE "call" K3_SEP K3_CLOSE "tools" K3_SEP K3_CLOSE
                              "message" K3_SEP},
};

const co__tc_format *co__tc_find(const char *chat) {
    for (size_t i = 0; chat && i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(formats[i].chat, chat)) return &formats[i];
    return NULL;
}
