/*
 * gguf_write.h — the writer side of gguf.h: serialise GGUF v3 files.
 *
 * Owns: the byte encoding of a GGUF file (header, metadata key/value pairs,
 * tensor infos, alignment padding) and the atomic replacement of the output
 * file (temporary file next to it, fsync, rename, fsync of the directory).
 * Used by `cinfer quantize` (quant.c) and the .giw writer (giw.c).
 *
 * Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
 *   header    "GGUF", u32 version (3), u64 tensor_count, u64 metadata_kv_count
 *   kv        gguf_string key, u32 value_type, value
 *   string    u64 length + bytes (no NUL)
 *   array     u32 element type, u64 count, elements (strings as above,
 *             nested arrays as (type, count, elements) recursively)
 *   tensor    gguf_string name, u32 n_dims, u64 ne[n_dims], u32 type,
 *             u64 offset (relative to the data section, a multiple of the
 *             alignment)
 *   then zero padding to general.alignment, then the tensor data, each
 *   tensor padded with zeros to the alignment.
 * All numbers little-endian (the host order on every target cinfer builds for).
 *
 * Errors: the writer is sticky — the first failure stores an errno value in
 * gguf_writer.err and every later call does nothing, so a caller writes a
 * whole section and checks err once.  Nothing here prints or exits.
 */
#ifndef CINFER_GGUF_WRITE_H
#define CINFER_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf.h"

/* A checked, counting writer on a stdio stream. */
typedef struct {
    FILE *f;      /* destination */
    uint64_t off; /* bytes written so far (the file offset when f started empty) */
    int err;      /* 0, or the errno of the first failure (EIO when errno was 0,
                     EINVAL for a value of unknown type) */
} gguf_writer;

/* x rounded up to a multiple of align (align > 0). */
static inline uint64_t gguf_align_up(uint64_t x, uint64_t align) { return (x + align - 1) / align * align; }

/* Raw bytes, and the fixed-size little-endian integers of the format. */
void gguf_w_bytes(gguf_writer *w, const void *p, size_t n);
void gguf_w_u32(gguf_writer *w, uint32_t v);
void gguf_w_u64(gguf_writer *w, uint64_t v);
/* gguf_string: u64 length, then len bytes of p (not NUL-terminated). */
void gguf_w_str(gguf_writer *w, const char *p, uint64_t len);
/* n zero bytes. */
void gguf_w_zeros(gguf_writer *w, uint64_t n);
/* Zero bytes up to the next multiple of align of w->off (align > 0). */
void gguf_w_pad(gguf_writer *w, uint32_t align);

/* The payload of value v as gguf.md encodes it for type v->type (the type id
 * itself is not written): integers narrowed from the widened u64/i64 of
 * gguf_value, FLOAT32 from the double, BOOL as one byte 0/1, strings as
 * gguf_string, arrays as element type + count + elements (nested arrays
 * recursively).  An unknown type sets err = EINVAL. */
void gguf_w_value(gguf_writer *w, const gguf_value *v);
/* One metadata pair: key (NUL-terminated), u32 v->type, payload. */
void gguf_w_kv(gguf_writer *w, const char *key, const gguf_value *v);

/* Values to build a gguf_kv_set from.  s must outlive the write. */
gguf_value gguf_val_u32(uint32_t x);
gguf_value gguf_val_str(const char *s);

/* A key the writer sets: it replaces any pair of that key in the source and is
 * written after the copied pairs, in list order (what ggml's gguf_set_val does:
 * remove, then append). */
typedef struct {
    const char *key;
    gguf_value value;
} gguf_kv_set;

/* Whether to leave source pair `key` out of the output (true = drop).
 * user: the pointer given to gguf_w_header. */
typedef bool (*gguf_key_filter)(gguf_str key, const void *user);

/* A gguf_key_filter that drops the keys of a NULL-terminated list
 * (user: const char *const[]). */
bool gguf_key_in_list(gguf_str key, const void *user);

/* The file header and all metadata: "GGUF", version 3, n_tensors, the pair
 * count, then every pair of src in source order except those `drop` rejects
 * (drop may be NULL) and those whose key is in set[0..n_set), then set[] in
 * order.  The tensor infos (gguf_w_tensor_info, n_tensors of them) follow. */
void gguf_w_header(gguf_writer *w, const gguf_file *src, uint64_t n_tensors, gguf_key_filter drop,
                   const void *user, const gguf_kv_set *set, size_t n_set);

/* One tensor info: name (NUL-terminated), n_dims (1..GGUF_MAX_DIMS), ne[0..n_dims)
 * elements per dimension (ne[0] contiguous), ggml/cinfer type id, byte offset
 * in the data section. */
void gguf_w_tensor_info(gguf_writer *w, const char *name, uint32_t n_dims, const int64_t *ne,
                        uint32_t type, uint64_t offset);

