/*
 * srv.c — `cinfer serve`'s HTTP server (srv.h): request parsing and
 * validation, the OpenAI and Anthropic response shapes, SSE streaming, and
 * the decode worker with its bounded queue.
 *
 * Threads.  libmicrohttpd gives each connection its own thread, so a handler
 * may block: it parses and validates the body, renders the chat template and
 * tokenizes the prompt (the model is read-only and shared), then enqueues a
 * job.  Each model's worker thread owns that model's session and runs its
 * jobs in order, which keeps the KV cache of the previous request for prefix
 * reuse (several models: one struct srv each, see the struct).  A
 * non-streaming handler waits for its job; a streaming one returns a
 * callback response whose reader drains the SSE bytes the worker appends.
 * One mutex and one condition variable per model guard its queue and every
 * job's output — contention is one wake-up per token, far below decode cost.
 *
 * Lifetime.  A job is referenced by its handler or its stream response and
 * by the worker; the last unref frees it.  When the stream response is
 * destroyed (client gone, or done) the job is marked cancelled and the
 * worker's token callback stops generation.
 */
#include "srv.h"

/* Seconds a connection may sit idle (no bytes either way) before it is
 * closed: keep-alive between requests, and clients that never finish a
 * request line (libmicrohttpd 0.9.75 silently skips a line of NUL bytes,
 * e.g. a TLS handshake sent to this plain-HTTP port, and would otherwise hold
 * the connection and its thread).  A request waiting in the queue or being
 * generated is not idle from the daemon's side. */
#define SRV_IDLE_TIMEOUT_S 10
#include "srv_impl.h"
#include "srv_decide.h"
#include "srv_embed.h"
#include "srv_ollama.h"
#include "srv_reason.h"
#include "srv_webui.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* ---- growable byte buffer ---------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->len + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* JSON string literal of s[0..n) (valid UTF-8 from the tokenizer). */
static void sb_json(sbuf *b, const char *s, size_t n) {
    sb_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        sb_put(b, s + run, i - run);
        run = i + 1;
        char esc[8];
        switch (c) {
        case '"': sb_put(b, "\\\"", 2); break;
        case '\\': sb_put(b, "\\\\", 2); break;
        case '\n': sb_put(b, "\\n", 2); break;
        case '\r': sb_put(b, "\\r", 2); break;
        case '\t': sb_put(b, "\\t", 2); break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_put(b, esc, 6);
        }
    }
    sb_put(b, s + run, n - run);
    sb_put(b, "\"", 1);
}

/* ---- jobs and the server ------------------------------------------------------------ */

typedef struct srv_job {
    struct srv_job *next;
    struct srv *s;
    int refs;
    int api, stream, include_usage;
    int32_t *ids; /* (n_ids) the rendered, tokenized prompt */
    size_t n_ids;
    cinfer_gen_options go;
    char **stop; /* (n_stop) owned */
    int n_stop;
    char id[48];
    long created;
    /* guarded by s->mu */
    sbuf out;        /* streaming: SSE bytes not yet sent start at out_pos */
    size_t out_pos;
    sbuf text;       /* the generated text */
    int done, cancelled;
    int gen_rc;
    char err[256];
    cinfer_gen_result res;
    const char *stop_hit; /* the stop string that ended generation (one of stop[]), or NULL */
    srvx *x;              /* tools, response_format, logprobs, penalties (srv_tools.c), or NULL */
    int seq;              /* streamed events so far (responses' sequence_number) */
    cJSON *echo;          /* responses: request fields echoed in the response (instructions, metadata) */
    srv_embed *embed;     /* POST /v1/embeddings: the worker embeds instead of generating */
    char *echo_text;      /* /v1/completions with echo: the prompt's text, put before the completion */
    int count_only;       /* count_tokens: tokenized only, never generated (no n_ctx limit) */
    /* reasoning (srv_reason.h): chat-like requests split <think> text from the answer */
    int reason_on;        /* split at all */
    int reason_out;       /* reasoning goes to the client (OpenAI reasoning_content, Anthropic
                           * thinking blocks when asked); else it is dropped */
    srv_reason rs;
    sbuf reasoning;       /* the reasoning text */
    int n_reason_tokens;  /* generated while inside the reasoning block */
    /* Anthropic stream: content blocks open lazily (thinking, then text) */
    int msg_open;         /* kind of the open block: -1 none, SRV_TEXT_CONTENT, SRV_TEXT_REASONING */
    int msg_index;        /* its index */
    int msg_next;         /* the index the next block gets */
    /* Ollama API (srv_ollama.h): NDJSON lines instead of SSE, and its request's extras */
    int ndjson;
    srvo_req oq;
    double t_start_ms;    /* when the request was parsed (Ollama's total_duration) */
    int32_t *hist;        /* /api/generate: the history after generation, its "context" (n_hist) */
    int n_hist;
    /* POST /v1/systemone (srv_decide.h): the question set, the prompt text, the decisions */
    srvd *decide;
    char *prompt_text;
} srv_job;

struct srv {
    struct MHD_Daemon *d;
    cinfer_model *m;
    cinfer_session *sess;
    char *name, *api_key;
    int queue_max;
    size_t max_body;
    int n_ctx;
    pthread_t worker;
    int worker_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_job *head, *tail; /* waiting jobs */
    int n_queued, busy, stopping;
    int n_active; /* requests begun and not yet completed (sent or failed) */
    unsigned long long n_req;
    long started;
    /* Several models: one struct srv per model, each with its own worker,
     * session, queue, mutex and counters.  The first (the hub) also owns the
     * HTTP daemon, the model list and n_active; routes run on the hub and
     * hand a request to the model its "model" field names. */
    struct srv *hub;
    struct srv **models; /* hub: (n_models), models[0] == hub */
    int n_models;
    int n_threads;
    int no_webui;
    char *csp;              /* hub: Content-Security-Policy of the web UI page */
    char **cors;            /* hub: (n_cors) origins allowed cross-site ("*": any) */
    int n_cors;
    char bind_host[64];     /* hub: the bound address as a URL host ("127.0.0.1", "[::1]") */
    int loopback;           /* hub: bound to a loopback address (Host header checked) */
    cinfer_session *esess;  /* embeddings' own session (worker thread), made on first use */
    int chat;               /* the model's chat template renders a conversation (chat-like endpoints work) */
    int encoder;            /* an embedding model (cinfer_model_is_encoder): only embeddings are served */
    char chat_err[200];     /* why not, when !chat */
    /* guarded by mu: the session's cached tokens and totals since start */
    int n_past;
    unsigned long long n_done, n_prompt_tokens, n_cached_tokens, n_gen_tokens, n_embed_tokens;
    unsigned long long n_cancelled; /* requests whose client left before the answer: skipped, or stopped mid-generation */
};

static void job_unref_locked(srv_job *j) {
    if (--j->refs > 0) return;
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->stop);
    free(j->ids);
    free(j->out.p);
    free(j->text.p);
    free(j->reasoning.p);
    srvo_req_free(&j->oq);
    free(j->hist);
    srvd_free(j->decide);
    free(j->prompt_text);
    srv_embed_free(j->embed);
    srvx_free(j->x);
    cJSON_Delete(j->echo);
    free(j->echo_text);
    free(j);
}
static void job_unref(srv_job *j) {
    srv *s = j->s;
    pthread_mutex_lock(&s->mu);
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
}

static int n_calls(const srv_job *j) { return j->x ? j->x->n_calls : 0; }

/* Prompt tokens the request evaluates: the rendered prompt plus, when a tool
 * call is forced, the call opener appended to it (srvx_generate) — what
 * res.n_prompt reports after generation, known before it (message_start,
 * count_tokens). */
static size_t prompt_tokens(const srv_job *j) {
    return j->n_ids + (j->x && j->x->tool_mode == SRVX_TOOLS_REQUIRED ? (size_t)j->x->n_opener : 0);
}
static const char *finish_openai_j(const srv_job *j) {
    cinfer_stop_reason r = j->res.stop;
    if (r == CINFER_STOP_MAX_TOKENS || r == CINFER_STOP_CTX_FULL) return "length";
    return n_calls(j) ? "tool_calls" : "stop";
}
static const char *finish_anthropic_j(const srv_job *j) {
    cinfer_stop_reason r = j->res.stop;
    if (r == CINFER_STOP_MAX_TOKENS || r == CINFER_STOP_CTX_FULL) return "max_tokens";
    if (n_calls(j)) return "tool_use";
    if (r == CINFER_STOP_STRING) return "stop_sequence";
    return "end_turn";
}

/* Which stop string ended generation: the library does not say, so look for
 * each in the text of the last tokens of the history (where the match was).
 * Worker thread only: it reads the session. */
static const char *matched_stop(srv *s, const srv_job *j) {
    if (j->res.stop != CINFER_STOP_STRING || !j->n_stop) return NULL;
    if (j->n_stop == 1) return j->stop[0];
    int n = cinfer_session_n_past(s->sess);
    const int32_t *t = cinfer_session_tokens(s->sess);
    int k = n < 64 ? n : 64;
    char tail[2048];
    size_t nt = 0;
    if (k <= 0 || cinfer_detokenize(s->m, t + n - k, (size_t)k, tail, sizeof tail, &nt) != 0) return NULL;
    const char *best = NULL, *best_at = NULL;
    for (int i = 0; i < j->n_stop; i++) {
        const char *at = NULL, *p = tail;
        while ((p = strstr(p, j->stop[i]))) at = p++;
        if (at && (!best_at || at > best_at)) best = j->stop[i], best_at = at;
    }
    return best;
}

/* ---- streaming chunks (worker side) -------------------------------------------------- */

static void emit_event(sbuf *b, const char *event, cJSON *data) {
    char *t = cJSON_PrintUnformatted(data);
    if (event) {
        sb_str(b, "event: ");
        sb_str(b, event);
        sb_str(b, "\n");
    }
    sb_str(b, "data: ");
    sb_str(b, t ? t : "{}");
    sb_str(b, "\n\n");
    free(t);
    cJSON_Delete(data);
}

/* Logprob entries not yet streamed as the chunk's "logprobs" value (JSON
 * text, malloc'd), or NULL when there are none.  text_base: bytes of text
 * before this chunk (legacy text_offset). */
static char *pending_logprobs(srv_job *j, size_t text_base) {
    srvx *x = j->x;
    if (!x || !x->logprobs || x->lp_sent >= x->n_lp) return NULL;
    cJSON *l = j->api == API_COMPL ? srvx_logprobs_legacy(x, x->lp_sent, x->n_lp, text_base)
                                   : srvx_logprobs_chat(x, x->lp_sent, x->n_lp);
    x->lp_sent = x->n_lp;
    char *t = cJSON_PrintUnformatted(l);
    cJSON_Delete(l);
    return t;
}
static cJSON *pending_logprobs_json(srv_job *j, size_t text_base) {
    char *t = pending_logprobs(j, text_base);
    cJSON *v = t ? cJSON_Parse(t) : NULL;
    free(t);
    return v ? v : cJSON_CreateNull();
}

/* Responses API: an event object with its type and sequence_number. */
static cJSON *resp_event(srv_job *j, const char *type) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNumberToObject(e, "sequence_number", j->seq++);
    return e;
}
static void resp_item_id(const srv_job *j, char *out, size_t cap) {
    snprintf(out, cap, "msg_%s", j->id + (strncmp(j->id, "resp_", 5) ? 0 : 5));
}
static void resp_indices(cJSON *e, const srv_job *j) {
    char item[80];
    resp_item_id(j, item, sizeof item);
    cJSON_AddStringToObject(e, "item_id", item);
    cJSON_AddNumberToObject(e, "output_index", 0);
    cJSON_AddNumberToObject(e, "content_index", 0);
}

/* The output text part, and the message item holding it (text: with the
 * generated text, else empty). */
static cJSON *resp_part(srv_job *j, int text) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddStringToObject(p, "text", text && j->text.p ? j->text.p : "");
    cJSON_AddArrayToObject(p, "annotations");
    return p;
}
static cJSON *resp_message(srv_job *j, const char *status, int text) {
    char item[80];
    resp_item_id(j, item, sizeof item);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "id", item);
    cJSON_AddStringToObject(m, "status", status);
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON *c = cJSON_AddArrayToObject(m, "content");
    if (text >= 0) cJSON_AddItemToArray(c, resp_part(j, text));
    return m;
}

/* The response object of POST /v1/responses: status "in_progress" (no
 * output yet), "completed", or "incomplete" (max_output_tokens reached). */
static cJSON *resp_object(srv *s, srv_job *j, int final) {
    cJSON *o = cJSON_CreateObject();
    int trunc = final && (j->res.stop == CINFER_STOP_MAX_TOKENS || j->res.stop == CINFER_STOP_CTX_FULL);
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)j->created);
    cJSON_AddStringToObject(o, "status", !final ? "in_progress" : trunc ? "incomplete" : "completed");
    cJSON_AddNullToObject(o, "error");
    if (trunc) cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", "max_output_tokens");
    else cJSON_AddNullToObject(o, "incomplete_details");
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(j->echo, "instructions");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(j->echo, "metadata");
    cJSON_AddItemToObject(o, "instructions", cJSON_IsString(ins) ? cJSON_CreateString(ins->valuestring) : cJSON_CreateNull());
    cJSON_AddStringToObject(o, "model", s->name);
    cJSON *out = cJSON_AddArrayToObject(o, "output");
    cJSON_AddTrueToObject(o, "parallel_tool_calls");
    cJSON_AddItemToObject(o, "metadata", cJSON_IsObject(md) ? cJSON_Duplicate(md, 1) : cJSON_CreateObject());
    cJSON_AddStringToObject(o, "tool_choice", "auto");
    cJSON_AddArrayToObject(o, "tools");
    cJSON_AddNumberToObject(o, "temperature", j->go.temperature);
    cJSON_AddNumberToObject(o, "top_p", j->go.top_p);
    if (j->go.max_tokens) cJSON_AddNumberToObject(o, "max_output_tokens", j->go.max_tokens);
    else cJSON_AddNullToObject(o, "max_output_tokens");
    if (final) {
        cJSON_AddItemToArray(out, resp_message(j, trunc ? "incomplete" : "completed", 1));
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        cJSON_AddNumberToObject(u, "input_tokens", j->res.n_prompt);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", j->res.n_reused);
        cJSON_AddNumberToObject(u, "output_tokens", j->res.n_generated);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", 0);
        cJSON_AddNumberToObject(u, "total_tokens", j->res.n_prompt + j->res.n_generated);
    }
    return o;
}

