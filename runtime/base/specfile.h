/*
 * specfile.h — the project's data files (archspecs/NAME.lua, templates/NAME), read
 * from the copies embedded in the binary (embedded.h), or from the source
 * tree named by $CINFER_SPEC_DIR when it is set (development: edit an
 * archspec without rebuilding).  Shared by the compiler (archspecs,
 * templates) and the Hugging Face loader (archspecs/<arch>.hf.lua).
 */
#ifndef CINFER_SPECFILE_H
#define CINFER_SPECFILE_H

#include <stddef.h>

/* *data = a malloc'd, NUL-terminated copy of the file `name`
 * ("archspecs/llama.lua"), *len its bytes.  0, or -1 with a one-line message
 * in err ("PATH: No such file or directory" under $CINFER_SPEC_DIR, "no NAME
 * in this build ..." otherwise). */
int spec_file_read(const char *name, char **data, size_t *len, char *err, size_t err_len);

/* The names of the files in folder `dir` ("archspecs") whose names end with
 * `suffix` (".hf.lua"), as "archspecs/llama.hf.lua", sorted: *names is a
 * malloc'd array of *n malloc'd strings (free with spec_file_names_free).
 * 0, or -1 with a message in err. */
int spec_file_list(const char *dir, const char *suffix, char ***names, size_t *n, char *err, size_t err_len);
void spec_file_names_free(char **names, size_t n);

#endif
