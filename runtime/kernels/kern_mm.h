/*
 * kern_mm.h — internal to the kernels: the one place that picks a dense
 * matmul path for a weight type and activation mode (kern_table.c's matmul
 * entry, and the expert and per-head matmuls of kern_moe.c, call it).
 */
#ifndef CINFER_KERN_MM_H
#define CINFER_KERN_MM_H

#include "kern.h"

/* y (n_tok, n_out) = x (n_tok, n_in) · Wᵀ through isa: the R8 driver for the
 * interleaved types (kern_r8_mm.c; K-quants kern_rk_mm.c), quantized activations when E->act_quant
 * and the type has a vec_dot_type (kern_q8_mm.c), else f32 activations
 * (kern.c).  Shapes and errors as cf_kernels.matmul (templates/prelude.h). */
void kern_matmul_dispatch(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                          int n_out, int n_in, int n_tok);

/* cf_kernels.matmul_n: all-R8 or all-RK weights (at most CF_MATMUL_N_MAX)
 * as one job (kern_r8.h kern_r8_matmul_n, kern_rk.h), anything else matmul
 * by matmul through kern_matmul_dispatch. */
void kern_matmul_n_dispatch(int isa, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                            const int *type, const int *n_out, int n_in, int n_tok);
/* cf_kernels.matmul_n as n calls of E->K->matmul: for tables that wrap
 * matmul (the engine's streaming and checking tables). */
void kern_matmul_n_each(cf_env *E, int n, float *const *y, const float *x, const void *const *w, const int *type,
                        const int *n_out, int n_in, int n_tok);

#endif
