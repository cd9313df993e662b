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

#include "base/pool.h"

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
/* cf_kernels.matmul_n for R8 weights (every type[i] an R8 type, n_out[i] %
 * 8 == 0; otherwise every y[i] = NaN): the activations converted for all
 * the weights, one pool run over their row groups; each y[i] has the bits
 * kern_r8_matmul gives it alone.  _impl: an explicit impl (tests). */
void kern_r8_matmul_n(int isa, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                      const int *type, const int *n_out, int n_in, int n_tok);
void kern_r8_matmul_n_impl(int impl, cf_env *E, int n, float *const *y, const float *x, const void *const *w,
                           const int *type, const int *n_out, int n_in, int n_tok);

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
 * The row groups are cut into one contiguous segment per thread.  A thread
 * takes `chunk` groups at a time from the front of its own segment, so its
 * takes are adjacent and its weights one forward stream (the one-token
 * leaves prefetch KERN_DECODE_PF_BYTES ahead, across take boundaries); when
 * its segment is empty it takes chunks from the back of the others'.  So a
 * thread the OS deschedules mid-call holds up one chunk, not 1/nth of the
 * matrix.  (One shared counter handing out the next chunk to whichever
 * thread asks, as before, gave each thread every other chunk: a prefetch
 * stream restarted and overshot into the other thread's chunk at every take.
 * bench_decode -t 2, both schemes rotated in one process, medians of 9-15
 * rounds, matmul GB/s (fraction of the read loop): 336m Q4_0 21.4 (0.76) ->
 * 24.0 (0.83), Q8_0 23.4 -> 25.4, Q4_K_M 22.5 -> 25.0, 1b Q4_0 27.5 -> 29.1,
 * 7b Q4_K_M 35.4 -> 38.2.)  Which thread computes a group changes nothing in
 * its result. */
#define KERN_TAKES_SEGS 16 /* segments at most: threads beyond share them */
typedef struct {
    struct {
        _Alignas(64) atomic_uint_least64_t fb; /* front << 32 | back: groups [front, back) not taken */
    } seg[KERN_TAKES_SEGS];
    long chunk; /* row groups per take */
    int n_seg;
} kern_r8_takes;

/* Before a call over n_groups (< 2^31) row groups on a pool of n_threads:
 * one segment per thread (at most KERN_TAKES_SEGS), about 16 takes in
 * each; pairs != 0 makes the takes and the segment bounds even so a
 * two-group leaf's pairs stay pairs. */
static inline void kern_r8_takes_reset(kern_r8_takes *tk, long n_groups, int n_threads, int pairs) {
    const int ns = n_threads < 1 ? 1 : n_threads > KERN_TAKES_SEGS ? KERN_TAKES_SEGS : n_threads;
    long chunk = ns > 1 ? n_groups / (16L * ns) : n_groups;
    if (chunk < 1) chunk = 1;
    if (pairs && ns > 1) chunk = (chunk + 1) & ~1L;
    tk->chunk = chunk;
    tk->n_seg = ns;
    for (int s = 0; s < ns; s++) {
        long lo = n_groups * s / ns, hi = n_groups * (s + 1) / ns;
        if (pairs && ns > 1) {
            lo = s ? (lo + 1) & ~1L : 0;
            hi = s + 1 < ns ? (hi + 1) & ~1L : n_groups;
            if (hi > n_groups) hi = n_groups;
            if (lo > hi) lo = hi;
        }
        atomic_store_explicit(&tk->seg[s].fb, (uint_least64_t)lo << 32 | (uint_least64_t)hi, memory_order_relaxed);
    }
}

/* Take up to tk->chunk groups from the front (back == 0) or the back of
 * segment s into [*g0, *g1); 0 when it is empty. */
static inline int kern_r8_takes_take(kern_r8_takes *tk, int s, int back, long *g0, long *g1) {
    uint_least64_t v = atomic_load_explicit(&tk->seg[s].fb, memory_order_relaxed);
    for (;;) {
        const long f = (long)(v >> 32), b = (long)(v & 0xffffffffu);
        if (f >= b) return 0;
        const long c = b - f < tk->chunk ? b - f : tk->chunk;
        const uint_least64_t nv = back ? (uint_least64_t)f << 32 | (uint_least64_t)(b - c)
                                       : (uint_least64_t)(f + c) << 32 | (uint_least64_t)b;
        if (atomic_compare_exchange_weak_explicit(&tk->seg[s].fb, &v, nv, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *g0 = back ? b - c : f;
            *g1 = back ? b : f + c;
            return 1;
        }
    }
}

/* 1 when every slot of pool P but slot 0 has bytes of scratch after off
 * (the drivers' decode copies of the converted activations, "own_act" in
 * kern_r8_mm.c); 0 for a pool of one thread or none. */
static inline int kern_r8_slots_fit(pool *P, size_t off, size_t bytes) {
    const int n = pool_n_threads(P);
    for (int t = 1; t < n; t++) {
        size_t have = 0;
        if (!pool_scratch(P, t, &have) || have < off + bytes) return 0;
    }
    return n > 1;
}

/* Worker ith's share: range(job, g0, g1) for each take [g0, g1) it gets —
 * its own segment front to back, then the others' from their backs — until
 * no group is left. */
static inline void kern_r8_takes_run(kern_r8_takes *tk, int ith, void (*range)(void *job, long g0, long g1),
                                     void *job) {
    long g0, g1;
    const int own = ith % tk->n_seg;
    while (kern_r8_takes_take(tk, own, 0, &g0, &g1)) range(job, g0, g1);
    for (int k = 1; k < tk->n_seg; k++)
        while (kern_r8_takes_take(tk, (own + k) % tk->n_seg, 1, &g0, &g1)) range(job, g0, g1);
}

#endif
