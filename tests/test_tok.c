/* test_tok.c — the tokenizers against llama.cpp: reference prompt ids,
 * llama.cpp's own tokenizer test vectors for every vocabulary (SPM, byte-level
 * BPE with each pre-tokenizer, WordPiece, and the two HF tokenizer.json files),
 * decoding, streaming UTF-8, the CLI.  BPE/WordPiece/tokenizer.json specifics
 * are in test_tok_bpe.c. */
#include "test.h"

#include <cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "formats/gguf.h"
#include "text/tok.h"

/* ---- helpers ------------------------------------------------------------------ */

typedef struct {
    gguf_file *g;
    tok_vocab *v;
} vocab_file;

static bool open_vocab(const char *path, vocab_file *f) {
    char err[512];
    f->g = NULL;
    f->v = NULL;
    if (gguf_open(path, &f->g, err, sizeof err) != 0) {
        test_fail(__FILE__, __LINE__, "gguf_open %s: %s", path, err);
        return false;
    }
    int rc = tok_load_gguf(f->g, &f->v, err, sizeof err);
    if (rc != 0) {
        test_fail(__FILE__, __LINE__, "tok_load_gguf %s: %d %s", path, rc, err);
        gguf_close(f->g);
        f->g = NULL;
        return false;
    }
    return true;
}

static void close_vocab(vocab_file *f) {
    tok_free(f->v);
    gguf_close(f->g);
}

/* Encode into a malloc'd array (freed by the caller); *n ids. */
static int32_t *encode(const tok_vocab *v, const char *s, size_t len, bool add_special, bool parse_special,
                       size_t *n) {
    size_t cap = tok_encode_max(len);
    int32_t *ids = malloc(cap * sizeof *ids);
    int rc = tok_encode(v, s, len, add_special, parse_special, ids, cap, n);
    if (rc != 0) {
        test_fail(__FILE__, __LINE__, "tok_encode rc %d", rc);
        *n = 0;
    }
    return ids;
}

static void ids_str(const int32_t *ids, size_t n, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < n && o + 16 < cap; i++) o += (size_t)snprintf(buf + o, cap - o, i ? " %d" : "%d", ids[i]);
}

static bool ids_equal(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    if (na != nb) return false;
    for (size_t i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static bool utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return false;
        if (i + k >= n) return false; /* truncated */
        for (size_t j = 1; j <= k; j++) {
            unsigned b = s[i + j];
            if (b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xBF)) return false;
        }
        i += k + 1;
    }
    return true;
}

/* ---- llama.cpp reference prompts ------------------------------------------------ */

TEST(tok, reference_prompt_ids) {
    NEED_SHARED(dir, "reference");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s/*.json %s/arch/*.json", dir, dir); /* the SPM-vocab models */
    char *list = NULL;
    if (run_cmd(cmd, false, &list) != 0 || !list) {
        free(list);
        SKIP("cannot list %s", dir);
    }
    int n_files = 0, n_prompts = 0;
    char last_model[512] = "";
    vocab_file vf = {0};
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = read_json(line);
        if (!j) {
            test_fail(__FILE__, __LINE__, "cannot parse %s", line);
            continue;
        }
        const char *model = cJSON_GetStringValue(cJSON_GetObjectItem(j, "model"));
        cJSON *prompts = cJSON_GetObjectItem(j, "prompts");
        if (!model || strncmp(model, "shared/", 7) != 0 || !prompts) {
            test_fail(__FILE__, __LINE__, "%s: no model/prompts", line);
            cJSON_Delete(j);
            continue;
        }
        const char *mpath = shared_path(model + 7);
        if (!mpath) {
            test_fail(__FILE__, __LINE__, "%s: model %s absent", line, model);
            cJSON_Delete(j);
            continue;
        }
        if (strcmp(mpath, last_model) != 0) {
            if (vf.v) close_vocab(&vf);
            vf.v = NULL;
            snprintf(last_model, sizeof last_model, "%s", mpath);
            if (!open_vocab(last_model, &vf)) {
                cJSON_Delete(j);
                last_model[0] = 0;
                continue;
            }
        }
        n_files++;
        EXPECT_EQ_I(tok_n_vocab(vf.v), cJSON_GetNumberValue(cJSON_GetObjectItem(j, "n_vocab")));
        cJSON *p;
        cJSON_ArrayForEach(p, prompts) {
            const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(p, "prompt"));
            cJSON *ref = cJSON_GetObjectItem(p, "prompt_ids");
            size_t nref = (size_t)cJSON_GetArraySize(ref);
            int32_t want[1024];
            for (size_t i = 0; i < nref && i < 1024; i++) want[i] = (int32_t)cJSON_GetArrayItem(ref, (int)i)->valueint;
            size_t n;
            int32_t *got = encode(vf.v, text, strlen(text), true, false, &n);
            if (!ids_equal(got, n, want, nref)) {
                char a[4096], b[4096];
                ids_str(got, n, a, sizeof a);
                ids_str(want, nref, b, sizeof b);
                test_fail(__FILE__, __LINE__, "%s: \"%s\"\n      got      %s\n      expected %s", line, text, a, b);
            }
            /* decoding (no BOS removal) gives back " " + text: the prefix space stays after BOS */
            char buf[4096];
            size_t nout;
            EXPECT_EQ_I(tok_decode(vf.v, got, n, TOK_REMOVE_SPECIAL, buf, sizeof buf, &nout), 0);
            EXPECT_EQ_I(nout, strlen(text) + 1);
            EXPECT(buf[0] == ' ' && strcmp(buf + 1, text) == 0);
            /* without BOS the leading space is stripped: exact round trip */
            EXPECT_EQ_I(tok_decode(vf.v, got + 1, n - 1, 0, buf, sizeof buf, &nout), 0);
            EXPECT_STR_EQ(buf, text);
            free(got);
            n_prompts++;
        }
        cJSON_Delete(j);
    }
    if (vf.v) close_vocab(&vf);
    free(list);
    EXPECT(n_files >= 30);
    EXPECT(n_prompts >= 90);
}

