/*
 * test_kern_ssm.c — the recurrent-layer kernels (kernels/kern_ssm.h): the
 * scalar leaves against double-precision references written from the
 * formulas in templates/prelude.h, every SIMD leaf set this CPU runs (AVX2,
 * AVX-512) against the scalar leaves, a batch of tokens against the same
 * tokens one call each (bit for bit for the conv and the scans), the chunked
 * gated delta rule against the token-by-token recurrence, threads against
 * one thread.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "kernels/kern.h"
#include "kernels/kern_ssm.h"
#include "test.h"

static unsigned g_seed = 12345;
static float frand(void) { /* [-1, 1) */
    g_seed = g_seed * 1103515245u + 12345u;
    return ((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}
static float *rnd(long n, float lo, float hi) {
    float *x = malloc((size_t)n * sizeof *x);
    for (long i = 0; i < n; i++) x[i] = lo + (hi - lo) * 0.5f * (frand() + 1.0f);
    return x;
}
static float *dup(const float *x, long n) {
    float *y = malloc((size_t)n * sizeof *y);
    memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}
/* max |a - b| / max(1, |b|) */
static double max_rel(const float *a, const float *b, long n) {
    double m = 0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= m)) m = d;
    }
    return m;
}

/* The leaf sets this CPU can run besides the scalar one. */
static int simd_sets(const kern_ssm_leaves *out[2], const char *names[2]) {
    int n = 0;
#if defined(__x86_64__)
    if (kern_isa_available(KERN_ISA_AVX2)) out[n] = &kern_ssm_avx2_leaves, names[n++] = "avx2";
    if (kern_cpu_avx512vnni()) out[n] = &kern_ssm_avx512_leaves, names[n++] = "avx512";
#else
    (void)out, (void)names;
#endif
    return n;
}

static double silu_d(double v) { return v / (1 + exp(-v)); }
static double softplus_d(double v) { return v > 20 ? v : log1p(exp(v)); }

/* ---- conv --------------------------------------------------------------------- */

TEST(kern_ssm, conv_matches_double_reference) {
    enum { N = 37, D = 4, T = 6 };
    float *x = rnd(T * N, -2, 2), *w = rnd(N * D, -1, 1), *b = rnd(N, -0.5f, 0.5f);
    float *st0 = rnd((D - 1) * N, -2, 2), *st = dup(st0, (D - 1) * N), y[T * N];
    kern_ssm_scalar_leaves.conv(y, x, w, b, st, N, 0, N, D, CF_ACT_SILU, T);
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < N; c++) {
            double acc = b[c];
            for (int i = 0; i < D; i++) {
                int j = t + i;
                acc += (double)w[c * D + i] * (j < D - 1 ? st0[j * N + c] : x[(j - D + 1) * N + c]);
            }
            double d = fabs(y[t * N + c] - silu_d(acc));
            if (d > worst) worst = d;
        }
    EXPECT_MSG(worst < 1e-5, "conv vs double: max abs %.3g", worst);
    /* the window is now the last D - 1 inputs */
    for (int r = 0; r < D - 1; r++)
        for (int c = 0; c < N; c++) EXPECT_NEAR(st[r * N + c], x[(T - D + 1 + r) * N + c], 0);
    /* fewer tokens than the window: it shifts */
    float *st2 = dup(st0, (D - 1) * N), y1[N];
    kern_ssm_scalar_leaves.conv(y1, x, w, NULL, st2, N, 0, N, D, CF_ACT_NONE, 1);
    for (int c = 0; c < N; c++) {
        EXPECT_NEAR(st2[0 * N + c], st0[1 * N + c], 0);
        EXPECT_NEAR(st2[1 * N + c], st0[2 * N + c], 0);
        EXPECT_NEAR(st2[2 * N + c], x[c], 0);
    }
    free(x), free(w), free(b), free(st0), free(st), free(st2);
}

