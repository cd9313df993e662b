/*
 * test_kern_att.c — the SIMD attention paths (kern_att_avx2.c one head,
 * kern_att_avx512.c four heads sharing a kv head) against the scalar kernel
 * table on the same inputs: GQA group sizes 1, 2, 4, 8, head_dim 64, 72
 * (one-head path), 128 (two 64-dim passes), sliding window and soft-capping,
 * a prefix already in the cache (pos > 0), 1 and 7 tokens, no pool and a
 * 2-thread pool.  Bound: 1e-5 absolute per output; with |v| <= 1 and softmax
 * weights summing to 1 every output is a convex combination of magnitude <= 1.
 */
#include <math.h>
#include <stdlib.h>

#include "kernels/kern.h"
#include "kernels/kern_r8.h"
#include "base/pool.h"
#include "test.h"

static uint64_t g_rng = 0x853c49e6748fea9bULL;
static float rnd_f(float lo, float hi) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 40) & 0xffffff) / 16777216.0f;
}

TEST(kern_att, simd_vs_scalar) {
    if (!kern_isa_available(KERN_ISA_AVX2)) SKIP_HARDWARE("no AVX2 on this CPU");
    static const struct { int nh, nkv, hd, window; float softcap; } cfg[] = {
        {4, 4, 64, 0, 0}, {4, 2, 64, 0, 0}, {8, 2, 64, 0, 0}, {16, 2, 64, 0, 0}, {8, 2, 128, 0, 0},
        {8, 2, 72, 0, 0}, {8, 1, 64, 5, 0}, {8, 2, 64, 0, 30.0f}, {8, 2, 32, 0, 0}};
    enum { CTX = 40, POS = 20 };
    pool *P;
    if (!kern_r8_impl_available(KERN_R8_VNNI))
        test_not_run("AVX-512 4-head attention (kern_att_avx512.c): this CPU lacks AVX-512 VNNI; "
                     "the AVX2 one-head path is checked");
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes(CTX)), 0);
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        const int nh = cfg[c].nh, nkv = cfg[c].nkv, hd = cfg[c].hd, kvd = nkv * hd;
        for (int nt = 1; nt <= 7; nt += 6) {
            float *q = malloc(sizeof(float) * nt * nh * hd), *k = malloc(sizeof(float) * nt * kvd);
            float *v = malloc(sizeof(float) * nt * kvd);
            float *o[2] = {malloc(sizeof(float) * nt * nh * hd), malloc(sizeof(float) * nt * nh * hd)};
            float *kc[2], *vc[2];
            for (int i = 0; i < nt * nh * hd; i++) q[i] = rnd_f(-2, 2);
            for (int i = 0; i < nt * kvd; i++) k[i] = rnd_f(-2, 2), v[i] = rnd_f(-1, 1);
            float *pk = malloc(sizeof(float) * POS * kvd), *pv = malloc(sizeof(float) * POS * kvd);
            for (int i = 0; i < POS * kvd; i++) pk[i] = rnd_f(-2, 2), pv[i] = rnd_f(-1, 1);
            for (int run = 0; run < 2; run++) {
                kc[run] = calloc((size_t)CTX * kvd, sizeof(float));
                vc[run] = calloc((size_t)CTX * kvd, sizeof(float));
                memcpy(kc[run], pk, sizeof(float) * POS * kvd);
                memcpy(vc[run], pv, sizeof(float) * POS * kvd);
            }
            for (int pi = 0; pi < 2; pi++) {
                for (int run = 0; run < 2; run++) { /* 0 scalar, 1 avx2 */
                    void *kk[1] = {kc[run]}, *vv[1] = {vc[run]};
                    cf_env E = {.K = kern_table(run ? KERN_ISA_AVX2 : KERN_ISA_SCALAR), .pool = pi ? P : NULL,
                                .n_ctx = CTX, .pos = POS, .kv_k = kk, .kv_v = vv};
                    E.K->attention(&E, o[run], q, k, v, NULL, 0, nh, nkv, hd, hd, 1.0f / sqrtf((float)hd),
                                   cfg[c].window, cfg[c].softcap, nt);
                }
                double worst = 0;
                for (int i = 0; i < nt * nh * hd; i++) {
                    const double e = fabs((double)o[0][i] - o[1][i]) / 1e-5;
                    if (!(e <= worst)) worst = e;
                }
                EXPECT_MSG(worst <= 1.0, "nh %d nkv %d hd %d window %d softcap %g n_tok %d pool %d: err %.3g x 1e-5",
                           nh, nkv, hd, cfg[c].window, cfg[c].softcap, nt, pi, worst);
            }
            for (int run = 0; run < 2; run++) free(kc[run]), free(vc[run]), free(o[run]);
            free(q), free(k), free(v), free(pk), free(pv);
        }
    }
    pool_free(P);
}

