/*
 * kern_rk_neon_int.h — the aarch64 gemm leaves of the row-interleaved
 * K-quant types (kern_rk.h), written once and compiled twice:
 * kern_rk_neon.c (NEON_DOTPROD 0: the 4-byte dot emulated with smull +
 * saddlp + addp, any AArch64 CPU) and kern_rk_dotprod.c (NEON_DOTPROD 1:
 * sdot, built with +dotprod and run only where kern_cpu_dotprod() says so;
 * kern_r8's impl choice, KERN_R8_NEON / KERN_R8_DOTPROD).  RK_LEAVES names
 * the table to define.
 *
 * A chunk (32 bytes) holds 4 columns of the 8 rows of a group: its two
 * q-registers are rows 0-3 and rows 4-7, 4 bytes per 32-bit lane, so one
 * sdot against the token's 4 matching Q8_K bytes (ld1r to every lane) gives
 * 4 rows' partial sums.  Codes are 0..31 (Q4_K/Q5_K) or 0..63 (Q6_K), exact
 * as signed bytes.  Per sub-block the int32 sums are scaled by the row's
 * scale (mla) into S; the Q4_K/Q5_K min term M and the Q6_K offset O are
 * int32 too, then the f32 FMAs of the scalar reference in its order
 * (kern_rk.c sc_gemm): every result is the scalar reference's bits, for any
 * token count and thread count.
 */
#include <arm_neon.h>
#include <string.h>

#include "kern_rk.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* acc[l] += Σ_{i<4} a[4l+i]·b[4l+i] */
INLINE int32x4_t dot4(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if NEON_DOTPROD
    return vdotq_s32(acc, a, b);
#else
    const int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t p1 = vmull_high_s8(a, b);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)));
#endif
}

/* the 4 activation bytes at p in every lane */
INLINE int8x16_t bc4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

/* 8 f16 at p -> rows 0-3, 4-7 */
INLINE void f16x8(const uint8_t *p, float32x4_t *lo, float32x4_t *hi) {
    const float16x8_t d = vreinterpretq_f16_u8(vld1q_u8(p));
    *lo = vcvt_f32_f16(vget_low_f16(d));
    *hi = vcvt_high_f32_f16(d);
}

/* 8 bytes at p (one per row) -> int32 rows 0-3, 4-7 */
INLINE void u8x8(uint8x8_t v, int32x4_t *lo, int32x4_t *hi) {
    const uint16x8_t w = vmovl_u8(v);
    *lo = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w)));
    *hi = vreinterpretq_s32_u32(vmovl_high_u16(w));
}

/* token t's block pointer; unused slots of a partial call read token 0 (never stored) */
#define TOKEN_PTRS(at, a, as, nt, NTOK) \
    const kern_block_q8_k *at[NTOK];    \
    UNROLL for (int t = 0; t < NTOK; t++) at[t] = (a) + (size_t)(t < (nt) ? t : 0) * (as)

/* ---- Q4_K_R8 / Q5_K_R8 -------------------------------------------------------------------- */

/* sub-block j's codes, chunk c, rows 0-3 (h 0) / 4-7 (h 1) */
INLINE int8x16_t q45_u(const uint8_t *blk, int five, int j, int c, int h) {
    const uint8x16_t v = vld1q_u8(blk + 128 + 256 * (j / 2) + 32 * c + 16 * h);
    uint8x16_t u = (j & 1) ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(0x0f));
    if (five) { /* bit j of qh chunk c -> bit 4 */
        const uint8x16_t qh = vld1q_u8(blk + 1152 + 32 * c + 16 * h);
        u = vorrq_u8(u, vandq_u8(vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - j))), vdupq_n_u8(0x10)));
    }
    return vreinterpretq_s8_u8(u);
}

