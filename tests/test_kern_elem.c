/*
 * test_kern_elem.c — the elementwise/normalisation kernels against naive
 * double-precision references.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/kern_elem.h"
#include "test.h"

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

TEST(kern_elem, layer_norm_matches_double_reference) {
    enum { N = 96, T = 3 };
    float x[T * N], w[N], b[N], y[T * N];
    unsigned s = 1;
    for (int i = 0; i < T * N; i++) x[i] = 3 * frand(&s) + 0.5f;
    for (int i = 0; i < N; i++) w[i] = 1 + 0.1f * frand(&s), b[i] = 0.2f * frand(&s);
    kern_layer_norm(NULL, y, x, w, b, N, 1e-5f, T);
    for (int t = 0; t < T; t++) {
        double mean = 0, var = 0;
        for (int i = 0; i < N; i++) mean += x[t * N + i];
        mean /= N;
        for (int i = 0; i < N; i++) var += (x[t * N + i] - mean) * (x[t * N + i] - mean);
        var /= N;
        for (int i = 0; i < N; i++) {
            double want = (x[t * N + i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
            EXPECT_NEAR(y[t * N + i], want, 1e-5);
        }
    }
    kern_layer_norm(NULL, y, x, w, NULL, N, 1e-5f, 1); /* no bias */
    EXPECT(isfinite(y[0]));
}

TEST(kern_elem, gelu_table_close_to_exact_and_limits) {
    float x[] = {-12.0f, -10.0f, -3.0f, -0.5f, 0.0f, 0.25f, 1.0f, 4.0f, 9.99f, 10.0f, 50.0f};
    int n = (int)(sizeof x / sizeof *x);
    float y[16], g[16], u[16];
    kern_gelu(NULL, y, x, n, 1);
    for (int i = 0; i < n; i++) {
        double xe = x[i], exact = 0.5 * xe * (1 + tanh(0.7978845608028654 * xe * (1 + 0.044715 * xe * xe)));
        if (x[i] <= -10) EXPECT_NEAR(y[i], 0.0, 0);
        else if (x[i] >= 10) EXPECT_NEAR(y[i], x[i], 0);
        else EXPECT_NEAR(y[i], exact, 2e-3 * fmax(1.0, fabs(exact))); /* F16 table */
    }
    for (int i = 0; i < n; i++) g[i] = x[i], u[i] = 2.0f;
    kern_geglu(NULL, y, g, u, n, 1);
    float y2[16];
    kern_gelu(NULL, y2, x, n, 1);
    for (int i = 0; i < n; i++) EXPECT_NEAR(y[i], 2 * y2[i], 0);
}

