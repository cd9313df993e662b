/*
 * compile.c — `cinfer compile MODEL [--quant P] [--aot] [--emit-c FILE] [-o OUT]`:
 *   --emit-c FILE   write the generated C translation unit ("-" = stdout);
 *                   with --device cuda the CUDA one (no GPU needed)
 *   --aot -o PROG   build a standalone executable (needs only the GGUF file)
 *   --aot           build and cache the shared object `cinfer run --aot` loads
 *   -o OUT.giw      (no --aot) save the weights repacked for --quant P as a
 *                   .giw file that `cinfer run OUT.giw` maps without repacking
 *   (default)       JIT-compile with libtcc and report the timings
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinfer.h"
#include "cli.h"
#include "compiler/compile.h"
#include "formats/gguf.h"
#include "formats/modelfile.h"
#include "gpu/cuda.h"

static void usage(FILE *f) {
    fprintf(f, "usage: cinfer compile MODEL [--aot] [--emit-c FILE] [-o OUT] [--quant P] [--archspec FILE]\n"
               "                      [--batch N] [--device cpu|cuda[:N]] [-v]\n"
               "  MODEL           a GGUF or .giw file, a Hugging Face folder, or REPO[:FILE] pulled with cinfer pull\n"
               "  (no option)     JIT-compile with libtcc and report the timings\n"
               "  --emit-c FILE   write the generated C translation unit (- = stdout)\n"
               "  --aot           build with the system C compiler (cc -O3 -march=native) into the cache\n"
               "                  ($XDG_CACHE_HOME/cinfer) that `cinfer run --aot` loads\n"
               "  --aot -o PROG   a standalone executable: ./PROG MODEL -p \"...\"\n"
               "  -o OUT.giw      without --aot: save the weights repacked for --quant P as a .giw file\n"
               "                  (GGUF container, cinfer types; `cinfer run OUT.giw` maps it zero-copy)\n"
               "  --quant P       compute precision: " CLI_QUANT_HELP
               "  --archspec FILE use this architecture descriptor instead of the built-in one\n"
               "  --batch N       most tokens per forward call (default 512)\n"
               "  --device cuda   the CUDA forward pass: with --emit-c its .cu source (no GPU needed),\n"
               "                  else its kernels compiled with NVRTC for the GPU and cached (docs/cuda.md)\n"
               "  -v              compile and cache details\n");
}

static int giw_progress(void *user, const char *stage, double done, double total) {
    cli_progress *p = user;
    (void)stage;
    p->total = total / p->scale;
    cli_progress_update(p, done);
    return 0;
}

/* -o OUT without --aot: open the model in the precision (repacking) and save a .giw. */
static int write_giw(const char *model, const cc_options *o, const char *out_path) {
    char err[1024];
    cinfer_model *m = NULL;
    double t0 = cli_now_ms();
    cli_progress prog;
    cli_progress_begin(&prog, "repacking weights", "MiB", 0, 1048576);
    cinfer_model_options mo = {.archspec_path = o->archspec_path, .verbose = o->verbose,
                               .precision = o->precision, .progress = giw_progress, .progress_user = &prog};
    int orc = cinfer_model_open(model, &mo, &m, err, sizeof err);
    cli_progress_end(&prog);
    if (orc) {
        fprintf(stderr, "cinfer compile: %s\n", err);
        return 1;
    }
    double t_open = cli_now_ms() - t0;
    int n_rep = 0;
    size_t rep_bytes = 0;
    double rep_ms = 0;
    cinfer_model_repack_stats(m, &n_rep, &rep_bytes, &rep_ms);
    t0 = cli_now_ms();
    int rc = cinfer_model_save_giw(m, out_path, err, sizeof err);
    if (rc) fprintf(stderr, "cinfer compile: %s\n", err);
    else
        fprintf(stderr, "cinfer compile: wrote %s (%s: %d tensors repacked, %.1f MiB, repack %.0f ms, "
                "open %.0f ms, write %.0f ms); run it as: cinfer run %s -p \"...\"\n", out_path,
                cinfer_precision_name(cinfer_model_precision(m)), n_rep, rep_bytes / 1048576.0,
                rep_ms, t_open, cli_now_ms() - t0, out_path);
    cinfer_model_close(m);
    return rc ? 1 : 0;
}

