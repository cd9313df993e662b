/*
 * gguf_write.c — serialise GGUF v3 files (see gguf_write.h; format:
 * https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
 */
#include "gguf_write.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- encoding ------------------------------------------------------------------ */

void gguf_w_bytes(gguf_writer *w, const void *p, size_t n) {
    if (w->err || !n) return;
    errno = 0;
    if (fwrite(p, 1, n, w->f) != n) w->err = errno ? errno : EIO;
    w->off += n;
}

void gguf_w_u32(gguf_writer *w, uint32_t v) { gguf_w_bytes(w, &v, 4); }
void gguf_w_u64(gguf_writer *w, uint64_t v) { gguf_w_bytes(w, &v, 8); }

void gguf_w_str(gguf_writer *w, const char *p, uint64_t len) {
    gguf_w_u64(w, len);
    gguf_w_bytes(w, p, (size_t)len);
}

void gguf_w_zeros(gguf_writer *w, uint64_t n) {
    static const uint8_t z[256];
    while (n && !w->err) {
        size_t k = n < sizeof z ? (size_t)n : sizeof z;
        gguf_w_bytes(w, z, k);
        n -= k;
    }
}

void gguf_w_pad(gguf_writer *w, uint32_t align) { gguf_w_zeros(w, gguf_align_up(w->off, align) - w->off); }

void gguf_w_value(gguf_writer *w, const gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_UINT8: { uint8_t x = (uint8_t)v->v.u64; gguf_w_bytes(w, &x, 1); break; }
    case GGUF_VT_INT8: { int8_t x = (int8_t)v->v.i64; gguf_w_bytes(w, &x, 1); break; }
    case GGUF_VT_UINT16: { uint16_t x = (uint16_t)v->v.u64; gguf_w_bytes(w, &x, 2); break; }
    case GGUF_VT_INT16: { int16_t x = (int16_t)v->v.i64; gguf_w_bytes(w, &x, 2); break; }
    case GGUF_VT_UINT32: { uint32_t x = (uint32_t)v->v.u64; gguf_w_bytes(w, &x, 4); break; }
    case GGUF_VT_INT32: { int32_t x = (int32_t)v->v.i64; gguf_w_bytes(w, &x, 4); break; }
    case GGUF_VT_FLOAT32: { float x = (float)v->v.f64; gguf_w_bytes(w, &x, 4); break; }
    case GGUF_VT_BOOL: { uint8_t x = v->v.b ? 1 : 0; gguf_w_bytes(w, &x, 1); break; }
    case GGUF_VT_UINT64: gguf_w_bytes(w, &v->v.u64, 8); break;
    case GGUF_VT_INT64: gguf_w_bytes(w, &v->v.i64, 8); break;
    case GGUF_VT_FLOAT64: gguf_w_bytes(w, &v->v.f64, 8); break;
    case GGUF_VT_STRING: gguf_w_str(w, v->v.str.ptr, v->v.str.len); break;
    case GGUF_VT_ARRAY: {
        const uint32_t et = v->v.arr.type;
        gguf_w_u32(w, et);
        gguf_w_u64(w, v->v.arr.n);
        if (et == GGUF_VT_STRING) {
            for (uint64_t i = 0; i < v->v.arr.n; i++) gguf_w_str(w, v->v.arr.strs[i].ptr, v->v.arr.strs[i].len);
        } else if (et == GGUF_VT_ARRAY) {
            /* a nested array element is (element type, count, elements) */
            for (uint64_t i = 0; i < v->v.arr.n && !w->err; i++) gguf_w_value(w, &v->v.arr.elems[i]);
        } else if (gguf_vtype_size(et)) {
            gguf_w_bytes(w, v->v.arr.data, (size_t)(v->v.arr.n * gguf_vtype_size(et)));
        } else if (!w->err) {
            w->err = EINVAL;
        }
        break;
    }
    default:
        if (!w->err) w->err = EINVAL;
    }
}

void gguf_w_kv(gguf_writer *w, const char *key, const gguf_value *v) {
    gguf_w_str(w, key, strlen(key));
    gguf_w_u32(w, v->type);
    gguf_w_value(w, v);
}

gguf_value gguf_val_u32(uint32_t x) { return (gguf_value){.type = GGUF_VT_UINT32, .v.u64 = x}; }

gguf_value gguf_val_str(const char *s) {
    return (gguf_value){.type = GGUF_VT_STRING, .v.str = {.len = strlen(s), .ptr = s}};
}

bool gguf_key_in_list(gguf_str key, const void *user) {
    for (const char *const *k = user; k && *k; k++)
        if (gguf_str_eq(key, *k)) return true;
    return false;
}

