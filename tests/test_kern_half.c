/*
 * test_kern_half.c — F16/BF16 weights with activations in the weight's
 * format on AVX-512 (runtime/kernels/kern_half*, numerics in kern_half.h).
 *
 * Checks, for each of F16 and BF16 that this CPU runs:
 *  - kern_half_matmul gives kern_half_dot_ref's
 *    bits for every output, n_tok 1..9 and 40, rows and inputs that are not
 *    multiples of the blocks (21 rows, 1100 inputs: two full slices and a
 *    partial one ending in a partial step), with zero rows, bf16 subnormals
 *    (read as 0) and an activation beyond the f16 range (kept f32);
 *  - kern_half_dot_ref is within 38·2^-24·Σ|terms| (its longest chain of
 *    roundings) of a double-precision sum over the same rounded
 *    activations (the subnormals' terms aside, which are below 1e-30);
 *  - batch invariance: each token of the 40-token call has the bits of a
 *    1-token call on it; a 1-thread pool, a 2-thread pool and no pool give
 *    the same bits;
 *  - the scalar table never takes this path (kern_half_available 0) and is
 *    within (n + 4)·2^-24·Σ|terms| of the double sum (its chains are up to
 *    a slice long).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/kern_half.h"
#include "base/f16.h"
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

/* the activations as kern_q8_mm.c hands them to kern_half_matmul: BF16 bits,
 * or F16-rounded floats (the f32 value where f16 overflows) */
static void round_act(int type, const float *x, void *a, int n) {
    if (type == CF_BF16) {
        EXPECT_EQ_I(kern_quantize_act_row(KERN_ISA_SCALAR, CF_BF16, x, a, n), 0);
        return;
    }
    float *af = a;
    for (int i = 0; i < n; i++) {
        const float v = f16_to_f32(f32_to_f16(x[i]));
        af[i] = isinf(v) && !isinf(x[i]) ? x[i] : v;
    }
}

static double act_value(int type, const void *a, int i) {
    if (type == CF_F16) return ((const float *)a)[i];
    return bf16_to_f32(((const uint16_t *)a)[i]);
}

/* Rounding bound of kern_half_dot_ref relative to Σ|terms|: a term passes
 * through at most 32 chain steps (KERN_MM_KC / 16 lanes; BF16: 16 pairs of
 * 2), 4 tree adds and 2 slice adds, so |error| <= 38·2^-24·Σ|terms|. */
static const double g_bound_half = 38 * 0x1p-24;

