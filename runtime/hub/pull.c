/*
 * pull.c — resumable, verified downloads from a Hugging Face model repo, and
 * the local model cache (list, remove, resolve).  See pull.h for the server
 * API, the cache layout and the safety rules.
 *
 * A download is a loop of HTTP GETs with `Range: bytes=N-`, N being what the
 * NAME.partial file holds.  Every byte is hashed as it is written, so the
 * verdict is ready when the last byte lands (a resumed run first re-hashes the
 * prefix already on disk).  The JSON sidecar NAME.partial.json records which
 * remote file (etag = LFS sha256 or git blob sha1) the partial bytes belong to:
 * a changed remote file is detected before a single byte is appended, and the
 * partial data is discarded.  A killed process leaves the partial bytes in the
 * page cache, so the file size is trusted on the same boot; after a reboot
 * only the bytes recorded as fdatasync'ed in the sidecar are (the boot id is
 * in the sidecar).  The final name appears only by rename() after the hash
 * matched.
 *
 * libcurl does HTTP (redirects, TLS, proxies from the environment), OpenSSL's
 * EVP API the hashing, cJSON the JSON.  Nothing here prints: the caller sees
 * progress events and error strings.
 */
#include "pull.h"

#include <cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cinfer.h"

#define DEFAULT_ENDPOINT "https://huggingface.co"
#define API_MAX_BYTES (64 << 20)       /* a tree listing page is far smaller */
#define SYNC_EVERY_BYTES (16ll << 20)  /* fdatasync + sidecar checkpoint */
#define SYNC_EVERY_S 5.0
#define MAX_RESTARTS 3                 /* remote file changed while we pulled */
#define MAX_BACKOFF_MS 30000
#define FILE_PATH_MAX 512

