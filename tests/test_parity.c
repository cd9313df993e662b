/*
 * test_parity.c — end-to-end logit parity against llama.cpp.
 *
 * For each model: compile it (JIT, and AOT for the first few), evaluate the
 * reference prompts, compare the last-position logits and 32 teacher-forced
 * greedy steps with llama.cpp's reference (../shared/reference), and hold
 * them to the model's bounds: max abs, greedy tokens agreeing (the others
 * near-ties, printed), and on the q8 path at least one prompt at float
 * rounding.  f32 activations are compared with dequant-f32/<stem>.json
 * (llama.cpp on the exact F32 dequantization; for F32 models the plain
 * reference), quantized activations with the plain <stem>.json.  The bounds
 * and why each is what it is: docs/architecture.md "Numerics", which
 * parity/docs_state_the_bounds keeps equal to the tables below.
 */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler/compile.h"
#include "engine/engine.h"
#include "formats/gguf.h"
#include "test.h"
#include "test_model.h"
#include "text/tok.h"


static int load_act(const char *path, cc_mode mode, int n_threads, int act_quant, loaded *l) {
    char err[1024];
    const cc_options o = {.mode = mode};
    const eng_ctx_opts eo = {.n_ctx = 512, .n_threads = n_threads, .act_quant = act_quant};
    if (loaded_open(path, &o, &eo, l, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "load %s: %s", path, err);
        return -1;
    }
    return 0;
}

static int load(const char *path, cc_mode mode, int n_threads, loaded *l) {
    return load_act(path, mode, n_threads, 0, l);
}

/* ---- the check -------------------------------------------------------------
 *
 * For every reference prompt: evaluate the prompt ids, compare all n_vocab
 * logits at the last position with logits_last (cosine, max abs); then 32
 * teacher-forced greedy steps: at step s take cinfer's argmax, compare it
 * with llama.cpp's greedy id and cinfer's logits of the reference's top 5
 * with top5_logits, and feed llama.cpp's id (so both stay on one sequence and
 * every step is checked, not only those before a first difference).
 *
 * Asserted per model (docs/architecture.md "Numerics" states the same
 * numbers; parity/docs_state_the_bounds checks they agree):
 *  - max abs <= bound, over the last-position logits and every step's top 5;
 *  - at least min_agree of the 32 steps of every prompt pick llama.cpp's
 *    token, and each step that does not is a true near-tie: cinfer's pick is
 *    in the reference's top 5 less than 2 x bound below its top 1 (with every
 *    logit within bound, only such a pair can swap).  Ties are printed. */

typedef struct {
    const char *label; /* the row of docs/architecture.md's bounds table */
    double max_abs;    /* bound on |cinfer - llama.cpp| of a logit */
    int min_agree;     /* of the 32 greedy steps of each prompt */
    double exact_abs;  /* > 0 (quantized activations): at least one prompt within this */
} parity_bound;

/* Sum over a cJSON array of numbers walked once (cJSON_GetArrayItem is O(i):
 * quadratic over a 151936-entry vocabulary). */
static void compare_logits(const cJSON *ref, const float *lg, int n_vocab, double *cosv, double *maxabs,
                           double *max_ref) {
    double dot = 0, na = 0, nb = 0, worst = 0, big = 0;
    int i = 0;
    for (const cJSON *e = ref ? ref->child : NULL; e && i < n_vocab; e = e->next, i++) {
        double r = e->valuedouble, x = lg[i];
        dot += r * x, na += x * x, nb += r * r;
        if (!(fabs(r - x) <= worst)) worst = fabs(r - x); /* NaN counts as worst */
        if (fabs(r) > big) big = fabs(r);
    }
    *max_ref = big;
    *cosv = dot / (sqrt(na) * sqrt(nb) + 1e-30);
    *maxabs = worst;
}

static void check_paths(const char *model_path, const char *ref, const char *model_rel, parity_bound b,
                        cc_mode last_mode, int act_quant, double min_cos);

/* Evaluate every reference prompt of ref_rel on model_rel, JIT and then (when
 * last_mode is CC_AOT) AOT; act_quant: cf_env.act_quant (1: activations
 * quantized like llama.cpp, compared with the plain reference). */
static void check_model_modes(const char *model_rel, const char *ref_rel, parity_bound b, cc_mode last_mode,
                              int act_quant) {
    const char *model = shared_path(model_rel);
    const char *ref = shared_path(ref_rel);
    if (!model || !ref) SKIP("%s/%s or its reference absent", shared_root(), model_rel);
    char model_path[1024], ref_path[1024];
    snprintf(model_path, sizeof model_path, "%s", model);
    snprintf(ref_path, sizeof ref_path, "%s", ref);
    check_paths(model_path, ref_path, model_rel, b, last_mode, act_quant, 0);
}

