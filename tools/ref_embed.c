/*
 * ref_embed — llama.cpp's pooled embeddings for a model and prompts, as JSON.
 *
 *   ref_embed -m MODEL.gguf -p PROMPT [-p PROMPT ...] [--backend-dir DIR] [--pooling LIST]
 *
 * A reference tool, built against llama.cpp's public C API (libllama) by
 * tools/arch-refs.sh and never at test time.  For every prompt (tokenized with
 * add_special, BOS as llama.cpp adds it) and every pooling type in LIST
 * (comma-separated from mean, cls, last, none; default mean,cls,last) it creates a
 * fresh context with embeddings on and that pooling type forced
 * (llama_context_params.pooling_type), evaluates the prompt as one batch on
 * one thread and prints llama_get_embeddings_seq(ctx, 0): the pooled final
 * hidden state (after the output norm), NOT normalised; for "none" every
 * token's row (llama_get_embeddings_ith), an array of arrays.  "pooling_gguf" names
 * the type the model's own GGUF key selects (what llama.cpp uses when the
 * caller does not force one).  Output, one JSON document on stdout:
 *   {"n_embd": N, "pooling_gguf": "mean", "prompts": [{"prompt": ..., "prompt_ids": [...],
 *    "embeddings": {"mean": [...], "cls": [...], "last": [...]}}]}
 * floats printed with %.9g (they read back as the same float32).
 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void json_str(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p == '\n') fputs("\\n", stdout);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static const char *pooling_name(enum llama_pooling_type t) {
    switch (t) {
    case LLAMA_POOLING_TYPE_NONE: return "none";
    case LLAMA_POOLING_TYPE_MEAN: return "mean";
    case LLAMA_POOLING_TYPE_CLS: return "cls";
    case LLAMA_POOLING_TYPE_LAST: return "last";
    case LLAMA_POOLING_TYPE_RANK: return "rank";
    default: return "unspecified";
    }
}

static struct llama_context *new_ctx(struct llama_model *model, enum llama_pooling_type pooling) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512; cp.n_batch = 512; cp.n_ubatch = 512; cp.n_seq_max = 1;
    cp.n_threads = 1; cp.n_threads_batch = 1; cp.no_perf = true;
    cp.type_k = GGML_TYPE_F32; cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.embeddings = true;
    cp.pooling_type = pooling;
    return llama_init_from_model(model, cp);
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *backend_dir = NULL, *pool_list = "mean,cls,last";
    const char *prompts[64];
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model_path = argv[++i];
        else if (!strcmp(argv[i], "-p") && i + 1 < argc && np < 64) prompts[np++] = argv[++i];
        else if (!strcmp(argv[i], "--backend-dir") && i + 1 < argc) backend_dir = argv[++i];
        else if (!strcmp(argv[i], "--pooling") && i + 1 < argc) pool_list = argv[++i];
        else {
            fprintf(stderr, "usage: %s -m MODEL -p PROMPT [-p ...] [--backend-dir DIR] [--pooling mean,cls,last,none]\n", argv[0]);
            return 2;
        }
    }
    if (!model_path || !np) { fprintf(stderr, "ref_embed: -m MODEL and -p PROMPT are required\n"); return 2; }
    enum llama_pooling_type pools[4];
    const char *pool_names[4];
    int n_pool = 0;
    {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", pool_list);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            enum llama_pooling_type t = !strcmp(tok, "mean") ? LLAMA_POOLING_TYPE_MEAN
                                      : !strcmp(tok, "cls")  ? LLAMA_POOLING_TYPE_CLS
                                      : !strcmp(tok, "last") ? LLAMA_POOLING_TYPE_LAST
                                      : !strcmp(tok, "none") ? LLAMA_POOLING_TYPE_NONE
                                                             : LLAMA_POOLING_TYPE_UNSPECIFIED;
            if (t == LLAMA_POOLING_TYPE_UNSPECIFIED || n_pool == 4) {
                fprintf(stderr, "ref_embed: --pooling: '%s' is not one of mean, cls, last, none\n", tok);
                return 2;
            }
            pools[n_pool] = t;
            pool_names[n_pool++] = pooling_name(t);
        }
    }
    if (!getenv("REF_EMBED_VERBOSE")) llama_log_set(quiet, NULL);
    if (backend_dir) ggml_backend_load_all_from_path(backend_dir);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) { fprintf(stderr, "ref_embed: failed to load %s\n", model_path); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_embd = llama_model_n_embd(model);

    struct llama_context *probe = new_ctx(model, LLAMA_POOLING_TYPE_UNSPECIFIED);
    if (!probe) { fprintf(stderr, "ref_embed: failed to create a context\n"); return 1; }
    printf("{\"n_embd\": %d, \"pooling_gguf\": \"%s\", \"prompts\": [", n_embd, pooling_name(llama_pooling_type(probe)));
    llama_free(probe);

    for (int pi = 0; pi < np; pi++) {
        const char *prompt = prompts[pi];
        int cap = (int)strlen(prompt) + 8;
        llama_token *toks = malloc(sizeof(llama_token) * (size_t)cap);
        int nt = toks ? llama_tokenize(vocab, prompt, (int)strlen(prompt), toks, cap, true, false) : -1;
        if (nt <= 0) { fprintf(stderr, "ref_embed: tokenizing prompt %d failed\n", pi); return 1; }
        printf("%s{\"prompt\": ", pi ? ", " : "");
        json_str(prompt);
        fputs(", \"prompt_ids\": [", stdout);
        for (int i = 0; i < nt; i++) printf("%s%d", i ? ", " : "", toks[i]);
        fputs("], \"embeddings\": {", stdout);
        for (int k = 0; k < n_pool; k++) {
            struct llama_context *ctx = new_ctx(model, pools[k]);
            if (!ctx) { fprintf(stderr, "ref_embed: failed to create a context\n"); return 1; }
            struct llama_batch b = llama_batch_init(nt, 0, 1);
            for (int i = 0; i < nt; i++) {
                b.token[i] = toks[i]; b.pos[i] = i; b.n_seq_id[i] = 1; b.seq_id[i][0] = 0; b.logits[i] = 1;
            }
            b.n_tokens = nt;
            if (llama_decode(ctx, b) != 0) { fprintf(stderr, "ref_embed: decode failed (prompt %d, %s)\n", pi, pool_names[k]); return 1; }
            printf("%s\"%s\": [", k ? ", " : "", pool_names[k]);
            for (int r = 0; r < (pools[k] == LLAMA_POOLING_TYPE_NONE ? nt : 1); r++) {
                const float *e = pools[k] == LLAMA_POOLING_TYPE_NONE ? llama_get_embeddings_ith(ctx, r)
                                                                     : llama_get_embeddings_seq(ctx, 0);
                if (!e) { fprintf(stderr, "ref_embed: no embeddings (prompt %d, %s)\n", pi, pool_names[k]); return 1; }
                if (pools[k] == LLAMA_POOLING_TYPE_NONE) fputs(r ? ", [" : "[", stdout);
                for (int i = 0; i < n_embd; i++) printf("%s%.9g", i ? ", " : "", e[i]);
                if (pools[k] == LLAMA_POOLING_TYPE_NONE) putchar(']');
            }
            putchar(']');
            llama_batch_free(b);
            llama_free(ctx);
        }
        fputs("}}", stdout);
        free(toks);
    }
    fputs("]}\n", stdout);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