static int fail(char *err, size_t err_len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t err_len, int code, const char *fmt, ...) {
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* snprintf without gcc's truncation warnings: paths and names are checked for
 * length where it matters (pull_check_*, local_parts); elsewhere truncating a
 * message is the intent. */
static int strfmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int strfmt(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
    return n;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

void pull_fmt_bytes(int64_t n, char *buf, size_t cap) {
    static const char *unit[] = {"B", "KB", "MB", "GB", "TB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1000 && u < 4) v /= 1000, u++;
    if (u == 0) strfmt(buf, cap, "%" PRId64 " B", n);
    else strfmt(buf, cap, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

static bool ends_with_ci(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcasecmp(s + a - b, suf) == 0;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static bool is_hex(const char *s, size_t n) {
    if (strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i])) return false;
    return true;
}

/* ==== names ================================================================ */

static bool repo_char(int c) { return isalnum(c) || c == '.' || c == '_' || c == '-'; }

int pull_check_repo(const char *repo, char *err, size_t err_len) {
    if (!repo || !*repo) return fail(err, err_len, PULL_EINVAL, "empty repo id");
    const char *slash = strchr(repo, '/');
    if (!slash || strchr(slash + 1, '/'))
        return fail(err, err_len, PULL_EINVAL,
                    "repo id '%.100s': expected namespace/name (e.g. ggml-org/gemma-3-1b-it-GGUF)", repo);
    const char *part[2] = {repo, slash + 1};
    size_t len[2] = {(size_t)(slash - repo), strlen(slash + 1)};
    for (int k = 0; k < 2; k++) {
        const char *p = part[k];
        size_t n = len[k];
        if (n == 0 || n > 96)
            return fail(err, err_len, PULL_EINVAL, "repo id '%.100s': each part must be 1..96 characters", repo);
        for (size_t i = 0; i < n; i++)
            if (!repo_char((unsigned char)p[i]))
                return fail(err, err_len, PULL_EINVAL,
                            "repo id '%.100s': character 0x%02x not allowed (only A-Z a-z 0-9 . _ -)",
                            repo, (unsigned char)p[i]);
        if (!isalnum((unsigned char)p[0]) && p[0] != '_')
            return fail(err, err_len, PULL_EINVAL, "repo id '%.100s': a part may not start with '%c'", repo, p[0]);
        if (!isalnum((unsigned char)p[n - 1]) && p[n - 1] != '_')
            return fail(err, err_len, PULL_EINVAL, "repo id '%.100s': a part may not end with '%c'", repo, p[n - 1]);
        for (size_t i = 0; i + 1 < n; i++)
            if ((p[i] == '.' && p[i + 1] == '.') || (p[i] == '-' && p[i + 1] == '-'))
                return fail(err, err_len, PULL_EINVAL, "repo id '%.100s': '%c%c' not allowed", repo, p[i], p[i]);
    }
    return 0;
}

/* '/'-separated components, none empty, "." or ".."; chars pass ok(). */
static bool components_ok(const char *s, size_t max_len, bool (*ok)(unsigned char)) {
    size_t n = strlen(s);
    if (n == 0 || n > max_len || s[0] == '/') return false;
    const char *c = s;
    for (;;) {
        size_t k = strcspn(c, "/");
        if (k == 0 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.')) return false;
        for (size_t i = 0; i < k; i++)
            if (!ok((unsigned char)c[i])) return false;
        if (!c[k]) return true;
        c += k + 1;
    }
}

static bool rev_char(unsigned char c) { return isalnum(c) || c == '.' || c == '_' || c == '-'; }
static bool file_char(unsigned char c) { return c >= 0x20 && c != 0x7f && c != '\\'; }

int pull_check_revision(const char *rev, char *err, size_t err_len) {
    if (!rev || !components_ok(rev, 255, rev_char))
        return fail(err, err_len, PULL_EINVAL,
                    "revision '%.100s': expected a branch, tag or commit ([A-Za-z0-9._-] parts separated by '/')",
                    rev ? rev : "");
    return 0;
}

int pull_check_file(const char *path, char *err, size_t err_len) {
    if (!path || !*path) return fail(err, err_len, PULL_EINVAL, "empty file name");
    if (path[0] == '/')
        return fail(err, err_len, PULL_EINVAL, "file name '%.200s': absolute paths are not allowed", path);
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if (!file_char(*p))
            return fail(err, err_len, PULL_EINVAL, "file name '%.200s': character 0x%02x not allowed", path, *p);
    if (!components_ok(path, FILE_PATH_MAX, file_char))
        return fail(err, err_len, PULL_EINVAL,
                    "file name '%.200s': empty, '.' or '..' path components (or over %d bytes) are not allowed",
                    path, FILE_PATH_MAX);
    if (ends_with_ci(path, ".partial") || ends_with_ci(path, ".partial.json") || ends_with_ci(path, ".partial.json.tmp"))
        return fail(err, err_len, PULL_EINVAL, "file name '%.200s': the .partial suffixes are reserved", path);
    return 0;
}

int pull_cache_root(char *buf, size_t cap, char *err, size_t err_len) {
    const char *x = getenv("XDG_CACHE_HOME");
    int n;
    if (x && x[0] == '/') n = strfmt(buf, cap, "%s/cinfer", x);
    else {
        const char *h = getenv("HOME");
        if (!h || h[0] != '/') return fail(err, err_len, PULL_EIO, "cache: neither XDG_CACHE_HOME nor HOME is set");
        n = strfmt(buf, cap, "%s/.cache/cinfer", h);
    }
    if (n < 0 || (size_t)n >= cap) return fail(err, err_len, PULL_EIO, "cache: path too long");
    return 0;
}

/* Revision → directory name: '/' becomes "%2F" ('%' is not a revision char). */
static void rev_dirname(const char *rev, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = rev; *p && o + 4 < cap; p++) {
        if (*p == '/') memcpy(out + o, "%2F", 3), o += 3;
        else out[o++] = *p;
    }
    out[o] = 0;
}

static void rev_decode(const char *dir, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = dir; *p && o + 1 < cap;) {
        if (!strncmp(p, "%2F", 3)) out[o++] = '/', p += 3;
        else out[o++] = *p++;
    }
    out[o] = 0;
}

/* ==== safe directories ===================================================== */

/* mkdir -p of a caller-chosen root (the cache root or --dir); symlinks in the
 * root itself are the user's business and are followed. */
static int mkdir_p(const char *path, char *err, size_t err_len) {
    char tmp[4096];
    if (strfmt(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return fail(err, err_len, PULL_EIO, "path too long: %.200s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return fail(err, err_len, PULL_EIO, "mkdir %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return fail(err, err_len, PULL_EIO, "mkdir %s: %s", tmp, strerror(errno));
    return 0;
}

/* Walk rel (validated components) below dirfd, creating directories when
 * create, never following a symlink.  Returns an fd of the last directory. */
static int open_below(int dirfd, const char *rel, bool create, int *out, char *err, size_t err_len) {
    int fd = dup(dirfd);
    if (fd < 0) return fail(err, err_len, PULL_EIO, "dup: %s", strerror(errno));
    const char *c = rel;
    while (*c) {
        size_t k = strcspn(c, "/");
        char name[256];
        if (k == 0 || k >= sizeof name) { close(fd); return fail(err, err_len, PULL_EINVAL, "bad path '%s'", rel); }
        memcpy(name, c, k);
        name[k] = 0;
        if (!strcmp(name, ".") || !strcmp(name, "..")) {
            close(fd);
            return fail(err, err_len, PULL_EINVAL, "path '%s': '%s' component", rel, name);
        }
        if (create && mkdirat(fd, name, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            close(fd);
            return fail(err, err_len, PULL_EIO, "mkdir '%s' in '%s': %s", name, rel, strerror(e));
        }
        int nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        if (nfd < 0) {
            if (e == ENOENT) return fail(err, err_len, PULL_ENOTFOUND, "'%s' not found", rel);
            return fail(err, err_len, PULL_EIO, "open directory '%s' of '%s': %s%s", name, rel, strerror(e),
                        e == ELOOP || e == ENOTDIR ? " (a symlink or file where a directory belongs; refusing)" : "");
        }
        fd = nfd;
        c += k;
        if (*c == '/') c++;
    }
    *out = fd;
    return 0;
}

/* The local root and the directory part (relative) of a file's location. */
static int local_parts(const pull_opts *o, const char *repo, const char *file, char *root, size_t root_cap,
                       char *rel_dir, size_t rel_cap, char *err, size_t err_len) {
    int rc;
    if ((rc = pull_check_repo(repo, err, err_len)) || (rc = pull_check_file(file, err, err_len))) return rc;
    const char *rev = o && o->revision ? o->revision : "main";
    if ((rc = pull_check_revision(rev, err, err_len))) return rc;
    const char *slash = strrchr(file, '/');
    int fdir = slash ? (int)(slash - file) : 0;
    int n;
    if (o && o->dest_dir) {
        if (!*o->dest_dir) return fail(err, err_len, PULL_EINVAL, "empty --dir");
        n = strfmt(root, root_cap, "%s", o->dest_dir);
        if (n < 0 || (size_t)n >= root_cap) return fail(err, err_len, PULL_EINVAL, "--dir path too long");
        n = strfmt(rel_dir, rel_cap, "%.*s", fdir, file);
    } else {
        char croot[4096];
        if (o && o->cache_root) strfmt(croot, sizeof croot, "%s", o->cache_root);
        else if ((rc = pull_cache_root(croot, sizeof croot, err, err_len))) return rc;
        n = strfmt(root, root_cap, "%s/models", croot);
        if (n < 0 || (size_t)n >= root_cap) return fail(err, err_len, PULL_EINVAL, "cache path too long");
        char rd[600];
        rev_dirname(rev, rd, sizeof rd);
        n = strfmt(rel_dir, rel_cap, "%s/%s%s%.*s", repo, rd, fdir ? "/" : "", fdir, file);
    }
    if (n < 0 || (size_t)n >= rel_cap) return fail(err, err_len, PULL_EINVAL, "path too long");
    return 0;
}

int pull_local_path(const pull_opts *o, const char *repo, const char *file, char *path, size_t cap,
                    char *err, size_t err_len) {
    char root[4096], rel[2048];
    int rc = local_parts(o, repo, file, root, sizeof root, rel, sizeof rel, err, err_len);
    if (rc) return rc;
    int n = strfmt(path, cap, "%s/%s%s%s", root, rel, *rel ? "/" : "", base_name(file));
    if (n < 0 || (size_t)n >= cap) return fail(err, err_len, PULL_EINVAL, "path too long");
    return 0;
}

/* ==== HTTP ================================================================= */

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct {
    long status;             /* of the latest response (hop) */
    int hops;
    char etag[160];          /* ETag of the latest hop */
    char first_etag[160];    /* ETag of the first hop (the resolve endpoint) */
    char linked_etag[160];   /* X-Linked-Etag, from whichever hop had it */
    int64_t linked_size;     /* X-Linked-Size, -1 */
    char commit[64];         /* X-Repo-Commit */
    char error_code[64];     /* X-Error-Code of the latest hop */
    char error_msg[300];     /* X-Error-Message of the latest hop */
    int64_t content_length;  /* -1 */
    int64_t range_start;     /* Content-Range start, -1 */
    int64_t range_total;     /* Content-Range total, -1 */
    char next_link[2048];    /* Link: <...>; rel="next" */
    int retry_after_s;
} http_hdrs;

static void hdrs_reset_hop(http_hdrs *h) {
    h->etag[0] = h->error_code[0] = h->error_msg[0] = h->next_link[0] = 0;
    h->content_length = h->range_start = h->range_total = -1;
    h->retry_after_s = 0;
}

static void hdrs_init(http_hdrs *h) {
    memset(h, 0, sizeof *h);
    h->linked_size = -1;
    hdrs_reset_hop(h);
}

/* Strip W/ and quotes; lowercase (sha256/sha1 hex compare case-insensitively). */
static void norm_etag(const char *in, char *out, size_t cap) {
    if (!strncmp(in, "W/", 2)) in += 2;
    size_t o = 0;
    for (; *in && o + 1 < cap; in++)
        if (*in != '"') out[o++] = (char)tolower((unsigned char)*in);
    out[o] = 0;
}

static void copy_val(char *dst, size_t cap, const char *v) { strfmt(dst, cap, "%s", v); }

static size_t header_cb(char *buf, size_t size, size_t n, void *ud) {
    http_hdrs *h = ud;
    size_t len = size * n, k = len;
    char line[2400];
    if (k >= sizeof line) k = sizeof line - 1;
    memcpy(line, buf, k);
    line[k] = 0;
    while (k && (line[k - 1] == '\r' || line[k - 1] == '\n')) line[--k] = 0;
    if (!strncmp(line, "HTTP/", 5)) {
        const char *sp = strchr(line, ' ');
        h->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        hdrs_reset_hop(h);
        h->hops++;
        return len;
    }
    char *colon = strchr(line, ':');
    if (!colon) return len;
    *colon = 0;
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    const char *name = line;
    if (!strcasecmp(name, "ETag")) {
        norm_etag(v, h->etag, sizeof h->etag);
        if (h->hops == 1) copy_val(h->first_etag, sizeof h->first_etag, h->etag);
    } else if (!strcasecmp(name, "X-Linked-Etag")) {
        if (!h->linked_etag[0]) norm_etag(v, h->linked_etag, sizeof h->linked_etag);
    } else if (!strcasecmp(name, "X-Linked-Size")) {
        if (h->linked_size < 0) h->linked_size = strtoll(v, NULL, 10);
    } else if (!strcasecmp(name, "X-Repo-Commit")) {
        if (!h->commit[0]) copy_val(h->commit, sizeof h->commit, v);
    } else if (!strcasecmp(name, "X-Error-Code")) {
        copy_val(h->error_code, sizeof h->error_code, v);
    } else if (!strcasecmp(name, "X-Error-Message")) {
        copy_val(h->error_msg, sizeof h->error_msg, v);
    } else if (!strcasecmp(name, "Content-Length")) {
        h->content_length = strtoll(v, NULL, 10);
    } else if (!strcasecmp(name, "Content-Range")) {
        long long a, b, t;
        if (sscanf(v, "bytes %lld-%lld/%lld", &a, &b, &t) == 3) h->range_start = a, h->range_total = t;
    } else if (!strcasecmp(name, "Retry-After")) {
        h->retry_after_s = atoi(v);
    } else if (!strcasecmp(name, "Link")) {
        /* <url>; rel="next", <url2>; rel="prev" */
        for (char *p = v; (p = strchr(p, '<'));) {
            char *e = strchr(p, '>');
            if (!e) break;
            char *semi = e + 1;
            char *comma = strchr(semi, ',');
            size_t seg = comma ? (size_t)(comma - semi) : strlen(semi);
            char params[256];
            strfmt(params, sizeof params, "%.*s", (int)(seg < 255 ? seg : 255), semi);
            if (strstr(params, "rel=\"next\"") || strstr(params, "rel=next"))
                strfmt(h->next_link, sizeof h->next_link, "%.*s", (int)(e - p - 1), p + 1);
            p = e + 1;
        }
    }
    return len;
}

static CURL *curl_new(const char *url, http_hdrs *h, int stall_s, char *curl_err) {
    pthread_once(&g_curl_once, curl_init_once);
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_USERAGENT, "cinfer/" CINFER_VERSION);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)stall_s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
    curl_err[0] = 0;
    return c;
}

static bool curl_transient(CURLcode rc) {
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST: case CURLE_COULDNT_RESOLVE_PROXY: case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT: case CURLE_PARTIAL_FILE: case CURLE_RECV_ERROR: case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING: case CURLE_SSL_CONNECT_ERROR: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
        return true;
    default:
        return false;
    }
}

static bool http_transient(long status) {
    return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

static int backoff_ms(const pull_opts *o, int attempt, int retry_after_s) {
    int base = o && o->retry_base_ms > 0 ? o->retry_base_ms : 500;
    long d = base;
    for (int i = 1; i < attempt && d < MAX_BACKOFF_MS; i++) d *= 2;
    if (d > MAX_BACKOFF_MS) d = MAX_BACKOFF_MS;
    d += d * (rand() % 20) / 100; /* jitter: parallel clients do not retry in lockstep */
    if (retry_after_s > 0 && retry_after_s <= 60 && retry_after_s * 1000L > d) d = retry_after_s * 1000L;
    return (int)d;
}

static int max_retries(const pull_opts *o) { return o && o->max_retries > 0 ? o->max_retries : 6; }
static int stall_s(const pull_opts *o) { return o && o->stall_timeout_s > 0 ? o->stall_timeout_s : 30; }

/* An HTTP error status as a message naming the repo/revision/file. */
static int http_error(const http_hdrs *h, const char *endpoint, const char *repo, const char *rev,
                      const char *file, const char *url, char *err, size_t err_len) {
    char says[400] = "";
    if (h->error_msg[0]) strfmt(says, sizeof says, "; server says: %s", h->error_msg);
    const char *code = h->error_code;
    long st = h->status;
    if (!strcmp(code, "GatedRepo"))
        return fail(err, err_len, PULL_EAUTH,
                    "%s is a gated repo (HTTP %ld): its authors require accepting their terms while logged in, "
                    "and cinfer downloads anonymously only; accept the terms at %s/%s and download the file "
                    "in a browser, or use an ungated copy of the model%s",
                    repo, st, endpoint, repo, says);
    if (!strcmp(code, "RepoNotFound") || (st == 401 && !code[0]))
        return fail(err, err_len, st == 401 && !code[0] ? PULL_EAUTH : PULL_ENOTFOUND,
                    "repository '%s' not found on %s (HTTP %ld): check the name; private repos cannot be "
                    "pulled (cinfer downloads anonymously only)%s",
                    repo, endpoint, st, says);
    if (!strcmp(code, "RevisionNotFound"))
        return fail(err, err_len, PULL_ENOTFOUND, "revision '%s' not found in %s (HTTP %ld)%s", rev, repo, st, says);
    if (!strcmp(code, "EntryNotFound") || (st == 404 && file))
        return fail(err, err_len, PULL_ENOTFOUND, "file '%s' not found in %s at revision '%s' (HTTP %ld)%s",
                    file ? file : "?", repo, rev, st, says);
    if (st == 403)
        return fail(err, err_len, PULL_EAUTH,
                    "access to %s denied (HTTP 403): the repo is gated, disabled or private "
                    "(cinfer downloads anonymously only)%s", repo, says);
    if (st == 404)
        return fail(err, err_len, PULL_ENOTFOUND, "not found (HTTP 404): %s%s", url, says);
    return fail(err, err_len, PULL_ENET, "HTTP %ld from %s%s", st, url, says);
}

static const char *endpoint_of(const pull_opts *o, char *buf, size_t cap) {
    const char *e = o && o->endpoint && *o->endpoint ? o->endpoint : getenv("HF_ENDPOINT");
    if (!e || !*e) e = DEFAULT_ENDPOINT;
    strfmt(buf, cap, "%s", e);
    size_t n = strlen(buf);
    while (n && buf[n - 1] == '/') buf[--n] = 0;
    return buf;
}

static int check_endpoint(const char *e, char *err, size_t err_len) {
    if (strncmp(e, "http://", 7) && strncmp(e, "https://", 8))
        return fail(err, err_len, PULL_EINVAL, "endpoint '%s': expected an http:// or https:// URL", e);
    return 0;
}

/* ==== GET into memory (API) ================================================ */

typedef struct { char *buf; size_t len, cap; bool too_big; } membuf;

static size_t mem_write(char *p, size_t size, size_t n, void *ud) {
    membuf *m = ud;
    size_t k = size * n;
    if (m->len + k + 1 > API_MAX_BYTES) { m->too_big = true; return 0; }
    if (m->len + k + 1 > m->cap) {
        size_t nc = m->cap ? m->cap : 65536;
        while (nc < m->len + k + 1) nc *= 2;
        char *nb = realloc(m->buf, nc);
        if (!nb) { m->too_big = true; return 0; }
        m->buf = nb, m->cap = nc;
    }
    memcpy(m->buf + m->len, p, k);
    m->len += k;
    m->buf[m->len] = 0;
    return k;
}

/* GET url into *m with retries; HTTP errors mapped by http_error. */
static int get_mem(const pull_opts *o, const char *endpoint, const char *repo, const char *rev, const char *url,
                   membuf *m, http_hdrs *h, char *err, size_t err_len) {
    for (int attempt = 1;; attempt++) {
        char cerr[CURL_ERROR_SIZE];
        m->len = 0;
        m->too_big = false;
        hdrs_init(h);
        CURL *c = curl_new(url, h, stall_s(o), cerr);
        if (!c) return fail(err, err_len, PULL_ENET, "curl_easy_init failed");
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, mem_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, m);
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
        CURLcode rc = curl_easy_perform(c);
        curl_easy_cleanup(c);
        char why[400];
        if (m->too_big) return fail(err, err_len, PULL_ENET, "%s: response larger than %d bytes", url, API_MAX_BYTES);
        if (rc == CURLE_OK && h->status >= 200 && h->status < 300) return 0;
        if (rc == CURLE_OK && !http_transient(h->status))
            return http_error(h, endpoint, repo, rev, NULL, url, err, err_len);
        if (rc != CURLE_OK && !curl_transient(rc))
            return fail(err, err_len, PULL_ENET, "%s: %s", url, cerr[0] ? cerr : curl_easy_strerror(rc));
        if (rc == CURLE_OK) strfmt(why, sizeof why, "HTTP %ld", h->status);
        else strfmt(why, sizeof why, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
        /* The server never answered: no network, a host that does not
         * resolve, a refused port.  One quick retry for a blip, then say so
         * (the backoff below would take ~35 s); once a server has answered,
         * downloads keep the full retry policy. */
        if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY || rc == CURLE_COULDNT_CONNECT) {
            if (attempt >= 2)
                return fail(err, err_len, PULL_ENET,
                            "cannot reach %s (%s): no network connection? Check it; behind a proxy set HTTPS_PROXY, "
                            "or use a mirror with --endpoint URL (or HF_ENDPOINT)", endpoint, why);
            sleep_ms(1000);
            continue;
        }
        if (attempt > max_retries(o))
            return fail(err, err_len, PULL_ENET, "%s: giving up after %d attempts: %s", url, attempt, why);
        int d = backoff_ms(o, attempt, h->retry_after_s);
        if (o && o->progress) {
            pull_event ev = {.kind = PULL_EV_RETRY, .file = "", .msg = why, .attempt = attempt, .delay_ms = d};
            if (o->progress(o->progress_user, &ev)) return fail(err, err_len, PULL_ECANCELED, "canceled");
        }
        sleep_ms(d);
    }
}

/* ==== listing ============================================================== */

static char *escape_path(CURL *c, const char *path) {
    /* each component escaped, '/' kept (huggingface_hub: quote(path, safe="/")) */
    size_t cap = strlen(path) * 3 + 1, o = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    const char *p = path;
    for (;;) {
        size_t k = strcspn(p, "/");
        char *e = curl_easy_escape(c, p, (int)k);
        if (!e) { free(out); return NULL; }
        size_t el = strlen(e);
        memcpy(out + o, e, el);
        o += el;
        curl_free(e);
        if (!p[k]) break;
        out[o++] = '/';
        p += k + 1;
    }
    out[o] = 0;
    return out;
}

static char *escape_all(const char *s) {
    pthread_once(&g_curl_once, curl_init_once);
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    char *e = curl_easy_escape(c, s, 0), *r = e ? strdup(e) : NULL;
    curl_free(e);
    curl_easy_cleanup(c);
    return r;
}

static char *escape_file(const char *path) {
    pthread_once(&g_curl_once, curl_init_once);
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    char *r = escape_path(c, path);
    curl_easy_cleanup(c);
    return r;
}

void pull_listing_free(pull_listing *l) {
    if (!l) return;
    for (size_t i = 0; i < l->n_files; i++) free(l->files[i].path);
    free(l->files);
    l->files = NULL;
    l->n_files = 0;
}

static int parse_tree(const char *json, pull_listing *l, size_t *cap, const char *url, char *err, size_t err_len) {
    cJSON *root = cJSON_Parse(json);
    if (!root || !cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return fail(err, err_len, PULL_ENET, "%s: expected a JSON array of files", url);
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
        const cJSON *path = cJSON_GetObjectItemCaseSensitive(it, "path");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "file") || !cJSON_IsString(path)) continue;
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(it, "size");
        const cJSON *oid = cJSON_GetObjectItemCaseSensitive(it, "oid");
        const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(it, "lfs");
        if (l->n_files == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            pull_file *nf = realloc(l->files, nc * sizeof *nf);
            if (!nf) { cJSON_Delete(root); return fail(err, err_len, PULL_EIO, "out of memory"); }
            l->files = nf, *cap = nc;
        }
        pull_file *f = &l->files[l->n_files];
        memset(f, 0, sizeof *f);
        f->path = strdup(path->valuestring);
        if (!f->path) { cJSON_Delete(root); return fail(err, err_len, PULL_EIO, "out of memory"); }
        l->n_files++;
        f->size_bytes = cJSON_IsNumber(size) ? (int64_t)size->valuedouble : -1;
        if (cJSON_IsString(oid) && is_hex(oid->valuestring, 40))
            for (int i = 0; i < 41; i++) f->git_oid[i] = (char)tolower((unsigned char)oid->valuestring[i]);
        if (cJSON_IsObject(lfs)) {
            const cJSON *lo = cJSON_GetObjectItemCaseSensitive(lfs, "oid");
            const cJSON *ls = cJSON_GetObjectItemCaseSensitive(lfs, "size");
            if (!cJSON_IsString(lo)) lo = cJSON_GetObjectItemCaseSensitive(lfs, "sha256");
            if (cJSON_IsString(lo) && is_hex(lo->valuestring, 64))
                for (int i = 0; i < 65; i++) f->sha256[i] = (char)tolower((unsigned char)lo->valuestring[i]);
            if (cJSON_IsNumber(ls)) f->size_bytes = (int64_t)ls->valuedouble;
        }
        f->safe = pull_check_file(f->path, NULL, 0) == 0 && f->size_bytes >= 0;
    }
    cJSON_Delete(root);
    return 0;
}

int pull_list_remote(const pull_opts *o, const char *repo, pull_listing *out, char *err, size_t err_len) {
    memset(out, 0, sizeof *out);
    const char *rev = o && o->revision ? o->revision : "main";
    char endpoint[1024];
    endpoint_of(o, endpoint, sizeof endpoint);
    int rc;
    if ((rc = pull_check_repo(repo, err, err_len)) || (rc = pull_check_revision(rev, err, err_len)) ||
        (rc = check_endpoint(endpoint, err, err_len)))
        return rc;
    char *erev = escape_all(rev);
    if (!erev) return fail(err, err_len, PULL_EIO, "out of memory");
    size_t url_cap = 4096;
    char *url = malloc(url_cap);
    if (!url) { free(erev); return fail(err, err_len, PULL_EIO, "out of memory"); }
    strfmt(url, url_cap, "%s/api/models/%s/tree/%s?recursive=true&expand=false", endpoint, repo, erev);
    free(erev);
    membuf m = {0};
    size_t cap = 0;
    http_hdrs h;
    for (int page = 0; page < 10000; page++) {
        rc = get_mem(o, endpoint, repo, rev, url, &m, &h, err, err_len);
        if (!rc) rc = parse_tree(m.buf ? m.buf : "", out, &cap, url, err, err_len);
        if (rc) break;
        if (!h.next_link[0]) break;
        if (strncmp(h.next_link, "http://", 7) && strncmp(h.next_link, "https://", 8)) {
            rc = fail(err, err_len, PULL_ENET, "%s: bad Link rel=next '%.200s'", url, h.next_link);
            break;
        }
        strfmt(url, url_cap, "%s", h.next_link);
    }
    free(url);
    free(m.buf);
    if (rc) pull_listing_free(out);
    return rc;
}

/* ==== selection ============================================================ */

static bool is_sep(char c) { return c == 0 || c == '-' || c == '.' || c == '_' || c == ' '; }

/* Quantization tag in a file name ("Q4_K_M", "IQ3_XXS", "F16"): bits, tag. */
static int quant_tag(const char *file, char *tag, size_t cap) {
    char u[FILE_PATH_MAX + 1];
    strfmt(u, sizeof u, "%s", base_name(file));
    if (ends_with_ci(u, ".gguf")) u[strlen(u) - 5] = 0;
    for (char *p = u; *p; p++) *p = (char)toupper((unsigned char)*p);
    static const struct { const char *t; int bits; } fixed[] = {
        {"BF16", 16}, {"F16", 16}, {"FP16", 16}, {"F32", 32}, {"FP32", 32}, {"MXFP4", 4}, {"FP8", 8}, {"F8", 8},
    };
    for (size_t i = 0; u[i]; i++) {
        if (i > 0 && !is_sep(u[i - 1])) continue;
        const char *s = u + i;
        for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) {
            size_t n = strlen(fixed[k].t);
            if (!strncmp(s, fixed[k].t, n) && is_sep(s[n])) {
                if (tag) strfmt(tag, cap, "%s", fixed[k].t);
                return fixed[k].bits;
            }
        }
        size_t j = (s[0] == 'I' || s[0] == 'T') ? 1 : 0;
        if (s[j] == 'Q' && isdigit((unsigned char)s[j + 1]) && is_sep(s[j + 2])) {
            size_t e = j + 2; /* the tag runs on through '_'-joined parts: Q4_K_M, IQ3_XXS */
            while (isalnum((unsigned char)s[e]) || s[e] == '_') e++;
            if (tag) strfmt(tag, cap, "%.*s", (int)e, s);
            return s[j + 1] - '0';
        }
    }
    if (tag && cap) tag[0] = 0;
    return 0;
}

int pull_quant_bits(const char *file_name) { return quant_tag(file_name, NULL, 0); }

/* "name-00001-of-00003.gguf": length of the group prefix, shard index. */
static bool shard_of(const char *path, size_t *prefix_len, int *idx) {
    size_t n = strlen(path);
    const char *suf = "-00000-of-00000.gguf";
    size_t sl = strlen(suf);
    if (n <= sl) return false;
    const char *s = path + n - sl;
    for (size_t i = 0; i < sl; i++) {
        if (suf[i] == '0') { if (!isdigit((unsigned char)s[i])) return false; }
        else if (tolower((unsigned char)s[i]) != suf[i]) return false;
    }
    *prefix_len = n - sl;
    *idx = atoi(s + 1);
    return true;
}

static bool same_group(const char *a, const char *b) {
    size_t pa, pb;
    int ia, ib;
    bool sa = shard_of(a, &pa, &ia), sb = shard_of(b, &pb, &ib);
    if (!sa || !sb) return !strcmp(a, b);
    return pa == pb && !strncmp(a, b, pa);
}

static bool is_companion(const char *path) {
    static const char *names[] = {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                  "tokenizer.model", "special_tokens_map.json", "vocab.json", "merges.txt"};
    const char *b = base_name(path);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(b, names[i])) return true;
    return ends_with_ci(path, ".safetensors.index.json");
}

