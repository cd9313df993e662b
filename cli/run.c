/*
 * run.c — `cinfer run`: compile a model (JIT by default, or AOT), evaluate a
 * prompt in batches, stream generated text to stdout, print one stats line to
 * stderr.  The same code drives standalone executables built by
 * `cinfer compile --aot -o PROG` (cli_run_prebuilt), whose forward pass is
 * linked in instead of compiled at start-up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "compile.h"
#include "engine.h"
#include "gguf.h"
#include "kern.h"
#include "samp.h"
#include "tok.h"

typedef struct {
    const char *model;
    const char *prompt;
    const char *prompt_ids;
    const char *dump_logits;
    const char *archspec;
    int n_predict;
    int n_threads;
    int n_ctx;
    int verbose;
    int no_bos;
    cc_mode mode;
    samp_params sp;
} run_args;

static void run_usage(FILE *f) {
    fprintf(f,
            "usage: cinfer run MODEL [options]\n"
            "  -p, --prompt TEXT       prompt text (default: empty, generation starts after BOS)\n"
            "  --prompt-ids \"1 2 3\"    prompt as token ids (no BOS added)\n"
            "  -n N                    tokens to generate (default 256; 0 evaluates the prompt only)\n"
            "  --temp T                temperature (0.8; 0 = greedy, deterministic)\n"
            "  --top-k K --top-p P --min-p P --repeat-penalty R --seed S\n"
            "  -t N                    threads (default: physical cores)\n"
            "  -c N                    context size in tokens (default: model's, at most 4096)\n"
            "  --jit | --aot           compile in memory with libtcc (default) or with cc -O3\n"
            "  --quant native          compute precision (only native for now)\n"
            "  --dump-logits FILE      write {\"prompt_ids\":[...],\"logits\":[...]} at the last prompt position\n"
            "  --archspec FILE         use this architecture descriptor instead of the built-in one\n"
            "  --no-bos                do not add BOS to the prompt\n"
            "  -v                      verbose: compile/cache details\n");
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Parse a numeric flag value; returns -1 (and prints) when malformed. */
static int parse_num(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "cinfer run: %s: '%s' is not a number in [%g, %g]\n", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, run_args *a) {
    memset(a, 0, sizeof *a);
    a->n_predict = 256;
    a->mode = CC_JIT;
    a->sp = samp_params_default();
    a->sp.seed = (uint64_t)time(NULL);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
#define NEED_VAL()                                                               \
    do {                                                                         \
        if (!v) {                                                                \
            fprintf(stderr, "cinfer run: %s needs a value\n", f);                \
            return -1;                                                           \
        }                                                                        \
        i++;                                                                     \
    } while (0)
#define NUM(lo, hi) do { NEED_VAL(); if (parse_num(f, v, lo, hi, &d)) return -1; } while (0)
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            run_usage(stdout);
            exit(0);
        } else if (!strcmp(f, "-p") || !strcmp(f, "--prompt")) { NEED_VAL(); a->prompt = v; }
        else if (!strcmp(f, "--prompt-ids")) { NEED_VAL(); a->prompt_ids = v; }
        else if (!strcmp(f, "--dump-logits")) { NEED_VAL(); a->dump_logits = v; }
        else if (!strcmp(f, "--archspec")) { NEED_VAL(); a->archspec = v; }
        else if (!strcmp(f, "-n") || !strcmp(f, "--n-predict")) { NUM(0, 1e9); a->n_predict = (int)d; }
        else if (!strcmp(f, "-t") || !strcmp(f, "--threads")) { NUM(0, 1024); a->n_threads = (int)d; }
        else if (!strcmp(f, "-c") || !strcmp(f, "--ctx-size")) { NUM(0, 1 << 24); a->n_ctx = (int)d; }
        else if (!strcmp(f, "--temp")) { NUM(0, 100); a->sp.temp = (float)d; }
        else if (!strcmp(f, "--top-k")) { NUM(0, 1e9); a->sp.top_k = (int)d; }
        else if (!strcmp(f, "--top-p")) { NUM(0, 1); a->sp.top_p = (float)d; }
        else if (!strcmp(f, "--min-p")) { NUM(0, 1); a->sp.min_p = (float)d; }
        else if (!strcmp(f, "--repeat-penalty")) { NUM(0, 100); a->sp.repeat_penalty = (float)d; }
        else if (!strcmp(f, "--seed")) { NUM(0, 1.8e19); a->sp.seed = (uint64_t)d; }
        else if (!strcmp(f, "--jit")) a->mode = CC_JIT;
        else if (!strcmp(f, "--aot")) a->mode = CC_AOT;
        else if (!strcmp(f, "--no-bos")) a->no_bos = 1;
        else if (!strcmp(f, "-v") || !strcmp(f, "--verbose")) a->verbose = 1;
        else if (!strcmp(f, "--quant")) {
            NEED_VAL();
            if (strcmp(v, "native")) {
                fprintf(stderr, "cinfer run: --quant %s is not implemented yet (only native)\n", v);
                return -1;
            }
        } else if (!strcmp(f, "--json-schema")) {
            fprintf(stderr, "cinfer run: --json-schema is not implemented yet\n");
            return -1;
        } else if (f[0] == '-' && f[1]) {
            fprintf(stderr, "cinfer run: unknown option '%s' (see cinfer run --help)\n", f);
            return -1;
        } else if (!a->model) a->model = f;
        else {
            fprintf(stderr, "cinfer run: unexpected argument '%s'\n", f);
            return -1;
        }