/* Anthropic stream: make the open content block one of kind (closing another
 * one first).  A thinking block carries an empty signature: the reasoning of
 * a local model is not signed. */
static void msg_block(srv_job *j, int kind) {
    if (j->msg_open == kind) return;
    cJSON *e;
    if (j->msg_open >= 0) {
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", "content_block_stop");
        cJSON_AddNumberToObject(e, "index", j->msg_index);
        emit_event(&j->out, "content_block_stop", e);
    }
    j->msg_open = kind;
    if (kind < 0) return;
    j->msg_index = j->msg_next++;
    e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", "content_block_start");
    cJSON_AddNumberToObject(e, "index", j->msg_index);
    cJSON *cb = cJSON_AddObjectToObject(e, "content_block");
    if (kind == SRV_TEXT_REASONING) {
        cJSON_AddStringToObject(cb, "type", "thinking");
        cJSON_AddStringToObject(cb, "thinking", "");
        cJSON_AddStringToObject(cb, "signature", "");
    } else {
        cJSON_AddStringToObject(cb, "type", "text");
        cJSON_AddStringToObject(cb, "text", "");
    }
    emit_event(&j->out, "content_block_start", e);
}

/* One NDJSON line (Ollama streams), taking o. */
static void emit_line(sbuf *b, cJSON *o) {
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    sb_str(b, t ? t : "{}");
    sb_str(b, "\n");
    free(t);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* An Ollama chunk (content, or thinking when is_thinking) with the logprobs not yet sent. */
static void emit_ollama_piece(srv *s, srv_job *j, const char *piece, size_t len, int is_thinking) {
    cJSON *o = srvo_chunk(j->oq.route, s->name, is_thinking ? "" : piece, is_thinking ? 0 : len,
                          is_thinking ? piece : NULL, len);
    if (j->x && j->x->logprobs && j->x->lp_sent < j->x->n_lp) {
        cJSON_AddItemToObject(o, "logprobs", srvo_logprobs(j->x, j->x->lp_sent, j->x->n_lp));
        j->x->lp_sent = j->x->n_lp;
    }
    emit_line(&j->out, o);
}

/* A streamed piece of reasoning text (only when j->reason_out). */
static void emit_reason_delta(srv *s, srv_job *j, const char *piece, size_t len) {
    sbuf *b = &j->out;
    char num[32];
    if (j->api == API_CHAT) {
        sb_str(b, "data: {\"id\":\"");
        sb_str(b, j->id);
        sb_str(b, "\",\"object\":\"chat.completion.chunk\",\"created\":");
        snprintf(num, sizeof num, "%ld", j->created);
        sb_str(b, num);
        sb_str(b, ",\"model\":");
        sb_json(b, s->name, strlen(s->name));
        sb_str(b, ",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":");
        sb_json(b, piece, len);
        sb_str(b, "},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    } else if (j->ndjson) {
        emit_ollama_piece(s, j, piece, len, 1);
    } else if (j->api == API_MSG) {
        msg_block(j, SRV_TEXT_REASONING);
        snprintf(num, sizeof num, "%d", j->msg_index);
        sb_str(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":");
        sb_str(b, num);
        sb_str(b, ",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":");
        sb_json(b, piece, len);
        sb_str(b, "}}\n\n");
    }
}

static void emit_delta(srv *s, srv_job *j, const char *piece, size_t len) {
    sbuf *b = &j->out;
    char num[32];
    if (j->ndjson) {
        emit_ollama_piece(s, j, piece, len, 0);
        return;
    }
    switch (j->api) {
    case API_CHAT:
    case API_COMPL: {
        char *lp = pending_logprobs(j, j->text.len >= len ? j->text.len - len : 0);
        sb_str(b, "data: {\"id\":\"");
        sb_str(b, j->id);
        sb_str(b, j->api == API_CHAT ? "\",\"object\":\"chat.completion.chunk\",\"created\":"
                                     : "\",\"object\":\"text_completion\",\"created\":");
        snprintf(num, sizeof num, "%ld", j->created);
        sb_str(b, num);
        sb_str(b, ",\"model\":");
        sb_json(b, s->name, strlen(s->name));
        sb_str(b, j->api == API_CHAT ? ",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
                                     : ",\"choices\":[{\"index\":0,\"text\":");
        sb_json(b, piece, len);
        sb_str(b, j->api == API_CHAT ? "},\"logprobs\":" : ",\"logprobs\":");
        sb_str(b, lp ? lp : "null");
        sb_str(b, ",\"finish_reason\":null}]}\n\n");
        free(lp);
        break;
    }
    case API_MSG:
        msg_block(j, SRV_TEXT_CONTENT);
        snprintf(num, sizeof num, "%d", j->msg_index);
        sb_str(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":");
        sb_str(b, num);
        sb_str(b, ",\"delta\":{\"type\":\"text_delta\",\"text\":");
        sb_json(b, piece, len);
        sb_str(b, "}}\n\n");
        break;
    case API_RESP: {
        cJSON *e = resp_event(j, "response.output_text.delta");
        resp_indices(e, j);
        char *t = strndup(piece, len);
        cJSON_AddStringToObject(e, "delta", t ? t : "");
        free(t);
        cJSON_AddArrayToObject(e, "logprobs");
        emit_event(b, "response.output_text.delta", e);
        break;
    }
    }
}

static cJSON *oai_chunk(srv *s, srv_job *j) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "id", j->id);
    cJSON_AddStringToObject(c, "object", j->api == API_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(c, "created", (double)j->created);
    cJSON_AddStringToObject(c, "model", s->name);
    return c;
}

static cJSON *oai_usage(const srv_job *j) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", j->res.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->res.n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", j->res.n_prompt + j->res.n_generated);
    /* prompt tokens whose KV cache was reused from the previous request */
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens", j->res.n_reused);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "completion_tokens_details"), "reasoning_tokens",
                            j->n_reason_tokens);
    return u;
}

/* Does the Anthropic stream open a text block?  Not when a tool call is
 * forced (the response is one tool_use block). */
static int msg_text_block(const srv_job *j) { return !(j->x && j->x->tool_mode == SRVX_TOOLS_REQUIRED); }

/* The opening events, written by the handler before the job is queued so the
 * client sees its headers at once. */
static void emit_head(srv *s, srv_job *j) {
    if (j->ndjson) return; /* Ollama: content lines only */
    if (j->api == API_CHAT) {
        cJSON *c = oai_chunk(s, j), *ch = cJSON_AddArrayToObject(c, "choices"), *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", 0);
        cJSON *d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "role", "assistant");
        cJSON_AddStringToObject(d, "content", "");
        cJSON_AddNullToObject(o, "logprobs");
        cJSON_AddNullToObject(o, "finish_reason");
        cJSON_AddItemToArray(ch, o);
        emit_event(&j->out, NULL, c);
    } else if (j->api == API_MSG) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", "message_start");
        cJSON *m = cJSON_AddObjectToObject(e, "message");
        cJSON_AddStringToObject(m, "id", j->id);
        cJSON_AddStringToObject(m, "type", "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "model", s->name);
        cJSON_AddArrayToObject(m, "content");
        cJSON_AddNullToObject(m, "stop_reason");
        cJSON_AddNullToObject(m, "stop_sequence");
        cJSON *u = cJSON_AddObjectToObject(m, "usage");
        cJSON_AddNumberToObject(u, "input_tokens", (double)prompt_tokens(j));
        cJSON_AddNumberToObject(u, "output_tokens", 0);
        emit_event(&j->out, "message_start", e);
        /* as Anthropic: the text block opens at once, unless thinking may come first */
        if (msg_text_block(j) && !j->reason_out) msg_block(j, SRV_TEXT_CONTENT);
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", "ping");
        emit_event(&j->out, "ping", e);
    } else if (j->api == API_COMPL && j->echo_text) {
        emit_delta(s, j, j->echo_text, strlen(j->echo_text)); /* echo: the prompt as the first chunk */
    } else if (j->api == API_RESP) {
        cJSON *e = resp_event(j, "response.created");
        cJSON_AddItemToObject(e, "response", resp_object(s, j, 0));
        emit_event(&j->out, "response.created", e);
        e = resp_event(j, "response.in_progress");
        cJSON_AddItemToObject(e, "response", resp_object(s, j, 0));
        emit_event(&j->out, "response.in_progress", e);
        e = resp_event(j, "response.output_item.added");
        cJSON_AddNumberToObject(e, "output_index", 0);
        cJSON_AddItemToObject(e, "item", resp_message(j, "in_progress", -1));
        emit_event(&j->out, "response.output_item.added", e);
        e = resp_event(j, "response.content_part.added");
        resp_indices(e, j);
        cJSON_AddItemToObject(e, "part", resp_part(j, 0));
        emit_event(&j->out, "response.content_part.added", e);
    }
}

/* OpenAI chat: the tool call as two chunks (id, type, name; then the
 * arguments), as OpenAI streams them. */
static void emit_tool_chunks(srv *s, srv_job *j) {
    for (int i = 0; i < n_calls(j); i++) {
        char id[96];
        srvx_call_id(j->x, j->id, i, id, sizeof id);
        for (int part = 0; part < 2; part++) {
            cJSON *c = oai_chunk(s, j), *ch = cJSON_AddArrayToObject(c, "choices"), *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "index", 0);
            cJSON *d = cJSON_AddObjectToObject(o, "delta"), *tc = cJSON_AddArrayToObject(d, "tool_calls"),
                  *t = cJSON_CreateObject(), *f;
            cJSON_AddNumberToObject(t, "index", i);
            if (!part) {
                cJSON_AddStringToObject(t, "id", id);
                cJSON_AddStringToObject(t, "type", "function");
            }
            f = cJSON_AddObjectToObject(t, "function");
            if (!part) cJSON_AddStringToObject(f, "name", j->x->calls[i].name);
            cJSON_AddStringToObject(f, "arguments", part ? j->x->calls[i].arguments : "");
            cJSON_AddItemToArray(tc, t);
            cJSON_AddItemToObject(o, "logprobs", part ? pending_logprobs_json(j, j->text.len) : cJSON_CreateNull());
            cJSON_AddNullToObject(o, "finish_reason");
            cJSON_AddItemToArray(ch, o);
            emit_event(&j->out, NULL, c);
        }
    }
}

/* The last Ollama object (streamed: the line with done:true; not streamed: the
 * whole answer): content, thinking and tool calls when full, the timings,
 * generate's context. */
static cJSON *ollama_final(srv *s, srv_job *j, int full) {
    const char *text = full && j->text.p ? j->text.p : "";
    const char *th = full && j->reasoning.len ? j->reasoning.p : NULL;
    cJSON *o = srvo_chunk(j->oq.route, s->name, text, strlen(text), th, th ? strlen(th) : 0);
    if (full && n_calls(j) && j->oq.route == SRVO_CHAT)
        cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(o, "message"), "tool_calls", srvo_tool_calls(j->x));
    if (j->x && j->x->logprobs)
        cJSON_AddItemToObject(o, "logprobs", srvo_logprobs(j->x, full ? 0 : j->x->lp_sent, j->x->n_lp));
    cinfer_stop_reason r = j->res.stop;
    srvo_stats st = {.done_reason = r == CINFER_STOP_MAX_TOKENS || r == CINFER_STOP_CTX_FULL ? "length" : "stop",
                     .n_prompt = j->res.n_prompt, .n_generated = j->res.n_generated,
                     .prompt_ms = j->res.prompt_ms, .gen_ms = j->res.gen_ms, .total_ms = now_ms() - j->t_start_ms};
    srvo_final_fields(o, &st);
    if (j->oq.route == SRVO_GENERATE) {
        cJSON *ctx = cJSON_AddArrayToObject(o, "context");
        for (int i = 0; i < j->n_hist; i++) cJSON_AddItemToArray(ctx, cJSON_CreateNumber(j->hist[i]));
    }
    return o;
}

