/*
 * test_serve.c — `cinfer serve` (runtime/server/srv.h) on an ephemeral loopback
 * port, in-process, with the random-weight Qwen3 chat model (real tokenizer
 * and template), driven with libcurl and checked with cJSON.
 *
 * Shown: the OpenAI chat shape non-streaming and as SSE chunks (role delta,
 * content deltas, finish chunk, usage chunk, [DONE]); completions; the
 * Anthropic message shape and its streaming event order; count_tokens;
 * /health and /v1/models; error shapes and codes (bad JSON, missing
 * messages, unknown model, bad role, missing max_tokens, wrong API key, body
 * too large, unknown route); 429 with Retry-After when the queue is full; a
 * client that disconnects mid-stream stops its generation and the server
 * goes on serving.
 */
#include "http_client.h"
#include "server/srv.h"
#include "test.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MODEL_REL "models/chat/qwen3-chat.gguf"
#define KEY "sekret"

/* Serve the model as "qwen3-chat" with API key KEY, a 64 KiB body limit and queue_max. */
static int fx_start(http_srv *f, const char *path, int queue_max) {
    return http_srv_start(f, path, NULL, NULL,
                          (srv_options){.api_key = KEY, .model_name = "qwen3-chat", .n_ctx = 2048, .n_threads = 1,
                                        .queue_max = queue_max, .max_body_bytes = 64 << 10});
}

/* extra_headers for http_request: the key as a bearer token, as x-api-key, a wrong key */
static const char *const BEARER[] = {"Authorization: Bearer " KEY, NULL};
static const char *const XKEY[] = {"x-api-key: " KEY, NULL};
static const char *const BAD_KEY[] = {"Authorization: Bearer nope", NULL};

/* ---- tests ------------------------------------------------------------------------- */

