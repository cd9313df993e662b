/*
 * test_hf.c — Hugging Face checkpoint folders (runtime/formats/hf.c) end to
 * end.  Suite hf/:
 *   tinystories_*   the shared F32 safetensors folder against llama.cpp's
 *                   logits of the same model as Q8_0 (dequant-f32 reference),
 *                   against an F32 GGUF written from the same tensors with
 *                   llama.cpp's Q/K permutation (tests/hf_write.c), its
 *                   tokenizer.json against the real HF tokenizer's ids
 *                   (tests/data/hf/tokenizer_vectors.json)
 *   arch_roundtrip  every mapped family: the random-weight GGUF test models
 *                   written as HF folders through the inverse mapping, read
 *                   back, same logits
 *   gptq_awq        known weights packed as AutoGPTQ / GPTQModel / AutoAWQ
 *                   store them: the loader's re-expression dequantizes to
 *                   exactly s·(q − z), and the logits equal the dequantized
 *                   F32 model's
 *   hostile_*       malformed folders: one-line errors, no crash (ASAN)
 *   cli_*, chat_*, serve_*   the commands on folders
 */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cinfer.h"
#include "compiler/compile.h"
#include "engine/engine.h"
#include "formats/gguf.h"
#include "formats/hf.h"
#include "formats/modelfile.h"
#include "formats/safetensors.h"
#include "hf_write.h"
#include "kernels/kern.h"
#include "test.h"
#include "text/tok.h"

#define TS_DIR "models/tinystories-656k/hf"
#define TS_Q8 "models/tinystories-656k/gguf/TinyStories-656K-Q8_0.gguf"
#define TS_REF "reference/dequant-f32/TinyStories-656K-Q8_0.json"

/* ---- helpers ---------------------------------------------------------------- */

/* Logits (n_vocab, into a malloc'd *out) of the prompt ids under precision. */
static int logits_of(const gguf_file *g, int precision, const int *ids, int n, float **out, int *n_vocab) {
    char err[1024];
    cc_options o = {.mode = CC_JIT, .precision = precision};
    cc_module *mod = NULL;
    eng_model em;
    memset(&em, 0, sizeof em);
    eng_ctx *ctx = NULL;
    int rc = -1;
    *out = NULL;
    if (cc_build(g, &o, &mod, err, sizeof err) || eng_model_bind(&em, g, mod->desc, mod->forward, err, sizeof err) ||
        eng_ctx_new(&em, 256, 1, 0, 0, &ctx, err, sizeof err) || eng_eval(ctx, ids, n, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "logits: %s", err);
    } else {
        *n_vocab = mod->desc->n_vocab;
        *out = malloc((size_t)*n_vocab * sizeof **out);
        memcpy(*out, eng_logits(ctx), (size_t)*n_vocab * sizeof **out);
        rc = 0;
    }
    eng_ctx_free(ctx);
    eng_model_release(&em);
    cc_module_free(mod);
    return rc;
}

static double cosine(const float *a, const float *b, int n, double *maxabs) {
    double d = 0, na = 0, nb = 0;
    *maxabs = 0;
    for (int i = 0; i < n; i++) {
        d += (double)a[i] * b[i];
        na += (double)a[i] * a[i];
        nb += (double)b[i] * b[i];
        if (fabs((double)a[i] - b[i]) > *maxabs) *maxabs = fabs((double)a[i] - b[i]);
    }
    return d / (sqrt(na) * sqrt(nb) + 1e-30);
}

static gguf_file *open_model(const char *path) {
    char err[1024];
    gguf_file *g = NULL;
    if (modelfile_open(path, &g, err, sizeof err)) test_fail(__FILE__, __LINE__, "open %s: %s", path, err);
    return g;
}

