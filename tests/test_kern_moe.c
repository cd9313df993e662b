/*
 * test_kern_moe.c — the mixture-of-experts and latent-attention kernels
 * (kernels/kern_moe.c, the MoE/MLA entries of kern_elem.c and kern.c's
 * attention and RoPE extensions) against references written here from
 * llama.cpp's definitions (build_moe_ffn, ggml_soft_max_ext with sinks,
 * rope_yarn, ggml_swiglu_oai), and the expert matmul against the dense matmul
 * of each chosen expert: bit for bit, for every weight type, both activation
 * modes, both ISAs, with and without a thread pool.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/ggml_type.h"
#include "base/pool.h"
#include "kernels/kern.h"
#include "kernels/quant.h"
#include "test.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dULL;
static uint32_t rnd_u32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rnd_f(float lo, float hi) { return lo + (hi - lo) * (float)(rnd_u32() & 0xffffff) / 16777216.0f; }
static void rnd_fill(float *x, long n, float lo, float hi) {
    for (long i = 0; i < n; i++) x[i] = rnd_f(lo, hi);
}
static int n_isas(void) { return kern_isa_available(KERN_ISA_AVX2) ? 2 : 1; }

static int route_id(const float *r, int k, int j) {
    int32_t id;
    memcpy(&id, r + k + j, 4);
    return id;
}

/* ---- routing ------------------------------------------------------------------------ */

/* build_moe_ffn's routing of one token, in double where ggml sums in double */
static void route_naive(const float *lg, const float *bias, int n_exp, int k, int gating, int norm,
                        float scale, int n_group, int n_group_used, int *ids, double *w) {
    double p[64], sel[64];
    if (gating == CF_GATING_SOFTMAX) {
        double mx = -1e300, sum = 0;
        for (int i = 0; i < n_exp; i++) mx = lg[i] > mx ? lg[i] : mx;
        for (int i = 0; i < n_exp; i++) sum += p[i] = exp(lg[i] - mx);
        for (int i = 0; i < n_exp; i++) p[i] /= sum;
    } else if (gating == CF_GATING_SIGMOID) {
        for (int i = 0; i < n_exp; i++) p[i] = 1 / (1 + exp(-(double)lg[i]));
    } else {
        for (int i = 0; i < n_exp; i++) p[i] = lg[i];
    }
    for (int i = 0; i < n_exp; i++) sel[i] = p[i] + (bias ? bias[i] : 0);
    if (n_group > 1) {
        int per = n_exp / n_group, keep[64] = {0};
        double gs[64];
        for (int g = 0; g < n_group; g++) { /* sum of the group's two best */
            double a = -1e300, b = -1e300;
            for (int i = 0; i < per; i++) {
                double v = sel[g * per + i];
                if (v > a) b = a, a = v;
                else if (v > b) b = v;
            }
            gs[g] = a + b;
        }
        for (int u = 0; u < n_group_used; u++) {
            int best = -1;
            for (int g = 0; g < n_group; g++)
                if (!keep[g] && (best < 0 || gs[g] > gs[best])) best = g;
            keep[best] = 1;
        }
        for (int g = 0; g < n_group; g++)
            if (!keep[g])
                for (int i = 0; i < per; i++) sel[g * per + i] = -INFINITY;
    }
    int used[64] = {0};
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n_exp; i++)
            if (!used[i] && (best < 0 || sel[i] > sel[best])) best = i;
        used[best] = 1;
        ids[j] = best;
        w[j] = p[best];
    }
    if (gating == CF_GATING_SOFTMAX_WEIGHT) {
        double mx = -1e300, sum = 0;
        for (int j = 0; j < k; j++) mx = w[j] > mx ? w[j] : mx;
        for (int j = 0; j < k; j++) sum += w[j] = exp(w[j] - mx);
        for (int j = 0; j < k; j++) w[j] /= sum;
    }
    if (norm) {
        double s = 0;
        for (int j = 0; j < k; j++) s += w[j];
        for (int j = 0; j < k; j++) w[j] /= s > 6.103515625e-5 ? s : 6.103515625e-5;
    }
    if (scale != 0 && scale != 1)
        for (int j = 0; j < k; j++) w[j] *= scale;
}

