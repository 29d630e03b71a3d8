/* kernels/kn.h — public API of the kernels: block formats, matmul, fused expert op, thread pool.
 *
 * This is the ground floor of moewire: it depends on nothing but libc and libm. Every other
 * subsystem reaches weights only through these types.
 *
 * Numerics contract (see docs/kernels.md):
 *  - KN_NUM_F32: float activations against dequantized weights, f32 accumulation (the reference).
 *  - KN_NUM_Q8: ggml-compatible 8-bit activations (the weight type's vec_dot_type, rounded exactly
 *    as ggml's AVX2 build does), exact integer inner sums per block.
 *  - Every dot product has ONE canonical reduction order, implemented identically by the scalar,
 *    AVX2 and NEON paths. A row's result is therefore bit-identical whatever T, the thread count or
 *    the instruction set (batch invariance; exact mode across heterogeneous nodes). */
#ifndef KN_H
#define KN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mw_err; /* util/mw_err.h */

/* ggml type ids: the numbers are GGUF's on-disk type ids. */
typedef enum kn_type {
    KN_F32 = 0,
    KN_F16 = 1,
    KN_Q4_0 = 2,
    KN_Q4_1 = 3,
    KN_Q5_0 = 6,
    KN_Q5_1 = 7,
    KN_Q8_0 = 8,
    KN_Q8_1 = 9,
    KN_Q2_K = 10,
    KN_Q3_K = 11,
    KN_Q4_K = 12,
    KN_Q5_K = 13,
    KN_Q6_K = 14,
    KN_Q8_K = 15,
    KN_IQ2_XXS = 16,
    KN_IQ2_XS = 17,
    KN_IQ3_XXS = 18,
    KN_IQ1_S = 19,
    KN_IQ4_NL = 20,
    KN_IQ3_S = 21,
    KN_IQ2_S = 22,
    KN_IQ4_XS = 23,
    KN_I8 = 24,
    KN_I16 = 25,
    KN_I32 = 26,
    KN_I64 = 27,
    KN_F64 = 28,
    KN_IQ1_M = 29,
    KN_BF16 = 30,
    KN_TQ1_0 = 34,
    KN_TQ2_0 = 35,
    KN_MXFP4 = 39,
    /* Ours, outside GGUF's ids (a GGUF file never holds it): MXFP4 in compressed-tensors' planar
     * layout, a matrix's packed codes then its scale bytes (kernels/kn_mxfp4_ct.c). */
    KN_MXFP4_CT = 64,
    KN_TYPE_COUNT = 65
} kn_type;

/* One row per block format (ggml's type-traits idea). Types that are only recognised (so a file
 * holding them can be reported by name and size) have can_compute == false and NULL functions. */
typedef struct kn_type_traits {
    const char *name;     /* ggml's name: "f32", "q6_K", "mxfp4", ... */
    int32_t blck_size;    /* elements per block */
    int32_t type_size;    /* bytes per block */
    bool can_compute;     /* dequantize / dot products implemented */
    kn_type vec_dot_type; /* activation format in KN_NUM_Q8 mode (F32 = none) */
    bool planar;          /* a matrix is one whole (codes plane, then scales plane), not rows of
                             blocks: row_bytes is the row's share, kn_row_size; no row views; not a
                             GGUF type */
    /* Dequantize k elements (k a multiple of blck_size). */
    void (*to_float)(const void *src, float *dst, int64_t k);
    /* Quantize k elements. For Q8_0 / Q8_K this is ggml's activation rounding (FORMATS.md §2); for
     * weight formats it is the quantizer `vindex synth` uses. NULL where not provided. */
    void (*from_float)(const float *src, void *dst, int64_t k);
} kn_type_traits;

/* NULL for an id that is not a known ggml type. */
const kn_type_traits *kn_traits(kn_type t);
/* Name for messages; "unknown" for unknown ids. */
const char *kn_type_name(kn_type t);
/* Looks a type up by its ggml name; returns -1 if none matches. */
int kn_type_from_name(const char *name);
/* Bytes of a row of k elements, or 0 if k is not a multiple of the block size or t is unknown. */
size_t kn_row_size(kn_type t, int64_t k);

/* Scalar conversions (exact, subnormals included). */
float kn_fp16_to_f32(uint16_t h);
uint16_t kn_f32_to_fp16(float f); /* round to nearest even */
float kn_bf16_to_f32(uint16_t b);
uint16_t kn_f32_to_bf16(float f); /* round to nearest even, NaN kept quiet */

