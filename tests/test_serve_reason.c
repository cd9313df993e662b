/*
 * test_serve_reason.c — reasoning models in `cinfer serve`:
 *   - the <think> splitter (runtime/server/srv_reason.h) on replies cut into
 *     pieces every possible way;
 *   - a template that opens <think> itself (as DeepSeek-R1's does): the reply
 *     is OpenAI's reasoning_content (streamed as reasoning_content deltas, with
 *     reasoning_tokens in usage), Anthropic thinking blocks when the request
 *     asks for thinking and nothing at all when it does not, Ollama's thinking;
 *   - chat_template_kwargs and Anthropic's thinking reach the template
 *     (Qwen3's enable_thinking), and malformed ones are 400s;
 *   - max_tokens above the context is clamped, sampling values llama.cpp and
 *     vLLM accept (temperature above 2, top_k -1, top_p 0) are accepted.
 * Models: the random-weight Qwen3 chat model, and a copy of it whose template
 * ends the generation prompt with "<think>\n".
 */
#include "cinfer.h"
#include "gguf_edit.h"
#include "http_client.h"
#include "server/srv_reason.h"
#include "test.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#define CHAT_REL "models/chat/qwen3-chat.gguf"

/* ---- the splitter ---------------------------------------------------------------------------- */

typedef struct {
    char text[2][512]; /* SRV_TEXT_CONTENT, SRV_TEXT_REASONING */
} split;

static void collect(void *user, int kind, const char *t, size_t n) {
    split *s = user;
    strncat(s->text[kind], t, n);
}

/* in fed in pieces of `step` bytes (0: all at once) gives want_r / want_c. */
static void split_case(const char *in, int opened, const char *want_r, const char *want_c) {
    size_t n = strlen(in);
    for (size_t step = 0; step <= n; step++) {
        srv_reason r;
        split s = {{"", ""}};
        srv_reason_init(&r, opened);
        for (size_t i = 0; i < n; i += step ? step : n) srv_reason_feed(&r, in + i, step && i + step < n ? step : n - i, collect, &s);
        srv_reason_flush(&r, collect, &s);
        EXPECT_MSG(!strcmp(s.text[1], want_r) && !strcmp(s.text[0], want_c),
                   "'%s' in pieces of %zu: reasoning '%s' content '%s', expected '%s' / '%s'", in, step, s.text[1],
                   s.text[0], want_r, want_c);
        if (!n) break;
    }
}