#undef NUM
#undef NEED_VAL
    }
    if (!a->model) {
        run_usage(stderr);
        return -1;
    }
    if (a->prompt && a->prompt_ids) {
        fprintf(stderr, "cinfer run: give -p or --prompt-ids, not both\n");
        return -1;
    }
    return 0;
}

/* "1 2 3" → ids; returns count or -1. */
static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    while (*s) {
        while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > 0x7fffffff || n >= cap) return -1;
        ids[n++] = (int32_t)v;
        s = end;
    }
    return n;
}

static int dump_logits(const char *path, const int32_t *ids, int n_ids, const float *logits,
                       int n_vocab) {
    FILE *f = fopen(path, "w");
    if (!f) return fprintf(stderr, "cinfer run: %s: %s\n", path, strerror(errno)), -1;
    fprintf(f, "{\"prompt_ids\":[");
    for (int i = 0; i < n_ids; i++) fprintf(f, "%s%d", i ? "," : "", ids[i]);
    fprintf(f, "],\"logits\":[");
    for (int i = 0; i < n_vocab; i++) fprintf(f, "%s%.9g", i ? "," : "", (double)logits[i]);
    fprintf(f, "]}\n");
    if (fclose(f)) return fprintf(stderr, "cinfer run: %s: write failed\n", path), -1;
    return 0;
}

