/* kernels/kn_internal.h — what the kernel files share and nothing outside kernels/ may use: block
 * layouts, the canonical reduction order, rounding rules, the per-ISA kernel tables and the pool's
 * scratch memory.
 *
 * The canonical order (docs/kernels.md) is the heart of batch invariance. Every path — scalar,
 * AVX2, NEON — accumulates a dot product into fixed lanes and reduces the lanes with the trees
 * below, so a row's result never depends on T, the thread count or the instruction set:
 *  - Q8 mode (block formats): block b's exact integer sum goes to lane b % 8 as
 *    acc[b % 8] = fmaf((float)isum_b, scale_b, acc[b % 8]); then kn__tree8.
 *  - Float lanes (KN_NUM_F32, and F32/F16/BF16 weights in either mode): element k goes to lane
 *    k % 32 as acc[k % 32] = fmaf(w_k, x_k, acc[k % 32]); then kn__tree32. */
#ifndef KN_INTERNAL_H
#define KN_INTERNAL_H

#include "kernels/kn.h"
#include "kernels/kn_exp.h"

#include <math.h>
#include <string.h>

/* ---- block layouts --------------------------------------------------------------------------- */

/* Byte offsets and sizes. Weights are read with memcpy, never through casts, because mmap'ed
 * tensors promise no alignment. */

#define KN__QK32   32  /* elements of an MXFP4 / Q8_0 block */
#define KN__QK_K   256 /* elements of a K-quant super-block */
#define KN__QLANES 8   /* block lanes of the Q8-mode order */
#define KN__FLANES 32  /* element lanes of the float order */

#define KN__MXFP4_BYTES 17  /* e (E8M0), qs[16] */
#define KN__Q8_0_BYTES  34  /* d (fp16), qs[32] */
#define KN__Q6_K_BYTES  210 /* ql[128], qh[64], scales[16], d (fp16) */
#define KN__Q4_K_BYTES  144 /* d, dmin (fp16), scales[12], qs[128] */
#define KN__Q8_K_BYTES  292 /* d (f32), qs[256], bsums[16] (int16) */

/* Activation blocks are ours (always aligned), so they are plain structs. */
typedef struct kn__block_q8_0 {
    uint16_t d;
    int8_t qs[KN__QK32];
} kn__block_q8_0;

typedef struct kn__block_q8_K {
    float d;
    int8_t qs[KN__QK_K];
    int16_t bsums[KN__QK_K / 16];
} kn__block_q8_K;

_Static_assert(sizeof(kn__block_q8_0) == KN__Q8_0_BYTES, "block_q8_0 layout");
_Static_assert(sizeof(kn__block_q8_K) == KN__Q8_K_BYTES, "block_q8_K layout");

static inline uint16_t kn__rd16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}
static inline void kn__wr16(uint8_t *p, uint16_t v) {
    memcpy(p, &v, 2);
}
static inline float kn__bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t kn__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* fp16 -> float, exact (kn_fp16_to_f32 is this, out of line); inlined in hot loops. */
static inline float kn__half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1F) return kn__bits_f32(sign | 0x7F800000u | (man << 13)); /* inf / NaN */
    if (exp != 0) return kn__bits_f32(sign | ((exp + 112) << 23) | (man << 13));
    const float v = (float)man * 0x1p-24f; /* zero or subnormal: exact */
    return sign ? -v : v;
}

/* MXFP4 code table: e2m1 values doubled so they are integers (FORMATS.md §1). */
extern const int8_t kn__mxfp4_kvalues[16];

/* ggml's "E8M0 to float, halved": 2^(e-128) for every e, 0x00 and 0x01 as float subnormals,
 * 0xFF as 2^127 (no NaN). */
extern const uint32_t kn__e8m0_half_bits[256]; /* the same values as float bit patterns */
static inline float kn__e8m0_half(uint8_t e) {
    return kn__bits_f32(kn__e8m0_half_bits[e]);
}

/* Q6_K: the 6-bit code (0..63) of weight i (0..255) of a block: low 4 bits from ql, high 2 bits
 * from qh (FORMATS.md §1). The weight is (d * scales[i / 16]) * (code - 32). */
static inline int kn__q6k_code(const uint8_t *blk, int i) {
    const int n = i / 128, r = i % 128, l = r % 32, quarter = r / 32;
    const uint8_t lo = blk[64 * n + l + (quarter & 1) * 32];
    const int low = (quarter & 2) ? lo >> 4 : lo & 0xF;
    return low | ((blk[128 + 32 * n + l] >> (2 * quarter)) & 3) << 4;
}

