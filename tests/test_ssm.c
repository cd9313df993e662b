/*
 * test_ssm.c — state-space, linear-attention and hybrid families end to end
 * (issue 18): mamba, mamba2, lfm2, nemotron_h, falcon-h1, granitehybrid,
 * qwen3next, on the seeded test models of tools/archgen.c against llama.cpp's
 * references in tests/data/arch/ (README there).
 *
 * Per family (parity against llama.cpp's references is test_parity.c's
 * parity_ssm/<family>, which runs the same files):
 *   JIT = AOT  logits bit for bit (2 threads, q8 activations, Q4_0).
 *   batch      64 tokens as one prompt batch (chunked DeltaNet) against the
 *              same tokens one call each: every position's logits within
 *              1e-5 cosine distance.
 *   session    saved after N tokens and restored: the next logits bit for bit.
 * And the state cache: prefix reuse from snapshots (end of prompt, end of
 * generation, keep_state_at, chat message ends), what a miss costs, context
 * full, the named compile-time error of an unsupported variant, and
 * qwen3next's legacy ssm_in layout.
 *
 * The models are written by build/tools/archgen (make test builds it) into
 * the test's temporary directory, their Q8_0/Q4_0 variants by `cinfer
 * quantize`; the vocabulary comes from ../shared (skipped without it).
 */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer.h"
#include "compiler/compile.h"
#include "engine/engine.h"
#include "formats/gguf.h"
#include "gguf_edit.h"
#include "test.h"
#include "test_model.h"

#define ARCH_DATA "tests/data/arch"
#define VOCAB_REL "models/stories260K/stories260K.gguf"

/* ---- test models -------------------------------------------------------------- */

static const char *const FAMILIES[] = {"mamba", "mamba2", "lfm2", "nemotron_h", "falcon-h1",
                                       "granitehybrid", "qwen3next"};
#define N_FAMILIES (int)(sizeof FAMILIES / sizeof *FAMILIES)

/* Path of family's model in variant "f32", "q8_0" or "q4_0", generated on
 * first use into the test's temporary directory under the names
 * test_parity.c's arch_model uses (the same files: one archgen run, one
 * quantization per variant); NULL (test skipped or failed) when it cannot be
 * made. */
static const char *model_path(const char *family, const char *variant) {
    static char path[1200];
    const char *vocab = shared_path(VOCAB_REL);
    if (!vocab) return NULL;
    const char *dir = test_tmpdir();
    char cmd[4096], *out = NULL;
    snprintf(path, sizeof path, "%s/%s.gguf", dir, family);
    if (access(path, R_OK)) {
        const char *build = getenv("CINFER_BUILD");
        snprintf(cmd, sizeof cmd, "'%s/tools/archgen' -o '%s' --vocab-from '%s' %s",
                 build && *build ? build : "build", dir, vocab, family);
        int st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st == 0, "%s failed (%d): %s", cmd, st, out ? out : "");
        free(out);
        if (st) return NULL;
    }
    if (!strcmp(variant, "f32")) return path;
    snprintf(path, sizeof path, "%s/%s-%s.gguf", dir, family, variant);
    if (!access(path, R_OK)) return path;
    snprintf(cmd, sizeof cmd, "'%s' quantize '%s/%s.gguf' '%s' --type %s", cinfer_bin(), dir, family, path,
             variant);
    out = NULL;
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st == 0, "%s failed (%d): %s", cmd, st, out ? out : "");
    free(out);
    return st == 0 ? path : NULL;
}


/* Compile path (mode, native weights) into l with a 512-position context. */
static int load_threads(const char *path, cc_mode mode, int act_quant, int logits_all, int n_threads, loaded *l) {
    char err[1024];
    const cc_options o = {.mode = mode, .precision = CINFER_PRECISION_NATIVE};
    const eng_ctx_opts eo = {.n_ctx = 512, .n_threads = n_threads, .logits_all = logits_all, .act_quant = act_quant};
    if (loaded_open(path, &o, &eo, l, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "load %s: %s", path, err);
        return -1;
    }
    return 0;
}

