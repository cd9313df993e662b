/*
 * test_serve_tools.c — `cinfer serve` request features (runtime/server/srv_tools.c):
 * tools and tool_choice (OpenAI and Anthropic, non-streaming and streamed),
 * input tool_use / tool_result rendered by the template, response_format,
 * logprobs (chat and legacy completions), frequency/presence penalties
 * (the formula, and their effect on a greedy reply), logit_bias,
 * /v1/responses, and the error shape of each bad field.
 *
 * The Qwen3 test model has random weights: what a reply says is noise, so
 * the structure is what is checked — a tool call's arguments must satisfy
 * the tool's JSON Schema (checked with cinfer_grammar_check, independently
 * of the server), logprobs must be consistent with the text and with each
 * other.  A tool call in "auto" mode is provoked with logit_bias on the
 * <tool_call> token, which also exercises the lazy switch to the grammar.
 */
#include "http_client.h"
#include "engine/samp.h"
#include "server/srv.h"
#include "server/srv_impl.h"
#include "test.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_REL "models/chat/qwen3-chat.gguf"

/* Serve the model as "qwen3-chat", no API key. */
static int fx_start(http_srv *f, const char *path) {
    return http_srv_start(f, path, NULL, NULL,
                          (srv_options){.model_name = "qwen3-chat", .n_ctx = 1024, .n_threads = 1, .queue_max = 4});
}

/* POST a streaming request: its events (http_sse_free them), *status the HTTP status. */
static int post_sse(const http_srv *f, const char *path, const char *json, http_sse_event *ev, int max, long *status) {
    http_body b = {0};
    *status = http_request(f->base, path, json, NULL, &b, NULL);
    int n = b.p ? http_sse_parse(b.p, ev, max) : 0;
    free(b.p);
    return n;
}

/* The number of [DONE] events. */
static int n_done(const http_sse_event *ev, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += ev[i].done;
    return k;
}

static const char WEATHER_PARAMS[] =
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"enum\":[\"Paris\",\"London\"]},"
    "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\",\"days\"],"
    "\"additionalProperties\":false}";
static const char TIME_PARAMS[] =
    "{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"string\",\"enum\":[\"UTC\",\"CET\"]}},"
    "\"required\":[\"tz\"],\"additionalProperties\":false}";

/* 1 when args (JSON text) satisfy schema, checked by the grammar checker. */
static int satisfies(const char *schema, const char *args) {
    cinfer_grammar *g = NULL;
    char err[512];
    if (cinfer_grammar_from_schema(NULL, schema, strlen(schema), NULL, &g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "schema: %s", err);
        return 0;
    }
    int ok = cinfer_grammar_check(g, args, strlen(args), err, sizeof err);
    if (ok != 1) test_fail(__FILE__, __LINE__, "arguments %s do not satisfy the schema: %s", args, err);
    cinfer_grammar_free(g);
    return ok == 1;
}

static char *oai_tools(void) {
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\","
             "\"parameters\":%s}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":%s}}]",
             WEATHER_PARAMS, TIME_PARAMS);
    return buf;
}

/* POST to /v1/chat/completions the request fmt with its one %s replaced by oai_tools(); the reply and the status. */
static cJSON *chat_with_tools(const http_srv *f, const char *fmt, long *status) {
    char req[4096];
    snprintf(req, sizeof req, fmt, oai_tools());
    return http_post_json(f->base, "/v1/chat/completions", req, NULL, status);
}

/* A tool call (OpenAI shape) names a tool and its arguments satisfy that tool's schema. */
static void expect_valid_call(const cJSON *call) {
    const char *name = json_str_at(call, "function.name"), *args = json_str_at(call, "function.arguments");
    EXPECT_MSG(name && args, "tool call without function.name / function.arguments");
    if (name && args) satisfies(!strcmp(name, "get_weather") ? WEATHER_PARAMS : TIME_PARAMS, args);
}

/* ---- penalties: the formula ------------------------------------------------------------ */