/* Q4_K's j-th 6-bit scale and min, packed into 12 bytes. */
static inline void kn__q4k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* ---- canonical lane reductions --------------------------------------------------------------- */

/* The 8-lane tree: what an AVX2 horizontal sum does naturally (low half + high half, then the
 * upper pair onto the lower pair, then the last two) and NEON reproduces. */
static inline float kn__tree8(const float l[8]) {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* The 32-lane tree: four groups of 8 lanes (AVX2: four accumulators) folded as
 * (g0 + g1) + (g2 + g3), then kn__tree8. */
static inline float kn__tree32(const float l[32]) {
    float v[8];
    for (int i = 0; i < 8; i++) v[i] = (l[i] + l[i + 8]) + (l[i + 16] + l[i + 24]);
    return kn__tree8(v);
}

/* Float-lane dot of n elements (any n) in the canonical order. Shared by every path that has no
 * SIMD version of its own. */
float kn__dot_f32_ref(const float *w, const float *x, int64_t n);

/* ---- activation rounding (FORMATS.md §2, ggml's AVX2 build) ---------------------------------- */

/* Round half to even, saturated to [-127, 127]; NaN gives 0. The clamp never changes a finite
 * ggml result: |x * id| <= 127 by construction. */
static inline int8_t kn__round_q8(float v) {
    float r = nearbyintf(v);
    if (!(r >= -127.0f)) r = (r != r) ? 0.0f : -127.0f;
    if (r > 127.0f) r = 127.0f;
    return (int8_t)r;
}

/* Quantizes one 32-value Q8_0 activation block (amax, d = amax/127 as fp16, id = 127/amax). */
void kn__quant_q8_0_block(const float *x, kn__block_q8_0 *y);

/* ---- dequantizers and quantizers (traits functions) ------------------------------------------ */

void kn__dequant_mxfp4(const void *src, float *dst, int64_t k);
void kn__dequant_mxfp4_ct(const void *src, float *dst, int64_t k); /* one row: codes, scales */
void kn__quant_mxfp4_ct(const float *src, void *dst, int64_t k);
void kn__quant_mxfp4(const float *src, void *dst, int64_t k);
void kn__dequant_q8_0(const void *src, float *dst, int64_t k);
void kn__quant_q8_0(const float *src, void *dst, int64_t k);
void kn__dequant_q8_K(const void *src, float *dst, int64_t k);
void kn__quant_q8_K(const float *src, void *dst, int64_t k);
void kn__dequant_q6_K(const void *src, float *dst, int64_t k);
void kn__quant_q6_K(const float *src, void *dst, int64_t k);
void kn__dequant_q4_K(const void *src, float *dst, int64_t k);
void kn__quant_q4_K(const float *src, void *dst, int64_t k);
void kn__dequant_f32(const void *src, float *dst, int64_t k);
void kn__quant_f32(const float *src, void *dst, int64_t k);
void kn__dequant_f16(const void *src, float *dst, int64_t k);
void kn__quant_f16(const float *src, void *dst, int64_t k);
void kn__dequant_bf16(const void *src, float *dst, int64_t k);
void kn__quant_bf16(const float *src, void *dst, int64_t k);

/* ---- kernels --------------------------------------------------------------------------------- */

/* Activations as a kernel reads them: T rows of `stride` bytes (prepared by the kernel's
 * act_prep, or the caller's floats when act_prep is NULL). */
typedef struct kn__act {
    const void *data;
    size_t stride;
    int64_t T;
} kn__act;

/* One way of computing rows of W for a weight type in a numerics mode. Every kernel of every ISA
 * follows the canonical order, so any of them may serve any row. */
typedef struct kn__kernel {
    const char *name;
    /* Bytes of one prepared activation row of k values (0 with act_prep NULL: raw floats). */
    size_t (*act_bytes)(int64_t k);
    void (*act_prep)(const float *x, void *dst, int64_t k); /* from_float's signature */
    /* Per-thread scratch bytes for rows of W (may be NULL: none). */
    size_t (*scratch_bytes)(const kn_mat *W, int64_t T);
    /* Y[t * ldy + n] for t < x->T and n0 <= n < n1. */
    void (*rows)(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0, int64_t n1,
                 void *scratch);
} kn__kernel;

/* An ISA's packed copies of a weight type for its Q8-mode kernels (kn_pack): the bytes for W, and
 * writing them. The kernel of that ISA and type reads them when W->packed is set: for batches
 * only, or at every T (`every_t`: the stored rows are then not read at all). */
typedef struct kn__packer {
    size_t (*bytes)(const kn_mat *W);
    void (*pack)(const kn_mat *W, void *dst);
    bool every_t;
} kn__packer;
const kn__packer *kn__packer_for(kn_type t);  /* the active ISA's (NULL: none) */
const kn__packer *kn__packer_isa(kn_type t);  /* the same for a stored (not planar) type */
const kn__packer *kn__packer_avx2(kn_type t); /* the AVX2 and AVX-VNNI rows' (one layout) */
const kn__packer *kn__packer_avx512(kn_type t);

/* A packed copy may begin with this header: the matrix it was made from and its layout (a magic
 * per layout and ISA), so neither a view changed after packing (other data, rows or columns) nor
 * another ISA's kernels read it as theirs. 64 bytes: the data after it stays aligned. */
typedef struct kn__pack_hdr {
    uint64_t magic;
    const void *data;
    int64_t rows, cols;
    size_t row_bytes;
    uint8_t pad[24];
} kn__pack_hdr;
_Static_assert(sizeof(kn__pack_hdr) == 64, "kn__pack_hdr keeps the data aligned");

/* Writes the header naming W and magic at dst; returns where the packed data goes. */
static inline uint8_t *kn__pack_start(const kn_mat *W, void *dst, uint64_t magic) {
    *(kn__pack_hdr *)dst = (kn__pack_hdr){.magic = magic,
                                          .data = W->data,
                                          .rows = W->rows,
                                          .cols = W->cols,
                                          .row_bytes = W->row_bytes};
    return (uint8_t *)dst + sizeof(kn__pack_hdr);
}

/* A packed copy of a 32-value block format in W's own geometry (size, row stride, offsets), after
 * the header naming W and magic: each full group of 8 blocks rewritten by group(in, out, ctx) into
 * as many bytes, a tail group of n blocks by tail(in, out, n, ctx) (NULL: as stored), each row's
 * padding zeroed. */
static inline void kn__pack_groups(const kn_mat *W, void *dst, uint64_t magic, int block_bytes,
                                   void (*group)(const uint8_t *in, uint8_t *out, const void *ctx),
                                   void (*tail)(const uint8_t *in, uint8_t *out, int n,
                                                const void *ctx),
                                   const void *ctx) {
    uint8_t *rows = kn__pack_start(W, dst, magic);
    const size_t stored = kn_row_size(W->type, W->cols);
    const int64_t full = W->cols / KN__QK32 / 8;
    const int left = (int)(W->cols / KN__QK32 - 8 * full);
    const size_t gb = 8 * (size_t)block_bytes, fb = (size_t)full * gb; /* the full groups' bytes */
    for (int64_t r = 0; r < W->rows; r++) {
        uint8_t *q = rows + (size_t)r * W->row_bytes;
        const uint8_t *src = (const uint8_t *)W->data + (size_t)r * W->row_bytes;
        for (int64_t g = 0; g < full; g++) group(src + g * gb, q + g * gb, ctx);
        if (tail && left)
            tail(src + fb, q + fb, left, ctx);
        else
            memcpy(q + fb, src + fb, stored - fb);
        memset(q + stored, 0, W->row_bytes - stored);
    }
}

/* The data after W->packed's header when it holds magic's layout of this very matrix, else NULL. */
static inline const uint8_t *kn__packed_data(const kn_mat *W, uint64_t magic) {
    const kn__pack_hdr *h = W->packed;
    if (!h || h->magic != magic || h->data != W->data || h->rows != W->rows || h->cols != W->cols ||
        h->row_bytes != W->row_bytes)
        return NULL;
    return (const uint8_t *)(h + 1);
}

/* A kernel table's lookup: the Q8-mode kernel of type t where there is one, the float-lane
 * kernel otherwise (F32 and Q8_K weights take float activations in both modes). */
static inline const kn__kernel *kn__kernel_pick(const kn__kernel *const q8[KN_TYPE_COUNT],
                                                const kn__kernel *flt, kn_type t, kn_numerics num) {
    const kn_type_traits *tr = kn_traits(t);
    if (!tr || !tr->can_compute) return NULL;
    return num == KN_NUM_Q8 && q8[t] ? q8[t] : flt;
}

/* The float-lane row loop the SIMD paths share. Rows are taken a few at a time (F32 rows read in
 * place, others converted by to_f32 into scratch) and K in chunks, so a chunk of every row of the
 * tile and of a token stays in L1 while it is used; the 32 lanes of every (row, token) dot live in
 * scratch between chunks, and each dot ends with kn__tree32. The ISA supplies lanes2: for nt <= 2
 * tokens, elements [k0, k1) (k0 a multiple of 32) in order,
 * acc[t][k % 32] = fmaf(w[k], x[t][k], acc[t][k % 32]); elements at or past n count as zero. */
typedef void (*kn__row_f32_fn)(const uint8_t *row, kn_type type, int64_t n, float *dst);
typedef void (*kn__lanes2_fn)(const float *w, const float *const *x, int nt, int64_t k0, int64_t k1,
                              int64_t n, float *const *acc);
void kn__rows_float(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,
                    int64_t n1, void *scratch, kn__row_f32_fn to_f32, kn__lanes2_fn lanes2);
/* Defines `fn`, an ISA's kn__kernel rows: kn__rows_float with its to_f32 and lanes2. */
#define KN__ROWS_FLOAT(fn, to_f32, lanes2)                                                         \
    static void fn(const kn_mat *W, const kn__act *x, float *Y, int64_t ldy, int64_t n0,           \
                   int64_t n1, void *scratch) {                                                    \
        kn__rows_float(W, x, Y, ldy, n0, n1, scratch, to_f32, lanes2);                             \
    }
size_t kn__scratch_float(const kn_mat *W, int64_t T);
/* Float activations rounded through fp16 / bf16 (F16 / BF16 weights in Q8 mode, as ggml does). */
size_t kn__f32_bytes(int64_t k);
void kn__prep_round_f16(const float *x, void *dst, int64_t k);
void kn__prep_round_bf16(const float *x, void *dst, int64_t k);

/* An ISA's float-lane kernels, written once for every ISA: its row loop `rows` (with `scratch`
 * bytes per thread) offered for float activations, <isa>_float (KN_NUM_F32, and F32 / Q8_K
 * weights in either mode), and for F16 / BF16 weights in Q8 mode, whose activations are first
 * rounded through the weight's own format: <isa>_f16_rounded (prep_f16: kn__prep_round_f16 or the
 * ISA's own, with the same bits) and <isa>_bf16_rounded. KN__ROUNDED_ROWS(isa) are the rounded
 * kernels' rows of a Q8-mode kernel table. */
#define KN__FLOAT_KERNELS(isa, scratch, rows, prep_f16)                                            \
    static const kn__kernel isa##_float = {#isa "-float", NULL, NULL, scratch, rows};              \
    static const kn__kernel isa##_f16_rounded = {#isa "-f16-rounded", kn__f32_bytes, prep_f16,     \
                                                 scratch, rows};                                   \
    static const kn__kernel isa##_bf16_rounded = {#isa "-bf16-rounded", kn__f32_bytes,             \
                                                  kn__prep_round_bf16, scratch, rows}
