/*
 * kern_elem.h — elementwise and normalisation kernels (cf_kernels entries
 * beyond the llama set).  Shapes as in templates/prelude.h: activations are
 * (n_tok, n) row-major; y may alias x where noted.
 */
#ifndef CINFER_KERN_ELEM_H
#define CINFER_KERN_ELEM_H

#include "prelude.h"

/* y = x + b per row; b (n).  y may alias x. */
void kern_add_row(cf_env *E, float *y, const float *x, const float *b, int n, int n_tok);
/* y = x * s.  y may alias x. */
void kern_scale(cf_env *E, float *y, const float *x, float s, int n, int n_tok);
/* y = gelu(x), tanh form through ggml's F16 table.  y may alias x. */
void kern_gelu(cf_env *E, float *y, const float *x, int n, int n_tok);
/* y = gelu(g) * u. */
void kern_geglu(cf_env *E, float *y, const float *g, const float *u, int n, int n_tok);
/* Exact f32 tanh-GELU, for tests. */
float kern_gelu_ref(float x);
/* y = (x - mean) / sqrt(var + eps) * w + b per row; b may be NULL. */
void kern_layer_norm(cf_env *E, float *y, const float *x, const float *w, const float *b, int n,
                     float eps, int n_tok);
/* y (n_tok, n_y) = columns [col0, col0 + n_y) of x (n_tok, n_x). */
void kern_copy_cols(cf_env *E, float *y, const float *x, int n_x, int col0, int n_y, int n_tok);
/* In place on logits (n_rows, n_vocab): l += bias (n_vocab) when bias is not NULL,
 * then l *= scale, then l = c·tanh(l/c) when softcap c > 0. */
void kern_logits_post(cf_env *E, float *logits, const float *bias, int n_vocab, int n_rows,
                      float scale, float softcap);

/* ---- activations and products of the issue-19 families ---------------------- */

/* y = x * w per row: w (n) f32 elementwise, or n_w == 1: every element times
 * w[0] (a scalar weight: Gemma 4's layer_output_scale, BitNet's .scale).
 * y may alias x. */
void kern_mul_row(cf_env *E, float *y, const float *x, const float *w, int n_w, int n, int n_tok);
/* y = a * b elementwise, all (n_tok, n); y may alias a or b. */
void kern_mul(cf_env *E, float *y, const float *a, const float *b, int n, int n_tok);
/* y = max(x, 0)² (ReLU², ggml_relu then ggml_sqr: Nemotron, Arcee).  y may alias x. */
void kern_relu_sqr(cf_env *E, float *y, const float *x, int n, int n_tok);
/* xIELU (Apertus), ggml_xielu from the GGUF's raw per-layer values: with
 * a_p = softplus(alpha_p), a_n = beta + softplus(alpha_n) (in float, as
 * ggml_xielu builds its op parameters), y = a_p x² + beta x for x > 0, else
 * (expm1(min(x, eps)) - x) a_n + beta x.  y may alias x. */
void kern_xielu(cf_env *E, float *y, const float *x, float alpha_n, float alpha_p, float beta,
                float eps, int n, int n_tok);
/* y = tanhf(x).  y may alias x. */
void kern_tanh(cf_env *E, float *y, const float *x, int n, int n_tok);
/* y = a - b elementwise, all (n_tok, n); y may alias a. */
void kern_sub(cf_env *E, float *y, const float *a, const float *b, int n, int n_tok);
/* y (n_tok, n_a + n_b) = [a | b] per row; a (n_tok, n_a), b (n_tok, n_b). */
void kern_concat(cf_env *E, float *y, const float *a, int n_a, const float *b, int n_b, int n_tok);

/* y = x * s(p) per token row, p = E->pos + t: s(p) = 1 + scale · ln(1 +
 * floor((p + offset) / floor_scale)), llama.cpp's attention temperature
 * tuning (llm_graph_input_attn_temp: the floor in float, the log and the
 * rest in double, the factor rounded to float).  y may alias x. */
void kern_pos_log_scale(cf_env *E, float *y, const float *x, float scale, int floor_scale,
                        float offset, int n, int n_tok);

/* ---- groups of a row (Gemma 3n's AltUp streams) --------------------------------
 * A row of n_group * n values is n_group groups of n, group g at columns
 * [g * n, (g + 1) * n).  The magnitude |v| of n values is
 * sqrtf((float)Σ (v_i * v_i)), the sum of the float squares in double
 * (ggml_sqr, ggml_sum_rows, ggml_sqrt). */

/* y_g = (x_g * |ref|) / |x_g| per group; x (n_tok, n_group * n), ref (n_tok, n):
 * each group rescaled to ref's magnitude (ggml_mul then ggml_div).  y may alias x. */
void kern_match_norm(cf_env *E, float *y, const float *x, const float *ref, int n, int n_group,
                     int n_tok);
/* y_j = Σ_k c[j * n_group + k] · x_k, k in order, summed in float: a per-token
 * n_group × n_group mix of the groups (ggml_mul_mat of the permuted streams
 * with the coefficients); x, y (n_tok, n_group * n), c (n_tok, n_group²).
 * y must not alias x. */
void kern_mix_groups(cf_env *E, float *y, const float *x, const float *c, int n, int n_group,
                     int n_tok);
/* y_j = v * (c_j + bias) + p_j per group j; p, y (n_tok, n_group * n), v (n_tok, n),
 * c (n_tok, n_group).  y may alias p. */
void kern_axpy_groups(cf_env *E, float *y, const float *p, const float *v, const float *c,
                      float bias, int n, int n_group, int n_tok);
/* y_g = x_g + v for groups g >= g0, x_g below; x, y (n_tok, n_group * n), v (n_tok, n).
 * y may alias x. */
void kern_add_groups(cf_env *E, float *y, const float *x, const float *v, int n, int n_group,
                     int g0, int n_tok);
/* Gemma 3n's activation sparsity per row of n: cutoff = mean + std_mul · std
 * (std with n - 1 in the denominator), y = max(x - cutoff, 0), with ggml's
 * roundings (ggml_mean, ggml_sqr/ggml_sum_rows, ggml_scale, ggml_sqrt,
 * ggml_sub, ggml_relu).  y may alias x. */
void kern_gaussian_topk(cf_env *E, float *y, const float *x, float std_mul, int n, int n_tok);

/* y = x * sigmoid(g), g (n_tok, n_g) with n_g = n or 1 (a gate per token).
 * y may alias x.  sigmoid = 1 / (1 + exp(-g)) (ggml_vec_sigmoid_f32). */
void kern_mul_sigmoid(cf_env *E, float *y, const float *x, const float *g, int n, int n_g,
                      int n_tok);
/* ggml_swiglu_oai: g' = min(g, limit), u' = clamp(u, -limit, limit),
 * y = g' / (1 + exp(-alpha g')) * (u' + 1). */
void kern_swiglu_oai(cf_env *E, float *y, const float *g, const float *u, float alpha, float limit,
                     int n, int n_tok);
/* The strided per-head copy of cf_kernels.head_copy (templates/prelude.h). */
void kern_head_copy(cf_env *E, float *y, int y_stride, int y_head, const float *x, int x_stride,
                    int x_head, int n, int n_head, int n_tok);

#endif
