/*
 * kern_kquants_avx2.c — AVX2 + FMA + F16C leaves for the 256-element weight
 * types of kern_kquants.h (built with -mavx2 -mfma -mf16c; nothing here runs
 * unless kern_best_isa() chose KERN_ISA_AVX2).
 *
 * Dequantization leaves: codes decoded in registers, 8 floats per store; no
 * scalar loop touches an element.  Two decoders, whichever measured faster
 * per type (1 thread, 4096x1024):
 *  - 32 codes at a time with byte-wide ops on one ymm (bit planes, pshufb
 *    codebooks, grid entries, sign masks), widened to 4 x 8 floats
 *    (vpmovsxbd + vcvtdq2ps): Q3_K, Q5_K, Q6_K, Q8_K, IQ*, TQ*;
 *  - 8 bytes zero-extended straight from memory into 8 int32 lanes
 *    (vpmovzxbd m64), each lane then yields several codes by shift and mask:
 *    Q2_K (4 bit pairs), Q4_K (2 nibbles) — fewer shuffles.
 * Scales are unpacked once per 256-element block into small float arrays
 * and broadcast.  IQ3 grid entries are 8 scalar loads (vpgatherdd measured
 * slower on this machine).  The types with a per-sub-block min (Q2_K, Q4_K,
 * Q5_K) form w = fmsub(q, d*sc, dmin*m), the scalar dequant's one rounding.
 * Every value is bit-identical to the scalar leaf's (kern_kquants.h,
 * Exactness), so the f32 matmul — which multiplies these values for the
 * mat-mat and the mat-vec alike (kern.c) — is exact on them.
 */
#include <immintrin.h>
#include <string.h>

#include "kern.h"
#include "kern_kquants.h"

/* Loops over sub-blocks and vectors are unrolled completely so that every
 * accumulator and code vector stays in a register (-O2 alone keeps them in
 * memory when indexed by a loop variable). */
#define UNROLL _Pragma("GCC unroll 8")

/* ==== helpers ================================================================ */

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* 8 bytes at p -> 8 int32 lanes (zero-extended) */
static inline __m256i u8x8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline __m256 bc(const float *p) { return _mm256_broadcast_ss(p); }

/* 32 signed byte codes -> f[0..3], 8 floats each, element order kept */
static inline void widen32(__m256i c, __m256 f[4]) {
    const __m128i lo = _mm256_castsi256_si128(c), hi = _mm256_extracti128_si256(c, 1);
    f[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    f[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
    f[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    f[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

/* 16 signed byte codes -> f[0..1] */
static inline void widen16(__m128i c, __m256 f[2]) {
    f[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c));
    f[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c, 8)));
}

/* 16 int16 codes -> f[0..1] */
static inline void widen16_w(__m256i c, __m256 f[2]) {
    f[0] = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(c)));
    f[1] = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(c, 1)));
}

static inline void store_scaled(const __m256 *f, int n8, __m256 a, float *dst) {
    UNROLL
    for (int k = 0; k < n8; k++) _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(f[k], a));
}

/* Byte i of the result is 0xff when bit i of bits is set, else 0. */
static inline __m256i bits_to_mask32(uint32_t bits) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0);
    const __m256i bm = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bm), bm);
}

/* c negated where mask is 0xff */
static inline __m256i apply_signs(__m256i c, __m256i mask) {
    return _mm256_sub_epi8(_mm256_xor_si256(c, mask), mask);
}

/* ==== Q2_K ==================================================================== */

/* a[j] = d * (sc_j & 15), m[j] = dmin * (sc_j >> 4) for the 16 sub-blocks */
static inline void q2_k_scales(const kern_block_q2_k *b, float *a, float *m) {
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i s = _mm_loadu_si128((const __m128i *)b->scales);
    const __m128i sc = _mm_and_si128(s, m4), mn = _mm_and_si128(_mm_srli_epi16(s, 4), m4);
    const __m256 d = _mm256_set1_ps(h2f(b->d)), dm = _mm256_set1_ps(h2f(b->dmin));
    __m256 f[2];
    widen16(sc, f);
    store_scaled(f, 2, d, a);
    widen16(mn, f);
    store_scaled(f, 2, dm, m);
}

