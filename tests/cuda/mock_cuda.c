/*
 * mock_cuda.c — a stand-in for libcuda.so.1 and libnvrtc.so, built by the
 * test suite into a shared object that CINFER_CUDA_DRIVER and CINFER_NVRTC
 * point at (tests/test_cuda.c, "cuda_mock/").  It lets the host side of
 * --device cuda run end to end on a machine without a GPU: dlopen and symbol
 * resolution, device discovery, NVRTC options and headers, the cubin cache,
 * weight upload, context carving, per-batch launches, graph capture and
 * replay, logits read-back.  It computes nothing: device memory is host
 * memory (malloc), kernels are recorded, not run, so logits stay zero.
 *
 * Every launch is checked the way a real driver would fail it, and more:
 * the function must come from cuModuleGetFunction on a loaded module, grid
 * and block within CUDA's limits, the single parameter a pointer to a live
 * allocation holding a cf_cuda_env whose step fields are in range.  A
 * violation is counted (mock_stats.bad) with its reason (mock_stats.why).
 *
 * The NVRTC half may be the real one instead (CINFER_NVRTC at libnvrtc): a
 * real cubin is an ELF file, and then cuModuleGetFunction accepts only the
 * kernels its symbol table defines.
 *
 * Execute mode (CINFER_MOCK_EXEC=DIR): the NVRTC half compiles the source
 * with the host C++ compiler instead (g++, tests/cuda/emu.h force-included:
 * CUDA's built-ins on the CPU) into a shared object in DIR, the "cubin" names that file,
 * and launches run the kernels: every thread of a block a coroutine
 * (ucontext), switched at __syncthreads and warp shuffles, blocks one after
 * another.  Device memory being host memory, the logits are the kernels' own
 * and the test compares them with the CPU path's.
 *
 * Exported for the test: mock_stats (counters), mock_reset.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "prelude_cuda.h"

typedef struct {
    int inits, compiles, module_loads, launches, graph_captures, graph_launches, graph_nodes;
    int kernels_resolved, htod, dtoh, bad;
    long long weight_bytes_copied; /* host-to-device bytes in total */
    char arch_option[64];          /* the --gpu-architecture option NVRTC got */
    int headers_seen;              /* headers passed to nvrtcCreateProgram */
    int header_cf_cuda;            /* one of them was cf_cuda.cuh with content */
    char first_kernel[64];         /* the first kernel launched */
    char why[256];                 /* the first violation */
    long long live_bytes;          /* allocated and not freed */
    int elf_kernels;               /* a real cubin was loaded: its kernel count */
} mock_stats_t;

mock_stats_t mock_stats;

void mock_reset(void) { memset(&mock_stats, 0, sizeof mock_stats); }

static void bad(const char *fmt, const char *a) {
    if (!mock_stats.bad++) snprintf(mock_stats.why, sizeof mock_stats.why, fmt, a);
}

/* ---- execute mode: coroutines for the threads of a block ---- */
#include <ucontext.h>

#ifndef MOCK_EMU_H
#define MOCK_EMU_H "tests/cuda/emu.h"
#endif

typedef struct {
    unsigned x, y, z;
} emu_dim3;
typedef struct {
    const emu_dim3 *tid, *bid, *bdim, *gdim;
    void (*sync)(void);
    float (*shfl)(float v, int lane, int is_xor);
    void (*mma)(float *c, const unsigned *a, const unsigned *b, int bf16);
} emu_rt;

enum { F_RUN, F_BAR, F_WARP, F_DONE };
enum { MAX_THREADS = 1024, STACK_BYTES = 128 * 1024 };

/* Switching coroutines: on x86-64 a few instructions (callee-saved registers
 * and the stack pointer), since a kernel launch switches millions of times;
 * elsewhere swapcontext (a system call per switch: slower, same behaviour). */
#if defined(__x86_64__)
#define FAST_SWITCH 1
__asm__(".text\n"
        ".type emu_switch, @function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, .-emu_switch\n");
