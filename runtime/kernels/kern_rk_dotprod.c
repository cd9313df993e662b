/*
 * kern_rk_dotprod.c — the RK gemm leaves with the Armv8.2 dot product (sdot):
 * kern_rk_neon_int.h with NEON_DOTPROD 1.  Built with -march=armv8.2-a+dotprod
 * (Makefile: *_dotprod.c); run only as kern_r8 impl KERN_R8_DOTPROD, which
 * exists only where kern_cpu_dotprod() reports HWCAP_ASIMDDP.
 */
#define NEON_DOTPROD 1
#define RK_LEAVES kern_rk_dotprod_leaves
#include "kern_rk_neon_int.h"
