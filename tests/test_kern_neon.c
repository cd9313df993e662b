/*
 * test_kern_neon.c — the aarch64 leaves (kern_neon.c, kern_neon_int.h)
 * against the scalar reference, each in both builds: plain NEON and with
 * the dot-product instructions (kern_neon_force_dotprod).  Integer dots of
 * quantized activations and the R8 gemm are bit-identical to the scalar
 * leaves; f32 sums differ by rounding only.  Run under qemu-user by make
 * test-aarch64; on x86-64 these tests skip (kern_avx2 has its own).
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/kern.h"
#include "kernels/kern_q8.h"
#include "kernels/kern_r8.h"
#include "kernels/quant.h"
#include "test.h"

static void fill(float *x, int n, unsigned seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = ((int)(seed >> 9 & 0xffff) - 32768) / 16384.0f;
    }
}

/* the dotprod setting to test: 0 plain, 1 dotprod; -1 when unavailable */
static int set_dotprod(int on) { return kern_neon_force_dotprod(on); }

TEST(kern_neon, integer_dots_bit_identical) {
    if (!kern_isa_available(KERN_ISA_NEON) || strcmp(kern_isa_name(KERN_ISA_NEON), "neon"))
        SKIP_HARDWARE("not an aarch64 build (NEON kernels)");
    static const int types[] = {CF_Q4_0, CF_Q8_0, KERN_T_Q4_K, KERN_T_Q6_K};
    enum { N = 512, NT = 4 };
    float *w = malloc(N * sizeof *w), *x = malloc(NT * N * sizeof *x);
    uint8_t *wq = malloc(N * 4), *aq = malloc((size_t)NT * N * 2);
    for (int dp = 0; dp < 2; dp++) {
        if (set_dotprod(dp)) continue; /* no dotprod on this CPU */
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            const int type = types[ti];
            fill(w, N, 7 + (unsigned)ti);
            fill(x, NT * N, 99);
            EXPECT(quant_row(type, w, wq, N) > 0);
            const size_t as = kern_act_row_bytes(type, N);
            for (int t = 0; t < NT; t++)
                EXPECT_EQ_I(kern_quantize_act_row(KERN_ISA_SCALAR, type, x + t * N, aq + t * as, N), 0);
            for (int nt = 1; nt <= NT; nt++) {
                float ref[NT], got[NT];
                EXPECT_EQ_I(kern_dot_q_rows(KERN_ISA_SCALAR, type, wq, aq, as, nt, N, ref), 0);
                EXPECT_EQ_I(kern_dot_q_rows(KERN_ISA_NEON, type, wq, aq, as, nt, N, got), 0);
                for (int t = 0; t < nt; t++)
                    EXPECT_MSG(got[t] == ref[t], "%s type %d nt %d: %.9g, scalar %.9g", dp ? "dotprod" : "neon",
                               type, nt, got[t], ref[t]);
            }
        }
    }
    set_dotprod(-1);
    free(w), free(x), free(wq), free(aq);
}

TEST(kern_neon, r8_gemm_bit_identical) {
    if (strcmp(kern_isa_name(KERN_ISA_SIMD), "neon")) SKIP_HARDWARE("not an aarch64 build (NEON kernels)");
    enum { ROWS = 16, N = 256, NT = 8 };
    float *w = malloc(ROWS * N * sizeof *w), *x = malloc(NT * N * sizeof *x);
    uint8_t *src = malloc(ROWS * N * 2), *r8 = malloc(ROWS * N * 2), *a8 = malloc(NT * N * 2);
    kern_block_q8x4 *quads = malloc(2 * (N / 32) * sizeof *quads);
    fill(w, ROWS * N, 3);
    fill(x, NT * N, 5);
    char err[256];
    for (int t = 0; t < NT; t++) quant_row(CF_Q8_0, x + t * N, a8 + (size_t)t * (N / 32) * 34, N);
    for (int q = 0; q < 2; q++) {
        const void *rows[4];
        for (int t = 0; t < 4; t++) rows[t] = a8 + (size_t)(4 * q + t) * (N / 32) * 34;
        kern_q8x4_pack(CF_Q8_0, rows, N, quads + q * (N / 32));
    }
    static const int src_types[] = {CF_Q4_0, CF_Q8_0}, r8_types[] = {CF_Q4_0_R8, CF_Q8_0_R8};
    for (int k = 0; k < 2; k++) {
        for (int r = 0; r < ROWS; r++) quant_row(src_types[k], w + r * N, src + kern_row_bytes(src_types[k], N) * r, N);
        EXPECT_EQ_I(kern_repack(r8_types[k], src_types[k], src, ROWS, N, r8, err, sizeof err), 0);
        float ref[NT * 8], got[NT * 8];
        kern_r8_leaves_for(KERN_R8_SCALAR)->gemm[k](r8, quads, N / 32, N / 32, NT, ref, 8);
        for (int impl = KERN_R8_NEON; impl <= KERN_R8_DOTPROD; impl++) {
            if (!kern_r8_impl_available(impl)) continue;
            for (int nt = 1; nt <= NT; nt++) {
                kern_r8_leaves_for(impl)->gemm[k](r8, quads, N / 32, N / 32, nt, got, 8);
                for (int i = 0; i < nt * 8; i++)
                    EXPECT_MSG(got[i] == ref[i], "%s %s nt %d y[%d] = %.9g, scalar %.9g", kern_r8_impl_name(impl),
                               k ? "Q8_0_R8" : "Q4_0_R8", nt, i, got[i], ref[i]);
            }
        }
    }
    free(w), free(x), free(src), free(r8), free(a8), free(quads);
}

TEST(kern_neon, f32_rows_and_dequant) {
    if (strcmp(kern_isa_name(KERN_ISA_SIMD), "neon")) SKIP_HARDWARE("not an aarch64 build (NEON kernels)");
    static const int types[] = {CF_F32, CF_F16, CF_Q4_0, CF_Q8_0};
    enum { N = 544 }; /* 17 blocks: SIMD bodies and tails */
    float w[N], x[N], a[N], b[N];
    uint8_t wq[N * 4];
    fill(w, N, 11);
    fill(x, N, 13);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int type = types[ti];
        EXPECT(quant_row(type, w, wq, N) > 0);
        kern_dequant_row(type, wq, a, N);
        kern_dequant_row_isa(KERN_ISA_NEON, type, wq, b, N);
        for (int i = 0; i < N; i++) EXPECT_MSG(a[i] == b[i], "type %d dequant[%d] %.9g vs %.9g", type, i, b[i], a[i]);
        double mag = 0;
        for (int i = 0; i < N; i++) mag += fabs(a[i] * x[i]);
        const float ref = kern_dot_row(KERN_ISA_SCALAR, type, wq, x, N);
        const float got = kern_dot_row(KERN_ISA_NEON, type, wq, x, N);
        EXPECT_MSG(fabs(got - ref) <= 1e-5 * mag + 1e-6, "type %d dot %.9g, scalar %.9g", type, got, ref);
    }
}
