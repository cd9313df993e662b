/*
 * kern_q8_avx2.c — AVX2 leaves for quantized activations (kern_q8.h): the
 * Q8_0/Q8_1/Q8_K/F16 quantizers and the integer dots, built with -mavx2
 * -mfma -mf16c; nothing here runs unless kern_best_isa() chose AVX2.
 *
 * Quantizers write the same bytes as the scalar ones (ggml's x86 code: the
 * AVX path of quantize_row_q8_0/q8_1; quantize_row_q8_K_ref for Q8_K, whose
 * nearest_int is round-half-even like vroundps).
 *
 * Dots.  One weight row against nt <= KERN_Q8_NT activation rows: each
 * weight block is decoded once into byte codes in a register and multiplied
 * with every token's block, so a multi-token call (the mat-mat driver) pays
 * the decode once per KERN_Q8_NT tokens.  The integer core is ggml's:
 * vpmaddubsw (u8 x s8 -> pairs in int16) then vpmaddwd by the sub-block
 * scale (or by 1) -> int32.  Codes are made unsigned at decode where that
 * avoids per-token work:
 *  - 32-element types (Q8_0 activations: Q4_0, Q5_0, Q8_0, IQ4_NL) keep
 *    signed codes and use the sign trick (|w| x sign(a, w)) like ggml;
 *    Q4_1/Q5_1 codes are unsigned and the min enters as m * s (Q8_1);
 *  - 256-element types sum sc * Σ u·a in int32 over the super-block, where
 *    u = code + offset >= 0 (Q3_K +4, Q6_K +32, IQ3 +64, TQ +1); the offset
 *    and K-quant mins are taken back with the activation's 16-element bsums:
 *    Σ sc·(u - o)·a = Σ sc·u·a - o·Σ sc·bsum (exact, int32).  IQ4_XS codes
 *    are signed (sign trick).  One float multiply-add per super-block.
 * maddubs cannot saturate: |u| <= 126 and |a| <= 127 (2*126*127 < 32768).
 * Each token's arithmetic is the same whatever nt is, so grouping tokens
 * never changes a result.  The mat-mat leaves of the 32-element types
 * (kern_avx2_gemm4_*, end of file) fold the 4 tokens' integer sums into one
 * vector first; their float sums are ordered differently from the dots'.
 */
#include <immintrin.h>
#include <string.h>

#include "kern_q8.h"

#define UNROLL _Pragma("GCC unroll 8")
/* Group loops stay rolled: unrolled, GCC hoists every group's codes and scales
 * and spills them (measured slower). */
#define NOUNROLL _Pragma("GCC unroll 1")
#define INLINE static inline __attribute__((always_inline))

/* ==== helpers ================================================================= */

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
static inline __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline __m128i load16(const void *p) { return _mm_loadu_si128((const __m128i *)p); }

/* 16 bytes -> 32 nibbles: low nibbles in bytes 0..15, high nibbles in 16..31 */
static inline __m256i nibbles32(const uint8_t *p) {
    const __m128i t = load16(p);
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0f));
}

/* bit j of x -> byte j = 0xff / 0x00 (ggml bytes_from_bits_32) */
static inline __m256i bits_to_bytes(uint32_t x) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                           0x0101010101010101, 0x0000000000000000);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

/* The two 128-bit halves of 16 int16 scales, each broadcast to a ymm. */
static inline void scale_halves(__m256i sc16, __m256i half[2]) {
    half[0] = _mm256_permute2x128_si256(sc16, sc16, 0x00);
    half[1] = _mm256_permute2x128_si256(sc16, sc16, 0x11);
}

/* int16 lanes [s[2j] x 8 | s[2j+1] x 8] of the 8 int16 scales in half
 * (both 128-bit lanes), j = 0..3 (ggml get_scale_shuffle_q3k) */
static inline __m256i scale_pair(__m256i half, int j) {
    const int k = 4 * j; /* byte offset of int16 lane 2j */
    const __m256i idx = _mm256_set_m128i(_mm_set1_epi16((short)((k + 2) | (k + 3) << 8)),
                                         _mm_set1_epi16((short)(k | (k + 1) << 8)));
    return _mm256_shuffle_epi8(half, idx);
}

/* ==== quantizers ================================================================ */

/* ggml quantize_row_q8_0 / q8_1, x86 AVX2 path; returns d and, when sum, Σ of the codes */
static inline float q8_block_avx2(const float *x, int8_t *qs, int *sum) {
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ma = _mm256_andnot_ps(sign, v0);
    ma = _mm256_max_ps(ma, _mm256_andnot_ps(sign, v1));
    ma = _mm256_max_ps(ma, _mm256_andnot_ps(sign, v2));
    ma = _mm256_max_ps(ma, _mm256_andnot_ps(sign, v3));
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(ma, 1), _mm256_castps256_ps128(ma));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.f;
    const __m256 mul = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
    const int rn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, mul), rn));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, mul), rn));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, mul), rn));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, mul), rn));
    if (sum) {
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        *sum = _mm_cvtsi128_si32(s4);
    }
    i0 = _mm256_packs_epi32(i0, i1);
    i2 = _mm256_packs_epi32(i2, i3);
    i0 = _mm256_packs_epi16(i0, i2);
    i0 = _mm256_permutevar8x32_epi32(i0, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, i0);
    return d;
}

void kern_avx2_quantize_q8_0(const float *x, void *dst, int n) {
    kern_block_q8_0 *y = dst;
    for (int i = 0; i < n / KERN_QK; i++, x += KERN_QK)
        y[i].d = (uint16_t)_cvtss_sh(q8_block_avx2(x, y[i].qs, NULL), 0);
}

void kern_avx2_quantize_q8_1(const float *x, void *dst, int n) {
    kern_block_q8_1 *y = dst;
    for (int i = 0; i < n / KERN_QK; i++, x += KERN_QK) {
        int sum;
        const float d = q8_block_avx2(x, y[i].qs, &sum);
        y[i].d = (uint16_t)_cvtss_sh(d, 0);
        y[i].s = (uint16_t)_cvtss_sh(d * (float)sum, 0);
    }
}

/* quantize_row_q8_K_ref: the sign of the first element of largest |x| sets
 * the sign of the scale. */