static int load(const char *path, cc_mode mode, int act_quant, int logits_all, loaded *l) {
    return load_threads(path, mode, act_quant, logits_all, 1, l);
}

static int json_ids(const cJSON *arr, int *ids, int cap) {
    int n = 0;
    for (const cJSON *e = arr ? arr->child : NULL; e && n < cap; e = e->next) ids[n++] = e->valueint;
    return n;
}

static double cos_dist(const float *a, const float *b, int n) {
    double dot = 0, na = 0, nb = 0;
    for (int i = 0; i < n; i++) dot += (double)a[i] * b[i], na += (double)a[i] * a[i], nb += (double)b[i] * b[i];
    return 1 - dot / (sqrt(na) * sqrt(nb) + 1e-30);
}

/* ---- JIT = AOT ---------------------------------------------------------------------- */
/* Parity against llama.cpp (F32 JIT and AOT, Q8_0/Q4_0, the shared mamba and
 * mamba2 files) is test_parity.c's (parity_ssm/<family>, parity_arch/mamba,
 * parity_arch/mamba2; bounds in docs/architecture.md "Numerics").  Here: JIT
 * and AOT run the same kernels in the same order, so their logits are equal
 * bit for bit — 2 threads, q8 activations, a 10-token prompt (the chunked
 * delta rule) then decode steps, the Q4_0 file of every family. */
TEST(ssm, jit_aot_bit_identical) {
    for (int f = 0; f < N_FAMILIES; f++) {
        const char *m = model_path(FAMILIES[f], "q4_0");
        if (!m) SKIP("../shared/%s absent", VOCAB_REL);
        char path[1200];
        snprintf(path, sizeof path, "%s", m);
        int ids[] = {1, 403, 407, 261, 378, 300, 301, 302, 303, 304};
        float *out[2] = {0};
        int n_vocab = 0;
        for (int mode = CC_JIT; mode <= CC_AOT; mode++) {
            loaded l;
            if (load_threads(path, (cc_mode)mode, 1, 0, 2, &l)) break;
            char err[256];
            n_vocab = l.mod->desc->n_vocab;
            EXPECT(eng_eval(l.ctx, ids, 10, err, sizeof err) == 0);
            for (int s = 0; s < 3; s++) EXPECT(eng_eval(l.ctx, ids + s, 1, err, sizeof err) == 0);
            out[mode] = malloc((size_t)n_vocab * sizeof(float));
            memcpy(out[mode], eng_logits(l.ctx), (size_t)n_vocab * sizeof(float));
            unload(&l);
        }
        EXPECT_MSG(out[0] && out[1] && !memcmp(out[0], out[1], (size_t)n_vocab * sizeof(float)),
                   "%s q4_0: JIT and AOT logits differ", FAMILIES[f]);
        free(out[0]);
        free(out[1]);
    }
}

static int tokens_64(const char *family, int *ids);

/* Older qwen3next files carry one ssm_in per DeltaNet layer instead of
 * attn_qkv + attn_gate: per key head [q (d_k) | k (d_k) | v (r d_v) | z (r d_v)]
 * (llama.cpp's legacy path).  The same weights in that layout give the same
 * logits. */
