/*
 * test_encoder.c — the encoders (archspecs bert, nomic-bert: embedding
 * models) against llama.cpp's pooled embeddings, and what the library does
 * with an encoder.
 *
 * The models are tools/archgen.c's bert and nomic-bert (written into the
 * test's temporary directory; tests/data/arch/README.md: bidirectional
 * attention, learned positions or RoPE, token types, post-LN blocks, GELU or
 * SwiGLU) and their formats/quantize Q8_0 variant — the files whose llama.cpp
 * outputs tests/data/arch/<name>.json and <name>-q8_0.json hold: per prompt
 * the pooled final hidden state with mean, CLS and last pooling, not
 * normalised (tools/ref_embed.c, llama_get_embeddings_seq).
 *
 *   F32, f32 activations, JIT and AOT: cosine >= 0.99999 for every pooling
 *     and prompt, and JIT = AOT bit for bit;
 *   Q8_0, activations quantized like llama.cpp's CPU backend: cosine >= 0.999
 *     against llama.cpp's own run of the same Q8_0 file;
 *   the GGUF's pooling_type is the model's pooling (bert CLS, nomic-bert mean);
 *   an encoder refuses generation, an input longer than its batch, and gives
 *     the same vector whatever the session evaluated before;
 *   served: /v1/embeddings pools as the file says (and as asked), the
 *     generating endpoints answer 400 naming /v1/embeddings, /v1/models and
 *     Ollama's /api/show say what it is.
 */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinfer.h"
#include "formats/quantize.h"
#include "http_client.h"
#include "test.h"

#define ARCH_DATA "tests/data/arch"

/* The archgen model of family ("bert", "nomic-bert") in variant "f32" or
 * "q8_0", written on first use into path[cap]; -1 (test failed) when it
 * cannot be made. */
static int encoder_model(const char *family, const char *variant, char *path, size_t cap) {
    char f32[1200], cmd[3000], err[512];
    const char *dir = test_tmpdir(), *build = getenv("CINFER_BUILD");
    const char *vocab = shared_path("models/stories260K/stories260K.gguf");
    snprintf(f32, sizeof f32, "%s/%s.gguf", dir, family);
    if (access(f32, R_OK)) {
        char *out = NULL;
        snprintf(cmd, sizeof cmd, "'%s/tools/archgen' -o '%s' --vocab-from '%s' %s",
                 build && *build ? build : "build", dir, vocab, family);
        int st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st == 0, "%s: %s", cmd, out ? out : "");
        free(out);
        if (st) return -1;
    }
    if (!strcmp(variant, "f32")) {
        snprintf(path, cap, "%s", f32);
        return 0;
    }
    snprintf(path, cap, "%s/%s-%s.gguf", dir, family, variant);
    if (access(path, R_OK)) {
        quant_options o = quant_options_default();
        EXPECT(quant_ftype_parse(variant, &o.ftype) == 0);
        o.n_threads = 1;
        int rc = quant_file(f32, path, &o, NULL, err, sizeof err);
        EXPECT_MSG(rc == 0, "quantize %s %s: %s", family, variant, err);
        if (rc) return -1;
    }
    return 0;
}

static double cosine(const float *a, const cJSON *ref, int n, double *maxabs) {
    double dot = 0, na = 0, nb = 0;
    *maxabs = 0;
    for (int i = 0; i < n; i++) {
        double b = cJSON_GetArrayItem(ref, i)->valuedouble;
        dot += a[i] * b;
        na += (double)a[i] * a[i];
        nb += b * b;
        if (fabs(a[i] - b) > *maxabs) *maxabs = fabs(a[i] - b);
    }
    return dot / (sqrt(na) * sqrt(nb) + 1e-30);
}

static const struct {
    const char *name;
    int pooling;
} POOLS[] = {{"mean", CINFER_POOL_MEAN}, {"cls", CINFER_POOL_CLS}, {"last", CINFER_POOL_LAST}};

/* Every prompt and pooling of ref_rel against model path; the vectors of the
 * last pooling/prompt go to keep (n_embd * 9 floats) when not NULL. */
