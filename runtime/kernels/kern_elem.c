/*
 * kern_elem.c — the elementwise and normalisation kernels that model
 * families beyond llama need: bias add, scale, GELU (and GEGLU), LayerNorm,
 * column split, the logits post-processing (bias, scale, soft-capping), and
 * the products and activations of the issue-19 families (per-column and
 * scalar weights, elementwise products, ReLU², xIELU).
 *
 * They are memory-bound and tiny next to the matmuls, so one portable
 * implementation serves every ISA (the compiler vectorises the plain loops).
 * Numerics follow ggml so parity holds: LayerNorm sums in double like
 * ggml_compute_forward_norm_f32, GELU is the tanh form read from a table of
 * F16 inputs exactly as ggml_vec_gelu_f32 (GGML_GELU_FP16) does, soft-capping
 * is scale → tanh → scale as llama.cpp builds it for Gemma 2.  The MoE and MLA
 * helpers (sigmoid gate, gpt-oss's clamped SwiGLU, strided per-head copies)
 * live here too.
 */
#include "kern_elem.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "base/f16.h"
#include "kern.h"

void kern_add_row(cf_env *E, float *y, const float *x, const float *b, int n, int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++)
        for (int i = 0; i < n; i++) y[(size_t)t * n + i] = x[(size_t)t * n + i] + b[i];
}

void kern_scale(cf_env *E, float *y, const float *x, float s, int n, int n_tok) {
    (void)E;
    size_t total = (size_t)n * (size_t)n_tok;
    for (size_t i = 0; i < total; i++) y[i] = x[i] * s;
}

/* ---- GELU ----------------------------------------------------------------------- */

#define GELU_COEF_A 0.044715f
#define SQRT_2_OVER_PI 0.79788456080286535587989211986876f

static uint16_t gelu_table[1 << 16]; /* f16 bits → f16 bits of gelu(x); immutable after init */
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static float gelu_f32(float x) {
    return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * x * (1.0f + GELU_COEF_A * x * x)));
}

static void gelu_init(void) {
    for (uint32_t i = 0; i < (1u << 16); i++)
        gelu_table[i] = f32_to_f16(gelu_f32(f16_to_f32((uint16_t)i)));
}

static inline float gelu_one(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return f16_to_f32(gelu_table[f32_to_f16(x)]);
}

void kern_gelu(cf_env *E, float *y, const float *x, int n, int n_tok) {
    (void)E;
    pthread_once(&gelu_once, gelu_init);
    size_t total = (size_t)n * (size_t)n_tok;
    for (size_t i = 0; i < total; i++) y[i] = gelu_one(x[i]);
}

void kern_geglu(cf_env *E, float *y, const float *g, const float *u, int n, int n_tok) {
    (void)E;
    pthread_once(&gelu_once, gelu_init);
    size_t total = (size_t)n * (size_t)n_tok;
    for (size_t i = 0; i < total; i++) y[i] = gelu_one(g[i]) * u[i];
}

float kern_gelu_ref(float x) { return gelu_f32(x); }

/* ---- LayerNorm -------------------------------------------------------------------- */

void kern_layer_norm(cf_env *E, float *y, const float *x, const float *w, const float *b, int n,
                     float eps, int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++) {
        const float *xr = x + (size_t)t * n;
        float *yr = y + (size_t)t * n;
        double sum = 0.0;
        for (int i = 0; i < n; i++) sum += (double)xr[i];
        const float mean = (float)(sum / n);
        double sum2 = 0.0;
        for (int i = 0; i < n; i++) {
            float v = xr[i] - mean;
            yr[i] = v;
            sum2 += (double)(v * v);
        }
        const float variance = (float)(sum2 / n);
        const float scale = 1.0f / sqrtf(variance + eps);
        for (int i = 0; i < n; i++) yr[i] = yr[i] * scale * w[i] + (b ? b[i] : 0.0f);
    }
}

/* ---- columns, logits -------------------------------------------------------------- */

void kern_copy_cols(cf_env *E, float *y, const float *x, int n_x, int col0, int n_y, int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++)
        memcpy(y + (size_t)t * n_y, x + (size_t)t * n_x + col0, (size_t)n_y * sizeof *y);
}

