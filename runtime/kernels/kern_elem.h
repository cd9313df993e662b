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
/* In place on logits (n_rows, n_vocab): l *= scale, then l = c·tanh(l/c) when softcap c > 0. */
void kern_logits_post(cf_env *E, float *logits, int n_vocab, int n_rows, float scale,
                      float softcap);

#endif
