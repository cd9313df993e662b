/*
 * test_pull.c — `cinfer pull` against a fake Hugging Face Hub on 127.0.0.1
 * (tests/pull_server.c) serving synthetic random files, so nothing here needs
 * ../shared or the network.
 *
 * Shown: a full download verifies (LFS sha256 via a CDN redirect, non-LFS via
 * the git blob sha1, a paginated listing); the server dropping the connection
 * at 10 random offsets and the `cinfer` binary SIGKILLed at 10 random points
 * both resume to a byte-identical, verified file; a corrupted byte is caught
 * (no final file); 401/404 messages; the remote file changing between runs
 * and between listing and download; a server that ignores Range; a reboot
 * (boot id changed) trusting only fdatasync'ed bytes; a write failure (ulimit
 * -f) keeping the partial file; names that try to escape the cache; the
 * default file choice; cache list / rm / resolve; the CLI end to end.
 *
 * Random offsets come from a seed printed by each test (PULL_TEST_SEED fixes it).
 */
#include "hub/pull.h"
#include "pull_server.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* snprintf minus gcc's truncation warnings (test paths are short) */
static int sfmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sfmt(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
    return n;
}

/* ==== helpers ============================================================== */

static uint64_t seed_for(const char *test) {
    const char *e = getenv("PULL_TEST_SEED");
    uint64_t s = e && *e ? strtoull(e, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    printf("    %s: seed %llu (PULL_TEST_SEED to repeat)\n", test, (unsigned long long)s);
    return s ? s : 1;
}

static uint64_t rnd(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static unsigned char *rand_bytes(size_t n, uint64_t seed) {
    unsigned char *p = malloc(n ? n : 1);
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(rnd(&s) >> 56);
    return p;
}

static int cmp_size(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* n distinct sorted offsets in [lo, hi) */
static void rand_offsets(uint64_t *s, size_t *out, size_t n, size_t lo, size_t hi) {
    for (size_t i = 0; i < n; i++) {
    again:
        out[i] = lo + (size_t)(rnd(s) % (hi - lo));
        for (size_t j = 0; j < i; j++)
            if (out[j] == out[i]) goto again;
    }
    qsort(out, n, sizeof *out, cmp_size);
}

static bool exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

static int64_t fsize(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (int64_t)st.st_size : -1;
}

static bool file_equals(const char *path, const unsigned char *data, size_t n) {
    size_t len = 0;
    char *b = read_file(path, &len);
    bool ok = b && len == n && memcmp(b, data, n) == 0;
    free(b);
    return ok;
}

/* A fresh directory under the test tmpdir (static ring of 8). */
static const char *fresh_dir(const char *name) {
    static char ring[8][512];
    static int k;
    char *p = ring[k++ & 7];
    sfmt(p, sizeof ring[0], "%s/%s", test_tmpdir(), name);
    for (char *q = p + strlen(test_tmpdir()) + 1; *q; q++)
        if (*q == '/') { *q = 0; mkdir(p, 0755); *q = '/'; }
    mkdir(p, 0755);
    return p;
}

typedef struct {
    int n[8];                /* per pull_event_kind */
    char last[8][512];       /* last msg per kind */
    int64_t cancel_at;       /* PROGRESS with done_bytes >= this cancels (0: never) */
} ev_log;

static int ev_cb(void *u, const pull_event *e) {
    ev_log *l = u;
    l->n[e->kind]++;
    if (e->msg) sfmt(l->last[e->kind], sizeof l->last[0], "%s", e->msg);
    return l->cancel_at > 0 && e->kind == PULL_EV_PROGRESS && e->done_bytes >= l->cancel_at;
}

static pull_opts opts_for(pull_server *s, const char *root, ev_log *log) {
    return (pull_opts){.endpoint = ps_endpoint(s), .cache_root = root, .retry_base_ms = 5, .max_retries = 4,
                       .stall_timeout_s = 10, .progress = ev_cb, .progress_user = log};
}

/* List the repo and download the one file named `file`. */
static int pull_one(const pull_opts *o, const char *repo, const char *file, char *path, size_t cap, char *err,
                    size_t err_len) {
    pull_listing l;
    int rc = pull_list_remote(o, repo, &l, err, err_len);
    if (rc) return rc;
    rc = PULL_ENOTFOUND;
    sfmt(err, err_len, "'%s' not in the listing", file);
    for (size_t i = 0; i < l.n_files; i++)
        if (!strcmp(l.files[i].path, file)) rc = pull_download(o, repo, &l.files[i], path, cap, err, err_len);
    pull_listing_free(&l);
    return rc;
}

static char *suffixed(const char *p, const char *suf) {
    static char buf[4][4200];
    static int k;
    char *b = buf[k++ & 3];
    sfmt(b, sizeof buf[0], "%s%s", p, suf);
    return b;
}

#define START_SERVER(s)                                           \
    pull_server *s = ps_start();                                  \
    if (!s) { test_fail(__FILE__, __LINE__, "ps_start failed"); return; }

/* ==== names and selection ================================================== */

TEST(pull, names) {
    static const char *bad_repo[] = {"", "a", "a/b/c", "../b", "a/..", "/a/b", "a/b/", "a/.b", "a/b.", "a/b c",
                                     "a/b\\c", "a\x01/b", "a/b:c", "a--b/c", "a/b..c", "-a/b", "a/" };
    for (size_t i = 0; i < sizeof bad_repo / sizeof *bad_repo; i++)
        EXPECT_MSG(pull_check_repo(bad_repo[i], NULL, 0) == PULL_EINVAL, "repo '%s' accepted", bad_repo[i]);
    static const char *good_repo[] = {"TheBloke/Llama-2-7B-GGUF", "ggml-org/gemma-3-1b-it-GGUF", "a/b", "user_1/m.v2"};
    for (size_t i = 0; i < sizeof good_repo / sizeof *good_repo; i++)
        EXPECT_MSG(pull_check_repo(good_repo[i], NULL, 0) == 0, "repo '%s' refused", good_repo[i]);
    static const char *bad_file[] = {"", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a\\b", "x\x01y",
                                     "x/", "x.gguf.partial", "x.gguf.partial.json", "./x", "..", "a/\x7f"};
    for (size_t i = 0; i < sizeof bad_file / sizeof *bad_file; i++)
        EXPECT_MSG(pull_check_file(bad_file[i], NULL, 0) == PULL_EINVAL, "file '%s' accepted", bad_file[i]);
    static const char *good_file[] = {"model.gguf", "sub/dir/model-Q4_K_M.gguf", "name with space.gguf", "..x",
                                      "x..", "tokenizer.json"};
    for (size_t i = 0; i < sizeof good_file / sizeof *good_file; i++)
        EXPECT_MSG(pull_check_file(good_file[i], NULL, 0) == 0, "file '%s' refused", good_file[i]);
    static const char *bad_rev[] = {"", "../main", "main/..", "a b", "/main", "main/", "a\\b", "a:b"};
    for (size_t i = 0; i < sizeof bad_rev / sizeof *bad_rev; i++)
        EXPECT_MSG(pull_check_revision(bad_rev[i], NULL, 0) == PULL_EINVAL, "revision '%s' accepted", bad_rev[i]);
    static const char *good_rev[] = {"main", "v1.0", "refs/pr/1", "0123456789abcdef0123456789abcdef01234567"};
    for (size_t i = 0; i < sizeof good_rev / sizeof *good_rev; i++)
        EXPECT_MSG(pull_check_revision(good_rev[i], NULL, 0) == 0, "revision '%s' refused", good_rev[i]);
    char err[256];
    EXPECT(pull_check_repo("a/b..c", err, sizeof err) == PULL_EINVAL && strstr(err, "'..'"));

    static const struct { const char *name; int bits; } q[] = {
        {"x.Q4_K_M.gguf", 4}, {"x-IQ3_XXS.gguf", 3}, {"x-f16.gguf", 16}, {"x-BF16.gguf", 16}, {"x-Q8_0.gguf", 8},
        {"Qwen2.5-0.5B-Instruct-Q6_K.gguf", 6}, {"model.gguf", 0}, {"ggml-model-q4_0.gguf", 4},
        {"x-TQ1_0.gguf", 1}, {"x-MXFP4.gguf", 4}, {"dir/Q5_K_S/m-Q5_K_S-00001-of-00002.gguf", 5},
        {"x-IQ4_NL.gguf", 4}, {"x-Q2_K.gguf", 2}, {"x-F32.gguf", 32},
    };
    for (size_t i = 0; i < sizeof q / sizeof *q; i++)
        EXPECT_MSG(pull_quant_bits(q[i].name) == q[i].bits, "pull_quant_bits(%s) = %d, expected %d", q[i].name,
                   pull_quant_bits(q[i].name), q[i].bits);
}

static pull_listing mk_listing(const char *const *names, const int64_t *sizes, size_t n) {
    pull_listing l = {calloc(n, sizeof(pull_file)), n};
    for (size_t i = 0; i < n; i++) {
        l.files[i].path = strdup(names[i]);
        l.files[i].size_bytes = sizes[i];
        l.files[i].safe = pull_check_file(names[i], NULL, 0) == 0;
    }
    return l;
}

/* Selected names joined with ','. */
static const char *select_str(const char *const *names, const int64_t *sizes, size_t n, const char *pat, int *rc,
                              char *why, size_t why_len) {
    static char out[1024];
    pull_listing l = mk_listing(names, sizes, n);
    size_t sel[32], n_sel = 0;
    *rc = pull_select(&l, pat, sel, &n_sel, why, why_len);
    out[0] = 0;
    for (size_t i = 0; i < n_sel; i++) {
        size_t k = strlen(out);
        sfmt(out + k, sizeof out - k, "%s%s", i ? "," : "", names[sel[i]]);
    }
    pull_listing_free(&l);
    return out;
}

TEST(pull, select_default) {
    char why[512];
    int rc;
    static const char *a[] = {"m-Q2_K.gguf", "m-Q4_K_M.gguf", "m-Q4_0.gguf", "m-Q8_0.gguf", "mmproj-m-F16.gguf",
                              "README.md"};
    static const int64_t as[] = {100, 300, 280, 500, 50, 1};
    EXPECT_STR_EQ(select_str(a, as, 6, NULL, &rc, why, sizeof why), "m-Q4_K_M.gguf");
    EXPECT(rc == 0 && strstr(why, "Q4_K_M is the usual"));

    static const char *b[] = {"m-Q2_K.gguf", "m-Q3_K_S.gguf", "m-Q5_0.gguf", "m-IQ4_XS.gguf", "m-F16.gguf"};
    static const int64_t bs[] = {100, 150, 350, 260, 1000};
    EXPECT_STR_EQ(select_str(b, bs, 5, NULL, &rc, why, sizeof why), "m-IQ4_XS.gguf");
    EXPECT_MSG(rc == 0 && strstr(why, "smallest with at least 4 bits"), "why: %s", why);

    static const char *c[] = {"big-Q8_0.gguf", "Q4/big-Q4_K_M-00002-of-00002.gguf", "Q4/big-Q4_K_M-00001-of-00002.gguf"};
    static const int64_t cs[] = {500, 200, 200};
    EXPECT_STR_EQ(select_str(c, cs, 3, NULL, &rc, why, sizeof why),
                  "Q4/big-Q4_K_M-00002-of-00002.gguf,Q4/big-Q4_K_M-00001-of-00002.gguf");
    EXPECT_MSG(strstr(why, "2 shards") && strstr(why, "400 B"), "why: %s", why);

    static const char *d[] = {"model.safetensors", "config.json", "tokenizer.json", "README.md", "model.onnx"};
    static const int64_t ds[] = {500, 2, 3, 4, 5};
    EXPECT_STR_EQ(select_str(d, ds, 5, NULL, &rc, why, sizeof why), "model.safetensors,config.json,tokenizer.json");
    EXPECT(rc == 0 && strstr(why, "safetensors"));

    static const char *e[] = {"a.gguf", "b.gguf", "c-Q3_K_M.gguf"};
    static const int64_t es[] = {500, 100, 50};
    EXPECT_STR_EQ(select_str(e, es, 3, NULL, &rc, why, sizeof why), "b.gguf");
    static const char *e2[] = {"m-Q2_K.gguf", "m-Q3_K_M.gguf", "m-Q3_K_S.gguf", "m-IQ2_XS.gguf"};
    static const int64_t e2s[] = {100, 150, 140, 90};
    EXPECT_STR_EQ(select_str(e2, e2s, 4, NULL, &rc, why, sizeof why), "m-Q3_K_S.gguf");
    EXPECT_MSG(strstr(why, "below 4 bits"), "why: %s", why);

    static const char *f[] = {"README.md", "x.bin"};
    static const int64_t fs[] = {1, 2};
    select_str(f, fs, 2, NULL, &rc, why, sizeof why);
    EXPECT_EQ_I(rc, PULL_ENOTFOUND);

    /* patterns: substring, glob, exact; unsafe names never match */
    EXPECT_STR_EQ(select_str(a, as, 6, "q8_0", &rc, why, sizeof why), "m-Q8_0.gguf");
    EXPECT_STR_EQ(select_str(a, as, 6, "*Q4*", &rc, why, sizeof why), "m-Q4_K_M.gguf,m-Q4_0.gguf");
    EXPECT_STR_EQ(select_str(a, as, 6, "README.md", &rc, why, sizeof why), "README.md");
    select_str(a, as, 6, "Q9", &rc, why, sizeof why);
    EXPECT_EQ_I(rc, PULL_ENOTFOUND);
    static const char *g[] = {"../../evil-Q4_K_M.gguf", "ok-Q8_0.gguf", "/abs-Q4_K_M.gguf"};
    static const int64_t gs[] = {1, 2, 3};
    EXPECT_STR_EQ(select_str(g, gs, 3, NULL, &rc, why, sizeof why), "ok-Q8_0.gguf");
    EXPECT_STR_EQ(select_str(g, gs, 3, "*", &rc, why, sizeof why), "ok-Q8_0.gguf");
    select_str(g, gs, 3, "../../evil-Q4_K_M.gguf", &rc, why, sizeof why);
    EXPECT_EQ_I(rc, PULL_EINVAL);
}

/* ==== downloads ============================================================ */

TEST(pull, full_download) {
    uint64_t seed = seed_for("pull/full_download");
    START_SERVER(s);
    size_t n1 = 1000003, n2 = 600001, n3 = 1234;
    unsigned char *d1 = rand_bytes(n1, seed), *d2 = rand_bytes(n2, seed + 1), *d3 = rand_bytes(n3, seed + 2);
    ps_add_repo(s, "test/tiny", false);
    ps_set_file(s, "test/tiny", "tiny-Q8_0.gguf", d2, n2, true);
    ps_set_file(s, "test/tiny", "tiny-Q4_K_M.gguf", d1, n1, true);
    ps_set_file(s, "test/tiny", "config.json", d3, n3, false);
    ps_set_file(s, "test/tiny", "sub/dir/tiny-F16.gguf", d2, n2, true);
    ps_set_file(s, "test/tiny", "README.md", "hi\n", 3, false);
    ps_page_size(s, 2); /* three pages, joined through Link: rel="next" */

    const char *root = fresh_dir("full");
    ev_log log = {0};
    pull_opts o = opts_for(s, root, &log);
    char err[1024], path[4096];
    pull_listing l;
    EXPECT_EQ_I(pull_list_remote(&o, "test/tiny", &l, err, sizeof err), 0);
    EXPECT_EQ_I(l.n_files, 5);
    EXPECT_EQ_I(ps_get_stats(s).n_tree, 3);
    size_t sel[8], n_sel = 0;
    char why[512];
    EXPECT_EQ_I(pull_select(&l, NULL, sel, &n_sel, why, sizeof why), 0);
    EXPECT_EQ_I(n_sel, 1);
    EXPECT_STR_EQ(l.files[sel[0]].path, "tiny-Q4_K_M.gguf");
    EXPECT_STR_EQ(l.files[sel[0]].sha256, ps_sha256(s, "test/tiny", "tiny-Q4_K_M.gguf"));
    int rc = pull_download(&o, "test/tiny", &l.files[sel[0]], path, sizeof path, err, sizeof err);
    EXPECT_MSG(rc == 0, "pull_download: %d %s", rc, err);
    char want[4096];
    sfmt(want, sizeof want, "%s/models/test/tiny/main/tiny-Q4_K_M.gguf", root);
    EXPECT_STR_EQ(path, want);
    EXPECT(file_equals(path, d1, n1));
    EXPECT(!exists(suffixed(path, ".partial")) && !exists(suffixed(path, ".partial.json")));
    EXPECT_EQ_I(log.n[PULL_EV_START], 1);
    EXPECT_EQ_I(log.n[PULL_EV_DONE], 1);
    EXPECT_EQ_I(ps_get_stats(s).n_cdn, 1); /* through the CDN redirect */
    struct stat st;
    EXPECT(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);

    /* non-LFS (git blob sha1) and a file in a subdirectory */
    for (size_t i = 0; i < l.n_files; i++) {
        if (strcmp(l.files[i].path, "config.json") && strcmp(l.files[i].path, "sub/dir/tiny-F16.gguf")) continue;
        rc = pull_download(&o, "test/tiny", &l.files[i], path, sizeof path, err, sizeof err);
        EXPECT_MSG(rc == 0, "%s: %s", l.files[i].path, err);
        bool cfg = !strcmp(l.files[i].path, "config.json");
        EXPECT(file_equals(path, cfg ? d3 : d2, cfg ? n3 : n2));
    }
    sfmt(want, sizeof want, "%s/models/test/tiny/main/sub/dir/tiny-F16.gguf", root);
    EXPECT(file_equals(want, d2, n2));

    /* again: verified in place, nothing fetched */
    int cdn = ps_get_stats(s).n_cdn;
    memset(&log, 0, sizeof log);
    rc = pull_download(&o, "test/tiny", &l.files[sel[0]], path, sizeof path, err, sizeof err);
    EXPECT_EQ_I(rc, 0);
    EXPECT_EQ_I(log.n[PULL_EV_SKIP], 1);
    EXPECT_EQ_I(ps_get_stats(s).n_cdn, cdn);

    /* --dir: outside the cache, same relative layout */
    const char *dest = fresh_dir("full-dest");
    pull_opts od = o;
    od.dest_dir = dest;
    for (size_t i = 0; i < l.n_files; i++)
        if (!strcmp(l.files[i].path, "sub/dir/tiny-F16.gguf"))
            EXPECT_EQ_I(pull_download(&od, "test/tiny", &l.files[i], path, sizeof path, err, sizeof err), 0);
    sfmt(want, sizeof want, "%s/sub/dir/tiny-F16.gguf", dest);
    EXPECT_STR_EQ(path, want);
    EXPECT(file_equals(want, d2, n2));

    pull_listing_free(&l);
    ps_stop(s);
    free(d1), free(d2), free(d3);
}

TEST(pull, cut_server_drops) {
    uint64_t seed = seed_for("pull/cut_server_drops");
    START_SERVER(s);
    size_t n = 2000000;
    unsigned char *d = rand_bytes(n, seed);
    ps_add_repo(s, "test/cut", false);
    ps_set_file(s, "test/cut", "cut-Q4_K_M.gguf", d, n, true);
    size_t cuts[10];
    rand_offsets(&seed, cuts, 10, 1, n);
    ps_add_cuts(s, cuts, 10);
    const char *root = fresh_dir("cut");
    ev_log log = {0};
    pull_opts o = opts_for(s, root, &log);
    char err[1024], path[4096];
    int rc = pull_one(&o, "test/cut", "cut-Q4_K_M.gguf", path, sizeof path, err, sizeof err);
    EXPECT_MSG(rc == 0, "rc %d: %s", rc, err);
    EXPECT(file_equals(path, d, n));
    EXPECT_EQ_I(ps_cuts_left(s), 0);
    ps_stats st = ps_get_stats(s);
    EXPECT_MSG(log.n[PULL_EV_RETRY] == 10, "%d retries, expected 10 (last: %s)", log.n[PULL_EV_RETRY],
               log.last[PULL_EV_RETRY]);
    EXPECT_EQ_I(st.n_range, 10);
    EXPECT_EQ_I(log.n[PULL_EV_RESTART], 0);
    printf("    10 drops: %d requests, %lld bytes served for %zu\n", st.n_cdn, (long long)st.bytes_served, n);
    EXPECT(st.bytes_served < (int64_t)n + 10 * 65536);
    ps_stop(s);
    free(d);
}

static pid_t spawn_cinfer(char *const argv[], const char *xdg, const char *out_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof *env), xdg_var[4200];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "XDG_CACHE_HOME=", 15) && strncmp(environ[i], "HF_ENDPOINT=", 12))
            env[k++] = environ[i];
    sfmt(xdg_var, sizeof xdg_var, "XDG_CACHE_HOME=%s", xdg);
    env[k++] = xdg_var;
    env[k] = NULL;
    pid_t pid = -1;
    if (posix_spawn(&pid, cinfer_bin(), &fa, NULL, argv, env) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    return pid;
}

TEST(pull, cut_sigkill) {
    if (access(cinfer_bin(), X_OK) != 0) SKIP("%s not built", cinfer_bin());
    uint64_t seed = seed_for("pull/cut_sigkill");
    START_SERVER(s);
    size_t n = 1500000;
    unsigned char *d = rand_bytes(n, seed);
    ps_add_repo(s, "test/kill", false);
    ps_set_file(s, "test/kill", "kill-Q4_K_M.gguf", d, n, true);
    ps_throttle(s, 3000000); /* ~0.5 s for the file: time to kill it mid-way */
    const char *xdg = fresh_dir("kill");
    char final[4200], out[4200];
    sfmt(final, sizeof final, "%s/cinfer/models/test/kill/main/kill-Q4_K_M.gguf", xdg);
    char part[4300];
    sfmt(part, sizeof part, "%s.partial", final);
    char *argv[] = {"cinfer", "pull", "test/kill", "kill-Q4_K_M.gguf", "--endpoint", (char *)ps_endpoint(s), NULL};
    size_t kills[10];
    rand_offsets(&seed, kills, 10, 20000, n - 20000);
    int64_t prev = 0;
    for (int k = 0; k <= 10; k++) {
        sfmt(out, sizeof out, "%s/run%d.txt", xdg, k);
        pid_t pid = spawn_cinfer(argv, xdg, out);
        if (pid < 0) { test_fail(__FILE__, __LINE__, "spawn %s failed", cinfer_bin()); break; }
        int status = 0;
        if (k < 10) {
            int64_t target = (int64_t)kills[k] > prev + 16384 ? (int64_t)kills[k] : prev + 16384, have = -1;
            bool exited = false;
            for (int t = 0; t < 20000; t++) { /* up to 20 s */
                have = fsize(part);
                if (have >= target) break;
                if (waitpid(pid, &status, WNOHANG) == pid) { exited = true; break; }
                usleep(500);
            }
            if (exited) {
                char *o = read_file(out, NULL);
                test_fail(__FILE__, __LINE__, "run %d ended before byte %lld (status %d): %s", k, (long long)target,
                          status, o ? o : "");
                free(o);
                break;
            }
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
            EXPECT_MSG(!exists(final), "run %d: a final file exists after SIGKILL", k);
            EXPECT(exists(suffixed(final, ".partial.json")));
            int64_t now = fsize(part);
            EXPECT_MSG(now >= target && now < (int64_t)n, "run %d: partial %lld bytes, target %lld", k,
                       (long long)now, (long long)target);
            prev = now;
        } else {
            waitpid(pid, &status, 0);
            EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "final run status %d", status);
        }
        if (k > 0) { /* every run after the first resumed where the last one was killed */
            char *o = read_file(out, NULL);
            EXPECT_MSG(o && strstr(o, "resuming at"), "run %d did not resume: %s", k, o ? o : "(no output)");
            free(o);
        }
        if (test_failed()) break;
    }
    EXPECT(file_equals(final, d, n));
    EXPECT(!exists(part) && !exists(suffixed(final, ".partial.json")));
    ps_stats st = ps_get_stats(s);
    printf("    10 SIGKILLs: %d range requests, %lld bytes served for %zu\n", st.n_range, (long long)st.bytes_served, n);
    EXPECT_EQ_I(st.n_range, 10);
    EXPECT_MSG(st.bytes_served < (int64_t)n * 3 / 2, "served %lld bytes for a %zu-byte file",
               (long long)st.bytes_served, n);
    ps_stop(s);
    free(d);
}