TEST(serve_reason, splitter) {
    split_case("<think>\nLet me see.\n</think>\n\nThe answer is 4.", 0, "Let me see.", "The answer is 4.");
    split_case("\n <think>a  b\n\nc</think>x", 0, "a  b\n\nc", "x");
    split_case("Hello <think>not reasoning</think>", 0, "", "Hello <think>not reasoning</think>");
    split_case("  Hi", 0, "", "  Hi");
    split_case("<thinking>", 0, "", "<thinking>");
    split_case("<thi", 0, "", "<thi");
    split_case("", 0, "", "");
    /* the prompt opened the block (DeepSeek-R1, Qwen3 thinking templates) */
    split_case("I think so.</think>\n\nYes.", 1, "I think so.", "Yes.");
    split_case("cut mid-thought </th", 1, "cut mid-thought </th", "");
    split_case("a</thin>b</think>c", 1, "a</thin>b", "c");
    split_case("</think>direct", 1, "", "direct");
    EXPECT(srv_reason_prompt_opens("<|im_start|>assistant\n<think>\n"));
    EXPECT(!srv_reason_prompt_opens("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT(!srv_reason_prompt_opens("<|im_start|>assistant\n"));
}

/* ---- a template that opens <think> ---------------------------------------------------------------- */

static const char THINK_TEMPLATE[] =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}";

static int think_model(http_srv *f) {
    const char *src = shared_path(CHAT_REL);
    if (!src) {
        test_skip("../shared/%s absent", CHAT_REL);
        return -1;
    }
    char dst[600];
    snprintf(dst, sizeof dst, "%s/think.gguf", test_tmpdir());
    const char *keys[] = {"tokenizer.chat_template"}, *vals[] = {THINK_TEMPLATE};
    if (gguf_edit_copy(src, dst, NULL, keys, vals, 1)) return -1;
    return http_srv_start(f, dst, NULL, NULL, (srv_options){.model_name = "think", .n_ctx = 512, .n_threads = 1});
}

static cJSON *post(const http_srv *f, const char *path, const char *json, long *st) {
    return http_post_json(f->base, path, json, NULL, st);
}

TEST(serve_reason, reasoning_fields) {
    http_srv f;
    if (think_model(&f)) return;
    long st;
    /* OpenAI: everything before a </think> that never comes is reasoning */
    cJSON *j = post(&f, "/v1/chat/completions",
                    "{\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"}],\"max_tokens\":6,\"temperature\":0}", &st);
    EXPECT_EQ_I(st, 200);
    const char *rc = json_str_at(j, "choices.0.message.reasoning_content");
    EXPECT_MSG(rc && *rc, "reasoning_content '%s'", rc ? rc : "(absent)");
    EXPECT_STR_EQ(json_str_at(j, "choices.0.message.content"), "");
    EXPECT_EQ_I(json_num_at(j, "usage.completion_tokens_details.reasoning_tokens"),
                json_num_at(j, "usage.completion_tokens"));
    char *want = rc ? strdup(rc) : NULL;
    cJSON_Delete(j);
    /* streamed: the same text as reasoning_content deltas, no content */
    http_body b = {0};
    EXPECT_EQ_I(http_request(f.base, "/v1/chat/completions",
                             "{\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"}],\"max_tokens\":6,\"temperature\":0,"
                             "\"stream\":true}",
                             NULL, &b, NULL),
                200);
    http_sse_event ev[64];
    int n = b.p ? http_sse_parse(b.p, ev, 64) : 0;
    char got[1024] = "", content[256] = "";
    for (int i = 0; i < n; i++) {
        const char *r = json_str_at(ev[i].data, "choices.0.delta.reasoning_content");
        const char *c = json_str_at(ev[i].data, "choices.0.delta.content");
        if (r) strncat(got, r, sizeof got - strlen(got) - 1);
        if (c) strncat(content, c, sizeof content - strlen(content) - 1);
    }
    EXPECT_STR_EQ(got, want ? want : "?");
    EXPECT_STR_EQ(content, "");
    http_sse_free(ev, n);
    free(b.p);

    /* Anthropic: a thinking block when asked, and not a byte of it otherwise */
    static const char MSG[] = "{\"model\":\"think\",\"max_tokens\":6,\"temperature\":0,\"messages\":[{\"role\":\"user\","
                              "\"content\":\"2+2?\"}]%s}";
    char req[512];
    snprintf(req, sizeof req, MSG, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}");
    j = post(&f, "/v1/messages", req, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "content.0.type"), "thinking");
    EXPECT_STR_EQ(json_str_at(j, "content.0.thinking"), want ? want : "?");
    EXPECT_STR_EQ(json_str_at(j, "content.0.signature"), "");
    cJSON_Delete(j);
    snprintf(req, sizeof req, MSG, "");
    j = post(&f, "/v1/messages", req, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(cJSON_GetArraySize(cJSON_GetObjectItem(j, "content")), 1);
    EXPECT_STR_EQ(json_str_at(j, "content.0.type"), "text");
    EXPECT_STR_EQ(json_str_at(j, "content.0.text"), "");
    cJSON_Delete(j);
    /* streamed with thinking: a thinking block (start, thinking_deltas, stop) at index 0 */
    snprintf(req, sizeof req, MSG, ",\"stream\":true,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":1024}");
    b = (http_body){0};
    EXPECT_EQ_I(http_request(f.base, "/v1/messages", req, NULL, &b, NULL), 200);
    n = b.p ? http_sse_parse(b.p, ev, 64) : 0;
    got[0] = 0;
    int starts = 0, stops = 0;
    for (int i = 0; i < n; i++) {
        if (!strcmp(ev[i].name, "content_block_start")) {
            starts++;
            EXPECT_STR_EQ(json_str_at(ev[i].data, "content_block.type"), "thinking");
            EXPECT_EQ_I(json_num_at(ev[i].data, "index"), 0);
        }
        if (!strcmp(ev[i].name, "content_block_stop")) stops++;
        const char *t = json_str_at(ev[i].data, "delta.thinking");
        if (t) strncat(got, t, sizeof got - strlen(got) - 1);
    }
    EXPECT_EQ_I(starts, 1);
    EXPECT_EQ_I(stops, 1);
    EXPECT_STR_EQ(got, want ? want : "?");
    http_sse_free(ev, n);
    free(b.p);

    /* Ollama: message.thinking */
    j = post(&f, "/api/chat",
             "{\"model\":\"think\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"}],"
             "\"options\":{\"num_predict\":6,\"temperature\":0,\"repeat_penalty\":1}}",
             &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "message.thinking"), want ? want : "?");
    EXPECT_STR_EQ(json_str_at(j, "message.content"), "");
    cJSON_Delete(j);
    free(want);
    http_srv_stop(&f);
}

