/*
 * test_kern_batch.c — the batch-invariance contract of the kernels: a
 * token's results are the same bits whether it is evaluated alone (decode:
 * the mat-vec paths), at any position of a batch of any size (the mat-mat
 * paths: 16-row tiles, 3-token f32 micro-kernels, 4-token q8 leaves and
 * their remainders, 8-token R8 leaves), with or without the thread pool.
 * That is what makes a reused KV prefix give a cold prefill's logits (the
 * library's prefix reuse, the server's cached requests); tests/test_exact.c
 * checks it end to end on real model files.
 *
 * Covered: matmul for every weight type the kernels take (F32, F16, BF16,
 * the 32-element and 256-element ggml types, Q8_K, the R8 types under every
 * impl this CPU runs), both activation modes (f32, act_quant), both ISAs;
 * shapes with partial row tiles and groups (n_out 45, R8 40) and inputs
 * spanning several of the f32 driver's KERN_MM_KC (512) slices, with
 * odd block counts (and an odd width for the plain float types).  Attention
 * (the 1- and 4-head SIMD paths and the scalar one, GQA, sliding window,
 * soft-capping) as one batch, two batches and token by token.  The row-wise
 * ops through the pool, as a batch and one token at a time, with widths
 * that are not a multiple of 8 (SIMD tails).
 */
#include <math.h>
#include <stdlib.h>

#include "base/pool.h"
#include "kernels/kern.h"
#include "kernels/kern_r8.h"
#include "kernels/kern_rk.h"
#include "kernels/quant.h"
#include "test.h"

static uint64_t g_rng = 0x853c49e6748fea9bULL;
static uint32_t rnd_u32(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static float rnd_f(float lo, float hi) { return lo + (hi - lo) * (float)(rnd_u32() & 0xffffff) / 16777216.0f; }
static void rnd_fill(float *x, long n, float lo, float hi) {
    for (long i = 0; i < n; i++) x[i] = rnd_f(lo, hi);
}

static int n_isas(void) { return kern_isa_available(KERN_ISA_AVX2) ? 2 : 1; }

/* First index where a and b differ in bits, or -1. */
static long first_diff(const float *a, const float *b, long n) {
    for (long i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a)) return i;
    return -1;
}

/* ---- weights of every type ------------------------------------------------------ */

typedef struct {
    int type;
    const char *name;
    int src; /* R8: the ggml type repacked from; otherwise == type */
} btype;

static const btype g_types[] = {
    {CF_F32, "F32", CF_F32},       {CF_F16, "F16", CF_F16},       {CF_BF16, "BF16", CF_BF16},
    {CF_Q4_0, "Q4_0", CF_Q4_0},    {CF_Q4_1, "Q4_1", CF_Q4_1},    {CF_Q5_0, "Q5_0", CF_Q5_0},
    {CF_Q5_1, "Q5_1", CF_Q5_1},    {CF_Q8_0, "Q8_0", CF_Q8_0},    {CF_IQ4_NL, "IQ4_NL", CF_IQ4_NL},
    {10, "Q2_K", 10},              {11, "Q3_K", 11},              {12, "Q4_K", 12},
    {13, "Q5_K", 13},              {14, "Q6_K", 14},              {15, "Q8_K", 15},
    {23, "IQ4_XS", 23},            {18, "IQ3_XXS", 18},           {21, "IQ3_S", 21},
    {34, "TQ1_0", 34},             {35, "TQ2_0", 35},             {CF_Q4_0_R8, "Q4_0_R8", CF_Q4_0},
    {CF_Q8_0_R8, "Q8_0_R8", CF_Q8_0},
};
#define N_TYPES (int)(sizeof g_types / sizeof g_types[0])

/* Byte offsets of the f16 scales in one block of the types quant_row cannot
 * write (random bytes elsewhere decode to valid codes): d, and a second one. */
static void scale_offsets(int type, int off[2], int *f32_d) {
    off[0] = off[1] = -1;
    *f32_d = 0;
    switch (type) {
    case 18: case 21: off[0] = 0; break;   /* IQ3_XXS, IQ3_S */
    case 34: off[0] = 52; break;           /* TQ1_0 */
    case 35: off[0] = 64; break;           /* TQ2_0 */
    case 15: *f32_d = 1; off[0] = 0; break; /* Q8_K: f32 d */
    default: break;
    }
}

