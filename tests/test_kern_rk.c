/*
 * test_kern_rk.c — row-interleaved K-quant types CF_Q4_K_R8 / CF_Q5_K_R8 /
 * CF_Q6_K_R8 (runtime/kernels/kern_rk*, layout in kern.h).
 *
 * Checks:
 *  - layout: a repacked matrix's bytes sit where kern.h says (d, dmin, the
 *    chunk bytes of qs / ql / qh) and unpacking gives back every native
 *    block byte for byte (lossless);
 *  - dequant(repack(src)) == dequant(src) bit for bit, also through the
 *    tile dequantizer kern.c's matmul uses;
 *  - refused shapes/types: kern_repack_bytes 0, kern_repack -1 with a
 *    message, matmul NaN for n_out % 8, per-row helpers NaN;
 *  - act_quant 1: every impl this CPU runs (scalar, avx2, vnni) gives the
 *    scalar reference's bits for n_tok 1..17, 40; the scalar reference is
 *    within 2e-6·Σ|terms| of a double reference over the same Q8_K
 *    activations, and within twice that of the native type's matmul;
 *  - batch invariance: each token of a 40-token call has the bits of a
 *    1-token call on that token; 1-thread pool, 2-thread pool, no pool:
 *    same bits;
 *  - act_quant 0: the native type's bits (decode and batch);
 *  - expert matmul (kern_moe_matmul) on RK experts: within the native
 *    experts' bound, and (act_quant 1) one token and a 5-token batch give
 *    each token the same bits.
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/kern.h"
#include "kernels/kern_q8.h"
#include "kernels/kern_moe.h"
#include "kernels/kern_r8.h"
#include "kernels/kern_rk.h"
#include "kernels/precision.h"
#include "base/pool.h"
#include "kernels/quant.h"
#include "cinfer.h"
#include "test.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static float rnd_f(float lo, float hi) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 40) & 0xffffff) / 16777216.0f;
}

#define NRK 4
static const int g_rk[NRK] = {CF_Q4_K_R8, CF_Q5_K_R8, CF_Q6_K_R8, CF_IQ4_XS_R8};
static const char *const g_name[NRK] = {"q4_k_r8", "q5_k_r8", "q6_k_r8", "iq4_xs_r8"};

/* n_rows x n_cols random weights quantized to the native type with ggml's
 * reference quantizer; a few rows with an all-zero / a shifted sub-block */
static uint8_t *make_weights(int type, int n_rows, int n_cols) {
    const size_t rb = kern_row_bytes(type, n_cols);
    uint8_t *w = malloc((size_t)n_rows * rb);
    float *f = malloc((size_t)n_cols * sizeof(float));
    for (int r = 0; r < n_rows; r++) {
        const float scale = rnd_f(0.01f, 1.0f), shift = r % 5 == 1 ? rnd_f(-0.5f, 0.5f) : 0;
        for (int k = 0; k < n_cols; k++) f[k] = rnd_f(-1, 1) * scale + shift;
        if (r == 3) memset(f + 32, 0, 64 * sizeof(float));
        EXPECT_EQ_I(quant_row(type, f, w + (size_t)r * rb, n_cols), rb);
    }
    free(f);
    return w;
}

static float *dequant_native(int type, const uint8_t *w, int n_rows, int n_cols) {
    float *f = malloc((size_t)n_rows * n_cols * sizeof(float));
    const size_t rb = kern_row_bytes(type, n_cols);
    for (int r = 0; r < n_rows; r++) kern_dequant_row(type, w + (size_t)r * rb, f + (size_t)r * n_cols, n_cols);
    return f;
}

static uint8_t *repack(int dst, int src_type, const void *src, int n_rows, int n_cols) {
    const size_t n = kern_repack_bytes(dst, n_rows, n_cols);
    EXPECT(n == (size_t)n_rows * kern_row_bytes(dst, n_cols));
    EXPECT(n == (size_t)n_rows * kern_row_bytes(src_type, n_cols));
    uint8_t *out = malloc(n ? n : 1);
    char err[160] = "";
    EXPECT_MSG(kern_repack(dst, src_type, src, n_rows, n_cols, out, err, sizeof err) == 0, "repack: %s", err);
    return out;
}

