/*
 * test_serve.c — `cinfer serve` (runtime/srv.h) on an ephemeral loopback
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
#include "srv.h"
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

typedef struct {
    cinfer_model *m;
    srv *s;
    char base[64];
} fixture;

static int fx_start(fixture *f, const char *path, int queue_max) {
    char err[512];
    memset(f, 0, sizeof *f);
    if (cinfer_model_open(path, NULL, &f->m, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "model open: %s", err);
        return -1;
    }
    srv_options o = {.port = 0, .api_key = KEY, .model_name = "qwen3-chat", .n_ctx = 2048, .n_threads = 1,
                     .queue_max = queue_max, .max_body_bytes = 64 << 10};
    if (srv_start(f->m, &o, &f->s, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "srv_start: %s", err);
        cinfer_model_close(f->m);
        return -1;
    }
    snprintf(f->base, sizeof f->base, "http://127.0.0.1:%d", srv_port(f->s));
    return 0;
}

static void fx_stop(fixture *f) {
    srv_stop(f->s);
    cinfer_model_close(f->m);
}

/* ---- HTTP client ---------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len;
    size_t abort_after;      /* nonzero: fail the transfer once this many bytes arrived */
    atomic_int *hold;        /* non-NULL: block in the callback while *hold, then abort */
    atomic_int *got_bytes;   /* set to 1 when the first bytes arrive */
} body;

static size_t on_write(char *d, size_t sz, size_t n, void *u) {
    body *b = u;
    size_t k = sz * n;
    char *np = realloc(b->p, b->len + k + 1);
    if (!np) return 0;
    b->p = np;
    memcpy(b->p + b->len, d, k);
    b->len += k;
    b->p[b->len] = 0;
    if (b->got_bytes) atomic_store(b->got_bytes, 1);
    if (b->hold) {
        while (atomic_load(b->hold)) usleep(1000);
        return 0; /* abort: the client goes away mid-stream */
    }
    if (b->abort_after && b->len >= b->abort_after) return 0;
    return k;
}

typedef struct {
    long status;
    char retry_after[16];
} resp_meta;

static size_t on_header(char *d, size_t sz, size_t n, void *u) {
    resp_meta *m = u;
    size_t k = sz * n;
    if (k > 13 && !strncasecmp(d, "Retry-After:", 12)) {
        size_t l = k - 12;
        if (l >= sizeof m->retry_after) l = sizeof m->retry_after - 1;
        memcpy(m->retry_after, d + 12, l);
        m->retry_after[l] = 0;
    }
    return k;
}

/* POST (body non-NULL) or GET base+path; auth: "bearer", "x-api-key", "bad" or NULL (none). */
static long http(const fixture *f, const char *path, const char *json, const char *auth, body *out,
                 resp_meta *meta) {
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s%s", f->base, path);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (auth && !strcmp(auth, "bearer")) h = curl_slist_append(h, "Authorization: Bearer " KEY);
    if (auth && !strcmp(auth, "x-api-key")) h = curl_slist_append(h, "x-api-key: " KEY);
    if (auth && !strcmp(auth, "bad")) h = curl_slist_append(h, "Authorization: Bearer nope");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (json) curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    resp_meta dummy;
    memset(&dummy, 0, sizeof dummy);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, meta ? meta : &dummy);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (meta) meta->status = status;
    return status;
}

/* POST and parse: returns the JSON (caller frees) and the status. */
static cJSON *post_json(const fixture *f, const char *path, const char *json, const char *auth, long *status) {
    body b = {0};
    *status = http(f, path, json, auth, &b, NULL);
    cJSON *j = b.p ? cJSON_Parse(b.p) : NULL;
    if (!j) test_fail(__FILE__, __LINE__, "%s: response is not JSON: %s", path, b.p ? b.p : "(empty)");
    free(b.p);
    return j;
}

