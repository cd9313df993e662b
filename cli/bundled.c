/*
 * bundled.c — the program inside a bundle executable (`cinfer bundle`,
 * docs/bundle.md): the model's forward pass is linked in and its weights,
 * tokenizer and chat template are the GGUF payload at the end of the
 * program's own file (runtime/formats/bundle.h), mapped zero-copy.
 *
 *   EXE [-p TEXT | -f FILE | < FILE] [run options]   generate (cli/run.c)
 *   EXE chat [chat options]                          chat (cli/chat.c)
 *   EXE serve [serve options]                        HTTP API, when built with --server
 *   EXE --info | --check | -h | --version
 *
 * Integrity.  Before the model is used, the payload's sha256 must equal the
 * trailer's (and, for a bundle built with --require-signature, the Ed25519
 * signature must verify): a truncated or edited file stops with one line
 * saying so.  Hashing reads every byte once, so a verified file leaves a
 * stamp (its sha256, device, inode, size, mtime and ctime) under
 * $XDG_CACHE_HOME/cinfer/bundles (or ~/.cache/...); later starts of the same
 * unchanged file skip the hash.  Without a cache directory (env -i) every
 * start hashes.  --check hashes now, whatever the stamp says.
 *
 * Memory.  Before mapping, the weights plus a runtime floor are compared with
 * what the process may use (RLIMIT_AS, the cgroup's memory limit (v2 or v1),
 * physical RAM): a model that cannot fit says so instead of failing somewhere in mmap
 * or thrashing the page cache.
 *
 * This file, run.c, chat.c and serve.c are all a bundle links of cli/: the
 * compiler, the model cache (curl) and Lua are never reached from here (the
 * bundle is linked with --gc-sections and only the C library dynamically).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cinfer.h"
#include "cli.h"
#include "formats/bundle.h"
#include "kernels/kern.h"

/* What a run needs besides the weights (KV cache and arena pages it touches,
 * scratch, thread stacks, the program): the 0.35B Q4_0 bundle's heap is
 * ~5 MiB resident for short runs and its KV cache at -c 2048 96 MiB (f32), of which
 * a chat touches what it uses; 48 MiB is the floor below which even a short
 * run fails (docs/bundle.md). */
#define BUNDLE_RUNTIME_FLOOR_BYTES (48ull << 20)

static const char *prog_name(const char *argv0) {
    const char *s = strrchr(argv0, '/');
    return s ? s + 1 : argv0;
}

static void usage(FILE *f, const char *name, const bundle_info *bi, int has_server) {
    fprintf(f,
            "%s — %s (%s), a cinfer bundle: the model and its runtime in one file\n\n"
            "usage:\n"
            "  %s [-p TEXT | -f FILE | < FILE] [options]   generate text (options: %s --run-help)\n"
            "  %s --json-schema SCHEMA.json [-p TEXT]      output one JSON value valid under the schema\n"
            "  %s chat [--system TEXT] [options]           chat through the model's template (%s chat -h)\n",
            name, bi->model, bi->precision, name, name, name, name, name);
    if (has_server)
        fprintf(f, "  %s serve [--host H] [--port 8080] ...      OpenAI/Anthropic-compatible HTTP API (%s serve -h)\n",
                name, name);
    fprintf(f,
            "  %s --info                                  model, precision, build, sha256 of the weights\n"
            "  %s --check                                 re-check the weights' sha256 (and signature) now\n"
            "  %s --version | -h\n",
            name, name, name);
}

/* ---- the verified stamp --------------------------------------------------------- */

/* $XDG_CACHE_HOME/cinfer/bundles/<sha256>, or ~/.cache/...; 0 when a
 * directory could be named (not necessarily created yet). */