/* ---- thread pool ----------------------------------------------------------------------------- */

/* A persistent pool: threads are created once and parked between calls. NULL = run inline. */
typedef struct kn_pool kn_pool;
typedef void (*kn_task_fn)(void *arg, int ith, int nth);

kn_pool *kn_pool_create(int n_threads); /* n_threads counts the caller; <= 1 gives a pool of one */
void kn_pool_destroy(kn_pool *pool);
int kn_pool_size(const kn_pool *pool); /* 1 for NULL */
/* Runs fn(arg, ith, nth) for ith = 0..nth-1 (ith 0 on the caller) and returns when all finished.
 * A pool runs one job at a time: callers sharing it are serialized. Calling into the same pool
 * from inside one of its tasks (kn_pool_run, kn_matmul, kn_expert_run) runs that call inline. */
void kn_pool_run(kn_pool *pool, kn_task_fn fn, void *arg);
/* Tells the pool's idle workers to sleep now instead of spinning for the next job: call it before
 * blocking on something else (a socket), so the spinning does not take a core another process
 * needs. The next job wakes them as usual. NULL parks every pool of the process. */
void kn_pool_park(kn_pool *pool);
/* Tells sleeping workers that a job follows shortly: they get up and spin for it (as after a
 * job), so waking them (tens of microseconds where a core has gone idle) overlaps the caller's
 * remaining work instead of delaying the job. NULL, a pool of one or one that does not poll
 * (kn_pool_set_poll 0): nothing to do; nor when no job between the last two kn_pool_park calls
 * used the workers (they were all too small to split: they would only spin). */
void kn_pool_wake(kn_pool *pool);
/* Binds each of the pool's threads to one CPU: the calling thread (it must be the one that runs
 * the pool's jobs) to allowed CPU number `first` (modulo their count), worker i to the next ones.
 * "Allowed" is the process's CPU set as first seen by any bind (sched_getaffinity), so binding the
 * caller never narrows what a later bind sees. Threads started afterwards by the calling thread
 * inherit its one CPU: start them first. Used where processes share a machine and would otherwise
 * be stacked on one core by the scheduler (a loopback cluster). Linux only: elsewhere a no-op
 * that returns 0 (util/mw_platform.h: macOS cannot bind threads to cores). */
int kn_pool_bind_cpus(kn_pool *pool, int first, struct mw_err *err);
/* How long idle threads (workers between jobs, the caller waiting for workers) poll before they
 * sleep; default 200 us or $MOEWIRE_POOL_SPIN_US. Polling saves a wake-up per job where the cores
 * are otherwise idle; where they are shared with other busy processes (loopback nodes) it takes
 * their time, and 0 (sleep at once) is better. */
void kn_pool_set_poll(kn_pool *pool, int64_t us);
/* Per-thread scratch in one buffer, where each of a job's nth threads writes n bytes of its own:
 * kn_slots_bytes(n, nth) bytes in all, thread i's at kn_slot(base, n, i), with a gap before,
 * between and after the slots. Threads rewriting their slots (a batch tile decoded again every
 * few rows) side by side with each other, or with data the other threads read, slow each other
 * down until two cores do no better than one; the gaps keep each thread's writes away from what
 * the others touch. */
size_t kn_slots_bytes(size_t n, int nth);
void *kn_slot(void *base, size_t n, int i);
/* CPUs this process may run on (its affinity mask as first seen; online CPUs where unknown). */
int kn_cpus_allowed(void);
/* The id of allowed CPU number `index` (modulo their count; index >= 0): the CPU that
 * kn_pool_bind_cpus(pool, index) gives the calling thread. */
int kn_cpu_at(int index);

/* ---- matrices and matmul --------------------------------------------------------------------- */

typedef enum kn_numerics { KN_NUM_F32 = 0, KN_NUM_Q8 = 1 } kn_numerics;
#define KN_NUM_COUNT 2

/* "f32" or "q8": the name options, the handshake and the reports use ("unknown" out of range). */
const char *kn_numerics_name(kn_numerics num);
/* The numerics called `name`, or -1. */
int kn_numerics_from_name(const char *name);

/* A row-major matrix of `rows` outputs by `cols` inputs in a block format (a GGUF weight with
 * ne = [cols, rows]). A vector (bias, norm weight) is a matrix with rows == 1. */
