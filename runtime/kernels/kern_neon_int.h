/*
 * kern_neon_int.h — the aarch64 integer leaves of quantized activations,
 * written once and compiled twice: kern_q8_neon.c (NEON_DOTPROD 0: the
 * 4-byte dot emulated with smull + saddlp + addp, any AArch64 CPU) and
 * kern_q8_dotprod.c (NEON_DOTPROD 1: sdot, Armv8.2 dot product, built with
 * +dotprod and run only where kern_cpu_dotprod() says the CPU has it).
 * NEON_SFX names the functions' suffix.
 *
 *   dotq_q4_0, dotq_q8_0   one weight row x nt Q8_0 activation rows (ggml_vec_dot_q4_0_q8_0 / q8_0_q8_0)
 *   gemm4_q4_0, gemm4_q8_0 one weight row x 4 tokens of kern_block_q8x4
 *   gemv4_q4_0, gemv4_q8_0 4 weight rows x the token in slot 0 (gemm4 transposed)
 *   dotq_q4_k, dotq_q6_k   one weight row x nt Q8_K rows (ggml_vec_dot_q4_K_q8_K / q6_K_q8_K)
 *   r8_gemm_q4, r8_gemm_q8 one R8 row group x nt tokens of kern_block_q8x4 (kern_r8.h)
 *
 * Every integer sum is exact and the float steps are the scalar reference's
 * in its order (kern_q8.c, kern_r8.c): results are bit-identical to it.
 */
#include <arm_neon.h>
#include <string.h>

#include "base/f16.h"
#include "kern_q8.h"
#include "kern_r8.h"

#define NEON_CAT2(a, b) a##b
#define NEON_CAT(a, b) NEON_CAT2(a, b)
#define NEON_FN(name) NEON_CAT(name, NEON_SFX)
#define INLINE static inline __attribute__((always_inline))

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

INLINE int dot32(const int8x16_t w0, const int8x16_t w1, const int8_t *a) {
    return vaddvq_s32(dot4(dot4(vdupq_n_s32(0), w0, vld1q_s8(a)), w1, vld1q_s8(a + 16)));
}

INLINE void q4_0_codes(const uint8_t *qs, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t q = vld1q_u8(qs);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
}

#define ROW(a, t, as) ((const void *)((const uint8_t *)(a) + (size_t)(t) * (as)))

/* ==== row dots (kern_dot_q_fn) ================================================ */