/* check_model_modes on a model and a reference by path (model_rel names the
 * model in messages).  References of tests/data/arch: F32 ones give each
 * step's top 5 without the id (greedy_ids has it); quantized ones give only
 * greedy_ids and each step's top-1/top-2 gap (greedy_top12_gap), so their
 * steps compare the token, and a difference must be a near-tie by that gap.
 * min_cos > 0: the last-position logits' cosine is held to it too.  With
 * last_mode CC_AOT the AOT logits of every prompt must equal the JIT's bit
 * for bit (the same kernels in the same order). */
static void check_paths(const char *model_path, const char *ref, const char *model_rel, parity_bound b,
                        cc_mode last_mode, int act_quant, double min_cos) {
    const char *ref_rel = ref;
    cJSON *j = read_json(ref);
    EXPECT_MSG(j, "cannot parse %s", ref);
    if (!j) return;
    const double tie = 2 * b.max_abs;
    float *jit_logits[8] = {0}; /* per prompt, for the AOT comparison */
    for (int mode = CC_JIT; mode <= (int)last_mode; mode++) {
        const char *mname = mode == CC_AOT ? "aot" : "jit";
        loaded l;
        if (load_act(model_path, (cc_mode)mode, 1, act_quant, &l)) break;
        int n_vocab = l.mod->desc->n_vocab;
        cJSON *pr;
        int pi = 0, n_exact = 0;
        cJSON_ArrayForEach(pr, cJSON_GetObjectItem(j, "prompts")) {
            cJSON *pids = cJSON_GetObjectItem(pr, "prompt_ids");
            cJSON *lref = cJSON_GetObjectItem(pr, "logits_last");
            cJSON *steps = cJSON_GetObjectItem(pr, "greedy_steps");
            cJSON *gids = cJSON_GetObjectItem(pr, "greedy_ids"), *gaps = cJSON_GetObjectItem(pr, "greedy_top12_gap");
            int n = cJSON_GetArraySize(pids), ids[600], k = 0;
            EXPECT_MSG(n > 0 && n <= 600, "%s prompt %d: %d prompt ids", ref_rel, pi, n);
            for (cJSON *e = pids ? pids->child : NULL; e && k < 600; e = e->next) ids[k++] = e->valueint;
            char err[512];
            eng_truncate(l.ctx, 0);
            if (eng_eval(l.ctx, ids, k, err, sizeof err)) {
                test_fail(__FILE__, __LINE__, "%s: %s", model_rel, err);
                break;
            }
            EXPECT_EQ_I(cJSON_GetArraySize(lref), n_vocab);
            double cosv, maxabs, max_ref;
            compare_logits(lref, eng_logits(l.ctx), n_vocab, &cosv, &maxabs, &max_ref);
            if (pi < 8 && mode == CC_JIT && last_mode == CC_AOT) {
                jit_logits[pi] = malloc((size_t)n_vocab * sizeof(float));
                if (jit_logits[pi]) memcpy(jit_logits[pi], eng_logits(l.ctx), (size_t)n_vocab * sizeof(float));
            } else if (pi < 8 && mode == CC_AOT && jit_logits[pi]) {
                EXPECT_MSG(!memcmp(jit_logits[pi], eng_logits(l.ctx), (size_t)n_vocab * sizeof(float)),
                           "%s prompt %d: AOT logits are not bit-identical to JIT's", model_rel, pi);
            }
            /* teacher-forced greedy steps */
            int n_g = steps ? cJSON_GetArraySize(steps) : cJSON_GetArraySize(gids), agree = 0;
            double step_maxabs = 0;
            char ties[512] = "";
            size_t tl = 0;
            for (int s = 0; s < n_g;) {
                const float *lg = eng_logits(l.ctx);
                cJSON *st = steps ? cJSON_GetArrayItem(steps, s) : NULL, *sid = cJSON_GetObjectItem(st, "id");
                int want = sid ? sid->valueint : cJSON_GetArrayItem(gids, s)->valueint, got = argmax_f32(lg, n_vocab);
                double gap = NAN; /* reference top minus its logit of cinfer's pick (or its top-2 gap) */
                if (st) {
                    cJSON *t5i = cJSON_GetObjectItem(st, "top5_ids"), *t5l = cJSON_GetObjectItem(st, "top5_logits");
                    double top = cJSON_GetArrayItem(t5l, 0)->valuedouble, got_ref = NAN;
                    for (int r = 0; r < cJSON_GetArraySize(t5i); r++) {
                        int id = cJSON_GetArrayItem(t5i, r)->valueint;
                        double rl = cJSON_GetArrayItem(t5l, r)->valuedouble, d = fabs(lg[id] - rl);
                        if (!(d <= step_maxabs)) step_maxabs = d;
                        if (id == got) got_ref = rl;
                    }
                    gap = top - got_ref;
                } else if (cJSON_GetArrayItem(gaps, s)) {
                    gap = cJSON_GetArrayItem(gaps, s)->valuedouble;
                }
                if (got == want) {
                    agree++;
                } else {
                    /* a near-tie: cinfer's pick is in the reference's top 5, within 2 x bound of its top
                     * (quantized tests/data/arch references: their top-1/top-2 gap within 2 x bound) */
                    EXPECT_MSG(gap < tie, "%s %s prompt %d step %d: cinfer %d, llama.cpp %d: reference gap %.3g "
                               "(not within 2 x bound %.3g: not a near-tie)", model_rel, mname, pi, s, got, want,
                               gap, tie);
                    if (tl < sizeof ties - 80)
                        tl += (size_t)snprintf(ties + tl, sizeof ties - tl, "; step %d: cinfer %d, llama.cpp %d, "
                                               "reference gap %.2g", s, got, want, gap);
                }
                if (++s < n_g && eng_eval(l.ctx, &want, 1, err, sizeof err)) {
                    test_fail(__FILE__, __LINE__, "%s: %s", model_rel, err);
                    break;
                }
            }
            EXPECT_MSG(min_cos <= 0 || cosv >= min_cos, "%s %s prompt %d: cosine %.9f < %.9f", model_rel, mname, pi,
                       cosv, min_cos);
            printf("    %s %s%s prompt %d: cosine %.9f, max abs %.3g (greedy steps' top 5: %.3g; |logit| <= %.3g), "
                   "greedy %d/%d agree%s\n", model_rel, mname, act_quant ? " q8" : "", pi, cosv, maxabs,
                   step_maxabs, max_ref, agree, n_g, ties);
            EXPECT_MSG(maxabs <= b.max_abs && step_maxabs <= b.max_abs,
                       "%s %s prompt %d: max abs %.3g (last position), %.3g (greedy steps) > bound %.3g", model_rel,
                       mname, pi, maxabs, step_maxabs, b.max_abs);
            EXPECT_MSG(agree >= b.min_agree, "%s %s prompt %d: %d of %d greedy tokens agree, bound %d", model_rel,
                       mname, pi, agree, n_g, b.min_agree);
            n_exact += maxabs <= b.exact_abs;
            pi++;
        }
        EXPECT_MSG(pi >= 3, "%s: %d prompts", ref_rel, pi);
        EXPECT_MSG(b.exact_abs <= 0 || n_exact >= 1, "%s %s: no prompt within %.3g of llama.cpp (float rounding): "
                   "activations are not quantized like llama.cpp's", model_rel, mname, b.exact_abs);
        unload(&l);
    }
    for (int i = 0; i < 8; i++) free(jit_logits[i]);
    cJSON_Delete(j);
}

