/*
 * bundle.c — `cinfer bundle`, `cinfer verify`, `cinfer keygen` (docs/bundle.md).
 *
 *   cinfer bundle MODEL -o EXE [--quant P] [--target x86_64|aarch64] [--server]
 *                 [--sign KEY [--require-signature]] [-v]
 *     one executable that is the model: the AOT-compiled forward pass and the
 *     runtime (cli/bundled.c is its main), then the weights saved in the
 *     compiled precision's layout (a .giw), tokenizer and chat template,
 *     page-aligned, then a trailer with their sha256 and an optional Ed25519
 *     signature (runtime/formats/bundle.h).
 *   cinfer verify EXE [--key PUB]
 *     the weights' sha256, and the signature: against PUB (authenticity), or
 *     without --key against the key the bundle carries (integrity only).
 *   cinfer keygen NAME
 *     NAME (secret key, mode 0600) and NAME.pub.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cinfer.h"
#include "cli.h"
#include "compiler/compile.h"
#include "engine/giw.h"
#include "formats/bundle.h"
#include "formats/gguf.h"

static void bundle_usage(FILE *f) {
    fprintf(f,
            "usage: cinfer bundle MODEL -o EXE [--quant P] [--target x86_64|aarch64] [--server]\n"
            "                     [--sign KEY [--require-signature]] [-v]\n"
            "  one executable holding the compiled forward pass, the runtime and the model (weights in\n"
            "  the compiled precision's layout, tokenizer, chat template); it needs only the C library.\n"
            "  MODEL                   a GGUF or .giw file, or REPO[:FILE] pulled with cinfer pull\n"
            "  --quant P               compute precision: " CLI_QUANT_HELP
            "  --target T              x86_64 (default on this machine) or aarch64 (cross-compiled with\n"
            "                          aarch64-linux-gnu-gcc; `make aarch64` builds its runtime)\n"
            "  --server                link the HTTP server in (EXE serve)\n"
            "  --sign KEY              add an Ed25519 signature with the secret key KEY (cinfer keygen)\n"
            "  --require-signature     the bundle refuses to start unless its signature verifies\n"
            "  EXE -h lists what the bundle does; docs/bundle.md\n");
}

static const char *host_target(void) {
#if defined(__aarch64__)
    return "aarch64";
#else
    return "x86_64";
#endif
}

/* general.name, else the file's stem */
static void model_name(const gguf_file *g, const char *path, char *buf, size_t cap) {
    gguf_str s;
    char e[64];
    if (!gguf_get_str(g, "general.name", &s, e, sizeof e) && s.len) {
        snprintf(buf, cap, "%.*s", (int)(s.len < cap - 1 ? s.len : cap - 1), s.ptr);
        return;
    }
    const char *b = strrchr(path, '/');
    snprintf(buf, cap, "%s", b ? b + 1 : path);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf) *dot = 0;
}

static long file_bytes(const char *path) {
    struct stat st;
    return stat(path, &st) ? -1 : (long)st.st_size;
}

