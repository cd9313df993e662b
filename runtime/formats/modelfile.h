/*
 * modelfile.h — what kind of model file is this?  Decided by content (the
 * first bytes), never by the file name.
 *
 *   GGUF          "GGUF" magic
 *   safetensors   u64 little-endian header length N (< file size - 8) then '{'
 *   PyTorch       a zip archive ("PK\x03\x04", torch.save since 1.6) or a raw
 *                 pickle stream (protocol opcode 0x80, protocol 2..5)
 *
 * PyTorch checkpoints are refused: unpickling runs arbitrary code from the
 * file.  The message says so and how to convert.
 */
#ifndef CINFER_MODELFILE_H
#define CINFER_MODELFILE_H

#include <stddef.h>

typedef enum {
    MODEL_FORMAT_UNKNOWN = 0, /* unreadable or unrecognised: err says which */
    MODEL_FORMAT_GGUF,
    MODEL_FORMAT_SAFETENSORS,
    MODEL_FORMAT_PICKLE,      /* recognised and refused: err says why */
} model_format;

/* Detect the format of path from its first bytes.  For UNKNOWN and PICKLE a
 * one-line message is written into err ("model: ..."); for GGUF and
 * SAFETENSORS err is left untouched.  Never exits, never prints. */
model_format modelfile_detect(const char *path, char *err, size_t err_len);
/* The same on the first n bytes of a file of file_size bytes. */
model_format modelfile_detect_mem(const void *head, size_t n, unsigned long long file_size, char *err,
                                  size_t err_len);
/* "gguf", "safetensors", "pytorch-pickle", "unknown" */
const char *modelfile_format_name(model_format f);

#endif