static void check_model(const char *model_rel, const char *ref_rel, parity_bound b) {
    check_model_modes(model_rel, ref_rel, b, CC_AOT, 0);
}

/* ---- the bounds (measured maxima with headroom; docs/architecture.md) ------- */

/* f32 activations against dequant-f32/ (or the F32 file's own reference) */
static const parity_bound B_SYNTH = {"synthetic", 1e-6, 32, 0};
static const parity_bound B_STORIES = {"stories260K", 3e-5, 32, 0};
static const parity_bound B_TINY = {"TinyStories-656K", 2e-5, 32, 0};
/* activations quantized like llama.cpp against the plain references */
static const parity_bound B_Q8_SYNTH = {"synthetic, q8 activations", 2e-2, 30, 1e-6};
static const parity_bound B_Q8_TINY = {"TinyStories-656K, q8 activations", 0.2, 30, 5e-6};
static const parity_bound B_Q8_QWEN3_CHAT = {"qwen3-chat, q8 activations", 3e-6, 32, 3e-6};

TEST(parity, stories260K) {
    check_model("models/stories260K/stories260K.gguf", "reference/stories260K.json", B_STORIES);
}
TEST(parity, tinystories_q8_0) {
    check_model("models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf",
                "reference/dequant-f32/TinyStories-656K-Q8_0.json", B_TINY);
}
TEST(parity, tinystories_q2_k) {
    check_model("models/tinystories-656k/gguf/TinyStories-656K-Q2_K.gguf",
                "reference/dequant-f32/TinyStories-656K-Q2_K.json", B_TINY);
}
TEST(parity, synth_f32) {
    check_model("models/synthetic/synth-d256-F32.gguf", "reference/synth-d256-F32.json", B_SYNTH);
}
TEST(parity, synth_f16) {
    check_model("models/synthetic/synth-d256-F16.gguf", "reference/dequant-f32/synth-d256-F16.json", B_SYNTH);
}
TEST(parity, synth_q8_0) {
    check_model("models/synthetic/synth-d256-Q8_0.gguf", "reference/dequant-f32/synth-d256-Q8_0.json", B_SYNTH);
}
TEST(parity, synth_q4_0) {
    check_model("models/synthetic/synth-d256-Q4_0.gguf", "reference/dequant-f32/synth-d256-Q4_0.json", B_SYNTH);
}

/* JIT and AOT run the same kernels in the same order: logits must be
 * bit-identical for the same thread count. */
