/*
 * kern_q8.c — the scalar leaves of quantized activations (kern_q8.h): the
 * activation formats' scalar quantizers and the scalar integer dots (the
 * oracle the AVX2 leaves in kern_q8_avx2.c are tested against).  The
 * act_quant matmul driver that calls them is kern_q8_mm.c.
 *
 * Scalar dots follow ggml's *_generic vec_dots (ggml-cpu/quants.c): each
 * block's integer sum Σ q_w·q_a is exact in int32, then combined with the
 * block's float scales; per super-block the sums are formed in integers as
 * far as ggml does (sub-block scales, mins via bsums) before one float
 * multiply.  Every token of a multi-token call runs the same code, so a
 * result does not depend on how tokens were grouped.
 */
#include "kern_q8.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/f16.h"
#include "base/pool.h"

static_assert(sizeof(kern_block_q8_1) == 36, "block_q8_1 is 36 bytes in ggml");

/* ==== scalar quantizers ========================================================= */

/* x86 quantize_row_q8_0 (AVX path): d = amax/127, q = rint(x * 127/amax); returns d. */
static float q8_block(const float *x, int8_t *qs) {
    float amax = 0.0f;
    for (int j = 0; j < KERN_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    for (int j = 0; j < KERN_QK; j++) {
        float v = rintf(x[j] * id);
        qs[j] = (int8_t)(v > 127.f ? 127 : v < -128.f ? -128 : (int)v); /* vpackss saturation */
    }
    return d;
}

void kern_sc_quantize_q8_0(const float *x, void *dst, int n) {
    kern_block_q8_0 *y = dst;
    for (int i = 0; i < n / KERN_QK; i++, x += KERN_QK) y[i].d = f32_to_f16(q8_block(x, y[i].qs));
}

void kern_sc_quantize_q8_1(const float *x, void *dst, int n) {
    kern_block_q8_1 *y = dst;
    for (int i = 0; i < n / KERN_QK; i++, x += KERN_QK) {
        const float d = q8_block(x, y[i].qs);
        int sum = 0;
        for (int j = 0; j < KERN_QK; j++) sum += y[i].qs[j];
        y[i].d = f32_to_f16(d);
        y[i].s = f32_to_f16(d * (float)sum);
    }
}

/* ggml nearest_int: round half to even through the 1.5*2^23 trick. */
static inline int nearest_int(float f) {
    float v = f + 12582912.f;
    int i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

void kern_sc_quantize_q8_k(const float *x, void *dst, int n) {
    kern_block_q8_k *y = dst;
    for (int i = 0; i < n / KERN_QK_K; i++, x += KERN_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < KERN_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < KERN_QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < KERN_QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[j * 16 + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void kern_sc_quantize_f16(const float *x, void *dst, int n) {
    uint16_t *y = dst;
    for (int i = 0; i < n; i++) y[i] = f32_to_f16(x[i]);
}

void kern_sc_quantize_bf16(const float *x, void *dst, int n) {
    uint16_t *y = dst;
    for (int i = 0; i < n; i++) y[i] = f32_to_bf16(x[i]);
}

/* ==== scalar integer dots (ggml-cpu/quants.c ggml_vec_dot_*_generic) ========== */

#define ROW(a, t, as) ((const void *)((const uint8_t *)(a) + (size_t)(t) * (as)))

/* One token per call; the nt wrappers below loop. */
static float dotq_q4_0(const kern_block_q4_0 *x, const kern_block_q8_0 *y, int nb) {
    float sumf = 0;
    for (int ib = 0; ib < nb; ib++) {
        int sumi = 0;
        for (int j = 0; j < KERN_QK / 2; j++) {
            sumi += ((x[ib].qs[j] & 0x0f) - 8) * y[ib].qs[j];
            sumi += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + KERN_QK / 2];
        }
        sumf += (float)sumi * (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
    }
    return sumf;
}

static float dotq_q4_1(const kern_block_q4_1 *x, const kern_block_q8_1 *y, int nb) {
    float sumf = 0;
    for (int ib = 0; ib < nb; ib++) {
        int sumi = 0;
        for (int j = 0; j < KERN_QK / 2; j++) {
            sumi += (x[ib].qs[j] & 0x0f) * y[ib].qs[j];
            sumi += (x[ib].qs[j] >> 4) * y[ib].qs[j + KERN_QK / 2];
        }
        sumf += (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d)) * (float)sumi +
                f16_to_f32(x[ib].m) * f16_to_f32(y[ib].s);
    }
    return sumf;
}

static float dotq_q5_0(const kern_block_q5_0 *x, const kern_block_q8_0 *y, int nb) {
    float sumf = 0;
    for (int ib = 0; ib < nb; ib++) {
        uint32_t qh;
        memcpy(&qh, x[ib].qh, sizeof qh);
        int sumi = 0;
        for (int j = 0; j < KERN_QK / 2; j++) {
            const int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            sumi += (((x[ib].qs[j] & 0x0f) | h0 << 4) - 16) * y[ib].qs[j];
            sumi += (((x[ib].qs[j] >> 4) | h1 << 4) - 16) * y[ib].qs[j + KERN_QK / 2];
        }
        sumf += (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d)) * (float)sumi;
    }
    return sumf;
}

static float dotq_q5_1(const kern_block_q5_1 *x, const kern_block_q8_1 *y, int nb) {
    float sumf = 0;
    for (int ib = 0; ib < nb; ib++) {
        uint32_t qh;
        memcpy(&qh, x[ib].qh, sizeof qh);
        int sumi = 0;
        for (int j = 0; j < KERN_QK / 2; j++) {
            const int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            sumi += ((x[ib].qs[j] & 0x0f) | h0 << 4) * y[ib].qs[j];
            sumi += ((x[ib].qs[j] >> 4) | h1 << 4) * y[ib].qs[j + KERN_QK / 2];
        }
        sumf += (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d)) * (float)sumi +
                f16_to_f32(x[ib].m) * f16_to_f32(y[ib].s);
    }
    return sumf;
}

static float dotq_q8_0(const kern_block_q8_0 *x, const kern_block_q8_0 *y, int nb) {
    float sumf = 0;
    for (int ib = 0; ib < nb; ib++) {
        int sumi = 0;
        for (int j = 0; j < KERN_QK; j++) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += (float)sumi * (f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
    }
    return sumf;
}

static float dotq_iq4_nl(const kern_block_iq4_nl *x, const kern_block_q8_0 *y, int nb) {
    float sumf = 0;
    for (int ib = 0; ib < nb; ib++) {
        const float d = f16_to_f32(y[ib].d) * f16_to_f32(x[ib].d);
        int sumi = 0;
        for (int j = 0; j < KERN_QK / 2; j++) {
            sumi += y[ib].qs[j] * kern_iq4nl_values[x[ib].qs[j] & 0xf];
            sumi += y[ib].qs[j + KERN_QK / 2] * kern_iq4nl_values[x[ib].qs[j] >> 4];
        }
        sumf += d * (float)sumi;
    }
    return sumf;
}

/* ggml_vec_dot_mxfp4_q8_0: d = d_a * 2^(e-128), the two halves' int sums added */
static float dotq_mxfp4(const kern_block_mxfp4 *x, const kern_block_q8_0 *y, int nb) {
    float sumf = 0;
    for (int ib = 0; ib < nb; ib++) {
        const float d = f16_to_f32(y[ib].d) * kern_e8m0_half(x[ib].e);
        int sumi1 = 0, sumi2 = 0;
        for (int j = 0; j < KERN_QK / 2; j++) {
            sumi1 += y[ib].qs[j] * kern_mxfp4_values[x[ib].qs[j] & 0xf];
            sumi2 += y[ib].qs[j + KERN_QK / 2] * kern_mxfp4_values[x[ib].qs[j] >> 4];
        }
        sumf += d * (float)(sumi1 + sumi2);
    }
    return sumf;
}

/* ---- 256-element types: Σ over sub-blocks of scale * Σ q·a, in int32 ------- */

/* 16 sub-block scales of Q3_K minus 32 (kern_kquants.c q3_k_scales) */
static void q3_k_scales(const uint8_t *s12, int *sc) {
    for (int j = 0; j < 16; j++) {
        int lo = (s12[j % 8] >> (4 * (j / 8))) & 0xf;
        int hi = (s12[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (lo | hi << 4) - 32;
    }
}

/* ggml get_scale_min_k4 */
static void scale_min_k4(int j, const uint8_t *q, int *d, int *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Σ_l q[l] * a[l] over 16 elements */
static inline int isum16(const int8_t *q, const int8_t *a) {
    int s = 0;
    for (int l = 0; l < 16; l++) s += q[l] * a[l];
    return s;
}

static float dotq_q2_k(const kern_block_q2_k *x, const kern_block_q8_k *y, int nb) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        int8_t q[KERN_QK_K];
        for (int h = 0, o = 0; h < 2; h++)
            for (int shift = 0; shift < 8; shift += 2)
                for (int l = 0; l < 32; l++) q[o++] = (int8_t)((x[i].qs[32 * h + l] >> shift) & 3);
        int isum = 0, summs = 0;
        for (int j = 0; j < 16; j++) {
            isum += (x[i].scales[j] & 0xf) * isum16(q + 16 * j, y[i].qs + 16 * j);
            summs += (x[i].scales[j] >> 4) * y[i].bsums[j];
        }
        const float dall = y[i].d * f16_to_f32(x[i].d), dmin = y[i].d * f16_to_f32(x[i].dmin);
        sumf += dall * (float)isum - dmin * (float)summs;
    }
    return sumf;
}

static float dotq_q3_k(const kern_block_q3_k *x, const kern_block_q8_k *y, int nb) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        int8_t q[KERN_QK_K];
        int sc[16];
        q3_k_scales(x[i].scales, sc);
        for (int h = 0, o = 0, m = 0; h < 2; h++)
            for (int shift = 0; shift < 8; shift += 2, m++)
                for (int l = 0; l < 32; l++)
                    q[o++] = (int8_t)(((x[i].qs[32 * h + l] >> shift) & 3) -
                                      ((x[i].hmask[l] >> m) & 1 ? 0 : 4));
        int isum = 0;
        for (int j = 0; j < 16; j++) isum += sc[j] * isum16(q + 16 * j, y[i].qs + 16 * j);
        sumf += (f16_to_f32(x[i].d) * y[i].d) * (float)isum;
    }
    return sumf;
}

static float dotq_q4_k(const kern_block_q4_k *x, const kern_block_q8_k *y, int nb) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        int isum = 0, summs = 0;
        for (int g = 0; g < 8; g++) {
            int sc, m;
            scale_min_k4(g, x[i].scales, &sc, &m);
            const uint8_t *qs = x[i].qs + 32 * (g / 2);
            const int8_t *a = y[i].qs + 32 * g;
            int s = 0;
            for (int l = 0; l < 32; l++) s += ((qs[l] >> 4 * (g % 2)) & 0xf) * a[l];
            isum += sc * s;
            summs += m * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
        }
        sumf += (f16_to_f32(x[i].d) * y[i].d) * (float)isum -
                (f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    return sumf;
}

static float dotq_q5_k(const kern_block_q5_k *x, const kern_block_q8_k *y, int nb) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        int isum = 0, summs = 0;
        for (int g = 0; g < 8; g++) {
            int sc, m;
            scale_min_k4(g, x[i].scales, &sc, &m);
            const uint8_t *qs = x[i].qs + 32 * (g / 2);
            const int8_t *a = y[i].qs + 32 * g;
            int s = 0;
            for (int l = 0; l < 32; l++)
                s += (((qs[l] >> 4 * (g % 2)) & 0xf) | ((x[i].qh[l] >> g) & 1) << 4) * a[l];
            isum += sc * s;
            summs += m * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
        }
        sumf += (f16_to_f32(x[i].d) * y[i].d) * (float)isum -
                (f16_to_f32(x[i].dmin) * y[i].d) * (float)summs;
    }
    return sumf;
}

