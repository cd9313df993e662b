/*
 * srv.c — `cinfer serve`'s HTTP server (srv.h): request parsing and
 * validation, the OpenAI and Anthropic response shapes, SSE streaming, and
 * the decode worker with its bounded queue.
 *
 * Threads.  libmicrohttpd gives each connection its own thread, so a handler
 * may block: it parses and validates the body, renders the chat template and
 * tokenizes the prompt (the model is read-only and shared), then enqueues a
 * job.  The single worker thread owns the session and runs jobs in order,
 * which keeps the KV cache of the previous request for prefix reuse.  A
 * non-streaming handler waits for its job; a streaming one returns a
 * callback response whose reader drains the SSE bytes the worker appends.
 * One mutex and one condition variable guard the queue and every job's
 * output — contention is one wake-up per token, far below decode cost.
 *
 * Lifetime.  A job is referenced by its handler or its stream response and
 * by the worker; the last unref frees it.  When the stream response is
 * destroyed (client gone, or done) the job is marked cancelled and the
 * worker's token callback stops generation.
 */
#include "srv.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <errno.h>
#include <microhttpd.h>
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

enum { API_CHAT, API_COMPL, API_MSG };

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
};

static void job_unref_locked(srv_job *j) {
    if (--j->refs > 0) return;
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->stop);
    free(j->ids);
    free(j->out.p);
    free(j->text.p);
    free(j);
}
static void job_unref(srv_job *j) {
    srv *s = j->s;
    pthread_mutex_lock(&s->mu);
    job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
}

static const char *finish_openai(cinfer_stop_reason r) {
    return r == CINFER_STOP_MAX_TOKENS || r == CINFER_STOP_CTX_FULL ? "length" : "stop";
}
static const char *finish_anthropic(cinfer_stop_reason r) {
    if (r == CINFER_STOP_MAX_TOKENS || r == CINFER_STOP_CTX_FULL) return "max_tokens";
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

static void emit_delta(srv *s, srv_job *j, const char *piece, size_t len) {
    sbuf *b = &j->out;
    char num[32];
    switch (j->api) {
    case API_CHAT:
    case API_COMPL:
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
        sb_str(b, j->api == API_CHAT ? "},\"logprobs\":null,\"finish_reason\":null}]}\n\n"
                                     : ",\"logprobs\":null,\"finish_reason\":null}]}\n\n");
        break;
    case API_MSG:
        sb_str(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
                  "\"delta\":{\"type\":\"text_delta\",\"text\":");
        sb_json(b, piece, len);
        sb_str(b, "}}\n\n");
        break;
    }
}

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
    return u;
}

/* The opening events, written by the handler before the job is queued so the
 * client sees its headers at once. */
static void emit_head(srv *s, srv_job *j) {
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
        cJSON_AddNumberToObject(u, "input_tokens", (double)j->n_ids);
        cJSON_AddNumberToObject(u, "output_tokens", 0);
        emit_event(&j->out, "message_start", e);
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", "content_block_start");
        cJSON_AddNumberToObject(e, "index", 0);
        cJSON *cb = cJSON_AddObjectToObject(e, "content_block");
        cJSON_AddStringToObject(cb, "type", "text");
        cJSON_AddStringToObject(cb, "text", "");
        emit_event(&j->out, "content_block_start", e);
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", "ping");
        emit_event(&j->out, "ping", e);
    }
}

