/* vindex/vx_topology.c — reading a topology file: the JSON through vx_json_parse (bounded), then
 * every object against the keys it may have, every name, endpoint, number and key against its
 * bounds, the links resolved per host (an exact pair, then a wildcard), and the platform looked up
 * in the platform table. */
#include "vindex/vx_topology.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_hash.h"
#include "vindex/vx_json.h"
#include "vindex/vx_map.h"

#define FORMAT_NAME "moewire-topology"
#define MAX_BYTES   (16u << 20)
#define MAX_LINKS   4096

static const vx_platform platforms[] = {
    {"linux-x86_64", "systemd"},
    {"linux-aarch64", "systemd"},
    {"darwin-arm64", "launchd"},
};
#define N_PLATFORMS (sizeof platforms / sizeof platforms[0])

const vx_platform *vx_platform_find(const char *name) {
    for (size_t i = 0; i < N_PLATFORMS; i++)
        if (!strcmp(platforms[i].name, name)) return &platforms[i];
    return NULL;
}

void vx_platform_names(char *buf, size_t n, const char *sep) {
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < N_PLATFORMS && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? sep : "", platforms[i].name);
}

/* ---- small checks --------------------------------------------------------------------------- */

/* Every key of o is one of allowed (NULL-terminated). */
static int only_keys(const json_t *o, const char *const *allowed, const char *where, mw_err *err) {
    if (!json_is_object(o)) return mw_errf(err, "%s must be a JSON object", where);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        const char *const *a = allowed;
        while (*a && strcmp(*a, key)) a++;
        if (!*a) return mw_errf(err, "%s: unknown key \"%.64s\"", where, key);
    }
    return 0;
}

static int get_name(const json_t *o, char out[VX_TOPO_NAME_MAX + 1], const char *where,
                    mw_err *err) {
    const json_t *v = json_object_get(o, "name");
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    size_t n = s ? strlen(s) : 0;
    bool ok = n > 0 && n <= VX_TOPO_NAME_MAX && s[0] != '.' && s[0] != '-';
    for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)s[i]) || s[i] == '.' || s[i] == '_' || s[i] == '-';
    if (!ok)
        return mw_errf(err,
                       "%s: \"name\" must be 1 .. %d letters, digits, '.', '_' or '-' (it names "
                       "files and units)",
                       where, VX_TOPO_NAME_MAX);
    memcpy(out, s, n + 1);
    return 0;
}

static int get_text(const json_t *o, const char *key, bool required, size_t max, char **out,
                    const char *where, mw_err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v && !required) return (*out = strdup("")) ? 0 : mw_errf(err, "out of memory");
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (!s || !*s || strlen(s) > max)
        return mw_errf(err, "%s: \"%s\" must be a string of 1 .. %zu bytes", where, key, max);
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return mw_errf(err, "%s: \"%s\" holds a control character", where, key);
    return (*out = strdup(s)) ? 0 : mw_errf(err, "out of memory");
}

/* A number in (lo, hi]; missing: *out = dflt when dflt >= 0, else an error. */
static int get_num(const json_t *o, const char *key, double lo, double hi, double dflt, double *out,
                   const char *where, mw_err *err) {
    const json_t *v = json_object_get(o, key);
    if (!v && dflt >= 0) return (*out = dflt), 0;
    if (!json_is_number(v) || !(json_number_value(v) > lo) || json_number_value(v) > hi)
        return mw_errf(err, "%s: \"%s\" must be a number above %g and at most %g", where, key, lo,
                       hi);
    *out = json_number_value(v);
    return 0;
}