void emu_switch(void **save_sp, void *load_sp); /* save this stack, continue on that one */
typedef struct {
    void *sp;
    int state;
} fiber;
static void *sched_sp;
#else
#define FAST_SWITCH 0
typedef struct {
    ucontext_t ctx;
    int state;
} fiber;
static ucontext_t sched_ctx;
#endif
static fiber fibers[MAX_THREADS];
static char *stacks;
static int cur, n_block_threads;
static emu_dim3 e_tid, e_bid, e_bdim, e_gdim;
typedef void (*kernel_fn)(const void *E, cf_cuda_args a);
static kernel_fn k_fn;
static const void *k_env;
static cf_cuda_args k_args;
static float xchg[MAX_THREADS];
static unsigned mma_a[MAX_THREADS][4], mma_b[MAX_THREADS][2];
static float mma_c[MAX_THREADS][4];

static void bad(const char *fmt, const char *a);

static void yield_as(int st) {
    fibers[cur].state = st;
#if FAST_SWITCH
    emu_switch(&fibers[cur].sp, sched_sp);
#else
    swapcontext(&fibers[cur].ctx, &sched_ctx);
#endif
}

static void emu_sync(void) { yield_as(F_BAR); }

static float emu_shfl(float v, int lane_arg, int is_xor) {
    const int me = cur, lane = me % 32, base = me - lane;
    xchg[me] = v;
    yield_as(F_WARP);
    const int src = is_xor ? (lane ^ lane_arg) : lane_arg;
    float r = 0.0f;
    if (src < 0 || src > 31 || base + src >= n_block_threads || fibers[base + src].state == F_DONE)
        bad("a shuffle reads lane %s, which does not take part", "(outside the warp or exited)");
    else r = xchg[base + src];
    yield_as(F_WARP); /* every lane has read before any writes again */
    return r;
}

static float h2f(unsigned short h, int bf16) {
    unsigned u;
    float f;
    if (bf16) u = (unsigned)h << 16;
    else {
        unsigned sign = (unsigned)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
        if (ex == 0) {
            f = (float)man * 5.9604644775390625e-08f;
            memcpy(&u, &f, 4);
            u |= sign;
        } else if (ex == 31) u = sign | 0x7f800000u | (man << 13);
        else u = sign | ((ex + 112u) << 23) | (man << 13);
    }
    memcpy(&f, &u, 4);
    return f;
}

/* mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: lane l = 4g + q holds
 * A (16x16, row-major) elements (g, 2q..2q+1) in a0, (g+8, 2q..) in a1,
 * (g, 2q+8..) in a2, (g+8, 2q+8..) in a3; B (16x8, k by n) elements
 * (k 2q..2q+1, n g) in b0, (k 2q+8.., n g) in b1; C/D (16x8) (g, 2q..2q+1)
 * in c0 c1, (g+8, 2q..) in c2 c3 (PTX ISA, "Matrix Fragments for
 * mma.m16n8k16 with floating point type"). */
static void emu_mma(float *c, const unsigned *a, const unsigned *b, int bf16) {
    const int me = cur, lane = me % 32, base = me - lane;
    memcpy(mma_a[me], a, sizeof mma_a[me]);
    memcpy(mma_b[me], b, sizeof mma_b[me]);
    memcpy(mma_c[me], c, sizeof mma_c[me]);
    yield_as(F_WARP);
    const int g = lane / 4, q = lane % 4;
    for (int e = 0; e < 4; e++) {
        const int row = g + 8 * (e / 2), col = 2 * q + e % 2;
        double acc = mma_c[me][e];
        float sum = 0.0f;
        for (int kk = 0; kk < 16; kk++) {
            /* A(row, kk): lane 4 * (row % 8) + (kk % 8) / 2, register (row >= 8) + 2 * (kk >= 8), half kk % 2 */
            const int al = 4 * (row % 8) + (kk % 8) / 2, ar = (row >= 8) + 2 * (kk >= 8);
            const unsigned short ah = (unsigned short)(mma_a[base + al][ar] >> (16 * (kk % 2)));
            /* B(kk, col): lane 4 * col + (kk % 8) / 2, register kk >= 8, half kk % 2 */
            const int bl = 4 * col + (kk % 8) / 2, br = kk >= 8;
            const unsigned short bh = (unsigned short)(mma_b[base + bl][br] >> (16 * (kk % 2)));
            sum += h2f(ah, bf16) * h2f(bh, bf16);
        }
        c[e] = (float)(acc + sum);
    }
    yield_as(F_WARP);
}

