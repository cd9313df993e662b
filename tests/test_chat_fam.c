/*
 * test_chat_fam.c — the chat templates of issue 19's families
 * (tests/data/chat/templates/, README there; Command R's from
 * ../shared/chat-templates) rendered by cinfer's Jinja interpreter and by
 * python3-jinja2 with transformers' settings, at test time
 * (tests/data/chat/render_jinja2.py), on every conversation of
 * conversations.json and conversations_families.json: the outputs must be
 * byte-identical, and where jinja2 raises, cinfer raises the same kind.
 * Also each template's family and tool-call format as the server detects
 * them (runtime/text/chat.h).
 */
#include "test.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/chat.h"
#include "text/jinja.h"

#define CHAT_DATA "tests/data/chat"

/* The templates and what chat_detect_family says about each. */
static const struct {
    const char *file; /* under tests/data/chat/templates, or ../shared when shared */
    int shared;
    chat_family family;
} TEMPLATES[] = {
    {"google-gemma-4-31B-it.jinja", 0, CHAT_FAMILY_GEMMA4},
    {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", 0, CHAT_FAMILY_MISTRAL3},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", 0, CHAT_FAMILY_MISTRAL3},
    {"GLM-4.6.jinja", 0, CHAT_FAMILY_GLM45},
    {"GLM-4.7-Flash.jinja", 0, CHAT_FAMILY_GLM45},
    {"NVIDIA-Nemotron-Nano-v2.jinja", 0, CHAT_FAMILY_NEMOTRON},
    {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", 0, CHAT_FAMILY_QWEN3_CODER},
    {"LGAI-EXAONE-EXAONE-4.0.jinja", 0, CHAT_FAMILY_EXAONE4},
    {"HuggingFaceTB-SmolLM3-3B.jinja", 0, CHAT_FAMILY_SMOLLM3},
    {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", 1, CHAT_FAMILY_COMMAND_R},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", 1, CHAT_FAMILY_COMMAND_R7B},
    {"Apertus-8B-Instruct.jinja", 0, CHAT_FAMILY_UNKNOWN},
    {"ByteDance-Seed-OSS.jinja", 0, CHAT_FAMILY_UNKNOWN},
    {"Qwen3-Coder.jinja", 0, CHAT_FAMILY_QWEN3_CODER},
    {"google-gemma-4-31B-it-interleaved.jinja", 0, CHAT_FAMILY_GEMMA4},
};
#define N_TEMPLATES (sizeof TEMPLATES / sizeof *TEMPLATES)

static char *template_path(size_t i) {
    char rel[256], *p = malloc(1200);
    if (TEMPLATES[i].shared) {
        snprintf(rel, sizeof rel, "chat-templates/%s", TEMPLATES[i].file);
        const char *s = shared_path(rel);
        if (!s) {
            free(p);
            return NULL;
        }
        snprintf(p, 1200, "%s", s);
    } else {
        snprintf(p, 1200, CHAT_DATA "/templates/%s", TEMPLATES[i].file);
    }
    return p;
}

/* gen_expected.py context(): messages, tools, documents, add_generation_prompt,
 * the special tokens, the conversation's extra variables. */
static cJSON *context(const cJSON *spec, const cJSON *conv) {
    cJSON *ctx = chat_context_new(cJSON_GetObjectItemCaseSensitive(conv, "messages"),
                                  cJSON_GetObjectItemCaseSensitive(conv, "tools"),
                                  cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(conv, "add_generation_prompt")), NULL,
                                  NULL);
    const cJSON *groups[2] = {cJSON_GetObjectItemCaseSensitive(spec, "special_tokens"),
                              cJSON_GetObjectItemCaseSensitive(conv, "extra")};
    for (int g = 0; g < 2; g++)
        for (const cJSON *it = groups[g] ? groups[g]->child : NULL; it; it = it->next) {
            cJSON_DeleteItemFromObjectCaseSensitive(ctx, it->string);
            cJSON_AddItemToObject(ctx, it->string, cJSON_Duplicate(it, 1));
        }
    return ctx;
}

/* conversations.json "fixed_time": 2025-02-20T12:00:00 (a Thursday) */
static struct tm fixed_time(void) {
    struct tm tm = {0};
    tm.tm_year = 2025 - 1900;
    tm.tm_mon = 1;
    tm.tm_mday = 20;
    tm.tm_hour = 12;
    tm.tm_wday = 4;
    tm.tm_yday = 50;
    tm.tm_isdst = -1;
    return tm;
}

