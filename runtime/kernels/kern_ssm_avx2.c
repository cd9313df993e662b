/*
 * kern_ssm_avx2.c — AVX2 + FMA leaves of the recurrent-layer kernels: the
 * code of kern_ssm_simd.h with 8-float ymm vectors.  Built with -mavx2 -mfma;
 * runs only when kern_best_isa() chose KERN_ISA_AVX2.
 */
#define SSM_AVX512 0
#define SSM_LEAVES kern_ssm_avx2_leaves
#include "kern_ssm_simd.h"
