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
 *
 * VNNI, 1..3 tokens (gemv_q4 / gemv_q6, Q4_K_R8 and Q6_K_R8, with a
 * software prefetch KERN_DECODE_PF_BYTES ahead): the generic leaf's sub-block loop is not unrolled by the compiler (a branch
 * per chunk on j's nibble and shift), so these leaves are written out with
 * every index a constant, each group byte loaded once (Q6_K's qh twice,
 * the second time from L1), and the unpacking
 * cut to a few ops per code (comments there).  1 thread, leaf alone, cache-
 * resident 1024 x 1024, nt 1 / 2: q4k 70 -> 110-160 / 59 -> 150-200 GFLOP/s,
 * q6k 30 -> 75-105 / 47 -> 100-140.  The
 * loads walk each region of a super-block in address order (Q4_K: pair p
 * outer, chunk inner; Q6_K: ql pair outer, its qh chunk row re-read from L1
 * for the second pair): a chunk-outer order over 3-4 regions measured up to
 * 2x slower from DRAM.
 */
#include "kern_rk.h"
#include "kern_x86_simd.h"

#define UNROLL _Pragma("GCC unroll 16")

INLINE __m256i load8u(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

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
        if (NTOK == 1) prefetch_decode(blk, (size_t)bb);
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
        if (NTOK == 1) prefetch_decode(blk, KERN_Q6_K_R8_BLOCK);
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
        if (NTOK == 1) prefetch_decode(blk, KERN_IQ4_XS_R8_BLOCK);
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

/* 8 bytes of each group, zero-extended to 16 int32 lanes */
INLINE __m512i ld8x2u(const uint8_t *p0, const uint8_t *p1) {
    return _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)p0),
                                                   _mm_loadl_epi64((const __m128i *)p1)));
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

/* lane r of each group: sub-block j's 6-bit scale (sc) or min (mn) of a
 * Q4_K/Q5_K super-block (kern_rk.h layout: bytes 32.. low 6 bits, 96.. the
 * high ones) */
INLINE __m512i q45_sc2(const uint8_t *b0, const uint8_t *b1, int j, int min) {
    const __m512i m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3);
    const __m512i lo = ld8x2u(b0 + 32 + 8 * j, b1 + 32 + 8 * j);
    const __m512i h = _mm512_srli_epi32(ld8x2u(b0 + 96 + 8 * (j / 2), b1 + 96 + 8 * (j / 2)), 4 * (j & 1));
    return min ? _mm512_or_si512(_mm512_srli_epi32(lo, 4),
                                 _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2), m3), 4))
               : _mm512_or_si512(_mm512_and_si512(lo, m15), _mm512_slli_epi32(_mm512_and_si512(h, m3), 4));
}

/* Sub-block outer, tokens inner, each sub-block's scale decoded at its turn
 * and the mins after the sub-block loop: 16 sums + 8 code vectors +
 * temporaries fit the 32 zmm at NTOK 16, where all 8 scales and 8 mins
 * decoded up front (the loop over sub-blocks not unrolled) spilled. */
INLINE void gemm2_q45(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                      size_t ldy, const int five, const int NTOK) {
    const int bb = five ? KERN_Q5_K_R8_BLOCK : KERN_Q4_K_R8_BLOCK;
    const size_t gbytes = (size_t)nb * bb;
    TOKEN_PTRS(at, a, as, nt, NTOK);
    __m512 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *b0 = wg + (size_t)b * bb, *b1 = b0 + gbytes;
        __m512i S[NTOK];
        UNROLL for (int t = 0; t < NTOK; t++) S[t] = _mm512_setzero_si512();
        UNROLL for (int j = 0; j < 8; j++) {
            __m512i u[8];
            UNROLL for (int c = 0; c < 8; c++) u[c] = q45_u2(b0, b1, five, j, c);
            const __m512i sc = q45_sc2(b0, b1, j, 0);
            UNROLL for (int t = 0; t < NTOK; t++) {
                const int8_t *q = at[t][b].qs + 32 * j;
                __m512i s = _mm512_setzero_si512();
                UNROLL for (int c = 0; c < 8; c++) s = _mm512_dpbusd_epi32(s, u[c], bcz(q + 4 * c));
                S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(s, sc));
            }
        }
        __m512i mp[8]; /* lane r: (min, min) as an int16 pair */
        UNROLL for (int j = 0; j < 8; j++) {
            const __m512i m = q45_sc2(b0, b1, j, 1);
            mp[j] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
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

/* lane r of each group: the int8 scales (sc_2k, sc_2k+1) of Q6_K row r as an int16 pair */
INLINE __m512i q6_scp2(const uint8_t *b0, const uint8_t *b1, int k) {
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 16 + 16 * k))),
                                              _mm_loadu_si128((const __m128i *)(b1 + 16 + 16 * k)), 1);
    return _mm512_cvtepi8_epi16(v);
}

