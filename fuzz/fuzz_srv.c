/*
 * fuzz_srv.c — libFuzzer target for `cinfer serve` request bodies: the first
 * byte picks the route ('0'..'4' in the seeds, fuzz/srv_seeds.txt: (chat/completions, completions, messages,
 * messages/count_tokens, responses), the rest is the body, handed to
 * srv_check_request (runtime/server/srv_impl.h) — the handler's own parsing and job
 * building (field validation, messages with tool calls, tools and
 * tool_choice, response_format and tool grammars, logprobs, penalties,
 * logit_bias, the chat template, tokenization) without the network.
 *
 * The server runs on the Qwen3 chat test model ($CINFER_FUZZ_MODEL, default
 * ../shared/models/chat/qwen3-chat.gguf), started once.  Beyond "no crash,
 * no sanitizer report, no leak" it checks the contract: the status is 200 or
 * a 4xx/5xx, and an error has a one-line, non-empty message.
 * Run: make fuzz-srv [FUZZ_SECONDS=600].
 */
#include "server/srv.h"
#include "server/srv_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static cinfer_model *g_model;
static srv *g_srv;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *path = getenv("CINFER_FUZZ_MODEL");
    if (!path) path = "../shared/models/chat/qwen3-chat.gguf";
    char err[512];
    if (cinfer_model_open(path, NULL, &g_model, err, sizeof err)) {
        fprintf(stderr, "fuzz_srv: %s: %s (set CINFER_FUZZ_MODEL)\n", path, err);
        exit(1);
    }
    srv_options o = {.port = 0, .model_name = "qwen3-chat", .n_ctx = 512, .n_threads = 1, .queue_max = 1};
    if (srv_start(g_model, &o, &g_srv, err, sizeof err)) {
        fprintf(stderr, "fuzz_srv: srv_start: %s\n", err);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const routes[] = {"/v1/chat/completions", "/v1/completions", "/v1/messages",
                                         "/v1/messages/count_tokens", "/v1/responses"};
    if (size < 1) return 0;
    const char *route = routes[(data[0] + 2u) % 5]; /* ASCII '0'..'4' pick routes 0..4 */
    char msg[1024];
    msg[0] = 0;
    unsigned st = srv_check_request(g_srv, route, (const char *)data + 1, size - 1, msg, sizeof msg);
    CHECK(st == 200 || (st >= 400 && st < 600));
    if (st != 200) CHECK(msg[0] && !strchr(msg, '\n'));
    return 0;
}
