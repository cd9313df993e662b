/* cli/run.c — `cinfer run` (placeholder until its issue lands). */
#include "cli.h"

#include <stdio.h>

int cli_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cinfer run: not built yet\n");
    return 1;
}