static float dotq_q6_k(const kern_block_q6_k *x, const kern_block_q8_k *y, int nb) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        int8_t q[KERN_QK_K];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            int8_t *o = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                o[l + 0] = (int8_t)(((ql[l + 0] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32);
                o[l + 32] = (int8_t)(((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32);
                o[l + 64] = (int8_t)(((ql[l + 0] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
                o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
            }
        }
        int isum = 0;
        for (int j = 0; j < 16; j++) isum += x[i].scales[j] * isum16(q + 16 * j, y[i].qs + 16 * j);
        sumf += (f16_to_f32(x[i].d) * y[i].d) * (float)isum;
    }
    return sumf;
}

static float dotq_iq4_xs(const kern_block_iq4_xs *x, const kern_block_q8_k *y, int nb) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        int isum = 0;
        for (int g = 0; g < 8; g++) {
            const int ls = ((x[i].scales_l[g / 2] >> 4 * (g % 2)) & 0xf) |
                           (((x[i].scales_h >> 2 * g) & 3) << 4);
            const uint8_t *qs = x[i].qs + 16 * g;
            const int8_t *a = y[i].qs + 32 * g;
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += a[j] * kern_iq4nl_values[qs[j] & 0xf] + a[j + 16] * kern_iq4nl_values[qs[j] >> 4];
            isum += (ls - 32) * s;
        }
        sumf += (f16_to_f32(x[i].d) * y[i].d) * (float)isum;
    }
    return sumf;
}

/* Σ over 8 elements of grid bytes g (4 + 4) * a with sign bits `signs` */
static inline int grid_dot8(uint32_t g1, uint32_t g2, unsigned signs, const int8_t *a) {
    int s = 0;
    for (int j = 0; j < 4; j++) {
        s += (int)((g1 >> 8 * j) & 0xff) * a[j] * (signs & (1u << j) ? -1 : 1);
        s += (int)((g2 >> 8 * j) & 0xff) * a[j + 4] * (signs & (1u << (j + 4)) ? -1 : 1);
    }
    return s;
}

/* ggml: 0.25 * Σ d * Σ_ib32 (2*(aux>>28)+1) * Σ grid·q8 */
static float dotq_iq3_xxs(const kern_block_iq3_xxs *x, const kern_block_q8_k *y, int nb) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        const uint8_t *q3 = x[i].qs, *gas = x[i].qs + KERN_QK_K / 4;
        const int8_t *a = y[i].qs;
        int bsum = 0;
        for (int ib32 = 0; ib32 < 8; ib32++, q3 += 8) {
            uint32_t aux32;
            memcpy(&aux32, gas + 4 * ib32, sizeof aux32);
            int sumi = 0;
            for (int l = 0; l < 4; l++, a += 8)
                sumi += grid_dot8(kern_iq3xxs_grid[q3[2 * l]], kern_iq3xxs_grid[q3[2 * l + 1]],
                                  kern_ksigns_iq2xs[(aux32 >> 7 * l) & 127], a);
            bsum += sumi * (int)(2 * (aux32 >> 28) + 1);
        }
        sumf += (f16_to_f32(x[i].d) * y[i].d) * (float)bsum;
    }
    return 0.25f * sumf;
}

