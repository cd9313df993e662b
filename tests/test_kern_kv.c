/*
 * test_kern_kv.c — the attention kernel on each KV cache type (F32, F16,
 * Q8_0, Q4_0; K and V types mixed too), scalar and SIMD tables (AVX2 and
 * the AVX-512 four-head leaves on x86-64, NEON under make test-aarch64),
 * against a double-precision attention over the rows as stored (dequantized
 * by the scalar reference), and the stored rows against ggml's reference
 * quantizers byte for byte; every attention variant (GQA, sliding window,
 * soft-cap, sinks, latent values from the keys, bidirectional, head slices
 * that straddle quantization blocks, several tiles of keys); a batch of 7
 * tokens equals 7 single-token calls bit for bit; long prompt batches and
 * batches whose blocks a sliding window clips equal decode bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/f16.h"
#include "base/pool.h"
#include "engine/engine.h"
#include "kernels/kern.h"
#include "kernels/quant.h"
#include "test.h"

static const int kv_types[] = {CF_F32, CF_F16, CF_Q8_0, CF_Q4_0};
#define N_KV_TYPES 4

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static float rnd_f(float lo, float hi) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 40) & 0xffffff) / 16777216.0f;
}

typedef struct {
    int nh, nkv, hd, hdv, window;
    float softcap;
    int sinks, latent; /* latent: v == NULL, values = the keys' first hdv values */
} att_cfg;

/* out (n_tok, nh*hdv) in double from the cache rows as stored (positions
 * 0..pos+n_tok-1), dequantized by the scalar reference. */
static void att_ref(const att_cfg *c, int tk, int tv, const void *kc, const void *vc, const float *q,
                    const float *sinks, int pos, int n_tok, float scale, double *out) {
    const int kvd = c->nkv * c->hd, kvdv = c->latent ? kvd : c->nkv * c->hdv, n_all = pos + n_tok;
    const size_t kb = kern_kv_row_bytes(tk, kvd), vb = kern_kv_row_bytes(c->latent ? tk : tv, kvdv);
    float *K = malloc(sizeof(float) * (size_t)n_all * kvd), *V = malloc(sizeof(float) * (size_t)n_all * kvdv);
    for (int p = 0; p < n_all; p++) {
        kern_dequant_row(tk, (const char *)kc + (size_t)p * kb, K + (size_t)p * kvd, kvd);
        kern_dequant_row(c->latent ? tk : tv, (const char *)(c->latent ? kc : vc) + (size_t)p * vb,
                         V + (size_t)p * kvdv, kvdv);
    }
    double *s = malloc(sizeof(double) * (size_t)n_all);
    for (int t = 0; t < n_tok; t++)
        for (int h = 0; h < c->nh; h++) {
            const int kvh = h / (c->nh / c->nkv), voff = kvh * (c->latent ? c->hd : c->hdv);
            const int p_end = c->window < 0 ? n_all : pos + t + 1;
            const int p0 = c->window > 0 && p_end > c->window ? p_end - c->window : 0;
            double mx = -INFINITY, sum = 0;
            for (int p = p0; p < p_end; p++) {
                double d = 0;
                for (int i = 0; i < c->hd; i++)
                    d += (double)q[((size_t)t * c->nh + h) * c->hd + i] * K[(size_t)p * kvd + kvh * c->hd + i];
                d *= scale;
                if (c->softcap > 0) d = c->softcap * tanh(d / c->softcap);
                s[p] = d;
                if (d > mx) mx = d;
            }
            if (sinks && sinks[h] > mx) mx = sinks[h];
            for (int p = p0; p < p_end; p++) sum += s[p] = exp(s[p] - mx);
            if (sinks) sum += exp(sinks[h] - mx);
            for (int i = 0; i < c->hdv; i++) {
                double o = 0;
                for (int p = p0; p < p_end; p++) o += s[p] / sum * V[(size_t)p * kvdv + voff + i];
                out[((size_t)t * c->nh + h) * c->hdv + i] = o;
            }
        }
    free(s), free(K), free(V);
}

