/*
 * run.c — `cinfer run`: compile a model (JIT by default, or AOT), evaluate a
 * prompt in batches, stream generated text to stdout, print one stats line to
 * stderr.  The same code drives standalone executables built by
 * `cinfer compile --aot -o PROG` (cli_run_prebuilt), whose forward pass is
 * linked in instead of compiled at start-up.
 *
 * The prompt comes from -p, -f FILE (-f -: stdin), --prompt-ids, or, when
 * none is given and stdin is a pipe or a file, from stdin.  Ctrl-C stops the
 * prompt evaluation or the generation and still prints the stats line (a
 * second Ctrl-C kills); exit status 130 then.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cinfer.h"
#include "cli.h"
#include "compiler/compile.h"
#include "kernels/kern.h"
#include "base/pool.h"
#include "hub/pull.h"
#include "engine/samp.h"

enum { RUN_MAX_STOP = 16 };

typedef struct {
    const char *model;
    const char *prompt;
    const char *prompt_file; /* -f FILE ("-": stdin) */
    const char *prompt_ids;
    const char *dump_logits;
    const char *archspec;
    int n_predict;
    int n_threads;
    int n_ctx;
    int verbose;
    int no_bos;
    int no_parse_special;    /* --no-parse-special: "<|im_start|>" in the prompt is plain text */
    int activations; /* CINFER_ACT_* */
    int precision;   /* CINFER_PRECISION_* (--quant) */
    int device, device_index; /* --device */
    cc_mode mode;
    samp_params sp;
    const char *json_schema; /* --json-schema: constrain output to this JSON Schema */
    int confidence;          /* --confidence: print the decisions' distributions (stderr) */
    int n_given;             /* -n was given */
    int quant_given;         /* --quant was given */
    uint64_t mem_bytes;      /* --mem: the memory budget (0: none) */
    int stream_weights;      /* --stream-weights */
    int stream_ahead;        /* --stream-ahead N */
    int moe_cache_experts;   /* --moe-cache-experts N */
    int cache_type_k, cache_type_v; /* --cache-type-k/-v (CINFER_KV_*; 0: default) */
    int seed_random;         /* the seed was drawn at random (no --seed, or --seed -1) */
    const char *stop[RUN_MAX_STOP]; /* --stop STR (repeatable) */
    int n_stop;
    int penalty_all;         /* --repeat-penalty-all: end-of-generation/control tokens too */
} run_args;

/* "cinfer run", or the program's name for a standalone executable
 * (cli_run_prebuilt): the prefix of every message. */
static const char *run_name = "cinfer run";

/* What runs: `cinfer run MODEL`, a standalone executable (`cinfer compile
 * --aot -o PROG`, PROG MODEL), or a bundle (`cinfer bundle`, the model inside). */
enum { RUN_CINFER = 0, RUN_PREBUILT = 1, RUN_BUNDLE = 2 };

/* The usage of `cinfer run`, or (prebuilt) of a standalone executable, which
 * has no --jit/--aot/--archspec and whose precision comes from the file. */