/* BODY(fv, s, xo, k) for the 32 vectors of 8 codes of one block: fv the codes
 * as floats, s their sub-block, xo the element offset, k = j (an accumulator
 * index).  Each 8 bytes of qs hold 4 vectors (bit pairs 2j). */
#define Q2_K_GROUPS(b, BODY)                                                        \
    UNROLL                                                                          \
    for (int h = 0; h < 2; h++) {                                                   \
        UNROLL                                                                      \
        for (int lc = 0; lc < 4; lc++) {                                            \
            const __m256i v = u8x8((b)->qs + 32 * h + 8 * lc);                      \
            UNROLL                                                                  \
            for (int j = 0; j < 4; j++) {                                           \
                const __m256 fv = _mm256_cvtepi32_ps(                               \
                    _mm256_and_si256(_mm256_srli_epi32(v, 2 * j), _mm256_set1_epi32(3))); \
                const int s = 8 * h + 2 * j + lc / 2, xo = 128 * h + 32 * j + 8 * lc, k = j; \
                BODY;                                                               \
            }                                                                       \
        }                                                                           \
    }

void kern_avx2_dequant_q2_k(const void *src, float *dst, int n) {
    const kern_block_q2_k *b = src;
    _Alignas(32) float a[16], m[16];
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K) {
        q2_k_scales(b, a, m);
        Q2_K_GROUPS(b, (void)k; _mm256_storeu_ps(dst + xo, _mm256_fmsub_ps(fv, bc(a + s), bc(m + s))))
    }
}

/* ==== Q3_K ==================================================================== */

/* a[j] = d * (sc_j - 32), the 6-bit scales unpacked like ggml (kmask1/kmask2) */
static inline void q3_k_scales(const kern_block_q3_k *b, float *a) {
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    uint32_t aux[4];
    memcpy(aux, b->scales, 12);
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    const __m128i s = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)aux), _mm_set1_epi8(32));
    __m256 f[2];
    widen16(s, f);
    store_scaled(f, 2, _mm256_set1_ps(h2f(b->d)), a);
}

/* BODY(f, s, xo) per 32 codes: code = ((qs >> 2j) & 3) - (hmask bit clear ? 4 : 0) */
#define Q3_K_GROUPS(b, BODY)                                                         \
    {                                                                                \
        const __m256i hm = load32((b)->hmask), m3 = _mm256_set1_epi8(3);             \
        const __m256i four = _mm256_set1_epi8(4), zero = _mm256_setzero_si256();     \
        UNROLL                                                                       \
        for (int h = 0; h < 2; h++) {                                                \
            const __m256i v = load32((b)->qs + 32 * h);                              \
            UNROLL                                                                   \
            for (int j = 0; j < 4; j++) {                                            \
                const __m256i bit = _mm256_set1_epi8((char)(1 << (4 * h + j)));      \
                const __m256i clr = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), zero); \
                const __m256i c = _mm256_sub_epi8(                                   \
                    _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3),               \
                    _mm256_and_si256(clr, four));                                    \
                __m256 f[4];                                                         \
                widen32(c, f);                                                       \
                const int s = 8 * h + 2 * j, xo = 128 * h + 32 * j;                   \
                BODY;                                                                \
            }                                                                        \
        }                                                                            \
    }

void kern_avx2_dequant_q3_k(const void *src, float *dst, int n) {
    const kern_block_q3_k *b = src;
    _Alignas(32) float a[16];
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K) {
        q3_k_scales(b, a);
        Q3_K_GROUPS(b, {
            store_scaled(f, 2, bc(a + s), dst + xo);
            store_scaled(f + 2, 2, bc(a + s + 1), dst + xo + 16);
        })
    }
}

/* ==== Q4_K, Q5_K ================================================================ */

/* a[j] = d * sc_j, m[j] = dmin * m_j for the 8 sub-blocks: the 12 packed bytes
 * rearranged (ggml's utmp shuffle) into 8 scales then 8 mins, one byte each. */
