/*
 * quant.c — ggml's reference quantizers (see quant.h), ported from
 * ggml/src/ggml-quants.c (quantize_row_{q4_0,q4_1,q5_0,q5_1,q8_0,q2_K,q3_K,
 * q4_K,q5_K,q6_K,mxfp4}_ref, quantize_row_iq4_nl_impl for IQ4_NL/IQ4_XS, and their
 * helpers nearest_int, make_qx_quants, make_q3_quants, make_qkx2_quants,
 * best_index_int8; MIT licence, the ggml authors).  Every float operation is
 * kept in ggml's order and nothing is fused, so a row gives the same bytes as
 * ggml_quantize_chunk without an importance matrix — which is what
 * llama-quantize runs when it has no imatrix.  The file-level quantizer
 * (`cinfer quantize`) is formats/quantize.c.
 */
#include "quant.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/f16.h"
#include "base/ggml_type.h"
#include "kern.h" /* kern_mxfp4_values, kern_e8m0_half */

#define QK_K 256
#define GROUP_MAX_EPS 1e-15f
#define QMIN(a, b) ((a) < (b) ? (a) : (b))
#define QMAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- block layouts (ggml-common.h) ------------------------------------------ */

typedef struct { uint16_t d; uint8_t qs[16]; } blk_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[16]; } blk_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } blk_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } blk_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } blk_q8_0;
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d, dmin; } blk_q2_K;
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; } blk_q3_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[QK_K / 2]; } blk_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } blk_q5_K;
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; } blk_q6_K;
typedef struct { uint16_t d; uint8_t qs[16]; } blk_iq4_nl;
typedef struct { uint16_t d, scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } blk_iq4_xs;
typedef struct { uint8_t e; uint8_t qs[16]; } blk_mxfp4;

static_assert(sizeof(blk_q4_0) == 18, "block_q4_0");
static_assert(sizeof(blk_q4_1) == 20, "block_q4_1");
static_assert(sizeof(blk_q5_0) == 22, "block_q5_0");
static_assert(sizeof(blk_q5_1) == 24, "block_q5_1");
static_assert(sizeof(blk_q8_0) == 34, "block_q8_0");
static_assert(sizeof(blk_q2_K) == 84, "block_q2_K");
static_assert(sizeof(blk_q3_K) == 110, "block_q3_K");
static_assert(sizeof(blk_q4_K) == 144, "block_q4_K");
static_assert(sizeof(blk_q5_K) == 176, "block_q5_K");
static_assert(sizeof(blk_q6_K) == 210, "block_q6_K");
static_assert(sizeof(blk_iq4_nl) == 18, "block_iq4_nl");
static_assert(sizeof(blk_iq4_xs) == 136, "block_iq4_xs");
static_assert(sizeof(blk_mxfp4) == 17, "block_mxfp4");

#define FP32_TO_FP16(x) f32_to_f16(x)
#define FP16_TO_FP32(x) f16_to_f32(x)

/* ==== 1. reference quantizers (ggml-quants.c) ================================= */

static void q4_0_ref(const float *x, blk_q4_0 *y, int64_t k) {
    const int qk = 32;
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < qk; j++) {
            const float v = x[i * qk + j];
            if (amax < fabsf(v)) {
                amax = fabsf(v);
                max = v;
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = FP32_TO_FP16(d);
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = x[i * qk + 0 + j] * id;
            const float x1 = x[i * qk + qk / 2 + j] * id;
            const uint8_t xi0 = QMIN(15, (int8_t)(x0 + 8.5f));
            const uint8_t xi1 = QMIN(15, (int8_t)(x1 + 8.5f));
            y[i].qs[j] = xi0;
            y[i].qs[j] |= xi1 << 4;
        }
    }
}

static void q4_1_ref(const float *x, blk_q4_1 *y, int64_t k) {
    const int qk = 32;
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; i++) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < qk; j++) {
            const float v = x[i * qk + j];
            if (v < min) min = v;
            if (v > max) max = v;
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = FP32_TO_FP16(d);
        y[i].m = FP32_TO_FP16(min);
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = (x[i * qk + 0 + j] - min) * id;
            const float x1 = (x[i * qk + qk / 2 + j] - min) * id;
            const uint8_t xi0 = QMIN(15, (int8_t)(x0 + 0.5f));
            const uint8_t xi1 = QMIN(15, (int8_t)(x1 + 0.5f));
            y[i].qs[j] = xi0;
            y[i].qs[j] |= xi1 << 4;
        }
    }
}