/* n_out x n_in weights of T: ggml's quantizer on random floats where it
 * writes the type, random codes with sane scales otherwise, repacked for R8. */
static uint8_t *make_weights(const btype *T, int n_out, int n_in) {
    const size_t rb = kern_row_bytes(T->src, n_in);
    uint8_t *w = malloc(rb * (size_t)n_out);
    if (quant_type_supported(T->src)) {
        float *f = malloc(sizeof(float) * (size_t)n_in);
        for (int r = 0; r < n_out; r++) {
            rnd_fill(f, n_in, -0.5f, 0.5f);
            EXPECT_EQ_I(quant_row(T->src, f, w + rb * (size_t)r, n_in), rb);
        }
        free(f);
    } else {
        for (size_t i = 0; i < rb * (size_t)n_out; i++) w[i] = (uint8_t)rnd_u32();
        int off[2], f32_d;
        scale_offsets(T->src, off, &f32_d);
        const int bs = (int)kern_row_bytes(T->src, 256);
        for (long b = 0; b < (long)(rb / (size_t)bs) * n_out; b++) {
            uint8_t *blk = w + (size_t)b * bs;
            const float d = rnd_f(0.001f, 0.01f) * (rnd_u32() & 1 ? -1.0f : 1.0f);
            if (f32_d) {
                memcpy(blk, &d, 4);
                continue;
            }
            const uint16_t h = kern_f32_to_f16(d);
            for (int k = 0; k < 2; k++)
                if (off[k] >= 0) memcpy(blk + off[k], &h, 2);
        }
    }
    if (!kern_type_is_r8(T->type)) return w;
    uint8_t *r8 = malloc(kern_repack_bytes(T->type, n_out, n_in));
    char err[200];
    EXPECT_EQ_I(kern_repack(T->type, T->src, w, n_out, n_in, r8, err, sizeof err), 0);
    free(w);
    return r8;
}

/* ---- matmul ------------------------------------------------------------------------ */

enum { MM_TOK = 11 }; /* 2 groups of 4 + 3, 3 groups of 3 + 2, one of 8 + 3 */

/* Every token of a batch of MM_TOK (and of the sub-batch of tokens 3..8,
 * which puts each token at another position) against the same token alone:
 * bit-identical.  Returns the number of mismatching configurations. */
static int check_matmul(const cf_kernels *K, pool *P, const btype *T, int act_quant, int n_out, int n_in,
                        const char *label) {
    uint8_t *w = make_weights(T, n_out, n_in);
    float *x = malloc(sizeof(float) * (size_t)n_in * MM_TOK);
    float *yb = malloc(sizeof(float) * (size_t)n_out * MM_TOK), *ys = malloc(sizeof(float) * (size_t)n_out * 6);
    float *y1 = malloc(sizeof(float) * (size_t)n_out);
    rnd_fill(x, (long)n_in * MM_TOK, -2, 2);
    cf_env E = {.K = K, .pool = P, .n_ctx = 16, .act_quant = act_quant};
    K->matmul(&E, yb, x, w, T->type, n_out, n_in, MM_TOK);
    K->matmul(&E, ys, x + (size_t)3 * n_in, w, T->type, n_out, n_in, 6);
    int bad = 0;
    for (int t = 0; t < MM_TOK; t++) {
        K->matmul(&E, y1, x + (size_t)t * n_in, w, T->type, n_out, n_in, 1);
        long at = first_diff(y1, yb + (size_t)t * n_out, n_out);
        if (at < 0 && t >= 3 && t < 9) at = first_diff(y1, ys + (size_t)(t - 3) * n_out, n_out);
        if (at >= 0) {
            test_fail(__FILE__, __LINE__, "%s %s act_quant %d %dx%d: token %d alone %.9g, in a batch %.9g (row %ld)",
                      label, T->name, act_quant, n_out, n_in, t, y1[at],
                      t >= 3 && t < 9 && !memcmp(y1 + at, yb + (size_t)t * n_out + at, 4)
                          ? ys[(size_t)(t - 3) * n_out + at] : yb[(size_t)t * n_out + at], at);
            bad++;
            break;
        }
        if (!(isfinite(y1[0]) && isfinite(y1[n_out - 1]))) {
            test_fail(__FILE__, __LINE__, "%s %s act_quant %d: non-finite output %g", label, T->name, act_quant, y1[0]);
            bad++;
            break;
        }
    }
    free(w), free(x), free(yb), free(ys), free(y1);
    return bad;
}