INLINE void gemm_q45(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                     size_t ldy, const int five, const int NTOK) {
    const int bb = five ? KERN_Q5_K_R8_BLOCK : KERN_Q4_K_R8_BLOCK;
    TOKEN_PTRS(at, a, as, nt, NTOK);
    float32x4_t acc[NTOK][2];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t][0] = acc[t][1] = vdupq_n_f32(0);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * bb;
        int32x4_t S[NTOK][2], M[NTOK][2];
        UNROLL for (int t = 0; t < NTOK; t++) S[t][0] = S[t][1] = M[t][0] = M[t][1] = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) {
            /* 6-bit scale and min of sub-block j, per row */
            const uint8x8_t lo = vld1_u8(blk + 32 + 8 * j);
            const uint8x8_t hn = (j & 1) ? vshr_n_u8(vld1_u8(blk + 96 + 8 * (j / 2)), 4)
                                         : vand_u8(vld1_u8(blk + 96 + 8 * (j / 2)), vdup_n_u8(15));
            const uint8x8_t s8 = vorr_u8(vand_u8(lo, vdup_n_u8(15)), vshl_n_u8(vand_u8(hn, vdup_n_u8(3)), 4));
            const uint8x8_t m8 = vorr_u8(vshr_n_u8(lo, 4), vshl_n_u8(vshr_n_u8(hn, 2), 4));
            int32x4_t sc[2], mn[2];
            u8x8(s8, &sc[0], &sc[1]);
            u8x8(m8, &mn[0], &mn[1]);
            int8x16_t u[8][2];
            UNROLL for (int c = 0; c < 8; c++) u[c][0] = q45_u(blk, five, j, c, 0), u[c][1] = q45_u(blk, five, j, c, 1);
            UNROLL for (int t = 0; t < NTOK; t++) {
                const kern_block_q8_k *ab = at[t] + b;
                const int8_t *q = ab->qs + 32 * j;
                int32x4_t d0 = vdupq_n_s32(0), d1 = d0;
                UNROLL for (int c = 0; c < 8; c++) {
                    const int8x16_t av = bc4(q + 4 * c);
                    d0 = dot4(d0, u[c][0], av);
                    d1 = dot4(d1, u[c][1], av);
                }
                S[t][0] = vmlaq_s32(S[t][0], d0, sc[0]);
                S[t][1] = vmlaq_s32(S[t][1], d1, sc[1]);
                const int32_t bs = (int32_t)ab->bsums[2 * j] + ab->bsums[2 * j + 1];
                M[t][0] = vmlaq_n_s32(M[t][0], mn[0], bs);
                M[t][1] = vmlaq_n_s32(M[t][1], mn[1], bs);
            }
        }
        float32x4_t dw[2], dm[2];
        f16x8(blk, &dw[0], &dw[1]);
        f16x8(blk + 16, &dm[0], &dm[1]);
        UNROLL for (int t = 0; t < NTOK; t++) {
            const float32x4_t da = vdupq_n_f32(at[t][b].d);
            for (int h = 0; h < 2; h++) {
                acc[t][h] = vfmaq_f32(acc[t][h], vcvtq_f32_s32(S[t][h]), vmulq_f32(dw[h], da));
                acc[t][h] = vfmaq_f32(acc[t][h], vcvtq_f32_s32(vnegq_s32(M[t][h])), vmulq_f32(dm[h], da));
            }
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) {
            vst1q_f32(y + (size_t)t * ldy, acc[t][0]);
            vst1q_f32(y + (size_t)t * ldy + 4, acc[t][1]);
        }
}

/* ---- Q6_K_R8 ------------------------------------------------------------------------------- */

/* the 6-bit codes of 32-column sub-block j, chunk c, rows 0-3 / 4-7 */
INLINE int8x16_t q6_u(const uint8_t *blk, int j, int c, int h) {
    const uint8x16_t v = vld1q_u8(blk + 144 + 256 * (j / 2) + 32 * c + 16 * h);
    const uint8x16_t lo = (j & 1) ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(0x0f));
    const uint8x16_t qh = vld1q_u8(blk + 1168 + 256 * (j / 4) + 32 * c + 16 * h);
    const uint8x16_t hb = vshlq_u8(qh, vdupq_n_s8((int8_t)(4 - 2 * (j & 3)))); /* bits 2k..2k+1 -> 4..5 */
    return vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(hb, vdupq_n_u8(0x30))));
}

