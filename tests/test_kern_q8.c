/*
 * test_kern_q8.c — quantized activations (runtime/kern_q8.*, cf_env.act_quant).
 *
 * References here are written from ggml's code, independently of the
 * kernels: the quantizers from ggml-cpu/arch/x86/quants.c (AVX path of
 * quantize_row_q8_0/q8_1) and ggml-quants.c (quantize_row_q8_K_ref), with
 * round-half-even done by hand; dots as Σ dequant(w)·dequant(a) in double,
 * with dequant(w) the already spec-tested exact dequantization and Q8_1's
 * min term m·s taken from the stored f16 s as ggml does.
 *
 * Checks:
 *  - every quantizer (scalar and AVX2) writes the reference's bytes, on random
 *    rows and on ties, zero blocks, sign ties of the Q8_K maximum;
 *  - integer parts exact: with every float scale 1 (weights' d/dmin/m, and
 *    activations whose block maximum is 127) each dot equals the exact sum;
 *  - random data: scalar dot within 2e-6·Σ|w·a| of the double reference,
 *    AVX2 within 2e-6·Σ|w·a| of scalar (worst cases printed), and a token's
 *    result is the same bits whatever the number of tokens in the call;
 *  - matmul in act_quant mode (n_tokens 1, 3, 17; no pool, 2-thread pool,
 *    chunked stack path): equal to quantize + dot per row to 2e-6·Σ|w·a|,
 *    bit-identical across thread counts, and within a measured bound of the
 *    f32 mode (printed: ‖y_q8 - y_f32‖ / ‖y_f32‖).
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/kern.h"
#include "kernels/kern_q8.h" /* kern_block_q8x4, kern_q8x4_pack: the 4-token mat-mat leaves */
#include "base/pool.h"
#include "test.h"

/* ---- helpers ---------------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd_u32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rnd_f(float lo, float hi) { return lo + (hi - lo) * (float)(rnd_u32() & 0xffffff) / 16777216.0f; }

/* 2 when the AVX2 kernels run here (scalar and AVX2 are both checked), else 1 (said in the output) */
static int n_isas(void) {
    if (kern_isa_available(KERN_ISA_AVX2)) return 2;
    test_not_run("AVX2/FMA kernels: this CPU lacks AVX2 (only the scalar kernels are checked)");
    return 1;
}

/* IEEE half from its definition */
static double ref_f16(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(m + 1024, e - 25);
    return s ? -v : v;
}
/* nearest f16 of x, ties to even, by search over the neighbours of a candidate */
static uint16_t ref_to_f16(float x) {
    uint16_t c = kern_f32_to_f16(x), best = c;
    double bd = fabs(ref_f16(c) - x);
    for (int k = -2; k <= 2; k++) {
        uint16_t h = (uint16_t)(c + k);
        if ((h & 0x7c00) == 0x7c00 || ((h ^ c) & 0x8000)) continue;
        double dd = fabs(ref_f16(h) - x);
        if (dd < bd || (dd == bd && !(h & 1) && (best & 1))) best = h, bd = dd;
    }
    return best;
}
static uint16_t ref_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
/* round half to even, by hand */
static int ref_rne(float v) {
    double f = floor((double)v), r = (double)v - f;
    if (r > 0.5 || (r == 0.5 && fmod(f, 2.0) != 0)) f += 1;
    return (int)f;
}

/* ---- activation formats, from ggml ---------------------------------------------- */

enum { VDT_Q8_0 = 8, VDT_Q8_1 = 9, VDT_Q8_K = 15, VDT_F16 = 1, VDT_BF16 = 30 };