int cli_compile(int argc, char **argv) {
    const char *model = NULL, *emit_path = NULL, *out_path = NULL;
    cc_options o = {.mode = CC_JIT};
    int device_index = 0;
    cuda_dev *gpu = NULL;
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
            if ((o.precision = cli_parse_precision("cinfer compile", argv[++i])) < 0) return 2;
        } else if (v && !strcmp(f, "--device")) {
            if (cli_parse_device("cinfer compile", argv[++i], &o.device, &device_index)) return 2;
        } else if (f[0] == '-' && f[1]) {
            fprintf(stderr, "cinfer compile: unknown or incomplete option '%s'\n", f);
            return usage(stderr), 2;
        } else if (!model) model = f;
        else return fprintf(stderr, "cinfer compile: unexpected argument '%s'\n", f), 2;
    }
    if (!model) return usage(stderr), 2;
    if (o.device == CC_DEVICE_CUDA && (out_path || o.mode == CC_AOT))
        return fprintf(stderr, "cinfer compile: --device cuda: standalone executables, --aot objects and .giw files "
                       "are CPU only (the CUDA kernels are compiled by NVRTC when the model is opened)\n"), 2;
    char cached[4096];
    if (cli_resolve_model("compile", &model, cached, sizeof cached, CLI_MODEL_RUN)) return 1;
    if (out_path && o.mode != CC_AOT) {
        size_t n = strlen(out_path);
        if (n < 4 || strcmp(out_path + n - 4, ".giw"))
            fprintf(stderr, "cinfer compile: note: without --aot, -o %s is a .giw weight file for cinfer run, not an "
                    "executable (add --aot for one)\n", out_path);
        return write_giw(model, &o, out_path);
    }
    if (out_path && o.precision != 0) {
        /* a linked program opens a plain GGUF as auto (the default): any other precision must come from a .giw */
        fprintf(stderr, "cinfer compile: a standalone executable takes its precision from a .giw: "
                "cinfer compile %s --quant %s -o m.giw, then cinfer compile m.giw --aot -o %s\n",
                model, cinfer_precision_name(o.precision), out_path);
        return 2;
    }

    char err[1024];
    gguf_file *g = NULL;
    int rc = 1;
    if (modelfile_open(model, &g, err, sizeof err)) goto fail;
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
    if (o.device == CC_DEVICE_CUDA) {
        char e2[900];
        if (cuda_open(device_index, &gpu, e2, sizeof e2)) {
            snprintf(err, sizeof err, "--device cuda: %s", e2);
            goto fail;
        }
        o.cuda = gpu;
    }
    double t0 = cli_now_ms();
    if (out_path) {
        cli_ticker *tk = cli_ticker_start("building the executable (cc -O3)");
        int brc = cc_build_executable(g, &o, out_path, err, sizeof err);
        cli_ticker_stop(tk);
        if (brc) goto fail;
        /* a bare name would be looked up in PATH: say ./NAME */
        fprintf(stderr, "cinfer compile: wrote %s (%.0f ms); run it as: %s%s %s -p \"...\"\n",
                out_path, cli_now_ms() - t0, strchr(out_path, '/') ? "" : "./", out_path, model);
    } else {
        cc_module *m;
        cli_ticker *tk = o.mode == CC_AOT ? cli_ticker_start("compiling (cc -O3)") : NULL;
        int brc = cc_build(g, &o, &m, err, sizeof err);
        cli_ticker_stop(tk);
        if (brc) goto fail;
        const int keep = o.mode == CC_AOT || gpu;
        fprintf(stderr, "cinfer compile: %s ok: emit %.2f ms, compile %.2f ms%s%s%s\n",
                gpu ? "CUDA" : o.mode == CC_AOT ? "AOT" : "JIT", m->emit_ms, m->compile_ms,
                m->cache_hit ? " (cached)" : "", keep ? ", " : "", gpu ? m->cuda_path : keep ? m->so_path : "");
        cc_module_free(m);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "cinfer compile: %s\n", err);
done:
    gguf_close(g);
    cuda_close(gpu);
    return rc;
}