TEST(parity, jit_aot_bit_identical) {
    NEED_SHARED(path, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf");
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    int ids[] = {1, 403, 407, 261, 378, 300, 301, 302};
    float *out[2] = {0};
    int n_vocab = 0;
    for (int mode = 0; mode < 2; mode++) {
        loaded l;
        if (load(p, (cc_mode)mode, 2, &l)) return;
        char err[256];
        n_vocab = l.mod->desc->n_vocab;
        EXPECT(eng_eval(l.ctx, ids, 8, err, sizeof err) == 0);
        EXPECT(eng_eval(l.ctx, ids, 3, err, sizeof err) == 0);
        out[mode] = malloc((size_t)n_vocab * sizeof(float));
        memcpy(out[mode], eng_logits(l.ctx), (size_t)n_vocab * sizeof(float));
        unload(&l);
    }
    EXPECT(memcmp(out[0], out[1], (size_t)n_vocab * sizeof(float)) == 0);
    free(out[0]);
    free(out[1]);
}

/* Batched prompt evaluation equals token-by-token evaluation. */
TEST(parity, batch_equals_sequential) {
    NEED_SHARED(path, "models/stories260K/stories260K.gguf");
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    int ids[] = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
    loaded l;
    if (load(p, CC_JIT, 1, &l)) return;
    char err[256];
    int n_vocab = l.mod->desc->n_vocab;
    EXPECT(eng_eval(l.ctx, ids, 10, err, sizeof err) == 0);
    float *a = malloc((size_t)n_vocab * sizeof(float));
    memcpy(a, eng_logits(l.ctx), (size_t)n_vocab * sizeof(float));
    eng_truncate(l.ctx, 0);
    for (int i = 0; i < 10; i++) EXPECT(eng_eval(l.ctx, &ids[i], 1, err, sizeof err) == 0);
    double maxd = 0;
    for (int i = 0; i < n_vocab; i++) {
        double d = fabs(a[i] - eng_logits(l.ctx)[i]);
        if (d > maxd) maxd = d;
    }
    EXPECT_MSG(maxd < 1e-4, "batched vs sequential max abs diff %.3g", maxd);
    free(a);
    unload(&l);
}

/* ---- model families (../shared/models/arch, F32, exact references) ---------- */

static const parity_bound B_ARCH[] = {
    {"qwen2", 5e-6, 32, 0},      {"qwen3", 5e-6, 32, 0},  {"gemma", 1.5e-3, 32, 0},
    {"gemma2", 5e-4, 32, 0},     {"gemma3", 5e-4, 32, 0}, {"phi3", 5e-6, 32, 0},
    {"granite", 2e-6, 32, 0},    {"starcoder2", 5e-4, 32, 0}, {"gpt2", 5e-4, 32, 0},
    {"llama-moe", 5e-6, 32, 0},  {"qwen2moe", 5e-6, 32, 0}, {"deepseek2", 5e-6, 32, 0},
    {"mamba", 1e-5, 32, 0},      {"mamba2", 1e-5, 32, 0},
};
static parity_bound arch_bound(const char *name) {
    for (size_t i = 0; i < sizeof B_ARCH / sizeof B_ARCH[0]; i++)
        if (!strcmp(B_ARCH[i].label, name)) return B_ARCH[i];
    return (parity_bound){name, 0, 32, 0}; /* no bound: fails on the first difference */
}
#define ARCH_TEST(name)                                                                           \
    TEST(parity_arch, name) {                                                                     \
        check_model("models/arch/" #name ".gguf", "reference/arch/" #name ".json", arch_bound(#name)); \
    }
ARCH_TEST(qwen2)
ARCH_TEST(qwen3)
ARCH_TEST(gemma)
ARCH_TEST(gemma2)
ARCH_TEST(gemma3)
ARCH_TEST(phi3)
ARCH_TEST(granite)
ARCH_TEST(starcoder2)
ARCH_TEST(gpt2)

/* mixtures of experts (issue 17): Mixtral-style llama, qwen2moe's shared
 * expert, deepseek2's latent attention from the combined attn_kv_b of older
 * converters; the 60-token prompt runs the grouped-by-expert prompt path. */
TEST(parity_arch, llama_moe) {
    check_model("models/arch/llama-moe.gguf", "reference/arch/llama-moe.json", arch_bound("llama-moe"));
}
ARCH_TEST(qwen2moe)
ARCH_TEST(deepseek2)
/* recurrent layers (issue 18): Mamba's selective scan, Mamba-2's SSD */
ARCH_TEST(mamba)
ARCH_TEST(mamba2)

/* ---- the archgen models (tests/data/arch) ---------------------------------
 * tools/archgen.c writes each family's F32 model into the test's temporary
 * directory and formats/quantize makes its quantized variants: the files
 * whose llama.cpp references tests/data/arch holds (README there). */

#include <unistd.h>

#include "formats/quantize.h"

/* The archgen model of family in variant ("f32", "q8_0", "q4_0", "mxfp4_moe"),
 * written on first use; NULL (test failed) when it cannot be made. */
static const char *arch_model(const char *family, const char *variant) {
    static char path[1200];
    char f32[1200], cmd[3000], err[512];
    const char *dir = test_tmpdir(), *build = getenv("CINFER_BUILD");
    snprintf(f32, sizeof f32, "%s/%s.gguf", dir, family);
    if (access(f32, R_OK)) {
        char *out = NULL;
        snprintf(cmd, sizeof cmd, "'%s/tools/archgen' -o '%s' --vocab-from '%s' %s",
                 build && *build ? build : "build", dir, shared_path("models/stories260K/stories260K.gguf"),
                 family);
        int st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st == 0, "%s: %s", cmd, out ? out : "");
        free(out);
        if (st) return NULL;
    }
    if (!strcmp(variant, "f32")) {
        snprintf(path, sizeof path, "%s", f32);
        return path;
    }
    snprintf(path, sizeof path, "%s/%s-%s.gguf", dir, family, variant);
    if (access(path, R_OK)) {
        quant_options o = quant_options_default();
        EXPECT(quant_ftype_parse(variant, &o.ftype) == 0);
        o.n_threads = 1;
        int rc = quant_file(f32, path, &o, NULL, err, sizeof err);
        EXPECT_MSG(rc == 0, "quantize %s %s: %s", family, variant, err);
        if (rc) return NULL;
    }
    return path;
}

/* ---- mixtures of experts and latent attention on the archgen models ---------
 * tools/archgen.c writes each family's F32 model (into the test's temporary
 * directory), formats/quantize its Q8_0 and Q4_0 variants — the files whose
 * llama.cpp references tests/data/arch holds (README there) — and each is
 * checked like the models above: F32 with f32 activations, JIT and AOT,
 * against <name>.json, cosine >= 0.99999; Q8_0 and Q4_0 with activations
 * quantized like llama.cpp, JIT, against <name>-q8_0.json / <name>-q4_0.json,
 * cosine >= 0.999 (and the bounds below).  gpt-oss adds its MXFP4-experts
 * variant (gpt-oss-mxfp4_moe.json). */

/* f32 activations against the F32 references; quantized files (experts
 * included) with q8 activations against llama.cpp's run of the same file */
static const parity_bound B_MOE_F32 = {"MoE/MLA families", 2e-5, 32, 0};
static const parity_bound B_MOE_Q8 = {"MoE/MLA families, Q8_0/Q4_0/MXFP4, q8 activations", 0.2, 28, 1e-6};

static void check_arch_bounds(const char *family, parity_bound f32, parity_bound q8) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("%s absent (the vocabulary)", shared_root());
    static const char *const variants[] = {"f32", "q8_0", "q4_0", "mxfp4_moe"};
    for (int v = 0; v < 4; v++) {
        char ref[600], label[200], model_path[1200];
        snprintf(ref, sizeof ref, "tests/data/arch/%s%s%s.json", family, v ? "-" : "", v ? variants[v] : "");
        if (v == 3 && access(ref, R_OK)) continue; /* only gpt-oss has an MXFP4 reference */
        const char *model = arch_model(family, variants[v]);
        if (!model) return;
        snprintf(model_path, sizeof model_path, "%s", model);
        snprintf(label, sizeof label, "%s %s", family, variants[v]);
        if (v == 0) check_paths(model_path, ref, label, f32, CC_AOT, 0, 0.99999);
        else check_paths(model_path, ref, label, q8, CC_JIT, 1, 0.999);
    }
}

