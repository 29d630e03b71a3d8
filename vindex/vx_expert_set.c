/* vindex/vx_expert_set.c — sets of (layer, expert) pairs: parsing specs and shard files, and the
 * canonical text form.
 *
 * SPEC grammar: "all" | item ("," item)*, item = range ":" range, range = "*" | N | N "-" M
 * (inclusive). A JSON shard file holds {"spec": SPEC} or {"experts": {LAYERS: EXPERTS, ...}} where
 * LAYERS is a range string and EXPERTS an array of numbers / range strings, or a range string. */
#include "vindex/vx_source.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_DIM        (1 << 24)
#define MAX_SHARD_FILE (64u << 20)

int vx_expert_set_init(vx_expert_set *s, int n_layers, int n_experts, bool all) {
    memset(s, 0, sizeof *s);
    if (n_layers < 0 || n_experts < 0 || n_layers > MAX_DIM || n_experts > MAX_DIM ||
        (uint64_t)n_layers * (uint64_t)n_experts > (1ull << 32))
        return -1;
    size_t bits = (size_t)n_layers * (size_t)n_experts;
    s->bits = calloc(bits / 8 + 1, 1);
    if (!s->bits) return -1;
    s->n_layers = n_layers;
    s->n_experts = n_experts;
    if (all)
        for (size_t i = 0; i < bits; i++) s->bits[i / 8] |= (uint8_t)(1u << (i % 8));
    return 0;
}

void vx_expert_set_free(vx_expert_set *s) {
    free(s->bits);
    memset(s, 0, sizeof *s);
}

bool vx_expert_set_has(const vx_expert_set *s, int layer, int expert) {
    if (!s->bits || layer < 0 || expert < 0 || layer >= s->n_layers || expert >= s->n_experts)
        return false;
    size_t i = (size_t)layer * (size_t)s->n_experts + (size_t)expert;
    return (s->bits[i / 8] >> (i % 8)) & 1;
}

void vx_expert_set_put(vx_expert_set *s, int layer, int expert, bool on) {
    if (!s->bits || layer < 0 || expert < 0 || layer >= s->n_layers || expert >= s->n_experts)
        return;
    size_t i = (size_t)layer * (size_t)s->n_experts + (size_t)expert;
    if (on)
        s->bits[i / 8] |= (uint8_t)(1u << (i % 8));
    else
        s->bits[i / 8] &= (uint8_t) ~(1u << (i % 8));
}

size_t vx_expert_set_count(const vx_expert_set *s) {
    size_t n = 0;
    for (int l = 0; l < s->n_layers; l++)
        for (int e = 0; e < s->n_experts; e++) n += vx_expert_set_has(s, l, e);
    return n;
}

/* ---- parsing ------------------------------------------------------------------------------- */

/* Parses a non-negative decimal of at most 9 digits at *p. */
static int parse_num(const char **p, long *out) {
    const char *s = *p;
    long v = 0;
    int d = 0;
    while (isdigit((unsigned char)*s)) {
        if (++d > 9) return -1;
        v = v * 10 + (*s++ - '0');
    }
    if (d == 0) return -1;
    *p = s;
    *out = v;
    return 0;
}

/* Parses range text [s, end) ("*", "N", "N-M") bounded by limit; what = "layer" / "expert". */
static int parse_range(const char *s, const char *end, int limit, const char *what, long *lo,
                       long *hi, const char *spec, mw_err *err) {
    int len = (int)(end - s);
    if (len == 1 && *s == '*') {
        if (limit == 0) return mw_errf(err, "expert set '%s': the model has no %ss", spec, what);
        *lo = 0;
        *hi = limit - 1;
        return 0;
    }
    const char *p = s;
    if (parse_num(&p, lo)) goto bad;
    *hi = *lo;
    if (p < end && *p == '-') {
        p++;
        if (parse_num(&p, hi)) goto bad;
    }
    if (p != end) goto bad;
    if (*hi < *lo)
        return mw_errf(err, "expert set '%s': %s range '%.*s' is reversed", spec, what, len, s);
    if (*hi >= limit)
        return mw_errf(err, "expert set '%s': %s %ld out of range (the model has %d %ss)", spec,
                       what, *hi, limit, what);
    return 0;
bad:
    return mw_errf(err, "expert set '%s': bad %s range '%.*s' (expected N, N-M or *)", spec, what,
                   len, s);
}

