/*
 * kern_rk_neon.c — the RK gemm leaves on any AArch64 CPU: kern_rk_neon_int.h
 * with the emulated 4-byte dot (kern_r8 impl KERN_R8_NEON).
 */
#define NEON_DOTPROD 0
#define RK_LEAVES kern_rk_neon_leaves
#include "kern_rk_neon_int.h"