TEST(pull, corrupt_byte) {
    uint64_t seed = seed_for("pull/corrupt_byte");
    START_SERVER(s);
    size_t n = 300000, m = 5000;
    unsigned char *d = rand_bytes(n, seed), *c = rand_bytes(m, seed + 7);
    ps_add_repo(s, "test/bad", false);
    ps_set_file(s, "test/bad", "bad-Q4_K_M.gguf", d, n, true);
    ps_set_file(s, "test/bad", "config.json", c, m, false);
    ps_corrupt(s, "test/bad", "bad-Q4_K_M.gguf", (size_t)(rnd(&seed) % n));
    ps_corrupt(s, "test/bad", "config.json", 17);
    const char *root = fresh_dir("corrupt");
    ev_log log = {0};
    pull_opts o = opts_for(s, root, &log);
    char err[1024], path[4096], final[4200];
    int rc = pull_one(&o, "test/bad", "bad-Q4_K_M.gguf", path, sizeof path, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_EVERIFY);
    EXPECT_MSG(strstr(err, "sha256 mismatch") && strstr(err, ps_sha256(s, "test/bad", "bad-Q4_K_M.gguf")), "%s", err);
    sfmt(final, sizeof final, "%s/models/test/bad/main/bad-Q4_K_M.gguf", root);
    EXPECT(!exists(final) && !exists(suffixed(final, ".partial")) && !exists(suffixed(final, ".partial.json")));
    rc = pull_one(&o, "test/bad", "config.json", path, sizeof path, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_EVERIFY);
    EXPECT_MSG(strstr(err, "git blob sha1 mismatch"), "%s", err);
    sfmt(final, sizeof final, "%s/models/test/bad/main/config.json", root);
    EXPECT(!exists(final) && !exists(suffixed(final, ".partial")));
    ps_stop(s);
    free(d), free(c);
}

