/* metal/mt_bank.c — synthetic expert banks (mt_bank.h): sizes first, then one page-aligned
 * buffer, then every matrix quantized into its place. */
#include "metal/mt_bank.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const mt_bank_layer mt_bank_layers[] = {
    {"mxfp4", KN_MXFP4, KN_MXFP4, 352, 608, 6, KN_F32, false},
    {"q8_0", KN_Q8_0, KN_Q8_0, 288, 320, 5, KN_F16, false},
    {"q4_K", KN_Q4_K, KN_Q4_K, 2304, 256, 4, -1, false},
    {"q6_K", KN_Q6_K, KN_Q6_K, 256, 2304, 4, -1, false},
    {"q4_K+q6_K", KN_Q4_K, KN_Q6_K, 512, 512, 4, -1, false},
    {"mxfp4+q8_0", KN_MXFP4, KN_Q8_0, 224, 288, 4, KN_F32, false},
};
const int mt_bank_n_layers = (int)(sizeof mt_bank_layers / sizeof mt_bank_layers[0]);

float mt_bank_rand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)(*s >> 40) / (float)(1 << 23) - 1.0f;
}

/* The matrices of one expert of a layer, in extent order: gate, up, down, then the biases. */
static void shapes(const mt_bank_layer *l, kn_mat m[6]) {
    const kn_type bt = l->bias < 0 ? KN_F32 : (kn_type)l->bias;
    m[0] = (kn_mat){.type = l->gate_up, .rows = l->ff, .cols = l->hidden};
    m[1] = m[0];
    m[2] = (kn_mat){.type = l->down, .rows = l->hidden, .cols = l->ff};
    m[3] = (kn_mat){.type = bt, .rows = l->bias < 0 ? 0 : 1, .cols = l->ff};
    m[4] = m[3];
    m[5] = (kn_mat){.type = bt, .rows = l->bias < 0 ? 0 : 1, .cols = l->hidden};
    for (int i = 0; i < 6; i++) m[i].row_bytes = kn_row_size(m[i].type, m[i].cols);
}

static size_t align64(size_t n) {
    return (n + 63) & ~(size_t)63;
}

/* Quantizes random values into m (its data set), scaled so sums stay moderate; or, for noise,
 * random bytes. */
static void fill_mat(kn_mat *m, uint8_t *at, uint64_t *s, float *tmp, bool noise) {
    m->data = at;
    if (noise) { /* eight bytes of the stream at a time */
        const size_t n = (size_t)m->rows * m->row_bytes;
        for (size_t i = 0; i < n; i += 8) {
            mt_bank_rand(s);
            memcpy(at + i, s, n - i < 8 ? n - i : 8);
        }
        return;
    }
    const float scale = 1.0f / (float)(m->cols < 64 ? 8 : m->cols / 8);
    for (int64_t r = 0; r < m->rows; r++) {
        for (int64_t k = 0; k < m->cols; k++) tmp[k] = mt_bank_rand(s) * scale * 4.0f;
        kn_traits(m->type)->from_float(tmp, at + (size_t)r * m->row_bytes, m->cols);
    }
    /* MXFP4's subnormal scales: a real file never has them, a GPU that flushes them shows */
    if (m->type == KN_MXFP4 && m->rows > 2) {
        at[0] = 0x00;
        at[m->row_bytes + 17] = 0x01;
    }
}

int mt_bank_make(mt_bank *b, const mt_bank_layer *layers, int n_layers, uint64_t seed,
                 mw_err *err) {
    memset(b, 0, sizeof *b);
    int max_e = 0;
    int64_t max_k = 0;
    for (int l = 0; l < n_layers; l++) {
        kn_mat m[6];
        shapes(&layers[l], m);
        for (int i = 0; i < 6; i++) {
            if (m[i].rows && !m[i].row_bytes)
                return mw_errf(err, "bank layer %s: %lld columns do not fit %s", layers[l].name,
                               (long long)m[i].cols, kn_type_name(m[i].type));
            b->blob_len +=
                align64((size_t)m[i].rows * m[i].row_bytes) * (size_t)layers[l].n_experts;
            if (m[i].cols > max_k) max_k = m[i].cols;
        }
        if (layers[l].n_experts > max_e) max_e = layers[l].n_experts;
    }
    const long page = sysconf(_SC_PAGESIZE);
    b->blob_len = (b->blob_len + (size_t)page - 1) / (size_t)page * (size_t)page;
    float *tmp = malloc((size_t)max_k * sizeof(float));
    b->table = (md_expert_table){.n_layers = n_layers, .n_experts = max_e};
    b->table.experts = calloc((size_t)n_layers * (size_t)max_e, sizeof(kn_expert));
    if (!tmp || !b->table.experts || posix_memalign((void **)&b->blob, (size_t)page, b->blob_len)) {
        free(tmp);
        mt_bank_free(b);
        return mw_errf(err, "bank: out of memory for %zu bytes", b->blob_len);
    }
    memset(b->blob, 0, b->blob_len);
    uint64_t s = seed | 1;
    size_t at = 0;
    for (int l = 0; l < n_layers; l++)
        for (int e = 0; e < layers[l].n_experts; e++) {
            kn_mat m[6];
            shapes(&layers[l], m);
            for (int i = 0; i < 6; i++) {
                if (!m[i].rows) continue;
                fill_mat(&m[i], b->blob + at, &s, tmp, layers[l].noise);
                at += align64((size_t)m[i].rows * m[i].row_bytes);
            }
            *md_expert_table_at(&b->table, l, e) = (kn_expert){m[0], m[1], m[2], m[3], m[4], m[5]};
        }
    free(tmp);
    return 0;
}

void mt_bank_free(mt_bank *b) {
    free(b->table.experts);
    free(b->blob);
    memset(b, 0, sizeof *b);
}

void mt_bank_rows(float *x, int64_t T, int64_t w, uint64_t *s) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < w; k++)
            x[t * w + k] = mt_bank_rand(s) * (t % 5 == 4 ? 300.0f : 2.0f);
}

int64_t mt_bank_route(md_assignment *as, int64_t T, int k, int n, uint64_t *s) {
    int64_t count = 0;
    for (int64_t t = 0; t < T; t++) {
        if (t % 7 == 6) continue;
        uint32_t used = 0;
        for (int j = 0; j < k; j++) {
            int e;
            do e = (int)((mt_bank_rand(s) + 1.0f) * 0.5f * (float)n) % n;
            while (used & (1u << e));
            used |= 1u << e;
            as[count++] = (md_assignment){(int32_t)t, e, 0.5f + 0.5f * mt_bank_rand(s)};
        }
    }
    return count;
}

const kn_expert *mt_bank_lookup(void *ctx, int layer, int expert, mw_err *err) {
    const mt_bank *b = ctx;
    if (layer < 0 || layer >= b->table.n_layers || expert < 0 || expert >= b->table.n_experts ||
        !md_expert_table_at(&b->table, layer, expert)->gate.data) {
        mw_errf(err, "bank: no expert (%d, %d)", layer, expert);
        return NULL;
    }
    return md_expert_table_at(&b->table, layer, expert);
}
