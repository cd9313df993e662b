/*
 * runner.c — runs the tests registered with TEST() in name order.
 *   build/test_runner [PREFIX...]   only tests whose name starts with a PREFIX
 *   build/test_runner --list
 * Ends with the line "N passed, N failed, N skipped"; exit status 1 on failure.
 */
#include <cJSON.h>

#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct { const char *name; test_fn fn; } test_case;

static test_case *g_tests;
static size_t g_n, g_cap;
static int g_cur_failed, g_cur_skipped;
static char g_skip_msg[256];
static char g_tmp_root[256];

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

void test_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_skip_msg, sizeof g_skip_msg, fmt, ap);
    va_end(ap);
    g_cur_skipped = 1;
}

bool test_failed(void) { return g_cur_failed > 0; }

const char *shared_path(const char *rel) {
    static char ring[8][1024];
    static int k;
    const char *root = getenv("CINFER_SHARED");
    if (!root || !*root) root = "../shared";
    char *p = ring[k++ & 7];
    snprintf(p, sizeof ring[0], "%s/%s", root, rel);
    return access(p, R_OK) == 0 ? p : NULL;
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
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < g_n; i++) {
        int sel = argc < 2;
        for (int a = 1; a < argc && !sel; a++)
            sel = strncmp(g_tests[i].name, argv[a], strlen(argv[a])) == 0;
        if (!sel) continue;
        if (list) { printf("%s\n", g_tests[i].name); continue; }
        g_cur_failed = g_cur_skipped = 0;
        g_skip_msg[0] = 0;
        printf("  %-48s ...\n", g_tests[i].name);
        double t0 = now_s();
        g_tests[i].fn();
        double dt = now_s() - t0;
        if (g_cur_failed) { failed++; printf("  FAIL %s (%.2fs)\n", g_tests[i].name, dt); }
        else if (g_cur_skipped) { skipped++; printf("  SKIP %s: %s\n", g_tests[i].name, g_skip_msg); }
        else { passed++; printf("  ok   %s (%.2fs)\n", g_tests[i].name, dt); }
    }
    if (g_tmp_root[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp_root);
        if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", g_tmp_root);
    }
    if (!list) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
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