TEST(pull, http_errors) {
    START_SERVER(s);
    unsigned char b[1000] = {1, 2, 3};
    ps_add_repo(s, "test/ok", false);
    ps_add_repo(s, "test/gated", true);
    ps_set_file(s, "test/ok", "ok-Q4_K_M.gguf", b, sizeof b, true);
    const char *root = fresh_dir("errors");
    ev_log log = {0};
    pull_opts o = opts_for(s, root, &log);
    char err[1024], path[4096];
    pull_listing l;
    int rc = pull_list_remote(&o, "test/missing", &l, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_ENOTFOUND);
    EXPECT_MSG(strstr(err, "repository 'test/missing' not found") && strstr(err, "HTTP 401") &&
               strstr(err, "anonymously"), "%s", err);
    rc = pull_list_remote(&o, "test/gated", &l, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_EAUTH);
    EXPECT_MSG(strstr(err, "gated") && strstr(err, "HTTP 401") && strstr(err, "/test/gated"), "%s", err);
    pull_opts orev = o;
    orev.revision = "v9";
    rc = pull_list_remote(&orev, "test/ok", &l, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_ENOTFOUND);
    EXPECT_MSG(strstr(err, "revision 'v9' not found"), "%s", err);
    pull_file ghost = {.path = "ghost.gguf", .size_bytes = 10,
                       .sha256 = "0000000000000000000000000000000000000000000000000000000000000000", .safe = true};
    rc = pull_download(&o, "test/ok", &ghost, path, sizeof path, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_ENOTFOUND);
    EXPECT_MSG(strstr(err, "file 'ghost.gguf' not found in test/ok") && strstr(err, "HTTP 404"), "%s", err);
    EXPECT_EQ_I(log.n[PULL_EV_RETRY], 0); /* permanent errors are not retried */

    /* transient 503s are retried */
    ps_fail_next(s, 2, 503);
    rc = pull_one(&o, "test/ok", "ok-Q4_K_M.gguf", path, sizeof path, err, sizeof err);
    EXPECT_MSG(rc == 0, "%s", err);
    EXPECT_EQ_I(log.n[PULL_EV_RETRY], 2);
    EXPECT(file_equals(path, b, sizeof b));

    /* the CLI prints them and exits 1 */
    if (access(cinfer_bin(), X_OK) == 0) {
        char cmd[8192], *out = NULL;
        sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s pull test/gated --endpoint %s", root, cinfer_bin(),
                 ps_endpoint(s));
        EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
        EXPECT_MSG(out && strstr(out, "cinfer pull: test/gated is a gated repo (HTTP 401)"), "%s", out ? out : "");
        free(out);
        sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s HF_ENDPOINT=%s %s pull test/ok ghost.gguf", root, ps_endpoint(s),
                 cinfer_bin());
        EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
        EXPECT_MSG(out && strstr(out, "no file named or containing 'ghost.gguf'"), "%s", out ? out : "");
        free(out);
        sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s pull nobody/nothing --endpoint %s", root, cinfer_bin(),
                 ps_endpoint(s));
        EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
        EXPECT_MSG(out && strstr(out, "repository 'nobody/nothing' not found"), "%s", out ? out : "");
        free(out);
    }
    ps_stop(s);
}

