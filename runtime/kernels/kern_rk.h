/*
 * kern_rk.h — internal to the kernels: the row-interleaved K-quant types
 * CF_Q4_K_R8, CF_Q5_K_R8, CF_Q6_K_R8 and CF_IQ4_XS_R8 ("RK"; layouts in kern.h,
 * "row-interleaved K-quant types").
 *
 * Files: kern_rk.c (pack/unpack of one group's super-block, the scalar
 * reference leaves, the f32-activation helpers), kern_rk_mm.c (repack and
 * the integer driver), kern_rk_simd.h compiled as kern_rk_avx2.c
 * (vpmaddubsw + vpmaddwd) and kern_rk_vnni.c (vpdpbusd, 32 ymm, and the
 * gemm2 leaves: two row groups in the 16 lanes of a zmm), and on aarch64
 * kern_rk_neon_int.h compiled as kern_rk_neon.c (smull-emulated dot) and
 * kern_rk_dotprod.c (sdot; no IQ4_XS_R8 leaves: `auto` keeps IQ4_XS native
 * there, and a .giw with IQ4_XS_R8 runs on the scalar leaves).  The impl is
 * kern_r8's choice (kern_r8_impl_for_isa): scalar, avx2, vnni, neon, dotprod.
 *
 * Integer path (act_quant = 1), ggml's numerics.  Each token's activations
 * are quantized to ggml Q8_K (f32 d, 256 int8, 16 int16 bsums) with the
 * ISA's quantizer (same bytes on every ISA).  Per super-block, row r and
 * token t a leaf forms exact int32 sums
 *   Q4_K/Q5_K:  S = Σ_j sc_j·Σ_{k in j} q_k·a_k     (j: 8 sub-blocks of 32)
 *               M = Σ_j m_j·(bsum_2j + bsum_2j+1)
 *               acc = fma(S, d_w·d_a, acc); acc = fma(-M, dmin_w·d_a, acc)
 *   Q6_K:       S = Σ_s sc_s·Σ_{k in s} q_k·a_k - 32·Σ_s sc_s·bsum_s
 *               (s: 16 sub-blocks of 16, q = 0..63)
 *               acc = fma(S, d_w·d_a, acc)
 *   IQ4_XS:     S = Σ_j (ls_j - 32)·Σ_{k in j} v_k·a_k  (v: the IQ4_NL codebook value)
 *               acc = fma(S, d_w·d_a, acc)
 * (d_w·d_a and dmin_w·d_a are f32 products of the f16 scale and the f32
 * activation d), super-blocks in column order.  The scalar reference does
 * exactly these float operations (fmaf), so every impl gives the same bits,
 * for any token count (a decoded token gets the bits it gets in a batch) and
 * any thread count.  Against ggml's vec_dot_q4_K_q8_K / q6_K the integer
 * sums are the same; only the float accumulation order differs.
 *
 * f32-activation path (act_quant = 0): the rows are unpacked back to ggml
 * blocks and run through the native type's leaves, so the results are the
 * native type's bits (and so is the speed, minus the unpacking).
 */
#ifndef CINFER_KERN_RK_H
#define CINFER_KERN_RK_H

#include <stddef.h>
#include <stdint.h>

#include "kern.h"
#include "kern_kquants.h"

/* Tokens one gemm leaf call takes at most. */
#define KERN_RK_NT 16

/* Bytes per 256-column super-block of a group (8 native blocks); 0 for
 * other types. */
static inline int kern_rk_block_bytes(int type) {
    return type == CF_Q4_K_R8 ? KERN_Q4_K_R8_BLOCK : type == CF_Q5_K_R8 ? KERN_Q5_K_R8_BLOCK
         : type == CF_Q6_K_R8 ? KERN_Q6_K_R8_BLOCK : type == CF_IQ4_XS_R8 ? KERN_IQ4_XS_R8_BLOCK : 0;
}
/* The ggml type an RK type interleaves (KERN_T_Q4_K...); -1 otherwise. */
static inline int kern_rk_native(int type) {
    return type == CF_Q4_K_R8 ? KERN_T_Q4_K : type == CF_Q5_K_R8 ? KERN_T_Q5_K
         : type == CF_Q6_K_R8 ? KERN_T_Q6_K : type == CF_IQ4_XS_R8 ? KERN_T_IQ4_XS : -1;
}
/* 0, 1, 2, 3 for Q4_K_R8, Q5_K_R8, Q6_K_R8, IQ4_XS_R8 (leaf table index). */
static inline int kern_rk_index(int type) { return type - CF_Q4_K_R8; }

