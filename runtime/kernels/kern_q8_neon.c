/*
 * kern_q8_neon.c — the aarch64 integer leaves of quantized activations on
 * any AArch64 CPU (kern_neon_int.h with NEON_DOTPROD 0), and the entries
 * the kernel tables name: each picks the dotprod build of the same leaf
 * (kern_q8_dotprod.c) when kern_cpu_dotprod() says the CPU has sdot — a
 * probe made once at start-up; the per-call test is one relaxed load.
 */
#define NEON_DOTPROD 0
#define NEON_SFX neon
#include "kern_neon_int.h"

#define NEON_DISPATCH(t)                                                                          \
    void kern_dotq_##t##_dotprod(const void *w, const void *a, size_t as, int nt, int n, float *s); \
    void kern_neon_dotq_##t(const void *w, const void *a, size_t as, int nt, int n, float *s) {   \
        if (kern_cpu_dotprod()) kern_dotq_##t##_dotprod(w, a, as, nt, n, s);                     \
        else kern_dotq_##t##_neon(w, a, as, nt, n, s);                                          \
    }
NEON_DISPATCH(q4_0)
NEON_DISPATCH(q8_0)
NEON_DISPATCH(q4_k)
NEON_DISPATCH(q6_k)
#undef NEON_DISPATCH

#define NEON_DISPATCH4(t)                                                                         \
    void kern_gemm4_##t##_dotprod(const void *w, const void *a, int n, float *s);                 \
    void kern_neon_gemm4_##t(const void *w, const void *a, int n, float *s) {                    \
        if (kern_cpu_dotprod()) kern_gemm4_##t##_dotprod(w, a, n, s);                            \
        else kern_gemm4_##t##_neon(w, a, n, s);                                                 \
    }
NEON_DISPATCH4(q4_0)
NEON_DISPATCH4(q8_0)
#undef NEON_DISPATCH4

#define NEON_DISPATCH_V4(t)                                                                            \
    void kern_gemv4_##t##_dotprod(const void *w, size_t ws, const void *a, int n, float *s);          \
    void kern_neon_gemv4_##t(const void *w, size_t ws, const void *a, int n, float *s) {             \
        if (kern_cpu_dotprod()) kern_gemv4_##t##_dotprod(w, ws, a, n, s);                            \
        else kern_gemv4_##t##_neon(w, ws, a, n, s);                                                 \
    }
NEON_DISPATCH_V4(q4_0)
NEON_DISPATCH_V4(q8_0)
#undef NEON_DISPATCH_V4
