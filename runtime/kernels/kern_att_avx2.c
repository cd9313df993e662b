/*
 * kern_att_avx2.c — AVX2 + FMA leaves of one attention head (kern.c
 * att_block) for head_dim % 8 == 0; built with the _avx2 flags and called
 * only when the kernel ISA is KERN_ISA_AVX2.
 *
 * scores: 8 keys at a time, each key's dot accumulated in its own register
 * over the head dimension, the 8 sums reduced together (hadd tree) so the
 * horizontal reduction costs ~1 op per key instead of ~5.
 * wsum: the output row is kept in registers (64 dims per pass) across all
 * keys; per key and dimension it is o = fma(p, v, o) in key order, the same
 * arithmetic as the per-key axpy it replaces.
 * K and V rows are f32, or IEEE half (an F16 cache read in place; F16C's
 * conversion is exact, so the sums are those of the rows converted first).
 */
#include <immintrin.h>
#include <math.h>

#include "kern.h"
#include "kern_x86_simd.h"

static inline __m256 reduce8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                             __m256 a6, __m256 a7) {
    const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
    return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 values of row data at element i: f32, or halves converted */
static inline __attribute__((always_inline)) __m256 ld8(const void *p, size_t i, int f16) {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)))
               : _mm256_loadu_ps((const float *)p + i);
}

/* Keys (values) this many rows ahead are prefetched: a kv head's slice of a
 * cache row is a short run at a stride of the whole row, which the hardware
 * prefetchers do not follow (kern_att_avx512.c measured it). */
#define ATT_PF_ROWS 8

/* prefetch the slice of n values at element i of row data (f32 or halves) */
static inline __attribute__((always_inline)) void pf_row(const void *p, size_t i, int n, int f16) {
    prefetch_lines((const char *)p + i * (f16 ? 2 : 4), (size_t)n * (f16 ? 2 : 4), 0);
}

static inline __attribute__((always_inline)) float scores(const float *q, const void *k, size_t ks, int n, int hd,
                                                          float scale, float *s, const int f16) {
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    const __m256 vs = _mm256_set1_ps(scale);
    int p = 0;
    for (; p + 8 <= n; p += 8) {
        const size_t kp = (size_t)p * ks;
        if (p + ATT_PF_ROWS + 8 <= n)
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) pf_row(k, kp + (size_t)(ATT_PF_ROWS + j) * ks, hd, f16);
        __m256 a[8];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) {
            const __m256 qd = _mm256_loadu_ps(q + d);
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) a[j] = _mm256_fmadd_ps(qd, ld8(k, kp + (size_t)j * ks + d, f16), a[j]);
        }
        const __m256 r = _mm256_mul_ps(reduce8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]), vs);
        _mm256_storeu_ps(s + p, r);
        vmax = _mm256_max_ps(vmax, r);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float max = _mm_cvtss_f32(m4);
    for (; p < n; p++) {
        const size_t kp = (size_t)p * ks;
        __m256 a = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), ld8(k, kp + (size_t)d, f16), a);
        s[p] = hsum(a) * scale;
        if (s[p] > max) max = s[p];
    }
    return max;
}

float kern_avx2_att_scores(const float *q, const void *k, size_t ks, int n, int hd, float scale, float *s,
                           int f16) {
    return f16 ? scores(q, k, ks, n, hd, scale, s, 1) : scores(q, k, ks, n, hd, scale, s, 0);
}

static inline __attribute__((always_inline)) void wsum(float *o, const float *s, float inv, const void *v,
                                                       size_t vs, int n, int hd, int accumulate, const int f16) {
    for (int d0 = 0; d0 < hd; d0 += 64) {
        const int nv = (hd - d0 < 64 ? hd - d0 : 64) / 8;
        __m256 acc[8];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
        if (accumulate)
            for (int j = 0; j < nv; j++) acc[j] = _mm256_loadu_ps(o + d0 + 8 * j);
        if (nv == 8) {
            for (int p = 0; p < n; p++) {
                const __m256 w = _mm256_set1_ps(s[p] * inv);
                const size_t vp = (size_t)p * vs + d0;
                if (p + ATT_PF_ROWS < n) pf_row(v, vp + (size_t)ATT_PF_ROWS * vs, 64, f16);
                _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(w, ld8(v, vp + 8 * (size_t)j, f16), acc[j]);
            }
        } else {
            for (int p = 0; p < n; p++) {
                const __m256 w = _mm256_set1_ps(s[p] * inv);
                const size_t vp = (size_t)p * vs + d0;
                if (p + ATT_PF_ROWS < n) pf_row(v, vp + (size_t)ATT_PF_ROWS * vs, 8 * nv, f16);
                _Pragma("GCC unroll 8") for (int j = 0; j < nv; j++) acc[j] = _mm256_fmadd_ps(w, ld8(v, vp + 8 * (size_t)j, f16), acc[j]);
            }
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < nv; j++) _mm256_storeu_ps(o + d0 + 8 * j, acc[j]);
    }
}

void kern_avx2_att_wsum(float *o, const float *s, float inv, const void *v, size_t vs, int n, int hd, int accumulate,
                        int f16) {
    if (f16) wsum(o, s, inv, v, vs, n, hd, accumulate, 1);
    else wsum(o, s, inv, v, vs, n, hd, accumulate, 0);
}