/* n_in per type family: several KERN_MM_KC (512) slices,
 * an odd number of 32-blocks (the leaves' two accumulator chains), an odd
 * width for the plain float types (the 8-wide tails). */
static int n_in_for(int type) {
    const int blck = kern_type_block(type);
    return blck == 256 ? 2304 : blck == 32 ? 2080 + 32 : 1101;
}

TEST(kern_batch, matmul_every_type) {
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes_act(16, MM_TOK, 2304)), 0);
    /* aarch64: the plain NEON integer leaves, then the dotprod ones where the
     * CPU has them (elsewhere dp 1 is refused: one pass) */
    for (int dp = 0; dp < 2; dp++) {
        if (kern_neon_force_dotprod(dp)) continue;
        for (int ti = 0; ti < N_TYPES; ti++) {
            const btype *T = &g_types[ti];
            const int r8 = kern_type_is_r8(T->type), n_out = r8 ? 40 : 45, n_in = n_in_for(T->type);
            for (int isa = 0; isa < n_isas(); isa++) {
                const cf_kernels *K = kern_table(isa);
                char name[32];
                snprintf(name, sizeof name, "%s%s", kern_isa_name(isa), dp ? "+dotprod" : "");
                for (int aq = 0; aq < 2; aq++) {
                    if (!r8 || isa == KERN_ISA_SCALAR) {
                        check_matmul(K, P, T, aq, n_out, n_in, name);
                        continue;
                    }
                    for (int impl = KERN_R8_AVX2; impl < KERN_R8_IMPL_COUNT; impl++) { /* every R8 impl here */
                        if (!kern_r8_impl_available(impl)) continue;
                        EXPECT_EQ_I(kern_r8_force_impl(impl), 0);
                        check_matmul(K, P, T, aq, n_out, n_in, kern_r8_impl_name(impl));
                    }
                    kern_r8_force_impl(-1);
                }
            }
        }
    }
    kern_neon_force_dotprod(-1);
    pool_free(P);
}

/* Without a pool the act_quant drivers convert tokens in chunks through a
 * stack buffer: still the same bits. */
TEST(kern_batch, matmul_without_pool) {
    static const int types[] = {CF_Q4_1, CF_Q8_0, 12 /* Q4_K */, CF_Q4_0_R8, CF_F16};
    for (int i = 0; i < (int)(sizeof types / sizeof types[0]); i++)
        for (int ti = 0; ti < N_TYPES; ti++)
            if (g_types[ti].type == types[i])
                for (int aq = 0; aq < 2; aq++)
                    check_matmul(kern_table(kern_best_isa()), NULL, &g_types[ti], aq,
                                 kern_type_is_r8(types[i]) ? 40 : 45, n_in_for(types[i]), "no pool");
}

/* Activations beyond the range of the activation format's f16 scale (Q8_0 d
 * above 65504: |x| > 8.3e6; Q8_1 s = d·Σq; F16 activations above 65504)
 * must not turn a matmul into inf/NaN — and stay batch-invariant. */
