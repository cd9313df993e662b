/*
 * kern_table.c — the cf_kernels tables the generated code calls through
 * (templates/prelude.h), one per ISA: which driver serves each op.
 *
 * This is the one place that knows every matmul path — the f32-activation
 * drivers (kern.c), quantized activations (kern_q8_mm.c) and the 8-row
 * interleaved layouts (kern_r8.c) — so those paths never call each other
 * through the table and each sits on the layers below it.
 */
#include "kern.h"
#include "kern_elem.h"
#include "kern_q8.h"
#include "kern_r8.h"

/* act_quant 1 (llama.cpp's numerics): activations converted to the type's
 * vec_dot_type, integer dots — kern_q8.c.  Types whose vec_dot_type is F32
 * are the same in both modes. */
static void matmul_drv(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                       int n_out, int n_in, int n_tok) {
    const kern_type_ops *ty = kern_type_ops_get(type);
    if (kern_type_is_r8(type))
        kern_r8_matmul(isa, E, y, x, w, type, n_out, n_in, n_tok);
    else if (E->act_quant && ty && ty->vec_dot_type != CF_F32)
        kern_q8_matmul(isa, E, y, x, w, type, n_out, n_in, n_tok);
    else
        kern_matmul_f32act(isa, E, y, x, w, type, n_out, n_in, n_tok);
}

/* ==== the cf_kernels tables ==================================================== */

#define KERN_TABLE(sfx, ISA)                                                                \
    static void matmul_##sfx(cf_env *E, float *y, const float *x, const void *w, int type,   \
                             int n_out, int n_in, int n_tok) {                              \
        matmul_drv(ISA, E, y, x, w, type, n_out, n_in, n_tok);                              \
    }                                                                                       \
    static void get_rows_##sfx(cf_env *E, float *y, const void *w, int type, int n,         \
                               const int *ids, int n_tok) {                                 \
        kern_drv_get_rows(ISA, E, y, w, type, n, ids, n_tok);                                    \
    }                                                                                       \
    static void rms_norm_##sfx(cf_env *E, float *y, const float *x, const float *w, int n,  \
                               float eps, int n_tok) {                                      \
        kern_drv_rms_norm(ISA, E, y, x, w, n, eps, n_tok);                                       \
    }                                                                                       \
    static void attention_##sfx(cf_env *E, float *out, const float *q, const float *k,      \
                                const float *v, int layer, int n_head, int n_head_kv,       \
                                int head_dim, float scale, int window, float softcap,      \
                                int n_tok) {                                                \
        kern_drv_attention(ISA, E, out, q, k, v, layer, n_head, n_head_kv, head_dim, scale,      \
                      window, softcap, n_tok);                                              \
    }                                                                                       \
    static void swiglu_##sfx(cf_env *E, float *y, const float *g, const float *u, int n,    \
                             int n_tok) {                                                   \
        kern_drv_swiglu(ISA, E, y, g, u, n, n_tok);                                              \
    }                                                                                       \
    static const cf_kernels g_table_##sfx = {                                               \
        .matmul = matmul_##sfx,                                                             \
        .get_rows = get_rows_##sfx,                                                         \
        .rms_norm = rms_norm_##sfx,                                                         \
        .rope = kern_drv_rope,                                                                   \
        .attention = attention_##sfx,                                                       \
        .swiglu = swiglu_##sfx,                                                             \
        .add = kern_drv_add,                                                                     \
        .last_row = kern_drv_last_row,                                                           \
        .add_row = kern_add_row,                                                            \
        .scale = kern_scale,                                                                \
        .gelu = kern_gelu,                                                                  \
        .geglu = kern_geglu,                                                                \
        .layer_norm = kern_layer_norm,                                                      \
        .copy_cols = kern_copy_cols,                                                        \
        .logits_post = kern_logits_post,                                                    \
        .mul_row = kern_mul_row,                                                            \
        .mul = kern_mul,                                                                    \
        .relu_sqr = kern_relu_sqr,                                                          \
        .xielu = kern_xielu,                                                                \
        .pos_log_scale = kern_pos_log_scale,                                                \
        .tanh_ = kern_tanh,                                                                 \
        .sub = kern_sub,                                                                    \
        .concat = kern_concat,                                                              \
        .match_norm = kern_match_norm,                                                      \
        .mix_groups = kern_mix_groups,                                                      \
        .axpy_groups = kern_axpy_groups,                                                    \
        .add_groups = kern_add_groups,                                                      \
        .gaussian_topk = kern_gaussian_topk,                                                \
    };

KERN_TABLE(scalar, KERN_ISA_SCALAR)
KERN_TABLE(avx2, KERN_ISA_AVX2)

const cf_kernels *kern_table(int isa) {
    if (!kern_isa_available(isa)) return NULL;
    return isa == KERN_ISA_AVX2 ? &g_table_avx2 : &g_table_scalar;
}
