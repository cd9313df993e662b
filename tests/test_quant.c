/*
 * test_quant.c — `cinfer quantize` (runtime/formats/quantize.c) against llama-quantize.
 *
 * ../shared/models/synthetic holds one F32 model and its llama-quantize
 * outputs (README there: `llama-quantize --token-embedding-type T
 * --output-tensor-type T F32 OUT TYPE`, some with --pure).  Quantizing the
 * F32 file with the same settings must give byte-identical tensor data — and
 * since the writer copies llama-quantize's layout, the whole file is
 * identical too.  Then: the result runs and matches llama.cpp's reference,
 * requantizing from F16/Q8_0 inputs, llama-quantize's default rules
 * (output.weight → Q6_K, fallbacks for odd row lengths) and the error paths
 * (no half-written file under the final name).
 */
#include <cJSON.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cinfer.h"
#include "base/f16.h"
#include "formats/gguf.h"
#include "kernels/kern.h"
#include "formats/quantize.h"
#include "test.h"

#define SYNTH "models/synthetic/synth-d256-"

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* Quantize the synthetic F32 model like the manifest's llama-quantize command
 * and compare with the shared file: every tensor's type, shape and bytes, then
 * the whole file. */
static void check_like_llama_quantize(const char *ftype_name, const char *file_stem, int pure,
                                      const char *embd_out_type) {
    NEED_SHARED(f32_path, SYNTH "F32.gguf");
    char in[1024], ref_rel[256], out[1024], err[512];
    snprintf(in, sizeof in, "%s", f32_path);
    snprintf(ref_rel, sizeof ref_rel, SYNTH "%s.gguf", file_stem);
    const char *ref = shared_path(ref_rel);
    if (!ref) SKIP("%s/%s absent", shared_root(), ref_rel);
    snprintf(out, sizeof out, "%s/%s.gguf", test_tmpdir(), file_stem);

    quant_options o = quant_options_default();
    EXPECT_EQ_I(quant_ftype_parse(ftype_name, &o.ftype), 0);
    o.pure = pure;
    o.token_embd_type = o.output_type = quant_type_parse(embd_out_type);
    EXPECT_MSG(o.token_embd_type >= 0, "type %s", embd_out_type);
    o.n_threads = 2;
    quant_stats st;
    int rc = quant_file(in, out, &o, &st, err, sizeof err);
    EXPECT_MSG(rc == 0, "%s: %s", file_stem, err);
    if (rc) return;
    EXPECT_EQ_I(st.n_tensors, 39);
    EXPECT_EQ_I(st.n_quantized, 30);

    gguf_file *a = NULL, *b = NULL;
    EXPECT(gguf_open(out, &a, err, sizeof err) == 0);
    EXPECT(gguf_open(ref, &b, err, sizeof err) == 0);
    if (a && b) {
        EXPECT_EQ_I(gguf_n_tensors(a), gguf_n_tensors(b));
        int n_same = 0;
        for (uint64_t i = 0; i < gguf_n_tensors(b); i++) {
            const gguf_tensor *tb = gguf_tensor_at(b, i);
            const gguf_tensor *ta = gguf_find_tensor(a, tb->name);
            EXPECT_MSG(ta, "%s: tensor %s missing", file_stem, tb->name);
            if (!ta) continue;
            EXPECT_MSG(ta->type == tb->type, "%s: %s: type %s, llama-quantize %s", file_stem,
                       tb->name, ggml_type_name(ta->type), ggml_type_name(tb->type));
            EXPECT_MSG(ta->n_bytes == tb->n_bytes && !memcmp(ta->data, tb->data, tb->n_bytes),
                       "%s: %s: tensor data differs from llama-quantize's", file_stem, tb->name);
            n_same += ta->type == tb->type && ta->n_bytes == tb->n_bytes &&
                      !memcmp(ta->data, tb->data, tb->n_bytes);
        }
        EXPECT_EQ_I(n_same, 39);
        uint32_t ft = 0;
        EXPECT(gguf_get_u32(a, "general.file_type", &ft, err, sizeof err) == 0);
        EXPECT_EQ_I(ft, o.ftype);
        /* same metadata, order and layout: the files are identical */
        EXPECT_EQ_I(gguf_size(a), gguf_size(b));
        EXPECT_MSG(gguf_size(a) == gguf_size(b) && !memcmp(gguf_base(a), gguf_base(b), gguf_size(b)),
                   "%s: file bytes differ from llama-quantize's", file_stem);
    }
    gguf_close(a);
    gguf_close(b);
    unlink(out);
}