/* Every leaf set: SIMD close to scalar; T tokens in one call == T calls (bitwise). */
TEST(kern_ssm, conv_simd_and_batch) {
    enum { N = 67, T = 9 };
    const kern_ssm_leaves *sets[3] = {&kern_ssm_scalar_leaves};
    const char *names[3] = {"scalar"};
    int n_sets = 1 + simd_sets(sets + 1, names + 1);
    for (int D = 2; D <= 4; D++) {
        float *x = rnd(T * N, -2, 2), *w = rnd(N * D, -1, 1), *b = rnd(N, -0.5f, 0.5f);
        float *st0 = rnd((D - 1) * N, -2, 2), ref[T * N], *ref_st = dup(st0, (D - 1) * N);
        kern_ssm_scalar_leaves.conv(ref, x, w, b, ref_st, N, 0, N, D, CF_ACT_SILU, T);
        for (int s = 0; s < n_sets; s++) {
            float y[T * N], y1[T * N], *st = dup(st0, (D - 1) * N), *st1 = dup(st0, (D - 1) * N);
            sets[s]->conv(y, x, w, b, st, N, 0, N, D, CF_ACT_SILU, T);
            for (int t = 0; t < T; t++) sets[s]->conv(y1 + t * N, x + t * N, w, b, st1, N, 0, N, D, CF_ACT_SILU, 1);
            EXPECT_MSG(!memcmp(y, y1, sizeof y) && !memcmp(st, st1, (size_t)(D - 1) * N * sizeof *st),
                       "%s conv d_conv %d: a batch differs from token-by-token calls", names[s], D);
            double e = max_rel(y, ref, T * N);
            EXPECT_MSG(e < 1e-6, "%s conv d_conv %d: max rel %.3g vs scalar", names[s], D, e);
            EXPECT_MSG(!memcmp(st, ref_st, (size_t)(D - 1) * N * sizeof *st), "%s: state differs", names[s]);
            free(st), free(st1);
        }
        free(x), free(w), free(b), free(st0), free(ref_st);
    }
}

/* ---- scans -------------------------------------------------------------------------- */

typedef struct {
    int n_head, head_dim, d_state, n_group, a_per_state, T;
} scan_shape;

/* Double reference of the scan (prelude.h), state updated in place. */
static void scan_ref(const scan_shape *s, double *S, const float *x, const float *dt, const float *bc,
                     const float *A, const float *D, const float *dtb, double *y) {
    int n = s->n_head * s->head_dim, nbc = 2 * s->n_group * s->d_state;
    for (int t = 0; t < s->T; t++)
        for (int h = 0; h < s->n_head; h++) {
            int g = h / (s->n_head / s->n_group);
            const float *B = bc + t * nbc + g * s->d_state, *C = B + s->n_group * s->d_state;
            double sp = softplus_d(dt[t * s->n_head + h] + (dtb ? dtb[h] : 0));
            for (int p = 0; p < s->head_dim; p++) {
                double xv = x[t * n + h * s->head_dim + p], acc = 0;
                for (int i = 0; i < s->d_state; i++) {
                    double a = s->a_per_state ? A[h * s->d_state + i] : A[h];
                    double *st = &S[((size_t)h * s->head_dim + p) * s->d_state + i];
                    *st = *st * exp(sp * a) + B[i] * sp * xv;
                    acc += *st * C[i];
                }
                y[t * n + h * s->head_dim + p] = acc + (D ? D[h] * xv : 0);
            }
        }
}