TEST(ssm, qwen3next_legacy_ssm_in_layout) {
    const char *mp = model_path("qwen3next", "f32");
    if (!mp) SKIP("../shared/%s absent", VOCAB_REL);
    char src[1200], dst[1200], err[512];
    snprintf(src, sizeof src, "%s", mp);
    snprintf(dst, sizeof dst, "%s/ssm-qwen3next-ssm_in.gguf", test_tmpdir());
    gguf_file *g = NULL;
    EXPECT(gguf_open(src, &g, err, sizeof err) == 0);
    if (!g) return;
    const int nk = 2, nv = 4, dk = 32, dv = 32, r = nv / nk, key_dim = nk * dk, value_dim = nv * dv;
    const char *drop[16] = {0};
    char names[3][3][64];
    gguf_edit_tensor add[3];
    float *bufs[3] = {0};
    int n_add = 0, n_drop = 0;
    for (int il = 0; il < 3; il++) { /* the DeltaNet layers (full attention every 4th) */
        snprintf(names[il][0], 64, "blk.%d.attn_qkv.weight", il);
        snprintf(names[il][1], 64, "blk.%d.attn_gate.weight", il);
        snprintf(names[il][2], 64, "blk.%d.ssm_in.weight", il);
        const gguf_tensor *qkv = gguf_find_tensor(g, names[il][0]), *gate = gguf_find_tensor(g, names[il][1]);
        EXPECT(qkv && gate && qkv->type == 0 && gate->type == 0);
        if (!qkv || !gate) break;
        const int64_t n = qkv->ne[0]; /* row length n_embd; rows are output features */
        float *w = bufs[il] = malloc((size_t)(2 * key_dim + 2 * value_dim) * (size_t)n * sizeof(float));
        const float *wq = qkv->data, *wg = gate->data;
        int row = 0;
        for (int kh = 0; kh < nk; kh++) {
            const int from[4] = {kh * dk, key_dim + kh * dk, 2 * key_dim + kh * r * dv, kh * r * dv};
            const int len[4] = {dk, dk, r * dv, r * dv};
            for (int part = 0; part < 4; part++)
                for (int i = 0; i < len[part]; i++, row++)
                    memcpy(w + (size_t)row * n, (part < 3 ? wq : wg) + (size_t)(from[part] + i) * n,
                           (size_t)n * sizeof(float));
        }
        drop[n_drop++] = names[il][0];
        drop[n_drop++] = names[il][1];
        add[n_add++] = (gguf_edit_tensor){names[il][2], 2, {n, 2 * key_dim + 2 * value_dim, 1, 1}, w};
    }
    EXPECT(gguf_edit_copy_tensors(src, dst, NULL, 0, drop, add, (size_t)n_add) == 0);
    gguf_close(g);
    for (int i = 0; i < 3; i++) free(bufs[i]);
    int ids[64], n = tokens_64("qwen3next", ids);
    float *want = NULL;
    for (int pass = 0; pass < 2; pass++) {
        loaded l;
        if (load(pass ? dst : src, CC_JIT, 0, 0, &l)) break;
        EXPECT(eng_eval(l.ctx, ids, n, err, sizeof err) == 0);
        const int nvocab = l.mod->desc->n_vocab;
        if (!pass) {
            want = malloc((size_t)nvocab * sizeof(float));
            memcpy(want, eng_logits(l.ctx), (size_t)nvocab * sizeof(float));
        } else {
            EXPECT_MSG(!memcmp(want, eng_logits(l.ctx), (size_t)nvocab * sizeof(float)),
                       "logits with ssm_in differ from attn_qkv + attn_gate (cosine distance %.3g)",
                       cos_dist(want, eng_logits(l.ctx), nvocab));
        }
        unload(&l);
    }
    free(want);
}

/* ---- 64 tokens as a batch vs one at a time ------------------------------------------- */

/* The long reference prompt (60 ids) and the first greedy ids after it. */
static int tokens_64(const char *family, int *ids) {
    char refp[600];
    snprintf(refp, sizeof refp, ARCH_DATA "/%s.json", family);
    cJSON *ref = read_json(refp);
    const cJSON *pr = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "prompts"), 2);
    int n = json_ids(cJSON_GetObjectItem(pr, "prompt_ids"), ids, 64);
    n += json_ids(cJSON_GetObjectItem(pr, "greedy_ids"), ids + n, 64 - n);
    cJSON_Delete(ref);
    return n;
}

/* Three modes: the F32 file and the Q8_0 file with f32 activations (exact
 * dequantized weights), the Q8_0 file with q8 activations.  The recurrent
 * kernels are batch-invariant bit for bit (test_kern_ssm.c) and the chunked
 * delta rule is within float rounding of the recurrence, so the first two
 * stay within 1e-5; with q8 activations the matmuls are batch-invariant too
 * (docs/architecture.md "Batch invariance"): measured 2.2e-16. */
