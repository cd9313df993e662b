/*
 * readall.h — read a whole stream into memory (files, stdin, archspecs under
 * $CINFER_SPEC_DIR, cached CUDA images).
 */
#ifndef CINFER_BASE_READALL_H
#define CINFER_BASE_READALL_H

#include <stddef.h>
#include <stdio.h>

/* The rest of stream f (not closed) in a malloc'd buffer with one NUL past
 * the end; *len = its bytes.  At most max bytes are read: a longer stream
 * (an endless /dev/zero, a wrong file) is NULL with errno EFBIG.  NULL with
 * errno ENOMEM, or the read error's errno (EIO when the C library gives
 * none). */
char *read_all(FILE *f, size_t max, size_t *len);

#endif