void kern_avx2_quantize_q8_k(const float *x, void *dst, int n) {
    kern_block_q8_k *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < n / KERN_QK_K; i++, x += KERN_QK_K) {
        __m256 ma = _mm256_setzero_ps();
        UNROLL
        for (int j = 0; j < KERN_QK_K; j += 8) ma = _mm256_max_ps(ma, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(ma, 1), _mm256_castps256_ps128(ma));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (!(amax > 0.0f)) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const __m256 am = _mm256_set1_ps(amax);
        float max = amax;
        for (int j = 0; j < KERN_QK_K; j += 8) {
            const int m = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), am, _CMP_EQ_OQ));
            if (m) {
                max = x[j + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 mul = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127), perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        const int rn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        const __m256i zero = _mm256_setzero_si256(), bias = _mm256_set1_epi8((char)0x80);
        UNROLL
        for (int j = 0; j < KERN_QK_K; j += 32) {
            __m256i q[4];
            UNROLL
            for (int k = 0; k < 4; k++)
                q[k] = _mm256_min_epi32(top, _mm256_cvtps_epi32(_mm256_round_ps(
                                                 _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), mul), rn)));
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            p = _mm256_permutevar8x32_epi32(p, perm);
            _mm256_storeu_si256((__m256i *)(y[i].qs + j), p);
            /* bsums: Σ of 8 biased bytes per u64 lane, two lanes per 16 */
            const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(p, bias), zero);
            y[i].bsums[j / 16] = (int16_t)(_mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1) - 2048);
            y[i].bsums[j / 16 + 1] = (int16_t)(_mm256_extract_epi64(s, 2) + _mm256_extract_epi64(s, 3) - 2048);
        }
        y[i].d = 1 / iscale;
    }
}

void kern_avx2_quantize_f16(const float *x, void *dst, int n) {
    uint16_t *y = dst;
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), 0));
    for (; i < n; i++) y[i] = (uint16_t)_cvtss_sh(x[i], 0);
}

/* ==== dots: one weight row x nt token rows ======================================== */

/* Calls body(..., NT) with NT a constant, so every per-token array lives in
 * registers. */
#define NT_DISPATCH(fn, ...)                                                   \
    switch (nt) {                                                              \
    case 1: fn(__VA_ARGS__, 1); break;                                         \
    case 2: fn(__VA_ARGS__, 2); break;                                         \
    case 3: fn(__VA_ARGS__, 3); break;                                         \
    default: fn(__VA_ARGS__, 4); break;                                        \
    }

/* ---- Q8_0 activations, signed codes (Q4_0, Q5_0, Q8_0, IQ4_NL) ---------------- */

INLINE __m256i dec_q4_0(const kern_block_q4_0 *b) {
    return _mm256_sub_epi8(nibbles32(b->qs), _mm256_set1_epi8(8));
}
INLINE __m256i dec_q5_0(const kern_block_q5_0 *b) {
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh);
    /* (nib | h << 4) - 16 == nib | (h ? 0 : 0xf0) as int8 */
    return _mm256_or_si256(nibbles32(b->qs),
                           _mm256_andnot_si256(bits_to_bytes(qh), _mm256_set1_epi8((char)0xf0)));
}
INLINE __m256i dec_q8_0(const kern_block_q8_0 *b) { return load32(b->qs); }
INLINE __m256i dec_iq4_nl(const kern_block_iq4_nl *b) {
    const __m256i tbl = _mm256_broadcastsi128_si256(load16(kern_iq4nl_values));
    return _mm256_shuffle_epi8(tbl, nibbles32(b->qs));
}

INLINE __m256i dec_mxfp4(const kern_block_mxfp4 *b) {
    const __m256i tbl = _mm256_broadcastsi128_si256(load16(kern_mxfp4_values));
    return _mm256_shuffle_epi8(tbl, nibbles32(b->qs));
}
/* block scales: f16 d, or MXFP4's E8M0 exponent */
#define BSCALE_q4_0(b) h2f((b)->d)
#define BSCALE_q5_0(b) h2f((b)->d)
#define BSCALE_q8_0(b) h2f((b)->d)
#define BSCALE_iq4_nl(b) h2f((b)->d)
#define BSCALE_q4_1(b) h2f((b)->d)
#define BSCALE_q5_1(b) h2f((b)->d)
#define BSCALE_mxfp4(b) kern_e8m0_half((b)->e)

/* Block ib of one weight row into token accumulators acc[t] (even blocks)
 * or acc2[t] (odd ones: two chains hide the FMA latency). */
#define Q8_0_SIGNED_BLOCK(t, ib, ACC)                                                        \
    {                                                                                         \
        const __m256i q = dec_##t(x + (ib)), aq = _mm256_sign_epi8(q, q);                     \
        const float dw = BSCALE_##t(x + (ib));                                                \
        UNROLL for (int k = 0; k < NT; k++) {                                                 \
            const kern_block_q8_0 *y = (const kern_block_q8_0 *)(a + (size_t)k * as) + (ib);  \
            const __m256i p = _mm256_madd_epi16(                                              \
                _mm256_maddubs_epi16(aq, _mm256_sign_epi8(load32(y->qs), q)), ones);          \
            ACC[k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(y->d)), _mm256_cvtepi32_ps(p), ACC[k]); \
        }                                                                                     \
    }

#define DOT_Q8_0_SIGNED(t)                                                                   \
    INLINE void dotq_##t##_k(const kern_block_##t *x, const uint8_t *a, size_t as, int nb,   \
                              float *s, const int NT) {                                       \
        __m256 acc[KERN_Q8_NT], acc2[KERN_Q8_NT];                                             \
        const __m256i ones = _mm256_set1_epi16(1);                                            \
        UNROLL for (int k = 0; k < NT; k++) acc[k] = acc2[k] = _mm256_setzero_ps();           \
        int ib = 0;                                                                           \
        for (; ib + 1 < nb; ib += 2) {                                                        \
            Q8_0_SIGNED_BLOCK(t, ib, acc)                                                     \
            Q8_0_SIGNED_BLOCK(t, ib + 1, acc2)                                                \
        }                                                                                     \
        if (ib < nb) Q8_0_SIGNED_BLOCK(t, ib, acc)                                            \
        UNROLL for (int k = 0; k < NT; k++) s[k] = hsum(_mm256_add_ps(acc[k], acc2[k]));      \
    }                                                                                         \
    void kern_avx2_dotq_##t(const void *w, const void *a, size_t as, int nt, int n, float *s) { \
        NT_DISPATCH(dotq_##t##_k, (const kern_block_##t *)w, (const uint8_t *)a, as, n / KERN_QK, s) \
    }
