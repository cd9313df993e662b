/*
 * kern_r8.h — internal to the kernels: the row-interleaved types CF_Q4_0_R8 /
 * CF_Q8_0_R8 (layout: kern.h "row-interleaved repacked types").
 *
 * Implementations ("impls") of the leaves, picked per call from the kern ISA:
 *   KERN_R8_SCALAR  portable C (kern_r8.c), the reference;
 *   KERN_R8_AVX2    AVX2+FMA+F16C, vpmaddubsw + vpmaddwd (kern_r8_avx2.c);
 *   KERN_R8_VNNI    AVX-512 F/BW/VL/VNNI, vpdpbusd (kern_r8_vnni.c): the
 *                   one-group leaves on ymm registers (32 of them), the
 *                   gemm2 leaves two row groups in the 16 lanes of a zmm.
 * KERN_ISA_SCALAR runs KERN_R8_SCALAR; KERN_ISA_AVX2 runs the best impl the
 * CPU has (CPUID once), unless kern_r8_force_impl() chose one (tests,
 * benchmarks).
 *
 * Integer path (act_quant = 1).  Activations are quantized per token to ggml
 * Q8_0 with the ISA's quantizer (kern_q8.h, the bytes llama.cpp's x86 build
 * writes) and packed 4 tokens per kern_block_q8x4 (f32 d, Σq).  A leaf takes
 * one row group and up to KERN_R8_NT tokens and forms per block and row
 *   sumi = Σ_j u_j·a_j - o·Σ_j a_j       (u = code + o >= 0: Q4_0 o = 8; the
 *                                         VNNI Q8_0 leaf uses u = q + 128)
 *   y = fma((float)sumi, d_w · d_a, y)   (fused: every impl, the scalar
 *                                         reference included, so all give its bits)
 * which is ggml's vec_dot_q4_0_q8_0 / q8_0_q8_0 (the float sum order differs).
 */
#ifndef CINFER_KERN_R8_H
#define CINFER_KERN_R8_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kern.h"
#include "kern_q8.h"

/* KERN_R8_NEON / KERN_R8_DOTPROD (aarch64): the integer gemm of kern_neon_int.h
 * without / with sdot; their f32-activation leaves are the scalar ones. */
enum { KERN_R8_SCALAR = 0, KERN_R8_AVX2 = 1, KERN_R8_VNNI = 2, KERN_R8_NEON = 3, KERN_R8_DOTPROD = 4,
       KERN_R8_IMPL_COUNT = 5 };

/* Tokens one gemm / gemm2 leaf call takes at most (two kern_block_q8x4 quads). */
#define KERN_R8_NT 8

/* 1 when this CPU runs impl. */
int kern_r8_impl_available(int impl);
/* "scalar", "avx2", "vnni", "neon", "dotprod"; "unknown". */
const char *kern_r8_impl_name(int impl);
/* Pin the impl KERN_ISA_AVX2 calls use (-1: best available, the default).
 * Returns 0, or -1 when impl is unavailable (nothing changes).  Not
 * thread-safe against running matmuls: set it between calls. */
int kern_r8_force_impl(int impl);
/* The impl a call with kern ISA isa runs. */
int kern_r8_impl_for_isa(int isa);

/* Bytes per 32-column block of a group (144 / 272); 0 for other types. */
int kern_r8_block_bytes(int type);

/* y (n_tok, n_out) = x (n_tok, n_in) · Wᵀ for an R8 matrix w (n_out % 8 == 0,
 * n_in % 32 == 0; otherwise y = NaN).  E->act_quant picks the integer path
 * (1) or f32 activations (0).  Threads over row groups through E->pool. */
void kern_r8_matmul(int isa, cf_env *E, float *y, const float *x, const void *w, int type,
                    int n_out, int n_in, int n_tok);
/* The same with an explicit impl (tests; impl must be available). */
void kern_r8_matmul_impl(int impl, cf_env *E, float *y, const float *x, const void *w, int type,
                         int n_out, int n_in, int n_tok);

/* f32-activation helpers for kern.c's kern_matmul_f32act (isa's impl):
 * deq_rows: rows r0..r0+nr-1 (r0, nr multiples of 8), columns k0..k0+kc-1
 * (multiples of 32) of the R8 matrix w (rows of n_in) as f32 into
 * dst[r * ld + k] (the mat-mat tile). */
void kern_r8_deq_rows(int isa, int type, const void *w, int n_in, int r0, int nr, int k0, int kc,
                      float *dst, size_t ld);
/* Row `row` of the R8 matrix w (rows of n_in, n_in % 32 == 0) as f32 into
 * dst[0..n_in): d * (code - 8) / d * q, the native Q4_0 / Q8_0 values
 * (get_rows of tied embeddings). */
