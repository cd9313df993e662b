/*
 * pull.c — `cinfer pull`, `cinfer list`, `cinfer rm`: fetch model files from
 * a Hugging Face repo into the local cache, show and prune the cache.
 *
 * All the work is in runtime/pull; this file parses flags and renders:
 * a progress bar (bytes, rate, ETA) when stderr is a terminal, one quiet
 * line per event otherwise.  stdout gets only the local paths of the pulled
 * files (one per line), so scripts can use `$(cinfer pull ...)`.
 * Exit status: 0 ok, 1 error, 2 usage.
 */
#include "cli.h"
#include "hub/pull.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ==== cinfer pull ========================================================== */

static void pull_usage(FILE *f) {
    fprintf(f,
            "usage: cinfer pull REPO [FILE|PATTERN] [--revision R] [--dir D] [--endpoint URL] [--list]\n"
            "  REPO            a Hugging Face model repo, namespace/name\n"
            "  FILE|PATTERN    a file path, a glob ('*Q8_0*.gguf') or a part of a name ('Q8_0');\n"
            "                  omitted: the Q4_K_M GGUF, else the smallest with >= 4 bits per weight\n"
            "  --revision R    branch, tag or commit (default main)\n"
            "  --dir D         download into D instead of the cache ($XDG_CACHE_HOME/cinfer/models)\n"
            "  --endpoint URL  Hub server or mirror (default $HF_ENDPOINT, else https://huggingface.co)\n"
            "  --list          list the repo's files and the default choice; download nothing\n"
            "  -q, --quiet     no progress output\n"
            "Downloads are anonymous, resumable (run the same command again after an interruption)\n"
            "and verified (sha256) before they appear under their final name.\n");
}

typedef struct {
    bool tty, quiet, bar_shown;
    /* not a terminal: a plain line at each quarter of a file, or every 30 s */
    int last_quarter;
    double t_last_line;
} render;


static void clear_bar(render *r) {
    if (r->bar_shown) fprintf(stderr, "\r\033[K");
    r->bar_shown = false;
}

static int on_event(void *user, const pull_event *ev) {
    render *r = user;
    if (r->quiet) return 0;
    char done[32], total[32], rate[32], eta[32];
    pull_fmt_bytes(ev->done_bytes, done, sizeof done);
    pull_fmt_bytes(ev->total_bytes, total, sizeof total);
    pull_fmt_bytes((int64_t)ev->rate_bytes_s, rate, sizeof rate);
    switch (ev->kind) {
    case PULL_EV_PROGRESS:
        if (!r->tty) {
            int quarter = ev->total_bytes > 0 ? (int)(4 * ev->done_bytes / ev->total_bytes) : 0;
            double now = cli_now_ms();
            if ((quarter > r->last_quarter && quarter < 4) || now - r->t_last_line >= 30e3) {
                cli_fmt_eta(ev->rate_bytes_s > 0 ? (double)(ev->total_bytes - ev->done_bytes) / ev->rate_bytes_s : -1,
                        eta, sizeof eta);
                fprintf(stderr, "pull: %s: %d%% (%s of %s, %s/s, ETA %s)\n", ev->file,
                        ev->total_bytes > 0 ? (int)(100 * ev->done_bytes / ev->total_bytes) : 0, done, total,
                        ev->rate_bytes_s > 0 ? rate : "-", eta);
                r->last_quarter = quarter > r->last_quarter ? quarter : r->last_quarter;
                r->t_last_line = now;
            }
            return 0;
        }
        {
            int pct = ev->total_bytes > 0 ? (int)(100.0 * (double)ev->done_bytes / (double)ev->total_bytes) : 100;
            char bar[25];
            int fill = pct * 24 / 100;
            for (int i = 0; i < 24; i++) bar[i] = i < fill ? '#' : '.';
            bar[24] = 0;
            cli_fmt_eta(ev->rate_bytes_s > 0 ? (double)(ev->total_bytes - ev->done_bytes) / ev->rate_bytes_s : -1, eta,
                    sizeof eta);
            const char *name = strrchr(ev->file, '/') ? strrchr(ev->file, '/') + 1 : ev->file;
            fprintf(stderr, "\r\033[K%-28.28s %3d%% [%s] %s / %s  %s/s  ETA %s", name, pct, bar, done, total,
                    ev->rate_bytes_s > 0 ? rate : "-", eta);
            r->bar_shown = true;
        }
        return 0;
    case PULL_EV_START:
        clear_bar(r);
        r->last_quarter = ev->total_bytes > 0 ? (int)(4 * ev->resumed_from / ev->total_bytes) : 0;
        r->t_last_line = cli_now_ms();
        if (ev->resumed_from > 0) fprintf(stderr, "pull: %s: resuming at %s of %s\n", ev->file, done, total);
        else fprintf(stderr, "pull: %s: downloading %s\n", ev->file, total);
        return 0;
    case PULL_EV_RETRY:
        clear_bar(r);
        fprintf(stderr, "pull: %s%s%s; retry %d in %.1f s\n", ev->file, *ev->file ? ": " : "", ev->msg,
                ev->attempt, ev->delay_ms / 1000.0);
        return 0;
    case PULL_EV_RESTART:
        clear_bar(r);
        fprintf(stderr, "pull: %s: %s\n", ev->file, ev->msg);
        return 0;
    case PULL_EV_VERIFY:
        return 0;
    case PULL_EV_SKIP:
        clear_bar(r);
        fprintf(stderr, "pull: %s: %s\n", ev->file, ev->msg);
        return 0;
    case PULL_EV_DONE:
        clear_bar(r);
        pull_fmt_bytes(ev->done_bytes - ev->resumed_from, done, sizeof done);
        fprintf(stderr, "pull: %s: %s in %.1f s (%s/s), verified\n", ev->file, done, ev->elapsed_s, rate);
        return 0;
    }
    return 0;
}