static void emit_tail(srv *s, srv_job *j) {
    sbuf *b = &j->out;
    if (j->gen_rc) {
        cJSON *e = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(e, "error");
        if (j->api == API_MSG) {
            cJSON_AddStringToObject(e, "type", "error");
            cJSON_AddStringToObject(er, "type", "api_error");
            cJSON_AddStringToObject(er, "message", j->err);
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
    if (j->api == API_MSG) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", "content_block_stop");
        cJSON_AddNumberToObject(e, "index", 0);
        emit_event(b, "content_block_stop", e);
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", "message_delta");
        cJSON *d = cJSON_AddObjectToObject(e, "delta");
        cJSON_AddStringToObject(d, "stop_reason", finish_anthropic(j->res.stop));
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
    cJSON *c = oai_chunk(s, j), *ch = cJSON_AddArrayToObject(c, "choices"), *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", 0);
    if (j->api == API_CHAT) cJSON_AddObjectToObject(o, "delta");
    else cJSON_AddStringToObject(o, "text", "");
    cJSON_AddNullToObject(o, "logprobs");
    cJSON_AddStringToObject(o, "finish_reason", finish_openai(j->res.stop));
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

static int on_token(const char *piece, size_t len, int32_t token, void *user) {
    srv_job *j = user;
    srv *s = j->s;
    pthread_mutex_lock(&s->mu);
    int stop = j->cancelled || s->stopping;
    if (!stop && len) {
        sb_put(&j->text, piece, len);
        if (j->stream) {
            emit_delta(s, j, piece, len);
            pthread_cond_broadcast(&s->cv);
        }
        stop = j->out.oom || j->text.oom;
    }
    pthread_mutex_unlock(&s->mu);
    return stop;
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
            j->gen_rc = CINFER_EARG;
            snprintf(j->err, sizeof j->err, "%s", s->stopping ? "server shutting down" : "request cancelled");
        } else {
            s->busy = 1;
            pthread_mutex_unlock(&s->mu);
            cinfer_gen_result res = {0};
            char err[256] = "";
            int rc = cinfer_generate_tokens(s->sess, j->ids, j->n_ids, &j->go, on_token, j, &res, err,
                                            sizeof err);
            if (rc) cinfer_session_reset(s->sess);
            pthread_mutex_lock(&s->mu);
            s->busy = 0;
            j->res = res;
            j->gen_rc = rc;
            if (!rc) j->stop_hit = matched_stop(s, j);
            if (rc) snprintf(j->err, sizeof j->err, "generation failed: %.230s", err);
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
    cJSON *e = cJSON_CreateObject();
    if (api == API_MSG) {
        const char *type = status == 401   ? "authentication_error"
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

/* A validation failure: the field (param) and message, answered with 400. */
typedef struct {
    char param[96];
    char msg[400];
    unsigned status;
} bad_req;

static int bad(bad_req *b, unsigned status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(bad_req *b, unsigned status, const char *param, const char *fmt, ...) {
    b->status = status;
    snprintf(b->param, sizeof b->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* Optional number field in [lo, hi]; 0 when absent or valid. */
static int get_num(cJSON *o, const char *key, double lo, double hi, int integer, double *out, bad_req *b) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v)) return bad(b, 400, key, "'%s' must be a number", key);
    double d = v->valuedouble;
    if (integer && d != (double)(long long)d) return bad(b, 400, key, "'%s' must be an integer, got %g", key, d);
    if (!(d >= lo && d <= hi)) return bad(b, 400, key, "'%s' must be in [%g, %g], got %g", key, lo, hi, d);
    *out = d;
    return 1;
}

/* Text of an OpenAI or Anthropic content value: a string, or an array of
 * {"type":"text","text":..} parts, joined.  malloc'd; NULL with b filled. */
static char *content_text(cJSON *v, const char *where, bad_req *b) {
    if (cJSON_IsString(v)) return strdup(v->valuestring);
    if (!cJSON_IsArray(v)) {
        bad(b, 400, where, "'%s' must be a string or an array of text blocks", where);
        return NULL;
    }
    sbuf t = {0};
    sb_put(&t, "", 0);
    int i = 0;
    cJSON *part;
    cJSON_ArrayForEach(part, v) {
        cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type");
        cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) {
            char p[96];
            snprintf(p, sizeof p, "%s[%d]", where, i);
            bad(b, 400, p, "'%s' must be a text block {\"type\":\"text\",\"text\":...}%s%s", p,
                cJSON_IsString(ty) ? "; unsupported type " : "", cJSON_IsString(ty) ? ty->valuestring : "");
            free(t.p);
            return NULL;
        }
        sb_str(&t, tx->valuestring);
        i++;
    }
    if (t.oom) {
        free(t.p);
        bad(b, 500, where, "out of memory");
        return NULL;
    }
    return t.p;
}

static int parse_stop(srv_job *j, cJSON *v, const char *key, bad_req *b) {
    if (!v || cJSON_IsNull(v)) return 0;
    int n = cJSON_IsString(v) ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < 0 || n > 16) return bad(b, 400, key, "'%s' must be a string or an array of at most 16 strings", key);
    j->stop = calloc((size_t)n + 1, sizeof *j->stop);
    if (!j->stop) return bad(b, 500, key, "out of memory");
    if (cJSON_IsString(v)) {
        j->stop[0] = strdup(v->valuestring);
        j->n_stop = 1;
    } else {
        cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (!cJSON_IsString(e) || !e->valuestring[0])
                return bad(b, 400, key, "'%s[%d]' must be a non-empty string", key, j->n_stop);
            j->stop[j->n_stop++] = strdup(e->valuestring);
        }
    }
    for (int i = 0; i < j->n_stop; i++)
        if (!j->stop[i]) return bad(b, 500, key, "out of memory");
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
    if ((rc = get_num(r, "temperature", 0, 2, 0, &d, b)) < 0) return -1;
    if (rc) j->go.temperature = (float)d;
    if ((rc = get_num(r, "top_p", 0, 1, 0, &d, b)) < 0) return -1;
    if (rc) j->go.top_p = (float)d;
    if ((rc = get_num(r, "top_k", 0, 1e9, 1, &d, b)) < 0) return -1;
    if (rc) j->go.top_k = (int)d;
    if ((rc = get_num(r, "min_p", 0, 1, 0, &d, b)) < 0) return -1;
    if (rc) j->go.min_p = (float)d;
    if ((rc = get_num(r, "seed", -9.2e18, 9.2e18, 1, &d, b)) < 0) return -1;
    j->go.seed = rc ? (uint64_t)(int64_t)d : (uint64_t)time(NULL) * 6364136223846793005ull + s->n_req;
    j->go.parse_special = 1;
    return 0;
}

static int parse_max_tokens(srv_job *j, cJSON *r, const char *key, int required, bad_req *b) {
    double d;
    int rc = get_num(r, key, 1, 1e9, 1, &d, b);
    if (rc < 0) return -1;
    if (!rc && required) return bad(b, 400, key, "'%s' is required", key);
    if (rc) j->go.max_tokens = (int)d;
    return 0;
}

static int check_model(srv *s, cJSON *r, int required, bad_req *b) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "model");
    if (!v || cJSON_IsNull(v)) return required ? bad(b, 400, "model", "'model' is required") : 0;
    if (!cJSON_IsString(v)) return bad(b, 400, "model", "'model' must be a string");
    if (strcmp(v->valuestring, s->name))
        return bad(b, 404, "model", "model '%.200s' not found; this server has '%.200s'", v->valuestring,
                   s->name);
    return 0;
}