TEST(kern_batch, matmul_huge_activations) {
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes_act(16, MM_TOK, 2304)), 0);
    static const int types[] = {CF_F16, CF_Q4_0, CF_Q4_1, CF_Q5_1, CF_Q8_0, CF_IQ4_NL, 12, CF_Q4_0_R8, CF_Q8_0_R8};
    enum { NO = 40, NI = 256 };
    for (int i = 0; i < (int)(sizeof types / sizeof types[0]); i++) {
        const btype *T = NULL;
        for (int ti = 0; ti < N_TYPES; ti++)
            if (g_types[ti].type == types[i]) T = &g_types[ti];
        uint8_t *w = make_weights(T, NO, NI);
        static float x[MM_TOK * NI], yq[MM_TOK * NO], yf[MM_TOK * NO], y1[NO];
        for (int isa = 0; isa < n_isas(); isa++) {
            const cf_kernels *K = kern_table(isa);
            rnd_fill(x, MM_TOK * NI, -1, 1);
            /* token 2: all values 1e5..2e5 (f16 inf, Q8_1 s overflows); token 5:
             * one element of 1e7 (Q8_0 d overflows); the others ordinary */
            for (int k = 0; k < NI; k++) x[2 * NI + k] = rnd_f(1e5f, 2e5f);
            x[5 * NI + 77] = 1e7f;
            cf_env E = {.K = K, .pool = P, .n_ctx = 16, .act_quant = 1};
            K->matmul(&E, yq, x, w, T->type, NO, NI, MM_TOK);
            E.act_quant = 0;
            K->matmul(&E, yf, x, w, T->type, NO, NI, MM_TOK);
            E.act_quant = 1;
            for (int t = 0; t < MM_TOK; t++) {
                K->matmul(&E, y1, x + (size_t)t * NI, w, T->type, NO, NI, 1);
                EXPECT_MSG(first_diff(y1, yq + (size_t)t * NO, NO) < 0, "%s %s: token %d alone differs",
                           kern_isa_name(isa), T->name, t);
                double sx = 0; /* |w| <= 0.5: the weights quantize U(-0.5, 0.5) */
                for (int k = 0; k < NI; k++) sx += fabs(x[(size_t)t * NI + k]);
                for (int r = 0; r < NO; r++) {
                    const float q = yq[(size_t)t * NO + r], f = yf[(size_t)t * NO + r];
                    if (!isfinite(q) || fabs(q - f) > 0.01 * 0.5 * sx) {
                        test_fail(__FILE__, __LINE__, "%s %s token %d row %d: act_quant %.9g vs f32 %.9g",
                                  kern_isa_name(isa), T->name, t, r, q, f);
                        break;
                    }
                }
            }
        }
        free(w);
    }
    pool_free(P);
}

/* ---- matmul_n ------------------------------------------------------------------------ */

/* cf_kernels.matmul_n (one job for several weights of one input) gives every
 * output the bits of its own matmul call: R8 groups (Q4_0_R8 and Q8_0_R8
 * mixed), RK groups (every RK type; CF_MATMUL_N_MAX weights with odd group
 * counts between, so later parts' groups start odd), a group the drivers
 * cannot fuse (F16 + Q4_0: matmul by matmul), decode and batch token counts, both activation
 * modes, every ISA and R8 impl, with the pool, without, and with a pool of 3
 * threads (segments whose bounds fall inside a weight). */
static void check_matmul_n(const cf_kernels *K, pool *P, const int *types, const int *src, int n, int n_in,
                           const char *label) {
    static const int n_outs[CF_MATMUL_N_MAX] = {40, 16, 24, 8, 8, 32, 16, 8};
    enum { NT = 11 };
    uint8_t *w[CF_MATMUL_N_MAX];
    const void *wv[CF_MATMUL_N_MAX];
    float *y[CF_MATMUL_N_MAX], *y1[CF_MATMUL_N_MAX];
    int n_out[CF_MATMUL_N_MAX];
    for (int i = 0; i < n; i++) {
        n_out[i] = n_outs[i];
        const btype T = {src[i], "src", src[i]};
        w[i] = make_weights(&T, n_out[i], n_in);
        if (types[i] != src[i]) {
            uint8_t *r = malloc(kern_repack_bytes(types[i], n_out[i], n_in));
            char err[200];
            EXPECT_EQ_I(kern_repack(types[i], src[i], w[i], n_out[i], n_in, r, err, sizeof err), 0);
            free(w[i]);
            w[i] = r;
        }
        wv[i] = w[i];
        y[i] = malloc(sizeof(float) * (size_t)n_out[i] * NT);
        y1[i] = malloc(sizeof(float) * (size_t)n_out[i] * NT);
    }
    float *x = malloc(sizeof(float) * (size_t)n_in * NT);
    rnd_fill(x, (long)n_in * NT, -2, 2);
    static const int toks[] = {1, 2, 4, 5, 11};
    for (int aq = 0; aq < 2; aq++)
        for (int k = 0; k < (int)(sizeof toks / sizeof toks[0]); k++) {
            const int nt = toks[k];
            cf_env E = {.K = K, .pool = P, .n_ctx = 16, .act_quant = aq};
            K->matmul_n(&E, n, y, x, wv, types, n_out, n_in, nt);
            for (int i = 0; i < n; i++) {
                K->matmul(&E, y1[i], x, w[i], types[i], n_out[i], n_in, nt);
                const long at = first_diff(y[i], y1[i], (long)n_out[i] * nt);
                EXPECT_MSG(at < 0, "%s: matmul_n weight %d (type %d) of %d, %d tokens, act_quant %d: element %ld "
                                   "%.9g, alone %.9g", label, i, types[i], n, nt, aq, at, at < 0 ? 0 : y[i][at],
                           at < 0 ? 0 : y1[i][at]);
                EXPECT_MSG(isfinite(y[i][0]), "%s: matmul_n weight %d: %g", label, i, y[i][0]);
            }
        }
    for (int i = 0; i < n; i++) free(w[i]), free(y[i]), free(y1[i]);
    free(x);
}

