/*
 * test_serve_hostile.c — `cinfer serve` against a security tester's requests:
 *   - JSON Schemas that accept no value or have wrong-typed keywords are a
 *     400 naming the field (tools of both APIs, response_format,
 *     /v1/responses text.format), with paths inside the user's schema;
 *   - an empty prompt on a model that adds no BOS is a 400, not a 500;
 *   - a NUL (\u0000) inside a JSON string is a 400 naming the field;
 *   - an empty / all-whitespace --api-key is refused at start;
 *   - cross-site requests (Origin) and DNS rebinding (Host) get 403 unless
 *     --cors-origin allows them (then CORS headers and preflight);
 *   - a tool call cut by max_tokens: the streamed text equals the
 *     non-streamed reply (OpenAI and Anthropic);
 *   - empty stop strings, trailing text after the body, too-deep JSON,
 *     invalid assistant tool-call arguments: 400s naming the field;
 *     count_tokens counts prompts longer than the context.
 * Models: the random-weight Qwen3 chat model (no BOS added) as "chat".
 */
#include "cinfer.h"
#include "http_client.h"
#include "server/srv.h"
#include "test.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHAT_REL "models/chat/qwen3-chat.gguf"

static int fx_start_opts(http_srv *f, srv_options o) {
    const char *pa = shared_path(CHAT_REL);
    if (!pa) {
        test_skip("%s/%s absent", shared_root(), CHAT_REL);
        return -1;
    }
    o.model_name = "chat";
    o.n_ctx = 1024;
    o.n_threads = 1;
    o.queue_max = 4;
    return http_srv_start(f, pa, NULL, NULL, o);
}

static int fx_start(http_srv *f) { return fx_start_opts(f, (srv_options){0}); }

static cJSON *post(const http_srv *f, const char *path, const char *json, long *status) {
    return http_post_json(f->base, path, json, NULL, status);
}

/* Expect status want, error.param == param (OpenAI shape; NULL: not checked)
 * and a message containing word (NULL: not checked). */
static void expect_err(cJSON *j, long st, long want, const char *param, const char *word, const char *what) {
    if (st != want) test_fail(__FILE__, __LINE__, "%s: status %ld, want %ld", what, st, want);
    const char *msg = json_str_at(j, "error.message");
    if (!msg) {
        test_fail(__FILE__, __LINE__, "%s: no error.message", what);
        return;
    }
    if (param && (!json_str_at(j, "error.param") || strcmp(json_str_at(j, "error.param"), param)))
        test_fail(__FILE__, __LINE__, "%s: param '%s', want '%s' (%s)", what,
                  json_str_at(j, "error.param") ? json_str_at(j, "error.param") : "(none)", param, msg);
    if (word && !strstr(msg, word)) test_fail(__FILE__, __LINE__, "%s: message '%s' lacks '%s'", what, msg, word);
}

/* A raw HTTP/1.1 exchange with 127.0.0.1:port (any Host / Origin header):
 * the response (status line, headers, body) into out.  Returns the status. */
static int raw_http(int port, const char *req, char *out, size_t cap) {
    out[0] = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return 0;
    }
    size_t n = strlen(req), k = 0;
    while (k < n) {
        ssize_t w = write(fd, req + k, n - k);
        if (w <= 0) break;
        k += (size_t)w;
    }
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fd, out + got, cap - 1 - got)) > 0) got += (size_t)r;
    out[got] = 0;
    close(fd);
    int status = 0;
    sscanf(out, "HTTP/1.%*d %d", &status);
    return status;
}

/* ---- A: schemas ------------------------------------------------------------------------ */

static const char *const BAD_SCHEMAS[] = {
    "{\"not\":{}}",
    "{\"type\":\"bogus\"}",
    "{\"type\":5}",
    "{\"type\":[true]}",
    "{\"type\":{}}",
    "{\"type\":\"object\",\"properties\":\"xxx\"}",
    "{\"$ref\":\"#\"}",
    "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}},"
    "\"required\":[\"s\"]}",
    "{\"type\":\"object\",\"properties\":{\"a\":false},\"required\":[\"a\"]}",
    /* bounds beyond a double (dropped once: the output broke them) and multipleOf <= 0 */
    "{\"type\":\"integer\",\"minimum\":1e309}",
    "{\"type\":\"number\",\"exclusiveMaximum\":-1e400}",
    "{\"type\":\"integer\",\"multipleOf\":-3}",
    NULL,
};