/* ---- template variables, clamping, sampling values ------------------------------------------------- */

TEST(serve_reason, template_kwargs_and_limits) {
    const char *path = shared_path(CHAT_REL);
    if (!path) SKIP("%s/%s absent", shared_root(), CHAT_REL);
    http_srv f;
    if (http_srv_start(&f, path, NULL, NULL, (srv_options){.model_name = "chat", .n_ctx = 96, .n_threads = 1}))
        return;
    long st;
    static const char OAI[] =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":1,\"temperature\":0%s}";
    char req[512];
    snprintf(req, sizeof req, OAI, "");
    cJSON *j = post(&f, "/v1/chat/completions", req, &st);
    double base = json_num_at(j, "usage.prompt_tokens");
    cJSON_Delete(j);
    /* Qwen3's template writes an empty <think></think> block when enable_thinking is false */
    snprintf(req, sizeof req, OAI, ",\"chat_template_kwargs\":{\"enable_thinking\":false}");
    j = post(&f, "/v1/chat/completions", req, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_EQ_I(json_num_at(j, "usage.prompt_tokens"), base + 4);
    cJSON_Delete(j);
    snprintf(req, sizeof req, OAI, ",\"chat_template_kwargs\":\"no\"");
    j = post(&f, "/v1/chat/completions", req, &st);
    EXPECT_EQ_I(st, 400);
    EXPECT_STR_EQ(json_str_at(j, "error.param"), "chat_template_kwargs");
    cJSON_Delete(j);
    /* thousands of keys: refused before the template engine sees them */
    char *many = malloc(300 * 16 + 512), *w = many;
    w += sprintf(w, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"chat_template_kwargs\":{");
    for (int k = 0; k < 300; k++) w += sprintf(w, "%s\"k%d\":%d", k ? "," : "", k, k);
    sprintf(w, "}}");
    j = post(&f, "/v1/chat/completions", many, &st);
    free(many);
    EXPECT_EQ_I(st, 400);
    EXPECT_MSG(j && strstr(json_str_at(j, "error.message"), "at most 256"), "%s", json_str_at(j, "error.message"));
    cJSON_Delete(j);
    /* Anthropic: no thinking asked → enable_thinking false; thinking enabled → true */
    static const char CT[] = "{\"model\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]%s}";
    snprintf(req, sizeof req, CT, "");
    j = post(&f, "/v1/messages/count_tokens", req, &st);
    double off = json_num_at(j, "input_tokens");
    cJSON_Delete(j);
    snprintf(req, sizeof req, CT, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048}");
    j = post(&f, "/v1/messages/count_tokens", req, &st);
    EXPECT_EQ_I(json_num_at(j, "input_tokens"), off - 4);
    cJSON_Delete(j);
    EXPECT_EQ_I(off, base + 4);
    snprintf(req, sizeof req, CT, ",\"thinking\":{\"type\":\"sometimes\"}");
    j = post(&f, "/v1/messages/count_tokens", req, &st);
    EXPECT_EQ_I(st, 400);
    cJSON_Delete(j);

    /* max_tokens past the context: clamped, not an error; the reply stops at the context */
    snprintf(req, sizeof req, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":1000000,"
                              "\"temperature\":0,\"logit_bias\":{\"151645\":-100,\"151643\":-100}}");
    j = post(&f, "/v1/chat/completions", req, &st);
    EXPECT_EQ_I(st, 200);
    EXPECT_STR_EQ(json_str_at(j, "choices.0.finish_reason"), "length");
    double total = json_num_at(j, "usage.total_tokens");
    EXPECT_MSG(total >= 90 && total <= 96, "total_tokens %g with a 96-token context", total);
    cJSON_Delete(j);
    /* values other servers accept: any finite temperature, top_k -1 / 0 (off), top_p 0 */
    const char *ok[] = {",\"temperature\":5", ",\"top_k\":-1", ",\"top_k\":0", ",\"top_p\":0",
                        ",\"temperature\":1e20,\"top_k\":-1"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(req, sizeof req, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2%s}", ok[i]);
        j = post(&f, "/v1/chat/completions", req, &st);
        EXPECT_MSG(st == 200, "%s: status %ld", ok[i], st);
        cJSON_Delete(j);
    }
    http_srv_stop(&f);
}