/* Bidirectional attention (window CF_ATT_BIDIRECTIONAL, the encoders'):
 * every query of the batch sees every key at positions 0..pos+n_tok-1, its
 * later neighbours too.  Scalar and SIMD tables (one-head and four-head
 * paths) against the definition in double; 1e-5 absolute as above. */
TEST(kern_att, bidirectional_vs_naive) {
    static const struct { int nh, nkv, hd; } cfg[] = {{4, 4, 32}, {8, 2, 64}, {8, 2, 72}, {4, 1, 20}};
    enum { CTX = 24 };
    pool *P;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes(CTX)), 0);
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (int isa = KERN_ISA_SCALAR; isa <= KERN_ISA_AVX2; isa++) {
            if (!kern_isa_available(isa)) continue;
            const int nh = cfg[c].nh, nkv = cfg[c].nkv, hd = cfg[c].hd, kvd = nkv * hd;
            const int pos = c % 2 ? 3 : 0, nt = 9; /* a cached prefix (pos 3) joins the keys */
            float *q = malloc(sizeof(float) * nt * nh * hd), *k = malloc(sizeof(float) * nt * kvd);
            float *v = malloc(sizeof(float) * nt * kvd), *o = malloc(sizeof(float) * nt * nh * hd);
            float *kc = calloc((size_t)CTX * kvd, sizeof(float)), *vc = calloc((size_t)CTX * kvd, sizeof(float));
            for (int i = 0; i < pos * kvd; i++) kc[i] = rnd_f(-2, 2), vc[i] = rnd_f(-1, 1);
            for (int i = 0; i < nt * nh * hd; i++) q[i] = rnd_f(-2, 2);
            for (int i = 0; i < nt * kvd; i++) k[i] = rnd_f(-2, 2), v[i] = rnd_f(-1, 1);
            const float scale = 1.0f / sqrtf((float)hd);
            for (int pi = 0; pi < 2; pi++) {
                void *kk[1] = {kc}, *vv[1] = {vc};
                cf_env E = {.K = kern_table(isa), .pool = pi ? P : NULL, .n_ctx = CTX, .pos = pos, .kv_k = kk,
                            .kv_v = vv};
                E.K->attention(&E, o, q, k, v, NULL, 0, nh, nkv, hd, hd, scale, CF_ATT_BIDIRECTIONAL, 0.0f, nt);
                double worst = 0;
                const int n_kv = pos + nt;
                for (int t = 0; t < nt; t++)
                    for (int h = 0; h < nh; h++) {
                        const int kvh = h / (nh / nkv);
                        double s[CTX], mx = -1e300, sum = 0;
                        for (int p = 0; p < n_kv; p++) {
                            double d = 0;
                            for (int i = 0; i < hd; i++)
                                d += (double)q[(t * nh + h) * hd + i] * kc[p * kvd + kvh * hd + i];
                            s[p] = d * scale;
                            if (s[p] > mx) mx = s[p];
                        }
                        for (int p = 0; p < n_kv; p++) sum += (s[p] = exp(s[p] - mx));
                        for (int i = 0; i < hd; i++) {
                            double want = 0;
                            for (int p = 0; p < n_kv; p++) want += s[p] / sum * vc[p * kvd + kvh * hd + i];
                            const double e = fabs(want - o[(t * nh + h) * hd + i]) / 1e-5;
                            if (!(e <= worst)) worst = e;
                        }
                    }
                EXPECT_MSG(worst <= 1.0, "%s nh %d nkv %d hd %d pos %d pool %d: err %.3g x 1e-5", kern_isa_name(isa),
                           nh, nkv, hd, pos, pi, worst);
            }
            free(q), free(k), free(v), free(o), free(kc), free(vc);
        }
    pool_free(P);
}