static bool dropped(gguf_str key, gguf_key_filter drop, const void *user, const gguf_kv_set *set, size_t n_set) {
    for (size_t k = 0; k < n_set; k++)
        if (gguf_str_eq(key, set[k].key)) return true;
    return drop && drop(key, user);
}

void gguf_w_header(gguf_writer *w, const gguf_file *src, uint64_t n_tensors, gguf_key_filter drop,
                   const void *user, const gguf_kv_set *set, size_t n_set) {
    uint64_t n_kv = n_set;
    for (uint64_t i = 0; i < gguf_n_kv(src); i++) n_kv += !dropped(gguf_kv_at(src, i)->key, drop, user, set, n_set);
    gguf_w_bytes(w, "GGUF", 4);
    gguf_w_u32(w, 3);
    gguf_w_u64(w, n_tensors);
    gguf_w_u64(w, n_kv);
    for (uint64_t i = 0; i < gguf_n_kv(src); i++) {
        const gguf_kv *kv = gguf_kv_at(src, i);
        if (dropped(kv->key, drop, user, set, n_set)) continue;
        gguf_w_str(w, kv->key.ptr, kv->key.len);
        gguf_w_u32(w, kv->value.type);
        gguf_w_value(w, &kv->value);
    }
    for (size_t k = 0; k < n_set; k++) gguf_w_kv(w, set[k].key, &set[k].value);
}

void gguf_w_tensor_info(gguf_writer *w, const char *name, uint32_t n_dims, const int64_t *ne,
                        uint32_t type, uint64_t offset) {
    gguf_w_str(w, name, strlen(name));
    gguf_w_u32(w, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) gguf_w_u64(w, (uint64_t)ne[d]);
    gguf_w_u32(w, type);
    gguf_w_u64(w, offset);
}

/* ---- atomic output file ----------------------------------------------------------- */