/* Store rows like the kernel must: ggml's reference conversion of each row. */
static void ref_rows(int type, const float *x, int n, int rows, char *dst) {
    const size_t rb = kern_kv_row_bytes(type, n);
    for (int r = 0; r < rows; r++) {
        if (type == CF_F32) memcpy(dst + r * rb, x + (size_t)r * n, rb);
        else if (type == CF_F16)
            for (int i = 0; i < n; i++) ((uint16_t *)(void *)(dst + r * rb))[i] = f32_to_f16(x[(size_t)r * n + i]);
        else quant_row(type, x + (size_t)r * n, dst + r * rb, n);
    }
}

TEST(kern_kv, attention_types_vs_double) {
    static const att_cfg cfg[] = {
        {4, 4, 64, 64, 0, 0, 0, 0},   {8, 2, 64, 64, 0, 0, 0, 0},  {16, 4, 64, 64, 0, 0, 0, 0},
        {8, 2, 128, 128, 0, 0, 0, 0}, {8, 2, 80, 80, 0, 0, 0, 0},  /* kv head 1 starts mid-block */
        {8, 2, 48, 48, 0, 0, 0, 0},  /* kv_dim 96: head slices straddle blocks */
        {8, 1, 64, 64, 5, 0, 0, 0},   {8, 2, 64, 64, 0, 30.0f, 0, 0}, {8, 2, 64, 64, 6, 0, 1, 0},
        {4, 1, 96, 64, 0, 0, 0, 1},   {16, 1, 96, 64, 0, 0, 0, 1}, /* latent: V = K's first 64 */
        {4, 2, 64, 64, CF_ATT_BIDIRECTIONAL, 0, 0, 0}, {8, 2, 64, 32, 0, 0, 0, 0},
        {16, 4, 128, 128, 0, 0, 0, 0}, {4, 2, 256, 256, 0, 0, 0, 0}}; /* several tiles of keys */
    enum { CTX = 100, POS = 90 };
    pool *P;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes(CTX)), 0);
    const int n_isa = kern_isa_available(KERN_ISA_SIMD) ? 2 : 1;
    if (n_isa == 1) test_not_run("the SIMD attention on KV cache types: this CPU lacks the SIMD ISA");
    double worst_all[N_KV_TYPES] = {0};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        const att_cfg *C = &cfg[c];
        const int kvd = C->nkv * C->hd, kvdv = C->nkv * C->hdv;
        for (int ti = 0; ti < N_KV_TYPES; ti++) {
            const int tk = kv_types[ti], tv = kv_types[(ti + (int)c) % N_KV_TYPES]; /* mixed pairs too */
            const size_t kb = kern_kv_row_bytes(tk, kvd), vb = kern_kv_row_bytes(tv, kvdv);
            EXPECT_MSG(kb && (C->latent || vb), "row bytes %s/%s of %d/%d", eng_kv_type_name(tk),
                       eng_kv_type_name(tv), kvd, kvdv);
            if (!kb || !vb) continue;
            for (int nt = 1; nt <= 7; nt += 6) {
                const int pos = C->window == CF_ATT_BIDIRECTIONAL ? 0 : POS;
                float *q = malloc(sizeof(float) * nt * C->nh * C->hd);
                float *k = malloc(sizeof(float) * (pos + nt) * kvd), *v = malloc(sizeof(float) * (pos + nt) * kvdv);
                float sinks[16];
                for (int i = 0; i < nt * C->nh * C->hd; i++) q[i] = rnd_f(-0.5f, 0.5f);
                for (int i = 0; i < (pos + nt) * kvd; i++) k[i] = rnd_f(-2, 2);
                for (int i = 0; i < (pos + nt) * kvdv; i++) v[i] = rnd_f(-1, 1);
                for (int h = 0; h < 16; h++) sinks[h] = rnd_f(-1, 2);
                char *kc[2], *vc[2], *want_k = malloc(kb * CTX), *want_v = malloc(vb * CTX);
                ref_rows(tk, k, kvd, pos + nt, want_k);
                ref_rows(tv, v, kvdv, pos + nt, want_v);
                float *o[2][2];
                double *ref = malloc(sizeof(double) * nt * C->nh * C->hdv);
                for (int isa = 0; isa < n_isa; isa++) {
                    kc[isa] = calloc(CTX, kb), vc[isa] = calloc(CTX, vb);
                    memcpy(kc[isa], want_k, kb * pos), memcpy(vc[isa], want_v, vb * pos);
                    for (int split = 0; split < 2; split++) { /* one batch, then token by token */
                        o[isa][split] = malloc(sizeof(float) * nt * C->nh * C->hdv);
                        void *kk[1] = {kc[isa]}, *vv[1] = {C->latent ? NULL : vc[isa]};
                        cf_env E = {.K = kern_table(isa), .pool = split ? NULL : P, .n_ctx = CTX, .pos = pos,
                                    .kv_k = kk, .kv_v = vv, .kv_type_k = tk, .kv_type_v = tv};
                        const float sc = 1.0f / sqrtf((float)C->hd);
                        for (int t0 = 0; t0 < nt; t0 += split ? 1 : nt) {
                            const int n = split ? 1 : nt;
                            E.pos = pos + t0;
                            E.K->attention(&E, o[isa][split] + (size_t)t0 * C->nh * C->hdv,
                                           q + (size_t)t0 * C->nh * C->hd, k + (size_t)(pos + t0) * kvd,
                                           C->latent ? NULL : v + (size_t)(pos + t0) * kvdv, C->sinks ? sinks : NULL,
                                           0, C->nh, C->nkv, C->hd, C->hdv, sc, C->window, C->softcap, n);
                            if (C->window == CF_ATT_BIDIRECTIONAL) break; /* one call sees the whole input */
                        }
                    }
                    EXPECT_MSG(!memcmp(kc[isa] + kb * pos, want_k + kb * pos, kb * nt) &&
                                   (C->latent || !memcmp(vc[isa] + vb * pos, want_v + vb * pos, vb * nt)),
                               "%s/%s %s: stored rows differ from ggml's reference conversion",
                               eng_kv_type_name(tk), eng_kv_type_name(tv), kern_isa_name(isa));
                    if (C->window != CF_ATT_BIDIRECTIONAL)
                        EXPECT_MSG(!memcmp(o[isa][0], o[isa][1], sizeof(float) * nt * C->nh * C->hdv),
                                   "cfg %zu %s/%s %s: a batch of %d differs from token-by-token calls", c,
                                   eng_kv_type_name(tk), eng_kv_type_name(tv), kern_isa_name(isa), nt);
                }
                att_ref(C, tk, tv, want_k, want_v, q, C->sinks ? sinks : NULL, pos, nt,
                        1.0f / sqrtf((float)C->hd), ref);
                for (int isa = 0; isa < n_isa; isa++) {
                    double worst = 0;
                    for (int i = 0; i < nt * C->nh * C->hdv; i++) {
                        const double e = fabs(ref[i] - o[isa][0][i]);
                        if (!(e <= worst)) worst = e;
                    }
                    if (worst > worst_all[ti]) worst_all[ti] = worst;
                    EXPECT_MSG(worst <= 1e-5, "cfg %zu (nh %d nkv %d hd %d/%d window %d softcap %g sinks %d latent %d) "
                               "%s/%s %s n_tok %d: |out - double| %.3g > 1e-5", c, C->nh, C->nkv, C->hd, C->hdv,
                               C->window, C->softcap, C->sinks, C->latent, eng_kv_type_name(tk),
                               eng_kv_type_name(tv), kern_isa_name(isa), nt, worst);
                    free(o[isa][0]), free(o[isa][1]), free(kc[isa]), free(vc[isa]);
                }
                free(ref), free(want_k), free(want_v), free(q), free(k), free(v);
            }
        }
    }
    printf("    worst |out - double| by K type: f32 %.2g, f16 %.2g, q8_0 %.2g, q4_0 %.2g\n", worst_all[0],
           worst_all[1], worst_all[2], worst_all[3]);
    pool_free(P);
}