TEST(pull, etag_change) {
    uint64_t seed = seed_for("pull/etag_change");
    START_SERVER(s);
    size_t n1 = 800000, n2 = 700001, n3 = 650000;
    unsigned char *v1 = rand_bytes(n1, seed), *v2 = rand_bytes(n2, seed + 1), *v3 = rand_bytes(n3, seed + 2);
    ps_add_repo(s, "test/etag", false);
    ps_set_file(s, "test/etag", "e-Q4_K_M.gguf", v1, n1, true);
    ps_throttle(s, 2000000);
    const char *root = fresh_dir("etag");
    ev_log log = {.cancel_at = 300000};
    pull_opts o = opts_for(s, root, &log);
    char err[1024], path[4096], final[4200];
    sfmt(final, sizeof final, "%s/models/test/etag/main/e-Q4_K_M.gguf", root);
    int rc = pull_one(&o, "test/etag", "e-Q4_K_M.gguf", path, sizeof path, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_ECANCELED);
    EXPECT(!exists(final) && fsize(suffixed(final, ".partial")) >= 300000);
    ps_throttle(s, 0);

    /* (a) changed between runs: the fresh listing disagrees with the sidecar */
    ps_set_file(s, "test/etag", "e-Q4_K_M.gguf", v2, n2, true);
    memset(&log, 0, sizeof log);
    rc = pull_one(&o, "test/etag", "e-Q4_K_M.gguf", path, sizeof path, err, sizeof err);
    EXPECT_MSG(rc == 0, "%s", err);
    EXPECT_EQ_I(log.n[PULL_EV_RESTART], 1);
    EXPECT_MSG(strstr(log.last[PULL_EV_RESTART], "remote file changed"), "%s", log.last[PULL_EV_RESTART]);
    EXPECT(file_equals(final, v2, n2));

    /* (b) changed between listing and download: X-Linked-Etag disagrees */
    unlink(final);
    pull_listing l;
    EXPECT_EQ_I(pull_list_remote(&o, "test/etag", &l, err, sizeof err), 0);
    ps_set_file(s, "test/etag", "e-Q4_K_M.gguf", v3, n3, true);
    memset(&log, 0, sizeof log);
    rc = l.n_files == 1 ? pull_download(&o, "test/etag", &l.files[0], path, sizeof path, err, sizeof err) : -99;
    EXPECT_MSG(rc == 0, "%s", err);
    EXPECT_EQ_I(log.n[PULL_EV_RESTART], 1);
    EXPECT_MSG(strstr(log.last[PULL_EV_RESTART], "remote file changed"), "%s", log.last[PULL_EV_RESTART]);
    EXPECT(file_equals(final, v3, n3));
    pull_listing_free(&l);

    /* (c) changed mid-resume, the listing already stale: partial of v3... */
    ps_set_file(s, "test/etag", "e-Q4_K_M.gguf", v1, n1, true);
    ps_throttle(s, 2000000);
    memset(&log, 0, sizeof log);
    log.cancel_at = 200000;
    EXPECT_EQ_I(pull_list_remote(&o, "test/etag", &l, err, sizeof err), 0);
    rc = pull_download(&o, "test/etag", &l.files[0], path, sizeof path, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_ECANCELED);
    ps_throttle(s, 0);
    ps_set_file(s, "test/etag", "e-Q4_K_M.gguf", v2, n2, true); /* ...then resume with the stale listing entry */
    memset(&log, 0, sizeof log);
    rc = pull_download(&o, "test/etag", &l.files[0], path, sizeof path, err, sizeof err);
    EXPECT_MSG(rc == 0, "%s", err);
    EXPECT_MSG(log.n[PULL_EV_RESTART] == 1, "%d restarts, last: %s", log.n[PULL_EV_RESTART],
               log.last[PULL_EV_RESTART]);
    EXPECT(file_equals(final, v2, n2));
    pull_listing_free(&l);
    ps_stop(s);
    free(v1), free(v2), free(v3);
}