static void check_arch(const char *family) { check_arch_bounds(family, B_MOE_F32, B_MOE_Q8); }

/* JIT and AOT logits bit-identical on the MoE/MLA paths too: 2 threads, a
 * grouped prompt batch then decode steps, default (q8) activations. */
TEST(parity_moe, jit_aot_bit_identical) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("../shared absent (the vocabulary)");
    static const char *const cases[][2] = {{"qwen2moe", "q4_0"}, {"deepseek2", "q8_0"}, {"gpt-oss", "f32"}};
    for (int c = 0; c < 3; c++) {
        const char *m = arch_model(cases[c][0], cases[c][1]);
        if (!m) return;
        char path[1200];
        snprintf(path, sizeof path, "%s", m);
        int ids[] = {1, 403, 407, 261, 378, 300, 301, 302, 303, 304};
        float *out[2] = {0};
        int n_vocab = 0;
        for (int mode = 0; mode < 2; mode++) {
            loaded l;
            if (load_act(path, (cc_mode)mode, 2, 1, &l)) return;
            char err[256];
            n_vocab = l.mod->desc->n_vocab;
            EXPECT(eng_eval(l.ctx, ids, 10, err, sizeof err) == 0);
            for (int s = 0; s < 3; s++) EXPECT(eng_eval(l.ctx, ids + s, 1, err, sizeof err) == 0);
            out[mode] = malloc((size_t)n_vocab * sizeof(float));
            memcpy(out[mode], eng_logits(l.ctx), (size_t)n_vocab * sizeof(float));
            unload(&l);
        }
        EXPECT_MSG(memcmp(out[0], out[1], (size_t)n_vocab * sizeof(float)) == 0, "%s %s: JIT and AOT differ",
                   cases[c][0], cases[c][1]);
        free(out[0]);
        free(out[1]);
    }
}