TEST(quant, q8_0_like_llama_quantize) { check_like_llama_quantize("q8_0", "Q8_0", 0, "q8_0"); }
TEST(quant, q4_0_like_llama_quantize) { check_like_llama_quantize("q4_0", "Q4_0", 0, "q4_0"); }
TEST(quant, q4_1_q5_0_q5_1_like_llama_quantize) {
    check_like_llama_quantize("q4_1", "Q4_1", 0, "q4_1");
    check_like_llama_quantize("q5_0", "Q5_0", 0, "q5_0");
    check_like_llama_quantize("q5_1", "Q5_1", 0, "q5_1");
}
TEST(quant, f16_bf16_like_llama_quantize) {
    check_like_llama_quantize("f16", "F16", 0, "f16");
    check_like_llama_quantize("bf16", "BF16", 0, "bf16");
}
/* Q4_K_M: Q6_K for attn_v and ffn_down of layers 2-3 (use_more_bits), Q4_K elsewhere */
TEST(quant, q4_k_m_like_llama_quantize) { check_like_llama_quantize("q4_k_m", "Q4_K_M", 0, "q4_K"); }
TEST(quant, q6_k_like_llama_quantize) { check_like_llama_quantize("q6_k", "Q6_K", 0, "q6_K"); }
/* IQ4_NL and IQ4_XS (same search; IQ4_XS over 256-value super-blocks) are slow
 * under the sanitizers, so rows of two tensors are compared instead of whole
 * files (the whole IQ4_NL, IQ4_NL-pure, IQ4_XS and IQ4_XS-pure files were
 * checked identical by hand). */
static void check_rows(int type, const char *file_stem, const char *tensor, int max_rows) {
    NEED_SHARED(f32_path, SYNTH "F32.gguf");
    char ref_rel[256], err[512];
    snprintf(ref_rel, sizeof ref_rel, SYNTH "%s.gguf", file_stem);
    gguf_file *a = NULL, *b = NULL;
    EXPECT(gguf_open(f32_path, &a, err, sizeof err) == 0);
    const char *ref = shared_path(ref_rel);
    EXPECT(ref && gguf_open(ref, &b, err, sizeof err) == 0);
    const gguf_tensor *ta = a ? gguf_find_tensor(a, tensor) : NULL;
    const gguf_tensor *tb = b ? gguf_find_tensor(b, tensor) : NULL;
    EXPECT_MSG(ta && tb && tb->type == (uint32_t)type, "%s %s", file_stem, tensor);
    if (ta && tb && tb->type == (uint32_t)type) {
        const int n = (int)ta->ne[0];
        const size_t rb = ggml_row_bytes((uint32_t)type, (uint64_t)n);
        uint8_t *q = malloc(rb);
        int rows = (int)(ta->n_elems / (uint64_t)n), bad = 0;
        for (int r = 0; r < rows && r < max_rows && q; r++) {
            EXPECT_EQ_I(quant_row(type, (const float *)ta->data + (size_t)r * n, q, n), rb);
            bad += memcmp(q, (const uint8_t *)tb->data + (size_t)r * rb, rb) != 0;
        }
        EXPECT_MSG(bad == 0, "%s %s: %d rows differ from llama-quantize's", file_stem, tensor, bad);
        free(q);
    }
    gguf_close(a);
    gguf_close(b);
}

TEST(quant, iq4_rows_like_llama_quantize) {
    check_rows(GGML_TYPE_IQ4_NL, "IQ4_NL", "blk.1.ffn_down.weight", 64);
    check_rows(GGML_TYPE_IQ4_NL, "IQ4_NL", "token_embd.weight", 64);
    check_rows(GGML_TYPE_IQ4_XS, "IQ4_XS-pure", "blk.2.ffn_down.weight", 64);
    check_rows(GGML_TYPE_IQ4_XS, "IQ4_XS-pure", "output.weight", 64);
}