static void run_usage(FILE *f, int prebuilt) {
    if (prebuilt == RUN_BUNDLE)
        fprintf(f,
                "usage: %s [-p TEXT | -f FILE | < FILE] [options]\n"
                "  generate text with the model inside this program (%s -h lists chat, serve, --info)\n",
                run_name, run_name);
    else if (prebuilt)
        fprintf(f,
                "usage: %s MODEL [options]\n"
                "  a standalone executable built by `cinfer compile --aot -o`: the forward pass is\n"
                "  compiled in; MODEL is the GGUF (or .giw) file it was built for, run in the file's\n"
                "  precision (auto for a GGUF, the saved one for a .giw; --quant may only name it)\n",
                run_name);
    else
        fprintf(f, "usage: cinfer run MODEL [options]\n"
                   "  MODEL                   a GGUF or .giw file, or REPO[:FILE] pulled with cinfer pull\n");
    fprintf(f,
            "  -p, --prompt TEXT       prompt text (default: empty, generation starts after BOS)\n"
            "  -f, --file FILE         prompt from FILE (- = stdin); without -p, -f or --prompt-ids a\n"
            "                          prompt piped or redirected into stdin is read\n"
            "  --prompt-ids \"1 2 3\"    prompt as token ids (no BOS added)\n"
            "  -n N                    tokens to generate (default 256; 0 evaluates the prompt only)\n"
            "  --temp T                temperature (0.8; 0 = greedy, deterministic)\n"
            "  --stop STR              stop when the text STR is generated (not printed; repeatable)\n"
            "  --top-k K --top-p P --min-p P --repeat-penalty R\n"
            "                          (defaults 40, 0.95, 0.05, 1 = off; top-p 0 = greedy; the penalty\n"
            "                          leaves end-of-generation and\n"
            "                          control tokens alone unless --repeat-penalty-all)\n"
            "  --seed S                sampling seed: same seed, same text (default: random, printed\n"
            "                          with -v; -1 = random)\n"
            "  -t N                    threads (default: physical cores)\n"
            "  -c N                    context size in tokens (default: model's, at most 4096); when\n"
            "                          it fills, generation stops with a notice on stderr\n");
    if (!prebuilt)
        fprintf(f,
            "  --jit | --aot           compile in memory with libtcc (default) or with cc -O3\n"
            "  --quant P               compute precision: " CLI_QUANT_HELP
            "  --mem BYTES             memory budget (480M, 2G): the most precise plan that fits,\n"
            "                          each step on stderr (precision, then context; docs/memory.md)\n"
            "  --stream-weights        run from the file mapping a few layers at a time (models larger\n"
            "                          than memory; native precision); --stream-ahead N layers (1)\n"
            "  --moe-cache-experts N   streaming a MoE model: experts per layer kept mapped, the most\n"
            "                          recently routed (default: what --mem has room for, else the\n"
            "                          experts one token routes); the others are read when routed\n"
            CLI_DEVICE_HELP);
    fprintf(f,
            "  --activations f32|q8    matmul activations: f32 (exact dequantized weights) or\n"
            "                          q8 (quantized per 32/256 block like llama.cpp; faster; the default for\n"
            "                          native; other precisions default to their own)\n"
            CLI_CACHE_HELP
            "  --dump-logits FILE      write {\"prompt_ids\":[...],\"logits\":[...]} at the last prompt position\n");
    if (!prebuilt)
        fprintf(f, "  --archspec FILE         use this architecture descriptor instead of the built-in one\n");
    fprintf(f,
            "  --no-bos                do not add BOS to the prompt\n"
            "  --no-parse-special      control-token text in the prompt (\"<|im_start|>\", \"<s>\") stays\n"
            "                          plain text; by default it becomes the token, like llama.cpp\n"
            "  --json-schema FILE      output one JSON value valid under the schema (stdout: just the value;\n"
            "                          without -n, generation runs until the value is complete)\n"
            "  --confidence            with --json-schema: the model's distribution at each enum, boolean\n"
            "                          and integer value, as a JSON array on stderr\n"
            "  -v                      verbose: compile/cache details\n");
}