/* One activation row in vdt's layout (little-endian bytes). */
static size_t ref_quantize(int vdt, const float *x, int n, uint8_t *out) {
    uint8_t *o = out;
    if (vdt == VDT_Q8_0 || vdt == VDT_Q8_1) {
        for (int b = 0; b < n / 32; b++, x += 32) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
            const float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
            int8_t q[32];
            int sum = 0;
            for (int j = 0; j < 32; j++) {
                int v = ref_rne(x[j] * id);
                q[j] = (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
                sum += q[j];
            }
            uint16_t hd = ref_to_f16(d);
            memcpy(o, &hd, 2), o += 2;
            if (vdt == VDT_Q8_1) {
                uint16_t hs = ref_to_f16(d * (float)sum);
                memcpy(o, &hs, 2), o += 2;
            }
            memcpy(o, q, 32), o += 32;
        }
    } else if (vdt == VDT_Q8_K) {
        for (int b = 0; b < n / 256; b++, x += 256) {
            float max = 0, amax = 0;
            for (int j = 0; j < 256; j++)
                if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
            float d = 0;
            int8_t q[256] = {0};
            int16_t bs[16] = {0};
            if (amax != 0) {
                const float iscale = -127.f / max;
                for (int j = 0; j < 256; j++) {
                    int v = ref_rne(iscale * x[j]);
                    q[j] = (int8_t)(v < 127 ? v : 127);
                    bs[j / 16] = (int16_t)(bs[j / 16] + q[j]);
                }
                d = 1 / iscale;
            }
            memcpy(o, &d, 4), o += 4;
            memcpy(o, q, 256), o += 256;
            memcpy(o, bs, 32), o += 32;
        }
    } else {
        for (int i = 0; i < n; i++) {
            uint16_t h = vdt == VDT_F16 ? ref_to_f16(x[i]) : ref_to_bf16(x[i]);
            memcpy(o, &h, 2), o += 2;
        }
    }
    return (size_t)(o - out);
}

/* Dequantized activations of a row in vdt layout; for Q8_1 also the
 * correction Σ_b m_b·(s_b - d_b·Σq_b) needs the weights: see ref_dot. */
static void act_dequant(int vdt, const uint8_t *a, int n, double *out) {
    if (vdt == VDT_Q8_0 || vdt == VDT_Q8_1) {
        const int bs = vdt == VDT_Q8_0 ? 34 : 36;
        for (int b = 0; b < n / 32; b++, a += bs) {
            uint16_t h;
            memcpy(&h, a, 2);
            for (int j = 0; j < 32; j++) out[32 * b + j] = ref_f16(h) * (int8_t)a[bs - 32 + j];
        }
    } else if (vdt == VDT_Q8_K) {
        for (int b = 0; b < n / 256; b++, a += 292) {
            float d;
            memcpy(&d, a, 4);
            for (int j = 0; j < 256; j++) out[256 * b + j] = (double)d * (int8_t)a[4 + j];
        }
    }
}

/* ---- weight types ----------------------------------------------------------------- */

typedef struct {
    int type;
    const char *name;
    int blck, bytes;
    int d_off[2]; /* byte offsets of f16 scales (d, then dmin or m; -1: none) */
    int vdt;
} wtype;

static const wtype g_wt[] = {
    {2, "Q4_0", 32, 18, {0, -1}, VDT_Q8_0},     {3, "Q4_1", 32, 20, {0, 2}, VDT_Q8_1},
    {6, "Q5_0", 32, 22, {0, -1}, VDT_Q8_0},     {7, "Q5_1", 32, 24, {0, 2}, VDT_Q8_1},
    {8, "Q8_0", 32, 34, {0, -1}, VDT_Q8_0},     {20, "IQ4_NL", 32, 18, {0, -1}, VDT_Q8_0},
    {10, "Q2_K", 256, 84, {80, 82}, VDT_Q8_K},  {11, "Q3_K", 256, 110, {108, -1}, VDT_Q8_K},
    {12, "Q4_K", 256, 144, {0, 2}, VDT_Q8_K},   {13, "Q5_K", 256, 176, {0, 2}, VDT_Q8_K},
    {14, "Q6_K", 256, 210, {208, -1}, VDT_Q8_K}, {23, "IQ4_XS", 256, 136, {0, -1}, VDT_Q8_K},
    {18, "IQ3_XXS", 256, 98, {0, -1}, VDT_Q8_K}, {21, "IQ3_S", 256, 110, {0, -1}, VDT_Q8_K},
    {34, "TQ1_0", 256, 54, {52, -1}, VDT_Q8_K}, {35, "TQ2_0", 256, 66, {64, -1}, VDT_Q8_K},
    {39, "MXFP4", 32, 17, {-1, -1}, VDT_Q8_0}, /* E8M0 exponent at byte 0 (rnd_rows) */
};
#define N_WT (int)(sizeof g_wt / sizeof g_wt[0])