TEST(kern_rk, type_table) {
    for (int i = 0; i < NRK; i++) {
        EXPECT(kern_type_supported(g_rk[i]) && kern_type_is_rk(g_rk[i]) && !kern_type_is_r8(g_rk[i]));
        EXPECT_EQ_I(kern_type_block(g_rk[i]), 256);
        EXPECT_EQ_I(kern_vec_dot_type(g_rk[i]), KERN_T_Q8_K);
        EXPECT_EQ_I(kern_row_bytes(g_rk[i], 512), kern_row_bytes(kern_rk_native(g_rk[i]), 512));
        /* x86 and aarch64 alike (both have SIMD RK leaves), but for IQ4_XS_R8, which has no NEON leaves */
#if defined(__aarch64__)
        const int want_auto = g_rk[i] == CF_IQ4_XS_R8 ? kern_rk_native(g_rk[i]) : g_rk[i];
#else
        const int want_auto = g_rk[i];
#endif
        EXPECT_EQ_I(prec_weight_type(CINFER_PRECISION_AUTO, "blk.0.ffn_up.weight", kern_rk_native(g_rk[i]), 64, 512),
                    want_auto);
        /* a .giw's RK tensors are consistent with auto everywhere */
        EXPECT_EQ_I(prec_weight_type(CINFER_PRECISION_AUTO, "blk.0.ffn_up.weight", g_rk[i], 64, 512), g_rk[i]);
        /* columns not a multiple of 256, rows not of 8: kept native */
        EXPECT_EQ_I(prec_weight_type(CINFER_PRECISION_AUTO, "x", kern_rk_native(g_rk[i]), 64, 0), kern_rk_native(g_rk[i]));
        EXPECT_EQ_I(prec_weight_type(CINFER_PRECISION_AUTO, "x", kern_rk_native(g_rk[i]), 12, 512),
                    kern_rk_native(g_rk[i]));
        EXPECT_EQ_I(prec_weight_type(CINFER_PRECISION_NATIVE, "x", kern_rk_native(g_rk[i]), 64, 512),
                    kern_rk_native(g_rk[i]));
    }
    EXPECT(!kern_type_is_rk(CF_Q4_0_R8) && !kern_type_is_rk(KERN_T_Q4_K));
}