TEST(serve, openai) {
    NEED_SHARED(path, MODEL_REL);
    http_srv f;
    if (fx_start(&f, path, 4)) return;
    long st;
    http_body b = {0};
    EXPECT_EQ_I(http_request(f.base, "/health", NULL, NULL, &b, NULL), 200);
    cJSON *j = b.p ? cJSON_Parse(b.p) : NULL;
    EXPECT_STR_EQ(json_str_at(j, "status"), "ok");
    cJSON_Delete(j);
    free(b.p);

    memset(&b, 0, sizeof b);
    EXPECT_EQ_I(http_request(f.base, "/v1/models", NULL, BEARER, &b, NULL), 200);
    j = b.p ? cJSON_Parse(b.p) : NULL;
    EXPECT_STR_EQ(json_str_at(j, "object"), "list");
    EXPECT_STR_EQ(json_str_at(j, "data.0.id"), "qwen3-chat");
    EXPECT_STR_EQ(json_str_at(j, "data.0.object"), "model");
    cJSON_Delete(j);
    free(b.p);

    /* non-streaming chat */
    j = http_post_json(f.base, "/v1/chat/completions",
                  "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                  "{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":8,\"temperature\":0.7,"
                  "\"top_p\":0.9,\"top_k\":20,\"min_p\":0.01,\"seed\":42}",
                  BEARER, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "object"), "chat.completion");
    EXPECT(json_str_at(j, "id") && !strncmp(json_str_at(j, "id"), "chatcmpl-", 9));
    EXPECT_STR_EQ(json_str_at(j, "model"), "qwen3-chat");
    EXPECT(json_num_at(j, "created") > 1e9);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.message.role"), "assistant");
    EXPECT(json_str_at(j, "choices.0.message.content") != NULL);
    const char *fr = json_str_at(j, "choices.0.finish_reason");
    EXPECT(fr && (!strcmp(fr, "length") || !strcmp(fr, "stop")));
    double pt = json_num_at(j, "usage.prompt_tokens"), ct = json_num_at(j, "usage.completion_tokens");
    EXPECT(pt > 5);
    EXPECT(ct >= 1 && ct <= 8);
    EXPECT_EQ_I(json_num_at(j, "usage.total_tokens"), pt + ct);
    char first[4096];
    snprintf(first, sizeof first, "%s",
             json_str_at(j, "choices.0.message.content") ? json_str_at(j, "choices.0.message.content") : "");
    cJSON_Delete(j);

    /* same seed, same text; content parts as an array of text blocks */
    j = http_post_json(f.base, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Be brief.\"}]},"
                  "{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":8,\"temperature\":0.7,"
                  "\"top_p\":0.9,\"top_k\":20,\"min_p\":0.01,\"seed\":42}",
                  XKEY, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.message.content"), first);
    cJSON_Delete(j);

    /* streaming chat with usage */
    memset(&b, 0, sizeof b);
    EXPECT_EQ_I(http_request(f.base, "/v1/chat/completions",
                     "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                     "\"max_tokens\":5,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
                     BEARER, &b, NULL),
                200);
    http_sse_event ev[64];
    int n = b.p ? http_sse_parse(b.p, ev, 64) : 0;
    EXPECT(n >= 5);
    if (n >= 5) {
        EXPECT_STR_EQ(json_str_at(ev[0].data, "object"), "chat.completion.chunk");
        EXPECT_STR_EQ(json_str_at(ev[0].data, "choices.0.delta.role"), "assistant");
        int n_content = 0;
        for (int i = 1; i < n - 3; i++) {
            EXPECT(json_str_at(ev[i].data, "choices.0.delta.content") != NULL);
            EXPECT_STR_EQ(json_str_at(ev[i].data, "id"), json_str_at(ev[0].data, "id"));
            n_content++;
        }
        EXPECT(n_content >= 1 && n_content <= 5);
        EXPECT_STR_EQ(json_str_at(ev[n - 3].data, "choices.0.finish_reason"), "length");
        EXPECT_EQ_I(cJSON_GetArraySize(cJSON_GetObjectItem(ev[n - 2].data, "choices")), 0);
        EXPECT_EQ_I(json_num_at(ev[n - 2].data, "usage.completion_tokens"), 5);
        EXPECT(ev[n - 1].done);
    }
    http_sse_free(ev, n);
    free(b.p);

    /* completions, with a stop string */
    j = http_post_json(f.base, "/v1/completions",
                  "{\"model\":\"qwen3-chat\",\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"stop\":[\"\\n\\n\"]}",
                  BEARER, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "object"), "text_completion");
    EXPECT(json_str_at(j, "choices.0.text") != NULL);
    EXPECT_EQ_I(json_num_at(j, "usage.prompt_tokens"), 4);
    cJSON_Delete(j);
    /* a client that renders its own chat prompt: control-token text is the token (llama-server does the same) */
    j = http_post_json(f.base, "/v1/completions",
                  "{\"prompt\":\"<|im_start|>user Hi<|im_end|><|im_start|>assistant\",\"max_tokens\":1}", BEARER, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(json_num_at(j, "usage.prompt_tokens"), 6);
    cJSON_Delete(j);

    memset(&b, 0, sizeof b);
    EXPECT_EQ_I(http_request(f.base, "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":3,\"stream\":true}",
                             BEARER, &b, NULL),
                200);
    n = b.p ? http_sse_parse(b.p, ev, 64) : 0;
    EXPECT(n >= 3);
    if (n >= 3) {
        EXPECT_STR_EQ(json_str_at(ev[0].data, "object"), "text_completion");
        EXPECT_STR_EQ(json_str_at(ev[n - 2].data, "choices.0.finish_reason"), "length");
        EXPECT(ev[n - 1].done);
    }
    http_sse_free(ev, n);
    free(b.p);
    http_srv_stop(&f);
}

TEST(serve, anthropic) {
    NEED_SHARED(path, MODEL_REL);
    http_srv f;
    if (fx_start(&f, path, 4)) return;
    long st;
    cJSON *j = http_post_json(f.base, "/v1/messages",
                         "{\"model\":\"qwen3-chat\",\"system\":[{\"type\":\"text\",\"text\":\"Be brief.\"}],"
                         "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello\"}]}],"
                         "\"max_tokens\":6,\"stop_sequences\":[\"\\n\\nHuman:\"],\"metadata\":{\"user_id\":\"u\"}}",
                         XKEY, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT(json_str_at(j, "id") && !strncmp(json_str_at(j, "id"), "msg_", 4));
    EXPECT_STR_EQ(json_str_at(j, "type"), "message");
    EXPECT_STR_EQ(json_str_at(j, "role"), "assistant");
    EXPECT_STR_EQ(json_str_at(j, "content.0.type"), "text");
    EXPECT(json_str_at(j, "content.0.text") != NULL);
    const char *sr = json_str_at(j, "stop_reason");
    EXPECT(sr && (!strcmp(sr, "max_tokens") || !strcmp(sr, "end_turn") || !strcmp(sr, "stop_sequence")));
    double in = json_num_at(j, "usage.input_tokens");
    EXPECT(in > 5);
    EXPECT(json_num_at(j, "usage.output_tokens") >= 1);
    cJSON_Delete(j);

    /* a stop sequence that random text soon produces: reported, and not in the text */
    j = http_post_json(f.base, "/v1/messages",
                  "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],"
                  "\"max_tokens\":200,\"seed\":1,\"stop_sequences\":[\"zzzz\",\"e\"]}",
                  XKEY, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "stop_reason"), "stop_sequence");
    EXPECT_STR_EQ(json_str_at(j, "stop_sequence"), "e");
    EXPECT(json_str_at(j, "content.0.text") && !strchr(json_str_at(j, "content.0.text"), 'e'));
    cJSON_Delete(j);

    /* count_tokens matches the prompt the same messages were generated from */
    j = http_post_json(f.base, "/v1/messages/count_tokens",
                  "{\"model\":\"qwen3-chat\",\"system\":\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}",
                  XKEY, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(json_num_at(j, "input_tokens"), in);
    cJSON_Delete(j);

    /* streaming: the named events in order */
    http_body b = {0};
    EXPECT_EQ_I(http_request(f.base, "/v1/messages",
                     "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                     "\"max_tokens\":4,\"stream\":true}",
                     XKEY, &b, NULL),
                200);
    http_sse_event ev[64];
    int n = b.p ? http_sse_parse(b.p, ev, 64) : 0;
    const char *order[] = {"message_start", "content_block_start", "ping"};
    EXPECT(n >= 7);
    for (int i = 0; i < 3 && i < n; i++) {
        EXPECT_STR_EQ(ev[i].name, order[i]);
        EXPECT_STR_EQ(json_str_at(ev[i].data, "type"), order[i]);
    }
    int deltas = 0;
    for (int i = 3; i < n - 3; i++) {
        EXPECT_STR_EQ(ev[i].name, "content_block_delta");
        EXPECT_STR_EQ(json_str_at(ev[i].data, "delta.type"), "text_delta");
        deltas++;
    }
    EXPECT(deltas >= 1 && deltas <= 4);
    if (n >= 7) {
        EXPECT(json_num_at(ev[0].data, "message.usage.input_tokens") > 0);
        EXPECT_STR_EQ(ev[n - 3].name, "content_block_stop");
        EXPECT_STR_EQ(ev[n - 2].name, "message_delta");
        EXPECT_STR_EQ(json_str_at(ev[n - 2].data, "delta.stop_reason"), "max_tokens");
        EXPECT_EQ_I(json_num_at(ev[n - 2].data, "usage.output_tokens"), 4);
        EXPECT_STR_EQ(ev[n - 1].name, "message_stop");
    }
    http_sse_free(ev, n);
    free(b.p);
    http_srv_stop(&f);
}

static void expect_oai_error(const http_srv *f, const char *path, const char *json, const char *const *auth,
                             long status, const char *param, const char *needle) {
    long st;
    cJSON *j = http_post_json(f->base, path, json, auth, &st);
    EXPECT_MSG(st == status, "%s %s: status %ld, expected %ld", path, json, st, status);
    const char *msg = json_str_at(j, "error.message");
    EXPECT_MSG(msg && strstr(msg, needle), "%s: message '%s' lacks '%s'", json, msg ? msg : "(none)", needle);
    EXPECT(json_str_at(j, "error.type") != NULL);
    EXPECT(cJSON_HasObjectItem(cJSON_GetObjectItem(j, "error"), "code"));
    if (param) EXPECT_STR_EQ(json_str_at(j, "error.param"), param);
    cJSON_Delete(j);
}

static void expect_anth_error(const http_srv *f, const char *json, const char *const *auth, long status,
                              const char *type, const char *needle) {
    long st;
    cJSON *j = http_post_json(f->base, "/v1/messages", json, auth, &st);
    EXPECT_MSG(st == status, "%s: status %ld, expected %ld", json, st, status);
    EXPECT_STR_EQ(json_str_at(j, "type"), "error");
    EXPECT_STR_EQ(json_str_at(j, "error.type"), type);
    const char *msg = json_str_at(j, "error.message");
    EXPECT_MSG(msg && strstr(msg, needle), "%s: message '%s' lacks '%s'", json, msg ? msg : "(none)", needle);
    cJSON_Delete(j);
}

TEST(serve, errors) {
    NEED_SHARED(path, MODEL_REL);
    http_srv f;
    if (fx_start(&f, path, 4)) return;
    const char *chat = "/v1/chat/completions";
    expect_oai_error(&f, chat, "{\"messages\":[", BEARER, 400, NULL, "not valid JSON");
    expect_oai_error(&f, chat, "[1,2]", BEARER, 400, NULL, "JSON object");
    expect_oai_error(&f, chat, "{\"model\":\"qwen3-chat\"}", BEARER, 400, "messages", "'messages' is required");
    expect_oai_error(&f, chat, "{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", BEARER,
                     404, "model", "gpt-9");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", BEARER, 400,
                     "messages[0].role", "robot");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\"}]}", BEARER, 400, "messages[0].content",
                     "required");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":-1}", BEARER,
                     400, "temperature", "temperature");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_k\":2.5}", BEARER,
                     400, "top_k", "integer");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}", BEARER,
                     400, "max_tokens", "integer");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":7}", BEARER, 400,
                     "stop", "stop");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", NULL, 401, NULL, "API key");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", BAD_KEY, 401, NULL,
                     "API key");
    expect_oai_error(&f, "/v1/completions", "{\"max_tokens\":3}", BEARER, 400, "prompt", "'prompt' is required");
    expect_oai_error(&f, "/v1/nothing", "{}", BEARER, 404, NULL, "no route");
    /* body over the 64 KiB limit the fixture sets */
    size_t big_n = 100 << 10;
    char *big = malloc(big_n + 64);
    snprintf(big, 64, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    size_t l = strlen(big);
    memset(big + l, 'a', big_n);
    snprintf(big + l + big_n, 64, "\"}]}");
    expect_oai_error(&f, chat, big, BEARER, 413, NULL, "exceeds");
    free(big);

    expect_anth_error(&f, "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                      XKEY, 400, "invalid_request_error", "'max_tokens' is required");
    expect_anth_error(&f, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":3}", XKEY, 400,
                      "invalid_request_error", "'model' is required");
    expect_anth_error(&f, "{\"model\":\"claude\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":3}",
                      XKEY, 404, "not_found_error", "claude");
    expect_anth_error(&f,
                      "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}],"
                      "\"max_tokens\":3}",
                      XKEY, 400, "invalid_request_error", "messages[0].content[0]");
    expect_anth_error(&f, "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":3}",
                      BAD_KEY, 401, "authentication_error", "API key");
    expect_anth_error(&f, "not json", XKEY, 400, "invalid_request_error", "not valid JSON");

    /* still healthy */
    http_body b = {0};
    EXPECT_EQ_I(http_request(f.base, "/health", NULL, NULL, &b, NULL), 200);
    free(b.p);
    http_srv_stop(&f);
}