static inline void k4_scales(const uint8_t *s12, uint16_t d, uint16_t dmin, float *a, float *m) {
    uint32_t u[4];
    memcpy(u, s12, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
    const uint32_t uaux = u[1] & 0x3f3f3f3f;
    u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
    u[2] = uaux;
    u[0] &= 0x3f3f3f3f;
    const __m128i v = _mm_loadu_si128((const __m128i *)u);
    _mm256_store_ps(a, _mm256_mul_ps(_mm256_set1_ps(h2f(d)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v))));
    _mm256_store_ps(m, _mm256_mul_ps(_mm256_set1_ps(h2f(dmin)),
                                     _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)))));
}

/* Q4_K: BODY(fv, s, xo, k) per vector of 8 codes (sub-block s, element
 * offset xo, accumulator index k): each 8 bytes of qs give 8 codes of
 * sub-block 2jp (low nibbles) and 8 of 2jp+1 (high). */
#define Q4_K_GROUPS(b, BODY)                                                         \
    UNROLL                                                                           \
    for (int jp = 0; jp < 4; jp++) {                                                 \
        UNROLL                                                                       \
        for (int lc = 0; lc < 4; lc++) {                                             \
            const __m256i v = u8x8((b)->qs + 32 * jp + 8 * lc);                      \
            {                                                                        \
                const __m256 fv = _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(15))); \
                const int s = 2 * jp, xo = 64 * jp + 8 * lc, k = lc & 1;             \
                BODY;                                                                \
            }                                                                        \
            {                                                                        \
                const __m256 fv = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));       \
                const int s = 2 * jp + 1, xo = 64 * jp + 32 + 8 * lc, k = 2 + (lc & 1); \
                BODY;                                                                \
            }                                                                        \
        }                                                                            \
    }

/* Q5_K: the same codes plus 16 where bit 2jp (low nibbles) / 2jp+1 (high) of
 * qh[l] is set, built 32 at a time in bytes (in 16-bit lanes, so shifting qh
 * right by 2jp keeps bits 0-1 of each byte its own), then widened. */
#define Q5_K_GROUPS(b, BODY)                                                         \
    {                                                                                \
        const __m256i m4 = _mm256_set1_epi8(0x0f), x10 = _mm256_set1_epi8(0x10);     \
        const __m256i qh = load32((b)->qh);                                          \
        UNROLL                                                                       \
        for (int jp = 0; jp < 4; jp++) {                                             \
            const __m256i v = load32((b)->qs + 32 * jp);                             \
            const __m256i hb = _mm256_srli_epi16(qh, 2 * jp);                        \
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4),              \
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 4), x10)); \
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), \
                                               _mm256_and_si256(_mm256_slli_epi16(hb, 3), x10)); \
            __m256 f[4];                                                             \
            widen32(lo, f);                                                          \
            UNROLL                                                                   \
            for (int k = 0; k < 4; k++) {                                            \
                const __m256 fv = f[k];                                              \
                const int s = 2 * jp, xo = 64 * jp + 8 * k;                          \
                BODY;                                                                \
            }                                                                        \
            widen32(hi, f);                                                          \
            UNROLL                                                                   \
            for (int k = 0; k < 4; k++) {                                            \
                const __m256 fv = f[k];                                              \
                const int s = 2 * jp + 1, xo = 64 * jp + 32 + 8 * k;                 \
                BODY;                                                                \
            }                                                                        \
        }                                                                            \
    }

#define K4_STORE (void)k; _mm256_storeu_ps(dst + xo, _mm256_fmsub_ps(fv, bc(a + s), bc(m + s)))

void kern_avx2_dequant_q4_k(const void *src, float *dst, int n) {
    const kern_block_q4_k *b = src;
    _Alignas(32) float a[8], m[8];
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K) {
        k4_scales(b->scales, b->d, b->dmin, a, m);
        Q4_K_GROUPS(b, K4_STORE)
    }
}

void kern_avx2_dequant_q5_k(const void *src, float *dst, int n) {
    const kern_block_q5_k *b = src;
    _Alignas(32) float a[8], m[8];
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K) {
        k4_scales(b->scales, b->d, b->dmin, a, m);
        Q5_K_GROUPS(b, K4_STORE)
    }
}

