/*
 * modelfile.h — what kind of model file is this?  Decided by content (the
 * first bytes), never by the file name; and the one opener every command
 * uses (modelfile_open).
 *
 *   GGUF          "GGUF" magic
 *   safetensors   u64 little-endian header length N (< file size - 8) then '{'
 *   PyTorch       a zip archive ("PK\x03\x04", torch.save since 1.6) or a raw
 *                 pickle stream (protocol opcode 0x80, protocol 2..5)
 *   HF folder     a directory holding config.json (a Hugging Face checkpoint, hf.h)
 *
 * PyTorch checkpoints are refused: unpickling runs arbitrary code from the
 * file.  The message says so and how to convert.
 */
#ifndef CINFER_MODELFILE_H
#define CINFER_MODELFILE_H

#include <stddef.h>

#include "gguf.h"

typedef enum {
    MODEL_FORMAT_UNKNOWN = 0, /* unreadable or unrecognised: err says which */
    MODEL_FORMAT_GGUF,
    MODEL_FORMAT_SAFETENSORS,
    MODEL_FORMAT_PICKLE,      /* recognised and refused: err says why */
    MODEL_FORMAT_HF_FOLDER,   /* a directory with config.json */
} model_format;

/* Detect the format of path from its first bytes (a directory: HF_FOLDER
 * when it holds config.json).  For UNKNOWN and PICKLE a one-line message is
 * written into err ("model: ..."); otherwise err is left untouched.  Never
 * exits, never prints. */
model_format modelfile_detect(const char *path, char *err, size_t err_len);
/* The same on the first n bytes of a file of file_size bytes. */
model_format modelfile_detect_mem(const void *head, size_t n, unsigned long long file_size, char *err,
                                  size_t err_len);
/* "gguf", "safetensors", "pytorch-pickle", "hf-folder", "unknown" */
const char *modelfile_format_name(model_format f);

/* Open the model at path as a GGUF: a GGUF (or .giw) file with gguf_open, a
 * Hugging Face folder with hf_open, a safetensors file inside such a folder
 * as that folder (the whole checkpoint, every shard).  A pickle, a
 * safetensors file without config.json next to it and a directory without
 * one are refused with a message saying what to give instead; an
 * unrecognised file gets gguf_open's message.  Returns 0 or a GGUF_E* code,
 * err one line. */
int modelfile_open(const char *path, gguf_file **out, char *err, size_t err_len);

#endif
