/*
 * kern_ssm_avx512.c — AVX-512 leaves of the recurrent-layer kernels: the code
 * of kern_ssm_simd.h with 16-float zmm vectors.  Built with the AVX-512 flags
 * (the Makefile's *_avx512.c rule); kern_ssm_leaves_for() picks them inside
 * KERN_ISA_AVX2 only when kern_cpu_avx512vnni() reports AVX-512 with ZMM state.
 */
#define SSM_AVX512 1
#define SSM_LEAVES kern_ssm_avx512_leaves
#include "kern_ssm_simd.h"
