/* kernels/kn_dispatch.c — which kernel computes a type: a planar type's wrapper (kn_mxfp4_ct.c)
 * in front, else the active ISA's table walk (kn_isa.c) or the scalar reference (kn_ref.c). The
 * wrappers pick their inner kernel from those two directly, so no table calls back up to here.
 */
#include "kernels/kn_internal.h"

const kn__kernel *kn__kernel_for(kn_type t, kn_numerics num) {
    const kn__kernel *planar = kn__kernel_planar(t, num, false);
    return planar ? planar : kn__kernel_isa(t, num);
}

const kn__kernel *kn__kernel_ref(kn_type t, kn_numerics num) {
    const kn__kernel *planar = kn__kernel_planar(t, num, true);
    return planar ? planar : kn__kernel_scalar(t, num);
}

/* A planar type is repacked through its wrapper's tiles, never by an ISA's packer. */
const kn__packer *kn__packer_for(kn_type t) {
    return kn__kernel_planar(t, KN_NUM_Q8, false) ? NULL : kn__packer_isa(t);
}
