/*
 * schema_check.c — `cinfer schema-check SCHEMA INSTANCE...`: compile a JSON
 * Schema into cinfer's grammar and ask whether the grammar accepts each
 * instance (the same grammar `cinfer run --json-schema` decodes with).
 *
 * Two modes.  By default each instance is parsed and rewritten into the
 * grammar's canonical spelling first, so the answer is about the value
 * ("does it satisfy the schema").  With --bytes the file's bytes go to the
 * grammar exactly as they are, and only an exact match is accepted: the
 * answer is about text ("could generation have emitted these bytes"), the
 * surface on which "invalid output is unreachable" is tested.
 *
 * Objects are checked with validation semantics (any key order; a schema
 * without additionalProperties allows other keys) unless --generation asks
 * for what generation emits (declared keys only, in the schema's order:
 * include/cinfer.h, cinfer_object_policy).
 *
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

static const char usage[] =
    "usage: cinfer schema-check [--bytes [--ws compact|flexible]] [--generation] [-q] [--permissive] SCHEMA.json "
    "INSTANCE...\n";

int cli_schema_check(int argc, char **argv) {
    const char *schema_path = NULL;
    int n_inst = 0, quiet = 0, permissive = 0, bytes = 0, flexible = 0, generation = 0;
    const char **inst = calloc((size_t)argc + 1, sizeof *inst);
    if (!inst) return 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s"
                   "  exit 0: the grammar accepts every instance; 1: it rejects one; 2: the schema\n"
                   "  does not compile (the message lists unsupported keywords and where they are)\n"
                   "  --bytes       feed each file's bytes to the grammar exactly as they are and accept\n"
                   "                only an exact match (the text generation could emit); without it each\n"
                   "                instance is parsed and rewritten canonically first (is the value valid)\n"
                   "  --ws P        with --bytes: the whitespace policy the grammar is compiled with.\n"
                   "                compact (default): no whitespace anywhere, strings with the one\n"
                   "                escaping (only \\\", \\\\ and control characters escaped, \\u00XX in lower\n"
                   "                case), numbers in plain decimal (no exponent, no trailing fraction\n"
                   "                zeros, no -0).  flexible: JSON whitespace (space, tab, LF, CR), at most\n"
                   "                16 bytes in a row, between tokens, none before or after the value.\n"
                   "                A file's trailing newline is a byte like any other: it is rejected\n"
                   "  --generation  objects as generation (run, chat, serve) makes them: a schema with\n"
                   "                properties and no additionalProperties allows no other key, and the\n"
                   "                declared keys come in the schema's order (optional ones may be left\n"
                   "                out).  Without it: JSON Schema validation (any order, other keys\n"
                   "                allowed unless additionalProperties says otherwise)\n"
                   "  -q            no \"accepted\"/\"rejected\" lines, only the exit status\n"
                   "  --permissive  ignore the keywords the grammar cannot enforce instead of refusing\n"
                   "                the schema: the grammar then accepts a superset of the schema\n",
                   usage);
            free(inst);
            return 0;
        } else if (!strcmp(argv[i], "-q")) quiet = 1;
        else if (!strcmp(argv[i], "--permissive")) permissive = 1;
        else if (!strcmp(argv[i], "--bytes")) bytes = 1;
        else if (!strcmp(argv[i], "--generation")) generation = 1;
        else if (!strcmp(argv[i], "--ws") && i + 1 < argc) {
            const char *p = argv[++i];
            if (!strcmp(p, "flexible")) flexible = 1;
            else if (strcmp(p, "compact")) {
                fprintf(stderr, "cinfer schema-check: --ws: expected compact or flexible, got '%s'\n", p);
                free(inst);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1] && !schema_path) {
            fprintf(stderr, "cinfer schema-check: unknown option '%s'\n%s", argv[i], usage);
            free(inst);
            return 2;
        } else if (!schema_path) schema_path = argv[i];
        else inst[n_inst++] = argv[i];
    }
    if (!schema_path || !n_inst || (flexible && !bytes)) {
        fprintf(stderr, "%s%s", flexible && !bytes ? "cinfer schema-check: --ws applies to --bytes\n" : "", usage);
        free(inst);
        return 2;
    }
    size_t len;
    char *schema = slurp(schema_path, &len);
    if (!schema) {
        fprintf(stderr, "cinfer schema-check: %s: %s\n", schema_path, strerror(errno));
        free(inst);
        return 2;
    }
    char err[4096];
    cinfer_grammar *g;
    cinfer_grammar_options go = {.permissive = permissive,
                                 .whitespace = flexible ? CINFER_WS_FLEXIBLE : CINFER_WS_COMPACT,
                                 .objects = generation ? CINFER_OBJECTS_GENERATION : CINFER_OBJECTS_VALIDATION};
    int rc = cinfer_grammar_from_schema(NULL, schema, len, &go, &g, err, sizeof err);
    free(schema);
    if (rc) {
        fprintf(stderr, "cinfer schema-check: %s: %s\n", schema_path, err);
        free(inst);
        return 2;
    }
    int status = 0;
    for (int i = 0; i < n_inst; i++) {
        char *text = slurp(inst[i], &len);
        if (!text) {
            fprintf(stderr, "cinfer schema-check: %s: %s\n", inst[i], strerror(errno));
            status = 1;
            continue;
        }
        rc = bytes ? cinfer_grammar_check_bytes(g, text, len, err, sizeof err)
                   : cinfer_grammar_check(g, text, len, err, sizeof err);
        free(text);
        if (rc == 1) {
            if (!quiet) printf("%s: accepted\n", inst[i]);
        } else {
            if (!quiet) printf("%s: rejected: %s\n", inst[i], rc == CINFER_EFORMAT || rc == 0 ? err : "out of memory");
            status = 1;
        }
    }
    cinfer_grammar_free(g);
    free(inst);
    return status;
}