typedef struct kn_mat {
    kn_type type;
    int64_t rows;
    int64_t cols;
    size_t row_bytes; /* stride between rows, >= kn_row_size(type, cols) */
    const void *data;
    const void *packed; /* kn_pack's copy of this matrix, or NULL */
} kn_mat;

/* Bytes of a packed copy of W that the active kernels would read in Q8 numerics instead of W's
 * stored rows, or 0 when they have no such layout. Today, with AVX-512: Q8_0 (the batch tile's
 * layout of every row, 1.06-1.13x W's bytes with its f32 scales, read by batches and by one
 * token where rows have no tail group: kept beside W's stored rows); with AVX-512, AVX-VNNI and AVX2: MXFP4 (each full group's bytes in decode
 * order), and with AVX-VNNI and AVX2 Q4_K (each chunk of 8 super-blocks' scales, d and codes in
 * decode order): as large as W and read at every T (kn_pack_replaces; each ISA reads only its
 * own). */
size_t kn_pack_bytes(const kn_mat *W);
/* Whether the active kernels read W's packed copy at every batch size, so that W's stored bytes
 * are not read at all in Q8 numerics once it is made (other numerics and ISAs still read them). */
bool kn_pack_replaces(const kn_mat *W);
/* Writes W's packed copy to dst (64-byte aligned, kn_pack_bytes(W) bytes) and points W->packed at
 * it. Results are the same bits with or without it. A view of W with other data, rows or columns
 * (a copy of the struct changed afterwards) does not use it. */
void kn_pack(kn_mat *W, void *dst);

/* Y[t][n] = sum_k W[n][k] * X[t][k] for t < T, n < W->rows. X is T rows of W->cols floats,
 * Y is T rows of W->rows floats. Rows are split across the pool's threads. */
void kn_matmul(const kn_mat *W, const float *X, int64_t T, float *Y, kn_numerics num,
               kn_pool *pool);

/* Y[i] = W[i] · X for n matrices of the same width, as one pool job: X is prepared once per
 * activation format, and the rows of all n matrices are split across the threads together (one
 * round trip through the pool instead of n). Results are those of n kn_matmul calls, bit for bit.
 */
void kn_matmul_many(const kn_mat *const *W, float *const *Y, int n, const float *X, int64_t T,
                    kn_numerics num, kn_pool *pool);

/* KN_MXFP4_CT matrices: rows [r0, r0 + n) of W as block_mxfp4 rows into dst
 * (n × kn_row_size(KN_MXFP4, cols) bytes), and a block_mxfp4 matrix (rows × cols, dense rows)
 * written planar into dst (the same bytes in all); the same values either way. */
void kn_mxfp4_ct_rows_to_blocks(const kn_mat *W, int64_t r0, int64_t n, void *dst);
void kn_mxfp4_ct_from_blocks(const void *blocks, int64_t rows, int64_t cols, void *dst);

/* Dequantizes row r of W into dst (W->cols floats). */
void kn_mat_row(const kn_mat *W, int64_t r, float *dst);

/* Validates a matrix before use (kn_matmul aborts on a malformed one): type known and computable,
 * cols a multiple of the block size, row_bytes large enough, data present. `what` names it in the
 * message. Returns 0, or -1 with err set. */
int kn_mat_check(const kn_mat *W, const char *what, struct mw_err *err);

/* ---- experts --------------------------------------------------------------------------------- */

/* GLU policies as data: one row per kind in kernels/kn_glu.c, each naming the parameters it
 * takes. */
typedef enum kn_glu_kind {
    KN_GLU_SWIGLU = 0,     /* silu(g) * u */
    KN_GLU_SWIGLU_OAI = 1, /* gpt-oss: g = min(g, limit), u = clamp(u, -limit, limit),
                              out = g * sigmoid(alpha * g) * (u + 1) */
    KN_GLU_SITU = 2,       /* Kimi K3: beta * tanh(g / beta) * sigmoid(g) * U(u), where
                              U(u) = lbeta * tanh(u / lbeta) when lbeta > 0, else u */
    KN_GLU_COUNT
} kn_glu_kind;

typedef struct kn_glu {
    kn_glu_kind kind;
    float alpha; /* SWIGLU_OAI only */
    float limit; /* SWIGLU_OAI only (> 0) */
    float beta;  /* SITU only (> 0) */
    float lbeta; /* SITU only: the up branch's beta; <= 0 leaves the up branch linear */
} kn_glu;

