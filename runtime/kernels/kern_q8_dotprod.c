/*
 * kern_q8_dotprod.c — the aarch64 integer leaves with the Armv8.2 dot
 * product (sdot): kern_neon_int.h with NEON_DOTPROD 1.  Built with
 * -march=armv8.2-a+dotprod (Makefile: *_dotprod.c); run only where
 * kern_cpu_dotprod() reports HWCAP_ASIMDDP (kern_q8_neon.c dispatches).
 */
#define NEON_DOTPROD 1
#define NEON_SFX dotprod
#include "kern_neon_int.h"
