// metal/emu/mt_emu.cc — the emulator's scheduler (threadgroups of 32-lane SIMD-groups, each lane
// a coroutine), its kernel registry, and mt_backend_emu: the backend the tests run the Metal path
// on (metal/mt_backend.h). One threadgroup runs at a time on the calling thread.
//
// On x86-64 the scheduler and the lanes switch stacks with a few instructions of our own (the
// callee-saved registers and the stack pointer): swapcontext makes a system call per switch, and
// longjmp under ASan clears the shadow of a whole stack per jump, which made every shuffle cost
// microseconds. Elsewhere ucontext does it, slower.
#include "metal/emu/mt_emu.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ucontext.h>

extern "C" {
#include "metal/mt_backend.h"
}

// ---- half --------------------------------------------------------------------------------------

half::half(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint32_t sign = (u >> 16) & 0x8000u, man = u & 0x7FFFFFu, ex = (u >> 23) & 0xFFu;
    const int e = (int)ex - 127 + 15;
    if (ex == 0xFF) {
        bits = (uint16_t)(sign | 0x7C00u | (man ? 0x200u | (man >> 13) : 0));
    } else if (e >= 0x1F) {
        bits = (uint16_t)(sign | 0x7C00u);
    } else if (e <= 0) {
        if (e < -10) {
            bits = (uint16_t)sign;
            return;
        }
        const uint32_t m = man | 0x800000u, shift = (uint32_t)(14 - e);
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), hv = 1u << (shift - 1);
        if (rem > hv || (rem == hv && (q & 1))) q++;
        bits = (uint16_t)(sign | q);
    } else {
        uint32_t q = ((uint32_t)e << 10) | (man >> 13);
        const uint32_t rem = man & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++;
        bits = (uint16_t)(sign | q);
    }
}

