/*
 * kern_scalar.c — the scalar reference leaves: per weight type a dequant_row
 * for the 32-element and plain types (the 256-element types are
 * kern_kquants.c), and the f32 row primitives of kern_isa_ops.  Every
 * SIMD leaf is tested against these (tests/test_kern*.c); they follow
 * ggml-quants.c dequantize_row_* statement by statement.
 */
#include "kern.h"

#include <math.h>
#include <string.h>

#include "base/f16.h"

const int8_t kern_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};

/* ==== scalar leaves: dequantization (ggml-quants.c dequantize_row_*) ====== */

void kern_sc_dequant_f32(const void *src, float *dst, int n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void kern_sc_dequant_f16(const void *src, float *dst, int n) {
    const uint16_t *s = src;
    for (int i = 0; i < n; i++) dst[i] = f16_to_f32(s[i]);
}

void kern_sc_dequant_bf16(const void *src, float *dst, int n) {
    const uint16_t *s = src;
    for (int i = 0; i < n; i++) dst[i] = bf16_to_f32(s[i]);
}

void kern_sc_dequant_q4_0(const void *src, float *dst, int n) {
    const kern_block_q4_0 *b = src;
    for (int i = 0; i < n / KERN_QK; i++, b++, dst += KERN_QK) {
        float d = f16_to_f32(b->d);
        for (int j = 0; j < KERN_QK / 2; j++) {
            dst[j] = (float)((b->qs[j] & 0x0f) - 8) * d;
            dst[j + KERN_QK / 2] = (float)((b->qs[j] >> 4) - 8) * d;
        }
    }
}

void kern_sc_dequant_q4_1(const void *src, float *dst, int n) {
    const kern_block_q4_1 *b = src;
    for (int i = 0; i < n / KERN_QK; i++, b++, dst += KERN_QK) {
        float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
        for (int j = 0; j < KERN_QK / 2; j++) {
            dst[j] = (float)(b->qs[j] & 0x0f) * d + m;
            dst[j + KERN_QK / 2] = (float)(b->qs[j] >> 4) * d + m;
        }
    }
}

void kern_sc_dequant_q5_0(const void *src, float *dst, int n) {
    const kern_block_q5_0 *b = src;
    for (int i = 0; i < n / KERN_QK; i++, b++, dst += KERN_QK) {
        float d = f16_to_f32(b->d);
        uint32_t qh;
        memcpy(&qh, b->qh, sizeof qh);
        for (int j = 0; j < KERN_QK / 2; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            dst[j] = (float)(((b->qs[j] & 0x0f) | h0 << 4) - 16) * d;
            dst[j + KERN_QK / 2] = (float)(((b->qs[j] >> 4) | h1 << 4) - 16) * d;
        }
    }
}

void kern_sc_dequant_q5_1(const void *src, float *dst, int n) {
    const kern_block_q5_1 *b = src;
    for (int i = 0; i < n / KERN_QK; i++, b++, dst += KERN_QK) {
        float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
        uint32_t qh;
        memcpy(&qh, b->qh, sizeof qh);
        for (int j = 0; j < KERN_QK / 2; j++) {
            int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
            dst[j] = (float)((b->qs[j] & 0x0f) | h0 << 4) * d + m;
            dst[j + KERN_QK / 2] = (float)((b->qs[j] >> 4) | h1 << 4) * d + m;
        }
    }
}

void kern_sc_dequant_q8_0(const void *src, float *dst, int n) {
    const kern_block_q8_0 *b = src;
    for (int i = 0; i < n / KERN_QK; i++, b++, dst += KERN_QK) {
        float d = f16_to_f32(b->d);
        for (int j = 0; j < KERN_QK; j++) dst[j] = (float)b->qs[j] * d;
    }
}

void kern_sc_dequant_iq4_nl(const void *src, float *dst, int n) {
    const kern_block_iq4_nl *b = src;
    for (int i = 0; i < n / KERN_QK; i++, b++, dst += KERN_QK) {
        float d = f16_to_f32(b->d);
        for (int j = 0; j < KERN_QK / 2; j++) {
            dst[j] = (float)kern_iq4nl_values[b->qs[j] & 0x0f] * d;
            dst[j + KERN_QK / 2] = (float)kern_iq4nl_values[b->qs[j] >> 4] * d;
        }
    }
}

/* kvalues_mxfp4 (ggml-common.h): twice the E2M1 values */
const int8_t kern_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void kern_sc_dequant_mxfp4(const void *src, float *dst, int n) {
    const kern_block_mxfp4 *b = src;
    for (int i = 0; i < n / KERN_QK; i++, b++, dst += KERN_QK) {
        const float d = kern_e8m0_half(b->e);
        for (int j = 0; j < KERN_QK / 2; j++) {
            dst[j] = (float)kern_mxfp4_values[b->qs[j] & 0x0f] * d;
            dst[j + KERN_QK / 2] = (float)kern_mxfp4_values[b->qs[j] >> 4] * d;
        }
    }
}

/* ==== scalar leaves: f32 row primitives ==================================== */

/* Σ a[i] * b[i], sequential: the reference matmul's order per (row, token) */
static float sc_dot_f32(const float *a, const float *b, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += a[i] * b[i];
    return sum;
}

static void sc_tile_mm(const float *w, size_t ws, int n_rows, const float *x, size_t xs, int n_tok,
                       int kc, float *y, size_t ys, int accumulate) {
    for (int t = 0; t < n_tok; t++)
        for (int r = 0; r < n_rows; r++) {
            float s = sc_dot_f32(w + r * ws, x + t * xs, kc);
            if (accumulate) y[t * ys + r] += s;
            else y[t * ys + r] = s;
        }
}

static void sc_axpy(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* ggml_vec_soft_max_f32 */
double kern_sc_softmax_exp(float *s, int n, float max) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float e = expf(s[i] - max);
        sum += (double)e;
        s[i] = e;
    }
    return sum;
}