static void check_encoder(const char *path, const char *ref_rel, int compile, int activations, double min_cos,
                          float *keep) {
    cJSON *j = read_json(ref_rel);
    EXPECT_MSG(j, "cannot read %s", ref_rel);
    if (!j) return;
    char err[1024];
    cinfer_model *m = NULL;
    cinfer_model_options mo = {.compile = compile, .precision = CINFER_PRECISION_NATIVE};
    int rc = cinfer_model_open(path, &mo, &m, err, sizeof err);
    EXPECT_MSG(rc == 0, "open %s: %s", path, err);
    cinfer_session *s = NULL;
    cinfer_session_options so = {.n_threads = 1, .activations = activations};
    if (!rc) rc = cinfer_session_new(m, &so, &s, err, sizeof err);
    EXPECT_MSG(rc == 0, "session %s: %s", path, err);
    const int n_embd = cJSON_GetObjectItem(j, "n_embd")->valueint;
    EXPECT_EQ_I(m ? cinfer_model_n_embd(m) : -1, n_embd);
    float *v = malloc((size_t)n_embd * sizeof *v);
    int pi = 0, k = 0;
    const cJSON *pr;
    cJSON_ArrayForEach(pr, cJSON_GetObjectItem(j, "prompts")) {
        if (rc) break;
        const cJSON *pids = cJSON_GetObjectItem(pr, "prompt_ids");
        int n = cJSON_GetArraySize(pids);
        int32_t ids[600];
        for (int i = 0; i < n && i < 600; i++) ids[i] = cJSON_GetArrayItem(pids, i)->valueint;
        for (size_t q = 0; q < sizeof POOLS / sizeof *POOLS; q++) {
            const cJSON *ref = cJSON_GetObjectItem(cJSON_GetObjectItem(pr, "embeddings"), POOLS[q].name);
            int e = cinfer_embed(s, ids, n, POOLS[q].pooling | CINFER_EMBED_RAW, v, n_embd, err, sizeof err);
            EXPECT_MSG(e == 0, "embed %s prompt %d: %s", path, pi, err);
            if (e || cJSON_GetArraySize(ref) != n_embd) continue;
            double maxabs, c = cosine(v, ref, n_embd, &maxabs);
            printf("    %s %s%s prompt %d %-4s: cosine %.9f, max abs %.3g\n", ref_rel,
                   compile == CINFER_AOT ? "aot" : "jit", activations == CINFER_ACT_Q8 ? " q8" : "", pi,
                   POOLS[q].name, c, maxabs);
            EXPECT_MSG(c >= min_cos, "%s prompt %d pooling %s: cosine %.9f < %.6f (max abs %.3g)", ref_rel, pi,
                       POOLS[q].name, c, min_cos, maxabs);
            if (keep && k < 9) memcpy(keep + (size_t)k++ * n_embd, v, (size_t)n_embd * sizeof *v);
        }
        pi++;
    }
    free(v);
    cinfer_session_free(s);
    cinfer_model_close(m);
    cJSON_Delete(j);
}

/* F32 JIT and AOT against llama.cpp, and JIT = AOT bit for bit. */
static void check_f32(const char *family) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("../shared/models/stories260K absent");
    char path[1200], ref[256];
    if (encoder_model(family, "f32", path, sizeof path)) return;
    snprintf(ref, sizeof ref, ARCH_DATA "/%s.json", family);
    float jit[9 * 512], aot[9 * 512];
    memset(jit, 0, sizeof jit);
    memset(aot, 0, sizeof aot);
    check_encoder(path, ref, CINFER_JIT, CINFER_ACT_F32, 0.99999, jit);
    check_encoder(path, ref, CINFER_AOT, CINFER_ACT_F32, 0.99999, aot);
    EXPECT_MSG(!memcmp(jit, aot, sizeof jit), "%s: JIT and AOT embeddings differ", family);
}

static void check_q8(const char *family) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("../shared/models/stories260K absent");
    char path[1200], ref[256];
    if (encoder_model(family, "q8_0", path, sizeof path)) return;
    snprintf(ref, sizeof ref, ARCH_DATA "/%s-q8_0.json", family);
    check_encoder(path, ref, CINFER_JIT, CINFER_ACT_Q8, 0.999, NULL);
}

TEST(parity_enc, bert_f32) { check_f32("bert"); }
TEST(parity_enc, nomic_bert_f32) { check_f32("nomic-bert"); }
TEST(parity_enc, bert_q8_0) { check_q8("bert"); }
TEST(parity_enc, nomic_bert_q8_0) { check_q8("nomic-bert"); }

