/*
 * test.h — the one test harness: table of named tests registered at start-up,
 * non-aborting EXPECT_* checks that report file:line with expected vs actual,
 * SKIP for tests whose data (../shared) is absent.  tests/runner.c runs them,
 * optionally only those whose name starts with a prefix given on the command
 * line, and ends with "N passed, N failed, N skipped".
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
bool test_failed(void); /* current test has failed so far */

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
/* Stop the current test as skipped (returns from the test function). */
#define SKIP(...) do { test_skip(__VA_ARGS__); return; } while (0)

/* Path of a file under the shared test data (CINFER_SHARED or ../shared), or
 * NULL when it does not exist.  Returned string is valid until the next call
 * from the same test... keep a copy if you need two (uses a small ring). */
const char *shared_path(const char *rel);
/* Like shared_path but SKIPs the current test when absent. */
#define NEED_SHARED(var, rel)                                                      \
    const char *var = shared_path(rel);                                            \
    if (!var) SKIP("../shared/%s absent", rel)

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