static void q5_0_ref(const float *x, blk_q5_0 *y, int64_t k) {
    const int qk = 32;
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < qk; j++) {
            const float v = x[i * qk + j];
            if (amax < fabsf(v)) {
                amax = fabsf(v);
                max = v;
            }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = FP32_TO_FP16(d);
        uint32_t qh = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = x[i * qk + 0 + j] * id;
            const float x1 = x[i * qk + qk / 2 + j] * id;
            const uint8_t xi0 = QMIN(31, (int8_t)(x0 + 16.5f));
            const uint8_t xi1 = QMIN(31, (int8_t)(x1 + 16.5f));
            y[i].qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
        }
        memcpy(&y[i].qh, &qh, sizeof qh);
    }
}

static void q5_1_ref(const float *x, blk_q5_1 *y, int64_t k) {
    const int qk = 32;
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; i++) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < qk; j++) {
            const float v = x[i * qk + j];
            if (v < min) min = v;
            if (v > max) max = v;
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = FP32_TO_FP16(d);
        y[i].m = FP32_TO_FP16(min);
        uint32_t qh = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = (x[i * qk + 0 + j] - min) * id;
            const float x1 = (x[i * qk + qk / 2 + j] - min) * id;
            const uint8_t xi0 = (uint8_t)(x0 + 0.5f);
            const uint8_t xi1 = (uint8_t)(x1 + 0.5f);
            y[i].qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
        }
        memcpy(&y[i].qh, &qh, sizeof y[i].qh);
    }
}