/* --pure (Q4_K-pure is left out: Q4_K_M covers the Q4_K quantizer, and it is the slowest) */
TEST(quant, pure_like_llama_quantize) { check_like_llama_quantize("q2_k", "Q2_K-pure", 1, "q2_K"); }
TEST(quant, k_mixtures_like_llama_quantize) {
    check_like_llama_quantize("q2_k", "Q2_K", 0, "q2_K");
    check_like_llama_quantize("q3_k_m", "Q3_K_M", 0, "q3_K");
    check_like_llama_quantize("q5_k_m", "Q5_K_M", 0, "q5_K");
}

/* The quantized file runs through the public API and matches llama.cpp on the
 * exact dequantization of the same blocks. */
TEST(quant, quantized_model_matches_reference) {
    NEED_SHARED(f32_path, SYNTH "F32.gguf");
    char in[1024], out[1024], err[512];
    snprintf(in, sizeof in, "%s", f32_path);
    NEED_SHARED(ref, "reference/dequant-f32/synth-d256-Q4_0.json");
    snprintf(out, sizeof out, "%s/q4_0.gguf", test_tmpdir());
    quant_options o = quant_options_default();
    o.ftype = QUANT_FTYPE_Q4_0;
    o.token_embd_type = o.output_type = GGML_TYPE_Q4_0;
    EXPECT(quant_file(in, out, &o, NULL, err, sizeof err) == 0);
    char *txt = read_file(ref, NULL);
    cJSON *j = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    EXPECT(j != NULL);
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    /* llama.cpp's reference holds an F32 KV cache */
    const cinfer_model_options f32kv = {.cache_type_k = CINFER_KV_F32, .cache_type_v = CINFER_KV_F32};
    if (!j || cinfer_model_open(out, &f32kv, &m, err, sizeof err) ||
        cinfer_session_new(m, &(cinfer_session_options){.n_ctx = 128, .n_threads = 1, .activations = CINFER_ACT_F32}, &s, err,
                           sizeof err)) {
        test_fail(__FILE__, __LINE__, "open %s: %s", out, err);
    } else {
        cJSON *pr = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "prompts"), 0);
        cJSON *pids = cJSON_GetObjectItem(pr, "prompt_ids"), *lref = cJSON_GetObjectItem(pr, "logits_last");
        int32_t ids[64];
        int n = cJSON_GetArraySize(pids);
        for (int i = 0; i < n && i < 64; i++) ids[i] = cJSON_GetArrayItem(pids, i)->valueint;
        EXPECT(cinfer_eval(s, ids, (size_t)n, err, sizeof err) == 0);
        const float *lg = cinfer_logits(s);
        int n_vocab = cinfer_model_n_vocab(m);
        EXPECT_EQ_I(cJSON_GetArraySize(lref), n_vocab);
        double dot = 0, na = 0, nb = 0, maxabs = 0;
        for (int i = 0; lg && i < n_vocab && i < cJSON_GetArraySize(lref); i++) {
            double r = cJSON_GetArrayItem(lref, i)->valuedouble, x = lg[i];
            dot += r * x, na += x * x, nb += r * r;
            if (fabs(r - x) > maxabs) maxabs = fabs(r - x);
        }
        double cosv = dot / (sqrt(na) * sqrt(nb) + 1e-30);
        /* the file is byte-identical to llama-quantize's: parity's "synthetic" bound (docs/architecture.md) */
        EXPECT_MSG(cosv > 0.99999 && maxabs <= 1e-6, "cosine %.9f, max abs %.3g (bound 1e-6)", cosv, maxabs);
    }
    cinfer_session_free(s);
    cinfer_model_close(m);
    cJSON_Delete(j);
}

/* Quantized and F16 inputs are dequantized first: F32 -> Q8_0 -> F32 gives the
 * exact dequantization; F32 -> F16 -> Q4_0 equals Q4_0 of the f16-rounded rows. */