/* Print a name from the server with control bytes escaped. */
static void put_name(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
}

static void print_listing(FILE *f, const pull_listing *l, const size_t *sel, size_t n_sel) {
    bool any_gguf = false;
    for (size_t i = 0; i < l->n_files; i++) {
        size_t n = strlen(l->files[i].path);
        any_gguf |= l->files[i].safe && n > 5 && !strcasecmp(l->files[i].path + n - 5, ".gguf");
    }
    fprintf(f, "%s:\n", any_gguf ? "GGUF files" : "files");
    for (size_t i = 0; i < l->n_files; i++) {
        const pull_file *pf = &l->files[i];
        size_t n = strlen(pf->path);
        if (!pf->safe || (any_gguf && (n <= 5 || strcasecmp(pf->path + n - 5, ".gguf")))) continue;
        bool chosen = false;
        for (size_t k = 0; k < n_sel; k++) chosen |= sel[k] == i;
        char sz[32];
        pull_fmt_bytes(pf->size_bytes, sz, sizeof sz);
        int bits = pull_quant_bits(pf->path);
        fprintf(f, " %c %10s  ", chosen ? '*' : ' ', sz);
        put_name(f, pf->path);
        if (bits) fprintf(f, "  (%d-bit)", bits);
        fputc('\n', f);
    }
}

int cli_pull(int argc, char **argv) {
    const char *repo = NULL, *pattern = NULL;
    bool list_only = false, quiet = false;
    pull_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { pull_usage(stdout); return 0; }
        else if (!strcmp(a, "--revision") && has_val) o.revision = argv[++i];
        else if (!strcmp(a, "--dir") && has_val) o.dest_dir = argv[++i];
        else if (!strcmp(a, "--endpoint") && has_val) o.endpoint = argv[++i];
        else if (!strcmp(a, "--list")) list_only = true;
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = true;
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "cinfer pull: unknown option or missing value: '%s'\n", a);
            pull_usage(stderr);
            return 2;
        } else if (!repo) repo = a;
        else if (!pattern) pattern = a;
        else {
            fprintf(stderr, "cinfer pull: unexpected argument '%s'\n", a);
            pull_usage(stderr);
            return 2;
        }
    }
    if (!repo) { pull_usage(stderr); return 2; }
    char err[1024];
    if (pull_check_repo(repo, err, sizeof err) || (o.revision && pull_check_revision(o.revision, err, sizeof err))) {
        fprintf(stderr, "cinfer pull: %s\n", err);
        return 2;
    }
    /* a write past `ulimit -f` should fail with EFBIG (and keep the partial
     * file), not kill the process */
    signal(SIGXFSZ, SIG_IGN);
    const char *term = getenv("TERM");
    render r = {.tty = isatty(STDERR_FILENO) && !(term && !strcmp(term, "dumb")), .quiet = quiet};
    o.progress = on_event;
    o.progress_user = &r;

    pull_listing l;
    int rc = pull_list_remote(&o, repo, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "cinfer pull: %s\n", err);
        return 1;
    }
    for (size_t i = 0; i < l.n_files; i++)
        if (!l.files[i].safe) {
            fprintf(stderr, "cinfer pull: ignoring unsafe file name listed by the server: '");
            put_name(stderr, l.files[i].path);
            fprintf(stderr, "'\n");
        }
    size_t *sel = calloc(l.n_files + 1, sizeof *sel), n_sel = 0;
    if (!sel) { pull_listing_free(&l); fprintf(stderr, "cinfer pull: out of memory\n"); return 1; }
    char why[1024];
    int src = pull_select(&l, pattern, sel, &n_sel, why, sizeof why);
    int status = 0;
    if (list_only) {
        print_listing(stdout, &l, sel, n_sel);
        if (src) printf("%s\n", why);
        else printf("%s: %s\n", pattern ? "matching" : "default", why);
        status = src ? 1 : 0;
        goto out;
    }
    if (!pattern && !quiet) print_listing(stderr, &l, sel, n_sel);
    if (src) {
        fprintf(stderr, "cinfer pull: %s: %s\n", repo, why);
        status = 1;
        goto out;
    }
    if (!quiet) fprintf(stderr, "pull: %s %s\n", pattern ? "pulling" : "choosing", why);
    const char *first_gguf = NULL;
    for (size_t k = 0; k < n_sel; k++) {
        const pull_file *f = &l.files[sel[k]];
        char path[8192];
        rc = pull_download(&o, repo, f, path, sizeof path, err, sizeof err);
        clear_bar(&r);
        if (rc) {
            fprintf(stderr, "cinfer pull: %s\n", err);
            status = 1;
            break;
        }
        printf("%s\n", path);
        fflush(stdout);
        size_t n = strlen(f->path);
        if (!first_gguf && n > 5 && !strcasecmp(f->path + n - 5, ".gguf")) first_gguf = f->path;
    }
    if (!status && !quiet && !o.dest_dir && first_gguf)
        fprintf(stderr, "pull: run it with: cinfer run %s%s%s:%s\n", repo, o.revision ? "@" : "",
                o.revision ? o.revision : "", first_gguf);