static float dotq_iq3_s(const kern_block_iq3_s *x, const kern_block_q8_k *y, int nb) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        const uint8_t *qs = x[i].qs, *qh = x[i].qh, *signs = x[i].signs;
        const int8_t *a = y[i].qs;
        int bsum = 0;
        for (int ib32 = 0; ib32 < 8; ib32++, qs += 8, signs += 4) {
            const int ls = 2 * ((x[i].scales[ib32 / 2] >> 4 * (ib32 % 2)) & 0xf) + 1;
            int sumi = 0;
            for (int l = 0; l < 4; l++, a += 8)
                sumi += grid_dot8(kern_iq3s_grid[qs[2 * l + 0] | ((qh[ib32] << (8 - 2 * l)) & 256)],
                                  kern_iq3s_grid[qs[2 * l + 1] | ((qh[ib32] << (7 - 2 * l)) & 256)],
                                  signs[l], a);
            bsum += sumi * ls;
        }
        sumf += (f16_to_f32(x[i].d) * y[i].d) * (float)bsum;
    }
    return sumf;
}

static inline int tq1_trit(uint8_t b, int pow3) {
    const uint8_t q = (uint8_t)(b * pow3);
    return (int)(((uint16_t)q * 3) >> 8);
}

static float dotq_tq1_0(const kern_block_tq1_0 *x, const kern_block_q8_k *y, int nb) {
    static const int pow3[6] = {1, 3, 9, 27, 81, 243};
    const int nqs = (int)sizeof x->qs, n32 = nqs - nqs % 32;
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        const int8_t *a = y[i].qs;
        int sum = 0;
        for (int j = 0; j < n32; j += 32)
            for (int l = 0; l < 5; l++)
                for (int m = 0; m < 32; m++) sum += (tq1_trit(x[i].qs[j + m], pow3[l]) - 1) * *a++;
        for (int j = n32; j < nqs; j += 16)
            for (int l = 0; l < 5; l++)
                for (int m = 0; m < 16; m++) sum += (tq1_trit(x[i].qs[j + m], pow3[l]) - 1) * *a++;
        for (int l = 0; l < 4; l++)
            for (int j = 0; j < (int)sizeof x->qh; j++) sum += (tq1_trit(x[i].qh[j], pow3[l]) - 1) * *a++;
        sumf += (float)sum * (f16_to_f32(x[i].d) * y[i].d);
    }
    return sumf;
}