TEST(ssm, batch_of_64_equals_token_by_token) {
    static const struct { const char *variant; int act_quant; double bound; } modes[] = {
        {"f32", 0, 1e-5}, {"q8_0", 0, 1e-5}, {"q8_0", 1, 1e-5}};
    for (int f = 0; f < N_FAMILIES; f++) {
        int ids[64], n = tokens_64(FAMILIES[f], ids);
        EXPECT_EQ_I(n, 64);
        for (int mi = 0; mi < 3; mi++) {
            const char *m = model_path(FAMILIES[f], modes[mi].variant);
            if (!m) SKIP("../shared/%s absent", VOCAB_REL);
            char model[1200];
            snprintf(model, sizeof model, "%s", m);
            loaded b, s;
            if (load(model, CC_JIT, modes[mi].act_quant, 1, &b)) return;
            if (load(model, CC_JIT, modes[mi].act_quant, 0, &s)) {
                unload(&b);
                return;
            }
            char err[256];
            const int nv = b.mod->desc->n_vocab;
            EXPECT(eng_eval(b.ctx, ids, n, err, sizeof err) == 0);
            double worst = 0;
            for (int t = 0; t < n; t++) {
                EXPECT(eng_eval(s.ctx, &ids[t], 1, err, sizeof err) == 0);
                worst = fmax(worst, cos_dist(b.ctx->logits + (size_t)t * nv, eng_logits(s.ctx), nv));
            }
            EXPECT_MSG(worst <= modes[mi].bound, "%s %s, %s activations: batch vs token by token, cosine distance "
                       "%.3g > %g", FAMILIES[f], modes[mi].variant, modes[mi].act_quant ? "q8" : "f32", worst,
                       modes[mi].bound);
            printf("    %s %s, %s activations: worst cosine distance over 64 positions %.2g\n", FAMILIES[f],
                   modes[mi].variant, modes[mi].act_quant ? "q8" : "f32", worst);
            unload(&b);
            unload(&s);
        }
    }
}

/* ---- sessions: save / restore, prefix reuse -------------------------------------------- */

static cinfer_model *open_model(const char *path) {
    cinfer_model *m = NULL;
    char err[1024];
    cinfer_model_options mo = {.precision = CINFER_PRECISION_NATIVE};
    EXPECT_MSG(cinfer_model_open(path, &mo, &m, err, sizeof err) == 0, "open %s: %s", path, err);
    return m;
}

static cinfer_session *new_session(cinfer_model *m, int n_ctx) {
    cinfer_session *s = NULL;
    char err[512];
    cinfer_session_options so = {.n_ctx = n_ctx, .n_threads = 1, .activations = CINFER_ACT_F32};
    EXPECT_MSG(cinfer_session_new(m, &so, &s, err, sizeof err) == 0, "session: %s", err);
    return s;
}

/* Saved after N tokens, restored into a fresh session: the next logits, and
 * those of every following token, are bit-identical. */
TEST(ssm, session_save_restore_is_bit_identical) {
    for (int f = 0; f < N_FAMILIES; f++) {
        const char *mp = model_path(FAMILIES[f], "f32");
        if (!mp) SKIP("../shared/%s absent", VOCAB_REL);
        cinfer_model *m = open_model(mp);
        if (!m) return;
        int ids[64];
        tokens_64(FAMILIES[f], ids);
        const int N = 37, n_vocab = cinfer_model_n_vocab(m);
        char path[1200], err[512];
        snprintf(path, sizeof path, "%s/ssm-%s.session", test_tmpdir(), FAMILIES[f]);
        cinfer_session *a = new_session(m, 128), *b = new_session(m, 128);
        EXPECT(cinfer_eval(a, ids, N, err, sizeof err) == 0);
        EXPECT_MSG(cinfer_session_save(a, path, err, sizeof err) == 0, "save: %s", err);
        EXPECT_MSG(cinfer_session_load(b, path, err, sizeof err) == 0, "load: %s", err);
        EXPECT_EQ_I(cinfer_session_n_past(b), N);
        EXPECT(cinfer_logits(b) && !memcmp(cinfer_logits(a), cinfer_logits(b), (size_t)n_vocab * sizeof(float)));
        int same = 1;
        for (int t = N; t < 64; t++) {
            EXPECT(cinfer_eval(a, ids, (size_t)t + 1, err, sizeof err) == 0);
            EXPECT(cinfer_eval(b, ids, (size_t)t + 1, err, sizeof err) == 0);
            same &= !memcmp(cinfer_logits(a), cinfer_logits(b), (size_t)n_vocab * sizeof(float));
        }
        EXPECT_MSG(same, "%s: logits after a restored session differ from the saved one's", FAMILIES[f]);
        cinfer_session_free(a);
        cinfer_session_free(b);
        cinfer_model_close(m);
    }
}

