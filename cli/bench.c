/*
 * bench.c — `cinfer bench MODEL`: prompt-processing (pp) and generation (tg)
 * speed, measured like llama.cpp's llama-bench so the numbers compare with
 * llama-bench and ../shared/tools/peer-bench.mjs on the same file:
 *
 *   pp  one cinfer_eval of p tokens (BOS + pseudo-random ids from a fixed
 *       seed) into an emptied session, then a greedy argmax of the logits.
 *   tg  n sequential one-token evaluations starting from BOS at position 0
 *       of an emptied session, each followed by a greedy argmax whose token
 *       is fed to the next evaluation.
 *   -d D  both tests on top of D tokens already in the KV cache (llama-bench
 *       -d / --n-depth): BOS + pseudo-random ids, evaluated untimed once per
 *       depth; before each repetition the history is cut back to those D
 *       tokens (llama-bench restores a saved state instead), so pp512 @ d4096
 *       is a 512-token prompt at positions 4096..4607.
 *
 * One untimed warm-up (a pp run and a one-token tg run, which also faults in
 * every weight page), then r timed repetitions of each test; t/s per
 * repetition = tokens / seconds, reported as the mean and the sample standard
 * deviation (n - 1) of those, as llama-bench does.  Load (map, tokenizer,
 * compile) is timed separately and reported with the compile time, the peak
 * resident set (VmHWM) and the weight bytes one decoded token reads.
 *
 * Only the public API (include/cinfer.h) runs the model; the GGUF header is
 * read once through runtime/formats/gguf.h for the size and parameter columns.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "cinfer.h"
#include "cli.h"
#include "formats/gguf.h"
#include "formats/modelfile.h"
#include "kernels/kern.h"
#include "base/pool.h"

#define BENCH_MAX_DEPTHS 16

typedef struct {
    const char *model;
    int n_prompt, n_gen, n_threads, reps;
    int n_depth[BENCH_MAX_DEPTHS], n_depths; /* -d: tokens in the KV cache before each test */
    cinfer_compile_mode mode;
    int activations; /* CINFER_ACT_* */
    int precision;   /* CINFER_PRECISION_* (--quant) */
    int device, device_index; /* --device */
    uint64_t mem_bytes; /* --mem (0: none) */
    int cache_type_k, cache_type_v; /* --cache-type-k/-v (CINFER_KV_*; 0: default) */
    int json, verbose;
    unsigned long long seed;
    double bw_gbs; /* memory bandwidth for the decode bound; 0: not given */
} bench_args;

typedef struct {
    uint64_t n_params, size_bytes;
    uint64_t decode_bytes; /* weights one generated token reads */
    uint32_t n_ctx_train;  /* <arch>.context_length; 0: not in the file */
    char type[64];         /* "llama 336M Q4_0" */
} model_info;

typedef struct {
    const char *name; /* "pp512" */
    int n_prompt, n_gen, n_depth;
    double *ns;       /* (reps) */
    double avg_ts, stddev_ts, avg_ns, stddev_ns;
} bench_test;

static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: cinfer bench MODEL [options]\n"
            "  -p N          prompt tokens of the pp test (default 512; 0 skips it)\n"
            "  -n N          generated tokens of the tg test (default 128; 0 skips it)\n"
            "  -t N          threads (default: physical cores)\n"
            "  -r N          timed repetitions after one warm-up (default 3)\n"
            "  -d N[,N...]   depth: run each test on top of N tokens already in the KV cache\n"
            "                (llama-bench -d; default 0); the context is N + max(-p, -n)\n"
            "  --jit | --aot compile with libtcc (default) or cc -O3 (cached)\n"
            "  --activations f32|q8  matmul activations (default: the library's, q8)\n"
            "  --quant P               compute precision: " CLI_QUANT_HELP
            CLI_DEVICE_HELP
            "  --cache-type-k T, --cache-type-v T   KV cache types: f16 (default), f32, q8_0, q4_0\n"
            "  --mem BYTES   memory budget (480M, 2G) for a context of max(-p, -n): the ladder's\n"
            "                steps on stderr (docs/memory.md)\n"
            "  --json        JSON array with llama-bench's field names instead of the table\n"
            "  --bw GB/S     memory read bandwidth: also report the decode bound\n"
            "                (bandwidth / weight bytes per token) and the fraction reached\n"
            "  --seed N      seed of the pseudo-random prompt ids (default 42)\n"
            "  -v            progress on stderr\n");
}