/* A row that is not whole blocks: the engine refuses the type naming the layer. */
TEST(kern_kv, row_not_whole_blocks_refused) {
    static const int kv_dim[2] = {64, 80}, kv_dim_v[2] = {64, 80};
    cf_model_desc d = {.n_layer = 2, .kv_dim = kv_dim, .kv_dim_v = kv_dim_v};
    char err[256] = "";
    EXPECT_EQ_I(eng_kv_types_check(&d, CF_F16, CF_F16, err, sizeof err), 0);
    EXPECT_EQ_I(eng_kv_types_check(&d, CF_Q8_0, CF_F16, err, sizeof err), -1);
    EXPECT_MSG(strstr(err, "layer 1") && strstr(err, "80 values") && strstr(err, "q8_0"), "%s", err);
    EXPECT_EQ_I(eng_kv_types_check(&d, CF_F16, CF_Q4_0, err, sizeof err), -1);
    EXPECT_MSG(strstr(err, "V row") && strstr(err, "q4_0"), "%s", err);
    EXPECT_EQ_I((long)eng_kv_bytes(&d, 10, CF_Q8_0, CF_F32), 0); /* layer 1 refuses Q8_0 */
    EXPECT_EQ_I((long)eng_kv_bytes(&d, 10, CF_F16, CF_F32), 10L * (64 * 2 + 64 * 4 + 80 * 2 + 80 * 4));
}


