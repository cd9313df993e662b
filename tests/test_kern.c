/*
 * test_kern.c — compute kernels against references written here from the
 * ggml spec (block layouts of ggml-common.h, the formulas of ggml.c), in
 * double where it matters, and every SIMD table against the scalar one.
 * Sizes stay small: the runner is built with ASan + UBSan.
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/kern.h"
#include "base/pool.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
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

/* IEEE half, decoded from the definition */
static float ref_f16(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m + 1024), e - 25);
    return s ? -v : v;
}
static float ref_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static const int8_t iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
/* MXFP4: twice the E2M1 values, scale 2^(e - 128) */
static const int8_t mxfp4v[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

typedef struct { int type; const char *name; int blck, bytes; } tinfo;
static const tinfo g_types[] = {
    {CF_F32, "F32", 1, 4},     {CF_F16, "F16", 1, 2},    {CF_BF16, "BF16", 1, 2},
    {CF_Q4_0, "Q4_0", 32, 18}, {CF_Q4_1, "Q4_1", 32, 20}, {CF_Q5_0, "Q5_0", 32, 22},
    {CF_Q5_1, "Q5_1", 32, 24}, {CF_Q8_0, "Q8_0", 32, 34}, {CF_IQ4_NL, "IQ4_NL", 32, 18},
    {CF_MXFP4, "MXFP4", 32, 17},
};
#define N_TYPES (int)(sizeof g_types / sizeof g_types[0])

/* Byte-level decode of one row straight from the ggml block definitions. */
static void ref_dequant(int type, const uint8_t *p, float *y, int n) {
    switch (type) {
    case CF_F32: memcpy(y, p, (size_t)n * 4); return;
    case CF_F16: for (int i = 0; i < n; i++) y[i] = ref_f16(rd16(p + 2 * i)); return;
    case CF_BF16: for (int i = 0; i < n; i++) y[i] = ref_bf16(rd16(p + 2 * i)); return;
    default: break;
    }
    for (int b = 0; b < n / 32; b++, y += 32) {
        float d = ref_f16(rd16(p)), m = 0;
        uint32_t qh = 0;
        const uint8_t *qs;
        switch (type) {
        case CF_Q4_0: qs = p + 2; p += 18;
            for (int j = 0; j < 16; j++) { y[j] = (float)((qs[j] & 15) - 8) * d; y[j + 16] = (float)((qs[j] >> 4) - 8) * d; }
            break;
        case CF_MXFP4: d = ldexpf(1.0f, (int)p[0] - 128); qs = p + 1; p += 17;
            for (int j = 0; j < 16; j++) { y[j] = (float)mxfp4v[qs[j] & 15] * d; y[j + 16] = (float)mxfp4v[qs[j] >> 4] * d; }
            break;
        case CF_IQ4_NL: qs = p + 2; p += 18;
            for (int j = 0; j < 16; j++) { y[j] = (float)iq4nl[qs[j] & 15] * d; y[j + 16] = (float)iq4nl[qs[j] >> 4] * d; }
            break;
        case CF_Q4_1: m = ref_f16(rd16(p + 2)); qs = p + 4; p += 20;
            for (int j = 0; j < 16; j++) { y[j] = (float)(qs[j] & 15) * d + m; y[j + 16] = (float)(qs[j] >> 4) * d + m; }
            break;
        case CF_Q5_0: case CF_Q5_1: {
            int one = type == CF_Q5_1;
            if (one) m = ref_f16(rd16(p + 2));
            const uint8_t *h = p + (one ? 4 : 2);
            qh = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
            qs = h + 4;
            p += one ? 24 : 22;
            /* element i's fifth bit is bit i of qh (elements 16..31: high nibbles) */
            for (int j = 0; j < 16; j++) {
                int q0 = (qs[j] & 15) | (int)((qh >> j) & 1) << 4, q1 = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
                if (one) { y[j] = (float)q0 * d + m; y[j + 16] = (float)q1 * d + m; }
                else { y[j] = (float)(q0 - 16) * d; y[j + 16] = (float)(q1 - 16) * d; }
            }
            break;
        }
        case CF_Q8_0: qs = p + 2; p += 34;
            for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)qs[j] * d;
            break;
        }
    }
}