static int stamp_path(const bundle_info *bi, char *buf, size_t cap, int create) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[3072];
    if (x && *x) snprintf(dir, sizeof dir, "%s/cinfer/bundles", x);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.cache/cinfer/bundles", home);
    else return -1;
    if (create)
        for (char *q = dir + 1; *q; q++)
            if (*q == '/' || !q[1]) {
                char c = q[1] ? *q : 0;
                if (c) *q = 0;
                mkdir(dir, 0755);
                if (c) *q = c;
            }
    char hx[65];
    bundle_hex(bi->payload_sha256, 32, hx);
    snprintf(buf, cap, "%s/%s", dir, hx);
    return 0;
}

/* What identifies an unchanged file: any write moves ctime, a copy has
 * another inode; sig says the signature was checked too. */
static void stamp_line(const struct stat *st, int sig, char *buf, size_t cap) {
    snprintf(buf, cap, "%llu %llu %llu %lld.%09ld %lld.%09ld %d\n", (unsigned long long)st->st_dev,
             (unsigned long long)st->st_ino, (unsigned long long)st->st_size,
             (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec,
             st->st_ctim.tv_nsec, sig);
}

static int stamp_valid(const char *self, const bundle_info *bi, int need_sig) {
    char path[4096], want[256], got[256] = "";
    struct stat st;
    if (stamp_path(bi, path, sizeof path, 0) || stat(self, &st)) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (!fgets(got, sizeof got, f)) got[0] = 0;
    fclose(f);
    stamp_line(&st, 1, want, sizeof want);
    if (!strcmp(got, want)) return 1;
    stamp_line(&st, 0, want, sizeof want);
    return !need_sig && !strcmp(got, want);
}

/* Best effort: a read-only or absent cache only means the next start hashes again. */
static void stamp_write(const char *self, const bundle_info *bi, int sig) {
    char path[4096], tmp[4200], line[256];
    struct stat st;
    if (stamp_path(bi, path, sizeof path, 1) || stat(self, &st)) return;
    stamp_line(&st, sig, line, sizeof line);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    int bad = fputs(line, f) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) unlink(tmp);
}

/* ---- memory ------------------------------------------------------------------------- */

/* The least of RLIMIT_AS, this process's cgroup v2 memory.max and physical
 * RAM, with what set it; 0 when none is known. */
static uint64_t memory_limit(const char **what) {
    uint64_t lim = 0;
    *what = "";
    struct rlimit rl;
    if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY) lim = rl.rlim_cur, *what = "RLIMIT_AS";
    char line[4096];
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && fgets(line, sizeof line, f)) {
        /* cgroup v2 "0::/path" (memory.max), v1 "N:memory:/path" (memory.limit_in_bytes) */
        line[strcspn(line, "\n")] = 0;
        const char *v1 = strstr(line, ":memory:");
        char path[4200];
        if (!strncmp(line, "0::", 3)) snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
        else if (v1) snprintf(path, sizeof path, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", v1 + 8);
        else continue;
        FILE *m = fopen(path, "r");
        unsigned long long v; /* "max" (v2, no limit) does not scan */
        if (m && fscanf(m, "%llu", &v) == 1 && (!lim || v < lim))
            lim = v, *what = v1 ? "cgroup memory.limit_in_bytes" : "cgroup memory.max";
        if (m) fclose(m);
    }
    if (f) fclose(f);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (!lim || (uint64_t)pages * (uint64_t)page < lim))
        lim = (uint64_t)pages * (uint64_t)page, *what = "physical memory";
    return lim;
}

static int check_fits(const char *name, const bundle_info *bi) {
    const char *what;
    uint64_t lim = memory_limit(&what);
    uint64_t need = bi->payload_bytes + BUNDLE_RUNTIME_FLOOR_BYTES;
    if (!lim || need <= lim) return 0;
    fprintf(stderr, "%s: the model cannot fit: it needs at least %.0f MiB (weights %.1f MiB + %.0f MiB "
            "runtime), but this process may use %.0f MiB (%s)\n", name, need / 1048576.0,
            bi->payload_bytes / 1048576.0, BUNDLE_RUNTIME_FLOOR_BYTES / 1048576.0, lim / 1048576.0, what);
    return -1;
}