static int get_key(const json_t *o, char out[VX_TOPO_KEY_Z85 + 1], const char *where, mw_err *err) {
    static const char z85[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              ".-:+=^!/*?&<>()[]{}@%$#";
    const json_t *v = json_object_get(o, "curve_public_key");
    out[0] = 0;
    if (!v) return 0;
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    bool ok = strlen(s) == VX_TOPO_KEY_Z85;
    for (const char *c = s; ok && *c; c++) ok = strchr(z85, *c) != NULL;
    if (!ok)
        return mw_errf(err,
                       "%s: \"curve_public_key\" must be a 40-character Z85 key (the .pub "
                       "file keygen writes)",
                       where);
    memcpy(out, s, VX_TOPO_KEY_Z85 + 1);
    return 0;
}

/* tcp://HOST:PORT or ipc://PATH; no spaces, commas or '#' (the --nodes list's separators). */
static int check_endpoint(const char *e, const char *where, mw_err *err) {
    bool ok = strlen(e) < 256 && !strpbrk(e, " \t,#");
    const char *colon = strrchr(e, ':');
    if (ok && !strncmp(e, "tcp://", 6)) {
        char *end;
        long port = colon && colon > e + 6 ? strtol(colon + 1, &end, 10) : 0;
        ok = port >= 1 && port <= 65535 && *end == 0;
    } else if (ok) {
        ok = !strncmp(e, "ipc://", 6) && e[6];
    }
    return ok ? 0
              : mw_errf(err, "%s: \"endpoint\" must be tcp://HOST:PORT or ipc://PATH, not '%.80s'",
                        where, e);
}

bool vx_topo_is_local(const vx_topo_host *h) {
    const char *e = h->endpoint;
    if (!strncmp(e, "ipc://", 6)) return true;
    if (strncmp(e, "tcp://", 6)) return false;
    e += 6;
    return !strncmp(e, "127.", 4) || !strncmp(e, "localhost:", 10) || !strncmp(e, "[::1]:", 6);
}

/* ---- sections ------------------------------------------------------------------------------- */

static int read_host(const json_t *o, vx_topo_host *h, int i, mw_err *err) {
    static const char *const keys[] = {"name",  "endpoint", "memory_gib",       "read_gbs",
                                       "cores", "platform", "curve_public_key", "vindex",
                                       NULL};
    char where[96];
    snprintf(where, sizeof where, "hosts[%d]", i);
    double mem, cores;
    char *platform = NULL;
    if (only_keys(o, keys, where, err) || get_name(o, h->name, where, err)) return -1;
    snprintf(where, sizeof where, "host %s", h->name);
    if (get_text(o, "endpoint", true, 255, &h->endpoint, where, err) ||
        check_endpoint(h->endpoint, where, err) ||
        get_num(o, "memory_gib", 0, 1 << 20, -1, &mem, where, err) ||
        get_num(o, "read_gbs", 0, 1e5, -1, &h->read_gbs, where, err) ||
        get_num(o, "cores", 0, 65536, -1, &cores, where, err) ||
        get_text(o, "platform", true, 64, &platform, where, err) ||
        get_key(o, h->key, where, err) ||
        get_text(o, "vindex", false, 4096, &h->vindex, where, err)) {
        free(platform);
        return -1;
    }
    h->memory_bytes = mem * (double)(1ull << 30);
    h->cores = (int)cores;
    h->platform = vx_platform_find(platform);
    char names[128];
    vx_platform_names(names, sizeof names, ", ");
    int rc = !h->platform
                 ? mw_errf(err, "%s: platform '%.64s' is not one of %s", where, platform, names)
             : cores != floor(cores) ? mw_errf(err, "%s: \"cores\" must be an integer", where)
             : !h->key[0] && !vx_topo_is_local(h)
                 ? mw_errf(err,
                           "%s: %s is beyond this machine and needs a \"curve_public_key\" (a "
                           "node there serves only with CURVE keys)",
                           where, h->endpoint)
                 : 0;
    free(platform);
    return rc;
}

static int read_coord(const json_t *o, vx_topo_coord *c, int i, mw_err *err) {
    static const char *const keys[] = {"name",  "address",          "listen", "read_gbs",
                                       "cores", "curve_public_key", NULL};
    char where[96];
    snprintf(where, sizeof where, "coordinators[%d]", i);
    double cores = 0;
    if (only_keys(o, keys, where, err) || get_name(o, c->name, where, err)) return -1;
    snprintf(where, sizeof where, "coordinator %s", c->name);
    if (get_text(o, "address", true, 255, &c->address, where, err) ||
        get_text(o, "listen", true, 255, &c->listen, where, err) ||
        get_num(o, "read_gbs", 0, 1e5, 0, &c->read_gbs, where, err) ||
        get_num(o, "cores", 0, 65536, 0, &cores, where, err) || get_key(o, c->key, where, err))
        return -1;
    if (!strrchr(c->listen, ':')) return mw_errf(err, "%s: \"listen\" must be HOST:PORT", where);
    c->cores = (int)cores;
    return 0;
}

static int read_policy(const json_t *o, vx_topology *t, int n_hosts, mw_err *err) {
    static const char *const keys[] = {"min_owners", "max_owners", "replica_memory", NULL};
    t->min_owners = 1;
    t->max_owners = n_hosts < 4 ? n_hosts : 4;
    t->replica_memory = 1;
    if (!o) return 0;
    double mn, mx;
    if (only_keys(o, keys, "replication", err) ||
        get_num(o, "min_owners", 0, n_hosts, t->min_owners, &mn, "replication", err) ||
        get_num(o, "max_owners", 0, n_hosts, mn > t->max_owners ? mn : t->max_owners, &mx,
                "replication", err) ||
        get_num(o, "replica_memory", -1e-300, 1, 1, &t->replica_memory, "replication", err))
        return mw_errf(err,
                       "replication: min_owners 1 .. hosts (%d), max_owners min_owners .. "
                       "hosts, replica_memory 0 .. 1",
                       n_hosts);
    if (mn != floor(mn) || mx != floor(mx) || mx < mn)
        return mw_errf(err, "replication: min_owners and max_owners are integers, min <= max");
    t->min_owners = (int)mn;
    t->max_owners = (int)mx;
    return 0;
}

/* ---- links --------------------------------------------------------------------------------- */

static bool names_node(const vx_topology *t, const char *n) {
    for (int i = 0; i < t->n_hosts; i++)
        if (!strcmp(t->hosts[i].name, n)) return true;
    for (int i = 0; i < t->n_coords; i++)
        if (!strcmp(t->coords[i].name, n)) return true;
    return !strcmp(n, "*");
}

/* How well a link {a, b} fits the pair (x, y): 3 both named, 2 one named and a wildcard, 1 two
 * wildcards, 0 not at all. */
static int fit(const char *a, const char *b, const char *x, const char *y) {
    int best = 0;
    for (int swap = 0; swap < 2; swap++) {
        const char *p = swap ? b : a, *q = swap ? a : b;
        int sp = !strcmp(p, x) ? 2 : !strcmp(p, "*") ? 1 : 0;
        int sq = !strcmp(q, y) ? 2 : !strcmp(q, "*") ? 1 : 0;
        if (sp && sq && sp + sq - 1 > best) best = sp + sq - 1;
    }
    return best;
}

static int read_link(const json_t *o, const vx_topology *t, int i, const char **a, const char **b,
                     vx_link *l, mw_err *err) {
    static const char *const keys[] = {"from", "to", "rtt_us", "gbit", NULL};
    char where[64];
    snprintf(where, sizeof where, "links[%d]", i);
    const json_t *f = json_object_get(o, "from"), *to = json_object_get(o, "to");
    if (only_keys(o, keys, where, err) ||
        get_num(o, "rtt_us", -1e-300, 1e7, -1, &l->rtt_us, where, err) ||
        get_num(o, "gbit", 0, 1e5, -1, &l->gbit, where, err))
        return -1;
    if (!json_is_string(f) || !json_is_string(to) || !names_node(t, json_string_value(f)) ||
        !names_node(t, json_string_value(to)))
        return mw_errf(err,
                       "%s: \"from\" and \"to\" must name hosts or coordinators (or be "
                       "\"*\")",
                       where);
    *a = json_string_value(f);
    *b = json_string_value(to);
    return 0;
}

/* Each host's link to the first coordinator: the best fitting entry of "links". */
static int read_links(const json_t *arr, vx_topology *t, mw_err *err) {
    if (!json_is_array(arr) || json_array_size(arr) > MAX_LINKS)
        return mw_errf(err, "\"links\" must be an array of at most %d", MAX_LINKS);
    const char *c = t->coords[0].name;
    int *best = calloc((size_t)t->n_hosts, sizeof *best);
    if (!best) return mw_errf(err, "out of memory");
    size_t i;
    const json_t *o;
    int rc = 0;
    json_array_foreach((json_t *)arr, i, o) {
        const char *a = NULL, *b = NULL;
        vx_link l = {0};
        if ((rc = read_link(o, t, (int)i, &a, &b, &l, err))) break;
        for (int h = 0; h < t->n_hosts; h++) {
            int f = fit(a, b, c, t->hosts[h].name);
            if (f > best[h]) best[h] = f, t->hosts[h].link = l;
        }
    }
    for (int h = 0; !rc && h < t->n_hosts; h++)
        if (!best[h])
            rc = mw_errf(err,
                         "no link between coordinator %s and host %s: add one to \"links\", or "
                         "a default {\"from\": \"*\", \"to\": \"*\", ...}",
                         c, t->hosts[h].name);
    free(best);
    return rc;
}

/* ---- the document --------------------------------------------------------------------------- */

static int read_model(const json_t *o, vx_topology *t, mw_err *err) {
    static const char *const keys[] = {"path", "fingerprint", "wire", NULL};
    if (only_keys(o, keys, "model", err) ||
        get_text(o, "path", true, 4096, &t->model_path, "model", err) ||
        get_text(o, "fingerprint", false, 64, &t->fingerprint, "model", err) ||
        get_text(o, "wire", false, 32, &t->wire, "model", err))
        return -1;
    if (t->fingerprint[0] && strlen(t->fingerprint) != 64)
        return mw_errf(err, "model: \"fingerprint\" must be 64 hex digits");
    if (!t->wire[0]) {
        free(t->wire);
        if (!(t->wire = strdup("f16"))) return mw_errf(err, "out of memory");
    }
    return 0;
}

static int unique_names(const vx_topology *t, mw_err *err) {
    for (int i = 0; i < t->n_hosts + t->n_coords; i++)
        for (int j = 0; j < i; j++) {
            const char *a = i < t->n_hosts ? t->hosts[i].name : t->coords[i - t->n_hosts].name;
            const char *b = j < t->n_hosts ? t->hosts[j].name : t->coords[j - t->n_hosts].name;
            if (!strcmp(a, b)) return mw_errf(err, "the name '%s' is used twice", a);
        }
    for (int i = 0; i < t->n_hosts; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(t->hosts[i].endpoint, t->hosts[j].endpoint))
                return mw_errf(err, "hosts %s and %s share the endpoint %s", t->hosts[j].name,
                               t->hosts[i].name, t->hosts[i].endpoint);
    return 0;
}

static int read_lists(const json_t *root, vx_topology *t, mw_err *err) {
    const json_t *hosts = json_object_get(root, "hosts"),
                 *coords = json_object_get(root, "coordinators");
    if (!json_is_array(hosts) || json_array_size(hosts) < 1 ||
        json_array_size(hosts) > VX_TOPO_MAX_HOSTS)
        return mw_errf(err, "\"hosts\" must be an array of 1 .. %d hosts", VX_TOPO_MAX_HOSTS);
    if (!json_is_array(coords) || json_array_size(coords) < 1 ||
        json_array_size(coords) > VX_TOPO_MAX_COORDS)
        return mw_errf(err, "\"coordinators\" must be an array of 1 .. %d", VX_TOPO_MAX_COORDS);
    t->hosts = calloc(json_array_size(hosts), sizeof *t->hosts);
    t->coords = calloc(json_array_size(coords), sizeof *t->coords);
    if (!t->hosts || !t->coords) return mw_errf(err, "out of memory");
    size_t i;
    const json_t *o;
    json_array_foreach((json_t *)hosts, i, o) {
        t->n_hosts++;
        if (read_host(o, &t->hosts[i], (int)i, err)) return -1;
    }
    json_array_foreach((json_t *)coords, i, o) {
        t->n_coords++;
        if (read_coord(o, &t->coords[i], (int)i, err)) return -1;
    }
    return unique_names(t, err);
}

static int read_root(const json_t *root, vx_topology *t, mw_err *err) {
    static const char *const keys[] = {"format",       "version", "name",        "model", "hosts",
                                       "coordinators", "links",   "replication", NULL};
    const json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version");
    if (only_keys(root, keys, "the topology", err)) return -1;
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), FORMAT_NAME) ||
        !json_is_integer(ver) || json_integer_value(ver) != 1)
        return mw_errf(err, "not a moewire topology (\"format\": \"%s\", \"version\": 1)",
                       FORMAT_NAME);
    if (get_name(root, t->name, "the topology", err) ||
        read_model(json_object_get(root, "model"), t, err) || read_lists(root, t, err) ||
        read_links(json_object_get(root, "links"), t, err))
        return -1;
    for (int h = 0; h < t->n_hosts; h++)
        if (!t->hosts[h].vindex[0]) {
            free(t->hosts[h].vindex);
            if (!(t->hosts[h].vindex = strdup(t->model_path))) return mw_errf(err, "out of memory");
        }
    return read_policy(json_object_get(root, "replication"), t, t->n_hosts, err);
}