TEST(serve_hostile, bad_schemas_400) {
    http_srv f;
    if (fx_start(&f)) return;
    char req[2048], what[256];
    long st;
    for (int i = 0; BAD_SCHEMAS[i]; i++) {
        const char *sc = BAD_SCHEMAS[i];
        /* OpenAI chat tools */
        snprintf(req, sizeof req,
                 "{\"model\":\"chat\",\"max_tokens\":4,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                 "\"parameters\":%s}}],\"tool_choice\":\"required\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                 sc);
        snprintf(what, sizeof what, "chat tools %s", sc);
        cJSON *j = post(&f, "/v1/chat/completions", req, &st);
        expect_err(j, st, 400, "tools[0].function.parameters", NULL, what);
        cJSON_Delete(j);
        /* Anthropic tools (no param in the Anthropic shape: the message names the field) */
        snprintf(req, sizeof req,
                 "{\"model\":\"chat\",\"max_tokens\":4,\"tools\":[{\"name\":\"f\",\"input_schema\":%s}],"
                 "\"tool_choice\":{\"type\":\"any\"},\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                 sc);
        snprintf(what, sizeof what, "messages tools %s", sc);
        j = post(&f, "/v1/messages", req, &st);
        expect_err(j, st, 400, NULL, "tools[0].input_schema", what);
        EXPECT_STR_EQ(json_str_at(j, "error.type"), "invalid_request_error");
        cJSON_Delete(j);
        /* response_format */
        snprintf(req, sizeof req,
                 "{\"model\":\"chat\",\"max_tokens\":4,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
                 "{\"name\":\"x\",\"schema\":%s}},\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                 sc);
        snprintf(what, sizeof what, "response_format %s", sc);
        j = post(&f, "/v1/chat/completions", req, &st);
        expect_err(j, st, 400, "response_format.json_schema.schema", NULL, what);
        cJSON_Delete(j);
        /* /v1/responses text.format */
        snprintf(req, sizeof req,
                 "{\"model\":\"chat\",\"max_output_tokens\":4,\"text\":{\"format\":{\"type\":\"json_schema\","
                 "\"name\":\"x\",\"schema\":%s}},\"input\":\"hi\"}",
                 sc);
        snprintf(what, sizeof what, "responses %s", sc);
        j = post(&f, "/v1/responses", req, &st);
        expect_err(j, st, 400, "text.format.schema", NULL, what);
        cJSON_Delete(j);
    }
    /* the path is inside the user's schema, not the server's call wrapper */
    cJSON *j = post(&f, "/v1/chat/completions",
                    "{\"model\":\"chat\",\"max_tokens\":4,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                    "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"bogus\"}}}}}],"
                    "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                    &st);
    expect_err(j, st, 400, "tools[0].function.parameters", "#/properties/a", "nested path");
    const char *msg = json_str_at(j, "error.message");
    EXPECT(msg && !strstr(msg, "arguments"));
    cJSON_Delete(j);
    /* local $refs in tool schemas resolve inside the tool's own schema (one tool; two: the anyOf wrapper) */
#define REF_TOOL(NAME)                                                                                         \
    "{\"type\":\"function\",\"function\":{\"name\":\"" NAME "\",\"parameters\":{\"$defs\":{\"t\":{\"type\":"     \
    "\"string\",\"enum\":[\"xx\",\"yy\"]}},\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/t\"}},"  \
    "\"required\":[\"a\"],\"additionalProperties\":false}}}"
    for (int two = 0; two < 2; two++) {
        char rq[2048];
        snprintf(rq, sizeof rq,
                 "{\"model\":\"chat\",\"max_tokens\":40,\"temperature\":0,\"tools\":[%s" REF_TOOL("f")
                 "],\"tool_choice\":\"required\",\"parallel_tool_calls\":false,"
                 "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                 two ? REF_TOOL("g") "," : "");
        j = post(&f, "/v1/chat/completions", rq, &st);
        EXPECT_EQ_I(st, 200);
        const char *args = json_str_at(j, "choices.0.message.tool_calls.0.function.arguments");
        EXPECT_MSG(args && (strstr(args, "\"xx\"") || strstr(args, "\"yy\"")), "arguments %s", args ? args : "(none)");
        cJSON_Delete(j);
    }
    /* a good schema still works */
    j = post(&f, "/v1/chat/completions",
             "{\"model\":\"chat\",\"max_tokens\":4,\"temperature\":0,\"response_format\":{\"type\":\"json_schema\","
             "\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":\"object\",\"properties\":{\"s\":{\"type\":"
             "\"string\",\"minLength\":1,\"maxLength\":3}}}}},\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
             &st);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);
    http_srv_stop(&f);
}

/* ---- B, C, G: request bodies ------------------------------------------------------------ */

TEST(serve_hostile, bodies_400) {
    http_srv f;
    if (fx_start(&f)) return;
    long st;
    cJSON *j;
    /* B: nothing to evaluate (Qwen adds no BOS) */
    j = post(&f, "/v1/completions", "{\"model\":\"chat\",\"prompt\":\"\",\"max_tokens\":2}", &st);
    expect_err(j, st, 400, "prompt", "empty", "empty prompt");
    cJSON_Delete(j);
    j = post(&f, "/v1/completions", "{\"model\":\"chat\",\"prompt\":[\"\"],\"max_tokens\":2}", &st);
    expect_err(j, st, 400, "prompt", "empty", "empty prompt array");
    cJSON_Delete(j);
    /* C: NUL inside strings */
    j = post(&f, "/v1/chat/completions",
             "{\"model\":\"chat\\u0000zzz\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &st);
    expect_err(j, st, 400, "model", "NUL", "NUL in model");
    cJSON_Delete(j);
    j = post(&f, "/v1/chat/completions",
             "{\"model\":\"chat\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
             "{\"role\":\"assistant\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"x\\u0000y\"}]}",
             &st);
    expect_err(j, st, 400, "messages[2].content", "NUL", "NUL in content");
    cJSON_Delete(j);
    /* an escaped backslash before u0000 is not a NUL */
    j = post(&f, "/v1/chat/completions",
             "{\"model\":\"chat\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"a\\\\u0000b\"}]}", &st);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);
    /* G: empty stop strings, both forms */
    j = post(&f, "/v1/completions", "{\"model\":\"chat\",\"prompt\":\"hi\",\"max_tokens\":2,\"stop\":\"\"}", &st);
    expect_err(j, st, 400, "stop", "non-empty", "stop \"\"");
    cJSON_Delete(j);
    j = post(&f, "/v1/completions", "{\"model\":\"chat\",\"prompt\":\"hi\",\"max_tokens\":2,\"stop\":[\"\"]}", &st);
    expect_err(j, st, 400, "stop", "non-empty", "stop [\"\"]");
    cJSON_Delete(j);
    /* G: text after the JSON value */
    j = post(&f, "/v1/completions", "{\"model\":\"chat\",\"prompt\":\"hi\",\"max_tokens\":2} trailing", &st);
    expect_err(j, st, 400, NULL, "after the JSON", "trailing text");
    cJSON_Delete(j);
    j = post(&f, "/v1/completions", "{\"model\":\"chat\",\"prompt\":\"hi\",\"max_tokens\":1} \r\n", &st);
    EXPECT_EQ_I(st, 200); /* trailing whitespace is fine */
    cJSON_Delete(j);
    /* G: nesting beyond the parser's limit */
    size_t depth = 1200;
    char *deep = malloc(2 * depth + 64);
    if (deep) {
        size_t n = (size_t)sprintf(deep, "{\"model\":\"chat\",\"x\":");
        for (size_t i = 0; i < depth; i++) deep[n++] = '[';
        for (size_t i = 0; i < depth; i++) deep[n++] = ']';
        strcpy(deep + n, "}");
        j = post(&f, "/v1/completions", deep, &st);
        expect_err(j, st, 400, NULL, "nested deeper", "deep JSON");
        cJSON_Delete(j);
        free(deep);
    }
    /* G: tools too deep for the template: one "chat template:" prefix, param tools (505
     * levels: past the template's 500, inside the 512 a schema may nest) */
    deep = malloc(2 * 700 + 512);
    if (deep) {
        size_t n = (size_t)sprintf(deep, "{\"model\":\"chat\",\"max_tokens\":2,\"tools\":[{\"type\":\"function\","
                                         "\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"default\":");
        for (int i = 0; i < 505; i++) deep[n++] = '[';
        for (int i = 0; i < 505; i++) deep[n++] = ']';
        strcpy(deep + n, "}}}],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
        j = post(&f, "/v1/chat/completions", deep, &st);
        expect_err(j, st, 400, "tools", "chat template", "deep tools");
        const char *m = json_str_at(j, "error.message");
        EXPECT(m && !strstr(m, "chat template: chat template"));
        cJSON_Delete(j);
        free(deep);
    }
    /* G: an assistant tool call's arguments must be JSON object text */
    j = post(&f, "/v1/chat/completions",
             "{\"model\":\"chat\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
             "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
             "\"function\":{\"name\":\"f\",\"arguments\":\"{not json\"}}]},"
             "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"1\"}]}",
             &st);
    expect_err(j, st, 400, "messages[1].tool_calls[0].function.arguments", "JSON", "bad arguments");
    cJSON_Delete(j);
    http_srv_stop(&f);
}

TEST(serve_hostile, count_tokens_long) {
    http_srv f;
    if (fx_start(&f)) return;
    size_t words = 3000;
    char *req = malloc(words * 4 + 256);
    if (!req) {
        http_srv_stop(&f);
        return;
    }
    size_t n = (size_t)sprintf(req, "{\"model\":\"chat\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"");
    for (size_t i = 0; i < words; i++) n += (size_t)sprintf(req + n, "%s", i % 2 ? "cat " : "dog ");
    strcpy(req + n, "\"}]}");
    long st;
    cJSON *j = post(&f, "/v1/messages/count_tokens", req, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT(json_num_at(j, "input_tokens") > 1024); /* longer than n_ctx: counted anyway */
    cJSON_Delete(j);
    j = post(&f, "/v1/messages", req, &st); /* generating it is still a 400 */
    EXPECT_EQ_I(st, 400);
    cJSON_Delete(j);
    free(req);
    http_srv_stop(&f);
}

/* ---- D: API keys ---------------------------------------------------------------------- */

TEST(serve_hostile, api_key) {
    const char *pa = shared_path(CHAT_REL);
    if (!pa) SKIP("%s/%s absent", shared_root(), CHAT_REL);
    cinfer_model *m = NULL;
    char err[256];
    if (cinfer_model_open(pa, NULL, &m, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "open: %s", err);
        return;
    }
    const char *bad[] = {"", "   ", "\t\n"};
    for (int i = 0; i < 3; i++) {
        srv *s = NULL;
        err[0] = 0;
        int rc = srv_start(m, &(srv_options){.api_key = bad[i], .n_ctx = 256, .n_threads = 1}, &s, err, sizeof err);
        EXPECT_EQ_I(rc, CINFER_EARG);
        EXPECT(strstr(err, "api-key") != NULL);
        if (s) srv_stop(s);
    }
    cinfer_model_close(m);
    http_srv f;
    if (fx_start_opts(&f, (srv_options){.api_key = "sekrit"})) return;
    const char *empty_x[] = {"x-api-key: ", NULL}, *empty_b[] = {"Authorization: Bearer ", NULL},
               *near[] = {"x-api-key: sekriT", NULL}, *longer[] = {"x-api-key: sekrit2", NULL},
               *good[] = {"Authorization: Bearer sekrit", NULL};
    http_body b = {0};
    EXPECT_EQ_I(http_request(f.base, "/v1/models", NULL, empty_x, &b, NULL), 401);
    EXPECT_EQ_I(http_request(f.base, "/v1/models", NULL, empty_b, &b, NULL), 401);
    EXPECT_EQ_I(http_request(f.base, "/v1/models", NULL, near, &b, NULL), 401);
    EXPECT_EQ_I(http_request(f.base, "/v1/models", NULL, longer, &b, NULL), 401);
    EXPECT_EQ_I(http_request(f.base, "/v1/models", NULL, good, &b, NULL), 200);
    free(b.p);
    http_srv_stop(&f);
}

/* ---- E: Origin / Host ------------------------------------------------------------------- */

TEST(serve_hostile, origin_and_host) {
    http_srv f;
    if (fx_start(&f)) return;
    int port = srv_port(f.s);
    char req[1024], *out = malloc(65536);
    if (!out) {
        http_srv_stop(&f);
        return;
    }
    static const char body[] = "{\"model\":\"chat\",\"prompt\":\"hi\",\"max_tokens\":1}";
    /* a cross-site page posting text/plain: refused */
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: http://evil.example\r\n"
             "Content-Type: text/plain\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             port, strlen(body), body);
    EXPECT_EQ_I(raw_http(port, req, out, 65536), 403);
    EXPECT(strstr(out, "\"code\":\"forbidden\"") != NULL);
    /* DNS rebinding: a foreign Host on a loopback-bound server */
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: evil.example:%d\r\nContent-Type: text/plain\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
             port, strlen(body), body);
    EXPECT_EQ_I(raw_http(port, req, out, 65536), 403);
    snprintf(req, sizeof req, "GET /v1/messages HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
    EXPECT_EQ_I(raw_http(port, req, out, 65536), 403);
    EXPECT(strstr(out, "permission_error") != NULL); /* Anthropic's shape on /v1/messages */
    /* same origin (the web UI), localhost names, and no Origin at all: allowed */
    const char *hosts[] = {"127.0.0.1", "localhost", "[::1]"};
    for (int i = 0; i < 3; i++) {
        snprintf(req, sizeof req,
                 "POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\nOrigin: http://%s:%d\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                 hosts[i], port, hosts[i], port, strlen(body), body);
        EXPECT_EQ_I(raw_http(port, req, out, 65536), 200);
        EXPECT(strstr(out, "Access-Control-Allow-Origin") == NULL); /* no CORS without --cors-origin */
    }
    /* a page on another port of localhost is another origin */
    snprintf(req, sizeof req,
             "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: http://127.0.0.1:%d\r\nConnection: close\r\n\r\n",
             port, port == 1 ? 2 : port - 1);
    EXPECT_EQ_I(raw_http(port, req, out, 65536), 403);
    snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", port);
    EXPECT_EQ_I(raw_http(port, req, out, 65536), 200);
    http_srv_stop(&f);

    /* --cors-origin: that origin is answered with CORS headers and preflight */
    const char *cors[] = {"https://app.example"};
    if (fx_start_opts(&f, (srv_options){.cors_origins = cors, .n_cors_origins = 1})) {
        free(out);
        return;
    }
    port = srv_port(f.s);
    snprintf(req, sizeof req,
             "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: https://app.example\r\n"
             "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type, authorization\r\n"
             "Connection: close\r\n\r\n",
             port);
    EXPECT_EQ_I(raw_http(port, req, out, 65536), 204);
    EXPECT(strstr(out, "Access-Control-Allow-Origin: https://app.example") != NULL);
    EXPECT(strstr(out, "Access-Control-Allow-Methods:") != NULL);
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: https://app.example\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             port, strlen(body), body);
    EXPECT_EQ_I(raw_http(port, req, out, 65536), 200);
    EXPECT(strstr(out, "Access-Control-Allow-Origin: https://app.example") != NULL);
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: https://other.example\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             port, strlen(body), body);
    EXPECT_EQ_I(raw_http(port, req, out, 65536), 403);
    http_srv_stop(&f);
    free(out);
}

/* ---- F: a tool call cut by max_tokens, streamed vs not ---------------------------------------- */

/* The reply to a forced tool call cut by max_tokens, as OpenAI answers one: finish_reason
 * "length", no template text ("<tool_call>", "arguments") in the content, and when the
 * call's name was complete the call itself with the arguments written so far; the
 * streamed reply says the same.  Anthropic: stop_reason max_tokens, no leaked text. */
static void cut_call_case(const http_srv *f, int max_tokens, const char *bias, int want_call) {
    static const char OAI[] =
        "{\"model\":\"chat\",\"max_tokens\":%d,\"temperature\":0,\"seed\":1,\"tools\":[{\"type\":\"function\","
        "\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":"
        "\"string\"}},\"required\":[\"tz\"]}}}],\"tool_choice\":\"required\",\"messages\":[{\"role\":\"user\","
        "\"content\":\"time?\"}]%s%s}";
    char req[2048];
    long st;
    snprintf(req, sizeof req, OAI, max_tokens, bias, "");
    cJSON *j = post(f, "/v1/chat/completions", req, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.finish_reason"), "length");
    const char *content = json_str_at(j, "choices.0.message.content");
    EXPECT_MSG(!content || !*content, "content '%s'", content);
    const char *name = json_str_at(j, "choices.0.message.tool_calls.0.function.name");
    const char *args = json_str_at(j, "choices.0.message.tool_calls.0.function.arguments");
    EXPECT_MSG(want_call ? name && !strcmp(name, "get_time") && args : !name, "max_tokens %d: call %s(%s)", max_tokens,
               name ? name : "-", args ? args : "-");
    char *want_args = args ? strdup(args) : NULL;
    if (want_args) EXPECT_MSG(!strstr(want_args, "<tool_call>") && !strstr(want_args, "\"arguments\""), "%s", want_args);
    cJSON_Delete(j);
    snprintf(req, sizeof req, OAI, max_tokens, bias, ",\"stream\":true");
    http_body b = {0};
    EXPECT_EQ_I(http_request(f->base, "/v1/chat/completions", req, NULL, &b, NULL), 200);
    http_sse_event ev[64];
    int n = b.p ? http_sse_parse(b.p, ev, 64) : 0;
    char got[1024] = "", sargs[1024] = "";
    const char *finish = NULL, *sname = NULL;
    for (int i = 0; i < n; i++) {
        const char *c = json_str_at(ev[i].data, "choices.0.delta.content");
        if (c) strncat(got, c, sizeof got - strlen(got) - 1);
        const char *nm = json_str_at(ev[i].data, "choices.0.delta.tool_calls.0.function.name");
        const char *ar = json_str_at(ev[i].data, "choices.0.delta.tool_calls.0.function.arguments");
        if (nm) sname = nm;
        if (ar) strncat(sargs, ar, sizeof sargs - strlen(sargs) - 1);
        if (json_str_at(ev[i].data, "choices.0.finish_reason")) finish = json_str_at(ev[i].data, "choices.0.finish_reason");
    }
    EXPECT_STR_EQ(got, "");
    EXPECT_STR_EQ(finish, "length");
    EXPECT_STR_EQ(sname ? sname : "-", want_call ? "get_time" : "-");
    EXPECT_STR_EQ(sargs, want_args ? want_args : "");
    http_sse_free(ev, n);
    free(b.p);
    free(want_args);
}

TEST(serve_hostile, cut_tool_call_stream) {
    http_srv f;
    if (fx_start(&f)) return;
    /* 4 tokens: the name is not complete: no call, no text */
    cut_call_case(&f, 4, "", 0);
    /* 8: "name" comes first (generation keeps the call object's key order), so the name
     * completes and the arguments are cut ({"tz":""} would need 11) */
    cut_call_case(&f, 8, "", 1);

    /* Anthropic: nothing of the call as text, streamed or not */
    static const char MSG[] =
        "{\"model\":\"chat\",\"max_tokens\":4,\"temperature\":0,\"seed\":1,\"tools\":[{\"name\":\"get_time\","
        "\"input_schema\":{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"string\"}},\"required\":[\"tz\"]}}],"
        "\"tool_choice\":{\"type\":\"any\"},\"messages\":[{\"role\":\"user\",\"content\":\"time?\"}]%s}";
    char req[2048];
    long st;
    snprintf(req, sizeof req, MSG, "");
    cJSON *j = post(&f, "/v1/messages", req, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "stop_reason"), "max_tokens");
    char *txt = cJSON_PrintUnformatted(j);
    EXPECT_MSG(txt && !strstr(txt, "tool_call>") && !strstr(txt, "\\\"arguments"), "%s", txt ? txt : "");
    free(txt);
    cJSON_Delete(j);
    snprintf(req, sizeof req, MSG, ",\"stream\":true");
    http_body b = {0};
    EXPECT_EQ_I(http_request(f.base, "/v1/messages", req, NULL, &b, NULL), 200);
    EXPECT_MSG(b.p && !strstr(b.p, "tool_call>") && strstr(b.p, "\"stop_reason\":\"max_tokens\""), "%s",
               b.p ? b.p : "");
    free(b.p);
    http_srv_stop(&f);
}