TEST(kern_rk, layout_and_round_trip) {
    const int R = 16, C = 512;
    for (int ti = 0; ti < NRK; ti++) {
        const int rk = g_rk[ti], nat = kern_rk_native(rk), bb = kern_rk_block_bytes(rk);
        const size_t nbb = (size_t)bb / 8, rb = kern_row_bytes(nat, C);
        uint8_t *w = make_weights(nat, R, C), *p = repack(rk, nat, w, R, C);
        /* spot checks of kern.h's layout: group 1, super-block 1, row 5 */
        const uint8_t *blk = p + (size_t)(1 * 2 + 1) * bb, *nb = w + (size_t)13 * rb + nbb;
        if (rk == CF_IQ4_XS_R8) {
            const kern_block_iq4_xs *q = (const kern_block_iq4_xs *)nb;
            EXPECT(!memcmp(blk + 2 * 5, &q->d, 2) && !memcmp(blk + 16 + 2 * 5, &q->scales_h, 2));
            EXPECT_EQ_I(blk[32 + 8 * 3 + 5], q->scales_l[3]);
            /* sub-block 6, chunk 2: ggml qs[16*6 + 8 ..] */
            EXPECT(!memcmp(blk + 64 + 128 * 6 + 32 * 2 + 4 * 5, q->qs + 104, 4));
        } else if (rk == CF_Q6_K_R8) {
            const kern_block_q6_k *q = (const kern_block_q6_k *)nb;
            EXPECT(!memcmp(blk + 2 * 5, &q->d, 2));
            EXPECT_EQ_I((int8_t)blk[16 + 16 * 3 + 2 * 5 + 1], q->scales[7]);
            EXPECT(!memcmp(blk + 1168 + 256 + 32 * 2 + 4 * 5, q->qh + 32 + 8, 4));
            /* column 64*1 + 4*2 + 1 = 73 (half 0, l = 73): ggml ql[9] high nibble */
            EXPECT_EQ_I(blk[144 + 256 + 32 * 2 + 4 * 5 + 1] & 15, q->ql[9] >> 4);
        } else {
            const kern_block_q4_k *q = (const kern_block_q4_k *)nb;
            EXPECT(!memcmp(blk + 2 * 5, &q->d, 2) && !memcmp(blk + 16 + 2 * 5, &q->dmin, 2));
            const uint8_t *qs = rk == CF_Q5_K_R8 ? ((const kern_block_q5_k *)nb)->qs : q->qs;
            EXPECT(!memcmp(blk + 128 + 256 * 3 + 32 * 6 + 4 * 5, qs + 32 * 3 + 4 * 6, 4));
            if (rk == CF_Q5_K_R8) EXPECT(!memcmp(blk + 1152 + 32 * 7 + 4 * 5, ((const kern_block_q5_k *)nb)->qh + 28, 4));
            EXPECT_EQ_I(blk[32 + 8 * 2 + 5] & 15, q->scales[2] & 15); /* sc_2 low bits */
        }
        /* lossless: every native block back byte for byte */
        uint8_t nat_blk[256];
        int same = 1;
        for (int r = 0; r < R; r++)
            for (int b = 0; b < C / 256; b++) {
                kern_rk_unpack(rk, p + ((size_t)(r / 8) * (C / 256) + b) * bb, r % 8, nat_blk);
                same &= !memcmp(nat_blk, w + (size_t)r * rb + (size_t)b * nbb, nbb);
            }
        EXPECT_MSG(same, "%s: unpack(pack) != native bytes", g_name[ti]);
        /* exact values, whole matrix and tiles */
        float *ref = dequant_native(nat, w, R, C), *got = malloc(sizeof(float) * R * C);
        EXPECT_EQ_I(kern_rk_dequant(rk, p, R, C, got), 0);
        EXPECT_MSG(!memcmp(ref, got, sizeof(float) * R * C), "%s: dequant(repack) != dequant", g_name[ti]);
        for (int isa = 0; isa < KERN_ISA_COUNT; isa++) {
            memset(got, 0, sizeof(float) * R * C);
            kern_rk_deq_rows(isa, rk, p, C, 8, 8, 256, 256, got, C);
            int ok = 1; /* rows 8..15, columns 256..511 at got[r * C + k - 256] */
            for (int r = 0; r < 8; r++) ok &= !memcmp(ref + (size_t)(8 + r) * C + 256, got + (size_t)r * C, sizeof(float) * 256);
            EXPECT_MSG(ok, "%s: deq_rows isa %d", g_name[ti], isa);
        }
        uint8_t *p2 = repack(rk, rk, p, R, C);
        EXPECT(!memcmp(p, p2, kern_repack_bytes(rk, R, C)));
        free(w), free(p), free(p2), free(ref), free(got);
    }
}

TEST(kern_rk, refused) {
    char err[200] = "";
    static uint8_t z[8192];
    static float y[256], x[512];
    EXPECT_EQ_I(kern_repack_bytes(CF_Q4_K_R8, 12, 256), 0);
    EXPECT_EQ_I(kern_repack_bytes(CF_Q4_K_R8, 8, 128), 0);
    EXPECT_EQ_I(kern_repack_bytes(CF_Q6_K_R8, 8, 256), 1680);
    EXPECT_EQ_I(kern_repack_bytes(CF_IQ4_XS_R8, 8, 256), 1088);
    EXPECT_EQ_I(kern_repack(CF_IQ4_XS_R8, KERN_T_Q4_K, z, 8, 256, z + 4096, err, sizeof err), -1);
    EXPECT(strstr(err, "iq4_xs_r8") != NULL);
    EXPECT_EQ_I(kern_repack(CF_Q4_K_R8, KERN_T_Q4_K, z, 8, 128, z + 4096, err, sizeof err), -1);
    EXPECT(strstr(err, "q4_k_r8") != NULL);
    EXPECT_EQ_I(kern_repack(CF_Q4_K_R8, KERN_T_Q6_K, z, 8, 256, z + 4096, err, sizeof err), -1);
    EXPECT(strstr(err, "lossless") != NULL);
    EXPECT_EQ_I(kern_repack(CF_Q6_K_R8, CF_Q4_0, z, 8, 256, z + 4096, NULL, 0), -1);
    EXPECT_EQ_I(kern_rk_dequant(CF_Q4_0_R8, z, 8, 256, (float *)z), -1);
    kern_dequant_row(CF_Q4_K_R8, z, y, 256);
    EXPECT(isnan(y[0]));
    EXPECT(isnan(kern_dot_row(KERN_ISA_SCALAR, CF_Q6_K_R8, z, x, 256)));
    for (int aq = 0; aq < 2; aq++) {
        cf_env E = {.act_quant = aq};
        memset(y, 0, sizeof y);
        kern_table(KERN_ISA_SCALAR)->matmul(&E, y, x, z, CF_Q5_K_R8, 12, 256, 1);
        EXPECT(isnan(y[0]) && isnan(y[11]));
    }
}