static uint32_t f16_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* n_rows random rows of type (scales in a realistic range, codes uniform). */
static uint8_t *rnd_weights(int type, int n_rows, int n, size_t *row_bytes) {
    size_t rb = kern_row_bytes(type, n);
    *row_bytes = rb;
    uint8_t *w = malloc(rb * (size_t)n_rows + 1);
    for (size_t i = 0; i < rb * (size_t)n_rows; i++) w[i] = (uint8_t)rnd_u32();
    for (int r = 0; r < n_rows; r++) {
        uint8_t *p = w + rb * (size_t)r;
        if (type == CF_F32) {
            for (int i = 0; i < n; i++) { float f = rnd_f(-1, 1); memcpy(p + 4 * i, &f, 4); }
        } else if (type == CF_F16 || type == CF_BF16) {
            for (int i = 0; i < n; i++) {
                float f = rnd_f(-1, 1);
                uint16_t h = type == CF_F16 ? kern_f32_to_f16(f) : (uint16_t)(f16_bits(f) >> 16);
                memcpy(p + 2 * i, &h, 2);
            }
        } else {
            int bs = (int)(rb / (size_t)(n / 32));
            for (int b = 0; b < n / 32; b++, p += bs) {
                if (type == CF_MXFP4) { /* E8M0 exponent: 2^-10 .. 2^-5 */
                    p[0] = (uint8_t)(118 + rnd_u32() % 6);
                    continue;
                }
                uint16_t d = kern_f32_to_f16(rnd_f(0.001f, 0.05f) * (rnd_u32() & 1 ? -1.0f : 1.0f));
                memcpy(p, &d, 2);
                if (type == CF_Q4_1 || type == CF_Q5_1) {
                    uint16_t m = kern_f32_to_f16(rnd_f(-0.3f, 0.3f));
                    memcpy(p + 2, &m, 2);
                }
            }
        }
    }
    return w;
}


/* 2 when the AVX2 kernels run here (scalar and AVX2 are both checked), else 1 (said in the output) */
static int n_isas(void) {
    if (kern_isa_available(KERN_ISA_AVX2)) return 2;
    test_not_run("AVX2/FMA kernels: this CPU lacks AVX2 (only the scalar kernels are checked)");
    return 1;
}

static int same_bits(const float *a, const float *b, int n, int *at) {
    for (int i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4)) { *at = i; return 0; }
    return 1;
}

/* ---- tests ----------------------------------------------------------------- */

TEST(kern, isa_tables) {
    EXPECT(kern_table(KERN_ISA_SCALAR) != NULL);
    EXPECT_STR_EQ(kern_isa_name(KERN_ISA_SCALAR), "scalar");
    EXPECT_STR_EQ(kern_isa_name(KERN_ISA_SIMD), KERN_SIMD("avx2", "neon"));
    EXPECT_STR_EQ(kern_isa_name(7), "unknown");
    EXPECT(kern_table(7) == NULL);
    int best = kern_best_isa();
    EXPECT(kern_table(best) != NULL);
    EXPECT_EQ_I(kern_table(KERN_ISA_AVX2) != NULL, kern_isa_available(KERN_ISA_AVX2));
    const cf_kernels *K = kern_table(best);
    EXPECT(K->matmul && K->get_rows && K->rms_norm && K->rope && K->attention && K->swiglu &&
           K->add && K->last_row && K->matmul_n);
}

TEST(kern, type_table) {
    for (int i = 0; i < N_TYPES; i++) {
        EXPECT_MSG(kern_type_supported(g_types[i].type), "%s unsupported", g_types[i].name);
        EXPECT_EQ_I(kern_type_block(g_types[i].type), g_types[i].blck);
        EXPECT_EQ_I(kern_row_bytes(g_types[i].type, 64), 64 / g_types[i].blck * g_types[i].bytes);
    }
    EXPECT(!kern_type_supported(16)); /* IQ2_XXS: later */
    EXPECT(!kern_type_supported(-1));
    EXPECT(!kern_type_supported(4));  /* removed id */
    EXPECT(!kern_type_supported(1000));
    EXPECT_EQ_I(kern_row_bytes(CF_Q4_0, 33), 0);
    float x[32] = {0};
    uint8_t blk[64] = {0};
    EXPECT(isnan(kern_dot_row(KERN_ISA_SCALAR, 16, blk, x, 32)));
    EXPECT(isnan(kern_dot_row(KERN_ISA_SCALAR, CF_Q8_0, blk, x, 31)));
}

