/*
 * test_serve_models.c — `cinfer serve` beyond one model (runtime/server/srv.h):
 * routing on "model" across two loaded models with per-model queues,
 * /v1/models and per-model /health; prompt-prefix KV reuse across requests
 * (usage.prompt_tokens_details.cached_tokens, checked against the token
 * counts and against a cold evaluation); POST /v1/embeddings and the
 * cinfer_embed API (checked against the output projection of the hidden
 * state it returns, and against llama.cpp when peer/ is installed); the
 * embedded web UI page and its CSP; the CLI flags.
 * Models: stories260K (llama, SentencePiece) and the random-weight Qwen3
 * chat model (real tokenizer and template).
 */
#include "formats/gguf.h"
#include "http_client.h"
#include "server/srv.h"
#include "server/srv_embed.h"
#include "test.h"

#include <cJSON.h>
#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define CHAT_REL "models/chat/qwen3-chat.gguf"
#define STORIES_REL "models/stories260K/stories260K.gguf"

/* Serve pa (as name_a) and optionally pb (as "stories"). */
static int fx_start(http_srv *f, const char *pa, const char *name_a, const char *pb, int queue_max, const char *key,
                    int no_webui) {
    return http_srv_start(f, pa, pb, "stories",
                          (srv_options){.api_key = key, .model_name = name_a, .n_ctx = 1024, .n_threads = 1,
                                        .queue_max = queue_max, .no_webui = no_webui});
}

/* Serve the chat model as "chat" and stories260K as "stories", no API key;
 * nonzero (the test skipped or failed) when not started. */
static int fx_start_both(http_srv *f, int queue_max) {
    const char *pa = shared_path(CHAT_REL), *pb = shared_path(STORIES_REL);
    if (!pa || !pb) {
        test_skip("%s/%s absent", shared_root(), pa ? STORIES_REL : CHAT_REL);
        return -1;
    }
    return fx_start(f, pa, "chat", pb, queue_max, NULL, 0);
}

/* Request and parse the JSON answer, no API key (NULL and a test failure when it is not JSON). */
static cJSON *req(const http_srv *f, const char *path, const char *json, long *status) {
    return http_post_json(f->base, path, json, NULL, status);
}

/* The per-model entry of /health. */
static double health_of(const http_srv *f, const char *model, const char *field) {
    long st;
    cJSON *h = req(f, "/health", NULL, &st);
    double v = -1;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(h, "models"))
        if (json_str_at(m, "id") && !strcmp(json_str_at(m, "id"), model)) v = json_num_at(m, field);
    cJSON_Delete(h);
    return v;
}

/* ---- routing ---------------------------------------------------------------------- */

TEST(serve_models, routing) {
    http_srv f;
    if (fx_start_both(&f, 4)) return;
    long st;
    cJSON *j = req(&f, "/v1/models", NULL, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(cJSON_GetArraySize(json_at(j, "data")), 2);
    EXPECT_STR_EQ(json_str_at(j, "data.0.id"), "chat");
    EXPECT_STR_EQ(json_str_at(j, "data.1.id"), "stories");
    EXPECT_EQ_I(json_num_at(j, "data.1.n_embd"), 64);
    cJSON_Delete(j);

    j = req(&f, "/v1/completions", "{\"model\":\"stories\",\"prompt\":\"Once upon a time\",\"max_tokens\":4,\"temperature\":0}",
            &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "model"), "stories");
    EXPECT_EQ_I(json_num_at(j, "usage.completion_tokens"), 4);
    cJSON_Delete(j);
    /* no "model": the first */
    j = req(&f, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "model"), "chat");
    cJSON_Delete(j);
    j = req(&f, "/v1/chat/completions",
            "{\"model\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2}", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "model"), "chat");
    cJSON_Delete(j);

    /* an unknown model: 404 in each API's shape, naming it and the served ones */
    j = req(&f, "/v1/chat/completions", "{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &st);
    EXPECT_EQ_I(st, 404);
    EXPECT_STR_EQ(json_str_at(j, "error.code"), "model_not_found");
    EXPECT_STR_EQ(json_str_at(j, "error.param"), "model");
    const char *msg = json_str_at(j, "error.message");
    EXPECT(msg && strstr(msg, "gpt-9") && strstr(msg, "'stories'") && strstr(msg, "'chat'"));
    cJSON_Delete(j);
    j = req(&f, "/v1/messages", "{\"model\":\"claude\",\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
            &st);
    EXPECT_EQ_I(st, 404);
    EXPECT_STR_EQ(json_str_at(j, "type"), "error");
    EXPECT_STR_EQ(json_str_at(j, "error.type"), "not_found_error");
    EXPECT(json_str_at(j, "error.message") && strstr(json_str_at(j, "error.message"), "claude"));
    cJSON_Delete(j);
    j = req(&f, "/v1/embeddings", "{\"model\":\"nope\",\"input\":\"x\"}", &st);
    EXPECT_EQ_I(st, 404);
    EXPECT_STR_EQ(json_str_at(j, "error.code"), "model_not_found");
    cJSON_Delete(j);

    /* /health: one entry per model, with its own counters */
    j = req(&f, "/health", NULL, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "status"), "ok");
    EXPECT_STR_EQ(json_str_at(j, "model"), "chat");
    EXPECT_EQ_I(cJSON_GetArraySize(json_at(j, "models")), 2);
    EXPECT_STR_EQ(json_str_at(j, "models.1.id"), "stories");
    EXPECT_EQ_I(json_num_at(j, "models.0.requests"), 2);
    EXPECT_EQ_I(json_num_at(j, "models.1.requests"), 1);
    EXPECT_EQ_I(json_num_at(j, "models.1.completion_tokens"), 4);
    EXPECT_EQ_I(json_num_at(j, "models.0.n_ctx"), 1024);
    cJSON_Delete(j);
    http_srv_stop(&f);
}