TEST(pull, ignored_range) {
    uint64_t seed = seed_for("pull/ignored_range");
    START_SERVER(s);
    size_t n = 500000;
    unsigned char *d = rand_bytes(n, seed);
    ps_add_repo(s, "test/norange", false);
    ps_set_file(s, "test/norange", "n-Q4_K_M.gguf", d, n, true);
    size_t cut = 1 + (size_t)(rnd(&seed) % (n - 1));
    ps_add_cuts(s, &cut, 1);
    ps_ignore_range(s, true);
    const char *root = fresh_dir("norange");
    ev_log log = {0};
    pull_opts o = opts_for(s, root, &log);
    char err[1024], path[4096];
    int rc = pull_one(&o, "test/norange", "n-Q4_K_M.gguf", path, sizeof path, err, sizeof err);
    EXPECT_MSG(rc == 0, "%s", err);
    EXPECT(file_equals(path, d, n));
    EXPECT_EQ_I(log.n[PULL_EV_RETRY], 1);
    EXPECT_MSG(strstr(log.last[PULL_EV_RESTART], "ignored the Range"), "%s", log.last[PULL_EV_RESTART]);
    ps_stop(s);
    free(d);
}

/* After a reboot only the bytes the sidecar records as synced are trusted. */
TEST(pull, reboot_resume) {
    uint64_t seed = seed_for("pull/reboot_resume");
    START_SERVER(s);
    size_t n = 600000;
    unsigned char *d = rand_bytes(n, seed);
    ps_add_repo(s, "test/boot", false);
    ps_set_file(s, "test/boot", "b-Q4_K_M.gguf", d, n, true);
    ps_throttle(s, 2000000);
    const char *root = fresh_dir("boot");
    ev_log log = {.cancel_at = 400000};
    pull_opts o = opts_for(s, root, &log);
    char err[1024], path[4096], final[4200];
    sfmt(final, sizeof final, "%s/models/test/boot/main/b-Q4_K_M.gguf", root);
    EXPECT_EQ_I(pull_one(&o, "test/boot", "b-Q4_K_M.gguf", path, sizeof path, err, sizeof err), PULL_ECANCELED);
    ps_throttle(s, 0);
    /* pretend the machine rebooted after syncing 100000 bytes; what follows is garbage */
    const char *side = suffixed(final, ".partial.json");
    char *j = read_file(side, NULL);
    EXPECT(j && strstr(j, "\"boot_id\""));
    char *b = j ? strstr(j, "\"boot_id\":") : NULL;
    if (b) {
        char *q1 = strchr(b + 10, '"'), *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
        for (char *p = q1 + 1; q2 && p < q2; p++) *p = *p == '-' ? '-' : '0';
        char *y = strstr(j, "\"synced_bytes\":");
        if (y) {
            char rest[64];
            char *e = y + 15;
            while (*e == ' ' || *e == '\t' || (*e >= '0' && *e <= '9')) e++;
            sfmt(rest, sizeof rest, "%s", e);
            sprintf(y + 15, "100000%s", rest);
        }
        FILE *f = fopen(side, "w");
        fputs(j, f);
        fclose(f);
        int fd = open(suffixed(final, ".partial"), O_WRONLY);
        char junk[4096];
        memset(junk, 0, sizeof junk);
        EXPECT(pwrite(fd, junk, sizeof junk, 200000) == (ssize_t)sizeof junk);
        close(fd);
    }
    free(j);
    memset(&log, 0, sizeof log);
    int rc = pull_one(&o, "test/boot", "b-Q4_K_M.gguf", path, sizeof path, err, sizeof err);
    EXPECT_MSG(rc == 0, "%s", err);
    EXPECT(file_equals(final, d, n));
    ps_stats st = ps_get_stats(s);
    (void)st;
    ps_stop(s);
    free(d);
}

