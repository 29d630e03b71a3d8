// metal/emu/mt_emu_kernels.cc — mt_kernels.metal compiled as C++ through the emulator's shim
// (its `#include <metal_stdlib>` finds the one-line file the Makefile makes, which includes
// mt_emu.h with MT_EMU_KERNELS defined); every MT_KERNEL registers itself by name.
#include "metal/mt_kernels.metal"
