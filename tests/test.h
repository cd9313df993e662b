/*
 * test.h — the one test harness: table of named tests registered at start-up,
 * non-aborting EXPECT_* checks that report file:line with expected vs actual,
 * SKIP for tests whose data (../shared) or tools are absent.  tests/runner.c
 * runs them, optionally only those whose name starts with a prefix given on
 * the command line, and ends with "N passed, N failed, N skipped".
 *
 * Skips and CI.  On a developer machine a test that lacks what it needs
 * (../shared, tmux, node >= 20, chromium, an npm package, python3-jsonschema)
 * skips with the reason and the closing line counts it.  Under CI (the
 * environment variable CI is "true" or "1"; .ci/run exports CI=true) every
 * SKIP is a failure with the same reason, so a CI machine that lacks a
 * requirement cannot pass by skipping.  Only SKIP_HARDWARE (this CPU lacks
 * an instruction set a test is about) stays a skip under CI, and
 * test_not_run() notes what a test could not cover on this machine; both
 * are listed in the run's summary.
 */
#ifndef CINFER_TEST_H
#define CINFER_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn);

/* TEST(gguf, truncated) defines test "gguf/truncated". */
#define TEST(suite, name)                                                        \
    static void test_##suite##_##name(void);                                     \
    __attribute__((constructor)) static void reg_##suite##_##name(void) {        \
        test_register(#suite "/" #name, test_##suite##_##name);                  \
    }                                                                            \
    static void test_##suite##_##name(void)

void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void test_skip_hardware(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Note, in the test's output and the run's summary, something this machine
 * cannot run (e.g. "AVX-512 VNNI R8 kernels: this CPU lacks AVX-512 VNNI");
 * the test goes on.  Repeated notes are listed once. */
void test_not_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool test_failed(void); /* current test has failed so far */
/* CI mode: $CI is "true" or "1".  SKIP fails there (see the top of this file). */
bool test_ci(void);

#define EXPECT(c) \
    do { if (!(c)) test_fail(__FILE__, __LINE__, "expected %s", #c); } while (0)
#define EXPECT_MSG(c, ...) \
    do { if (!(c)) test_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define EXPECT_EQ_I(a, b)                                                         \
    do { long long a_ = (long long)(a), b_ = (long long)(b);                      \
         if (a_ != b_) test_fail(__FILE__, __LINE__, "%s == %s: got %lld, expected %lld", \
                                 #a, #b, a_, b_); } while (0)
#define EXPECT_NEAR(a, b, tol)                                                    \
    do { double a_ = (double)(a), b_ = (double)(b);                               \
         if (!(a_ - b_ <= (tol) && b_ - a_ <= (tol)))                             \
             test_fail(__FILE__, __LINE__, "%s ≈ %s: got %.9g, expected %.9g (tol %g)", \
                       #a, #b, a_, b_, (double)(tol)); } while (0)
#define EXPECT_STR_EQ(a, b)                                                       \
    do { const char *a_ = (a), *b_ = (b);                                         \
         if (!a_ || !b_ || strcmp(a_, b_) != 0)                                   \
             test_fail(__FILE__, __LINE__, "%s: got \"%s\", expected \"%s\"", #a, \
                       a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } while (0)
/* Stop the current test as skipped (returns from the test function); under
 * CI this is a failure with the reason. */
#define SKIP(...) do { test_skip(__VA_ARGS__); return; } while (0)
/* Stop as skipped because this CPU lacks what the test is about (an ISA);
 * a skip under CI too. */
#define SKIP_HARDWARE(...) do { test_skip_hardware(__VA_ARGS__); return; } while (0)

/* Path of a file under the shared test data (CINFER_SHARED or ../shared), or
 * NULL when it does not exist.  Returned string is valid until the next call
 * from the same test... keep a copy if you need two (uses a small ring). */
const char *shared_path(const char *rel);
/* The shared data root: $CINFER_SHARED (make test sets it from SHARED,
 * default ../shared) or ../shared. */
const char *shared_root(void);
/* Like shared_path but SKIPs the current test when absent. */
#define NEED_SHARED(var, rel)                                                      \
    const char *var = shared_path(rel);                                            \
    if (!var) SKIP("%s/%s absent", shared_root(), rel)

/* ---- tools the suite needs (each a SKIP, so a failure under CI) -------------- */

/* The Node.js major version the serve tests need (their npm packages need
 * 20; Debian 12's nodejs is 18). */
#define NODE_MIN_MAJOR 20
/* Is `name` an executable on PATH? */
bool have_tool(const char *name);
/* Major version of `node --version` (0 when node is absent or unparsable);
 * *version (may be NULL) gets the printed version, e.g. "v20.20.2". */
int node_major(char *version, size_t version_len);
/* NULL when every dependency pinned in DIR/package.json is installed under
 * DIR/node_modules at that version; otherwise a one-line message naming the
 * first one missing or at another version (static buffer). */
const char *npm_missing(const char *dir);
/* Can /usr/bin/python3 import `module`? */
bool have_python_module(const char *module);
/* The Chromium the web UI test drives: $CHROMIUM or /usr/bin/chromium. */
const char *chromium_path(void);

#define NEED_TOOL(name, package)                                                   \
    do { if (!have_tool(name)) SKIP("%s not installed (Debian package %s)", name, package); } while (0)
#define NEED_NODE()                                                                \
    do { char v_[64];                                                              \
         int m_ = node_major(v_, sizeof v_);                                       \
         if (m_ == 0) SKIP("node not found (Node.js >= %d runs the serve tests)", NODE_MIN_MAJOR); \
         if (m_ < NODE_MIN_MAJOR) SKIP("node %s is older than the %d the serve tests need", v_, NODE_MIN_MAJOR); \
    } while (0)
#define NEED_NPM_PACKAGES(dir)                                                     \
    do { const char *e_ = npm_missing(dir); if (e_) SKIP("%s", e_); } while (0)

/* Run a shell command, capture stdout (and stderr when merge_stderr) into a
 * malloc'd NUL-terminated buffer (*out, may be NULL), return the exit status
 * (or -1).  Commands run from the repository root. */
int run_cmd(const char *cmd, bool merge_stderr, char **out);
/* The cinfer binary under test: $CINFER_BIN (make test sets it to
 * $(BUILD)/cinfer), default build/cinfer. */
const char *cinfer_bin(void);
/* Call fn(argc, argv) (a cli_* subcommand) in-process with stdout redirected
 * to a file; return its result and put what it printed into *out (malloc'd,
 * NUL-terminated, may be NULL on error; caller frees). */
int run_captured(int (*fn)(int, char **), int argc, char **argv, char **out);
/* Read a whole file into a malloc'd NUL-terminated buffer; NULL on error. */
char *read_file(const char *path, size_t *len);
/* The JSON document in the file at path (free with cJSON_Delete), or NULL
 * when the file cannot be read or is not JSON. */
struct cJSON *read_json(const char *path);
/* Index of the largest of x[0..n) (the first on ties); 0 when n <= 0. */
int argmax_f32(const float *x, int n);
/* A fresh temporary directory for this test (removed at exit). */
const char *test_tmpdir(void);

#endif