TEST(kern_moe, route_variants) {
    enum { NE = 8, T = 6 };
    const struct { int k, gating, norm; float scale; int bias, n_group, n_group_used; const char *what; } cases[] = {
        {2, CF_GATING_SOFTMAX, 1, 0, 0, 1, 1, "Mixtral: softmax, renormalised"},
        {3, CF_GATING_SOFTMAX, 0, 0, 0, 1, 1, "qwen2moe/olmoe: softmax, raw"},
        {2, CF_GATING_SIGMOID, 1, 2.5f, 1, 1, 1, "DeepSeek-V3: sigmoid, selection bias, norm, scale"},
        {2, CF_GATING_SIGMOID, 1, 2.5f, 1, 4, 2, "DeepSeek-V3 with 4 groups, 2 used"},
        {2, CF_GATING_SOFTMAX_WEIGHT, 0, 0, 0, 1, 1, "gpt-oss: softmax over the chosen"},
        {1, CF_GATING_SOFTMAX, 0, 1.0f, 0, 1, 1, "top-1, scale 1 = none"},
    };
    const cf_kernels *K = kern_table(KERN_ISA_SCALAR);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float lg[T * NE], bias[NE], route[T * 2 * 8];
        rnd_fill(lg, T * NE, -3, 3);
        rnd_fill(bias, NE, -1, 1);
        cf_env E = {.K = K};
        K->moe_route(&E, route, lg, cases[c].bias ? bias : NULL, NE, cases[c].k, cases[c].gating,
                     cases[c].norm, cases[c].scale, cases[c].n_group, cases[c].n_group_used, T);
        for (int t = 0; t < T; t++) {
            int ids[8];
            double w[8];
            route_naive(lg + t * NE, cases[c].bias ? bias : NULL, NE, cases[c].k, cases[c].gating,
                        cases[c].norm, cases[c].scale, cases[c].n_group, cases[c].n_group_used, ids, w);
            const float *r = route + t * 2 * cases[c].k;
            for (int j = 0; j < cases[c].k; j++) {
                EXPECT_MSG(route_id(r, cases[c].k, j) == ids[j], "%s: token %d slot %d expert %d, want %d",
                           cases[c].what, t, j, route_id(r, cases[c].k, j), ids[j]);
                EXPECT_MSG(fabs(r[j] - w[j]) <= 1e-6 * (1 + fabs(w[j])), "%s: token %d slot %d weight %.9g, want %.9g",
                           cases[c].what, t, j, r[j], w[j]);
            }
        }
    }
    /* a route the kernels cannot take: NaN weights and ids, never a crash */
    float lg[NE] = {0}, route[4];
    cf_env E = {.K = K};
    K->moe_route(&E, route, lg, NULL, NE, 2, 99, 0, 0, 1, 1, 1);
    EXPECT(isnan(route[0]) && isnan(route[3]));
}

TEST(kern_moe, weighted_sum) {
    enum { T = 3, K2 = 3, N = 5 };
    float x[T * K2 * N], route[T * 2 * K2], y[T * N];
    rnd_fill(x, T * K2 * N, -1, 1);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K2; j++) {
            route[t * 2 * K2 + j] = rnd_f(0, 1);
            int32_t id = j;
            memcpy(route + t * 2 * K2 + K2 + j, &id, 4);
        }
    cf_env E = {.K = kern_table(KERN_ISA_SCALAR)};
    const float es[K2] = {0.5f, 1.7f, -0.3f}; /* per-expert output scales (Gemma 4) */
    for (int with_s = 0; with_s < 2; with_s++) {
        E.K->moe_sum(&E, y, x, route, with_s ? es : NULL, N, K2, T);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < N; i++) {
                /* llama.cpp's order: (slot · scale) · weight, then slot 0 + slot 1 + slot 2 */
                float want = 0;
                for (int j = 0; j < K2; j++) {
                    float v = x[(t * K2 + j) * N + i];
                    if (with_s) v *= es[j];
                    v *= route[t * 2 * K2 + j];
                    want = j ? want + v : v;
                }
                EXPECT_MSG(y[t * N + i] == want, "moe_sum%s [%d][%d] = %.9g, want %.9g", with_s ? " scaled" : "",
                           t, i, y[t * N + i], want);
            }
    }
}