TEST(kern_batch, matmul_n_equals_each) {
    static const struct {
        int n, n_in, type[CF_MATMUL_N_MAX], src[CF_MATMUL_N_MAX];
    } groups[] = {
        {3, 2112, {CF_Q4_0_R8, CF_Q4_0_R8, CF_Q8_0_R8}, {CF_Q4_0, CF_Q4_0, CF_Q8_0}},
        {4, 2304, {CF_Q4_K_R8, CF_Q5_K_R8, CF_Q6_K_R8, CF_IQ4_XS_R8}, {12, 13, 14, 23}},
        {2, 2304, {CF_Q4_K_R8, CF_Q4_K_R8}, {12, 12}},
        {2, 2112, {CF_F16, CF_Q4_0}, {CF_F16, CF_Q4_0}},
        {2, 2304, {CF_Q4_0_R8, CF_Q6_K_R8}, {CF_Q4_0, 14}},
        {8, 2304, {CF_Q4_K_R8, CF_Q6_K_R8, CF_Q4_K_R8, CF_Q5_K_R8, CF_Q4_K_R8, CF_IQ4_XS_R8, CF_Q6_K_R8, CF_Q4_K_R8},
         {12, 14, 12, 13, 12, 23, 14, 12}}, /* CF_MATMUL_N_MAX, odd group counts between */
    };
    pool *P2 = NULL, *P3 = NULL;
    EXPECT_EQ_I(pool_new(2, &P2), 0);
    EXPECT_EQ_I(pool_new(3, &P3), 0);
    EXPECT_EQ_I(pool_reserve(P2, kern_scratch_bytes_act(16, 11, 2304)), 0);
    EXPECT_EQ_I(pool_reserve(P3, kern_scratch_bytes_act(16, 11, 2304)), 0);
    pool *pools[] = {P2, NULL, P3};
    for (int g = 0; g < (int)(sizeof groups / sizeof groups[0]); g++)
        for (int isa = 0; isa < n_isas(); isa++)
            for (int impl = -1; impl < KERN_R8_IMPL_COUNT; impl++) { /* -1: the default */
                if (impl >= 0 && (isa == KERN_ISA_SCALAR || !kern_r8_impl_available(impl))) continue;
                EXPECT_EQ_I(kern_r8_force_impl(impl), 0);
                for (int pi = 0; pi < 3; pi++) {
                    char label[64];
                    snprintf(label, sizeof label, "%s/%s, group %d, pool %d", kern_isa_name(isa),
                             impl < 0 ? "default" : kern_r8_impl_name(impl), g, pools[pi] ? pool_n_threads(pools[pi]) : 0);
                    check_matmul_n(kern_table(isa), pools[pi], groups[g].type, groups[g].src, groups[g].n,
                                   groups[g].n_in, label);
                }
            }
    kern_r8_force_impl(-1);
    pool_free(P2);
    pool_free(P3);
}

/* ---- attention --------------------------------------------------------------------- */

typedef struct {
    int n_head, n_head_kv, head_dim, window;
    float softcap;
} att_cfg;

