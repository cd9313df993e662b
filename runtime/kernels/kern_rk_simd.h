/*
 * kern_rk_simd.h — the SIMD gemm leaves of the row-interleaved K-quant types
 * (kern_rk.h: Q4_K_R8, Q5_K_R8, Q6_K_R8, IQ4_XS_R8), written once and compiled twice: kern_rk_avx2.c (RK_VNNI 0)
 * and kern_rk_vnni.c (RK_VNNI 1, AVX-512 VL encoding: 32 ymm registers).
 * Included only by those two files; RK_LEAVES names the table to define.
 *
 * One row group (8 rows = the 8 int32 lanes of a ymm) x NTOK tokens.  A
 * chunk (32 bytes) holds 4 columns of the 8 rows; the token's 4 matching
 * Q8_K bytes are broadcast to every lane.  The integer sums S (and M, the
 * Q4_K/Q5_K min term, or O, the Q6_K offset term) of kern_rk.h are formed
 * exactly in int32:
 *   VNNI: per sub-block (Q4_K/Q5_K: 32 columns, Q6_K: 16) vpdpbusd of the
 *         unsigned codes against the int8 activations, then S += sc · that
 *         (vpmulld, lane = row);
 *   AVX2: vpmaddubsw (codes <= 63 against int8: |2·63·128| < 32768, never
 *         saturates) then vpmaddwd against the sub-block's scale in both
 *         16-bit halves of the row's lane, which is sc · Σ in one step.
 * M and O: vpmaddwd per lane of int16 pairs against the token's bsum pairs
 * (bs_2k, bs_2k+1): Q4_K/Q5_K (m_k, m_k), Q6_K (sc_2k, sc_2k+1).  Then the
 * f32 FMAs in the scalar reference's order, so every impl and token count
 * gives the same bits.
 */
#include <immintrin.h>
#include <string.h>

#include "kern_rk.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

INLINE __m256i bc32(const void *p) {
    int v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}
INLINE __m256i loadu(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
INLINE __m256i load8u(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
INLINE __m256 dw8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

#if RK_VNNI
#define RK_WIDE 16 /* 8 code vectors + 16 int32 sums + temporaries in 32 registers */
#else
#define RK_WIDE 4
#endif

/* token t's pointer, or token 0's for the unused slots of the last call (read, never stored) */
#define TOKEN_PTRS(at, a, as, nt, NTOK) \
    const kern_block_q8_k *at[NTOK];    \
    UNROLL for (int t = 0; t < NTOK; t++) at[t] = (a) + (size_t)(t < (nt) ? t : 0) * (as)

/* ---- Q4_K_R8 / Q5_K_R8 --------------------------------------------------------------- */

/* the unsigned codes of sub-block j (= pair j/2, nibble j&1), chunk c */
INLINE __m256i q45_u(const uint8_t *blk, int five, int j, int c) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i v = loadu(blk + 128 + 256 * (j / 2) + 32 * c);
    __m256i u = (j & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
    if (five) {
        const __m256i h = loadu(blk + 1152 + 32 * c), b4 = _mm256_set1_epi8(0x10);
        const __m256i hb = j <= 4 ? _mm256_and_si256(_mm256_slli_epi16(h, 4 - j), b4)
                                  : _mm256_and_si256(_mm256_srli_epi16(h, j - 4), b4);
        u = _mm256_or_si256(u, hb);
    }
    return u;
}

INLINE void gemm_q45(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                     size_t ldy, const int five, const int NTOK) {
    const int bb = five ? KERN_Q5_K_R8_BLOCK : KERN_Q4_K_R8_BLOCK;
    TOKEN_PTRS(at, a, as, nt, NTOK);
    __m256 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * bb;
        /* scales (VNNI: int32 per lane; AVX2: in both 16-bit halves) and mins (both halves) */
        __m256i sc[8], mp[8];
        UNROLL for (int j = 0; j < 8; j++) {
            const __m256i lo = load8u(blk + 32 + 8 * j);
            const __m256i h = _mm256_srli_epi32(load8u(blk + 96 + 8 * (j / 2)), 4 * (j & 1));
            const __m256i s = _mm256_or_si256(_mm256_and_si256(lo, m15), _mm256_slli_epi32(_mm256_and_si256(h, m3), 4));
            const __m256i m = _mm256_or_si256(_mm256_srli_epi32(lo, 4),
                                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2), m3), 4));
#if RK_VNNI
            sc[j] = s;
#else
            sc[j] = _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
#endif
            mp[j] = _mm256_or_si256(m, _mm256_slli_epi32(m, 16));
        }
        __m256i S[NTOK];
        UNROLL for (int t = 0; t < NTOK; t++) S[t] = _mm256_setzero_si256();