/* n_rows rows of n: random bytes; f16 scales random (unit = 0) or 1.0 (unit = 1;
 * the min/m field then 1.0 too). */
static uint8_t *rnd_rows(const wtype *T, int n_rows, int n, int unit, size_t *row_bytes) {
    const int nb = n / T->blck;
    *row_bytes = (size_t)nb * (size_t)T->bytes;
    uint8_t *w = malloc(*row_bytes * (size_t)n_rows + 1);
    for (size_t i = 0; i < *row_bytes * (size_t)n_rows; i++) w[i] = (uint8_t)rnd_u32();
    if (T->type == 39) /* MXFP4: exponents 2^-10 .. 2^-1 (unit: 2^0) */
        for (int b = 0; b < nb * n_rows; b++) w[(size_t)b * T->bytes] = (uint8_t)(unit ? 128 : 118 + rnd_u32() % 10);
    for (int b = 0; b < nb * n_rows; b++)
        for (int k = 0; k < 2; k++) {
            if (T->d_off[k] < 0) continue;
            float v = unit ? 1.0f
                           : rnd_f(0.5f, 1.0f) * ldexpf(1.0f, -(int)(rnd_u32() % 10)) *
                                 (rnd_u32() & 1 ? -1.0f : 1.0f);
            uint16_t h = kern_f32_to_f16(v);
            memcpy(w + (size_t)b * T->bytes + T->d_off[k], &h, 2);
        }
    return w;
}

/* Σ dequant(w)·dequant(a) in double, ggml's m·s for Q8_1; *mag = Σ|terms| */
static double ref_dot(const wtype *T, const uint8_t *w, const uint8_t *a, int n, double *mag) {
    float *wf = malloc(sizeof(float) * (size_t)n);
    double *af = malloc(sizeof(double) * (size_t)n);
    kern_dequant_row(T->type, w, wf, n);
    act_dequant(T->vdt, a, n, af);
    double s = 0, m = 0;
    for (int i = 0; i < n; i++) s += wf[i] * af[i], m += fabs(wf[i] * af[i]);
    if (T->vdt == VDT_Q8_1) /* Σ m·(d·Σq) -> Σ m·s */
        for (int b = 0; b < n / 32; b++) {
            uint16_t hm, hd, hs;
            memcpy(&hm, w + (size_t)b * T->bytes + 2, 2);
            memcpy(&hd, a + 36 * b, 2);
            memcpy(&hs, a + 36 * b + 2, 2);
            int sum = 0;
            for (int j = 0; j < 32; j++) sum += (int8_t)a[36 * b + 4 + j];
            s += ref_f16(hm) * (ref_f16(hs) - ref_f16(hd) * sum);
        }
    free(wf), free(af);
    *mag = m;
    return s;
}

/* ---- tests ------------------------------------------------------------------------ */

TEST(kern_q8, type_table) {
    for (int i = 0; i < N_WT; i++) {
        EXPECT_EQ_I(kern_vec_dot_type(g_wt[i].type), g_wt[i].vdt);
        EXPECT_EQ_I(kern_act_row_bytes(g_wt[i].type, 512),
                    g_wt[i].vdt == VDT_Q8_0 ? 16 * 34 : g_wt[i].vdt == VDT_Q8_1 ? 16 * 36 : 2 * 292);
    }
    EXPECT_EQ_I(kern_vec_dot_type(0), 0);   /* F32: f32 activations */
    EXPECT_EQ_I(kern_vec_dot_type(15), 0);  /* Q8_K weights: not a ggml matmul type */
    EXPECT_EQ_I(kern_vec_dot_type(1), 1);   /* F16 -> F16 */
    EXPECT_EQ_I(kern_vec_dot_type(30), 30); /* BF16 -> BF16 */
    EXPECT_EQ_I(kern_vec_dot_type(16), -1); /* unsupported */
    EXPECT_EQ_I(kern_act_row_bytes(1, 100), 200);
    EXPECT_EQ_I(kern_act_row_bytes(0, 100), 400);
    EXPECT_EQ_I(kern_act_row_bytes(12, 288), 0);
    float s[4];
    uint8_t z[4096] = {0};
    EXPECT_EQ_I(kern_dot_q_rows(KERN_ISA_SCALAR, 1, z, z, 0, 1, 32, s), -1); /* F16: no integer dot */
    EXPECT_EQ_I(kern_dot_q_rows(KERN_ISA_SCALAR, 2, z, z, 0, 5, 32, s), -1); /* nt > KERN_Q8_NT */
    EXPECT_EQ_I(kern_dot_q_rows(KERN_ISA_SCALAR, 2, z, z, 0, 1, 32, s), 0);
    EXPECT_EQ_I(s[0], 0);
}