TEST(kern_batch, attention) {
    enum { T = 13, CTX = 16 };
    static const att_cfg cfgs[] = {
        {8, 2, 64, 0, 0.0f},  /* 4 heads per kv head, head_dim % 16: the 4-head AVX-512 path */
        {6, 2, 40, 0, 0.0f},  /* groups of 3, head_dim % 8: the 1-head AVX2 path */
        {4, 4, 20, 0, 0.0f},  /* head_dim % 8 != 0: the portable loop */
        {8, 2, 64, 5, 30.0f}, /* sliding window and soft-capping */
    };
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes(CTX)), 0);
    for (int ci = 0; ci < (int)(sizeof cfgs / sizeof cfgs[0]); ci++) {
        const att_cfg *c = &cfgs[ci];
        const int qd = c->n_head * c->head_dim, kvd = c->n_head_kv * c->head_dim;
        float *q = malloc(sizeof(float) * T * qd), *k = malloc(sizeof(float) * T * kvd),
              *v = malloc(sizeof(float) * T * kvd);
        rnd_fill(q, (long)T * qd, -2, 2), rnd_fill(k, (long)T * kvd, -2, 2), rnd_fill(v, (long)T * kvd, -2, 2);
        for (int isa = 0; isa < n_isas(); isa++) {
            float *out[3], *kc[3], *vc[3];
            for (int m = 0; m < 3; m++) { /* 0: one batch, 1: 5 + 8 tokens, 2: token by token */
                out[m] = malloc(sizeof(float) * T * qd);
                kc[m] = calloc((size_t)CTX * kvd, sizeof(float));
                vc[m] = calloc((size_t)CTX * kvd, sizeof(float));
                void *const kv_k[1] = {kc[m]}, *const kv_v[1] = {vc[m]};
                cf_env E = {.K = kern_table(isa), .pool = P, .n_ctx = CTX, .kv_k = kv_k, .kv_v = kv_v};
                const int steps[3][T + 1] = {{T}, {5, 8}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}};
                for (int s = 0, pos = 0; pos < T; pos += steps[m][s++]) {
                    const int nt = steps[m][s];
                    E.pos = pos;
                    static const float sinks[16] = {0.5f, -1, 2, 0, 1, -0.25f, 3, -2, 0.5f, 1, -1, 0, 2, 1, -3, 0.75f};
                    E.K->attention(&E, out[m] + (size_t)pos * qd, q + (size_t)pos * qd, k + (size_t)pos * kvd,
                                   v + (size_t)pos * kvd, c->window ? sinks : NULL, 0, c->n_head, c->n_head_kv,
                                   c->head_dim, c->head_dim, 1.0f / sqrtf((float)c->head_dim), c->window, c->softcap,
                                   nt);
                }
            }
            for (int m = 1; m < 3; m++) {
                long at = first_diff(out[0], out[m], (long)T * qd);
                EXPECT_MSG(at < 0, "%s attention %d/%d heads, head_dim %d, window %d: %s differs at token %ld",
                           kern_isa_name(isa), c->n_head, c->n_head_kv, c->head_dim, c->window,
                           m == 1 ? "5 + 8 tokens" : "token by token", at / qd);
                EXPECT(first_diff(kc[0], kc[m], (long)T * kvd) < 0 && first_diff(vc[0], vc[m], (long)T * kvd) < 0);
            }
            for (int m = 0; m < 3; m++) free(out[m]), free(kc[m]), free(vc[m]);
        }
        free(q), free(k), free(v);
    }
    pool_free(P);
}

/* ---- row-wise ops ------------------------------------------------------------------- */

