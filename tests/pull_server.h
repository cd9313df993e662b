/*
 * pull_server.h — a fake Hugging Face Hub for the pull tests, in the test
 * process (libmicrohttpd, one thread per connection, 127.0.0.1, a free port).
 *
 * It speaks what runtime/hub/pull.c uses, shaped like huggingface.co:
 *   GET /api/models/NS/NAME/tree/REV?recursive=..&expand=..[&cursor=N]
 *       [{"type":"file","oid":GIT_SHA1,"size":N,"path":P[,"lfs":{"oid":SHA256,"size":N,"pointerSize":134}]}]
 *       paginated with Link: <...>; rel="next" when a page size is set
 *   GET /NS/NAME/resolve/REV/PATH
 *       LFS: 302 to /cdn/SHA256 with X-Linked-Etag, X-Linked-Size, X-Repo-Commit, ETag
 *       other: 200 with the bytes, ETag = git blob sha1
 *   GET /cdn/SHA256   the bytes, honouring Range: bytes=N-
 *   errors: 401 X-Error-Code RepoNotFound / GatedRepo, 404 EntryNotFound / RevisionNotFound
 * Test knobs: throttling, connection drops at given byte offsets, a corrupted
 * byte, a failing status for the next requests, ignoring Range.
 */
#ifndef CINFER_PULL_SERVER_H
#define CINFER_PULL_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pull_server pull_server;

pull_server *ps_start(void);            /* NULL when it cannot listen */
void ps_stop(pull_server *s);           /* NULL is a no-op */
const char *ps_endpoint(const pull_server *s); /* "http://127.0.0.1:PORT" */

/* Repos: gated ones answer 401 GatedRepo to everything. */
void ps_add_repo(pull_server *s, const char *repo, bool gated);
/* Add or replace (new content, new hashes) a file at revision "main". */
void ps_set_file(pull_server *s, const char *repo, const char *path, const void *data, size_t size, bool lfs);
/* Serve byte `offset` of the file flipped, keeping the advertised hashes. */
void ps_corrupt(pull_server *s, const char *repo, const char *path, size_t offset);
/* Content hashes the server advertises (static buffers of the entry). */
const char *ps_sha256(pull_server *s, const char *repo, const char *path);

void ps_throttle(pull_server *s, int64_t bytes_per_s); /* 0: unlimited */
/* Drop the connection once when a body reaches each absolute file offset. */
void ps_add_cuts(pull_server *s, const size_t *offsets, size_t n);
size_t ps_cuts_left(pull_server *s);
/* The next n file requests (resolve or cdn) answer this status. */
void ps_fail_next(pull_server *s, int n, int status);
void ps_ignore_range(pull_server *s, bool on);
void ps_page_size(pull_server *s, int n); /* tree entries per page; 0: one page */

typedef struct {
    int64_t bytes_served;  /* file body bytes handed to the network */
    int n_tree, n_resolve, n_cdn, n_range; /* requests; n_range: with a Range header */
} ps_stats;
ps_stats ps_get_stats(pull_server *s);

#endif
