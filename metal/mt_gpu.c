/* metal/mt_gpu.c — which GPU backend this build has: Metal on Darwin (mt_metal.m), none
 * elsewhere. The one place the portable Metal code asks about the platform. */
#include "metal/mt_backend.h"

#include <stddef.h>

#ifdef __APPLE__
extern const mt_backend mt_backend_metal;
#endif

const mt_backend *mt_backend_gpu(void) {
#ifdef __APPLE__
    return &mt_backend_metal;
#else
    return NULL;
#endif
}
