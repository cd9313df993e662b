/*
 * kern_cpu.c — which ISAs this CPU (and OS) can run: CPUID/XGETBV probes
 * done once, read by every kernel file that picks an implementation.  At the
 * bottom of the kernels so that the leaves, the drivers and the tables can
 * all ask without asking each other.
 */
#include "kern.h"

#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

/* AVX2 + FMA + F16C present and YMM state enabled by the OS (CPUID.1:ECX
 * FMA/OSXSAVE/AVX/F16C, XCR0 bits 1-2, CPUID.7.0:EBX AVX2).  Done by hand
 * because not every compiler's __builtin_cpu_supports knows "f16c". */
static int cpu_has_avx2_fma_f16c(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const unsigned need = 1u << 12 | 1u << 27 | 1u << 28 | 1u << 29; /* fma osxsave avx f16c */
    if ((c & need) != need) return 0;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ __volatile__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 6) != 6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 5) & 1;
#else
    return 0;
#endif
}

/* AVX-512 F/BW/VL/VNNI with ZMM/opmask state enabled by the OS (XCR0 bits 1,2,5,6,7). */
static int cpu_has_avx512vnni(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6) != 0xe6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const unsigned f = 1u << 16, bw = 1u << 30, vl = 1u << 31;
    return (b & (f | bw | vl)) == (f | bw | vl) && (c >> 11 & 1); /* ECX bit 11: AVX512_VNNI */
#else
    return 0;
#endif
}

int kern_cpu_avx512vnni(void) {
    static atomic_int vnni = -1;
    int v = atomic_load_explicit(&vnni, memory_order_relaxed);
    if (v < 0) {
        v = kern_isa_available(KERN_ISA_AVX2) && cpu_has_avx512vnni();
        atomic_store_explicit(&vnni, v, memory_order_relaxed);
    }
    return v;
}

/* AVX512_BF16 (CPUID.(7,1):EAX bit 5), on top of the AVX-512 gate above. */
static int cpu_has_avx512bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) return 0; /* EAX: highest subleaf */
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 5) & 1;
#else
    return 0;
#endif
}

int kern_cpu_avx512bf16(void) {
    static atomic_int bf16 = -1;
    int v = atomic_load_explicit(&bf16, memory_order_relaxed);
    if (v < 0) {
        v = kern_cpu_avx512vnni() && cpu_has_avx512bf16();
        atomic_store_explicit(&bf16, v, memory_order_relaxed);
    }
    return v;
}

static atomic_int g_dotprod_forced = -1;

int kern_cpu_dotprod(void) {
#if defined(__aarch64__)
    static atomic_int dp = -1;
    int v = atomic_load_explicit(&dp, memory_order_relaxed);
    if (v < 0) {
        v = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
        atomic_store_explicit(&dp, v, memory_order_relaxed);
    }
    const int f = atomic_load_explicit(&g_dotprod_forced, memory_order_relaxed);
    return f >= 0 ? f && v : v;
#else
    return 0;
#endif
}

int kern_neon_force_dotprod(int on) {
    if (on > 0) {
        atomic_store(&g_dotprod_forced, -1);
        if (!kern_cpu_dotprod()) return -1;
    }
    atomic_store(&g_dotprod_forced, on < 0 ? -1 : on > 0);
    return 0;
}

int kern_isa_available(int isa) {
    static atomic_int avx2 = -1; /* CPUID once: it traps to the hypervisor in a VM */
    switch (isa) {
    case KERN_ISA_SCALAR: return 1;
#if defined(__aarch64__)
    case KERN_ISA_NEON: /* Advanced SIMD is part of the AArch64 base ISA */
        (void)avx2, (void)cpu_has_avx2_fma_f16c;
        return 1;
#else
    case KERN_ISA_AVX2: {
        int v = atomic_load_explicit(&avx2, memory_order_relaxed);
        if (v < 0) {
            v = cpu_has_avx2_fma_f16c();
            atomic_store_explicit(&avx2, v, memory_order_relaxed);
        }
        return v;
    }
#endif
    default: return 0;
    }
}

int kern_best_isa(void) {
    return kern_isa_available(KERN_ISA_SIMD) ? KERN_ISA_SIMD : KERN_ISA_SCALAR;
}

const char *kern_isa_name(int isa) {
    switch (isa) {
    case KERN_ISA_SCALAR: return "scalar";
#if defined(__aarch64__)
    case KERN_ISA_NEON: return "neon";
#else
    case KERN_ISA_AVX2: return "avx2";
#endif
    default: return "unknown";
    }
}

const char *kern_cpu_label(void) {
    int isa = kern_best_isa();
#if defined(__aarch64__)
    if (isa == KERN_ISA_NEON && kern_cpu_dotprod()) return "neon+dotprod";
#endif
    if (isa == KERN_ISA_AVX2 && kern_cpu_avx512vnni()) return "avx2+avx512vnni";
    return kern_isa_name(isa);
}