static int parse_int(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "cinfer bench: %s: '%s' is not an integer in [%ld, %ld]\n", flag, s ? s : "",
                lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* -d 0,4096,16384 (llama-bench's comma list; -d may also repeat) */
static int parse_depths(const char *flag, const char *v, bench_args *a) {
    char buf[256];
    if (!v || strlen(v) >= sizeof buf) {
        fprintf(stderr, "cinfer bench: %s: expected a depth or a comma list of depths\n", flag);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", v);
    for (char *tok = buf, *next; tok; tok = next) {
        next = strchr(tok, ',');
        if (next) *next++ = 0;
        long x;
        if (parse_int(flag, tok, 0, 1 << 20, &x)) return -1;
        if (a->n_depths == BENCH_MAX_DEPTHS) {
            fprintf(stderr, "cinfer bench: %s: more than %d depths\n", flag, BENCH_MAX_DEPTHS);
            return -1;
        }
        a->n_depth[a->n_depths++] = (int)x;
    }
    return 0;
}

static int parse_args(int argc, char **argv, bench_args *a) {
    *a = (bench_args){.n_prompt = 512, .n_gen = 128, .reps = 3, .mode = CINFER_JIT, .seed = 42};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) return 1;
        else if (!strcmp(f, "-p")) { if (parse_int(f, v, 0, 1 << 20, &x)) return -1; a->n_prompt = (int)x; i++; }
        else if (!strcmp(f, "-n")) { if (parse_int(f, v, 0, 1 << 20, &x)) return -1; a->n_gen = (int)x; i++; }
        else if (!strcmp(f, "-t")) { if (parse_int(f, v, 0, 1024, &x)) return -1; a->n_threads = (int)x; i++; }
        else if (!strcmp(f, "-r")) { if (parse_int(f, v, 1, 1000, &x)) return -1; a->reps = (int)x; i++; }
        else if (!strcmp(f, "-d") || !strcmp(f, "--n-depth")) {
            if (parse_depths(f, v, a)) return -1;
            i++;
        }
        else if (!strcmp(f, "--seed")) { if (parse_int(f, v, 0, 0x7fffffffL, &x)) return -1; a->seed = (unsigned long long)x; i++; }
        else if (!strcmp(f, "--bw")) {
            char *end;
            double d = v ? strtod(v, &end) : 0;
            if (!v || !*v || *end || !(d > 0 && d < 1e6)) {
                fprintf(stderr, "cinfer bench: --bw: '%s' is not a bandwidth in GB/s\n", v ? v : "");
                return -1;
            }
            a->bw_gbs = d;
            i++;
        } else if (!strcmp(f, "--activations")) {
            if (v && !strcmp(v, "f32")) a->activations = CINFER_ACT_F32;
            else if (v && !strcmp(v, "q8")) a->activations = CINFER_ACT_Q8;
            else {
                fprintf(stderr, "cinfer bench: --activations takes f32 or q8\n");
                return -1;
            }
            i++;
        } else if (!strcmp(f, "--quant")) {
            if ((a->precision = cli_parse_precision("cinfer bench", v)) < 0) return -1;
            i++;
        } else if (!strcmp(f, "--device")) {
            if (cli_parse_device("cinfer bench", v, &a->device, &a->device_index)) return -1;
            i++;
        } else if (!strcmp(f, "--cache-type-k") || !strcmp(f, "-ctk")) {
            if (cli_parse_cache_type("cinfer bench", "--cache-type-k", v, &a->cache_type_k)) return -1;
            i++;
        } else if (!strcmp(f, "--cache-type-v") || !strcmp(f, "-ctv")) {
            if (cli_parse_cache_type("cinfer bench", "--cache-type-v", v, &a->cache_type_v)) return -1;
            i++;
        } else if (!strcmp(f, "--mem")) {
            if (cli_parse_bytes("cinfer bench", v, &a->mem_bytes)) return -1;
            i++;
        } else if (!strcmp(f, "--jit")) a->mode = CINFER_JIT;
        else if (!strcmp(f, "--aot")) a->mode = CINFER_AOT;
        else if (!strcmp(f, "--json")) a->json = 1;
        else if (!strcmp(f, "-o")) { /* llama-bench's -o json|md */
            if (!v || (strcmp(v, "json") && strcmp(v, "md"))) {
                fprintf(stderr, "cinfer bench: -o takes json or md\n");
                return -1;
            }
            a->json = !strcmp(v, "json");
            i++;
        }
        else if (!strcmp(f, "-v") || !strcmp(f, "--verbose")) a->verbose = 1;
        else if (f[0] == '-' && f[1]) {
            fprintf(stderr, "cinfer bench: unknown option '%s' (see cinfer bench --help)\n", f);
            return -1;
        } else if (!a->model) a->model = f;
        else {
            fprintf(stderr, "cinfer bench: unexpected argument '%s'\n", f);
            return -1;
        }
    }
    if (!a->model) {
        bench_usage(stderr);
        return -1;
    }
    if (!a->n_prompt && !a->n_gen) {
        fprintf(stderr, "cinfer bench: -p 0 and -n 0: nothing to measure\n");
        return -1;
    }
    if (!a->n_depths) a->n_depth[a->n_depths++] = 0;
    return 0;
}

/* Size and parameter count from the GGUF header, like llama-bench's columns. */
static int read_model_info(const char *path, model_info *mi, char *err, size_t err_len) {
    gguf_file *g;
    if (modelfile_open(path, &g, err, err_len)) return -1;
    memset(mi, 0, sizeof *mi);
    int has_output = gguf_find_tensor(g, "output.weight") != NULL;
    gguf_str arch = {0};
    gguf_get_str(g, "general.architecture", &arch, NULL, 0);
    /* mixtures of experts: a token reads only its expert_used_count of the
     * expert_count matrices of each expert tensor (and bias) */
    char key[128];
    uint32_t n_expert = 0, n_used = 0;
    snprintf(key, sizeof key, "%.*s.expert_count", (int)(arch.len < 64 ? arch.len : 64), arch.ptr);
    gguf_get_u32(g, key, &n_expert, NULL, 0);
    snprintf(key, sizeof key, "%.*s.expert_used_count", (int)(arch.len < 64 ? arch.len : 64), arch.ptr);
    gguf_get_u32(g, key, &n_used, NULL, 0);
    snprintf(key, sizeof key, "%.*s.context_length", (int)(arch.len < 64 ? arch.len : 64), arch.ptr);
    gguf_get_u32(g, key, &mi->n_ctx_train, NULL, 0);
    for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        mi->n_params += t->n_elems;
        mi->size_bytes += t->n_bytes;
        /* a token reads one row of the embedding table, unless the table is
         * also the output projection (tied embeddings) */
        if (n_expert > 0 && n_used <= n_expert && strstr(t->name, "_exps."))
            mi->decode_bytes += t->n_bytes / n_expert * n_used;
        else if (strcmp(t->name, "token_embd.weight") || !has_output) mi->decode_bytes += t->n_bytes;
        else mi->decode_bytes += t->n_bytes / (uint64_t)(t->n_elems / (uint64_t)t->ne[0]);
    }
    uint32_t ftype;
    const char *fname = NULL;
    if (!gguf_get_u32(g, "general.file_type", &ftype, NULL, 0)) {
        fname = gguf_file_type_name(ftype);
        if (!strncmp(fname, "MOSTLY_", 7)) fname += 7;
        else if (!strncmp(fname, "ALL_", 4)) fname += 4;
    } else { /* no general.file_type: the type holding the most bytes */
        uint64_t by_type[GGML_TYPE_COUNT] = {0};
        uint32_t best = 0;
        for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
            const gguf_tensor *t = gguf_tensor_at(g, i);
            by_type[t->type] += t->n_bytes;
            if (by_type[t->type] > by_type[best]) best = t->type;
        }
        fname = ggml_type_name(best);
    }
    double np = (double)mi->n_params;
    char size[16];
    if (np >= 1e9) snprintf(size, sizeof size, "%.1fB", np / 1e9);
    else if (np >= 1e6) snprintf(size, sizeof size, "%.0fM", np / 1e6);
    else snprintf(size, sizeof size, "%.0fK", np / 1e3);
    snprintf(mi->type, sizeof mi->type, "%.*s %s %s", (int)(arch.len < 24 ? arch.len : 24),
             arch.ptr ? arch.ptr : "?", size, fname);
    gguf_close(g);
    return 0;
}