/* Rows that exercise the rounding: random, exact ties (x·id = k + 1/2),
 * zero blocks, the Q8_K maximum's sign tie (+m then -m, and -m then +m). */
static void fill_quant_rows(float *x, int n, int kind) {
    for (int i = 0; i < n; i++) x[i] = rnd_f(-2, 2) * (kind == 1 ? 1e-3f : 1.0f);
    if (kind == 2) {      /* max 127 -> id 1: half-integers are ties */
        for (int i = 0; i < n; i++) x[i] = (float)((int)(rnd_u32() % 254) - 127) + (i % 3 ? 0.5f : 0.0f);
        for (int i = 0; i < n; i += 32) x[i] = 127;
    } else if (kind == 3) { /* zero blocks */
        memset(x, 0, sizeof(float) * 256);
    } else if (kind == 4) { /* equal |max| with both signs */
        for (int b = 0; b < n / 256; b++) {
            x[256 * b + 7] = (b & 1) ? 3.0f : -3.0f;
            x[256 * b + 200] = (b & 1) ? -3.0f : 3.0f;
        }
    }
}

TEST(kern_q8, quantize_matches_ggml) {
    enum { N = 1024 };
    static float x[N];
    static uint8_t want[N * 4], got[N * 4];
    const int vdts[] = {VDT_Q8_0, VDT_Q8_1, VDT_Q8_K, VDT_F16, VDT_BF16};
    const int wtype_of[] = {2, 3, 12, 1, 30}; /* a weight type with that vec_dot_type */
    for (int kind = 0; kind < 5; kind++)
        for (int rep = 0; rep < 4; rep++) {
            fill_quant_rows(x, N, kind);
            for (int v = 0; v < 5; v++) {
                size_t nb = ref_quantize(vdts[v], x, N, want);
                EXPECT_EQ_I(nb, kern_act_row_bytes(wtype_of[v], N));
                for (int isa = 0; isa < n_isas(); isa++) {
                    memset(got, 0xa5, sizeof got);
                    EXPECT_EQ_I(kern_quantize_act_row(isa, wtype_of[v], x, got, N), 0);
                    size_t at = 0;
                    while (at < nb && got[at] == want[at]) at++;
                    EXPECT_MSG(at == nb, "%s vdt %d kind %d: byte %zu of %zu differs (%02x, ggml %02x)",
                               kern_isa_name(isa), vdts[v], kind, at, nb, got[at], want[at]);
                }
            }
        }
}

/* Activation rows whose every 32-block has maximum |x| = 127 and small
 * integers elsewhere: Q8_0/Q8_1 d = 1, Q8_K d = ±1, codes = the integers. */
static void fill_int_rows(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = (float)((int)(rnd_u32() % 41) - 20);
    for (int i = 0; i < n; i += 32) x[i + (int)(rnd_u32() % 32)] = rnd_u32() & 1 ? 127.f : -127.f;
}

