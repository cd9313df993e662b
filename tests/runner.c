/*
 * runner.c — runs the tests registered with TEST() in name order.
 *   build/test_runner [PREFIX...]   only tests whose name starts with a PREFIX
 *   build/test_runner --list
 * Ends with the line "N passed, N failed, N skipped"; exit status 1 on failure.
 * Under CI (CI=true) a SKIP counts as a failure (test.h); the summary before
 * the closing line lists what this machine could not run (SKIP_HARDWARE,
 * test_not_run).
 */
#include <cJSON.h>

#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct { const char *name; test_fn fn; } test_case;

static test_case *g_tests;
static size_t g_n, g_cap;
static int g_cur_failed, g_cur_skipped, g_cur_ci_skips; /* ci_skips: of the failures, SKIPs under CI */
static char g_skip_msg[1024];
static char g_tmp_root[256];
static const char *g_cur_name;
/* test_not_run notes and hardware skips, each "NAME: what", listed once at the end */
static char **g_notes;
static size_t g_n_notes;

void test_register(const char *name, test_fn fn) {
    if (g_n == g_cap) {
        g_cap = g_cap ? g_cap * 2 : 64;
        g_tests = realloc(g_tests, g_cap * sizeof *g_tests);
        if (!g_tests) abort();
    }
    g_tests[g_n++] = (test_case){name, fn};
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    %s:%d: ", file, line);
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    g_cur_failed++;
}

bool test_ci(void) {
    const char *ci = getenv("CI");
    return ci && (!strcasecmp(ci, "true") || !strcmp(ci, "1"));
}

/* Add "current test: msg" to the notes unless the same msg is there. */
static void add_note(const char *msg) {
    for (size_t i = 0; i < g_n_notes; i++) {
        const char *colon = strstr(g_notes[i], ": ");
        if (colon && !strcmp(colon + 2, msg)) return;
    }
    char **nn = realloc(g_notes, (g_n_notes + 1) * sizeof *nn);
    if (!nn) abort();
    g_notes = nn;
    size_t len = strlen(g_cur_name) + strlen(msg) + 3;
    g_notes[g_n_notes] = malloc(len);
    if (!g_notes[g_n_notes]) abort();
    snprintf(g_notes[g_n_notes++], len, "%s: %s", g_cur_name, msg);
}

void test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_skip_msg, sizeof g_skip_msg, fmt, ap);
    va_end(ap);
    if (test_ci()) {
        /* a requirement the CI machine must have: fail, with the reason */
        printf("    CI=true: cannot skip: %s\n", g_skip_msg);
        g_cur_failed++;
        g_cur_ci_skips++;
        return;
    }
    g_cur_skipped = 1;
}

void test_skip_hardware(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_skip_msg, sizeof g_skip_msg, fmt, ap);
    va_end(ap);
    g_cur_skipped = 2; /* hardware: a skip under CI too */
    add_note(g_skip_msg);
}

void test_not_run(const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t before = g_n_notes;
    add_note(msg);
    if (g_n_notes > before) printf("    not run on this machine: %s\n", msg);
}

bool test_failed(void) { return g_cur_failed > 0; }

const char *shared_root(void) {
    const char *root = getenv("CINFER_SHARED");
    return root && *root ? root : "../shared";
}

const char *shared_path(const char *rel) {
    static char ring[8][1024];
    static int k;
    char *p = ring[k++ & 7];
    snprintf(p, sizeof ring[0], "%s/%s", shared_root(), rel);
    return access(p, R_OK) == 0 ? p : NULL;
}

/* ---- tools ------------------------------------------------------------------- */

bool have_tool(const char *name) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "command -v '%s' >/dev/null 2>&1", name);
    return run_cmd(cmd, false, NULL) == 0;
}

int node_major(char *version, size_t version_len) {
    char *out = NULL;
    int major = 0;
    if (version && version_len) version[0] = 0;
    if (run_cmd("node --version 2>/dev/null", false, &out) == 0 && out && out[0] == 'v') {
        major = atoi(out + 1);
        out[strcspn(out, "\r\n")] = 0;
        if (version && version_len) snprintf(version, version_len, "%s", out);
    }
    free(out);
    return major;
}

const char *npm_missing(const char *dir) {
    static char msg[1400];
    char path[1024];
    snprintf(path, sizeof path, "%s/package.json", dir);
    cJSON *pkg = read_json(path);
    cJSON *deps = cJSON_GetObjectItemCaseSensitive(pkg, "dependencies");
    if (!cJSON_IsObject(deps)) {
        snprintf(msg, sizeof msg, "%s: no \"dependencies\" object", path);
        cJSON_Delete(pkg);
        return msg;
    }
    const char *bad = NULL;
    cJSON *d;
    cJSON_ArrayForEach(d, deps) {
        snprintf(path, sizeof path, "%s/node_modules/%s/package.json", dir, d->string);
        cJSON *inst = read_json(path);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(inst, "version");
        const char *want = cJSON_IsString(d) ? d->valuestring : "?";
        if (!cJSON_IsString(v))
            snprintf(msg, sizeof msg, "npm package %s %s not installed in %s/node_modules: run 'make serve-deps' (npm ci)",
                     d->string, want, dir);
        else if (strcmp(v->valuestring, want))
            snprintf(msg, sizeof msg, "npm package %s is %s in %s/node_modules, package.json pins %s: run 'make serve-deps'",
                     d->string, v->valuestring, dir, want);
        else {
            cJSON_Delete(inst);
            continue;
        }
        cJSON_Delete(inst);
        bad = msg;
        break;
    }
    cJSON_Delete(pkg);
    return bad;
}