/* Parse a numeric flag value; returns -1 (and prints) when malformed. */
static int parse_num(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno) {
        fprintf(stderr, "%s: %s: '%s' is not a number\n", run_name, flag, s);
        return -1;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "%s: %s: %s is out of range [%g, %g]\n", run_name, flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* prebuilt: a standalone executable's argv, which refuses the flags it
 * cannot honour (--jit/--aot/--archspec: the forward pass is linked in). */
static int parse_args(int argc, char **argv, run_args *a, int prebuilt) {
    memset(a, 0, sizeof *a);
    a->n_predict = 256;
    a->mode = CC_JIT;
    a->sp = samp_params_default();
    a->sp.seed = cli_random_seed();
    a->seed_random = 1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
#define NEED_VAL()                                                               \
    do {                                                                         \
        if (!v) {                                                                \
            fprintf(stderr, "%s: %s needs a value\n", run_name, f);             \
            return -1;                                                           \
        }                                                                        \
        i++;                                                                     \
    } while (0)
#define NUM(lo, hi) do { NEED_VAL(); if (parse_num(f, v, lo, hi, &d)) return -1; } while (0)
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            run_usage(stdout, prebuilt);
            exit(0);
        } else if (prebuilt && (!strcmp(f, "--jit") || !strcmp(f, "--aot") || !strcmp(f, "--archspec") ||
                                !strcmp(f, "--device"))) {
            fprintf(stderr, "%s: %s is not available in a standalone executable (its forward pass is "
                    "compiled in); use cinfer run MODEL %s\n", run_name, f, f);
            return -1;
        } else if (!strcmp(f, "-p") || !strcmp(f, "--prompt")) { NEED_VAL(); a->prompt = v; }
        else if (!strcmp(f, "-f") || !strcmp(f, "--file")) { NEED_VAL(); a->prompt_file = v; }
        else if (!strcmp(f, "--stop")) {
            NEED_VAL();
            if (!*v) {
                fprintf(stderr, "%s: --stop: the stop text is empty\n", run_name);
                return -1;
            }
            if (a->n_stop == RUN_MAX_STOP) {
                fprintf(stderr, "%s: --stop: at most %d stop strings\n", run_name, RUN_MAX_STOP);
                return -1;
            }
            a->stop[a->n_stop++] = v;
        }
        else if (!strcmp(f, "--prompt-ids")) { NEED_VAL(); a->prompt_ids = v; }
        else if (!strcmp(f, "--dump-logits")) { NEED_VAL(); a->dump_logits = v; }
        else if (!strcmp(f, "--archspec")) { NEED_VAL(); a->archspec = v; }
        else if (!strcmp(f, "-n") || !strcmp(f, "--n-predict")) { NUM(0, 1e9); a->n_predict = (int)d; a->n_given = 1; }
        else if (!strcmp(f, "-t") || !strcmp(f, "--threads")) { NUM(0, 1024); a->n_threads = (int)d; }
        else if (!strcmp(f, "-c") || !strcmp(f, "--ctx-size")) { NUM(0, 1 << 24); a->n_ctx = (int)d; }
        else if (!strcmp(f, "--temp")) { NUM(0, 100); a->sp.temp = (float)d; }
        else if (!strcmp(f, "--top-k")) { NUM(0, 1e9); a->sp.top_k = (int)d; }
        else if (!strcmp(f, "--top-p")) { NUM(0, 1); a->sp.top_p = (float)d; }
        else if (!strcmp(f, "--min-p")) { NUM(0, 1); a->sp.min_p = (float)d; }
        else if (!strcmp(f, "--repeat-penalty")) { NUM(0, 100); a->sp.repeat_penalty = (float)d; }
        else if (!strcmp(f, "--repeat-penalty-all")) a->penalty_all = 1;
        else if (!strcmp(f, "--seed")) {
            NEED_VAL();
            if (cli_parse_seed(v, &a->sp.seed, &a->seed_random)) {
                fprintf(stderr, "%s: --seed: '%s' is not a seed (0..18446744073709551615, or -1 = random)\n",
                        run_name, v);
                return -1;
            }
        }
        else if (!strcmp(f, "--mem") && !prebuilt) {
            NEED_VAL();
            if (cli_parse_bytes(run_name, v, &a->mem_bytes)) return -1;
        }
        else if (!strcmp(f, "--stream-weights") && !prebuilt) a->stream_weights = 1;
        else if (!strcmp(f, "--stream-ahead") && !prebuilt) { NUM(1, 64); a->stream_ahead = (int)d; }
        else if (!strcmp(f, "--moe-cache-experts") && !prebuilt) { NUM(1, 1 << 20); a->moe_cache_experts = (int)d; }
        else if (!strcmp(f, "--jit")) a->mode = CC_JIT;
        else if (!strcmp(f, "--aot")) a->mode = CC_AOT;
        else if (!strcmp(f, "--device")) {
            NEED_VAL();
            if (cli_parse_device(run_name, v, &a->device, &a->device_index)) return -1;
        }
        else if (!strcmp(f, "--cache-type-k") || !strcmp(f, "-ctk")) {
            NEED_VAL();
            if (cli_parse_cache_type(run_name, "--cache-type-k", v, &a->cache_type_k)) return -1;
        }
        else if (!strcmp(f, "--cache-type-v") || !strcmp(f, "-ctv")) {
            NEED_VAL();
            if (cli_parse_cache_type(run_name, "--cache-type-v", v, &a->cache_type_v)) return -1;
        }
        else if (!strcmp(f, "--no-bos")) a->no_bos = 1;
        else if (!strcmp(f, "--no-parse-special")) a->no_parse_special = 1;
        else if (!strcmp(f, "--activations")) {
            NEED_VAL();
            if (!strcmp(v, "f32")) a->activations = CINFER_ACT_F32;
            else if (!strcmp(v, "q8")) a->activations = CINFER_ACT_Q8;
            else {
                fprintf(stderr, "%s: --activations '%s': expected f32 or q8\n", run_name, v);
                return -1;
            }
        }
        else if (!strcmp(f, "-v") || !strcmp(f, "--verbose")) a->verbose = 1;
        else if (!strcmp(f, "--quant")) {
            NEED_VAL();
            if ((a->precision = cli_parse_precision(run_name, v)) < 0) return -1;
            a->quant_given = 1;
        } else if (!strcmp(f, "--json-schema")) {
            NEED_VAL();
            a->json_schema = v;
        } else if (!strcmp(f, "--confidence")) a->confidence = 1;
        else if (f[0] == '-' && f[1]) {
            fprintf(stderr, "%s: unknown option '%s' (see %s --help)\n", run_name, f, run_name);
            return -1;
        } else if (!a->model && prebuilt != RUN_BUNDLE) a->model = f;
        else {
            fprintf(stderr, "%s: unexpected argument '%s'\n", run_name, f);
            return -1;
        }
#undef NUM
#undef NEED_VAL
    }
    if (!a->model && prebuilt != RUN_BUNDLE) {
        fprintf(stderr, "%s: no MODEL given\n", run_name);
        run_usage(stderr, prebuilt);
        return -1;
    }
    if (!!a->prompt + !!a->prompt_ids + !!a->prompt_file > 1) {
        fprintf(stderr, "%s: give one of -p, -f and --prompt-ids\n", run_name);
        return -1;
    }
    if (a->stream_ahead && !a->stream_weights) {
        fprintf(stderr, "%s: --stream-ahead sets how far --stream-weights reads ahead; give --stream-weights too\n",
                run_name);
        return -1;
    }
    if (a->confidence && !a->json_schema) {
        fprintf(stderr, "%s: --confidence needs --json-schema (it reports the schema's decisions)\n", run_name);
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
                       int n_vocab, char *err, size_t err_len) {
    FILE *f = fopen(path, "w");
    if (!f) return snprintf(err, err_len, "--dump-logits %s: %s", path, strerror(errno)), -1;
    fprintf(f, "{\"prompt_ids\":[");
    for (int i = 0; i < n_ids; i++) fprintf(f, "%s%d", i ? "," : "", ids[i]);
    fprintf(f, "],\"logits\":[");
    for (int i = 0; i < n_vocab; i++) fprintf(f, "%s%.9g", i ? "," : "", (double)logits[i]);
    fprintf(f, "]}\n");
    if (fclose(f)) return snprintf(err, err_len, "--dump-logits %s: write failed (%s)", path, strerror(errno)), -1;
    return 0;
}