/* Requests run on a thread (http_async): a long streamed story, a short chat. */
static http_async long_stream(const http_srv *f) {
    return (http_async){.base = f->base,
                        .path = "/v1/chat/completions",
                        .json = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a long story\"}],"
                                "\"max_tokens\":2000,\"temperature\":0,\"stream\":true}",
                        .extra_headers = BEARER};
}
static http_async short_chat(const http_srv *f) {
    return (http_async){.base = f->base,
                        .path = "/v1/chat/completions",
                        .json = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}",
                        .extra_headers = BEARER};
}

static cJSON *health(const http_srv *f) {
    http_body b = {0};
    http_request(f->base, "/health", NULL, NULL, &b, NULL);
    cJSON *j = b.p ? cJSON_Parse(b.p) : NULL;
    free(b.p);
    return j;
}

/* After one 2000-token request A whose client left and requests that
 * generated `others` tokens in all: /health counts A as cancelled, and A
 * generated far fewer than 2000 tokens (its generation stopped, it did not
 * run to the end after its client had gone). */
static void expect_a_cancelled(cJSON *h, double others) {
    EXPECT_EQ_I(json_num_at(h, "models.0.requests_cancelled"), 1);
    double a_tokens = json_num_at(h, "models.0.completion_tokens") - others;
    EXPECT_MSG(a_tokens >= 0 && a_tokens < 1000, "the abandoned request generated %g of its 2000 tokens", a_tokens);
}