#define MOE_TEST(name, family) \
    TEST(parity_moe, name) { check_arch(family); }
MOE_TEST(llama_moe, "llama-moe")
MOE_TEST(qwen2moe, "qwen2moe")
MOE_TEST(qwen3moe, "qwen3moe")
MOE_TEST(granitemoe, "granitemoe")
MOE_TEST(olmoe, "olmoe")
MOE_TEST(deepseek2, "deepseek2")
MOE_TEST(deepseek2_lite, "deepseek2-lite")
MOE_TEST(gpt_oss, "gpt-oss")
MOE_TEST(glm4moe, "glm4moe")
MOE_TEST(mellum, "mellum")

/* ---- model families IV (issue 19): the decoder families -------------------
 * Each family's archgen model: F32 with f32 activations against <name>.json
 * (and cosine >= 0.99999), JIT and AOT, the AOT logits bit-identical to the
 * JIT's (the same kernels in the same order); its Q8_0 file
 * (formats/quantize, byte-identical to llama-quantize's) with quantized
 * activations, JIT, against <name>-q8_0.json, llama.cpp's run of that file
 * (and cosine >= 0.999).  The bounds below (docs/architecture.md "Numerics"
 * states them with the measurements).  A family takes 0.8-1.6 s on this
 * machine, ~0.6 s of it the AOT compile (cc -O3). */
/* f32: the GELU families read ggml's F16 GELU table, where an input that
 * float rounding puts on the other side of an F16 step reads the next entry
 * (the table is what llama.cpp computes: an exact GELU moves gemma3n from
 * 1e-4 to 1.6e-3 away); gemma4's six layers of post-norms (weights ~4)
 * amplify those steps most.  q8: one activation one Q8 quantum off moves
 * these sensitive random models' logits by up to ~0.1 (every family has a
 * prompt where no activation lands on a step: float rounding). */
static const parity_bound B_FAM = {"issue-19 families", 1e-5, 32, 0};
static const parity_bound B_FAM_GELU = {"issue-19 GELU families", 1e-3, 32, 0};
static const parity_bound B_FAM_GEMMA4 = {"gemma4", 5e-3, 32, 0};
static const parity_bound B_FAM_Q8 = {"issue-19 families, q8 activations", 0.25, 28, 1e-5};
static parity_bound fam_bound(const char *family) {
    static const char *const gelu[] = {"falcon", "gptneox", "phi2", "gemma3n"};
    if (!strcmp(family, "gemma4") || !strcmp(family, "gemma4-moe")) return B_FAM_GEMMA4;
    for (size_t i = 0; i < sizeof gelu / sizeof *gelu; i++)
        if (!strcmp(family, gelu[i])) return B_FAM_GELU;
    return B_FAM;
}

static void check_family(const char *family) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("%s absent (the vocabulary)", shared_root());
    char ref[600], label[200], model_path[1200];
    const char *model = arch_model(family, "f32");
    if (!model) return;
    snprintf(model_path, sizeof model_path, "%s", model);
    snprintf(ref, sizeof ref, "tests/data/arch/%s.json", family);
    snprintf(label, sizeof label, "%s f32", family);
    check_paths(model_path, ref, label, fam_bound(family), CC_AOT, 0, 0.99999);
    if (!(model = arch_model(family, "q8_0"))) return;
    snprintf(model_path, sizeof model_path, "%s", model);
    snprintf(ref, sizeof ref, "tests/data/arch/%s-q8_0.json", family);
    snprintf(label, sizeof label, "%s q8_0", family);
    check_paths(model_path, ref, label, B_FAM_Q8, CC_JIT, 1, 0.999);
}

#define FAM_TEST(name, family) \
    TEST(parity_fam, name) { check_family(family); }
FAM_TEST(llama3, "llama3")
FAM_TEST(glm4, "glm4")
FAM_TEST(olmo2, "olmo2")
FAM_TEST(command_r, "command-r")
FAM_TEST(cohere2, "cohere2")
FAM_TEST(exaone4, "exaone4")
FAM_TEST(smollm3, "smollm3")
FAM_TEST(internlm2, "internlm2")
FAM_TEST(ernie4_5, "ernie4_5")
FAM_TEST(hunyuan_dense, "hunyuan-dense")
FAM_TEST(seed_oss, "seed_oss")
FAM_TEST(stablelm, "stablelm")
FAM_TEST(gptneox, "gptneox")
FAM_TEST(falcon, "falcon")
FAM_TEST(phi2, "phi2")
FAM_TEST(bitnet, "bitnet")
FAM_TEST(nemotron, "nemotron")
FAM_TEST(arcee, "arcee")
FAM_TEST(apertus, "apertus")
FAM_TEST(gemma4, "gemma4")
FAM_TEST(gemma4_moe, "gemma4-moe")
FAM_TEST(gemma3n, "gemma3n")
FAM_TEST(mistral3, "mistral3")

