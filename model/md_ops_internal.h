/* model/md_ops_internal.h — the SIMD versions of md_vec (same bits as the scalar definition). */
#ifndef MD_OPS_INTERNAL_H
#define MD_OPS_INTERNAL_H

#include "model/md_ops.h"

#if defined(__x86_64__)
extern const md_vec md_vec_avx2;
extern const md_vec md_vec_avx512;
#endif
#if defined(__aarch64__)
extern const md_vec md_vec_neon;
#endif

#endif
