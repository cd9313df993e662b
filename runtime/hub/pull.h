/*
 * pull.h — download model files from a Hugging Face model repository (or a
 * mirror speaking the same HTTP API) into the local model cache, resumably and
 * verified; list, remove and resolve what is cached.
 *
 * Server API used (the shapes huggingface_hub uses):
 *   GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true&expand=false
 *       JSON array of {"type":"file","path","size","oid"(git blob sha1),
 *       "lfs":{"oid"(sha256),"size"}}; pages follow the `Link: <..>; rel="next"`
 *       header.
 *   GET {endpoint}/{repo}/resolve/{revision}/{path}   (Range: bytes=N-)
 *       LFS files redirect to a CDN; the first hop carries X-Linked-Etag
 *       (the sha256), X-Linked-Size and X-Repo-Commit.  Small non-LFS files are
 *       served directly with ETag = git blob sha1.
 *   Errors: status plus X-Error-Code (RepoNotFound, GatedRepo, EntryNotFound,
 *       RevisionNotFound) and X-Error-Message.
 * Anonymous only: no token is read, sent or stored.
 *
 * Cache layout: {cache_root}/models/{namespace}/{name}/{revision}/{path}, with
 * cache_root = $XDG_CACHE_HOME/cinfer (default ~/.cache/cinfer).  A '/' in a
 * revision is stored as "%2F".  While downloading, the data goes to
 * {path}.partial next to the final name, with a JSON sidecar
 * {path}.partial.json (url, etag, expected size, sha256 or git oid, commit,
 * boot id, bytes known to be on disk).  A file appears under its final name
 * only by an atomic rename after its size and hash were verified.
 *
 * Safety: repo ids, revisions and file paths are validated (pull_check_*)
 * before they touch a URL or the file system; directories are created with
 * mkdirat() one component at a time under the root and opened with
 * O_NOFOLLOW, so no name from the user or the server can reach outside it.
 *
 * Library code never prints or exits; everything a user sees goes through the
 * progress callback or the err buffers.  Functions return 0 or a negative
 * pull_status and fill err (what, where, expected vs actual).
 */
#ifndef CINFER_PULL_H
#define CINFER_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    PULL_OK = 0,
    PULL_EINVAL = -1,    /* bad repo id / file name / revision / argument */
    PULL_ENOTFOUND = -2, /* 404: repo, revision or file missing; nothing matched */
    PULL_EAUTH = -3,     /* 401/403: gated or private repo (anonymous only) */
    PULL_ENET = -4,      /* network or server error after retries */
    PULL_EVERIFY = -5,   /* size or hash mismatch (the partial file is removed) */
    PULL_EIO = -6,       /* local file system: disk full, permissions, ... */
    PULL_ECANCELED = -7, /* the progress callback asked to stop */
    PULL_EBUSY = -8,     /* another process is downloading the same file */
} pull_status;

/* ==== progress ============================================================= */

typedef enum {
    PULL_EV_START,    /* file download starts; resumed_from > 0 when resuming */
    PULL_EV_PROGRESS, /* at most ~10 per second while bytes arrive */
    PULL_EV_RETRY,    /* transient error; msg says why, delay_ms until the retry */
    PULL_EV_RESTART,  /* partial data discarded (remote file changed, ...); msg says why */
    PULL_EV_VERIFY,   /* all bytes are on disk; hashing the rest */
    PULL_EV_DONE,     /* verified and renamed to the final name (path) */
    PULL_EV_SKIP,     /* msg: a file skipped (unsafe name), or already present (path) */
} pull_event_kind;

typedef struct {
    pull_event_kind kind;
    const char *file;      /* path in the repo */
    const char *path;      /* local final path (DONE, SKIP when present), else NULL */
    const char *msg;       /* RETRY/RESTART/SKIP explanation, else NULL */
    int64_t done_bytes;    /* bytes of the file on disk */
    int64_t total_bytes;   /* expected size */
    int64_t resumed_from;  /* bytes already present when this run started */
    double rate_bytes_s;   /* recent transfer rate (PROGRESS, DONE) */
    double elapsed_s;      /* since START */
    int attempt;           /* RETRY: 1, 2, ... consecutive failures */
    int delay_ms;          /* RETRY: backoff before the next attempt */
} pull_event;

/* Return nonzero to cancel (the download stops with PULL_ECANCELED and keeps
 * its partial file for a later resume). */
typedef int (*pull_progress_fn)(void *user, const pull_event *ev);

typedef struct {
    const char *endpoint;   /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *revision;   /* NULL: "main" */
    const char *cache_root; /* NULL: pull_cache_root() */
    const char *dest_dir;   /* non-NULL: put files in dest_dir/{path} instead of the cache */
    int max_retries;        /* consecutive failed attempts without progress; 0: 6 */
    int retry_base_ms;      /* first backoff, doubled each time, capped at 30 s; 0: 500 */
    int stall_timeout_s;    /* no byte for this long is a transient error; 0: 30 */
    pull_progress_fn progress;
    void *progress_user;
} pull_opts;

/* ==== names ================================================================ */

/* "namespace/name", each part 1..96 chars of [A-Za-z0-9._-], not starting or
 * ending with '.' or '-', no "..", no "--" (huggingface_hub's rule). */