/* A local write failure (here `ulimit -f`, the same path as a full disk). */
TEST(pull, write_failure) {
    if (access(cinfer_bin(), X_OK) != 0) SKIP("%s not built", cinfer_bin());
    uint64_t seed = seed_for("pull/write_failure");
    START_SERVER(s);
    size_t n = 900000;
    unsigned char *d = rand_bytes(n, seed);
    ps_add_repo(s, "test/full", false);
    ps_set_file(s, "test/full", "f-Q4_K_M.gguf", d, n, true);
    const char *xdg = fresh_dir("wfail");
    char cmd[8192], *out = NULL, final[4200];
    sfmt(final, sizeof final, "%s/cinfer/models/test/full/main/f-Q4_K_M.gguf", xdg);
    sfmt(cmd, sizeof cmd, "ulimit -f 600; XDG_CACHE_HOME=%s %s pull test/full --endpoint %s", xdg, cinfer_bin(),
             ps_endpoint(s));
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT_MSG(out && strstr(out, "file size limit reached while writing"), "%s", out ? out : "");
    free(out);
    EXPECT(!exists(final));
    int64_t have = fsize(suffixed(final, ".partial"));
    EXPECT_MSG(have > 0 && have < (int64_t)n, "partial %lld", (long long)have);
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s pull test/full --endpoint %s", xdg, cinfer_bin(), ps_endpoint(s));
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT_MSG(out && strstr(out, "resuming at"), "%s", out ? out : "");
    free(out);
    EXPECT(file_equals(final, d, n));
    ps_stop(s);
    free(d);
}

/* ==== path safety ========================================================== */

