/*
 * kern_rk_vnni.c — AVX-512 VNNI gemm leaves of the row-interleaved K-quant
 * types (kern_rk_simd.h with RK_VNNI 1: vpdpbusd on ymm, EVEX-encoded so the
 * kernels have 32 vector registers); built with the _vnni flags, run only
 * when CPUID reports AVX-512 F/BW/VL/VNNI (kern_r8_impl_available(KERN_R8_VNNI)).
 */
#define RK_VNNI 1
#define RK_LEAVES kern_rk_vnni_leaves
#include "kern_rk_simd.h"
