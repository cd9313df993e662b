/*
 * kern_moe.h — internal to the kernels: mixture-of-experts routing, expert
 * matmuls and their weighted sum, and the per-head matmul of multi-head
 * latent attention.  The cf_kernels entries of the same names
 * (templates/prelude.h) document shapes; kern_table.c binds these per ISA.
 *
 * References: llama.cpp build_moe_ffn (src/llama-graph.cpp) for the routing
 * rules and the order of the weighted sum; ggml_mul_mat_id for what an
 * expert matmul computes.
 */
#ifndef CINFER_KERN_MOE_H
#define CINFER_KERN_MOE_H

#include "kern.h"

void kern_moe_route(cf_env *E, float *route, const float *logits, const float *bias,
                    int n_expert, int k, int gating, int norm, float scale, int n_group,
                    int n_group_used, int n_tok);
void kern_moe_matmul(int isa, cf_env *E, float *y, const float *x, const float *route,
                     const void *w, int type, int n_out, int n_in, int n_expert, int k,
                     int x_per_slot, const float *bias, float *scratch, int n_tok);
void kern_moe_sum(cf_env *E, float *y, const float *x, const float *route,
                  const float *expert_scale, int n, int k, int n_tok);
void kern_head_matmul(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                      int n_out, int n_in, int n_head, int head_rows, int row0, int transposed,
                      float *scratch, int n_tok);

/* Expert id of slot j of a route row (ids are int32 bits in float slots). */
int kern_route_id(const float *route_row, int k, int j);

#endif