static void emit_tail(srv *s, srv_job *j) {
    sbuf *b = &j->out;
    if (j->ndjson) {
        if (j->gen_rc) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "error", j->err);
            emit_line(b, e);
            return;
        }
        if (n_calls(j) && j->oq.route == SRVO_CHAT) { /* Ollama streams the calls as one chunk */
            cJSON *o = srvo_chunk(SRVO_CHAT, s->name, "", 0, NULL, 0);
            cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(o, "message"), "tool_calls", srvo_tool_calls(j->x));
            emit_line(b, o);
        }
        emit_line(b, ollama_final(s, j, 0));
        return;
    }
    if (j->gen_rc) {
        cJSON *e = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(e, "error");
        if (j->api == API_MSG) {
            cJSON_AddStringToObject(e, "type", "error");
            cJSON_AddStringToObject(er, "type", "api_error");
            cJSON_AddStringToObject(er, "message", j->err);
            emit_event(b, "error", e);
        } else if (j->api == API_RESP) {
            cJSON_Delete(e);
            e = resp_event(j, "error");
            cJSON_AddStringToObject(e, "code", "server_error");
            cJSON_AddStringToObject(e, "message", j->err);
            cJSON_AddNullToObject(e, "param");
            emit_event(b, "error", e);
        } else {
            cJSON_AddStringToObject(er, "message", j->err);
            cJSON_AddStringToObject(er, "type", "server_error");
            cJSON_AddNullToObject(er, "param");
            cJSON_AddNullToObject(er, "code");
            emit_event(b, NULL, e);
            sb_str(b, "data: [DONE]\n\n");
        }
        return;
    }
    if (j->api == API_RESP) {
        cJSON *e = resp_event(j, "response.output_text.done");
        resp_indices(e, j);
        cJSON_AddStringToObject(e, "text", j->text.p ? j->text.p : "");
        cJSON_AddArrayToObject(e, "logprobs");
        emit_event(b, "response.output_text.done", e);
        int trunc = j->res.stop == CINFER_STOP_MAX_TOKENS || j->res.stop == CINFER_STOP_CTX_FULL;
        e = resp_event(j, "response.content_part.done");
        resp_indices(e, j);
        cJSON_AddItemToObject(e, "part", resp_part(j, 1));
        emit_event(b, "response.content_part.done", e);
        e = resp_event(j, "response.output_item.done");
        cJSON_AddNumberToObject(e, "output_index", 0);
        cJSON_AddItemToObject(e, "item", resp_message(j, trunc ? "incomplete" : "completed", 1));
        emit_event(b, "response.output_item.done", e);
        /* OpenAI ends a stream cut at max_output_tokens with response.incomplete */
        const char *last = trunc ? "response.incomplete" : "response.completed";
        e = resp_event(j, last);
        cJSON_AddItemToObject(e, "response", resp_object(s, j, 1));
        emit_event(b, last, e);
        return;
    }
    /* a call cut by max_tokens is the last of the calls (salvage_call): never text */
    if (j->api == API_MSG) {
        /* a reply with no text and no call still has its (empty) text block */
        if (j->msg_next == 0 && !n_calls(j) && msg_text_block(j)) msg_block(j, SRV_TEXT_CONTENT);
        msg_block(j, -1);
        cJSON *e;
        for (int i = 0; i < n_calls(j); i++) {
            char id[96];
            int index = j->msg_next++;
            srvx_call_id(j->x, j->id, i, id, sizeof id);
            e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "type", "content_block_start");
            cJSON_AddNumberToObject(e, "index", index);
            cJSON *cb = cJSON_AddObjectToObject(e, "content_block");
            cJSON_AddStringToObject(cb, "type", "tool_use");
            cJSON_AddStringToObject(cb, "id", id);
            cJSON_AddStringToObject(cb, "name", j->x->calls[i].name);
            cJSON_AddObjectToObject(cb, "input");
            emit_event(b, "content_block_start", e);
            e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "type", "content_block_delta");
            cJSON_AddNumberToObject(e, "index", index);
            cJSON *d = cJSON_AddObjectToObject(e, "delta");
            cJSON_AddStringToObject(d, "type", "input_json_delta");
            cJSON_AddStringToObject(d, "partial_json", j->x->calls[i].arguments);
            emit_event(b, "content_block_delta", e);
            e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "type", "content_block_stop");
            cJSON_AddNumberToObject(e, "index", index);
            emit_event(b, "content_block_stop", e);
        }
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", "message_delta");
        cJSON *d = cJSON_AddObjectToObject(e, "delta");
        cJSON_AddStringToObject(d, "stop_reason", finish_anthropic_j(j));
        if (j->stop_hit) cJSON_AddStringToObject(d, "stop_sequence", j->stop_hit);
        else cJSON_AddNullToObject(d, "stop_sequence");
        cJSON *u = cJSON_AddObjectToObject(e, "usage");
        cJSON_AddNumberToObject(u, "output_tokens", j->res.n_generated);
        emit_event(b, "message_delta", e);
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", "message_stop");
        emit_event(b, "message_stop", e);
        return;
    }
    if (j->api == API_CHAT) emit_tool_chunks(s, j);
    cJSON *c = oai_chunk(s, j), *ch = cJSON_AddArrayToObject(c, "choices"), *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", 0);
    if (j->api == API_CHAT) cJSON_AddObjectToObject(o, "delta");
    else cJSON_AddStringToObject(o, "text", "");
    cJSON_AddItemToObject(o, "logprobs", pending_logprobs_json(j, j->text.len));
    cJSON_AddStringToObject(o, "finish_reason", finish_openai_j(j));
    cJSON_AddItemToArray(ch, o);
    emit_event(b, NULL, c);
    if (j->include_usage) {
        c = oai_chunk(s, j);
        cJSON_AddArrayToObject(c, "choices");
        cJSON_AddItemToObject(c, "usage", oai_usage(j));
        emit_event(b, NULL, c);
    }
    sb_str(b, "data: [DONE]\n\n");
}

/* ---- the decode worker ------------------------------------------------------------------ */

/* A decided piece of the reply (srv_reason_out): the answer, or reasoning. s->mu held. */
static void route_text(void *user, int kind, const char *t, size_t n) {
    srv_job *j = user;
    if (kind == SRV_TEXT_REASONING) {
        if (!j->reason_out) return;
        sb_put(&j->reasoning, t, n);
        if (j->stream) emit_reason_delta(j->s, j, t, n);
    } else {
        sb_put(&j->text, t, n);
        if (j->stream) emit_delta(j->s, j, t, n);
    }
}

static int on_token(const char *piece, size_t len, int32_t token, void *user) {
    srv_job *j = user;
    srv *s = j->s;
    pthread_mutex_lock(&s->mu);
    int stop = j->cancelled || s->stopping, xstop = 0;
    if (!stop && j->x) xstop = srvx_on_token(j->x, &piece, &len, token);
    if (!stop && j->reason_on && token >= 0 && srv_reason_in_reasoning(&j->rs)) j->n_reason_tokens++;
    if (!stop && len) {
        if (j->reason_on) srv_reason_feed(&j->rs, piece, len, route_text, j);
        else route_text(j, SRV_TEXT_CONTENT, piece, len);
        if (j->stream) pthread_cond_broadcast(&s->cv);
        stop = j->out.oom || j->text.oom || j->reasoning.oom;
    }
    pthread_mutex_unlock(&s->mu);
    return stop || xstop;
}

/* log softmax(logits)[id] over n_vocab (temperature 1), in double. */
static double log_prob(const float *logits, int n_vocab, int32_t id) {
    float top = logits[0];
    for (int v = 1; v < n_vocab; v++)
        if (logits[v] > top) top = logits[v];
    double sum = 0;
    for (int v = 0; v < n_vocab; v++) sum += exp((double)logits[v] - top);
    return (double)logits[id] - top - log(sum);
}

/* Tokenize text[0..len) as tokenize_prompt does (BOS as the vocabulary asks,
 * once; control tokens parsed in a template's text) into ids (n_ctx + 1). */
static int decide_tokenize(srv *s, const char *text, size_t len, int32_t *ids, size_t *n_ids) {
    int rc = cinfer_tokenize(s->m, text, len, 1, s->chat, ids, (size_t)s->n_ctx + 1, n_ids);
    int32_t bos = cinfer_token_bos(s->m);
    if (!rc && *n_ids >= 2 && bos >= 0 && ids[0] == bos && ids[1] == bos)
        memmove(ids, ids + 1, (--*n_ids) * sizeof *ids);
    return rc ? rc : *n_ids > (size_t)s->n_ctx ? CINFER_ECTX : 0;
}

/* POST /v1/systemone: one question at a time (srv_decide.h).  Each allowed
 * value (and the character after it) is appended to the reply so far and its
 * tokens scored one position at a time from the model's logits; the most
 * probable value is appended before the next question.  res gets the
 * prompt's tokens and the chosen values' tokens.  Worker thread; 0 or a
 * CINFER_E* code with err. */
static int decide_job(srv *s, srv_job *j, cinfer_gen_result *res, char *err, size_t err_len) {
    srvd *d = j->decide;
    const int n_vocab = cinfer_model_n_vocab(s->m);
    sbuf reply = {0}; /* prompt, then the reply so far */
    int32_t *ids[SRVD_MAX_OPTIONS] = {0};
    size_t n_ids[SRVD_MAX_OPTIONS];
    double logp[SRVD_MAX_OPTIONS];
    int rc = 0;
    for (int k = 0; k < SRVD_MAX_OPTIONS && !rc; k++)
        if (!(ids[k] = malloc(((size_t)s->n_ctx + 1) * sizeof *ids[k]))) rc = CINFER_ENOMEM;
    sb_str(&reply, j->prompt_text);
    if (!rc && reply.oom) rc = CINFER_ENOMEM;
    for (int i = 0; !rc && i < srvd_count(d); i++) {
        const char *next = i + 1 < srvd_count(d) ? srvd_prefix(d, i + 1) : srvd_closing(d);
        const int n_val = srvd_n_values(d, i);
        sb_str(&reply, srvd_prefix(d, i));
        if (reply.oom) rc = CINFER_ENOMEM;
        size_t common = SIZE_MAX;
        for (int k = 0; k < n_val && !rc; k++) { /* reply + value + its next character */
            const size_t mark = reply.len;
            char after[2] = {next[0], 0};
            sb_str(&reply, srvd_value(d, i, k));
            sb_str(&reply, after);
            if (reply.oom) rc = CINFER_ENOMEM;
            else rc = decide_tokenize(s, reply.p, reply.len, ids[k], &n_ids[k]);
            reply.len = mark;
            if (reply.p) reply.p[mark] = 0;
            size_t c = 0;
            while (k && c < n_ids[k] && c < n_ids[0] && ids[k][c] == ids[0][c]) c++;
            if (!rc && k) common = c < common ? c : common;
        }
        if (rc == CINFER_ECTX || rc == CINFER_EARG) {
            snprintf(err, err_len, "the prompt and the answers so far do not fit the context of %d tokens",
                     s->n_ctx);
            rc = CINFER_ECTX;
        }
        if (common == 0) common = 1; /* every value follows at least the BOS or the prompt's first token */
        for (int k = 0; k < n_val && !rc; k++) {
            logp[k] = 0;
            for (size_t t = common; t < n_ids[k] && !rc; t++) {
                pthread_mutex_lock(&s->mu);
                int stop = j->cancelled || s->stopping;
                pthread_mutex_unlock(&s->mu);
                if (stop) {
                    snprintf(err, err_len, "request cancelled");
                    rc = CINFER_EARG;
                    break;
                }
                if ((rc = cinfer_eval(s->sess, ids[k], t, err, err_len))) break;
                logp[k] += log_prob(cinfer_logits(s->sess), n_vocab, ids[k][t]);
            }
        }
        if (rc) break;
        const char *chosen = srvd_record(d, i, logp);
        for (int k = 0; k < n_val; k++)
            if (srvd_value(d, i, k) == chosen) res->n_generated += (int)(n_ids[k] - common);
        if (i == 0) res->n_prompt = (int)common;
        sb_str(&reply, chosen);
        if (reply.oom) rc = CINFER_ENOMEM;
    }
    res->stop = CINFER_STOP_GRAMMAR;
    free(reply.p);
    for (int k = 0; k < SRVD_MAX_OPTIONS; k++) free(ids[k]);
    if (rc == CINFER_ENOMEM) snprintf(err, err_len, "out of memory");
    return rc;
}

/* Embeddings run on their own session, made on first use, so a chat's
 * cached prefix survives them (an encoder has no chats: its one session).
 * Worker thread. */
static int embed_job(srv *s, srv_job *j) {
    int rc = 0;
    if (s->encoder) return srv_embed_run(j->embed, s->sess, j->err, sizeof j->err);
    if (!s->esess)
        rc = cinfer_session_new(s->m, &(cinfer_session_options){.n_ctx = s->n_ctx, .n_threads = s->n_threads},
                                &s->esess, j->err, sizeof j->err);
    if (!rc) rc = srv_embed_run(j->embed, s->esess, j->err, sizeof j->err);
    return rc;
}

/* Totals for /health after a generation (worker thread, s->mu held). */
static void count_job(srv *s, srv_job *j, int rc) {
    s->n_past = cinfer_session_n_past(s->sess);
    if (rc) return;
    s->n_done++;
    s->n_prompt_tokens += (unsigned long long)j->res.n_prompt;
    s->n_cached_tokens += (unsigned long long)j->res.n_reused;
    s->n_gen_tokens += (unsigned long long)j->res.n_generated;
}