/* Greedy, one token: r.n_reused tells where the prompt's evaluation started. */
static int gen1(cinfer_session *s, const int32_t *ids, size_t n, const size_t *marks, size_t n_marks,
                int32_t *tok) {
    cinfer_gen_options o = {.max_tokens = 1, .keep_state_at = marks, .n_keep_state_at = n_marks};
    cinfer_gen_result r;
    char err[512];
    int rc = cinfer_generate_tokens(s, ids, n, &o, NULL, NULL, &r, err, sizeof err);
    EXPECT_MSG(rc == 0, "generate: %s", err);
    if (tok) *tok = cinfer_session_tokens(s)[n];
    return rc ? -1 : r.n_reused;
}

TEST(ssm, prefix_reuse_restarts_from_snapshots) {
    const char *fams[] = {"qwen3next", "granitehybrid", "mamba"};
    for (size_t f = 0; f < sizeof fams / sizeof *fams; f++) {
        const char *mp = model_path(fams[f], "f32");
        if (!mp) SKIP("../shared/%s absent", VOCAB_REL);
        cinfer_model *m = open_model(mp);
        if (!m) return;
        int ids[64];
        tokens_64(fams[f], ids);
        int32_t a[64], c[64], t_warm, t_cold;
        memcpy(a, ids, sizeof a);
        const int nA = 20, nB = 40; /* a = A (20) + B (20) + more */
        cinfer_session *s = new_session(m, 256), *cold = new_session(m, 256);
        char err[256];
        /* a prompt that extends the last one starts at its end */
        EXPECT(cinfer_eval(s, a, nA, err, sizeof err) == 0);
        EXPECT_EQ_I(gen1(s, a, nB, NULL, 0, &t_warm), nA);
        EXPECT_EQ_I(gen1(cold, a, nB, NULL, 0, &t_cold), 0);
        EXPECT_EQ_I(t_warm, t_cold);
        double d = cos_dist(cinfer_logits(s), cinfer_logits(cold), cinfer_model_n_vocab(m));
        EXPECT_MSG(d <= 1e-5, "%s: reused prefix vs cold evaluation: cosine distance %.3g", fams[f], d);
        /* the same prompt again: its end-of-prompt snapshot has the logits, nothing is evaluated */
        EXPECT_EQ_I(gen1(s, a, nB, NULL, 0, NULL), nB);
        /* a prompt that leaves the history inside B: back to the snapshot at the end of A
         * (B's first 5 tokens are evaluated again: what a miss costs) */
        memcpy(c, a, sizeof c);
        c[nA + 5] = (c[nA + 5] + 1) % cinfer_model_n_vocab(m);
        EXPECT_EQ_I(gen1(s, c, nB, NULL, 0, NULL), nA);
        /* keep_state_at: a snapshot after 25 tokens, which the next prompt then reuses */
        size_t mark = 25;
        EXPECT_EQ_I(gen1(s, a, nB, &mark, 1, NULL), nA);
        c[nA + 5] = a[nA + 5];
        c[30] = (c[30] + 1) % cinfer_model_n_vocab(m);
        EXPECT_EQ_I(gen1(s, c, nB, NULL, 0, NULL), 25);
        /* no snapshot at or before the common prefix: from position 0 */
        cinfer_session_reset(s);
        EXPECT_EQ_I(gen1(s, a, nB, NULL, 0, NULL), 0);
        EXPECT_EQ_I(gen1(s, c, nB, NULL, 0, NULL), 0);
        cinfer_session_free(s);
        cinfer_session_free(cold);
        cinfer_model_close(m);
    }
}