TEST(kern_elem, add_row_scale_copy_cols_logits_post) {
    float x[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, y[6];
    kern_add_row(NULL, y, x, b, 3, 2);
    EXPECT_NEAR(y[0], 11, 0);
    EXPECT_NEAR(y[5], 36, 0);
    kern_scale(NULL, y, x, 0.5f, 3, 2);
    EXPECT_NEAR(y[3], 2, 0);
    float c[4];
    kern_copy_cols(NULL, c, x, 3, 1, 2, 2); /* rows [1 2 3] [4 5 6] → [2 3] [5 6] */
    EXPECT_NEAR(c[0], 2, 0);
    EXPECT_NEAR(c[1], 3, 0);
    EXPECT_NEAR(c[2], 5, 0);
    EXPECT_NEAR(c[3], 6, 0);
    float l[4] = {-100, -1, 1, 100};
    kern_logits_post(NULL, l, NULL, 4, 1, 0.5f, 2.0f);
    EXPECT_NEAR(l[0], -2.0, 1e-6);
    EXPECT_NEAR(l[2], 2 * tanh(0.25), 1e-6);
    EXPECT_NEAR(l[3], 2.0, 1e-6);
    /* a bias (phi2's output.bias) is added to every row first, before the scale */
    float l2[6] = {1, 2, 3, 4, 5, 6}, bias[3] = {0.5f, -1, 2};
    kern_logits_post(NULL, l2, bias, 3, 2, 2.0f, 0.0f);
    EXPECT_NEAR(l2[0], 3.0, 0);
    EXPECT_NEAR(l2[1], 2.0, 0);
    EXPECT_NEAR(l2[5], 16.0, 0);
}

/* mul_row (vector and scalar weight), mul, ReLU² and xIELU against double
 * references of their definitions (ggml_mul, ggml_relu + ggml_sqr,
 * ggml_xielu's op_xielu with softplus-transformed parameters). */
TEST(kern_elem, mul_relu_sqr_xielu) {
    enum { N = 37, T = 3 };
    float x[T * N], w[N], y[T * N], z[T * N];
    unsigned s = 7;
    for (int i = 0; i < T * N; i++) x[i] = 4 * frand(&s);
    x[0] = 0.0f, x[1] = -0.0f, x[2] = -30.0f, x[3] = 25.0f;
    for (int i = 0; i < N; i++) w[i] = 1 + frand(&s);
    kern_mul_row(NULL, y, x, w, N, N, T);
    for (int i = 0; i < T * N; i++) EXPECT_NEAR(y[i], (double)x[i] * w[i % N], 1e-6 * fabs(x[i]));
    kern_mul_row(NULL, y, x, w, 1, N, T); /* a one-element weight: a scalar */
    for (int i = 0; i < T * N; i++) EXPECT_NEAR(y[i], (double)x[i] * w[0], 1e-6 * fabs(x[i]));
    memcpy(z, x, sizeof z);
    kern_mul_row(NULL, z, z, w, N, N, T); /* in place */
    kern_mul_row(NULL, y, x, w, N, N, T);
    EXPECT(!memcmp(y, z, sizeof y));
    kern_mul(NULL, y, x, x, N, T);
    for (int i = 0; i < T * N; i++) EXPECT_NEAR(y[i], (double)x[i] * x[i], 1e-6 * x[i] * x[i]);
    kern_relu_sqr(NULL, y, x, N, T);
    for (int i = 0; i < T * N; i++) {
        double r = x[i] > 0 ? x[i] : 0;
        EXPECT_NEAR(y[i], r * r, 1e-6 * r * r);
    }
    EXPECT(y[1] == 0.0f && !signbit(y[1]));
    /* xIELU with Apertus-like raw values; a_p, a_n through softplus (and its x > 20 branch) */
    const float an[2] = {0.8f, 25.0f}, ap[2] = {0.9f, 21.0f}, be = 0.5f, ep = -1e-6f;
    for (int c = 0; c < 2; c++) {
        kern_xielu(NULL, y, x, an[c], ap[c], be, ep, N, T);
        double a_p = ap[c] > 20 ? ap[c] : log1p(exp((double)ap[c]));
        double a_n = be + (an[c] > 20 ? an[c] : log1p(exp((double)an[c])));
        for (int i = 0; i < T * N; i++) {
            double v = x[i], want = v > 0 ? a_p * v * v + be * v : (expm1(fmin(v, ep)) - v) * a_n + be * v;
            EXPECT_MSG(fabs(y[i] - want) <= 2e-6 * fmax(1.0, fabs(want)),
                       "xielu(%.9g; alpha_n %g alpha_p %g) = %.9g, want %.9g", x[i], an[c], ap[c], y[i], want);
        }
    }
}

/* tanh, sub, concat and the group ops of Gemma 3n's AltUp against double
 * references of their definitions (what llama.cpp's graph computes with
 * ggml_sqr/sum_rows/sqrt/mul/div, the permuted mul_mat, scale_bias, mean). */
TEST(kern_elem, groups_and_altup_ops) {
    enum { N = 24, G = 4, T = 3 };
    static float x[T * G * N], ref[T * N], c[T * G * G], cg[T * G], v[T * N], y[T * G * N];
    unsigned s = 11;
    for (int i = 0; i < T * G * N; i++) x[i] = 2 * frand(&s);
    for (int i = 0; i < T * N; i++) ref[i] = 3 * frand(&s), v[i] = frand(&s);
    for (int i = 0; i < T * G * G; i++) c[i] = frand(&s);
    for (int i = 0; i < T * G; i++) cg[i] = frand(&s);
    kern_tanh(NULL, y, x, G * N, T);
    for (int i = 0; i < T * G * N; i++) EXPECT_NEAR(y[i], tanh(x[i]), 2e-7);
    kern_sub(NULL, y, x, x + N, N, 2);
    for (int i = 0; i < 2 * N; i++) EXPECT_NEAR(y[i], (double)x[i] - x[N + i], 1e-6);
    float cat[T * (N + 5)];
    kern_concat(NULL, cat, ref, N, v, 5, T);
    for (int t = 0; t < T; t++) {
        EXPECT(!memcmp(cat + t * (N + 5), ref + t * N, N * sizeof(float)));
        EXPECT(!memcmp(cat + t * (N + 5) + N, v + t * 5, 5 * sizeof(float)));
    }
    /* match_norm: every group of x gets ref's magnitude, its direction kept */
    kern_match_norm(NULL, y, x, ref, N, G, T);
    for (int t = 0; t < T; t++) {
        double mr = 0;
        for (int i = 0; i < N; i++) mr += (double)ref[t * N + i] * ref[t * N + i];
        for (int g = 0; g < G; g++) {
            const float *xg = x + (t * G + g) * N;
            double mx = 0;
            for (int i = 0; i < N; i++) mx += (double)xg[i] * xg[i];
            for (int i = 0; i < N; i++)
                EXPECT_NEAR(y[(t * G + g) * N + i], xg[i] * sqrt(mr) / sqrt(mx), 1e-5);
        }
    }
    /* mix_groups: group j = Σ_k c[j*G + k] x_k */
    kern_mix_groups(NULL, y, x, c, N, G, T);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < G; j++)
            for (int i = 0; i < N; i++) {
                double want = 0;
                for (int k = 0; k < G; k++) want += (double)c[t * G * G + j * G + k] * x[(t * G + k) * N + i];
                EXPECT_NEAR(y[(t * G + j) * N + i], want, 1e-5);
            }
    /* axpy_groups: group j = v * (c_j + bias) + p_j, in place */
    memcpy(y, x, sizeof y);
    kern_axpy_groups(NULL, y, y, v, cg, 1.0f, N, G, T);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < G; j++)
            for (int i = 0; i < N; i++)
                EXPECT_NEAR(y[(t * G + j) * N + i], (double)v[t * N + i] * (cg[t * G + j] + 1.0) + x[(t * G + j) * N + i],
                            1e-5);
    /* add_groups from group 1: group 0 untouched */
    kern_add_groups(NULL, y, x, v, N, G, 1, T);
    for (int t = 0; t < T; t++)
        for (int g = 0; g < G; g++)
            for (int i = 0; i < N; i++)
                EXPECT_NEAR(y[(t * G + g) * N + i], x[(t * G + g) * N + i] + (g >= 1 ? v[t * N + i] : 0.0), 1e-6);
    /* gaussian_topk: x - (mean + mul * std (n - 1)), clipped at 0 */
    kern_gaussian_topk(NULL, y, x, 1.6448533535003662f, G * N, T);
    int kept = 0;
    for (int t = 0; t < T; t++) {
        const float *xr = x + t * G * N;
        double mean = 0, var = 0;
        for (int i = 0; i < G * N; i++) mean += xr[i];
        mean /= G * N;
        for (int i = 0; i < G * N; i++) var += (xr[i] - mean) * (xr[i] - mean);
        double cut = mean + 1.6448533535003662 * sqrt(var / (G * N - 1));
        for (int i = 0; i < G * N; i++) {
            EXPECT_NEAR(y[t * G * N + i], fmax(xr[i] - cut, 0.0), 1e-5);
            kept += y[t * G * N + i] > 0;
        }
    }
    EXPECT_MSG(kept > 0 && kept < T * G * N / 4, "gaussian_topk kept %d of %d", kept, T * G * N);
}

/* pos_log_scale (llama.cpp's attention temperature): rows at positions
 * pos..pos+T-1 times 1 + scale ln(1 + floor((p + offset) / floor_scale)). */
TEST(kern_elem, pos_log_scale) {
    enum { N = 5, T = 6 };
    float x[T * N], y[T * N];
    unsigned s = 3;
    for (int i = 0; i < T * N; i++) x[i] = frand(&s);
    cf_env E = {.pos = 29};
    kern_pos_log_scale(&E, y, x, 0.1f, 32, 0.0f, N, T);
    for (int t = 0; t < T; t++) {
        double f = 1 + 0.1 * log(1 + floor((29.0 + t) / 32));
        for (int i = 0; i < N; i++) EXPECT_NEAR(y[t * N + i], x[t * N + i] * f, 1e-6);
    }
    EXPECT(y[0] == x[0] && y[2 * N] == x[2 * N]); /* positions 29, 31: factor exactly 1 */
    EXPECT(y[3 * N] != x[3 * N]);                 /* position 32: 1 + 0.1 ln 2 */
}
