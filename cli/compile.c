/*
 * compile.c — `cinfer compile MODEL [--aot] [--emit-c FILE] [-o OUT]`:
 *   --emit-c FILE   write the generated C translation unit ("-" = stdout)
 *   --aot -o PROG   build a standalone executable (needs only the GGUF file)
 *   --aot           build and cache the shared object `cinfer run --aot` loads
 *   (default)       JIT-compile with libtcc and report the timings
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "compile.h"
#include "gguf.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void usage(FILE *f) {
    fprintf(f, "usage: cinfer compile MODEL [--aot] [--emit-c FILE] [-o OUT] [--archspec FILE]\n"
               "                      [--quant native] [--batch N] [-v]\n");
}

int cli_compile(int argc, char **argv) {
    const char *model = NULL, *emit_path = NULL, *out_path = NULL;
    cc_options o = {.mode = CC_JIT};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--aot")) o.mode = CC_AOT;
        else if (!strcmp(f, "--jit")) o.mode = CC_JIT;
        else if (!strcmp(f, "-v")) o.verbose = 1;
        else if (!strcmp(f, "-h") || !strcmp(f, "--help")) return usage(stdout), 0;
        else if (v && !strcmp(f, "--emit-c")) emit_path = argv[++i];
        else if (v && !strcmp(f, "-o")) out_path = argv[++i];
        else if (v && !strcmp(f, "--archspec")) o.archspec_path = argv[++i];
        else if (v && !strcmp(f, "--batch")) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 1 || n > 65536)
                return fprintf(stderr, "cinfer compile: --batch: expected 1..65536\n"), 2;
            o.n_batch = (int)n;
        } else if (v && !strcmp(f, "--quant")) {
            if (strcmp(argv[++i], "native"))
                return fprintf(stderr, "cinfer compile: --quant %s is not implemented yet\n", argv[i]), 2;
        } else if (f[0] == '-' && f[1]) {
            fprintf(stderr, "cinfer compile: unknown or incomplete option '%s'\n", f);
            return usage(stderr), 2;
        } else if (!model) model = f;
        else return fprintf(stderr, "cinfer compile: unexpected argument '%s'\n", f), 2;
    }
    if (!model) return usage(stderr), 2;
    if (out_path && o.mode != CC_AOT) {
        fprintf(stderr, "cinfer compile: -o builds a standalone executable; add --aot\n");
        return 2;
    }

    char err[1024];
    gguf_file *g = NULL;
    int rc = 1;
    if (gguf_open(model, &g, err, sizeof err)) goto fail;
    if (emit_path) {
        char *src;
        size_t len;
        if (cc_generate(g, &o, &src, &len, err, sizeof err)) goto fail;
        FILE *f = strcmp(emit_path, "-") ? fopen(emit_path, "w") : stdout;
        if (!f) {
            snprintf(err, sizeof err, "%s: %s", emit_path, strerror(errno));
            free(src);
            goto fail;
        }
        int bad = fwrite(src, 1, len, f) != len;
        if (f != stdout) bad |= fclose(f) != 0;
        free(src);
        if (bad) {
            snprintf(err, sizeof err, "%s: write failed", emit_path);
            goto fail;
        }
        if (!out_path && o.mode == CC_JIT) {
            rc = 0;
            goto done;
        }
    }
    double t0 = now_ms();
    if (out_path) {
        if (cc_build_executable(g, &o, out_path, err, sizeof err)) goto fail;
        fprintf(stderr, "cinfer compile: wrote %s (%.0f ms); run it as: %s %s -p \"...\"\n",
                out_path, now_ms() - t0, out_path, model);
    } else {
        cc_module *m;
        if (cc_build(g, &o, &m, err, sizeof err)) goto fail;
        fprintf(stderr, "cinfer compile: %s ok: emit %.2f ms, compile %.2f ms%s%s%s\n",
                o.mode == CC_AOT ? "AOT" : "JIT", m->emit_ms, m->compile_ms,
                m->cache_hit ? " (cached)" : "", o.mode == CC_AOT ? ", " : "",
                o.mode == CC_AOT ? m->so_path : "");
        cc_module_free(m);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "cinfer compile: %s\n", err);
done:
    gguf_close(g);
    return rc;
}