/* The library's view of an encoder: its declared pooling, no generation,
 * inputs evaluated whole (the vector does not depend on what came before),
 * inputs longer than the batch refused. */
TEST(encoder, library) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("../shared/models/stories260K absent");
    char bert[1200], nomic[1200], err[1024];
    if (encoder_model("bert", "f32", bert, sizeof bert) || encoder_model("nomic-bert", "f32", nomic, sizeof nomic))
        return;
    cinfer_model *m = NULL, *mn = NULL;
    EXPECT(cinfer_model_open(bert, NULL, &m, err, sizeof err) == 0);
    EXPECT(cinfer_model_open(nomic, NULL, &mn, err, sizeof err) == 0);
    if (!m || !mn) {
        cinfer_model_close(m);
        cinfer_model_close(mn);
        return;
    }
    EXPECT_EQ_I(cinfer_model_is_encoder(m), 1);
    EXPECT_EQ_I(cinfer_model_pooling(m), CINFER_POOL_CLS);
    EXPECT_EQ_I(cinfer_model_pooling(mn), CINFER_POOL_MEAN);
    cinfer_session *s = NULL;
    cinfer_session_options so = {.n_threads = 1, .n_ctx = 1024}; /* past the batch: 600 tokens fit */
    EXPECT(cinfer_session_new(m, &so, &s, err, sizeof err) == 0);
    if (s) {
        int32_t ids[600] = {1, 403, 407, 261, 378}, ids2[3] = {1, 300, 301};
        char e[512] = "";
        int rc = cinfer_generate_tokens(s, ids, 5, NULL, NULL, NULL, NULL, e, sizeof e);
        EXPECT_EQ_I(rc, CINFER_EUNSUPPORTED);
        EXPECT_MSG(strstr(e, "embedding model") && strstr(e, "cinfer_embed"), "generate on bert: '%s'", e);
        EXPECT_EQ_I(cinfer_eval(s, ids, 5, e, sizeof e), CINFER_EUNSUPPORTED);
        float a[128], b[128];
        EXPECT(cinfer_embed(s, ids, 5, CINFER_POOL_LAST, a, 128, err, sizeof err) == 0);
        /* another input first: with a causal model the common prefix {1}
         * would be reused; an encoder re-evaluates the whole input */
        EXPECT(cinfer_embed(s, ids2, 3, CINFER_POOL_LAST, b, 128, err, sizeof err) == 0);
        EXPECT(cinfer_embed(s, ids, 5, CINFER_POOL_LAST, b, 128, err, sizeof err) == 0);
        EXPECT_MSG(!memcmp(a, b, sizeof a), "bert: the same input embeds differently after another one");
        double n2 = 0;
        for (int i = 0; i < 128; i++) n2 += (double)a[i] * a[i];
        EXPECT_NEAR(n2, 1.0, 1e-5); /* normalised without CINFER_EMBED_RAW */
        for (int i = 5; i < 600; i++) ids[i] = 300 + i % 100;
        rc = cinfer_embed(s, ids, 600, CINFER_POOL_MEAN, a, 128, e, sizeof e);
        EXPECT_EQ_I(rc, CINFER_ECTX); /* bert.context_length 512: its batch */
        EXPECT_MSG(strstr(e, "at most 512"), "600 tokens on bert: '%s'", e);
    }
    cinfer_session_free(s);
    cinfer_model_close(m);
    cinfer_model_close(mn);
}

