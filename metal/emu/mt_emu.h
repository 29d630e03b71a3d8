/* metal/emu/mt_emu.h — Metal's execution model in C++, so mt_kernels.metal compiles with g++ and
 * runs on the CPU (the `metal_stdlib` the Makefile makes for the emulator includes this file).
 *
 * What it emulates: threadgroups of SIMD-groups of 32 lanes, each lane a coroutine on its own
 * stack that runs the kernel function (mt_emu.cc switches them); threadgroup memory (a buffer per
 * threadgroup, filled with garbage first, so a read before the writes shows); threadgroup_barrier
 * (a lane yields until every lane of its threadgroup is there); simd_shuffle, simd_shuffle_xor,
 * _up, _down, simd_broadcast, simd_max, simd_min and integer simd_sum (a lane yields until all 32
 * lanes of its SIMD-group have called the same operation, then each gets its result). It is strict
 * where Metal is undefined: a SIMD-group operation that not all 32 lanes reach, or a barrier some
 * lanes skip, stops the run with a message. Address spaces are macros (device, threadgroup, thread:
 * nothing; constant: const), and the vector types, half and the math builtins the kernels use
 * are here. simd_sum of floats is refused at compile time: Metal does not define its order, and
 * the kernels must reduce floats in the canonical order.
 *
 * The kernels run one threadgroup at a time on the calling thread; registering them is what
 * MT_KERNEL does here (mt_emu.cc holds the scheduler, the registry and the emulator backend). */
#ifndef MT_EMU_H
#define MT_EMU_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

/* ---- vector types ------------------------------------------------------------------------- */

template <typename T> struct mt_vec2 {
    T x, y;
    mt_vec2() = default;
    explicit mt_vec2(T s) : x(s), y(s) {}
    mt_vec2(T a, T b) : x(a), y(b) {}
    T &operator[](int i) { return i ? y : x; }
    mt_vec2 operator+(mt_vec2 o) const { return mt_vec2(x + o.x, y + o.y); }
    mt_vec2 operator*(mt_vec2 o) const { return mt_vec2(x * o.x, y * o.y); }
    mt_vec2 &operator+=(mt_vec2 o) { return *this = *this + o; }
};
template <typename T> struct mt_vec3 {
    T x, y, z;
    mt_vec3() = default;
    explicit mt_vec3(T s) : x(s), y(s), z(s) {}
    mt_vec3(T a, T b, T c) : x(a), y(b), z(c) {}
};
template <typename T> struct mt_vec4 {
    T x, y, z, w;
    mt_vec4() = default;
    explicit mt_vec4(T s) : x(s), y(s), z(s), w(s) {}
    mt_vec4(T a, T b, T c, T d) : x(a), y(b), z(c), w(d) {}
    T &operator[](int i) { return i == 0 ? x : i == 1 ? y : i == 2 ? z : w; }
    mt_vec4 operator+(mt_vec4 o) const { return mt_vec4(x + o.x, y + o.y, z + o.z, w + o.w); }
    mt_vec4 operator*(mt_vec4 o) const { return mt_vec4(x * o.x, y * o.y, z * o.z, w * o.w); }
    mt_vec4 &operator+=(mt_vec4 o) { return *this = *this + o; }
};
typedef mt_vec2<float> float2;
typedef mt_vec4<float> float4;
typedef mt_vec2<int> int2;
typedef mt_vec4<int> int4;
typedef mt_vec3<uint> uint3;
typedef mt_vec4<uint> uint4;
typedef mt_vec4<uchar> uchar4;
typedef mt_vec4<signed char> char4;

/* IEEE binary16 with round-to-nearest-even conversions, as Metal's half converts. */
struct half {
    uint16_t bits;
    half() = default;
    half(float f);
    operator float() const;
};

namespace metal {

enum class mem_flags { mem_none, mem_device, mem_threadgroup, mem_texture };

template <typename T, typename U> inline T as_type(U v) {
    static_assert(sizeof(T) == sizeof(U), "as_type between types of different sizes");
    T t;
    std::memcpy(&t, &v, sizeof t);
    return t;
}

/* The math builtins are the C++ library's float overloads, brought in rather than wrapped: a
 * definition here named like C's libm function would be a namesake of the one the C code calls.
 * rint rounds in the default mode: to nearest, ties to even. */
using std::copysign;
using std::fabs;
using std::fma;
using std::rint;
template <typename T> inline T min(T a, T b) {
    return b < a ? b : a;
}
template <typename T> inline T max(T a, T b) {
    return a < b ? b : a;
}
template <typename T> inline T clamp(T v, T lo, T hi) {
    return min(max(v, lo), hi);
}

} // namespace metal