/* ---- the expert matmul --------------------------------------------------------------- */

/* n_expert matrices of n_out x n_in of `type` (quantized from random floats;
 * R8 types repacked from Q4_0 / Q8_0), one after the other as a 3-D tensor holds them. */
static void *expert_weights(int type, int n_expert, int n_out, int n_in, size_t *expert_bytes) {
    const int rows = n_expert * n_out;
    float *f = malloc(sizeof(float) * (size_t)rows * n_in);
    rnd_fill(f, (long)rows * n_in, -1, 1);
    int src = type == CF_Q4_0_R8 ? CF_Q4_0 : type == CF_Q8_0_R8 ? CF_Q8_0 : type;
    size_t rb = kern_row_bytes(src, n_in);
    uint8_t *w = malloc(rb * (size_t)rows);
    for (int r = 0; r < rows; r++) quant_row(src, f + (size_t)r * n_in, w + (size_t)r * rb, n_in);
    free(f);
    *expert_bytes = rb * (size_t)n_out;
    if (src == type) return w;
    uint8_t *p = malloc(kern_repack_bytes(type, rows, n_in));
    char err[200];
    EXPECT(kern_repack(type, src, w, rows, n_in, p, err, sizeof err) == 0);
    free(w);
    return p;
}

static int same_bits(const float *a, const float *b, int n) { return memcmp(a, b, sizeof(float) * (size_t)n) == 0; }

/* y of moe_matmul equals, bit for bit, the dense matmul of each slot's expert:
 * per token for one token, over the expert's gathered tokens for more. */
static void expert_case(int type, int isa, int act_quant, int x_per_slot, int n_tok, pool *P) {
    enum { NE = 4, K2 = 2, N_OUT = 16 };
    const int n_in = kern_type_block(type) == 256 ? 256 : 64;
    size_t eb;
    uint8_t *w = expert_weights(type, NE, N_OUT, n_in, &eb);
    const int nx = x_per_slot ? K2 * n_in : n_in;
    float *x = malloc(sizeof(float) * (size_t)n_tok * nx), *y = malloc(sizeof(float) * (size_t)n_tok * K2 * N_OUT);
    float *bias = malloc(sizeof(float) * NE * N_OUT), *route = malloc(sizeof(float) * (size_t)n_tok * 2 * K2);
    float *scratch = malloc(sizeof(float) * (size_t)kern_moe_scratch_floats(n_tok, n_in, N_OUT, K2));
    float *lg = malloc(sizeof(float) * (size_t)n_tok * NE);
    rnd_fill(x, (long)n_tok * nx, -1, 1);
    rnd_fill(bias, NE * N_OUT, -0.5f, 0.5f);
    rnd_fill(lg, (long)n_tok * NE, -2, 2);
    cf_env E = {.K = kern_table(isa), .pool = P, .act_quant = act_quant, .n_ctx = 16};
    E.K->moe_route(&E, route, lg, NULL, NE, K2, CF_GATING_SOFTMAX, 1, 0, 1, 1, n_tok);
    const int with_bias = n_tok > 1;
    E.K->moe_matmul(&E, y, x, route, w, type, N_OUT, n_in, NE, K2, x_per_slot, with_bias ? bias : NULL,
                    scratch, n_tok);
    float *xg = malloc(sizeof(float) * (size_t)n_tok * n_in), *yg = malloc(sizeof(float) * (size_t)n_tok * N_OUT);
    int bad = 0;
    for (int e = 0; e < NE && !bad; e++) {
        int rows[64], n_e = 0; /* (token, slot) pairs choosing e, in token order */
        for (int t = 0; t < n_tok; t++)
            for (int j = 0; j < K2; j++)
                if (route_id(route + t * 2 * K2, K2, j) == e) rows[n_e++] = t * K2 + j;
        if (!n_e) continue;
        for (int r = 0; r < n_e; r++)
            memcpy(xg + (size_t)r * n_in, x + (size_t)(x_per_slot ? rows[r] : rows[r] / K2) * n_in,
                   sizeof(float) * (size_t)n_in);
        E.K->matmul(&E, yg, xg, w + (size_t)e * eb, type, N_OUT, n_in, n_e);
        for (int r = 0; r < n_e && !bad; r++) {
            float want[N_OUT];
            for (int i = 0; i < N_OUT; i++) want[i] = yg[(size_t)r * N_OUT + i] + (with_bias ? bias[e * N_OUT + i] : 0);
            if (!same_bits(y + (size_t)rows[r] * N_OUT, want, N_OUT)) {
                test_fail(__FILE__, __LINE__, "%s %s act_quant %d per_slot %d n_tok %d threads %d: expert %d "
                          "row %d differs from the dense matmul (%.9g vs %.9g)", ggml_type_name((uint32_t)type),
                          kern_isa_name(isa), act_quant, x_per_slot, n_tok, pool_n_threads(P), e, rows[r],
                          y[(size_t)rows[r] * N_OUT], want[0]);
                bad = 1;
            }
        }
    }
    free(w), free(x), free(y), free(bias), free(route), free(scratch), free(lg), free(xg), free(yg);
}

