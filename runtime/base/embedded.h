/*
 * embedded.h — archspecs and templates compiled into the binary (see
 * tools/embed.c), so an installed cinfer needs no data files.  Set
 * CINFER_SPEC_DIR to a source tree to use files from disk instead (development).
 */
#ifndef CINFER_EMBEDDED_H
#define CINFER_EMBEDDED_H

#include <stddef.h>

typedef struct {
    const char *name; /* "archspecs/llama.lua", "templates/prelude.h" */
    const char *data; /* NUL-terminated */
    size_t len;
} embedded_file;

extern const embedded_file embedded_files[]; /* terminated by name == NULL */

#endif