static const emu_rt rt = {&e_tid, &e_bid, &e_bdim, &e_gdim, emu_sync, emu_shfl, emu_mma};

static void fiber_main(void) {
    k_fn(k_env, k_args);
    fibers[cur].state = F_DONE;
#if FAST_SWITCH
    void *dead;
    emu_switch(&dead, sched_sp); /* never resumed */
#endif
}

/* Thread i of the next block starts at fiber_main on its own stack. */
static void fiber_init(int i) {
    char *top = stacks + (size_t)(i + 1) * STACK_BYTES;
#if FAST_SWITCH
    void **sp = (void **)(top - 64); /* 16-aligned: after 6 pops and ret, rsp is 8 mod 16 as after a call */
    for (int k = 0; k < 6; k++) sp[k] = 0;
    sp[6] = (void *)fiber_main;
    sp[7] = 0;
    fibers[i].sp = sp;
#else
    getcontext(&fibers[i].ctx);
    fibers[i].ctx.uc_stack.ss_sp = top - STACK_BYTES;
    fibers[i].ctx.uc_stack.ss_size = STACK_BYTES;
    fibers[i].ctx.uc_link = &sched_ctx;
    makecontext(&fibers[i].ctx, fiber_main, 0);
#endif
    fibers[i].state = F_RUN;
}

static void fiber_run(int i) {
    cur = i;
    e_tid = (emu_dim3){(unsigned)i, 0, 0};
#if FAST_SWITCH
    emu_switch(&sched_sp, fibers[i].sp);
#else
    swapcontext(&sched_ctx, &fibers[i].ctx);
#endif
}

/* Run one kernel over its grid, block after block. */
static void exec_kernel(kernel_fn fn, const char *name, unsigned gx, unsigned gy, unsigned bx, const void *env,
                        const cf_cuda_args *args) {
    if (!stacks && !(stacks = malloc((size_t)MAX_THREADS * STACK_BYTES))) {
        bad("no memory for %s", "the coroutine stacks");
        return;
    }
    k_fn = fn;
    k_env = env;
    k_args = *args;
    n_block_threads = (int)bx;
    e_bdim = (emu_dim3){bx, 1, 1};
    e_gdim = (emu_dim3){gx, gy, 1};
    for (unsigned by = 0; by < gy; by++)
        for (unsigned b = 0; b < gx; b++) {
            e_bid = (emu_dim3){b, by, 0};
            for (int i = 0; i < n_block_threads; i++) fiber_init(i);
            for (;;) {
                int ran = 0, live = 0, at_bar = 0;
                for (int i = 0; i < n_block_threads; i++)
                    if (fibers[i].state == F_RUN) {
                        fiber_run(i);
                        ran = 1;
                    }
                for (int i = 0; i < n_block_threads; i++) {
                    live += fibers[i].state != F_DONE;
                    at_bar += fibers[i].state == F_BAR;
                }
                if (!live) break;
                int released = 0;
                if (at_bar && at_bar == live) {
                    for (int i = 0; i < n_block_threads; i++)
                        if (fibers[i].state == F_BAR) fibers[i].state = F_RUN;
                    released = 1;
                } else {
                    for (int w = 0; w * 32 < n_block_threads; w++) {
                        int lw = 0, ww = 0;
                        for (int i = 32 * w; i < 32 * w + 32 && i < n_block_threads; i++) {
                            lw += fibers[i].state != F_DONE;
                            ww += fibers[i].state == F_WARP;
                        }
                        if (ww && ww == lw) {
                            for (int i = 32 * w; i < 32 * w + 32 && i < n_block_threads; i++)
                                if (fibers[i].state == F_WARP) fibers[i].state = F_RUN;
                            released = 1;
                        }
                    }
                }
                if (!released && !ran) {
                    bad("deadlock in kernel %s: threads wait at barriers that others never reach", name);
                    return;
                }
            }
        }
}

