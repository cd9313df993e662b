/*
 * kern_half_avx512.c — the F16 leaves of kern_half.h: F16C + AVX-512F.
 * Built with the AVX-512 flags (Makefile "_avx512"); nothing here runs
 * unless kern_half_available said yes.
 *
 * Block: R rows x T tokens (R, T <= 4) of 16-lane FMA chains, one slice,
 * then one half_reduce16 for all of them.  The mat-mat takes 4 x 4 blocks
 * from an f32 tile (the halves converted once per tile and slice, so the
 * inner loop is loads and FMAs: 16 FMAs per 8 loads); the mat-vec converts
 * each weight vector in registers (vcvtph2ps), 4 rows at a time.  Missing
 * rows or tokens of a 4 x 4 block re-read the last valid one and are not
 * stored, so no sum depends on its neighbours.
 */
#include "kern_half_simd.h"

/* lane i of the step at k: element k + i; the first `n` lanes valid (the others 0) */
HALF_AI __m512 ldf(const float *p, int n) {
    return n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps((__mmask16)half_mask32(n), p);
}
HALF_AI __m512 ldh(const uint16_t *p, int n) {
    return _mm512_cvtph_ps(n >= 16 ? _mm256_loadu_si256((const __m256i *)p)
                                   : _mm256_maskz_loadu_epi16((__mmask16)half_mask32(n), p));
}

/* One step of 16 elements at k, the first n valid. */
HALF_AI void step(const int R, const int T, const int W_HALF, const void *const wr[4], const float *const xt[4],
                  int k, int n, __m512 acc[16]) {
    __m512 xv[4], wv[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) xv[t] = ldf(xt[t] + k, n);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        wv[r] = W_HALF ? ldh((const uint16_t *)wr[r] + k, n) : ldf((const float *)wr[r] + k, n);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[4 * r + t] = _mm512_fmadd_ps(wv[r], xv[t], acc[4 * r + t]);
}

/* W_HALF 0: w rows are floats; 1: halves.  wr[r], xt[t]: row / token pointers. */
HALF_AI void blk(const int R, const int T, const int W_HALF, const void *const wr[4], const float *const xt[4],
                 int kc, float *y, size_t ys, size_t yr, int accumulate) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 16 <= kc; k += 16) step(R, T, W_HALF, wr, xt, k, 16, acc);
    if (k < kc) step(R, T, W_HALF, wr, xt, k, kc - k, acc);
    half_store(R, T, acc, y, ys, yr, accumulate);
}

static void blk_4x4(const void *const wr[4], const float *const xt[4], int kc, float *y, size_t ys, size_t yr,
                    int nr, int nt, int accumulate) {
    if (nr == 4 && nt == 4) {
        blk(4, 4, 0, wr, xt, kc, y, ys, yr, accumulate);
        return;
    }
    float tmp[16];
    blk(4, 4, 0, wr, xt, kc, tmp, 4, 1, 0);
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) {
            float *p = y + (size_t)t * ys + (size_t)r * yr;
            *p = accumulate ? *p + tmp[4 * t + r] : tmp[4 * t + r];
        }
}

void kern_avx512_f16_mm(const float *w, size_t ws, int nr, const float *x, size_t xs, int nt, int kc,
                        float *y, size_t ys, size_t yr, int accumulate) {
    for (int t0 = 0; t0 < nt; t0 += 4) {
        const int tn = nt - t0 < 4 ? nt - t0 : 4;
        const float *xt[4];
        for (int t = 0; t < 4; t++) xt[t] = x + (size_t)(t0 + (t < tn ? t : tn - 1)) * xs;
        for (int r0 = 0; r0 < nr; r0 += 4) {
            const int rn = nr - r0 < 4 ? nr - r0 : 4;
            const void *wr[4];
            for (int r = 0; r < 4; r++) wr[r] = w + (size_t)(r0 + (r < rn ? r : rn - 1)) * ws;
            blk_4x4(wr, xt, kc, y + (size_t)t0 * ys + (size_t)r0 * yr, ys, yr, rn, tn, accumulate);
        }
    }
}

void kern_avx512_f16_mv(const uint16_t *w, size_t ws, int nr, const float *x, int kc, float *y,
                        size_t yr, int accumulate) {
    const float *xt[4] = {x, x, x, x};
    int r = 0;
    for (; r + 4 <= nr; r += 4) {
        const void *wr[4] = {w + (size_t)r * ws, w + (size_t)(r + 1) * ws, w + (size_t)(r + 2) * ws,
                             w + (size_t)(r + 3) * ws};
        blk(4, 1, 1, wr, xt, kc, y + (size_t)r * yr, 0, yr, accumulate);
    }
    for (; r < nr; r++) {
        const void *wr[4] = {w + (size_t)r * ws};
        blk(1, 1, 1, wr, xt, kc, y + (size_t)r * yr, 0, yr, accumulate);
    }
}