#define KN__ROUNDED_ROWS(isa) [KN_F16] = &isa##_f16_rounded, [KN_BF16] = &isa##_bf16_rounded

/* Planar types' kernels (kn_mxfp4_ct.c), in front of every table: the active ISA's, or with ref
 * the reference's; NULL for a type that is not planar. */
const kn__kernel *kn__kernel_planar(kn_type t, kn_numerics num, bool ref);
/* Row r of a planar matrix as floats (W->cols of them). */
void kn__planar_row(const kn_mat *W, int64_t r, float *dst);
/* The kernel the active ISA uses for (W's type, mode); never NULL for a computable type. */
const kn__kernel *kn__kernel_for(kn_type t, kn_numerics num);
/* The scalar reference's kernel (the truth every other ISA is tested against). */
const kn__kernel *kn__kernel_ref(kn_type t, kn_numerics num);
/* The two above for a stored (not planar) type: the active ISA's table walk (kn_isa.c) and the
 * scalar table (kn_ref.c). kn_dispatch.c puts the planar wrappers in front of them, and the
 * wrappers call them for their inner kernel, so the choice runs one way down. */
const kn__kernel *kn__kernel_isa(kn_type t, kn_numerics num);
const kn__kernel *kn__kernel_scalar(kn_type t, kn_numerics num);
/* Per-ISA tables (the rows of kn_isa.c): a NULL entry falls back to the ISA the row builds on, and
 * in the end to the scalar reference. */