static void compare(const char *what, const chat_template *t, const cJSON *ctx, const cJSON *want) {
    struct tm now = fixed_time();
    jinja_render_opts opts = {.now = &now};
    char *out = NULL, err[600];
    size_t len = 0;
    int rc = chat_template_render(t, ctx, &opts, &out, &len, err, sizeof err);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(want, "output");
    if (cJSON_IsString(text)) {
        size_t wl = strlen(text->valuestring), i = 0;
        if (rc) test_fail(__FILE__, __LINE__, "%s: rc %d: %s", what, rc, err);
        else if (len != wl || memcmp(out, text->valuestring, len)) {
            while (i < len && i < wl && out[i] == text->valuestring[i]) i++;
            size_t from = i > 40 ? i - 40 : 0;
            test_fail(__FILE__, __LINE__, "%s: differs from jinja2 at byte %zu (%zu vs %zu bytes)\n      cinfer: \"%.*s\"\n"
                      "      jinja2: \"%.*s\"", what, i, len, wl, (int)(len - from < 120 ? len - from : 120), out + from,
                      (int)(wl - from < 120 ? wl - from : 120), text->valuestring + from);
        }
    } else {
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(want, "error"));
        const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(want, "message"));
        if (!rc) test_fail(__FILE__, __LINE__, "%s: rendered, jinja2 raised %s: %s", what, kind ? kind : "?", msg ? msg : "");
        else if (kind && !strcmp(kind, "raise_exception"))
            EXPECT_MSG(rc == JINJA_ERR_RAISED && msg && strstr(err, msg), "%s: rc %d \"%s\", jinja2 raise_exception(\"%s\")",
                       what, rc, err, msg ? msg : "");
        else
            EXPECT_MSG(rc == JINJA_ERR_RUNTIME && kind && strstr(err, kind), "%s: rc %d \"%s\", jinja2 %s: %s", what, rc,
                       err, kind ? kind : "?", msg ? msg : "");
    }
    free(out);
}

TEST(chat_fam, templates_match_jinja2) {
    if (run_cmd("/usr/bin/env python3 -c 'import jinja2' 2>/dev/null", false, NULL) != 0)
        SKIP("python3-jinja2 absent (it is in the Makefile's DEB_PKGS: apt-get install python3-jinja2)");
    if (!shared_path("chat-templates")) SKIP("../shared/chat-templates absent (Command R's templates)");
    char cmd[8192];
    size_t o = (size_t)snprintf(cmd, sizeof cmd, "/usr/bin/env python3 " CHAT_DATA "/render_jinja2.py --conversations "
                                CHAT_DATA "/conversations.json --conversations " CHAT_DATA "/conversations_families.json");
    char *paths[N_TEMPLATES];
    for (size_t i = 0; i < N_TEMPLATES; i++) {
        paths[i] = template_path(i);
        if (paths[i] && o + strlen(paths[i]) + 4 < sizeof cmd) o += (size_t)snprintf(cmd + o, sizeof cmd - o, " '%s'", paths[i]);
    }
    char *json = NULL;
    int st = run_cmd(cmd, false, &json);
    cJSON *ref = st == 0 && json ? cJSON_Parse(json) : NULL;
    EXPECT_MSG(ref, "render_jinja2.py failed (status %d)", st);
    cJSON *specs[2] = {read_json(CHAT_DATA "/conversations.json"), read_json(CHAT_DATA "/conversations_families.json")};
    int n_cases = 0;
    for (size_t i = 0; ref && i < N_TEMPLATES; i++) {
        size_t len;
        char *src = paths[i] ? read_file(paths[i], &len) : NULL;
        EXPECT_MSG(src, "cannot read %s", TEMPLATES[i].file);
        chat_template *t = NULL;
        char err[600];
        if (src && chat_template_parse(src, len, &t, err, sizeof err))
            test_fail(__FILE__, __LINE__, "%s: parse: %s", TEMPLATES[i].file, err);
        free(src);
        if (!t) continue;
        EXPECT_MSG(chat_template_family(t) == TEMPLATES[i].family, "%s: family %s, expected %s", TEMPLATES[i].file,
                   chat_family_name(chat_template_family(t)), chat_family_name(TEMPLATES[i].family));
        const cJSON *cases = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ref, "renders"),
                                                              TEMPLATES[i].file);
        for (int s = 0; s < 2; s++)
            for (const cJSON *conv = cJSON_GetObjectItemCaseSensitive(specs[s], "conversations")->child; conv;
                 conv = conv->next) {
                const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(conv, "name"));
                const cJSON *want = cJSON_GetObjectItemCaseSensitive(cases, name);
                char what[400];
                snprintf(what, sizeof what, "%s / %s", TEMPLATES[i].file, name);
                if (!want) {
                    test_fail(__FILE__, __LINE__, "%s: jinja2 gave nothing", what);
                    continue;
                }
                cJSON *ctx = context(specs[s], conv);
                compare(what, t, ctx, want);
                cJSON_Delete(ctx);
                n_cases++;
            }
        chat_template_free(t);
    }
    printf("    %d renderings compared with python3-jinja2 %s\n", n_cases,
           cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "jinja2")));
    EXPECT(n_cases >= (int)N_TEMPLATES * 17);
    for (size_t i = 0; i < N_TEMPLATES; i++) free(paths[i]);
    cJSON_Delete(specs[0]);
    cJSON_Delete(specs[1]);
    cJSON_Delete(ref);
    free(json);
}

