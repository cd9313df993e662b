/*
 * test_serve_fam.c — tool calls served in the syntaxes of issue 19's
 * families (runtime/server/srv_tools.c over runtime/text/chat_tools.h).
 *
 * The model is ../shared's random-weight Qwen3 chat model with its
 * tokenizer.chat_template replaced by each family's template
 * (tests/data/chat/templates; Command R7B's from ../shared): the vocabulary
 * is Qwen's, so the families' own special tokens are plain text here, and a
 * random model writes no call of its own — the checks are what the server
 * controls:
 *  - the syntax is detected (Ollama /api/show lists "tools");
 *  - a forced call (tool_choice required, and a named tool) in the JSON
 *    syntaxes (EXAONE 4, SmolLM3, Nemotron's and Command R7B's arrays) and in
 *    Mistral 3's name[ARGS]{...} comes back as a call of an allowed tool
 *    whose arguments satisfy its schema; parallel_tool_calls false: one;
 *  - a conversation with earlier calls and their results renders in every
 *    template (Mistral's 9-character ids are mapped), and SmolLM3 sees the
 *    tools (as xml_tools); the free-form syntaxes (Gemma 4 served, GLM and
 *    Qwen3-Coder rendered) answer a forced call with a well-formed reply.
 */
#include "gguf_edit.h"
#include "cinfer.h"
#include "http_client.h"
#include "server/srv_impl.h"
#include "text/chat.h"
#include "test.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_REL "models/chat/qwen3-chat.gguf"

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather of a city\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12,"
    "\"description\":\"City name\"},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7,\"description\":\"Days\"}},\"required\":[\"city\",\"days\"],"
    "\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":\"Time in a zone\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":{\"enum\":[\"UTC\",\"CET\"],\"description\":\"Time zone\"}},\"required\":[\"zone\"],"
    "\"additionalProperties\":false}}}]";

/* a call's arguments against its tool's schema in TOOLS */
static int valid_call(const cJSON *call) {
    const char *name = json_str_at(call, "function.name"), *args = json_str_at(call, "function.arguments");
    if (!name || !args) return 0;
    cJSON *tools = cJSON_Parse(TOOLS);
    const cJSON *t, *params = NULL;
    cJSON_ArrayForEach(t, tools)
        if (!strcmp(json_str_at(t, "function.name"), name)) params = json_at(t, "function.parameters");
    int ok = 0;
    if (params) {
        char *ps = cJSON_PrintUnformatted(params), err[256];
        cinfer_grammar *g = NULL;
        ok = !cinfer_grammar_from_schema(NULL, ps, strlen(ps), NULL, &g, err, sizeof err) &&
             cinfer_grammar_check(g, args, strlen(args), err, sizeof err) == 1;
        cinfer_grammar_free(g);
        free(ps);
    }
    cJSON_Delete(tools);
    return ok;
}

/* Serve the chat model with the template of file (NULL: its own) as "m". */
static int serve_with(http_srv *f, const char *file, int shared) {
    const char *model = shared_path(MODEL_REL);
    if (!model) return test_skip("../shared/%s absent", MODEL_REL), -1;
    char src[1024], tpath[1024], dst[1200];
    snprintf(src, sizeof src, "%s", model);
    if (shared) {
        char rel[300];
        snprintf(rel, sizeof rel, "chat-templates/%s", file);
        const char *p = shared_path(rel);
        if (!p) return test_skip("../shared/%s absent", rel), -1;
        snprintf(tpath, sizeof tpath, "%s", p);
    } else
        snprintf(tpath, sizeof tpath, "tests/data/chat/templates/%s", file);
    size_t len;
    char *tmpl = read_file(tpath, &len);
    if (!tmpl) return test_fail(__FILE__, __LINE__, "cannot read %s", tpath), -1;
    snprintf(dst, sizeof dst, "%s/%s.gguf", test_tmpdir(), file);
    const char *keys[] = {"tokenizer.chat_template"}, *vals[] = {tmpl};
    int rc = gguf_edit_copy(src, dst, NULL, keys, vals, 1);
    free(tmpl);
    if (rc) return -1;
    return http_srv_start(f, dst, NULL, NULL, (srv_options){.model_name = "m", .n_ctx = 2048, .n_threads = 1});
}

static cJSON *chat(const http_srv *f, const char *extra, long *st) {
    char body[8192];
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris for 3 days?\"}],\"max_tokens\":80,"
             "\"temperature\":0,\"tools\":%s%s}", TOOLS, extra);
    return http_post_json(f->base, "/v1/chat/completions", body, NULL, st);
}