/* Sub-block outer, tokens inner, as gemm2_q45 (why there). */
INLINE void gemm2_q6(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                     size_t ldy, const int NTOK) {
    const size_t gbytes = (size_t)nb * KERN_Q6_K_R8_BLOCK;
    TOKEN_PTRS(at, a, as, nt, NTOK);
    __m512 acc[NTOK];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *b0 = wg + (size_t)b * KERN_Q6_K_R8_BLOCK, *b1 = b0 + gbytes;
        __m512i S[NTOK];
        UNROLL for (int t = 0; t < NTOK; t++) S[t] = _mm512_setzero_si512();
        UNROLL for (int j = 0; j < 8; j++) {
            __m512i u[8];
            UNROLL for (int c = 0; c < 8; c++) u[c] = q6_u2(b0, b1, j, c);
            /* the scales of the 16-column sub-blocks 2j and 2j + 1 (int32 per lane) */
            const __m512i scp = q6_scp2(b0, b1, j);
            const __m512i sc0 = _mm512_srai_epi32(_mm512_slli_epi32(scp, 16), 16), sc1 = _mm512_srai_epi32(scp, 16);
            UNROLL for (int t = 0; t < NTOK; t++) {
                const int8_t *q = at[t][b].qs + 32 * j;
                __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
                UNROLL for (int c = 0; c < 4; c++) {
                    s0 = _mm512_dpbusd_epi32(s0, u[c], bcz(q + 4 * c));
                    s1 = _mm512_dpbusd_epi32(s1, u[4 + c], bcz(q + 16 + 4 * c));
                }
                S[t] = _mm512_add_epi32(S[t], _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0), _mm512_mullo_epi32(s1, sc1)));
            }
        }
        __m512i scp[8];
        UNROLL for (int k = 0; k < 8; k++) scp[k] = q6_scp2(b0, b1, k);
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
        __m512i scp[8]; /* lane r: (sc_j, sc_j) as an int16 pair, for the offset term */
        __m512i S[NTOK];
        UNROLL for (int t = 0; t < NTOK; t++) S[t] = _mm512_setzero_si512();
        UNROLL for (int j = 0; j < 8; j++) { /* sub-block outer, tokens inner, as gemm2_q45 */
            const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(ld8x2u(b0 + 32 + 8 * (j / 2), b1 + 32 + 8 * (j / 2)),
                                                                  4 * (j & 1)), m15);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * j), m3);
            const __m512i sc = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), k32);
            scp[j] = _mm512_or_si512(_mm512_and_si512(sc, lo16), _mm512_slli_epi32(sc, 16));
            __m512i u[8];
            UNROLL for (int k = 0; k < 8; k++) u[k] = _mm512_shuffle_epi8(tu, iq4_idx2(b0, b1, j, k));
            UNROLL for (int t = 0; t < NTOK; t++) {
                const int8_t *q = at[t][b].qs + 32 * j;
                __m512i s = _mm512_setzero_si512();
                UNROLL for (int k = 0; k < 8; k++) s = _mm512_dpbusd_epi32(s, u[k], bcz(q + 4 * k));
                S[t] = _mm512_add_epi32(S[t], _mm512_mullo_epi32(s, sc));
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

#if RK_VNNI
/* ---- VNNI, one token (decode): Q6_K_R8 ----------------------------------------------------------
 * The same integer sums as gemm_q6 with NTOK 1, written out so that every
 * 6-bit code takes few ops: qh chunk (h, c) holds the high bits of
 * sub-blocks 4h..4h+3 of chunk c and goes with ql chunks (2h, c) and
 * (2h+1, c) (loaded for each: address order, above), and each code is one
 * bitwise select (vpternlogd "C ? A : B" with C = 0x0f in every byte) of the
 * low nibble and the high bits already at bits 4..5 with bits 6..7 clear:
 *   Hm = H & 0x33 (bits 0-1, 4-5), Hn = H & 0xcc (bits 2-3, 6-7):
 *   k 0: ql(2h) low  | Hm << 4     k 1: ql(2h) >> 4  | Hn << 2
 *   k 2: ql(2h+1) low | Hm         k 3: ql(2h+1) >> 4 | Hn >> 2
 * (16-bit shifts: what crosses a byte lands in bits the select drops).
 * Per sub-block of 16 columns a vpdpbusd sum, then S += sc · sum (vpmulld);
 * the f32 FMA per super-block is the reference's. */
#define SEL_LO4 0xE4 /* vpternlogd imm: C ? A : B */

INLINE __m256i q6_code(__m256i lo, __m256i hb, __m256i m0f) { return _mm256_ternarylogic_epi32(lo, hb, m0f, SEL_LO4); }

INLINE void gemv_q6(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, float *y, size_t ldy,
                    const int NT) {
    const __m256i m0f = _mm256_set1_epi8(0x0f), m33 = _mm256_set1_epi8(0x33), mcc = _mm256_set1_epi8((char)0xcc);
    __m256 acc[NT];
    UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * KERN_Q6_K_R8_BLOCK;
        prefetch_decode(blk, KERN_Q6_K_R8_BLOCK);
        __m256i S[NT], O[NT];
        UNROLL for (int t = 0; t < NT; t++) S[t] = O[t] = _mm256_setzero_si256();
        UNROLL for (int p = 0; p < 4; p++) { /* ql pair p: sub-blocks 4p..4p+3; qh chunk row h = p / 2 */
            const int h = p / 2;
            __m256i d[NT][4]; /* sub-block 4p + i: j = 2p + i/2, chunks (i&1) ? 4..7 : 0..3 */
            UNROLL for (int t = 0; t < NT; t++) UNROLL for (int i = 0; i < 4; i++) d[t][i] = _mm256_setzero_si256();
            UNROLL for (int c = 0; c < 8; c++) {
                const __m256i L = loadu(blk + 144 + 256 * p + 32 * c);
                const __m256i H = loadu(blk + 1168 + 256 * h + 32 * c);
                const __m256i Hm = _mm256_and_si256(H, m33), Hn = _mm256_and_si256(H, mcc);
                const __m256i u0 = q6_code(L, (p & 1) ? Hm : _mm256_slli_epi16(Hm, 4), m0f);
                const __m256i u1 = q6_code(_mm256_srli_epi16(L, 4), (p & 1) ? _mm256_srli_epi16(Hn, 2) : _mm256_slli_epi16(Hn, 2), m0f);
                const int hi = c >= 4;
                UNROLL for (int t = 0; t < NT; t++) {
                    const int8_t *qc = a[(size_t)t * as + b].qs + 64 * p + 4 * c;
                    d[t][0 + hi] = _mm256_dpbusd_epi32(d[t][0 + hi], u0, bc32(qc));
                    d[t][2 + hi] = _mm256_dpbusd_epi32(d[t][2 + hi], u1, bc32(qc + 32));
                }
            }
            UNROLL for (int k = 0; k < 2; k++) { /* scale pair k' = 2p + k: sub-blocks 2k', 2k'+1 */
                const __m256i scp = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 16 + 16 * (2 * p + k))));
                const __m256i sc0 = _mm256_srai_epi32(_mm256_slli_epi32(scp, 16), 16), sc1 = _mm256_srai_epi32(scp, 16);
                UNROLL for (int t = 0; t < NT; t++) {
                    S[t] = _mm256_add_epi32(S[t], _mm256_add_epi32(_mm256_mullo_epi32(d[t][2 * k], sc0),
                                                                   _mm256_mullo_epi32(d[t][2 * k + 1], sc1)));
                    O[t] = _mm256_dpwssd_epi32(O[t], scp, bc32(a[(size_t)t * as + b].bsums + 2 * (2 * p + k)));
                }
            }
        }
        const __m256 dw = dw8(blk);
        UNROLL for (int t = 0; t < NT; t++) {
            const __m256i tot = _mm256_sub_epi32(S[t], _mm256_slli_epi32(O[t], 5));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(dw, _mm256_set1_ps(a[(size_t)t * as + b].d)), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NT; t++) _mm256_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