int pull_check_repo(const char *repo, char *err, size_t err_len);
/* Branch, tag or commit: [A-Za-z0-9._-/] components, none empty, "." or "..". */
int pull_check_revision(const char *rev, char *err, size_t err_len);
/* Relative path with '/'-separated components: no empty, "." or ".."
 * component, no leading '/', no backslash or control character, at most 512
 * bytes, not ending in ".partial" or ".partial.json" (reserved). */
int pull_check_file(const char *path, char *err, size_t err_len);

/* $XDG_CACHE_HOME/cinfer or $HOME/.cache/cinfer (not created). */
int pull_cache_root(char *buf, size_t cap, char *err, size_t err_len);

/* ==== remote listing and selection ======================================== */

typedef struct {
    char *path;          /* path in the repo */
    int64_t size_bytes;
    char sha256[65];     /* LFS sha256 (lowercase hex), "" for non-LFS files */
    char git_oid[41];    /* git blob sha1, "" when the server gave none */
    bool safe;           /* path passed pull_check_file */
} pull_file;

typedef struct {
    pull_file *files;
    size_t n_files;
} pull_listing;

/* List every file of repo at opts->revision.  Free with pull_listing_free. */
int pull_list_remote(const pull_opts *opts, const char *repo, pull_listing *out,
                     char *err, size_t err_len);
void pull_listing_free(pull_listing *l);

/* Bits per weight named by a GGUF file name's quantization tag ("Q4_K_M" → 4,
 * "F16" → 16, "IQ3_XXS" → 3), 0 when no tag is recognised. */
int pull_quant_bits(const char *file_name);

/* Choose files from a listing.  pattern NULL: the default — GGUF files only
 * (mmproj files only when nothing else): the Q4_K_M one, else the smallest
 * with >= 4 bits per weight, else the smallest; all shards of a split model
 * (NAME-0000i-of-0000n.gguf) go together; no GGUF at all: *.safetensors plus
 * the config/tokenizer files.  pattern with * ? [: fnmatch on the path (and on
 * the base name).  Otherwise: the exact path, else every file whose path
 * contains pattern (case-insensitive), e.g. "Q8_0".  Unsafe names never match.
 * Fills sel[0..*n_sel) with listing indices (sel has room for l->n_files) and
 * why (one line).  Returns PULL_ENOTFOUND when nothing matched. */
int pull_select(const pull_listing *l, const char *pattern, size_t *sel, size_t *n_sel,
                char *why, size_t why_len);

/* ==== download ============================================================= */

/* Download one file of the listing (resuming a partial one, or verifying an
 * existing final file and returning at once when it matches).  path_out gets
 * the final local path.  On PULL_EVERIFY the partial file is removed; on any
 * other error it is kept for a resume. */
int pull_download(const pull_opts *opts, const char *repo, const pull_file *f,
                  char *path_out, size_t path_cap, char *err, size_t err_len);

/* Local path a file would have (cache or dest_dir); validates the names. */
int pull_local_path(const pull_opts *opts, const char *repo, const char *file,
                    char *path, size_t cap, char *err, size_t err_len);

/* ==== the cache ============================================================ */

typedef struct {
    const char *repo;      /* namespace/name */
    const char *revision;  /* decoded ("refs/pr/1") */
    const char *file;      /* path in the repo (without ".partial") */
    const char *path;      /* local path */
    int64_t size_bytes;    /* on disk */
    int64_t expected_bytes;/* partial files: the sidecar's size, else size_bytes */
    bool partial;
} pull_cache_entry;

/* Call fn for every cached file (and partial download) under
 * cache_root/models, in name order.  fn returns nonzero to stop.
 * cache_root NULL: pull_cache_root().  A missing cache is not an error. */
int pull_cache_list(const char *cache_root,
                    int (*fn)(void *user, const pull_cache_entry *e), void *user,
                    char *err, size_t err_len);

/* Remove repo's file (all revisions, or only revision when non-NULL), with
 * its partial download, or the whole repo when file is NULL.  Empty parent
 * directories are removed.  *freed_bytes (may be NULL) gets the bytes freed.
 * PULL_ENOTFOUND when nothing was there. */
int pull_cache_rm(const char *cache_root, const char *repo, const char *revision,
                  const char *file, int64_t *freed_bytes, char *err, size_t err_len);

/* True when s looks like a cache spec (REPO[@REVISION][:FILE]) rather than a
 * local path: exactly one '/' before any ':'/'@', a valid repo id, and no file
 * of that name exists.  Lets `cinfer run` accept both. */
bool pull_is_spec(const char *s);

/* Resolve "namespace/name[@revision][:FILE]" to a cached file's path.  FILE
 * is a path, a glob or a substring as in pull_select ("Q4_K_M"); omitted, the
 * default choice of pull_select among the cached GGUF files.  Revision
 * omitted: "main" when it has a match, else the only revision that has one.
 * For a split model the first shard is returned.  Returns PULL_ENOTFOUND with
 * a hint ("run `cinfer pull ...`") when nothing cached matches, PULL_EINVAL
 * for a malformed spec or an ambiguous match (err lists the candidates). */
int pull_resolve_cached(const char *spec, char *path, size_t cap, char *err, size_t err_len);
/* The same with an explicit cache root (NULL: pull_cache_root()). */
int pull_resolve_cached_in(const char *cache_root, const char *spec, char *path, size_t cap,
                           char *err, size_t err_len);

/* "1.5 GB", "512 KB", "37 B" (decimal units, like the Hub shows sizes). */
void pull_fmt_bytes(int64_t n, char *buf, size_t cap);

#endif