/* One super-block of a group: blk (kern_rk_block_bytes(type)) <- the 8 native
 * blocks rows[0..7] (ggml block_q4_K / q5_K / q6_K), and back.  Lossless:
 * unpack(pack(x)) == x byte for byte. */
void kern_rk_pack(int type, const void *const rows[8], uint8_t *blk);
void kern_rk_unpack(int type, const uint8_t *blk, int r, void *row_block);

/* y (n_tok, n_out) = x · Wᵀ for an RK matrix (n_out % 8 == 0, n_in % 256 ==
 * 0; otherwise NaN).  E->act_quant picks the path (above); threads over row
 * groups through E->pool.  _impl: an explicit kern_r8 impl (tests). */
void kern_rk_matmul(int isa, cf_env *E, float *y, const float *x, const void *w, int type, int n_out,
                    int n_in, int n_tok);
void kern_rk_matmul_impl(int impl, cf_env *E, float *y, const float *x, const void *w, int type,
                         int n_out, int n_in, int n_tok);
/* cf_kernels.matmul_n for RK weights (kern_r8.h kern_r8_matmul_n, Q8_K
 * activations: every type[i] an RK type). */
void kern_rk_matmul_n(int isa, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                      const int *type, const int *n_out, int n_in, int n_tok);
void kern_rk_matmul_n_impl(int impl, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                           const int *type, const int *n_out, int n_in, int n_tok);

/* Repack src (n_rows x n_cols, the RK type's native ggml type, or already
 * dst_type) as dst_type.  0, or -1 with a one-line message in err. */
int kern_rk_repack(int dst_type, int src_type, const void *src, int n_rows, int n_cols, void *dst,
                   char *err, size_t err_len);
/* dst (n_rows x n_cols f32) = exact values (the native dequantizer's). */
int kern_rk_dequant(int type, const void *src, int n_rows, int n_cols, float *dst);

/* f32 activations (kern.c's kern_matmul_f32act, mat-mat and mat-vec alike):
 * rows [r0, r0 + nr) x columns [k0, k0 + kc) dequantized into dst (row
 * stride ld), the native dequantizer's values; k0, kc multiples of 256. */
void kern_rk_deq_rows(int isa, int type, const void *w, int n_in, int r0, int nr, int k0, int kc,
                      float *dst, size_t ld);

/* ---- leaves ---------------------------------------------------------------
 * gemm: one row group wg (nb super-blocks) against nt tokens (1..KERN_RK_NT),
 * token t's Q8_K row at a + t * a_stride blocks; y[t * ldy + r] = result of
 * row r, token t (the arithmetic above). */
typedef void (*kern_rk_gemm_fn)(const void *wg, const kern_block_q8_k *a, size_t a_stride, int nb,
                                int nt, float *y, size_t ldy);

/* gemm2: the same for two adjacent row groups at once (wg and the next
 * group, wg + nb super-blocks: 16 rows, y[t * ldy + r] for r in 0..15),
 * each row's result the bits gemm gives it; NULL where an impl has none
 * (the driver then calls gemm per group).  A NULL gemm runs the scalar
 * leaf (an impl written before a type was added). */
#define KERN_RK_NTYPES 4
typedef struct {
    kern_rk_gemm_fn gemm[KERN_RK_NTYPES];  /* kern_rk_index order */
    kern_rk_gemm_fn gemm2[KERN_RK_NTYPES]; /* or NULLs */
} kern_rk_leaves;

extern const kern_rk_leaves kern_rk_avx2_leaves;
extern const kern_rk_leaves kern_rk_vnni_leaves;
extern const kern_rk_leaves kern_rk_neon_leaves;    /* aarch64: kern_rk_neon.c */
extern const kern_rk_leaves kern_rk_dotprod_leaves; /* aarch64 + dotprod: kern_rk_dotprod.c */
/* The scalar reference leaves. */
const kern_rk_leaves *kern_rk_scalar_leaves(void);
/* The leaves of kern_r8 impl `impl` (scalar for any impl without RK leaves). */
const kern_rk_leaves *kern_rk_leaves_for(int impl);

#endif
