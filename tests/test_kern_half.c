/*
 * test_kern_half.c — BF16 weights with BF16 activations through AVX512_BF16
 * (runtime/kernels/kern_half*, numerics in kern_half.h).
 *
 * Checks:
 *  - kern_half_dot_ref is the AVX2 f32 kernels' arithmetic: for values
 *    without subnormals it gives kern_matmul_f32act's bits on the BF16-
 *    rounded activations (8-lane chains per slice) on 21 rows x 1100 inputs
 *    (two full slices and a partial one ending in a half block and a
 *    4-element tail), and the SIMD table's act_quant matmul gives the same
 *    bits whichever path it takes (x86-64);
 *    the sums do round (the definition is not the double sum);
 *  - kern_half_matmul gives kern_half_dot_ref's bits for every output,
 *    n_tok 1..9 and 40, with a zero row, and, in a second matrix, bf16
 *    subnormal weights and activations (read as 0 by vdpbf16ps, and by the
 *    definition);
 *  - batch invariance: each token of the 40-token call has the bits of a
 *    1-token call on it; a 1-thread pool, a 2-thread pool and no pool give
 *    the same bits; a 200 x 512 matrix (several tiles per thread, the 8-row
 *    mat-vec) agrees with the definition both ways;
 *  - only BF16 on the SIMD slot takes this path.
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

/* y (n_tok x n_out) through kern_half_matmul on x packed as kern_q8_mm.c packs it */
static void half_mm(cf_env *E, float *y, const float *x, const uint8_t *w, int n_out, int n_in, int n_tok,
                    uint8_t *a) {
    const size_t ab = kern_half_act_bytes(n_in);
    for (int t = 0; t < n_tok; t++) kern_half_pack_act(x + (size_t)t * n_in, a + (size_t)t * ab, n_in);
    kern_half_matmul(KERN_ISA_SIMD, E, y, a, w, CF_BF16, n_out, n_in, n_tok);
}

static void ref_mm(float *y, const float *x, const uint8_t *w, int n_out, int n_in, int n_tok, uint8_t *a) {
    const size_t ab = kern_half_act_bytes(n_in), rb = kern_row_bytes(CF_BF16, n_in);
    for (int t = 0; t < n_tok; t++) {
        kern_half_pack_act(x + (size_t)t * n_in, a, n_in);
        for (int r = 0; r < n_out; r++) y[(size_t)t * n_out + r] = kern_half_dot_ref(CF_BF16, w + (size_t)r * rb, a, n_in);
    }
    (void)ab;
}

