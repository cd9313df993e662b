/*
 * test_kern_r8.c — row-interleaved weight types CF_Q4_0_R8 / CF_Q8_0_R8
 * (runtime/kern_r8.*, layout in kern.h).
 *
 * Checks:
 *  - layout: bytes of a repacked Q4_0 / Q8_0 matrix sit where kern.h says
 *    (d[r] at 2r, row r's qs[4c..4c+3] at 16 + 32c + 4r);
 *  - repack round trip: dequant(repack(src)) == dequant(src) bit for bit for
 *    the lossless pairs, also through every impl's tile dequantizer; other sources (F16, Q4_1, Q5_0) == dequant of
 *    ggml's reference quantization (quant_row) of their dequantization;
 *  - refused shapes/types: kern_repack_bytes 0, kern_repack -1 with a
 *    message, matmul NaN for n_out % 8, per-row helpers NaN;
 *  - matmul, every impl this CPU runs (scalar, avx2, vnni), both act_quant
 *    modes, n_tok 1, 2, 3, 5, 17, 512: against a double reference written
 *    from the formats (act_quant 1: Σ_b d_w·d_a·Σ q_w·q_a over Q8_0
 *    activations from kern_quantize_act_row; 0: Σ dequant(w)·x), within
 *    2e-6·Σ|terms|; and equal to the native type's act_quant matmul to the
 *    same bound;
 *  - results bit-identical with a 2-thread pool, a 1-thread pool and no pool
 *    (stack-chunked activations).
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/kern.h"
#include "kernels/kern_r8.h"
#include "base/pool.h"
#include "kernels/quant.h"
#include "test.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dULL;
static float rnd_f(float lo, float hi) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 40) & 0xffffff) / 16777216.0f;
}

/* n_rows x n_cols random weights quantized to `type` with ggml's reference quantizer */
static uint8_t *make_weights(int type, int n_rows, int n_cols) {
    const size_t rb = kern_row_bytes(type, n_cols);
    uint8_t *w = malloc((size_t)n_rows * rb);
    float *f = malloc((size_t)n_cols * sizeof(float));
    for (int r = 0; r < n_rows; r++) {
        const float scale = rnd_f(0.01f, 1.0f);
        for (int k = 0; k < n_cols; k++) f[k] = rnd_f(-1, 1) * scale;
        if (r == 3) memset(f, 0, 32 * sizeof(float)); /* a zero block */
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
    uint8_t *out = malloc(n ? n : 1);
    char err[160] = "";
    EXPECT_MSG(kern_repack(dst, src_type, src, n_rows, n_cols, out, err, sizeof err) == 0, "repack: %s", err);
    return out;
}

/* Say in the run's output which impl this CPU cannot run (e.g. no AVX-512 VNNI). */
static void note_impl_not_run(int impl) {
    if (impl == KERN_R8_VNNI)
        test_not_run("AVX-512 VNNI R8 kernels (kern_r8_vnni.c): this CPU lacks AVX-512 F/BW/VL/VNNI");
    else
        test_not_run("%s R8 kernels: this CPU lacks them", kern_r8_impl_name(impl));
}

TEST(kern_r8, type_table) {
    EXPECT(kern_type_supported(CF_Q4_0_R8) && kern_type_supported(CF_Q8_0_R8));
    EXPECT(kern_type_is_r8(CF_Q4_0_R8) && kern_type_is_r8(CF_Q8_0_R8) && !kern_type_is_r8(CF_Q4_0));
    EXPECT_EQ_I(kern_type_block(CF_Q4_0_R8), 32);
    EXPECT_EQ_I(kern_row_bytes(CF_Q4_0_R8, 1024), 32 * 18);
    EXPECT_EQ_I(kern_row_bytes(CF_Q8_0_R8, 1024), 32 * 34);
    EXPECT_EQ_I(kern_vec_dot_type(CF_Q4_0_R8), CF_Q8_0);
    EXPECT(!kern_type_supported(106)); /* past the RK types (kern_rk.h) */
    EXPECT_STR_EQ(kern_r8_impl_name(KERN_R8_VNNI), "vnni");
    EXPECT(kern_r8_impl_available(KERN_R8_SCALAR));
    EXPECT(!kern_r8_impl_available(7));
    EXPECT_EQ_I(kern_r8_force_impl(7), -1);
}

TEST(kern_r8, layout_bytes) {
    const int R = 16, C = 64;
    for (int ti = 0; ti < 2; ti++) {
        const int nat = ti ? CF_Q8_0 : CF_Q4_0, r8 = ti ? CF_Q8_0_R8 : CF_Q4_0_R8;
        const int bb = ti ? KERN_Q8_0_R8_BLOCK : KERN_Q4_0_R8_BLOCK, qb = ti ? 32 : 16;
        const size_t sb = ti ? 34 : 18, rb = kern_row_bytes(nat, C);
        uint8_t *w = make_weights(nat, R, C), *p = repack(r8, nat, w, R, C);
        for (int g = 0; g < R / 8; g++)
            for (int b = 0; b < C / 32; b++) {
                const uint8_t *blk = p + ((size_t)g * (C / 32) + b) * bb;
                for (int r = 0; r < 8; r++) {
                    const uint8_t *src = w + (size_t)(8 * g + r) * rb + (size_t)b * sb;
                    EXPECT(!memcmp(blk + 2 * r, src, 2));
                    for (int c = 0; c < qb / 4; c++) EXPECT(!memcmp(blk + 16 + 32 * c + 4 * r, src + 2 + 4 * c, 4));
                }
            }
        free(w);
        free(p);
    }
}

TEST(kern_r8, repack_round_trip) {
    const int R = 24, C = 96;
    for (int ti = 0; ti < 2; ti++) {
        const int nat = ti ? CF_Q8_0 : CF_Q4_0, r8 = ti ? CF_Q8_0_R8 : CF_Q4_0_R8;
        uint8_t *w = make_weights(nat, R, C), *p = repack(r8, nat, w, R, C);
        float *ref = dequant_native(nat, w, R, C), *got = malloc(sizeof(float) * R * C);
        EXPECT_EQ_I(kern_r8_dequant(r8, p, R, C, got), 0);
        EXPECT_MSG(!memcmp(ref, got, sizeof(float) * R * C), "%s: dequant differs", ti ? "q8_0" : "q4_0");
        /* the SIMD tile dequantizer of the f32-activation path: same bits */
        for (int impl = 0; impl < KERN_R8_IMPL_COUNT; impl++) {
            if (!kern_r8_impl_available(impl)) {
                note_impl_not_run(impl);
                continue;
            }
            EXPECT_EQ_I(kern_r8_force_impl(impl), 0);
            memset(got, 0, sizeof(float) * R * C);
            kern_r8_deq_rows(impl ? KERN_ISA_AVX2 : KERN_ISA_SCALAR, r8, p, C, 8, 16, 32, 64, got + 8 * C + 32, C);
            for (int r = 8; r < 24; r++)
                EXPECT_MSG(!memcmp(ref + r * C + 32, got + r * C + 32, sizeof(float) * 64), "%s impl %s row %d: tile dequant",
                           ti ? "q8_0" : "q4_0", kern_r8_impl_name(impl), r);
        }
        kern_r8_force_impl(-1);
        /* same type: a copy */
        uint8_t *p2 = repack(r8, r8, p, R, C);
        EXPECT(!memcmp(p, p2, kern_repack_bytes(r8, R, C)));
        /* lossy sources: ggml's reference quantization of the exact values */
        const int srcs[] = {CF_F16, CF_Q4_1, CF_Q5_0, nat == CF_Q4_0 ? CF_Q8_0 : CF_Q4_0};
        for (int si = 0; si < 4; si++) {
            uint8_t *s = make_weights(srcs[si], R, C), *q = repack(r8, srcs[si], s, R, C);
            float *sf = dequant_native(srcs[si], s, R, C);
            const size_t rb = kern_row_bytes(nat, C);
            uint8_t *nq = malloc((size_t)R * rb);
            for (int r = 0; r < R; r++) quant_row(nat, sf + (size_t)r * C, nq + (size_t)r * rb, C);
            float *want = dequant_native(nat, nq, R, C);
            EXPECT_EQ_I(kern_r8_dequant(r8, q, R, C, got), 0);
            EXPECT_MSG(!memcmp(want, got, sizeof(float) * R * C), "source type %d", srcs[si]);
            free(s), free(q), free(sf), free(nq), free(want);
        }
        free(w), free(p), free(p2), free(ref), free(got);
    }
}

TEST(kern_r8, refused) {
    char err[160];
    uint8_t z[4096] = {0};
    float y[64];
    EXPECT_EQ_I(kern_repack_bytes(CF_Q4_0_R8, 12, 64), 0);
    EXPECT_EQ_I(kern_repack_bytes(CF_Q4_0_R8, 16, 48), 0);
    EXPECT_EQ_I(kern_repack_bytes(CF_Q4_0_R8, 0, 64), 0);
    EXPECT_EQ_I(kern_repack_bytes(CF_Q4_0, 16, 64), 0);
    EXPECT_EQ_I(kern_repack_bytes(CF_Q8_0_R8, 8, 32), 272);
    err[0] = 0;
    EXPECT_EQ_I(kern_repack(CF_Q4_0_R8, CF_Q4_0, z, 12, 64, z + 2048, err, sizeof err), -1);
    EXPECT(err[0] && !strchr(err, '\n'));
    err[0] = 0;
    EXPECT_EQ_I(kern_repack(CF_Q8_0_R8, CF_Q4_0_R8, z, 8, 64, z + 2048, err, sizeof err), -1);
    EXPECT(err[0] != 0);
    EXPECT_EQ_I(kern_repack(CF_Q8_0_R8, 16 /* IQ2_XXS */, z, 8, 64, z + 2048, err, sizeof err), -1);
    EXPECT_EQ_I(kern_repack(CF_Q4_0_R8, CF_Q4_0, z, 8, 64, z + 2048, NULL, 0), 0);
    EXPECT_EQ_I(kern_r8_dequant(CF_Q4_0, z, 8, 64, (float *)z), -1);
    /* per-row helpers refuse: a row of a group is not addressable */
    kern_dequant_row(CF_Q4_0_R8, z, y, 32);
    EXPECT(isnan(y[0]));
    EXPECT(isnan(kern_dot_row(KERN_ISA_SCALAR, CF_Q8_0_R8, z, y, 32)));
    /* matmul with n_out % 8 != 0: NaN, no crash */
    cf_env E = {.act_quant = 1};
    float x[64] = {0};
    for (int aq = 0; aq < 2; aq++) {
        E.act_quant = aq;
        y[0] = 0;
        kern_table(KERN_ISA_SCALAR)->matmul(&E, y, x, z, CF_Q4_0_R8, 12, 32, 1);
        EXPECT(isnan(y[0]) && isnan(y[11]));
    }
}

/* get_rows of a repacked (tied) embedding table: row r out of group r/8,
 * the native dequantizer's values bit for bit, on every ISA */
TEST(kern_r8, get_rows_equal_native) {
    const int n_rows = 24, n_cols = 96, ids[] = {0, 7, 8, 23, 3, 3, 16, 15};
    const int n_ids = (int)(sizeof ids / sizeof ids[0]);
    static const int types[2][2] = {{CF_Q4_0, CF_Q4_0_R8}, {CF_Q8_0, CF_Q8_0_R8}};
    float y[8 * 96];
    for (int i = 0; i < 2; i++) {
        uint8_t *w = make_weights(types[i][0], n_rows, n_cols);
        uint8_t *p = repack(types[i][1], types[i][0], w, n_rows, n_cols);
        float *ref = dequant_native(types[i][0], w, n_rows, n_cols);
        for (int isa = 0; isa < KERN_ISA_COUNT; isa++) {
            if (!kern_isa_available(isa)) continue;
            kern_table(isa)->get_rows(NULL, y, p, types[i][1], n_cols, ids, n_ids);
            for (int t = 0; t < n_ids; t++)
                EXPECT_MSG(!memcmp(y + (size_t)t * n_cols, ref + (size_t)ids[t] * n_cols, sizeof(float) * n_cols),
                           "type %d isa %d: row %d differs from the native dequantizer's", types[i][1], isa, ids[t]);
        }
        /* a row length that is not whole blocks: NaN, never a read past the rows */
        kern_table(KERN_ISA_SCALAR)->get_rows(NULL, y, p, types[i][1], 40, ids, 1);
        EXPECT(isnan(y[0]) && isnan(y[39]));
        free(w), free(p), free(ref);
    }
}

/* ---- matmul ------------------------------------------------------------------------ */

/* y_ref (n_tok, n_out) in double and the bound 2e-6·Σ|terms| + 1e-30 per element */
static void reference(int act_quant, const float *wf, const float *x, int n_out, int n_in, int n_tok,
                      double *ref, double *tol) {
    int8_t *q = malloc((size_t)n_in);
    float *da = malloc(sizeof(float) * (size_t)(n_in / 32));
    kern_block_q8_0 *blk = malloc(sizeof(kern_block_q8_0) * (size_t)(n_in / 32));
    for (int t = 0; t < n_tok; t++) {
        const float *xt = x + (size_t)t * n_in;
        if (act_quant) {
            EXPECT_EQ_I(kern_quantize_act_row(KERN_ISA_SCALAR, CF_Q4_0, xt, blk, n_in), 0);
            for (int b = 0; b < n_in / 32; b++) {
                da[b] = kern_f16_to_f32(blk[b].d);
                memcpy(q + 32 * b, blk[b].qs, 32);
            }
        }
        for (int r = 0; r < n_out; r++) {
            const float *w = wf + (size_t)r * n_in;
            double s = 0, a = 0;
            for (int k = 0; k < n_in; k++) {
                const double v = act_quant ? (double)w[k] * q[k] * da[k / 32] : (double)w[k] * xt[k];
                s += v;
                a += fabs(v);
            }
            ref[(size_t)t * n_out + r] = s;
            tol[(size_t)t * n_out + r] = 2e-6 * a + 1e-30;
        }
    }
    free(q), free(da), free(blk);
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

TEST(kern_r8, matmul) {
    static const int toks[] = {1, 2, 3, 5, 17, 512};
    const int n_out = 40, n_in = 192;
    pool *P2 = NULL, *P1 = NULL;
    EXPECT_EQ_I(pool_new(2, &P2), 0);
    EXPECT_EQ_I(pool_new(1, &P1), 0);
    EXPECT_EQ_I(pool_reserve(P2, kern_scratch_bytes_act(16, 512, n_in)), 0);
    EXPECT_EQ_I(pool_reserve(P1, kern_scratch_bytes_act(16, 512, n_in)), 0);
    float *x = malloc(sizeof(float) * 512 * n_in);
    for (int i = 0; i < 512 * n_in; i++) x[i] = rnd_f(-3, 3) * (i % 97 == 0 ? 10.0f : 1.0f);
    float *y = malloc(sizeof(float) * 512 * n_out), *y2 = malloc(sizeof(float) * 512 * n_out);
    float *yn = malloc(sizeof(float) * 512 * n_out);
    double *ref = malloc(sizeof(double) * 512 * n_out), *tol = malloc(sizeof(double) * 512 * n_out);
    for (int ti = 0; ti < 2; ti++) {
        const int nat = ti ? CF_Q8_0 : CF_Q4_0, r8 = ti ? CF_Q8_0_R8 : CF_Q4_0_R8;
        uint8_t *w = make_weights(nat, n_out, n_in), *p = repack(r8, nat, w, n_out, n_in);
        float *wf = dequant_native(nat, w, n_out, n_in);
        for (int aq = 0; aq < 2; aq++)
            for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++) {
                const int nt = toks[k];
                reference(aq, wf, x, n_out, n_in, nt, ref, tol);
                for (int impl = 0; impl < KERN_R8_IMPL_COUNT; impl++) {
                    if (!kern_r8_impl_available(impl)) {
                        note_impl_not_run(impl);
                        continue;
                    }
                    char what[96];
                    snprintf(what, sizeof what, "%s %s act_quant %d n_tok %d", kern_type_is_r8(r8) && ti ? "q8_0_r8" : "q4_0_r8",
                             kern_r8_impl_name(impl), aq, nt);
                    cf_env E = {.pool = P2, .n_ctx = 16, .act_quant = aq};
                    kern_r8_matmul_impl(impl, &E, y, x, p, r8, n_out, n_in, nt);
                    check_close(y, ref, tol, (long)nt * n_out, what);
                    /* thread count and the no-pool (stack) path: same bits */
                    E.pool = P1;
                    kern_r8_matmul_impl(impl, &E, y2, x, p, r8, n_out, n_in, nt);
                    EXPECT_MSG(!memcmp(y, y2, sizeof(float) * nt * n_out), "%s: 1 vs 2 threads", what);
                    E.pool = NULL;
                    kern_r8_matmul_impl(impl, &E, y2, x, p, r8, n_out, n_in, nt);
                    EXPECT_MSG(!memcmp(y, y2, sizeof(float) * nt * n_out), "%s: no pool", what);
                }
                /* the kernel table (best impl) against the native type's matmul */
                const int isa = kern_best_isa();
                cf_env E = {.pool = P2, .n_ctx = 16, .act_quant = aq};
                kern_table(isa)->matmul(&E, y, x, p, r8, n_out, n_in, nt);
                kern_table(isa)->matmul(&E, yn, x, w, nat, n_out, n_in, nt);
                for (long i = 0; i < (long)nt * n_out; i++) ref[i] = yn[i], tol[i] *= 2;
                check_close(y, ref, tol, (long)nt * n_out, ti ? "q8_0_r8 vs q8_0" : "q4_0_r8 vs q4_0");
            }
        free(w), free(p), free(wf);
    }
    free(x), free(y), free(y2), free(yn), free(ref), free(tol);
    pool_free(P1);
    pool_free(P2);
}

/* Chunked activations: a pool without act scratch is a test-build abort, so
 * the stack path is taken with no pool; n_in large enough that one call
 * needs several chunks (128 KiB stack buffer / 176 bytes per block-quad). */
TEST(kern_r8, matmul_chunked_without_pool) {
    const int n_out = 16, n_in = 4096, n_tok = 40;
    float *x = malloc(sizeof(float) * n_tok * n_in), *y = malloc(sizeof(float) * n_tok * n_out);
    double *ref = malloc(sizeof(double) * n_tok * n_out), *tol = malloc(sizeof(double) * n_tok * n_out);
    for (int i = 0; i < n_tok * n_in; i++) x[i] = rnd_f(-1, 1);
    uint8_t *w = make_weights(CF_Q4_0, n_out, n_in), *p = repack(CF_Q4_0_R8, CF_Q4_0, w, n_out, n_in);
    float *wf = dequant_native(CF_Q4_0, w, n_out, n_in);
    reference(1, wf, x, n_out, n_in, n_tok, ref, tol);
    cf_env E = {.act_quant = 1};
    kern_table(kern_best_isa())->matmul(&E, y, x, p, CF_Q4_0_R8, n_out, n_in, n_tok);
    check_close(y, ref, tol, (long)n_tok * n_out, "chunked");
    free(x), free(y), free(ref), free(tol), free(w), free(p), free(wf);
}

/* act_quant: every impl gives the scalar reference leaf's bits, for every
 * token count 1..17, 31, 40 and (n_out 40, 24: 5 and 3 row groups) an odd
 * number of groups, so the VNNI two-group leaves (gemm2: pairs of groups,
 * 4/8/16-token bodies) and the one-group leaf for the odd group and for
 * decode both run; with 2 threads, 1 thread and no pool, and a token alone
 * == the same token in the batch. */
static void scalar_bits_case(int ti, int n_out) {
    const int n_in = 320, max_tok = 40;
    const int nat = ti ? CF_Q8_0 : CF_Q4_0, r8 = ti ? CF_Q8_0_R8 : CF_Q4_0_R8;
    const char *name = ti ? "q8_0_r8" : "q4_0_r8";
    pool *P2 = NULL, *P1 = NULL;
    EXPECT_EQ_I(pool_new(2, &P2), 0);
    EXPECT_EQ_I(pool_new(1, &P1), 0);
    EXPECT_EQ_I(pool_reserve(P2, kern_scratch_bytes_act(16, max_tok, n_in)), 0);
    EXPECT_EQ_I(pool_reserve(P1, kern_scratch_bytes_act(16, max_tok, n_in)), 0);
    float *x = malloc(sizeof(float) * max_tok * n_in);
    for (int i = 0; i < max_tok * n_in; i++) x[i] = rnd_f(-3, 3) * (i % 89 == 0 ? 10.0f : 1.0f);
    const size_t ny = sizeof(float) * max_tok * n_out;
    float *y = malloc(ny), *ys = malloc(ny), *y2 = malloc(ny);
    uint8_t *w = make_weights(nat, n_out, n_in), *p = repack(r8, nat, w, n_out, n_in);
    cf_env E = {.pool = P2, .n_ctx = 16, .act_quant = 1};
    kern_r8_matmul_impl(KERN_R8_SCALAR, &E, ys, x, p, r8, n_out, n_in, max_tok);
    for (int impl = 1; impl < KERN_R8_IMPL_COUNT; impl++) {
        if (!kern_r8_impl_available(impl)) {
            note_impl_not_run(impl);
            continue;
        }
        for (int nt = 1; nt <= max_tok; nt = nt == 17 ? 31 : nt == 31 ? max_tok : nt + 1) {
            E.pool = P2;
            kern_r8_matmul_impl(impl, &E, y, x, p, r8, n_out, n_in, nt);
            long bad = -1;
            for (long i = 0; i < (long)nt * n_out && bad < 0; i++)
                if (memcmp(y + i, ys + i, sizeof(float))) bad = i;
            EXPECT_MSG(bad < 0, "%s %s n_out %d n_tok %d: not the scalar bits at token %ld row %ld (%.9g vs %.9g)",
                       name, kern_r8_impl_name(impl), n_out, nt, bad / n_out, bad % n_out, bad >= 0 ? y[bad] : 0.0,
                       bad >= 0 ? ys[bad] : 0.0);
        }
        int same = 1;
        for (int t = 0; t < max_tok; t++) {
            E.pool = t % 2 ? P1 : NULL;
            kern_r8_matmul_impl(impl, &E, y2, x + (size_t)t * n_in, p, r8, n_out, n_in, 1);
            same &= !memcmp(y2, ys + (size_t)t * n_out, sizeof(float) * n_out);
        }
        EXPECT_MSG(same, "%s %s n_out %d: a 1-token call is not the scalar bits", name, kern_r8_impl_name(impl), n_out);
        E.pool = P1;
        kern_r8_matmul_impl(impl, &E, y2, x, p, r8, n_out, n_in, max_tok);
        EXPECT_MSG(!memcmp(y2, ys, ny), "%s %s n_out %d: 1 thread", name, kern_r8_impl_name(impl), n_out);
        E.pool = NULL;
        kern_r8_matmul_impl(impl, &E, y2, x, p, r8, n_out, n_in, max_tok);
        EXPECT_MSG(!memcmp(y2, ys, ny), "%s %s n_out %d: no pool", name, kern_r8_impl_name(impl), n_out);
    }
    free(x), free(y), free(ys), free(y2), free(w), free(p);
    pool_free(P1);
    pool_free(P2);
}

TEST(kern_r8, scalar_bits) {
    for (int ti = 0; ti < 2; ti++) {
        scalar_bits_case(ti, 40);
        scalar_bits_case(ti, 24);
    }
}