static void q8_0_ref(const float *x, blk_q8_0 *y, int64_t k) {
    const int qk = 32;
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f;
        for (int j = 0; j < qk; j++) amax = QMAX(amax, fabsf(x[i * qk + j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = FP32_TO_FP16(d);
        for (int j = 0; j < qk; ++j) y[i].qs[j] = (int8_t)roundf(x[i * qk + j] * id);
    }
}

/* ---- K-quant helpers ------------------------------------------------------------ */

/* Round to nearest (ties to even) for |fval| <= 4194303 by adding 1.5 * 2^23. */
static inline int nearest_int(float fval) {
    float val = fval + 12582912.f;
    int i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type,
                            const float *qw) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            L[i] = (int8_t)(nmax + QMAX(-nmax, QMIN(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    bool return_early = false;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = true;
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = QMAX(-nmax, QMIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = qw ? qw[i] : rmse_type == 1 ? x[i] * x[i] : rmse_type == 2 ? 1 : rmse_type == 3 ? fabsf(x[i]) : sqrtf(fabsf(x[i]));
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = QMAX(-nmax, QMIN(nmax - 1, l));
            float w = qw ? qw[i] : rmse_type == 1 ? x[i] * x[i] : rmse_type == 2 ? 1 : rmse_type == 3 ? fabsf(x[i]) : sqrtf(fabsf(x[i]));
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + QMAX(-nmax, QMIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

static float make_q3_quants(int n, int nmax, const float *x, int8_t *L, bool do_rmse) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    if (do_rmse) {
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = QMAX(-nmax, QMIN(nmax - 1, l));
            L[i] = (int8_t)l;
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * L[i] * L[i];
                    int new_l = nearest_int(x[i] * sl2 / slx);
                    new_l = QMAX(-nmax, QMIN(nmax - 1, new_l));
                    if (new_l != L[i]) {
                        slx += w * x[i] * new_l;
                        sl2 += w * new_l * new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = (int8_t)new_l;
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed) break;
        }
        for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = QMAX(-nmax, QMIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
    }
    return 1 / iscale;
}

static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)QMAX(0, QMIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float w = weights[i];
        best_error += w * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = QMAX(0, QMIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                float w = weights[i];
                cur_error += w * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

static inline void get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* ---- K-quants ------------------------------------------------------------------- */

static void q2_K_ref(const float *x, blk_q2_K *y, int64_t k) {
    const int64_t nb = k / QK_K;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, true);
            float scale = scales[j];
            if (scale > max_scale) max_scale = scale;
            float min = mins[j];
            if (min > max_min) max_min = min;
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                int l = nearest_int(iscale * scales[j]);
                y[i].scales[j] = (uint8_t)l;
            }
            y[i].d = FP32_TO_FP16(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = FP32_TO_FP16(0.f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; ++j) {
                int l = nearest_int(iscale * mins[j]);
                y[i].scales[j] |= (uint8_t)(l << 4);
            }
            y[i].dmin = FP32_TO_FP16(max_min / q4scale);
        } else {
            y[i].dmin = FP32_TO_FP16(0.f);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = FP16_TO_FP32(y[i].d) * (y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = FP16_TO_FP32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int((x[16 * j + ii] + dm) / d);
                l = QMAX(0, QMIN(3, l));
                L[16 * j + ii] = (uint8_t)l;
            }
        }
        for (int j = 0; j < QK_K; j += 128)
            for (int l = 0; l < 32; ++l)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        x += QK_K;
    }
}

static void q3_K_ref(const float *x, blk_q3_K *y, int64_t k) {
    const int64_t nb = k / QK_K;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
            float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                int8_t l = (int8_t)nearest_int(iscale * scales[j]);
                l = (int8_t)(QMAX(-32, QMIN(31, l)) + 32);
                if (j < 8) y[i].scales[j] = l & 0xF;
                else y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                l >>= 4;
                y[i].scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
            }
            y[i].d = FP32_TO_FP16(1 / iscale);
        } else {
            y[i].d = FP32_TO_FP16(0.f);
        }
        int8_t sc;
        for (int j = 0; j < QK_K / 16; ++j) {
            sc = (int8_t)(j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4);
            sc = (int8_t)((sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
            float d = FP16_TO_FP32(y[i].d) * sc;
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = QMAX(-4, QMIN(3, l));
                L[16 * j + ii] = (int8_t)(l + 4);
            }
        }
        memset(y[i].hmask, 0, QK_K / 8);
        /* the high bit of the first 8 quants goes to bit 0, the next 8 to bit 1, ... */
        int m = 0;
        uint8_t hm = 1;
        for (int j = 0; j < QK_K; ++j) {
            if (L[j] > 3) {
                y[i].hmask[m] |= hm;
                L[j] -= 4;
            }
            if (++m == QK_K / 8) {
                m = 0;
                hm <<= 1;
            }
        }
        for (int j = 0; j < QK_K; j += 128)
            for (int l = 0; l < 32; ++l)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) |
                                               (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        x += QK_K;
    }
}

/* Shared by Q4_K and Q5_K: the 6-bit packed scales and mins of 8 sub-blocks. */
static void pack_scales_k4(uint8_t *s, const float *scales, const float *mins, float inv_scale,
                           float inv_min) {
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = QMIN(63, ls);
        lm = QMIN(63, lm);
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
}

/* Q4_K (nmax 15) and Q5_K (nmax 31): the scale search and the final levels L. */
static void k45_levels(const float *x, uint8_t *L, uint8_t *scales12, uint16_t *d16,
                       uint16_t *dmin16, int nmax, float rmin, float rdelta, int nstep) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                     rdelta, nstep, false);
        float scale = scales[j];
        if (scale > max_scale) max_scale = scale;
        float min = mins[j];
        if (min > max_min) max_min = min;
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    pack_scales_k4(scales12, scales, mins, inv_scale, inv_min);
    *d16 = FP32_TO_FP16(max_scale / 63.f);
    *dmin16 = FP32_TO_FP16(max_min / 63.f);
    uint8_t sc, m;
    for (int j = 0; j < QK_K / 32; ++j) {
        get_scale_min_k4(j, scales12, &sc, &m);
        const float d = FP16_TO_FP32(*d16) * sc;
        if (!d) continue;
        const float dm = FP16_TO_FP32(*dmin16) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            l = QMAX(0, QMIN(nmax, l));
            L[32 * j + ii] = (uint8_t)l;
        }
    }
}

static void q4_K_ref(const float *x, blk_q4_K *y, int64_t k) {
    const int64_t nb = k / QK_K;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        k45_levels(x, L, y[i].scales, &y[i].d, &y[i].dmin, 15, -1.f, 0.1f, 20);
        uint8_t *q = y[i].qs;
        for (int j = 0; j < QK_K; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
        x += QK_K;
    }
}

static void q5_K_ref(const float *x, blk_q5_K *y, int64_t k) {
    const int64_t nb = k / QK_K;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < nb; i++) {
        k45_levels(x, L, y[i].scales, &y[i].d, &y[i].dmin, 31, -0.5f, 0.1f, 15);
        uint8_t *qh = y[i].qh, *ql = y[i].qs;
        memset(qh, 0, QK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n = 0; n < QK_K; n += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[n + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 <<= 2;
            m2 <<= 2;
            ql += 32;
        }
        x += QK_K;
    }
}

