/*
 * test_kern_quants.c — the 256-element weight types (runtime/kern_kquants.*):
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_XS, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0.
 *
 * The reference here decodes one element at a time from its index, straight
 * from the block layouts of ggml-common.h and the formulas of ggml-quants.c
 * dequantize_row_* (a different formulation from the kernels' loops), on raw
 * bytes at explicit offsets.  The codebooks are checked against fingerprints
 * of ggml's tables and the sign table is rederived from its definition.
 *
 * Checks: dequant (scalar and AVX2) bit-identical to the reference; scalar
 * dot (kern_dot_row: the scalar matmul of one row) = Σ w·x sequential within
 * 512-element slices, bit for bit; AVX2 dot within 2e-6·Σ|w·x| of the scalar dot
 * (measured worst case over all types: 9.3e-8 here, n <= 4096, printed per
 * type; 3.8e-7 at n = 16384 over 3200 random blocks per type); matmul for
 * n_tokens 1, 3, 17 against a double-precision naive product; get_rows.
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/kern.h"
#include "kernels/kern_kquants.h"
#include "base/pool.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------- */

static uint64_t g_rng = 0x2545f4914f6cdd1dULL;
static uint32_t rnd_u32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rnd_f(float lo, float hi) { return lo + (hi - lo) * (float)(rnd_u32() & 0xffffff) / 16777216.0f; }

/* IEEE half, decoded from the definition */
static float ref_f16(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m + 1024), e - 25);
    return s ? -v : v;
}
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ksigns_iq2xs by definition: 7 sign bits, bit 7 makes the number of set bits even */
static uint8_t ref_ksigns(int i) { return (uint8_t)(i | (__builtin_popcount((unsigned)i) & 1) << 7); }

typedef struct {
    int type;
    const char *name;
    int bytes;       /* per 256-element block */
    int d_off[2];    /* byte offsets of the f16 scales (-1: none) */
} qtype;

static const qtype g_qt[] = {
    {10, "Q2_K", 84, {80, 82}},     {11, "Q3_K", 110, {108, -1}}, {12, "Q4_K", 144, {0, 2}},
    {13, "Q5_K", 176, {0, 2}},      {14, "Q6_K", 210, {208, -1}}, {15, "Q8_K", 292, {-1, -1}},
    {23, "IQ4_XS", 136, {0, -1}},   {18, "IQ3_XXS", 98, {0, -1}}, {21, "IQ3_S", 110, {0, -1}},
    {34, "TQ1_0", 54, {52, -1}},    {35, "TQ2_0", 66, {64, -1}},
};
#define N_QT (int)(sizeof g_qt / sizeof g_qt[0])