TEST(kern_moe, expert_matmul_is_the_dense_matmul_of_each_expert) {
    const int types[] = {CF_F32, CF_F16, CF_BF16, CF_Q8_0, CF_Q4_0, CF_MXFP4, 12 /* Q4_K */,
                         CF_Q4_0_R8, CF_Q8_0_R8};
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes_act(16, 16, 256)), 0);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int isa = 0; isa < n_isas(); isa++)
            for (int aq = 0; aq < 2; aq++)
                for (int ps = 0; ps < 2; ps++) {
                    expert_case(types[ti], isa, aq, ps, 1, NULL);
                    expert_case(types[ti], isa, aq, ps, 1, P);
                    expert_case(types[ti], isa, aq, ps, 7, P);
                }
    pool_free(P);
}

/* A route naming an expert outside the tensor gives NaN, never a read past it. */
TEST(kern_moe, expert_matmul_refuses_bad_routes) {
    float x[64] = {0}, y[2 * 16], route[4] = {0.5f, 0.5f}, scratch[1024];
    int32_t ids[2] = {1, 9};
    memcpy(route + 2, ids, sizeof ids);
    size_t eb;
    void *w = expert_weights(CF_Q8_0, 4, 16, 64, &eb);
    cf_env E = {.K = kern_table(KERN_ISA_SCALAR)};
    E.K->moe_matmul(&E, y, x, route, w, CF_Q8_0, 16, 64, 4, 2, 0, NULL, scratch, 1);
    EXPECT(isnan(y[0]) && isnan(y[31]));
    free(w);
}

/* ---- per-head matmul ------------------------------------------------------------------- */