static const char *jstr(const cJSON *o, const char *path) {
    /* dotted path with numeric array indices: "choices.0.message.content" */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *v = o;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = (*tok >= '0' && *tok <= '9') ? cJSON_GetArrayItem(v, atoi(tok)) : cJSON_GetObjectItemCaseSensitive(v, tok);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
static double jnum(const cJSON *o, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *v = o;
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = (*tok >= '0' && *tok <= '9') ? cJSON_GetArrayItem(v, atoi(tok)) : cJSON_GetObjectItemCaseSensitive(v, tok);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Split an SSE body into events: for each, the event name (or "") and parsed data
 * (NULL for "[DONE]").  Returns the count. */
typedef struct {
    char name[48];
    cJSON *data;
    int done;
} sse_event;

static int sse_parse(char *text, sse_event *ev, int max) {
    int n = 0;
    char *save = NULL;
    for (char *blk = text; blk && *blk && n < max;) {
        char *end = strstr(blk, "\n\n");
        if (end) *end = 0;
        memset(&ev[n], 0, sizeof ev[n]);
        int has_data = 0;
        for (char *line = strtok_r(blk, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (!strncmp(line, "event: ", 7)) snprintf(ev[n].name, sizeof ev[n].name, "%s", line + 7);
            else if (!strncmp(line, "data: ", 6)) {
                has_data = 1;
                if (!strcmp(line + 6, "[DONE]")) ev[n].done = 1;
                else ev[n].data = cJSON_Parse(line + 6);
                if (!ev[n].done && !ev[n].data) test_fail(__FILE__, __LINE__, "SSE data is not JSON: %s", line + 6);
            }
        }
        if (has_data) n++;
        blk = end ? end + 2 : NULL;
    }
    return n;
}
static void sse_free(sse_event *ev, int n) {
    for (int i = 0; i < n; i++) cJSON_Delete(ev[i].data);
}

/* ---- tests ------------------------------------------------------------------------- */

TEST(serve, openai) {
    NEED_SHARED(path, MODEL_REL);
    fixture f;
    if (fx_start(&f, path, 4)) return;
    long st;
    body b = {0};
    EXPECT_EQ_I(http(&f, "/health", NULL, NULL, &b, NULL), 200);
    cJSON *j = b.p ? cJSON_Parse(b.p) : NULL;
    EXPECT_STR_EQ(jstr(j, "status"), "ok");
    cJSON_Delete(j);
    free(b.p);

    memset(&b, 0, sizeof b);
    EXPECT_EQ_I(http(&f, "/v1/models", NULL, "bearer", &b, NULL), 200);
    j = b.p ? cJSON_Parse(b.p) : NULL;
    EXPECT_STR_EQ(jstr(j, "object"), "list");
    EXPECT_STR_EQ(jstr(j, "data.0.id"), "qwen3-chat");
    EXPECT_STR_EQ(jstr(j, "data.0.object"), "model");
    cJSON_Delete(j);
    free(b.p);

    /* non-streaming chat */
    j = post_json(&f, "/v1/chat/completions",
                  "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                  "{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":8,\"temperature\":0.7,"
                  "\"top_p\":0.9,\"top_k\":20,\"min_p\":0.01,\"seed\":42}",
                  "bearer", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(jstr(j, "object"), "chat.completion");
    EXPECT(jstr(j, "id") && !strncmp(jstr(j, "id"), "chatcmpl-", 9));
    EXPECT_STR_EQ(jstr(j, "model"), "qwen3-chat");
    EXPECT(jnum(j, "created") > 1e9);
    EXPECT_STR_EQ(jstr(j, "choices.0.message.role"), "assistant");
    EXPECT(jstr(j, "choices.0.message.content") != NULL);
    const char *fr = jstr(j, "choices.0.finish_reason");
    EXPECT(fr && (!strcmp(fr, "length") || !strcmp(fr, "stop")));
    double pt = jnum(j, "usage.prompt_tokens"), ct = jnum(j, "usage.completion_tokens");
    EXPECT(pt > 5);
    EXPECT(ct >= 1 && ct <= 8);
    EXPECT_EQ_I(jnum(j, "usage.total_tokens"), pt + ct);
    char first[4096];
    snprintf(first, sizeof first, "%s", jstr(j, "choices.0.message.content") ? jstr(j, "choices.0.message.content") : "");
    cJSON_Delete(j);

    /* same seed, same text; content parts as an array of text blocks */
    j = post_json(&f, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Be brief.\"}]},"
                  "{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":8,\"temperature\":0.7,"
                  "\"top_p\":0.9,\"top_k\":20,\"min_p\":0.01,\"seed\":42}",
                  "x-api-key", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(jstr(j, "choices.0.message.content"), first);
    cJSON_Delete(j);

    /* streaming chat with usage */
    memset(&b, 0, sizeof b);
    EXPECT_EQ_I(http(&f, "/v1/chat/completions",
                     "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                     "\"max_tokens\":5,\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
                     "bearer", &b, NULL),
                200);
    sse_event ev[64];
    int n = b.p ? sse_parse(b.p, ev, 64) : 0;
    EXPECT(n >= 5);
    if (n >= 5) {
        EXPECT_STR_EQ(jstr(ev[0].data, "object"), "chat.completion.chunk");
        EXPECT_STR_EQ(jstr(ev[0].data, "choices.0.delta.role"), "assistant");
        int n_content = 0;
        for (int i = 1; i < n - 3; i++) {
            EXPECT(jstr(ev[i].data, "choices.0.delta.content") != NULL);
            EXPECT_STR_EQ(jstr(ev[i].data, "id"), jstr(ev[0].data, "id"));
            n_content++;
        }
        EXPECT(n_content >= 1 && n_content <= 5);
        EXPECT_STR_EQ(jstr(ev[n - 3].data, "choices.0.finish_reason"), "length");
        EXPECT_EQ_I(cJSON_GetArraySize(cJSON_GetObjectItem(ev[n - 2].data, "choices")), 0);
        EXPECT_EQ_I(jnum(ev[n - 2].data, "usage.completion_tokens"), 5);
        EXPECT(ev[n - 1].done);
    }
    sse_free(ev, n);
    free(b.p);

    /* completions, with a stop string */
    j = post_json(&f, "/v1/completions",
                  "{\"model\":\"qwen3-chat\",\"prompt\":\"Once upon a time\",\"max_tokens\":6,\"stop\":[\"\\n\\n\"]}",
                  "bearer", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(jstr(j, "object"), "text_completion");
    EXPECT(jstr(j, "choices.0.text") != NULL);
    EXPECT_EQ_I(jnum(j, "usage.prompt_tokens"), 4);
    cJSON_Delete(j);

    memset(&b, 0, sizeof b);
    EXPECT_EQ_I(http(&f, "/v1/completions", "{\"prompt\":\"Once\",\"max_tokens\":3,\"stream\":true}", "bearer", &b,
                     NULL),
                200);
    n = b.p ? sse_parse(b.p, ev, 64) : 0;
    EXPECT(n >= 3);
    if (n >= 3) {
        EXPECT_STR_EQ(jstr(ev[0].data, "object"), "text_completion");
        EXPECT_STR_EQ(jstr(ev[n - 2].data, "choices.0.finish_reason"), "length");
        EXPECT(ev[n - 1].done);
    }
    sse_free(ev, n);
    free(b.p);
    fx_stop(&f);
}

TEST(serve, anthropic) {
    NEED_SHARED(path, MODEL_REL);
    fixture f;
    if (fx_start(&f, path, 4)) return;
    long st;
    cJSON *j = post_json(&f, "/v1/messages",
                         "{\"model\":\"qwen3-chat\",\"system\":[{\"type\":\"text\",\"text\":\"Be brief.\"}],"
                         "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hello\"}]}],"
                         "\"max_tokens\":6,\"stop_sequences\":[\"\\n\\nHuman:\"],\"metadata\":{\"user_id\":\"u\"}}",
                         "x-api-key", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT(jstr(j, "id") && !strncmp(jstr(j, "id"), "msg_", 4));
    EXPECT_STR_EQ(jstr(j, "type"), "message");
    EXPECT_STR_EQ(jstr(j, "role"), "assistant");
    EXPECT_STR_EQ(jstr(j, "content.0.type"), "text");
    EXPECT(jstr(j, "content.0.text") != NULL);
    const char *sr = jstr(j, "stop_reason");
    EXPECT(sr && (!strcmp(sr, "max_tokens") || !strcmp(sr, "end_turn") || !strcmp(sr, "stop_sequence")));
    double in = jnum(j, "usage.input_tokens");
    EXPECT(in > 5);
    EXPECT(jnum(j, "usage.output_tokens") >= 1);
    cJSON_Delete(j);

    /* a stop sequence that random text soon produces: reported, and not in the text */
    j = post_json(&f, "/v1/messages",
                  "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],"
                  "\"max_tokens\":200,\"seed\":1,\"stop_sequences\":[\"zzzz\",\"e\"]}",
                  "x-api-key", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(jstr(j, "stop_reason"), "stop_sequence");
    EXPECT_STR_EQ(jstr(j, "stop_sequence"), "e");
    EXPECT(jstr(j, "content.0.text") && !strchr(jstr(j, "content.0.text"), 'e'));
    cJSON_Delete(j);

    /* count_tokens matches the prompt the same messages were generated from */
    j = post_json(&f, "/v1/messages/count_tokens",
                  "{\"model\":\"qwen3-chat\",\"system\":\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}",
                  "x-api-key", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(jnum(j, "input_tokens"), in);
    cJSON_Delete(j);

    /* streaming: the named events in order */
    body b = {0};
    EXPECT_EQ_I(http(&f, "/v1/messages",
                     "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                     "\"max_tokens\":4,\"stream\":true}",
                     "x-api-key", &b, NULL),
                200);
    sse_event ev[64];
    int n = b.p ? sse_parse(b.p, ev, 64) : 0;
    const char *order[] = {"message_start", "content_block_start", "ping"};
    EXPECT(n >= 7);
    for (int i = 0; i < 3 && i < n; i++) {
        EXPECT_STR_EQ(ev[i].name, order[i]);
        EXPECT_STR_EQ(jstr(ev[i].data, "type"), order[i]);
    }
    int deltas = 0;
    for (int i = 3; i < n - 3; i++) {
        EXPECT_STR_EQ(ev[i].name, "content_block_delta");
        EXPECT_STR_EQ(jstr(ev[i].data, "delta.type"), "text_delta");
        deltas++;
    }
    EXPECT(deltas >= 1 && deltas <= 4);
    if (n >= 7) {
        EXPECT(jnum(ev[0].data, "message.usage.input_tokens") > 0);
        EXPECT_STR_EQ(ev[n - 3].name, "content_block_stop");
        EXPECT_STR_EQ(ev[n - 2].name, "message_delta");
        EXPECT_STR_EQ(jstr(ev[n - 2].data, "delta.stop_reason"), "max_tokens");
        EXPECT_EQ_I(jnum(ev[n - 2].data, "usage.output_tokens"), 4);
        EXPECT_STR_EQ(ev[n - 1].name, "message_stop");
    }
    sse_free(ev, n);
    free(b.p);
    fx_stop(&f);
}

static void expect_oai_error(const fixture *f, const char *path, const char *json, const char *auth, long status,
                             const char *param, const char *needle) {
    long st;
    cJSON *j = post_json(f, path, json, auth, &st);
    EXPECT_MSG(st == status, "%s %s: status %ld, expected %ld", path, json, st, status);
    const char *msg = jstr(j, "error.message");
    EXPECT_MSG(msg && strstr(msg, needle), "%s: message '%s' lacks '%s'", json, msg ? msg : "(none)", needle);
    EXPECT(jstr(j, "error.type") != NULL);
    EXPECT(cJSON_HasObjectItem(cJSON_GetObjectItem(j, "error"), "code"));
    if (param) EXPECT_STR_EQ(jstr(j, "error.param"), param);
    cJSON_Delete(j);
}

static void expect_anth_error(const fixture *f, const char *json, const char *auth, long status, const char *type,
                              const char *needle) {
    long st;
    cJSON *j = post_json(f, "/v1/messages", json, auth, &st);
    EXPECT_MSG(st == status, "%s: status %ld, expected %ld", json, st, status);
    EXPECT_STR_EQ(jstr(j, "type"), "error");
    EXPECT_STR_EQ(jstr(j, "error.type"), type);
    const char *msg = jstr(j, "error.message");
    EXPECT_MSG(msg && strstr(msg, needle), "%s: message '%s' lacks '%s'", json, msg ? msg : "(none)", needle);
    cJSON_Delete(j);
}

TEST(serve, errors) {
    NEED_SHARED(path, MODEL_REL);
    fixture f;
    if (fx_start(&f, path, 4)) return;
    const char *chat = "/v1/chat/completions";
    expect_oai_error(&f, chat, "{\"messages\":[", "bearer", 400, NULL, "not valid JSON");
    expect_oai_error(&f, chat, "[1,2]", "bearer", 400, NULL, "JSON object");
    expect_oai_error(&f, chat, "{\"model\":\"qwen3-chat\"}", "bearer", 400, "messages", "'messages' is required");
    expect_oai_error(&f, chat, "{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "bearer",
                     404, "model", "gpt-9");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "bearer", 400,
                     "messages[0].role", "robot");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\"}]}", "bearer", 400, "messages[0].content",
                     "required");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":7}", "bearer",
                     400, "temperature", "temperature");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}", "bearer",
                     400, "max_tokens", "integer");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":7}", "bearer", 400,
                     "stop", "stop");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", NULL, 401, NULL, "API key");
    expect_oai_error(&f, chat, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "bad", 401, NULL,
                     "API key");
    expect_oai_error(&f, "/v1/completions", "{\"max_tokens\":3}", "bearer", 400, "prompt", "'prompt' is required");
    expect_oai_error(&f, "/v1/nothing", "{}", "bearer", 404, NULL, "no route");
    /* body over the 64 KiB limit the fixture sets */
    size_t big_n = 100 << 10;
    char *big = malloc(big_n + 64);
    snprintf(big, 64, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    size_t l = strlen(big);
    memset(big + l, 'a', big_n);
    snprintf(big + l + big_n, 64, "\"}]}");
    expect_oai_error(&f, chat, big, "bearer", 413, NULL, "exceeds");
    free(big);

    expect_anth_error(&f, "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                      "x-api-key", 400, "invalid_request_error", "'max_tokens' is required");
    expect_anth_error(&f, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":3}", "x-api-key", 400,
                      "invalid_request_error", "'model' is required");
    expect_anth_error(&f, "{\"model\":\"claude\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":3}",
                      "x-api-key", 404, "not_found_error", "claude");
    expect_anth_error(&f,
                      "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}],"
                      "\"max_tokens\":3}",
                      "x-api-key", 400, "invalid_request_error", "messages[0].content[0]");
    expect_anth_error(&f, "{\"model\":\"qwen3-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":3}",
                      "bad", 401, "authentication_error", "API key");
    expect_anth_error(&f, "not json", "x-api-key", 400, "invalid_request_error", "not valid JSON");

    /* still healthy */
    body b = {0};
    EXPECT_EQ_I(http(&f, "/health", NULL, NULL, &b, NULL), 200);
    free(b.p);
    fx_stop(&f);
}

/* A long streaming request that blocks in its write callback until released,
 * then disconnects. */
typedef struct {
    const fixture *f;
    atomic_int hold, got;
    long status;
} long_req;

static void *long_stream(void *arg) {
    long_req *r = arg;
    body b = {0};
    b.hold = &r->hold;
    b.got_bytes = &r->got;
    r->status = http(r->f, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a long story\"}],"
                     "\"max_tokens\":2000,\"temperature\":0,\"stream\":true}",
                     "bearer", &b, NULL);
    free(b.p);
    return NULL;
}

typedef struct {
    const fixture *f;
    long status;
    char *text;
} short_req;

static void *short_chat(void *arg) {
    short_req *r = arg;
    body b = {0};
    r->status = http(r->f, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}", "bearer", &b, NULL);
    r->text = b.p;
    return NULL;
}

static cJSON *health(const fixture *f) {
    body b = {0};
    http(f, "/health", NULL, NULL, &b, NULL);
    cJSON *j = b.p ? cJSON_Parse(b.p) : NULL;
    free(b.p);
    return j;
}

TEST(serve, queue_and_disconnect) {
    NEED_SHARED(path, MODEL_REL);
    fixture f;
    if (fx_start(&f, path, 1)) return;
    long_req a = {.f = &f};
    atomic_store(&a.hold, 1);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, long_stream, &a);
    for (int i = 0; i < 5000 && !atomic_load(&a.got); i++) usleep(1000);
    EXPECT(atomic_load(&a.got));
    /* B waits behind A */
    short_req b = {.f = &f};
    pthread_create(&tb, NULL, short_chat, &b);
    int queued = 0, busy = 0;
    for (int i = 0; i < 5000 && !queued; i++) {
        cJSON *h = health(&f);
        queued = (int)jnum(h, "queued");
        busy = (int)jnum(h, "busy");
        cJSON_Delete(h);
        if (!queued) usleep(1000);
    }
    EXPECT_EQ_I(queued, 1);
    EXPECT_EQ_I(busy, 1);
    /* C finds the queue full */
    body c = {0};
    resp_meta meta;
    memset(&meta, 0, sizeof meta);
    EXPECT_EQ_I(http(&f, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}", "bearer", &c, &meta),
                429);
    EXPECT(atoi(meta.retry_after) >= 1);
    cJSON *cj = c.p ? cJSON_Parse(c.p) : NULL;
    EXPECT(jstr(cj, "error.message") && strstr(jstr(cj, "error.message"), "queue"));
    cJSON_Delete(cj);
    free(c.p);
    /* A's client goes away: its generation stops and B runs */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    atomic_store(&a.hold, 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* A's 2000 tokens take >= 7 s even unsanitized; B ends soon after the disconnect */
    double wait_s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    EXPECT_MSG(wait_s < 5, "B finished %.2f s after A disconnected: A's generation did not stop", wait_s);
    EXPECT_EQ_I(b.status, 200);
    cj = b.text ? cJSON_Parse(b.text) : NULL;
    EXPECT_EQ_I(jnum(cj, "usage.completion_tokens"), 2);
    cJSON_Delete(cj);
    free(b.text);
    cJSON *h = health(&f);
    EXPECT_EQ_I(jnum(h, "queued"), 0);
    EXPECT_EQ_I(jnum(h, "busy"), 0);
    cJSON_Delete(h);
    /* and serves the next request */
    long st;
    cJSON *j = post_json(&f, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":2}", "bearer", &st);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);
    fx_stop(&f);
}

typedef struct {
    const fixture *f;
    atomic_int got;
    long status;
    char *text;
} full_stream;

static void *stream_all(void *arg) {
    full_stream *r = arg;
    body b = {0};
    b.got_bytes = &r->got;
    r->status = http(r->f, "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a long story\"}],"
                     "\"max_tokens\":2000,\"temperature\":0,\"stream\":true}",
                     "bearer", &b, NULL);
    r->text = b.p;
    return NULL;
}

/* srv_stop with a stream running and a request queued: the stream gets its
 * final chunk and [DONE], the queued request 503, and stop returns promptly. */
TEST(serve, shutdown) {
    NEED_SHARED(path, MODEL_REL);
    fixture f;
    if (fx_start(&f, path, 4)) return;
    full_stream a = {.f = &f};
    short_req b = {.f = &f};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, stream_all, &a);
    for (int i = 0; i < 5000 && !atomic_load(&a.got); i++) usleep(1000);
    pthread_create(&tb, NULL, short_chat, &b);
    int queued = 0;
    for (int i = 0; i < 5000 && !queued; i++) {
        cJSON *h = health(&f);
        queued = (int)jnum(h, "queued");
        cJSON_Delete(h);
        if (!queued) usleep(1000);
    }
    EXPECT_EQ_I(queued, 1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fx_stop(&f);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    double stop_s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    EXPECT_MSG(stop_s < 5, "srv_stop took %.2f s", stop_s);
    EXPECT_EQ_I(a.status, 200);
    size_t n = a.text ? strlen(a.text) : 0;
    EXPECT_MSG(n >= 14 && !strcmp(a.text + n - 14, "data: [DONE]\n\n"), "stream did not end with [DONE]");
    EXPECT(a.text && strstr(a.text, "\"finish_reason\":\"stop\""));
    EXPECT_EQ_I(b.status, 503);
    free(a.text);
    free(b.text);
}

static void *short_chat_timeout(void *arg) {
    short_req *r = arg;
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s/v1/chat/completions", r->f->base);
    struct curl_slist *h = curl_slist_append(NULL, "Authorization: Bearer " KEY);
    body b = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS,
                     "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a long story\"}],"
                     "\"max_tokens\":2000,\"temperature\":0}");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 300L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    r->status = curl_easy_perform(c) == CURLE_OPERATION_TIMEDOUT ? -1 : 0;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(b.p);
    return NULL;
}

/* A non-streaming client that gives up: its generation stops (the next
 * request is answered well before 2000 tokens could be generated). */
TEST(serve, disconnect_nonstream) {
    NEED_SHARED(path, MODEL_REL);
    fixture f;
    if (fx_start(&f, path, 4)) return;
    short_req a = {.f = &f};
    pthread_t ta;
    pthread_create(&ta, NULL, short_chat_timeout, &a);
    pthread_join(ta, NULL);
    EXPECT_EQ_I(a.status, -1);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long st;
    cJSON *j = post_json(&f, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":2}", "bearer", &st);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);
    double wait_s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    EXPECT_MSG(wait_s < 3, "next request took %.2f s: the abandoned generation did not stop", wait_s);
    fx_stop(&f);
}