static float dotq_tq2_0(const kern_block_tq2_0 *x, const kern_block_q8_k *y, int nb) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) {
        const int8_t *a = y[i].qs;
        int sumi = 0;
        for (int j = 0; j < (int)sizeof x->qs; j += 32)
            for (int l = 0; l < 4; l++)
                for (int k = 0; k < 32; k++) sumi += (((x[i].qs[j + k] >> (l * 2)) & 3) - 1) * *a++;
        sumf += (float)sumi * (y[i].d * f16_to_f32(x[i].d));
    }
    return sumf;
}

#define SC_DOTQ(t, ablock, blck)                                                          \
    void kern_sc_dotq_##t(const void *w, const void *a, size_t as, int nt, int n, float *s) { \
        for (int k = 0; k < nt; k++)                                                      \
            s[k] = dotq_##t((const kern_block_##t *)w, (const ablock *)ROW(a, k, as), n / (blck)); \
    }
SC_DOTQ(q4_0, kern_block_q8_0, KERN_QK)
SC_DOTQ(q4_1, kern_block_q8_1, KERN_QK)
SC_DOTQ(q5_0, kern_block_q8_0, KERN_QK)
SC_DOTQ(q5_1, kern_block_q8_1, KERN_QK)
SC_DOTQ(q8_0, kern_block_q8_0, KERN_QK)
SC_DOTQ(iq4_nl, kern_block_q8_0, KERN_QK)
SC_DOTQ(mxfp4, kern_block_q8_0, KERN_QK)
SC_DOTQ(q2_k, kern_block_q8_k, KERN_QK_K)
SC_DOTQ(q3_k, kern_block_q8_k, KERN_QK_K)
SC_DOTQ(q4_k, kern_block_q8_k, KERN_QK_K)
SC_DOTQ(q5_k, kern_block_q8_k, KERN_QK_K)
SC_DOTQ(q6_k, kern_block_q8_k, KERN_QK_K)
SC_DOTQ(iq4_xs, kern_block_q8_k, KERN_QK_K)
SC_DOTQ(iq3_xxs, kern_block_q8_k, KERN_QK_K)
SC_DOTQ(iq3_s, kern_block_q8_k, KERN_QK_K)
SC_DOTQ(tq1_0, kern_block_q8_k, KERN_QK_K)
SC_DOTQ(tq2_0, kern_block_q8_k, KERN_QK_K)
#undef SC_DOTQ