/* Config c's attention of nt tokens at depth pos on a tk/tv cache (ctx
 * positions), decoded token by token and then as one batch on each pool of
 * P, on the scalar and (n_isa 2) SIMD tables: every batch must give the
 * decode's bits.  `what` names the case in the message. */
static void batch_vs_decode(const char *what, size_t c, const att_cfg *C, int tk, int tv, int pos, int nt,
                            int ctx, pool **P, int n_pool, int n_isa) {
    const int kvd = C->nkv * C->hd, kvdv = C->nkv * C->hdv;
    const size_t kb = kern_kv_row_bytes(tk, kvd), vb = kern_kv_row_bytes(tv, kvdv);
    if (!kb || !vb) return;
    const size_t no = (size_t)nt * C->nh * C->hdv;
    float *q = malloc(sizeof(float) * nt * C->nh * C->hd);
    float *k = malloc(sizeof(float) * (pos + nt) * kvd), *v = malloc(sizeof(float) * (pos + nt) * kvdv);
    float sinks[16];
    for (int i = 0; i < nt * C->nh * C->hd; i++) q[i] = rnd_f(-0.5f, 0.5f);
    for (int i = 0; i < (pos + nt) * kvd; i++) k[i] = rnd_f(-2, 2);
    for (int i = 0; i < (pos + nt) * kvdv; i++) v[i] = rnd_f(-1, 1);
    for (int h = 0; h < 16; h++) sinks[h] = rnd_f(-1, 2);
    char *pre_k = malloc(kb * ctx), *pre_v = malloc(vb * ctx);
    ref_rows(tk, k, kvd, pos, pre_k);
    ref_rows(tv, v, kvdv, pos, pre_v);
    float *want = malloc(sizeof(float) * no), *got = malloc(sizeof(float) * no);
    char *kc = malloc(kb * ctx), *vc = malloc(vb * ctx);
    for (int isa = 0; isa < n_isa; isa++)
        for (int run = 0; run <= n_pool; run++) { /* 0: decode; 1..n_pool: one batch on P[run-1] */
            memcpy(kc, pre_k, kb * pos), memcpy(vc, pre_v, vb * pos);
            void *kk[1] = {kc}, *vv[1] = {C->latent ? NULL : vc};
            cf_env E = {.K = kern_table(isa), .pool = run ? P[run - 1] : NULL, .n_ctx = ctx,
                        .kv_k = kk, .kv_v = vv, .kv_type_k = tk, .kv_type_v = tv};
            float *o = run ? got : want;
            for (int t0 = 0; t0 < nt; t0 += run ? nt : 1) {
                const int n = run ? nt : 1;
                E.pos = pos + t0;
                E.K->attention(&E, o + (size_t)t0 * C->nh * C->hdv, q + (size_t)t0 * C->nh * C->hd,
                               k + (size_t)(pos + t0) * kvd, C->latent ? NULL : v + (size_t)(pos + t0) * kvdv,
                               C->sinks ? sinks : NULL, 0, C->nh, C->nkv, C->hd, C->hdv,
                               1.0f / sqrtf((float)C->hd), C->window, C->softcap, n);
            }
            if (run)
                EXPECT_MSG(!memcmp(want, got, sizeof(float) * no),
                           "%s cfg %zu (nh %d nkv %d hd %d/%d window %d) %s/%s %s pool %d: a batch of %d at %d "
                           "differs from decode", what, c, C->nh, C->nkv, C->hd, C->hdv, C->window,
                           eng_kv_type_name(tk), eng_kv_type_name(tv), kern_isa_name(isa), run - 1, nt, pos);
        }
    free(q), free(k), free(v), free(pre_k), free(pre_v), free(want), free(got), free(kc), free(vc);
}