/* Build the cinfer_message list of a chat request into msgs (n_max), with the
 * texts malloc'd into texts[].  OpenAI: messages[] with system/developer/
 * user/assistant roles.  Anthropic: a top-level system plus user/assistant. */
static int parse_messages(int api, cJSON *r, cinfer_message *msgs, char **texts, size_t n_max, size_t *n,
                          bad_req *b) {
    *n = 0;
    if (api == API_MSG) {
        cJSON *sys = cJSON_GetObjectItemCaseSensitive(r, "system");
        if (sys && !cJSON_IsNull(sys)) {
            char *t = content_text(sys, "system", b);
            if (!t) return -1;
            texts[*n] = t;
            msgs[(*n)++] = (cinfer_message){"system", t};
        }
    }
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(r, "messages");
    if (!arr) return bad(b, 400, "messages", "'messages' is required");
    if (!cJSON_IsArray(arr) || !cJSON_GetArraySize(arr))
        return bad(b, 400, "messages", "'messages' must be a non-empty array");
    if ((size_t)cJSON_GetArraySize(arr) + *n > n_max)
        return bad(b, 400, "messages", "'messages' has more than %zu entries", n_max - 1);
    int i = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, arr) {
        char p[64];
        snprintf(p, sizeof p, "messages[%d].role", i);
        cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m)) return bad(b, 400, p, "'messages[%d]' must be an object", i);
        if (!cJSON_IsString(role)) return bad(b, 400, p, "'%s' is required", p);
        const char *rs = role->valuestring;
        int ok = !strcmp(rs, "user") || !strcmp(rs, "assistant") ||
                 (api != API_MSG && (!strcmp(rs, "system") || !strcmp(rs, "developer")));
        if (!ok)
            return bad(b, 400, p, "'%s' must be one of %s, got '%.64s'", p,
                       api == API_MSG ? "user, assistant" : "system, developer, user, assistant", rs);
        snprintf(p, sizeof p, "messages[%d].content", i);
        cJSON *ct = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!ct || cJSON_IsNull(ct)) return bad(b, 400, p, "'%s' is required", p);
        char *t = content_text(ct, p, b);
        if (!t) return -1;
        texts[*n] = t;
        msgs[(*n)++] = (cinfer_message){!strcmp(rs, "developer") ? "system" : rs, t};
        i++;
    }
    return 0;
}