DOT_Q8_0_SIGNED(q4_0)
DOT_Q8_0_SIGNED(q5_0)
DOT_Q8_0_SIGNED(q8_0)
DOT_Q8_0_SIGNED(iq4_nl)
DOT_Q8_0_SIGNED(mxfp4)

/* ---- Q8_1 activations, unsigned codes + m * s (Q4_1, Q5_1) --------------------- */

INLINE __m256i dec_q4_1(const kern_block_q4_1 *b) { return nibbles32(b->qs); }
INLINE __m256i dec_q5_1(const kern_block_q5_1 *b) {
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh);
    return _mm256_or_si256(nibbles32(b->qs),
                           _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
}

#define Q8_1_BLOCK(t, ib, ACC)                                                               \
    {                                                                                         \
        const __m256i q = dec_##t(x + (ib));                                                  \
        const float dw = h2f(x[ib].d), mw = h2f(x[ib].m);                                     \
        UNROLL for (int k = 0; k < NT; k++) {                                                 \
            const kern_block_q8_1 *y = (const kern_block_q8_1 *)(a + (size_t)k * as) + (ib);  \
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, load32(y->qs)), ones); \
            ACC[k] = _mm256_fmadd_ps(_mm256_set1_ps(dw * h2f(y->d)), _mm256_cvtepi32_ps(p), ACC[k]); \
            summs[k] += mw * h2f(y->s);                                                       \
        }                                                                                     \
    }

#define DOT_Q8_1(t)                                                                          \
    INLINE void dotq_##t##_k(const kern_block_##t *x, const uint8_t *a, size_t as, int nb,   \
                              float *s, const int NT) {                                       \
        __m256 acc[KERN_Q8_NT], acc2[KERN_Q8_NT];                                             \
        float summs[KERN_Q8_NT];                                                              \
        const __m256i ones = _mm256_set1_epi16(1);                                            \
        UNROLL for (int k = 0; k < NT; k++) acc[k] = acc2[k] = _mm256_setzero_ps(), summs[k] = 0; \
        int ib = 0;                                                                           \
        for (; ib + 1 < nb; ib += 2) {                                                        \
            Q8_1_BLOCK(t, ib, acc)                                                            \
            Q8_1_BLOCK(t, ib + 1, acc2)                                                       \
        }                                                                                     \
        if (ib < nb) Q8_1_BLOCK(t, ib, acc)                                                   \
        UNROLL for (int k = 0; k < NT; k++) s[k] = hsum(_mm256_add_ps(acc[k], acc2[k])) + summs[k]; \
    }                                                                                         \
    void kern_avx2_dotq_##t(const void *w, const void *a, size_t as, int nt, int n, float *s) { \
        NT_DISPATCH(dotq_##t##_k, (const kern_block_##t *)w, (const uint8_t *)a, as, n / KERN_QK, s) \
    }
DOT_Q8_1(q4_1)
DOT_Q8_1(q5_1)

/* ---- Q8_K activations (256-element types) ---------------------------------------
 * Inside a super-block loop: Y[t] the token's q8_K block, isum[t] its int32
 * accumulator, acc[t] its float accumulator. */

#define SB_BEGIN(BT)                                                                        \
    const BT *x = (const BT *)w;                                                            \
    __m256 acc[KERN_Q8_NT];                                                                 \
    UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();                       \
    for (int i = 0; i < nb; i++, x++) {                                                     \
        const kern_block_q8_k *Y[KERN_Q8_NT];                                               \
        __m256i isum[KERN_Q8_NT];                                                           \
        UNROLL for (int t = 0; t < NT; t++) {                                               \
            Y[t] = (const kern_block_q8_k *)(a + (size_t)t * as) + i;                       \
            isum[t] = _mm256_setzero_si256();                                               \
        }

/* Keeps an accumulation a chain: without it GCC rebalances the adds into a
 * tree and spills the partial sums (measured ~1.5x slower). */
#define KEEP(v) __asm__("" : "+x"(v))

/* isum += Σ sc * u·a over group g (32 elements), u unsigned codes */
#define SB_GROUP_U(u, sc, g)                                                                \
    UNROLL for (int t = 0; t < NT; t++) {                                                   \
        isum[t] = _mm256_add_epi32(                                                         \
            isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16((u), load32(Y[t]->qs + 32 * (g))), (sc))); \
        KEEP(isum[t]);                                                                      \
    }

/* the same for signed codes q (sign trick) */
#define SB_GROUP_S(q, sc, g)                                                                \
    {                                                                                       \
        const __m256i aq_ = _mm256_sign_epi8((q), (q));                                     \
        UNROLL for (int t = 0; t < NT; t++) {                                               \
            isum[t] = _mm256_add_epi32(                                                     \
                isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(                            \
                             aq_, _mm256_sign_epi8(load32(Y[t]->qs + 32 * (g)), (q))), (sc))); \
            KEEP(isum[t]);                                                                  \
        }                                                                                   \
    }

/* isum -= Σ_j off16[j] * bsum[j] (offsets of unsigned codes, exact) */
#define SB_OFFSET(off16)                                                                    \
    UNROLL for (int t = 0; t < NT; t++) isum[t] = _mm256_sub_epi32(                         \
        isum[t], _mm256_madd_epi16((off16), load32(Y[t]->bsums)))

/* acc += (dw * d_a) * isum */
#define SB_END(dw)                                                                          \
        UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm256_fmadd_ps(                       \
            _mm256_set1_ps((dw) * Y[t]->d), _mm256_cvtepi32_ps(isum[t]), acc[t]);           \
    }

/* acc -= (dmin * d_a) * Σ_j mins16[j] * bsum[j]; inside the block loop, before SB_END */
#define SB_MINS(mins16, dmin)                                                               \
    UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm256_fnmadd_ps(                          \
        _mm256_set1_ps((dmin) * Y[t]->d),                                                   \
        _mm256_cvtepi32_ps(_mm256_madd_epi16((mins16), load32(Y[t]->bsums))), acc[t])

#define SB_STORE(scale)                                                                     \
    UNROLL for (int t = 0; t < NT; t++) s[t] = (scale) * hsum(acc[t]);

