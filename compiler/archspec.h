/*
 * archspec.h — run a Lua architecture descriptor against a GGUF file and get
 * the IR of its forward pass (see archspec.c for the Lua vocabulary).
 */
#ifndef CINFER_ARCHSPEC_H
#define CINFER_ARCHSPEC_H

#include <stddef.h>

#include "formats/gguf.h"
#include "ir.h"

/* Run archspec source src (src_len bytes; spec_name is used in messages and
 * #line, e.g. "archspecs/llama.lua") against g, after the shared helpers in
 * common (archspecs/common.lua; may be NULL).  Binds every tensor the spec
 * names, checking type and every dimension.  On success *out owns the IR
 * (free with ir_free) and keeps pointers into g: g must outlive it.
 * Errors: -1 with "archspec FILE:LINE: what (expected vs actual)". */
int archspec_build(const gguf_file *g, const char *common, size_t common_len, const char *src,
                   size_t src_len, const char *spec_name, ir_program **out, char *err,
                   size_t err_len);

#endif