/* cinfer serve on an encoder. */
TEST(encoder, served) {
    if (!shared_path("models/stories260K/stories260K.gguf")) SKIP("../shared/models/stories260K absent");
    char bert[1200];
    if (encoder_model("bert", "f32", bert, sizeof bert)) return;
    cJSON *ref = read_json(ARCH_DATA "/bert.json");
    http_srv f;
    if (!ref || http_srv_start(&f, bert, NULL, NULL, (srv_options){.model_name = "bge", .n_threads = 1})) {
        cJSON_Delete(ref);
        return;
    }
    long st;
    /* "Once upon a time": the reference's first prompt; default pooling = the file's (CLS) */
    cJSON *j = http_post_json(f.base, "/v1/embeddings", "{\"input\":\"Once upon a time\"}", NULL, &st);
    EXPECT_EQ_I(st, 200);
    const cJSON *pr = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "prompts"), 0);
    for (int q = 0; q < 2; q++) {
        const char *pool = q ? "mean" : "cls";
        if (q) {
            cJSON_Delete(j);
            j = http_post_json(f.base, "/v1/embeddings", "{\"input\":\"Once upon a time\",\"pooling\":\"mean\"}",
                               NULL, &st);
            EXPECT_EQ_I(st, 200);
        }
        const cJSON *emb = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "embedding");
        const cJSON *want = cJSON_GetObjectItem(cJSON_GetObjectItem(pr, "embeddings"), pool);
        float v[128];
        int n = cJSON_GetArraySize(emb);
        EXPECT_EQ_I(n, 128);
        for (int i = 0; i < n && i < 128; i++) v[i] = (float)cJSON_GetArrayItem(emb, i)->valuedouble;
        double maxabs, c = n == 128 ? cosine(v, want, 128, &maxabs) : 0;
        EXPECT_MSG(c >= 0.99999, "served %s embedding: cosine %.9f to llama.cpp's", pool, c);
    }
    cJSON_Delete(j);
    static const char *const gen[][2] = {
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"},
        {"/v1/completions", "{\"prompt\":\"hi\"}"},
        {"/api/generate", "{\"model\":\"bge\",\"prompt\":\"hi\",\"stream\":false}"},
    };
    for (size_t i = 0; i < sizeof gen / sizeof *gen; i++) {
        j = http_post_json(f.base, gen[i][0], gen[i][1], NULL, &st);
        char *t = j ? cJSON_PrintUnformatted(j) : NULL;
        EXPECT_MSG(st == 400 && t && strstr(t, "embedding model") && strstr(t, "/v1/embeddings"), "%s: %ld %s",
                   gen[i][0], st, t ? t : "");
        free(t);
        cJSON_Delete(j);
    }
    j = http_post_json(f.base, "/v1/models", NULL, NULL, &st);
    const cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0);
    EXPECT(cJSON_IsTrue(cJSON_GetObjectItem(m0, "encoder")) && cJSON_IsFalse(cJSON_GetObjectItem(m0, "chat")));
    cJSON_Delete(j);
    j = http_post_json(f.base, "/api/show", "{\"model\":\"bge\"}", NULL, &st);
    char *caps = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "capabilities"));
    EXPECT_MSG(caps && !strcmp(caps, "[\"embedding\"]"), "capabilities %s", caps ? caps : "(none)");
    free(caps);
    cJSON_Delete(j);
    /* 600 tokens: more than the encoder evaluates at once (512) */
    char body[8192] = "{\"input\":[1";
    for (int i = 1; i < 600; i++) snprintf(body + strlen(body), sizeof body - strlen(body), ",%d", 300 + i % 100);
    strcat(body, "]}");
    j = http_post_json(f.base, "/v1/embeddings", body, NULL, &st);
    EXPECT_EQ_I(st, 400);
    cJSON_Delete(j);
    http_srv_stop(&f);
    cJSON_Delete(ref);
}

/* `cinfer embed --pooling none` prints one vector per token, as an array of
 * arrays, even when the text is one token (an empty text after BOS). */
TEST(encoder, cli_pooling_none_one_token) {
    const char *model = shared_path("models/stories260K/stories260K.gguf");
    if (!model) SKIP("../shared/models/stories260K absent");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s embed %s --pooling none -p '' -p 'Once' -t 1 2>/dev/null", cinfer_bin(), model);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    char *nl = out ? strchr(out, '\n') : NULL;
    cJSON *a = out ? cJSON_Parse(out) : NULL, *b = nl ? cJSON_Parse(nl + 1) : NULL;
    EXPECT_MSG(cJSON_IsArray(a) && cJSON_GetArraySize(a) == 1 && cJSON_IsArray(cJSON_GetArrayItem(a, 0)) &&
                   cJSON_GetArraySize(cJSON_GetArrayItem(a, 0)) == 64,
               "one-token text: %s", out ? out : "");
    EXPECT_MSG(cJSON_IsArray(b) && cJSON_GetArraySize(b) == 2, "BOS + 'Once': %s", nl ? nl + 1 : "");
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(out);
}