/* Each op over a batch of B tokens through the pool vs each token alone. */
TEST(kern_batch, row_ops) {
    enum { B = 23, N = 1001 }; /* N % 8 != 0: SIMD tails; B * N large enough to run threaded */
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes(16)), 0);
    static float a[B * N], b[B * N], w[N], bias[N], yb[B * N], y1[N];
    rnd_fill(a, B * N, -6, 6), rnd_fill(b, B * N, -3, 3), rnd_fill(w, N, 0.5f, 1.5f), rnd_fill(bias, N, -1, 1);
    for (int isa = 0; isa < n_isas(); isa++) {
        const cf_kernels *K = kern_table(isa);
        for (int op = 0; op < 7; op++) {
            static const char *names[] = {"rms_norm", "swiglu", "gelu", "geglu", "layer_norm", "rope", "add_row"};
            cf_env E = {.K = K, .pool = P, .n_ctx = 64, .pos = 7};
            for (int pass = 0; pass <= B; pass++) { /* pass 0: the batch; pass t + 1: token t alone */
                const int t0 = pass ? pass - 1 : 0, nt = pass ? 1 : B;
                const float *at = a + (size_t)t0 * N, *bt = b + (size_t)t0 * N;
                float *y = pass ? y1 : yb;
                E.pos = 7 + t0;
                switch (op) {
                case 0: K->rms_norm(&E, y, at, w, N, 1e-5f, nt); break;
                case 1: K->swiglu(&E, y, at, bt, N, nt); break;
                case 2: K->gelu(&E, y, at, N, nt); break;
                case 3: K->geglu(&E, y, at, bt, N, nt); break;
                case 4: K->layer_norm(&E, y, at, w, bias, N, 1e-5f, nt); break;
                case 5: /* 7 heads of 143 (odd), the first 100 rotated, neox layout, YaRN */
                    memcpy(y, at, sizeof(float) * (size_t)N * nt);
                    K->rope(&E, y, 7, 143, 100, 10000.0f, CF_ROPE_NEOX, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f, 4096,
                            NULL, nt);
                    break;
                case 6: K->add_row(&E, y, at, bias, N, nt); break;
                }
                if (pass) {
                    long d = first_diff(y1, yb + (size_t)t0 * N, N);
                    if (d >= 0) {
                        test_fail(__FILE__, __LINE__, "%s %s: token %d alone %.9g, in the batch %.9g (element %ld)",
                                  kern_isa_name(isa), names[op], t0, y1[d], yb[(size_t)t0 * N + d], d);
                        break;
                    }
                }
            }
        }
    }
    pool_free(P);
}

/* The per-head matmul of multi-head latent attention (kern_moe.c): a token's
 * outputs are the same bits alone and in a batch, for f32 and quantized
 * activations, plain and transposed.  (The expert matmul is the dense
 * matmul of each expert bit for bit: tests/test_kern_moe.c.) */
TEST(kern_batch, head_matmul) {
    enum { NH = 3, ROWS = 40, NT = 5 };
    static const int types[] = {CF_F32, CF_F16, CF_Q8_0, CF_Q4_0, CF_MXFP4};
    pool *P = NULL;
    EXPECT_EQ_I(pool_new(2, &P), 0);
    EXPECT_EQ_I(pool_reserve(P, kern_scratch_bytes(16)), 0);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int tr = 0; tr < 2; tr++) {
            const int type = types[ti], n_out = 32, n_in = tr ? 24 : 96, row_len = tr ? n_out : n_in;
            const size_t rb = kern_row_bytes(type, row_len);
            float *wf = malloc(sizeof(float) * (size_t)row_len);
            uint8_t *w = malloc(rb * NH * ROWS);
            for (int r = 0; r < NH * ROWS; r++) {
                rnd_fill(wf, row_len, -1, 1);
                quant_row(type, wf, w + (size_t)r * rb, row_len);
            }
            float *x = malloc(sizeof(float) * NT * NH * n_in), *scratch = malloc(sizeof(float) * NT * NH * n_in);
            float *yb = malloc(sizeof(float) * NT * NH * n_out), *y1 = malloc(sizeof(float) * NH * n_out);
            rnd_fill(x, (long)NT * NH * n_in, -1, 1);
            for (int isa = 0; isa < n_isas(); isa++)
                for (int aq = 0; aq < 2; aq++) {
                    cf_env E = {.K = kern_table(isa), .pool = P, .act_quant = aq, .n_ctx = 16};
                    E.K->head_matmul(&E, yb, x, w, type, n_out, n_in, NH, ROWS, 4, tr, scratch, NT);
                    for (int t = 0; t < NT; t++) {
                        E.K->head_matmul(&E, y1, x + (size_t)t * NH * n_in, w, type, n_out, n_in, NH, ROWS, 4, tr,
                                         scratch, 1);
                        const long d = first_diff(y1, yb + (size_t)t * NH * n_out, (long)NH * n_out);
                        EXPECT_MSG(d < 0, "head_matmul type %d %s act_quant %d transposed %d: token %d alone differs "
                                   "at %ld (%.9g vs %.9g in the batch)", type, kern_isa_name(isa),
                                   aq, tr, t, d, d < 0 ? 0.0 : y1[d], d < 0 ? 0.0 : yb[(size_t)t * NH * n_out + d]);
                    }
                }
            free(wf), free(w), free(x), free(scratch), free(yb), free(y1);
        }
    pool_free(P);
}