static int run_main(int argc, char **argv, const cf_model_desc *(*describe)(void),
                    void (*forward)(cf_env *)) {
    run_args a;
    if (parse_args(argc, argv, &a)) return 2;
    char err[1024];
    int rc = 1;
    gguf_file *g = NULL;
    tok_vocab *vocab = NULL;
    cc_module *mod = NULL;
    eng_model em = {0};
    eng_ctx *ctx = NULL;
    samp_state *samp = NULL;
    tok_stream *ts = NULL;
    int32_t *ids = NULL;

    double t_start = now_ms();
    if (gguf_open(a.model, &g, err, sizeof err)) goto fail;
    if (tok_load_gguf(g, &vocab, err, sizeof err)) goto fail;
    double t_loaded = now_ms();

    const cf_model_desc *desc;
    if (describe) {
        desc = describe();
        char fp[17];
        snprintf(fp, sizeof fp, "%016llx", (unsigned long long)gguf_fingerprint(g));
        if (strcmp(fp, desc->fingerprint)) {
            snprintf(err, sizeof err,
                     "%s: this program was compiled for model fingerprint %s, the file has %s",
                     a.model, desc->fingerprint, fp);
            goto fail;
        }
    } else {
        cc_options co = {.mode = a.mode, .archspec_path = a.archspec, .verbose = a.verbose};
        if (cc_build(g, &co, &mod, err, sizeof err)) goto fail;
        desc = mod->desc;
        forward = mod->forward;
    }
    double t_compiled = now_ms();
    if (eng_model_bind(&em, g, desc, forward, err, sizeof err)) goto fail;
    if (tok_n_vocab(vocab) != desc->n_vocab) {
        snprintf(err, sizeof err, "tokenizer has %d tokens, the model's output has %d",
                 tok_n_vocab(vocab), desc->n_vocab);
        goto fail;
    }
    if (eng_ctx_new(&em, a.n_ctx, a.n_threads, 0, &ctx, err, sizeof err)) goto fail;

    /* Prompt → ids. */
    size_t cap = (size_t)ctx->n_ctx + 8;
    ids = malloc(cap * sizeof *ids);
    if (!ids) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    int n_prompt;
    if (a.prompt_ids) {
        n_prompt = parse_ids(a.prompt_ids, ids, (int)cap);
        if (n_prompt < 0) {
            snprintf(err, sizeof err, "--prompt-ids: expected space-separated ids (at most %zu)", cap);
            goto fail;
        }
    } else {
        const char *p = a.prompt ? a.prompt : "";
        size_t n_ids = 0;
        int trc = tok_encode(vocab, p, strlen(p), !a.no_bos, false, ids, cap, &n_ids);
        if (trc) {
            snprintf(err, sizeof err, "prompt does not fit the context (%d tokens)", ctx->n_ctx);
            goto fail;
        }
        n_prompt = (int)n_ids;
    }
    if (n_prompt == 0) {
        snprintf(err, sizeof err, "empty prompt and the vocabulary adds no BOS: nothing to evaluate");
        goto fail;
    }
    if (n_prompt + (a.n_predict > 0 ? 1 : 0) > ctx->n_ctx) {
        snprintf(err, sizeof err, "prompt of %d tokens does not fit the context of %d", n_prompt,
                 ctx->n_ctx);
        goto fail;
    }

    double t0 = now_ms();
    if (eng_eval(ctx, ids, n_prompt, err, sizeof err)) goto fail;
    double t_prompt = now_ms() - t0;
    if (a.dump_logits && dump_logits(a.dump_logits, ids, n_prompt, eng_logits(ctx), desc->n_vocab))
        goto fail;

    if (samp_new(&a.sp, desc->n_vocab, &samp)) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    if (tok_stream_new(vocab, 0, &ts)) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    if (a.prompt) fputs(a.prompt, stdout);
    int n_gen = 0, n_total = n_prompt;
    double t_gen0 = now_ms(), t_first = 0;
    while (n_gen < a.n_predict && n_total < ctx->n_ctx) {
        int32_t id = samp_sample(samp, eng_logits(ctx), ids, n_total);
        if (n_gen == 0) t_first = now_ms() - t_start;
        n_gen++;
        if (tok_is_eog(vocab, id)) break;
        size_t len;
        const char *piece = tok_stream_put(ts, id, &len);
        if (piece && len) {
            fwrite(piece, 1, len, stdout);
            fflush(stdout);
        }
        ids[n_total++] = id;
        if (n_gen < a.n_predict && n_total < ctx->n_ctx && eng_eval(ctx, &id, 1, err, sizeof err))
            goto fail;
    }
    size_t len;
    const char *tail = tok_stream_flush(ts, &len);
    if (tail && len) fwrite(tail, 1, len, stdout);
    if (a.n_predict > 0 || a.prompt) fputc('\n', stdout);
    fflush(stdout);
    double t_gen = now_ms() - t_gen0;
    fprintf(stderr,
            "cinfer: load %.1f ms | %s %.1f ms%s | prompt %d tok %.1f tok/s | "
            "gen %d tok %.1f tok/s | first token %.1f ms | %d threads, %s\n",
            t_loaded - t_start, describe ? "prebuilt" : a.mode == CC_AOT ? "aot" : "jit",
            t_compiled - t_loaded, mod && mod->cache_hit ? " (cached)" : "", n_prompt,
            t_prompt > 0 ? n_prompt * 1e3 / t_prompt : 0.0, n_gen,
            t_gen > 0 ? n_gen * 1e3 / t_gen : 0.0, t_first, pool_n_threads(ctx->pool),
            kern_isa_name(kern_best_isa()));
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "cinfer run: %s\n", err);
done:
    free(ids);
    tok_stream_free(ts);
    samp_free(samp);
    eng_ctx_free(ctx);
    eng_model_release(&em);
    cc_module_free(mod);
    tok_free(vocab);
    gguf_close(g);
    return rc;
}

int cli_run(int argc, char **argv) { return run_main(argc, argv, NULL, NULL); }

int cli_run_prebuilt(int argc, char **argv, const cf_model_desc *(*describe)(void),
                     void (*forward)(cf_env *)) {
    /* argv[0] is the program; the model comes first like `cinfer run MODEL`. */
    return run_main(argc, argv, describe, forward);
}