/* ---- entry --------------------------------------------------------------------------- */

static void print_info(const char *self, const bundle_info *bi, int has_server) {
    char hx[65], pk[65];
    bundle_hex(bi->payload_sha256, 32, hx);
    bundle_hex(bi->pubkey, 32, pk);
    printf("model:      %s\n", bi->model);
    printf("precision:  %s\n", bi->precision);
    printf("target:     %s\n", bi->target);
    printf("built by:   cinfer %s (%s)\n", bi->version, bi->build);
    printf("runtime:    cinfer %s, kernels %s\n", CINFER_VERSION, kern_cpu_label());
    printf("weights:    %llu bytes at offset %llu\n", (unsigned long long)bi->payload_bytes,
           (unsigned long long)bi->payload_offset);
    printf("sha256:     %s\n", hx);
    if (bi->flags & BUNDLE_SIGNED) printf("signed:     Ed25519, public key %s\n", pk);
    else printf("signed:     no\n");
    printf("requires signature at start: %s\n", bi->flags & BUNDLE_REQUIRE_SIGNATURE ? "yes" : "no");
    printf("server:     %s\n", has_server ? "yes (serve)" : "no (build with cinfer bundle --server)");
    printf("file:       %s, %llu bytes\n", self, (unsigned long long)bi->file_bytes);
}

int cli_bundled_main(int argc, char **argv, const struct cf_model_desc *(*describe)(void),
                     void (*forward)(struct cf_env *),
                     int (*serve)(int argc, char **argv, const cli_linked *lk)) {
    const char *name = prog_name(argv[0]);
    char self[4096], err[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "%s: cannot find its own file (/proc/self/exe): %s\n", name, strerror(errno));
        return 1;
    }
    self[n] = 0;
    bundle_info bi;
    if (bundle_read(self, &bi, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", name, err);
        return 1;
    }
    const char *cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) return usage(stdout, name, &bi, serve != NULL), 0;
    if (!strcmp(cmd, "--version")) return printf("%s: cinfer %s bundle of %s\n", name, bi.version, bi.model), 0;
    if (!strcmp(cmd, "--info")) return print_info(self, &bi, serve != NULL), 0;
    const int need_sig = (bi.flags & BUNDLE_REQUIRE_SIGNATURE) != 0;
    const int recheck = !strcmp(cmd, "--check");
    if (recheck || !stamp_valid(self, &bi, need_sig)) {
        const int sig = need_sig || (recheck && (bi.flags & BUNDLE_SIGNED));
        if (bundle_check(self, &bi, sig, NULL, err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", name, err);
            return 1;
        }
        stamp_write(self, &bi, sig);
        if (recheck) {
            char hx[65];
            bundle_hex(bi.payload_sha256, 32, hx);
            printf("%s: weights sha256 %s ok%s\n", name, hx,
                   sig ? "; Ed25519 signature verifies with the key in the bundle" : "");
            return 0;
        }
    }
    if (check_fits(name, &bi)) return 1;
    cli_linked lk = {.describe = describe, .forward = forward, .path = self,
                     .offset = bi.payload_offset, .n_bytes = bi.payload_bytes, .name = name};
    if (!strcmp(cmd, "chat")) return cli_chat_bundle(argc - 1, argv + 1, &lk);
    if (!strcmp(cmd, "serve")) {
        if (!serve) {
            fprintf(stderr, "%s: this bundle was built without the HTTP server (cinfer bundle --server)\n", name);
            return 2;
        }
        return serve(argc - 1, argv + 1, &lk);
    }
    if (!strcmp(cmd, "--run-help")) {
        char *h[] = {argv[0], "--help", NULL};
        return cli_run_bundle(2, h, &lk);
    }
    return cli_run_bundle(argc, argv, &lk);
}