TEST(kern, f16_conversions) {
    static float all[65536], rt[65536];
    static uint16_t h[65536], back[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    int bad = 0;
    for (int i = 0; i < 65536 && bad < 5; i++) {
        all[i] = kern_f16_to_f32(h[i]);
        float r = ref_f16(h[i]);
        if (isnan(r) ? !isnan(all[i]) : memcmp(&r, &all[i], 4)) {
            test_fail(__FILE__, __LINE__, "f16 0x%04x -> %g, expected %g", i, all[i], r);
            bad++;
        }
        uint16_t b = kern_f32_to_f16(all[i]);
        if (isnan(all[i]) ? (b & 0x7c00) != 0x7c00 || !(b & 0x3ff) : b != h[i]) {
            test_fail(__FILE__, __LINE__, "f16 round trip 0x%04x -> 0x%04x", i, b);
            bad++;
        }
    }
    /* rounding: ties to even, overflow, underflow */
    EXPECT_EQ_I(kern_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);            /* tie -> even */
    EXPECT_EQ_I(kern_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);        /* tie -> even (up) */
    EXPECT_EQ_I(kern_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); /* above tie */
    EXPECT_EQ_I(kern_f32_to_f16(65504.0f), 0x7bff);
    EXPECT_EQ_I(kern_f32_to_f16(65519.0f), 0x7bff);
    EXPECT_EQ_I(kern_f32_to_f16(65520.0f), 0x7c00);
    EXPECT_EQ_I(kern_f32_to_f16(-1e10f), 0xfc00);
    EXPECT_EQ_I(kern_f32_to_f16(0x1p-25f), 0x0000);
    EXPECT_EQ_I(kern_f32_to_f16(0x1p-25f * 1.0001f), 0x0001);
    EXPECT_EQ_I(kern_f32_to_f16(3 * 0x1p-25f), 0x0002);
    EXPECT_EQ_I(kern_f32_to_f16(0x1p-14f - 0x1p-26f), 0x0400);  /* rounds up into the normals */

    if (!kern_isa_available(KERN_ISA_AVX2)) return;
    /* F16C agrees with the scalar code on all halves and on random / edge floats */
    kern_f16_to_f32_row(KERN_ISA_AVX2, h, rt, 65536);
    int at = 0;
    for (int i = 0; i < 65536; i++)
        if (!(isnan(rt[i]) && isnan(all[i])) && memcmp(rt + i, all + i, 4)) { at = i; bad++; break; }
    EXPECT_MSG(!bad, "avx2 f16->f32 differs at 0x%04x", at);
    for (int i = 0; i < 65536; i++) {
        uint32_t u = rnd_u32();
        if ((u & 0x7f800000) == 0x7f800000) u &= ~0x00400000u; /* keep NaNs out of the compare */
        if ((u & 0x7fffffff) > 0x7f800000) u = 0x3f800000;
        if (i < 4096) u = 0x33000000u + (uint32_t)i * 0x1000u;  /* subnormal range */
        memcpy(all + i, &u, 4);
    }
    kern_f32_to_f16_row(KERN_ISA_AVX2, all, back, 65536);
    kern_f32_to_f16_row(KERN_ISA_SCALAR, all, h, 65536);
    for (int i = 0; i < 65536; i++)
        if (back[i] != h[i]) {
            test_fail(__FILE__, __LINE__, "f32->f16 of %a: avx2 0x%04x, scalar 0x%04x", all[i], back[i], h[i]);
            break;
        }
}

TEST(kern, dequant_matches_spec) {
    const int n = 256;
    float ref[256], got[256];
    for (int ti = 0; ti < N_TYPES; ti++) {
        const tinfo *T = &g_types[ti];
        size_t rb;
        uint8_t *w = rnd_weights(T->type, 4, n, &rb);
        for (int r = 0; r < 4; r++) {
            const uint8_t *row = w + rb * (size_t)r;
            ref_dequant(T->type, row, ref, n);
            for (int isa = 0; isa < n_isas(); isa++) {
                kern_dequant_row_isa(isa, T->type, row, got, n);
                int at = 0;
                EXPECT_MSG(same_bits(ref, got, n, &at), "%s %s dequant[%d] = %.9g, spec %.9g",
                           kern_isa_name(isa), T->name, at, got[at], ref[at]);
            }
        }
        /* the row helper is the scalar path */
        kern_dequant_row(T->type, w, got, n);
        ref_dequant(T->type, w, ref, n);
        int at = 0;
        EXPECT_MSG(same_bits(ref, got, n, &at), "%s kern_dequant_row", T->name);
        free(w);
    }
}

/* Σ|w x| — the scale of rounding error of a dot product */
static double ref_dot(const float *w, const float *x, int n, double *mag) {
    double s = 0, m = 0;
    for (int i = 0; i < n; i++) { s += (double)w[i] * x[i]; m += fabs((double)w[i] * x[i]); }
    *mag = m;
    return s;
}

TEST(kern, dot_rows) {
    const int sizes[] = {32, 96, 256, 1056, 37};
    float x[1056], wf[1056];
    rnd_fill(x, 1056, -1, 1);
    for (int ti = 0; ti < N_TYPES; ti++) {
        const tinfo *T = &g_types[ti];
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int n = sizes[si];
            if (n % T->blck) continue;
            size_t rb;
            uint8_t *w = rnd_weights(T->type, 3, n, &rb);
            for (int r = 0; r < 3; r++) {
                ref_dequant(T->type, w + rb * (size_t)r, wf, n);
                double mag, want = ref_dot(wf, x, n, &mag);
                for (int isa = 0; isa < n_isas(); isa++) {
                    float got = kern_dot_row(isa, T->type, w + rb * (size_t)r, x, n);
                    EXPECT_MSG(fabs(got - want) <= 1e-5 * mag + 1e-7, "%s %s dot n=%d: %.9g, want %.9g",
                               kern_isa_name(isa), T->name, n, got, want);
                }
            }
            free(w);
        }
    }
}

