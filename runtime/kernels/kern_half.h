/*
 * kern_half.h — F16 and BF16 weights with activations in the weight's format
 * (cf_env.act_quant = 1, llama.cpp's vec_dot_type F16/BF16) on AVX-512:
 * internal to the kernels (kern_q8_mm.c calls it).
 *
 * Where it runs.  The SIMD slot of an x86-64 CPU whose OS enables the
 * AVX-512 state: F16 weights when the CPU has AVX-512 F/BW/VL/VNNI (the gate
 * of the other AVX-512 leaves, kern_cpu_avx512vnni), BF16 weights when it
 * also has AVX512_BF16 (kern_cpu_avx512bf16).  Elsewhere F16/BF16 weights
 * take the f32 kernels on the rounded activations (kern_q8_mm.c), whose sums
 * are 8-lane chains (kern_avx2.c): a machine with AVX-512 gives other low
 * bits than one without (both are within float rounding of the exact dot;
 * tests/test_kern_half.c), each machine is batch- and thread-invariant.
 *
 * Numerics (one output: weight row w, activation row a, n elements).  The
 * input is cut into KERN_MM_KC-wide slices; a slice's sum s is 16 lanes
 * accumulated in element order, then reduced by a fixed tree; the output is
 * s_0, then + s_1, + s_2, ... in slice order:
 *
 *   F16:  a holds floats (the activations rounded to f16, or their f32 value
 *         where f16 overflows: kern_q8.h "Range").  Lane i takes elements
 *         i, i+16, i+32, ... of the slice: acc_i = fmaf(w, a, acc_i) with w
 *         the exact f32 value of the half (vcvtph2ps + vfmadd: F16C +
 *         AVX-512F; no native f16 arithmetic on this CPU).
 *   BF16: a holds bf16 bits (the activations rounded to nearest even,
 *         ggml_compute_fp32_to_bf16).  Lane i takes the pairs (2i, 2i+1),
 *         (2i+32, 2i+33), ...: per pair the odd element first, acc_i =
 *         fmaf(w_odd, a_odd, acc_i), then acc_i = fmaf(w_even, a_even,
 *         acc_i), with bf16 subnormal inputs read as 0 and subnormal results
 *         flushed to 0 — exactly VDPBF16PS (Intel SDM; the same bits on Zen 4,
 *         checked on 3.2M random lanes).  bf16 x bf16 products are exact in
 *         f32, so each step is one rounding, as in the f32 path.
 *   A slice's last step is partial when its length is not a multiple of 16
 *   (F16) / 32 (BF16): the missing elements are 0 in both w and a (their
 *   steps add +0).  Tree: with v = the 16 lanes, v[i] += v[i + h] for
 *   i < h, h = 8, 4, 2, 1; s = v[0].
 *
 * kern_half_dot_ref is that definition in portable C; the AVX-512 mat-mat
 * (16-row weight tiles, 4 rows x 4 tokens of accumulators) and mat-vec
 * (4 rows at a time, one token) both compute it bit for bit, whatever the
 * token count, the token's place in the batch and the thread count.
 */
#ifndef CINFER_KERN_HALF_H
#define CINFER_KERN_HALF_H

#include "kern.h"

/* 1 when kern_half_matmul computes weights of `type` (CF_F16, CF_BF16) on
 * isa on this CPU (see above); 0 otherwise. */
int kern_half_available(int isa, int type);

/* y (n_tok, n_out) = a · Wᵀ, W = w (n_out rows of n_in F16/BF16 elements),
 * a = the activations rounded to the weight's format: for CF_BF16 n_tok rows
 * of n_in bf16 bits (uint16_t), for CF_F16 n_tok rows of n_in floats.  Each
 * output is kern_half_dot_ref's bits.  Threads over E->pool (NULL: the
 * calling thread); per-thread scratch KERN_MM_TILE_BYTES (stack without it).
 * Only where kern_half_available(isa, type); otherwise y is NaN. */
void kern_half_matmul(int isa, cf_env *E, float *y, const void *a, const void *w, int type,
                      int n_out, int n_in, int n_tok);

/* One output of kern_half_matmul in portable C (the definition above):
 * w_row n elements of `type`, a_row as kern_half_matmul's a rows.  NaN for a
 * type other than CF_F16 / CF_BF16. */
float kern_half_dot_ref(int type, const void *w_row, const void *a_row, int n);

/* ---- leaves (kern_half_avx512.c, kern_half_avx512bf16.c) -------------------
 * One KERN_MM_KC slice (kc <= KERN_MM_KC elements) for rows r < nr and tokens
 * t < nt: s(r, t) = the slice sum of the definition above, stored to
 * y[t * ys + r * yr], or added to it when accumulate. */
/* F16, weights already f32 (an exactly converted tile, row stride ws floats),
 * activations x[t * xs + k]. */
void kern_avx512_f16_mm(const float *w, size_t ws, int nr, const float *x, size_t xs, int nt, int kc,
                        float *y, size_t ys, size_t yr, int accumulate);
/* F16, one token, weights as halves (row stride ws halves). */
void kern_avx512_f16_mv(const uint16_t *w, size_t ws, int nr, const float *x, int kc, float *y,
                        size_t yr, int accumulate);
/* BF16, weights (row stride ws) and activations (x[t * xs + k]) as bf16 bits;
 * nt == 1 is the mat-vec. */
void kern_avx512bf16_mm(const uint16_t *w, size_t ws, int nr, const uint16_t *x, size_t xs, int nt,
                        int kc, float *y, size_t ys, size_t yr, int accumulate);

#endif