TEST(kern_q8, dot_integer_parts_exact) {
    enum { N = 512 };
    static float x[KERN_Q8_NT][N];
    static uint8_t a[KERN_Q8_NT][N * 2];
    const size_t as = sizeof a[0];
    for (int ti = 0; ti < N_WT; ti++) {
        const wtype *T = &g_wt[ti];
        size_t rb;
        uint8_t *w = rnd_rows(T, 8, N, 1, &rb);
        for (int r = 0; r < 8; r++) {
            for (int t = 0; t < KERN_Q8_NT; t++) {
                fill_int_rows(x[t], N);
                kern_quantize_act_row(KERN_ISA_SCALAR, T->type, x[t], a[t], N);
            }
            const uint8_t *row = w + rb * (size_t)r;
            const kern_type_ops *ops = kern_type_ops_get(T->type);
            kern_block_q8x4 a4[N / 32];
            const void *rows4[4] = {a[0], a[1], a[2], a[3]};
            if (ops->gemm4[0]) kern_q8x4_pack(T->vdt, rows4, N, a4);
            for (int isa = 0; isa < n_isas() && ops->gemm4[0]; isa++) {
                float s[4];
                ops->gemm4[isa](row, a4, N, s);
                for (int t = 0; t < 4; t++) {
                    double mag, want = ref_dot(T, row, a[t], N, &mag);
                    EXPECT_MSG(s[t] == (float)want, "%s %s gemm4 row %d t %d: %.9g, exact %.9g",
                               kern_isa_name(isa), T->name, r, t, s[t], want);
                }
            }
            for (int isa = 0; isa < n_isas(); isa++)
                for (int nt = 1; nt <= KERN_Q8_NT; nt++) {
                    float s[KERN_Q8_NT];
                    EXPECT_EQ_I(kern_dot_q_rows(isa, T->type, row, a, as, nt, N, s), 0);
                    for (int t = 0; t < nt; t++) {
                        double mag, want = ref_dot(T, row, a[t], N, &mag);
                        EXPECT_MSG(s[t] == (float)want, "%s %s row %d nt %d t %d: %.9g, exact %.9g",
                                   kern_isa_name(isa), T->name, r, nt, t, s[t], want);
                    }
                }
        }
        free(w);
    }
}

TEST(kern_q8, dot_random) {
    enum { NMAX = 4096 };
    static float x[KERN_Q8_NT][NMAX];
    static uint8_t a[KERN_Q8_NT][NMAX * 2];
    const size_t as = sizeof a[0];
    const int sizes[] = {256, 1024, 4096};
    for (int ti = 0; ti < N_WT; ti++) {
        const wtype *T = &g_wt[ti];
        double worst_ref = 0, worst_avx = 0;
        for (int si = 0; si < 3; si++) {
            const int n = sizes[si];
            size_t rb;
            uint8_t *w = rnd_rows(T, 4, n, 0, &rb);
            for (int t = 0; t < KERN_Q8_NT; t++) {
                for (int i = 0; i < n; i++) x[t][i] = rnd_f(-1, 1) * (t + 1);
                kern_quantize_act_row(KERN_ISA_SCALAR, T->type, x[t], a[t], n);
            }
            for (int r = 0; r < 4; r++) {
                const uint8_t *row = w + rb * (size_t)r;
                float sc[KERN_Q8_NT], av[KERN_Q8_NT], one;
                kern_dot_q_rows(KERN_ISA_SCALAR, T->type, row, a, as, KERN_Q8_NT, n, sc);
                for (int t = 0; t < KERN_Q8_NT; t++) {
                    double mag, want = ref_dot(T, row, a[t], n, &mag);
                    const double e = fabs(sc[t] - want) / mag;
                    if (e > worst_ref) worst_ref = e;
                    EXPECT_MSG(e <= 2e-6, "%s scalar n=%d: %.9g, reference %.9g (%.3g of Σ|w·a|)",
                               T->name, n, sc[t], want, e);
                    kern_dot_q_rows(KERN_ISA_SCALAR, T->type, row, a[t], 0, 1, n, &one);
                    EXPECT_MSG(!memcmp(&one, &sc[t], 4), "%s scalar nt=1 vs nt=4 t=%d", T->name, t);
                }
                if (n_isas() < 2) continue;
                kern_dot_q_rows(KERN_ISA_AVX2, T->type, row, a, as, KERN_Q8_NT, n, av);
                for (int t = 0; t < KERN_Q8_NT; t++) {
                    double mag;
                    ref_dot(T, row, a[t], n, &mag);
                    const double e = fabs((double)av[t] - sc[t]) / mag;
                    if (e > worst_avx) worst_avx = e;
                    EXPECT_MSG(e <= 2e-6, "%s avx2 n=%d: %.9g, scalar %.9g (%.3g of Σ|w·a|)", T->name,
                               n, av[t], sc[t], e);
                    for (int nt = 1; t + nt <= KERN_Q8_NT; nt++) { /* token t first of nt */
                        float part[KERN_Q8_NT];
                        kern_dot_q_rows(KERN_ISA_AVX2, T->type, row, a[t], as, nt, n, part);
                        EXPECT_MSG(!memcmp(&part[0], &av[t], 4), "%s avx2 t=%d nt=%d: %.9g vs %.9g",
                                   T->name, t, nt, part[0], av[t]);
                    }
                }
            }
            free(w);
        }
        printf("    %-8s scalar vs double: %.2g, avx2 vs scalar: %.2g of Σ|w·a|\n", T->name,
               worst_ref, worst_avx);
    }
}