/* ==== Q6_K ==================================================================== */

/* a[j] = d * sc_j (int8 scales) */
static inline void q6_k_scales(const kern_block_q6_k *b, float *a) {
    __m256 f[2];
    widen16(_mm_loadu_si128((const __m128i *)b->scales), f);
    store_scaled(f, 2, _mm256_set1_ps(h2f(b->d)), a);
}

/* BODY(f, s, xo) per 32 codes; per 128-element half: codes of elements
 * 32k + l = (ql 4 bits) | (qh 2 bits << 4), minus 32 */
#define Q6_K_GROUPS(b, BODY)                                                         \
    UNROLL                                                                           \
    for (int h = 0; h < 2; h++) {                                                    \
        const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);     \
        const __m256i ql0 = load32((b)->ql + 64 * h), ql1 = load32((b)->ql + 64 * h + 32); \
        const __m256i qh = load32((b)->qh + 32 * h);                                 \
        __m256i c[4];                                                                \
        c[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),                            \
                               _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));     \
        c[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),                            \
                               _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));     \
        c[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),      \
                               _mm256_and_si256(qh, m30));                           \
        c[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),      \
                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));     \
        UNROLL                                                                       \
        for (int k = 0; k < 4; k++) {                                                \
            __m256 f[4];                                                             \
            widen32(_mm256_sub_epi8(c[k], _mm256_set1_epi8(32)), f);                 \
            const int s = 8 * h + 2 * k, xo = 128 * h + 32 * k;                       \
            BODY;                                                                    \
        }                                                                            \
    }

void kern_avx2_dequant_q6_k(const void *src, float *dst, int n) {
    const kern_block_q6_k *b = src;
    _Alignas(32) float a[16];
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K) {
        q6_k_scales(b, a);
        Q6_K_GROUPS(b, {
            store_scaled(f, 2, bc(a + s), dst + xo);
            store_scaled(f + 2, 2, bc(a + s + 1), dst + xo + 16);
        })
    }
}

/* ==== Q8_K ==================================================================== */

void kern_avx2_dequant_q8_k(const void *src, float *dst, int n) {
    const kern_block_q8_k *b = src;
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K) {
        const __m256 d = _mm256_set1_ps(b->d);
        UNROLL
        for (int j = 0; j < KERN_QK_K; j += 32) {
            __m256 f[4];
            widen32(load32(b->qs + j), f);
            store_scaled(f, 4, d, dst + j);
        }
    }
}

/* ==== IQ4_XS ==================================================================== */