TEST(serve, queue_and_disconnect) {
    NEED_SHARED(path, MODEL_REL);
    http_srv f;
    if (fx_start(&f, path, 1)) return;
    /* A streams, and its client blocks after the first bytes until released, then disconnects */
    http_async a = long_stream(&f);
    a.holds = 1;
    atomic_store(&a.hold, 1);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, http_async_run, &a);
    for (int i = 0; i < 5000 && !atomic_load(&a.got); i++) usleep(1000);
    EXPECT(atomic_load(&a.got));
    /* B waits behind A (A's first bytes come before the worker takes it: wait
     * for A running and B queued) */
    http_async b = short_chat(&f);
    pthread_create(&tb, NULL, http_async_run, &b);
    int queued = 0, busy = 0;
    for (int i = 0; i < 5000 && !(queued == 1 && busy == 1); i++) {
        cJSON *h = health(&f);
        queued = (int)json_num_at(h, "queued");
        busy = (int)json_num_at(h, "busy");
        cJSON_Delete(h);
        if (!(queued == 1 && busy == 1)) usleep(1000);
    }
    EXPECT_EQ_I(queued, 1);
    EXPECT_EQ_I(busy, 1);
    /* C finds the queue full */
    http_body c = {0};
    http_meta meta;
    memset(&meta, 0, sizeof meta);
    EXPECT_EQ_I(http_request(f.base, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}", BEARER, &c, &meta),
                429);
    EXPECT(atoi(meta.retry_after) >= 1);
    cJSON *cj = c.p ? cJSON_Parse(c.p) : NULL;
    EXPECT(json_str_at(cj, "error.message") && strstr(json_str_at(cj, "error.message"), "queue"));
    cJSON_Delete(cj);
    free(c.p);
    /* A's client goes away: its generation stops (counted as cancelled, with
     * far fewer than its 2000 tokens generated) and B runs */
    atomic_store(&a.hold, 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    free(a.text);
    EXPECT_EQ_I(b.status, 200);
    cj = b.text ? cJSON_Parse(b.text) : NULL;
    EXPECT_EQ_I(json_num_at(cj, "usage.completion_tokens"), 2);
    cJSON_Delete(cj);
    free(b.text);
    cJSON *h = health(&f);
    EXPECT_EQ_I(json_num_at(h, "queued"), 0);
    EXPECT_EQ_I(json_num_at(h, "busy"), 0);
    expect_a_cancelled(h, 2);
    cJSON_Delete(h);
    /* and serves the next request */
    long st;
    cJSON *j = http_post_json(f.base, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":2}", BEARER, &st);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);
    http_srv_stop(&f);
}