/* A long prompt batch (37 tokens at depth 300: several blocks of tokens in
 * att_block, a partial last block, several key tiles) equals token-by-token
 * decode bit for bit, on every cache type, scalar and SIMD, with the default
 * scratch and with one large enough for 8-token blocks of 4 heads, on 1 and
 * 2 threads; soft-cap, sinks, and sliding windows that clip every block or
 * only the later ones. */
TEST(kern_kv, long_prompt_batch_equals_decode) {
    static const att_cfg cfg[] = {
        {8, 2, 64, 64, 0, 0, 0, 0},     {16, 4, 64, 64, 0, 0, 0, 0}, {8, 2, 80, 80, 0, 0, 0, 0},
        {8, 2, 64, 64, 0, 30.0f, 1, 0}, {8, 1, 64, 64, 20, 0, 1, 0}, {16, 4, 64, 64, 325, 20.0f, 1, 0},
        {4, 1, 96, 64, 0, 0, 0, 1},     /* 4-head groups above (AVX-512 quads), 1-3 below */
        {4, 2, 64, 64, 0, 0, 0, 0},     {6, 2, 80, 80, 0, 30.0f, 1, 0}, {4, 4, 64, 64, 20, 0, 1, 0},
        {4, 2, 64, 64, 325, 20.0f, 1, 0}};
    enum { CTX = 400, POS = 300, NT = 37 };
    const int n_isa = kern_isa_available(KERN_ISA_SIMD) ? 2 : 1;
    if (n_isa == 1) test_not_run("the SIMD attention blocks: this CPU lacks the SIMD ISA");
    pool *P[3];
    EXPECT_EQ_I(pool_new(2, &P[0]), 0);
    EXPECT_EQ_I(pool_reserve(P[0], kern_scratch_bytes(CTX)), 0);
    EXPECT_EQ_I(pool_new(2, &P[1]), 0);
    EXPECT_EQ_I(pool_reserve(P[1], (size_t)8 * 4 * (POS + NT) * sizeof(float)), 0);
    EXPECT_EQ_I(pool_new(1, &P[2]), 0);
    EXPECT_EQ_I(pool_reserve(P[2], (size_t)8 * 4 * (POS + NT) * sizeof(float)), 0);
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (int ti = 0; ti < N_KV_TYPES; ti++)
            batch_vs_decode("long prompt", c, &cfg[c], kv_types[ti], kv_types[(ti + (int)c) % N_KV_TYPES], POS, NT,
                            CTX, P, 3, n_isa);
    for (int i = 0; i < 3; i++) pool_free(P[i]);
}