/* Ctrl-C: the first stops the work at the next token or prompt batch (the
 * stats line still prints); SA_RESETHAND makes a second one kill. */
static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

/* Prompt evaluation and repacking progress (cli_progress; a terminal only). */
static int on_progress(void *user, const char *stage, double done, double total) {
    cli_progress *p = user;
    (void)stage;
    p->total = total / p->scale;
    cli_progress_update(p, done);
    if (done >= total) cli_progress_end(p);
    return g_interrupted != 0;
}

/* The prompt text of -f FILE, or of a stdin that is a pipe or a file when no
 * prompt was given: malloc'd into *text (NULL: neither). */
static int read_prompt(const run_args *a, char **text, char *err, size_t err_len) {
    *text = NULL;
    const char *path = a->prompt_file;
    if (!path && !a->prompt && !a->prompt_ids) {
        struct stat st;
        if (isatty(STDIN_FILENO) || fstat(STDIN_FILENO, &st) || !(S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode)))
            return 0;
        path = "-";
    }
    if (!path) return 0;
    size_t len;
    *text = cli_read_all(path, &len);
    if (!*text && errno == EFBIG)
        return snprintf(err, err_len, "%s: more than %d MiB: not a prompt", strcmp(path, "-") ? path : "stdin",
                        CLI_READ_MAX >> 20), -1;
    if (!*text) return snprintf(err, err_len, "%s: %s", strcmp(path, "-") ? path : "stdin", strerror(errno)), -1;
    if (strlen(*text) != len) {
        free(*text);
        *text = NULL;
        return snprintf(err, err_len, "%s: the prompt contains a NUL byte (a binary file?)",
                        strcmp(path, "-") ? path : "stdin"), -1;
    }
    /* as llama.cpp's -f: the file's final newline ends the file, not the prompt */
    if (len && (*text)[len - 1] == '\n') (*text)[--len] = 0;
    if (len && (*text)[len - 1] == '\r') (*text)[--len] = 0;
    return 0;
}

