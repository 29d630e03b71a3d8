/* vindex/vx_rstats_json.c — routing statistics as JSON (`vindex routing-stats --json`) and back
 * (`vindex plan --routing-stats STATS.json`): the JSON is untrusted on the way in, so every array
 * is checked against the model's shape and every number for range before it is kept. The schema
 * is documented in docs/fleet.md. */
#include "vindex/vx_rstats.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_json.h"
#include "vindex/vx_map.h"

#define FORMAT_NAME    "moewire-routing-stats"
#define FORMAT_VERSION 1
#define MAX_JSON_BYTES (512u << 20)

/* ---- writing -------------------------------------------------------------------------------- */

static json_t *layer_json(const vx_rstats *s, int l) {
    const vx_rstats_layer *L = &s->layers[l];
    const int E = (int)s->info.n_expert, k = (int)s->info.k;
    json_t *count = json_array(), *mass = json_array(), *pairs = json_array(), *uni = json_array(),
           *exp = json_array();
    for (int e = 0; e < E; e++) {
        json_array_append_new(count, json_integer((json_int_t)L->count[e]));
        json_array_append_new(mass, json_real(L->mass[e]));
    }
    for (size_t i = 0; i < L->n_top; i++) {
        const vx_rstats_pair *p = &L->top[i];
        double lift =
            (double)p->count * (double)L->rows / ((double)L->count[p->a] * (double)L->count[p->b]);
        json_array_append_new(pairs, json_pack("[iiIf]", p->a, p->b, (json_int_t)p->count, lift));
    }
    for (int i = 0; i < VX_RSTATS_NB; i++) {
        json_array_append_new(uni, L->union_n[i] ? json_real(L->union_mean[i]) : json_null());
        json_array_append_new(exp, json_real(vx_rstats_uniform_union(E, k, vx_rstats_batch(i))));
    }
    return json_pack("{si sI sf so so so so so}", "layer", l, "rows", (json_int_t)L->rows,
                     "max_mean", vx_rstats_max_mean(s, l), "count", count, "mass", mass, "pairs",
                     pairs, "union", uni, "uniform", exp);
}

int vx_rstats_write_json(const vx_rstats *s, FILE *out, mw_err *err) {
    json_t *traces = json_array(), *layers = json_array(), *batches = json_array();
    for (size_t i = 0; i < s->n_src; i++)
        json_array_append_new(traces,
                              json_pack("{ss ss sI sI sI}", "path", s->src[i].path, "sha256",
                                        s->src[i].sha256, "steps", (json_int_t)s->src[i].steps,
                                        "rows", (json_int_t)s->src[i].rows, "dropped",
                                        (json_int_t)s->src[i].dropped));
    for (int i = 0; i < VX_RSTATS_NB; i++)
        json_array_append_new(batches, json_integer(vx_rstats_batch(i)));
    for (uint32_t l = 0; l < s->info.n_layer; l++)
        if (s->layers[l].rows) json_array_append_new(layers, layer_json(s, (int)l));
    json_t *root =
        json_pack("{ss si ss ss si si si so so so}", "format", FORMAT_NAME, "version",
                  FORMAT_VERSION, "fingerprint", s->info.fingerprint, "family", s->info.family,
                  "n_layer", (int)s->info.n_layer, "n_expert", (int)s->info.n_expert, "k",
                  (int)s->info.k, "traces", traces, "batches", batches, "layers", layers);
    if (!root) return mw_errf(err, "out of memory building the statistics JSON");
    int rc = json_dumpf(root, out, JSON_COMPACT) || fputc('\n', out) == EOF
                 ? mw_errf(err, "cannot write the statistics JSON")
                 : 0;
    json_decref(root);
    return rc;
}

/* ---- reading -------------------------------------------------------------------------------- */

static int get_uint(const json_t *o, const char *key, json_int_t lo, json_int_t hi, json_int_t *out,
                    const char *path, mw_err *err) {
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return mw_errf(err, "%s: \"%s\" must be an integer in %lld .. %lld", path, key,
                       (long long)lo, (long long)hi);
    *out = json_integer_value(v);
    return 0;
}