void kern_r8_deq_row(int type, const void *w, int n_in, int row, float *dst);
/* The mat-vec slice of the row group holding rows r0..r0+7: y[r] (=, or +=
 * when accumulate) Σ_k w[r0 + r][k0 + k] x[k], k < kc, computed exactly as
 * isa's tile_mm computes it on the dequantized rows (the SIMD slot on
 * x86-64: the AVX2 mv8 leaf whatever impl is pinned; scalar: sequential).
 * Returns 0, or -1 with y untouched where no leaf equals isa's tile_mm (the
 * NEON slot): the caller then runs tile_mm on kern_r8_deq_rows' tile. */
int kern_r8_mv(int isa, int type, const void *w, int n_in, int r0, int k0, int kc, const float *x,
               float *y, int accumulate);

/* ---- leaves ---------------------------------------------------------------
 * gemm: one row group wg (nb blocks) against nt tokens (1..KERN_R8_NT) whose
 * Q8_0 rows are packed as kern_block_q8x4: quad q (tokens 4q..4q+3) at
 * a + q * a_quad_stride blocks; tokens >= nt of the last quad may be zero
 * rows and are not stored.  y[t * ldy + r] = result for row r, token t.
 * gemm2: the same for two adjacent row groups at once (wg and the next
 * group, wg + nb blocks: 16 rows, y[t * ldy + r] for r in 0..15), each
 * row's result the bits gemm gives it; NULL where an impl has none (the
 * driver then calls gemm per group).
 * mv8: kern_r8_mv for one row group's blocks [b0, b0 + nbk) (x: their
 * 32 * nbk floats).
 * dequant8: rows 0..7 of a group's blocks [b0, b0 + nbk) as f32 into
 * dst[r * ld + k]. */
typedef void (*kern_r8_gemm_fn)(const void *wg, const kern_block_q8x4 *a, size_t a_quad_stride,
                                int nb, int nt, float *y, size_t ldy);
typedef void (*kern_r8_mv8_fn)(const void *wg, int b0, int nbk, const float *x, float *y, int accumulate);
typedef void (*kern_r8_deq8_fn)(const void *wg, int b0, int nbk, float *dst, size_t ld);

typedef struct {
    kern_r8_gemm_fn gemm[2];  /* [0] Q4_0_R8, [1] Q8_0_R8 */
    kern_r8_gemm_fn gemm2[2]; /* or NULLs */
    kern_r8_mv8_fn mv8[2];
    kern_r8_deq8_fn deq8[2];
} kern_r8_leaves;

extern const kern_r8_leaves kern_r8_avx2_leaves;
/* kern_q8_neon.c, kern_q8_dotprod.c (kern_neon_int.h) */
void kern_r8_gemm_q4_neon(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y, size_t ldy);
void kern_r8_gemm_q8_neon(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y, size_t ldy);
void kern_r8_gemm_q4_dotprod(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y, size_t ldy);
void kern_r8_gemm_q8_dotprod(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y, size_t ldy);
extern const kern_r8_leaves kern_r8_vnni_leaves;

/* The leaves of implementation impl (KERN_R8_*; scalar for an unknown id). */
const kern_r8_leaves *kern_r8_leaves_for(int impl);

/* ---- takes: how the row-group drivers (kern_r8_mm.c, kern_rk_mm.c) share a call
 * Row groups go out in takes of `chunk` groups from a shared counter rather
 * than as one fixed range per thread: a thread the OS deschedules mid-call
 * then holds up one take, not 1/nth of the matrix, and the threads that run
 * take the rest.  Which thread computes a group changes nothing in its
 * result. */
typedef struct {
    atomic_long next; /* first row group no thread has taken yet */
    long chunk;       /* row groups per take */
    long n_groups;
} kern_r8_takes;

/* Before a call over n_groups row groups on a pool of n_threads: about 4
 * takes per thread, one take of everything for one thread; pairs != 0 makes
 * the takes even (n_threads > 1) so a two-group leaf's pairs stay pairs. */
static inline void kern_r8_takes_reset(kern_r8_takes *tk, long n_groups, int n_threads, int pairs) {
    long chunk = n_threads > 1 ? n_groups / (4L * n_threads) : n_groups;
    if (chunk < 1) chunk = 1;
    if (pairs && n_threads > 1) chunk = (chunk + 1) & ~1L;
    tk->chunk = chunk;
    tk->n_groups = n_groups;
    atomic_store_explicit(&tk->next, 0, memory_order_relaxed);
}

/* One worker's share: range(job, g0, g1) for each take [g0, g1) it gets
 * until no group is left. */
static inline void kern_r8_takes_run(kern_r8_takes *tk, void (*range)(const void *job, long g0, long g1),
                                     const void *job) {
    for (;;) {
        const long g0 = atomic_fetch_add_explicit(&tk->next, tk->chunk, memory_order_relaxed);
        if (g0 >= tk->n_groups) return;
        range(job, g0, g0 + tk->chunk < tk->n_groups ? g0 + tk->chunk : tk->n_groups);
    }
}

#endif
