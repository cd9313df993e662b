/* cli/compile.c — `cinfer compile` (placeholder until its issue lands). */
#include "cli.h"

#include <stdio.h>

int cli_compile(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cinfer compile: not built yet\n");
    return 1;
}
