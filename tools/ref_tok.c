/*
 * ref_tok — llama.cpp's token ids for test texts, in the format of its own
 * tokenizer vectors (tests/test-tokenizer-0.cpp: a .inp file of texts
 * separated by "\n__ggml_vocab_test__\n", an .out file of one line per text,
 * each id preceded by a space).
 *
 *   ref_tok -m VOCAB.gguf -f TEXTS.inp [--add-special] [--parse-special]
 *
 * A reference tool, built against llama.cpp's public C API (libllama) by
 * tools/tok-refs.sh and never at test time.  The vocabulary is loaded alone
 * (vocab_only); every text is tokenized with llama_tokenize (add_special and
 * parse_special off unless asked, as test-tokenizer-0 does) and its ids are
 * printed on one line of stdout.
 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (size_t r; b && (r = fread(b + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    fclose(f);
    if (b) *len = n;
    return b;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *inp_path = NULL;
    int add_special = 0, parse_special = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model_path = argv[++i];
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) inp_path = argv[++i];
        else if (!strcmp(argv[i], "--add-special")) add_special = 1;
        else if (!strcmp(argv[i], "--parse-special")) parse_special = 1;
        else {
            fprintf(stderr, "usage: %s -m VOCAB.gguf -f TEXTS.inp [--add-special] [--parse-special]\n", argv[0]);
            return 2;
        }
    }
    if (!model_path || !inp_path) {
        fprintf(stderr, "ref_tok: -m VOCAB.gguf and -f TEXTS.inp are required\n");
        return 2;
    }
    size_t len = 0;
    char *inp = read_all(inp_path, &len);
    if (!inp) {
        fprintf(stderr, "ref_tok: cannot read %s\n", inp_path);
        return 1;
    }
    if (!getenv("REF_TOK_VERBOSE")) llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "ref_tok: failed to load %s\n", model_path);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    size_t pos = 0;
    for (;;) {
        const char *next = NULL;
        for (size_t i = pos; i + sep_len <= len; i++)
            if (!memcmp(inp + i, sep, sep_len)) {
                next = inp + i;
                break;
            }
        size_t n = next ? (size_t)(next - (inp + pos)) : len - pos;
        if (!next && n == 0) break; /* the file ends with a separator */
        int cap = (int)(8 * n + 16);
        llama_token *ids = malloc(sizeof *ids * (size_t)cap);
        int nt = ids ? llama_tokenize(vocab, inp + pos, (int)n, ids, cap, add_special, parse_special) : -1;
        if (nt < 0) {
            fprintf(stderr, "ref_tok: tokenizing text at byte %zu failed\n", pos);
            return 1;
        }
        for (int i = 0; i < nt; i++) printf(" %d", ids[i]);
        putchar('\n');
        free(ids);
        if (!next) break;
        pos = (size_t)(next - inp) + sep_len;
    }
    llama_model_free(model);
    llama_backend_free();
    free(inp);
    return 0;
}
