/*
 * cli.h — the `cinfer` subcommands (DESIGN.md §3).  Each takes the argv that
 * follows the subcommand name (argv[0] is the subcommand), prints to
 * stdout/stderr and returns the process exit status.  They are linked into the
 * test runner too, so tests can call them in-process under the sanitizers.
 */
#ifndef CINFER_CLI_H
#define CINFER_CLI_H

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

#endif
