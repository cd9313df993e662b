/*
 * http_client.c — the serve tests' loopback server fixture, libcurl client,
 * JSON path getters and SSE splitter (http_client.h).
 */
#include "http_client.h"
#include "test.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- a served model ---------------------------------------------------------------------- */

int http_srv_start(http_srv *f, const char *path, const char *path2, const char *name2, srv_options o) {
    char err[512];
    memset(f, 0, sizeof *f);
    if (cinfer_model_open(path, NULL, &f->m, err, sizeof err) ||
        (path2 && cinfer_model_open(path2, NULL, &f->m2, err, sizeof err))) {
        test_fail(__FILE__, __LINE__, "model open: %s", err);
        cinfer_model_close(f->m);
        return -1;
    }
    srv_model extra = {name2, f->m2};
    if (path2) o.models = &extra, o.n_models = 1;
    o.port = 0;
    if (srv_start(f->m, &o, &f->s, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "srv_start: %s", err);
        cinfer_model_close(f->m);
        cinfer_model_close(f->m2);
        return -1;
    }
    snprintf(f->base, sizeof f->base, "http://127.0.0.1:%d", srv_port(f->s));
    return 0;
}

void http_srv_stop(http_srv *f) {
    srv_stop(f->s);
    cinfer_model_close(f->m);
    cinfer_model_close(f->m2);
}

/* ---- requests ---------------------------------------------------------------------------- */

static size_t on_body(char *d, size_t sz, size_t n, void *u) {
    http_body *b = u;
    size_t k = sz * n;
    char *np = realloc(b->p, b->len + k + 1);
    if (!np) return 0;
    b->p = np;
    memcpy(b->p + b->len, d, k);
    b->len += k;
    b->p[b->len] = 0;
    if (b->got_bytes) atomic_store(b->got_bytes, 1);
    if (b->hold) {
        while (atomic_load(b->hold)) usleep(1000);
        return 0; /* abort: the client goes away mid-stream */
    }
    if (b->abort_after && b->len >= b->abort_after) return 0;
    return k;
}

/* The value of header line d (k bytes) into out when it is "name value". */
static void header_value(const char *d, size_t k, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    if (k <= nl || strncasecmp(d, name, nl)) return;
    d += nl, k -= nl;
    while (k && *d == ' ') d++, k--;
    while (k && (d[k - 1] == '\r' || d[k - 1] == '\n')) k--;
    if (k >= cap) k = cap - 1;
    memcpy(out, d, k);
    out[k] = 0;
}

static size_t on_head(char *d, size_t sz, size_t n, void *u) {
    http_meta *m = u;
    size_t k = sz * n;
    header_value(d, k, "Content-Type:", m->content_type, sizeof m->content_type);
    header_value(d, k, "Content-Security-Policy:", m->csp, sizeof m->csp);
    header_value(d, k, "Retry-After:", m->retry_after, sizeof m->retry_after);
    return k;
}

long http_request(const char *base, const char *path, const char *json, const char *const *extra_headers,
                  http_body *out, http_meta *meta) {
    http_meta scratch;
    if (!meta) meta = &scratch;
    memset(meta, 0, sizeof *meta);
    CURL *c = curl_easy_init();
    if (!c) {
        test_fail(__FILE__, __LINE__, "curl_easy_init failed");
        return 0;
    }
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    for (const char *const *x = extra_headers; x && *x; x++) h = curl_slist_append(h, *x);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (json) curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_head);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, meta);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, out->timeout_ms > 0 ? out->timeout_ms : 120000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    meta->curl_code = (int)curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &meta->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return meta->status;
}

cJSON *http_post_json(const char *base, const char *path, const char *json, const char *const *extra_headers,
                      long *status) {
    http_body b = {0};
    *status = http_request(base, path, json, extra_headers, &b, NULL);
    cJSON *j = b.p ? cJSON_Parse(b.p) : NULL;
    if (!j) test_fail(__FILE__, __LINE__, "%s: not JSON (HTTP %ld): %.300s", path, *status, b.p ? b.p : "(empty)");
    free(b.p);
    return j;
}

void *http_async_run(void *arg) {
    http_async *a = arg;
    http_body b = {.hold = a->holds ? &a->hold : NULL, .got_bytes = &a->got, .timeout_ms = a->timeout_ms};
    http_meta m;
    a->status = http_request(a->base, a->path, a->json, a->extra_headers, &b, &m);
    a->curl_code = m.curl_code;
    a->text = b.p;
    return NULL;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

cJSON *json_at(const cJSON *o, const char *dotted_path) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s", dotted_path);
    const cJSON *v = o;
    char *save = NULL;
    for (char *t = strtok_r(buf, ".", &save); t && v; t = strtok_r(NULL, ".", &save))
        v = (*t >= '0' && *t <= '9') ? cJSON_GetArrayItem(v, atoi(t)) : cJSON_GetObjectItemCaseSensitive(v, t);
    return (cJSON *)v;
}

const char *json_str_at(const cJSON *o, const char *dotted_path) {
    const cJSON *v = json_at(o, dotted_path);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

double json_num_at(const cJSON *o, const char *dotted_path) {
    const cJSON *v = json_at(o, dotted_path);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* ---- Server-Sent Events ---------------------------------------------------------------- */

int http_sse_parse(char *text, http_sse_event *ev, int max) {
    int n = 0;
    for (char *blk = text; blk && *blk && n < max;) {
        char *end = strstr(blk, "\n\n");
        if (end) *end = 0;
        memset(&ev[n], 0, sizeof ev[n]);
        char *data = NULL, *save = NULL;
        size_t dl = 0;
        for (char *line = strtok_r(blk, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (!strncmp(line, "event: ", 7)) {
                snprintf(ev[n].name, sizeof ev[n].name, "%s", line + 7);
            } else if (!strncmp(line, "data: ", 6)) { /* several data lines join with "\n" */
                size_t l = strlen(line + 6);
                char *nd = realloc(data, dl + l + 2);
                if (!nd) break;
                data = nd;
                if (dl) data[dl++] = '\n';
                memcpy(data + dl, line + 6, l + 1);
                dl += l;
            }
        }
        if (data) {
            if (!strcmp(data, "[DONE]")) ev[n].done = 1;
            else if (!(ev[n].data = cJSON_Parse(data))) test_fail(__FILE__, __LINE__, "SSE data is not JSON: %s", data);
            free(data);
            n++;
        }
        blk = end ? end + 2 : NULL;
    }
    return n;
}

void http_sse_free(http_sse_event *ev, int n) {
    for (int i = 0; i < n; i++) cJSON_Delete(ev[i].data);
}
