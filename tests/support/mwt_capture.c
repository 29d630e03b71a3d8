/* tests/support/mwt_capture.c — see mwt_capture.h. */
#include "tests/support/mwt_capture.h"

#include "tests/support/mw_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mwt_capture_observer(void *ud, int layer, md_probe p, const void *data, int64_t rows,
                          int64_t cols) {
    mwt_capture *c = ud;
    const int l = layer < 0 ? MWT_MAX_LAYERS : layer;
    assert_true(l <= MWT_MAX_LAYERS);
    free(c->data[l][p]);
    c->n[l][p] = rows * cols;
    c->data[l][p] = malloc((size_t)(rows * cols) * sizeof(float));
    const bool ids = p == MD_PROBE_TOPK || p == MD_PROBE_GROUP_TOPK;
    for (int64_t i = 0; i < rows * cols; i++)
        c->data[l][p][i] = ids ? (float)((const int32_t *)data)[i] : ((const float *)data)[i];
}

void mwt_capture_free(mwt_capture *c) {
    for (int l = 0; l <= MWT_MAX_LAYERS; l++)
        for (int p = 0; p < MD_PROBE_COUNT; p++) {
            free(c->data[l][p]);
            c->data[l][p] = NULL;
        }
}

const float *mwt_captured(const mwt_capture *c, int layer, md_probe p, size_t n) {
    const int l = layer < 0 ? MWT_MAX_LAYERS : layer;
    if (l > MWT_MAX_LAYERS) return NULL;
    return c->data[l][p] && (size_t)c->n[l][p] == n ? c->data[l][p] : NULL;
}

int mwt_split_name(const char *tname, char *base, size_t cap) {
    const char *dash = strrchr(tname, '-');
    if (!dash || !dash[1] || strspn(dash + 1, "0123456789") != strlen(dash + 1)) {
        snprintf(base, cap, "%s", tname);
        return -1;
    }
    snprintf(base, cap, "%.*s", (int)(dash - tname), tname);
    return atoi(dash + 1);
}

float *mwt_intermediate(const struct json_t *ent, const unsigned char *data, size_t n,
                        mwt_layout layout) {
    const bool i32 = !strcmp(json_string_value(json_object_get(ent, "dtype")), "i32");
    json_t *shape = json_object_get(ent, "shape_row_major");
    const bool three = json_array_size(shape) == 3;
    const size_t A = (size_t)json_integer_value(json_array_get(shape, 0));
    const size_t B = three ? (size_t)json_integer_value(json_array_get(shape, 1)) : 1;
    const size_t X = three ? n / (A * B) : 1;
    float *ref = malloc(n * sizeof *ref);
    for (size_t j = 0; j < n; j++) {
        size_t dst = j;
        if (three && layout == MWT_HEAD_MAJOR) dst = ((j / X) % B * A + j / (X * B)) * X + j % X;
        if (three && layout == MWT_STATE) dst = j / (B * X) * B * X + j % X * B + j / X % B;
        if (i32) {
            int32_t v;
            memcpy(&v, data + 4 * j, 4);
            ref[dst] = (float)v;
        } else {
            memcpy(&ref[dst], data + 4 * j, 4);
        }
    }
    return ref;
}