/* srv_stop with a stream running and a request queued: the stream is cut
 * short (finish_reason "stop", far fewer than its 2000 tokens) and gets its
 * final chunk and [DONE], the queued request 503. */
TEST(serve, shutdown) {
    NEED_SHARED(path, MODEL_REL);
    http_srv f;
    if (fx_start(&f, path, 4)) return;
    http_async a = long_stream(&f), b = short_chat(&f);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, http_async_run, &a);
    for (int i = 0; i < 5000 && !atomic_load(&a.got); i++) usleep(1000);
    pthread_create(&tb, NULL, http_async_run, &b);
    /* A running (its first bytes come before the worker takes it), B queued */
    int queued = 0, busy = 0;
    for (int i = 0; i < 5000 && !(queued == 1 && busy == 1); i++) {
        cJSON *h = health(&f);
        queued = (int)json_num_at(h, "queued");
        busy = (int)json_num_at(h, "busy");
        cJSON_Delete(h);
        if (!(queued == 1 && busy == 1)) usleep(1000);
    }
    EXPECT_EQ_I(queued, 1);
    EXPECT_EQ_I(busy, 1);
    http_srv_stop(&f);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    EXPECT_EQ_I(a.status, 200);
    size_t n = a.text ? strlen(a.text) : 0;
    EXPECT_MSG(n >= 14 && !strcmp(a.text + n - 14, "data: [DONE]\n\n"), "stream did not end with [DONE]");
    EXPECT(a.text && strstr(a.text, "\"finish_reason\":\"stop\""));
    int n_deltas = 0;
    for (const char *q = a.text; q && (q = strstr(q, "\"content\":")); q++) n_deltas++;
    EXPECT_MSG(n_deltas >= 1 && n_deltas < 1000, "the stream cut by srv_stop had %d content deltas of 2000", n_deltas);
    EXPECT_EQ_I(b.status, 503);
    free(a.text);
    free(b.text);
}

/* A non-streaming client that gives up: its generation stops (counted as
 * cancelled, far fewer than its 2000 tokens generated) and the next request
 * is answered. */
TEST(serve, disconnect_nonstream) {
    NEED_SHARED(path, MODEL_REL);
    http_srv f;
    if (fx_start(&f, path, 4)) return;
    http_async a = long_stream(&f); /* not streamed, and the client gives up after 300 ms */
    a.json = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a long story\"}],"
             "\"max_tokens\":2000,\"temperature\":0}";
    a.timeout_ms = 300;
    http_async_run(&a);
    free(a.text);
    EXPECT_EQ_I(a.curl_code, CURLE_OPERATION_TIMEDOUT);
    long st;
    cJSON *j = http_post_json(f.base, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":2}", BEARER, &st);
    EXPECT_EQ_I(st, 200);
    double next_tokens = json_num_at(j, "usage.completion_tokens");
    EXPECT_EQ_I(next_tokens, 2);
    cJSON_Delete(j);
    cJSON *h = health(&f);
    expect_a_cancelled(h, next_tokens);
    cJSON_Delete(h);
    http_srv_stop(&f);
}
