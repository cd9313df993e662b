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
#include "formats/gguf_write.h"
#include "formats/hf.h"
#include "formats/modelfile.h"
#include "formats/safetensors.h"
#include "hf_write.h"
#include "http_client.h"
#include "server/srv.h"
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
        /* the fingerprint (compile cache, standalone programs) is the folder's, whatever the heap held */
        uint64_t fp = gguf_fingerprint(g);
        for (int i = 0; i < 3; i++) {
            size_t nb = 200000 + 4096 * (size_t)i;
            char *junk = malloc(nb);
            memset(junk, 0x5a + i, nb);
            free(junk);
            gguf_file *g2 = open_model(d);
            EXPECT(g2 && gguf_fingerprint(g2) == fp && gguf_data_offset(g2) == gguf_data_offset(g));
            gguf_close(g2);
        }
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

/* ---- every mapped family: GGUF -> HF folder (inverse mapping) -> logits ------------------- */

/* The families with a mapping: their random-weight test models, fresh from
 * the seeded generator (tools/archgen.c, built by make test) when it is
 * there, else the copies in ../shared/models/arch. */
static const struct {
    const char *family; /* archgen family; NULL: the real stories260K model */
    uint32_t dtype;
    int n_shards;
} arch_models[] = {
    {NULL, ST_F32, 1},          /* llama (stories260K): llama.cpp's permuted q/k undone */
    {"llama", ST_F32, 2},       /* the same on a GQA model */
    {"granite", ST_F32, 2},     /* the same permutation, multipliers */
    {"qwen2", ST_F32, 3},       /* biases */
    {"qwen3", ST_F32, 1},       /* q/k norms, key_length */
    {"gemma", ST_F32, 1},       /* norms stored as w, GGUF 1 + w */
    {"gemma2", ST_F32, 2},      /* soft-capping, post norms, window */
    {"gemma3", ST_F32, 1},      /* q/k norms 1 + w, local/global */
    {"phi3", ST_F32, 1},        /* fused qkv, gate|up */
    {"starcoder2", ST_F32, 1},  /* LayerNorm biases, plain GELU */
    {"gpt2", ST_F32, 2},        /* Conv1D transposes, learned positions */
    {"qwen2", ST_BF16, 1},      /* BF16 matrices zero copy, vectors to F32 */
    {"phi3", ST_F16, 1},        /* F16 */
};

/* Path of the test model of family (NULL: stories260K) into buf, or NULL. */
static const char *arch_model(const char *family, char *buf, size_t cap) {
    const char *p;
    if (!family) {
        p = shared_path("models/stories260K/stories260K.gguf");
        return p ? (snprintf(buf, cap, "%s", p), buf) : NULL;
    }
    const char *build = getenv("CINFER_BUILD");
    char gen[1024], cmd[4096], *out = NULL;
    snprintf(gen, sizeof gen, "%s/tools/archgen", build && *build ? build : "build");
    const char *vocab = shared_path("models/stories260K/stories260K.gguf");
    snprintf(buf, cap, "%s/%s.gguf", test_tmpdir(), family);
    if (vocab && access(gen, X_OK) == 0 && access(buf, R_OK) != 0) {
        snprintf(cmd, sizeof cmd, "'%s' -o '%s' --vocab-from '%s' %s", gen, test_tmpdir(), vocab, family);
        if (run_cmd(cmd, true, &out)) test_fail(__FILE__, __LINE__, "%s: %s", cmd, out ? out : "");
        free(out);
    }
    if (access(buf, R_OK) == 0) return buf;
    char rel[256];
    snprintf(rel, sizeof rel, "models/arch/%s.gguf", family);
    p = shared_path(rel);
    return p ? (snprintf(buf, cap, "%s", p), buf) : NULL;
}

TEST(hf, arch_roundtrip) {
    int ids[] = {1, 403, 407, 261, 378, 500, 298, 262, 272, 269, 291, 271};
    int done = 0;
    for (size_t i = 0; i < sizeof arch_models / sizeof *arch_models; i++) {
        char path[1024], dir[1100], err[1024];
        const char *what = arch_models[i].family ? arch_models[i].family : "stories260K (llama)";
        if (!arch_model(arch_models[i].family, path, sizeof path)) continue;
        snprintf(dir, sizeof dir, "%s/arch-%zu", test_tmpdir(), i);
        gguf_file *g = open_model(path);
        if (!g) continue;
        hfw_opts o = {.dtype = arch_models[i].dtype, .n_shards = arch_models[i].n_shards, .tokenizer = true};
        int rc = hfw_from_gguf(g, dir, &o, err, sizeof err);
        EXPECT_MSG(rc == 0, "%s: %s", what, err);
        gguf_file *hf = rc ? NULL : open_model(dir);
        float *a = NULL, *b = NULL;
        int na = 0, nb = 0;
        if (hf && !logits_of(g, CINFER_PRECISION_F32, ids, 12, &a, &na) &&
            !logits_of(hf, CINFER_PRECISION_F32, ids, 12, &b, &nb)) {
            double maxabs, c = cosine(a, b, na, &maxabs);
            double want = arch_models[i].dtype == ST_F32 ? 0.99999 : 0.999;
            printf("    %-20s %s x%d: cosine %.9f, max abs %.3g\n", what, st_dtype_name(arch_models[i].dtype),
                   arch_models[i].n_shards, c, maxabs);
            EXPECT_EQ_I(na, nb);
            EXPECT_MSG(c >= want, "%s %s: cosine %.9f < %g", what, st_dtype_name(arch_models[i].dtype), c, want);
            if (arch_models[i].dtype == ST_F32) EXPECT_EQ_I(argmax_f32(a, na), argmax_f32(b, nb));
            /* the tokenizer.json written from the SPM vocabulary loads with the model's size */
            tok_vocab *v = NULL;
            EXPECT_MSG(tok_load_gguf(hf, &v, err, sizeof err) == 0, "%s", err);
            if (v) EXPECT_EQ_I(tok_n_vocab(v), nb);
            tok_free(v);
            done++;
        }
        if (hf && arch_models[i].dtype != ST_F32) { /* matrices straight from the mapping */
            const gguf_tensor *t = gguf_find_tensor(hf, "blk.0.ffn_down.weight");
            EXPECT(t && t->type == (arch_models[i].dtype == ST_BF16 ? GGML_TYPE_BF16 : GGML_TYPE_F16) &&
                   gguf_populate(hf, t->data, t->n_bytes) == 0);
            const gguf_tensor *nrm = gguf_find_tensor(hf, "blk.0.attn_norm.weight");
            EXPECT(nrm && nrm->type == GGML_TYPE_F32);
        }
        free(a);
        free(b);
        gguf_close(hf);
        gguf_close(g);
    }
    if (!done) SKIP("no test models (../shared absent)");
}