static void mm_check(int isa, pool *P, const tinfo *T, int n_out, int n_in, int n_tok,
                     float *y_out /* may be NULL */) {
    size_t rb;
    uint8_t *w = rnd_weights(T->type, n_out, n_in, &rb);
    float *x = malloc(sizeof(float) * (size_t)n_in * n_tok);
    float *y = malloc(sizeof(float) * (size_t)n_out * n_tok);
    float *wf = malloc(sizeof(float) * (size_t)n_in);
    rnd_fill(x, (long)n_in * n_tok, -1, 1);
    cf_env E = {.K = kern_table(isa), .pool = P};
    E.K->matmul(&E, y, x, w, T->type, n_out, n_in, n_tok);
    int bad = 0;
    for (int r = 0; r < n_out && bad < 3; r++) {
        ref_dequant(T->type, w + rb * (size_t)r, wf, n_in);
        for (int t = 0; t < n_tok && bad < 3; t++) {
            double mag, want = ref_dot(wf, x + (size_t)t * n_in, n_in, &mag);
            float got = y[(size_t)t * n_out + r];
            if (!(fabs(got - want) <= 2e-5 * mag + 1e-7)) {
                test_fail(__FILE__, __LINE__, "%s %s matmul %dx%d T=%d threads=%d: y[%d][%d] = %.9g, want %.9g",
                          kern_isa_name(isa), T->name, n_out, n_in, n_tok, pool_n_threads(P), t, r, got, want);
                bad++;
            }
        }
    }
    if (y_out) memcpy(y_out, y, sizeof(float) * (size_t)n_out * n_tok);
    free(w), free(x), free(y), free(wf);
}

TEST(kern, matmul_vs_naive) {
    pool *P2 = NULL;
    EXPECT_EQ_I(pool_new(2, &P2), 0);
    EXPECT_EQ_I(pool_reserve(P2, kern_scratch_bytes(64)), 0);
    const int toks[] = {1, 3, 17};
    for (int ti = 0; ti < N_TYPES; ti++) {
        const tinfo *T = &g_types[ti];
        /* 37 rows: partial 4-row groups and a partial 16-row tile; 1088 columns:
         * two full 512 slices and a partial one; f32/f16: an odd width too */
        for (int isa = 0; isa < n_isas(); isa++)
            for (int k = 0; k < 3; k++) {
                mm_check(isa, k == 1 ? P2 : NULL, T, 37, 1088, toks[k], NULL);
                if (T->blck == 1) mm_check(isa, P2, T, 21, 203, toks[k], NULL);
            }
    }
    pool_free(P2);
}

/* Same numbers whatever the thread count (partitions never split a sum). */
TEST(kern, matmul_threads_deterministic) {
    enum { NO = 70, NI = 640, NT = 17 };
    static float y[3][NO * NT];
    const tinfo *T = &g_types[3]; /* Q4_0 */
    for (int isa = 0; isa < n_isas(); isa++)
        for (int nt = 1; nt <= 2; nt++) { /* decode and batch */
            int n_tok = nt == 1 ? 1 : NT;
            const int threads[3] = {1, 2, 4};
            for (int i = 0; i < 3; i++) {
                pool *P;
                pool_new(threads[i], &P);
                pool_reserve(P, kern_scratch_bytes(16));
                g_rng = 1234;
                mm_check(isa, P, T, NO, NI, n_tok, y[i]);
                pool_free(P);
            }
            int at = 0;
            EXPECT_MSG(same_bits(y[0], y[1], NO * n_tok, &at), "1 vs 2 threads differ at %d", at);
            EXPECT_MSG(same_bits(y[0], y[2], NO * n_tok, &at), "1 vs 4 threads differ at %d", at);
        }
}