const kn__kernel *kn__kernel_avx2(kn_type t, kn_numerics num);
const kn__kernel *kn__kernel_avxvnni(kn_type t, kn_numerics num); /* Q8-mode integer kernels */
const kn__kernel *kn__kernel_avx512(kn_type t, kn_numerics num);  /* Q8-mode integer kernels */
const kn__kernel *kn__kernel_neon(kn_type t, kn_numerics num);
/* Whether this CPU and build can run an ISA. */
bool kn__isa_avx2_usable(void);
bool kn__isa_avxvnni_usable(void);
bool kn__isa_avx512_usable(void); /* AVX-512 F, BW, VL, VNNI and VBMI */
bool kn__isa_neon_usable(void);   /* AArch64 with the dot-product extension */
/* Whether an ISA may be the default: on < 0 queries, 0 / 1 sets (1 only where usable). First use
 * reads the row's switch (MOEWIRE_VNNI=0, MOEWIRE_AVX512=0). kn_isa_force ignores it. */
int kn__isa_enable(kn_isa isa, int on);

/* ---- pool internals -------------------------------------------------------------------------- */

/* A caller takes the pool (one job at a time) while it uses the pool's scratch buffer and runs
 * jobs with kn__pool_run_locked. kn__pool_acquire returns the pool to use: p, locked; or NULL (run
 * inline, malloc'ed scratch) when p is NULL or this thread is already running one of p's tasks. */