static void put_block(vx_expert_set *s, long l0, long l1, long e0, long e1) {
    for (long l = l0; l <= l1; l++)
        for (long e = e0; e <= e1; e++) vx_expert_set_put(s, (int)l, (int)e, true);
}

/* Adds the items of a textual SPEC (without "all" / file forms) to s. */
static int parse_items(const char *spec, vx_expert_set *s, mw_err *err) {
    char *buf = malloc(strlen(spec) + 1);
    if (!buf) return mw_errf(err, "out of memory");
    size_t n = 0;
    for (const char *c = spec; *c; c++)
        if (!isspace((unsigned char)*c)) buf[n++] = *c;
    buf[n] = '\0';
    int rc = 0;
    if (n == 0) rc = mw_errf(err, "expert set '%s' is empty", spec);
    for (char *item = buf; rc == 0 && item;) {
        char *comma = strchr(item, ',');
        char *end = comma ? comma : item + strlen(item);
        char *colon = memchr(item, ':', (size_t)(end - item));
        long l0, l1, e0, e1;
        if (!colon)
            rc = mw_errf(err, "expert set '%s': item '%.*s' needs LAYERS:EXPERTS", spec,
                         (int)(end - item), item);
        else if (parse_range(item, colon, s->n_layers, "layer", &l0, &l1, spec, err) ||
                 parse_range(colon + 1, end, s->n_experts, "expert", &e0, &e1, spec, err))
            rc = -1;
        else
            put_block(s, l0, l1, e0, e1);
        item = comma ? comma + 1 : NULL;
    }
    free(buf);
    return rc;
}

/* {"experts": {"0-3": [0, 1, "4-7"], "5": "0-15"}} */
static int parse_json_experts(json_t *map, vx_expert_set *s, const char *path, mw_err *err) {
    const char *key;
    json_t *val;
    json_object_foreach(map, key, val) {
        long l0, l1;
        if (parse_range(key, key + strlen(key), s->n_layers, "layer", &l0, &l1, path, err))
            return -1;
        size_t n = json_is_array(val) ? json_array_size(val) : 1;
        for (size_t i = 0; i < n; i++) {
            json_t *it = json_is_array(val) ? json_array_get(val, i) : val;
            long e0, e1;
            if (json_is_integer(it)) {
                json_int_t e = json_integer_value(it);
                if (e < 0 || e >= s->n_experts)
                    return mw_errf(err,
                                   "%s: layer '%s': expert %lld out of range (the model has "
                                   "%d experts)",
                                   path, key, (long long)e, s->n_experts);
                e0 = e1 = (long)e;
            } else if (json_is_string(it)) {
                const char *t = json_string_value(it);
                if (parse_range(t, t + strlen(t), s->n_experts, "expert", &e0, &e1, path, err))
                    return -1;
            } else {
                return mw_errf(err, "%s: layer '%s': experts must be numbers or range strings",
                               path, key);
            }
            put_block(s, l0, l1, e0, e1);
        }
    }
    /* as the SPEC text, an empty set is an error (its canonical text, "", would not parse) */
    const size_t nb = ((size_t)s->n_layers * (size_t)s->n_experts + 7) / 8;
    for (size_t i = 0; i < nb; i++)
        if (s->bits[i]) return 0;
    return mw_errf(err, "%s: the shard file names no experts", path);
}

