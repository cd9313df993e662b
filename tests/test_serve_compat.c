/*
 * test_serve_compat.c — `cinfer serve` where it must match the OpenAI and
 * Anthropic APIs or say plainly that it does not (a new user's report):
 *   - a forced tool call's prompt tokens are counted alike by usage
 *     (non-streaming), message_start (streaming) and count_tokens;
 *   - a /v1/responses stream cut at max_output_tokens ends with
 *     response.incomplete, not response.completed;
 *   - Anthropic endpoints require "model", OpenAI's fall back to the first model;
 *   - a model without a chat template: chat-like endpoints are a 400 naming
 *     the problem and pointing to /v1/completions, /v1/models says chat:false;
 *   - /v1/completions: echo, token-id prompts, response_format, and a 400
 *     (never silence) for suffix and best_of.
 * Models: the random-weight Qwen3 chat model (template with tool calls) as
 * "chat", stories260K (no chat template) as "stories".
 */
#include "cinfer.h"
#include "http_client.h"
#include "server/srv.h"
#include "test.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#define CHAT_REL "models/chat/qwen3-chat.gguf"
#define STORIES_REL "models/stories260K/stories260K.gguf"

/* Serve the chat model as "chat" and stories260K as "stories"; nonzero (skipped or failed) when not started. */
static int fx_start(http_srv *f) {
    const char *pa = shared_path(CHAT_REL), *pb = shared_path(STORIES_REL);
    if (!pa || !pb) {
        test_skip("%s/%s absent", shared_root(), pa ? STORIES_REL : CHAT_REL);
        return -1;
    }
    return http_srv_start(f, pa, pb, "stories",
                          (srv_options){.model_name = "chat", .n_ctx = 1024, .n_threads = 1, .queue_max = 4});
}

static cJSON *post(const http_srv *f, const char *path, const char *json, long *status) {
    return http_post_json(f->base, path, json, NULL, status);
}

/* POST a streaming request: its events (http_sse_free them). */
static int post_sse(const http_srv *f, const char *path, const char *json, http_sse_event *ev, int max, long *status) {
    http_body b = {0};
    *status = http_request(f->base, path, json, NULL, &b, NULL);
    int n = b.p ? http_sse_parse(b.p, ev, max) : 0;
    free(b.p);
    return n;
}

/* Expect a 4xx error answer whose message contains each of the words (NULL-terminated). */
static void expect_error(cJSON *j, long st, long want, const char *param, const char *const *words) {
    EXPECT_EQ_I(st, want);
    const char *msg = json_str_at(j, "error.message");
    EXPECT(msg != NULL);
    for (int i = 0; msg && words && words[i]; i++)
        if (!strstr(msg, words[i])) test_fail(__FILE__, __LINE__, "error '%s' lacks '%s'", msg, words[i]);
    if (param) EXPECT_STR_EQ(json_str_at(j, "error.param"), param);
}

#define TIME_TOOL                                                                                                  \
    "[{\"name\":\"get_time\",\"description\":\"Time\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"tz\":" \
    "{\"type\":\"string\",\"enum\":[\"UTC\",\"CET\"]}},\"required\":[\"tz\"],\"additionalProperties\":false}}]"

TEST(serve_compat, forced_tool_input_tokens) {
    http_srv f;
    if (fx_start(&f)) return;
    long st;
    static const char BODY[] = "{\"model\":\"chat\",\"max_tokens\":24,\"temperature\":0,\"tools\":" TIME_TOOL
                               ",\"tool_choice\":{\"type\":\"any\"},\"messages\":[{\"role\":\"user\",\"content\":"
                               "\"What time is it?\"}]%s}";
    char req[2048];
    snprintf(req, sizeof req, BODY, "");
    cJSON *j = post(&f, "/v1/messages", req, &st);
    EXPECT_EQ_I(st, 200);
    double full = json_num_at(j, "usage.input_tokens");
    cJSON_Delete(j);
    j = post(&f, "/v1/messages/count_tokens", req, &st);
    EXPECT_EQ_I(st, 200);
    double counted = json_num_at(j, "input_tokens");
    cJSON_Delete(j);
    snprintf(req, sizeof req, BODY, ",\"stream\":true");
    http_sse_event ev[64];
    int n = post_sse(&f, "/v1/messages", req, ev, 64, &st);
    EXPECT_EQ_I(st, 200);
    double started = n > 0 && !strcmp(ev[0].name, "message_start") ? json_num_at(ev[0].data, "message.usage.input_tokens") : -1;
    http_sse_free(ev, n);
    /* the forced opener is evaluated as prompt: all three count it */
    EXPECT(full > 0);
    EXPECT_EQ_I((long)started, (long)full);
    EXPECT_EQ_I((long)counted, (long)full);
    /* and without tools the count is smaller by the opener (the count includes it, not just agrees) */
    j = post(&f, "/v1/messages/count_tokens",
             "{\"model\":\"chat\",\"tools\":" TIME_TOOL ",\"messages\":[{\"role\":\"user\",\"content\":\"What time is "
             "it?\"}]}",
             &st);
    EXPECT_EQ_I(st, 200);
    EXPECT(json_num_at(j, "input_tokens") > 0 && json_num_at(j, "input_tokens") < counted);
    cJSON_Delete(j);
    http_srv_stop(&f);
}

