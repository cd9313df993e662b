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

#endif
