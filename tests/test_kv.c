/*
 * test_kv.c — KV cache types (issue 22: F32, F16, Q8_0, Q4_0; K and V
 * chosen separately).
 *
 *  - kv_kern/...: the attention kernel on each cache type, scalar and SIMD
 *    tables, against a double-precision attention over the rows as stored
 *    (dequantized by the scalar reference), and the stored rows against
 *    ggml's reference quantizers byte for byte; every attention variant
 *    (GQA, sliding window, soft-cap, sinks, latent values from the keys,
 *    bidirectional, a head slice that straddles quantization blocks); a
 *    batch of 7 tokens equals 7 single-token calls bit for bit.
 *  - kv/parity_...: real models against llama.cpp's F32-cache references with
 *    each cache type: cosine, argmax and max abs of the last-position logits
 *    and the teacher-forced greedy steps (F16 must keep cosine >= 0.9999).
 *    CINFER_KV_REPORT=1 runs every archgen family and prints the table of
 *    docs/memory.md.
 *  - kv/session_...: save/load round trip per type (the restored session
 *    continues bit for bit) and a file of other types refused clearly.
 *  - kv/plan_...: the plan's KV bytes per type, the ladder's KV step.
 */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/f16.h"
#include "base/pool.h"
#include "cinfer.h"
#include "compiler/compile.h"
#include "engine/engine.h"
#include "formats/gguf.h"
#include "formats/quantize.h"
#include "kernels/kern.h"
#include "kernels/kern_r8.h"
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

/* ==== the kernel ================================================================ */

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

TEST(kv_kern, attention_types_vs_double) {
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
TEST(kv_kern, row_not_whole_blocks_refused) {
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

/* ==== whole models ================================================================ */

typedef struct {
    gguf_file *g;
    cc_module *mod;
    eng_model em;
    eng_ctx *ctx;
} loaded;

static void unload(loaded *l) {
    eng_ctx_free(l->ctx);
    eng_model_release(&l->em);
    cc_module_free(l->mod);
    gguf_close(l->g);
    memset(l, 0, sizeof *l);
}

static int load(const char *path, int act_quant, int tk, int tv, loaded *l, char *err, size_t el) {
    memset(l, 0, sizeof *l);
    cc_options o = {.mode = CC_JIT};
    eng_ctx_opts eo = {.n_ctx = 512, .n_threads = 1, .act_quant = act_quant, .kv_type_k = tk, .kv_type_v = tv};
    if (gguf_open(path, &l->g, err, el) || cc_build(l->g, &o, &l->mod, err, el) ||
        eng_model_bind(&l->em, l->g, l->mod->desc, l->mod->forward, err, el) ||
        eng_ctx_open(&l->em, &eo, &l->ctx, err, el)) {
        unload(l);
        return -1;
    }
    return 0;
}

typedef struct {
    double cos;     /* worst over the prompts, last-position logits */
    double max_abs; /* over the last-position logits of every prompt and every step's reference top 5 */
    int argmax_ok;  /* prompts whose last-position argmax is llama.cpp's */
    int agree, steps; /* teacher-forced greedy steps picking llama.cpp's token */
    int n_prompts;
} kv_stats;

/* Evaluate every prompt of ref on the loaded model (cache types as opened):
 * last-position logits (cosine, max abs, argmax), then the greedy steps
 * teacher-forced on llama.cpp's ids. */
static int measure(loaded *l, const cJSON *ref, kv_stats *st, char *err, size_t el) {
    memset(st, 0, sizeof *st);
    st->cos = 1;
    const int n_vocab = l->mod->desc->n_vocab;
    const cJSON *pr;
    cJSON_ArrayForEach(pr, cJSON_GetObjectItem(ref, "prompts")) {
        int ids[600], n = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(pr, "prompt_ids")) if (n < 600) ids[n++] = e->valueint;
        eng_truncate(l->ctx, 0);
        if (eng_eval(l->ctx, ids, n, err, el)) return -1;
        const float *lg = eng_logits(l->ctx);
        double dot = 0, na = 0, nb = 0, best = -INFINITY;
        int i = 0, ref_arg = 0;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(pr, "logits_last")) {
            if (i >= n_vocab) break;
            const double r = e->valuedouble, x = lg[i];
            dot += r * x, na += x * x, nb += r * r;
            if (!(fabs(r - x) <= st->max_abs)) st->max_abs = fabs(r - x);
            if (r > best) best = r, ref_arg = i;
            i++;
        }
        const double c = dot / (sqrt(na) * sqrt(nb) + 1e-30);
        if (!(c >= st->cos)) st->cos = c;
        st->argmax_ok += argmax_f32(lg, n_vocab) == ref_arg;
        const cJSON *gids = cJSON_GetObjectItem(pr, "greedy_ids"), *steps = cJSON_GetObjectItem(pr, "greedy_steps");
        const int n_g = cJSON_GetArraySize(gids);
        for (int s = 0; s < n_g; s++) {
            lg = eng_logits(l->ctx);
            const int want = cJSON_GetArrayItem(gids, s)->valueint;
            st->agree += argmax_f32(lg, n_vocab) == want;
            st->steps++;
            const cJSON *t5 = steps ? cJSON_GetArrayItem(steps, s) : NULL;
            const cJSON *t5i = cJSON_GetObjectItem(t5, "top5_ids"), *t5l = cJSON_GetObjectItem(t5, "top5_logits");
            for (int r = 0; t5i && r < cJSON_GetArraySize(t5i); r++) {
                const double d = fabs(lg[cJSON_GetArrayItem(t5i, r)->valueint] -
                                      cJSON_GetArrayItem(t5l, r)->valuedouble);
                if (!(d <= st->max_abs)) st->max_abs = d;
            }
            if (s + 1 < n_g && eng_eval(l->ctx, &want, 1, err, el)) return -1;
        }
        st->n_prompts++;
    }
    return 0;
}