typedef struct {
    kernel_fn fn;
    const char *name;
    unsigned gx, gy, bx;
    const void *env;
    cf_cuda_args args;
} recorded;
static recorded graph_rec[4096];
static int n_graph_rec;

static const char *exec_dir(void) {
    const char *d = getenv("CINFER_MOCK_EXEC");
    return d && *d ? d : NULL;
}

/* ---- allocations: a small table so launches can be checked ---- */
typedef struct {
    char *p;
    size_t n;
} alloc;
static alloc allocs[256];

static int live(uintptr_t p, size_t n) {
    for (int i = 0; i < 256; i++)
        if (allocs[i].p && p >= (uintptr_t)allocs[i].p && p + n <= (uintptr_t)allocs[i].p + allocs[i].n) return 1;
    return 0;
}

int cuInit(unsigned int f) { (void)f; mock_stats.inits++; return 0; }
int cuDriverGetVersion(int *v) { *v = 12040; return 0; }
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int o) { *d = o; return o == 0 ? 0 : 101; }
int cuDeviceGetName(char *name, int len, int d) { (void)d; snprintf(name, (size_t)len, "Mock GPU"); return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) {
    (void)d;
    *v = a == 75 ? 8 : a == 76 ? 0 : a == 16 ? 16 : 0;
    return 0;
}
int cuDeviceTotalMem_v2(size_t *b, int d) { (void)d; *b = (size_t)8 << 30; return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = (void *)0x1; return 0; }
int cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }
int cuCtxSetCurrent(void *c) { return c ? 0 : 201; }
int cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = (size_t)8 << 30; return 0; }
int cuMemAlloc_v2(unsigned long long *p, size_t n) {
    for (int i = 0; i < 256; i++)
        if (!allocs[i].p) {
            allocs[i].p = calloc(1, n ? n : 1);
            allocs[i].n = n;
            if (!allocs[i].p) return 2;
            mock_stats.live_bytes += (long long)n;
            *p = (unsigned long long)(uintptr_t)allocs[i].p;
            return 0;
        }
    return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}
int cuMemFree_v2(unsigned long long p) {
    for (int i = 0; i < 256; i++)
        if ((uintptr_t)allocs[i].p == p) {
            mock_stats.live_bytes -= (long long)allocs[i].n;
            free(allocs[i].p);
            allocs[i].p = NULL;
            return 0;
        }
    bad("cuMemFree of %s", "an address never allocated");
    return 1;
}
int cuMemAllocHost_v2(void **p, size_t n) { *p = calloc(1, n); return *p ? 0 : 2; }
int cuMemFreeHost(void *p) { free(p); return 0; }
int cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) {
    if (!live(d, n)) bad("cuMemcpyHtoD %s", "outside an allocation");
    else memcpy((void *)(uintptr_t)d, s, n);
    mock_stats.htod++;
    mock_stats.weight_bytes_copied += (long long)n;
    return 0;
}
int cuMemcpyDtoH_v2(void *d, unsigned long long s, size_t n) {
    if (!live(s, n)) bad("cuMemcpyDtoH %s", "outside an allocation");
    else memcpy(d, (void *)(uintptr_t)s, n);
    mock_stats.dtoh++;
    return 0;
}
int cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *st) {
    (void)st;
    return cuMemcpyHtoD_v2(d, s, n);
}
int cuMemcpyDtoHAsync_v2(void *d, unsigned long long s, size_t n, void *st) {
    (void)st;
    return cuMemcpyDtoH_v2(d, s, n);
}
int cuMemsetD8_v2(unsigned long long d, unsigned char v, size_t n) {
    if (!live(d, n)) bad("cuMemsetD8 %s", "outside an allocation");
    else memset((void *)(uintptr_t)d, v, n);
    return 0;
}
static int stream_made, capturing;
int cuStreamCreate(void **s, unsigned int f) { (void)f; *s = &stream_made; return 0; }
int cuStreamDestroy_v2(void *s) { (void)s; return 0; }
int cuStreamSynchronize(void *s) { (void)s; return 0; }