/* The reference prompt's ids (first prompt) and its logits_last. */
static int ref_prompt(const char *ref, int *ids, int *n, float **logits, int *n_vocab, char **text) {
    cJSON *j = read_json(ref);
    cJSON *p = j ? cJSON_GetArrayItem(cJSON_GetObjectItem(j, "prompts"), 0) : NULL;
    if (!p) {
        cJSON_Delete(j);
        return -1;
    }
    cJSON *pid = cJSON_GetObjectItem(p, "prompt_ids"), *ll = cJSON_GetObjectItem(p, "logits_last");
    *n = cJSON_GetArraySize(pid);
    for (int i = 0; i < *n && i < 64; i++) ids[i] = cJSON_GetArrayItem(pid, i)->valueint;
    *n_vocab = cJSON_GetArraySize(ll);
    *logits = malloc((size_t)*n_vocab * sizeof **logits);
    for (int i = 0; i < *n_vocab; i++) (*logits)[i] = (float)cJSON_GetArrayItem(ll, i)->valuedouble;
    if (text) *text = strdup(cJSON_GetStringValue(cJSON_GetObjectItem(p, "prompt")));
    cJSON_Delete(j);
    return 0;
}

/* ---- TinyStories: the shared folder ------------------------------------------------ */

TEST(hf, tinystories_matches_q8_reference) {
    NEED_SHARED(dir, TS_DIR);
    char d[1024];
    snprintf(d, sizeof d, "%s", dir);
    NEED_SHARED(ref, TS_REF);
    int ids[64], n, nv_ref;
    float *want;
    char *text;
    if (ref_prompt(ref, ids, &n, &want, &nv_ref, &text)) SKIP("reference unreadable");
    gguf_file *g = open_model(d);
    float *got = NULL;
    int nv = 0;
    if (g && !logits_of(g, CINFER_PRECISION_AUTO, ids, n, &got, &nv)) {
        EXPECT_EQ_I(nv, nv_ref);
        double maxabs, c = cosine(got, want, nv < nv_ref ? nv : nv_ref, &maxabs);
        printf("    folder vs Q8_0 dequant-f32 reference: cosine %.6f, max abs %.3g\n", c, maxabs);
        EXPECT_MSG(c >= 0.999, "cosine %.6f < 0.999", c);
        EXPECT_EQ_I(argmax_f32(got, nv), argmax_f32(want, nv_ref));
        /* the folder's tokenizer.json gives the reference prompt's ids */
        char err[512];
        tok_vocab *v = NULL;
        EXPECT_MSG(tok_load_gguf(g, &v, err, sizeof err) == 0, "%s", err);
        int32_t tid[64];
        size_t nt = 0;
        if (v) EXPECT_EQ_I(tok_encode(v, text, strlen(text), true, false, tid, 64, &nt), 0);
        EXPECT_EQ_I(nt, n);
        for (size_t i = 0; i < nt && i < (size_t)n; i++) EXPECT_EQ_I(tid[i], ids[i]);
        tok_free(v);
    }
    free(got);
    free(want);
    free(text);
    gguf_close(g);
}

TEST(hf, tinystories_f32_equals_gguf_from_same_tensors) {
    NEED_SHARED(dir, TS_DIR);
    char d[1024], out[1024], err[1024];
    snprintf(d, sizeof d, "%s", dir);
    snprintf(out, sizeof out, "%s/ts-f32.gguf", test_tmpdir());
    gguf_file *hf = open_model(d);
    if (!hf) return;
    EXPECT_MSG(hfw_gguf_from_hf(hf, out, err, sizeof err) == 0, "%s", err);
    gguf_file *gg = open_model(out);
    /* the written file is llama.cpp's layout: q/k rows permuted, no rope.layout */
    EXPECT(gg && !gguf_get(gg, "llama.rope.layout") && gguf_get(hf, "llama.rope.layout"));
    int ids[] = {1, 80, 147, 201, 282, 57, 286, 598, 704};
    float *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    if (gg && !logits_of(hf, CINFER_PRECISION_F32, ids, 9, &a, &na) &&
        !logits_of(gg, CINFER_PRECISION_F32, ids, 9, &b, &nb)) {
        double maxabs, c = cosine(a, b, na, &maxabs);
        printf("    folder (rotate-half, neox) vs GGUF (permuted, norm), --quant f32: cosine %.9f, max abs %.3g\n", c,
               maxabs);
        EXPECT_MSG(c >= 0.99999, "cosine %.9f", c);
        EXPECT_EQ_I(argmax_f32(a, na), argmax_f32(b, nb));
    }
    free(a);
    free(b);
    gguf_close(gg);
    gguf_close(hf);
}

