/*
 * test_gram_serve.c — every schema of the JSONSchemaBench sample as a
 * response_format through cinfer serve (in process, on the random-weight
 * Qwen3 chat model): the server answers each request with 200 (the schema
 * compiled and generation ran) or a 4xx naming why it refused the schema —
 * never a 5xx, never a dropped connection — and is still healthy at the
 * end.  make test sends every 40th schema (CINFER_GRAM_SERVE_STRIDE); `make
 * test-grammar-full` every one.
 */
#include <cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "http_client.h"
#include "test.h"

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

TEST(gram_diff, serve_every_schema) {
    NEED_SHARED(mp, "models/chat/qwen3-chat.gguf");
    char path[1024];
    snprintf(path, sizeof path, "%s", mp);
    NEED_SHARED(dir0, "jsonschemabench/data");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", dir0);
    const char *st = getenv("CINFER_GRAM_SERVE_STRIDE");
    int stride = st && atoi(st) > 0 ? atoi(st) : 40;
    http_srv f;
    if (http_srv_start(&f, path, NULL, NULL,
                       (srv_options){.model_name = "qwen3-chat", .n_ctx = 1024, .n_threads = 1, .max_body_bytes = 8 << 20}))
        return;
    DIR *d = opendir(dir);
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strstr(e->d_name, ".json")) continue;
        if (n == cap) names = realloc(names, (size_t)(cap = cap ? cap * 2 : 256) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    int sent = 0, ok = 0, refused = 0, bad = 0;
    for (int i = 0; i < n; i += stride) {
        char p[2048];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        cJSON *doc = read_json(p);
        cJSON *schema = doc ? cJSON_DetachItemFromObject(doc, "schema") : NULL;
        cJSON_Delete(doc);
        if (!schema) continue;
        cJSON *req = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(req, "messages"), *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", "Answer in JSON.");
        cJSON_AddItemToArray(msgs, m);
        cJSON_AddNumberToObject(req, "max_tokens", 8);
        cJSON *rf = cJSON_AddObjectToObject(req, "response_format"), *js;
        cJSON_AddStringToObject(rf, "type", "json_schema");
        js = cJSON_AddObjectToObject(rf, "json_schema");
        cJSON_AddStringToObject(js, "name", "t");
        cJSON_AddItemToObject(js, "schema", schema);
        char *body = cJSON_PrintUnformatted(req);
        cJSON_Delete(req);
        http_body b = {0};
        long status = body ? http_request(f.base, "/v1/chat/completions", body, NULL, &b, NULL) : 0;
        sent++;
        if (status == 200) ok++;
        else if (status >= 400 && status < 500) refused++;
        else {
            if (bad++ < 10)
                test_fail(__FILE__, __LINE__, "%s: status %ld (expected 200 or a 4xx): %.300s", names[i], status, b.p ? b.p : "");
        }
        free(b.p);
        free(body);
    }
    http_body h = {0};
    EXPECT_EQ_I(http_request(f.base, "/health", NULL, NULL, &h, NULL), 200);
    free(h.p);
    printf("    %d schemas as response_format: 200 for %d, 4xx for %d, other %d\n", sent, ok, refused, bad);
    EXPECT_EQ_I(bad, 0);
    EXPECT(sent > 0 && ok > 0);
    http_srv_stop(&f);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Through the server: a value the last allowed token completes is finish
 * "stop" (not "length"), and an object schema without additionalProperties
 * generates only its declared keys (the new-user trial's findings 1 and 3). */
TEST(gram_serve, complete_on_token_limit_and_closed_objects) {
    NEED_SHARED(sp, "models/stories260K/stories260K.gguf");
    char spath[1024];
    snprintf(spath, sizeof spath, "%s", sp);
    NEED_SHARED(cp, "models/chat/qwen3-chat.gguf");
    char cpath[1024];
    snprintf(cpath, sizeof cpath, "%s", cp);
    http_srv f;
    if (http_srv_start(&f, spath, cpath, "chat", (srv_options){.model_name = "stories", .n_ctx = 512, .n_threads = 1}))
        return;
    char body[2048];
    long st;
    /* the enum's value takes n tokens: max_tokens n is "stop", n - 1 "length" */
    const char *fmt = "{\"model\":\"stories\",\"prompt\":\"hi\",\"max_tokens\":%d,\"temperature\":0,"
                      "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"r\",\"schema\":"
                      "{\"enum\":[\"yes\",\"no\"]}}}}";
    snprintf(body, sizeof body, fmt, 32);
    cJSON *j = http_post_json(f.base, "/v1/completions", body, NULL, &st);
    EXPECT_EQ_I(st, 200);
    const char *fr = json_str_at(j, "choices.0.finish_reason"), *t = json_str_at(j, "choices.0.text");
    EXPECT_MSG(fr && !strcmp(fr, "stop"), "finish_reason %s", fr ? fr : "(none)");
    const cJSON *ct = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "completion_tokens");
    int n = cJSON_IsNumber(ct) ? ct->valueint : 0;
    char text[64] = "";
    snprintf(text, sizeof text, "%s", t ? t : "");
    EXPECT_MSG(!strcmp(text, "\"yes\"") || !strcmp(text, "\"no\""), "%s", text);
    cJSON_Delete(j);
    EXPECT(n >= 2);
    for (int lim = n; lim >= n - 1 && n >= 2; lim--) {
        snprintf(body, sizeof body, fmt, lim);
        j = http_post_json(f.base, "/v1/completions", body, NULL, &st);
        EXPECT_EQ_I(st, 200);
        fr = json_str_at(j, "choices.0.finish_reason");
        t = json_str_at(j, "choices.0.text");
        EXPECT_MSG(fr && !strcmp(fr, lim == n ? "stop" : "length"), "max_tokens %d (value takes %d): finish_reason %s",
                   lim, n, fr ? fr : "(none)");
        if (lim == n) EXPECT_STR_EQ(t, text);
        cJSON_Delete(j);
    }
    /* Ollama: the same on num_predict */
    snprintf(body, sizeof body,
             "{\"model\":\"stories\",\"prompt\":\"hi\",\"stream\":false,\"raw\":true,\"options\":{\"num_predict\":%d,"
             "\"temperature\":0},\"format\":{\"enum\":[\"yes\",\"no\"]}}",
             n);
    j = http_post_json(f.base, "/api/generate", body, NULL, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "done_reason"), "stop");
    EXPECT_STR_EQ(json_str_at(j, "response"), text);
    cJSON_Delete(j);
    /* the trial's schema on the random-weight chat model: {"a":true} or {"a":false}, nothing else */
    j = http_post_json(f.base, "/api/generate",
                       "{\"model\":\"chat\",\"prompt\":\"Hi\",\"stream\":false,\"options\":{\"seed\":1},\"format\":"
                       "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"required\":[\"a\"]}}",
                       NULL, &st);
    EXPECT_EQ_I(st, 200);
    const char *r = json_str_at(j, "response");
    EXPECT_MSG(r && (!strcmp(r, "{\"a\":true}") || !strcmp(r, "{\"a\":false}")), "response %s", r ? r : "(none)");
    EXPECT_STR_EQ(json_str_at(j, "done_reason"), "stop");
    cJSON_Delete(j);
    http_srv_stop(&f);
}