#if RK_VNNI
        for (int j = 0; j < 8; j++) {
            __m256i u[8];
            UNROLL for (int c = 0; c < 8; c++) u[c] = q45_u(blk, five, j, c);
            UNROLL for (int t = 0; t < NTOK; t++) {
                const int8_t *q = at[t][b].qs + 32 * j;
                __m256i s = _mm256_setzero_si256();
                UNROLL for (int c = 0; c < 8; c++) s = _mm256_dpbusd_epi32(s, u[c], bc32(q + 4 * c));
                S[t] = _mm256_add_epi32(S[t], _mm256_mullo_epi32(s, sc[j]));
            }
        }
#else
        for (int j = 0; j < 8; j++)
            UNROLL for (int c = 0; c < 8; c++) {
                const __m256i u = q45_u(blk, five, j, c);
                UNROLL for (int t = 0; t < NTOK; t++) {
                    const __m256i p = _mm256_maddubs_epi16(u, bc32(at[t][b].qs + 32 * j + 4 * c));
                    S[t] = _mm256_add_epi32(S[t], _mm256_madd_epi16(p, sc[j]));
                }
            }
#endif
        const __m256 dw = dw8(blk), dm = dw8(blk + 16);
        UNROLL for (int t = 0; t < NTOK; t++) {
            const kern_block_q8_k *ab = at[t] + b;
            /* M = Σ_j m_j·(bs_2j + bs_2j+1): (m_j, m_j) against the bsum pair */
            __m256i M = _mm256_setzero_si256();
            UNROLL for (int j = 0; j < 8; j++) M = _mm256_add_epi32(M, _mm256_madd_epi16(mp[j], bc32(ab->bsums + 2 * j)));
            const __m256 da = _mm256_set1_ps(ab->d);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S[t]), _mm256_mul_ps(dw, da), acc[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(), M)),
                                     _mm256_mul_ps(dm, da), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) _mm256_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

/* ---- Q6_K_R8 --------------------------------------------------------------------------- */

/* the 6-bit codes (0..63) of 32-column sub-block j (pair j/2, nibble j&1), chunk c */
INLINE __m256i q6_u(const uint8_t *blk, int j, int c) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i v = loadu(blk + 144 + 256 * (j / 2) + 32 * c);
    const __m256i lo = (j & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
    const __m256i h = loadu(blk + 1168 + 256 * (j / 4) + 32 * c);
    const int k = j & 3; /* bits 2k..2k+1 -> bits 4..5 */
    const __m256i hb = k == 0 ? _mm256_slli_epi16(h, 4) : k == 1 ? _mm256_slli_epi16(h, 2)
                     : k == 2 ? h : _mm256_srli_epi16(h, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hb, m30));
}

INLINE void gemm_q6(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                    size_t ldy, const int NTOK) {
    TOKEN_PTRS(at, a, as, nt, NTOK);
    __m256 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * KERN_Q6_K_R8_BLOCK;
        /* scp[k]: lane r = (sc_2k, sc_2k+1) of row r as int16; sc[s] per sub-block */
        __m256i scp[8], sc[16];
        UNROLL for (int k = 0; k < 8; k++) {
            scp[k] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 16 + 16 * k)));
#if RK_VNNI
            sc[2 * k] = _mm256_srai_epi32(_mm256_slli_epi32(scp[k], 16), 16);
            sc[2 * k + 1] = _mm256_srai_epi32(scp[k], 16);
#else
            sc[2 * k] = _mm256_blend_epi16(scp[k], _mm256_slli_epi32(scp[k], 16), 0xAA);
            sc[2 * k + 1] = _mm256_blend_epi16(_mm256_srli_epi32(scp[k], 16), scp[k], 0xAA);
