/*
 * kern_half.h — BF16 weights with activations rounded to BF16
 * (cf_env.act_quant = 1, llama.cpp's vec_dot_type BF16) through AVX512_BF16
 * (vdpbf16ps): internal to the kernels (kern_q8_mm.c calls it).
 *
 * Where it runs.  The SIMD slot of an x86-64 CPU whose OS enables the
 * AVX-512 state and that has AVX-512 F/BW/VL/VNNI (the gate of the other
 * AVX-512 leaves) and AVX512_BF16 (kern_cpu_avx512bf16).  Elsewhere BF16
 * weights take the f32 kernels on the rounded activations (kern_q8_mm.c);
 * F16 weights always do (an AVX-512 F16 path is vcvtph2ps + vfmadd, the f32
 * kernels' own instructions: measured no faster, 1.0x, so there is none).
 *
 * Numerics: the f32 kernels' arithmetic, bit for bit.  One output (weight
 * row w, bf16 activation row a, n elements) is, per KERN_MM_KC-wide slice
 * [k0, k0 + kc) with kc8 = kc rounded down to a multiple of 8:
 *
 *   lane L (0..7): acc_L = +0, then acc_L = acc_L + w[k]·a[k] for
 *         k = k0 + L, k0 + L + 8, ... < k0 + kc8 (bf16 x bf16 is exact in
 *         f32: one rounding per step, as vfmadd's);
 *   s = ((acc_0 + acc_4) + (acc_2 + acc_6)) + ((acc_1 + acc_5) + (acc_3 + acc_7))
 *         (kern_avx2.c hsum), then s = s + w[k]·a[k] for the kc - kc8 tail
 *         elements in order;
 *   y = s_0, then y = y + s_1, y + s_2, ... in slice order,
 *
 * which is what kern.c's matmul computes for BF16 weights (tile_mm / the mv
 * leaves: one 8-lane FMA chain per slice in element order, hsum, the scalar
 * tail, slices added in order) and also what llama.cpp's AVX2 build (the
 * one that made ../shared/reference) computes for a BF16 matmul of a batch
 * (llamafile tinyBLAS<8, __m256>: one 8-lane FMA chain per output over all
 * of k, then the same hsum) whenever n <= KERN_MM_KC.  The one difference
 * from the f32 kernels: vdpbf16ps reads bf16 subnormal inputs as 0 and
 * flushes subnormal results to 0 (DAZ/FTZ, Intel SDM), and so does the
 * definition — terms below 2^-126 that no real layer sums to.
 *
 * How vdpbf16ps gives an 8-lane chain.  It adds two products per f32 lane,
 * the odd element's first, each step rounded: lane L of a ymm holds the
 * pair (odd: k0 + L, even: k0 + L + 8) of a 16-element block, so one
 * instruction is two consecutive steps of chain L.  Activations are stored
 * in that order (kern_half_pack_act); weight rows are permuted in registers
 * (mat-vec) or into the thread's tile (mat-mat), two rows per zmm.
 *
 * kern_half_dot_ref is the definition in portable C; the AVX-512 mat-mat
 * (16-row tiles, 4 row pairs x 4 tokens of accumulators) and mat-vec (4
 * rows a quarter of the range apart) both compute it bit for bit, whatever
 * the token count, the token's place in the batch and the thread count
 * (tests/test_kern_half.c).
 */
#ifndef CINFER_KERN_HALF_H
#define CINFER_KERN_HALF_H

#include "kern.h"

/* 1 when kern_half_matmul computes weights of `type` on isa on this CPU
 * (CF_BF16 on the SIMD slot with AVX512_BF16, see above); 0 otherwise. */
int kern_half_available(int isa, int type);

/* Bytes of one activation row of n elements in kern_half's layout (n
 * rounded up to 16, 2 bytes each). */
size_t kern_half_act_bytes(int n);

/* x (n floats) rounded to bf16 as llama.cpp does (nearest even,
 * ggml_compute_fp32_to_bf16), in kern_half's layout: per 16-element block,
 * element b + L at 2L + 1 and b + L + 8 at 2L (L < 8), zeros past n up to
 * the next multiple of 16.  dst holds kern_half_act_bytes(n) bytes. */
void kern_half_pack_act(const float *x, void *dst, int n);

/* y (n_tok, n_out) = a · Wᵀ, W = w (n_out rows of n_in BF16 elements), a =
 * n_tok rows of kern_half_act_bytes(n_in) bytes from kern_half_pack_act.
 * Each output is kern_half_dot_ref's bits.  Threads over E->pool (NULL: the
 * calling thread); per-thread scratch KERN_MM_TILE_BYTES (stack without it).
 * Only where kern_half_available(isa, type); otherwise y is NaN. */
void kern_half_matmul(int isa, cf_env *E, float *y, const void *a, const void *w, int type,
                      int n_out, int n_in, int n_tok);

/* One output of kern_half_matmul in portable C (the definition above):
 * w_row n BF16 elements, a_row one row from kern_half_pack_act.  NaN for a
 * type other than CF_BF16. */
float kern_half_dot_ref(int type, const void *w_row, const void *a_row, int n);

/* ---- leaves (kern_half_avx512bf16.c) ---------------------------------------
 * One KERN_MM_KC slice (kc <= KERN_MM_KC) at its start: w = nr natural BF16
 * rows (row stride ws elements), x = packed activations (token stride xs
 * elements); s = the slice sum of the definition, y[t * ys + r] = s (or += s
 * when accumulate). */
/* Rows into a mat-mat tile (nr <= 16, the missing rows zero): 8 row pairs x
 * ceil(kc8 / 16) blocks x 32 elements, kern_half's pair order. */
void kern_avx512bf16_pack(const uint16_t *w, size_t ws, int nr, int kc, uint16_t *tile);
/* Mat-mat: the tile of those rows against nt tokens (w for the tail only). */
void kern_avx512bf16_mm(const uint16_t *tile, const uint16_t *w, size_t ws, int nr, const uint16_t *x,
                        size_t xs, int nt, int kc, float *y, size_t ys, int accumulate);
/* Mat-vec: one token, rows r < nr at w + r * ws (any stride), the weights
 * permuted in registers; y[r * yr]. */
void kern_avx512bf16_mv(const uint16_t *w, size_t ws, int nr, const uint16_t *x, int kc, float *y,
                        size_t yr, int accumulate);

#endif
