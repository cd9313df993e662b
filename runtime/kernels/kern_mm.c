/*
 * kern_mm.c — which dense matmul path serves a call (kern_mm.h).
 */
#include "kern_mm.h"

#include "kern_q8.h"
#include "kern_r8.h"
#include "kern_rk.h"

/* act_quant 1 (llama.cpp's numerics): activations converted to the type's
 * vec_dot_type, integer dots — kern_q8.c.  Types whose vec_dot_type is F32
 * are the same in both modes. */
void kern_matmul_dispatch(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                          int n_out, int n_in, int n_tok) {
    const kern_type_ops *ty = kern_type_ops_get(type);
    if (kern_type_is_r8(type))
        kern_r8_matmul(isa, E, y, x, w, type, n_out, n_in, n_tok);
    else if (kern_type_is_rk(type))
        kern_rk_matmul(isa, E, y, x, w, type, n_out, n_in, n_tok);
    else if (E->act_quant && ty && ty->vec_dot_type != CF_F32)
        kern_q8_matmul(isa, E, y, x, w, type, n_out, n_in, n_tok);
    else
        kern_matmul_f32act(isa, E, y, x, w, type, n_out, n_in, n_tok);
}

/* One family for all: R8 weights share the Q8_0 quads, RK weights the Q8_K
 * rows, so those go to their driver's one-job path; any other mix runs
 * matmul by matmul (the same numbers either way). */
void kern_matmul_n_dispatch(int isa, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                            const int *type, const int *n_out, int n_in, int n_tok) {
    int r8 = n > 0 && n <= CF_MATMUL_N_MAX, rk = r8;
    for (int i = 0; i < n && (r8 || rk); i++) {
        r8 &= kern_type_is_r8(type[i]);
        rk &= kern_type_is_rk(type[i]);
    }
    if (r8) kern_r8_matmul_n(isa, E, n, y, x, w, type, n_out, n_in, n_tok);
    else if (rk) kern_rk_matmul_n(isa, E, n, y, x, w, type, n_out, n_in, n_tok);
    else
        for (int i = 0; i < n; i++) kern_matmul_dispatch(isa, E, y[i], x, w[i], type[i], n_out[i], n_in, n_tok);
}

void kern_matmul_n_each(cf_env *E, int n, float *const *y, const float *x, const void *const *w, const int *type,
                        const int *n_out, int n_in, int n_tok) {
    for (int i = 0; i < n; i++) E->K->matmul(E, y[i], x, w[i], type[i], n_out[i], n_in, n_tok);
}