static void *worker_main(void *arg) {
    srv *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head) break; /* stopping, queue drained */
        srv_job *j = s->head;
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        s->n_queued--;
        if (j->cancelled || s->stopping) {
            if (j->cancelled && !s->stopping) s->n_cancelled++;
            j->gen_rc = CINFER_EARG;
            snprintf(j->err, sizeof j->err, "%s", s->stopping ? "server shutting down" : "request cancelled");
        } else if (j->embed) {
            s->busy = 1;
            pthread_mutex_unlock(&s->mu);
            j->gen_rc = embed_job(s, j);
            pthread_mutex_lock(&s->mu);
            s->busy = 0;
            if (!j->gen_rc) s->n_embed_tokens += (unsigned long long)srv_embed_n_tokens(j->embed);
        } else {
            s->busy = 1;
            pthread_mutex_unlock(&s->mu);
            cinfer_gen_result res = {0};
            char err[256] = "";
            int rc = j->decide ? decide_job(s, j, &res, err, sizeof err)
                               : srvx_generate(s->sess, j->x, j->ids, j->n_ids, &j->go, on_token, j, &res, err,
                                               sizeof err);
            if (rc) cinfer_session_reset(s->sess);
            pthread_mutex_lock(&s->mu);
            s->busy = 0;
            j->res = res;
            j->gen_rc = rc;
            if (!rc && j->reason_on) srv_reason_flush(&j->rs, route_text, j);
            if (!rc && j->oq.route == SRVO_GENERATE) { /* Ollama's "context": the whole history */
                int n = cinfer_session_n_past(s->sess);
                if ((j->hist = malloc(((size_t)n + 1) * sizeof *j->hist))) {
                    memcpy(j->hist, cinfer_session_tokens(s->sess), (size_t)n * sizeof *j->hist);
                    j->n_hist = n;
                }
            }
            /* the token callback stopped it because the client had left */
            if (!rc && res.stop == CINFER_STOP_CALLBACK && j->cancelled && !s->stopping) s->n_cancelled++;
            if (!rc) j->stop_hit = matched_stop(s, j);
            if (rc) snprintf(j->err, sizeof j->err, "generation failed: %.230s", err);
            count_job(s, j, rc);
        }
        if (j->stream) emit_tail(s, j);
        j->done = 1;
        pthread_cond_broadcast(&s->cv);
        job_unref_locked(j);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- HTTP plumbing -------------------------------------------------------------------- */

typedef struct {
    sbuf body;
    int too_large;
} req_ctx;

/* The Access-Control-Allow-Origin value for the request this connection
 * thread is answering (a --cors-origin match), or NULL: the handler sets it,
 * every response adds it (thread per connection, so a thread-local works). */
static _Thread_local const char *tl_allow_origin;

static void add_cors(struct MHD_Response *r) {
    if (!tl_allow_origin) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", tl_allow_origin);
    MHD_add_response_header(r, "Vary", "Origin");
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, cJSON *j, int retry_after) {
    char *t = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!t) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(t), t, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(t);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (retry_after) MHD_add_response_header(r, "Retry-After", "1");
    add_cors(r);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* An error in the shape of the API the path belongs to. */
static enum MHD_Result send_error(struct MHD_Connection *c, int api, unsigned status, const char *param,
                                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static enum MHD_Result send_error(struct MHD_Connection *c, int api, unsigned status, const char *param,
                                  const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    srvx_clean_msg(msg); /* one line of valid UTF-8, whatever request text it quotes */
    cJSON *e = cJSON_CreateObject();
    if (api >= API_OCHAT) { /* Ollama: {"error": "..."} and the status */
        cJSON_AddStringToObject(e, "error", msg);
    } else if (api == API_MSG) {
        const char *type = status == 401   ? "authentication_error"
                           : status == 403 ? "permission_error"
                           : status == 404 ? "not_found_error"
                           : status == 413 ? "request_too_large"
                           : status == 429 ? "rate_limit_error"
                           : status >= 500 ? (status == 503 ? "overloaded_error" : "api_error")
                                           : "invalid_request_error";
        cJSON_AddStringToObject(e, "type", "error");
        cJSON *er = cJSON_AddObjectToObject(e, "error");
        cJSON_AddStringToObject(er, "type", type);
        cJSON_AddStringToObject(er, "message", msg);
    } else {
        const char *type = status == 401   ? "authentication_error"
                           : status == 429 ? "rate_limit_exceeded"
                           : status >= 500 ? "server_error"
                                           : "invalid_request_error";
        const char *code = status == 401   ? "invalid_api_key"
                           : status == 403 ? "forbidden"
                           : status == 404 ? (param && !strcmp(param, "model") ? "model_not_found" : "not_found")
                           : status == 413 ? "request_too_large"
                           : status == 429 ? "queue_full"
                           : status >= 500 ? "server_error"
                                           : "invalid_value";
        cJSON *er = cJSON_AddObjectToObject(e, "error");
        cJSON_AddStringToObject(er, "message", msg);
        cJSON_AddStringToObject(er, "type", type);
        if (param) cJSON_AddStringToObject(er, "param", param);
        else cJSON_AddNullToObject(er, "param");
        cJSON_AddStringToObject(er, "code", code);
    }
    return send_json(c, status, e, status == 429);
}

/* ---- request parsing -------------------------------------------------------------------- */

/* Deepest bracket nesting of JSON text p (n bytes), strings skipped. */
static int json_depth(const char *p, size_t n) {
    int d = 0, max = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') in_str = 1;
        else if (c == '{' || c == '[') max = ++d > max ? d : max;
        else if (c == '}' || c == ']') d--;
    }
    return max;
}

/* The field path ("tools[0].function.name") of the first string or key of
 * valid JSON text p (n bytes) holding the escape \u0000 (a NUL, which C
 * strings would silently cut at) into path; 0 when none. */
static int json_nul_path(const char *p, size_t n, char *path, size_t cap) {
    enum { MAXD = 24 };
    struct lvl {
        int obj, idx, expect_key;
        const char *key;
        size_t key_len;
    } st[MAXD];
    int d = 0; /* levels; only the first MAXD are tracked */
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '{' || c == '[') {
            if (d < MAXD) st[d] = (struct lvl){.obj = c == '{', .expect_key = c == '{'};
            d++;
        } else if (c == '}' || c == ']') d--;
        else if (c == ',' && d > 0 && d <= MAXD) {
            if (st[d - 1].obj) st[d - 1].expect_key = 1;
            else st[d - 1].idx++;
        } else if (c == ':' && d > 0 && d <= MAXD) st[d - 1].expect_key = 0;
        else if (c == '"') {
            size_t b = ++i;
            int nul = 0;
            for (; i < n && p[i] != '"'; i++)
                if (p[i] == '\\') {
                    if (i + 5 < n && p[i + 1] == 'u' && !memcmp(p + i + 2, "0000", 4)) nul = 1;
                    i++;
                }
            int is_key = d > 0 && d <= MAXD && st[d - 1].obj && st[d - 1].expect_key;
            if (is_key) st[d - 1].key = p + b, st[d - 1].key_len = i - b;
            if (!nul) continue;
            size_t k = 0;
            path[0] = 0;
            for (int l = 0; l < d && l < MAXD && k < cap; l++) {
                if (st[l].obj && st[l].key)
                    k += (size_t)snprintf(path + k, cap - k, "%s%.*s", k ? "." : "", (int)st[l].key_len, st[l].key);
                else if (!st[l].obj)
                    k += (size_t)snprintf(path + k, cap - k, "[%d]", st[l].idx);
            }
            if (!path[0]) snprintf(path, cap, "(body)");
            return 1;
        }
    }
    return 0;
}

/* The request body as JSON: a 400 for invalid JSON (naming the byte, or the
 * nesting limit), text after the value, or a string holding NUL.  NULL with b set. */
static cJSON *parse_body(const char *p, size_t n, bad_req *b) {
    const char *end = NULL;
    cJSON *r = cJSON_ParseWithLengthOpts(p ? p : "", n, &end, 0);
    if (!r) {
        if (p && json_depth(p, n) > CJSON_NESTING_LIMIT)
            srv_bad(b, 400, NULL, "the request body is nested deeper than %d levels (the JSON nesting limit)",
                    CJSON_NESTING_LIMIT);
        else
            srv_bad(b, 400, NULL, "the request body is not valid JSON (error at byte %zu of %zu)",
                    end && p ? (size_t)(end - p) : 0, n);
        return NULL;
    }
    size_t at = (size_t)(end - p);
    while (at < n && (p[at] == ' ' || p[at] == '\t' || p[at] == '\r' || p[at] == '\n')) at++;
    if (at < n) {
        cJSON_Delete(r);
        srv_bad(b, 400, NULL, "the request body has text after the JSON value (at byte %zu of %zu)", at, n);
        return NULL;
    }
    char path[96];
    if (json_nul_path(p, n, path, sizeof path)) {
        cJSON_Delete(r);
        srv_bad(b, 400, path, "'%s' contains a NUL character (\\u0000), which is not accepted", path);
        return NULL;
    }
    return r;
}

/* Optional number field in [lo, hi]; 0 when absent or valid. */
static int get_num(cJSON *o, const char *key, double lo, double hi, int integer, double *out, bad_req *b) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v)) return srv_bad(b, 400, key, "'%s' must be a number", key);
    double d = v->valuedouble;
    if (integer && d != (double)(long long)d) return srv_bad(b, 400, key, "'%s' must be an integer, got %g", key, d);
    if (!(d >= lo && d <= hi)) return srv_bad(b, 400, key, "'%s' must be in [%g, %g], got %g", key, lo, hi, d);
    *out = d;
    return 1;
}

static int parse_stop(srv_job *j, cJSON *v, const char *key, bad_req *b) {
    if (!v || cJSON_IsNull(v)) return 0;
    int n = cJSON_IsString(v) ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < 0 || n > 16) return srv_bad(b, 400, key, "'%s' must be a string or an array of at most 16 strings", key);
    j->stop = calloc((size_t)n + 1, sizeof *j->stop);
    if (!j->stop) return srv_bad(b, 500, key, "out of memory");
    if (cJSON_IsString(v)) {
        if (!v->valuestring[0]) return srv_bad(b, 400, key, "'%s' must be a non-empty string", key);
        j->stop[0] = strdup(v->valuestring);
        j->n_stop = 1;
    } else {
        cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (!cJSON_IsString(e) || !e->valuestring[0])
                return srv_bad(b, 400, key, "'%s[%d]' must be a non-empty string", key, j->n_stop);
            j->stop[j->n_stop++] = strdup(e->valuestring);
        }
    }
    for (int i = 0; i < j->n_stop; i++)
        if (!j->stop[i]) return srv_bad(b, 500, key, "out of memory");
    j->go.stop = (const char *const *)j->stop;
    j->go.n_stop = j->n_stop;
    return 0;
}

/* Sampling fields shared by the three generation endpoints. */
static int parse_sampling(srv *s, srv_job *j, cJSON *r, bad_req *b) {
    double d;
    int rc;
    /* cinfer run's defaults (llama.cpp's) for what the request leaves out */
    j->go.temperature = 0.8f;
    j->go.top_k = 40;
    j->go.top_p = 0.95f;
    j->go.min_p = 0.05f;
    /* Any finite temperature >= 0 (OpenAI documents 0..2, Anthropic 0..1; the
     * sampler takes more: near uniform over what top-k/p keep), top_k <= 0
     * and -1 (llama.cpp, vLLM) mean no truncation, top_p 0 is accepted (the
     * sampler decides what it means). */
    if ((rc = get_num(r, "temperature", 0, 1e30, 0, &d, b)) < 0) return -1;
    if (rc) j->go.temperature = (float)d;
    if ((rc = get_num(r, "top_p", 0, 1, 0, &d, b)) < 0) return -1;
    if (rc) j->go.top_p = (float)d;
    if ((rc = get_num(r, "top_k", -1e9, 1e9, 1, &d, b)) < 0) return -1;
    if (rc) j->go.top_k = d > 0 ? (int)d : 0;
    if ((rc = get_num(r, "min_p", 0, 1, 0, &d, b)) < 0) return -1;
    if (rc) j->go.min_p = (float)d;
    /* llama.cpp's server extensions, also what Ollama's options map to */
    if ((rc = get_num(r, "repeat_penalty", 0, 100, 0, &d, b)) < 0) return -1;
    if (rc) j->go.repeat_penalty = (float)d;
    if ((rc = get_num(r, "repeat_last_n", 1, 1 << 20, 1, &d, b)) < 0) return -1;
    if (rc) j->go.repeat_last_n = (int)d;
    if ((rc = get_num(r, "seed", -9.2e18, 9.2e18, 1, &d, b)) < 0) return -1;
    j->go.seed = rc ? (uint64_t)(int64_t)d : (uint64_t)time(NULL) * 6364136223846793005ull + s->n_req;
    j->go.parse_special = 1;
    return 0;
}

static int parse_max_tokens(srv_job *j, cJSON *r, const char *key, int required, bad_req *b) {
    double d;
    int rc = get_num(r, key, 1, 1e9, 1, &d, b);
    if (rc < 0) return -1;
    if (!rc && required) return srv_bad(b, 400, key, "'%s' is required", key);
    if (rc) j->go.max_tokens = (int)d;
    return 0;
}

static int check_model(srv *s, cJSON *r, int required, bad_req *b) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "model");
    if (!v || cJSON_IsNull(v)) return required ? srv_bad(b, 400, "model", "'model' is required") : 0;
    if (!cJSON_IsString(v)) return srv_bad(b, 400, "model", "'model' must be a string");
    if (strcmp(v->valuestring, s->name))
        return srv_bad(b, 404, "model", "model '%.200s' not found; this server has '%.200s'", v->valuestring,
                   s->name);
    return 0;
}

/* Tokenize text (add_special: the model's BOS; parse_special: control-token
 * text) into j->ids, checking it leaves room to generate in n_ctx. */