/* ---- state-space, linear-attention and hybrid families (issue 18) -----------
 * The same check on their archgen models: Mamba, Mamba-2, LFM2's short conv,
 * and the hybrids of recurrent and attention layers (nemotron_h, falcon-h1,
 * granitehybrid, qwen3next's gated DeltaNet); the 60-token prompt runs the
 * chunked delta rule.  tests/test_ssm.c has the rest (batch = token by
 * token, sessions, snapshots, JIT = AOT bit for bit). */
static const parity_bound B_SSM_F32 = {"state-space/hybrid families", 5e-5, 32, 0};
static const parity_bound B_SSM_Q8 = {"state-space/hybrid families, Q8_0/Q4_0, q8 activations", 0.1, 30, 1e-6};
#define SSM_TEST(name, family) \
    TEST(parity_ssm, name) { check_arch_bounds(family, B_SSM_F32, B_SSM_Q8); }
SSM_TEST(mamba, "mamba")
SSM_TEST(mamba2, "mamba2")
SSM_TEST(lfm2, "lfm2")
SSM_TEST(nemotron_h, "nemotron_h")
SSM_TEST(falcon_h1, "falcon-h1")
SSM_TEST(granitehybrid, "granitehybrid")
SSM_TEST(qwen3next, "qwen3next")


/* ---- every synthetic quantization (../shared/models/synthetic) --------------
 * The remaining 26 files (F32, F16, Q8_0, Q4_0 above), each against llama.cpp
 * on its exact F32 dequantization: K-quants and their llama.cpp mixtures,
 * IQ4_NL/IQ4_XS, IQ3_XXS/IQ3_S mixtures, TQ1_0/TQ2_0, BF16, Q4_1, Q5_0/1.
 * JIT only: AOT runs the same kernels in the same order (jit_aot_bit_identical
 * and the models above), and an AOT compile per file would double the time. */

#define SYNTH_TEST(name, stem)                                                              \
    TEST(parity_synth, name) {                                                              \
        check_model_modes("models/synthetic/synth-d256-" stem ".gguf",                      \
                          "reference/dequant-f32/synth-d256-" stem ".json", B_SYNTH, CC_JIT, 0); \
    }
SYNTH_TEST(bf16, "BF16")
SYNTH_TEST(q4_1, "Q4_1")
SYNTH_TEST(q5_0, "Q5_0")
SYNTH_TEST(q5_1, "Q5_1")
SYNTH_TEST(q2_k, "Q2_K")
SYNTH_TEST(q2_k_pure, "Q2_K-pure")
SYNTH_TEST(q3_k_s, "Q3_K_S")
SYNTH_TEST(q3_k_m, "Q3_K_M")
SYNTH_TEST(q3_k_l, "Q3_K_L")
SYNTH_TEST(q4_k_s, "Q4_K_S")
SYNTH_TEST(q4_k_m, "Q4_K_M")
SYNTH_TEST(q4_k_pure, "Q4_K-pure")
SYNTH_TEST(q5_k_s, "Q5_K_S")
SYNTH_TEST(q5_k_m, "Q5_K_M")
SYNTH_TEST(q6_k, "Q6_K")
SYNTH_TEST(iq4_nl, "IQ4_NL")
SYNTH_TEST(iq4_nl_pure, "IQ4_NL-pure")
SYNTH_TEST(iq4_xs, "IQ4_XS")
SYNTH_TEST(iq4_xs_pure, "IQ4_XS-pure")
SYNTH_TEST(iq3_xxs_pure, "IQ3_XXS-pure")
SYNTH_TEST(iq3_xs, "IQ3_XS")
SYNTH_TEST(iq3_s, "IQ3_S")
SYNTH_TEST(iq3_s_pure, "IQ3_S-pure")
SYNTH_TEST(iq3_m, "IQ3_M")
SYNTH_TEST(tq1_0, "TQ1_0")
SYNTH_TEST(tq2_0, "TQ2_0")

/* ---- quantized activations (act_quant 1) -----------------------------------------
 * Every synthetic file and TinyStories Q8_0/Q2_K against the plain references
 * (llama.cpp running the file as is: activations converted to Q8_0/Q8_1/Q8_K,
 * F16, BF16 before each matmul).  JIT only. */

#define Q8_TEST(name, model, stem, bound)                                                     \
    TEST(parity_q8, name) {                                                                   \
        check_model_modes(model, "reference/" stem ".json", bound, CC_JIT, 1);               \
    }