#endif
        }
        __m256i S[NTOK];
        UNROLL for (int t = 0; t < NTOK; t++) S[t] = _mm256_setzero_si256();
#if RK_VNNI
        for (int j = 0; j < 8; j++) {
            __m256i u[8];
            UNROLL for (int c = 0; c < 8; c++) u[c] = q6_u(blk, j, c);
            UNROLL for (int t = 0; t < NTOK; t++) {
                const int8_t *q = at[t][b].qs + 32 * j;
                __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
                UNROLL for (int c = 0; c < 4; c++) {
                    s0 = _mm256_dpbusd_epi32(s0, u[c], bc32(q + 4 * c));
                    s1 = _mm256_dpbusd_epi32(s1, u[4 + c], bc32(q + 16 + 4 * c));
                }
                S[t] = _mm256_add_epi32(S[t], _mm256_add_epi32(_mm256_mullo_epi32(s0, sc[2 * j]),
                                                               _mm256_mullo_epi32(s1, sc[2 * j + 1])));
            }
        }
#else
        for (int j = 0; j < 8; j++)
            UNROLL for (int c = 0; c < 8; c++) {
                const __m256i u = q6_u(blk, j, c), s = sc[2 * j + (c >= 4)];
                UNROLL for (int t = 0; t < NTOK; t++) {
                    const __m256i p = _mm256_maddubs_epi16(u, bc32(at[t][b].qs + 32 * j + 4 * c));
                    S[t] = _mm256_add_epi32(S[t], _mm256_madd_epi16(p, s));
                }
            }
#endif
        const __m256 dw = dw8(blk);
        UNROLL for (int t = 0; t < NTOK; t++) {
            const kern_block_q8_k *ab = at[t] + b;
            __m256i O = _mm256_setzero_si256();
            UNROLL for (int k = 0; k < 8; k++) O = _mm256_add_epi32(O, _mm256_madd_epi16(scp[k], bc32(ab->bsums + 2 * k)));
            const __m256i tot = _mm256_sub_epi32(S[t], _mm256_slli_epi32(O, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(dw, _mm256_set1_ps(ab->d)), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) _mm256_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

/* ---- IQ4_XS_R8 ------------------------------------------------------------------------- */

/* codebook index of 8 rows x 4 columns: sub-block j, k 0..3 low nibbles of
 * chunk k (columns 4k..), 4..7 high nibbles of chunk k-4 (columns 16+4(k-4)..) */
INLINE __m256i iq4_idx(const uint8_t *blk, int j, int k) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), v = loadu(blk + 64 + 128 * j + 32 * (k & 3));
    return k < 4 ? _mm256_and_si256(v, m4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
}
/* (x, x) as int16 in both halves of each int32 lane (x in int16 range) */
INLINE __m256i pair16(__m256i x) {
    return _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(x, 16));
}

/* VNNI: u = value + 128 (unsigned) for vpdpbusd, and S = S' - 128·O with
 * O = Σ_j (ls_j - 32)·(bs_2j + bs_2j+1);  AVX2: ggml's sign trick
 * |v| x sign(a, v) (|a| <= 127: no overflow, no saturation) */
INLINE void gemm_iq4(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                     size_t ldy, const int NTOK) {
    TOKEN_PTRS(at, a, as, nt, NTOK);
    __m256 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm256_setzero_ps();
    const __m256i tv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kern_iq4nl_values));
#if RK_VNNI
    const __m256i tu = _mm256_xor_si256(tv, _mm256_set1_epi8(-128));
#else
    const __m256i tu = _mm256_abs_epi8(tv);
#endif
    const __m256i m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3), k32 = _mm256_set1_epi32(32);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * KERN_IQ4_XS_R8_BLOCK;
        const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(blk + 16)));
        __m256i sc[8], scp[8]; /* lane r: ls_j - 32 as int32; as an int16 pair */
        UNROLL for (int j = 0; j < 8; j++) {
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(load8u(blk + 32 + 8 * (j / 2)), 4 * (j & 1)), m15);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(sh, 2 * j), m3);
            sc[j] = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), k32);
            scp[j] = pair16(sc[j]);
        }
        __m256i S[NTOK];
        UNROLL for (int t = 0; t < NTOK; t++) S[t] = _mm256_setzero_si256();