half::operator float() const {
    const uint32_t sign = (uint32_t)(bits & 0x8000u) << 16, e = (bits >> 10) & 0x1Fu,
                   m = bits & 0x3FFu;
    uint32_t u;
    if (e == 0x1F) {
        u = sign | 0x7F800000u | (m << 13);
    } else if (e) {
        u = sign | ((e + 112) << 23) | (m << 13);
    } else {
        const float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// ---- registry ----------------------------------------------------------------------------------

namespace {
struct entry {
    const char *name;
    mt_emu::kernel_fn fn;
};
entry registry[64];
int n_registered;
} // namespace

mt_emu::reg::reg(const char *name, kernel_fn fn) {
    if (n_registered == (int)(sizeof registry / sizeof registry[0])) {
        std::fprintf(stderr, "mt_emu: too many kernels (raise the registry's size)\n");
        std::abort();
    }
    registry[n_registered++] = {name, fn};
}

mt_emu::kernel_fn mt_emu::find_kernel(const char *name) {
    for (int i = 0; i < n_registered; i++)
        if (!std::strcmp(registry[i].name, name)) return registry[i].fn;
    return nullptr;
}

// ---- coroutine contexts -------------------------------------------------------------------------

namespace {

struct ctx {
    void *sp;      // x86-64: the stack pointer it was left at
    ucontext_t uc; // elsewhere
};

#if defined(__x86_64__)
extern "C" void mt_emu_switch(void **save_sp, void *sp);
asm(R"(
    .text
    .p2align 4
    .type mt_emu_switch, @function
mt_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size mt_emu_switch, .-mt_emu_switch
)");

// A stack whose first switch "returns" into entry as if it had been called: six zero registers,
// then entry's address, then a return address entry never uses.
void ctx_start(ctx *c, char *stack, size_t size, void (*entry)()) {
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;
    *--sp = (void *)entry;
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    c->sp = sp;
}

void ctx_switch(ctx *from, ctx *to) {
    mt_emu_switch(&from->sp, to->sp);
}
#else
__attribute__((noinline)) void ctx_start(ctx *c, char *stack, size_t size, void (*entry)()) {
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = nullptr;
    makecontext(&c->uc, entry, 0);
}

void ctx_switch(ctx *from, ctx *to) {
    swapcontext(&from->uc, &to->uc);
}
#endif

} // namespace

extern "C" int mt_emu_has_kernel(const char *name) {
    return mt_emu::find_kernel(name) != nullptr;
}

// ---- the scheduler -----------------------------------------------------------------------------

namespace {

enum lane_state { RUNNABLE, AT_SIMD, AT_SIMD_BARRIER, AT_BARRIER, DONE };

struct lane {
    ctx c;
    lane_state st;
    const void *in;
    void *out;
    int param;
    mt_emu::simd_fn fn;
    long ops; // SIMD-group operations so far: all lanes of a SIMD-group must agree
};

const size_t STACK = 256 * 1024;

struct group {
    const char *kernel;
    mt_emu::kernel_fn fn;
    const mt_args *args;
    const uchar *w, *x;
    uchar *y;
    const int *ix;
    const float *bias;
    uchar *tg;
    uint3 tgp;
    lane lanes[MT_TG_THREADS];
    ctx sched;
    char *stacks;
    int cur;
};

group *g_run;

[[noreturn]] void emu_fail(const group *g, const char *what) {
    std::fprintf(stderr, "mt_emu: %s: threadgroup (%u, %u): %s\n", g->kernel, g->tgp.x, g->tgp.y,
                 what);
    std::abort();
}

// Switches from the running lane back to the scheduler; returns when the lane runs again.
void yield() {
    group *g = g_run;
    lane &l = g->lanes[g->cur];
    ctx_switch(&l.c, &g->sched);
}

void lane_main() {
    group *g = g_run;
    const int i = g->cur;
    g->fn(*g->args, g->w, g->x, g->y, g->ix, g->bias, g->tg, g->tgp, (ushort)(i / MT_SIMD),
          (ushort)(i % MT_SIMD));
    g->lanes[i].st = DONE;
    ctx_switch(&g->lanes[i].c, &g->sched); // never resumed: the stack serves the next threadgroup
}

void resume(group *g, int i) {
    g->cur = i;
    ctx_switch(&g->sched, &g->lanes[i].c);
}

// Resolves SIMD-group s if all its lanes wait on one operation; true when it did.
bool resolve_simd(group *g, int s) {
    lane *l = g->lanes + s * MT_SIMD;
    int n_op = 0, n_bar = 0;
    for (int i = 0; i < MT_SIMD; i++) {
        n_op += l[i].st == AT_SIMD;
        n_bar += l[i].st == AT_SIMD_BARRIER;
    }
    if (n_op == 0 && n_bar == 0) return false;
    if (n_op != MT_SIMD && n_bar != MT_SIMD) {
        char msg[160];
        std::snprintf(msg, sizeof msg,
                      "SIMD-group %d: a SIMD-group operation reached by %d of its 32 lanes "
                      "(undefined in Metal)",
                      s, n_op + n_bar);
        emu_fail(g, msg);
    }
    if (n_op == MT_SIMD) {
        const void *in[MT_SIMD];
        void *out[MT_SIMD];
        int param[MT_SIMD];
        for (int i = 0; i < MT_SIMD; i++) {
            if (l[i].fn != l[0].fn || l[i].ops != l[0].ops)
                emu_fail(g, "lanes of one SIMD-group are in different SIMD-group operations");
            in[i] = l[i].in;
            out[i] = l[i].out;
            param[i] = l[i].param;
        }
        l[0].fn(in, param, out);
    }
    for (int i = 0; i < MT_SIMD; i++) l[i].st = RUNNABLE;
    return true;
}

// Lane i, ready to start the kernel on its own stack.
void start_lane(group *g, int i) {
    lane &l = g->lanes[i];
    ctx_start(&l.c, g->stacks + (size_t)i * STACK, STACK, lane_main);
    l.st = RUNNABLE;
    l.ops = 0;
}

// Runs one threadgroup to completion.
void run_group(group *g) {
    for (int i = 0; i < MT_TG_THREADS; i++) start_lane(g, i);
    for (;;) {
        for (int i = 0; i < MT_TG_THREADS; i++)
            if (g->lanes[i].st == RUNNABLE) resume(g, i);
        bool progress = false;
        for (int s = 0; s < MT_SG_PER_TG; s++) progress = resolve_simd(g, s) || progress;
        if (progress) continue;
        int n_bar = 0, n_done = 0;
        for (int i = 0; i < MT_TG_THREADS; i++) {
            n_bar += g->lanes[i].st == AT_BARRIER;
            n_done += g->lanes[i].st == DONE;
        }
        if (n_done == MT_TG_THREADS) return;
        if (n_bar + n_done != MT_TG_THREADS) emu_fail(g, "deadlock");
        if (n_done) emu_fail(g, "a threadgroup barrier that some threads returned before");
        for (int i = 0; i < MT_TG_THREADS; i++) g->lanes[i].st = RUNNABLE;
    }
}

} // namespace

void mt_emu::simd_exchange(const void *in, void *out, int param, simd_fn fn) {
    lane &l = g_run->lanes[g_run->cur];
    l.in = in;
    l.out = out;
    l.param = param;
    l.fn = fn;
    l.ops++;
    l.st = AT_SIMD;
    yield();
}

void mt_emu::threadgroup_wait(void) {
    g_run->lanes[g_run->cur].st = AT_BARRIER;
    yield();
}

void mt_emu::simdgroup_wait(void) {
    lane &l = g_run->lanes[g_run->cur];
    l.fn = nullptr;
    l.ops++;
    l.st = AT_SIMD_BARRIER;
    yield();
}

// ---- the emulator backend ----------------------------------------------------------------------

namespace {

struct emu {
    mt_region *regions;
    int n_regions;
    uchar *scratch;
    size_t scratch_len;
    group *g;
};

int emu_open(void **impl, mt_backend_info *info, mw_err *err) {
    emu *e = (emu *)std::calloc(1, sizeof(emu));
    group *g = e ? (group *)std::calloc(1, sizeof(group)) : nullptr;
    char *stacks = g ? (char *)std::malloc(STACK * MT_TG_THREADS) : nullptr;
    if (!stacks) {
        std::free(g);
        std::free(e);
        return mw_errf(err, "emulator: out of memory");
    }
    g->stacks = stacks;
    e->g = g;
    std::snprintf(info->device, sizeof info->device, "emulator (32-lane SIMD-groups on the CPU)");
    info->max_buffer = (size_t)1 << 40;
    *impl = e;
    return 0;
}

int emu_wrap(void *impl, const mt_region *r, int n, mw_err *err) {
    emu *e = (emu *)impl;
    mt_region *copy = n ? (mt_region *)std::malloc((size_t)n * sizeof *r) : nullptr;
    if (n && !copy) return mw_errf(err, "emulator: out of memory");
    if (n) std::memcpy(copy, r, (size_t)n * sizeof *r);
    std::free(e->regions);
    e->regions = copy;
    e->n_regions = n;
    return 0;
}

// A buffer of exactly the size asked for (so ASan sees a kernel read past it), filled with
// garbage (so a read of something no kernel wrote shows in the results).
void *emu_scratch(void *impl, size_t bytes, mw_err *err) {
    emu *e = (emu *)impl;
    if (bytes != e->scratch_len || !e->scratch) {
        std::free(e->scratch);
        e->scratch = (uchar *)std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        e->scratch_len = e->scratch ? bytes : 0;
        if (!e->scratch) {
            mw_errf(err, "emulator: out of memory for %zu bytes of scratch", bytes);
            return nullptr;
        }
    }
    std::memset(e->scratch, 0xCD, bytes);
    return e->scratch;
}

const uchar *emu_binding(const emu *e, const mt_dispatch *d, int b, bool *ok) {
    const mt_bind &bd = d->bind[b];
    if (bd.buf == MT_BUF_NONE) return nullptr;
    if (bd.buf == MT_BUF_SCRATCH) {
        *ok = *ok && bd.off <= e->scratch_len;
        return e->scratch + bd.off;
    }
    if (bd.buf < 0 || bd.buf >= e->n_regions || bd.off > e->regions[bd.buf].len) {
        *ok = false;
        return nullptr;
    }
    return (const uchar *)e->regions[bd.buf].base + bd.off;
}

int emu_run(void *impl, const mt_dispatch *d, int n, uint64_t *ns, mw_err *err) {
    emu *e = (emu *)impl;
    group *g = e->g;
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < n; k++) {
        bool ok = true;
        g->kernel = d[k].kernel;
        g->fn = mt_emu::find_kernel(d[k].kernel);
        g->args = &d[k].args;
        g->w = emu_binding(e, &d[k], MT_B_W, &ok);
        g->x = emu_binding(e, &d[k], MT_B_X, &ok);
        g->y = (uchar *)emu_binding(e, &d[k], MT_B_Y, &ok);
        g->ix = (const int *)emu_binding(e, &d[k], MT_B_IX, &ok);
        g->bias = (const float *)emu_binding(e, &d[k], MT_B_BIAS, &ok);
        if (!g->fn) return mw_errf(err, "emulator: no kernel named %s", d[k].kernel);
        if (!ok) return mw_errf(err, "emulator: %s: a binding outside its buffer", d[k].kernel);
        const size_t tg_len = d[k].tg_bytes ? d[k].tg_bytes : 16;
        g->tg = (uchar *)std::malloc(tg_len);
        if (!g->tg) return mw_errf(err, "emulator: out of memory");
        g_run = g;
        for (uint32_t gy = 0; gy < d[k].grid[1]; gy++) {
            for (uint32_t gx = 0; gx < d[k].grid[0]; gx++) {
                std::memset(g->tg, 0xA5, tg_len); // threadgroup memory starts undefined
                g->tgp = uint3(gx, gy, 0);
                run_group(g);
            }
        }
        g_run = nullptr;
        std::free(g->tg);
        g->tg = nullptr;
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (ns) *ns = (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    return 0;
}

void emu_close(void *impl) {
    emu *e = (emu *)impl;
    if (!e) return;
    std::free(e->regions);
    std::free(e->scratch);
    std::free(e->g->stacks);
    std::free(e->g);
    std::free(e);
}

} // namespace

extern "C" const mt_backend mt_backend_emu = {"emulator", emu_open,  emu_wrap,
                                              emu_scratch, emu_run,  emu_close};