void kern_logits_post(cf_env *E, float *logits, const float *bias, int n_vocab, int n_rows,
                      float scale, float softcap) {
    (void)E;
    size_t total = (size_t)n_vocab * (size_t)n_rows;
    if (bias)
        for (size_t i = 0; i < total; i++) logits[i] += bias[i % (size_t)n_vocab];
    if (scale != 1.0f)
        for (size_t i = 0; i < total; i++) logits[i] *= scale;
    if (softcap > 0.0f) {
        const float inv = 1.0f / softcap;
        for (size_t i = 0; i < total; i++) logits[i] = tanhf(logits[i] * inv) * softcap;
    }
}

/* ---- products and activations ------------------------------------------------------ */

void kern_mul_row(cf_env *E, float *y, const float *x, const float *w, int n_w, int n, int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++)
        for (int i = 0; i < n; i++)
            y[(size_t)t * n + i] = x[(size_t)t * n + i] * w[n_w == 1 ? 0 : i];
}

void kern_mul(cf_env *E, float *y, const float *a, const float *b, int n, int n_tok) {
    (void)E;
    size_t total = (size_t)n * (size_t)n_tok;
    for (size_t i = 0; i < total; i++) y[i] = a[i] * b[i];
}

void kern_relu_sqr(cf_env *E, float *y, const float *x, int n, int n_tok) {
    (void)E;
    size_t total = (size_t)n * (size_t)n_tok;
    for (size_t i = 0; i < total; i++) {
        const float r = x[i] > 0.0f ? x[i] : 0.0f;
        y[i] = r * r;
    }
}

/* ggml_compute_softplus_f32 */
static float softplus_f32(float x) { return x > 20.0f ? x : logf(1 + expf(x)); }

void kern_xielu(cf_env *E, float *y, const float *x, float alpha_n, float alpha_p, float beta,
                float eps, int n, int n_tok) {
    (void)E;
    const float a_n = beta + softplus_f32(alpha_n), a_p = softplus_f32(alpha_p);
    size_t total = (size_t)n * (size_t)n_tok;
    for (size_t i = 0; i < total; i++) {
        const float v = x[i];
        if (v > 0.0f) {
            y[i] = a_p * v * v + beta * v;
        } else {
            const float m = fminf(v, eps);
            y[i] = (expm1f(m) - v) * a_n + beta * v;
        }
    }
}

void kern_tanh(cf_env *E, float *y, const float *x, int n, int n_tok) {
    (void)E;
    size_t total = (size_t)n * (size_t)n_tok;
    for (size_t i = 0; i < total; i++) y[i] = tanhf(x[i]);
}

void kern_sub(cf_env *E, float *y, const float *a, const float *b, int n, int n_tok) {
    (void)E;
    size_t total = (size_t)n * (size_t)n_tok;
    for (size_t i = 0; i < total; i++) y[i] = a[i] - b[i];
}

void kern_concat(cf_env *E, float *y, const float *a, int n_a, const float *b, int n_b, int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++) {
        float *yr = y + (size_t)t * (n_a + n_b);
        memmove(yr, a + (size_t)t * n_a, (size_t)n_a * sizeof *y);
        memmove(yr + n_a, b + (size_t)t * n_b, (size_t)n_b * sizeof *y);
    }
}

/* ---- groups of a row ------------------------------------------------------------------ */

static float magnitude(const float *v, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)(v[i] * v[i]);
    return sqrtf((float)s);
}

void kern_match_norm(cf_env *E, float *y, const float *x, const float *ref, int n, int n_group,
                     int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++) {
        const float target = magnitude(ref + (size_t)t * n, n);
        for (int g = 0; g < n_group; g++) {
            const float *xg = x + ((size_t)t * n_group + g) * n;
            float *yg = y + ((size_t)t * n_group + g) * n;
            const float m = magnitude(xg, n);
            for (int i = 0; i < n; i++) yg[i] = (xg[i] * target) / m;
        }
    }
}

