/*
 * cli/tokenize.c — `cinfer tokenize MODEL TEXT [--no-bos] [--parse-special]`:
 * prints the ids of TEXT, space-separated on one line, as llama.cpp's
 * llama_tokenize gives them (add_special unless --no-bos; control tokens in
 * TEXT parsed only with --parse-special).  MODEL is a GGUF file (a model or a
 * vocab-only file), a Hugging Face checkpoint folder, or a Hugging Face
 * tokenizer.json (its tokenizer_config.json, when next to it, is read too);
 * the format is told by the content, not the name.
 */
#include "cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/modelfile.h"
#include "text/tok.h"

static int usage_to(FILE *f) {
    fprintf(f, "usage: cinfer tokenize MODEL.gguf|HF-FOLDER|REPO[:FILE]|tokenizer.json TEXT [--no-bos] [--parse-special]\n"
                    "  prints the token ids of TEXT, space-separated (llama.cpp's llama_tokenize)\n"
                    "  MODEL           a GGUF model or vocab-only file, a Hugging Face folder, REPO[:FILE]\n"
                    "                  pulled with cinfer pull, or a Hugging Face tokenizer.json (byte-level\n"
                    "                  BPE: GPT-2, Llama 3, Qwen2 style; SentencePiece-style BPE with\n"
                    "                  byte_fallback: Llama 2, Mistral, TinyStories style)\n"
                    "  --no-bos        do not add the BOS/EOS tokens the vocabulary asks for\n"
                    "  --parse-special control-token text in TEXT (\"<|im_start|>\") becomes its id\n");
    return 2;
}
static int usage(void) { return usage_to(stderr); }

/* The first non-blank byte of path: '{' for JSON, 'G' for GGUF; -1 when unreadable. */
static int first_byte(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int c;
    while ((c = fgetc(f)) == ' ' || c == '\t' || c == '\n' || c == '\r') {}
    fclose(f);
    return c;
}

int cli_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    bool add_special = true, parse_special = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-bos")) add_special = false;
        else if (!strcmp(argv[i], "--parse-special")) parse_special = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage_to(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "cinfer tokenize: unknown option '%s'\n", argv[i]);
            return usage();
        } else if (!model) model = argv[i];
        else if (!text) text = argv[i];
        else {
            fprintf(stderr, "cinfer tokenize: unexpected argument '%s'\n", argv[i]);
            return usage();
        }
    }
    if (!model || !text) return usage();

    char err[512], cached[4096];
    if (cli_resolve_model("tokenize", &model, cached, sizeof cached, CLI_MODEL_ANY)) return 1;
    gguf_file *g = NULL;
    tok_vocab *v = NULL;
    int32_t *ids = NULL;
    int status = 1;
    if (first_byte(model) == '{') {
        if (tok_load_hf_json(model, &v, err, sizeof err) != 0) {
            fprintf(stderr, "cinfer tokenize: %s: %s\n", model, err);
            goto done;
        }
    } else {
        if (modelfile_open(model, &g, err, sizeof err) != 0) { /* GGUF, or a Hugging Face folder */
            fprintf(stderr, "cinfer tokenize: %s\n", err);
            goto done;
        }
        if (tok_load_gguf(g, &v, err, sizeof err) != 0) {
            fprintf(stderr, "cinfer tokenize: %s: %s\n", model, err);
            goto done;
        }
        if (tok_pre_note(v)) fprintf(stderr, "cinfer tokenize: warning: %s\n", tok_pre_note(v));
    }
    size_t len = strlen(text), n_ids = 0;
    ids = malloc(tok_encode_max(len) * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "cinfer tokenize: out of memory\n");
        goto done;
    }
    int rc = tok_encode(v, text, len, add_special, parse_special, ids, tok_encode_max(len), &n_ids);
    if (rc != 0) {
        fprintf(stderr, "cinfer tokenize: encoding failed (%d)\n", rc);
        goto done;
    }
    for (size_t i = 0; i < n_ids; i++) printf(i ? " %d" : "%d", (int)ids[i]);
    printf("\n");
    fflush(stdout);
    status = 0;
done:
    free(ids);
    tok_free(v);
    gguf_close(g);
    return status;
}
