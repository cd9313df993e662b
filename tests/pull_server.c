/*
 * pull_server.c — the fake Hugging Face Hub of pull_server.h.  State is under
 * one mutex; file contents ("blobs") are immutable once added and live until
 * ps_stop, so a response keeps serving the bytes it started with even when the
 * test replaces the file (the CDN is content-addressed, as on the Hub).
 */
#include "pull_server.h"

#include <arpa/inet.h>
#include <cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PS_MAX 64
#define PS_CHUNK 16384
#define COMMIT "0123456789abcdef0123456789abcdef01234567"

typedef struct ps_blob {
    struct ps_blob *next;
    unsigned char *data;
    size_t size;
    char sha256[65];
    char git_oid[41];
    char pointer_oid[41]; /* git blob sha1 of the LFS pointer file */
    long long corrupt_at; /* -1 */
} ps_blob;

typedef struct { char repo[128]; char path[600]; ps_blob *blob; bool lfs; } ps_entry;
typedef struct { char name[128]; bool gated; } ps_repo;

struct pull_server {
    struct MHD_Daemon *d;
    char endpoint[64];
    pthread_mutex_t mu;
    ps_repo repos[PS_MAX];
    int n_repos;
    ps_entry entries[PS_MAX];
    int n_entries;
    ps_blob *blobs;
    int64_t bps;
    size_t cuts[PS_MAX];
    size_t n_cuts;
    int fail_n, fail_status;
    bool ignore_range;
    int page_size;
    ps_stats st;
};

static void hexdig(const EVP_MD *md, const void *hdr, size_t hlen, const void *p, size_t n, char *out) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    EVP_DigestInit_ex(c, md, NULL);
    if (hlen) EVP_DigestUpdate(c, hdr, hlen);
    EVP_DigestUpdate(c, p, n);
    EVP_DigestFinal_ex(c, d, &dl);
    EVP_MD_CTX_free(c);
    for (unsigned i = 0; i < dl; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

static ps_repo *find_repo(pull_server *s, const char *name) {
    for (int i = 0; i < s->n_repos; i++)
        if (!strcmp(s->repos[i].name, name)) return &s->repos[i];
    return NULL;
}

static ps_entry *find_entry(pull_server *s, const char *repo, const char *path) {
    for (int i = 0; i < s->n_entries; i++)
        if (!strcmp(s->entries[i].repo, repo) && !strcmp(s->entries[i].path, path)) return &s->entries[i];
    return NULL;
}

/* ==== responses ============================================================ */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *body, const char *ctype,
                             const char *err_code, const char *err_msg) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", ctype);
    if (err_code) MHD_add_response_header(r, "X-Error-Code", err_code);
    if (err_msg) MHD_add_response_header(r, "X-Error-Message", err_msg);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *code, const char *msg) {
    char body[512];
    snprintf(body, sizeof body, "{\"error\":\"%s\"}", msg);
    return reply(c, status, body, "application/json", code, msg);
}

typedef struct {
    pull_server *s;
    ps_blob *b;
    size_t start; /* absolute offset of body byte 0 */
    struct timespec t0;
} body_ctx;

static ssize_t body_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    body_ctx *bc = cls;
    pull_server *s = bc->s;
    size_t abs = bc->start + (size_t)pos;
    if (abs >= bc->b->size) return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = bc->b->size - abs;
    if (n > max) n = max;
    if (n > PS_CHUNK) n = PS_CHUNK;
    pthread_mutex_lock(&s->mu);
    /* a pending cut inside [abs, abs+n): stop right at it */
    for (size_t i = 0; i < s->n_cuts; i++) {
        if (s->cuts[i] == abs) {
            s->cuts[i] = s->cuts[--s->n_cuts];
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (s->cuts[i] > abs && s->cuts[i] < abs + n) n = s->cuts[i] - abs;
    }
    int64_t bps = s->bps;
    s->st.bytes_served += (int64_t)n;
    pthread_mutex_unlock(&s->mu);
    memcpy(buf, bc->b->data + abs, n);
    if (bc->b->corrupt_at >= 0 && (size_t)bc->b->corrupt_at >= abs && (size_t)bc->b->corrupt_at < abs + n)
        buf[bc->b->corrupt_at - (long long)abs] ^= 0x5a;
    if (bps > 0) usleep((useconds_t)((double)n * 1e6 / (double)bps));
    return (ssize_t)n;
}

