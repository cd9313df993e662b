/*
 * test_tok_fam.c — the tokenizers and pre-tokenizers issue 19's families
 * need (tests/data/tok/README.md): every text's ids equal llama.cpp's.
 *
 *  - pre-tokenizers tekken (Mistral 3), glm4 (GLM-4), seed-coder (Seed-OSS),
 *    hunyuan-dense (Hunyuan), roberta-bpe (RoBERTa-vocabulary BERTs), mellum2
 *    (Mellum 2; StarCoder's regex): the
 *    byte-level BPE vocabulary of ../shared's ggml-vocab-llama-bpe.gguf
 *    with tokenizer.ggml.pre set to the name, so only the regex differs;
 *  - UGM (tokenizer.ggml.model "t5": T5, XLM-RoBERTa BERTs): ../shared's
 *    ggml-vocab-llama-spm.gguf read as a unigram vocabulary, with
 *    add_space_prefix, and with remove_extra_whitespaces; and, when
 *    llama.cpp's vocabularies are there (make tok-vocabs, llama_src_path),
 *    its ggml-vocab-nomic-bert-moe.gguf: XLM-RoBERTa's 250k pieces with the
 *    precompiled charsmap (NFKC);
 *  - Gemma 4's tokenizer (tokenizer.ggml.model "gemma4") and Command R's
 *    vocabulary on llama.cpp's own vectors, from that source tree.
 * Texts: llama.cpp's tokenizer test texts (../shared) and
 * tests/data/tok/texts.inp; ids made with llama.cpp de3ff815's
 * llama_tokenize by tools/tok-refs.sh (add_special and parse_special off).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/gguf.h"
#include "gguf_edit.h"
#include "test.h"
#include "text/tok.h"
#include "text/tok_impl.h"

#define TOK_DATA "tests/data/tok"
#define SPM_REL "vocab/llama.cpp/ggml-vocab-llama-spm.gguf"
#define BPE_REL "vocab/llama.cpp/ggml-vocab-llama-bpe.gguf"
#define TEXTS_REL "vocab/llama.cpp/ggml-vocab-llama-bpe.gguf.inp"

/* A file of llama.cpp's models/ folder (rel "models/NAME"), or NULL: from
 * $CINFER_LLAMA_SRC (a llama.cpp source tree), else $CINFER_BUILD/llama-vocab
 * (`make tok-vocabs`: the same files of the llama.cpp node-llama-cpp ships),
 * else ../peer/llama-src. */
static const char *llama_src_path(const char *rel) {
    static char path[1024];
    const char *root = getenv("CINFER_LLAMA_SRC"), *build = getenv("CINFER_BUILD");
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    if (root && *root) {
        snprintf(path, sizeof path, "%s/%s", root, rel);
        return access(path, R_OK) ? NULL : path;
    }
    snprintf(path, sizeof path, "%s/llama-vocab/%s", build && *build ? build : "build", base);
    if (!access(path, R_OK)) return path;
    snprintf(path, sizeof path, "../peer/llama-src/%s", rel);
    return access(path, R_OK) ? NULL : path;
}

/* Compare the ids of every text of inp (test-tokenizer-0 format) with the
 * lines of out; name labels messages.  Returns the number of texts. */