static int tokenize_prompt(srv *s, srv_job *j, const char *text, int parse_special, bad_req *b) {
    size_t cap = (size_t)s->n_ctx + 1, n = 0;
    j->ids = malloc(cap * sizeof *j->ids);
    if (!j->ids) return srv_bad(b, 500, NULL, "out of memory");
    int rc = cinfer_tokenize(s->m, text, strlen(text), 1, parse_special, j->ids, cap, &n);
    if (rc == CINFER_EARG && j->count_only && n > cap) { /* count_tokens just counts, however long */
        int32_t *big = realloc(j->ids, n * sizeof *j->ids);
        if (!big) return srv_bad(b, 500, NULL, "out of memory");
        j->ids = big;
        cap = n;
        rc = cinfer_tokenize(s->m, text, strlen(text), 1, parse_special, j->ids, cap, &n);
    }
    if (rc == CINFER_EARG || (n >= (size_t)s->n_ctx && !j->count_only))
        return srv_bad(b, 400, j->api == API_COMPL ? "prompt" : j->api == API_RESP ? "input" : j->api == API_DECIDE ? "state" : "messages",
                   "the prompt is %zu tokens; the context holds %d (prompt plus output): shorten it, or start "
                   "the server with a larger -c", n, s->n_ctx);
    if (rc) return srv_bad(b, 500, NULL, "tokenizer failed (%d)", rc);
    if (n == 0) /* no BOS added and no text: nothing to condition generation on */
        return srv_bad(b, 400, j->api == API_COMPL ? "prompt" : j->api == API_RESP ? "input" : "messages",
                       "the prompt is empty (0 tokens, and this model adds no BOS token); send some text");
    /* a template that writes BOS itself, on a vocabulary that adds BOS: keep one */
    int32_t bos = cinfer_token_bos(s->m);
    if (parse_special && n >= 2 && bos >= 0 && j->ids[0] == bos && j->ids[1] == bos) {
        memmove(j->ids, j->ids + 1, (n - 1) * sizeof *j->ids);
        n--;
    }
    j->n_ids = n;
    return 0;
}

/* /v1/completions: prompt (a string, or OpenAI's array of one string, an
 * array of token ids, or an array of one array of token ids: used as given,
 * nothing added) into j->ids; echo (the prompt's text put before the
 * completion: the string, or the ids' text); suffix and best_of, which are
 * not supported, are a 400 rather than ignored.  0, or -1 with b set. */
static int parse_compl_prompt(srv *s, srv_job *j, cJSON *r, bad_req *b) {
    cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "prompt");
    cJSON *sf = cJSON_GetObjectItemCaseSensitive(r, "suffix");
    if (sf && !cJSON_IsNull(sf) && !(cJSON_IsString(sf) && !sf->valuestring[0]))
        return srv_bad(b, 400, "suffix", "'suffix' (fill-in-the-middle) is not supported");
    cJSON *bo = cJSON_GetObjectItemCaseSensitive(r, "best_of");
    if (bo && !cJSON_IsNull(bo) && !(cJSON_IsNumber(bo) && bo->valuedouble == 1))
        return srv_bad(b, 400, "best_of", "'best_of' must be 1 (one candidate per request)");
    cJSON *ec = cJSON_GetObjectItemCaseSensitive(r, "echo");
    if (ec && !cJSON_IsNull(ec) && !cJSON_IsBool(ec)) return srv_bad(b, 400, "echo", "'echo' must be a boolean");
    int echo = cJSON_IsTrue(ec);
    if (echo && j->x && j->x->logprobs)
        return srv_bad(b, 400, "echo", "'echo' with 'logprobs' (log-probabilities of the prompt) is not supported");
    if (!p) return srv_bad(b, 400, "prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 &&
        (cJSON_IsString(cJSON_GetArrayItem(p, 0)) || cJSON_IsArray(cJSON_GetArrayItem(p, 0))))
        p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p)) {
        if (tokenize_prompt(s, j, p->valuestring, 1, b)) return -1;
        if (echo && !(j->echo_text = strdup(p->valuestring))) return srv_bad(b, 500, NULL, "out of memory");
        return 0;
    }
    int n = cJSON_IsArray(p) ? cJSON_GetArraySize(p) : 0, n_vocab = cinfer_model_n_vocab(s->m);
    if (n < 1 || !cJSON_IsNumber(cJSON_GetArrayItem(p, 0)))
        return srv_bad(b, 400, "prompt",
                       "'prompt' must be a string, an array of token ids, or an array of one of those");
    if (n >= s->n_ctx)
        return srv_bad(b, 400, "prompt", "the prompt is %d tokens; the context holds %d (prompt plus output)", n,
                       s->n_ctx);
    if (!(j->ids = malloc((size_t)n * sizeof *j->ids))) return srv_bad(b, 500, NULL, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, p) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(d >= 0 && d < n_vocab) || d != (double)(int32_t)d) /* range first: the cast needs it */
            return srv_bad(b, 400, "prompt", "'prompt[%zu]' must be a token id in [0, %d)", j->n_ids, n_vocab);
        j->ids[j->n_ids++] = (int32_t)d;
    }
    if (echo) {
        size_t need = 0;
        cinfer_detokenize(s->m, j->ids, j->n_ids, NULL, 0, &need);
        if (!(j->echo_text = malloc(need + 1)) ||
            cinfer_detokenize(s->m, j->ids, j->n_ids, j->echo_text, need + 1, &need))
            return srv_bad(b, 500, NULL, "cannot detokenize the prompt");
    }
    return 0;
}

/* The template variables of a chat-like request (JSON object text into
 * *vars, or NULL) and whether its reasoning goes to the client:
 *   chat_template_kwargs  (OpenAI chat and responses, as vLLM and llama.cpp;
 *                         accepted on messages too) an object of variables,
 *                         e.g. {"enable_thinking": false} for Qwen3;
 *   thinking              (Anthropic) {"type":"enabled","budget_tokens":N} turns
 *                         on thinking blocks and sets enable_thinking true,
 *                         {"type":"disabled"} or absent sets it false (so a
 *                         hybrid model answers directly); an explicit
 *                         chat_template_kwargs.enable_thinking wins.
 * OpenAI chat returns reasoning as message.reasoning_content; responses drop
 * it from the output text. */
static int template_vars(int api, cJSON *r, char **vars, int *reason_out, bad_req *b) {
    *vars = NULL;
    *reason_out = api == API_CHAT;
    cJSON *kw = cJSON_GetObjectItemCaseSensitive(r, "chat_template_kwargs");
    if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw))
        return srv_bad(b, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    /* template variables are a handful of switches (enable_thinking, ...); the
     * template engine's dicts are small-map lookups */
    if (cJSON_GetArraySize(kw) > 256)
        return srv_bad(b, 400, "chat_template_kwargs", "'chat_template_kwargs' has %d keys; at most 256",
                       cJSON_GetArraySize(kw));
    cJSON *v = cJSON_IsObject(kw) ? cJSON_Duplicate(kw, 1) : cJSON_CreateObject();
    if (!v) return srv_bad(b, 500, NULL, "out of memory");
    if (api == API_MSG) {
        cJSON *th = cJSON_GetObjectItemCaseSensitive(r, "thinking"), *ty = cJSON_GetObjectItemCaseSensitive(th, "type");
        int on = 0;
        if (th && !cJSON_IsNull(th)) {
            if (!cJSON_IsObject(th) || !cJSON_IsString(ty) ||
                (strcmp(ty->valuestring, "enabled") && strcmp(ty->valuestring, "disabled"))) {
                cJSON_Delete(v);
                return srv_bad(b, 400, "thinking", "'thinking' must be {\"type\":\"enabled\",\"budget_tokens\":N} or "
                                                 "{\"type\":\"disabled\"}");
            }
            on = !strcmp(ty->valuestring, "enabled");
        }
        *reason_out = on;
        if (!cJSON_GetObjectItemCaseSensitive(v, "enable_thinking")) cJSON_AddBoolToObject(v, "enable_thinking", on);
    }
    if (v->child && !(*vars = cJSON_PrintUnformatted(v))) {
        cJSON_Delete(v);
        return srv_bad(b, 500, NULL, "out of memory");
    }
    cJSON_Delete(v);
    return 0;
}

/* Parse a generation request body into a new job (refs 1); NULL with b set. */
static srv_job *parse_job(srv *s, int api, cJSON *r, bad_req *b, int count_only) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) {
        srv_bad(b, 500, NULL, "out of memory");
        return NULL;
    }
    j->s = s;
    j->refs = 1;
    j->api = api;
    j->count_only = count_only;
    j->msg_open = -1;
    char *prompt = NULL, *vars = NULL;
    int ok = 0;
    if (!cJSON_IsObject(r)) {
        srv_bad(b, 400, NULL, "the request body must be a JSON object");
        goto out;
    }
    if (check_model(s, r, api == API_MSG, b)) goto out;
    if (s->encoder) {
        srv_bad(b, 400, "model", "model '%.100s' is an embedding model (%s, an encoder): it does not generate "
                "text; it answers /v1/embeddings and /api/embed", s->name, cinfer_model_arch(s->m));
        goto out;
    }
    if (api != API_COMPL && !s->chat) {
        srv_bad(b, 400, "model",
                "model '%.100s' cannot answer chat requests: %.150s; send a plain prompt to /v1/completions",
                s->name, s->chat_err);
        goto out;
    }
    if (srvx_parse(s->m, api, r, &j->x, b)) goto out;
    if (api == API_COMPL) {
        if (parse_compl_prompt(s, j, r, b)) goto out;
    } else {
        /* the conversation (and tools) in the template's shape (srv_tools.c) */
        if (template_vars(api, r, &vars, &j->reason_out, b)) goto out;
        cJSON *ma = srvx_messages(api, r, b);
        if (!ma) goto out;
        /* what the family's template needs besides: Mistral's 9-character call ids,
         * SmolLM3's tools as xml_tools (srv_tools.c) */
        if (srvx_fit_template(s->m, j->x, ma, &vars)) {
            cJSON_Delete(ma);
            srv_bad(b, 500, NULL, "out of memory");
            goto out;
        }
        char *mj = cJSON_PrintUnformatted(ma), err[256] = "out of memory";
        cJSON_Delete(ma);
        const char *tj = j->x ? j->x->tools_json : NULL;
        int rc = mj ? cinfer_chat_prompt_vars(s->m, mj, tj, vars, 1, &prompt, err, sizeof err) : CINFER_ENOMEM;
        const char *param = api == API_RESP ? "input" : "messages";
        if (rc && rc != CINFER_ENOMEM && tj) { /* the conversation alone renders: the tools are the problem */
            char *p2 = NULL, e2[64];
            if (!cinfer_chat_prompt_json(s->m, mj, NULL, 1, &p2, e2, sizeof e2)) param = "tools";
            cinfer_free(p2);
        }
        free(mj);
        if (rc) {
            /* the library's message already says "chat template: ..." */
            srv_bad(b, rc == CINFER_ENOMEM ? 500 : 400, param, "%s%s%s",
                    strcmp(param, "tools") ? "" : "'tools' cannot be rendered: ",
                    strncmp(err, "chat template:", 14) ? "chat template: " : "", err);
            goto out;
        }
        if (tokenize_prompt(s, j, prompt, 1, b)) goto out;
        j->reason_on = 1;
        srv_reason_init(&j->rs, srv_reason_prompt_opens(prompt));
    }
    if (count_only) {
        ok = 1;
        goto out;
    }
    if (parse_sampling(s, j, r, b)) goto out;
    if (api == API_MSG) {
        if (parse_max_tokens(j, r, "max_tokens", 1, b)) goto out;
        if (parse_stop(j, cJSON_GetObjectItemCaseSensitive(r, "stop_sequences"), "stop_sequences", b)) goto out;
    } else if (api == API_RESP) {
        if (parse_max_tokens(j, r, "max_output_tokens", 0, b)) goto out;
        cJSON *md = cJSON_GetObjectItemCaseSensitive(r, "metadata");
        if (md && !cJSON_IsNull(md) && !cJSON_IsObject(md)) {
            srv_bad(b, 400, "metadata", "'metadata' must be an object");
            goto out;
        }
        j->echo = cJSON_CreateObject();
        if (cJSON_IsObject(md)) cJSON_AddItemToObject(j->echo, "metadata", cJSON_Duplicate(md, 1));
        cJSON *ins = cJSON_GetObjectItemCaseSensitive(r, "instructions");
        if (cJSON_IsString(ins)) cJSON_AddStringToObject(j->echo, "instructions", ins->valuestring);
    } else {
        if (parse_max_tokens(j, r, "max_tokens", 0, b)) goto out;
        if (api == API_CHAT && parse_max_tokens(j, r, "max_completion_tokens", 0, b)) goto out;
        if (parse_stop(j, cJSON_GetObjectItemCaseSensitive(r, "stop"), "stop", b)) goto out;
        cJSON *nn = cJSON_GetObjectItemCaseSensitive(r, "n");
        if (nn && !cJSON_IsNull(nn) && !(cJSON_IsNumber(nn) && nn->valuedouble == 1)) {
            srv_bad(b, 400, "n", "'n' must be 1 (one choice per request)");
            goto out;
        }
    }
    cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "stream");
    if (st && !cJSON_IsNull(st) && !cJSON_IsBool(st)) {
        srv_bad(b, 400, "stream", "'stream' must be a boolean");
        goto out;
    }
    j->stream = cJSON_IsTrue(st);
    /* max_tokens above what the context leaves is clamped to it (generation
     * would stop there anyway); the finish reason is "length" either way */
    size_t room = (size_t)s->n_ctx > prompt_tokens(j) ? (size_t)s->n_ctx - prompt_tokens(j) : 1;
    if ((size_t)j->go.max_tokens > room) j->go.max_tokens = (int)room;
    cJSON *so = cJSON_GetObjectItemCaseSensitive(r, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        cJSON *iu = cJSON_GetObjectItemCaseSensitive(so, "include_usage");
        if (!cJSON_IsObject(so) || (iu && !cJSON_IsBool(iu))) {
            srv_bad(b, 400, "stream_options", "'stream_options' must be an object with boolean include_usage");
            goto out;
        }
        j->include_usage = cJSON_IsTrue(iu);
    }
    ok = 1;
out:
    cinfer_free(prompt);
    free(vars);
    if (!ok) {
        job_unref(j);
        return NULL;
    }
    return j;
}

/* ---- responses --------------------------------------------------------------------------- */