static int select_default(const pull_listing *l, size_t *sel, size_t *n_sel, char *why, size_t why_len) {
    /* GGUF candidates: not mmproj (unless that is all there is) */
    bool any_plain = false, any_gguf = false;
    for (size_t i = 0; i < l->n_files; i++) {
        const pull_file *f = &l->files[i];
        if (!f->safe || !ends_with_ci(f->path, ".gguf")) continue;
        any_gguf = true;
        if (!strcasestr(base_name(f->path), "mmproj")) any_plain = true;
    }
    if (!any_gguf) {
        bool any_st = false;
        for (size_t i = 0; i < l->n_files; i++) {
            const pull_file *f = &l->files[i];
            if (!f->safe) continue;
            if (ends_with_ci(f->path, ".safetensors")) any_st = true;
            if (ends_with_ci(f->path, ".safetensors") || is_companion(f->path)) sel[(*n_sel)++] = i;
        }
        if (!any_st) {
            *n_sel = 0;
            return fail(why, why_len, PULL_ENOTFOUND, "no GGUF or safetensors files in the repo");
        }
        strfmt(why, why_len, "no GGUF files; taking the safetensors weights with their config and tokenizer files");
        return 0;
    }
    /* best group: Q4_K_M; else the smallest with >= 4 bits; else the smallest
     * without a recognised tag (often F16/F32); else the one with the most bits
     * below 4 (the least damaged), the smallest of those */
    ssize_t best = -1;
    int64_t best_size = 0;
    int best_rank = 0, best_bits = 0; /* rank 3: Q4_K_M, 2: >= 4 bits, 1: no tag, 0: < 4 bits */
    for (size_t i = 0; i < l->n_files; i++) {
        const pull_file *f = &l->files[i];
        if (!f->safe || !ends_with_ci(f->path, ".gguf")) continue;
        if (any_plain && strcasestr(base_name(f->path), "mmproj")) continue;
        size_t pl;
        int si;
        if (shard_of(f->path, &pl, &si) && si != 1) continue; /* groups are represented by shard 1 */
        int64_t total = 0;
        for (size_t j = 0; j < l->n_files; j++)
            if (l->files[j].safe && same_group(f->path, l->files[j].path)) total += l->files[j].size_bytes;
        char tag[64];
        int bits = quant_tag(f->path, tag, sizeof tag);
        int rank = !strcmp(tag, "Q4_K_M") ? 3 : bits >= 4 ? 2 : bits == 0 ? 1 : 0;
        bool better = best < 0 || rank > best_rank ||
                      (rank == best_rank && rank == 0 && bits > best_bits) ||
                      (rank == best_rank && (rank != 0 || bits == best_bits) && total < best_size);
        if (better) best = (ssize_t)i, best_size = total, best_rank = rank, best_bits = bits;
    }
    if (best < 0) return fail(why, why_len, PULL_ENOTFOUND, "no usable GGUF file in the repo");
    for (size_t j = 0; j < l->n_files; j++)
        if (l->files[j].safe && same_group(l->files[best].path, l->files[j].path)) sel[(*n_sel)++] = j;
    char tag[64], sz[32];
    int bits = quant_tag(l->files[best].path, tag, sizeof tag);
    pull_fmt_bytes(best_size, sz, sizeof sz);
    const char *name = l->files[best].path;
    if (best_rank == 3)
        strfmt(why, why_len, "%s (%s): Q4_K_M is the usual balance of size and quality", name, sz);
    else if (best_rank == 2)
        strfmt(why, why_len, "%s (%s): no Q4_K_M file; %s (%d bits) is the smallest with at least 4 bits per weight",
               name, sz, tag, bits);
    else if (best_rank == 1)
        strfmt(why, why_len, "%s (%s): no Q4_K_M file and no tag of >= 4 bits recognised; the smallest file "
               "without a quantization tag", name, sz);
    else
        strfmt(why, why_len, "%s (%s): every file is below 4 bits per weight; %s (%d bits) loses the least",
               name, sz, tag, bits);
    if (*n_sel > 1) {
        size_t k = strlen(why);
        strfmt(why + k, why_len - k, " (%zu shards)", *n_sel);
    }
    return 0;
}