/* The model at path, or a test failure and NULL. */
static cinfer_model *open_model(const char *path) {
    char err[256];
    cinfer_model *m = NULL;
    if (cinfer_model_open(path, NULL, &m, err, sizeof err)) test_fail(__FILE__, __LINE__, "open %s: %s", path, err);
    return m;
}

/* srv_start's own checks. */
TEST(serve_models, start_errors) {
    NEED_SHARED(pb, STORIES_REL);
    char err[256];
    cinfer_model *m = open_model(pb);
    if (!m) return;
    srv *s = NULL;
    EXPECT_EQ_I(srv_start(NULL, &(srv_options){.port = 0}, &s, err, sizeof err), CINFER_EARG);
    EXPECT(strstr(err, "no model"));
    srv_model two[2] = {{"a", m}, {"a", m}};
    EXPECT_EQ_I(srv_start(NULL, &(srv_options){.port = 0, .models = two, .n_models = 2}, &s, err, sizeof err),
                CINFER_EARG);
    EXPECT(strstr(err, "'a'") && strstr(err, "unique"));
    EXPECT_EQ_I(srv_start(m, &(srv_options){.port = 0, .model_name = "a", .models = two, .n_models = 1}, &s, err,
                          sizeof err),
                CINFER_EARG);
    srv_model empty = {"", m};
    EXPECT_EQ_I(srv_start(NULL, &(srv_options){.port = 0, .models = &empty, .n_models = 1}, &s, err, sizeof err),
                CINFER_EARG);
    EXPECT(s == NULL);
    /* the same model file under two names: two workers, both answer */
    srv_model pair[2] = {{"x", m}, {"y", m}};
    if (srv_start(NULL, &(srv_options){.port = 0, .models = pair, .n_models = 2, .n_ctx = 256, .n_threads = 1}, &s,
                  err, sizeof err) == 0) {
        http_srv f = {.s = s};
        snprintf(f.base, sizeof f.base, "http://127.0.0.1:%d", srv_port(s));
        long st;
        cJSON *j = req(&f, "/v1/completions", "{\"model\":\"y\",\"prompt\":\"Hi\",\"max_tokens\":1}", &st);
        EXPECT_EQ_I(st, 200);
        EXPECT_STR_EQ(json_str_at(j, "model"), "y");
        cJSON_Delete(j);
        srv_stop(s);
    } else {
        test_fail(__FILE__, __LINE__, "srv_start: %s", err);
    }
    cinfer_model_close(m);
}

/* Each model has its own worker and bounded queue: one model's full queue
 * answers 429 while the other model still serves. */
TEST(serve_models, queue_per_model) {
    http_srv f;
    if (fx_start_both(&f, 1)) return;
    /* a long story streamed to a client that blocks after the first bytes */
    http_async a = {.base = f.base,
                    .path = "/v1/chat/completions",
                    .json =
                        "{\"model\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a long story\"}],"
                        "\"max_tokens\":2000,\"temperature\":0,\"stream\":true}",
                    .holds = 1};
    atomic_store(&a.hold, 1);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, http_async_run, &a);
    for (int i = 0; i < 10000 && !atomic_load(&a.got); i++) usleep(1000);
    EXPECT(atomic_load(&a.got));
    static const char HI[] =
        "{\"model\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":1}";
    http_async b = {.base = f.base, .path = "/v1/chat/completions", .json = HI};
    pthread_create(&tb, NULL, http_async_run, &b);
    int queued = 0;
    for (int i = 0; i < 10000 && queued < 1; i++) {
        queued = (int)health_of(&f, "chat", "queued");
        if (queued < 1) usleep(1000);
    }
    EXPECT_EQ_I(queued, 1);
    EXPECT_EQ_I(health_of(&f, "chat", "busy"), 1);
    EXPECT_EQ_I(health_of(&f, "stories", "busy"), 0);
    /* chat's queue is full */
    http_body r = {0};
    http_meta meta;
    EXPECT_EQ_I(http_request(f.base, "/v1/chat/completions", HI, NULL, &r, &meta), 429);
    EXPECT(atoi(meta.retry_after) >= 1);
    free(r.p);
    /* stories is not behind it */
    long st;
    cJSON *j = req(&f, "/v1/completions", "{\"model\":\"stories\",\"prompt\":\"Once\",\"max_tokens\":2}", &st);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);
    j = req(&f, "/v1/embeddings", "{\"model\":\"stories\",\"input\":\"Once\"}", &st);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);
    atomic_store(&a.hold, 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    EXPECT_EQ_I(b.status, 200);
    free(a.text);
    free(b.text);
    http_srv_stop(&f);
}

/* ---- prefix reuse -------------------------------------------------------------------- */

static int n_tokens(const cinfer_model *m, const char *text, int32_t *ids, size_t cap) {
    size_t n = 0;
    if (cinfer_tokenize(m, text, strlen(text), 1, 0, ids, cap, &n)) return -1;
    return (int)n;
}

