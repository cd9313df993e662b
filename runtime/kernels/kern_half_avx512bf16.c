/*
 * kern_half_avx512bf16.c — the leaves of kern_half.h: AVX512_BF16
 * (vdpbf16ps) computing the f32 kernels' 8-lane chains.  Built with the
 * AVX-512 flags plus -mavx512bf16 (Makefile "_avx512bf16"); nothing here
 * runs unless kern_half_available said yes.
 *
 * A zmm accumulator holds two rows' chains (lanes 0..7 the first row's,
 * 8..15 the second's); one vdpbf16ps adds a 16-element block of each row:
 * per lane the pair (k + L, k + L + 8), the odd slot (k + L) first, which is
 * two steps of chain L in order.  The weights of a row pair come in that
 * order from one vpermt2w per block (in registers for the mat-vec, once
 * per tile for the mat-mat); the activations are already in it
 * (kern_half_pack_act), one 256-bit block broadcast to both halves.
 */
#include <immintrin.h>

#include "kern_half.h"

#define AI static inline __attribute__((always_inline))

static int act_pos(int k) { return (k & ~15) + ((k & 15) < 8 ? 2 * (k & 7) + 1 : 2 * (k & 7)); }

static float bf(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

/* vpermt2w indices: block 0 / 1 of a 32-element step of rows A (0..31) and
 * B (32..63) into [A's block in pair order | B's block in pair order] */
AI __m512i perm_idx(int blk) {
    uint16_t ix[32];
    for (int L = 0; L < 8; L++) {
        ix[2 * L + 1] = (uint16_t)(16 * blk + L), ix[2 * L] = (uint16_t)(16 * blk + L + 8);
        ix[16 + 2 * L + 1] = (uint16_t)(32 + 16 * blk + L), ix[16 + 2 * L] = (uint16_t)(32 + 16 * blk + L + 8);
    }
    return _mm512_loadu_si512(ix);
}

AI __mmask32 mask32(int n) { return n >= 32 ? 0xffffffffu : n <= 0 ? 0 : (1u << n) - 1; }

/* kern_avx2.c's hsum on both halves of v: the first row's sum in *lo, the second's in *hi. */
AI void reduce2(__m512 v, float *lo, float *hi) {
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1))); /* l_i + l_{i+4} */
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));       /* a0 + a2, a1 + a3 */
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));       /* b0 + b1 */
    *lo = _mm512_cvtss_f32(v);
    *hi = _mm_cvtss_f32(_mm512_extractf32x4_ps(v, 2));
}

/* reduce2's adds for 16 accumulators at once (the shuffles only move lanes,
 * every add is one of an output's own tree): out[16h + 4q + i] is
 * accumulator 2(4h + i) + (q >> 1), half q & 1. */
AI void reduce16(const __m512 a[16], float out[32]) {
    __m512 b[8], c[4];
#pragma GCC unroll 8
    for (int m = 0; m < 8; m++) /* quarters: a[2m] lo, a[2m] hi, a[2m+1] lo, a[2m+1] hi; l_i + l_{i+4} */
        b[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 4
    for (int n = 0; n < 4; n++) { /* a0 + a2, a1 + a3 */
        const __m512d lo = _mm512_castps_pd(b[2 * n]), hi = _mm512_castps_pd(b[2 * n + 1]);
        c[n] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi)), _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi)));
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) /* b0 + b1 */
        _mm512_storeu_ps(out + 16 * h, _mm512_add_ps(_mm512_shuffle_ps(c[2 * h], c[2 * h + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                                     _mm512_shuffle_ps(c[2 * h], c[2 * h + 1], _MM_SHUFFLE(3, 1, 3, 1))));
}

/* s + the tail elements [kc8, kc) of one output, in order (the f32 kernels' scalar tail) */
AI float tail(float s, const uint16_t *w, const uint16_t *x, int kc8, int kc) {
    for (int k = kc8; k < kc; k++) s += bf(w[k]) * bf(x[act_pos(k)]);
    return s;
}

void kern_avx512bf16_pack(const uint16_t *w, size_t ws, int nr, int kc, uint16_t *tile) {
    const int kc8 = kc & ~7, nb = (kc8 + 15) / 16;
    const __m512i i0 = perm_idx(0), i1 = perm_idx(1);
    for (int p = 0; p < 8; p++) {
        const uint16_t *ra = w + (size_t)(2 * p) * ws, *rb = ra + ws;
        const int va = 2 * p < nr, vb = 2 * p + 1 < nr;
        uint16_t *t = tile + (size_t)p * nb * 32;
        for (int k = 0, b = 0; k < kc8; k += 32, b += 2) {
            const __mmask32 m = mask32(kc8 - k);
            const __m512i A = va ? _mm512_maskz_loadu_epi16(m, ra + k) : _mm512_setzero_si512();
            const __m512i B = vb ? _mm512_maskz_loadu_epi16(m, rb + k) : _mm512_setzero_si512();
            _mm512_storeu_si512(t + (size_t)b * 32, _mm512_permutex2var_epi16(A, i0, B));
            if (b + 1 < nb) _mm512_storeu_si512(t + (size_t)(b + 1) * 32, _mm512_permutex2var_epi16(A, i1, B));
        }
    }
}

/* 4 row pairs of the tile (from pair p0) x 4 tokens over the slice's blocks. */
AI void mm_blk(const uint16_t *tile, int nb, int p0, const uint16_t *const xt[4], __m512 acc[16]) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    const uint16_t *tp = tile + (size_t)p0 * nb * 32;
    for (int b = 0; b < nb; b++) {
        __m512bh wv[4];
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) wv[q] = (__m512bh)_mm512_loadu_si512(tp + ((size_t)q * nb + b) * 32);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const __m512bh xv = (__m512bh)_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xt[t] + 16 * b)));
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) acc[4 * q + t] = _mm512_dpbf16_ps(acc[4 * q + t], wv[q], xv);
        }
    }
}