out:
    free(sel);
    pull_listing_free(&l);
    return status;
}

/* ==== cinfer list ========================================================== */

typedef struct { int n; int64_t bytes; } list_tot;

static int list_cb(void *user, const pull_cache_entry *e) {
    list_tot *t = user;
    char sz[32];
    pull_fmt_bytes(e->size_bytes, sz, sizeof sz);
    bool main_rev = !strcmp(e->revision, "main");
    printf("%10s  %s%s%s:", sz, e->repo, main_rev ? "" : "@", main_rev ? "" : e->revision);
    put_name(stdout, e->file);
    if (e->partial) {
        char ex[32];
        pull_fmt_bytes(e->expected_bytes, ex, sizeof ex);
        if (e->expected_bytes > 0)
            printf("  (partial: %d%% of %s; `cinfer pull` again to resume)",
                   (int)(100.0 * (double)e->size_bytes / (double)e->expected_bytes), ex);
        else printf("  (partial)");
    }
    putchar('\n');
    t->n++;
    t->bytes += e->size_bytes;
    return 0;
}

int cli_list(int argc, char **argv) {
    if (argc > 1) {
        if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
            printf("usage: cinfer list      the models in the local cache ($XDG_CACHE_HOME/cinfer/models)\n");
            return 0;
        }
        fprintf(stderr, "usage: cinfer list\n");
        return 2;
    }
    char root[4096], err[1024];
    if (pull_cache_root(root, sizeof root, err, sizeof err)) {
        fprintf(stderr, "cinfer list: %s\n", err);
        return 1;
    }
    list_tot t = {0};
    if (pull_cache_list(root, list_cb, &t, err, sizeof err)) {
        fprintf(stderr, "cinfer list: %s\n", err);
        return 1;
    }
    char sz[32];
    pull_fmt_bytes(t.bytes, sz, sizeof sz);
    if (t.n == 0) fprintf(stderr, "no models in %s/models (add one with `cinfer pull REPO`)\n", root);
    else fprintf(stderr, "%d file%s, %s in %s/models\n", t.n, t.n == 1 ? "" : "s", sz, root);
    return 0;
}

/* ==== cinfer rm ============================================================ */

int cli_rm(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        FILE *f = argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? stdout : stderr;
        fprintf(f, "usage: cinfer rm REPO[@REVISION][:FILE]   remove a cached file (all revisions unless\n"
                   "                                         @REVISION), or the whole repo\n");
        return f == stdout ? 0 : 2;
    }
    const char *spec = argv[1];
    char repo[256], rev[300] = "", err[1024];
    size_t n = strcspn(spec, "@:");
    if (n >= sizeof repo) {
        fprintf(stderr, "cinfer rm: '%s': repo id too long\n", spec);
        return 2;
    }
    memcpy(repo, spec, n);
    repo[n] = 0;
    const char *p = spec + n, *file = NULL;
    if (*p == '@') {
        size_t k = strcspn(p + 1, ":");
        snprintf(rev, sizeof rev, "%.*s", (int)(k < sizeof rev - 1 ? k : sizeof rev - 1), p + 1);
        p += 1 + k;
    }
    if (*p == ':') file = p + 1;
    int64_t freed = 0;
    int rc = pull_cache_rm(NULL, repo, rev[0] ? rev : NULL, file, &freed, err, sizeof err);
    if (rc) {
        fprintf(stderr, "cinfer rm: %s\n", err);
        return rc == PULL_EINVAL ? 2 : 1;
    }
    char sz[32];
    pull_fmt_bytes(freed, sz, sizeof sz);
    fprintf(stderr, "removed %s (%s freed)\n", spec, sz);
    return 0;
}
