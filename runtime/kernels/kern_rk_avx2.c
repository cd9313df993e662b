/*
 * kern_rk_avx2.c — AVX2 + FMA + F16C gemm leaves of the row-interleaved
 * K-quant types (kern_rk_simd.h with RK_VNNI 0: vpmaddubsw + vpmaddwd);
 * built with the _avx2 flags, run when kern_r8_impl_for_isa() picks
 * KERN_R8_AVX2.
 */
#define RK_VNNI 0
#define RK_LEAVES kern_rk_avx2_leaves
#include "kern_rk_simd.h"
