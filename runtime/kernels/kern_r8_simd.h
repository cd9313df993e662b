/*
 * kern_r8_simd.h — the SIMD leaves of the row-interleaved types (kern_r8.h),
 * written once and compiled twice: kern_r8_avx2.c (R8_VNNI 0: vpmaddubsw +
 * vpmaddwd) and kern_r8_vnni.c (R8_VNNI 1: vpdpbusd, AVX-512 VL encoding, so
 * 32 ymm registers).  Included only by those two files; R8_LEAVES names the
 * kern_r8_leaves table to define.
 *
 * gemm micro-kernel: one row group (8 rows = the 8 int32 lanes of a ymm) x
 * NTOK tokens.  Per 32-column block the group's codes are loaded once (4 or
 * 8 chunks of 32 bytes = 4 columns x 8 rows each) and reused for every
 * token; a token's 4 activation bytes per chunk are broadcast to all lanes.
 * Integer sums per (row, token, block) are exact:
 *   Q4_0: u = code in 0..15, sumi = Σ u·a - 8·Σa (the accumulator starts at
 *         -8·Σa, Σa from kern_block_q8x4.sum);
 *   Q8_0, VNNI: u = q ^ 0x80 = q + 128 in 0..255, start at -128·Σa;
 *   Q8_0, AVX2: ggml's sign trick |q| x sign(a, q) (vpmaddubsw would
 *         saturate on q + 128); maddubs never saturates: 2·128·127 < 32768.
 * then acc += float(sumi) · (d_w · d_a) with one FMA per (block, token).
 * Two independent integer chains per token (low/high halves of the block)
 * keep the dot latency below the throughput bound.
 */
#include "kern_r8.h"
#include "kern_x86_simd.h"

#define UNROLL _Pragma("GCC unroll 8")

#if R8_VNNI
INLINE __m256i dp(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
#else
INLINE __m256i dp(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
#endif

/* ---- gemm: Q4_0_R8 ------------------------------------------------------------ */

/* decode (one token): each block asks for the bytes KERN_DECODE_PF_BYTES
 * further on (kern_x86_simd.h prefetch_decode) */
INLINE void gemm_q4(const uint8_t *wg, const kern_block_q8x4 *a, size_t qstride, int nb, int nt,
                    float *y, size_t ldy, const int NTOK) {
    __m256 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * KERN_Q4_0_R8_BLOCK;
        if (NTOK == 1) prefetch_decode(blk, KERN_Q4_0_R8_BLOCK);
        const __m256 dw = dw8(blk);
        __m256i lo[4], hi[4];
        UNROLL for (int c = 0; c < 4; c++) {
            const __m256i v = loadu(blk + 16 + 32 * c);
            lo[c] = _mm256_and_si256(v, m4);
            hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        UNROLL for (int t = 0; t < NTOK; t++) {
            const kern_block_q8x4 *ab = a + (size_t)(t / 4) * qstride + b;
            const int8_t *q = ab->qs[t % 4];
            __m256i s0 = _mm256_set1_epi32(-8 * ab->sum[t % 4]), s1 = _mm256_setzero_si256();
            UNROLL for (int c = 0; c < 4; c++) {
                s0 = dp(s0, lo[c], bc32(q + 4 * c));
                s1 = dp(s1, hi[c], bc32(q + 16 + 4 * c));
            }
            const __m256 f = _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1));
            acc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, _mm256_set1_ps(ab->d[t % 4])), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) _mm256_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

/* ---- gemm: Q8_0_R8 ------------------------------------------------------------ */

INLINE void gemm_q8(const uint8_t *wg, const kern_block_q8x4 *a, size_t qstride, int nb, int nt,
                    float *y, size_t ldy, const int NTOK) {
    __m256 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * KERN_Q8_0_R8_BLOCK;
        if (NTOK == 1) prefetch_decode(blk, KERN_Q8_0_R8_BLOCK);
        const __m256 dw = dw8(blk);
        __m256i u[8];
#if R8_VNNI
        UNROLL for (int c = 0; c < 8; c++) u[c] = _mm256_xor_si256(loadu(blk + 16 + 32 * c), _mm256_set1_epi8(-128));
#else
        UNROLL for (int c = 0; c < 8; c++) u[c] = _mm256_abs_epi8(loadu(blk + 16 + 32 * c));
#endif
        UNROLL for (int t = 0; t < NTOK; t++) {
            const kern_block_q8x4 *ab = a + (size_t)(t / 4) * qstride + b;
            const int8_t *q = ab->qs[t % 4];
#if R8_VNNI
            __m256i s0 = _mm256_set1_epi32(-128 * ab->sum[t % 4]), s1 = _mm256_setzero_si256();
            UNROLL for (int c = 0; c < 4; c++) {
                s0 = dp(s0, u[c], bc32(q + 4 * c));
                s1 = dp(s1, u[4 + c], bc32(q + 16 + 4 * c));
            }
#else
            __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
            UNROLL for (int c = 0; c < 4; c++) {
                s0 = dp(s0, u[c], _mm256_sign_epi8(bc32(q + 4 * c), loadu(blk + 16 + 32 * c)));
                s1 = dp(s1, u[4 + c], _mm256_sign_epi8(bc32(q + 16 + 4 * c), loadu(blk + 144 + 32 * c)));
            }
#endif
            const __m256 f = _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1));
            acc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, _mm256_set1_ps(ab->d[t % 4])), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) _mm256_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

