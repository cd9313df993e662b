/*
 * kern_q8.h — internal to the kernels (kern.c, kern_q8.c, kern_q8_avx2.c):
 * quantized activations, llama.cpp's CPU matmul numerics ("fast mode",
 * cf_env.act_quant = 1).
 *
 * ggml multiplies a quantized weight row by an activation row converted to
 * the weight type's vec_dot_type (ggml-cpu.c type_traits_cpu):
 *   Q4_0 Q5_0 Q8_0 IQ4_NL MXFP4                  -> Q8_0 (32 int8 + f16 d)
 *   Q4_1 Q5_1                                    -> Q8_1 (Q8_0 + f16 s = d*Σq)
 *   Q2_K..Q6_K IQ3_XXS IQ3_S IQ4_XS TQ1_0 TQ2_0  -> Q8_K (256 int8, f32 d, 16 int16 bsums)
 *   F16 -> F16, BF16 -> BF16, F32 -> F32 (and Q8_K weights: not a ggml matmul type, F32 here)
 * and forms the dot from integer block sums: Σ_blocks d_w·d_a·Σ q_w·q_a
 * (+ min/offset terms).  This module owns those activation formats, the
 * quantizers and the integer dots (scalar reference + AVX2), and the matmul
 * driver for act_quant mode.
 *
 * Quantizers follow what llama.cpp runs on x86 with AVX2 (the machine the
 * references in ../shared/reference were made on):
 *  - Q8_0/Q8_1: ggml-cpu/arch/x86/quants.c quantize_row_q8_0/q8_1 (AVX path):
 *    amax = max|x|, d = amax/127, id = amax ? 127/amax : 0, q = round-half-even(x*id)
 *    (not quantize_row_q8_0_ref's 1/d and roundf: the results differ at ties
 *    and where 127/amax != 1/(amax/127)); Q8_1 s = f16(d * Σq).
 *  - Q8_K: quantize_row_q8_K_ref (x86 runs the reference): max = the first
 *    element of largest |x|, iscale = -127/max, q = min(127, nearest_int(iscale*x)),
 *    d = 1/iscale, bsums = Σ of each 16 q; an all-zero block gets d = 0, q = 0
 *    (and bsums left 0 here; ggml leaves them unwritten).
 *  - F16/BF16: round to nearest even (vcvtps2ph; ggml_compute_fp32_to_bf16).
 *
 * Dots: integer sums per block are exact (int32); how the float products of
 * scales and sums are accumulated differs between the scalar reference, the
 * AVX2 leaves and ggml (tests bound that difference) — but within one ISA a
 * token's float work is the same in the mat-vec and the mat-mat: dot_q does
 * each token alike whatever nt, gemv4 is gemm4 transposed, and both drivers
 * give a row's whole input to one leaf call (batch invariance, kern.h).
 *
 * Range.  Where ggml's formats overflow, cinfer leaves them: an F16
 * activation beyond 65504 stays its f32 value (kern_q8_mm.c round_rows); a
 * token whose Q8_0 d or Q8_1 s overflowed f16 (kern_q8x4_overflows) is
 * computed with f32 activations.  Both are decisions per element or per
 * token, so batch invariance holds; in range the numbers are ggml's.
 */
#ifndef CINFER_KERN_Q8_H
#define CINFER_KERN_Q8_H

#include <stddef.h>
#include <stdint.h>

#include "kern.h"
#include "kern_kquants.h"

#define KERN_T_Q8_1 9 /* GGML_TYPE_Q8_1 */

/* ggml block_q8_1: Q8_0 plus s = d * Σ qs (f16) */
typedef struct {
    uint16_t d, s;
    int8_t qs[KERN_QK];
} kern_block_q8_1;

/* ---- activation quantizers -------------------------------------------------
 * dst = x (n) in vec_dot_type layout; n a multiple of the block (32 / 256). */
typedef void (*kern_quant_fn)(const float *x, void *dst, int n);

void kern_sc_quantize_q8_0(const float *x, void *dst, int n);
void kern_sc_quantize_q8_1(const float *x, void *dst, int n);
void kern_sc_quantize_q8_k(const float *x, void *dst, int n);
void kern_sc_quantize_f16(const float *x, void *dst, int n);
void kern_sc_quantize_bf16(const float *x, void *dst, int n);
void kern_avx2_quantize_q8_0(const float *x, void *dst, int n);
void kern_avx2_quantize_q8_1(const float *x, void *dst, int n);
void kern_avx2_quantize_q8_k(const float *x, void *dst, int n);
void kern_avx2_quantize_f16(const float *x, void *dst, int n);

/* Q8_0 / Q8_1 blocks of 4 tokens interleaved, the mat-mat layout of the
 * 32-element types (like ggml's block_q8_0x4): d and s (Q8_1: f16(d*Σq))
 * as f32, exactly the f16 values of the tokens' ggml blocks, and Σq. */
typedef struct {
    float d[4];
    float s[4];
    int32_t sum[4]; /* Σ qs[t]: lets Q4_0/Q5_0 multiply unsigned codes (q+8, q+16) */
    int8_t qs[4][KERN_QK];
} kern_block_q8x4;