void kern_mix_groups(cf_env *E, float *y, const float *x, const float *c, int n, int n_group,
                     int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++) {
        const float *xr = x + (size_t)t * n_group * n, *cr = c + (size_t)t * n_group * n_group;
        float *yr = y + (size_t)t * n_group * n;
        for (int j = 0; j < n_group; j++)
            for (int i = 0; i < n; i++) {
                float s = 0.0f;
                for (int k = 0; k < n_group; k++) s += xr[(size_t)k * n + i] * cr[j * n_group + k];
                yr[(size_t)j * n + i] = s;
            }
    }
}

void kern_axpy_groups(cf_env *E, float *y, const float *p, const float *v, const float *c,
                      float bias, int n, int n_group, int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++)
        for (int j = 0; j < n_group; j++) {
            const float cj = c[(size_t)t * n_group + j] + bias;
            const float *pj = p + ((size_t)t * n_group + j) * n, *vt = v + (size_t)t * n;
            float *yj = y + ((size_t)t * n_group + j) * n;
            for (int i = 0; i < n; i++) yj[i] = vt[i] * cj + pj[i];
        }
}

void kern_add_groups(cf_env *E, float *y, const float *x, const float *v, int n, int n_group,
                     int g0, int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++)
        for (int g = 0; g < n_group; g++) {
            const float *xg = x + ((size_t)t * n_group + g) * n, *vt = v + (size_t)t * n;
            float *yg = y + ((size_t)t * n_group + g) * n;
            for (int i = 0; i < n; i++) yg[i] = g >= g0 ? xg[i] + vt[i] : xg[i];
        }
}

void kern_gaussian_topk(cf_env *E, float *y, const float *x, float std_mul, int n, int n_tok) {
    (void)E;
    const float inv_n1 = 1.0f / (float)(n - 1);
    for (int t = 0; t < n_tok; t++) {
        const float *xr = x + (size_t)t * n;
        float *yr = y + (size_t)t * n;
        double sum = 0.0;
        for (int i = 0; i < n; i++) sum += (double)xr[i];
        const float mean = (float)sum / (float)n;
        double ss = 0.0;
        for (int i = 0; i < n; i++) {
            const float d = xr[i] - mean;
            ss += (double)(d * d);
        }
        const float std = sqrtf((float)ss * inv_n1);
        const float cutoff = mean + std * std_mul;
        for (int i = 0; i < n; i++) {
            const float d = xr[i] - cutoff;
            yr[i] = d > 0.0f ? d : 0.0f;
        }
    }
}

void kern_pos_log_scale(cf_env *E, float *y, const float *x, float scale, int floor_scale,
                        float offset, int n, int n_tok) {
    for (int t = 0; t < n_tok; t++) {
        const float pos = (float)(E->pos + t);
        const float s = (float)(log(floorf((pos + offset) / (float)floor_scale) + 1.0) * scale + 1.0);
        for (int i = 0; i < n; i++) y[(size_t)t * n + i] = x[(size_t)t * n + i] * s;
    }
}

/* ---- gates and per-head copies (MoE, MLA) -------------------------------------------- */

void kern_mul_sigmoid(cf_env *E, float *y, const float *x, const float *g, int n, int n_g,
                      int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++) {
        const float *gt = g + (size_t)t * n_g;
        for (int i = 0; i < n; i++) {
            const float gi = gt[n_g == 1 ? 0 : i];
            y[(size_t)t * n + i] = x[(size_t)t * n + i] * (1.0f / (1.0f + expf(-gi)));
        }
    }
}

void kern_swiglu_oai(cf_env *E, float *y, const float *g, const float *u, float alpha, float limit,
                     int n, int n_tok) {
    (void)E;
    size_t total = (size_t)n * (size_t)n_tok;
    for (size_t i = 0; i < total; i++) {
        const float x = g[i] < limit ? g[i] : limit;
        const float v = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        y[i] = x / (1.0f + expf(alpha * (-x))) * (v + 1.0f);
    }
}

void kern_head_copy(cf_env *E, float *y, int y_stride, int y_head, const float *x, int x_stride,
                    int x_head, int n, int n_head, int n_tok) {
    (void)E;
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_head; h++)
            memcpy(y + (size_t)t * y_stride + (size_t)h * y_head,
                   x + (size_t)t * x_stride + (size_t)h * x_head, (size_t)n * sizeof *y);
}