/* Names as in configs and messages ("swiglu", "swiglu_oai", "situ"); -1 / "unknown" when none. */
const char *kn_glu_name(kn_glu_kind kind);
int kn_glu_from_name(const char *name);

/* A kind's parameters in its row's order (swiglu: none; swiglu_oai: alpha, limit; situ: beta,
 * linear_beta), as a handshake carries them: their count, the values into p. */
#define KN_GLU_MAX_PARAMS 2
int kn_glu_params(const kn_glu *glu, float p[KN_GLU_MAX_PARAMS]);
/* The policy of kind with the n parameters p in kn_glu_params' order: 0, or -1 with err when the
 * kind is unknown, n is not its count or a value is out of its range. */
int kn_glu_make(int kind, const float *p, int n, kn_glu *out, struct mw_err *err);
/* Whether a policy can run: a known kind, its parameters finite and in range. */
int kn_glu_check(const kn_glu *glu, struct mw_err *err);
/* The same policy: the same kind and the same bits in every parameter it takes. */
bool kn_glu_same(const kn_glu *a, const kn_glu *b);
/* "situ(beta=4, linear_beta=0)" into buf (for messages); returns buf. */
const char *kn_glu_format(const kn_glu *glu, char *buf, size_t cap);

/* out[i] = glu(g[i], u[i]) for i < n (out may alias g or u). */
void kn_glu_apply(const kn_glu *glu, const float *g, const float *u, float *out, int64_t n);

/* One expert as stored in a vindex extent: gate and up (ff × hidden), down (hidden × ff), and
 * optional biases (rows == 1; data == NULL when absent). */
typedef struct kn_expert {
    kn_mat gate, up, down;
    kn_mat gate_b, up_b, down_b;
} kn_expert;

/* The fused expert operation: for each of T input rows x (hidden floats),
 *   y = down · glu(gate·x + gate_b, up·x + up_b) + down_b.
 * X is T × hidden, Y is T × hidden. In KN_NUM_Q8 mode x is quantized once and shared by gate and
 * up, and the GLU output is quantized before down, as ggml does. Returns 0, or -1 with err set
 * when the shapes are inconsistent. Both the expert node and the in-process backend call this. */
int kn_expert_run(const kn_expert *e, const kn_glu *glu, const float *X, int64_t T, float *Y,
                  kn_numerics num, kn_pool *pool, struct mw_err *err);

/* Several experts, each over its own rows, as two pool jobs (gate and up of all of them, then
 * down of all of them) instead of two per expert; the rows of calls sharing an input (same X, T
 * and width) are prepared once. Results are those of one kn_expert_run per call, bit for bit. */
typedef struct kn_expert_call {
    const kn_expert *e;
    const float *X; /* T × hidden */
    int64_t T;
    float *Y; /* T × hidden */
} kn_expert_call;
int kn_experts_run(const kn_expert_call *calls, int n, const kn_glu *glu, kn_numerics num,
                   kn_pool *pool, struct mw_err *err);

/* Checks an expert's shapes and types (what kn_expert_run checks first): 0, or -1 with err. */
int kn_expert_check(const kn_expert *e, const kn_glu *glu, struct mw_err *err);

/* Bytes of stored weights (gate, up, down and biases, as stored) one execution of e reads. */
size_t kn_expert_weight_bytes(const kn_expert *e);

/* ---- instruction set selection --------------------------------------------------------------- */

/* AVX-VNNI and AVX-512 build on AVX2: they run its kernels for what they have none of. */
typedef enum kn_isa {
    KN_ISA_SCALAR = 0,
    KN_ISA_AVX2 = 1,
    KN_ISA_NEON = 2,
    KN_ISA_AVXVNNI = 3,
    KN_ISA_AVX512 = 4,
    KN_ISA_COUNT
} kn_isa;

/* The ISA in use: the best the CPU supports (AVX-512 and AVX-VNNI unless MOEWIRE_AVX512=0 /
 * MOEWIRE_VNNI=0), unless forced (or MOEWIRE_ISA=scalar|avx2|avxvnni|avx512|neon). */
kn_isa kn_isa_active(void);
/* Forces an ISA (for tests and benchmarks); returns -1 if the CPU or build lacks it. */
int kn_isa_force(kn_isa isa);
const char *kn_isa_name(kn_isa isa);
/* Whether the active ISA runs isa's code where it has none of its own (true for AVX2 while
 * AVX-512 is active): the test for a code path written for isa. */
bool kn_isa_uses(kn_isa isa);

#endif