static int parse_file(const char *path, vx_expert_set *s, mw_err *err) {
    struct stat st;
    if (stat(path, &st) != 0) return mw_errf(err, "%s: cannot read expert shard file", path);
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_SHARD_FILE)
        return mw_errf(err, "%s: not a regular file of at most %u bytes", path, MAX_SHARD_FILE);
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return mw_errf(err, "%s: bad JSON at line %d: %s", path, je.line, je.text);
    int rc;
    json_t *spec = json_object_get(root, "spec"), *map = json_object_get(root, "experts");
    if (!json_is_object(root))
        rc = mw_errf(err, "%s: expected a JSON object", path);
    else if (json_is_string(spec) && !map && !strcmp(json_string_value(spec), "all"))
        rc = (put_block(s, 0, s->n_layers - 1, 0, s->n_experts - 1), 0);
    else if (json_is_string(spec) && !map)
        rc = parse_items(json_string_value(spec), s, err);
    else if (json_is_object(map) && !spec)
        rc = parse_json_experts(map, s, path, err);
    else
        rc = mw_errf(err, "%s: expected {\"spec\": \"...\"} or {\"experts\": {...}}", path);
    json_decref(root);
    return rc;
}

int vx_expert_set_parse(const char *spec, int n_layers, int n_experts, vx_expert_set *out,
                        mw_err *err) {
    bool all = !strcmp(spec, "all");
    if (vx_expert_set_init(out, n_layers, n_experts, all) != 0)
        return mw_errf(err, "expert set for %d layers × %d experts: bad size or out of memory",
                       n_layers, n_experts);
    if (all) return 0;
    size_t len = strlen(spec);
    int rc;
    if (spec[0] == '@')
        rc = parse_file(spec + 1, out, err);
    else if (len >= 5 && !strcmp(spec + len - 5, ".json"))
        rc = parse_file(spec, out, err);
    else
        rc = parse_items(spec, out, err);
    if (rc != 0) vx_expert_set_free(out);
    return rc;
}

/* ---- canonical text ------------------------------------------------------------------------ */

static bool same_row(const vx_expert_set *s, int a, int b) {
    for (int e = 0; e < s->n_experts; e++)
        if (vx_expert_set_has(s, a, e) != vx_expert_set_has(s, b, e)) return false;
    return true;
}

static void append(char **buf, size_t *len, size_t *cap, const char *txt) {
    size_t n = strlen(txt);
    if (!*buf) return;
    if (*len + n + 1 > *cap) {
        size_t c = (*cap + n + 1) * 2;
        char *b = realloc(*buf, c);
        if (!b) {
            free(*buf);
            *buf = NULL;
            return;
        }
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, txt, n + 1);
    *len += n;
}

static void range_text(char *out, size_t n, int a, int b) {
    if (a == b)
        snprintf(out, n, "%d", a);
    else
        snprintf(out, n, "%d-%d", a, b);
}

char *vx_expert_set_format(const vx_expert_set *s) {
    size_t cap = 64, len = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    buf[0] = '\0';
    for (int l0 = 0; l0 < s->n_layers;) {
        int l1 = l0;
        while (l1 + 1 < s->n_layers && same_row(s, l0, l1 + 1)) l1++;
        for (int e0 = 0; e0 < s->n_experts;) {
            if (!vx_expert_set_has(s, l0, e0)) {
                e0++;
                continue;
            }
            int e1 = e0;
            while (e1 + 1 < s->n_experts && vx_expert_set_has(s, l0, e1 + 1)) e1++;
            char lt[32], et[32], item[80];
            range_text(lt, sizeof lt, l0, l1);
            range_text(et, sizeof et, e0, e1);
            snprintf(item, sizeof item, "%s%s:%s", len ? "," : "", lt, et);
            append(&buf, &len, &cap, item);
            e0 = e1 + 1;
        }
        l0 = l1 + 1;
    }
    return buf;
}
