/*
 * kern_att_avx2.c — AVX2 + FMA leaves of one attention head (kern.c
 * att_head) for head_dim % 8 == 0; built with the _avx2 flags and called
 * only when the kernel ISA is KERN_ISA_AVX2.
 *
 * scores: 8 keys at a time, each key's dot accumulated in its own register
 * over the head dimension, the 8 sums reduced together (hadd tree) so the
 * horizontal reduction costs ~1 op per key instead of ~5.
 * wsum: the output row is kept in registers (64 dims per pass) across all
 * keys; per key and dimension it is o = fma(p, v, o) in key order, the same
 * arithmetic as the per-key axpy it replaces.
 */
#include <immintrin.h>
#include <math.h>

#include "kern.h"

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

float kern_avx2_att_scores(const float *q, const float *k, size_t ks, int n, int hd, float scale,
                           float *s) {
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    const __m256 vs = _mm256_set1_ps(scale);
    int p = 0;
    for (; p + 8 <= n; p += 8) {
        const float *kp = k + (size_t)p * ks;
        __m256 a[8];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) a[j] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) {
            const __m256 qd = _mm256_loadu_ps(q + d);
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) a[j] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kp + (size_t)j * ks + d), a[j]);
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
        const float *kp = k + (size_t)p * ks;
        __m256 a = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kp + d), a);
        s[p] = hsum(a) * scale;
        if (s[p] > max) max = s[p];
    }
    return max;
}

void kern_avx2_att_wsum(float *o, const float *s, float inv, const float *v, size_t vs, int n, int hd,
                        int accumulate) {
    for (int d0 = 0; d0 < hd; d0 += 64) {
        const int nv = (hd - d0 < 64 ? hd - d0 : 64) / 8;
        __m256 acc[8];
        _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
        if (accumulate)
            for (int j = 0; j < nv; j++) acc[j] = _mm256_loadu_ps(o + d0 + 8 * j);
        if (nv == 8) {
            for (int p = 0; p < n; p++) {
                const __m256 w = _mm256_set1_ps(s[p] * inv);
                const float *vp = v + (size_t)p * vs + d0;
                _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) acc[j] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vp + 8 * j), acc[j]);
            }
        } else {
            for (int p = 0; p < n; p++) {
                const __m256 w = _mm256_set1_ps(s[p] * inv);
                const float *vp = v + (size_t)p * vs + d0;
                _Pragma("GCC unroll 8") for (int j = 0; j < nv; j++) acc[j] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vp + 8 * j), acc[j]);
            }
        }
        _Pragma("GCC unroll 8") for (int j = 0; j < nv; j++) _mm256_storeu_ps(o + d0 + 8 * j, acc[j]);
    }
}
