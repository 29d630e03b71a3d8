/* tests/support/mwt_capture.h — comparing a forward pass with llama.cpp's captured intermediates
 * (the fixtures' intermediates.bin / .json): an observer keeping the last value of every
 * (layer, probe), the fixture names' layer suffix, and an entry's values in the observer's layout.
 */
#ifndef MWT_CAPTURE_H
#define MWT_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "model/md_model.h"

struct json_t;

#define MWT_MAX_LAYERS 8

typedef struct mwt_capture {
    float *data[MWT_MAX_LAYERS + 1][MD_PROBE_COUNT]; /* [MWT_MAX_LAYERS] holds layer -1 */
    int64_t n[MWT_MAX_LAYERS + 1][MD_PROBE_COUNT];
} mwt_capture;

/* An md_observer_fn for md_ctx_set_observer with ud an mwt_capture: keeps a copy of every value
 * (int32 expert ids and groups as floats, exact below 2^24). */
void mwt_capture_observer(void *ud, int layer, md_probe p, const void *data, int64_t rows,
                          int64_t cols);
void mwt_capture_free(mwt_capture *c);
/* What was observed last for (layer, p) when it had n values, else NULL. */
const float *mwt_captured(const mwt_capture *c, int layer, md_probe p, size_t n);

/* "name-L" → base "name" and layer L; a name without a layer gives -1. */
int mwt_split_name(const char *tname, char *base, size_t cap);

/* How an intermediate is laid out in llama.cpp against the observer. */
typedef enum mwt_layout {
    MWT_ROWS,       /* the same: token first */
    MWT_HEAD_MAJOR, /* [head][token][x] for the observer's [token][head][x] */
    MWT_STATE,      /* a delta-rule state [head][value j][key i] for md_ctx_kda_state's [h][i][j] */
} mwt_layout;

/* The n values of one intermediates.json entry (at data) as floats in the observer's layout
 * (malloc'ed): int32 values converted, transposed as `layout` says. */
float *mwt_intermediate(const struct json_t *ent, const unsigned char *data, size_t n,
                        mwt_layout layout);

#endif