/* ---- whole files -----------------------------------------------------------------
 * g as one GGUF file at path: every key and tensor as they are, data from
 * t->data, so an assembled file (a Hugging Face folder, formats/hf.h) becomes
 * one self-contained GGUF that cinfer runs the same way (its keys keep the
 * folder's tokenizer.json and RoPE layout; llama.cpp would not read those).
 * Written through gguf_out (atomic, refuses to replace its input).  0, or an
 * errno value with "PATH: reason" in err. */
int gguf_write_model(const gguf_file *g, const char *path, char *err, size_t err_len);

/* ---- atomic output file -------------------------------------------------------
 * The file is written under tmp = path + tmp_suffix in the same directory and
 * only gets its final name once complete, so a reader never sees a partial
 * file and a failed write leaves nothing behind:
 *     gguf_out o;
 *     if (gguf_out_open(&o, path, ".partial", src, err, n)) fail;
 *     ... write with &o.w ...
 *     if (gguf_out_close(&o)) fail;      flush + fsync + close
 *     (optionally check o.tmp)
 *     if (gguf_out_commit(&o, err, n)) fail;   rename + fsync of the directory
 *   fail: gguf_out_abort(&o);            close, unlink tmp (no-op once committed)
 *
 * What may be replaced: rename() replaces whatever directory entry sits at
 * path, so an existing path must be a regular file that is not the input.
 * Refused, checked at open and again just before the rename (a check, not a
 * lock: a path swapped between that check and the rename is not caught):
 *   - a symbolic link, dangling or not: renaming over it would replace the
 *     link itself and leave its target untouched, which is never what
 *     `-o link` means; cinfer does not resolve it (give the target's path);
 *   - a directory, FIFO, socket or device node (`-o /dev/null` as root
 *     would otherwise turn /dev/null into a regular file);
 *   - the input file (same st_dev and st_ino as src, so also a hard link to
 *     it): replacing it would destroy the source while it is being read.
 * The temporary file is created with O_EXCL | O_NOFOLLOW: a symlink planted
 * under the temporary name is removed (unlink removes the link, never its
 * target) and never followed.
 *
 * Stale temporary files: a writer killed by SIGKILL (or a crash) leaves its
 * path.tmp.<pid>.  gguf_out_open removes every path.tmp.<digits> in path's
 * directory that is a regular file and whose pid is not alive (kill(pid, 0)
 * fails with ESRCH), so they do not pile up.  A pid alive or owned by another
 * user (EPERM) is left alone.  Limit: a writer in another pid namespace
 * (container) writing into the same directory looks dead; removing its file
 * makes that writer's rename fail with an error (its output is lost, never
 * corrupted).  A fixed suffix such as ".partial" is simply replaced by the
 * next write.
 */
typedef struct {
    char *tmp;        /* temporary path (owned; NULL after commit/abort) */
    const char *path; /* final path (the caller's string) */
    gguf_writer w;    /* w.f open on tmp until gguf_out_close */
    bool has_src;     /* src_dev/src_ino identify the input file */
    uint64_t src_dev, src_ino;
} gguf_out;

/* Check that path may be replaced (see above: absent, or a regular file that
 * is not the input src; src NULL or an in-memory image: no input check).
 * 0, or an errno value (EEXIST for "is the input", ELOOP for a symlink,
 * EISDIR / EINVAL for other non-regular files, or lstat's errno) with
 * "PATH: reason" in err. */
int gguf_out_check_target(const char *path, const gguf_file *src, char *err, size_t err_len);

/* Check path (gguf_out_check_target), remove stale path.tmp.<pid> files, then
 * create path + tmp_suffix (exclusively; mode 0666 less the umask).  src: the
 * input being converted (must not be replaced), or NULL.  0, or an errno
 * value with "PATH: reason" or "TMP: reason" in err; *o is then safe to
 * abort. */
int gguf_out_open(gguf_out *o, const char *path, const char *tmp_suffix, const gguf_file *src, char *err,
                  size_t err_len);
/* Flush, fsync and close the temporary file.  0, or the errno of the first
 * failure including any earlier write error in o->w.err (also stored there). */
int gguf_out_close(gguf_out *o);
/* Close if still open, check path again (gguf_out_check_target), rename tmp
 * to path, then fsync the directory so the new name survives a crash (best
 * effort: once renamed the file is complete and in place, so a directory
 * that cannot be fsynced is not an error).  0, or the errno of the
 * close/check/rename, with "PATH: reason" in err (err may be NULL), in which
 * case tmp is removed and path is untouched. */
int gguf_out_commit(gguf_out *o, char *err, size_t err_len);
/* Close and remove the temporary file and free o's memory; no-op after a
 * commit or on a zeroed gguf_out. */
void gguf_out_abort(gguf_out *o);

#endif