static void check_scan(const scan_shape *s, int isa) {
    int n = s->n_head * s->head_dim, nbc = 2 * s->n_group * s->d_state;
    long ns = (long)n * s->d_state;
    float *x = rnd(s->T * n, -1, 1), *dt = rnd(s->T * s->n_head, -4, 1), *bc = rnd(s->T * nbc, -1, 1);
    float *A = rnd(s->a_per_state ? ns : s->n_head, -2, -0.5f), *D = rnd(s->n_head, 0.5f, 1.5f);
    float *dtb = s->a_per_state ? NULL : rnd(s->n_head, -1, 0.5f);
    float *S = rnd(ns, -0.5f, 0.5f), *S1 = dup(S, ns);
    float *y = malloc((size_t)s->T * n * sizeof *y), *y1 = malloc((size_t)s->T * n * sizeof *y1);
    double *Sd = malloc((size_t)ns * sizeof *Sd), *yd = malloc((size_t)s->T * n * sizeof *yd);
    for (long i = 0; i < ns; i++) Sd[i] = S[i];
    cf_env E = {0};
    kern_drv_ssm_scan(isa, &E, y, x, dt, bc, A, D, dtb, S, s->n_head, s->head_dim, s->d_state, s->n_group,
                      s->a_per_state, s->T);
    for (int t = 0; t < s->T; t++)
        kern_drv_ssm_scan(isa, &E, y1 + t * n, x + t * n, dt + t * s->n_head, bc + t * nbc, A, D, dtb, S1,
                          s->n_head, s->head_dim, s->d_state, s->n_group, s->a_per_state, 1);
    EXPECT_MSG(!memcmp(y, y1, (size_t)s->T * n * sizeof *y) && !memcmp(S, S1, (size_t)ns * sizeof *S),
               "%s scan (n_head %d, head_dim %d, d_state %d): a batch differs from token-by-token calls",
               kern_isa_name(isa), s->n_head, s->head_dim, s->d_state);
    scan_ref(s, Sd, x, dt, bc, A, D, dtb, yd);
    double e = 0, es = 0;
    for (long i = 0; i < (long)s->T * n; i++) e = fmax(e, fabs(y[i] - yd[i]) / fmax(1.0, fabs(yd[i])));
    for (long i = 0; i < ns; i++) es = fmax(es, fabs(S[i] - Sd[i]) / fmax(1.0, fabs(Sd[i])));
    printf("    %s %s (%d heads of %d, d_state %d, %d groups): max rel %.2g (y), %.2g (state)\n", kern_isa_name(isa),
           s->a_per_state ? "Mamba-1" : "Mamba-2", s->n_head, s->head_dim, s->d_state, s->n_group, e, es);
    EXPECT_MSG(e < 5e-6 && es < 5e-6, "%s %s scan (n_head %d, head_dim %d, d_state %d, groups %d): max rel "
               "%.3g (y), %.3g (state) vs double", kern_isa_name(isa), s->a_per_state ? "Mamba-1" : "Mamba-2",
               s->n_head, s->head_dim, s->d_state, s->n_group, e, es);
    free(x), free(dt), free(bc), free(A), free(D), free(dtb), free(S), free(S1), free(y), free(y1);
    free(Sd), free(yd);
}

TEST(kern_ssm, scan_matches_double_and_batch_equals_tokens) {
    const scan_shape shapes[] = {
        {4, 64, 32, 2, 0, 7},    /* Mamba-2, the test models' shape */
        {6, 20, 13, 3, 0, 5},    /* odd widths: SIMD tails */
        {3, 16, 128, 1, 0, 4},   /* Granite 4.0-H's d_state */
        {45, 1, 16, 1, 1, 6},    /* Mamba-1 (d_inner channels, A per state) */
        {20, 1, 11, 1, 1, 3},
    };
    int isas[2] = {KERN_ISA_SCALAR, KERN_ISA_AVX2};
    for (int k = 0; k < 2; k++) {
        if (!kern_isa_available(isas[k])) continue;
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_scan(&shapes[i], isas[k]);
    }
}