TEST(kern, matmul_unsupported_type_is_nan) {
    float x[64] = {0}, y[4] = {0};
    uint8_t w[1024] = {0};
    cf_env E = {.K = kern_table(KERN_ISA_SCALAR)};
    E.K->matmul(&E, y, x, w, 16 /* IQ2_XXS */, 4, 256 / 4, 1);
    EXPECT(isnan(y[0]) && isnan(y[3]));
}

TEST(kern, get_rows) {
    const int n = 64, n_rows = 5;
    int ids[4] = {3, 0, 4, 3};
    float y[4 * 64], want[64];
    for (int ti = 0; ti < N_TYPES; ti++) {
        size_t rb;
        uint8_t *w = rnd_weights(g_types[ti].type, n_rows, n, &rb);
        for (int isa = 0; isa < n_isas(); isa++) {
            cf_env E = {.K = kern_table(isa)};
            E.K->get_rows(&E, y, w, g_types[ti].type, n, ids, 4);
            for (int t = 0; t < 4; t++) {
                ref_dequant(g_types[ti].type, w + rb * (size_t)ids[t], want, n);
                int at = 0;
                EXPECT_MSG(same_bits(want, y + t * n, n, &at), "%s get_rows row %d", g_types[ti].name, t);
            }
        }
        free(w);
    }
}

TEST(kern, rms_norm) {
    enum { N = 1003, NT = 3 };
    static float x[N * NT], w[N], y[N * NT];
    rnd_fill(x, N * NT, -3, 3);
    rnd_fill(w, N, 0.5f, 1.5f);
    x[5] = 100.0f;
    for (int isa = 0; isa < n_isas(); isa++) {
        cf_env E = {.K = kern_table(isa)};
        E.K->rms_norm(&E, y, x, w, N, 1e-5f, NT);
        for (int t = 0; t < NT; t++) {
            double ss = 0;
            for (int i = 0; i < N; i++) ss += (double)x[t * N + i] * x[t * N + i];
            double sc = 1.0 / sqrt(ss / N + 1e-5);
            for (int i = 0; i < N; i++) {
                double want = x[t * N + i] * sc * w[i];
                if (!(fabs(y[t * N + i] - want) <= 3e-7 * fabs(want) + 1e-30)) {
                    test_fail(__FILE__, __LINE__, "%s rms_norm[%d][%d] = %.9g, want %.9g",
                              kern_isa_name(isa), t, i, y[t * N + i], want);
                    break;
                }
            }
        }
        /* in place */
        memcpy(y, x, sizeof y);
        E.K->rms_norm(&E, y, y, w, N, 1e-5f, NT);
        float y2[N];
        E.K->rms_norm(&E, y2, x + N, w, N, 1e-5f, 1);
        int at = 0;
        EXPECT_MSG(same_bits(y + N, y2, N, &at), "in-place rms_norm differs at %d", at);
        /* no weight (Gemma 4's v norm): the weighted result with w = 1 */
        static float ones[N], yw[N * NT];
        for (int i = 0; i < N; i++) ones[i] = 1.0f;
        E.K->rms_norm(&E, y, x, NULL, N, 1e-5f, NT);
        E.K->rms_norm(&E, yw, x, ones, N, 1e-5f, NT);
        EXPECT_MSG(same_bits(y, yw, N * NT, &at), "%s rms_norm without weight differs from w = 1 at %d",
                   kern_isa_name(isa), at);
    }
}

TEST(kern, swiglu) {
    enum { N = 301, NT = 3 };
    static float g[N * NT], u[N * NT], y[N * NT];
    rnd_fill(g, N * NT, -12, 12);
    rnd_fill(u, N * NT, -2, 2);
    const float edge[] = {0.0f, -0.0f, 1e-30f, -87.5f, -88.5f, -100.0f, 87.5f, 88.5f, 100.0f, -1e30f, 1e30f};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) g[7 * i] = edge[i];
    pool *P;
    pool_new(2, &P);
    for (int isa = 0; isa < n_isas(); isa++)
        for (int pp = 0; pp < 2; pp++) {
            cf_env E = {.K = kern_table(isa), .pool = pp ? P : NULL};
            E.K->swiglu(&E, y, g, u, N, NT);
            for (int i = 0; i < N * NT; i++) {
                double want = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
                if (!(fabs(y[i] - want) <= 5e-7 * fabs(want) + 1e-30)) {
                    test_fail(__FILE__, __LINE__, "%s swiglu(g=%.9g, u=%.9g) = %.9g, want %.9g",
                              kern_isa_name(isa), g[i], u[i], y[i], want);
                    break;
                }
            }
        }
    pool_free(P);
}