typedef struct {
    double t_first_ms; /* time to the first generated piece, from start */
    double t_start;
    int n_pieces;
} run_stream;

static int print_piece(const char *piece, size_t len, int32_t token, void *user) {
    run_stream *rs = user;
    if (rs->n_pieces++ == 0) rs->t_first_ms = cli_now_ms() - rs->t_start;
    (void)token;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return g_interrupted != 0;
}

/* --json-schema: compile the schema for this model (and --confidence's store). */
static int run_grammar(const run_args *a, cinfer_model *m, cinfer_grammar **g, cinfer_confidence **conf,
                       char *err, size_t err_len) {
    FILE *f = fopen(a->json_schema, "rb");
    if (!f) return snprintf(err, err_len, "%s: %s", a->json_schema, strerror(errno)), -1;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += r) == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    fclose(f);
    if (!buf) return snprintf(err, err_len, "out of memory"), -1;
    int rc = cinfer_grammar_from_schema(m, buf, n, NULL, g, err, err_len);
    free(buf);
    if (rc) return -1;
    if (a->confidence && cinfer_confidence_new(conf)) return snprintf(err, err_len, "out of memory"), -1;
    return 0;
}

/* "prompt of N tokens does not fit the context of C" with what to do about it. */
static void ctx_error(char *err, size_t err_len, size_t n_prompt, int n_predict, int n_ctx, int n_ctx_train) {
    size_t need = n_prompt + (n_predict > 0 ? (size_t)n_predict : 1);
    if ((size_t)n_ctx < need && (size_t)n_ctx_train >= need)
        snprintf(err, err_len, "prompt of %zu tokens does not fit the context of %d: raise it with -c %zu "
                 "(the model was trained for %d), or shorten the prompt", n_prompt, n_ctx, need, n_ctx_train);
    else
        snprintf(err, err_len, "prompt of %zu tokens does not fit the context of %d%s: shorten the prompt%s",
                 n_prompt, n_ctx, n_ctx < n_ctx_train ? "" : " (the model's training context)",
                 n_ctx < n_ctx_train ? " or raise -c" : " (a larger -c degrades quality past the training context)");
}

/* How run_main gets its model: each kind of program passes its own, so a
 * bundle links neither the compiler nor the model-cache code (cli/bundled.c).
 * 0, or -1 with err (err[0] == 0: already said). */
typedef int (*run_open_fn)(run_args *a, const cli_linked *lk, cinfer_model **m, char *err,
                           size_t err_len);

