/*
 * specfile.c — embedded or on-disk project data files (see specfile.h).
 */
#include "specfile.h"

#include "readall.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"

static const char *spec_dir(void) {
    const char *dir = getenv("CINFER_SPEC_DIR");
    return dir && *dir ? dir : NULL;
}

int spec_file_read(const char *name, char **data, size_t *len, char *err, size_t err_len) {
    const char *dir = spec_dir();
    if (dir) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        FILE *f = fopen(path, "rb");
        if (!f) return snprintf(err, err_len, "%s: %s", path, strerror(errno)), -1;
        *data = read_all(f, (size_t)64 << 20, len); /* an archspec or template: KiB */
        int e = errno;
        fclose(f);
        if (!*data) return snprintf(err, err_len, "%s: %s", path, strerror(e)), -1;
        return 0;
    }
    for (const embedded_file *e = embedded_files; e->name; e++)
        if (!strcmp(e->name, name)) {
            *data = malloc(e->len + 1);
            if (!*data) return snprintf(err, err_len, "out of memory"), -1;
            memcpy(*data, e->data, e->len + 1);
            *len = e->len;
            return 0;
        }
    return snprintf(err, err_len, "no %s in this build (set CINFER_SPEC_DIR to a source tree)", name), -1;
}

void spec_file_names_free(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Append dir/base to the list when base ends with suffix. */
static int add_name(char ***names, size_t *n, size_t *cap, const char *dir, const char *base, const char *suffix) {
    size_t bl = strlen(base), sl = strlen(suffix);
    if (bl <= sl || strcmp(base + bl - sl, suffix)) return 0;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        char **nn = realloc(*names, c * sizeof *nn);
        if (!nn) return -1;
        *names = nn;
        *cap = c;
    }
    size_t len = strlen(dir) + 1 + bl + 1;
    char *s = malloc(len);
    if (!s) return -1;
    snprintf(s, len, "%s/%s", dir, base);
    (*names)[(*n)++] = s;
    return 0;
}

int spec_file_list(const char *dir, const char *suffix, char ***names, size_t *n, char *err, size_t err_len) {
    *names = NULL;
    *n = 0;
    size_t cap = 0, dl = strlen(dir);
    const char *root = spec_dir();
    int rc = 0;
    if (root) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", root, dir);
        DIR *d = opendir(path);
        if (!d) return snprintf(err, err_len, "%s: %s", path, strerror(errno)), -1;
        for (struct dirent *e; !rc && (e = readdir(d));) rc = add_name(names, n, &cap, dir, e->d_name, suffix);
        closedir(d);
    } else {
        for (const embedded_file *e = embedded_files; !rc && e->name; e++)
            if (!strncmp(e->name, dir, dl) && e->name[dl] == '/' && !strchr(e->name + dl + 1, '/'))
                rc = add_name(names, n, &cap, dir, e->name + dl + 1, suffix);
    }
    if (rc) {
        spec_file_names_free(*names, *n);
        *names = NULL;
        *n = 0;
        return snprintf(err, err_len, "out of memory listing %s", dir), -1;
    }
    if (*n) qsort(*names, *n, sizeof **names, cmp_str);
    return 0;
}