/* Tokenize text (add_special: the model's BOS; parse_special: control-token
 * text) into j->ids, checking it leaves room to generate in n_ctx. */
static int tokenize_prompt(srv *s, srv_job *j, const char *text, int parse_special, bad_req *b) {
    size_t cap = (size_t)s->n_ctx + 1, n = 0;
    j->ids = malloc(cap * sizeof *j->ids);
    if (!j->ids) return bad(b, 500, NULL, "out of memory");
    int rc = cinfer_tokenize(s->m, text, strlen(text), 1, parse_special, j->ids, cap, &n);
    if (rc == CINFER_EARG || n >= (size_t)s->n_ctx)
        return bad(b, 400, j->api == API_COMPL ? "prompt" : "messages",
                   "the prompt is %zu tokens; the context holds %d (prompt plus output)", n, s->n_ctx);
    if (rc) return bad(b, 500, NULL, "tokenizer failed (%d)", rc);
    /* a template that writes BOS itself, on a vocabulary that adds BOS: keep one */
    int32_t bos = cinfer_token_bos(s->m);
    if (parse_special && n >= 2 && bos >= 0 && j->ids[0] == bos && j->ids[1] == bos) {
        memmove(j->ids, j->ids + 1, (n - 1) * sizeof *j->ids);
        n--;
    }
    j->n_ids = n;
    return 0;
}

/* Parse a generation request body into a new job (refs 1); NULL with b set. */
static srv_job *parse_job(srv *s, int api, cJSON *r, bad_req *b, int count_only) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) {
        bad(b, 500, NULL, "out of memory");
        return NULL;
    }
    j->s = s;
    j->refs = 1;
    j->api = api;
    enum { MAX_MSGS = 1024 };
    cinfer_message *msgs = NULL;
    char **texts = NULL;
    size_t n = 0;
    char *prompt = NULL;
    int ok = 0;
    if (!cJSON_IsObject(r)) {
        bad(b, 400, NULL, "the request body must be a JSON object");
        goto out;
    }
    if (check_model(s, r, api == API_MSG, b)) goto out;
    if (api == API_COMPL) {
        cJSON *p = cJSON_GetObjectItemCaseSensitive(r, "prompt");
        if (!p) {
            bad(b, 400, "prompt", "'prompt' is required");
            goto out;
        }
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
            p = cJSON_GetArrayItem(p, 0);
        if (!cJSON_IsString(p)) {
            bad(b, 400, "prompt", "'prompt' must be a string (or an array of one string)");
            goto out;
        }
        if (tokenize_prompt(s, j, p->valuestring, 0, b)) goto out;
    } else {
        msgs = calloc(MAX_MSGS + 1, sizeof *msgs);
        texts = calloc(MAX_MSGS + 1, sizeof *texts);
        if (!msgs || !texts) {
            bad(b, 500, NULL, "out of memory");
            goto out;
        }
        if (parse_messages(api, r, msgs, texts, MAX_MSGS + 1, &n, b)) goto out;
        char err[256];
        int rc = cinfer_chat_prompt(s->m, msgs, n, 1, &prompt, err, sizeof err);
        if (rc) {
            bad(b, rc == CINFER_EUNSUPPORTED ? 500 : 400, "messages", "chat template: %s", err);
            goto out;
        }
        if (tokenize_prompt(s, j, prompt, 1, b)) goto out;
    }
    if (count_only) {
        ok = 1;
        goto out;
    }
    if (parse_sampling(s, j, r, b)) goto out;
    if (api == API_MSG) {
        if (parse_max_tokens(j, r, "max_tokens", 1, b)) goto out;
        if (parse_stop(j, cJSON_GetObjectItemCaseSensitive(r, "stop_sequences"), "stop_sequences", b)) goto out;
    } else {
        if (parse_max_tokens(j, r, "max_tokens", 0, b)) goto out;
        if (api == API_CHAT && parse_max_tokens(j, r, "max_completion_tokens", 0, b)) goto out;
        if (parse_stop(j, cJSON_GetObjectItemCaseSensitive(r, "stop"), "stop", b)) goto out;
        cJSON *nn = cJSON_GetObjectItemCaseSensitive(r, "n");
        if (nn && !cJSON_IsNull(nn) && !(cJSON_IsNumber(nn) && nn->valuedouble == 1)) {
            bad(b, 400, "n", "'n' must be 1 (one choice per request)");
            goto out;
        }
    }
    cJSON *st = cJSON_GetObjectItemCaseSensitive(r, "stream");
    if (st && !cJSON_IsNull(st) && !cJSON_IsBool(st)) {
        bad(b, 400, "stream", "'stream' must be a boolean");
        goto out;
    }
    j->stream = cJSON_IsTrue(st);
    cJSON *so = cJSON_GetObjectItemCaseSensitive(r, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        cJSON *iu = cJSON_GetObjectItemCaseSensitive(so, "include_usage");
        if (!cJSON_IsObject(so) || (iu && !cJSON_IsBool(iu))) {
            bad(b, 400, "stream_options", "'stream_options' must be an object with boolean include_usage");
            goto out;
        }
        j->include_usage = cJSON_IsTrue(iu);
    }
    ok = 1;