/* A tokenizer.json derived from stories260K's SentencePiece vocabulary (merges
 * as HF's converter derives them) tokenizes like the GGUF's scores. */
TEST(hf, spm_vocab_as_tokenizer_json) {
    NEED_SHARED(p, "models/stories260K/stories260K.gguf");
    char path[1024], dir[1100], err[1024];
    snprintf(path, sizeof path, "%s", p);
    snprintf(dir, sizeof dir, "%s/stories-tok", test_tmpdir());
    gguf_file *g = open_model(path);
    hfw_opts o = {.tokenizer = true};
    EXPECT_MSG(g && hfw_from_gguf(g, dir, &o, err, sizeof err) == 0, "%s", err);
    gguf_file *hf = open_model(dir);
    tok_vocab *a = NULL, *b = NULL;
    EXPECT(g && tok_load_gguf(g, &a, err, sizeof err) == 0);
    EXPECT_MSG(hf && tok_load_gguf(hf, &b, err, sizeof err) == 0, "%s", err);
    static const char *const texts[] = {
        "Once upon a time, there was a little girl named Lily.", "She liked to play in the park with her dog.",
        "\"Can I have it?\" asked Tom. Mom said yes!", "  two  spaces and\nnewlines\n", "ünïcödé 日本 🙂",
    };
    for (size_t i = 0; a && b && i < sizeof texts / sizeof *texts; i++) {
        int32_t x[512], y[512];
        size_t nx = 0, ny = 0;
        EXPECT_EQ_I(tok_encode(a, texts[i], strlen(texts[i]), true, false, x, 512, &nx), 0);
        EXPECT_EQ_I(tok_encode(b, texts[i], strlen(texts[i]), true, false, y, 512, &ny), 0);
        EXPECT_MSG(nx == ny && !memcmp(x, y, nx * sizeof *x), "\"%s\": %zu vs %zu ids", texts[i], nx, ny);
    }
    tok_free(a);
    tok_free(b);
    gguf_close(hf);
    gguf_close(g);
}

/* ---- GPTQ / AWQ ------------------------------------------------------------------------ */

static bool is_linear(const char *name) {
    static const char *const suf[] = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                                      "gate_proj.weight", "up_proj.weight", "down_proj.weight"};
    for (size_t i = 0; i < sizeof suf / sizeof *suf; i++) {
        size_t n = strlen(name), k = strlen(suf[i]);
        if (n > k && !strcmp(name + n - k, suf[i])) return true;
    }
    return false;
}

static int copy_file(const char *from, const char *dir, const char *name) {
    char to[2048];
    snprintf(to, sizeof to, "%s/%s", dir, name);
    return symlink(from, to) && errno != EEXIST ? -1 : 0;
}

/* TinyStories as a quantized folder qdir (q) and as its exact dequantization
 * in F32 (fdir); deq_out[module] kept for the exactness check. */
typedef struct {
    char module[160];
    float *deq;
    int n_out, n_in;
} qref;