#define SB_DOT(t)                                                                           \
    void kern_avx2_dotq_##t(const void *w, const void *a, size_t as, int nt, int n, float *s) { \
        NT_DISPATCH(dotq_##t##_k, w, (const uint8_t *)a, as, n / KERN_QK_K, s)              \
    }

#define SB_PARAMS const void *w, const uint8_t *a, size_t as, int nb, float *s, const int NT

/* Q2_K: u = 2-bit codes, 16 scales (low nibbles) and mins (high nibbles) */
INLINE void dotq_q2_k_k(SB_PARAMS) {
    SB_BEGIN(kern_block_q2_k)
    const __m128i sc8 = load16(x->scales), m4 = _mm_set1_epi8(0x0f);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, m4));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m4));
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i half[2];
    scale_halves(sc16, half);
    NOUNROLL for (int h = 0; h < 2; h++) {
        const __m256i v = load32(x->qs + 32 * h);
        UNROLL for (int j = 0; j < 4; j++) {
            const int g = 4 * h + j;
            SB_GROUP_U(_mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3), scale_pair(half[h], j), g);
        }
    }
    SB_MINS(mins16, h2f(x->dmin));
    SB_END(h2f(x->d))
    SB_STORE(1.0f)
}
SB_DOT(q2_k)

/* Q3_K: u = low 2 bits + 4 * hmask bit (value u - 4), 16 signed 6-bit scales */
INLINE __m256i q3_k_scales16(const uint8_t *s12) {
    uint32_t aux[3];
    memcpy(aux, s12, 12);
    const uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f;
    const __m128i s = _mm_set_epi32((int)(((aux[1] >> 4) & k2) | (((aux[2] >> 6) & k1) << 4)),
                                    (int)(((aux[0] >> 4) & k2) | (((aux[2] >> 4) & k1) << 4)),
                                    (int)((aux[1] & k2) | (((aux[2] >> 2) & k1) << 4)),
                                    (int)((aux[0] & k2) | (((aux[2] >> 0) & k1) << 4)));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(s, _mm_set1_epi8(32)));
}

INLINE void dotq_q3_k_k(SB_PARAMS) {
    SB_BEGIN(kern_block_q3_k)
    const __m256i sc16 = q3_k_scales16(x->scales);
    const __m256i m3 = _mm256_set1_epi8(3), m1 = _mm256_set1_epi8(1);
    __m256i half[2];
    scale_halves(sc16, half);
    NOUNROLL for (int h = 0; h < 2; h++) {
        const __m256i v = load32(x->qs + 32 * h);
        const __m256i hm = _mm256_srli_epi16(load32(x->hmask), 4 * h);
        UNROLL for (int j = 0; j < 4; j++) {
            const int g = 4 * h + j;
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3);
            const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, j), m1), 2);
            SB_GROUP_U(_mm256_or_si256(lo, hb), scale_pair(half[h], j), g);
        }
    }
    SB_OFFSET(_mm256_slli_epi16(sc16, 2));
    SB_END(h2f(x->d))
    SB_STORE(1.0f)
}
SB_DOT(q3_k)

/* Q4_K/Q5_K: 8 6-bit scales and mins (ggml's utmp unpacking); scales16 has
 * scale g in lanes 0..7 (low half), mins16 min g in lanes 2g, 2g+1 */
INLINE void k4_scales(const uint8_t *s12, __m256i *sc_all, __m256i *mins16) {
    uint32_t u[4];
    memcpy(u, s12, 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    u[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
    const uint32_t uaux = u[1] & k1;
    u[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    u[2] = uaux;
    u[0] &= k1;
    const __m128i sc8 = _mm_set_epi32(0, 0, (int)u[1], (int)u[0]);
    const __m128i mn8 = _mm_set_epi32(0, 0, (int)u[3], (int)u[2]);
    *sc_all = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(_mm256_cvtepu8_epi16(sc8)));
    *mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
}

/* int16 scale g (of 8, in sc_all's low 8 lanes, both halves) in all 16 lanes */
static inline __m256i scale_one(__m256i sc_all, int g) {
    return _mm256_shuffle_epi8(sc_all, _mm256_set1_epi16((short)(2 * g | (2 * g + 1) << 8)));
}

INLINE void dotq_q4_k_k(SB_PARAMS) {
    SB_BEGIN(kern_block_q4_k)
    __m256i sc_all, mins16;
    k4_scales(x->scales, &sc_all, &mins16);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    NOUNROLL for (int j = 0; j < 4; j++) {
        const __m256i v = load32(x->qs + 32 * j);
        SB_GROUP_U(_mm256_and_si256(v, m4), scale_one(sc_all, 2 * j), 2 * j);
        SB_GROUP_U(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), scale_one(sc_all, 2 * j + 1), 2 * j + 1);
    }
    SB_MINS(mins16, h2f(x->dmin));
    SB_END(h2f(x->d))
    SB_STORE(1.0f)
}
SB_DOT(q4_k)

INLINE void dotq_q5_k_k(SB_PARAMS) {
    SB_BEGIN(kern_block_q5_k)
    __m256i sc_all, mins16;
    k4_scales(x->scales, &sc_all, &mins16);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m1 = _mm256_set1_epi8(1), hm = load32(x->qh);
    NOUNROLL for (int j = 0; j < 4; j++) {
        const __m256i v = load32(x->qs + 32 * j);
        const int g0 = 2 * j, g1 = 2 * j + 1;
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, g0), m1), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, g1), m1), 4);
        SB_GROUP_U(_mm256_or_si256(_mm256_and_si256(v, m4), h0), scale_one(sc_all, g0), g0);
        SB_GROUP_U(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), h1),
                   scale_one(sc_all, g1), g1);
    }
    SB_MINS(mins16, h2f(x->dmin));
    SB_END(h2f(x->d))
    SB_STORE(1.0f)
}
SB_DOT(q5_k)

/* Q6_K: u = 4 low bits (ql) | 2 high bits (qh) << 4 (value u - 32), 16 int8 scales */
INLINE void dotq_q6_k_k(SB_PARAMS) {
    SB_BEGIN(kern_block_q6_k)
    const __m256i sc16 = _mm256_cvtepi8_epi16(load16(x->scales));
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
    __m256i half[2];
    scale_halves(sc16, half);
    NOUNROLL for (int h = 0; h < 2; h++) {
        const __m256i l0 = load32(x->ql + 64 * h), l1 = load32(x->ql + 64 * h + 32);
        const __m256i qh = load32(x->qh + 32 * h);
        const __m256i lo[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                               _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
        UNROLL for (int k = 0; k < 4; k++) {
            const int g = 4 * h + k;
            const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m3), 4);
            SB_GROUP_U(_mm256_or_si256(lo[k], hb), scale_pair(half[h], k), g);
        }
    }
    SB_OFFSET(_mm256_slli_epi16(sc16, 5));
    SB_END(h2f(x->d))
    SB_STORE(1.0f)
}
SB_DOT(q6_k)