TEST(kern_ssm, scan_and_delta_leaves_simd_match_scalar) {
    const kern_ssm_leaves *sets[2];
    const char *names[2];
    int n_sets = simd_sets(sets, names);
    if (!n_sets) /* aarch64 (no NEON leaves yet: the scalar ones serve) or an x86-64 without AVX2 */
        SKIP_HARDWARE("SIMD recurrent-mixer leaves (AVX2, AVX-512): this CPU has none; the scalar leaves serve");
    for (int s = 0; s < n_sets; s++) {
        for (int ds = 5; ds <= 130; ds += 25) { /* Mamba-2 head */
            enum { HD = 9 };
            float *S = rnd(HD * ds, -1, 1), *S1 = dup(S, HD * ds), *x = rnd(HD, -1, 1);
            float *B = rnd(ds, -1, 1), *C = rnd(ds, -1, 1), y[HD], y1[HD];
            kern_ssm_scalar_leaves.scan2(S, x, 0.3f, 0.9f, B, C, y, HD, ds);
            sets[s]->scan2(S1, x, 0.3f, 0.9f, B, C, y1, HD, ds);
            EXPECT_MSG(max_rel(y1, y, HD) < 1e-5 && max_rel(S1, S, HD * ds) < 4e-6, "%s scan2 d_state %d",
                       names[s], ds);
            free(S), free(S1), free(x), free(B), free(C);
        }
        for (int ds = 3; ds <= 40; ds += 9) { /* Mamba-1 channels */
            enum { NC = 5 };
            float *S = rnd(NC * ds, -1, 1), *S1 = dup(S, NC * ds), *x = rnd(NC, -1, 1), *dt = rnd(NC, 0, 2);
            float *A = rnd(NC * ds, -8, -0.1f), *B = rnd(ds, -1, 1), *C = rnd(ds, -1, 1), y[NC], y1[NC];
            kern_ssm_scalar_leaves.scan1(S, x, dt, A, B, C, y, NC, ds);
            sets[s]->scan1(S1, x, dt, A, B, C, y1, NC, ds);
            EXPECT_MSG(max_rel(y1, y, NC) < 1e-5 && max_rel(S1, S, NC * ds) < 4e-6, "%s scan1 d_state %d",
                       names[s], ds);
            free(S), free(S1), free(x), free(dt), free(A), free(B), free(C);
        }
        for (int dk = 7; dk <= 140; dk += 19) /* delta rule: panels of columns and the tail */
            for (int dv = 5; dv <= 150; dv += 29) {
                float *M = rnd(dv * dk, -0.3f, 0.3f), *M1 = dup(M, dv * dk), *q = rnd(dk, -1, 1);
                float *k = rnd(dk, -1, 1), *v = rnd(dv, -1, 1), o[160], o1[160];
                kern_ssm_scalar_leaves.delta(M, q, k, v, 0.95f, 0.6f, o, dk, dv);
                sets[s]->delta(M1, q, k, v, 0.95f, 0.6f, o1, dk, dv);
                EXPECT_MSG(max_rel(o1, o, dv) < 1e-5 && max_rel(M1, M, dv * dk) < 4e-6, "%s delta d_k %d d_v %d: "
                           "max rel %.3g (o), %.3g (state)", names[s], dk, dv, max_rel(o1, o, dv),
                           max_rel(M1, M, dv * dk));
                free(M), free(M1), free(q), free(k), free(v);
            }
        for (int m = 1; m <= 9; m += 4) /* gemm: row blocks of 4, column panels, tails */
            for (int n = 3; n <= 140; n += 23) {
                const int k = 37;
                float *A = rnd(m * k, -1, 1), *B = rnd(k * n, -1, 1), *C0 = rnd(m * n, -1, 1);
                float *C = dup(C0, m * n), *C1 = dup(C0, m * n);
                const float scales[3] = {0.0f, 1.0f, 0.75f};
                for (int si = 0; si < 3; si++) {
                    kern_ssm_scalar_leaves.gemm(C, n, A, k, B, n, m, n, k, scales[si]);
                    sets[s]->gemm(C1, n, A, k, B, n, m, n, k, scales[si]);
                    EXPECT_MSG(max_rel(C1, C, m * n) < 1e-5, "%s gemm %dx%d (c_scale %g)", names[s], m, n,
                               scales[si]);
                }
                float *x = rnd(n, -1, 1), y[160], y1[160];
                kern_ssm_scalar_leaves.l2_norm(y, x, n, 1e-6f, 0.5f);
                sets[s]->l2_norm(y1, x, n, 1e-6f, 0.5f);
                EXPECT_MSG(max_rel(y1, y, n) < 1e-6, "%s l2_norm %d", names[s], n);
                kern_ssm_scalar_leaves.axpby(y, 0.5f, x, -2.0f, B, n);
                sets[s]->axpby(y1, 0.5f, x, -2.0f, B, n);
                EXPECT_MSG(max_rel(y1, y, n) < 1e-6, "%s axpby %d", names[s], n);
                free(A), free(B), free(C0), free(C), free(C1), free(x);
            }
    }
}