/* The 4-token leaves of the 32-element types on interleaved blocks
 * (kern_block_q8x4): scalar = the scalar dot bit for bit, AVX2 within
 * 2e-6·Σ|w·a|; a NULL row is a zero token. */
TEST(kern_q8, gemm4) {
    enum { N = 2048 };
    static float x[4][N];
    static uint8_t a[4][N * 2];
    static kern_block_q8x4 a4[N / 32];
    for (int ti = 0; ti < N_WT; ti++) {
        const wtype *T = &g_wt[ti];
        const kern_type_ops *ops = kern_type_ops_get(T->type);
        EXPECT_EQ_I(!!ops->gemm4[0], T->blck == 32);
        if (!ops->gemm4[0]) continue;
        size_t rb;
        uint8_t *w = rnd_rows(T, 4, N, 0, &rb);
        for (int t = 0; t < 4; t++) {
            for (int i = 0; i < N; i++) x[t][i] = rnd_f(-1, 1) * (t + 1);
            kern_quantize_act_row(KERN_ISA_SCALAR, T->type, x[t], a[t], N);
        }
        double worst = 0;
        for (int z = 0; z < 2; z++) { /* z: last token absent */
            const void *rows[4] = {a[0], a[1], a[2], z ? NULL : a[3]};
            kern_q8x4_pack(T->vdt, rows, N, a4);
            for (int r = 0; r < 4; r++) {
                const uint8_t *row = w + rb * (size_t)r;
                float sc[4], av[4];
                ops->gemm4[KERN_ISA_SCALAR](row, a4, N, sc);
                for (int t = 0; t < 4; t++) {
                    float one = 0;
                    if (rows[t]) kern_dot_q_rows(KERN_ISA_SCALAR, T->type, row, a[t], 0, 1, N, &one);
                    EXPECT_MSG(!memcmp(&one, &sc[t], 4), "%s scalar gemm4 t=%d: %.9g, dot %.9g",
                               T->name, t, sc[t], one);
                }
                if (n_isas() < 2) continue;
                ops->gemm4[KERN_ISA_AVX2](row, a4, N, av);
                for (int t = 0; t < 4; t++) {
                    double mag = 1e-30;
                    if (rows[t]) ref_dot(T, row, a[t], N, &mag);
                    const double e = fabs((double)av[t] - sc[t]) / mag;
                    if (e > worst) worst = e;
                    EXPECT_MSG(e <= 2e-6 || (!rows[t] && av[t] == 0), "%s avx2 gemm4 t=%d: %.9g, scalar %.9g",
                               T->name, t, av[t], sc[t]);
                }
            }
        }
        if (n_isas() > 1) printf("    %-8s avx2 gemm4 vs scalar: %.2g of Σ|w·a|\n", T->name, worst);
        free(w);
    }
}

/* ---- matmul ------------------------------------------------------------------------ */

typedef struct {
    int type;
    const char *name;
} mm_type;