#if RK_VNNI
        for (int j = 0; j < 8; j++) {
            __m256i u[8];
            UNROLL for (int k = 0; k < 8; k++) u[k] = _mm256_shuffle_epi8(tu, iq4_idx(blk, j, k));
            UNROLL for (int t = 0; t < NTOK; t++) {
                const int8_t *q = at[t][b].qs + 32 * j;
                __m256i s = _mm256_setzero_si256();
                UNROLL for (int k = 0; k < 8; k++) s = _mm256_dpbusd_epi32(s, u[k], bc32(q + 4 * k));
                S[t] = _mm256_add_epi32(S[t], _mm256_mullo_epi32(s, sc[j]));
            }
        }
#else
        for (int j = 0; j < 8; j++)
            UNROLL for (int k = 0; k < 8; k++) {
                const __m256i idx = iq4_idx(blk, j, k);
                const __m256i u = _mm256_shuffle_epi8(tu, idx), v = _mm256_shuffle_epi8(tv, idx);
                UNROLL for (int t = 0; t < NTOK; t++) {
                    const __m256i p = _mm256_maddubs_epi16(u, _mm256_sign_epi8(bc32(at[t][b].qs + 32 * j + 4 * k), v));
                    S[t] = _mm256_add_epi32(S[t], _mm256_madd_epi16(p, scp[j]));
                }
            }
#endif
        const __m256 dw = dw8(blk);
        UNROLL for (int t = 0; t < NTOK; t++) {
            const kern_block_q8_k *ab = at[t] + b;
#if RK_VNNI
            __m256i O = _mm256_setzero_si256();
            UNROLL for (int j = 0; j < 8; j++) O = _mm256_add_epi32(O, _mm256_madd_epi16(scp[j], bc32(ab->bsums + 2 * j)));
            const __m256i tot = _mm256_sub_epi32(S[t], _mm256_slli_epi32(O, 7));
#else
            const __m256i tot = S[t];
#endif
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(dw, _mm256_set1_ps(ab->d)), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) _mm256_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

#if RK_VNNI
/* ---- VNNI, two row groups per call: 16 rows = the 16 int32 lanes of a zmm --------------------------
 * Lanes 0..7 are group 0's rows, 8..15 the next group's (its super-block b
 * sits one group, nb super-blocks, further on), so the token's 4 bytes are
 * one 32-bit broadcast for all 16 lanes (vpdpbusd's {1to16} memory form)
 * and the activations stay plain Q8_K rows.  Per row the integer sums and
 * the f32 FMAs are the ymm kernel's (and the scalar reference's). */

INLINE __m512i ld2(const uint8_t *p0, const uint8_t *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(loadu(p0)), loadu(p1), 1);
}
/* 8 bytes of each group, zero-extended to 16 int32 lanes */
INLINE __m512i ld8x2u(const uint8_t *p0, const uint8_t *p1) {
    return _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)p0),
                                                   _mm_loadl_epi64((const __m128i *)p1)));
}
INLINE __m512 dw16(const uint8_t *p0, const uint8_t *p1) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p0)),
                                                   _mm_loadu_si128((const __m128i *)p1), 1));
}
INLINE __m512i bcz(const void *p) {
    int v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

INLINE __m512i q45_u2(const uint8_t *b0, const uint8_t *b1, int five, int j, int c) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const int o = 128 + 256 * (j / 2) + 32 * c;
    const __m512i v = ld2(b0 + o, b1 + o);
    __m512i u = (j & 1) ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m4) : _mm512_and_si512(v, m4);
    if (five) {
        const __m512i h = ld2(b0 + 1152 + 32 * c, b1 + 1152 + 32 * c), b4 = _mm512_set1_epi8(0x10);
        const __m512i hb = j <= 4 ? _mm512_and_si512(_mm512_slli_epi16(h, 4 - j), b4)
                                  : _mm512_and_si512(_mm512_srli_epi16(h, j - 4), b4);
        u = _mm512_or_si512(u, hb);
    }
    return u;
}

