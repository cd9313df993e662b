/*
 * cli.h — the `cinfer` subcommands (design notes §3: ../shared/DESIGN.md,
 * outside this repo).  Each takes the argv that follows the subcommand name
 * (argv[0] is the subcommand), prints to stdout/stderr and returns the process exit status.  They are linked into the
 * test runner too, so tests can call them in-process under the sanitizers.
 */
#ifndef CINFER_CLI_H
#define CINFER_CLI_H

#include <stddef.h>
#include <stdint.h>

int cli_inspect(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_compile(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_pull(int argc, char **argv);
int cli_list(int argc, char **argv);
int cli_rm(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_quantize(int argc, char **argv);
int cli_schema_check(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_embed(int argc, char **argv);
int cli_plan(int argc, char **argv);

/* Programs with the forward pass linked in instead of compiled at start-up:
 * a standalone executable (`cinfer compile --aot -o PROG`, PROG MODEL) has
 * path NULL; a bundle (`cinfer bundle`, cli/bundled.c) names its own file
 * and the page-aligned GGUF image inside it. */
struct cf_model_desc;
struct cf_env;
typedef struct cli_linked {
    const struct cf_model_desc *(*describe)(void);
    void (*forward)(struct cf_env *);
    const char *path;  /* bundle: the program's file; NULL: MODEL comes from argv */
    uint64_t offset;   /* bundle: the payload's file offset (page-aligned) */
    uint64_t n_bytes;  /* bundle: its size */
    const char *name;  /* prefix of messages; NULL: basename of argv[0] */
} cli_linked;

/* `cinfer run` for a bundle: no MODEL argument; -p TEXT, -f FILE, or a prompt
 * piped to standard input.  Links neither the compiler nor the model cache. */
int cli_run_bundle(int argc, char **argv, const cli_linked *lk);
/* `cinfer chat` for a bundle (no MODEL argument). */
int cli_chat_bundle(int argc, char **argv, const cli_linked *lk);
/* `cinfer serve` for a bundle: the one model inside, no --model. */
int cli_serve_bundle(int argc, char **argv, const cli_linked *lk);
/* `cinfer bundle MODEL -o EXE ...`, `cinfer verify EXE [--key PUB]`, `cinfer keygen NAME` (cli/bundle.c). */
int cli_bundle(int argc, char **argv);
int cli_verify(int argc, char **argv);
int cli_keygen(int argc, char **argv);
/* The entry point of a bundle (templates/bundle_main.c.in): finds the payload
 * in its own file, checks it, and dispatches to run/chat/serve/--info. */
int cli_bundled_main(int argc, char **argv, const struct cf_model_desc *(*describe)(void),
                     void (*forward)(struct cf_env *),
                     int (*serve)(int argc, char **argv, const cli_linked *lk));

/* cli/common.c — shared by the subcommands. */

/* What a command takes as MODEL (cli_resolve_model's last argument). */
enum {
    CLI_MODEL_ANY = 0,  /* anything: the command looks at it itself (inspect, tokenize) */
    CLI_MODEL_RUN = 1,  /* a model to run: GGUF, .giw or a Hugging Face folder (modelfile_open) */
    CLI_MODEL_GGUF = 2, /* a GGUF file (quantize writes llama.cpp's files from llama.cpp's files) */
};

/* When *model names a model pulled with `cinfer pull` (REPO[@REV][:FILE],
 * pull_is_spec: not an existing file), resolve it in the local cache into buf
 * (cap bytes) and point *model at buf.  A path is left alone.  Then by kind
 * (CLI_MODEL_*, by content: modelfile_detect): a PyTorch pickle is refused
 * with a message saying why (RUN, GGUF), and for GGUF also a safetensors
 * file or a Hugging Face folder, with a pointer to llama.cpp's converter.
 * Returns 0, or -1 after printing one line "cinfer CMD: <why>" (e.g. not
 * cached: run cinfer pull). */
int cli_resolve_model(const char *cmd, const char **model, char *buf, size_t cap, int kind);
/* --quant P: the CINFER_PRECISION_* named by v, or -1 after printing
 * "PROG: --quant 'v': expected auto, native, ..." (v NULL: missing). */
int cli_parse_precision(const char *prog, const char *v);
/* --device cpu|cuda|cuda:N into *device (CINFER_DEVICE_*) and *index; -1
 * after printing "PROG: --device 'v': expected cpu, cuda or cuda:N". */
int cli_parse_device(const char *prog, const char *v, int *device, int *index);
/* The --device line of every usage text. */
#define CLI_DEVICE_HELP \
    "  --device D              cpu (default) or cuda[:N]: the GPU through the NVIDIA driver and NVRTC\n" \
    "                          (loaded at run time; docs/cuda.md)\n"
/* --cache-type-k T / --cache-type-v T (llama.cpp's names f32, f16, q8_0,
 * q4_0) into *out (CINFER_KV_*); -1 after printing "PROG: FLAG 'v':
 * expected f32, f16, q8_0 or q4_0". */
int cli_parse_cache_type(const char *prog, const char *flag, const char *v, int *out);
/* The --cache-type-k/-v lines of every usage text. */
#define CLI_CACHE_HELP \
    "  --cache-type-k T        KV cache type of the keys: f16 (default), f32, q8_0, q4_0\n" \
    "  --cache-type-v T        of the values (docs/memory.md: error and speed of each)\n"
/* The --quant line of every usage text. */
#define CLI_QUANT_HELP                                                                             \
    "auto (default: Q4_0/Q8_0/Q4_K/Q5_K/Q6_K weights interleaved losslessly, other types native),\n" \
    "                          native (the GGUF blocks, zero copy), f32, int8, int8int8, int4, int4mix\n" \
    "                          (repacked at load; a .giw runs as saved; docs/precisions.md)\n"
/* --mem BYTES: a byte count with an optional binary suffix K, M, G, T (or
 * KiB, MiB, GiB, TiB; "480M" = 480 * 2^20), > 0.  0, or -1 after printing
 * "PROG: --mem 'v': expected bytes such as 480M or 2G". */
int cli_parse_bytes(const char *prog, const char *v, uint64_t *out);
/* Print a budgeted model's ladder steps (cinfer_model_budget), one
 * "PROG: memory: STEP" line each on stderr, and with verbose its plan. */
struct cinfer_model;
void cli_print_budget(const char *prog, const struct cinfer_model *m, int verbose);
/* For a model with streamed weights, one stderr line "PROG: stream: read
 * ahead X MiB, dropped Y MiB, N major faults, Z MiB read from storage"
 * (getrusage ru_majflt; /proc/self/io read_bytes, when readable). */
void cli_print_stream_stats(const char *prog, const struct cinfer_model *m);
/* CLOCK_MONOTONIC in milliseconds. */
double cli_now_ms(void);
/* Peak resident set of this process in bytes (getrusage ru_maxrss; on Linux
 * the same as VmHWM: mapped weight pages count once touched); 0 if unknown. */
uint64_t cli_peak_rss_bytes(void);
/* A fresh random 64-bit sampling seed (getrandom, else clock and pid). */
uint64_t cli_random_seed(void);
/* --seed S: a decimal 0..2^64-1 (reproducible; *is_random = 0) or -1 (a fresh
 * random seed; *is_random = 1), like llama.cpp.  Returns -1 when malformed. */
int cli_parse_seed(const char *s, uint64_t *seed, int *is_random);

/* Warnings for settings that work but hurt (one "PROG: warning: ..." line
 * each on stderr): n_threads above the CPUs this process may run on, n_ctx
 * above the model's training context (0 = default: no warning), and the
 * model's load notes (cinfer_model_notes: e.g. a BPE vocabulary without
 * tokenizer.ggml.pre).  m may be NULL (threads only). */
struct cinfer_model;
void cli_warn_settings(const char *prog, const struct cinfer_model *m, int n_ctx, int n_threads);
/* When m is an encoder (an embedding model: cinfer_model_is_encoder), print
 * "PROG: MODEL is an embedding model (bert, an encoder): it does not
 * generate text; embed with `cinfer embed MODEL -p TEXT` or serve it
 * (/v1/embeddings)" and return 1; else 0. */
int cli_refuse_encoder(const char *prog, const struct cinfer_model *m, const char *model);
/* CPUs this process may run on (sched_getaffinity; else online CPUs). */
int cli_n_cpus(void);

/* Progress of long work on stderr — only when stderr is a terminal, and only
 * once the work has run CLI_PROGRESS_DELAY_MS (short work stays silent):
 *   "\r\033[K<label>  <done>/<total> <unit>  43%  812 tok/s  ETA 0:21"
 * redrawn at most 10 times a second; cli_progress_end clears the line.  A
 * zeroed struct after cli_progress_begin is ready; total <= 0 shows no
 * percentage or ETA (just done and the rate). */
#define CLI_PROGRESS_DELAY_MS 400
typedef struct {
    const char *label, *unit;
    double total, scale;    /* units shown = raw units / scale (bytes -> MiB: 1048576) */
    double t_start, t_last; /* cli_now_ms */
    int enabled, shown;
} cli_progress;
void cli_progress_begin(cli_progress *p, const char *label, const char *unit, double total, double scale);
void cli_progress_update(cli_progress *p, double done);
void cli_progress_end(cli_progress *p);
/* The text of one progress line (no \r, no escape codes) into buf: label,
 * done/total unit, percent, rate per second, ETA as M:SS or H:MM:SS
 * ("--:--" when unknown).  elapsed_ms > 0. */
void cli_progress_format(char *buf, size_t cap, const char *label, const char *unit, double done,
                         double total, double elapsed_ms);
/* "H:MM:SS" or "M:SS", or "--:--" for a negative or huge value. */
void cli_fmt_eta(double seconds, char *buf, size_t cap);

/* Work with no measurable progress (a cc -O3 build): "<label>  12.3 s"
 * redrawn every 0.2 s by a thread of its own while it runs — a terminal only,
 * after CLI_PROGRESS_DELAY_MS.  start returns NULL when there is nothing to
 * show (not a terminal, no memory); stop(NULL) is a no-op. */
typedef struct cli_ticker cli_ticker;
cli_ticker *cli_ticker_start(const char *label);
void cli_ticker_stop(cli_ticker *t);

/* $XDG_CACHE_HOME/cinfer/FILE (default ~/.cache/cinfer/FILE), the directory
 * created when missing; -1 when neither variable is set or mkdir fails. */
int cli_cache_file(const char *file, char *buf, size_t cap);

/* The whole file at path ("-": stdin), at most CLI_READ_MAX bytes (a prompt,
 * a schema; errno EFBIG beyond), NUL-terminated; NULL with errno. */
enum { CLI_READ_MAX = 256 << 20 };
char *cli_read_all(const char *path, size_t *len);

#endif