static int write_quantized(const char *ts_dir, const hfw_quant *q, const char *qdir, const char *fdir, qref *refs,
                           int *n_refs, char *err, size_t err_len) {
    char p[2048];
    snprintf(p, sizeof p, "%s/model.safetensors", ts_dir);
    st_file *st = NULL;
    if (st_open(p, &st, err, err_len)) return -1;
    hfw_tensor *qt = NULL, *ft = calloc(st_n_tensors(st), sizeof *ft);
    size_t nq = 0, nf = 0;
    int rc = 0;
    *n_refs = 0;
    for (uint64_t i = 0; !rc && i < st_n_tensors(st); i++) {
        const st_tensor *t = st_tensor_at(st, i);
        hfw_tensor *f = &ft[nf++];
        snprintf(f->name, sizeof f->name, "%s", t->name);
        f->dtype = ST_F32;
        f->n_dims = (int)t->n_dims;
        for (uint32_t d = 0; d < t->n_dims; d++) f->shape[d] = t->shape[d];
        f->n_bytes = t->n_bytes;
        f->data = malloc(t->n_bytes);
        memcpy(f->data, t->data, t->n_bytes);
        if (!is_linear(t->name)) {
            hfw_tensor *nt = realloc(qt, (nq + 1) * sizeof *nt);
            qt = nt;
            qt[nq] = *f;
            qt[nq].data = malloc(t->n_bytes);
            memcpy(qt[nq++].data, t->data, t->n_bytes);
            continue;
        }
        qref *r = &refs[(*n_refs)++];
        snprintf(r->module, sizeof r->module, "%.*s", (int)(strlen(t->name) - 7), t->name);
        r->n_out = (int)t->shape[0];
        r->n_in = (int)t->shape[1];
        r->deq = malloc((size_t)r->n_out * r->n_in * sizeof *r->deq);
        rc = hfw_quantize(q, r->module, f->data, r->n_out, r->n_in, &qt, &nq, r->deq, err, err_len);
        memcpy(f->data, r->deq, t->n_bytes); /* the F32 twin holds the dequantized values */
    }
    st_close(st);
    mkdir(qdir, 0755);
    mkdir(fdir, 0755);
    snprintf(p, sizeof p, "%s/model.safetensors", qdir);
    if (!rc) rc = hfw_safetensors(p, qt, nq, err, err_len);
    snprintf(p, sizeof p, "%s/model.safetensors", fdir);
    if (!rc) rc = hfw_safetensors(p, ft, nf, err, err_len);
    hfw_tensors_free(qt, nq);
    hfw_tensors_free(ft, nf);
    /* config.json + quantization_config; the tokenizer files as they are */
    snprintf(p, sizeof p, "%s/config.json", ts_dir);
    char *cfg = read_file(p, NULL);
    cJSON *cj = cfg ? cJSON_Parse(cfg) : NULL;
    free(cfg);
    if (!cj) return rc ? rc : -1;
    char *plain = cJSON_Print(cj);
    if (!rc) rc = hfw_text(fdir, "config.json", plain, err, err_len);
    free(plain);
    cJSON_AddItemToObject(cj, "quantization_config", cJSON_Parse(hfw_quant_config(q)));
    char *qc = cJSON_Print(cj);
    if (!rc) rc = hfw_text(qdir, "config.json", qc, err, err_len);
    free(qc);
    cJSON_Delete(cj);
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2 && !rc; i++) {
        snprintf(p, sizeof p, "%s/%s", ts_dir, files[i]);
        char abs[4096];
        if (!realpath(p, abs) || copy_file(abs, qdir, files[i]) || copy_file(abs, fdir, files[i]))
            rc = -1;
    }
    return rc;
}

static const struct {
    const char *what;
    hfw_quant q;
    uint32_t want_type; /* what every linear must become */
} quant_cases[] = {
    {"GPTQ 4-bit sym g32", {HFW_GPTQ, 4, 32, true, false, 0}, GGML_TYPE_Q4_0},
    {"GPTQ 4-bit asym g64", {HFW_GPTQ, 4, 64, false, false, 0}, GGML_TYPE_Q5_0},
    {"GPTQ 4-bit sym g32 act-order", {HFW_GPTQ, 4, 32, true, true, 7}, GGML_TYPE_F32},
    {"GPTQ 4-bit asym per-row (g -1)", {HFW_GPTQ, 4, -1, false, false, 0}, GGML_TYPE_Q5_0},
    {"GPTQ 8-bit sym g128", {HFW_GPTQ, 8, 128, true, false, 0}, GGML_TYPE_Q8_0},
    {"GPTQ 3-bit asym g32", {HFW_GPTQ, 3, 32, false, false, 0}, GGML_TYPE_Q4_0},
    {"GPTQ 2-bit asym g32", {HFW_GPTQ, 2, 32, false, false, 0}, GGML_TYPE_Q4_0},
    {"GPTQModel v2 4-bit asym g128", {HFW_GPTQ_V2, 4, 128, false, false, 0}, GGML_TYPE_Q5_0},
    {"AWQ GEMM 4-bit g32", {HFW_AWQ, 4, 32, false, false, 0}, GGML_TYPE_Q5_0},
    {"AWQ GEMM 4-bit g128", {HFW_AWQ, 4, 128, false, false, 0}, GGML_TYPE_Q5_0},
};