INLINE void gemm_q6(const uint8_t *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                    size_t ldy, const int NTOK) {
    TOKEN_PTRS(at, a, as, nt, NTOK);
    float32x4_t acc[NTOK][2];
    UNROLL for (int t = 0; t < NTOK; t++) acc[t][0] = acc[t][1] = vdupq_n_f32(0);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = wg + (size_t)b * KERN_Q6_K_R8_BLOCK;
        int32x4_t S[NTOK][2], O[NTOK][2];
        UNROLL for (int t = 0; t < NTOK; t++) S[t][0] = S[t][1] = O[t][0] = O[t][1] = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) {
            /* int8 scales of 16-column sub-blocks 2j, 2j+1: byte 16j + 2r + e */
            const int8x16_t sv = vld1q_s8((const int8_t *)blk + 16 + 16 * j);
            const int8x16_t se = vuzp1q_s8(sv, sv), so = vuzp2q_s8(sv, sv); /* rows 0..7 in bytes 0..7 */
            const int16x8_t we = vmovl_s8(vget_low_s8(se)), wo = vmovl_s8(vget_low_s8(so));
            const int32x4_t sc[2][2] = {{vmovl_s16(vget_low_s16(we)), vmovl_high_s16(we)},
                                        {vmovl_s16(vget_low_s16(wo)), vmovl_high_s16(wo)}};
            int8x16_t u[8][2];
            UNROLL for (int c = 0; c < 8; c++) u[c][0] = q6_u(blk, j, c, 0), u[c][1] = q6_u(blk, j, c, 1);
            UNROLL for (int t = 0; t < NTOK; t++) {
                const kern_block_q8_k *ab = at[t] + b;
                const int8_t *q = ab->qs + 32 * j;
                UNROLL for (int e = 0; e < 2; e++) { /* sub-block 2j + e: chunks 4e..4e+3 */
                    int32x4_t d0 = vdupq_n_s32(0), d1 = d0;
                    UNROLL for (int c = 4 * e; c < 4 * e + 4; c++) {
                        const int8x16_t av = bc4(q + 4 * c);
                        d0 = dot4(d0, u[c][0], av);
                        d1 = dot4(d1, u[c][1], av);
                    }
                    S[t][0] = vmlaq_s32(S[t][0], d0, sc[e][0]);
                    S[t][1] = vmlaq_s32(S[t][1], d1, sc[e][1]);
                    const int32_t bs = ab->bsums[2 * j + e];
                    O[t][0] = vmlaq_n_s32(O[t][0], sc[e][0], bs);
                    O[t][1] = vmlaq_n_s32(O[t][1], sc[e][1], bs);
                }
            }
        }
        float32x4_t dw[2];
        f16x8(blk, &dw[0], &dw[1]);
        UNROLL for (int t = 0; t < NTOK; t++) {
            const float32x4_t da = vdupq_n_f32(at[t][b].d);
            for (int h = 0; h < 2; h++) {
                const int32x4_t tot = vsubq_s32(S[t][h], vshlq_n_s32(O[t][h], 5));
                acc[t][h] = vfmaq_f32(acc[t][h], vcvtq_f32_s32(tot), vmulq_f32(dw[h], da));
            }
        }
    }
    UNROLL for (int t = 0; t < NTOK; t++)
        if (t < nt) {
            vst1q_f32(y + (size_t)t * ldy, acc[t][0]);
            vst1q_f32(y + (size_t)t * ldy + 4, acc[t][1]);
        }
}

/* ---- entries: 1 token (decode), else 4 at a time -------------------------------------------- */

INLINE void body(int kind, const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y,
                 size_t ldy, const int NTOK) {
    if (kind == 2) gemm_q6((const uint8_t *)wg, a, as, nb, nt, y, ldy, NTOK);
    else gemm_q45((const uint8_t *)wg, a, as, nb, nt, y, ldy, kind, NTOK);
}

#define RK_ENTRY(name, kind)                                                                        \
    static void name(const void *wg, const kern_block_q8_k *a, size_t as, int nb, int nt, float *y, \
                     size_t ldy) {                                                                  \
        if (nt == 1) {                                                                              \
            body(kind, wg, a, as, nb, 1, y, ldy, 1);                                                \
            return;                                                                                 \
        }                                                                                           \
        for (int t0 = 0; t0 < nt; t0 += 4)                                                          \
            body(kind, wg, a + (size_t)t0 * as, as, nb, nt - t0 < 4 ? nt - t0 : 4, y + (size_t)t0 * ldy, ldy, 4); \
    }
RK_ENTRY(gemm_q4k_entry, 0)
RK_ENTRY(gemm_q5k_entry, 1)
RK_ENTRY(gemm_q6k_entry, 2)

const kern_rk_leaves RK_LEAVES = {.gemm = {gemm_q4k_entry, gemm_q5k_entry, gemm_q6k_entry}};