/* BODY(f, dl, xo) per 32-element sub-block: codes kvalues_iq4nl[nibble] by pshufb */
#define IQ4_XS_GROUPS(b, BODY)                                                       \
    {                                                                                \
        const __m128i tbl = _mm_loadu_si128((const __m128i *)kern_iq4nl_values);    \
        const __m128i m4 = _mm_set1_epi8(0x0f);                                      \
        const float d = h2f((b)->d);                                                 \
        UNROLL                                                                       \
        for (int ib = 0; ib < 8; ib++) {                                             \
            const int ls = (((b)->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |         \
                           ((((b)->scales_h >> 2 * ib) & 3) << 4);                   \
            const float dl = d * (float)(ls - 32);                                   \
            const __m128i raw = _mm_loadu_si128((const __m128i *)((b)->qs + 16 * ib)); \
            __m256 f[4];                                                             \
            widen16(_mm_shuffle_epi8(tbl, _mm_and_si128(raw, m4)), f);               \
            widen16(_mm_shuffle_epi8(tbl, _mm_and_si128(_mm_srli_epi16(raw, 4), m4)), f + 2); \
            const int xo = 32 * ib;                                                  \
            BODY;                                                                    \
        }                                                                            \
    }

void kern_avx2_dequant_iq4_xs(const void *src, float *dst, int n) {
    const kern_block_iq4_xs *b = src;
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K)
        IQ4_XS_GROUPS(b, store_scaled(f, 4, _mm256_set1_ps(dl), dst + xo))
}

/* ==== IQ3_XXS ==================================================================== */

/* BODY(f, db, xo) per 32-element sub-block: 8 grid entries of 4 magnitudes,
 * signs from four 7-bit ksigns indices, scale d * (0.5 + s) * 0.5 */
#define IQ3_XXS_GROUPS(b, BODY)                                                      \
    {                                                                                \
        const float d = h2f((b)->d);                                                 \
        const uint8_t *qs = (b)->qs;                                                 \
        UNROLL                                                                       \
        for (int ib = 0; ib < 8; ib++, qs += 8) {                                    \
            uint32_t aux;                                                            \
            memcpy(&aux, (b)->qs + KERN_QK_K / 4 + 4 * ib, sizeof aux);              \
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;                 \
            const uint32_t sbits = (uint32_t)kern_ksigns_iq2xs[aux & 127] |          \
                                   (uint32_t)kern_ksigns_iq2xs[(aux >> 7) & 127] << 8 | \
                                   (uint32_t)kern_ksigns_iq2xs[(aux >> 14) & 127] << 16 | \
                                   (uint32_t)kern_ksigns_iq2xs[(aux >> 21) & 127] << 24; \
            const __m256i g = _mm256_setr_epi32(                                     \
                (int)kern_iq3xxs_grid[qs[0]], (int)kern_iq3xxs_grid[qs[1]],          \
                (int)kern_iq3xxs_grid[qs[2]], (int)kern_iq3xxs_grid[qs[3]],          \
                (int)kern_iq3xxs_grid[qs[4]], (int)kern_iq3xxs_grid[qs[5]],          \
                (int)kern_iq3xxs_grid[qs[6]], (int)kern_iq3xxs_grid[qs[7]]);         \
            __m256 f[4];                                                             \
            widen32(apply_signs(g, bits_to_mask32(sbits)), f);                       \
            const int xo = 32 * ib;                                                  \
            BODY;                                                                    \
        }                                                                            \
    }

void kern_avx2_dequant_iq3_xxs(const void *src, float *dst, int n) {
    const kern_block_iq3_xxs *b = src;
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K)
        IQ3_XXS_GROUPS(b, store_scaled(f, 4, _mm256_set1_ps(db), dst + xo))
}

/* ==== IQ3_S ==================================================================== */

/* BODY(f, db, xo) per 32-element sub-block: 8 grid entries with 9-bit indices
 * (qs byte | qh bit << 8), explicit sign bits, scale d * (1 + 2s) */
#define IQ3_S_GROUPS(b, BODY)                                                        \
    {                                                                                \
        const float d = h2f((b)->d);                                                 \
        const uint8_t *qs = (b)->qs;                                                 \
        UNROLL                                                                       \
        for (int ib = 0; ib < 8; ib++, qs += 8) {                                    \
            const float db = d * (float)(1 + 2 * (((b)->scales[ib / 2] >> 4 * (ib % 2)) & 0xf)); \
            const unsigned qh = (b)->qh[ib];                                         \
            uint32_t sbits;                                                          \
            memcpy(&sbits, (b)->signs + 4 * ib, sizeof sbits);                       \
            const __m256i g = _mm256_setr_epi32(                                     \
                (int)kern_iq3s_grid[qs[0] | ((qh << 8) & 256)],                      \
                (int)kern_iq3s_grid[qs[1] | ((qh << 7) & 256)],                      \
                (int)kern_iq3s_grid[qs[2] | ((qh << 6) & 256)],                      \
                (int)kern_iq3s_grid[qs[3] | ((qh << 5) & 256)],                      \
                (int)kern_iq3s_grid[qs[4] | ((qh << 4) & 256)],                      \
                (int)kern_iq3s_grid[qs[5] | ((qh << 3) & 256)],                      \
                (int)kern_iq3s_grid[qs[6] | ((qh << 2) & 256)],                      \
                (int)kern_iq3s_grid[qs[7] | ((qh << 1) & 256)]);                     \
            __m256 f[4];                                                             \
            widen32(apply_signs(g, bits_to_mask32(sbits)), f);                       \
            const int xo = 32 * ib;                                                  \
            BODY;                                                                    \
        }                                                                            \
    }

