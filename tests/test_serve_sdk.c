/*
 * test_serve_sdk.c — `cinfer serve` from the outside, driven by the official
 * client libraries: one TEST per Node script in tests/serve/ (see the head
 * of each script for its checks).  Each script starts its own server on a
 * free loopback port with the shared Qwen3 chat model, prints one line per
 * check ("ok   - ..." / "FAIL - ..."), and exits 0 only when all passed.
 *
 *   serve_sdk/schemas    the shape schemas accept the API references' examples and
 *                        reject broken copies (no server)
 *   serve_sdk/openai     npm `openai`: chat, streaming, completions, json_schema,
 *                        tools, logprobs, embeddings, responses, errors
 *   serve_sdk/anthropic  npm `@anthropic-ai/sdk`: messages, streaming, count_tokens,
 *                        tool_use, errors
 *   serve_sdk/ollama     npm `ollama`: the Ollama API (tags, show, ps, chat and generate
 *                        streamed as NDJSON and not, embed, errors) and /v1/systemone
 *   serve_sdk/webui      the page at / in headless Chromium (playwright-core);
 *                        screenshot under $CINFER_BUILD/serve-artifacts/
 *   serve_sdk/load       200 requests from 8 clients: disconnects, malformed
 *                        requests, no crash, no leaked slots; prints the numbers
 *
 * Every response body and stream chunk is checked against the JSON Schemas in
 * tests/serve/schemas/ (from the OpenAI and Anthropic API references).
 *
 * SKIPs (with the reason; a failure under CI=true) when node >= 20, a package
 * pinned in tests/serve/package.json (`make serve-deps`), the shared model,
 * or for the UI test chromium, is missing.  Nothing is fetched at test time.
 */
#include "test.h"

#include <stdlib.h>
#include <unistd.h>

#define MODEL_REL "models/chat/qwen3-chat.gguf"

/* Print the script's output indented, and return the lines that failed
 * (malloc'd, at most ~1.5 KB) for the failure message. */
static char *show_and_collect(const char *out) {
    size_t cap = 1536, len = 0;
    char *fails = calloc(1, cap);
    const char *p = out;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        printf("    %.*s\n", (int)n, p);
        if (fails && (!strncmp(p, "FAIL", 4) || strstr(p, "Error") == p) && len + 4 < cap) {
            size_t k = n < cap - len - 4 ? n : cap - len - 4;
            memcpy(fails + len, p, k);
            len += k;
            fails[len++] = '\n';
            fails[len] = 0;
        }
        p = nl ? nl + 1 : NULL;
    }
    return fails;
}

enum { NEED_MODEL = 1, NEED_CHROMIUM = 2 };

/* Run node tests/serve/<script> (against cinfer_bin() and the shared model). */
static void run_script(const char *script, int needs, int limit_s) {
    const char *model = shared_path(MODEL_REL);
    if (!model && (needs & NEED_MODEL)) SKIP("%s/%s absent", shared_root(), MODEL_REL);
    char model_copy[1024];
    snprintf(model_copy, sizeof model_copy, "%s", model ? model : "");
    NEED_NODE();
    /* every package pinned in tests/serve/package.json, at its pinned version */
    NEED_NPM_PACKAGES("tests/serve");
    const char *chromium = chromium_path();
    if ((needs & NEED_CHROMIUM) && access(chromium, X_OK) != 0)
        SKIP("%s not found (Debian package chromium; $CHROMIUM overrides)", chromium);
    if ((needs & NEED_MODEL) && access(cinfer_bin(), X_OK) != 0) {
        test_fail(__FILE__, __LINE__, "cinfer binary %s not found", cinfer_bin());
        return;
    }
    const char *build = getenv("CINFER_BUILD");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "CINFER_BIN='%s' CINFER_SERVE_MODEL='%s' CINFER_BUILD='%s' CHROMIUM='%s' "
             "timeout -k 5 %d node tests/serve/%s",
             cinfer_bin(), model_copy, build && *build ? build : "build", chromium, limit_s, script);
    char *out = NULL;
    int rc = run_cmd(cmd, true, &out);
    char *fails = show_and_collect(out ? out : "");
    EXPECT_MSG(rc == 0, "node tests/serve/%s exited %d%s:\n%s", script, rc,
               rc == 124 ? " (timed out)" : "", fails && *fails ? fails : "(no FAIL line; see output above)");
    free(fails);
    free(out);
}

TEST(serve_sdk, schemas) { run_script("schemas.mjs", 0, 60); }
TEST(serve_sdk, openai) { run_script("openai.mjs", NEED_MODEL, 120); }
TEST(serve_sdk, anthropic) { run_script("anthropic.mjs", NEED_MODEL, 120); }
TEST(serve_sdk, ollama) { run_script("ollama.mjs", NEED_MODEL, 100); }
TEST(serve_sdk, webui) { run_script("webui.mjs", NEED_MODEL | NEED_CHROMIUM, 120); }
TEST(serve_sdk, load) { run_script("load.mjs", NEED_MODEL, 180); }