/* Element e (0..255) of one block at p, decoded from the spec. */
static float ref_elem(int type, const uint8_t *p, int e) {
    switch (type) {
    case 10: { /* Q2_K: scales[16] qs[64] d dmin; element 128h + 32j + l is bits 2j of qs[32h + l] */
        const int h = e / 128, j = e % 128 / 32, l = e % 32, sc = p[e / 16];
        const int q = (p[16 + 32 * h + l] >> (2 * j)) & 3;
        const float d = ref_f16(rd16(p + 80)), dmin = ref_f16(rd16(p + 82));
        return d * (float)(sc & 15) * (float)q - dmin * (float)(sc >> 4);
    }
    case 11: { /* Q3_K: hmask[32] qs[64] scales[12] d */
        const int h = e / 128, j = e % 128 / 32, l = e % 32, s = e / 16;
        const uint8_t *sc = p + 96;
        const int lo = (s < 8 ? sc[s] : sc[s - 8] >> 4) & 15, hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
        const int q = ((p[32 + 32 * h + l] >> (2 * j)) & 3) - (((p[l] >> (4 * h + j)) & 1) ? 0 : 4);
        return ref_f16(rd16(p + 108)) * (float)((lo | hi << 4) - 32) * (float)q;
    }
    case 12: case 13: { /* Q4_K / Q5_K: d dmin scales[12] (qh[32]) qs[128] */
        const int s = e / 32, l = e % 32, five = type == 13;
        const uint8_t *sc = p + 4, *qs = p + (five ? 48 : 16);
        int scale, min;
        if (s < 4) {
            scale = sc[s] & 63;
            min = sc[s + 4] & 63;
        } else {
            scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
            min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
        }
        int q = s % 2 ? qs[32 * (s / 2) + l] >> 4 : qs[32 * (s / 2) + l] & 15;
        if (five) q += ((p[16 + l] >> s) & 1) * 16;
        return ref_f16(rd16(p)) * (float)scale * (float)q - ref_f16(rd16(p + 2)) * (float)min;
    }
    case 14: { /* Q6_K: ql[128] qh[64] scales[16] d */
        const int h = e / 128, k = e % 128 / 32, l = e % 32;
        const uint8_t b = p[64 * h + 32 * (k & 1) + l];
        const int lo = k < 2 ? b & 15 : b >> 4, hi = (p[128 + 32 * h + l] >> (2 * k)) & 3;
        return ref_f16(rd16(p + 208)) * (float)(int8_t)p[192 + e / 16] * (float)((lo | hi << 4) - 32);
    }
    case 15: { /* Q8_K: f32 d, qs[256] */
        float d;
        memcpy(&d, p, 4);
        return d * (float)(int8_t)p[4 + e];
    }
    case 23: { /* IQ4_XS: d scales_h scales_l[4] qs[128] */
        const int ib = e / 32, j = e % 32;
        const int ls = ((p[4 + ib / 2] >> (4 * (ib % 2))) & 15) | ((rd16(p + 2) >> (2 * ib)) & 3) << 4;
        const uint8_t b = p[8 + 16 * ib + j % 16];
        return ref_f16(rd16(p)) * (float)(ls - 32) * (float)kvalues_iq4nl[j < 16 ? b & 15 : b >> 4];
    }
    case 18: { /* IQ3_XXS: d, qs[64] grid indices, 8 x u32 (4 x 7-bit sign index, 4-bit scale) */
        const int ib = e / 32, r = e % 32;
        const uint32_t aux = rd32(p + 2 + 64 + 4 * ib);
        const float db = ref_f16(rd16(p)) * (0.5f + (float)(aux >> 28)) * 0.5f;
        const int mag = (kern_iq3xxs_grid[p[2 + 8 * ib + r / 4]] >> (8 * (r % 4))) & 255;
        const int neg = (ref_ksigns((int)(aux >> (7 * (r / 8))) & 127) >> (r % 8)) & 1;
        return db * (float)mag * (neg ? -1.0f : 1.0f);
    }
    case 21: { /* IQ3_S: d qs[64] qh[8] signs[32] scales[4] */
        const int ib = e / 32, r = e % 32, i = r / 4;
        const int idx = p[2 + 8 * ib + i] | ((p[66 + ib] >> i) & 1) << 8;
        const int mag = (kern_iq3s_grid[idx] >> (8 * (r % 4))) & 255;
        const int neg = (p[74 + 4 * ib + r / 8] >> (r % 8)) & 1;
        const float db = ref_f16(rd16(p)) * (float)(1 + 2 * ((p[106 + ib / 2] >> (4 * (ib % 2))) & 15));
        return db * (float)mag * (neg ? -1.0f : 1.0f);
    }
    case 34: { /* TQ1_0: qs[48] (5 trits/byte) qh[4] (4 trits/byte) d */
        int byte, n;
        if (e < 160) byte = p[e % 32], n = e / 32;
        else if (e < 240) byte = p[32 + (e - 160) % 16], n = (e - 160) / 16;
        else byte = p[48 + (e - 240) % 4], n = (e - 240) / 4;
        int pw = 1;
        for (int k = 0; k < n; k++) pw *= 3;
        const int trit = ((byte * pw) % 256 * 3) / 256;
        return (float)(trit - 1) * ref_f16(rd16(p + 52));
    }
    case 35: { /* TQ2_0: qs[64] d; element 128h + 32l + m is bits 2l of qs[32h + m] */
        const int h = e / 128, l = e % 128 / 32, m = e % 32;
        return (float)(((p[32 * h + m] >> (2 * l)) & 3) - 1) * ref_f16(rd16(p + 64));
    }
    }
    return NAN;
}

static void ref_dequant(const qtype *T, const uint8_t *row, float *y, int n) {
    for (int b = 0; b < n / 256; b++)
        for (int e = 0; e < 256; e++) y[256 * b + e] = ref_elem(T->type, row + (size_t)b * T->bytes, e);
}

/* n_rows random rows: random bytes, scales set to finite f16 values of either
 * sign over a wide range (all codes, sign bits and sub-scales random). */
