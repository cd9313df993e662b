/*
 * cli/embed.c — `cinfer embed MODEL [-p TEXT]... [--pooling P] [--no-normalize]`:
 * the embedding of each text, one JSON array of floats per line (llama.cpp's
 * llama-embedding with --embd-output-format array, one text per -p).  The
 * embedding is cinfer_embed's: the final hidden state pooled with the
 * model's own pooling (an embedding model's `<arch>.pooling_type`; mean for
 * a generative model) and L2-normalised, or raw with --no-normalize.  Without
 * -p, each line of standard input is one text.  Texts are tokenized as
 * llama.cpp does (BOS/CLS/SEP as the vocabulary asks).
 */
#include "cli.h"
#include "cinfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage_to(FILE *f) {
    fprintf(f, "usage: cinfer embed MODEL [-p TEXT]... [--pooling mean|cls|last|none] [--no-normalize]\n"
               "                    [-c N_CTX] [-t THREADS] [--quant P]\n"
               "  prints the embedding of each TEXT as a JSON array of floats, one line each\n"
               "  (without -p: each line of standard input is a text)\n"
               "  --pooling P      how token states become one vector (default: the model's own\n"
               "                   pooling_type, e.g. CLS for BGE, mean for Nomic; mean for\n"
               "                   generative models); none: one array per token\n"
               "  --no-normalize   raw vectors (default: Euclidean norm 1)\n"
               "  --quant P        " CLI_QUANT_HELP);
    return 2;
}

static int pooling_from_name(const char *s) {
    return !strcmp(s, "mean") ? CINFER_POOL_MEAN
           : !strcmp(s, "cls") ? CINFER_POOL_CLS
           : !strcmp(s, "last") ? CINFER_POOL_LAST
           : !strcmp(s, "none") ? CINFER_POOL_NONE
                                : -1;
}

static void print_vec(const float *v, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ",%.9g" : "%.9g", (double)v[i]);
    putchar(']');
}

/* One text: tokenize, embed, print one line.  0 or 1 (message printed). */
static int embed_one(cinfer_model *m, cinfer_session *s, const char *text, int pooling, float **buf, size_t *cap) {
    const int n_ctx = cinfer_session_n_ctx(s), n_embd = cinfer_model_n_embd(m);
    int32_t *ids = malloc(((size_t)n_ctx + 8) * sizeof *ids);
    size_t n = 0;
    char err[1024];
    if (!ids) return fprintf(stderr, "cinfer embed: out of memory\n"), 1;
    if (cinfer_tokenize(m, text, strlen(text), 1, 1, ids, (size_t)n_ctx + 8, &n)) {
        fprintf(stderr, "cinfer embed: a text of %zu tokens does not fit the context of %d (-c)\n", n, n_ctx);
        free(ids);
        return 1;
    }
    if (!n) {
        fprintf(stderr, "cinfer embed: an empty text on a model that adds no BOS: nothing to embed\n");
        free(ids);
        return 1;
    }
    const int per_token = (pooling & ~CINFER_EMBED_RAW) == CINFER_POOL_NONE;
    size_t need = per_token ? n * (size_t)n_embd : (size_t)n_embd;
    if (need > *cap) {
        float *nb = realloc(*buf, need * sizeof *nb);
        if (!nb) {
            free(ids);
            return fprintf(stderr, "cinfer embed: out of memory\n"), 1;
        }
        *buf = nb;
        *cap = need;
    }
    int rc = cinfer_embed(s, ids, (int)n, pooling, *buf, (int)need, err, sizeof err);
    free(ids);
    if (rc) return fprintf(stderr, "cinfer embed: %s\n", err), 1;
    if (!per_token) print_vec(*buf, n_embd);
    else { /* one vector per token, even for a one-token text */
        putchar('[');
        for (size_t t = 0; t < n; t++) {
            if (t) putchar(',');
            print_vec(*buf + t * (size_t)n_embd, n_embd);
        }
        putchar(']');
    }
    putchar('\n');
    fflush(stdout);
    return 0;
}

int cli_embed(int argc, char **argv) {
    const char *model = NULL, *texts[256];
    int n_texts = 0, pooling = -1, raw = 0, n_ctx = 0, n_threads = 0, precision = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_to(stdout);
            return 0;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!v) return fprintf(stderr, "cinfer embed: %s needs a text\n", a), usage_to(stderr);
            if (n_texts == (int)(sizeof texts / sizeof *texts))
                return fprintf(stderr, "cinfer embed: at most %zu -p texts (more: one per line on stdin)\n",
                               sizeof texts / sizeof *texts), 2;
            texts[n_texts++] = v;
            i++;
        } else if (!strcmp(a, "--pooling")) {
            if (!v || (pooling = pooling_from_name(v)) < 0)
                return fprintf(stderr, "cinfer embed: --pooling '%s': expected mean, cls, last or none\n",
                               v ? v : ""), 2;
            i++;
        } else if (!strcmp(a, "--no-normalize")) raw = 1;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size") || !strcmp(a, "-t") || !strcmp(a, "--threads")) {
            char *end = NULL;
            long x = v ? strtol(v, &end, 10) : -1;
            if (!v || *end || x < 1 || x > 1 << 20)
                return fprintf(stderr, "cinfer embed: %s '%s': expected a positive integer\n", a, v ? v : ""), 2;
            if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) n_ctx = (int)x;
            else n_threads = (int)x;
            i++;
        } else if (!strcmp(a, "--quant")) {
            if ((precision = cli_parse_precision("cinfer embed", v)) < 0) return 2;
            i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "cinfer embed: unknown option '%s'\n", a);
            return usage_to(stderr);
        } else if (!model) model = a;
        else {
            fprintf(stderr, "cinfer embed: unexpected argument '%s' (texts go after -p)\n", a);
            return usage_to(stderr);
        }
    }
    if (!model) return usage_to(stderr);
    char cached[4096], err[1024];
    if (cli_resolve_model("embed", &model, cached, sizeof cached, CLI_MODEL_RUN)) return 1;
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    int status = 1;
    float *buf = NULL;
    size_t cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    if (cinfer_model_open(model, &(cinfer_model_options){.precision = precision}, &m, err, sizeof err)) {
        fprintf(stderr, "cinfer embed: %s\n", err);
        goto done;
    }
    cli_warn_settings("cinfer embed", m, n_ctx, n_threads);
    if (cinfer_session_new(m, &(cinfer_session_options){.n_ctx = n_ctx, .n_threads = n_threads}, &s, err,
                           sizeof err)) {
        fprintf(stderr, "cinfer embed: %s\n", err);
        goto done;
    }
    if (pooling < 0) pooling = cinfer_model_pooling(m) >= 0 ? cinfer_model_pooling(m) : CINFER_POOL_MEAN;
    if (raw) pooling |= CINFER_EMBED_RAW;
    status = 0;
    for (int i = 0; i < n_texts && !status; i++) status = embed_one(m, s, texts[i], pooling, &buf, &cap);
    if (!n_texts) {
        ssize_t len;
        while (!status && (len = getline(&line, &line_cap, stdin)) >= 0) {
            while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
            status = embed_one(m, s, line, pooling, &buf, &cap);
        }
    }
done:
    free(line);
    free(buf);
    cinfer_session_free(s);
    cinfer_model_close(m);
    return status;
}
