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
 * cinfer's repacked types (ids 100.., runtime/formats/gguf.h, layouts runtime/kernels/kern.h)
 * or F32, everything else byte for byte.  llama.cpp refuses these files
 * (unknown tensor types); cinfer's loader accepts the cinfer ids only in a
 * file with cinfer.version.
 */
#ifndef CINFER_GIW_H
#define CINFER_GIW_H

#include <stddef.h>

#include "engine.h"
#include "formats/gguf.h"

/* The precision a .giw was saved in (CINFER_PRECISION_*, >= 0); -1 when g is
 * not a .giw (no cinfer.version key); -2 with a one-line message in err when
 * it is one but cannot be trusted:
 *   - cinfer.version is not a string starting "MAJOR.MINOR", or is newer than
 *     this build's CINFER_VERSION (a newer major; while the major is 0, a newer
 *     minor, as semver makes 0.y versions incompatible with each other):
 *     "written by cinfer 9.9.9 (cinfer.version), newer than this cinfer 0.1.0: ...";
 *   - cinfer.precision is missing, not a string or unknown;
 *   - a repacked tensor (ids 100..) whose type that precision does not give
 *     it (native and f32 write none; int8/int8int8 only Q8_0_R8; int4 only
 *     Q4_0_R8; int4mix Q8_0_R8 for attn_v/ffn_down/output and Q4_0_R8 for the
 *     rest; auto either): "inconsistent .giw: cinfer.precision is int8 but
 *     tensor 'blk.0.attn_q.weight' has type Q4_0_R8, ...".
 * Not detectable here: a tensor whose type id was swapped for another of the
 * same byte size (Q4_0 <-> Q4_0_R8, Q8_0 <-> Q8_0_R8, two plain types): the
 * bytes are valid either way.  The loader accepts repacked ids only with a
 * cinfer.version key (gguf.c), giw_check_bound catches every type the
 * compiled program would not map as it is, and the rest is the file's
 * integrity, which GGUF does not checksum. */
int giw_precision(const gguf_file *g, char *err, size_t err_len);

/* After compiling a .giw in its precision (desc = the compiled program):
 * every weight must already have in g the type desc computes it in, since a
 * .giw is mapped zero-copy; e.g. a file saying "f32" whose matmul weights are
 * Q8_0, or "int8" holding plain F32 ones.  0, or -1 with "inconsistent .giw:
 * tensor 'X' is Q8_0 in the file, but f32 (cinfer.precision) computes it as
 * F32; ..." in err.  Weights absent from g are left to eng_model_bind. */
int giw_check_bound(const gguf_file *g, const cf_model_desc *desc, int precision, char *err, size_t err_len);

/* Write src's metadata and m's bound weights (types from m->desc; tensors the
 * model does not use are copied as they are) as a .giw at path.  Written to
 * path.tmp.PID, flushed, fsync'ed and renamed (gguf_write.h gguf_out_open:
 * path must be absent or a regular file other than src's file — not a
 * symlink, directory, FIFO or device — and stale path.tmp.<dead pid> files
 * are removed), so path is either absent, the old file, or complete.
 * Errors: -1, "out.giw: write failed: No space left on device" (the
 * temporary file is removed), "out.giw: is the input file; ...",
 * "out.giw: is a symbolic link; ...", "out.giw: exists and is a FIFO; ...". */
int giw_write(const gguf_file *src, const eng_model *m, const char *precision, const char *path,
              char *err, size_t err_len);

#endif