TEST(serve_compat, responses_incomplete_event) {
    http_srv f;
    if (fx_start(&f)) return;
    long st;
    http_sse_event ev[64];
    int n = post_sse(&f, "/v1/responses",
                     "{\"model\":\"chat\",\"input\":\"Tell me a long story\",\"max_output_tokens\":2,"
                     "\"temperature\":0,\"stream\":true}",
                     ev, 64, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT(n >= 2);
    if (n >= 2) {
        EXPECT_STR_EQ(ev[n - 1].name, "response.incomplete");
        EXPECT_STR_EQ(json_str_at(ev[n - 1].data, "type"), "response.incomplete");
        EXPECT_STR_EQ(json_str_at(ev[n - 1].data, "response.status"), "incomplete");
        EXPECT_STR_EQ(json_str_at(ev[n - 1].data, "response.incomplete_details.reason"), "max_output_tokens");
    }
    for (int i = 0; i < n; i++) EXPECT(strcmp(ev[i].name, "response.completed"));
    http_sse_free(ev, n);
    http_srv_stop(&f);
}

TEST(serve_compat, model_field) {
    http_srv f;
    if (fx_start(&f)) return;
    long st;
    /* Anthropic requires model (as Anthropic's API does) */
    cJSON *j = post(&f, "/v1/messages", "{\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &st);
    expect_error(j, st, 400, NULL, (const char *const[]){"'model' is required", NULL});
    EXPECT_STR_EQ(json_str_at(j, "error.type"), "invalid_request_error");
    cJSON_Delete(j);
    j = post(&f, "/v1/messages/count_tokens", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &st);
    expect_error(j, st, 400, NULL, (const char *const[]){"'model' is required", NULL});
    cJSON_Delete(j);
    /* OpenAI: the first model */
    j = post(&f, "/v1/chat/completions", "{\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "model"), "chat");
    cJSON_Delete(j);
    http_srv_stop(&f);
}

TEST(serve_compat, no_chat_template) {
    http_srv f;
    if (fx_start(&f)) return;
    long st;
    static const char *const WORDS[] = {"'stories'", "chat template", "/v1/completions", NULL};
    const char *msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char req[512];
    snprintf(req, sizeof req, "{\"model\":\"stories\",\"max_tokens\":4,%s}", msgs);
    cJSON *j = post(&f, "/v1/chat/completions", req, &st);
    expect_error(j, st, 400, "model", WORDS);
    cJSON_Delete(j);
    snprintf(req, sizeof req, "{\"model\":\"stories\",\"max_tokens\":4,\"stream\":true,%s}", msgs);
    j = post(&f, "/v1/chat/completions", req, &st);
    expect_error(j, st, 400, "model", WORDS);
    cJSON_Delete(j);
    snprintf(req, sizeof req, "{\"model\":\"stories\",\"max_tokens\":4,%s}", msgs);
    j = post(&f, "/v1/messages", req, &st);
    expect_error(j, st, 400, NULL, WORDS);
    EXPECT_STR_EQ(json_str_at(j, "error.type"), "invalid_request_error");
    cJSON_Delete(j);
    j = post(&f, "/v1/messages/count_tokens", req, &st);
    expect_error(j, st, 400, NULL, WORDS);
    cJSON_Delete(j);
    j = post(&f, "/v1/responses", "{\"model\":\"stories\",\"input\":\"hi\"}", &st);
    expect_error(j, st, 400, "model", WORDS);
    cJSON_Delete(j);
    /* what does work on it */
    j = post(&f, "/v1/completions", "{\"model\":\"stories\",\"prompt\":\"Once\",\"max_tokens\":2}", &st);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);
    /* /v1/models says which models chat */
    j = post(&f, "/v1/models", NULL, &st);
    EXPECT_EQ_I(st, 200);
    int seen = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(j, "data")) {
        const char *id = json_str_at(m, "id");
        const cJSON *chat = cJSON_GetObjectItemCaseSensitive(m, "chat");
        EXPECT(cJSON_IsBool(chat));
        if (id && !strcmp(id, "chat")) {
            seen++;
            EXPECT(cJSON_IsTrue(chat));
        }
        if (id && !strcmp(id, "stories")) {
            seen++;
            EXPECT(cJSON_IsFalse(chat));
        }
    }
    EXPECT_EQ_I(seen, 2);
    cJSON_Delete(j);
    http_srv_stop(&f);
}

/* The greedy completion text of body on f (NULL on failure; the caller frees). */
static char *complete(const http_srv *f, const char *body) {
    long st;
    cJSON *j = post(f, "/v1/completions", body, &st);
    EXPECT_EQ_I(st, 200);
    const char *t = json_str_at(j, "choices.0.text");
    char *r = t ? strdup(t) : NULL;
    if (!t) test_fail(__FILE__, __LINE__, "no choices.0.text for %s", body);
    cJSON_Delete(j);
    return r;
}

TEST(serve_compat, completions_fields) {
    http_srv f;
    if (fx_start(&f)) return;
    long st;
    /* echo: the prompt, then the same completion as without echo */
    char *plain = complete(&f, "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"temperature\":0}");
    char *echoed = complete(&f, "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"max_tokens\":6,"
                                "\"temperature\":0,\"echo\":true}");
    char want[1024];
    snprintf(want, sizeof want, "Once upon a time%s", plain ? plain : "?");
    EXPECT(plain && plain[0]);
    EXPECT_STR_EQ(echoed, want);
    free(echoed);
    /* streamed: the prompt is the first chunk */
    http_sse_event ev[64];
    int n = post_sse(&f, "/v1/completions",
                     "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"temperature\":0,"
                     "\"echo\":true,\"stream\":true}",
                     ev, 64, &st);
    EXPECT_EQ_I(st, 200);
    char joined[1024] = "";
    for (int i = 0; i < n; i++)
        if (json_str_at(ev[i].data, "choices.0.text"))
            strncat(joined, json_str_at(ev[i].data, "choices.0.text"), sizeof joined - strlen(joined) - 1);
    EXPECT(n > 0 && json_str_at(ev[0].data, "choices.0.text") &&
           !strcmp(json_str_at(ev[0].data, "choices.0.text"), "Once upon a time"));
    EXPECT_STR_EQ(joined, want);
    http_sse_free(ev, n);

    /* token-id prompts: the string's tokens give the string's completion */
    int32_t ids[64];
    size_t nid = 0;
    EXPECT_EQ_I(cinfer_tokenize(f.m2, "Once upon a time", 16, 1, 0, ids, 64, &nid), 0);
    char arr[512] = "", body[1024];
    for (size_t i = 0; i < nid && nid <= 64; i++)
        snprintf(arr + strlen(arr), sizeof arr - strlen(arr), "%s%d", i ? "," : "", ids[i]);
    snprintf(body, sizeof body, "{\"model\":\"stories\",\"prompt\":[%s],\"max_tokens\":6,\"temperature\":0}", arr);
    char *from_ids = complete(&f, body);
    EXPECT_STR_EQ(from_ids, plain);
    free(from_ids);
    snprintf(body, sizeof body, "{\"model\":\"stories\",\"prompt\":[[%s]],\"max_tokens\":6,\"temperature\":0}", arr);
    from_ids = complete(&f, body);
    EXPECT_STR_EQ(from_ids, plain);
    free(from_ids);
    /* echo of ids: their text */
    snprintf(body, sizeof body, "{\"model\":\"stories\",\"prompt\":[%s],\"max_tokens\":6,\"temperature\":0,\"echo\":true}",
             arr);
    from_ids = complete(&f, body);
    EXPECT(from_ids && strstr(from_ids, "Once upon a time") && plain && strlen(from_ids) > strlen(plain) &&
           !strcmp(from_ids + strlen(from_ids) - strlen(plain), plain));
    free(from_ids);
    free(plain);
    /* bad ids */
    snprintf(body, sizeof body, "{\"model\":\"stories\",\"prompt\":[1,%d],\"max_tokens\":2}", cinfer_model_n_vocab(f.m2));
    cJSON *j = post(&f, "/v1/completions", body, &st);
    expect_error(j, st, 400, "prompt", (const char *const[]){"prompt[1]", "token id", NULL});
    cJSON_Delete(j);
    j = post(&f, "/v1/completions", "{\"model\":\"stories\",\"prompt\":[1,1e300],\"max_tokens\":2}", &st);
    expect_error(j, st, 400, "prompt", (const char *const[]){"prompt[1]", NULL});
    cJSON_Delete(j);
    j = post(&f, "/v1/completions", "{\"model\":\"stories\",\"prompt\":[],\"max_tokens\":2}", &st);
    expect_error(j, st, 400, "prompt", NULL);
    cJSON_Delete(j);
    j = post(&f, "/v1/completions", "{\"model\":\"stories\",\"prompt\":[1,\"a\"],\"max_tokens\":2}", &st);
    expect_error(j, st, 400, "prompt", NULL);
    cJSON_Delete(j);

    /* unsupported fields are named, not ignored */
    j = post(&f, "/v1/completions", "{\"model\":\"stories\",\"prompt\":\"a\",\"suffix\":\"b\",\"max_tokens\":2}", &st);
    expect_error(j, st, 400, "suffix", (const char *const[]){"suffix", "not supported", NULL});
    cJSON_Delete(j);
    j = post(&f, "/v1/completions", "{\"model\":\"stories\",\"prompt\":\"a\",\"best_of\":3,\"max_tokens\":2}", &st);
    expect_error(j, st, 400, "best_of", NULL);
    cJSON_Delete(j);
    j = post(&f, "/v1/completions",
             "{\"model\":\"stories\",\"prompt\":\"a\",\"echo\":true,\"logprobs\":1,\"max_tokens\":2}", &st);
    expect_error(j, st, 400, "echo", (const char *const[]){"not supported", NULL});
    cJSON_Delete(j);
    j = post(&f, "/v1/completions", "{\"model\":\"stories\",\"prompt\":\"a\",\"echo\":1,\"max_tokens\":2}", &st);
    expect_error(j, st, 400, "echo", NULL);
    cJSON_Delete(j);
    /* null / 1 are the defaults */
    j = post(&f, "/v1/completions",
             "{\"model\":\"stories\",\"prompt\":\"a\",\"suffix\":null,\"best_of\":1,\"echo\":false,\"max_tokens\":2}",
             &st);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);

    /* response_format: applied as on chat */
    static const char SCHEMA[] = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0,"
                                 "\"maximum\":99},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"n\",\"ok\"],"
                                 "\"additionalProperties\":false}";
    snprintf(body, sizeof body,
             "{\"model\":\"chat\",\"prompt\":\"Answer in JSON:\",\"max_tokens\":60,\"temperature\":0,"
             "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"r\",\"schema\":%s}}}",
             SCHEMA);
    j = post(&f, "/v1/completions", body, &st);
    EXPECT_EQ_I(st, 200);
    const char *t = json_str_at(j, "choices.0.text");
    EXPECT(t && t[0] == '{');
    if (t && json_str_at(j, "choices.0.finish_reason") && !strcmp(json_str_at(j, "choices.0.finish_reason"), "stop")) {
        cinfer_grammar *g = NULL;
        char err[256];
        EXPECT_EQ_I(cinfer_grammar_from_schema(NULL, SCHEMA, strlen(SCHEMA), NULL, &g, err, sizeof err), 0);
        EXPECT_EQ_I(g ? cinfer_grammar_check(g, t, strlen(t), err, sizeof err) : 0, 1);
        cinfer_grammar_free(g);
    }
    cJSON_Delete(j);
    j = post(&f, "/v1/completions",
             "{\"model\":\"chat\",\"prompt\":\"x\",\"max_tokens\":4,\"response_format\":{\"type\":\"json_schema\","
             "\"json_schema\":{\"name\":\"r\",\"schema\":{\"type\":\"object\",\"if\":{\"required\":[\"a\"]},"
             "\"then\":{\"required\":[\"b\"]}}}}}",
             &st);
    expect_error(j, st, 400, "response_format.json_schema.schema", NULL);
    cJSON_Delete(j);
    j = post(&f, "/v1/completions", "{\"model\":\"chat\",\"prompt\":\"x\",\"max_tokens\":4,\"response_format\":{\"type\":\"xml\"}}",
             &st);
    expect_error(j, st, 400, "response_format.type", NULL);
    cJSON_Delete(j);
    http_srv_stop(&f);
}