static void head_case(int type, int isa, int act_quant, int transposed, int n_tok, pool *P) {
    enum { NH = 3, ROWS = 40, NIN = 64, NOUT = 32 };
    /* non-transposed: head h = rows [h*ROWS + 4, +NOUT) of NIN; transposed: rows
     * [h*ROWS + 4, +NIN... ) no: rows [h*ROWS + 4, +n_in_t) of NOUT-element rows */
    const int row_len = transposed ? NOUT : NIN, n_in = transposed ? 32 : NIN, row0 = 4;
    const int rows = NH * ROWS;
    float *wf = malloc(sizeof(float) * rows * row_len);
    rnd_fill(wf, (long)rows * row_len, -1, 1);
    size_t rb = kern_row_bytes(type, row_len);
    uint8_t *w = malloc(rb * rows);
    for (int r = 0; r < rows; r++) quant_row(type, wf + (size_t)r * row_len, w + (size_t)r * rb, row_len);
    for (int r = 0; r < rows; r++) kern_dequant_row(type, w + (size_t)r * rb, wf + (size_t)r * row_len, row_len);
    float *x = malloc(sizeof(float) * n_tok * NH * n_in), *y = malloc(sizeof(float) * n_tok * NH * NOUT);
    float *xr = malloc(sizeof(float) * n_tok * NH * n_in), *scratch = malloc(sizeof(float) * n_tok * NH * n_in);
    rnd_fill(x, (long)n_tok * NH * n_in, -1, 1);
    memcpy(xr, x, sizeof(float) * n_tok * NH * n_in);
    const int quantized = act_quant && !transposed; /* x as the kernel sees it: Q8_0 rows per head */
    if (quantized)
        for (int r = 0; r < n_tok * NH; r++) {
            uint8_t q[2 * 34];
            kern_quantize_act_row(isa, type, x + r * n_in, q, n_in);
            kern_dequant_row(CF_Q8_0, q, xr + r * n_in, n_in);
        }
    cf_env E = {.K = kern_table(isa), .pool = P, .act_quant = act_quant};
    E.K->head_matmul(&E, y, x, w, type, NOUT, n_in, NH, ROWS, row0, transposed, scratch, n_tok);
    double worst = 0;
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < NH; h++)
            for (int o = 0; o < NOUT; o++) {
                double s = 0, mag = 0;
                for (int i = 0; i < n_in; i++) {
                    double wv = transposed ? wf[(size_t)(h * ROWS + row0 + i) * NOUT + o]
                                           : wf[(size_t)(h * ROWS + row0 + o) * NIN + i];
                    double p = wv * xr[(t * NH + h) * n_in + i];
                    s += p, mag += fabs(p);
                }
                double d = fabs(y[(t * NH + h) * NOUT + o] - s) / (mag + 1e-30);
                if (d > worst) worst = d;
            }
    EXPECT_MSG(worst <= 2e-6, "head_matmul %s %s act_quant %d transposed %d n_tok %d: worst %.3g of Σ|w·x|",
               ggml_type_name((uint32_t)type), kern_isa_name(isa), act_quant, transposed, n_tok, worst);
    free(wf), free(w), free(x), free(y), free(xr), free(scratch);
}

TEST(kern_moe, head_matmul) {
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes(16)), 0);
    const int types[] = {CF_F32, CF_F16, CF_Q8_0, CF_Q4_0};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int isa = 0; isa < n_isas(); isa++)
            for (int aq = 0; aq < 2; aq++)
                for (int tr = 0; tr < 2; tr++) {
                    head_case(types[ti], isa, aq && types[ti] != CF_F16 && types[ti] != CF_F32, tr, 1, NULL);
                    head_case(types[ti], isa, aq && types[ti] != CF_F16 && types[ti] != CF_F32, tr, 5, P);
                }
    pool_free(P);
}

/* ---- RoPE with YaRN ------------------------------------------------------------------- */

/* ggml_rope_yarn_corr_dims + rope_yarn, in double */
static void yarn_naive(double *x, int n_rot, double base, int mode, int pos, double fs, double ext,
                       double attn, double bf, double bs, int n_orig) {
    double lo = floor(n_rot * log(n_orig / (bf * 2 * M_PI)) / (2 * log(base)));
    double hi = ceil(n_rot * log(n_orig / (bs * 2 * M_PI)) / (2 * log(base)));
    lo = lo > 0 ? lo : 0;
    hi = hi < n_rot - 1 ? hi : n_rot - 1;
    for (int i = 0; i < n_rot / 2; i++) {
        double te = pos * pow(base, -2.0 * i / n_rot), ti = fs * te;
        double y = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
        double mix = (1 - (y < 0 ? 0 : y > 1 ? 1 : y)) * ext, th = ti * (1 - mix) + te * mix;
        double m = attn * (ext != 0 ? 1 + 0.1 * log(1 / fs) : 1);
        int i0 = mode == CF_ROPE_NEOX ? i : 2 * i, i1 = mode == CF_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
        double a = x[i0], b = x[i1];
        x[i0] = (a * cos(th) - b * sin(th)) * m;
        x[i1] = (a * sin(th) + b * cos(th)) * m;
    }
}