TEST(pull, unsafe_paths) {
    START_SERVER(s);
    unsigned char b[100] = {9};
    ps_add_repo(s, "test/evil", false);
    static const char *evil[] = {"../../escape-Q4_K_M.gguf", "/tmp/escape-abs.gguf", "a/../../escape2.gguf",
                                 "back\\escape.gguf", "ctl\x01escape.gguf", "x.gguf.partial"};
    for (size_t i = 0; i < sizeof evil / sizeof *evil; i++) ps_set_file(s, "test/evil", evil[i], b, sizeof b, true);
    ps_set_file(s, "test/evil", "good-Q8_0.gguf", b, sizeof b, true);
    const char *root = fresh_dir("evil/cache/inner");
    ev_log log = {0};
    pull_opts o = opts_for(s, root, &log);
    char err[1024], path[4096];
    pull_listing l;
    EXPECT_EQ_I(pull_list_remote(&o, "test/evil", &l, err, sizeof err), 0);
    size_t sel[16], n_sel = 0, n_unsafe = 0;
    for (size_t i = 0; i < l.n_files; i++) n_unsafe += !l.files[i].safe;
    EXPECT_EQ_I(n_unsafe, 6);
    EXPECT_EQ_I(pull_select(&l, "*", sel, &n_sel, NULL, 0), 0);
    EXPECT_EQ_I(n_sel, 1);
    for (size_t i = 0; i < l.n_files; i++) {
        int rc = pull_download(&o, "test/evil", &l.files[i], path, sizeof path, err, sizeof err);
        if (l.files[i].safe) EXPECT_MSG(rc == 0, "%s", err);
        else EXPECT_MSG(rc == PULL_EINVAL, "'%s' gave %d: %s", l.files[i].path, rc, err);
    }
    pull_listing_free(&l);
    char cmd[1024], *out = NULL;
    sfmt(cmd, sizeof cmd, "find '%s' -name '*escape*'", test_tmpdir());
    run_cmd(cmd, false, &out);
    EXPECT_MSG(out && !*out, "written outside: %s", out ? out : "");
    free(out);
    EXPECT(!exists("/tmp/escape-abs.gguf"));

    /* names rejected before any request */
    int trees = ps_get_stats(s).n_tree;
    static const char *bad_repo[] = {"../evil", "test/..", "/etc/x", "test/evil/../../x", "te st/evil"};
    for (size_t i = 0; i < sizeof bad_repo / sizeof *bad_repo; i++)
        EXPECT_EQ_I(pull_list_remote(&o, bad_repo[i], &l, err, sizeof err), PULL_EINVAL);
    pull_opts orev = o;
    orev.revision = "../../../x";
    EXPECT_EQ_I(pull_list_remote(&orev, "test/evil", &l, err, sizeof err), PULL_EINVAL);
    EXPECT_EQ_I(ps_get_stats(s).n_tree, trees);
    pull_file pf = {.path = "../x.gguf", .size_bytes = 100, .safe = true,
                    .sha256 = "0000000000000000000000000000000000000000000000000000000000000000"};
    EXPECT_EQ_I(pull_download(&o, "test/evil", &pf, path, sizeof path, err, sizeof err), PULL_EINVAL);
    EXPECT_EQ_I(pull_local_path(&o, "test/evil", "a/../../../x", path, sizeof path, err, sizeof err), PULL_EINVAL);

    /* a symlink planted in the cache is not followed: not as a directory... */
    const char *outside = fresh_dir("outside");
    const char *root2 = fresh_dir("symcache");
    char models[4200], link[4200], target[4200];
    sfmt(models, sizeof models, "%s/models", root2);
    mkdir(models, 0755);
    sfmt(link, sizeof link, "%s/test", models);
    EXPECT(symlink(outside, link) == 0);
    pull_opts o2 = opts_for(s, root2, &log);
    int rc = pull_one(&o2, "test/evil", "good-Q8_0.gguf", path, sizeof path, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_EIO);
    EXPECT_MSG(strstr(err, "symlink"), "%s", err);
    sfmt(cmd, sizeof cmd, "find '%s' -mindepth 1", outside);
    run_cmd(cmd, false, &out);
    EXPECT_MSG(out && !*out, "written through a symlink: %s", out ? out : "");
    free(out);
    /* ...nor as the partial file */
    unlink(link);
    sfmt(link, sizeof link, "%s/test/evil/main", models);
    sfmt(cmd, sizeof cmd, "mkdir -p '%s'", link);
    EXPECT_EQ_I(run_cmd(cmd, false, NULL), 0);
    sfmt(link, sizeof link, "%s/test/evil/main/good-Q8_0.gguf.partial", models);
    sfmt(target, sizeof target, "%s/target", outside);
    EXPECT(symlink(target, link) == 0);
    rc = pull_one(&o2, "test/evil", "good-Q8_0.gguf", path, sizeof path, err, sizeof err);
    EXPECT_EQ_I(rc, PULL_EIO);
    EXPECT(!exists(target));
    ps_stop(s);
}

/* ==== the cache ============================================================ */

static int count_cb(void *u, const pull_cache_entry *e) {
    char *acc = u;
    size_t k = strlen(acc);
    sfmt(acc + k, 2048 - k, "%s@%s:%s%s|", e->repo, e->revision, e->file, e->partial ? "(partial)" : "");
    return 0;
}

TEST(pull, cache_list_rm_resolve) {
    uint64_t seed = seed_for("pull/cache_list_rm_resolve");
    START_SERVER(s);
    size_t n = 200000;
    unsigned char *d = rand_bytes(n, seed);
    ps_add_repo(s, "test/cache", false);
    static const char *names[] = {"c-Q4_K_M.gguf", "c-Q8_0.gguf", "sub/c-F16.gguf", "d-Q5_0.gguf"};
    for (int i = 0; i < 4; i++) ps_set_file(s, "test/cache", names[i], d, n - (size_t)i, true);
    const char *root = fresh_dir("cache");
    ev_log log = {0};
    pull_opts o = opts_for(s, root, &log);
    char err[1024], path[4096], want[4200];
    for (int i = 0; i < 3; i++)
        EXPECT_EQ_I(pull_one(&o, "test/cache", names[i], path, sizeof path, err, sizeof err), 0);
    ps_throttle(s, 1000000);
    log.cancel_at = 50000; /* leave d-Q5_0.gguf half done */
    EXPECT_EQ_I(pull_one(&o, "test/cache", names[3], path, sizeof path, err, sizeof err), PULL_ECANCELED);

    char acc[2048] = "";
    EXPECT_EQ_I(pull_cache_list(root, count_cb, acc, err, sizeof err), 0);
    EXPECT_STR_EQ(acc, "test/cache@main:c-Q4_K_M.gguf|test/cache@main:c-Q8_0.gguf|"
                       "test/cache@main:d-Q5_0.gguf(partial)|test/cache@main:sub/c-F16.gguf|");

    sfmt(want, sizeof want, "%s/models/test/cache/main/c-Q4_K_M.gguf", root);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "test/cache", path, sizeof path, err, sizeof err), 0);
    EXPECT_STR_EQ(path, want);
    sfmt(want, sizeof want, "%s/models/test/cache/main/c-Q8_0.gguf", root);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "test/cache:Q8_0", path, sizeof path, err, sizeof err), 0);
    EXPECT_STR_EQ(path, want);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "test/cache@main:c-Q8_0.gguf", path, sizeof path, err, sizeof err), 0);
    EXPECT_STR_EQ(path, want);
    sfmt(want, sizeof want, "%s/models/test/cache/main/sub/c-F16.gguf", root);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "test/cache:F16", path, sizeof path, err, sizeof err), 0);
    EXPECT_STR_EQ(path, want);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "test/cache:Q5_0", path, sizeof path, err, sizeof err), PULL_ENOTFOUND);
    EXPECT_MSG(strstr(err, "cinfer pull test/cache Q5_0"), "%s", err);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "test/cache:*.gguf", path, sizeof path, err, sizeof err), PULL_EINVAL);
    EXPECT_MSG(strstr(err, "several"), "%s", err);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "test/none", path, sizeof path, err, sizeof err), PULL_ENOTFOUND);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "test/cache@v2", path, sizeof path, err, sizeof err), PULL_ENOTFOUND);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "../x:y", path, sizeof path, err, sizeof err), PULL_EINVAL);
    EXPECT(pull_is_spec("test/cache:Q8_0") && pull_is_spec("test/cache") && pull_is_spec("a/b@v1:x.gguf"));
    EXPECT(!pull_is_spec("/etc/passwd") && !pull_is_spec("model.gguf") && !pull_is_spec("../x/y.gguf"));

    int64_t freed = 0;
    EXPECT_EQ_I(pull_cache_rm(root, "test/cache", NULL, "c-Q8_0.gguf", &freed, err, sizeof err), 0);
    EXPECT_EQ_I(freed, n - 1);
    EXPECT_EQ_I(pull_resolve_cached_in(root, "test/cache:Q8_0", path, sizeof path, err, sizeof err), PULL_ENOTFOUND);
    EXPECT_EQ_I(pull_cache_rm(root, "test/cache", NULL, "d-Q5_0.gguf", &freed, err, sizeof err), 0); /* the partial */
    EXPECT_EQ_I(pull_cache_rm(root, "test/cache", NULL, "sub/c-F16.gguf", &freed, err, sizeof err), 0);
    sfmt(want, sizeof want, "%s/models/test/cache/main/sub", root);
    EXPECT(!exists(want)); /* emptied directories go too */
    EXPECT_EQ_I(pull_cache_rm(root, "test/cache", NULL, "c-Q8_0.gguf", &freed, err, sizeof err), PULL_ENOTFOUND);
    EXPECT_EQ_I(pull_cache_rm(root, "test/cache", NULL, "../../x", &freed, err, sizeof err), PULL_EINVAL);
    EXPECT_EQ_I(pull_cache_rm(root, "test/cache", NULL, NULL, &freed, err, sizeof err), 0);
    EXPECT_EQ_I(freed, n);
    sfmt(want, sizeof want, "%s/models/test", root);
    EXPECT(!exists(want));
    EXPECT_EQ_I(pull_cache_rm(root, "test/cache", NULL, NULL, &freed, err, sizeof err), PULL_ENOTFOUND);
    acc[0] = 0;
    EXPECT_EQ_I(pull_cache_list(root, count_cb, acc, err, sizeof err), 0);
    EXPECT_STR_EQ(acc, "");
    ps_stop(s);
    free(d);
}