/* greedy_text_hex is the concatenation of llama_token_to_piece(special=false). */
TEST(tok, reference_greedy_pieces) {
    const char *refs[] = {"reference/stories260K.json", "reference/TinyStories-656K-Q8_0.json"};
    for (size_t r = 0; r < 2; r++) {
        NEED_SHARED(path, refs[r]);
        char jpath[1024];
        snprintf(jpath, sizeof jpath, "%s", path);
        cJSON *j = read_json(jpath);
        EXPECT(j != NULL);
        if (!j) return;
        const char *model = cJSON_GetStringValue(cJSON_GetObjectItem(j, "model"));
        vocab_file vf;
        if (!model || !open_vocab(shared_path(model + 7), &vf)) {
            cJSON_Delete(j);
            return;
        }
        cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(j, "prompts")) {
            cJSON *ids = cJSON_GetObjectItem(p, "greedy_ids");
            const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(p, "greedy_text_hex"));
            char got[8192], want[8192];
            size_t ng = 0, nw = 0;
            cJSON *id;
            cJSON_ArrayForEach(id, ids) {
                int n = tok_decode_token(vf.v, id->valueint, false, got + ng, sizeof got - ng);
                EXPECT(n >= 0);
                if (n > 0) ng += (size_t)n;
            }
            for (size_t i = 0; hex[2 * i] && hex[2 * i + 1]; i++) {
                unsigned b;
                sscanf(hex + 2 * i, "%2x", &b);
                want[nw++] = (char)b;
            }
            EXPECT_EQ_I(ng, nw);
            EXPECT(ng == nw && memcmp(got, want, ng) == 0);
        }
        close_vocab(&vf);
        cJSON_Delete(j);
    }
}

/* The pure-Python reference: BOS only, 100 generated ids and their text. */
TEST(tok, stories260K_bos_reference) {
    NEED_SHARED(jpath, "models/reference/stories260K.bos.json");
    cJSON *j = read_json(jpath);
    EXPECT(j != NULL);
    if (!j) return;
    vocab_file vf;
    if (!open_vocab(shared_path("models/stories260K/stories260K.gguf"), &vf)) {
        cJSON_Delete(j);
        return;
    }
    size_t n;
    int32_t *ids = encode(vf.v, "", 0, true, false, &n);
    EXPECT_EQ_I(n, 1);
    EXPECT_EQ_I(ids[0], cJSON_GetArrayItem(cJSON_GetObjectItem(j, "prompt_ids"), 0)->valueint);
    EXPECT_EQ_I(ids[0], tok_bos(vf.v));
    free(ids);
    EXPECT_EQ_I(tok_encode(vf.v, "", 0, false, false, NULL, 0, &n), 0);
    EXPECT_EQ_I(n, 0);

    /* the generated text, streamed token by token (lstrip 0, as llama.cpp prints) */
    tok_stream *s;
    EXPECT_EQ_I(tok_stream_new(vf.v, 0, &s), 0);
    char text[4096];
    size_t nt = 0, l;
    cJSON *id;
    cJSON_ArrayForEach(id, cJSON_GetObjectItem(j, "generated_ids")) {
        const char *out = tok_stream_put(s, id->valueint, &l);
        EXPECT(out != NULL);
        memcpy(text + nt, out, l);
        nt += l;
    }
    tok_stream_flush(s, &l);
    EXPECT_EQ_I(l, 0);
    text[nt] = 0;
    EXPECT_STR_EQ(text, cJSON_GetStringValue(cJSON_GetObjectItem(j, "generated_text")));
    tok_stream_free(s);
    close_vocab(&vf);
    cJSON_Delete(j);
}