/* random weights of any supported type: quantized types as above, F16/BF16 from floats */
static uint8_t *mm_weights(int type, int n_out, int n_in, size_t *rb) {
    for (int i = 0; i < N_WT; i++)
        if (g_wt[i].type == type) return rnd_rows(&g_wt[i], n_out, n_in, 0, rb);
    *rb = (size_t)n_in * 2;
    uint16_t *w = malloc(*rb * (size_t)n_out);
    for (long i = 0; i < (long)n_in * n_out; i++)
        w[i] = type == 1 ? kern_f32_to_f16(rnd_f(-1, 1)) : ref_to_bf16(rnd_f(-1, 1));
    return (uint8_t *)w;
}

/* y_q8 vs quantize + dot per row (tight), vs pool/threads (bits), vs f32 mode */
static double mm_check(int isa, pool *P, int type, int n_out, int n_in, int n_tok, float *y_ref_pool) {
    size_t rb;
    uint8_t *w = mm_weights(type, n_out, n_in, &rb);
    const int vdt = kern_vec_dot_type(type), is_float = vdt == VDT_F16 || vdt == VDT_BF16;
    const size_t arb = kern_act_row_bytes(type, n_in);
    float *x = malloc(sizeof(float) * (size_t)n_in * n_tok);
    float *yq = malloc(sizeof(float) * (size_t)n_out * n_tok);
    float *yf = malloc(sizeof(float) * (size_t)n_out * n_tok);
    uint8_t *a = malloc(arb * (size_t)n_tok);
    double *af = malloc(sizeof(double) * (size_t)n_in * n_tok); /* dequantized activations */
    float *wf = malloc(sizeof(float) * (size_t)n_in);
    for (long i = 0; i < (long)n_in * n_tok; i++) x[i] = rnd_f(-1, 1);
    cf_env E = {.K = kern_table(isa), .pool = P, .n_ctx = 16, .act_quant = 1};
    E.K->matmul(&E, yq, x, w, type, n_out, n_in, n_tok);
    E.act_quant = 0;
    E.K->matmul(&E, yf, x, w, type, n_out, n_in, n_tok);
    for (int t = 0; t < n_tok; t++) {
        uint8_t *at = a + arb * (size_t)t;
        double *aft = af + (size_t)n_in * t;
        kern_quantize_act_row(isa, type, x + (size_t)t * n_in, at, n_in);
        if (is_float)
            for (int i = 0; i < n_in; i++) {
                uint16_t h;
                memcpy(&h, at + 2 * i, 2);
                uint32_t u = (uint32_t)h << 16;
                float f;
                memcpy(&f, &u, 4);
                aft[i] = vdt == VDT_F16 ? kern_f16_to_f32(h) : f;
            }
        else
            act_dequant(vdt, at, n_in, aft);
    }
    int bad = 0;
    double num = 0, den = 0;
    for (int r = 0; r < n_out; r++) {
        const uint8_t *row = w + rb * (size_t)r;
        kern_dequant_row(type, row, wf, n_in);
        for (int t = 0; t < n_tok; t++) {
            const double *aft = af + (size_t)n_in * t;
            double want = 0, mag = 0;
            for (int i = 0; i < n_in; i++) want += wf[i] * aft[i], mag += fabs(wf[i] * aft[i]);
            float s;
            if (!is_float) { /* the integer dot itself (ggml's m·s for Q8_1) */
                kern_dot_q_rows(isa, type, row, a + arb * (size_t)t, 0, 1, n_in, &s);
                want = s;
            }
            const float got = yq[(size_t)t * n_out + r];
            if (!(fabs(got - want) <= 2e-6 * mag) && bad++ < 3)
                test_fail(__FILE__, __LINE__, "%s type %d q8 matmul %dx%d T=%d: y[%d][%d] = %.9g, dot %.9g",
                          kern_isa_name(isa), type, n_out, n_in, n_tok, t, r, got, want);
            const double f = yf[(size_t)t * n_out + r];
            num += (got - f) * (got - f), den += f * f;
        }
    }
    if (y_ref_pool) /* same call through the other thread count: same bits */
        EXPECT_MSG(!memcmp(y_ref_pool, yq, sizeof(float) * (size_t)n_out * n_tok),
                   "%s type %d T=%d: pool and single-thread results differ", kern_isa_name(isa),
                   type, n_tok);
    free(w), free(x), free(yf), free(a), free(af), free(wf), free(yq);
    return sqrt(num / den);
}