static int check_vectors(const tok_vocab *v, const char *inp_path, const char *out_path, const char *name,
                         int check_bytes) {
    size_t ilen, olen;
    char *inp = read_file(inp_path, &ilen), *outs = read_file(out_path, &olen);
    EXPECT_MSG(inp && outs, "%s: cannot read %s or %s", name, inp_path, out_path);
    if (!inp || !outs) {
        free(inp);
        free(outs);
        return 0;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    size_t pos = 0;
    char *line = outs;
    int n_cases = 0, n_bad = 0;
    while (pos < ilen && *line) {
        const char *next = memmem(inp + pos, ilen - pos, sep, sep_len);
        size_t tl = next ? (size_t)(next - (inp + pos)) : ilen - pos;
        const char *text = inp + pos;
        char *eol = strchr(line, '\n');
        if (eol) *eol = 0;
        int32_t want[4096];
        size_t nw = 0;
        for (char *t = line, *e; nw < 4096; t = e) {
            long x = strtol(t, &e, 10);
            if (e == t) break;
            want[nw++] = (int32_t)x;
        }
        size_t cap = tok_encode_max(tl), n = 0;
        int32_t *got = malloc(cap * sizeof *got);
        int rc = got ? tok_encode(v, text, tl, false, false, got, cap, &n) : TOK_ENOMEM;
        int same = rc == 0 && n == nw && (!n || !memcmp(got, want, n * sizeof *got));
        if (!same && n_bad++ < 3) {
            char a[2048] = "", b[2048] = "";
            for (size_t i = 0, o = 0; i < n && rc == 0 && o + 12 < sizeof a; i++)
                o += (size_t)snprintf(a + o, sizeof a - o, " %d", got[i]);
            for (size_t i = 0, o = 0; i < nw && o + 12 < sizeof b; i++)
                o += (size_t)snprintf(b + o, sizeof b - o, " %d", want[i]);
            test_fail(__FILE__, __LINE__, "%s case %d \"%.*s\" (rc %d)\n      got     %s\n      llama.cpp%s", name,
                      n_cases, (int)(tl > 60 ? 60 : tl), text, rc, a, b);
        }
        /* the token bytes give the text back (no U+2581 in it: that decodes to a space) */
        if (same && check_bytes && !memmem(text, tl, "\xe2\x96\x81", 3)) {
            size_t m = 0, ok = 1;
            for (size_t i = 0; i < n && ok; i++) {
                size_t l;
                const char *p = tok_token_bytes(v, got[i], false, &l);
                ok = p && m + l <= tl && !memcmp(text + m, p, l);
                m += l;
            }
            EXPECT_MSG(ok && m == tl, "%s case %d: the token bytes do not give the text back", name, n_cases);
        }
        free(got);
        n_cases++;
        line = eol ? eol + 1 : line + strlen(line);
        if (!next) break;
        pos = (size_t)(next - inp) + sep_len;
    }
    printf("    %s: %d texts, %d differ\n", name, n_cases, n_bad);
    free(inp);
    free(outs);
    return n_cases;
}

static tok_vocab *load_vocab(const char *path) {
    gguf_file *g;
    tok_vocab *v = NULL;
    char err[512];
    if (gguf_open(path, &g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return NULL;
    }
    if (tok_load_gguf(g, &v, err, sizeof err)) test_fail(__FILE__, __LINE__, "tok_load_gguf %s: %s", path, err);
    gguf_close(g);
    return v;
}

/* src with the keys set, in this test's directory; NULL when it cannot be made. */
static const char *derived(const char *src, const char *name, const gguf_kv_set *set, size_t n) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s.gguf", test_tmpdir(), name);
    if (access(path, R_OK) && gguf_edit_copy_vals(src, path, NULL, set, n)) return NULL;
    return path;
}

/* The texts of ../shared and of tests/data/tok against ref_name's .out files. */
static void check_both(const tok_vocab *v, const char *ref_name, int check_bytes) {
    char out[256], out2[256];
    snprintf(out, sizeof out, TOK_DATA "/%s.out", ref_name);
    snprintf(out2, sizeof out2, TOK_DATA "/%s-texts.out", ref_name);
    EXPECT(check_vectors(v, shared_path(TEXTS_REL), out, ref_name, check_bytes) >= 40);
    EXPECT(check_vectors(v, TOK_DATA "/texts.inp", out2, ref_name, check_bytes) >= 30);
}

/* The pre-tokenizers on the BPE vocabulary: loaded once, each name's
 * stages and merge rule switched in (what tok_load_gguf does for the name:
 * tok_pre_init and ignore_merges; the ids depend on nothing else), against
 * llama.cpp on the same vocabulary with tokenizer.ggml.pre set to the name
 * (tools/tok-refs.sh).  A second file checks the defaults the names bring
 * (glm4: no BOS; tekken: adds BOS; others: BOS 11, not added), loaded
 * through tok_load_gguf with the BOS keys dropped. */
TEST(tok_fam, pre_tokenizers) {
    NEED_SHARED(bpe, BPE_REL);
    if (!shared_path(TEXTS_REL)) SKIP("../shared/%s absent", TEXTS_REL);
    char src[1024];
    snprintf(src, sizeof src, "%s", bpe);
    tok_vocab *v = load_vocab(src);
    if (!v) return;
    static const char *const names[] = {"tekken", "glm4", "seed-coder", "hunyuan-dense", "roberta-bpe", "mellum2"};
    char err[256];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const pre_def *def = tok_pre_lookup(names[i], strlen(names[i]));
        EXPECT_MSG(def, "pre-tokenizer %s unknown", names[i]);
        if (!def) continue;
        for (int k = 0; k < v->n_pre; k++) tok_regex_free(v->pre[k].re);
        v->n_pre = 0;
        if (tok_pre_init(v, def, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "%s: %s", names[i], err);
            continue;
        }
        v->ignore_merges = def->ignore_merges;
        char ref[64];
        snprintf(ref, sizeof ref, "pre-%s", names[i]);
        check_both(v, ref, 1);
    }
    tok_free(v);
    char path[1024];
    snprintf(path, sizeof path, "%s/bpe-defaults.gguf", test_tmpdir());
    static const char *const drop[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token", NULL};
    static const struct { const char *pre; int bos, add_bos; } want[] = {
        {"glm4", -1, 0}, {"tekken", 11, 1}, {"seed-coder", 11, 0}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        gguf_kv_set set[] = {{"tokenizer.ggml.pre", gguf_val_str(want[i].pre)}};
        if (gguf_edit_copy_vals(src, path, drop, set, 1) || !(v = load_vocab(path))) return;
        EXPECT_MSG(tok_bos(v) == want[i].bos && tok_add_bos(v) == want[i].add_bos, "%s: bos %d add_bos %d",
                   want[i].pre, tok_bos(v), tok_add_bos(v));
        tok_free(v);
    }
}

static void check_ugm_spm(const char *name, int space_prefix, int remove_ws) {
    NEED_SHARED(spm, SPM_REL);
    if (!shared_path(TEXTS_REL)) SKIP("../shared/%s absent", TEXTS_REL);
    char src[1024];
    snprintf(src, sizeof src, "%s", spm);
    gguf_kv_set set[] = {
        {"tokenizer.ggml.model", gguf_val_str("t5")},
        {"tokenizer.ggml.add_space_prefix", (gguf_value){.type = GGUF_VT_BOOL, .v.b = space_prefix}},
        {"tokenizer.ggml.remove_extra_whitespaces", (gguf_value){.type = GGUF_VT_BOOL, .v.b = remove_ws}},
    };
    const char *path = derived(src, name, set, remove_ws ? 3 : 2);
    tok_vocab *v = path ? load_vocab(path) : NULL;
    if (!v) return;
    EXPECT_EQ_I(tok_type(v), TOK_TYPE_UGM);
    check_both(v, name, 0);
    /* add_special: BOS as this file asks (add_bos_token true), no EOS (false) */
    int32_t ids[16];
    size_t n = 0;
    EXPECT_EQ_I(tok_encode(v, "Hi", 2, true, false, ids, 16, &n), 0);
    EXPECT(n >= 2 && ids[0] == 1 && ids[n - 1] != 2);
    tok_free(v);
}

TEST(tok_fam, ugm_llama_spm) { check_ugm_spm("ugm-llama-spm", 1, 0); }
TEST(tok_fam, ugm_llama_spm_remove_ws) { check_ugm_spm("ugm-llama-spm-ws", 0, 1); }

TEST(tok_fam, ugm_xlm_roberta_charsmap) {
    const char *p = llama_src_path("models/ggml-vocab-nomic-bert-moe.gguf");
    if (!p) SKIP("llama.cpp's models/ggml-vocab-nomic-bert-moe.gguf absent: run make tok-vocabs");
    if (!shared_path(TEXTS_REL)) SKIP("../shared/%s absent", TEXTS_REL);
    char path[1024];
    snprintf(path, sizeof path, "%s", p);
    tok_vocab *v = load_vocab(path);
    if (!v) return;
    EXPECT_EQ_I(tok_type(v), TOK_TYPE_UGM);
    check_both(v, "ugm-nomic-bert-moe", 0);
    /* XLM-R's specials: <s> text </s> (the file adds BOS and EOS), decoded as
     * llama_detokenize does: dropping the BOS keeps the first piece's space */
    int32_t ids[64];
    size_t n = 0;
    EXPECT_EQ_I(tok_encode(v, "Hello world", 11, true, false, ids, 64, &n), 0);
    EXPECT(n >= 3 && ids[0] == tok_bos(v) && ids[n - 1] == tok_eos(v));
    char buf[128];
    size_t nb = 0;
    EXPECT_EQ_I(tok_decode(v, ids, n, TOK_REMOVE_SPECIAL, buf, sizeof buf, &nb), 0);
    EXPECT_MSG(nb == 12 && !memcmp(buf, " Hello world", 12), "decoded '%.*s'", (int)nb, buf);
    tok_free(v);
}

/* llama.cpp's own vectors for vocabularies only its source tree has. */
static void check_llama_vectors(const char *vocab_name, int check_bytes) {
    char rel[256], vpath[1024], ipath[1100], opath[1100];
    snprintf(rel, sizeof rel, "models/ggml-vocab-%s.gguf", vocab_name);
    const char *p = llama_src_path(rel);
    if (!p) SKIP("llama.cpp's %s absent: run make tok-vocabs", rel);
    snprintf(vpath, sizeof vpath, "%s", p);
    snprintf(ipath, sizeof ipath, "%s.inp", vpath);
    snprintf(opath, sizeof opath, "%s.out", vpath);
    tok_vocab *v = load_vocab(vpath);
    if (!v) return;
    EXPECT(check_vectors(v, ipath, opath, vocab_name, check_bytes) >= 40);
    tok_free(v);
}

TEST(tok_fam, gemma4_llama_vectors) { check_llama_vectors("gemma-4", 1); }
TEST(tok_fam, command_r_llama_vectors) { check_llama_vectors("command-r", 1); }