typedef void (*kernel_fn_t)(const void *E, cf_cuda_args a);
typedef struct {
    char name[64];
    kernel_fn_t fn; /* execute mode */
} mock_fn;
static mock_fn fns[8192];
static int n_fns;
static int module_loaded;
static char elf_names[512][64]; /* the functions a real cubin defines */
static int n_elf;

/* The STT_FUNC symbols of an ELF64 cubin into elf_names; -1 when it is not one. */
static int elf_functions(const unsigned char *img) {
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64) return -1;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    n_elf = 0;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB) continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
        const char *str = (const char *)(img + sh[sh[i].sh_link].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym && n_elf < 512; k++)
            if (ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC && !strncmp(str + sym[k].st_name, "cf_", 3))
                snprintf(elf_names[n_elf++], sizeof elf_names[0], "%s", str + sym[k].st_name);
    }
    return 0;
}

static void *exec_lib;

int cuModuleLoadData(void **m, const void *image) {
    n_elf = -1;
    if (exec_lib) dlclose(exec_lib); /* a module loaded without unloading the last: the new one only */
    exec_lib = NULL;
    if (!memcmp(image, "MOCKEXEC:", 9)) { /* execute mode: the host-compiled module */
        exec_lib = dlopen((const char *)image + 9, RTLD_NOW | RTLD_LOCAL);
        void (*bind)(const emu_rt *) = exec_lib ? (void (*)(const emu_rt *))dlsym(exec_lib, "emu_bind") : NULL;
        if (!bind) return 218;
        bind(&rt);
    } else if (memcmp(image, "MOCKCUBIN", 9)) {
        if (elf_functions(image)) return 218; /* CUDA_ERROR_INVALID_PTX */
        mock_stats.elf_kernels = n_elf;
    }
    module_loaded = 1;
    mock_stats.module_loads++;
    *m = &module_loaded;
    return 0;
}
int cuModuleUnload(void *m) {
    (void)m;
    module_loaded = 0;
    if (exec_lib) dlclose(exec_lib); /* execute mode: its kernels go with the module */
    exec_lib = NULL;
    return 0;
}
int cuModuleGetFunction(void **f, void *m, const char *name) {
    (void)m;
    if (!module_loaded || n_fns == 8192 || strncmp(name, "cf_", 3)) return 500; /* CUDA_ERROR_NOT_FOUND */
    if (n_elf >= 0) { /* a real cubin: only what it defines */
        int found = 0;
        for (int i = 0; i < n_elf && !found; i++) found = !strcmp(elf_names[i], name);
        if (!found) return 500;
    }
    snprintf(fns[n_fns].name, sizeof fns[n_fns].name, "%s", name);
    fns[n_fns].fn = exec_lib ? (kernel_fn)dlsym(exec_lib, name) : NULL;
    if (exec_lib && !fns[n_fns].fn) return 500;
    *f = &fns[n_fns++];
    mock_stats.kernels_resolved++;
    return 0;
}