/* get_rows of a repacked (tied) embedding table: row r out of group r/8,
 * the native dequantizer's values bit for bit, on every ISA; ids in any order */
TEST(kern_rk, get_rows_equal_native) {
    const int n_rows = 24, n_cols = 512, ids[] = {0, 7, 8, 23, 3, 3, 16, 15};
    const int n_ids = (int)(sizeof ids / sizeof ids[0]);
    float *y = malloc(sizeof(float) * (size_t)n_ids * n_cols);
    for (int i = 0; i < NRK; i++) {
        const int nat = kern_rk_native(g_rk[i]);
        uint8_t *w = make_weights(nat, n_rows, n_cols), *p = repack(g_rk[i], nat, w, n_rows, n_cols);
        float *ref = dequant_native(nat, w, n_rows, n_cols);
        for (int isa = 0; isa < KERN_ISA_COUNT; isa++) {
            if (!kern_isa_available(isa)) continue;
            kern_table(isa)->get_rows(NULL, y, p, g_rk[i], n_cols, ids, n_ids);
            for (int t = 0; t < n_ids; t++)
                EXPECT_MSG(!memcmp(y + (size_t)t * n_cols, ref + (size_t)ids[t] * n_cols, sizeof(float) * n_cols),
                           "%s isa %d: row %d differs from the native dequantizer's", g_name[i], isa, ids[t]);
        }
        free(w), free(p), free(ref);
    }
    free(y);
}

/* ---- matmul -------------------------------------------------------------------------- */

/* double reference over the Q8_K activations, bound 2e-6·Σ|terms| */
static void reference(const float *wf, const float *x, int n_out, int n_in, int n_tok, double *ref, double *tol) {
    kern_block_q8_k *a = malloc(sizeof(kern_block_q8_k) * (size_t)(n_in / 256));
    for (int t = 0; t < n_tok; t++) {
        kern_sc_quantize_q8_k(x + (size_t)t * n_in, a, n_in);
        for (int r = 0; r < n_out; r++) {
            double s = 0, m = 0;
            for (int k = 0; k < n_in; k++) {
                const double v = (double)wf[(size_t)r * n_in + k] * a[k / 256].qs[k % 256] * a[k / 256].d;
                s += v;
                m += fabs(v);
            }
            ref[(size_t)t * n_out + r] = s;
            tol[(size_t)t * n_out + r] = 2e-6 * m + 1e-30;
        }
    }
    free(a);
}

static int check_close(const float *y, const double *ref, const double *tol, long n, const char *what) {
    double worst = 0;
    long bad = -1;
    for (long i = 0; i < n; i++) {
        const double e = fabs((double)y[i] - ref[i]) / tol[i];
        if (!(e <= worst)) worst = e, bad = i;
    }
    EXPECT_MSG(worst <= 1.0, "%s: element %ld: %.9g vs %.9g (err %.3g x tol)", what, bad, bad >= 0 ? y[bad] : 0.0,
               bad >= 0 ? ref[bad] : 0.0, worst);
    return worst <= 1.0;
}