/* IQ4_XS: signed codebook values, 8 6-bit scales minus 32 */
INLINE void dotq_iq4_xs_k(SB_PARAMS) {
    const __m256i tbl = _mm256_broadcastsi128_si256(load16(kern_iq4nl_values));
    SB_BEGIN(kern_block_iq4_xs)
    UNROLL for (int g = 0; g < 8; g++) {
        const int ls = ((x->scales_l[g / 2] >> 4 * (g % 2)) & 0xf) | (((x->scales_h >> 2 * g) & 3) << 4);
        const __m256i q = _mm256_shuffle_epi8(tbl, nibbles32(x->qs + 16 * g));
        SB_GROUP_S(q, _mm256_set1_epi16((short)(ls - 32)), g);
    }
    SB_END(h2f(x->d))
    SB_STORE(1.0f)
}
SB_DOT(iq4_xs)

/* 8 grid entries (4 magnitudes each) and 32 sign bits -> u = 64 + ±magnitude */
static inline __m256i iq3_codes(uint32_t g0, uint32_t g1, uint32_t g2, uint32_t g3, uint32_t g4,
                                uint32_t g5, uint32_t g6, uint32_t g7, uint32_t signs) {
    const __m256i mag = _mm256_setr_epi32((int)g0, (int)g1, (int)g2, (int)g3, (int)g4, (int)g5,
                                          (int)g6, (int)g7);
    const __m256i m = bits_to_bytes(signs);
    return _mm256_add_epi8(_mm256_sub_epi8(_mm256_xor_si256(mag, m), m), _mm256_set1_epi8(64));
}

/* 8 group scales (int32 lanes) -> 64 * scale in int16 lanes 2g, 2g+1 */
static inline __m256i iq3_offsets(__m256i sc32) {
    const __m256i p = _mm256_packs_epi32(sc32, sc32); /* s0..s3 s0..s3 | s4..s7 s4..s7 */
    return _mm256_slli_epi16(_mm256_unpacklo_epi16(p, p), 6);
}

/* IQ3_XXS: scale 2*(aux>>28)+1, result * 0.25 */
INLINE void dotq_iq3_xxs_k(SB_PARAMS) {
    SB_BEGIN(kern_block_iq3_xxs)
    const uint8_t *q3 = x->qs, *gas = x->qs + KERN_QK_K / 4;
    const __m256i sc32 = _mm256_add_epi32(
        _mm256_slli_epi32(_mm256_srli_epi32(load32(gas), 28), 1), _mm256_set1_epi32(1));
    NOUNROLL for (int g = 0; g < 8; g++, q3 += 8) {
        uint32_t aux;
        memcpy(&aux, gas + 4 * g, sizeof aux);
        const uint32_t signs = (uint32_t)kern_ksigns_iq2xs[aux & 127] |
                               (uint32_t)kern_ksigns_iq2xs[(aux >> 7) & 127] << 8 |
                               (uint32_t)kern_ksigns_iq2xs[(aux >> 14) & 127] << 16 |
                               (uint32_t)kern_ksigns_iq2xs[(aux >> 21) & 127] << 24;
        const __m256i u = iq3_codes(kern_iq3xxs_grid[q3[0]], kern_iq3xxs_grid[q3[1]],
                                    kern_iq3xxs_grid[q3[2]], kern_iq3xxs_grid[q3[3]],
                                    kern_iq3xxs_grid[q3[4]], kern_iq3xxs_grid[q3[5]],
                                    kern_iq3xxs_grid[q3[6]], kern_iq3xxs_grid[q3[7]], signs);
        SB_GROUP_U(u, _mm256_set1_epi16((short)(2 * (aux >> 28) + 1)), g);
    }
    SB_OFFSET(iq3_offsets(sc32));
    SB_END(h2f(x->d))
    SB_STORE(0.25f)
}
SB_DOT(iq3_xxs)

/* IQ3_S: 9-bit grid indices (qs + one qh bit), explicit sign bits, scale 2*s+1 */
INLINE void dotq_iq3_s_k(SB_PARAMS) {
    SB_BEGIN(kern_block_iq3_s)
    uint32_t sc4;
    memcpy(&sc4, x->scales, sizeof sc4);
    const __m128i s8 = _mm_cvtsi32_si128((int)sc4), m4 = _mm_set1_epi8(0x0f);
    /* s0 s1 ... s7 (group g: nibble g%2 of byte g/2) as int32 lanes */
    const __m128i sg = _mm_unpacklo_epi8(_mm_and_si128(s8, m4), _mm_and_si128(_mm_srli_epi16(s8, 4), m4));
    const __m256i sc32 = _mm256_add_epi32(_mm256_slli_epi32(_mm256_cvtepu8_epi32(sg), 1),
                                          _mm256_set1_epi32(1));
    const uint8_t *qs = x->qs;
    NOUNROLL for (int g = 0; g < 8; g++, qs += 8) {
        const unsigned qh = x->qh[g];
        uint32_t signs;
        memcpy(&signs, x->signs + 4 * g, sizeof signs);
        const __m256i u = iq3_codes(
            kern_iq3s_grid[qs[0] | (qh << 8 & 256)], kern_iq3s_grid[qs[1] | (qh << 7 & 256)],
            kern_iq3s_grid[qs[2] | (qh << 6 & 256)], kern_iq3s_grid[qs[3] | (qh << 5 & 256)],
            kern_iq3s_grid[qs[4] | (qh << 4 & 256)], kern_iq3s_grid[qs[5] | (qh << 3 & 256)],
            kern_iq3s_grid[qs[6] | (qh << 2 & 256)], kern_iq3s_grid[qs[7] | (qh << 1 & 256)], signs);
        const int ls = 2 * ((x->scales[g / 2] >> 4 * (g % 2)) & 0xf) + 1;
        SB_GROUP_U(u, _mm256_set1_epi16((short)ls), g);
    }
    SB_OFFSET(iq3_offsets(sc32));
    SB_END(h2f(x->d))
    SB_STORE(1.0f)
}
SB_DOT(iq3_s)

