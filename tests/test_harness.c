/* test_harness.c — checks of the test harness itself, and the one list of
 * what the suite needs beyond the build (harness/requirements). */
#include "test.h"

#include <stdlib.h>
#include <unistd.h>

TEST(harness, run_cmd_captures_output_and_status) {
    char *out = NULL;
    int st = run_cmd("printf 'a b'; exit 3", false, &out);
    EXPECT_EQ_I(st, 3);
    EXPECT_STR_EQ(out, "a b");
    free(out);
}

/* A fixture for ci_turns_skips_into_failures: skips (or skips as hardware)
 * only when that test runs it in a child runner; otherwise passes. */
TEST(harness, probe) {
    const char *p = getenv("CINFER_HARNESS_PROBE");
    if (p && !strcmp(p, "skip")) SKIP("probe: a requirement is missing");
    if (p && !strcmp(p, "hardware")) SKIP_HARDWARE("probe: this CPU lacks it");
    if (p && !strcmp(p, "note")) test_not_run("probe: a kernel this CPU lacks");
}

/* The runner itself (a child of this process): a SKIP is a skip on a
 * developer machine and a failure under CI=true; SKIP_HARDWARE is a skip in
 * both and is listed in the summary, as is a test_not_run note. */
TEST(harness, ci_turns_skips_into_failures) {
    static const struct {
        const char *env, *want1, *want2;
        int status;
    } cases[] = {
        {"CI= CINFER_HARNESS_PROBE=skip", "SKIP harness/probe: probe: a requirement is missing",
         "0 passed, 0 failed, 1 skipped", 0},
        {"CI=true CINFER_HARNESS_PROBE=skip", "CI=true: cannot skip: probe: a requirement is missing",
         "0 passed, 1 failed, 0 skipped", 1},
        {"CI=1 CINFER_HARNESS_PROBE=skip", "CI=true: cannot skip", "0 passed, 1 failed, 0 skipped", 1},
        {"CI=true CINFER_HARNESS_PROBE=hardware", "harness/probe: probe: this CPU lacks it",
         "0 passed, 0 failed, 1 skipped", 0},
        {"CI=true CINFER_HARNESS_PROBE=note", "not run on this machine (1):\n  harness/probe: probe: a kernel",
         "1 passed, 0 failed, 0 skipped", 0},
        {"CI=false CINFER_HARNESS_PROBE=skip", "1 skipped for what this machine lacks",
         "0 passed, 0 failed, 1 skipped", 0},
    };
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    EXPECT(n > 0);
    if (n <= 0) return;
    self[n] = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1400], *out = NULL;
        snprintf(cmd, sizeof cmd, "env %s '%s' harness/probe", cases[i].env, self);
        int st = run_cmd(cmd, true, &out);
        EXPECT_MSG(st == cases[i].status && out && strstr(out, cases[i].want1) && strstr(out, cases[i].want2),
                   "%s: exit %d (want %d), want '%s' and '%s' in:\n%s", cases[i].env, st, cases[i].status,
                   cases[i].want1, cases[i].want2, out ? out : "");
        free(out);
    }
}

/* npm_missing on a package.json whose pins are installed, absent, or at another version. */
TEST(harness, npm_missing_checks_pinned_versions) {
    char dir[300], cmd[2000];
    snprintf(dir, sizeof dir, "%s/npm-probe", test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/node_modules/a %s/node_modules/@s/b && "
             "printf '{\"dependencies\":{\"a\":\"1.0.0\",\"@s/b\":\"2.0.0\"}}' > %s/package.json && "
             "printf '{\"version\":\"1.0.0\"}' > %s/node_modules/a/package.json && "
             "printf '{\"version\":\"2.0.0\"}' > %s/node_modules/@s/b/package.json",
             dir, dir, dir, dir, dir);
    EXPECT_EQ_I(run_cmd(cmd, false, NULL), 0);
    const char *e = npm_missing(dir);
    EXPECT_MSG(e == NULL, "%s", e);
    snprintf(cmd, sizeof cmd, "printf '{\"version\":\"2.1.0\"}' > %s/node_modules/@s/b/package.json", dir);
    EXPECT_EQ_I(run_cmd(cmd, false, NULL), 0);
    e = npm_missing(dir);
    EXPECT_MSG(e && strstr(e, "@s/b is 2.1.0") && strstr(e, "pins 2.0.0"), "%s", e ? e : "(null)");
    snprintf(cmd, sizeof cmd, "rm -r %s/node_modules/a", dir);
    EXPECT_EQ_I(run_cmd(cmd, false, NULL), 0);
    e = npm_missing(dir);
    EXPECT_MSG(e && strstr(e, "npm package a 1.0.0 not installed"), "%s", e ? e : "(null)");
    snprintf(cmd, sizeof cmd, "%s/none", dir);
    e = npm_missing(cmd);
    EXPECT_MSG(e && strstr(e, "no \"dependencies\""), "%s", e ? e : "(null)");
}

/* Everything the suite needs beyond `make` (which checks the build's own
 * Debian packages): the shared test data, the tools and the serve tests' npm
 * packages.  One line per requirement; a SKIP naming every missing one on a
 * developer machine, a failure under CI.  The tests that use each one SKIP
 * (so fail under CI) on their own as well. */
TEST(harness, requirements) {
    char missing[2048] = "";
    size_t ml = 0;
#define REQUIRE(ok, what, ...)                                                              \
    do {                                                                                    \
        char line_[512];                                                                    \
        snprintf(line_, sizeof line_, __VA_ARGS__);                                         \
        printf("    %-4s %-22s %s\n", (ok) ? "ok" : "MISS", what, line_);                   \
        if (!(ok) && ml < sizeof missing - 2)                                               \
            ml += (size_t)snprintf(missing + ml, sizeof missing - ml, "%s%s", ml ? "; " : "", line_); \
    } while (0)
    const char *root = shared_root();
    bool shared = shared_path("models/stories260K/stories260K.gguf") && shared_path("reference/README.md") &&
                  shared_path("models/chat/qwen3-chat.gguf") && shared_path("jsonschemabench");
    REQUIRE(shared, "shared test data", "%s%s (models/, reference/, jsonschemabench/; CINFER_SHARED overrides)",
            root, shared ? "" : " absent or incomplete");
    REQUIRE(have_tool("tmux"), "tmux", "tmux%s (chat/interactive_in_tmux; Debian package tmux)",
            have_tool("tmux") ? "" : " not installed");
    char v[64];
    int major = node_major(v, sizeof v);
    REQUIRE(major >= NODE_MIN_MAJOR, "node", "node %s (serve_sdk; needs >= %d, Debian 12's nodejs is 18)",
            major ? v : "not found", NODE_MIN_MAJOR);
    REQUIRE(have_tool("npm"), "npm", "npm%s (make serve-deps)", have_tool("npm") ? "" : " not found");
    const char *npm = npm_missing("tests/serve");
    REQUIRE(!npm, "npm packages", "%s", npm ? npm : "tests/serve/node_modules matches package.json");
    bool chromium = access(chromium_path(), X_OK) == 0;
    REQUIRE(chromium, "chromium", "%s%s (serve_sdk/webui; Debian package chromium, $CHROMIUM overrides)",
            chromium_path(), chromium ? "" : " not found");
    bool js = have_python_module("jsonschema");
    REQUIRE(js, "python3-jsonschema", "/usr/bin/python3 %s jsonschema (gram_gen's independent validator)",
            js ? "imports" : "cannot import");
#undef REQUIRE
    if (ml) SKIP("missing: %s", missing);
}