/* Sliding windows that clip inside a block of 8 tokens (att_block with the
 * tokens' first keys rising by 1..7 across the block) at several depths:
 * inside the prompt itself (depth 0, window 3), the first 2 tokens of a
 * block clipped (5, 11), every token clipped over several key tiles (120,
 * 100), and the clip starting at the block's 6th token (250, 255); head
 * groups of 4 (the AVX-512 four-head leaves), 3 with a head slice that
 * straddles quantization blocks, key slices too wide for the tile to hold
 * 8 + 7 rows (hd 1024: the block runs its tokens one by one) or with fewer
 * than 8 rows per tile (hd 2048); every cache type, K and V mixed too; a
 * batch equals decode bit for bit. */
TEST(kern_kv, window_blocks_equal_decode) {
    static const att_cfg heads[] = {{8, 2, 64, 64, 0, 0, 0, 0}, {6, 2, 80, 80, 0, 30.0f, 1, 0},
                                    {2, 1, 1024, 64, 0, 0, 0, 0}, {2, 1, 2048, 64, 0, 0, 1, 0}};
    static const int depth_window[][2] = {{0, 3}, {5, 11}, {120, 100}, {250, 255}};
    static const int pairs[][2] = {{CF_F32, CF_F32}, {CF_F16, CF_F16}, {CF_Q8_0, CF_Q8_0}, {CF_Q4_0, CF_Q4_0},
                                   {CF_F32, CF_Q8_0}, {CF_Q4_0, CF_F16}};
    enum { CTX = 280, NT = 21 };
    const int n_isa = kern_isa_available(KERN_ISA_SIMD) ? 2 : 1;
    if (n_isa == 1) test_not_run("the SIMD attention blocks: this CPU lacks the SIMD ISA");
    pool *P[2];
    EXPECT_EQ_I(pool_new(2, &P[0]), 0);
    EXPECT_EQ_I(pool_reserve(P[0], kern_scratch_bytes(CTX)), 0);
    EXPECT_EQ_I(pool_new(1, &P[1]), 0);
    EXPECT_EQ_I(pool_reserve(P[1], kern_scratch_bytes(CTX)), 0);
    for (size_t c = 0; c < sizeof heads / sizeof heads[0]; c++)
        for (size_t dw = 0; dw < sizeof depth_window / sizeof depth_window[0]; dw++) {
            const int wide = heads[c].hd >= 1024; /* one depth, the pairs with a Q8_0 side (test time) */
            att_cfg C = heads[c];
            C.window = depth_window[dw][1];
            for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
                if (!wide || (dw == 2 && (pairs[pi][0] == CF_Q8_0 || pairs[pi][1] == CF_Q8_0)))
                    batch_vs_decode("window", c, &C, pairs[pi][0], pairs[pi][1], depth_window[dw][0], NT, CTX, P,
                                    2, n_isa);
        }
    for (int i = 0; i < 2; i++) pool_free(P[i]);
}

/* An F16 cache, which the SIMD leaves read in place (kv_src h16), gives the
 * bits of an F32 cache holding the same values: decode and a prompt batch
 * (blocks of 8 with a pool scratch that holds them), scalar and SIMD
 * tables, 4-head groups (AVX-512), 1-3-head groups (AVX2 leaves), a head
 * size no SIMD leaf takes (36: the dequantized tile), latent values,
 * soft-cap and sinks, windows that clip inside blocks, K or V alone F16. */