INLINE void gemm2_q45(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                      size_t ldy, const int five, const int NTOK) {
    const int bb = five ? KERN_Q5_K_R8_BLOCK : KERN_Q4_K_R8_BLOCK;
    const size_t gbytes = (size_t)nb * bb;
    TOKEN_PTRS(at, a, as, nt, NTOK);
    __m512 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm512_setzero_ps();
    const __m512i m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
    for (int b = 0; b < nb; b++) {
        const uint8_t *b0 = wg + (size_t)b * bb, *b1 = b0 + gbytes;
        __m512i sc[8], mp[8]; /* lane r: scale (int32); (min, min) as int16 pair */
        UNROLL for (int j = 0; j < 8; j++) {
            const __m512i lo = ld8x2u(b0 + 32 + 8 * j, b1 + 32 + 8 * j);
            const __m512i h = _mm512_srli_epi32(ld8x2u(b0 + 96 + 8 * (j / 2), b1 + 96 + 8 * (j / 2)), 4 * (j & 1));
            sc[j] = _mm512_or_si512(_mm512_and_si512(lo, m15), _mm512_slli_epi32(_mm512_and_si512(h, m3), 4));
            const __m512i m = _mm512_or_si512(_mm512_srli_epi32(lo, 4),
                                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2), m3), 4));
            mp[j] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
        }
        __m512i S[NTOK];
        UNROLL for (int t = 0; t < NTOK; t++) S[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            __m512i u[8];
            UNROLL for (int c = 0; c < 8; c++) u[c] = q45_u2(b0, b1, five, j, c);
            UNROLL for (int t = 0; t < NTOK; t++) {
                const int8_t *q = at[t][b].qs + 32 * j;
                __m512i s = _mm512_setzero_si512();
                UNROLL for (int c = 0; c < 8; c++) s = _mm512_dpbusd_epi32(s, u[c], bcz(q + 4 * c));
                S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(s, sc[j]));
            }
        }
        const __m512 dw = dw16(b0, b1), dm = dw16(b0 + 16, b1 + 16);
        UNROLL for (int t = 0; t < NTOK; t++) {
            const kern_block_q8_k *ab = at[t] + b;
            __m512i M = _mm512_setzero_si512();
            UNROLL for (int j = 0; j < 8; j++) M = _mm512_dpwssd_epi32(M, mp[j], bcz(ab->bsums + 2 * j));
            const __m512 da = _mm512_set1_ps(ab->d);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(S[t]), _mm512_mul_ps(dw, da), acc[t]);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_setzero_si512(), M)),
                                     _mm512_mul_ps(dm, da), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) _mm512_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

INLINE __m512i q6_u2(const uint8_t *b0, const uint8_t *b1, int j, int c) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const int o = 144 + 256 * (j / 2) + 32 * c, oh = 1168 + 256 * (j / 4) + 32 * c;
    const __m512i v = ld2(b0 + o, b1 + o);
    const __m512i lo = (j & 1) ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m4) : _mm512_and_si512(v, m4);
    const __m512i h = ld2(b0 + oh, b1 + oh);
    const int k = j & 3; /* bits 2k..2k+1 -> bits 4..5 */
    const __m512i hb = k == 0 ? _mm512_slli_epi16(h, 4) : k == 1 ? _mm512_slli_epi16(h, 2)
                     : k == 2 ? h : _mm512_srli_epi16(h, 2);
    return _mm512_or_si512(lo, _mm512_and_si512(hb, m30));
}