/* NTOK: 1 (decode), 4, or 8 (VNNI: 32 registers hold 8 accumulators + the codes) */
#if R8_VNNI
#define R8_WIDE 8
#else
#define R8_WIDE 4
#endif

#define GEMM_ENTRY(name, body)                                                                  \
    static void name(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y, \
                     size_t ldy) {                                                              \
        if (nt == 1) {                                                                          \
            body((const uint8_t *)wg, a, qs, nb, 1, y, ldy, 1);                                 \
            return;                                                                             \
        }                                                                                       \
        for (int t0 = 0; t0 < nt; t0 += R8_WIDE) {                                              \
            const int n = nt - t0 < R8_WIDE ? nt - t0 : R8_WIDE;                                \
            if (n <= 4) body((const uint8_t *)wg, a + (size_t)(t0 / 4) * qs, qs, nb, n, y + (size_t)t0 * ldy, ldy, 4); \
            else body((const uint8_t *)wg, a + (size_t)(t0 / 4) * qs, qs, nb, n, y + (size_t)t0 * ldy, ldy, R8_WIDE); \
        }                                                                                       \
    }
GEMM_ENTRY(gemm_q4_entry, gemm_q4)
GEMM_ENTRY(gemm_q8_entry, gemm_q8)

#if R8_VNNI
/* ---- VNNI, two row groups per call: 16 rows = the 16 int32 lanes of a zmm -----------------------
 * Lanes 0..7 are group 0's rows, 8..15 the next group's (its block b sits
 * one group, nb blocks, further on), so a token's 4 activation bytes are one
 * 32-bit broadcast for all 16 lanes (vpdpbusd's {1to16} memory form) and
 * the activations stay the kern_block_q8x4 quads.  Per row the integer sums
 * and the f32 ops are the ymm leaf's (and the scalar reference's).  The
 * quads of tokens >= nt are read from quad 0 (never stored). */

/* the quad of each 4 tokens, quad 0 for the unused ones */
#define QUAD_PTRS(aq, a, qstride, nt, NTOK) \
    const kern_block_q8x4 *aq[NTOK / 4];    \
    UNROLL for (int k = 0; k < NTOK / 4; k++) aq[k] = (a) + (size_t)(4 * k < (nt) ? k : 0) * (qstride)