static void check_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         void **params) {
    mock_fn *fn = f;
    if (!fn || fn < fns || fn >= fns + n_fns) {
        bad("launch of %s", "a function the module did not return");
        return;
    }
    if (!mock_stats.first_kernel[0]) snprintf(mock_stats.first_kernel, sizeof mock_stats.first_kernel, "%s", fn->name);
    if (!gx || !gy || !gz || gy > 65535 || gz > 65535 || !bx || by != 1 || bz != 1 || bx > 1024)
        bad("launch of %s: grid or block outside CUDA's limits", fn->name);
    if (!params || !params[0]) {
        bad("launch of %s without its parameter", fn->name);
        return;
    }
    unsigned long long env_addr = *(unsigned long long *)params[0];
    if (!live(env_addr, sizeof(cf_cuda_env))) {
        bad("launch of %s: the parameter is not a device cf_cuda_env", fn->name);
        return;
    }
    const cf_cuda_env *e = (const cf_cuda_env *)(uintptr_t)env_addr;
    if (e->n_tokens < 1 || e->pos < 0 || e->pos + e->n_tokens > e->n_ctx || e->att_splits < 1 ||
        !live((uintptr_t)e->tokens, (size_t)e->n_tokens * sizeof(int)) || !live((uintptr_t)e->arena, 4) ||
        !live((uintptr_t)e->W, sizeof(void *)) || !live((uintptr_t)e->logits, 4) ||
        !live((uintptr_t)e->kv_k, sizeof(void *)) || !live((uintptr_t)e->kv_k[0], 4) ||
        !live((uintptr_t)e->kv_v[0], 4) || !live((uintptr_t)e->W[0], 1))
        bad("launch of %s: the cf_cuda_env it reads is inconsistent", fn->name);
    if (!params[1]) {
        bad("launch of %s without its cf_cuda_args", fn->name);
        return;
    }
    const cf_cuda_args *a = params[1];
    const void *ptrs[6] = {a->out, a->in[0], a->in[1], a->in[2], a->w, a->w2};
    for (int i = 0; i < 6; i++)
        if (ptrs[i] && !live((uintptr_t)ptrs[i], 4)) bad("launch of %s: a cf_cuda_args pointer is not device memory", fn->name);
    if (a->layer < 0 || a->reserved) bad("launch of %s: cf_cuda_args layer/reserved", fn->name);
    /* kernels that write the arena get an out buffer, matmuls a weight */
    if ((!strncmp(fn->name, "cf_mv_", 6) || !strncmp(fn->name, "cf_mm_", 6)) && (!a->out || !a->in[0] || !a->w))
        bad("launch of %s: a matmul without its buffers", fn->name);
}

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned smem, void *s, void **params, void **extra) {
    (void)smem, (void)s, (void)extra;
    int before = mock_stats.bad;
    check_launch(f, gx, gy, gz, bx, by, bz, params);
    if (capturing) mock_stats.graph_nodes++;
    else mock_stats.launches++;
    mock_fn *fn = f;
    if (exec_dir() && mock_stats.bad == before && fn->fn) {
        const void *env = (const void *)(uintptr_t)*(unsigned long long *)params[0];
        const cf_cuda_args *a = params[1];
        if (capturing) {
            if (n_graph_rec == 4096) bad("graph of more than %s launches", "4096");
            else graph_rec[n_graph_rec++] = (recorded){fn->fn, fn->name, gx, gy, bx, env, *a};
        } else {
            exec_kernel(fn->fn, fn->name, gx, gy, bx, env, a);
        }
    }
    return 0;
}
static int graph_obj, exec_obj;
int cuStreamBeginCapture_v2(void *s, int mode) {
    (void)s;
    if (mode != 1) bad("stream capture mode %s", "not thread-local");
    capturing = 1;
    n_graph_rec = 0;
    return 0;
}
int cuStreamEndCapture(void *s, void **g) {
    (void)s;
    capturing = 0;
    mock_stats.graph_captures++;
    *g = &graph_obj;
    return 0;
}
int cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long flags) {
    (void)g, (void)flags;
    *e = &exec_obj;
    return 0;
}
int cuGraphLaunch(void *e, void *s) {
    (void)s;
    if (e != &exec_obj) bad("cuGraphLaunch of %s", "an unknown graph");
    mock_stats.graph_launches++;
    for (int i = 0; i < n_graph_rec && exec_dir(); i++)
        exec_kernel(graph_rec[i].fn, graph_rec[i].name, graph_rec[i].gx, graph_rec[i].gy, graph_rec[i].bx,
                    graph_rec[i].env, &graph_rec[i].args);
    return 0;
}
int cuGraphExecDestroy(void *e) { (void)e; return 0; }
int cuGraphDestroy(void *g) { (void)g; return 0; }
int cuGetErrorName(int rc, const char **s) { *s = rc == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_MOCK"; return 0; }
int cuGetErrorString(int rc, const char **s) { (void)rc; *s = "mock driver"; return 0; }

/* ---- NVRTC ---- */
typedef struct {
    int compiled;
    char so[1024]; /* execute mode: the host-compiled module */
} mock_prog;
static mock_prog prog_obj;
static char *prog_src;
static int prog_nh;
static char *prog_hdr[8], *prog_hname[8];

/* Execute mode: write the program and its headers into DIR and build a
 * shared object with the host C++ compiler; 0 on success. */
static int exec_compile(mock_prog *pr) {
    const char *dir = exec_dir();
    static int n;
    char path[1024], cmd[4096];
    for (int i = 0; i < prog_nh; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, prog_hname[i]);
        FILE *f = fopen(path, "w");
        if (!f) return -1;
        fputs(prog_hdr[i], f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/prog%d.cu", dir, n);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(prog_src, f);
    fclose(f);
    snprintf(pr->so, sizeof pr->so, "%s/prog%d.so", dir, n++);
    const char *cxx = getenv("CXX");
    snprintf(cmd, sizeof cmd, "%s -x c++ -std=c++17 -O0 -fPIC -shared -w -include %s -I%s -o %s %s 2>%s/build.log",
             cxx && *cxx ? cxx : "g++", MOCK_EMU_H, dir, pr->so, path, dir);
    return system(cmd) == 0 ? 0 : -1;
}

int nvrtcVersion(int *ma, int *mi) { *ma = 12; *mi = 4; return 0; }
int nvrtcGetNumSupportedArchs(int *n) { *n = 4; return 0; }
int nvrtcGetSupportedArchs(int *a) { a[0] = 75; a[1] = 80; a[2] = 86; a[3] = 90; return 0; }
int nvrtcCreateProgram(void **p, const char *src, const char *name, int nh, const char *const *h,
                       const char *const *names) {
    (void)name;
    if (!src || !strstr(src, "CF_KERNEL(cf_")) bad("nvrtcCreateProgram: %s", "the source has no kernels");
    mock_stats.headers_seen = nh;
    for (int i = 0; i < nh; i++)
        if (!strcmp(names[i], "cf_cuda.cuh") && h[i] && strstr(h[i], "cfk_mm")) mock_stats.header_cf_cuda = 1;
    prog_obj.compiled = 0;
    free(prog_src);
    prog_src = strdup(src ? src : "");
    for (int i = 0; i < prog_nh; i++) free(prog_hdr[i]), free(prog_hname[i]);
    prog_nh = nh < 8 ? nh : 8;
    for (int i = 0; i < prog_nh; i++) prog_hdr[i] = strdup(h[i]), prog_hname[i] = strdup(names[i]);
    *p = &prog_obj;
    return 0;
}
int nvrtcCompileProgram(void *p, int n, const char *const *opts) {
    mock_prog *pr = p;
    for (int i = 0; i < n; i++)
        if (!strncmp(opts[i], "--gpu-architecture=", 19))
            snprintf(mock_stats.arch_option, sizeof mock_stats.arch_option, "%s", opts[i]);
    pr->compiled = 1;
    mock_stats.compiles++;
    if (exec_dir() && exec_compile(pr)) return 6; /* NVRTC_ERROR_COMPILATION */
    return 0;
}
int nvrtcGetProgramLogSize(void *p, size_t *n) { (void)p; *n = 1; return 0; }
int nvrtcGetProgramLog(void *p, char *log) { (void)p; log[0] = 0; return 0; }
int nvrtcGetCUBINSize(void *p, size_t *n) {
    mock_prog *pr = p;
    *n = exec_dir() ? 9 + strlen(pr->so) + 1 : 16;
    return 0;
}
int nvrtcGetCUBIN(void *p, char *c) {
    mock_prog *pr = p;
    if (exec_dir()) sprintf(c, "MOCKEXEC:%s", pr->so);
    else memcpy(c, "MOCKCUBIN-sm_80\n", 16);
    return 0;
}
int nvrtcGetPTXSize(void *p, size_t *n) { (void)p; *n = 0; return 6; }
int nvrtcGetPTX(void *p, char *c) { (void)p, (void)c; return 6; }
int nvrtcDestroyProgram(void **p) { *p = NULL; return 0; }
const char *nvrtcGetErrorString(int rc) { return rc ? "NVRTC_ERROR_MOCK" : "NVRTC_SUCCESS"; }