INLINE void gemm2_q6(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                     size_t ldy, const int NTOK) {
    const size_t gbytes = (size_t)nb * KERN_Q6_K_R8_BLOCK;
    TOKEN_PTRS(at, a, as, nt, NTOK);
    __m512 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *b0 = wg + (size_t)b * KERN_Q6_K_R8_BLOCK, *b1 = b0 + gbytes;
        /* scp[k]: lane r = (sc_2k, sc_2k+1) of row r as int16; sc[s] per sub-block of 16 */
        __m512i scp[8], sc[16];
        UNROLL for (int k = 0; k < 8; k++) {
            const __m256i v = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 16 + 16 * k))),
                _mm_loadu_si128((const __m128i *)(b1 + 16 + 16 * k)), 1);
            scp[k] = _mm512_cvtepi8_epi16(v);
            sc[2 * k] = _mm512_srai_epi32(_mm512_slli_epi32(scp[k], 16), 16);
            sc[2 * k + 1] = _mm512_srai_epi32(scp[k], 16);
        }
        __m512i S[NTOK];
        UNROLL for (int t = 0; t < NTOK; t++) S[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            __m512i u[8];
            UNROLL for (int c = 0; c < 8; c++) u[c] = q6_u2(b0, b1, j, c);
            UNROLL for (int t = 0; t < NTOK; t++) {
                const int8_t *q = at[t][b].qs + 32 * j;
                __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
                UNROLL for (int c = 0; c < 4; c++) {
                    s0 = _mm512_dpbusd_epi32(s0, u[c], bcz(q + 4 * c));
                    s1 = _mm512_dpbusd_epi32(s1, u[4 + c], bcz(q + 16 + 4 * c));
                }
                S[t] = _mm512_add_epi32(S[t], _mm512_add_epi32(_mm512_mullo_epi32(s0, sc[2 * j]),
                                                               _mm512_mullo_epi32(s1, sc[2 * j + 1])));
            }
        }
        const __m512 dw = dw16(b0, b1);
        UNROLL for (int t = 0; t < NTOK; t++) {
            const kern_block_q8_k *ab = at[t] + b;
            __m512i O = _mm512_setzero_si512();
            UNROLL for (int k = 0; k < 8; k++) O = _mm512_dpwssd_epi32(O, scp[k], bcz(ab->bsums + 2 * k));
            const __m512i tot = _mm512_sub_epi32(S[t], _mm512_slli_epi32(O, 5));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), _mm512_mul_ps(dw, _mm512_set1_ps(ab->d)), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) _mm512_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

INLINE __m512i iq4_idx2(const uint8_t *b0, const uint8_t *b1, int j, int k) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const int o = 64 + 128 * j + 32 * (k & 3);
    const __m512i v = ld2(b0 + o, b1 + o);
    return k < 4 ? _mm512_and_si512(v, m4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
}

INLINE void gemm2_iq4(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                      size_t ldy, const int NTOK) {
    const size_t gbytes = (size_t)nb * KERN_IQ4_XS_R8_BLOCK;
    TOKEN_PTRS(at, a, as, nt, NTOK);
    __m512 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm512_setzero_ps();
    const __m512i tu = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kern_iq4nl_values)),
                                        _mm512_set1_epi8(-128));
    const __m512i m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3), k32 = _mm512_set1_epi32(32);
    const __m512i lo16 = _mm512_set1_epi32(0xffff);
    for (int b = 0; b < nb; b++) {
        const uint8_t *b0 = wg + (size_t)b * KERN_IQ4_XS_R8_BLOCK, *b1 = b0 + gbytes;
        const __m512i sh = _mm512_cvtepu16_epi32(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 16))), _mm_loadu_si128((const __m128i *)(b1 + 16)), 1));
        __m512i sc[8], scp[8];
        UNROLL for (int j = 0; j < 8; j++) {
            const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(ld8x2u(b0 + 32 + 8 * (j / 2), b1 + 32 + 8 * (j / 2)),
                                                                  4 * (j & 1)), m15);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * j), m3);
            sc[j] = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), k32);
            scp[j] = _mm512_or_si512(_mm512_and_si512(sc[j], lo16), _mm512_slli_epi32(sc[j], 16));
        }
        __m512i S[NTOK];
        UNROLL for (int t = 0; t < NTOK; t++) S[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            __m512i u[8];
            UNROLL for (int k = 0; k < 8; k++) u[k] = _mm512_shuffle_epi8(tu, iq4_idx2(b0, b1, j, k));
            UNROLL for (int t = 0; t < NTOK; t++) {
                const int8_t *q = at[t][b].qs + 32 * j;
                __m512i s = _mm512_setzero_si512();
                UNROLL for (int k = 0; k < 8; k++) s = _mm512_dpbusd_epi32(s, u[k], bcz(q + 4 * k));
                S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(s, sc[j]));
            }
        }
        const __m512 dw = dw16(b0, b1);
        UNROLL for (int t = 0; t < NTOK; t++) {
            const kern_block_q8_k *ab = at[t] + b;
            __m512i O = _mm512_setzero_si512();
            UNROLL for (int j = 0; j < 8; j++) O = _mm512_dpwssd_epi32(O, scp[j], bcz(ab->bsums + 2 * j));
            const __m512i tot = _mm512_sub_epi32(S[t], _mm512_slli_epi32(O, 7));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), _mm512_mul_ps(dw, _mm512_set1_ps(ab->d)), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) _mm512_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