/* The archgen model of family (F32), written on first use into the test's
 * temporary directory (as test_parity.c's arch_model). */
static const char *arch_model(const char *family) {
    static char path[1200];
    char cmd[3000];
    const char *build = getenv("CINFER_BUILD");
    snprintf(path, sizeof path, "%s/%s.gguf", test_tmpdir(), family);
    if (!access(path, R_OK)) return path;
    char *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s/tools/archgen' -o '%s' --vocab-from '%s' %s", build && *build ? build : "build",
             test_tmpdir(), shared_path("models/stories260K/stories260K.gguf"), family);
    const int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0, "%s: %s", cmd, out ? out : "");
    free(out);
    return st ? NULL : path;
}

/* Minimum cosine per cache type (K = V) the parity tests hold every model to
 * (measured minima and their margins: docs/memory.md). */
static const double kv_min_cos[N_KV_TYPES] = {0.99999, 0.9999, 0.995, 0.8};

/* One model against its reference with K = V = each type; prints one line
 * per type; the F32 cache must also keep every greedy step. */
static void check_model_types(const char *label, const char *model, const char *ref_path, int act_quant) {
    cJSON *ref = read_json(ref_path);
    EXPECT_MSG(ref, "cannot parse %s", ref_path);
    if (!ref) return;
    for (int ti = 0; ti < N_KV_TYPES; ti++) {
        loaded l;
        char err[512];
        if (load(model, act_quant, kv_types[ti], kv_types[ti], &l, err, sizeof err)) {
            const int refused = strstr(err, "not a multiple of") != NULL;
            EXPECT_MSG(refused && kv_types[ti] != CF_F32 && kv_types[ti] != CF_F16, "%s %s: %s", label,
                       eng_kv_type_name(kv_types[ti]), err);
            printf("    %-22s %-5s refused: %s\n", label, eng_kv_type_name(kv_types[ti]), err);
            continue;
        }
        kv_stats st;
        if (measure(&l, ref, &st, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "%s %s: %s", label, eng_kv_type_name(kv_types[ti]), err);
            unload(&l);
            break;
        }
        printf("    %-22s %-5s cosine %.9f  max abs %.3g  argmax %d/%d  greedy %d/%d\n", label,
               eng_kv_type_name(kv_types[ti]), st.cos, st.max_abs, st.argmax_ok, st.n_prompts, st.agree, st.steps);
        EXPECT_MSG(st.n_prompts >= 3, "%s: %d prompts", ref_path, st.n_prompts);
        EXPECT_MSG(st.cos >= kv_min_cos[ti], "%s %s: cosine %.9f < %.9g", label, eng_kv_type_name(kv_types[ti]),
                   st.cos, kv_min_cos[ti]);
        unload(&l);
    }
    cJSON_Delete(ref);
}