/* Q4_0 (o = 8, cs = 4 chunks) and Q8_0 (o = 128, cs = 8 chunks: u = q ^ 0x80) */
INLINE void gemm2_body(const uint8_t *wg, const kern_block_q8x4 *a, size_t qstride, int nb, int nt, float *y,
                       size_t ldy, const int q8, const int NTOK) {
    const int bb = q8 ? KERN_Q8_0_R8_BLOCK : KERN_Q4_0_R8_BLOCK;
    const size_t gbytes = (size_t)nb * bb;
    QUAD_PTRS(aq, a, qstride, nt, NTOK);
    __m512 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *b0 = wg + (size_t)b * bb, *b1 = b0 + gbytes;
        const __m512 dw = dw16(b0, b1);
        __m512i u[8]; /* u[c] columns 4c..4c+3 (Q4_0: c < 4 low nibbles, c >= 4 high nibbles of chunk c - 4) */
        if (q8) {
            UNROLL for (int c = 0; c < 8; c++) u[c] = _mm512_xor_si512(ld2(b0 + 16 + 32 * c, b1 + 16 + 32 * c),
                                                                      _mm512_set1_epi8(-128));
        } else {
            const __m512i m4 = _mm512_set1_epi8(0x0f);
            UNROLL for (int c = 0; c < 4; c++) {
                const __m512i v = ld2(b0 + 16 + 32 * c, b1 + 16 + 32 * c);
                u[c] = _mm512_and_si512(v, m4);
                u[4 + c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
        }
        UNROLL for (int t = 0; t < NTOK; t++) {
            const kern_block_q8x4 *ab = aq[t / 4] + b;
            const int8_t *q = ab->qs[t % 4];
            __m512i s0 = _mm512_set1_epi32((q8 ? -128 : -8) * ab->sum[t % 4]), s1 = _mm512_setzero_si512();
            UNROLL for (int c = 0; c < 4; c++) {
                s0 = _mm512_dpbusd_epi32(s0, u[c], bcz(q + 4 * c));
                s1 = _mm512_dpbusd_epi32(s1, u[4 + c], bcz(q + 16 + 4 * c));
            }
            const __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1));
            acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(dw, _mm512_set1_ps(ab->d[t % 4])), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) _mm512_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

/* NTOK 4 or 8 (16 tokens measured slower: 16 accumulators + 8 code vectors crowd 32 registers) */
#define GEMM2_ENTRY(name, q8)                                                                            \
    static void name(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y,      \
                     size_t ldy) {                                                                       \
        if (nt <= 4) gemm2_body((const uint8_t *)wg, a, qs, nb, nt, y, ldy, q8, 4);                      \
        else gemm2_body((const uint8_t *)wg, a, qs, nb, nt, y, ldy, q8, 8);                              \
    }
GEMM2_ENTRY(gemm2_q4_entry, 0)
GEMM2_ENTRY(gemm2_q8_entry, 1)
#define R8_GEMM2 {gemm2_q4_entry, gemm2_q8_entry}
#else
#define R8_GEMM2 {NULL, NULL}
#endif

/* ---- f32 activations ------------------------------------------------------------- */

/* Column 4c+i (Q8: chunk c) / low-high nibble columns of the 8 rows as f32. */
INLINE __m256 q4_col(__m256i v, int shift) {
    const __m256i c = _mm256_and_si256(_mm256_srli_epi32(v, shift), _mm256_set1_epi32(0x0f));
    return _mm256_sub_ps(_mm256_cvtepi32_ps(c), _mm256_set1_ps(8.0f));
}
INLINE __m256 q8_col(__m256i v, int i) {
    return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * i), 24));
}