static int read_info(const json_t *root, vx_rstats *s, const char *path, mw_err *err) {
    const json_t *fmt = json_object_get(root, "format"), *fp = json_object_get(root, "fingerprint"),
                 *fam = json_object_get(root, "family");
    json_int_t v, L, E, k;
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), FORMAT_NAME) ||
        get_uint(root, "version", FORMAT_VERSION, FORMAT_VERSION, &v, path, err))
        return mw_errf(err, "%s: not moewire routing statistics (version %d)", path,
                       FORMAT_VERSION);
    if (!json_is_string(fp) || !json_is_string(fam))
        return mw_errf(err, "%s: \"fingerprint\" and \"family\" must be strings", path);
    if (get_uint(root, "n_layer", 1, VX_TRACE_MAX_LAYERS, &L, path, err) ||
        get_uint(root, "n_expert", 1, VX_TRACE_MAX_EXPERTS, &E, path, err) ||
        get_uint(root, "k", 1, VX_TRACE_MAX_K, &k, path, err))
        return -1;
    vx_trace_info *i = &s->info;
    snprintf(i->fingerprint, sizeof i->fingerprint, "%s", json_string_value(fp));
    snprintf(i->family, sizeof i->family, "%s", json_string_value(fam));
    i->n_layer = (uint32_t)L;
    i->n_expert = (uint32_t)E;
    i->k = (uint32_t)k;
    if (strlen(json_string_value(fp)) != VX_TRACE_FP_HEX || k > E)
        return mw_errf(err, "%s: a bad fingerprint, or k > n_expert", path);
    s->layers = calloc((size_t)L, sizeof *s->layers);
    return s->layers ? 0 : mw_errf(err, "out of memory");
}

static int read_sources(const json_t *root, vx_rstats *s, const char *path, mw_err *err) {
    const json_t *arr = json_object_get(root, "traces");
    if (!json_is_array(arr) || json_array_size(arr) > VX_RSTATS_MAX_TRACES)
        return mw_errf(err, "%s: \"traces\" must be an array of at most %d", path,
                       VX_RSTATS_MAX_TRACES);
    if (!(s->src = calloc(json_array_size(arr) + 1, sizeof *s->src)))
        return mw_errf(err, "out of memory");
    size_t i;
    const json_t *t;
    json_array_foreach(arr, i, t) {
        const json_t *p = json_object_get(t, "path"), *sha = json_object_get(t, "sha256");
        if (!json_is_string(p) || !json_is_string(sha) || strlen(json_string_value(sha)) != 64)
            return mw_errf(err, "%s: traces[%zu] needs a \"path\" and a 64-digit \"sha256\"", path,
                           i);
        vx_rstats_source *src = &s->src[s->n_src++];
        if (!(src->path = strdup(json_string_value(p)))) return mw_errf(err, "out of memory");
        snprintf(src->sha256, sizeof src->sha256, "%s", json_string_value(sha));
    }
    return 0;
}

/* A non-negative finite number at arr[i]. */
static int get_num(const json_t *arr, size_t i, double *out) {
    const json_t *v = json_array_get(arr, i);
    if (!json_is_number(v)) return -1;
    *out = json_number_value(v);
    return isfinite(*out) && *out >= 0 && *out < 1e18 ? 0 : -1;
}