int pull_select(const pull_listing *l, const char *pattern, size_t *sel, size_t *n_sel, char *why, size_t why_len) {
    *n_sel = 0;
    if (why && why_len) why[0] = 0;
    char dummy[8];
    if (!why || !why_len) why = dummy, why_len = sizeof dummy;
    if (!pattern || !*pattern) return select_default(l, sel, n_sel, why, why_len);
    if (strpbrk(pattern, "*?[")) {
        for (size_t i = 0; i < l->n_files; i++)
            if (l->files[i].safe && (!fnmatch(pattern, l->files[i].path, FNM_CASEFOLD) ||
                                     !fnmatch(pattern, base_name(l->files[i].path), FNM_CASEFOLD)))
                sel[(*n_sel)++] = i;
        if (!*n_sel) return fail(why, why_len, PULL_ENOTFOUND, "no file matches '%s'", pattern);
        strfmt(why, why_len, "%zu file%s matching '%s'", *n_sel, *n_sel == 1 ? "" : "s", pattern);
        return 0;
    }
    for (size_t i = 0; i < l->n_files; i++)
        if (!strcmp(l->files[i].path, pattern)) {
            if (!l->files[i].safe)
                return fail(why, why_len, PULL_EINVAL, "refusing unsafe file name '%.200s'", pattern);
            sel[(*n_sel)++] = i;
            strfmt(why, why_len, "%s", pattern);
            return 0;
        }
    for (size_t i = 0; i < l->n_files; i++)
        if (l->files[i].safe && strcasestr(l->files[i].path, pattern)) sel[(*n_sel)++] = i;
    if (!*n_sel) return fail(why, why_len, PULL_ENOTFOUND, "no file named or containing '%s'", pattern);
    strfmt(why, why_len, "%zu file%s containing '%s'", *n_sel, *n_sel == 1 ? "" : "s", pattern);
    return 0;
}

/* ==== download ============================================================= */

enum { AB_NONE, AB_CANCEL, AB_IO, AB_CHANGED, AB_TOO_LONG, AB_SIZE, AB_BADRANGE };

typedef struct {
    const pull_opts *o;
    const char *file;
    char local[4096];      /* final path, for messages */
    int dfd, fd;
    char part[300], side[320], fin[256];
    char url[4096];
    /* what the bytes must be */
    int64_t size;
    char sha256[65], git_oid[41];
    char commit[64];
    char boot_id[64];
    EVP_MD_CTX *md;
    int64_t have;          /* bytes in the partial file, all hashed */
    int64_t resumed_from;
    int64_t synced;        /* bytes known to be durable */
    double last_sync_t;
    /* per attempt */
    http_hdrs h;
    bool checked;
    int abort;
    int sys_errno;
    char new_etag[160];
    int64_t new_size;
    char errbody[512];
    size_t errbody_len;
    /* progress */
    double t0, last_ev_t, rate_t;
    int64_t rate_b;
    double rate;
} dl_state;

static const char *exp_etag(const dl_state *d) { return d->sha256[0] ? d->sha256 : d->git_oid; }