/* REPO[:FILE] names a model pulled with `cinfer pull`; a pickle is refused clearly */
static int open_compiled(run_args *a, const cli_linked *lk, cinfer_model **m, char *err, size_t err_len) {
    (void)lk;
    char cached[4096];
    if (cli_resolve_model("run", &a->model, cached, sizeof cached, CLI_MODEL_RUN)) return err[0] = 0, -1;
    cli_progress prog;
    cli_progress_begin(&prog, "repacking weights", "MiB", 0, 1048576);
    cinfer_model_options mo = {.compile = a->mode == CC_AOT ? CINFER_AOT : CINFER_JIT,
                               .archspec_path = a->archspec, .verbose = a->verbose,
                               .precision = a->precision, .progress = on_progress, .progress_user = &prog,
                               .mem_bytes = a->mem_bytes, .n_ctx = a->n_ctx, .n_threads = a->n_threads,
                               .stream_weights = a->stream_weights, .stream_ahead = a->stream_ahead,
                               .moe_cache_experts = a->moe_cache_experts, .device = a->device,
                               .device_index = a->device_index,
                               .cache_type_k = a->cache_type_k, .cache_type_v = a->cache_type_v};
    char cc_name[256];
    int opened = cinfer_model_open(a->model, &mo, m, err, err_len);
    if (opened && a->mode == CC_AOT && a->device == CINFER_DEVICE_CPU && cc_compiler_missing(cc_name, sizeof cc_name)) {
        /* no cached object and no compiler to build one: the JIT runs the same kernels */
        fprintf(stderr, "%s: --aot needs a C compiler and '%s' is not installed (apt-get install gcc, or set CC); "
                "using the JIT (libtcc) instead\n", run_name, cc_name);
        a->mode = CC_JIT;
        mo.compile = CINFER_JIT;
        opened = cinfer_model_open(a->model, &mo, m, err, err_len);
    }
    cli_progress_end(&prog);
    double repack_ms = 0;
    if (!opened) cinfer_model_repack_stats(*m, NULL, NULL, &repack_ms);
    if (repack_ms > 1000) /* every open repeats it: say how to keep the result */
        fprintf(stderr, "%s: repacking the weights for --quant %s took %.1f s at open; "
                "cinfer compile %s --quant %s -o FILE.giw saves them repacked (a .giw opens in well under a second)\n",
                run_name, cinfer_precision_name(cinfer_model_precision(*m)), repack_ms / 1000, a->model,
                cinfer_precision_name(cinfer_model_precision(*m)));
    if (opened == CINFER_ENOMEM && a->mem_bytes && !a->stream_weights) {
        /* the error line (printed by the caller) has the smallest plan; streaming may still fit */
        size_t n = strlen(err);
        snprintf(err + n, err_len - n, "\n%s: --stream-weights keeps only a window of layers resident; "
                 "cinfer plan %s --mem N --stream-weights says whether that fits", run_name, a->model);
    }
    if (!opened && a->mem_bytes) {
        cli_print_budget(run_name, *m, a->verbose);
        a->n_ctx = 0; /* the context the budget chose */
    }
    return opened;
}

static int open_prebuilt(run_args *a, const cli_linked *lk, cinfer_model **m, char *err, size_t err_len) {
    char cached[4096];
    if (cli_resolve_model(run_name, &a->model, cached, sizeof cached, CLI_MODEL_RUN)) return err[0] = 0, -1;
    return cinfer_model_open_linked(a->model, lk->describe, lk->forward, m, err, err_len);
}

static int open_bundle(run_args *a, const cli_linked *lk, cinfer_model **m, char *err, size_t err_len) {
    (void)a;
    return cinfer_model_open_linked_at(lk->path, lk->offset, lk->n_bytes, lk->describe, lk->forward,
                                       m, err, err_len);
}

