/*
 * main.c — `cinfer` entry point: dispatches to the subcommands in cli/.
 */
#include "cli.h"
#include "cinfer.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *usage;
} command;

static const command commands[] = {
    {"inspect", cli_inspect, "inspect MODEL [--json]           metadata and tensors"},
    {"run", cli_run, "run MODEL [-p TEXT] [-n N] ...     generate text (see `cinfer run --help`)"},
    {"chat", cli_chat, "chat MODEL [--system TEXT] ...     chat through the model's template"},
    {"compile", cli_compile, "compile MODEL [--quant P] [--aot] [--emit-c FILE] [-o OUT|OUT.giw]"},
    {"tokenize", cli_tokenize, "tokenize MODEL TEXT [--no-bos]     print token ids"},
    {"bench", cli_bench, "bench MODEL [-p 512] [-n 128] [-t N] [-r 3] [--quant P] [--json]   prompt and generation tokens/s"},
    {"quantize", cli_quantize, "quantize IN.gguf OUT.gguf --type q4_0|q8_0|q4_k_m|...   re-quantize like llama-quantize"},
    {"pull", cli_pull, "pull REPO [FILE|PATTERN] [--revision R] [--dir D] [--endpoint URL]   download from Hugging Face"},
    {"list", cli_list, "list                               models in the local cache"},
    {"rm", cli_rm, "rm REPO[:FILE]                     remove from the local cache"},
    {"serve", cli_serve, "serve MODEL [--host H] [--port 8080] [--api-key K]   OpenAI/Anthropic-compatible HTTP server"},
    {"schema-check", cli_schema_check, "schema-check SCHEMA INSTANCE...    does the JSON Schema grammar accept each instance"},
};

static void usage(FILE *f) {
    fprintf(f, "cinfer %s — a model compiler for local LLM inference\n\nusage:\n", CINFER_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  cinfer %s\n", commands[i].usage);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("cinfer %s\n", CINFER_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "cinfer: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