static int md_reset(dl_state *d) {
    if (!EVP_DigestInit_ex(d->md, d->sha256[0] ? EVP_sha256() : EVP_sha1(), NULL)) return -1;
    if (!d->sha256[0]) { /* git blob id: sha1("blob <size>\0" + content) */
        char hdr[48];
        int n = strfmt(hdr, sizeof hdr, "blob %" PRId64, d->size);
        if (!EVP_DigestUpdate(d->md, hdr, (size_t)n + 1)) return -1;
    }
    return 0;
}

static void read_boot_id(char *out, size_t cap) {
    out[0] = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    if (fgets(out, (int)cap, f)) out[strcspn(out, "\r\n")] = 0;
    fclose(f);
}

static int emit(dl_state *d, pull_event_kind kind, const char *msg, const char *path) {
    if (!d->o || !d->o->progress) return 0;
    pull_event ev = {.kind = kind, .file = d->file, .path = path, .msg = msg, .done_bytes = d->have,
                     .total_bytes = d->size, .resumed_from = d->resumed_from, .rate_bytes_s = d->rate,
                     .elapsed_s = now_s() - d->t0};
    return d->o->progress(d->o->progress_user, &ev);
}

static int write_sidecar(dl_state *d) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return -1;
    cJSON_AddNumberToObject(j, "version", 1);
    cJSON_AddStringToObject(j, "url", d->url);
    cJSON_AddStringToObject(j, "file", d->file);
    cJSON_AddStringToObject(j, "etag", exp_etag(d));
    cJSON_AddNumberToObject(j, "size", (double)d->size);
    cJSON_AddStringToObject(j, "sha256", d->sha256);
    cJSON_AddStringToObject(j, "git_oid", d->git_oid);
    cJSON_AddStringToObject(j, "commit", d->commit);
    cJSON_AddStringToObject(j, "boot_id", d->boot_id);
    cJSON_AddNumberToObject(j, "synced_bytes", (double)d->synced);
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    if (!s) return -1;
    char tmp[340];
    strfmt(tmp, sizeof tmp, "%s.tmp", d->side);
    int fd = openat(d->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    int rc = -1;
    if (fd >= 0) {
        size_t n = strlen(s);
        rc = write(fd, s, n) == (ssize_t)n && fdatasync(fd) == 0 ? 0 : -1;
        if (rc) d->sys_errno = errno;
        close(fd);
        if (!rc && renameat(d->dfd, tmp, d->dfd, d->side) != 0) rc = -1, d->sys_errno = errno;
        if (rc) unlinkat(d->dfd, tmp, 0);
    } else {
        d->sys_errno = errno;
    }
    free(s);
    return rc;
}

typedef struct { char etag[160]; int64_t size, synced; char boot_id[64]; bool ok; } sidecar;

static sidecar read_sidecar(dl_state *d) {
    sidecar sc = {.ok = false};
    int fd = openat(d->dfd, d->side, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return sc;
    char buf[8192];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return sc;
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "etag");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "size");
    const cJSON *y = cJSON_GetObjectItemCaseSensitive(j, "synced_bytes");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "boot_id");
    if (cJSON_IsString(e) && cJSON_IsNumber(s) && cJSON_IsNumber(y) && cJSON_IsString(b)) {
        strfmt(sc.etag, sizeof sc.etag, "%s", e->valuestring);
        strfmt(sc.boot_id, sizeof sc.boot_id, "%s", b->valuestring);
        sc.size = (int64_t)s->valuedouble;
        sc.synced = (int64_t)y->valuedouble;
        sc.ok = true;
    }
    cJSON_Delete(j);
    return sc;
}

static int truncate_to(dl_state *d, int64_t n) {
    if (ftruncate(d->fd, n) != 0 || lseek(d->fd, n, SEEK_SET) < 0) return -1;
    d->have = n;
    if (d->synced > n) d->synced = n;
    return 0;
}

