/* coordinator/co_toolcall_body.c — a tool call read whole, per format (co_toolcall_body.h). */
#include "coordinator/co_toolcall_body.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/co_toolcall_k3.h"
#include "coordinator/co_toolcall_text.h"

/* The call's name and arguments out of its body, per format; -1 when it is not a call. */
int co__tc_read_body(const co__tc_format *f, const char *s, size_t n, char **name, char **args,
                     char **id) {
    *name = *args = *id = NULL;
    const char *nm = NULL, *a = NULL;
    size_t nl = 0, al = 0;
    if (f->body == CO__TC_JSON) {
        co__tc_trim(&s, &n);
        json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, NULL);
        json_t *jn = json_object_get(j, "name"), *ja = json_object_get(j, "arguments");
        if (json_is_object(j) && json_is_string(jn) && json_string_length(jn) &&
            (!ja || json_is_object(ja) || json_is_string(ja))) {
            *name = strdup(json_string_value(jn));
            *args = !ja ? strdup("{}")
                    : json_is_string(ja)
                        ? co__tc_args_text(json_string_value(ja), json_string_length(ja))
                        : json_dumps(ja, JSON_COMPACT);
        }
        json_decref(j);
    } else if (f->body == CO__TC_DEEPSEEK) {
        const char *sep = co__tc_find_in(s, n, DS_SEP);
        if (!sep) return -1;
        const char *rest = sep + strlen(DS_SEP);
        size_t rl = (size_t)(s + n - rest);
        if (sep - s == 8 && !memcmp(s, "function", 8)) { /* V3: the name, then a json block */
            const char *nlp = memchr(rest, '\n', rl);
            if (!nlp) return -1;
            nm = rest, nl = (size_t)(nlp - rest);
            a = nlp + 1, al = (size_t)(s + n - a);
            co__tc_trim(&a, &al);
            if (al >= 7 && !memcmp(a, "```json", 7)) a += 7, al -= 7;
            if (al >= 3 && !memcmp(a + al - 3, "```", 3)) al -= 3;
        } else { /* V3.1: the name, the arguments */
            nm = s, nl = (size_t)(sep - s);
            a = rest, al = rl;
        }
    } else if (f->body == CO__TC_KIMI) {
        const char *ab = co__tc_find_in(s, n, KIMI_ARGS);
        if (!ab) return -1;
        const char *h = s;
        size_t hl = (size_t)(ab - s);
        co__tc_trim(&h, &hl);
        const char *colon = NULL; /* the last ':' (memrchr is a GNU extension) */
        for (size_t i = hl; i > 0 && !colon; i--)
            if (h[i - 1] == ':') colon = h + i - 1;
        if (!colon || !co__tc_good_name(h, hl)) return -1;
        for (const char *d = colon + 1; d < h + hl; d++)
            if (*d < '0' || *d > '9') return -1;
        nm = h, nl = (size_t)(colon - h);
        if (nl > 10 && !memcmp(nm, "functions.", 10)) nm += 10, nl -= 10;
        if (!(*id = strndup(h, hl))) return -1;
        a = ab + strlen(KIMI_ARGS), al = (size_t)(s + n - a);
    } else if (f->body == CO__TC_K3) {
        return co__tc_k3_read(s, n, name, args);
    } else { /* harmony */
        const char *msg = co__tc_find_in(s, n, "<|message|>");
        if (!msg) return -1;
        nm = s;
        while (nl < (size_t)(msg - s) && s[nl] != ' ' && s[nl] != '<') nl++;
        a = msg + 11, al = (size_t)(s + n - a);
    }
    if (f->body != CO__TC_JSON) {
        co__tc_trim(&nm, &nl);
        if (co__tc_good_name(nm, nl)) {
            *name = strndup(nm, nl);
            *args = co__tc_args_text(a, al);
        }
    }
    if (*name && *args) return 0;
    free(*name), free(*args), free(*id);
    *name = *args = *id = NULL;
    return -1;
}
