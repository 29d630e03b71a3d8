/* metal/mt_args.h — what the host and the Metal kernels (mt_kernels.metal) share: the argument
 * block every kernel takes, the block-format ids and the geometry of the kernels' threadgroups.
 * It is valid C11 and valid Metal Shading Language (plain int and float fields, so the layout is
 * the same on both sides), and it is prepended to the kernel source when a Darwin build embeds it.
 */
#ifndef MT_ARGS_H
#define MT_ARGS_H

/* Weight formats the kernels read in place (the layouts of kernels/, FORMATS.md). */
#define MT_FMT_MXFP4 0
#define MT_FMT_Q8_0  1
#define MT_FMT_Q4_K  2
#define MT_FMT_Q6_K  3

/* Every kernel runs threadgroups of MT_SG_PER_TG SIMD-groups of MT_SIMD lanes. */
#define MT_SIMD       32
#define MT_SG_PER_TG  4
#define MT_TG_THREADS (MT_SIMD * MT_SG_PER_TG)

/* Q8-mode dots keep MT_QLANES block lanes (block b in lane b % 8: docs/kernels.md). */
#define MT_QLANES 8
/* Matvec (mt_mv_*): a SIMD-group computes MT_MV_ROWS rows of one token, lane 8r + j holding the
 * canonical block lane j of row r. */
#define MT_MV_ROWS 4
/* Tiled (mt_mm_*): a threadgroup stages MT_MM_ROWS rows' next MT_QLANES blocks in threadgroup
 * memory and each SIMD-group applies them to MT_MM_TOKENS tokens of its own. */
#define MT_MM_ROWS   8
#define MT_MM_TOKENS 8
/* Float lanes (mt_f32_*): a SIMD-group computes one row against up to MT_F32_TOKENS tokens. */
#define MT_F32_TOKENS 8

#define MT_NO_INDEX (-1)

typedef struct mt_args {
    int rows;     /* outputs (rows of the weights) */
    int cols;     /* inputs (the reduction's length) */
    int tokens;   /* activation rows */
    int w_stride; /* bytes between rows of the weights */
    int x_stride; /* bytes between activation rows */
    int y_stride; /* bytes between output rows */
    int x_index;  /* first entry of the index buffer naming token t's input row, or MT_NO_INDEX */
    int y_index;  /* the same for output rows (or, for mt_combine, the CSR entries) */
    int has_bias; /* add bias[n] to output n */
    int count;    /* elements of an element-wise kernel */
    float alpha;  /* GLU parameters: swiglu_oai's */
    float limit;
    float beta; /* situ's */
    float lbeta;
} mt_args;

#endif