TEST(hf, gptq_awq_exact) {
    NEED_SHARED(ts, TS_DIR);
    char ts_dir[1024];
    snprintf(ts_dir, sizeof ts_dir, "%s", ts);
    char err[1024];
    hf_map *map = NULL;
    EXPECT_MSG(hf_map_load("llama", NULL, &map, err, sizeof err) == 0, "%s", err);
    int ids[] = {1, 80, 147, 201, 282, 57, 286, 598};
    for (size_t c = 0; map && c < sizeof quant_cases / sizeof *quant_cases; c++) {
        char qdir[1200], fdir[1200];
        snprintf(qdir, sizeof qdir, "%s/quant-%zu", test_tmpdir(), c);
        snprintf(fdir, sizeof fdir, "%s/quant-%zu-f32", test_tmpdir(), c);
        qref refs[32];
        int n_refs = 0;
        if (write_quantized(ts_dir, &quant_cases[c].q, qdir, fdir, refs, &n_refs, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "%s: %s", quant_cases[c].what, err);
            continue;
        }
        gguf_file *gq = open_model(qdir), *gf = open_model(fdir);
        int exact = 1;
        for (int r = 0; gq && r < n_refs; r++) {
            char base[200], name[220];
            int layer = -1;
            const hf_map_tensor *mt = NULL;
            for (size_t e = 0; e < map->n_tensors && !mt; e++)
                if (hf_match(map->tensors[e].hf, refs[r].module, &layer)) mt = &map->tensors[e];
            const char *d = mt ? strstr(mt->gguf, "%d") : NULL;
            snprintf(base, sizeof base, "%.*s%d%s", d ? (int)(d - mt->gguf) : 0, mt ? mt->gguf : "", layer, d ? d + 2 : "");
            snprintf(name, sizeof name, "%s.weight", base);
            const gguf_tensor *t = gguf_find_tensor(gq, name);
            EXPECT_MSG(t, "%s: no %s", quant_cases[c].what, name);
            if (!t) continue;
            EXPECT_MSG(t->type == quant_cases[c].want_type, "%s: %s is %s, expected %s", quant_cases[c].what, name,
                       ggml_type_name(t->type), ggml_type_name(quant_cases[c].want_type));
            EXPECT(t->ne[0] == refs[r].n_in && t->ne[1] == refs[r].n_out);
            size_t rb = kern_row_bytes((int)t->type, refs[r].n_in);
            float *row = malloc((size_t)refs[r].n_in * sizeof *row);
            for (int o = 0; o < refs[r].n_out && exact; o++) {
                kern_dequant_row((int)t->type, (const char *)t->data + rb * (size_t)o, row, refs[r].n_in);
                if (memcmp(row, refs[r].deq + (size_t)o * refs[r].n_in, (size_t)refs[r].n_in * sizeof *row)) {
                    exact = 0;
                    test_fail(__FILE__, __LINE__, "%s: %s row %d differs from s*(q - z)", quant_cases[c].what, name, o);
                }
            }
            free(row);
        }
        float *a = NULL, *b = NULL;
        int na = 0, nb = 0;
        /* native: the kernels on the re-expressed blocks, f32 activations */
        if (gq && gf && !logits_of(gq, CINFER_PRECISION_NATIVE, ids, 8, &a, &na) &&
            !logits_of(gf, CINFER_PRECISION_F32, ids, 8, &b, &nb)) {
            double maxabs, cs = cosine(a, b, na, &maxabs);
            printf("    %-32s %-6s exact %s, logits vs dequantized F32: cosine %.9f, max abs %.3g\n",
                   quant_cases[c].what, ggml_type_name(quant_cases[c].want_type), exact ? "yes" : "NO", cs, maxabs);
            EXPECT_MSG(cs >= 0.99999, "%s: cosine %.9f", quant_cases[c].what, cs);
            EXPECT_EQ_I(argmax_f32(a, na), argmax_f32(b, nb));
        }
        free(a);
        free(b);
        /* the compute precisions apply as to any GGUF of these types */
        if (gq && c < 2) {
            float *x = NULL, *y = NULL;
            int nx, ny;
            if (!logits_of(gq, CINFER_PRECISION_AUTO, ids, 8, &x, &nx) && !logits_of(gq, CINFER_PRECISION_INT8, ids, 8, &y, &ny)) {
                double maxabs, cs = cosine(x, y, nx, &maxabs);
                EXPECT_MSG(cs >= 0.99, "%s auto vs int8: cosine %.6f", quant_cases[c].what, cs);
            }
            free(x);
            free(y);
        }
        for (int r = 0; r < n_refs; r++) free(refs[r].deq);
        gguf_close(gq);
        gguf_close(gf);
    }
    hf_map_free(map);
}

/* ---- hostile folders ---------------------------------------------------------------------- */

#define CFG_OK "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"num_hidden_layers\":1," \
               "\"intermediate_size\":16,\"num_attention_heads\":2,\"rms_norm_eps\":1e-5,\"vocab_size\":16%s}"

typedef struct {
    const char *what;
    const char *config;     /* printf format with one %s (extra keys), or NULL for CFG_OK */
    const char *extra;      /* keys appended to CFG_OK */
    const char *index;      /* model.safetensors.index.json text, or NULL */
    const char *st_header;  /* the safetensors header JSON (NULL: a valid one-tensor file) */
    size_t st_data;         /* data bytes after it */
    const char *st_name;    /* file name of the safetensors (default model.safetensors) */
    const char *quant_file; /* quantize_config.json text, or NULL */
    const char *want;       /* substring of the error */
} hostile;