void kern_avx512bf16_mm(const uint16_t *tile, const uint16_t *w, size_t ws, int nr, const uint16_t *x,
                        size_t xs, int nt, int kc, float *y, size_t ys, int accumulate) {
    const int kc8 = kc & ~7, nb = (kc8 + 15) / 16;
    for (int t0 = 0; t0 < nt; t0 += 4) {
        const int tn = nt - t0 < 4 ? nt - t0 : 4;
        const uint16_t *xt[4];
        for (int t = 0; t < 4; t++) xt[t] = x + (size_t)(t0 + (t < tn ? t : tn - 1)) * xs;
        for (int p0 = 0; 2 * p0 < nr; p0 += 4) {
            __m512 acc[16];
            float s[32];
            mm_blk(tile, nb, p0, xt, acc);
            reduce16(acc, s);
            for (int o = 0; o < 32; o++) {
                const int h = o >> 4, q4 = (o >> 2) & 3, i = o & 3;
                const int j = 2 * (4 * h + i) + (q4 >> 1); /* accumulator 4q + t */
                const int t = j & 3, r = 2 * (p0 + (j >> 2)) + (q4 & 1);
                if (t >= tn || r >= nr) continue;
                float v = s[o];
                if (kc8 < kc) v = tail(v, w + (size_t)r * ws, xt[t], kc8, kc);
                float *p = y + (size_t)(t0 + t) * ys + r;
                *p = accumulate ? *p + v : v;
            }
        }
    }
}

void kern_avx512bf16_mv(const uint16_t *w, size_t ws, int nr, const uint16_t *x, int kc, float *y,
                        size_t yr, int accumulate) {
    const int kc8 = kc & ~7;
    const __m512i i0 = perm_idx(0), i1 = perm_idx(1);
    for (int r0 = 0; r0 < nr; r0 += 4) { /* rows r0..r0+3 as two pairs */
        const uint16_t *ra[2], *rb[2];
        for (int q = 0; q < 2; q++) {
            const int a = r0 + 2 * q, b = a + 1;
            ra[q] = w + (size_t)(a < nr ? a : nr - 1) * ws;
            rb[q] = w + (size_t)(b < nr ? b : nr - 1) * ws;
        }
        __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int k = 0; k < kc8; k += 32) {
            const __mmask32 m = mask32(kc8 - k);
            const __m512bh x0 = (__m512bh)_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x + k)));
            __m512i A[2], B[2];
#pragma GCC unroll 2
            for (int q = 0; q < 2; q++)
                A[q] = _mm512_maskz_loadu_epi16(m, ra[q] + k), B[q] = _mm512_maskz_loadu_epi16(m, rb[q] + k);
#pragma GCC unroll 2
            for (int q = 0; q < 2; q++)
                acc[q] = _mm512_dpbf16_ps(acc[q], (__m512bh)_mm512_permutex2var_epi16(A[q], i0, B[q]), x0);
            if (k + 16 < kc8) {
                const __m512bh x1 = (__m512bh)_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x + k + 16)));
#pragma GCC unroll 2
                for (int q = 0; q < 2; q++)
                    acc[q] = _mm512_dpbf16_ps(acc[q], (__m512bh)_mm512_permutex2var_epi16(A[q], i1, B[q]), x1);
            }
        }
        for (int q = 0; q < 2; q++) {
            float s[2];
            reduce2(acc[q], &s[0], &s[1]);
            for (int h = 0; h < 2; h++) {
                const int r = r0 + 2 * q + h;
                if (r >= nr) continue;
                const float v = kc8 < kc ? tail(s[h], w + (size_t)r * ws, x, kc8, kc) : s[h];
                float *p = y + (size_t)r * yr;
                *p = accumulate ? *p + v : v;
            }
        }
    }
}