#define Q8_SYNTH(name, stem) Q8_TEST(name, "models/synthetic/synth-d256-" stem ".gguf", "synth-d256-" stem, B_Q8_SYNTH)
Q8_SYNTH(f32, "F32")
Q8_SYNTH(f16, "F16")
Q8_SYNTH(bf16, "BF16")
Q8_SYNTH(q8_0, "Q8_0")
Q8_SYNTH(q4_0, "Q4_0")
Q8_SYNTH(q4_1, "Q4_1")
Q8_SYNTH(q5_0, "Q5_0")
Q8_SYNTH(q5_1, "Q5_1")
Q8_SYNTH(q2_k, "Q2_K")
Q8_SYNTH(q2_k_pure, "Q2_K-pure")
Q8_SYNTH(q3_k_s, "Q3_K_S")
Q8_SYNTH(q3_k_m, "Q3_K_M")
Q8_SYNTH(q3_k_l, "Q3_K_L")
Q8_SYNTH(q4_k_s, "Q4_K_S")
Q8_SYNTH(q4_k_m, "Q4_K_M")
Q8_SYNTH(q4_k_pure, "Q4_K-pure")
Q8_SYNTH(q5_k_s, "Q5_K_S")
Q8_SYNTH(q5_k_m, "Q5_K_M")
Q8_SYNTH(q6_k, "Q6_K")
Q8_SYNTH(iq4_nl, "IQ4_NL")
Q8_SYNTH(iq4_nl_pure, "IQ4_NL-pure")
Q8_SYNTH(iq4_xs, "IQ4_XS")
Q8_SYNTH(iq4_xs_pure, "IQ4_XS-pure")
Q8_SYNTH(iq3_xxs_pure, "IQ3_XXS-pure")
Q8_SYNTH(iq3_xs, "IQ3_XS")
Q8_SYNTH(iq3_s, "IQ3_S")
Q8_SYNTH(iq3_s_pure, "IQ3_S-pure")
Q8_SYNTH(iq3_m, "IQ3_M")
Q8_SYNTH(tq1_0, "TQ1_0")
Q8_SYNTH(tq2_0, "TQ2_0")
Q8_TEST(tinystories_q8_0, "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf",
        "TinyStories-656K-Q8_0", B_Q8_TINY)
Q8_TEST(tinystories_q2_k, "models/tinystories-656k/gguf/TinyStories-656K-Q2_K.gguf",
        "TinyStories-656K-Q2_K", B_Q8_TINY)
/* The model the chat, grammar and serve tests run, as they run it (default
 * activations q8): real Qwen3 tokenizer (151936 tokens), random F32 weights
 * with a tied Q8_0 token_embd/output (so only the plain reference exists);
 * the prompts include a rendered chat with control tokens. */
Q8_TEST(qwen3_chat, "models/chat/qwen3-chat.gguf", "chat/qwen3-chat", B_Q8_QWEN3_CHAT)

/* docs/architecture.md ("Numerics") states the bounds these tests enforce: a
 * table row "| label | max abs | greedy agree | one prompt within | ... |"
 * per bound, numbers equal to the ones above ("-" for no exact_abs). */
TEST(parity, docs_state_the_bounds) {
    char *doc = read_file("docs/architecture.md", NULL);
    EXPECT_MSG(doc, "cannot read docs/architecture.md");
    if (!doc) return;
    parity_bound all[64];
    size_t n = 0;
    const parity_bound *named[] = {&B_SYNTH,  &B_STORIES,    &B_TINY,       &B_Q8_SYNTH,   &B_Q8_TINY,
                                   &B_Q8_QWEN3_CHAT, &B_FAM, &B_FAM_GELU, &B_FAM_GEMMA4, &B_FAM_Q8,
                                   &B_MOE_F32, &B_MOE_Q8, &B_SSM_F32, &B_SSM_Q8};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) all[n++] = *named[i];
    for (size_t i = 0; i < sizeof B_ARCH / sizeof B_ARCH[0]; i++) all[n++] = B_ARCH[i];
    for (size_t i = 0; i < n; i++) {
        char head[96];
        snprintf(head, sizeof head, "\n| %s |", all[i].label);
        const char *row = strstr(doc, head);
        EXPECT_MSG(row, "docs/architecture.md has no bounds row '| %s |'", all[i].label);
        if (!row) continue;
        char cell[3][32] = {{0}};
        const char *p = row + strlen(head);
        for (int c = 0; c < 3; c++) {
            const char *bar = strchr(p, '|');
            if (!bar) break;
            while (*p == ' ') p++;
            size_t len = (size_t)(bar - p);
            while (len && p[len - 1] == ' ') len--;
            snprintf(cell[c], sizeof cell[c], "%.*s", (int)len, p);
            p = bar + 1;
        }
        double max_abs = strtod(cell[0], NULL), exact = cell[2][0] == '-' ? 0 : strtod(cell[2], NULL);
        int agree = atoi(cell[1]);
        EXPECT_MSG(max_abs == all[i].max_abs && agree == all[i].min_agree && exact == all[i].exact_abs,
                   "docs/architecture.md row '%s': max abs '%s', greedy '%s', within '%s'; the test enforces "
                   "%g, %d, %g", all[i].label, cell[0], cell[1], cell[2], all[i].max_abs, all[i].min_agree,
                   all[i].exact_abs);
    }
    free(doc);
}