/* mv8: one row group's slice of blocks [b0, b0 + nbk) against x (the slice's
 * 32 * nbk floats), per row exactly kern_avx2.c's tile_mm for one token on
 * the dequantized rows (kern.c "matmul": the batch-invariance contract):
 * there row r's 8-lane FMA chain gives lane m the columns k = m (mod 8) in
 * order, then hsum adds ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)).  Here the lanes
 * are the 8 rows and A[m] holds every row's lane m, so the same FMAs run in
 * the same order on the same values (code * d, exact) and the same adds
 * finish — 8 independent chains, no tile. */
INLINE void mv8_finish(const __m256 A[8], float *y, int accumulate) {
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(A[0], A[4]), _mm256_add_ps(A[2], A[6])),
                                   _mm256_add_ps(_mm256_add_ps(A[1], A[5]), _mm256_add_ps(A[3], A[7])));
    _mm256_storeu_ps(y, accumulate ? _mm256_add_ps(_mm256_loadu_ps(y), s) : s);
}

static void mv8_q4(const void *wg, int b0, int nbk, const float *x, float *y, int accumulate) {
    __m256 A[8];
    UNROLL for (int m = 0; m < 8; m++) A[m] = _mm256_setzero_ps();
    for (int b = 0; b < nbk; b++, x += 32) {
        const uint8_t *blk = (const uint8_t *)wg + (size_t)(b0 + b) * KERN_Q4_0_R8_BLOCK;
        const __m256 dw = dw8(blk);
        __m256i v[4];
        UNROLL for (int c = 0; c < 4; c++) v[c] = loadu(blk + 16 + 32 * c);
        UNROLL for (int h = 0; h < 2; h++) /* low nibbles: columns 0..15, high: 16..31 */
            UNROLL for (int c = 0; c < 4; c++)
                UNROLL for (int i = 0; i < 4; i++) {
                    const int k = 16 * h + 4 * c + i;
                    A[k % 8] = _mm256_fmadd_ps(_mm256_mul_ps(q4_col(v[c], 8 * i + 4 * h), dw),
                                               _mm256_broadcast_ss(x + k), A[k % 8]);
                }
    }
    mv8_finish(A, y, accumulate);
}

static void mv8_q8(const void *wg, int b0, int nbk, const float *x, float *y, int accumulate) {
    __m256 A[8];
    UNROLL for (int m = 0; m < 8; m++) A[m] = _mm256_setzero_ps();
    for (int b = 0; b < nbk; b++, x += 32) {
        const uint8_t *blk = (const uint8_t *)wg + (size_t)(b0 + b) * KERN_Q8_0_R8_BLOCK;
        const __m256 dw = dw8(blk);
        UNROLL for (int c = 0; c < 8; c++) {
            const __m256i v = loadu(blk + 16 + 32 * c);
            UNROLL for (int i = 0; i < 4; i++) {
                const int k = 4 * c + i;
                A[k % 8] = _mm256_fmadd_ps(_mm256_mul_ps(q8_col(v, i), dw), _mm256_broadcast_ss(x + k),
                                           A[k % 8]);
            }
        }
    }
    mv8_finish(A, y, accumulate);
}

/* 8 rows x 32 columns of one block into dst[r * ld + k].  Lane r of chunk c
 * holds row r's 4 code bytes of columns 4c..4c+3, so a 32-bit transpose of
 * the chunks gives each row's codes in column order (Q4_0: ggml's 16 qs
 * bytes, Q8_0: its 32 qs); then (code - 8) * d / q * d exactly like the
 * scalar reference. */
INLINE void store8(float *p, __m256i q32, __m256 d, __m256 off) {
    _mm256_storeu_ps(p, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(q32), off), d));
}