/* ---- the gated delta rule ---------------------------------------------------------------- */

typedef struct {
    int nk, nv, dk, dv, T;
} dn_shape;

/* Double reference of the gated delta rule (prelude.h), state S[h][i][j]. */
static void dn_ref(const dn_shape *s, double *S, const float *qkv, const float *ba, const float *A,
                   const float *dtb, float eps, double *o) {
    int width = 2 * s->nk * s->dk + s->nv * s->dv, r = s->nv / s->nk;
    double *q = malloc(sizeof(double) * s->dk), *k = malloc(sizeof(double) * s->dk);
    for (int t = 0; t < s->T; t++)
        for (int h = 0; h < s->nv; h++) {
            int kh = h / r;
            const float *row = qkv + (size_t)t * width;
            double nq = 0, nkk = 0;
            for (int i = 0; i < s->dk; i++) {
                nq += (double)row[kh * s->dk + i] * row[kh * s->dk + i];
                nkk += (double)row[(s->nk + kh) * s->dk + i] * row[(s->nk + kh) * s->dk + i];
            }
            for (int i = 0; i < s->dk; i++) {
                q[i] = row[kh * s->dk + i] / sqrt(nq + eps) / sqrt((double)s->dk);
                k[i] = row[(s->nk + kh) * s->dk + i] / sqrt(nkk + eps);
            }
            const float *bat = ba + (size_t)t * 2 * s->nv + kh * 2 * r;
            double beta = 1 / (1 + exp(-(double)bat[h % r]));
            double decay = exp(softplus_d((double)bat[r + h % r] + dtb[h]) * A[h]);
            const float *v = row + 2 * s->nk * s->dk + h * s->dv;
            double *Sh = S + (size_t)h * s->dk * s->dv;
            for (int j = 0; j < s->dv; j++) {
                double sk = 0, sq = 0;
                for (int i = 0; i < s->dk; i++) sk += (Sh[(size_t)i * s->dv + j] *= decay) * k[i];
                double u = beta * (v[j] - sk);
                for (int i = 0; i < s->dk; i++) sq += (Sh[(size_t)i * s->dv + j] += u * k[i]) * q[i];
                o[(size_t)t * s->nv * s->dv + h * s->dv + j] = sq;
            }
        }
    free(q), free(k);
}