/* ggml_compute_forward_rms_norm_f32 followed by ggml_mul with the weight:
 * sum of squares in double, scale = 1/sqrtf(mean + eps) in float,
 * y = (x * scale) * w with two roundings. */
void kern_sc_rms_norm_row(float *y, const float *x, const float *w, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    float mean = (float)(sum / n);
    float scale = 1.0f / sqrtf(mean + eps);
    if (!w) { /* ggml_rms_norm without the weight multiply (Gemma 4's v norm) */
        for (int i = 0; i < n; i++) y[i] = x[i] * scale;
        return;
    }
    for (int i = 0; i < n; i++) {
        float v = x[i] * scale;
        y[i] = v * w[i];
    }
}

/* ggml_silu_f32(g) * u */
void kern_sc_swiglu_row(float *y, const float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) {
        float s = g[i] / (1.0f + expf(-g[i]));
        y[i] = s * u[i];
    }
}

static void sc_f16_to_f32_row(const uint16_t *src, float *dst, int n) {
    for (int i = 0; i < n; i++) dst[i] = f16_to_f32(src[i]);
}

static void sc_f32_to_f16_row(const float *src, uint16_t *dst, int n) {
    for (int i = 0; i < n; i++) dst[i] = f32_to_f16(src[i]);
}

const kern_isa_ops kern_scalar_ops = {
    .tile_mm = sc_tile_mm,
    .dot_f32 = sc_dot_f32,
    .axpy = sc_axpy,
    .softmax_exp = kern_sc_softmax_exp,
    .rms_norm_row = kern_sc_rms_norm_row,
    .swiglu_row = kern_sc_swiglu_row,
    .f16_to_f32_row = sc_f16_to_f32_row,
    .f32_to_f16_row = sc_f32_to_f16_row,
};