out:
    for (size_t i = 0; texts && i < n; i++) free(texts[i]);
    free(texts);
    free(msgs);
    cinfer_free(prompt);
    if (!ok) {
        job_unref(j);
        return NULL;
    }
    return j;
}

/* ---- responses --------------------------------------------------------------------------- */

static cJSON *final_body(srv *s, srv_job *j) {
    cJSON *o = cJSON_CreateObject();
    const char *text = j->text.p ? j->text.p : "";
    if (j->api == API_MSG) {
        cJSON_AddStringToObject(o, "id", j->id);
        cJSON_AddStringToObject(o, "type", "message");
        cJSON_AddStringToObject(o, "role", "assistant");
        cJSON_AddStringToObject(o, "model", s->name);
        cJSON *c = cJSON_AddArrayToObject(o, "content"), *blk = cJSON_CreateObject();
        cJSON_AddStringToObject(blk, "type", "text");
        cJSON_AddStringToObject(blk, "text", text);
        cJSON_AddItemToArray(c, blk);
        cJSON_AddStringToObject(o, "stop_reason", finish_anthropic(j->res.stop));
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
        cJSON_AddStringToObject(m, "content", text);
    } else {
        cJSON_AddStringToObject(c0, "text", text);
    }
    cJSON_AddNullToObject(c0, "logprobs");
    cJSON_AddStringToObject(c0, "finish_reason", finish_openai(j->res.stop));
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
            !j->done) {
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
    const char *pre = j->api == API_CHAT ? "chatcmpl-" : j->api == API_COMPL ? "cmpl-" : "msg_";
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
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
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
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result ret;
    if (j->gen_rc)
        ret = send_error(c, j->api, s->stopping ? 503 : 500, NULL, "%s", j->err);
    else if (j->text.oom)
        ret = send_error(c, j->api, 500, NULL, "out of memory");
    else
        ret = send_json(c, MHD_HTTP_OK, final_body(s, j), 0);
    job_unref(j);
    return ret;
}

/* ---- routes ------------------------------------------------------------------------------- */