static void check_delta(const dn_shape *s, int isa) {
    int width = 2 * s->nk * s->dk + s->nv * s->dv;
    long ns = (long)s->nv * s->dv * s->dk, no = (long)s->T * s->nv * s->dv;
    const float eps = 1e-6f;
    float *qkv = rnd((long)s->T * width, -1, 1), *ba = rnd((long)s->T * 2 * s->nv, -2, 2);
    /* slow decays (e^g about 0.9 .. 0.999): the state carries across chunks */
    float *A = rnd(s->nv, -0.1f, -0.002f), *dtb = rnd(s->nv, -1, 1), *S0 = rnd(ns, -1, 1);
    float *scratch = malloc((size_t)kern_delta_net_scratch_floats(s->nv, s->dk, s->dv) * sizeof(float));
    double *Sd = malloc((size_t)ns * sizeof *Sd), *od = malloc((size_t)no * sizeof *od);
    for (long i = 0; i < ns; i++) Sd[i] = S0[i];
    dn_ref(s, Sd, qkv, ba, A, dtb, eps, od);
    const int modes[2] = {KERN_DN_RECURRENT, KERN_DN_CHUNKED};
    float *o[2], *S[2];
    cf_env E = {0};
    for (int m = 0; m < 2; m++) {
        o[m] = malloc((size_t)no * sizeof(float));
        S[m] = dup(S0, ns);
        kern_drv_delta_net(isa, &E, o[m], qkv, ba, A, dtb, S[m], s->nk, s->nv, s->dk, s->dv, eps, scratch, s->T,
                           modes[m]);
        double e = 0, es = 0;
        for (long i = 0; i < no; i++) e = fmax(e, fabs(o[m][i] - od[i]) / fmax(1.0, fabs(od[i])));
        for (long i = 0; i < ns; i++) es = fmax(es, fabs(S[m][i] - Sd[i]) / fmax(1.0, fabs(Sd[i])));
        printf("    %s %s (%d/%d heads, d_k %d, d_v %d, %d tokens): max rel %.2g (o), %.2g (state)\n",
               kern_isa_name(isa), m ? "chunked" : "recurrent", s->nk, s->nv, s->dk, s->dv, s->T, e, es);
        EXPECT_MSG(e < 2e-6 && es < 2e-6, "%s %s delta rule (k heads %d, v heads %d, d_k %d, d_v %d, %d tokens): "
                   "max rel %.3g (o), %.3g (state) vs double", kern_isa_name(isa),
                   m ? "chunked" : "recurrent", s->nk, s->nv, s->dk, s->dv, s->T, e, es);
    }
    /* the recurrent form one token per call equals one call */
    float *o1 = malloc((size_t)no * sizeof *o1), *S1 = dup(S0, ns);
    for (int t = 0; t < s->T; t++)
        kern_drv_delta_net(isa, &E, o1 + (long)t * s->nv * s->dv, qkv + (long)t * width, ba + t * 2 * s->nv, A,
                           dtb, S1, s->nk, s->nv, s->dk, s->dv, eps, scratch, 1, KERN_DN_AUTO);
    EXPECT_MSG(!memcmp(o1, o[0], (size_t)no * sizeof *o1) && !memcmp(S1, S[0], (size_t)ns * sizeof *S1),
               "%s delta rule: token-by-token calls differ from one recurrent call", kern_isa_name(isa));
    free(o1), free(S1);
    for (int m = 0; m < 2; m++) free(o[m]), free(S[m]);
    free(qkv), free(ba), free(A), free(dtb), free(S0), free(scratch), free(Sd), free(od);
}

TEST(kern_ssm, delta_net_chunked_and_recurrent_match_double) {
    const dn_shape shapes[] = {
        {2, 4, 32, 32, 150},  /* the qwen3next test model: 2 full chunks and a tail */
        {1, 1, 16, 24, 64},   /* d_k != d_v, one whole chunk */
        {2, 2, 40, 8, 9},     /* short batch, odd widths */
    };
    int isas[2] = {KERN_ISA_SCALAR, KERN_ISA_AVX2};
    for (int k = 0; k < 2; k++) {
        if (!kern_isa_available(isas[k])) continue;
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_delta(&shapes[i], isas[k]);
    }
}