static int run_main(int argc, char **argv, const cli_linked *lk, run_open_fn open_model) {
    cinfer_grammar *grammar = NULL;
    cinfer_confidence *conf = NULL;
    run_args a;
    const int kind = !lk ? RUN_CINFER : lk->path ? RUN_BUNDLE : RUN_PREBUILT;
    if (lk) {
        const char *slash = strrchr(argv[0], '/');
        run_name = lk->name ? lk->name : slash ? slash + 1 : argv[0];
    } else run_name = "cinfer run";
    if (parse_args(argc, argv, &a, kind)) return 2;
    char err[1024];
    if (a.verbose) fprintf(stderr, "%s: seed %llu%s\n", run_name, (unsigned long long)a.sp.seed,
                           a.seed_random ? " (random; --seed N repeats this run)" : "");
    int rc = 1;
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    int32_t *ids = NULL;
    char *prompt_text = NULL;
    run_stream rs = {.t_start = cli_now_ms()};
    cli_progress prog = {0};
    struct sigaction sa = {.sa_handler = on_sigint, .sa_flags = SA_RESETHAND}, old_sa;
    g_interrupted = 0;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sa);

    if (read_prompt(&a, &prompt_text, err, sizeof err)) goto fail;
    if (prompt_text) a.prompt = prompt_text;
    err[0] = 0;
    if (open_model(&a, lk, &m, err, sizeof err)) {
        if (!err[0]) goto done; /* already said */
        goto fail;
    }
    if (cli_refuse_encoder(run_name, m, a.model ? a.model : run_name)) goto done;
    double t_open = cli_now_ms() - rs.t_start;
    /* precision 0 is the default, which a standalone executable runs anyway */
    if (lk && a.quant_given && a.precision != 0 && a.precision != cinfer_model_precision(m)) {
        snprintf(err, sizeof err, "--quant %s: this executable runs %s in %s (the file's precision); "
                 "for %s use cinfer run %s --quant %s, or build an executable from a .giw saved as %s",
                 cinfer_precision_name(a.precision), a.model ? a.model : run_name,
                 cinfer_precision_name(cinfer_model_precision(m)), cinfer_precision_name(a.precision),
                 a.model ? a.model : "MODEL", cinfer_precision_name(a.precision), cinfer_precision_name(a.precision));
        goto fail;
    }
    cli_warn_settings(run_name, m, a.n_ctx, a.n_threads);
    cinfer_session_options so = {.n_ctx = a.n_ctx, .n_threads = a.n_threads,
                                 .activations = a.activations, .progress = on_progress,
                                 .progress_user = &prog,
                                 /* a budget's ladder may have chosen smaller types: the model's */
                                 .cache_type_k = a.mem_bytes ? 0 : a.cache_type_k,
                                 .cache_type_v = a.mem_bytes ? 0 : a.cache_type_v};
    if (cinfer_session_new(m, &so, &s, err, sizeof err)) goto fail;
    int n_ctx = cinfer_session_n_ctx(s), n_ctx_train = cinfer_model_n_ctx_train(m);

    /* Prompt → ids. */
    size_t cap = (size_t)n_ctx + 8, n_prompt = 0;
    ids = malloc(cap * sizeof *ids);
    if (!ids) { snprintf(err, sizeof err, "out of memory"); goto fail; }
    if (a.prompt_ids) {
        int n = parse_ids(a.prompt_ids, ids, n_ctx);
        if (n < 0) {
            snprintf(err, sizeof err, "--prompt-ids: expected ids separated by spaces or commas, at most %d (the context)",
                     n_ctx);
            goto fail;
        }
        n_prompt = (size_t)n;
    } else {
        const char *p = a.prompt ? a.prompt : "";
        if (cinfer_tokenize(m, p, strlen(p), !a.no_bos, !a.no_parse_special, ids, cap, &n_prompt)) {
            ctx_error(err, sizeof err, n_prompt, a.n_predict, n_ctx, n_ctx_train);
            goto fail;
        }
        /* a prompt that spells the BOS itself ("<s>...") would get two */
        const int32_t bos = cinfer_token_bos(m);
        if (!a.no_bos && !a.no_parse_special && n_prompt >= 2 && bos >= 0 && ids[0] == bos && ids[1] == bos)
            memmove(ids, ids + 1, --n_prompt * sizeof *ids);
    }
    if (n_prompt == 0) {
        if (a.prompt_ids) snprintf(err, sizeof err, "--prompt-ids: no ids given: nothing to evaluate");
        else if (a.no_bos) snprintf(err, sizeof err, "empty prompt with --no-bos: nothing to evaluate");
        else snprintf(err, sizeof err, "empty prompt and the vocabulary adds no BOS: nothing to evaluate");
        goto fail;
    }
    if (n_prompt + (a.n_predict > 0 ? 1 : 0) > (size_t)n_ctx) {
        ctx_error(err, sizeof err, n_prompt, a.n_predict, n_ctx, n_ctx_train);
        goto fail;
    }
    double t0 = cli_now_ms();
    cli_progress_begin(&prog, "prompt", "tok", (double)n_prompt, 1);
    int erc = cinfer_eval(s, ids, n_prompt, err, sizeof err);
    cli_progress_end(&prog);
    double t_prompt = cli_now_ms() - t0;
    cinfer_gen_result res = {0};
    if (erc == CINFER_ECANCEL) goto interrupted;
    if (erc) goto fail;
    if (a.dump_logits &&
        dump_logits(a.dump_logits, ids, (int)n_prompt, cinfer_logits(s), cinfer_model_n_vocab(m), err, sizeof err))
        goto fail;

    if (a.json_schema && run_grammar(&a, m, &grammar, &conf, err, sizeof err)) goto fail;
    if (a.prompt && !grammar) fputs(a.prompt, stdout);
    int newline_done = 0;
    if (a.n_predict > 0) {
        cinfer_gen_options go = {
            .max_tokens = a.n_predict,
            .temperature = a.sp.temp,
            .top_k = a.sp.top_k,
            .top_p = a.sp.top_p,
            .min_p = a.sp.min_p,
            .repeat_penalty = a.sp.repeat_penalty,
            .repeat_last_n = a.sp.repeat_last_n,
            .repeat_penalty_all = a.penalty_all,
            .seed = a.sp.seed,
            .stop = a.n_stop ? a.stop : NULL,
            .n_stop = a.n_stop,
            .grammar = grammar,
            .confidence = conf,
        };
        if (grammar && !a.n_given) go.max_tokens = 0; /* until the value is complete */
        /* the prompt is already in the cache: only its last token is re-run */
        if (cinfer_generate_tokens(s, ids, n_prompt, &go, print_piece, &rs, &res, err, sizeof err))
            goto fail;
        if (res.stop == CINFER_STOP_CALLBACK) goto interrupted;
        if (grammar && res.stop != CINFER_STOP_GRAMMAR && res.stop != CINFER_STOP_EOS) {
            fputc('\n', stdout);
            snprintf(err, sizeof err, "the JSON value is incomplete (%s)",
                     res.stop == CINFER_STOP_CTX_FULL ? "context full: raise -c" : "token limit reached: raise -n");
            goto fail;
        }
        if (res.stop == CINFER_STOP_CTX_FULL && !grammar) {
            fputc('\n', stdout);
            fflush(stdout);
            fprintf(stderr, "%s: context full at %d tokens (-c %d); stopped after %d generated tokens\n",
                    run_name, n_ctx, n_ctx, res.n_generated);
            newline_done = 1;
        }
        if (conf) {
            fputc('\n', stdout);
            fflush(stdout);
            char *cj = cinfer_confidence_json(conf);
            if (cj) fprintf(stderr, "%s\n", cj);
            free(cj);
        }
    }
    if (!newline_done && ((a.n_predict > 0 && !conf) || (a.prompt && !grammar))) fputc('\n', stdout);
    rc = 0;
    goto stats;