void NEON_FN(kern_dotq_q4_0_)(const void *w, const void *a, size_t as, int nt, int n, float *s) {
    const kern_block_q4_0 *x = w;
    for (int t = 0; t < nt; t++) {
        const kern_block_q8_0 *y = ROW(a, t, as);
        float sumf = 0;
        for (int ib = 0; ib < n / KERN_QK; ib++) {
            int8x16_t lo, hi;
            q4_0_codes(x[ib].qs, &lo, &hi);
            const int sumi = dot32(lo, hi, y[ib].qs);
            sumf += (float)sumi * (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
        }
        s[t] = sumf;
    }
}

void NEON_FN(kern_dotq_q8_0_)(const void *w, const void *a, size_t as, int nt, int n, float *s) {
    const kern_block_q8_0 *x = w;
    for (int t = 0; t < nt; t++) {
        const kern_block_q8_0 *y = ROW(a, t, as);
        float sumf = 0;
        for (int ib = 0; ib < n / KERN_QK; ib++) {
            const int sumi = dot32(vld1q_s8(x[ib].qs), vld1q_s8(x[ib].qs + 16), y[ib].qs);
            sumf += (float)sumi * (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
        }
        s[t] = sumf;
    }
}

/* 4 tokens of kern_block_q8x4 (kern_gemm4_fn): the codes of a block are
 * loaded once for the 4 tokens; per token the float steps of dotq_*. */
void NEON_FN(kern_gemm4_q4_0_)(const void *w, const void *a, int n, float *s) {
    const kern_block_q4_0 *x = w;
    const kern_block_q8x4 *y = a;
    float acc[4] = {0, 0, 0, 0};
    for (int ib = 0; ib < n / KERN_QK; ib++) {
        int8x16_t lo, hi;
        q4_0_codes(x[ib].qs, &lo, &hi);
        const float dw = f16_to_f32(x[ib].d);
        for (int t = 0; t < 4; t++) acc[t] += (float)dot32(lo, hi, y[ib].qs[t]) * (dw * y[ib].d[t]);
    }
    memcpy(s, acc, sizeof acc);
}

void NEON_FN(kern_gemm4_q8_0_)(const void *w, const void *a, int n, float *s) {
    const kern_block_q8_0 *x = w;
    const kern_block_q8x4 *y = a;
    float acc[4] = {0, 0, 0, 0};
    for (int ib = 0; ib < n / KERN_QK; ib++) {
        const int8x16_t w0 = vld1q_s8(x[ib].qs), w1 = vld1q_s8(x[ib].qs + 16);
        const float dw = f16_to_f32(x[ib].d);
        for (int t = 0; t < 4; t++) acc[t] += (float)dot32(w0, w1, y[ib].qs[t]) * (dw * y[ib].d[t]);
    }
    memcpy(s, acc, sizeof acc);
}

/* 4 weight rows (row r at (const char *)w + r * ws; ws 0: one row four
 * times) against the token in slot 0 of a (kern_gemv4_fn): per row exactly
 * the float steps gemm4 does for that token, so the mat-vec gives the bits
 * the mat-mat does (batch invariance, kern.h). */
void NEON_FN(kern_gemv4_q4_0_)(const void *w, size_t ws, const void *a, int n, float *s) {
    const kern_block_q8x4 *y = a;
    float acc[4] = {0, 0, 0, 0};
    for (int ib = 0; ib < n / KERN_QK; ib++) {
        const float dy = y[ib].d[0];
        for (int r = 0; r < 4; r++) {
            const kern_block_q4_0 *x = (const kern_block_q4_0 *)((const uint8_t *)w + (size_t)r * ws) + ib;
            int8x16_t lo, hi;
            q4_0_codes(x->qs, &lo, &hi);
            acc[r] += (float)dot32(lo, hi, y[ib].qs[0]) * (f16_to_f32(x->d) * dy);
        }
    }
    memcpy(s, acc, sizeof acc);
}

void NEON_FN(kern_gemv4_q8_0_)(const void *w, size_t ws, const void *a, int n, float *s) {
    const kern_block_q8x4 *y = a;
    float acc[4] = {0, 0, 0, 0};
    for (int ib = 0; ib < n / KERN_QK; ib++) {
        const float dy = y[ib].d[0];
        for (int r = 0; r < 4; r++) {
            const kern_block_q8_0 *x = (const kern_block_q8_0 *)((const uint8_t *)w + (size_t)r * ws) + ib;
            acc[r] += (float)dot32(vld1q_s8(x->qs), vld1q_s8(x->qs + 16), y[ib].qs[0]) * (f16_to_f32(x->d) * dy);
        }
    }
    memcpy(s, acc, sizeof acc);
}

/* ggml get_scale_min_k4 */
INLINE void scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

void NEON_FN(kern_dotq_q4_k_)(const void *w, const void *a, size_t as, int nt, int n, float *s) {
    const kern_block_q4_k *x = w;
    for (int t = 0; t < nt; t++) {
        const kern_block_q8_k *y = ROW(a, t, as);
        float sumf = 0;
        for (int i = 0; i < n / KERN_QK_K; i++) {
            int isum = 0, summs = 0;
            for (int g2 = 0; g2 < 4; g2++) {
                const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * g2), q1 = vld1q_u8(x[i].qs + 32 * g2 + 16);
                const uint8x16_t m4 = vdupq_n_u8(0x0f);
                for (int h = 0; h < 2; h++) {
                    const int g = 2 * g2 + h;
                    int sc, m;
                    scale_min_k4(g, x[i].scales, &sc, &m);
                    const int8x16_t c0 = vreinterpretq_s8_u8(h ? vshrq_n_u8(q0, 4) : vandq_u8(q0, m4));
                    const int8x16_t c1 = vreinterpretq_s8_u8(h ? vshrq_n_u8(q1, 4) : vandq_u8(q1, m4));
                    isum += sc * dot32(c0, c1, y[i].qs + 32 * g);
                    summs += m * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
                }
            }
            sumf += (f16_to_f32(x[i].d) * y[i].d) * (float)isum -
                    (f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
        }
        s[t] = sumf;
    }
}

void NEON_FN(kern_dotq_q6_k_)(const void *w, const void *a, size_t as, int nt, int n, float *s) {
    const kern_block_q6_k *x = w;
    for (int t = 0; t < nt; t++) {
        const kern_block_q8_k *y = ROW(a, t, as);
        float sumf = 0;
        for (int i = 0; i < n / KERN_QK_K; i++) {
            int isum = 0;
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
                const int8_t *ya = y[i].qs + 128 * h;
                const int8_t *sc = x[i].scales + 8 * h;
                const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(3);
                const int8x16_t k32 = vdupq_n_s8(32);
                for (int half = 0; half < 2; half++) { /* columns l = 16*half .. +15 */
                    const uint8x16_t l0 = vld1q_u8(ql + 16 * half), l1 = vld1q_u8(ql + 32 + 16 * half);
                    const uint8x16_t hb = vld1q_u8(qh + 16 * half);
                    /* o[l + 32*j] for j = 0..3, as kern_q8.c dotq_q6_k builds them */
                    const uint8x16_t u[4] = {
                        vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
                        vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
                        vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
                        vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
                    };
                    for (int j = 0; j < 4; j++) {
                        /* 16 elements starting at 32j + 16*half: scale index 2j + half of this half */
                        const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(u[j]), k32);
                        const int8x16_t av = vld1q_s8(ya + 32 * j + 16 * half);
                        isum += sc[2 * j + half] * vaddvq_s32(dot4(vdupq_n_s32(0), q, av));
                    }
                }
            }
            sumf += (f16_to_f32(x[i].d) * y[i].d) * (float)isum;
        }
        s[t] = sumf;
    }
}

/* ==== R8 gemm leaves (kern_r8_gemm_fn) ============================================ */