/* n_out 24 and 40: an odd number of row groups (the VNNI leaves take two
 * groups a call and one for the last), split over 2 threads on pairs */
static void matmul_case(int n_out) {
    const int n_in = 768, max_tok = 40;
    pool *P2 = NULL, *P1 = NULL;
    EXPECT_EQ_I(pool_new(2, &P2), 0);
    EXPECT_EQ_I(pool_new(1, &P1), 0);
    EXPECT_EQ_I(pool_reserve(P2, kern_scratch_bytes_act(16, max_tok, n_in)), 0);
    EXPECT_EQ_I(pool_reserve(P1, kern_scratch_bytes_act(16, max_tok, n_in)), 0);
    float *x = malloc(sizeof(float) * max_tok * n_in);
    for (int i = 0; i < max_tok * n_in; i++) x[i] = rnd_f(-3, 3) * (i % 97 == 0 ? 10.0f : 1.0f);
    const size_t ny = sizeof(float) * max_tok * n_out;
    float *y = malloc(ny), *ys = malloc(ny), *y2 = malloc(ny);
    double *ref = malloc(sizeof(double) * max_tok * n_out), *tol = malloc(sizeof(double) * max_tok * n_out);
    for (int ti = 0; ti < NRK; ti++) {
        const int rk = g_rk[ti], nat = kern_rk_native(rk);
        uint8_t *w = make_weights(nat, n_out, n_in), *p = repack(rk, nat, w, n_out, n_in);
        float *wf = dequant_native(nat, w, n_out, n_in);
        reference(wf, x, n_out, n_in, max_tok, ref, tol);
        char what[96];
        /* the scalar reference against the double one and the native type */
        cf_env E = {.pool = P2, .n_ctx = 16, .act_quant = 1};
        kern_rk_matmul_impl(KERN_R8_SCALAR, &E, ys, x, p, rk, n_out, n_in, max_tok);
        snprintf(what, sizeof what, "%s scalar vs double", g_name[ti]);
        check_close(ys, ref, tol, (long)max_tok * n_out, what);
        kern_table(kern_best_isa())->matmul(&E, y2, x, w, nat, n_out, n_in, max_tok);
        for (long i = 0; i < (long)max_tok * n_out; i++) ref[i] = y2[i], tol[i] *= 2;
        snprintf(what, sizeof what, "%s vs native act_quant matmul", g_name[ti]);
        check_close(ys, ref, tol, (long)max_tok * n_out, what);
        for (int impl = 0; impl < KERN_R8_IMPL_COUNT; impl++) {
            if (!kern_r8_impl_available(impl)) {
                if (impl == KERN_R8_VNNI) test_not_run("AVX-512 VNNI RK kernels (kern_rk_vnni.c): this CPU lacks them");
                continue;
            }
            /* every token count 1..17 and 40 (several 8-token leaves and a tail) */
            for (int nt = 1; nt <= max_tok; nt = nt == 17 ? max_tok : nt + 1) {
                E.pool = P2;
                kern_rk_matmul_impl(impl, &E, y, x, p, rk, n_out, n_in, nt);
                EXPECT_MSG(!memcmp(y, ys, sizeof(float) * nt * n_out), "%s %s n_tok %d: not the scalar bits",
                           g_name[ti], kern_r8_impl_name(impl), nt);
            }
            /* decode = batch, and thread counts */
            int same = 1;
            for (int t = 0; t < max_tok; t++) {
                E.pool = t % 2 ? P1 : NULL;
                kern_rk_matmul_impl(impl, &E, y2, x + (size_t)t * n_in, p, rk, n_out, n_in, 1);
                same &= !memcmp(y2, ys + (size_t)t * n_out, sizeof(float) * n_out);
            }
            EXPECT_MSG(same, "%s %s: a 1-token call differs from the batch", g_name[ti], kern_r8_impl_name(impl));
            E.pool = P1;
            kern_rk_matmul_impl(impl, &E, y2, x, p, rk, n_out, n_in, max_tok);
            EXPECT_MSG(!memcmp(y2, ys, ny), "%s %s: 1 vs 2 threads", g_name[ti], kern_r8_impl_name(impl));
            E.pool = NULL;
            kern_rk_matmul_impl(impl, &E, y2, x, p, rk, n_out, n_in, max_tok);
            EXPECT_MSG(!memcmp(y2, ys, ny), "%s %s: no pool", g_name[ti], kern_r8_impl_name(impl));
        }
        /* f32 activations: the native type's bits, decode and batch */
        for (int isa = 0; isa < KERN_ISA_COUNT; isa++) {
            if (!kern_isa_available(isa)) continue;
            cf_env F = {.pool = P2, .n_ctx = 16, .act_quant = 0};
            for (int nt = 1; nt <= 9; nt += 8) {
                kern_table(isa)->matmul(&F, y, x, p, rk, n_out, n_in, nt);
                kern_table(isa)->matmul(&F, y2, x, w, nat, n_out, n_in, nt);
                EXPECT_MSG(!memcmp(y, y2, sizeof(float) * nt * n_out), "%s act_quant 0 isa %d n_tok %d: not the native bits",
                           g_name[ti], isa, nt);
            }
        }
        free(w), free(p), free(wf);
    }
    free(x), free(y), free(ys), free(y2), free(ref), free(tol);
    pool_free(P1);
    pool_free(P2);
}

