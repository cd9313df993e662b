/*
 * kern_half_simd.h — what the AVX-512 leaves of kern_half.h share: the
 * 16-lane reduction tree and the stores.  Included only by files built with
 * AVX-512 flags (kern_half_avx512.c, kern_half_avx512bf16.c).
 */
#ifndef CINFER_KERN_HALF_SIMD_H
#define CINFER_KERN_HALF_SIMD_H

#include <immintrin.h>

#include "kern_half.h"

#define HALF_AI static inline __attribute__((always_inline))

/* The sums of 16 accumulators at once, each by kern_half.h's tree (lane i +=
 * lane i + h, h = 8, 4, 2, 1): the transposes only move lanes, every add is
 * one of an accumulator's own tree, so which accumulators share a call never
 * changes a sum.  Accumulator j = 4m + q ends in lane 4q + m. */
HALF_AI __m512 half_reduce16(const __m512 a[16]) {
    __m512 b[8], c[4], d[2];
#pragma GCC unroll 8
    for (int m = 0; m < 8; m++) /* lane i of each: i + (i + 8) */
        b[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) /* quarter q = accumulator 4m + q: i + (i + 4) */
        c[m] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * m], b[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(b[2 * m], b[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) { /* i + (i + 2) */
        const __m512d lo = _mm512_castps_pd(c[2 * h]), hi = _mm512_castps_pd(c[2 * h + 1]);
        d[h] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi)));
    }
    return _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)), /* i + (i + 1) */
                         _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Accumulator 4r + t holds (row r, token t), r, t < 4: store the R x T sums
 * to y[t * ys + r * yr] (= or +=). */
HALF_AI void half_store(const int R, const int T, const __m512 acc[16], float *y, size_t ys, size_t yr,
                        int accumulate) {
    float s[16];
    _mm512_storeu_ps(s, half_reduce16(acc));
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            const float v = s[4 * t + r]; /* accumulator 4r + t is in lane 4t + r */
            float *p = y + (size_t)t * ys + (size_t)r * yr;
            *p = accumulate ? *p + v : v;
        }
}

/* Mask of the first n lanes (n <= 32) of a step. */
HALF_AI __mmask32 half_mask32(int n) { return n >= 32 ? 0xffffffffu : (1u << n) - 1; }

#endif