/* ==== the CLI end to end =================================================== */

TEST(pull, cli) {
    if (access(cinfer_bin(), X_OK) != 0) SKIP("%s not built", cinfer_bin());
    uint64_t seed = seed_for("pull/cli");
    START_SERVER(s);
    size_t n = 300000;
    unsigned char *d = rand_bytes(n, seed);
    ps_add_repo(s, "test/cli", false);
    ps_set_file(s, "test/cli", "m-Q8_0.gguf", d, n, true);
    ps_set_file(s, "test/cli", "m-Q5_K_M.gguf", d, n - 100, true);
    ps_set_file(s, "test/cli", "m-Q3_K_S.gguf", d, n - 200, true);
    const char *xdg = fresh_dir("cli");
    const char *bin = cinfer_bin(), *ep = ps_endpoint(s);
    char cmd[8192], want[4200], *out = NULL;

    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s pull test/cli --endpoint %s --list", xdg, bin, ep);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    EXPECT_MSG(out && strstr(out, "* ") && strstr(out, "m-Q5_K_M.gguf  (5-bit)") &&
               strstr(out, "default: m-Q5_K_M.gguf"), "%s", out ? out : "");
    free(out);

    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s pull test/cli --endpoint %s 2>%s/err.txt", xdg, bin, ep, xdg);
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    sfmt(want, sizeof want, "%s/cinfer/models/test/cli/main/m-Q5_K_M.gguf\n", xdg);
    EXPECT_STR_EQ(out, want); /* stdout: just the path */
    free(out);
    sfmt(want, sizeof want, "%s/err.txt", xdg);
    out = read_file(want, NULL);
    EXPECT_MSG(out && strstr(out, "choosing m-Q5_K_M.gguf") && strstr(out, "no Q4_K_M file") &&
               strstr(out, "verified") && strstr(out, "cinfer run test/cli:m-Q5_K_M.gguf") && !strchr(out, '\r'),
               "%s", out ? out : "");
    free(out);

    sfmt(cmd, sizeof cmd, "HF_ENDPOINT=%s XDG_CACHE_HOME=%s %s pull test/cli Q8_0 -q", ep, xdg, bin);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    free(out);
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s list", xdg, bin);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT_MSG(out && strstr(out, "test/cli:m-Q5_K_M.gguf") && strstr(out, "test/cli:m-Q8_0.gguf") &&
               strstr(out, "2 files"), "%s", out ? out : "");
    free(out);
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s rm test/cli:m-Q8_0.gguf", xdg, bin);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT_MSG(out && strstr(out, "removed test/cli:m-Q8_0.gguf (300 KB freed)"), "%s", out ? out : "");
    free(out);
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s rm test/cli:m-Q8_0.gguf", xdg, bin);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    free(out);
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s rm ../../etc", xdg, bin);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    free(out);
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s pull test/cli nothing-like-this --endpoint %s", xdg, bin, ep);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    free(out);
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s rm test/cli", xdg, bin);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    free(out);
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s list", xdg, bin);
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT_MSG(out && strstr(out, "no models"), "%s", out ? out : "");
    free(out);
    ps_stop(s);
    free(d);
}

static double now_s_test(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* No network: a pull fails within a few seconds, saying so (not ~35 s of
 * retries); with stderr not a terminal, progress comes as a few plain lines
 * (each quarter of a file), never \r bars. */
TEST(pull, offline_fast_and_quiet_progress) {
    if (access(cinfer_bin(), X_OK) != 0) SKIP("%s not built", cinfer_bin());
    const char *xdg = fresh_dir("offline");
    char cmd[8192], *out = NULL;
    double t0 = now_s_test();
    /* port 1 on loopback refuses at once, as an unplugged network does */
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s pull test/x --endpoint http://127.0.0.1:1 2>&1", xdg, cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 1);
    double dt = now_s_test() - t0;
    EXPECT_MSG(dt < 5, "took %.1f s", dt);
    EXPECT_MSG(out && strstr(out, "cannot reach http://127.0.0.1:1") && strstr(out, "no network connection?") &&
               !strstr(out, "retry"), "%s", out ? out : "");
    free(out);

    uint64_t seed = seed_for("pull/offline_fast_and_quiet_progress");
    START_SERVER(s);
    size_t n = 400000;
    unsigned char *d = rand_bytes(n, seed);
    ps_add_repo(s, "test/slow", false);
    ps_set_file(s, "test/slow", "m-Q8_0.gguf", d, n, true);
    ps_throttle(s, 500000); /* ~0.8 s */
    sfmt(cmd, sizeof cmd, "XDG_CACHE_HOME=%s %s pull test/slow m-Q8_0.gguf --endpoint %s 2>&1 >/dev/null", xdg,
         cinfer_bin(), ps_endpoint(s));
    EXPECT_EQ_I(run_cmd(cmd, false, &out), 0);
    int lines = 0;
    for (const char *p = out; p && (p = strstr(p, "% (")); p++) lines++;
    EXPECT_MSG(out && !strchr(out, '\r') && lines >= 1 && lines <= 3 && strstr(out, "ETA") && strstr(out, "verified"),
               "%d progress lines: %s", lines, out ? out : "");
    free(out);
    ps_stop(s);
    free(d);
}