TEST(quant, requantize_from_quantized_and_f16) {
    NEED_SHARED(f32_path, SYNTH "F32.gguf");
    char in[1024], q8[1024], back[1024], f16p[1024], q4[1024], err[512];
    snprintf(in, sizeof in, "%s", f32_path);
    snprintf(q8, sizeof q8, "%s/rq-q8.gguf", test_tmpdir());
    snprintf(back, sizeof back, "%s/rq-f32.gguf", test_tmpdir());
    snprintf(f16p, sizeof f16p, "%s/rq-f16.gguf", test_tmpdir());
    snprintf(q4, sizeof q4, "%s/rq-q4.gguf", test_tmpdir());
    quant_options o = quant_options_default();
    o.ftype = QUANT_FTYPE_Q8_0;
    EXPECT(quant_file(in, q8, &o, NULL, err, sizeof err) == 0);
    o.ftype = QUANT_FTYPE_ALL_F32;
    EXPECT(quant_file(q8, back, &o, NULL, err, sizeof err) == 0);
    o.ftype = QUANT_FTYPE_F16;
    EXPECT(quant_file(in, f16p, &o, NULL, err, sizeof err) == 0);
    o.ftype = QUANT_FTYPE_Q4_0;
    o.pure = 1;
    EXPECT(quant_file(f16p, q4, &o, NULL, err, sizeof err) == 0);

    gguf_file *gq8 = NULL, *gback = NULL, *gf16 = NULL, *gq4 = NULL;
    EXPECT(gguf_open(q8, &gq8, err, sizeof err) == 0);
    EXPECT(gguf_open(back, &gback, err, sizeof err) == 0);
    EXPECT(gguf_open(f16p, &gf16, err, sizeof err) == 0);
    EXPECT(gguf_open(q4, &gq4, err, sizeof err) == 0);
    if (gq8 && gback && gf16 && gq4) {
        const char *name = "blk.1.ffn_down.weight"; /* (768, 256) */
        const gguf_tensor *t8 = gguf_find_tensor(gq8, name), *tb = gguf_find_tensor(gback, name);
        const gguf_tensor *t16 = gguf_find_tensor(gf16, name), *t4 = gguf_find_tensor(gq4, name);
        EXPECT(t8 && t8->type == GGML_TYPE_Q8_0 && tb && tb->type == GGML_TYPE_F32);
        EXPECT(t16 && t16->type == GGML_TYPE_F16 && t4 && t4->type == GGML_TYPE_Q4_0);
        if (t8 && tb && t16 && t4) {
            const int n = (int)t8->ne[0], rows = (int)(t8->n_elems / (uint64_t)n);
            float *x = malloc((size_t)n * sizeof *x);
            uint8_t *q = malloc(ggml_row_bytes(GGML_TYPE_Q4_0, (uint64_t)n));
            int bad = 0;
            for (int r = 0; r < rows && x && q; r++) {
                kern_dequant_row(GGML_TYPE_Q8_0, (const uint8_t *)t8->data + (size_t)r * ggml_row_bytes(GGML_TYPE_Q8_0, (uint64_t)n), x, n);
                bad += memcmp(x, (const float *)tb->data + (size_t)r * n, (size_t)n * sizeof *x) != 0;
                const uint16_t *h = (const uint16_t *)t16->data + (size_t)r * n;
                for (int i = 0; i < n; i++) x[i] = f16_to_f32(h[i]);
                size_t rb = quant_row(GGML_TYPE_Q4_0, x, q, n);
                bad += rb == 0 || memcmp(q, (const uint8_t *)t4->data + (size_t)r * rb, rb) != 0;
            }
            EXPECT_EQ_I(bad, 0);
            free(x);
            free(q);
        }
        /* 1-D tensors are copied, whatever the target */
        const gguf_tensor *n4 = gguf_find_tensor(gq4, "blk.0.attn_norm.weight");
        EXPECT(n4 && n4->type == GGML_TYPE_F32);
    }
    gguf_close(gq8);
    gguf_close(gback);
    gguf_close(gf16);
    gguf_close(gq4);
}

/* lowercase hex sha256 of a file into hex[65]; 0, or -1 when unreadable */
static int file_sha256_hex(const char *path, char hex[65]) {
    size_t len = 0;
    char *data = read_file(path, &len);
    if (!data) return -1;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    int ok = EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) && n == 32;
    free(data);
    for (unsigned i = 0; ok && i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return ok ? 0 : -1;
}

/* llama-quantize's default rules without overrides: output.weight → Q6_K for
 * Q4_0 (Q8_0 keeps Q8_0), token_embd follows the type; stories260K's ffn
 * width 172 takes the fallbacks (Q4_K → Q5_0 → F16), its 64-wide output
 * cannot be Q6_K (→ Q8_0), and Q8_0 (a 32-block type) falls back to F16. */