TEST(kv, parity_shared_models) {
    static const struct { const char *label, *model, *ref; int act_quant; } m[] = {
        {"stories260K", "models/stories260K/stories260K.gguf", "reference/stories260K.json", 0},
        {"tinystories Q8_0", "models/tinystories-656k/tinystories-656k-q8_0.gguf",
         "reference/dequant-f32/tinystories-656k-q8_0.json", 0},
        {"tinystories Q8_0 q8", "models/tinystories-656k/tinystories-656k-q8_0.gguf",
         "reference/tinystories-656k-q8_0.json", 1},
    };
    int ran = 0;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        const char *model = shared_path(m[i].model), *ref = shared_path(m[i].ref);
        if (!model || !ref) continue;
        char mp[1024], rp[1024];
        snprintf(mp, sizeof mp, "%s", model);
        snprintf(rp, sizeof rp, "%s", ref);
        check_model_types(m[i].label, mp, rp, m[i].act_quant);
        ran++;
    }
    if (!ran) SKIP("%s: no shared model with its reference", shared_root());
}

/* The attention variants on the archgen models (F32 files, f32 activations
 * against llama.cpp's F32 run): plain GQA (llama), sliding window +
 * soft-cap (gemma2), sinks + window (gpt-oss), latent attention with the
 * values in the K cache (deepseek2), shared-KV layers (gemma4). */
static void check_families(const char *const *fam, size_t n) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("%s absent (the vocabulary)", shared_root());
    for (size_t i = 0; i < n; i++) {
        const char *model = arch_model(fam[i]);
        if (!model) return;
        char mp[1200], rp[600];
        snprintf(mp, sizeof mp, "%s", model);
        snprintf(rp, sizeof rp, "tests/data/arch/%s.json", fam[i]);
        check_model_types(fam[i], mp, rp, 0);
    }
}

TEST(kv, parity_arch_variants) {
    static const char *const fam[] = {"llama", "gemma2", "gpt-oss", "deepseek2", "gemma4"};
    check_families(fam, sizeof fam / sizeof fam[0]);
}

/* Every decoder family (CINFER_KV_REPORT=1; about a minute): the table of
 * docs/memory.md. */
TEST(kv, parity_report_all_families) {
    if (!getenv("CINFER_KV_REPORT")) {
        test_not_run("every archgen family with each KV cache type (CINFER_KV_REPORT=1)");
        return;
    }
    char *out = NULL;
    const char *build = getenv("CINFER_BUILD");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "'%s/tools/archgen' --list", build && *build ? build : "build");
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    const char *fam[64];
    size_t n = 0;
    for (char *line = out ? strtok(out, "\n") : NULL; line && n < 64; line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        if (tab) *tab = 0;
        if (strstr(tab ? tab + 1 : "", "encoder")) continue; /* embeddings, no logits: test_encoder.c */
        char rp[600];
        snprintf(rp, sizeof rp, "tests/data/arch/%s.json", line);
        if (!access(rp, R_OK)) fam[n++] = line;
    }
    check_families(fam, n);
    free(out);
}