TEST(kern_kv, f16_in_place_equals_f32) {
    static const att_cfg cfg[] = {
        {16, 4, 64, 64, 0, 0, 0, 0}, {8, 2, 128, 128, 0, 0, 0, 0}, {6, 2, 80, 80, 0, 30.0f, 1, 0},
        {12, 4, 40, 40, 0, 0, 0, 0}, {4, 1, 96, 64, 0, 0, 0, 1},   {8, 1, 64, 64, 20, 0, 1, 0},
        {16, 4, 64, 64, 301, 0, 0, 0}, {3, 1, 36, 36, 0, 0, 0, 0}};
    static const int pairs[][2] = {{CF_F16, CF_F16}, {CF_F16, CF_F32}, {CF_F32, CF_F16}};
    enum { CTX = 400, POS = 300, NT = 21 }; /* blocks of 8, 8 and 5 */
    const int n_isa = kern_isa_available(KERN_ISA_SIMD) ? 2 : 1;
    if (n_isa == 1) test_not_run("the SIMD leaves on an F16 cache: this CPU lacks the SIMD ISA");
    pool *P;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, (size_t)8 * 4 * (POS + NT) * sizeof(float)), 0);
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) {
            const att_cfg *C = &cfg[c];
            if (C->latent && pi) continue; /* the values are the keys' rows: one type */
            const int tk = pairs[pi][0], tv = C->latent ? tk : pairs[pi][1];
            const int kvd = C->nkv * C->hd, kvdv = C->nkv * C->hdv, n_all = POS + NT;
            const size_t no = (size_t)NT * C->nh * C->hdv;
            float *q = malloc(sizeof(float) * NT * C->nh * C->hd);
            float *k = malloc(sizeof(float) * n_all * kvd), *v = malloc(sizeof(float) * n_all * kvdv);
            float sinks[16];
            for (int i = 0; i < NT * C->nh * C->hd; i++) q[i] = rnd_f(-0.5f, 0.5f);
            /* values an F16 row holds exactly, so both caches store the same numbers */
            for (int i = 0; i < n_all * kvd; i++) k[i] = f16_to_f32(f32_to_f16(rnd_f(-2, 2)));
            for (int i = 0; i < n_all * kvdv; i++) v[i] = f16_to_f32(f32_to_f16(rnd_f(-1, 1)));
            for (int h = 0; h < 16; h++) sinks[h] = rnd_f(-1, 2);
            float *o[2] = {malloc(sizeof(float) * no), malloc(sizeof(float) * no)};
            for (int isa = 0; isa < n_isa; isa++)
                for (int batch = 0; batch < 2; batch++) {
                    for (int f32 = 0; f32 < 2; f32++) { /* 0: the tk/tv cache, 1: all F32 */
                        const int ck = f32 ? CF_F32 : tk, cv = f32 ? CF_F32 : tv;
                        const size_t kb = kern_kv_row_bytes(ck, kvd), vb = kern_kv_row_bytes(cv, kvdv);
                        char *kc = calloc(CTX, kb), *vc = calloc(CTX, vb);
                        ref_rows(ck, k, kvd, POS, kc);
                        ref_rows(cv, v, kvdv, POS, vc);
                        void *kk[1] = {kc}, *vv[1] = {C->latent ? NULL : vc};
                        cf_env E = {.K = kern_table(isa), .pool = P, .n_ctx = CTX, .kv_k = kk, .kv_v = vv,
                                    .kv_type_k = ck, .kv_type_v = cv};
                        for (int t0 = 0; t0 < NT; t0 += batch ? NT : 1) {
                            const int n = batch ? NT : 1;
                            E.pos = POS + t0;
                            E.K->attention(&E, o[f32] + (size_t)t0 * C->nh * C->hdv, q + (size_t)t0 * C->nh * C->hd,
                                           k + (size_t)(POS + t0) * kvd,
                                           C->latent ? NULL : v + (size_t)(POS + t0) * kvdv, C->sinks ? sinks : NULL,
                                           0, C->nh, C->nkv, C->hd, C->hdv, 1.0f / sqrtf((float)C->hd), C->window,
                                           C->softcap, n);
                        }
                        free(kc), free(vc);
                    }
                    EXPECT_MSG(!memcmp(o[0], o[1], sizeof(float) * no),
                               "cfg %zu (nh %d nkv %d hd %d/%d window %d) %s/%s %s %s: differs from an F32 cache "
                               "of the same values", c, C->nh, C->nkv, C->hd, C->hdv, C->window,
                               eng_kv_type_name(tk), eng_kv_type_name(tv), kern_isa_name(isa),
                               batch ? "batch of 21" : "decode");
                }
            free(o[0]), free(o[1]), free(q), free(k), free(v);
        }
    pool_free(P);
}

