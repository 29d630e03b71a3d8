/* vindex/vx_inspect.c — `vindex inspect`: a summary of a vindex, for people or (--json) programs.
 * Long arrays (vocabularies, merges) are summarised as their element type and length. */
#include <stdlib.h>
#include <string.h>

#include "vindex/vx_manifest.h"
#include "vindex/vx_meta_internal.h"
#include "vindex/vx_vindex.h"

#define SHOW_ARRAY_MAX 16 /* arrays up to this long are shown in full */

static json_t *value_summary(const vx_meta *meta, size_t i) {
    const vx__val *v = vx__meta_val(meta, i);
    if (v->type != VX_ARR || v->u.arr.n <= SHOW_ARRAY_MAX) {
        vx_meta *one = vx_meta_new();
        json_t *j = NULL;
        if (one && vx_meta_copy_entry(one, meta, i) == 0) {
            json_t *arr = vx_meta_to_json(one);
            j = json_incref(json_object_get(json_array_get(arr, 0), "value"));
            json_decref(arr);
        }
        vx_meta_free(one);
        return j;
    }
    char s[64];
    snprintf(s, sizeof s, "[%s × %llu]", vx_vtype_name(v->u.arr.elem),
             (unsigned long long)v->u.arr.n);
    return json_string(s);
}

static json_t *layer_summary(const vx_manifest *m, const vx_mf_layer *L) {
    json_t *parts = json_array();
    for (int r = 0; r < VX_ROLE_COUNT; r++) {
        const vx_part *p = &L->shape.part[r];
        if (!p->present) continue;
        json_array_append_new(
            parts, json_pack("{s:s,s:s,s:I,s:I,s:I}", "role", vx_role_name((vx_role)r), "type",
                             kn_type_name(p->type), "rows", (json_int_t)p->rows, "cols",
                             (json_int_t)p->cols, "bytes", (json_int_t)p->slice_bytes));
    }
    return json_pack("{s:i,s:s,s:I,s:I,s:o}", "layer", L->layer, "file", L->file, "extents",
                     (json_int_t)L->n_ext, "extent_bytes", (json_int_t)L->extent_bytes, "parts",
                     parts);
}

static json_t *summary(const char *dir, const vx_manifest *m) {
    vx_expert_set held;
    mw_err err;
    if (vx_manifest_held(m, &held, &err)) return NULL;
    char *holds = vx_expert_set_format(&held);
    size_t n_held = vx_expert_set_count(&held);
    vx_expert_set_free(&held);
    uint64_t expert_bytes = 0;
    json_t *layers = json_array(), *types = json_object(), *meta = json_object(),
           *files = json_array();
    for (size_t i = 0; i < m->n_moe; i++) {
        json_array_append_new(layers, layer_summary(m, &m->moe[i]));
        expert_bytes += m->moe[i].file_size;
        if (m->moe[i].n_ext)
            json_array_append_new(files, json_pack("{s:s,s:I}", "name", m->moe[i].file, "size",
                                                   (json_int_t)m->moe[i].file_size));
    }
    if (m->has_dense)
        json_array_append_new(files, json_pack("{s:s,s:I}", "name", m->dense.name, "size",
                                               (json_int_t)m->dense.size));
    for (size_t i = 0; i < m->n_carried; i++)
        json_array_append_new(files, json_pack("{s:s,s:I}", "name", m->carried[i].name, "size",
                                               (json_int_t)m->carried[i].size));
    for (size_t i = 0; i < m->n_tensors; i++) {
        const char *tn = kn_type_name(m->tensors[i].type);
        json_t *c = json_object_get(types, tn);
        json_object_set_new(types, tn, json_integer(c ? json_integer_value(c) + 1 : 1));
    }
    for (size_t i = 0; i < vx_meta_count(m->meta); i++)
        json_object_set_new(meta, vx_meta_key(m->meta, i), value_summary(m->meta, i));
    json_t *prov = m->provenance;
    json_t *j = json_pack(
        "{s:s,s:s,s:i,s:s,s:i,s:i,s:I,s:s,s:I,s:I,s:b,s:I,s:I,s:o,s:{s:I,s:I,s:I,s:o},s:o,s:o,"
        "s:{s:O?,s:O?,s:I,s:I,s:I}}",
        "path", dir, "format", VX_FORMAT_NAME, "version", VX_FORMAT_VERSION, "fingerprint",
        m->fingerprint, "layers", m->n_layers, "experts", m->n_experts, "hidden",
        (json_int_t)m->hidden, "holds", holds ? holds : "", "extents_held", (json_int_t)n_held,
        "extents_total", (json_int_t)m->n_moe * m->n_experts, "dense", m->has_dense, "dense_bytes",
        (json_int_t)(m->has_dense ? m->dense.size : 0), "expert_bytes", (json_int_t)expert_bytes,
        "files", files, "tensors", "count", (json_int_t)m->n_tensors, "dense",
        (json_int_t)m->n_dense, "expert", (json_int_t)(m->n_tensors - m->n_dense), "by_type", types,
        "moe_layers", layers, "metadata", meta, "provenance", "input",
        json_object_get(prov, "input"), "sources", json_object_get(prov, "sources"), "dropped",
        (json_int_t)json_array_size(json_object_get(prov, "dropped")), "unrecognised",
        (json_int_t)json_array_size(json_object_get(prov, "unrecognised")), "transcoded",
        (json_int_t)json_array_size(json_object_get(prov, "transcoded")));
    json_object_set_new(j, "arch", json_string(m->arch));
    free(holds);
    return j;
}