/* ---- 4-token mat-mat of the 32-element types (kern_block_q8x4) -------------- */

void kern_q8x4_pack(int vdt, const void *const rows[4], int n, kern_block_q8x4 *out) {
    for (int b = 0; b < n / KERN_QK; b++, out++)
        for (int t = 0; t < 4; t++) {
            if (!rows[t]) {
                out->d[t] = out->s[t] = 0;
                memset(out->qs[t], 0, KERN_QK);
            } else if (vdt == KERN_T_Q8_1) {
                const kern_block_q8_1 *y = (const kern_block_q8_1 *)rows[t] + b;
                out->d[t] = f16_to_f32(y->d);
                out->s[t] = f16_to_f32(y->s);
                memcpy(out->qs[t], y->qs, KERN_QK);
            } else {
                const kern_block_q8_0 *y = (const kern_block_q8_0 *)rows[t] + b;
                out->d[t] = f16_to_f32(y->d);
                out->s[t] = 0;
                memcpy(out->qs[t], y->qs, KERN_QK);
            }
            int sum = 0;
            for (int j = 0; j < KERN_QK; j++) sum += out->qs[t][j];
            out->sum[t] = sum;
        }
}

int kern_q8x4_overflows(const kern_block_q8x4 *q, int nb, int t) {
    for (int b = 0; b < nb; b++)
        if (isinf(q[b].d[t]) || isinf(q[b].s[t])) return 1;
    return 0;
}