#define NORM8 "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}"
static const hostile hostiles[] = {
    {"config not JSON", "{\"architectures\": [", NULL, NULL, NULL, 0, NULL, NULL, "config.json: JSON syntax error"},
    {"config an array", "[1, 2]", NULL, NULL, NULL, 0, NULL, NULL, "config.json is not a JSON object"},
    {"no architectures", "{\"hidden_size\": 8}", NULL, NULL, NULL, 0, NULL, NULL, "\"architectures\" must be a list"},
    {"unknown family", "{\"architectures\":[\"FooForCausalLM\"]}", NULL, NULL, NULL, 0, NULL, NULL,
     "'FooForCausalLM' has no mapping (supported: "},
    {"missing hidden_size", "{\"architectures\":[\"LlamaForCausalLM\"],\"num_hidden_layers\":1}", NULL, NULL, NULL, 0,
     NULL, NULL, "(for llama.attention.head_count): is missing, llama needs it (archspecs/llama.hf.lua)"},
    {"string count", NULL, ",\"num_key_value_heads\":\"2\"", NULL, NULL, 0, NULL, NULL, "expected a number, got the string"},
    {"gelu llama", NULL, ",\"hidden_act\":\"gelu\"", NULL, NULL, 0, NULL, NULL, "\"hidden_act\" is \"gelu\""},
    {"llama3 rope scaling", NULL, ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0}", NULL, NULL, 0, NULL,
     NULL, "\"rope_scaling\" is {\"rope_type\":\"llama3\""},
    {"head_dim other than hidden/heads", NULL, ",\"head_dim\":16", NULL, NULL, 0, NULL, NULL, "\"head_dim\" is 16"},
    {"tie not boolean", NULL, ",\"tie_word_embeddings\":\"yes\"", NULL, NULL, 0, NULL, NULL,
     "tie_word_embeddings is not a boolean"},
    {"eos not an id", NULL, ",\"eos_token_id\":\"x\"", NULL, NULL, 0, NULL, NULL, "eos_token_id must be a token id"},
    {"no weights", NULL, "", NULL, NULL, 0, "other.bin", NULL, "no model.safetensors and no model.safetensors.index.json"},
    {"index path ..", NULL, "", "{\"weight_map\":{\"model.norm.weight\":\"../x.safetensors\"}}", NULL, 0, NULL, NULL,
     "names shard '../x.safetensors': expected a plain file name"},
    {"index absolute path", NULL, "", "{\"weight_map\":{\"model.norm.weight\":\"/etc/passwd\"}}", NULL, 0, NULL, NULL,
     "names shard '/etc/passwd': expected a plain file name"},
    {"index subfolder", NULL, "", "{\"weight_map\":{\"model.norm.weight\":\"sub/m.safetensors\"}}", NULL, 0, NULL, NULL,
     "expected a plain file name"},
    {"index hidden file", NULL, "", "{\"weight_map\":{\"model.norm.weight\":\".m.safetensors\"}}", NULL, 0, NULL, NULL,
     "expected a plain file name"},
    {"index missing shard", NULL, "", "{\"weight_map\":{\"model.norm.weight\":\"model-00002-of-00002.safetensors\"}}", NULL,
     0, NULL, NULL, "shard model-00002-of-00002.safetensors named by the index: cannot open"},
    {"index wrong shard", NULL, "", "{\"weight_map\":{\"model.embed_tokens.weight\":\"model.safetensors\"}}", NULL, 0,
     NULL, NULL, "puts tensor 'model.embed_tokens.weight' in model.safetensors, which does not hold it"},
    {"index value not a string", NULL, "", "{\"weight_map\":{\"model.norm.weight\":3}}", NULL, 0, NULL, NULL,
     "is not a file name"},
    {"index without weight_map", NULL, "", "{\"metadata\":{}}", NULL, 0, NULL, NULL, "has no \"weight_map\" object"},
    {"header length past EOF", NULL, "", NULL, "HUGE", 0, NULL, NULL, "exceeds the"},
    {"dtype I8", NULL, "", NULL, "{\"model.norm.weight\":{\"dtype\":\"I8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8, NULL,
     NULL, "tensor 'model.norm.weight': dtype I8, expected F32, F16 or BF16"},
    {"zero dimension", NULL, "", NULL, "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0,
     NULL, NULL, "dimension 0 is 0, expected >= 1"},
    {"five dimensions", NULL, "", NULL,
     "{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, NULL, NULL,
     "5 dimensions, expected 1..4"},
    {"unmapped tensor", NULL, "", NULL, "{\"model.layers.0.extra.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     8, NULL, NULL, "tensor 'model.layers.0.extra.weight' has no mapping in archspecs/llama.hf.lua"},
    {"odd suffix", NULL, "", NULL, "{\"model.norm.scale\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     NULL, NULL, "expected MODULE.weight or MODULE.bias"},
    {"quantized parts, no config", NULL, "", NULL,
     "{\"model.layers.0.mlp.up_proj.qweight\":{\"dtype\":\"I32\",\"shape\":[1,8],\"data_offsets\":[0,32]}}", 32, NULL, NULL,
     "is a quantized part, but neither config.json"},
    {"gptq missing scales", NULL, ",\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":8}", NULL,
     "{\"model.layers.0.mlp.up_proj.qweight\":{\"dtype\":\"I32\",\"shape\":[1,8],\"data_offsets\":[0,32]}}", 32, NULL, NULL,
     "needs qweight, qzeros and scales, has qweight"},
    {"gptq wrong scales shape", NULL, ",\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":8}", NULL,
     "{\"model.layers.0.mlp.up_proj.qweight\":{\"dtype\":\"I32\",\"shape\":[1,8],\"data_offsets\":[0,32]},"
     "\"model.layers.0.mlp.up_proj.qzeros\":{\"dtype\":\"I32\",\"shape\":[1,1],\"data_offsets\":[32,36]},"
     "\"model.layers.0.mlp.up_proj.scales\":{\"dtype\":\"F16\",\"shape\":[2,8],\"data_offsets\":[36,68]}}", 68, NULL, NULL,
     "expected scales [1, 8] and qzeros [1, 1], got [2, 8]"},
    {"gptq g_idx out of range", NULL, ",\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":8}", NULL,
     "{\"model.layers.0.mlp.up_proj.qweight\":{\"dtype\":\"I32\",\"shape\":[1,8],\"data_offsets\":[0,32]},"
     "\"model.layers.0.mlp.up_proj.qzeros\":{\"dtype\":\"I32\",\"shape\":[1,1],\"data_offsets\":[32,36]},"
     "\"model.layers.0.mlp.up_proj.scales\":{\"dtype\":\"F16\",\"shape\":[1,8],\"data_offsets\":[36,52]},"
     "\"model.layers.0.mlp.up_proj.g_idx\":{\"dtype\":\"I32\",\"shape\":[8],\"data_offsets\":[52,84]}}", 84, NULL, NULL,
     "g_idx[0] = 2139062143, expected 0..0"},
    {"gptq 5 bits", NULL, ",\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":5,\"group_size\":128}", NULL, NULL, 0,
     NULL, NULL, "bits 5, GPTQ packs 2, 3, 4 or 8"},
    {"gptq marlin", NULL, ",\"quantization_config\":{\"quant_method\":\"gptq\",\"bits\":4,\"checkpoint_format\":\"marlin\"}",
     NULL, NULL, 0, NULL, NULL, "checkpoint_format 'marlin' is not supported"},
    {"awq gemv", NULL, ",\"quantization_config\":{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":128,\"version\":\"gemv\"}",
     NULL, NULL, 0, NULL, NULL, "AWQ version 'gemv' is not supported (gemm)"},
    {"fp8", NULL, ",\"quantization_config\":{\"quant_method\":\"fp8\"}", NULL, NULL, 0, NULL, NULL,
     "quant_method 'fp8' is not supported (gptq, awq)"},
    {"bad quantize_config.json", NULL, "", NULL, NULL, 0, NULL, "{\"bits\": 4, \"group_size\": 0}", "group_size 0"},
    {"chat template not text", NULL, "", NULL, NULL, 0, NULL, NULL, "chat_template is neither"},
};