static void body_free(void *cls) { free(cls); }

/* The bytes of blob b, honouring a Range header. */
static enum MHD_Result serve_blob(pull_server *s, struct MHD_Connection *c, ps_blob *b, const char *etag,
                                  bool cdn) {
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    pthread_mutex_lock(&s->mu);
    if (range) s->st.n_range++;
    bool ignore = s->ignore_range;
    pthread_mutex_unlock(&s->mu);
    size_t start = 0;
    unsigned status = MHD_HTTP_OK;
    if (range && !ignore) {
        unsigned long long a;
        if (sscanf(range, "bytes=%llu-", &a) == 1) {
            if (a >= b->size) {
                char cr[64];
                snprintf(cr, sizeof cr, "bytes */%zu", b->size);
                struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
                MHD_add_response_header(r, "Content-Range", cr);
                enum MHD_Result ret = MHD_queue_response(c, 416, r);
                MHD_destroy_response(r);
                return ret;
            }
            start = (size_t)a;
            status = MHD_HTTP_PARTIAL_CONTENT;
        }
    }
    body_ctx *bc = calloc(1, sizeof *bc);
    bc->s = s;
    bc->b = b;
    bc->start = start;
    struct MHD_Response *r = MHD_create_response_from_callback(b->size - start, PS_CHUNK, body_reader, bc, body_free);
    char q[160], cr[96];
    snprintf(q, sizeof q, "\"%s\"", etag);
    MHD_add_response_header(r, "ETag", q);
    MHD_add_response_header(r, "Accept-Ranges", "bytes");
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    if (!cdn) MHD_add_response_header(r, "X-Repo-Commit", COMMIT);
    if (status == MHD_HTTP_PARTIAL_CONTENT) {
        snprintf(cr, sizeof cr, "bytes %zu-%zu/%zu", start, b->size - 1, b->size);
        MHD_add_response_header(r, "Content-Range", cr);
    }
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result serve_tree(pull_server *s, struct MHD_Connection *c, const char *repo, const char *rev) {
    const char *cur = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "cursor");
    int from = cur ? atoi(cur) : 0;
    pthread_mutex_lock(&s->mu);
    s->st.n_tree++;
    cJSON *arr = cJSON_CreateArray();
    int shown = 0, i;
    for (i = 0; i < s->n_entries; i++) {
        ps_entry *e = &s->entries[i];
        if (strcmp(e->repo, repo)) continue;
        if (shown++ < from) continue;
        if (s->page_size && shown - from > s->page_size) break;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "file");
        cJSON_AddStringToObject(o, "oid", e->lfs ? e->blob->pointer_oid : e->blob->git_oid);
        cJSON_AddNumberToObject(o, "size", (double)e->blob->size);
        cJSON_AddStringToObject(o, "path", e->path);
        if (e->lfs) {
            cJSON *l = cJSON_AddObjectToObject(o, "lfs");
            cJSON_AddStringToObject(l, "oid", e->blob->sha256);
            cJSON_AddNumberToObject(l, "size", (double)e->blob->size);
            cJSON_AddNumberToObject(l, "pointerSize", 134);
        }
        cJSON_AddItemToArray(arr, o);
    }
    bool more = i < s->n_entries && s->page_size;
    pthread_mutex_unlock(&s->mu);
    (void)rev;
    char *body = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (more) {
        char link[512];
        snprintf(link, sizeof link, "<%s/api/models/%s/tree/%s?recursive=true&expand=false&cursor=%d>; rel=\"next\"",
                 s->endpoint, repo, rev, from + s->page_size);
        MHD_add_response_header(r, "Link", link);
    }
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* "/NS/NAME/<word>/REST" → repo "NS/NAME", rest; false when not that shape */
static bool split_repo(const char *url, const char *word, char *repo, size_t rcap, const char **rest) {
    const char *p = strstr(url, word);
    if (!p) return false;
    size_t n = (size_t)(p - url);
    if (n >= rcap) return false;
    memcpy(repo, url, n);
    repo[n] = 0;
    *rest = p + strlen(word);
    return true;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls) {
    pull_server *s = cls;
    (void)version, (void)upload_data, (void)upload_data_size, (void)con_cls;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return reply_error(c, 405, NULL, "method not allowed");
    char repo[256];
    const char *rest;
    if (!strncmp(url, "/cdn/", 5)) {
        pthread_mutex_lock(&s->mu);
        s->st.n_cdn++;
        ps_blob *b = s->blobs;
        while (b && strcmp(b->sha256, url + 5)) b = b->next;
        int fail = s->fail_n > 0 ? (s->fail_n--, s->fail_status) : 0;
        pthread_mutex_unlock(&s->mu);
        if (fail) return reply_error(c, (unsigned)fail, NULL, "injected failure");
        if (!b) return reply_error(c, 404, NULL, "no such blob");
        return serve_blob(s, c, b, b->sha256, true);
    }
    if (!strncmp(url, "/api/models/", 12) && split_repo(url + 12, "/tree/", repo, sizeof repo, &rest)) {
        pthread_mutex_lock(&s->mu);
        ps_repo *r = find_repo(s, repo);
        bool gated = r && r->gated;
        pthread_mutex_unlock(&s->mu);
        if (!r) return reply_error(c, 401, "RepoNotFound", "Repository Not Found for url");
        if (gated) return reply_error(c, 401, "GatedRepo", "Access to this model is restricted");
        if (strcmp(rest, "main")) return reply_error(c, 404, "RevisionNotFound", "Invalid rev id");
        return serve_tree(s, c, repo, rest);
    }
    if (url[0] == '/' && split_repo(url + 1, "/resolve/", repo, sizeof repo, &rest)) {
        pthread_mutex_lock(&s->mu);
        s->st.n_resolve++;
        ps_repo *r = find_repo(s, repo);
        bool gated = r && r->gated;
        int fail = s->fail_n > 0 ? (s->fail_n--, s->fail_status) : 0;
        pthread_mutex_unlock(&s->mu);
        if (!r) return reply_error(c, 401, "RepoNotFound", "Repository Not Found for url");
        if (gated) return reply_error(c, 401, "GatedRepo", "Access to this model is restricted");
        if (fail) return reply_error(c, (unsigned)fail, NULL, "injected failure");
        if (strncmp(rest, "main/", 5)) return reply_error(c, 404, "RevisionNotFound", "Invalid rev id");
        pthread_mutex_lock(&s->mu);
        ps_entry *e = find_entry(s, repo, rest + 5);
        ps_blob *b = e ? e->blob : NULL;
        bool lfs = e && e->lfs;
        pthread_mutex_unlock(&s->mu);
        if (!b) return reply_error(c, 404, "EntryNotFound", "Entry not found");
        if (!lfs) return serve_blob(s, c, b, b->git_oid, false);
        char loc[256], q[80], sz[32];
        snprintf(loc, sizeof loc, "%s/cdn/%s", s->endpoint, b->sha256);
        snprintf(q, sizeof q, "\"%s\"", b->sha256);
        snprintf(sz, sizeof sz, "%zu", b->size);
        char body[300];
        snprintf(body, sizeof body, "Found. Redirecting to %s", loc);
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
        MHD_add_response_header(resp, "Location", loc);
        MHD_add_response_header(resp, "X-Linked-Etag", q);
        MHD_add_response_header(resp, "X-Linked-Size", sz);
        MHD_add_response_header(resp, "ETag", q);
        MHD_add_response_header(resp, "X-Repo-Commit", COMMIT);
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_FOUND, resp);
        MHD_destroy_response(resp);
        return ret;
    }
    return reply_error(c, 404, NULL, "not found");
}