/* Scalar reference: token t's ggml row rebuilt from the interleaved blocks
 * (d and s are f16 values, so the round trip is exact), then the 1-token dot. */
#define SC_GEMM4(t, ablock)                                                               \
    void kern_sc_gemm4_##t(const void *w, const void *a, int n, float *s) {               \
        const kern_block_q8x4 *x4 = a;                                                    \
        const int nb = n / KERN_QK;                                                       \
        ablock row[nb > 0 ? nb : 1];                                                      \
        for (int k = 0; k < 4; k++) {                                                     \
            for (int b = 0; b < nb; b++) {                                                \
                ablock *y = &row[b];                                                      \
                memcpy(y->qs, x4[b].qs[k], KERN_QK);                                      \
                y->d = f32_to_f16(x4[b].d[k]);                                            \
                SET_S(y, f32_to_f16(x4[b].s[k]));                                         \
            }                                                                             \
            s[k] = dotq_##t((const kern_block_##t *)w, row, nb);                          \
        }                                                                                 \
    }
/* Scalar gemv4: slot 0's row rebuilt once, then the 1-token dot per weight
 * row — what SC_GEMM4 does for that token. */
#define SC_GEMV4(t, ablock)                                                               \
    void kern_sc_gemv4_##t(const void *w, size_t ws, const void *a, int n, float *s) {    \
        const kern_block_q8x4 *x4 = a;                                                    \
        const int nb = n / KERN_QK;                                                       \
        ablock row[nb > 0 ? nb : 1];                                                      \
        for (int b = 0; b < nb; b++) {                                                    \
            ablock *y = &row[b];                                                          \
            memcpy(y->qs, x4[b].qs[0], KERN_QK);                                          \
            y->d = f32_to_f16(x4[b].d[0]);                                                \
            SET_S(y, f32_to_f16(x4[b].s[0]));                                             \
        }                                                                                 \
        for (int r = 0; r < 4; r++)                                                       \
            s[r] = dotq_##t((const kern_block_##t *)((const uint8_t *)w + (size_t)r * ws), row, nb); \
    }
#define SET_S(y, v) (void)(v)
SC_GEMM4(q4_0, kern_block_q8_0)
SC_GEMM4(q5_0, kern_block_q8_0)
SC_GEMM4(q8_0, kern_block_q8_0)
SC_GEMM4(iq4_nl, kern_block_q8_0)
SC_GEMM4(mxfp4, kern_block_q8_0)
SC_GEMV4(q4_0, kern_block_q8_0)
SC_GEMV4(q5_0, kern_block_q8_0)
SC_GEMV4(q8_0, kern_block_q8_0)
SC_GEMV4(iq4_nl, kern_block_q8_0)
SC_GEMV4(mxfp4, kern_block_q8_0)
#undef SET_S
#define SET_S(y, v) ((y)->s = (v))
SC_GEMM4(q4_1, kern_block_q8_1)
SC_GEMM4(q5_1, kern_block_q8_1)
SC_GEMV4(q4_1, kern_block_q8_1)
SC_GEMV4(q5_1, kern_block_q8_1)
#undef SET_S
#undef SC_GEMM4
#undef SC_GEMV4