TEST(kern, add_last_row) {
    float a[12], b[12], y[12];
    rnd_fill(a, 12, -1, 1);
    rnd_fill(b, 12, -1, 1);
    cf_env E = {.K = kern_table(kern_best_isa())};
    E.K->add(&E, y, a, b, 4, 3);
    for (int i = 0; i < 12; i++) EXPECT_EQ_I(y[i] == a[i] + b[i], 1);
    memcpy(y, a, sizeof y);
    E.K->add(&E, y, y, b, 4, 3); /* aliasing */
    for (int i = 0; i < 12; i++) EXPECT_EQ_I(y[i] == a[i] + b[i], 1);
    float last[4];
    E.K->last_row(&E, last, a, 4, 3);
    EXPECT(!memcmp(last, a + 8, sizeof last));
    E.K->last_row(&E, a, a, 4, 1);
}

/* RoPE in double from the definition: pair i rotated by pos * base^(-2i/n_rot)
 * (/ ff[i] with frequency factors). */
static void rope_naive(double *x, int n_head, int head_dim, int n_rot, double base, int mode, int pos,
                       const float *ff) {
    for (int h = 0; h < n_head; h++)
        for (int i = 0; i < n_rot / 2; i++) {
            double th = pos * pow(base, -2.0 * i / n_rot) / (ff ? ff[i] : 1.0), c = cos(th), s = sin(th);
            int i0 = mode == CF_ROPE_NEOX ? i : 2 * i, i1 = mode == CF_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
            double *v = x + h * head_dim, x0 = v[i0], x1 = v[i1];
            v[i0] = x0 * c - x1 * s;
            v[i1] = x0 * s + x1 * c;
        }
}

TEST(kern, rope_norm_neox) {
    enum { NH = 3, HD = 16, NT = 4 };
    float x[NT * NH * HD], x0[NT * NH * HD];
    double ref[NH * HD];
    rnd_fill(x0, NT * NH * HD, -1, 1);
    const int modes[2] = {CF_ROPE_NORM, CF_ROPE_NEOX};
    const int rots[2] = {HD, 8}; /* full and partial rotation */
    /* frequency divisors (rope_freqs): Llama 3.1's 1 -> 8 ramp, Gemma 4's 1e30 (pair held) */
    const float ff[HD / 2] = {1, 1, 1.5f, 2, 4, 8, 1e30f, 1e30f};
    for (int isa = 0; isa < n_isas(); isa++)
        for (int m = 0; m < 2; m++)
            for (int rr = 0; rr < 4; rr++) {
                const float *f = rr >= 2 ? ff : NULL;
                const int n_rot = rots[rr % 2];
                memcpy(x, x0, sizeof x);
                cf_env E = {.K = kern_table(isa), .pos = 7};
                E.K->rope(&E, x, NH, HD, n_rot, 10000.0f, modes[m], 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 0, f, NT);
                for (int t = 0; t < NT; t++) {
                    for (int i = 0; i < NH * HD; i++) ref[i] = x0[t * NH * HD + i];
                    rope_naive(ref, NH, HD, n_rot, 10000.0, modes[m], 7 + t, f);
                    for (int i = 0; i < NH * HD; i++) {
                        float got = x[t * NH * HD + i];
                        if (i % HD >= n_rot) {
                            EXPECT_MSG(got == x0[t * NH * HD + i], "rope touched dim %d >= n_rot", i % HD);
                        } else if (!(fabs(got - ref[i]) <= 2e-5)) {
                            test_fail(__FILE__, __LINE__, "rope mode %d n_rot %d%s t %d [%d] = %.9g, want %.9g",
                                      modes[m], n_rot, f ? " freq factors" : "", t, i, got, ref[i]);
                            break;
                        }
                    }
                }
            }
}