/* The snapshot ring: when full, a new snapshot replaces the oldest one but
 * the earliest (4 slots, snapshots at 1..7: 1 and the last three stay). */
TEST(ssm, snapshot_ring_keeps_earliest_and_newest) {
    const char *mp = model_path("mamba", "f32");
    if (!mp) SKIP("../shared/%s absent", VOCAB_REL);
    char path[1200], err[256];
    snprintf(path, sizeof path, "%s", mp);
    loaded l;
    if (load(path, CC_JIT, 0, 0, &l)) return;
    EXPECT_EQ_I(l.ctx->n_snaps, ENG_DEFAULT_SNAPSHOTS);
    int tok = 1;
    for (int p = 1; p <= 7; p++) {
        EXPECT(eng_eval(l.ctx, &tok, 1, err, sizeof err) == 0);
        eng_snapshot(l.ctx);
    }
    char got[64] = "";
    for (int p = 1; p <= 7; p++)
        if (eng_snapshot_at(l.ctx, p)) snprintf(got + strlen(got), sizeof got - strlen(got), " %d", p);
    EXPECT_STR_EQ(got, " 1 5 6 7");
    unload(&l);
}

/* A decode loop of one-token cinfer_eval calls (cinfer bench's, or a caller's
 * own sampler): each call is an evaluated prompt, but its snapshot is
 * deferred, so the loop copies no state per token (58 MB a token on a 1B
 * hybrid).  The prompt's snapshot survives the loop; the loop's last
 * position becomes one when a longer evaluation extends it; a prompt that
 * leaves the history inside the loop's tokens restarts from the prompt's
 * end (with a snapshot per token, the ring would have kept the loop's last
 * three positions). */
TEST(ssm, decode_loop_defers_snapshots) {
    const char *mp = model_path("granitehybrid", "f32");
    if (!mp) SKIP("../shared/%s absent", VOCAB_REL);
    cinfer_model *m = open_model(mp);
    if (!m) return;
    int ids[64];
    tokens_64("granitehybrid", ids);
    int32_t a[64], c[64];
    memcpy(a, ids, sizeof a);
    const int nA = 20, nv = cinfer_model_n_vocab(m);
    cinfer_session *s = new_session(m, 256), *cold = new_session(m, 256);
    char err[256];
    EXPECT(cinfer_eval(s, a, nA, err, sizeof err) == 0);
    for (int i = nA; i < nA + 10; i++) EXPECT(cinfer_eval(s, a, (size_t)i + 1, err, sizeof err) == 0);
    EXPECT(cinfer_eval(cold, a, nA + 10, err, sizeof err) == 0);
    double d = cos_dist(cinfer_logits(s), cinfer_logits(cold), nv);
    EXPECT_MSG(d <= 1e-5, "decode loop vs one batch: cosine distance %.3g", d);
    /* the same history again: nothing evaluated */
    EXPECT_EQ_I(gen1(s, a, nA + 10, NULL, 0, NULL), nA + 10);
    /* left inside the loop's tokens: back to the prompt's end */
    memcpy(c, a, sizeof c);
    c[nA + 8] = (c[nA + 8] + 1) % nv;
    EXPECT_EQ_I(gen1(s, c, nA + 10, NULL, 0, NULL), nA);
    /* a loop, then a longer evaluation extending it: the loop's end is kept */
    cinfer_session_reset(s);
    EXPECT(cinfer_eval(s, a, nA, err, sizeof err) == 0);
    for (int i = nA; i < nA + 10; i++) EXPECT(cinfer_eval(s, a, (size_t)i + 1, err, sizeof err) == 0);
    EXPECT(cinfer_eval(s, a, nA + 15, err, sizeof err) == 0);
    memcpy(c, a, sizeof c);
    c[nA + 12] = (c[nA + 12] + 1) % nv;
    EXPECT_EQ_I(gen1(s, c, nA + 15, NULL, 0, NULL), nA + 10);
    cinfer_session_free(s);
    cinfer_session_free(cold);
    cinfer_model_close(m);
}

/* ---- chat: a snapshot at the end of each leading message ---------------------------------- */