TEST(quant, default_rules_and_fallbacks) {
    NEED_SHARED(f32_path, SYNTH "F32.gguf");
    char in[1024], out[1024], err[512];
    snprintf(in, sizeof in, "%s", f32_path);
    snprintf(out, sizeof out, "%s/rules.gguf", test_tmpdir());
    quant_options o = quant_options_default();
    o.ftype = QUANT_FTYPE_Q4_0;
    EXPECT(quant_file(in, out, &o, NULL, err, sizeof err) == 0);
    gguf_file *g = NULL;
    EXPECT(gguf_open(out, &g, err, sizeof err) == 0);
    if (g) {
        EXPECT_EQ_I(gguf_find_tensor(g, "output.weight")->type, GGML_TYPE_Q6_K);
        EXPECT_EQ_I(gguf_find_tensor(g, "token_embd.weight")->type, GGML_TYPE_Q4_0);
        EXPECT_EQ_I(gguf_find_tensor(g, "blk.3.ffn_down.weight")->type, GGML_TYPE_Q4_0);
        gguf_close(g);
    }

    NEED_SHARED(st_path, "models/stories260K/stories260K.gguf");
    snprintf(in, sizeof in, "%s", st_path);
    o = quant_options_default();
    o.ftype = QUANT_FTYPE_Q4_K_M;
    quant_stats st;
    EXPECT(quant_file(in, out, &o, &st, err, sizeof err) == 0);
    g = NULL;
    EXPECT(gguf_open(out, &g, err, sizeof err) == 0);
    if (g) {
        EXPECT_EQ_I(gguf_find_tensor(g, "output.weight")->type, GGML_TYPE_Q8_0);
        EXPECT_EQ_I(gguf_find_tensor(g, "blk.0.attn_q.weight")->type, GGML_TYPE_Q5_0);
        EXPECT_EQ_I(gguf_find_tensor(g, "blk.0.ffn_down.weight")->type, GGML_TYPE_F16);
        EXPECT_EQ_I(gguf_find_tensor(g, "blk.0.ffn_up.weight")->type, GGML_TYPE_Q5_0);
        EXPECT(st.n_fallback > 0);
        gguf_close(g);
    }
    /* and the fallback file runs */
    cinfer_model *m = NULL;
    EXPECT_MSG(cinfer_model_open(out, NULL, &m, err, sizeof err) == 0, "%s", err);
    cinfer_model_close(m);

    /* Q8_0 has no smaller block for ffn_down's 172-wide rows: F16, as
     * llama-quantize writes them ("must use F16 due to unusual shape"); the
     * whole file is byte for byte llama-quantize's (llama.cpp 0.5.0
     * build/bin/llama-quantize stories260K.gguf out.gguf Q8_0: sha256 below) */
    o = quant_options_default();
    o.ftype = QUANT_FTYPE_Q8_0;
    EXPECT_MSG(quant_file(in, out, &o, &st, err, sizeof err) == 0, "%s", err);
    EXPECT_EQ_I(st.n_fallback, 5);
    g = NULL;
    EXPECT(gguf_open(out, &g, err, sizeof err) == 0);
    if (g) {
        EXPECT_EQ_I(gguf_find_tensor(g, "blk.0.ffn_down.weight")->type, GGML_TYPE_F16);
        EXPECT_EQ_I(gguf_find_tensor(g, "blk.0.ffn_up.weight")->type, GGML_TYPE_Q8_0);
        EXPECT_EQ_I(gguf_find_tensor(g, "output.weight")->type, GGML_TYPE_Q8_0);
        gguf_close(g);
    }
    char hex[65] = "";
    EXPECT(file_sha256_hex(out, hex) == 0);
    EXPECT_STR_EQ(hex, "ff8701a45da28293b7af11a695ab33575b692e9b109a2eae6238c906c31415da");
}

