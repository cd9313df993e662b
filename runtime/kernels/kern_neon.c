/*
 * kern_neon.c — the aarch64 SIMD slot's f32 leaves (Advanced SIMD, part of
 * every AArch64 CPU): the matmul tile, dot/axpy, f16 row conversions, and
 * dequant_row for F16, Q4_0 and Q8_0 (kern.h kern_isa_ops, kern_type_ops;
 * the mat-vec multiplies the dequantized rows with tile_mm, whose per-row
 * arithmetic is the same in every call: batch invariance, kern.h).  softmax, rms_norm and swiglu keep the scalar leaves
 * (their exp and double sums are the reference's).  The integer dots of
 * quantized activations are kern_q8_neon.c / kern_q8_dotprod.c; the R8
 * leaves kern_r8_neon.c.  Built only for aarch64 (Makefile: *_neon.c).
 *
 * Sums run in 4 (or 16) f32 lanes, so results differ from the sequential
 * scalar sum by rounding only (tests/test_kern*.c bound it); dequantization
 * is exact and bit-identical to the scalar leaves.
 */
#include "kern.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "base/f16.h"

static inline float32x4_t f16x4_load(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

/* ==== f32 row primitives ======================================================= */

static float dot_f32(const float *a, const float *b, int n) {
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0, s2 = s0, s3 = s0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* One row's sum, the same whatever n_rows (batch invariance, kern.h): a
 * 4-lane FMA chain over the first kc & ~3 columns, its lanes added by
 * vaddvq, then the last kc % 4 columns in order with fmaf.  tile_mm runs 4
 * rows at a time (each x load feeds 4 chains) and the rest one by one, but
 * every row gets this arithmetic, so a row's result does not depend on the
 * rows it was grouped with: the mat-vec's row groups and the mat-mat's
 * tiles give the same bits. */
static inline float row_tail(float s, const float *w, const float *x, int k, int kc) {
    for (; k < kc; k++) s = fmaf(w[k], x[k], s);
    return s;
}

static void tile_mm(const float *w, size_t ws, int n_rows, const float *x, size_t xs, int n_tok, int kc,
                    float *y, size_t ys, int accumulate) {
    const int k4 = kc & ~3;
    for (int t = 0; t < n_tok; t++) {
        const float *xt = x + (size_t)t * xs;
        float *yt = y + (size_t)t * ys;
        int r = 0;
        for (; r + 4 <= n_rows; r += 4) {
            const float *w0 = w + (size_t)r * ws, *w1 = w0 + ws, *w2 = w1 + ws, *w3 = w2 + ws;
            float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
            for (int k = 0; k < k4; k += 4) {
                const float32x4_t xv = vld1q_f32(xt + k);
                a0 = vfmaq_f32(a0, vld1q_f32(w0 + k), xv);
                a1 = vfmaq_f32(a1, vld1q_f32(w1 + k), xv);
                a2 = vfmaq_f32(a2, vld1q_f32(w2 + k), xv);
                a3 = vfmaq_f32(a3, vld1q_f32(w3 + k), xv);
            }
            const float s[4] = {row_tail(vaddvq_f32(a0), w0, xt, k4, kc), row_tail(vaddvq_f32(a1), w1, xt, k4, kc),
                                row_tail(vaddvq_f32(a2), w2, xt, k4, kc), row_tail(vaddvq_f32(a3), w3, xt, k4, kc)};
            for (int i = 0; i < 4; i++) {
                if (accumulate) yt[r + i] += s[i];
                else yt[r + i] = s[i];
            }
        }
        for (; r < n_rows; r++) {
            const float *wr = w + (size_t)r * ws;
            float32x4_t a0 = vdupq_n_f32(0);
            for (int k = 0; k < k4; k += 4) a0 = vfmaq_f32(a0, vld1q_f32(wr + k), vld1q_f32(xt + k));
            const float s = row_tail(vaddvq_f32(a0), wr, xt, k4, kc);
            if (accumulate) yt[r] += s;
            else yt[r] = s;
        }
    }
}

static void axpy(float *y, float a, const float *x, int n) {
    const float32x4_t av = vdupq_n_f32(a);
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), av, vld1q_f32(x + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

static void f16_to_f32_row(const uint16_t *src, float *dst, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(dst + i, f16x4_load(src + i));
    for (; i < n; i++) dst[i] = f16_to_f32(src[i]);
}

/* vcvt_f16_f32 rounds to nearest even, as the scalar kern_f32_to_f16 does */
static void f32_to_f16_row(const float *src, uint16_t *dst, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) dst[i] = f32_to_f16(src[i]);
}

const kern_isa_ops kern_neon_ops = {
    .tile_mm = tile_mm,
    .dot_f32 = dot_f32,
    .axpy = axpy,
    .softmax_exp = kern_sc_softmax_exp,
    .rms_norm_row = kern_sc_rms_norm_row,
    .swiglu_row = kern_sc_swiglu_row,
    .f16_to_f32_row = f16_to_f32_row,
    .f32_to_f16_row = f32_to_f16_row,
};

/* ==== weight types ================================================================ */

void kern_neon_dequant_f16(const void *src, float *dst, int n) { f16_to_f32_row(src, dst, n); }

/* codes - 8 of one Q4_0 block as 32 int8: [0..15] low nibbles, [16..31] high */
static inline void q4_0_codes(const kern_block_q4_0 *b, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t q = vld1q_u8(b->qs);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
}

/* 16 int8 -> 4 float32x4 scaled by d (exact: |q| <= 128 and a single product) */
static inline void s8x16_scale(int8x16_t q, float32x4_t d, float32x4_t out[4]) {
    const int16x8_t l = vmovl_s8(vget_low_s8(q)), h = vmovl_s8(vget_high_s8(q));
    out[0] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(l))), d);
    out[1] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(l))), d);
    out[2] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(h))), d);
    out[3] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(h))), d);
}

void kern_neon_dequant_q4_0(const void *src, float *dst, int n) {
    const kern_block_q4_0 *b = src;
    for (int i = 0; i < n / KERN_QK; i++, b++, dst += KERN_QK) {
        const float32x4_t d = vdupq_n_f32(f16_to_f32(b->d));
        int8x16_t lo, hi;
        q4_0_codes(b, &lo, &hi);
        float32x4_t v[4];
        s8x16_scale(lo, d, v);
        for (int k = 0; k < 4; k++) vst1q_f32(dst + 4 * k, v[k]);
        s8x16_scale(hi, d, v);
        for (int k = 0; k < 4; k++) vst1q_f32(dst + 16 + 4 * k, v[k]);
    }
}

void kern_neon_dequant_q8_0(const void *src, float *dst, int n) {
    const kern_block_q8_0 *b = src;
    for (int i = 0; i < n / KERN_QK; i++, b++, dst += KERN_QK) {
        const float32x4_t d = vdupq_n_f32(f16_to_f32(b->d));
        float32x4_t v[4];
        s8x16_scale(vld1q_s8(b->qs), d, v);
        for (int k = 0; k < 4; k++) vst1q_f32(dst + 4 * k, v[k]);
        s8x16_scale(vld1q_s8(b->qs + 16), d, v);
        for (int k = 0; k < 4; k++) vst1q_f32(dst + 16 + 4 * k, v[k]);
    }
}
