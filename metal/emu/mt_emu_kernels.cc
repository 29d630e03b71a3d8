// metal/emu/mt_emu_kernels.cc — mt_kernels.metal compiled as C++ through the emulator's shim
// (include/metal_stdlib); every MT_KERNEL registers itself by name with the emulator.
#include "metal/mt_kernels.metal"