static cJSON *final_body(srv *s, srv_job *j) {
    if (j->api == API_RESP) return resp_object(s, j, 1);
    if (j->ndjson) return ollama_final(s, j, 1);
    if (j->api == API_DECIDE) return srvd_body(j->decide, j->res.n_prompt, j->res.n_generated);
    cJSON *o = cJSON_CreateObject();
    const char *text = j->text.p ? j->text.p : "";
    const char *reasoning = j->reasoning.p && j->reasoning.len ? j->reasoning.p : NULL;
    srvx *x = j->x;
    /* a call cut by max_tokens is the last of the calls (salvage_call), never text */
    if (j->api == API_MSG) {
        cJSON_AddStringToObject(o, "id", j->id);
        cJSON_AddStringToObject(o, "type", "message");
        cJSON_AddStringToObject(o, "role", "assistant");
        cJSON_AddStringToObject(o, "model", s->name);
        cJSON *c = cJSON_AddArrayToObject(o, "content");
        if (reasoning) {
            cJSON *blk = cJSON_CreateObject();
            cJSON_AddStringToObject(blk, "type", "thinking");
            cJSON_AddStringToObject(blk, "thinking", reasoning);
            cJSON_AddStringToObject(blk, "signature", "");
            cJSON_AddItemToArray(c, blk);
        }
        if (text[0] || !n_calls(j)) {
            cJSON *blk = cJSON_CreateObject();
            cJSON_AddStringToObject(blk, "type", "text");
            cJSON_AddStringToObject(blk, "text", text);
            cJSON_AddItemToArray(c, blk);
        }
        for (int i = 0; i < n_calls(j); i++) {
            char id[96];
            srvx_call_id(x, j->id, i, id, sizeof id);
            cJSON *blk = cJSON_CreateObject(), *in = cJSON_Parse(x->calls[i].arguments);
            cJSON_AddStringToObject(blk, "type", "tool_use");
            cJSON_AddStringToObject(blk, "id", id);
            cJSON_AddStringToObject(blk, "name", x->calls[i].name);
            cJSON_AddItemToObject(blk, "input", in ? in : cJSON_CreateObject());
            cJSON_AddItemToArray(c, blk);
        }
        cJSON_AddStringToObject(o, "stop_reason", finish_anthropic_j(j));
        if (j->stop_hit) cJSON_AddStringToObject(o, "stop_sequence", j->stop_hit);
        else cJSON_AddNullToObject(o, "stop_sequence");
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        cJSON_AddNumberToObject(u, "input_tokens", j->res.n_prompt);
        cJSON_AddNumberToObject(u, "output_tokens", j->res.n_generated);
        return o;
    }
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", j->api == API_CHAT ? "chat.completion" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", s->name);
    cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c0 = cJSON_CreateObject();
    cJSON_AddNumberToObject(c0, "index", 0);
    if (j->api == API_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(c0, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        if (n_calls(j) && !text[0]) cJSON_AddNullToObject(m, "content");
        else cJSON_AddStringToObject(m, "content", text);
        if (reasoning) cJSON_AddStringToObject(m, "reasoning_content", reasoning); /* as llama.cpp, vLLM */
        cJSON_AddNullToObject(m, "refusal");
        if (n_calls(j)) {
            cJSON *tc = cJSON_AddArrayToObject(m, "tool_calls");
            for (int i = 0; i < n_calls(j); i++) {
                char id[96];
                srvx_call_id(x, j->id, i, id, sizeof id);
                cJSON *t = cJSON_CreateObject(), *f;
                cJSON_AddStringToObject(t, "id", id);
                cJSON_AddStringToObject(t, "type", "function");
                f = cJSON_AddObjectToObject(t, "function");
                cJSON_AddStringToObject(f, "name", x->calls[i].name);
                cJSON_AddStringToObject(f, "arguments", x->calls[i].arguments);
                cJSON_AddItemToArray(tc, t);
            }
        }
    } else if (j->echo_text) {
        size_t n = strlen(j->echo_text) + strlen(text) + 1;
        char *t = malloc(n);
        if (t) snprintf(t, n, "%s%s", j->echo_text, text);
        cJSON_AddStringToObject(c0, "text", t ? t : text);
        free(t);
    } else {
        cJSON_AddStringToObject(c0, "text", text);
    }
    if (x && x->logprobs)
        cJSON_AddItemToObject(c0, "logprobs", j->api == API_COMPL ? srvx_logprobs_legacy(x, 0, x->n_lp, 0)
                                                                  : srvx_logprobs_chat(x, 0, x->n_lp));
    else cJSON_AddNullToObject(c0, "logprobs");
    cJSON_AddStringToObject(c0, "finish_reason", finish_openai_j(j));
    cJSON_AddItemToArray(ch, c0);
    cJSON_AddItemToObject(o, "usage", oai_usage(j));
    return o;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    srv_job *j = cls;
    srv *s = j->s;
    (void)pos;
    pthread_mutex_lock(&s->mu);
    while (j->out_pos == j->out.len && !j->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 2;
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT && j->out_pos == j->out.len &&
            !j->done && !j->ndjson) {
            /* an SSE comment: keeps proxies open and finds a client that left */
            sb_str(&j->out, ": keep-alive\n\n");
        }
    }
    size_t n = j->out.len - j->out_pos;
    if (n == 0) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n > max) n = max;
    memcpy(buf, j->out.p + j->out_pos, n);
    j->out_pos += n;
    if (j->out_pos == j->out.len) j->out_pos = j->out.len = 0;
    pthread_mutex_unlock(&s->mu);
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    srv_job *j = cls;
    srv *s = j->s;
    pthread_mutex_lock(&s->mu);
    j->cancelled = 1; /* no-op when done; otherwise the client is gone */
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
}

/* Has the client of a waiting non-streaming request closed its side?  (MHD
 * would only notice when it writes the answer.)  Pipelined bytes count as
 * alive. */
static int client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char ch;
    ssize_t r = recv(ci->connect_fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Queue j (taking the caller's reference for the worker) and answer. */
static enum MHD_Result run_job(srv *s, struct MHD_Connection *c, srv_job *j) {
    pthread_mutex_lock(&s->mu);
    unsigned long long k = ++s->n_req;
    if (s->stopping || s->n_queued >= s->queue_max) {
        int stopping = s->stopping, qm = s->queue_max, api = j->api;
        job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        if (stopping) return send_error(c, api, 503, NULL, "server shutting down");
        return send_error(c, api, 429, NULL, "the request queue is full (%d waiting); retry later", qm);
    }
    const char *pre = j->api == API_CHAT ? "chatcmpl-" : j->api == API_COMPL ? "cmpl-" : j->api == API_RESP ? "resp_" : "msg_";
    snprintf(j->id, sizeof j->id, "%s%lx%06llx", pre, (unsigned long)time(NULL), k);
    j->created = (long)time(NULL);
    if (j->stream) emit_head(s, j);
    j->refs++; /* the worker's */
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->n_queued++;
    pthread_cond_broadcast(&s->cv);
    if (j->stream) {
        pthread_mutex_unlock(&s->mu);
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, j,
                                                                    stream_free);
        if (!r) {
            stream_free(j);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", j->ndjson ? "application/x-ndjson" : "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        add_cors(r);
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
    }
    while (!j->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT && !j->done && !j->cancelled) {
            pthread_mutex_unlock(&s->mu);
            int gone = client_gone(c); /* a syscall: not under the lock */
            pthread_mutex_lock(&s->mu);
            if (gone) j->cancelled = 1; /* the worker skips or stops it */
        }
    }
    const int stopping = s->stopping;
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result ret;
    cJSON *body = NULL;
    if (j->gen_rc)
        ret = send_error(c, j->api, stopping ? 503 : 500, NULL, "%s", j->err);
    else if (j->text.oom)
        ret = send_error(c, j->api, 500, NULL, "out of memory");
    else if (!(body = j->embed ? srv_embed_body(j->embed, s->name) : final_body(s, j)))
        ret = send_error(c, j->api, 500, NULL,
                         j->embed ? "the embedding is not finite (or memory ran out)" : "out of memory");
    else if (j->embed && j->oq.route && !(body = srvo_embed_body(body, s->name, j->oq.legacy_embed,
                                                                  now_ms() - j->t_start_ms)))
        ret = send_error(c, j->api, 500, NULL,
                         j->embed ? "the embedding is not finite (or memory ran out)" : "out of memory");
    else
        ret = send_json(c, MHD_HTTP_OK, body, 0);
    job_unref(j);
    return ret;
}

/* ---- routes ------------------------------------------------------------------------------- */

/* {"status":"ok","model":first id,"queued":N,"busy":N (sums over models),
 * "models":[{"id","queued","busy","n_ctx","cached_tokens","requests",
 * "prompt_tokens","prompt_tokens_cached","completion_tokens",
 * "embedding_tokens","requests_cancelled"}]}: cached_tokens is the history
 * the next request can reuse; prompt_tokens_cached of prompt_tokens were
 * taken from the cache; requests_cancelled counts requests whose client left
 * before the answer (skipped in the queue, or generation stopped). */
static enum MHD_Result do_health(srv *hub, struct MHD_Connection *c) {
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    int q = 0, busy = 0;
    for (int i = 0; i < hub->n_models; i++) {
        srv *s = hub->models[i];
        cJSON *m = cJSON_CreateObject();
        pthread_mutex_lock(&s->mu);
        int mq = s->n_queued, mb = s->busy, np = s->n_past;
        unsigned long long nd = s->n_done, pt = s->n_prompt_tokens, ct = s->n_cached_tokens, gt = s->n_gen_tokens,
                           et = s->n_embed_tokens, nc = s->n_cancelled;
        pthread_mutex_unlock(&s->mu);
        q += mq;
        busy += mb;
        cJSON_AddStringToObject(m, "id", s->name);
        cJSON_AddNumberToObject(m, "queued", mq);
        cJSON_AddNumberToObject(m, "busy", mb);
        cJSON_AddNumberToObject(m, "n_ctx", s->n_ctx);
        cJSON_AddNumberToObject(m, "cached_tokens", np);
        cJSON_AddNumberToObject(m, "requests", (double)nd);
        cJSON_AddNumberToObject(m, "prompt_tokens", (double)pt);
        cJSON_AddNumberToObject(m, "prompt_tokens_cached", (double)ct);
        cJSON_AddNumberToObject(m, "completion_tokens", (double)gt);
        cJSON_AddNumberToObject(m, "embedding_tokens", (double)et);
        cJSON_AddNumberToObject(m, "requests_cancelled", (double)nc);
        cJSON_AddItemToArray(arr, m);
    }
    cJSON_AddStringToObject(o, "status", "ok");
    cJSON_AddStringToObject(o, "model", hub->name);
    cJSON_AddNumberToObject(o, "queued", q);
    cJSON_AddNumberToObject(o, "busy", busy);
    cJSON_AddItemToObject(o, "models", arr);
    return send_json(c, MHD_HTTP_OK, o, 0);
}

static enum MHD_Result do_models(srv *hub, struct MHD_Connection *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(o, "data");
    for (int i = 0; i < hub->n_models; i++) {
        srv *s = hub->models[i];
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "id", s->name);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", (double)s->started);
        cJSON_AddStringToObject(m, "owned_by", "cinfer");
        /* beyond OpenAI's four fields: what a client needs to size requests */
        cJSON_AddStringToObject(m, "arch", cinfer_model_arch(s->m));
        cJSON_AddNumberToObject(m, "n_ctx", s->n_ctx);
        cJSON_AddNumberToObject(m, "n_embd", cinfer_model_n_embd(s->m));
        /* false: no usable chat template, only /v1/completions and /v1/embeddings */
        cJSON_AddBoolToObject(m, "chat", s->chat);
        /* true: an embedding model, only /v1/embeddings */
        cJSON_AddBoolToObject(m, "encoder", s->encoder);
        cJSON_AddItemToArray(d, m);
    }
    return send_json(c, MHD_HTTP_OK, o, 0);
}

/* The model a request body names ("model"; absent or not a string: the
 * first model, and parse_job reports a missing or non-string field where
 * the API requires one).  NULL when no model has that name. */
static srv *pick_model(srv *hub, const cJSON *r) {
    const cJSON *v = cJSON_IsObject(r) ? cJSON_GetObjectItemCaseSensitive(r, "model") : NULL;
    if (!cJSON_IsString(v)) return hub;
    for (int i = 0; i < hub->n_models; i++)
        if (!strcmp(v->valuestring, hub->models[i]->name)) return hub->models[i];
    return NULL;
}

/* 404 naming the unknown model and the ones served. */
static enum MHD_Result send_no_model(srv *hub, struct MHD_Connection *c, int api, const cJSON *r) {
    char have[512];
    size_t n = 0;
    have[0] = 0;
    for (int i = 0; i < hub->n_models && n < sizeof have - 1; i++)
        n += (size_t)snprintf(have + n, sizeof have - n, "%s'%s'", i ? ", " : "", hub->models[i]->name);
    return send_error(c, api, 404, "model", "model '%.200s' not found; this server has %s",
                      cJSON_GetObjectItemCaseSensitive(r, "model")->valuestring, have);
}