static void q6_K_ref(const float *x, blk_q6_K *y, int64_t k) {
    const int64_t nb = k / QK_K;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, NULL);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof(blk_q6_K));
            y[i].d = FP32_TO_FP16(0.f);
            x += QK_K;
            continue;
        }
        float iscale = -128.f / max_scale;
        y[i].d = FP32_TO_FP16(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib)
            y[i].scales[ib] = (int8_t)QMIN(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < QK_K / 16; ++j) {
            float d = FP16_TO_FP32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = QMAX(-32, QMIN(31, l));
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < QK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
        x += QK_K;
    }
}

/* ---- IQ4_NL / IQ4_XS (quantize_row_iq4_nl_impl without an importance matrix) ---- */

static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

/* Index of the level of the sorted val[] nearest to x; ties go up.  The form
 * of llama.cpp c392e509, whose files ../shared holds (later ggml compares
 * 2x with the midpoint instead, which can round differently). */
static inline int best_index_int8(int n, const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[n - 1]) return n - 1;
    int ml = 0, mu = n - 1;
    while (mu - ml > 1) {
        int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* One super-block of super_block_size values in sub-blocks of block_size:
 * IQ4_NL is (32, 32), IQ4_XS (256, 32).  ntry 7 as ggml calls it. */
static void iq4_impl(int super_block_size, int block_size, const float *x, uint16_t *dh, uint8_t *q4,
                     uint16_t *scales_h, uint8_t *scales_l, const int8_t *values, int ntry) {
    float scales[QK_K / 32], weight[32];
    uint8_t L[QK_K];
    memset(q4, 0, (size_t)super_block_size / 2);
    dh[0] = FP32_TO_FP16(0.f);
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < super_block_size / block_size; ++ib) {
        const float *xb = x + ib * block_size;
        uint8_t *Lb = L + ib * block_size;
        for (int j = 0; j < block_size; ++j) weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < block_size; ++j) {
            float ax = fabsf(xb[j]);
            if (ax > amax) {
                amax = ax;
                max = xb[j];
            }
        }
        if (amax < GROUP_MAX_EPS) {
            scales[ib] = 0;
            continue;
        }
        float d = ntry > 0 ? -max / values[0] : max / values[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < block_size; ++j) {
            float al = id * xb[j];
            int l = best_index_int8(16, values, al);
            Lb[j] = (uint8_t)l;
            float q = values[l];
            float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumqx / sumq2;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; ++itry) {
            id = (itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < block_size; ++j) {
                float al = id * xb[j];
                int l = best_index_int8(16, values, al);
                float q = values[l];
                float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        float abs_d = fabsf(d);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = d;
        }
    }
    if (super_block_size / block_size > 1) {
        int nb = super_block_size / block_size;
        memset(scales_h, 0, (size_t)((nb + 7) / 8) * sizeof(uint16_t));
        float d = -max_scale / 32;
        dh[0] = FP32_TO_FP16(d);
        float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < super_block_size / block_size; ++ib) {
            int l = nearest_int(id * scales[ib]);
            l = QMAX(-32, QMIN(31, l));
            float dl = d * l;
            float idl = dl ? 1 / dl : 0.f;
            uint8_t *Lb = L + ib * block_size;
            const float *xb = x + ib * block_size;
            for (int j = 0; j < block_size; ++j) Lb[j] = (uint8_t)best_index_int8(16, values, idl * xb[j]);
            l += 32;
            uint8_t l_l = l & 0xf, l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0) scales_l[ib / 2] = l_l;
            else scales_l[ib / 2] |= (uint8_t)(l_l << 4);
            scales_h[ib / 8] |= (uint16_t)(l_h << 2 * (ib % 8));
        }
    } else {
        dh[0] = FP32_TO_FP16(scales[0]);
        if (ntry > 0) {
            float id = scales[0] ? 1 / scales[0] : 0;
            for (int j = 0; j < super_block_size; ++j) L[j] = (uint8_t)best_index_int8(16, values, id * x[j]);
        }
    }
    for (int i = 0; i < super_block_size / 32; ++i)
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

static void iq4_nl_ref(const float *x, blk_iq4_nl *y, int64_t k) {
    uint16_t unused_h;
    for (int64_t i = 0; i < k / 32; i++)
        iq4_impl(32, 32, x + 32 * i, &y[i].d, y[i].qs, &unused_h, NULL, kvalues_iq4nl, 7);
}