TEST(serve_tools, penalty_formula) {
    float lg[6] = {1, 2, 3, 4, 5, -INFINITY};
    const int32_t gen[] = {1, 3, 3, 3, 5, 9, -1};
    EXPECT_EQ_I(samp_penalize_counts(lg, 6, gen, 7, 0.5f, 0.25f), 0);
    EXPECT_NEAR(lg[0], 1, 0);                     /* never generated */
    EXPECT_NEAR(lg[1], 2 - (1 * 0.5f + 0.25f), 1e-6);
    EXPECT_NEAR(lg[2], 3, 0);
    EXPECT_NEAR(lg[3], 4 - (3 * 0.5f + 0.25f), 1e-6);
    EXPECT(isinf(lg[5]) && lg[5] < 0);           /* -inf stays */
    float neg[2] = {0, 0};
    const int32_t g2[] = {0, 0};
    EXPECT_EQ_I(samp_penalize_counts(neg, 2, g2, 2, -1.0f, -2.0f), 0); /* negative: encourages */
    EXPECT_NEAR(neg[0], 4, 1e-6);
    EXPECT_NEAR(neg[1], 0, 0);
    EXPECT_EQ_I(samp_penalize_counts(NULL, 2, g2, 2, 1, 1), SAMP_EINVAL);
    EXPECT_EQ_I(samp_penalize_counts(neg, 2, NULL, 2, 1, 1), SAMP_EINVAL);
}

/* ---- messages with tool calls and results reach the template ------------------------------ */