static uint8_t *rnd_rows(const qtype *T, int n_rows, int n, size_t *row_bytes) {
    const int nb = n / 256;
    *row_bytes = (size_t)nb * (size_t)T->bytes;
    uint8_t *w = malloc(*row_bytes * (size_t)n_rows + 1);
    for (size_t i = 0; i < *row_bytes * (size_t)n_rows; i++) w[i] = (uint8_t)rnd_u32();
    for (int b = 0; b < nb * n_rows; b++) {
        uint8_t *p = w + (size_t)b * T->bytes;
        for (int k = 0; k < 2; k++) {
            if (T->d_off[k] < 0) continue;
            float v = rnd_f(0.5f, 1.0f) * ldexpf(1.0f, -(int)(rnd_u32() % 14)) * (rnd_u32() & 1 ? -1.0f : 1.0f);
            uint16_t h = kern_f32_to_f16(v);
            memcpy(p + T->d_off[k], &h, 2);
        }
        if (T->type == 15) {
            float d = rnd_f(1e-4f, 1e-2f) * (rnd_u32() & 1 ? -1.0f : 1.0f);
            memcpy(p, &d, 4);
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

static uint64_t fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* ---- tests ----------------------------------------------------------------- */

/* The codebooks are ggml's: FNV-1a 64 of ggml-common.h's tables (little
 * endian bytes), plus what their definitions say. */
TEST(kern_quants, codebooks) {
    EXPECT_EQ_I(fnv1a(kern_ksigns_iq2xs, sizeof kern_ksigns_iq2xs), 0xf19ba8f8c3292ba5ULL);
    EXPECT_EQ_I(fnv1a(kern_iq3xxs_grid, sizeof kern_iq3xxs_grid), 0xdfa5dc83d6a155d5ULL);
    EXPECT_EQ_I(fnv1a(kern_iq3s_grid, sizeof kern_iq3s_grid), 0xfa37020c25b44829ULL);
    for (int i = 0; i < 128; i++)
        EXPECT_MSG(kern_ksigns_iq2xs[i] == ref_ksigns(i), "ksigns[%d] = %d", i, kern_ksigns_iq2xs[i]);
    /* grids: ascending entries of 4 magnitudes 2k+1 (IQ3_S) or 8k+4 (IQ3_XXS, 62 for 60) */
    for (int i = 0; i < 512; i++) {
        if (i) EXPECT(kern_iq3s_grid[i] > kern_iq3s_grid[i - 1]);
        for (int k = 0; k < 4; k++) EXPECT(((kern_iq3s_grid[i] >> 8 * k) & 1) == 1);
    }
    for (int i = 0; i < 256; i++) {
        if (i) EXPECT(kern_iq3xxs_grid[i] > kern_iq3xxs_grid[i - 1]);
        for (int k = 0; k < 4; k++) {
            int v = (kern_iq3xxs_grid[i] >> 8 * k) & 255;
            EXPECT_MSG(v == 62 || (v % 8 == 4 && v < 60), "iq3xxs_grid[%d] byte %d = %d", i, k, v);
        }
    }
}

TEST(kern_quants, type_table) {
    for (int i = 0; i < N_QT; i++) {
        EXPECT_MSG(kern_type_supported(g_qt[i].type), "%s unsupported", g_qt[i].name);
        EXPECT_EQ_I(kern_type_block(g_qt[i].type), 256);
        EXPECT_EQ_I(kern_row_bytes(g_qt[i].type, 512), 2 * g_qt[i].bytes);
        EXPECT_EQ_I(kern_row_bytes(g_qt[i].type, 288), 0); /* not whole blocks */
    }
    float x[288] = {0};
    uint8_t blk[600] = {0};
    EXPECT(isnan(kern_dot_row(KERN_ISA_SCALAR, 12, blk, x, 288)));
    EXPECT(!kern_type_supported(16)); /* IQ2_XXS: not yet */
}

TEST(kern_quants, dequant_matches_spec) {
    const int n = 1024;
    float ref[1024], got[1024];
    for (int ti = 0; ti < N_QT; ti++) {
        const qtype *T = &g_qt[ti];
        size_t rb;
        uint8_t *w = rnd_rows(T, 16, n, &rb); /* 64 blocks */
        for (int r = 0; r < 16; r++) {
            const uint8_t *row = w + rb * (size_t)r;
            ref_dequant(T, row, ref, n);
            for (int isa = 0; isa < n_isas(); isa++) {
                kern_dequant_row_isa(isa, T->type, row, got, n);
                int at = 0;
                if (!same_bits(ref, got, n, &at)) {
                    test_fail(__FILE__, __LINE__, "%s %s dequant row %d [%d] = %a, spec %a",
                              kern_isa_name(isa), T->name, r, at, got[at], ref[at]);
                    break;
                }
            }
        }
        free(w);
    }
}

TEST(kern_quants, dot_rows) {
    enum { NMAX = 4096 };
    static float x[NMAX], wf[NMAX];
    for (int i = 0; i < NMAX; i++) x[i] = rnd_f(-1, 1);
    const int sizes[] = {256, 768, 4096};
    for (int ti = 0; ti < N_QT; ti++) {
        const qtype *T = &g_qt[ti];
        double worst = 0;
        for (int si = 0; si < 3; si++) {
            const int n = sizes[si];
            size_t rb;
            uint8_t *w = rnd_rows(T, 4, n, &rb);
            for (int r = 0; r < 4; r++) {
                const uint8_t *row = w + rb * (size_t)r;
                ref_dequant(T, row, wf, n);
                /* the scalar matmul's order: sequential within KERN_MM_KC slices, the
                 * slices' sums added in order */
                float seq = 0.0f;
                double mag = 0;
                for (int k0 = 0; k0 < n; k0 += KERN_MM_KC) {
                    float part = 0.0f;
                    for (int i = k0; i < n && i < k0 + KERN_MM_KC; i++) {
                        part += wf[i] * x[i];
                        mag += fabs((double)wf[i] * x[i]);
                    }
                    seq = k0 ? seq + part : part;
                }
                const float sc = kern_dot_row(KERN_ISA_SCALAR, T->type, row, x, n);
                EXPECT_MSG(!memcmp(&sc, &seq, sizeof sc), "%s scalar dot n=%d: %.9g, sequential by slices %.9g",
                           T->name, n, sc, seq);
                if (n_isas() < 2) continue;
                const float av = kern_dot_row(KERN_ISA_AVX2, T->type, row, x, n);
                const double rel = fabs((double)av - sc) / mag;
                if (rel > worst) worst = rel;
                EXPECT_MSG(rel <= 2e-6, "%s avx2 dot n=%d: %.9g, scalar %.9g (%.3g of Σ|wx|)", T->name, n,
                           av, sc, rel);
            }
            free(w);
        }
        if (n_isas() > 1) printf("    %-8s avx2 vs scalar dot: worst %.2g of Σ|w·x|\n", T->name, worst);
    }
}

static void mm_check(int isa, pool *P, const qtype *T, int n_out, int n_in, int n_tok) {
    size_t rb;
    uint8_t *w = rnd_rows(T, n_out, n_in, &rb);
    float *x = malloc(sizeof(float) * (size_t)n_in * n_tok);
    float *y = malloc(sizeof(float) * (size_t)n_out * n_tok);
    float *wf = malloc(sizeof(float) * (size_t)n_in);
    for (long i = 0; i < (long)n_in * n_tok; i++) x[i] = rnd_f(-1, 1);
    cf_env E = {.K = kern_table(isa), .pool = P};
    E.K->matmul(&E, y, x, w, T->type, n_out, n_in, n_tok);
    int bad = 0;
    for (int r = 0; r < n_out && bad < 3; r++) {
        ref_dequant(T, w + rb * (size_t)r, wf, n_in);
        for (int t = 0; t < n_tok && bad < 3; t++) {
            double want = 0, mag = 0;
            for (int i = 0; i < n_in; i++) {
                want += (double)wf[i] * x[(size_t)t * n_in + i];
                mag += fabs((double)wf[i] * x[(size_t)t * n_in + i]);
            }
            const float got = y[(size_t)t * n_out + r];
            if (!(fabs(got - want) <= 2e-6 * mag)) {
                test_fail(__FILE__, __LINE__, "%s %s matmul %dx%d T=%d: y[%d][%d] = %.9g, want %.9g",
                          kern_isa_name(isa), T->name, n_out, n_in, n_tok, t, r, got, want);
                bad++;
            }
        }
    }
    free(w), free(x), free(y), free(wf);
}

TEST(kern_quants, matmul_vs_naive) {
    pool *P2 = NULL;
    EXPECT_EQ_I(pool_new(2, &P2), 0);
    EXPECT_EQ_I(pool_reserve(P2, kern_scratch_bytes(64)), 0);
    const int toks[] = {1, 3, 17};
    /* 37 rows: partial register groups and a partial 16-row tile; 1280 columns:
     * two full 512-wide slices of the tile path and a half one */
    for (int ti = 0; ti < N_QT; ti++)
        for (int isa = 0; isa < n_isas(); isa++)
            for (int k = 0; k < 3; k++) mm_check(isa, k == 1 ? P2 : NULL, &g_qt[ti], 37, 1280, toks[k]);
    pool_free(P2);
}

TEST(kern_quants, get_rows) {
    const int n = 512, n_rows = 5;
    int ids[4] = {3, 0, 4, 3};
    float y[4 * 512], want[512];
    for (int ti = 0; ti < N_QT; ti++) {
        size_t rb;
        uint8_t *w = rnd_rows(&g_qt[ti], n_rows, n, &rb);
        for (int isa = 0; isa < n_isas(); isa++) {
            cf_env E = {.K = kern_table(isa)};
            E.K->get_rows(&E, y, w, g_qt[ti].type, n, ids, 4);
            for (int t = 0; t < 4; t++) {
                ref_dequant(&g_qt[ti], w + rb * (size_t)ids[t], want, n);
                int at = 0;
                EXPECT_MSG(same_bits(want, y + t * n, n, &at), "%s %s get_rows row %d [%d]",
                           kern_isa_name(isa), g_qt[ti].name, t, at);
            }
        }
        free(w);
    }
}