static int read_pairs(const json_t *arr, vx_rstats_layer *L, int E, const char *path, int l,
                      mw_err *err) {
    if (!json_is_array(arr) || json_array_size(arr) > VX_RSTATS_MAX_PAIRS)
        return mw_errf(err, "%s: layer %d: \"pairs\" must be an array of at most %d", path, l,
                       VX_RSTATS_MAX_PAIRS);
    L->top = calloc(json_array_size(arr) + 1, sizeof *L->top);
    if (!L->top) return mw_errf(err, "out of memory");
    size_t i;
    const json_t *p;
    json_array_foreach(arr, i, p) {
        double a, b, c;
        if (!json_is_array(p) || get_num(p, 0, &a) || get_num(p, 1, &b) || get_num(p, 2, &c) ||
            a >= b || b >= E || a != floor(a) || b != floor(b))
            return mw_errf(err, "%s: layer %d: pairs[%zu] must be [a, b, count] with a < b < %d",
                           path, l, i, E);
        L->top[L->n_top++] = (vx_rstats_pair){(int)a, (int)b, (uint64_t)c};
    }
    return 0;
}

static int read_layer(const json_t *o, vx_rstats *s, const char *path, mw_err *err) {
    json_int_t l, rows;
    if (get_uint(o, "layer", 0, s->info.n_layer - 1, &l, path, err) ||
        get_uint(o, "rows", 1, INT64_MAX / 1024, &rows, path, err))
        return -1;
    vx_rstats_layer *L = &s->layers[l];
    const int E = (int)s->info.n_expert;
    if (L->count) return mw_errf(err, "%s: layer %lld is listed twice", path, (long long)l);
    const json_t *count = json_object_get(o, "count"), *mass = json_object_get(o, "mass");
    if (!json_is_array(count) || !json_is_array(mass) || json_array_size(count) != (size_t)E ||
        json_array_size(mass) != (size_t)E)
        return mw_errf(err, "%s: layer %lld: \"count\" and \"mass\" must hold %d numbers", path,
                       (long long)l, E);
    L->count = calloc((size_t)E, sizeof *L->count);
    L->mass = calloc((size_t)E, sizeof *L->mass);
    if (!L->count || !L->mass) return mw_errf(err, "out of memory");
    L->rows = (uint64_t)rows;
    for (int e = 0; e < E; e++) {
        double c, m;
        if (get_num(count, (size_t)e, &c) || get_num(mass, (size_t)e, &m) || c > (double)rows)
            return mw_errf(err, "%s: layer %lld: expert %d's count or mass is out of range", path,
                           (long long)l, e);
        L->count[e] = (uint64_t)c;
        L->mass[e] = m;
    }
    return read_pairs(json_object_get(o, "pairs"), L, E, path, (int)l, err);
}

int vx_rstats_load_json(const char *path, vx_rstats *s, mw_err *err) {
    memset(s, 0, sizeof *s);
    size_t n = 0;
    char *text = vx_read_file(path, MAX_JSON_BYTES, &n, err);
    if (!text) return -1;
    const vx_json_limits lim = {
        .max_depth = 8, .bytes_per_object = 64, .bytes_per_array = 8, .bytes_per_item = 2};
    json_t *root = vx_json_parse(text, n, path, &lim, err);
    free(text);
    if (!root) return -1;
    int rc = json_is_object(root) ? 0 : mw_errf(err, "%s: expected a JSON object", path);
    rc = rc || read_info(root, s, path, err) || read_sources(root, s, path, err) ? -1 : 0;
    const json_t *layers = json_object_get(root, "layers"), *o;
    size_t i;
    if (!rc && (!json_is_array(layers) || json_array_size(layers) > s->info.n_layer))
        rc = mw_errf(err, "%s: \"layers\" must be an array of at most n_layer", path);
    if (!rc) json_array_foreach(layers, i, o) if ((rc = read_layer(o, s, path, err))) break;
    json_decref(root);
    if (rc) vx_rstats_free(s);
    return rc;
}

int vx_rstats_load(const char *path, vx_rstats *s, mw_err *err) {
    char head[8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return mw_errf(err, "%s: cannot open", path);
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (n == sizeof head && !memcmp(head, VX_TRACE_MAGIC, 8)) {
        memset(s, 0, sizeof *s);
        if (vx_rstats_add_trace(s, path, err) || vx_rstats_top_pairs(s, 256, err)) {
            vx_rstats_free(s);
            return -1;
        }
        return 0;
    }
    return vx_rstats_load_json(path, s, err);
}