/* F32 matrices (and F32 vectors) are the mapping's bytes, not copies. */
TEST(hf, tinystories_zero_copy) {
    NEED_SHARED(dir, TS_DIR);
    char d[1024], p[1200], err[512];
    snprintf(d, sizeof d, "%s", dir);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    gguf_file *g = open_model(d);
    st_file *st = NULL;
    EXPECT_MSG(st_open(p, &st, err, sizeof err) == 0, "%s", err);
    if (g && st) {
        const gguf_tensor *q = gguf_find_tensor(g, "blk.0.attn_q.weight");
        const st_tensor *sq = st_find_tensor(st, "model.layers.0.self_attn.q_proj.weight");
        EXPECT(q && sq && q->n_bytes == sq->n_bytes && !memcmp(q->data, sq->data, sq->n_bytes));
        /* in a shard's mapping: gguf_populate finds a region for it */
        EXPECT(q && gguf_populate(g, q->data, q->n_bytes) == 0);
        const gguf_tensor *nrm = gguf_find_tensor(g, "blk.0.attn_norm.weight");
        EXPECT(nrm && gguf_populate(g, nrm->data, nrm->n_bytes) == 0);
        /* tied: only lm_head.weight is stored; it is token_embd */
        EXPECT(gguf_find_tensor(g, "token_embd.weight") && !gguf_find_tensor(g, "output.weight"));
    }
    st_close(st);
    gguf_close(g);
}

/* The SentencePiece-style tokenizer.json against ids the real Hugging Face
 * tokenizers library produced (tests/data/hf/tokenizer_vectors.json, made by
 * tests/data/hf/gen_tokenizer_vectors.mjs), also for pipeline variants. */
TEST(hf, tokenizer_json_matches_hf_tokenizers) {
    NEED_SHARED(tj, TS_DIR "/tokenizer.json");
    size_t len;
    char *base = read_file(tj, &len);
    cJSON *vec = read_json("tests/data/hf/tokenizer_vectors.json");
    EXPECT_MSG(vec, "tests/data/hf/tokenizer_vectors.json unreadable");
    cJSON *variant;
    int n_checked = 0;
    cJSON_ArrayForEach(variant, cJSON_GetObjectItem(vec, "variants")) {
        const char *vname = cJSON_GetStringValue(cJSON_GetObjectItem(variant, "name"));
        /* the variant is the shared tokenizer.json with some keys replaced */
        cJSON *tj_json = cJSON_Parse(base);
        cJSON *patch = cJSON_GetObjectItem(variant, "patch"), *kv;
        cJSON_ArrayForEach(kv, patch) cJSON_ReplaceItemInObject(tj_json, kv->string, cJSON_Duplicate(kv, 1));
        cJSON *added = cJSON_GetObjectItem(variant, "added_normalized");
        if (cJSON_IsBool(added)) {
            cJSON *a;
            cJSON_ArrayForEach(a, cJSON_GetObjectItem(tj_json, "added_tokens"))
                cJSON_ReplaceItemInObject(a, "normalized", cJSON_CreateBool(cJSON_IsTrue(added)));
        }
        char *text = cJSON_PrintUnformatted(tj_json);
        cJSON_Delete(tj_json);
        tok_vocab *v = NULL;
        char err[512];
        int rc = tok_load_hf_json_mem(text, strlen(text), NULL, 0, &v, err, sizeof err);
        EXPECT_MSG(rc == 0, "%s: %s", vname, err);
        cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(variant, "cases")) {
            const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(c, "text"));
            cJSON *want = cJSON_GetObjectItem(c, "ids");
            int32_t ids[512];
            size_t n = 0;
            if (!v) break;
            EXPECT_EQ_I(tok_encode(v, s, strlen(s), true, true, ids, 512, &n), 0);
            int nw = cJSON_GetArraySize(want), same = (int)n == nw;
            for (int i = 0; same && i < nw; i++) same = ids[i] == cJSON_GetArrayItem(want, i)->valueint;
            char got[2048] = "";
            for (size_t i = 0, k = 0; i < n && k < sizeof got - 12; i++) k += (size_t)snprintf(got + k, 12, "%d ", ids[i]);
            char *ws = cJSON_PrintUnformatted(want);
            EXPECT_MSG(same, "%s: \"%s\": got %s, HF %s", vname, s, got, ws);
            free(ws);
            n_checked++;
        }
        tok_free(v);
        free(text);
    }
    EXPECT_MSG(n_checked >= 20, "only %d cases", n_checked);
    cJSON_Delete(vec);
    free(base);
}