INLINE void body2(int kind, const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                  size_t ldy, const int NTOK) {
    if (kind == 3) gemm2_iq4((const uint8_t *)wg, a, as, nb, nt, y, ldy, NTOK);
    else if (kind == 2) gemm2_q6((const uint8_t *)wg, a, as, nb, nt, y, ldy, NTOK);
    else gemm2_q45((const uint8_t *)wg, a, as, nb, nt, y, ldy, kind, NTOK);
}

#define RK_ENTRY2(name, kind)                                                                          \
    static void name(const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,    \
                     size_t ldy) {                                                                     \
        if (nt == 1) {                                                                                 \
            body2(kind, wg, a, as, nb, 1, y, ldy, 1);                                                  \
            return;                                                                                    \
        }                                                                                              \
        for (int t0 = 0; t0 < nt; t0 += RK_WIDE) {                                                     \
            const int n = nt - t0 < RK_WIDE ? nt - t0 : RK_WIDE;                                       \
            if (n <= 4) body2(kind, wg, a + (size_t)t0 * as, as, nb, n, y + (size_t)t0 * ldy, ldy, 4);   \
            else if (n <= 8) body2(kind, wg, a + (size_t)t0 * as, as, nb, n, y + (size_t)t0 * ldy, ldy, 8); \
            else body2(kind, wg, a + (size_t)t0 * as, as, nb, n, y + (size_t)t0 * ldy, ldy, RK_WIDE);    \
        }                                                                                              \
    }
RK_ENTRY2(gemm2_q4k_entry, 0)
RK_ENTRY2(gemm2_q5k_entry, 1)
RK_ENTRY2(gemm2_q6k_entry, 2)
RK_ENTRY2(gemm2_iq4xs_entry, 3)
#define RK_GEMM2 {gemm2_q4k_entry, gemm2_q5k_entry, gemm2_q6k_entry, gemm2_iq4xs_entry}
#else
#define RK_GEMM2 {NULL}
#endif

/* ---- entries: NTOK 1 (decode), 4, (8,) RK_WIDE --------------------------------------------------- */

INLINE void body(int kind, const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                 size_t ldy, const int NTOK) {
    if (kind == 3) gemm_iq4((const uint8_t *)wg, a, as, nb, nt, y, ldy, NTOK);
    else if (kind == 2) gemm_q6((const uint8_t *)wg, a, as, nb, nt, y, ldy, NTOK);
    else gemm_q45((const uint8_t *)wg, a, as, nb, nt, y, ldy, kind, NTOK);
}

#define RK_ENTRY(name, kind)                                                                          \
    static void name(const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,   \
                     size_t ldy) {                                                                    \
        if (nt == 1) {                                                                                \
            body(kind, wg, a, as, nb, 1, y, ldy, 1);                                                  \
            return;                                                                                   \
        }                                                                                             \
        for (int t0 = 0; t0 < nt; t0 += RK_WIDE) {                                                    \
            const int n = nt - t0 < RK_WIDE ? nt - t0 : RK_WIDE;                                      \
            if (n <= 4) body(kind, wg, a + (size_t)t0 * as, as, nb, n, y + (size_t)t0 * ldy, ldy, 4);   \
            else if (RK_WIDE > 8 && n <= 8)                                                           \
                body(kind, wg, a + (size_t)t0 * as, as, nb, n, y + (size_t)t0 * ldy, ldy, 8);         \
            else body(kind, wg, a + (size_t)t0 * as, as, nb, n, y + (size_t)t0 * ldy, ldy, RK_WIDE);    \
        }                                                                                             \
    }
RK_ENTRY(gemm_q4k_entry, 0)
RK_ENTRY(gemm_q5k_entry, 1)
RK_ENTRY(gemm_q6k_entry, 2)
RK_ENTRY(gemm_iq4xs_entry, 3)

const kern_rk_leaves RK_LEAVES = {{gemm_q4k_entry, gemm_q5k_entry, gemm_q6k_entry, gemm_iq4xs_entry}, RK_GEMM2};