/* ---- llama.cpp tokenizer test vectors (tests/test-tokenizer-0.cpp format) -------- */

/* Every vector file in ../shared/vocab/llama.cpp, and what it runs on: the
 * GGUF of the same name, or (llama-bpe, qwen2: no GGUF shipped) the HF
 * tokenizer.json the vectors were made from. */
static const struct {
    const char *name;  /* ggml-vocab-<name>.gguf.inp/.out */
    const char *vocab; /* under ../shared */
} vector_sets[] = {
    {"bert-bge", "vocab/llama.cpp/ggml-vocab-bert-bge.gguf"},
    {"deepseek-coder", "vocab/llama.cpp/ggml-vocab-deepseek-coder.gguf"},
    {"deepseek-llm", "vocab/llama.cpp/ggml-vocab-deepseek-llm.gguf"},
    {"falcon", "vocab/llama.cpp/ggml-vocab-falcon.gguf"},
    {"gpt-2", "vocab/llama.cpp/ggml-vocab-gpt-2.gguf"},
    {"llama-bpe", "vocab/hf/llama3/tokenizer.json"},
    {"llama-spm", "vocab/llama.cpp/ggml-vocab-llama-spm.gguf"},
    {"mpt", "vocab/llama.cpp/ggml-vocab-mpt.gguf"},
    {"phi-3", "vocab/llama.cpp/ggml-vocab-phi-3.gguf"},
    {"qwen2", "vocab/hf/qwen3/tokenizer.json"},
    {"refact", "vocab/llama.cpp/ggml-vocab-refact.gguf"},
    {"starcoder", "vocab/llama.cpp/ggml-vocab-starcoder.gguf"},
};

/* GGUF or tokenizer.json, by name. */
static bool open_any(const char *path, vocab_file *f) {
    size_t l = strlen(path);
    if (l < 5 || strcmp(path + l - 5, ".json") != 0) return open_vocab(path, f);
    char err[512];
    f->g = NULL;
    int rc = tok_load_hf_json(path, &f->v, err, sizeof err);
    if (rc) test_fail(__FILE__, __LINE__, "tok_load_hf_json %s: %d %s", path, rc, err);
    return rc == 0;
}

/* llama.cpp's detokenize clean-up patterns (clean_spaces): decoding can only
 * give the input back when it has none. */
static bool has_clean_pattern(const char *s, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (s[i - 1] == ' ' && (s[i] == '?' || s[i] == '!' || s[i] == '.' || s[i] == ',' || s[i] == '\'')) return true;
    return false;
}

static void run_vocab_vectors(size_t set) {
    char rel[256];
    snprintf(rel, sizeof rel, "vocab/llama.cpp/ggml-vocab-%s.gguf.inp", vector_sets[set].name);
    NEED_SHARED(ipath_, rel);
    char ipath[1024], opath[1024], vpath[1024];
    snprintf(ipath, sizeof ipath, "%s", ipath_);
    snprintf(opath, sizeof opath, "%.*s.out", (int)(strlen(ipath) - 4), ipath);
    NEED_SHARED(vpath_, vector_sets[set].vocab);
    snprintf(vpath, sizeof vpath, "%s", vpath_);
    size_t ilen, olen;
    char *inp = read_file(ipath, &ilen), *outs = read_file(opath, &olen);
    EXPECT(inp && outs);
    vocab_file vf;
    if (!inp || !outs || !open_any(vpath, &vf)) {
        free(inp);
        free(outs);
        return;
    }
    int type = tok_type(vf.v);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    size_t pos = 0;
    char *oline = outs;
    int n_cases = 0, n_roundtrip = 0;
    while (pos < ilen) {
        const char *next = memmem(inp + pos, ilen - pos, sep, sep_len);
        size_t clen = next ? (size_t)(next - (inp + pos)) : ilen - pos;
        const char *text = inp + pos;
        /* expected ids: one line of .out */
        char *eol = strchr(oline, '\n');
        if (eol) *eol = 0;
        int32_t want[4096];
        size_t nw = 0;
        for (char *t = oline, *e; nw < 4096; t = e) {
            long x = strtol(t, &e, 10);
            if (e == t) break;
            want[nw++] = (int32_t)x;
        }
        size_t n;
        int32_t *got = encode(vf.v, text, clen, false, false, &n);
        if (!ids_equal(got, n, want, nw)) {
            char a[4096], b[4096];
            ids_str(got, n, a, sizeof a);
            ids_str(want, nw, b, sizeof b);
            test_fail(__FILE__, __LINE__, "%s case %d \"%.*s\"\n      got      %s\n      expected %s", vector_sets[set].name,
                      n_cases, (int)(clen > 80 ? 80 : clen), text, a, b);
        }
        /* decode → the input, where lossless: SPM without U+2581 in the input;
         * byte-level BPE always for the token bytes, and for tok_decode where
         * llama.cpp's clean_spaces leaves the text alone; WordPiece never
         * (lowercase, accents, spaces) */
        char *buf = malloc(4 * clen + 16);
        size_t nout = 0;
        bool lossless = type == TOK_TYPE_SPM ? !memmem(text, clen, "\xe2\x96\x81", 3) : type == TOK_TYPE_BPE;
        if (lossless) {
            for (size_t i = 0; i < n; i++) {
                size_t l;
                const char *p = tok_token_bytes(vf.v, got[i], false, &l);
                if (p && nout + l <= 4 * clen + 16) memcpy(buf + nout, p, l);
                nout += l;
            }
            if (type == TOK_TYPE_SPM && nout && buf[0] == ' ') memmove(buf, buf + 1, --nout); /* the prefix space */
            if (nout != clen || memcmp(buf, text, clen) != 0)
                test_fail(__FILE__, __LINE__, "%s case %d: token bytes give \"%.*s\", expected \"%.*s\"", vector_sets[set].name,
                          n_cases, (int)nout, buf, (int)clen, text);
            else
                n_roundtrip++;
            if (type == TOK_TYPE_SPM || !has_clean_pattern(text, clen)) {
                EXPECT_EQ_I(tok_decode(vf.v, got, n, 0, buf, 4 * clen + 16, &nout), 0);
                if (nout != clen || memcmp(buf, text, clen) != 0)
                    test_fail(__FILE__, __LINE__, "%s case %d: decode gives \"%.*s\", expected \"%.*s\"",
                              vector_sets[set].name, n_cases, (int)nout, buf, (int)clen, text);
            }
        }
        free(buf);
        free(got);
        n_cases++;
        if (!next) break;
        pos = (size_t)(next - inp) + sep_len;
        oline = eol ? eol + 1 : oline + strlen(oline);
    }
    EXPECT(n_cases >= 40);
    if (type != TOK_TYPE_WPM) EXPECT(n_roundtrip >= 40);
    close_vocab(&vf);
    free(inp);
    free(outs);
}

