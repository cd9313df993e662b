/* cli/tokenize.c — `cinfer tokenize` (placeholder until its issue lands). */
#include "cli.h"

#include <stdio.h>

int cli_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cinfer tokenize: not built yet\n");
    return 1;
}