/* ---- tool-call syntaxes (runtime/text/chat_tools.h) ----------------------------------- */

#include "text/chat_tools.h"

/* The calls of the round-trip conversation: what each template writes for
 * them must parse back to them. */
static const char RT_CALLS[] =
    "[{\"id\":\"call00001\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\","
    "\"unit\":\"celsius\"}}},{\"id\":\"call00002\",\"type\":\"function\",\"function\":{\"name\":\"search_docs\","
    "\"arguments\":{\"query\":\"rain gear\",\"max_results\":3,\"exact\":false,\"tags\":[\"rain\",\"gear\"]}}}]";

static int json_equal_text(const char *a, const char *b) {
    cJSON *x = cJSON_Parse(a), *y = cJSON_Parse(b);
    int eq = x && y && cJSON_Compare(x, y, 1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return eq;
}

/* Render [user] + generation prompt and [user, assistant with RT_CALLS]; the
 * second minus the first is the assistant turn, which must split into
 * exactly RT_CALLS. */
static void roundtrip(const char *file, const chat_template *t, const chat_tool_syntax *syn, const cJSON *tools) {
    cJSON *calls = cJSON_Parse(RT_CALLS);
    cJSON *m1 = cJSON_Parse("[{\"role\":\"user\",\"content\":\"Weather in Paris, and rain gear?\"}]");
    cJSON *m2 = cJSON_Duplicate(m1, 1), *am = cJSON_CreateObject();
    cJSON_AddStringToObject(am, "role", "assistant");
    cJSON_AddStringToObject(am, "content", "");
    cJSON_AddItemToObject(am, "tool_calls", calls);
    cJSON_AddItemToArray(m2, am);
    cJSON *c1 = chat_context_new(m1, tools, true, "<s>", "</s>"), *c2 = chat_context_new(m2, tools, false, "<s>", "</s>");
    struct tm now = fixed_time();
    jinja_render_opts opts = {.now = &now};
    char *o1 = NULL, *o2 = NULL, err[512];
    size_t l1 = 0, l2 = 0;
    int r1 = chat_template_render(t, c1, &opts, &o1, &l1, err, sizeof err);
    int r2 = r1 ? r1 : chat_template_render(t, c2, &opts, &o2, &l2, err, sizeof err);
    EXPECT_MSG(!r1 && !r2, "%s: render: %s", file, err);
    if (!r1 && !r2) {
        /* the shared prefix, then the assistant's text (templates differ in
         * what the generation prompt adds: take the longest common prefix,
         * backed up to the start of the first block) */
        size_t k = 0;
        while (k < l1 && k < l2 && o1[k] == o2[k]) k++;
        size_t back = strlen(syn->trigger);
        const char *turn = strstr(o2 + (k > back ? k - back : 0), syn->trigger);
        if (!turn) turn = o2 + l2;
        size_t tl = (size_t)(o2 + l2 - turn);
        chat_tool_call got[8] = {{0}};
        int n = 0;
        size_t content = 0;
        /* the turn ends where the template closes it: parse up to the last closer / args end */
        const char *last = NULL;
        if (syn->closer[0] && syn->kind == CHAT_CALLS_JSON_ARRAY) { /* one block: up to its closer (Command R+
                                                                     * writes its instructions after the turn) */
            size_t ol = strlen(syn->opener);
            const char *p = strstr(strncmp(turn, syn->opener, ol) ? turn : turn + ol, syn->closer);
            last = p ? p + strlen(syn->closer) : NULL;
        } else if (syn->closer[0])
            for (const char *p = turn; (p = strstr(p, syn->closer)); p++) last = p + strlen(syn->closer);
        else { /* NAME_ARGS: up to the end of the last JSON object */
            const char *p = strrchr(turn, '}');
            last = p ? p + 1 : NULL;
        }
        size_t used = last ? (size_t)(last - turn) : tl;
        int rc = chat_tool_split(syn, turn, used, tools, &content, got, 8, &n);
        EXPECT_MSG(rc == 0 && n == 2, "%s: split rc %d, %d calls of \"%.*s\"", file, rc, n, (int)used, turn);
        for (int i = 0; i < n && i < 2; i++) {
            const cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, i), "function");
            char *want = cJSON_PrintUnformatted(cJSON_GetObjectItem(f, "arguments"));
            EXPECT_STR_EQ(got[i].name, cJSON_GetObjectItem(f, "name")->valuestring);
            EXPECT_MSG(json_equal_text(got[i].arguments, want), "%s: call %d arguments %s, wrote %s", file, i,
                       got[i].arguments, want);
            free(want);
        }
        chat_tool_calls_free(got, n);
    }
    free(o1);
    free(o2);
    cJSON_Delete(c1);
    cJSON_Delete(c2);
    cJSON_Delete(m1);
    cJSON_Delete(m2);
}