static void write_hostile(const hostile *h, const char *dir) {
    char err[512], p[2048], cfg[4096];
    mkdir(dir, 0755);
    if (h->config) snprintf(cfg, sizeof cfg, "%s", h->config);
    else snprintf(cfg, sizeof cfg, CFG_OK, h->extra ? h->extra : "");
    hfw_text(dir, "config.json", cfg, err, sizeof err);
    if (h->index) hfw_text(dir, "model.safetensors.index.json", h->index, err, sizeof err);
    if (h->quant_file) hfw_text(dir, "quantize_config.json", h->quant_file, err, sizeof err);
    if (strstr(h->what, "chat template"))
        hfw_text(dir, "tokenizer_config.json", "{\"chat_template\": 42}", err, sizeof err);
    const char *hdr = h->st_header ? h->st_header : "{" NORM8 "}";
    size_t n_data = h->st_header ? h->st_data : 32;
    snprintf(p, sizeof p, "%s/%s", dir, h->st_name ? h->st_name : "model.safetensors");
    FILE *f = fopen(p, "wb");
    uint64_t hl = strcmp(hdr, "HUGE") ? strlen(hdr) : (1ull << 40);
    fwrite(&hl, 8, 1, f);
    if (strcmp(hdr, "HUGE")) fwrite(hdr, 1, strlen(hdr), f);
    /* zeros, except a g_idx case: 0x7f7f7f7f is no group */
    for (size_t i = 0; i < n_data; i++) fputc(strstr(h->what, "g_idx") ? 0x7f : 0, f);
    fclose(f);
}

TEST(hf, hostile_folders_fail_cleanly) {
    for (size_t i = 0; i < sizeof hostiles / sizeof *hostiles; i++) {
        char dir[1024], err[1024] = "";
        snprintf(dir, sizeof dir, "%s/hostile-%zu", test_tmpdir(), i);
        write_hostile(&hostiles[i], dir);
        gguf_file *g = (gguf_file *)dir;
        int rc = modelfile_open(dir, &g, err, sizeof err);
        EXPECT_MSG(rc != 0 && g == NULL, "%s: opened", hostiles[i].what);
        EXPECT_MSG(!strncmp(err, "hf: ", 4) && !strchr(err, '\n'), "%s: %s", hostiles[i].what, err);
        EXPECT_MSG(strstr(err, hostiles[i].want), "%s: message lacks \"%s\": %s", hostiles[i].what, hostiles[i].want, err);
        if (!rc) gguf_close(g);
    }
}

/* Shapes the archspec does not expect open, and fail at compile naming the tensor. */
TEST(hf, hostile_shape_mismatch_at_compile) {
    char dir[1024], err[1024], p[1200];
    snprintf(dir, sizeof dir, "%s/shape", test_tmpdir());
    mkdir(dir, 0755);
    EXPECT(hfw_text(dir, "config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,"
                    "\"num_hidden_layers\":1,\"intermediate_size\":16,\"num_attention_heads\":2,\"rms_norm_eps\":1e-5,"
                    "\"vocab_size\":16}", err, sizeof err) == 0);
    float z[16 * 8] = {0};
    hfw_tensor t[2] = {{.name = "model.embed_tokens.weight", .dtype = ST_F32, .n_dims = 2, .shape = {16, 8}},
                       {.name = "model.norm.weight", .dtype = ST_F32, .n_dims = 1, .shape = {4}}};
    t[0].data = z, t[0].n_bytes = sizeof z;
    t[1].data = z, t[1].n_bytes = 16;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    EXPECT(hfw_safetensors(p, t, 2, err, sizeof err) == 0);
    gguf_file *g = open_model(dir);
    cc_options o = {.mode = CC_JIT};
    cc_module *m = NULL;
    EXPECT(g && cc_build(g, &o, &m, err, sizeof err) != 0);
    EXPECT_MSG(strstr(err, "output_norm.weight") || strstr(err, "blk.0.attn_norm.weight"), "%s", err);
    cc_module_free(m);
    gguf_close(g);
}

/* ---- the commands on folders ------------------------------------------------------------------ */

TEST(hf, cli_commands_take_a_folder) {
    NEED_SHARED(dir, TS_DIR);
    char d[1024], cmd[8192], *out = NULL;
    snprintf(d, sizeof d, "%s", dir);
    snprintf(cmd, sizeof cmd, "%s run %s -p 'Once upon a time' -n 8 --temp 0 2>/dev/null", cinfer_bin(), d);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && !strncmp(out, "Once upon a time", 16) && strlen(out) > 24, "run: %s", out ? out : "");
    free(out);
    /* a shard inside the folder stands for the folder */
    snprintf(cmd, sizeof cmd, "%s run %s/model.safetensors -p 'Once upon a time' -n 8 --temp 0 --quant int8 2>/dev/null",
             cinfer_bin(), d);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "%s tokenize %s 'Once upon a time'", cinfer_bin(), d);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_STR_EQ(out, "1 80 147 201 282 57\n");
    free(out);
    snprintf(cmd, sizeof cmd, "%s compile %s --emit-c -", cinfer_bin(), d);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    /* rope() with mode 2 (CF_ROPE_NEOX): the HF rows keep rotate-half order */
    EXPECT_MSG(out && strstr(out, "10000.0f, 2, ") && !strstr(out, "10000.0f, 0, "), "compile --emit-c");
    free(out);
    snprintf(cmd, sizeof cmd, "%s bench %s -p 8 -n 4 -r 1 --json 2>/dev/null", cinfer_bin(), d);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    EXPECT_MSG(j, "bench --json: %s", out ? out : "");
    cJSON_Delete(j);
    free(out);
    /* a standalone program compiled from the folder runs it */
    char exe[1100];
    snprintf(exe, sizeof exe, "%s/ts-standalone", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s compile %s --aot -o %s 2>&1 && %s %s -p 'Once upon a time' -n 6 --temp 0 2>&1",
             cinfer_bin(), d, exe, exe, d);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "Once upon a time,"), "standalone: %s", out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s inspect %s --json", cinfer_bin(), d);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "\"llama.rope.layout\""), "inspect");
    free(out);
    /* a folder the loader refuses: exit 1 and one line naming the problem */
    char bad[1100], err[256];
    snprintf(bad, sizeof bad, "%s/cli-bad", test_tmpdir());
    mkdir(bad, 0755);
    hfw_text(bad, "config.json", "{\"architectures\": [\"MambaForCausalLM\"]}", err, sizeof err);
    snprintf(cmd, sizeof cmd, "%s run %s -p x 2>&1", cinfer_bin(), bad);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 1);
    EXPECT_MSG(out && strstr(out, "'MambaForCausalLM' has no mapping"), "run bad: %s", out ? out : "");
    free(out);
}

