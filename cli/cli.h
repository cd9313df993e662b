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

/* cli/common.c — shared by the subcommands. */

/* When *model names a model pulled with `cinfer pull` (REPO[@REV][:FILE],
 * pull_is_spec: not an existing file), resolve it in the local cache into buf
 * (cap bytes) and point *model at buf.  A path is left alone.  With need_gguf,
 * a safetensors file or a PyTorch pickle (modelfile_detect, by content) is
 * refused with a message saying how to get a GGUF.  Returns 0, or -1 after
 * printing one line "cinfer CMD: <why>" (e.g. not cached: run cinfer pull). */
int cli_resolve_model(const char *cmd, const char **model, char *buf, size_t cap, int need_gguf);
/* --quant P: the CINFER_PRECISION_* named by v, or -1 after printing
 * "PROG: --quant 'v': expected auto, native, ..." (v NULL: missing). */
int cli_parse_precision(const char *prog, const char *v);
/* The --quant line of every usage text. */
#define CLI_QUANT_HELP                                                                             \
    "auto (default: Q4_0/Q8_0 weights interleaved losslessly, other types native),\n"             \
    "                          native (the GGUF blocks, zero copy), f32, int8, int8int8, int4, int4mix\n" \
    "                          (repacked at load; a .giw runs as saved; docs/precisions.md)\n"
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

#endif