/* ---- the scheduler's side of a lane (mt_emu.cc) ------------------------------------------- */

namespace mt_emu {

/* Computes all 32 lanes' results of one SIMD-group operation: in[i] and param[i] are lane i's
 * operand and parameter, out[i] where its result goes. */
typedef void (*simd_fn)(const void *const in[32], const int param[32], void *const out[32]);

/* Called by a lane: waits until its whole SIMD-group has called the same operation. */
void simd_exchange(const void *in, void *out, int param, simd_fn fn);
void threadgroup_wait(void);
void simdgroup_wait(void);

enum op { SHUFFLE, SHUFFLE_XOR, SHUFFLE_UP, SHUFFLE_DOWN, MAX, MIN, SUM };

template <typename T, int OP>
void simd_op(const void *const in[32], const int param[32], void *const out[32]) {
    T v[32];
    for (int i = 0; i < 32; i++) std::memcpy(&v[i], in[i], sizeof(T));
    T all = v[0];
    for (int i = 1; i < 32; i++) {
        if constexpr (OP == MAX) all = all < v[i] ? v[i] : all;
        if constexpr (OP == MIN) all = v[i] < all ? v[i] : all;
        if constexpr (OP == SUM) all = all + v[i];
    }
    for (int i = 0; i < 32; i++) {
        T r = all;
        if constexpr (OP == SHUFFLE) r = v[param[i] & 31];
        if constexpr (OP == SHUFFLE_XOR) r = v[(i ^ param[i]) & 31];
        if constexpr (OP == SHUFFLE_UP) r = i >= param[i] ? v[i - param[i]] : v[i];
        if constexpr (OP == SHUFFLE_DOWN) r = i + param[i] < 32 ? v[i + param[i]] : v[i];
        std::memcpy(out[i], &r, sizeof(T));
    }
}

template <int OP, typename T> inline T simd_call(T v, int param) {
    T r;
    simd_exchange(&v, &r, param, &simd_op<T, OP>);
    return r;
}

} // namespace mt_emu

namespace metal {

template <typename T> inline T simd_shuffle(T v, ushort lane) {
    return mt_emu::simd_call<mt_emu::SHUFFLE>(v, lane);
}
template <typename T> inline T simd_broadcast(T v, ushort lane) {
    return mt_emu::simd_call<mt_emu::SHUFFLE>(v, lane);
}
template <typename T> inline T simd_shuffle_xor(T v, ushort mask) {
    return mt_emu::simd_call<mt_emu::SHUFFLE_XOR>(v, mask);
}
template <typename T> inline T simd_shuffle_up(T v, ushort delta) {
    return mt_emu::simd_call<mt_emu::SHUFFLE_UP>(v, delta);
}
template <typename T> inline T simd_shuffle_down(T v, ushort delta) {
    return mt_emu::simd_call<mt_emu::SHUFFLE_DOWN>(v, delta);
}
template <typename T> inline T simd_max(T v) {
    return mt_emu::simd_call<mt_emu::MAX>(v, 0);
}
template <typename T> inline T simd_min(T v) {
    return mt_emu::simd_call<mt_emu::MIN>(v, 0);
}
template <typename T> inline T simd_sum(T v) {
    static_assert(std::is_integral<T>::value,
                  "simd_sum of floats has no defined order: reduce in the canonical order");
    return mt_emu::simd_call<mt_emu::SUM>(v, 0);
}
inline void threadgroup_barrier(mem_flags) {
    mt_emu::threadgroup_wait();
}
inline void simdgroup_barrier(mem_flags) {
    mt_emu::simdgroup_wait();
}

} // namespace metal

/* ---- address spaces, attributes and kernel registration ---------------------------------- */

struct mt_args;
namespace mt_emu {
/* The uniform signature of every kernel (MT_PARAMS in mt_kernels.metal). */
typedef void (*kernel_fn)(const mt_args &p, const uchar *w, const uchar *x, uchar *y, const int *ix,
                          const float *bias, uchar *tg, uint3 tgp, ushort sg, ushort ln);
struct reg {
    reg(const char *name, kernel_fn fn);
};
kernel_fn find_kernel(const char *name);
} // namespace mt_emu

/* The kernels' translation unit (include/metal_stdlib) alone sees Metal's keywords as macros. */
#ifdef MT_EMU_KERNELS
#define device
#define threadgroup
#define MT_TG_ATTR /* [[threadgroup(0)]]: `threadgroup` is a macro here */
#define thread
#define constant const

#define MT_KERNEL(name)                                                                            \
    static void name(MT_PARAMS);                                                                   \
    static const mt_emu::reg name##_registered(#name, name);                                       \
    static void name
#endif

#endif