TEST(kern_rk, matmul) {
    matmul_case(24);
    matmul_case(40);
}

/* Every leaf of every impl this CPU runs against the scalar leaf on random
 * bytes (any code, scale and min bit pattern, not only what a quantizer
 * writes; finite f16 d/dmin) and random Q8_K activations in the quantizer's
 * range -127..127 (kern_q8.c: never -128; the AVX2 IQ4_XS sign trick relies
 * on it), extremes included, with consistent bsums: same bits, for nb 1 and 3 and
 * every token count a call takes (the one-token leaves included). */
TEST(kern_rk, leaves_random_bytes) {
    enum { NB_MAX = 3, NG = 2 };
    kern_block_q8_k *a = malloc(sizeof(kern_block_q8_k) * NB_MAX * KERN_RK_NT);
    float ys[KERN_RK_NT * 16], y[KERN_RK_NT * 16];
    for (int ti = 0; ti < NRK; ti++) {
        const int rk = g_rk[ti], bb = kern_rk_block_bytes(rk);
        for (int nb = 1; nb <= NB_MAX; nb += 2) {
            uint8_t *w = malloc((size_t)NG * nb * bb);
            for (int i = 0; i < NG * nb * bb; i++) w[i] = (uint8_t)(rnd_f(0, 256));
            for (int g = 0; g < NG * nb; g++) /* d (and Q4_K/Q5_K/IQ4_XS: dmin / scales_h stay random) */
                for (int r = 0; r < 8; r++) {
                    const uint16_t h = (uint16_t)(0x2000 + (int)rnd_f(0, 0x1c00)); /* finite, about 2^-7..1 */
                    memcpy(w + (size_t)g * bb + 2 * r, &h, 2);
                    if (rk == CF_Q4_K_R8 || rk == CF_Q5_K_R8) memcpy(w + (size_t)g * bb + 16 + 2 * r, &h, 2);
                }
            for (int t = 0; t < nb * KERN_RK_NT; t++) {
                kern_block_q8_k *ab = a + t;
                ab->d = rnd_f(0.001f, 0.1f);
                for (int k = 0; k < KERN_QK_K; k++) {
                    const float u = rnd_f(0, 1);
                    ab->qs[k] = (int8_t)(u < 0.1f ? -127 : u < 0.2f ? 127 : (int)rnd_f(-127, 128));
                }
                for (int s = 0; s < 16; s++) {
                    int sum = 0;
                    for (int k = 0; k < 16; k++) sum += ab->qs[16 * s + k];
                    ab->bsums[s] = (int16_t)sum;
                }
            }
            const kern_rk_gemm_fn ref = kern_rk_scalar_leaves()->gemm[ti];
            for (int impl = 1; impl < KERN_R8_IMPL_COUNT; impl++) {
                if (!kern_r8_impl_available(impl)) continue;
                const kern_rk_leaves *lv = kern_rk_leaves_for(impl);
                for (int two = 0; two < 2; two++) {
                    const kern_rk_gemm_fn fn = two ? lv->gemm2[ti] : lv->gemm[ti];
                    if (!fn) continue;
                    for (int nt = 1; nt <= KERN_RK_NT; nt++) {
                        /* token t's blocks at a + t * nb; y[t * 16 + r] */
                        for (int g = 0; g <= two; g++)
                            ref(w + (size_t)g * nb * bb, a, (size_t)nb, nb, nt, ys + 8 * g, 16);
                        memset(y, 0xff, sizeof y);
                        fn(w, a, (size_t)nb, nb, nt, y, 16);
                        int same = 1;
                        for (int t = 0; t < nt; t++) same &= !memcmp(y + 16 * t, ys + 16 * t, sizeof(float) * 8 * (1 + two));
                        EXPECT_MSG(same, "%s %s %s nb %d n_tok %d: not the scalar leaf's bits on random bytes", g_name[ti],
                                   kern_r8_impl_name(impl), two ? "gemm2" : "gemm", nb, nt);
                    }
                }
            }
            free(w);
        }
    }
    free(a);
}