static void hash_text(const char *text, size_t n, char out[65]) {
    uint8_t d[VX_DIGEST_BYTES];
    vx_sha s;
    memset(d, 0, sizeof d);
    if (vx_sha_init(&s) == 0) {
        vx_sha_update(&s, text, n);
        vx_sha_final(&s, d);
    }
    vx_hex(d, out);
}

int vx_topology_load(const char *path, vx_topology *t, mw_err *err) {
    memset(t, 0, sizeof *t);
    size_t n = 0;
    char *text = vx_read_file(path, MAX_BYTES, &n, err);
    if (!text) return -1;
    const vx_json_limits lim = {
        .max_depth = 6, .bytes_per_object = 16, .bytes_per_array = 8, .bytes_per_item = 2};
    json_t *root = vx_json_parse(text, n, path, &lim, err);
    if (root) hash_text(text, n, t->sha256);
    free(text);
    if (!root) return -1;
    int rc = read_root(root, t, err);
    json_decref(root);
    if (rc == 0) rc = (t->path = strdup(path)) ? 0 : mw_errf(err, "out of memory");
    if (rc) {
        mw_err_wrap(err, "%s", path);
        vx_topology_free(t);
    }
    return rc;
}

void vx_topology_free(vx_topology *t) {
    for (int i = 0; t->hosts && i < t->n_hosts; i++) {
        free(t->hosts[i].endpoint);
        free(t->hosts[i].vindex);
    }
    for (int i = 0; t->coords && i < t->n_coords; i++) {
        free(t->coords[i].address);
        free(t->coords[i].listen);
    }
    free(t->hosts);
    free(t->coords);
    free(t->path);
    free(t->model_path);
    free(t->fingerprint);
    free(t->wire);
    memset(t, 0, sizeof *t);
}