/* Errors leave nothing under the final name (nor a .partial). */
TEST(quant, errors_leave_no_file) {
    char junk[1024], out[1024], partial[1100], err[512];
    snprintf(junk, sizeof junk, "%s/junk.gguf", test_tmpdir());
    snprintf(out, sizeof out, "%s/junk-out.gguf", test_tmpdir());
    snprintf(partial, sizeof partial, "%s.partial", out);
    FILE *f = fopen(junk, "wb");
    EXPECT(f != NULL);
    if (f) {
        fputs("not a gguf file at all, just some bytes", f);
        fclose(f);
    }
    quant_options o = quant_options_default();
    EXPECT_EQ_I(quant_file(junk, out, &o, NULL, err, sizeof err), QUANT_EFORMAT);
    EXPECT(!file_exists(out) && !file_exists(partial));
    EXPECT_EQ_I(quant_file("/nonexistent/in.gguf", out, &o, NULL, err, sizeof err), QUANT_EIO);
    o.ftype = 99;
    EXPECT_EQ_I(quant_file(junk, out, &o, NULL, err, sizeof err), QUANT_EARG);

    NEED_SHARED(f32_path, SYNTH "F32.gguf");
    o = quant_options_default();
    EXPECT_EQ_I(quant_file(f32_path, "/nonexistent-dir/out.gguf", &o, NULL, err, sizeof err), QUANT_EIO);
    EXPECT(!file_exists("/nonexistent-dir/out.gguf.partial"));
}

TEST(quant, names_and_rows) {
    int ft = -1;
    EXPECT_EQ_I(quant_ftype_parse("Q4_K_M", &ft), 0);
    EXPECT_EQ_I(ft, QUANT_FTYPE_Q4_K_M);
    EXPECT_EQ_I(quant_ftype_parse("q4_k", &ft), 0); /* llama-quantize's alias */
    EXPECT_EQ_I(ft, QUANT_FTYPE_Q4_K_M);
    EXPECT_EQ_I(quant_ftype_parse("iq2_xxs", &ft), QUANT_EARG);
    EXPECT_STR_EQ(quant_ftype_name(QUANT_FTYPE_Q6_K), "Q6_K");
    EXPECT_EQ_I(quant_ftype_base_type(QUANT_FTYPE_Q3_K_L), GGML_TYPE_Q3_K);
    EXPECT_EQ_I(quant_type_parse("q6_k"), GGML_TYPE_Q6_K);
    EXPECT_EQ_I(quant_type_parse("iq4_nl"), GGML_TYPE_IQ4_NL);
    EXPECT_EQ_I(quant_type_parse("iq3_s"), -1); /* needs an importance matrix in llama.cpp */
    /* a row that is not a whole number of blocks is refused */
    float x[256] = {0};
    uint8_t y[512];
    EXPECT_EQ_I(quant_row(GGML_TYPE_Q4_K, x, y, 128), 0);
    EXPECT_EQ_I(quant_row(GGML_TYPE_Q8_0, x, y, 64), 68);
    /* all-zero rows quantize to zero scales, and dequantize back to zero */
    EXPECT_EQ_I(quant_row(GGML_TYPE_Q6_K, x, y, 256), 210);
    int nz = 0;
    for (int i = 0; i < 210; i++) nz += y[i] != 0;
    EXPECT_EQ_I(nz, 0);
}

TEST(quant, cli) {
    NEED_SHARED(f32_path, SYNTH "F32.gguf");
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s quantize %s %s/cli.gguf --type q8_0 -v", cinfer_bin(), f32_path,
             test_tmpdir());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT_MSG(out && strstr(out, "output.weight") && strstr(out, "39 tensors: 30 converted, 9 copied"),
               "output: %s", out ? out : "");
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "%s quantize %s %s/cli.gguf --type q9_9", cinfer_bin(), f32_path,
             test_tmpdir());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT_MSG(out && strstr(out, "unknown type 'q9_9'"), "output: %s", out ? out : "");
    free(out);
}

/* quantize --help lists every type name --type accepts (quant_ftype_name of
 * each ftype id, lower-cased). */
TEST(quant, help_lists_every_type) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s quantize --help", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    int n = 0;
    for (int ft = 0; ft < 256; ft++) {
        const char *name = quant_ftype_name(ft);
        if (!name) continue;
        char low[32], pat[40];
        size_t k = 0;
        for (; name[k] && k + 1 < sizeof low; k++) low[k] = (char)(name[k] >= 'A' && name[k] <= 'Z' ? name[k] + 32 : name[k]);
        low[k] = 0;
        snprintf(pat, sizeof pat, " %s", low);
        n++;
        /* the entry is followed by a space, newline or '/' */
        const char *p = out;
        int found = 0;
        while (p && (p = strstr(p, pat))) {
            char c = p[strlen(pat)];
            if (c == ' ' || c == '\n' || c == '/') { found = 1; break; }
            p++;
        }
        EXPECT_MSG(found, "--help lacks type %s", low);
    }
    EXPECT(n >= 19); /* F32 F16 BF16, 5 legacy, 10 K, 2 IQ4 */
    free(out);
}