static void deq8_q4(const void *wg, int b0, int nbk, float *dst, size_t ld) {
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m256 off = _mm256_set1_ps(8.0f);
    for (int b = 0; b < nbk; b++) {
        const uint8_t *blk = (const uint8_t *)wg + (size_t)(b0 + b) * KERN_Q4_0_R8_BLOCK;
        _Alignas(32) float d[8];
        _mm256_store_ps(d, dw8(blk));
        const __m256i v0 = loadu(blk + 16), v1 = loadu(blk + 48), v2 = loadu(blk + 80), v3 = loadu(blk + 112);
        const __m256i a0 = _mm256_unpacklo_epi32(v0, v1), a1 = _mm256_unpackhi_epi32(v0, v1);
        const __m256i a2 = _mm256_unpacklo_epi32(v2, v3), a3 = _mm256_unpackhi_epi32(v2, v3);
        __m256i rows[4] = {_mm256_unpacklo_epi64(a0, a2), _mm256_unpackhi_epi64(a0, a2),
                           _mm256_unpacklo_epi64(a1, a3), _mm256_unpackhi_epi64(a1, a3)};
        UNROLL for (int r = 0; r < 8; r++) {
            /* rows[i] holds row i (low 128) and row i + 4 (high 128) */
            const __m128i q = r < 4 ? _mm256_castsi256_si128(rows[r]) : _mm256_extracti128_si256(rows[r - 4], 1);
            const __m128i lo = _mm_and_si128(q, m4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
            const __m256 dr = _mm256_set1_ps(d[r]);
            float *o = dst + (size_t)r * ld + 32 * b;
            store8(o, _mm256_cvtepu8_epi32(lo), dr, off);
            store8(o + 8, _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)), dr, off);
            store8(o + 16, _mm256_cvtepu8_epi32(hi), dr, off);
            store8(o + 24, _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)), dr, off);
        }
    }
}

static void deq8_q8(const void *wg, int b0, int nbk, float *dst, size_t ld) {
    const __m256 zero = _mm256_setzero_ps();
    for (int b = 0; b < nbk; b++) {
        const uint8_t *blk = (const uint8_t *)wg + (size_t)(b0 + b) * KERN_Q8_0_R8_BLOCK;
        _Alignas(32) float d[8];
        _mm256_store_ps(d, dw8(blk));
        __m256i v[8], a[8], t[8];
        UNROLL for (int c = 0; c < 8; c++) v[c] = loadu(blk + 16 + 32 * c);
        UNROLL for (int c = 0; c < 8; c += 2) {
            a[c] = _mm256_unpacklo_epi32(v[c], v[c + 1]);
            a[c + 1] = _mm256_unpackhi_epi32(v[c], v[c + 1]);
        }
        UNROLL for (int c = 0; c < 8; c += 4) {
            t[c] = _mm256_unpacklo_epi64(a[c], a[c + 2]);
            t[c + 1] = _mm256_unpackhi_epi64(a[c], a[c + 2]);
            t[c + 2] = _mm256_unpacklo_epi64(a[c + 1], a[c + 3]);
            t[c + 3] = _mm256_unpackhi_epi64(a[c + 1], a[c + 3]);
        }
        UNROLL for (int r = 0; r < 4; r++) {
            v[r] = _mm256_permute2x128_si256(t[r], t[r + 4], 0x20);     /* row r */
            v[r + 4] = _mm256_permute2x128_si256(t[r], t[r + 4], 0x31); /* row r + 4 */
        }
        UNROLL for (int r = 0; r < 8; r++) {
            const __m256 dr = _mm256_set1_ps(d[r]);
            const __m128i lo = _mm256_castsi256_si128(v[r]), hi = _mm256_extracti128_si256(v[r], 1);
            float *o = dst + (size_t)r * ld + 32 * b;
            store8(o, _mm256_cvtepi8_epi32(lo), dr, zero);
            store8(o + 8, _mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)), dr, zero);
            store8(o + 16, _mm256_cvtepi8_epi32(hi), dr, zero);
            store8(o + 24, _mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)), dr, zero);
        }
    }
}

const kern_r8_leaves R8_LEAVES = {
    {gemm_q4_entry, gemm_q8_entry}, R8_GEMM2, {mv8_q4, mv8_q8}, {deq8_q4, deq8_q8}};