TEST(kern_half, matmul_bits_and_bounds) {
    const int n_out = 21, n_in = 1100, max_tok = 40;
    pool *P2 = NULL, *P1 = NULL;
    EXPECT_EQ_I(pool_new(2, &P2), 0);
    EXPECT_EQ_I(pool_new(1, &P1), 0);
    EXPECT_EQ_I(pool_reserve(P2, kern_scratch_bytes_act(16, max_tok, n_in)), 0);
    EXPECT_EQ_I(pool_reserve(P1, kern_scratch_bytes_act(16, max_tok, n_in)), 0);
    float *x = malloc(sizeof(float) * max_tok * n_in), *wf = malloc(sizeof(float) * n_out * n_in);
    for (int i = 0; i < max_tok * n_in; i++) x[i] = rnd_f(-3, 3) * (i % 97 == 0 ? 10.0f : 1.0f);
    x[2 * n_in + 700] = 1.0e5f; /* token 2: beyond f16 */
    x[5 * n_in + 3] = 3.0e-39f;  /* a bf16 subnormal activation */
    for (int r = 0; r < n_out; r++)
        for (int k = 0; k < n_in; k++) wf[(size_t)r * n_in + k] = r == 4 ? 0.0f : rnd_f(-1, 1) * (r % 3 + 1) * 0.1f;
    wf[7 * (size_t)n_in + 1099] = 1.0e-39f; /* a bf16 subnormal weight in the last partial step */
    const size_t ny = sizeof(float) * max_tok * n_out;
    float *y = malloc(ny), *y1 = malloc(ny), *y2 = malloc(ny);
    void *a = malloc(sizeof(float) * max_tok * n_in);
    static const int types[2] = {CF_F16, CF_BF16};
    EXPECT(!kern_half_available(KERN_ISA_SCALAR, CF_F16) && !kern_half_available(KERN_ISA_SCALAR, CF_BF16));
    EXPECT(!kern_half_available(KERN_ISA_SIMD, CF_F32) && !kern_half_available(KERN_ISA_SIMD, CF_Q8_0));
    for (int ti = 0; ti < 2; ti++) {
        const int type = types[ti];
        const char *name = type == CF_F16 ? "f16" : "bf16";
        const size_t rb = kern_row_bytes(type, n_in), ab = type == CF_F16 ? 4 : 2;
        uint8_t *w = malloc((size_t)n_out * rb);
        for (int r = 0; r < n_out; r++) EXPECT_EQ_I(quant_row(type, wf + (size_t)r * n_in, w + (size_t)r * rb, n_in), rb);
        for (int t = 0; t < max_tok; t++) round_act(type, x + (size_t)t * n_in, (uint8_t *)a + (size_t)t * n_in * ab, n_in);
        /* the definition against a double sum over the same values */
        float *ref = malloc(ny);
        double *dref = malloc(sizeof(double) * max_tok * n_out), *mags = malloc(sizeof(double) * max_tok * n_out);
        double worst = 0;
        for (int t = 0; t < max_tok; t++)
            for (int r = 0; r < n_out; r++) {
                const uint8_t *wr = w + (size_t)r * rb, *at = (const uint8_t *)a + (size_t)t * n_in * ab;
                const float s = kern_half_dot_ref(type, wr, at, n_in);
                double d = 0, mag = 0;
                for (int k = 0; k < n_in; k++) {
                    double wk;
                    if (type == CF_F16) wk = f16_to_f32(((const uint16_t *)wr)[k]);
                    else wk = bf16_to_f32(((const uint16_t *)wr)[k]);
                    d += wk * act_value(type, at, k);
                    mag += fabs(wk * act_value(type, at, k));
                }
                const double e = fabs(s - d) / (mag > 0 ? mag : 1);
                if (e > worst) worst = e;
                EXPECT_MSG(fabs(s - d) <= g_bound_half * mag + 1e-30, "%s ref (t %d, r %d): %.9g vs double %.9g", name, t, r, s, d);
                ref[(size_t)t * n_out + r] = s;
                dref[(size_t)t * n_out + r] = d;
                mags[(size_t)t * n_out + r] = mag;
            }
        EXPECT(worst > 0); /* the sums do round: the bound is not vacuous */
        /* the scalar table: the f32 kernels on the rounded values, same bound */
        cf_env S = {.pool = P2, .n_ctx = 16, .act_quant = 1};
        kern_table(KERN_ISA_SCALAR)->matmul(&S, y, x, w, type, n_out, n_in, max_tok);
        for (long i = 0; i < (long)max_tok * n_out; i++)
            EXPECT_MSG(fabs(y[i] - dref[i]) <= (n_in + 4) * 0x1p-24 * mags[i] + 1e-30, "%s scalar table [%ld]: %.9g vs double %.9g",
                       name, i, y[i], dref[i]);
        if (!kern_half_available(KERN_ISA_SIMD, type)) {
            test_not_run("AVX-512 %s weight kernels (kern_half*): this CPU lacks %s", name,
                         type == CF_F16 ? "AVX-512 F/BW/VL/VNNI" : "AVX512_BF16");
            free(w), free(ref), free(dref), free(mags);
            continue;
        }
        cf_env E = {.pool = P2, .n_ctx = 16, .act_quant = 1};
        for (int nt = 1; nt <= max_tok; nt = nt == 9 ? max_tok : nt + 1) {
            kern_half_matmul(KERN_ISA_SIMD, &E, y, a, w, type, n_out, n_in, nt);
            EXPECT_MSG(!memcmp(y, ref, sizeof(float) * nt * n_out), "%s n_tok %d: not kern_half_dot_ref's bits", name, nt);
        }
        int same = 1;
        for (int t = 0; t < max_tok; t++) {
            E.pool = t % 2 ? P1 : NULL;
            kern_half_matmul(KERN_ISA_SIMD, &E, y1, (const uint8_t *)a + (size_t)t * n_in * ab, w, type, n_out, n_in, 1);
            same &= !memcmp(y1, ref + (size_t)t * n_out, sizeof(float) * n_out);
        }
        EXPECT_MSG(same, "%s: a 1-token call differs from the batch", name);
        E.pool = P1;
        kern_half_matmul(KERN_ISA_SIMD, &E, y2, a, w, type, n_out, n_in, max_tok);
        EXPECT_MSG(!memcmp(y2, ref, ny), "%s: 1 vs 2 threads", name);
        E.pool = NULL;
        kern_half_matmul(KERN_ISA_SIMD, &E, y2, a, w, type, n_out, n_in, max_tok);
        EXPECT_MSG(!memcmp(y2, ref, ny), "%s: no pool", name);
        /* a wide matrix: several 16-row tiles per thread, 4-row mat-vec streams */
        {
            const int no = 200, ni = 512;
            uint8_t *w2 = malloc((size_t)no * kern_row_bytes(type, ni));
            for (int r = 0; r < no; r++)
                quant_row(type, wf + (size_t)(r % n_out) * n_in + r, w2 + (size_t)r * kern_row_bytes(type, ni), ni);
            float *xb = malloc(sizeof(float) * 6 * ni), *yb = malloc(sizeof(float) * 6 * no), *yv = malloc(sizeof(float) * no);
            for (int i = 0; i < 6 * ni; i++) xb[i] = rnd_f(-2, 2);
            for (int t = 0; t < 6; t++) round_act(type, xb + (size_t)t * ni, (uint8_t *)a + (size_t)t * ni * ab, ni);
            E.pool = P2;
            kern_half_matmul(KERN_ISA_SIMD, &E, yb, a, w2, type, no, ni, 6);
            int ok = 1;
            for (int t = 0; t < 6; t++) {
                const uint8_t *at = (const uint8_t *)a + (size_t)t * ni * ab;
                kern_half_matmul(KERN_ISA_SIMD, &E, yv, at, w2, type, no, ni, 1);
                ok &= !memcmp(yv, yb + (size_t)t * no, sizeof(float) * no);
                for (int r = 0; r < no; r++)
                    ok &= yv[r] == kern_half_dot_ref(type, w2 + (size_t)r * kern_row_bytes(type, ni), at, ni);
            }
            EXPECT_MSG(ok, "%s 200x512: mat-vec, mat-mat and the definition disagree", name);
            free(w2), free(xb), free(yb), free(yv);
        }
        free(w), free(ref), free(dref), free(mags);
    }
    free(x), free(wf), free(y), free(y1), free(y2), free(a);
    pool_free(P1);
    pool_free(P2);
}
