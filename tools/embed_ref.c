/*
 * embed_ref.c — llama.cpp's embeddings of a model, as a reference JSON for
 * cinfer's tests (tests/data/embed/).  Built against the peer's libllama (the
 * llama.cpp that node-llama-cpp ships; `make embed-refs`), never at test time:
 * the tests read the committed JSON.
 *
 *   embed-ref -m MODEL.gguf -p TEXT [-p TEXT ...] [--backend-dir DIR] [-t N] [-c N_CTX]
 *             [--describe TEXT]   (which llama.cpp: recorded as "llama_cpp")
 *
 * For every text: the token ids (llama_tokenize, add_special = true, control
 * tokens not parsed: what llama-embedding does), then for each pooling of
 * llama.cpp's --pooling (none, mean, cls, last) a fresh context with
 * embeddings = true and that pooling_type, one batch of all tokens, and the
 * output: llama_get_embeddings_seq (pooled) or every token's row (none); KV
 * cache F32 and flash attention off, as in ../shared/reference.  The
 * vectors are llama.cpp's raw outputs, before the L2 normalisation
 * llama-embedding applies by default (--embd-normalize 2), printed with %.9g
 * (they round-trip to the exact float32).
 *
 * Output (stdout), one JSON object, in the layout of tools/ref_embed.c's
 * (branch archgen: tests/data/arch/NAME-embeddings.json) plus the per-token rows:
 *   {"model": PATH as given, "n_embd": N, "llama_cpp": --describe, "system_info":
 *    llama_print_system_info(), "generator": ..., "settings": {...},
 *    "prompts": [{"prompt", "prompt_ids": [...], "embeddings": {"mean": [...],
 *                 "cls": [...], "last": [...], "none": [[...], ...] (a row per token)}}]}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static void print_vec(const float *v, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf("%s%.9g", i ? "," : "", v[i]);
    putchar(']');
}

static void print_json_string(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static int usage(void) {
    fprintf(stderr, "usage: embed-ref -m MODEL.gguf -p TEXT [-p TEXT ...] [--backend-dir DIR] [-t N] [-c N_CTX] "
                    "[--describe TEXT]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *backend_dir = NULL, *describe = "", *texts[16];
    int n_texts = 0, n_threads = 1, n_ctx = 512;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model_path = argv[++i];
        else if (!strcmp(argv[i], "-p") && i + 1 < argc && n_texts < 16) texts[n_texts++] = argv[++i];
        else if (!strcmp(argv[i], "--backend-dir") && i + 1 < argc) backend_dir = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c") && i + 1 < argc) n_ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--describe") && i + 1 < argc) describe = argv[++i];
        else return usage();
    }
    if (!model_path || !n_texts || n_threads < 1 || n_ctx < 8) return usage();
    if (!getenv("EMBED_REF_VERBOSE")) llama_log_set(quiet, NULL);
    if (backend_dir) ggml_backend_load_all_from_path(backend_dir);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "embed-ref: cannot load %s\n", model_path);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_embd = llama_model_n_embd(model);
    static const struct { const char *name; enum llama_pooling_type type; } poolings[] = {
        {"none", LLAMA_POOLING_TYPE_NONE},
        {"mean", LLAMA_POOLING_TYPE_MEAN},
        {"cls", LLAMA_POOLING_TYPE_CLS},
        {"last", LLAMA_POOLING_TYPE_LAST},
    };
    printf("{\"model\":");
    print_json_string(model_path);
    printf(",\"n_embd\":%d,\"llama_cpp\":", n_embd);
    print_json_string(describe);
    printf(",\"system_info\":");
    print_json_string(llama_print_system_info());
    printf(",\"generator\":\"tools/embed_ref.c (llama.cpp public C API: embeddings = true, "
           "pooling_type per output, llama_get_embeddings_seq / llama_get_embeddings_ith)\","
           "\"settings\":{\"threads\":%d,\"n_ctx\":%d,\"add_special\":true,\"parse_special\":false,"
           "\"kv_cache_type\":\"f32\",\"flash_attn\":false,\"normalized\":false},\"prompts\":[",
           n_threads, n_ctx);
    for (int t = 0; t < n_texts; t++) {
        const int cap = (int)strlen(texts[t]) + 16;
        llama_token *ids = malloc(sizeof(llama_token) * (size_t)cap);
        const int n = ids ? llama_tokenize(vocab, texts[t], (int)strlen(texts[t]), ids, cap, true, false) : -1;
        if (n < 1 || n > n_ctx) {
            fprintf(stderr, "embed-ref: text %d: %d tokens (1..%d)\n", t, n, n_ctx);
            return 1;
        }
        printf("%s{\"prompt\":", t ? "," : "");
        print_json_string(texts[t]);
        printf(",\"prompt_ids\":[");
        for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
        printf("],\"embeddings\":{");
        for (size_t k = 0; k < sizeof poolings / sizeof poolings[0]; k++) {
            struct llama_context_params cp = llama_context_default_params();
            cp.n_ctx = (uint32_t)n_ctx;
            cp.n_batch = cp.n_ubatch = (uint32_t)n_ctx;
            cp.n_threads = cp.n_threads_batch = n_threads;
            cp.n_seq_max = 1;
            cp.no_perf = true;
            cp.embeddings = true;
            cp.pooling_type = poolings[k].type;
            /* like the logit references (../shared/tools/refgen): an F32 KV
             * cache, no flash attention (llama.cpp's defaults would round K
             * and V to F16) */
            cp.type_k = cp.type_v = GGML_TYPE_F32;
            cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
            struct llama_context *ctx = llama_init_from_model(model, cp);
            if (!ctx) {
                fprintf(stderr, "embed-ref: cannot create a context (pooling %s)\n", poolings[k].name);
                return 1;
            }
            struct llama_batch b = llama_batch_init(n, 0, 1);
            for (int i = 0; i < n; i++) {
                b.token[i] = ids[i];
                b.pos[i] = i;
                b.n_seq_id[i] = 1;
                b.seq_id[i][0] = 0;
                b.logits[i] = 1; /* every token's output (pooling needs all of them) */
            }
            b.n_tokens = n;
            if (llama_decode(ctx, b)) {
                fprintf(stderr, "embed-ref: decode failed (pooling %s)\n", poolings[k].name);
                return 1;
            }
            printf("%s\"%s\":", k ? "," : "", poolings[k].name);
            if (poolings[k].type == LLAMA_POOLING_TYPE_NONE) {
                putchar('[');
                for (int i = 0; i < n; i++) {
                    const float *e = llama_get_embeddings_ith(ctx, i);
                    if (!e) {
                        fprintf(stderr, "embed-ref: no embedding for token %d\n", i);
                        return 1;
                    }
                    if (i) putchar(',');
                    print_vec(e, n_embd);
                }
                putchar(']');
            } else {
                const float *e = llama_get_embeddings_seq(ctx, 0);
                if (!e) {
                    fprintf(stderr, "embed-ref: no pooled embedding (pooling %s)\n", poolings[k].name);
                    return 1;
                }
                print_vec(e, n_embd);
            }
            llama_batch_free(b);
            llama_free(ctx);
        }
        printf("}}");
        free(ids);
    }
    printf("]}\n");
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
