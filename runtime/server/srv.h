/*
 * srv.h — the HTTP server behind `cinfer serve` (issue 8): OpenAI- and
 * Anthropic-compatible endpoints over one loaded model.
 *
 *   GET  /health                      {"status":"ok","model":..,"queued":N,"busy":0|1}
 *   GET  /v1/models                   OpenAI model list
 *   POST /v1/chat/completions         OpenAI chat (stream: SSE chunks, data: [DONE])
 *   POST /v1/completions              OpenAI text completion
 *   POST /v1/messages                 Anthropic Messages (stream: named events)
 *   POST /v1/messages/count_tokens    Anthropic token count
 *   POST /v1/responses                OpenAI Responses, basic form (input, instructions,
 *                                     max_output_tokens, temperature, top_p, stream events)
 *
 * Request features (runtime/server/srv_tools.c): tools and tool_choice on chat and
 * messages (Hermes/Qwen <tool_call> templates; forced calls and arguments
 * are grammar-constrained to the tool's JSON Schema), input tool calls and
 * results, response_format (json_object, json_schema), logprobs with
 * top_logprobs (chat) and logprobs N (completions), frequency_penalty,
 * presence_penalty, logit_bias.  Logprobs are the log-softmax of the logits
 * the sampler received: after the grammar mask, logit_bias and penalties,
 * before temperature and top-k/top-p/min-p (a grammar-forced token: 0).
 *
 * libmicrohttpd runs a thread per connection; one decode worker thread owns
 * the model's single session (so the KV cache of a shared prompt prefix is
 * reused across requests) and takes requests from a bounded FIFO.  A full
 * queue answers 429 with Retry-After.
 *
 * Several models: each gets its own worker, session and queue; requests
 * route on their "model" field (absent: the first model; unknown: 404
 * naming it).  Every model and session is allocated at start.  Also:
 *
 *   GET  /                            the web UI (runtime/server/webui/index.html, embedded)
 *   POST /v1/embeddings               OpenAI embeddings (runtime/server/srv_embed.h)
 *   GET/POST /api/...                 the Ollama API (runtime/server/srv_ollama.h)
 *   POST /v1/systemone                the decision API of the ollama client (srv_decide.h)
 *
 * Reasoning models: <think> text is split from the answer (srv_reason.h)
 * into OpenAI's message.reasoning_content, Anthropic thinking blocks (when
 * the request enables thinking) and Ollama's thinking.  Bad requests get the
 * API's own error shape and a 4xx code naming the field.  A streaming client
 * that goes away stops its generation at the next token.
 */
#ifndef CINFER_SRV_H
#define CINFER_SRV_H

#include <stddef.h>

#include "cinfer.h"

typedef struct srv srv;

/* A model served besides srv_start's m (srv_options.models). */
typedef struct {
    const char *name; /* id in /v1/models and requests; unique, non-empty */
    cinfer_model *m;
} srv_model;

typedef struct {
    const char *host;       /* NULL: "127.0.0.1" (IPv4 or IPv6 literal) */
    int port;               /* 0: an ephemeral port (srv_port tells which) */
    const char *api_key;    /* NULL: no key; else required as Bearer or x-api-key */
    const char *model_name; /* id in /v1/models and requests; NULL: "default" */
    int n_ctx, n_threads;   /* the worker's session (cinfer_session_options) */
    int queue_max;          /* requests waiting behind the running one; 0: 16 */
    size_t max_body_bytes;  /* request bodies above this get 413; 0: 8 MiB */
    const srv_model *models; /* (n_models) more models, served after m */
    int n_models;
    int no_webui;           /* 1: no page at GET / (404) */
    /* Browser origins ("https://app.example:3000", or "*": any) allowed to
     * call the API cross-site: they get CORS headers and preflight answers.
     * A request with an Origin header that is neither one of these nor the
     * server's own origin gets 403.  Bound to loopback, a Host header naming
     * anything but localhost / 127.0.0.1 / [::1] / the bound address gets 403
     * too (DNS rebinding). */
    const char *const *cors_origins;
    int n_cors_origins;
} srv_options;

/* Create the worker's session on m and start listening.  m must outlive the
 * server (srv_stop before cinfer_model_close); so must every opts->models[].m.
 * m may be NULL when opts->models names at least one model.  n_ctx,
 * n_threads and queue_max apply to each model.  CINFER_EARG for no model, a
 * duplicate or empty name, an empty or all-whitespace api_key.  CINFER_EIO when the address
 * cannot be bound, CINFER_EARG for a bad host, session errors as
 * cinfer_session_new. */
int srv_start(cinfer_model *m, const srv_options *opts, srv **out, char *err, size_t err_len);
/* The bound port. */
int srv_port(const srv *s);
/* Stop accepting, cancel queued and running requests (waiting clients get
 * 503 or the end of their stream), join every thread, free.  NULL: no-op. */
void srv_stop(srv *s);

#endif