/* Threads split heads (channels): a pool of 2 gives the same bits as none. */
TEST(kern_ssm, threads_match_one_thread) {
    pool *p = NULL;
    EXPECT(pool_new(2, &p) == 0);
    if (!p) return;
    cf_env E0 = {0}, E2 = {.pool = p};
    int isa = kern_best_isa();
    /* delta rule, chunked */
    const int nk = 2, nv = 8, dk = 32, dv = 32, T = 70, width = 2 * nk * dk + nv * dv;
    float *qkv = rnd(T * width, -1, 1), *ba = rnd(T * 2 * nv, -2, 2), *A = rnd(nv, -2, -0.5f), *dtb = rnd(nv, -1, 1);
    float *S0 = rnd(nv * dv * dk, -0.1f, 0.1f), *Sa = dup(S0, nv * dv * dk), *Sb = dup(S0, nv * dv * dk);
    float *scratch = malloc((size_t)kern_delta_net_scratch_floats(nv, dk, dv) * sizeof(float));
    float *oa = malloc(sizeof(float) * T * nv * dv), *ob = malloc(sizeof(float) * T * nv * dv);
    kern_drv_delta_net(isa, &E0, oa, qkv, ba, A, dtb, Sa, nk, nv, dk, dv, 1e-6f, scratch, T, KERN_DN_AUTO);
    kern_drv_delta_net(isa, &E2, ob, qkv, ba, A, dtb, Sb, nk, nv, dk, dv, 1e-6f, scratch, T, KERN_DN_AUTO);
    EXPECT(!memcmp(oa, ob, sizeof(float) * T * nv * dv) && !memcmp(Sa, Sb, sizeof(float) * nv * dv * dk));
    /* Mamba-2 scan and conv */
    const int nh = 8, hd = 64, ds = 64, n = nh * hd;
    float *x = rnd(T * n, -1, 1), *dt = rnd(T * nh, -3, 1), *bc = rnd(T * 2 * ds, -1, 1), *Am = rnd(nh, -2, -1);
    float *St = rnd(n * ds, -0.1f, 0.1f), *St2 = dup(St, n * ds);
    float *ya = malloc(sizeof(float) * T * n), *yb = malloc(sizeof(float) * T * n);
    kern_drv_ssm_scan(isa, &E0, ya, x, dt, bc, Am, NULL, NULL, St, nh, hd, ds, 1, 0, T);
    kern_drv_ssm_scan(isa, &E2, yb, x, dt, bc, Am, NULL, NULL, St2, nh, hd, ds, 1, 0, T);
    EXPECT(!memcmp(ya, yb, sizeof(float) * T * n) && !memcmp(St, St2, sizeof(float) * n * ds));
    float *w = rnd(n * 4, -1, 1), *cs = rnd(3 * n, -1, 1), *cs2 = dup(cs, 3 * n);
    kern_drv_ssm_conv(isa, &E0, ya, x, w, NULL, cs, n, 4, CF_ACT_SILU, T);
    kern_drv_ssm_conv(isa, &E2, yb, x, w, NULL, cs2, n, 4, CF_ACT_SILU, T);
    EXPECT(!memcmp(ya, yb, sizeof(float) * T * n) && !memcmp(cs, cs2, sizeof(float) * 3 * n));
    free(qkv), free(ba), free(A), free(dtb), free(S0), free(Sa), free(Sb), free(scratch), free(oa), free(ob);
    free(x), free(dt), free(bc), free(Am), free(St), free(St2), free(ya), free(yb), free(w), free(cs), free(cs2);
    pool_free(p);
}

/* ---- elementwise -------------------------------------------------------------------------- */

/* (mul and relu_sqr: test_kern_elem.c) */
TEST(kern_ssm, rms_norm_groups) {
    enum { G = 24, NG = 3, T = 2 };
    float *x = rnd(T * NG * G, -3, 3), *w = rnd(NG * G, 0.5f, 1.5f), y[T * NG * G];
    kern_rms_norm_groups(NULL, y, x, w, G, NG, 1e-5f, T);
    for (int t = 0; t < T; t++)
        for (int g = 0; g < NG; g++) {
            const float *xr = x + (t * NG + g) * G;
            double ss = 0;
            for (int i = 0; i < G; i++) ss += (double)xr[i] * xr[i];
            double sc = 1 / sqrt(ss / G + 1e-5);
            for (int i = 0; i < G; i++) EXPECT_NEAR(y[(t * NG + g) * G + i], xr[i] * sc * w[g * G + i], 1e-5);
        }
    free(x), free(w);
}
