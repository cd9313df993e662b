/*
 * readall.c — see readall.h.
 */
#include "readall.h"

#include <errno.h>
#include <stdlib.h>

char *read_all(FILE *f, size_t max, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
        if (n > max) {
            free(buf);
            errno = EFBIG;
            return NULL;
        }
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int e = errno;
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    if (ferror(f)) {
        free(buf);
        errno = e ? e : EIO;
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}
