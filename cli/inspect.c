/* cli/inspect.c — `cinfer inspect` (placeholder until its issue lands). */
#include "cli.h"

#include <stdio.h>

int cli_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "cinfer inspect: not built yet\n");
    return 1;
}