/* The Qwen3 chat test model as an HF folder: its weights through the qwen3
 * mapping, the real Qwen3 tokenizer.json, a tokenizer_config.json with the
 * model's chat template.  Written once per run. */
static const char *qwen3_folder(void) {
    static char dir[1100];
    static int state; /* 0 not tried, 1 ok, -1 failed or absent */
    if (state) return state > 0 ? dir : NULL;
    state = -1;
    const char *m = shared_path("models/chat/qwen3-chat.gguf");
    if (!m) return NULL;
    char mp[1024], tj[1024], err[1024];
    snprintf(mp, sizeof mp, "%s", m);
    const char *t = shared_path("vocab/hf/qwen3/tokenizer.json");
    if (!t) return NULL;
    snprintf(tj, sizeof tj, "%s", t);
    snprintf(dir, sizeof dir, "%s/qwen3-chat", test_tmpdir());
    gguf_file *g = open_model(mp);
    hfw_opts o = {.dtype = ST_BF16, .tokenizer_json = tj};
    if (g && !hfw_from_gguf(g, dir, &o, err, sizeof err)) state = 1;
    else if (g) test_fail(__FILE__, __LINE__, "qwen3 folder: %s", err);
    gguf_close(g);
    return state > 0 ? dir : NULL;
}

TEST(hf, chat_template_from_tokenizer_config) {
    const char *dir = qwen3_folder();
    if (!dir) SKIP("qwen3-chat.gguf or the Qwen3 tokenizer.json absent");
    const char *rp = shared_path("reference/chat/qwen3-chat.rendered.json");
    char *txt = rp ? read_file(rp, NULL) : NULL;
    cJSON *j = txt ? cJSON_Parse(txt) : NULL, *c;
    char *want = NULL;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases"))
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")), "system_user"))
            want = strdup(cJSON_GetStringValue(cJSON_GetObjectItem(c, "rendered")));
    cJSON_Delete(j);
    free(txt);
    if (!want) SKIP("reference rendering absent");
    char err[1024];
    cinfer_model *m = NULL;
    EXPECT_MSG(cinfer_model_open(dir, NULL, &m, err, sizeof err) == 0, "%s", err);
    cinfer_message msgs[] = {{"system", "You are a helpful assistant."}, {"user", "What is the capital of France?"}};
    char *prompt = NULL;
    if (m) EXPECT_MSG(cinfer_chat_prompt(m, msgs, 2, 1, &prompt, err, sizeof err) == 0, "%s", err);
    EXPECT_STR_EQ(prompt, want);
    cinfer_free(prompt);
    cinfer_model_close(m);
    free(want);
    /* cinfer chat on the folder: one turn through a pipe */
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "printf 'Hello\\n' | %s chat %s -n 4 --temp 0 2>/dev/null", cinfer_bin(), dir);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    free(out);
}