/* out (n/32 blocks) = the 4 rows rows[t] (ggml Q8_0 or Q8_1 blocks, vdt;
 * NULL: a zero token) interleaved. */
void kern_q8x4_pack(int vdt, const void *const rows[4], int n, kern_block_q8x4 *out);
/* 1 when token slot t (0..3) of the nb blocks q has a scale that overflowed
 * its f16 (d: |x| above ~8.3e6; Q8_1's s = d·Σq: a block sum of a few
 * thousand): its integer dots would be inf or NaN, so the drivers compute
 * that token with f32 activations instead (a per-token choice: batch-invariant). */
int kern_q8x4_overflows(const kern_block_q8x4 *q, int nb, int t);

/* ---- integer dots (kern_dot_q_fn, kern.h) ------------------------------------ */

/* X(name) for every weight type with an integer dot, in table order. */
#define KERN_Q8_DOT_TYPES(X)                                                            \
    X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(iq4_nl) X(mxfp4) X(q2_k) X(q3_k) X(q4_k)  \
    X(q5_k) X(q6_k) X(iq4_xs) X(iq3_xxs) X(iq3_s) X(tq1_0) X(tq2_0)

/* The 32-element types, which also have a 4-token kern_gemm4_fn on kern_block_q8x4
 * and its 4-row transpose kern_gemv4_fn. */
#define KERN_Q8_GEMM4_TYPES(X) X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(iq4_nl) X(mxfp4)

#define KERN_Q8_GEMM4_DECL(t)                                                           \
    void kern_sc_gemm4_##t(const void *w, const void *a, int n, float *s);             \
    void kern_avx2_gemm4_##t(const void *w, const void *a, int n, float *s);           \
    void kern_sc_gemv4_##t(const void *w, size_t ws, const void *a, int n, float *s);  \
    void kern_avx2_gemv4_##t(const void *w, size_t ws, const void *a, int n, float *s);
KERN_Q8_GEMM4_TYPES(KERN_Q8_GEMM4_DECL)
#undef KERN_Q8_GEMM4_DECL

#define KERN_Q8_DECL(t)                                                                 \
    void kern_sc_dotq_##t(const void *w, const void *a, size_t a_stride, int nt, int n, \
                          float *s);                                                    \
    void kern_avx2_dotq_##t(const void *w, const void *a, size_t a_stride, int nt, int n, \
                            float *s);
KERN_Q8_DOT_TYPES(KERN_Q8_DECL)
#undef KERN_Q8_DECL

/* aarch64 (kern_q8_neon.c): the table entries, dotprod or plain NEON by CPU */
void kern_neon_dotq_q4_0(const void *w, const void *a, size_t as, int nt, int n, float *s);
void kern_neon_dotq_q8_0(const void *w, const void *a, size_t as, int nt, int n, float *s);
void kern_neon_dotq_q4_k(const void *w, const void *a, size_t as, int nt, int n, float *s);
void kern_neon_dotq_q6_k(const void *w, const void *a, size_t as, int nt, int n, float *s);
void kern_neon_gemm4_q4_0(const void *w, const void *a, int n, float *s);
void kern_neon_gemm4_q8_0(const void *w, const void *a, int n, float *s);
void kern_neon_gemv4_q4_0(const void *w, size_t ws, const void *a, int n, float *s);
void kern_neon_gemv4_q8_0(const void *w, size_t ws, const void *a, int n, float *s);
/* ... and each build on its own (tests) */
#define KERN_NEON_INT_DECL(sfx)                                                                   \
    void kern_dotq_q4_0_##sfx(const void *w, const void *a, size_t as, int nt, int n, float *s); \
    void kern_dotq_q8_0_##sfx(const void *w, const void *a, size_t as, int nt, int n, float *s); \
    void kern_dotq_q4_k_##sfx(const void *w, const void *a, size_t as, int nt, int n, float *s); \
    void kern_dotq_q6_k_##sfx(const void *w, const void *a, size_t as, int nt, int n, float *s); \
    void kern_gemm4_q4_0_##sfx(const void *w, const void *a, int n, float *s);                   \
    void kern_gemm4_q8_0_##sfx(const void *w, const void *a, int n, float *s);                   \
    void kern_gemv4_q4_0_##sfx(const void *w, size_t ws, const void *a, int n, float *s);       \
    void kern_gemv4_q8_0_##sfx(const void *w, size_t ws, const void *a, int n, float *s);
KERN_NEON_INT_DECL(neon)
KERN_NEON_INT_DECL(dotprod)
#undef KERN_NEON_INT_DECL

/* ---- driver ------------------------------------------------------------------- */

/* matmul with activations converted to ty's vec_dot_type (E->act_quant == 1
 * and ty->vec_dot_type != CF_F32).  Types with an integer dot run it; F16 and
 * BF16 round x to their format and run kern_matmul_f32act on the result
 * (BF16 on AVX512_BF16: kern_half.h, the same bits). */
void kern_q8_matmul(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                    int n_out, int n_in, int n_tok);

#endif