TEST(kern_moe, rope_yarn) {
    enum { HD = 16, NH = 2, NT = 3 };
    float x[NT * NH * HD], x0[NT * NH * HD];
    rnd_fill(x0, NT * NH * HD, -1, 1);
    for (int isa = 0; isa < n_isas(); isa++)
        for (int mode = 0; mode <= 2; mode += 2) {
            memcpy(x, x0, sizeof x);
            cf_env E = {.K = kern_table(isa), .pos = 37};
            /* gpt-oss's scaling: factor 32, original context 4096, base 150000 */
            const float fs = 1.0f / 32, attn = 1.0f / (1.0f + 0.1f * logf(32.0f));
            E.K->rope(&E, x, NH, HD, HD, 150000.0f, mode, fs, 1.0f, attn, 32.0f, 1.0f, 4096, NULL, NT);
            for (int t = 0; t < NT; t++)
                for (int h = 0; h < NH; h++) {
                    double ref[HD];
                    for (int i = 0; i < HD; i++) ref[i] = x0[(t * NH + h) * HD + i];
                    yarn_naive(ref, HD, 150000.0, mode, 37 + t, fs, 1.0, attn, 32, 1, 4096);
                    for (int i = 0; i < HD; i++)
                        EXPECT_MSG(fabs(x[(t * NH + h) * HD + i] - ref[i]) <= 3e-5,
                                   "yarn mode %d t %d h %d [%d] = %.7g, want %.7g", mode, t, h, i,
                                   x[(t * NH + h) * HD + i], ref[i]);
                }
        }
}

/* ---- attention: sinks, values of another width, values from the keys ------------------ */

static void attention_ext_naive(double *out, const float *q, const float *kc, const float *vc, size_t vs,
                                int v_head, int n_head, int n_head_kv, int hd, int hdv, float scale,
                                const float *sinks, int window, int pos, int n_tok) {
    const int ks = n_head_kv * hd;
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_head; h++) {
            int kvh = h / (n_head / n_head_kv), end = pos + t + 1, p0 = window > 0 && end > window ? end - window : 0;
            double s[64], mx = sinks ? sinks[h] : -1e300, sum = 0;
            for (int p = p0; p < end; p++) {
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)q[(t * n_head + h) * hd + i] * kc[p * ks + kvh * hd + i];
                s[p] = d * scale;
                if (s[p] > mx) mx = s[p];
            }
            for (int p = p0; p < end; p++) sum += (s[p] = exp(s[p] - mx));
            if (sinks) sum += exp(sinks[h] - mx);
            for (int i = 0; i < hdv; i++) {
                double o = 0;
                for (int p = p0; p < end; p++) o += s[p] / sum * vc[p * vs + (size_t)kvh * v_head + i];
                out[(t * n_head + h) * hdv + i] = o;
            }
        }
}

static void attention_ext_case(int isa, pool *P, int nh, int nkv, int hd, int hdv, int shared, int sinks_on,
                               int window) {
    enum { CTX = 16, MAXT = 5 };
    const int ks = nkv * hd, vsz = nkv * hdv;
    float *kc = calloc(CTX * ks, 4), *vc = calloc(CTX * vsz, 4);
    void *kv_k[1] = {kc}, *kv_v[1] = {shared ? NULL : vc};
    float *q = malloc(4 * MAXT * nh * hd), *k = malloc(4 * MAXT * ks), *v = malloc(4 * MAXT * vsz);
    float *out = malloc(4 * MAXT * nh * hdv), sinks[16];
    double *want = malloc(8 * MAXT * nh * hdv);
    rnd_fill(sinks, 16, -1, 2);
    cf_env E = {.K = kern_table(isa), .pool = P, .kv_k = kv_k, .kv_v = kv_v, .n_ctx = CTX};
    const float scale = 1.0f / sqrtf((float)hd);
    const int batches[2][2] = {{0, 5}, {5, 1}};
    for (int b = 0; b < 2; b++) {
        int pos = batches[b][0], nt = batches[b][1];
        rnd_fill(q, nt * nh * hd, -2, 2);
        rnd_fill(k, nt * ks, -2, 2);
        rnd_fill(v, nt * vsz, -1, 1);
        E.pos = pos;
        E.K->attention(&E, out, q, k, shared ? NULL : v, sinks_on ? sinks : NULL, 0, nh, nkv, hd, hdv, scale,
                       window, 0.0f, nt);
        attention_ext_naive(want, q, kc, shared ? kc : vc, shared ? (size_t)ks : (size_t)vsz, shared ? hd : hdv,
                            nh, nkv, hd, hdv, scale, sinks_on ? sinks : NULL, window, pos, nt);
        for (int i = 0; i < nt * nh * hdv; i++)
            if (!(fabs(out[i] - want[i]) <= 2e-6)) {
                test_fail(__FILE__, __LINE__, "%s attention heads %d/%d hd %d hdv %d shared %d sinks %d window %d "
                          "threads %d: out[%d] = %.9g, want %.9g", kern_isa_name(isa), nh, nkv, hd, hdv, shared,
                          sinks_on, window, pool_n_threads(P), i, out[i], want[i]);
                break;
            }
    }
    free(kc), free(vc), free(q), free(k), free(v), free(out), free(want);
}