/* ==== control ============================================================== */

pull_server *ps_start(void) {
    pull_server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->mu, NULL);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                            NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
    if (!s->d) { free(s); return NULL; }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    snprintf(s->endpoint, sizeof s->endpoint, "http://127.0.0.1:%u", info ? (unsigned)info->port : 0u);
    return s;
}

void ps_stop(pull_server *s) {
    if (!s) return;
    MHD_stop_daemon(s->d);
    for (ps_blob *b = s->blobs, *n; b; b = n) {
        n = b->next;
        free(b->data);
        free(b);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

const char *ps_endpoint(const pull_server *s) { return s->endpoint; }

void ps_add_repo(pull_server *s, const char *repo, bool gated) {
    pthread_mutex_lock(&s->mu);
    if (s->n_repos < PS_MAX) {
        snprintf(s->repos[s->n_repos].name, sizeof s->repos[0].name, "%s", repo);
        s->repos[s->n_repos++].gated = gated;
    }
    pthread_mutex_unlock(&s->mu);
}

void ps_set_file(pull_server *s, const char *repo, const char *path, const void *data, size_t size, bool lfs) {
    ps_blob *b = calloc(1, sizeof *b);
    b->data = malloc(size ? size : 1);
    memcpy(b->data, data, size);
    b->size = size;
    b->corrupt_at = -1;
    hexdig(EVP_sha256(), NULL, 0, data, size, b->sha256);
    char hdr[48];
    int hn = snprintf(hdr, sizeof hdr, "blob %zu", size);
    hexdig(EVP_sha1(), hdr, (size_t)hn + 1, data, size, b->git_oid);
    char ptr[200];
    int pn = snprintf(ptr, sizeof ptr, "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %zu\n",
                      b->sha256, size);
    hn = snprintf(hdr, sizeof hdr, "blob %d", pn);
    hexdig(EVP_sha1(), hdr, (size_t)hn + 1, ptr, (size_t)pn, b->pointer_oid);
    pthread_mutex_lock(&s->mu);
    b->next = s->blobs;
    s->blobs = b;
    ps_entry *e = find_entry(s, repo, path);
    if (!e && s->n_entries < PS_MAX) {
        e = &s->entries[s->n_entries++];
        snprintf(e->repo, sizeof e->repo, "%s", repo);
        snprintf(e->path, sizeof e->path, "%s", path);
    }
    if (e) e->blob = b, e->lfs = lfs;
    pthread_mutex_unlock(&s->mu);
}

void ps_corrupt(pull_server *s, const char *repo, const char *path, size_t offset) {
    pthread_mutex_lock(&s->mu);
    ps_entry *e = find_entry(s, repo, path);
    if (e) e->blob->corrupt_at = (long long)offset;
    pthread_mutex_unlock(&s->mu);
}

const char *ps_sha256(pull_server *s, const char *repo, const char *path) {
    pthread_mutex_lock(&s->mu);
    ps_entry *e = find_entry(s, repo, path);
    pthread_mutex_unlock(&s->mu);
    return e ? e->blob->sha256 : NULL;
}

void ps_throttle(pull_server *s, int64_t bps) {
    pthread_mutex_lock(&s->mu);
    s->bps = bps;
    pthread_mutex_unlock(&s->mu);
}

void ps_add_cuts(pull_server *s, const size_t *offsets, size_t n) {
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n && s->n_cuts < PS_MAX; i++) s->cuts[s->n_cuts++] = offsets[i];
    pthread_mutex_unlock(&s->mu);
}

size_t ps_cuts_left(pull_server *s) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->n_cuts;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void ps_fail_next(pull_server *s, int n, int status) {
    pthread_mutex_lock(&s->mu);
    s->fail_n = n;
    s->fail_status = status;
    pthread_mutex_unlock(&s->mu);
}

void ps_ignore_range(pull_server *s, bool on) {
    pthread_mutex_lock(&s->mu);
    s->ignore_range = on;
    pthread_mutex_unlock(&s->mu);
}

void ps_page_size(pull_server *s, int n) {
    pthread_mutex_lock(&s->mu);
    s->page_size = n;
    pthread_mutex_unlock(&s->mu);
}

ps_stats ps_get_stats(pull_server *s) {
    pthread_mutex_lock(&s->mu);
    ps_stats st = s->st;
    pthread_mutex_unlock(&s->mu);
    return st;
}
