/*
 * http_client.h — the serve tests' HTTP side (test_serve*.c): an in-process
 * `srv` on a loopback port, a libcurl client for it, dotted-path getters on
 * the cJSON answers and a Server-Sent Events splitter.
 *
 * Errors are reported with test_fail (test.h) and the functions return what
 * they have (a status of 0, NULL JSON), so a test goes on to its checks.
 */
#ifndef CINFER_HTTP_CLIENT_H
#define CINFER_HTTP_CLIENT_H

#include "server/srv.h"

#include <cJSON.h>
#include <stdatomic.h>
#include <stddef.h>

/* ---- a served model ---------------------------------------------------------------------- */

typedef struct {
    cinfer_model *m;  /* the model at path, served as o.model_name */
    cinfer_model *m2; /* the model at path2 (NULL when none), served as name2 */
    srv *s;
    char base[64];    /* "http://127.0.0.1:PORT" */
} http_srv;

/* Open the model at path (and path2 when non-NULL, added to the served models
 * as name2; o.models / o.n_models must then be unset) and srv_start it with
 * o on an ephemeral port (o.port is overridden with 0).  0, or test_fail and
 * -1 with nothing left open. */
int http_srv_start(http_srv *f, const char *path, const char *path2, const char *name2, srv_options o);
void http_srv_stop(http_srv *f); /* srv_stop, then close the models */

/* ---- requests ---------------------------------------------------------------------------- */

/* The response body, and optional controls of the transfer (zero = off). */
typedef struct {
    char *p;               /* the body so far, NUL-terminated; malloc'd, the caller frees; NULL when none */
    size_t len;            /* bytes in p */
    size_t abort_after;    /* nonzero: abort the transfer once this many bytes arrived */
    atomic_int *hold; /* non-NULL: after the first bytes, block while *hold, then abort (a client that goes away) */
    atomic_int *got_bytes; /* non-NULL: set to 1 when bytes arrive */
    long timeout_ms;       /* whole-transfer limit; 0: 120 s */
} http_body;

/* Response headers and transfer outcome. */
typedef struct {
    long status;           /* HTTP status, 0 when no response */
    int curl_code;         /* CURLcode of the transfer (CURLE_OK, CURLE_OPERATION_TIMEDOUT, ...) */
    char content_type[128];
    char csp[1024];        /* Content-Security-Policy */
    char retry_after[16];  /* Retry-After */
} http_meta;                /* header values are trimmed of spaces and CRLF; "" when absent */

/* POST json (Content-Type: application/json) to base+path, or GET when json
 * is NULL.  extra_headers: NULL, or a NULL-terminated list of "Name: value"
 * lines (e.g. "Authorization: Bearer KEY").  The body is appended to *out
 * (zero it first); meta, when non-NULL, receives the headers.  Returns the
 * HTTP status (0 when the server did not answer). */
long http_request(const char *base, const char *path, const char *json, const char *const *extra_headers,
                  http_body *out, http_meta *meta);

/* http_request and cJSON_Parse of the body: the JSON (caller cJSON_Deletes),
 * or test_fail and NULL when the body is not JSON; *status the HTTP status. */
cJSON *http_post_json(const char *base, const char *path, const char *json, const char *const *extra_headers,
                      long *status);

/* A request run on a thread of its own:
 *     http_async a = {.base = f.base, .path = "/v1/chat/completions", .json = req};
 *     pthread_create(&t, NULL, http_async_run, &a);  ...  pthread_join(t, NULL);
 * then a.status, a.curl_code and a.text (the body; the caller frees it). */
typedef struct {
    const char *base, *path, *json;    /* as http_request */
    const char *const *extra_headers;
    int holds;                         /* nonzero: after the first bytes, block while hold, then go away */
    atomic_int hold;                   /* set it (atomic_store) before starting when holds */
    atomic_int got;                    /* set to 1 once bytes arrived */
    long timeout_ms;                   /* as http_body.timeout_ms */
    long status;                       /* results, once the thread is joined */
    int curl_code;
    char *text;
} http_async;

void *http_async_run(void *a); /* a: http_async *; returns NULL */

/* ---- JSON ---------------------------------------------------------------------------------- */

/* The value at a dotted path, numeric parts indexing arrays:
 * "choices.0.message.content"; NULL when absent (or o is NULL).  Like
 * cJSON_GetObjectItem, it returns a non-const pointer into o.  Paths up to
 * 159 characters. */
cJSON *json_at(const cJSON *o, const char *dotted_path);
const char *json_str_at(const cJSON *o, const char *dotted_path); /* NULL unless a string */
double json_num_at(const cJSON *o, const char *dotted_path);      /* -1 unless a number */

/* ---- Server-Sent Events ---------------------------------------------------------------- */

typedef struct {
    char name[48]; /* the "event:" field, "" when none */
    cJSON *data;   /* the parsed "data:" field (lines joined with "\n"); NULL for [DONE] */
    int done;      /* 1 for "data: [DONE]" */
} http_sse_event;

/* Split an SSE body (events separated by a blank line, "\n\n") into at most
 * max events; text is modified.  Blocks without a data field (comments) are
 * skipped; data that is neither JSON nor [DONE] is a test_fail.  Returns the
 * count; http_sse_free the events. */
int http_sse_parse(char *text, http_sse_event *ev, int max);
void http_sse_free(http_sse_event *ev, int n);

#endif