int cli_bundle(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *target = host_target(), *key_path = NULL;
    int precision = 0, server = 0, require_sig = 0, verbose = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) return bundle_usage(stdout), 0;
        else if (!strcmp(f, "--server")) server = 1;
        else if (!strcmp(f, "--require-signature")) require_sig = 1;
        else if (!strcmp(f, "-v")) verbose = 1;
        else if (v && !strcmp(f, "-o")) out = argv[++i];
        else if (v && !strcmp(f, "--target")) target = argv[++i];
        else if (v && !strcmp(f, "--sign")) key_path = argv[++i];
        else if (v && !strcmp(f, "--quant")) {
            if ((precision = cli_parse_precision("cinfer bundle", argv[++i])) < 0) return 2;
        } else if (f[0] == '-' && f[1]) {
            fprintf(stderr, "cinfer bundle: unknown or incomplete option '%s'\n", f);
            return bundle_usage(stderr), 2;
        } else if (!model) model = f;
        else return fprintf(stderr, "cinfer bundle: unexpected argument '%s'\n", f), 2;
    }
    if (!model || !out) return bundle_usage(stderr), 2;
    if (strcmp(target, "x86_64") && strcmp(target, "aarch64"))
        return fprintf(stderr, "cinfer bundle: --target '%s': expected x86_64 or aarch64\n", target), 2;
    if (require_sig && !key_path)
        return fprintf(stderr, "cinfer bundle: --require-signature needs --sign KEY (cinfer keygen NAME makes one)\n"), 2;
    char err[1024], cached[4096];
    uint8_t sk[64];
    if (key_path && bundle_key_read(key_path, sk, sizeof sk, err, sizeof err)) {
        fprintf(stderr, "cinfer bundle: --sign: %s\n", err);
        return 1;
    }
    if (cli_resolve_model("bundle", &model, cached, sizeof cached, CLI_MODEL_RUN)) return 1;

    double t0 = cli_now_ms();
    char payload[4200], prog[4200];
    snprintf(payload, sizeof payload, "%s.payload.%d", out, (int)getpid());
    snprintf(prog, sizeof prog, "%s.program.%d", out, (int)getpid());
    cinfer_model *m = NULL;
    gguf_file *g = NULL;
    int rc = 1;
    /* 1. the weights in the compiled precision's layout: a .giw */
    cinfer_model_options mo = {.precision = precision, .verbose = verbose};
    if (cinfer_model_open(model, &mo, &m, err, sizeof err) ||
        cinfer_model_save_giw(m, payload, err, sizeof err))
        goto fail;
    precision = cinfer_model_precision(m);
    cinfer_model_close(m);
    m = NULL;
    /* 2. the program, compiled for that file */
    if (gguf_open(payload, &g, err, sizeof err)) goto fail;
    bundle_info bi = {.flags = require_sig ? BUNDLE_REQUIRE_SIGNATURE : 0};
    model_name(g, model, bi.model, sizeof bi.model);
    snprintf(bi.precision, sizeof bi.precision, "%s", cinfer_precision_name(precision));
    snprintf(bi.target, sizeof bi.target, "%s", target);
    snprintf(bi.version, sizeof bi.version, "%s", CINFER_VERSION);
    cc_options o = {.mode = CC_AOT, .precision = precision, .verbose = verbose};
    if (cc_build_bundle_program(g, &o, target, server, prog, bi.build, sizeof bi.build, err, sizeof err))
        goto fail;
    gguf_close(g);
    g = NULL;
    long prog_bytes = file_bytes(prog);
    /* 3. program + payload + trailer, then into place */
    if (bundle_append(prog, payload, &bi, key_path ? sk : NULL, err, sizeof err)) goto fail;
    if (chmod(prog, 0755) || rename(prog, out)) {
        snprintf(err, sizeof err, "%s: %s", out, strerror(errno));
        goto fail;
    }
    fprintf(stderr, "cinfer bundle: wrote %s (%.1f MiB: program %.0f KiB, weights %.1f MiB; %s, %s%s%s) "
            "in %.0f ms; run it as: %s%s -p \"...\"\n", out, bi.file_bytes / 1048576.0,
            prog_bytes / 1024.0, bi.payload_bytes / 1048576.0, bi.precision, target,
            key_path ? ", signed" : "", require_sig ? ", requires its signature" : "",
            cli_now_ms() - t0, strchr(out, '/') ? "" : "./", out);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "cinfer bundle: %s\n", err);
done:
    cinfer_model_close(m);
    gguf_close(g);
    unlink(payload);
    unlink(prog);
    memset(sk, 0, sizeof sk);
    return rc;
}

int cli_verify(int argc, char **argv) {
    const char *exe = NULL, *key_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            printf("usage: cinfer verify EXE [--key PUB]\n"
                   "  checks a bundle's weights against their sha256 and its Ed25519 signature: with\n"
                   "  --key against PUB (who signed it), without against the key the bundle carries\n"
                   "  (integrity only: anyone can re-sign a file with a key of their own).  Exit 0: ok.\n");
            return 0;
        } else if (v && !strcmp(f, "--key")) key_path = argv[++i];
        else if (f[0] == '-' && f[1])
            return fprintf(stderr, "cinfer verify: unknown or incomplete option '%s'\n", f), 2;
        else if (!exe) exe = f;
        else return fprintf(stderr, "cinfer verify: unexpected argument '%s'\n", f), 2;
    }
    if (!exe) return fprintf(stderr, "usage: cinfer verify EXE [--key PUB]\n"), 2;
    char err[1024], hx[65];
    uint8_t pk[32];
    bundle_info bi;
    if (key_path && bundle_key_read(key_path, pk, sizeof pk, err, sizeof err)) {
        fprintf(stderr, "cinfer verify: --key: %s\n", err);
        return 2;
    }
    int sig = 0;
    if (bundle_read(exe, &bi, err, sizeof err) ||
        bundle_check(exe, &bi, sig = key_path != NULL || (bi.flags & BUNDLE_SIGNED), key_path ? pk : NULL,
                     err, sizeof err)) {
        fprintf(stderr, "cinfer verify: %s\n", err);
        return 1;
    }
    bundle_hex(bi.payload_sha256, 32, hx);
    printf("%s: ok: %s (%s, %s), weights sha256 %s", exe, bi.model, bi.precision, bi.target, hx);
    if (key_path) printf(", Ed25519 signature verifies with %s\n", key_path);
    else if (sig) printf(", signature verifies with the key it carries (pass --key PUB to check who signed it)\n");
    else printf(", not signed\n");
    return 0;
}

int cli_keygen(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr,
                "usage: cinfer keygen NAME\n"
                "  writes an Ed25519 key pair: NAME (secret, mode 0600: keep it off the machines you ship to)\n"
                "  and NAME.pub (give it to whoever runs cinfer verify EXE --key NAME.pub)\n");
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    char err[1024];
    if (bundle_keygen(argv[1], err, sizeof err)) {
        fprintf(stderr, "cinfer keygen: %s\n", err);
        return 1;
    }
    fprintf(stderr, "cinfer keygen: wrote %s (secret) and %s.pub (public)\n", argv[1], argv[1]);
    return 0;
}