/* ggml_rope_yarn_corr_dims + rope_yarn, in double (pair i from theta / ff[i]) */
static void yarn_naive(double *x, int n_rot, double base, int mode, int pos, double fs, double ext,
                       double attn, double bf, double bs, int n_orig, const float *ff) {
    double lo = floor(n_rot * log(n_orig / (bf * 2 * M_PI)) / (2 * log(base)));
    double hi = ceil(n_rot * log(n_orig / (bs * 2 * M_PI)) / (2 * log(base)));
    lo = lo > 0 ? lo : 0;
    hi = hi < n_rot - 1 ? hi : n_rot - 1;
    for (int i = 0; i < n_rot / 2; i++) {
        double te = pos * pow(base, -2.0 * i / n_rot) / (ff ? ff[i] : 1.0), ti = fs * te;
        double y = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
        double mix = (1 - (y < 0 ? 0 : y > 1 ? 1 : y)) * ext, th = ti * (1 - mix) + te * mix;
        double m = attn * (ext != 0 ? 1 + 0.1 * log(1 / fs) : 1);
        int i0 = mode == CF_ROPE_NEOX ? i : 2 * i, i1 = mode == CF_ROPE_NEOX ? i + n_rot / 2 : 2 * i + 1;
        double a = x[i0], b = x[i1];
        x[i0] = (a * cos(th) - b * sin(th)) * m;
        x[i1] = (a * sin(th) + b * cos(th)) * m;
    }
}

TEST(kern, rope_yarn) {
    enum { HD = 16, NH = 2, NT = 3 };
    float x[NT * NH * HD], x0[NT * NH * HD];
    rnd_fill(x0, NT * NH * HD, -1, 1);
    const float ff[HD / 2] = {1, 1, 1, 2, 2, 4, 8, 8};
    for (int isa = 0; isa < n_isas(); isa++)
        for (int mode = 0; mode <= 2; mode += 2)
            for (int with_ff = 0; with_ff < 2; with_ff++) {
                memcpy(x, x0, sizeof x);
                cf_env E = {.K = kern_table(isa), .pos = 37};
                /* Ministral 3's scaling: factor 4, original context 32, base 1e6 */
                const float fs = 1.0f / 4, attn = 1.0f / (1.0f + 0.1f * logf(4.0f));
                const float *f = with_ff ? ff : NULL;
                E.K->rope(&E, x, NH, HD, HD, 1000000.0f, mode, fs, 1.0f, attn, 32.0f, 1.0f, 32, f, NT);
                for (int t = 0; t < NT; t++)
                    for (int h = 0; h < NH; h++) {
                        double ref[HD];
                        for (int i = 0; i < HD; i++) ref[i] = x0[(t * NH + h) * HD + i];
                        yarn_naive(ref, HD, 1000000.0, mode, 37 + t, fs, 1.0, attn, 32, 1, 32, f);
                        for (int i = 0; i < HD; i++)
                            EXPECT_MSG(fabs(x[(t * NH + h) * HD + i] - ref[i]) <= 3e-5,
                                       "yarn mode %d%s t %d h %d [%d] = %.7g, want %.7g", mode,
                                       with_ff ? " freq factors" : "", t, h, i, x[(t * NH + h) * HD + i], ref[i]);
                    }
            }
}

/* Attention from the definition, in double, over cache rows 0..pos+t. */
static void attention_naive(double *out, const float *q, const float *kc, const float *vc, int n_head,
                            int n_head_kv, int hd, float scale, int pos, int n_tok) {
    int kv_dim = n_head_kv * hd;
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < n_head; h++) {
            int kvh = h / (n_head / n_head_kv), n = pos + t + 1;
            double s[64], mx = -1e300, sum = 0;
            for (int p = 0; p < n; p++) {
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)q[(t * n_head + h) * hd + i] * kc[p * kv_dim + kvh * hd + i];
                s[p] = d * scale;
                if (s[p] > mx) mx = s[p];
            }
            for (int p = 0; p < n; p++) sum += (s[p] = exp(s[p] - mx));
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int p = 0; p < n; p++) o += s[p] / sum * vc[p * kv_dim + kvh * hd + i];
                out[(t * n_head + h) * hd + i] = o;
            }
        }
}