void kern_avx2_dequant_iq3_s(const void *src, float *dst, int n) {
    const kern_block_iq3_s *b = src;
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K)
        IQ3_S_GROUPS(b, store_scaled(f, 4, _mm256_set1_ps(db), dst + xo))
}

/* ==== TQ1_0 ==================================================================== */

/* Trits of 16 bytes (one per u16 lane) times 3^n, as int16 in -1..1:
 * ((b*3^n mod 256) * 3) >> 8, with the mod done by shifting into the high byte. */
static inline __m256i tq1_trits(__m256i b16, __m256i pow3_hi) {
    const __m256i q = _mm256_mullo_epi16(b16, pow3_hi);
    return _mm256_sub_epi16(_mm256_mulhi_epu16(q, _mm256_set1_epi16(3)), _mm256_set1_epi16(1));
}

/* BODY(f, xo) per 16 elements (f[0..1]) */
#define TQ1_0_GROUPS(b, BODY)                                                        \
    {                                                                                \
        static const short pow3[5] = {1, 3, 9, 27, 81};                              \
        const __m256i b0 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(b)->qs)); \
        const __m256i b1 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)((b)->qs + 16))); \
        const __m256i b2 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)((b)->qs + 32))); \
        __m256 f[2];                                                                 \
        UNROLL                                                                       \
        for (int k = 0; k < 5; k++) {                                                \
            const __m256i p = _mm256_set1_epi16((short)(pow3[k] << 8));              \
            widen16_w(tq1_trits(b0, p), f);                                          \
            { const int xo = 32 * k; BODY; }                                         \
            widen16_w(tq1_trits(b1, p), f);                                          \
            { const int xo = 32 * k + 16; BODY; }                                    \
            widen16_w(tq1_trits(b2, p), f);                                          \
            { const int xo = 160 + 16 * k; BODY; }                                   \
        }                                                                            \
        uint32_t qh4;                                                                \
        memcpy(&qh4, (b)->qh, sizeof qh4);                                           \
        const __m256i b3 = _mm256_cvtepu8_epi16(_mm_set1_epi32((int)qh4));           \
        const __m256i p3 = _mm256_setr_epi16(1 << 8, 1 << 8, 1 << 8, 1 << 8, 3 << 8, 3 << 8, \
                                             3 << 8, 3 << 8, 9 << 8, 9 << 8, 9 << 8, 9 << 8, \
                                             27 << 8, 27 << 8, 27 << 8, 27 << 8);    \
        widen16_w(tq1_trits(b3, p3), f);                                             \
        { const int xo = 240; BODY; }                                                \
    }

void kern_avx2_dequant_tq1_0(const void *src, float *dst, int n) {
    const kern_block_tq1_0 *b = src;
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K) {
        const __m256 d = _mm256_set1_ps(h2f(b->d));
        TQ1_0_GROUPS(b, store_scaled(f, 2, d, dst + xo))
    }
}

/* ==== TQ2_0 ==================================================================== */

/* BODY(f, xo) per 32 elements: ((qs >> 2l) & 3) - 1 */
#define TQ2_0_GROUPS(b, BODY)                                                        \
    UNROLL                                                                           \
    for (int h = 0; h < 2; h++) {                                                    \
        const __m256i v = load32((b)->qs + 32 * h);                                  \
        const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);           \
        UNROLL                                                                       \
        for (int l = 0; l < 4; l++) {                                                \
            __m256 f[4];                                                             \
            widen32(_mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(v, 2 * l), m3), one), f); \
            const int xo = 128 * h + 32 * l;                                         \
            BODY;                                                                    \
        }                                                                            \
    }

void kern_avx2_dequant_tq2_0(const void *src, float *dst, int n) {
    const kern_block_tq2_0 *b = src;
    for (int i = 0; i < n / KERN_QK_K; i++, b++, dst += KERN_QK_K) {
        const __m256 d = _mm256_set1_ps(h2f(b->d));
        TQ2_0_GROUPS(b, store_scaled(f, 4, d, dst + xo))
    }
}