/* A conversation with two earlier calls and their results, as a client sends it back. */
static const char HISTORY[] =
    "{\"max_tokens\":1,\"temperature\":0,\"tools\":%s,\"messages\":["
    "{\"role\":\"user\",\"content\":\"Weather in Paris and the time?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
    "{\"id\":\"call_ab0001\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
    "\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":3}\"}},"
    "{\"id\":\"call_ab0002\",\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{\\\"zone\\\":\\\"CET\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_ab0001\",\"content\":\"sunny\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_ab0002\",\"content\":\"12:00\"}]}";

static const struct {
    const char *file;
    int shared;
    int forced; /* the server constrains the whole call: a forced call must come back valid */
} FAMILIES[] = {
    {"LGAI-EXAONE-EXAONE-4.0.jinja", 0, 1},
    {"HuggingFaceTB-SmolLM3-3B.jinja", 0, 1},
    {"NVIDIA-Nemotron-Nano-v2.jinja", 0, 1},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", 1, 1},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", 0, 1},
    {"google-gemma-4-31B-it.jinja", 0, 0},
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", 1, 1},
};

static void check_family(size_t i) {
    http_srv f;
    if (serve_with(&f, FAMILIES[i].file, FAMILIES[i].shared)) return;
    long st;
    const char *file = FAMILIES[i].file;
    cJSON *j = http_post_json(f.base, "/api/show", "{\"model\":\"m\"}", NULL, &st);
    char *caps = cJSON_PrintUnformatted(json_at(j, "capabilities"));
    EXPECT_MSG(caps && strstr(caps, "\"tools\""), "%s: capabilities %s", file, caps ? caps : "(none)");
    free(caps);
    cJSON_Delete(j);
    if (FAMILIES[i].forced) {
        j = chat(&f, ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false", &st);
        EXPECT_MSG(st == 200, "%s: required: status %ld", file, st);
        EXPECT_MSG(json_str_at(j, "choices.0.finish_reason") &&
                       !strcmp(json_str_at(j, "choices.0.finish_reason"), "tool_calls"),
                   "%s: required: finish_reason %s", file, json_str_at(j, "choices.0.finish_reason"));
        EXPECT_MSG(cJSON_GetArraySize(json_at(j, "choices.0.message.tool_calls")) == 1, "%s: %d calls", file,
                   cJSON_GetArraySize(json_at(j, "choices.0.message.tool_calls")));
        EXPECT_MSG(valid_call(json_at(j, "choices.0.message.tool_calls.0")), "%s: invalid call %s(%s)", file,
                   json_str_at(j, "choices.0.message.tool_calls.0.function.name"),
                   json_str_at(j, "choices.0.message.tool_calls.0.function.arguments"));
        cJSON_Delete(j);
        j = chat(&f, ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}", &st);
        EXPECT_MSG(st == 200 && json_str_at(j, "choices.0.message.tool_calls.0.function.name") &&
                       !strcmp(json_str_at(j, "choices.0.message.tool_calls.0.function.name"), "get_time"),
                   "%s: named tool: status %ld, %s", file, st,
                   json_str_at(j, "choices.0.message.tool_calls.0.function.name"));
        EXPECT(valid_call(json_at(j, "choices.0.message.tool_calls.0")));
        cJSON_Delete(j);
    } else {
        /* the call is written freely: whatever a random model writes, a well-formed answer */
        j = chat(&f, ",\"tool_choice\":\"required\"", &st);
        EXPECT_MSG(st == 200, "%s: required: status %ld", file, st);
        cJSON_Delete(j);
    }
    char body[8192];
    snprintf(body, sizeof body, HISTORY, TOOLS);
    j = http_post_json(f.base, "/v1/chat/completions", body, NULL, &st);
    EXPECT_MSG(st == 200, "%s: history with calls: status %ld %s", file, st,
               json_str_at(j, "error.message") ? json_str_at(j, "error.message") : "");
    cJSON_Delete(j);
    if (strstr(file, "SmolLM3")) { /* it reads its tools from xml_tools: with tools the prompt is longer */
        cJSON *a = http_post_json(f.base, "/v1/messages/count_tokens",
                                  "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                                  NULL, &st);
        cJSON *b = http_post_json(f.base, "/v1/messages/count_tokens",
                                  "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                                  "\"tools\":[{\"name\":\"get_time\",\"input_schema\":{\"type\":\"object\",\"properties\":{}}}]}",
                                  NULL, &st);
        EXPECT_MSG(json_num_at(b, "input_tokens") > json_num_at(a, "input_tokens") + 20,
                   "tokens %g without tools, %g with", json_num_at(a, "input_tokens"), json_num_at(b, "input_tokens"));
        cJSON_Delete(a);
        cJSON_Delete(b);
    }
    http_srv_stop(&f);
}

TEST(serve_fam, exaone4) { check_family(0); }
TEST(serve_fam, smollm3) { check_family(1); }
TEST(serve_fam, nemotron) { check_family(2); }
TEST(serve_fam, command_r7b) { check_family(3); }
TEST(serve_fam, mistral_small3) { check_family(4); }
TEST(serve_fam, gemma4) { check_family(5); }
TEST(serve_fam, command_r_plus) { check_family(6); }

/* Every family's template renders a conversation with earlier calls and
 * their results as the server converts it (srvx_messages, then
 * srvx_fit_family: Mistral's ids), writing both calls in its own syntax. */
TEST(serve_fam, history_renders_everywhere) {
    static const struct {
        const char *file;
        int shared;
    } all[] = {
        {"google-gemma-4-31B-it.jinja", 0},          {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", 0},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", 0}, {"GLM-4.6.jinja", 0},
        {"GLM-4.7-Flash.jinja", 0},                  {"NVIDIA-Nemotron-Nano-v2.jinja", 0},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", 0}, {"LGAI-EXAONE-EXAONE-4.0.jinja", 0},
        {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", 1},
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", 1},
    };
    char body[8192];
    snprintf(body, sizeof body, HISTORY, TOOLS);
    cJSON *r = cJSON_Parse(body), *tools = cJSON_Parse(TOOLS);
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        char path[1200], rel[300];
        if (all[i].shared) {
            snprintf(rel, sizeof rel, "chat-templates/%s", all[i].file);
            if (!shared_path(rel)) continue;
            snprintf(path, sizeof path, "%s", shared_path(rel));
        } else
            snprintf(path, sizeof path, "tests/data/chat/templates/%s", all[i].file);
        size_t len;
        char *src = read_file(path, &len), err[512];
        chat_template *t = NULL;
        if (!src || chat_template_parse(src, len, &t, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "%s: %s", all[i].file, src ? err : "unreadable");
            free(src);
            continue;
        }
        free(src);
        bad_req b = {0};
        cJSON *msgs = srvx_messages(API_CHAT, r, &b);
        char *vars = NULL;
        EXPECT_MSG(msgs && !srvx_fit_family(chat_template_family(t), tools, msgs, &vars), "%s: %s", all[i].file, b.msg);
        cJSON *ctx = chat_context_new(msgs, tools, true, "<s>", "</s>");
        char *out = NULL;
        int rc = ctx ? chat_template_render(t, ctx, NULL, &out, &len, err, sizeof err) : -1;
        EXPECT_MSG(rc == 0, "%s: %s", all[i].file, err);
        const chat_tool_syntax *syn = chat_tool_syntax_for(chat_template_family(t));
        /* both calls written, in the syntax (a trigger for each, or one array) */
        size_t n_trig = 0;
        for (const char *p = out; syn && p && (p = strstr(p, syn->trigger)); p++) n_trig++;
        EXPECT_MSG(out && syn && strstr(out, "get_weather") && strstr(out, "get_time") && n_trig >= 1,
                   "%s: calls not rendered", all[i].file);
        free(out);
        free(vars);
        cJSON_Delete(ctx);
        cJSON_Delete(msgs);
        chat_template_free(t);
    }
    cJSON_Delete(r);
    cJSON_Delete(tools);
}