TEST(ssm, chat_keeps_state_at_message_ends) {
    const char *mp = model_path("granitehybrid", "f32");
    if (!mp) SKIP("../shared/%s absent", VOCAB_REL);
    char path[1200];
    snprintf(path, sizeof path, "%s/ssm-granitehybrid-chat.gguf", test_tmpdir());
    const char *tmpl = "{% for m in messages %}<{{ m.role }}> {{ m.content }}\n{% endfor %}"
                       "{% if add_generation_prompt %}<assistant>{% endif %}";
    char err[512];
    const char *k[] = {"tokenizer.chat_template"}, *v[] = {tmpl};
    EXPECT(gguf_edit_copy(mp, path, NULL, k, v, 1) == 0);
    cinfer_model *m = open_model(path);
    if (!m) return;
    cinfer_session *s = new_session(m, 512);
    cinfer_message one[] = {{"system", "You tell short stories about a little dog."},
                            {"user", "Once upon a time there was a dog named Max."}};
    cinfer_message two[] = {{"system", "You tell short stories about a little dog."},
                            {"user", "The little dog liked to run in the park."}};
    cinfer_gen_options o = {.max_tokens = 2};
    cinfer_gen_result r;
    char *sys_prompt = NULL;
    EXPECT(cinfer_chat(s, one, 2, &o, NULL, NULL, &r, err, sizeof err) == 0);
    EXPECT_EQ_I(r.n_reused, 0);
    /* another conversation with the same system message starts where it ends */
    EXPECT(cinfer_chat(s, two, 2, &o, NULL, NULL, &r, err, sizeof err) == 0);
    EXPECT(cinfer_chat_prompt(m, two, 1, 0, &sys_prompt, err, sizeof err) == 0);
    int32_t ids[256];
    size_t n_sys = 0;
    EXPECT(sys_prompt && cinfer_tokenize(m, sys_prompt, strlen(sys_prompt), 1, 1, ids, 256, &n_sys) == 0);
    EXPECT_MSG(n_sys > 4 && r.n_reused == (int)n_sys, "second conversation reused %d tokens, the system "
               "message is %zu", r.n_reused, n_sys);
    free(sys_prompt);
    cinfer_session_free(s);
    cinfer_model_close(m);
}

/* ---- context full, unsupported variants ------------------------------------------------------ */

TEST(ssm, context_full_stops_generation) {
    const char *mp = model_path("mamba2", "f32");
    if (!mp) SKIP("../shared/%s absent", VOCAB_REL);
    cinfer_model *m = open_model(mp);
    if (!m) return;
    cinfer_session *s = new_session(m, 16);
    int32_t ids[4] = {1, 403, 407, 261};
    cinfer_gen_options o = {0};
    cinfer_gen_result r;
    char err[256];
    EXPECT(cinfer_generate_tokens(s, ids, 4, &o, NULL, NULL, &r, err, sizeof err) == 0);
    EXPECT_EQ_I(r.stop, CINFER_STOP_CTX_FULL);
    EXPECT_EQ_I(cinfer_session_n_past(s), 16);
    cinfer_session_free(s);
    cinfer_model_close(m);
}

TEST(ssm, unsupported_variant_is_a_named_compile_error) {
    const char *mp = model_path("mamba", "f32");
    if (!mp) SKIP("../shared/%s absent", VOCAB_REL);
    char path[1200], err[1024];
    snprintf(path, sizeof path, "%s/ssm-falcon-mamba.gguf", test_tmpdir());
    gguf_kv_set set = {"mamba.ssm.dt_b_c_rms", {.type = GGUF_VT_BOOL, .v.b = true}};
    EXPECT(gguf_edit_copy_tensors(mp, path, &set, 1, NULL, NULL, 0) == 0);
    gguf_file *g = NULL;
    cc_module *mod = NULL;
    EXPECT(gguf_open(path, &g, err, sizeof err) == 0);
    cc_options o = {.mode = CC_JIT};
    EXPECT(g && cc_build(g, &o, &mod, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "archspecs/mamba.lua:") && strstr(err, "not supported: mamba.ssm.dt_b_c_rms=true"),
               "message: %s", err);
    cc_module_free(mod);
    gguf_close(g);
}