/* TQ1_0: 16 bytes -> their trit n (0..2) as 16 bytes; pow3_hi = 3^n << 8 per u16 lane */
static inline __m128i tq1_trits16(__m128i b, __m256i pow3_hi) {
    const __m256i q = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(b), pow3_hi);
    const __m256i t = _mm256_mulhi_epu16(q, _mm256_set1_epi16(3));
    return _mm_packus_epi16(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}
static inline __m256i pair128(__m128i lo, __m128i hi) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* TQ1_0: u = trit (value u - 1); elements: qs[0..31] trits 0..4 (160), qs[32..47]
 * trits 0..4 (80), qh[0..3] trits 0..3 (16) */
INLINE void dotq_tq1_0_k(SB_PARAMS) {
    static const short pow3[5] = {1, 3, 9, 27, 81};
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i p3h = _mm256_setr_epi16(1 << 8, 1 << 8, 1 << 8, 1 << 8, 3 << 8, 3 << 8, 3 << 8,
                                          3 << 8, 9 << 8, 9 << 8, 9 << 8, 9 << 8, 27 << 8, 27 << 8,
                                          27 << 8, 27 << 8);
    SB_BEGIN(kern_block_tq1_0)
    const __m128i b0 = load16(x->qs), b1 = load16(x->qs + 16), b2 = load16(x->qs + 32);
    __m128i t2[5];
    UNROLL for (int l = 0; l < 5; l++) {
        const __m256i p = _mm256_set1_epi16((short)(pow3[l] << 8));
        SB_GROUP_U(pair128(tq1_trits16(b0, p), tq1_trits16(b1, p)), ones, l);
        t2[l] = tq1_trits16(b2, p);
    }
    uint32_t qh4;
    memcpy(&qh4, x->qh, sizeof qh4);
    const __m128i th = tq1_trits16(_mm_set1_epi32((int)qh4), p3h);
    SB_GROUP_U(pair128(t2[0], t2[1]), ones, 5);
    SB_GROUP_U(pair128(t2[2], t2[3]), ones, 6);
    SB_GROUP_U(pair128(t2[4], th), ones, 7);
    SB_OFFSET(ones);
    SB_END(h2f(x->d))
    SB_STORE(1.0f)
}
SB_DOT(tq1_0)

/* TQ2_0: u = 2-bit code (value u - 1) */
INLINE void dotq_tq2_0_k(SB_PARAMS) {
    const __m256i ones = _mm256_set1_epi16(1), m3 = _mm256_set1_epi8(3);
    SB_BEGIN(kern_block_tq2_0)
    NOUNROLL for (int h = 0; h < 2; h++) {
        const __m256i v = load32(x->qs + 32 * h);
        UNROLL for (int l = 0; l < 4; l++)
            SB_GROUP_U(_mm256_and_si256(_mm256_srli_epi16(v, 2 * l), m3), ones, 4 * h + l);
    }
    SB_OFFSET(ones);
    SB_END(h2f(x->d))
    SB_STORE(1.0f)
}
SB_DOT(tq2_0)

/* ==== 4-token mat-mat of the 32-element types (kern_block_q8x4) =====================
 * Per block the 4 tokens' int32 lane sums are folded by vphaddd into one
 * vector [t0 t1 t2 t3 | t0 t1 t2 t3] (exact integers), so the float work —
 * convert, scale by d_w*d_a, accumulate — is one vector op each per block
 * for all 4 tokens instead of per token.  Even and odd blocks go to two
 * accumulators (the FMA latency would bound one chain). */

INLINE __m256i fold4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
}

/* The same from the 4 tokens' vpmaddubsw results, folded in int16 first (one
 * vpmaddwd instead of four): only for codes with |q| <= 31 in unsigned or
 * 16 in signed form, where four vpmaddubsw lanes sum to < 2^15. */
INLINE __m256i fold4_16(__m256i m0, __m256i m1, __m256i m2, __m256i m3) {
    const __m256i h = _mm256_hadd_epi16(_mm256_hadd_epi16(m0, m1), _mm256_hadd_epi16(m2, m3));
    return _mm256_madd_epi16(h, _mm256_set1_epi16(1));
}

INLINE void store4(__m256 acc, float *s) {
    _mm_storeu_ps(s, _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)));
}

#define GEMM4_SIGNED_BLOCK(t, ib, ACC)                                                        \
    {                                                                                         \
        const __m256i q = dec_##t(x + (ib)), aq = _mm256_sign_epi8(q, q);                     \
        __m256i p[4];                                                                         \
        UNROLL for (int k = 0; k < 4; k++)                                                    \
            p[k] = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(load32(y[ib].qs[k]), q));        \
        const __m256i f = SMALL_##t ? fold4_16(p[0], p[1], p[2], p[3])                        \
                                    : fold4(_mm256_madd_epi16(p[0], ones), _mm256_madd_epi16(p[1], ones), \
                                            _mm256_madd_epi16(p[2], ones), _mm256_madd_epi16(p[3], ones)); \
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(BSCALE_##t(x + (ib))),                  \
                                       _mm256_broadcast_ps((const __m128 *)y[ib].d));         \
        ACC = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(f), ACC);                                 \
    }
/* IQ4_NL and Q8_0 codes reach ±127: four vpmaddubsw lanes can pass 2^15 */
#define SMALL_q8_0 0
#define SMALL_iq4_nl 0
#define SMALL_mxfp4 1 /* |code| <= 12 */

#define GEMM4_SIGNED(t)                                                                       \
    void kern_avx2_gemm4_##t(const void *vw, const void *va, int n, float *s) {               \
        const kern_block_##t *x = vw;                                                         \
        const kern_block_q8x4 *y = va;                                                        \
        const __m256i ones = _mm256_set1_epi16(1);                                            \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                        \
        const int nb = n / KERN_QK;                                                           \
        int ib = 0;                                                                           \
        for (; ib + 1 < nb; ib += 2) {                                                        \
            GEMM4_SIGNED_BLOCK(t, ib, acc0)                                                   \
            GEMM4_SIGNED_BLOCK(t, ib + 1, acc1)                                               \
        }                                                                                     \
        if (ib < nb) GEMM4_SIGNED_BLOCK(t, ib, acc0)                                          \
        store4(_mm256_add_ps(acc0, acc1), s);                                                 \
    }