/* Hash what the partial holds (resume), d->have bytes. */
static int hash_prefix(dl_state *d) {
    if (md_reset(d)) return -1;
    static const size_t chunk = 1 << 20;
    char *buf = malloc(chunk);
    if (!buf) return -1;
    int64_t off = 0;
    while (off < d->have) {
        size_t want = (size_t)(d->have - off < (int64_t)chunk ? d->have - off : (int64_t)chunk);
        ssize_t r = pread(d->fd, buf, want, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { d->sys_errno = r < 0 ? errno : EIO; free(buf); return -1; }
        EVP_DigestUpdate(d->md, buf, (size_t)r);
        off += r;
    }
    free(buf);
    return lseek(d->fd, d->have, SEEK_SET) < 0 ? -1 : 0;
}

static int restart_file(dl_state *d, const char *why) {
    if (truncate_to(d, 0) || md_reset(d)) return -1;
    d->resumed_from = 0;
    emit(d, PULL_EV_RESTART, why, NULL);
    return write_sidecar(d);
}

/* First body byte of a 2xx response: is it the data we asked for? */
static int check_response(dl_state *d) {
    const char *etag = d->h.linked_etag[0] ? d->h.linked_etag : d->h.first_etag;
    if (etag[0] && strcmp(etag, exp_etag(d)) != 0 &&
        (d->sha256[0] ? is_hex(etag, 64) : is_hex(etag, 40))) {
        strfmt(d->new_etag, sizeof d->new_etag, "%s", etag);
        d->new_size = d->h.linked_size >= 0 ? d->h.linked_size
                      : d->h.range_total >= 0 ? d->h.range_total
                      : d->h.status == 200 ? d->h.content_length : -1;
        return AB_CHANGED;
    }
    if (d->h.status == 206) {
        if (d->h.range_start != d->have) return AB_BADRANGE;
        if (d->h.range_total >= 0 && d->h.range_total != d->size) return AB_SIZE;
        return AB_NONE;
    }
    if (d->h.content_length >= 0 && d->h.content_length != d->size) return AB_SIZE;
    if (d->have > 0) { /* the server ignored Range: take the whole body */
        if (truncate_to(d, 0) || md_reset(d)) { d->sys_errno = errno; return AB_IO; }
        d->resumed_from = 0;
        emit(d, PULL_EV_RESTART, "the server ignored the Range request; downloading from the start", NULL);
    }
    return AB_NONE;
}

static int checkpoint(dl_state *d) {
    if (fdatasync(d->fd) != 0) { d->sys_errno = errno; return -1; }
    d->synced = d->have;
    d->last_sync_t = now_s();
    return write_sidecar(d);
}

static size_t dl_write(char *p, size_t size, size_t nmemb, void *ud) {
    dl_state *d = ud;
    size_t n = size * nmemb;
    if (d->h.status < 200 || d->h.status >= 300) { /* error body: keep the start for the message */
        size_t k = n < sizeof d->errbody - 1 - d->errbody_len ? n : sizeof d->errbody - 1 - d->errbody_len;
        memcpy(d->errbody + d->errbody_len, p, k);
        d->errbody_len += k;
        d->errbody[d->errbody_len] = 0;
        return n;
    }
    if (!d->checked) {
        d->checked = true;
        if ((d->abort = check_response(d)) != AB_NONE) return 0;
    }
    if (d->have + (int64_t)n > d->size) { d->abort = AB_TOO_LONG; return 0; }
    for (size_t off = 0; off < n;) {
        ssize_t w = write(d->fd, p + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { d->sys_errno = w < 0 ? errno : EIO; d->abort = AB_IO; return 0; }
        EVP_DigestUpdate(d->md, p + off, (size_t)w);
        off += (size_t)w;
        d->have += w;
    }
    if (d->have - d->synced >= SYNC_EVERY_BYTES || (d->have > d->synced && now_s() - d->last_sync_t > SYNC_EVERY_S))
        if (checkpoint(d)) { d->abort = AB_IO; return 0; }
    return n;
}

static int dl_xferinfo(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    dl_state *d = ud;
    double t = now_s();
    if (t - d->rate_t >= 0.5) {
        double inst = (double)(d->have - d->rate_b) / (t - d->rate_t);
        d->rate = d->rate > 0 ? 0.7 * d->rate + 0.3 * inst : inst;
        d->rate_t = t, d->rate_b = d->have;
    }
    if (t - d->last_ev_t < 0.1) return 0;
    d->last_ev_t = t;
    if (emit(d, PULL_EV_PROGRESS, NULL, NULL)) { d->abort = AB_CANCEL; return 1; }
    return 0;
}

static int io_error(dl_state *d, const char *what, char *err, size_t err_len) {
    int e = d->sys_errno;
    char have[32], need[32];
    pull_fmt_bytes(d->have, have, sizeof have);
    pull_fmt_bytes(d->size, need, sizeof need);
    if (e == ENOSPC || e == EDQUOT)
        return fail(err, err_len, PULL_EIO,
                    "disk full while writing %s.partial (%s of %s on disk): free some space and run the same "
                    "command again to resume", d->local, have, need);
    if (e == EFBIG)
        return fail(err, err_len, PULL_EIO,
                    "file size limit reached while writing %s.partial (%s of %s on disk; ulimit -f or the file "
                    "system's maximum); run again to resume once it is raised", d->local, have, need);
    return fail(err, err_len, PULL_EIO, "%s %s: %s", what, d->local, strerror(e));
}

/* Hash an existing final file: 1 matches, 0 not, -1 absent or unreadable. */
static int final_matches(dl_state *d) {
    int fd = openat(d->dfd, d->fin, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != d->size) { close(fd); return 0; }
    int save_fd = d->fd;
    int64_t save_have = d->have;
    d->fd = fd;
    d->have = d->size;
    int rc = hash_prefix(d);
    d->fd = save_fd;
    d->have = save_have;
    close(fd);
    if (rc) return 0;
    unsigned char dig[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    EVP_DigestFinal_ex(d->md, dig, &dl);
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    for (unsigned i = 0; i < dl; i++) sprintf(hex + 2 * i, "%02x", dig[i]);
    return strcmp(hex, exp_etag(d)) == 0;
}

static int download_loop(dl_state *d, const char *endpoint, const char *repo, const char *rev,
                         char *err, size_t err_len) {
    int attempt = 0, restarts = 0;
    char why[600];
    while (d->have < d->size) {
        int64_t at_start = d->have;
        char cerr[CURL_ERROR_SIZE];
        hdrs_init(&d->h);
        d->checked = false;
        d->abort = AB_NONE;
        d->errbody_len = 0;
        d->errbody[0] = 0;
        CURL *c = curl_new(d->url, &d->h, stall_s(d->o), cerr);
        if (!c) return fail(err, err_len, PULL_ENET, "curl_easy_init failed");
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, dl_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, d);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, dl_xferinfo);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, d);
        char range[48];
        if (d->have > 0) {
            strfmt(range, sizeof range, "%" PRId64 "-", d->have);
            curl_easy_setopt(c, CURLOPT_RANGE, range);
        }
        CURLcode rc = curl_easy_perform(c);
        curl_easy_cleanup(c);
        if (d->h.commit[0]) strfmt(d->commit, sizeof d->commit, "%s", d->h.commit);

        switch (d->abort) {
        case AB_CANCEL: return fail(err, err_len, PULL_ECANCELED, "%s: canceled (the partial download is kept)", d->file);
        case AB_IO: return io_error(d, "writing", err, err_len);
        case AB_TOO_LONG:
        case AB_SIZE:
            return fail(err, err_len, PULL_EVERIFY,
                        "%s: the server sends more or other bytes than the %" PRId64 " listed (HTTP %ld, "
                        "Content-Length %" PRId64 ", Content-Range total %" PRId64 ")",
                        d->file, d->size, d->h.status, d->h.content_length, d->h.range_total);
        case AB_BADRANGE:
        case AB_CHANGED: {
            if (++restarts > MAX_RESTARTS)
                return fail(err, err_len, PULL_ENET, "%s: the remote file keeps changing (%d restarts); try later",
                            d->file, MAX_RESTARTS);
            if (d->abort == AB_BADRANGE) {
                strfmt(why, sizeof why, "the server answered a Range request from byte %" PRId64
                         " with bytes from %" PRId64 "; downloading from the start", d->have, d->h.range_start);
            } else {
                if (d->new_size < 0)
                    return fail(err, err_len, PULL_ENET, "%s: remote file changed (etag %s) and its new size is unknown",
                                d->file, d->new_etag);
                strfmt(why, sizeof why, "remote file changed (etag %.12s… → %.12s…, %" PRId64 " → %" PRId64
                         " bytes); restarting this file", exp_etag(d), d->new_etag, d->size, d->new_size);
                if (d->sha256[0]) strfmt(d->sha256, sizeof d->sha256, "%s", d->new_etag);
                else strfmt(d->git_oid, sizeof d->git_oid, "%s", d->new_etag);
                d->size = d->new_size;
            }
            if (restart_file(d, why)) return io_error(d, "restarting", err, err_len);
            continue;
        }
        default: break;
        }
        if (rc == CURLE_OK && d->h.status >= 200 && d->h.status < 300) {
            if (d->have == d->size) break;
            strfmt(why, sizeof why, "response ended at byte %" PRId64 " of %" PRId64, d->have, d->size);
        } else if (rc == CURLE_OK && d->h.status == 416) {
            if (++restarts > MAX_RESTARTS)
                return fail(err, err_len, PULL_ENET, "%s: HTTP 416 for range %" PRId64 "-", d->file, d->have);
            if (restart_file(d, "the server cannot serve the rest of the partial file (HTTP 416); restarting"))
                return io_error(d, "restarting", err, err_len);
            continue;
        } else if (rc == CURLE_OK && !http_transient(d->h.status)) {
            return http_error(&d->h, endpoint, repo, rev, d->file, d->url, err, err_len);
        } else if (rc != CURLE_OK && !curl_transient(rc)) {
            return fail(err, err_len, PULL_ENET, "%s: %s", d->url, cerr[0] ? cerr : curl_easy_strerror(rc));
        } else if (rc == CURLE_OK) {
            strfmt(why, sizeof why, "HTTP %ld", d->h.status);
        } else {
            strfmt(why, sizeof why, "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
        }
        /* transient: retry, counting only attempts that made no progress */
        if (d->have > at_start) attempt = 0;
        if (++attempt > max_retries(d->o))
            return fail(err, err_len, PULL_ENET, "%s: giving up after %d attempts without progress: %s "
                        "(run again to resume from byte %" PRId64 ")", d->file, attempt, why, d->have);
        if (d->have > d->synced && checkpoint(d)) return io_error(d, "syncing", err, err_len);
        pull_event ev = {.kind = PULL_EV_RETRY, .file = d->file, .msg = why, .done_bytes = d->have,
                         .total_bytes = d->size, .resumed_from = d->resumed_from, .attempt = attempt,
                         .delay_ms = backoff_ms(d->o, attempt, d->h.retry_after_s)};
        if (d->o && d->o->progress && d->o->progress(d->o->progress_user, &ev))
            return fail(err, err_len, PULL_ECANCELED, "%s: canceled (the partial download is kept)", d->file);
        sleep_ms(ev.delay_ms);
    }
    return 0;
}

int pull_download(const pull_opts *o, const char *repo, const pull_file *f, char *path_out, size_t path_cap,
                  char *err, size_t err_len) {
    if (path_out && path_cap) path_out[0] = 0;
    const char *rev = o && o->revision ? o->revision : "main";
    char endpoint[1024], root[4096], rel[2048];
    endpoint_of(o, endpoint, sizeof endpoint);
    int rc = check_endpoint(endpoint, err, err_len);
    if (rc) return rc;
    if ((rc = local_parts(o, repo, f->path, root, sizeof root, rel, sizeof rel, err, err_len))) return rc;
    if (f->size_bytes < 0) return fail(err, err_len, PULL_EINVAL, "%s: size unknown", f->path);
    if (!f->sha256[0] && !f->git_oid[0])
        return fail(err, err_len, PULL_EVERIFY,
                    "%s: the server lists no sha256 or git oid for it; refusing to download a file that cannot be verified",
                    f->path);

    dl_state *d = calloc(1, sizeof *d);
    if (!d) return fail(err, err_len, PULL_EIO, "out of memory");
    d->o = o;
    d->file = f->path;
    d->dfd = d->fd = -1;
    d->size = f->size_bytes;
    strfmt(d->sha256, sizeof d->sha256, "%s", f->sha256);
    strfmt(d->git_oid, sizeof d->git_oid, "%s", f->git_oid);
    read_boot_id(d->boot_id, sizeof d->boot_id);
    strfmt(d->fin, sizeof d->fin, "%s", base_name(f->path));
    strfmt(d->part, sizeof d->part, "%s.partial", d->fin);
    strfmt(d->side, sizeof d->side, "%s.partial.json", d->fin);
    strfmt(d->local, sizeof d->local, "%s/%s%s%s", root, rel, *rel ? "/" : "", d->fin);
    d->t0 = d->rate_t = d->last_sync_t = now_s();
    d->md = EVP_MD_CTX_new();
    char *erev = escape_all(rev), *efile = escape_file(f->path);
    int root_fd = -1;
    if (!d->md || !erev || !efile) { rc = fail(err, err_len, PULL_EIO, "out of memory"); goto out; }
    strfmt(d->url, sizeof d->url, "%s/%s/resolve/%s/%s", endpoint, repo, erev, efile);

    if ((rc = mkdir_p(root, err, err_len))) goto out;
    root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) { rc = fail(err, err_len, PULL_EIO, "open %s: %s", root, strerror(errno)); goto out; }
    if ((rc = open_below(root_fd, rel, true, &d->dfd, err, err_len))) goto out;

    /* already there and verified? */
    if (md_reset(d)) { rc = fail(err, err_len, PULL_EIO, "hash init failed"); goto out; }
    if (final_matches(d) == 1) {
        d->have = d->size;
        emit(d, PULL_EV_SKIP, "already present and verified", d->local);
        if (path_out) strfmt(path_out, path_cap, "%s", d->local);
        /* a stale partial download of it goes, unless another pull holds it */
        int pfd = openat(d->dfd, d->part, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (pfd >= 0 && flock(pfd, LOCK_EX | LOCK_NB) == 0) {
            unlinkat(d->dfd, d->part, 0);
            unlinkat(d->dfd, d->side, 0);
        }
        if (pfd >= 0) close(pfd);
        rc = 0;
        goto out;
    }

    d->fd = openat(d->dfd, d->part, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (d->fd < 0) { d->sys_errno = errno; rc = io_error(d, "opening the partial file of", err, err_len); goto out; }
    if (flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
        rc = fail(err, err_len, PULL_EBUSY, "%s.partial is locked: another cinfer pull is downloading it", d->local);
        goto out;
    }
    struct stat st;
    if (fstat(d->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = fail(err, err_len, PULL_EIO, "%s.partial: not a regular file", d->local);
        goto out;
    }
    d->have = st.st_size;
    sidecar sc = read_sidecar(d);
    char why[600] = "";
    if (d->have > 0 && !sc.ok) {
        strfmt(why, sizeof why, "a partial file without a readable sidecar; starting over");
        d->have = -1;
    } else if (d->have > 0 && (strcmp(sc.etag, exp_etag(d)) || sc.size != d->size)) {
        strfmt(why, sizeof why, "remote file changed since the interrupted download (etag %.12s… → %.12s…); "
                 "starting over", sc.etag, exp_etag(d));
        d->have = -1;
    } else if (d->have > 0 && (!sc.boot_id[0] || strcmp(sc.boot_id, d->boot_id))) {
        /* rebooted since: bytes past the last fdatasync may be garbage */
        if (d->have > sc.synced) d->have = sc.synced;
    }
    if (d->have > d->size) {
        strfmt(why, sizeof why, "the partial file is longer than the remote file; starting over");
        d->have = -1;
    }
    if (d->have < 0) {
        d->have = 0;
        if (truncate_to(d, 0)) { d->sys_errno = errno; rc = io_error(d, "truncating", err, err_len); goto out; }
        emit(d, PULL_EV_RESTART, why, NULL);
    } else if (truncate_to(d, d->have)) {
        d->sys_errno = errno;
        rc = io_error(d, "truncating", err, err_len);
        goto out;
    }
    if (hash_prefix(d)) { rc = io_error(d, "reading", err, err_len); goto out; }
    if (fdatasync(d->fd) == 0) d->synced = d->have;
    if (write_sidecar(d)) { rc = io_error(d, "writing the sidecar of", err, err_len); goto out; }
    struct statvfs vs;
    if (fstatvfs(d->fd, &vs) == 0 && (int64_t)vs.f_bavail * (int64_t)vs.f_frsize < d->size - d->have) {
        char need[32], fr[32];
        pull_fmt_bytes(d->size - d->have, need, sizeof need);
        pull_fmt_bytes((int64_t)vs.f_bavail * (int64_t)vs.f_frsize, fr, sizeof fr);
        rc = fail(err, err_len, PULL_EIO, "not enough disk space for %s: %s more needed, %s free", d->local, need, fr);
        goto out;
    }
    d->resumed_from = d->have;
    d->rate_b = d->have;
    if (emit(d, PULL_EV_START, NULL, NULL)) { rc = fail(err, err_len, PULL_ECANCELED, "canceled"); goto out; }

    if ((rc = download_loop(d, endpoint, repo, rev, err, err_len))) {
        /* make what we have durable, so a resume after a reboot keeps it */
        if (rc != PULL_EVERIFY && d->have > d->synced) checkpoint(d);
        goto out;
    }

    emit(d, PULL_EV_VERIFY, NULL, NULL);
    unsigned char dig[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    EVP_DigestFinal_ex(d->md, dig, &dlen);
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    for (unsigned i = 0; i < dlen; i++) sprintf(hex + 2 * i, "%02x", dig[i]);
    if (strcmp(hex, exp_etag(d)) != 0) {
        unlinkat(d->dfd, d->part, 0);
        unlinkat(d->dfd, d->side, 0);
        rc = fail(err, err_len, PULL_EVERIFY,
                  "%s: %s mismatch: expected %s, got %s (%" PRId64 " bytes); the download is corrupt and was removed, "
                  "no file was written under the final name", d->file, d->sha256[0] ? "sha256" : "git blob sha1",
                  exp_etag(d), hex, d->have);
        goto out;
    }
    if (fsync(d->fd) != 0) { d->sys_errno = errno; rc = io_error(d, "syncing", err, err_len); goto out; }
    if (renameat(d->dfd, d->part, d->dfd, d->fin) != 0) {
        d->sys_errno = errno;
        rc = io_error(d, "renaming to", err, err_len);
        goto out;
    }
    fsync(d->dfd);
    unlinkat(d->dfd, d->side, 0);
    double dt = now_s() - d->t0;
    if (dt > 0) d->rate = (double)(d->have - d->resumed_from) / dt;
    emit(d, PULL_EV_DONE, NULL, d->local);
    if (path_out) strfmt(path_out, path_cap, "%s", d->local);
    rc = 0;
out:
    if (d->fd >= 0) close(d->fd); /* also drops the flock */
    if (d->dfd >= 0) close(d->dfd);
    if (root_fd >= 0) close(root_fd);
    EVP_MD_CTX_free(d->md);
    free(erev);
    free(efile);
    free(d);
    return rc;
}

/* ==== the cache ============================================================ */

typedef struct { char **v; size_t n, cap; } strvec;

static int sv_push(strvec *s, const char *x) {
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        char **nv = realloc(s->v, nc * sizeof *nv);
        if (!nv) return -1;
        s->v = nv, s->cap = nc;
    }
    if (!(s->v[s->n] = strdup(x))) return -1;
    s->n++;
    return 0;
}

static void sv_free(strvec *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names in directory fd (not . and ..); dirs_only / files_only filter. */
static int list_dir(int fd, strvec *out, int want /* 0 any, 1 dirs, 2 files */) {
    int dfd = dup(fd);
    if (dfd < 0) return -1;
    DIR *dir = fdopendir(dfd);
    if (!dir) { close(dfd); return -1; }
    rewinddir(dir);
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if ((want == 1 && !S_ISDIR(st.st_mode)) || (want == 2 && !S_ISREG(st.st_mode))) continue;
        if (sv_push(out, e->d_name)) { closedir(dir); return -1; }
    }
    closedir(dir);
    if (out->n > 1) qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return 0;
}

typedef struct {
    int (*fn)(void *, const pull_cache_entry *);
    void *user;
    const char *repo;
    const char *rev;
    char base[4096]; /* local path of the revision dir */
    bool stop;
} walk_ctx;

static int64_t sidecar_size(int dfd, const char *side) {
    int fd = openat(dfd, side, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[8192];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "size");
    int64_t r = cJSON_IsNumber(s) ? (int64_t)s->valuedouble : -1;
    cJSON_Delete(j);
    return r;
}

static void walk_files(walk_ctx *w, int dfd, const char *prefix, int depth) {
    strvec names = {0};
    if (depth > 32 || list_dir(dfd, &names, 0)) { sv_free(&names); return; }
    for (size_t i = 0; i < names.n && !w->stop; i++) {
        const char *nm = names.v[i];
        struct stat st;
        if (fstatat(dfd, nm, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        char rel[FILE_PATH_MAX * 2];
        strfmt(rel, sizeof rel, "%s%s%s", prefix, *prefix ? "/" : "", nm);
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) { walk_files(w, sub, rel, depth + 1); close(sub); }
            continue;
        }
        if (!S_ISREG(st.st_mode)) continue;
        if (ends_with_ci(nm, ".partial.json") || ends_with_ci(nm, ".partial.json.tmp")) continue;
        pull_cache_entry e = {.repo = w->repo, .revision = w->rev, .size_bytes = st.st_size};
        char file[FILE_PATH_MAX * 2], path[8192];
        strfmt(file, sizeof file, "%s", rel);
        if (ends_with_ci(nm, ".partial")) {
            file[strlen(file) - 8] = 0;
            char side[300];
            strfmt(side, sizeof side, "%s.json", nm);
            e.partial = true;
            e.expected_bytes = sidecar_size(dfd, side);
        } else {
            e.expected_bytes = st.st_size;
        }
        strfmt(path, sizeof path, "%s/%s", w->base, rel);
        e.file = file;
        e.path = path;
        if (w->fn(w->user, &e)) w->stop = true;
    }
    sv_free(&names);
}

/* Walk models/NS/NAME/REV; repo_filter limits to one repo. */
static int cache_walk(const char *cache_root, const char *repo_filter,
                      int (*fn)(void *, const pull_cache_entry *), void *user, char *err, size_t err_len) {
    char croot[4096], models[4200];
    int rc;
    if (cache_root) strfmt(croot, sizeof croot, "%s", cache_root);
    else if ((rc = pull_cache_root(croot, sizeof croot, err, err_len))) return rc;
    strfmt(models, sizeof models, "%s/models", croot);
    int mfd = open(models, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (mfd < 0) {
        if (errno == ENOENT) return 0;
        return fail(err, err_len, PULL_EIO, "open %s: %s", models, strerror(errno));
    }
    walk_ctx w = {.fn = fn, .user = user};
    strvec ns = {0};
    list_dir(mfd, &ns, 1);
    for (size_t a = 0; a < ns.n && !w.stop; a++) {
        int nfd = openat(mfd, ns.v[a], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0) continue;
        strvec names = {0};
        list_dir(nfd, &names, 1);
        for (size_t b = 0; b < names.n && !w.stop; b++) {
            char repo[256];
            strfmt(repo, sizeof repo, "%s/%s", ns.v[a], names.v[b]);
            if (pull_check_repo(repo, NULL, 0) || (repo_filter && strcmp(repo, repo_filter))) continue;
            int rfd = openat(nfd, names.v[b], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (rfd < 0) continue;
            strvec revs = {0};
            list_dir(rfd, &revs, 1);
            for (size_t r = 0; r < revs.n && !w.stop; r++) {
                int vfd = openat(rfd, revs.v[r], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (vfd < 0) continue;
                char rev[300];
                rev_decode(revs.v[r], rev, sizeof rev);
                w.repo = repo;
                w.rev = rev;
                strfmt(w.base, sizeof w.base, "%s/%s/%s", models, repo, revs.v[r]);
                walk_files(&w, vfd, "", 0);
                close(vfd);
            }
            sv_free(&revs);
            close(rfd);
        }
        sv_free(&names);
        close(nfd);
    }
    sv_free(&ns);
    close(mfd);
    return 0;
}

int pull_cache_list(const char *cache_root, int (*fn)(void *, const pull_cache_entry *), void *user,
                    char *err, size_t err_len) {
    return cache_walk(cache_root, NULL, fn, user, err, err_len);
}

/* rm -r of dirfd/name without following symlinks; adds regular file sizes. */
static int rm_tree(int dirfd, const char *name, int64_t *freed, int depth) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        if (S_ISREG(st.st_mode)) *freed += st.st_size;
        return unlinkat(dirfd, name, 0);
    }
    if (depth > 64) return -1;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    strvec names = {0};
    int rc = list_dir(fd, &names, 0);
    for (size_t i = 0; i < names.n; i++)
        if (rm_tree(fd, names.v[i], freed, depth + 1)) rc = -1;
    sv_free(&names);
    close(fd);
    if (unlinkat(dirfd, name, AT_REMOVEDIR)) rc = -1;
    return rc;
}

/* Remove rel's directories from the deepest up while they are empty. */
static void rmdir_up(int root_fd, const char *rel) {
    char p[4096];
    strfmt(p, sizeof p, "%s", rel);
    for (;;) {
        if (unlinkat(root_fd, p, AT_REMOVEDIR) != 0) return;
        char *s = strrchr(p, '/');
        if (!s) return;
        *s = 0;
    }
}

int pull_cache_rm(const char *cache_root, const char *repo, const char *revision, const char *file,
                  int64_t *freed_bytes, char *err, size_t err_len) {
    int64_t freed = 0;
    if (freed_bytes) *freed_bytes = 0;
    int rc;
    if ((rc = pull_check_repo(repo, err, err_len))) return rc;
    if (revision && (rc = pull_check_revision(revision, err, err_len))) return rc;
    if (file && (rc = pull_check_file(file, err, err_len))) return rc;
    char croot[4096], models[4200];
    if (cache_root) strfmt(croot, sizeof croot, "%s", cache_root);
    else if ((rc = pull_cache_root(croot, sizeof croot, err, err_len))) return rc;
    strfmt(models, sizeof models, "%s/models", croot);
    int mfd = open(models, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (mfd < 0) return fail(err, err_len, PULL_ENOTFOUND, "%s is not in the cache (%s)", repo, models);
    int repo_fd;
    if ((rc = open_below(mfd, repo, false, &repo_fd, err, err_len))) {
        close(mfd);
        return rc == PULL_ENOTFOUND ? fail(err, err_len, rc, "%s is not in the cache (%s)", repo, models) : rc;
    }
    bool found = false;
    if (!file && !revision) {
        close(repo_fd);
        found = true;
        if (rm_tree(mfd, repo, &freed, 0))
            rc = fail(err, err_len, PULL_EIO, "removing %s/%s: %s", models, repo, strerror(errno));
    } else {
        strvec revs = {0};
        list_dir(repo_fd, &revs, 1);
        for (size_t r = 0; r < revs.n; r++) {
            char rd[600], decoded[300];
            rev_decode(revs.v[r], decoded, sizeof decoded);
            if (revision && strcmp(decoded, revision)) continue;
            rev_dirname(decoded, rd, sizeof rd);
            if (!file) {
                found = true;
                if (rm_tree(repo_fd, revs.v[r], &freed, 0))
                    rc = fail(err, err_len, PULL_EIO, "removing %s/%s/%s: %s", models, repo, revs.v[r], strerror(errno));
                continue;
            }
            char rel[2048];
            const char *slash = strrchr(file, '/');
            strfmt(rel, sizeof rel, "%s%s%.*s", revs.v[r], slash ? "/" : "", slash ? (int)(slash - file) : 0, file);
            int dfd;
            if (open_below(repo_fd, rel, false, &dfd, NULL, 0)) continue;
            const char *b = base_name(file);
            char names[3][300];
            strfmt(names[0], sizeof names[0], "%s", b);
            strfmt(names[1], sizeof names[1], "%s.partial", b);
            strfmt(names[2], sizeof names[2], "%s.partial.json", b);
            for (int k = 0; k < 3; k++) {
                struct stat st;
                if (fstatat(dfd, names[k], &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)) continue;
                if (unlinkat(dfd, names[k], 0) == 0) {
                    found = true;
                    if (S_ISREG(st.st_mode)) freed += st.st_size;
                }
            }
            close(dfd);
            rmdir_up(repo_fd, rel);
        }
        sv_free(&revs);
        close(repo_fd);
        /* drop the repo and namespace directories once empty */
        char ns[128];
        strfmt(ns, sizeof ns, "%.*s", (int)(strchr(repo, '/') - repo), repo);
        if (unlinkat(mfd, repo, AT_REMOVEDIR) == 0) unlinkat(mfd, ns, AT_REMOVEDIR);
    }
    if (!file && !revision) {
        char ns[128];
        strfmt(ns, sizeof ns, "%.*s", (int)(strchr(repo, '/') - repo), repo);
        unlinkat(mfd, ns, AT_REMOVEDIR);
    }
    close(mfd);
    if (freed_bytes) *freed_bytes = freed;
    if (!rc && !found)
        return fail(err, err_len, PULL_ENOTFOUND, "%s%s%s%s%s is not in the cache", repo, revision ? "@" : "",
                    revision ? revision : "", file ? ":" : "", file ? file : "");
    return rc;
}

/* ==== resolving REPO[@REV][:FILE] ========================================== */

typedef struct {
    strvec revs, files;  /* parallel: revision, file */
    int64_t *sizes;
    size_t cap;
} cached_set;

static int collect_cb(void *ud, const pull_cache_entry *e) {
    cached_set *s = ud;
    if (e->partial) return 0;
    if (s->files.n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 32;
        int64_t *ns = realloc(s->sizes, nc * sizeof *ns);
        if (!ns) return 1;
        s->sizes = ns, s->cap = nc;
    }
    s->sizes[s->files.n] = e->size_bytes;
    if (sv_push(&s->revs, e->revision) || sv_push(&s->files, e->file)) return 1;
    return 0;
}

bool pull_is_spec(const char *s) {
    if (!s || !*s || access(s, F_OK) == 0) return false;
    char repo[256];
    size_t n = strcspn(s, "@:");
    if (n >= sizeof repo) return false;
    memcpy(repo, s, n);
    repo[n] = 0;
    return pull_check_repo(repo, NULL, 0) == 0;
}

int pull_resolve_cached(const char *spec, char *path, size_t cap, char *err, size_t err_len) {
    return pull_resolve_cached_in(NULL, spec, path, cap, err, err_len);
}

int pull_resolve_cached_in(const char *cache_root, const char *spec, char *path, size_t cap,
                           char *err, size_t err_len) {
    char repo[256], rev[300] = "", file[FILE_PATH_MAX + 1] = "";
    size_t n = strcspn(spec, "@:");
    if (n >= sizeof repo) return fail(err, err_len, PULL_EINVAL, "'%.100s': repo id too long", spec);
    memcpy(repo, spec, n);
    repo[n] = 0;
    const char *p = spec + n;
    if (*p == '@') {
        size_t k = strcspn(p + 1, ":");
        if (k >= sizeof rev) return fail(err, err_len, PULL_EINVAL, "'%.100s': revision too long", spec);
        memcpy(rev, p + 1, k);
        rev[k] = 0;
        p += 1 + k;
    }
    if (*p == ':') strfmt(file, sizeof file, "%s", p + 1);
    int rc;
    if ((rc = pull_check_repo(repo, err, err_len))) return rc;
    if (rev[0] && (rc = pull_check_revision(rev, err, err_len))) return rc;
    char croot[4096];
    if (cache_root) strfmt(croot, sizeof croot, "%s", cache_root);
    else if ((rc = pull_cache_root(croot, sizeof croot, err, err_len))) return rc;

    cached_set s = {0};
    if ((rc = cache_walk(croot, repo, collect_cb, &s, err, err_len))) goto out;
    /* candidate revisions in order: the given one; else main, then the others */
    strvec order = {0};
    if (rev[0]) sv_push(&order, rev);
    else {
        sv_push(&order, "main");
        for (size_t i = 0; i < s.revs.n; i++) {
            bool seen = false;
            for (size_t j = 0; j < order.n; j++) seen |= !strcmp(order.v[j], s.revs.v[i]);
            if (!seen) sv_push(&order, s.revs.v[i]);
        }
    }
    char found_path[8192] = "", found_rev[300] = "", cands[1024] = "";
    int n_found_revs = 0;
    for (size_t r = 0; r < order.n; r++) {
        pull_listing l = {0};
        l.files = calloc(s.files.n + 1, sizeof *l.files);
        size_t *sel = calloc(s.files.n + 1, sizeof *sel), n_sel = 0;
        if (!l.files || !sel) { free(l.files); free(sel); rc = fail(err, err_len, PULL_EIO, "out of memory"); break; }
        for (size_t i = 0; i < s.files.n; i++)
            if (!strcmp(s.revs.v[i], order.v[r]))
                l.files[l.n_files++] = (pull_file){.path = s.files.v[i], .size_bytes = s.sizes[i], .safe = true};
        char why[600];
        int src = l.n_files ? pull_select(&l, file[0] ? file : NULL, sel, &n_sel, why, sizeof why) : PULL_ENOTFOUND;
        if (src == 0 && n_sel > 0) {
            /* one file, one split model (first shard), or a safetensors set (its directory) */
            const char *pick = l.files[sel[0]].path;
            bool one_group = true, all_st = true;
            for (size_t i = 0; i < n_sel; i++) {
                one_group &= same_group(pick, l.files[sel[i]].path);
                all_st &= ends_with_ci(l.files[sel[i]].path, ".safetensors") || is_companion(l.files[sel[i]].path);
            }
            char rd[600];
            rev_dirname(order.v[r], rd, sizeof rd);
            char cand[8192] = "";
            if (one_group) {
                for (size_t i = 0; i < n_sel; i++) {
                    size_t pl;
                    int si;
                    if (shard_of(l.files[sel[i]].path, &pl, &si) && si == 1) pick = l.files[sel[i]].path;
                }
                strfmt(cand, sizeof cand, "%s/models/%s/%s/%s", croot, repo, rd, pick);
            } else if (all_st && !file[0]) {
                strfmt(cand, sizeof cand, "%s/models/%s/%s", croot, repo, rd);
            } else {
                for (size_t i = 0; i < n_sel; i++) {
                    size_t k = strlen(cands);
                    strfmt(cands + k, sizeof cands - k, "%s%s@%s:%s", i ? ", " : "", repo, order.v[r],
                             l.files[sel[i]].path);
                }
                rc = fail(err, err_len, PULL_EINVAL, "'%s' matches several cached files: %s", spec, cands);
                free(l.files);
                free(sel);
                break;
            }
            n_found_revs++;
            if (n_found_revs == 1) {
                strfmt(found_path, sizeof found_path, "%s", cand);
                strfmt(found_rev, sizeof found_rev, "%s", order.v[r]);
            }
            if (!rev[0] && !strcmp(order.v[r], "main")) { free(l.files); free(sel); break; }
        }
        free(l.files);
        free(sel);
    }
    sv_free(&order);
    if (rc) goto out;
    if (n_found_revs == 0) {
        rc = fail(err, err_len, PULL_ENOTFOUND, "'%s' is not in the model cache (%s/models); run `cinfer pull %s%s%s%s%s`",
                  spec, croot, repo, file[0] ? " " : "", file, rev[0] ? " --revision " : "", rev);
    } else if (n_found_revs > 1) {
        rc = fail(err, err_len, PULL_EINVAL, "'%s' is cached at several revisions; name one as %s@REVISION%s%s",
                  spec, repo, file[0] ? ":" : "", file);
    } else if (strfmt(path, cap, "%s", found_path) >= (int)cap) {
        rc = fail(err, err_len, PULL_EINVAL, "path too long");
    }
out:
    sv_free(&s.revs);
    sv_free(&s.files);
    free(s.sizes);
    return rc;
}