static int set_err(char *err, size_t err_len, int e, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int set_err(char *err, size_t err_len, int e, const char *fmt, ...) {
    if (err && err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return e;
}

static const char *kind_of(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : "not a regular file";
}

/* The check of gguf_out_check_target against an input identity. */
static int check_target(const char *path, bool has_src, uint64_t dev, uint64_t ino, char *err, size_t err_len) {
    struct stat st;
    if (lstat(path, &st)) {
        if (errno == ENOENT) return 0;
        int e = errno ? errno : EIO;
        return set_err(err, err_len, e, "%s: %s", path, strerror(e));
    }
    if (S_ISLNK(st.st_mode))
        return set_err(err, err_len, ELOOP, "%s: is a symbolic link; refusing to replace it (the output would "
                       "replace the link, not its target): give the target's path", path);
    if (!S_ISREG(st.st_mode))
        return set_err(err, err_len, S_ISDIR(st.st_mode) ? EISDIR : EINVAL,
                       "%s: exists and is %s; refusing to replace it with the output file", path, kind_of(st.st_mode));
    if (has_src && (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino)
        return set_err(err, err_len, EEXIST, "%s: is the input file; refusing to overwrite it, write to another path",
                       path);
    return 0;
}

int gguf_out_check_target(const char *path, const gguf_file *src, char *err, size_t err_len) {
    uint64_t dev = 0, ino = 0;
    bool has = src && !gguf_file_id(src, &dev, &ino);
    return check_target(path, has, dev, ino, err, err_len);
}

/* Remove stale path.tmp.<pid> files (see gguf_write.h): regular files whose
 * pid is not a live process, never this process's own name, never the input.
 * Best effort: any failure leaves the file. */
static void remove_stale_tmp(const gguf_out *o) {
    const char *slash = strrchr(o->path, '/');
    const char *base = slash ? slash + 1 : o->path;
    size_t dir_len = slash ? (size_t)(slash - o->path) + 1 : 0; /* with the '/' */
    size_t base_len = strlen(base);
    if (!base_len) return;
    char *dir = dir_len ? strndup(o->path, dir_len) : strdup(".");
    if (!dir) return;
    DIR *d = opendir(dir);
    if (!d) {
        free(dir);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (strncmp(n, base, base_len) || strncmp(n + base_len, ".tmp.", 5)) continue;
        const char *digits = n + base_len + 5;
        if (!*digits || strlen(digits) > 9 || strspn(digits, "0123456789") != strlen(digits)) continue;
        long pid = strtol(digits, NULL, 10);
        if (pid <= 1 || pid == (long)getpid()) continue;
        errno = 0;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
        size_t len = dir_len + strlen(n) + 1;
        char *full = malloc(len);
        if (!full) break;
        snprintf(full, len, "%.*s%s", (int)dir_len, o->path, n);
        struct stat st;
        if (!lstat(full, &st) && S_ISREG(st.st_mode) &&
            !(o->has_src && (uint64_t)st.st_dev == o->src_dev && (uint64_t)st.st_ino == o->src_ino))
            (void)unlink(full);
        free(full);
    }
    closedir(d);
    free(dir);
}

int gguf_out_open(gguf_out *o, const char *path, const char *tmp_suffix, const gguf_file *src, char *err,
                  size_t err_len) {
    *o = (gguf_out){.path = path};
    o->has_src = src && !gguf_file_id(src, &o->src_dev, &o->src_ino);
    int e = check_target(path, o->has_src, o->src_dev, o->src_ino, err, err_len);
    if (e) return e;
    size_t n = strlen(path), m = strlen(tmp_suffix);
    o->tmp = malloc(n + m + 1);
    if (!o->tmp) return set_err(err, err_len, ENOMEM, "%s: out of memory", path);
    memcpy(o->tmp, path, n);
    memcpy(o->tmp + n, tmp_suffix, m + 1);
    remove_stale_tmp(o);
    /* The temporary name is ours: whatever sits there (a stale file of a dead
     * writer, a planted symlink) is removed, never followed or truncated.  It
     * must not be the input, nor a directory. */
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(o->tmp, flags, 0666);
    if (fd < 0 && errno == EEXIST) {
        struct stat st;
        if (!lstat(o->tmp, &st) && o->has_src && (uint64_t)st.st_dev == o->src_dev &&
            (uint64_t)st.st_ino == o->src_ino) {
            e = set_err(err, err_len, EEXIST, "%s: the temporary file name is the input file; write to another "
                        "path", o->tmp);
            free(o->tmp);
            o->tmp = NULL;
            return e;
        }
        if (unlink(o->tmp) == 0 || errno == ENOENT) fd = open(o->tmp, flags, 0666);
    }
    o->w.f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!o->w.f) {
        e = errno ? errno : EIO;
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        set_err(err, err_len, e, "%s: %s", o->tmp, strerror(e));
        free(o->tmp);
        o->tmp = NULL;
        return e;
    }
    return 0;
}

int gguf_out_close(gguf_out *o) {
    if (!o->w.f) return o->w.err;
    errno = 0;
    if (!o->w.err && fflush(o->w.f)) o->w.err = errno ? errno : EIO;
    if (!o->w.err && fsync(fileno(o->w.f))) o->w.err = errno ? errno : EIO;
    if (fclose(o->w.f) && !o->w.err) o->w.err = errno ? errno : EIO;
    o->w.f = NULL;
    return o->w.err;
}

/* fsync the directory holding path, so a rename into it is durable. */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = NULL;
    if (!slash) dir = strdup(".");
    else if (slash == path) dir = strdup("/");
    else dir = strndup(path, (size_t)(slash - path));
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

int gguf_out_commit(gguf_out *o, char *err, size_t err_len) {
    if (!o->tmp) return set_err(err, err_len, EINVAL, "%s: not open for writing", o->path);
    int e = gguf_out_close(o);
    if (e) {
        set_err(err, err_len, e, "%s: write failed: %s", o->path, strerror(e));
    } else if (!(e = check_target(o->path, o->has_src, o->src_dev, o->src_ino, err, err_len)) &&
               rename(o->tmp, o->path)) {
        e = errno ? errno : EIO;
        set_err(err, err_len, e, "rename %s -> %s: %s", o->tmp, o->path, strerror(e));
    }
    if (e) {
        gguf_out_abort(o);
        return e;
    }
    sync_dir(o->path);
    free(o->tmp);
    o->tmp = NULL;
    return 0;
}

void gguf_out_abort(gguf_out *o) {
    if (o->w.f) fclose(o->w.f);
    o->w.f = NULL;
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
}

/* ---- whole files ------------------------------------------------------------------ */

int gguf_write_model(const gguf_file *g, const char *path, char *err, size_t err_len) {
    gguf_out o;
    int rc = gguf_out_open(&o, path, ".partial", g, err, err_len);
    if (rc) {
        gguf_out_abort(&o);
        return rc;
    }
    uint32_t align = gguf_alignment(g);
    uint64_t n = gguf_n_tensors(g), off = 0;
    gguf_w_header(&o.w, g, n, NULL, NULL, NULL, 0);
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        gguf_w_tensor_info(&o.w, t->name, t->n_dims, t->ne, t->type, off);
        off = gguf_align_up(off + t->n_bytes, align);
    }
    gguf_w_pad(&o.w, align);
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        gguf_w_bytes(&o.w, t->data, (size_t)t->n_bytes);
        gguf_w_pad(&o.w, align);
    }
    if ((rc = gguf_out_close(&o))) {
        set_err(err, err_len, rc, "%s: %s", path, strerror(rc));
        gguf_out_abort(&o);
        return rc;
    }
    if ((rc = gguf_out_commit(&o, err, err_len))) gguf_out_abort(&o);
    return rc;
}
