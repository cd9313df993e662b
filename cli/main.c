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
    const char *args, *what;
} command;

static const command commands[] = {
    {"run", cli_run, "MODEL [-p TEXT | -f FILE] [-n N] ...", "generate text (a pipe into stdin is the prompt)"},
    {"chat", cli_chat, "MODEL [--system TEXT] ...", "chat through the model's own template"},
    {"embed", cli_embed, "MODEL [-p TEXT]... [--pooling P]", "embeddings of texts, one JSON array each"},
    {"serve", cli_serve, "MODEL [--host H] [--port 8080] ...", "OpenAI/Anthropic/Ollama-compatible HTTP server"},
    {"pull", cli_pull, "REPO [FILE|PATTERN] ...", "download a model from Hugging Face"},
    {"list", cli_list, "", "the models in the local cache"},
    {"rm", cli_rm, "REPO[:FILE]", "remove from the local cache"},
    {"plan", cli_plan, "MODEL [--quant P] [-c N] [--mem BYTES] [--json]", "the memory a run will take, by part (docs/memory.md)"},
    {"inspect", cli_inspect, "MODEL [--json]", "metadata, tensors, totals"},
    {"tokenize", cli_tokenize, "MODEL TEXT [--no-bos]", "print token ids"},
    {"bench", cli_bench, "MODEL [-p 512] [-n 128] [-t N] ...", "prompt and generation tokens/s"},
    {"compile", cli_compile, "MODEL [--aot] [--emit-c FILE] [-o OUT]", "the generated C, AOT builds, .giw files"},
    {"quantize", cli_quantize, "IN.gguf OUT.gguf --type TYPE", "re-quantize like llama-quantize"},
    {"schema-check", cli_schema_check, "SCHEMA INSTANCE...", "does the JSON Schema grammar accept each"},
    {"bundle", cli_bundle, "MODEL -o EXE [--quant P] [--target x86_64|aarch64] [--server] [--sign KEY]", "one executable that is the model (docs/bundle.md)"},
    {"verify", cli_verify, "EXE [--key PUB]", "check a bundle's weights and Ed25519 signature"},
    {"keygen", cli_keygen, "NAME", "an Ed25519 key pair for cinfer bundle --sign"},
};

static void usage(FILE *f) {
    fprintf(f, "cinfer %s — a model compiler for local LLM inference\n\nusage:\n", CINFER_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char syn[128];
        snprintf(syn, sizeof syn, "%s %s", commands[i].name, commands[i].args);
        fprintf(f, "  cinfer %-50s %s\n", syn, commands[i].what);
    }
    fprintf(f, "\n`cinfer COMMAND --help` (or `cinfer help COMMAND`) describes a command's options;\n"
               "`cinfer --version` prints the version.  Docs: README.md and docs/ in the source tree.\n");
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "help")) { /* cinfer help CMD = cinfer CMD --help */
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (!strcmp(argv[2], commands[i].name))
                return commands[i].fn(2, (char *[]){argv[2], "--help", NULL});
        fprintf(stderr, "cinfer: unknown command '%s'\n", argv[2]);
        usage(stderr);
        return 2;
    }
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