INLINE int8x16_t bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

INLINE void d8(const uint8_t *blk, float32x4_t *lo, float32x4_t *hi) {
    const float16x8_t d = vreinterpretq_f16_u8(vld1q_u8(blk));
    *lo = vcvt_f32_f16(vget_low_f16(d));
    *hi = vcvt_high_f32_f16(d);
}

/* y[t*ldy + r] = Σ_b fma(float(sumi), d_w[r] * d_a[t], ·) in block order, like sc_gemm */
static void NEON_FN(r8_gemm_q8_)(const void *wg, const kern_block_q8x4 *a, size_t qstride, int nb, int nt,
                                 float *y, size_t ldy) {
    float32x4_t acc[KERN_R8_NT][2];
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = vdupq_n_f32(0);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = (const uint8_t *)wg + (size_t)b * KERN_Q8_0_R8_BLOCK;
        int8x16_t wv[8][2];
        for (int c = 0; c < 8; c++) {
            wv[c][0] = vld1q_s8((const int8_t *)blk + 16 + 32 * c);
            wv[c][1] = vld1q_s8((const int8_t *)blk + 32 + 32 * c);
        }
        float32x4_t dlo, dhi;
        d8(blk, &dlo, &dhi);
        for (int t = 0; t < nt; t++) {
            const kern_block_q8x4 *aq = a + (size_t)(t / 4) * qstride + b;
            const int tt = t % 4;
            int32x4_t s0 = vdupq_n_s32(0), s1 = s0;
            for (int c = 0; c < 8; c++) {
                const int8x16_t av = bcast4(aq->qs[tt] + 4 * c);
                s0 = dot4(s0, wv[c][0], av);
                s1 = dot4(s1, wv[c][1], av);
            }
            const float32x4_t da = vdupq_n_f32(aq->d[tt]);
            acc[t][0] = vfmaq_f32(acc[t][0], vcvtq_f32_s32(s0), vmulq_f32(dlo, da));
            acc[t][1] = vfmaq_f32(acc[t][1], vcvtq_f32_s32(s1), vmulq_f32(dhi, da));
        }
    }
    for (int t = 0; t < nt; t++) {
        vst1q_f32(y + (size_t)t * ldy, acc[t][0]);
        vst1q_f32(y + (size_t)t * ldy + 4, acc[t][1]);
    }
}

/* u = code in 0..15: sumi = Σ u·a - 8·Σa */
static void NEON_FN(r8_gemm_q4_)(const void *wg, const kern_block_q8x4 *a, size_t qstride, int nb, int nt,
                                 float *y, size_t ldy) {
    float32x4_t acc[KERN_R8_NT][2];
    for (int t = 0; t < nt; t++) acc[t][0] = acc[t][1] = vdupq_n_f32(0);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = (const uint8_t *)wg + (size_t)b * KERN_Q4_0_R8_BLOCK;
        int8x16_t lo[4][2], hi[4][2];
        for (int c = 0; c < 4; c++)
            for (int h = 0; h < 2; h++) {
                const uint8x16_t v = vld1q_u8(blk + 16 + 32 * c + 16 * h);
                lo[c][h] = vreinterpretq_s8_u8(vandq_u8(v, m4));
                hi[c][h] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
            }
        float32x4_t dlo, dhi;
        d8(blk, &dlo, &dhi);
        for (int t = 0; t < nt; t++) {
            const kern_block_q8x4 *aq = a + (size_t)(t / 4) * qstride + b;
            const int tt = t % 4;
            const int32x4_t off = vdupq_n_s32(-8 * aq->sum[tt]);
            int32x4_t s0 = off, s1 = off;
            for (int c = 0; c < 4; c++) {
                const int8x16_t al = bcast4(aq->qs[tt] + 4 * c), ah = bcast4(aq->qs[tt] + 16 + 4 * c);
                s0 = dot4(dot4(s0, lo[c][0], al), hi[c][0], ah);
                s1 = dot4(dot4(s1, lo[c][1], al), hi[c][1], ah);
            }
            const float32x4_t da = vdupq_n_f32(aq->d[tt]);
            acc[t][0] = vfmaq_f32(acc[t][0], vcvtq_f32_s32(s0), vmulq_f32(dlo, da));
            acc[t][1] = vfmaq_f32(acc[t][1], vcvtq_f32_s32(s1), vmulq_f32(dhi, da));
        }
    }
    for (int t = 0; t < nt; t++) {
        vst1q_f32(y + (size_t)t * ldy, acc[t][0]);
        vst1q_f32(y + (size_t)t * ldy + 4, acc[t][1]);
    }
}

void NEON_FN(kern_r8_gemm_q4_)(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y,
                               size_t ldy) {
    NEON_FN(r8_gemm_q4_)(wg, a, qs, nb, nt, y, ldy);
}
void NEON_FN(kern_r8_gemm_q8_)(const void *wg, const kern_block_q8x4 *a, size_t qs, int nb, int nt, float *y,
                               size_t ldy) {
    NEON_FN(r8_gemm_q8_)(wg, a, qs, nb, nt, y, ldy);
}
