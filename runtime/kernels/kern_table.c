/*
 * kern_table.c — the cf_kernels tables the generated code calls through
 * (templates/prelude.h), one per ISA: which driver serves each op.
 *
 * Which dense matmul path serves a weight type is kern_mm.c's choice (the
 * f32-activation drivers of kern.c, quantized activations of kern_q8_mm.c,
 * the 8-row interleaved layouts of kern_r8_mm.c); the expert and per-head
 * matmuls (kern_moe.c) use the same choice.
 */
#include "kern.h"
#include "kern_elem.h"
#include "kern_mm.h"
#include "kern_moe.h"
#include "kern_ssm.h"

/* ==== the cf_kernels tables ==================================================== */

#define KERN_TABLE(sfx, ISA)                                                                \
    static void matmul_##sfx(cf_env *E, float *y, const float *x, const void *w, int type,   \
                             int n_out, int n_in, int n_tok) {                              \
        kern_matmul_dispatch(ISA, E, y, x, w, type, n_out, n_in, n_tok);                    \
    }                                                                                       \
    static void matmul_n_##sfx(cf_env *E, int n_w, float *const *y, const float *x,         \
                               const void *const *w, const int *type, const int *n_out,     \
                               int n_in, int n_tok) {                                       \
        kern_matmul_n_dispatch(ISA, E, n_w, y, x, w, type, n_out, n_in, n_tok);             \
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
                                const float *v, const float *sinks, int layer, int n_head,  \
                                int n_head_kv, int head_dim, int head_dim_v, float scale,   \
                                int window, float softcap, int n_tok) {                     \
        kern_drv_attention(ISA, E, out, q, k, v, sinks, layer, n_head, n_head_kv, head_dim, \
                           head_dim_v, scale, window, softcap, n_tok);                      \
    }                                                                                       \
    static void moe_matmul_##sfx(cf_env *E, float *y, const float *x, const float *route,   \
                                 const void *w, int type, int n_out, int n_in, int n_expert, \
                                 int k, int x_per_slot, const float *bias, float *scratch,  \
                                 int n_tok) {                                               \
        kern_moe_matmul(ISA, E, y, x, route, w, type, n_out, n_in, n_expert, k, x_per_slot, \
                        bias, scratch, n_tok);                                              \
    }                                                                                       \
    static void head_matmul_##sfx(cf_env *E, float *y, const float *x, const void *w,       \
                                  int type, int n_out, int n_in, int n_head, int head_rows, \
                                  int row0, int transposed, float *scratch, int n_tok) {    \
        kern_head_matmul(ISA, E, y, x, w, type, n_out, n_in, n_head, head_rows, row0,       \
                         transposed, scratch, n_tok);                                       \
    }                                                                                       \
    static void swiglu_##sfx(cf_env *E, float *y, const float *g, const float *u, int n,    \
                             int n_tok) {                                                   \
        kern_drv_swiglu(ISA, E, y, g, u, n, n_tok);                                              \
    }                                                                                       \
    static void ssm_conv_##sfx(cf_env *E, float *y, const float *x, const float *w,         \
                               const float *b, float *state, int n, int d_conv, int act,    \
                               int n_tok) {                                                 \
        kern_drv_ssm_conv(ISA, E, y, x, w, b, state, n, d_conv, act, n_tok);                \
    }                                                                                       \
    static void ssm_scan_##sfx(cf_env *E, float *y, const float *x, const float *dt,        \
                               const float *bc, const float *A, const float *D,             \
                               const float *dt_bias, float *state, int n_head, int head_dim, \
                               int d_state, int n_group, int a_per_state, int n_tok) {      \
        kern_drv_ssm_scan(ISA, E, y, x, dt, bc, A, D, dt_bias, state, n_head, head_dim,     \
                          d_state, n_group, a_per_state, n_tok);                            \
    }                                                                                       \
    static void delta_net_##sfx(cf_env *E, float *o, const float *qkv, const float *ba,     \
                                const float *A, const float *dt_bias, float *state,         \
                                int n_k_head, int n_v_head, int d_k, int d_v, float eps,    \
                                float *scratch, int n_tok) {                                \
        kern_drv_delta_net(ISA, E, o, qkv, ba, A, dt_bias, state, n_k_head, n_v_head, d_k,  \
                           d_v, eps, scratch, n_tok, KERN_DN_AUTO);                         \
    }                                                                                       \
    static const cf_kernels g_table_##sfx = {                                               \
        .matmul = matmul_##sfx,                                                             \
        .matmul_n = matmul_n_##sfx,                                                         \
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
        .moe_route = kern_moe_route,                                                        \
        .moe_matmul = moe_matmul_##sfx,                                                     \
        .moe_sum = kern_moe_sum,                                                            \
        .mul_sigmoid = kern_mul_sigmoid,                                                    \
        .swiglu_oai = kern_swiglu_oai,                                                      \
        .head_copy = kern_head_copy,                                                        \
        .head_matmul = head_matmul_##sfx,                                                   \
        .ssm_conv = ssm_conv_##sfx,                                                         \
        .ssm_scan = ssm_scan_##sfx,                                                         \
        .delta_net = delta_net_##sfx,                                                       \
        .rms_norm_groups = kern_rms_norm_groups,                                            \
    };

KERN_TABLE(scalar, KERN_ISA_SCALAR)
KERN_TABLE(avx2, KERN_ISA_AVX2)

const cf_kernels *kern_table(int isa) {
    if (!kern_isa_available(isa)) return NULL;
    return isa == KERN_ISA_AVX2 ? &g_table_avx2 : &g_table_scalar;
}