bool have_python_module(const char *module) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import %s' >/dev/null 2>&1", module);
    return run_cmd(cmd, false, NULL) == 0;
}

const char *chromium_path(void) {
    const char *c = getenv("CHROMIUM");
    return c && *c ? c : "/usr/bin/chromium";
}

int run_cmd(const char *cmd, bool merge_stderr, char **out) {
    char full[8192];
    snprintf(full, sizeof full, "%s%s", cmd, merge_stderr ? " 2>&1" : "");
    if (out) *out = NULL;
    FILE *f = popen(full, "r");
    if (!f) return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) { pclose(f); return -1; }
    size_t r;
    while ((r = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (cap - len < 2) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); pclose(f); return -1; }
            buf = nb;
        }
    }
    buf[len] = 0;
    int st = pclose(f);
    if (out) *out = buf; else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const char *cinfer_bin(void) {
    const char *b = getenv("CINFER_BIN");
    return b && *b ? b : "build/cinfer";
}

char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0) { fclose(f); return NULL; }
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = 0;
    if (len) *len = (size_t)n;
    return buf;
}

int run_captured(int (*fn)(int, char **), int argc, char **argv, char **out) {
    char path[512];
    snprintf(path, sizeof path, "%s/captured-stdout", test_tmpdir());
    *out = NULL;
    fflush(stdout);
    int saved = dup(1), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved < 0 || fd < 0) {
        if (saved >= 0) close(saved);
        if (fd >= 0) close(fd);
        return -1;
    }
    dup2(fd, 1);
    close(fd);
    int rc = fn(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    *out = read_file(path, NULL);
    return rc;
}

const char *test_tmpdir(void) {
    if (!g_tmp_root[0]) {
        snprintf(g_tmp_root, sizeof g_tmp_root, "/tmp/cinfer-test-XXXXXX");
        if (!mkdtemp(g_tmp_root)) { perror("mkdtemp"); abort(); }
    }
    return g_tmp_root;
}

static int cmp_test(const void *a, const void *b) {
    return strcmp(((const test_case *)a)->name, ((const test_case *)b)->name);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    qsort(g_tests, g_n, sizeof *g_tests, cmp_test);
    int list = argc > 1 && strcmp(argv[1], "--list") == 0;
    int passed = 0, failed = 0, skipped = 0, skipped_hw = 0, failed_ci = 0;
    if (!list && test_ci())
        printf("CI=true: a test that lacks what it needs (%s, a tool, an npm package) fails\n", shared_root());
    for (size_t i = 0; i < g_n; i++) {
        int sel = argc < 2;
        for (int a = 1; a < argc && !sel; a++)
            sel = strncmp(g_tests[i].name, argv[a], strlen(argv[a])) == 0;
        if (!sel) continue;
        if (list) { printf("%s\n", g_tests[i].name); continue; }
        g_cur_failed = g_cur_skipped = g_cur_ci_skips = 0;
        g_skip_msg[0] = 0;
        g_cur_name = g_tests[i].name;
        printf("  %-48s ...\n", g_tests[i].name);
        double t0 = now_s();
        g_tests[i].fn();
        double dt = now_s() - t0;
        if (g_cur_failed) { failed++; failed_ci += g_cur_ci_skips == g_cur_failed; printf("  FAIL %s (%.2fs)\n", g_tests[i].name, dt); }
        else if (g_cur_skipped) { skipped++; skipped_hw += g_cur_skipped == 2; printf("  SKIP %s: %s\n", g_tests[i].name, g_skip_msg); }
        else { passed++; printf("  ok   %s (%.2fs)\n", g_tests[i].name, dt); }
    }
    if (g_tmp_root[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp_root);
        if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", g_tmp_root);
    }
    if (g_n_notes) {
        printf("not run on this machine (%zu):\n", g_n_notes);
        for (size_t i = 0; i < g_n_notes; i++) printf("  %s\n", g_notes[i]);
    }
    if (!list && failed_ci)
        printf("%d failed only for what this machine lacks (CI=true: a skip is a failure; see the SKIP reasons above)\n",
               failed_ci);
    if (!list && skipped > skipped_hw && !test_ci())
        printf("%d skipped for what this machine lacks (under CI=true each is a failure)\n", skipped - skipped_hw);
    if (!list) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    for (size_t i = 0; i < g_n_notes; i++) free(g_notes[i]);
    free(g_notes);
    free(g_tests);
    return failed ? 1 : 0;
}

struct cJSON *read_json(const char *path) {
    size_t len;
    char *s = read_file(path, &len);
    if (!s) return NULL;
    cJSON *j = cJSON_ParseWithLength(s, len);
    free(s);
    return j;
}

int argmax_f32(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}