GEMM4_SIGNED(q8_0)
GEMM4_SIGNED(iq4_nl)
GEMM4_SIGNED(mxfp4)

/* Q4_0 / Q5_0: unsigned codes u = q + OFF (the stored nibbles / 5-bit values)
 * and Σ(u - OFF)·a = Σu·a - OFF·Σa, Σa from the packed block: no sign trick,
 * and the int16 fold applies (u <= 31).  OFF·Σa comes off the low-half lanes,
 * so the per-token total stays the exact integer. */
INLINE __m256i decu_q4_0(const kern_block_q4_0 *b) { return nibbles32(b->qs); }
INLINE __m256i decu_q5_0(const kern_block_q5_0 *b) {
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh);
    return _mm256_or_si256(nibbles32(b->qs),
                           _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
}
#define OFF_q4_0 3 /* log2 8 */
#define OFF_q5_0 4 /* log2 16 */

#define GEMM4_OFFSET_BLOCK(t, ib, ACC)                                                        \
    {                                                                                         \
        const __m256i u = decu_##t(x + (ib));                                                 \
        __m256i p[4];                                                                         \
        UNROLL for (int k = 0; k < 4; k++) p[k] = _mm256_maddubs_epi16(u, load32(y[ib].qs[k])); \
        const __m256i off = _mm256_zextsi128_si256(                                           \
            _mm_slli_epi32(_mm_loadu_si128((const __m128i *)y[ib].sum), OFF_##t));            \
        const __m256i f = _mm256_sub_epi32(fold4_16(p[0], p[1], p[2], p[3]), off);           \
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(BSCALE_##t(x + (ib))),                  \
                                       _mm256_broadcast_ps((const __m128 *)y[ib].d));         \
        ACC = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(f), ACC);                                 \
    }

#define GEMM4_OFFSET(t)                                                                       \
    void kern_avx2_gemm4_##t(const void *vw, const void *va, int n, float *s) {               \
        const kern_block_##t *x = vw;                                                         \
        const kern_block_q8x4 *y = va;                                                        \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                        \
        const int nb = n / KERN_QK;                                                           \
        int ib = 0;                                                                           \
        for (; ib + 1 < nb; ib += 2) {                                                        \
            GEMM4_OFFSET_BLOCK(t, ib, acc0)                                                   \
            GEMM4_OFFSET_BLOCK(t, ib + 1, acc1)                                               \
        }                                                                                     \
        if (ib < nb) GEMM4_OFFSET_BLOCK(t, ib, acc0)                                          \
        store4(_mm256_add_ps(acc0, acc1), s);                                                 \
    }
GEMM4_OFFSET(q4_0)
GEMM4_OFFSET(q5_0)

#define GEMM4_Q8_1_BLOCK(t, ib, ACC, SUMMS)                                                   \
    {                                                                                         \
        const __m256i q = dec_##t(x + (ib));                                                  \
        __m256i p[4];                                                                         \
        UNROLL for (int k = 0; k < 4; k++) p[k] = _mm256_maddubs_epi16(q, load32(y[ib].qs[k])); \
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(BSCALE_##t(x + (ib))),                  \
                                       _mm256_broadcast_ps((const __m128 *)y[ib].d));         \
        ACC = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(fold4_16(p[0], p[1], p[2], p[3])), ACC);  \
        SUMMS = _mm_fmadd_ps(_mm_set1_ps(h2f(x[ib].m)), _mm_loadu_ps(y[ib].s), SUMMS);       \
    }

#define GEMM4_Q8_1(t)                                                                         \
    void kern_avx2_gemm4_##t(const void *vw, const void *va, int n, float *s) {               \
        const kern_block_##t *x = vw;                                                         \
        const kern_block_q8x4 *y = va;                                                        \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                        \
        __m128 sm0 = _mm_setzero_ps(), sm1 = _mm_setzero_ps();                                \
        const int nb = n / KERN_QK;                                                           \
        int ib = 0;                                                                           \
        for (; ib + 1 < nb; ib += 2) {                                                        \
            GEMM4_Q8_1_BLOCK(t, ib, acc0, sm0)                                                \
            GEMM4_Q8_1_BLOCK(t, ib + 1, acc1, sm1)                                            \
        }                                                                                     \
        if (ib < nb) GEMM4_Q8_1_BLOCK(t, ib, acc0, sm0)                                       \
        float r[4];                                                                           \
        store4(_mm256_add_ps(acc0, acc1), r);                                                 \
        _mm_storeu_ps(s, _mm_add_ps(_mm_loadu_ps(r), _mm_add_ps(sm0, sm1)));                  \
    }
GEMM4_Q8_1(q4_1)
GEMM4_Q8_1(q5_1)

/* ==== 4-row mat-vec of the 32-element types (kern_gemv4_fn) =========================
 * The transpose of the gemm4 leaves above: 4 weight rows x the token in slot
 * 0 of the kern_block_q8x4 blocks.  fold4 over the rows puts row r where
 * gemm4 puts token t — [r0 r1 r2 r3 | r0 r1 r2 r3], the low half the block's
 * first 16 elements — and the scale lane is d_w[r] · d_a where gemm4 has
 * d_w · d_a[t]: each lane does the float work gemm4 does for that (row,
 * token), so a decoded token gets the bits it gets in a batch.  Rows at
 * w + r * ws (ws 0: the same row four times, for a matrix's last rows). */

/* the f16 scales of 4 rows' blocks as [d0 d1 d2 d3 | d0 d1 d2 d3] */
INLINE __m256 rows4_f16(uint16_t h0, uint16_t h1, uint16_t h2, uint16_t h3) {
    const __m128 v = _mm_cvtph_ps(_mm_setr_epi16((short)h0, (short)h1, (short)h2, (short)h3, 0, 0, 0, 0));
    return _mm256_set_m128(v, v);
}

#define ROW(t, r, ib) ((const kern_block_##t *)(w + (size_t)(r) * ws) + (ib))
#define DW4(t, ib, f) rows4_f16(ROW(t, 0, ib)->f, ROW(t, 1, ib)->f, ROW(t, 2, ib)->f, ROW(t, 3, ib)->f)