static void iq4_xs_ref(const float *x, blk_iq4_xs *y, int64_t k) {
    for (int64_t i = 0; i < k / QK_K; i++)
        iq4_impl(QK_K, 32, x + QK_K * i, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l,
                 kvalues_iq4nl, 7);
}

/* ---- MXFP4 (quantize_row_mxfp4_ref) ----------------------------------------------- */

/* the code whose value (kern_mxfp4_values * e) is nearest x; first one on ties */
static int best_index_mxfp4(float x, float e) {
    int best = 0;
    float best_err = fabsf(kern_mxfp4_values[0] * e - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(kern_mxfp4_values[i] * e - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

static void mxfp4_ref(const float *x, blk_mxfp4 *y, int64_t k) {
    const int qk = 32;
    for (int64_t i = 0; i < k / qk; i++) {
        float amax = 0.0f;
        for (int j = 0; j < qk; j++)
            if (amax < fabsf(x[i * qk + j])) amax = fabsf(x[i * qk + j]);
        const uint8_t e = amax > 0.0f ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = kern_e8m0_half(e);
        y[i].e = e;
        for (int j = 0; j < qk / 2; j++)
            y[i].qs[j] = (uint8_t)(best_index_mxfp4(x[i * qk + j], d) |
                                   best_index_mxfp4(x[i * qk + qk / 2 + j], d) << 4);
    }
}

/* ---- the row table ---------------------------------------------------------------- */

static void row_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * sizeof(float)); }
static void row_f16(const float *x, void *y, int64_t n) {
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_f16(x[i]);
}
static void row_bf16(const float *x, void *y, int64_t n) {
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_bf16(x[i]);
}
#define ROW(fn, blk) \
    static void row_##fn(const float *x, void *y, int64_t n) { fn##_ref(x, (blk *)y, n); }
ROW(q4_0, blk_q4_0)
ROW(q4_1, blk_q4_1)
ROW(q5_0, blk_q5_0)
ROW(q5_1, blk_q5_1)
ROW(q8_0, blk_q8_0)
ROW(q2_K, blk_q2_K)
ROW(q3_K, blk_q3_K)
ROW(q4_K, blk_q4_K)
ROW(q5_K, blk_q5_K)
ROW(q6_K, blk_q6_K)
ROW(iq4_nl, blk_iq4_nl)
ROW(iq4_xs, blk_iq4_xs)
ROW(mxfp4, blk_mxfp4)
#undef ROW

typedef void (*quant_row_fn)(const float *x, void *y, int64_t n);

/* Indexed by ggml type id; NULL: cannot be produced. */
static const quant_row_fn quant_rows[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32] = row_f32,   [GGML_TYPE_F16] = row_f16,   [GGML_TYPE_BF16] = row_bf16,
    [GGML_TYPE_Q4_0] = row_q4_0, [GGML_TYPE_Q4_1] = row_q4_1, [GGML_TYPE_Q5_0] = row_q5_0,
    [GGML_TYPE_Q5_1] = row_q5_1, [GGML_TYPE_Q8_0] = row_q8_0, [GGML_TYPE_Q2_K] = row_q2_K,
    [GGML_TYPE_Q3_K] = row_q3_K, [GGML_TYPE_Q4_K] = row_q4_K, [GGML_TYPE_Q5_K] = row_q5_K,
    [GGML_TYPE_Q6_K] = row_q6_K, [GGML_TYPE_IQ4_NL] = row_iq4_nl, [GGML_TYPE_IQ4_XS] = row_iq4_xs,
    [GGML_TYPE_MXFP4] = row_mxfp4,
};

int quant_type_supported(int type) {
    return type >= 0 && type < GGML_TYPE_COUNT && quant_rows[type] != NULL;
}

static uint32_t type_blck(int type) {
    const ggml_type_info *ti = ggml_type_get((uint32_t)type);
    return ti ? ti->blck_size : 0;
}

size_t quant_row(int type, const float *src, void *dst, int64_t n) {
    if (!quant_type_supported(type) || n <= 0 || n % type_blck(type)) return 0;
    quant_rows[type](src, dst, n);
    return (size_t)ggml_row_bytes((uint32_t)type, (uint64_t)n);
}

int quant_type_parse(const char *name) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (quant_rows[t] && !strcasecmp(name, ggml_type_name((uint32_t)t))) return t;
    return -1;
}