static enum MHD_Result do_webui(srv *hub, struct MHD_Connection *c) {
    size_t len = 0;
    const char *html = srv_webui_html(&len);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)html, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
    MHD_add_response_header(r, "Content-Security-Policy", hub->csp);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* a equals the key, in time that depends only on the lengths (no early exit
 * on the first differing byte: a timing side channel on the key's bytes). */
static int key_eq(const char *a, const char *key) {
    size_t na = strlen(a), nk = strlen(key);
    unsigned char d = na != nk;
    for (size_t i = 0; i < na; i++) d |= (unsigned char)(a[i] ^ key[i % nk]);
    return !d;
}

static int key_ok(srv *s, struct MHD_Connection *c) {
    if (!s->api_key) return 1;
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    if (x && key_eq(x, s->api_key)) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return a && !strncasecmp(a, "Bearer ", 7) && key_eq(a + 7, s->api_key);
}

/* POST /v1/embeddings on model s (srv_embed.h): validated here, computed by
 * the model's worker like a generation.  Takes r. */
static enum MHD_Result do_embeddings(srv *s, struct MHD_Connection *c, cJSON *r) {
    bad_req b = {0};
    srv_embed *e = srv_embed_parse(s->m, s->n_ctx, r, &b.status, b.param, sizeof b.param, b.msg, sizeof b.msg);
    cJSON_Delete(r);
    if (!e) return send_error(c, API_CHAT, b.status, b.param[0] ? b.param : NULL, "%s", b.msg);
    srv_job *j = calloc(1, sizeof *j);
    if (!j) {
        srv_embed_free(e);
        return send_error(c, API_CHAT, 500, NULL, "out of memory");
    }
    j->s = s;
    j->refs = 1;
    j->api = API_CHAT;
    j->embed = e;
    return run_job(s, c, j);
}

/* Host part of a Host header or origin authority h ("localhost:8080",
 * "[::1]:80"): [*b, *e). */
static void host_span(const char *h, const char **b, const char **e) {
    *b = h;
    if (*h == '[') {
        const char *r = strchr(h, ']');
        *e = r ? r + 1 : h + strlen(h);
    } else {
        const char *c = strchr(h, ':');
        *e = c ? c : h + strlen(h);
    }
}

static int span_is(const char *b, const char *e, const char *name) {
    return (size_t)(e - b) == strlen(name) && !strncasecmp(b, name, (size_t)(e - b));
}

/* A name of this machine's loopback, or the bound address (Host checks). */
static int local_name(const srv *hub, const char *b, const char *e) {
    return span_is(b, e, "localhost") || span_is(b, e, "127.0.0.1") || span_is(b, e, "[::1]") ||
           span_is(b, e, hub->bind_host);
}

/* The host is an IP literal (no DNS name, so no rebinding). */
static int ip_literal(const char *b, const char *e) {
    if (b < e && *b == '[') return 1;
    for (const char *p = b; p < e; p++)
        if (!(isdigit((unsigned char)*p) || *p == '.')) return 0;
    return b < e;
}

/* 0: the request may go on (tl_allow_origin set for CORS answers); else the
 * 403 was queued into *ret.  Checks the Host header (bound to loopback: DNS
 * rebinding) and the Origin header (cross-site pages), answers preflight
 * OPTIONS for --cors-origin origins. */
static int guard_origin(srv *hub, struct MHD_Connection *c, int api, const char *method, enum MHD_Result *ret) {
    tl_allow_origin = NULL;
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host"), *b, *e;
    if (host && hub->loopback) {
        host_span(host, &b, &e);
        if (!local_name(hub, b, e)) {
            *ret = send_error(c, api, 403, NULL,
                              "Host '%.100s' is not this server's (bound to %s: use localhost, 127.0.0.1 or [::1])",
                              host, hub->bind_host);
            return -1;
        }
    }
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!origin) return 0; /* not a browser's cross-site request (curl, SDKs, same-origin GET) */
    int own = 0;
    if (!strncasecmp(origin, "http://", 7)) {
        const char *o = origin + 7, *port;
        host_span(o, &b, &e);
        port = *e == ':' ? e + 1 : "80";
        char want[8];
        snprintf(want, sizeof want, "%d", srv_port(hub));
        if (!strcmp(port, want)) {
            own = local_name(hub, b, e);
            /* the page's own Host (an IP literal: no DNS name to rebind) */
            if (!own && host && ip_literal(b, e)) {
                const char *hb, *he;
                host_span(host, &hb, &he);
                own = (he - hb) == (e - b) && !strncasecmp(hb, b, (size_t)(e - b));
            }
        }
    }
    const char *allow = NULL;
    for (int i = 0; i < hub->n_cors && !allow; i++)
        if (!strcmp(hub->cors[i], "*")) allow = "*";
        else if (!strcasecmp(hub->cors[i], origin)) allow = origin;
    if (!own && !allow) {
        *ret = send_error(c, api, 403, NULL,
                          "cross-origin request from '%.100s' refused; start the server with --cors-origin to allow it",
                          origin);
        return -1;
    }
    tl_allow_origin = allow;
    if (!strcmp(method, "OPTIONS")) { /* CORS preflight */
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!r) {
            *ret = MHD_NO;
            return -1;
        }
        add_cors(r);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        const char *rh = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(r, "Access-Control-Allow-Headers",
                                rh ? rh : "Authorization, Content-Type, x-api-key, anthropic-version");
        MHD_add_response_header(r, "Access-Control-Max-Age", "600");
        *ret = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
        MHD_destroy_response(r);
        return -1;
    }
    return 0;
}

/* ---- the Ollama API (srv_ollama.h) ---------------------------------------------------------- */

/* The model an Ollama name ("qwen3", "qwen3:latest") names, or NULL. */
static srv *ollama_model(srv *hub, const char *name) {
    char nm[256];
    srvo_model_name(name, nm, sizeof nm);
    for (int i = 0; i < hub->n_models; i++)
        if (!strcmp(nm, hub->models[i]->name)) return hub->models[i];
    return NULL;
}

static enum MHD_Result ollama_no_model(struct MHD_Connection *c, const char *name) {
    return send_error(c, API_OCHAT, 404, "model", "model '%.200s' not found (GET /api/tags lists the served models)",
                      name ? name : "");
}

static enum MHD_Result do_ollama_get(srv *hub, struct MHD_Connection *c, const char *url) {
    int tags = !strcmp(url, "/api/tags"), ps = !strcmp(url, "/api/ps");
    if (!strcmp(url, "/api/version")) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "version", CINFER_VERSION);
        return send_json(c, MHD_HTTP_OK, o, 0);
    }
    if (!tags && !ps) return send_error(c, API_OCHAT, 404, NULL, "no route for GET %.200s", url);
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "models");
    for (int i = 0; i < hub->n_models; i++)
        cJSON_AddItemToArray(a, srvo_model_entry(hub->models[i]->name, hub->models[i]->m, hub->models[i]->n_ctx, ps));
    return send_json(c, MHD_HTTP_OK, o, 0);
}

/* POST /api/show, /api/chat, /api/generate, /api/embed, /api/embeddings.  Takes r. */
static enum MHD_Result do_ollama_post(srv *hub, struct MHD_Connection *c, const char *url, cJSON *r) {
    int route = !strcmp(url, "/api/chat")         ? SRVO_CHAT
                : !strcmp(url, "/api/generate")   ? SRVO_GENERATE
                : !strcmp(url, "/api/embed")      ? SRVO_EMBED
                : !strcmp(url, "/api/embeddings") ? SRVO_EMBEDDINGS
                                                  : 0;
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(r, "model");
    if (!cJSON_IsString(mn)) mn = cJSON_GetObjectItemCaseSensitive(r, "name");
    const char *name = cJSON_IsString(mn) ? mn->valuestring : NULL;
    if (!strcmp(url, "/api/show")) {
        srv *s = name ? ollama_model(hub, name) : NULL;
        enum MHD_Result ret = !name ? send_error(c, API_OCHAT, 400, "model", "model is required")
                              : !s  ? ollama_no_model(c, name)
                                    : send_json(c, MHD_HTTP_OK, srvo_show(s->name, s->m, s->n_ctx), 0);
        cJSON_Delete(r);
        return ret;
    }
    if (!route && (!strcmp(url, "/api/tags") || !strcmp(url, "/api/ps") || !strcmp(url, "/api/version"))) {
        cJSON_Delete(r);
        return send_error(c, API_OCHAT, 405, NULL, "use GET %.200s", url);
    }
    srv *s = name ? ollama_model(hub, name) : NULL;
    if (name && !s) {
        enum MHD_Result ret = ollama_no_model(c, name);
        cJSON_Delete(r);
        return ret;
    }
    srvo_req q;
    bad_req b = {0};
    cJSON *oai = srvo_request(route, r, s ? cinfer_model_n_vocab(s->m) : 0, &q, &b);
    cJSON_Delete(r);
    if (!oai) return send_error(c, API_OCHAT, b.status, b.param[0] ? b.param : NULL, "%s", b.msg);
    if (route == SRVO_EMBED || route == SRVO_EMBEDDINGS) {
        srv_embed *e = srv_embed_parse(s->m, s->n_ctx, oai, &b.status, b.param, sizeof b.param, b.msg, sizeof b.msg);
        cJSON_Delete(oai);
        if (!e) return send_error(c, API_OCHAT, b.status, b.param[0] ? b.param : NULL, "%s", b.msg);
        srv_job *j = calloc(1, sizeof *j);
        if (!j) {
            srv_embed_free(e);
            return send_error(c, API_OCHAT, 500, NULL, "out of memory");
        }
        *j = (srv_job){.s = s, .refs = 1, .api = API_OCHAT, .embed = e, .oq = q, .msg_open = -1,
                       .t_start_ms = now_ms()};
        return run_job(s, c, j);
    }
    if (q.load_only) { /* nothing to generate: the model is loaded (it always is) */
        cJSON *o = srvo_chunk(route, s->name, "", 0, NULL, 0);
        srvo_stats st = {.done_reason = q.unload ? "unload" : "load"};
        srvo_final_fields(o, &st);
        srvo_req_free(&q);
        cJSON_Delete(oai);
        return send_json(c, MHD_HTTP_OK, o, 0);
    }
    srv_job *j = parse_job(s, cJSON_HasObjectItem(oai, "prompt") ? API_COMPL : API_CHAT, oai, &b, 0);
    cJSON_Delete(oai);
    if (!j) {
        srvo_req_free(&q);
        return send_error(c, API_OCHAT, b.status, b.param[0] ? b.param : NULL, "%s", b.msg);
    }
    j->api = route == SRVO_CHAT ? API_OCHAT : API_OGEN;
    j->oq = q;
    j->ndjson = 1;
    j->stream = q.stream;
    j->t_start_ms = now_ms();
    j->reason_out = q.think != 0; /* think:false turned thinking off in the template; drop any left */
    if (q.n_context) { /* generate's context: an earlier answer's history, continued */
        size_t n = (size_t)q.n_context + j->n_ids;
        int32_t *ids = n < (size_t)s->n_ctx ? malloc(n * sizeof *ids) : NULL;
        if (!ids) {
            job_unref(j);
            return send_error(c, API_OCHAT, n < (size_t)s->n_ctx ? 500 : 400, "context",
                              "the context plus the prompt is %zu tokens; the model's context holds %d", n, s->n_ctx);
        }
        memcpy(ids, q.context, (size_t)q.n_context * sizeof *ids);
        memcpy(ids + q.n_context, j->ids, j->n_ids * sizeof *ids);
        free(j->ids);
        j->ids = ids;
        j->n_ids = n;
        size_t room = (size_t)s->n_ctx - n;
        if (j->go.max_tokens <= 0 || (size_t)j->go.max_tokens > room) j->go.max_tokens = (int)room;
    }
    return run_job(s, c, j);
}

/* ---- POST /v1/systemone (srv_decide.h) -------------------------------------------------------- */

