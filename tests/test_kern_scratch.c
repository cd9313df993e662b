/*
 * test_kern_scratch.c — the kernels' fallbacks for a thread pool whose
 * scratch is too small (kern.h "Scratch").  Release builds then run on stack
 * buffers (matmul tiles, attention scores) and convert act_quant activations
 * in chunks of tokens; test builds abort there instead, so that a missing
 * pool_reserve is caught, and this test lifts that for itself
 * (kern_test_allow_small_scratch) to run the fallbacks: every result must be
 * bit-identical to the same call on a pool sized with kern_scratch_bytes_act
 * (act_quant: within 1e-6 of Σ|w·x|, since a chunk of one token takes the
 * one-token dot instead of the 4-token group kernel: the same integer
 * products summed in another order), and kern_test_scratch_fallbacks must
 * show each fallback was taken.
 *
 * Pools: "none" (no pool_reserve), "tiny" (64 bytes: every fallback),
 * "short" (tiles and scores fit, converted activations of a few of the 17
 * tokens: chunking).  Kernels: f32-activation matmul (F32, Q4_0 tiles), act_quant
 * matmul (Q4_0 and Q8_0 via Q8_0 4-token groups, Q4_1 via Q8_1, Q4_K via
 * Q8_K, Q4_0_R8 interleaved), attention (one-head and four-head paths).
 */
#include <math.h>
#include <stdlib.h>

#include "base/pool.h"
#include "formats/gguf.h" /* GGML_TYPE_Q4_K */
#include "kernels/kern.h"
#include "kernels/quant.h"
#include "test.h"

enum { N_CTX = 40, POS = 20, N_TOK = 17, N_IN = 512, N_OUT = 32 };

static uint64_t g_rng = 0x3c6ef372fe94f82bULL;
static float rnd_f(float lo, float hi) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 40) & 0xffffff) / 16777216.0f;
}

typedef struct {
    const char *name;
    pool *p;
} pool_case;

/* y = matmul on pool p; returns the fallbacks taken. */
static long run_matmul(pool *p, int act_quant, float *y, const float *x, const void *w, int type) {
    cf_env E = {.pool = p, .n_ctx = N_CTX, .act_quant = act_quant};
    long before = kern_test_scratch_fallbacks;
    kern_table(kern_best_isa())->matmul(&E, y, x, w, type, N_OUT, N_IN, N_TOK);
    return kern_test_scratch_fallbacks - before;
}