TEST(kern_rk, expert_matmul) {
    const int n_out = 16, n_in = 512, n_expert = 3, k = 2, nt = 5;
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes_act(16, nt * k, n_in)), 0);
    float *x = malloc(sizeof(float) * nt * n_in), route[5][4];
    for (int i = 0; i < nt * n_in; i++) x[i] = rnd_f(-2, 2);
    for (int t = 0; t < nt; t++) {
        const int32_t ids[2] = {t % n_expert, (t + 2) % n_expert};
        route[t][0] = 0.75f, route[t][1] = 0.25f;
        memcpy(&route[t][2], ids, sizeof ids);
    }
    const long sf = kern_moe_scratch_floats(nt, n_in, n_out, k);
    float *scratch = malloc(sizeof(float) * (size_t)sf), *y = malloc(sizeof(float) * nt * k * n_out);
    float *y1 = malloc(sizeof(float) * k * n_out), *yn = malloc(sizeof(float) * nt * k * n_out);
    for (int ti = 0; ti < NRK; ti++) {
        const int rk = g_rk[ti], nat = kern_rk_native(rk);
        uint8_t *w = make_weights(nat, n_expert * n_out, n_in), *p = repack(rk, nat, w, n_expert * n_out, n_in);
        for (int aq = 0; aq < 2; aq++) {
            cf_env E = {.pool = P, .n_ctx = 16, .act_quant = aq};
            const int isa = kern_best_isa();
            kern_moe_matmul(isa, &E, y, x, &route[0][0], p, rk, n_out, n_in, n_expert, k, 0, NULL, scratch, nt);
            kern_moe_matmul(isa, &E, yn, x, &route[0][0], w, nat, n_out, n_in, n_expert, k, 0, NULL, scratch, nt);
            int same = 1;
            double worst = 0;
            for (int t = 0; t < nt; t++) {
                kern_moe_matmul(isa, &E, y1, x + (size_t)t * n_in, &route[t][0], p, rk, n_out, n_in, n_expert, k, 0,
                                NULL, scratch, 1);
                same &= !memcmp(y1, y + (size_t)t * k * n_out, sizeof(float) * k * n_out);
            }
            for (int i = 0; i < nt * k * n_out; i++) {
                const double e = fabs((double)y[i] - yn[i]) / (1e-4 * (fabs((double)yn[i]) + 1.0));
                if (!(e <= worst)) worst = e;
            }
            /* act_quant 1: both paths run the RK leaf per token; with f32
             * activations the one-token path is a dot and the batch a tile
             * GEMM (as for every type), so only the bound holds there */
            if (aq) EXPECT_MSG(same, "%s: one-token expert matmul differs from the batch", g_name[ti]);
            EXPECT_MSG(worst <= 1.0, "%s act_quant %d: experts off the native ones (%.3g x tol)", g_name[ti], aq, worst);
        }
        free(w), free(p);
    }
    free(x), free(scratch), free(y), free(y1), free(yn);
    pool_free(P);
}