static enum MHD_Result do_decide(srv *hub, struct MHD_Connection *c, cJSON *r) {
    bad_req b = {0};
    srvd *d = srvd_parse(r, &b);
    cJSON_Delete(r);
    if (!d) return send_error(c, API_DECIDE, b.status, b.param[0] ? b.param : NULL, "%s", b.msg);
    srv *s = ollama_model(hub, srvd_model(d));
    if (!s) {
        enum MHD_Result ret = ollama_no_model(c, srvd_model(d));
        srvd_free(d);
        return ret;
    }
    srv_job *j = calloc(1, sizeof *j);
    if (!j) {
        srvd_free(d);
        return send_error(c, API_DECIDE, 500, NULL, "out of memory");
    }
    if (s->encoder) {
        srvd_free(d);
        free(j);
        return send_error(c, API_DECIDE, 400, "model", "model '%.100s' is an embedding model (%s, an encoder): it "
                          "cannot answer questions; it answers /v1/embeddings and /api/embed", s->name,
                          cinfer_model_arch(s->m));
    }
    *j = (srv_job){.s = s, .refs = 1, .api = API_DECIDE, .decide = d, .msg_open = -1};
    char *prompt = NULL, err[512] = "out of memory";
    int rc = 0;
    /* a hybrid thinking model answers directly; a template that opens <think> gets it closed */
    if (s->chat) rc = cinfer_chat_prompt_vars(s->m, srvd_messages_json(d), NULL, "{\"enable_thinking\":false}", 1,
                                              &prompt, err, sizeof err);
    else if (!(prompt = strdup(srvd_plain_prompt(d)))) rc = CINFER_ENOMEM;
    if (!rc && srv_reason_prompt_opens(prompt)) {
        static const char close_think[] = "\n</think>\n\n";
        size_t n = strlen(prompt);
        char *p2 = realloc(prompt, n + sizeof close_think);
        if (p2) memcpy((prompt = p2) + n, close_think, sizeof close_think);
        else rc = CINFER_ENOMEM;
    }
    if (rc) {
        free(prompt);
        job_unref(j);
        return send_error(c, API_DECIDE, rc == CINFER_ENOMEM ? 500 : 400, "state", "%s", err);
    }
    /* the longest reply text (keys, answers, separators) must fit after the prompt too */
    int bad = tokenize_prompt(s, j, prompt, s->chat, &b);
    j->prompt_text = prompt;
    if (bad) {
        job_unref(j);
        return send_error(c, API_DECIDE, b.status, b.param[0] ? b.param : NULL, "%s", b.msg);
    }
    return run_job(s, c, j);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls) {
    srv *s = cls;
    (void)version;
    req_ctx *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        *con_cls = rq;
        pthread_mutex_lock(&s->mu);
        s->n_active++;
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (rq->body.len + *upload_data_size > s->max_body) rq->too_large = 1;
        else sb_put(&rq->body, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    int api = !strncmp(url, "/v1/messages", 12) ? API_MSG
              : !strncmp(url, "/api/", 5) || !strcmp(url, "/v1/systemone") ? API_OCHAT /* Ollama's error shape */
                                                                           : API_CHAT;
    int post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
    enum MHD_Result gret;
    if (guard_origin(s, c, api, method, &gret)) return gret;
    if (!strcmp(url, "/") && !s->no_webui) { /* the page asks for the key itself */
        if (!get && strcmp(method, "HEAD")) return send_error(c, api, 405, NULL, "use GET %s", url);
        return do_webui(s, c);
    }
    if (!strcmp(url, "/health")) {
        if (!get) return send_error(c, api, 405, NULL, "use GET %s", url);
        return do_health(s, c);
    }
    if (!key_ok(s, c)) return send_error(c, api, 401, NULL, "invalid or missing API key (Authorization: Bearer or x-api-key)");
    int route = !strcmp(url, "/v1/models")               ? 1
                : !strcmp(url, "/v1/chat/completions")   ? 2
                : !strcmp(url, "/v1/completions")        ? 3
                : !strcmp(url, "/v1/messages")           ? 4
                : !strcmp(url, "/v1/messages/count_tokens") ? 5
                : !strcmp(url, "/v1/embeddings")         ? 6
                : !strcmp(url, "/v1/responses")          ? 7
                : !strcmp(url, "/v1/systemone")          ? 8
                : !strncmp(url, "/api/", 5)              ? 9
                                                         : 0;
    if (!route) return send_error(c, api, 404, NULL, "no route for %s %.200s", method, url);
    if (route == 9 && get) return do_ollama_get(s, c, url);
    /* an Ollama route this server does not have: 404 for any method (not "use POST") */
    static const char *const ollama_posts[] = {"/api/chat", "/api/generate", "/api/embed", "/api/embeddings",
                                               "/api/show", "/api/tags", "/api/ps", "/api/version", NULL};
    int ollama_known = 0;
    for (int k = 0; route == 9 && ollama_posts[k]; k++) ollama_known |= !strcmp(url, ollama_posts[k]);
    if (route == 9 && !ollama_known)
        return send_error(c, api, 404, NULL, "no route for %s %.200s (pull, create, copy, delete and push are not "
                                             "part of cinfer serve: see cinfer pull)", method, url);
    if (route == 1) {
        if (!get) return send_error(c, api, 405, NULL, "use GET %s", url);
        return do_models(s, c);
    }
    if (!post) return send_error(c, api, 405, NULL, "use POST %s", url);
    if (rq->too_large)
        return send_error(c, api, 413, NULL, "request body exceeds %zu bytes", s->max_body);
    if (rq->body.oom) return send_error(c, api, 500, NULL, "out of memory");
    bad_req pb = {0};
    cJSON *r = parse_body(rq->body.p, rq->body.len, &pb);
    if (!r) return send_error(c, api, pb.status, pb.param[0] ? pb.param : NULL, "%s", pb.msg);
    if (route == 8) return do_decide(s, c, r);
    if (route == 9) return do_ollama_post(s, c, url, r);
    srv *hub = s;
    if (!(s = pick_model(hub, r))) {
        enum MHD_Result ret = send_no_model(hub, c, api, r);
        cJSON_Delete(r);
        return ret;
    }
    if (route == 6) return do_embeddings(s, c, r);
    int kind = route == 2 ? API_CHAT : route == 3 ? API_COMPL : route == 7 ? API_RESP : API_MSG;
    bad_req b = {0};
    srv_job *j = parse_job(s, kind, r, &b, route == 5);
    cJSON_Delete(r);
    if (!j) return send_error(c, api, b.status, b.param[0] ? b.param : NULL, "%s", b.msg);
    if (route == 5) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "input_tokens", (double)prompt_tokens(j));
        job_unref(j);
        return send_json(c, MHD_HTTP_OK, o, 0);
    }
    return run_job(s, c, j);
}

unsigned srv_check_request(srv *s, const char *route, const char *body, size_t len, char *msg, size_t cap) {
    int kind = !strcmp(route, "/v1/chat/completions")        ? API_CHAT
               : !strcmp(route, "/v1/completions")           ? API_COMPL
               : !strcmp(route, "/v1/messages")              ? API_MSG
               : !strcmp(route, "/v1/messages/count_tokens") ? API_MSG
               : !strcmp(route, "/v1/responses")             ? API_RESP
                                                             : -1;
    if (kind < 0) {
        snprintf(msg, cap, "no route for POST %.200s", route);
        return 404;
    }
    bad_req b = {0};
    cJSON *r = parse_body(body, len, &b);
    if (!r) {
        snprintf(msg, cap, "%s", b.msg);
        return b.status;
    }
    srv_job *j = parse_job(s, kind, r, &b, !strcmp(route, "/v1/messages/count_tokens"));
    cJSON_Delete(r);
    if (!j) {
        snprintf(msg, cap, "%s", b.msg);
        return b.status;
    }
    job_unref(j);
    snprintf(msg, cap, "ok");
    return 200;
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    srv *s = cls;
    (void)c, (void)toe;
    req_ctx *rq = *con_cls;
    if (!rq) return;
    pthread_mutex_lock(&s->mu);
    s->n_active--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(rq->body.p);
    free(rq);
    *con_cls = NULL;
}

/* ---- start / stop ---------------------------------------------------------------------------- */

/* A model's half of the server: its session, queue and worker thread. */
static int model_start(srv *hub, const char *name, cinfer_model *m, const srv_options *o, srv **out, char *err,
                       size_t err_len) {
    srv *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(name))) {
        free(s);
        snprintf(err, err_len, "out of memory");
        return CINFER_ENOMEM;
    }
    *out = s;
    s->hub = hub ? hub : s;
    s->m = m;
    s->queue_max = o->queue_max > 0 ? o->queue_max : 16;
    s->max_body = o->max_body_bytes ? o->max_body_bytes : (size_t)8 << 20;
    s->n_threads = o->n_threads;
    s->no_webui = o->no_webui;
    s->started = (long)time(NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    char e[400];
    int rc = cinfer_session_new(m, &(cinfer_session_options){.n_ctx = o->n_ctx, .n_threads = o->n_threads},
                                &s->sess, e, sizeof e);
    if (rc) {
        snprintf(err, err_len, "model '%s': %s", name, e);
        return rc;
    }
    s->n_ctx = cinfer_session_n_ctx(s->sess);
    /* can the template render a conversation?  (no: chat-like requests are a 400 naming why) */
    char *probe = NULL;
    int prc = cinfer_chat_prompt_json(m, "[{\"role\":\"user\",\"content\":\"Hi\"}]", NULL, 1, &probe,
                                      s->chat_err, sizeof s->chat_err);
    cinfer_free(probe);
    s->chat = prc != CINFER_EUNSUPPORTED;
    if (s->chat) s->chat_err[0] = 0;
    if ((s->encoder = cinfer_model_is_encoder(m))) {
        s->chat = 0;
        snprintf(s->chat_err, sizeof s->chat_err, "an embedding model");
    }
    if (pthread_create(&s->worker, NULL, worker_main, s)) {
        snprintf(err, err_len, "cannot start the worker thread");
        return CINFER_ENOMEM;
    }
    s->worker_started = 1;
    return 0;
}

int srv_start(cinfer_model *m, const srv_options *opts, srv **out, char *err, size_t err_len) {
    srv_options o = opts ? *opts : (srv_options){0};
    *out = NULL;
    const char *host = o.host ? o.host : "127.0.0.1";
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (strchr(host, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)o.port);
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) goto bad_host;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)o.port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1) goto bad_host;
    }
    if (o.api_key) { /* an empty key would make an empty header authenticate */
        const char *k = o.api_key;
        while (*k == ' ' || *k == '\t' || *k == '\r' || *k == '\n') k++;
        if (!*k) {
            snprintf(err, err_len, "--api-key is empty or all whitespace; give a real key or leave it out");
            return CINFER_EARG;
        }
    }
    if (o.port < 0 || o.port > 65535) {
        snprintf(err, err_len, "port %d out of range 0..65535", o.port);
        return CINFER_EARG;
    }
    /* the models: m (named model_name) first, then o.models */
    int n_extra = o.n_models > 0 && o.models ? o.n_models : 0, total = (m ? 1 : 0) + n_extra;
    if (total == 0) {
        snprintf(err, err_len, "no model to serve");
        return CINFER_EARG;
    }
    for (int i = 0; i < total; i++) {
        const char *ni = m && i == 0 ? (o.model_name ? o.model_name : "default") : o.models[i - (m ? 1 : 0)].name;
        const cinfer_model *mi = m && i == 0 ? m : o.models[i - (m ? 1 : 0)].m;
        if (!ni || !ni[0] || !mi) {
            snprintf(err, err_len, "model %d: %s", i + 1, !mi ? "no model handle" : "empty name");
            return CINFER_EARG;
        }
        for (int k = 0; k < i; k++) {
            const char *nk = m && k == 0 ? (o.model_name ? o.model_name : "default") : o.models[k - (m ? 1 : 0)].name;
            if (!strcmp(ni, nk)) {
                snprintf(err, err_len, "two models are named '%s'; names must be unique", ni);
                return CINFER_EARG;
            }
        }
    }
    srv **list = calloc((size_t)total, sizeof *list);
    if (!list) return CINFER_ENOMEM;
    srv *s = NULL;
    int rc = 0;
    for (int i = 0; i < total && !rc; i++) {
        const srv_model *x = m && i == 0 ? NULL : &o.models[i - (m ? 1 : 0)];
        srv *t = NULL;
        rc = model_start(s, x ? x->name : o.model_name ? o.model_name : "default", x ? x->m : m, &o, &t, err,
                         err_len);
        if (!t) break;
        if (!s) {
            s = t;
            s->models = list;
        }
        t->n_req = (unsigned long long)s->n_models << 40; /* request ids unique across models */
        list[s->n_models++] = t;
    }
    if (!s) {
        free(list);
        return rc ? rc : CINFER_ENOMEM;
    }
    if (rc) goto fail;
    s->api_key = o.api_key ? strdup(o.api_key) : NULL;
    if (o.api_key && !s->api_key) { /* never run open because a copy failed */
        rc = CINFER_ENOMEM;
        goto fail;
    }
    snprintf(s->bind_host, sizeof s->bind_host, strchr(host, ':') ? "[%s]" : "%s", host);
    s->loopback = !strncmp(host, "127.", 4) || !strcmp(host, "::1");
    if (o.n_cors_origins > 0 && o.cors_origins) {
        if (!(s->cors = calloc((size_t)o.n_cors_origins, sizeof *s->cors))) {
            rc = CINFER_ENOMEM;
            goto fail;
        }
        for (int i = 0; i < o.n_cors_origins; i++, s->n_cors++)
            if (!(s->cors[i] = strdup(o.cors_origins[i] ? o.cors_origins[i] : ""))) {
                rc = CINFER_ENOMEM;
                goto fail;
            }
    }
    if (!s->no_webui && !(s->csp = srv_webui_csp())) {
        snprintf(err, err_len, "the web UI page is not embedded in this build");
        rc = CINFER_EFORMAT;
        goto fail;
    }
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                                (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
                            (uint16_t)o.port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_NOTIFY_COMPLETED, request_done, s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)256, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)SRV_IDLE_TIMEOUT_S, MHD_OPTION_END);
    if (!s->d) {
        snprintf(err, err_len, "cannot listen on %s:%d (address in use, or not local?)", host, o.port);
        rc = CINFER_EIO;
        goto fail;
    }
    *out = s;
    return 0;
fail:
    srv_stop(s);
    return rc ? rc : CINFER_EIO;
bad_host:
    snprintf(err, err_len, "--host '%s' is not an IPv4 or IPv6 address", host);
    return CINFER_EARG;
}

int srv_port(const srv *s) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    return info ? (int)info->port : 0;
}

void srv_stop(srv *s) {
    if (!s) return;
    /* stop accepting; the listening socket is then ours to close */
    MHD_socket lfd = s->d ? MHD_quiesce_daemon(s->d) : MHD_INVALID_SOCKET;
    /* each worker finishes queued jobs as cancelled, the running one at its next token */
    for (int i = 0; i < s->n_models; i++) {
        srv *t = s->models[i];
        pthread_mutex_lock(&t->mu);
        t->stopping = 1;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
    }
    for (int i = 0; i < s->n_models; i++)
        if (s->models[i]->worker_started) pthread_join(s->models[i]->worker, NULL);
    /* let answers in flight go out — final stream events, 503s for the queue
     * (bounded: a stalled client must not hold up the shutdown) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 2;
    pthread_mutex_lock(&s->mu);
    while (s->n_active > 0 && pthread_cond_timedwait(&s->cv, &s->mu, &ts) != ETIMEDOUT) {}
    pthread_mutex_unlock(&s->mu);
    if (s->d) MHD_stop_daemon(s->d); /* joins connection threads: every job is done by now */
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    for (int i = s->n_models - 1; i >= 0; i--) {
        srv *t = s->models[i];
        cinfer_session_free(t->sess);
        cinfer_session_free(t->esess);
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        free(t->name);
        if (t != s) free(t);
    }
    free(s->models);
    free(s->api_key);
    free(s->csp);
    for (int i = 0; i < s->n_cors; i++) free(s->cors[i]);
    free(s->cors);
    free(s);
}