static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && c) {
            c++;
            while (*c == ' ') c++;
            c[strcspn(c, "\n")] = 0;
            snprintf(buf, cap, "%s", c);
            break;
        }
    }
    fclose(f);
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Untimed: the history becomes seq[0..depth) (the depth tokens), nothing
 * after them.  The first call at a depth evaluates them (reusing any cached
 * prefix, such as a smaller depth's); later calls only cut the history back:
 * a history equal to the cached prefix keeps it (re-evaluating its last
 * token for the logits, or for recurrent models restoring the state saved at
 * its end).  Returns 0 or -1 with err. */
static int set_depth(cinfer_session *s, const int32_t *seq, int depth, char *err, size_t err_len) {
    if (!depth) {
        cinfer_session_reset(s);
        return 0;
    }
    return cinfer_eval(s, seq, (size_t)depth, err, err_len) ? -1 : 0;
}

/* One pp run: n prompt tokens, seq[depth..depth+n), on top of the depth
 * tokens seq[0..depth) (none: an emptied session).  Returns ns or -1. */
static double run_pp(cinfer_session *s, const int32_t *seq, int depth, int n, int n_vocab, char *err,
                     size_t err_len) {
    if (set_depth(s, seq, depth, err, err_len)) return -1;
    double t0 = (cli_now_ms() * 1e6);
    if (cinfer_eval(s, seq, (size_t)depth + (size_t)n, err, err_len)) return -1;
    volatile int tok = argmax(cinfer_logits(s), n_vocab);
    (void)tok;
    return (cli_now_ms() * 1e6) - t0;
}

/* One tg run: n single-token evaluations from first (BOS) at position depth,
 * greedy, on top of the depth tokens seq[0..depth); seq has depth + n slots. */
static double run_tg(cinfer_session *s, int32_t *seq, int depth, int n, int32_t first, int n_vocab,
                     char *err, size_t err_len) {
    if (set_depth(s, seq, depth, err, err_len)) return -1;
    int32_t *hist = seq + depth;
    hist[0] = first;
    double t0 = (cli_now_ms() * 1e6);
    for (int i = 0; i < n; i++) {
        /* the history API keeps the cached prefix: only hist[i] is evaluated */
        if (cinfer_eval(s, seq, (size_t)depth + (size_t)i + 1, err, err_len)) return -1;
        int tok = argmax(cinfer_logits(s), n_vocab);
        if (i + 1 < n) hist[i + 1] = tok;
    }
    return (cli_now_ms() * 1e6) - t0;
}

static void summarize(bench_test *t, int reps) {
    int n_tok = t->n_prompt ? t->n_prompt : t->n_gen;
    double s_ts = 0, s_ns = 0;
    for (int i = 0; i < reps; i++) {
        s_ts += n_tok / (t->ns[i] * 1e-9);
        s_ns += t->ns[i];
    }
    t->avg_ts = s_ts / reps;
    t->avg_ns = s_ns / reps;
    double v_ts = 0, v_ns = 0;
    for (int i = 0; i < reps; i++) {
        double d = n_tok / (t->ns[i] * 1e-9) - t->avg_ts, e = t->ns[i] - t->avg_ns;
        v_ts += d * d;
        v_ns += e * e;
    }
    t->stddev_ts = reps > 1 ? sqrt(v_ts / (reps - 1)) : 0;
    t->stddev_ns = reps > 1 ? sqrt(v_ns / (reps - 1)) : 0;
}

int cli_bench(int argc, char **argv) {
    bench_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc > 0) {
        bench_usage(stdout);
        return 0;
    }
    if (prc < 0) return 2;

    char err[1024], cached[4096];
    if (cli_resolve_model("bench", &a.model, cached, sizeof cached, CLI_MODEL_RUN)) return 1;
    model_info mi;
    if (read_model_info(a.model, &mi, err, sizeof err)) {
        fprintf(stderr, "cinfer bench: %s\n", err);
        return 1;
    }
    int max_depth = 0;
    for (int k = 0; k < a.n_depths; k++)
        if (a.n_depth[k] > max_depth) max_depth = a.n_depth[k];
    const int n_test_max = a.n_prompt > a.n_gen ? a.n_prompt : a.n_gen;
    /* depth: the file's context must hold it (a model past its trained
     * positions is not what anyone runs at that depth) */
    if (max_depth > 0 && mi.n_ctx_train > 0 && (uint64_t)max_depth + (uint64_t)n_test_max > mi.n_ctx_train) {
        fprintf(stderr, "cinfer bench: -d %d + %s %d = %d positions exceed the model's context of %u tokens "
                "(context_length in %s)\n", max_depth, a.n_prompt >= a.n_gen ? "-p" : "-n", n_test_max,
                max_depth + n_test_max, (unsigned)mi.n_ctx_train, a.model);
        return 1;
    }
    const int n_threads = a.n_threads > 0 ? a.n_threads : pool_default_threads();
    const char *isa = kern_cpu_label();
    time_t start = time(NULL);

    if (a.verbose) fprintf(stderr, "cinfer bench: loading %s\n", a.model);
    double t0 = (cli_now_ms() * 1e6);
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    int32_t *ids = NULL, *seq = NULL, *depth_ids = NULL;
    double *samples = NULL;
    int rc = 1;
    const int n_ctx = max_depth + n_test_max;
    if (cinfer_model_open(a.model, &(cinfer_model_options){.compile = a.mode, .precision = a.precision,
                                                          .mem_bytes = a.mem_bytes, .n_ctx = n_ctx,
                                                          .n_threads = n_threads, .device = a.device,
                                                          .device_index = a.device_index,
                                                          .cache_type_k = a.cache_type_k,
                                                          .cache_type_v = a.cache_type_v}, &m, err, sizeof err)) {
        fprintf(stderr, "cinfer bench: %s\n", err);
        return 1;
    }
    if (cli_refuse_encoder("cinfer bench", m, a.model)) {
        cinfer_model_close(m);
        return 1;
    }
    if (a.mem_bytes) cli_print_budget("cinfer bench", m, 0);
    const double load_ms = ((cli_now_ms() * 1e6) - t0) * 1e-6, compile_ms = cinfer_model_compile_ms(m);
    cli_warn_settings("cinfer bench", m, 0, a.n_threads); /* numbers taken with too many threads mislead */
    const int n_vocab = cinfer_model_n_vocab(m);
    if (cinfer_session_new(m, &(cinfer_session_options){.n_ctx = n_ctx, .n_threads = n_threads,
                                                      .activations = a.activations}, &s,
                           err, sizeof err)) {
        fprintf(stderr, "cinfer bench: %s\n", err);
        goto out;
    }

    /* prompt: BOS, then ids from a fixed-seed xorshift64* (llama-bench: rand() % n_vocab) */
    ids = malloc(((size_t)a.n_prompt + 1) * sizeof *ids);
    depth_ids = malloc(((size_t)max_depth + 1) * sizeof *depth_ids);
    seq = malloc(((size_t)n_ctx + 1) * sizeof *seq); /* (depth + test tokens) */
    samples = calloc(2 * (size_t)a.n_depths * (size_t)a.reps, sizeof *samples);
    if (!ids || !depth_ids || !seq || !samples) {
        fprintf(stderr, "cinfer bench: out of memory\n");
        goto out;
    }
    const int32_t bos = cinfer_token_bos(m) >= 0 ? cinfer_token_bos(m) : 0;
    unsigned long long x = a.seed * 0x9e3779b97f4a7c15ULL + 1;
    for (int i = 0; i < a.n_prompt; i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        ids[i] = i == 0 ? bos : (int32_t)((x * 0x2545f4914f6cdd1dULL >> 33) % (unsigned)n_vocab);
    }
    /* the depth tokens: the same generator, continued (llama-bench: BOS + rand()) */
    for (int i = 0; i < max_depth; i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        depth_ids[i] = i == 0 ? bos : (int32_t)((x * 0x2545f4914f6cdd1dULL >> 33) % (unsigned)n_vocab);
    }

    bench_test tests[2 * BENCH_MAX_DEPTHS];
    int n_tests = 0;
    for (int k = 0; k < a.n_depths; k++) {
        if (a.n_prompt)
            tests[n_tests] = (bench_test){.n_prompt = a.n_prompt, .n_depth = a.n_depth[k],
                                          .ns = samples + (size_t)n_tests * a.reps}, n_tests++;
        if (a.n_gen)
            tests[n_tests] = (bench_test){.n_gen = a.n_gen, .n_depth = a.n_depth[k],
                                          .ns = samples + (size_t)n_tests * a.reps}, n_tests++;
    }

    /* warm-up, untimed, at depth 0 as llama-bench: faults in the weights, spins up the pool */
    if (a.verbose) fprintf(stderr, "cinfer bench: warm-up\n");
    memcpy(seq, ids, (size_t)a.n_prompt * sizeof *ids);
    if ((a.n_prompt && run_pp(s, seq, 0, a.n_prompt, n_vocab, err, sizeof err) < 0) ||
        (a.n_gen && run_tg(s, seq, 0, 1, bos, n_vocab, err, sizeof err) < 0)) {
        fprintf(stderr, "cinfer bench: %s\n", err);
        goto out;
    }
    char names[2 * BENCH_MAX_DEPTHS][48];
    for (int k = 0; k < n_tests; k++) {
        bench_test *t = &tests[k];
        int n_tok = t->n_prompt ? t->n_prompt : t->n_gen;
        if (t->n_depth) snprintf(names[k], sizeof names[k], "%s%d @ d%d", t->n_prompt ? "pp" : "tg", n_tok, t->n_depth);
        else snprintf(names[k], sizeof names[k], "%s%d", t->n_prompt ? "pp" : "tg", n_tok);
        t->name = names[k];
        memcpy(seq, depth_ids, (size_t)t->n_depth * sizeof *seq);
        if (t->n_depth && a.verbose) fprintf(stderr, "cinfer bench: %s: filling %d tokens\n", t->name, t->n_depth);
        if (set_depth(s, seq, t->n_depth, err, sizeof err)) { /* untimed: the first fill of this depth */
            fprintf(stderr, "cinfer bench: %s\n", err);
            goto out;
        }
        for (int r = 0; r < a.reps; r++) {
            if (t->n_prompt) memcpy(seq + t->n_depth, ids, (size_t)t->n_prompt * sizeof *ids);
            t->ns[r] = t->n_prompt ? run_pp(s, seq, t->n_depth, t->n_prompt, n_vocab, err, sizeof err)
                                   : run_tg(s, seq, t->n_depth, t->n_gen, bos, n_vocab, err, sizeof err);
            if (t->ns[r] < 0) {
                fprintf(stderr, "cinfer bench: %s\n", err);
                goto out;
            }
            if (a.verbose)
                fprintf(stderr, "cinfer bench: %s rep %d: %.2f t/s\n", t->name, r + 1,
                        (t->n_prompt + t->n_gen) / (t->ns[r] * 1e-9));
        }
        summarize(t, a.reps);
    }
    const uint64_t rss = cli_peak_rss_bytes();
    const double bound_ts = a.bw_gbs > 0 ? a.bw_gbs * 1e9 / (double)mi.decode_bytes : 0;
    const char *mode = a.mode == CINFER_AOT ? "aot" : "jit";
    const char *act = a.activations == CINFER_ACT_F32 ? "f32" : a.activations == CINFER_ACT_Q8 ? "q8" : "default";
    const char *prec = cinfer_precision_name(cinfer_model_precision(m));
    size_t repacked_bytes = 0;
    double repack_ms = 0;
    cinfer_model_repack_stats(m, NULL, &repacked_bytes, &repack_ms);
    char wtypes[256];
    cinfer_model_weight_types(m, wtypes, sizeof wtypes);

    if (a.json) {
        char cpu[256], when[32];
        cpu_model(cpu, sizeof cpu);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&start));
        cJSON *arr = cJSON_CreateArray();
        for (int k = 0; k < n_tests; k++) {
            bench_test *t = &tests[k];
            int n_tok = t->n_prompt + t->n_gen;
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "engine", "cinfer " CINFER_VERSION);
            cJSON_AddStringToObject(o, "build_commit", CINFER_VERSION);
            cJSON_AddStringToObject(o, "cpu_info", cpu);
            cJSON_AddStringToObject(o, "backends", a.device == CINFER_DEVICE_CUDA ? "CUDA" : "CPU");
            cJSON_AddStringToObject(o, "device", cinfer_model_device(m));
            cJSON_AddStringToObject(o, "isa", isa);
            cJSON_AddStringToObject(o, "compile", mode);
            cJSON_AddStringToObject(o, "activations", act);
            cJSON_AddStringToObject(o, "precision", prec);
            cJSON_AddStringToObject(o, "weight_types", wtypes);
            cJSON_AddStringToObject(o, "model_filename", a.model);
            cJSON_AddStringToObject(o, "model_type", mi.type);
            cJSON_AddNumberToObject(o, "model_size", (double)mi.size_bytes);
            cJSON_AddNumberToObject(o, "model_n_params", (double)mi.n_params);
            cJSON_AddNumberToObject(o, "n_threads", n_threads);
            cJSON_AddNumberToObject(o, "n_ctx", n_ctx);
            cJSON_AddNumberToObject(o, "n_prompt", t->n_prompt);
            cJSON_AddNumberToObject(o, "n_gen", t->n_gen);
            cJSON_AddNumberToObject(o, "n_depth", t->n_depth);
            cJSON_AddStringToObject(o, "test_time", when);
            cJSON_AddNumberToObject(o, "avg_ns", round(t->avg_ns));
            cJSON_AddNumberToObject(o, "stddev_ns", round(t->stddev_ns));
            cJSON_AddNumberToObject(o, "avg_ts", t->avg_ts);
            cJSON_AddNumberToObject(o, "stddev_ts", t->stddev_ts);
            cJSON *sn = cJSON_AddArrayToObject(o, "samples_ns");
            cJSON *st = cJSON_AddArrayToObject(o, "samples_ts");
            for (int r = 0; r < a.reps; r++) {
                cJSON_AddItemToArray(sn, cJSON_CreateNumber(round(t->ns[r])));
                cJSON_AddItemToArray(st, cJSON_CreateNumber(n_tok / (t->ns[r] * 1e-9)));
            }
            cJSON_AddNumberToObject(o, "load_ms", load_ms);
            cJSON_AddNumberToObject(o, "compile_ms", compile_ms);
            cJSON_AddNumberToObject(o, "peak_rss_bytes", (double)rss);
            cJSON_AddNumberToObject(o, "repacked_bytes", (double)repacked_bytes);
            cJSON_AddNumberToObject(o, "repack_ms", repack_ms);
            cJSON_AddNumberToObject(o, "decode_bytes_per_token", (double)mi.decode_bytes);
            if (bound_ts > 0 && t->n_gen && !t->n_depth) { /* at depth the KV cache is read too */
                cJSON_AddNumberToObject(o, "membw_gbs", a.bw_gbs);
                cJSON_AddNumberToObject(o, "bound_ts", bound_ts);
                cJSON_AddNumberToObject(o, "bound_fraction", t->avg_ts / bound_ts);
            }
            cJSON_AddItemToArray(arr, o);
        }
        char *js = cJSON_Print(arr);
        cJSON_Delete(arr);
        if (!js) {
            fprintf(stderr, "cinfer bench: out of memory\n");
            goto out;
        }
        printf("%s\n", js);
        cJSON_free(js);
    } else {
        const char *base = strrchr(a.model, '/') ? strrchr(a.model, '/') + 1 : a.model;
        char backend[32];
        if (a.device == CINFER_DEVICE_CUDA) snprintf(backend, sizeof backend, "cuda:%d", a.device_index);
        else snprintf(backend, sizeof backend, "cpu/%s", isa);
        const int bw = (int)strlen(backend) > 8 ? (int)strlen(backend) : 8;
        const int tw = max_depth ? 16 : 8; /* "pp512 @ d16384" */
        printf("| %-30s | %-22s | %10s | %10s | %-*s | %7s | %*s | %20s |\n", "model file", "model",
               "size", "params", bw, "backend", "threads", tw, "test", "t/s");
        printf("| %.30s | %.22s | ---------: | ---------: | %.*s | ------: | %.*s: | "
               "-------------------: |\n",
               "------------------------------", "----------------------", bw,
               "--------------------------------", tw - 1, "----------------");
        for (int k = 0; k < n_tests; k++) {
            char sz[24], np[24], ts[32];
            snprintf(sz, sizeof sz, "%.2f MiB", mi.size_bytes / 1048576.0);
            snprintf(np, sizeof np, "%.2f M", mi.n_params / 1e6);
            snprintf(ts, sizeof ts, "%.2f ± %.2f", tests[k].avg_ts, tests[k].stddev_ts);
            printf("| %-30.30s | %-22.22s | %10s | %10s | %-*s | %7d | %*s | %20s |\n", base, mi.type,
                   sz, np, bw, backend, n_threads, tw, tests[k].name, ts);
        }
        printf("\nload %.1f ms (%s compile %.1f ms%s), precision %s: %s (repacked %.1f MiB in %.1f ms), "
               "%s activations, peak RSS %.1f MiB, "
               "%d repetitions; a decoded token reads %.1f MiB of weights (file types)",
               load_ms, a.device == CINFER_DEVICE_CUDA ? "NVRTC" : a.mode == CINFER_AOT ? "AOT" : "JIT", compile_ms,
               (a.mode == CINFER_AOT || a.device == CINFER_DEVICE_CUDA) && compile_ms == 0 ? ", cached" : "", prec,
               wtypes, repacked_bytes / 1048576.0, repack_ms, act, rss / 1048576.0,
               a.reps, mi.decode_bytes / 1048576.0);
        if (bound_ts > 0) printf("; at %.1f GB/s decode is bounded by %.1f t/s", a.bw_gbs, bound_ts);
        if (a.device == CINFER_DEVICE_CUDA) printf("; device %s", cinfer_model_device(m));
        printf("\n");
        for (int k = 0; k < n_tests; k++)
            if (bound_ts > 0 && tests[k].n_gen && !tests[k].n_depth)
                printf("tg%d reaches %.0f%% of the memory-bandwidth bound\n", a.n_gen,
                       100.0 * tests[k].avg_ts / bound_ts);
    }
    rc = 0;
out:
    free(samples);
    free(seq);
    free(depth_ids);
    free(ids);
    cinfer_session_free(s);
    cinfer_model_close(m);
    return rc;
}