TEST(chat_fam, tool_calls_roundtrip) {
    cJSON *spec = read_json(CHAT_DATA "/conversations_families.json");
    const cJSON *tools = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "conversations"), 0), "tools");
    int n_checked = 0;
    for (size_t i = 0; i < N_TEMPLATES; i++) {
        if (TEMPLATES[i].family == CHAT_FAMILY_SMOLLM3) continue; /* renders no assistant calls */
        if (TEMPLATES[i].family == CHAT_FAMILY_UNKNOWN) continue; /* rendering only: Apertus, Seed-OSS */
        const chat_tool_syntax *syn = chat_tool_syntax_for(TEMPLATES[i].family);
        char *path = template_path(i);
        size_t len;
        char *src = path ? read_file(path, &len) : NULL;
        free(path);
        if (!src) continue; /* ../shared absent: Command R7B */
        chat_template *t = NULL;
        char err[512];
        if (chat_template_parse(src, len, &t, err, sizeof err)) test_fail(__FILE__, __LINE__, "%s: %s", TEMPLATES[i].file, err);
        free(src);
        if (!t) continue;
        if (!syn) {
            test_fail(__FILE__, __LINE__, "%s: no tool-call syntax for family %s", TEMPLATES[i].file,
                      chat_family_name(TEMPLATES[i].family));
        } else {
            roundtrip(TEMPLATES[i].file, t, syn, tools);
            n_checked++;
        }
        chat_template_free(t);
    }
    EXPECT(n_checked >= 12);
    cJSON_Delete(spec);
}