TEST(kern_half, bf16_bits_and_invariance) {
    const int n_out = 21, n_in = 1100, max_tok = 40;
    pool *P2 = NULL, *P1 = NULL;
    EXPECT_EQ_I(pool_new(2, &P2), 0);
    EXPECT_EQ_I(pool_new(1, &P1), 0);
    EXPECT_EQ_I(pool_reserve(P2, kern_scratch_bytes_act(16, max_tok, n_in)), 0);
    EXPECT_EQ_I(pool_reserve(P1, kern_scratch_bytes_act(16, max_tok, n_in)), 0);
    EXPECT(!kern_half_available(KERN_ISA_SCALAR, CF_BF16) && !kern_half_available(KERN_ISA_SIMD, CF_F16));
    EXPECT(!kern_half_available(KERN_ISA_SIMD, CF_F32) && !kern_half_available(KERN_ISA_SIMD, CF_Q8_0));
    float *x = malloc(sizeof(float) * max_tok * n_in), *wf = malloc(sizeof(float) * n_out * n_in);
    for (int i = 0; i < max_tok * n_in; i++) x[i] = rnd_f(-3, 3) * (i % 97 == 0 ? 10.0f : 1.0f);
    for (int r = 0; r < n_out; r++)
        for (int k = 0; k < n_in; k++) wf[(size_t)r * n_in + k] = r == 4 ? 0.0f : rnd_f(-1, 1) * (r % 3 + 1) * 0.1f;
    const size_t rb = kern_row_bytes(CF_BF16, n_in), ny = sizeof(float) * max_tok * n_out;
    uint8_t *w = malloc((size_t)n_out * rb), *a = malloc(kern_half_act_bytes(n_in) * max_tok);
    for (int r = 0; r < n_out; r++) EXPECT_EQ_I(quant_row(CF_BF16, wf + (size_t)r * n_in, w + (size_t)r * rb, n_in), rb);
    float *ref = malloc(ny), *y = malloc(ny), *y1 = malloc(ny), *y2 = malloc(ny);
    ref_mm(ref, x, w, n_out, n_in, max_tok, a);

    /* the definition is the AVX2 f32 kernels' arithmetic on the rounded activations, and not the exact sum */
#if defined(__x86_64__)
    if (kern_isa_available(KERN_ISA_SIMD)) {
        cf_env S = {.pool = P2, .n_ctx = 16};
        float *xr = malloc(sizeof(float) * max_tok * n_in);
        uint16_t h[1];
        for (int i = 0; i < max_tok * n_in; i++) {
            EXPECT_EQ_I(kern_quantize_act_row(KERN_ISA_SCALAR, CF_BF16, x + i, h, 1), 0);
            xr[i] = bf16_to_f32(h[0]);
        }
        kern_matmul_f32act(KERN_ISA_SIMD, &S, y, xr, w, CF_BF16, n_out, n_in, max_tok);
        EXPECT_MSG(!memcmp(y, ref, ny), "bf16: kern_half_dot_ref is not the AVX2 f32 kernels' bits");
        S.act_quant = 1; /* the table's act_quant matmul, whichever path this CPU takes */
        kern_table(KERN_ISA_SIMD)->matmul(&S, y1, x, w, CF_BF16, n_out, n_in, max_tok);
        EXPECT_MSG(!memcmp(y1, ref, ny), "bf16: the SIMD table's act_quant matmul is not kern_half_dot_ref's bits");
        free(xr);
    } else {
        test_not_run("the AVX2 f32 kernels' bits (kern_half_dot_ref's definition): no AVX2 here");
    }
#endif
    int rounds = 0;
    for (int t = 0; t < max_tok; t++) {
        kern_half_pack_act(x + (size_t)t * n_in, a, n_in);
        for (int r = 0; r < n_out; r++) {
            double d = 0;
            const uint16_t *wr = (const uint16_t *)(w + (size_t)r * rb), *at = (const uint16_t *)a;
            for (int k = 0; k < n_in; k++) {
                const int pk = (k & ~15) + ((k & 15) < 8 ? 2 * (k & 7) + 1 : 2 * (k & 7));
                d += (double)bf16_to_f32(wr[k]) * bf16_to_f32(at[pk]);
            }
            rounds += (double)ref[(size_t)t * n_out + r] != d;
        }
    }
    EXPECT_MSG(rounds > 0, "bf16: every definition sum equals the double sum: the layout check is vacuous");

    if (!kern_half_available(KERN_ISA_SIMD, CF_BF16)) {
        test_not_run("AVX512_BF16 weight kernels (kern_half*): this CPU lacks AVX-512 F/BW/VL/VNNI + AVX512_BF16");
    } else {
        cf_env E = {.pool = P2, .n_ctx = 16, .act_quant = 1};
        for (int nt = 1; nt <= max_tok; nt = nt == 9 ? max_tok : nt + 1) {
            half_mm(&E, y, x, w, n_out, n_in, nt, a);
            EXPECT_MSG(!memcmp(y, ref, sizeof(float) * nt * n_out), "bf16 n_tok %d: not kern_half_dot_ref's bits", nt);
        }
        int same = 1;
        for (int t = 0; t < max_tok; t++) {
            E.pool = t % 2 ? P1 : NULL;
            half_mm(&E, y1, x + (size_t)t * n_in, w, n_out, n_in, 1, a);
            same &= !memcmp(y1, ref + (size_t)t * n_out, sizeof(float) * n_out);
        }
        EXPECT_MSG(same, "bf16: a 1-token call differs from the batch");
        E.pool = P1;
        half_mm(&E, y2, x, w, n_out, n_in, max_tok, a);
        EXPECT_MSG(!memcmp(y2, ref, ny), "bf16: 1 vs 2 threads");
        E.pool = NULL;
        half_mm(&E, y2, x, w, n_out, n_in, max_tok, a);
        EXPECT_MSG(!memcmp(y2, ref, ny), "bf16: no pool");

        /* subnormals: read as 0 (DAZ), as the definition says */
        float *xs = malloc(sizeof(float) * 5 * n_in), *ws_ = malloc(sizeof(float) * 3 * n_in);
        memcpy(xs, x, sizeof(float) * 5 * n_in);
        memcpy(ws_, wf, sizeof(float) * 3 * n_in);
        xs[3 * n_in + 3] = 3.0e-39f, ws_[1 * n_in + 1090] = 1.0e-39f, ws_[2 * n_in + 17] = -2.0e-39f;
        uint8_t *w3 = malloc(3 * rb);
        for (int r = 0; r < 3; r++) quant_row(CF_BF16, ws_ + (size_t)r * n_in, w3 + (size_t)r * rb, n_in);
        float rs[15], ys[15];
        ref_mm(rs, xs, w3, 3, n_in, 5, a);
        E.pool = P2;
        half_mm(&E, ys, xs, w3, 3, n_in, 5, a);
        EXPECT_MSG(!memcmp(ys, rs, sizeof rs), "bf16 subnormals: mat-mat not kern_half_dot_ref's bits");
        half_mm(&E, ys, xs + 3 * n_in, w3, 3, n_in, 1, a);
        EXPECT_MSG(!memcmp(ys, rs + 9, 3 * sizeof(float)), "bf16 subnormals: mat-vec not kern_half_dot_ref's bits");
        free(xs), free(ws_), free(w3);

        /* a wide matrix: several 16-row tiles per thread, the 8-row mat-vec */
        const int no = 200, ni = 512;
        const size_t rb2 = kern_row_bytes(CF_BF16, ni);
        uint8_t *w2 = malloc((size_t)no * rb2);
        for (int r = 0; r < no; r++) quant_row(CF_BF16, wf + (size_t)(r % n_out) * n_in + r, w2 + (size_t)r * rb2, ni);
        float *xb = malloc(sizeof(float) * 6 * ni), *yb = malloc(sizeof(float) * 6 * no), *yv = malloc(sizeof(float) * no);
        float *rb_ = malloc(sizeof(float) * 6 * no);
        for (int i = 0; i < 6 * ni; i++) xb[i] = rnd_f(-2, 2);
        ref_mm(rb_, xb, w2, no, ni, 6, a);
        half_mm(&E, yb, xb, w2, no, ni, 6, a);
        int ok = !memcmp(yb, rb_, sizeof(float) * 6 * no);
        for (int t = 0; t < 6; t++) {
            half_mm(&E, yv, xb + (size_t)t * ni, w2, no, ni, 1, a);
            ok &= !memcmp(yv, rb_ + (size_t)t * no, sizeof(float) * no);
        }
        EXPECT_MSG(ok, "bf16 200x512: mat-vec, mat-mat and the definition disagree");
        free(w2), free(xb), free(yb), free(yv), free(rb_);
    }
    free(x), free(wf), free(w), free(a), free(ref), free(y), free(y1), free(y2);
    pool_free(P1);
    pool_free(P2);
}