TEST(serve_models, prefix_reuse) {
    NEED_SHARED(pb, STORIES_REL);
    http_srv f;
    if (fx_start(&f, pb, "stories", NULL, 4, NULL, 0)) return;
    const char *p1 = "Once upon a time, there was a little girl";
    const char *p2 = "Once upon a time, there was a little girl named Lily. She liked to play";
    int32_t t1[256], t2[256];
    int n1 = n_tokens(f.m, p1, t1, 256), n2 = n_tokens(f.m, p2, t2, 256), lcp = 0;
    while (lcp < n1 && lcp < n2 && t1[lcp] == t2[lcp]) lcp++;
    EXPECT(lcp > 5 && lcp < n2);
    char body[512];
    long st;
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":4,\"temperature\":0}", p1);
    cJSON *j = req(&f, "/v1/completions", body, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(json_num_at(j, "usage.prompt_tokens"), n1);
    EXPECT_EQ_I(json_num_at(j, "usage.prompt_tokens_details.cached_tokens"), 0);
    cJSON_Delete(j);
    /* the second prompt extends the first: its shared tokens come from the cache */
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":8,\"temperature\":0}", p2);
    j = req(&f, "/v1/completions", body, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(json_num_at(j, "usage.prompt_tokens"), n2);
    double cached = json_num_at(j, "usage.prompt_tokens_details.cached_tokens");
    EXPECT_MSG(cached >= lcp && cached < n2, "cached_tokens %g, expected %d..%d", cached, lcp, n2 - 1);
    char warm[1024];
    snprintf(warm, sizeof warm, "%s", json_str_at(j, "choices.0.text") ? json_str_at(j, "choices.0.text") : "(none)");
    cJSON_Delete(j);
    EXPECT_EQ_I(health_of(&f, "stories", "prompt_tokens_cached"), cached);
    EXPECT_EQ_I(health_of(&f, "stories", "prompt_tokens"), n1 + n2);
    /* an unrelated prompt shares (at most) BOS; then p2 again, nearly cold */
    j = req(&f, "/v1/completions", "{\"prompt\":\"The big red ball\",\"max_tokens\":2,\"temperature\":0}", &st);
    EXPECT(json_num_at(j, "usage.prompt_tokens_details.cached_tokens") <= 1);
    cJSON_Delete(j);
    j = req(&f, "/v1/completions", body, &st);
    EXPECT(json_num_at(j, "usage.prompt_tokens_details.cached_tokens") <= 1);
    /* reuse changes nothing in the result */
    EXPECT_STR_EQ(json_str_at(j, "choices.0.text"), warm);
    cJSON_Delete(j);
    http_srv_stop(&f);
}

/* A chat conversation: turn 2 re-sends turn 1 and its reply; the rendered
 * turn-1 prompt is a prefix of turn 2's, so all of it is cached. */
TEST(serve_models, chat_prefix_reuse) {
    NEED_SHARED(pc, CHAT_REL);
    http_srv f;
    if (fx_start(&f, pc, "chat", NULL, 4, NULL, 0)) return;
    long st;
    cJSON *j = req(&f, "/v1/chat/completions",
                   "{\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
                   "{\"role\":\"user\",\"content\":\"Name a colour.\"}],\"max_tokens\":6,\"temperature\":0}",
                   &st);
    EXPECT_EQ_I(st, 200);
    double p1 = json_num_at(j, "usage.prompt_tokens");
    const char *reply = json_str_at(j, "choices.0.message.content");
    cJSON *turn2 = cJSON_Parse("{\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
                               "{\"role\":\"user\",\"content\":\"Name a colour.\"}],\"max_tokens\":4,\"temperature\":0}");
    cJSON *msgs = cJSON_GetObjectItem(turn2, "messages"), *a = cJSON_CreateObject(), *u = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "role", "assistant");
    cJSON_AddStringToObject(a, "content", reply ? reply : "");
    cJSON_AddStringToObject(u, "role", "user");
    cJSON_AddStringToObject(u, "content", "Another one.");
    cJSON_AddItemToArray(msgs, a);
    cJSON_AddItemToArray(msgs, u);
    char *b2 = cJSON_PrintUnformatted(turn2);
    cJSON_Delete(j);
    j = req(&f, "/v1/chat/completions", b2, &st);
    EXPECT_EQ_I(st, 200);
    double cached = json_num_at(j, "usage.prompt_tokens_details.cached_tokens"),
           p2 = json_num_at(j, "usage.prompt_tokens");
    EXPECT_MSG(cached >= p1 && cached < p2, "turn 2 cached %g of %g tokens; turn 1's prompt was %g", cached, p2, p1);
    cJSON_Delete(j);
    free(b2);
    cJSON_Delete(turn2);
    http_srv_stop(&f);
}

/* ---- embeddings ------------------------------------------------------------------------ */

/* The embedding of data[i] as floats (float or base64 encoding); n set. */
static int get_vec(const cJSON *j, int i, float *out, int cap) {
    char p[64];
    snprintf(p, sizeof p, "data.%d.embedding", i);
    const cJSON *e = json_at(j, p);
    if (cJSON_IsString(e)) {
        size_t l = strlen(e->valuestring);
        unsigned char *raw = malloc(l);
        int nb = EVP_DecodeBlock(raw, (const unsigned char *)e->valuestring, (int)l);
        while (l && e->valuestring[l - 1] == '=') l--, nb--; /* DecodeBlock counts the padding */
        int n = nb / 4;
        for (int k = 0; k < n && k < cap; k++) {
            uint32_t w = (uint32_t)raw[4 * k] | (uint32_t)raw[4 * k + 1] << 8 | (uint32_t)raw[4 * k + 2] << 16 |
                         (uint32_t)raw[4 * k + 3] << 24;
            memcpy(&out[k], &w, 4);
        }
        free(raw);
        return n;
    }
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, e) if (n < cap) out[n++] = (float)x->valuedouble;
    return cJSON_IsArray(e) ? n : -1;
}