static void human_bytes(uint64_t b, char *out, size_t n) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

static void print_human(FILE *out, const json_t *j, const vx_manifest *m) {
    char b1[32], b2[32];
    fprintf(out, "vindex %s\n", json_string_value(json_object_get(j, "path")));
    fprintf(out, "  format       %s v%d\n", VX_FORMAT_NAME, VX_FORMAT_VERSION);
    fprintf(out, "  fingerprint  %s\n", m->fingerprint);
    fprintf(out, "  model        %s: %d layers, hidden %lld, %d experts\n", m->arch, m->n_layers,
            (long long)m->hidden, m->n_experts);
    human_bytes((uint64_t)json_integer_value(json_object_get(j, "expert_bytes")), b1, sizeof b1);
    fprintf(out, "  holds        %s (%lld of %lld extents, %s)\n",
            json_string_value(json_object_get(j, "holds")),
            (long long)json_integer_value(json_object_get(j, "extents_held")),
            (long long)json_integer_value(json_object_get(j, "extents_total")), b1);
    human_bytes(m->has_dense ? m->dense.size : 0, b2, sizeof b2);
    fprintf(out, "  dense        %s\n", m->has_dense ? b2 : "not held (slice)");
    fprintf(out, "  tensors      %zu (%zu dense, %zu expert):", m->n_tensors, m->n_dense,
            m->n_tensors - m->n_dense);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(json_object_get(j, "tensors"), "by_type"), k, v)
        fprintf(out, " %s %lld", k, (long long)json_integer_value(v));
    fprintf(out, "\n");
    for (size_t i = 0; i < m->n_moe; i++) {
        const vx_mf_layer *L = &m->moe[i];
        if (m->n_moe > 4 && i >= 2 && i + 1 < m->n_moe) { /* first two and the last */
            if (i == 2) fprintf(out, "  ...\n");
            continue;
        }
        human_bytes(L->extent_bytes, b1, sizeof b1);
        fprintf(out, "  layer %-4d   %s: %zu extents of %s:", L->layer, L->file, L->n_ext, b1);
        for (int r = 0; r < VX_ROLE_COUNT; r++) {
            const vx_part *p = &L->shape.part[r];
            if (p->present)
                fprintf(out, " %s %s %lldx%lld", vx_role_name((vx_role)r), kn_type_name(p->type),
                        (long long)p->rows, (long long)p->cols);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "  metadata     %zu keys\n", vx_meta_count(m->meta));
    json_object_foreach(json_object_get(j, "metadata"), k, v) {
        char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(9));
        fprintf(out, "    %-44s %s\n", k, txt ? txt : "?");
        free(txt);
    }
    const json_t *prov = json_object_get(j, "provenance");
    fprintf(out, "  source       %s", json_string_value(json_object_get(prov, "input")));
    size_t i;
    json_array_foreach(json_object_get(prov, "sources"), i, v) {
        human_bytes((uint64_t)json_integer_value(json_object_get(v, "size")), b1, sizeof b1);
        fprintf(out, "%s %s (%s, sha256 %.16s…)", i ? "," : ":",
                json_string_value(json_object_get(v, "name")), b1,
                json_string_value(json_object_get(v, "sha256")));
    }
    fprintf(out, "\n  coverage     %lld dropped by rule, %lld unrecognised, %lld transcoded\n",
            (long long)json_integer_value(json_object_get(prov, "dropped")),
            (long long)json_integer_value(json_object_get(prov, "unrecognised")),
            (long long)json_integer_value(json_object_get(prov, "transcoded")));
}

int vx_inspect(const char *dir, bool as_json, FILE *out, mw_err *err) {
    vx_manifest m;
    if (vx_manifest_read(dir, &m, err)) return -1;
    json_t *j = summary(dir, &m);
    int rc = 0;
    if (!j) {
        rc = mw_errf(err, "%s: out of memory", dir);
    } else if (as_json) {
        rc = json_dumpf(j, out, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) == 0 ? 0 : -1;
        fputc('\n', out);
    } else {
        print_human(out, j, &m);
    }
    json_decref(j);
    vx_manifest_free(&m);
    return rc;
}
