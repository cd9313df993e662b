/*
 * giw.h — .giw files: a model's weights saved in the types a compute
 * precision computes with, so the next open maps them zero-copy instead of
 * repacking (docs/precisions.md).
 *
 * Format: an ordinary GGUF v3 file (github.com/ggml-org/ggml docs/gguf.md):
 * every metadata key of the source model, then
 *   general.alignment          u32 64 (tensor data 64-byte aligned for SIMD)
 *   cinfer.version             string, CINFER_VERSION that wrote it
 *   cinfer.precision           string, "int4" etc. (cinfer_precision_name)
 *   cinfer.source_fingerprint  string, gguf_fingerprint of the source GGUF (16 hex)
 * and every tensor of the source in its compiled type: matmul weights in
 * cinfer's repacked types (ids 100.., runtime/gguf.h, layouts runtime/kern.h)
 * or F32, everything else byte for byte.  llama.cpp refuses these files
 * (unknown tensor types); cinfer's loader accepts the cinfer ids only in a
 * file with cinfer.version.
 */
#ifndef CINFER_GIW_H
#define CINFER_GIW_H

#include <stddef.h>

#include "engine.h"
#include "gguf.h"

/* The precision a .giw was saved in (CINFER_PRECISION_*, >= 0); -1 when g is
 * not a .giw (no cinfer.version key); -2 with a message in err when it is one
 * but cinfer.precision is missing, not a string or unknown. */
int giw_precision(const gguf_file *g, char *err, size_t err_len);

/* Write src's metadata and m's bound weights (types from m->desc; tensors the
 * model does not use are copied as they are) as a .giw at path.  Written to
 * path.tmp.PID, flushed, fsync'ed and renamed, so path is either absent, the
 * old file, or complete.  Errors: -1, "out.giw: write failed: No space left
 * on device" (the temporary file is removed). */
int giw_write(const gguf_file *src, const eng_model *m, const char *precision, const char *path,
              char *err, size_t err_len);

#endif