TEST(serve_tools, messages_render) {
    NEED_SHARED(path, MODEL_REL);
    cinfer_model *m;
    char err[512];
    if (cinfer_model_open(path, NULL, &m, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    /* Anthropic blocks */
    cJSON *r = cJSON_Parse(
        "{\"system\":[{\"type\":\"text\",\"text\":\"SYS\",\"cache_control\":{\"type\":\"ephemeral\"}}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"s\"},"
        "{\"type\":\"text\",\"text\":\"Checking.\"},"
        "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\",\"days\":2}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
        "\"content\":[{\"type\":\"text\",\"text\":\"SUNNY-42\"}]},{\"type\":\"text\",\"text\":\"Thanks\"}]}]}");
    bad_req b = {0};
    cJSON *msgs = srvx_messages(API_MSG, r, &b);
    EXPECT_MSG(msgs != NULL, "%s", b.msg);
    EXPECT_STR_EQ(json_str_at(msgs, "0.role"), "system");
    EXPECT_STR_EQ(json_str_at(msgs, "2.role"), "assistant");
    EXPECT_STR_EQ(json_str_at(msgs, "2.tool_calls.0.function.name"), "get_weather");
    EXPECT(cJSON_IsObject(json_at(msgs, "2.tool_calls.0.function.arguments")));
    EXPECT_STR_EQ(json_str_at(msgs, "3.role"), "tool");
    EXPECT_STR_EQ(json_str_at(msgs, "3.tool_call_id"), "toolu_1");
    EXPECT_STR_EQ(json_str_at(msgs, "3.content"), "SUNNY-42");
    EXPECT_STR_EQ(json_str_at(msgs, "4.content"), "Thanks");
    char *mj = cJSON_PrintUnformatted(msgs), *prompt = NULL;
    EXPECT_EQ_I(cinfer_chat_prompt_json(m, mj, NULL, 1, &prompt, err, sizeof err), 0);
    EXPECT(prompt && strstr(prompt, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\""));
    EXPECT(prompt && strstr(prompt, "<tool_response>\nSUNNY-42\n</tool_response>"));
    cinfer_free(prompt);
    free(mj);
    cJSON_Delete(msgs);
    cJSON_Delete(r);

    /* OpenAI: assistant tool_calls (arguments as a string), a tool message, tools rendered */
    r = cJSON_Parse("{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
                    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
                    "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"London\\\"}\"}}]},"
                    "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"RAIN-7\"}]}");
    msgs = srvx_messages(API_CHAT, r, &b);
    EXPECT_MSG(msgs != NULL, "%s", b.msg);
    mj = cJSON_PrintUnformatted(msgs);
    EXPECT_EQ_I(cinfer_chat_prompt_json(m, mj, oai_tools(), 1, &prompt, err, sizeof err), 0);
    EXPECT(prompt && strstr(prompt, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}"));
    EXPECT(prompt && strstr(prompt, "<tool_response>\nRAIN-7\n</tool_response>"));
    EXPECT(prompt && strstr(prompt, "<tools>") && strstr(prompt, "\"get_time\""));
    cinfer_free(prompt);
    free(mj);
    cJSON_Delete(msgs);
    cJSON_Delete(r);

    /* a tool message without tool_call_id names the field */
    r = cJSON_Parse("{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}");
    memset(&b, 0, sizeof b);
    EXPECT(srvx_messages(API_CHAT, r, &b) == NULL);
    EXPECT_STR_EQ(b.param, "messages[0].tool_call_id");
    cJSON_Delete(r);
    cinfer_model_close(m);
}

/* ---- OpenAI tool calls ---------------------------------------------------------------------- */

TEST(serve_tools, openai_tools) {
    NEED_SHARED(path, MODEL_REL);
    http_srv f;
    if (fx_start(&f, path)) return;
    char req[4096];
    long st;
    /* required: exactly one call, of one of the tools, arguments valid under its schema */
    cJSON *j =
        chat_with_tools(&f,
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],\"max_tokens\":60,"
                        "\"temperature\":0.9,\"seed\":7,\"tools\":%s,\"tool_choice\":\"required\"}",
                        &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.finish_reason"), "tool_calls");
    EXPECT(cJSON_IsNull(json_at(j, "choices.0.message.content")));
    EXPECT_EQ_I(cJSON_GetArraySize(json_at(j, "choices.0.message.tool_calls")), 1);
    const char *id = json_str_at(j, "choices.0.message.tool_calls.0.id");
    EXPECT(id && !strncmp(id, "call_", 5));
    EXPECT_STR_EQ(json_str_at(j, "choices.0.message.tool_calls.0.type"), "function");
    expect_valid_call(json_at(j, "choices.0.message.tool_calls.0"));
    cJSON_Delete(j);

    /* a named tool: that one */
    j = chat_with_tools(&f,
                        "{\"messages\":[{\"role\":\"user\",\"content\":\"Time?\"}],\"max_tokens\":40,\"temperature\":0,"
                        "\"tools\":%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}}",
                        &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.message.tool_calls.0.function.name"), "get_time");
    const char *args = json_str_at(j, "choices.0.message.tool_calls.0.function.arguments");
    EXPECT(args && satisfies(TIME_PARAMS, args));
    cJSON_Delete(j);

    /* auto, the opener provoked with logit_bias: the lazy grammar takes over after it */
    j = chat_with_tools(
        &f,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"max_tokens\":60,\"temperature\":0,"
        "\"tools\":%s,\"logit_bias\":{\"151657\":100},\"parallel_tool_calls\":false}",
        &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.finish_reason"), "tool_calls");
    expect_valid_call(json_at(j, "choices.0.message.tool_calls.0"));
    cJSON_Delete(j);

    /* parallel calls: the bias makes the model open a call after each one, up to the limit of 8 */
    j = chat_with_tools(
        &f,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"max_tokens\":400,\"temperature\":0,"
        "\"tools\":%s,\"tool_choice\":\"required\",\"logit_bias\":{\"151657\":100}}",
        &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.finish_reason"), "tool_calls");
    cJSON *calls = json_at(j, "choices.0.message.tool_calls");
    EXPECT_EQ_I(cJSON_GetArraySize(calls), 8);
    for (cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        expect_valid_call(c);
        EXPECT(json_str_at(c, "id"));
        for (cJSON *d = c->next; d; d = d->next) /* ids are distinct */
            EXPECT(json_str_at(c, "id") && json_str_at(d, "id") && strcmp(json_str_at(c, "id"), json_str_at(d, "id")));
    }
    cJSON_Delete(j);

    /* auto with the opener banned: plain text, no calls */
    j = chat_with_tools(
        &f,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"max_tokens\":6,\"temperature\":0,"
        "\"tools\":%s,\"logit_bias\":{\"151657\":-100}}",
        &st);
    EXPECT_EQ_I(st, 200);
    EXPECT(json_str_at(j, "choices.0.message.content") != NULL);
    EXPECT(json_at(j, "choices.0.message.tool_calls") == NULL);
    EXPECT(strcmp(json_str_at(j, "choices.0.finish_reason") ? json_str_at(j, "choices.0.finish_reason") : "",
                  "tool_calls"));
    cJSON_Delete(j);

    /* streamed: OpenAI's tool_calls deltas, accumulated by index */
    snprintf(req, sizeof req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"max_tokens\":60,\"temperature\":0,"
             "\"stream\":true,\"tools\":%s,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
             "\"get_weather\"}}}",
             oai_tools());
    http_sse_event ev[256];
    int n = post_sse(&f, "/v1/chat/completions", req, ev, 256, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(n_done(ev, n), 1);
    char sargs[1024] = "", sname[64] = "", sid[96] = "", fin[32] = "";
    for (int i = 0; i < n; i++) {
        cJSON *tc = json_at(ev[i].data, "choices.0.delta.tool_calls");
        for (cJSON *c = tc ? tc->child : NULL; c; c = c->next) {
            EXPECT_EQ_I(json_num_at(c, "index"), 0);
            if (json_str_at(c, "id")) snprintf(sid, sizeof sid, "%s", json_str_at(c, "id"));
            if (json_str_at(c, "function.name")) snprintf(sname, sizeof sname, "%s", json_str_at(c, "function.name"));
            if (json_str_at(c, "function.arguments"))
                strncat(sargs, json_str_at(c, "function.arguments"), sizeof sargs - strlen(sargs) - 1);
        }
        if (json_str_at(ev[i].data, "choices.0.finish_reason"))
            snprintf(fin, sizeof fin, "%s", json_str_at(ev[i].data, "choices.0.finish_reason"));
    }
    http_sse_free(ev, n);
    EXPECT(!strncmp(sid, "call_", 5));
    EXPECT_STR_EQ(sname, "get_weather");
    EXPECT(satisfies(WEATHER_PARAMS, sargs));
    EXPECT_STR_EQ(fin, "tool_calls");

    /* bad fields: the OpenAI error shape naming the field */
    static const struct {
        const char *body, *param;
    } bads[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"retrieval\"}]}", "tools[0]"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":"
         "{\"name\":\"bad name!\"}}]}",
         "tools[0].function.name"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", "tool_choice"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":"
         "{\"name\":\"f\"}}],\"tool_choice\":\"sometimes\"}",
         "tool_choice"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":"
         "{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\","
         "\"contains\":{\"type\":\"integer\"}}}}}}]}",
         "tools[0].function.parameters"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
         "\"json_schema\":{\"name\":\"n\",\"schema\":{\"type\":\"array\",\"contains\":{\"type\":\"integer\"}}}}}",
         "response_format.json_schema.schema"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"xml\"}}",
         "response_format.type"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", "top_logprobs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", "logprobs"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"presence_penalty\":-2.5}", "presence_penalty"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"frequency_penalty\":\"high\"}", "frequency_penalty"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"abc\":1}}", "logit_bias"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"5\":101}}", "logit_bias"},
        {"{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{}}]}]}",
         "messages[0].tool_calls[0].function"},
        {"{\"prompt\":\"x\",\"logprobs\":6}", "logprobs"},
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        const char *route = strstr(bads[i].body, "\"prompt\"") ? "/v1/completions" : "/v1/chat/completions";
        j = http_post_json(f.base, route, bads[i].body, NULL, &st);
        EXPECT_MSG(st == 400, "case %zu: status %ld", i, st);
        EXPECT_MSG(json_str_at(j, "error.param") && !strcmp(json_str_at(j, "error.param"), bads[i].param),
                   "case %zu: param %s", i, json_str_at(j, "error.param") ? json_str_at(j, "error.param") : "(none)");
        EXPECT_STR_EQ(json_str_at(j, "error.type"), "invalid_request_error");
        EXPECT(json_str_at(j, "error.message") && strstr(json_str_at(j, "error.message"), bads[i].param));
        cJSON_Delete(j);
    }
    /* the unsupported keyword is named */
    j = http_post_json(f.base, "/v1/chat/completions", bads[5].body, NULL, &st);
    EXPECT(json_str_at(j, "error.message") && strstr(json_str_at(j, "error.message"), "contains"));
    cJSON_Delete(j);
    http_srv_stop(&f);
}

/* ---- Anthropic tool use ------------------------------------------------------------------------ */

TEST(serve_tools, anthropic_tools) {
    NEED_SHARED(path, MODEL_REL);
    http_srv f;
    if (fx_start(&f, path)) return;
    char req[4096];
    long st;
    snprintf(req, sizeof req,
             "{\"model\":\"qwen3-chat\",\"max_tokens\":60,\"temperature\":0,\"thinking\":{\"type\":\"disabled\"},"
             "\"metadata\":{\"user_id\":\"u\"},\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
             "\"text\":\"Weather?\",\"cache_control\":{\"type\":\"ephemeral\"}}]}],"
             "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather\",\"input_schema\":%s}],"
             "\"tool_choice\":{\"type\":\"any\"}}",
             WEATHER_PARAMS);
    cJSON *j = http_post_json(f.base, "/v1/messages", req, NULL, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "stop_reason"), "tool_use");
    EXPECT_STR_EQ(json_str_at(j, "content.0.type"), "tool_use");
    EXPECT(json_str_at(j, "content.0.id") && !strncmp(json_str_at(j, "content.0.id"), "toolu_", 6));
    EXPECT_STR_EQ(json_str_at(j, "content.0.name"), "get_weather");
    cJSON *in = json_at(j, "content.0.input");
    EXPECT(cJSON_IsObject(in));
    char *it = in ? cJSON_PrintUnformatted(in) : NULL;
    EXPECT(it && satisfies(WEATHER_PARAMS, it));
    free(it);
    cJSON_Delete(j);

    /* streamed: content_block_start tool_use, input_json_delta, stop_reason tool_use */
    char *p = strstr(req, "{\"type\":\"any\"}");
    snprintf(p, sizeof req - (size_t)(p - req), "{\"type\":\"tool\",\"name\":\"get_weather\"},\"stream\":true}");
    http_sse_event ev[128];
    int n = post_sse(&f, "/v1/messages", req, ev, 128, &st);
    EXPECT_EQ_I(st, 200);
    char pj[1024] = "", stop[32] = "";
    int saw_start = 0, idx = -1;
    for (int i = 0; i < n; i++) {
        if (!strcmp(ev[i].name, "content_block_start") &&
            !strcmp(json_str_at(ev[i].data, "content_block.type"), "tool_use")) {
            saw_start = 1;
            idx = (int)json_num_at(ev[i].data, "index");
            EXPECT_STR_EQ(json_str_at(ev[i].data, "content_block.name"), "get_weather");
            EXPECT(cJSON_IsObject(json_at(ev[i].data, "content_block.input")));
        }
        if (!strcmp(ev[i].name, "content_block_delta")) {
            EXPECT_STR_EQ(json_str_at(ev[i].data, "delta.type"), "input_json_delta");
            EXPECT_EQ_I(json_num_at(ev[i].data, "index"), idx);
            strncat(pj,
                    json_str_at(ev[i].data, "delta.partial_json") ? json_str_at(ev[i].data, "delta.partial_json") : "",
                    sizeof pj - strlen(pj) - 1);
        }
        if (!strcmp(ev[i].name, "message_delta"))
            snprintf(stop, sizeof stop, "%s", json_str_at(ev[i].data, "delta.stop_reason"));
    }
    EXPECT(saw_start);
    EXPECT(satisfies(WEATHER_PARAMS, pj));
    EXPECT_STR_EQ(stop, "tool_use");
    EXPECT(n > 0 && !strcmp(ev[n - 1].name, "message_stop"));
    http_sse_free(ev, n);

    /* bad fields: Anthropic's error shape */
    static const struct {
        const char *body, *field;
    } bads[] = {
        {"{\"model\":\"qwen3-chat\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
         "\"tools\":[{\"name\":\"f\"}]}",
         "tools[0].input_schema"},
        {"{\"model\":\"qwen3-chat\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
         "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],\"tool_choice\":{\"type\":\"maybe\"}}",
         "tool_choice.type"},
        {"{\"model\":\"qwen3-chat\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"tool_result\"}]}]}",
         "messages[0].content[0].tool_use_id"},
        {"{\"model\":\"qwen3-chat\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
         "\"thinking\":true}",
         "thinking"},
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        j = http_post_json(f.base, "/v1/messages", bads[i].body, NULL, &st);
        EXPECT_MSG(st == 400, "case %zu: status %ld", i, st);
        EXPECT_STR_EQ(json_str_at(j, "type"), "error");
        EXPECT_STR_EQ(json_str_at(j, "error.type"), "invalid_request_error");
        EXPECT_MSG(json_str_at(j, "error.message") && strstr(json_str_at(j, "error.message"), bads[i].field),
                   "case %zu: %s", i, json_str_at(j, "error.message") ? json_str_at(j, "error.message") : "(none)");
        cJSON_Delete(j);
    }
    http_srv_stop(&f);
}

/* ---- response_format, logprobs, penalties, responses ------------------------------------------- */

TEST(serve_tools, format_logprobs_responses) {
    NEED_SHARED(path, MODEL_REL);
    http_srv f;
    if (fx_start(&f, path)) return;
    long st;
    static const char SCHEMA[] = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0,"
                                 "\"maximum\":99},\"ok\":{\"type\":\"boolean\"}},\"required\":[\"n\",\"ok\"],"
                                 "\"additionalProperties\":false}";
    char req[2048];
    snprintf(req, sizeof req,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":40,\"temperature\":1,\"seed\":3,"
             "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"r\",\"strict\":true,"
             "\"schema\":%s}}}",
             SCHEMA);
    cJSON *j = http_post_json(f.base, "/v1/chat/completions", req, NULL, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.finish_reason"), "stop");
    const char *c = json_str_at(j, "choices.0.message.content");
    EXPECT(c && satisfies(SCHEMA, c));
    cJSON_Delete(j);

    /* json_object: an object (complete when the reply stopped on its own) */
    j = http_post_json(f.base, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":12,\"temperature\":0,"
                  "\"response_format\":{\"type\":\"json_object\"}}",
                  NULL, &st);
    EXPECT_EQ_I(st, 200);
    c = json_str_at(j, "choices.0.message.content");
    EXPECT(c && c[0] == '{');
    if (c && !strcmp(json_str_at(j, "choices.0.finish_reason"), "stop")) {
        cJSON *v = cJSON_Parse(c);
        EXPECT(cJSON_IsObject(v));
        cJSON_Delete(v);
    }
    cJSON_Delete(j);

    /* chat logprobs: greedy, so each token is its own top alternative; texts join to the content */
    j = http_post_json(f.base, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":8,\"temperature\":0,"
                  "\"logprobs\":true,\"top_logprobs\":3}",
                  NULL, &st);
    EXPECT_EQ_I(st, 200);
    cJSON *lc = json_at(j, "choices.0.logprobs.content");
    int n = cJSON_GetArraySize(lc), gen = (int)json_num_at(j, "usage.completion_tokens");
    EXPECT(n >= 1 && (n == gen || n == gen - 1)); /* an end-of-turn token has no entry */
    char joined[2048] = "";
    int partial = 0;
    for (cJSON *e = lc ? lc->child : NULL; e; e = e->next) {
        double lp = json_num_at(e, "logprob");
        EXPECT(lp <= 0 && lp > -100);
        cJSON *top = json_at(e, "top_logprobs");
        EXPECT_EQ_I(cJSON_GetArraySize(top), 3);
        EXPECT_STR_EQ(json_str_at(top, "0.token"), json_str_at(e, "token"));
        EXPECT_NEAR(json_num_at(top, "0.logprob"), lp, 1e-5);
        EXPECT(json_num_at(top, "0.logprob") >= json_num_at(top, "1.logprob") &&
               json_num_at(top, "1.logprob") >= json_num_at(top, "2.logprob"));
        double psum = exp(json_num_at(top, "0.logprob")) + exp(json_num_at(top, "1.logprob")) +
                      exp(json_num_at(top, "2.logprob"));
        EXPECT(psum <= 1.0 + 1e-4);
        /* a token that is part of a UTF-8 character shows as U+FFFD; bytes has its real bytes */
        if (strstr(json_str_at(e, "token"), "\xef\xbf\xbd")) partial = 1;
        else EXPECT_EQ_I(cJSON_GetArraySize(json_at(e, "bytes")), (int)strlen(json_str_at(e, "token")));
        strncat(joined, json_str_at(e, "token"), sizeof joined - strlen(joined) - 1);
    }
    if (!partial) EXPECT_STR_EQ(joined, json_str_at(j, "choices.0.message.content"));
    cJSON_Delete(j);

    /* in stream chunks too */
    http_sse_event ev[64];
    int ne = post_sse(&f, "/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4,\"temperature\":0,"
                      "\"logprobs\":true,\"stream\":true}",
                      ev, 64, &st),
        n_lp = 0;
    for (int i = 0; i < ne; i++) n_lp += cJSON_GetArraySize(json_at(ev[i].data, "choices.0.logprobs.content"));
    http_sse_free(ev, ne);
    EXPECT(n_lp >= 3 && n_lp <= 4);

    /* legacy completions logprobs */
    j = http_post_json(f.base, "/v1/completions",
                       "{\"prompt\":\"Once upon\",\"max_tokens\":5,\"temperature\":0,\"logprobs\":2}", NULL, &st);
    EXPECT_EQ_I(st, 200);
    cJSON *toks = json_at(j, "choices.0.logprobs.tokens"), *offs = json_at(j, "choices.0.logprobs.text_offset");
    EXPECT_EQ_I(cJSON_GetArraySize(toks), cJSON_GetArraySize(json_at(j, "choices.0.logprobs.token_logprobs")));
    EXPECT_EQ_I(cJSON_GetArraySize(toks), cJSON_GetArraySize(offs));
    EXPECT(cJSON_GetArraySize(toks) >= 4);
    joined[0] = 0;
    partial = 0;
    for (cJSON *e = toks ? toks->child : NULL; e; e = e->next) {
        partial |= strstr(e->valuestring, "\xef\xbf\xbd") != NULL;
        strncat(joined, e->valuestring, sizeof joined - strlen(joined) - 1);
    }
    if (!partial) EXPECT_STR_EQ(joined, json_str_at(j, "choices.0.text"));
    EXPECT_EQ_I(cJSON_GetArraySize(json_at(j, "choices.0.logprobs.top_logprobs.0")), 2);
    cJSON_Delete(j);

    /* penalties change a greedy reply that repeats itself */
    static const char *rq = "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],\"max_tokens\":30,"
                            "\"temperature\":0%s}";
    char b1[512], b2[512];
    snprintf(b1, sizeof b1, rq, "");
    snprintf(b2, sizeof b2, rq, ",\"frequency_penalty\":2,\"presence_penalty\":2");
    cJSON *j1 = http_post_json(f.base, "/v1/chat/completions", b1, NULL, &st),
          *j2 = http_post_json(f.base, "/v1/chat/completions", b2, NULL, &st);
    EXPECT_EQ_I(st, 200);
    const char *t1 = json_str_at(j1, "choices.0.message.content"), *t2 = json_str_at(j2, "choices.0.message.content");
    EXPECT(t1 && t2 && strcmp(t1, t2));
    cJSON_Delete(j1);
    cJSON_Delete(j2);

    /* /v1/responses */
    j = http_post_json(f.base, "/v1/responses",
                  "{\"model\":\"qwen3-chat\",\"instructions\":\"Be brief.\",\"input\":[{\"role\":\"user\",\"content\":"
                  "[{\"type\":\"input_text\",\"text\":\"hi\"}]}],\"max_output_tokens\":4,\"temperature\":0,\"top_p\":1}",
                  NULL, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT(json_str_at(j, "id") && !strncmp(json_str_at(j, "id"), "resp_", 5));
    EXPECT_STR_EQ(json_str_at(j, "object"), "response");
    const char *status = json_str_at(j, "status");
    EXPECT(status && (!strcmp(status, "completed") || !strcmp(status, "incomplete")));
    EXPECT_STR_EQ(json_str_at(j, "output.0.type"), "message");
    EXPECT_STR_EQ(json_str_at(j, "output.0.role"), "assistant");
    EXPECT_STR_EQ(json_str_at(j, "output.0.content.0.type"), "output_text");
    EXPECT(json_str_at(j, "output.0.content.0.text") != NULL);
    EXPECT(cJSON_IsArray(json_at(j, "output.0.content.0.annotations")));
    EXPECT(json_num_at(j, "usage.output_tokens") >= 1 && json_num_at(j, "usage.output_tokens") <= 4);
    EXPECT_EQ_I(json_num_at(j, "usage.total_tokens"),
                json_num_at(j, "usage.input_tokens") + json_num_at(j, "usage.output_tokens"));
    cJSON_Delete(j);

    ne = post_sse(&f, "/v1/responses",
                  "{\"input\":\"hi\",\"instructions\":\"Be brief.\",\"max_output_tokens\":4,\"temperature\":0,"
                  "\"stream\":true}",
                  ev, 64, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT(ne >= 3);
    if (ne >= 3) {
        EXPECT_STR_EQ(ev[0].name, "response.created");
        EXPECT_STR_EQ(json_str_at(ev[0].data, "response.status"), "in_progress");
        /* the last event is response.completed, or response.incomplete (as OpenAI) when cut at
         * max_output_tokens; its response's status says the same */
        const char *fin = json_str_at(ev[ne - 1].data, "response.status");
        int cut = fin && !strcmp(fin, "incomplete");
        EXPECT(fin && (cut || !strcmp(fin, "completed")));
        EXPECT_STR_EQ(ev[ne - 1].name, cut ? "response.incomplete" : "response.completed");
        /* the events a Responses client accumulates, in order */
        const char *const order[] = {"response.created", "response.in_progress", "response.output_item.added",
                                     "response.content_part.added", "response.output_text.done",
                                     "response.content_part.done", "response.output_item.done",
                                     cut ? "response.incomplete" : "response.completed"};
        size_t k = 0;
        char acc[1024] = "", done_text[1024] = "";
        for (int i = 0; i < ne; i++) {
            EXPECT_EQ_I(json_num_at(ev[i].data, "sequence_number"), i);
            EXPECT_STR_EQ(json_str_at(ev[i].data, "type"), ev[i].name);
            if (k < sizeof order / sizeof order[0] && !strcmp(ev[i].name, order[k])) k++;
            if (!strcmp(ev[i].name, "response.output_text.delta")) {
                EXPECT(k == 4); /* deltas come between content_part.added and output_text.done */
                strncat(acc, json_str_at(ev[i].data, "delta"), sizeof acc - strlen(acc) - 1);
            }
            if (!strcmp(ev[i].name, "response.output_text.done"))
                snprintf(done_text, sizeof done_text, "%s", json_str_at(ev[i].data, "text"));
        }
        EXPECT_EQ_I(k, sizeof order / sizeof order[0]);
        EXPECT_STR_EQ(acc, done_text);
        EXPECT_STR_EQ(json_str_at(ev[ne - 1].data, "response.instructions"), "Be brief.");
        EXPECT_STR_EQ(json_str_at(ev[ne - 1].data, "response.output.0.content.0.text"), acc);
    }
    http_sse_free(ev, ne);

    j = http_post_json(f.base, "/v1/responses", "{\"input\":42}", NULL, &st);
    EXPECT_EQ_I(st, 400);
    EXPECT_STR_EQ(json_str_at(j, "error.param"), "input");
    cJSON_Delete(j);
    j = http_post_json(f.base, "/v1/responses", "{\"input\":\"x\",\"max_output_tokens\":0}", NULL, &st);
    EXPECT_EQ_I(st, 400);
    EXPECT_STR_EQ(json_str_at(j, "error.param"), "max_output_tokens");
    cJSON_Delete(j);
    http_srv_stop(&f);
}
