/*
 * kern_r8_vnni.c — AVX-512 VNNI leaves of the row-interleaved types
 * (kern_r8_simd.h with R8_VNNI 1: vpdpbusd on ymm, EVEX-encoded so the
 * kernels have 32 vector registers); built with -mavx512f -mavx512bw
 * -mavx512vl -mavx512vnni (Makefile, files named *_vnni.c) and run only when
 * CPUID reports those (kern_r8_impl_available(KERN_R8_VNNI)).
 */
#define R8_VNNI 1
#define R8_LEAVES kern_r8_vnni_leaves
#include "kern_r8_simd.h"