static void attention_case(int isa, pool *P, int hd) {
    enum { NH = 8, NKV = 2, CTX = 16, MAXT = 5 };
    const int kv_dim = NKV * hd;
    float *kc = calloc(CTX * kv_dim, 4), *vc = calloc(CTX * kv_dim, 4);
    float *dummy = calloc(CTX * kv_dim, 4);
    void *kv_k[2] = {dummy, kc}, *kv_v[2] = {dummy, vc}; /* layer 1 */
    float q[MAXT * NH * 32], k[MAXT * NKV * 32], v[MAXT * NKV * 32], out[MAXT * NH * 32];
    double want[MAXT * NH * 32];
    cf_env E = {.K = kern_table(isa), .pool = P, .kv_k = kv_k, .kv_v = kv_v, .n_ctx = CTX};
    const float scale = 1.0f / sqrtf((float)hd);
    const int batches[2][2] = {{0, 5}, {5, 1}}; /* (pos, n_tokens) */
    for (int b = 0; b < 2; b++) {
        int pos = batches[b][0], nt = batches[b][1];
        rnd_fill(q, nt * NH * hd, -2, 2);
        rnd_fill(k, nt * kv_dim, -2, 2);
        rnd_fill(v, nt * kv_dim, -1, 1);
        E.pos = pos;
        E.n_tokens = nt;
        E.K->attention(&E, out, q, k, v, NULL, 1, NH, NKV, hd, hd, scale, 0, 0.0f, nt);
        EXPECT_MSG(!memcmp(kc + pos * kv_dim, k, sizeof(float) * nt * kv_dim), "k not stored at pos %d", pos);
        EXPECT_MSG(!memcmp(vc + pos * kv_dim, v, sizeof(float) * nt * kv_dim), "v not stored at pos %d", pos);
        attention_naive(want, q, kc, vc, NH, NKV, hd, scale, pos, nt);
        for (int i = 0; i < nt * NH * hd; i++)
            if (!(fabs(out[i] - want[i]) <= 2e-6)) {
                test_fail(__FILE__, __LINE__, "%s attention hd=%d threads=%d pos=%d out[%d] = %.9g, want %.9g",
                          kern_isa_name(isa), hd, pool_n_threads(P), pos, i, out[i], want[i]);
                break;
            }
    }
    /* k = v = NULL (a layer sharing layer 1's KV): nothing stored, the same cache read */
    {
        float kc_before[CTX * 2 * 32];
        memcpy(kc_before, kc, sizeof(float) * CTX * kv_dim);
        rnd_fill(q, NH * hd, -2, 2);
        E.pos = 5, E.n_tokens = 1;
        E.K->attention(&E, out, q, NULL, NULL, NULL, 1, NH, NKV, hd, hd, scale, 0, 0.0f, 1);
        EXPECT_MSG(!memcmp(kc_before, kc, sizeof(float) * CTX * kv_dim), "shared-KV attention wrote the cache");
        attention_naive(want, q, kc, vc, NH, NKV, hd, scale, 5, 1);
        for (int i = 0; i < NH * hd; i++)
            if (!(fabs(out[i] - want[i]) <= 2e-6)) {
                test_fail(__FILE__, __LINE__, "%s shared-KV attention hd=%d out[%d] = %.9g, want %.9g",
                          kern_isa_name(isa), hd, i, out[i], want[i]);
                break;
            }
    }
    for (int i = 0; i < CTX * kv_dim; i++) EXPECT_MSG(dummy[i] == 0, "layer 0 cache written");
    free(kc), free(vc), free(dummy);
}

TEST(kern, attention_gqa_vs_naive) {
    pool *P;
    pool_new(3, &P);
    pool_reserve(P, kern_scratch_bytes(16));
    for (int isa = 0; isa < n_isas(); isa++)
        for (int hd = 16; hd <= 20; hd += 4) { /* 20: SIMD tails */
            attention_case(isa, NULL, hd);
            attention_case(isa, P, hd);
        }
    pool_free(P);
}

/* AVX2 table vs scalar table on the same inputs: the SIMD path's own check. */
TEST(kern, avx2_vs_scalar) {
    if (!kern_isa_available(KERN_ISA_AVX2)) SKIP_HARDWARE("no AVX2 on this CPU");
    enum { NO = 33, NI = 544, NT = 5 };
    const cf_kernels *S = kern_table(KERN_ISA_SCALAR), *A = kern_table(KERN_ISA_AVX2);
    static float x[NT * NI], ys[NT * NO], ya[NT * NO], wf[NI];
    rnd_fill(x, NT * NI, -1, 1);
    for (int ti = 0; ti < N_TYPES; ti++) {
        size_t rb;
        uint8_t *w = rnd_weights(g_types[ti].type, NO, NI, &rb);
        for (int nt = 1; nt <= NT; nt += NT - 1) {
            cf_env E = {0};
            S->matmul(&E, ys, x, w, g_types[ti].type, NO, NI, nt);
            A->matmul(&E, ya, x, w, g_types[ti].type, NO, NI, nt);
            for (int i = 0; i < NO * nt; i++) {
                double mag;
                ref_dequant(g_types[ti].type, w + rb * (size_t)(i % NO), wf, NI);
                ref_dot(wf, x + (size_t)(i / NO) * NI, NI, &mag);
                if (!(fabs(ys[i] - ya[i]) <= 2e-5 * mag)) {
                    test_fail(__FILE__, __LINE__, "%s T=%d: avx2 %.9g vs scalar %.9g (Σ|wx| %g)",
                              g_types[ti].name, nt, ya[i], ys[i], mag);
                    break;
                }
            }
        }
        free(w);
    }
}
