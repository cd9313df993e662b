/*
 * kern_r8_avx2.c — AVX2 + FMA + F16C leaves of the row-interleaved types
 * (kern_r8_simd.h with R8_VNNI 0: vpmaddubsw + vpmaddwd); built with the
 * _avx2 flags, run only when kern_r8_impl_for_isa() picks KERN_R8_AVX2 (or
 * for the f32-activation leaves, KERN_R8_VNNI too).
 */
#define R8_VNNI 0
#define R8_LEAVES kern_r8_avx2_leaves
#include "kern_r8_simd.h"