TEST(hf, serve_a_folder) {
    const char *dir = qwen3_folder();
    if (!dir) SKIP("qwen3-chat.gguf or the Qwen3 tokenizer.json absent");
    http_srv f;
    if (http_srv_start(&f, dir, NULL, NULL,
                       (srv_options){.model_name = "qwen3-hf", .n_ctx = 1024, .n_threads = 1, .queue_max = 2}))
        return;
    long st = 0;
    cJSON *j = http_post_json(f.base, "/v1/chat/completions",
                              "{\"model\":\"qwen3-hf\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],"
                              "\"max_tokens\":4,\"temperature\":0}", NULL, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.message.role"), "assistant");
    EXPECT(json_num_at(j, "usage.completion_tokens") >= 1);
    cJSON_Delete(j);
    http_srv_stop(&f);
}

/* Modules of a million weights or more are re-expressed on several threads
 * (one strip of outputs each): the same exact values. */
TEST(hf, gptq_awq_large_modules_exact) {
    static const hfw_quant qs[] = {{HFW_GPTQ, 4, 128, false, false, 0}, {HFW_AWQ, 4, 64, false, false, 0},
                                   {HFW_GPTQ, 8, 128, true, false, 0}};
    const int N = 1152, K = 1024;
    float *W = malloc((size_t)N * K * sizeof *W), *deq = malloc((size_t)N * K * sizeof *deq), *row = malloc(K * sizeof *row);
    uint64_t s = 12345;
    for (size_t i = 0; i < (size_t)N * K; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        W[i] = (float)((int64_t)(s >> 33) % 2001 - 1000) / 4000.0f;
    }
    for (size_t c = 0; c < sizeof qs / sizeof *qs; c++) {
        char dir[1100], err[1024], cfg[1024], p[1200];
        snprintf(dir, sizeof dir, "%s/large-%zu", test_tmpdir(), c);
        mkdir(dir, 0755);
        snprintf(cfg, sizeof cfg, "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":%d,\"num_hidden_layers\":1,"
                 "\"intermediate_size\":%d,\"num_attention_heads\":8,\"rms_norm_eps\":1e-5,\"vocab_size\":32,"
                 "\"quantization_config\":%s}", K, N, hfw_quant_config(&qs[c]));
        hfw_tensor *ts = NULL;
        size_t n = 0;
        EXPECT_MSG(hfw_text(dir, "config.json", cfg, err, sizeof err) == 0 &&
                   hfw_quantize(&qs[c], "model.layers.0.mlp.up_proj", W, N, K, &ts, &n, deq, err, sizeof err) == 0,
                   "%s", err);
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        EXPECT(hfw_safetensors(p, ts, n, err, sizeof err) == 0);
        hfw_tensors_free(ts, n);
        gguf_file *g = open_model(dir);
        const gguf_tensor *t = g ? gguf_find_tensor(g, "blk.0.ffn_up.weight") : NULL;
        EXPECT(t && t->ne[0] == K && t->ne[1] == N);
        int bad = 0;
        for (int o = 0; t && o < N; o++) {
            kern_dequant_row((int)t->type, (const char *)t->data + kern_row_bytes((int)t->type, K) * (size_t)o, row, K);
            bad += memcmp(row, deq + (size_t)o * K, K * sizeof *row) != 0;
        }
        EXPECT_MSG(t && !bad, "%zu: %d of %d rows differ from s*(q - z) (%s)", c, bad, N, t ? ggml_type_name(t->type) : "-");
        gguf_close(g);
    }
    free(W);
    free(deq);
    free(row);
}

/* A folder written as one GGUF (gguf_write_model, for bundles and copies)
 * runs exactly like the folder: same tensors, same keys (tokenizer.json,
 * rope.layout), bit-identical logits. */
TEST(hf, folder_as_one_gguf) {
    NEED_SHARED(dir, TS_DIR);
    char d[1024], out[1100], err[1024];
    snprintf(d, sizeof d, "%s", dir);
    snprintf(out, sizeof out, "%s/folder.gguf", test_tmpdir());
    gguf_file *hf = open_model(d);
    EXPECT_MSG(hf && gguf_write_model(hf, out, err, sizeof err) == 0, "%s", err);
    gguf_file *g = open_model(out);
    int ids[] = {1, 80, 147, 201, 282, 57};
    float *a = NULL, *b = NULL;
    int na = 0, nb = 0;
    if (hf && g && !logits_of(hf, CINFER_PRECISION_AUTO, ids, 6, &a, &na) &&
        !logits_of(g, CINFER_PRECISION_AUTO, ids, 6, &b, &nb)) {
        EXPECT_EQ_I(na, nb);
        EXPECT_MSG(!memcmp(a, b, (size_t)na * sizeof *a), "logits differ");
        EXPECT_EQ_I(gguf_fingerprint(g) != 0, 1);
        tok_vocab *v = NULL;
        EXPECT_MSG(tok_load_gguf(g, &v, err, sizeof err) == 0, "%s", err);
        tok_free(v);
    }
    free(a);
    free(b);
    gguf_close(g);
    gguf_close(hf);
}

/* general.name: the folder's name, or ORG/NAME for a Hugging Face cache snapshot */
TEST(hf, model_name_of_a_cache_snapshot) {
    NEED_SHARED(dir, TS_DIR);
    char src[4096], d[1200], p[1300], err[512];
    if (!realpath(dir, src)) SKIP("no real path");
    snprintf(d, sizeof d, "%s/models--raincandy-u--TinyStories-656K", test_tmpdir());
    mkdir(d, 0755);
    snprintf(d + strlen(d), sizeof d - strlen(d), "/snapshots");
    mkdir(d, 0755);
    snprintf(d + strlen(d), sizeof d - strlen(d), "/0123abcd");
    mkdir(d, 0755);
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 4; i++) {
        char s[4200];
        snprintf(s, sizeof s, "%s/%s", src, files[i]);
        snprintf(p, sizeof p, "%s/%s", d, files[i]);
        if (symlink(s, p) && errno != EEXIST) SKIP("symlink: %s", strerror(errno));
    }
    gguf_file *g = open_model(d);
    gguf_str nm = {0};
    EXPECT(g && gguf_get_str(g, "general.name", &nm, err, sizeof err) == 0);
    EXPECT_MSG(gguf_str_eq(nm, "raincandy-u/TinyStories-656K"), "general.name '%.*s'", (int)nm.len, nm.ptr);
    gguf_close(g);
}

/* cinfer bundle takes a folder too (the bundle carries it as a .giw; the
 * program never links the folder loader's Lua, formats/hf_map.c). */
TEST(hf, bundle_a_folder) {
    NEED_SHARED(dir, TS_DIR);
    const char *build = getenv("CINFER_BUILD");
    char deps[1024], d[1024], exe[1100], cmd[8192], *out = NULL;
    snprintf(deps, sizeof deps, "%s/deps/x86_64/libcjson.a", build && *build ? build : "build");
    if (access(deps, R_OK)) SKIP("no %s: run make bundle-deps", deps);
    snprintf(d, sizeof d, "%s", dir);
    snprintf(exe, sizeof exe, "%s/ts-bundle", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s bundle %s -o %s 2>&1 && %s -p 'Once upon a time' -n 6 --temp 0 2>&1", cinfer_bin(), d,
             exe, exe);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "Once upon a time,"), "%s", out ? out : "");
    free(out);
}
