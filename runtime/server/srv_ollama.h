/*
 * srv_ollama.h — the Ollama API (github.com/ollama/ollama docs/api.md) over
 * `cinfer serve`'s models: request conversion and response shapes; srv.c
 * routes, queues and streams.  Internal to the server.
 *
 *   GET  /api/version     {"version"}
 *   GET  /api/tags        {"models":[{name, model, modified_at, size, digest, details}]}
 *   GET  /api/ps          the same plus expires_at, size_vram, context_length (every
 *                         model is loaded at start, so all of them are "running")
 *   POST /api/show        {license, modelfile, parameters, template, details, model_info,
 *                         capabilities, modified_at}
 *   POST /api/chat        messages (tool_calls, tool_name, thinking), tools, format, options,
 *                         think, stream (default true: NDJSON lines, the last with done:true
 *                         and the timings), logprobs/top_logprobs
 *   POST /api/generate    prompt, system, raw, context, format, options, think, stream
 *   POST /api/embed       input (string or strings), dimensions, truncate
 *   POST /api/embeddings  the older {prompt} -> {"embedding"}
 * Errors are {"error":"..."} with the HTTP status (in a stream: an {"error"} line).
 *
 * A chat or generate request becomes the equivalent OpenAI chat (or, for a
 * raw generate, completions) request, which srv.c validates and runs like any
 * other; options map to the same sampling fields.  Names: a model served as
 * "qwen3" is listed as "qwen3:latest" and found by either name.
 */
#ifndef CINFER_SRV_OLLAMA_H
#define CINFER_SRV_OLLAMA_H

#include <cJSON.h>
#include <stdint.h>

#include "cinfer.h"
#include "srv_impl.h"

enum { SRVO_CHAT = 1, SRVO_GENERATE = 2, SRVO_EMBED = 3, SRVO_EMBEDDINGS = 4 };

/* What a converted request carries besides the OpenAI-shaped body. */
typedef struct {
    int route;          /* SRVO_* */
    int stream;         /* "stream" (Ollama's default: true) */
    int think;          /* -1 absent, 0 false, 1 true (or "low"/"medium"/"high") */
    int load_only;      /* nothing to generate (empty prompt or messages): answer done_reason "load"
                         * ("unload" with keep_alive 0) without running the model */
    int unload;
    int32_t *context;   /* generate: "context" ids of an earlier answer to continue (malloc'd) */
    int n_context;
    int legacy_embed;   /* /api/embeddings: one vector as {"embedding"} */
} srvo_req;

/* The served name of an Ollama model name: "qwen3:latest" -> "qwen3" into
 * buf (a name with another tag is kept whole). */
const char *srvo_model_name(const char *name, char *buf, size_t cap);

/* The OpenAI-shaped request for Ollama request r on route (SRVO_*): chat
 * completions for chat and templated generate, completions for raw generate,
 * embeddings for embed.  n_vocab bounds context ids.  NULL with b filled (a
 * 400 naming the field) when r is not a valid request; free q->context with
 * srvo_req_free. */
cJSON *srvo_request(int route, const cJSON *r, int n_vocab, srvo_req *q, bad_req *b);
void srvo_req_free(srvo_req *q);

/* "2024-08-04T19:22:45.499127Z" (UTC, now). */
void srvo_timestamp(char *buf, size_t cap);

/* One streamed line's object: chat {"model","created_at","message":{"role":
 * "assistant","content","thinking"?},"done":false}, generate {"model",
 * "created_at","response","thinking"?,"done":false}.  thinking may be NULL. */
cJSON *srvo_chunk(int route, const char *model, const char *content, size_t content_len, const char *thinking,
                  size_t thinking_len);

/* Counts and timings of the final object. */
typedef struct {
    const char *done_reason; /* "stop", "length", "load", "unload" */
    int n_prompt, n_generated;
    double prompt_ms, gen_ms, total_ms;
} srvo_stats;
/* Add done:true, done_reason, total_duration, load_duration, prompt_eval_count,
 * prompt_eval_duration, eval_count, eval_duration (nanoseconds) to o. */
void srvo_final_fields(cJSON *o, const srvo_stats *st);

/* Tool calls as Ollama writes them: [{"function":{"name","arguments":{...}}}]
 * (arguments that do not parse as an object, e.g. a call cut by num_predict,
 * become {}). */
cJSON *srvo_tool_calls(const srvx *x);
/* Logprob entries [from, to) of x as [{"token","logprob","top_logprobs"?}]. */
cJSON *srvo_logprobs(const srvx *x, int from, int to);

/* A model's entry in /api/tags (ps: 1 adds expires_at, size_vram, context_length). */
cJSON *srvo_model_entry(const char *name, const cinfer_model *m, int n_ctx, int ps);
/* /api/show of model m served as name. */
cJSON *srvo_show(const char *name, const cinfer_model *m, int n_ctx);
/* An /api/embed (or /api/embeddings when legacy) body from the OpenAI
 * embeddings body openai (taken). */
cJSON *srvo_embed_body(cJSON *openai, const char *name, int legacy, double total_ms);

#endif
