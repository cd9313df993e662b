/*
 * kern_half_avx512bf16.c — the BF16 leaf of kern_half.h: AVX512_BF16
 * (vdpbf16ps: 32 bf16 products per instruction, into 16 f32 lanes).  Built
 * with the AVX-512 flags plus -mavx512bf16 (Makefile "_avx512bf16");
 * nothing here runs unless kern_half_available said yes.
 *
 * Weights and activations are both bf16 pairs in memory order, which is
 * the operand layout vdpbf16ps takes: no conversion in the loop.  Block: R
 * rows x T tokens (R, T <= 4) of dot chains over one slice, one
 * half_reduce16; the mat-mat takes 4 x 4 blocks (16 vdpbf16ps per 8 loads),
 * the mat-vec (nt == 1) 4 rows at a time.  Missing rows or tokens of a
 * 4 x 4 block re-read the last valid one and are not stored.
 */
#include "kern_half_simd.h"

/* 32 bf16 of a step, the first n valid (the others 0) */
HALF_AI __m512bh ldb(const uint16_t *p, int n) {
    const __m512i v = n >= 32 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(half_mask32(n), p);
    return (__m512bh)v;
}

/* One step of 32 elements at k, the first n valid. */
HALF_AI void step(const int R, const int T, const uint16_t *const wr[4], const uint16_t *const xt[4], int k, int n,
                  __m512 acc[16]) {
    __m512bh xv[4], wv[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) xv[t] = ldb(xt[t] + k, n);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) wv[r] = ldb(wr[r] + k, n);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[4 * r + t] = _mm512_dpbf16_ps(acc[4 * r + t], wv[r], xv[t]);
}

HALF_AI void blk(const int R, const int T, const uint16_t *const wr[4], const uint16_t *const xt[4], int kc,
                 float *y, size_t ys, size_t yr, int accumulate) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    int k = 0;
    for (; k + 32 <= kc; k += 32) step(R, T, wr, xt, k, 32, acc);
    if (k < kc) step(R, T, wr, xt, k, kc - k, acc);
    half_store(R, T, acc, y, ys, yr, accumulate);
}

void kern_avx512bf16_mm(const uint16_t *w, size_t ws, int nr, const uint16_t *x, size_t xs, int nt,
                        int kc, float *y, size_t ys, size_t yr, int accumulate) {
    if (nt == 1) { /* mat-vec: 4 rows per block */
        const uint16_t *xt[4] = {x, x, x, x};
        int r = 0;
        for (; r + 4 <= nr; r += 4) {
            const uint16_t *wr[4] = {w + (size_t)r * ws, w + (size_t)(r + 1) * ws, w + (size_t)(r + 2) * ws,
                                     w + (size_t)(r + 3) * ws};
            blk(4, 1, wr, xt, kc, y + (size_t)r * yr, 0, yr, accumulate);
        }
        for (; r < nr; r++) {
            const uint16_t *wr[4] = {w + (size_t)r * ws};
            blk(1, 1, wr, xt, kc, y + (size_t)r * yr, 0, yr, accumulate);
        }
        return;
    }
    for (int t0 = 0; t0 < nt; t0 += 4) {
        const int tn = nt - t0 < 4 ? nt - t0 : 4;
        const uint16_t *xt[4];
        for (int t = 0; t < 4; t++) xt[t] = x + (size_t)(t0 + (t < tn ? t : tn - 1)) * xs;
        for (int r0 = 0; r0 < nr; r0 += 4) {
            const int rn = nr - r0 < 4 ? nr - r0 : 4;
            const uint16_t *wr[4];
            for (int r = 0; r < 4; r++) wr[r] = w + (size_t)(r0 + (r < rn ? r : rn - 1)) * ws;
            float *yb = y + (size_t)t0 * ys + (size_t)r0 * yr;
            if (rn == 4 && tn == 4) {
                blk(4, 4, wr, xt, kc, yb, ys, yr, accumulate);
                continue;
            }
            float tmp[16];
            blk(4, 4, wr, xt, kc, tmp, 4, 1, 0);
            for (int t = 0; t < tn; t++)
                for (int r = 0; r < rn; r++) {
                    float *p = yb + (size_t)t * ys + (size_t)r * yr;
                    *p = accumulate ? *p + tmp[4 * t + r] : tmp[4 * t + r];
                }
        }
    }
}