/* Model-written blocks of every syntax, the odd corners, and what is refused. */
TEST(chat_fam, tool_call_parsers) {
    cJSON *tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                               "\"properties\":{\"code\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"},"
                               "\"ok\":{\"type\":\"boolean\"}}}}}]");
    static const struct {
        chat_family fam;
        const char *text;
        int n_calls;       /* -1: refused */
        const char *name0, *args0, *content;
    } cases[] = {
        {CHAT_FAMILY_HERMES, "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n"
                             "{\"name\": \"g\", \"arguments\": \"{\\\"b\\\": [2]}\"}\n</tool_call>", 2, "f", "{\"a\":1}", "Sure.\n"},
        {CHAT_FAMILY_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>", -1, NULL, NULL, ""},
        {CHAT_FAMILY_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", -1, NULL, NULL, ""},
        {CHAT_FAMILY_EXAONE4, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": \"y\"}}</tool_call>", 1, "f",
         "{\"x\":\"y\"}", ""},
        {CHAT_FAMILY_NEMOTRON, "<TOOLCALL>[{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": {\"k\": "
                               "null}}]</TOOLCALL>", 2, "f", "{}", ""},
        {CHAT_FAMILY_NEMOTRON, "<TOOLCALL>[]</TOOLCALL>", -1, NULL, NULL, ""},
        {CHAT_FAMILY_COMMAND_R, "Let me look.\nAction:\n```json\n[\n    {\n        \"tool_name\": \"f\",\n        "
                                "\"parameters\": {\"n\": 2}\n    }\n]```\n", 1, "f", "{\"n\":2}", "Let me look.\n"},
        {CHAT_FAMILY_COMMAND_R, "Action:\n```json\n[{\"tool_name\": \"f\", \"parameters\": {}}]", -1, NULL, NULL, ""},
        {CHAT_FAMILY_COMMAND_R7B, "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": "
                                  "{\"q\": \"x\"}}\n]<|END_ACTION|>", 1, "f", "{\"q\":\"x\"}", ""},
        {CHAT_FAMILY_MISTRAL3, "[TOOL_CALLS]f[ARGS]{\"a\": {\"b\": [1, 2]}}[TOOL_CALLS]g[CALL_ID]abc123XYZ[ARGS]{}", 2, "f",
         "{\"a\":{\"b\":[1,2]}}", ""},
        {CHAT_FAMILY_MISTRAL3, "[TOOL_CALLS]f{\"a\": 1}", -1, NULL, NULL, ""},
        {CHAT_FAMILY_MISTRAL3, "[TOOL_CALLS]f[ARGS]{\"a\": 1} trailing", -1, NULL, NULL, ""},
        {CHAT_FAMILY_GEMMA4, "<|tool_call>call:f{city:<|\"|>São Paulo, BR<|\"|>,days:3,hot:true,tags:[<|\"|>a<|\"|>,"
                             "<|\"|>b<|\"|>],where:{lat:-23.5,name:<|\"|>x{}<|\"|>}}<tool_call|>", 1, "f",
         "{\"city\":\"São Paulo, BR\",\"days\":3,\"hot\":true,\"tags\":[\"a\",\"b\"],\"where\":{\"lat\":-23.5,\"name\":\"x{}\"}}",
         ""},
        {CHAT_FAMILY_GEMMA4, "<|tool_call>call:f{}<tool_call|><|tool_call>call:g{n:<|\"|>1<|\"|>}<tool_call|>", 2, "f", "{}",
         ""},
        {CHAT_FAMILY_GEMMA4, "<|tool_call>call:f{a:<|\"|>open}<tool_call|>", -1, NULL, NULL, ""},
        {CHAT_FAMILY_GLM45, "ok\n<tool_call>f\n<arg_key>code</arg_key>\n<arg_value>123</arg_value>\n<arg_key>n</arg_key>\n"
                            "<arg_value>7</arg_value>\n<arg_key>ok</arg_key><arg_value>true</arg_value>\n</tool_call>", 1, "f",
         "{\"code\":\"123\",\"n\":7,\"ok\":true}", "ok\n"},
        {CHAT_FAMILY_GLM45, "<tool_call>f<arg_key>a</arg_key>x</tool_call>", -1, NULL, NULL, ""},
        {CHAT_FAMILY_GLM45, "<tool_call>g<arg_key>code</arg_key><arg_value>123</arg_value></tool_call>", 1, "g",
         "{\"code\":123}", ""}, /* no schema for g: JSON text is read as JSON */
        {CHAT_FAMILY_QWEN3_CODER, "<tool_call>\n<function=f>\n<parameter=code>\nline 1\nline 2\n</parameter>\n<parameter=ok>\n"
                                  "True\n</parameter>\n</function>\n</tool_call>", 1, "f",
         "{\"code\":\"line 1\\nline 2\",\"ok\":true}", ""},
        {CHAT_FAMILY_QWEN3_CODER, "<tool_call>\n<function=f>\n<parameter=code>x</function>\n</tool_call>", -1, NULL, NULL, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const chat_tool_syntax *syn = chat_tool_syntax_for(cases[i].fam);
        chat_tool_call calls[8] = {{0}};
        int n = 0;
        size_t content = 0;
        int rc = chat_tool_split(syn, cases[i].text, strlen(cases[i].text), tools, &content, calls, 8, &n);
        if (cases[i].n_calls < 0) {
            EXPECT_MSG(rc < 0, "case %zu (%s): accepted \"%s\"", i, chat_family_name(cases[i].fam), cases[i].text);
        } else {
            EXPECT_MSG(rc == 0 && n == cases[i].n_calls, "case %zu (%s): rc %d, %d calls", i,
                       chat_family_name(cases[i].fam), rc, n);
            if (n > 0) {
                EXPECT_STR_EQ(calls[0].name, cases[i].name0);
                EXPECT_MSG(json_equal_text(calls[0].arguments, cases[i].args0), "case %zu: arguments %s, expected %s", i,
                           calls[0].arguments, cases[i].args0);
            }
            EXPECT_EQ_I(content, strlen(cases[i].content));
        }
        chat_tool_calls_free(calls, n);
    }
    cJSON_Delete(tools);
}