#define VECTORS(tname, idx) \
    TEST(tok, tname) { run_vocab_vectors(idx); }
VECTORS(vectors_bert_bge, 0)
VECTORS(vectors_deepseek_coder, 1)
VECTORS(vectors_deepseek_llm, 2)
VECTORS(vectors_falcon, 3)
VECTORS(vectors_gpt2, 4)
VECTORS(vectors_llama_bpe_hf_json, 5)
VECTORS(vectors_llama_spm, 6)
VECTORS(vectors_mpt, 7)
VECTORS(vectors_phi3, 8)
VECTORS(vectors_qwen2_hf_json, 9)
VECTORS(vectors_refact, 10)
VECTORS(vectors_starcoder, 11)
#undef VECTORS

/* No vector file goes untested: every .inp in the directory is in vector_sets. */
TEST(tok, vectors_all_covered) {
    NEED_SHARED(dir, "vocab/llama.cpp");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ls %s/*.inp", dir);
    char *list = NULL;
    if (run_cmd(cmd, false, &list) != 0 || !list) {
        free(list);
        SKIP("cannot list %s", dir);
    }
    int n = 0;
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        const char *b = strstr(line, "ggml-vocab-");
        bool found = false;
        for (size_t k = 0; b && k < sizeof vector_sets / sizeof vector_sets[0]; k++) {
            char want[256];
            snprintf(want, sizeof want, "ggml-vocab-%s.gguf.inp", vector_sets[k].name);
            found |= strcmp(b, want) == 0;
        }
        EXPECT_MSG(found, "%s has no test", line);
        n++;
    }
    EXPECT_EQ_I(n, (long long)(sizeof vector_sets / sizeof vector_sets[0]));
    free(list);
}

/* ---- behaviour on the 32k llama vocab ------------------------------------------- */

#define NEED_LLAMA_SPM(vf)                                                          \
    NEED_SHARED(vpath_, "vocab/llama.cpp/ggml-vocab-llama-spm.gguf");              \
    vocab_file vf;                                                                 \
    if (!open_vocab(vpath_, &vf)) return

TEST(tok, special_tokens_and_flags) {
    NEED_LLAMA_SPM(vf);
    const tok_vocab *v = vf.v;
    EXPECT_EQ_I(tok_n_vocab(v), 32000);
    EXPECT_EQ_I(tok_bos(v), 1);
    EXPECT_EQ_I(tok_eos(v), 2);
    EXPECT(tok_add_bos(v) && !tok_add_eos(v) && tok_add_space_prefix(v));
    EXPECT(tok_is_eog(v, 2));
    EXPECT(!tok_is_eog(v, 1) && !tok_is_eog(v, 15043) && !tok_is_eog(v, -1) && !tok_is_eog(v, 32000));
    EXPECT(tok_attr(v, 1) & TOK_ATTR_CONTROL);
    EXPECT(tok_attr(v, 3) & TOK_ATTR_BYTE);
    EXPECT(tok_attr(v, 15043) & TOK_ATTR_NORMAL);
    EXPECT_EQ_I(tok_find(v, "\xe2\x96\x81Hello", 8), 15043);
    EXPECT_EQ_I(tok_find(v, "no-such-piece", 13), -1);
    size_t l;
    EXPECT_STR_EQ(tok_piece(v, 15043, &l), "\xe2\x96\x81Hello");
    EXPECT_EQ_I(l, 8);
    EXPECT(tok_piece(v, 32000, &l) == NULL);

    char buf[64];
    EXPECT_EQ_I(tok_decode_token(v, 15043, false, buf, sizeof buf), 6);
    EXPECT_STR_EQ(buf, " Hello");
    EXPECT_EQ_I(tok_decode_token(v, 1, false, buf, sizeof buf), 0);
    EXPECT_EQ_I(tok_decode_token(v, 1, true, buf, sizeof buf), 3);
    EXPECT_STR_EQ(buf, "<s>");
    EXPECT_EQ_I(tok_decode_token(v, 3 + 0x0A, false, buf, sizeof buf), 1); /* <0x0A> */
    EXPECT_EQ_I(buf[0], '\n');
    EXPECT_EQ_I(tok_decode_token(v, 15043, false, buf, 3), 6); /* too small: size reported, nothing written */
    EXPECT_EQ_I(tok_decode_token(v, -1, false, buf, sizeof buf), TOK_EINVAL);
    close_vocab(&vf);
}

TEST(tok, parse_special) {
    NEED_LLAMA_SPM(vf);
    const char *s = "<s>Hello</s> world";
    size_t n;
    int32_t *ids = encode(vf.v, s, strlen(s), false, true, &n);
    /* "<s>" → 1; every text fragment after a special gets the prefix space
     * (llama.cpp's is_prev_special), so "Hello" → ▁Hello and " world" →
     * ▁▁world → ▁ ▁world */
    int32_t want[] = {1, 15043, 2, 29871, 3186};
    char a[256];
    ids_str(ids, n, a, sizeof a);
    EXPECT_MSG(ids_equal(ids, n, want, 5), "got %s", a);
    free(ids);
    ids = encode(vf.v, s, strlen(s), false, false, &n);
    EXPECT(n > 4);
    for (size_t i = 0; i < n; i++) EXPECT(ids[i] != 1 && ids[i] != 2);
    free(ids);
    ids = encode(vf.v, s, strlen(s), true, true, &n);
    EXPECT(n == 6 && ids[0] == 1 && ids[1] == 1); /* BOS added, then the parsed <s> */
    free(ids);
    char buf[128];
    size_t nout;
    int32_t seq[] = {1, 15043, 2};
    EXPECT_EQ_I(tok_decode(vf.v, seq, 3, TOK_SPECIAL, buf, sizeof buf, &nout), 0);
    EXPECT_STR_EQ(buf, "<s> Hello</s>");
    EXPECT_EQ_I(tok_decode(vf.v, seq, 3, 0, buf, sizeof buf, &nout), 0);
    EXPECT_STR_EQ(buf, " Hello");
    EXPECT_EQ_I(tok_decode(vf.v, seq + 1, 2, 0, buf, sizeof buf, &nout), 0);
    EXPECT_STR_EQ(buf, "Hello");
    EXPECT_EQ_I(tok_decode(vf.v, seq, 3, 0, buf, 3, &nout), TOK_ETOOSMALL);
    EXPECT_EQ_I(nout, 6);
    close_vocab(&vf);
}

TEST(tok, encode_count_and_too_small) {
    NEED_LLAMA_SPM(vf);
    const char *s = "Hello world, this is a test.";
    size_t n_full;
    int32_t *full = encode(vf.v, s, strlen(s), true, false, &n_full);
    EXPECT(n_full > 4);
    size_t n;
    EXPECT_EQ_I(tok_encode(vf.v, s, strlen(s), true, false, NULL, 0, &n), TOK_ETOOSMALL);
    EXPECT_EQ_I(n, n_full);
    int32_t part[3];
    EXPECT_EQ_I(tok_encode(vf.v, s, strlen(s), true, false, part, 3, &n), TOK_ETOOSMALL);
    EXPECT_EQ_I(n, n_full);
    EXPECT(ids_equal(part, 3, full, 3));
    EXPECT_EQ_I(tok_encode(vf.v, "", 0, false, false, NULL, 0, &n), 0);
    EXPECT_EQ_I(n, 0);
    EXPECT_EQ_I(tok_encode(vf.v, NULL, 3, false, false, part, 3, &n), TOK_EINVAL);
    free(full);
    close_vocab(&vf);
}


/* ---- a small vocabulary built in memory (runs without ../shared) --------------- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
} gbuf;

static void gb_put(gbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void gb_u32(gbuf *b, uint32_t x) { gb_put(b, &x, 4); }
static void gb_u64(gbuf *b, uint64_t x) { gb_put(b, &x, 8); }
static void gb_str(gbuf *b, const char *s) {
    gb_u64(b, strlen(s));
    gb_put(b, s, strlen(s));
}

enum { MINI_N = 269 };
/* ids 3..258 are <0x00>..<0xFF> as in the llama vocab */
static const char *const mini_pieces[] = {
    "\xe2\x96\x81", "a", "b", "c", "ab", "ba", "bc", "ca", "\xe2\x96\x81" "a", "<tool>",
};
static const float mini_scores[] = {-5, -5, -5, -5, -1, -1, -2, -3, -0.5f, 0};

/* A GGUF image with no tensors: tokenizer.ggml.model = model, the mini vocab
 * (with token `dup_of_a` renamed to "a" when >= 0), scores cut to n_scores,
 * add_space_prefix when >= 0. */
static gbuf mini_gguf(const char *model, int n_scores, int add_space_prefix, int dup_of_a) {
    gbuf b = {0};
    gb_put(&b, "GGUF", 4);
    gb_u32(&b, 3);
    gb_u64(&b, 0);
    gb_u64(&b, 4 + (add_space_prefix >= 0));
    gb_str(&b, "tokenizer.ggml.model");
    gb_u32(&b, GGUF_VT_STRING);
    gb_str(&b, model);
    gb_str(&b, "tokenizer.ggml.tokens");
    gb_u32(&b, GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_STRING);
    gb_u64(&b, MINI_N);
    for (int i = 0; i < MINI_N; i++) {
        char t[16];
        if (i == 0) gb_str(&b, "<unk>");
        else if (i == 1) gb_str(&b, "<s>");
        else if (i == 2) gb_str(&b, "</s>");
        else if (i < 259) snprintf(t, sizeof t, "<0x%02X>", i - 3), gb_str(&b, t);
        else gb_str(&b, i == dup_of_a ? "a" : mini_pieces[i - 259]);
    }
    gb_str(&b, "tokenizer.ggml.scores");
    gb_u32(&b, GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_FLOAT32);
    gb_u64(&b, (uint64_t)n_scores);
    for (int i = 0; i < n_scores; i++) {
        float f = i < 259 ? 0.0f : mini_scores[i - 259];
        gb_put(&b, &f, 4);
    }
    gb_str(&b, "tokenizer.ggml.token_type");
    gb_u32(&b, GGUF_VT_ARRAY);
    gb_u32(&b, GGUF_VT_INT32);
    gb_u64(&b, MINI_N);
    for (int i = 0; i < MINI_N; i++) gb_u32(&b, i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : i == 268 ? 4 : 1);
    if (add_space_prefix >= 0) {
        gb_str(&b, "tokenizer.ggml.add_space_prefix");
        gb_u32(&b, GGUF_VT_BOOL);
        uint8_t x = (uint8_t)add_space_prefix;
        gb_put(&b, &x, 1);
    }
    return b;
}

/* Load the mini vocab; the image must outlive the gguf_file, not the vocab. */
static int mini_load(const char *model, int n_scores, int add_space_prefix, int dup_of_a, tok_vocab **v,
                     char *err, size_t err_len) {
    gbuf b = mini_gguf(model, n_scores, add_space_prefix, dup_of_a);
    gguf_file *g = NULL;
    int rc = gguf_open_mem(b.p, b.n, &g, err, err_len);
    if (rc != 0) {
        test_fail(__FILE__, __LINE__, "gguf_open_mem: %s", err);
        free(b.p);
        return rc;
    }
    rc = tok_load_gguf(g, v, err, err_len);
    gguf_close(g);
    free(b.p); /* the vocab keeps copies */
    return rc;
}

static void expect_ids(const tok_vocab *v, const char *text, bool parse_special, const int32_t *want, size_t nw,
                       int line) {
    size_t n;
    int32_t *got = encode(v, text, strlen(text), false, parse_special, &n);
    if (!ids_equal(got, n, want, nw)) {
        char a[512], b[512];
        ids_str(got, n, a, sizeof a);
        ids_str(want, nw, b, sizeof b);
        test_fail(__FILE__, line, "\"%s\": got %s, expected %s", text, a, b);
    }
    free(got);
}
#define EXPECT_IDS(v, text, ps, ...)                                                   \
    do {                                                                               \
        const int32_t w_[] = {__VA_ARGS__};                                            \
        expect_ids(v, text, ps, w_, sizeof w_ / sizeof w_[0], __LINE__);               \
    } while (0)

TEST(tok, mini_merge_order_and_byte_fallback) {
    char err[256];
    tok_vocab *v;
    if (mini_load("llama", MINI_N, 0, -1, &v, err, sizeof err) != 0) return;
    EXPECT(!tok_add_space_prefix(v));
    EXPECT_IDS(v, "aba", false, 263, 260);           /* ab and ba tie: leftmost merges */
    EXPECT_IDS(v, "cab", false, 262, 263);           /* ab (-1) beats ca (-3) */
    EXPECT_IDS(v, "abc", false, 263, 262);           /* ab (-1) beats bc (-2) */
    EXPECT_IDS(v, "\xc3\xa9", false, 3 + 0xC3, 3 + 0xA9); /* é: byte fallback */
    EXPECT_IDS(v, "a b", false, 260, 259, 261);      /* ' ' → ▁ */
    EXPECT_IDS(v, "a<tool>b", false, 260, 268, 261); /* user-defined: always matched */
    EXPECT_IDS(v, "a<s>b", false, 260, 3 + '<', 3 + 's', 3 + '>', 261);
    EXPECT_IDS(v, "a<s>b", true, 260, 1, 261);
    tok_free(v);

    if (mini_load("llama", MINI_N, -1, -1, &v, err, sizeof err) != 0) return;
    EXPECT(tok_add_space_prefix(v)); /* the SPM default */
    EXPECT_IDS(v, "a", false, 267);
    EXPECT_IDS(v, "ab", false, 267, 261); /* ▁a (-0.5) beats ab (-1) */
    EXPECT_IDS(v, "a<tool>b", false, 267, 268, 259, 261); /* prefix again after a special */
    tok_free(v);
}

TEST(tok, mini_load_errors) {
    char err[256];
    tok_vocab *v = NULL;
    EXPECT_EQ_I(mini_load("rwkv", MINI_N, 0, -1, &v, err, sizeof err), TOK_EUNSUPPORTED);
    EXPECT(v == NULL && strstr(err, "'rwkv'"));
    EXPECT_EQ_I(mini_load("gpt2", MINI_N, 0, -1, &v, err, sizeof err), TOK_EFORMAT); /* no merges */
    EXPECT_MSG(strstr(err, "tokenizer.ggml.merges"), "%s", err);
    EXPECT_EQ_I(mini_load("llama", MINI_N - 1, 0, -1, &v, err, sizeof err), TOK_EFORMAT);
    EXPECT_MSG(strstr(err, "tokenizer.ggml.scores") && strstr(err, "268"), "%s", err);
    EXPECT_EQ_I(mini_load("llama", MINI_N, 0, 263, &v, err, sizeof err), TOK_EFORMAT);
    EXPECT_MSG(strstr(err, "duplicate") && strstr(err, "260") && strstr(err, "263"), "%s", err);
    EXPECT(v == NULL);
}

/* ---- streaming detokenization ------------------------------------------------------ */

TEST(tok, stream_never_splits_utf8) {
    NEED_LLAMA_SPM(vf);
    /* CJK, emoji and accents: many are byte-fallback tokens in the 32k vocab */
    const char *s = "Hello 🦙 world! 我想在apple工作 — ½ ñ 𝄞 ok";
    size_t n;
    int32_t *ids = encode(vf.v, s, strlen(s), true, false, &n);
    int n_byte_tokens = 0;
    for (size_t i = 0; i < n; i++) n_byte_tokens += (tok_attr(vf.v, ids[i]) & TOK_ATTR_BYTE) != 0;
    EXPECT(n_byte_tokens >= 4); /* the test is about split characters */
    tok_stream *st;
    EXPECT_EQ_I(tok_stream_new(vf.v, TOK_TEXT_START, &st), 0);
    char text[1024];
    size_t nt = 0, l;
    int empty_puts = 0;
    for (size_t i = 0; i < n; i++) {
        const char *o = tok_stream_put(st, ids[i], &l);
        EXPECT(o != NULL && strlen(o) == l);
        EXPECT_MSG(utf8_valid((const unsigned char *)o, l), "chunk after token %zu is not complete UTF-8", i);
        empty_puts += l == 0;
        memcpy(text + nt, o, l);
        nt += l;
    }
    tok_stream_flush(st, &l);
    EXPECT_EQ_I(l, 0);
    text[nt] = 0;
    /* BOS first: the prefix space stays (llama.cpp's detokenize rule) */
    EXPECT(text[0] == ' ');
    EXPECT_STR_EQ(text + 1, s);
    EXPECT(empty_puts >= 2); /* BOS, and bytes held back mid-character */

    /* no BOS: TOK_TEXT_START strips the prefix space */
    tok_stream_reset(st);
    nt = 0;
    for (size_t i = 1; i < n; i++) {
        const char *o = tok_stream_put(st, ids[i], &l);
        memcpy(text + nt, o, l);
        nt += l;
    }
    text[nt] = 0;
    EXPECT_STR_EQ(text, s);
    tok_stream_free(st);
    free(ids);
    close_vocab(&vf);
}

TEST(tok, stream_invalid_bytes_become_fffd) {
    char err[256];
    tok_vocab *v;
    if (mini_load("llama", MINI_N, 0, -1, &v, err, sizeof err) != 0) return;
    tok_stream *st;
    EXPECT_EQ_I(tok_stream_new(v, 0, &st), 0);
#define BYTE(b) (3 + (b))
    struct { int32_t ids[8]; int n; const char *want; } cases[] = {
        {{BYTE(0xE2), BYTE(0x28)}, 2, "\xEF\xBF\xBD("},          /* bad continuation */
        {{BYTE(0xFF), BYTE(0x41)}, 2, "\xEF\xBF\xBD" "A"},       /* never-valid byte */
        {{BYTE(0xC0), BYTE(0x80)}, 2, "\xEF\xBF\xBD\xEF\xBF\xBD"}, /* overlong lead */
        {{BYTE(0xED), BYTE(0xA0), BYTE(0x80)}, 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* surrogate */
        {{BYTE(0xF0), BYTE(0x9F), BYTE(0xA6), BYTE(0x99)}, 4, "🦙"},
        {{BYTE(0xF0), BYTE(0x9F)}, 2, "\xEF\xBF\xBD"},          /* unfinished at flush */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tok_stream_reset(st);
        char text[64];
        size_t nt = 0, l;
        for (int i = 0; i < cases[c].n; i++) {
            const char *o = tok_stream_put(st, cases[c].ids[i], &l);
            EXPECT(utf8_valid((const unsigned char *)o, l));
            memcpy(text + nt, o, l);
            nt += l;
        }
        const char *o = tok_stream_flush(st, &l);
        memcpy(text + nt, o, l);
        nt += l;
        text[nt] = 0;
        EXPECT_MSG(strcmp(text, cases[c].want) == 0, "case %zu: got \"%s\"", c, text);
    }
    size_t l;
    EXPECT(tok_stream_put(st, 99999, &l) == NULL && l == 0);
    tok_stream_free(st);
    tok_free(v);
}

/* ---- errors ---------------------------------------------------------------------------- */

TEST(tok, load_types_and_pre) {
    static const struct {
        const char *file;
        int type;
        const char *pre;
    } cases[] = {
        {"vocab/llama.cpp/ggml-vocab-gpt-2.gguf", TOK_TYPE_BPE, "gpt-2"},
        {"vocab/llama.cpp/ggml-vocab-mpt.gguf", TOK_TYPE_BPE, "mpt"},
        {"vocab/llama.cpp/ggml-vocab-refact.gguf", TOK_TYPE_BPE, "starcoder"},
        {"vocab/llama.cpp/ggml-vocab-bert-bge.gguf", TOK_TYPE_WPM, ""},
        {"vocab/llama.cpp/ggml-vocab-llama-spm.gguf", TOK_TYPE_SPM, ""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        NEED_SHARED(path, cases[k].file);
        vocab_file vf;
        if (!open_vocab(path, &vf)) continue;
        EXPECT_EQ_I(tok_type(vf.v), cases[k].type);
        EXPECT_STR_EQ(tok_pre_name(vf.v), cases[k].pre);
        close_vocab(&vf);
    }
    tok_free(NULL);
}

/* ---- cinfer tokenize ------------------------------------------------------------------- */

/* Run cli_tokenize in-process with stdout captured. */
static int run_cli_tokenize(int argc, char **argv, char *out, size_t cap) {
    char *s = NULL;
    int rc = run_captured(cli_tokenize, argc, argv, &s);
    snprintf(out, cap, "%s", s ? s : "");
    free(s);
    return rc;
}

TEST(tok, cli_tokenize_stories260K) {
    NEED_SHARED(m, "models/stories260K/stories260K.gguf");
    char model[1024], out[4096];
    snprintf(model, sizeof model, "%s", m);
    char *argv1[] = {"tokenize", model, "Once upon a time", NULL};
    EXPECT_EQ_I(run_cli_tokenize(3, argv1, out, sizeof out), 0);
    EXPECT_STR_EQ(out, "1 403 407 261 378\n");
    char *argv2[] = {"tokenize", model, "Once upon a time", "--no-bos", NULL};
    EXPECT_EQ_I(run_cli_tokenize(4, argv2, out, sizeof out), 0);
    EXPECT_STR_EQ(out, "403 407 261 378\n");
    char *argv3[] = {"tokenize", model, "<s>The little dog", "--parse-special", "--no-bos", NULL};
    EXPECT_EQ_I(run_cli_tokenize(5, argv3, out, sizeof out), 0);
    EXPECT_STR_EQ(out, "1 291 376 400 428\n");
    char *argv4[] = {"tokenize", model, NULL};
    EXPECT_EQ_I(run_cli_tokenize(2, argv4, out, sizeof out), 2);
}