/* ==== sessions ===================================================================== */

static cinfer_model *open_stories(int tk, int tv, char *err, size_t el) {
    const char *path = shared_path("models/stories260K/stories260K.gguf");
    if (!path) return NULL;
    cinfer_model *m = NULL;
    cinfer_model_options mo = {.cache_type_k = tk, .cache_type_v = tv};
    if (cinfer_model_open(path, &mo, &m, err, el)) return NULL;
    return m;
}

TEST(kv, session_round_trip_per_type) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("%s absent", shared_root());
    static const int types[] = {CINFER_KV_F32, CINFER_KV_F16, CINFER_KV_Q8_0, CINFER_KV_Q4_0};
    char err[512], path[1200];
    for (int ti = 0; ti < 4; ti++) {
        const int tv = types[(ti + 1) % 4]; /* K and V differ */
        cinfer_model *m = open_stories(types[ti], tv, err, sizeof err);
        EXPECT_MSG(m, "open: %s", err);
        if (!m) return;
        cinfer_session *a = NULL, *b = NULL;
        EXPECT_EQ_I(cinfer_session_new(m, &(cinfer_session_options){.n_ctx = 128, .n_threads = 1}, &a, err,
                                       sizeof err), 0);
        int ck = -1, cv = -1;
        cinfer_session_cache_types(a, &ck, &cv);
        EXPECT_MSG(ck == types[ti] && cv == tv, "cache types %d/%d, asked %d/%d", ck, cv, types[ti], tv);
        int32_t ids[40];
        int n = 0;
        ids[n++] = 1;
        for (; n < 24; n++) ids[n] = 300 + 7 * n % 200;
        EXPECT_EQ_I(cinfer_eval(a, ids, (size_t)n, err, sizeof err), 0);
        snprintf(path, sizeof path, "%s/kv-%s-%s.session", test_tmpdir(), cinfer_kv_type_name(types[ti]),
                 cinfer_kv_type_name(tv));
        EXPECT_EQ_I(cinfer_session_save(a, path, err, sizeof err), 0);
        EXPECT_EQ_I(cinfer_session_new(m, &(cinfer_session_options){.n_ctx = 128, .n_threads = 1}, &b, err,
                                       sizeof err), 0);
        EXPECT_MSG(cinfer_session_load(b, path, err, sizeof err) == 0, "load: %s", err);
        /* both continue with the same tokens: the same bits */
        for (int s = 0; s < 8; s++) {
            const float *la = cinfer_logits(a), *lb = cinfer_logits(b);
            EXPECT_MSG(la && lb && !memcmp(la, lb, sizeof(float) * (size_t)cinfer_model_n_vocab(m)),
                       "%s/%s step %d: restored session's logits differ", cinfer_kv_type_name(types[ti]),
                       cinfer_kv_type_name(tv), s);
            ids[n++] = argmax_f32(la, cinfer_model_n_vocab(m));
            EXPECT_EQ_I(cinfer_eval(a, ids, (size_t)n, err, sizeof err), 0);
            EXPECT_EQ_I(cinfer_eval(b, ids, (size_t)n, err, sizeof err), 0);
        }
        cinfer_session_free(a);
        cinfer_session_free(b);
        cinfer_model_close(m);
    }
}