kn_pool *kn__pool_acquire(kn_pool *p);
void kn__pool_release(kn_pool *p); /* what kn__pool_acquire returned */
/* A 64-byte aligned buffer of at least `bytes`, owned by the pool (reused across calls, with
 * 64 KiB of nothing on either side) or, for a NULL pool, by *tmp (free it with free()).
 * Returns NULL when out of memory. */
void *kn__pool_scratch(kn_pool *pool, size_t bytes, void **tmp);
void kn__pool_run_locked(kn_pool *pool, kn_task_fn fn, void *arg, int nth);

/* Rounds a byte count up to 64 (cache line). */
static inline size_t kn__align64(size_t n) {
    return (n + 63) & ~(size_t)63;
}

/* ---- matmul internals (shared by kn_matmul and kn_expert_run) -------------------------------- */

/* One matrix of a multi-matrix job: its kernel, prepared activations and output. */
typedef struct kn__part {
    const kn_mat *W;
    const kn__kernel *kern;
    kn__act x;
    float *Y;
    int64_t ldy;
    const float *bias; /* NULL, or W->rows floats added to every output row */
    /* set by kn__run_parts: rows [0, split) go in n_big chunks of big_rows, the rest in chunks of
     * chunk_rows; first_chunk is the job's index of the part's first chunk */
    int64_t chunk_rows, big_rows, split, n_big, first_chunk;
} kn__part;

/* Bytes of scratch kn__run_parts needs for these parts with nth threads. */
size_t kn__parts_scratch(const kn__part *parts, int nparts, int nth);
/* Computes all parts (any number) as one pool job, splitting rows across the pool. scratch:
 * kn__parts_scratch bytes. */
void kn__run_parts(kn__part *parts, int nparts, kn_pool *pool, void *scratch);
/* How many threads a job of this size deserves (1 for small work). */
int kn__parts_threads(const kn__part *parts, int nparts, kn_pool *pool);
/* Bytes of T prepared activation rows of K values for kernel k (0 when it reads raw floats). */
size_t kn__act_scratch(const kn__kernel *k, int64_t K, int64_t T);
/* Prepares T rows of X (K floats each) for kernel k into dst (kn__act_scratch bytes); sets *x. */
void kn__act_prepare(const kn__kernel *k, const float *X, int64_t K, int64_t T, void *dst,
                     kn_pool *pool, kn__act *x);
/* Several preparations as one pool job (rows of all of them split across the threads). */
typedef struct kn__prep {
    const kn__kernel *k;
    const float *X; /* T rows of K floats */
    int64_t K, T;
    void *dst;  /* kn__act_scratch(k, K, T) bytes */
    kn__act *x; /* set */
} kn__prep;
void kn__act_prepare_many(const kn__prep *preps, int n, kn_pool *pool);

/* GLU kernels: the scalar one (kn_glu.c) and each ISA's, all giving the same bits. */
void kn__glu_apply_ref(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n);
void kn__glu_apply_avx2(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n);
void kn__glu_apply_neon(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n);
/* Aborts with a message: a malformed kn_mat is a programming error at this level. */
void kn__check_mat(const kn_mat *W, const char *what);

#endif