TEST(kern_q8, matmul) {
    pool *P2 = NULL;
    EXPECT_EQ_I(pool_new(2, &P2), 0);
    EXPECT_EQ_I(pool_reserve(P2, kern_scratch_bytes_act(16, 17, 1280)), 0);
    const int toks[] = {1, 3, 17};
    int types[N_WT + 2];
    for (int i = 0; i < N_WT; i++) types[i] = g_wt[i].type;
    types[N_WT] = 1, types[N_WT + 1] = 30;
    for (int ti = 0; ti < N_WT + 2; ti++) {
        double worst = 0;
        for (int isa = 0; isa < n_isas(); isa++)
            for (int k = 0; k < 3; k++) {
                /* 37 rows: partial tiles; 1280 inputs: an odd number of 256-element blocks */
                uint64_t seed = g_rng;
                size_t ny = (size_t)37 * toks[k];
                float *y1 = malloc(sizeof(float) * ny);
                double e = mm_check(isa, NULL, types[ti], 37, 1280, toks[k], NULL);
                /* again with the same data through the pool: bit-identical */
                g_rng = seed;
                {
                    size_t rb;
                    uint8_t *w = mm_weights(types[ti], 37, 1280, &rb);
                    float *x = malloc(sizeof(float) * 1280 * toks[k]);
                    for (long i = 0; i < 1280L * toks[k]; i++) x[i] = rnd_f(-1, 1);
                    cf_env E = {.K = kern_table(isa), .n_ctx = 16, .act_quant = 1};
                    E.K->matmul(&E, y1, x, w, types[ti], 37, 1280, toks[k]);
                    free(w), free(x);
                }
                g_rng = seed;
                double e2 = mm_check(isa, P2, types[ti], 37, 1280, toks[k], y1);
                free(y1);
                if (e > worst) worst = e;
                if (e2 > worst) worst = e2;
            }
        /* measured (random weights, x ~ U(-1,1)): Q8_0/Q8_1 activations 4.1e-3..4.7e-3,
         * Q8_K 4.2e-3..7.8e-3, F16 2.3e-4, BF16 1.6e-3 */
        const double bound = types[ti] == 1 ? 1e-3 : 2e-2;
        EXPECT_MSG(worst <= bound, "type %d: q8 vs f32 mode %.3g > %.3g", types[ti], worst, bound);
        printf("    type %-3d q8 vs f32 mode: ‖Δy‖/‖y‖ = %.2g\n", types[ti], worst);
    }
    pool_free(P2);
}

/* Rows too wide for the 128 KiB stack buffer in one piece (no pool): the
 * driver converts the tokens in chunks; results equal the pool path's. */
TEST(kern_q8, matmul_chunked_without_pool) {
    const int n_out = 24, n_in = 4096, n_tok = 40, types[] = {1, 8, 12};
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(1, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes_act(16, n_tok, n_in)), 0);
    for (int k = 0; k < 3; k++) {
        size_t rb;
        uint8_t *w = mm_weights(types[k], n_out, n_in, &rb);
        float *x = malloc(sizeof(float) * (size_t)n_in * n_tok);
        float *y0 = malloc(sizeof(float) * (size_t)n_out * n_tok), *y1 = malloc(sizeof(float) * (size_t)n_out * n_tok);
        for (long i = 0; i < (long)n_in * n_tok; i++) x[i] = rnd_f(-1, 1);
        const int isa = kern_best_isa();
        cf_env E = {.K = kern_table(isa), .n_ctx = 16, .act_quant = 1};
        E.K->matmul(&E, y0, x, w, types[k], n_out, n_in, n_tok);
        E.pool = P;
        E.K->matmul(&E, y1, x, w, types[k], n_out, n_in, n_tok);
        /* chunks of 8 (F16, rounded floats) or 30 tokens (Q8_0, Q8_K) change no
         * token's arithmetic: none of them is a 1-token mat-vec */
        EXPECT_MSG(!memcmp(y0, y1, sizeof(float) * (size_t)n_out * n_tok),
                   "type %d: chunked and pool results differ", types[k]);
        free(w), free(x), free(y0), free(y1);
    }
    pool_free(P);
}