TEST(kv, session_type_mismatch_refused) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("%s absent", shared_root());
    char err[512], path[1200];
    cinfer_model *m = open_stories(0, 0, err, sizeof err);
    EXPECT_MSG(m, "open: %s", err);
    if (!m) return;
    cinfer_session *a = NULL, *b = NULL;
    EXPECT_EQ_I(cinfer_session_new(m, &(cinfer_session_options){.n_ctx = 64, .n_threads = 1}, &a, err, sizeof err), 0);
    int32_t ids[] = {1, 400, 401, 402};
    EXPECT_EQ_I(cinfer_eval(a, ids, 4, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/kv-default.session", test_tmpdir());
    EXPECT_EQ_I(cinfer_session_save(a, path, err, sizeof err), 0);
    EXPECT_EQ_I(cinfer_session_new(m, &(cinfer_session_options){.n_ctx = 64, .n_threads = 1,
                                                                 .cache_type_k = CINFER_KV_Q8_0}, &b, err, sizeof err), 0);
    EXPECT_EQ_I(cinfer_session_load(b, path, err, sizeof err), CINFER_EARG);
    EXPECT_MSG(strstr(err, "saved as f16/f16") && strstr(err, "q8_0/f16") && strstr(err, "--cache-type-k f16"), "%s",
               err);
    EXPECT_EQ_I(cinfer_session_n_past(b), 0);
    cinfer_session_free(a);
    cinfer_session_free(b);
    cinfer_model_close(m);
}

/* ==== plan and ladder ================================================================= */

TEST(kv, plan_bytes_per_type) {
    const char *path = shared_path("models/stories260K/stories260K.gguf");
    if (!path) SKIP("%s absent", shared_root());
    static const int types[] = {CINFER_KV_F32, CINFER_KV_F16, CINFER_KV_Q8_0, CINFER_KV_Q4_0};
    static const int per32[] = {128, 64, 34, 18}; /* bytes of 32 values */
    char err[512], steps[256];
    cinfer_plan p[4];
    for (int i = 0; i < 4; i++) {
        cinfer_plan_options po = {.n_ctx = 256, .n_threads = 1, .cache_type_k = types[i], .cache_type_v = types[i]};
        EXPECT_MSG(cinfer_plan_model(path, &po, &p[i], steps, sizeof steps, err, sizeof err) == 0, "%s", err);
        EXPECT_EQ_I(p[i].cache_type_k, types[i]);
        /* stories260K: 5 layers, kv_dim 32 (4 kv heads x 8): 256 positions x 5 layers x (K + V) */
        EXPECT_EQ_I((long)p[i].kv_cache_bytes, 256L * 5 * 2 * per32[i]);
    }
    cinfer_plan_options po = {.n_ctx = 256, .n_threads = 1};
    cinfer_plan d;
    EXPECT_EQ_I(cinfer_plan_model(path, &po, &d, steps, sizeof steps, err, sizeof err), 0);
    EXPECT_MSG(d.cache_type_k == CINFER_KV_F16 && d.cache_type_v == CINFER_KV_F16, "default %d/%d", d.cache_type_k,
               d.cache_type_v);
    char text[2048];
    cinfer_plan_format(&p[2], text, sizeof text);
    EXPECT_MSG(strstr(text, "K q8_0 V q8_0"), "%s", text);
    /* the peak moves by the cache (the measured parts aside, which vary between calls) */
    const uint64_t measured0 = p[0].runtime_bytes + p[0].tokenizer_bytes + p[0].compiler_bytes;
    const uint64_t measured3 = p[3].runtime_bytes + p[3].tokenizer_bytes + p[3].compiler_bytes;
    EXPECT_EQ_I((long)((p[0].peak_bytes - measured0) - (p[3].peak_bytes - measured3)),
                (long)(p[0].kv_cache_bytes - p[3].kv_cache_bytes));
}

/* `cinfer plan --json` in a child (a fresh process: the measured parts do
 * not carry this runner's RSS); NULL on failure. */
typedef struct {
    char ctk[16], ctv[16], steps[1024];
    int n_ctx;
    uint64_t peak, kv;
} plan_out;

static int plan_cli(const char *model, int n_ctx, const char *ctk, uint64_t mem, plan_out *out) {
    char cmd[2048], mems[64] = "", *txt = NULL;
    if (mem) snprintf(mems, sizeof mems, " --mem %llu", (unsigned long long)mem);
    snprintf(cmd, sizeof cmd, "%s plan %s --quant int4 -c %d -t 1 --json%s%s%s%s%s 2>/dev/null", cinfer_bin(), model,
             n_ctx, mems, ctk ? " --cache-type-k " : "", ctk ? ctk : "", ctk ? " --cache-type-v " : "", ctk ? ctk : "");
    const int rc = run_cmd(cmd, false, &txt);
    memset(out, 0, sizeof *out);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    EXPECT_MSG(j != NULL, "%s: %.300s", cmd, txt ? txt : "");
    if (j) {
        const cJSON *k = cJSON_GetObjectItem(j, "cache_type_k"), *v = cJSON_GetObjectItem(j, "cache_type_v");
        const cJSON *st = cJSON_GetObjectItem(j, "steps");
        if (cJSON_IsString(k)) snprintf(out->ctk, sizeof out->ctk, "%s", k->valuestring);
        if (cJSON_IsString(v)) snprintf(out->ctv, sizeof out->ctv, "%s", v->valuestring);
        out->n_ctx = cJSON_GetObjectItem(j, "n_ctx") ? cJSON_GetObjectItem(j, "n_ctx")->valueint : 0;
        out->peak = (uint64_t)(cJSON_GetObjectItem(j, "peak_bytes") ? cJSON_GetObjectItem(j, "peak_bytes")->valuedouble : 0);
        out->kv = (uint64_t)(cJSON_GetObjectItem(j, "kv_cache_bytes") ? cJSON_GetObjectItem(j, "kv_cache_bytes")->valuedouble : 0);
        size_t n = 0;
        for (int i = 0; st && i < cJSON_GetArraySize(st) && n < sizeof out->steps; i++)
            n += (size_t)snprintf(out->steps + n, sizeof out->steps - n, "%s%s", i ? "\n" : "",
                                  cJSON_GetArrayItem(st, i)->valuestring);
    }
    cJSON_Delete(j);
    free(txt);
    return rc;
}

/* The KV step: asked for int4 (no smaller precision rung left) at a context
 * where the KV cache dominates, a budget between the Q8_0 and the F16
 * cache's peaks takes the step F16 -> Q8_0 and stops; between Q4_0 and
 * Q8_0 two steps; below Q4_0 the context then halves.  One line per step. */
TEST(kv, ladder_kv_step) {
    const char *path = shared_path("models/stories260K/stories260K.gguf");
    if (!path) SKIP("%s absent", shared_root());
    char model[1024];
    snprintf(model, sizeof model, "%s", path);
    const int n_ctx = 16384; /* the KV cache dominates: 10 MiB in F16, 5.3 in Q8_0, 2.8 in Q4_0 */
    plan_out f16, q8, q4, got;
    EXPECT_EQ_I(plan_cli(model, n_ctx, NULL, 0, &f16), 0);
    EXPECT_EQ_I(plan_cli(model, n_ctx, "q8_0", 0, &q8), 0);
    EXPECT_EQ_I(plan_cli(model, n_ctx, "q4_0", 0, &q4), 0);
    EXPECT_STR_EQ(f16.ctk, "f16");
    EXPECT_EQ_I((long)(f16.kv - q8.kv), (long)(f16.kv / 64 * (64 - 34)));
    EXPECT_STR_EQ(f16.steps, "");
    /* between Q8_0 and F16: the step to Q8_0, no Q4_0, no context step */
    EXPECT_EQ_I(plan_cli(model, n_ctx, NULL, (f16.peak + q8.peak) / 2, &got), 0);
    EXPECT_MSG(!strcmp(got.ctk, "q8_0") && !strcmp(got.ctv, "q8_0") && got.n_ctx == n_ctx, "chose %s/%s at %d: %s",
               got.ctk, got.ctv, got.n_ctx, got.steps);
    EXPECT_MSG(strstr(got.steps, "KV cache f16/f16 -> q8_0/q8_0: peak") && !strstr(got.steps, "q4_0") &&
                   !strstr(got.steps, "context"), "%s", got.steps);
    /* between Q4_0 and Q8_0: two KV steps */
    EXPECT_EQ_I(plan_cli(model, n_ctx, NULL, (q8.peak + q4.peak) / 2, &got), 0);
    EXPECT_MSG(!strcmp(got.ctk, "q4_0") && got.n_ctx == n_ctx && strstr(got.steps, "q8_0/q8_0 -> q4_0/q4_0"), "%s",
               got.steps);
    /* below Q4_0: then the context halves */
    EXPECT_EQ_I(plan_cli(model, n_ctx, NULL, q4.peak - q4.kv / 4, &got), 0);
    EXPECT_MSG(!strcmp(got.ctk, "q4_0") && got.n_ctx == n_ctx / 2 && strstr(got.steps, "context 16384 -> 8192"), "%s",
               got.steps);
    /* a budgeted model's sessions get the types its ladder chose and may not
     * ask for larger ones (a budget under the F16 plan's peak, planned in
     * this process: at least the step to Q8_0) */
    char err[1024], steps[1024];
    cinfer_plan pf16, chosen;
    cinfer_plan_options po = {.n_ctx = n_ctx, .n_threads = 1, .precision = CINFER_PRECISION_INT4};
    EXPECT_EQ_I(cinfer_plan_model(model, &po, &pf16, steps, sizeof steps, err, sizeof err), 0);
    cinfer_model *m = NULL;
    cinfer_model_options mo = {.precision = CINFER_PRECISION_INT4, .mem_bytes = pf16.peak_bytes - (1 << 20),
                               .n_ctx = n_ctx, .n_threads = 1};
    EXPECT_MSG(cinfer_model_open(model, &mo, &m, err, sizeof err) == 0, "%s", err);
    const char *bsteps = "";
    if (m) EXPECT_EQ_I(cinfer_model_budget(m, &chosen, &bsteps), 0);
    if (m) EXPECT_MSG(chosen.cache_type_k != CINFER_KV_F16 && strstr(bsteps, "KV cache f16/f16 -> q8_0/q8_0"), "%s",
                      bsteps);
    if (m) {
        cinfer_session *s = NULL;
        EXPECT_EQ_I(cinfer_session_new(m, &(cinfer_session_options){.n_threads = 1}, &s, err, sizeof err), 0);
        int ck = 0, cv = 0;
        if (s) cinfer_session_cache_types(s, &ck, &cv);
        EXPECT_MSG(ck == chosen.cache_type_k && cv == chosen.cache_type_v, "%d/%d, the budget chose %d/%d", ck, cv,
                   chosen.cache_type_k, chosen.cache_type_v);
        cinfer_session_free(s);
        s = NULL;
        EXPECT_EQ_I(cinfer_session_new(m, &(cinfer_session_options){.n_threads = 1, .cache_type_k = CINFER_KV_F16}, &s,
                                       err, sizeof err), CINFER_EARG);
        EXPECT_MSG(strstr(err, "budget"), "%s", err);
        cinfer_model_close(m);
    }
}

/* --device cuda keeps an F32 cache: another type is refused before any GPU work. */
TEST(kv, cuda_refuses_other_types) {
    const char *path = shared_path("models/stories260K/stories260K.gguf");
    if (!path) SKIP("%s absent", shared_root());
    cinfer_model *m = NULL;
    char err[512];
    cinfer_model_options mo = {.device = CINFER_DEVICE_CUDA, .cache_type_k = CINFER_KV_Q8_0};
    EXPECT_EQ_I(cinfer_model_open(path, &mo, &m, err, sizeof err), CINFER_EARG);
    EXPECT_MSG(strstr(err, "--device cuda keeps its KV cache in f32") && strstr(err, "q8_0"), "%s", err);
    cinfer_model_close(m);
}