TEST(kern_scratch, fallbacks_match_reserved_pool) {
    pool *ok, *none, *tiny, *shrt;
    EXPECT_EQ_I(pool_new(2, &ok), 0);
    EXPECT_EQ_I(pool_new(2, &none), 0);
    EXPECT_EQ_I(pool_new(2, &tiny), 0);
    EXPECT_EQ_I(pool_new(2, &shrt), 0);
    if (test_failed()) return;
    EXPECT_EQ_I(pool_reserve(ok, kern_scratch_bytes_act(N_CTX, N_TOK, N_IN)), 0);
    EXPECT_EQ_I(pool_reserve(tiny, 64), 0);
    /* tiles and scores fit; after them (64-byte aligned) 4 KiB: converted rows of ~7 tokens, one R8 quad */
    EXPECT_EQ_I(pool_reserve(shrt, kern_scratch_bytes(N_CTX) + 64 + 2 * N_IN * sizeof(float)), 0);
    const pool_case variants[] = {{"none", none}, {"tiny", tiny}, {"short", shrt}};

    float *x = malloc(sizeof(float) * N_TOK * N_IN), *wf = malloc(sizeof(float) * N_OUT * N_IN);
    float *y0 = malloc(sizeof(float) * N_TOK * N_OUT), *y1 = malloc(sizeof(float) * N_TOK * N_OUT);
    for (int i = 0; i < N_TOK * N_IN; i++) x[i] = rnd_f(-2, 2);
    for (int i = 0; i < N_OUT * N_IN; i++) wf[i] = rnd_f(-1, 1);
    double *sum_abs = malloc(sizeof(double) * N_TOK * N_OUT); /* Σ|w·x| per output: the act_quant tolerance unit */
    for (int t = 0; t < N_TOK; t++)
        for (int r = 0; r < N_OUT; r++) {
            double a = 0;
            for (int k = 0; k < N_IN; k++) a += fabs((double)wf[(size_t)r * N_IN + k] * x[(size_t)t * N_IN + k]);
            sum_abs[t * N_OUT + r] = a;
        }
    static const struct { int type, act_quant, repack; const char *what; } mm[] = {
        {CF_F32, 0, 0, "F32 (f32 tiles)"},           {CF_Q4_0, 0, 0, "Q4_0 (dequantized tiles)"},
        {CF_Q4_0, 1, 0, "Q4_0 x Q8_0 groups"},       {CF_Q8_0, 1, 0, "Q8_0 x Q8_0 groups"},
        {CF_Q4_1, 1, 0, "Q4_1 x Q8_1"},              {GGML_TYPE_Q4_K, 1, 0, "Q4_K x Q8_K"},
        {CF_Q4_0_R8, 1, 1, "Q4_0_R8 x Q8_0 quads"},  {CF_Q4_0_R8, 0, 1, "Q4_0_R8 (f32 tiles)"},
    };
    kern_test_allow_small_scratch = 1;
    long taken[3] = {0};
    for (size_t c = 0; c < sizeof mm / sizeof mm[0]; c++) {
        const int src = mm[c].repack ? CF_Q4_0 : mm[c].type;
        const size_t rb = kern_row_bytes(src, N_IN);
        uint8_t *w = malloc((size_t)N_OUT * rb), *wr = NULL;
        for (int r = 0; r < N_OUT; r++) quant_row(src, wf + (size_t)r * N_IN, w + (size_t)r * rb, N_IN);
        if (mm[c].repack) {
            char err[160] = "";
            wr = malloc(kern_repack_bytes(mm[c].type, N_OUT, N_IN));
            EXPECT_MSG(kern_repack(mm[c].type, src, w, N_OUT, N_IN, wr, err, sizeof err) == 0, "%s", err);
        }
        const void *wt = wr ? wr : w;
        EXPECT_EQ_I(run_matmul(ok, mm[c].act_quant, y0, x, wt, mm[c].type), 0);
        for (size_t v = 0; v < 3; v++) {
            memset(y1, 0, sizeof(float) * N_TOK * N_OUT);
            long n = run_matmul(variants[v].p, mm[c].act_quant, y1, x, wt, mm[c].type);
            taken[v] += n;
            if (!mm[c].act_quant) {
                EXPECT_MSG(!memcmp(y0, y1, sizeof(float) * N_TOK * N_OUT), "%s, pool %s: differs from the reserved pool",
                           mm[c].what, variants[v].name);
            } else {
                double worst = 0; /* in units of Σ|w·x| of the output */
                for (int i = 0; i < N_TOK * N_OUT; i++) {
                    const double e = fabs((double)y0[i] - y1[i]) / sum_abs[i];
                    if (!(e <= worst)) worst = e;
                }
                EXPECT_MSG(worst <= 1e-6, "%s, pool %s: differs from the reserved pool by %.3g of sum |w x|",
                           mm[c].what, variants[v].name, worst);
            }
            /* the short pool holds tiles: only act_quant chunks there */
            if (variants[v].p != shrt || mm[c].act_quant)
                EXPECT_MSG(n > 0, "%s, pool %s: no fallback taken", mm[c].what, variants[v].name);
        }
        free(w);
        free(wr);
    }

    /* attention: hd 64 x 4 heads per kv head takes the four-head path (AVX-512
     * VNNI CPUs), hd 72 the one-head path */
    static const struct { int nh, nkv, hd; } att[] = {{8, 2, 64}, {8, 2, 72}};
    for (size_t c = 0; c < sizeof att / sizeof att[0]; c++) {
        const int nh = att[c].nh, nkv = att[c].nkv, hd = att[c].hd, kvd = nkv * hd, nt = 7;
        float *q = malloc(sizeof(float) * nt * nh * hd), *k = malloc(sizeof(float) * nt * kvd);
        float *v = malloc(sizeof(float) * nt * kvd), *o[2] = {malloc(sizeof(float) * nt * nh * hd),
                                                            malloc(sizeof(float) * nt * nh * hd)};
        float *pk = malloc(sizeof(float) * POS * kvd), *pv = malloc(sizeof(float) * POS * kvd);
        for (int i = 0; i < nt * nh * hd; i++) q[i] = rnd_f(-2, 2);
        for (int i = 0; i < nt * kvd; i++) k[i] = rnd_f(-2, 2), v[i] = rnd_f(-1, 1);
        for (int i = 0; i < POS * kvd; i++) pk[i] = rnd_f(-2, 2), pv[i] = rnd_f(-1, 1);
        for (int run = 0; run < 3; run++) { /* run 0: ok vs none, 1: ok vs tiny, 2: ok vs short */
            for (int side = 0; side < 2; side++) {
                float *kc = calloc((size_t)N_CTX * kvd, sizeof(float)), *vc = calloc((size_t)N_CTX * kvd, sizeof(float));
                memcpy(kc, pk, sizeof(float) * POS * kvd);
                memcpy(vc, pv, sizeof(float) * POS * kvd);
                void *kk[1] = {kc}, *vv[1] = {vc};
                cf_env E = {.K = kern_table(kern_best_isa()), .pool = side ? variants[run].p : ok, .n_ctx = N_CTX,
                            .pos = POS, .kv_k = kk, .kv_v = vv};
                long before = kern_test_scratch_fallbacks;
                E.K->attention(&E, o[side], q, k, v, NULL, 0, nh, nkv, hd, hd, 1.0f / sqrtf((float)hd), 0, 0.0f, nt);
                long n = kern_test_scratch_fallbacks - before;
                if (side == 0) EXPECT_EQ_I(n, 0);
                else if (variants[run].p != shrt) {
                    EXPECT_MSG(n > 0, "attention hd %d, pool %s: no fallback taken", hd, variants[run].name);
                    taken[run] += n;
                }
                free(kc), free(vc);
            }
            EXPECT_MSG(!memcmp(o[0], o[1], sizeof(float) * nt * nh * hd), "attention hd %d, pool %s: differs", hd,
                       variants[run].name);
        }
        free(q), free(k), free(v), free(o[0]), free(o[1]), free(pk), free(pv);
    }
    kern_test_allow_small_scratch = 0;
    printf("    fallbacks taken: pool none %ld, tiny %ld, short %ld (thread parts)\n", taken[0], taken[1], taken[2]);
    free(x), free(wf), free(y0), free(y1), free(sum_abs);
    pool_free(ok);
    pool_free(none);
    pool_free(tiny);
    pool_free(shrt);
}