TEST(kern_moe, attention_sinks_value_widths_latent_values) {
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes(16)), 0);
    for (int isa = 0; isa < n_isas(); isa++)
        for (int pi = 0; pi < 2; pi++) {
            pool *p = pi ? P : NULL;
            attention_ext_case(isa, p, 4, 2, 16, 16, 0, 1, 0);  /* gpt-oss: sinks */
            attention_ext_case(isa, p, 4, 2, 16, 16, 0, 1, 3);  /* sinks in a sliding window */
            attention_ext_case(isa, p, 4, 4, 24, 16, 0, 0, 0);  /* expanded MLA: k 24, v 16 */
            attention_ext_case(isa, p, 4, 1, 40, 32, 1, 0, 0);  /* absorbed MLA: MQA, values = keys' prefix */
            attention_ext_case(isa, p, 8, 1, 48, 32, 1, 0, 0);  /* ... with 4-head quads (AVX-512) */
            attention_ext_case(isa, p, 3, 1, 20, 12, 1, 0, 0);  /* widths the SIMD paths do not take */
        }
    pool_free(P);
}

/* ---- elementwise: sigmoid gate, clamped SwiGLU, per-head copies ---------------------------- */

TEST(kern_moe, elementwise) {
    const cf_kernels *K = kern_table(KERN_ISA_SCALAR);
    cf_env E = {.K = K};
    enum { T = 2, N = 6 };
    float x[T * N], g[T * N], y[T * N];
    rnd_fill(x, T * N, -2, 2);
    rnd_fill(g, T * N, -12, 12);
    K->mul_sigmoid(&E, y, x, g, N, N, T);
    for (int i = 0; i < T * N; i++) EXPECT_NEAR(y[i], x[i] / (1 + exp(-(double)g[i])), 1e-6);
    K->mul_sigmoid(&E, y, x, g, N, 1, T); /* one gate per token (qwen2moe's shared expert) */
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) EXPECT_NEAR(y[t * N + i], x[t * N + i] / (1 + exp(-(double)g[t])), 1e-6);
    K->swiglu_oai(&E, y, g, x, 1.702f, 7.0f, N, T);
    for (int i = 0; i < T * N; i++) {
        double a = g[i] < 7 ? g[i] : 7, u = x[i] < -7 ? -7 : x[i] > 7 ? 7 : x[i];
        EXPECT_NEAR(y[i], a / (1 + exp(-1.702 * a)) * (u + 1), 1e-5 * (1 + fabs(a * (u + 1))));
    }
    /* [a_h | b] per head, b one head shared by all (MLA's RoPE key) */
    float a[T * 3 * 2], b[T * 4], o[T * 3 * 6];
    rnd_fill(a, T * 6, -1, 1);
    rnd_fill(b, T * 4, -1, 1);
    K->head_copy(&E, o, 18, 6, a, 6, 2, 2, 3, T);
    K->head_copy(&E, o + 2, 18, 6, b, 4, 0, 4, 3, T);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < 3; h++)
            for (int c = 0; c < 6; c++)
                EXPECT(o[t * 18 + h * 6 + c] == (c < 2 ? a[t * 6 + h * 2 + c] : b[t * 4 + c - 2]));
}
