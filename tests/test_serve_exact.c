/*
 * test_serve_exact.c — prompt-prefix reuse in the server changes no number:
 * the logprobs of a request whose prompt is served from the KV cache (its
 * prefix evaluated by an earlier request: that prompt as one batch, then
 * the tokens it generated one at a time) are the same bits as those of the
 * same request evaluated cold — docs/serve.md's promise, and what the
 * kernels' batch invariance (tests/test_kern_batch.c) buys.  The model is
 * the synthetic F16 file, whose default (F16-rounded) activations drifted
 * by ~1e-4 between a decoded and a batched token before.
 */
#include "http_client.h"
#include "test.h"

#include <cJSON.h>
#include <stdlib.h>

#define F16_REL "models/synthetic/synth-d256-F16.gguf"

static cJSON *complete(const http_srv *f, const char *prompt, int max_tokens) {
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "prompt", prompt);
    cJSON_AddNumberToObject(req, "max_tokens", max_tokens);
    cJSON_AddNumberToObject(req, "temperature", 0);
    cJSON_AddNumberToObject(req, "logprobs", 3);
    char *body = cJSON_PrintUnformatted(req);
    long st = 0;
    cJSON *j = http_post_json(f->base, "/v1/completions", body, NULL, &st);
    EXPECT_EQ_I(st, 200);
    free(body);
    cJSON_Delete(req);
    return j;
}

/* choices[0].logprobs as compact JSON (malloc'd; "" when absent) */
static char *logprobs_text(const cJSON *j) {
    const cJSON *lp = json_at(j, "choices.0.logprobs");
    char *s = lp ? cJSON_PrintUnformatted(lp) : NULL;
    return s ? s : strdup("");
}

TEST(serve_exact, cached_logprobs_equal_cold) {
    NEED_SHARED(path, F16_REL);
    http_srv f;
    if (http_srv_start(&f, path, NULL, NULL, (srv_options){.model_name = "synth", .n_ctx = 512, .n_threads = 2,
                                                            .queue_max = 4, .no_webui = 1}))
        return;
    /* request 1 leaves its prompt (a batch) and 8 decoded tokens in the cache */
    cJSON *j = complete(&f, "Once upon a time there was", 8);
    const char *gen = json_str_at(j, "choices.0.text");
    char prompt[1024];
    snprintf(prompt, sizeof prompt, "Once upon a time there was%s and a little dog", gen ? gen : "");
    cJSON_Delete(j);
    /* request 2 extends it: served from the cache */
    j = complete(&f, prompt, 6);
    const double cached = json_num_at(j, "usage.prompt_tokens_details.cached_tokens");
    EXPECT_MSG(cached > 8, "cached_tokens %g: the prefix was not reused", cached);
    char *warm = logprobs_text(j);
    cJSON_Delete(j);
    /* an unrelated prompt takes the cache; then request 2 again, cold */
    cJSON_Delete(complete(&f, "The big red ball", 2));
    j = complete(&f, prompt, 6);
    EXPECT_MSG(json_num_at(j, "usage.prompt_tokens_details.cached_tokens") <= 1, "the second run was not cold");
    char *cold = logprobs_text(j);
    cJSON_Delete(j);
    EXPECT_MSG(strlen(cold) > 40 && !strcmp(warm, cold), "logprobs differ:\n  cached %.600s\n  cold   %.600s", warm,
               cold);
    free(warm);
    free(cold);
    http_srv_stop(&f);
}
