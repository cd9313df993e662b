/*
 * kern_att_avx512.c — AVX-512F leaves of attention for 4 query heads that
 * share one kv head (GQA), head_dim % 16 == 0; built with -mavx512f (+ the
 * AVX2 flags; Makefile rule for *_vnni/_avx512 files) and called from kern.c
 * att_block only when att_quads() allows it: CPUID reports AVX-512
 * F/BW/VL/VNNI with ZMM state enabled (kern_r8_impl_available(KERN_R8_VNNI)).
 *
 * Each K and V row is loaded once for the 4 heads instead of once per head:
 *  - scores: 4 heads x 4 keys = 16 zmm accumulators over the head dimension,
 *    reduced per head to 4 scores (add halves, hadd tree), and each head's max;
 *  - wsum: 4 heads x 64 dims = 16 zmm accumulators over the keys, o_h =
 *    fma(p_h, v, o_h) in key order (the same arithmetic per element as the
 *    per-key axpy of the one-head path, p_h = s_h[p] * inv_h in float).
 * K and V rows are f32, or IEEE half (an F16 cache read in place: vcvtph2ps
 * is exact, so the sums are the ones of the same rows converted to f32
 * first).
 */
#include <immintrin.h>
#include <math.h>

#include "kern.h"
#include "kern_x86_simd.h"

static inline __m256 half_sum(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* the 4 horizontal sums of a0..a3 */
static inline __m128 reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(half_sum(a0), half_sum(a1)),
                                    _mm256_hadd_ps(half_sum(a2), half_sum(a3)));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* 16 values of row data at element i: f32, or halves converted */
static inline __attribute__((always_inline)) __m512 ld16(const void *p, size_t i, int f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)))
               : _mm512_loadu_ps((const float *)p + i);
}

/* Keys (values) this many rows ahead are prefetched: a kv head's slice of a
 * cache row is a short run at a stride of the whole row, which the hardware
 * prefetchers do not follow (measured: 1 query token at depth 16384, 4 kv
 * heads of 64, 1 thread: ~75 ns a key without, one DRAM latency). */
#define ATT_PF_ROWS 8

/* prefetch the slice of n values at element i of row data (f32 or halves) */
static inline __attribute__((always_inline)) void pf_row(const void *p, size_t i, int n, int f16) {
    prefetch_lines((const char *)p + i * (f16 ? 2 : 4), (size_t)n * (f16 ? 2 : 4), 0);
}

static inline __attribute__((always_inline)) void scores4(const float *q, size_t qs, const void *k, size_t ks,
                                                          int n, int hd, float scale, float *s, size_t ss,
                                                          float *max, const int f16) {
    const __m128 vs = _mm_set1_ps(scale);
    __m128 vmax[4];
    for (int h = 0; h < 4; h++) vmax[h] = _mm_set1_ps(-INFINITY);
    int p = 0;
    for (; p + 4 <= n; p += 4) {
        const size_t kp = (size_t)p * ks;
        if (p + ATT_PF_ROWS + 4 <= n)
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) pf_row(k, kp + (size_t)(ATT_PF_ROWS + j) * ks, hd, f16);
        __m512 a[4][4];
        _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++)
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) a[h][j] = _mm512_setzero_ps();
        for (int d = 0; d < hd; d += 16) {
            __m512 kv[4];
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) kv[j] = ld16(k, kp + (size_t)j * ks + d, f16);
            _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) {
                const __m512 qv = _mm512_loadu_ps(q + (size_t)h * qs + d);
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) a[h][j] = _mm512_fmadd_ps(qv, kv[j], a[h][j]);
            }
        }
        _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) {
            const __m128 r = _mm_mul_ps(reduce4(a[h][0], a[h][1], a[h][2], a[h][3]), vs);
            _mm_storeu_ps(s + (size_t)h * ss + p, r);
            vmax[h] = _mm_max_ps(vmax[h], r);
        }
    }
    for (int h = 0; h < 4; h++) {
        __m128 m = _mm_max_ps(vmax[h], _mm_movehl_ps(vmax[h], vmax[h]));
        max[h] = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    }
    for (; p < n; p++)
        for (int h = 0; h < 4; h++) {
            __m512 a = _mm512_setzero_ps();
            for (int d = 0; d < hd; d += 16)
                a = _mm512_fmadd_ps(_mm512_loadu_ps(q + (size_t)h * qs + d), ld16(k, (size_t)p * ks + d, f16), a);
            s[(size_t)h * ss + p] = _mm512_reduce_add_ps(a) * scale;
            if (s[(size_t)h * ss + p] > max[h]) max[h] = s[(size_t)h * ss + p];
        }
}

void kern_avx512_att_scores4(const float *q, size_t qs, const void *k, size_t ks, int n, int hd,
                             float scale, float *s, size_t ss, float *max, int f16) {
    if (f16) scores4(q, qs, k, ks, n, hd, scale, s, ss, max, 1);
    else scores4(q, qs, k, ks, n, hd, scale, s, ss, max, 0);
}

static inline __attribute__((always_inline)) void wsum4(float *o, size_t os, const float *s, size_t ss,
                                                        const float *inv, const void *v, size_t vs, int n,
                                                        int hd, int accumulate, const int f16) {
    for (int d0 = 0; d0 < hd; d0 += 64) {
        const int nv = (hd - d0 < 64 ? hd - d0 : 64) / 16;
        __m512 acc[4][4];
        _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++)
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) acc[h][j] = _mm512_setzero_ps();
        if (accumulate)
            for (int h = 0; h < 4; h++)
                for (int j = 0; j < nv; j++) acc[h][j] = _mm512_loadu_ps(o + (size_t)h * os + d0 + 16 * j);
        if (nv == 4) {
            for (int p = 0; p < n; p++) {
                const size_t vp = (size_t)p * vs + d0;
                if (p + ATT_PF_ROWS < n) pf_row(v, vp + (size_t)ATT_PF_ROWS * vs, 64, f16);
                __m512 vv[4];
                _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) vv[j] = ld16(v, vp + 16 * (size_t)j, f16);
                _Pragma("GCC unroll 4") for (int h = 0; h < 4; h++) {
                    const __m512 w = _mm512_set1_ps(s[(size_t)h * ss + p] * inv[h]);
                    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) acc[h][j] = _mm512_fmadd_ps(w, vv[j], acc[h][j]);
                }
            }
        } else {
            for (int p = 0; p < n; p++) {
                const size_t vp = (size_t)p * vs + d0;
                if (p + ATT_PF_ROWS < n) pf_row(v, vp + (size_t)ATT_PF_ROWS * vs, 16 * nv, f16);
                for (int h = 0; h < 4; h++) {
                    const __m512 w = _mm512_set1_ps(s[(size_t)h * ss + p] * inv[h]);
                    for (int j = 0; j < nv; j++) acc[h][j] = _mm512_fmadd_ps(w, ld16(v, vp + 16 * (size_t)j, f16), acc[h][j]);
                }
            }
        }
        for (int h = 0; h < 4; h++)
            for (int j = 0; j < nv; j++) _mm512_storeu_ps(o + (size_t)h * os + d0 + 16 * j, acc[h][j]);
    }
}

void kern_avx512_att_wsum4(float *o, size_t os, const float *s, size_t ss, const float *inv, const void *v,
                           size_t vs, int n, int hd, int accumulate, int f16) {
    if (f16) wsum4(o, os, s, ss, inv, v, vs, n, hd, accumulate, 1);
    else wsum4(o, os, s, ss, inv, v, vs, n, hd, accumulate, 0);
}
