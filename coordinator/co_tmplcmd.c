/* coordinator/co_tmplcmd.c — `coordinator chat-template --template FILE --messages FILE ...`:
 * prints the rendered text and nothing else (no newline added); a template error names its line
 * and column on stderr and exits 1 (2 for a usage error). */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "coordinator/co_tmplcmd.h"
#include "template/jj.h"
#include "template/jj_chat.h"
#include "vindex/vx_json.h"
#include "vindex/vx_map.h"

#define MAX_FILE (64u << 20)

static const char USAGE[] =
    "usage: coordinator chat-template --template FILE.jinja --messages FILE.json\n"
    "         [--tools FILE.json] [--no-generation-prompt] [--bos TEXT] [--eos TEXT]\n"
    "         [--kwargs JSON]\n"
    "Renders the template as transformers' apply_chat_template does (messages: a list or\n"
    "{\"messages\": [...]}; tools: a list; kwargs: an object of extra variables) and prints the\n"
    "text exactly, without a newline added.\n";

typedef struct args {
    const char *tmpl, *messages, *tools, *bos, *eos, *kwargs;
    bool no_gen;
} args;

static int parse_args(int argc, char **argv, args *a) {
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char **slot = !strcmp(o, "--template")   ? &a->tmpl
                            : !strcmp(o, "--messages") ? &a->messages
                            : !strcmp(o, "--tools")    ? &a->tools
                            : !strcmp(o, "--bos")      ? &a->bos
                            : !strcmp(o, "--eos")      ? &a->eos
                            : !strcmp(o, "--kwargs")   ? &a->kwargs
                                                       : NULL;
        if (!strcmp(o, "--no-generation-prompt")) {
            a->no_gen = true;
        } else if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(USAGE, stdout);
            return 1;
        } else if (!slot || i + 1 >= argc) {
            fprintf(stderr, "coordinator chat-template: %s '%s'\n%s",
                    slot ? "a value is missing after" : "unknown option", o, USAGE);
            return 2;
        } else {
            *slot = argv[++i];
        }
    }
    if (!a->tmpl || !a->messages) {
        fprintf(stderr, "coordinator chat-template: --template and --messages are required\n%s",
                USAGE);
        return 2;
    }
    return 0;
}

static json_t *load_json(const char *path, const char *text, mw_err *err) {
    static const vx_json_limits lim = {
        .max_depth = 64, .bytes_per_object = 8, .bytes_per_array = 4, .bytes_per_item = 2};
    size_t len = 0;
    char *buf = text ? NULL : vx_read_file(path, MAX_FILE, &len, err);
    if (!text && !buf) return NULL;
    json_t *j = vx_json_parse(text ? text : buf, text ? strlen(text) : len,
                              text ? "--kwargs" : path, &lim, err);
    free(buf);
    return j;
}

static int render(const args *a, mw_err *err) {
    json_t *msgs = NULL, *tools = NULL, *kw = NULL, *ctx = NULL;
    jj_template *t = NULL;
    char *out = NULL;
    size_t tlen = 0, olen = 0;
    int rc = -1;
    char *src = vx_read_file(a->tmpl, MAX_FILE, &tlen, err);
    if (!src || jj_parse(src, tlen, &t, err)) {
        if (src) mw_err_wrap(err, "%s", a->tmpl);
        goto done;
    }
    if (!(msgs = load_json(a->messages, NULL, err))) goto done;
    if (json_is_object(msgs) && json_is_array(json_object_get(msgs, "messages"))) {
        json_t *l = json_incref(json_object_get(msgs, "messages"));
        json_decref(msgs);
        msgs = l;
    }
    if (a->tools && !(tools = load_json(a->tools, NULL, err))) goto done;
    if (a->kwargs && !(kw = load_json(NULL, a->kwargs, err))) goto done;
    jj_chat_in in = {.messages = msgs,
                     .tools = tools,
                     .add_generation_prompt = !a->no_gen,
                     .bos_token = a->bos,
                     .eos_token = a->eos,
                     .kwargs = kw};
    if (!(ctx = jj_chat_context(&in, err))) goto done;
    if (jj_render(t, ctx, NULL, &out, &olen, err)) {
        mw_err_wrap(err, "%s", a->tmpl);
        goto done;
    }
    if (fwrite(out, 1, olen, stdout) != olen || fflush(stdout)) {
        mw_errf(err, "writing the output failed");
        goto done;
    }
    rc = 0;
done:
    free(src);
    free(out);
    jj_free(t);
    json_decref(msgs);
    json_decref(tools);
    json_decref(kw);
    json_decref(ctx);
    return rc;
}

int co_chat_template_main(int argc, char **argv) {
    args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    mw_err err = {{0}};
    if (render(&a, &err)) {
        fprintf(stderr, "coordinator chat-template: %s\n", err.msg);
        return 1;
    }
    return 0;
}