interrupted:
    fputc('\n', stdout);
    fflush(stdout);
    fprintf(stderr, "%s: interrupted (Ctrl-C)%s\n", run_name,
            erc == CINFER_ECANCEL ? " during the prompt evaluation" : "");
    rc = 130;
stats:
    fflush(stdout);
    fprintf(stderr,
            "cinfer: open %.1f ms (%s %.1f ms%s) | prompt %zu tok %.1f tok/s | "
            "gen %d tok %.1f tok/s | first token %.1f ms | %d threads, %s, %s | peak RSS %.1f MiB\n",
            t_open, lk ? "linked" : a.mode == CC_AOT ? "aot" : "jit",
            cinfer_model_compile_ms(m), lk ? "" : cinfer_model_compile_ms(m) == 0 && a.mode == CC_AOT ? ", cached" : "",
            n_prompt, t_prompt > 0 && erc == 0 ? n_prompt * 1e3 / t_prompt : 0.0, res.n_generated,
            res.gen_ms > 0 ? res.n_generated * 1e3 / res.gen_ms : 0.0, rs.t_first_ms,
            a.n_threads > 0 ? a.n_threads : pool_default_threads(), kern_cpu_label(),
            cinfer_precision_name(cinfer_model_precision(m)), (cli_peak_rss_bytes() / 1048576.0));
    cli_print_stream_stats("cinfer", m);
    goto done;
fail:
    fprintf(stderr, "%s: %s\n", run_name, err);
done:
    sigaction(SIGINT, &old_sa, NULL);
    free(ids);
    free(prompt_text);
    cinfer_grammar_free(grammar);
    cinfer_confidence_free(conf);
    cinfer_session_free(s);
    cinfer_model_close(m);
    return rc;
}

int cli_run(int argc, char **argv) { return run_main(argc, argv, NULL, open_compiled); }

int cli_run_prebuilt(int argc, char **argv, const struct cf_model_desc *(*describe)(void),
                     void (*forward)(struct cf_env *)) {
    /* argv[0] is the program; the model comes first like `cinfer run MODEL`. */
    cli_linked lk = {.describe = describe, .forward = forward};
    return run_main(argc, argv, &lk, open_prebuilt);
}

int cli_run_bundle(int argc, char **argv, const cli_linked *lk) {
    return run_main(argc, argv, lk, open_bundle);
}