static double norm(const float *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

static void expect_embd_error(const http_srv *f, const char *body, long status, const char *param, const char *needle) {
    long st;
    cJSON *j = req(f, "/v1/embeddings", body, &st);
    EXPECT_MSG(st == status, "%s: HTTP %ld, expected %ld", body, st, status);
    if (param) EXPECT_STR_EQ(json_str_at(j, "error.param"), param);
    const char *m = json_str_at(j, "error.message");
    EXPECT_MSG(m && strstr(m, needle), "%s: message '%s' lacks '%s'", body, m ? m : "(none)", needle);
    cJSON_Delete(j);
}

TEST(serve_models, embeddings_http) {
    NEED_SHARED(pb, STORIES_REL);
    http_srv f;
    if (fx_start(&f, pb, "stories", NULL, 4, NULL, 0)) return;
    long st;
    float v[4][64], w[64];
    int32_t ids[64];
    int n_cat = n_tokens(f.m, "a cat sat", ids, 64), n_dog = n_tokens(f.m, "the dog ran far away", ids, 64);
    n_tokens(f.m, "a cat sat", ids, 64);

    cJSON *j = req(&f, "/v1/embeddings", "{\"model\":\"stories\",\"input\":\"a cat sat\"}", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "object"), "list");
    EXPECT_STR_EQ(json_str_at(j, "data.0.object"), "embedding");
    EXPECT_EQ_I(json_num_at(j, "data.0.index"), 0);
    EXPECT_STR_EQ(json_str_at(j, "model"), "stories");
    EXPECT_EQ_I(json_num_at(j, "usage.prompt_tokens"), n_cat);
    EXPECT_EQ_I(json_num_at(j, "usage.total_tokens"), n_cat);
    EXPECT_EQ_I(get_vec(j, 0, v[0], 64), 64);
    EXPECT_NEAR(norm(v[0], 64), 1.0, 1e-5);
    cJSON_Delete(j);

    /* a batch: order kept, equal texts equal vectors, different texts differ */
    j = req(&f, "/v1/embeddings", "{\"input\":[\"a cat sat\",\"the dog ran far away\",\"a cat sat\"]}", &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(cJSON_GetArraySize(json_at(j, "data")), 3);
    for (int i = 0; i < 3; i++) {
        char p[32];
        snprintf(p, sizeof p, "data.%d.index", i);
        EXPECT_EQ_I(json_num_at(j, p), i);
        EXPECT_EQ_I(get_vec(j, i, v[i + 1], 64), 64);
    }
    EXPECT(!memcmp(v[1], v[0], sizeof v[0]));
    EXPECT(!memcmp(v[3], v[0], sizeof v[0]));
    double diff = 0;
    for (int k = 0; k < 64; k++) diff += fabs(v[2][k] - v[1][k]);
    EXPECT_MSG(diff > 1e-3, "different texts, same embedding (L1 distance %g)", diff);
    cJSON_Delete(j);
    j = req(&f, "/v1/embeddings", "{\"input\":[\"the dog ran far away\",\"a cat sat\"]}", &st);
    get_vec(j, 0, w, 64);
    EXPECT(!memcmp(w, v[2], sizeof w));
    get_vec(j, 1, w, 64);
    EXPECT(!memcmp(w, v[0], sizeof w));
    cJSON_Delete(j);

    /* token ids, one list and a list of lists, give the text's vector */
    char body[1024];
    int len = snprintf(body, sizeof body, "{\"input\":[");
    for (int i = 0; i < n_cat; i++) len += snprintf(body + len, sizeof body - len, "%s%d", i ? "," : "", ids[i]);
    snprintf(body + len, sizeof body - len, "]}");
    j = req(&f, "/v1/embeddings", body, &st);
    EXPECT_EQ_I(st, 200);
    get_vec(j, 0, w, 64);
    EXPECT(!memcmp(w, v[0], sizeof w));
    cJSON_Delete(j);
    len = snprintf(body, sizeof body, "{\"input\":[[1],[");
    for (int i = 0; i < n_cat; i++) len += snprintf(body + len, sizeof body - len, "%s%d", i ? "," : "", ids[i]);
    snprintf(body + len, sizeof body - len, "]],\"encoding_format\":\"base64\"}");
    j = req(&f, "/v1/embeddings", body, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(cJSON_GetArraySize(json_at(j, "data")), 2);
    EXPECT_EQ_I(json_num_at(j, "usage.prompt_tokens"), 1 + n_cat);
    EXPECT(json_str_at(j, "data.1.embedding") != NULL);
    EXPECT_EQ_I(get_vec(j, 1, w, 64), 64);
    EXPECT(!memcmp(w, v[0], sizeof w));
    cJSON_Delete(j);

    /* last-token pooling differs from mean pooling, and is unit length too */
    j = req(&f, "/v1/embeddings", "{\"input\":\"a cat sat\",\"pooling\":\"last\"}", &st);
    EXPECT_EQ_I(get_vec(j, 0, w, 64), 64);
    EXPECT_NEAR(norm(w, 64), 1.0, 1e-5);
    EXPECT(memcmp(w, v[0], sizeof w) != 0);
    cJSON_Delete(j);

    expect_embd_error(&f, "{}", 400, "input", "'input' is required");
    expect_embd_error(&f, "{\"input\":[]}", 400, "input", "empty");
    expect_embd_error(&f, "{\"input\":7}", 400, "input", "string or an array");
    expect_embd_error(&f, "{\"input\":[1.5]}", 400, "input", "input[0]");
    expect_embd_error(&f, "{\"input\":[\"a\",3]}", 400, "input", "input[1]");
    expect_embd_error(&f, "{\"input\":[1e300]}", 400, "input", "input[0]");
    expect_embd_error(&f, "{\"input\":[[-1]]}", 400, "input[0]", "token id");
    expect_embd_error(&f, "{\"input\":\"x\",\"dimensions\":1e300}", 400, "dimensions", "64");
    expect_embd_error(&f, "{\"input\":[[1,99999]]}", 400, "input[0]", "token id");
    expect_embd_error(&f, "{\"input\":[[]]}", 400, "input[0]", "empty");
    expect_embd_error(&f, "{\"input\":\"x\",\"encoding_format\":\"hex\"}", 400, "encoding_format", "base64");
    expect_embd_error(&f, "{\"input\":\"x\",\"dimensions\":16}", 400, "dimensions", "64");
    expect_embd_error(&f, "{\"input\":\"x\",\"pooling\":\"max\"}", 400, "pooling", "mean");
    /* longer than the context (1024) */
    char *big = malloc(8000);
    int bl = snprintf(big, 8000, "{\"input\":[[");
    for (int i = 0; i < 1100; i++) bl += snprintf(big + bl, 8000 - bl, "%s5", i ? "," : "");
    snprintf(big + bl, 8000 - bl, "]]}");
    expect_embd_error(&f, big, 400, "input[0]", "context");
    free(big);
    EXPECT_EQ_I(health_of(&f, "stories", "embedding_tokens"), 7 * n_cat + 2 * n_dog + 1);
    http_srv_stop(&f);
}

/* Embeddings use their own session: a conversation's cache survives them. */
TEST(serve_models, embeddings_keep_chat_cache) {
    NEED_SHARED(pb, STORIES_REL);
    http_srv f;
    if (fx_start(&f, pb, "stories", NULL, 4, NULL, 0)) return;
    long st;
    cJSON *j = req(&f, "/v1/completions", "{\"prompt\":\"Once upon a time there was a cat\",\"max_tokens\":2}", &st);
    double p1 = json_num_at(j, "usage.prompt_tokens");
    cJSON_Delete(j);
    j = req(&f, "/v1/embeddings", "{\"input\":\"something else entirely\"}", &st);
    EXPECT_EQ_I(st, 200);
    cJSON_Delete(j);
    j = req(&f, "/v1/completions", "{\"prompt\":\"Once upon a time there was a cat who\",\"max_tokens\":2}", &st);
    EXPECT_MSG(json_num_at(j, "usage.prompt_tokens_details.cached_tokens") >= p1 - 1, "cached %g, first prompt %g",
               json_num_at(j, "usage.prompt_tokens_details.cached_tokens"), p1);
    cJSON_Delete(j);
    http_srv_stop(&f);
}

/* cinfer_embed against a direct computation: the hidden state it returns for
 * the last token, projected by output.weight, gives the logits the forward
 * pass computed; the pooled vectors are the mean / first / last rows. */
TEST(serve_models, embed_api) {
    NEED_SHARED(pb, STORIES_REL);
    char err[256];
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    if (cinfer_model_open(pb, NULL, &m, err, sizeof err) ||
        cinfer_session_new(m, &(cinfer_session_options){.n_threads = 1, .activations = CINFER_ACT_F32}, &s, err,
                           sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        cinfer_model_close(m);
        return;
    }
    const int E = cinfer_model_n_embd(m), V = cinfer_model_n_vocab(m);
    EXPECT_EQ_I(E, 64);
    int32_t ids[128];
    int n = n_tokens(m, "Once upon a time, there was a little dog who liked to run in the park.", ids, 128);
    EXPECT(n > 10);
    float *h = malloc((size_t)n * E * sizeof *h), mean[64], last[64], cls[64], raw[64];
    EXPECT_EQ_I(cinfer_embed(s, ids, n, CINFER_POOL_NONE | CINFER_EMBED_RAW, h, n * E, err, sizeof err), 0);
    /* logits = output.weight · h[n-1] (F32 weight, ne = {E, V}) */
    gguf_file *g = NULL;
    EXPECT_EQ_I(gguf_open(pb, &g, err, sizeof err), 0);
    const gguf_tensor *t = g ? gguf_find_tensor(g, "output.weight") : NULL;
    const float *lg = cinfer_logits(s);
    if (t && t->type == 0 && t->ne[0] == E && t->ne[1] == V && lg) {
        const float *W = t->data, *x = h + (size_t)(n - 1) * E;
        double worst = 0, scale = 0;
        for (int v = 0; v < V; v++) {
            double acc = 0;
            for (int k = 0; k < E; k++) acc += (double)W[(size_t)v * E + k] * x[k];
            if (fabs(acc - lg[v]) > worst) worst = fabs(acc - lg[v]);
            if (fabs(acc) > scale) scale = fabs(acc);
        }
        EXPECT_MSG(worst <= 1e-4 * (scale + 1), "logits from the hidden state differ by %g (max |logit| %g)", worst,
                   scale);
    } else {
        test_fail(__FILE__, __LINE__, "stories260K output.weight: expected F32 {%d, %d}", E, V);
    }
    gguf_close(g);
    /* pooled forms */
    EXPECT_EQ_I(cinfer_embed(s, ids, n, CINFER_POOL_MEAN, mean, E, err, sizeof err), 0);
    EXPECT_EQ_I(cinfer_embed(s, ids, n, CINFER_POOL_LAST | CINFER_EMBED_RAW, last, E, err, sizeof err), 0);
    EXPECT_EQ_I(cinfer_embed(s, ids, n, CINFER_POOL_CLS | CINFER_EMBED_RAW, cls, E, err, sizeof err), 0);
    double ss = 0, d_mean = 0, d_last = 0, d_cls = 0;
    float avg[64];
    for (int k = 0; k < E; k++) {
        double a = 0;
        for (int i = 0; i < n; i++) a += h[(size_t)i * E + k];
        avg[k] = (float)(a / n);
        ss += (double)avg[k] * avg[k];
    }
    for (int k = 0; k < E; k++) {
        d_mean = fmax(d_mean, fabs(avg[k] / sqrt(ss) - mean[k]));
        d_last = fmax(d_last, fabs(h[(size_t)(n - 1) * E + k] - last[k]));
        d_cls = fmax(d_cls, fabs(h[k] - cls[k]));
    }
    EXPECT_MSG(d_mean < 1e-6, "mean pooling off by %g", d_mean);
    /* LAST reuses the cached prefix: its last row came from a 1-token batch */
    EXPECT_MSG(d_last < 2e-5, "last pooling off by %g", d_last);
    EXPECT_MSG(d_cls < 1e-6, "cls pooling off by %g", d_cls);
    EXPECT_NEAR(norm(mean, E), 1.0, 1e-6);
    /* causal: the rows of a prefix are the first rows of the whole */
    EXPECT_EQ_I(cinfer_embed(s, ids, 5, CINFER_POOL_NONE | CINFER_EMBED_RAW, raw, E, err, sizeof err),
                CINFER_EARG); /* 5 rows need 5 * E floats */
    float *h5 = malloc((size_t)5 * E * sizeof *h5);
    EXPECT_EQ_I(cinfer_embed(s, ids, 5, CINFER_POOL_NONE | CINFER_EMBED_RAW, h5, 5 * E, err, sizeof err), 0);
    double d5 = 0;
    for (int i = 0; i < 5 * E; i++) d5 = fmax(d5, fabs(h5[i] - h[i]));
    EXPECT_MSG(d5 < 1e-5, "prefix rows differ by %g", d5);
    free(h5);
    /* the history is the embedded tokens: a generation over them reuses them all */
    cinfer_gen_result res;
    EXPECT_EQ_I(cinfer_embed(s, ids, n, CINFER_POOL_MEAN, mean, E, err, sizeof err), 0);
    EXPECT_EQ_I(cinfer_generate_tokens(s, ids, (size_t)n, &(cinfer_gen_options){.max_tokens = 1}, NULL, NULL, &res,
                                       err, sizeof err),
                0);
    EXPECT_EQ_I(res.n_reused, n - 1);
    /* errors, and the session still works after them */
    int32_t bad[2] = {1, V + 5};
    EXPECT_EQ_I(cinfer_embed(s, ids, 0, 0, mean, E, err, sizeof err), CINFER_EARG);
    EXPECT_EQ_I(cinfer_embed(s, ids, n, 7, mean, E, err, sizeof err), CINFER_EARG);
    EXPECT_EQ_I(cinfer_embed(s, ids, n, 0, mean, E - 1, err, sizeof err), CINFER_EARG);
    EXPECT_EQ_I(cinfer_embed(s, bad, 2, 0, mean, E, err, sizeof err), CINFER_EARG);
    EXPECT(strstr(err, "out of range"));
    EXPECT_EQ_I(cinfer_embed(s, ids, n, CINFER_POOL_LAST | CINFER_EMBED_RAW, raw, E, err, sizeof err), 0);
    EXPECT(!memcmp(raw, last, sizeof raw));
    free(h);
    cinfer_session_free(s);
    cinfer_model_close(m);
}

/* ---- web UI ------------------------------------------------------------------------------- */

TEST(serve_models, webui) {
    NEED_SHARED(pb, STORIES_REL);
    http_srv f;
    if (fx_start(&f, pb, "stories", NULL, 4, "k3y", 0)) return;
    http_body r = {0};
    http_meta meta;
    EXPECT_EQ_I(http_request(f.base, "/", NULL, NULL, &r, &meta), 200); /* the page needs no key; its API calls do */
    EXPECT(!strncmp(meta.content_type, "text/html", 9));
    const char *page = r.p ? r.p : "";
    static const char *const ids[] = {"prompt", "send", "messages", "model", "stats", "schema-toggle",
                                      "schema", "stop", "api-key"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "id=\"%s\"", ids[i]);
        EXPECT_MSG(strstr(page, needle), "the page lacks %s", needle);
    }
    /* nothing from elsewhere, and a CSP that allows only this script and style */
    EXPECT(!strstr(page, "http://") && !strstr(page, "https://"));
    EXPECT(strstr(meta.csp, "default-src 'none'") && strstr(meta.csp, "connect-src 'self'"));
    EXPECT(!strstr(meta.csp, "unsafe-inline") && !strstr(meta.csp, "http"));
    const char *tags[2][2] = {{"<script>", "</script>"}, {"<style>", "</style>"}};
    for (int i = 0; i < 2; i++) {
        const char *a = strstr(page, tags[i][0]), *b = a ? strstr(a, tags[i][1]) : NULL;
        EXPECT(a && b);
        if (!a || !b) continue;
        a += strlen(tags[i][0]);
        unsigned char md[32], b64[64];
        unsigned mdn = 0;
        EVP_Digest(a, (size_t)(b - a), md, &mdn, EVP_sha256(), NULL);
        EVP_EncodeBlock(b64, md, 32);
        char want[128];
        snprintf(want, sizeof want, "%s 'sha256-%s'", i ? "style-src" : "script-src", (const char *)b64);
        EXPECT_MSG(strstr(meta.csp, want), "CSP '%s' lacks %s", meta.csp, want);
        EXPECT_MSG(!strstr(b + 1, tags[i][0]), "a second %s element would be blocked by the CSP", tags[i][0]);
    }
    EXPECT(!strstr(page, " onclick=") && !strstr(page, " style=\""));
    free(r.p);
    /* the API behind it still wants the key */
    memset(&r, 0, sizeof r);
    EXPECT_EQ_I(http_request(f.base, "/v1/models", NULL, NULL, &r, NULL), 401);
    free(r.p);
    memset(&r, 0, sizeof r);
    EXPECT_EQ_I(
        http_request(f.base, "/v1/models", NULL, (const char *const[]){"Authorization: Bearer k3y", NULL}, &r, NULL),
        200);
    free(r.p);
    http_srv_stop(&f);
    /* --no-webui */
    if (fx_start(&f, pb, "stories", NULL, 4, NULL, 1)) return;
    memset(&r, 0, sizeof r);
    EXPECT_EQ_I(http_request(f.base, "/", NULL, NULL, &r, NULL), 404);
    free(r.p);
    http_srv_stop(&f);
}

/* ---- CLI ------------------------------------------------------------------------------------ */

TEST(serve_models, cli) {
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s serve --help", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 0);
    EXPECT(out && strstr(out, "--model NAME=PATH") && strstr(out, "/v1/embeddings") && strstr(out, "--no-webui"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve --model =x.gguf", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT(out && strstr(out, "expected NAME=PATH"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve --model a=x.gguf --model a=y.gguf", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT(out && strstr(out, "two models are named 'a'"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve --model m1=/nonexistent/x.gguf --port 0", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 1);
    EXPECT(out && strstr(out, "model 'm1'") && strstr(out, "/nonexistent/x.gguf"));
    free(out);
    /* a .giw's id is its stem too: q3.giw and q3.gguf collide (checked before anything loads) */
    snprintf(cmd, sizeof cmd, "%s serve --model /nonexistent/q3.giw --model /nonexistent/q3.gguf", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    EXPECT(out && strstr(out, "two models are named 'q3'"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve --name a --model b=x.gguf", cinfer_bin());
    EXPECT_EQ_I(run_cmd(cmd, true, &out), 2);
    free(out);
}

/* Parity with llama.cpp: tests/data/arch/stories260K-embeddings.json (make
 * arch-refs) and tests/data/embed/qwen3-chat.json (make embed-refs) hold
 * llama.cpp's raw embeddings of a few texts with each pooling forced (mean,
 * cls, last; qwen3-chat also every token's row, "none"), from
 * tools/ref_embed.c against the peer's libllama, never at test time.  cinfer
 * must tokenize each text to the same ids, and cinfer_embed with
 * CINFER_EMBED_RAW must give the same vectors: max abs difference <= 5e-6
 * of the vector's largest component, and the L2-normalized default within
 * 2e-6 of the normalized reference (measured: 5.2e-7 and 2.7e-7 on
 * stories260K, 1.1e-6 and 3.2e-7 on qwen3-chat). */
static void check_embed_reference(const char *model_rel, const char *ref_path) {
    const char *mp = shared_path(model_rel);
    if (!mp) SKIP("%s/%s absent", shared_root(), model_rel);
    cJSON *ref = read_json(ref_path);
    EXPECT_MSG(ref, "cannot read %s", ref_path);
    if (!ref) return;
    char err[256];
    cinfer_model *m = NULL;
    cinfer_session *s = NULL;
    /* llama.cpp's references hold an F32 KV cache */
    const cinfer_model_options f32kv = {.cache_type_k = CINFER_KV_F32, .cache_type_v = CINFER_KV_F32};
    if (cinfer_model_open(mp, &f32kv, &m, err, sizeof err) ||
        cinfer_session_new(m, &(cinfer_session_options){.n_threads = 1}, &s, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s: %s", model_rel, err);
        cinfer_model_close(m);
        cJSON_Delete(ref);
        return;
    }
    const int n_embd = cinfer_model_n_embd(m);
    EXPECT_EQ_I(json_num_at(ref, "n_embd"), n_embd);
    static const struct { const char *key; int pooling; } pools[] = {
        {"mean", CINFER_POOL_MEAN}, {"cls", CINFER_POOL_CLS}, {"last", CINFER_POOL_LAST}, {"none", CINFER_POOL_NONE}};
    int n_inputs = 0, n_vectors = 0, n_token_rows = 0;
    double worst_rel = 0, worst_norm = 0;
    cJSON *in;
    cJSON_ArrayForEach(in, cJSON_GetObjectItem(ref, "prompts")) {
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(in, "prompt"));
        cJSON *jids = cJSON_GetObjectItem(in, "prompt_ids"), *embs = cJSON_GetObjectItem(in, "embeddings");
        int32_t ids[128], mine[128];
        int n = 0;
        cJSON *e;
        cJSON_ArrayForEach(e, jids) if (n < 128) ids[n++] = e->valueint;
        int nm = text ? n_tokens(m, text, mine, 128) : -1;
        EXPECT_MSG(nm == n && !memcmp(ids, mine, sizeof(int32_t) * (size_t)(n > 0 ? n : 0)),
                   "%s: cinfer tokenizes \"%s\" to %d ids, llama.cpp to %d (or other ids)", model_rel, text, nm, n);
        n_inputs++;
        float *got = malloc(sizeof(float) * (size_t)n * n_embd), *unit = malloc(sizeof(float) * (size_t)n * n_embd);
        for (size_t k = 0; k < sizeof pools / sizeof pools[0]; k++) {
            const int rows = pools[k].pooling == CINFER_POOL_NONE ? n : 1, cap = rows * n_embd;
            EXPECT_EQ_I(cinfer_embed(s, ids, n, pools[k].pooling | CINFER_EMBED_RAW, got, cap, err, sizeof err), 0);
            EXPECT_EQ_I(cinfer_embed(s, ids, n, pools[k].pooling, unit, cap, err, sizeof err), 0);
            cJSON *want = cJSON_GetObjectItem(embs, pools[k].key);
            EXPECT_MSG(want || pools[k].pooling == CINFER_POOL_NONE, "%s: no \"%s\" embedding", ref_path, pools[k].key);
            if (!want) continue;
            for (int r = 0; r < rows; r++) {
                cJSON *row = rows > 1 ? cJSON_GetArrayItem(want, r) : want;
                EXPECT_MSG(cJSON_GetArraySize(row) == n_embd, "%s %s: reference row %d has %d floats", model_rel,
                           pools[k].key, r, cJSON_GetArraySize(row));
                if (cJSON_GetArraySize(row) != n_embd) continue;
                double big = 0, diff = 0, ss = 0, ndiff = 0;
                int c = 0;
                cJSON_ArrayForEach(e, row) {
                    big = fmax(big, fabs(e->valuedouble));
                    diff = fmax(diff, fabs(e->valuedouble - got[r * n_embd + c]));
                    ss += e->valuedouble * e->valuedouble;
                    c++;
                }
                c = 0;
                cJSON_ArrayForEach(e, row) ndiff = fmax(ndiff, fabs(e->valuedouble / sqrt(ss) - unit[r * n_embd + c++]));
                const double rel = diff / (big + 1e-30);
                worst_rel = fmax(worst_rel, rel);
                worst_norm = fmax(worst_norm, ndiff);
                EXPECT_MSG(rel <= 5e-6 && ndiff <= 2e-6, "%s \"%s\" %s row %d: max diff %.3g (%.3g of the largest "
                           "component %.3g), normalized %.3g", model_rel, text, pools[k].key, r, diff, rel, big, ndiff);
                n_vectors++;
                n_token_rows += pools[k].pooling == CINFER_POOL_NONE;
            }
        }
        free(got);
        free(unit);
    }
    printf("    %s: %d texts, %d vectors (mean, cls, last; %d token rows): worst max diff %.3g of the largest "
           "component, normalized %.3g\n", model_rel, n_inputs, n_vectors, n_token_rows, worst_rel, worst_norm);
    EXPECT_MSG(n_inputs >= 3, "%s: %d inputs", ref_path, n_inputs);
    cinfer_session_free(s);
    cinfer_model_close(m);
    cJSON_Delete(ref);
}

TEST(serve_models, embed_peer_parity) {
    check_embed_reference(STORIES_REL, "tests/data/arch/stories260K-embeddings.json");
    check_embed_reference(CHAT_REL, "tests/data/embed/qwen3-chat.json");
}

/* srv_embed_parse on 3000 random request bodies: every one is accepted with
 * sane counts or refused with 400 and a one-line message; never a crash. */
static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng_state >> 33) % n;
}
static cJSON *rand_value(int depth) {
    static const double nums[] = {0, 1, 5, 63, 64, 511, 512, -1, 1.5, 1e300, -1e300, 1e15, 4294967296.0};
    static const char *const strs[] = {"", "a", "Once upon a time", "float", "base64", "mean", "last", "cls",
                                       "<s>", "\xf0\x9f\x98\x80 emoji"};
    switch (depth > 2 ? rnd(4) : rnd(7)) {
    case 0: return cJSON_CreateNumber(nums[rnd(sizeof nums / sizeof nums[0])]);
    case 1: return cJSON_CreateString(strs[rnd(sizeof strs / sizeof strs[0])]);
    case 2: return rnd(2) ? cJSON_CreateNull() : cJSON_CreateBool(rnd(2));
    case 3: return cJSON_CreateNumber(rnd(600));
    case 4:
    case 5: {
        cJSON *a = cJSON_CreateArray();
        for (unsigned i = 0, n = rnd(5); i < n; i++) cJSON_AddItemToArray(a, rand_value(depth + 1));
        return a;
    }
    default: {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "x", rand_value(depth + 1));
        return o;
    }
    }
}

TEST(serve_models, embed_parse_random) {
    NEED_SHARED(pb, STORIES_REL);
    cinfer_model *m = open_model(pb);
    if (!m) return;
    static const char *const keys[] = {"input", "encoding_format", "dimensions", "pooling", "model", "user"};
    int accepted = 0, refused = 0;
    for (int it = 0; it < 3000 && !test_failed(); it++) {
        cJSON *r = rnd(20) ? cJSON_CreateObject() : rand_value(0);
        for (unsigned k = 0; cJSON_IsObject(r) && k < sizeof keys / sizeof keys[0]; k++)
            if (k == 0 ? rnd(8) != 0 : rnd(4) == 0) {
                cJSON *v = rand_value(k == 0 ? 0 : 2);
                if (k == 0 && rnd(2) == 0) { /* often a plausible input: strings or token lists */
                    cJSON_Delete(v);
                    v = rnd(2) ? cJSON_CreateString("Once upon a time") : cJSON_CreateArray();
                    for (unsigned i = 0, n = cJSON_IsArray(v) ? 1 + rnd(4) : 0; i < n; i++)
                        cJSON_AddItemToArray(v, cJSON_CreateNumber(rnd(600)));
                }
                cJSON_AddItemToObject(r, keys[k], v);
            }
        unsigned status = 0;
        char param[96], msg[400];
        srv_embed *e = srv_embed_parse(m, 64, r, &status, param, sizeof param, msg, sizeof msg);
        if (e) {
            accepted++;
            EXPECT(srv_embed_n_tokens(e) >= 1);
            srv_embed_free(e);
        } else {
            refused++;
            char *t = cJSON_PrintUnformatted(r);
            EXPECT_MSG(status == 400 && msg[0] && !strchr(msg, '\n'), "%s: status %u, message '%s'", t, status, msg);
            free(t);
        }
        cJSON_Delete(r);
    }
    EXPECT_MSG(accepted > 50 && refused > 50, "%d accepted, %d refused: the generator misses a side", accepted, refused);
    cinfer_model_close(m);
}
