/*
 * schema_check.c — `cinfer schema-check SCHEMA INSTANCE...`: compile a JSON
 * Schema into cinfer's grammar and ask whether the grammar accepts each
 * instance (the same grammar `cinfer run --json-schema` decodes with).
 * Exit status: 0 every instance accepted, 1 some instance rejected (or not
 * readable / not JSON), 2 the schema does not compile (usage errors too).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinfer.h"
#include "cli.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        char *nb = realloc(buf, cap *= 2);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else buf = nb;
    }
    int bad = ferror(f);
    if (f != stdin) fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int cli_schema_check(int argc, char **argv) {
    const char *schema_path = NULL;
    int first_inst = -1, quiet = 0, permissive = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: cinfer schema-check SCHEMA.json INSTANCE.json... [-q] [--permissive]\n"
                   "  exit 0: the grammar accepts every instance; 1: it rejects one; 2: the schema\n"
                   "  does not compile (the message lists unsupported keywords and where they are)\n"
                   "  -q            no \"accepted\"/\"rejected\" lines, only the exit status\n"
                   "  --permissive  ignore the keywords the grammar cannot enforce instead of refusing\n"
                   "                the schema: the grammar then accepts a superset of the schema\n");
            return 0;
        } else if (!strcmp(argv[i], "-q")) quiet = 1;
        else if (!strcmp(argv[i], "--permissive")) permissive = 1;
        else if (!schema_path) schema_path = argv[i];
        else if (first_inst < 0) first_inst = i;
    }
    if (!schema_path || first_inst < 0) {
        fprintf(stderr, "usage: cinfer schema-check SCHEMA.json INSTANCE.json... [-q] [--permissive] (see --help)\n");
        return 2;
    }
    size_t len;
    char *schema = slurp(schema_path, &len);
    if (!schema) {
        fprintf(stderr, "cinfer schema-check: %s: %s\n", schema_path, strerror(errno));
        return 2;
    }
    char err[4096];
    cinfer_grammar *g;
    cinfer_grammar_options go = {.permissive = permissive};
    int rc = cinfer_grammar_from_schema(NULL, schema, len, &go, &g, err, sizeof err);
    free(schema);
    if (rc) {
        fprintf(stderr, "cinfer schema-check: %s: %s\n", schema_path, err);
        return 2;
    }
    int status = 0;
    for (int i = first_inst; i < argc; i++) {
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--permissive")) continue;
        char *inst = slurp(argv[i], &len);
        if (!inst) {
            fprintf(stderr, "cinfer schema-check: %s: %s\n", argv[i], strerror(errno));
            status = 1;
            continue;
        }
        rc = cinfer_grammar_check(g, inst, len, err, sizeof err);
        free(inst);
        if (rc == 1) {
            if (!quiet) printf("%s: accepted\n", argv[i]);
        } else {
            if (!quiet) printf("%s: rejected: %s\n", argv[i], rc == CINFER_EFORMAT ? err : rc == 0 ? err : "out of memory");
            status = 1;
        }
    }
    cinfer_grammar_free(g);
    return status;
}
