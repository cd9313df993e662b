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
 *
 * libmicrohttpd runs a thread per connection; one decode worker thread owns
 * the model's single session (so the KV cache of a shared prompt prefix is
 * reused across requests) and takes requests from a bounded FIFO.  A full
 * queue answers 429 with Retry-After.  Bad requests get the API's own error
 * shape and a 4xx code naming the field.  A streaming client that goes away
 * stops its generation at the next token.
 */
#ifndef CINFER_SRV_H
#define CINFER_SRV_H

#include <stddef.h>

#include "cinfer.h"

typedef struct srv srv;

typedef struct {
    const char *host;       /* NULL: "127.0.0.1" (IPv4 or IPv6 literal) */
    int port;               /* 0: an ephemeral port (srv_port tells which) */
    const char *api_key;    /* NULL: no key; else required as Bearer or x-api-key */
    const char *model_name; /* id in /v1/models and requests; NULL: "default" */
    int n_ctx, n_threads;   /* the worker's session (cinfer_session_options) */
    int queue_max;          /* requests waiting behind the running one; 0: 16 */
    size_t max_body_bytes;  /* request bodies above this get 413; 0: 8 MiB */
} srv_options;

/* Create the worker's session on m and start listening.  m must outlive the
 * server (srv_stop before cinfer_model_close).  CINFER_EIO when the address
 * cannot be bound, CINFER_EARG for a bad host, session errors as
 * cinfer_session_new. */
int srv_start(cinfer_model *m, const srv_options *opts, srv **out, char *err, size_t err_len);
/* The bound port. */
int srv_port(const srv *s);
/* Stop accepting, cancel queued and running requests (waiting clients get
 * 503 or the end of their stream), join every thread, free.  NULL: no-op. */
void srv_stop(srv *s);

#endif
