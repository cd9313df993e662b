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