#define GEMV4_SIGNED_BLOCK(t, ib, ACC)                                                        \
    {                                                                                         \
        const __m256i a = load32(y[ib].qs[0]);                                                \
        __m256i p[4];                                                                         \
        UNROLL for (int r = 0; r < 4; r++) {                                                  \
            const __m256i q = dec_##t(ROW(t, r, ib));                                         \
            p[r] = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));      \
        }                                                                                     \
        const __m256i f = SMALL_##t ? fold4_16(p[0], p[1], p[2], p[3])                        \
                                    : fold4(_mm256_madd_epi16(p[0], ones), _mm256_madd_epi16(p[1], ones), \
                                            _mm256_madd_epi16(p[2], ones), _mm256_madd_epi16(p[3], ones)); \
        const __m256 d = _mm256_mul_ps(DW4S_##t(ib), _mm256_set1_ps(y[ib].d[0]));             \
        ACC = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(f), ACC);                                 \
    }
/* the 4 rows' block scales in both halves: f16 d, MXFP4's e8m0 exponent */
INLINE __m256 rows4_f32(float a, float b, float c, float d) {
    const __m128 v = _mm_setr_ps(a, b, c, d);
    return _mm256_set_m128(v, v);
}
#define DW4S_q8_0(ib) DW4(q8_0, ib, d)
#define DW4S_iq4_nl(ib) DW4(iq4_nl, ib, d)
#define DW4S_mxfp4(ib)                                                                        \
    rows4_f32(BSCALE_mxfp4(ROW(mxfp4, 0, ib)), BSCALE_mxfp4(ROW(mxfp4, 1, ib)),                \
              BSCALE_mxfp4(ROW(mxfp4, 2, ib)), BSCALE_mxfp4(ROW(mxfp4, 3, ib)))

#define GEMV4_SIGNED(t)                                                                       \
    void kern_avx2_gemv4_##t(const void *vw, size_t ws, const void *va, int n, float *s) {    \
        const uint8_t *w = vw;                                                                \
        const kern_block_q8x4 *y = va;                                                        \
        const __m256i ones = _mm256_set1_epi16(1);                                            \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                        \
        const int nb = n / KERN_QK;                                                           \
        int ib = 0;                                                                           \
        for (; ib + 1 < nb; ib += 2) {                                                        \
            GEMV4_SIGNED_BLOCK(t, ib, acc0)                                                   \
            GEMV4_SIGNED_BLOCK(t, ib + 1, acc1)                                               \
        }                                                                                     \
        if (ib < nb) GEMV4_SIGNED_BLOCK(t, ib, acc0)                                          \
        store4(_mm256_add_ps(acc0, acc1), s);                                                 \
    }
GEMV4_SIGNED(q8_0)
GEMV4_SIGNED(iq4_nl)
GEMV4_SIGNED(mxfp4)

#define GEMV4_OFFSET_BLOCK(t, ib, ACC)                                                        \
    {                                                                                         \
        const __m256i a = load32(y[ib].qs[0]);                                                \
        __m256i p[4];                                                                         \
        UNROLL for (int r = 0; r < 4; r++) p[r] = _mm256_maddubs_epi16(decu_##t(ROW(t, r, ib)), a); \
        const __m256i off = _mm256_zextsi128_si256(_mm_slli_epi32(_mm_set1_epi32(y[ib].sum[0]), OFF_##t)); \
        const __m256i f = _mm256_sub_epi32(fold4_16(p[0], p[1], p[2], p[3]), off);           \
        const __m256 d = _mm256_mul_ps(DW4(t, ib, d), _mm256_set1_ps(y[ib].d[0]));            \
        ACC = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(f), ACC);                                 \
    }

#define GEMV4_OFFSET(t)                                                                       \
    void kern_avx2_gemv4_##t(const void *vw, size_t ws, const void *va, int n, float *s) {    \
        const uint8_t *w = vw;                                                                \
        const kern_block_q8x4 *y = va;                                                        \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                        \
        const int nb = n / KERN_QK;                                                           \
        int ib = 0;                                                                           \
        for (; ib + 1 < nb; ib += 2) {                                                        \
            GEMV4_OFFSET_BLOCK(t, ib, acc0)                                                   \
            GEMV4_OFFSET_BLOCK(t, ib + 1, acc1)                                               \
        }                                                                                     \
        if (ib < nb) GEMV4_OFFSET_BLOCK(t, ib, acc0)                                          \
        store4(_mm256_add_ps(acc0, acc1), s);                                                 \
    }
GEMV4_OFFSET(q4_0)
GEMV4_OFFSET(q5_0)

#define GEMV4_Q8_1_BLOCK(t, ib, ACC, SUMMS)                                                   \
    {                                                                                         \
        const __m256i a = load32(y[ib].qs[0]);                                                \
        __m256i p[4];                                                                         \
        UNROLL for (int r = 0; r < 4; r++) p[r] = _mm256_maddubs_epi16(dec_##t(ROW(t, r, ib)), a); \
        const __m256 d = _mm256_mul_ps(DW4(t, ib, d), _mm256_set1_ps(y[ib].d[0]));            \
        ACC = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(fold4_16(p[0], p[1], p[2], p[3])), ACC);  \
        SUMMS = _mm_fmadd_ps(_mm256_castps256_ps128(DW4(t, ib, m)), _mm_set1_ps(y[ib].s[0]), SUMMS); \
    }

#define GEMV4_Q8_1(t)                                                                         \
    void kern_avx2_gemv4_##t(const void *vw, size_t ws, const void *va, int n, float *s) {    \
        const uint8_t *w = vw;                                                                \
        const kern_block_q8x4 *y = va;                                                        \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                        \
        __m128 sm0 = _mm_setzero_ps(), sm1 = _mm_setzero_ps();                                \
        const int nb = n / KERN_QK;                                                           \
        int ib = 0;                                                                           \
        for (; ib + 1 < nb; ib += 2) {                                                        \
            GEMV4_Q8_1_BLOCK(t, ib, acc0, sm0)                                                \
            GEMV4_Q8_1_BLOCK(t, ib + 1, acc1, sm1)                                            \
        }                                                                                     \
        if (ib < nb) GEMV4_Q8_1_BLOCK(t, ib, acc0, sm0)                                       \
        float r[4];                                                                           \
        store4(_mm256_add_ps(acc0, acc1), r);                                                 \
        _mm_storeu_ps(s, _mm_add_ps(_mm_loadu_ps(r), _mm_add_ps(sm0, sm1)));                  \
    }
GEMV4_Q8_1(q4_1)
GEMV4_Q8_1(q5_1)