/* ---- VNNI, one token (decode): Q4_K_R8 ----------------------------------------------------------
 * gemm_q45's integer sums for Q4_K with NTOK 1, written out:
 *   - a qs chunk's high nibbles go to vpdpbusd as L & 0xf0 (16 x the code,
 *     <= 240: still a u8), so that sub-block's sum is 16 x the reference's
 *     and one exact arithmetic shift per odd sub-block undoes it;
 *   - the 8 x 8 scales and mins are unpacked as bytes, 32 at a time
 *     (sc = (lo & 15) | (hi & 3) << 4, m = lo >> 4 | (hi & 12) << 2),
 *     through a 128-byte stack buffer into int32 lanes (sc) and int16 pairs
 *     (m_2i, m_2i+1) per row for vpdpwssd against (B_2i, B_2i+1), B_j =
 *     bsum_2j + bsum_2j+1 (|B| <= 4096: int16).
 * Same S, same M, so the reference's two FMAs give its bits. */
INLINE void gemv_q4(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, float *y, size_t ldy,
                    const int NT) {
    const __m256i m0f = _mm256_set1_epi8(0x0f), mf0 = _mm256_set1_epi8((char)0xf0);
    const __m256i m03 = _mm256_set1_epi8(0x03), m0c = _mm256_set1_epi8(0x0c);
    /* in-lane byte order (0, 8, 1, 9, ..., 7, 15): rows' (m_2i, m_2i+1) byte pairs */
    const __m256i ilv = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
    __m256 acc[NT];
    UNROLL for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * KERN_Q4_K_R8_BLOCK;
        prefetch_decode(blk, KERN_Q4_K_R8_BLOCK);
        /* scales and mins: byte 8j + r (A0: j 0..3, A1: j 4..7); high bits per j from the pair bytes */
        _Alignas(32) uint8_t scb[64], mb[64];
        _Alignas(16) int32_t bp[NT][4];
        {
            const __m256i A0 = loadu(blk + 32), A1 = loadu(blk + 64), Hb = loadu(blk + 96);
            const __m256i Hl = _mm256_and_si256(Hb, m0f), Hh = _mm256_and_si256(_mm256_srli_epi16(Hb, 4), m0f);
            const __m256i X = _mm256_unpacklo_epi64(Hl, Hh), Y = _mm256_unpackhi_epi64(Hl, Hh); /* j 0,1|4,5 ; 2,3|6,7 */
            const __m256i H0 = _mm256_permute2x128_si256(X, Y, 0x20), H1 = _mm256_permute2x128_si256(X, Y, 0x31);
            const __m256i s0 = _mm256_ternarylogic_epi32(A0, _mm256_slli_epi16(_mm256_and_si256(H0, m03), 4), m0f, SEL_LO4);
            const __m256i s1 = _mm256_ternarylogic_epi32(A1, _mm256_slli_epi16(_mm256_and_si256(H1, m03), 4), m0f, SEL_LO4);
            const __m256i n0 = _mm256_ternarylogic_epi32(_mm256_srli_epi16(A0, 4), _mm256_slli_epi16(_mm256_and_si256(H0, m0c), 2), m0f, SEL_LO4);
            const __m256i n1 = _mm256_ternarylogic_epi32(_mm256_srli_epi16(A1, 4), _mm256_slli_epi16(_mm256_and_si256(H1, m0c), 2), m0f, SEL_LO4);
            _mm256_store_si256((__m256i *)scb, s0);
            _mm256_store_si256((__m256i *)(scb + 32), s1);
            _mm256_store_si256((__m256i *)mb, _mm256_shuffle_epi8(n0, ilv));
            _mm256_store_si256((__m256i *)(mb + 32), _mm256_shuffle_epi8(n1, ilv));
            UNROLL for (int t = 0; t < NT; t++) {
                const int16_t *bs = a[(size_t)t * as + b].bsums;
                const __m128i bs0 = _mm_loadu_si128((const __m128i *)bs), bs1 = _mm_loadu_si128((const __m128i *)(bs + 8));
                _mm_store_si128((__m128i *)bp[t], _mm_hadd_epi16(bs0, bs1)); /* int16 B_0..B_7 */
            }
        }
        __m256i d[NT][8];
        UNROLL for (int t = 0; t < NT; t++) UNROLL for (int j = 0; j < 8; j++) d[t][j] = _mm256_setzero_si256();
        UNROLL for (int p = 0; p < 4; p++)
            UNROLL for (int c = 0; c < 8; c++) {
                const __m256i L = loadu(blk + 128 + 256 * p + 32 * c);
                const __m256i lo = _mm256_and_si256(L, m0f), hi = _mm256_and_si256(L, mf0);
                UNROLL for (int t = 0; t < NT; t++) {
                    const int8_t *q = a[(size_t)t * as + b].qs + 64 * p + 4 * c;
                    d[t][2 * p] = _mm256_dpbusd_epi32(d[t][2 * p], lo, bc32(q));
                    d[t][2 * p + 1] = _mm256_dpbusd_epi32(d[t][2 * p + 1], hi, bc32(q + 32));
                }
            }
        const __m256 dw = dw8(blk), dm = dw8(blk + 16);
        UNROLL for (int t = 0; t < NT; t++) {
            __m256i S0 = _mm256_setzero_si256(), S1 = _mm256_setzero_si256(), M = _mm256_setzero_si256();
            UNROLL for (int j = 0; j < 8; j += 2) {
                S0 = _mm256_add_epi32(S0, _mm256_mullo_epi32(d[t][j], load8u(scb + 8 * j)));
                S1 = _mm256_add_epi32(S1, _mm256_mullo_epi32(_mm256_srai_epi32(d[t][j + 1], 4), load8u(scb + 8 * j + 8)));
            }
            UNROLL for (int i = 0; i < 4; i++)
                M = _mm256_dpwssd_epi32(M, _mm256_cvtepu8_epi16(_mm_load_si128((const __m128i *)(mb + 16 * i))),
                                        _mm256_set1_epi32(bp[t][i]));
            const __m256 da = _mm256_set1_ps(a[(size_t)t * as + b].d);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(S0, S1)), _mm256_mul_ps(dw, da), acc[t]);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(), M)), _mm256_mul_ps(dm, da), acc[t]);
        }
    }
    UNROLL for (int t = 0; t < NT; t++) _mm256_storeu_ps(y + (size_t)t * ldy, acc[t]);
}
/* the few-token leaf (nt 1..3) of type kind (kern_rk_index): 1; or 0 where there is none. */
INLINE int gemv_few(int kind, const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                    size_t ldy) {
    if (nt < 1 || nt > 3 || (kind != 0 && kind != 2)) return 0;
    if (kind == 2) {
        if (nt == 1) gemv_q6((const uint8_t *)wg, a, as, nb, y, ldy, 1);
        else if (nt == 2) gemv_q6((const uint8_t *)wg, a, as, nb, y, ldy, 2);
        else gemv_q6((const uint8_t *)wg, a, as, nb, y, ldy, 3);
    } else {
        if (nt == 1) gemv_q4((const uint8_t *)wg, a, as, nb, y, ldy, 1);
        else if (nt == 2) gemv_q4((const uint8_t *)wg, a, as, nb, y, ldy, 2);
        else gemv_q4((const uint8_t *)wg, a, as, nb, y, ldy, 3);
    }
    return 1;
}
#else
INLINE int gemv_few(int kind, const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                    size_t ldy) {
    (void)kind, (void)wg, (void)a, (void)as, (void)nb, (void)nt, (void)y, (void)ldy;
    return 0;
}
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
        if (gemv_few(kind, wg, a, as, nb, nt, y, ldy)) return;                                      \
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