static enum MHD_Result do_health(srv *s, struct MHD_Connection *c) {
    cJSON *o = cJSON_CreateObject();
    pthread_mutex_lock(&s->mu);
    int q = s->n_queued, busy = s->busy;
    pthread_mutex_unlock(&s->mu);
    cJSON_AddStringToObject(o, "status", "ok");
    cJSON_AddStringToObject(o, "model", s->name);
    cJSON_AddNumberToObject(o, "queued", q);
    cJSON_AddNumberToObject(o, "busy", busy);
    return send_json(c, MHD_HTTP_OK, o, 0);
}

static enum MHD_Result do_models(srv *s, struct MHD_Connection *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->started);
    cJSON_AddStringToObject(m, "owned_by", "cinfer");
    cJSON_AddItemToArray(d, m);
    return send_json(c, MHD_HTTP_OK, o, 0);
}

static int key_ok(srv *s, struct MHD_Connection *c) {
    if (!s->api_key) return 1;
    const char *x = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    if (x && !strcmp(x, s->api_key)) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return a && !strncasecmp(a, "Bearer ", 7) && !strcmp(a + 7, s->api_key);
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
    int api = !strncmp(url, "/v1/messages", 12) ? API_MSG : API_CHAT;
    int post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
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
                                                         : 0;
    if (!route) return send_error(c, api, 404, NULL, "no route for %s %.200s", method, url);
    if (route == 1) {
        if (!get) return send_error(c, api, 405, NULL, "use GET %s", url);
        return do_models(s, c);
    }
    if (!post) return send_error(c, api, 405, NULL, "use POST %s", url);
    if (rq->too_large)
        return send_error(c, api, 413, NULL, "request body exceeds %zu bytes", s->max_body);
    if (rq->body.oom) return send_error(c, api, 500, NULL, "out of memory");
    const char *end = NULL;
    cJSON *r = cJSON_ParseWithLengthOpts(rq->body.p ? rq->body.p : "", rq->body.len, &end, 0);
    if (!r) {
        size_t at = end && rq->body.p ? (size_t)(end - rq->body.p) : 0;
        return send_error(c, api, 400, NULL, "the request body is not valid JSON (error at byte %zu of %zu)", at,
                          rq->body.len);
    }
    int kind = route == 2 ? API_CHAT : route == 3 ? API_COMPL : API_MSG;
    bad_req b = {0};
    srv_job *j = parse_job(s, kind, r, &b, route == 5);
    cJSON_Delete(r);
    if (!j) return send_error(c, api, b.status, b.param[0] ? b.param : NULL, "%s", b.msg);
    if (route == 5) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "input_tokens", (double)j->n_ids);
        job_unref(j);
        return send_json(c, MHD_HTTP_OK, o, 0);
    }
    return run_job(s, c, j);
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
    if (o.port < 0 || o.port > 65535) {
        snprintf(err, err_len, "port %d out of range 0..65535", o.port);
        return CINFER_EARG;
    }
    srv *s = calloc(1, sizeof *s);
    if (!s) return CINFER_ENOMEM;
    s->m = m;
    s->name = strdup(o.model_name ? o.model_name : "default");
    s->api_key = o.api_key ? strdup(o.api_key) : NULL;
    s->queue_max = o.queue_max > 0 ? o.queue_max : 16;
    s->max_body = o.max_body_bytes ? o.max_body_bytes : (size_t)8 << 20;
    s->started = (long)time(NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    int rc = cinfer_session_new(m, &(cinfer_session_options){.n_ctx = o.n_ctx, .n_threads = o.n_threads},
                                &s->sess, err, err_len);
    if (rc) goto fail;
    s->n_ctx = cinfer_session_n_ctx(s->sess);
    if (pthread_create(&s->worker, NULL, worker_main, s)) {
        snprintf(err, err_len, "cannot start the worker thread");
        rc = CINFER_ENOMEM;
        goto fail;
    }
    s->worker_started = 1;
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                                (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
                            (uint16_t)o.port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_NOTIFY_COMPLETED, request_done, s, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)256, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)600, MHD_OPTION_END);
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
    pthread_mutex_lock(&s->mu);
    s->stopping = 1; /* the worker finishes queued jobs as cancelled, the running one at its next token */
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->worker_started) pthread_join(s->worker, NULL);
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
    cinfer_session_free(s->sess);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->name);
    free(s->api_key);
    free(s);
}