/* The output is never the input (nor a hard link to it), a FIFO, a symlink
 * or a directory: refused with a message naming the path, nothing replaced,
 * no .partial left; a regular file is replaced (control). */
TEST(quant, output_path_refusals) {
    NEED_SHARED(f32_path, SYNTH "F32.gguf");
    const char *d = test_tmpdir();
    char in[1024], hard[1024], fifo[1024], link_[1024], target[1024], dir[1024], ok[1024], err[1024];
    snprintf(in, sizeof in, "%s/qp-in.gguf", d);
    snprintf(hard, sizeof hard, "%s/qp-hard.gguf", d);
    snprintf(fifo, sizeof fifo, "%s/qp-fifo.gguf", d);
    snprintf(link_, sizeof link_, "%s/qp-link.gguf", d);
    snprintf(target, sizeof target, "%s/qp-target.bin", d);
    snprintf(dir, sizeof dir, "%s/qp-dir.gguf", d);
    snprintf(ok, sizeof ok, "%s/qp-ok.gguf", d);
    size_t len;
    char *src = read_file(f32_path, &len);
    if (!src) return test_fail(__FILE__, __LINE__, "cannot read %s", f32_path);
    FILE *f = fopen(in, "wb");
    EXPECT(f && fwrite(src, 1, len, f) == len);
    if (f) fclose(f);
    EXPECT(!link(in, hard));
    EXPECT(!mkfifo(fifo, 0600));
    f = fopen(target, "wb");
    if (f) fputs("precious", f), fclose(f);
    EXPECT(!symlink(target, link_));
    EXPECT(!mkdir(dir, 0700));
    f = fopen(ok, "wb");
    if (f) fputs("old", f), fclose(f);
    const struct {
        const char *out, *msg;
    } cases[] = {
        {in, "is the input file"}, {hard, "is the input file"}, {fifo, "is a FIFO"},
        {link_, "is a symbolic link"}, {dir, "is a directory"},
    };
    quant_options o = quant_options_default();
    o.ftype = QUANT_FTYPE_Q8_0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        err[0] = 0;
        int rc = quant_file(in, cases[k].out, &o, NULL, err, sizeof err);
        EXPECT_MSG(rc == QUANT_EIO && strstr(err, cases[k].out) && strstr(err, cases[k].msg) && !strchr(err, '\n'),
                   "%s: rc %d: %s", cases[k].out, rc, err);
        char partial[1100];
        snprintf(partial, sizeof partial, "%s.partial", cases[k].out);
        EXPECT_MSG(!file_exists(partial), "%s left behind", partial);
    }
    struct stat sb;
    EXPECT(!lstat(fifo, &sb) && S_ISFIFO(sb.st_mode));
    EXPECT(!lstat(link_, &sb) && S_ISLNK(sb.st_mode));
    EXPECT(!lstat(dir, &sb) && S_ISDIR(sb.st_mode));
    size_t l2;
    char *now = read_file(in, &l2);
    EXPECT_MSG(now && l2 == len && !memcmp(now, src, len), "the input changed");
    free(now);
    now = read_file(target, NULL);
    EXPECT_MSG(now && !strcmp(now, "precious"), "symlink target changed");
    free(now);
    /* the CLI too */
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s quantize %s %s --type q8_0", cinfer_bin(), in, in);
    int st = run_cmd(cmd, true, &out);
    EXPECT_MSG(st != 0 && out && strstr(out, "is the input file"), "%d: %s", st, out ? out : "");
    free(out);
    /* control: an existing regular file is replaced */
    EXPECT_MSG(quant_file(in, ok, &o, NULL, err, sizeof err) == 0, "%s", err);
    gguf_file *g = NULL;
    EXPECT_MSG(gguf_open(ok, &g, err, sizeof err) == 0, "%s", err);
    gguf_close(g);
    free(src);
}