/* Decode on pools of 1, 2 and 3 threads equals decode without a pool bit
 * for bit: thread ranges of heads that start inside a kv head's group and
 * span several kv heads (10/5, 12/3 on 3 threads), 4-head groups (8/2),
 * and a head slice too wide for a common tile grid (hd 2048 on a Q8_0
 * cache: the range runs its kv heads one by one). */
TEST(kern_kv, decode_partitions_equal) {
    static const att_cfg cfg[] = {{10, 5, 64, 64, 0, 0, 0, 0}, {12, 3, 64, 64, 0, 0, 1, 0},
                                  {8, 2, 64, 64, 0, 0, 0, 0}, {4, 2, 2048, 64, 0, 0, 0, 0}};
    static const int types[] = {CF_F16, CF_Q8_0, CF_F32};
    enum { CTX = 200, POS = 150, NT = 3 };
    pool *P[3];
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ_I(pool_new(i + 1, &P[i]), 0);
        EXPECT_EQ_I(pool_reserve(P[i], kern_scratch_bytes(CTX)), 0);
    }
    const int isa = kern_isa_available(KERN_ISA_SIMD) ? KERN_ISA_SIMD : KERN_ISA_SCALAR;
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
            const att_cfg *C = &cfg[c];
            const int tk = types[ti], kvd = C->nkv * C->hd, kvdv = C->nkv * C->hdv, n_all = POS + NT;
            const size_t kb = kern_kv_row_bytes(tk, kvd), vb = kern_kv_row_bytes(tk, kvdv), no = (size_t)NT * C->nh * C->hdv;
            float *q = malloc(sizeof(float) * NT * C->nh * C->hd);
            float *k = malloc(sizeof(float) * n_all * kvd), *v = malloc(sizeof(float) * n_all * kvdv);
            float sinks[16];
            for (int i = 0; i < NT * C->nh * C->hd; i++) q[i] = rnd_f(-0.5f, 0.5f);
            for (int i = 0; i < n_all * kvd; i++) k[i] = rnd_f(-2, 2);
            for (int i = 0; i < n_all * kvdv; i++) v[i] = rnd_f(-1, 1);
            for (int h = 0; h < 16; h++) sinks[h] = rnd_f(-1, 2);
            float *want = malloc(sizeof(float) * no), *got = malloc(sizeof(float) * no);
            for (int run = 0; run <= 3; run++) { /* 0: no pool; then pools of 1, 2, 3 threads */
                char *kc = calloc(CTX, kb), *vc = calloc(CTX, vb);
                ref_rows(tk, k, kvd, POS, kc);
                ref_rows(tk, v, kvdv, POS, vc);
                void *kk[1] = {kc}, *vv[1] = {vc};
                cf_env E = {.K = kern_table(isa), .pool = run ? P[run - 1] : NULL, .n_ctx = CTX, .kv_k = kk,
                            .kv_v = vv, .kv_type_k = tk, .kv_type_v = tk};
                float *o = run ? got : want;
                for (int t = 0; t < NT; t++) {
                    E.pos = POS + t;
                    E.K->attention(&E, o + (size_t)t * C->nh * C->hdv, q + (size_t)t * C->nh * C->hd,
                                   k + (size_t)(POS + t) * kvd, v + (size_t)(POS + t) * kvdv, C->sinks ? sinks : NULL,
                                   0, C->nh, C->nkv, C->hd, C->hdv, 1.0f / sqrtf((float)C->hd), 0, 0.0f, 1);
                }
                if (run)
                    EXPECT_MSG(!memcmp(want, got, sizeof(float) * no), "cfg %zu (nh %d nkv %d hd %d) %s %s: decode on "
                               "%d threads differs from no pool", c, C->nh, C->nkv, C->hd, eng_kv_type_name(tk),
                               kern_isa_name(isa), run);
                free(kc), free(vc);
            }
            free(want), free(got), free(q), free(k), free(v);
        }
    for (int i = 0; i < 3; i++) pool_free(P[i]);
}
